/*
 * fuzz_l2_ckpt - the L2 checkpoint loader on untrusted bytes: the input is
 * l2_dir/l2.ckpt (record.h) in a fresh l2_dir with a known l2.id and three
 * segment files of zeros (sparse), which l2_open loads as at every mount.
 * Loading may take or refuse anything, but must never crash or leak, and
 * no record it hands to the engine may read back: the segments hold no
 * record, so every l2_read must fail (a checkpoint entry is a claim, the
 * disk is the truth).
 *
 * The fuzzer cannot compute the checksums, so when the input's flags
 * field (header byte 36) is odd the harness seals the header and every
 * block whose length fits, with the directory's salt, as the writer does;
 * without that it would only ever explore "checksum fails". The seeds
 * (tests/fuzz/corpus/fuzz_l2_ckpt) are real checkpoints written by
 * l2_close under that salt.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier/l2/l2.h"
#include "tier/record/record.h"

#define SALT 0x6b76667366757a7aULL

struct got {
	struct l2_rec_info r[64];
	char ns[64][KVFS_NS_NAME_MAX + 1];
	int n;
};

static int on_recover(void *arg, const struct l2_rec_info *rec)
{
	struct got *g = arg;

	if (g->n == 64 || rec->raw_len > (16u << 20))
		return -ENOSPC;
	g->r[g->n] = *rec;
	snprintf(g->ns[g->n], sizeof(g->ns[0]), "%s", rec->ns);
	g->n++;
	return 0;
}

static enum l2_reclaim_verdict on_reclaim(void *arg,
					  const struct l2_rec_info *rec,
					  bool may_keep)
{
	(void)arg;
	(void)rec;
	(void)may_keep;
	return L2_DROP;
}

static bool on_moved(void *arg, const struct l2_rec_info *rec,
		     const struct l2_loc *to)
{
	(void)arg;
	(void)rec;
	(void)to;
	return false;
}

static void seal(uint8_t *p, size_t len)
{
	struct kvckpt_hdr h;
	size_t pos = sizeof(h);
	uint64_t blkno = 1;

	if (len < sizeof(h))
		return;
	memcpy(&h, p, sizeof(h));
	h.salt = SALT;
	h.sum = kvrec_sum(&h, offsetof(struct kvckpt_hdr, sum), SALT);
	memcpy(p, &h, sizeof(h));
	while (len - pos >= sizeof(struct kvckpt_blk) + 8) {
		struct kvckpt_blk b;
		uint64_t sum;

		memcpy(&b, p + pos, sizeof(b));
		if (b.len > len - pos - sizeof(b) - 8)
			break;
		sum = kvrec_sum(p + pos, sizeof(b) + b.len, SALT + blkno);
		memcpy(p + pos + sizeof(b) + b.len, &sum, 8);
		pos += sizeof(b) + b.len + 8;
		blkno++;
	}
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void put_file(const char *dir, const char *name, const void *p,
		     size_t len, off_t size)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (len && write(fd, p, len) != (ssize_t)len)
		abort();
	if (size && ftruncate(fd, size))
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[] = "/tmp/kvfs-fuzz-ckpt-XXXXXX", id[32], err[256];
	struct got g = { .n = 0 };
	struct l2_config c = {
		.size = 64ull << 20, .recover = on_recover,
		.reclaim = on_reclaim, .moved = on_moved, .cb_arg = &g,
		.checkpoint_s = -1,
	};
	uint8_t *buf, out[64 * 1024];
	struct l2 *l2;

	if (size > (4u << 20))
		return 0;
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size > 36 && (buf[36] & 1))
		seal(buf, size);
	if (!mkdtemp(dir))
		abort();
	snprintf(id, sizeof(id), "%016llx\n", (unsigned long long)SALT);
	put_file(dir, "l2.id", id, 17, 0);
	put_file(dir, KVCKPT_FILE, buf, size, 0);
	for (int s = 1; s <= 3; s++) {
		char name[64];

		snprintf(name, sizeof(name), "seg-%016x.kvl2", s);
		put_file(dir, name, NULL, 0, 1 << 20);
	}
	c.dir = dir;
	if (l2_open(&c, &l2, err, sizeof(err)) == 0) {
		for (int i = 0; i < g.n; i++) {
			size_t len = g.r[i].raw_len;

			if (len > sizeof(out))
				continue;
			if (l2_read(l2, &g.r[i].loc, g.ns[i], &g.r[i].key, out,
				    len) == 0)
				abort(); /* zeros served as a record */
		}
		l2_close(l2);
	}
	rm_tree(dir);
	free(buf);
	return 0;
}
