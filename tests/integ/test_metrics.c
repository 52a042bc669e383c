/*
 * test_metrics.c - /.kvfs/stats and /.kvfs/metrics on real mounts (issue
 * 17 items 5-9): every counter in both, with HELP, TYPE and labels; hits
 * and misses as an engine sees them (real ioctls, real opens); the
 * metrics_http endpoint (curl); the control files' sizes (cp -a, tar,
 * rsync copy them whole); per-namespace rows only for readers who may
 * list the namespace (a child that drops to uid 65534), ctl_mode and
 * ctl_gid. promtool's own check is tests/integ/test_promtool.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define CHUNK 4096

static char *ctl(const struct kvfs_mnt *m, const char *file)
{
	char p[PATH_MAX];
	char *s = kvfs_test_slurp(kvfs_test_path(m, p, ".kvfs/%s", file),
				  NULL);

	assert_non_null(s);
	return s;
}

static long long metric(const struct kvfs_mnt *m, const char *sample)
{
	char *s = ctl(m, "metrics");
	long long v = kvfs_test_metric(s, sample);

	free(s);
	return v;
}

static void put(const struct kvfs_mnt *m, const char *ns,
		const struct kvfs_key *k, uint64_t seed)
{
	char p[PATH_MAX], name[KVFS_KEY_HEX_LEN + 1];

	kvfs_key_hex(k, name);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(m, p, "%s/%s",
							     ns, name),
					      CHUNK, seed, 0), 0);
}

static void chain(struct kvfs_key *k, size_t n, uint32_t run)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t tok[2] = { (uint32_t)i, run };

		assert_int_equal(kvfs_key_chunk(i ? &k[i - 1] : NULL, 0, NULL,
						0, tok, 2, &k[i]), 0);
	}
}

/*
 * The metrics text is well formed as Prometheus wants it (what
 * test_promtool.c asks promtool, checked here too where promtool is not
 * installed): every sample's family has HELP and TYPE before it, counter
 * names end in _total and only counters' do, no label is named ns.
 */
/* text without its kvfs_fuse_uring_requests_total sample: requests served
 * through the rings may move it between two reads (an earlier close's
 * RELEASE, which the kernel sends after close(2) returned, served late) */
static char *without_ring_requests(char *text)
{
	char *l = strstr(text, "\nkvfs_fuse_uring_requests_total ");

	if (l) {
		char *end = strchr(l + 1, '\n');

		memmove(l, end ? end : l + strlen(l),
			strlen(end ? end : l + strlen(l)) + 1);
	}
	return text;
}

static void lint(const char *text)
{
	char fam[128] = "", type[16] = "";
	bool help = false;

	for (const char *s = text; *s;) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		char line[512];

		assert_true(len < sizeof(line));
		memcpy(line, s, len);
		line[len] = '\0';
		if (!strncmp(line, "# HELP ", 7)) {
			assert_int_equal(sscanf(line + 7, "%127s", fam), 1);
			help = true;
			type[0] = '\0';
		} else if (!strncmp(line, "# TYPE ", 7)) {
			char f[128];

			assert_int_equal(sscanf(line + 7, "%127s %15s", f,
						type), 2);
			assert_string_equal(f, fam);
			assert_true(help);
			size_t fl = strlen(fam);
			bool total = fl > 6 && !strcmp(fam + fl - 6, "_total");

			assert_int_equal(total, !strcmp(type, "counter"));
		} else {
			size_t nl2 = strcspn(line, "{ ");

			assert_true(type[0]);
			assert_int_equal(nl2, strlen(fam));
			assert_memory_equal(line, fam, nl2);
			assert_null(strstr(line, "{ns="));
			assert_null(strstr(line, ",ns="));
		}
		s += len + (nl ? 1 : 0);
	}
}

/* ----------------------------------------------- item 5: every counter */

