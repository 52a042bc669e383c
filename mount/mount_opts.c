/*
 * mount_opts.c - kvfs-mount's -o options: the fuse_opt table (ours,
 * libfuse's passed through, fstab noise dropped), the checks of every
 * value, and the tier_config / fs_config / .kvfs/config built from them.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/mount_opts.h"
#include "tier/policy/policy.h"

#define MAX_CHUNK_DEFAULT (64ULL << 20)
#define FSNAME_MAX 255 /* bytes of fsname= (and of a mount(8) SOURCE) */
#define L1_CAP_DEFAULT (4ULL << 30) /* the arena is pre-faulted at mount */
#define WRITE_WAIT_MS_DEFAULT 3000

enum {
	KEY_DROP,      /* fstab noise */
	KEY_FUSE,      /* libfuse's own, passed through */
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_HELP,
	KEY_VERSION,
	KEY_MOUNT_IGN, /* mount(8) flags: -n -s -v */
	KEY_MOUNT_F,   /* mount(8) -f (fake) or our -f */
	KEY_FLUSH,     /* bare flush_on_exit */
	KEY_NOATIME,   /* atime options: what a chunk's atime shows */
	KEY_RELATIME,
	KEY_STRICTATIME,
};

#define MOPT(t, f) { t, offsetof(struct mopts, f), 0 }

static const struct fuse_opt opt_spec[] = {
	MOPT("l1_size=%s", l1_size),
	MOPT("policy=%s", policy),
	MOPT("max_chunk=%s", max_chunk),
	MOPT("seed=%s", seed),
	MOPT("cache=%s", cache),
	MOPT("pt_mem=%s", pt_mem),
	MOPT("lease_ms=%s", lease_ms),
	MOPT("l1=%s", l1),
	MOPT("l2_dir=%s", l2_dir),
	MOPT("l2_size=%s", l2_size),
	MOPT("compress=%s", compress),
	MOPT("shuffle=%s", shuffle),
	MOPT("ingest=%s", ingest),
	MOPT("hot_hits=%s", hot_hits),
	MOPT("l2_checkpoint_s=%s", l2_checkpoint_s),
	MOPT("l2_policy=%s", l2_policy),
	MOPT("flush_on_exit=%s", flush_on_exit),
	MOPT("tmp_timeout=%s", tmp_timeout),
	MOPT("write_wait_ms=%s", write_wait_ms),
	MOPT("names=%s", names),
	MOPT("max_dirs=%s", max_dirs),
	MOPT("metrics_http=%s", metrics_http),
	MOPT("ctl_mode=%s", ctl_mode),
	MOPT("ctl_gid=%s", ctl_gid),
	MOPT("readahead=%s", readahead),
	MOPT("wait_max=%s", wait_max),
	MOPT("fuse_uring=%s", fuse_uring),
	MOPT("wait_max_uid=%s", wait_max_uid),
	MOPT("wait_recheck_ms=%s", wait_recheck_ms),
	MOPT("l3_notify=%s", l3_notify),
	FUSE_OPT_KEY("flush_on_exit", KEY_FLUSH),
	/* L3 */
	MOPT("l3=%s", l3),
	MOPT("l3_cluster=%s", l3_cluster),
	MOPT("l3_auth_file=%s", l3_auth_file),
	MOPT("l3_ingest=%s", l3_ingest),
	MOPT("l3_timeout_ms=%s", l3_timeout_ms),
	MOPT("l3_write_timeout_ms=%s", l3_write_timeout_ms),
	MOPT("l3_prefix=%s", l3_prefix),
	/* KV events (mount/mount_events.c) */
	MOPT("events=%s", ev.events),
	MOPT("events_replay=%s", ev.events_replay),
	MOPT("node=%s", ev.node),
	MOPT("events_format=%s", ev.events_format),
	MOPT("events_hash=%s", ev.events_hash),
	MOPT("events_buffer=%s", ev.events_buffer),
	MOPT("l3_user=%s", l3_user),
	{ "overmount", offsetof(struct mopts, overmount), 1 },

	/* libfuse's own mount options */
	FUSE_OPT_KEY("allow_other", KEY_FUSE),
	FUSE_OPT_KEY("allow_root", KEY_FUSE),
	FUSE_OPT_KEY("auto_unmount", KEY_FUSE),
	FUSE_OPT_KEY("default_permissions", KEY_DROP), /* always on */
	FUSE_OPT_KEY("ro", KEY_FUSE),
	FUSE_OPT_KEY("noexec", KEY_FUSE),
	FUSE_OPT_KEY("exec", KEY_FUSE),
	FUSE_OPT_KEY("noatime", KEY_NOATIME),
	FUSE_OPT_KEY("atime", KEY_FUSE),
	FUSE_OPT_KEY("fsname=", KEY_FUSE),
	FUSE_OPT_KEY("max_read=", KEY_FUSE),
	MOPT("max_read=%s", max_read), /* also ours: init() must agree */

	/* fstab / mount(8) noise */
	FUSE_OPT_KEY("rw", KEY_DROP),
	FUSE_OPT_KEY("defaults", KEY_DROP),
	FUSE_OPT_KEY("auto", KEY_DROP),
	FUSE_OPT_KEY("noauto", KEY_DROP),
	FUSE_OPT_KEY("user", KEY_DROP),
	FUSE_OPT_KEY("nouser", KEY_DROP),
	FUSE_OPT_KEY("users", KEY_DROP),
	FUSE_OPT_KEY("owner", KEY_DROP),
	FUSE_OPT_KEY("group", KEY_DROP),
	FUSE_OPT_KEY("_netdev", KEY_DROP),
	FUSE_OPT_KEY("nofail", KEY_DROP),
	FUSE_OPT_KEY("nosuid", KEY_DROP),
	FUSE_OPT_KEY("nodev", KEY_DROP),
	FUSE_OPT_KEY("suid", KEY_DROP),
	FUSE_OPT_KEY("dev", KEY_DROP),
	FUSE_OPT_KEY("async", KEY_DROP),
	FUSE_OPT_KEY("relatime", KEY_RELATIME),
	FUSE_OPT_KEY("strictatime", KEY_STRICTATIME),
	FUSE_OPT_KEY("comment=", KEY_DROP),
	FUSE_OPT_KEY("subtype=", KEY_DROP),

	FUSE_OPT_KEY("-f", KEY_MOUNT_F),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-n", KEY_MOUNT_IGN),
	FUSE_OPT_KEY("-s", KEY_MOUNT_IGN),
	FUSE_OPT_KEY("-v", KEY_MOUNT_IGN),
	FUSE_OPT_END
};

