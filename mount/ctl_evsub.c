/*
 * ctl_evsub.c - subscriber helpers shared by kvfsctl events and score.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "mount/ctl_evsub.h"

uint64_t evsub_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t evsub_after_ms(uint64_t ms)
{
	uint64_t now = evsub_now_ms();

	return ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
}

/* A batch is kilobytes; a publisher sending more is cut off, not
 * buffered. */
#define EVSUB_MAXMSG ((int64_t)16 << 20)

void *evsub_open(void *ctx, const char *cmd, const char *ep)
{
	void *s = zmq_socket(ctx, ZMQ_SUB);
	int64_t maxmsg = EVSUB_MAXMSG;
	int zero = 0;

	if (!s) {
		fprintf(stderr, "kvfsctl %s: %s\n", cmd, zmq_strerror(errno));
		return NULL;
	}
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
	if (zmq_setsockopt(s, ZMQ_SUBSCRIBE, "kv@", 3) ||
	    (strchr(ep, '*') ? zmq_bind(s, ep) : zmq_connect(s, ep))) {
		fprintf(stderr, "kvfsctl %s: %s: %s\n", cmd, ep,
			zmq_strerror(errno));
		zmq_close(s);
		return NULL;
	}
	return s;
}

void *evsub_replay(void *ctx, const char *cmd, const char *ep,
		   uint64_t start_seq)
{
	void *d = zmq_socket(ctx, ZMQ_DEALER);
	int64_t maxmsg = EVSUB_MAXMSG;
	unsigned char b[8];
	int zero = 0;

	if (!d) {
		fprintf(stderr, "kvfsctl %s: %s\n", cmd, zmq_strerror(errno));
		return NULL;
	}
	zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(d, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
	for (int i = 7; i >= 0; i--, start_seq >>= 8)
		b[i] = (unsigned char)start_seq;
	if (zmq_connect(d, ep) || zmq_send(d, "", 0, ZMQ_SNDMORE) < 0 ||
	    zmq_send(d, b, 8, 0) < 0) {
		fprintf(stderr, "kvfsctl %s: %s: %s\n", cmd, ep,
			zmq_strerror(errno));
		zmq_close(d);
		return NULL;
	}
	return d;
}

int evsub_recv(void *sock, bool replay, int timeout_ms, struct evsub_msg *m)
{
	zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
	zmq_msg_t fr[3];
	int n = 0, more = 1, rc = -1;
	size_t ml = sizeof(more);

	memset(m, 0, sizeof(*m));
	if (zmq_poll(&it, 1, timeout_ms) <= 0)
		return 0;
	while (more) {
		zmq_msg_t f;
		zmq_msg_init(&f);
		if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f);
			break;
		}
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
		if (n < 3)
			fr[n] = f;
		else
			zmq_msg_close(&f);
		n++;
	}
	/* PUB: topic, seq, payload. Replay (DEALER): "", seq, payload. */
	if (n != 3 || zmq_msg_size(&fr[1]) != 8 ||
	    (replay && zmq_msg_size(&fr[0]) != 0)) {
		fprintf(stderr, "kvfsctl: skipped a malformed message (%d frames)\n",
			n);
		goto out;
	}
	if (!replay) {
		size_t tl = zmq_msg_size(&fr[0]);
		if (tl >= sizeof(m->topic))
			tl = sizeof(m->topic) - 1;
		memcpy(m->topic, zmq_msg_data(&fr[0]), tl);
		m->topic[tl] = 0;
	}
	const unsigned char *s = zmq_msg_data(&fr[1]);
	for (int i = 0; i < 8; i++)
		m->seq = m->seq << 8 | s[i];
	m->replayed = replay;
	m->end = replay && m->seq == UINT64_MAX;
	m->len = zmq_msg_size(&fr[2]);
	m->payload = malloc(m->len ? m->len : 1);
	if (!m->payload)
		goto out;
	memcpy(m->payload, zmq_msg_data(&fr[2]), m->len);
	rc = 1;
out:
	for (int i = 0; i < n && i < 3; i++)
		zmq_msg_close(&fr[i]);
	return rc;
}

bool evsub_topic(char *topic, char **node, char **ns)
{
	char *a, *b;

	if (strncmp(topic, "kv@", 3))
		return false;
	a = topic + 3;
	b = strchr(a, '@');
	if (!b)
		return false;
	*b = 0;
	*node = a;
	*ns = b + 1;
	return true;
}
