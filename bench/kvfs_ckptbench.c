/*
 * kvfs_ckptbench - warm restart of L2 (a report, not a test): the time
 * l2_open (the L2 part of a mount: everything before the engine serves)
 * takes on the same log, three ways, in one run:
 *
 *   clean    after l2_close: the checkpoint of the index is loaded, no
 *            record is read;
 *   crash    after a SIGKILL of a process that opened the log and wrote
 *            --tail-mib more (no checkpoint for those): checkpoint + a
 *            scan of the segments written since;
 *   scan     l2.ckpt removed: today's full scan (every header and payload
 *            checksummed) - the baseline the others are compared with.
 *
 * Two logs: large records (--gb GB of 2 MiB chunks stored raw) and small
 * ones (--records N chunks of 2 KiB, one 4 KiB block each). Before every
 * open the log's files are dropped from the page cache (fadvise
 * DONTNEED, ours only: the machine is shared), so each open reads from
 * the disk. Files go under $TMPDIR (default /var/tmp) and are removed.
 *
 *   kvfs_ckptbench [--gb G] [--records N] [--tail-mib M]
 *   (make bench runs --gb 1 --records 200000; the target run is
 *   --gb 8 --records 2000000)
 */
#include <dirent.h>
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
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "tier/l2/l2.h"
#include "tier/record/record.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t recovered;

static int on_recover(void *arg, const struct l2_rec_info *r)
{
	(void)arg;
	(void)r;
	recovered++;
	return 0;
}

static enum l2_reclaim_verdict on_reclaim(void *arg,
					  const struct l2_rec_info *r,
					  bool may_keep)
{
	(void)arg;
	(void)r;
	(void)may_keep;
	return L2_DROP;
}

static bool on_moved(void *arg, const struct l2_rec_info *r,
		     const struct l2_loc *to)
{
	(void)arg;
	(void)r;
	(void)to;
	return false;
}

struct pend {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long pending, errors;
};

static struct l2 *cur; /* the log fill appends to */

static void wdone_free(void *arg, struct l2_rec *rec, int err,
		       const struct l2_loc *loc)
{
	struct pend *p = arg;

	(void)loc;
	l2_rec_free(cur, rec);
	pthread_mutex_lock(&p->mu);
	p->pending--;
	if (err)
		p->errors++;
	pthread_mutex_unlock(&p->mu);
}

/* Appends n records of len bytes (keys from first on), raw. */
static void fill(struct l2 *l2, uint64_t first, uint64_t n, size_t len)
{
	struct pend p = { .pending = 0 };
	uint8_t *buf = malloc(len);
	uint64_t s = first * 0x9e3779b97f4a7c15ull + 1;

	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	cur = l2;
	for (uint64_t i = first; i < first + n; i++) {
		struct kvfs_key k = { .b = { 0 } };
		struct l2_rec *rec;

		memcpy(k.b, &i, sizeof(i));
		k.b[15] = 0xb7;
		for (size_t j = 0; j + 8 <= len; j += 512) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(buf + j, &s, 8);
		}
		if (l2_build(l2, i % 2 ? "bench.a" : "bench.b", &k, buf, len, 0,
			     0, &rec)) {
			fprintf(stderr, "l2_build failed\n");
			exit(1);
		}
		pthread_mutex_lock(&p.mu);
		p.pending++;
		pthread_mutex_unlock(&p.mu);
		while (l2_append(l2, rec, wdone_free, &p) == -EAGAIN)
			usleep(500);
	}
	l2_flush(l2);
	if (p.errors) {
		fprintf(stderr, "%ld appends failed\n", p.errors);
		exit(1);
	}
	free(buf);
}

