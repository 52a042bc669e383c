/*
 * xxh_fast.h - XXH3-64 of large inputs (chunks, L2 and L3 records)
 * through libxxhash's entry points dispatched at run time
 * (xxh_x86dispatch.h: AVX-512 or AVX2 where the CPU has them) instead of
 * the copy compiled in with the build's flags, which on x86-64 is SSE2.
 * The same hashes. 256 KiB on the 2-core VM of issue 26: compiled in
 * 9-13 GB/s, dispatched 21-48 GB/s (a quarter of a PUT's daemon CPU was
 * the compiled-in checksum). Short inputs (keys, names) stay compiled in:
 * a call costs more than their hash.
 *
 * Include after <xxhash.h> (XXH_INLINE_ALL); link -lxxhash. Only x86-64
 * builds of libxxhash made with its DISPATCH=1 have these (Debian's):
 * elsewhere, and where the Makefile's probe finds none
 * (KVFS_XXH_NO_DISPATCH), the compiled-in functions.
 * The state is the one XXH3_64bits_reset made (the same header and
 * layout): reset and digest stay compiled in.
 */
#ifndef KVFS_XXH_FAST_H
#define KVFS_XXH_FAST_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && !defined(KVFS_XXH_NO_DISPATCH)
uint64_t XXH3_64bits_dispatch(const void *in, size_t len);
uint64_t XXH3_64bits_withSeed_dispatch(const void *in, size_t len,
				       uint64_t seed);
int XXH3_64bits_update_dispatch(void *state, const void *in, size_t len);
#define xxh_fast(p, n) XXH3_64bits_dispatch((p), (n))
#define xxh_fast_seed(p, n, s) XXH3_64bits_withSeed_dispatch((p), (n), (s))
#define xxh_fast_update(st, p, n) \
	((void)XXH3_64bits_update_dispatch((st), (p), (n)))
#else
#define xxh_fast(p, n) XXH3_64bits((p), (n))
#define xxh_fast_seed(p, n, s) XXH3_64bits_withSeed((p), (n), (s))
#define xxh_fast_update(st, p, n) ((void)XXH3_64bits_update((st), (p), (n)))
#endif

#endif
