/*
 * ctl_score.c - `kvfsctl score --events EP1[,EP2...] [--replay R1[,R2...]]
 * [--warmup-ms MS] [--weights GPU=1,CPU=0.8,DISK=0.5,REMOTE=0.3] [--json]
 * < chains`: the reference consumer of KV events. It learns, per node,
 * which blocks are held in which medium (from the events of --warmup-ms,
 * after replaying each node's buffer when --replay is given), then scores
 * each chain of keys read from stdin (hex, one chain per line) the way a
 * router scores a prompt: the longest run of consecutive leading blocks the
 * node holds in any medium, each block weighted by its best medium.
 *
 * Blocks are matched on the low 64 bits of the key (what a uint64 event
 * hash carries, and what llm-d reduces a bytes hash to). Replayed batches
 * carry no topic (vLLM's replay protocol), so they count for the node of
 * the --events endpoint at the same position, and an AllBlocksCleared
 * among them clears that node's whole view.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "events/ev_encode.h"
#include "hash/htab.h"
#include "kvfs.h"
#include "mount/ctl.h"
#include "mount/ctl_evsub.h"

#define SCORE_EPS_MAX 64
#define SCORE_NS_MAX 256

struct block {
	struct htab_node node;
	uint64_t hash;
	uint8_t media; /* bit per enum ev_medium */
	uint16_t ns;   /* index in the node's ns names; 0 = unknown */
};

struct node {
	const char *ep;
	char name[256]; /* from the topics, else the endpoint */
	void *sub;
	struct htab blocks;
	char *ns[SCORE_NS_MAX];
	unsigned nns;
	uint16_t cur_ns; /* of the batch being applied */
};

static uint64_t hkey(uint64_t h)
{
	return htab_hash(0x5c0e, &h, sizeof(h));
}

static struct block *find(struct node *n, uint64_t h)
{
	struct htab_node *e;
	uint64_t k = hkey(h);

	htab_for_each_hash(&n->blocks, k, e) {
		struct block *b = container_of(e, struct block, node);
		if (b->hash == h)
			return b;
	}
	return NULL;
}

static uint16_t ns_index(struct node *n, const char *ns)
{
	for (unsigned i = 1; i < n->nns; i++)
		if (!strcmp(n->ns[i], ns))
			return (uint16_t)i;
	if (n->nns == 0)
		n->nns = 1; /* 0 is "unknown" */
	if (n->nns >= SCORE_NS_MAX)
		return 0;
	n->ns[n->nns] = strdup(ns);
	return n->ns[n->nns] ? (uint16_t)n->nns++ : 0;
}

static void clear(struct node *n, uint16_t ns)
{
	struct htab_node *e, *nx;
	uint64_t i;

	htab_for_each_safe(&n->blocks, i, e, nx) {
		struct block *b = container_of(e, struct block, node);
		if (ns && b->ns != ns)
			continue;
		htab_del(&n->blocks, e);
		free(b);
	}
}

static int apply(void *arg, const struct ev_dec_event *ev)
{
	struct node *n = arg;
	int m = ev->medium[0] ? ev_medium_parse(ev->medium) : -1;

	if (ev->kind == EV_CLEARED) {
		clear(n, n->cur_ns);
		return 0;
	}
	for (size_t i = 0; i < ev->nhashes; i++) {
		struct block *b = find(n, ev->hashes[i]);
		if (ev->kind == EV_STORED) {
			if (m < 0)
				m = EV_MEDIUM_GPU; /* vLLM's default */
			if (!b) {
				b = calloc(1, sizeof(*b));
				if (!b || htab_add(&n->blocks, &b->node,
						   hkey(ev->hashes[i]))) {
					free(b);
					return -ENOMEM;
				}
				b->hash = ev->hashes[i];
			}
			b->media |= (uint8_t)(1u << m);
			b->ns = n->cur_ns;
		} else if (b) {
			b->media &= m < 0 ? 0 : (uint8_t)~(1u << m);
			if (!b->media) {
				htab_del(&n->blocks, &b->node);
				free(b);
			}
		}
	}
	return 0;
}

static void take(struct node *n, struct evsub_msg *m)
{
	char *node, *ns;
	double ts;

	n->cur_ns = 0;
	if (!m->replayed && evsub_topic(m->topic, &node, &ns)) {
		snprintf(n->name, sizeof(n->name), "%s", node);
		n->cur_ns = ns_index(n, ns);
	}
	if (ev_decode_batch(m->payload, m->len, &ts, apply, n))
		fprintf(stderr, "kvfsctl score: %s: seq %" PRIu64 ": undecodable batch\n",
			n->ep, m->seq);
}

