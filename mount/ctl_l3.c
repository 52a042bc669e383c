/*
 * ctl_l3.c - `kvfsctl l3 drop NAMESPACE MOUNTPOINT`: deletes a namespace's
 * chunks from the shared L3 tier (KVFS_IOC_L3_DROP on the mount root). A
 * namespace's rmdir never touches L3 (other nodes may use it): this is
 * how an operator empties it there.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/ctl.h"

static int usage(void)
{
	fprintf(stderr, "usage: kvfsctl l3 drop NAMESPACE MOUNTPOINT\n");
	return 2;
}

int ctl_l3(int argc, char **argv)
{
	struct kvfs_l3_drop d;
	int fd, rc;

	if (argc != 4 || strcmp(argv[1], "drop"))
		return usage();
	if (!argv[2][0] || strlen(argv[2]) > KVFS_NS_NAME_MAX ||
	    strchr(argv[2], '/') || argv[2][0] == '.') {
		fprintf(stderr, "kvfsctl l3 drop: bad namespace name '%s'\n",
			argv[2]);
		return 2;
	}
	memset(&d, 0, sizeof(d));
	d.version = KVFS_ABI_VERSION;
	d.size = sizeof(d);
	snprintf(d.ns, sizeof(d.ns), "%s", argv[2]);
	fd = kvfs_mount_open(argv[3]);
	if (fd < 0) {
		fprintf(stderr, "kvfsctl l3 drop: %s: %s\n", argv[3],
			strerror(-fd));
		return 1;
	}
	rc = ioctl(fd, KVFS_IOC_L3_DROP, &d);
	if (rc < 0) {
		rc = errno;
		fprintf(stderr, "kvfsctl l3 drop: %s: %s%s\n", argv[3],
			strerror(rc),
			rc == ENOTTY ? " (not the root of a kvfs mount)" :
			rc == EOPNOTSUPP ? " (the mount has no l3=)" : "");
		close(fd);
		return 1;
	}
	close(fd);
	printf("%" PRIu64 " chunks of %s deleted from L3\n", d.deleted, d.ns);
	return 0;
}
