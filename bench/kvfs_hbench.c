/*
 * kvfs_hbench.c - the prefill -> decode hand-off (kvfs(7) HAND-OFF): two
 * mounts as two nodes on one loopback redis-server (then on a three-master
 * cluster). Node A publishes a request of CHUNKS chunks x LAYERS layers
 * (KIB KiB each, one chain per layer: kvfs_layer_keys) layer by layer at a
 * steady pace (a batched PUT per layer, then PACE ms); node B waits on
 * each layer and reads it with one waiting batched GET (kvfs_mget_wait).
 *
 * Reports, per server kind, with notifications on and off (re-check
 * only): the hand-off latency per layer (from A's PUT of the layer
 * returning to B's GET of it returning: median, p99, max), how long B
 * finishes after A's last publish, throughput with no pacing against a
 * raw hiredis SET + GET of the same bytes on the same server, the CPU
 * the decode daemon spends idle-waiting, and Redis commands per chunk.
 *
 *   kvfs_hbench [--chunks N] [--layers N] [--kib N] [--requests N]
 *               [--pace-ms N] [--no-cluster]
 *
 * Defaults: the issue's request, 64 x 32 x 256 KiB (512 MiB), 3 requests,
 * a layer every twice the time a raw SET + GET of one layer's bytes took
 * on the same server just before (--pace-ms N fixes it): a pace the
 * server takes. A's L3 writes are asynchronous through a bounded queue:
 * at a pace above what the server takes, the backlog (and the latency)
 * grows with every layer, and past the queue writes are dropped and never
 * reach B, whose wait then times out with the leading run, as when a
 * prefill dies.
 *
 * Starts its own redis-server(s) on free loopback ports (skips with 77
 * when redis-server is not installed) and mounts with $KVFS_MOUNT_BIN.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define NS "handoff.bf16"

static int nchunks = 64, nlayers = 32, kib = 256, requests = 3, pace_ms = -1;
static bool do_cluster = true;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);

	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[i < n ? i : n - 1];
}

/* ------------------------------------------------------------ a round */

struct req {
	struct kvfs_key *keys;   /* [layer * nchunks + chunk] */
	uint8_t *src, *dst;      /* nchunks * bytes each, per layer */
	double *t_pub, *t_got;   /* per layer */
	int afd, bfd, pace;
	size_t bytes;
	int err;
	/* unpaced (pace 0): A stays at most WINDOW layers ahead of B, as a
	 * prefill flow-controlled by its decode peer would: L3 writes are
	 * queued, and a burst past the queue is dropped, never handed off */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int got;                 /* mu: layers B has */
};

#define WINDOW 4

static void make_keys(struct req *r, uint64_t seed)
{
	uint32_t *tok = malloc((size_t)nchunks * 16 * sizeof(*tok));

	for (int i = 0; i < nchunks * 16; i++)
		tok[i] = (uint32_t)(seed * 1000003u + (uint64_t)i);
	for (int l = 0; l < nlayers; l++)
		kvfs_layer_keys(tok, (size_t)nchunks * 16, 16, 0, NULL, 0,
				(uint32_t)l, r->keys + (size_t)l * nchunks,
				(size_t)nchunks);
	free(tok);
}

static void *prefill_main(void *arg)
{
	struct req *r = arg;
	struct kvfs_io *io = calloc((size_t)nchunks, sizeof(*io));

	for (int l = 0; l < nlayers && !r->err; l++) {
		pthread_mutex_lock(&r->mu);
		while (!r->pace && !r->err && l - r->got >= WINDOW)
			pthread_cond_wait(&r->cv, &r->mu);
		pthread_mutex_unlock(&r->mu);
		for (int i = 0; i < nchunks; i++) {
			io[i].key = r->keys[(size_t)l * nchunks + i];
			io[i].buf = r->src + (size_t)i * r->bytes;
			io[i].len = r->bytes;
		}
		if (kvfs_mput(r->afd, io, (size_t)nchunks) != nchunks)
			r->err = 1;
		r->t_pub[l] = now_s();
		if (r->pace)
			sleep_ms(r->pace);
	}
	free(io);
	return NULL;
}

