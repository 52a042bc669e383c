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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfs.h"
#include "mount/ctl.h"
#include "tier/l1_alloc.h"
#include "tier/policy.h"
#include "tier/tier.h"

#define REPLAY_JSON_DEPTH 64 /* nesting of values we skip over */

struct replay_trace {
	uint64_t *ids;    /* every request's hash_ids, back to back */
	size_t nids, ids_cap;
	size_t *req;      /* request i is ids[req[i] .. req[i + 1]) */
	size_t nreq, req_cap;
	uint64_t unique;  /* distinct ids */
};

/* ------------------------------------------------------- trace parsing */

/* A cursor over one line; why is set on the first error. */
struct jcur {
	const char *p, *end, *start;
	const char *why;
};

static void j_ws(struct jcur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\r' || *c->p == '\n'))
		c->p++;
}

static int j_fail(struct jcur *c, const char *why)
{
	if (!c->why)
		c->why = why;
	return -EINVAL;
}

/* Skips a string; key and klen get its raw bytes (escapes not decoded). */
static int j_string(struct jcur *c, const char **key, size_t *klen)
{
	const char *s;

	if (c->p >= c->end || *c->p != '"')
		return j_fail(c, "expected a string");
	s = ++c->p;
	while (c->p < c->end && *c->p != '"') {
		if ((unsigned char)*c->p < 0x20)
			return j_fail(c, "control character in a string");
		if (*c->p == '\\') {
			c->p++;
			if (c->p >= c->end)
				break;
		}
		c->p++;
	}
	if (c->p >= c->end)
		return j_fail(c, "unterminated string");
	if (key) {
		*key = s;
		*klen = (size_t)(c->p - s);
	}
	c->p++;
	return 0;
}

static int j_value(struct jcur *c, int depth);

static int j_number(struct jcur *c)
{
	const char *s = c->p;

	while (c->p < c->end && strchr("+-0123456789.eE", *c->p))
		c->p++;
	if (c->p == s)
		return j_fail(c, "expected a value");
	return 0;
}

static int j_literal(struct jcur *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n))
		return j_fail(c, "expected a value");
	c->p += n;
	return 0;
}

/* Skips a container; open is '[' or '{'. */
static int j_container(struct jcur *c, int depth)
{
	char close = *c->p == '[' ? ']' : '}';
	bool obj = close == '}';

	if (depth > REPLAY_JSON_DEPTH)
		return j_fail(c, "nested too deeply");
	c->p++;
	j_ws(c);
	if (c->p < c->end && *c->p == close) {
		c->p++;
		return 0;
	}
	for (;;) {
		if (obj) {
			if (j_string(c, NULL, NULL))
				return -EINVAL;
			j_ws(c);
			if (c->p >= c->end || *c->p != ':')
				return j_fail(c, "expected ':'");
			c->p++;
			j_ws(c);
		}
		if (j_value(c, depth + 1))
			return -EINVAL;
		j_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			j_ws(c);
			continue;
		}
		if (c->p < c->end && *c->p == close) {
			c->p++;
			return 0;
		}
		return j_fail(c, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int j_value(struct jcur *c, int depth)
{
	if (c->p >= c->end)
		return j_fail(c, "expected a value");
	switch (*c->p) {
	case '"': return j_string(c, NULL, NULL);
	case '[': case '{': return j_container(c, depth);
	case 't': return j_literal(c, "true");
	case 'f': return j_literal(c, "false");
	case 'n': return j_literal(c, "null");
	default: return j_number(c);
	}
}

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

/* "hash_ids": an array of non-negative integers, appended to tr->ids. */
static int j_hash_ids(struct jcur *c, struct replay_trace *tr)
{
	if (c->p >= c->end || *c->p != '[')
		return j_fail(c, "hash_ids is not an array");
	c->p++;
	j_ws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
		return 0;
	}
	for (;;) {
		uint64_t v = 0;
		const char *s = c->p;

		while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
			unsigned d = (unsigned)(*c->p - '0');

			if (v > (UINT64_MAX - d) / 10)
				return j_fail(c, "hash id out of range");
			v = v * 10 + d;
			c->p++;
		}
		if (c->p == s || (c->p < c->end && strchr(".eE", *c->p)))
			return j_fail(c, "hash_ids must hold non-negative integers");
		if (trace_push_id(tr, v))
			return j_fail(c, "out of memory");
		j_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			j_ws(c);
			continue;
		}
		if (c->p < c->end && *c->p == ']') {
			c->p++;
			return 0;
		}
		return j_fail(c, "expected ',' or ']' in hash_ids");
	}
}

/* One line: an object with a "hash_ids" member (other members skipped, in
 * any order). On success a request is appended to tr. */
