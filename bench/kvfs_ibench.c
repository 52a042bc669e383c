/*
 * kvfs_ibench - what the engine interface saves (a report, not a test):
 *   1. learning the cached prefix of a 1024-chunk chain: batched lookup
 *      (2 ioctls of 512 keys) against 1024 fstatat() calls;
 *   2. the common prefix of 8 tensor-parallel ranks: one group lookup
 *      against 8 separate batched lookups (384 keys each);
 *   3. the same with PIN + unpin (what an engine does before reading).
 *
 * usage: kvfs_ibench [-m KVFS_MOUNT] [-i ITERS] [MOUNTPOINT]
 * With MOUNTPOINT, uses that mounted kvfs; otherwise mounts one on a
 * temporary directory with KVFS_MOUNT (default: kvfs-mount next to this
 * binary's build directory, or $KVFS_MOUNT_BIN) and unmounts at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"

#define CHAIN 1024
#define RANKS 8
#define GKEYS KVFS_GROUP_KEYS_MAX
#define CHUNK 4096
#define COLD 5 /* chains never stat()ed before */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static pid_t daemon_pid;
static char tmpdir[PATH_MAX];

static int do_mount(const char *bin)
{
	const char *tmp = getenv("TMPDIR");
	struct stat before, st;
	double end;

	if (access(bin, X_OK) != 0) {
		printf("kvfs_ibench: skipped: %s is not built\n", bin);
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/kvfs-ibench.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmpdir) || stat(tmpdir, &before) < 0) {
		perror("kvfs_ibench: mkdtemp");
		return -1;
	}
	daemon_pid = fork();
	if (daemon_pid == 0) {
		execl(bin, bin, "-f", "-o", "l1_size=256M", tmpdir, (char *)NULL);
		fprintf(stderr, "kvfs_ibench: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	end = now() + 30;
	while (now() < end) {
		int status;

		if (waitpid(daemon_pid, &status, WNOHANG) == daemon_pid) {
			fprintf(stderr, "kvfs_ibench: %s exited\n", bin);
			rmdir(tmpdir);
			return -1;
		}
		if (stat(tmpdir, &st) == 0 && st.st_dev != before.st_dev)
			return 0;
		usleep(5000);
	}
	fprintf(stderr, "kvfs_ibench: mount timed out\n");
	kill(daemon_pid, SIGKILL);
	waitpid(daemon_pid, NULL, 0);
	rmdir(tmpdir);
	return -1;
}

static void do_umount(void)
{
	pid_t p;

	if (!daemon_pid)
		return;
	p = fork();
	if (p == 0) {
		execlp("fusermount3", "fusermount3", "-u", tmpdir, (char *)NULL);
		_exit(127);
	}
	waitpid(p, NULL, 0);
	waitpid(daemon_pid, NULL, 0);
	rmdir(tmpdir);
	daemon_pid = 0;
}

static void fill_chain(struct kvfs_key *keys, size_t n, uint64_t seed)
{
	uint32_t tok[16];

	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < 16; j++)
			tok[j] = (uint32_t)(i * 16 + j);
		kvfs_key_chunk(i ? &keys[i - 1] : NULL, seed, NULL, 0, tok, 16,
			       &keys[i]);
	}
}

static int put_all(int fd, const struct kvfs_key *keys, size_t n,
		   const char *buf)
{
	for (size_t i = 0; i < n; i++) {
		int rc = kvfs_put(fd, &keys[i], buf, CHUNK);

		if (rc && rc != -EEXIST) {
			fprintf(stderr, "kvfs_ibench: put: %s\n", strerror(-rc));
			return -1;
		}
	}
	return 0;
}

/* The stat() way: stat key after key until the first miss. */
static long stat_prefix(int fd, const struct kvfs_key *keys, size_t n)
{
	char name[KVFS_KEY_HEX_LEN + 1];
	struct stat st;
	size_t i;

	for (i = 0; i < n; i++) {
		kvfs_key_hex(&keys[i], name);
		if (fstatat(fd, name, &st, 0) < 0)
			break;
	}
	return (long)i;
}

