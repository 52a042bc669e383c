/*
 * kvfs_load.c - the mixed load of kvfs_load.h: writers (create+write+close
 * of a key, or a temporary renamed onto it), unlinks, stats, and readers
 * that verify every byte they read against the oracle.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/kvfs_test.h"
#include "tests/load/kvfs_load.h"

const char *const load_op_names[LOP_N] = {
	[LOP_WRITE] = "write", [LOP_READ] = "read", [LOP_STAT] = "stat",
	[LOP_UNLINK] = "unlink", [LOP_RENAME] = "rename",
};

#define IO_PIECE (64 * 1024)

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void load_name(uint64_t n, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)n,
		 (unsigned long long)kvfs_test_mix64(n ^ 0x6b7666736c6f6164ULL));
}

int load_parse(const char *name, uint64_t *n)
{
	char want[33], *end;
	unsigned long long v;

	if (strlen(name) != 32)
		return -1;
	char hi[17];

	memcpy(hi, name, 16);
	hi[16] = 0;
	v = strtoull(hi, &end, 16);
	if (*end)
		return -1;
	load_name(v, want);
	if (strcmp(want, name))
		return -1;
	*n = v;
	return 0;
}

size_t load_len(const struct load_cfg *c, uint64_t n)
{
	size_t span = c->max_len - c->min_len + 1;

	return c->min_len + (size_t)(kvfs_test_mix64(n * 31 + 7) % span);
}

/* ------------------------------------------------------------ histograms */

/* bucket: 8 linear steps per power of two of microseconds */
static unsigned int hbucket(uint64_t us)
{
	unsigned int lg;

	if (us < 8)
		return (unsigned int)us;
	lg = 63u - (unsigned int)__builtin_clzll(us);
	return (lg - 2) * 8 + (unsigned int)((us >> (lg - 3)) & 7);
}

static double hvalue(unsigned int b)
{
	unsigned int lg;

	if (b < 8)
		return b;
	lg = b / 8 + 2;
	return (double)((8u + b % 8) * (1ull << (lg - 3)));
}

static void hadd(struct load_hist *h, uint64_t us)
{
	unsigned int b = hbucket(us);

	atomic_fetch_add_explicit(&h->b[b < LOAD_HBUCKETS ? b :
				       LOAD_HBUCKETS - 1], 1,
				  memory_order_relaxed);
}

uint64_t load_hist_count(const struct load_hist *h)
{
	uint64_t n = 0;

	for (int i = 0; i < LOAD_HBUCKETS; i++)
		n += atomic_load(&h->b[i]);
	return n;
}

double load_hist_pct(const struct load_hist *h, double p)
{
	uint64_t n = load_hist_count(h), acc = 0, want;

	if (!n)
		return 0;
	want = (uint64_t)((double)n * p / 100.0);
	if (want >= n)
		want = n - 1;
	for (unsigned int i = 0; i < LOAD_HBUCKETS; i++) {
		acc += atomic_load(&h->b[i]);
		if (acc > want)
			return hvalue(i);
	}
	return hvalue(LOAD_HBUCKETS - 1);
}

/* ------------------------------------------------------------ the oracle */

long load_verify_fd(const struct load_cfg *c, int fd, uint64_t n)
{
	size_t len = load_len(c, n), off = 0;
	uint8_t *buf = malloc(IO_PIECE), *want = malloc(IO_PIECE);
	long wrong = 0;

	if (!buf || !want) {
		free(buf);
		free(want);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf, IO_PIECE);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			wrong = -errno;
			break;
		}
		if (r == 0) {
			if (off < len)
				wrong += (long)(len - off);
			break;
		}
		if (off >= len) {
			wrong += r; /* more bytes than written */
		} else {
			size_t k = (size_t)r < len - off ? (size_t)r : len - off;

			kvfs_test_fill(want, k, n, off);
			for (size_t i = 0; i < k; i++)
				wrong += buf[i] != want[i];
			wrong += (long)((size_t)r - k);
		}
		off += (size_t)r;
	}
	free(buf);
	free(want);
	return wrong;
}

/* ------------------------------------------------------------ threads */

struct worker {
	struct load *l;
	int idx;
	bool writer;
};

static _Atomic uint8_t *st_of(struct load *l, int ns, uint64_t n)
{
	return &l->state[(uint64_t)ns * l->cfg.nids + n];
}

static void path_of(const struct load *l, char *p, size_t len, int ns,
		    uint64_t n)
{
	char name[33];

	load_name(n, name);
	snprintf(p, len, "%s/ns%d/%s", l->cfg.root, ns, name);
}

