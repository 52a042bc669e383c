/*
 * kvfs_l2bench - the L2 tier's benchmark (a report, not a test):
 *
 *   1. codec: compression ratio and compress / decompress MB/s (one core)
 *      per zstd level and shuffle, on synthetic bf16 KV chunks (kvgen) and
 *      on random bytes;
 *   2. promotion: reading chunks back from the L2 log (io_uring + verify +
 *      decompress, 1 and 2 threads) against O_DIRECT pread of the same
 *      chunks stored uncompressed in plain files on the same disk, and,
 *      when KVFS_MOUNT_BIN is set, through a kvfs mount with l2_dir
 *      (chunks evicted from a small L1 and read back);
 *   3. recovery: the time l2_open takes to scan the log, per GB and per
 *      million records;
 *   4. chain readahead (with KVFS_MOUNT_BIN): one reader opening and
 *      reading, in chain order, chunks linked by user.kvfs.parent that are
 *      only in L2, with no lookup, against O_DIRECT pread of the same
 *      chunks stored raw, also after a clean remount (links from L2:
 *      the first reader after it is followed); then a reader jumping
 *      between unrelated chains (the readahead it caused and wasted).
 *
 * Temporary files go under $TMPDIR (default /var/tmp). Options:
 *   --mib N       raw MiB of chunks for the promotion test (default 256)
 *   --chunk KIB   chunk size in KiB (default 2048)
 *   --quick       smaller codec sample
 *   --readahead   the chain readahead table only (4.)
 *   --promotion   the promotion-through-the-mount table only (end of 2.)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
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
#include "tier/record/codec.h"
#include "tier/l2/l2.h"
#include "l2bench/l2bench.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------- kvgen */

uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_gauss(uint64_t *s)
{
	double u1 = ((double)(rng_next(s) >> 11) + 1) / 9007199254740993.0;
	double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;

	return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static uint16_t to_bf16(float f)
{
	uint32_t b;

	memcpy(&b, &f, 4);
	b += 0x7fff + ((b >> 16) & 1); /* round to nearest even */
	return (uint16_t)(b >> 16);
}

/*
 * kvgen - a synthetic bf16 KV chunk: rows of `channels` values (one row
 * per token, K or V of all heads), value = N(0, 1) * scale[channel], where
 * the scales are log-normal per channel and about 1% of the channels are
 * outliers with 10-30x larger scales (as seen in K caches). The scales
 * depend on model_seed only, so every chunk of a "model" shares them.
 */
static void kvgen(void *buf, size_t len, uint64_t model_seed,
		  uint64_t chunk_seed)
{
	enum { CH = 1024 };
	static float scale[CH];
	static uint64_t scale_seed = ~0ull;
	uint16_t *p = buf;
	uint64_t s = chunk_seed * 7919 + 1;

	if (scale_seed != model_seed) {
		uint64_t m = model_seed;

		for (int c = 0; c < CH; c++) {
			scale[c] = (float)exp(0.5 * rng_gauss(&m) - 1.0);
			if (rng_next(&m) % 100 == 0)
				scale[c] *= (float)(10 + rng_next(&m) % 21);
		}
		scale_seed = model_seed;
	}
	for (size_t i = 0; i < len / 2; i++)
		p[i] = to_bf16((float)rng_gauss(&s) * scale[i % CH]);
	if (len & 1)
		((uint8_t *)buf)[len - 1] = 0;
}

/* A few pre-generated chunks (kvgen is slow: a Gaussian per value), so
 * timings measure kvfs, not the generator. Chunk i is template i % NTPL. */
static uint8_t *tpl[NTPL];

const uint8_t *chunk_data(size_t chunk, int i)
{
	int k = i % NTPL;

	if (!tpl[k]) {
		tpl[k] = malloc(chunk);
		kvgen(tpl[k], chunk, 42, (uint64_t)k);
	}
	return tpl[k];
}

static void randgen(void *buf, size_t len, uint64_t seed)
{
	uint64_t *p = buf;

	for (size_t i = 0; i < len / 8; i++)
		p[i] = rng_next(&seed);
	memset((uint8_t *)buf + len / 8 * 8, 0x33, len % 8);
}

/* ------------------------------------------------------------- codec */

static void codec_table(size_t chunk, int nchunks)
{
	static const int levels[] = { 1, 3, 9 };
	static const int shuffles[] = { 0, 2 };
	struct codec_ws *ws = codec_ws_new();
	size_t total = chunk * (size_t)nchunks;
	uint8_t *src = malloc(total), *z = malloc(total + total / 8 + 65536),
		*back = malloc(chunk);

	printf("\n## codec (one core, %d chunks of %zu KiB)\n\n", nchunks,
	       chunk >> 10);
	printf("| data | level | shuffle | ratio | compress MB/s | decompress MB/s |\n");
	printf("|---|---|---|---|---|---|\n");
	for (int data = 0; data < 2; data++) {
		for (int c = 0; c < nchunks; c++) {
			if (data == 0)
				kvgen(src + (size_t)c * chunk, chunk, 42, (uint64_t)c);
			else
				randgen(src + (size_t)c * chunk, chunk, (uint64_t)c);
		}
		for (size_t li = 0; li < 3; li++) {
			for (size_t si = 0; si < 2; si++) {
				size_t zoff[64], zlen[64], stored = 0;
				double t0, tc, td;
				bool raw_any = false;

				/* warm-up: contexts sized, caches filled */
				codec_compress(ws, levels[li], shuffles[si], src,
					       chunk, z, chunk);
				t0 = now_s();
				for (int c = 0; c < nchunks; c++) {
					long n = codec_compress(ws, levels[li],
						shuffles[si], src + (size_t)c * chunk,
						chunk, z + stored, chunk);

					zoff[c] = stored;
					if (n < 0) { /* incompressible: stored raw */
						raw_any = true;
						memcpy(z + stored, src + (size_t)c * chunk, chunk);
						n = -(long)chunk;
					}
					zlen[c] = (size_t)labs(n);
					stored += zlen[c];
					if (n < 0)
						zlen[c] |= (size_t)1 << 62;
				}
				tc = now_s() - t0;
				t0 = now_s();
				for (int c = 0; c < nchunks; c++) {
					bool raw = zlen[c] >> 62;
					size_t zl = zlen[c] & (((size_t)1 << 62) - 1);
					int rc = codec_decompress(ws,
						raw ? CODEC_NONE : CODEC_ZSTD,
						raw ? 0 : shuffles[si], z + zoff[c],
						zl, back, chunk);

					if (rc || memcmp(back, src + (size_t)c * chunk, chunk)) {
						fprintf(stderr, "round trip failed\n");
						exit(1);
					}
				}
				td = now_s() - t0;
				printf("| %s | %d | %d | %.3f%s | %.0f | %.0f |\n",
				       data ? "random" : "bf16 KV", levels[li],
				       shuffles[si], (double)total / (double)stored,
				       raw_any ? " (raw)" : "",
				       (double)total / tc / 1e6,
				       (double)total / td / 1e6);
				fflush(stdout);
			}
		}
	}
	free(src);
	free(z);
	free(back);
	codec_ws_free(ws);
}

/* --------------------------------------------------------- promotion */

struct pdone {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pending, errors;
	struct l2_loc *locs;
	struct l2 *l2;
};

struct wctx {
	struct pdone *d;
	int idx;
};

static void wdone(void *arg, struct l2_rec *rec, int err,
		  const struct l2_loc *loc)
{
	struct wctx *w = arg;
	struct pdone *d = w->d;

	l2_rec_free(d->l2, rec);
	pthread_mutex_lock(&d->mu);
	if (err)
		d->errors++;
	else
		d->locs[w->idx] = *loc;
	d->pending--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(w);
}

struct kvfs_key bkey(int i)
{
	struct kvfs_key k;

	memset(&k, 0, sizeof(k));
	memcpy(k.b, &i, sizeof(i));
	return k;
}

static void *l2_reader(void *arg)
{
	struct rjob *j = arg;
	uint8_t *buf = malloc(j->chunk);

	for (int i = j->first; i < j->n; i += j->step) {
		struct kvfs_key k = bkey(i);

		if (l2_read(j->l2, &j->locs[i], "bench.bf16", &k, buf, j->chunk) ||
		    memcmp(buf, chunk_data(j->chunk, i), j->chunk))
			j->errors++;
	}
	free(buf);
	return NULL;
}

void *raw_reader(void *arg)
{
	struct rjob *j = arg;
	void *buf;
	char p[512];

	if (posix_memalign(&buf, 4096, j->chunk))
		return NULL;
	for (int i = j->first; i < j->n; i += j->step) {
		size_t got = 0;
		int fd;

		snprintf(p, sizeof(p), "%s/%d", j->rawdir, i);
		fd = open(p, O_RDONLY | (j->direct_files ? O_DIRECT : 0));
		if (fd < 0) {
			j->errors++;
			continue;
		}
		while (got < j->chunk) {
			ssize_t n = pread(fd, (uint8_t *)buf + got, j->chunk - got,
					  (off_t)got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		/* the same check as the mount and l2 readers do */
		if (got != j->chunk || memcmp(buf, chunk_data(j->chunk, i), j->chunk))
			j->errors++;
		close(fd);
	}
	free(buf);
	return NULL;
}

double run_readers(void *(*fn)(void *), struct rjob *tmpl, int nthr)
{
	pthread_t th[8];
	struct rjob j[8];
	double t0 = now_s();

	for (int t = 0; t < nthr; t++) {
		j[t] = *tmpl;
		j[t].first = t;
		j[t].step = nthr;
		pthread_create(&th[t], NULL, fn, &j[t]);
	}
	for (int t = 0; t < nthr; t++) {
		pthread_join(th[t], NULL);
		tmpl->errors += j[t].errors;
	}
	return now_s() - t0;
}

static void log_cb(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "  [l2] %s\n", msg);
}

int rm_rf(const char *path)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd);
}

