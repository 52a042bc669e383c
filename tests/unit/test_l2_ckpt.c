/*
 * test_l2_ckpt.c - the checkpoint of the L2 index (record.h): a reopen
 * after l2_close loads it instead of scanning; after a kill it loads it
 * and scans only what was written since; records freed since it (the
 * unlink log), erased on disk, or in a segment deleted by hand never come
 * back; a damaged, torn or foreign checkpoint falls back to the full scan
 * with one log line; the parser rejects every truncation and bit flip.
 * Chain links (record header version 2) come back from the checkpoint
 * and from the scan, the engine's blob (KVCKPT_ORDER) from the
 * checkpoint; version 1 records and checkpoints are still read.
 */
#include <signal.h>
#include <sys/wait.h>

#include "l2_test.h"
#include "tier/l2/l2_i.h"

#define LEN (20 * 1024)
#define NS(i) ((i) % 2 ? "a.r0" : "b.r1")

static void put_n(struct env *e, uint64_t from, uint64_t to, uint64_t seed)
{
	uint8_t *buf = malloc(LEN);

	for (uint64_t i = from; i < to; i++) {
		struct kvfs_key k = mkkey(i);

		fill_bf16(buf, LEN, seed + i);
		assert_int_equal(put(e, NS(i), &k, buf, LEN, 1, 2, true, NULL), 0);
	}
	free(buf);
}

/* Every key in [from, to) reads back as written with seed, or (gone)
 * is a miss. */
static void check_n(struct env *e, uint64_t from, uint64_t to, uint64_t seed,
		    bool gone)
{
	uint8_t *buf = malloc(LEN), *back = malloc(LEN);

	for (uint64_t i = from; i < to; i++) {
		struct kvfs_key k = mkkey(i);
		int rc = get(e, NS(i), &k, back, LEN);

		if (gone) {
			assert_int_not_equal(rc, 0);
			continue;
		}
		assert_int_equal(rc, 0);
		fill_bf16(buf, LEN, seed + i);
		assert_memory_equal(buf, back, LEN);
	}
	free(buf);
	free(back);
}

static void reopen(struct env *e)
{
	char err[256];

	l2_close(e->l2);
	e->l2 = NULL;
	env_reset_index(e);
	e->nlogs = 0;
	e->lastlog[0] = 0;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
}

static struct env *ckpt_env(void)
{
	struct env *e = env_new();
	char err[256];

	e->ckpt_s = 0; /* at close (and l2_checkpoint) only */
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	return e;
}

static void ckpt_path(struct env *e, char *p, size_t len)
{
	snprintf(p, len, "%s/%s", e->dir, KVCKPT_FILE);
}

static void test_clean_reopen_loads_checkpoint(void **state)
{
	struct env *e = ckpt_env();
	struct l2_stats st;

	(void)state;
	put_n(e, 0, 50, 0);
	reopen(e);
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.recover_ckpt_records, 50);
	assert_int_equal(st.recover_scan_records, 0);
	assert_int_equal(st.recover_scan_bytes, 0);
	assert_int_equal(st.records, 50);
	assert_int_equal(e->recovered, 50);
	assert_int_equal(e->nlogs, 0);
	check_n(e, 0, 50, 0, false);
	/* rewritten and freed keys after the checkpoint, then a clean close */
	put_n(e, 0, 10, 1000);
	{
		struct kvfs_key k = mkkey(20);
		struct l2_loc loc = find(e, NS(20), &k)->loc;

		l2_free(e->l2, &loc);
		find(e, NS(20), &k)->present = false;
	}
	reopen(e);
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.records, 49);
	check_n(e, 0, 10, 1000, false);
	check_n(e, 10, 20, 0, false);
	check_n(e, 20, 21, 0, true);
	check_n(e, 21, 50, 0, false);
	env_free(e);
}

/* A child writes, checkpoints, writes more, frees, and is killed: the
 * reopen loads the checkpoint, scans only the newer records, and applies
 * the unlink log. */