static void test_every_counter(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], l2[] = "/tmp/kvfs-metrics-l2.XXXXXX", opts[512];
	struct kvfs_key k[40];
	char *stats, *text, *undoc;
	/* a row of stats and the sample that must carry the same figure */
	static const char *const pairs[][3] = {
		{ "l2", "reads", "kvfs_tier_reads_total{tier=\"l2\"}" },
		{ "l2", "writes", "kvfs_tier_writes_total{tier=\"l2\"}" },
		{ "l2", "errors", "kvfs_tier_errors_total{tier=\"l2\"}" },
		{ "l2", "corrupt", "kvfs_tier_corrupt_total{tier=\"l2\"}" },
		{ "l2", "reclaims", "kvfs_l2_reclaims_total" },
		{ "l2", "chunks", "kvfs_chunks{tier=\"l2\"}" },
		{ "l1", "chunks", "kvfs_chunks{tier=\"l1\"}" },
		{ "leases", "taken", "kvfs_leases_taken_total" },
		{ "leases", "unpinned",
		  "kvfs_leases_released_total{reason=\"unpin\"}" },
		{ "ioctl", "lookups", "kvfs_ioctl_lookups_total" },
		{ "ioctl", "keys", "kvfs_ioctl_lookup_keys_total" },
		{ "ioctl", "errors", "kvfs_ioctl_errors_total" },
		{ "xfer", "gets", "kvfs_xfer_batches_total{op=\"get\"}" },
		{ "fs", "opens", "kvfs_fs_opens_total" },
		{ "fs", "invalidations", "kvfs_fs_invalidations_total" },
		{ NULL, "evictions", "kvfs_evictions_total" },
		{ NULL, "demotions", "kvfs_demotions_total" },
		{ NULL, "publishes", "kvfs_publishes_total" },
	};
	struct kvfs_result res;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(l2));
	/* 1 MiB of L1 for 40 chunks of 4 KiB... in pages: evictions to L2 */
	snprintf(opts, sizeof(opts), "l1_size=64K,l2_dir=%s,"
		 "events=ipc://%s.sock", l2, l2);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "m"), 0755), 0);
	chain(k, 40, 1);
	for (int i = 0; i < 40; i++)
		put(&m, "m", &k[i], (uint64_t)i);
	fd = kvfs_ns_open(m.dir, "m", 0, 0);
	assert_true(fd >= 0);
	/* reading what went to L2 brings it back: an L2 read */
	for (int i = 0; i < 40; i++) {
		char name[KVFS_KEY_HEX_LEN + 1];

		kvfs_key_hex(&k[i], name);
		assert_int_equal(kvfs_test_read_check(kvfs_test_path(&m, p,
			"m/%s", name), CHUNK, (uint64_t)i), 0);
	}
	assert_true(kvfs_lookup(fd, k, 4, 0, KVFS_LOOKUP_PIN, 0, &res) >= 0);
	assert_int_equal(kvfs_release(fd, &res), 0);
	close(fd);

	stats = ctl(&m, "stats");
	text = ctl(&m, "metrics");
	lint(text);
	/* kvfs(7) describes every family (those of L3: test_promtool.c) */
	undoc = kvfs_test_undocumented(text);
	if (undoc)
		fprintf(stderr, "not in man/kvfs.7: %s\n", undoc);
	assert_null(undoc);
	assert_true(kvfs_test_metric(text, "kvfs_tier_reads_total{tier=\"l2\"}")
		    > 0);
	assert_true(kvfs_test_metric(text, "kvfs_evictions_total") > 0);
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		long long js = kvfs_test_stat(&m, pairs[i][0], pairs[i][1]);
		long long pm = kvfs_test_metric(text, pairs[i][2]);

		/* nothing moves between the two renderings of an idle mount */
		if (js != pm)
			fprintf(stderr, "%s.%s = %lld, %s = %lld\n",
				pairs[i][0] ? pairs[i][0] : "", pairs[i][1],
				js, pairs[i][2], pm);
		assert_true(js >= 0);
		assert_int_equal(js, pm);
	}
	/* per-namespace rows are labelled namespace=, never ns= */
	assert_int_equal(kvfs_test_metric(text,
		"kvfs_namespace_chunks{namespace=\"m\"}"), 40);
	assert_non_null(strstr(text, "# TYPE kvfs_namespace_hits_total counter"));
	free(stats);
	free(text);
	assert_int_equal(kvfs_test_umount(&m), 0);
	snprintf(opts, sizeof(opts), "rm -rf %s %s.sock", l2, l2);
	assert_int_equal(system(opts), 0);
}

