/*
 * test_readahead.c - chain readahead on a real mount: a chain written with
 * parent links and pushed to L2, read back in order with plain
 * open/read, is promoted ahead of the reader (the counters rise, the
 * bytes are right); readahead=0 turns it off; a reader jumping around
 * the chain triggers no readahead; a chain without links (learned read
 * order) is followed on the second pass; a damaged record met by
 * readahead is a miss for the reader, never bad bytes; pinned chunks stay
 * in L1 under readahead; chunks only in L3 (a real redis-server) are read
 * ahead in the order a first pass taught, with their bytes, and come
 * with the parent links their writer set (the L3 record carries them).
 * Restarts: parent links (and depths) survive a clean unmount (the L2
 * checkpoint) and a SIGKILL (the record headers, scanned), so the first
 * reader after the restart is followed (links a batched lookup stamped
 * after the chunks reached L2 too, through the checkpoint); an order
 * learned by reading
 * survives a clean unmount and a SIGKILL after the periodic checkpoint;
 * so does the order chunks without links were written in, which the
 * first reader after the restart is followed along (after a SIGKILL
 * before any checkpoint too: the scan of the log gives it).
 * A full L1 over an L2 at its l2_size (a cache's steady state): readahead
 * goes on, nothing paused (test_full_l2_reads_ahead; a disk that cut L2
 * below l2_size pauses it: test_l2_full).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
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

#define MIB (1u << 20)
#define NS "ra.bf16"
#define NS_LINKED "ra.linked.bf16" /* test_l3_chain's chain with links */
#define N 28 /* chunks of 1 MiB; L1 holds 8 */

static char l2dir[PATH_MAX];
static struct kvfs_mnt *mounted; /* unmounted by a failed test's teardown */
static struct kvfs_mnt *mounted2; /* the second node of test_l3_chain */
static struct rt_server *server;  /* its redis-server, stopped likewise */
static char auth[] = "/tmp/kvfs-ra-auth-XXXXXX";

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void rm_l2(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -f '%s'/* 2>/dev/null", l2dir);
	if (system(cmd)) {
		/* nothing to remove */
	}
}

static int setup(void **state)
{
	(void)state;
	snprintf(l2dir, sizeof(l2dir), "/var/tmp/kvfs-integ-ra-XXXXXX");
	return mkdtemp(l2dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rm_l2();
	rmdir(l2dir);
	return 0;
}

/* Mounts with l1 of L1 (8M unless a case says otherwise). */
static int do_mount_l1(struct kvfs_mnt *m, const char *l1, const char *extra)
{
	char opts[PATH_MAX + 512];

	int rc;

	snprintf(opts, sizeof(opts), "l1_size=%s,max_chunk=1M,l2_dir=%s,"
		 "l2_size=96M%s%s", l1, l2dir, extra ? "," : "",
		 extra ? extra : "");
	rc = kvfs_test_mount(m, opts);
	if (rc == 0)
		mounted = m;
	return rc;
}

static int do_mount(struct kvfs_mnt *m, const char *extra)
{
	return do_mount_l1(m, "8M", extra);
}

static void do_umount(struct kvfs_mnt *m)
{
	mounted = NULL;
	assert_int_equal(kvfs_test_umount(m), 0);
	rm_l2();
}

/* After each test: a failed one left its mount behind. */
static int test_teardown(void **state)
{
	(void)state;
	if (mounted2) {
		kvfs_test_umount(mounted2);
		mounted2 = NULL;
	}
	if (mounted) {
		kvfs_test_umount(mounted);
		mounted = NULL;
	}
	if (server) {
		rt_stop(server, true);
		server = NULL;
		unlink(auth);
	}
	rm_l2();
	return 0;
}

static char *chunk_path(const struct kvfs_mnt *m, char *buf, const char *ns,
			uint64_t n)
{
	char name[33];

	kvfs_test_key_name(n, name);
	return kvfs_test_path(m, buf, "%s/%s", ns, name);
}

/* Writes chunk n (seed n) of ns; with link, its parent is chunk n - 1 and
 * its depth n + 1. */
static void put(const struct kvfs_mnt *m, const char *ns, uint64_t n,
		bool link)
{
	char p[PATH_MAX], parent[33], depth[24];
	uint8_t *buf = malloc(MIB);
	int fd;

	assert_non_null(buf);
	kvfs_test_fill(buf, MIB, n, 0);
	fd = open(chunk_path(m, p, ns, n), O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, MIB), (ssize_t)MIB);
	if (link && n > 0) {
		kvfs_test_key_name(n - 1, parent);
		assert_int_equal(fsetxattr(fd, KVFS_XATTR_PARENT, parent, 32, 0),
				 0);
	}
	if (link) {
		snprintf(depth, sizeof(depth), "%llu", (unsigned long long)n + 1);
		assert_int_equal(fsetxattr(fd, KVFS_XATTR_DEPTH, depth,
					   strlen(depth), 0), 0);
	}
	assert_int_equal(close(fd), 0);
	free(buf);
}

