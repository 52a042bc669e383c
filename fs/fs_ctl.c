/*
 * fs_ctl.c - the read-only files of /.kvfs: stats (JSON), metrics
 * (Prometheus text), config (the mount's effective options) and version.
 * Each open renders a snapshot, so reads at any offset agree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_i.h"

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap + (size_t)n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* A JSON string: namespace names may hold quotes, backslashes, controls. */
static void sb_json_str(struct sbuf *b, const char *s)
{
	sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "%c", c);
	}
	sb_printf(b, "\"");
}

/* Prometheus label values escape backslash, quote and newline. */
static void sb_prom_str(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			sb_printf(b, "\\%c", *s);
		else if (*s == '\n')
			sb_printf(b, "\\n");
		else
			sb_printf(b, "%c", *s);
	}
}

/* Namespace ids and infos, malloc'd (caller frees). */
static long ns_all(struct fs *fs, struct tier_ns_info **out)
{
	uint32_t *ids;
	struct tier_ns_info *infos;
	long got = fs_ns_ids(fs, &ids), k = 0;

	if (got < 0)
		return got;
	infos = calloc((size_t)(got ? got : 1), sizeof(*infos));
	if (!infos) {
		free(ids);
		return -ENOMEM;
	}
	for (long i = 0; i < got; i++)
		if (tier_ns_info(fs->tier, ids[i], &infos[k]) == 0)
			k++;
	free(ids);
	*out = infos;
	return k;
}

/* Raw bytes per byte on disk in L2: 1 when L2 holds nothing. */
static double l2_ratio(const struct tier_stats *st)
{
	return st->l2_bytes ? (double)st->l2_raw_bytes / (double)st->l2_bytes
			    : 1.0;
}

static void prom(struct sbuf *b, const char *name, const char *type,
		 const char *help, uint64_t v)
{
	sb_printf(b, "# HELP kvfs_%s %s\n# TYPE kvfs_%s %s\nkvfs_%s %" PRIu64
		  "\n", name, help, name, type, name, v);
}

/* ---------------------------------------------------------------- L3 */

/* The L3 counters, by name, for the JSON object and the metrics. */
struct l3_field {
	const char *name, *type, *help;
	uint64_t v;
};

static size_t l3_fields(const struct tier_stats *st, struct l3_field *f)
{
	const struct l3_stats *l = &st->l3;
	size_t n = 0;

#define F(nm, ty, hl, val) f[n++] = (struct l3_field){ nm, ty, hl, val }
	F("nodes", "gauge", "L3 Redis nodes known", l->redis.nodes);
	F("nodes_down", "gauge", "L3 nodes backing off after a failure",
	  l->redis.nodes_down);
	F("cluster", "gauge", "1 when L3 is a Redis Cluster", l->redis.cluster);
	F("hits", "counter", "L3 GETs that found a good value", l->hits);
	F("misses", "counter", "L3 GETs that found none, failed or were corrupt",
	  l->misses);
	F("corrupt", "counter", "L3 values that failed a check (misses)",
	  l->corrupt);
	F("errors", "counter", "failed L3 operations", l->errors);
	F("timeouts", "counter", "L3 pipelines past their bound", l->timeouts);
	F("bytes_in", "counter", "value bytes read from L3", l->bytes_in);
	F("bytes_out", "counter", "value bytes written to L3", l->bytes_out);
	F("puts", "counter", "chunks written to L3", l->puts);
	F("dels", "counter", "chunks deleted from L3", l->dels);
	F("queue_drops", "counter", "L3 writes dropped (queue full, failed)",
	  l->queue_drops);
	F("queued_bytes", "gauge", "L3 write queue bytes", l->queued_bytes);
	F("lookups", "counter", "batched L3 existence lookups", l->lookups);
	F("lookup_keys", "counter", "keys asked by L3 lookups", l->lookup_keys);
	F("promotions", "counter", "chunks promoted from L3 into L1",
	  st->l3_promotions);
	F("skipped", "counter", "L3 writes skipped (no memory for a copy)",
	  st->l3_skipped);
	F("pinned_bytes", "gauge", "L1 bytes pinned for L3 writes",
	  st->l3_pinned_bytes);
	F("get_avg_us", "gauge", "mean L3 GET latency, microseconds",
	  l->gets ? l->get_ns / l->gets / 1000 : 0);
	F("get_max_us", "gauge", "worst L3 GET latency, microseconds",
	  l->get_max_ns / 1000);
	F("roundtrips", "counter", "L3 pipelines sent", l->redis.roundtrips);
	F("moved", "counter", "MOVED redirections followed", l->redis.moved);
	F("ask", "counter", "ASK redirections followed", l->redis.ask);
	F("refreshes", "counter", "L3 slot maps loaded", l->redis.refreshes);
	F("connects", "counter", "L3 connections made", l->redis.connects);
	F("failures", "counter", "L3 connections lost or refused",
	  l->redis.failures);
#undef F
	return n;
}

