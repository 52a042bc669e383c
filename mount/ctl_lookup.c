/*
 * ctl_lookup.c - `kvfsctl lookup | pin | unpin | prefetch`: the engine
 * interface's ioctls for operators. Keys come from stdin as 32 hex digits
 * each, separated by whitespace (one per line is what `kvfsctl hash`
 * prints), in chain order; with --paths, paths of a path namespace, one
 * per line (their keys are kvfs_path_key's).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/ctl.h"
#include "mount/ctl_evsub.h"

/* Room in *keys (*cap entries, n used) for one more: 0, or -1 (the message
 * is printed; *keys is still the caller's to free). */
static int keys_room(struct kvfs_key **keys, size_t n, size_t *cap)
{
	size_t ncap = *cap ? 2 * *cap : 256;
	struct kvfs_key *k;

	if (n < *cap)
		return 0;
	k = realloc(*keys, ncap * sizeof(*k));
	if (!k) {
		perror("kvfsctl");
		return -1;
	}
	*keys = k;
	*cap = ncap;
	return 0;
}

/* Reads keys from f into a malloc'd array. Returns the count or -1 (the
 * message is printed). */
static long read_keys(FILE *f, const char *cmd, struct kvfs_key **out)
{
	struct kvfs_key *keys = NULL;
	size_t n = 0, cap = 0;
	char word[KVFS_KEY_HEX_LEN + 2];
	unsigned long long line = 1;
	size_t wl = 0;
	int c;

	do {
		c = getc(f);
		if (c != EOF && !isspace(c)) {
			if (wl <= KVFS_KEY_HEX_LEN)
				word[wl] = (char)tolower(c);
			wl++;
			continue;
		}
		if (wl) {
			if (wl != KVFS_KEY_HEX_LEN) {
				fprintf(stderr, "kvfsctl %s: line %llu: a key is 32 hex digits\n",
					cmd, line);
				goto err;
			}
			if (keys_room(&keys, n, &cap))
				goto err;
			word[KVFS_KEY_HEX_LEN] = '\0';
			if (kvfs_key_parse(word, KVFS_KEY_HEX_LEN, &keys[n]) < 0) {
				fprintf(stderr, "kvfsctl %s: line %llu: bad key '%s'\n",
					cmd, line, word);
				goto err;
			}
			n++;
			wl = 0;
		}
		if (c == '\n')
			line++;
	} while (c != EOF);
	if (ferror(f)) {
		fprintf(stderr, "kvfsctl %s: stdin: %s\n", cmd, strerror(errno));
		goto err;
	}
	if (n == 0) {
		fprintf(stderr, "kvfsctl %s: no keys on stdin\n", cmd);
		goto err;
	}
	*out = keys;
	return (long)n;

err:
	free(keys);
	return -1;
}

/* With --paths: one path per line (relative to the namespace, as
 * kvfs_path_key takes it; a line's bytes are the path, only the newline
 * ends it) into keys. Returns the count or -1 (the message is printed). */
static long read_paths(FILE *f, const char *cmd, struct kvfs_key **out)
{
	struct kvfs_key *keys = NULL;
	size_t n = 0, cap = 0, lcap = 0;
	char *line = NULL;
	unsigned long long lno = 0;
	ssize_t len;

	while ((len = getline(&line, &lcap, f)) >= 0) {
		const char *p = line;
		long rc;

		lno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (!len)
			continue;
		if ((size_t)len != strlen(line)) {
			fprintf(stderr, "kvfsctl %s: line %llu: a NUL in a "
				"path\n", cmd, lno);
			goto err;
		}
		if (keys_room(&keys, n, &cap))
			goto err;
		rc = kvfs_path_keys(&p, 1, &keys[n]);
		if (rc < 0) {
			fprintf(stderr, "kvfsctl %s: line %llu: %s\n", cmd, lno,
				rc == -ENAMETOOLONG ? "path too long" :
				"not a path below the namespace (empty, "
				"'.' or '..' component, leading or double '/')");
			goto err;
		}
		n++;
	}
	free(line);
	if (ferror(f)) {
		fprintf(stderr, "kvfsctl %s: stdin: %s\n", cmd, strerror(errno));
		goto err_nofree;
	}
	if (n == 0) {
		fprintf(stderr, "kvfsctl %s: no paths on stdin\n", cmd);
		goto err_nofree;
	}
	*out = keys;
	return (long)n;
err:
	free(line);
err_nofree:
	free(keys);
	return -1;
}

static int open_ns(const char *cmd, const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		fprintf(stderr, "kvfsctl %s: %s: %s\n", cmd, dir, strerror(errno));
	return fd;
}

