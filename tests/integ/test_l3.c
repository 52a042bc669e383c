/*
 * test_l3.c - L3 on real mounts and real Redis servers: two kvfs mounts
 * act as two nodes sharing one standalone server, then a three-master
 * Redis Cluster. Node A publishes 200 chunks; node B's batched lookup finds
 * them in L3 (reported per tier) and B reads every byte equal; a value
 * overwritten with garbage through redis-cli is a miss, counted, and
 * deleted; unlink on A deletes from L3; `kvfsctl l3 drop NS` empties a
 * namespace; stopping one master makes its chunks miss within the bound
 * while the others hit; a restarted server is reconnected; bad options are
 * refused with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define NCHUNKS 200
#define CHUNK (64u << 10)
#define STR_(x) #x
#define STR(x) STR_(x)
#define TIMEOUT_MS 100       /* the bound the failure tests measure */
#define BUSY_TIMEOUT_MS 2000 /* elsewhere: no write lost to a loaded
			      * machine (a timed out pipeline drops them) */

static struct rt_server solo;
static struct rt_cluster cl;
static char authfile[256];

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A chain of keys for chunk i of "run" r. */
static void chain(struct kvfs_key *keys, size_t n, uint64_t r)
{
	struct kvfs_key prev;

	memset(&prev, 0, sizeof(prev));
	for (size_t i = 0; i < n; i++) {
		uint32_t tok[4] = { (uint32_t)i, (uint32_t)r, 7, 9 };

		assert_int_equal(kvfs_key_chunk(i ? &prev : NULL, r, NULL, 0,
						tok, 4, &keys[i]), 0);
		prev = keys[i];
	}
}

/* A node on url; l3_timeout_ms is BUSY_TIMEOUT_MS unless extra sets it. */
static void mount_l3(struct kvfs_mnt *m, const char *url, const char *extra)
{
	char opts[PATH_MAX + 1024], bound[32] = "";

	if (!extra || !strstr(extra, "l3_timeout_ms="))
		snprintf(bound, sizeof(bound), ",l3_timeout_ms=%d",
			 BUSY_TIMEOUT_MS);
	snprintf(opts, sizeof(opts), "l1_size=64M,l3=%s%s,l3_auth_file=%s%s%s",
		 url, bound, authfile, extra ? "," : "", extra ? extra : "");
	assert_int_equal(kvfs_test_mount(m, opts), 0);
}

/* A field of /.kvfs/stats' "l3" object. */
static long long l3_stat(const struct kvfs_mnt *m, const char *key)
{
	return kvfs_test_stat(m, "l3", key);
}

static void wait_stat(const struct kvfs_mnt *m, const char *key,
		      long long want)
{
	for (int i = 0; i < 300 && l3_stat(m, key) < want; i++)
		sleep_ms(20);
	if (l3_stat(m, key) < want)
		fprintf(stderr, "  %s: %lld < %lld (errors %lld, drops %lld, "
			"nodes_down %lld)\n", key, l3_stat(m, key), want,
			l3_stat(m, "errors"), l3_stat(m, "queue_drops"),
			l3_stat(m, "nodes_down"));
	assert_true(l3_stat(m, key) >= want);
}

static void publish(const struct kvfs_mnt *a, const char *ns,
		    const struct kvfs_key *keys, size_t n, uint64_t seed)
{
	int fd = kvfs_ns_open(a->dir, ns, KVFS_NS_CREATE, 0755);
	char *buf = malloc(CHUNK);

	assert_true(fd >= 0);
	for (size_t i = 0; i < n; i++) {
		kvfs_test_fill(buf, CHUNK, seed + i, 0);
		assert_int_equal(kvfs_put(fd, &keys[i], buf, CHUNK), 0);
	}
	free(buf);
	close(fd);
}

