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

/* libkvfs is built with -fvisibility=hidden; what this header declares is
 * its API and is exported (lib/libkvfs.map lists it). */
#pragma GCC visibility push(default)

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

/*
 * kvfs_layer_keys - kvfs_keys of one layer's chain (kvfs(7) HAND-OFF):
 * a prefill engine that saves layer by layer publishes layer L's slice
 * of chunk i under key i of layer L's chain, so a decode engine can wait
 * for and read layer 0 while later layers are still being computed.
 * Each layer is a chain of its own: the chunk keys of kvfs_keys whose
 * extra is the caller's extra (extra_len bytes, may be empty) followed
 * by the 10 bytes KVFS_LAYER_TAG and layer as 4 bytes little-endian.
 * Returns the number of keys written, -EINVAL (as kvfs_keys), -ENOMEM.
 * Since libkvfs 0.2.
 */
#define KVFS_LAYER_TAG "kvfs.layer"
long kvfs_layer_keys(const uint32_t *tokens, size_t ntokens,
		     size_t chunk_tokens, uint64_t seed, const void *extra,
		     uint32_t extra_len, uint32_t layer, struct kvfs_key *out,
		     size_t max);

/*
 * kvfs_path_key - the key of a file of a path namespace: XXH3-128 (seed 0,
 * canonical big-endian bytes, as every key) of the len bytes of its path
 * below the namespace: the components joined by single '/', with no
 * leading or trailing '/', no "." or ".." component and no NUL; e.g.
 * "llama_0a1b2c3d4e5f_r0/abc/de_g0/abcde...f.bin". The same bytes the
 * names have on the mount (no Unicode normalization). Feed these keys to
 * kvfs_lookup, kvfs_group_lookup and the prefetch flag to look files up by
 * path. Returns 0, or -EINVAL (out NULL, or path NULL with len > 0).
 */
int kvfs_path_key(const char *path, size_t len, struct kvfs_key *out);

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
/* key hex; writer may set. Chain readahead (-o readahead=N) follows it:
 * a reader of a chunk gets its children promoted from L2/L3 ahead. */
#define KVFS_XATTR_PARENT "user.kvfs.parent"
#define KVFS_XATTR_DEPTH "user.kvfs.depth"   /* decimal; writer may set */
#define KVFS_XATTR_PIN "user.kvfs.pin"       /* 0|1; settable */

/* Per-namespace xattrs (settable on the namespace directory). */
#define KVFS_XATTR_CHUNK_BYTES "user.kvfs.chunk_bytes" /* decimal, 0 = any */
/* keys | paths: what names the namespace holds (kvfs(7) PATH NAMESPACES);
 * settable while the namespace is empty (else EBUSY) */
#define KVFS_XATTR_NAMES "user.kvfs.names"
/*
 * policy | never: whether the cache may evict a path namespace's files
 * (kvfs(7) EVICT=NEVER). never: files leave only when deleted (unlink,
 * rename over them); they still move from L1 to L2, never out of the
 * last tier, and writes past user.kvfs.quota_bytes fail with ENOSPC, as
 * on a full disk, until deletes make room. For engines whose disk tier
 * keeps its own index of what it wrote (LMCache's local disk backend).
 * Settable at any time on a path namespace (EINVAL on a key namespace,
 * or for another value); ENOSPC when the other evict=never namespaces'
 * quotas leave no room. Kept across a warm restart (with L2).
 */
#define KVFS_XATTR_EVICT "user.kvfs.evict"
/*
 * The byte quota of an evict=never namespace, decimal: its files'
 * bytes (published, and being written) stay at or below it. Setting
 * evict=never gives the largest allowed; set this after it to lower it
 * (or raise it). The quotas of all evict=never namespaces together stay
 * within half of the last tier (L2's size, or l1_size without L2):
 * EINVAL for more than that alone, ENOSPC when the others' leave less.
 * EINVAL, and ENODATA on get, while evict is policy. A quota below what
 * the namespace holds now is allowed: writes fail until deletes bring it
 * under. Kept across a warm restart (with L2).
 */
#define KVFS_XATTR_QUOTA_BYTES "user.kvfs.quota_bytes"
/* Longest path below a path namespace, in bytes (ENAMETOOLONG past it). */
#define KVFS_PATH_MAX 1024
#define KVFS_XATTR_DTYPE "user.kvfs.dtype" /* bf16|fp16|fp32|fp8 */
/* Tokens per chunk, decimal (0..4294967295, 0 = unset): reported only, as
 * block_size of the namespace's KV events (below). Kept across a restart
 * (with L2) like chunk_bytes; anything else is EINVAL. */
#define KVFS_XATTR_CHUNK_TOKENS "user.kvfs.chunk_tokens"

/*
 * KV events (mount option events=ENDPOINT): what a fleet router learns
 * about this node, in vLLM's wire format (vllm/distributed/kv_events.py).
 * Each ZeroMQ PUB message has three frames:
 *   topic    "kv@" NODE "@" NAMESPACE   (NODE: node=, default the host name)
 *   seq      8 bytes, big-endian: 0, 1, 2... per daemon, never reused
 *   payload  msgpack EventBatch [ts (float64 seconds), [event...], nil]
 * An event is a map {"type": TAG, field: value...} (events_format=map,
 * default) or an array [TAG, value...] (events_format=array), fields in
 * this order:
 *   "BlockStored":  block_hashes [h], parent_block_hash (h or nil),
 *                   token_ids [] (kvfs does not know them), block_size
 *                   (KVFS_XATTR_CHUNK_TOKENS), lora_id nil, medium,
 *                   lora_name nil
 *   "BlockRemoved": block_hashes [h], medium
 *   "AllBlocksCleared": (no fields; the topic says which namespace)
 * h is the key's last 8 bytes as a big-endian unsigned integer
 * (events_hash=u64, default) or the 16 key bytes (events_hash=bytes).
 * medium is where the chunk is (BlockStored) or was (BlockRemoved):
 * KVFS_EV_MEDIUM_GPU (L1 in CUDA memory), _CPU (host or pinned L1), _DISK
 * (L2), _REMOTE (L3, the Redis tier shared by nodes: stored once this
 * node's write succeeded, removed by an unlink or a corrupt value dropped;
 * a chunk leaving L1/L2 for L3 only is removed from the local medium).
 * Replay (events_replay=ENDPOINT, a ROUTER): send [identity, "",
 * start_seq (8 bytes BE)], receive [identity, "", seq, payload] for each
 * buffered batch with seq >= start_seq, then [identity, "", -1 (8 bytes
 * 0xff), ""]. Anyone who can connect to these sockets sees every
 * namespace's keys: their reach is the access control.
 */
#define KVFS_EV_MEDIUM_GPU "GPU"
#define KVFS_EV_MEDIUM_CPU "CPU"
#define KVFS_EV_MEDIUM_DISK "DISK"
#define KVFS_EV_MEDIUM_REMOTE "REMOTE"