static void test_kill_after_checkpoint(void **state)
{
	struct env *e = ckpt_env();
	struct l2_stats st;
	pid_t pid;
	int ws;

	(void)state;
	put_n(e, 0, 40, 0);
	l2_close(e->l2);
	e->l2 = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char err[256];

		env_reset_index(e);
		if (env_open(e, 64ull << 20, err, sizeof(err)))
			_exit(2);
		put_n(e, 40, 60, 0);
		if (l2_checkpoint(e->l2))
			_exit(3);
		put_n(e, 60, 80, 0);       /* after the checkpoint */
		put_n(e, 0, 5, 500);       /* replaced after it */
		for (uint64_t i = 30; i < 50; i++) { /* unlinked after it */
			struct kvfs_key k = mkkey(i);

			l2_free(e->l2, &find(e, NS(i), &k)->loc);
		}
		l2_sync_frees(e->l2, 5000);
		raise(SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	env_reset_index(e);
	{
		char err[256];

		assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.recover_scan_records, 25); /* 60..79 and 0..4 */
	assert_int_equal(st.recover_ckpt_records, 80 - 20 - 25);
	assert_int_equal(st.records, 60);
	check_n(e, 0, 5, 500, false);
	check_n(e, 5, 30, 0, false);
	check_n(e, 30, 50, 0, true);
	check_n(e, 50, 80, 0, false);
	env_free(e);
}

/* A damaged unlink log (a torn or flipped entry): the checkpoint cannot
 * be trusted without it, so the mount scans; what the log's valid part
 * names stays erased. */
static void test_damaged_unlink_log_scans(void **state)
{
	struct env *e = ckpt_env();
	struct l2_stats st;
	char p[256];
	int fd;

	(void)state;
	put_n(e, 0, 20, 0);
	l2_close(e->l2);
	e->l2 = NULL;
	{
		char err[256];

		env_reset_index(e);
		assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	}
	for (uint64_t i = 0; i < 4; i++) {
		struct kvfs_key k = mkkey(i);

		l2_free(e->l2, &find(e, NS(i), &k)->loc);
	}
	l2_sync_frees(e->l2, 5000);
	/* as if killed now (the close would checkpoint): keep the files */
	snprintf(p, sizeof(p), "%s/%s", e->dir, KVCKPT_FREED_FILE);
	fd = open(p, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "garbage", 7), 7);
	close(fd);
	{
		/* a second process may not open it (LOCK): copy the
		 * directory's state by closing without a checkpoint */
		struct kvckpt_freed f[8];

		fd = open(p, O_RDONLY);
		assert_int_equal(read(fd, f, sizeof(f)), 4 * sizeof(f[0]) + 7);
		close(fd);
		e->l2->cfg.checkpoint_s = -1;
		l2_close(e->l2);
		e->l2 = NULL;
		fd = open(p, O_WRONLY | O_TRUNC);
		assert_int_equal(write(fd, f, 4 * sizeof(f[0]) + 7),
				 4 * (ssize_t)sizeof(f[0]) + 7);
		close(fd);
	}
	reopen(e);
	l2_get_stats(e->l2, &st);
	assert_false(st.recover_ckpt);
	assert_non_null(strstr(e->lastlog, "unlink log"));
	assert_int_equal(st.records, 16);
	check_n(e, 0, 4, 0, true);
	check_n(e, 4, 20, 0, false);
	env_free(e);
}

/* The checkpoint says a record is there; on disk it is gone (erased by
 * hand, as a reclaim or unlink whose log was lost would): a miss at the
 * first read, which drops it, never other bytes. */
static void test_erased_record_is_a_miss(void **state)
{
	struct env *e = ckpt_env();
	struct kvfs_key k = mkkey(7);
	uint8_t *back = malloc(LEN);
	struct l2_stats st;
	struct l2_loc loc;
	char p[256];
	int fd;

	(void)state;
	put_n(e, 0, 20, 0);
	loc = find(e, NS(7), &k)->loc;
	l2_close(e->l2);
	e->l2 = NULL;
	seg_path(e, loc.seg, p, sizeof(p));
	fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	{
		uint8_t z[L2_ALIGN] = { 0 };

		assert_int_equal(pwrite(fd, z, sizeof(z),
					(off_t)loc.blk * L2_ALIGN),
				 (ssize_t)sizeof(z));
	}
	close(fd);
	{
		char err[256];

		env_reset_index(e);
		assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.records, 20); /* not read at mount */
	assert_int_equal(get(e, NS(7), &k, back, LEN), -EBADMSG);
	check_n(e, 0, 7, 0, false);
	check_n(e, 8, 20, 0, false);
	free(back);
	env_free(e);
}

/* A segment file deleted by hand: its checkpoint entries are dropped at
 * load (not offered to the engine), the rest is served. */
