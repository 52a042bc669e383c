/*
 * fuzz_names - the names a process can give under a mount: namespace names
 * (fs_ns_name_check: mkdir, lookup) and names inside a namespace
 * (fs_chunk_name: a 32-hex key, a temporary starting with '.', or
 * EINVAL/ENAMETOOLONG), through the daemon's own functions (fs/fs_inode.c).
 * A name taken as a key must be exactly the 32 lowercase hex digits that
 * key formats to: two names can never mean one chunk.
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
	char *name = malloc(size + 1), hex[KVFS_KEY_HEX_LEN + 1];
	struct kvfs_key key;
	int r;

	if (!name)
		return 0;
	memcpy(name, data, size);
	name[size] = 0; /* the kernel hands names NUL-terminated */
	r = fs_ns_name_check(name);
	if (r != 0 && r != -EINVAL && r != -ENAMETOOLONG)
		abort();
	if (r == 0 && (name[0] == '.' || strlen(name) > KVFS_NS_NAME_MAX))
		abort();
	r = fs_chunk_name(name, &key);
	if (r == 0) {
		kvfs_key_hex(&key, hex);
		if (strcmp(hex, name))
			abort(); /* a key under two spellings */
	} else if (r == 1) {
		if (name[0] != '.')
			abort();
	} else if (r != -EINVAL && r != -ENAMETOOLONG) {
		abort();
	}
	free(name);
	return 0;
}
