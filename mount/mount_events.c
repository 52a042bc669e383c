/*
 * mount_events.c - kvfs-mount's KV-event options (see mount_events.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount/mount_events.h"

static int bad(const char *name, const char *v, const char *want)
{
	fprintf(stderr, "kvfs-mount: bad %s '%s' (%s)\n", name, v ? v : "",
		want);
	return -1;
}

int mount_events_config(const struct mount_events_opts *o,
			struct ev_config *cfg, char *text, size_t textlen)
{
	size_t tl = strlen(text);

	ev_config_default(cfg);
	if (!o->events) {
		if (o->events_replay || o->node || o->events_format ||
		    o->events_hash || o->events_buffer) {
			fprintf(stderr, "kvfs-mount: events_replay, node, "
				"events_format, events_hash and events_buffer "
				"need events=ENDPOINT\n");
			return -1;
		}
		return 0;
	}
	if (!*o->events)
		return bad("events", o->events, "an endpoint such as tcp://*:5557 "
			   "or ipc:///run/kvfs/events.sock");
	if (o->events_replay && !*o->events_replay)
		return bad("events_replay", o->events_replay, "an endpoint");
	if (o->node && (!*o->node || strchr(o->node, '@') ||
			strlen(o->node) > 64))
		return bad("node", o->node, "1..64 bytes without '@'");
	if (o->events_format) {
		if (!strcmp(o->events_format, "array"))
			cfg->format = EV_FORMAT_ARRAY;
		else if (strcmp(o->events_format, "map"))
			return bad("events_format", o->events_format,
				   "map or array");
	}
	if (o->events_hash) {
		if (!strcmp(o->events_hash, "bytes"))
			cfg->hash = EV_HASH_BYTES;
		else if (strcmp(o->events_hash, "u64"))
			return bad("events_hash", o->events_hash, "u64 or bytes");
	}
	if (o->events_buffer) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(o->events_buffer, &end, 10);
		if (errno || end == o->events_buffer || *end ||
		    o->events_buffer[0] == '-' || v < 1 || v > 10000000)
			return bad("events_buffer", o->events_buffer,
				   "batches, 1 to 10000000");
		cfg->buffer = (uint32_t)v;
	}
	cfg->endpoint = o->events;
	cfg->replay_endpoint = o->events_replay;
	cfg->node = o->node;
	if (tl < textlen)
		snprintf(text + tl, textlen - tl,
			 "events=%s\nevents_replay=%s\nnode=%s\n"
			 "events_format=%s\nevents_hash=%s\nevents_buffer=%u\n",
			 o->events, o->events_replay ? o->events_replay : "",
			 o->node ? o->node : "",
			 cfg->format == EV_FORMAT_ARRAY ? "array" : "map",
			 cfg->hash == EV_HASH_BYTES ? "bytes" : "u64",
			 cfg->buffer);
	return 0;
}

static void log_stderr(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "kvfs-mount: %s\n", msg);
}

int mount_events_start(const struct ev_config *cfg, struct ev_pub **out)
{
	struct ev_config c = *cfg;
	char err[768];

	*out = NULL;
	if (!c.endpoint)
		return 0;
	if (!c.log)
		c.log = log_stderr;
	if (ev_pub_create(&c, out, err, sizeof(err))) {
		fprintf(stderr, "kvfs-mount: %s\n", err);
		return -1;
	}
	return 0;
}

void mount_events_free(struct mount_events_opts *o)
{
	char **s[] = { &o->events, &o->events_replay, &o->node,
		       &o->events_format, &o->events_hash, &o->events_buffer };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		free(*s[i]);
		*s[i] = NULL;
	}
}