static int check(const struct kvfs_mnt *m, const char *ns, uint64_t n)
{
	char p[PATH_MAX];

	return kvfs_test_read_check(chunk_path(m, p, ns, n), MIB, n);
}

static void tier_is(const struct kvfs_mnt *m, const char *ns, uint64_t n,
		    char where[8])
{
	char p[PATH_MAX];
	ssize_t r;

	r = getxattr(chunk_path(m, p, ns, n), KVFS_XATTR_TIER, where, 7);
	where[r > 0 ? r : 0] = 0;
}

/* Writes the chain 0..N-1 and waits until its head is only in L2. */
/* Chunks 0..N-1 of ns; without links in the reverse order, so that what
 * readahead follows is only what a reader taught it (chunks published one
 * after the other are successors until a reader says otherwise). */
static void put_all(const struct kvfs_mnt *m, const char *ns, bool link)
{
	for (uint64_t i = 0; i < N; i++)
		put(m, ns, link ? i : N - 1 - i, link);
}

static void write_chain(const struct kvfs_mnt *m, const char *ns, bool link)
{
	char p[PATH_MAX], where[8] = "";

	assert_int_equal(mkdir(kvfs_test_path(m, p, "%s", ns), 0755), 0);
	put_all(m, ns, link);
	for (int i = 0; i < 200; i++) {
		tier_is(m, ns, link ? 0 : N - 1, where); /* written first */
		if (!strcmp(where, "l2"))
			break;
		sleep_ms(25);
	}
	assert_string_equal(where, "l2");
	sleep_ms(300); /* the demotions' writes land */
}

static long long ra(const struct kvfs_mnt *m, const char *key)
{
	return kvfs_test_stat(m, "readahead", key);
}

/* Waits (bounded) for the workers to finish what they queued. */
static void settle(const struct kvfs_mnt *m)
{
	long long last = -1, now;

	for (int i = 0; i < 40; i++) {
		now = ra(m, "promotions");
		if (now == last)
			break;
		last = now;
		sleep_ms(50);
	}
}

static void test_chain_is_read_ahead(void **state)
{
	struct kvfs_mnt m;
	long long prom, hits;

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(ra(&m, "max"), 16);
	write_chain(&m, NS, true);
	assert_int_equal(ra(&m, "promotions"), 0);
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(check(&m, NS, i), 0);
	settle(&m);
	prom = ra(&m, "promotions");
	hits = ra(&m, "hits");
	print_message("readahead: %lld promotions, %lld hits, %lld wasted\n",
		      prom, hits, ra(&m, "wasted"));
	/* the first two reads open the window; from there on the reader
	 * finds most chunks promoted */
	assert_true(prom >= 8);
	assert_true(hits >= 8);
	assert_true(hits <= prom);
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 0);
	do_umount(&m);
}

static void test_readahead_off(void **state)
{
	struct kvfs_mnt m;

	(void)state;
	assert_int_equal(do_mount(&m, "readahead=0"), 0);
	assert_int_equal(ra(&m, "max"), 0);
	write_chain(&m, NS, true);
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(check(&m, NS, i), 0);
	sleep_ms(200);
	assert_int_equal(ra(&m, "promotions"), 0);
	assert_int_equal(ra(&m, "hits"), 0);
	do_umount(&m);
}

/* Never the child of the chunk read before it, nor a chain's head: no
 * window ever opens. */
static void test_jumping_reader(void **state)
{
	static const uint64_t order[] = { 3, 9, 1, 14, 6, 19, 21, 11, 16, 4,
					  12, 7, 18, 2, 10, 17, 5, 13, 8, 15 };
	struct kvfs_mnt m;

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	write_chain(&m, NS, true);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_int_equal(check(&m, NS, order[i]), 0);
	sleep_ms(200);
	assert_int_equal(ra(&m, "promotions"), 0);
	assert_int_equal(ra(&m, "wasted"), 0);
	do_umount(&m);
}

