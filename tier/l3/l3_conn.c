/*
 * l3_conn.c - a pool of connections to one Redis server, pipelines bounded
 * by a deadline, AUTH, and reconnection with backoff (see l3_conn.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3_conn.h"

#define L3_READ_CHUNK (128u << 10)
#define L3_READER_KEEP (4u << 20) /* reader buffer kept per connection */

struct l3_pc {
	redisContext *c; /* NULL: not connected */
	bool busy;       /* taken by a call */
	bool used;       /* has completed a pipeline (not fresh) */
};

struct l3_node {
	struct l3_addr addr;     /* immutable */
	char *password;          /* immutable, NULL = none */
	char *user;              /* immutable, NULL = the default user */
	int pool;                /* immutable */
	void (*log)(void *arg, const char *msg);
	void *log_arg;

	pthread_mutex_t mu;      /* protects the fields below */
	pthread_cond_t cv;       /* a connection was given back */
	struct l3_pc pc[L3_POOL_MAX];
	uint64_t down_until_ns;  /* backing off until then */
	int backoff_ms;          /* the next backoff */
	bool down;               /* logged as down */

	struct l3_conn_stats st; /* atomics */
};

uint64_t l3_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void node_logf(struct l3_node *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void node_logf(struct l3_node *n, const char *fmt, ...)
{
	char msg[384];
	int k;
	va_list ap;

	if (!n->log)
		return;
	k = snprintf(msg, sizeof(msg), "l3 %s:%d: ", n->addr.host,
		     n->addr.port);
	va_start(ap, fmt);
	vsnprintf(msg + k, sizeof(msg) - (size_t)k, fmt, ap);
	va_end(ap);
	n->log(n->log_arg, msg);
}

struct l3_node *l3_node_new(const struct l3_addr *addr,
			    const struct l3_conn_cfg *cfg)
{
	struct l3_node *n = calloc(1, sizeof(*n));
	pthread_condattr_t ca;

	if (!n)
		return NULL;
	n->addr = *addr;
	if ((cfg->password && !(n->password = strdup(cfg->password))) ||
	    (cfg->user && !(n->user = strdup(cfg->user)))) {
		free(n->password);
		free(n);
		return NULL;
	}
	n->pool = cfg->pool < 1 ? 1 : cfg->pool > L3_POOL_MAX ? L3_POOL_MAX
							      : cfg->pool;
	n->log = cfg->log;
	n->log_arg = cfg->log_arg;
	n->backoff_ms = L3_BACKOFF_MIN_MS;
	pthread_mutex_init(&n->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	return n;
}

void l3_node_free(struct l3_node *n)
{
	if (!n)
		return;
	for (int i = 0; i < L3_POOL_MAX; i++)
		if (n->pc[i].c)
			redisFree(n->pc[i].c);
	if (n->password) {
		explicit_bzero(n->password, strlen(n->password));
		free(n->password);
	}
	free(n->user);
	pthread_mutex_destroy(&n->mu);
	pthread_cond_destroy(&n->cv);
	free(n);
}

const struct l3_addr *l3_node_addr(const struct l3_node *n)
{
	return &n->addr;
}

struct l3_conn_stats *l3_node_stats(struct l3_node *n)
{
	return &n->st;
}

bool l3_node_down(struct l3_node *n)
{
	bool down;

	pthread_mutex_lock(&n->mu);
	down = n->down_until_ns > l3_now_ns();
	pthread_mutex_unlock(&n->mu);
	return down;
}

/* ---------------------------------------------------------------- pool */

static void to_timespec(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Takes a connection slot (connected or not): its index, or -EHOSTDOWN,
 * -ETIMEDOUT. */
static int pool_take(struct l3_node *n, uint64_t deadline)
{
	struct timespec ts;
	int i, pick;

	to_timespec(deadline, &ts);
	pthread_mutex_lock(&n->mu);
	for (;;) {
		if (n->down_until_ns > l3_now_ns()) {
			pthread_mutex_unlock(&n->mu);
			atomic_fetch_add(&n->st.backoffs, 1);
			return -EHOSTDOWN;
		}
		pick = -1;
		for (i = 0; i < n->pool; i++) {
			if (n->pc[i].busy)
				continue;
			if (n->pc[i].c) {
				pick = i;
				break;
			}
			if (pick < 0)
				pick = i;
		}
		if (pick >= 0)
			break;
		if (pthread_cond_timedwait(&n->cv, &n->mu, &ts) == ETIMEDOUT) {
			pthread_mutex_unlock(&n->mu);
			return -ETIMEDOUT;
		}
	}
	n->pc[pick].busy = true;
	pthread_mutex_unlock(&n->mu);
	return pick;
}

/* Gives slot i back. err != 0: its connection is closed, so are the idle
 * ones (a server that reset one has reset them all) and the node backs
 * off; err 0 ends a backoff. */
static void pool_give(struct l3_node *n, int i, int err)
{
	redisContext *dead[L3_POOL_MAX];
	int ndead = 0;
	bool was_down;

	pthread_mutex_lock(&n->mu);
	was_down = n->down;
	if (err) {
		if (n->pc[i].c)
			dead[ndead++] = n->pc[i].c;
		n->pc[i].c = NULL;
		for (int j = 0; j < n->pool; j++)
			if (!n->pc[j].busy && n->pc[j].c) {
				dead[ndead++] = n->pc[j].c;
				n->pc[j].c = NULL;
			}
		n->down_until_ns = l3_now_ns() +
				   (uint64_t)n->backoff_ms * 1000000ull;
		n->backoff_ms = n->backoff_ms * 2 > L3_BACKOFF_MAX_MS
					? L3_BACKOFF_MAX_MS
					: n->backoff_ms * 2;
		n->down = true;
	} else {
		n->pc[i].used = true;
		n->backoff_ms = L3_BACKOFF_MIN_MS;
		n->down_until_ns = 0;
		n->down = false;
	}
	n->pc[i].busy = false;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
	for (int j = 0; j < ndead; j++)
		redisFree(dead[j]);
	if (err)
		atomic_fetch_add(&n->st.failures, 1);
	if (err && !was_down)
		node_logf(n, "down (%s), backing off", strerror(-err));
	else if (!err && was_down)
		node_logf(n, "reachable again");
}

/* Gives slot i back with its connection closed, the node not blamed: a
 * reply the caller stopped reading midway (its bytes are still coming). */
static void pool_discard(struct l3_node *n, int i)
{
	redisContext *c;

	pthread_mutex_lock(&n->mu);
	c = n->pc[i].c;
	n->pc[i].c = NULL;
	n->pc[i].busy = false;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
	if (c)
		redisFree(c);
}

/* --------------------------------------------------------------- I/O */

static int remaining_ts(uint64_t deadline, struct timespec *ts)
{
	uint64_t now = l3_now_ns();

	if (now >= deadline)
		return -ETIMEDOUT;
	to_timespec(deadline - now, ts);
	return 0;
}

static int conn_open(struct l3_node *n, uint64_t deadline, redisContext **out)
{
	struct timespec ts;
	struct timeval tv;
	redisContext *c;
	int fl, err;

	err = remaining_ts(deadline, &ts);
	if (err)
		return err;
	tv.tv_sec = ts.tv_sec;
	tv.tv_usec = ts.tv_nsec / 1000;
	if (!tv.tv_sec && !tv.tv_usec)
		tv.tv_usec = 1;
	c = redisConnectWithTimeout(n->addr.host, n->addr.port, tv);
	if (!c)
		return -ENOMEM;
	if (c->err) {
		err = strstr(c->errstr, "timed out") ? -ETIMEDOUT
		      : strstr(c->errstr, "refused") ? -ECONNREFUSED
						     : -EHOSTUNREACH;
		redisFree(c);
		return err;
	}
	/* keep the reader's buffer between replies of chunk size, instead
	 * of growing it again (copies, page faults) for every value */
	c->reader->maxbuf = L3_READER_KEEP;
	fl = fcntl(c->fd, F_GETFL);
	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err = -errno;
		redisFree(c);
		return err;
	}
	atomic_fetch_add(&n->st.connects, 1);
	*out = c;
	return 0;
}

/* Reads what the socket has into the reader. 0, -EAGAIN, or an error. */
static int conn_read(redisContext *c)
{
	char buf[L3_READ_CHUNK];
	ssize_t k = read(c->fd, buf, sizeof(buf));

	if (k > 0)
		return redisReaderFeed(c->reader, buf, (size_t)k) == REDIS_OK
			       ? 0
			       : -ENOMEM;
	if (k == 0)
		return -ECONNRESET;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
		       ? -EAGAIN
		       : -errno;
}

/* A wait's deadline: hard, or sooner when idle_ns pass without progress. */
struct l3_dl {
	uint64_t hard, idle, last;
};

static uint64_t dl_now(const struct l3_dl *dl)
{
	uint64_t soft = dl->last + dl->idle;

	return dl->idle && soft < dl->hard ? soft : dl->hard;
}

static void dl_progress(struct l3_dl *dl)
{
	if (dl->idle)
		dl->last = l3_now_ns();
}

/* The time since `since` went to the caller (a bulk reply's sink: L1
 * room, a decode), not to the server: both bounds move by it, so a
 * node is never blamed, nor backed off, for the engine's own pace. */
static void dl_pause(struct l3_dl *dl, uint64_t since)
{
	uint64_t spent = l3_now_ns() - since;

	dl->hard += spent;
	dl->last += spent;
}

static int conn_wait(redisContext *c, short events, struct l3_dl *dl,
		     short *revents)
{
	struct pollfd p = { .fd = c->fd, .events = events };
	struct timespec ts;
	int k, err;

	err = remaining_ts(dl_now(dl), &ts);
	if (err)
		return err;
	k = ppoll(&p, 1, &ts, NULL);
	if (k < 0)
		return errno == EINTR ? 0 : -errno;
	if (k == 0)
		return -ETIMEDOUT;
	if ((p.revents & (POLLERR | POLLNVAL)) ||
	    ((p.revents & POLLHUP) && !(p.revents & POLLIN)))
		return -ECONNRESET;
	*revents = p.revents;
	return 0;
}

/* Sends every command (reading replies that arrive meanwhile into the
 * reader, so neither side's buffers can fill up and stall the other). */
static int conn_send(redisContext *c, const struct l3_cmd *cmds, size_t n,
		     struct l3_dl *dl)
{
	size_t i = 0, off = 0; /* the next byte: cmds[i].buf + off */

	while (i < n) {
		struct iovec iov[64];
		int cnt = 0;
		ssize_t k;

		for (size_t j = i; j < n && cnt < 64; j++, cnt++) {
			iov[cnt].iov_base = (char *)cmds[j].buf +
					    (j == i ? off : 0);
			iov[cnt].iov_len = cmds[j].len - (j == i ? off : 0);
		}
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };

		/* MSG_NOSIGNAL: a reset connection is an error, not SIGPIPE */
		k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			short rev = 0;
			int err;

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			err = conn_wait(c, POLLOUT | POLLIN, dl, &rev);
			if (err)
				return err;
			if (rev & POLLIN) {
				err = conn_read(c);
				if (err && err != -EAGAIN)
					return err;
			}
			continue;
		}
		dl_progress(dl);
		while (k > 0) {
			size_t left = cmds[i].len - off;

			if ((size_t)k >= left) {
				k -= (ssize_t)left;
				i++;
				off = 0;
			} else {
				off += (size_t)k;
				k = 0;
			}
		}
	}
	return 0;
}

