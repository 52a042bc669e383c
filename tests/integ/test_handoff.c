/*
 * test_handoff.c - the prefill -> decode hand-off (kvfs(7) HAND-OFF) on
 * real mounts: waiting lookups and GETs woken by a local publish, a
 * timeout with the leading run, EINTR with nothing held, the waiter
 * bounds (a flood from one user does not starve another), bad flags;
 * across two mounts on one real redis-server (standalone, then a
 * three-master cluster): the wake-up through L3 notifications, the same
 * with notifications off (re-check only), a dropped subscription
 * (CLIENT KILL), a server restarted mid-wait, Redis down (waits time out
 * cleanly), a decode side that dies holding pins (leases expire).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define CHUNK 65536

/* ------------------------------------------------------------ helpers */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A chain of n keys unique to tag. */
static void chain(struct kvfs_key *keys, size_t n, uint64_t tag)
{
	uint32_t tok[64 * 4];

	assert_true(n <= 64);
	for (size_t i = 0; i < n * 4; i++)
		tok[i] = (uint32_t)(i * 7 + 1);
	assert_int_equal(kvfs_keys(tok, n * 4, 4, tag, NULL, 0, keys, n),
			 (long)n);
}

static void put_one(int nsfd, const struct kvfs_key *key, uint64_t seed)
{
	char *buf = malloc(CHUNK);

	assert_non_null(buf);
	kvfs_test_fill(buf, CHUNK, seed, 0);
	assert_int_equal(kvfs_put(nsfd, key, buf, CHUNK), 0);
	free(buf);
}

static int mount_opts(struct kvfs_mnt *m, const char *opts)
{
	const char *args[] = { "-f", "-o", opts, "@DIR@", NULL };

	return kvfs_test_mount_args(m, args);
}

/* A thread that waits (kvfs_lookup_wait) and records when it returned. */
struct waiter {
	pthread_t th;
	int fd;
	const struct kvfs_key *keys;
	size_t n;
	uint32_t timeout_ms;
	unsigned flags;
	long found;
	uint64_t done_us;
	struct kvfs_result res;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->found = kvfs_lookup_wait(w->fd, w->keys, w->n, 0, w->flags, 0,
				    w->timeout_ms, &w->res);
	w->done_us = now_us();
	return NULL;
}

