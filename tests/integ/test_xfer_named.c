/*
 * test_xfer_named.c - KVFS_XFER_NAMED (include/kvfs.h 3b) on a real mount:
 * a GET by kvfs_path_key in a path namespace that copies an entry only
 * where the name shows that publication now, as the st_ino the caller's
 * stat(2) gave (the preload library's way of serving path files):
 * the right st_ino copies; another st_ino is -ESTALE with nothing
 * copied; a name whose O_TRUNC rewrite is open is -ESTALE while a plain
 * GET still gives the published bytes; after the writer's close (the
 * GET publishes closed files first) the check passes with the new bytes;
 * per-entry results in a mixed batch; a rename onto the name makes the
 * old st_ino -ESTALE; KVFS_XFER_MTIME: the stat's mtime copies, another
 * is -ESTALE, so an O_TRUNC rewrite of the same size (same st_ino) is
 * told from the version the caller stat'ed; batches cut short by signals
 * keep each entry's st_ino (and mtime) when kvfs_mget sends them again;
 * EINVAL for the whole batch in a key namespace and for MTIME without
 * NAMED (by kvfs_mget and by the raw ioctl, nothing copied).
 * Runs in about a second.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/integ/xfer_test.h"

#define FLEN 20000u /* bytes of a file (not a page multiple) */

/* A path namespace name under the mount, its fd in *nsfd. */
static void pns_create(const char *name, int *nsfd)
{
	char dir[PATH_MAX];

	*nsfd = ns_create(name, 0755);
	kvfs_test_path(&mnt, dir, "%s", name);
	assert_int_equal(setxattr(dir, KVFS_XATTR_NAMES, "paths", 5, 0), 0);
}

/* io for the file rel of a path namespace: its key, room of len bytes at
 * buf (filled with 0xa5 to see what was copied), size = st_ino. */
static void named_io(struct kvfs_io *io, const char *rel, char *buf,
		     size_t len, uint64_t st_ino)
{
	memset(io, 0, sizeof(*io));
	assert_int_equal(kvfs_path_key(rel, strlen(rel), &io->key), 0);
	memset(buf, 0xa5, len);
	io->buf = buf;
	io->len = len;
	io->size = st_ino;
}

static bool untouched(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] != 0xa5)
			return false;
	return true;
}

/* KVFS_XFER_MTIME's form of st's mtime: ns, modulo 2^64 */
static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)((uint64_t)st->st_mtim.tv_sec * 1000000000u +
			 (uint64_t)st->st_mtim.tv_nsec);
}

static uint64_t ino_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

/* Writes len bytes of kvfs_test_fill(seed) to the file rel (under the
 * mount) whose path goes to path; returns its st_ino. */
static uint64_t put_file(char *path, const char *rel, size_t len,
			 uint64_t seed)
{
	kvfs_test_path(&mnt, path, "%s", rel);
	assert_int_equal(kvfs_test_write_file(path, len, seed, 0), 0);
	return ino_of(path);
}

/* The right st_ino copies (size is then the output: the file's size);
 * another st_ino, or 0, is -ESTALE and nothing is copied; a missing name
 * is -ENOENT; per entry in one batch. */
