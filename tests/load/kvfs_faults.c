/*
 * kvfs_faults - the crash-consistency harness (`make faults`; in `make
 * test`: 2 rounds, 1 of ckpt, 2 of ckptbad).
 *
 *   kvfs_faults [-r ROUNDS] [-s SEED]
 *
 * Each round runs the mixed load of kvfs_load.c (writers, verifying
 * readers, unlinks, renames, stats) on a kvfs with L2 on (ingest=all),
 * injects one fault, remounts on the same l2_dir and verifies every listed
 * chunk byte for byte against the oracle. The faults, in turn:
 *   kill     SIGKILL the daemon at a random moment under load;
 *   writers  SIGKILL writer processes in the middle of their chunk (no
 *            partial chunk may ever be listed), then SIGKILL the daemon;
 *   corrupt  unmount, flip bytes in and truncate segment files;
 *   full     the same load with l2_dir on a 24 MiB tmpfs (l2_size 256M):
 *            the L2 filesystem fills up; then SIGKILL the daemon;
 *   ckpt     l2_checkpoint_s=1 (the L2 index checkpointed every second
 *            under load, unlinks logged since): SIGKILL the daemon at a
 *            random moment, during a checkpoint write or right after
 *            unlinks; the remount loads the checkpoint and scans the tail.
 *            An unlink undone fails the round;
 *   ckptbad  unmount cleanly, then damage the checkpoint (truncate it,
 *            flip a bit, give it another l2.id) or delete a segment file
 *            by hand: the remount falls back to the full scan (the stats
 *            say so; a deleted segment only drops its records);
 *   paths    a path namespace (names=paths, its own l2_dir; every other
 *            such round with L3 on a real redis-server, l3_ingest=all,
 *            when one is installed) under kvfs_pload.c's load: writers
 *            rewriting files with O_TRUNC and with a temporary + rename,
 *            unlinks, readers, a tree walker; SIGKILL after 1-5 s, remount:
 *            a file older than its last acknowledged version, or back
 *            after its acknowledged unlink, fails the round.
 * Prints per round and in total: chunks verified, wrong bytes (must be 0),
 * acknowledged chunks lost (published, acknowledged, gone after the fault:
 * expected for what had not reached L2 yet, or sat in a damaged segment),
 * unlinks undone, and for paths rounds older versions and resurrected
 * unlinks. Exit 0 when no byte was wrong, no path file was older or
 * resurrected and every remount worked.
 * The daemon is $KVFS_MOUNT_BIN (tests/common/kvfs_test.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"
#include "tests/load/kvfs_load.h"
#include "tests/load/kvfs_pload.h"

enum fault { F_KILL, F_WRITERS, F_CORRUPT, F_FULL, F_CKPT, F_CKPTBAD,
	     F_PATHS, F_N };
static const char *const fault_names[F_N] = { "kill", "writers", "corrupt",
					      "full", "ckpt", "ckptbad",
					      "paths" };

struct totals {
	uint64_t rounds, verified, wrong, lost, resurrected, foreign;
	uint64_t partial_listed, remount_failures, ops;
	struct pload_tally paths; /* F_PATHS rounds */
};

static unsigned int rnd_seed;

static unsigned int rnd(unsigned int n)
{
	return n ? (unsigned int)rand_r(&rnd_seed) % n : 0;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int do_mount_opt(struct kvfs_mnt *m, const char *l2dir,
			const char *more)
{
	char opts[4400];

	snprintf(opts, sizeof(opts), "l1_size=48M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=256M,ingest=all,tmp_timeout=2%s", l2dir, more);
	return kvfs_test_mount(m, opts);
}

static int do_mount(struct kvfs_mnt *m, const char *l2dir)
{
	return do_mount_opt(m, l2dir, "");
}

static uint64_t stuck_daemons, killed_daemons, late_daemons;

/* Threads of pid still alive (a SIGKILLed process is gone once only its
 * zombie main task is left). */
static int live_tasks(pid_t pid)
{
	char p[64], st[512];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	d = opendir(p);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		FILE *f;
		char state = 'Z';

		if (de->d_name[0] == '.')
			continue;
		snprintf(st, sizeof(st), "/proc/%d/task/%s/stat", (int)pid,
			 de->d_name);
		f = fopen(st, "r");
		if (f && fgets(st, sizeof(st), f)) {
			char *rp = strrchr(st, ')');

			if (rp && rp[1] == ' ')
				state = rp[2];
		}
		if (f)
			fclose(f);
		n += state != 'Z' && state != 'X';
	}
	closedir(d);
	return n;
}