/* Writes id n's bytes to fd; 0 or -errno. */
static int write_chunk(struct load *l, int fd, uint64_t n, uint8_t *buf)
{
	size_t len = load_len(&l->cfg, n), off = 0;

	while (off < len) {
		size_t k = len - off < IO_PIECE ? len - off : IO_PIECE;
		ssize_t w;

		kvfs_test_fill(buf, k, n, off);
		w = pwrite(fd, buf, k, (off_t)off);
		if (w < 0)
			return -errno;
		off += (size_t)w;
	}
	atomic_fetch_add(&l->bytes_written, len);
	return 0;
}

/* The first errors of each kind are worth a line (which errno). */
static void note_err(struct load *l, enum load_op op, int err)
{
	if (atomic_fetch_add(&l->errs[op], 1) < 3)
		fprintf(stderr, "kvfs_load: %s: %s\n", load_op_names[op],
			strerror(err));
}

static void op_write(struct load *l, struct worker *w, int ns, uint64_t n,
		     bool via_temp, uint8_t *buf)
{
	_Atomic uint8_t *st = st_of(l, ns, n);
	char p[4200], tmp[4200];
	uint64_t t0 = now_us();
	enum load_op op = via_temp ? LOP_RENAME : LOP_WRITE;
	int fd, rc;

	path_of(l, p, sizeof(p), ns, n);
	atomic_store(st, LS_BUSY);
	if (via_temp) {
		snprintf(tmp, sizeof(tmp), "%s/ns%d/.w%d", l->cfg.root, ns,
			 w->idx);
		fd = open(tmp, O_CREAT | O_TRUNC | O_RDWR, 0644);
	} else {
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	}
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = write_chunk(l, fd, n, buf);
	if (close(fd) && !rc)
		rc = -errno;
	if (via_temp) {
		if (!rc && rename(tmp, p))
			rc = -errno;
		if (rc)
			unlink(tmp);
	}
out:
	atomic_fetch_add(&l->ops[op], 1);
	hadd(&l->lat[op], now_us() - t0);
	if (!rc) {
		atomic_store(st, LS_PUBLISHED);
	} else {
		/* EEXIST: published before (and maybe evicted since);
		 * anything else: nothing was acknowledged */
		if (rc != -EEXIST)
			note_err(l, op, -rc);
		atomic_store(st, rc == -EEXIST ? LS_PUBLISHED : LS_ABSENT);
	}
}

static void op_unlink(struct load *l, int ns, uint64_t n)
{
	_Atomic uint8_t *st = st_of(l, ns, n);
	char p[4200];
	uint64_t t0 = now_us();
	int rc;

	path_of(l, p, sizeof(p), ns, n);
	atomic_store(st, LS_BUSY);
	rc = unlink(p) ? -errno : 0;
	atomic_fetch_add(&l->ops[LOP_UNLINK], 1);
	hadd(&l->lat[LOP_UNLINK], now_us() - t0);
	if (rc && rc != -ENOENT)
		note_err(l, LOP_UNLINK, -rc);
	atomic_store(st, rc ? LS_ABSENT : LS_UNLINKED);
}

static void op_read(struct load *l, int ns, uint64_t n)
{
	char p[4200];
	uint64_t t0 = now_us();
	long wrong;
	int fd;

	path_of(l, p, sizeof(p), ns, n);
	fd = open(p, O_RDONLY);
	if (fd < 0) {
		if (errno == ENOENT)
			atomic_fetch_add(&l->misses, 1);
		else
			note_err(l, LOP_READ, errno);
		goto out;
	}
	wrong = load_verify_fd(&l->cfg, fd, n);
	close(fd);
	if (wrong < 0) {
		note_err(l, LOP_READ, (int)-wrong);
	} else {
		atomic_fetch_add(&l->verified, 1);
		atomic_fetch_add(&l->bytes_read, load_len(&l->cfg, n));
		if (wrong) {
			fprintf(stderr, "kvfs_load: %s: %ld wrong bytes\n", p,
				wrong);
			atomic_fetch_add(&l->wrong, (uint64_t)wrong);
		}
	}
out:
	atomic_fetch_add(&l->ops[LOP_READ], 1);
	hadd(&l->lat[LOP_READ], now_us() - t0);
}

