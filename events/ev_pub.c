/*
 * ev_pub.c - the publisher: sockets, the thread that drains the queue into
 * batches, and the replay buffer (see events.h for the protocol).
 *
 * Threads: ev_post() runs on any thread and only touches the queue and the
 * drop counter. Everything else (both sockets, the sequence, the replay
 * ring, the encode buffer) belongs to the publisher thread, created after
 * the sockets are opened and joined before they are closed.
 *
 * Payloads are reference-counted and sent zero-copy, so the replay ring,
 * the PUB socket's queues (one per subscriber, bounded by SNDHWM: a
 * subscriber that never reads loses messages, it never holds memory beyond
 * that) and replay replies share one copy of each batch.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "events/ev_encode.h"
#include "events/ev_queue.h"
#include "events/events.h"

#define EV_ENDPOINT_MAX 512
#define EV_REPLAY_PER_WAKE 16 /* replay requests read per wake-up */

struct ev_payload {
	atomic_uint refs;
	uint64_t seq;
	size_t len;
	unsigned char data[];
};

struct ev_pub {
	struct ev_config cfg;
	char endpoint[EV_ENDPOINT_MAX];
	char replay_ep[EV_ENDPOINT_MAX];
	char node[HOST_NAME_MAX + 1];
	char ipc_files[2][EV_ENDPOINT_MAX]; /* bound ipc:// paths, unlinked
					     * at destroy ("" = none) */

	void *ctx;
	void *pub;    /* thread-owned after create */
	void *router; /* thread-owned after create; NULL = no replay */

	struct ev_queue q;
	pthread_t thread;
	atomic_bool stop;

	/* thread-owned */
	uint64_t seq;
	struct ev_payload **ring; /* cfg.buffer slots */
	uint64_t ring_head, ring_n, ring_bytes;
	msgpack_sbuffer sbuf;
	struct ev_event *batch; /* cfg.batch_max */
	double tokens;          /* replay token bucket */
	struct timespec tokens_at;

	/* counters: written by the thread (dropped: by ev_post) */
	atomic_uint_fast64_t consumed; /* events popped (sent or not) */
	atomic_uint_fast64_t published, dropped, batches, next_seq;
	atomic_uint_fast64_t replay_requests, replay_batches, replay_bad,
		replay_limited, buffered;
};

void ev_config_default(struct ev_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->buffer = 10000;
	cfg->queue = 65536;
	cfg->batch_max = 512;
	cfg->flush_ms = 2;
	cfg->buffer_bytes = 64ull << 20;
	cfg->replay_rate = 20;
	cfg->ipc_mode = 0600;
}

