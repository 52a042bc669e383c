/*
 * mount_dead.c - dead kvfs mounts (mount_dead.h): which mount and FUSE
 * connection a mount point is (/proc/self/mountinfo), aborting a
 * connection (/sys/fs/fuse/connections/N/abort), recovering a mount point
 * whose daemon died ("Transport endpoint is not connected"), and the
 * watchdog process that aborts the connection of a daemon that was killed
 * while one of its threads was stuck in the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "mount/mount_dead.h"

#define FUSECTL "/sys/fs/fuse/connections"

/* mountinfo escapes space, tab, newline, backslash as \ooo */
static void unescape(const char *p, char *out, size_t len)
{
	size_t i = 0;

	while (*p && i + 1 < len) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' &&
		    p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			out[i++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
					  (p[3] - '0'));
			p += 4;
		} else {
			out[i++] = *p++;
		}
	}
	out[i] = 0;
}

bool mount_dead_find(const char *dir, dev_t *dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL, path[PATH_MAX];
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	/* the last match: the mount on top */
	while (getline(&line, &cap, f) > 0) {
		char *mp = NULL, *sep = strstr(line, " - ");
		unsigned int ma, mi;

		/* id parent major:minor root MOUNTPOINT ... - TYPE ... */
		if (!sep || sscanf(line, "%*s %*s %u:%u %*s %ms", &ma, &mi,
				   &mp) != 3)
			continue;
		unescape(mp, path, sizeof(path));
		free(mp);
		if (!strcmp(path, dir) && !strncmp(sep + 3, "fuse.kvfs ", 10)) {
			found = true;
			if (dev)
				*dev = makedev(ma, mi);
		}
	}
	free(line);
	fclose(f);
	return found;
}

int mount_conn_abort(dev_t dev)
{
	char p[128];
	int fd, rc = 0;

	snprintf(p, sizeof(p), FUSECTL "/%u/abort", minor(dev));
	if (access(p, F_OK) && access(FUSECTL, F_OK) == 0)
		mount("fusectl", FUSECTL, "fusectl", 0, NULL); /* not there */
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A lazy unmount: umount2 as root, else fusermount3 (setuid). */
static int detach(const char *path)
{
	pid_t pid;
	int ws;

	if (umount2(path, MNT_DETACH) == 0)
		return 0;
	if (errno != EPERM)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "--", path,
		       (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws))
		return -EPERM;
	return 0;
}

int mount_dead_recover(const char *prog, const char *path)
{
	char dir[PATH_MAX], full[PATH_MAX + NAME_MAX + 2], *copy, *slash;
	const char *base;
	dev_t dev;
	int rc, arc;

	/* realpath(path) fails on the dead mount itself: resolve its
	 * parent, then add the last component */
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	while (strlen(copy) > 1 && copy[strlen(copy) - 1] == '/')
		copy[strlen(copy) - 1] = 0;
	slash = strrchr(copy, '/');
	base = slash ? slash + 1 : copy;
	if (slash == copy)
		rc = realpath("/", dir) ? 0 : -errno;
	else if (slash) {
		*slash = 0;
		rc = realpath(copy, dir) ? 0 : -errno;
	} else
		rc = realpath(".", dir) ? 0 : -errno;
	if (!rc)
		snprintf(full, sizeof(full), "%s%s%s", dir,
			 strcmp(dir, "/") ? "/" : "", base);
	free(copy);
	if (rc)
		return rc;
	if (!mount_dead_find(full, &dev))
		return -ENOENT;
	arc = mount_conn_abort(dev);
	rc = detach(full);
	fprintf(stderr, "%s: %s: the kvfs mounted there has a dead daemon "
		"(%s); %s FUSE connection %u, %s\n", prog, full,
		strerror(ENOTCONN), arc ? "could not abort" : "aborted",
		minor(dev), rc ? "could not detach it" : "detached it (lazy "
		"unmount); mounting again");
	return rc;
}

/* ---------------------------------------------------------- watchdog */

/* What the daemon tells the watchdog: the mount's device, or goodbye. */
struct wd_msg {
	char tag; /* 'd' (dev), 'q' (a clean exit) */
	uint64_t dev;
};

