/*
 * test_nsmeta.c - the namespaces file of fs/fs_nsfile.c (the attributes of
 * namespaces kept in l2_dir across a warm restart): what is written reads
 * back the same, odd names included; any changed or missing byte, another
 * version, or a well-sealed file with bad fields is rejected whole; the
 * file is replaced atomically and leaves no temporary behind.
 *
 * fs/ is linked into kvfs-mount only, so the format's source is compiled
 * in here (it needs nothing but libc and hash/).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/fs_nsfile.c"

static void ent_set(struct fs_nsfile_ent *e, const char *name, mode_t mode,
		    uid_t uid, gid_t gid, uint64_t chunk_bytes,
		    const char *dtype, int shuffle)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->a.mode = S_IFDIR | mode;
	e->a.uid = uid;
	e->a.gid = gid;
	snprintf(e->a.dtype, sizeof(e->a.dtype), "%s", dtype);
	e->a.mtime.tv_sec = 1700000000 + (time_t)chunk_bytes;
	e->a.mtime.tv_nsec = 5;
	e->a.ctime.tv_sec = 1700000001;
	e->a.ctime.tv_nsec = 999999999;
	e->chunk_bytes = chunk_bytes;
	e->chunk_tokens = (uint32_t)(chunk_bytes >> 10); /* any value */
	e->shuffle = shuffle;
}

/* A sample with names that need escaping, sorted as parse sorts. */
static void sample(struct fs_nsfile *f, struct fs_nsfile_ent ent[4])
{
	char longname[KVFS_NS_NAME_MAX + 1];

	memset(longname, '%', KVFS_NS_NAME_MAX);
	longname[KVFS_NS_NAME_MAX] = 0;
	ent_set(&ent[0], "%%% % \n\t\x01\xff end", 0777, 0, 0, 0, "", 2);
	ent_set(&ent[1], longname, 01750, 4294967295u, 7, 1, "fp8", 0);
	ent_set(&ent[2], "llama3-8b.bf16.tp2.r0", 0700, 1000, 1000,
		UINT64_MAX, "bf16", 2);
	ent_set(&ent[3], "x", 0, 1, 2, 65536, "fp32", 4);
	memset(f, 0, sizeof(*f));
	f->root.mode = S_IFDIR | 02711;
	f->root.uid = 12;
	f->root.gid = 34;
	f->n = 4;
	f->ent = ent;
}

static void ent_equal(const struct fs_nsfile_ent *a,
		      const struct fs_nsfile_ent *b)
{
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->a.mode, b->a.mode);
	assert_int_equal(a->a.uid, b->a.uid);
	assert_int_equal(a->a.gid, b->a.gid);
	assert_string_equal(a->a.dtype, b->a.dtype);
	assert_int_equal(a->a.mtime.tv_sec, b->a.mtime.tv_sec);
	assert_int_equal(a->a.mtime.tv_nsec, b->a.mtime.tv_nsec);
	assert_int_equal(a->a.ctime.tv_sec, b->a.ctime.tv_sec);
	assert_int_equal(a->a.ctime.tv_nsec, b->a.ctime.tv_nsec);
	assert_true(a->chunk_bytes == b->chunk_bytes);
	assert_int_equal(a->chunk_tokens, b->chunk_tokens);
	assert_int_equal(a->shuffle, b->shuffle);
}