/* Control directory at the mount root. */
#define KVFS_CTL_DIR ".kvfs"
#define KVFS_CTL_STATS ".kvfs/stats" /* JSON; .kvfs/metrics: the same
					* counters in Prometheus text. Each
					* is described in kvfs(7) COUNTERS;
					* per-namespace rows only for the
					* namespaces the reader may list */

/* Namespace names: 1..KVFS_NS_NAME_MAX bytes of UTF-8, no '/', not starting
 * with '.' (mkdir of any other name fails with EINVAL) */
#define KVFS_NS_NAME_MAX 127

/* ======================================================================
 * 3. ioctl ABI
 *
 * Every argument struct starts with `version` (KVFS_ABI_VERSION) and `size`
 * (sizeof the struct as the caller compiled it); a mismatch fails with
 * -EINVAL before anything else is looked at. Fields marked "out" are
 * ignored on input (a struct can be reused from an earlier call); reserved
 * fields are written as zero. Ioctls on the wrong kind of fd fail with
 * ENOTTY.
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
/* promote its L2 and L3 parts into L1 in the background, from the head of
 * the run, at most three quarters of L1 ahead (a longer run would evict
 * its own head) */
#define KVFS_LOOKUP_PREFETCH 0x2u
/* wait for the chain: see "Waiting" below; the timeout is in flags */
#define KVFS_LOOKUP_WAIT 0x4u
/* KVFS_IOC_LOOKUP only: the chain is in the caller's memory at keys_at,
 * up to KVFS_LOOKUP_AT_MAX keys, not in keys[] (see struct kvfs_lookup) */
#define KVFS_LOOKUP_KEYS_AT 0x8u
/* Most keys one KVFS_IOC_LOOKUP with KVFS_LOOKUP_KEYS_AT takes. */
#define KVFS_LOOKUP_AT_MAX 16384

/*
 * Waiting (the prefill -> decode hand-off; kvfs(7) HAND-OFF).
 * KVFS_IOC_LOOKUP with KVFS_LOOKUP_WAIT, and KVFS_IOC_GET with
 * KVFS_XFER_WAIT, carry a timeout in milliseconds in bits 8..31 of flags
 * (KVFS_WAIT_MS(ms), at most KVFS_WAIT_MS_MAX, about 4.6 hours), so the
 * structs keep their layout. Such a call returns as soon as the whole
 * chain asked for is present -- published on this node, or stored in L3
 * by any node -- or at the timeout with the leading run that is there
 * then: never an error for "not yet". A lookup then pins, prefetches and
 * reports as without WAIT; a GET copies every entry present (the entries
 * are waited on in order, as one chain; what is missing still is
 * -ENOENT). A publish on this node wakes the waiter at once; a store in
 * L3 by another node within about a round trip to Redis (notifications),
 * or at worst at the mount's wait_recheck_ms (kvfs-mount(8)).
 * While waiting nothing is pinned; the pins of a lookup with PIN are
 * ordinary lease pins, taken when the wait ends.
 * A timeout of 0 (with or without the flag) does not wait. Bits 8..31
 * without the flag: EINVAL.
 * More errors: EINTR (the caller got a signal while waiting: nothing is
 * held), EAGAIN (the chain is incomplete and the caller's uid already
 * has wait_max_uid waiters, or the mount wait_max: nothing waited; a
 * complete chain is still answered). KVFS_IOC_GROUP_LOOKUP does not wait.
 */
#define KVFS_WAIT_SHIFT 8
#define KVFS_WAIT_MS_MAX 0xffffffu
#define KVFS_WAIT_MS_MASK ((uint32_t)KVFS_WAIT_MS_MAX << KVFS_WAIT_SHIFT)
#define KVFS_WAIT_MS(ms) (((uint32_t)(ms) & KVFS_WAIT_MS_MAX) << KVFS_WAIT_SHIFT)
#define KVFS_WAIT_MS_OF(flags) ((uint32_t)(flags) >> KVFS_WAIT_SHIFT)

/*
 * KVFS_IOC_LOOKUP, on a namespace directory fd.
 *
 * In:  keys[0..nkeys) a chain (key i is the child of key i-1), 1 <= nkeys <=
 *      KVFS_LOOKUP_MAX; flags (PIN, PREFETCH, WAIT | KVFS_WAIT_MS(ms):
 *      see "Waiting" above); lease_ms (0 = the mount's lease_ms) with PIN:
 *      a caller other than root gets at most the mount's lease_ms, root at
 *      most 86400000 (24 h); with PIN the lease time granted is written
 *      back to lease_ms.
 *      depth_base: the depth of keys[0] (its index in the whole chain, for
 *      callers that split a long chain into several calls);
 *      depth_base + nkeys must fit in 32 bits (else EINVAL).
 *      With KVFS_LOOKUP_KEYS_AT the chain is not in keys[] but at address
 *      keys_at of the caller's memory, 1 <= nkeys <= KVFS_LOOKUP_AT_MAX
 *      (a restricted ioctl carries at most 16,383 bytes, fewer than
 *      1,024 keys: one round trip for a chain longer than
 *      KVFS_LOOKUP_MAX). With WAIT the whole chain is waited for. The
 *      daemon reads them with process_vm_readv(2), which needs what
 *      KVFS_IOC_GET needs of it (section 3b, "Who may": root has it; else
 *      the daemon's uid, and Yama's PR_SET_PTRACER). The chain is looked
 *      up KVFS_LOOKUP_MAX keys at a time, in order, as that many calls
 *      without the flag would be (each part one access time for the
 *      eviction policy), and stops at the first part found short; with
 *      PIN one lease holds the whole run.
 *      Errors of its own: EFAULT (keys_at..+16 * nkeys not readable),
 *      EPERM or ESRCH (the daemon may not read the caller's memory, or
 *      cannot see its pid: look up in parts of KVFS_LOOKUP_MAX instead),
 *      and from a daemon older than the flag, EINVAL.
 * Out: found = length of the leading run present (stops at the first
 *      missing key), in_l1 + in_l2 + in_l3 == found (in_l3: the part of
 *      the run found only in the shared L3 tier, asked in one pipelined
 *      round trip per L3 node; a daemon without L3 writes 0 there), and
 *      with PIN a lease id (> 0)
 *      that holds every chunk of the run pinned until KVFS_IOC_UNPIN, the
 *      lease expires, or this fd is closed. A run of length 0 takes no lease
 *      (lease_id = 0). Each found key's depth and parent are recorded for
 *      the prefix eviction policy. Only the fields before keys[] are
 *      written back. "Closed" means the open file's last close: dup'd and
 *      inherited fds share it, and a killed process's fds are closed by
 *      the kernel, which releases its leases.
 * Errors: EINVAL (version/size/nkeys/flags/depth_base), EACCES (caller may not read the
 *      namespace), ENOTTY (not a namespace directory), ENOSPC (too many
 *      leases: 65536 per mount, of which one user other than root may
 *      hold 16384), ENOENT (the namespace was removed); with WAIT also
 *      EINTR and EAGAIN ("Waiting" above).
 */
