/*
 * fs_task.c - what /proc says of the task that closes a writer's fd (a
 * FLUSH's): killed by a signal, holding another fd writing the file, of
 * the process that created the writer; and the clock those answers
 * compare against.
 *
 * Reading /proc/<pid>/stat of a task in execve() blocks until the exec
 * is over, and an exec that closes a close-on-exec kvfs writer waits for
 * the FLUSH that asks: stat is read only of a task known not to be in
 * an exec (task_has_mm), or by a thread waited for a while (task_start).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"

/* Reads /proc/<pid>/<file> into buf (NUL-terminated); false when it
 * cannot be read. */
static bool proc_read(pid_t pid, const char *file, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/*
 * Whether task pid still has its memory: /proc/<pid>/statm is "0 0 0 0 0
 * 0 0" for a task without an mm, else its first field (the pages mapped)
 * is not 0. do_exit() lets go of the mm (exit_mm) before it closes the
 * files (exit_files); a task in execve() closing its close-on-exec files
 * has its new mm, and so does one calling close(2). Unknown (unreadable)
 * counts as having it. statm, not status (which lists VmSize only with an
 * mm): it is asked at every writer's close, and reading statm costs half
 * (11 us against 22 us here).
 *
 * Why it is asked first: reading /proc/<pid>/stat of a task in execve()
 * blocks until the exec is over (its ptrace access check waits for the
 * exec's locks), and the exec waits for the FLUSH of its close-on-exec
 * kvfs writer, which is what asks: writer and daemon worker both stuck
 * for good, and every later reader of that stat file (ps, pgrep) with
 * them. statm and status do not wait (get_task_mm, no exec lock).
 */
static bool task_has_mm(pid_t pid)
{
	char buf[128];

	return !proc_read(pid, "statm", buf, sizeof(buf)) ||
	       strtoull(buf, NULL, 10) != 0;
}

/* Fields of a /proc/<pid>/stat line (buf, modified), numbered as proc(5)
 * numbers them: want[0..n) ascending, their values into out; false where
 * the line is cut short. */
static bool stat_fields(char *buf, const int *want, unsigned long long *out,
			int n)
{
	char *s = strrchr(buf, ')'); /* comm may hold spaces, parentheses */
	char *tok, *save;
	int field = 3, i = 0;

	if (!s)
		return false;
	for (tok = strtok_r(s + 1, " \n", &save); tok && i < n;
	     tok = strtok_r(NULL, " \n", &save), field++)
		if (field == want[i])
			out[i++] = strtoull(tok, NULL, 10);
	return i == n;
}

/*
 * Reads /proc/<pid>/stat: is the task exiting because a signal killed it?
 * Field 9 (flags) carries PF_EXITING (0x4) once do_exit() has started, and
 * field 52 (exit_code) holds the exit code do_exit() was given: for a
 * signal death the low 7 bits are the signal number, for exit(n) they are
 * zero (n sits in bits 8-15). do_exit() sets both before it closes the
 * task's files, so when the last close of a writer's fd arrives as FLUSH
 * from a dying task, this tells a killed writer (discard: its chunk may be
 * half written) from a normal exit (its close is an implicit close(2):
 * publish). When the task cannot be read (another pid namespace: pid 0),
 * we cannot tell and treat it as a normal close. A task that still has
 * its memory is not exiting, and its stat is not read (task_has_mm).
 */
bool fs_task_killed_by_signal(pid_t pid)
{
	unsigned long long f[2];
	static const int fields[2] = { 9, 52 }; /* flags, exit_code */
	char buf[2048];

	if (pid <= 0 || task_has_mm(pid) ||
	    !proc_read(pid, "stat", buf, sizeof(buf)) ||
	    !stat_fields(buf, fields, f, 2))
		return false;
	return (f[0] & 0x4) && (f[1] & 0x7f);
}

/*
 * Does task pid hold an fd open for writing on the file whose st_ino is
 * ino (/proc/<pid>/fdinfo: "flags:" in octal, "ino:")? Asked when a path
 * file's new version is closed before anything was written to it: a
 * shell's `cmd > file` closes the fd it opened and writes through its
 * dup. The fd being closed is out of the table already. Unknown
 * (unreadable) counts as holding one.
 */
bool fs_task_writes_ino(pid_t pid, uint64_t ino)
{
	char dir[64], name[300], buf[512];
	struct dirent *de;
	bool found = false;
	DIR *d;

	if (pid <= 0)
		return true;
	snprintf(dir, sizeof(dir), "/proc/%d/fdinfo", (int)pid);
	d = opendir(dir);
	if (!d)
		return true;
	while (!found && (de = readdir(d)) != NULL) {
		const char *f, *i;

		if (de->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "fdinfo/%s", de->d_name);
		if (!proc_read(pid, name, buf, sizeof(buf)))
			continue;
		f = strstr(buf, "flags:");
		i = strstr(buf, "\nino:");
		found = f && i && (strtoull(f + 6, NULL, 8) & O_ACCMODE) !=
				  O_RDONLY &&
			strtoull(i + 5, NULL, 10) == ino;
	}
	closedir(d);
	return found;
}

/* Thread group of a task, from /proc/<tid>/status; 0 when unknown. */
static pid_t task_tgid(pid_t tid)
{
	char buf[1024], *s;

	if (tid <= 0 || !proc_read(tid, "status", buf, sizeof(buf)))
		return 0;
	s = strstr(buf, "\nTgid:");
	return s ? (pid_t)strtol(s + 6, NULL, 10) : 0;
}

/* What task_start's reader thread and its caller share (refs: both). */
struct start_job {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	pid_t pid;
	unsigned long long start;
	bool done;
	int refs;
};

static void job_unref(struct start_job *j)
{
	bool last;

	pthread_mutex_lock(&j->lock);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last) {
		pthread_mutex_destroy(&j->lock);
		pthread_cond_destroy(&j->done_cond);
		free(j);
	}
}