static const char *lookup_err(int rc)
{
	switch (rc) {
	case -ENOTTY:
		return "not a kvfs namespace directory";
	case -EACCES:
		return "permission denied (the namespace is not readable)";
	default:
		return strerror(-rc);
	}
}

static volatile sig_atomic_t stop_hold;

static void on_signal(int sig)
{
	(void)sig;
	stop_hold = 1;
}

static const struct ctl_cmd CMD_LOOKUP = {
	"lookup", "lookup [--wait SECONDS] [--paths] [--json] NSDIR < keys|paths",
	"Prints how much of the chain of keys on stdin (32 hex digits each,\n"
	"whitespace-separated, in chain order) NSDIR holds, and in which tier.\n\n"
	"  --wait S    wait up to S seconds (e.g. 0.5) for the whole chain: as\n"
	"              soon as it is there (published here, or stored in L3\n"
	"              by any node), else at S with the run there then\n"
	"  --paths     stdin holds paths of a path namespace, one a line\n"
	"  --json      print the result as one JSON object\n",
};
static const struct ctl_cmd CMD_PIN = {
	"pin", "pin [--lease-ms MS] [--paths] [--json] NSDIR < keys|paths",
	"Looks the chain up as lookup does and pins its leading run under a\n"
	"lease, prints the lease ids and the lease time the daemon granted,\n"
	"and holds the lease (its fd) until it expires or SIGINT/SIGTERM\n"
	"(which give it back at once).\n\n"
	"  --lease-ms MS  lease time asked for (default: the mount's lease_ms;\n"
	"                 the daemon caps it: users other than root at the\n"
	"                 mount's lease_ms, root at 24 h)\n"
	"  --paths        stdin holds paths of a path namespace, one a line\n"
	"  --json         print the result as one JSON object\n",
};
static const struct ctl_cmd CMD_PREFETCH = {
	"prefetch", "prefetch [--paths] [--json] NSDIR < keys|paths",
	"Looks the chain up as lookup does and promotes the L2 and L3 parts of\n"
	"its leading run into L1 in the background.\n\n"
	"  --paths     stdin holds paths of a path namespace, one a line\n"
	"  --json      print the result as one JSON object\n",
};
static const struct ctl_cmd CMD_UNPIN = {
	"unpin", "unpin [--json] NSDIR LEASE_ID",
	"Gives back the lease LEASE_ID (from pin), taken in NSDIR's mount.\n\n"
	"  --json      print the result as one JSON object\n",
};

static void print_result(long found, long nkeys, const struct kvfs_result *res,
			 unsigned flags, bool json)
{
	bool pin = flags & KVFS_LOOKUP_PIN;

	if (json) {
		json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I}",
				      "found", (json_int_t)found,
				      "keys", (json_int_t)nkeys,
				      "l1", (json_int_t)res->in_l1,
				      "l2", (json_int_t)res->in_l2,
				      "l3", (json_int_t)res->in_l3);
		json_t *ls = pin ? json_array() : NULL;

		for (uint32_t i = 0; ls && i < res->nleases; i++)
			json_array_append_new(ls, json_integer(
					(json_int_t)res->leases[i]));
		if (o && pin) {
			json_object_set_new(o, "leases", ls);
			json_object_set_new(o, "lease_ms",
					    json_integer(res->lease_ms));
		}
		ctl_json_out(o, JSON_COMPACT);
		return;
	}
	printf("found=%ld keys=%ld l1=%u l2=%u l3=%u\n", found, nkeys,
	       res->in_l1, res->in_l2, res->in_l3);
	for (uint32_t i = 0; i < res->nleases; i++)
		printf("lease=%llu\n", (unsigned long long)res->leases[i]);
	if (pin && res->nleases)
		printf("lease_ms=%u\n", res->lease_ms);
	fflush(stdout);
}

/* Holds the leases of res (taken on fd) for ms, or until SIGINT/SIGTERM/
 * SIGHUP, which give them back at once: they die with the fd. */
static void hold_leases(const char *cmd, int fd, struct kvfs_result *res,
			unsigned ms)
{
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t end = evsub_now_ms() + ms;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	fprintf(stderr, "kvfsctl %s: holding for %u ms (Ctrl-C releases)\n",
		cmd, ms);
	while (!stop_hold && evsub_now_ms() < end) {
		struct timespec d = { 0, 50 * 1000000L };

		nanosleep(&d, NULL);
	}
	if (stop_hold)
		(void)kvfs_release(fd, res);
}

