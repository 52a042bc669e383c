/*
 * ctl_replay_l2.c - the L2 model of `kvfsctl replay --l2-capacity`: a FIFO
 * log of blocks with the engine's ingest= admission rules (ctl_replay.h).
 *
 * Why a model and not the engine's L2: the real L2 writes through a
 * demoter thread and io_uring, so which blocks are on disk when the next
 * request reads depends on timing, and a replay of 100k blocks would
 * write hundreds of MiB per run. The admission decision itself is the
 * engine's: ingest=twice asks tier/policy/seen.h exactly as tier_l2.c does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount/ctl_replay.h"
#include "tier/policy/seen.h"

static const char *const ingest_names[REPLAY_INGEST_NMODES] = {
	"evicted", "hot", "twice", "all",
};

struct replay_l2 {
	enum replay_ingest mode;
	uint64_t cap;        /* blocks the log holds */
	uint32_t *ring;      /* the log, oldest at seq first % cap */
	uint64_t first, next; /* sequence numbers: oldest, next append */
	uint64_t *at;        /* per block: 1 + seq of its copy, 0 = none */
	uint32_t *l1_hits;   /* per block: hits since its last publish */
	struct seen2 seen;   /* ingest=twice */
	uint64_t hits, writes;
};

int replay_ingest_parse(const char *s, enum replay_ingest *out)
{
	for (int i = 0; i < REPLAY_INGEST_NMODES; i++)
		if (!strcmp(s, ingest_names[i])) {
			*out = (enum replay_ingest)i;
			return 0;
		}
	return -EINVAL;
}

const char *replay_ingest_name(enum replay_ingest m)
{
	return m < REPLAY_INGEST_NMODES ? ingest_names[m] : "?";
}

int replay_l2_create(struct replay_l2 **out, uint64_t capacity,
		     enum replay_ingest mode, size_t nblocks)
{
	struct replay_l2 *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->mode = mode;
	m->cap = capacity ? capacity : 1;
	m->ring = calloc(m->cap, sizeof(*m->ring));
	m->at = calloc(nblocks ? nblocks : 1, sizeof(*m->at));
	m->l1_hits = calloc(nblocks ? nblocks : 1, sizeof(*m->l1_hits));
	/* the engine sizes the filter by L2 (tier_l2.c): here in blocks */
	if (!m->ring || !m->at || !m->l1_hits ||
	    (mode == REPLAY_INGEST_TWICE && seen2_init(&m->seen, m->cap))) {
		replay_l2_destroy(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void replay_l2_destroy(struct replay_l2 *m)
{
	if (!m)
		return;
	seen2_free(&m->seen);
	free(m->ring);
	free(m->at);
	free(m->l1_hits);
	free(m);
}

/* Appends u to the log, reclaiming the oldest copy when full. */
static void l2_write(struct replay_l2 *m, uint32_t u)
{
	if (m->at[u])
		return; /* a clean copy is there already */
	if (m->next - m->first == m->cap) {
		uint32_t old = m->ring[m->first % m->cap];

		if (m->at[old] == m->first + 1)
			m->at[old] = 0;
		m->first++;
	}
	m->ring[m->next % m->cap] = u;
	m->at[u] = ++m->next;
	m->writes++;
}

bool replay_l2_read(struct replay_l2 *m, uint32_t u)
{
	if (!m->at[u])
		return false;
	m->hits++;
	return true;
}

void replay_l2_published(struct replay_l2 *m, uint32_t u)
{
	m->l1_hits[u] = 0;
	if (m->mode == REPLAY_INGEST_TWICE)
		seen2_note(&m->seen, u);
	else if (m->mode == REPLAY_INGEST_ALL)
		l2_write(m, u);
}

void replay_l2_l1_hit(struct replay_l2 *m, uint32_t u)
{
	if (m->l1_hits[u] < UINT32_MAX)
		m->l1_hits[u]++;
}

void replay_l2_evicted(struct replay_l2 *m, uint32_t u)
{
	switch (m->mode) {
	case REPLAY_INGEST_EVICTED:
		break;
	case REPLAY_INGEST_HOT:
		if (m->l1_hits[u] < REPLAY_HOT_HITS)
			return;
		break;
	case REPLAY_INGEST_TWICE:
		if (!m->l1_hits[u] && !seen2_twice(&m->seen, u))
			return;
		break;
	default:
		return; /* all: written when published */
	}
	l2_write(m, u);
}

void replay_l2_counts(const struct replay_l2 *m, uint64_t *hits,
		      uint64_t *writes)
{
	*hits = m->hits;
	*writes = m->writes;
}
