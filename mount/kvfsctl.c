/* kvfsctl - the operator's and tester's command line for kvfs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvfs.h"
#include "mount/ctl.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} cmds[] = {
	{ "hash", ctl_hash, "token ids in, chunk keys out" },
	{ "replay", ctl_replay, "a cache trace through the engine, per policy" },
	{ "stats", ctl_stats, "the mount's .kvfs/stats, for people or as JSON" },
	{ "top", ctl_top, "a live view of the mount, refreshed every second" },
	{ "lookup", ctl_lookup, "how much of a chain of keys is cached, where" },
	{ "pin", ctl_pin, "pin a chain's leading run under a lease" },
	{ "unpin", ctl_unpin, "give a lease back" },
	{ "prefetch", ctl_prefetch, "promote a chain's L2 and L3 parts into L1" },
	{ "l3", ctl_l3, "l3 drop: delete a namespace from the shared L3" },
	{ "events", ctl_events, "subscribe to KV events and print them" },
	{ "score", ctl_score, "score chains per node from KV events" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: kvfsctl COMMAND [OPTIONS] [ARGS]\n"
		"       kvfsctl COMMAND --help\n"
		"       kvfsctl --version\n\ncommands:\n");
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].what);
}

/* What was written to stdout reached it: a full disk or a closed pipe is a
 * failure (exit 1 with a message), not a silent success, as coreutils'
 * close_stdout. Returns rc, or 1 after the message. */
static int stdout_done(const char *cmd, int rc)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	fprintf(stderr, "%s: write error%s%s\n", cmd, errno ? ": " : "",
		errno ? strerror(errno) : "");
	return 1;
}

int main(int argc, char **argv)
{
	char name[64];

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return stdout_done("kvfsctl", 0);
	}
	if (!strcmp(argv[1], "--version")) {
		printf("kvfsctl %s\n", KVFS_VERSION_STRING);
		return stdout_done("kvfsctl", 0);
	}
	for (size_t i = 0; i < NCMDS; i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		/* getopt's messages say "kvfsctl SUB: ..." */
		snprintf(name, sizeof(name), "kvfsctl %s", cmds[i].name);
		argv[1] = name;
		return stdout_done(name, cmds[i].fn(argc - 1, argv + 1));
	}
	fprintf(stderr, "kvfsctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