static void test_segment_deleted_by_hand(void **state)
{
	struct env *e = ckpt_env();
	struct kvfs_key k = mkkey(0);
	struct l2_stats st;
	uint32_t seg;
	char p[256];
	unsigned in_seg = 0;

	(void)state;
	/* small records, then 3 MiB ones of random bytes: several
	 * segments */
	put_n(e, 0, 40, 0);
	seg = find(e, NS(0), &k)->loc.seg;
	{
		uint8_t *big = malloc(3u << 20);

		for (uint64_t i = 100; i < 110; i++) {
			struct kvfs_key kk = mkkey(i);

			fill_random(big, 3u << 20, i);
			assert_int_equal(put(e, "c", &kk, big, 3u << 20, 0, 0,
					     true, NULL), 0);
		}
		free(big);
	}
	for (size_t i = 0; i < e->n; i++)
		in_seg += e->ents[i].present && e->ents[i].loc.seg == seg;
	l2_close(e->l2);
	e->l2 = NULL;
	seg_path(e, seg, p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	{
		char err[256];

		env_reset_index(e);
		assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_true(in_seg >= 1);
	assert_int_equal(e->recovered, 50 - in_seg);
	for (size_t i = 0; i < e->n; i++)
		assert_int_not_equal(e->ents[i].loc.seg, seg);
	env_free(e);
}

/* Damaged, torn and foreign checkpoints: the full scan, one log line
 * saying why, the same records. */
static void fallback_case(int how)
{
	struct env *e = ckpt_env();
	struct l2_stats st;
	char p[256], err[256];
	struct stat sb;
	int fd;

	put_n(e, 0, 30, 0);
	l2_close(e->l2);
	e->l2 = NULL;
	ckpt_path(e, p, sizeof(p));
	assert_int_equal(stat(p, &sb), 0);
	if (how == 0) { /* truncated */
		assert_int_equal(truncate(p, sb.st_size - 9), 0);
	} else if (how == 1) { /* one bit flipped inside the entries */
		uint8_t b;

		fd = open(p, O_RDWR);
		assert_int_equal(pread(fd, &b, 1, sb.st_size / 2), 1);
		b ^= 4;
		assert_int_equal(pwrite(fd, &b, 1, sb.st_size / 2), 1);
		close(fd);
	} else { /* another l2_dir's checkpoint */
		struct env *o = ckpt_env();
		char q[256], cmd[600];

		put_n(o, 0, 30, 0);
		l2_close(o->l2);
		o->l2 = NULL;
		ckpt_path(o, q, sizeof(q));
		snprintf(cmd, sizeof(cmd), "cp %s %s", q, p);
		assert_int_equal(system(cmd), 0);
		env_free(o);
	}
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_false(st.recover_ckpt);
	assert_int_equal(st.recover_scan_records, 30);
	assert_int_equal(e->nlogs, 1);
	assert_non_null(strstr(e->lastlog, "no usable checkpoint"));
	assert_non_null(strstr(e->lastlog, how == 0 ? "torn" :
			       how == 1 ? "checksum" : "another l2_dir"));
	check_n(e, 0, 30, 0, false);
	/* the bad file is gone: the next clean open loads a fresh one */
	reopen(e);
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	check_n(e, 0, 30, 0, false);
	env_free(e);
}

static void test_truncated(void **state)
{
	(void)state;
	fallback_case(0);
}

static void test_bit_flip(void **state)
{
	(void)state;
	fallback_case(1);
}

static void test_other_l2_dir(void **state)
{
	(void)state;
	fallback_case(2);
}

/* Puts [from, to) with chunk i linked to parent i - 1, depth i + 1. */
static void put_linked(struct env *e, uint64_t from, uint64_t to)
{
	uint8_t *buf = malloc(LEN);

	for (uint64_t i = from; i < to; i++) {
		struct kvfs_key k = mkkey(i), pk = mkkey(i - 1);

		e->put_parent = i ? &pk : NULL;
		e->put_depth = (uint32_t)i + 1;
		fill_bf16(buf, LEN, i);
		assert_int_equal(put(e, NS(i), &k, buf, LEN, 1, 2, true, NULL), 0);
	}
	e->put_parent = NULL;
	e->put_depth = 0;
	free(buf);
}

static void links_are_back(struct env *e, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++) {
		struct kvfs_key k = mkkey(i), pk = mkkey(i - 1);
		struct ment *m = find(e, NS(i), &k);

		assert_non_null(m);
		assert_int_equal(m->has_parent, i > 0);
		if (i)
			assert_memory_equal(m->parent.b, pk.b, 16);
		assert_int_equal(m->depth, i + 1);
	}
}

/* Links come back from the checkpoint (clean close) and from the record
 * headers (no checkpoint: the scan); the engine's blob only from the
 * checkpoint; unlinked records stay without a link. */
static void test_links_and_order_kept(void **state)
{
	struct env *e = ckpt_env();
	struct l2_stats st;
	char p[256];

	(void)state;
	e->order = "the learned order";
	put_linked(e, 0, 20);
	put_n(e, 20, 24, 20);
	reopen(e);
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.recover_ckpt_records, 24);
	links_are_back(e, 0, 20);
	for (uint64_t i = 20; i < 24; i++) {
		struct kvfs_key k = mkkey(i);

		assert_false(find(e, NS(i), &k)->has_parent);
		assert_int_equal(find(e, NS(i), &k)->depth, 0);
	}
	assert_non_null(e->order_back);
	assert_string_equal(e->order_back, "the learned order");
	check_n(e, 0, 20, 0, false);

	/* no checkpoint: the headers say it */
	free(e->order_back);
	e->order_back = NULL;
	l2_close(e->l2);
	e->l2 = NULL;
	ckpt_path(e, p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	env_reset_index(e);
	{
		char err[256];

		assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	}
	l2_get_stats(e->l2, &st);
	assert_false(st.recover_ckpt);
	assert_int_equal(st.recover_scan_records, 24);
	links_are_back(e, 0, 20);
	assert_null(e->order_back);
	env_free(e);
}

/* Version 1 (what daemons before chain links wrote): a header without a
 * link is still built as version 1; both versions are read; a version 2
 * header with an unknown flag or a newer version is refused. */
static void test_record_versions(void **state)
{
	struct kvfs_key k = mkkey(1), pk = mkkey(0), got;
	struct kvrec_desc d = { .ns = "a", .key = &k, .seq = 3, .raw_len = 8,
				.stored_len = 8 };
	struct kvrec_hdr h;
	uint32_t depth;

	(void)state;
	assert_int_equal(kvrec_hdr_build(&h, &d, 42), 0);
	assert_int_equal(h.version, 1);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), 0);
	assert_false(kvrec_hdr_link(&h, &got, &depth));
	assert_int_equal(depth, 0);
	d.parent = &pk;
	d.depth = 7;
	assert_int_equal(kvrec_hdr_build(&h, &d, 42), 0);
	assert_int_equal(h.version, 2);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), 0);
	assert_true(kvrec_hdr_link(&h, &got, &depth));
	assert_memory_equal(got.b, pk.b, 16);
	assert_int_equal(depth, 7);
	h.flags |= 2;
	h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum), 42);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), -EBADMSG);
	kvrec_hdr_set_link(&h, NULL, 0, 42); /* back to version 1 */
	assert_int_equal(h.version, 1);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), 0);
	h.version = KVREC_VERSION + 1;
	h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum), 42);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), -EBADMSG);
}