static void test_named_ino(void **state)
{
	char pa[PATH_MAX], pb[PATH_MAX], buf[4][FLEN + 100];
	struct kvfs_io io[4];
	uint64_t ia, ib;
	int nsfd;

	pns_create("pn1", &nsfd);
	assert_int_equal(mkdir(kvfs_test_path(&mnt, pa, "pn1/d"), 0755), 0);
	ia = put_file(pa, "pn1/d/a.bin", FLEN, 1);
	ib = put_file(pb, "pn1/b.bin", FLEN / 2, 2);
	assert_true(ia != ib);

	named_io(&io[0], "d/a.bin", buf[0], sizeof(buf[0]), ia);
	assert_int_equal(kvfs_mget(nsfd, io, 1, KVFS_XFER_NAMED), 1);
	assert_int_equal(io[0].result, FLEN);
	assert_int_equal(io[0].size, FLEN);
	assert_int_equal(kvfs_test_check(buf[0], FLEN, 1, 0), 0);

	/* another file's st_ino, a made-up one, 0: nothing copied */
	const uint64_t wrong[] = { ib, ia + 1000, 0 };

	for (size_t w = 0; w < 3; w++) {
		named_io(&io[0], "d/a.bin", buf[0], sizeof(buf[0]), wrong[w]);
		assert_int_equal(kvfs_mget(nsfd, io, 1, KVFS_XFER_NAMED), 0);
		assert_int_equal(io[0].result, -ESTALE);
		assert_true(untouched(buf[0], sizeof(buf[0])));
	}

	/* one batch: good, stale, miss, good */
	named_io(&io[0], "d/a.bin", buf[0], sizeof(buf[0]), ia);
	named_io(&io[1], "b.bin", buf[1], sizeof(buf[1]), ia);
	named_io(&io[2], "d/none.bin", buf[2], sizeof(buf[2]), ia);
	named_io(&io[3], "b.bin", buf[3], sizeof(buf[3]), ib);
	assert_int_equal(kvfs_mget(nsfd, io, 4, KVFS_XFER_NAMED), 2);
	assert_int_equal(io[0].result, FLEN);
	assert_int_equal(kvfs_test_check(buf[0], FLEN, 1, 0), 0);
	assert_int_equal(io[1].result, -ESTALE);
	assert_true(untouched(buf[1], sizeof(buf[1])));
	assert_int_equal(io[2].result, -ENOENT);
	assert_int_equal(io[3].result, FLEN / 2);
	assert_int_equal(io[3].size, FLEN / 2);
	assert_int_equal(kvfs_test_check(buf[3], FLEN / 2, 2, 0), 0);

	/* without the flag, size is no input: any value copies */
	named_io(&io[0], "d/a.bin", buf[0], sizeof(buf[0]), 12345);
	assert_int_equal(kvfs_mget(nsfd, io, 1, 0), 1);
	assert_int_equal(io[0].result, FLEN);
	close(nsfd);
}

/* A name whose O_TRUNC rewrite is open: an open of the name reads the
 * writer's version, so the NAMED GET is -ESTALE (whatever st_ino) while
 * a plain GET still copies the published bytes. After the writer's close
 * (not looked up since: the GET publishes it first) the st_ino the
 * writer's fstat gave copies the new bytes. */
static void test_named_rewrite(void **state)
{
	char p[PATH_MAX], buf[FLEN + 100], *nb = malloc(FLEN);
	struct kvfs_io io;
	struct stat wst;
	uint64_t ino;
	int nsfd, wfd;

	assert_non_null(nb);
	pns_create("pn2", &nsfd);
	ino = put_file(p, "pn2/f.bin", FLEN, 3);
	named_io(&io, "f.bin", buf, sizeof(buf), ino);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 1);
	assert_int_equal(kvfs_test_check(buf, FLEN, 3, 0), 0);

	wfd = open(p, O_WRONLY | O_TRUNC);
	assert_true(wfd >= 0);
	kvfs_test_fill(nb, FLEN - 1000, 4, 0);
	assert_int_equal(kvfs_test_write_all(wfd, nb, FLEN - 1000), 0);
	assert_int_equal(fstat(wfd, &wst), 0);

	/* the old st_ino, and what stat says now */
	const uint64_t inos[] = { ino, ino_of(p), wst.st_ino };

	for (size_t i = 0; i < 3; i++) {
		named_io(&io, "f.bin", buf, sizeof(buf), inos[i]);
		assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 0);
		assert_int_equal(io.result, -ESTALE);
		assert_true(untouched(buf, sizeof(buf)));
	}
	named_io(&io, "f.bin", buf, sizeof(buf), 0);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, 0), 1);
	assert_int_equal(io.result, FLEN);
	assert_int_equal(kvfs_test_check(buf, FLEN, 3, 0), 0);

	assert_int_equal(close(wfd), 0);
	named_io(&io, "f.bin", buf, sizeof(buf), wst.st_ino);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 1);
	assert_int_equal(io.result, FLEN - 1000);
	assert_int_equal(io.size, FLEN - 1000);
	assert_int_equal(kvfs_test_check(buf, FLEN - 1000, 4, 0), 0);
	/* and the name agrees */
	assert_int_equal(kvfs_test_read_check(p, FLEN - 1000, 4), 0);
	assert_int_equal(ino_of(p), wst.st_ino);
	free(nb);
	close(nsfd);
}