static void *decode_main(void *arg)
{
	struct req *r = arg;
	struct kvfs_io *io = calloc((size_t)nchunks, sizeof(*io));

	for (int l = 0; l < nlayers && !r->err; l++) {
		for (int i = 0; i < nchunks; i++) {
			io[i].key = r->keys[(size_t)l * nchunks + i];
			io[i].buf = r->dst + (size_t)i * r->bytes;
			io[i].len = r->bytes;
		}
		if (kvfs_mget_wait(r->bfd, io, (size_t)nchunks, 0, 60000) !=
		    nchunks)
			r->err = 2;
		r->t_got[l] = now_s();
		pthread_mutex_lock(&r->mu);
		r->got = l + 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	free(io);
	return NULL;
}

/* One request: A publishes, B waits and reads. 0 or -1. */
static int run_req(struct req *r, uint64_t seed)
{
	pthread_t a, b;

	make_keys(r, seed);
	r->err = 0;
	r->got = 0;
	pthread_create(&b, NULL, decode_main, r);
	sleep_ms(20); /* B is waiting before A starts */
	pthread_create(&a, NULL, prefill_main, r);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	if (!r->err && memcmp(r->src, r->dst, (size_t)nchunks * r->bytes)) {
		fprintf(stderr, "hbench: B read other bytes than A wrote\n");
		r->err = 3;
	}
	return r->err ? -1 : 0;
}

/* ----------------------------------------------------------- counters */

static long long redis_cmds(const struct rt_server *s, int n)
{
	char out[8192];
	long long sum = 0;

	for (int i = 0; i < n; i++) {
		char *p;

		if (rt_cli(&s[i], out, sizeof(out), "INFO", "stats", NULL))
			return -1;
		p = strstr(out, "total_commands_processed:");
		if (p)
			sum += atoll(p + 25);
	}
	return sum;
}

static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');
	/* fields 14, 15 (utime, stime) after the command */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ----------------------------------------------------- raw SET + GET */

/* SET then GET of n values of bytes, one connection per node, each key
 * sent straight to its node (learned before the clock starts), the time
 * of both passes. */
static double raw_setget(const struct rt_server *s, int nsrv, bool cluster,
			 const uint8_t *src, size_t bytes, int n)
{
	redisContext *c[RT_CLUSTER_MAX];
	int *node = calloc((size_t)n, sizeof(*node));
	double t0, t;

	for (int i = 0; i < nsrv; i++)
		c[i] = redisConnect("127.0.0.1", s[i].port);
	for (int i = 0; cluster && i < n; i++) {
		redisReply *rep = redisCommand(c[0], "EXISTS raw:%d", i);

		if (rep && rep->type == REDIS_REPLY_ERROR &&
		    !strncmp(rep->str, "MOVED", 5)) {
			int port = atoi(strrchr(rep->str, ':') + 1);

			while (node[i] < nsrv && s[node[i]].port != port)
				node[i]++;
			if (node[i] == nsrv)
				node[i] = 0;
		}
		if (rep)
			freeReplyObject(rep);
	}
	t0 = now_s();
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			redisReply *rep = pass ?
				redisCommand(c[node[i]], "GET raw:%d", i) :
				redisCommand(c[node[i]], "SET raw:%d %b", i,
					     src + (size_t)(i % nchunks) * bytes,
					     bytes);
			if (rep)
				freeReplyObject(rep);
		}
	t = now_s() - t0;
	for (int i = 0; i < nsrv; i++) {
		redisReply *rep = redisCommand(c[i], "FLUSHALL");

		if (rep)
			freeReplyObject(rep);
		redisFree(c[i]);
	}
	free(node);
	return t;
}

/* CONFIG SET maxmemory 0 then FLUSHALL on every node (each request
 * writes nchunks x nlayers chunks; the tests' servers start with
 * maxmemory 512mb and allkeys-lru, which evicts a request's chunks before
 * B reads them and leaves B waiting for bytes that are gone), so that
 * each request starts on an empty server. 0 or -1. */
static int redis_reset(const struct rt_server *s, int n)
{
	char out[256];

	for (int i = 0; i < n; i++)
		if (rt_cli(&s[i], out, sizeof(out), "CONFIG", "SET",
			   "maxmemory", "0", NULL) ||
		    rt_cli(&s[i], out, sizeof(out), "FLUSHALL", NULL))
			return -1;
	return 0;
}

/* ------------------------------------------------------------ a table */

