/*
 * kvfs_demo.c - an engine-like workload on a mounted kvfs (`make demo`).
 *
 *   kvfs_demo MOUNTPOINT [--conversations N] [--turns N] [--prompts N]
 *             [--chunk-tokens N] [--chunk-bytes B] [--threads N]
 *             [--seed S] [--ns NAME] [--stat-lookup]
 *
 * What an inference engine does with kvfs, with plain syscalls and libkvfs's
 * key function: many multi-turn conversations share a handful of system
 * prompts and grow their own history. For every request the engine
 *   1. computes the chunk keys of the prompt (kvfs_keys, chained prefix
 *      hashes of chunk_tokens tokens each; a partial tail gets no key),
 *   2. learns how many leading chunks are cached: kvfs_lookup (one
 *      KVFS_IOC_LOOKUP on the namespace fd) with KVFS_LOOKUP_PIN, or, where
 *      the mount does not answer that ioctl (or with --stat-lookup),
 *      fstatat() in order until the first miss,
 *   3. reads those chunks (open + read) and checks every byte,
 *   4. "prefills" the rest and writes each missing chunk (O_CREAT|O_EXCL,
 *      or a temporary name renamed onto the key for every other chunk: the
 *      two publication idioms), with user.kvfs.parent/depth set so the
 *      prefix eviction policy knows the chain.
 * A chunk's bytes are derived from its key (xorshift seeded by the key), so
 * any reader can verify them without remembering what was written. Tokens
 * come from a seeded PRNG: the same options give the same run.
 *
 * Exit status: 0 when every byte read was right, 1 otherwise, 2 for usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"

#define VOCAB 128000u

struct opts {
	const char *mnt;
	const char *ns;
	unsigned conversations;
	unsigned turns;
	unsigned prompts;
	unsigned chunk_tokens;
	size_t chunk_bytes;
	unsigned threads;
	uint64_t seed;
	bool stat_lookup;
};

/* Totals of one thread; summed at the end. */
struct tally {
	uint64_t requests;
	uint64_t prompt_tokens;
	uint64_t chunks_needed;  /* complete chunks in all prompts */
	uint64_t chunks_hit;     /* of those, in the cached leading run */
	uint64_t chunks_written;
	uint64_t chunks_raced;   /* present already when written (EEXIST) */
	uint64_t lost_after_lookup; /* found, then gone at open (no pin) */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t bad_chunks;     /* a byte differed, or the size */
	uint64_t lookups;
	double t_lookup, t_read, t_write; /* seconds */
};

/* Shared by the threads; the atomics are the only fields written. */
struct demo {
	struct opts o;
	int nsfd;
	uint32_t **sys;      /* system prompts, read-only after setup */
	unsigned *sys_len;
	atomic_bool use_ioctl;   /* batched lookup answered by the mount */
	atomic_bool use_xattr;   /* user.kvfs.parent/depth accepted */
	atomic_int reported;     /* first errors printed */
	struct tally tally[16];
};

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rnd_range(uint64_t *s, unsigned lo, unsigned hi)
{
	return lo + (unsigned)(splitmix(s) % (hi - lo + 1));
}

/*
 * The fake KV bytes of a chunk: four interleaved xorshift64* streams seeded
 * by its key (four so the CPU can run them side by side; one stream made
 * the generator, not kvfs, the bottleneck of the demo).
 */
struct kvgen {
	uint64_t x[4];
};

static void kvgen_init(struct kvgen *g, const struct kvfs_key *k)
{
	uint64_t a, b;

	memcpy(&a, k->b, 8);
	memcpy(&b, k->b + 8, 8);
	for (int i = 0; i < 4; i++) {
		uint64_t s = a ^ (b + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));

		g->x[i] = splitmix(&s) | 1;
	}
}

