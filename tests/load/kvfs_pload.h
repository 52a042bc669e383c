/*
 * kvfs_pload.h - a load on a path namespace for the crash rounds of
 * tests/load/kvfs_faults.c (issue 27, item 8): two writers rewrite files
 * (open(O_TRUNC) + write + close, or a temporary + rename as os.replace,
 * now and then an unlink), three readers verify whatever they open, a
 * walker lists and stats the tree.
 *
 * Every operation on file i gets the next version number of i; a file's
 * bytes are a header (magic, i, version) and kvfs_test_fill of (i,
 * version), so any bytes read name the version they are and are checked
 * whole. Each writer owns the files congruent to its index and records
 * the version of the last acknowledged operation (a write, or an unlink)
 * and the highest version it tried. After a crash a file must be absent,
 * its last acknowledged version, or a later one whose operation had not
 * returned yet: an earlier one is an "older version", and one that comes
 * back after its acknowledged unlink a "resurrected unlink".
 */
#ifndef KVFS_PLOAD_H
#define KVFS_PLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct pload_file {
	_Atomic uint64_t acked;    /* version of the last acknowledged op */
	_Atomic bool acked_gone;   /* absent since (an unlink, or found
				    * absent after a crash) */
	_Atomic bool unlinked;     /* the last acknowledged op: an unlink */
	_Atomic uint64_t tried;    /* the highest version tried */
	/* the last PL_HIST operations (the writer's; printed with a
	 * failure): version, 'T' O_TRUNC, 'R' rename, 'U' unlink, errno */
	struct {
		uint64_t v;
		char op;
		int err;
	} hist[8];
	unsigned int nhist;
};

struct pload_tally {
	uint64_t verified;     /* present, and its acknowledged version */
	uint64_t newer;        /* present at a version not acknowledged yet */
	uint64_t absent;       /* acknowledged written, absent */
	uint64_t older;        /* present at a version older than acked */
	uint64_t resurrected;  /* present after its acknowledged unlink */
	uint64_t wrong;        /* bytes that are no version of the file */
};

struct pload {
	char dir[4200];        /* the namespace's directory */
	int nfiles;
	unsigned int seed;
	struct pload_file *f;
	_Atomic bool stop;
	pthread_t th[8];
	struct pload_arg {
		struct pload *p;
		int idx;
	} args[8];
	int nth;
	_Atomic uint64_t ops, wrong; /* wrong: bytes read under load */
};

/* pload_init - nfiles files, every one absent. 0 or -ENOMEM. */
int pload_init(struct pload *p, int nfiles, unsigned int seed);
void pload_free(struct pload *p);

/* pload_start - the namespace ns under mount point root (made as needed,
 * with its subdirectories), then the threads. 0 or -errno. */
int pload_start(struct pload *p, const char *root, const char *ns);
/* pload_stop - stops and joins the threads. */
void pload_stop(struct pload *p);

/* pload_check - after a remount on root: every file judged (see the
 * top) into t (added); the state then follows what was found. */
void pload_check(struct pload *p, const char *root, const char *ns,
		 struct pload_tally *t);

#endif /* KVFS_PLOAD_H */
