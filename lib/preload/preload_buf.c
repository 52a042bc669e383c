/*
 * preload_buf.c - the buffers libkvfs_preload.so copies chunks into
 * (lib/preload/README.md): transparent-huge-page backed, kept warm when
 * freed.
 */
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>

#include "kvfs.h"
#include "lib/preload/preload_i.h"

#define POOL_MAX 8     /* free buffers kept warm */

/* buf_lock: the pool and the slots' free lists. Fork: taken around it,
 * so the child starts with it free. */
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char *buf; size_t cap; } pool[POOL_MAX];
static unsigned pool_n;

static void atfork_lock(void) { pthread_mutex_lock(&buf_lock); }
static void atfork_unlock(void) { pthread_mutex_unlock(&buf_lock); }

/* first of all (preload_wr.c's fork handler frees buffers) */
__attribute__((constructor(101))) static void pl_buf_init(void)
{
	pthread_atfork(atfork_lock, atfork_unlock, atfork_unlock);
}

/*
 * Buffers are transparent-huge-page backed: the daemon's process_vm_writev
 * into 4 KiB pages pays a page-table walk and a page reference per page
 * (get_user_pages), one per 2 MiB page here (docs/performance.md, "The
 * preload library"). A buffer of more than HALF_HUGE bytes is a mapping of
 * its own, 2 MiB-aligned and rounded up to 2 MiB, kept warm in a pool of
 * POOL_MAX when freed; a smaller one is a slot of a power-of-two class
 * (64 KiB .. 1 MiB) carved from a 2 MiB slab, kept on its class's free
 * list when freed (slabs are never unmapped: their number is the most
 * buffers of that class ever open at once). Either way the pages are
 * populated once, when the mapping is made (kvfs_buf_alloc).
 */
#define HUGE (2ul << 20)
#define HALF_HUGE (HUGE / 2)
#define MIN_CLASS_SHIFT 16 /* 64 KiB */
#define NCLASSES 5         /* 64, 128, 256, 512 KiB, 1 MiB */

struct slot { struct slot *next; };
static struct slot *free_slots[NCLASSES];

static unsigned size_class(size_t cap)
{
	unsigned c = 0;

	while (((size_t)1 << (MIN_CLASS_SHIFT + c)) < cap)
		c++;
	return c;
}

/* Caller holds buf_lock. */
static char *slot_get(unsigned cls)
{
	size_t sz = (size_t)1 << (MIN_CLASS_SHIFT + cls);
	struct slot *s = free_slots[cls];
	char *slab;

	if (s) {
		free_slots[cls] = s->next;
		return (char *)s;
	}
	slab = kvfs_buf_alloc(HUGE);
	if (!slab)
		return NULL;
	for (size_t off = HUGE - sz; off > 0; off -= sz) {
		s = (struct slot *)(slab + off);
		s->next = free_slots[cls];
		free_slots[cls] = s;
	}
	return slab;
}

char *pl_buf_get(size_t *cap)
{
	size_t want;
	char *p;

	pthread_mutex_lock(&buf_lock);
	if (*cap <= HALF_HUGE) {
		unsigned cls = size_class(*cap);

		p = slot_get(cls);
		pthread_mutex_unlock(&buf_lock);
		if (p)
			*cap = (size_t)1 << (MIN_CLASS_SHIFT + cls);
		return p;
	}
	want = (*cap + HUGE - 1) & ~(HUGE - 1);
	for (unsigned i = 0; i < pool_n; i++)
		if (pool[i].cap >= want && pool[i].cap <= 4 * want) {
			p = pool[i].buf;
			*cap = pool[i].cap;
			pool[i] = pool[--pool_n];
			pthread_mutex_unlock(&buf_lock);
			return p;
		}
	pthread_mutex_unlock(&buf_lock);
	p = kvfs_buf_alloc(want);
	if (p)
		*cap = want;
	return p;
}

void pl_buf_put(char *p, size_t cap)
{
	if (!p)
		return;
	pthread_mutex_lock(&buf_lock);
	if (cap <= HALF_HUGE) {
		struct slot *s = (struct slot *)p;
		unsigned cls = size_class(cap);

		s->next = free_slots[cls];
		free_slots[cls] = s;
		p = NULL;
	} else if (pool_n < POOL_MAX) {
		pool[pool_n].buf = p;
		pool[pool_n++].cap = cap;
		p = NULL;
	}
	pthread_mutex_unlock(&buf_lock);
	if (p)
		munmap(p, cap);
}
