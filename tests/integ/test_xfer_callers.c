/*
 * test_xfer_callers.c - batched GET/PUT (kvfs_mget / kvfs_mput) on a real
 * mount, who calls and how: EACCES for a user who may not read or write
 * the namespace, EPERM where the daemon may not reach its caller's memory,
 * callers SIGKILLed mid-batch, callers that keep getting signals (batches
 * cut short and sent again), eviction racing GETs, and 40 callers whose
 * GETs fault on chunk files of the same mount.
 *
 * What a batch does (ranges, per-entry errors, malformed batches, L2):
 * test_xfer.c.
 */
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/integ/xfer_test.h"

/* -------------------------------------------------------------- tests */

/* A caller that keeps getting (non-fatal) signals: the daemon cuts
 * batches short (entries -EINTR, at least one done each time) and
 * kvfs_mget / kvfs_mput send the rest again, so every call completes with
 * the right bytes. */
static void test_signals(void **state)
{
	enum { N = 16, LEN = 2u << 20 };
	struct kvfs_io io[N];
	unsigned long long intr = stat_of("xfer", "interrupted");
	char *src, *out = malloc((size_t)N * LEN);
	int fd = ns_create("sig", 0755);

	assert_non_null(out);
	src = make_io(io, N, 12, LEN);
	alarm_every(300);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < N; i++)
			io[i].buf = out + (size_t)i * LEN;
		memset(out, 0, (size_t)N * LEN);
		long got = kvfs_mget(fd, io, N, 0);

		for (int i = 0; got != N && i < N; i++)
			fprintf(stderr, "entry %d: %lld\n", i,
				(long long)io[i].result);
		assert_int_equal(got, N);
		for (int i = 0; i < N; i++)
			assert_int_equal(io[i].result, LEN);
		assert_memory_equal(out, src, (size_t)N * LEN);
	}
	alarm_every(0);
	intr = stat_of("xfer", "interrupted") - intr;
	fprintf(stderr, "batches cut short by SIGALRM: %llu\n", intr);
	assert_true(intr > 0); /* the resend path did run */
	free(src);
	free(out);
	close(fd);
}

/* A user who may not read (GET) or write (PUT) the namespace gets EACCES
 * for the whole batch, with fds root opened; reading a 0755 namespace is
 * fine and writing it is not. Without search permission (0706: read and
 * write, no x) open(2) and creat(2) of a chunk are refused, so GET and PUT
 * are too. */
