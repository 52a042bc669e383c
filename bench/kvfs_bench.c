/*
 * kvfs_bench.c - kvfs against tmpfs, in the same run, with plain syscalls.
 *
 * Mounts kvfs (kvfs-mount -f in the background, on its own temporary
 * directory, with a deadline) and a tmpfs (mount -t tmpfs; /dev/shm when
 * mounting is not allowed), then for 2 MiB and 256 KiB chunks and each
 * thread count of --threads (default 1,2): writes N files (open O_CREAT|O_EXCL, one write, close), reads
 * them once ("first read": the first open + read after the writer closed)
 * and once more ("repeated read"). Each phase runs --trials times,
 * interleaving kvfs and tmpfs so that noise from other work on the machine
 * hits both; the best trial and the median of the trials are reported,
 * and the targets of issue 26 are checked on the medians (met/MISSED).
 * Every byte of the last trial is verified, outside the timed phases. Both mounts are always removed, on
 * errors and on SIGINT/SIGTERM too.
 *
 *   kvfs_bench [--mount-bin PATH] [-o OPTS] [--workdir DIR] [--mib N]
 *              [--trials N] [--kvfs-dir DIR] [--tmpfs-dir DIR]
 *              [--threads LIST]
 *
 * --threads 1,2,4,8,16 is the thread-scaling run (make gpu-bundle's
 * run.sh): with more than one count, a scaling table follows the main
 * one (bench_threads.h).
 * --kvfs-dir / --tmpfs-dir benchmark directories that are already mounted
 * instead of mounting. The mount binary defaults to $KVFS_MOUNT_BIN, else
 * kvfs-mount next to this program's build directory (build/bench/..).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_threads.h"

#define FUSE_SUPER_MAGIC 0x65735546
#define MOUNT_DEADLINE_S 15
#define UNMOUNT_DEADLINE_S 15

/* ------------------------------------------------------------ mounts */

/*
 * What must be undone at exit. A static because the signal handler needs
 * it; this program runs one benchmark, so one instance is all there is.
 */