#define L3_FIELDS 32

static void render_l3_json(struct sbuf *b, const struct tier_stats *st)
{
	struct l3_field f[L3_FIELDS];
	size_t n = l3_fields(st, f);

	sb_printf(b, "  \"l3\": {\"enabled\": %d", st->l3_on ? 1 : 0);
	for (size_t i = 0; st->l3_on && i < n; i++)
		sb_printf(b, ", \"%s\": %" PRIu64, f[i].name, f[i].v);
	sb_printf(b, "},\n");
}

static void render_l3_metrics(struct sbuf *b, const struct tier_stats *st)
{
	struct l3_field f[L3_FIELDS];
	size_t n = l3_fields(st, f);

	for (size_t i = 0; st->l3_on && i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "l3_%s%s", f[i].name,
			 !strcmp(f[i].type, "counter") ? "_total" : "");
		prom(b, name, f[i].type, f[i].help, f[i].v);
	}
}

static void render_stats(struct fs *fs, struct sbuf *b)
{
	struct tier_stats st;
	struct tier_arena_info ai;
	struct fs_counters c;
	struct tier_ns_info *ns = NULL;
	char ioc[4096];
	struct fs_path_counts pc;
	long n;

	tier_get_stats(fs->tier, &st);
	fs_counters(fs, &c);
	sb_printf(b, "{\n  \"version\": \"%s\",\n", KVFS_VERSION_STRING);
	tier_arena_info(fs->tier, &ai);
	sb_printf(b, "  \"l1\": {\"backend\": \"%s\", \"capacity\": %" PRIu64
		  ", \"bytes\": %" PRIu64 ", \"chunks\": %" PRIu64 "},\n",
		  ai.backend, st.l1_capacity, st.l1_bytes, st.l1_chunks);
	sb_printf(b, "  \"l2\": {\"capacity\": %" PRIu64 ", \"bytes\": %" PRIu64
		  ", \"raw_bytes\": %" PRIu64 ", \"chunks\": %" PRIu64
		  ", \"reads\": %" PRIu64 ", \"writes\": %" PRIu64
		  ", \"reclaims\": %" PRIu64 ", \"corrupt\": %" PRIu64
		  ", \"errors\": %" PRIu64 ", \"compression_ratio\": %.3f},\n",
		  st.l2_capacity, st.l2_bytes, st.l2_raw_bytes, st.l2_chunks,
		  st.l2_reads, st.l2_writes, st.l2_reclaims, st.l2_corrupt,
		  st.l2_errors, l2_ratio(&st));
	render_l3_json(b, &st);
	sb_printf(b, "  \"hits\": %" PRIu64 ",\n  \"misses\": %" PRIu64
		  ",\n  \"evictions\": %" PRIu64 ",\n  \"publishes\": %" PRIu64
		  ",\n  \"discards\": %" PRIu64 ",\n  \"promotions\": %" PRIu64
		  ",\n  \"demotions\": %" PRIu64 ",\n",
		  st.hits, st.misses, st.evictions, st.publishes, st.discards,
		  st.promotions, st.demotions);
	sb_printf(b, "  \"writers\": %" PRIu64 ",\n  \"writer_bytes\": %" PRIu64
		  ",\n  \"meta_bytes\": %" PRIu64 ",\n",
		  st.writers, st.writer_bytes, st.meta_bytes);
	/* after the engine's own "promotions": readers of the first match */
	sb_printf(b, "  \"readahead\": {\"max\": %" PRIu64 ", \"promotions\": %"
		  PRIu64 ", \"hits\": %" PRIu64 ", \"wasted\": %" PRIu64 "},\n",
		  st.ra_max, st.ra_promotions, st.ra_hits, st.ra_wasted);
	sb_printf(b, "  \"fs\": {\"inodes\": %" PRIu64 ", \"temporaries\": %"
		  PRIu64 ", \"temporaries_expired\": %" PRIu64
		  ", \"opens\": %" PRIu64 ", \"writers_killed\": %" PRIu64
		  ", \"late_publishes\": %" PRIu64 ", \"invalidations\": %"
		  PRIu64 ", \"stale\": %" PRIu64 "},\n",
		  c.inodes, c.temporaries, c.tmp_expired, c.opens,
		  c.writers_killed, c.late_publishes, c.invalidations, c.stale);
	fs_path_counts(fs, &pc);
	sb_printf(b, "  \"paths\": {\"dirs\": %" PRIu64 ", \"files\": %"
		  PRIu64 ", \"meta_bytes\": %" PRIu64 ", \"pending\": %"
		  PRIu64 ", \"orphans\": %" PRIu64 "},\n", pc.dirs, pc.files,
		  pc.meta_bytes, pc.pending, pc.orphans);
	ioc[0] = '\0';
	fs_ioctl_stats_json(fs, ioc, sizeof(ioc));
	sb_printf(b, "  \"ioctl\": %s,\n", ioc[0] ? ioc : "{}");
	fs_events_stats_json(fs, ioc, sizeof(ioc)); /* KV events */
	sb_printf(b, "  \"events\": %s,\n", ioc[0] ? ioc : "{}");
	sb_printf(b, "  \"namespaces\": {");
	n = ns_all(fs, &ns);
	for (long i = 0; i < n; i++) {
		char dtype[8] = "";
		mode_t mode = 0;

		fs_ns_attrs(fs, ns[i].id, dtype, &mode);
		sb_printf(b, "%s\n    ", i ? "," : "");
		sb_json_str(b, ns[i].name);
		sb_printf(b, ": {\"chunks\": %" PRIu64 ", \"bytes\": %" PRIu64
			  ", \"hits\": %" PRIu64 ", \"chunk_bytes\": %" PRIu64
			  ", \"shuffle\": %d, \"dtype\": \"%s\"}",
			  ns[i].chunks, ns[i].bytes, ns[i].hits,
			  ns[i].chunk_bytes, ns[i].shuffle, dtype);
	}
	free(ns);
	sb_printf(b, "%s}\n}\n", n > 0 ? "\n  " : "");
}

