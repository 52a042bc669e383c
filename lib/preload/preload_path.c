/*
 * preload_path.c - where a file of a path namespace is, as the GET names
 * it (lib/preload/README.md, "Path namespaces"): the kvfs mounts of this
 * process (/proc/self/mountinfo: device, the mount's root in the file
 * system, its mount point) and, for a path an open names, the namespace
 * directory as this process reaches it and the path below it, canonical
 * as kvfs_path_key takes it.
 *
 * The split is lexical: a path with a "." or ".." component is not split
 * (the real open answers it). Whatever else could make the lexical path
 * name another file than the kernel's resolution (a mount or bind mount
 * inside the tree, one made after the table was read) is caught by the
 * GET itself: preload.c sends the st_ino of its stat of the path with
 * KVFS_XFER_NAMED, and the daemon copies nothing unless that name is the
 * file of that key now.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"

#define MNT_MAX 32 /* kvfs mounts remembered */

struct mnt {
	dev_t dev;
	char *root;   /* the mount's root in the file system: "/", "/ns"... */
	char *point;  /* where it is mounted, no trailing '/' but for "/" */
	size_t plen;
};

/* lock: the table; read to split a path, written to read mountinfo
 * again. Fork: the child gets a new one (atfork below). */
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct mnt tab[MNT_MAX];
static unsigned ntab;
static bool scanned;      /* tab was read at least once */
static time_t scanned_at; /* when, CLOCK_MONOTONIC seconds */

static void fork_prepare(void) { pthread_rwlock_wrlock(&lock); }
static void fork_parent(void) { pthread_rwlock_unlock(&lock); }
static void fork_child(void) { pthread_rwlock_init(&lock, NULL); }

__attribute__((constructor)) static void pl_path_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* mountinfo's escapes (\040 space, \011 tab, \012 newline, \134
 * backslash) undone in place; returns s. */
static char *unescape(char *s)
{
	char *w = s;

	for (const char *r = s; *r; w++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' &&
		    r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 |
				    (r[3] - '0'));
			r += 4;
		} else {
			*w = *r++;
		}
	}
	*w = '\0';
	return s;
}

/* Reads the fuse.kvfs lines of /proc/self/mountinfo into tab. Write
 * lock held. */
static void scan(int (*open_real)(int, const char *, int, ...))
{
	char line[4096];
	FILE *f;
	int fd;

	for (unsigned i = 0; i < ntab; i++) {
		free(tab[i].root);
		free(tab[i].point);
	}
	ntab = 0;
	fd = open_real(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (ntab < MNT_MAX && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		char *save = NULL, *devs, *root, *point;
		unsigned ma, mi;
		size_t n;

		if (!sep || strncmp(sep + 3, "fuse.kvfs ", 10))
			continue;
		/* id parent major:minor root point ... */
		if (!strtok_r(line, " ", &save) || !strtok_r(NULL, " ", &save))
			continue;
		devs = strtok_r(NULL, " ", &save);
		root = strtok_r(NULL, " ", &save);
		point = strtok_r(NULL, " ", &save);
		if (!devs || !root || !point ||
		    sscanf(devs, "%u:%u", &ma, &mi) != 2)
			continue;
		unescape(root);
		unescape(point);
		n = strlen(point);
		while (n > 1 && point[n - 1] == '/')
			point[--n] = '\0';
		tab[ntab].root = strdup(root);
		tab[ntab].point = strdup(point);
		if (!tab[ntab].root || !tab[ntab].point) {
			free(tab[ntab].root);
			free(tab[ntab].point);
			break;
		}
		tab[ntab].dev = makedev(ma, mi);
		tab[ntab].plen = n;
		ntab++;
	}
	fclose(f);
}

/* Whether abs (a path of n bytes) is at or below mount point m. */
static bool below(const struct mnt *m, const char *abs, size_t n)
{
	if (m->plen == 1) /* "/" */
		return true;
	return n >= m->plen && !memcmp(abs, m->point, m->plen) &&
	       (n == m->plen || abs[m->plen] == '/');
}

/*
 * Appends the components of s (n bytes) to out (at *len of PATH_MAX),
 * each after a '/', dropping empty ones; false for a "." or ".."
 * component or no room.
 */
static bool append(char *out, size_t *len, const char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t j = i, c;

		while (j < n && s[j] != '/')
			j++;
		c = j - i;
		if ((c == 1 && s[i] == '.') ||
		    (c == 2 && s[i] == '.' && s[i + 1] == '.'))
			return false;
		if (c) {
			if (*len + 1 + c >= PATH_MAX)
				return false;
			out[(*len)++] = '/';
			memcpy(out + *len, s + i, c);
			*len += c;
		}
		i = j + 1;
	}
	out[*len] = '\0';
	return true;
}

