/*
 * fuzz_ioctl - every ioctl argument struct of include/kvfs.h through the
 * daemon's own validation (fs_ioctl_check, fs/fs_ioctl.c), which runs on
 * the bytes a caller passes before anything else sees them. The first
 * byte picks the command (one of kvfs's, or a foreign one, or one with a
 * wrong size or direction), the rest is the argument, sized exactly (so
 * ASan sees any read past it). Also: an accepted argument has the size
 * and version the header claims.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "kvfs.h"
#include "fs/fs.h"
#include "fs/fs_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int cmds[] = {
		KVFS_IOC_LOOKUP, KVFS_IOC_GROUP_LOOKUP, KVFS_IOC_UNPIN,
		KVFS_IOC_HANDLE, KVFS_IOC_HANDLE_RELEASE,
		KVFS_IOC_GET, KVFS_IOC_PUT, KVFS_IOC_GET_SMALL,
		KVFS_IOC_PUT_SMALL,
		_IOW(KVFS_IOC_MAGIC, 1, struct kvfs_lookup),
		_IOWR(KVFS_IOC_MAGIC, 2, struct kvfs_lookup),
		_IOWR(KVFS_IOC_MAGIC, 9, struct kvfs_xfer),
		_IOWR(KVFS_IOC_MAGIC, 11, struct kvfs_unpin),
		_IOWR(KVFS_IOC_MAGIC, 0, struct kvfs_unpin),
		0x5401 /* TCGETS */,
	};
	const size_t ncmd = sizeof(cmds) / sizeof(cmds[0]);
	unsigned int cmd;
	size_t want;
	uint8_t *arg;
	int rc;

	if (size < 1)
		return 0;
	cmd = cmds[data[0] % ncmd];
	want = _IOC_SIZE(cmd);
	/* the struct, its header from the input, the rest from the input
	 * as far as it goes: a short input keeps a valid-looking header */
	arg = calloc(1, want ? want : 1);
	if (!arg)
		return 0;
	if (want >= 8 && (data[0] & 0x80)) {
		uint32_t hdr[2] = { KVFS_ABI_VERSION, (uint32_t)want };

		memcpy(arg, hdr, sizeof(hdr));
		memcpy(arg + 8, data + 1, size - 1 < want - 8 ? size - 1 :
		       want - 8);
	} else {
		memcpy(arg, data + 1, size - 1 < want ? size - 1 : want);
	}
	rc = fs_ioctl_check(cmd, arg, want, want);
	if (rc == 0) {
		uint32_t hdr[2];

		memcpy(hdr, arg, sizeof(hdr));
		if (hdr[0] != KVFS_ABI_VERSION || hdr[1] != want)
			abort();
	} else if (rc != -EINVAL && rc != -ENOTTY) {
		abort();
	}
	/* a size other than the command's own is always refused */
	if (want > 1 && fs_ioctl_check(cmd, arg, want - 1, want) == 0)
		abort();
	free(arg);
	return 0;
}