static int conn_recv(redisContext *c, redisReply **replies, size_t n,
		     struct l3_dl *dl)
{
	size_t got = 0;

	while (got < n) {
		void *r = NULL;
		short rev;
		int err;

		if (redisReaderGetReply(c->reader, &r) != REDIS_OK)
			return -EPROTO;
		if (r) {
			replies[got++] = r;
			continue;
		}
		err = conn_read(c);
		if (!err) {
			dl_progress(dl);
			continue;
		}
		if (err != -EAGAIN)
			return err;
		err = conn_wait(c, POLLIN, dl, &rev);
		if (err)
			return err;
	}
	return 0;
}

/* ------------------------------------------------------ bulk replies */

/* Bytes hiredis's reader holds and has not parsed: the head of the reply
 * (read into it in small pieces), or the start of a reply that came in
 * one read with the one before it (an ASKING's +OK). */
static size_t rd_left(const redisContext *c)
{
	return c->reader->len - c->reader->pos;
}

/* Up to cap bytes from the socket, waiting (bounded by dl) while it has
 * none; past the hard bound even while bytes keep coming (a GET is
 * bounded in all, l3.h). >0 or an error. */
static ssize_t sock_read(redisContext *c, void *dst, size_t cap,
			 struct l3_dl *dl)
{
	for (;;) {
		ssize_t k;
		short rev;
		int err;

		if (l3_now_ns() >= dl->hard)
			return -ETIMEDOUT;
		k = read(c->fd, dst, cap);

		if (k > 0) {
			dl_progress(dl);
			return k;
		}
		if (k == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		err = conn_wait(c, POLLIN, dl, &rev);
		if (err)
			return err;
	}
}

/* Up to cap bytes for the body: what the reader holds, then the socket
 * itself (straight into dst). >0 or an error. */
static ssize_t bulk_take(redisContext *c, void *dst, size_t cap,
			 struct l3_dl *dl)
{
	size_t left = rd_left(c);

