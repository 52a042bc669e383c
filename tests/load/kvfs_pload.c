/*
 * kvfs_pload.c - the path-namespace load of the crash rounds (see
 * kvfs_pload.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common/kvfs_test.h"
#include "tests/load/kvfs_pload.h"

#define PL_MAGIC 0x4c50564bu /* "KVPL" */
#define PL_HDR 16
#define PL_DIRS 4
#define PL_MAX_LEN (PL_HDR + 33 * 4096)
#define PL_WRITERS 2
#define PL_READERS 3

static size_t pl_len(int i, uint64_t v)
{
	return PL_HDR + 4096 + (size_t)((i * 131 + (int)(v % 1000) * 977) %
					32) * 4096;
}

static uint64_t pl_seed(int i, uint64_t v)
{
	return (uint64_t)i << 40 ^ v;
}

static void pl_path(const struct pload *p, int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/d%d/f%d", p->dir, i % PL_DIRS, i);
}

/* The bytes of version v of file i into buf (pl_len(i, v) bytes). */
static void pl_fill(char *buf, int i, uint64_t v)
{
	uint32_t h[2] = { PL_MAGIC, (uint32_t)i };

	memcpy(buf, h, 8);
	memcpy(buf + 8, &v, 8);
	kvfs_test_fill(buf + PL_HDR, pl_len(i, v) - PL_HDR, pl_seed(i, v), 0);
}

/* Which version of file i the len bytes at buf are: 0 and *v, or -1
 * (no version of it). */
static int pl_verify(const char *buf, size_t len, int i, uint64_t *v)
{
	uint32_t h[2];

	if (len < PL_HDR)
		return -1;
	memcpy(h, buf, 8);
	memcpy(v, buf + 8, 8);
	if (h[0] != PL_MAGIC || h[1] != (uint32_t)i || len != pl_len(i, *v))
		return -1;
	return kvfs_test_check(buf + PL_HDR, len - PL_HDR, pl_seed(i, *v), 0)
		       ? -1 : 0;
}

/* The n bytes at buf read while file i may be being rewritten (O_TRUNC
 * shows the writer's bytes so far, as on any filesystem): a prefix of a
 * version of it. 0, or -1. */
static int pl_verify_prefix(const char *buf, size_t n, int i)
{
	uint32_t h[2];
	uint64_t v;

	if (n < PL_HDR)
		return 0;
	memcpy(h, buf, 8);
	memcpy(&v, buf + 8, 8);
	if (h[0] != PL_MAGIC || h[1] != (uint32_t)i || n > pl_len(i, v))
		return -1;
	return kvfs_test_check(buf + PL_HDR, n - PL_HDR, pl_seed(i, v), 0)
		       ? -1 : 0;
}

/* Reads file i: its length, or -errno (-ENOENT: absent). */
static long pl_read(const struct pload *p, int i, char *buf)
{
	char path[4400];
	size_t len = 0;
	ssize_t n;
	int fd;

	pl_path(p, i, path, sizeof(path));
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + len, PL_MAX_LEN + 1 - len)) > 0 &&
	       len + (size_t)n <= PL_MAX_LEN)
		len += (size_t)n;
	if (n > 0) /* longer than any version */
		len = PL_MAX_LEN + 1;
	n = n < 0 ? -errno : 0;
	close(fd);
	return n ? n : (long)len;
}