/* No parent links: the first pass teaches the order, the second (after
 * the chunks went back to L2) is read ahead. */
static void test_learned_successors(void **state)
{
	struct kvfs_mnt m;
	char where[8] = "";

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	write_chain(&m, NS, false);
	for (uint64_t i = 0; i < 12; i++)
		assert_int_equal(check(&m, NS, i), 0);
	assert_int_equal(ra(&m, "promotions"), 0);
	/* push 0..11 out of L1 again */
	for (uint64_t i = 20; i < N; i++)
		assert_int_equal(check(&m, NS, i), 0);
	for (int i = 0; i < 100; i++) {
		tier_is(&m, NS, 1, where);
		if (!strcmp(where, "l2"))
			break;
		sleep_ms(20);
	}
	assert_string_equal(where, "l2");
	for (uint64_t i = 0; i < 12; i++)
		assert_int_equal(check(&m, NS, i), 0);
	settle(&m);
	assert_true(ra(&m, "promotions") >= 4);
	assert_true(ra(&m, "hits") >= 4);
	do_umount(&m);
}

/* Readahead reaching a damaged record drops it (counted as corrupt): the
 * reader gets ENOENT for that chunk, right bytes for every other. */
static void test_corrupt_record_is_a_miss(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	write_chain(&m, NS, true);
	assert_true(kvfs_test_l2_damage(l2dir, 6) >= 1);
	for (uint64_t i = 0; i < 6; i++)
		assert_int_equal(check(&m, NS, i), 0);
	settle(&m);
	errno = 0;
	assert_int_equal(open(chunk_path(&m, p, NS, 6), O_RDONLY), -1);
	assert_int_equal(errno, ENOENT);
	for (uint64_t i = 7; i < 20; i++)
		assert_int_equal(check(&m, NS, i), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 1);
	do_umount(&m);
}

/* Half of L1 pinned: readahead works in the rest and never evicts them. */
static void test_pinned_stay(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], where[8];

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	write_chain(&m, NS, true);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "pin"), 0755), 0);
	for (uint64_t i = 100; i < 104; i++) {
		put(&m, "pin", i, false);
		assert_int_equal(setxattr(chunk_path(&m, p, "pin", i),
					  KVFS_XATTR_PIN, "1", 1, 0), 0);
	}
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(check(&m, NS, i), 0);
	settle(&m);
	assert_true(ra(&m, "promotions") >= 1);
	for (uint64_t i = 100; i < 104; i++) {
		tier_is(&m, "pin", i, where);
		assert_string_equal(where, "l1");
		assert_int_equal(check(&m, "pin", i), 0);
	}
	do_umount(&m);
}

/* Node A writes a chain to L3 (a redis-server of this test); node B,
 * whose L1 holds 8 chunks, reads it twice in order: the second pass is
 * read ahead from L3 (B knows no links of chunks it never held: the
 * order of the first pass). */
