/*
 * tier.c - the engine's life cycle: config defaults and checks,
 * tier_create/tier_destroy; it calls the other files and none calls it
 * (the lock, the log and the clock are in tier_lock.c). The rest of the engine is in tier_*.c (see
 * the top of tier_i.h for the map, the lock order and what each lock
 * protects).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/tier_i.h"
#include "tier/tier_wait.h"

#define TIER_MIN_BUCKETS 1024

/* Writes a one-line message to err (may be NULL). */
static void errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------ create/destroy */

void tier_config_default(struct tier_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->l1_size = 1ull << 30;
	cfg->max_chunk = 64ull << 20;
	cfg->policy = "prefix";
	cfg->l1 = "host";
	cfg->compress_level = 1;
	cfg->ingest = TIER_INGEST_EVICTED;
	cfg->hot_hits = 2;
	cfg->l2_checkpoint_s = 60;
	cfg->shuffle = 2; /* KV caches are mostly bf16/fp16 */
}

static int check_config(const struct tier_config *cfg, char *err,
			size_t errlen)
{
	const char *const *names;
	char list[128] = "";
	size_t n = 0;

	if (!policy_find(cfg->policy)) {
		for (names = policy_names(); *names; names++)
			n += (size_t)snprintf(list + n, n < sizeof(list) ?
					      sizeof(list) - n : 0, "%s%s",
					      n ? ", " : "", *names);
		errf(err, errlen, "unknown policy '%s' (valid: %s)",
		     cfg->policy ? cfg->policy : "(null)", list);
		return -EINVAL;
	}
	if (cfg->l1_size < L1_ALIGN) {
		errf(err, errlen,
		     "l1_size %llu is smaller than one chunk (%u bytes minimum)",
		     (unsigned long long)cfg->l1_size, L1_ALIGN);
		return -EINVAL;
	}
	if (cfg->max_chunk == 0) {
		errf(err, errlen, "max_chunk must be > 0");
		return -EINVAL;
	}
	if (cfg->max_chunk > (cfg->l1_size & ~(uint64_t)(L1_ALIGN - 1))) {
		errf(err, errlen,
		     "max_chunk %llu is larger than l1_size %llu: a chunk "
		     "must fit in L1",
		     (unsigned long long)cfg->max_chunk,
		     (unsigned long long)cfg->l1_size);
		return -EINVAL;
	}
	if (cfg->max_chunk / L1_ALIGN > UINT32_MAX) {
		errf(err, errlen, "max_chunk %llu is too large",
		     (unsigned long long)cfg->max_chunk);
		return -EINVAL;
	}
	if (cfg->readahead > TIER_READAHEAD_MAX) {
		errf(err, errlen, "readahead %u is too large (at most %u chunks)",
		     cfg->readahead, TIER_READAHEAD_MAX);
		return -EINVAL;
	}
	return 0; /* L2 options: tier_l2_open */
}

static char *dup_or_null(const char *s, bool *fail)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