	if (!left)
		return sock_read(c, dst, cap, dl);
	if (left > cap)
		left = cap;
	memcpy(dst, c->reader->buf + c->reader->pos, left);
	c->reader->pos += left;
	return (ssize_t)left;
}

/* Reads until the reader holds the reply's first line whole, or knows it
 * is not a bulk string of a length (*bulk false: hiredis parses it). A
 * bulk line is at most 23 bytes: it is read in small pieces, so the
 * body is not copied through the reader. 0 or an error. */
static int head_read(redisContext *c, bool *bulk, struct l3_dl *dl)
{
	for (;;) {
		const char *p = c->reader->buf + c->reader->pos;
		size_t left = rd_left(c);
		char buf[64];
		ssize_t k;

		if (left && (p[0] != '$' || (left > 1 && p[1] == '-'))) {
			*bulk = false;
			return 0;
		}
		if (left && memchr(p, '\n', left)) {
			*bulk = true;
			return 0;
		}
		if (left > 32)
			return -EPROTO;
		k = sock_read(c, buf, sizeof(buf), dl);
		if (k < 0)
			return (int)k;
		if (redisReaderFeed(c->reader, buf, (size_t)k) != REDIS_OK)
			return -ENOMEM;
	}
}

/* One reply: a bulk string to s (0), or another reply into *other (1). */
static int bulk_recv(redisContext *c, const struct l3_sink *s,
		     redisReply **other, bool *sink_err, bool *begun,
		     struct l3_dl *dl)
{
	uint64_t len = 0, done = 0, t0;
	const char *p, *eol;
	char crlf[2];
	bool bulk = false;
	void *none = NULL;
	int err = head_read(c, &bulk, dl);

