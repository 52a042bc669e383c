/*
 * kvfs.h - the public interface of kvfs, a FUSE filesystem for LLM KV caches.
 *
 * This header is the manual. It holds:
 *   1. prefix keys: how a chunk's file name is computed (libkvfs, no mount);
 *   2. the file protocol's names: xattrs, the control directory;
 *   3. the ioctl ABI: one fixed-size struct per ioctl, each under 16 KiB as
 *      FUSE's restricted ioctls require, each starting with version + size;
 *   4. the client library (libkvfs): namespace open, lookup, put, get, leases,
 *      handles, written on top of plain syscalls on a mounted kvfs.
 *
 * Conventions: every function that can fail returns 0 (or a count) on
 * success and a negative errno on failure; none of them sets errno. All
 * functions are thread-safe unless a comment says otherwise; they keep no
 * global state.
 */
#ifndef KVFS_H
#define KVFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVFS_VERSION_STRING "0.1.0"

/* ======================================================================
 * 1. Prefix keys
 * ====================================================================== */

/*
 * A chunk key: the canonical (big-endian) form of an XXH3-128 hash, i.e.
 * the high 64 bits first, most significant byte first. Its file name is the
 * 32 lowercase hex digits of these 16 bytes.
 */
struct kvfs_key {
	uint8_t b[16];
};

#define KVFS_KEY_HEX_LEN 32 /* characters, without the NUL */

/*
 * kvfs_key_chunk - the key of one chunk, chained on the key of the previous.
 *
 * key = XXH3-128(seed) over, in order:
 *   prev   16 bytes: the canonical key of chunk i-1, or 16 zero bytes for
 *          chunk 0 (prev == NULL);
 *   elen   4 bytes little-endian: the length of extra;
 *   extra  elen bytes (may be empty: extra == NULL and extra_len == 0). It
 *          separates LoRA adapters, multimodal inputs, and so on;
 *   tokens ntokens x 4 bytes, each token id as little-endian uint32.
 *
 * Returns 0, or -EINVAL if out is NULL, or tokens is NULL with ntokens > 0,
 * or extra is NULL with extra_len > 0.
 */
int kvfs_key_chunk(const struct kvfs_key *prev, uint64_t seed,
		   const void *extra, uint32_t extra_len,
		   const uint32_t *tokens, size_t ntokens,
		   struct kvfs_key *out);

/*
 * kvfs_keys - the keys of every complete chunk of a token sequence.
 *
 * Splits tokens into chunks of chunk_tokens tokens and writes the chained key
 * of each complete chunk to out (at most max keys). A trailing partial chunk
 * gets no key. Returns the number of keys written (>= 0), or -EINVAL when
 * chunk_tokens is 0 or a pointer is NULL where data is needed.
 */
long kvfs_keys(const uint32_t *tokens, size_t ntokens, size_t chunk_tokens,
	       uint64_t seed, const void *extra, uint32_t extra_len,
	       struct kvfs_key *out, size_t max);

/* kvfs_key_hex - writes the 32 lowercase hex digits of key and a NUL. */
void kvfs_key_hex(const struct kvfs_key *key, char out[KVFS_KEY_HEX_LEN + 1]);

/*
 * kvfs_key_parse - parses a chunk file name.
 * Accepts exactly 32 lowercase hex digits (len == 32). Returns 0, or -EINVAL
 * for any other length or character (uppercase included: names are
 * canonical, so a key has exactly one name).
 */
int kvfs_key_parse(const char *name, size_t len, struct kvfs_key *out);

/* ======================================================================
 * 2. The file protocol's names
 * ====================================================================== */

/* Per-chunk xattrs (read-only unless noted). Values are ASCII text. */
#define KVFS_XATTR_TIER "user.kvfs.tier"                 /* l1 | l2 */
#define KVFS_XATTR_HITS "user.kvfs.hits"                 /* decimal */
#define KVFS_XATTR_ATIME "user.kvfs.atime"               /* ns since epoch */
#define KVFS_XATTR_REFS "user.kvfs.refs"                 /* open/pin count */
#define KVFS_XATTR_STORED_BYTES "user.kvfs.stored_bytes" /* after compression */
#define KVFS_XATTR_CHECKSUM "user.kvfs.checksum"         /* 16 hex, XXH3-64 */
#define KVFS_XATTR_PARENT "user.kvfs.parent" /* key hex; writer may set */
#define KVFS_XATTR_DEPTH "user.kvfs.depth"   /* decimal; writer may set */
#define KVFS_XATTR_PIN "user.kvfs.pin"       /* 0|1; settable */

/* Per-namespace xattrs (settable on the namespace directory). */
#define KVFS_XATTR_CHUNK_BYTES "user.kvfs.chunk_bytes" /* decimal, 0 = any */
#define KVFS_XATTR_DTYPE "user.kvfs.dtype" /* bf16|fp16|fp32|fp8 */

/* Control directory at the mount root. */
#define KVFS_CTL_DIR ".kvfs"
#define KVFS_CTL_STATS ".kvfs/stats" /* JSON */

/* Namespace names: 1..KVFS_NS_NAME_MAX bytes, no '/', not starting with '.' */
#define KVFS_NS_NAME_MAX 127

/* ======================================================================
 * 3. ioctl ABI
 *
 * Every argument struct starts with `version` (KVFS_ABI_VERSION) and `size`
 * (sizeof the struct as the caller compiled it); a mismatch fails with
 * -EINVAL before anything else is looked at. Unused fields must be zero.
 * Ioctls on the wrong kind of fd fail with ENOTTY.
 * ====================================================================== */

#define KVFS_ABI_VERSION 1
#define KVFS_IOC_MAGIC 0xCF

