/*
 * fuzz_l2_scan - L2 recovery on untrusted disk bytes: the input is a
 * segment file (seg-0000000000000001.kvl2 in a fresh l2_dir with a known
 * l2.id), which l2_open scans, as at every mount after a crash or with a
 * damaged disk; every record it recovers is then read back with l2_read
 * (header, checksums, zstd decode). Recovery may keep or skip anything,
 * but must never crash, leak, or hand back bytes whose checksum does not
 * match: a record read successfully must decode to raw_len bytes whose
 * checksum is the raw_sum its header gave.
 *
 * The fuzzer cannot compute the header checksums itself, so for
 * blocks whose first bytes are the record magic the harness seals the
 * header (hdr_sum) with the directory's salt, and the payload checksum
 * too when the header's reserved[0] is odd: without that it would only
 * ever explore "checksum mismatch". The seeds (tests/fuzz/corpus/
 * fuzz_l2_scan) are real segments written by l2_append.
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
/* the engine's max_chunk: its recover callback refuses larger records
 * (l2 itself accepts raw lengths up to 2^40; tier_l2.c on_recover) */
#define MAX_CHUNK (16u << 20)

struct got {
	struct l2_rec_info r[64];
	char ns[64][KVFS_NS_NAME_MAX + 1];
	int n;
};

static int on_recover(void *arg, const struct l2_rec_info *rec)
{
	struct got *g = arg;

	if (g->n == 64)
		return -ENOSPC;
	if (rec->raw_len > MAX_CHUNK)
		return -EFBIG; /* as the engine does */
	g->r[g->n] = *rec;
	snprintf(g->ns[g->n], sizeof(g->ns[0]), "%s", rec->ns);
	g->n++;
	return 0;
}

static enum l2_reclaim_verdict on_reclaim(void *arg,
					  const struct l2_rec_info *rec,
					  bool may_keep)
{
	return L2_DROP;
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[600];

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int rc = fd >= 0 && write(fd, p, len) == (ssize_t)len ? 0 : -1;

	if (fd >= 0)
		close(fd);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[] = "/tmp/kvfs-fuzz-l2.XXXXXX", p[600], err[256];
	struct l2_config cfg = { 0 };
	struct got *g = calloc(1, sizeof(*g));
	uint8_t *seg;
	struct l2 *l2 = NULL;

	if (!g || size > (8u << 20) || !mkdtemp(dir)) {
		free(g);
		return 0;
	}
	seg = malloc(size ? size : 1);
	if (!seg)
		goto out;
	memcpy(seg, data, size);
	for (size_t off = 0; off + sizeof(struct kvrec_hdr) <= size;
	     off += L2_ALIGN) {
		struct kvrec_hdr h;

		memcpy(&h, seg + off, sizeof(h));
		if (h.magic != KVREC_MAGIC)
			continue;
		if ((h.reserved[0] & 1) &&
		    h.stored_len <= size - off - sizeof(h))
			h.stored_sum = kvrec_sum(seg + off + sizeof(h),
						 h.stored_len, 0);
		h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum),
				      SALT);
		memcpy(seg + off, &h, sizeof(h));
	}
	snprintf(p, sizeof(p), "%s/l2.id", dir);
	snprintf(err, sizeof(err), "%016llx\n", (unsigned long long)SALT);
	if (write_file(p, err, strlen(err)))
		goto out;
	snprintf(p, sizeof(p), "%s/seg-0000000000000001.kvl2", dir);
	if (write_file(p, seg, size))
		goto out;
	cfg.dir = dir;
	cfg.size = 64ull << 20;
	cfg.seg_size = 16ull << 20;
	cfg.recover = on_recover;
	cfg.reclaim = on_reclaim;
	cfg.cb_arg = g;
	if (l2_open(&cfg, &l2, err, sizeof(err)))
		goto out;
	for (int i = 0; i < g->n; i++) {
		const struct l2_rec_info *r = &g->r[i];
		size_t len = r->raw_len;
		void *dst;
		int rc;

		if (len > MAX_CHUNK)
			abort(); /* the callback refused it: never offered */
		dst = malloc(len ? len : 1);
		if (!dst)
			break;
		rc = l2_read(l2, &r->loc, g->ns[i], &r->key, dst, len);
		if (rc == 0 && kvrec_sum(dst, len, 0) != r->raw_sum)
			abort(); /* served bytes that are not the chunk's */
		free(dst);
	}
	l2_close(l2);
out:
	free(seg);
	free(g);
	rm_dir(dir);
	return 0;
}
