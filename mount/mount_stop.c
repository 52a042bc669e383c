/*
 * mount_stop.c - the stop signals (mount_stop.h): the handler only counts
 * the signal into an eventfd; a thread of ours, woken by it, quiesces the
 * filesystem (fs_quiesce: no more kernel invalidations from request
 * handlers, those in flight and the background thread end) while the
 * session still serves, then ends the session and wakes the loop's
 * thread. Where the quiescing does not end within STOP_QUIESCE_MS (an
 * invalidation still waits in the kernel), the FUSE connection is aborted
 * (as the watchdog does for a killed daemon): the callers' requests fail,
 * the invalidation returns, and the loop ends.
 *
 * A stop signal the parent left ignored (nohup, a background job of a
 * non-interactive shell) stays ignored, as with libfuse's handlers.
 *
 * Waking the loop: libfuse 3.14's fuse_session_loop_mt waits on a
 * semaphore between checks of the session's exit flag, and only a signal
 * (EINTR) or a worker that ends wakes it. The stop thread sends the loop's
 * thread SIGTERM (our handler: one more count, harmless) until the loop
 * has returned, every STOP_KICK_MS: a signal that lands between the
 * loop's check and its wait would otherwise be lost.
 */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <systemd/sd-daemon.h>

#include "fs/fs.h"
#include "mount/mount_dead.h"
#include "mount/mount_stop.h"

#define STOP_KICK_MS 20
#define STOP_QUIESCE_MS 10000

static const int stop_sigs[] = { SIGTERM, SIGINT, SIGHUP };
#define NSIGS (sizeof(stop_sigs) / sizeof(stop_sigs[0]))

/* the handler's eventfd (one install at a time) */
static volatile int stop_fd = -1;

struct mount_stop {
	struct fuse_session *se;
	struct fs *fs;
	dev_t dev;                  /* the FUSE connection's, or 0 */
	pthread_t loop;             /* the thread woken at a stop */
	pthread_t thread;
	bool started;               /* thread runs (or ran, not joined) */
	atomic_bool settled;        /* the loop returned */
	atomic_bool stopping;       /* a stop signal was acted on */
	atomic_bool aborted;        /* the stop aborted the connection */
	pthread_mutex_t notify_mu;  /* orders READY=1 before STOPPING=1 */
	bool mine[NSIGS];           /* handled here (not left ignored) */
	struct sigaction old[NSIGS];
};

static void on_stop(int sig)
{
	uint64_t one = 1;
	int e = errno, fd = stop_fd; /* read once: remove may close it */

	(void)sig;
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* a full count (2^64 - 1 signals): already woken */
	}
	errno = e;
}