	if (err)
		return err;
	if (!bulk) {
		err = conn_recv(c, other, 1, dl);
		return err ? err : 1;
	}
	p = c->reader->buf + c->reader->pos;
	eol = memchr(p, '\n', rd_left(c));
	if (eol - p < 3 || eol[-1] != '\r')
		return -EPROTO;
	for (const char *q = p + 1; q < eol - 1; q++) {
		if (*q < '0' || *q > '9' || len > (UINT64_MAX - 9) / 10)
			return -EPROTO;
		len = len * 10 + (uint64_t)(*q - '0');
	}
	c->reader->pos += (size_t)(eol - p) + 1;
	*begun = true;
	t0 = l3_now_ns();
	err = s->begin(s->arg, len);
	dl_pause(dl, t0);
	while (!err && done < len) {
		void *buf;
		size_t cap;
		ssize_t k;

		err = s->room(s->arg, &buf, &cap);
		if (err)
			break;
		if (cap > len - done)
			cap = (size_t)(len - done);
		k = bulk_take(c, buf, cap, dl);
		if (k < 0)
			return (int)k;
		done += (uint64_t)k;
		t0 = l3_now_ns();
		err = s->got(s->arg, (size_t)k);
		dl_pause(dl, t0);
	}
	if (err) {
		*sink_err = true;
		return err;
	}
	for (size_t i = 0; i < 2;) {
		ssize_t k = bulk_take(c, crlf + i, 2 - i, dl);

		if (k < 0)
			return (int)k;
		i += (size_t)k;
	}
	/* one reply, then nothing: anything else is out of step */
	if (crlf[0] != '\r' || crlf[1] != '\n' || rd_left(c))
		return -EPROTO;
	/* lets the reader drop the bytes consumed here (it does once 1 KiB
	 * of them piled up): nothing is left to parse, so no reply comes */
	if (c->reader->pos >= 1024 &&
	    (redisReaderGetReply(c->reader, &none) != REDIS_OK || none))
		return -EPROTO;
	return 0;
}

static void free_replies(redisReply **r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (r[i])
			freeReplyObject(r[i]);
		r[i] = NULL;
	}
}