static inline uint64_t kvgen_next(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

static void fake_kv(const struct kvfs_key *k, uint8_t *buf, size_t len)
{
	struct kvgen g;
	size_t i;

	kvgen_init(&g, k);
	for (i = 0; i + 32 <= len; i += 32) {
		uint64_t v[4];

		for (int j = 0; j < 4; j++)
			v[j] = kvgen_next(&g.x[j]);
		memcpy(buf + i, v, 32);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)(i * 131u);
}

/* True when buf holds exactly the fake KV bytes of k. */
static bool fake_kv_check(const struct kvfs_key *k, const uint8_t *buf,
			  size_t len)
{
	struct kvgen g;
	size_t i;

	kvgen_init(&g, k);
	for (i = 0; i + 32 <= len; i += 32) {
		uint64_t v[4];

		for (int j = 0; j < 4; j++)
			v[j] = kvgen_next(&g.x[j]);
		if (memcmp(buf + i, v, 32))
			return false;
	}
	for (; i < len; i++)
		if (buf[i] != (uint8_t)(i * 131u))
			return false;
	return true;
}

static void report(struct demo *d, const char *fmt, const char *hex, int err)
{
	if (atomic_fetch_add(&d->reported, 1) < 5) {
		fprintf(stderr, "kvfs_demo: ");
		fprintf(stderr, fmt, hex, strerror(err));
		fputc('\n', stderr);
	}
}

/* ------------------------------------------------------------ lookup */

/*
 * How many leading keys are cached: libkvfs's kvfs_lookup (one
 * KVFS_IOC_LOOKUP per KVFS_LOOKUP_MAX keys) with PIN, so nothing of the run
 * is evicted before it is read; res gets the leases to release after
 * reading. Returns -1 when the mount does not answer the ioctl (the caller
 * falls back to stat).
 */
static long lookup_ioctl(struct demo *d, const struct kvfs_key *keys,
			 size_t n, struct kvfs_result *res)
{
	long found = kvfs_lookup(d->nsfd, keys, n, 0, KVFS_LOOKUP_PIN, 0, res);

	if (found < 0) {
		if (found != -ENOTTY && found != -ENOSYS && found != -EOPNOTSUPP)
			report(d, "kvfs_lookup%s: %s; using stat() from now on",
			       "", (int)-found);
		return -1;
	}
	return found;
}

static void unpin(struct demo *d, struct kvfs_result *res)
{
	int r = res->nleases ? kvfs_release(d->nsfd, res) : 0;

	if (r < 0)
		report(d, "kvfs_release%s: %s", "", -r);
}

static long lookup_stat(struct demo *d, const struct kvfs_key *keys, size_t n)
{
	char hex[KVFS_KEY_HEX_LEN + 1];
	struct stat st;
	size_t i;

	for (i = 0; i < n; i++) {
		kvfs_key_hex(&keys[i], hex);
		if (fstatat(d->nsfd, hex, &st, 0) < 0)
			break;
	}
	return (long)i;
}

/* ------------------------------------------------------------ chunks */

/* Reads chunk k into buf and checks it. 0, -ENOENT (gone), -EIO (wrong
 * bytes), or another -errno. */
static int read_chunk(struct demo *d, const struct kvfs_key *k, uint8_t *buf,
		      struct tally *t)
{
	char hex[KVFS_KEY_HEX_LEN + 1];
	size_t len = d->o.chunk_bytes, done = 0;
	int fd, e;

	kvfs_key_hex(k, hex);
	fd = openat(d->nsfd, hex, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r = read(fd, buf + done, len + 1 - done);

		if (r < 0) {
			e = errno;
			close(fd);
			report(d, "read %s: %s", hex, e);
			return -e;
		}
		if (r == 0)
			break;
		done += (size_t)r;
		if (done > len)
			break;
	}
	close(fd);
	t->bytes_read += done;
	if (done != len || !fake_kv_check(k, buf, len)) {
		t->bad_chunks++;
		report(d, "chunk %s: WRONG BYTES (%s)", hex, EIO);
		return -EIO;
	}
	return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = write(fd, buf + done, len - done);

		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/*
 * Writes chunk k (depth i in its chain, parent = the key before it) by one
 * of the two publication idioms. 0, -EEXIST (someone published it first:
 * fine, its bytes are the same), or another -errno.
 */
static int write_chunk(struct demo *d, const struct kvfs_key *k,
		       const struct kvfs_key *parent, unsigned depth,
		       uint8_t *buf, bool via_rename, unsigned tid,
		       struct tally *t)
{
	char hex[KVFS_KEY_HEX_LEN + 1], tmp[64], val[KVFS_KEY_HEX_LEN + 1];
	size_t len = d->o.chunk_bytes;
	int fd, r;

	kvfs_key_hex(k, hex);
	if (via_rename) {
		snprintf(tmp, sizeof(tmp), ".tmp.%u.%s", tid, hex);
		fd = openat(d->nsfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			    0644);
	} else {
		fd = openat(d->nsfd, hex, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			    0644);
	}
	if (fd < 0)
		return -errno;
	if (atomic_load(&d->use_xattr)) {
		int n;

		if (parent) {
			kvfs_key_hex(parent, val);
			r = fsetxattr(fd, KVFS_XATTR_PARENT, val, KVFS_KEY_HEX_LEN, 0);
		} else {
			r = 0;
		}
		n = snprintf(val, sizeof(val), "%u", depth);
		if (r == 0)
			r = fsetxattr(fd, KVFS_XATTR_DEPTH, val, (size_t)n, 0);
		if (r < 0) {
			/* Optional hints: say so once and stop trying. */
			if (atomic_exchange(&d->use_xattr, false))
				fprintf(stderr, "kvfs_demo: note: setting %s: %s; not setting parent/depth\n",
					KVFS_XATTR_DEPTH, strerror(errno));
		}
	}
	fake_kv(k, buf, len);
	r = write_all(fd, buf, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r) {
		if (via_rename)
			unlinkat(d->nsfd, tmp, 0);
		return r;
	}
	if (via_rename && renameat(d->nsfd, tmp, d->nsfd, hex) < 0) {
		r = -errno;
		unlinkat(d->nsfd, tmp, 0);
		return r;
	}
	t->bytes_written += len;
	return 0;
}

/* ------------------------------------------------------------ requests */

/* One request: the prompt tokens[0..n). */
static int serve(struct demo *d, unsigned tid, const uint32_t *tokens,
		 size_t n, struct kvfs_key *keys, size_t max_keys, uint8_t *buf)
{
	struct tally *t = &d->tally[tid];
	struct kvfs_result res = { 0 };
	long nk, found = -1;
	double t0, t1;

	nk = kvfs_keys(tokens, n, d->o.chunk_tokens, 0, NULL, 0, keys, max_keys);
	if (nk < 0) {
		fprintf(stderr, "kvfs_demo: kvfs_keys: %s\n", strerror((int)-nk));
		return -1;
	}
	t->requests++;
	t->prompt_tokens += n;
	t->chunks_needed += (uint64_t)nk;
	if (nk == 0)
		return 0;

	t0 = now_s();
	if (atomic_load(&d->use_ioctl)) {
		found = lookup_ioctl(d, keys, (size_t)nk, &res);
		if (found < 0)
			atomic_store(&d->use_ioctl, false);
	}
	if (found < 0)
		found = lookup_stat(d, keys, (size_t)nk);
	t1 = now_s();
	t->lookups++;
	t->t_lookup += t1 - t0;

	/* Read the cached leading run. Without a pin a chunk can be evicted
	 * between the lookup and the open: then the run ends there. */
	for (long i = 0; i < found; i++) {
		int r = read_chunk(d, &keys[i], buf, t);

		if (r == -ENOENT) {
			t->lost_after_lookup++;
			found = i;
			break;
		}
		if (r) {
			if (r != -EIO)
				t->bad_chunks++;
			found = i;
			break;
		}
	}
	unpin(d, &res);
	t0 = now_s();
	t->t_read += t0 - t1;
	t->chunks_hit += (uint64_t)found;

	/* Prefill computed the rest; offload it. */
	for (long i = found; i < nk; i++) {
		int r = write_chunk(d, &keys[i], i ? &keys[i - 1] : NULL,
				    (unsigned)i, buf, (i & 1) != 0, tid, t);

		if (r == -EEXIST) {
			t->chunks_raced++;
		} else if (r) {
			char hex[KVFS_KEY_HEX_LEN + 1];

			kvfs_key_hex(&keys[i], hex);
			report(d, "write %s: %s", hex, -r);
			t->bad_chunks++;
			break;
		} else {
			t->chunks_written++;
		}
	}
	t->t_write += now_s() - t0;
	return 0;
}

struct worker {
	struct demo *d;
	unsigned tid;
	pthread_barrier_t *turn_barrier;
	int rc;
	pthread_t thread;
};

/*
 * The conversations of one thread (c % threads == tid). Every thread does
 * turn 0 of all its conversations, then waits for the others, then turn 1,
 * and so on: an engine serving many users at once, so a conversation's
 * chunks must stay cached across everyone else's requests.
 */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct demo *d = w->d;
	const struct opts *o = &d->o;
	unsigned nconv = 0;
	uint32_t **hist;
	size_t *hlen, cap;
	struct kvfs_key *keys;
	uint8_t *buf;
	size_t max_keys;
	unsigned turn = 0;

	/* Longest prompt: system + turns x (user + assistant) tokens. */
	cap = 2048 + (size_t)o->turns * 1000;
	max_keys = cap / o->chunk_tokens + 1;
	for (unsigned c = w->tid; c < o->conversations; c += o->threads)
		nconv++;
	hist = calloc(nconv, sizeof(*hist));
	hlen = calloc(nconv, sizeof(*hlen));
	keys = calloc(max_keys, sizeof(*keys));
	buf = malloc(o->chunk_bytes + 1);
	if (!hist || !hlen || !keys || !buf) {
		w->rc = -ENOMEM;
		goto out;
	}

	for (; turn < o->turns; turn++) {
		unsigned j = 0;

		for (unsigned c = w->tid; c < o->conversations; c += o->threads, j++) {
			/* Each conversation's tokens come from its own stream,
			 * so the run does not depend on the thread count. */
			uint64_t rs = o->seed * 1000003u + c * 7919u + turn;
			unsigned user, reply;

			if (!hist[j]) {
				unsigned p = (unsigned)(splitmix(&rs) % o->prompts);

				hist[j] = malloc(cap * sizeof(uint32_t));
				if (!hist[j]) {
					w->rc = -ENOMEM;
					goto out;
				}
				memcpy(hist[j], d->sys[p], d->sys_len[p] * sizeof(uint32_t));
				hlen[j] = d->sys_len[p];
			}
			user = rnd_range(&rs, 40, 400);
			for (unsigned i = 0; i < user; i++)
				hist[j][hlen[j]++] = (uint32_t)(splitmix(&rs) % VOCAB);
			if (serve(d, w->tid, hist[j], hlen[j], keys, max_keys, buf)) {
				w->rc = -EIO;
				goto out;
			}
			reply = rnd_range(&rs, 40, 500);
			for (unsigned i = 0; i < reply; i++)
				hist[j][hlen[j]++] = (uint32_t)(splitmix(&rs) % VOCAB);
		}
		pthread_barrier_wait(w->turn_barrier);
	}
out:
	if (w->rc) {
		fprintf(stderr, "kvfs_demo: thread %u: %s\n", w->tid, strerror(-w->rc));
		/* Let the other threads finish their turns. */
		for (; turn < o->turns; turn++)
			pthread_barrier_wait(w->turn_barrier);
	}
	for (unsigned j = 0; j < nconv && hist; j++)
		free(hist[j]);
	free(hist);
	free(hlen);
	free(keys);
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
	fprintf(stderr,
		"usage: kvfs_demo MOUNTPOINT [--conversations N] [--turns N] [--prompts N]\n"
		"                 [--chunk-tokens N] [--chunk-bytes B] [--threads N]\n"
		"                 [--seed S] [--ns NAME] [--stat-lookup]\n");
	exit(2);
}

static unsigned long arg_num(const char *v, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 0);
	if (errno || *end || x < lo || x > hi) {
		fprintf(stderr, "kvfs_demo: '%s' is not a number in %lu..%lu\n", v, lo, hi);
		exit(2);
	}
	return x;
}