static void *stop_main(void *arg)
{
	struct mount_stop *ms = arg;
	uint64_t n;
	const struct timespec kick = { 0, STOP_KICK_MS * 1000000L };

	while (read(stop_fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	if (atomic_load(&ms->settled)) /* the loop ended on its own */
		return NULL;
	/* systemd hears it now (once: serve() says nothing more; never
	 * before READY=1, nor READY=1 after it: mount_stop_ready) */
	pthread_mutex_lock(&ms->notify_mu);
	atomic_store(&ms->stopping, true);
	sd_notify(0, "STOPPING=1\nSTATUS=stopping: flushing and unmounting");
	pthread_mutex_unlock(&ms->notify_mu);
	/* the notifications in flight finish while the serving threads
	 * still answer the requests whose directory locks they wait for */
	if (fs_quiesce(ms->fs, STOP_QUIESCE_MS)) {
		int r = ms->dev ? mount_conn_abort(ms->dev) : -ENODEV;

		if (!r) {
			atomic_store(&ms->aborted, true);
			fuse_log(FUSE_LOG_ERR, "kvfs-mount: stop: a kernel "
				 "invalidation still waits after %d s; aborting "
				 "the FUSE connection\n",
				 STOP_QUIESCE_MS / 1000);
		} else {
			fuse_log(FUSE_LOG_ERR, "kvfs-mount: stop: a kernel "
				 "invalidation still waits after %d s, and the "
				 "FUSE connection cannot be aborted (%s): the stop "
				 "waits for it\n", STOP_QUIESCE_MS / 1000,
				 r == -ENODEV ? "its number is not known"
					      : strerror(-r));
		}
	}
	fuse_session_exit(ms->se);
	while (!atomic_load(&ms->settled)) {
		pthread_kill(ms->loop, SIGTERM);
		nanosleep(&kick, NULL);
	}
	return NULL;
}

int mount_stop_install(struct fuse_session *se, struct fs *fs, dev_t dev,
		       struct mount_stop **out)
{
	struct mount_stop *ms = calloc(1, sizeof(*ms));
	struct sigaction sa;
	size_t i;
	int r;

	*out = NULL;
	if (!ms)
		return -ENOMEM;
	if (stop_fd >= 0) { /* one mount per process */
		free(ms);
		return -EBUSY;
	}
	stop_fd = eventfd(0, EFD_CLOEXEC);
	if (stop_fd < 0) {
		r = -errno;
		free(ms);
		return r;
	}
	ms->se = se;
	ms->fs = fs;
	ms->dev = dev;
	ms->loop = pthread_self();
	atomic_init(&ms->settled, false);
	atomic_init(&ms->stopping, false);
	atomic_init(&ms->aborted, false);
	pthread_mutex_init(&ms->notify_mu, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < NSIGS; i++) {
		sigaction(stop_sigs[i], NULL, &ms->old[i]);
		ms->mine[i] = ms->old[i].sa_handler != SIG_IGN;
		if (ms->mine[i])
			sigaction(stop_sigs[i], &sa, NULL);
	}
	/* (the caller has the stop signals blocked: so has the thread) */
	r = pthread_create(&ms->thread, NULL, stop_main, ms);
	if (r) {
		for (i = 0; i < NSIGS; i++)
			if (ms->mine[i])
				sigaction(stop_sigs[i], &ms->old[i], NULL);
		close(stop_fd);
		stop_fd = -1;
		free(ms);
		return -r;
	}
	ms->started = true;
	*out = ms;
	return 0;
}

void mount_stop_settle(struct mount_stop *ms)
{
	uint64_t one = 1;

	if (!ms || !ms->started)
		return;
	atomic_store(&ms->settled, true);
	/* wakes the thread if no stop came */
	if (write(stop_fd, &one, sizeof(one)) < 0) {
		/* counted already: it is awake */
	}
	pthread_join(ms->thread, NULL);
	ms->started = false;
}

bool mount_stop_requested(struct mount_stop *ms)
{
	return ms && atomic_load(&ms->stopping);
}

bool mount_stop_aborted(struct mount_stop *ms)
{
	return ms && atomic_load(&ms->aborted);
}

bool mount_stop_ready(struct mount_stop *ms, const char *mnt)
{
	bool ok;

	if (ms)
		pthread_mutex_lock(&ms->notify_mu);
	ok = !mount_stop_requested(ms);
	if (ok) /* a no-op without NOTIFY_SOCKET; systemd needs no reply */
		sd_notifyf(0, "READY=1\nSTATUS=serving %s", mnt);
	if (ms)
		pthread_mutex_unlock(&ms->notify_mu);
	return ok;
}

void mount_stop_remove(struct mount_stop *ms)
{
	int fd;

	if (!ms)
		return;
	mount_stop_settle(ms);
	for (size_t i = 0; i < NSIGS; i++)
		if (ms->mine[i])
			sigaction(stop_sigs[i], &ms->old[i], NULL);
	fd = stop_fd;
	stop_fd = -1;
	close(fd);
	pthread_mutex_destroy(&ms->notify_mu);
	free(ms);
}