static int run_lookup(const struct ctl_cmd *cmd, int argc, char **argv,
		      unsigned flags)
{
	static const struct option opts[] = {
		{ "paths", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "lease-ms", required_argument, NULL, 'l' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long lease_ms = 0;
	uint32_t wait_ms = 0;
	char *end;
	double s;
	bool hold = flags & KVFS_LOOKUP_PIN, paths = false, json = false;
	const char *dir;
	struct kvfs_key *keys;
	struct kvfs_result res;
	long nkeys, found;
	int fd, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': paths = true; break;
		case 'j': json = true; break;
		case 'l':
			if (!hold)
				return ctl_usage_err(cmd, "--lease-ms is for pin");
			if (ctl_parse_count(optarg, &lease_ms) ||
			    lease_ms > UINT32_MAX)
				return ctl_usage_err(cmd, "bad --lease-ms '%s'",
						     optarg);
			break;
		case 'w':
			if (cmd != &CMD_LOOKUP)
				return ctl_usage_err(cmd, "--wait is for lookup");
			errno = 0;
			s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(s >= 0) ||
			    s * 1000 > KVFS_WAIT_MS_MAX)
				return ctl_usage_err(cmd, "bad --wait '%s' (seconds,"
						     " 0 to 16777)", optarg);
			wait_ms = (uint32_t)(s * 1000 + 0.5);
			break;
		case 'h': return ctl_help(cmd);
		default: return ctl_usage_err(cmd, NULL);
		}
	}
	if (optind >= argc)
		return ctl_usage_err(cmd, "NSDIR is required");
	if (optind + 1 < argc)
		return ctl_usage_err(cmd, "unexpected '%s' (keys come on stdin)",
				     argv[optind + 1]);
	dir = argv[optind];
	fd = open_ns(cmd->name, dir);
	if (fd < 0)
		return 1;
	nkeys = paths ? read_paths(stdin, cmd->name, &keys) :
			read_keys(stdin, cmd->name, &keys);
	if (nkeys < 0) {
		close(fd);
		return 1;
	}
	found = kvfs_lookup_wait(fd, keys, (size_t)nkeys, 0, flags,
				 (uint32_t)lease_ms, wait_ms, &res);
	free(keys);
	if (found == -EINVAL && hold &&
	    nkeys > (long)KVFS_RESULT_LEASES * KVFS_LOOKUP_MAX) {
		fprintf(stderr, "kvfsctl %s: %ld keys: a pin takes at most %d "
			"(KVFS_RESULT_LEASES leases of KVFS_LOOKUP_MAX)\n",
			cmd->name, nkeys, KVFS_RESULT_LEASES * KVFS_LOOKUP_MAX);
		close(fd);
		return 1;
	}
	if (found < 0) {
		fprintf(stderr, "kvfsctl %s: %s: %s\n", cmd->name, dir,
			lookup_err((int)found));
		close(fd);
		return 1;
	}
	print_result(found, nkeys, &res, flags, json);
	if (hold && res.nleases)
		hold_leases(cmd->name, fd, &res, res.lease_ms);
	close(fd);
	return 0;
}

int ctl_lookup(int argc, char **argv)
{
	return run_lookup(&CMD_LOOKUP, argc, argv, 0);
}

int ctl_pin(int argc, char **argv)
{
	return run_lookup(&CMD_PIN, argc, argv, KVFS_LOOKUP_PIN);
}

int ctl_prefetch(int argc, char **argv)
{
	return run_lookup(&CMD_PREFETCH, argc, argv, KVFS_LOOKUP_PREFETCH);
}

int ctl_unpin(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long id;
	bool json = false;
	int fd, rc, c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': return ctl_help(&CMD_UNPIN);
		default: return ctl_usage_err(&CMD_UNPIN, NULL);
		}
	}
	if (argc - optind != 2)
		return ctl_usage_err(&CMD_UNPIN, "NSDIR and LEASE_ID are "
				     "required");
	if (ctl_parse_count(argv[optind + 1], &id) || id == 0)
		return ctl_usage_err(&CMD_UNPIN, "bad LEASE_ID '%s'",
				     argv[optind + 1]);
	fd = open_ns("unpin", argv[optind]);
	if (fd < 0)
		return 1;
	rc = kvfs_unpin(fd, id);
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "kvfsctl unpin: %s: lease %llu: %s\n",
			argv[optind], id, rc == -ENOENT ? "no such lease "
			"(unknown, expired or released)" : lookup_err(rc));
		return 1;
	}
	if (json)
		return ctl_json_out(json_pack("{s:I}", "unpinned",
					      (json_int_t)id), JSON_COMPACT);
	printf("unpinned lease=%llu\n", id);
	return 0;
}