/* /proc/<pid>/stat field 22 (starttime), read here: 0 if unreadable.
 * Waits for an exec of pid to end (see task_start). */
static unsigned long long start_read(pid_t pid)
{
	static const int field = 22; /* starttime */
	unsigned long long v = 0;
	char buf[2048];

	if (pid <= 0 || !proc_read(pid, "stat", buf, sizeof(buf)) ||
	    !stat_fields(buf, &field, &v, 1))
		return 0;
	return v;
}

static void *start_reader(void *arg)
{
	struct start_job *j = arg;
	unsigned long long v = start_read(j->pid);

	pthread_mutex_lock(&j->lock);
	j->start = v;
	j->done = true;
	pthread_cond_signal(&j->done_cond);
	pthread_mutex_unlock(&j->lock);
	job_unref(j);
	return NULL;
}

/*
 * Start of task pid (a thread's own: /proc/<pid>/stat field 22), in clock
 * ticks since boot; 0 when it cannot be read (the task is gone);
 * TASK_BLOCKED when the read did not end within START_WAIT_MS, or could
 * not be tried (no memory, no thread): not told, never taken for the
 * creator's.
 *
 * The read is a thread's of its own, waited for a while: reading
 * /proc/<pid>/stat of a task in execve() blocks until the exec is over,
 * and an exec that closes a close-on-exec kvfs writer waits for the FLUSH
 * that asks (a thread's writer, then the process execs: execve and a
 * daemon worker were stuck for good, the exec'ing process beyond
 * SIGKILL). The reader thread ends when the exec does, once the FLUSH
 * is answered. (statm, status, fdinfo do not wait: task_has_mm.)
 */
#define TASK_BLOCKED ULLONG_MAX
/* a read takes microseconds; a loaded machine may delay the thread */
#define START_WAIT_MS 250
/* a task whose read timed out is taken as blocked at once for this long:
 * an exec closing many writers would wait START_WAIT_MS for each */
#define BLOCKED_KEEP_MS 2000

static pthread_mutex_t blocked_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	pid_t pid;
	uint64_t until_ms;
} blocked[16];

static bool known_blocked(pid_t pid)
{
	uint64_t now = fs_now_ms();
	bool found = false;

	pthread_mutex_lock(&blocked_lock);
	for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		if (blocked[i].pid == pid && blocked[i].until_ms > now)
			found = true;
	pthread_mutex_unlock(&blocked_lock);
	return found;
}

static void note_blocked(pid_t pid)
{
	uint64_t now = fs_now_ms();
	size_t slot = 0;

	pthread_mutex_lock(&blocked_lock);
	for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		if (blocked[i].until_ms < blocked[slot].until_ms)
			slot = i; /* the oldest (or a free one) */
	blocked[slot].pid = pid;
	blocked[slot].until_ms = now + BLOCKED_KEEP_MS;
	pthread_mutex_unlock(&blocked_lock);
}