struct kvfs_lookup {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nkeys;
	uint32_t lease_ms;   /* in/out: 0 = the mount's; non-root capped at the
			      * mount's lease_ms, root at 86400000 */
	uint32_t depth_base;
	/* out */
	uint32_t found;
	uint32_t in_l1;
	uint32_t in_l2;
	uint32_t in_l3;      /* was reserved (0) before L3 */
	uint64_t lease_id;
	union {
		struct kvfs_key keys[KVFS_LOOKUP_MAX];
		uint64_t keys_at; /* with KVFS_LOOKUP_KEYS_AT: the chain's
				   * address in the caller's memory */
	};
};

/*
 * KVFS_IOC_GROUP_LOOKUP, on the mount root or any namespace directory fd.
 *
 * In:  nns namespace names (1..KVFS_GROUP_MAX; NUL-terminated, relative to
 *      the mount root), one chain of nkeys keys looked up in each of them,
 *      flags, lease_ms (capped and written back) and depth_base as for
 *      KVFS_IOC_LOOKUP.
 * Out: found = the longest leading run that every namespace has; with PIN,
 *      that run is pinned in every namespace under one lease.
 * Errors: as KVFS_IOC_LOOKUP (EACCES when any named namespace is not
 *      readable), plus ENOENT when a named namespace does not exist:
 *      the struct is still copied back, with missing[i] = 1 for each
 *      namespace i that is missing (and found = 0, lease_id = 0).
 */
struct kvfs_group_lookup {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nkeys;
	uint32_t nns;
	uint32_t lease_ms;   /* as in kvfs_lookup (capped, written back) */
	/* out */
	uint32_t found;
	uint32_t depth_base; /* in: as in kvfs_lookup (was reserved, 0) */
	uint64_t lease_id;
	uint8_t missing[KVFS_GROUP_MAX];
	char ns[KVFS_GROUP_MAX][KVFS_NS_NAME_MAX + 1];
	struct kvfs_key keys[KVFS_GROUP_KEYS_MAX];
};

/*
 * KVFS_IOC_UNPIN, on any directory fd of the mount (the root or a
 * namespace; not only the fd that took the lease).
 * Releases a lease. Errors: ENOENT for an unknown, expired or already
 * released lease id (and for 0), EPERM for a lease another uid took (root
 * may release any), ENOTTY on a non-directory fd.
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
 * In: kind 0 (the arena's own: CUDA_IPC for cuda L1, else HOST_MMAP) or
 * the kind wanted (CUDA_IPC also from pinned L1: the daemon DMAs the chunk
 * into the handle's device buffer; HOST_MMAP from any L1).
 * Pins the chunk until KVFS_IOC_HANDLE_RELEASE or the fd is closed, and says
 * how to reach its bytes without a copy through FUSE:
 *   HOST_MMAP: mmap(fd, length, PROT_READ, MAP_PRIVATE) maps the chunk;
 *   CUDA_IPC:  ipc is a cudaIpcMemHandle_t of a device buffer holding only
 *              this chunk (never the whole arena: see kvfs_cuda_open) on
 *              device `device`; the chunk is at [offset, offset + length).
 * Errors: ENOTTY (not a chunk fd), EBUSY (a handle is already taken on this
 * fd), ENOENT (chunk vanished, or unlinked and published again since the
 * fd was opened), EACCES (the caller may not read the namespace: checked
 * for the caller of the ioctl, not the opener of the fd), EINVAL (unknown
 * kind), EOPNOTSUPP (CUDA_IPC from a host arena), ENODATA (CUDA_IPC of a
 * chunk served from a temporary buffer), ENOSPC (the handles held already
 * take as much device memory as the arena; release some), ENOMEM or EIO
 * (the device could not allocate or copy the handle's buffer).
 */
struct kvfs_handle {
	uint32_t version;
	uint32_t size;
	/* in: 0 (the arena's own kind) or the kind wanted (see
	 * kvfs_handle_get_kind); out: the kind given */
	uint32_t kind;
	/* out */
	int32_t device;
	uint64_t offset;
	uint64_t length;
	uint64_t handle_id;
	uint8_t ipc[64];
};

/* KVFS_IOC_HANDLE_RELEASE, on the chunk fd: unpins what KVFS_IOC_HANDLE
 * pinned (handle_id 0 = the handle this fd holds). Errors: ENOENT when no
 * such handle is held on this fd. */
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

/*
 * KVFS_IOC_L3_DROP, on the mount root fd (`kvfsctl l3 drop NS`).
 * In:  ns, a namespace name (NUL-terminated; it need not exist on this
 *      node: L3 is shared, and rmdir of a namespace never touches it).
 * Deletes every chunk of namespace ns from the shared L3 tier (SCAN +
 * UNLINK on every Redis master): every node loses them from L3; copies in
 * this or any node's L1 and L2 stay. Synchronous; each round trip is
 * bounded (by l3_timeout_ms, at least 2 s).
 * Out: deleted, the number of chunks deleted from L3.
 * Errors: EINVAL (version, size, empty or bad name), EPERM (the caller is
 *      neither root nor the user who mounted), EOPNOTSUPP (no l3= on this
 *      mount), ENOTTY (not the mount root), EHOSTDOWN, ETIMEDOUT,
 *      ECONNREFUSED, EPROTO (a server could not finish: keys of the
 *      masters asked before it are deleted).
 */