/*
 * SIGKILLs the daemon and cleans up the dead mount. A daemon thread
 * killed inside a reverse invalidation (FUSE_NOTIFY_INVAL_ENTRY waits,
 * uninterruptibly, for the directory's lock, held by a client whose request
 * only this daemon could answer) never exits, and the kernel aborts the
 * connection only when the daemon's /dev/fuse is released: that is a
 * kernel limit, not kvfs's. kvfs-mount's watchdog (mount/mount_dead.c)
 * aborts the connection a second after such a kill; a daemon whose tasks
 * are still there after 3 s is stuck (it fails the run), counted, then
 * released the way an operator would: writing 1 to
 * /sys/fs/fuse/connections/DEV/abort. One gone after 1 s or more was
 * released by the watchdog (counted as late).
 */
static void kill_daemon(struct kvfs_mnt *m, dev_t dev)
{
	char p[128];
	int fd, i;

	kill(m->pid, SIGKILL);
	killed_daemons++;
	for (i = 0; i < 300 && live_tasks(m->pid); i++)
		sleep_ms(10);
	if (i >= 100 && i < 300)
		late_daemons++;
	if (i == 300) {
		stuck_daemons++;
		fprintf(stderr, "kvfs_faults: the killed daemon is stuck in "
			"the kernel; aborting FUSE connection %u\n",
			minor(dev));
		snprintf(p, sizeof(p), "/sys/fs/fuse/connections/%u/abort",
			 minor(dev));
		if (access("/sys/fs/fuse/connections", F_OK) == 0 &&
		    access(p, F_OK) && mount("fusectl",
					    "/sys/fs/fuse/connections",
					    "fusectl", 0, NULL))
			perror("kvfs_faults: mount fusectl");
		fd = open(p, O_WRONLY);
		if (fd < 0 || write(fd, "1", 1) != 1)
			fprintf(stderr, "kvfs_faults: %s: %s\n", p,
				strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	kvfs_test_umount(m); /* reports the kill; the mount is gone */
}

/*
 * Writer processes killed mid-chunk: each creates a key (or a temporary),
 * writes part of its bytes and SIGKILLs itself. Returns how many of them
 * are listed afterwards with other bytes than the oracle's (must be 0).
 */
static uint64_t kill_writers(struct kvfs_mnt *m, const struct load_cfg *c,
			     int n)
{
	uint64_t bad = 0;
	char p[4400], name[33];

	for (int i = 0; i < n; i++) {
		uint64_t id = c->nids + 1000 + rnd(1u << 20); /* no load id */
		size_t len = load_len(c, id) / 2 + 1;
		uint8_t *buf = malloc(len);
		pid_t pid;

		if (!buf)
			continue;
		/* everything prepared before the fork: the load's threads may
		 * hold malloc's locks, so the child only makes system calls */
		kvfs_test_fill(buf, len, id, 0);
		load_name(id, name);
		snprintf(p, sizeof(p), "%s/ns0/%s", m->dir, name);
		pid = fork();
		if (pid == 0) {
			int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);

			if (fd >= 0 && write(fd, buf, len) < 0)
				_exit(2);
			raise(SIGKILL);
			_exit(3);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
		free(buf);
		/* the half-written chunk is never published */
		int fd = open(p, O_RDONLY);

		if (fd >= 0) {
			long w = load_verify_fd(c, fd, id);

			close(fd);
			fprintf(stderr, "kvfs_faults: a killed writer's chunk "
				"%s is listed (%ld wrong bytes)\n", p, w);
			bad++;
		}
	}
	return bad;
}

static int seg_files(const char *dir, char names[][300], int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max)
		if (!strncmp(de->d_name, "seg-", 4))
			snprintf(names[n++], 300, "%s/%s", dir, de->d_name);
	closedir(d);
	return n;
}

/* Flips bytes in and truncates random segment files (unmounted). */
static void corrupt_segments(const char *dir)
{
	static char names[256][300];
	int n = seg_files(dir, names, 256);

	if (!n)
		return;
	for (int i = 0; i < 16; i++) {
		int fd = open(names[rnd((unsigned int)n)], O_RDWR);
		struct stat sb;

		if (fd < 0)
			continue;
		if (!fstat(fd, &sb) && sb.st_size > 0) {
			/* at a header, most of the time: the recovery path */
			off_t off = (off_t)rnd((unsigned int)(sb.st_size / 4096)) *
				    4096 + (rnd(4) ? (off_t)rnd(256) :
					    (off_t)rnd(4096));
			unsigned char b;

			if (pread(fd, &b, 1, off) == 1) {
				b ^= (unsigned char)(1u << rnd(8));
				if (pwrite(fd, &b, 1, off) != 1)
					perror("kvfs_faults: pwrite");
			}
		}
		close(fd);
	}
	for (int i = 0; i < 2; i++) {
		const char *f = names[rnd((unsigned int)n)];
		struct stat sb;

		if (!stat(f, &sb) && sb.st_size > 0 &&
		    truncate(f, (off_t)rnd((unsigned int)sb.st_size)))
			perror("kvfs_faults: truncate");
	}
}

/* Damages l2_dir/l2.ckpt (unmounted) one way in turn, or deletes a
 * segment file; returns true when the remount must scan. */
static bool damage_ckpt(const char *dir, unsigned int how)
{
	static char names[256][300];
	char p[4400];
	struct stat sb;
	int fd, n;

	snprintf(p, sizeof(p), "%s/l2.ckpt", dir);
	if (stat(p, &sb) || sb.st_size < 64)
		return true;
	switch (how % 4) {
	case 0: /* torn */
		if (truncate(p, (off_t)rnd((unsigned int)sb.st_size)))
			perror("kvfs_faults: truncate");
		return true;
	case 1: /* one bit anywhere */
	case 2: /* another l2_dir's: its l2.id field (bytes 16..23) */
		fd = open(p, O_RDWR);
		if (fd >= 0) {
			off_t off = how % 4 == 1 ? (off_t)rnd((unsigned int)sb.st_size)
						 : 16 + (off_t)rnd(8);
			unsigned char b;

			if (pread(fd, &b, 1, off) == 1) {
				b ^= (unsigned char)(1u << rnd(8));
				if (pwrite(fd, &b, 1, off) != 1)
					perror("kvfs_faults: pwrite");
			}
			close(fd);
		}
		return true;
	default: /* a segment deleted by hand: the checkpoint stands */
		n = seg_files(dir, names, 256);
		if (n && unlink(names[rnd((unsigned int)n)]))
			perror("kvfs_faults: unlink");
		return false;
	}
}

static void rm_dir_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[4400];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || strlen(de->d_name) > 2) {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
	closedir(d);
}