static void test_round_trip(void **state)
{
	struct fs_nsfile f, g;
	struct fs_nsfile_ent ent[4];
	char *buf;
	size_t len;

	(void)state;
	sample(&f, ent);
	assert_int_equal(fs_nsfile_format(&f, &buf, &len), 0);
	assert_int_equal(strlen(buf), len);
	/* names are escaped: one record per line, nothing but printables */
	for (size_t i = 0; i < len; i++)
		assert_true(buf[i] == '\n' || (buf[i] >= ' ' && buf[i] < 127));
	assert_int_equal(fs_nsfile_parse(buf, len, &g), 0);
	assert_int_equal(g.root.mode, S_IFDIR | 02711);
	assert_int_equal(g.root.uid, 12);
	assert_int_equal(g.root.gid, 34);
	assert_int_equal(g.n, 4);
	/* parse sorts by name: "%%%..." < "%%%% ..." < "l..." < "x" */
	qsort(ent, 4, sizeof(ent[0]), ent_name_cmp);
	for (size_t i = 0; i < 4; i++)
		ent_equal(&g.ent[i], &ent[i]);
	fs_nsfile_free(&g);
	assert_null(g.ent);
	free(buf);

	/* a time before 1970 (utimes allows it) still gives a file that
	 * parses */
	ent[0].a.mtime.tv_sec = -5;
	assert_int_equal(fs_nsfile_format(&f, &buf, &len), 0);
	assert_int_equal(fs_nsfile_parse(buf, len, &g), 0);
	assert_int_equal(g.n, 4);
	assert_int_equal(g.ent[0].a.mtime.tv_sec, 0);
	assert_int_equal(g.ent[0].a.mtime.tv_nsec, 0);
	fs_nsfile_free(&g);
	free(buf);

	/* no namespaces at all */
	f.n = 0;
	assert_int_equal(fs_nsfile_format(&f, &buf, &len), 0);
	assert_int_equal(fs_nsfile_parse(buf, len, &g), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(g.root.mode, S_IFDIR | 02711);
	fs_nsfile_free(&g);
	free(buf);
}

/* Every changed byte and every truncation is rejected, never half used. */
static void test_damage_rejected(void **state)
{
	struct fs_nsfile f, g;
	struct fs_nsfile_ent ent[4];
	char *buf, *copy;
	size_t len;

	(void)state;
	sample(&f, ent);
	assert_int_equal(fs_nsfile_format(&f, &buf, &len), 0);
	copy = malloc(len);
	assert_non_null(copy);
	for (size_t i = 0; i < len; i++) {
		memcpy(copy, buf, len);
		copy[i] ^= 0x01;
		assert_int_equal(fs_nsfile_parse(copy, len, &g), -EBADMSG);
		assert_null(g.ent);
		assert_int_equal(g.n, 0);
	}
	for (size_t l = 0; l < len; l++)
		assert_int_equal(fs_nsfile_parse(buf, l, &g), -EBADMSG);
	/* bytes after the sum line */
	memcpy(copy, buf, len);
	free(buf);
	buf = malloc(len + 2);
	assert_non_null(buf);
	memcpy(buf, copy, len);
	memcpy(buf + len, "x\n", 2);
	assert_int_equal(fs_nsfile_parse(buf, len + 2, &g), -EBADMSG);
	free(buf);
	free(copy);
}

/* body + a correct "sum" line: what a buggy or newer writer could leave. */
static int parse_sealed(const char *body, struct fs_nsfile *g)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", body);

	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "sum %016" PRIx64 "\n",
		      hashkey_checksum(buf, (size_t)n));
	return fs_nsfile_parse(buf, (size_t)n, g);
}

#define HDR "kvfs-namespaces 1\nroot 0755 0 0\n"
#define TS " 1.000000000 2.000000001\n"

