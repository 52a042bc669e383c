/*
 * kvfs_test.h - helpers shared by the integration tests: mount a real kvfs on
 * a fresh temporary directory, unmount it with a deadline, and never leave a
 * stale mount behind (an atexit hook and fatal-signal handlers lazily
 * unmount whatever is still mounted and kill its daemon).
 *
 * The daemon is $KVFS_MOUNT_BIN (default build/asan/kvfs-mount, relative to
 * the current directory), started in the foreground (-f) so the test owns
 * its pid. Helpers print why they failed to stderr.
 */
#ifndef KVFS_TEST_H
#define KVFS_TEST_H

#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct kvfs_mnt {
	pid_t pid;          /* the daemon (kvfs-mount -f) */
	char dir[PATH_MAX]; /* the mount point */
	int slot;           /* index in the safety net, -1 when unmounted */
};

/* Seconds a mount or an unmount may take (ASan startup included). */
#define KVFS_TEST_DEADLINE 30

/* kvfs_test_bin - the kvfs-mount binary the tests run. */
const char *kvfs_test_bin(void);

/*
 * kvfs_test_mount - mktemp -d, start `kvfs-mount -f -o opts DIR` (opts may
 * be NULL or "") and wait until DIR is a mount (st_dev changed) or the
 * deadline passes or the daemon exits. Returns 0, or -1 (nothing mounted,
 * daemon reaped, directory removed).
 */
int kvfs_test_mount(struct kvfs_mnt *m, const char *opts);

/*
 * kvfs_test_mount_args - as kvfs_test_mount with a full argument vector after
 * the binary name, where the string "@DIR@" is replaced by the mount point.
 */
int kvfs_test_mount_args(struct kvfs_mnt *m, const char *const *args);

/*
 * kvfs_test_umount - fusermount3 -u (then a lazy unmount if that fails),
 * and wait for the daemon with the deadline. Returns the daemon's exit
 * status (0 = clean), or -1 when it outlived the unmount (it is then
 * killed) or was killed by a signal. Removes the directory.
 */
int kvfs_test_umount(struct kvfs_mnt *m);

/*
 * kvfs_test_wait_exit - waits (with the deadline) for the daemon to exit on
 * its own (e.g. after SIGTERM) and checks nothing is mounted any more.
 * Returns the exit status or -1. Removes the directory.
 */
int kvfs_test_wait_exit(struct kvfs_mnt *m);

/* kvfs_test_is_mounted - 1 if dir is a mount point in /proc/self/mountinfo. */
int kvfs_test_is_mounted(const char *dir);

/*
 * kvfs_test_run - runs argv (argv[0] a path, or a name looked up in PATH)
 * to completion with the deadline,
 * capturing stdout and stderr together into out (NUL-terminated, truncated
 * to outlen). Returns the exit status, 128 + signal, or -1.
 */
int kvfs_test_run(const char *const *argv, char *out, size_t outlen);

/* kvfs_test_path - snprintf of "%s/" fmt under the mount (static buffer per
 * call is avoided: writes into buf of PATH_MAX bytes and returns it). */
char *kvfs_test_path(const struct kvfs_mnt *m, char *buf, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* kvfs_test_fill - deterministic bytes: buf[i] depends on (seed, off + i). */
void kvfs_test_fill(void *buf, size_t len, uint64_t seed, uint64_t off);

/* kvfs_test_check - 0 when buf equals kvfs_test_fill(seed, off); else
 * prints the first mismatch and returns -1. */
int kvfs_test_check(const void *buf, size_t len, uint64_t seed, uint64_t off);

/* kvfs_test_key_name - the 32-hex name of a test key derived from n. */
void kvfs_test_key_name(uint64_t n, char out[33]);

/*
 * kvfs_test_write_file - creates path (O_CREAT|O_EXCL|O_WRONLY), writes len
 * bytes of kvfs_test_fill(seed) in pieces of `piece` bytes (0 = one write),
 * closes. Returns 0 or -errno (of the first failing call, close included).
 */
int kvfs_test_write_file(const char *path, size_t len, uint64_t seed,
			 size_t piece);

/* kvfs_test_write_all - write(2)s all len bytes at buf to fd: 0, or -1
 * (errno set; a write that wrote nothing sets none: check the file). */
int kvfs_test_write_all(int fd, const void *buf, size_t len);

/* kvfs_test_read_check - reads the whole file and compares with
 * kvfs_test_fill(seed); also checks that it has exactly len bytes. 0, or
 * -errno, or -EILSEQ on a mismatch. */
int kvfs_test_read_check(const char *path, size_t len, uint64_t seed);

/* kvfs_test_mix64 - a 64-bit finalizer (splitmix): deterministic names and
 * sizes from small numbers. */
uint64_t kvfs_test_mix64(uint64_t x);

/* kvfs_test_stat - the number after "key": in /.kvfs/stats, searched from
 * the object "obj" on (NULL: from the start), or -1. */
long long kvfs_test_stat(const struct kvfs_mnt *m, const char *obj,
			 const char *key);

/* kvfs_test_sleep_ms / kvfs_test_now_ms - a nap; CLOCK_MONOTONIC in ms. */
void kvfs_test_sleep_ms(int ms);
double kvfs_test_now_ms(void);

/* kvfs_test_slurp - the whole file, malloc'd and NUL-terminated (*len
 * its length, len may be NULL), read to EOF; NULL (errno set) on failure. */
char *kvfs_test_slurp(const char *path, size_t *len);

/* kvfs_test_metric - the value of the Prometheus sample whose name and
 * labels are exactly `sample` (e.g. kvfs_chunks{tier="l1"}) in the
 * metrics text, or -1 when there is none. */
long long kvfs_test_metric(const char *text, const char *sample);

/* kvfs_test_undocumented - the first metric family (a "# TYPE" line of
 * the metrics text) that man/kvfs.7 (read from the current directory,
 * the repository's root) does not name, malloc'd; NULL when all are. */
char *kvfs_test_undocumented(const char *text);

/* kvfs_test_count - how many times needle occurs in hay (overlaps too). */
int kvfs_test_count(const char *hay, const char *needle);

/* kvfs_test_rm_files - unlinks every file of dir but dot files (an l2_dir
 * between tests; dir itself stays). */
void kvfs_test_rm_files(const char *dir);

/* kvfs_test_l2_damage - flips a byte inside the payload of every record
 * of key kvfs_test_key_name(n) in the L2 log in l2dir (segment files);
 * the number of records damaged, or -1. */
int kvfs_test_l2_damage(const char *l2dir, uint64_t n);

/* kvfs_test_huge_kb - AnonHugePages (kB) of this process's mapping that
 * holds addr, or -1 when /proc/self/smaps has no such mapping. */
long kvfs_test_huge_kb(const void *addr);

/* kvfs_test_thp_on - whether the kernel gives anonymous memory huge pages
 * on madvise and compacts for them at the fault (transparent_hugepage/
 * enabled always or madvise; defrag always, defer+madvise or madvise):
 * where a test may expect AnonHugePages. */
bool kvfs_test_thp_on(void);

#endif /* KVFS_TEST_H */