static unsigned long long task_start(pid_t pid)
{
	struct start_job *j;
	unsigned long long v;
	struct timespec ts;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if (pid <= 0)
		return 0;
	if (known_blocked(pid) || !(j = calloc(1, sizeof(*j))))
		return TASK_BLOCKED;
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->done_cond, NULL);
	j->pid = pid;
	j->refs = 2;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, start_reader, j);
	pthread_attr_destroy(&attr);
	if (rc) {
		j->refs = 1;
		job_unref(j);
		return TASK_BLOCKED;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += START_WAIT_MS / 1000;
	ts.tv_nsec += (START_WAIT_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&j->lock);
	while (!j->done &&
	       pthread_cond_timedwait(&j->done_cond, &j->lock, &ts) == 0)
		;
	v = j->done ? j->start : TASK_BLOCKED;
	pthread_mutex_unlock(&j->lock);
	job_unref(j);
	if (v == TASK_BLOCKED)
		note_blocked(pid);
	return v;
}

unsigned long long fs_boot_ticks(void)
{
	static long hz;
	struct timespec ts;

	if (!hz)
		hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
	       (unsigned long long)ts.tv_nsec / (1000000000ULL /
						 (unsigned long long)hz);
}

/*
 * Whether task tid (a FLUSH's, not w's creator thread) is of the process
 * that created w: the creator thread's thread group, if that thread
 * still lives and started by w's creation (a tid is reused: a child
 * forked since may hold it); if it is gone, the flushing process counts
 * as w's only if it started before w's creation (by the clock ticks of
 * /proc, 10 ms here), or within that tick with a pid not above the
 * creator thread's (a process's threads get ids after its own; a child
 * forked since gets a higher pid, until pids wrap), so that a process
 * forked since (whose exit closes its inherited fd) never publishes its
 * parent's chunk half written. Not told apart: an older process the fd
 * was sent to (SCM_RIGHTS) once the creator thread is gone, and a child
 * that is given the creator thread's id (the equal-tid fast path).
 */
/*
 * Another process's close of w's fd, that process killed by a signal: a
 * forked child that wrote the chunk (its parent closed first, with
 * nothing written, so the last close publishes) may have died half way,
 * so the chunk is failed (never published) where the killed process made
 * the last write, or where the thread that did is gone and cannot be
 * told, unless nothing was written since the creator's process closed
 * its fd (what it closed is what it meant). A killed process that only
 * held the fd (a pool worker terminated), or a reader's fd, leaves the
 * chunk alone.
 */
static bool same_process(const struct fs_wr *w, pid_t tid,
			 unsigned long long (*start)(pid_t));

bool fs_wr_killed_writer(const struct fs_wr *w, pid_t tid)
{
	pid_t last = __atomic_load_n(&w->last_write_tid, __ATOMIC_RELAXED);
	uint64_t closed = __atomic_load_n(&w->closed_nwrites,
					  __ATOMIC_RELAXED);
	pid_t lg;

	/* nothing written since its owner's close: the owner's chunk */
	if (closed &&
	    closed - 1 == __atomic_load_n(&w->nwrites, __ATOMIC_RELAXED))
		return false;
	if (!fs_task_killed_by_signal(tid))
		return false;
	/* the creator's own process, which fs_wr_same_process could not
	 * tell in time (a CPU-throttled daemon): told now, waiting, as a
	 * task being killed is in no exec */
	if (same_process(w, tid, start_read))
		return true;
	if (!last)
		return false;
	if (last == tid)
		return true;
	/* the last writer's thread gone: not told, the chunk left */
	lg = task_tgid(last);
	return lg && lg == task_tgid(tid);
}

bool fs_wr_same_process(const struct fs_wr *w, pid_t tid)
{
	return same_process(w, tid, task_start);
}

static bool same_process(const struct fs_wr *w, pid_t tid,
			 unsigned long long (*start)(pid_t))
{
	pid_t mine, creator = 0;
	unsigned long long cs, ms;

	/* the creator thread itself (alive: it closes) */
	if (tid == w->creator_tid)
		return true;
	mine = task_tgid(tid);
	cs = start(w->creator_tid);
	if (cs && cs != TASK_BLOCKED && cs <= w->created_ticks)
		creator = task_tgid(w->creator_tid);
	if (creator)
		return mine == creator;
	/* not told (its status unreadable), as below: another process's */
	if (!mine)
		return false;
	ms = start(mine);
	/* in execve() (the exec closes the fd), or not told: as another
	 * process's close, whose fd's last close (RELEASE) publishes,
	 * where a child forked since may be exec'ing (when in doubt, a
	 * close that publishes nothing) */
	if (!ms || ms == TASK_BLOCKED)
		return false;
	return ms < w->created_ticks ||
	       (ms == w->created_ticks && mine <= w->creator_tid);
}