static void test_l3_chain(void **state)
{
	const char *pw = "kvfs-ra-l3-secret";
	char opts[PATH_MAX + 512], url[128], p[PATH_MAX];
	static struct kvfs_mnt a, b;
	static struct rt_server srv;
	FILE *f;
	int fd;

	(void)state;
	if (rt_skip_reason())
		skip();
	fd = mkstemp(auth);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "%s\n", pw);
	fclose(f);
	assert_int_equal(rt_start(&srv, false, pw), 0);
	server = &srv;
	rt_url(&srv, url, sizeof(url));
	snprintf(opts, sizeof(opts), "l1_size=64M,max_chunk=1M,l3=%s,"
		 "l3_auth_file=%s,l3_ingest=all,readahead=0", url, auth);
	assert_int_equal(kvfs_test_mount(&a, opts), 0);
	mounted = &a;
	assert_int_equal(mkdir(kvfs_test_path(&a, p, "%s", NS), 0755), 0);
	assert_int_equal(mkdir(kvfs_test_path(&a, p, "%s", NS_LINKED), 0755),
			 0);
	for (uint64_t i = 0; i < 16; i++)
		put(&a, NS, i, false);
	/* and a chain whose writer set its links */
	for (uint64_t i = 0; i < 4; i++)
		put(&a, NS_LINKED, i, true);
	for (int i = 0; i < 300 && kvfs_test_stat(&a, "l3", "puts") < 20; i++)
		sleep_ms(20);
	assert_int_equal(kvfs_test_stat(&a, "l3", "puts"), 20);
	snprintf(opts, sizeof(opts), "l1_size=8M,max_chunk=1M,l3=%s,"
		 "l3_auth_file=%s,l3_timeout_ms=1000", url, auth);
	assert_int_equal(kvfs_test_mount(&b, opts), 0);
	mounted2 = &b;
	assert_int_equal(mkdir(kvfs_test_path(&b, p, "%s", NS), 0755), 0);
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < 16; i++)
			assert_int_equal(check(&b, NS, i), 0);
	settle(&b);
	print_message("l3 readahead: %lld promotions, %lld hits\n",
		      ra(&b, "promotions"), ra(&b, "hits"));
	assert_true(ra(&b, "promotions") >= 4);
	assert_true(ra(&b, "hits") >= 4);
	/* the links travel in the L3 record: B promoted chunk 3 with them */
	{
		char want[33], got[64];
		ssize_t r;

		assert_int_equal(mkdir(kvfs_test_path(&b, p, "%s", NS_LINKED),
				       0755), 0);
		assert_int_equal(check(&b, NS_LINKED, 3), 0);
		kvfs_test_key_name(2, want);
		r = getxattr(chunk_path(&b, p, NS_LINKED, 3), KVFS_XATTR_PARENT,
			     got, sizeof(got) - 1);
		assert_int_equal(r, 32);
		got[r] = 0;
		assert_string_equal(got, want);
		r = getxattr(chunk_path(&b, p, NS_LINKED, 3), KVFS_XATTR_DEPTH,
			     got, sizeof(got) - 1);
		assert_true(r > 0);
		got[r] = 0;
		assert_string_equal(got, "4");
	}
	assert_int_equal(kvfs_test_stat(&b, "l3", "corrupt"), 0);
	mounted2 = NULL;
	assert_int_equal(kvfs_test_umount(&b), 0);
	mounted = NULL;
	assert_int_equal(kvfs_test_umount(&a), 0);
	server = NULL;
	rt_stop(&srv, true);
	unlink(auth);
}

/* ------------------------------------------------------------ restarts */

/* The restart tests write every chunk to L2 as it is published
 * (ingest=all) and wait until all N are on disk: a restart finds the
 * whole chain. */
static void write_all_chain(const struct kvfs_mnt *m, bool link)
{
	char p[PATH_MAX];

	assert_int_equal(mkdir(kvfs_test_path(m, p, "%s", NS), 0755), 0);
	put_all(m, NS, link);
	for (int tries = 0; kvfs_test_stat(m, "l2", "writes") < N; tries++) {
		assert_true(tries < 3000);
		sleep_ms(10);
	}
}

/* Unmounts cleanly, keeping l2_dir for the next mount. */
static void remount_clean(struct kvfs_mnt *m)
{
	mounted = NULL;
	assert_int_equal(kvfs_test_umount(m), 0);
	assert_int_equal(do_mount(m, NULL), 0);
}

/* The daemon dies with SIGKILL (no checkpoint, no flush); mounts again. */
static void remount_killed(struct kvfs_mnt *m)
{
	mounted = NULL;
	kill(m->pid, SIGKILL);
	kvfs_test_umount(m); /* reaps it, unmounts */
	assert_int_equal(do_mount(m, NULL), 0);
}

/* Reads chunks [from, to) in order, each checked; returns the promotions
 * readahead made meanwhile and checks the reader met them (hits). */
static long long read_in_order(const struct kvfs_mnt *m, uint64_t from,
			       uint64_t to)
{
	char p[PATH_MAX];
	long long prom;

	for (uint64_t i = from; i < to; i++)
		assert_int_equal(kvfs_test_read_check(chunk_path(m, p, NS, i), MIB,
						      i), 0);
	settle(m);
	prom = ra(m, "promotions");
	print_message("readahead after restart: %lld promotions, %lld hits, "
		      "%lld wasted\n", prom, ra(m, "hits"), ra(m, "wasted"));
	return prom;
}

