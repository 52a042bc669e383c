/*
 * mount_uring.c - FUSE requests over io_uring (mount_uring.h), by hand:
 * libfuse 3.14 has no io_uring transport and Debian's liburing 2.3 no
 * helper for fuse's commands, so the kernel's ABI (include/uapi/linux/
 * fuse.h, 7.42 and later: fuse_uring_req_header, fuse_uring_cmd_req) is
 * restated below.
 *
 * The protocol (fs/fuse/dev_uring.c): each ring entry is a header buffer
 * (the fuse_in_header, the opcode's own argument, the entry's in/out
 * sizes) and a payload buffer (the rest of the request; all of the reply
 * after its fuse_out_header). REGISTER hands an entry to the queue of a
 * CPU; the kernel completes that command with the next request queued by
 * a task running on that CPU; COMMIT_AND_FETCH sends the reply and waits
 * for the next. Requests block in the kernel from INIT until every
 * possible CPU's queue has an entry, so every queue gets one (threads of
 * offline CPUs are not pinned), and a failed REGISTER makes the kernel go
 * back to /dev/fuse for good.
 *
 * One thread per entry: kvfs's handlers may sleep (waiting lookups,
 * promotions from L2 and L3), and a sleeping handler holds its entry,
 * so each online CPU's queue gets as many entries as the classic loop had
 * workers per CPU (mount_uring_install's per_cpu).
 *
 * Each entry's payload buffer has room for the request's headers in front
 * of it, so a request is handed to libfuse as one contiguous buffer (as
 * read(2) of /dev/fuse returns it) without copying its payload.
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_pt.h"
#include "mount/mount_uring.h"

/* ---- the kernel's ABI (uapi/linux/fuse.h, protocol 7.42) ---- */
#define MU_INIT_OVER_IO_URING (1u << (41 - 32)) /* flags2 bit */
#define MU_IN_OUT_SZ 128
#define MU_OP_SZ 128
struct mu_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};
struct mu_req_header {
	char in_out[MU_IN_OUT_SZ]; /* fuse_in_header / fuse_out_header */
	char op_in[MU_OP_SZ];      /* the opcode's argument */
	struct mu_ent_in_out ent;
};
enum { MU_CMD_REGISTER = 1, MU_CMD_COMMIT_AND_FETCH = 2 };
struct mu_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
/* the fuse_init_out fields read and set (offsets of protocol 7.36+) */
#define MU_INIT_OUT_FLAGS 12
#define MU_INIT_OUT_MAX_WRITE 20
#define MU_INIT_OUT_MAX_PAGES 28
#define MU_INIT_OUT_FLAGS2 32
#define MU_INIT_OUT_MIN 64
#define MU_PARAM "/sys/module/fuse/parameters/enable_uring"

#define MU_PREFIX 4096 /* room for headers in front of each payload */
#define MU_UD_CMD 1    /* user_data of ring commands */
#define MU_UD_STOP 2   /* user_data of the stop eventfd's poll */

struct mu_ent {
	struct mu_req_header hdr;
	struct iovec iov[2];
	char *buf;     /* MU_PREFIX + payload_sz bytes (mmap) */
	size_t buf_sz;
	unsigned qid;
	int cpu;       /* pinned to, or -1 */
	pthread_t thread;
	bool started;
	bool reregistered; /* a REGISTER after a refused commit, no request
			    * since: another refusal ends the thread */
	struct io_uring ring;
	bool ring_ok;
	/* the request being served: unique (atomic, 0 when none) and its
	 * reply, written by whichever thread replies */
	uint64_t unique;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool replied;
};