void mopts_usage(FILE *f, const char *prog)
{
	fprintf(f,
"usage: %s [-f] [-d] [-o opt[,opt...]] MOUNTPOINT\n"
"       mount.kvfs SOURCE MOUNTPOINT [-o opts]\n"
"\n"
"  -f                 stay in the foreground\n"
"  -d                 FUSE debug output (implies -f)\n"
"  -o l1_size=SIZE    L1 arena bytes, K/M/G/T suffixes\n"
"                     (default 25%% of MemTotal, at most 4G)\n"
"  -o policy=NAME     lru|fifo|s3fifo|prefix|s2lru (default prefix)\n"
"  -o max_chunk=SIZE  largest chunk (default 64M, at most l1_size)\n"
"  -o seed=N          key seed engines should use (shown in .kvfs/config)\n"
"  -o cache=MODE      direct (default: reads served from the arena),\n"
"                     page (kernel page cache, keep_cache) or\n"
"                     passthrough (the kernel reads shadow copies)\n"
"  -o pt_mem=SIZE     cache=passthrough: bytes of shadows (l1_size/2)\n"
"  -o lease_ms=MS     default lease of pinned lookups (30000)\n"
"  -o l1=SPEC         host|pinned|cuda[:N]|auto (default auto: pinned\n"
"                     where CUDA and a GPU are usable, else host)\n"
"  -o l2_dir=PATH     enable L2 in PATH;  l2_size=SIZE\n"
"  -o compress=zstd[:LEVEL]|none   shuffle=0|2|4\n"
"  -o ingest=all|hot|evicted|twice   hot_hits=N   l2_policy=fifo\n"
"  -o l2_checkpoint_s=N   checkpoint the L2 index every N s (0: at unmount)\n"
"  -o flush_on_exit[=0|1]   write L1 to L2 at unmount\n"
"  -o readahead=N     chunks promoted from L2/L3 ahead of a reader that\n"
"                     follows a chain, at most (16; 0 = off; <= 1024)\n"
"  -o wait_max=N,wait_max_uid=N   waiting lookups/GETs at once, in all\n"
"                     (32) and per user (8); past them: EAGAIN\n"
"  -o wait_recheck_ms=MS   waiters re-check L3 this often (50, <= 100)\n"
"  -o l3_notify=0|1   announce L3 stores to other nodes' waiters (1)\n"
"  -o fuse_uring=auto|on|off  FUSE requests over io_uring, each CPU's\n"
"                     served on that CPU (auto: where the kernel offers\n"
"                     it; on: sets fuse's enable_uring, else fails)\n"
"  -o tmp_timeout=SECONDS   drop closed, unrenamed temporaries (60)\n"
"  -o write_wait_ms=MS  a write waits this long for room in L1 before\n"
"                     ENOSPC (3000; 0 = not at all)\n"
"  -o names=keys|paths      what new namespaces hold (keys)\n"
"  -o max_dirs=N            directories of path namespaces, in all (4194304)\n"
"  -o l3=redis://HOST:PORT[,HOST:PORT...]   L3 on Redis / Redis Cluster\n"
"  -o l3_cluster=auto|yes|no   l3_auth_file=PATH (the password, AUTH)\n"
"  -o l3_ingest=evicted|all|hot   l3_timeout_ms=MS (50)   l3_prefix=STR\n"
"  -o l3_write_timeout_ms=MS   the bound of an L3 write's try (2000)\n"
"  -o events=ENDPOINT publish KV events (ZeroMQ PUB, vLLM's format):\n"
"                     tcp://*:5557 binds, tcp://host:5557 connects\n"
"  -o events_replay=ENDPOINT  replay socket (ROUTER)   node=NAME\n"
"  -o events_format=map|array  events_hash=u64|bytes  events_buffer=N\n"
"  -o l3_user=NAME     an ACL user (its password in l3_auth_file)\n"
"  -o overmount       mount even where a kvfs is mounted already (hiding it)\n"
"  -o relatime|noatime|strictatime   what a chunk's atime shows (relatime)\n"
"  -o metrics_http=[ADDR]:PORT   serve GET /metrics over HTTP (:PORT =\n"
"                     loopback only; PORT 0: any free port)\n"
"  -o ctl_mode=MODE,ctl_gid=GROUP   mode (read bits, e.g. 0440) and group\n"
"                     of the .kvfs/ files (0444, the mount owner's group)\n"
"  -o allow_other,allow_root,auto_unmount,ro,noexec,fsname=NAME\n"
"                     passed to FUSE; default_permissions is always on\n",
		prog);
}

