/* kvfs_test.c - mount helpers for the integration tests (see kvfs_test.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tier/l2/l2.h"

/*
 * The safety net: mounts this process made and has not unmounted yet. Test
 * helpers may keep this one piece of process state (the daemon itself has
 * none); only the process that registered a mount cleans it up, so a forked
 * child that exits does not unmount its parent's mounts.
 */
#define NET_MAX 16
static struct {
	pid_t owner;
	pid_t pid;
	char dir[PATH_MAX];
} net[NET_MAX];
static int net_installed;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void kvfs_test_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

double kvfs_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define sleep_ms kvfs_test_sleep_ms

/* Async-signal-safe: only syscalls. */
static void net_cleanup(void)
{
	for (int i = 0; i < NET_MAX; i++) {
		if (!net[i].pid || net[i].owner != getpid())
			continue;
		umount2(net[i].dir, MNT_DETACH);
		kill(net[i].pid, SIGTERM);
		net[i].pid = 0;
	}
}

static void net_signal(int sig)
{
	net_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int net_add(pid_t pid, const char *dir)
{
	if (!net_installed) {
		net_installed = 1;
		atexit(net_cleanup);
		signal(SIGINT, net_signal);
		signal(SIGTERM, net_signal);
		signal(SIGHUP, net_signal);
		signal(SIGABRT, net_signal);
	}
	for (int i = 0; i < NET_MAX; i++) {
		if (net[i].pid)
			continue;
		snprintf(net[i].dir, sizeof(net[i].dir), "%s", dir);
		net[i].owner = getpid();
		net[i].pid = pid;
		return i;
	}
	return -1;
}

static void net_del(int slot)
{
	if (slot >= 0 && slot < NET_MAX)
		net[slot].pid = 0;
}

const char *kvfs_test_bin(void)
{
	const char *b = getenv("KVFS_MOUNT_BIN");

	return b && *b ? b : "build/asan/kvfs-mount";
}

int kvfs_test_is_mounted(const char *dir)
{
	char line[4096], want[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int found = 0;

	if (!f)
		return 0;
	if (!realpath(dir, want))
		snprintf(want, sizeof(want), "%s", dir);
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX];

		/* id parent major:minor root mountpoint ... */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 &&
		    !strcmp(mp, want)) {
			found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Runs a command quietly and returns its exit status (or -1). */
static int run_quiet(const char *const *argv)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int wait_deadline(pid_t pid, int *status, double deadline)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_s() > deadline)
			return -1;
		sleep_ms(5);
	}
}

int kvfs_test_mount_args(struct kvfs_mnt *m, const char *const *args)
{
	const char *argv[64];
	struct stat before, st;
	double deadline;
	int n = 0, status;
	const char *tmp = getenv("TMPDIR");

	memset(m, 0, sizeof(*m));
	m->slot = -1;
	snprintf(m->dir, sizeof(m->dir), "%s/kvfs-test.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(m->dir)) {
		fprintf(stderr, "kvfs_test: mkdtemp: %s\n", strerror(errno));
		return -1;
	}
	if (stat(m->dir, &before) < 0) {
		rmdir(m->dir);
		return -1;
	}
	argv[n++] = kvfs_test_bin();
	for (int i = 0; args[i] && n < 62; i++)
		argv[n++] = strcmp(args[i], "@DIR@") ? args[i] : m->dir;
	argv[n] = NULL;

	m->pid = fork();
	if (m->pid < 0) {
		rmdir(m->dir);
		return -1;
	}
	if (m->pid == 0) {
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "kvfs_test: exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	m->slot = net_add(m->pid, m->dir);
	deadline = now_s() + KVFS_TEST_DEADLINE;
	for (;;) {
		if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
			fprintf(stderr, "kvfs_test: %s exited (status 0x%x) "
				"before mounting %s\n", argv[0], status, m->dir);
			goto fail_reaped;
		}
		if (stat(m->dir, &st) == 0 && st.st_dev != before.st_dev)
			return 0;
		if (now_s() > deadline) {
			fprintf(stderr, "kvfs_test: %s not mounted within %d s\n",
				m->dir, KVFS_TEST_DEADLINE);
			kill(m->pid, SIGKILL);
			waitpid(m->pid, &status, 0);
			goto fail_reaped;
		}
		sleep_ms(5);
	}
fail_reaped:
	if (kvfs_test_is_mounted(m->dir))
		umount2(m->dir, MNT_DETACH);
	net_del(m->slot);
	m->slot = -1;
	m->pid = 0;
	rmdir(m->dir);
	return -1;
}

int kvfs_test_mount(struct kvfs_mnt *m, const char *opts)
{
	const char *args[] = { "-f", "-o", opts, "@DIR@", NULL };

	if (!opts || !*opts) {
		args[1] = "@DIR@";
		args[2] = NULL;
	}
	return kvfs_test_mount_args(m, args);
}