/* One round; returns 0, or -1 when a mount failed (a harness failure). */
static int round_run(enum fault f, const char *l2dir, struct load *l,
		     struct totals *t)
{
	struct kvfs_mnt m;
	uint64_t v = 0, w = 0, lost = 0, res = 0, foreign = 0, partial = 0;
	uint64_t ops = 0;
	struct stat sb;
	bool must_scan = false;
	long long ck_recs = -1, sc_recs = -1;
	int rc;

	if (do_mount_opt(&m, l2dir, f == F_CKPT ? ",l2_checkpoint_s=1" : "")) {
		t->remount_failures++;
		return -1;
	}
	if (stat(m.dir, &sb)) {
		kvfs_test_umount(&m);
		return -1;
	}
	rc = load_start(l, m.dir);
	if (rc) {
		fprintf(stderr, "kvfs_faults: load: %s\n", strerror(-rc));
		kvfs_test_umount(&m);
		return -1;
	}
	sleep_ms(f == F_CKPT ? 1000 + rnd(2500) : 400 + rnd(1600));
	if (f == F_WRITERS)
		partial = kill_writers(&m, &l->cfg, 8);
	if (f == F_CORRUPT || f == F_CKPTBAD) {
		load_stop(l);
		kvfs_test_umount(&m);
		if (f == F_CORRUPT)
			corrupt_segments(l2dir);
		else
			must_scan = damage_ckpt(l2dir, rnd(4));
	} else {
		kill_daemon(&m, sb.st_dev); /* at a random moment */
		load_stop(l);
	}
	for (int i = 0; i < LOP_N; i++)
		ops += atomic_load(&l->ops[i]);
	if (do_mount(&m, l2dir)) {
		fprintf(stderr, "kvfs_faults: remount on %s failed\n", l2dir);
		t->remount_failures++;
		return -1;
	}
	l->cfg.root = m.dir;
	ck_recs = kvfs_test_stat(&m, "l2_recovery", "ckpt_records");
	sc_recs = kvfs_test_stat(&m, "l2_recovery", "scan_records");
	rc = load_check_all(l, &v, &w, &lost, &res, &foreign);
	if (rc)
		fprintf(stderr, "kvfs_faults: check: %s\n", strerror(-rc));
	w += atomic_exchange(&l->wrong, 0); /* read under load */
	if (kvfs_test_umount(&m) != 0)
		fprintf(stderr, "kvfs_faults: unclean unmount after the check\n");
	printf("round %3llu %-8s ops %7llu verified %5llu wrong_bytes %llu "
	       "acked_lost %llu unlinks_undone %llu partial_listed %llu "
	       "recovered checkpoint %lld scan %lld\n",
	       (unsigned long long)t->rounds + 1, fault_names[f],
	       (unsigned long long)ops, (unsigned long long)v,
	       (unsigned long long)w, (unsigned long long)lost,
	       (unsigned long long)res, (unsigned long long)partial,
	       ck_recs, sc_recs);
	if ((f == F_CKPT || f == F_CKPTBAD) && res) {
		fprintf(stderr, "kvfs_faults: %s: %llu unlinks undone\n",
			fault_names[f], (unsigned long long)res);
		rc = -1;
	}
	if (f == F_CKPTBAD && must_scan && ck_recs != 0) {
		fprintf(stderr, "kvfs_faults: a damaged checkpoint was used "
			"(%lld records from it)\n", ck_recs);
		rc = -1;
	}
	if (f == F_CKPTBAD && !must_scan && sc_recs != 0) {
		fprintf(stderr, "kvfs_faults: a clean unmount's checkpoint "
			"was not used (%lld records scanned)\n", sc_recs);
		rc = -1;
	}
	fflush(stdout);
	for (int i = 0; i < LOP_N; i++)
		atomic_store(&l->ops[i], 0);
	t->rounds++;
	t->verified += v;
	t->wrong += w;
	t->lost += lost;
	t->resurrected += res;
	t->foreign += foreign;
	t->partial_listed += partial;
	t->ops += ops;
	return rc ? -1 : 0;
}

