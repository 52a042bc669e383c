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
 * the table stands for it, nor ever will: close_forget) moves the
 * socket to a number at FD_BASE or above, close-on-exec, checked to be
 * that socket, instead of closing it; the next pl_fd_serve takes it,
 * checks that number is still that socket (a raw close or closefrom may
 * have given the number to another file: then the entry is forgotten
 * and the file left alone), and dups it down to the lowest free fd, as
 * socket() would have returned.
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

/* two (a reader per core here), under the 64 fds a process starts with
 * (FD_BASE); each is one of the process's RLIMIT_NOFILE */
#define SPARE_MAX 2

struct spare {
	int fd;
	dev_t dev;
	ino_t ino;
};

/* lock: protects spares and nspares, and is held across the calls that
 * move a spare's fd (a fork then never sees one half moved: the child's
 * fds are the spares it is told). A leaf: no other lock of the library
 * is taken under it. Its atfork handlers are registered first (the
 * constructor's priority), so a fork takes it last, after the locks
 * under which an open reaches pl_spare_take (the namespace table's,
 * preload_wr.c's walk_lock). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct spare spares[SPARE_MAX];
static unsigned nspares;

static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_done(void) { pthread_mutex_unlock(&lock); }

__attribute__((constructor(101))) static void spare_init(void)
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

/* Whether fd is the socket dev, ino. */
static bool is_sock(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	REAL(fstat);
	return !r_fstat(fd, &st) && st.st_dev == dev && st.st_ino == ino;
}

int pl_spare_take(bool cloexec, dev_t *dev, ino_t *ino)
{
	int fd = -1;

	REAL(fcntl);
	REAL(close);
	pthread_mutex_lock(&lock);
	while (fd < 0 && nspares) {
		struct spare *s = &spares[nspares - 1];

		/* another file's number now: forgotten, left alone */
		if (!is_sock(s->fd, s->dev, s->ino)) {
			nspares--;
			continue;
		}
		fd = r_fcntl(s->fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
		if (fd >= TAB_MAX) { /* (a table that full: a new socket's
				      * number would be too) */
			r_close(fd);
			fd = -1;
		}
		if (fd < 0) /* EMFILE...: kept for later */
			break;
		r_close(s->fd);
		*dev = s->dev;
		*ino = s->ino;
		nspares--;
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

void pl_spare_keep(int fd, dev_t dev, ino_t ino)
{
	int hi;

	REAL(close);
	pthread_mutex_lock(&lock);
	if (nspares < SPARE_MAX && (hi = pl_fd_high(fd)) >= 0) {
		/* fd may be another file already (a dup2 onto it racing
		 * its close): then that copy goes */
		if (is_sock(hi, dev, ino))
			spares[nspares++] = (struct spare){ .fd = hi,
							    .dev = dev,
							    .ino = ino };
		else
			r_close(hi);
	}
	pthread_mutex_unlock(&lock);
}