static void waiter_start(struct waiter *w, int fd, const struct kvfs_key *keys,
			 size_t n, uint32_t timeout_ms)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->keys = keys;
	w->n = n;
	w->timeout_ms = timeout_ms;
	assert_int_equal(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

/* Waits until the mount's stats say n waiters sleep (2 s at most). */
static void await_waiting(const struct kvfs_mnt *m, long long n)
{
	uint64_t end = now_ms() + 2000;

	while (kvfs_test_stat(m, "wait", "waiting") < n && now_ms() < end)
		sleep_ms(2);
	assert_true(kvfs_test_stat(m, "wait", "waiting") >= n);
}

static int raw_lookup(int fd, const struct kvfs_key *keys, uint32_t n,
		      uint32_t flags, struct kvfs_lookup *lk)
{
	memset(lk, 0, sizeof(*lk));
	lk->version = KVFS_ABI_VERSION;
	lk->size = sizeof(*lk);
	lk->flags = flags;
	lk->nkeys = n;
	memcpy(lk->keys, keys, n * sizeof(keys[0]));
	return ioctl(fd, KVFS_IOC_LOOKUP, lk) < 0 ? -errno : 0;
}

/* ------------------------------------------------------ local (no L3) */

static struct kvfs_mnt loc;

static int setup_local(void **state)
{
	(void)state;
	return mount_opts(&loc, "l1_size=64M,lease_ms=500,allow_other,"
			  "wait_max=4,wait_max_uid=2");
}

static int teardown_local(void **state)
{
	(void)state;
	return kvfs_test_umount(&loc) == 0 ? 0 : -1;
}

/* A publish wakes the waiter at once, key after key; the whole chain
 * comes back as soon as the last one lands. */
static void test_local_wakeup(void **state)
{
	struct kvfs_key keys[4];
	struct waiter w;
	uint64_t t_pub;
	int fd = kvfs_ns_open(loc.dir, "wake", KVFS_NS_CREATE, 0755);

	(void)state;
	assert_true(fd >= 0);
	chain(keys, 4, 1);
	waiter_start(&w, fd, keys, 4, 10000);
	await_waiting(&loc, 1);
	for (int i = 0; i < 4; i++) {
		sleep_ms(20);
		t_pub = now_us(); /* before: the waiter may return first */
		put_one(fd, &keys[i], (uint64_t)i);
	}
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_int_equal(w.found, 4);
	/* woken by the publish, not a poll: well within 100 ms of it */
	fprintf(stderr, "local hand-off: %llu us after the last publish "
		"returned\n", (unsigned long long)(w.done_us > t_pub ?
						   w.done_us - t_pub : 0));
	assert_true(w.done_us - t_pub < 1000000);
	close(fd);
}

/* At the timeout the waiter gets the leading run there, not an error. */
static void test_local_timeout_partial(void **state)
{
	struct kvfs_key keys[4];
	struct waiter w;
	uint64_t t0;
	int fd = kvfs_ns_open(loc.dir, "part", KVFS_NS_CREATE, 0755);

	(void)state;
	assert_true(fd >= 0);
	chain(keys, 4, 2);
	put_one(fd, &keys[0], 0);
	put_one(fd, &keys[1], 1);
	put_one(fd, &keys[3], 3); /* after a gap: not in the run */
	t0 = now_us();
	waiter_start(&w, fd, keys, 4, 300);
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_int_equal(w.found, 2);
	assert_true(w.done_us - t0 >= 290000);
	assert_true(w.done_us - t0 < 1500000);
	/* a complete chain answers at once */
	t0 = now_us();
	waiter_start(&w, fd, keys, 2, 5000);
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_int_equal(w.found, 2);
	assert_true(w.done_us - t0 < 200000);
	close(fd);
}

/* A waiting GET copies each chunk once the chain is there; what is
 * still missing at the timeout is a miss. */
static void test_local_get_wait(void **state)
{
	struct kvfs_key keys[3];
	struct kvfs_io io[3];
	char *bufs = malloc(3 * CHUNK);
	int fd = kvfs_ns_open(loc.dir, "getw", KVFS_NS_CREATE, 0755);
	pid_t pid;
	int st;

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(bufs);
	chain(keys, 3, 3);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sleep_ms(100);
		for (int i = 0; i < 3; i++) {
			char *b = malloc(CHUNK);

			kvfs_test_fill(b, CHUNK, 30 + (uint64_t)i, 0);
			if (kvfs_put(fd, &keys[i], b, CHUNK))
				_exit(1);
			free(b);
		}
		_exit(0);
	}
	memset(io, 0, sizeof(io));
	for (int i = 0; i < 3; i++) {
		io[i].key = keys[i];
		io[i].buf = bufs + (size_t)i * CHUNK;
		io[i].len = CHUNK;
	}
	assert_int_equal(kvfs_mget_wait(fd, io, 3, 0, 10000), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(io[i].result, CHUNK);
		assert_int_equal(kvfs_test_check(io[i].buf, CHUNK,
						 30 + (uint64_t)i, 0), 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* a chain with a missing key: the rest is copied at the timeout */
	chain(keys, 3, 4);
	put_one(fd, &keys[0], 40);
	for (int i = 0; i < 3; i++)
		io[i].key = keys[i];
	assert_int_equal(kvfs_mget_wait(fd, io, 3, 0, 200), 1);
	assert_int_equal(io[0].result, CHUNK);
	assert_int_equal(io[1].result, -ENOENT);
	assert_int_equal(io[2].result, -ENOENT);
	free(bufs);
	close(fd);
}

static void on_usr1(int sig)
{
	(void)sig;
}

struct raw_waiter {
	pthread_t th;
	int fd;
	const struct kvfs_key *keys;
	uint32_t flags;
	int rc;
	uint64_t done_us;
	struct kvfs_lookup lk;
};

static void *raw_main(void *arg)
{
	struct raw_waiter *r = arg;

	r->rc = raw_lookup(r->fd, r->keys, 2, r->flags, &r->lk);
	r->done_us = now_us();
	return NULL;
}

/* A signal ends the wait with EINTR at once, and nothing is held: no
 * waiter, no lease, no pin. */
static void test_local_eintr(void **state)
{
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART */
	struct kvfs_key keys[2];
	struct raw_waiter r;
	uint64_t t_sig;
	int fd = kvfs_ns_open(loc.dir, "intr", KVFS_NS_CREATE, 0755);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	chain(keys, 2, 5);
	put_one(fd, &keys[0], 50); /* the run there: one chunk */
	memset(&r, 0, sizeof(r));
	r.fd = fd;
	r.keys = keys;
	r.flags = KVFS_LOOKUP_WAIT | KVFS_LOOKUP_PIN | KVFS_WAIT_MS(20000);
	assert_int_equal(pthread_create(&r.th, NULL, raw_main, &r), 0);
	await_waiting(&loc, 1);
	t_sig = now_us();
	assert_int_equal(pthread_kill(r.th, SIGUSR1), 0);
	assert_int_equal(pthread_join(r.th, NULL), 0);
	assert_int_equal(r.rc, -EINTR);
	assert_true(r.done_us - t_sig < 1000000);
	assert_int_equal(kvfs_test_stat(&loc, "wait", "waiting"), 0);
	assert_int_equal(kvfs_test_stat(&loc, "leases", "active"), 0);
	assert_true(kvfs_test_stat(&loc, "wait", "interrupted") >= 1);
	close(fd);
}

struct get_waiter {
	pthread_t th;
	int fd;
	struct kvfs_io io[1];
	long rc;
};

static void *get_main(void *arg)
{
	struct get_waiter *g = arg;

	g->rc = kvfs_mget_wait(g->fd, g->io, 1, 0, 20000);
	return NULL;
}

/* A signal ends a waiting GET too: -EINTR, nothing held. */
static void test_local_get_eintr(void **state)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct kvfs_key keys[1];
	struct get_waiter g;
	char *buf = malloc(CHUNK);
	int fd = kvfs_ns_open(loc.dir, "gintr", KVFS_NS_CREATE, 0755);

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(buf);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	chain(keys, 1, 11);
	memset(&g, 0, sizeof(g));
	g.fd = fd;
	g.io[0].key = keys[0];
	g.io[0].buf = buf;
	g.io[0].len = CHUNK;
	assert_int_equal(pthread_create(&g.th, NULL, get_main, &g), 0);
	await_waiting(&loc, 1);
	assert_int_equal(pthread_kill(g.th, SIGUSR1), 0);
	assert_int_equal(pthread_join(g.th, NULL), 0);
	assert_int_equal(g.rc, -EINTR);
	assert_int_equal(g.io[0].result, -EINTR);
	assert_int_equal(kvfs_test_stat(&loc, "wait", "waiting"), 0);
	free(buf);
	close(fd);
}

/* wait_max_uid=2, wait_max=4: a third waiter of root is refused with
 * EAGAIN at once (a complete chain still answers), while another user
 * can still wait and is woken. */
static void test_local_flood(void **state)
{
	struct kvfs_key keys[2], other[2];
	struct waiter w[2];
	struct kvfs_lookup lk;
	int fd = kvfs_ns_open(loc.dir, "flood", KVFS_NS_CREATE, 0777);
	int st, pfd[2];
	pid_t pid;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0777), 0);
	chain(keys, 2, 6);
	chain(other, 2, 7);
	for (int i = 0; i < 2; i++)
		waiter_start(&w[i], fd, keys, 2, 20000);
	await_waiting(&loc, 2);
	assert_int_equal(raw_lookup(fd, keys, 2, KVFS_LOOKUP_WAIT |
				    KVFS_WAIT_MS(5000), &lk), -EAGAIN);
	/* kvfs_mget_wait, refused so, tries again until its own timeout,
	 * then answers what is there (a miss), not EAGAIN: libkvfs gave up
	 * after 10 s whatever the timeout before */
	{
		char b[64];
		struct kvfs_io io = { .key = keys[0], .buf = b, .len = 64 };
		struct timespec t0, t1;
		double took;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(kvfs_mget_wait(fd, &io, 1, 0, 10800), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		took = (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		assert_int_equal(io.result, -ENOENT);
		assert_true(took >= 10.7);
	}
	/* another user (nobody) still gets to wait, and is woken */
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		long f;

		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		(void)!write(pfd[1], "x", 1);
		f = kvfs_lookup_wait(fd, other, 2, 0, 0, 0, 10000, NULL);
		_exit(f == 2 ? 0 : 10 + (int)(f < 0 ? 0 : f));
	}
	{
		char c;

		assert_int_equal(read(pfd[0], &c, 1), 1);
	}
	await_waiting(&loc, 3);
	put_one(fd, &other[0], 70);
	put_one(fd, &other[1], 71);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* root's waiters finish too */
	put_one(fd, &keys[0], 60);
	put_one(fd, &keys[1], 61);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(w[i].th, NULL), 0);
		assert_int_equal(w[i].found, 2);
	}
	/* past the bound with a complete chain: an answer, not EAGAIN */
	assert_int_equal(raw_lookup(fd, keys, 2, KVFS_LOOKUP_WAIT |
				    KVFS_WAIT_MS(100), &lk), 0);
	assert_int_equal(lk.found, 2);
	assert_true(kvfs_test_stat(&loc, "wait", "refused") >= 1);
	close(pfd[0]);
	close(pfd[1]);
	close(fd);
}

