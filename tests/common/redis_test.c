/*
 * redis_test.c - real Redis servers for the L3 tests (redis_test.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define RT_MAX 16

/* Every server started, for the teardown (pids only: signal-safe). */
static pid_t rt_pids[RT_MAX];
static pid_t rt_owner;
static char rt_dirs[RT_MAX][PATH_MAX];
static int rt_installed;

static void rt_cleanup(void)
{
	if (getpid() != rt_owner)
		return;
	for (int i = 0; i < RT_MAX; i++)
		if (rt_pids[i] > 0) {
			kill(rt_pids[i], SIGKILL);
			waitpid(rt_pids[i], NULL, 0);
			rt_pids[i] = 0;
		}
	for (int i = 0; i < RT_MAX; i++)
		if (rt_dirs[i][0]) {
			char cmd[PATH_MAX + 16];

			snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", PATH_MAX - 1,
				 rt_dirs[i]);
			if (system(cmd)) { /* best effort */ }
			rt_dirs[i][0] = '\0';
		}
}

static void rt_signal(int sig)
{
	for (int i = 0; i < RT_MAX; i++)
		if (rt_pids[i] > 0)
			kill(rt_pids[i], SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void rt_install(void)
{
	if (rt_installed)
		return;
	rt_installed = 1;
	rt_owner = getpid();
	atexit(rt_cleanup);
	signal(SIGINT, rt_signal);
	signal(SIGTERM, rt_signal);
	signal(SIGHUP, rt_signal);
}

static void rt_track(pid_t pid, pid_t old)
{
	for (int i = 0; i < RT_MAX; i++)
		if (rt_pids[i] == old) {
			rt_pids[i] = pid;
			return;
		}
}

static int in_path(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

const char *rt_skip_reason(void)
{
	if (!in_path("redis-server"))
		return "redis-server is not installed (make deps installs it)";
	if (!in_path("redis-cli"))
		return "redis-cli is not installed (make deps installs "
		       "redis-tools)";
	return NULL;
}

static int port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* A free port whose cluster bus port (+10000) is free too. */
static int pick_port(void)
{
	static unsigned seed;

	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (int tries = 0; tries < 200; tries++) {
		int p = 20000 + (int)(rand_r(&seed) % 25000);

		if (port_free(p) && port_free(p + 10000))
			return p;
	}
	return -1;
}

static int ping(const struct rt_server *s)
{
	struct timeval tv = { 0, 200000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
	redisReply *r;
	int ok = 0;

	if (!c || c->err)
		goto out;
	redisSetTimeout(c, tv);
	if (s->password[0]) {
		r = redisCommand(c, "AUTH %s", s->password);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			if (r)
				freeReplyObject(r);
			goto out;
		}
		freeReplyObject(r);
	}
	r = redisCommand(c, "PING");
	ok = r && r->type == REDIS_REPLY_STATUS;
	if (r)
		freeReplyObject(r);
out:
	if (c)
		redisFree(c);
	return ok;
}

static int spawn(struct rt_server *s)
{
	char port[16], logf[PATH_MAX + 16], conf[64];
	const char *argv[40];
	int n = 0;
	pid_t pid, parent = getpid();

	snprintf(port, sizeof(port), "%d", s->port);
	snprintf(logf, sizeof(logf), "%s/redis.log", s->dir);
	snprintf(conf, sizeof(conf), "nodes-%d.conf", s->port);
	argv[n++] = "redis-server";
	argv[n++] = "--port"; argv[n++] = port;
	argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
	argv[n++] = "--dir"; argv[n++] = s->dir;
	argv[n++] = "--save"; argv[n++] = "";
	argv[n++] = "--appendonly"; argv[n++] = "no";
	argv[n++] = "--daemonize"; argv[n++] = "no";
	argv[n++] = "--logfile"; argv[n++] = logf;
	argv[n++] = "--maxmemory"; argv[n++] = "512mb";
	argv[n++] = "--maxmemory-policy"; argv[n++] = "allkeys-lru";
	if (s->cluster) {
		argv[n++] = "--cluster-enabled"; argv[n++] = "yes";
		argv[n++] = "--cluster-config-file"; argv[n++] = conf;
		argv[n++] = "--cluster-node-timeout"; argv[n++] = "1000";
		/* the other masters keep serving their slots when one is lost */
		argv[n++] = "--cluster-require-full-coverage"; argv[n++] = "no";
		/* a replica takes over however long it was cut off */
		argv[n++] = "--cluster-replica-validity-factor"; argv[n++] = "0";
	}
	if (s->password[0]) {
		argv[n++] = "--requirepass"; argv[n++] = s->password;
		argv[n++] = "--masterauth"; argv[n++] = s->password;
	}
	argv[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		/* dies with the test, however the test dies */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	s->pid = pid;
	for (int i = 0; i < 100; i++) { /* 10 s */
		struct timespec ts = { 0, 100000000 };
		int st;

		if (ping(s))
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "redis-server on port %d exited (see %s)\n",
				s->port, logf);
			s->pid = 0;
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "redis-server on port %d did not answer\n", s->port);
	return -1;
}

int rt_start(struct rt_server *s, bool cluster, const char *password)
{
	int slot = -1;

	rt_install();
	memset(s, 0, sizeof(*s));
	s->cluster = cluster;
	snprintf(s->password, sizeof(s->password), "%s",
		 password ? password : "");
	snprintf(s->dir, sizeof(s->dir), "/tmp/kvfs-redis-XXXXXX");
	if (!mkdtemp(s->dir)) {
		perror("mkdtemp");
		return -1;
	}
	for (int i = 0; i < RT_MAX; i++)
		if (!rt_dirs[i][0]) {
			snprintf(rt_dirs[i], PATH_MAX, "%s", s->dir);
			break;
		}
	for (int i = 0; i < RT_MAX; i++)
		if (!rt_pids[i]) {
			slot = i;
			rt_pids[i] = -1; /* reserved */
			break;
		}
	if (slot < 0)
		return -1;
	for (int tries = 0; tries < 5; tries++) {
		s->port = pick_port();
		if (s->port < 0)
			break;
		if (spawn(s) == 0) {
			rt_pids[slot] = s->pid;
			return 0;
		}
		if (s->pid) { /* started but deaf: not ours to keep */
			kill(s->pid, SIGKILL);
			waitpid(s->pid, NULL, 0);
			s->pid = 0;
		}
	}
	rt_pids[slot] = 0;
	return -1;
}

int rt_restart(struct rt_server *s)
{
	if (s->pid)
		return 0;
	if (spawn(s))
		return -1;
	rt_track(s->pid, -2);
	return 0;
}

void rt_stop(struct rt_server *s, bool hard)
{
	if (!s->pid)
		return;
	kill(s->pid, SIGCONT);
	kill(s->pid, hard ? SIGKILL : SIGTERM);
	waitpid(s->pid, NULL, 0);
	rt_track(-2, s->pid); /* its slot waits for rt_restart */
	s->pid = 0;
}

void rt_pause(struct rt_server *s)
{
	if (s->pid)
		kill(s->pid, SIGSTOP);
}

void rt_resume(struct rt_server *s)
{
	if (s->pid)
		kill(s->pid, SIGCONT);
}

int rt_cli(const struct rt_server *s, char *out, size_t outlen, ...)
{
	const char *argv[32];
	char port[16];
	int n = 0;
	va_list ap;

	snprintf(port, sizeof(port), "%d", s->port);
	argv[n++] = "redis-cli";
	argv[n++] = "-h"; argv[n++] = "127.0.0.1";
	argv[n++] = "-p"; argv[n++] = port;
	if (s->password[0]) {
		argv[n++] = "--no-auth-warning";
		argv[n++] = "-a"; argv[n++] = s->password;
	}
	va_start(ap, outlen);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	return kvfs_test_run(argv, out, outlen);
}

char *rt_url(const struct rt_server *s, char *buf, size_t len)
{
	snprintf(buf, len, "redis://127.0.0.1:%d", s->port);
	return buf;
}

char *rt_cluster_url(const struct rt_cluster *c, char *buf, size_t len)
{
	snprintf(buf, len, "redis://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
		 c->node[0].port, c->node[1].port, c->node[2].port);
	return buf;
}

int rt_cluster_start_replicas(struct rt_cluster *c, const char *password,
			      int replicas)
{
	char a[RT_CLUSTER_MAX][32], out[8192], nrep[16];
	const char *argv[32];
	int n = 0, rc;

	c->n = RT_CLUSTER_N * (1 + replicas);
	if (replicas < 0 || c->n > RT_CLUSTER_MAX)
		return -1;
	for (int i = 0; i < c->n; i++)
		if (rt_start(&c->node[i], true, password))
			return -1;
	argv[n++] = "redis-cli";
	if (password && *password) {
		argv[n++] = "--no-auth-warning";
		argv[n++] = "-a";
		argv[n++] = password;
	}
	argv[n++] = "--cluster";
	argv[n++] = "create";
	for (int i = 0; i < c->n; i++) {
		snprintf(a[i], sizeof(a[i]), "127.0.0.1:%d", c->node[i].port);
		argv[n++] = a[i];
	}
	snprintf(nrep, sizeof(nrep), "%d", replicas);
	argv[n++] = "--cluster-replicas";
	argv[n++] = nrep;
	argv[n++] = "--cluster-yes";
	argv[n] = NULL;
	rc = kvfs_test_run(argv, out, sizeof(out));
	if (rc) {
		fprintf(stderr, "redis-cli --cluster create: %d\n%s\n", rc, out);
		return -1;
	}
	return rt_cluster_wait(c);
}

int rt_cluster_start(struct rt_cluster *c, const char *password)
{
	return rt_cluster_start_replicas(c, password, 0);
}

int rt_cluster_wait(struct rt_cluster *c)
{
	char out[8192];

	for (int t = 0; t < 200; t++) { /* 20 s */
		struct timespec ts = { 0, 100000000 };
		int ok = 0, up = 0;

		char known[32];

		snprintf(known, sizeof(known), "cluster_known_nodes:%d", c->n);
		for (int i = 0; i < c->n; i++) {
			if (!c->node[i].pid)
				continue;
			up++;
			if (rt_cli(&c->node[i], out, sizeof(out), "CLUSTER",
				   "INFO", NULL) == 0 &&
			    strstr(out, "cluster_state:ok") &&
			    strstr(out, known))
				ok++;
		}
		if (ok == up)
			return 0;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "the cluster did not reach cluster_state:ok\n");
	return -1;
}

void rt_cluster_stop(struct rt_cluster *c)
{
	for (int i = 0; i < c->n; i++)
		rt_stop(&c->node[i], true);
}

int rt_auth_file(char *tmpl, const char *pw)
{
	int fd = mkstemp(tmpl);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fprintf(f, "%s\n", pw);
	return fclose(f) ? -1 : 0;
}