/* Version 3: a path file's attributes; with or without a link, kept by
 * set_link; a mode past 07777 or nanoseconds past 10^9 are refused. */
static void test_record_attrs(void **state)
{
	struct kvfs_key k = mkkey(1), pk = mkkey(0), got;
	struct kvrec_attr a = { .mode = 0600, .uid = 1000, .gid = 1001,
				.mtime_nsec = 123456789,
				.mtime_sec = INT64_C(-5000000000) };
	struct kvrec_attr b;
	struct kvrec_desc d = { .ns = "a", .key = &k, .seq = 3, .raw_len = 8,
				.stored_len = 8, .attr = &a };
	struct kvrec_hdr h;
	uint32_t depth;

	(void)state;
	assert_int_equal(kvrec_hdr_build(&h, &d, 42), 0);
	assert_int_equal(h.version, 3);
	assert_int_equal(h.flags, KVREC_F_ATTR);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), 0);
	assert_true(kvrec_hdr_attr(&h, &b));
	assert_memory_equal(&a, &b, sizeof(a));
	assert_false(kvrec_hdr_link(&h, &got, &depth));
	kvrec_hdr_set_link(&h, &pk, 4, 42); /* a link: still version 3 */
	assert_int_equal(h.version, 3);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), 0);
	assert_true(kvrec_hdr_link(&h, &got, &depth));
	assert_int_equal(depth, 4);
	assert_true(kvrec_hdr_attr(&h, &b));
	assert_memory_equal(&a, &b, sizeof(a));
	kvrec_hdr_set_link(&h, NULL, 0, 42);
	assert_int_equal(h.version, 3);
	assert_true(kvrec_hdr_attr(&h, &b));
	h.mode = 010000;
	h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum), 42);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), -EBADMSG);
	h.mode = 0600;
	h.mtime_nsec = 1000000000u;
	h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum), 42);
	assert_int_equal(kvrec_hdr_check(&h, 42, 1 << 20), -EBADMSG);
	d.attr = NULL; /* no attributes: version 1, none read */
	assert_int_equal(kvrec_hdr_build(&h, &d, 42), 0);
	assert_int_equal(h.version, 1);
	assert_false(kvrec_hdr_attr(&h, &b));
}

