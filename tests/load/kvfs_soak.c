/*
 * kvfs_soak - the soak (`make soak`): the mixed load of kvfs_load.c on one
 * kvfs (l1_size=128M, L2 on, a key space many times larger than both, so
 * eviction, L2 ingest, reclaim and promotion never stop) for SOAK_SECONDS
 * (default 600). Every SOAK_INTERVAL seconds (default 30) it prints the
 * interval's throughput, p50/p99 latency per operation, and the daemon's
 * RSS and open fds. Fails (exit 1) when any byte read was wrong, or the
 * daemon's RSS grew more than 5% over the second half of the run: its
 * largest RSS in the second half against its largest in the first (RSS is
 * sampled every second; the L2 queues fill and drain, so single samples
 * swing by tens of MB and only peaks compare).
 *
 * The daemon is $KVFS_MOUNT_BIN (`make soak` runs the plain build: ASan's
 * quarantine would be measured as growth).
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/kvfs_test.h"
#include "tests/load/kvfs_load.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(pid_t pid)
{
	char p[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int nfds(pid_t pid)
{
	char p[64];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	d = opendir(p);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);

	return s && *s ? atol(s) : def;
}

int main(void)
{
	long secs = env_long("SOAK_SECONDS", 600);
	long every = env_long("SOAK_INTERVAL", 30);
	char l2dir[] = "/var/tmp/kvfs-soak-XXXXXX", opts[4400];
	struct load_cfg c = {
		.nns = 4, .nids = 2000, .min_len = 16 * 1024,
		.max_len = 1024 * 1024, .writers = 4, .readers = 4,
		.seed = (unsigned int)time(NULL),
	};
	static struct load l;
	static uint64_t prev[LOP_N][LOAD_HBUCKETS];
	static struct load_hist diff;
	uint64_t prev_ops[LOP_N] = { 0 }, prev_w = 0, prev_r = 0;
	struct kvfs_mnt m;
	long rss_half = -1, rss_max1 = 0, rss_max2 = 0, rss;
	bool gone = false;
	double t0, last, half;
	int rc;

	if (secs < 2 * every)
		every = secs / 2 > 0 ? secs / 2 : 1;
	if (!mkdtemp(l2dir)) {
		perror("kvfs_soak: mkdtemp");
		return 1;
	}
	snprintf(opts, sizeof(opts), "l1_size=128M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=512M,ingest=all", l2dir);
	if (kvfs_test_mount(&m, opts)) {
		rmdir(l2dir);
		return 1;
	}
	if (load_init(&l, &c) || (rc = load_start(&l, m.dir))) {
		fprintf(stderr, "kvfs_soak: cannot start the load\n");
		kvfs_test_umount(&m);
		return 1;
	}
	printf("kvfs_soak: %ld s, %d writers + %d readers, daemon %s pid %d\n",
	       secs, c.writers, c.readers, kvfs_test_bin(), (int)m.pid);
	printf("%6s %8s %8s %6s", "t_s", "wr_MB/s", "rd_MB/s", "wrong");
	for (int i = 0; i < LOP_N; i++)
		printf(" %7s/s %6s_p50 %6s_p99", load_op_names[i],
		       load_op_names[i], load_op_names[i]);
	printf(" %8s %4s\n", "rss_MB", "fds");
	t0 = last = now_s();
	half = t0 + (double)secs / 2;
	while (now_s() - t0 < (double)secs) {
		double t, dt;
		uint64_t w, r;

		sleep(1);
		t = now_s();
		rss = rss_kb(m.pid);
		if (rss < 0) {
			fprintf(stderr, "kvfs_soak: the daemon is gone\n");
			gone = true;
			break;
		}
		if (rss_half < 0 && t >= half)
			rss_half = rss;
		if (rss_half < 0 && rss > rss_max1)
			rss_max1 = rss;
		if (rss_half >= 0 && rss > rss_max2)
			rss_max2 = rss;
		if (t - last < (double)every && t - t0 < (double)secs)
			continue;
		dt = t - last;
		last = t;
		w = atomic_load(&l.bytes_written);
		r = atomic_load(&l.bytes_read);
		printf("%6.0f %8.1f %8.1f %6llu", t - t0,
		       (double)(w - prev_w) / dt / 1e6,
		       (double)(r - prev_r) / dt / 1e6,
		       (unsigned long long)atomic_load(&l.wrong));
		prev_w = w;
		prev_r = r;
		for (int i = 0; i < LOP_N; i++) {
			uint64_t ops = atomic_load(&l.ops[i]);

			for (int b = 0; b < LOAD_HBUCKETS; b++) {
				uint64_t v = atomic_load(&l.lat[i].b[b]);

				atomic_store(&diff.b[b], v - prev[i][b]);
				prev[i][b] = v;
			}
			printf(" %9.0f %8.0fus %8.0fus",
			       (double)(ops - prev_ops[i]) / dt,
			       load_hist_pct(&diff, 50), load_hist_pct(&diff, 99));
			prev_ops[i] = ops;
		}
		printf(" %8.1f %4d\n", (double)rss / 1024, nfds(m.pid));
		fflush(stdout);
	}
	load_stop(&l);
	rc = 0;
	printf("kvfs_soak: verified %llu chunks, %llu misses, wrong bytes %llu, "
	       "errors", (unsigned long long)atomic_load(&l.verified),
	       (unsigned long long)atomic_load(&l.misses),
	       (unsigned long long)atomic_load(&l.wrong));
	for (int i = 0; i < LOP_N; i++)
		printf(" %s=%llu", load_op_names[i],
		       (unsigned long long)atomic_load(&l.errs[i]));
	printf("\nkvfs_soak: daemon RSS: largest in the first half %.1f MB, at "
	       "half-time %.1f MB, largest in the second half %.1f MB (%+.1f%%)"
	       "\n", (double)rss_max1 / 1024, (double)rss_half / 1024,
	       (double)rss_max2 / 1024,
	       rss_max1 > 0 ? 100.0 * (double)(rss_max2 - rss_max1) /
			      (double)rss_max1 : 0.0);
	if (gone) {
		printf("kvfs_soak: FAILED: the daemon exited under load\n");
		rc = 1;
	}
	if (atomic_load(&l.wrong)) {
		printf("kvfs_soak: FAILED: wrong bytes were read\n");
		rc = 1;
	}
	if (rss_max1 <= 0 || (double)rss_max2 > 1.05 * (double)rss_max1) {
		printf("kvfs_soak: FAILED: RSS grew more than 5%% over the "
		       "second half\n");
		rc = 1;
	}
	if (kvfs_test_umount(&m) != 0) {
		printf("kvfs_soak: FAILED: unclean unmount\n");
		rc = 1;
	}
	load_free(&l);
	{
		DIR *d = opendir(l2dir);
		struct dirent *de;
		char p[4400];

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.' || strlen(de->d_name) > 2) {
				snprintf(p, sizeof(p), "%s/%s", l2dir, de->d_name);
				unlink(p);
			}
		if (d)
			closedir(d);
		rmdir(l2dir);
	}
	return rc;
}