/* The paths fault: one round on pl2dir (l3: a redis URL, or NULL). */
static int paths_round(const char *pl2dir, const char *l3, struct pload *pl,
		       struct totals *t)
{
	char opts[4400];
	struct pload_tally r = { 0 };
	struct kvfs_mnt m;
	struct stat sb;
	uint64_t ops;
	int rc;

	snprintf(opts, sizeof(opts), "names=paths,l1_size=48M,max_chunk=1M,"
		 "l2_dir=%s,l2_size=256M,ingest=all,tmp_timeout=2%s%s%s",
		 pl2dir, l3 ? ",l3_ingest=all,l3=" : "", l3 ? l3 : "",
		 l3 ? ",l3_timeout_ms=500" : "");
	if (kvfs_test_mount(&m, opts) || stat(m.dir, &sb)) {
		t->remount_failures++;
		return -1;
	}
	rc = pload_start(pl, m.dir, "pns");
	if (rc) {
		fprintf(stderr, "kvfs_faults: paths load: %s\n", strerror(-rc));
		kvfs_test_umount(&m);
		return -1;
	}
	sleep_ms(1000 + rnd(4000));
	kill_daemon(&m, sb.st_dev);
	pload_stop(pl);
	ops = atomic_exchange(&pl->ops, 0);
	if (kvfs_test_mount(&m, opts)) {
		fprintf(stderr, "kvfs_faults: remount on %s failed\n", pl2dir);
		t->remount_failures++;
		return -1;
	}
	pload_check(pl, m.dir, "pns", &r);
	r.wrong += atomic_exchange(&pl->wrong, 0); /* read under load */
	if (kvfs_test_umount(&m) != 0)
		fprintf(stderr, "kvfs_faults: unclean unmount after the check\n");
	printf("round %3llu paths%s ops %7llu verified %5llu newer %llu "
	       "absent %llu older_versions %llu resurrected_unlinks %llu "
	       "wrong %llu\n", (unsigned long long)t->rounds + 1,
	       l3 ? "+l3" : "   ", (unsigned long long)ops,
	       (unsigned long long)r.verified, (unsigned long long)r.newer,
	       (unsigned long long)r.absent, (unsigned long long)r.older,
	       (unsigned long long)r.resurrected, (unsigned long long)r.wrong);
	fflush(stdout);
	t->rounds++;
	t->ops += ops;
	t->verified += r.verified;
	t->wrong += r.wrong;
	t->paths.older += r.older;
	t->paths.resurrected += r.resurrected;
	return r.older || r.resurrected || r.wrong ? -1 : 0;
}