struct kvfs_l3_drop {
	uint32_t version;
	uint32_t size;
	char ns[KVFS_NS_NAME_MAX + 1];
	uint64_t deleted;    /* out */
};
#define KVFS_IOC_L3_DROP _IOWR(KVFS_IOC_MAGIC, 16, struct kvfs_l3_drop)
/* ----------------------------------------------------------------------
 * 3b. Batched transfers (KVFS_IOC_GET / KVFS_IOC_PUT, fs/fs_xfer.c)
 *
 * Many chunks per ioctl, copied by the daemon straight between its arena
 * and the CALLER's memory with process_vm_readv/process_vm_writev on the
 * pid of the FUSE request: one copy per byte for GET (a PUT entry of 64
 * KiB or more bound for a host-memory L1 on x86-64 goes through a
 * cache-resident buffer of the daemon's, then into the arena with
 * streaming stores: faster than one copy into cold memory), no FUSE data
 * transfer, one round trip per batch. The arena is never mapped
 * into or exposed to the caller. On a namespace directory fd. Entries name chunks by key (a
 * namespace of 32-hex names); namespaces whose chunks have path names
 * will take a later entry form (another ioctl number), not this one.
 *
 * Who may: the caller's uid and groups must be allowed to read and search
 * (GET) or write and search (PUT) the namespace, as open(2) and creat(2)
 * of a chunk need (else the whole batch fails with EACCES), and
 * the daemon must be allowed to ptrace the caller (ptrace(2), "Ptrace
 * access mode checking"): it is when it has CAP_SYS_PTRACE (root normally
 * does); otherwise the caller must have the daemon's uid, no capability
 * the daemon lacks, and be dumpable, and where Yama's ptrace_scope is 1
 * it must name the daemon with prctl(PR_SET_PTRACER, daemon_pid)
 * (kvfs_mget/kvfs_mput do this by themselves, see there). Without that
 * the batch fails with EPERM.
 *
 * Entries: up to KVFS_XFER_MAX per call (the struct stays under FUSE's
 * 16 KiB restricted-ioctl limit); kvfs_mget/kvfs_mput split longer lists.
 * Each entry succeeds or fails alone, with its own result; a malformed
 * batch (version/size, nents 0 or > KVFS_XFER_MAX, unknown flags, a PUT
 * entry with a nonzero cap or offset, a key twice in one PUT) fails whole
 * with EINVAL before anything is done. Otherwise the ioctl returns 0 and
 * the entries' results say what happened; only the header and entries
 * come back.
 *
 * Results of an entry (result):
 *   GET  >= 0   bytes copied to [addr, addr + result)
 *        -ENOENT   a miss (not cached, or an L2 record failed its check)
 *        -EMSGSIZE the range does not fit cap (size still says the chunk's
 *                  size; nothing copied)
 *        -ERANGE   offset/length reach past the chunk's end (size says it)
 *        -EACCES   a path namespace's file (key of its path) whose mode
 *                  the caller may not read; one below a directory it may
 *                  not search is -ENOENT, as if absent (root with
 *                  CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH: neither;
 *                  without them, the mode bits as for any uid)
 *        -EFAULT   [addr, addr + n) is not writable memory of the caller
 *                  (unmapped, read-only): bytes before the fault may have
 *                  been written
 *        -ESTALE   KVFS_XFER_NAMED: the name of the key's path does not
 *                  show this publication now, or (KVFS_XFER_MTIME) not
 *                  the mtime the caller's stat saw (nothing copied)
 *   PUT  0         stored by this call
 *        -EEXIST   already published, or being written by another writer
 *                  (count it as stored: the bytes there are the key's)
 *        -EFBIG    length > the mount's max_chunk
 *        -EMSGSIZE length differs from the namespace's chunk_bytes
 *        -ENODATA  length 0: a chunk without bytes is never published
 *        -EFAULT   [addr, addr + length) is not readable memory of the
 *                  caller: nothing is published for this key
 *        -ENOSPC   L1 is full of pinned chunks and writers, and stayed
 *                  so for the mount's write_wait_ms (kvfs-mount(8))
 *   both -EINTR    not attempted: the caller got a signal during the batch,
 *                  so the daemon stopped early (it always does at least one
 *                  entry); send the entry again (kvfs_mget/kvfs_mput do)
 *        -ENOMEM, -EIO  the daemon's own trouble with this entry
 * GET copies a consistent chunk even while eviction runs: the chunk is
 * pinned for the copy, and a chunk only in L2 is read, verified and
 * promoted into L1 first. PUT allocates the chunk in L1, copies the
 * caller's bytes into it once, checksums them (XXH3-64, kept as
 * user.kvfs.checksum) and publishes it atomically: a failed copy never
 * publishes anything. Overlapping entries are allowed: PUT only reads its
 * sources; GET entries may be copied concurrently (the daemon spreads a
 * batch over its copy threads), so where two GET destinations overlap the
 * bytes there come from either entry, while every other byte of each
 * entry is its own and nothing outside the entries is written.
 *
 * Whole-batch errors (ioctl fails with errno): EINVAL (above), EACCES,
 * ENOTTY (not a namespace directory fd), ENOENT (namespace removed), EPERM
 * (the daemon may not access the caller's memory, see above), ESRCH (the
 * caller's pid is not visible to the daemon: another pid namespace),
 * EOPNOTSUPP (KVFS_XFER_DEVICE where L1 is host memory), ENODEV
 * (KVFS_XFER_DEVICE without a registered device buffer), EAGAIN (the
 * daemon already runs as many batches as it allows at once, half its FUSE
 * workers, so that a copy faulting on memory backed by this same mount
 * always finds a worker; nothing was done: send it again. kvfs_mget and
 * kvfs_mput retry by themselves, backing off, for up to about 10 s).
 * ---------------------------------------------------------------------- */

/* Most entries one KVFS_IOC_GET / KVFS_IOC_PUT call takes. */
#define KVFS_XFER_MAX 240

/* Batch flags */
/* GET: addr is an offset in the CUDA buffer this fd registered with
 * KVFS_IOC_XFER_REGISTER (cap bounded by its length), not a host
 * address: the daemon copies each chunk from its pinned or cuda L1
 * straight into the engine's device memory. */
#define KVFS_XFER_DEVICE 0x1u
/* GET: wait for the entries' keys first (see "Waiting", section 3) */
#define KVFS_XFER_WAIT 0x2u
/* GET, path namespaces only (elsewhere the batch is EINVAL): copy each
 * entry only where it is what open(2) of its path's name would read now.
 * Each entry's size is an input too: the st_ino that stat(2) of the name
 * gave. Once the chunk is pinned, an entry is -ESTALE (nothing copied)
 * when that name has another st_ino or shows another publication, when
 * a new version of it is being written (an open reads that one once its
 * writer closed, before it is published) or a rename onto it is being
 * copied. With the caller's own stat of the path this makes a GET by
 * kvfs_path_key read the file the kernel resolved, whatever mounts or
 * bind mounts the path went through (the caller's permissions are
 * checked as for every GET in a path namespace, in the same hold of the
 * daemon's lock): the preload library serves path namespaces so
 * (lib/preload/README.md). */
#define KVFS_XFER_NAMED 0x4u
/* GET, with KVFS_XFER_NAMED only (alone: EINVAL): each entry's result is
 * an input too: the st_mtim of that same stat, in nanoseconds since the
 * epoch, computed modulo 2^64 ((uint64_t)tv_sec * 1000000000 + tv_nsec,
 * as int64_t: times before 1678 or after 2262 wrap, and still match
 * themselves). The entry is also -ESTALE when the name's mtime is
 * another now: st_ino is shared by every version of a name (an O_TRUNC
 * rewrite keeps it), the mtime is its writer's, so this copies only the
 * version that stat showed. (Two versions given one mtime by utimensat
 * are not told apart.) kvfs_mget: io.result is that input, kept across
 * its resends. */
#define KVFS_XFER_MTIME 0x8u

struct kvfs_xfer_ent {
	struct kvfs_key key;
	uint64_t addr;   /* caller's address (or device offset, see flags) */
	uint64_t cap;    /* GET: bytes of room at addr; PUT: 0 */
	uint64_t offset; /* GET: first byte of the chunk wanted; PUT: 0 */
	uint64_t length; /* GET: bytes wanted, 0 = to the chunk's end;
			  * PUT: the chunk's size (bytes at addr) */
	/* out */
	int64_t result;  /* see above */
	uint64_t size;   /* GET: the chunk's size when known, else 0 */
};

/*
 * KVFS_IOC_GET / KVFS_IOC_PUT, on a namespace directory fd.
 * In:  nents entries (1..KVFS_XFER_MAX), flags (GET: 0, KVFS_XFER_DEVICE,
 *      KVFS_XFER_WAIT | KVFS_WAIT_MS(ms); PUT: 0); PUT entries: cap and
 *      offset 0.
 * Out: done = entries whose result is >= 0 (GET) or 0 / -EEXIST (PUT);
 *      bytes = bytes copied in all; daemon_pid = the daemon's pid (the
 *      ptracer to name with prctl(PR_SET_PTRACER)), also written back when
 *      the batch fails with EPERM; each entry's result and size.
 */