/* Splits the file system path fsp (from its root: "/ns/a/b") of mount m
 * into nsdir (as this process reaches it) and below. */
static int split_fs(const struct mnt *m, const char *fsp, size_t n,
		    char nsdir[PATH_MAX], char below_out[PATH_MAX])
{
	const char *ns = fsp + 1, *slash;
	size_t nslen, rlen = strlen(m->root);

	if (n < 2)
		return -1; /* the mount's root */
	slash = memchr(ns, '/', n - 1);
	if (!slash || (size_t)(slash - fsp) + 1 >= n)
		return -1; /* no file below a namespace */
	nslen = (size_t)(slash - ns);
	if (nslen == 5 && !memcmp(ns, ".kvfs", 5))
		return -1; /* the control directory */
	memcpy(below_out, slash + 1, n - (size_t)(slash - fsp) - 1);
	below_out[n - (size_t)(slash - fsp) - 1] = '\0';
	if (rlen == 1) { /* the whole mount: <point>/<ns> */
		if (m->plen + 1 + nslen >= PATH_MAX)
			return -1;
		memcpy(nsdir, m->point, m->plen);
		n = m->plen == 1 ? 0 : m->plen;
		nsdir[n++] = '/';
		memcpy(nsdir + n, ns, nslen);
		nsdir[n + nslen] = '\0';
		return 0;
	}
	/* a bind mount of the namespace itself: its point is the namespace;
	 * of a directory below one: the namespace is out of reach */
	if (rlen != nslen + 1 || memcmp(m->root + 1, ns, nslen))
		return -1;
	memcpy(nsdir, m->point, m->plen + 1);
	return 0;
}

int pl_path_split(int dirfd, const char *path,
		  int (*open_real)(int, const char *, int, ...), dev_t *dev,
		  char nsdir[PATH_MAX], char below_out[PATH_MAX])
{
	char abs[PATH_MAX], fsp[PATH_MAX], proc[40];
	const struct mnt *best = NULL;
	size_t alen = 0, flen;
	ssize_t r;
	int rc = -1;

	/* the absolute path: the kernel's name of the directory (canonical:
	 * no symlink, no "..") and path's components */
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD) {
			if (!getcwd(abs, sizeof(abs)))
				return -1;
		} else {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
			r = readlink(proc, abs, sizeof(abs) - 1);
			if (r <= 0 || abs[0] != '/')
				return -1;
			abs[r] = '\0';
		}
		if (strstr(abs, " (deleted)"))
			return -1;
		alen = strlen(abs);
		if (alen == 1)
			alen = 0; /* "/" */
	}
	if (!append(abs, &alen, path, strlen(path)) || alen == 0)
		return -1;

	for (int pass = 0; pass < 2 && rc; pass++) {
		if (pass) { /* mounts changed since the table was read */
			struct timespec now;

			clock_gettime(CLOCK_MONOTONIC, &now);
			pthread_rwlock_wrlock(&lock);
			/* at most once a second: a kvfs device no line names
			 * (another mount namespace's) would scan every open */
			if (!scanned || now.tv_sec != scanned_at) {
				scan(open_real);
				scanned = true;
				scanned_at = now.tv_sec;
			}
			pthread_rwlock_unlock(&lock);
		}
		pthread_rwlock_rdlock(&lock);
		best = NULL;
		for (unsigned i = 0; i < ntab; i++)
			if (below(&tab[i], abs, alen) &&
			    (!best || tab[i].plen > best->plen))
				best = &tab[i];
		if (best) {
			/* the path in the file system: root, then what
			 * follows the mount point */
			size_t skip = best->plen == 1 ? 0 : best->plen;

			flen = 0;
			fsp[0] = '\0';
			*dev = best->dev;
			if (append(fsp, &flen, best->root, strlen(best->root)) &&
			    append(fsp, &flen, abs + skip, alen - skip))
				rc = split_fs(best, fsp, flen, nsdir, below_out);
			else
				rc = -2;
		}
		pthread_rwlock_unlock(&lock);
		if (rc == -1 && best)
			break; /* found, not a file of a namespace */
		if (rc == -2)
			return -1;
	}
	return rc ? -1 : 0;
}
