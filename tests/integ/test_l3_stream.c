/*
 * test_l3_stream.c - a promotion from L3 receives the value straight into
 * the L1 extent (raw records) or decodes it as it arrives (zstd records),
 * so bytes of a value land in L1 before the value is known to be good.
 * Every bad value must still be a miss, counted, deleted from Redis, and
 * leave nothing in L1: a value cut short, one with its last byte flipped
 * (found only once every byte is in the extent), one with a byte of its
 * payload flipped, a good record of another key, one with bytes appended,
 * one whose header is damaged, one shorter than a header; also into an
 * L1 in device memory (l1=cuda on tests/gpu/fake's runtime). Real mounts
 * share one redis-server on loopback (the writer stores raw records in
 * one namespace, zstd records in another).
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define CHUNK (1u << 20) /* several receive steps, two zstd frames */
#define NKEYS 8

static struct rt_server solo;
static char authfile[256];
static const char *pw = "kvfs-l3-stream-secret";

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Compressible bytes (so the default writer stores zstd records): runs
 * of a byte that depends on seed. */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((i / 61) * 7 + seed * 13 + (i % 3 == 0));
}

static void keys_of(struct kvfs_key *k, size_t n, uint64_t r)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t tok[2] = { (uint32_t)i, (uint32_t)r };

		assert_int_equal(kvfs_key_chunk(NULL, r, NULL, 0, tok, 2,
						&k[i]), 0);
	}
}

