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
#include <stdarg.h>
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
#include "tier/policy.h"
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
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

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
	if (tr->nids) {
		uint64_t *s = malloc(tr->nids * sizeof(*s));

		if (!s) {
			fprintf(stderr, "kvfsctl replay: out of memory\n");
			return -ENOMEM;
		}
		memcpy(s, tr->ids, tr->nids * sizeof(*s));
		qsort(s, tr->nids, sizeof(*s), cmp_u64);
		tr->unique = 1;
		for (size_t i = 1; i < tr->nids; i++)
			tr->unique += s[i] != s[i - 1];
		free(s);
	}
	return 0;
}

/* ------------------------------------------------------------- the run */

/* The block's key: the id as 16 big-endian bytes. */
static void replay_key(uint64_t id, struct kvfs_key *k)
{
	memset(k->b, 0, 8);
	for (int i = 0; i < 8; i++)
		k->b[8 + i] = (uint8_t)(id >> (56 - 8 * i));
}

static int replay_one(const struct replay_trace *tr, const char *policy,
		      uint64_t capacity, uint64_t chunk,
		      struct replay_result *res)
{
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
			found[i] = 1;
			res->hits++;
			res->prefix_hits += leading;
		}
		res->blocks += n;

		for (size_t i = 0; i < n; i++) {
			struct tier_wr *w;

			if (found[i])
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
	rc = 0;
out_tier:
	tier_destroy(t);
out_free:
	free(buf);
	free(found);
	return rc;
}

/* ------------------------------------------------------------ commands */

#define REPLAY_SYNOPSIS "replay --policy P|all --capacity C[,C...] " \
	"[--chunk-bytes B] [--json] TRACE.jsonl"
#define REPLAY_MAX_CAPS 16

/* The usage on stdout (--help: exit 0) or, after a reason, on stderr
 * (exit 2); the shape of ctl.h's convention. */
static int replay_help(void)
{
	const char *const *n;

	printf("usage: kvfsctl " REPLAY_SYNOPSIS "\n\n"
	       "  --policy P         an engine policy, belady (the offline optimum) or all\n"
	       "  --capacity C       L1 room in blocks, or a percentage of the trace's\n"
	       "                     unique blocks (10%%); a comma list runs each\n"
	       "  --chunk-bytes B    chunk size in the arena (default 4096)\n"
	       "  --json             one JSON document instead of the tables\n"
	       "  -h, --help         print this help and exit\n"
	       "policies:");
	for (n = policy_names(); *n; n++)
		printf(" %s", *n);
	printf(" belady all\n");
	return 0;
}

