/*
 * test_mount_log.c - kvfs-mount's log rate limit (mount/mount_log.c): the
 * first MOUNT_LOG_BURST lines of a kind per window are written, the rest
 * counted into one "suppressed N similar" line; lines that differ only in
 * numbers are one kind; other kinds are not held back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "mount/mount_log.h"
#include "tests/common/kvfs_test.h"

/* stderr into a temporary file, to count what was written */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/kvfs-test-log.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	char *buf = calloc(1, 1 << 16);
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0 && buf);
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, (1 << 16) - 1, 0);
	assert_true(n >= 0);
	close(fd);
	unlink(path);
	return buf;
}

static void flood(void)
{
	char line[128];

	mount_log_start(false);
	/* 2,000 bad requests from different pids within one second */
	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof(line), "kvfs: bad ioctl 0x%x from pid %d",
			 0xc0104b00 + i % 3, 1000 + i);
		mount_log_line(3, line, 1000 + (uint64_t)i / 2);
	}
	mount_log_line(3, "kvfs: another kind of line", 2000);
	/* the window has passed: the kind comes back, with its summary */
	mount_log_line(3, "kvfs: bad ioctl 0x1 from pid 7",
		       1000 + MOUNT_LOG_WINDOW_S * 1000 + 1);
	mount_log_flush();
}

static void test_flood(void **state)
{
	char *out = capture(flood);

	(void)state;
	/* the burst, the line after the window, the summary's "last:" */
	assert_int_equal(kvfs_test_count(out, "bad ioctl"),
			 MOUNT_LOG_BURST + 1 + 1);
	assert_int_equal(kvfs_test_count(out, "suppressed 1995 similar "
					 "messages"), 1);
	assert_int_equal(kvfs_test_count(out, "another kind of line"), 1);
	/* nothing was left for the flush */
	assert_int_equal(kvfs_test_count(out, "suppressed"), 1);
	assert_int_equal(mount_log_suppressed(), 1995);
	free(out);
}

static void test_signature(void **state)
{
	(void)state;
	assert_true(mount_log_signature("seg 12 at block 0x1f00") ==
		    mount_log_signature("seg 9 at block 0xabc"));
	assert_true(mount_log_signature("read failed") !=
		    mount_log_signature("write failed"));
	assert_true(mount_log_signature("") != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signature),
		cmocka_unit_test(test_flood),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