/* KVFS_XFER_MTIME: only the version the caller's stat showed. An O_TRUNC
 * rewrite of the same size keeps st_ino, so NAMED alone copies the new
 * bytes for the old stat; with the old stat's mtime it is -ESTALE,
 * nothing copied; the new stat's copies the new bytes. An mtime set by
 * utimensat is the one to give after it. MTIME without NAMED: EINVAL. */
static void test_named_mtime(void **state)
{
	char p[PATH_MAX], buf[FLEN + 100];
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1700000000, 123456789 } };
	struct kvfs_xfer *b = xfer_arg(1);
	struct stat old, cur;
	struct kvfs_io io;
	char *nb = malloc(FLEN);
	int nsfd, wfd;

	assert_non_null(nb);

	pns_create("pn5", &nsfd);
	put_file(p, "pn5/v.bin", FLEN, 7);
	assert_int_equal(stat(p, &old), 0);
	named_io(&io, "v.bin", buf, sizeof(buf), old.st_ino);
	io.result = mtime_ns(&old);
	assert_int_equal(kvfs_mget(nsfd, &io, 1,
				   KVFS_XFER_NAMED | KVFS_XFER_MTIME), 1);
	assert_int_equal(io.result, FLEN);
	assert_int_equal(kvfs_test_check(buf, FLEN, 7, 0), 0);
	named_io(&io, "v.bin", buf, sizeof(buf), old.st_ino);
	io.result = mtime_ns(&old) + 1;
	assert_int_equal(kvfs_mget(nsfd, &io, 1,
				   KVFS_XFER_NAMED | KVFS_XFER_MTIME), 0);
	assert_int_equal(io.result, -ESTALE);
	assert_true(untouched(buf, sizeof(buf)));

	/* the same size again, a moment later: same st_ino, new mtime */
	usleep(2000);
	kvfs_test_fill(nb, FLEN, 8, 0);
	wfd = open(p, O_WRONLY | O_TRUNC);
	assert_true(wfd >= 0);
	assert_int_equal(kvfs_test_write_all(wfd, nb, FLEN), 0);
	assert_int_equal(close(wfd), 0);
	assert_int_equal(stat(p, &cur), 0);
	assert_int_equal(cur.st_ino, old.st_ino);
	assert_true(mtime_ns(&cur) != mtime_ns(&old));
	named_io(&io, "v.bin", buf, sizeof(buf), old.st_ino);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 1);
	assert_int_equal(kvfs_test_check(buf, FLEN, 8, 0), 0); /* the gap */
	named_io(&io, "v.bin", buf, sizeof(buf), old.st_ino);
	io.result = mtime_ns(&old);
	assert_int_equal(kvfs_mget(nsfd, &io, 1,
				   KVFS_XFER_NAMED | KVFS_XFER_MTIME), 0);
	assert_int_equal(io.result, -ESTALE);
	assert_true(untouched(buf, sizeof(buf)));
	named_io(&io, "v.bin", buf, sizeof(buf), cur.st_ino);
	io.result = mtime_ns(&cur);
	assert_int_equal(kvfs_mget(nsfd, &io, 1,
				   KVFS_XFER_NAMED | KVFS_XFER_MTIME), 1);
	assert_int_equal(kvfs_test_check(buf, FLEN, 8, 0), 0);

	/* utimensat: the mtime the name shows from then on */
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	assert_int_equal(stat(p, &cur), 0);
	assert_int_equal(mtime_ns(&cur), 1700000000123456789LL);
	named_io(&io, "v.bin", buf, sizeof(buf), cur.st_ino);
	io.result = mtime_ns(&cur);
	assert_int_equal(kvfs_mget(nsfd, &io, 1,
				   KVFS_XFER_NAMED | KVFS_XFER_MTIME), 1);
	assert_int_equal(kvfs_test_check(buf, FLEN, 8, 0), 0);
	/* times past 2262 and before 1678 (an owner may set them): no
	 * overflow in the daemon (UBSan), and they still match */
	const time_t far[] = { 10000000000LL, -10000000000LL };

	for (size_t k = 0; k < 2; k++) {
		ts[1] = (struct timespec){ far[k], 5 };
		assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
		assert_int_equal(stat(p, &cur), 0);
		assert_int_equal(cur.st_mtim.tv_sec, far[k]);
		named_io(&io, "v.bin", buf, sizeof(buf), cur.st_ino);
		io.result = mtime_ns(&cur);
		assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED |
					   KVFS_XFER_MTIME), 1);
		assert_int_equal(kvfs_test_check(buf, FLEN, 8, 0), 0);
		named_io(&io, "v.bin", buf, sizeof(buf), cur.st_ino);
		io.result = mtime_ns(&cur) - 1;
		assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED |
					   KVFS_XFER_MTIME), 0);
		assert_int_equal(io.result, -ESTALE);
	}

	/* MTIME needs NAMED */
	named_io(&io, "v.bin", buf, sizeof(buf), cur.st_ino);
	io.result = mtime_ns(&cur);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_MTIME), -EINVAL);
	assert_true(untouched(buf, sizeof(buf)));
	b->flags = KVFS_XFER_MTIME;
	b->ents[0].key = io.key;
	b->ents[0].addr = (uint64_t)(uintptr_t)buf;
	b->ents[0].cap = sizeof(buf);
	b->ents[0].result = mtime_ns(&cur);
	assert_int_equal(raw_ioctl(nsfd, KVFS_IOC_GET, b), -EINVAL);
	assert_true(untouched(buf, sizeof(buf)));
	free(nb);
	free(b);
	close(nsfd);
}