static int finish(struct kvfs_mnt *m, double deadline)
{
	int status, ret;

	if (wait_deadline(m->pid, &status, deadline) < 0) {
		fprintf(stderr, "kvfs_test: daemon %d outlived the unmount of "
			"%s; killing it\n", (int)m->pid, m->dir);
		kill(m->pid, SIGKILL);
		waitpid(m->pid, &status, 0);
		ret = -1;
	} else if (WIFEXITED(status)) {
		ret = WEXITSTATUS(status);
		if (ret)
			fprintf(stderr, "kvfs_test: daemon exited with %d\n",
				ret);
	} else {
		fprintf(stderr, "kvfs_test: daemon killed by signal %d\n",
			WTERMSIG(status));
		ret = -1;
	}
	if (kvfs_test_is_mounted(m->dir)) {
		fprintf(stderr, "kvfs_test: %s still mounted\n", m->dir);
		umount2(m->dir, MNT_DETACH);
		ret = -1;
	}
	net_del(m->slot);
	m->slot = -1;
	m->pid = 0;
	rmdir(m->dir);
	return ret;
}

int kvfs_test_umount(struct kvfs_mnt *m)
{
	const char *u[] = { "fusermount3", "-u", m->dir, NULL };
	const char *uz[] = { "fusermount3", "-u", "-z", m->dir, NULL };
	double deadline = now_s() + KVFS_TEST_DEADLINE;

	if (!m->pid)
		return -1;
	if (run_quiet(u) != 0) {
		fprintf(stderr, "kvfs_test: fusermount3 -u %s failed; lazy "
			"unmount\n", m->dir);
		if (run_quiet(uz) != 0)
			umount2(m->dir, MNT_DETACH);
	}
	return finish(m, deadline);
}

int kvfs_test_wait_exit(struct kvfs_mnt *m)
{
	if (!m->pid)
		return -1;
	return finish(m, now_s() + KVFS_TEST_DEADLINE);
}

int kvfs_test_run(const char *const *argv, char *out, size_t outlen)
{
	int p[2], status;
	size_t len = 0;
	pid_t pid;
	double deadline = now_s() + KVFS_TEST_DEADLINE;

	if (outlen)
		out[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = { p[0], POLLIN, 0 };
		char buf[4096];
		ssize_t n;
		int left = (int)((deadline - now_s()) * 1000);

		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			break;
		n = read(p[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		if (outlen && len < outlen - 1) {
			size_t c = (size_t)n < outlen - 1 - len ?
				(size_t)n : outlen - 1 - len;
			memcpy(out + len, buf, c);
			len += c;
			out[len] = '\0';
		}
	}
	close(p[0]);
	if (wait_deadline(pid, &status, deadline + 1) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

char *kvfs_test_path(const struct kvfs_mnt *m, char *buf, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, PATH_MAX, "%s/", m->dir);

	va_start(ap, fmt);
	vsnprintf(buf + n, PATH_MAX - n, fmt, ap);
	va_end(ap);
	return buf;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t kvfs_test_mix64(uint64_t x)
{
	return mix64(x);
}

int kvfs_test_count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static uint8_t fill_byte(uint64_t seed, uint64_t pos)
{
	uint64_t w = mix64(seed * 0x9e3779b97f4a7c15ULL + (pos >> 3) + 1);

	return (uint8_t)(w >> ((pos & 7) * 8));
}

void kvfs_test_fill(void *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint8_t *p = buf;
	size_t i = 0;

	while (i < len && ((off + i) & 7))
		p[i] = fill_byte(seed, off + i), i++;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = mix64(seed * 0x9e3779b97f4a7c15ULL +
				   ((off + i) >> 3) + 1);
		memcpy(p + i, &w, 8); /* little-endian, as fill_byte */
	}
	for (; i < len; i++)
		p[i] = fill_byte(seed, off + i);
}

int kvfs_test_check(const void *buf, size_t len, uint64_t seed, uint64_t off)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		uint8_t want = fill_byte(seed, off + i);

		if (p[i] != want) {
			fprintf(stderr, "kvfs_test: byte %llu is 0x%02x, "
				"want 0x%02x (seed %llu)\n",
				(unsigned long long)(off + i), p[i], want,
				(unsigned long long)seed);
			return -1;
		}
	}
	return 0;
}

void kvfs_test_key_name(uint64_t n, char out[33])
{
	snprintf(out, 33, "%016llx%016llx",
		 (unsigned long long)mix64(n + 0x1234),
		 (unsigned long long)mix64(~n));
}

int kvfs_test_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int kvfs_test_write_file(const char *path, size_t len, uint64_t seed,
			 size_t piece)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	uint8_t *buf;
	size_t off = 0;
	int err = 0;

	if (fd < 0)
		return -errno;
	if (!piece || piece > len)
		piece = len ? len : 1;
	buf = malloc(piece);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (off < len) {
		size_t n = len - off < piece ? len - off : piece;
		ssize_t w;

		kvfs_test_fill(buf, n, seed, off);
		w = pwrite(fd, buf, n, (off_t)off);
		if (w < 0) {
			err = -errno;
			break;
		}
		if ((size_t)w != n) {
			err = -EIO;
			break;
		}
		off += n;
	}
	free(buf);
	if (close(fd) < 0 && !err)
		err = -errno;
	return err;
}

