/*
 * kvfs_xbench - batched transfers against tmpfs, in the same run (a report,
 * not a test): kvfs_mput / kvfs_mget (KVFS_IOC_PUT / KVFS_IOC_GET, the
 * daemon copying straight between its arena and this process's buffers)
 * against open + write + close and open + read + close of the same files
 * on tmpfs. GET rows are the best of first and repeated reads.
 *
 *   2 MiB chunks in batches of 16, 256 KiB chunks in batches of 64;
 *   each count of --threads (default 1,2; 1,2,4,8,16 is the scaling run
 *   of make gpu-bundle's run.sh, with a scaling table after the main one);
 *   --mib MiB per phase (default 256); best of --trials;
 *   --busy 1: a thread spins for the whole run (issue 26 measures GET with
 *   the other core busy, as an engine's own work keeps it);
 *   --huge 1: the buffers (kvfs's and tmpfs's alike) from kvfs_buf_alloc
 *   (transparent huge pages), as kvfs.h advises for transfer buffers and
 *   as an engine's large KV pool may be; default: aligned_alloc, 4 KiB
 *   pages.
 * Besides GB/s, each row gives GB moved per CPU-second (the least of the
 * trials): kvfs's callers plus the daemon's threads, tmpfs's callers.
 *
 * Mounts kvfs (l1_size=1G) on a temporary directory with the tests' mount
 * helper (deadline, never a stale mount) and uses a tmpfs directory
 * ($KVFS_TMPFS_DIR, else /dev/shm). Phases interleave kvfs and tmpfs so
 * noise from other work on the machine hits both. Every byte of the last
 * trial is verified, untimed. Exits 77 (skipped) when there is no
 * kvfs-mount or no tmpfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_cpu.h"
#include "bench/bench_threads.h"
#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define TMPFS_MAGIC 0x01021994
#define MAX_TRIALS 10
#define BUF_BYTES (16u * (2u << 20)) /* a thread's buffer: the larger batch */

enum op { OP_PUT, OP_GET, OP_NR };
static const char *const op_names[OP_NR] = { "put", "get" };

struct phase {
	bool kvfs;        /* else tmpfs */
	enum op op;
	int nsfd;         /* kvfs namespace fd */
	const char *dir;  /* tmpfs directory */
	size_t size;      /* bytes per chunk */
	unsigned batch;   /* chunks per kvfs call */
	unsigned nchunks;
	unsigned nthreads;
	unsigned trial;   /* part of every key */
	bool verify;
	pthread_barrier_t start;
	int err;
	uint64_t cpu_ns;  /* (atomic) the workers' CPU time */
};