/* A version 1 checkpoint (no LINK, no ORDER blocks) still loads. */
static void test_v1_checkpoint_loads(void **state)
{
	struct env *e = ckpt_env();
	struct kvckpt_hdr h;
	struct l2_stats st;
	char p[256], err[256];
	int fd;

	(void)state;
	put_n(e, 0, 16, 0);
	l2_close(e->l2);
	e->l2 = NULL;
	ckpt_path(e, p, sizeof(p));
	fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	assert_int_equal(h.version, KVCKPT_VERSION);
	h.version = 1;
	h.sum = kvrec_sum(&h, offsetof(struct kvckpt_hdr, sum), h.salt);
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_true(st.recover_ckpt);
	assert_int_equal(st.recover_ckpt_records, 16);
	check_n(e, 0, 16, 0, false);
	env_free(e);
}

/* The parser: every truncation and every bit flip of a real checkpoint
 * is refused (EBADMSG, or ESTALE for the salt field), the file itself is
 * taken. */
static void test_parser(void **state)
{
	struct env *e = ckpt_env();
	struct l2_ckpt_info ci;
	char p[256], why[160];
	uint8_t *buf;
	struct stat sb;
	size_t len;
	int fd;

	(void)state;
	/* every kind of block: SEG, LINK, NS, ORDER, END */
	e->order = "order";
	put_linked(e, 0, 12);
	l2_close(e->l2);
	e->l2 = NULL;
	ckpt_path(e, p, sizeof(p));
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	len = (size_t)sb.st_size;
	buf = malloc(len);
	assert_int_equal(read(fd, buf, len), (ssize_t)len);
	close(fd);
	{
		struct kvckpt_hdr h;

		memcpy(&h, buf, sizeof(h));
		assert_int_equal(l2_ckpt_check(buf, len, h.salt, &ci, why,
					       sizeof(why)), 0);
		assert_int_equal(ci.records, 12);
		assert_int_equal(ci.nns, 2);
		assert_int_equal(ci.order_len, 5);
		assert_int_equal(l2_ckpt_check(buf, len, h.salt + 1, &ci, why,
					       sizeof(why)), -ESTALE);
		for (size_t n = 0; n < len; n++)
			assert_int_equal(l2_ckpt_check(buf, n, h.salt, &ci, why,
						       sizeof(why)), -EBADMSG);
		for (size_t bit = 0; bit < len * 8; bit++) {
			int rc;

			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = l2_ckpt_check(buf, len, h.salt, &ci, why,
					   sizeof(why));
			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (bit / 8 >= offsetof(struct kvckpt_hdr, salt) &&
			    bit / 8 < offsetof(struct kvckpt_hdr, salt) + 8)
				assert_int_equal(rc, -ESTALE);
			else
				assert_int_equal(rc, -EBADMSG);
		}
	}
	free(buf);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_reopen_loads_checkpoint),
		cmocka_unit_test(test_kill_after_checkpoint),
		cmocka_unit_test(test_erased_record_is_a_miss),
		cmocka_unit_test(test_damaged_unlink_log_scans),
		cmocka_unit_test(test_segment_deleted_by_hand),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bit_flip),
		cmocka_unit_test(test_other_l2_dir),
		cmocka_unit_test(test_parser),
		cmocka_unit_test(test_links_and_order_kept),
		cmocka_unit_test(test_record_versions),
		cmocka_unit_test(test_record_attrs),
		cmocka_unit_test(test_v1_checkpoint_loads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