int main(int argc, char **argv)
{
	char l2dir[] = "/var/tmp/kvfs-faults-XXXXXX";
	char small[] = "/var/tmp/kvfs-faults-full-XXXXXX";
	char pl2dir[] = "/var/tmp/kvfs-faults-paths-XXXXXX";
	char l3url[128] = "";
	struct rt_server redis = { 0 };
	struct pload pl;
	int npaths = 0;
	struct load_cfg c = {
		.nns = 2, .nids = 400, .min_len = 4096, .max_len = 512 * 1024,
		.writers = 3, .readers = 3,
	};
	struct load l;
	struct totals t = { 0 };
	bool small_ok;
	int rounds = 20, opt, fails = 0, only = -1;

	rnd_seed = (unsigned int)time(NULL);
	while ((opt = getopt(argc, argv, "r:s:f:")) != -1) {
		if (opt == 'f')
			only = atoi(optarg);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 's')
			rnd_seed = (unsigned int)strtoul(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: kvfs_faults [-r ROUNDS] "
				"[-s SEED] [-f FAULT]\n");
			return 2;
		}
	}
	c.seed = rnd_seed;
	printf("kvfs_faults: %d rounds, seed %u, daemon %s\n", rounds,
	       rnd_seed, kvfs_test_bin());
	if (!mkdtemp(l2dir) || !mkdtemp(small) || !mkdtemp(pl2dir)) {
		perror("kvfs_faults: mkdtemp");
		return 1;
	}
	small_ok = mount("tmpfs", small, "tmpfs", 0, "size=24m") == 0;
	if (!small_ok)
		fprintf(stderr, "kvfs_faults: no tmpfs for the full-L2 fault "
			"(%s): those rounds run on the normal l2_dir\n",
			strerror(errno));
	if (load_init(&l, &c) || pload_init(&pl, 64, rnd_seed)) {
		fprintf(stderr, "kvfs_faults: out of memory\n");
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		enum fault f = (enum fault)(only >= 0 ? only % F_N : i % F_N);
		const char *dir = f == F_FULL && small_ok ? small : l2dir;

		if (f == F_PATHS) {
			/* every other one with L3, when redis is there */
			if (npaths++ % 2 && !rt_skip_reason() && !l3url[0] &&
			    !rt_start(&redis, false, NULL))
				rt_url(&redis, l3url, sizeof(l3url));
			if (paths_round(pl2dir, npaths % 2 ? NULL :
					l3url[0] ? l3url : NULL, &pl, &t))
				fails++;
			continue;
		}
		if (f == F_FULL) {
			/* a fresh oracle state for the other directory */
			memset(l.state, 0, (size_t)(c.nns * c.nids));
		}
		if (round_run(f, dir, &l, &t))
			fails++;
		if (f == F_FULL) {
			rm_dir_files(small);
			memset(l.state, 0, (size_t)(c.nns * c.nids));
			/* what l2dir holds is again the state of record */
			struct kvfs_mnt m;

			if (!do_mount(&m, l2dir)) {
				uint64_t a = 0, b = 0, d = 0, e = 0, g = 0;

				l.cfg.root = m.dir;
				load_check_all(&l, &a, &b, &d, &e, &g);
				t.wrong += b;
				kvfs_test_umount(&m);
			}
		}
	}
	load_free(&l);
	pload_free(&pl);
	if (redis.pid)
		rt_stop(&redis, true);
	rm_dir_files(pl2dir);
	rmdir(pl2dir);
	if (small_ok)
		umount2(small, MNT_DETACH);
	rmdir(small);
	rm_dir_files(l2dir);
	rmdir(l2dir);
	printf("kvfs_faults: rounds %llu, operations %llu, chunks verified "
	       "%llu, wrong bytes %llu, acknowledged chunks lost %llu, unlinks "
	       "undone %llu, killed writers' chunks listed %llu, killed daemons "
	       "stuck in the kernel %llu of %llu (released late by the "
	       "watchdog %llu), failed rounds %d\n",
	       (unsigned long long)t.rounds, (unsigned long long)t.ops,
	       (unsigned long long)t.verified, (unsigned long long)t.wrong,
	       (unsigned long long)t.lost, (unsigned long long)t.resurrected,
	       (unsigned long long)t.partial_listed,
	       (unsigned long long)stuck_daemons,
	       (unsigned long long)killed_daemons,
	       (unsigned long long)late_daemons, fails);
	if (npaths)
		printf("kvfs_faults: paths rounds %d: older versions: %llu, "
		       "resurrected unlinks: %llu\n", npaths,
		       (unsigned long long)t.paths.older,
		       (unsigned long long)t.paths.resurrected);
	if (t.wrong || t.partial_listed || fails || !t.verified ||
	    stuck_daemons) {
		printf("kvfs_faults: FAILED\n");
		return 1;
	}
	return 0;
}
