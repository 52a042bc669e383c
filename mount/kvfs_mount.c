/*
 * kvfs_mount.c - kvfs-mount: takes its options (mount_opts.c), creates
 * the engine and the filesystem, mounts, daemonizes (unless -f) and
 * serves until unmounted (fusermount3 -u, umount) or told to stop
 * (SIGTERM, SIGINT, SIGHUP).
 *
 *   kvfs-mount [-f] [-d] [-o opt[,opt...]] MOUNTPOINT
 *   mount.kvfs SOURCE MOUNTPOINT [-o opts]     (mount(8) and fstab)
 *
 * Without -f the parent forks, the child creates the engine, mounts and
 * reports through a pipe; the parent exits 0 only once the mount is ready,
 * and with the child's failure status otherwise (its error went to
 * stderr, and nothing is left mounted).
 *
 * Under systemd (Type=notify, NOTIFY_SOCKET set; see kvfs@.service) it
 * sends READY=1 once the mount answers and STOPPING=1 when it stops;
 * without NOTIFY_SOCKET sd_notify does nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <fuse_opt.h>

#include "kvfs.h"
#include "fs/fs.h"
#include "mount/mount_dead.h"
#include "mount/mount_events.h"
#include "mount/mount_http.h"
#include "mount/mount_log.h"
#include "mount/mount_opts.h"
#include "mount/mount_stop.h"
#include "mount/mount_uring.h"
#include "tier/policy/policy.h"
#include "tier/tier.h"


/* The event publisher's log lines: stderr until the mount is ready, then
 * syslog (fuse_log follows fuse_set_log_func). */
/*
 * The kernel gives a FUSE mount the readahead of a default block device
 * (128 KiB) and takes the smaller of that and the max_readahead init()
 * asks for (1 MiB): page-cache reads (cache=page, and mmap of a chunk)
 * then reach the daemon as 128 KiB READs, 16 round trips per 2 MiB
 * chunk. Raising the mount's own bdi (/sys/class/bdi/MAJ:MIN, found in
 * mountinfo) to 1 MiB makes them 1 MiB requests, as direct reads are.
 * Only root may; otherwise (cache=page) one log line says so.
 */
static void raise_readahead(const char *mnt, bool page_cache)
{
	char real[PATH_MAX], line[PATH_MAX + 256], path[96], dev[32] = "";
	FILE *f;
	int fd;

	if (!realpath(mnt, real) || !(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX], d[32];

		/* id parent MAJ:MIN root mountpoint ...; the last match is
		 * the newest mount there (ours) */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mp) == 2 &&
		    !strcmp(mp, real))
			snprintf(dev, sizeof(dev), "%s", d);
	}
	fclose(f);
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	fd = dev[0] ? open(path, O_WRONLY | O_CLOEXEC) : -1;
	if (fd < 0 || write(fd, "1024", 4) != 4) {
		if (page_cache)
			fprintf(stderr, "kvfs-mount: %s: %s; page-cache reads "
				"stay 128 KiB requests\n", dev[0] ? path :
				"mountinfo", strerror(dev[0] ? errno : ENOENT));
	}
	if (fd >= 0)
		close(fd);
}

/* Threads per online CPU's ring (mount_uring.h): the classic loop's
 * workers (fs_workers() + wait_max) spread over the online CPUs, at least
 * 8, so a CPU's callers may be in as many requests at once as one CPU's
 * share of the workers (half of them waiting at most: fs_ring_hold). On a
 * host of more than 64 CPUs the floor falls so that the floor's threads
 * stay near URING_THREADS (at least 2 a CPU): each thread holds an entry
 * whose buffer (max_write and a page) stays resident once a large request
 * used it, 8 a CPU on 224 CPUs would be 1,792 threads and as many MiB. */
