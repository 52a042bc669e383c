/*
 * test_client_xfer.c - libkvfs's choice of the transfer ioctl's form
 * (lib/client_xfer.c): a batch of KVFS_XFER_SMALL_MAX entries or fewer
 * goes in the short form, a longer one in the long form, and where a
 * daemon older than the short form answers it with ENOTTY the batch is
 * sent again in the long form, which the process keeps to from then on;
 * an ENOTTY of both forms (not a namespace fd) or a signal in the long
 * form's wait latches nothing.
 *
 * The ioctl is the daemon's answer here (-Wl,--wrap=ioctl, Makefile): a
 * daemon without the short form cannot run on this tree, so what each
 * form answers is set by the test; the daemon's side of both forms is
 * tests/integ/test_xfer.c's, against a real mount.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"

int __real_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...);

static int small_err, long_err;     /* what each form answers (0: done) */
static int n_small, n_long;         /* calls of each */
static uint32_t last_size;          /* the struct size the last call said */

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	struct kvfs_xfer *b;
	bool small = req == KVFS_IOC_GET_SMALL || req == KVFS_IOC_PUT_SMALL;
	bool put = req == KVFS_IOC_PUT || req == KVFS_IOC_PUT_SMALL;
	int err;
	va_list ap;

	va_start(ap, req);
	b = va_arg(ap, struct kvfs_xfer *);
	va_end(ap);
	if (!small && req != KVFS_IOC_GET && req != KVFS_IOC_PUT)
		return __real_ioctl(fd, req, b);
	if (small)
		n_small++;
	else
		n_long++;
	last_size = b->size;
	err = small ? small_err : long_err;
	if (err) {
		errno = err;
		return -1;
	}
	/* every entry done, as a daemon would */
	for (uint32_t i = 0; i < b->nents; i++) {
		b->ents[i].result = put ? 0 : (int64_t)b->ents[i].cap;
		b->ents[i].size = b->ents[i].cap;
	}
	b->done = b->nents;
	return 0;
}

static int fd;
static char buf[9][16];
static struct kvfs_io io[9];

static void reset(size_t n)
{
	memset(io, 0, sizeof(io));
	for (size_t i = 0; i < n; i++) {
		io[i].key.b[0] = (uint8_t)(i + 1);
		io[i].buf = buf[i];
		io[i].len = sizeof(buf[i]);
	}
	n_small = n_long = 0;
}

/* A daemon with both forms: 8 entries short, 9 long, PUT as GET. */
static void test_forms(void **state)
{
	(void)state;
	small_err = long_err = 0;
	reset(9);
	assert_int_equal(kvfs_mget(fd, io, 8, 0), 8);
	assert_int_equal(n_small, 1);
	assert_int_equal(last_size, sizeof(struct kvfs_xfer_small));
	assert_int_equal(kvfs_mget(fd, io, 9, 0), 9);
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 1);
	assert_int_equal(last_size, sizeof(struct kvfs_xfer));
	reset(1);
	assert_int_equal(kvfs_mput(fd, io, 1), 1);
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 0);
}

/* Not a namespace fd (ENOTTY from both forms): the error, and the next
 * batch still tries the short form. */
static void test_enotty_both(void **state)
{
	(void)state;
	small_err = long_err = ENOTTY;
	reset(1);
	assert_int_equal(kvfs_mget(fd, io, 1, 0), -ENOTTY);
	assert_int_equal(io[0].result, -ENOTTY);
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 1);
	small_err = long_err = 0;
	reset(1);
	assert_int_equal(kvfs_mget(fd, io, 1, 0), 1);
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 0);
}

/* A signal in the long form's wait says nothing of the daemon: -EINTR,
 * nothing latched. */
static void test_signal_in_fallback(void **state)
{
	(void)state;
	small_err = ENOTTY;
	long_err = EINTR;
	reset(1);
	assert_int_equal(kvfs_mget_wait(fd, io, 1, 0, 50), -EINTR);
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 1);
	small_err = long_err = 0;
	reset(1);
	assert_int_equal(kvfs_mget(fd, io, 1, 0), 1);
	assert_int_equal(n_small, 1);
}

/* A daemon older than the short form: the batch sent again long, done
 * once; from then on every batch long, PUT too (last: it latches). */
static void test_old_daemon(void **state)
{
	(void)state;
	small_err = ENOTTY;
	long_err = 0;
	reset(2);
	assert_int_equal(kvfs_mget(fd, io, 2, 0), 2);
	assert_int_equal(io[1].result, sizeof(buf[1]));
	assert_int_equal(n_small, 1);
	assert_int_equal(n_long, 1);
	reset(2);
	assert_int_equal(kvfs_mget(fd, io, 2, 0), 2);
	assert_int_equal(n_small, 0);
	assert_int_equal(n_long, 1);
	assert_int_equal(last_size, sizeof(struct kvfs_xfer));
	reset(1);
	assert_int_equal(kvfs_mput(fd, io, 1), 1);
	assert_int_equal(n_small, 0);
	assert_int_equal(n_long, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_enotty_both),
		cmocka_unit_test(test_signal_in_fallback),
		cmocka_unit_test(test_old_daemon), /* last: it latches */
	};
	int rc;

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	close(fd);
	return rc;
}