static void add_fuse_opt(struct mopts *o, const char *arg)
{
	size_t len = strlen(o->fuse_opts);

	if (!strncmp(arg, "fsname=", 7) && strlen(arg + 7) > FSNAME_MAX) {
		fprintf(stderr, "kvfs-mount: fsname is %zu bytes; at most %d\n",
			strlen(arg + 7), FSNAME_MAX);
		o->bad = 1;
		return;
	}
	if (len + strlen(arg) + 2 >= sizeof(o->fuse_opts)) {
		fprintf(stderr, "kvfs-mount: the options passed to FUSE "
			"exceed %zu bytes (at '%.40s')\n",
			sizeof(o->fuse_opts) - 1, arg);
		o->bad = 1;
		return;
	}
	snprintf(o->fuse_opts + len, sizeof(o->fuse_opts) - len, "%s%s",
		 len ? "," : "", arg);
}

/*
 * l3=redis://A:1,B:2: -o splits options at commas, so the seeds after the
 * first arrive as options of their own. A bare [redis://]HOST:PORT (no
 * '=') after l3= is one more seed. True when arg was taken.
 */
static bool l3_more_seeds(struct mopts *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	char *joined;

	if (!o->l3 || strchr(arg, '=') || !colon || colon == arg ||
	    !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return false;
	if (asprintf(&joined, "%s,%s", o->l3, arg) < 0)
		return false;
	free(o->l3);
	o->l3 = joined;
	return true;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct mopts *o = data;

	switch (key) {
	case KEY_DROP:
	case KEY_MOUNT_IGN:
		return 0;
	case KEY_FUSE:
		add_fuse_opt(o, arg);
		return 0;
	case KEY_NOATIME:
		o->atime = FS_ATIME_NOATIME;
		add_fuse_opt(o, arg); /* the kernel's flag too */
		return 0;
	case KEY_RELATIME:
		o->atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_STRICTATIME:
		o->atime = FS_ATIME_STRICT;
		return 0;
	case KEY_FLUSH:
		free(o->flush_on_exit); /* flush_on_exit=X given before */
		o->flush_on_exit = strdup("1");
		return 0;
	case KEY_MOUNT_F:
		if (o->mount_form)
			o->fake = 1;
		else
			o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 0;
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (o->nargs >= 2) {
			fprintf(stderr, "kvfs-mount: unexpected argument "
				"'%s'\n", arg);
			o->bad = 1;
			return -1;
		}
		o->args[o->nargs++] = strdup(arg);
		return 0;
	case FUSE_OPT_KEY_OPT:
	default:
		if (!strncmp(arg, "-t", 2))
			return 0; /* mount(8) passes the type; ignore */
		if (!strncmp(arg, "x-", 2))
			return 0; /* fstab: x-systemd.automount and friends */
		if (l3_more_seeds(o, arg))
			return 0;
		fprintf(stderr, "kvfs-mount: unknown option '%s'\n", arg);
		o->bad = 1;
		return -1;
	}
}

/* A size with an optional K/M/G/T suffix (powers of 1024). */
int mopts_parse_size(const char *name, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || !*s || *s == '-' || *s == ' ')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		goto bad;
	switch (*end) {
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	case 't': case 'T': mul = 1ULL << 40; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (mul > 1 && v > ~0ULL / mul))
		goto bad;
	*out = v * mul;
	return 0;
bad:
	fprintf(stderr, "kvfs-mount: bad %s '%s' (a size such as 512M or 4G)\n",
		name, s ? s : "");
	return -1;
}

int mopts_parse_num(const char *name, const char *s, uint64_t max,
		     uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == ' ')
		goto bad;
	errno = 0;
	/* decimal, or hex after 0x; never octal (seed=010 is ten) */
	*out = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ?
			16 : 10);
	if (errno || end == s || *end || *out > max)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "kvfs-mount: bad %s '%s' (a number up to %" PRIu64
		")\n", name, s ? s : "", max);
	return -1;
}

static uint64_t mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

static int one_of(const char *name, const char *v, const char *const *ok)
{
	for (int i = 0; ok[i]; i++)
		if (!strcmp(v, ok[i]))
			return i;
	fprintf(stderr, "kvfs-mount: bad %s '%s' (one of:", name, v);
	for (int i = 0; ok[i]; i++)
		fprintf(stderr, " %s", ok[i]);
	fprintf(stderr, ")\n");
	return -1;
}

