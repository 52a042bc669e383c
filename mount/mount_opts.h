/*
 * mount_opts.h - kvfs-mount's options: the -o table, their parsing and
 * checks, and the engine and filesystem configurations built from them
 * (mount_opts.c). kvfs_mount.c owns the daemon's life (fork, mount,
 * serve); kvfs-mount(8) documents every option.
 */
#ifndef KVFS_MOUNT_OPTS_H
#define KVFS_MOUNT_OPTS_H

#include <stdint.h>
#include <stdio.h>

#define FUSE_USE_VERSION 314
#include <fuse_opt.h>

#include "fs/fs.h"
#include "mount/mount_events.h"
#include "mount/mount_http.h"
#include "tier/tier.h"

/* What kvfs-mount was given, as strings until mopts_build checks them. */
struct mopts {
	char *l1_size, *policy, *max_chunk, *seed, *cache, *pt_mem, *lease_ms;
	char *l1;
	char *l2_dir, *l2_size, *compress, *shuffle, *ingest, *hot_hits;
	char *l2_checkpoint_s;
	char *l2_policy, *flush_on_exit, *tmp_timeout, *max_read;
	char *write_wait_ms;
	/* L3 */
	char *l3, *l3_cluster, *l3_auth_file, *l3_ingest, *l3_timeout_ms;
	char *l3_prefix, *l3_user, *l3_write_timeout_ms;
	char *names, *max_dirs;  /* path namespaces */
	char *metrics_http, *ctl_mode, *ctl_gid; /* operators' access */
	struct mount_http_addr http; /* metrics_http, parsed */
	char *readahead;         /* chain readahead window (chunks) */
	char *wait_max, *wait_max_uid, *wait_recheck_ms, *l3_notify;
	char *fuse_uring;        /* off, auto, on (mount/mount_uring.h) */
	int foreground, debug, help, version;
	int overmount;           /* may mount over an existing kvfs mount */
	int atime;               /* enum fs_atime */
	int mount_form;          /* invoked as mount.kvfs / with SOURCE */
	int fake;                /* mount(8) -f */
	char *args[2];           /* non-options: [SOURCE] MOUNTPOINT */
	int nargs;
	int bad;
	char fuse_opts[1024];    /* options passed through to libfuse */
	struct mount_events_opts ev; /* KV events (mount_events.c) */
	struct ev_config evc;
};

/* mopts_parse - runs the -o table over args into o (zeroed by the
 * caller); -1 on a libfuse error, o->bad set on a bad option. */
int mopts_parse(struct fuse_args *args, struct mopts *o);
/* mopts_build - checks every option and fills the engine's and the
 * filesystem's configuration; 0, or -1 after printing why to stderr. */
int mopts_build(struct mopts *o, struct tier_config *tc,
		struct fs_config *fc);
/* mopts_usage - kvfs-mount's --help text. */
void mopts_usage(FILE *f, const char *prog);
/* mopts_forget_secrets - wipes the L3 password read from l3_auth_file
 * (once the engine holds its own copy). */
void mopts_forget_secrets(void);
/* mopts_free - frees the strings of o. */
void mopts_free(struct mopts *o);
/* A size with an optional K/M/G/T suffix, or a number up to max; 0, or
 * -1 after printing "kvfs-mount: bad NAME ..." (exported for the fuzzer). */
int mopts_parse_size(const char *name, const char *s, uint64_t *out);
int mopts_parse_num(const char *name, const char *s, uint64_t max,
		    uint64_t *out);

#endif
