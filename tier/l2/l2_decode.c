/*
 * l2_decode.c - decoding a record's payload into the chunk's bytes:
 * the pool of decode threads that share a large zstd chunk a frame at a
 * time, and l2_decode, the one tail of every read (raw_sum checked).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "hash/hashkey.h"
#include "tier/l2/l2_i.h"

/* Unshuffled and checksummed this many bytes at a time: the part is still
 * in cache when the checksum reads it (one pass over memory, not two). */
#define UNSHUFFLE_PART (64u << 10)

/* ----------------------------------------------- parallel decoding */

static __thread bool decode_alone; /* l2_read_alone */

void l2_read_alone(bool on)
{
	decode_alone = on;
}

/* mt_lock held: takes job out of the queue (its last frame is taken). */
static void mt_unlink(struct l2 *l2, struct l2_mt *job)
{
	struct l2_mt **pp;

	for (pp = &l2->mt_head; *pp; pp = &(*pp)->next)
		if (*pp == job) {
			*pp = job->next;
			return;
		}
}

/* Decodes frames of job until none is left to take (mt_lock held on entry
 * and return). */
static void mt_work(struct l2 *l2, struct l2_mt *job, struct codec_ws *ws)
{
	while (job->next_frame < job->n) {
		const struct codec_frame *f = &job->f[job->next_frame++];
		int rc;

		if (job->next_frame == job->n)
			mt_unlink(l2, job);
		pthread_mutex_unlock(&l2->mt_lock);
		rc = ws ? codec_decode_frame(ws, job->src + f->src_off,
					     f->src_len, job->out + f->dst_off,
					     f->dst_len) : -ENOMEM;
		pthread_mutex_lock(&l2->mt_lock);
		if (rc && !job->err)
			job->err = rc;
		if (++job->done == job->n)
			pthread_cond_broadcast(&l2->mt_done);
	}
}

static void *mt_main(void *arg)
{
	struct l2 *l2 = arg;
	struct codec_ws *ws = codec_ws_new();

	pthread_mutex_lock(&l2->mt_lock);
	while (!l2->mt_stop) {
		if (!l2->mt_head) {
			pthread_cond_wait(&l2->mt_cv, &l2->mt_lock);
			continue;
		}
		mt_work(l2, l2->mt_head, ws);
	}
	pthread_mutex_unlock(&l2->mt_lock);
	codec_ws_free(ws);
	return NULL;
}

/* Decodes the frames f[0..n) of src into out on this thread and the
 * helpers: a 2 MiB chunk is 4 frames, so one reader uses every core. */
static int mt_decode(struct l2 *l2, struct codec_ws *ws, const uint8_t *src,
		     uint8_t *out, const struct codec_frame *f, size_t n)
{
	struct l2_mt job = { .src = src, .out = out, .f = f, .n = n };

	pthread_mutex_lock(&l2->mt_lock);
	job.next = l2->mt_head;
	l2->mt_head = &job;
	pthread_cond_broadcast(&l2->mt_cv);
	mt_work(l2, &job, ws);
	while (job.done < job.n)
		pthread_cond_wait(&l2->mt_done, &l2->mt_lock);
	pthread_mutex_unlock(&l2->mt_lock);
	return job.err;
}

/* The frames most compressed first (the ones that cost most to decode:
 * the shuffled low bytes of bf16 are near random and stored raw, a copy):
 * the costly frames spread over the threads instead of landing last on
 * one of them. */
static void costly_first(struct codec_frame *f, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct codec_frame x = f[i];
		size_t j = i;

		for (; j > 0 && f[j - 1].src_len * x.dst_len >
				x.src_len * f[j - 1].dst_len; j--)
			f[j] = f[j - 1];
		f[j] = x;
	}
}

/* Unshuffles out into dst a part at a time, each checksummed while in
 * cache: the raw_sum of dst. */
