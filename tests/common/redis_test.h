/*
 * redis_test.h - real Redis servers for the L3 tests: a standalone
 * redis-server or a three-master Redis Cluster on free loopback ports, in
 * a temporary directory, torn down at exit, on a fatal signal, and (through
 * PR_SET_PDEATHSIG) whenever the test process dies, however it dies.
 */
#ifndef KVFS_REDIS_TEST_H
#define KVFS_REDIS_TEST_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct rt_server {
	int port;
	pid_t pid;           /* 0 when stopped */
	bool cluster;
	char dir[PATH_MAX];  /* its working directory */
	char password[64];   /* "" = none */
};

#define RT_CLUSTER_N 3   /* masters */
#define RT_CLUSTER_MAX 6 /* with one replica each */

struct rt_cluster {
	struct rt_server node[RT_CLUSTER_MAX];
	int n;            /* servers: masters first as created, then
			   * whatever redis-cli made replicas */
};

/* rt_skip_reason - NULL when redis-server and redis-cli are installed,
 * else why the L3 tests must skip. */
const char *rt_skip_reason(void);

/* rt_start - starts a server on a free port (password "" or NULL for
 * none; cluster-enabled with cluster) and waits until it answers PING.
 * 0 or -1 (printed why). */
int rt_start(struct rt_server *s, bool cluster, const char *password);

/* rt_restart - starts s again on the same port and directory. 0 / -1. */
int rt_restart(struct rt_server *s);

/* rt_stop - SIGKILL (hard: a crash, no goodbye on the sockets) or
 * SIGTERM, and reaps it. */
void rt_stop(struct rt_server *s, bool hard);

/* rt_pause / rt_resume - SIGSTOP / SIGCONT: a server that stops
 * answering but keeps its connections (a slow or partitioned server). */
void rt_pause(struct rt_server *s);
void rt_resume(struct rt_server *s);

/* rt_cluster_start - three cluster-enabled servers joined into one
 * cluster of three masters (redis-cli --cluster create --cluster-yes),
 * waited for until every node says cluster_state:ok. 0 / -1. */
int rt_cluster_start(struct rt_cluster *c, const char *password);
/* rt_cluster_start_replicas - the same with `replicas` replicas per
 * master (redis-cli --cluster-replicas): 3 * (1 + replicas) servers. */
int rt_cluster_start_replicas(struct rt_cluster *c, const char *password,
			      int replicas);
void rt_cluster_stop(struct rt_cluster *c);
/* rt_cluster_wait - waits until every running node says cluster_state:ok
 * (after a restart). 0 / -1. */
int rt_cluster_wait(struct rt_cluster *c);

/* rt_cli - runs redis-cli -p PORT [-a pw] ARGS... (NULL-terminated) and
 * captures its output into out. Returns the exit status or -1. */
int rt_cli(const struct rt_server *s, char *out, size_t outlen, ...);

/* rt_url - "redis://127.0.0.1:PORT" of one server, or of the three seeds
 * of a cluster, into buf. */
char *rt_url(const struct rt_server *s, char *buf, size_t len);
char *rt_cluster_url(const struct rt_cluster *c, char *buf, size_t len);

/* rt_auth_file - writes pw (and a newline) to a new file made from
 * tmpl ("/tmp/...-XXXXXX", replaced by its name), for l3_auth_file=.
 * 0 / -1. */
int rt_auth_file(char *tmpl, const char *pw);

#endif /* KVFS_REDIS_TEST_H */