/* AUTH [user] password on a fresh connection. */
static int conn_auth(struct l3_node *n, redisContext *c, uint64_t deadline)
{
	const char *argv[3] = { "AUTH", n->user, n->password };
	size_t lens[3] = { 4, n->user ? strlen(n->user) : 0,
			   strlen(n->password) };
	int argc = 3;
	redisReply *r = NULL;
	struct l3_cmd cmd;
	char *buf;
	int len, err;

	if (!n->user) { /* AUTH password: the default user */
		argv[1] = argv[2];
		lens[1] = lens[2];
		argc = 2;
	}
	len = redisFormatCommandArgv(&buf, argc, argv, lens);
	if (len < 0)
		return -ENOMEM;
	cmd.buf = buf;
	cmd.len = (size_t)len;
	struct l3_dl dl = { .hard = deadline };

	err = conn_send(c, &cmd, 1, &dl);
	explicit_bzero(buf, (size_t)len);
	redisFreeCommand(buf);
	if (!err)
		err = conn_recv(c, &r, 1, &dl);
	if (!err && r->type == REDIS_REPLY_ERROR) {
		node_logf(n, "AUTH refused: %.*s", (int)r->len, r->str);
		err = -EACCES;
	}
	if (r)
		freeReplyObject(r);
	return err;
}

/* Gives the pipe's connection back after a failure; true when the
 * failure was a pooled connection the server had closed while idle (a
 * restart, an idle timeout), which deserves one more try on a fresh one. */
static bool pipe_fail(struct l3_pipe *p, int err)
{
	struct l3_node *n = p->n;

	if (err == -ETIMEDOUT)
		atomic_fetch_add(&n->st.timeouts, 1);
	if (!p->fresh && n->pc[p->slot].used && p->tries++ == 0 &&
	    (err == -ECONNRESET || err == -EPIPE)) {
		redisContext *dead[L3_POOL_MAX];
		int ndead = 0;

		/* the idle ones are from before the reset too: all go, so
		 * the retry connects afresh */
		pthread_mutex_lock(&n->mu);
		for (int j = 0; j < n->pool; j++)
			if (j == p->slot || (!n->pc[j].busy && n->pc[j].c)) {
				if (n->pc[j].c)
					dead[ndead++] = n->pc[j].c;
				n->pc[j].c = NULL;
			}
		n->pc[p->slot].busy = false;
		pthread_cond_broadcast(&n->cv);
		pthread_mutex_unlock(&n->mu);
		for (int j = 0; j < ndead; j++)
			redisFree(dead[j]);
		p->slot = -1;
		return true;
	}
	pool_give(n, p->slot, err);
	p->slot = -1;
	p->err = err;
	return false;
}

