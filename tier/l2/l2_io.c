/*
 * l2_io.c - the L2 I/O thread: the only user of the io_uring. It places
 * appends at the head of the log (creating segments as they fill), submits
 * writes, reads and hole punches, and completes them: append callbacks run
 * here, synchronous readers are woken (or, when they gave up waiting, their
 * buffers are freed here).
 *
 * Other threads hand requests over through l2.sub_* / l2.move_* under
 * l2.lock and wake this thread with an eventfd that always has a read
 * pending in the ring, so the thread sleeps in one place: the CQ.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

#define L2_RING_ENTRIES 256
#define L2_MAX_INFLIGHT 128
#define L2_NOSPC_TRIES 3 /* placements of an append that hit a full disk */

struct io_state {
	struct l2_req *wait_head, *wait_tail; /* appends not placed yet */
	struct l2_req *move_head, *move_tail; /* reclaim moves not placed */
	unsigned inflight;
	bool efd_armed;
};

static void q_push(struct l2_req **head, struct l2_req **tail,
		   struct l2_req *r)
{
	r->next = NULL;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

static struct io_uring_sqe *get_sqe(struct l2 *l2)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l2->ring);

	if (!sqe) {
		io_uring_submit(&l2->ring);
		sqe = io_uring_get_sqe(&l2->ring);
	}
	return sqe;
}

static void arm_efd(struct l2 *l2, struct io_state *s)
{
	struct io_uring_sqe *sqe = get_sqe(l2);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, l2->efd, &l2->efd_val, sizeof(l2->efd_val), 0);
	io_uring_sqe_set_data(sqe, NULL);
	s->efd_armed = true;
}

/* Submits the rest of a request (all of it the first time). */
static void submit_req(struct l2 *l2, struct io_state *s, struct l2_req *r)
{
	struct io_uring_sqe *sqe = get_sqe(l2);
	uint8_t *buf = (uint8_t *)r->buf + r->pos;
	off_t off = (off_t)(r->off + r->pos);
	unsigned len = (unsigned)(r->len - r->pos);

	if (!sqe) {
		/* cannot happen after a submit; fail the request cleanly */
		r->res = -EBUSY;
		return;
	}
	switch (r->op) {
	case REQ_WRITE:
		io_uring_prep_write(sqe, r->seg->fd, buf, len, (uint64_t)off);
		break;
	case REQ_READ:
		io_uring_prep_read(sqe, r->seg->fd, buf, len, (uint64_t)off);
		break;
	case REQ_PUNCH:
		if (!l2->punch_ok && !r->buf)
			r->buf = l2->zero;
		if (r->buf) /* the zeroing fallback */
			io_uring_prep_write(sqe, r->seg->fd, r->buf, L2_ALIGN,
					    r->off);
		else
			io_uring_prep_fallocate(sqe, r->seg->fd,
						FALLOC_FL_PUNCH_HOLE |
						FALLOC_FL_KEEP_SIZE,
						r->off, (off_t)r->len);
		break;
	}
	io_uring_sqe_set_data(sqe, r);
	s->inflight++;
}

