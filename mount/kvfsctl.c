/* kvfsctl - the operator's and tester's command line for kvfs. */
#include <stdio.h>
#include <string.h>

#include "kvfs.h"
#include "mount/ctl.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
} cmds[] = {
	{ "hash", ctl_hash,
	  "hash --chunk-tokens N [--seed S] [--extra STR] < tokens" },
	{ "replay", ctl_replay,
	  "replay --policy P|all --capacity N|P% [--chunk-bytes B] TRACE.jsonl" },
	{ "stats", ctl_stats, "stats [--json] MOUNTPOINT" },
	{ "lookup", ctl_lookup, "lookup [--paths] NSDIR < keys|paths" },
	{ "pin", ctl_pin,
	  "pin [--lease-ms MS] [--paths] NSDIR < keys|paths" },
	{ "unpin", ctl_unpin, "unpin NSDIR LEASE_ID" },
	{ "prefetch", ctl_prefetch, "prefetch [--paths] NSDIR < keys|paths" },
	{ "l3", ctl_l3, "l3 drop NAMESPACE MOUNTPOINT" },
	{ "events", ctl_events,
	  "events ENDPOINT [--json] [--from SEQ --replay EP] [--count N] [--duration-ms MS]" },
	{ "score", ctl_score,
	  "score --events EP1[,EP2] [--replay R1[,R2]] [--warmup-ms MS] [--weights M=W,...] [--json] < chains" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kvfsctl COMMAND [ARGS]\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  kvfsctl %s\n", cmds[i].usage);
	fprintf(f, "  kvfsctl --version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("kvfsctl %s\n", KVFS_VERSION_STRING);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "kvfsctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
