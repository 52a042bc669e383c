/*
 * ctl_evsub.h - the subscriber side of KV events for kvfsctl events and
 * kvfsctl score: a SUB socket on one endpoint, replay requests to a
 * ROUTER, and one message at a time, frames checked.
 */
#ifndef KVFS_CTL_EVSUB_H
#define KVFS_CTL_EVSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One received message. topic is NUL-terminated (empty for replayed
 * batches: vLLM's replay frames carry no topic). */
struct evsub_msg {
	char topic[512];
	uint64_t seq;
	bool end;        /* a replay's end marker (seq -1) */
	bool replayed;
	void *payload;   /* malloc'd */
	size_t len;
};

/* Opens a SUB socket on ep (bound when ep contains '*', else connected)
 * subscribed to every topic starting with "kv@". Returns the socket, or
 * NULL after printing why ("kvfsctl CMD: ENDPOINT: reason"). ctx is a
 * zmq context. */
void *evsub_open(void *ctx, const char *cmd, const char *ep);

/* Opens a DEALER on the replay endpoint and asks for every batch from
 * start_seq on. NULL after printing why. */
void *evsub_replay(void *ctx, const char *cmd, const char *ep,
		   uint64_t start_seq);

/*
 * evsub_recv - receives one message from sock within timeout_ms (-1 =
 * forever). Returns 1 (m filled: free m->payload), 0 on timeout, -1 on a
 * malformed message (wrong frame count or sequence length: skipped, with
 * a message on stderr) or a socket error.
 */
int evsub_recv(void *sock, bool replay, int timeout_ms, struct evsub_msg *m);

/* Splits "kv@node@ns" into node and ns (pointers into topic, which is
 * modified). false when the topic has another shape. */
bool evsub_topic(char *topic, char **node, char **ns);

/* Monotonic milliseconds. */
uint64_t evsub_now_ms(void);

/* evsub_now_ms() + ms, saturating: a huge --duration-ms is "forever", not
 * a sum that wraps into the past. */
uint64_t evsub_after_ms(uint64_t ms);

#endif