static void drop_cache(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	sync();
	while (d && (de = readdir(d))) {
		char p[1024];
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		fd = open(p, O_RDONLY);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	if (d)
		closedir(d);
}

static void rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char p[1024];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

struct result {
	double wall, recover;
	uint64_t records, ckpt_records, scan_records, scan_bytes, bytes;
	bool from_ckpt;
};

static struct l2 *timed_open(struct l2_config *c, struct result *r)
{
	struct l2_stats st;
	struct l2 *l2;
	char err[256];
	double t;

	drop_cache(c->dir);
	recovered = 0;
	t = now_s();
	if (l2_open(c, &l2, err, sizeof(err))) {
		fprintf(stderr, "l2_open: %s\n", err);
		exit(1);
	}
	r->wall = now_s() - t;
	l2_get_stats(l2, &st);
	r->recover = (double)st.recover_ns / 1e9;
	r->records = recovered;
	r->ckpt_records = st.recover_ckpt_records;
	r->scan_records = st.recover_scan_records;
	r->scan_bytes = st.recover_scan_bytes;
	r->bytes = st.bytes;
	r->from_ckpt = st.recover_ckpt;
	return l2;
}

static void row(const char *how, const struct result *r,
		const struct result *base, double gb)
{
	printf("| %s | %s | %" PRIu64 " | %" PRIu64 " | %.0f | %.3f | %.4f | "
	       "%.3f | %.1fx |\n", how, r->from_ckpt ? "checkpoint" : "scan",
	       r->ckpt_records, r->scan_records,
	       (double)r->scan_bytes / 1048576.0, r->wall, r->wall / gb,
	       r->wall / ((double)r->records / 1e6), base->wall / r->wall);
}

static void run(const char *tmp, const char *name, uint64_t n, size_t len,
		uint64_t tail_mib)
{
	struct l2_config c = {
		.recover = on_recover, .reclaim = on_reclaim,
		.moved = on_moved, .checkpoint_s = -1,
	};
	struct result clean, crash, scan;
	uint64_t rec_bytes = l2_record_bytes(len);
	uint64_t tail = tail_mib * 1048576 / rec_bytes;
	char dir[512], p[600];
	struct l2 *l2;
	char err[256];
	double t, gb;
	pid_t pid;
	int ws;

	snprintf(dir, sizeof(dir), "%s/kvfs-ckptbench-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	c.dir = dir;
	c.size = (n + tail) * rec_bytes * 5 / 4 + (512ull << 20);
	c.checkpoint_s = 0; /* at l2_close */
	if (l2_open(&c, &l2, err, sizeof(err))) {
		fprintf(stderr, "l2_open: %s\n", err);
		exit(1);
	}
	t = now_s();
	fill(l2, 0, n, len);
	t = now_s() - t;
	l2_close(l2);
	gb = (double)(n * rec_bytes) / 1e9;
	printf("\n## %s: %" PRIu64 " records of %zu bytes, %.2f GB on disk "
	       "(written in %.1f s)\n\n", name, n, len, gb, t);

	l2 = timed_open(&c, &clean);
	l2_close(l2); /* writes the checkpoint again */

	/* crash: a child opens, writes the tail, is killed */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct l2_config cc = c;

		cc.checkpoint_s = -1;
		if (l2_open(&cc, &l2, err, sizeof(err)))
			_exit(1);
		fill(l2, n, tail, len);
		raise(SIGKILL);
		_exit(2);
	}
	waitpid(pid, &ws, 0);
	l2 = timed_open(&c, &crash);
	c.checkpoint_s = -1; /* keep the checkpoint file as it is */
	l2_close(l2);
	snprintf(p, sizeof(p), "%s/%s", dir, KVCKPT_FILE);
	unlink(p);
	l2 = timed_open(&c, &scan);
	l2_close(l2);

	printf("| restart | recovered from | records from checkpoint | records "
	       "scanned | MiB scanned | l2_open s | s per GB | s per million "
	       "records | vs full scan |\n|---|---|---|---|---|---|---|---|---|\n");
	row("clean unmount", &clean, &scan, gb);
	row("SIGKILL after more writes", &crash, &scan, gb);
	row("checkpoint removed", &scan, &scan, gb);
	printf("\n(crash: %" PRIu64 " records, %" PRIu64 " MiB written after the "
	       "checkpoint)\n", tail, tail_mib);
	fflush(stdout);
	rm_rf(dir);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	double gbs = 1;
	uint64_t records = 200000, tail_mib = 256;
	double load[3] = { 0 };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--gb") && i + 1 < argc)
			gbs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--tail-mib") && i + 1 < argc)
			tail_mib = strtoull(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: kvfs_ckptbench [--gb G] "
				"[--records N] [--tail-mib M]\n");
			return 2;
		}
	}
	printf("# kvfs_ckptbench: L2 warm restart (l2_open), --gb %.2f "
	       "--records %" PRIu64 " --tail-mib %" PRIu64 "\n", gbs, records,
	       tail_mib);
	if (getloadavg(load, 3) == 3)
		printf("# load average at start: %.2f %.2f %.2f\n", load[0],
		       load[1], load[2]);
	run(tmp, "large records", (uint64_t)(gbs * 1e9 / (2 << 20)) + 1,
	    2u << 20, tail_mib);
	run(tmp, "small records", records, 2048, tail_mib / 8);
	if (getloadavg(load, 3) == 3)
		printf("\n# load average at end: %.2f %.2f %.2f\n", load[0],
		       load[1], load[2]);
	return 0;
}