/* Most keys one lookup call takes; longer chains go in several calls. */
#define KVFS_LOOKUP_MAX 512
/* Most namespaces (tensor-parallel ranks) one group lookup names. */
#define KVFS_GROUP_MAX 16
/* Group lookup takes fewer keys so the struct stays under 16 KiB. */
#define KVFS_GROUP_KEYS_MAX 384

/* Lookup flags */
#define KVFS_LOOKUP_PIN 0x1u      /* pin the leading run under a lease */
#define KVFS_LOOKUP_PREFETCH 0x2u /* promote its L2 part into L1 */

/*
 * KVFS_IOC_LOOKUP, on a namespace directory fd.
 *
 * In:  keys[0..nkeys) a chain (key i is the child of key i-1), 1 <= nkeys <=
 *      KVFS_LOOKUP_MAX; flags; lease_ms (0 = the mount's lease_ms) with PIN.
 *      depth_base: the depth of keys[0] (its index in the whole chain, for
 *      callers that split a long chain into several calls).
 * Out: found = length of the leading run present (stops at the first
 *      missing key), in_l1 + in_l2 == found, and with PIN a lease id (> 0)
 *      that holds every chunk of the run pinned until KVFS_IOC_UNPIN, the
 *      lease expires, or this fd is closed. A run of length 0 takes no lease
 *      (lease_id = 0). Each found key's depth and parent are recorded for
 *      the prefix eviction policy.
 * Errors: EINVAL (version/size/nkeys/flags), EACCES (caller may not read the
 *      namespace), ENOTTY (not a namespace directory), ENOSPC (too many
 *      leases).
 */
struct kvfs_lookup {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nkeys;
	uint32_t lease_ms;
	uint32_t depth_base;
	/* out */
	uint32_t found;
	uint32_t in_l1;
	uint32_t in_l2;
	uint32_t reserved;
	uint64_t lease_id;
	struct kvfs_key keys[KVFS_LOOKUP_MAX];
};

/*
 * KVFS_IOC_GROUP_LOOKUP, on the mount root or any namespace directory fd.
 *
 * In:  nns namespace names (1..KVFS_GROUP_MAX; NUL-terminated, relative to
 *      the mount root), one chain of nkeys keys looked up in each of them,
 *      flags and lease_ms as for KVFS_IOC_LOOKUP.
 * Out: found = the longest leading run that every namespace has; with PIN,
 *      that run is pinned in every namespace under one lease.
 * Errors: as KVFS_IOC_LOOKUP, plus ENOENT when a named namespace does not
 *      exist (missing[i] = 1 says which).
 */
struct kvfs_group_lookup {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nkeys;
	uint32_t nns;
	uint32_t lease_ms;
	/* out */
	uint32_t found;
	uint32_t reserved;
	uint64_t lease_id;
	uint8_t missing[KVFS_GROUP_MAX];
	char ns[KVFS_GROUP_MAX][KVFS_NS_NAME_MAX + 1];
	struct kvfs_key keys[KVFS_GROUP_KEYS_MAX];
};

/*
 * KVFS_IOC_UNPIN, on any directory fd of the mount.
 * Releases a lease. Errors: ENOENT for an unknown or expired lease id.
 */
struct kvfs_unpin {
	uint32_t version;
	uint32_t size;
	uint64_t lease_id;
};

/* Handle kinds */
#define KVFS_HANDLE_HOST_MMAP 1 /* mmap the chunk fd (PROT_READ) */
#define KVFS_HANDLE_CUDA_IPC 2  /* cudaIpcOpenMemHandle(ipc) + offset */

/*
 * KVFS_IOC_HANDLE, on a chunk fd opened for reading.
 * Pins the chunk until KVFS_IOC_HANDLE_RELEASE or the fd is closed, and says
 * how to reach its bytes without a copy through FUSE:
 *   HOST_MMAP: mmap(fd, length, PROT_READ, MAP_PRIVATE) maps the chunk;
 *   CUDA_IPC:  ipc is a cudaIpcMemHandle_t of the arena holding the chunk on
 *              device `device`; the chunk is at [offset, offset + length).
 * Errors: ENOTTY (not a chunk fd), EBUSY (a handle is already taken on this
 * fd), ENOENT (chunk vanished).
 */
struct kvfs_handle {
	uint32_t version;
	uint32_t size;
	/* out */
	uint32_t kind;
	int32_t device;
	uint64_t offset;
	uint64_t length;
	uint64_t handle_id;
	uint8_t ipc[64];
};

/* KVFS_IOC_HANDLE_RELEASE, on the chunk fd: unpins what KVFS_IOC_HANDLE
 * pinned. Errors: ENOENT when no handle is held on this fd. */
struct kvfs_handle_release {
	uint32_t version;
	uint32_t size;
	uint64_t handle_id;
};

#define KVFS_IOC_LOOKUP _IOWR(KVFS_IOC_MAGIC, 1, struct kvfs_lookup)
#define KVFS_IOC_GROUP_LOOKUP _IOWR(KVFS_IOC_MAGIC, 2, struct kvfs_group_lookup)
#define KVFS_IOC_UNPIN _IOWR(KVFS_IOC_MAGIC, 3, struct kvfs_unpin)
#define KVFS_IOC_HANDLE _IOWR(KVFS_IOC_MAGIC, 4, struct kvfs_handle)
#define KVFS_IOC_HANDLE_RELEASE _IOWR(KVFS_IOC_MAGIC, 5, struct kvfs_handle_release)

_Static_assert(sizeof(struct kvfs_lookup) < 16384, "restricted ioctl");
_Static_assert(sizeof(struct kvfs_group_lookup) < 16384, "restricted ioctl");

#ifdef __cplusplus
}
#endif
#endif /* KVFS_H */