static int replay_usage_err(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static int replay_usage_err(const char *fmt, ...)
{
	if (fmt) {
		va_list ap;

		fprintf(stderr, "kvfsctl replay: ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fprintf(stderr, "usage: kvfsctl " REPLAY_SYNOPSIS "\n"
		"Try 'kvfsctl replay --help' for more information.\n");
	return 2;
}

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

/* One capacity: every policy asked for, plus LRU and Belady (the two ends
 * of the gap) whatever was asked. Prints a table, or appends to jcaps. */
static int replay_capacity_run(const struct replay_trace *tr,
			       const char *path, const char *policy,
			       uint64_t cap, uint64_t chunk, json_t *jcaps)
{
	const char *const *names = policy_names();
	struct replay_result lru, bel, res;
	json_t *jc = NULL, *jr = NULL;
	bool all = !strcmp(policy, "all");

	if (replay_one(tr, "lru", cap, chunk, &lru))
		return 1;
	if (replay_belady(tr, cap, &bel)) {
		fprintf(stderr, "kvfsctl replay: belady: out of memory\n");
		return 1;
	}
	if (jcaps) {
		jc = json_pack("{s:I, s:f, s:[]}", "capacity", (json_int_t)cap,
			       "capacity_pct", tr->unique ? 100.0 * (double)cap /
			       (double)tr->unique : 0.0, "results");
		if (!jc || json_array_append_new(jcaps, jc))
			return 1;
		jr = json_object_get(jc, "results");
	} else {
		printf("trace %s: %zu requests, %zu blocks, %" PRIu64 " unique; "
		       "capacity %" PRIu64 " blocks (%.2f%% of unique) x %" PRIu64
		       " B\n", path, tr->nreq, tr->nids, tr->unique, cap,
		       tr->unique ? 100.0 * (double)cap / (double)tr->unique : 0.0,
		       chunk);
		printf("%-8s %10s %10s %10s %10s %8s %8s\n", "policy", "block_hit",
		       "prefix_hit", "gap_closed", "evictions", "cached",
		       "seconds");
	}
	for (const char *const *n = names;; n++) {
		const char *name = *n ? *n : "belady";
		double g;

		if (!all && strcmp(policy, name)) {
			if (!*n)
				break;
			continue;
		}
		if (!*n)
			res = bel;
		else if (!strcmp(name, "lru"))
			res = lru;
		else if (replay_one(tr, name, cap, chunk, &res))
			return 1;
		g = gap_closed(&res, &lru, &bel);
		if (jr) {
			json_t *o = json_pack("{s:s, s:f, s:f, s:o, s:I, s:I, s:f}",
				"policy", name,
				"block_hit", ratio(res.hits, res.blocks),
				"prefix_hit", ratio(res.prefix_hits, res.blocks),
				"gap_closed", isnan(g) ? json_null() : json_real(g),
				"evictions", (json_int_t)res.evictions,
				"cached", (json_int_t)res.cached,
				"seconds", res.secs);

			if (!o || json_array_append_new(jr, o))
				return 1;
		} else {
			printf("%-8s %10.4f %10.4f ", name,
			       ratio(res.hits, res.blocks),
			       ratio(res.prefix_hits, res.blocks));
			if (isnan(g))
				printf("%10s", "-");
			else
				printf("%10.3f", g);
			printf(" %10" PRIu64 " %8" PRIu64 " %8.2f\n",
			       res.evictions, res.cached, res.secs);
			fflush(stdout);
		}
		if (!*n)
			break;
	}
	return 0;
}

int ctl_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "capacity", required_argument, NULL, 'c' },
		{ "chunk-bytes", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *policy = NULL, *path;
	char *caps[REPLAY_MAX_CAPS], *capstr = NULL;
	unsigned long long chunk = 4096;
	struct replay_trace tr = { 0 };
	json_t *doc = NULL, *jcaps = NULL;
	bool json = false;
	int opt, ncaps = 0, rc = 2;

	optind = 1;
	opterr = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			policy = optarg;
			break;
		case 'c':
			capstr = optarg;
			break;
		case 'b':
			if (ctl_parse_u64(optarg, &chunk) || chunk == 0 ||
			    chunk > (1ull << 30))
				return replay_usage_err("bad --chunk-bytes '%s'",
							optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return replay_help();
		default:
			return replay_usage_err(NULL);
		}
	}
	if (!policy)
		return replay_usage_err("--policy is required");
	if (!capstr)
		return replay_usage_err("--capacity is required");
	if (optind >= argc)
		return replay_usage_err("no trace file");
	if (optind + 1 < argc)
		return replay_usage_err("one trace only");
	path = argv[optind];
	if (strcmp(policy, "all") && strcmp(policy, "belady") &&
	    !policy_find(policy)) {
		fprintf(stderr, "kvfsctl replay: unknown policy '%s'; valid:", policy);
		for (const char *const *n = policy_names(); *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, " belady all\n");
		return 2;
	}
	capstr = strdup(capstr);
	if (!capstr) {
		fprintf(stderr, "kvfsctl replay: out of memory\n");
		return 1;
	}
	if (replay_cap_list(capstr, caps, &ncaps)) {
		rc = replay_usage_err("bad --capacity (at most %d, comma-separated)",
				      REPLAY_MAX_CAPS);
		goto out;
	}

	if (trace_load(path, &tr)) {
		rc = 1;
		goto out;
	}
	if (json) {
		doc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:[]}", "trace", path,
				"requests", (json_int_t)tr.nreq,
				"blocks", (json_int_t)tr.nids,
				"unique", (json_int_t)tr.unique,
				"chunk_bytes", (json_int_t)chunk, "capacities");
		if (!doc) {
			fprintf(stderr, "kvfsctl replay: out of memory\n");
			rc = 1;
			goto out;
		}
		jcaps = json_object_get(doc, "capacities");
	}
	for (int i = 0; i < ncaps; i++) {
		uint64_t cap;

		if (replay_capacity(caps[i], tr.unique, &cap)) {
			rc = replay_usage_err("bad --capacity '%s' (blocks, or a "
					      "percentage of unique blocks like "
					      "10%%)", caps[i]);
			goto out;
		}
		if (cap > UINT64_MAX / chunk) {
			rc = replay_usage_err("capacity x chunk-bytes overflows");
			goto out;
		}
	}
	rc = 0;
	for (int i = 0; i < ncaps && !rc; i++) {
		uint64_t cap;

		replay_capacity(caps[i], tr.unique, &cap);
		rc = replay_capacity_run(&tr, path, policy, cap, chunk, jcaps);
	}
	if (!rc && doc) {
		char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
				     JSON_ENSURE_ASCII | JSON_REAL_PRECISION(6));

		if (!s) {
			fprintf(stderr, "kvfsctl replay: out of memory\n");
			rc = 1;
		} else {
			puts(s);
			free(s);
		}
	}
out:
	json_decref(doc);
	free(capstr);
	free(tr.ids);
	free(tr.req);
	return rc;
}