/* A rename onto the name (write-then-os.replace): the name is another
 * file now, so the st_ino stat gave before is -ESTALE and the new stat's
 * copies the new bytes. */
static void test_named_replace(void **state)
{
	char p[PATH_MAX], t[PATH_MAX], buf[FLEN + 100];
	struct kvfs_io io;
	uint64_t old, tmp;
	int nsfd;

	pns_create("pn3", &nsfd);
	old = put_file(p, "pn3/g.bin", FLEN, 5);
	tmp = put_file(t, "pn3/g.tmp", FLEN / 4, 6);
	assert_int_equal(rename(t, p), 0);
	assert_int_equal(ino_of(p), tmp);
	named_io(&io, "g.bin", buf, sizeof(buf), old);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 0);
	assert_int_equal(io.result, -ESTALE);
	assert_true(untouched(buf, sizeof(buf)));
	named_io(&io, "g.bin", buf, sizeof(buf), tmp);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 1);
	assert_int_equal(io.result, FLEN / 4);
	assert_int_equal(kvfs_test_check(buf, FLEN / 4, 6, 0), 0);
	/* the old name is gone */
	named_io(&io, "g.tmp", buf, sizeof(buf), tmp);
	assert_int_equal(kvfs_mget(nsfd, &io, 1, KVFS_XFER_NAMED), 0);
	assert_int_equal(io.result, -ENOENT);
	close(nsfd);
}