/* Reads chunk i on m and compares; 0, or -errno (-ENOENT: a miss). */
static long read_check(const struct kvfs_mnt *m, int fd,
		       const struct kvfs_key *key, uint64_t seed)
{
	char *buf = malloc(CHUNK + 1);
	long n = kvfs_get(fd, key, buf, CHUNK + 1);

	if (n >= 0) {
		assert_int_equal(n, CHUNK);
		assert_int_equal(kvfs_test_check(buf, CHUNK, seed, 0), 0);
		n = 0;
	}
	free(buf);
	return n;
}

static long long redis_exists(const struct rt_server *s, const char *ns,
			      const struct kvfs_key *key)
{
	char name[256], hex[33], out[256];

	kvfs_key_hex(key, hex);
	snprintf(name, sizeof(name), "kvfs:%s:%s", ns, hex);
	if (rt_cli(s, out, sizeof(out), "-c", "EXISTS", name, NULL))
		return -1;
	return atoll(out);
}

static void two_nodes(const char *url, const struct rt_server *any,
		      const char *ns)
{
	struct kvfs_mnt a, b;
	struct kvfs_key keys[NCHUNKS + 8];
	struct kvfs_result res;
	int fd;

	chain(keys, NCHUNKS + 8, 1);
	mount_l3(&a, url, "l3_ingest=all");
	mount_l3(&b, url, NULL);
	publish(&a, ns, keys, NCHUNKS, 100);
	wait_stat(&a, "puts", NCHUNKS);
	assert_int_equal(l3_stat(&a, "queue_drops"), 0);

	/* B has nothing locally: the whole run is in L3 */
	fd = kvfs_ns_open(b.dir, ns, KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	{ /* kvfsctl lookup says which tier: all l3 */
		const char *ctl = getenv("KVFS_CTL_BIN");
		char kf[PATH_MAX + 8], cmd[3 * PATH_MAX + 64], line[256], hex[33];
		FILE *f;

		snprintf(kf, sizeof(kf), "%s.keys", b.dir);
		f = fopen(kf, "w");
		assert_non_null(f);
		for (size_t i = 0; i < 10; i++) {
			kvfs_key_hex(&keys[i], hex);
			fprintf(f, "%s\n", hex);
		}
		fclose(f);
		snprintf(cmd, sizeof(cmd), "%s lookup %s/%s < %s",
			 ctl ? ctl : "build/asan/kvfsctl", b.dir, ns, kf);
		f = popen(cmd, "r");
		assert_non_null(f);
		assert_non_null(fgets(line, sizeof(line), f));
		assert_int_equal(pclose(f), 0);
		unlink(kf);
		assert_string_equal(line, "found=10 keys=10 l1=0 l2=0 l3=10\n");
	}
	long long rt0 = l3_stat(&b, "roundtrips");
	assert_int_equal(kvfs_lookup(fd, keys, NCHUNKS + 8, 0, 0, 0, &res),
			 NCHUNKS);
	assert_int_equal(res.in_l1, 0);
	assert_int_equal(res.in_l2, 0);
	assert_int_equal(res.in_l3, NCHUNKS);
	/* one pipelined round trip per node for the whole chain */
	assert_true(l3_stat(&b, "roundtrips") - rt0 <=
		    l3_stat(&b, "nodes"));
	for (size_t i = 0; i < NCHUNKS; i++)
		assert_int_equal(read_check(&b, fd, &keys[i], 100 + i), 0);
	assert_int_equal(l3_stat(&b, "hits"), NCHUNKS);
	/* promoted: now local to B */
	assert_int_equal(kvfs_lookup(fd, keys, NCHUNKS, 0, 0, 0, &res),
			 NCHUNKS);
	assert_int_equal(res.in_l1, NCHUNKS);
	assert_int_equal(res.in_l3, 0);

	/* a batched GET (kvfs_mget) promotes from L3 too: a third node */
	{
		struct kvfs_mnt c;
		struct kvfs_io io[8];
		char *bufs = malloc(8 * CHUNK);
		int cfd;

		mount_l3(&c, url, NULL);
		cfd = kvfs_ns_open(c.dir, ns, KVFS_NS_CREATE, 0755);
		memset(io, 0, sizeof(io));
		for (int i = 0; i < 8; i++) {
			io[i].key = keys[20 + i];
			io[i].buf = bufs + (size_t)i * CHUNK;
			io[i].len = CHUNK;
		}
		assert_int_equal(kvfs_mget(cfd, io, 8, 0), 8);
		for (int i = 0; i < 8; i++) {
			assert_int_equal(io[i].result, CHUNK);
			assert_int_equal(kvfs_test_check(io[i].buf, CHUNK,
							 120 + i, 0), 0);
		}
		assert_int_equal(l3_stat(&c, "promotions"), 8);
		close(cfd);
		free(bufs);
		assert_int_equal(kvfs_test_umount(&c), 0);
	}

	/* unlink on A deletes from L3 as well */
	char p[PATH_MAX], hex[33];
	kvfs_key_hex(&keys[0], hex);
	assert_int_equal(redis_exists(any, ns, &keys[0]), 1);
	assert_int_equal(unlink(kvfs_test_path(&a, p, "%s/%s", ns, hex)), 0);
	for (int i = 0; i < 100 && redis_exists(any, ns, &keys[0]); i++)
		sleep_ms(20);
	assert_int_equal(redis_exists(any, ns, &keys[0]), 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static void test_two_nodes_standalone(void **state)
{
	char url[128];

	two_nodes(rt_url(&solo, url, sizeof(url)), &solo, "twosolo");
}

static void test_two_nodes_cluster(void **state)
{
	char url[256];

	two_nodes(rt_cluster_url(&cl, url, sizeof(url)), &cl.node[0],
		  "twocluster");
}

static void test_garbage_is_a_miss(void **state)
{
	struct kvfs_mnt a, b;
	struct kvfs_key keys[4];
	char url[128], name[256], hex[33], out[256];
	int fd;

	chain(keys, 4, 2);
	mount_l3(&a, rt_url(&solo, url, sizeof(url)), "l3_ingest=all");
	mount_l3(&b, url, NULL);
	publish(&a, "garb", keys, 4, 500);
	wait_stat(&a, "puts", 4);
	kvfs_key_hex(&keys[1], hex);
	snprintf(name, sizeof(name), "kvfs:garb:%s", hex);
	assert_int_equal(rt_cli(&solo, out, sizeof(out), "SET", name,
				"not a kvfs record", NULL), 0);
	/* a value cut short, and one with a payload bit flipped */
	kvfs_key_hex(&keys[2], hex);
	snprintf(name, sizeof(name), "kvfs:garb:%s", hex);
	assert_int_equal(rt_cli(&solo, out, sizeof(out), "SETRANGE", name,
				"300", "X", NULL), 0);
	kvfs_key_hex(&keys[3], hex);
	snprintf(name, sizeof(name), "kvfs:garb:%s", hex);
	assert_int_equal(rt_cli(&solo, out, sizeof(out), "SETRANGE", name,
				"1", "Z", NULL), 0);

	fd = kvfs_ns_open(b.dir, "garb", KVFS_NS_CREATE, 0755);
	assert_int_equal(read_check(&b, fd, &keys[0], 500), 0);
	assert_int_equal(read_check(&b, fd, &keys[1], 501), -ENOENT);
	assert_int_equal(read_check(&b, fd, &keys[2], 502), -ENOENT);
	assert_int_equal(read_check(&b, fd, &keys[3], 503), -ENOENT);
	assert_int_equal(l3_stat(&b, "corrupt"), 3);
	/* a refused value is a miss, not a hit */
	assert_int_equal(l3_stat(&b, "hits"), 1);
	assert_true(l3_stat(&b, "misses") >= 3);
	/* the bad values were deleted (they were still the same) */
	assert_int_equal(redis_exists(&solo, "garb", &keys[1]), 0);
	assert_int_equal(redis_exists(&solo, "garb", &keys[2]), 0);
	assert_int_equal(redis_exists(&solo, "garb", &keys[3]), 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static void test_drop_ns(void **state)
{
	struct kvfs_mnt a;
	struct kvfs_key keys[30];
	char url[128], out[4096];
	const char *ctl = getenv("KVFS_CTL_BIN");

	chain(keys, 30, 3);
	mount_l3(&a, rt_url(&solo, url, sizeof(url)), "l3_ingest=all");
	publish(&a, "dropns", keys, 30, 900);
	publish(&a, "keepns", keys, 30, 900);
	/* a name that extends the dropped one past a ':' is another
	 * namespace: its keys "kvfs:dropns:x:<hex>" must survive */
	publish(&a, "dropns:x", keys, 30, 900);
	wait_stat(&a, "puts", 90);
	/* rmdir does not touch L3 (after the chunks are unlinked, it does:
	 * unlink is a deletion; here the namespace stays) */
	const char *argv[] = { ctl ? ctl : "build/asan/kvfsctl", "l3", "drop",
			       "dropns", a.dir, NULL };
	assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "30"));
	assert_int_equal(redis_exists(&solo, "dropns", &keys[5]), 0);
	assert_int_equal(redis_exists(&solo, "keepns", &keys[5]), 1);
	for (size_t i = 0; i < 30; i++)
		assert_int_equal(redis_exists(&solo, "dropns:x", &keys[i]), 1);
	/* bad input: no such mount, no name */
	const char *bad[] = { argv[0], "l3", "drop", NULL };
	assert_int_not_equal(kvfs_test_run(bad, out, sizeof(out)), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static void tier_of(const struct kvfs_mnt *m, const char *ns,
		    const struct kvfs_key *key, char *out, size_t len)
{
	char p[PATH_MAX], hex[33];
	ssize_t n;

	kvfs_key_hex(key, hex);
	n = getxattr(kvfs_test_path(m, p, "%s/%s", ns, hex), KVFS_XATTR_TIER,
		     out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* l3_ingest=evicted and hot; lookups with PIN and PREFETCH over a run
 * only L3 has; per-tier counts; metrics and kvfsctl stats show L3. */
static void test_ingest_pin_prefetch(void **state)
{
	struct kvfs_mnt a, h, b;
	struct kvfs_key keys[100];
	struct kvfs_result res;
	char url[128], where[8], p[PATH_MAX], out[16384];
	int fd;

	chain(keys, 100, 7);
	rt_url(&solo, url, sizeof(url));
	/* evicted: L1 holds 32 chunks of 64 KiB; the first ones leave */
	mount_l3(&a, url, NULL);
	/* (l1_size=64M in mount_l3: a second, small mount for eviction) */
	assert_int_equal(kvfs_test_umount(&a), 0);
	{
		char opts[PATH_MAX + 512];

		snprintf(opts, sizeof(opts), "l1_size=2M,max_chunk=64K,l3=%s,"
			 "l3_auth_file=%s,l3_timeout_ms=%d", url, authfile,
			 BUSY_TIMEOUT_MS);
		assert_int_equal(kvfs_test_mount(&a, opts), 0);
	}
	publish(&a, "evict", keys, 100, 3000);
	wait_stat(&a, "puts", 60);
	assert_int_equal(redis_exists(&solo, "evict", &keys[0]), 1);
	assert_int_equal(redis_exists(&solo, "evict", &keys[99]), 0);

	/* hot: written once read hot_hits (2) times */
	mount_l3(&h, url, "l3_ingest=hot,hot_hits=2");
	publish(&h, "hot", keys, 3, 4000);
	fd = kvfs_ns_open(h.dir, "hot", 0, 0);
	assert_int_equal(read_check(&h, fd, &keys[0], 4000), 0);
	assert_int_equal(read_check(&h, fd, &keys[0], 4000), 0);
	close(fd);
	wait_stat(&h, "puts", 1);
	assert_int_equal(redis_exists(&solo, "hot", &keys[0]), 1);
	assert_int_equal(redis_exists(&solo, "hot", &keys[1]), 0);

	/* PIN over a run only L3 has: promoted, then pinned */
	mount_l3(&b, url, NULL);
	fd = kvfs_ns_open(b.dir, "evict", KVFS_NS_CREATE, 0755);
	long run = kvfs_lookup(fd, keys, 100, 0, 0, 0, &res);
	assert_true(run >= 60 && run < 100);
	assert_int_equal(res.in_l3, run);
	assert_int_equal(kvfs_lookup(fd, keys, 10, 0, KVFS_LOOKUP_PIN, 60000,
				     &res), 10);
	assert_int_equal(res.in_l3, 10);
	assert_int_equal(res.nleases, 1);
	tier_of(&b, "evict", &keys[3], where, sizeof(where));
	assert_string_equal(where, "l1");
	assert_int_equal(kvfs_release(fd, &res), 0);
	/* PREFETCH: promoted in the background, then local */
	assert_int_equal(kvfs_lookup(fd, keys + 10, 20, 10,
				     KVFS_LOOKUP_PREFETCH, 0, &res), 20);
	for (int i = 0; i < 200 && l3_stat(&b, "promotions") < 30; i++)
		sleep_ms(20);
	assert_int_equal(l3_stat(&b, "promotions"), 30);
	assert_int_equal(kvfs_lookup(fd, keys, 30, 0, 0, 0, &res), 30);
	assert_int_equal(res.in_l1, 30);
	assert_int_equal(res.in_l3, 0);
	for (int i = 0; i < 30; i++)
		assert_int_equal(read_check(&b, fd, &keys[i], 3000 + i), 0);
	close(fd);

	/* the metrics and kvfsctl stats show L3 */
	fd = open(kvfs_test_path(&b, p, KVFS_CTL_DIR "/metrics"), O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, out, sizeof(out) - 1);
	close(fd);
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "kvfs_promotions_total{tier=\"l3\"} 30"));
	assert_non_null(strstr(out, "kvfs_l3_nodes 1"));
	const char *ctl = getenv("KVFS_CTL_BIN");
	const char *argv[] = { ctl ? ctl : "build/asan/kvfsctl", "stats", b.dir,
			       NULL };
	assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "l3:"));
	assert_non_null(strstr(out, "get_avg_us:"));
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&h), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

/* L2 and L3 together: L1's victims go to both; B gets them from L3, A
 * from its own L2. Another l3_prefix is another L3: nothing shared. */
static void test_with_l2_and_prefixes(void **state)
{
	struct kvfs_mnt a, b, c;
	struct kvfs_key keys[60];
	struct kvfs_result res;
	char url[128], l2dir[64], opts[PATH_MAX + 512], where[8];
	int fd;

	chain(keys, 60, 11);
	rt_url(&solo, url, sizeof(url));
	snprintf(l2dir, sizeof(l2dir), "/var/tmp/kvfs-l3-l2-XXXXXX");
	assert_non_null(mkdtemp(l2dir));
	snprintf(opts, sizeof(opts), "l1_size=2M,max_chunk=64K,l2_dir=%s,"
		 "l2_size=256M,l3=%s,l3_auth_file=%s,l3_timeout_ms=%d", l2dir,
		 url, authfile, BUSY_TIMEOUT_MS);
	assert_int_equal(kvfs_test_mount(&a, opts), 0);
	publish(&a, "both", keys, 60, 7000);
	wait_stat(&a, "puts", 20);
	tier_of(&a, "both", &keys[0], where, sizeof(where));
	assert_string_equal(where, "l2"); /* demoted, and copied to L3 */
	fd = kvfs_ns_open(a.dir, "both", 0, 0);
	assert_int_equal(read_check(&a, fd, &keys[0], 7000), 0);
	close(fd);
	assert_int_equal(l3_stat(&a, "hits"), 0); /* A read its own L2 */

	mount_l3(&b, url, NULL);
	fd = kvfs_ns_open(b.dir, "both", KVFS_NS_CREATE, 0755);
	assert_int_equal(read_check(&b, fd, &keys[1], 7001), 0);
	close(fd);
	assert_int_equal(l3_stat(&b, "hits"), 1);

	mount_l3(&c, url, "l3_prefix=other:");
	fd = kvfs_ns_open(c.dir, "both", KVFS_NS_CREATE, 0755);
	assert_int_equal(kvfs_lookup(fd, keys, 10, 0, 0, 0, &res), 0);
	assert_int_equal(read_check(&c, fd, &keys[2], 7002), -ENOENT);
	close(fd);
	assert_int_equal(kvfs_test_umount(&c), 0);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", l2dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* A chunk of 32 MiB (half of max_chunk): its transfer fits the bound,
 * which allows for the bytes of max_chunk at 256 MiB/s. */
static void test_big_chunk(void **state)
{
	const size_t big = 32u << 20;
	struct kvfs_mnt a, b;
	struct kvfs_key k[1];
	char url[128];
	char *buf = malloc(big + 1);
	int fd;

	chain(k, 1, 10);
	rt_url(&solo, url, sizeof(url));
	mount_l3(&a, url, "l3_ingest=all");
	mount_l3(&b, url, NULL);
	fd = kvfs_ns_open(a.dir, "big", KVFS_NS_CREATE, 0755);
	kvfs_test_fill(buf, big, 77, 0);
	assert_int_equal(kvfs_put(fd, &k[0], buf, big), 0);
	close(fd);
	wait_stat(&a, "puts", 1);
	memset(buf, 0, big);
	fd = kvfs_ns_open(b.dir, "big", KVFS_NS_CREATE, 0755);
	assert_int_equal(kvfs_get(fd, &k[0], buf, big + 1), (long)big);
	assert_int_equal(kvfs_test_check(buf, big, 77, 0), 0);
	close(fd);
	/* a node whose max_chunk is smaller: a miss there, not a bad value
	 * (the chunk stays in L3 for the nodes that can take it) */
	struct kvfs_mnt c;

	mount_l3(&c, url, "max_chunk=16M,l3_timeout_ms=5000"); /* GET it */
	fd = kvfs_ns_open(c.dir, "big", KVFS_NS_CREATE, 0755);
	assert_int_equal(kvfs_get(fd, &k[0], buf, big + 1), -ENOENT);
	close(fd);
	assert_int_equal(l3_stat(&c, "timeouts"), 0); /* it was read */
	assert_int_equal(l3_stat(&c, "corrupt"), 0);
	assert_int_equal(l3_stat(&c, "hits"), 0);
	assert_int_equal(redis_exists(&solo, "big", &k[0]), 1);
	assert_int_equal(kvfs_test_umount(&c), 0);
	free(buf);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

/* A server that stops answering (SIGSTOP: a hang, a partition): reads
 * and lookups miss within the bound, L1 keeps serving, stats say so. */
static void test_paused_server(void **state)
{
	struct kvfs_mnt a, b;
	struct kvfs_key keys[10], mine[1];
	struct kvfs_result res;
	char url[128];
	double t0, dt;
	int fd;

	chain(keys, 10, 8);
	chain(mine, 1, 9);
	rt_url(&solo, url, sizeof(url));
	mount_l3(&a, url, "l3_ingest=all");
	mount_l3(&b, url, "l3_timeout_ms=" STR(TIMEOUT_MS));
	publish(&a, "paused", keys, 10, 6000);
	publish(&b, "local", mine, 1, 6100);
	wait_stat(&a, "puts", 10);
	rt_pause(&solo);
	fd = kvfs_ns_open(b.dir, "paused", KVFS_NS_CREATE, 0755);
	t0 = now_ms();
	assert_int_equal(read_check(&b, fd, &keys[0], 6000), -ENOENT);
	dt = now_ms() - t0;
	fprintf(stderr, "  paused server: a miss in %.1f ms\n", dt);
	assert_true(dt < TIMEOUT_MS + 150);
	t0 = now_ms();
	assert_int_equal(kvfs_lookup(fd, keys, 10, 0, 0, 0, &res), 0);
	assert_true(now_ms() - t0 < TIMEOUT_MS + 150);
	close(fd);
	fd = kvfs_ns_open(b.dir, "local", 0, 0);
	assert_int_equal(read_check(&b, fd, &mine[0], 6100), 0); /* L1 */
	close(fd);
	assert_true(l3_stat(&b, "timeouts") >= 1);
	assert_true(l3_stat(&b, "errors") >= 1);
	rt_resume(&solo);
	/* back: after the backoff, the same read hits */
	fd = kvfs_ns_open(b.dir, "paused", 0, 0);
	long rc = -ENOENT;
	for (int i = 0; i < 100 && rc; i++) {
		rc = read_check(&b, fd, &keys[0], 6000);
		if (rc)
			sleep_ms(50);
	}
	assert_int_equal(rc, 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

/* Last: stops and restarts a master. */
static void test_cluster_master_down(void **state)
{
	struct kvfs_mnt a, b;
	struct kvfs_key keys[NCHUNKS];
	char url[256];
	int fd, hit = 0, miss = 0;
	double worst = 0;

	chain(keys, NCHUNKS, 4);
	rt_cluster_url(&cl, url, sizeof(url));
	mount_l3(&a, url, "l3_ingest=all");
	mount_l3(&b, url, "l3_timeout_ms=" STR(TIMEOUT_MS));
	publish(&a, "down", keys, NCHUNKS, 1000);
	wait_stat(&a, "puts", NCHUNKS);

	rt_stop(&cl.node[1], true);
	fd = kvfs_ns_open(b.dir, "down", KVFS_NS_CREATE, 0755);
	for (size_t i = 0; i < NCHUNKS; i++) {
		double t0 = now_ms();
		long rc = read_check(&b, fd, &keys[i], 1000 + i);
		double dt = now_ms() - t0;

		assert_true(rc == 0 || rc == -ENOENT);
		if (rc)
			miss++;
		else
			hit++;
		if (rc && dt > worst)
			worst = dt;
	}
	fprintf(stderr, "  one master down: %d hit, %d missed, worst miss "
			"%.1f ms\n", hit, miss, worst);
	assert_true(hit > NCHUNKS / 2 && miss > NCHUNKS / 6);
	/* within the bound (and some slack for ASan and FUSE) */
	assert_true(worst < TIMEOUT_MS + 150);
	assert_true(l3_stat(&b, "errors") > 0);
	assert_true(l3_stat(&b, "nodes_down") >= 1);

	/* restarted (empty: no persistence): reconnected, A writes again */
	assert_int_equal(rt_restart(&cl.node[1]), 0);
	assert_int_equal(rt_cluster_wait(&cl), 0); /* it rejoined */
	sleep_ms(1100); /* the backoff's longest step */
	struct kvfs_key more[40];
	chain(more, 40, 5);
	publish(&a, "down", more, 40, 2000);
	wait_stat(&a, "puts", NCHUNKS + 40);
	for (size_t i = 0; i < 40; i++)
		assert_int_equal(read_check(&b, fd, &more[i], 2000 + i), 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static void test_bad_options(void **state)
{
	const char *bad[] = {
		"l3=",
		"l3=redis://nohost",
		"l3=redis://127.0.0.1:1,l3_cluster=maybe",
		"l3=redis://127.0.0.1:1,l3_ingest=sometimes",
		"l3=redis://127.0.0.1:1,l3_timeout_ms=0",
		"l3=redis://127.0.0.1:1,l3_timeout_ms=abc",
		"l3=redis://127.0.0.1:1,l3_auth_file=/nonexistent/pw",
		"l3=redis://127.0.0.1:1,l3_prefix=has space",
		"l3_cluster=yes", /* an L3 option without l3= */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kvfs_mnt m;

		fprintf(stderr, "  refused: %s\n", bad[i]);
		assert_int_not_equal(kvfs_test_mount(&m, bad[i]), 0);
	}
	/* a wrong password: refused at mount, with the reason */
	char url[128], opts[1024], wrong[300], out[256];
	struct kvfs_mnt m;
	FILE *f;

	/* the mode asked for contradicts the server's */
	snprintf(opts, sizeof(opts), "l3=%s,l3_cluster=yes,l3_auth_file=%s",
		 rt_url(&solo, url, sizeof(url)), authfile);
	assert_int_not_equal(kvfs_test_mount(&m, opts), 0);
	snprintf(opts, sizeof(opts), "l3=%s,l3_cluster=no,l3_auth_file=%s",
		 rt_url(&cl.node[0], url, sizeof(url)), authfile);
	assert_int_not_equal(kvfs_test_mount(&m, opts), 0);

	snprintf(wrong, sizeof(wrong), "%s.wrong", authfile);
	f = fopen(wrong, "w");
	assert_non_null(f);
	fputs("not-the-password\n", f);
	fclose(f);
	snprintf(opts, sizeof(opts), "l3=%s,l3_auth_file=%s",
		 rt_url(&solo, url, sizeof(url)), wrong);
	assert_int_not_equal(kvfs_test_mount(&m, opts), 0);
	unlink(wrong);
	/* no password for a server that wants one: refused at mount (not
	 * a mount whose L3 never answers) */
	snprintf(opts, sizeof(opts), "l3=%s", rt_url(&solo, url, sizeof(url)));
	assert_int_not_equal(kvfs_test_mount(&m, opts), 0);
	/* an ACL user (AUTH user password), restricted to the prefix; its
	 * name without a password file is refused */
	assert_int_equal(rt_cli(&solo, out, sizeof(out), "ACL", "SETUSER",
				"kvfsacl", "on", ">acl-pw", "~kvfs:*", "+@all",
				"-@dangerous", NULL), 0);
	f = fopen(wrong, "w");
	assert_non_null(f);
	fputs("acl-pw\n", f);
	fclose(f);
	snprintf(opts, sizeof(opts), "l3=%s,l3_ingest=all,l3_user=kvfsacl,"
		 "l3_auth_file=%s", url, wrong);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	struct kvfs_key ka[1];
	chain(ka, 1, 7);
	publish(&m, "acl", ka, 1, 1);
	wait_stat(&m, "puts", 1);
	assert_int_equal(redis_exists(&solo, "acl", &ka[0]), 1);
	assert_int_equal(kvfs_test_umount(&m), 0);
	unlink(wrong);
	snprintf(opts, sizeof(opts), "l3=%s,l3_user=kvfsacl", url);
	assert_int_not_equal(kvfs_test_mount(&m, opts), 0);
	/* an unreachable server is not a mount failure: L1 serves */
	assert_int_equal(kvfs_test_mount(&m, "l3=redis://127.0.0.1:1,"
					     "l3_timeout_ms=20"), 0);
	struct kvfs_key k[1];
	chain(k, 1, 6);
	publish(&m, "alone", k, 1, 1);
	int fd = kvfs_ns_open(m.dir, "alone", 0, 0);
	assert_int_equal(read_check(&m, fd, &k[0], 1), 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static int setup(void **state)
{
	const char *pw = "kvfs-l3-integ-secret";

	snprintf(authfile, sizeof(authfile), "/tmp/kvfs-l3-auth-XXXXXX");
	if (rt_auth_file(authfile, pw) || rt_start(&solo, false, pw) ||
	    rt_cluster_start(&cl, pw))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	rt_cluster_stop(&cl);
	rt_stop(&solo, true);
	unlink(authfile);
	return 0;
}

int main(void)
{
	const char *why = rt_skip_reason();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_two_nodes_standalone),
		cmocka_unit_test(test_garbage_is_a_miss),
		cmocka_unit_test(test_drop_ns),
		cmocka_unit_test(test_ingest_pin_prefetch),
		cmocka_unit_test(test_paused_server),
		cmocka_unit_test(test_big_chunk),
		cmocka_unit_test(test_with_l2_and_prefixes),
		cmocka_unit_test(test_two_nodes_cluster),
		cmocka_unit_test(test_cluster_master_down),
	};

	if (why) {
		printf("skipped: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