/* Splits a comma list in place. */
static int split(char *s, const char **out, int max)
{
	int n = 0;

	for (char *t = strtok(s, ","); t; t = strtok(NULL, ","))
		if (n < max)
			out[n++] = t;
		else
			return -1;
	return n;
}

static int parse_weights(char *s, double w[EV_MEDIUM_COUNT])
{
	for (char *t = strtok(s, ","); t; t = strtok(NULL, ",")) {
		char *eq = strchr(t, '='), *end;
		if (!eq)
			return -1;
		*eq = 0;
		int m = ev_medium_parse(t);
		double v = strtod(eq + 1, &end);
		if (m < 0 || end == eq + 1 || *end || !(v >= 0) || !isfinite(v))
			return -1;
		w[m] = v;
	}
	return 0;
}

/* Reads one chain (a line of hex keys; blank lines skipped, *line counts
 * every line read). 1 = a chain, 0 = EOF, -1 = bad. */
static int read_chain(FILE *f, uint64_t **keys, size_t *n, size_t *cap,
		      unsigned long long *line)
{
	char *buf = NULL;
	size_t bl = 0;
	ssize_t len;

	*n = 0;
	do {
		len = getline(&buf, &bl, f);
		if (len < 0) {
			free(buf);
			return 0;
		}
		(*line)++;
	} while (strspn(buf, " \t\r\n") == (size_t)len); /* blank lines */
	for (char *t = strtok(buf, " \t\r\n"); t; t = strtok(NULL, " \t\r\n")) {
		struct kvfs_key k;
		for (char *c = t; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		if (strlen(t) != KVFS_KEY_HEX_LEN ||
		    kvfs_key_parse(t, KVFS_KEY_HEX_LEN, &k)) {
			fprintf(stderr, "kvfsctl score: line %llu: bad key '%s' "
				"(32 hex digits)\n", *line, t);
			free(buf);
			return -1;
		}
		if (*n == *cap) {
			size_t nc = *cap ? 2 * *cap : 64;
			uint64_t *nk = realloc(*keys, nc * sizeof(*nk));
			if (!nk) {
				free(buf);
				return -1;
			}
			*keys = nk;
			*cap = nc;
		}
		uint64_t h = 0;
		for (int i = 8; i < 16; i++)
			h = h << 8 | k.b[i];
		(*keys)[(*n)++] = h;
	}
	free(buf);
	return 1;
}

static void score_chain(struct node *n, const uint64_t *keys, size_t nk,
			const double w[EV_MEDIUM_COUNT], unsigned long long chain,
			bool json)
{
	unsigned long long per[EV_MEDIUM_COUNT] = { 0 };
	size_t run = 0;
	double score = 0;

	for (; run < nk; run++) {
		struct block *b = find(n, keys[run]);
		if (!b || !b->media)
			break;
		int best = -1;
		for (int m = 0; m < EV_MEDIUM_COUNT; m++)
			if ((b->media & (1u << m)) && (best < 0 || w[m] > w[best]))
				best = m;
		per[best]++;
		score += w[best];
	}
	if (json) {
		json_t *o = json_pack("{s:I, s:o, s:I, s:f}", "chain",
				      (json_int_t)chain, "node",
				      ctl_json_str(n->name), "run",
				      (json_int_t)run, "score", score);
		json_t *t = json_object();
		for (int m = 0; m < EV_MEDIUM_COUNT; m++)
			json_object_set_new(t, ev_medium_name(m),
					    json_integer((json_int_t)per[m]));
		json_object_set_new(o, "by_medium", t);
		ctl_json_out(o, JSON_COMPACT);
		return;
	}
	printf("chain=%llu node=%s run=%zu score=%.3f", chain, n->name, run,
	       score);
	for (int m = 0; m < EV_MEDIUM_COUNT; m++)
		printf(" %s=%llu", ev_medium_name(m), per[m]);
	putchar('\n');
}

static const struct ctl_cmd CMD = {
	"score", "score --events EP1[,EP2...] [--replay R1[,R2...]] "
	"[--warmup-ms MS] [--weights GPU=1,CPU=0.8,DISK=0.5,REMOTE=0.3] "
	"[--json] < chains",
	"Learns from KV events which blocks each node holds, in which medium,\n"
	"then scores each chain of keys on stdin (hex, one chain a line) per\n"
	"node: the leading run held, each block weighted by its best medium.\n\n"
	"  --events EPS     the nodes' event endpoints, comma-separated\n"
	"  --replay EPS     their replay endpoints, one per --events endpoint\n"
	"  --warmup-ms MS   listen this long before scoring (default 1000)\n"
	"  --weights M=W,.. weight per medium (GPU, CPU, DISK, REMOTE)\n"
	"  --json           one JSON object a line\n",
};

int ctl_score(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "events", required_argument, NULL, 'e' },
		{ "replay", required_argument, NULL, 'r' },
		{ "warmup-ms", required_argument, NULL, 'w' },
		{ "weights", required_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double w[EV_MEDIUM_COUNT] = { 1.0, 0.8, 0.5, 0.3 };
	const char *eps[SCORE_EPS_MAX], *reps[SCORE_EPS_MAX];
	int neps = 0, nreps = 0, c, rc = 0;
	unsigned long long warmup = 1000;
	struct node *nodes = NULL;
	bool json = false;
	void *ctx;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e': neps = split(optarg, eps, SCORE_EPS_MAX); break;
		case 'r': nreps = split(optarg, reps, SCORE_EPS_MAX); break;
		case 'w':
			if (ctl_parse_count(optarg, &warmup))
				return ctl_usage_err(&CMD, "bad --warmup-ms '%s'",
						     optarg);
			break;
		case 'W':
			if (parse_weights(optarg, w))
				return ctl_usage_err(&CMD, "--weights is MEDIUM=W,... "
						     "with GPU, CPU, DISK, REMOTE "
						     "and W >= 0");
			break;
		case 'j': json = true; break;
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (optind != argc)
		return ctl_usage_err(&CMD, "unexpected '%s' (chains come on "
				     "stdin)", argv[optind]);
	if (neps <= 0 || nreps < 0)
		return ctl_usage_err(&CMD, "--events EP1[,EP2...] is required"
				     " (at most %d)", SCORE_EPS_MAX);
	if (nreps && nreps != neps)
		return ctl_usage_err(&CMD, "--replay needs one endpoint per "
				     "--events endpoint");
	nodes = calloc((size_t)neps, sizeof(*nodes));
	ctx = zmq_ctx_new();
	if (!nodes || !ctx) {
		perror("kvfsctl score");
		free(nodes);
		return 1;
	}
	for (int i = 0; i < neps; i++) {
		nodes[i].ep = eps[i];
		snprintf(nodes[i].name, sizeof(nodes[i].name), "%s", eps[i]);
		nodes[i].sub = evsub_open(ctx, "score", eps[i]);
		if (!nodes[i].sub) {
			rc = 1;
			goto out;
		}
	}
	usleep(200 * 1000); /* subscriptions reach the publishers */
	for (int i = 0; i < nreps; i++) {
		void *d = evsub_replay(ctx, "score", reps[i], 0);
		struct evsub_msg m;
		if (!d) {
			rc = 1;
			goto out;
		}
		for (;;) {
			int r = evsub_recv(d, true, 5000, &m);
			if (r == 0) {
				fprintf(stderr, "kvfsctl score: %s: no replay answer within 5 s\n",
					reps[i]);
				zmq_close(d);
				rc = 1;
				goto out;
			}
			if (r < 0)
				continue;
			if (!m.end)
				take(&nodes[i], &m);
			free(m.payload);
			if (m.end)
				break;
		}
		zmq_close(d);
	}
	fprintf(stderr, "kvfsctl score: listening for %llu ms\n", warmup);
	uint64_t end = evsub_after_ms(warmup);
	zmq_pollitem_t *items = calloc((size_t)neps, sizeof(*items));
	if (!items) {
		rc = 1;
		goto out;
	}
	for (int i = 0; i < neps; i++) {
		items[i].socket = nodes[i].sub;
		items[i].events = ZMQ_POLLIN;
	}
	for (uint64_t now; (now = evsub_now_ms()) < end;) {
		if (zmq_poll(items, neps, end - now > 1000 ? 1000 :
			     (long)(end - now)) <= 0)
			continue;
		for (int i = 0; i < neps; i++) {
			struct evsub_msg m;
			while (evsub_recv(nodes[i].sub, false, 0, &m) > 0) {
				take(&nodes[i], &m);
				free(m.payload);
			}
		}
	}
	free(items);

	uint64_t *keys = NULL;
	size_t nk = 0, cap = 0;
	unsigned long long chain = 0, line = 0;
	int r;
	while ((r = read_chain(stdin, &keys, &nk, &cap, &line)) > 0) {
		chain++;
		for (int i = 0; i < neps; i++)
			score_chain(&nodes[i], keys, nk, w, chain, json);
	}
	free(keys);
	if (r == 0 && ferror(stdin)) {
		fprintf(stderr, "kvfsctl score: stdin: %s\n", strerror(errno));
		rc = 1;
	}
	if (r < 0)
		rc = 1;
out:
	for (int i = 0; i < neps; i++) {
		if (nodes[i].sub)
			zmq_close(nodes[i].sub);
		clear(&nodes[i], 0);
		htab_free(&nodes[i].blocks);
		for (unsigned j = 0; j < nodes[i].nns; j++)
			free(nodes[i].ns[j]);
	}
	free(nodes);
	zmq_ctx_term(ctx);
	return rc;
}