static void promotion(const char *tmp, size_t chunk, int n)
{
	char l2dir[512], rawdir[512], err[256];
	struct l2_config cfg = { 0 };
	struct pdone d = { 0 };
	struct l2_stats st;
	struct rjob job = { 0 };
	struct l2 *l2 = NULL;
	uint8_t *buf = malloc(chunk);
	void *abuf;
	double t, raw1, raw2, l21, l22, wt;
	uint64_t total = (uint64_t)chunk * (uint64_t)n;

	snprintf(l2dir, sizeof(l2dir), "%s/l2bench-l2", tmp);
	snprintf(rawdir, sizeof(rawdir), "%s/l2bench-raw", tmp);
	/* what a killed run left (never the mount point: it may still be
	 * mounted) */
	rm_rf(l2dir);
	rm_rf(rawdir);
	mkdir(l2dir, 0700);
	mkdir(rawdir, 0700);
	cfg.dir = l2dir;
	cfg.size = total * 2 + (256ull << 20);
	cfg.log = log_cb;
	if (l2_open(&cfg, &l2, err, sizeof(err))) {
		fprintf(stderr, "l2_open: %s\n", err);
		exit(1);
	}
	if (posix_memalign(&abuf, 4096, chunk))
		exit(1);
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.cv, NULL);
	d.locs = calloc((size_t)n, sizeof(*d.locs));
	d.l2 = l2;

	/* write: the L2 log (compressed) and raw files, O_DIRECT both */
	t = now_s();
	for (int i = 0; i < n; i++) {
		struct kvfs_key k = bkey(i);
		struct wctx *w = malloc(sizeof(*w));
		struct l2_rec *rec;
		int rc;

		if (l2_build(l2, "bench.bf16", &k, chunk_data(chunk, i), chunk,
			     CODEC_LEVEL_DEFAULT, 2, &rec)) {
			fprintf(stderr, "l2_build failed\n");
			exit(1);
		}
		w->d = &d;
		w->idx = i;
		pthread_mutex_lock(&d.mu);
		d.pending++;
		pthread_mutex_unlock(&d.mu);
		while ((rc = l2_append(l2, rec, wdone, w)) == -EAGAIN)
			usleep(1000);
		if (rc) {
			fprintf(stderr, "l2_append: %s\n", strerror(-rc));
			exit(1);
		}
	}
	l2_flush(l2);
	wt = now_s() - t;
	for (int i = 0; i < n; i++) {
		char p[600];
		int fd;

		memcpy(abuf, chunk_data(chunk, i), chunk);
		snprintf(p, sizeof(p), "%s/%d", rawdir, i);
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
		if (fd < 0)
			fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, abuf, chunk) != (ssize_t)chunk) {
			fprintf(stderr, "raw write failed\n");
			exit(1);
		}
		fsync(fd);
		close(fd);
	}
	l2_get_stats(l2, &st);
	if (d.errors) {
		fprintf(stderr, "%d L2 writes failed\n", d.errors);
		exit(1);
	}

	job.l2 = l2;
	job.locs = d.locs;
	job.rawdir = rawdir;
	job.chunk = chunk;
	job.n = n;
	job.direct_files = true;
	raw1 = run_readers(raw_reader, &job, 1);
	l21 = run_readers(l2_reader, &job, 1);
	raw2 = run_readers(raw_reader, &job, 2);
	l22 = run_readers(l2_reader, &job, 2);
	if (job.errors) {
		fprintf(stderr, "%d reads failed\n", job.errors);
		exit(1);
	}
	printf("\n## L2 promotion (%d chunks of %zu KiB, %.0f MiB raw; "
	       "compress=zstd:%d shuffle=2; O_DIRECT %s)\n\n", n, chunk >> 10,
	       (double)total / 1048576.0, CODEC_LEVEL_DEFAULT,
	       st.direct ? "on" : "off (buffered)");
	printf("L2 write (build + append, one thread): %.0f MB/s raw; stored "
	       "%.1f MiB for %.1f MiB raw (%.3fx)\n\n",
	       (double)total / wt / 1e6, (double)st.bytes / 1048576.0,
	       (double)st.raw_bytes / 1048576.0,
	       (double)st.raw_bytes / (double)st.bytes);
	printf("| read path | threads | MB/s (raw bytes delivered) | vs O_DIRECT pread |\n");
	printf("|---|---|---|---|\n");
	printf("| O_DIRECT pread of raw files | 1 | %.0f | 1.00x |\n",
	       (double)total / raw1 / 1e6);
	printf("| l2_read (io_uring + verify + decompress) | 1 | %.0f | %.2fx |\n",
	       (double)total / l21 / 1e6, raw1 / l21);
	printf("| O_DIRECT pread of raw files | 2 | %.0f | 1.00x |\n",
	       (double)total / raw2 / 1e6);
	printf("| l2_read (io_uring + verify + decompress) | 2 | %.0f | %.2fx |\n",
	       (double)total / l22 / 1e6, raw2 / l22);
	fflush(stdout);
	l2_close(l2);

	/* recovery of this log */
	{
		struct l2_config c2 = cfg;
		double gb = (double)st.bytes / 1e9;

		c2.log = NULL;
		if (l2_open(&c2, &l2, err, sizeof(err))) {
			fprintf(stderr, "reopen: %s\n", err);
			exit(1);
		}
		l2_get_stats(l2, &st);
		printf("\nrecovery of %" PRIu64 " records, %.0f MiB on disk: "
		       "%.3f s -> %.2f s per GB\n", st.recovered,
		       (double)st.bytes / 1048576.0, (double)st.recover_ns / 1e9,
		       (double)st.recover_ns / 1e9 / gb);
		l2_close(l2);
	}
	free(d.locs);
	free(buf);
	free(abuf);
	rm_rf(l2dir);
	rm_rf(rawdir);
}

