/*
 * abi.c - the ABI of libkvfs.so.0, frozen: the size, alignment and every
 * member's offset of each struct of include/kvfs.h as they were when the
 * soname was set (x86-64 and other LP64 targets). A change that moves any
 * of them fails the build here; such a change needs a new soname
 * (LIB_SOVERSION in the Makefile) and a new version node in libkvfs.map.
 * A struct may grow only into fields the kernel and libkvfs already pass
 * as reserved (its size and version fields let the daemon tell).
 * Compiles to nothing.
 */
#include <stddef.h>

#include "kvfs.h"

#if defined(__LP64__)
#define ABI_SIZE(s, n, a)                                                   \
	_Static_assert(sizeof(struct s) == (n) && _Alignof(struct s) == (a), \
		       "ABI: size or alignment of struct " #s " changed")
#define ABI_AT(s, m, off)                                                   \
	_Static_assert(offsetof(struct s, m) == (off),                      \
		       "ABI: offset of " #s "." #m " changed")


ABI_SIZE(kvfs_key, 16, 1);
ABI_AT(kvfs_key, b, 0);

ABI_SIZE(kvfs_lookup, 8240, 8);
ABI_AT(kvfs_lookup, version, 0); ABI_AT(kvfs_lookup, size, 4);
ABI_AT(kvfs_lookup, flags, 8); ABI_AT(kvfs_lookup, nkeys, 12);
ABI_AT(kvfs_lookup, lease_ms, 16); ABI_AT(kvfs_lookup, depth_base, 20);
ABI_AT(kvfs_lookup, found, 24); ABI_AT(kvfs_lookup, in_l1, 28);
ABI_AT(kvfs_lookup, in_l2, 32); ABI_AT(kvfs_lookup, in_l3, 36);
ABI_AT(kvfs_lookup, lease_id, 40); ABI_AT(kvfs_lookup, keys, 48);
ABI_AT(kvfs_lookup, keys_at, 48);

ABI_SIZE(kvfs_group_lookup, 8248, 8);
ABI_AT(kvfs_group_lookup, version, 0); ABI_AT(kvfs_group_lookup, size, 4);
ABI_AT(kvfs_group_lookup, flags, 8); ABI_AT(kvfs_group_lookup, nkeys, 12);
ABI_AT(kvfs_group_lookup, nns, 16); ABI_AT(kvfs_group_lookup, lease_ms, 20);
ABI_AT(kvfs_group_lookup, found, 24);
ABI_AT(kvfs_group_lookup, depth_base, 28);
ABI_AT(kvfs_group_lookup, lease_id, 32);
ABI_AT(kvfs_group_lookup, missing, 40); ABI_AT(kvfs_group_lookup, ns, 56);
ABI_AT(kvfs_group_lookup, keys, 2104);

ABI_SIZE(kvfs_unpin, 16, 8);
ABI_AT(kvfs_unpin, version, 0); ABI_AT(kvfs_unpin, size, 4);
ABI_AT(kvfs_unpin, lease_id, 8);

ABI_SIZE(kvfs_handle, 104, 8);
ABI_AT(kvfs_handle, version, 0); ABI_AT(kvfs_handle, size, 4);
ABI_AT(kvfs_handle, kind, 8); ABI_AT(kvfs_handle, device, 12);
ABI_AT(kvfs_handle, offset, 16); ABI_AT(kvfs_handle, length, 24);
ABI_AT(kvfs_handle, handle_id, 32); ABI_AT(kvfs_handle, ipc, 40);

ABI_SIZE(kvfs_handle_release, 16, 8);
ABI_AT(kvfs_handle_release, version, 0); ABI_AT(kvfs_handle_release, size, 4);
ABI_AT(kvfs_handle_release, handle_id, 8);

ABI_SIZE(kvfs_l3_drop, 144, 8);
ABI_AT(kvfs_l3_drop, version, 0); ABI_AT(kvfs_l3_drop, size, 4);
ABI_AT(kvfs_l3_drop, ns, 8); ABI_AT(kvfs_l3_drop, deleted, 136);

ABI_SIZE(kvfs_xfer_ent, 64, 8);
ABI_AT(kvfs_xfer_ent, key, 0); ABI_AT(kvfs_xfer_ent, addr, 16);
ABI_AT(kvfs_xfer_ent, cap, 24); ABI_AT(kvfs_xfer_ent, offset, 32);
ABI_AT(kvfs_xfer_ent, length, 40); ABI_AT(kvfs_xfer_ent, result, 48);
ABI_AT(kvfs_xfer_ent, size, 56);

ABI_SIZE(kvfs_xfer, 15392, 8);
ABI_AT(kvfs_xfer, version, 0); ABI_AT(kvfs_xfer, size, 4);
ABI_AT(kvfs_xfer, flags, 8); ABI_AT(kvfs_xfer, nents, 12);
ABI_AT(kvfs_xfer, done, 16); ABI_AT(kvfs_xfer, daemon_pid, 20);
ABI_AT(kvfs_xfer, bytes, 24); ABI_AT(kvfs_xfer, ents, 32);

ABI_SIZE(kvfs_xfer_small, 544, 8);
ABI_AT(kvfs_xfer_small, version, 0); ABI_AT(kvfs_xfer_small, size, 4);
ABI_AT(kvfs_xfer_small, flags, 8); ABI_AT(kvfs_xfer_small, nents, 12);
ABI_AT(kvfs_xfer_small, done, 16); ABI_AT(kvfs_xfer_small, daemon_pid, 20);
ABI_AT(kvfs_xfer_small, bytes, 24); ABI_AT(kvfs_xfer_small, ents, 32);

ABI_SIZE(kvfs_xfer_register, 96, 8);
ABI_AT(kvfs_xfer_register, version, 0); ABI_AT(kvfs_xfer_register, size, 4);
ABI_AT(kvfs_xfer_register, device, 8);
ABI_AT(kvfs_xfer_register, reserved, 12);
ABI_AT(kvfs_xfer_register, length, 16); ABI_AT(kvfs_xfer_register, ipc, 24);
ABI_AT(kvfs_xfer_register, buffer_id, 88);

ABI_SIZE(kvfs_result, 168, 8);
ABI_AT(kvfs_result, found, 0); ABI_AT(kvfs_result, in_l1, 4);
ABI_AT(kvfs_result, in_l2, 8); ABI_AT(kvfs_result, nleases, 12);
ABI_AT(kvfs_result, leases, 16); ABI_AT(kvfs_result, missing, 144);
ABI_AT(kvfs_result, in_l3, 160); ABI_AT(kvfs_result, lease_ms, 164);

ABI_SIZE(kvfs_io, 64, 8);
ABI_AT(kvfs_io, key, 0); ABI_AT(kvfs_io, buf, 16); ABI_AT(kvfs_io, len, 24);
ABI_AT(kvfs_io, offset, 32); ABI_AT(kvfs_io, length, 40);
ABI_AT(kvfs_io, result, 48); ABI_AT(kvfs_io, size, 56);

ABI_SIZE(kvfs_cuda_map, 32, 8);
ABI_AT(kvfs_cuda_map, dptr, 0); ABI_AT(kvfs_cuda_map, length, 8);
ABI_AT(kvfs_cuda_map, device, 16); ABI_AT(kvfs_cuda_map, priv, 24);

#endif /* __LP64__ */