static void render_metrics(struct fs *fs, struct sbuf *b)
{
	struct tier_stats st;
	struct tier_ns_info *ns = NULL;
	struct fs_path_counts pc;
	long n;

	tier_get_stats(fs->tier, &st);
	prom(b, "l1_capacity_bytes", "gauge", "L1 arena size", st.l1_capacity);
	prom(b, "l1_bytes", "gauge", "L1 bytes in chunks", st.l1_bytes);
	prom(b, "l1_chunks", "gauge", "chunks in L1", st.l1_chunks);
	prom(b, "l2_capacity_bytes", "gauge", "L2 size on disk",
	     st.l2_capacity);
	prom(b, "l2_bytes", "gauge", "L2 bytes on disk", st.l2_bytes);
	prom(b, "l2_raw_bytes", "gauge", "L2 bytes before compression",
	     st.l2_raw_bytes);
	prom(b, "l2_chunks", "gauge", "chunks in L2", st.l2_chunks);
	sb_printf(b, "# HELP kvfs_l2_compression_ratio L2 raw bytes / bytes "
		  "on disk (1 when empty)\n# TYPE kvfs_l2_compression_ratio "
		  "gauge\nkvfs_l2_compression_ratio %.3f\n", l2_ratio(&st));
	prom(b, "hits_total", "counter", "chunk reads that found it", st.hits);
	prom(b, "misses_total", "counter", "chunk reads that missed",
	     st.misses);
	prom(b, "evictions_total", "counter", "chunks evicted from L1",
	     st.evictions);
	prom(b, "publishes_total", "counter", "chunks published",
	     st.publishes);
	prom(b, "discards_total", "counter", "chunks discarded unpublished",
	     st.discards);
	prom(b, "promotions_total", "counter", "L2 to L1 promotions",
	     st.promotions);
	prom(b, "demotions_total", "counter", "L1 to L2 demotions",
	     st.demotions);
	render_l3_metrics(b, &st);
	prom(b, "readahead_max_chunks", "gauge",
	     "largest readahead window, chunks (0 = off)", st.ra_max);
	prom(b, "readahead_promotions_total", "counter",
	     "chunks promoted from L2/L3 by chain readahead", st.ra_promotions);
	prom(b, "readahead_hits_total", "counter",
	     "readahead promotions read later", st.ra_hits);
	prom(b, "readahead_wasted_total", "counter",
	     "readahead promotions evicted unread", st.ra_wasted);
	fs_path_counts(fs, &pc);
	prom(b, "path_dirs", "gauge", "directories of path namespaces",
	     pc.dirs);
	prom(b, "path_files", "gauge", "file names of path namespaces",
	     pc.files);
	prom(b, "path_meta_bytes", "gauge",
	     "bytes of path namespace trees (names, directories)",
	     pc.meta_bytes);
	{ /* KV events */
		char ev[2048];

		if (fs_events_metrics(fs, ev, sizeof(ev)))
			sb_printf(b, "%s", ev);
	}
	sb_printf(b, "# HELP kvfs_ns_chunks chunks per namespace\n"
		  "# TYPE kvfs_ns_chunks gauge\n");
	n = ns_all(fs, &ns);
	for (long i = 0; i < n; i++) {
		sb_printf(b, "kvfs_ns_chunks{ns=\"");
		sb_prom_str(b, ns[i].name);
		sb_printf(b, "\"} %" PRIu64 "\n", ns[i].chunks);
	}
	sb_printf(b, "# HELP kvfs_ns_bytes bytes per namespace\n"
		  "# TYPE kvfs_ns_bytes gauge\n");
	for (long i = 0; i < n; i++) {
		sb_printf(b, "kvfs_ns_bytes{ns=\"");
		sb_prom_str(b, ns[i].name);
		sb_printf(b, "\"} %" PRIu64 "\n", ns[i].bytes);
	}
	sb_printf(b, "# HELP kvfs_ns_hits_total hits per namespace\n"
		  "# TYPE kvfs_ns_hits_total counter\n");
	for (long i = 0; i < n; i++) {
		sb_printf(b, "kvfs_ns_hits_total{ns=\"");
		sb_prom_str(b, ns[i].name);
		sb_printf(b, "\"} %" PRIu64 "\n", ns[i].hits);
	}
	free(ns);
}

int fs_ctl_render(struct fs *fs, int file, char **buf, size_t *len)
{
	struct sbuf b = { 0 };

	b.cap = 4096;
	b.p = malloc(b.cap);
	if (!b.p)
		return -ENOMEM;
	b.p[0] = '\0';
	switch (file) {
	case FS_CTL_STATS:
		render_stats(fs, &b);
		break;
	case FS_CTL_METRICS:
		render_metrics(fs, &b);
		break;
	case FS_CTL_CONFIG:
		sb_printf(&b, "%s", fs->cfg.config_text);
		break;
	case FS_CTL_VERSION:
		sb_printf(&b, "kvfs %s\n", KVFS_VERSION_STRING);
		break;
	default:
		free(b.p);
		return -ENOENT;
	}
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*buf = b.p;
	*len = b.len;
	return 0;
}