struct worker {
	struct phase *ph;
	unsigned tid;
	uint8_t *buf; /* batch * size bytes */
	pthread_t thread;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void key_of(const struct phase *ph, unsigned i, struct kvfs_key *k)
{
	uint64_t v[2] = { (uint64_t)ph->size << 8 | ph->trial, i };

	memcpy(k->b, v, sizeof(k->b));
}

/* Chunk i's bytes: an 8-byte stamp, then a fixed pattern (made once). */
static uint8_t *pattern;

static void fill(const struct phase *ph, unsigned i, uint8_t *dst)
{
	uint64_t stamp = (uint64_t)ph->trial << 32 | i;

	memcpy(dst, pattern, ph->size);
	memcpy(dst, &stamp, sizeof(stamp));
}

static bool check(const struct phase *ph, unsigned i, const uint8_t *src)
{
	uint64_t stamp = (uint64_t)ph->trial << 32 | i, got;

	memcpy(&got, src, sizeof(got));
	if (got != stamp)
		return false;
	return !ph->verify ||
	       !memcmp(src + 8, pattern + 8, ph->size - 8);
}

/* This worker's chunks: [*first, *first + *n), every chunk in one share
 * whatever the thread count. */
static void share(const struct phase *ph, const struct worker *w,
		  unsigned *first, unsigned *n)
{
	unsigned long a = (unsigned long)ph->nchunks * w->tid / ph->nthreads;
	unsigned long b = (unsigned long)ph->nchunks * (w->tid + 1) / ph->nthreads;

	*first = (unsigned)a;
	*n = (unsigned)(b - a);
}

/* kvfs: this worker's chunks, ph->batch per call. */
static int run_kvfs(struct phase *ph, struct worker *w)
{
	struct kvfs_io io[64];
	unsigned first, per;

	share(ph, w, &first, &per);
	for (unsigned b = 0; b < per; b += ph->batch) {
		unsigned n = per - b < ph->batch ? per - b : ph->batch;
		long r;

		memset(io, 0, n * sizeof(io[0]));
		for (unsigned k = 0; k < n; k++) {
			key_of(ph, first + b + k, &io[k].key);
			io[k].buf = w->buf + (size_t)k * ph->size;
			io[k].len = ph->size;
			/* the engine's bytes are already there: stamp
			 * only (8 bytes), untimed in effect */
			if (ph->op == OP_PUT) {
				uint64_t s = (uint64_t)ph->trial << 32 |
					     (first + b + k);

				memcpy(io[k].buf, &s, 8);
			}
		}
		r = ph->op == OP_PUT ? kvfs_mput(ph->nsfd, io, n)
				     : kvfs_mget(ph->nsfd, io, n, 0);
		if (r != (long)n)
			return r < 0 ? (int)-r : EIO;
		for (unsigned k = 0; ph->op == OP_GET && k < n; k++)
			if (!check(ph, first + b + k, io[k].buf))
				return EILSEQ;
	}
	return 0;
}

/* tmpfs: the same chunks, one file each. */
static int run_tmpfs(struct phase *ph, struct worker *w)
{
	char name[PATH_MAX + 64];
	unsigned first, per;

	share(ph, w, &first, &per);
	for (unsigned j = 0; j < per; j++) {
		struct kvfs_key k;
		char hex[KVFS_KEY_HEX_LEN + 1];
		uint8_t *buf = w->buf + (size_t)(j % ph->batch) * ph->size;
		size_t done = 0;
		int fd;

		key_of(ph, first + j, &k);
		kvfs_key_hex(&k, hex);
		snprintf(name, sizeof(name), "%s/%s", ph->dir, hex);
		if (ph->op == OP_PUT) {
			uint64_t s = (uint64_t)ph->trial << 32 | (first + j);

			memcpy(buf, &s, 8);
			fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				  0644);
		} else {
			fd = open(name, O_RDONLY | O_CLOEXEC);
		}
		if (fd < 0)
			return errno;
		while (done < ph->size) {
			ssize_t n = ph->op == OP_PUT ?
				write(fd, buf + done, ph->size - done) :
				read(fd, buf + done, ph->size - done);

			if (n <= 0) {
				close(fd);
				return n < 0 ? errno : EIO;
			}
			done += (size_t)n;
		}
		if (close(fd) < 0)
			return errno;
		if (ph->op == OP_GET && !check(ph, first + j, buf))
			return EILSEQ;
	}
	return 0;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --busy: a thread spinning on the other core for the whole run, as an
 * engine's own work would (issue 26 measures GET against tmpfs so). */
static int busy_stop;

static void *busy_main(void *arg)
{
	volatile uint64_t n = 0;

	(void)arg;
	while (!__atomic_load_n(&busy_stop, __ATOMIC_RELAXED))
		n++;
	return NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t c0;
	int err;

	pthread_barrier_wait(&w->ph->start);
	c0 = thread_cpu_ns();
	err = w->ph->kvfs ? run_kvfs(w->ph, w) : run_tmpfs(w->ph, w);
	__atomic_fetch_add(&w->ph->cpu_ns, thread_cpu_ns() - c0,
			   __ATOMIC_RELAXED);
	if (err)
		__atomic_store_n(&w->ph->err, err, __ATOMIC_RELAXED);
	return NULL;
}

static double run_phase(struct phase *ph, struct worker *ws)
{
	double t0, t1;

	ph->err = 0;
	ph->cpu_ns = 0;
	pthread_barrier_init(&ph->start, NULL, ph->nthreads + 1);
	for (unsigned t = 0; t < ph->nthreads; t++) {
		ws[t].ph = ph;
		ws[t].tid = t;
		if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t])) {
			fprintf(stderr, "kvfs_xbench: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&ph->start);
	t0 = now_s();
	for (unsigned t = 0; t < ph->nthreads; t++)
		pthread_join(ws[t].thread, NULL);
	t1 = now_s();
	pthread_barrier_destroy(&ph->start);
	if (ph->err) {
		fprintf(stderr, "kvfs_xbench: %s %s %zu KiB: %s\n",
			ph->kvfs ? "kvfs" : "tmpfs", op_names[ph->op],
			ph->size >> 10, strerror(ph->err));
		exit(1);
	}
	return t1 - t0;
}

static void remove_all(const struct phase *ph, const char *kvfs_ns)
{
	char name[PATH_MAX + 64], hex[KVFS_KEY_HEX_LEN + 1];

	for (unsigned i = 0; i < ph->nchunks; i++) {
		struct kvfs_key k;

		key_of(ph, i, &k);
		kvfs_key_hex(&k, hex);
		snprintf(name, sizeof(name), "%s/%s",
			 ph->kvfs ? kvfs_ns : ph->dir, hex);
		if (unlink(name) < 0 && errno != ENOENT) {
			fprintf(stderr, "kvfs_xbench: unlink %s: %s\n", name,
				strerror(errno));
			exit(1);
		}
	}
}

struct row {
	size_t size;
	unsigned batch, nthreads;
	enum op op;
	double best[2]; /* [0] kvfs, [1] tmpfs */
	double cpu[2];  /* least CPU seconds of a trial: kvfs (its callers
			 * and the daemon), tmpfs (its callers: the kernel
			 * copies in their context) */
};

/*
 * The floor under the 256 KiB GET row: memcpy of the same number of 256 KiB
 * chunks, from a source as large as the phase's data (as the arena holds
 * it) into the first batch-sized part of buf, batch by batch, on this
 * thread: the one copy a GET makes, with no round trip. Seconds, best of
 * trials.
 */
static double memcpy_floor(void *buf, size_t size, unsigned batch,
			   unsigned long mib, unsigned long trials)
{
	size_t bytes = (size_t)mib << 20, n = bytes / size;
	char *src = malloc(bytes);
	double best = 1e9;

	if (!src)
		return 0;
	memset(src, 0x5a, bytes);
	for (unsigned long t = 0; t < trials; t++) {
		double t0 = now_s();

		for (size_t i = 0; i < n; i++)
			memcpy((char *)buf + (i % batch) * size,
			       src + i * size, size);
		t0 = now_s() - t0;
		if (t0 < best)
			best = t0;
	}
	free(src);
	return best;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 2u << 20, 256u << 10 };
	static const unsigned batches[] = { 16, 64 };
	unsigned threads[BENCH_MAX_TCOUNTS] = { 1, 2 }, maxt;
	const char *shm = getenv("KVFS_TMPFS_DIR");
	char tdir[PATH_MAX], kns[PATH_MAX + 16];
	unsigned long mib = 256, trials = 3;
	double floor256;
	struct row rows[2 * BENCH_MAX_TCOUNTS * OP_NR];
	static struct worker ws[BENCH_MAX_THREADS];
	struct kvfs_mnt m;
	struct statfs sf;
	int nrows = 0, nsfd, nt = 2, bad = argc % 2 == 0, busy = 0;
	int huge = 0;
	pthread_t busy_th;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mib"))
			mib = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--trials"))
			trials = strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--threads"))
			nt = bench_parse_threads(argv[i + 1], threads);
		else if (!strcmp(argv[i], "--busy"))
			busy = atoi(argv[i + 1]) != 0;
		else if (!strcmp(argv[i], "--huge"))
			huge = atoi(argv[i + 1]) != 0;
		else
			bad = 1;
	}
	if (bad || mib < 32 || mib > 1024 || trials < 1 ||
	    trials > MAX_TRIALS || nt < 1) {
		fprintf(stderr, "usage: kvfs_xbench [--mib 32..1024] "
				"[--trials 1..%d] [--threads N,N,... (1..%d "
				"each, at most %d)] [--busy 0|1] [--huge 0|1]\n", MAX_TRIALS,
			BENCH_MAX_THREADS, BENCH_MAX_TCOUNTS);
		return 2;
	}
	maxt = bench_max_threads(threads, nt);
	if (!shm)
		shm = "/dev/shm";
	if (statfs(shm, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
		printf("kvfs_xbench: skipped: %s is not a tmpfs\n", shm);
		return 77;
	}
	if (access(kvfs_test_bin(), X_OK)) {
		printf("kvfs_xbench: skipped: %s not built\n", kvfs_test_bin());
		return 77;
	}
	snprintf(tdir, sizeof(tdir), "%s/kvfs-xbench.XXXXXX", shm);
	if (!mkdtemp(tdir) || kvfs_test_mount(&m, "l1_size=1G") < 0) {
		fprintf(stderr, "kvfs_xbench: setup failed\n");
		return 1;
	}
	nsfd = kvfs_ns_open(m.dir, "xbench", KVFS_NS_CREATE, 0755);
	snprintf(kns, sizeof(kns), "%s/xbench", m.dir);
	pattern = malloc(sizes[0]);
	for (unsigned t = 0; t < maxt; t++) {
		/* the larger batch: 16 x 2 MiB (64 x 256 KiB is half) */
		/* --huge: the buffers from kvfs_buf_alloc (transparent huge
		 * pages), for both kvfs and tmpfs (the daemon's copy pins the
		 * caller's pages one by one: 512 times fewer pins) */
		ws[t].buf = huge ? kvfs_buf_alloc(BUF_BYTES)
				 : aligned_alloc(2u << 20, BUF_BYTES);
		if (!ws[t].buf)
			break;
		memset(ws[t].buf, 1, BUF_BYTES);
	}
	if (nsfd < 0 || !pattern || !ws[maxt - 1].buf) {
		fprintf(stderr, "kvfs_xbench: setup failed\n");
		return 1;
	}
	for (size_t i = 0; i < sizes[0]; i++)
		pattern[i] = (uint8_t)(i * 2654435761u >> 13);

	for (unsigned s = 0; s < 2; s++)
		for (int t = 0; t < nt; t++)
			for (int op = 0; op < OP_NR; op++)
				rows[nrows++] = (struct row){
					.size = sizes[s], .batch = batches[s],
					.nthreads = threads[t], .op = op,
					.best = { 1e30, 1e30 },
					.cpu = { 1e30, 1e30 } };
	if (busy && pthread_create(&busy_th, NULL, busy_main, NULL))
		busy = 0;
	printf("kvfs_xbench: kvfs_mput/kvfs_mget on %s vs open+write/read+close "
	       "on tmpfs %s; %lu MiB per phase, best of %lu%s%s\n", m.dir,
	       tdir, mib, trials, busy ? "; a thread spinning meanwhile" : "",
	       huge ? "; buffers in huge pages" : "");
	fflush(stdout);
	for (unsigned long trial = 0; trial < trials; trial++) {
		int r = 0;

		for (unsigned s = 0; s < 2; s++) {
			for (int t = 0; t < nt; t++, r += OP_NR) {
				for (int f = 0; f < 2; f++) {
					struct phase ph = {
						.kvfs = f == 0, .nsfd = nsfd,
						.dir = tdir, .size = sizes[s],
						.batch = batches[s],
						.nchunks = (unsigned)((mib << 20) / sizes[s]),
						.nthreads = threads[t],
						.trial = (unsigned)(trial * (unsigned long)nt + (unsigned long)t),
					};

					/* the source bytes, as the engine has them */
					for (unsigned w = 0; w < threads[t]; w++)
						for (unsigned k = 0; k < batches[s]; k++)
							fill(&ph, 0, ws[w].buf + (size_t)k * sizes[s]);
					/* get twice: a first and a repeated
					 * read (tmpfs's repeat is faster) */
					for (int k = 0; k < OP_NR + 1; k++) {
						int op = k ? OP_GET : OP_PUT;
						double sec;

						double dc = f ? 0 : bench_task_cpu_s(m.pid), cpu;

						ph.op = op;
						sec = run_phase(&ph, ws);
						if (sec < rows[r + op].best[f])
							rows[r + op].best[f] = sec;
						cpu = (double)ph.cpu_ns / 1e9 +
						      (f ? 0 : bench_task_cpu_s(m.pid) - dc);
						if (cpu < rows[r + op].cpu[f])
							rows[r + op].cpu[f] = cpu;
					}
					if (trial == trials - 1) {
						ph.op = OP_GET;
						ph.verify = true;
						run_phase(&ph, ws);
					}
					remove_all(&ph, kns);
				}
			}
		}
	}
	/* with the busy thread still running, as the GET rows ran */
	floor256 = memcpy_floor(ws[0].buf, 256u << 10, 64, mib, trials);
	if (busy) {
		__atomic_store_n(&busy_stop, 1, __ATOMIC_RELAXED);
		pthread_join(busy_th, NULL);
	}
	printf("\n%-8s %5s %-4s %3s | %9s %10s | %10s %10s | %6s | %s\n",
	       "chunk", "batch", "op", "thr", "kvfs GB/s", "chunks/s",
	       "tmpfs GB/s", "files/s", "ratio",
	       "GB per CPU-s kvfs / tmpfs");
	printf("-----------------------------+----------------------+"
	       "-----------------------+--------+--------------------------\n");
	for (int i = 0; i < nrows; i++) {
		struct row *rw = &rows[i];
		double n = (double)((mib << 20) / rw->size);
		double bytes = (double)(mib << 20);

		printf("%-8s %5u %-4s %3u | %9.2f %10.0f | %10.2f %10.0f | "
		       "%5.2fx | %6.2f / %6.2f\n",
		       rw->size >= (1u << 20) ? "2 MiB" : "256 KiB", rw->batch,
		       op_names[rw->op], rw->nthreads,
		       bytes / rw->best[0] / 1e9, n / rw->best[0],
		       bytes / rw->best[1] / 1e9, n / rw->best[1],
		       rw->best[1] / rw->best[0], bytes / rw->cpu[0] / 1e9,
		       bytes / rw->cpu[1] / 1e9);
	}
	bench_scaling_table(threads, nt, OP_NR, op_names, rows, sizeof(rows[0]),
			    offsetof(struct row, best));
	{
		/* on the first thread count: rows 0 put/1 get (2 MiB), and
		 * nt * OP_NR + 1 get (256 KiB) */
		const struct row *g = &rows[nt * OP_NR + OP_GET];
		double p2 = rows[0].best[1] / rows[0].best[0];
		double g2 = rows[1].best[1] / rows[1].best[0];
		double g256 = (double)((mib << 20) / g->size) / g->best[0];

		printf("\ntargets (%u thread%s): 2 MiB GET %.2fx tmpfs read() "
		       "(>= 1.5x: %s), 2 MiB PUT %.2fx tmpfs write() (>= 2x: "
		       "%s),\n                    256 KiB GET %.0f chunks/s "
		       "(>= 40000: %s)\n", threads[0],
		       threads[0] == 1 ? "" : "s", g2, g2 >= 1.5 ? "met" : "MISSED", p2,
		       p2 >= 2 ? "met" : "MISSED", g256,
		       g256 >= 40000 ? "met" : "MISSED");
		if (floor256 > 0)
			printf("  floor: memcpy of the same 256 KiB chunks on "
			       "one thread, no round trip: %.0f chunks/s "
			       "(the GET %.2fx of it)\n",
			       (double)((mib << 20) / g->size) / floor256,
			       floor256 / g->best[0]);
	}
	printf("every byte of the last trial verified on both\n");
	close(nsfd);
	rmdir(tdir);
	free(pattern);
	for (unsigned t = 0; t < maxt; t++)
		if (huge)
			kvfs_buf_free(ws[t].buf, BUF_BYTES);
		else
			free(ws[t].buf);
	return kvfs_test_umount(&m) == 0 ? 0 : 1;
}
