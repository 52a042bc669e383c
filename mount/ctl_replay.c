/*
 * ctl_replay.c - `kvfsctl replay`: runs a Mooncake-format trace through the
 * real engine (tier/), no FUSE, and prints block and prefix hit ratios per
 * eviction policy.
 *
 *   kvfsctl replay --policy P|all --capacity N|P% [--chunk-bytes B] TRACE
 *
 * The trace has one JSON object a line with "hash_ids": [ints], each id one
 * block (512 tokens in Mooncake traces). For each request the blocks are
 * looked up in order with tier_get (a hit touches the block, as an engine's
 * read would), then the missing ones are written and published, each with
 * the previous block of the request as its parent. Two ratios come out:
 *   block hit:  blocks found / blocks requested;
 *   prefix hit: blocks in the leading run of each request (up to its first
 *               miss) / blocks requested - what an engine can reuse.
 * --capacity is in blocks, or a percentage of the trace's unique blocks;
 * the L1 arena is capacity x chunk-bytes (default 4 KiB: small, so the
 * replay is cheap; the hit ratios do not depend on it).
 *
 * Exit status: 0; 1 on a malformed trace (file:line: reason) or an engine
 * error; 2 on a usage error or an unknown policy.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <getopt.h>
#include <jansson.h>

#include "kvfs.h"
#include "mount/ctl.h"
#include "mount/ctl_replay.h"
#include "tier/l1_alloc.h"
#include "tier/policy/policy.h"
#include "tier/tier.h"

/* ------------------------------------------------------- trace parsing */

static int trace_push_id(struct replay_trace *tr, uint64_t id)
{
	if (tr->nids == tr->ids_cap) {
		size_t cap = tr->ids_cap ? tr->ids_cap * 2 : 4096;
		uint64_t *n = realloc(tr->ids, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		tr->ids = n;
		tr->ids_cap = cap;
	}
	tr->ids[tr->nids++] = id;
	return 0;
}

/* The 1-based column of a jansson error inside a line of len bytes. */
static size_t err_col(const json_error_t *e, size_t len)
{
	size_t c = e->position > 0 ? (size_t)e->position : 1;

	return c > len + 1 ? len + 1 : c;
}

/*
 * One line: an object with a "hash_ids" member, an array of non-negative
 * integers (other members ignored, in any order; a duplicated member is
 * refused). Parsed by jansson; on success a request is appended to tr.
 */
static int trace_line(struct replay_trace *tr, const char *line, size_t len,
		      const char **why, size_t *col)
{
	static __thread char msg[JSON_ERROR_TEXT_LENGTH];
	size_t mark = tr->nids, i;
	json_error_t e;
	json_t *o, *ids, *v;

	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &e);
	if (!o) {
		snprintf(msg, sizeof(msg), "%s", e.text);
		*why = msg;
		*col = err_col(&e, len);
		return -EINVAL;
	}
	*col = 1;
	if (!json_is_object(o)) {
		*why = "expected a JSON object";
		goto fail;
	}
	ids = json_object_get(o, "hash_ids");
	if (!ids) {
		*why = "no \"hash_ids\" member";
		goto fail;
	}
	if (!json_is_array(ids)) {
		*why = "hash_ids is not an array";
		goto fail;
	}
	json_array_foreach(ids, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			*why = "hash_ids must hold non-negative integers";
			goto fail;
		}
		if (trace_push_id(tr, (uint64_t)json_integer_value(v))) {
			*why = "out of memory";
			goto fail;
		}
	}
	if (tr->nreq + 1 >= tr->req_cap) {
		size_t cap = tr->req_cap ? tr->req_cap * 2 : 1024;
		size_t *n = realloc(tr->req, cap * sizeof(*n));

		if (!n) {
			*why = "out of memory";
			goto fail;
		}
		tr->req = n;
		tr->req_cap = cap;
	}
	tr->req[tr->nreq++] = mark;
	tr->req[tr->nreq] = tr->nids;
	json_decref(o);
	return 0;