static void test_bad_fields_rejected(void **state)
{
	static const char *const bad[] = {
		"kvfs-namespaces 1\n",                          /* no root */
		"kvfs-namespaces x\nroot 0755 0 0\n",
		"kvfs-nsx 1\nroot 0755 0 0\n",
		HDR "root 0755 0 0\n",                          /* two roots */
		"kvfs-namespaces 1\nroot 10000 0 0\n",          /* mode */
		"kvfs-namespaces 1\nroot 0758 0 0\n",
		"kvfs-namespaces 1\nroot 0755 4294967296 0\n",  /* uid */
		"kvfs-namespaces 1\nroot 0755 -1 0\n",
		"kvfs-namespaces 1\nroot 0755  0 0\n",          /* spaces */
		"kvfs-namespaces 1\nroot 0755 0 0 \n",
		"kvfs-namespaces 1\nroot 0755 0\n",
		HDR "\n",                                       /* empty line */
		HDR "ns a 0700 0 0 0 - 3" TS,                   /* shuffle */
		HDR "ns a 0700 0 0 0 - 8" TS,
		HDR "ns a 0700 0 0 0 BF16 2" TS,                /* dtype */
		HDR "ns a 0700 0 0 0 bfloat16 2" TS,
		HDR "ns .a 0700 0 0 0 - 2" TS,                  /* names */
		HDR "ns %2Ea 0700 0 0 0 - 2" TS,
		HDR "ns a%2Fb 0700 0 0 0 - 2" TS,
		HDR "ns a%00 0700 0 0 0 - 2" TS,
		HDR "ns a%4 0700 0 0 0 - 2" TS,
		HDR "ns a%zz 0700 0 0 0 - 2" TS,
		HDR "ns a/b 0700 0 0 0 - 2" TS,
		HDR "ns a 0700 0 0 0 - 2" TS "ns a 0750 0 0 0 - 2" TS,
		HDR "ns a 0700 0 0 0 - 2 1.5 2.000000001\n",    /* times */
		HDR "ns a 0700 0 0 0 - 2 1.000000000\n",
		HDR "ns a 0700 0 0 18446744073709551616 - 2" TS,
		HDR "ns a 0700 0 0 0 - 2" TS "bogus 1\n",
	};
	struct fs_nsfile g;
	char name[KVFS_NS_NAME_MAX + 2], body[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_sealed(bad[i], &g);

		if (rc != -EBADMSG)
			fail_msg("case %zu accepted (%d): %s", i, rc, bad[i]);
		assert_null(g.ent);
	}
	/* the good twin of the cases above, and a name one byte too long */
	assert_int_equal(parse_sealed(HDR "ns a 0700 0 0 0 - 2" TS, &g), 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.ent[0].name, "a");
	assert_string_equal(g.ent[0].a.dtype, "");
	fs_nsfile_free(&g);
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	snprintf(body, sizeof(body), HDR "ns %s 0700 0 0 0 - 2" TS, name);
	assert_int_equal(parse_sealed(body, &g), -EBADMSG);
	name[sizeof(name) - 2] = 0;
	snprintf(body, sizeof(body), HDR "ns %s 0700 0 0 0 - 2" TS, name);
	assert_int_equal(parse_sealed(body, &g), 0);
	fs_nsfile_free(&g);
	/* version 2 adds CHUNK_TOKENS; version 1 reads as 0 tokens */
	assert_int_equal(parse_sealed("kvfs-namespaces 2\nroot 0755 0 0\n"
				      "ns a 0700 0 0 0 - 2 1.000000000 "
				      "2.000000001 16\n", &g), 0);
	assert_int_equal(g.ent[0].chunk_tokens, 16);
	fs_nsfile_free(&g);
	assert_int_equal(parse_sealed(HDR "ns a 0700 0 0 0 - 2" TS, &g), 0);
	assert_int_equal(g.ent[0].chunk_tokens, 0);
	fs_nsfile_free(&g);
	static const char *const bad2[] = {
		"ns a 0700 0 0 0 - 2" TS,               /* no CHUNK_TOKENS */
		"ns a 0700 0 0 0 - 2 1.000000000 2.000000001 4294967296\n",
		"ns a 0700 0 0 0 - 2 1.000000000 2.000000001 -1\n",
		"ns a 0700 0 0 0 - 2 1.000000000 2.000000001 1 2\n",
	};
	for (size_t i = 0; i < sizeof(bad2) / sizeof(bad2[0]); i++) {
		snprintf(body, sizeof(body), "kvfs-namespaces 2\nroot 0755 0 0\n%s",
			 bad2[i]);
		assert_int_equal(parse_sealed(body, &g), -EBADMSG);
		assert_null(g.ent);
	}
	/* a newer format is not guessed at */
	assert_int_equal(parse_sealed("kvfs-namespaces 3\nroot 0755 0 0\n",
				      &g), -ENOTSUP);
	assert_null(g.ent);
}

static void test_file_replace(void **state)
{
	char dir[] = "/tmp/kvfs-test-nsmeta-XXXXXX", p[PATH_MAX];
	struct fs_nsfile f, g;
	struct fs_nsfile_ent ent[4];
	char *buf, *back;
	size_t len, blen;
	struct stat st;
	int dfd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(fs_nsfile_read(dfd, &back, &blen), -ENOENT);

	sample(&f, ent);
	assert_int_equal(fs_nsfile_format(&f, &buf, &len), 0);
	assert_int_equal(fs_nsfile_write(dfd, "old\n", 4), 0);
	assert_int_equal(fs_nsfile_write(dfd, buf, len), 0);
	assert_int_equal(fs_nsfile_read(dfd, &back, &blen), 0);
	assert_int_equal(blen, len);
	assert_memory_equal(back, buf, len);
	assert_int_equal(fs_nsfile_parse(back, blen, &g), 0);
	assert_int_equal(g.n, 4);
	fs_nsfile_free(&g);
	free(back);
	/* private, and no temporary left behind */
	snprintf(p, sizeof(p), "%s/" FS_NSFILE_NAME, dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(p, sizeof(p), "%s/" FS_NSFILE_NAME ".tmp", dir);
	assert_int_equal(access(p, F_OK), -1);

	/* a directory in its place is refused, not read */
	snprintf(p, sizeof(p), "%s/" FS_NSFILE_NAME, dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(fs_nsfile_read(dfd, &back, &blen), -EINVAL);
	assert_int_equal(rmdir(p), 0);

	free(buf);
	close(dfd);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_damage_rejected),
		cmocka_unit_test(test_bad_fields_rejected),
		cmocka_unit_test(test_file_replace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
