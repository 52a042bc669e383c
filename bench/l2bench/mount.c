/*
 * kvfs_l2bench, through a kvfs mount: the mount helpers and the promotion
 * table (chunks evicted to L2 read back through the mount against O_DIRECT
 * pread of the same chunks stored raw; also after a restart).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "l2bench.h"

pid_t mount_kvfs(const char *bin, const char *mnt, const char *opts)
{
	struct stat before, st;
	pid_t pid;

	if (stat(mnt, &before))
		return -1;
	pid = fork();
	if (pid == 0) {
		execl(bin, bin, "-f", "-o", opts, mnt, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		int status;

		if (stat(mnt, &st) == 0 && st.st_dev != before.st_dev)
			return pid;
		if (waitpid(pid, &status, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return -1;
}

void umount_kvfs(const char *mnt, pid_t pid)
{
	char cmd[2200];

	snprintf(cmd, sizeof(cmd), "fusermount3 -u '%s' 2>/dev/null || "
		 "umount -l '%s'", mnt, mnt);
	if (system(cmd)) {
		/* already gone */
	}
	waitpid(pid, NULL, 0);
}

/* The number after "key": in /.kvfs/stats, from the object obj on (NULL:
 * from the start), or -1. */
long long mnt_stat(const char *mnt, const char *key, const char *obj)
{
	char p[1024], buf[16384], pat[64];
	const char *s = buf;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/.kvfs/stats", mnt);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (obj) {
		snprintf(pat, sizeof(pat), "\"%s\"", obj);
		if (!(s = strstr(buf, pat)))
			return -1;
	}
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = strstr(s, pat);
	return s ? strtoll(s + strlen(pat), NULL, 10) : -1;
}

void key_name(int i, char out[33])
{
	struct kvfs_key k = bkey(i);

	kvfs_key_hex(&k, out);
}