static void op_stat(struct load *l, int ns, uint64_t n)
{
	char p[4200];
	uint64_t t0 = now_us();
	struct stat sb;

	path_of(l, p, sizeof(p), ns, n);
	if (stat(p, &sb) == 0) {
		if ((size_t)sb.st_size != load_len(&l->cfg, n)) {
			fprintf(stderr, "kvfs_load: %s: size %lld, want %zu\n",
				p, (long long)sb.st_size, load_len(&l->cfg, n));
			atomic_fetch_add(&l->wrong, 1);
		}
	} else if (errno != ENOENT) {
		note_err(l, LOP_STAT, errno);
	}
	atomic_fetch_add(&l->ops[LOP_STAT], 1);
	hadd(&l->lat[LOP_STAT], now_us() - t0);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	unsigned int seed = l->cfg.seed * 7919u + (unsigned int)w->idx;
	uint8_t *buf = malloc(IO_PIECE);
	int nw = l->cfg.writers;

	while (buf && !atomic_load(&l->stop)) {
		int ns = rand_r(&seed) % l->cfg.nns, dice = rand_r(&seed) % 100;
		uint64_t n = (uint64_t)rand_r(&seed) % l->cfg.nids;

		if (!w->writer) {
			if (dice < 80)
				op_read(l, ns, n);
			else
				op_stat(l, ns, n);
			continue;
		}
		/* a writer touches only its own ids: its acknowledgements
		 * are then the state of record */
		n -= n % (uint64_t)nw;
		n += (uint64_t)w->idx;
		if (n >= l->cfg.nids)
			continue;
		if (dice < 60) {
			if (atomic_load(st_of(l, ns, n)) == LS_PUBLISHED)
				op_stat(l, ns, n);
			else
				op_write(l, w, ns, n, dice < 25, buf);
		} else if (dice < 75) {
			op_unlink(l, ns, n);
		} else {
			op_stat(l, ns, n);
		}
	}
	free(buf);
	free(w);
	return NULL;
}

int load_init(struct load *l, const struct load_cfg *cfg)
{
	memset(l, 0, sizeof(*l));
	l->cfg = *cfg;
	if (cfg->writers + cfg->readers > 64 || cfg->writers < 1 ||
	    cfg->nns < 1 || cfg->nids < 1 || cfg->min_len > cfg->max_len)
		return -EINVAL;
	l->state = calloc((size_t)(cfg->nns * cfg->nids), 1);
	return l->state ? 0 : -ENOMEM;
}

int load_start(struct load *l, const char *root)
{
	char p[4200];

	l->cfg.root = root;
	for (int i = 0; i < l->cfg.nns; i++) {
		snprintf(p, sizeof(p), "%s/ns%d", root, i);
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
	}
	for (int i = 0; i < l->cfg.writers + l->cfg.readers; i++) {
		struct worker *w = calloc(1, sizeof(*w));

		if (w) {
			w->l = l;
			w->writer = i < l->cfg.writers;
			w->idx = w->writer ? i : i - l->cfg.writers;
		}
		if (!w || pthread_create(&l->th[l->nth], NULL, worker_main, w)) {
			free(w);
			load_stop(l);
			return -EAGAIN;
		}
		l->nth++;
	}
	return 0;
}

void load_stop(struct load *l)
{
	atomic_store(&l->stop, true);
	for (int i = 0; i < l->nth; i++)
		pthread_join(l->th[i], NULL);
	l->nth = 0;
	atomic_store(&l->stop, false);
}

void load_free(struct load *l)
{
	free(l->state);
	l->state = NULL;
}

int load_check_all(struct load *l, uint64_t *verified, uint64_t *wrong,
		   uint64_t *lost, uint64_t *resurrected, uint64_t *foreign)
{
	size_t total = (size_t)(l->cfg.nns * l->cfg.nids);
	uint8_t *seen = calloc(total ? total : 1, 1);
	char p[4200];

	if (!seen)
		return -ENOMEM;
	for (int ns = 0; ns < l->cfg.nns; ns++) {
		DIR *d;
		struct dirent *de;

		snprintf(p, sizeof(p), "%s/ns%d", l->cfg.root, ns);
		d = opendir(p);
		if (!d) {
			if (errno == ENOENT)
				continue; /* the namespace itself was lost */
			free(seen);
			return -errno;
		}
		while ((de = readdir(d))) {
			uint64_t n;
			long bad;
			int fd;

			if (de->d_name[0] == '.')
				continue;
			if (load_parse(de->d_name, &n) || n >= l->cfg.nids) {
				(*foreign)++;
				continue;
			}
			snprintf(p, sizeof(p), "%s/ns%d/%s", l->cfg.root, ns,
				 de->d_name);
			fd = open(p, O_RDONLY);
			if (fd < 0)
				continue; /* evicted or unreadable: a miss */
			bad = load_verify_fd(&l->cfg, fd, n);
			close(fd);
			if (bad < 0)
				continue; /* EIO, ENODATA: a miss, not data */
			if (bad)
				fprintf(stderr, "kvfs_load: %s: %ld wrong bytes "
					"after the fault\n", p, bad);
			*wrong += (uint64_t)bad;
			(*verified)++;
			seen[(uint64_t)ns * l->cfg.nids + n] = 1;
		}
		closedir(d);
	}
	for (size_t i = 0; i < total; i++) {
		uint8_t s = atomic_load(&l->state[i]);

		if (s == LS_PUBLISHED && !seen[i])
			(*lost)++;
		if (s == LS_UNLINKED && seen[i])
			(*resurrected)++;
		atomic_store(&l->state[i], seen[i] ? LS_PUBLISHED : LS_ABSENT);
	}
	free(seen);
	return 0;
}