fail:
	tr->nids = mark;
	json_decref(o);
	return -EINVAL;
}

int ctl_replay_check_line(const char *line, size_t len, size_t *nids,
			  const char **why, size_t *col)
{
	struct replay_trace tr = { 0 };
	int rc = trace_line(&tr, line, len, why, col);

	*nids = tr.nids;
	free(tr.ids);
	free(tr.req);
	free(tr.uids);
	free(tr.dense);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int trace_dense(struct replay_trace *tr);

/* Reads the whole trace; prints "path:line:col: reason" on a bad line. */
static int trace_load(const char *path, struct replay_trace *tr)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "kvfsctl replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		const char *why = NULL;
		size_t col = 0, i;

		lineno++;
		for (i = 0; i < (size_t)n && strchr(" \t\r\n", line[i]); i++)
			;
		if (i == (size_t)n)
			continue; /* blank line */
		if (memchr(line, '\0', (size_t)n)) {
			fprintf(stderr, "kvfsctl replay: %s:%zu: malformed line: "
				"NUL byte\n", path, lineno);
			rc = -EINVAL;
			break;
		}
		if (trace_line(tr, line, (size_t)n, &why, &col)) {
			fprintf(stderr, "kvfsctl replay: %s:%zu:%zu: malformed "
				"line: %s\n", path, lineno, col,
				why ? why : "bad JSON");
			rc = -EINVAL;
			break;
		}
	}
	if (!rc && ferror(f)) {
		fprintf(stderr, "kvfsctl replay: %s: read error\n", path);
		rc = -EIO;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	if (rc)
		return rc;
	if (!tr->nreq) {
		fprintf(stderr, "kvfsctl replay: %s: no requests\n", path);
		return -EINVAL;
	}
	if (trace_dense(tr)) {
		fprintf(stderr, "kvfsctl replay: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

/* tr->uids (the distinct ids, sorted), tr->unique and tr->dense (each
 * position's index into uids). */
static int trace_dense(struct replay_trace *tr)
{
	size_t u = 0;

	tr->uids = malloc((tr->nids ? tr->nids : 1) * sizeof(*tr->uids));
	tr->dense = malloc((tr->nids ? tr->nids : 1) * sizeof(*tr->dense));
	if (!tr->uids || !tr->dense)
		return -ENOMEM;
	memcpy(tr->uids, tr->ids, tr->nids * sizeof(*tr->uids));
	qsort(tr->uids, tr->nids, sizeof(*tr->uids), cmp_u64);
	for (size_t i = 0; i < tr->nids; i++)
		if (!u || tr->uids[u - 1] != tr->uids[i])
			tr->uids[u++] = tr->uids[i];
	tr->unique = u;
	for (size_t i = 0; i < tr->nids; i++)
		tr->dense[i] = (uint32_t)replay_dense_of(tr, tr->ids[i]);
	return 0;
}

size_t replay_dense_of(const struct replay_trace *tr, uint64_t id)
{
	const uint64_t *f = bsearch(&id, tr->uids, tr->unique,
				    sizeof(*tr->uids), cmp_u64);

	return f ? (size_t)(f - tr->uids) : SIZE_MAX;
}

/* ------------------------------------------------------------- the run */

/* The block's key: the id as 16 big-endian bytes. */
static void replay_key(uint64_t id, struct kvfs_key *k)
{
	memset(k->b, 0, 8);
	for (int i = 0; i < 8; i++)
		k->b[8 + i] = (uint8_t)(id >> (56 - 8 * i));
}

/* What the engine's on_gone tells a two-tier replay: a block left L1. */
struct replay_gone {
	const struct replay_trace *tr;
	struct replay_l2 *l2;
};

static void replay_on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
			   enum tier_gone_reason why)
{
	struct replay_gone *g = arg;
	uint64_t id = 0;
	size_t u;

	for (int i = 0; i < 8; i++)
		id = id << 8 | key->b[8 + i];
	u = replay_dense_of(g->tr, id);
	if (u != SIZE_MAX)
		replay_l2_evicted(g->l2, (uint32_t)u);
}

/*
 * One run of tr through a fresh engine with policy and room for capacity
 * blocks in L1; l2 (may be NULL) is the model of L2 below it, fed with
 * what leaves L1.
 */
static int replay_one(const struct replay_trace *tr, const char *policy,
		      uint64_t capacity, uint64_t chunk, struct replay_l2 *l2,
		      struct replay_result *res)
{
	struct replay_gone gone = { .tr = tr, .l2 = l2 };
	struct tier_config cfg;
	struct tier *t = NULL;
	struct tier_stats st;
	struct timespec t0, t1;
	char err[256] = "";
	uint32_t ns;
	uint8_t *buf, *found = NULL;
	size_t maxlen = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	for (size_t r = 0; r < tr->nreq; r++)
		if (tr->req[r + 1] - tr->req[r] > maxlen)
			maxlen = tr->req[r + 1] - tr->req[r];
	buf = calloc(1, chunk);
	found = calloc(maxlen + 1, 1);
	if (!buf || !found) {
		rc = -ENOMEM;
		fprintf(stderr, "kvfsctl replay: out of memory\n");
		goto out_free;
	}

	tier_config_default(&cfg);
	/* the arena rounds each chunk up to whole pages: room for exactly
	 * capacity chunks whatever --chunk-bytes is */
	cfg.l1_size = capacity * ((chunk + L1_ALIGN - 1) / L1_ALIGN * L1_ALIGN);
	cfg.max_chunk = chunk;
	cfg.policy = policy;
	cfg.l1 = "host";
	cfg.l2_dir = NULL;
	if (l2) {
		cfg.on_gone = replay_on_gone;
		cfg.on_gone_arg = &gone;
	}
	rc = tier_create(&cfg, &t, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "kvfsctl replay: %s: engine: %s (%s)\n", policy,
			err[0] ? err : "tier_create failed", strerror(-rc));
		goto out_free;
	}
	rc = tier_ns_create(t, "replay", &ns);
	if (!rc)
		rc = tier_ns_set_chunk_bytes(t, ns, chunk);
	if (rc) {
		fprintf(stderr, "kvfsctl replay: namespace: %s\n", strerror(-rc));
		goto out_tier;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t r = 0; r < tr->nreq; r++) {
		const uint64_t *ids = tr->ids + tr->req[r];
		size_t n = tr->req[r + 1] - tr->req[r];
		bool leading = true;
		struct kvfs_key key, parent;

		for (size_t i = 0; i < n; i++) {
			struct tier_chunk *c;

			replay_key(ids[i], &key);
			rc = tier_get(t, ns, &key, &c);
			if (rc == -ENOENT && l2 &&
			    replay_l2_read(l2, tr->dense[tr->req[r] + i])) {
				/* from L2: a hit; published back into L1 below,
				 * as a promotion does */
				found[i] = 2;
				res->hits++;
				res->prefix_hits += leading;
				continue;
			}
			if (rc == -ENOENT) {
				found[i] = 0;
				leading = false;
				continue;
			}
			if (rc) {
				fprintf(stderr, "kvfsctl replay: tier_get: %s\n",
					strerror(-rc));
				goto out_tier;
			}
			tier_put(t, c);
			if (l2)
				replay_l2_l1_hit(l2, tr->dense[tr->req[r] + i]);
			found[i] = 1;
			res->hits++;
			res->prefix_hits += leading;
		}
		res->blocks += n;

		for (size_t i = 0; i < n; i++) {
			struct tier_wr *w;

			if (found[i] == 1)
				continue;
			replay_key(ids[i], &key);
			rc = tier_wr_begin(t, ns, &key, chunk, &w);
			if (rc == -EEXIST)
				continue; /* an id repeated in one request */
			if (rc) {
				fprintf(stderr, "kvfsctl replay: tier_wr_begin: %s\n",
					strerror(-rc));
				goto out_tier;
			}
			rc = tier_wr_pwrite(t, w, buf, chunk, 0);
			if (!rc && i > 0)
				replay_key(ids[i - 1], &parent);
			if (!rc)
				rc = tier_wr_set_parent(t, w, i ? &parent : NULL,
							(uint32_t)(i + 1));
			if (rc) {
				tier_wr_abort(t, w);
			} else {
				rc = tier_wr_publish(t, w, NULL);
				if (!rc && l2)
					replay_l2_published(l2,
						tr->dense[tr->req[r] + i]);
				if (rc == -EEXIST)
					rc = 0;
			}
			if (rc) {
				fprintf(stderr, "kvfsctl replay: insert: %s\n",
					strerror(-rc));
				goto out_tier;
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->secs = (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	tier_get_stats(t, &st);
	res->evictions = st.evictions;
	res->cached = st.l1_chunks;
	if (l2)
		replay_l2_counts(l2, &res->l2_hits, &res->l2_writes);
	rc = 0;
out_tier:
	tier_destroy(t);
out_free:
	free(buf);
	free(found);
	return rc;
}

/* ------------------------------------------------------------ commands */

#define REPLAY_MAX_CAPS 16

static const struct ctl_cmd CMD = {
	"replay", "replay --policy P|all --capacity C[,C...] [--chunk-bytes B] "
	"[--l2-capacity C [--ingest M[,M...]|each]] [--json] TRACE.jsonl",
	"Runs a Mooncake-format trace through the real engine and prints block\n"
	"and prefix hit ratios per policy, beside Belady's offline optimum.\n\n"
	"  --policy P         lru, fifo, s3fifo, prefix, s2lru, belady or all\n"
	"  --capacity C       L1 room in blocks, or a percentage of the trace's\n"
	"                     unique blocks (10%); a comma list runs each\n"
	"  --chunk-bytes B    chunk size in the arena (default 4096)\n"
	"  --l2-capacity C    a second tier: a model of L2 (a FIFO log of C\n"
	"                     blocks, or a percentage) under the engine's L1\n"
	"  --ingest M         what L2 admits: evicted (default), hot, twice,\n"
	"                     all, a comma list, or each\n"
	"  --json             one JSON document instead of the tables\n",
};

/* N blocks, or P% of the unique blocks (at least 1). */
static int replay_capacity(const char *s, uint64_t unique, uint64_t *out)
{
	size_t len = strlen(s);
	unsigned long long v;

	if (len > 1 && s[len - 1] == '%') {
		char *end;
		double pct = strtod(s, &end);

		if (end != s + len - 1 || !(pct > 0) || pct > 1e6)
			return -EINVAL;
		v = (unsigned long long)((double)unique * pct / 100.0);
		*out = v ? v : 1;
		return 0;
	}
	if (ctl_parse_u64(s, &v) || v == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Splits a comma list of capacities (kept as text until the trace is
 * loaded: a percentage needs its unique count). */
static int replay_cap_list(char *s, char **caps, int *ncaps)
{
	char *save = NULL, *tok;

	*ncaps = 0;
	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*ncaps == REPLAY_MAX_CAPS)
			return -E2BIG;
		caps[(*ncaps)++] = tok;
	}
	return *ncaps ? 0 : -EINVAL;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* The share of the LRU-to-Belady prefix-hit gap res closes; NAN when
 * there is no gap. */
static double gap_closed(const struct replay_result *res,
			 const struct replay_result *lru,
			 const struct replay_result *bel)
{
	double gap = ratio(bel->prefix_hits, bel->blocks) -
		     ratio(lru->prefix_hits, lru->blocks);

	if (gap < 1e-9)
		return NAN;
	return (ratio(res->prefix_hits, res->blocks) -
		ratio(lru->prefix_hits, lru->blocks)) / gap;
}

/* What one invocation asks for. */
struct replay_args {
	const char *policy;   /* a name, "belady" or "all" */
	uint64_t chunk;
	uint64_t l2cap;       /* blocks of the L2 model; 0 = L1 only */
	unsigned ingests;     /* with l2cap: bit i = enum replay_ingest i */
	const char *path;
};

/* policy with L1 capacity cap (and the L2 model when a->l2cap). */
static int run_policy(const struct replay_trace *tr, const struct replay_args *a,
		      const char *policy, uint64_t cap, enum replay_ingest ing,
		      struct replay_result *res)
{
	struct replay_l2 *l2 = NULL;
	int rc;

	if (a->l2cap && replay_l2_create(&l2, a->l2cap, ing, tr->unique)) {
		fprintf(stderr, "kvfsctl replay: out of memory\n");
		return 1;
	}
	rc = replay_one(tr, policy, cap, a->chunk, l2, res) ? 1 : 0;
	replay_l2_destroy(l2);
	return rc;
}

/* One result: a table line, or an object appended to jr. */
static int print_result(json_t *jr, const char *name, const char *ingest,
			const struct replay_result *res, double g)
{
	if (jr) {
		json_t *o = json_pack("{s:s, s:f, s:f, s:o, s:I, s:I, s:f}",
			"policy", name,
			"block_hit", ratio(res->hits, res->blocks),
			"prefix_hit", ratio(res->prefix_hits, res->blocks),
			"gap_closed", isnan(g) ? json_null() : json_real(g),
			"evictions", (json_int_t)res->evictions,
			"cached", (json_int_t)res->cached,
			"seconds", res->secs);

		if (o && ingest &&
		    json_object_update_new(o, json_pack("{s:s, s:f, s:I}",
				"ingest", ingest,
				"l2_hit", ratio(res->l2_hits, res->blocks),
				"l2_writes", (json_int_t)res->l2_writes)))
			o = (json_decref(o), NULL);
		return !o || json_array_append_new(jr, o);
	}
	printf("%-8s ", name);
	if (ingest)
		printf("%-8s ", ingest);
	printf("%10.4f %10.4f ", ratio(res->hits, res->blocks),
	       ratio(res->prefix_hits, res->blocks));
	if (isnan(g))
		printf("%10s", "-");
	else
		printf("%10.3f", g);
	if (ingest)
		printf(" %8.4f %10" PRIu64, ratio(res->l2_hits, res->blocks),
		       res->l2_writes);
	printf(" %10" PRIu64 " %8" PRIu64 " %8.2f\n", res->evictions,
	       res->cached, res->secs);
	fflush(stdout);
	return 0;
}

/*
 * One L1 capacity: every policy asked for (times every ingest mode when
 * there is an L2), plus LRU and Belady, the two ends of the gap, whatever
 * was asked. With L2, Belady gets one cache the size of both tiers (the
 * ceiling of any two-tier scheme) and the gap is taken against LRU with
 * the same ingest mode. Prints a table, or appends to jcaps.
 */
static int replay_capacity_run(const struct replay_trace *tr,
			       const struct replay_args *a, uint64_t cap,
			       json_t *jcaps)
{
	const char *const *names = policy_names();
	struct replay_result lru[REPLAY_INGEST_NMODES], bel, res;
	bool all = !strcmp(a->policy, "all");
	unsigned ingests = a->l2cap ? a->ingests : 1;
	json_t *jr = NULL;

	if (replay_belady(tr, cap + a->l2cap, &bel)) {
		fprintf(stderr, "kvfsctl replay: belady: out of memory\n");
		return 1;
	}
	for (int m = 0; m < REPLAY_INGEST_NMODES; m++)
		if ((ingests & (1u << m)) &&
		    run_policy(tr, a, "lru", cap, (enum replay_ingest)m, &lru[m]))
			return 1;
	if (jcaps) {
		json_t *jc = json_pack("{s:I, s:f, s:I, s:[]}",
			"capacity", (json_int_t)cap, "capacity_pct",
			tr->unique ? 100.0 * (double)cap / (double)tr->unique : 0.0,
			"l2_capacity", (json_int_t)a->l2cap, "results");

		if (!jc || json_array_append_new(jcaps, jc))
			return 1;
		jr = json_object_get(jc, "results");
	} else {
		printf("trace %s: %zu requests, %zu blocks, %" PRIu64 " unique; "
		       "capacity %" PRIu64 " blocks (%.2f%% of unique) x %" PRIu64
		       " B", a->path, tr->nreq, tr->nids, tr->unique, cap,
		       tr->unique ? 100.0 * (double)cap / (double)tr->unique : 0.0,
		       a->chunk);
		if (a->l2cap)
			printf("; L2 model %" PRIu64 " blocks (fifo)", a->l2cap);
		printf("\n%-8s ", "policy");
		if (a->l2cap)
			printf("%-8s ", "ingest");
		printf("%10s %10s %10s", "block_hit", "prefix_hit", "gap_closed");
		if (a->l2cap)
			printf(" %8s %10s", "l2_hit", "l2_writes");
		printf(" %10s %8s %8s\n", "evictions", "cached", "seconds");
	}
	for (const char *const *n = names; *n; n++) {
		if (!all && strcmp(a->policy, *n))
			continue;
		for (int m = 0; m < REPLAY_INGEST_NMODES; m++) {
			if (!(ingests & (1u << m)))
				continue;
			if (!strcmp(*n, "lru"))
				res = lru[m];
			else if (run_policy(tr, a, *n, cap,
					    (enum replay_ingest)m, &res))
				return 1;
			if (print_result(jr, *n, a->l2cap ? replay_ingest_name(
					 (enum replay_ingest)m) : NULL, &res,
					 gap_closed(&res, &lru[m], &bel)))
				return 1;
		}
	}
	if (all || !strcmp(a->policy, "belady")) {
		int m = __builtin_ctz(ingests);

		bel.l2_hits = bel.l2_writes = 0;
		if (print_result(jr, "belady", a->l2cap ? "-" : NULL, &bel,
				 gap_closed(&bel, &lru[m], &bel)))
			return 1;
	}
	return 0;
}

/* "evicted", "twice,hot", "each" (all four) into a bit set. */
static int parse_ingests(char *s, unsigned *out)
{
	char *save = NULL, *tok;

	*out = 0;
	if (!strcmp(s, "each")) {
		*out = (1u << REPLAY_INGEST_NMODES) - 1;
		return 0;
	}
	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		enum replay_ingest m;

		if (replay_ingest_parse(tok, &m))
			return -EINVAL;
		*out |= 1u << m;
	}
	return *out ? 0 : -EINVAL;
}

int ctl_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "capacity", required_argument, NULL, 'c' },
		{ "chunk-bytes", required_argument, NULL, 'b' },
		{ "l2-capacity", required_argument, NULL, 'l' },
		{ "ingest", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct replay_args a = { .chunk = 4096,
				 .ingests = 1u << REPLAY_INGEST_EVICTED };
	char *caps[REPLAY_MAX_CAPS], *capstr = NULL, *ingstr = NULL;
	const char *l2str = NULL;
	unsigned long long chunk;
	struct replay_trace tr = { 0 };
	json_t *doc = NULL, *jcaps = NULL;
	bool json = false, ingest_given;
	int opt, ncaps = 0, rc = 2;

	optind = 1;
	opterr = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			a.policy = optarg;
			break;
		case 'c':
			capstr = optarg;
			break;
		case 'b':
			if (ctl_parse_u64(optarg, &chunk) || chunk == 0 ||
			    chunk > (1ull << 30))
				return ctl_usage_err(&CMD, "bad --chunk-bytes '%s'",
							optarg);
			a.chunk = chunk;
			break;
		case 'l':
			l2str = optarg;
			break;
		case 'i':
			ingstr = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return ctl_help(&CMD);
		default:
			return ctl_usage_err(&CMD, NULL);
		}
	}
	if (!a.policy)
		return ctl_usage_err(&CMD, "--policy is required");
	if (!capstr)
		return ctl_usage_err(&CMD, "--capacity is required");
	if (optind >= argc)
		return ctl_usage_err(&CMD, "no trace file");
	if (optind + 1 < argc)
		return ctl_usage_err(&CMD, "one trace only");
	if (ingstr && !l2str)
		return ctl_usage_err(&CMD, "--ingest needs --l2-capacity");
	a.path = argv[optind];
	if (strcmp(a.policy, "all") && strcmp(a.policy, "belady") &&
	    !policy_find(a.policy)) {
		fprintf(stderr, "kvfsctl replay: unknown policy '%s'; valid:",
			a.policy);
		for (const char *const *n = policy_names(); *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, " belady all\n");
		return 2;
	}
	capstr = strdup(capstr);
	ingest_given = ingstr != NULL;
	ingstr = ingstr ? strdup(ingstr) : NULL;
	if (!capstr || (ingest_given && !ingstr)) {
		fprintf(stderr, "kvfsctl replay: out of memory\n");
		rc = 1;
		goto out;
	}
	if (replay_cap_list(capstr, caps, &ncaps)) {
		rc = ctl_usage_err(&CMD, "bad --capacity (at most %d, comma-separated)",
				      REPLAY_MAX_CAPS);
		goto out;
	}
	if (ingstr && parse_ingests(ingstr, &a.ingests)) {
		rc = ctl_usage_err(&CMD, "bad --ingest (evicted, hot, twice, all, "
				      "a comma list of them, or each)");
		goto out;
	}

	if (trace_load(a.path, &tr)) {
		rc = 1;
		goto out;
	}
	if (l2str && replay_capacity(l2str, tr.unique, &a.l2cap)) {
		rc = ctl_usage_err(&CMD, "bad --l2-capacity '%s' (blocks, or a "
				      "percentage of unique blocks)", l2str);
		goto out;
	}
	for (int i = 0; i < ncaps; i++) {
		uint64_t cap;

		if (replay_capacity(caps[i], tr.unique, &cap)) {
			rc = ctl_usage_err(&CMD, "bad --capacity '%s' (blocks, or a "
					      "percentage of unique blocks like "
					      "10%%)", caps[i]);
			goto out;
		}
		if (cap > UINT64_MAX / a.chunk) {
			rc = ctl_usage_err(&CMD, "capacity x chunk-bytes overflows");
			goto out;
		}
	}
	if (json) {
		doc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:[]}", "trace", a.path,
				"requests", (json_int_t)tr.nreq,
				"blocks", (json_int_t)tr.nids,
				"unique", (json_int_t)tr.unique,
				"chunk_bytes", (json_int_t)a.chunk, "capacities");
		if (!doc) {
			fprintf(stderr, "kvfsctl replay: out of memory\n");
			rc = 1;
			goto out;
		}
		jcaps = json_object_get(doc, "capacities");
	}
	rc = 0;
	for (int i = 0; i < ncaps && !rc; i++) {
		uint64_t cap;

		replay_capacity(caps[i], tr.unique, &cap);
		rc = replay_capacity_run(&tr, &a, cap, jcaps);
	}
	if (!rc && doc) {
		rc = ctl_json_out(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		doc = NULL; /* ctl_json_out dropped it */
	}
out:
	json_decref(doc);
	free(capstr);
	free(ingstr);
	free(tr.ids);
	free(tr.req);
	free(tr.uids);
	free(tr.dense);
	return rc;
}