int main(int argc, char **argv)
{
	const char *mnt = NULL, *bin = getenv("KVFS_MOUNT_BIN");
	char binbuf[PATH_MAX + 32], ns[RANKS][32];
	const char *names[RANKS];
	static struct kvfs_key keys[CHAIN];
	struct kvfs_key *cold = NULL;
	struct kvfs_result res;
	int iters = 50, opt, fds[RANKS], rc = 1;
	double *t = NULL, t_stat, t_stat1, t_batch, t_group, t_sep, t_gpin, t_sep_pin;
	char *buf = calloc(1, CHUNK);

	while ((opt = getopt(argc, argv, "m:i:")) != -1) {
		if (opt == 'm')
			bin = optarg;
		else if (opt == 'i' && atoi(optarg) > 0)
			iters = atoi(optarg);
		else {
			fprintf(stderr, "usage: kvfs_ibench [-m KVFS_MOUNT] [-i ITERS] [MOUNTPOINT]\n");
			return 2;
		}
	}
	if (optind < argc)
		mnt = argv[optind];
	for (int r = 0; r < RANKS; r++)
		fds[r] = -1;
	t = calloc((size_t)iters, sizeof(*t));
	if (!t || !buf)
		return 1;
	if (!mnt) {
		if (!bin) {
			/* build/bench/kvfs_ibench -> build/kvfs-mount */
			char self[PATH_MAX];
			ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

			if (n <= 0)
				return 1;
			self[n] = '\0';
			*strrchr(self, '/') = '\0';
			snprintf(binbuf, sizeof(binbuf), "%s/../kvfs-mount", self);
			bin = binbuf;
		}
		rc = do_mount(bin);
		if (rc)
			return rc == 77 ? 77 : 1;
		mnt = tmpdir;
	}

	fill_chain(keys, CHAIN, 0x1b);
	for (int r = 0; r < RANKS; r++) {
		snprintf(ns[r], sizeof(ns[r]), "ibench.tp8.r%d", r);
		names[r] = ns[r];
		fds[r] = kvfs_ns_open(mnt, ns[r], KVFS_NS_CREATE, 0755);
		if (fds[r] < 0) {
			fprintf(stderr, "kvfs_ibench: %s/%s: %s\n", mnt, ns[r],
				strerror(-fds[r]));
			goto out;
		}
		if (put_all(fds[r], keys, r ? GKEYS : CHAIN, buf))
			goto out;
	}
	/* Cold chains for stat: no dentry of theirs is in the kernel's
	 * cache yet (their writer used temporary names), so every fstatat is a
	 * FUSE LOOKUP round trip, as for an engine that has not seen the
	 * prompt before. */
	cold = malloc(COLD * CHAIN * sizeof(*cold));
	if (!cold)
		goto out;
	for (int c = 0; c < COLD; c++) {
		fill_chain(cold + c * CHAIN, CHAIN, 0x100 + (uint64_t)c);
		if (put_all(fds[0], cold + c * CHAIN, CHAIN, buf))
			goto out;
	}
	{
		double tc[COLD];

		for (int c = 0; c < COLD; c++) {
			double t0 = now();
			long n = stat_prefix(fds[0], cold + c * CHAIN, CHAIN);

			tc[c] = now() - t0;
			if (n != CHAIN) {
				fprintf(stderr, "kvfs_ibench: stat found %ld\n", n);
				goto out;
			}
		}
		t_stat1 = median(tc, COLD);
	}

	/* 1. the cached prefix of a 1024-chunk chain */
	for (int i = 0; i < iters; i++) {
		double t0 = now();
		long n = stat_prefix(fds[0], keys, CHAIN);

		t[i] = now() - t0;
		if (n != CHAIN) {
			fprintf(stderr, "kvfs_ibench: stat found %ld\n", n);
			goto out;
		}
	}
	t_stat = median(t, iters);
	for (int i = 0; i < iters; i++) {
		double t0 = now();
		long n = kvfs_lookup(fds[0], keys, CHAIN, 0, 0, 0, &res);

		t[i] = now() - t0;
		if (n != CHAIN) {
			fprintf(stderr, "kvfs_ibench: lookup found %ld\n", n);
			goto out;
		}
	}
	t_batch = median(t, iters);

	/* 2. 8 ranks, 384 keys each */
	for (int i = 0; i < iters; i++) {
		double t0 = now();
		long n = kvfs_group_lookup(fds[0], names, RANKS, keys, GKEYS, 0,
					   0, &res);

		t[i] = now() - t0;
		if (n != GKEYS) {
			fprintf(stderr, "kvfs_ibench: group found %ld\n", n);
			goto out;
		}
	}
	t_group = median(t, iters);
	for (int i = 0; i < iters; i++) {
		double t0 = now();
		long m = GKEYS;

		for (int r = 0; r < RANKS; r++) {
			long n = kvfs_lookup(fds[r], keys, GKEYS, 0, 0, 0, &res);

			if (n < m)
				m = n;
		}
		t[i] = now() - t0;
		if (m != GKEYS)
			goto out;
	}
	t_sep = median(t, iters);

	/* 3. with PIN, then unpin */
	for (int i = 0; i < iters; i++) {
		double t0 = now();

		if (kvfs_group_lookup(fds[0], names, RANKS, keys, GKEYS,
				      KVFS_LOOKUP_PIN, 0, &res) != GKEYS)
			goto out;
		kvfs_release(fds[0], &res);
		t[i] = now() - t0;
	}
	t_gpin = median(t, iters);
	for (int i = 0; i < iters; i++) {
		struct kvfs_result rr[RANKS];
		double t0 = now();

		for (int r = 0; r < RANKS; r++)
			if (kvfs_lookup(fds[r], keys, GKEYS, 0, KVFS_LOOKUP_PIN,
					0, &rr[r]) != GKEYS)
				goto out;
		for (int r = 0; r < RANKS; r++)
			kvfs_release(fds[r], &rr[r]);
		t[i] = now() - t0;
	}
	t_sep_pin = median(t, iters);

	printf("kvfs_ibench (median of %d runs, cold: of %d chains; %s)\n",
	       iters, COLD, mnt);
	printf("  warm = the kernel's dentry cache answers repeated stat()s\n");
	printf("  %-46s %10.1f us\n", "1024-chunk prefix, 1024 x fstatat(), cold",
	       t_stat1 * 1e6);
	printf("  %-46s %10.1f us\n", "1024-chunk prefix, 1024 x fstatat(), warm",
	       t_stat * 1e6);
	printf("  %-46s %10.1f us   %.0fx / %.1fx faster (cold / warm)\n",
	       "1024-chunk prefix, batched lookup (2 x 512)", t_batch * 1e6,
	       t_stat1 / t_batch, t_stat / t_batch);
	printf("  %-46s %10.1f us\n", "8 ranks x 384 keys, 8 separate lookups",
	       t_sep * 1e6);
	printf("  %-46s %10.1f us   %.1fx faster\n",
	       "8 ranks x 384 keys, one group lookup", t_group * 1e6,
	       t_sep / t_group);
	printf("  %-46s %10.1f us\n", "  with PIN + unpin, 8 separate", t_sep_pin * 1e6);
	printf("  %-46s %10.1f us   %.1fx faster\n", "  with PIN + unpin, one group",
	       t_gpin * 1e6, t_sep_pin / t_gpin);
	rc = 0;
out:
	for (int r = 0; r < RANKS; r++)
		if (fds[r] >= 0)
			close(fds[r]);
	do_umount();
	free(cold);
	free(t);
	free(buf);
	return rc;
}