struct kvfs_xfer {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nents;
	/* out */
	uint32_t done;
	int32_t daemon_pid;
	uint64_t bytes;
	struct kvfs_xfer_ent ents[KVFS_XFER_MAX];
};

/*
 * KVFS_IOC_XFER_REGISTER, on a namespace directory fd, where L1 is pinned
 * or cuda memory: registers the engine's device buffer (its KV pool) for
 * KVFS_XFER_DEVICE GETs on this open file. ipc is a cudaIpcMemHandle_t of
 * a cudaMalloc allocation of the engine's of at least length bytes on
 * device `device` (the daemon's numbering). The daemon opens it once
 * (cudaIpcOpenMemHandle) and keeps it open until the fd is closed or
 * another buffer is registered (length 0 unregisters); it holds no device
 * memory of its own per chunk. Out: buffer_id (> 0).
 * Errors: EINVAL (version/size, length 0 with an ipc, reserved),
 * EOPNOTSUPP (L1 is host memory), EACCES (caller may not read the
 * namespace), EIO (the handle could not be opened: not a live buffer).
 */
struct kvfs_xfer_register {
	uint32_t version;
	uint32_t size;
	int32_t device;
	uint32_t reserved;
	uint64_t length;
	uint8_t ipc[64];
	/* out */
	uint64_t buffer_id;
};

#define KVFS_IOC_GET _IOWR(KVFS_IOC_MAGIC, 6, struct kvfs_xfer)
#define KVFS_IOC_PUT _IOWR(KVFS_IOC_MAGIC, 7, struct kvfs_xfer)
/*
 * The same calls for batches of at most KVFS_XFER_SMALL_MAX entries, in a
 * struct of that many (struct kvfs_xfer_small: the same header and
 * entries, size = sizeof(struct kvfs_xfer_small), 544 bytes): FUSE
 * copies a restricted ioctl's whole struct into the kernel and on to the
 * daemon (with room for as much back), and the 15,392 bytes of struct
 * kvfs_xfer made a one-entry GET of 4 KiB a third slower (22 against
 * 15 us a round trip, docs/transfers.md).
 * kvfs_mget/kvfs_mput use these for batches of KVFS_XFER_SMALL_MAX or
 * fewer by themselves (and the long form where a daemon older than them
 * answers ENOTTY).
 * Everything else as KVFS_IOC_GET / KVFS_IOC_PUT; nents above
 * KVFS_XFER_SMALL_MAX is EINVAL.
 */
#define KVFS_XFER_SMALL_MAX 8
struct kvfs_xfer_small {
	uint32_t version;
	uint32_t size;
	uint32_t flags;
	uint32_t nents;
	/* out */
	uint32_t done;
	int32_t daemon_pid;
	uint64_t bytes;
	struct kvfs_xfer_ent ents[KVFS_XFER_SMALL_MAX];
};
#define KVFS_IOC_GET_SMALL _IOWR(KVFS_IOC_MAGIC, 9, struct kvfs_xfer_small)
#define KVFS_IOC_PUT_SMALL _IOWR(KVFS_IOC_MAGIC, 10, struct kvfs_xfer_small)
#define KVFS_IOC_XFER_REGISTER \
	_IOWR(KVFS_IOC_MAGIC, 8, struct kvfs_xfer_register)

/* C++ (and CUDA .cu) engines include this header too. */
#ifdef __cplusplus
#define KVFS_STATIC_ASSERT static_assert
#else
#define KVFS_STATIC_ASSERT _Static_assert
#endif
KVFS_STATIC_ASSERT(sizeof(struct kvfs_lookup) < 16384, "restricted ioctl");
KVFS_STATIC_ASSERT(sizeof(struct kvfs_group_lookup) < 16384,
		   "restricted ioctl");
KVFS_STATIC_ASSERT(sizeof(struct kvfs_xfer) <= 16000, "restricted ioctl");
/* the small form is the long one's prefix */
KVFS_STATIC_ASSERT(offsetof(struct kvfs_xfer_small, ents) ==
		   offsetof(struct kvfs_xfer, ents), "kvfs_xfer_small");

/* ======================================================================
 * 4. Client library (libkvfs)
 *
 * Thin wrappers over open/read/write/ioctl on a mounted kvfs; link with
 * -lkvfs (pkg-config kvfs). They keep no state between calls: every
 * function is thread-safe, and any number of threads may share one
 * namespace fd. Functions return 0 (or a count) or a negative errno and
 * never set errno. File descriptors they return belong to the caller
 * (close them with close(2)); they are opened O_CLOEXEC.
 * ====================================================================== */

/* kvfs_ns_open flags */
#define KVFS_NS_CREATE 0x1u /* mkdir the namespace first (EEXIST is fine) */

/*
 * kvfs_mount_open - an fd of the mount root (for group lookups and unpin).
 * Returns the fd, or -errno of open(2) (-ENOENT, -ENOTDIR, -EACCES...).
 */
int kvfs_mount_open(const char *mountpoint);

/*
 * kvfs_ns_open - an fd of namespace ns under the mount (a directory fd:
 * the target of kvfs_lookup, kvfs_put, kvfs_get).
 * flags: 0 or KVFS_NS_CREATE (then mode, e.g. 0755, is the new
 * directory's mode before the umask).
 * Returns the fd, or -EINVAL (NULL or bad name: empty, '/' in it, a
 * leading '.', longer than KVFS_NS_NAME_MAX), -ENOENT (no such namespace
 * and no KVFS_NS_CREATE), or another -errno of mkdir(2)/open(2).
 */
int kvfs_ns_open(const char *mountpoint, const char *ns, unsigned flags,
		 unsigned mode);

/*
 * kvfs_chunk_open - opens the chunk key of namespace fd nsfd for reading.
 * The open pins the chunk (it is never evicted under the reader) until the
 * fd is closed. Returns the fd, or -ENOENT (not cached: a miss),
 * -EACCES, another -errno of openat(2).
 */
int kvfs_chunk_open(int nsfd, const struct kvfs_key *key);

/* kvfs_exists - 1 when key is published in nsfd's namespace, 0 when not,
 * or -errno (-EACCES...). Not an access for the eviction policy. */
int kvfs_exists(int nsfd, const struct kvfs_key *key);

/*
 * kvfs_put - writes and publishes a chunk: writes all len bytes to a
 * temporary name in the namespace (".put.<pid>.<random>"), closes it, and
 * renames it onto key, which publishes it atomically.
 * Returns 0; -EEXIST when the key is already published (not an error for
 * a cache: the bytes are there); -EFBIG (len > the mount's max_chunk),
 * -ENOSPC (L1 full of pinned chunks and writers for the mount's
 * write_wait_ms; a failed write is reported again by the close, and
 * nothing is published), -EMSGSIZE (len differs from the
 * namespace's chunk_bytes), -ENODATA (len 0: a chunk without bytes is
 * never published), or another -errno of openat/write/close/
 * renameat. On any failure the temporary is unlinked: a partial chunk is
 * never published.
 */