/* The timeout bits without the flag, and WAIT on a PUT, are EINVAL. */
static void test_local_bad_flags(void **state)
{
	struct kvfs_key keys[1];
	struct kvfs_lookup lk;
	struct kvfs_xfer *b = calloc(1, sizeof(*b));
	int fd = kvfs_ns_open(loc.dir, "bad", KVFS_NS_CREATE, 0755);

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(b);
	chain(keys, 1, 8);
	assert_int_equal(raw_lookup(fd, keys, 1, KVFS_WAIT_MS(100), &lk),
			 -EINVAL);
	assert_int_equal(raw_lookup(fd, keys, 1, 0x10u, &lk), -EINVAL);
	b->version = KVFS_ABI_VERSION;
	b->size = sizeof(*b);
	b->nents = 1;
	b->ents[0].key = keys[0];
	b->flags = KVFS_XFER_WAIT | KVFS_WAIT_MS(100);
	assert_int_equal(ioctl(fd, KVFS_IOC_PUT, b) < 0 ? -errno : 0, -EINVAL);
	b->flags = KVFS_WAIT_MS(100);
	assert_int_equal(ioctl(fd, KVFS_IOC_GET, b) < 0 ? -errno : 0, -EINVAL);
	free(b);
	/* a group lookup does not wait */
	{
		const char *ns[] = { "bad" };
		struct kvfs_result res;

		assert_int_equal(kvfs_group_lookup(fd, ns, 1, keys, 1,
						   KVFS_LOOKUP_WAIT, 0, &res),
				 -EINVAL);
	}
	close(fd);
}