static redisContext *rconn(void)
{
	struct timeval tv = { 5, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", solo.port, tv);
	redisReply *r;

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	r = redisCommand(c, "AUTH %s", pw);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	return c;
}

static void rkey(char *buf, size_t len, const char *ns,
		 const struct kvfs_key *key)
{
	char hex[33];

	kvfs_key_hex(key, hex);
	snprintf(buf, len, "kvfs:%s:%s", ns, hex);
}

/* The value of (ns, key) (malloc'd, *len), or NULL. */
static uint8_t *rget(redisContext *c, const char *ns,
		     const struct kvfs_key *key, size_t *len)
{
	char k[256];
	redisReply *r;
	uint8_t *v = NULL;

	rkey(k, sizeof(k), ns, key);
	r = redisCommand(c, "GET %s", k);
	assert_non_null(r);
	if (r->type == REDIS_REPLY_STRING) {
		v = malloc(r->len ? r->len : 1);
		memcpy(v, r->str, r->len);
		*len = r->len;
	}
	freeReplyObject(r);
	return v;
}

static void rset(redisContext *c, const char *ns, const struct kvfs_key *key,
		 const void *v, size_t len)
{
	char k[256];
	redisReply *r;

	rkey(k, sizeof(k), ns, key);
	r = redisCommand(c, "SET %s %b", k, v, len);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
}

static long long rexists(redisContext *c, const char *ns,
			 const struct kvfs_key *key)
{
	char k[256];
	redisReply *r;
	long long n;

	rkey(k, sizeof(k), ns, key);
	r = redisCommand(c, "EXISTS %s", k);
	assert_non_null(r);
	n = r->integer;
	freeReplyObject(r);
	return n;
}

static void mount_node(struct kvfs_mnt *m, const char *extra)
{
	char opts[PATH_MAX + 512], url[128];

	snprintf(opts, sizeof(opts),
		 "l1_size=64M,l3=%s,l3_auth_file=%s,l3_timeout_ms=2000%s%s",
		 rt_url(&solo, url, sizeof(url)), authfile, extra ? "," : "",
		 extra ? extra : "");
	assert_int_equal(kvfs_test_mount(m, opts), 0);
}

/* Reads key on m: 0 when its bytes are fill(seed), else -errno. */
static long read_check(const struct kvfs_mnt *m, const char *ns,
		       const struct kvfs_key *key, uint64_t seed)
{
	int fd = kvfs_ns_open(m->dir, ns, KVFS_NS_CREATE, 0755);
	uint8_t *buf = malloc(CHUNK + 1), *want = malloc(CHUNK);
	long n;

	assert_true(fd >= 0);
	n = kvfs_get(fd, key, buf, CHUNK + 1);
	close(fd);
	if (n >= 0) {
		fill(want, CHUNK, seed);
		assert_int_equal(n, CHUNK);
		assert_memory_equal(buf, want, CHUNK);
		n = 0;
	}
	free(buf);
	free(want);
	return n;
}

/*
 * The writer (extra: its options) publishes NKEYS chunks into ns; their
 * values in Redis are then spoiled one way each; the reader must miss on
 * every spoiled one, delete it, keep nothing of it in L1, and still read
 * the good one and a spoiled one stored good again.
 */
static void bad_values(const char *ns, const char *extra, bool zstd)
{
	struct kvfs_mnt a, b;
	struct kvfs_key k[NKEYS];
	struct kvfs_result res;
	redisContext *c = rconn();
	uint8_t *buf = malloc(CHUNK), *v[NKEYS];
	size_t len[NKEYS];
	int fd;

	keys_of(k, NKEYS, zstd ? 2 : 1);
	mount_node(&a, extra);
	mount_node(&b, NULL);
	fd = kvfs_ns_open(a.dir, ns, KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	for (int i = 0; i < NKEYS; i++) {
		fill(buf, CHUNK, (uint64_t)i);
		assert_int_equal(kvfs_put(fd, &k[i], buf, CHUNK), 0);
	}
	close(fd);
	for (int t = 0; t < 500 && kvfs_test_stat(&a, "l3", "puts") < NKEYS;
	     t++)
		sleep_ms(10);
	assert_int_equal(kvfs_test_stat(&a, "l3", "puts"), NKEYS);
	for (int i = 0; i < NKEYS; i++) {
		v[i] = rget(c, ns, &k[i], &len[i]);
		assert_non_null(v[i]);
		/* the record kind this run is about */
		if (zstd)
			assert_true(len[i] < CHUNK / 2);
		else
			assert_int_equal(len[i], CHUNK + 256);
	}

	/* 0: good. 1: cut short by 1,000 bytes. 2: its last byte flipped
	 * (raw: the checksum fails only once all of it is in the extent).
	 * 3: a payload byte in the middle flipped. 4: the good record of
	 * key 0 under key 4. 5: two bytes appended. 6: a header byte
	 * flipped. 7: shorter than a header. */
	rset(c, ns, &k[1], v[1], len[1] - 1000);
	v[2][len[2] - 1] ^= 0x40;
	rset(c, ns, &k[2], v[2], len[2]);
	v[2][len[2] - 1] ^= 0x40;
	v[3][len[3] / 2] ^= 0x01;
	rset(c, ns, &k[3], v[3], len[3]);
	v[3][len[3] / 2] ^= 0x01;
	rset(c, ns, &k[4], v[0], len[0]);
	{
		uint8_t *x = malloc(len[5] + 2);

		memcpy(x, v[5], len[5]);
		x[len[5]] = x[len[5] + 1] = 0;
		rset(c, ns, &k[5], x, len[5] + 2);
		free(x);
	}
	v[6][40] ^= 0x10;
	rset(c, ns, &k[6], v[6], len[6]);
	v[6][40] ^= 0x10;
	rset(c, ns, &k[7], v[7], 100);

	assert_int_equal(read_check(&b, ns, &k[0], 0), 0);
	for (int i = 1; i < NKEYS; i++) {
		long rc = read_check(&b, ns, &k[i], (uint64_t)i);

		if (rc != -ENOENT)
			fprintf(stderr, "  key %d: %ld\n", i, rc);
		assert_int_equal(rc, -ENOENT);
	}
	assert_int_equal(kvfs_test_stat(&b, "l3", "corrupt"), NKEYS - 1);
	assert_int_equal(kvfs_test_stat(&b, NULL, "promotions"), 1);
	/* nothing of a bad value was published: only key 0 is in L1 */
	fd = kvfs_ns_open(b.dir, ns, 0, 0);
	assert_true(fd >= 0);
	for (int i = 0; i < NKEYS; i++) {
		memset(&res, 0, sizeof(res));
		assert_int_equal(kvfs_lookup(fd, &k[i], 1, 0, 0, 0, &res),
				 i == 0);
		assert_int_equal(res.in_l1, i == 0);
		/* each bad value was deleted: it was still the same */
		assert_int_equal(rexists(c, ns, &k[i]), i == 0);
	}
	close(fd);
	/* stored good again: read whole and right (nothing of the bad
	 * transfer into the same extent size is left over) */
	rset(c, ns, &k[2], v[2], len[2]);
	rset(c, ns, &k[1], v[1], len[1]);
	assert_int_equal(read_check(&b, ns, &k[2], 2), 0);
	assert_int_equal(read_check(&b, ns, &k[1], 1), 0);
	assert_int_equal(kvfs_test_stat(&b, NULL, "promotions"), 3);
	assert_int_equal(kvfs_test_stat(&b, "l3", "corrupt"), NKEYS - 1);

	for (int i = 0; i < NKEYS; i++)
		free(v[i]);
	free(buf);
	redisFree(c);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static void test_raw_records(void **state)
{
	bad_values("streamraw", "l3_ingest=all,compress=none", false);
}

static void test_zstd_records(void **state)
{
	bad_values("streamzstd", "l3_ingest=all", true);
}

/* A value that is not a string (a list under the key): a miss, the
 * connection still good for the next GET. */
static void test_wrong_type(void **state)
{
	struct kvfs_mnt a, b;
	struct kvfs_key k[2];
	redisContext *c = rconn();
	uint8_t *buf = malloc(CHUNK);
	char name[256];
	redisReply *r;
	int fd;

	keys_of(k, 2, 3);
	mount_node(&a, "l3_ingest=all");
	mount_node(&b, NULL);
	fd = kvfs_ns_open(a.dir, "streamtype", KVFS_NS_CREATE, 0755);
	fill(buf, CHUNK, 1);
	assert_int_equal(kvfs_put(fd, &k[1], buf, CHUNK), 0);
	close(fd);
	for (int t = 0; t < 500 && kvfs_test_stat(&a, "l3", "puts") < 1; t++)
		sleep_ms(10);
	rkey(name, sizeof(name), "streamtype", &k[0]);
	r = redisCommand(c, "RPUSH %s x y", name);
	freeReplyObject(r);
	assert_int_equal(read_check(&b, "streamtype", &k[0], 0), -ENOENT);
	assert_int_equal(read_check(&b, "streamtype", &k[1], 1), 0);
	assert_int_equal(kvfs_test_stat(&b, "l3", "nodes_down"), 0);
	free(buf);
	redisFree(c);
	assert_int_equal(kvfs_test_umount(&b), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

/* L1 in device memory (l1=cuda on tests/gpu/fake's runtime: no host
 * address for the extent): a value is received into a host buffer,
 * checked, then copied to the device; good and bad values as above. */
static void test_device_arena(void **state)
{
	const char *b = getenv("KVFS_BUILD");
	char fake[PATH_MAX];
	struct kvfs_mnt a, d;
	struct kvfs_key k[3];
	redisContext *c;
	uint8_t *buf = malloc(CHUNK), *v;
	size_t len;
	int fd;

	snprintf(fake, sizeof(fake), "%s/tests/gpu/libfakecudart.so",
		 b && *b ? b : "build/asan");
	if (access(fake, R_OK)) {
		printf("  (no %s: skipped)\n", fake);
		free(buf);
		return;
	}
	c = rconn();
	keys_of(k, 3, 4);
	mount_node(&a, "l3_ingest=all");
	fd = kvfs_ns_open(a.dir, "streamdev", KVFS_NS_CREATE, 0755);
	for (int i = 0; i < 3; i++) {
		fill(buf, CHUNK, (uint64_t)i);
		assert_int_equal(kvfs_put(fd, &k[i], buf, CHUNK), 0);
	}
	close(fd);
	for (int t = 0; t < 500 && kvfs_test_stat(&a, "l3", "puts") < 3; t++)
		sleep_ms(10);
	/* 1: its last byte flipped; 2: cut short */
	v = rget(c, "streamdev", &k[1], &len);
	assert_non_null(v);
	v[len - 1] ^= 1;
	rset(c, "streamdev", &k[1], v, len);
	free(v);
	v = rget(c, "streamdev", &k[2], &len);
	assert_non_null(v);
	rset(c, "streamdev", &k[2], v, len / 2);
	free(v);
	setenv("KVFS_CUDART", fake, 1);
	mount_node(&d, "l1=cuda");
	unsetenv("KVFS_CUDART");
	assert_int_equal(read_check(&d, "streamdev", &k[0], 0), 0);
	assert_int_equal(read_check(&d, "streamdev", &k[1], 1), -ENOENT);
	assert_int_equal(read_check(&d, "streamdev", &k[2], 2), -ENOENT);
	assert_int_equal(kvfs_test_stat(&d, NULL, "promotions"), 1);
	assert_int_equal(kvfs_test_stat(&d, "l3", "corrupt"), 2);
	free(buf);
	redisFree(c);
	assert_int_equal(kvfs_test_umount(&d), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
}

static int setup(void **state)
{
	snprintf(authfile, sizeof(authfile), "/tmp/kvfs-l3s-auth-XXXXXX");
	return rt_auth_file(authfile, pw) || rt_start(&solo, false, pw) ? -1
									 : 0;
}

static int teardown(void **state)
{
	rt_stop(&solo, true);
	unlink(authfile);
	return 0;
}

int main(void)
{
	const char *why = rt_skip_reason();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_records),
		cmocka_unit_test(test_zstd_records),
		cmocka_unit_test(test_wrong_type),
		cmocka_unit_test(test_device_arena),
	};

	if (why) {
		printf("skipped: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
