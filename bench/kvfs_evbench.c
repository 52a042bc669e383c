/*
 * kvfs_evbench - what KV events cost.
 *
 *  1. The publisher alone: events posted as fast as one thread can (a full
 *     queue is retried, not dropped), one SUB reading them; the sustained
 *     rate is events published per second until the last one was sent.
 *  2. Writes of 256 KiB chunks to a real mount with events off and on (one
 *     subscriber that reads everything and one that never reads), rounds
 *     interleaved, same run: MiB/s and the ratio on/off.
 *
 * Contract of bench/run.sh: no arguments needed (--mib N, --events N),
 * temporaries under $TMPDIR, KVFS_MOUNT_BIN for the daemon; exit 0 or 77.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "events/events.h"
#include "tests/common/kvfs_test.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct reader {
	void *sock;
	atomic_bool stop;
	uint64_t msgs;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char buf[1 << 16];
	int tmo = 100;

	zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
	while (!atomic_load(&r->stop)) {
		int more = 1;
		size_t ml = sizeof(more);
		int n = zmq_recv(r->sock, buf, sizeof(buf), 0);
		if (n < 0)
			continue;
		while (zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml) == 0 &&
		       more)
			zmq_recv(r->sock, buf, sizeof(buf), 0);
		r->msgs++;
	}
	return NULL;
}

/* ------------------------------------------------------- 1. publisher */

static int bench_publisher(const char *tmp, uint64_t nevents)
{
	char ep[512], err[256];
	struct ev_config c;
	struct ev_pub *p;
	struct ev_event e;
	struct ev_stats st;
	struct reader rd = { 0 };
	pthread_t th;
	void *ctx = zmq_ctx_new();
	uint64_t retries = 0;

	snprintf(ep, sizeof(ep), "ipc://%s/evbench.sock", tmp);
	ev_config_default(&c);
	c.endpoint = ep;
	c.node = "bench";
	if (ev_pub_create(&c, &p, err, sizeof(err))) {
		fprintf(stderr, "kvfs_evbench: %s\n", err);
		return 1;
	}
	rd.sock = zmq_socket(ctx, ZMQ_SUB);
	zmq_setsockopt(rd.sock, ZMQ_SUBSCRIBE, "", 0);
	zmq_connect(rd.sock, ep);
	pthread_create(&th, NULL, reader_main, &rd);
	usleep(200 * 1000); /* the subscription reaches the publisher */

	memset(&e, 0, sizeof(e));
	e.kind = EV_STORED;
	e.medium = EV_MEDIUM_CPU;
	e.block_size = 16;
	snprintf(e.ns, sizeof(e.ns), "llama3-8b.bf16.tp1.r0");
	double t0 = now_s();
	for (uint64_t i = 0; i < nevents; i++) {
		memcpy(e.key.b + 8, &i, 8);
		e.has_parent = i > 0;
		while (ev_post(p, &e) == -EAGAIN) {
			retries++;
			sched_yield();
		}
	}
	ev_flush(p, 60000);
	double dt = now_s() - t0;
	ev_stats(p, &st);
	usleep(200 * 1000);
	atomic_store(&rd.stop, true);
	pthread_join(th, NULL);
	printf("%-44s %12.0f events/s  (%" PRIu64 " events in %" PRIu64
	       " batches, %.2f s; the subscriber read %" PRIu64
	       " batches; queue-full retries %" PRIu64 ")\n",
	       "publisher sustained rate, 1 subscriber", (double)st.published / dt,
	       st.published, st.batches, dt, rd.msgs, retries);
	zmq_close(rd.sock);
	ev_pub_destroy(p);
	zmq_ctx_term(ctx);
	return 0;
}

/* ------------------------------------------------------------ 2. writes */