/* Recovery per million records: many small records. */
static void recovery_small(const char *tmp, int n)
{
	char dir[512], err[256];
	struct l2_config cfg = { 0 };
	struct pdone d = { 0 };
	struct l2_stats st;
	struct l2 *l2;
	uint8_t buf[2048];
	double t;

	snprintf(dir, sizeof(dir), "%s/l2bench-small", tmp);
	rm_rf(dir); /* what a killed run left */
	mkdir(dir, 0700);
	cfg.dir = dir;
	cfg.size = (uint64_t)n * 8192 + (64ull << 20);
	if (l2_open(&cfg, &l2, err, sizeof(err))) {
		fprintf(stderr, "l2_open: %s\n", err);
		exit(1);
	}
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.cv, NULL);
	d.locs = calloc((size_t)n, sizeof(*d.locs));
	d.l2 = l2;
	for (int i = 0; i < n; i++) {
		struct kvfs_key k = bkey(i);
		struct wctx *w = malloc(sizeof(*w));
		struct l2_rec *rec;

		kvgen(buf, sizeof(buf), 42, (uint64_t)i);
		if (l2_build(l2, "bench.small", &k, buf, sizeof(buf), 1, 2, &rec))
			exit(1);
		w->d = &d;
		w->idx = i;
		pthread_mutex_lock(&d.mu);
		d.pending++;
		pthread_mutex_unlock(&d.mu);
		while (l2_append(l2, rec, wdone, w) == -EAGAIN)
			usleep(1000);
	}
	l2_flush(l2);
	l2_close(l2);
	t = now_s();
	if (l2_open(&cfg, &l2, err, sizeof(err)))
		exit(1);
	t = now_s() - t;
	l2_get_stats(l2, &st);
	printf("recovery of %" PRIu64 " small records (%.0f MiB on disk): %.3f s "
	       "(scan %.3f s) -> %.1f s per million records\n", st.recovered,
	       (double)st.bytes / 1048576.0, t, (double)st.recover_ns / 1e9,
	       (double)st.recover_ns / 1e9 / ((double)st.recovered / 1e6));
	l2_close(l2);
	free(d.locs);
	rm_rf(dir);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	size_t chunk = 2 << 20;
	int mib = 256;
	bool quick = false, ra_only = false, pm_only = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mib") && i + 1 < argc)
			mib = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
			chunk = (size_t)atoi(argv[++i]) << 10;
		else if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--readahead"))
			ra_only = true;
		else if (!strcmp(argv[i], "--promotion"))
			pm_only = true;
		else {
			fprintf(stderr, "usage: kvfs_l2bench [--mib N] [--chunk KIB] "
				"[--quick] [--readahead] [--promotion]\n");
			return 2;
		}
	}
	if (!tmp || !*tmp)
		tmp = "/var/tmp";
	printf("# kvfs L2 benchmark\n");
	if (ra_only || pm_only) {
		const char *bin = getenv("KVFS_MOUNT_BIN");

		if (!bin || access(bin, X_OK)) {
			printf("(mount rows: KVFS_MOUNT_BIN not set: skipped)\n");
			return 77;
		}
		for (int k = 0; k < NTPL; k++)
			chunk_data(chunk, k);
		if (pm_only)
			promotion_mount(tmp, bin, chunk,
					(int)(((uint64_t)mib << 20) / chunk));
		if (ra_only)
			readahead_mount(tmp, bin, chunk,
					(int)(((uint64_t)mib << 20) / chunk));
		return 0;
	}
	codec_table(chunk, quick ? 2 : 4);
	for (int k = 0; k < NTPL; k++) /* before any reader thread */
		chunk_data(chunk, k);
	promotion(tmp, chunk, (int)(((uint64_t)mib << 20) / chunk));
	if (getenv("KVFS_MOUNT_BIN") && access(getenv("KVFS_MOUNT_BIN"), X_OK) == 0)
	{
		promotion_mount(tmp, getenv("KVFS_MOUNT_BIN"), chunk,
				(int)(((uint64_t)mib << 20) / chunk));
		readahead_mount(tmp, getenv("KVFS_MOUNT_BIN"), chunk,
				(int)(((uint64_t)mib << 20) / chunk));
	}
	else
		printf("\n(mount promotion skipped: KVFS_MOUNT_BIN not set)\n");
	recovery_small(tmp, quick ? 5000 : 20000);
	return 0;
}