/* user.kvfs.parent and user.kvfs.depth of chunk n as written. */
static void links_are_back(const struct kvfs_mnt *m, uint64_t n)
{
	char p[PATH_MAX], want[33], got[64];
	ssize_t r;

	kvfs_test_key_name(n - 1, want);
	r = getxattr(chunk_path(m, p, NS, n), KVFS_XATTR_PARENT, got,
		     sizeof(got) - 1);
	assert_int_equal(r, 32);
	got[r] = 0;
	assert_string_equal(got, want);
	r = getxattr(chunk_path(m, p, NS, n), KVFS_XATTR_DEPTH, got,
		     sizeof(got) - 1);
	assert_true(r > 0);
	got[r] = 0;
	assert_int_equal(strtoull(got, NULL, 10), n + 1);
}

static void test_links_survive_clean_unmount(void **state)
{
	struct kvfs_mnt m;

	(void)state;
	assert_int_equal(do_mount(&m, "ingest=all"), 0);
	write_all_chain(&m, true);
	remount_clean(&m);
	/* from the checkpoint, nothing scanned */
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), N);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_records"), 0);
	assert_int_equal(ra(&m, "promotions"), 0);
	links_are_back(&m, 5);
	/* the head opens the window; the reader finds most chunks there */
	assert_true(read_in_order(&m, 0, 20) >= 8);
	assert_true(ra(&m, "hits") >= 8);
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 0);
	do_umount(&m);
}

static void test_links_survive_kill(void **state)
{
	struct kvfs_mnt m;

	(void)state;
	/* no periodic checkpoint: the restart scans the record headers */
	assert_int_equal(do_mount(&m, "ingest=all,l2_checkpoint_s=0"), 0);
	write_all_chain(&m, true);
	remount_killed(&m);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_records"), N);
	links_are_back(&m, 7);
	assert_true(read_in_order(&m, 0, 20) >= 8);
	assert_true(ra(&m, "hits") >= 8);
	do_umount(&m);
}

/* Links a batched lookup stamped on chunks already in L2 (their writers
 * set none, and wrote them in the other order) are kept too: the record's
 * entry takes them, so the checkpoint of a clean unmount holds them. */
static void test_stamped_links_survive_clean_unmount(void **state)
{
	struct kvfs_key keys[N];
	struct kvfs_mnt m;
	char p[PATH_MAX], hex[33];
	int fd;

	(void)state;
	assert_int_equal(do_mount(&m, "ingest=all"), 0);
	write_all_chain(&m, false);
	for (uint64_t i = 0; i < N; i++) {
		kvfs_test_key_name(i, hex);
		assert_int_equal(kvfs_key_parse(hex, 32, &keys[i]), 0);
	}
	fd = open(kvfs_test_path(&m, p, "%s", NS), O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	/* depths from 1, as the writers' links would say */
	assert_int_equal(kvfs_lookup(fd, keys, N, 1, 0, 0, NULL), N);
	close(fd);
	links_are_back(&m, 5);
	remount_clean(&m);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), N);
	links_are_back(&m, 5);
	links_are_back(&m, 21);
	assert_true(read_in_order(&m, 0, 20) >= 8);
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 0);
	do_umount(&m);
}

/* No links: one pass teaches the order; after the restart the first pass
 * is read ahead. */
static void learn_order(struct kvfs_mnt *m)
{
	char p[PATH_MAX];

	write_all_chain(m, false);
	for (uint64_t i = 0; i < 12; i++)
		assert_int_equal(kvfs_test_read_check(chunk_path(m, p, NS, i), MIB,
						      i), 0);
}

static void test_learned_order_survives_clean_unmount(void **state)
{
	struct kvfs_mnt m;

	(void)state;
	assert_int_equal(do_mount(&m, "ingest=all"), 0);
	learn_order(&m);
	remount_clean(&m);
	assert_int_equal(ra(&m, "promotions"), 0);
	assert_true(read_in_order(&m, 0, 12) >= 4);
	assert_true(ra(&m, "hits") >= 4);
	do_umount(&m);
}

static void test_learned_order_survives_kill(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];
	long long ck;

	(void)state;
	assert_int_equal(do_mount(&m, "ingest=all,l2_checkpoint_s=1"), 0);
	write_all_chain(&m, false);
	/* a periodic checkpoint holds every record before the learning */
	for (int tries = 0; kvfs_test_stat(&m, "l2_recovery",
					   "checkpoint_entries") < N; tries++) {
		assert_true(tries < 500);
		sleep_ms(10);
	}
	for (uint64_t i = 0; i < 12; i++)
		assert_int_equal(kvfs_test_read_check(chunk_path(&m, p, NS, i), MIB,
						      i), 0);
	/* nothing changed in L2 since: the learned order alone makes the
	 * next periodic checkpoint due */
	ck = kvfs_test_stat(&m, "l2_recovery", "checkpoints");
	sleep_ms(2500);
	assert_true(kvfs_test_stat(&m, "l2_recovery", "checkpoints") > ck);
	remount_killed(&m);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), N);
	assert_true(read_in_order(&m, 0, 12) >= 4);
	assert_true(ra(&m, "hits") >= 4);
	do_umount(&m);
}