static void logf_(struct ev_pub *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logf_(struct ev_pub *p, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (!p->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->cfg.log(p->cfg.log_arg, msg);
}

/* ============================================================== payloads */

static struct ev_payload *payload_new(uint64_t seq, const void *d, size_t n)
{
	struct ev_payload *pl = malloc(sizeof(*pl) + n);

	if (!pl)
		return NULL;
	atomic_init(&pl->refs, 1);
	pl->seq = seq;
	pl->len = n;
	memcpy(pl->data, d, n);
	return pl;
}

static void payload_put(struct ev_payload *pl)
{
	if (pl && atomic_fetch_sub(&pl->refs, 1) == 1)
		free(pl);
}

static void payload_zmq_free(void *data, void *hint)
{
	(void)data;
	payload_put(hint);
}

/* Sends pl as one frame, zero-copy. 0 or -errno. */
static int send_payload(void *sock, struct ev_payload *pl, int flags)
{
	zmq_msg_t m;

	atomic_fetch_add(&pl->refs, 1);
	if (zmq_msg_init_data(&m, pl->data, pl->len, payload_zmq_free, pl)) {
		payload_put(pl);
		return -errno;
	}
	if (zmq_msg_send(&m, sock, flags) < 0) {
		int e = errno;
		zmq_msg_close(&m); /* calls payload_zmq_free */
		return -e;
	}
	return 0;
}

static int send_bytes(void *sock, const void *d, size_t n, int flags)
{
	return zmq_send(sock, d, n, flags) < 0 ? -errno : 0;
}

static void be64(unsigned char b[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
}

/* ========================================================== replay ring */

static void ring_drop_oldest(struct ev_pub *p)
{
	struct ev_payload *old = p->ring[p->ring_head];

	p->ring[p->ring_head] = NULL;
	p->ring_head = (p->ring_head + 1) % p->cfg.buffer;
	p->ring_n--;
	p->ring_bytes -= old->len;
	payload_put(old);
}

/* Keeps pl (takes the caller's reference). */
static void ring_add(struct ev_pub *p, struct ev_payload *pl)
{
	while (p->ring_n && (p->ring_n == p->cfg.buffer ||
			     p->ring_bytes + pl->len > p->cfg.buffer_bytes))
		ring_drop_oldest(p);
	p->ring[(p->ring_head + p->ring_n) % p->cfg.buffer] = pl;
	p->ring_n++;
	p->ring_bytes += pl->len;
	atomic_store(&p->buffered, p->ring_n);
}

/* ============================================================== publish */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Encodes and sends ev[0..n) (one namespace) as one batch. */
static void publish_batch(struct ev_pub *p, const struct ev_event *ev,
			  size_t n)
{
	char topic[3 + HOST_NAME_MAX + 1 + KVFS_NS_NAME_MAX + 2];
	unsigned char seqb[8];
	struct ev_payload *pl;
	int tn, rc;

	rc = ev_encode_batch(&p->sbuf, now_s(), ev, n, p->cfg.format,
			     p->cfg.hash);
	if (rc) {
		logf_(p, "events: cannot encode a batch of %zu: %s", n,
		      strerror(-rc));
		return;
	}
	pl = payload_new(p->seq, p->sbuf.data, p->sbuf.size);
	if (!pl) {
		logf_(p, "events: out of memory, batch of %zu lost", n);
		return;
	}
	tn = snprintf(topic, sizeof(topic), "kv@%s@%s",
		      ev[0].shared ? EV_SHARED_NODE : p->node, ev[0].ns);
	be64(seqb, p->seq);
	/* PUB never blocks: at a subscriber's SNDHWM it drops, for that
	 * subscriber only. */
	rc = send_bytes(p->pub, topic, (size_t)tn, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (!rc)
		rc = send_bytes(p->pub, seqb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (!rc)
		rc = send_payload(p->pub, pl, ZMQ_DONTWAIT);
	if (rc && rc != -EAGAIN)
		logf_(p, "events: send: %s", zmq_strerror(-rc));
	p->seq++;
	atomic_store(&p->next_seq, p->seq);
	atomic_fetch_add(&p->batches, 1);
	atomic_fetch_add(&p->published, n);
	ring_add(p, pl);
}

/* Drains the queue: consecutive events of one namespace (and topic) form
 * a batch of at most batch_max. */
static void drain(struct ev_pub *p)
{
	size_t n;

	while ((n = ev_queue_pop(&p->q, p->batch, p->cfg.batch_max))) {
		size_t i = 0;
		while (i < n) {
			size_t j = i + 1;
			/* one topic per batch: same namespace, same
			 * (node's own or shared) tier */
			while (j < n && p->batch[j].shared ==
						p->batch[i].shared &&
			       !strcmp(p->batch[j].ns, p->batch[i].ns))
				j++;
			publish_batch(p, &p->batch[i], j - i);
			i = j;
		}
		atomic_fetch_add(&p->consumed, n);
	}
}

/* =============================================================== replay */

static bool replay_token(struct ev_pub *p)
{
	struct timespec now;
	double dt;

	clock_gettime(CLOCK_MONOTONIC, &now);
	dt = (double)(now.tv_sec - p->tokens_at.tv_sec) +
	     (double)(now.tv_nsec - p->tokens_at.tv_nsec) / 1e9;
	p->tokens_at = now;
	p->tokens += dt * p->cfg.replay_rate;
	if (p->tokens > p->cfg.replay_rate)
		p->tokens = p->cfg.replay_rate;
	if (p->tokens < 1)
		return false;
	p->tokens -= 1;
	return true;
}

static void replay_serve(struct ev_pub *p, zmq_msg_t *id, uint64_t from)
{
	static const unsigned char end[8] = { 0xff, 0xff, 0xff, 0xff,
					      0xff, 0xff, 0xff, 0xff };
	const int f = ZMQ_SNDMORE | ZMQ_DONTWAIT;
	const void *idp = zmq_msg_data(id);
	size_t idn = zmq_msg_size(id);
	unsigned char seqb[8];

	for (uint64_t i = 0; i < p->ring_n; i++) {
		struct ev_payload *pl =
			p->ring[(p->ring_head + i) % p->cfg.buffer];
		if (pl->seq < from)
			continue;
		be64(seqb, pl->seq);
		/* ROUTER drops what it cannot queue (peer gone, SNDHWM):
		 * the client sees a gap and asks again. */
		if (send_bytes(p->router, idp, idn, f) ||
		    send_bytes(p->router, "", 0, f) ||
		    send_bytes(p->router, seqb, 8, f) ||
		    send_payload(p->router, pl, ZMQ_DONTWAIT))
			return;
		atomic_fetch_add(&p->replay_batches, 1);
	}
	if (!send_bytes(p->router, idp, idn, f) &&
	    !send_bytes(p->router, "", 0, f) &&
	    !send_bytes(p->router, end, 8, f))
		send_bytes(p->router, "", 0, ZMQ_DONTWAIT);
}

/* Reads one request (all its frames); false when none was waiting. */
static bool replay_one(struct ev_pub *p)
{
	zmq_msg_t fr[3];
	int nfr = 0, more = 1;
	bool bad = false;
	size_t mlen = sizeof(more);

	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, p->router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			if (nfr == 0)
				return false;
			bad = true; /* cannot happen: frames come whole */
			break;
		}
		if (zmq_getsockopt(p->router, ZMQ_RCVMORE, &more, &mlen))
			more = 0;
		if (nfr < 3)
			fr[nfr++] = m;
		else {
			bad = true;
			zmq_msg_close(&m);
		}
	}
	if (nfr != 3 || zmq_msg_size(&fr[1]) != 0 || zmq_msg_size(&fr[2]) != 8)
		bad = true;
	if (bad) {
		atomic_fetch_add(&p->replay_bad, 1);
	} else if (!replay_token(p)) {
		atomic_fetch_add(&p->replay_limited, 1);
	} else {
		const unsigned char *s = zmq_msg_data(&fr[2]);
		uint64_t from = 0;
		for (int i = 0; i < 8; i++)
			from = from << 8 | s[i];
		atomic_fetch_add(&p->replay_requests, 1);
		replay_serve(p, &fr[0], from);
	}
	for (int i = 0; i < nfr; i++)
		zmq_msg_close(&fr[i]);
	return true;
}

/* =============================================================== thread */

static void *pub_thread(void *arg)
{
	struct ev_pub *p = arg;
	zmq_pollitem_t it = { .socket = p->router, .events = ZMQ_POLLIN };

	while (!atomic_load(&p->stop)) {
		int rc = zmq_poll(&it, p->router ? 1 : 0, p->cfg.flush_ms);
		if (rc > 0 && (it.revents & ZMQ_POLLIN))
			for (int i = 0; i < EV_REPLAY_PER_WAKE && replay_one(p);
			     i++)
				;
		drain(p);
	}
	drain(p);
	return NULL;
}

/* ============================================================ lifecycle */

static bool binds(const char *ep)
{
	return strchr(ep, '*') || strstr(ep, "::") ||
	       !strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9);
}

static int setopt_int(void *s, int opt, int v)
{
	return zmq_setsockopt(s, opt, &v, sizeof(v)) ? -errno : 0;
}

/* A tcp endpoint's port: '*' or 0 (any) to bind, else 1..65535. libzmq
 * takes 99999, 65536 or "5557x" (it truncates) and then sends nowhere. */
static bool tcp_port_ok(const char *ep, bool bind)
{
	const char *c = strncmp(ep, "tcp://", 6) ? NULL : strrchr(ep + 6, ':');
	unsigned long v;
	char *end;

	if (strncmp(ep, "tcp://", 6))
		return true;
	if (!c || !*++c)
		return false;
	if (!strcmp(c, "*"))
		return bind;
	if (*c < '0' || *c > '9')
		return false;
	errno = 0;
	v = strtoul(c, &end, 10);
	return !*end && !errno && v <= 65535 && (v || bind);
}

/* libzmq unlinks whatever is at an ipc path before binding it: a file, or
 * the live socket of another daemon (which then publishes to no one).
 * Refused: -EEXIST (not a socket), -EADDRINUSE (something answers there).
 * A stale socket (its daemon gone) is replaced. */
static int ipc_free(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (lstat(path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if (strlen(path) >= sizeof(a.sun_path))
		return 0; /* zmq_bind says why */
	memcpy(a.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return rc ? 0 : -EADDRINUSE;
}

/* Binds (or connects) sock to ep; ipc socket files get mode. Writes the
 * endpoint in use to used. */
static int open_ep(void *sock, const char *ep, bool bind, uint32_t mode,
		   char *used, size_t usedlen, char *ipc_file)
{
	int rc;

	if (!tcp_port_ok(ep, bind))
		return -EINVAL;
	/* an IPv6 address ([::1]) needs the option, off by default */
	if (strchr(ep, '[') && (rc = setopt_int(sock, ZMQ_IPV6, 1)))
		return rc;
	if (bind) {
		bool ipc = !strncmp(ep, "ipc://", 6);
		mode_t old = 0;
		if (ipc && ep[6] != '@' && (rc = ipc_free(ep + 6)))
			return rc;
		if (ipc)
			old = umask(077);
		rc = zmq_bind(sock, ep);
		int e = errno;
		if (ipc)
			umask(old);
		if (rc)
			return -e;
		if (ipc && ep[6] != '@') {
			snprintf(ipc_file, EV_ENDPOINT_MAX, "%s", ep + 6);
			if (chmod(ep + 6, mode))
				return -errno;
		}
		if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, used, &usedlen))
			snprintf(used, usedlen, "%s", ep);
		return 0;
	}
	if (zmq_connect(sock, ep))
		return -errno;
	snprintf(used, usedlen, "%s", ep);
	return 0;
}


static void pub_free(struct ev_pub *p)
{
	if (p->pub)
		zmq_close(p->pub);
	if (p->router)
		zmq_close(p->router);
	if (p->ctx)
		zmq_ctx_term(p->ctx); /* waits for the lingering sends */
	for (int i = 0; i < 2; i++)
		if (p->ipc_files[i][0])
			unlink(p->ipc_files[i]);
	if (p->ring) {
		while (p->ring_n)
			ring_drop_oldest(p);
		free(p->ring);
	}
	msgpack_sbuffer_destroy(&p->sbuf);
	free(p->batch);
	ev_queue_fini(&p->q);
	free(p);
}

int ev_pub_create(const struct ev_config *cfg, struct ev_pub **out,
		  char *err, size_t errlen)
{
	struct ev_pub *p;
	int rc;

	*out = NULL;
	if (!cfg->endpoint || !*cfg->endpoint) {
		snprintf(err, errlen, "events: no endpoint");
		return -EINVAL;
	}
	if (strlen(cfg->endpoint) >= EV_ENDPOINT_MAX ||
	    (cfg->replay_endpoint &&
	     strlen(cfg->replay_endpoint) >= EV_ENDPOINT_MAX)) {
		snprintf(err, errlen, "events: endpoint too long");
		return -ENAMETOOLONG;
	}
	if (!cfg->buffer || !cfg->queue || !cfg->batch_max || !cfg->flush_ms ||
	    !cfg->replay_rate || cfg->buffer > 10000000) {
		snprintf(err, errlen, "events: buffer, queue, batch and "
			 "rates must be positive (buffer at most 10,000,000)");
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "events: out of memory");
		return -ENOMEM;
	}
	p->cfg = *cfg;
	p->cfg.endpoint = p->cfg.replay_endpoint = p->cfg.node = NULL;
	msgpack_sbuffer_init(&p->sbuf);
	if (cfg->node)
		snprintf(p->node, sizeof(p->node), "%s", cfg->node);
	else if (gethostname(p->node, sizeof(p->node)))
		snprintf(p->node, sizeof(p->node), "localhost");
	p->node[sizeof(p->node) - 1] = 0;
	if (!p->node[0] || strchr(p->node, '@') ||
	    (cfg->node && strlen(cfg->node) > HOST_NAME_MAX)) {
		snprintf(err, errlen, "node=%s: must be 1..%d bytes without '@'",
			 cfg->node ? cfg->node : p->node, HOST_NAME_MAX);
		rc = -EINVAL;
		goto fail;
	}
	rc = ev_queue_init(&p->q, cfg->queue);
	p->ring = calloc(cfg->buffer, sizeof(*p->ring));
	p->batch = calloc(cfg->batch_max, sizeof(*p->batch));
	p->ctx = zmq_ctx_new();
	if (rc || !p->ring || !p->batch || !p->ctx) {
		snprintf(err, errlen, "events: out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	p->pub = zmq_socket(p->ctx, ZMQ_PUB);
	if (!p->pub) {
		rc = -errno;
		snprintf(err, errlen, "events=%s: %s", cfg->endpoint,
			 zmq_strerror(-rc));
		goto fail;
	}
	int hwm = cfg->buffer < 1000 ? 1000 : (int)cfg->buffer;
	if ((rc = setopt_int(p->pub, ZMQ_SNDHWM, hwm)) ||
	    (rc = setopt_int(p->pub, ZMQ_LINGER, 500)) ||
	    (rc = open_ep(p->pub, cfg->endpoint, binds(cfg->endpoint),
			  cfg->ipc_mode, p->endpoint, sizeof(p->endpoint),
			  p->ipc_files[0]))) {
		snprintf(err, errlen, "events=%s: %s", cfg->endpoint,
			 zmq_strerror(-rc));
		goto fail;
	}
	if (cfg->replay_endpoint) {
		p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
		/* A request is 8 bytes: a frame over 4 KiB gets its peer
		 * disconnected (smaller bad ones are read, counted), and a
		 * flood waits in its own queue (RCVHWM). */
		if (!p->router)
			rc = -errno;
		else if (!(rc = setopt_int(p->router, ZMQ_SNDHWM, hwm + 16)) &&
			 !(rc = setopt_int(p->router, ZMQ_RCVHWM, 64)) &&
			 !(rc = setopt_int(p->router, ZMQ_LINGER, 0))) {
			int64_t maxmsg = 4096;
			if (zmq_setsockopt(p->router, ZMQ_MAXMSGSIZE, &maxmsg,
					   sizeof(maxmsg)))
				rc = -errno;
		}
		if (!rc)
			rc = open_ep(p->router, cfg->replay_endpoint, true,
				     cfg->ipc_mode, p->replay_ep,
				     sizeof(p->replay_ep), p->ipc_files[1]);
		if (rc) {
			snprintf(err, errlen, "events_replay=%s: %s",
				 cfg->replay_endpoint, zmq_strerror(-rc));
			goto fail;
		}
	}
	p->tokens = cfg->replay_rate;
	clock_gettime(CLOCK_MONOTONIC, &p->tokens_at);
	rc = -pthread_create(&p->thread, NULL, pub_thread, p);
	if (rc) {
		snprintf(err, errlen, "events: thread: %s", strerror(-rc));
		goto fail;
	}
	*out = p;
	return 0;
fail:
	pub_free(p);
	return rc;
}

void ev_pub_destroy(struct ev_pub *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	pthread_join(p->thread, NULL);
	pub_free(p);
}

/* ================================================================= API */

int ev_post(struct ev_pub *p, const struct ev_event *e)
{
	if (e->kind < EV_STORED || e->kind > EV_CLEARED ||
	    e->medium >= EV_MEDIUM_COUNT)
		return -EINVAL;
	if (ev_queue_push(&p->q, e)) {
		atomic_fetch_add_explicit(&p->dropped, 1, memory_order_relaxed);
		return -EAGAIN;
	}
	return 0;
}

int ev_post_wait(struct ev_pub *p, const struct ev_event *e,
		 uint32_t timeout_ms)
{
	struct timespec d = { 0, 200000 };
	uint32_t waited_us = 0;

	if (e->kind < EV_STORED || e->kind > EV_CLEARED ||
	    e->medium >= EV_MEDIUM_COUNT)
		return -EINVAL;
	while (ev_queue_push(&p->q, e)) {
		if (waited_us / 1000 >= timeout_ms) {
			atomic_fetch_add(&p->dropped, 1);
			return -EAGAIN;
		}
		nanosleep(&d, NULL); /* the thread drains every flush_ms */
		waited_us += 200;
	}
	return 0;
}

int ev_flush(struct ev_pub *p, uint32_t timeout_ms)
{
	uint64_t target = ev_queue_pushed(&p->q);
	struct timespec d = { 0, 1000000 };

	for (uint32_t waited = 0; atomic_load(&p->consumed) < target;
	     waited++) {
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&d, NULL);
	}
	return 0;
}

void ev_stats(struct ev_pub *p, struct ev_stats *st)
{
	st->published = atomic_load(&p->published);
	st->dropped = atomic_load(&p->dropped);
	st->batches = atomic_load(&p->batches);
	st->next_seq = atomic_load(&p->next_seq);
	st->queued = ev_queue_depth(&p->q);
	st->replay_requests = atomic_load(&p->replay_requests);
	st->replay_batches = atomic_load(&p->replay_batches);
	st->replay_bad = atomic_load(&p->replay_bad);
	st->replay_limited = atomic_load(&p->replay_limited);
	st->buffered = atomic_load(&p->buffered);
}

const char *ev_pub_endpoint(const struct ev_pub *p)
{
	return p->endpoint;
}

const char *ev_pub_replay_endpoint(const struct ev_pub *p)
{
	return p->replay_ep;
}

const char *ev_pub_node(const struct ev_pub *p)
{
	return p->node;
}
