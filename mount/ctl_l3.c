/*
 * ctl_l3.c - `kvfsctl l3 drop NAMESPACE MOUNTPOINT`: deletes a namespace's
 * chunks from the shared L3 tier (KVFS_IOC_L3_DROP on the mount root). A
 * namespace's rmdir never touches L3 (other nodes may use it): this is
 * how an operator empties it there.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/ctl.h"

static const struct ctl_cmd CMD = {
	"l3", "l3 drop [--json] NAMESPACE MOUNTPOINT",
	"drop: deletes NAMESPACE's chunks from the mount's shared L3 tier\n"
	"(root or the mount's owner).\n\n"
	"  --json      print the result as one JSON object\n",
};

int ctl_l3(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct kvfs_l3_drop d;
	bool json = false;
	const char *ns, *mnt;
	int fd, rc, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (optind >= argc || strcmp(argv[optind], "drop"))
		return ctl_usage_err(&CMD, optind < argc ? "unknown l3 command "
				     "'%s'" : "an l3 command is required",
				     optind < argc ? argv[optind] : "");
	if (argc - optind != 3)
		return ctl_usage_err(&CMD, "NAMESPACE and MOUNTPOINT are "
				     "required");
	ns = argv[optind + 1];
	mnt = argv[optind + 2];
	if (!ns[0] || strlen(ns) > KVFS_NS_NAME_MAX || strchr(ns, '/') ||
	    ns[0] == '.')
		return ctl_usage_err(&CMD, "bad namespace name '%s'", ns);
	memset(&d, 0, sizeof(d));
	d.version = KVFS_ABI_VERSION;
	d.size = sizeof(d);
	snprintf(d.ns, sizeof(d.ns), "%s", ns);
	fd = kvfs_mount_open(mnt);
	if (fd < 0) {
		fprintf(stderr, "kvfsctl l3 drop: %s: %s\n", mnt,
			strerror(-fd));
		return 1;
	}
	rc = ioctl(fd, KVFS_IOC_L3_DROP, &d);
	if (rc < 0) {
		rc = errno;
		fprintf(stderr, "kvfsctl l3 drop: %s: %s%s\n", mnt,
			strerror(rc),
			rc == ENOTTY ? " (not the root of a kvfs mount)" :
			rc == EOPNOTSUPP ? " (the mount has no l3=)" : "");
		close(fd);
		return 1;
	}
	close(fd);
	if (json)
		return ctl_json_out(json_pack("{s:s, s:I}", "namespace", d.ns,
					      "deleted", (json_int_t)d.deleted),
				    JSON_COMPACT);
	printf("%" PRIu64 " chunks of %s deleted from L3\n", d.deleted, d.ns);
	return 0;
}