/* SIGTERM while a waiter sleeps: the daemon stops at once (libfuse's
 * loop waits for every worker, and a waiting worker cannot be
 * cancelled), and the waiter gets the run there. */
static void test_stop_while_waiting(void **state)
{
	struct kvfs_mnt m;
	struct kvfs_key keys[2];
	struct waiter w;
	uint64_t t0;
	int fd;

	(void)state;
	assert_int_equal(mount_opts(&m, "l1_size=32M"), 0);
	fd = kvfs_ns_open(m.dir, "stop", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	chain(keys, 2, 9);
	put_one(fd, &keys[0], 90);
	waiter_start(&w, fd, keys, 2, 60000);
	await_waiting(&m, 1);
	t0 = now_us();
	assert_int_equal(kill(m.pid, SIGTERM), 0);
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_true(w.found == 1 || w.found < 0);
	close(fd);
	assert_int_equal(kvfs_test_wait_exit(&m), 0);
	fprintf(stderr, "stopped %llu ms after SIGTERM with a waiter\n",
		(unsigned long long)((now_us() - t0) / 1000));
	assert_true(now_us() - t0 < 5000000);
}

/* Bad values of the hand-off's mount options: refused, with the option
 * named, nothing mounted. */
static void test_bad_options(void **state)
{
	static const char *const bad[][2] = {
		{ "wait_max=0", "wait_max" },
		{ "wait_max=1025", "wait_max" },
		{ "wait_max=x", "wait_max" },
		{ "wait_max=4,wait_max_uid=5", "wait_max_uid" },
		{ "wait_max_uid=0", "wait_max_uid" },
		{ "wait_recheck_ms=0", "wait_recheck_ms" },
		{ "wait_recheck_ms=101", "wait_recheck_ms" },
		{ "l3_notify=2", "l3_notify" },
		{ "l3_notify=yes", "l3_notify" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char dir[] = "/tmp/kvfs-handoff.XXXXXX", out[4096];
		const char *argv[] = { kvfs_test_bin(), "-f", "-o", bad[i][0],
				       dir, NULL };
		int rc;

		assert_non_null(mkdtemp(dir));
		rc = kvfs_test_run(argv, out, sizeof(out));
		if (rc == 0 || !strstr(out, bad[i][1]))
			fprintf(stderr, "%s: rc %d, output: %s\n", bad[i][0],
				rc, out);
		assert_true(rc > 0 && rc < 128);
		assert_non_null(strstr(out, bad[i][1]));
		assert_false(kvfs_test_is_mounted(dir));
		assert_int_equal(rmdir(dir), 0);
	}
}

/* ------------------------------------------------------ across nodes */

struct pair {
	struct kvfs_mnt a, b; /* a: prefill node, b: decode node */
	int afd, bfd;
};

static int pair_mount(struct pair *p, const char *url, const char *extra,
		      const char *ns)
{
	char opts[1024];

	snprintf(opts, sizeof(opts), "l1_size=64M,lease_ms=500,l3=%s,"
		 "l3_ingest=all,l3_timeout_ms=200%s%s", url,
		 extra && *extra ? "," : "", extra ? extra : "");
	if (mount_opts(&p->a, opts))
		return -1;
	if (mount_opts(&p->b, opts)) {
		kvfs_test_umount(&p->a);
		return -1;
	}
	p->afd = kvfs_ns_open(p->a.dir, ns, KVFS_NS_CREATE, 0755);
	p->bfd = kvfs_ns_open(p->b.dir, ns, KVFS_NS_CREATE, 0755);
	/* both subscribed (unless notifications are off) */
	if (!extra || !strstr(extra, "l3_notify=0")) {
		uint64_t end = now_ms() + 10000;

		while ((kvfs_test_stat(&p->a, "wait", "notify_subscribed") < 1 ||
			kvfs_test_stat(&p->b, "wait", "notify_subscribed") < 1) &&
		       now_ms() < end)
			sleep_ms(10);
	}
	return p->afd >= 0 && p->bfd >= 0 ? 0 : -1;
}

static void pair_umount(struct pair *p)
{
	close(p->afd);
	close(p->bfd);
	assert_int_equal(kvfs_test_umount(&p->a), 0);
	assert_int_equal(kvfs_test_umount(&p->b), 0);
}

/* A publishes keys one at a time (each lands in L3 by l3_ingest=all);
 * B's waiter on the chain returns once the last is in L3, then B reads
 * every chunk's bytes. max_ms bounds B's return after A's last put. */
static void handoff_round(struct pair *p, uint64_t tag, int n,
			  uint64_t max_ms)
{
	struct kvfs_key keys[8];
	struct kvfs_io io[8];
	struct waiter w;
	char *bufs = malloc((size_t)n * CHUNK);
	uint64_t t_pub;

	assert_non_null(bufs);
	assert_true(n <= 8);
	chain(keys, (size_t)n, tag);
	waiter_start(&w, p->bfd, keys, (size_t)n, 10000);
	await_waiting(&p->b, 1);
	for (int i = 0; i < n; i++)
		put_one(p->afd, &keys[i], tag * 100 + (uint64_t)i);
	t_pub = now_us();
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_int_equal(w.found, n);
	fprintf(stderr, "cross-node hand-off: B returned %llu us after A's "
		"last put returned (A sent %lld notifications, %lld failed; B "
		"received %lld, woke %lld waiters, re-checked %lld times)\n",
		(unsigned long long)(w.done_us > t_pub ? w.done_us - t_pub : 0),
		kvfs_test_stat(&p->a, "wait", "notify_sent"),
		kvfs_test_stat(&p->a, "wait", "notify_errors"),
		kvfs_test_stat(&p->b, "wait", "notify_received"),
		kvfs_test_stat(&p->b, "wait", "wakeups"),
		kvfs_test_stat(&p->b, "wait", "rechecks"));
	assert_true(w.done_us < t_pub || w.done_us - t_pub < max_ms * 1000);
	memset(io, 0, sizeof(io));
	for (int i = 0; i < n; i++) {
		io[i].key = keys[i];
		io[i].buf = bufs + (size_t)i * CHUNK;
		io[i].len = CHUNK;
	}
	assert_int_equal(kvfs_mget(p->bfd, io, (size_t)n, 0), n);
	for (int i = 0; i < n; i++)
		assert_int_equal(kvfs_test_check(io[i].buf, CHUNK,
						 tag * 100 + (uint64_t)i, 0),
				 0);
	free(bufs);
}

static void test_l3_standalone(void **state)
{
	struct rt_server s;
	struct pair p;
	char url[128], out[4096];

	(void)state;
	if (rt_skip_reason()) {
		fprintf(stderr, "skip: %s\n", rt_skip_reason());
		skip();
	}
	assert_int_equal(rt_start(&s, false, NULL), 0);
	assert_int_equal(pair_mount(&p, rt_url(&s, url, sizeof(url)), NULL,
				    "hand"), 0);
	/* notifications: the wake-up comes with the value landing */
	handoff_round(&p, 100, 4, 1000);
	assert_true(kvfs_test_stat(&p.b, "wait", "wakeups") >= 1);
	/* a dropped subscription: re-checks cover the gap, and the
	 * subscriber comes back */
	assert_int_equal(rt_cli(&s, out, sizeof(out), "CLIENT", "KILL",
				"TYPE", "pubsub", NULL), 0);
	handoff_round(&p, 101, 2, 1000);
	sleep_ms(1500);
	/* subscribed again (the first time, and after the kill) */
	assert_true(kvfs_test_stat(&p.b, "wait", "notify_resubscribes") >= 2);
	assert_int_equal(kvfs_test_stat(&p.b, "wait", "notify_subscribed"), 1);
	handoff_round(&p, 102, 2, 1000);
	/* a corrupt value in L3: the wait sees the key, the GET a miss,
	 * never the wrong bytes */
	{
		struct kvfs_key keys[2];
		struct kvfs_io io[2];
		char hex[KVFS_KEY_HEX_LEN + 1], rkey[256];
		char *bufs = malloc(2 * CHUNK);

		assert_non_null(bufs);
		chain(keys, 2, 105);
		put_one(p.afd, &keys[0], 10500);
		kvfs_key_hex(&keys[1], hex);
		snprintf(rkey, sizeof(rkey), "kvfs:hand:%s", hex);
		assert_int_equal(rt_cli(&s, out, sizeof(out), "SET", rkey,
					"not a kvfs record", NULL), 0);
		memset(io, 0, sizeof(io));
		for (int i = 0; i < 2; i++) {
			io[i].key = keys[i];
			io[i].buf = bufs + (size_t)i * CHUNK;
			io[i].len = CHUNK;
		}
		assert_int_equal(kvfs_mget_wait(p.bfd, io, 2, 0, 5000), 1);
		assert_int_equal(io[0].result, CHUNK);
		assert_int_equal(kvfs_test_check(io[0].buf, CHUNK, 10500, 0), 0);
		assert_int_equal(io[1].result, -ENOENT);
		free(bufs);
	}
	/* the server restarted while B waits */
	{
		struct kvfs_key keys[2];
		struct waiter w;

		chain(keys, 2, 103);
		waiter_start(&w, p.bfd, keys, 2, 15000);
		await_waiting(&p.b, 1);
		rt_stop(&s, true);
		sleep_ms(200);
		assert_int_equal(rt_restart(&s), 0);
		sleep_ms(1500); /* A's writer reconnects (backoff) */
		put_one(p.afd, &keys[0], 10300);
		put_one(p.afd, &keys[1], 10301);
		assert_int_equal(pthread_join(w.th, NULL), 0);
		assert_int_equal(w.found, 2);
	}
	/* Redis down: a wait falls back to what is local and times out
	 * cleanly with the run there */
	rt_stop(&s, true);
	{
		struct kvfs_key keys[3];
		struct waiter w;
		uint64_t t0 = now_us();

		chain(keys, 3, 104);
		put_one(p.bfd, &keys[0], 10400);
		waiter_start(&w, p.bfd, keys, 3, 400);
		assert_int_equal(pthread_join(w.th, NULL), 0);
		assert_int_equal(w.found, 1);
		assert_true(w.done_us - t0 < 2000000);
	}
	pair_umount(&p);
}

/* Notifications off: the re-check alone, within wait_recheck_ms. */
static void test_l3_recheck_only(void **state)
{
	struct rt_server s;
	struct pair p;
	char url[128];

	(void)state;
	if (rt_skip_reason())
		skip();
	assert_int_equal(rt_start(&s, false, NULL), 0);
	assert_int_equal(pair_mount(&p, rt_url(&s, url, sizeof(url)),
				    "l3_notify=0,wait_recheck_ms=20", "hand"),
			 0);
	handoff_round(&p, 200, 3, 1000);
	assert_true(kvfs_test_stat(&p.b, "wait", "rechecks") >= 1);
	pair_umount(&p);
	rt_stop(&s, false);
}

/* The decode side dies holding pins: its leases expire, nothing leaks. */
static void test_l3_decode_dies(void **state)
{
	struct rt_server s;
	struct pair p;
	struct kvfs_key keys[2];
	char url[128];
	pid_t pid;
	int st;

	(void)state;
	if (rt_skip_reason())
		skip();
	assert_int_equal(rt_start(&s, false, NULL), 0);
	assert_int_equal(pair_mount(&p, rt_url(&s, url, sizeof(url)), NULL,
				    "hand"), 0);
	chain(keys, 2, 300);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kvfs_result res;
		int fd = kvfs_ns_open(p.b.dir, "hand", 0, 0);
		long f = fd < 0 ? fd : kvfs_lookup_wait(fd, keys, 2, 0,
							KVFS_LOOKUP_PIN, 60000,
							10000, &res);

		if (f != 2) {
			fprintf(stderr, "decode child: %ld\n", f);
			_exit(1);
		}
		pause(); /* holds the pins until killed */
		_exit(0);
	}
	sleep_ms(100);
	put_one(p.afd, &keys[0], 1);
	put_one(p.afd, &keys[1], 2);
	{
		uint64_t end = now_ms() + 5000;

		while (kvfs_test_stat(&p.b, "leases", "active") < 1 &&
		       now_ms() < end)
			sleep_ms(5);
	}
	assert_int_equal(kvfs_test_stat(&p.b, "leases", "active"), 1);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	{
		uint64_t end = now_ms() + 3000;

		while (kvfs_test_stat(&p.b, "leases", "active") > 0 &&
		       now_ms() < end)
			sleep_ms(5);
	}
	assert_int_equal(kvfs_test_stat(&p.b, "leases", "active"), 0);
	assert_int_equal(kvfs_test_stat(&p.b, "leases", "pinned_chunks"), 0);
	pair_umount(&p);
	rt_stop(&s, false);
}

static void test_l3_cluster(void **state)
{
	struct rt_cluster c;
	struct pair p;
	char url[512];

	(void)state;
	if (rt_skip_reason())
		skip();
	assert_int_equal(rt_cluster_start(&c, NULL), 0);
	assert_int_equal(pair_mount(&p, rt_cluster_url(&c, url, sizeof(url)),
				    NULL, "hand"), 0);
	handoff_round(&p, 400, 8, 1000);
	assert_true(kvfs_test_stat(&p.b, "wait", "wakeups") >= 1);
	/* every master drops its subscribers: re-checks cover the gap, and
	 * the shard subscriptions come back on every master */
	for (int i = 0; i < RT_CLUSTER_N; i++) {
		char out[4096];

		assert_int_equal(rt_cli(&c.node[i], out, sizeof(out), "CLIENT",
					"KILL", "TYPE", "pubsub", NULL), 0);
	}
	handoff_round(&p, 401, 4, 1000);
	{
		uint64_t end = now_ms() + 5000;

		while (kvfs_test_stat(&p.b, "wait", "notify_resubscribes") < 2 &&
		       now_ms() < end)
			sleep_ms(20);
	}
	assert_true(kvfs_test_stat(&p.b, "wait", "notify_resubscribes") >= 2);
	assert_int_equal(kvfs_test_stat(&p.b, "wait", "notify_subscribed"), 1);
	handoff_round(&p, 402, 4, 1000);
	pair_umount(&p);
	rt_cluster_stop(&c);
}

int main(void)
{
	const struct CMUnitTest local[] = {
		cmocka_unit_test(test_local_wakeup),
		cmocka_unit_test(test_local_timeout_partial),
		cmocka_unit_test(test_local_get_wait),
		cmocka_unit_test(test_local_eintr),
		cmocka_unit_test(test_local_get_eintr),
		cmocka_unit_test(test_local_flood),
		cmocka_unit_test(test_local_bad_flags),
		cmocka_unit_test(test_stop_while_waiting),
		cmocka_unit_test(test_bad_options),
	};
	const struct CMUnitTest l3[] = {
		cmocka_unit_test(test_l3_standalone),
		cmocka_unit_test(test_l3_recheck_only),
		cmocka_unit_test(test_l3_decode_dies),
		cmocka_unit_test(test_l3_cluster),
	};
	int rc;

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	if (getenv("KVFS_TEST_FILTER")) /* e.g. "test_l3_cluster" */
		cmocka_set_test_filter(getenv("KVFS_TEST_FILTER"));
	rc = cmocka_run_group_tests_name("local", local, setup_local,
					 teardown_local);
	if (getenv("KVFS_HANDOFF_LOCAL_ONLY"))
		return rc;
	return rc | cmocka_run_group_tests_name("l3", l3, NULL, NULL);
}
