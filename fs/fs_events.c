/*
 * fs_events.c - the engine's event sink (tier/tier_events.h) to the KV
 * event publisher (events/events.h), and the publisher's counters in
 * .kvfs/stats and .kvfs/metrics.
 *
 * The publisher belongs to the caller of fs_create (fs_config.events,
 * NULL = events off); fs only posts to it. The sink runs under tier.lock:
 * ev_post copies the event into a bounded queue and returns, dropping (and
 * counting) it when the queue is full, so no FUSE request ever waits on a
 * subscriber.
 *
 * Media: L1 is "GPU" when the arena is CUDA memory, else "CPU" (host and
 * pinned host memory, as vLLM's CPU offload names it); L2 is "DISK"; L3
 * (Redis, shared by every node: TIER_EV_L3) is "REMOTE", and its events
 * go on the shared tier's topic, kv@SHARED_STORAGE@<namespace>
 * (events.h): each node announces the L3 stores and deletions it makes,
 * and `kvfsctl l3 drop` an AllBlocksCleared there (fs_events_l3_dropped).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "fs/fs_i.h"
#include "tier/tier_events.h"

struct fs_events {
	struct fs *fs;
	struct ev_pub *pub;
	enum ev_medium l1; /* set by fs_events_start, before any event */
	/* fs_events_unmount: the namespaces, cleared after tier_destroy
	 * (whose flush_on_exit demotions are events too) */
	uint32_t *ids;
	char (*names)[KVFS_NS_NAME_MAX + 1];
	size_t nnames;
};

static void sink(void *arg, const struct tier_event *te)
{
	struct fs_events *fe = arg;
	struct ev_event e;
	uint64_t h;

	memset(&e, 0, offsetof(struct ev_event, ns));
	e.kind = te->kind == TIER_EV_STORED ? EV_STORED :
		 te->kind == TIER_EV_REMOVED ? EV_REMOVED : EV_CLEARED;
	e.medium = te->where == TIER_L1 ? fe->l1 :
		   te->where == TIER_L2 ? EV_MEDIUM_DISK : EV_MEDIUM_REMOTE;
	/* what this node stored in or deleted from L3 is news about the
	 * shared tier: any node can fetch it */
	e.shared = te->where == TIER_EV_L3;
	e.block_size = te->chunk_tokens;
	if (te->key)
		e.key = *te->key;
	/* a path namespace's file named by an engine's block hash reports
	 * that hash (its low 64 bits, as the key's last 8 bytes) */
	if (te->key && fs_path_event_hash(fe->fs, te->ns, te->key, &h)) {
		memset(e.key.b, 0, 8);
		for (int i = 15; i >= 8; i--, h >>= 8)
			e.key.b[i] = (uint8_t)h;
	}
	if (te->parent) {
		e.has_parent = 1;
		e.parent = *te->parent;
	}
	snprintf(e.ns, sizeof(e.ns), "%s", te->ns_name ? te->ns_name : "");
	/* The mount's announcement of what L2 recovery found may be millions
	 * of chunks: it waits for room (no request can be waiting yet).
	 * Otherwise a full queue drops the event, counted there. */
	if (te->why == TIER_EV_RECOVER)
		ev_post_wait(fe->pub, &e, 10000);
	else
		ev_post(fe->pub, &e);
}

int fs_events_init(struct fs *fs, struct tier_config *tc)
{
	struct fs_events *fe;

	if (!fs->cfg.events)
		return 0;
	fe = calloc(1, sizeof(*fe));
	if (!fe)
		return -ENOMEM;
	fe->fs = fs;
	fe->pub = fs->cfg.events;
	fe->l1 = EV_MEDIUM_CPU;
	fs->events = fe;
	tc->events.event = sink;
	tc->events.arg = fe;
	return 0;
}

void fs_events_start(struct fs *fs)
{
	struct tier_arena_info ai;

	if (!fs->events)
		return;
	tier_arena_info(fs->tier, &ai);
	/* by backend name: "cuda" is device memory; "host" and "pinned"
	 * (page-locked host memory) are vLLM's CPU */
	fs->events->l1 = ai.backend && !strcmp(ai.backend, "cuda")
			 ? EV_MEDIUM_GPU : EV_MEDIUM_CPU;
	tier_events_start(fs->tier);
}

void fs_events_unmount(struct fs *fs)
{
	struct fs_events *fe = fs->events;
	long n;

	if (!fe)
		return;
	/* the names now: the engine and its namespaces go next */
	n = tier_ns_list(fs->tier, NULL, 0);
	if (n <= 0)
		return;
	fe->ids = calloc((size_t)n, sizeof(*fe->ids));
	fe->names = calloc((size_t)n, sizeof(*fe->names));
	if (!fe->ids || !fe->names)
		return; /* no AllBlocksCleared: the router times the node out */
	long got = tier_ns_list(fs->tier, fe->ids, (size_t)n);
	if (got < n)
		n = got;
	for (long i = 0; i < n; i++) {
		struct tier_ns_info ni;
		if (tier_ns_info(fs->tier, fe->ids[i], &ni) == 0)
			memcpy(fe->names[fe->nnames++], ni.name, sizeof(ni.name));
	}
}

void fs_events_destroy(struct fs *fs)
{
	struct fs_events *fe = fs->events;
	struct ev_event e;

	if (!fe)
		return;
	memset(&e, 0, sizeof(e));
	e.kind = EV_CLEARED;
	for (size_t i = 0; i < fe->nnames; i++) {
		memcpy(e.ns, fe->names[i], sizeof(e.ns));
		ev_post(fe->pub, &e);
	}
	free(fe->ids);
	free(fe->names);
	free(fe);
	fs->events = NULL;
}

bool fs_events_counts(struct fs *fs, struct ev_stats *st, const char **ep,
		      const char **replay_ep)
{
	memset(st, 0, sizeof(*st));
	*ep = *replay_ep = "";
	if (!fs->events)
		return false;
	ev_stats(fs->events->pub, st);
	*ep = ev_pub_endpoint(fs->events->pub);
	*replay_ep = ev_pub_replay_endpoint(fs->events->pub);
	return true;
}

void fs_events_l3_dropped(struct fs *fs, const char *ns)
{
	struct ev_event e;

	if (!fs->events)
		return;
	memset(&e, 0, sizeof(e));
	e.kind = EV_CLEARED;
	e.medium = EV_MEDIUM_REMOTE;
	e.shared = 1;
	snprintf(e.ns, sizeof(e.ns), "%s", ns);
	ev_post_wait(fs->events->pub, &e, 1000);
}