static int one_setup(const char *kind, const char *url,
		     const struct rt_server *srv, int nsrv, bool cluster,
		     bool notify)
{
	struct kvfs_mnt a, b;
	struct req r;
	char opts[1024];
	size_t bytes = (size_t)kib << 10;
	size_t total = (size_t)nchunks * nlayers * bytes;
	uint64_t l1 = (uint64_t)total * 2 + (64u << 20);
	int nl = nlayers * requests, k = 0;
	double *lat = calloc((size_t)nl, sizeof(*lat)), tail = 0, t_raw,
	       t_kv, c0, c1;
	int pace;
	long long cmd0, cmd1;
	bool ok = true;
	const char *args[] = { "-f", "-o", opts, "@DIR@", NULL };

	snprintf(opts, sizeof(opts), "l1_size=%llu,max_chunk=%zu,l3=%s,"
		 "l3_ingest=all,compress=none,l3_timeout_ms=2000%s",
		 (unsigned long long)l1, bytes, url,
		 notify ? "" : ",l3_notify=0");
	if (kvfs_test_mount_args(&a, args))
		return -1;
	if (kvfs_test_mount_args(&b, args)) {
		kvfs_test_umount(&a);
		return -1;
	}
	memset(&r, 0, sizeof(r));
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	r.bytes = bytes;
	r.keys = calloc((size_t)nchunks * nlayers, sizeof(*r.keys));
	r.src = malloc((size_t)nchunks * bytes);
	r.dst = malloc((size_t)nchunks * bytes);
	r.t_pub = calloc((size_t)nlayers, sizeof(double));
	r.t_got = calloc((size_t)nlayers, sizeof(double));
	kvfs_test_fill(r.src, (size_t)nchunks * bytes, 7, 0);
	r.afd = kvfs_ns_open(a.dir, NS, KVFS_NS_CREATE, 0755);
	r.bfd = kvfs_ns_open(b.dir, NS, KVFS_NS_CREATE, 0755);
	sleep_ms(1000); /* subscriptions up */
	/* idle waiting: B waits 2 s on a chain nobody writes */
	{
		struct kvfs_key k1[1];
		uint32_t tok[16] = { 0xdead };

		kvfs_keys(tok, 16, 16, 99, NULL, 0, k1, 1);
		c0 = cpu_s(b.pid);
		kvfs_lookup_wait(r.bfd, k1, 1, 0, 0, 0, 2000, NULL);
		c1 = cpu_s(b.pid);
	}
	/* the pace: twice a raw SET + GET of one layer (best of 3) */
	r.pace = pace_ms;
	if (pace_ms < 0) {
		double best = 1e9;

		for (int q = 0; q < 3; q++) {
			double t = raw_setget(srv, nsrv, cluster, r.src, bytes,
					      nchunks);

			best = t < best ? t : best;
		}
		r.pace = (int)(2 * best * 1e3 + 1);
	}
	pace = r.pace;
	if (redis_reset(srv, nsrv)) {
		fprintf(stderr, "hbench: CONFIG SET / FLUSHALL failed\n");
		ok = false;
	}
	cmd0 = redis_cmds(srv, nsrv);
	for (int q = 0; ok && q < requests; q++) {
		if (q)
			redis_reset(srv, nsrv);
		if (run_req(&r, (uint64_t)q + 1)) {
			fprintf(stderr, "hbench: request failed (%d); A's L3 "
				"queue dropped %lld writes (a pace the server "
				"cannot take: --pace-ms)\n", r.err,
				kvfs_test_stat(&a, "l3", "queue_drops"));
			ok = false;
			break;
		}
		for (int l = 0; l < nlayers; l++)
			lat[k++] = r.t_got[l] - r.t_pub[l];
		tail += r.t_got[nlayers - 1] - r.t_pub[nlayers - 1];
	}
	cmd1 = redis_cmds(srv, nsrv);
	/* throughput: no pacing, A's first PUT to B's last GET; the best of
	 * two, and the raw baseline's best of three (the machine is shared:
	 * compare best with best) */
	r.pace = 0;
	t_kv = 1e9;
	for (int q = 0; ok && q < 2; q++) {
		double t0, t;

		redis_reset(srv, nsrv);
		t0 = now_s();
		if (run_req(&r, 1000 + (uint64_t)q)) {
			fprintf(stderr, "hbench: unpaced request failed (%d); "
				"A's L3 queue dropped %lld writes\n", r.err,
				kvfs_test_stat(&a, "l3", "queue_drops"));
			ok = false;
			break;
		}
		t = now_s() - t0;
		t_kv = t < t_kv ? t : t_kv;
	}
	redis_reset(srv, nsrv);
	t_raw = 1e9;
	for (int q = 0; q < 3; q++) {
		double t = raw_setget(srv, nsrv, cluster, r.src, bytes,
				      nchunks * nlayers);

		t_raw = t < t_raw ? t : t_raw;
	}
	if (ok) {
		double med = pct(lat, k, 0.5), p99 = pct(lat, k, 0.99);

		printf("%-10s %-7s %5d %9.2f %9.2f %9.2f %9.2f %8.0f %8.0f "
		       "%5.2f %7.3f %6.1f\n", kind, notify ? "on" : "off",
		       pace,
		       med * 1e3, p99 * 1e3, lat[k - 1] * 1e3,
		       tail / requests * 1e3,
		       (double)total / t_kv / 1e6, (double)total / t_raw / 1e6,
		       t_raw / t_kv, (c1 - c0) / 2.0,
		       (double)(cmd1 - cmd0) /
			       ((double)requests * nchunks * nlayers));
	}
	fflush(stdout);
	close(r.afd);
	close(r.bfd);
	kvfs_test_umount(&a);
	kvfs_test_umount(&b);
	free(r.keys);
	free(r.src);
	free(r.dst);
	free(r.t_pub);
	free(r.t_got);
	free(lat);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct rt_server s;
	struct rt_cluster c;
	char url[512];
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "0";

		if (!strcmp(argv[i], "--chunks"))
			nchunks = atoi(v), i++;
		else if (!strcmp(argv[i], "--layers"))
			nlayers = atoi(v), i++;
		else if (!strcmp(argv[i], "--kib"))
			kib = atoi(v), i++;
		else if (!strcmp(argv[i], "--requests"))
			requests = atoi(v), i++;
		else if (!strcmp(argv[i], "--pace-ms"))
			pace_ms = atoi(v), i++;
		else if (!strcmp(argv[i], "--no-cluster"))
			do_cluster = false;
		else {
			fprintf(stderr, "usage: kvfs_hbench [--chunks N] "
				"[--layers N] [--kib N] [--requests N] "
				"[--pace-ms N] [--no-cluster]\n");
			return 2;
		}
	}
	if (nchunks < 1 || nlayers < 1 || kib < 1 || requests < 1 ||
	    nchunks > KVFS_XFER_MAX || pace_ms < -1) {
		fprintf(stderr, "kvfs_hbench: bad sizes\n");
		return 2;
	}
	if (rt_skip_reason()) {
		printf("skip: %s\n", rt_skip_reason());
		return 77;
	}
	printf("hand-off: %d chunks x %d layers x %d KiB, %d requests, a "
	       "layer every pace ms (-1: twice a raw SET+GET of a layer): %d\n",
	       nchunks, nlayers, kib, requests, pace_ms);
	printf("latency: A's PUT of a layer returned -> B's waiting GET of it "
	       "returned (ms)\n");
	printf("%-10s %-7s %5s %9s %9s %9s %9s %8s %8s %5s %7s %6s\n",
	       "server", "notify", "pace", "median", "p99", "max", "tail",
	       "MB/s", "raw", "x", "idleCPU", "cmd/ch");
	if (rt_start(&s, false, NULL))
		return 1;
	rt_url(&s, url, sizeof(url));
	rc |= one_setup("standalone", url, &s, 1, false, true);
	rc |= one_setup("standalone", url, &s, 1, false, false);
	rt_stop(&s, false);
	if (do_cluster) {
		if (rt_cluster_start(&c, NULL))
			return 1;
		rt_cluster_url(&c, url, sizeof(url));
		rc |= one_setup("cluster", url, c.node, RT_CLUSTER_N, true,
				true);
		rc |= one_setup("cluster", url, c.node, RT_CLUSTER_N, true,
				false);
		rt_cluster_stop(&c);
	}
	printf("tail: B's last GET returned after A's last PUT (ms); MB/s: "
	       "one request unpaced (A at most 4 layers ahead of B), A's "
	       "first PUT to B's last GET; raw: "
	       "hiredis SET then GET of the same bytes; x = kvfs/raw; "
	       "idleCPU: decode daemon CPU s per s waiting; cmd/ch: Redis "
	       "commands per chunk (all nodes)\n");
	return rc ? 1 : 0;
}
