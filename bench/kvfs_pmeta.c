/*
 * kvfs_pmeta.c - daemon-side metadata bytes per directory and per file of
 * a path namespace (fs/paths/fs_ptree.c), as kvfs_meta measures them per chunk.
 *
 *   kvfs_pmeta [-d DIRS] [-f FILES]
 *
 * Builds a tree of DIRS empty directories (default 1,000,000: a thousand
 * directories of a thousand each, vLLM's <hhh>/<hh>_g0 shape) and then
 * FILES file names (default 1,000,000, in the same directories, with
 * vLLM's 68-byte names "<64 hex>.bin", each keyed as a published file is)
 * and prints the tree's own count (fs_paths.bytes) and the heap growth
 * malloc sees (mallinfo2: in use plus mmap'd, so allocation overhead and
 * the tables' buckets count too), per directory and per file. A file's
 * chunk costs the engine's ~200 bytes on top (kvfs_meta).
 *
 * fs/ is linked into kvfs-mount only, so the tree's source is compiled in;
 * the two fs/ calls it makes at teardown are stubs (no inodes, no writers).
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/paths/fs_ptree.c"

struct fs_inode *fs_ino_find(struct fs_priv *p, uint64_t ino)
{
	(void)p;
	(void)ino;
	return NULL;
}

void fs_wr_unref_locked(struct fs *fs, struct fs_wr *w)
{
	(void)fs;
	(void)w;
}

static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long dirs = 1000000, files = 1000000, top, per;
	struct fs_pdir *root, **leaf;
	struct fs_paths t;
	uint64_t h0, h1, b1;
	double t0, t1, t2;
	char name[80];
	int opt;

	while ((opt = getopt(argc, argv, "d:f:")) != -1) {
		if (opt == 'd')
			dirs = strtoul(optarg, NULL, 10);
		else if (opt == 'f')
			files = strtoul(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: kvfs_pmeta [-d DIRS] [-f FILES]\n");
			return 2;
		}
	}
	if (dirs < 2) {
		fprintf(stderr, "kvfs_pmeta: -d must be at least 2\n");
		return 2;
	}
	for (top = 1; top * top < dirs; top++)
		;
	per = (dirs - top) / top;
	if (fs_ptree_init(&t, dirs + 1))
		return 1;
	root = fs_ptree_root(1, 1);
	leaf = calloc(top * (per ? per : 1), sizeof(*leaf));
	if (!root || !leaf)
		return 1;
	h0 = heap_bytes();
	t0 = now_s();
	for (unsigned long i = 0, n = 0; i < top; i++) {
		struct fs_pent *e;
		struct fs_pdir *d;

		snprintf(name, sizeof(name), "%03lx", i);
		if (fs_ptree_mkdir(&t, root, name, strlen(name), &e))
			return 1;
		d = e->dir;
		for (unsigned long j = 0; j < per; j++) {
			snprintf(name, sizeof(name), "%02lx_g0", j);
			if (fs_ptree_mkdir(&t, d, name, strlen(name), &e))
				return 1;
			leaf[n++] = e->dir;
		}
		if (!per)
			leaf[n++] = d;
	}
	t1 = now_s();
	h1 = heap_bytes();
	b1 = t.bytes;
	printf("directories: %" PRIu64 " (%lu x %lu), %.0f B each by the tree's "
	       "count, %.0f B by malloc's; %.2f s, %.2f us each\n", t.ndirs,
	       top, per, (double)b1 / (double)t.ndirs,
	       (double)(h1 - h0) / (double)t.ndirs, t1 - t0,
	       (t1 - t0) * 1e6 / (double)t.ndirs);
	for (unsigned long i = 0; i < files; i++) {
		struct fs_pdir *d = leaf[i % (top * (per ? per : 1))];
		struct kvfs_key key;
		struct fs_pent *e;
		int len = snprintf(name, sizeof(name), "%016lx%016lx%016lx%016lx"
				   ".bin", i, i * 31, i * 17, i * 7);

		if (fs_ptree_mkfile(&t, d, name, (size_t)len, &e))
			return 1;
		kvfs_path_key(name, (size_t)len, &key);
		fs_ptree_key(&t, e, &key, i + 1);
	}
	t2 = now_s();
	if (files)
		printf("files: %" PRIu64 ", %.0f B each by the tree's count, "
		       "%.0f B by malloc's (68-byte names); %.2f s, %.2f us "
		       "each\n", t.nfiles,
		       (double)(t.bytes - b1) / (double)files,
		       (double)(heap_bytes() - h1) / (double)files, t2 - t1,
		       (t2 - t1) * 1e6 / (double)files);
	fs_ptree_clear(NULL, &t, root);
	free(root);
	free(leaf);
	fs_ptree_free(NULL, &t);
	return 0;
}
