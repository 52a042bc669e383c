/*
 * xfer_test.h - what the batched GET/PUT tests (test_xfer*.c) share: one
 * mount per program (setup / teardown), keys and filled chunks, a raw
 * ioctl, a batch header, and the daemon's counters.
 *
 * The mount uses allow_other so that a child that setuid()s to nobody
 * reaches the daemon and is refused by kvfs's own namespace check.
 */
#ifndef KVFS_TESTS_INTEG_XFER_TEST_H
#define KVFS_TESTS_INTEG_XFER_TEST_H

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define CHUNK (64u << 10)

static struct kvfs_mnt mnt;
static int mounted;

/* ------------------------------------------------------------ helpers */

static inline void key_of(uint64_t tag, uint64_t i, struct kvfs_key *k)
{
	uint32_t tok[2] = { (uint32_t)i, (uint32_t)(i >> 32) };

	assert_int_equal(kvfs_key_chunk(NULL, tag, NULL, 0, tok, 2, k), 0);
}

static inline int ns_create(const char *name, unsigned mode)
{
	int fd = kvfs_ns_open(mnt.dir, name, KVFS_NS_CREATE, mode);

	assert_true(fd >= 0);
	return fd;
}

/* n chunks of len bytes: keys (tag, i), bytes kvfs_test_fill(tag * 1000 +
 * i); io[i].buf points into one malloc'd block (returned). */
static inline char *make_io(struct kvfs_io *io, size_t n, uint64_t tag, size_t len)
{
	char *buf = malloc(n * len);

	assert_non_null(buf);
	memset(io, 0, n * sizeof(*io));
	for (size_t i = 0; i < n; i++) {
		key_of(tag, i, &io[i].key);
		io[i].buf = buf + i * len;
		io[i].len = len;
		kvfs_test_fill(io[i].buf, len, tag * 1000 + i, 0);
	}
	return buf;
}

static inline int raw_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static inline struct kvfs_xfer *xfer_arg(uint32_t nents)
{
	struct kvfs_xfer *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->version = KVFS_ABI_VERSION;
	b->size = sizeof(*b);
	b->nents = nents;
	return b;
}

/* A counter of .kvfs/stats (kvfs_test_stat: the number after "name":
 * from the object "obj" on, NULL for the first occurrence); it must be
 * there. */
static inline unsigned long long stat_in(const struct kvfs_mnt *m,
					 const char *obj, const char *name)
{
	long long v = kvfs_test_stat(m, obj, name);

	assert_true(v >= 0);
	return (unsigned long long)v;
}

static inline unsigned long long stat_of(const char *obj, const char *name)
{
	return stat_in(&mnt, obj, name);
}

static inline int exists(int nsfd, const struct kvfs_key *k)
{
	return kvfs_exists(nsfd, k);
}

static inline void xfer_on_alarm(int sig)
{
	(void)sig;
}

/* SIGALRM every us microseconds without SA_RESTART, so that GETs and
 * PUTs are cut short (entries -EINTR) and sent again; 0: off, and the
 * default action back. */
static inline void alarm_every(long us)
{
	struct sigaction sa = { .sa_handler = xfer_on_alarm };
	struct itimerval it = { { 0, us }, { 0, us } };

	if (us) {
		sigemptyset(&sa.sa_mask);
		assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
	}
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	if (!us)
		signal(SIGALRM, SIG_DFL);
}

/* ------------------------------------------------------------- setup */

static inline int setup(void **state)
{
	const char *args[] = { "-f", "-o",
		"l1_size=96M,max_chunk=4M,allow_other", "@DIR@", NULL };

	if (kvfs_test_mount_args(&mnt, args) != 0)
		return -1;
	mounted = 1;
	return 0;
}

static inline int teardown(void **state)
{
	if (mounted && kvfs_test_umount(&mnt) != 0) {
		fprintf(stderr, "daemon did not exit cleanly\n");
		return -1;
	}
	return 0;
}

#endif /* KVFS_TESTS_INTEG_XFER_TEST_H */