/* One operation of version v on file i: 0 once acknowledged. */
static int pl_op(const struct pload *p, int i, uint64_t v, unsigned int r,
		 char *buf, bool *gone)
{
	char path[4400], tmp[4400];
	int fd, rc = -1;

	pl_path(p, i, path, sizeof(path));
	*gone = r % 10 == 9;
	if (*gone) /* ENOENT too is no acknowledgment: the mount may be gone */
		return unlink(path);
	pl_fill(buf, i, v);
	if (r % 10 < 5) { /* rewritten in place */
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return -1;
		rc = kvfs_test_write_all(fd, buf, pl_len(i, v));
		return close(fd) || rc ? -1 : 0;
	}
	snprintf(tmp, sizeof(tmp), "%s/d%d/.f%d.%llu.tmp", p->dir, i % PL_DIRS,
		 i, (unsigned long long)v);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -1;
	rc = kvfs_test_write_all(fd, buf, pl_len(i, v));
	if (close(fd) || rc || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct pload_arg *a = arg;
	struct pload *p = a->p;
	unsigned int seed = p->seed * 7919u + (unsigned int)a->idx;
	char *buf = malloc(PL_MAX_LEN);

	while (buf && !atomic_load(&p->stop)) {
		unsigned int r = (unsigned int)rand_r(&seed);
		int i = a->idx + PL_WRITERS * (int)(r % (unsigned int)
				(p->nfiles / PL_WRITERS));
		struct pload_file *f = &p->f[i];
		uint64_t v = atomic_load(&f->tried) + 1;
		bool gone;
		int rc;

		atomic_store(&f->tried, v);
		rc = pl_op(p, i, v, r / 16, buf, &gone);
		f->hist[f->nhist % 8].v = v;
		f->hist[f->nhist % 8].op = gone ? 'U' : r / 16 % 10 < 5 ? 'T'
									 : 'R';
		f->hist[f->nhist % 8].err = rc ? errno : 0;
		f->nhist++;
		if (!rc) {
			atomic_store(&f->acked, v);
			atomic_store(&f->acked_gone, gone);
			atomic_store(&f->unlinked, gone);
			atomic_fetch_add(&p->ops, 1);
		} else {
			usleep(1000); /* the daemon is gone, or no room */
		}
	}
	free(buf);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct pload_arg *a = arg;
	struct pload *p = a->p;
	unsigned int seed = p->seed * 104729u + (unsigned int)a->idx;
	char *buf = malloc(PL_MAX_LEN + 1);

	while (buf && !atomic_load(&p->stop)) {
		int i = rand_r(&seed) % p->nfiles;
		long n = pl_read(p, i, buf);

		if (n >= 0 && pl_verify_prefix(buf, (size_t)n, i)) {
			fprintf(stderr, "kvfs_pload: f%d: %ld bytes that are no "
				"version of it\n", i, n);
			atomic_fetch_add(&p->wrong, 1);
		}
		atomic_fetch_add(&p->ops, n >= 0);
	}
	free(buf);
	return NULL;
}

static void walk(struct pload *p, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char sub[4400];
	struct stat sb;

	if (!d)
		return;
	while (!atomic_load(&p->stop) && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		if (!stat(sub, &sb) && S_ISDIR(sb.st_mode) && depth < 3)
			walk(p, sub, depth + 1);
		atomic_fetch_add(&p->ops, 1);
	}
	closedir(d);
}

static void *walker_main(void *arg)
{
	struct pload_arg *a = arg;

	while (!atomic_load(&a->p->stop)) {
		walk(a->p, a->p->dir, 0);
		usleep(5000);
	}
	return NULL;
}

int pload_init(struct pload *p, int nfiles, unsigned int seed)
{
	memset(p, 0, sizeof(*p));
	p->nfiles = nfiles - nfiles % PL_WRITERS;
	p->seed = seed;
	p->f = calloc((size_t)p->nfiles, sizeof(*p->f));
	return p->f ? 0 : -ENOMEM;
}

void pload_free(struct pload *p)
{
	free(p->f);
	p->f = NULL;
}

int pload_start(struct pload *p, const char *root, const char *ns)
{
	void *(*fn[PL_WRITERS + PL_READERS + 1])(void *);
	char sub[4400];
	int n = 0, err;

	snprintf(p->dir, sizeof(p->dir), "%s/%s", root, ns);
	if (mkdir(p->dir, 0755) && errno != EEXIST)
		return -errno;
	for (int d = 0; d < PL_DIRS; d++) {
		snprintf(sub, sizeof(sub), "%s/d%d", p->dir, d);
		if (mkdir(sub, 0755) && errno != EEXIST)
			return -errno;
	}
	for (int i = 0; i < PL_WRITERS; i++)
		fn[n++] = writer_main;
	for (int i = 0; i < PL_READERS; i++)
		fn[n++] = reader_main;
	fn[n++] = walker_main;
	atomic_store(&p->stop, false);
	for (p->nth = 0; p->nth < n; p->nth++) {
		p->args[p->nth].p = p;
		p->args[p->nth].idx = p->nth;
		err = pthread_create(&p->th[p->nth], NULL, fn[p->nth],
				     &p->args[p->nth]);
		if (err) {
			pload_stop(p);
			return -err;
		}
	}
	return 0;
}

void pload_stop(struct pload *p)
{
	atomic_store(&p->stop, true);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	p->nth = 0;
}

void pload_check(struct pload *p, const char *root, const char *ns,
		 struct pload_tally *t)
{
	char *buf = malloc(PL_MAX_LEN + 1);

	snprintf(p->dir, sizeof(p->dir), "%s/%s", root, ns);
	for (int i = 0; buf && i < p->nfiles; i++) {
		struct pload_file *f = &p->f[i];
		uint64_t acked = atomic_load(&f->acked), v;
		bool gone = atomic_load(&f->acked_gone);
		long n = pl_read(p, i, buf);

		if (n < 0) { /* absent (or unreadable: as absent) */
			t->absent += acked && !gone;
			atomic_store(&f->acked_gone, true);
			continue;
		}
		if (pl_verify(buf, (size_t)n, i, &v)) {
			fprintf(stderr, "kvfs_pload: after the crash f%d holds "
				"%ld bytes that are no version of it\n", i, n);
			t->wrong++;
			continue;
		}
		if (v > acked && v <= atomic_load(&f->tried)) {
			t->newer++;
		} else if (v == acked && !gone) {
			t->verified++;
		} else {
			bool unl = atomic_load(&f->unlinked);

			fprintf(stderr, "kvfs_pload: after the crash f%d is "
				"version %llu; acknowledged: %s %llu\n", i,
				(unsigned long long)v, unl ? "unlink"
				: gone ? "absent since" : "version",
				(unsigned long long)acked);
			for (unsigned int h = f->nhist > 8 ? f->nhist - 8 : 0;
			     h < f->nhist; h++)
				fprintf(stderr, "  v%llu %c %s\n",
					(unsigned long long)f->hist[h % 8].v,
					f->hist[h % 8].op,
					strerror(f->hist[h % 8].err));
			if (unl)
				t->resurrected++;
			else
				t->older++;
		}
		atomic_store(&f->acked, v);
		atomic_store(&f->acked_gone, false);
		atomic_store(&f->unlinked, false);
		if (atomic_load(&f->tried) < v)
			atomic_store(&f->tried, v);
	}
	free(buf);
}