/* Batches cut short by signals (entries -EINTR, sent again by kvfs_mget):
 * a resent entry still carries its st_ino and, with KVFS_XFER_MTIME (odd
 * rounds), its mtime (kvfs_mget keeps the inputs), so every round
 * completes with the files' bytes, never -ESTALE. */
static void test_named_eintr(void **state)
{
	enum { N = 16, LEN = 2u << 20 };
	struct kvfs_io io[N];
	unsigned long long intr = stat_of("xfer", "interrupted");
	char p[PATH_MAX], rel[32], *out = malloc((size_t)N * LEN);
	uint64_t ino[N];
	int64_t mt[N];
	struct stat st;
	int nsfd;

	assert_non_null(out);
	pns_create("pn4", &nsfd);
	for (int i = 0; i < N; i++) {
		snprintf(rel, sizeof(rel), "pn4/f%d.bin", i);
		ino[i] = put_file(p, rel, LEN, 40 + i);
		assert_int_equal(stat(p, &st), 0);
		mt[i] = mtime_ns(&st);
	}
	alarm_every(300);
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < N; i++) {
			snprintf(rel, sizeof(rel), "f%d.bin", i);
			named_io(&io[i], rel, out + (size_t)i * LEN, LEN,
				 ino[i]);
			io[i].result = mt[i];
		}
		assert_int_equal(kvfs_mget(nsfd, io, N, KVFS_XFER_NAMED |
					   (round % 2 ? KVFS_XFER_MTIME : 0)),
				 N);
		for (int i = 0; i < N; i++) {
			assert_int_equal(io[i].result, LEN);
			assert_int_equal(kvfs_test_check(out + (size_t)i * LEN,
							 LEN, 40 + i, 0), 0);
		}
	}
	alarm_every(0);
	intr = stat_of("xfer", "interrupted") - intr;
	fprintf(stderr, "NAMED batches cut short by SIGALRM: %llu\n", intr);
	assert_true(intr > 0); /* the resend path did run */
	free(out);
	close(nsfd);
}

/* KVFS_XFER_NAMED in a key namespace: EINVAL for the whole batch (a key
 * namespace's names are its keys), nothing copied; by kvfs_mget and by
 * the raw ioctl. */
static void test_named_keyns(void **state)
{
	struct kvfs_io io[2];
	struct kvfs_xfer *b = xfer_arg(1);
	char *src, buf[CHUNK];
	int nsfd = ns_create("kn", 0755);

	src = make_io(io, 2, 7, CHUNK);
	assert_int_equal(kvfs_mput(nsfd, io, 2), 2);
	memset(src, 0xa5, 2 * CHUNK);
	for (size_t i = 0; i < 2; i++)
		io[i].size = 1;
	assert_int_equal(kvfs_mget(nsfd, io, 2, KVFS_XFER_NAMED), -EINVAL);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(io[i].result, -EINVAL);
	assert_true(untouched(src, 2 * CHUNK));

	memset(buf, 0xa5, sizeof(buf));
	b->flags = KVFS_XFER_NAMED;
	b->ents[0].key = io[0].key;
	b->ents[0].addr = (uint64_t)(uintptr_t)buf;
	b->ents[0].cap = sizeof(buf);
	b->ents[0].size = 1;
	assert_int_equal(raw_ioctl(nsfd, KVFS_IOC_GET, b), -EINVAL);
	assert_true(untouched(buf, sizeof(buf)));
	/* the same batch without the flag copies */
	b->flags = 0;
	assert_int_equal(raw_ioctl(nsfd, KVFS_IOC_GET, b), 0);
	assert_int_equal(b->ents[0].result, CHUNK);
	assert_int_equal(kvfs_test_check(buf, CHUNK, 7 * 1000, 0), 0);
	free(src);
	free(b);
	close(nsfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_named_ino),
		cmocka_unit_test(test_named_rewrite),
		cmocka_unit_test(test_named_mtime),
		cmocka_unit_test(test_named_replace),
		cmocka_unit_test(test_named_eintr),
		cmocka_unit_test(test_named_keyns),
	};

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