static void test_eacces(void **state)
{
	struct kvfs_io io[2];
	char *src, hex[33], path[PATH_MAX];
	int sfd, pfd, xfd, status;
	pid_t pid;

	if (geteuid() != 0) {
		fprintf(stderr, "skip test_eacces: needs root to setuid\n");
		skip();
	}
	sfd = ns_create("xsec", 0700);
	pfd = ns_create("xpub", 0755);
	xfd = ns_create("xnox", 0706);
	assert_int_equal(fchmod(sfd, 0700), 0);
	assert_int_equal(fchmod(pfd, 0755), 0);
	assert_int_equal(fchmod(xfd, 0706), 0);
	src = make_io(io, 2, 7, CHUNK);
	assert_int_equal(kvfs_mput(sfd, io, 2), 2);
	assert_int_equal(kvfs_mput(pfd, io, 1), 1);
	assert_int_equal(kvfs_mput(xfd, io, 1), 1);
	kvfs_key_hex(&io[0].key, hex);
	kvfs_test_path(&mnt, path, "xnox/%s", hex);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *out = malloc(CHUNK);
		struct kvfs_io g = { .key = io[0].key, .buf = out,
				     .len = CHUNK };
		int fails = 0;

		if (!out || setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		if (kvfs_mget(sfd, &g, 1, 0) != -EACCES)
			fails |= 1;
		if (kvfs_mput(sfd, &io[1], 1) != -EACCES)
			fails |= 2;
		if (kvfs_mget(pfd, &g, 1, 0) != 1 || g.result != CHUNK ||
		    memcmp(out, io[0].buf, CHUNK))
			fails |= 4;
		if (kvfs_mput(pfd, &io[1], 1) != -EACCES)
			fails |= 8;
		/* no search permission: the files are out of reach */
		if (open(path, O_RDONLY) >= 0 || errno != EACCES)
			fails |= 16;
		memset(out, 0, CHUNK);
		if (kvfs_mget(xfd, &g, 1, 0) != -EACCES || out[0])
			fails |= 32;
		if (kvfs_mput(xfd, &io[1], 1) != -EACCES)
			fails |= 64;
		_exit(fails);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(exists(pfd, &io[1].key), 0);
	assert_int_equal(exists(xfd, &io[1].key), 0);
	free(src);
	close(sfd);
	close(pfd);
	close(xfd);
}

/* Drops CAP_SYS_PTRACE from this process's capability sets (so a daemon
 * without it may ptrace us: its caps are then a superset of ours). */
static int drop_ptrace_cap(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[0].effective &= ~(1u << CAP_SYS_PTRACE);
	d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
	d[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
	return (int)syscall(SYS_capset, &h, d);
}

/*
 * A daemon that may not reach its caller: kvfs-mount started as root
 * without CAP_SYS_PTRACE (setpriv), so the kernel's ptrace rules decide.
 * Refused with EPERM for the whole batch (nothing published, the reply
 * names the daemon's pid for prctl(PR_SET_PTRACER)): a root caller with
 * more capabilities than the daemon, a caller of another uid, a caller
 * that made itself non-dumpable. Let in: a root caller whose capabilities
 * the daemon's include.
 */
static void test_eperm(void **state)
{
	char wrap[] = "/tmp/kvfs-xfer-wrap.XXXXXX", script[PATH_MAX + 64];
	const char *args[] = { "-f", "-o", "l1_size=16M,allow_other", "@DIR@",
			       NULL };
	const char *real = kvfs_test_bin();
	char realabs[PATH_MAX], data[4096];
	struct kvfs_mnt m2;
	struct kvfs_io io;
	struct kvfs_xfer *b = xfer_arg(1);
	int fd, status;
	pid_t pid;
	FILE *f;

	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK)) {
		fprintf(stderr, "skip test_eperm: needs root and setpriv\n");
		skip();
	}
	assert_non_null(realpath(real, realabs));
	assert_non_null(mkdtemp(wrap));
	snprintf(script, sizeof(script), "%s/kvfs-mount", wrap);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\nexec /usr/bin/setpriv --inh-caps=-sys_ptrace "
		   "--bounding-set=-sys_ptrace -- %s \"$@\"\n", realabs);
	fclose(f);
	assert_int_equal(chmod(script, 0755), 0);
	setenv("KVFS_MOUNT_BIN", script, 1);
	status = kvfs_test_mount_args(&m2, args);
	setenv("KVFS_MOUNT_BIN", realabs, 1);
	assert_int_equal(status, 0);
	fd = kvfs_ns_open(m2.dir, "perm", KVFS_NS_CREATE, 0777);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0777), 0);
	memset(data, 9, sizeof(data));
	memset(&io, 0, sizeof(io));
	key_of(13, 0, &io.key);
	io.buf = data;
	io.len = sizeof(data);
	/* a caller more privileged than the daemon */
	assert_int_equal(kvfs_mput(fd, &io, 1), -EPERM);
	assert_int_equal(exists(fd, &io.key), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) /* same uid, no more capabilities, dumpable: let in */
		_exit(drop_ptrace_cap() == 0 && kvfs_mput(fd, &io, 1) == 1 ?
			      0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(exists(fd, &io.key), 1);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fails = 0;

		key_of(13, 1, &io.key);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		if (kvfs_mput(fd, &io, 1) != -EPERM)
			fails |= 1;
		b->ents[0].key = io.key;
		b->ents[0].addr = (uintptr_t)data;
		b->ents[0].length = sizeof(data);
		if (raw_ioctl(fd, KVFS_IOC_PUT, b) != -EPERM ||
		    b->daemon_pid != m2.pid)
			fails |= 2;
		_exit(fails);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	key_of(13, 1, &io.key);
	assert_int_equal(exists(fd, &io.key), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* not dumpable: only CAP_SYS_PTRACE may */
		char out[4096];

		key_of(13, 0, &io.key);
		io.buf = out;
		if (drop_ptrace_cap() < 0 ||
		    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
			_exit(100);
		_exit(kvfs_mget(fd, &io, 1, 0) == -EPERM ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* A lookup's chain by address (KVFS_LOOKUP_KEYS_AT) needs the same
	 * right: refused with EPERM, and kvfs_lookup sends the keys in the
	 * struct instead (in a child: it remembers the refusal for the rest
	 * of its process). */
	{
		static struct kvfs_key chain[600];
		struct kvfs_lookup *lk = calloc(1, sizeof(*lk));

		assert_non_null(lk);
		for (int i = 0; i < 600; i++) {
			key_of(14, (uint64_t)i, &chain[i]);
			assert_int_equal(kvfs_put(fd, &chain[i], data, 64), 0);
		}
		lk->version = KVFS_ABI_VERSION;
		lk->size = sizeof(*lk);
		lk->flags = KVFS_LOOKUP_KEYS_AT;
		lk->nkeys = 600;
		lk->keys_at = (uint64_t)(uintptr_t)chain;
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct kvfs_result res;
			int fails = 0;

			if (raw_ioctl(fd, KVFS_IOC_LOOKUP, lk) != -EPERM)
				fails |= 1;
			if (kvfs_lookup(fd, chain, 600, 0, 0, 0, &res) != 600)
				fails |= 2;
			if (kvfs_lookup(fd, chain, 600, 0, KVFS_LOOKUP_PIN, 0,
					&res) != 600 || res.nleases != 2 ||
			    kvfs_release(fd, &res) != 0)
				fails |= 4;
			_exit(fails);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		free(lk);
	}
	close(fd);
	free(b);
	assert_int_equal(kvfs_test_umount(&m2), 0);
	unlink(script);
	rmdir(wrap);
}

/* Callers SIGKILLed in the middle of large GETs and PUTs: the daemon goes
 * on, nothing stays pinned, and every key that got published reads back
 * whole and right (a partial chunk is never published). */
static void test_caller_killed(void **state)
{
	enum { N = 16, LEN = 2u << 20 };
	struct kvfs_io io[N];
	char *src, hex[33], path[PATH_MAX], val[16];
	int fd = ns_create("kill", 0755);
	unsigned long long intr = stat_of("xfer", "interrupted");

	src = make_io(io, N, 8, LEN);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (int round = 0; round < 6; round++) {
		bool put = round & 1;
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			struct kvfs_io g[N];
			char *out = malloc((size_t)N * LEN);

			for (uint64_t it = 0; out; it++) {
				memcpy(g, io, sizeof(g));
				for (int i = 0; i < N; i++) {
					if (put) {
						key_of(100 + (uint64_t)round,
						       it * N + (uint64_t)i,
						       &g[i].key);
						continue;
					}
					g[i].buf = out + (size_t)i * LEN;
				}
				if (put)
					kvfs_mput(fd, g, N);
				else
					kvfs_mget(fd, g, N, 0);
			}
			_exit(1);
		}
		usleep(150000 + 50000 * round);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		if (put) { /* what got published is whole */
			for (uint64_t i = 0; i < 2048; i++) {
				struct kvfs_key k;

				key_of(100 + (uint64_t)round, i, &k);
				if (!exists(fd, &k)) /* not put, or evicted */
					continue;
				kvfs_key_hex(&k, hex);
				kvfs_test_path(&mnt, path, "kill/%s", hex);
				assert_int_equal(kvfs_test_read_check(
					path, LEN, 8 * 1000 + i % N), 0);
			}
		}
	}
	/* no pin left behind by the killed GETs */
	for (int i = 0; i < N; i++) {
		ssize_t n;

		kvfs_key_hex(&io[i].key, hex);
		kvfs_test_path(&mnt, path, "kill/%s", hex);
		n = getxattr(path, KVFS_XATTR_REFS, val, sizeof(val) - 1);
		if (n < 0 && errno == ENOENT)
			continue; /* evicted by the PUTs: not pinned either */
		assert_true(n > 0);
		val[n] = '\0';
		assert_string_equal(val, "0");
	}
	fprintf(stderr, "batches cut short by a signal: %llu\n",
		stat_of("xfer", "interrupted") - intr);
	free(src);
	close(fd);
}

/* ---------------------------------------- eviction racing GETs (pins) */

struct race {
	int fd;
	volatile int stop;
	unsigned long long gets, bad, hits;
};

#define RACE_LEN (256u << 10)

static void *race_writer(void *arg)
{
	struct race *r = arg;
	char *buf = malloc(RACE_LEN);
	struct kvfs_io io;

	for (uint64_t i = 0; buf && !r->stop; i++) {
		memset(&io, 0, sizeof(io));
		key_of(9, i % 2000, &io.key);
		kvfs_test_fill(buf, RACE_LEN, 9000000 + i % 2000, 0);
		io.buf = buf;
		io.len = RACE_LEN;
		kvfs_mput(r->fd, &io, 1);
	}
	free(buf);
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	enum { B = 16 };
	struct kvfs_io g[B];
	uint64_t idx[B];
	char *out = malloc((size_t)B * RACE_LEN);
	uint64_t seed = 1;

	while (out && !r->stop) {
		memset(g, 0, sizeof(g));
		for (int i = 0; i < B; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			idx[i] = (seed >> 33) % 2000;
			key_of(9, idx[i], &g[i].key);
			g[i].buf = out + (size_t)i * RACE_LEN;
			g[i].len = RACE_LEN;
		}
		if (kvfs_mget(r->fd, g, B, 0) < 0) {
			__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
			continue;
		}
		for (int i = 0; i < B; i++) {
			uint64_t k = idx[i];

			__atomic_fetch_add(&r->gets, 1, __ATOMIC_RELAXED);
			if (g[i].result == -ENOENT)
				continue;
			if (g[i].result != RACE_LEN ||
			    kvfs_test_check(g[i].buf, RACE_LEN, 9000000 + k, 0))
				__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
			else
				__atomic_fetch_add(&r->hits, 1,
						   __ATOMIC_RELAXED);
		}
	}
	free(out);
	return NULL;
}

/* A 16 MiB L1 holds 64 of the 256 KiB chunks a writer keeps putting (and
 * evicting); readers GET random batches meanwhile: every hit is the key's
 * own bytes, whole. */
static void test_evict_race(void **state)
{
	struct kvfs_mnt m2;
	const char *args[] = { "-f", "-o", "l1_size=16M,max_chunk=1M",
			       "@DIR@", NULL };
	struct race r = { 0 };
	pthread_t w, rd[2];

	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	r.fd = kvfs_ns_open(m2.dir, "race", KVFS_NS_CREATE, 0755);
	assert_true(r.fd >= 0);
	assert_int_equal(pthread_create(&w, NULL, race_writer, &r), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, race_reader, &r),
				 0);
	sleep(3);
	r.stop = 1;
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(rd[i], NULL);
	fprintf(stderr, "race: %llu entries, %llu hits, %llu bad\n", r.gets,
		r.hits, r.bad);
	assert_int_equal(r.bad, 0);
	assert_true(r.hits > 0);
	close(r.fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
}

/* Aborts m's FUSE connection (root), so a test that wedged it can still
 * unmount. The connection is found in /proc/self/mountinfo: a stat of the
 * wedged mount itself would hang. */
static void abort_conn(struct kvfs_mnt *m)
{
	char line[4096], p[128];
	unsigned maj, min;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int fd;

	while (f && fgets(line, sizeof(line), f)) {
		char dev[64], dir[PATH_MAX];

		if (sscanf(line, "%*d %*d %63s %*s %4095s", dev, dir) != 2 ||
		    strcmp(dir, m->dir) || sscanf(dev, "%u:%u", &maj, &min) != 2)
			continue;
		snprintf(p, sizeof(p), "/sys/fs/fuse/connections/%u/abort", min);
		fd = open(p, O_WRONLY);
		if (fd >= 0) {
			if (write(fd, "1", 1) < 0)
				perror(p);
			close(fd);
		}
	}
	if (f)
		fclose(f);
}

/* 40 callers at once (more than the daemon's FUSE workers, fs_workers(),
 * on up to 20 CPUs) each GET a chunk into an mmap of a never-read chunk
 * file of the same mount: the copies fault, and the faults need workers
 * to serve their reads. The daemon runs at most half its workers' worth
 * of batches at once (the rest get EAGAIN, which libkvfs retries), so
 * every caller finishes and the mount keeps answering; before that cap the
 * mount hung for good. */
static void test_self_backed_flood(void **state)
{
	enum { N = 40, LEN = 1u << 20 };
	struct kvfs_mnt m2;
	const char *args[] = { "-f", "-o", "l1_size=128M,max_chunk=4M",
			       "@DIR@", NULL };
	struct kvfs_io io[N];
	char *src, hex[33], path[PATH_MAX];
	pid_t kids[N];
	int fd, pp[2], ok = 0, left = N;

	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	fd = kvfs_ns_open(m2.dir, "flood", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	src = make_io(io, N, 21, LEN);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	assert_int_equal(pipe(pp), 0);
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			struct kvfs_io g = io[i];
			void *map;
			char c;
			int cfd;

			kvfs_key_hex(&g.key, hex);
			kvfs_test_path(&m2, path, "flood/%s", hex);
			cfd = open(path, O_RDONLY);
			map = cfd < 0 ? MAP_FAILED :
				mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE, cfd, 0);
			if (map == MAP_FAILED)
				_exit(2);
			close(pp[1]);
			if (read(pp[0], &c, 1) < 0)
				_exit(2);
			g.buf = map;
			g.len = LEN;
			_exit(kvfs_mget(fd, &g, 1, 0) == 1 &&
			      g.result == (int64_t)LEN &&
			      !memcmp(map, src + (size_t)i * LEN, LEN) ? 0 : 3);
		}
	}
	close(pp[0]);
	close(pp[1]); /* go */
	for (int t = 0; t < 600 && left; t++) { /* 60 s */
		int st;
		pid_t p;

		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			left--;
			ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		}
		if (left)
			usleep(100 * 1000);
	}
	if (left) { /* wedged: free the children and the mount */
		abort_conn(&m2);
		for (int i = 0; i < N; i++)
			kill(kids[i], SIGKILL);
		while (waitpid(-1, NULL, 0) > 0)
			;
	}
	assert_int_equal(left, 0);
	assert_int_equal(ok, N);
	assert_true(stat_in(&m2, "xfer", "busy") > 0);
	free(src);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signals), /* first: L1 has room */
		cmocka_unit_test(test_eacces),
		cmocka_unit_test(test_eperm),
		cmocka_unit_test(test_caller_killed),
		cmocka_unit_test(test_evict_race),
		cmocka_unit_test(test_self_backed_flood),
	};

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
