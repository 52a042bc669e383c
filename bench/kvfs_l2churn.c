/*
 * kvfs_l2churn - L2's effective capacity under churn (a report, not a
 * test; issue 27, item 4).
 *
 * The engine (tier.h) with an L1 and an L2 directory; chunks are written
 * through L1 (evicted to L2) while a random member of the set the bench
 * keeps is unlinked whenever that set passes a target (a fraction of
 * l2_size), so L2 holds live records and garbage mixed, as a cache whose
 * engine deletes what it no longer needs. After L2 has taken 4 times its
 * size, over one more l2_size of writes, it reports:
 *
 *   L2 live     the mean of L2's live bytes (stats l2.bytes), sampled
 *   capacity    that / l2_size: L2's effective capacity
 *   kept        of the set the bench still holds, the share the engine
 *               still has (the rest was dropped by a reclaim)
 *   WA          write amplification: L2 bytes written / (written - moved)
 *
 * Options: --l1 MIB (64), --l2 MIB (256), --chunk KIB (256), --dir DIR
 * (default $TMPDIR or /var/tmp), --targets a,b,c (fractions of l2_size;
 * default 0.25,0.5,0.75,0.9,1.5). Chunks are stored raw (compress none)
 * so sizes on disk are the bench's own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tier/tier.h"

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static struct kvfs_key key_of(uint64_t id)
{
	struct kvfs_key k;
	uint64_t s = id * 7919 + 1;

	for (int i = 0; i < 16; i += 8) {
		uint64_t v = rng(&s);

		memcpy(k.b + i, &v, 8);
	}
	memcpy(k.b, &id, sizeof(id));
	return k;
}

static int put(struct tier *t, uint32_t ns, uint64_t id, uint8_t *buf,
	       size_t len)
{
	struct kvfs_key k = key_of(id);
	struct tier_wr *w;
	int rc;

	memcpy(buf, &id, sizeof(id)); /* distinct chunks */
	rc = tier_wr_begin(t, ns, &k, len, &w);
	if (rc)
		return rc;
	rc = tier_wr_pwrite(t, w, buf, len, 0);
	if (rc) {
		tier_wr_abort(t, w);
		return rc;
	}
	return tier_wr_publish(t, w, NULL);
}

static void rm_dir(const char *dir)
{
	kvfs_test_rm_files(dir);
	rmdir(dir);
}

struct result {
	double live_mib, capacity, kept, wa;
	uint64_t reclaims, compactions;
};

static int run(const char *base, uint64_t l1, uint64_t l2, size_t chunk,
	       double target, struct result *res)
{
	char dir[4096], err[256];
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	uint64_t *set, nset = 0, setcap, next = 0, seed = 42, samples = 0;
	uint64_t goal = (uint64_t)(target * (double)l2), kept = 0;
	double live_sum = 0;
	uint8_t *buf;
	uint32_t ns;
	int rc;

	snprintf(dir, sizeof(dir), "%s/kvfs-l2churn-XXXXXX", base);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	tier_config_default(&c);
	c.l1_size = l1;
	c.max_chunk = chunk;
	c.policy = "lru";
	c.l2_dir = dir;
	c.l2_size = l2;
	c.compress_level = 0;
	rc = tier_create(&c, &t, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tier_create: %s\n", err);
		rm_dir(dir);
		return -1;
	}
	setcap = goal / chunk + 2;
	set = calloc(setcap, sizeof(*set));
	buf = malloc(chunk);
	if (!set || !buf || tier_ns_create(t, "churn", &ns)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < chunk; i += 8) {
		uint64_t v = rng(&seed);

		memcpy(buf + i, &v, chunk - i < 8 ? chunk - i : 8);
	}
	for (;;) {
		uint64_t demoted;

		if (put(t, ns, next, buf, chunk)) {
			fprintf(stderr, "write failed\n");
			break;
		}
		set[nset++] = next++;
		while ((nset * chunk > goal || nset == setcap) && nset) {
			uint64_t i = rng(&seed) % nset;
			struct kvfs_key k = key_of(set[i]);

			tier_unlink(t, ns, &k); /* may be gone already */
			set[i] = set[--nset];
		}
		if (next % 16)
			continue;
		tier_get_stats(t, &st);
		demoted = st.l2_write_bytes - st.l2_moved_bytes;
		if (demoted >= 4 * l2) {
			live_sum += (double)st.l2_bytes;
			samples++;
		}
		if (demoted >= 5 * l2)
			break;
	}
	usleep(200000);
	tier_get_stats(t, &st);
	for (uint64_t i = 0; i < nset; i++) {
		struct kvfs_key k = key_of(set[i]);
		struct tier_info info;

		kept += tier_stat(t, ns, &k, &info) == 0;
	}
	res->live_mib = samples ? live_sum / (double)samples / 1048576.0 : 0;
	res->capacity = samples ? live_sum / (double)samples / (double)l2 : 0;
	res->kept = nset ? (double)kept / (double)nset : 1;
	res->wa = st.l2_write_bytes > st.l2_moved_bytes ?
		  (double)st.l2_write_bytes /
		  (double)(st.l2_write_bytes - st.l2_moved_bytes) : 0;
	res->reclaims = st.l2_reclaims;
	res->compactions = st.l2_compactions;
	tier_destroy(t);
	free(set);
	free(buf);
	rm_dir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t l1 = 64ull << 20, l2 = 256ull << 20;
	size_t chunk = 256 << 10;
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	char targets[256] = "0.25,0.5,0.75,0.9,1.5";

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--l1"))
			l1 = strtoull(argv[i + 1], NULL, 10) << 20;
		else if (!strcmp(argv[i], "--l2"))
			l2 = strtoull(argv[i + 1], NULL, 10) << 20;
		else if (!strcmp(argv[i], "--chunk"))
			chunk = (size_t)strtoull(argv[i + 1], NULL, 10) << 10;
		else if (!strcmp(argv[i], "--dir"))
			base = argv[i + 1];
		else if (!strcmp(argv[i], "--targets"))
			snprintf(targets, sizeof(targets), "%s", argv[i + 1]);
		else {
			fprintf(stderr, "usage: %s [--l1 MIB] [--l2 MIB] "
				"[--chunk KIB] [--dir DIR] [--targets a,b]\n",
				argv[0]);
			return 2;
		}
	}
	if (argc % 2 == 0 || !chunk || !l1 || !l2) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	printf("L2 under churn: L1 %" PRIu64 " MiB, L2 %" PRIu64 " MiB, "
	       "chunks %zu KiB, random unlinks keep the set at target\n",
	       l1 >> 20, l2 >> 20, chunk >> 10);
	printf("%-8s %10s %10s %9s %7s %6s %9s %11s\n", "target", "set MiB",
	       "L2 live", "capacity", "kept", "WA", "reclaims",
	       "compactions");
	for (char *tok = strtok(targets, ","); tok; tok = strtok(NULL, ",")) {
		double f = strtod(tok, NULL);
		struct result r;

		if (f <= 0 || run(base, l1, l2, chunk, f, &r))
			continue;
		printf("%-8.2f %10.0f %10.1f %8.1f%% %6.1f%% %6.2f %9" PRIu64
		       " %11" PRIu64 "\n", f, f * (double)(l2 >> 20),
		       r.live_mib, 100 * r.capacity, 100 * r.kept, r.wa,
		       r.reclaims, r.compactions);
		fflush(stdout);
	}
	return 0;
}
