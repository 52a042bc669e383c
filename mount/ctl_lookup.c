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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/ctl.h"

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

/* The mount's lease_ms, from "lease_ms":N in NSDIR/../.kvfs/stats, or
 * 30000 when it cannot be read. */
static unsigned mount_lease_ms(const char *nsdir)
{
	char path[4096], buf[16384];
	unsigned ms = 30000;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/../" KVFS_CTL_STATS, nsdir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ms;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return ms;
	buf[n] = '\0';
	p = strstr(buf, "\"lease_ms\":");
	if (p)
		ms = (unsigned)strtoul(p + 11, NULL, 10);
	return ms ? ms : 30000;
}

static volatile sig_atomic_t stop_hold;

static void on_signal(int sig)
{
	(void)sig;
	stop_hold = 1;
}

static int run_lookup(const char *cmd, int argc, char **argv, unsigned flags)
{
	unsigned long long lease_ms = 0;
	const char *dir = NULL;
	struct kvfs_key *keys;
	struct kvfs_result res;
	int hold = (flags & KVFS_LOOKUP_PIN) != 0, paths = 0;
	long nkeys, found;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--paths")) {
			paths = 1;
		} else if (hold && !strcmp(argv[i], "--lease-ms") &&
			   i + 1 < argc) {
			if (ctl_parse_count(argv[++i], &lease_ms) ||
			    lease_ms > UINT32_MAX) {
				fprintf(stderr, "kvfsctl %s: bad --lease-ms '%s'\n",
					cmd, argv[i]);
				return 2;
			}
		} else if (argv[i][0] != '-' && !dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "usage: kvfsctl %s%s [--paths] NSDIR "
				"< keys|paths\n", cmd,
				hold ? " [--lease-ms MS]" : "");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: kvfsctl %s%s [--paths] NSDIR "
			"< keys|paths\n", cmd, hold ? " [--lease-ms MS]" : "");
		return 2;
	}
	fd = open_ns(cmd, dir);
	if (fd < 0)
		return 1;
	nkeys = paths ? read_paths(stdin, cmd, &keys) :
			read_keys(stdin, cmd, &keys);
	if (nkeys < 0) {
		close(fd);
		return 1;
	}
	found = kvfs_lookup(fd, keys, (size_t)nkeys, 0, flags,
			    (uint32_t)lease_ms, &res);
	free(keys);
	if (found < 0) {
		fprintf(stderr, "kvfsctl %s: %s: %s\n", cmd, dir,
			lookup_err((int)found));
		close(fd);
		return 1;
	}
	printf("found=%ld keys=%ld l1=%u l2=%u l3=%u\n", found, nkeys,
	       res.in_l1, res.in_l2, res.in_l3);
	for (uint32_t i = 0; i < res.nleases; i++)
		printf("lease=%llu\n", (unsigned long long)res.leases[i]);
	fflush(stdout);
	if (hold && res.nleases) {
		/* The lease dies with this fd: hold it until it expires, or
		 * until SIGINT/SIGTERM (then give it back at once). */
		struct sigaction sa = { .sa_handler = on_signal };
		unsigned mount_ms = mount_lease_ms(dir);
		unsigned ms = lease_ms ? (unsigned)lease_ms : mount_ms;
		struct timespec end, now;

		/* the mount grants users other than root at most its
		 * lease_ms: hold no longer than the lease lives */
		if (geteuid() != 0 && mount_ms && ms > mount_ms)
			ms = mount_ms;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += ms / 1000;
		end.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (end.tv_nsec >= 1000000000L) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000L;
		}
		fprintf(stderr, "kvfsctl %s: holding for %u ms (Ctrl-C releases)\n",
			cmd, ms);
		while (!stop_hold) {
			struct timespec d = { 0, 50 * 1000000L };

			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > end.tv_sec ||
			    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
				break;
			nanosleep(&d, NULL);
		}
		if (stop_hold)
			(void)kvfs_release(fd, &res);
	}
	close(fd);
	return 0;
}

int ctl_lookup(int argc, char **argv)
{
	return run_lookup("lookup", argc, argv, 0);
}

int ctl_pin(int argc, char **argv)
{
	return run_lookup("pin", argc, argv, KVFS_LOOKUP_PIN);
}

int ctl_prefetch(int argc, char **argv)
{
	return run_lookup("prefetch", argc, argv, KVFS_LOOKUP_PREFETCH);
}

int ctl_unpin(int argc, char **argv)
{
	unsigned long long id;
	int fd, rc;

	if (argc != 3 || ctl_parse_count(argv[2], &id) || id == 0) {
		fprintf(stderr, "usage: kvfsctl unpin NSDIR LEASE_ID\n");
		return 2;
	}
	fd = open_ns("unpin", argv[1]);
	if (fd < 0)
		return 1;
	rc = kvfs_unpin(fd, id);
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "kvfsctl unpin: lease %llu: %s\n", id,
			rc == -ENOENT ? "no such lease (unknown, expired or released)" :
			strerror(-rc));
		return 1;
	}
	printf("unpinned lease=%llu\n", id);
	return 0;
}
