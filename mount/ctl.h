/* ctl.h - kvfsctl subcommands, one file each (mount/ctl_*.c). Each takes
 * argc/argv starting at the subcommand name and returns the exit status. */
#ifndef KVFS_CTL_H
#define KVFS_CTL_H

#include <stddef.h>

int ctl_hash(int argc, char **argv);     /* ctl_hash.c */
int ctl_replay(int argc, char **argv);   /* ctl_replay.c */
int ctl_stats(int argc, char **argv);    /* ctl_stats.c */
int ctl_lookup(int argc, char **argv);   /* ctl_lookup.c: lookup */
int ctl_pin(int argc, char **argv);      /* ctl_lookup.c: pin */
int ctl_unpin(int argc, char **argv);    /* ctl_lookup.c: unpin */
int ctl_prefetch(int argc, char **argv); /* ctl_lookup.c: prefetch */
int ctl_l3(int argc, char **argv);       /* ctl_l3.c: l3 drop */
int ctl_events(int argc, char **argv);   /* ctl_events.c */
int ctl_score(int argc, char **argv);    /* ctl_score.c */

/* Parses a size: decimal (or hex after 0x) with an optional K/M/G/T
 * suffix (powers of 1024). Returns 0 or -EINVAL. */
int ctl_parse_u64(const char *s, unsigned long long *out);
/* Parses a plain number (seeds, counts, ids): decimal, or hex after 0x;
 * no suffix. Returns 0 or -EINVAL. */
int ctl_parse_count(const char *s, unsigned long long *out);

/* ctl_replay_check_line (ctl_replay.c) - parses one line of a replay trace
 * (len bytes, no NUL needed) as `kvfsctl replay` does: 0 with *nids its
 * hash ids, or -EINVAL with *why and the 1-based column *col. */
int ctl_replay_check_line(const char *line, size_t len, size_t *nids,
			  const char **why, size_t *col);

#endif