int main(int argc, char **argv)
{
	struct demo *d = calloc(1, sizeof(*d));
	struct opts *o;
	struct tally sum = { 0 };
	struct worker w[16];
	pthread_barrier_t barrier;
	char path[PATH_MAX], val[32];
	uint64_t s;
	double t0, el;
	bool failed = false;

	if (!d)
		return 1;
	o = &d->o;
	*o = (struct opts){ .ns = "llama3-8b.bf16.tp1.r0", .conversations = 300,
			    .turns = 4, .prompts = 5, .chunk_tokens = 256,
			    .chunk_bytes = 256 << 10, .threads = 2, .seed = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-') {
			if (o->mnt)
				usage();
			o->mnt = a;
			continue;
		}
		if (!strcmp(a, "--stat-lookup")) {
			o->stat_lookup = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--conversations"))
			o->conversations = (unsigned)arg_num(v, 1, 100000);
		else if (!strcmp(a, "--turns"))
			o->turns = (unsigned)arg_num(v, 1, 20);
		else if (!strcmp(a, "--prompts"))
			o->prompts = (unsigned)arg_num(v, 1, 1000);
		else if (!strcmp(a, "--chunk-tokens"))
			o->chunk_tokens = (unsigned)arg_num(v, 16, 4096);
		else if (!strcmp(a, "--chunk-bytes"))
			o->chunk_bytes = arg_num(v, 8, 64ul << 20);
		else if (!strcmp(a, "--threads"))
			o->threads = (unsigned)arg_num(v, 1, 16);
		else if (!strcmp(a, "--seed"))
			o->seed = arg_num(v, 0, ~0ul);
		else if (!strcmp(a, "--ns"))
			o->ns = v;
		else
			usage();
	}
	if (!o->mnt)
		usage();

	/* The namespace: one model + KV layout + rank. */
	if (snprintf(path, sizeof(path), "%s/%s", o->mnt, o->ns) >= (int)sizeof(path))
		usage();
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "kvfs_demo: mkdir %s: %s\n", path, strerror(errno));
		return 1;
	}
	d->nsfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->nsfd < 0) {
		fprintf(stderr, "kvfs_demo: open %s: %s\n", path, strerror(errno));
		return 1;
	}
	/* Declaring the chunk size makes kvfs discard short chunks. */
	snprintf(val, sizeof(val), "%zu", o->chunk_bytes);
	if (fsetxattr(d->nsfd, KVFS_XATTR_CHUNK_BYTES, val, strlen(val), 0) < 0)
		fprintf(stderr, "kvfs_demo: note: setting %s on %s: %s\n",
			KVFS_XATTR_CHUNK_BYTES, path, strerror(errno));
	/* The element type picks L2's byte shuffle (bf16: 2-byte planes). */
	if (fsetxattr(d->nsfd, KVFS_XATTR_DTYPE, "bf16", 4, 0) < 0)
		fprintf(stderr, "kvfs_demo: note: setting %s on %s: %s\n",
			KVFS_XATTR_DTYPE, path, strerror(errno));
	atomic_init(&d->use_ioctl, !o->stat_lookup);
	atomic_init(&d->use_xattr, true);
	atomic_init(&d->reported, 0);

	/* System prompts of 600..1600 tokens. */
	d->sys = calloc(o->prompts, sizeof(*d->sys));
	d->sys_len = calloc(o->prompts, sizeof(*d->sys_len));
	if (!d->sys || !d->sys_len)
		return 1;
	s = o->seed ^ 0x5eed5eed5eedull;
	for (unsigned p = 0; p < o->prompts; p++) {
		d->sys_len[p] = rnd_range(&s, 600, 1600);
		d->sys[p] = malloc(d->sys_len[p] * sizeof(uint32_t));
		if (!d->sys[p])
			return 1;
		for (unsigned i = 0; i < d->sys_len[p]; i++)
			d->sys[p][i] = (uint32_t)(splitmix(&s) % VOCAB);
	}

	printf("kvfs_demo: %u conversations x %u turns, %u system prompts, "
	       "%u tokens / %zu KiB per chunk, %u threads, namespace %s\n",
	       o->conversations, o->turns, o->prompts, o->chunk_tokens,
	       o->chunk_bytes >> 10, o->threads, o->ns);
	fflush(stdout);

	pthread_barrier_init(&barrier, NULL, o->threads);
	t0 = now_s();
	for (unsigned i = 0; i < o->threads; i++) {
		w[i] = (struct worker){ .d = d, .tid = i, .turn_barrier = &barrier };
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			fprintf(stderr, "kvfs_demo: pthread_create failed\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < o->threads; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].rc)
			failed = true;
	}
	el = now_s() - t0;

	for (unsigned i = 0; i < o->threads; i++) {
		struct tally *t = &d->tally[i];

		sum.requests += t->requests;
		sum.prompt_tokens += t->prompt_tokens;
		sum.chunks_needed += t->chunks_needed;
		sum.chunks_hit += t->chunks_hit;
		sum.chunks_written += t->chunks_written;
		sum.chunks_raced += t->chunks_raced;
		sum.lost_after_lookup += t->lost_after_lookup;
		sum.bytes_read += t->bytes_read;
		sum.bytes_written += t->bytes_written;
		sum.bad_chunks += t->bad_chunks;
		sum.lookups += t->lookups;
		sum.t_lookup += t->t_lookup;
		sum.t_read += t->t_read;
		sum.t_write += t->t_write;
	}

	printf("lookup:      %s, %.1f us per request (%" PRIu64 " lookups)\n",
	       atomic_load(&d->use_ioctl) ? "kvfs_lookup(): one batched KVFS_IOC_LOOKUP with pin"
					 : "fstatat() per chunk in order",
	       sum.lookups ? sum.t_lookup / (double)sum.lookups * 1e6 : 0.0,
	       sum.lookups);
	printf("requests:    %" PRIu64 ", %" PRIu64 " prompt tokens, %" PRIu64
	       " complete chunks\n", sum.requests, sum.prompt_tokens,
	       sum.chunks_needed);
	printf("hit ratio:   %.1f%% of chunks (%" PRIu64 " read from the cache, %"
	       PRIu64 " prefilled and written)\n",
	       sum.chunks_needed ? 100.0 * (double)sum.chunks_hit /
					   (double)sum.chunks_needed : 0.0,
	       sum.chunks_hit, sum.chunks_written + sum.chunks_raced);
	if (sum.chunks_raced)
		printf("             %" PRIu64 " of those found the chunk already published "
		       "(by another thread, or after a gap): EEXIST, same bytes\n",
		       sum.chunks_raced);
	if (sum.lost_after_lookup)
		printf("             %" PRIu64 " chunks evicted between lookup and open (no pin): counted as misses\n",
		       sum.lost_after_lookup);
	printf("read:        %.1f MiB, %.2f GB/s per thread while reading (open + read + verify)\n",
	       (double)sum.bytes_read / 1048576.0,
	       sum.t_read > 0 ? (double)sum.bytes_read / sum.t_read / 1e9 : 0.0);
	printf("written:     %.1f MiB, %.2f GB/s per thread while writing (generate + write + publish)\n",
	       (double)sum.bytes_written / 1048576.0,
	       sum.t_write > 0 ? (double)sum.bytes_written / sum.t_write / 1e9 : 0.0);
	printf("total:       %.2f s, %.0f requests/s, %.2f GB/s read + written\n",
	       el, (double)sum.requests / el,
	       (double)(sum.bytes_read + sum.bytes_written) / el / 1e9);
	if (sum.bad_chunks || failed) {
		printf("verify:      FAILED: %" PRIu64 " chunks wrong or unwritable\n",
		       sum.bad_chunks);
		failed = true;
		goto out;
	}
	printf("verify:      every byte read matched what was written\n");
	{
		/* A chunk every conversation on system prompt 0 shares, for
		 * the inspection that follows in demo.sh. */
		struct kvfs_key k;
		char hex[KVFS_KEY_HEX_LEN + 1];

		if (kvfs_keys(d->sys[0], d->sys_len[0], o->chunk_tokens, 0, NULL,
			      0, &k, 1) == 1) {
			kvfs_key_hex(&k, hex);
			printf("shared chunk: %s/%s\n", o->ns, hex);
		}
	}
out:
	close(d->nsfd);
	for (unsigned p = 0; p < o->prompts; p++)
		free(d->sys[p]);
	free(d->sys);
	free(d->sys_len);
	pthread_barrier_destroy(&barrier);
	free(d);
	return failed ? 1 : 0;
}