/* ------------------------------------------ item 6: hits and misses */

#define LOOKUP_HITS(t) "kvfs_hits_total{op=\"lookup\",tier=\"" t "\"}"
#define READ_HITS "kvfs_hits_total{op=\"read\",tier=\"l1\"}"
#define LOOKUP_MISSES "kvfs_misses_total{op=\"lookup\"}"
#define READ_MISSES "kvfs_misses_total{op=\"read\"}"
#define NAME_MISSES "kvfs_misses_total{op=\"name\"}"

static void test_hits_misses(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], name[KVFS_KEY_HEX_LEN + 1], buf[CHUNK];
	struct kvfs_key k[4], other[3];
	struct kvfs_result res;
	struct stat st;
	const char *ranks[] = { "a", "b" };
	int fd, root;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "a"), 0755), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "b"), 0755), 0);
	chain(k, 4, 2);
	put(&m, "a", &k[0], 0);
	put(&m, "a", &k[1], 1);
	/* writing (the kernel's lookup before each create) is no miss */
	assert_int_equal(metric(&m, NAME_MISSES), 0);
	assert_int_equal(metric(&m, READ_MISSES), 0);

	/* a batched lookup that finds 2 of 4: 2 hits, 2 misses */
	fd = kvfs_ns_open(m.dir, "a", 0, 0);
	assert_true(fd >= 0);
	assert_int_equal(kvfs_lookup(fd, k, 4, 0, 0, 0, &res), 2);
	assert_int_equal(metric(&m, LOOKUP_HITS("l1")), 2);
	assert_int_equal(metric(&m, LOOKUP_MISSES), 2);
	assert_int_equal(metric(&m, READ_HITS), 0);
	assert_int_equal(kvfs_test_stat(&m, NULL, "hits"), 2);
	assert_int_equal(kvfs_test_stat(&m, NULL, "misses"), 2);

	/* reading a hit: a read hit; stat of a present key: nothing */
	kvfs_key_hex(&k[0], name);
	assert_int_equal(stat(kvfs_test_path(&m, p, "a/%s", name), &st), 0);
	assert_int_equal(metric(&m, READ_HITS), 0);
	assert_int_equal(kvfs_get(fd, &k[0], buf, sizeof(buf)), CHUNK);
	assert_int_equal(metric(&m, READ_HITS), 1);
	assert_int_equal(kvfs_test_stat(&m, "read", "hits_l1"), 1);

	/* a stat of an absent key is a name miss, not a read miss */
	kvfs_key_hex(&k[3], name);
	assert_int_equal(stat(kvfs_test_path(&m, p, "a/%s", name), &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(metric(&m, NAME_MISSES), 1);
	assert_int_equal(metric(&m, READ_MISSES), 0);
	assert_int_equal(metric(&m, LOOKUP_MISSES), 2);

	/* a group lookup: every rank is told the common run (1 of 3) */
	chain(other, 3, 3);
	put(&m, "a", &other[0], 10);
	put(&m, "a", &other[1], 11);
	put(&m, "b", &other[0], 10);
	root = open(m.dir, O_RDONLY | O_DIRECTORY);
	assert_true(root >= 0);
	assert_int_equal(kvfs_group_lookup(root, ranks, 2, other, 3, 0, 0,
					   &res), 1);
	close(root);
	assert_int_equal(metric(&m, LOOKUP_HITS("l1")), 2 + 2);
	assert_int_equal(metric(&m, LOOKUP_MISSES), 2 + 4);
	assert_int_equal(metric(&m, LOOKUP_HITS("l2")), 0);
	close(fd);
	/* the sums in stats are the rows' sums */
	assert_int_equal(kvfs_test_stat(&m, NULL, "hits"), 4 + 1);
	assert_int_equal(kvfs_test_stat(&m, NULL, "misses"), 6 + 1);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

/* ------------------------------------------------ item 7: metrics_http */

static int curl(const char *url, const char *method, const char *out,
		char *info, size_t infolen)
{
	const char *argv[] = { "curl", "-s", "-X", method, "-o", out, "-w",
			       "%{http_code} %{content_type}", url, NULL };

	return kvfs_test_run(argv, info, infolen);
}

static void test_http(void **state)
{
	struct kvfs_mnt m, m2;
	char p[PATH_MAX], url[128], out[] = "/tmp/kvfs-metrics-http.XXXXXX";
	char info[256], opts[128], *cfg, *bound, *body, *file;
	const char *argv[] = { "curl", "--version", NULL };
	int ofd;

	(void)state;
	if (kvfs_test_run(argv, info, sizeof(info)) != 0)
		skip(); /* curl not installed (make deps adds it) */
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M,metrics_http=:0"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "private"), 0700), 0);
	cfg = ctl(&m, "config");
	bound = strstr(cfg, "metrics_http=127.0.0.1:");
	assert_non_null(bound); /* :PORT is loopback only */
	bound += strlen("metrics_http=");
	bound[strcspn(bound, "\n")] = '\0';
	snprintf(url, sizeof(url), "http://%s/metrics", bound);
	ofd = mkstemp(out);
	assert_true(ofd >= 0);
	close(ofd);

	assert_int_equal(curl(url, "GET", out, info, sizeof(info)), 0);
	assert_string_equal(info, "200 text/plain; version=0.0.4; charset=utf-8");
	body = kvfs_test_slurp(out, NULL);
	file = ctl(&m, "metrics");
	/* what root reads, byte for byte */
	assert_string_equal(without_ring_requests(body),
			    without_ring_requests(file));
	assert_non_null(strstr(body, "namespace=\"private\""));
	lint(body);
	free(body);
	free(file);
	snprintf(url, sizeof(url), "http://%s/other", bound);
	assert_int_equal(curl(url, "GET", out, info, sizeof(info)), 0);
	assert_int_equal(atoi(info), 404);
	snprintf(url, sizeof(url), "http://%s/metrics", bound);
	assert_int_equal(curl(url, "POST", out, info, sizeof(info)), 0);
	assert_int_equal(atoi(info), 405);
	assert_int_equal(curl(url, "DELETE", out, info, sizeof(info)), 0);
	assert_int_equal(atoi(info), 405);

	/* the same port again: the second mount fails, nothing mounted */
	snprintf(opts, sizeof(opts), "metrics_http=%s", bound);
	assert_int_equal(kvfs_test_mount(&m2, opts), -1);
	free(cfg);
	assert_int_equal(kvfs_test_umount(&m), 0);
	/* bad addresses and ports are mount errors */
	assert_int_equal(kvfs_test_mount(&m2, "metrics_http=:65536"), -1);
	assert_int_equal(kvfs_test_mount(&m2, "metrics_http=8080"), -1);
	assert_int_equal(kvfs_test_mount(&m2, "metrics_http=:http"), -1);
	assert_int_equal(kvfs_test_mount(&m2,
		"metrics_http=no-such-host.invalid:1"), -1);
	assert_int_equal(kvfs_test_mount(&m2, "metrics_http=192.0.2.1:0"),
			 -1); /* not an address of this host */
	unlink(out);
}

/* --------------------------------------------- item 8: sizes and copies */

static bool have(const char *tool)
{
	const char *argv[] = { tool, "--version", NULL };
	char out[256];

	return kvfs_test_run(argv, out, sizeof(out)) == 0;
}

/* Each file copied into dir is whole: as long as its stat said, and
 * ending where the format ends. */
static void check_copies(const char *dir)
{
	static const char *const files[] = { "stats", "metrics", "config",
					     "version" };
	char path[PATH_MAX];

	for (size_t i = 0; i < 4; i++) {
		size_t len;
		char *s;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		s = kvfs_test_slurp(path, &len);
		assert_non_null(s);
		assert_true(len > 0);
		assert_int_equal(strlen(s), len); /* no zero padding */
		assert_int_equal(s[len - 1], '\n');
		if (i == 0)
			assert_non_null(strstr(s, "\"namespaces\": {"));
		if (i == 0)
			assert_string_equal(s + len - 3, "\n}\n");
		if (i == 1)
			assert_non_null(strstr(s,
				"kvfs_namespace_chunks{namespace=\"n\"} 1\n"));
		if (i == 3)
			assert_string_equal(s, "kvfs " KVFS_VERSION_STRING "\n");
		free(s);
	}
}

static void test_sizes_and_copies(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], tmp[] = "/tmp/kvfs-metrics-cp.XXXXXX", cmd[PATH_MAX * 3];
	char out[4096];
	struct kvfs_key k;
	struct stat st;
	size_t len;
	pid_t busy;
	char *s;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "n"), 0755), 0);
	chain(&k, 1, 4);
	put(&m, "n", &k, 1);
	/* stat says how much a read gets (nothing changes in between) */
	static const char *const files[] = { "stats", "metrics", "config",
					     "version" };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(stat(kvfs_test_path(&m, p, ".kvfs/%s",
						     files[i]), &st), 0);
		s = kvfs_test_slurp(p, &len);
		assert_non_null(s);
		assert_true(st.st_size > 0);
		assert_int_equal((size_t)st.st_size, len);
		free(s);
	}
	/* fstat of an open file: its own snapshot's size */
	{
		int fd = open(kvfs_test_path(&m, p, ".kvfs/stats"), O_RDONLY);
		char buf[65536];
		ssize_t n;

		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		n = read(fd, buf, sizeof(buf));
		assert_int_equal(n, st.st_size);
		close(fd);
	}
	/* counters move all along (a reader in a loop): each copy is still
	 * of one consistent rendering, as long as stat said */
	{
		char name[KVFS_KEY_HEX_LEN + 1];

		kvfs_key_hex(&k, name);
		kvfs_test_path(&m, p, "n/%s", name);
		busy = fork();
		assert_true(busy >= 0);
		if (busy == 0)
			for (;;)
				kvfs_test_read_check(p, CHUNK, 1);
	}
	/* a pause between stat and open (a slow copier): the kernel asks
	 * the daemon again for the open's permission check (attributes of
	 * control files are never cached), and the read must still be the
	 * rendering stat sized */
	for (int i = 0; i < 8; i++) {
		const char *f = files[i % 2];

		len = 0;
		if (stat(kvfs_test_path(&m, p, ".kvfs/%s", f), &st) == 0) {
			usleep(30000);
			s = kvfs_test_slurp(p, &len);
			free(s);
		}
		if ((size_t)st.st_size != len) {
			fprintf(stderr, "%s: stat said %lld, read %zu after "
				"30 ms\n", f, (long long)st.st_size, len);
			kill(busy, SIGKILL);
			waitpid(busy, NULL, 0);
			fail();
		}
	}
	assert_non_null(mkdtemp(tmp));
	snprintf(cmd, sizeof(cmd), "cp -a %s/.kvfs %s/cp", m.dir, tmp);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/cp", tmp);
	check_copies(cmd);
	{
		const char *argv[] = { "sh", "-c", NULL, NULL };

		snprintf(cmd, sizeof(cmd), "mkdir %s/tar && tar -C %s -cf - "
			 ".kvfs | tar -C %s/tar -xf -", tmp, m.dir, tmp);
		argv[2] = cmd;
		/* tar warns "file shrank" or "changed as we read it" when a
		 * size is wrong: none here */
		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		assert_string_equal(out, "");
	}
	snprintf(cmd, sizeof(cmd), "%s/tar/.kvfs", tmp);
	check_copies(cmd);
	if (have("rsync")) {
		snprintf(cmd, sizeof(cmd), "rsync -a %s/.kvfs/ %s/rsync/",
			 m.dir, tmp);
		assert_int_equal(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "%s/rsync", tmp);
		check_copies(cmd);
	} else {
		fprintf(stderr, "rsync not installed (make deps adds it): "
			"its copy not checked\n");
	}
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

