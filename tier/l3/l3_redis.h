/*
 * l3_redis.h - a Redis client for L3 that speaks to one standalone server
 * or to a Redis Cluster: hiredis 0.14 has no cluster support, so routing
 * is here (slots from tier/l3/l3_slot.h, connections from tier/l3/l3_conn.h).
 *
 * Cluster: the slot map comes from CLUSTER SLOTS, asked at open and again
 * (by a thread of its own, at most every L3R_REFRESH_MIN_MS) after a
 * MOVED or a node failure. A MOVED reply updates the slot at once and the
 * command is sent again to the node named; an ASK sends ASKING + the
 * command to the node named, once, without touching the map. At most
 * L3R_MAX_REDIRECTS redirections per command; after that, or when the
 * slot's node is down or unknown, the command fails (the caller counts a
 * miss).
 *
 * Batches: l3r_batch groups commands by node and sends one pipeline per
 * node, all pipelines first, then reads the replies, so a batch costs one
 * round trip (the slowest node's) plus one more for redirected commands,
 * and is bounded by one deadline in all.
 *
 * Thread safety: everything may be called from any thread.
 * Return values: 0 (or a count) or a negative errno; errno is never set.
 */
#ifndef KVFS_L3_REDIS_H
#define KVFS_L3_REDIS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/l3/l3_conn.h"

#define L3R_MAX_NODES 64
#define L3R_MAX_REDIRECTS 2
#define L3R_REFRESH_MIN_MS 100

struct redisReply;

enum l3r_mode {
	L3R_AUTO = 0,    /* ask the server (CLUSTER SLOTS) */
	L3R_CLUSTER,
	L3R_STANDALONE,
};

struct l3r_config {
	/* "redis://HOST:PORT[,HOST:PORT...]" (the scheme is optional): the
	 * seeds of a cluster, or the one standalone server */
	const char *servers;
	enum l3r_mode mode;
	const char *user;     /* AUTH user (ACL); NULL = the default user */
	const char *password; /* NULL = no AUTH */
	int timeout_ms;       /* the default bound of an operation */
	int pool;             /* connections per node (0 = 4) */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

struct l3r_stats {
	uint64_t nodes;       /* nodes known (seeds and those of the map) */
	uint64_t nodes_down;  /* of which backing off now */
	uint64_t cluster;     /* 1 cluster, 0 standalone or not known yet */
	uint64_t moved, ask;  /* redirections followed */
	uint64_t refreshes;   /* slot maps loaded */
	uint64_t connects, failures, timeouts, backoffs, roundtrips;
};

/* One command of a batch. The caller fills key/klen (what routes it) and
 * cmd (formatted RESP, e.g. l3r_format); l3r_batch fills reply and err. */
struct l3r_op {
	const char *key;
	size_t klen;
	struct l3_cmd cmd;
	struct redisReply *reply; /* on err == 0: the reply (the caller
				   * frees it); never a redirection */
	int err;
	/* private */
	int node;
	bool ask;
	uint8_t hops;
};

struct l3r;

/*
 * l3r_open - parses servers and, when reachable within timeout_ms, learns
 * the mode (auto) and the slot map. Unreachable servers do not fail the
 * open: the client retries in the background and fails operations with
 * -EHOSTDOWN meanwhile. Errors (a reason in err): -EINVAL (bad address
 * list, several addresses with L3R_STANDALONE, cluster asked of a
 * standalone server or the other way round), -EACCES (AUTH refused),
 * -EPERM (the server wants a password and none was given), -ENOMEM.
 */
int l3r_open(const struct l3r_config *cfg, struct l3r **out, char *err,
	     size_t errlen);
void l3r_close(struct l3r *r);

/*
 * l3r_batch - runs ops (each on its key's node, redirections followed)
 * before deadline_ns (CLOCK_MONOTONIC, l3_now_ns()), and gives up on a
 * node sooner when timeout_ms pass without a byte moving (so a deadline
 * may allow for large values without waiting as long on a server that
 * stopped answering). Each op gets its own
 * err: -EHOSTDOWN (node backing off or slot not served), -ETIMEDOUT,
 * -ECONNREFUSED..., -EREMOTEIO (an error reply: the reply is kept),
 * -ELOOP (too many redirections). Returns the number of ops with err 0.
 */
long l3r_batch(struct l3r *r, struct l3r_op *ops, size_t n,
	       uint64_t deadline_ns);
/* l3r_batch_idle - the same, giving up on a node after idle_ns without a
 * byte moving instead of timeout_ms (0 = timeout_ms): the writers' own
 * bound (l3_write_timeout_ms). */
long l3r_batch_idle(struct l3r *r, struct l3r_op *ops, size_t n,
		    uint64_t deadline_ns, uint64_t idle_ns);

/*
 * l3r_get_bulk - runs one command (cmd, routed by key as l3r_batch does,
 * redirections followed) whose reply, when a bulk string, goes straight
 * to sink (l3_pipe_recv_bulk: no reply object of the value's size).
 * Returns 0 (the value went to sink whole), 1 (another reply, not an
 * error, in *other: nil for a GET of no key; the caller frees it),
 * -EREMOTEIO (an error reply), the sink's error (*sink_err), or
 * l3r_batch's errors. A redirection comes before any byte of a value, so
 * a sink only ever sees the value of the node that owns the key.
 */
long l3r_get_bulk(struct l3r *r, const char *key, size_t klen,
		  const struct l3_cmd *cmd, const struct l3_sink *sink,
		  struct redisReply **other, bool *sink_err,
		  uint64_t deadline_ns);

/* l3r_format - formats argv as one RESP command into cmd (free it with
 * l3r_cmd_free). -ENOMEM. */
int l3r_format(struct l3_cmd *cmd, int argc, const char **argv,
	       const size_t *lens);
void l3r_cmd_free(struct l3_cmd *cmd);

/*
 * l3r_each_master - calls fn once per master (every node serving slots,
 * or the standalone server) with that node; stops at the first non-zero
 * return and returns it. Used for commands that are not about one key
 * (SCAN, INFO).
 */
int l3r_each_master(struct l3r *r,
		    int (*fn)(void *arg, struct l3_node *node), void *arg);

/* l3r_mode_now - L3R_CLUSTER, L3R_STANDALONE, or L3R_AUTO while unknown. */
enum l3r_mode l3r_mode_now(struct l3r *r);

void l3r_get_stats(struct l3r *r, struct l3r_stats *st);

#endif /* KVFS_L3_REDIS_H */
