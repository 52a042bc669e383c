/*
 * mount_http.c - -o metrics_http: a Prometheus scrape endpoint on
 * libmicrohttpd. GET (or HEAD) /metrics: 200 and the metrics text
 * (exposition format 0.0.4) of every namespace, as root reads
 * /.kvfs/metrics; another path: 404; another method: 405. Anyone who can
 * reach the address sees every namespace's name and figures: hence
 * loopback unless the operator names an address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "fs/fs.h"
#include "mount/mount_http.h"

struct mount_http {
	struct MHD_Daemon *d;
	struct fs *fs; /* atomic: NULL until attached */
};

int mount_http_parse(const char *spec, struct mount_http_addr *out)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	const char *colon = strrchr(spec, ':');
	char host[256], *end;
	size_t hl;
	long port;
	int rc;

	if (!colon) {
		fprintf(stderr, "kvfs-mount: bad metrics_http '%s' "
			"(ADDR:PORT, [ADDR6]:PORT or :PORT)\n", spec);
		return -1;
	}
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 0 || port > 65535) {
		fprintf(stderr, "kvfs-mount: bad metrics_http port '%s' "
			"(0..65535)\n", colon + 1);
		return -1;
	}
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']')
		spec++, hl -= 2; /* [IPv6] */
	if (hl >= sizeof(host)) {
		fprintf(stderr, "kvfs-mount: metrics_http address too long\n");
		return -1;
	}
	snprintf(host, sizeof(host), "%.*s", (int)hl, spec);
	if (!host[0] || !strcmp(host, "localhost")) /* loopback only */
		snprintf(host, sizeof(host), "127.0.0.1");
	/* numeric: a mount never waits on DNS */
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc || !res || res->ai_addrlen > sizeof(out->sa)) {
		fprintf(stderr, "kvfs-mount: bad metrics_http address '%s' "
			"(a numeric IPv4 or [IPv6] address, or localhost)\n",
			host);
		if (res)
			freeaddrinfo(res);
		return -1;
	}
	memset(out, 0, sizeof(*out));
	memcpy(&out->sa, res->ai_addr, res->ai_addrlen);
	out->len = res->ai_addrlen;
	if (res->ai_family == AF_INET6)
		((struct sockaddr_in6 *)&out->sa)->sin6_port =
			htons((uint16_t)port);
	else
		((struct sockaddr_in *)&out->sa)->sin_port =
			htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
			     const char *type, char *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer_with_free_callback(len, body,
								 free);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status,
			    const char *msg)
{
	char *b = strdup(msg);

	return b ? reply(c, status, "text/plain; charset=utf-8", b,
			 strlen(b)) : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct mount_http *h = cls;
	struct fs *fs;
	char *body;
	size_t len;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			    "405 method not allowed: GET /metrics\n");
	if (strcmp(url, "/metrics"))
		return text(c, MHD_HTTP_NOT_FOUND,
			    "404 not found: the metrics are at /metrics\n");
	fs = __atomic_load_n(&h->fs, __ATOMIC_ACQUIRE);
	if (!fs)
		return text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
			    "503 not mounted yet\n");
	if (fs_metrics_prom(fs, &body, &len))
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    "500 out of memory\n");
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		     body, len);
}

/* "ADDR:PORT" ("[ADDR6]:PORT") of an address. */
static void addr_name(const struct sockaddr_storage *ss, char *out,
		      size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	bool v6 = ss->ss_family == AF_INET6;
	int port;

	inet_ntop(ss->ss_family, v6 ?
		  (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr :
		  (const void *)&((const struct sockaddr_in *)ss)->sin_addr,
		  ip, sizeof(ip));
	port = ntohs(v6 ? ((const struct sockaddr_in6 *)ss)->sin6_port :
		     ((const struct sockaddr_in *)ss)->sin_port);
	snprintf(out, len, "%s%s%s:%d", v6 ? "[" : "", ip, v6 ? "]" : "",
		 port);
}

int mount_http_start(const struct mount_http_addr *a, struct mount_http **out,
		     char *bound, size_t boundlen)
{
	struct mount_http *h;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1, fd, err;

	/* bound here, so a refusal names its reason (EADDRINUSE...) */
	fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (const struct sockaddr *)&a->sa, a->len) ||
	    listen(fd, 64)) {
		err = errno;
		if (fd >= 0)
			close(fd);
		addr_name(&a->sa, bound, boundlen);
		fprintf(stderr, "kvfs-mount: metrics_http: cannot listen on "
			"%s: %s\n", bound, strerror(err));
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		addr_name(&ss, bound, boundlen); /* PORT 0: the kernel's */
	else
		addr_name(&a->sa, bound, boundlen);
	h = calloc(1, sizeof(*h));
	if (h)
		h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
					(a->sa.ss_family == AF_INET6 ?
					 MHD_USE_IPv6 : 0),
					0, NULL, NULL, on_request, h,
					MHD_OPTION_LISTEN_SOCKET, fd,
					MHD_OPTION_CONNECTION_LIMIT, 64u,
					MHD_OPTION_CONNECTION_TIMEOUT, 10u,
					MHD_OPTION_END);
	if (!h || !h->d) {
		fprintf(stderr, "kvfs-mount: metrics_http: cannot start the "
			"HTTP server on %s\n", bound);
		close(fd);
		free(h);
		return -1;
	}
	*out = h;
	return 0;
}

void mount_http_attach(struct mount_http *h, struct fs *fs)
{
	if (h)
		__atomic_store_n(&h->fs, fs, __ATOMIC_RELEASE);
}

void mount_http_stop(struct mount_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d); /* joins its thread: no request after */
	free(h);
}
