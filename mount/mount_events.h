/*
 * mount_events.h - kvfs-mount's KV-event options (events=, events_replay=,
 * node=, events_format=, events_hash=, events_buffer=): parsed into an
 * ev_config, and the publisher started in the daemon (after the fork:
 * ZeroMQ's threads do not survive one).
 */
#ifndef KVFS_MOUNT_EVENTS_H
#define KVFS_MOUNT_EVENTS_H

#include <stddef.h>

#include "events/events.h"

struct mount_events_opts {
	char *events, *events_replay, *node, *events_format, *events_hash,
		*events_buffer;
};

/* Checks the options and fills cfg (whose strings point into o). Returns 0
 * (cfg->endpoint NULL when events are off) or -1 after printing why.
 * Appends the effective settings to text (the .kvfs/config lines). */
int mount_events_config(const struct mount_events_opts *o,
			struct ev_config *cfg, char *text, size_t textlen);

/* Starts the publisher when cfg->endpoint is set (else *out = NULL). 0, or
 * -1 after printing "kvfs-mount: events=ENDPOINT: reason". */
int mount_events_start(const struct ev_config *cfg, struct ev_pub **out);

/* Frees the option strings. */
void mount_events_free(struct mount_events_opts *o);

#endif