static int wd_fd = -1;  /* the daemon's end of the pipe */
static pid_t wd_pid = -1;
static volatile sig_atomic_t wd_parent_died;

static void wd_on_pdeath(int sig)
{
	(void)sig;
	wd_parent_died = 1;
}

static void wd_abort(dev_t dev, bool have_dev, pid_t daemon)
{
	int rc = have_dev ? mount_conn_abort(dev) : -ENODEV;
	char msg[256];

	if (rc)
		snprintf(msg, sizeof(msg), "watchdog: daemon %d was killed and "
			 "is stuck in the kernel; aborting its FUSE connection "
			 "failed: %s", (int)daemon, strerror(-rc));
	else
		snprintf(msg, sizeof(msg), "watchdog: daemon %d was killed "
			 "while a thread waited in the kernel; aborted FUSE "
			 "connection %u so it can exit", (int)daemon, minor(dev));
	/* the daemon's stderr (foreground; else /dev/null) and syslog */
	fprintf(stderr, "kvfs-mount: %s\n", msg);
	openlog("kvfs-mount", LOG_PID, LOG_DAEMON);
	syslog(rc ? LOG_ERR : LOG_WARNING, "%s", msg);
	closelog();
}

static void __attribute__((noreturn)) wd_main(int fd, pid_t daemon,
					     bool keep_stderr)
{
	struct sigaction sa;
	sigset_t block, wait_mask;
	bool have_dev = false;
	dev_t dev = 0;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	/* nothing of the daemon's but the pipe (fd 3) and stderr */
	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			_exit(1);
		fd = 3;
	}
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		/* a detaching daemon's stderr must reach EOF when it
		 * detaches: then syslog only */
		if (!keep_stderr)
			dup2(nul, 2);
	}
	if (close_range(4, ~0U, 0))
		for (int i = 4; i < 1024; i++)
			close(i);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, NULL);  /* a terminal's ^C is the daemon's */
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = wd_on_pdeath;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &wait_mask);
	sigdelset(&wait_mask, SIGUSR1);
	sigdelset(&wait_mask, SIGTERM);
	prctl(PR_SET_NAME, "kvfs-watchdog");
	/* the signal comes when the daemon's main thread (our parent)
	 * ends, even while other threads of it live on */
	if (prctl(PR_SET_PDEATHSIG, SIGUSR1) || getppid() != daemon)
		_exit(0);
	for (;;) {
		struct timespec one = { 1, 0 };
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int r = ppoll(&pf, 1, wd_parent_died ? &one : NULL, &wait_mask);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			_exit(1);
		if (r > 0) {
			struct wd_msg m;
			ssize_t n = read(fd, &m, sizeof(m));

			if (n <= 0)
				_exit(0); /* the daemon is gone: none stuck */
			if (n == sizeof(m) && m.tag == 'q')
				_exit(0);
			if (n == sizeof(m) && m.tag == 'd') {
				dev = (dev_t)m.dev;
				have_dev = true;
			}
			continue;
		}
		/* a second after its main thread died, the daemon still
		 * holds our pipe (and its /dev/fuse): a thread is stuck */
		wd_abort(dev, have_dev, daemon);
		pf.revents = 0;
		poll(&pf, 1, 10000); /* let it go */
		_exit(0);
	}
}

int mount_watchdog_start(bool keep_stderr)
{
	pid_t daemon = getpid(), pid;
	int p[2];

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		close(p[1]);
		wd_main(p[0], daemon, keep_stderr);
	}
	close(p[0]);
	wd_fd = p[1];
	wd_pid = pid;
	return 0;
}

static void wd_send(char tag, uint64_t dev)
{
	struct wd_msg m;

	if (wd_fd < 0)
		return;
	memset(&m, 0, sizeof(m));
	m.tag = tag;
	m.dev = dev;
	if (write(wd_fd, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
		/* the watchdog is gone: the daemon runs on without it */
	}
}

void mount_watchdog_conn(dev_t dev)
{
	wd_send('d', (uint64_t)dev);
}

void mount_watchdog_stop(void)
{
	wd_send('q', 0);
	if (wd_fd >= 0)
		close(wd_fd);
	wd_fd = -1;
	if (wd_pid > 0)
		waitpid(wd_pid, NULL, 0); /* it leaves at once: no zombie */
	wd_pid = -1;
}