static void *mnt_reader(void *arg)
{
	struct mjob *j = arg;
	uint8_t *buf = malloc(j->chunk);

	for (int k = j->first; k < j->n; k += j->step) {
		int i = j->order ? j->order[k] : k;
		char name[33], p[1024];
		size_t got = 0;
		int fd;

		key_name(i, name);
		snprintf(p, sizeof(p), "%s/%s/%s", j->mnt,
			 j->ns ? j->ns : "bench.bf16", name);
		fd = open(p, O_RDONLY);
		if (fd < 0) {
			j->errors++;
			continue;
		}
		while (got < j->chunk) {
			ssize_t n = read(fd, buf + got, j->chunk - got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got != j->chunk || memcmp(buf, chunk_data(j->chunk, i), j->chunk))
			j->errors++;
		close(fd);
	}
	free(buf);
	return NULL;
}

/* One reader that, like an engine, asks for the next window of chunks
 * with a prefetching lookup before reading the current one: the daemon
 * promotes ahead of the reads. */
static double run_mnt_prefetch(struct mjob *j, int window)
{
	struct kvfs_key keys[64];
	double t0 = now_s();
	int nsfd = kvfs_ns_open(j->mnt, "bench.bf16", 0, 0);

	if (nsfd < 0) {
		j->errors++;
		return 1;
	}
	for (int w = 0; w < j->n; w += window) {
		for (int ahead = w == 0 ? 0 : window; ahead <= window; ahead += window) {
			int from = w + ahead, cnt = 0;

			for (int i = from; i < from + window && i < j->n; i++)
				keys[cnt++] = bkey(i);
			if (cnt && kvfs_lookup(nsfd, keys, (size_t)cnt, (uint32_t)from,
					       KVFS_LOOKUP_PREFETCH, 0, NULL) < 0)
				j->errors++;
		}
		{
			struct mjob one = *j;

			one.first = w;
			one.step = 1;
			one.n = w + window < j->n ? w + window : j->n;
			one.errors = 0;
			mnt_reader(&one);
			j->errors += one.errors;
		}
	}
	close(nsfd);
	return now_s() - t0;
}

double run_mnt_readers(struct mjob *tmpl, int nthr)
{
	pthread_t th[8];
	struct mjob j[8];
	double t0 = now_s();

	for (int t = 0; t < nthr; t++) {
		j[t] = *tmpl;
		j[t].first = t;
		j[t].step = nthr;
		pthread_create(&th[t], NULL, mnt_reader, &j[t]);
	}
	for (int t = 0; t < nthr; t++) {
		pthread_join(th[t], NULL);
		tmpl->errors += j[t].errors;
	}
	return now_s() - t0;
}

/* Chunks 0..n-1 stored raw, one file each, written with O_DIRECT (the
 * pread baseline's files). */
void write_raw(const char *rawdir, size_t chunk, int n)
{
	char p[1024];
	void *abuf;

	if (posix_memalign(&abuf, 4096, chunk))
		exit(1);
	for (int i = 0; i < n; i++) {
		int fd;

		memcpy(abuf, chunk_data(chunk, i), chunk);
		snprintf(p, sizeof(p), "%s/%d", rawdir, i);
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
		if (fd < 0 || write(fd, abuf, chunk) != (ssize_t)chunk)
			exit(1);
		close(fd);
	}
	free(abuf);
}

/* The median of v[0..n) (n odd) and its range. */
double median_of(const double *v, int n, double *lo, double *hi)
{
	double m = v[0];

	*lo = *hi = v[0];
	for (int k = 0; k < n; k++) {
		int below = 0;

		for (int q = 0; q < n; q++)
			below += v[q] < v[k];
		if (below == n / 2)
			m = v[k];
		*lo = v[k] < *lo ? v[k] : *lo;
		*hi = v[k] > *hi ? v[k] : *hi;
	}
	return m;
}

#define PM_ROUNDS 5 /* pread then the mount's reader, alternately */

/* TMP/NAME-l2, -mnt and -raw, made anew (what a killed run left is
 * removed, except the mount point: it may still be mounted). */
void bench_dirs(const char *tmp, const char *name, char l2dir[512],
		char mnt[512], char rawdir[512])
{
	snprintf(l2dir, 512, "%s/%s-l2", tmp, name);
	snprintf(mnt, 512, "%s/%s-mnt", tmp, name);
	snprintf(rawdir, 512, "%s/%s-raw", tmp, name);
	rm_rf(l2dir);
	rm_rf(rawdir);
	mkdir(l2dir, 0700);
	mkdir(mnt, 0700);
	mkdir(rawdir, 0700);
}

/* Writes chunks 0..n-1 into namespace ns of the mount (mkdir first). */
static int put_ns(const char *mnt, const char *ns, size_t chunk, int n)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s", mnt, ns);
	mkdir(p, 0755);
	for (int i = 0; i < n; i++) {
		char name[33];
		int fd;

		key_name(i, name);
		snprintf(p, sizeof(p), "%s/%s/%s", mnt, ns, name);
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0 || write(fd, chunk_data(chunk, i), chunk) !=
		    (ssize_t)chunk || close(fd)) {
			printf("mount write failed: %s\n", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* A clean unmount and a new mount with opts (a restart). */
static pid_t remount_kvfs(const char *bin, const char *mnt, pid_t pid,
			  const char *opts)
{
	umount_kvfs(mnt, pid);
	pid = mount_kvfs(bin, mnt, opts);
	if (pid < 0)
		printf("\n(mount promotion: cannot mount %s again: skipped)\n",
		       bin);
	return pid;
}

/* One table row: the round of the median ratio. */
static void pm_row(const char *what, int readers, size_t chunk, int nl2,
		   const double *raw, const double *ratio)
{
	double lo, hi, med = median_of(ratio, PM_ROUNDS, &lo, &hi);

	for (int k = 0; k < PM_ROUNDS; k++)
		if (ratio[k] == med) {
			printf("| O_DIRECT pread, raw files | %d | %.0f | 1.00x |\n",
			       readers, (double)chunk * nl2 / raw[k] / 1e6);
			printf("| kvfs mount, %s | %d | %.0f | %.2fx (%.2f-%.2f) |\n",
			       what, readers,
			       (double)chunk * nl2 / (raw[k] / med) / 1e6, med, lo,
			       hi);
			return;
		}
}

/*
 * Promotion through a kvfs mount, L1 a quarter of the data, ingest=all, no
 * parent links. Each round writes n new chunks into a namespace of its own
 * (twice: one for each mount below), unmounts cleanly and mounts again (a
 * restart: every chunk only in L2, none ever read), reads O_DIRECT the
 * same chunks stored raw in plain files on the same disk, then reads the
 * first three quarters of the namespace through the mount in the order
 * they were written (each a promotion: io_uring read, verify, decompress
 * into L1, FUSE read); the same again on a mount with readahead=0 (the
 * promotion alone). Then, without restarts, the first namespace is read
 * again, by one reader and by two, alternating with pread, and once with
 * KVFS_LOOKUP_PREFETCH. PM_ROUNDS rounds each; median round and range.
 */
void promotion_mount(const char *tmp, const char *bin, size_t chunk,
			    int n)
{
	char l2dir[512], mnt[512], rawdir[512], opts[1400], opts0[1500];
	double raw0[PM_ROUNDS], q0[PM_ROUNDS], rawz[PM_ROUNDS], qz[PM_ROUNDS];
	double raw1[PM_ROUNDS], q1[PM_ROUNDS], raw2[PM_ROUNDS], q2[PM_ROUNDS];
	double mp, rp, cpu = 0, wall = 0, dcpu = 0, med0;
	long long ra_prom = 0, ra_hits = 0, again_prom, again_hits;
	double load[3] = { 0 };
	struct rjob job = { 0 };
	struct mjob mj = { 0 };
	int nl2 = n * 3 / 4;
	char ns[2][32];
	pid_t pid;

	bench_dirs(tmp, "l2bench-m", l2dir, mnt, rawdir);
	snprintf(opts, sizeof(opts), "l1_size=%zu,max_chunk=%zu,l2_dir=%s,"
		 "l2_size=%zu,ingest=all", chunk * (size_t)(n / 4) + (1u << 20),
		 chunk, l2dir,
		 chunk * (size_t)n * (2 * PM_ROUNDS + 2) + (256u << 20));
	snprintf(opts0, sizeof(opts0), "%s,readahead=0", opts);
	pid = mount_kvfs(bin, mnt, opts);
	if (pid < 0) {
		printf("\n(mount promotion: cannot mount %s with %s: skipped)\n",
		       bin, opts);
		return;
	}
	write_raw(rawdir, chunk, nl2);
	job.rawdir = rawdir;
	job.chunk = chunk;
	job.n = nl2;
	job.direct_files = true;
	mj.mnt = mnt;
	mj.chunk = chunk;
	mj.n = nl2;
	for (int k = 0; k < PM_ROUNDS; k++) {
		for (int m = 0; m < 2; m++) {
			snprintf(ns[m], sizeof(ns[m]), "pm%d.%d.bf16", m, k);
			if (put_ns(mnt, ns[m], chunk, n))
				goto out;
		}
		for (int i = 0; i < 3000 && mnt_stat(mnt, "writes", "l2") <
		     2 * n; i++)
			usleep(10000);
		for (int m = 0; m < 2; m++) {
			double c0, d0, t;

			pid = remount_kvfs(bin, mnt, pid, m ? opts0 : opts);
			if (pid < 0)
				goto gone;
			mj.ns = ns[m];
			(m ? rawz : raw0)[k] = run_readers(raw_reader, &job, 1);
			d0 = proc_cpu_s(pid);
			c0 = d0 + proc_cpu_s(getpid());
			t = run_mnt_readers(&mj, 1);
			if (!m) {
				usleep(100000); /* the window past the reader */
				ra_prom += mnt_stat(mnt, "promotions", "readahead");
				ra_hits += mnt_stat(mnt, "hits", "readahead");
				dcpu += proc_cpu_s(pid) - d0;
				cpu += proc_cpu_s(pid) + proc_cpu_s(getpid()) - c0;
				wall += t;
			}
			(m ? qz : q0)[k] = (m ? rawz : raw0)[k] / t;
		}
		/* the next round writes with readahead on (the order of
		 * publication is learned by a mount that has it) */
		pid = remount_kvfs(bin, mnt, pid, opts);
		if (pid < 0)
			goto gone;
	}
	mj.ns = "pm0.0.bf16";
	for (int k = 0; k < PM_ROUNDS; k++) {
		raw1[k] = run_readers(raw_reader, &job, 1);
		q1[k] = raw1[k] / run_mnt_readers(&mj, 1);
	}
	again_prom = mnt_stat(mnt, "promotions", "readahead");
	again_hits = mnt_stat(mnt, "hits", "readahead");
	for (int k = 0; k < PM_ROUNDS; k++) {
		raw2[k] = run_readers(raw_reader, &job, 2);
		q2[k] = raw2[k] / run_mnt_readers(&mj, 2);
	}
	rp = run_readers(raw_reader, &job, 1);
	mj.ns = NULL; /* run_mnt_prefetch reads bench.bf16 */
	if (put_ns(mnt, "bench.bf16", chunk, n))
		goto out;
	for (int i = 0; i < 3000 && mnt_stat(mnt, "writes", "l2") < n; i++)
		usleep(10000);
	pid = remount_kvfs(bin, mnt, pid, opts);
	if (pid < 0)
		goto gone;
	mp = run_mnt_prefetch(&mj, 8);
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	printf("\n## L2 promotion through the mount (%d chunks of %zu KiB "
	       "read from L2, no parent links, ingest=all, L1 = a quarter of "
	       "the data; load average %.2f)\n\n", nl2, chunk >> 10, load[0]);
	printf("| read path | readers | MB/s | vs O_DIRECT pread (median of %d "
	       "alternating rounds; lowest-highest) |\n|---|---|---|---|\n",
	       PM_ROUNDS);
	pm_row("first read after a restart, in the order written", 1, chunk,
	       nl2, raw0, q0);
	pm_row("the same with readahead=0 (the promotion alone)", 1, chunk,
	       nl2, rawz, qz);
	pm_row("read again, no restart", 1, chunk, nl2, raw1, q1);
	pm_row("read again, no restart", 2, chunk, nl2, raw2, q2);
	printf("| kvfs mount, lookup(PREFETCH) 8 ahead, first read after a "
	       "restart | 1 | %.0f | %.2fx (one round) |\n",
	       (double)chunk * nl2 / mp / 1e6, rp / mp);
	printf("(first read after a restart: daemon + reader kept %.2f cores "
	       "busy, the daemon %.2f ms of CPU per chunk, %lld readahead "
	       "promotions, %lld read, of %d chunks; errors %d)\n",
	       wall > 0 ? cpu / wall : 0,
	       dcpu * 1e3 / ((double)nl2 * PM_ROUNDS), ra_prom, ra_hits,
	       nl2 * PM_ROUNDS, mj.errors + job.errors);
	printf("(read again, one reader: %lld readahead promotions, %lld "
	       "read, of %d chunks)\n", again_prom, again_hits, nl2 * PM_ROUNDS);
	med0 = median_of(q0, PM_ROUNDS, &(double){ 0 }, &(double){ 0 });
	printf("target: one reader after a restart, no prefetch >= 1.00x "
	       "O_DIRECT pread: %s (%.2fx)\n", med0 >= 1.0 ? "met" : "MISSED",
	       med0);
out:
	umount_kvfs(mnt, pid);
gone:
	rm_rf(l2dir);
	rm_rf(rawdir);
	rmdir(mnt);
}

/* CPU seconds (user + system) process pid used so far, or 0. */
double proc_cpu_s(pid_t pid)
{
	char p[64], buf[1024], *s;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	f = fopen(p, "r");
	if (!f)
		return 0;
	s = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* after the command: state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime */
	if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
