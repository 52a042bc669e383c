/*
 * ctl_events.c - `kvfsctl events ENDPOINT [--json] [--from SEQ --replay EP]
 * [--count N] [--duration-ms MS]`: subscribes to a kvfs (or vLLM)
 * KV-event publisher and prints one event per line, the operator's view.
 *
 * With --from, asks the ROUTER at --replay for the buffered batches from
 * SEQ on (after subscribing, so nothing falls between), prints them, then
 * the live ones, skipping sequence numbers already printed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "events/ev_encode.h"
#include "mount/ctl.h"
#include "mount/ctl_evsub.h"

struct pr {
	bool json;
	const struct evsub_msg *m;
	const char *node, *ns;
	double ts;
	unsigned long long printed, count;
};

static volatile sig_atomic_t stop;

static void on_sig(int sig)
{
	(void)sig;
	stop = 1;
}

/* A hash as hex: 16 digits for integers, the bytes for bin hashes. */
static void hash_hex(char out[33], uint64_t h, const uint8_t *raw, int rawlen)
{
	if (!rawlen) {
		snprintf(out, 33, "%016" PRIx64, h);
		return;
	}
	for (int i = 0; i < rawlen; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static int print_json(struct pr *p, const struct ev_dec_event *ev)
{
	json_t *o = json_object(), *hs = json_array();
	char hx[33];

	json_object_set_new(o, "seq", json_integer((json_int_t)p->m->seq));
	json_object_set_new(o, "ts", json_real(p->ts));
	if (p->node) {
		json_object_set_new(o, "node", ctl_json_str(p->node));
		json_object_set_new(o, "namespace", ctl_json_str(p->ns));
	}
	json_object_set_new(o, "replayed", json_boolean(p->m->replayed));
	json_object_set_new(o, "type", json_string(ev_kind_name(ev->kind)));
	if (ev->kind != EV_CLEARED) {
		for (size_t i = 0; i < ev->nhashes; i++) {
			hash_hex(hx, ev->hashes[i], ev->raw[i], ev->rawlen[i]);
			json_array_append_new(hs, json_string(hx));
		}
		json_object_set(o, "block_hashes", hs);
		json_object_set_new(o, "medium", ev->medium[0]
				    ? ctl_json_str(ev->medium) : json_null());
	}
	if (ev->kind == EV_STORED) {
		hash_hex(hx, ev->parent, ev->parent_raw, ev->parent_rawlen);
		json_object_set_new(o, "parent_block_hash", ev->has_parent
				    ? json_string(hx) : json_null());
		json_object_set_new(o, "block_size",
				    json_integer(ev->block_size));
	}
	json_decref(hs);
	return ctl_json_out(o, JSON_COMPACT) ? -EIO : 0;
}

static int print_event(void *arg, const struct ev_dec_event *ev)
{
	struct pr *p = arg;
	char hx[33];

	if (p->count && p->printed >= p->count)
		return 0;
	p->printed++;
	if (p->json)
		return print_json(p, ev);
	printf("%" PRIu64 " %s%s %s", p->m->seq, p->m->replayed ? "(replay) " : "",
	       p->node ? p->ns : "-", ev_kind_name(ev->kind));
	if (ev->kind != EV_CLEARED) {
		printf(" medium=%s hashes=", ev->medium[0] ? ev->medium : "-");
		for (size_t i = 0; i < ev->nhashes; i++) {
			hash_hex(hx, ev->hashes[i], ev->raw[i], ev->rawlen[i]);
			printf("%s%s", i ? "," : "", hx);
		}
	}
	if (ev->kind == EV_STORED) {
		hash_hex(hx, ev->parent, ev->parent_raw, ev->parent_rawlen);
		printf(" parent=%s block_size=%" PRId64,
		       ev->has_parent ? hx : "-", ev->block_size);
	}
	if (p->node)
		printf(" node=%s", p->node);
	putchar('\n');
	return 0;
}

/* Prints one message's events; false when it could not be decoded. */
static bool show(struct pr *p, struct evsub_msg *m)
{
	char *node = NULL, *ns = NULL;
	int rc;

	p->m = m;
	p->node = p->ns = NULL;
	if (!m->replayed && evsub_topic(m->topic, &node, &ns)) {
		p->node = node;
		p->ns = ns;
	}
	rc = ev_decode_batch(m->payload, m->len, &p->ts, print_event, p);
	if (rc)
		fprintf(stderr, "kvfsctl events: seq %" PRIu64 ": undecodable batch: %s\n",
			m->seq, strerror(-rc));
	fflush(stdout);
	return rc == 0;
}

static const struct ctl_cmd CMD = {
	"events", "events [--json] [--from SEQ --replay ENDPOINT] [--count N] "
	"[--duration-ms MS] ENDPOINT",
	"Subscribes to the KV-event publisher at ENDPOINT (kvfs or vLLM) and\n"
	"prints one event a line.\n\n"
	"  --json             one JSON object a line\n"
	"  --from SEQ         first print the buffered batches from SEQ on,\n"
	"                     asked of the ROUTER at --replay ENDPOINT\n"
	"  --replay ENDPOINT  the publisher's replay endpoint\n"
	"  --count N          stop after N events\n"
	"  --duration-ms MS   stop after MS milliseconds\n",
};

int ctl_events(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "from", required_argument, NULL, 'f' },
		{ "replay", required_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'c' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct pr p = { 0 };
	unsigned long long from = 0, dur = 0;
	const char *replay_ep = NULL;
	bool have_from = false, have_last = false;
	uint64_t last = 0, deadline = 0;
	void *ctx, *sub, *dealer = NULL;
	struct evsub_msg m;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': p.json = true; break;
		case 'r': replay_ep = optarg; break;
		case 'f':
		case 'c':
		case 'd': {
			unsigned long long v;
			if (ctl_parse_count(optarg, &v))
				return ctl_usage_err(&CMD, "bad number '%s'",
						     optarg);
			if (c == 'f') {
				from = v;
				have_from = true;
			} else if (c == 'c') {
				p.count = v;
			} else {
				dur = v;
			}
			break;
		}
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (have_from && !replay_ep)
		return ctl_usage_err(&CMD, "--from needs --replay ENDPOINT");
	if (optind != argc - 1)
		return ctl_usage_err(&CMD, optind < argc ? "one ENDPOINT only" :
				     "ENDPOINT is required");
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	ctx = zmq_ctx_new();
	sub = evsub_open(ctx, "events", argv[optind]);
	if (!sub) {
		zmq_ctx_term(ctx);
		return 1;
	}
	if (dur)
		deadline = evsub_after_ms(dur);
	if (have_from) {
		/* let the subscription reach the publisher first */
		usleep(200 * 1000);
		dealer = evsub_replay(ctx, "events", replay_ep, from);
		if (!dealer) {
			rc = 1;
			goto out;
		}
		for (;;) {
			int r = evsub_recv(dealer, true, 5000, &m);
			if (r == 0) {
				fprintf(stderr, "kvfsctl events: %s: no replay answer within 5 s\n",
					replay_ep);
				rc = 1;
				goto out;
			}
			if (r < 0)
				continue;
			if (m.end) {
				free(m.payload);
				break;
			}
			show(&p, &m);
			last = m.seq;
			have_last = true;
			free(m.payload);
		}
	}
	while (!stop && (!p.count || p.printed < p.count)) {
		int tmo = 200;
		if (deadline) {
			uint64_t now = evsub_now_ms();
			if (now >= deadline)
				break;
			if (deadline - now < 200)
				tmo = (int)(deadline - now);
		}
		int r = evsub_recv(sub, false, tmo, &m);
		if (r <= 0)
			continue;
		if (!have_last || m.seq > last)
			show(&p, &m);
		free(m.payload);
	}
out:
	if (dealer)
		zmq_close(dealer);
	zmq_close(sub);
	zmq_ctx_term(ctx);
	return rc;
}