#define URING_THREADS 512
static unsigned uring_per_cpu(uint32_t wait_max)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned c = (unsigned)(cpus > 0 ? cpus : 1);
	unsigned n = (fs_workers() + wait_max) / c;
	unsigned floor = URING_THREADS / c;

	floor = floor > 8 ? 8 : floor < 2 ? 2 : floor;
	return n < floor ? floor : n;
}

static void ev_log(void *arg, const char *msg)
{
	(void)arg;
	fuse_log(FUSE_LOG_ERR, "kvfs-mount: %s\n", msg);
}

/* Tells the waiting parent how it went (daemon mode); -1 = foreground. */
static void report(int fd, unsigned char status)
{
	if (fd >= 0) {
		ssize_t r = write(fd, &status, 1);

		(void)r;
		close(fd);
	}
}

/* Daemon mode, or under systemd: says "ready" once the kernel has the
 * mount working. */
struct ready {
	char path[PATH_MAX + 32];
	const char *mnt;
	int fd;                  /* the parent's pipe (or -1); taken by exchange */
	struct fuse_session *se;
	struct mount_stop *stop;
	pthread_t thread;
};

/*
 * The kernel answers nothing on a new mount before FUSE INIT succeeded, so
 * a stat through it tells a working mount from one whose INIT libfuse
 * refused (the loop then ends and serve reports the failure).
 */
static void *ready_main(void *arg)
{
	struct ready *rd = arg;
	struct stat st;
	int fd;

	if (stat(rd->path, &st)) {
		/* the stop signal wakes the loop (a session exit alone would
		 * wait for the next request); serve then reports failure */
		fuse_session_exit(rd->se);
		kill(getpid(), SIGTERM);
		return NULL;
	}
	/* a stop that began meanwhile: not ready (the parent of a daemon
	 * is told it failed, as a stop before the mount answered was) */
	if (!mount_stop_ready(rd->stop, rd->mnt))
		return NULL;
	fd = __atomic_exchange_n(&rd->fd, -1, __ATOMIC_ACQ_REL);
	if (fd >= 0) {
		int nul = open("/dev/null", O_RDWR);

		mount_log_start(true); /* stderr goes away */
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
		report(fd, 0);
	}
	return NULL;
}

/*
 * Serves one mount until it goes away. ready_fd: where to report success
 * (daemon mode) or -1. Returns the exit status.
 */
