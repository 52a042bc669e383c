/*
 * preload_spare.c - the sockets that stand for served fds, kept for the
 * next open (lib/preload/README.md, "Spare sockets").
 *
 * A new AF_UNIX socket and its fstat cost 2-3 us on the 2-core VM of
 * issue 26 (its allocation, memory accounting and an RCU-deferred free
 * at close): a third of what the library added to a lazy read of a
 * 256 KiB chunk. The dup of a kept one costs 0.3-0.5 us. So the close of
 * the last fd standing for a chunk being read (preload_fd.c's close,
 * which checked that fd is still the socket and that no other entry of
 * the table stands for it) moves the socket to a number at FD_BASE or
 * above, close-on-exec, instead of closing it; the next pl_fd_serve
 * takes it, checks that number is still that socket (a raw close or
 * closefrom may have given the number to another file: then the entry
 * is forgotten and the file left alone), and dups it down to the lowest
 * free fd, as socket() would have returned.
 *
 * A fork's child inherits the spares with the fds (its own copies); a
 * vfork child never gets here (pl_table_mine); exec closes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"

/* a few, under the 64 fds a process starts with (FD_BASE) */
#define SPARE_MAX 4

struct spare {
	int fd;
	dev_t dev;
	ino_t ino;
};

/* lock: protects spares and nspares; held across no call but a fork's
 * (atfork handlers below) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct spare spares[SPARE_MAX];
static unsigned nspares;

static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_done(void) { pthread_mutex_unlock(&lock); }

__attribute__((constructor)) static void spare_init(void)
{
	pthread_atfork(atfork_prepare, atfork_done, atfork_done);
}

int pl_fd_high(int fd)
{
	struct rlimit rl;
	int r;

	REAL(fcntl);
	r = r_fcntl(fd, F_DUPFD_CLOEXEC, FD_BASE);
	if (r < 0 && errno == EINVAL && !getrlimit(RLIMIT_NOFILE, &rl) &&
	    rl.rlim_cur / 2 < FD_BASE)
		r = r_fcntl(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur / 2));
	return r;
}

/* s back among the spares, or closed when they are full. */
static void give_back(const struct spare *s)
{
	bool kept;

	pthread_mutex_lock(&lock);
	kept = nspares < SPARE_MAX;
	if (kept)
		spares[nspares++] = *s;
	pthread_mutex_unlock(&lock);
	if (!kept) {
		REAL(close);
		r_close(s->fd);
	}
}

int pl_spare_take(bool cloexec, dev_t *dev, ino_t *ino)
{
	struct spare s;
	struct stat st;
	int fd;

	REAL(fstat);
	REAL(fcntl);
	REAL(close);
	for (;;) {
		pthread_mutex_lock(&lock);
		if (!nspares) {
			pthread_mutex_unlock(&lock);
			return -1;
		}
		s = spares[--nspares];
		pthread_mutex_unlock(&lock);
		/* another file's number now: forgotten, left alone */
		if (r_fstat(s.fd, &st) || st.st_dev != s.dev ||
		    st.st_ino != s.ino)
			continue;
		fd = r_fcntl(s.fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
		if (fd >= TAB_MAX) { /* (a table that full: a new socket's
				      * number would be too) */
			r_close(fd);
			fd = -1;
		}
		if (fd < 0) { /* EMFILE...: kept for later */
			give_back(&s);
			return -1;
		}
		r_close(s.fd);
		*dev = s.dev;
		*ino = s.ino;
		return fd;
	}
}

void pl_spare_keep(int fd, dev_t dev, ino_t ino)
{
	struct spare s = { .dev = dev, .ino = ino };
	bool room;

	pthread_mutex_lock(&lock);
	room = nspares < SPARE_MAX;
	pthread_mutex_unlock(&lock);
	if (room && (s.fd = pl_fd_high(fd)) >= 0)
		give_back(&s);
}
