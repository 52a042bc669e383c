/*
 * mount_http.h - the optional Prometheus endpoint of kvfs-mount
 * (-o metrics_http=[ADDR]:PORT): GET /metrics answers what root reads in
 * /.kvfs/metrics (every namespace), served by libmicrohttpd's own thread.
 */
#ifndef KVFS_MOUNT_HTTP_H
#define KVFS_MOUNT_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

struct fs;
struct mount_http;

/* A parsed metrics_http address. */
struct mount_http_addr {
	struct sockaddr_storage sa;
	socklen_t len;
};

/*
 * mount_http_parse - "ADDR:PORT", "[IPV6]:PORT" or ":PORT" (loopback,
 * 127.0.0.1); ADDR a numeric address or localhost, PORT 0..65535 (0:
 * the kernel picks one). 0, or -1 with the reason printed to stderr.
 */
int mount_http_parse(const char *spec, struct mount_http_addr *out);

/*
 * mount_http_start - binds and starts serving (the fs is attached later
 * with mount_http_attach: until then every scrape is 503). Writes the
 * address it bound as "ADDR:PORT" into bound. 0, or -1 with the reason
 * printed to stderr (e.g. the port is taken).
 */
int mount_http_start(const struct mount_http_addr *a, struct mount_http **out,
		     char *bound, size_t boundlen);
void mount_http_attach(struct mount_http *h, struct fs *fs);

/* mount_http_stop - stops the server (no request runs after); NULL ok. */
void mount_http_stop(struct mount_http *h);

#endif /* KVFS_MOUNT_HTTP_H */