int kvfs_test_read_check(const char *path, size_t len, uint64_t seed)
{
	int fd = open(path, O_RDONLY);
	size_t cap = 1 << 20, off = 0;
	uint8_t *buf;
	int err = 0;

	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf, cap);

		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		if (off + (size_t)n > len ||
		    kvfs_test_check(buf, (size_t)n, seed, off)) {
			err = -EILSEQ;
			break;
		}
		off += (size_t)n;
	}
	if (!err && off != len) {
		fprintf(stderr, "kvfs_test: %s has %zu bytes, want %zu\n",
			path, off, len);
		err = -EILSEQ;
	}
	free(buf);
	close(fd);
	return err;
}

long long kvfs_test_stat(const struct kvfs_mnt *m, const char *obj,
			 const char *key)
{
	char p[PATH_MAX], buf[32768], pat[64];
	const char *s = buf;
	ssize_t n;
	int fd = open(kvfs_test_path(m, p, KVFS_CTL_STATS), O_RDONLY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (obj) {
		snprintf(pat, sizeof(pat), "\"%s\"", obj);
		s = strstr(buf, pat);
		if (!s)
			return -1;
	}
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = strstr(s, pat);
	return s ? strtoll(s + strlen(pat), NULL, 10) : -1;
}

int kvfs_test_l2_damage(const char *l2dir, uint64_t n)
{
	struct kvfs_key key;
	char name[33], p[PATH_MAX + 300];
	struct dirent *de;
	int hits = 0;
	DIR *d;

	kvfs_test_key_name(n, name);
	for (int i = 0; i < 16; i++) { /* (hex; no libkvfs in every test) */
		unsigned v;

		if (sscanf(name + 2 * i, "%2x", &v) != 1)
			return -1;
		key.b[i] = (uint8_t)v;
	}
	d = opendir(l2dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		struct stat sb;
		int fd;

		if (strncmp(de->d_name, "seg-", 4))
			continue;
		snprintf(p, sizeof(p), "%s/%s", l2dir, de->d_name);
		fd = open(p, O_RDWR);
		if (fd < 0 || fstat(fd, &sb)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		for (off_t off = 0; off + 8192 <= sb.st_size; off += 4096) {
			struct l2_rec_hdr h;
			uint8_t b;

			if (pread(fd, &h, sizeof(h), off) != sizeof(h) ||
			    h.magic != L2_MAGIC || memcmp(h.key, key.b, 16))
				continue;
			if (pread(fd, &b, 1, off + 4000) != 1)
				continue;
			b ^= 0x40;
			if (pwrite(fd, &b, 1, off + 4000) == 1)
				hits++;
		}
		fsync(fd);
		close(fd);
	}
	closedir(d);
	return hits;
}

char *kvfs_test_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 1 << 16, n = 0;
	char *buf, *nb;
	ssize_t r;

	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	while (buf && (r = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	close(fd);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

long long kvfs_test_metric(const char *text, const char *sample)
{
	size_t sl = strlen(sample);

	for (const char *s = text; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : s)
		if (!strncmp(s, sample, sl) && s[sl] == ' ')
			return strtoll(s + sl + 1, NULL, 10);
	return -1;
}

char *kvfs_test_undocumented(const char *text)
{
	char *man = kvfs_test_slurp("man/kvfs.7", NULL);
	char fam[128];

	if (!man)
		return strdup("man/kvfs.7 (unreadable)");
	for (const char *s = strstr(text, "# TYPE "); s;
	     s = strstr(s + 1, "# TYPE ")) {
		if (sscanf(s + 7, "%127s", fam) != 1 || !strstr(man, fam)) {
			free(man);
			return strdup(fam);
		}
	}
	free(man);
	return NULL;
}

void kvfs_test_rm_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[PATH_MAX + 300];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	closedir(d);
}

long kvfs_test_huge_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, v;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %lu kB", &v) == 1) {
			kb = (long)v;
			break;
		}
	}
	fclose(f);
	return kb;
}

/* The selected ([...]) word of a transparent_hugepage setting is one of
 * the words of want (a space-separated list). */
static bool thp_setting(const char *file, const char *want)
{
	char path[128], line[256] = "", *a, *b;
	FILE *f;
	bool ok = false;

	snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/%s",
		 file);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f) && (a = strchr(line, '[')) &&
	    (b = strchr(a, ']'))) {
		char word[64], list[256];
		size_t n = (size_t)(b - a - 1);

		if (n < sizeof(word) - 2) {
			snprintf(word, sizeof(word), " %.*s ", (int)n, a + 1);
			snprintf(list, sizeof(list), " %s ", want);
			ok = strstr(list, word) != NULL;
		}
	}
	fclose(f);
	return ok;
}

bool kvfs_test_thp_on(void)
{
	/* huge pages on madvise, and a fault there compacts memory for one
	 * rather than falling back to small pages at once */
	return thp_setting("enabled", "always madvise") &&
	       thp_setting("defrag", "always defer+madvise madvise");
}