static int trace_line(struct replay_trace *tr, const char *line, size_t len,
		      const char **why, size_t *col)
{
	struct jcur c = { .p = line, .end = line + len, .start = line };
	size_t mark = tr->nids;
	bool seen = false;

	j_ws(&c);
	if (c.p >= c.end || *c.p != '{') {
		j_fail(&c, "expected a JSON object");
		goto fail;
	}
	c.p++;
	j_ws(&c);
	if (c.p < c.end && *c.p == '}') {
		c.p++;
		goto done;
	}
	for (;;) {
		const char *k;
		size_t kl;

		if (j_string(&c, &k, &kl))
			goto fail;
		j_ws(&c);
		if (c.p >= c.end || *c.p != ':') {
			j_fail(&c, "expected ':'");
			goto fail;
		}
		c.p++;
		j_ws(&c);
		if (kl == 8 && !memcmp(k, "hash_ids", 8)) {
			if (seen) {
				j_fail(&c, "hash_ids given twice");
				goto fail;
			}
			seen = true;
			if (j_hash_ids(&c, tr))
				goto fail;
		} else if (j_value(&c, 1)) {
			goto fail;
		}
		j_ws(&c);
		if (c.p < c.end && *c.p == ',') {
			c.p++;
			j_ws(&c);
			continue;
		}
		if (c.p < c.end && *c.p == '}') {
			c.p++;
			break;
		}
		j_fail(&c, "expected ',' or '}'");
		goto fail;
	}
done:
	j_ws(&c);
	if (c.p != c.end) {
		j_fail(&c, "text after the object");
		goto fail;
	}
	if (!seen) {
		c.p = line;
		j_fail(&c, "no \"hash_ids\" member");
		goto fail;
	}
	if (tr->nreq + 1 >= tr->req_cap) {
		size_t cap = tr->req_cap ? tr->req_cap * 2 : 1024;
		size_t *n = realloc(tr->req, cap * sizeof(*n));

		if (!n) {
			j_fail(&c, "out of memory");
			goto fail;
		}
		tr->req = n;
		tr->req_cap = cap;
	}
	tr->req[tr->nreq++] = mark;
	tr->req[tr->nreq] = tr->nids;
	return 0;
fail:
	tr->nids = mark;
	*why = c.why;
	*col = (size_t)(c.p - line) + 1;
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

struct replay_result {
	uint64_t blocks, hits, prefix_hits, evictions, cached;
	double secs;
};

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

static void replay_usage(FILE *f)
{
	const char *const *n;

	fprintf(f, "usage: kvfsctl replay --policy P|all --capacity N|P%% "
		"[--chunk-bytes B] TRACE.jsonl\n  policies:");
	for (n = policy_names(); *n; n++)
		fprintf(f, " %s", *n);
	fprintf(f, " all\n");
}

/* "--opt V" or "--opt=V"; advances *i past what it used. */
static const char *replay_opt(int argc, char **argv, int *i, const char *opt)
{
	size_t n = strlen(opt);

	if (strncmp(argv[*i], opt, n))
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] == '\0' && *i + 1 < argc)
		return argv[++*i];
	return NULL;
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

int ctl_replay(int argc, char **argv)
{
	const char *policy = NULL, *capacity = NULL, *path = NULL, *v;
	const char *const *names = policy_names();
	unsigned long long chunk = 4096;
	struct replay_trace tr = { 0 };
	uint64_t cap;
	int rc = 2;

	for (int i = 1; i < argc; i++) {
		if ((v = replay_opt(argc, argv, &i, "--policy"))) {
			policy = v;
		} else if ((v = replay_opt(argc, argv, &i, "--capacity"))) {
			capacity = v;
		} else if ((v = replay_opt(argc, argv, &i, "--chunk-bytes"))) {
			if (ctl_parse_u64(v, &chunk) || chunk == 0 ||
			    chunk > (1ull << 30)) {
				fprintf(stderr, "kvfsctl replay: bad --chunk-bytes '%s'\n", v);
				return 2;
			}
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			replay_usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			fprintf(stderr, "kvfsctl replay: unknown or incomplete option '%s'\n",
				argv[i]);
			replay_usage(stderr);
			return 2;
		} else if (!path) {
			path = argv[i];
		} else {
			fprintf(stderr, "kvfsctl replay: one trace only\n");
			return 2;
		}
	}
	if (!policy || !capacity || !path) {
		replay_usage(stderr);
		return 2;
	}
	if (strcmp(policy, "all") && !policy_find(policy)) {
		fprintf(stderr, "kvfsctl replay: unknown policy '%s'; valid:", policy);
		for (const char *const *n = names; *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, " all\n");
		return 2;
	}

	if (trace_load(path, &tr)) {
		rc = 1;
		goto out;
	}
	if (replay_capacity(capacity, tr.unique, &cap)) {
		fprintf(stderr, "kvfsctl replay: bad --capacity '%s' (blocks, "
			"or a percentage of unique blocks like 10%%)\n", capacity);
		goto out;
	}
	if (cap > UINT64_MAX / chunk) {
		fprintf(stderr, "kvfsctl replay: capacity x chunk-bytes overflows\n");
		goto out;
	}

	printf("trace %s: %zu requests, %zu blocks, %" PRIu64 " unique; "
	       "capacity %" PRIu64 " blocks (%.2f%% of unique) x %llu B\n",
	       path, tr.nreq, tr.nids, tr.unique, cap,
	       tr.unique ? 100.0 * (double)cap / (double)tr.unique : 0.0, chunk);
	printf("%-8s %10s %10s %10s %8s %8s\n", "policy", "block_hit",
	       "prefix_hit", "evictions", "cached", "seconds");
	fflush(stdout);
	rc = 0;
	for (const char *const *n = names; *n; n++) {
		struct replay_result res;

		if (strcmp(policy, "all") && strcmp(policy, *n))
			continue;
		if (replay_one(&tr, *n, cap, chunk, &res)) {
			rc = 1;
			break;
		}
		printf("%-8s %10.4f %10.4f %10" PRIu64 " %8" PRIu64 " %8.2f\n", *n,
		       res.blocks ? (double)res.hits / (double)res.blocks : 0.0,
		       res.blocks ? (double)res.prefix_hits / (double)res.blocks : 0.0,
		       res.evictions, res.cached, res.secs);
		fflush(stdout);
	}
out:
	free(tr.ids);
	free(tr.req);
	return rc;
}