/* ---------------------------------------------------------------- L3 */

/* The L3 password, read from l3_auth_file at mount (never from the
 * command line); wiped once the engine has its own copy. */
static char l3_password[1024];

static int read_auth_file(const char *path)
{
	struct stat st;
	size_t n;
	FILE *f = fopen(path, "re");

	if (!f) {
		fprintf(stderr, "kvfs-mount: l3_auth_file %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077))
		fprintf(stderr, "kvfs-mount: note: l3_auth_file %s can be read "
			"by other users (chmod 600 it)\n", path);
	n = fread(l3_password, 1, sizeof(l3_password) - 1, f);
	if (ferror(f)) { /* a directory, an I/O error */
		fprintf(stderr, "kvfs-mount: l3_auth_file %s: %s\n", path,
			strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	l3_password[n] = '\0';
	/* one line: the password, without its newline */
	l3_password[strcspn(l3_password, "\r\n")] = '\0';
	if (!l3_password[0]) {
		fprintf(stderr, "kvfs-mount: l3_auth_file %s: empty (the "
			"first line is the password)\n", path);
		return -1;
	}
	return 0;
}

/* The l3* options into tc (tc->l3 NULL: L3 off). */
/* A bound in milliseconds, 1..60000, into *out. 0 or -1 (said why). */
static int parse_ms(const char *name, const char *s, int *out)
{
	uint64_t v;

	if (mopts_parse_num(name, s, 60000, &v))
		return -1;
	if (!v) {
		fprintf(stderr, "kvfs-mount: %s must be at least 1\n", name);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int build_l3(struct mopts *o, struct tier_config *tc)
{
	static const char *const clusters[] = { "auto", "yes", "no", NULL };
	static const char *const ingests[] = { "evicted", "all", "hot", NULL };
	int i;

	if (!o->l3) {
		if (o->l3_cluster || o->l3_auth_file || o->l3_ingest ||
		    o->l3_timeout_ms || o->l3_prefix || o->l3_user ||
		    o->l3_write_timeout_ms) {
			fprintf(stderr, "kvfs-mount: l3_* options need l3=\n");
			return -1;
		}
		return 0;
	}
	if (!*o->l3) {
		fprintf(stderr, "kvfs-mount: empty l3 (want redis://HOST:PORT"
			"[,HOST:PORT...])\n");
		return -1;
	}
	tc->l3 = o->l3;
	if (o->l3_cluster) {
		if ((i = one_of("l3_cluster", o->l3_cluster, clusters)) < 0)
			return -1;
		tc->l3_cluster = i == 0 ? L3R_AUTO : i == 1 ? L3R_CLUSTER
							   : L3R_STANDALONE;
	}
	if (o->l3_ingest) {
		if ((i = one_of("l3_ingest", o->l3_ingest, ingests)) < 0)
			return -1;
		tc->l3_ingest = i == 0 ? TIER_INGEST_EVICTED :
				i == 1 ? TIER_INGEST_ALL : TIER_INGEST_HOT;
	}
	if (o->l3_timeout_ms &&
	    parse_ms("l3_timeout_ms", o->l3_timeout_ms, &tc->l3_timeout_ms))
		return -1;
	if (o->l3_write_timeout_ms &&
	    parse_ms("l3_write_timeout_ms", o->l3_write_timeout_ms,
		     &tc->l3_write_timeout_ms))
		return -1;
	if (o->l3_prefix)
		tc->l3_prefix = o->l3_prefix; /* checked by the engine */
	if (o->l3_auth_file) {
		if (read_auth_file(o->l3_auth_file))
			return -1;
		tc->l3_password = l3_password;
	}
	if (o->l3_user) { /* an ACL user: AUTH user password */
		if (!o->l3_auth_file || !*o->l3_user ||
		    strpbrk(o->l3_user, " \t\r\n")) {
			fprintf(stderr, "kvfs-mount: l3_user needs a name (no "
				"spaces) and l3_auth_file (its password)\n");
			return -1;
		}
		tc->l3_user = o->l3_user;
	}
	return 0;
}

/* ctl_mode, ctl_gid, metrics_http: who may read the counters. */
static int build_ctl(struct mopts *o, struct fs_config *fc)
{
	char *end;
	unsigned long v;

	if (o->ctl_mode) {
		errno = 0;
		v = strtoul(o->ctl_mode, &end, 8);
		if (errno || end == o->ctl_mode || *end || v > 0777 ||
		    (v & ~0444UL)) {
			fprintf(stderr, "kvfs-mount: bad ctl_mode '%s' (octal, "
				"read bits only: e.g. 0440, 0400)\n",
				o->ctl_mode);
			return -1;
		}
		fc->ctl_mode_set = true;
		fc->ctl_mode = (mode_t)v;
	}
	if (o->ctl_gid) {
		struct group gr, *g = NULL;
		char buf[4096];

		errno = 0;
		v = strtoul(o->ctl_gid, &end, 10);
		if (errno || end == o->ctl_gid || *end) { /* a name */
			if (getgrnam_r(o->ctl_gid, &gr, buf, sizeof(buf), &g))
				g = NULL;
			v = g ? (unsigned long)g->gr_gid : (gid_t)-1;
		}
		if (v >= (gid_t)-1) {
			fprintf(stderr, "kvfs-mount: bad ctl_gid '%s' (a group "
				"id or name)\n", o->ctl_gid);
			return -1;
		}
		fc->ctl_gid_set = true;
		fc->ctl_gid = (gid_t)v;
	}
	if (o->metrics_http && mount_http_parse(o->metrics_http, &o->http))
		return -1;
	return 0;
}

/* wait_max, wait_max_uid, wait_recheck_ms, l3_notify: waiting lookups
 * and GETs (fs/fs_wait.h, tier/tier_wait.h). */
static int build_wait(struct mopts *o, struct tier_config *tc,
		      struct fs_config *fc)
{
	uint64_t v;

	fc->wait_max = FS_WAIT_MAX_DEFAULT;
	fc->wait_max_uid = FS_WAIT_MAX_UID_DEFAULT;
	tc->wait_recheck_ms = TIER_WAIT_RECHECK_MS_DEFAULT;
	if (o->wait_max) {
		if (mopts_parse_num("wait_max", o->wait_max,
				    FS_WAIT_MAX_LIMIT, &v))
			return -1;
		fc->wait_max = (uint32_t)v;
	}
	if (o->wait_max_uid) {
		if (mopts_parse_num("wait_max_uid", o->wait_max_uid,
				    FS_WAIT_MAX_LIMIT, &v))
			return -1;
		fc->wait_max_uid = (uint32_t)v;
	}
	if (!fc->wait_max || !fc->wait_max_uid ||
	    fc->wait_max_uid > fc->wait_max) {
		fprintf(stderr, "kvfs-mount: wait_max %u, wait_max_uid %u: "
			"need 1 <= wait_max_uid <= wait_max\n", fc->wait_max,
			fc->wait_max_uid);
		return -1;
	}
	if (o->wait_recheck_ms) {
		if (mopts_parse_num("wait_recheck_ms", o->wait_recheck_ms,
				    TIER_WAIT_RECHECK_MS_MAX, &v))
			return -1;
		if (!v) {
			fprintf(stderr, "kvfs-mount: wait_recheck_ms must be "
				"at least 1\n");
			return -1;
		}
		tc->wait_recheck_ms = (uint32_t)v;
	}
	if (o->l3_notify) {
		if (mopts_parse_num("l3_notify", o->l3_notify, 1, &v))
			return -1;
		tc->l3_notify_off = v == 0;
	}
	return 0;
}

/* Turns the option strings into engine and fs configurations. */
int mopts_build(struct mopts *o, struct tier_config *tc,
			struct fs_config *fc)
{
	static const char *const caches[] = { "direct", "page",
					      "passthrough", NULL };
	static const char *const ingests[] = { "evicted", "all", "hot",
					       "twice", NULL };
	static const char *const l2pols[] = { "fifo", NULL };
	uint64_t v;
	char *cfg = fc->config_text;
	size_t cl = sizeof(fc->config_text);
	int n = 0;

	memset(tc, 0, sizeof(*tc));
	tier_config_default(tc);
	memset(fc, 0, sizeof(*fc));
	fc->cache = FS_CACHE_DIRECT;
	fc->lease_ms = 30000;
	fc->tmp_timeout_ms = 60000;
	fc->write_wait_ms = WRITE_WAIT_MS_DEFAULT;
	fc->atime = (enum fs_atime)o->atime;

	if (o->l1_size) {
		if (mopts_parse_size("l1_size", o->l1_size, &tc->l1_size))
			return -1;
	} else {
		/* a quarter of RAM: the rest stays for the engine and the
		 * page cache; capped because the arena is pre-faulted */
		uint64_t m = mem_total() / 4;

		tc->l1_size = m ? m : 1ULL << 30;
		if (tc->l1_size > L1_CAP_DEFAULT)
			tc->l1_size = L1_CAP_DEFAULT;
		tc->l1_size &= ~((1ULL << 20) - 1);
	}
	if (o->max_chunk) {
		if (mopts_parse_size("max_chunk", o->max_chunk, &tc->max_chunk))
			return -1;
		if (!tc->max_chunk || tc->max_chunk > tc->l1_size) {
			fprintf(stderr, "kvfs-mount: max_chunk %s must be "
				"between 1 and l1_size\n", o->max_chunk);
			return -1;
		}
	} else {
		tc->max_chunk = MAX_CHUNK_DEFAULT < tc->l1_size ?
				MAX_CHUNK_DEFAULT : tc->l1_size;
	}
	if (o->policy) {
		/* every policy of tier/policy/policy.c's table, by name */
		if (one_of("policy", o->policy, policy_names()) < 0)
			return -1;
		tc->policy = o->policy;
	}
	fc->fuse_uring = 1; /* auto */
	if (o->fuse_uring) {
		static const char *const urings[] = { "off", "auto", "on",
						      NULL };
		int c = one_of("fuse_uring", o->fuse_uring, urings);

		if (c < 0)
			return -1;
		fc->fuse_uring = c;
	}
	if (o->cache) {
		int c = one_of("cache", o->cache, caches);

		if (c < 0)
			return -1;
		fc->cache = c == 2 ? FS_CACHE_PASSTHROUGH :
			    c ? FS_CACHE_PAGE : FS_CACHE_DIRECT;
	}
	fc->pt_mem = tc->l1_size / 2;
	if (o->pt_mem) {
		if (mopts_parse_size("pt_mem", o->pt_mem, &fc->pt_mem))
			return -1;
		if (!fc->pt_mem) {
			fprintf(stderr, "kvfs-mount: pt_mem must be at least "
				"1 byte\n");
			return -1;
		}
		if (fc->cache != FS_CACHE_PASSTHROUGH) {
			fprintf(stderr, "kvfs-mount: pt_mem needs "
				"cache=passthrough\n");
			return -1;
		}
		/* shadows are host memory the daemon allocates as chunks
		 * come: a bound past the machine's would hold only until
		 * the OOM killer came */
		v = mem_total();
		if (v && fc->pt_mem > v) {
			fprintf(stderr, "kvfs-mount: pt_mem %s is more than "
				"this machine's memory (%" PRIu64 " MiB)\n",
				o->pt_mem, v >> 20);
			return -1;
		}
	}
	if (o->seed && mopts_parse_num("seed", o->seed, UINT64_MAX, &fc->seed))
		return -1;
	if (o->lease_ms) {
		if (mopts_parse_num("lease_ms", o->lease_ms, 86400000, &v))
			return -1;
		if (!v) {
			fprintf(stderr, "kvfs-mount: lease_ms must be at least "
				"1\n");
			return -1;
		}
		fc->lease_ms = (uint32_t)v;
	}
	if (o->tmp_timeout) {
		if (mopts_parse_num("tmp_timeout", o->tmp_timeout, 86400, &v))
			return -1;
		fc->tmp_timeout_ms = (uint32_t)(v * 1000);
	}
	if (o->write_wait_ms) {
		if (mopts_parse_num("write_wait_ms", o->write_wait_ms, 600000,
				    &v))
			return -1;
		fc->write_wait_ms = (uint32_t)v;
	}
	if (o->max_read) {
		if (mopts_parse_num("max_read", o->max_read, UINT32_MAX, &v))
			return -1;
		fc->max_read = (uint32_t)v;
	}
	if (o->names) {
		static const char *const names[] = { "keys", "paths", NULL };
		int c = one_of("names", o->names, names);

		if (c < 0)
			return -1;
		fc->names_paths = c == 1;
	}
	fc->max_dirs = FS_PATH_DIRS_DEFAULT;
	if (o->max_dirs) {
		if (mopts_parse_num("max_dirs", o->max_dirs, UINT32_MAX, &v))
			return -1;
		if (!v) {
			fprintf(stderr, "kvfs-mount: max_dirs must be at least "
				"1\n");
			return -1;
		}
		fc->max_dirs = v;
	}
	if (build_ctl(o, fc))
		return -1;
	/* auto: pinned where CUDA and a GPU are usable, else host */
	tc->l1 = "auto";
	if (o->l1) {
		if (strcmp(o->l1, "host") && strcmp(o->l1, "pinned") &&
		    strcmp(o->l1, "cuda") && strncmp(o->l1, "cuda:", 5) &&
		    strcmp(o->l1, "auto")) {
			fprintf(stderr, "kvfs-mount: bad l1 '%s' (host, "
				"pinned, cuda, cuda:N or auto)\n", o->l1);
			return -1;
		}
		tc->l1 = o->l1;
	}
	if (o->l2_dir) {
		if (!*o->l2_dir) {
			fprintf(stderr, "kvfs-mount: empty l2_dir\n");
			return -1;
		}
		if (o->l2_dir[0] != '/') {
			/* the daemon leaves the working directory */
			char cwd[PATH_MAX], *abs;

			if (!getcwd(cwd, sizeof(cwd)) ||
			    asprintf(&abs, "%s/%s", cwd, o->l2_dir) < 0) {
				fprintf(stderr, "kvfs-mount: l2_dir %s: %s\n",
					o->l2_dir, strerror(errno));
				return -1;
			}
			free(o->l2_dir);
			o->l2_dir = abs;
		}
		tc->l2_dir = o->l2_dir;
	}
	if (o->l2_size && mopts_parse_size("l2_size", o->l2_size, &tc->l2_size))
		return -1;
	if (o->compress) {
		if (!strcmp(o->compress, "none")) {
			tc->compress_level = 0;
		} else if (!strcmp(o->compress, "zstd")) {
			if (!tc->compress_level)
				tc->compress_level = 1;
		} else if (!strncmp(o->compress, "zstd:", 5)) {
			char *end;
			long l;

			errno = 0;
			l = strtol(o->compress + 5, &end, 10);
			if (errno || end == o->compress + 5 || *end ||
			    l < 1 || l > 22) {
				fprintf(stderr, "kvfs-mount: bad compress "
					"'%s' (zstd:1..22)\n", o->compress);
				return -1;
			}
			tc->compress_level = (int)l;
		} else {
			fprintf(stderr, "kvfs-mount: bad compress '%s' "
				"(zstd, zstd:LEVEL or none)\n", o->compress);
			return -1;
		}
	}
	if (o->shuffle) {
		if (mopts_parse_num("shuffle", o->shuffle, 4, &v) || v == 1 ||
		    v == 3) {
			if (v == 1 || v == 3)
				fprintf(stderr, "kvfs-mount: bad shuffle '%s' "
					"(0, 2 or 4)\n", o->shuffle);
			return -1;
		}
		tc->shuffle = (int)v;
	}
	if (o->ingest) {
		int i = one_of("ingest", o->ingest, ingests);

		if (i < 0)
			return -1;
		tc->ingest = i == 0 ? TIER_INGEST_EVICTED :
			     i == 1 ? TIER_INGEST_ALL :
			     i == 2 ? TIER_INGEST_HOT : TIER_INGEST_TWICE;
	}
	if (o->hot_hits) {
		if (mopts_parse_num("hot_hits", o->hot_hits, UINT32_MAX, &v))
			return -1;
		tc->hot_hits = (uint32_t)v;
	}
	if (o->l2_checkpoint_s) {
		if (mopts_parse_num("l2_checkpoint_s", o->l2_checkpoint_s, 86400, &v))
			return -1;
		tc->l2_checkpoint_s = (int)v;
	}
	/* L2 reclaims whole segments oldest first (re-inserting hot
	 * records): that is the only L2 order the engine has. */
	if (o->l2_policy && one_of("l2_policy", o->l2_policy, l2pols) < 0)
		return -1;
	if (o->flush_on_exit) {
		if (mopts_parse_num("flush_on_exit", o->flush_on_exit, 1, &v))
			return -1;
		tc->flush_on_exit = v;
	}
	tc->readahead = TIER_READAHEAD_DEFAULT;
	if (o->readahead) {
		if (mopts_parse_num("readahead", o->readahead, TIER_READAHEAD_MAX, &v))
			return -1;
		tc->readahead = (uint32_t)v;
	}
	if (build_l3(o, tc))
		return -1;
	if (build_wait(o, tc, fc))
		return -1;
	/* compress and shuffle also shape L3's records */
	if (!tc->l2_dir && (o->l2_size ||
			    ((o->compress || o->shuffle) && !tc->l3) ||
			    o->ingest || (o->hot_hits && !tc->l3) ||
			    o->l2_policy || o->l2_checkpoint_s ||
			    (o->flush_on_exit && tc->flush_on_exit)))
		fprintf(stderr, "kvfs-mount: note: L2 options have no effect "
			"without l2_dir\n");

#define CFG(...) do { \
	if ((size_t)n < cl) \
		n += snprintf(cfg + n, cl - (size_t)n, __VA_ARGS__); \
} while (0)
	CFG("l1_size=%" PRIu64 "\n", tc->l1_size);
	CFG("max_chunk=%" PRIu64 "\n", tc->max_chunk);
	CFG("policy=%s\n", tc->policy ? tc->policy : "prefix");
	CFG("l1=%s\n", tc->l1);
	CFG("cache=%s\n", fc->cache == FS_CACHE_PAGE ? "page" :
	    fc->cache == FS_CACHE_PASSTHROUGH ? "passthrough" : "direct");
	if (fc->cache == FS_CACHE_PASSTHROUGH)
		CFG("pt_mem=%" PRIu64 "\n", fc->pt_mem);
	CFG("seed=%" PRIu64 "\n", fc->seed);
	CFG("lease_ms=%u\n", fc->lease_ms);
	CFG("tmp_timeout=%u\n", fc->tmp_timeout_ms / 1000);
	CFG("write_wait_ms=%u\n", fc->write_wait_ms);
	CFG("names=%s\n", fc->names_paths ? "paths" : "keys");
	CFG("max_dirs=%" PRIu64 "\n", fc->max_dirs);
	CFG("ctl_mode=%04o\n", fc->ctl_mode_set ? (unsigned)fc->ctl_mode :
	    0444u);
	if (fc->ctl_gid_set)
		CFG("ctl_gid=%u\n", (unsigned)fc->ctl_gid);
	CFG("atime=%s\n", fc->atime == FS_ATIME_NOATIME ? "noatime" :
	    fc->atime == FS_ATIME_STRICT ? "strictatime" : "relatime");
	CFG("l2_dir=%s\n", tc->l2_dir ? tc->l2_dir : "");
	CFG("l2_size=%" PRIu64 "\n", tc->l2_size);
	if (tc->compress_level)
		CFG("compress=zstd:%d\n", tc->compress_level);
	else
		CFG("compress=none\n");
	CFG("shuffle=%d\n", tc->shuffle);
	CFG("ingest=%s\n", tc->ingest == TIER_INGEST_ALL ? "all" :
	    tc->ingest == TIER_INGEST_HOT ? "hot" :
	    tc->ingest == TIER_INGEST_TWICE ? "twice" : "evicted");
	CFG("hot_hits=%u\n", tc->hot_hits);
	CFG("l2_policy=fifo\n");
	CFG("l2_checkpoint_s=%d\n", tc->l2_checkpoint_s);
	CFG("flush_on_exit=%d\n", tc->flush_on_exit ? 1 : 0);
	CFG("readahead=%u\n", tc->readahead);
	CFG("wait_max=%u\n", fc->wait_max);
	CFG("wait_max_uid=%u\n", fc->wait_max_uid);
	CFG("wait_recheck_ms=%u\n", tc->wait_recheck_ms);
	CFG("l3_notify=%d\n", tc->l3_notify_off ? 0 : 1);
	CFG("fuse_uring=%s\n", fc->fuse_uring == 0 ? "off" :
	    fc->fuse_uring == 1 ? "auto" : "on");
	CFG("max_write=1048576\n");
	/* L3 (never the password) */
	CFG("l3=%s\n", tc->l3 ? tc->l3 : "");
	CFG("l3_cluster=%s\n", tc->l3_cluster == L3R_CLUSTER ? "yes" :
	    tc->l3_cluster == L3R_STANDALONE ? "no" : "auto");
	CFG("l3_auth=%s\n", tc->l3_password ? "yes" : "no");
	CFG("l3_user=%s\n", tc->l3_user ? tc->l3_user : "");
	CFG("l3_ingest=%s\n", tc->l3_ingest == TIER_INGEST_ALL ? "all" :
	    tc->l3_ingest == TIER_INGEST_HOT ? "hot" : "evicted");
	CFG("l3_timeout_ms=%d\n", tc->l3_timeout_ms ? tc->l3_timeout_ms :
	    L3_TIMEOUT_MS_DEFAULT);
	CFG("l3_write_timeout_ms=%d\n", tc->l3_write_timeout_ms ?
	    tc->l3_write_timeout_ms : L3_WRITE_TIMEOUT_MS_DEFAULT);
	CFG("l3_prefix=%s\n", tc->l3_prefix ? tc->l3_prefix :
	    L3_PREFIX_DEFAULT);
#undef CFG
	if (mount_events_config(&o->ev, &o->evc, cfg, cl))
		return -1;
	return 0;
}

void mopts_free(struct mopts *o)
{
	char **s[] = { &o->l1_size, &o->policy, &o->max_chunk, &o->seed,
		       &o->cache, &o->pt_mem, &o->lease_ms, &o->l1, &o->l2_dir,
		       &o->l2_size, &o->compress, &o->shuffle, &o->ingest,
		       &o->hot_hits, &o->l2_checkpoint_s, &o->l2_policy,
		       &o->flush_on_exit,
		       &o->tmp_timeout, &o->write_wait_ms, &o->max_read,
		       &o->l3,
		       &o->l3_cluster, &o->l3_auth_file, &o->l3_ingest,
		       &o->l3_timeout_ms, &o->l3_prefix, &o->l3_user,
		       &o->l3_write_timeout_ms,
		       &o->names, &o->max_dirs, &o->metrics_http,
		       &o->ctl_mode, &o->ctl_gid, &o->readahead,
		       &o->wait_max, &o->wait_max_uid, &o->wait_recheck_ms,
		       &o->l3_notify, &o->fuse_uring, &o->args[0],
		       &o->args[1] };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		free(*s[i]);
		*s[i] = NULL;
	}
	mount_events_free(&o->ev);
}

void mopts_forget_secrets(void)
{
	explicit_bzero(l3_password, sizeof(l3_password));
}

/*
 * An option of ours given twice (l1_size=16M,l1_size=32M, or in two -o):
 * refused, since which one was meant is a guess. name: opt_spec's
 * template up to its '='. Options are split at commas not escaped with
 * a backslash, as fuse_opt does.
 */
static int count_dups(const char *list, unsigned *seen)
{
	const char *p = list;

	while (*p) {
		size_t n = 0;

		while (p[n] && p[n] != ',') {
			if (p[n] == '\\' && p[n + 1])
				n++;
			n++;
		}
		for (size_t i = 0; opt_spec[i].templ; i++) {
			const char *t = opt_spec[i].templ;
			const char *eq = strstr(t, "=%s");
			size_t k = eq ? (size_t)(eq - t) + 1 : 0;

			if (!eq || n < k ||
			    strncmp(p, t, k))
				continue;
			if (seen[i]++) {
				fprintf(stderr, "kvfs-mount: option '%.*s' "
					"given twice: give it once\n",
					(int)k - 1, t);
				return -1;
			}
			break;
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

static int check_dups(const struct fuse_args *args)
{
	unsigned seen[sizeof(opt_spec) / sizeof(opt_spec[0])] = { 0 };

	for (int i = 1; i < args->argc; i++) {
		const char *a = args->argv[i];

		if (!strcmp(a, "-o") && i + 1 < args->argc)
			a = args->argv[++i];
		else if (!strncmp(a, "-o", 2))
			a += 2;
		else
			continue;
		if (count_dups(a, seen))
			return -1;
	}
	return 0;
}

int mopts_parse(struct fuse_args *args, struct mopts *o)
{
	if (check_dups(args)) {
		o->bad = 1;
		return -1;
	}
	return fuse_opt_parse(args, o, opt_spec, opt_proc);
}