int kvfs_put(int nsfd, const struct kvfs_key *key, const void *buf,
	     size_t len);

/*
 * kvfs_get - reads a whole chunk into buf (len bytes of room).
 * Returns the chunk's size in bytes (>= 0), -ENOENT (a miss), -ENOBUFS
 * (the chunk is larger than len; nothing useful in buf), or another -errno
 * of openat/statx/read. The size comes from statx(STATX_SIZE), which the
 * kernel answers from the attributes the lookup gave it: open, reads and
 * the release are the only requests a get sends to the daemon.
 */
long kvfs_get(int nsfd, const struct kvfs_key *key, void *buf, size_t len);

/* Most leases one kvfs_lookup / kvfs_group_lookup call takes: a chain
 * longer than one ioctl is looked up in several, each with its own lease. */
#define KVFS_RESULT_LEASES 16

/*
 * The result of a (group) lookup. found: the leading run present (in
 * every namespace for a group); in_l1 + in_l2 + in_l3 == found for
 * kvfs_lookup (a group lookup does not report tiers: all are 0; in_l3 is
 * last so the struct's earlier layout is unchanged). With
 * KVFS_LOOKUP_PIN, leases[0..nleases) hold the run pinned: give them back with kvfs_release (or kvfs_unpin
 * each), or they expire after lease_ms, or when the fd used is closed.
 * missing[i] = 1 when group namespace i does not exist (-ENOENT).
 * lease_ms: with PIN and nleases > 0, the lease time the daemon granted
 * (after the caps of KVFS_IOC_LOOKUP's lease_ms: the leases expire that
 * long after the call); 0 otherwise. It sits in what was the struct's
 * tail padding, so sizeof and every earlier offset are unchanged; a
 * libkvfs from before it leaves it 0.
 */
struct kvfs_result {
	uint32_t found;
	uint32_t in_l1;
	uint32_t in_l2;
	uint32_t nleases;
	uint64_t leases[KVFS_RESULT_LEASES];
	uint8_t missing[KVFS_GROUP_MAX];
	uint32_t in_l3;
	uint32_t lease_ms;   /* granted with PIN; was tail padding */
};
/* the layout libkvfs 0.1 callers were built with */
KVFS_STATIC_ASSERT(sizeof(struct kvfs_result) == 168, "kvfs_result ABI");
KVFS_STATIC_ASSERT(offsetof(struct kvfs_result, lease_ms) == 164,
		   "kvfs_result ABI");

/*
 * kvfs_lookup - the leading run of the chain keys[0..nkeys) cached in
 * nsfd's namespace, in as few KVFS_IOC_LOOKUP calls as possible: a chain
 * longer than KVFS_LOOKUP_MAX goes by address (KVFS_LOOKUP_KEYS_AT, one
 * call per KVFS_LOOKUP_AT_MAX keys); where the daemon refuses that (EPERM,
 * ESRCH, or EINVAL from an older daemon) this call and every later one of
 * the process send the keys, one call per KVFS_LOOKUP_MAX. It stops at the
 * first call that finds less than it asked for. depth_base is the depth of
 * keys[0] in the whole prompt (0 when keys start at the first chunk).
 * flags: KVFS_LOOKUP_PIN, KVFS_LOOKUP_PREFETCH. lease_ms: 0 = the mount's.
 * res: filled (zeroed first); may be NULL without PIN.
 * Returns found (>= 0), or -EINVAL (nkeys 0, unknown flags, PIN with more
 * than KVFS_RESULT_LEASES * KVFS_LOOKUP_MAX keys or res NULL), -EACCES,
 * -ENOTTY (nsfd is not a namespace directory of a kvfs mount), -ENOSPC
 * (too many leases). On error no lease is left held.
 */
long kvfs_lookup(int nsfd, const struct kvfs_key *keys, size_t nkeys,
		 uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		 struct kvfs_result *res);

/*
 * kvfs_lookup_wait - kvfs_lookup that waits (the decode side of a
 * prefill -> decode hand-off, kvfs(7) HAND-OFF): returns as soon as the
 * whole chain is present (published on this node or stored in L3 by any
 * node), or after timeout_ms (at most KVFS_WAIT_MS_MAX) with the leading
 * run present then: a partial run is an answer, not an error. With
 * KVFS_LOOKUP_PIN the run is pinned when the wait ends (normal leases).
 * One deadline covers every ioctl of a chain longer than
 * KVFS_LOOKUP_MAX. Where the daemon refuses to let one more waiter in
 * (EAGAIN: mount options wait_max, wait_max_uid) it backs off (50 us to
 * 5 ms) and asks again until the timeout.
 * Returns found, -EINTR (a signal arrived while waiting: no lease is
 * left held; call again to go on waiting), or the errors of kvfs_lookup.
 * timeout_ms 0 is kvfs_lookup. Since libkvfs 0.2 (KVFS_0.2).
 */
long kvfs_lookup_wait(int nsfd, const struct kvfs_key *keys, size_t nkeys,
		      uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		      uint32_t timeout_ms, struct kvfs_result *res);

/*
 * Path namespaces (kvfs(7) PATH NAMESPACES): the same lookups by path.
 * A path is relative to the namespace, canonical as kvfs_path_key says
 * (components joined by one '/', none empty, "." or ".."; at most
 * KVFS_PATH_MAX bytes, components at most 255). A lookup (and a GET) by
 * path key reaches a file only as its name does for the caller: the run
 * stops at a file below a directory the caller may not search (the
 * namespace's own included), as at an absent one, and a wait for it
 * lasts as long (kvfs(7) PATH NAMESPACES).
 *
 * kvfs_path_keys - the keys of paths[0..n) into out. Returns n, -EINVAL
 * (a NULL, empty or non-canonical path), -ENAMETOOLONG.
 *
 * kvfs_lookup_paths - kvfs_lookup on the keys of the paths: the leading
 * run of paths[0..n) that nsfd's namespace holds (files closed but not
 * yet published are published first, so a lookup sees every closed
 * file). flags KVFS_LOOKUP_PIN and KVFS_LOOKUP_PREFETCH as there.
 * Returns found, the errors of kvfs_path_keys, or those of kvfs_lookup.
 *
 * kvfs_group_lookup_paths - kvfs_group_lookup_at on the keys of the
 * paths: the run every namespace holds under the same paths (ranks whose
 * engine puts the rank in the path, as vLLM's "_r<rank>" directory does,
 * need a namespace per rank with that part of the path above it).
 */
long kvfs_path_keys(const char *const *paths, size_t n, struct kvfs_key *out);
long kvfs_lookup_paths(int nsfd, const char *const *paths, size_t n,
		       uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		       struct kvfs_result *res);
long kvfs_group_lookup_paths(int fd, const char *const *ns, size_t nns,
			     const char *const *paths, size_t n,
			     uint32_t depth_base, unsigned flags,
			     uint32_t lease_ms, struct kvfs_result *res);

