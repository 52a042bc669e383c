/*
 * kvfs_l2bench's parts (bench/kvfs_l2bench.c: codec, promotion from the
 * log, recovery, main; l2bench/mount.c: promotion through a mount;
 * l2bench/readahead.c: chain readahead through a mount): what they share.
 */
#ifndef KVFS_L2BENCH_H
#define KVFS_L2BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvfs.h"

#define NTPL 16 /* pre-generated chunk templates */

/* One promotion reader's share: chunks first, first + step, ... (n). */
struct rjob {
	struct l2 *l2;
	struct l2_loc *locs;
	const char *rawdir;
	size_t chunk;
	int first, step, n;
	int errors;
	bool direct_files;
};

/* One reader through the mount. */
struct mjob {
	const char *mnt;
	const char *ns;     /* NULL: bench.bf16 */
	const int *order;   /* chunks to read (first, step, n index it), or
			     * NULL: chunk i itself */
	size_t chunk;
	int first, step, n;
	int errors;
};

/* kvfs_l2bench.c */
double now_s(void);
uint64_t rng_next(uint64_t *s);
const uint8_t *chunk_data(size_t chunk, int i);
struct kvfs_key bkey(int i);
void *raw_reader(void *arg);
double run_readers(void *(*fn)(void *), struct rjob *tmpl, int nthr);
int rm_rf(const char *path);

/* l2bench/mount.c */
pid_t mount_kvfs(const char *bin, const char *mnt, const char *opts);
void umount_kvfs(const char *mnt, pid_t pid);
long long mnt_stat(const char *mnt, const char *key, const char *obj);
void key_name(int i, char out[33]);
double run_mnt_readers(struct mjob *tmpl, int nthr);
void bench_dirs(const char *tmp, const char *name, char l2dir[512],
		char mnt[512], char rawdir[512]);
void write_raw(const char *rawdir, size_t chunk, int n);
double median_of(const double *v, int n, double *lo, double *hi);
double proc_cpu_s(pid_t pid);
void promotion_mount(const char *tmp, const char *bin, size_t chunk, int n);

/* l2bench/readahead.c */
void readahead_mount(const char *tmp, const char *bin, size_t chunk, int n);

#endif
