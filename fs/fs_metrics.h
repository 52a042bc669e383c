/*
 * fs_metrics.h - the mount's counters as /.kvfs/stats (JSON) and
 * /.kvfs/metrics (Prometheus text), both rendered from the one table of
 * fs_metrics.c; also used by the metrics_http endpoint (mount/).
 */
#ifndef KVFS_FS_METRICS_H
#define KVFS_FS_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct fs;
struct fs_cred;

/* A growing text buffer: oom is set (and later prints dropped) when an
 * allocation fails. p is malloc'd, NUL-terminated once anything printed. */
struct fs_sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};
void fs_sb_printf(struct fs_sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

enum fs_metrics_format { FS_METRICS_JSON, FS_METRICS_PROM };

/*
 * fs_metrics_render - appends the stats (JSON) or the metrics (Prometheus
 * exposition format 0.0.4) to b. Per-namespace rows are rendered only for
 * the namespaces `who` may list (read permission on the namespace, as
 * the filesystem checks it); root, the mount's owner and who == NULL see
 * every namespace. Totals are always global. 0 or -ENOMEM.
 */
int fs_metrics_render(struct fs *fs, enum fs_metrics_format f,
		      const struct fs_cred *who, struct fs_sbuf *b);

#endif /* KVFS_FS_METRICS_H */