/* ------------------------------------- item 9: who sees which namespace */

/*
 * In a child with uid and gid (and no other groups): reads path into out
 * (through a pipe). Returns 0, or the errno of open/read, or -1.
 */
static int read_as(uid_t uid, gid_t gid, const char *path, char *out,
		   size_t outlen)
{
	int pfd[2], status;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char buf[65536];
		int fd;

		close(pfd[0]);
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) ||
		    setresuid(uid, uid, uid))
			_exit(100);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			_exit(errno);
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			if (write(pfd[1], buf, (size_t)r) != r)
				_exit(101);
		_exit(r < 0 ? errno : 0);
	}
	close(pfd[1]);
	while (n + 1 < outlen && (r = read(pfd[0], out + n, outlen - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(pfd[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void test_visibility(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], out[65536];
	struct kvfs_key k;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M,allow_other"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "secret"), 0700), 0);
	assert_int_equal(chmod(p, 0700), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "public"), 0755), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "team"), 0750), 0);
	assert_int_equal(chown(p, 0, 4242), 0);
	chain(&k, 1, 5);
	put(&m, "secret", &k, 1);
	put(&m, "public", &k, 2);
	put(&m, "team", &k, 3);

	/* nobody: the public namespace only, totals of all three */
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, ".kvfs/metrics"), out,
				 sizeof(out)), 0);
	assert_null(strstr(out, "secret"));
	assert_null(strstr(out, "team"));
	assert_int_equal(kvfs_test_metric(out,
		"kvfs_namespace_chunks{namespace=\"public\"}"), 1);
	assert_int_equal(kvfs_test_metric(out, "kvfs_chunks{tier=\"l1\"}"), 3);
	assert_int_equal(kvfs_test_metric(out, "kvfs_publishes_total"), 3);
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, ".kvfs/stats"), out,
				 sizeof(out)), 0);
	assert_null(strstr(out, "secret"));
	assert_null(strstr(out, "team"));
	assert_non_null(strstr(out, "\"public\": {\"chunks\": 1"));
	/* the same user cannot list the namespace either */
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, "secret"), out,
				 sizeof(out)), EACCES);
	/* the group's member sees the group's namespace */
	assert_int_equal(read_as(65534, 4242,
				 kvfs_test_path(&m, p, ".kvfs/stats"), out,
				 sizeof(out)), 0);
	assert_non_null(strstr(out, "\"team\": {"));
	assert_null(strstr(out, "secret"));
	/* its owner sees it */
	assert_int_equal(chown(kvfs_test_path(&m, p, "secret"), 65534, 65534),
			 0);
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, ".kvfs/metrics"), out,
				 sizeof(out)), 0);
	assert_int_equal(kvfs_test_metric(out,
		"kvfs_namespace_chunks{namespace=\"secret\"}"), 1);
	/* root sees all */
	{
		char *s = ctl(&m, "stats");

		assert_non_null(strstr(s, "\"team\": {"));
		assert_non_null(strstr(s, "\"secret\": {"));
		free(s);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_ctl_mode(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], out[65536];
	struct stat st;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M,allow_other,"
					 "ctl_mode=0440,ctl_gid=4243"), 0);
	assert_int_equal(stat(kvfs_test_path(&m, p, ".kvfs/metrics"), &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 0440);
	assert_int_equal(st.st_gid, 4243);
	assert_int_equal(stat(kvfs_test_path(&m, p, ".kvfs"), &st), 0);
	assert_int_equal(st.st_mode, S_IFDIR | 0550);
	/* others may not read the control files... */
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, ".kvfs/stats"), out,
				 sizeof(out)), EACCES);
	assert_int_equal(read_as(65534, 65534,
				 kvfs_test_path(&m, p, ".kvfs/version"), out,
				 sizeof(out)), EACCES);
	/* ...the group may */
	assert_int_equal(read_as(65534, 4243,
				 kvfs_test_path(&m, p, ".kvfs/metrics"), out,
				 sizeof(out)), 0);
	assert_non_null(strstr(out, "kvfs_publishes_total 0\n"));
	assert_int_equal(kvfs_test_umount(&m), 0);

	/* bad values are mount errors, nothing mounted */
	assert_int_equal(kvfs_test_mount(&m, "ctl_mode=0644"), -1);
	assert_int_equal(kvfs_test_mount(&m, "ctl_mode=0999"), -1);
	assert_int_equal(kvfs_test_mount(&m, "ctl_mode=r"), -1);
	assert_int_equal(kvfs_test_mount(&m, "ctl_gid=no-such-group-kvfs"),
			 -1);
	assert_int_equal(kvfs_test_mount(&m, "ctl_gid=-1"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_counter),
		cmocka_unit_test(test_hits_misses),
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_sizes_and_copies),
		cmocka_unit_test(test_visibility),
		cmocka_unit_test(test_ctl_mode),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_metrics: needs root (FUSE mounts, "
			"another uid)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
