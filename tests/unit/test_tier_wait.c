/*
 * test_tier_wait.c - waiters in the engine (tier/tier_wait.h): a publish
 * wakes the waiter on its key, key after key of a chain; a timeout gives
 * the leading run; an interrupt ends the wait with -EINTR (also one that
 * came before the sleep); a stop callback ends it as a timeout; a wake by
 * namespace name; a removed namespace is -ENOENT; the counters.
 */
#include <pthread.h>

#include "tier/tier_wait.h"
#include "tier_test.h"

struct wt {
	pthread_t th;
	struct tier *t;
	struct tier_waiter w;
	uint32_t ns, n, found;
	const struct kvfs_key *keys;
	uint64_t deadline;
	int rc;
};

static void *wt_main(void *arg)
{
	struct wt *x = arg;

	x->rc = tier_wait_chain(x->t, &x->w, x->ns, x->keys, x->n, 0,
				x->deadline, &x->found);
	return NULL;
}

static void wt_start(struct wt *x, struct tier *t, uint32_t ns,
		     const struct kvfs_key *keys, uint32_t n, uint64_t ms)
{
	memset(x, 0, sizeof(*x));
	tier_waiter_init(&x->w);
	x->t = t;
	x->ns = ns;
	x->keys = keys;
	x->n = n;
	x->deadline = tier_now_mono_ns() + ms * 1000000ull;
	assert_int_equal(pthread_create(&x->th, NULL, wt_main, x), 0);
}

static void wt_join(struct wt *x)
{
	assert_int_equal(pthread_join(x->th, NULL), 0);
	tier_waiter_fini(&x->w);
}

static void await_sleeping(struct tier *t, uint64_t n)
{
	struct tier_wait_stats st;

	for (int i = 0; i < 2000; i++) {
		tier_wait_stats(t, &st);
		if (st.waiting >= n)
			return;
		usleep(1000);
	}
	fail_msg("no waiter sleeps");
}

static void test_publish_wakes(void **state)
{
	struct tier *t = mk(64 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k[3] = { mkkey(1), mkkey(2), mkkey(3) };
	struct tier_wait_stats st;
	struct wt x;

	(void)state;
	wt_start(&x, t, ns, k, 3, 10000);
	for (int i = 0; i < 3; i++) {
		await_sleeping(t, 1);
		assert_int_equal(put_chunk(t, ns, &k[i], PAGE, 0), 0);
	}
	wt_join(&x);
	assert_int_equal(x.rc, 0);
	assert_int_equal(x.found, 3);
	tier_wait_stats(t, &st);
	assert_int_equal(st.waits, 1);
	assert_int_equal(st.complete, 1);
	assert_true(st.wakeups >= 1); /* a publish may land before the re-arm */
	assert_int_equal(st.waiting, 0);
	tier_destroy(t);
}

static void test_timeout_run(void **state)
{
	struct tier *t = mk(64 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k[3] = { mkkey(1), mkkey(2), mkkey(3) };
	struct tier_wait_stats st;
	struct wt x;
	uint64_t t0 = tier_now_mono_ns();

	(void)state;
	assert_int_equal(put_chunk(t, ns, &k[0], PAGE, 0), 0);
	assert_int_equal(put_chunk(t, ns, &k[2], PAGE, 0), 0);
	wt_start(&x, t, ns, k, 3, 100);
	wt_join(&x);
	assert_int_equal(x.rc, 0);
	assert_int_equal(x.found, 1);
	assert_true(tier_now_mono_ns() - t0 >= 100000000ull);
	tier_wait_stats(t, &st);
	assert_int_equal(st.timeouts, 1);
	/* a key of another namespace does not wake it */
	{
		uint32_t other = mkns(t, "other");

		wt_start(&x, t, ns, k, 2, 300);
		await_sleeping(t, 1);
		assert_int_equal(put_chunk(t, other, &k[1], PAGE, 0), 0);
		wt_join(&x);
		assert_int_equal(x.found, 1);
	}
	tier_destroy(t);
}

static bool stop_now(void *arg)
{
	return *(volatile bool *)arg;
}

static void test_interrupt_stop_name(void **state)
{
	struct tier *t = mk(64 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "named");
	struct kvfs_key k[1] = { mkkey(7) };
	volatile bool stop = false;
	struct wt x;

	(void)state;
	/* interrupted while sleeping */
	wt_start(&x, t, ns, k, 1, 10000);
	await_sleeping(t, 1);
	tier_wait_interrupt(t, &x.w);
	wt_join(&x);
	assert_int_equal(x.rc, -EINTR);
	/* interrupted before it sleeps: the interrupt is not lost */
	memset(&x, 0, sizeof(x));
	tier_waiter_init(&x.w);
	tier_wait_interrupt(t, &x.w);
	assert_int_equal(tier_wait_chain(t, &x.w, ns, k, 1, 0,
					 tier_now_mono_ns() + 10000000000ull,
					 &x.found), -EINTR);
	tier_waiter_fini(&x.w);
	/* a stop callback: ends like a timeout, within its poll */
	{
		uint64_t t0;

		memset(&x, 0, sizeof(x));
		x.t = t;
		x.ns = ns;
		x.keys = k;
		x.n = 1;
		x.deadline = tier_now_mono_ns() + 10000000000ull;
		tier_waiter_init(&x.w);
		x.w.stop = stop_now;
		x.w.stop_arg = (void *)&stop;
		assert_int_equal(pthread_create(&x.th, NULL, wt_main, &x), 0);
		await_sleeping(t, 1);
		t0 = tier_now_mono_ns();
		stop = true;
		wt_join(&x);
		assert_int_equal(x.rc, 0);
		assert_int_equal(x.found, 0);
		assert_true(tier_now_mono_ns() - t0 <
			    2ull * TIER_WAIT_STOP_POLL_MS * 1000000ull);
	}
	/* a wake by name (a notification) re-checks: nothing there yet,
	 * it sleeps again; unknown names are ignored */
	wt_start(&x, t, ns, k, 1, 400);
	await_sleeping(t, 1);
	tier_wait_wake_name(t, "named", &k[0]);
	tier_wait_wake_name(t, "nope", &k[0]);
	tier_wait_wake_all(t);
	wt_join(&x);
	assert_int_equal(x.rc, 0);
	assert_int_equal(x.found, 0);
	/* a removed namespace */
	assert_int_equal(tier_ns_remove(t, ns), 0);
	memset(&x, 0, sizeof(x));
	tier_waiter_init(&x.w);
	assert_int_equal(tier_wait_chain(t, &x.w, ns, k, 1, 0,
					 tier_now_mono_ns() + 1000000000ull,
					 &x.found), -ENOENT);
	tier_waiter_fini(&x.w);
	tier_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_publish_wakes),
		cmocka_unit_test(test_timeout_run),
		cmocka_unit_test(test_interrupt_stop_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