/*
 * kvfs_group_lookup - the leading run that every one of nns namespaces
 * (tensor-parallel ranks, 1..KVFS_GROUP_MAX names relative to the mount
 * root) holds for the same chain; with KVFS_LOOKUP_PIN that run is pinned
 * in every namespace. fd: the mount root or any namespace fd. Chains
 * longer than KVFS_GROUP_KEYS_MAX take several calls (and leases).
 * Returns found (>= 0), -ENOENT with res->missing[] set when a namespace
 * does not exist, or the errors of kvfs_lookup.
 */
long kvfs_group_lookup(int fd, const char *const *ns, size_t nns,
		       const struct kvfs_key *keys, size_t nkeys,
		       unsigned flags, uint32_t lease_ms,
		       struct kvfs_result *res);

/* kvfs_group_lookup_at - kvfs_group_lookup of a chain whose first key is
 * at depth depth_base of the prompt (as kvfs_lookup's depth_base; 0 when
 * keys start at the first chunk, which is what kvfs_group_lookup does). */
long kvfs_group_lookup_at(int fd, const char *const *ns, size_t nns,
			  const struct kvfs_key *keys, size_t nkeys,
			  uint32_t depth_base, unsigned flags,
			  uint32_t lease_ms, struct kvfs_result *res);

/* kvfs_unpin - releases one lease (fd: any directory fd of the mount).
 * Returns 0, -ENOENT (unknown, expired or already released), -EPERM
 * (another user's lease). */
int kvfs_unpin(int fd, uint64_t lease_id);

/* kvfs_release - releases every lease in res and sets nleases to 0.
 * Returns 0 or the first error (-ENOENT for a lease that expired). */
int kvfs_release(int fd, struct kvfs_result *res);

/*
 * kvfs_handle_get - takes a zero-copy handle on chunk fd (from
 * kvfs_chunk_open): pins the chunk until kvfs_handle_put or close(fd).
 * h->kind says how to reach the bytes (KVFS_HANDLE_HOST_MMAP: use
 * kvfs_handle_map; KVFS_HANDLE_CUDA_IPC: cudaIpcOpenMemHandle(h->ipc) on
 * h->device, the chunk at h->offset, h->length bytes).
 * Returns 0, -ENOTTY (not a chunk fd), -EBUSY (a handle is already held on
 * this fd), -ENOENT (the chunk vanished), -EACCES.
 */
int kvfs_handle_get(int fd, struct kvfs_handle *h);

/*
 * kvfs_handle_get_kind - kvfs_handle_get asking for a kind: 0 = the
 * arena's own (as kvfs_handle_get); KVFS_HANDLE_HOST_MMAP on any L1 (the
 * fd is mmap-able everywhere); KVFS_HANDLE_CUDA_IPC on cuda L1, and on
 * pinned L1, where the daemon DMAs the chunk from its page-locked arena
 * into a device buffer of its own, so the engine gets the bytes on the
 * GPU at PCIe speed without staging them itself. Errors: as
 * kvfs_handle_get, -EINVAL (unknown kind), -EOPNOTSUPP (CUDA_IPC from a
 * host L1), -ENOSPC (handle buffers already use as much device memory as
 * the arena), -ENODATA (the chunk is served from a temporary buffer: L1
 * is full of pinned chunks).
 */
int kvfs_handle_get_kind(int fd, uint32_t kind, struct kvfs_handle *h);

/* kvfs_handle_put - releases the handle taken on fd. 0 or -ENOENT. */
int kvfs_handle_put(int fd, const struct kvfs_handle *h);

/*
 * kvfs_handle_map - maps a HOST_MMAP handle's chunk read-only
 * (MAP_PRIVATE): *addr points at h->length bytes until kvfs_handle_unmap.
 * The mapping stays valid after close(fd). Returns 0, -EINVAL (not a
 * HOST_MMAP handle, or length 0), or -errno of mmap(2).
 */
int kvfs_handle_map(int fd, const struct kvfs_handle *h, const void **addr);
void kvfs_handle_unmap(const void *addr, const struct kvfs_handle *h);

/* ----------------------------------------------------------------------
 * 4a. Batched transfers (lib/client_xfer.c): KVFS_IOC_GET / KVFS_IOC_PUT
 * ---------------------------------------------------------------------- */

/* One chunk of a kvfs_mget / kvfs_mput. */
struct kvfs_io {
	struct kvfs_key key;
	void *buf;       /* GET: where the bytes go; PUT: where they are
			  * (only read) */
	size_t len;      /* GET: bytes of room at buf; PUT: the chunk's size */
	uint64_t offset; /* GET: first byte of the chunk wanted; PUT: 0 */
	uint64_t length; /* GET: bytes wanted, 0 = to the chunk's end;
			  * PUT: ignored (len is the size) */
	/* out */
	int64_t result;  /* as kvfs_xfer_ent.result (section 3b): GET bytes
			  * copied or -ENOENT/-EMSGSIZE/-ERANGE/-EFAULT...;
			  * PUT 0 or -EEXIST (both: stored), -EFBIG... */
	uint64_t size;   /* GET: the chunk's size when it was found */
};

/*
 * kvfs_mget - copies the chunks (or byte ranges of them) io[0..n) of
 * nsfd's namespace into the caller's buffers, KVFS_XFER_MAX entries per
 * KVFS_IOC_GET (1,000 chunks: 5 ioctls). Each entry gets its own result;
 * entries the daemon left undone because a signal arrived (-EINTR) are
 * sent again. Buffers may be any memory of this process (page-locked
 * included; kvfs_buf_alloc's, below, copy fastest); unmapped or
 * read-only ones give that entry -EFAULT.
 * flags: 0 (KVFS_XFER_DEVICE: see kvfs_mget_device), or KVFS_XFER_NAMED
 * (section 3b; path namespaces): then io[i].size is read too, as the
 * st_ino of the name the caller stat'ed, and an entry the name no longer
 * shows is -ESTALE; with KVFS_XFER_NAMED | KVFS_XFER_MTIME io[i].result
 * is read too, as that stat's st_mtim in ns (an entry whose name shows
 * another version now is -ESTALE).
 * Permission: when the daemon first answers EPERM (it does not run as
 * root and Yama restricts ptrace), this calls
 * prctl(PR_SET_PTRACER, daemon_pid) -- replacing any ptracer this process
 * named before -- and tries once more.
 * Returns the number of entries that succeeded (result >= 0), or a
 * whole-batch -errno: -EINVAL (n 0, io NULL, an entry with buf NULL and
 * len > 0), -EACCES, -ENOTTY, -EPERM, -ESRCH (kvfs.h 3b). After a
 * -errno, entries of earlier ioctls keep their results; the others are
 * set to that -errno.
 */
long kvfs_mget(int nsfd, struct kvfs_io *io, size_t n, unsigned flags);