/* Writes nchunks chunks of csize to a fresh namespace; MiB/s. */
static double write_round(const struct kvfs_mnt *m, int round, int nchunks,
			  size_t csize, const char *buf)
{
	char path[4096 + 64], name[33];
	double t0;

	snprintf(path, sizeof(path), "%s/r%d", m->dir, round);
	if (mkdir(path, 0755))
		return -1;
	t0 = now_s();
	for (int i = 0; i < nchunks; i++) {
		kvfs_test_key_name((uint64_t)round << 32 | (uint64_t)i, name);
		snprintf(path, sizeof(path), "%s/r%d/%s", m->dir, round, name);
		int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0 || write(fd, buf, csize) != (ssize_t)csize ||
		    close(fd)) {
			perror(path);
			return -1;
		}
	}
	return (double)nchunks * (double)csize / (1 << 20) / (now_s() - t0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bench_writes(const char *tmp, unsigned mib)
{
	enum { ROUNDS = 7 };
	const size_t csize = 256 << 10;
	int nchunks = (int)((uint64_t)mib * (1 << 20) / csize);
	char opts_off[256], opts_on[1024], ep[512];
	struct kvfs_mnt off, on;
	double r_off[ROUNDS], r_on[ROUNDS];
	char *buf = malloc(csize);
	void *ctx = zmq_ctx_new();
	struct reader rd = { 0 };
	pthread_t th;
	int rc = 1;

	if (!buf)
		return 1;
	memset(buf, 0x5a, csize);
	/* L1 holds every round: this measures the write path, not eviction */
	snprintf(opts_off, sizeof(opts_off), "l1_size=%uM,max_chunk=1M",
		 mib * (ROUNDS + 1) + 64);
	snprintf(ep, sizeof(ep), "ipc://%s/evbench-mount.sock", tmp);
	snprintf(opts_on, sizeof(opts_on), "%s,events=%s,node=bench", opts_off,
		 ep);
	if (kvfs_test_mount(&off, opts_off)) {
		free(buf);
		return 1;
	}
	if (kvfs_test_mount(&on, opts_on)) {
		kvfs_test_umount(&off);
		free(buf);
		return 1;
	}
	rd.sock = zmq_socket(ctx, ZMQ_SUB);
	zmq_setsockopt(rd.sock, ZMQ_SUBSCRIBE, "", 0);
	zmq_connect(rd.sock, ep);
	void *lazy = zmq_socket(ctx, ZMQ_SUB); /* never reads */
	int one = 1;
	zmq_setsockopt(lazy, ZMQ_RCVHWM, &one, sizeof(one));
	zmq_setsockopt(lazy, ZMQ_SUBSCRIBE, "", 0);
	zmq_connect(lazy, ep);
	pthread_create(&th, NULL, reader_main, &rd);
	usleep(200 * 1000);

	/* a warm-up round each, then rounds alternating which goes first */
	if (write_round(&off, ROUNDS, nchunks, csize, buf) < 0 ||
	    write_round(&on, ROUNDS, nchunks, csize, buf) < 0)
		goto out;
	for (int r = 0; r < ROUNDS; r++) {
		if (r % 2) {
			r_on[r] = write_round(&on, r, nchunks, csize, buf);
			r_off[r] = write_round(&off, r, nchunks, csize, buf);
		} else {
			r_off[r] = write_round(&off, r, nchunks, csize, buf);
			r_on[r] = write_round(&on, r, nchunks, csize, buf);
		}
		if (r_off[r] < 0 || r_on[r] < 0)
			goto out;
	}
	qsort(r_off, ROUNDS, sizeof(double), cmp_d);
	qsort(r_on, ROUNDS, sizeof(double), cmp_d);
	printf("%-44s %9.0f MiB/s  (median of %d rounds of %u MiB)\n",
	       "256 KiB chunks written, events off", r_off[ROUNDS / 2], ROUNDS,
	       mib);
	printf("%-44s %9.0f MiB/s  (%.3fx of off)\n",
	       "256 KiB chunks written, events on", r_on[ROUNDS / 2],
	       r_on[ROUNDS / 2] / r_off[ROUNDS / 2]);
	{
		char sp[4096 + 32], sbuf[16384];
		const char *ev;
		snprintf(sp, sizeof(sp), "%s/.kvfs/stats", on.dir);
		int fd = open(sp, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, sbuf, sizeof(sbuf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			sbuf[n] = 0;
			ev = strstr(sbuf, "\"events\"");
			const char *pub = ev ? strstr(ev, "\"published\": ") : NULL;
			const char *dr = ev ? strstr(ev, "\"dropped\": ") : NULL;
			if (pub && dr)
				printf("%-44s %9llu published, %llu dropped\n",
				       "   events of the mount",
				       strtoull(pub + 13, NULL, 10),
				       strtoull(dr + 11, NULL, 10));
		}
	}
	rc = 0;
out:
	atomic_store(&rd.stop, true);
	pthread_join(th, NULL);
	printf("%-44s %9" PRIu64 " batches (the never-reading one holds at "
	       "most its HWM)\n", "   reading subscriber got", rd.msgs);
	zmq_close(rd.sock);
	zmq_close(lazy);
	zmq_ctx_term(ctx);
	if (kvfs_test_umount(&on) || kvfs_test_umount(&off))
		rc = 1;
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned long long nevents = 2000000, mib = 64;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--events"))
			nevents = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--mib"))
			mib = strtoull(argv[i + 1], NULL, 10);
	}
	if (!nevents || !mib) {
		fprintf(stderr, "usage: kvfs_evbench [--events N] [--mib N]\n");
		return 2;
	}
	printf("KV events (bench/kvfs_evbench.c)\n");
	if (bench_publisher(tmp, nevents))
		return 1;
	if (access(kvfs_test_bin(), X_OK)) {
		printf("skip: writes: %s not built\n", kvfs_test_bin());
		return 77;
	}
	return bench_writes(tmp, (unsigned)mib);
}