static bool no_space(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

/* l2.lock held. Appends go to a new segment from now on. */
static void seal_active(struct l2 *l2)
{
	if (l2->active)
		l2->active->state = SEG_SEALED;
	l2->active = NULL;
}

/*
 * l2.lock held. Chooses the record's place at the head of the log.
 * -EAGAIN: no room until a reclaim; -ENOSPC: no room for this record at
 * all (moves never wait: the reclaim that queued them waits for them).
 * *lowered: the capacity l2_disk_full set, to log.
 */
static int place(struct l2 *l2, struct l2_req *r, uint64_t *lowered)
{
	struct l2_seg *seg = l2->active;
	uint64_t room = r->reserve ? l2->cap : l2_room(l2);
	struct l2_ent *e;
	int rc;

	if (l2->used + r->len > room) {
		if (r->reserve || r->len > room)
			return -ENOSPC;
		/* only the active segment is left to reclaim: seal it */
		if (!l2->nsegs || l2->segs[0] == seg) {
			if (!seg || !seg->tail)
				return -ENOSPC;
			seal_active(l2);
		}
		return -EAGAIN;
	}
	if (!seg || (seg->tail && seg->tail + r->len > l2->seg_target)) {
		seal_active(l2);
		rc = l2_seg_create(l2, &seg);
		if (no_space(rc) && !r->reserve) {
			/* not even an empty file: the disk is full */
			*lowered = l2_disk_full(l2);
			if (l2->nsegs)
				return -EAGAIN;
		}
		if (rc)
			return rc;
		l2->active = seg;
	}
	e = l2_ent_add_rec(l2, seg, r->rec, (uint32_t)(seg->tail / L2_ALIGN));
	if (!e)
		return -ENOMEM;
	r->seg = seg;
	seg->refs++;
	seg->pending++;
	r->off = seg->tail;
	seg->tail += r->len;
	l2->used += r->len;
	l2->inflight += r->len;
	return 0;
}

/* Completes an append with its outcome (never with l2.lock held). */
static void write_done(struct l2 *l2, struct l2_req *r, int res)
{
	struct l2_loc loc = { 0 };
	struct l2_seg *seg = r->seg;
	uint32_t seg_id = seg ? seg->id : 0;

	pthread_mutex_lock(&l2->lock);
	if (seg) {
		struct l2_ent *e = l2_ent_find(seg, (uint32_t)(r->off / L2_ALIGN));

		if (e && res == 0)
			l2_ent_live(l2, e);
		else if (e)
			l2_ent_kill(l2, e);
		if (--seg->pending == 0)
			pthread_cond_broadcast(&l2->rc_cond);
		l2->inflight -= r->len;
		loc.seg = seg->id;
		loc.blk = (uint32_t)(r->off / L2_ALIGN);
		loc.nblk = r->rec->nblk;
	}
	if (res == 0) {
		l2->st.writes++;
		l2->st.write_bytes += r->len;
		if (r->reserve)
			l2->st.moved_bytes += r->len;
	}
	pthread_mutex_unlock(&l2->lock);

	if (res)
		l2_log_err(l2, res, "write failed", seg_id);
	else
		r->rec->loc = loc;
	if (r->done)
		r->done(r->arg, r->rec, res, res ? NULL : &loc);

	pthread_mutex_lock(&l2->lock);
	l2->queued_bytes -= r->len;
	if (--l2->queued_count == 0)
		pthread_cond_broadcast(&l2->idle_cond);
	if (seg)
		l2_seg_unref(l2, seg);
	pthread_mutex_unlock(&l2->lock);
	free(r);
}

static void read_done(struct l2 *l2, struct l2_req *r, int res)
{
	pthread_mutex_lock(&l2->lock);
	r->finished = true;
	r->res = res;
	if (!r->abandoned) {
		pthread_cond_signal(&r->cond);
		pthread_mutex_unlock(&l2->lock);
		return;
	}
	l2_seg_unref(l2, r->seg);
	pthread_mutex_unlock(&l2->lock);
	l2_buf_put(l2, r->buf, r->buf_cap);
	pthread_cond_destroy(&r->cond);
	free(r);
}

static void punch_done(struct l2 *l2, struct io_state *s, struct l2_req *r,
		       int res)
{
	if (!r->buf && (res == -EOPNOTSUPP || res == -EINVAL)) {
		/* no hole punching on this filesystem: zero the header so
		 * recovery cannot find the record again */
		l2->punch_ok = false;
		r->buf = l2->zero;
		submit_req(l2, s, r);
		return;
	}
	if (res < 0)
		l2_log_err(l2, res, "cannot erase a freed record", r->seg->id);
	pthread_mutex_lock(&l2->lock);
	l2_seg_unref(l2, r->seg);
	if (r->counted_free) {
		l2->frees_done++;
		pthread_cond_broadcast(&l2->free_cond);
	}
	pthread_mutex_unlock(&l2->lock);
	free(r);
}

/*
 * A write hit a full filesystem (ENOSPC, EDQUOT) before the log reached
 * its capacity: lower the capacity to what is on disk (l2_disk_full),
 * seal the segment, and place the append again once a reclaim has made
 * room, up to L2_NOSPC_TRIES times. Records already written are not
 * touched: only this record's own place is given up (killed, and what
 * part of it reached the disk punched out, so that it frees its space
 * and recovery finds nothing there to count as torn). Returns
 * true when the append was queued again; false: the caller fails it (a
 * move, which its reclaim waits for, or the last try).
 */
static bool write_nospace(struct l2 *l2, struct io_state *s,
			  struct l2_req *r, int res)
{
	struct l2_req *punch = calloc(1, sizeof(*punch));
	struct l2_seg *seg = r->seg;
	uint32_t seg_id = seg->id;
	struct l2_ent *e;
	uint64_t lowered;
	bool retry;

	pthread_mutex_lock(&l2->lock);
	if (punch) {
		seg->refs++;
		punch->op = REQ_PUNCH;
		punch->seg = seg;
		punch->off = r->off;
		punch->len = r->len;
	}
	lowered = l2_disk_full(l2);
	if (l2->active == seg)
		seal_active(l2);
	retry = !r->reserve && r->tries + 1 < L2_NOSPC_TRIES;
	if (retry) {
		e = l2_ent_find(seg, (uint32_t)(r->off / L2_ALIGN));
		if (e)
			l2_ent_kill(l2, e);
		if (--seg->pending == 0)
			pthread_cond_broadcast(&l2->rc_cond);
		l2->inflight -= r->len;
		l2_seg_unref(l2, seg);
		r->seg = NULL;
		r->off = 0;
		r->pos = 0;
		r->res = 0;
		r->tries++;
	}
	pthread_mutex_unlock(&l2->lock);
	if (punch) {
		submit_req(l2, s, punch);
		if (punch->res) {
			s->inflight--;
			punch_done(l2, s, punch, punch->res);
		}
	}
	if (lowered)
		l2_log_disk_full(l2, lowered, res);
	if (!retry)
		return false;
	/* counted, and logged as the first of its kind */
	l2_log_err(l2, res, "write failed, placing it again", seg_id);
	r->next = s->wait_head;
	s->wait_head = r;
	if (!s->wait_tail)
		s->wait_tail = r;
	return true;
}

static void complete(struct l2 *l2, struct io_state *s, struct l2_req *r,
		     int res)
{
	s->inflight--;
	if (r->op == REQ_PUNCH) {
		punch_done(l2, s, r, res);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		submit_req(l2, s, r);
		return;
	}
	if (res == 0 && r->pos < r->len)
		res = r->op == REQ_READ ? -ENODATA : -EIO; /* EOF / no progress */
	else if (res > 0) {
		r->pos += (size_t)res;
		if (r->pos < r->len) {
			submit_req(l2, s, r);
			return;
		}
		res = 0;
	}
	if (r->op == REQ_WRITE && no_space(res) && write_nospace(l2, s, r, res))
		return;
	if (r->op == REQ_WRITE)
		write_done(l2, r, res);
	else
		read_done(l2, r, res);
}

/* Places and submits queued appends, moves first, in order; stops at the
 * first that finds no room (the reclaim thread is asked for some). */
static void place_queue(struct l2 *l2, struct io_state *s,
			struct l2_req **head, struct l2_req **tail)
{
	while (*head && s->inflight < L2_MAX_INFLIGHT) {
		struct l2_req *r = *head;
		uint64_t lowered = 0;
		int rc;

		pthread_mutex_lock(&l2->lock);
		rc = place(l2, r, &lowered);
		if (rc == -EAGAIN) {
			l2->parked = true;
			pthread_cond_broadcast(&l2->rc_cond);
			pthread_mutex_unlock(&l2->lock);
			if (lowered)
				l2_log_disk_full(l2, lowered, -ENOSPC);
			return;
		}
		l2->parked = false;
		if (l2_need_reclaim(l2))
			pthread_cond_broadcast(&l2->rc_cond);
		pthread_mutex_unlock(&l2->lock);
		if (lowered)
			l2_log_disk_full(l2, lowered, rc);
		*head = r->next;
		if (!*head)
			*tail = NULL;
		if (rc) {
			write_done(l2, r, rc);
			continue;
		}
		submit_req(l2, s, r);
		if (r->res) { /* no SQE */
			s->inflight--;
			write_done(l2, r, r->res);
		}
	}
}

static void *io_main(void *arg)
{
	struct l2 *l2 = arg;
	struct io_state s = { 0 };

	arm_efd(l2, &s);
	for (;;) {
		struct l2_req *in, *mv, *r;
		struct io_uring_cqe *cqe;
		bool stop, rc_stopped;
		unsigned head, n = 0;

		pthread_mutex_lock(&l2->lock);
		in = l2->sub_head;
		l2->sub_head = l2->sub_tail = NULL;
		mv = l2->move_head;
		l2->move_head = l2->move_tail = NULL;
		stop = l2->io_stop;
		rc_stopped = l2->rc_stop;
		pthread_mutex_unlock(&l2->lock);

		while ((r = mv)) {
			mv = r->next;
			q_push(&s.move_head, &s.move_tail, r);
		}
		while ((r = in)) {
			in = r->next;
			if (r->op == REQ_WRITE) {
				q_push(&s.wait_head, &s.wait_tail, r);
				continue;
			}
			submit_req(l2, &s, r);
			if (r->res) {
				s.inflight--;
				if (r->op == REQ_READ)
					read_done(l2, r, r->res);
				else
					punch_done(l2, &s, r, r->res);
			}
		}
		place_queue(l2, &s, &s.move_head, &s.move_tail);
		place_queue(l2, &s, &s.wait_head, &s.wait_tail);

		/* closing with no reclaim left to make room: give up */
		if (stop && rc_stopped) {
			while ((r = s.wait_head)) {
				s.wait_head = r->next;
				write_done(l2, r, -ESHUTDOWN);
			}
			s.wait_tail = NULL;
			while ((r = s.move_head)) {
				s.move_head = r->next;
				write_done(l2, r, -ESHUTDOWN);
			}
			s.move_tail = NULL;
		}
		if (stop && !s.wait_head && !s.move_head && s.inflight == 0)
			break;

		io_uring_submit_and_wait(&l2->ring, 1);
		io_uring_for_each_cqe(&l2->ring, head, cqe) {
			r = io_uring_cqe_get_data(cqe);
			n++;
			if (!r) {
				s.efd_armed = false;
				continue;
			}
			complete(l2, &s, r, cqe->res);
		}
		io_uring_cq_advance(&l2->ring, n);
		if (!s.efd_armed)
			arm_efd(l2, &s);
	}
	return NULL;
}

void l2_io_wake(struct l2 *l2)
{
	uint64_t one = 1;

	if (write(l2->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the thread is awake anyway */
	}
}

void l2_io_submit(struct l2 *l2, struct l2_req *r)
{
	pthread_mutex_lock(&l2->lock);
	if (r->reserve)
		q_push(&l2->move_head, &l2->move_tail, r);
	else
		q_push(&l2->sub_head, &l2->sub_tail, r);
	pthread_mutex_unlock(&l2->lock);
	l2_io_wake(l2);
}

int l2_io_start(struct l2 *l2)
{
	int rc;

	l2->efd = eventfd(0, EFD_CLOEXEC);
	if (l2->efd < 0)
		return -errno;
	rc = io_uring_queue_init(L2_RING_ENTRIES, &l2->ring, 0);
	if (rc) {
		close(l2->efd);
		l2->efd = -1;
		return rc;
	}
	rc = -pthread_create(&l2->io_thread, NULL, io_main, l2);
	if (rc) {
		io_uring_queue_exit(&l2->ring);
		close(l2->efd);
		l2->efd = -1;
		return rc;
	}
	l2->io_started = true;
	return 0;
}

void l2_io_stop(struct l2 *l2)
{
	if (!l2->io_started)
		return;
	pthread_mutex_lock(&l2->lock);
	l2->io_stop = true;
	pthread_mutex_unlock(&l2->lock);
	l2_io_wake(l2);
	pthread_join(l2->io_thread, NULL);
	io_uring_queue_exit(&l2->ring);
	close(l2->efd);
	l2->efd = -1;
	l2->io_started = false;
}
