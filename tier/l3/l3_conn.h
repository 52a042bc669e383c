/*
 * l3_conn.h - connections to one Redis server (an L3 node): a small pool
 * of hiredis connections, AUTH on connect, a pipeline of commands per
 * call, and a deadline on everything.
 *
 * hiredis opens the connection (redisConnectWithTimeout: name resolution,
 * a connect bounded by the deadline) and parses replies (its reader); the
 * bytes are moved here, on a non-blocking socket with poll(), so that a
 * whole pipeline, whatever the number of commands and the size of the
 * values, is bounded by one deadline and not per system call.
 *
 * Failures: a connection that fails (refused, reset, timed out, a protocol
 * error) is closed, never reused (its replies would be out of step), and
 * the node backs off: calls fail at once with -EHOSTDOWN until
 * backoff_ms has passed, the backoff doubling up to L3_BACKOFF_MAX_MS
 * while reconnections fail, back to the start once one works.
 *
 * Thread safety: every function may be called from any thread; each call
 * uses one pooled connection of its own. All functions return 0 (or a
 * count) or a negative errno and never set errno.
 */
#ifndef KVFS_L3_CONN_H
#define KVFS_L3_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/l3/l3_slot.h"

#define L3_POOL_MAX 8          /* connections per node */
#define L3_BACKOFF_MIN_MS 50
#define L3_BACKOFF_MAX_MS 1000

struct redisReply;

struct l3_conn_cfg {
	const char *user;      /* AUTH user; NULL = the default user */
	const char *password;  /* AUTH on each new connection; NULL = none */
	int pool;              /* connections per node, 1..L3_POOL_MAX */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

/* Counters of one node (atomics: read them any time). */
struct l3_conn_stats {
	_Atomic uint64_t connects;   /* connections made */
	_Atomic uint64_t failures;   /* connections lost or refused */
	_Atomic uint64_t timeouts;   /* pipelines past their deadline */
	_Atomic uint64_t backoffs;   /* calls refused while backing off */
	_Atomic uint64_t roundtrips; /* pipelines sent */
};

/* One formatted command (RESP bytes, e.g. from redisFormatCommandArgv). */
struct l3_cmd {
	const char *buf;
	size_t len;
};

struct l3_node;

/* l3_node_new - a node for addr (nothing is connected yet). cfg is copied
 * (the password too). NULL when out of memory. */
struct l3_node *l3_node_new(const struct l3_addr *addr,
			    const struct l3_conn_cfg *cfg);
void l3_node_free(struct l3_node *n);
const struct l3_addr *l3_node_addr(const struct l3_node *n);
struct l3_conn_stats *l3_node_stats(struct l3_node *n);
/* true while the node backs off after a failure */
bool l3_node_down(struct l3_node *n);

/*
 * l3_node_pipeline - sends ncmd commands in one write and reads their
 * ncmd replies (replies[i], freeReplyObject each), all before deadline_ns
 * (CLOCK_MONOTONIC, see l3_now_ns). A Redis error reply is a reply
 * (REDIS_REPLY_ERROR), not a failure.
 * Errors (replies all NULL): -EHOSTDOWN (backing off), -ETIMEDOUT (the
 * deadline passed, in connect, AUTH, send or receive), -ECONNREFUSED,
 * -ECONNRESET, -EPIPE, -EPROTO (unparsable reply), -EACCES (AUTH refused),
 * -ENOMEM.
 */
int l3_node_pipeline(struct l3_node *n, const struct l3_cmd *cmds,
		     size_t ncmd, struct redisReply **replies,
		     uint64_t deadline_ns);

/*
 * The same in two halves, so one deadline covers pipelines to several
 * nodes at once (send to each, then receive from each): l3_pipe_send
 * takes a connection and sends (its error is also returned by
 * l3_pipe_recv), l3_pipe_recv MUST follow every l3_pipe_send (it gives
 * the connection back). cmds must stay valid until l3_pipe_recv returns.
 * idle_ns (0 = none): the pipe also fails once idle_ns pass with no byte
 * sent or received, so deadline_ns can allow for the transfer of large
 * values while a server that stopped answering is given up on sooner.
 */
struct l3_pipe {
	struct l3_node *n;
	const struct l3_cmd *cmds;
	size_t ncmd;
	uint64_t idle_ns;
	int slot, err, tries;
	bool fresh;
};
int l3_pipe_send(struct l3_pipe *p, struct l3_node *n,
		 const struct l3_cmd *cmds, size_t ncmd, uint64_t deadline_ns,
		 uint64_t idle_ns);
int l3_pipe_recv(struct l3_pipe *p, struct redisReply **replies,
		 uint64_t deadline_ns);

/*
 * A bulk string reply received straight into the caller's memory (the
 * GET of a chunk: no copy through hiredis's reader buffer, no reply
 * object of the value's size). begin(len) is called once the reply is
 * known to be a bulk string of len bytes; then, until len bytes are in,
 * room says where the next bytes go (*cap > 0 bytes at *buf) and got(n)
 * that n of them arrived there. A non-zero return from any of them stops
 * the transfer: the connection is closed (its reply is not read to the
 * end) without counting the node as failed. Time spent in begin and got
 * (taking L1 room, decoding) does not count against the deadlines.
 */
struct l3_sink {
	int (*begin)(void *arg, uint64_t len);
	int (*room)(void *arg, void **buf, size_t *cap);
	int (*got)(void *arg, size_t n);
	void *arg;
};

/*
 * l3_pipe_recv_bulk - l3_pipe_recv for a pipe whose last command's reply
 * may be a large bulk string (the replies before it, an ASKING's +OK, are
 * read and freed). Returns 0 (the bulk string went to sink whole), 1 (any
 * other reply, parsed whole into *other: nil, an error such as MOVED; the
 * caller frees it), the sink's error (*sink_err set), or l3_pipe_recv's
 * errors. A pooled connection the server had closed is retried once, as
 * by l3_pipe_recv, while sink has not been called yet.
 */
int l3_pipe_recv_bulk(struct l3_pipe *p, const struct l3_sink *sink,
		      struct redisReply **other, bool *sink_err,
		      uint64_t deadline_ns);

/* l3_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t l3_now_ns(void);

#endif /* KVFS_L3_CONN_H */
