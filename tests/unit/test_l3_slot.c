/*
 * test_l3_slot.c - tier/l3_slot: CRC16 and key slots against the Redis
 * Cluster specification's vectors, MOVED / ASK parsing, CLUSTER SLOTS
 * replies (real RESP bytes through hiredis' reader), bad input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3_slot.h"

static unsigned slot(const char *k)
{
	return l3_key_slot(k, strlen(k));
}

static void test_crc16_vectors(void **state)
{
	/* the specification's check value */
	assert_int_equal(l3_crc16("123456789", 9), 0x31C3);
	assert_int_equal(l3_crc16("", 0), 0);
	assert_int_equal(l3_crc16("A", 1), 0x58E5);
}

static void test_key_slot(void **state)
{
	/* CLUSTER KEYSLOT answers of a real server */
	assert_int_equal(slot("foo"), 12182);
	assert_int_equal(slot("bar"), 5061);
	assert_int_equal(slot("hello"), 866);
	/* hash tags, the specification's examples */
	assert_int_equal(slot("{user1000}.following"), slot("user1000"));
	assert_int_equal(slot("{user1000}.followers"), slot("user1000"));
	assert_int_equal(slot("foo{}{bar}"),
			 l3_crc16("foo{}{bar}", 10) & 16383); /* empty tag */
	assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
	assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
	assert_int_equal(slot("{unclosed"), l3_crc16("{unclosed", 9) & 16383);
	for (int i = 0; i < 1000; i++) {
		char k[32];

		snprintf(k, sizeof(k), "kvfs:ns:%d", i);
		assert_true(slot(k) < L3_SLOTS);
	}
}

static void test_redirect_parse(void **state)
{
	struct l3_redirect r;
	const char *s;

	s = "MOVED 3999 127.0.0.1:6381";
	assert_int_equal(l3_redirect_parse(s, strlen(s), &r), 0);
	assert_false(r.ask);
	assert_int_equal(r.slot, 3999);
	assert_string_equal(r.to.host, "127.0.0.1");
	assert_int_equal(r.to.port, 6381);

	s = "ASK 16383 ::1:7000";
	assert_int_equal(l3_redirect_parse(s, strlen(s), &r), 0);
	assert_true(r.ask);
	assert_int_equal(r.slot, 16383);
	assert_string_equal(r.to.host, "::1");
	assert_int_equal(r.to.port, 7000);

	s = "MOVED 1 [fe80::1]:7001";
	assert_int_equal(l3_redirect_parse(s, strlen(s), &r), 0);
	assert_string_equal(r.to.host, "fe80::1");
	assert_int_equal(r.to.port, 7001);

	s = "MOVED 12 :7002"; /* unknown endpoint: the asked host */
	assert_int_equal(l3_redirect_parse(s, strlen(s), &r), 0);
	assert_string_equal(r.to.host, "");

	const char *bad[] = {
		"MOVED", "MOVED ", "MOVED 16384 a:1", "MOVED x a:1",
		"MOVED 1 a", "MOVED 1 a:0", "MOVED 1 a:65536", "MOVED 1 a:1x",
		"ASK 1", "ERR wrong", "CLUSTERDOWN Hash slot not served",
		"MOVED 123456 a:1", "moved 1 a:1", "MOVED 1 [::1:7000",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(l3_redirect_parse(bad[i], strlen(bad[i]), &r),
				 -EINVAL);
}

static redisReply *resp(const char *bytes)
{
	redisReader *rd = redisReaderCreate();
	void *reply = NULL;

	assert_non_null(rd);
	assert_int_equal(redisReaderFeed(rd, bytes, strlen(bytes)), REDIS_OK);
	assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
	redisReaderFree(rd);
	assert_non_null(reply);
	return reply;
}

static void test_slots_parse(void **state)
{
	struct l3_slot_range *v;
	/* two masters, the second listed first, one with a replica and a
	 * Redis 7 networking-metadata entry (an array in RESP2), as CLUSTER
	 * SLOTS sends them */
	redisReply *r = resp(
		"*2\r\n"
		"*4\r\n:8192\r\n:16383\r\n"
		"*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$3\r\nid2\r\n"
		"*4\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid3\r\n*0\r\n"
		"*3\r\n:0\r\n:8191\r\n"
		"*3\r\n$0\r\n\r\n:7000\r\n$3\r\nid1\r\n");

	assert_int_equal(l3_slots_parse(r, &v), 2);
	assert_int_equal(v[0].first, 0);
	assert_int_equal(v[0].last, 8191);
	assert_string_equal(v[0].master.host, "");
	assert_int_equal(v[0].master.port, 7000);
	assert_int_equal(v[1].first, 8192);
	assert_int_equal(v[1].last, 16383);
	assert_string_equal(v[1].master.host, "127.0.0.1");
	assert_int_equal(v[1].master.port, 7001);
	free(v);
	freeReplyObject(r);
}

static void test_slots_parse_bad(void **state)
{
	const char *bad[] = {
		"+OK\r\n",
		"-ERR This instance has cluster support disabled\r\n",
		"*1\r\n:5\r\n",
		"*1\r\n*2\r\n:0\r\n:1\r\n",                          /* no master */
		"*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n",   /* last < first */
		"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n", /* slot range */
		"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:0\r\n",   /* port 0 */
		"*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:1\r\n:1\r\n",        /* host int */
		"*2\r\n*3\r\n:0\r\n:9\r\n*2\r\n$1\r\na\r\n:1\r\n"
		"*3\r\n:9\r\n:20\r\n*2\r\n$1\r\nb\r\n:1\r\n",        /* overlap */
	};
	struct l3_slot_range *v = (void *)1;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		redisReply *r = resp(bad[i]);

		assert_int_equal(l3_slots_parse(r, &v), -EPROTO);
		assert_null(v);
		freeReplyObject(r);
	}
	assert_int_equal(l3_slots_parse(NULL, &v), -EPROTO);
	/* an empty cluster (no slots assigned yet) is zero ranges */
	redisReply *r = resp("*0\r\n");
	assert_int_equal(l3_slots_parse(r, &v), 0);
	free(v);
	freeReplyObject(r);
}

static void test_addr_parse(void **state)
{
	struct l3_addr a;

	assert_int_equal(l3_addr_parse("localhost:6379", 14, &a), 0);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(a.port, 6379);
	assert_int_equal(l3_addr_parse("nohost", 6, &a), -EINVAL);
	assert_int_equal(l3_addr_parse("h:", 2, &a), -EINVAL);
	assert_int_equal(l3_addr_parse("h:-1", 4, &a), -EINVAL);
	assert_int_equal(l3_addr_parse("[::1]", 5, &a), -EINVAL);
	assert_int_equal(l3_addr_parse("[::1]:6379", 10, &a), 0);
	assert_string_equal(a.host, "::1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc16_vectors),
		cmocka_unit_test(test_key_slot),
		cmocka_unit_test(test_redirect_parse),
		cmocka_unit_test(test_slots_parse),
		cmocka_unit_test(test_slots_parse_bad),
		cmocka_unit_test(test_addr_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
