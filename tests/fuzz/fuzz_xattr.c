/*
 * fuzz_xattr - values of the attributes a process may set
 * (user.kvfs.chunk_bytes, dtype, parent, depth, pin, and unknown names)
 * through the daemon's own parser (fs_xattr_value_check, fs/fs_xattr.c).
 * The first byte picks the name; the value is the rest, exactly sized (no
 * NUL: setxattr values are bytes). Only 0, EINVAL or ENOTSUP come back.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvfs.h"
#include "fs/fs.h"
#include "fs/fs_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		KVFS_XATTR_CHUNK_BYTES, KVFS_XATTR_DTYPE, KVFS_XATTR_PARENT,
		KVFS_XATTR_DEPTH, KVFS_XATTR_PIN, KVFS_XATTR_TIER,
		"user.other",
	};
	char *v;
	int r;

	if (size < 1)
		return 0;
	v = malloc(size - 1 ? size - 1 : 1);
	if (!v)
		return 0;
	memcpy(v, data + 1, size - 1);
	r = fs_xattr_value_check(names[data[0] % 7], v, size - 1);
	if (r != 0 && r != -EINVAL && r != -ENOTSUP)
		abort();
	if (r == -ENOTSUP && data[0] % 7 < 5)
		abort(); /* a settable name refused as unknown */
	free(v);
	return 0;
}
