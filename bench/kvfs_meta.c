/*
 * kvfs_meta.c - daemon-side metadata bytes per chunk of the engine.
 *
 *   kvfs_meta [-n CHUNKS] [-s BYTES] [-c RESIDENT] [-p POLICY|all]
 *
 * Publishes CHUNKS chunks (default 1,000,000) of BYTES bytes (default 0)
 * into one namespace of an engine whose L1 arena holds them all, then
 * prints the engine's own count (tier_get_stats().meta_bytes) and the heap
 * growth seen by malloc (mallinfo2: in-use bytes plus mmap'd blocks, so
 * malloc's per-allocation overhead and the index's bucket array count too),
 * each divided by CHUNKS.
 *
 * Why empty chunks by default: every non-empty chunk takes at least one
 * 4 KiB page of arena, so a million of them need a 4 GiB arena (pre-faulted
 * memory). Chunk bytes never add engine metadata (the allocator tracks free
 * extents only, and the chunk record's size is fixed), so empty chunks give
 * the same per-chunk number; `-s 1` checks that with the 4 GiB arena.
 *
 * -c RESIDENT (with -s > 0): an arena of only RESIDENT chunks, so the
 * engine evicts all the time and policies with ghost state (s3fifo) show
 * their steady-state cost; per-chunk numbers are then per resident chunk.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tier/policy/policy.h"
#include "tier/tier.h"

static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(const char *policy, uint64_t n, uint64_t size,
	       uint64_t resident)
{
	struct tier_config cfg;
	struct tier_stats st0, st;
	struct tier *t;
	char err[256];
	uint32_t ns;
	uint64_t h0, h1;
	double t0, t1;
	char *buf = NULL;
	int rc;

	tier_config_default(&cfg);
	cfg.policy = policy;
	cfg.l1_size = size ? resident * ((size + 4095) & ~4095ull) : 1 << 20;
	cfg.max_chunk = size ? ((size + 4095) & ~4095ull) : 4096;
	rc = tier_create(&cfg, &t, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "kvfs_meta: %s\n", err);
		return 1;
	}
	if (size) {
		buf = malloc(size);
		if (!buf)
			return 1;
		memset(buf, 0x5a, size);
	}
	rc = tier_ns_create(t, "meta.bench", &ns);
	if (rc < 0)
		return 1;
	malloc_trim(0);
	h0 = heap_bytes();
	tier_get_stats(t, &st0);
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		struct kvfs_key k;
		struct tier_wr *w;

		memset(&k, 0, sizeof(k));
		memcpy(k.b, &i, sizeof(i));
		k.b[15] = 0xA5;
		rc = tier_wr_begin(t, ns, &k, size, &w);
		if (rc == 0 && size)
			rc = tier_wr_pwrite(t, w, buf, size, 0);
		if (rc == 0)
			rc = tier_wr_publish(t, w, NULL);
		if (rc < 0) {
			fprintf(stderr, "kvfs_meta: chunk %llu: %s\n",
				(unsigned long long)i, strerror(-rc));
			return 1;
		}
	}
	t1 = now_s();
	h1 = heap_bytes();
	tier_get_stats(t, &st);
	if (st.l1_chunks != resident || st.l1_chunks + st.evictions != n) {
		fprintf(stderr, "kvfs_meta: expected %llu chunks in L1, have "
			"%llu (%llu evicted)\n", (unsigned long long)resident,
			(unsigned long long)st.l1_chunks,
			(unsigned long long)st.evictions);
		return 1;
	}
	printf("%-7s %9llu chunks of %llu B, %llu resident: meta_bytes "
	       "%.1f B/chunk, malloc growth %.1f B/chunk, %.0f publishes/s\n",
	       policy, (unsigned long long)n, (unsigned long long)size,
	       (unsigned long long)resident,
	       (double)(st.meta_bytes - st0.meta_bytes) / (double)resident,
	       (double)(h1 - h0) / (double)resident, (double)n / (t1 - t0));
	tier_destroy(t);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *policy = "s3fifo";
	uint64_t n = 1000000, size = 0, resident = 0;
	int c;

	while ((c = getopt(argc, argv, "n:s:c:p:h")) != -1) {
		switch (c) {
		case 'n':
			n = strtoull(optarg, NULL, 0);
			break;
		case 's':
			size = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			resident = strtoull(optarg, NULL, 0);
			break;
		case 'p':
			policy = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-n CHUNKS] [-s BYTES] "
				"[-c RESIDENT] [-p POLICY|all]\n", argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	if (resident == 0 || resident > n)
		resident = n;
	if (n == 0 || (resident < n && size == 0)) {
		fprintf(stderr, "kvfs_meta: need -n > 0, and -s > 0 with -c\n");
		return 2;
	}
	if (strcmp(policy, "all") == 0) {
		for (const char *const *p = policy_names(); *p; p++)
			if (run(*p, n, size, resident))
				return 1;
		return 0;
	}
	return run(policy, n, size, resident);
}
