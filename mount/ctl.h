/*
 * ctl.h - kvfsctl subcommands, one file each (mount/ctl_*.c). Each takes
 * argc/argv starting at the subcommand and returns the exit status.
 *
 * The convention every subcommand follows (helpers in ctl_cli.c):
 *
 *  - main() hands over argv with argv[0] = "kvfsctl SUB", so getopt's own
 *    messages ("kvfsctl SUB: unrecognized option '--x'") name it.
 *  - Options are parsed by getopt_long over a static struct option table
 *    only, so `--opt V`, `--opt=V` and unique prefixes work everywhere;
 *    options may follow operands (GNU order) and `--` ends them. Every
 *    table has { "help", no_argument, NULL, 'h' } and "h" in its short
 *    options; short options otherwise only where a classic tool has one
 *    (top's -d, -n).
 *  - Each file has one `static const struct ctl_cmd CMD` (name, synopsis,
 *    option help). -h/--help: `return ctl_help(&CMD);` (stdout, exit 0).
 *  - A usage error (unknown option, bad option value, missing or extra
 *    operand): `return ctl_usage_err(&CMD, "why", ...);` prints
 *    "kvfsctl SUB: why", the synopsis and a "Try --help" line on stderr
 *    and returns 2 (fmt NULL after getopt's own message: case '?').
 *  - Runtime failures (I/O, the mount refusing) print "kvfsctl SUB: ..." on
 *    stderr and return 1.
 *  - A subcommand that prints data takes --json and builds its output with
 *    jansson, printed by ctl_json_out (one document; one a line when it
 *    streams). JSON input is read with jansson too, and a parse error
 *    names the line and column (json_error_t).
 */
#ifndef KVFS_CTL_H
#define KVFS_CTL_H

#include <stddef.h>

#include <jansson.h>

#include "kvfs.h"

int ctl_hash(int argc, char **argv);     /* ctl_hash.c */
int ctl_replay(int argc, char **argv);   /* ctl_replay.c */
int ctl_stats(int argc, char **argv);    /* ctl_stats.c */
int ctl_top(int argc, char **argv);      /* ctl_top.c */
int ctl_lookup(int argc, char **argv);   /* ctl_lookup.c: lookup */
int ctl_pin(int argc, char **argv);      /* ctl_lookup.c: pin */
int ctl_unpin(int argc, char **argv);    /* ctl_lookup.c: unpin */
int ctl_prefetch(int argc, char **argv); /* ctl_lookup.c: prefetch */
int ctl_l3(int argc, char **argv);       /* ctl_l3.c: l3 drop */
int ctl_events(int argc, char **argv);   /* ctl_events.c */
int ctl_score(int argc, char **argv);    /* ctl_score.c */

/* A subcommand's name, its synopsis (after "kvfsctl "), and the option
 * lines --help prints after it ("  --json   ...\n" each; may be NULL). */
struct ctl_cmd {
	const char *name;
	const char *synopsis;
	const char *help;
};

/* ctl_help - the usage and option help on stdout; returns 0 (the exit
 * status of --help). */
int ctl_help(const struct ctl_cmd *c);

/* ctl_usage_err - "kvfsctl NAME: <fmt>" (skipped when fmt is NULL), the
 * synopsis and a pointer to --help on stderr; returns 2 (the exit status
 * of a usage error). */
int ctl_usage_err(const struct ctl_cmd *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ctl_json_out - prints v (json_dumps flags: JSON_COMPACT, JSON_INDENT(n);
 * ASCII-escaped, key order kept) and a newline on stdout, and drops the
 * reference. Returns 0, or 1: after a message when v is NULL (out of
 * memory); a failed write is left on stdout's error flag, which main()
 * reports ("kvfsctl SUB: write error: ...", exit 1) for every command. */
int ctl_json_out(json_t *v, size_t flags);

/* ctl_json_str - a JSON string of s, a C string from outside (a path, a
 * topic off the network) that may not be UTF-8: as is when it is, else
 * with each byte >= 0x80 written as \xNN, so the key is never dropped (a
 * NULL from json_string() made json_object_set_new skip it). NULL only
 * when out of memory. */
json_t *ctl_json_str(const char *s);

/* Parses a size: decimal (or hex after 0x) with an optional K/M/G/T
 * suffix (powers of 1024). Returns 0 or -EINVAL. */
int ctl_parse_u64(const char *s, unsigned long long *out);
/* Parses a plain number (seeds, counts, ids): decimal, or hex after 0x;
 * no suffix. Returns 0 or -EINVAL. */
int ctl_parse_count(const char *s, unsigned long long *out);

/* ctl_read_file - the whole file at path ("-" = stdin), NUL-terminated,
 * malloc'd; NULL with *err an errno. ctl_read_file_len also gives its
 * length in *len (the file may hold NUL bytes). */
char *ctl_read_file(const char *path, int *err);
char *ctl_read_file_len(const char *path, int *err, size_t *len);

/* ctl_load_stats - the mount's .kvfs/stats (MNT/.kvfs/stats, or file when
 * not NULL: "-" = stdin) parsed by jansson, a JSON object (the caller
 * drops the reference). NULL after a message on stderr naming cmd and the
 * file: the errno, or for malformed JSON its line and column. */
json_t *ctl_load_stats(const char *cmd, const char *mnt, const char *file);

/* ctl_replay_check_line (ctl_replay.c) - parses one line of a replay trace
 * (len bytes, no NUL needed) as `kvfsctl replay` does: 0 with *nids its
 * hash ids, or -EINVAL with *why and the 1-based column *col. */
int ctl_replay_check_line(const char *line, size_t len, size_t *nids,
			  const char **why, size_t *col);

#endif