int tier_create(const struct tier_config *cfg, struct tier **out,
		char *err, size_t errlen)
{
	struct tier *t;
	bool fail = false;
	int rc;

	if (!cfg || !out) {
		errf(err, errlen, "tier_create: no config");
		return -EINVAL;
	}
	rc = check_config(cfg, err, errlen);
	if (rc < 0)
		return rc;
	t = calloc(1, sizeof(*t));
	if (!t) {
		errf(err, errlen, "tier_create: out of memory");
		return -ENOMEM;
	}
	t->cfg = *cfg;
	t->policy_name = dup_or_null(cfg->policy, &fail);
	t->l1_spec = dup_or_null(cfg->l1, &fail);
	t->l2_dir = dup_or_null(cfg->l2_dir, &fail);
	t->cfg.policy = t->policy_name;
	t->cfg.l1 = t->l1_spec;
	t->cfg.l2_dir = t->l2_dir;
	t->l1_cap = cfg->l1_size & ~(uint64_t)(L1_ALIGN - 1);
	if (htab_init(&t->idx, TIER_MIN_BUCKETS))
		fail = true;
	t->ns_cap = 16;
	t->ns_next = 1; /* id 0 is never a namespace */
	t->ns = calloc(t->ns_cap, sizeof(*t->ns));
	if (fail || !t->ns) {
		errf(err, errlen, "tier_create: out of memory");
		rc = -ENOMEM;
		goto err_free;
	}
	pthread_mutex_init(&t->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&t->room, &ca);
		pthread_condattr_destroy(&ca);
	}
	rc = gpu_arena_open(t->cfg.l1, t->l1_cap, &t->arena, err, errlen);
	if (rc < 0)
		goto err_mutex;
	rc = l1_alloc_create(t->l1_cap, &t->alloc);
	if (rc < 0) {
		errf(err, errlen, "l1 allocator: %s", strerror(-rc));
		goto err_arena;
	}
	t->pops = policy_find(t->cfg.policy);
	/* First guess: 1 MiB chunks; corrected once chunks arrive. */
	t->cap_items = t->l1_cap >> 20 > 16 ? t->l1_cap >> 20 : 16;
	rc = t->pops->create(&t->pol, t->cap_items);
	if (rc < 0) {
		errf(err, errlen, "policy %s: %s", t->pops->name,
		     strerror(-rc));
		goto err_alloc;
	}
	if (!t->cfg.wait_recheck_ms)
		t->cfg.wait_recheck_ms = TIER_WAIT_RECHECK_MS_DEFAULT;
	rc = tier_wait_open(t);
	if (rc)
		errf(err, errlen, "tier_create: out of memory");
	/* the stores' hooks do nothing until their store is open */
	t->l2ops = &tier_l2_hooks;
	t->l3ops = &tier_l3_hooks;
	if (rc == 0)
		rc = tier_l2_open(t, err, errlen);
	if (rc == 0)
		rc = tier_l3_open(t, err, errlen);
	if (rc == 0 && (rc = tier_l3_notify_open(t, t->l3 ? tier_l3_store(t)
						   : NULL)) < 0)
		errf(err, errlen, "l3 notifications: %s", strerror(-rc));
	if (rc == 0 && (rc = tier_ra_open(t)) < 0)
		errf(err, errlen, "readahead: %s", strerror(-rc));
	/* the L3 strings were copied where they are kept (the password by
	 * the connections): none is kept here */
	t->cfg.l3 = t->cfg.l3_password = t->cfg.l3_prefix = NULL;
	t->cfg.l3_user = NULL;
	if (rc < 0) {
		tier_destroy(t);
		return rc;
	}
	*out = t;
	return 0;

err_alloc:
	l1_alloc_destroy(t->alloc);
err_arena:
	gpu_arena_close(&t->arena);
err_mutex:
	pthread_cond_destroy(&t->room);
	pthread_mutex_destroy(&t->lock);
err_free:
	htab_free(&t->idx);
	free(t->ns);
	free(t->policy_name);
	free(t->l1_spec);
	free(t->l2_dir);
	free(t);
	return rc;
}

void tier_destroy(struct tier *t)
{
	struct tier_rec *r, *next;
	struct tier_wr *w, *wnext;
	struct htab_node *e, *nx;
	uint64_t i;

	if (!t)
		return;
	tier_ra_close(t); /* its workers promote from L2 and L3 */
	tier_l3_notify_stop(t); /* the subscriber uses the L3 client */
	tier_l3_close(t); /* sends its queue: releases unpin records */
	tier_l3_notify_close(t); /* its writers announced their last */
	tier_l2_close(t); /* flush_on_exit; callbacks still see the index */
	free(t->ra_saved); /* the last checkpoint above kept it */
	free(t->ra_scanned); /* readahead off: never taken */
	/* The policy only links records; drop it before freeing them. */
	t->pops->destroy(t->pol);
	htab_for_each_safe(&t->idx, i, e, nx)
		free(idx_rec(e));
	for (r = t->zombies; r; r = next) {
		next = r->ns_next;
		free(r);
	}
	for (w = t->writers; w; w = wnext) {
		wnext = w->next;
		pthread_mutex_destroy(&w->mu);
		free(w);
	}
	for (i = 0; i < t->ns_next; i++)
		free(t->ns[i]);
	free(t->ns);
	htab_free(&t->idx);
	tier_orphans_free(t);
	free(t->gone);
	l1_alloc_destroy(t->alloc);
	gpu_arena_close(&t->arena);
	pthread_cond_destroy(&t->room);
	tier_wait_close(t);
	pthread_mutex_destroy(&t->lock);
	free(t->policy_name);
	free(t->l1_spec);
	free(t->l2_dir);
	free(t);
}