static int serve(struct mopts *o, const char *mnt, struct tier_config *tc,
		 struct fs_config *fc, int ready_fd)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	struct fuse_loop_config *lc;
	struct fs *fs = NULL;
	char err[512] = "", opts[1400];
	sigset_t block, old;
	struct ready rd = { .fd = ready_fd };
	struct mount_http *http = NULL;
	struct mount_stop *stop = NULL;
	dev_t conn = 0; /* the FUSE connection's device, once mounted */
	bool ready_started = false;
	int ret = 1, r;

	/*
	 * Threads the engine starts (L2 I/O, reclaim) must not take SIGTERM
	 * away from the thread that waits in the FUSE loop, or the loop would
	 * never notice: block the stop signals while they are created.
	 */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	/* a write to a closed socket (L3, events, metrics) is an error, not
	 * the end of the daemon: ignored from the start to the exit */
	signal(SIGPIPE, SIG_IGN);
	/* before any thread, and before /dev/fuse is open */
	r = mount_watchdog_start(ready_fd < 0); /* stderr when foreground */
	if (r)
		fprintf(stderr, "kvfs-mount: no watchdog (%s): a daemon killed "
			"while stuck in the kernel would need "
			"/sys/fs/fuse/connections/N/abort\n", strerror(-r));
	pthread_sigmask(SIG_BLOCK, &block, &old);
	mount_log_start(false); /* until ready_main detaches: stderr */

	/* KV events first: fs_create announces what L2 recovery found */
	o->evc.log = ev_log;
	if (mount_events_start(&o->evc, &fc->events))
		goto out_mask;
	if (o->metrics_http) {
		char bound[80];
		size_t n = strlen(fc->config_text);

		/* bound before the mount: a taken port fails the mount */
		if (mount_http_start(&o->http, &http, bound, sizeof(bound)))
			goto out_mask;
		snprintf(fc->config_text + n, sizeof(fc->config_text) - n,
			 "metrics_http=%s\n", bound);
	}
	fc->uring_counts = mount_uring_counts;
	if (fc->fuse_uring != MOUNT_URING_OFF) {
		/* half a ring's entries may wait at once (and batches a
		 * quarter more: fs_ring_hold) */
		fc->ring_cpu = mount_uring_cpu;
		fc->ring_hold_max = uring_per_cpu(fc->wait_max) / 2;
	}
	r = fs_create(fc, tc, &fs, err, sizeof(err));
	mopts_forget_secrets(); /* L3 has a copy */
	if (r) {
		fprintf(stderr, "kvfs-mount: %s\n", err[0] ? err :
			strerror(-r));
		goto out_mask;
	}
	mount_http_attach(http, fs);
	/* /proc/mounts shows SOURCE (mount(8) form) or "kvfs" as fsname */
	if (strstr(o->fuse_opts, "fsname="))
		snprintf(opts, sizeof(opts), "default_permissions,subtype=kvfs,%s",
			 o->fuse_opts);
	else
		snprintf(opts, sizeof(opts),
			 "default_permissions,subtype=kvfs,fsname=%s%s%s",
			 o->mount_form && o->nargs == 2 &&
			 !strchr(o->args[0], ',') ? o->args[0] : "kvfs",
			 o->fuse_opts[0] ? "," : "", o->fuse_opts);
	if (fuse_opt_add_arg(&args, "kvfs-mount") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, opts) ||
	    (o->debug && fuse_opt_add_arg(&args, "-d"))) {
		fprintf(stderr, "kvfs-mount: out of memory\n");
		goto out_fs;
	}
	se = fuse_session_new(&args, fs_ops(), sizeof(struct fuse_lowlevel_ops),
			      fs);
	if (!se) {
		fprintf(stderr, "kvfs-mount: cannot start a FUSE session\n");
		goto out_args;
	}
	if (fc->fuse_uring == MOUNT_URING_ON &&
	    (r = mount_uring_prepare(MOUNT_URING_ON))) {
		fprintf(stderr, "kvfs-mount: fuse_uring=on: %s\n",
			r == -ENOTSUP ? "this kernel's fuse has no io_uring"
				      : strerror(-r));
		goto out_sig;
	}
	if (fuse_session_mount(se, mnt)) {
		fprintf(stderr, "kvfs-mount: cannot mount on %s\n", mnt);
		goto out_sig;
	}
	/* (not a stat of mnt: nobody would answer it yet) */
	if (mount_dead_find(mnt, &conn))
		mount_watchdog_conn(conn);
	else
		conn = 0;
	/* each online CPU's ring gets as many threads as the classic loop
	 * has workers per CPU, waiters' included (mount_uring.c) */
	r = mount_uring_install(se, (enum mount_uring_mode)fc->fuse_uring,
				uring_per_cpu(fc->wait_max),
				fc->cache == FS_CACHE_PASSTHROUGH);
	if (r) {
		fprintf(stderr, "kvfs-mount: fuse_uring: %s\n", strerror(-r));
		goto out_unmount;
	}
	raise_readahead(mnt, fc->cache == FS_CACHE_PAGE);
	r = fs_start(fs, se);
	if (r) {
		fprintf(stderr, "kvfs-mount: %s\n", strerror(-r));
		goto out_unmount;
	}
	/* a stop signal quiesces the filesystem before the loop stops
	 * serving (mount/mount_stop.h) */
	r = mount_stop_install(se, fs, conn, &stop);
	if (r) {
		fprintf(stderr, "kvfs-mount: cannot install signal handlers "
			"(%s)\n", strerror(-r));
		goto out_stop;
	}
	if (ready_fd >= 0 || getenv("NOTIFY_SOCKET")) {
		/* started with the stop signals still blocked: they stay
		 * with the loop's thread */
		snprintf(rd.path, sizeof(rd.path), "%s/" KVFS_CTL_DIR "/version",
			 mnt);
		rd.mnt = mnt;
		rd.se = se;
		rd.stop = stop;
		if (pthread_create(&rd.thread, NULL, ready_main, &rd)) {
			fprintf(stderr, "kvfs-mount: cannot start a thread\n");
			goto out_stop;
		}
		ready_started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	lc = fuse_loop_cfg_create();
	if (!lc) {
		fuse_log(FUSE_LOG_ERR, "kvfs-mount: out of memory\n");
		ret = 1;
	} else {
		fuse_loop_cfg_set_clone_fd(lc, 0); /* measured: no gain here */
		/* waiters sleep on workers of their own (fs/fs_wait.h) */
		fuse_loop_cfg_set_max_threads(lc, fs_workers() +
					      fc->wait_max);
		fuse_loop_cfg_set_idle_threads(lc, 8);
		/* < 0: the session failed (a stop, an unmount, or an
		 * abort of the connection end it with 0) */
		ret = fuse_session_loop_mt(se, lc) < 0 ? 1 : 0;
		fuse_loop_cfg_destroy(lc);
	}
	mount_stop_settle(stop); /* a stop in progress ends first */
	if (mount_stop_aborted(stop)) /* callers' requests failed */
		ret = 1;
	mount_uring_stop(); /* its threads serve requests too */
	/* flushing L2 may take a while: systemd shows why (a stop signal's
	 * thread said so already) */
	if (!mount_stop_requested(stop))
		sd_notify(0, "STOPPING=1\nSTATUS=stopping: flushing and "
			  "unmounting");
out_stop:
	mount_stop_settle(stop); /* (a stop thread's fs_stop ends first) */
	fs_stop(fs);
out_unmount:
	fuse_session_unmount(se);
	/* the unmount fails a stat still waiting on the mount */
	if (ready_started)
		pthread_join(rd.thread, NULL);
out_sig:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&args);
out_fs:
	mount_http_stop(http); /* before the fs it reads goes */
	http = NULL;
	fs_destroy(fs);
