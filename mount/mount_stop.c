/*
 * mount_stop.c - the stop signals (mount_stop.h): the handler only counts
 * the signal into an eventfd; a thread of ours, woken by it, stops the
 * background thread while the session still serves, then ends the
 * session and wakes the loop's thread.
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

#include "fs/fs.h"
#include "mount/mount_stop.h"

#define STOP_KICK_MS 20

static const int stop_sigs[] = { SIGTERM, SIGINT, SIGHUP };
#define NSIGS (sizeof(stop_sigs) / sizeof(stop_sigs[0]))

static volatile int stop_fd = -1; /* the handler's eventfd (one install at a time) */

struct mount_stop {
	struct fuse_session *se;
	struct fs *fs;
	pthread_t loop;             /* the thread woken at a stop */
	pthread_t thread;
	bool started;               /* thread runs (or ran, not joined) */
	atomic_bool settled;        /* the loop returned */
	struct sigaction old[NSIGS], old_pipe;
};

static void on_stop(int sig)
{
	uint64_t one = 1;
	int e = errno;

	(void)sig;
	if (stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) < 0) {
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
	/* its notifications finish while the serving threads still answer
	 * the requests whose directory locks they wait for */
	fs_stop(ms->fs);
	fuse_session_exit(ms->se);
	while (!atomic_load(&ms->settled)) {
		pthread_kill(ms->loop, SIGTERM);
		nanosleep(&kick, NULL);
	}
	return NULL;
}

int mount_stop_install(struct fuse_session *se, struct fs *fs,
		       struct mount_stop **out)
{
	struct mount_stop *ms = calloc(1, sizeof(*ms));
	struct sigaction sa, ign;
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
	ms->loop = pthread_self();
	atomic_init(&ms->settled, false);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	for (i = 0; i < NSIGS; i++)
		sigaction(stop_sigs[i], &sa, &ms->old[i]);
	sigaction(SIGPIPE, &ign, &ms->old_pipe);
	/* (the caller has the stop signals blocked: so has the thread) */
	r = pthread_create(&ms->thread, NULL, stop_main, ms);
	if (r) {
		for (i = 0; i < NSIGS; i++)
			sigaction(stop_sigs[i], &ms->old[i], NULL);
		sigaction(SIGPIPE, &ms->old_pipe, NULL);
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

void mount_stop_remove(struct mount_stop *ms)
{
	int fd;

	if (!ms)
		return;
	mount_stop_settle(ms);
	for (size_t i = 0; i < NSIGS; i++)
		sigaction(stop_sigs[i], &ms->old[i], NULL);
	sigaction(SIGPIPE, &ms->old_pipe, NULL);
	fd = stop_fd;
	stop_fd = -1;
	close(fd);
	free(ms);
}