int l3_pipe_send(struct l3_pipe *p, struct l3_node *n,
		 const struct l3_cmd *cmds, size_t ncmd, uint64_t deadline_ns,
		 uint64_t idle_ns)
{
	redisContext *c;
	int err;

	p->idle_ns = idle_ns;
	p->n = n;
	p->cmds = cmds;
	p->ncmd = ncmd;
	p->slot = -1;
	p->err = 0;
	p->tries = 0;
	if (!ncmd)
		return 0;
again:
	err = pool_take(n, deadline_ns);
	if (err < 0) {
		p->err = err;
		return err;
	}
	p->slot = err;
	c = n->pc[p->slot].c;
	p->fresh = !c;
	if (p->fresh) {
		err = conn_open(n, deadline_ns, &c);
		if (err)
			goto fail;
		n->pc[p->slot].c = c; /* the slot is ours: busy */
		n->pc[p->slot].used = false;
		if (n->password) {
			err = conn_auth(n, c, deadline_ns);
			if (err)
				goto fail;
		}
	}
	atomic_fetch_add(&n->st.roundtrips, 1);
	struct l3_dl dl = { .hard = deadline_ns, .idle = idle_ns,
			    .last = l3_now_ns() };

	err = conn_send(c, cmds, ncmd, &dl);
	if (!err)
		return 0;
fail:
	if (pipe_fail(p, err))
		goto again;
	return err;
}

int l3_pipe_recv(struct l3_pipe *p, struct redisReply **replies,
		 uint64_t deadline_ns)
{
	int err;

	for (size_t i = 0; i < p->ncmd; i++)
		replies[i] = NULL;
	if (!p->ncmd)
		return 0;
	for (;;) {
		if (p->err)
			return p->err;
		struct l3_dl dl = { .hard = deadline_ns, .idle = p->idle_ns,
				    .last = l3_now_ns() };

		err = conn_recv(p->n->pc[p->slot].c, replies, p->ncmd, &dl);
		if (!err) {
			pool_give(p->n, p->slot, 0);
			p->slot = -1;
			return 0;
		}
		free_replies(replies, p->ncmd);
		if (!pipe_fail(p, err))
			return err;
		/* the retry: a fresh connection, the same commands */
		l3_pipe_send(p, p->n, p->cmds, p->ncmd, deadline_ns,
			     p->idle_ns);
		p->tries = 1;
	}
}

int l3_pipe_recv_bulk(struct l3_pipe *p, const struct l3_sink *sink,
		      struct redisReply **other, bool *sink_err,
		      uint64_t deadline_ns)
{
	*other = NULL;
	*sink_err = false;
	if (!p->ncmd)
		return -EINVAL;
	for (;;) {
		redisContext *c;
		bool begun = false;
		int err = 0;

		if (p->err)
			return p->err;
		c = p->n->pc[p->slot].c;
		struct l3_dl dl = { .hard = deadline_ns, .idle = p->idle_ns,
				    .last = l3_now_ns() };

		for (size_t i = 0; i + 1 < p->ncmd && !err; i++) {
			redisReply *lead = NULL;

			err = conn_recv(c, &lead, 1, &dl);
			if (lead)
				freeReplyObject(lead);
		}
		if (!err)
			err = bulk_recv(c, sink, other, sink_err, &begun, &dl);
		if (err == 0 || err == 1) {
			pool_give(p->n, p->slot, 0);
			p->slot = -1;
			return err;
		}
		if (*sink_err) {
			pool_discard(p->n, p->slot);
			p->slot = -1;
			return err;
		}
		if (!pipe_fail(p, err) || begun)
			return err;
		/* the retry: a fresh connection, the same commands */
		l3_pipe_send(p, p->n, p->cmds, p->ncmd, deadline_ns,
			     p->idle_ns);
		p->tries = 1;
	}
}

int l3_node_pipeline(struct l3_node *n, const struct l3_cmd *cmds,
		     size_t ncmd, struct redisReply **replies,
		     uint64_t deadline_ns)
{
	struct l3_pipe p;

	l3_pipe_send(&p, n, cmds, ncmd, deadline_ns, 0);
	return l3_pipe_recv(&p, replies, deadline_ns);
}
