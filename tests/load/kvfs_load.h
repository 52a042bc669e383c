/*
 * kvfs_load.h - a mixed load on a mounted kvfs, shared by the
 * crash-consistency harness (tests/load/kvfs_faults.c, `make faults`) and
 * the soak (tests/load/kvfs_soak.c, `make soak`).
 *
 * Chunks are named after an id n (load_name) and hold bytes that are a
 * function of n alone (length load_len(n), content kvfs_test_fill(n)), so
 * anything listed under the mount can be checked byte for byte against that
 * oracle without remembering what was written. Writer threads own the ids
 * congruent to their index and record what each id's last acknowledged
 * operation was (published / unlinked), so a crash can be judged: an
 * acknowledged chunk that is missing afterwards is "lost" (L1 is memory;
 * only what reached L2 survives a SIGKILL), a listed chunk with other bytes
 * is "wrong" (never acceptable).
 */
#ifndef KVFS_LOAD_H
#define KVFS_LOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum load_op { LOP_WRITE, LOP_READ, LOP_STAT, LOP_UNLINK, LOP_RENAME, LOP_N };

/* what the last acknowledged operation on an id was */
enum load_state { LS_ABSENT, LS_BUSY, LS_PUBLISHED, LS_UNLINKED };

#define LOAD_HBUCKETS 512

struct load_hist {
	_Atomic uint64_t b[LOAD_HBUCKETS]; /* log-linear buckets of us */
};

struct load_cfg {
	const char *root;   /* the mount point */
	int nns;            /* namespaces ns0..ns(nns-1), created by load_start */
	uint64_t nids;      /* ids per namespace */
	size_t min_len, max_len; /* chunk sizes */
	int writers, readers;
	unsigned int seed;
};

struct load {
	struct load_cfg cfg;
	_Atomic bool stop;
	pthread_t th[64];
	int nth;
	_Atomic uint8_t *state;       /* [nns * nids] enum load_state */
	_Atomic uint64_t ops[LOP_N], errs[LOP_N];
	_Atomic uint64_t bytes_written, bytes_read, verified, misses, wrong;
	struct load_hist lat[LOP_N];
};

extern const char *const load_op_names[LOP_N];

/* load_name - the 32-hex key of id n; load_parse - its inverse: 0, or -1
 * when name is no load key. */
void load_name(uint64_t n, char out[33]);
int load_parse(const char *name, uint64_t *n);
/* load_len - the length of id n's chunk, in [min_len, max_len]. */
size_t load_len(const struct load_cfg *c, uint64_t n);

/*
 * load_verify_fd - reads the open chunk of id n to its end and compares it
 * with the oracle. Returns the number of wrong bytes (a length difference
 * counts its bytes), or -errno when a read failed.
 */
long load_verify_fd(const struct load_cfg *c, int fd, uint64_t n);

/* load_init - zeroes l and allocates the oracle's state (every id absent).
 * 0 or -errno. */
int load_init(struct load *l, const struct load_cfg *cfg);
/* load_start - creates the namespaces under root (a mount point; the
 * state carries over from a previous mount) and starts the threads. 0 or
 * -errno (threads started before the failure are stopped). */
int load_start(struct load *l, const char *root);
/* load_stop - stops and joins the threads (they finish their operation). */
void load_stop(struct load *l);
/* load_free - frees what load_start allocated. */
void load_free(struct load *l);

/*
 * load_check_all - lists every namespace under root and verifies every
 * chunk byte for byte. Counts into *verified, *wrong (bytes), *foreign
 * (names no load key); with l->state, *lost = ids acknowledged published
 * but not listed, *resurrected = ids acknowledged unlinked but listed; and
 * then sets each id's state to what is listed. Returns 0 or -errno.
 */
int load_check_all(struct load *l, uint64_t *verified, uint64_t *wrong,
		   uint64_t *lost, uint64_t *resurrected, uint64_t *foreign);

/* load_hist_pct - the p-th percentile (0..100) of h in microseconds. */
double load_hist_pct(const struct load_hist *h, double p);
uint64_t load_hist_count(const struct load_hist *h);

#endif