out_mask:
	mount_http_stop(http);
	ev_pub_destroy(fc->events); /* sends what is still queued */
	fc->events = NULL;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	mount_stop_remove(stop); /* after the flush: a second stop waits */
	mount_log_flush(); /* no suppressed count is lost */
	/* the mount never worked: the parent says so and exits non-zero */
	report(__atomic_exchange_n(&rd.fd, -1, __ATOMIC_ACQ_REL), 1);
	mount_watchdog_stop(); /* a clean exit */
	return ret;
}


int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct mopts o;
	struct tier_config tc;
	struct fs_config fc;
	const char *prog = strrchr(argv[0], '/');
	char mnt[PATH_MAX];
	struct statvfs sv;
	struct stat st;
	int ret = 1, pfd[2];
	pid_t pid;

	prog = prog ? prog + 1 : argv[0];
	/*
	 * glibc gives each thread that allocates its own arena (up to 8 per
	 * core) and raises its mmap threshold to the largest block freed, so
	 * chunk-sized buffers (L2 records, zstd, FUSE replies) end up
	 * fragmenting every arena: RSS grew by more than l1_size beyond the
	 * arena under mixed load. Two arenas and a fixed threshold (blocks of
	 * 256 KiB and more are mapped and unmapped) keep it flat; see
	 * "Memory" in kvfs-mount(8). Each arena keeps up to 1 MiB free at
	 * its top (glibc returns anything past 128 KiB by default): a group
	 * lookup with PIN allocates and frees ~200 KiB (its pins and the
	 * lease's copy), and faulting those pages in again on every call was
	 * 14% of the daemon's samples in a loop of them.
	 */
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
	memset(&o, 0, sizeof(o));
	o.mount_form = !strncmp(prog, "mount.", 6);
	if (mopts_parse(&args, &o) == -1 || o.bad) {
		fprintf(stderr, "Try '%s --help'.\n", prog);
		goto out;
	}
	if (o.help) {
		mopts_usage(stdout, prog);
		ret = 0;
		goto out;
	}
	if (o.version) {
		printf("kvfs-mount %s (libfuse %s)\n", KVFS_VERSION_STRING,
		       fuse_pkgversion());
		ret = 0;
		goto out;
	}
	/* mount(8) form: SOURCE MOUNTPOINT */
	if (o.nargs == 2)
		o.mount_form = 1;
	if (o.nargs == 0 || (o.mount_form && o.nargs == 1 &&
			     !strncmp(prog, "mount.", 6))) {
		fprintf(stderr, "%s: no mount point given\n", prog);
		mopts_usage(stderr, prog);
		goto out;
	}
	if (o.fake) {
		ret = 0;
		goto out;
	}
	/* a dead kvfs there (its daemon was killed): detach it first. (A
	 * statfs, not a stat: the root's attributes may be cached;
	 * ECONNABORTED, ECANCELED: one caught while the rings of FUSE over
	 * io_uring are torn down) */
	if (statvfs(o.args[o.nargs - 1], &sv) &&
	    (errno == ENOTCONN || errno == ECONNABORTED ||
	     errno == ECANCELED))
		mount_dead_recover(prog, o.args[o.nargs - 1]);
	if (!realpath(o.args[o.nargs - 1], mnt) || stat(mnt, &st)) {
		int e = errno;

		/* what a crashed daemon leaves: say how to clear it */
		fprintf(stderr, "%s: mount point %s: %s%s%s\n", prog,
			o.args[o.nargs - 1], strerror(e), e == ENOTCONN ?
			"; a dead mount? detach it with fusermount3 -u -z " :
			"", e == ENOTCONN ? o.args[o.nargs - 1] : "");
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: mount point %s: %s\n", prog, mnt,
			strerror(ENOTDIR));
		goto out;
	}
	/* (a kvfs already: mounting again would hide it and every chunk in
	 * it from the engines using it, never what an operator meant) */
	if (!o.overmount && mount_dead_find(mnt, NULL)) {
		fprintf(stderr, "%s: %s is a kvfs mount already; unmount it "
			"first (fusermount3 -u %s), or pass -o overmount to "
			"mount over it and hide it\n", prog, mnt, mnt);
		goto out;
	}
	if (mopts_build(&o, &tc, &fc))
		goto out;

	if (o.foreground) {
		ret = serve(&o, mnt, &tc, &fc, -1);
		goto out;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		perror("kvfs-mount: pipe");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		perror("kvfs-mount: fork");
		goto out;
	}
	if (pid > 0) {
		unsigned char status = 1;

		close(pfd[1]);
		/* EOF without a byte: the child died before reporting */
		if (read(pfd[0], &status, 1) == 1) {
			ret = status == 0 ? 0 : 1; /* it said why itself */
		} else {
			int ws = 0;

			ret = 1;
			if (waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws))
				fprintf(stderr, "kvfs-mount: the daemon was "
					"killed by signal %d (%s) before the "
					"mount was ready%s\n", WTERMSIG(ws),
					strsignal(WTERMSIG(ws)),
					WTERMSIG(ws) == SIGKILL ?
					"; out of memory? see dmesg" : "");
			else
				fprintf(stderr, "kvfs-mount: the daemon exited "
					"before the mount was ready\n");
		}
		close(pfd[0]);
		goto out;
	}
	close(pfd[0]);
	setsid();
	if (chdir("/")) {
		/* not fatal: the mount point was resolved to a full path */
	}
	ret = serve(&o, mnt, &tc, &fc, pfd[1]);
out:
	fuse_opt_free_args(&args);
	mopts_free(&o);
	return ret;
}