/*
 * No links, nothing read before the restart: chunks written one after the
 * other in a namespace (as an engine stores a prompt's chunks) are read
 * ahead in that order by the first reader after a clean unmount or a
 * SIGKILL after the periodic checkpoint; a reader that jumps around them
 * opens no window.
 */
enum restart { CLEAN, KILL_AFTER_CKPT, KILL_NO_CKPT };

static void write_order_case(enum restart how)
{
	bool kill_it = how != CLEAN;
	/* never the chunk written after the one read before */
	static const uint64_t jumps[] = { 20, 15, 24, 17, 27, 14, 22, 18, 25,
					  16 };
	struct kvfs_mnt m;
	char p[PATH_MAX];

	/* after a kill before any checkpoint the scanned order may swap
	 * neighbours, so the reader also promotes chunks itself; in 8 MiB
	 * of L1 chunks readahead promoted then left it unread (CI: 8
	 * promotions, 1 hit, 5 wasted). With 16 MiB: 5-10 hits in 10 runs
	 * under ASan, 4 of them with a core kept busy */
	assert_int_equal(do_mount_l1(&m, how == KILL_NO_CKPT ? "16M" : "8M",
				     how == KILL_AFTER_CKPT ?
					     "ingest=all,l2_checkpoint_s=1" :
				     how == KILL_NO_CKPT ?
					     "ingest=all,l2_checkpoint_s=0" :
					     "ingest=all"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "%s", NS), 0755), 0);
	for (uint64_t i = 0; i < N; i++)
		put(&m, NS, i, false);
	for (int tries = 0; kvfs_test_stat(&m, "l2", "writes") < N; tries++) {
		assert_true(tries < 3000);
		sleep_ms(10);
	}
	if (how == KILL_AFTER_CKPT) {
		/* a periodic checkpoint holds every record, so the order
		 * of their publication (set before their L2 writes) */
		for (int tries = 0; kvfs_test_stat(&m, "l2_recovery",
						   "checkpoint_entries") < N;
		     tries++) {
			assert_true(tries < 500);
			sleep_ms(10);
		}
	}
	if (kill_it)
		remount_killed(&m);
	else
		remount_clean(&m);
	/* no checkpoint at all: the order comes from the scan of the log
	 * (ingest=all writes it in the order of publication) */
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", how == KILL_NO_CKPT ?
					"scan_records" : "ckpt_records"), N);
	assert_int_equal(ra(&m, "promotions"), 0);
	/* jumping first (among chunks the in-order reader will not read):
	 * no window, nothing promoted ahead */
	for (size_t i = 0; i < sizeof(jumps) / sizeof(jumps[0]); i++)
		assert_int_equal(kvfs_test_read_check(chunk_path(&m, p, NS,
								 jumps[i]),
						      MIB, jumps[i]), 0);
	sleep_ms(200);
	assert_int_equal(ra(&m, "promotions"), 0);
	/* then in the order written (past what the jumps left in L1); the
	 * log's order after a kill before any checkpoint is the order the
	 * records reached the disk, which may swap neighbours (CI: 5
	 * promotions, 2 hits): none at all before it was learned */
	assert_true(read_in_order(&m, 0, 12) >= (how == KILL_NO_CKPT ? 2 : 4));
	assert_true(ra(&m, "hits") >= (how == KILL_NO_CKPT ? 2 : 4));
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 0);
	do_umount(&m);
}

static void test_write_order_after_clean_unmount(void **state)
{
	(void)state;
	write_order_case(CLEAN);
}

static void test_write_order_after_kill(void **state)
{
	(void)state;
	write_order_case(KILL_AFTER_CKPT);
}

static void test_write_order_after_kill_before_checkpoint(void **state)
{
	(void)state;
	write_order_case(KILL_NO_CKPT);
}