static uint64_t unshuffle_sum(void *dst, const void *out, size_t len,
			      int elem)
{
	struct hashkey_sum s;

	hashkey_sum_init(&s);
	for (size_t o = 0; o < len; o += UNSHUFFLE_PART) {
		size_t e = len - o < UNSHUFFLE_PART ? len : o + UNSHUFFLE_PART;

		codec_unshuffle_part(dst, out, len, elem, o, e);
		hashkey_sum_update(&s, (const uint8_t *)dst + o, e - o);
	}
	return hashkey_sum_final(&s);
}

void l2_mt_start(struct l2 *l2)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int want = ncpu > 1 ? (int)(ncpu - 1) : 0;

	if (want > L2_MT_MAX)
		want = L2_MT_MAX;
	for (int i = 0; i < want; i++) {
		if (pthread_create(&l2->mt_th[i], NULL, mt_main, l2))
			break;
		l2->mt_n++;
	}
}

void l2_mt_stop(struct l2 *l2)
{
	pthread_mutex_lock(&l2->mt_lock);
	l2->mt_stop = true;
	pthread_cond_broadcast(&l2->mt_cv);
	pthread_mutex_unlock(&l2->mt_lock);
	for (int i = 0; i < l2->mt_n; i++)
		pthread_join(l2->mt_th[i], NULL);
	l2->mt_n = 0;
}

/* Verifies the payload and decodes it: the common tail of reads, pending
 * record decodes and nothing else. */
int l2_decode(struct l2 *l2, const struct kvrec_hdr *h, void *dst,
		      size_t len)
{
	const void *payload = (const uint8_t *)h + sizeof(*h);
	struct codec_ws *ws;
	bool summed = false;
	uint64_t sum = 0;
	int rc;

	if (h->raw_len != len)
		return -EBADMSG;
	/* No stored_sum check here (recovery and reclaim check it): raw_sum
	 * below covers every byte served end to end, and zstd decodes any
	 * input safely into at most len bytes. It saves a pass over the
	 * payload on every promotion. */
	ws = h->codec == CODEC_NONE ? NULL : l2_ws_get(l2);
	if (h->codec != CODEC_NONE && !ws)
		return -ENOMEM;
	if (h->codec == CODEC_ZSTD && l2->mt_n > 0 && !decode_alone &&
	    len >= 2 * (size_t)CODEC_FRAME_BYTES) {
		/* one frame per CODEC_FRAME_BYTES of input: 128 for a 64 MiB
		 * chunk, more for larger max_chunk */
		size_t maxf = (len + CODEC_FRAME_BYTES - 1) / CODEC_FRAME_BYTES;
		struct codec_frame fbuf[160];
		struct codec_frame *f = maxf <= 160 ? fbuf :
					malloc(maxf * sizeof(*f));
		long n = f ? codec_frames(payload, h->stored_len, len, f, maxf)
			   : -ENOMEM;
		uint8_t *out = dst;

		if (n < 0) {
			rc = (int)n;
		} else {
			if (h->shuffle)
				out = codec_ws_scratch(ws, len);
			costly_first(f, (size_t)n);
			rc = out ? mt_decode(l2, ws, payload, out, f, (size_t)n)
				 : -ENOMEM;
			if (rc == 0 && h->shuffle) {
				sum = unshuffle_sum(dst, out, len, h->shuffle);
				summed = true;
			}
		}
		if (f != fbuf)
			free(f);
	} else {
		rc = codec_decompress(ws, h->codec, h->shuffle, payload,
				      h->stored_len, dst, len);
	}
	l2_ws_put(l2, ws);
	if (rc)
		return rc == -ENOMEM ? rc : -EBADMSG;
	if (!summed)
		sum = kvrec_sum(dst, len, 0);
	/* hashkey_sum is XXH3-64 with seed 0, as kvrec_sum(..., 0) */
	if (sum != h->raw_sum)
		return -EBADMSG;
	return 0;
}
