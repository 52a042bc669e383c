/*
 * tier_arena.c - byte access to the L1 arena (host or GPU memory): write, read,
 * zero, move and checksum an extent, and what fs/ and libkvfs learn about
 * the arena (info, a chunk's offset, export for a zero-copy map).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/tier.h"
#if TIER_STREAM
#include <emmintrin.h>
#endif

#include "hash/hashkey.h"
#include "tier/tier_i.h"

/*
 * Writes of TIER_STREAM_MIN bytes or more into a host arena use streaming
 * (non-temporal) stores. What a writer hands the daemon goes to memory
 * that nobody has touched for a while (an extent of a GiB-sized arena):
 * a plain copy first reads each destination line into the cache (a read
 * for ownership) and leaves the chunk there, evicting what the daemon
 * works on; streaming stores write the lines whole, straight to memory.
 * Measured on the 2-core VM, 256 KiB into a 1 GiB THP arena from a
 * cached source: memcpy 26-28 us, streaming 16-17 us; 2 MiB 280 against
 * 140-145 us (docs/time.md, "Streaming stores into the arena"). Shorter
 * copies are too short to care, and may be read back at once (a path
 * file's small rewrite). glibc's memcpy streams only past its
 * non-temporal threshold, sized from the L3 (114 MiB on this host:
 * ld.so --list-tunables), and no Debian package offers a streaming copy
 * to call: written here, SSE2 (every x86-64), memcpy elsewhere.
 */
void tier_stream_copy(void *dst_, const void *src_, size_t len)
{
	char *dst = dst_;
	const char *src = src_;
#if TIER_STREAM
	size_t head = (size_t)(-(uintptr_t)dst & 15);

	if (len < TIER_STREAM_MIN) {
		memcpy(dst, src, len);
		return;
	}
	/* the destination 16-byte aligned for _mm_stream_si128 */
	memcpy(dst, src, head);
	dst += head;
	src += head;
	len -= head;
	for (; len >= 64; len -= 64, dst += 64, src += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
	/* streaming stores are weakly ordered: all of them before anything
	 * the caller stores next (the write's size, a publication under a
	 * lock that readers on other CPUs take). No test can see this line
	 * go: a reordering needs another CPU reading at the wrong moment */
	_mm_sfence();
	memcpy(dst, src, len);
#else
	memcpy(dst, src, len);
#endif
}

int tier_arena_write(struct tier *t, uint64_t off, const void *src,
		     size_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		tier_stream_copy((char *)t->arena.host + off, src, len);
		return 0;
	}
	return gpu_copy_in(&t->arena, off, src, len);
}

int tier_arena_read(struct tier *t, uint64_t off, void *dst, size_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		memcpy(dst, (const char *)t->arena.host + off, len);
		return 0;
	}
	return gpu_copy_out(&t->arena, off, dst, len);
}

int tier_arena_zero(struct tier *t, uint64_t off, uint64_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		memset((char *)t->arena.host + off, 0, len);
		return 0;
	}
	return gpu_zero(&t->arena, off, len);
}

/* Copies len bytes between two disjoint extents of the arena. */
int tier_arena_move(struct tier *t, uint64_t dst, uint64_t src, uint64_t len)
{
	char *buf;
	int rc = 0;

	if (!len)
		return 0;
	if (t->arena.host) {
		memcpy((char *)t->arena.host + dst,
		       (const char *)t->arena.host + src, len);
		return 0;
	}
	buf = malloc(1u << 20);
	if (!buf)
		return -ENOMEM;
	while (len && rc == 0) {
		size_t n = len < (1u << 20) ? len : (1u << 20);

		rc = gpu_copy_out(&t->arena, src, buf, n);
		if (rc == 0)
			rc = gpu_copy_in(&t->arena, dst, buf, n);
		src += n;
		dst += n;
		len -= n;
	}
	free(buf);
	return rc;
}

/* XXH3-64 of bytes in the arena (device arenas through a bounce buffer). */
int tier_arena_checksum(struct tier *t, uint64_t off, uint64_t len,
			uint64_t *sum)
{
	struct hashkey_sum *s;
	char *buf;
	int rc = 0;

	if (t->arena.host) {
		*sum = hashkey_checksum((const char *)t->arena.host + off, len);
		return 0;
	}
	/* its alignment (64: XXH3's state) is more than malloc's */
	s = aligned_alloc(_Alignof(struct hashkey_sum), sizeof(*s));
	buf = malloc(1u << 20);
	if (!s || !buf) {
		free(s);
		free(buf);
		return -ENOMEM;
	}
	hashkey_sum_init(s);
	while (len && rc == 0) {
		size_t n = len < (1u << 20) ? len : (1u << 20);

		rc = gpu_copy_out(&t->arena, off, buf, n);
		hashkey_sum_update(s, buf, n);
		off += n;
		len -= n;
	}
	*sum = hashkey_sum_final(s);
	free(s);
	free(buf);
	return rc;
}

void tier_arena_info(struct tier *t, struct tier_arena_info *info)
{
	info->kind = t->arena.handle_kind;
	info->device = t->arena.device;
	info->size = t->l1_cap;
	info->backend = t->arena.ops->name;
}

long long tier_chunk_offset(const struct tier_chunk *c)
{
	if (c->tmp || c->nobytes)
		return -ENODATA;
	return (long long)c->off;
}

int tier_arena_export(struct tier *t, const struct tier_chunk *c,
		      uint32_t uid, uint32_t gid, uint8_t ipc[64],
		      uint64_t *offset, void **cookie)
{
	struct gpu_export ex;
	int rc;

	*cookie = NULL;
	if (c->tmp)
		return -ENODATA;
	/* host: -ENOTSUP from the backend; pinned: a DMA into a buffer of
	 * its own; cuda: a device-to-device copy into one */
	if (!t->arena.ops->export_handle)
		return -ENOTSUP;
	/* c is pinned: its extent cannot move or be freed meanwhile. */
	memset(&ex, 0, sizeof(ex));
	ex.uid = uid;
	ex.gid = gid;
	ex.ns = c->rec ? c->rec->ns : 0;
	rc = gpu_export_range(&t->arena, c->off, c->size, &ex);
	if (rc < 0)
		return rc;
	memcpy(ipc, ex.ipc, sizeof(ex.ipc));
	*offset = ex.offset;
	*cookie = ex.cookie;
	return 0;
}

void tier_arena_unexport(struct tier *t, void *cookie)
{
	if (cookie)
		gpu_unexport(&t->arena, cookie);
}