/*
 * kvfs_buf_alloc - memory for the buffers of kvfs_mget and kvfs_mput:
 * len bytes rounded up to a multiple of 2 MiB, aligned to 2 MiB, in
 * transparent huge pages where the kernel has them (MADV_HUGEPAGE; THP
 * "always" or "madvise"), populated and zeroed now, private to this
 * process. Any memory works for a transfer; this makes it about twice
 * as fast: the daemon copies with process_vm_writev / process_vm_readv,
 * which pin each page of the caller's they touch and copy page by page,
 * 512 pins per 2 MiB of 4 KiB pages against one for a huge page (5 GB/s
 * against 10 GB/s here, docs/performance.md "Batched transfers"). Where
 * THP is off the memory is 4 KiB pages: as right, not faster.
 * Returns the buffer, or NULL with errno EINVAL (len 0 or past
 * SIZE_MAX / 2) or ENOMEM. Since libkvfs 0.3.
 */
void *kvfs_buf_alloc(size_t len);

/*
 * kvfs_buf_free - unmaps a buffer of kvfs_buf_alloc; len is the length
 * it was asked with. Returns 0 (also for buf NULL), -EINVAL (len 0 or
 * too large, buf not 2 MiB-aligned: not one of kvfs_buf_alloc's). Since
 * libkvfs 0.3.
 */
int kvfs_buf_free(void *buf, size_t len);

/*
 * kvfs_mget_wait - kvfs_mget that first waits (at most timeout_ms, one
 * deadline for every ioctl) until the entries' keys are present, taken
 * in order as a chain (KVFS_XFER_WAIT), then copies what is there; an
 * entry still missing at the timeout gets -ENOENT. flags: 0 or
 * KVFS_XFER_DEVICE. Returns as kvfs_mget, or -EINTR (a signal arrived
 * while waiting; entries of earlier ioctls keep their results). Since
 * libkvfs 0.2.
 */
long kvfs_mget_wait(int nsfd, struct kvfs_io *io, size_t n, unsigned flags,
		    uint32_t timeout_ms);

/*
 * kvfs_mput - publishes the chunks io[0..n) (io[i].len bytes at
 * io[i].buf each) in nsfd's namespace, KVFS_XFER_MAX per KVFS_IOC_PUT:
 * each is allocated in L1, copied once from buf, checksummed and
 * published atomically, or not at all. Returns the number of entries
 * stored (result 0 or -EEXIST), or a whole-batch -errno as kvfs_mget;
 * -EINVAL also when a key appears twice in io (nothing is done).
 */
long kvfs_mput(int nsfd, struct kvfs_io *io, size_t n);

/*
 * kvfs_xfer_register - registers a CUDA buffer of this process (its KV
 * pool) for kvfs_mget_device on nsfd: ipc is its cudaIpcMemHandle_t
 * (cudaIpcGetMemHandle), length its size, device the daemon's device
 * number (usually the same as yours). One buffer per open nsfd (a second
 * call replaces it; length 0 unregisters). Returns 0, -EOPNOTSUPP (L1
 * is host memory), -EIO (the daemon could not open the handle), -EINVAL.
 */
int kvfs_xfer_register(int nsfd, const void *ipc, size_t length,
		       int device);

/*
 * kvfs_mget_device - kvfs_mget into the registered CUDA buffer: io[i].buf
 * is not an address but an offset in that buffer ((void *)(uintptr_t)
 * off), io[i].len the room there. The daemon copies from its pinned L1
 * (host-to-device DMA) or cuda L1 (device to device). -ENODEV when no
 * buffer is registered on nsfd, -EOPNOTSUPP on host L1.
 */
long kvfs_mget_device(int nsfd, struct kvfs_io *io, size_t n);

/* ----------------------------------------------------------------------
 * 4b. CUDA handles (lib/client_cuda.c)
 *
 * Opening a KVFS_HANDLE_CUDA_IPC handle in the engine's process. libkvfs
 * does not link the CUDA runtime: it loads libcudart at run time ($KVFS_CUDART,
 * a copy already loaded in the process, $CUDA_HOME/lib64, the loader path,
 * /usr/local/cuda/lib64), so it builds and runs where CUDA is absent.
 *
 * Isolation: the daemon never exports its L1 arena. Each handle is a device
 * buffer of its own holding one chunk (sized in 2 MiB units, the tail
 * zeroed), copied device to device from the arena when the handle is taken.
 * So a handle reaches exactly one chunk the caller could open, and writes
 * through it cannot change the cache. A released buffer is kept and used
 * again, with the same IPC handle, for a later chunk of the same size,
 * namespace, uid and gid only (never another user's or namespace's), and
 * libkvfs keeps its mapping of it open: the next handle costs no
 * cudaIpcOpenMemHandle. Do not read through a mapping after closing it.
 * ---------------------------------------------------------------------- */

/* An opened CUDA handle. */
struct kvfs_cuda_map {
	void *dptr;      /* device address of the chunk's first byte */
	uint64_t length; /* bytes of the chunk */
	int device;      /* device it is mapped on (this process's numbering) */
	void *priv;      /* the library's; do not touch */
};

/*
 * kvfs_cuda_probe - whether this process can use CUDA: loads the runtime
 * and counts devices. Returns the device count (> 0), or -ENODEV with a
 * one-line reason in err (when err is not NULL), e.g. "no CUDA driver
 * (cudaErrorInsufficientDriver: ...)" or "no CUDA runtime (libcudart: ...)".
 */
int kvfs_cuda_probe(char *err, size_t errlen);

/*
 * kvfs_cuda_open - maps the chunk of a KVFS_HANDLE_CUDA_IPC handle (from
 * KVFS_IOC_HANDLE / kvfs_handle_get) into this process:
 * m->dptr = cudaIpcOpenMemHandle(h->ipc) + h->offset, m->length =
 * h->length. device: where to map it, in this process's device numbering,
 * or -1 for h->device (right when the daemon and this process see the same
 * devices, e.g. the same CUDA_VISIBLE_DEVICES). The calling thread's
 * current device is left as it was.
 * Close it with kvfs_cuda_close BEFORE releasing the handle (kvfs_handle_put
 * or close of the chunk fd): the daemon may then copy the same owner's
 * next chunk into that buffer. Mappings are kept per process (up to 32,
 * an idle one closed after 10 s at a later call or when its place is
 * needed): opening a handle whose buffer this process has mapped already
 * costs no CUDA call. Thread-safe.
 * Returns 0; -EINVAL (h or m NULL, wrong version/size, no device);
 * -ENOTSUP (not a CUDA_IPC handle: mmap the chunk fd instead); -ENODEV (no
 * CUDA runtime, driver or such device here); -EIO (cudaIpcOpenMemHandle
 * failed, e.g. the handle was already released); -ENOMEM.
 */
int kvfs_cuda_open(const struct kvfs_handle *h, int device,
		   struct kvfs_cuda_map *m);

/* kvfs_cuda_close - ends what kvfs_cuda_open mapped and clears m (the
 * mapping itself may stay open for the buffer's next chunk, see above).
 * Returns 0, -EINVAL (m not open), or -EIO (cudaIpcCloseMemHandle). */
int kvfs_cuda_close(struct kvfs_cuda_map *m);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* KVFS_H */