static struct {
	struct fuse_session *se;
	enum mount_uring_mode mode;
	unsigned per_cpu;
	int fd;                 /* /dev/fuse */
	int stop_fd;            /* eventfd: the threads' stop */
	uint64_t init_unique;   /* (atomic) INIT's, while it is answered */
	bool offered;           /* (atomic) INIT offered the ring */
	size_t payload_sz;
	struct mu_ent *ents;
	unsigned nents, nqueues, nthreads;
	pthread_mutex_t lock;
	int state;              /* 0 not yet, 1 registering, 2 ready,
				 * -errno: classic for good */
	unsigned registered;
	uint64_t requests, foreign; /* (atomic) */
} mu = { .fd = -1, .stop_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread struct mu_ent *mu_cur; /* the entry this thread serves */

/* registering (1) -> ready (2) or failed (-errno) */
static void mu_set_state(int st)
{
	pthread_mutex_lock(&mu.lock);
	if (mu.state == 1)
		__atomic_store_n(&mu.state, st, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu.lock);
}

int mount_uring_prepare(enum mount_uring_mode mode)
{
	char v = 0;
	int fd;

	if (mode != MOUNT_URING_ON)
		return 0;
	fd = open(MU_PARAM, O_RDONLY | O_CLOEXEC); /* on already: any user */
	if (fd < 0)
		return errno == ENOENT ? -ENOTSUP : -errno;
	if (pread(fd, &v, 1, 0) == 1 && (v == 'Y' || v == '1')) {
		close(fd);
		return 0;
	}
	close(fd);
	fd = open(MU_PARAM, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (pwrite(fd, "Y", 1, 0) != 1) {
		int e = -errno;

		close(fd);
		return e;
	}
	close(fd);
	fuse_log(FUSE_LOG_INFO, "kvfs-mount: fuse_uring=on: set %s\n",
		 MU_PARAM);
	return 0;
}

/* ---- possible and online CPUs ---- */

/* set: the CPUs of a sysfs list such as "0-3,8-11". Returns how many,
 * or -1. */
static int mu_cpu_list(const char *path, cpu_set_t *set)
{
	char s[4096];
	FILE *f = fopen(path, "re");
	char *p;

	CPU_ZERO(set);
	if (!f)
		return -1;
	if (!fgets(s, sizeof(s), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	for (p = s; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p || a < 0)
			return -1;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (b < a || b >= CPU_SETSIZE)
			return -1;
		for (long c = a; c <= b; c++)
			CPU_SET((int)c, set);
		p = *end == ',' ? end + 1 : end;
	}
	return CPU_COUNT(set);
}

/* ---- the ring threads ---- */

static struct io_uring_sqe *mu_cmd_sqe(struct mu_ent *e, uint32_t op,
				       uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	struct mu_cmd_req *cr;

	if (!sqe)
		return NULL;
	memset(sqe, 0, 128); /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = mu.fd;
	sqe->cmd_op = op;
	sqe->user_data = MU_UD_CMD;
	if (op == MU_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	cr = (struct mu_cmd_req *)sqe->cmd;
	cr->qid = (uint16_t)e->qid;
	cr->commit_id = commit_id;
	return sqe;
}

/* The reply of the request e serves is in e->hdr / e->buf: sends it and
 * asks for the next request. */
static int mu_commit(struct mu_ent *e, uint64_t commit_id)
{
	if (!mu_cmd_sqe(e, MU_CMD_COMMIT_AND_FETCH, commit_id))
		return -EBUSY;
	return io_uring_submit(&e->ring) == 1 ? 0 : -EIO;
}

/* A request the entry cannot hand to libfuse (sizes that do not add up):
 * answered EIO. */
static void mu_reply_err(struct mu_ent *e, uint64_t unique, int err)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh), .error = -err, .unique = unique
	};

	memcpy(e->hdr.in_out, &oh, sizeof(oh));
	e->hdr.ent.payload_sz = 0;
}

static void mu_serve(struct mu_ent *e)
{
	struct fuse_in_header ih;
	uint32_t psz = e->hdr.ent.payload_sz;
	uint64_t commit_id = e->hdr.ent.commit_id;
	char *payload = e->buf + MU_PREFIX;
	size_t opsz;

	memcpy(&ih, e->hdr.in_out, sizeof(ih));
	if (ih.nodeid >= FS_INO_NS_FIRST) /* as fs.c counts requests */
		__atomic_add_fetch(&mu.requests, 1, __ATOMIC_RELAXED);
	if (ih.len < sizeof(ih) + (size_t)psz ||
	    (opsz = ih.len - sizeof(ih) - psz) > MU_OP_SZ ||
	    psz > e->buf_sz - MU_PREFIX) {
		fuse_log(FUSE_LOG_ERR,
			 "kvfs-mount: ring request %llu (opcode %u): sizes "
			 "%u/%u do not add up: EIO\n",
			 (unsigned long long)ih.unique, ih.opcode, ih.len,
			 psz);
		mu_reply_err(e, ih.unique, EIO);
	} else {
		struct fuse_buf fb = { .size = ih.len };
		char *start = payload - opsz - sizeof(ih);

		memcpy(start, &ih, sizeof(ih));
		memcpy(start + sizeof(ih), e->hdr.op_in, opsz);
		fb.mem = start;
		pthread_mutex_lock(&e->lock);
		e->replied = false;
		pthread_mutex_unlock(&e->lock);
		__atomic_store_n(&e->unique, ih.unique, __ATOMIC_RELEASE);
		mu_cur = e;
		fuse_session_process_buf(mu.se, &fb);
		mu_cur = NULL;
		/* a reply from another thread (or none yet): wait for it */
		pthread_mutex_lock(&e->lock);
		while (!e->replied)
			pthread_cond_wait(&e->cond, &e->lock);
		pthread_mutex_unlock(&e->lock);
		__atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
	}
	if (mu_commit(e, commit_id))
		fuse_log(FUSE_LOG_ERR, "kvfs-mount: ring commit failed\n");
}

/* e's REGISTER was taken (a refused one completes at once, with its error,
 * and ends the thread): the ring is ready when every entry's was */
static void mu_registered(struct mu_ent *e)
{
	struct io_uring_cqe *cqe;

	if (!io_uring_peek_cqe(&e->ring, &cqe) && cqe->res < 0 &&
	    cqe->res != -EAGAIN)
		return; /* the loop reads the error */
	pthread_mutex_lock(&mu.lock);
	if (++mu.registered == mu.nents && mu.state == 1)
		__atomic_store_n(&mu.state, 2, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu.lock);
}

static void *mu_thread(void *arg)
{
	struct mu_ent *e = arg;
	struct io_uring_sqe *sqe;
	char name[16];
	int err = 0;

	snprintf(name, sizeof(name), "kvfs-ring%u", e->qid);
	pthread_setname_np(pthread_self(), name);
	if (e->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(e->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	/* the stop eventfd, polled once: its completion ends the thread */
	sqe = io_uring_get_sqe(&e->ring);
	if (sqe) {
		memset(sqe, 0, 128);
		io_uring_prep_poll_add(sqe, mu.stop_fd, POLLIN);
		sqe->user_data = MU_UD_STOP;
	}
	if (!sqe || !mu_cmd_sqe(e, MU_CMD_REGISTER, 0) ||
	    io_uring_submit(&e->ring) != 2)
		err = -EIO;
	else
		mu_registered(e);
	while (!err) {
		struct io_uring_cqe *cqe;
		uint64_t ud;
		int res, r = io_uring_wait_cqe(&e->ring, &cqe);

		if (r == -EINTR)
			continue;
		if (r < 0) {
			err = r;
			break;
		}
		ud = cqe->user_data;
		res = cqe->res;
		io_uring_cqe_seen(&e->ring, cqe);
		if (ud == MU_UD_STOP)
			break;
		if (res == -EAGAIN && !e->started) {
			/* INIT's reply not yet taken in: again */
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
			if (!mu_cmd_sqe(e, MU_CMD_REGISTER, 0) ||
			    io_uring_submit(&e->ring) != 1)
				err = -EIO;
			continue;
		}
		if (res < 0 && e->started && !e->reregistered &&
		    res != -ENOTCONN &&
		    res != -ECONNABORTED && res != -ECANCELED &&
		    res != -ENODEV) {
			/* a commit the kernel refused (its request ended
			 * meanwhile): the entry is not the kernel's any more;
			 * registered again, or its CPU's ring shrinks */
			fuse_log(FUSE_LOG_ERR, "kvfs-mount: ring %u: %s; "
				 "entry registered again\n", e->qid,
				 strerror(-res));
			e->reregistered = true;
			if (!mu_cmd_sqe(e, MU_CMD_REGISTER, 0) ||
			    io_uring_submit(&e->ring) != 1)
				err = -EIO;
			continue;
		}
		if (res < 0) {
			err = res;
			break;
		}
		/* a request: the (first or renewed) REGISTER was taken */
		e->started = true;
		e->reregistered = false;
		mu_serve(e);
	}
	if (err && err != -ENOTCONN && err != -ECONNABORTED &&
	    err != -ECANCELED && err != -ENODEV)
		fuse_log(FUSE_LOG_ERR, "kvfs-mount: ring %u: %s\n", e->qid,
			 strerror(-err));
	if (!e->started && err) /* never registered: the rings failed */
		mu_set_state(err);
	return NULL;
}

/* ---- set up at INIT ---- */

static void mu_free_ents(void)
{
	for (unsigned i = 0; i < mu.nents; i++) {
		struct mu_ent *e = &mu.ents[i];

		if (e->ring_ok)
			io_uring_queue_exit(&e->ring);
		if (e->buf)
			munmap(e->buf, e->buf_sz);
		pthread_mutex_destroy(&e->lock);
		pthread_cond_destroy(&e->cond);
	}
	free(mu.ents);
	mu.ents = NULL;
	mu.nents = 0;
}

/* The entries and their rings, before INIT's reply says yes (a failure
 * here leaves the classic transport). payload_sz: the kernel's largest
 * request or reply payload. */
static int mu_setup(size_t payload_sz)
{
	cpu_set_t pset, online, allowed;
	int possible = mu_cpu_list("/sys/devices/system/cpu/possible", &pset);
	unsigned n = 0;

	if (possible <= 0)
		return -ENOTSUP;
	if (mu_cpu_list("/sys/devices/system/cpu/online", &online) <= 0)
		online = pset;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		CPU_ZERO(&allowed);
	/* the kernel's queue of a task is its CPU's number; there are as
	 * many queues as possible CPUs */
	mu.nqueues = (unsigned)possible;
	mu.payload_sz = payload_sz;
	for (unsigned q = 0; q < mu.nqueues; q++)
		n += CPU_ISSET(q, &online) ? mu.per_cpu : 1;
	mu.ents = calloc(n, sizeof(*mu.ents));
	if (!mu.ents)
		return -ENOMEM;
	mu.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (mu.stop_fd < 0)
		return -errno;
	for (unsigned q = 0; q < mu.nqueues; q++) {
		bool on = CPU_ISSET(q, &online);

		for (unsigned k = 0; k < (on ? mu.per_cpu : 1); k++) {
			struct mu_ent *e = &mu.ents[mu.nents++];
			struct io_uring_params p = { 0 };
			int r;

			pthread_mutex_init(&e->lock, NULL);
			pthread_cond_init(&e->cond, NULL);
			e->qid = q;
			e->cpu = on && CPU_ISSET(q, &allowed) ? (int)q : -1;
			e->buf_sz = MU_PREFIX + payload_sz;
			e->buf = mmap(NULL, e->buf_sz, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (e->buf == MAP_FAILED) {
				e->buf = NULL;
				return -ENOMEM;
			}
			e->iov[0].iov_base = &e->hdr;
			e->iov[0].iov_len = sizeof(e->hdr);
			e->iov[1].iov_base = e->buf + MU_PREFIX;
			e->iov[1].iov_len = payload_sz;
			p.flags = IORING_SETUP_SQE128;
			r = io_uring_queue_init_params(4, &e->ring, &p);
			if (r)
				return r;
			e->ring_ok = true;
		}
	}
	return 0;
}

/* The ring threads, with the stop signals blocked: they belong to the
 * thread waiting in the session loop (mount/kvfs_mount.c). */
static int mu_start_threads(void)
{
	sigset_t block, old;
	int err = 0;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (unsigned i = 0; i < mu.nents && !err; i++) {
		if (pthread_create(&mu.ents[i].thread, NULL, mu_thread,
				   &mu.ents[i]))
			err = -EAGAIN;
		else
			mu.nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* The kernel, told yes at INIT, holds every request until each queue has
 * an entry: a REGISTER it refuses (an iovec count not 2) sends it back to
 * /dev/fuse for good. */
static void mu_refuse(void)
{
	struct io_uring ring;
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;

	if (io_uring_queue_init_params(2, &ring, &p))
		return;
	sqe = io_uring_get_sqe(&ring);
	if (sqe) {
		memset(sqe, 0, 128);
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = mu.fd;
		sqe->cmd_op = MU_CMD_REGISTER;
		sqe->len = 1;
		if (io_uring_submit(&ring) == 1 &&
		    !io_uring_wait_cqe(&ring, &cqe))
			io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	mu_set_state(-ENOTSUP);
}

/* INIT's reply: says yes to the ring when the kernel offered it and the
 * entries could be set up. iov: libfuse's (out header, fuse_init_out). */
static void mu_init_reply(struct iovec *iov, int count)
{
	unsigned char *o;
	uint32_t flags, flags2, max_write;
	uint16_t max_pages = 32; /* the kernel's default without
				  * FUSE_MAX_PAGES */
	size_t payload;

	if (count < 2 || iov[1].iov_len < MU_INIT_OUT_MIN)
		return;
	o = iov[1].iov_base;
	memcpy(&flags, o + MU_INIT_OUT_FLAGS, 4);
	memcpy(&flags2, o + MU_INIT_OUT_FLAGS2, 4);
	memcpy(&max_write, o + MU_INIT_OUT_MAX_WRITE, 4);
	if (!(flags & FUSE_INIT_EXT))
		return;
	if (flags & FUSE_MAX_PAGES)
		memcpy(&max_pages, o + MU_INIT_OUT_MAX_PAGES, 2);
	payload = (size_t)max_pages * 4096;
	if (payload < max_write)
		payload = max_write;
	if (payload < 8192)
		payload = 8192;
	if (mu_setup(payload)) {
		fuse_log(FUSE_LOG_ERR, "kvfs-mount: FUSE over io_uring: "
			 "cannot set up the rings; /dev/fuse serves\n");
		mu_free_ents();
		return;
	}
	flags2 |= MU_INIT_OVER_IO_URING;
	memcpy(o + MU_INIT_OUT_FLAGS2, &flags2, 4);
	__atomic_store_n(&mu.state, 1, __ATOMIC_RELEASE);
}

/* ---- the custom io ---- */

static ssize_t mu_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t r = read(fd, buf, len);
	const struct fuse_in_header *ih = buf;

	(void)userdata;
	fs_pt_in(buf, r); /* cache=passthrough's INIT */
	if (r >= (ssize_t)(sizeof(*ih) + sizeof(struct fuse_init_in)) &&
	    ih->opcode == FUSE_INIT && mu.mode != MOUNT_URING_OFF) {
		const struct fuse_init_in *in = (const void *)(ih + 1);

		if ((in->flags & FUSE_INIT_EXT) &&
		    (in->flags2 & MU_INIT_OVER_IO_URING)) {
			__atomic_store_n(&mu.offered, true, __ATOMIC_RELEASE);
			__atomic_store_n(&mu.init_unique, ih->unique,
					 __ATOMIC_RELEASE);
		}
	}
	return r;
}

/* the entry serving request unique, or NULL */
static struct mu_ent *mu_find(uint64_t unique)
{
	struct mu_ent *e = mu_cur;

	if (!unique)
		return NULL; /* a notification */
	if (e && __atomic_load_n(&e->unique, __ATOMIC_ACQUIRE) == unique)
		return e;
	for (unsigned i = 0; i < mu.nents; i++) {
		e = &mu.ents[i];
		if (__atomic_load_n(&e->unique, __ATOMIC_ACQUIRE) == unique)
			return e;
	}
	return NULL;
}

static ssize_t mu_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_out_header *oh = iov[0].iov_base;
	struct mu_ent *e;
	size_t total = 0, off = 0;
	bool init = false;
	ssize_t r;

	(void)userdata;
	fs_pt_out(iov, count); /* passthrough's INIT and OPEN replies */
	if (__atomic_load_n(&mu.init_unique, __ATOMIC_ACQUIRE) &&
	    oh->unique == mu.init_unique) {
		__atomic_store_n(&mu.init_unique, 0, __ATOMIC_RELEASE);
		if (!oh->error)
			mu_init_reply(iov, count);
		init = mu.state == 1;
	}
	e = __atomic_load_n(&mu.state, __ATOMIC_ACQUIRE) > 0 ?
	    mu_find(oh->unique) : NULL;
	if (!e) {
		r = writev(fd, iov, count);
		if (init) {
			if (r < 0 || mu_start_threads()) {
				fuse_log(FUSE_LOG_ERR, "kvfs-mount: FUSE over "
					 "io_uring: cannot start; /dev/fuse "
					 "serves\n");
				mu_refuse();
			}
		}
		return r;
	}
	for (int i = 1; i < count; i++)
		total += iov[i].iov_len;
	pthread_mutex_lock(&e->lock);
	if (total > e->buf_sz - MU_PREFIX) {
		mu_reply_err(e, oh->unique, EIO);
	} else {
		for (int i = 1; i < count; i++) {
			memcpy(e->buf + MU_PREFIX + off, iov[i].iov_base,
			       iov[i].iov_len);
			off += iov[i].iov_len;
		}
		memcpy(e->hdr.in_out, oh, sizeof(*oh));
		e->hdr.ent.payload_sz = (uint32_t)total;
	}
	e->replied = true;
	if (e != mu_cur) {
		__atomic_add_fetch(&mu.foreign, 1, __ATOMIC_RELAXED);
		pthread_cond_signal(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	return (ssize_t)(sizeof(*oh) + total);
}

int mount_uring_install(struct fuse_session *se, enum mount_uring_mode mode,
			unsigned per_cpu, bool passthrough)
{
	static const struct fuse_custom_io io = {
		.read = mu_read,
		.writev = mu_writev,
	};

	mu.se = se;
	mu.mode = mode;
	mu.per_cpu = per_cpu ? per_cpu : 1;
	mu.fd = fuse_session_fd(se);
	fs_pt_want(passthrough);
	if (mode == MOUNT_URING_OFF && !passthrough)
		return 0;
	return fuse_session_custom_io(se, &io, mu.fd);
}

void mount_uring_stop(void)
{
	uint64_t one = 1;

	if (!mu.nents)
		return;
	/* libfuse's loop reset the session when it returned: exited
	 * again, waiting handlers end (fs/fs_wait.c session_exited) */
	fuse_session_exit(mu.se);
	if (mu.stop_fd >= 0 && write(mu.stop_fd, &one, sizeof(one)) < 0)
		fuse_log(FUSE_LOG_ERR, "kvfs-mount: ring stop: %s\n",
			 strerror(errno));
	for (unsigned i = 0; i < mu.nthreads; i++)
		pthread_join(mu.ents[i].thread, NULL);
	fuse_session_reset(mu.se);
	mu_free_ents();
	if (mu.stop_fd >= 0)
		close(mu.stop_fd);
	mu.stop_fd = -1;
}

int mount_uring_cpu(void)
{
	struct mu_ent *e = mu_cur;

	return e ? (int)e->qid : -1;
}

void mount_uring_counts(struct fs_uring_counts *c)
{
	int st;

	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&mu.lock);
	st = mu.state;
	pthread_mutex_unlock(&mu.lock);
	if (st != 1 && st != 2) /* not negotiated, or refused */
		return;
	c->queues = mu.nqueues;
	c->entries = mu.nents;
	c->requests = __atomic_load_n(&mu.requests, __ATOMIC_RELAXED);
	c->foreign = __atomic_load_n(&mu.foreign, __ATOMIC_RELAXED);
}