static struct cleanup {
	char kvfs_mnt[PATH_MAX];   /* we mounted kvfs here ("" if not) */
	pid_t kvfs_pid;            /* kvfs-mount -f, or 0 */
	char tmpfs_mnt[PATH_MAX];  /* we mounted a tmpfs here */
	char rmdirs[4][PATH_MAX];  /* directories we created, removed last */
	int nrmdirs;
	char kvfs_log[PATH_MAX];   /* the daemon's stderr */
} cl;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool is_fuse(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

static int run_quiet(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (nul >= 0) {
			dup2(nul, 1);
			dup2(nul, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Waits up to secs for pid to exit; returns true if it did. */
static bool wait_exit(pid_t pid, double secs)
{
	double end = now_s() + secs;
	int st;

	while (now_s() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return true;
		usleep(20000);
	}
	return false;
}

/* Unmounts kvfs, waits for the daemon, removes the tmpfs and our dirs. Safe
 * to call twice; the signal path uses only what a handler may. */
static void cleanup_all(bool from_signal)
{
	if (cl.kvfs_mnt[0]) {
		if (!from_signal) {
			char *fu[] = { "fusermount3", "-u", cl.kvfs_mnt, NULL };

			if (run_quiet(fu) != 0)
				umount2(cl.kvfs_mnt, 0);
		} else {
			umount2(cl.kvfs_mnt, MNT_DETACH);
		}
	}
	if (cl.kvfs_pid > 0) {
		if (from_signal || !wait_exit(cl.kvfs_pid, UNMOUNT_DEADLINE_S)) {
			if (!from_signal)
				fprintf(stderr, "kvfs_bench: kvfs-mount outlived the unmount; killing it\n");
			kill(cl.kvfs_pid, SIGTERM);
			if (!from_signal && !wait_exit(cl.kvfs_pid, 3))
				kill(cl.kvfs_pid, SIGKILL);
		}
		if (cl.kvfs_mnt[0] && !from_signal && is_fuse(cl.kvfs_mnt)) {
			char *fz[] = { "fusermount3", "-uz", cl.kvfs_mnt, NULL };

			run_quiet(fz);
		}
		cl.kvfs_pid = 0;
	}
	cl.kvfs_mnt[0] = '\0';
	if (cl.tmpfs_mnt[0]) {
		umount2(cl.tmpfs_mnt, from_signal ? MNT_DETACH : 0);
		cl.tmpfs_mnt[0] = '\0';
	}
	while (cl.nrmdirs > 0)
		rmdir(cl.rmdirs[--cl.nrmdirs]);
}

static void on_signal(int sig)
{
	cleanup_all(true);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "kvfs_bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	cleanup_all(false);
	if (cl.kvfs_log[0] && access(cl.kvfs_log, F_OK) == 0)
		fprintf(stderr, "kvfs_bench: the daemon's log is %s\n", cl.kvfs_log);
	exit(1);
}

static void make_tempdir(const char *parent, const char *tag, char *out)
{
	snprintf(out, PATH_MAX, "%s/%s.XXXXXX", parent, tag);
	if (!mkdtemp(out))
		die("mkdtemp %s: %s", out, strerror(errno));
	snprintf(cl.rmdirs[cl.nrmdirs++], PATH_MAX, "%s", out);
}

static void print_log_tail(void)
{
	char buf[4096];
	FILE *f = fopen(cl.kvfs_log, "r");
	size_t n;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	if (ftell(f) > (long)sizeof(buf) - 1)
		fseek(f, -(long)sizeof(buf) + 1, SEEK_END);
	else
		fseek(f, 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	if (n)
		fprintf(stderr, "--- kvfs-mount log (%s):\n%s---\n", cl.kvfs_log, buf);
}

static void mount_kvfs(const char *bin, const char *opts, const char *workdir,
		       char *mnt)
{
	double end;
	pid_t pid;

	make_tempdir(workdir, "kvfs", mnt);
	if (snprintf(cl.kvfs_log, sizeof(cl.kvfs_log), "%s/kvfs-mount.log",
		     workdir) >= (int)sizeof(cl.kvfs_log))
		die("path too long: %s", workdir);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(cl.kvfs_log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (opts && *opts)
			execl(bin, bin, "-f", "-o", opts, mnt, (char *)NULL);
		else
			execl(bin, bin, "-f", mnt, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	cl.kvfs_pid = pid;
	snprintf(cl.kvfs_mnt, sizeof(cl.kvfs_mnt), "%s", mnt);
	end = now_s() + MOUNT_DEADLINE_S;
	while (!is_fuse(mnt)) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid) {
			cl.kvfs_pid = 0;
			print_log_tail();
			die("kvfs-mount exited (status %d) before mounting %s",
			    WIFEXITED(st) ? WEXITSTATUS(st) : -1, mnt);
		}
		if (now_s() > end) {
			print_log_tail();
			die("kvfs-mount did not mount %s within %d s", mnt,
			    MOUNT_DEADLINE_S);
		}
		usleep(10000);
	}
}

static void mount_tmpfs(const char *workdir, char *mnt, const char **kind)
{
	char shm[PATH_MAX];

	make_tempdir(workdir, "tmpfs", mnt);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=2g,mode=0755") == 0) {
		snprintf(cl.tmpfs_mnt, sizeof(cl.tmpfs_mnt), "%s", mnt);
		*kind = "tmpfs (mounted)";
		return;
	}
	fprintf(stderr, "kvfs_bench: mount -t tmpfs: %s; using /dev/shm\n",
		strerror(errno));
	make_tempdir("/dev/shm", "kvfs-bench", shm);
	strcpy(mnt, shm);
	*kind = "tmpfs (/dev/shm)";
}

/* ------------------------------------------------------------ workload */

enum op { OP_WRITE, OP_READ1, OP_READ2, OP_NR };
static const char *const op_names[OP_NR] = { "write", "first read",
					      "repeat read" };

struct phase {
	const char *dir;   /* the namespace directory */
	enum op op;
	size_t size;       /* bytes per file */
	unsigned nfiles;
	unsigned nthreads;
	unsigned trial;    /* part of every name */
	bool verify;       /* memcmp every byte (untimed pass only) */
	const uint8_t *pattern; /* size bytes; file i = pattern + stamp */
	pthread_barrier_t start;
	int err;           /* first errno seen, under errlock */
	char errmsg[256];
	pthread_mutex_t errlock;
};

struct worker {
	struct phase *ph;
	unsigned tid;
	uint8_t *buf;
	pthread_t thread;
};

static void file_name(const struct phase *ph, unsigned i, char out[33])
{
	/* 32 lowercase hex digits: a valid chunk key, distinct per trial. */
	snprintf(out, 33, "%08x%08x%016llx", 0x6b766673u,
		 (unsigned)(ph->size >> 10) << 8 | ph->trial,
		 (unsigned long long)i);
}

static void set_err(struct phase *ph, int err, const char *what,
		    const char *name)
{
	pthread_mutex_lock(&ph->errlock);
	if (!ph->err) {
		ph->err = err ? err : EIO;
		snprintf(ph->errmsg, sizeof(ph->errmsg), "%s %s/%s: %s", what,
			 ph->dir, name, err ? strerror(err) : "short or wrong data");
	}
	pthread_mutex_unlock(&ph->errlock);
}

static int do_write(struct phase *ph, struct worker *w, unsigned i,
		    const char *name)
{
	size_t done = 0;
	uint64_t stamp = i;
	int fd;

	/* Each file differs from the pattern in its first 8 bytes. */
	memcpy(w->buf, ph->pattern, ph->size);
	memcpy(w->buf, &stamp, sizeof(stamp));
	fd = openat(AT_FDCWD, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (done < ph->size) {
		ssize_t n = write(fd, w->buf + done, ph->size - done);

		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			close(fd);
			return -e;
		}
		done += (size_t)n;
	}
	if (close(fd) < 0)
		return -errno;
	return 0;
}

static int do_read(struct phase *ph, struct worker *w, unsigned i,
		   const char *name)
{
	size_t done = 0;
	uint64_t stamp;
	int fd = open(name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* Exactly the chunk's size, as an engine that knows it reads: asking
	 * for more would cost kvfs one more FUSE round trip to find EOF. */
	while (done < ph->size) {
		ssize_t n = read(fd, w->buf + done, ph->size - done);

		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (ph->verify) {
		struct stat st;

		if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != ph->size)
			done = 0;
	}
	close(fd);
	memcpy(&stamp, w->buf, sizeof(stamp));
	if (done != ph->size || stamp != i)
		return -EIO;
	if (ph->verify &&
	    memcmp(w->buf + sizeof(stamp), ph->pattern + sizeof(stamp),
		   ph->size - sizeof(stamp)))
		return -EIO;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct phase *ph = w->ph;
	char rel[33], name[PATH_MAX];

	pthread_barrier_wait(&ph->start);
	for (unsigned i = w->tid; i < ph->nfiles; i += ph->nthreads) {
		int r;

		file_name(ph, i, rel);
		snprintf(name, sizeof(name), "%s/%s", ph->dir, rel);
		r = ph->op == OP_WRITE ? do_write(ph, w, i, name)
				       : do_read(ph, w, i, name);
		if (r) {
			set_err(ph, -r, op_names[ph->op], rel);
			break;
		}
	}
	return NULL;
}

/* Runs one phase; returns its wall time in seconds. */
static double run_phase(struct phase *ph, uint8_t **bufs)
{
	struct worker w[BENCH_MAX_THREADS];
	double t0, t1;

	ph->err = 0;
	pthread_mutex_init(&ph->errlock, NULL);
	pthread_barrier_init(&ph->start, NULL, ph->nthreads + 1);
	for (unsigned t = 0; t < ph->nthreads; t++) {
		w[t] = (struct worker){ .ph = ph, .tid = t, .buf = bufs[t] };
		if (pthread_create(&w[t].thread, NULL, worker_main, &w[t]))
			die("pthread_create failed");
	}
	pthread_barrier_wait(&ph->start);
	t0 = now_s();
	for (unsigned t = 0; t < ph->nthreads; t++)
		pthread_join(w[t].thread, NULL);
	t1 = now_s();
	pthread_barrier_destroy(&ph->start);
	pthread_mutex_destroy(&ph->errlock);
	if (ph->err)
		die("%s", ph->errmsg);
	return t1 - t0;
}

static void remove_files(const struct phase *ph)
{
	char rel[33], name[PATH_MAX];

	for (unsigned i = 0; i < ph->nfiles; i++) {
		file_name(ph, i, rel);
		snprintf(name, sizeof(name), "%s/%s", ph->dir, rel);
		if (unlink(name) < 0 && errno != ENOENT)
			die("unlink %s: %s", name, strerror(errno));
	}
}

/* ------------------------------------------------------------ machine */

/*
 * The cost of one FUSE round trip: stat() of a control file, whose
 * attributes are never cached. Printed with the load average so a reader
 * can tell a slow kvfs from a busy machine (on a shared 2-core VM both
 * swing by several times).
 */
static double round_trip_us(const char *root)
{
	char path[PATH_MAX];
	struct stat st;
	double best = 1e30;

	if (snprintf(path, sizeof(path), "%s/.kvfs/version", root) >= (int)sizeof(path) ||
	    stat(path, &st) < 0)
		return -1;
	for (int r = 0; r < 3; r++) {
		double t0 = now_s();

		for (int i = 0; i < 500; i++)
			stat(path, &st);
		t0 = (now_s() - t0) / 500 * 1e6;
		if (t0 < best)
			best = t0;
	}
	return best;
}

static void print_machine(const char *when, const char *kvfs_root)
{
	char load[64] = "?";
	FILE *f = fopen("/proc/loadavg", "r");
	double rt = round_trip_us(kvfs_root);

	if (f) {
		if (!fgets(load, sizeof(load), f))
			strcpy(load, "?");
		fclose(f);
		load[strcspn(load, " ")] = '\0';
	}
	if (rt >= 0)
		printf("%s: load average %s, FUSE round trip %.1f us (stat of .kvfs/version)\n",
		       when, load, rt);
	else
		printf("%s: load average %s\n", when, load);
}

/* ------------------------------------------------------------ main */

struct row {
	size_t size;
	unsigned nthreads;
	enum op op;
	double best[2]; /* seconds, [0] kvfs, [1] tmpfs */
	double t[2][20]; /* every trial's seconds (trials <= 20) */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n trial times (sorts them). */
static double median(double *t, unsigned long n)
{
	qsort(t, n, sizeof(*t), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: kvfs_bench [--mount-bin PATH] [-o OPTS] [--workdir DIR] [--mib N]\n"
		"                  [--trials N] [--kvfs-dir DIR] [--tmpfs-dir DIR]\n"
		"                  [--threads N,N,... (1..%d each, at most %d)]\n",
		BENCH_MAX_THREADS, BENCH_MAX_TCOUNTS);
	exit(2);
}

static void default_mount_bin(char *out)
{
	char exe[PATH_MAX - 32];
	ssize_t n;
	char *slash;
	const char *env = getenv("KVFS_MOUNT_BIN");

	if (env && *env) {
		snprintf(out, PATH_MAX, "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(out, PATH_MAX, "build/kvfs-mount");
		return;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, PATH_MAX, "%s/../kvfs-mount", exe);
}

/* ------------------------------------------------------------ targets */

/* Row index: size s (0: 2 MiB, 1: 256 KiB), threads t (0: 1, 1: 2), op. */
/* rows: by size, then thread count (nt of them), then op */
#define ROW(s, t, op) (((s) * nt + (t)) * OP_NR + (op))

/* The same-run ratio kvfs/tmpfs of row r: median of the trials. */
static double row_ratio(struct row *r, unsigned long trials)
{
	return median(r->t[1], trials) / median(r->t[0], trials);
}

/* Files per second per thread of kvfs in row r (median trial). */
static double row_fps(struct row *r, unsigned long mib, unsigned long trials)
{
	return (double)((mib << 20) / r->size) / median(r->t[0], trials) /
	       r->nthreads;
}

static const char *verdict(double v, double target, double aim)
{
	if (v >= target && aim > target)
		return v >= aim ? "met, aim met" : "met, aim missed";
	return v >= target ? "met" : "MISSED";
}

/* With cache=passthrough: whether the kernel took it and how the opens
 * were answered (kvfs(7) COUNTERS, passthrough.*), as .kvfs/stats says. */
static void print_passthrough(const char *root)
{
	char path[PATH_MAX + 16], buf[1 << 16], *s, *e;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/.kvfs/stats", root);
	f = fopen(path, "r");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	s = strstr(buf, "\"passthrough\"");
	if (!s || !strstr(s, "\"on\": 1"))
		return;
	e = strchr(s, '}');
	if (e)
		*++e = 0;
	printf("cache=passthrough: %s\n", s);
}

/*
 * The plain-path targets of issue 26 ("every path at the speed of the
 * medium beneath it"), on medians of the alternating trials: reads of
 * chunks in L1 at >= 0.8x tmpfs for 2 MiB (aim 0.9x), >= 0.7x and
 * >= 12,000 files/s per thread for 256 KiB; writes at >= 1.0x tmpfs
 * (aim 1.5x).
 */
static void print_targets(struct row *rows, int nt, const unsigned *threads,
			  unsigned long mib, unsigned long trials)
{
	static const struct {
		const char *what;
		int s, op;
		double target, aim;
	} tg[] = {
		{ "2 MiB first read (L1)", 0, OP_READ1, 0.8, 0.9 },
		{ "256 KiB first read (L1)", 1, OP_READ1, 0.7, 0.7 },
		{ "2 MiB write", 0, OP_WRITE, 1.0, 1.5 },
		{ "256 KiB write", 1, OP_WRITE, 1.0, 1.5 },
	};

	printf("\ntargets (issue 26; median of the trials, ratio to tmpfs; "
	       "at 1 and 2 threads):\n");
	for (size_t i = 0; i < sizeof(tg) / sizeof(tg[0]); i++)
		for (int t = 0; t < nt; t++) {
			double v;

			if (threads[t] > 2)
				continue;
			v = row_ratio(&rows[ROW(tg[i].s, t, tg[i].op)],
					     trials);

			printf("  %-24s %u thr: %5.2fx (>= %.1fx", tg[i].what,
			       threads[t], v, tg[i].target);
			if (tg[i].aim > tg[i].target)
				printf(", aim %.1fx", tg[i].aim);
			printf("): %s\n", verdict(v, tg[i].target, tg[i].aim));
		}
	for (int t = 0; t < nt; t++) {
		double f;

		if (threads[t] > 2)
			continue;
		f = row_fps(&rows[ROW(1, t, OP_READ1)], mib, trials);
		printf("  %-24s %u thr: %5.0f files/s per thread (>= 12000): %s\n",
		       "256 KiB first read (L1)", threads[t], f,
		       f >= 12000 ? "met" : "MISSED");
	}
}

int main(int argc, char **argv)
{
	char mount_bin[PATH_MAX], workdir_buf[PATH_MAX];
	char kvfs_root[PATH_MAX], tmpfs_root[PATH_MAX], ns[2][PATH_MAX];
	const char *opts = "l1_size=1G", *workdir = NULL, *tmpfs_kind = "tmpfs";
	const char *kvfs_dir = NULL, *tmpfs_dir = NULL;
	static const size_t sizes[] = { 2u << 20, 256u << 10 };
	unsigned threads[BENCH_MAX_TCOUNTS] = { 1, 2 }, maxt;
	struct row rows[2 * BENCH_MAX_TCOUNTS * OP_NR];
	unsigned long mib = 256, trials = 3;
	uint8_t *pattern, *bufs[BENCH_MAX_THREADS];
	int nrows = 0, nt = 2;
	double t_start = now_s();
	bool verbose = getenv("KVFS_BENCH_VERBOSE") != NULL;

	default_mount_bin(mount_bin);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--mount-bin") && v)
			snprintf(mount_bin, sizeof(mount_bin), "%s", v);
		else if (!strcmp(a, "-o") && v)
			opts = v;
		else if (!strcmp(a, "--workdir") && v)
			workdir = v;
		else if (!strcmp(a, "--mib") && v)
			mib = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--trials") && v)
			trials = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--kvfs-dir") && v)
			kvfs_dir = v;
		else if (!strcmp(a, "--tmpfs-dir") && v)
			tmpfs_dir = v;
		else if (!strcmp(a, "--threads") && v)
			nt = bench_parse_threads(v, threads);
		else
			usage();
		i++;
	}
	if (mib < 4 || mib > 4096 || trials < 1 || trials > 20 || nt < 1)
		usage();
	maxt = bench_max_threads(threads, nt);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (!workdir) {
		const char *tmp = getenv("TMPDIR");

		if (snprintf(workdir_buf, sizeof(workdir_buf), "%s/kvfs-bench.XXXXXX",
			     tmp && *tmp ? tmp : "/tmp") >= (int)sizeof(workdir_buf))
			die("TMPDIR too long");
		if (!mkdtemp(workdir_buf))
			die("mkdtemp: %s", strerror(errno));
		workdir = workdir_buf;
		/* Removed last, and only when empty: after a failure the
		 * daemon's log stays there. */
		snprintf(cl.rmdirs[cl.nrmdirs++], PATH_MAX, "%s", workdir);
	}

	if (kvfs_dir) {
		snprintf(kvfs_root, sizeof(kvfs_root), "%s", kvfs_dir);
	} else {
		if (access(mount_bin, X_OK)) {
			/* 77: skipped, as the test runner counts it. */
			fprintf(stderr, "kvfs_bench: skipped: %s: %s (build it with make, or pass --mount-bin)\n",
				mount_bin, strerror(errno));
			cleanup_all(false);
			return 77;
		}
		mount_kvfs(mount_bin, opts, workdir, kvfs_root);
	}
	if (tmpfs_dir)
		snprintf(tmpfs_root, sizeof(tmpfs_root), "%s", tmpfs_dir);
	else
		mount_tmpfs(workdir, tmpfs_root, &tmpfs_kind);

	for (int f = 0; f < 2; f++) {
		if (snprintf(ns[f], PATH_MAX, "%s/bench.%d",
			     f ? tmpfs_root : kvfs_root, (int)getpid()) >= PATH_MAX)
			die("path too long");
		if (mkdir(ns[f], 0755) < 0)
			die("mkdir %s: %s", ns[f], strerror(errno));
	}

	pattern = malloc(sizes[0]);
	if (!pattern)
		die("out of memory");
	for (unsigned t = 0; t < maxt; t++) {
		bufs[t] = malloc(sizes[0] + 4096);
		if (!bufs[t])
			die("out of memory");
		/* Touched so the first trial does not pay page faults. */
		memset(bufs[t], 1, sizes[0] + 4096);
	}
	{
		uint64_t x = 0x9e3779b97f4a7c15ull;

		for (size_t i = 0; i < sizes[0]; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(pattern + i, &x, 8);
		}
	}

	printf("kvfs_bench: kvfs %s (-o %s) vs %s %s; %lu MiB per phase, best of %lu\n",
	       kvfs_dir ? kvfs_dir : kvfs_root, kvfs_dir ? "-" : opts,
	       tmpfs_kind, tmpfs_root, mib, trials);
	print_machine("before", kvfs_root);
	fflush(stdout);

	for (unsigned s = 0; s < 2; s++)
		for (int t = 0; t < nt; t++)
			for (int op = 0; op < OP_NR; op++)
				rows[nrows++] = (struct row){
					.size = sizes[s], .nthreads = threads[t],
					.op = op, .best = { 1e30, 1e30 } };

	for (unsigned long trial = 0; trial < trials; trial++) {
		int r = 0;

		for (unsigned s = 0; s < 2; s++) {
			for (int t = 0; t < nt; t++, r += OP_NR) {
				for (int f = 0; f < 2; f++) {
					struct phase ph = {
						.dir = ns[f], .size = sizes[s],
						.nfiles = (unsigned)((mib << 20) / sizes[s]),
						.nthreads = threads[t],
						.trial = (unsigned)(trial * (unsigned long)nt + (unsigned long)t),
						.pattern = pattern,
					};

					for (int op = 0; op < OP_NR; op++) {
						double sec;

						ph.op = op;
						sec = run_phase(&ph, bufs);
						if (verbose)
							printf("  trial %lu %s %s %zu KiB %u thr: %.3f ms\n",
							       trial, f ? "tmpfs" : "kvfs", op_names[op],
							       ph.size >> 10, ph.nthreads, sec * 1e3);
						if (sec < rows[r + op].best[f])
							rows[r + op].best[f] = sec;
						rows[r + op].t[f][trial] = sec;
					}
					if (trial == trials - 1) {
						/* Every byte, untimed. */
						ph.op = OP_READ2;
						ph.verify = true;
						run_phase(&ph, bufs);
					}
					remove_files(&ph);
				}
			}
		}
	}

	print_machine("after ", kvfs_root);
	printf("\n%-8s %-12s %3s | %9s %10s | %9s %10s | %6s | %6s\n", "chunk", "op",
	       "thr", "kvfs GB/s", "files/s", "tmpfs GB/s", "files/s", "ratio",
	       "median");
	printf("---------------------------+----------------------+-----------------------+--------+-------\n");
	for (int i = 0; i < nrows; i++) {
		struct row *rw = &rows[i];
		double nfiles = (double)((mib << 20) / rw->size);
		double bytes = (double)(mib << 20);
		double g[2], fps[2];

		for (int f = 0; f < 2; f++) {
			g[f] = bytes / rw->best[f] / 1e9;
			fps[f] = nfiles / rw->best[f];
		}
		printf("%-8s %-12s %3u | %9.2f %10.0f | %10.2f %10.0f | %5.2fx | %5.2fx\n",
		       rw->size >= (1u << 20) ? "2 MiB" : "256 KiB",
		       op_names[rw->op], rw->nthreads, g[0], fps[0], g[1], fps[1],
		       g[0] / g[1],
		       median(rw->t[1], trials) / median(rw->t[0], trials));
	}
	/*
	 * tmpfs writes swing with the state of the pages they get: on a VM
	 * whose freed memory goes back to the host, fresh pages cost a
	 * hypervisor fault each, so say how far its trials spread.
	 */
	{
		double lo = rows[0].t[1][0], hi = lo;

		for (unsigned long i = 1; i < trials; i++) {
			lo = rows[0].t[1][i] < lo ? rows[0].t[1][i] : lo;
			hi = rows[0].t[1][i] > hi ? rows[0].t[1][i] : hi;
		}
		printf("ratio: best trial against best trial; median: median "
		       "against median.\n2 MiB %u-thread tmpfs writes spread "
		       "%.2f-%.2f GB/s over the trials (fresh pages are slow "
		       "on a VM).\n", threads[0],
		       (double)(mib << 20) / hi / 1e9,
		       (double)(mib << 20) / lo / 1e9);
	}

	/* Rows by size, then thread count, then op: the scaling table. */
	bench_scaling_table(threads, nt, OP_NR, op_names, rows, sizeof(rows[0]),
			    offsetof(struct row, best));

	print_targets(rows, nt, threads, mib, trials);
	print_passthrough(kvfs_root);
	printf("every byte of the last trial verified on both; %.1f s in all\n",
	       now_s() - t_start);

	for (int f = 0; f < 2; f++)
		rmdir(ns[f]);
	if (cl.kvfs_log[0])
		unlink(cl.kvfs_log);
	cleanup_all(false);
	free(pattern);
	for (unsigned t = 0; t < maxt; t++)
		free(bufs[t]);
	return 0;
}