/*
 * An L2 at its l2_size (issue 26): L1 full of chunks written last (only in
 * L1) and an L2 whose reclaim has dropped chunks already, on a disk with
 * room: the steady state of a cache. A reader following the chain from L2
 * opens a window and readahead promotes along it (nothing paused): only a
 * disk that cut L2 below l2_size pauses it (test_l2_full).
 */
#define NFULL 48 /* 1 MiB chunks into a 24 MiB L2: it wraps twice */

static void test_full_l2_reads_ahead(void **state)
{
	char opts[PATH_MAX + 128], p[PATH_MAX], where[8];
	unsigned nl1 = 0;
	long long writes, prev = -1;
	uint64_t lo = NFULL;
	struct kvfs_mnt m;

	(void)state;
	snprintf(opts, sizeof(opts), "l1_size=8M,max_chunk=1M,compress=none,"
		 "l2_dir=%s,l2_size=24M", l2dir);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	mounted = &m;
	assert_true(ra(&m, "max") > 0); /* readahead at its default */
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "%s", NS), 0755), 0);
	for (uint64_t i = 0; i < NFULL; i++) {
		put(&m, NS, i, true);
		if (i % 8 == 7)
			sleep_ms(20); /* let the demoter keep up under ASan */
	}
	/* the demotions land: the same write count three times running */
	for (int t = 0, same = 0; t < 150 && same < 2; t++) {
		sleep_ms(200);
		writes = kvfs_test_stat(&m, "l2", "writes");
		same = writes == prev ? same + 1 : 0;
		prev = writes;
	}
	/* L2 is full: a reclaim dropped chunks (not only compacted) */
	assert_true(kvfs_test_stat(&m, "l2", "reclaims") >
		    kvfs_test_stat(&m, "l2", "compactions"));
	for (uint64_t i = 0; i < NFULL; i++) {
		tier_is(&m, NS, i, where);
		if (!strcmp(where, "l1"))
			nl1++; /* ingest=evicted: never demoted */
		/* the oldest run of 6 chunks in L2 */
		if (lo == NFULL && i >= 5 && !strcmp(where, "l2")) {
			char w[8];
			bool run = true;

			for (uint64_t k = i - 5; k < i && run; k++) {
				tier_is(&m, NS, k, w);
				run = !strcmp(w, "l2");
			}
			if (run)
				lo = i - 5;
		}
	}
	assert_true(nl1 >= 4);
	assert_true(lo < NFULL);
	/* the reader: two chunks in chain order open a window of 4 */
	for (uint64_t i = lo; i < lo + 3; i++)
		assert_int_equal(check(&m, NS, i), 0);
	settle(&m);
	sleep_ms(300);
	print_message("L2 at l2_size: %u chunks only in L1; readahead %lld "
		      "promotions, %lld paused\n", nl1,
		      ra(&m, "promotions"), ra(&m, "paused"));
	assert_true(ra(&m, "promotions") >= 1);
	assert_int_equal(ra(&m, "paused"), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2", "corrupt"), 0);
	do_umount(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_chain_is_read_ahead, test_teardown),
		cmocka_unit_test_teardown(test_readahead_off, test_teardown),
		cmocka_unit_test_teardown(test_jumping_reader, test_teardown),
		cmocka_unit_test_teardown(test_learned_successors, test_teardown),
		cmocka_unit_test_teardown(test_corrupt_record_is_a_miss, test_teardown),
		cmocka_unit_test_teardown(test_pinned_stay, test_teardown),
		cmocka_unit_test_teardown(test_l3_chain, test_teardown),
		cmocka_unit_test_teardown(test_links_survive_clean_unmount,
					  test_teardown),
		cmocka_unit_test_teardown(test_links_survive_kill, test_teardown),
		cmocka_unit_test_teardown(test_stamped_links_survive_clean_unmount,
					  test_teardown),
		cmocka_unit_test_teardown(test_learned_order_survives_clean_unmount,
					  test_teardown),
		cmocka_unit_test_teardown(test_write_order_after_clean_unmount,
					  test_teardown),
		cmocka_unit_test_teardown(test_write_order_after_kill,
					  test_teardown),
		cmocka_unit_test_teardown(
			test_write_order_after_kill_before_checkpoint,
			test_teardown),
		cmocka_unit_test_teardown(test_learned_order_survives_kill,
					  test_teardown),
		cmocka_unit_test_teardown(test_full_l2_reads_ahead, test_teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
