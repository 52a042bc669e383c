/*
 * fs_nsfile.c - the namespaces file: the attributes of every namespace (and
 * of the root directory) that kvfs keeps outside the L2 records, so a warm
 * restart brings a namespace back with its owner, mode, chunk_bytes and
 * dtype, not only with its chunks. fs_nsmeta.c decides when it is read and
 * written; this file only knows the format and how to replace it safely.
 *
 * Format, version 2 (text, one record per line, fields separated by one
 * space, every line ending in '\n'):
 *
 *   kvfs-namespaces 2
 *   root MODE UID GID
 *   ns NAME MODE UID GID CHUNK_BYTES DTYPE SHUFFLE MTIME CTIME CHUNK_TOKENS
 *   ...
 *   sum HEX16
 *
 * MODE is the permission bits in octal (at most 07777); UID, GID,
 * CHUNK_BYTES, SHUFFLE (0, 2 or 4) and CHUNK_TOKENS (user.kvfs.chunk_tokens,
 * up to 4294967295) are decimal; DTYPE is the value of
 * user.kvfs.dtype or "-" when unset; MTIME and CTIME are SECONDS.NANOSECONDS
 * (nine digits). NAME is the namespace name with every byte outside
 * [A-Za-z0-9._+,:@=~-] written as %XX (names may hold any byte but '/').
 * HEX16 is XXH3-64 (seed 0, hashkey_checksum) of every byte before "sum",
 * in lowercase hex: a truncated, torn or edited file does not verify, and
 * the whole file is then rejected (the caller fails closed).
 *
 * A newer version number is rejected as well (-ENOTSUP): a daemon never
 * guesses at attributes it cannot read. Version 1 (no CHUNK_TOKENS, read
 * as 0) is still read; what is written is version 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "hash/hashkey.h"

#define NSFILE_MAGIC "kvfs-namespaces"
#define NSFILE_TMP FS_NSFILE_NAME ".tmp"
/* A line: "ns" + escaped name (3 x 127) + 9 numbers, with room to spare. */
#define NSFILE_LINE_MAX 640
#define NSFILE_SIZE_MAX (64u << 20)

/* ---------------------------------------------------------------- format */

static bool name_byte_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("._+,:@=~-", c));
}

/* Appends the escaped name to out (at least 3 * KVFS_NS_NAME_MAX + 1). */
static void name_escape(const char *name, char *out)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		if (name_byte_plain(*s)) {
			*out++ = (char)*s;
		} else {
			*out++ = '%';
			*out++ = hex[*s >> 4];
			*out++ = hex[*s & 15];
		}
	}
	*out = '\0';
}

/* The escaped token s (len bytes) -> out[KVFS_NS_NAME_MAX + 1]. -EBADMSG. */
static int name_unescape(const char *s, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EBADMSG;
			hi = fs_hexval(s[i + 1]);
			lo = fs_hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -EBADMSG;
			c = hi << 4 | lo;
			i += 2;
		} else if (!name_byte_plain((unsigned char)c)) {
			return -EBADMSG;
		}
		if (n == KVFS_NS_NAME_MAX || c == 0 || c == '/')
			return -EBADMSG;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	if (!n || out[0] == '.')
		return -EBADMSG;
	return 0;
}

struct sbuf {
	char *b;
	size_t len, cap;
	int err;
};

static void sb_printf(struct sbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sb->err)
		return;
	if (sb->cap - sb->len < NSFILE_LINE_MAX) {
		size_t cap = sb->cap ? 2 * sb->cap : 4096;
		char *b = realloc(sb->b, cap);

		if (!b) {
			sb->err = -ENOMEM;
			return;
		}
		sb->b = b;
		sb->cap = cap;
	}
	va_start(ap, fmt);
	n = vsnprintf(sb->b + sb->len, sb->cap - sb->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sb->cap - sb->len)
		sb->err = -EOVERFLOW; /* a line never exceeds NSFILE_LINE_MAX */
	else
		sb->len += (size_t)n;
}

/* Times before 1970 (utimes allows them) are kept as 0: the file must
 * always parse. */
static struct timespec ts_clamp(struct timespec ts)
{
	if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec > 999999999)
		return (struct timespec){ 0, 0 };
	return ts;
}

int fs_nsfile_format(const struct fs_nsfile *f, char **buf, size_t *len)
{
	struct sbuf sb = { 0 };
	char name[3 * KVFS_NS_NAME_MAX + 1];

	sb_printf(&sb, NSFILE_MAGIC " %d\n", FS_NSFILE_VERSION);
	sb_printf(&sb, "root %04o %u %u\n", (unsigned)(f->root.mode & 07777),
		  (unsigned)f->root.uid, (unsigned)f->root.gid);
	for (size_t i = 0; i < f->n; i++) {
		const struct fs_nsfile_ent *e = &f->ent[i];
		struct timespec mt = ts_clamp(e->a.mtime);
		struct timespec ct = ts_clamp(e->a.ctime);

		name_escape(e->name, name);
		sb_printf(&sb, "ns %s %04o %u %u %" PRIu64 " %s %d "
			  "%lld.%09ld %lld.%09ld %" PRIu32 "\n", name,
			  (unsigned)(e->a.mode & 07777), (unsigned)e->a.uid,
			  (unsigned)e->a.gid, e->chunk_bytes,
			  e->a.dtype[0] ? e->a.dtype : "-", e->shuffle,
			  (long long)mt.tv_sec, mt.tv_nsec,
			  (long long)ct.tv_sec, ct.tv_nsec, e->chunk_tokens);
	}
	if (!sb.err)
		sb_printf(&sb, "sum %016" PRIx64 "\n",
			  hashkey_checksum(sb.b, sb.len));
	if (sb.err) {
		free(sb.b);
		return sb.err;
	}
	*buf = sb.b;
	*len = sb.len;
	return 0;
}

/* ----------------------------------------------------------------- parse */

/* Splits line (NUL-terminated, no '\n') at single spaces: up to max tokens.
 * Returns the count, or -1 on an empty token (two spaces, a leading or
 * trailing space) or too many tokens. */
static int split(char *line, char **tok, int max)
{
	int n = 0;

	for (char *s = line;;) {
		char *sp = strchr(s, ' ');

		if (n == max || (sp ? sp == s : !*s))
			return -1;
		tok[n++] = s;
		if (!sp)
			return n;
		*sp = '\0';
		s = sp + 1;
	}
}

static int parse_u64_base(const char *s, int base, uint64_t max, uint64_t *out)
{
	char *end;

	if (!*s || !((*s >= '0' && *s <= '9') ||
		     (base == 16 && fs_hexval(*s) >= 0)))
		return -EBADMSG;
	errno = 0;
	*out = strtoull(s, &end, base);
	if (errno || *end || *out > max)
		return -EBADMSG;
	return 0;
}

static int parse_ts(const char *s, struct timespec *ts)
{
	const char *dot = strchr(s, '.');
	char sec[24];
	uint64_t v, ns;

	if (!dot || (size_t)(dot - s) >= sizeof(sec) || strlen(dot + 1) != 9)
		return -EBADMSG;
	memcpy(sec, s, (size_t)(dot - s));
	sec[dot - s] = '\0';
	if (parse_u64_base(sec, 10, INT64_MAX, &v) ||
	    parse_u64_base(dot + 1, 10, 999999999, &ns))
		return -EBADMSG;
	ts->tv_sec = (time_t)v;
	ts->tv_nsec = (long)ns;
	return 0;
}

static int parse_ids(char **tok, struct fs_nsattr *a)
{
	uint64_t mode, uid, gid;

	if (parse_u64_base(tok[0], 8, 07777, &mode) ||
	    parse_u64_base(tok[1], 10, UINT32_MAX, &uid) ||
	    parse_u64_base(tok[2], 10, UINT32_MAX, &gid))
		return -EBADMSG;
	a->mode = S_IFDIR | (mode_t)mode;
	a->uid = (uid_t)uid;
	a->gid = (gid_t)gid;
	return 0;
}

static int parse_ns(char **tok, struct fs_nsfile_ent *e)
{
	uint64_t v;
	size_t dl;

	memset(e, 0, sizeof(*e));
	if (name_unescape(tok[0], strlen(tok[0]), e->name) ||
	    parse_ids(tok + 1, &e->a) ||
	    parse_u64_base(tok[4], 10, UINT64_MAX, &e->chunk_bytes) ||
	    parse_u64_base(tok[6], 10, 4, &v) || v == 1 || v == 3 ||
	    parse_ts(tok[7], &e->a.mtime) || parse_ts(tok[8], &e->a.ctime))
		return -EBADMSG;
	e->shuffle = (int)v;
	dl = strlen(tok[5]);
	if (strcmp(tok[5], "-")) {
		if (dl >= sizeof(e->a.dtype))
			return -EBADMSG;
		for (size_t i = 0; i < dl; i++)
			if (!((tok[5][i] >= 'a' && tok[5][i] <= 'z') ||
			      (tok[5][i] >= '0' && tok[5][i] <= '9')))
				return -EBADMSG;
		memcpy(e->a.dtype, tok[5], dl + 1);
	}
	return 0;
}

static int ent_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fs_nsfile_ent *)a)->name,
		      ((const struct fs_nsfile_ent *)b)->name);
}

int fs_nsfile_parse(const char *buf, size_t len, struct fs_nsfile *f)
{
	const char *sum_line = NULL;
	char line[NSFILE_LINE_MAX], *tok[11];
	uint64_t ver = 0;
	size_t pos = 0, cap = 0;
	uint64_t want, got;
	bool have_root = false;
	int rc = -EBADMSG, n;

	memset(f, 0, sizeof(*f));
	/* the checksum first: nothing of a file that does not verify is used */
	if (len < 5 || buf[len - 1] != '\n')
		return -EBADMSG;
	for (size_t i = len - 1; i > 0; i--) {
		if (buf[i - 1] == '\n') {
			sum_line = buf + i;
			break;
		}
	}
	/* buf is not NUL-terminated: the length first */
	if (!sum_line || (size_t)(buf + len - sum_line) != 4 + 16 + 1 ||
	    memcmp(sum_line, "sum ", 4))
		return -EBADMSG;
	memcpy(line, sum_line + 4, 16);
	line[16] = '\0';
	if (parse_u64_base(line, 16, UINT64_MAX, &want))
		return -EBADMSG;
	got = hashkey_checksum(buf, (size_t)(sum_line - buf));
	if (got != want)
		return -EBADMSG;

	len = (size_t)(sum_line - buf);
	for (int lineno = 0; pos < len; lineno++) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t ll = (size_t)(nl - (buf + pos));

		/* nl != NULL: the sum line follows a '\n' */
		if (ll >= sizeof(line) || memchr(buf + pos, '\0', ll))
			goto bad;
		memcpy(line, buf + pos, ll);
		line[ll] = '\0';
		pos += ll + 1;
		n = split(line, tok, 11);
		if (n < 0)
			goto bad;
		if (lineno == 0) {
			if (n != 2 || strcmp(tok[0], NSFILE_MAGIC) ||
			    parse_u64_base(tok[1], 10, UINT32_MAX, &ver))
				goto bad;
			if (ver != FS_NSFILE_VERSION && ver != 1) {
				rc = -ENOTSUP;
				goto bad;
			}
		} else if (!strcmp(tok[0], "root") && n == 4 && !have_root) {
			if (parse_ids(tok + 1, &f->root))
				goto bad;
			have_root = true;
		} else if (!strcmp(tok[0], "ns") && n == (ver == 1 ? 10 : 11)) {
			if (f->n == cap) {
				size_t c = cap ? 2 * cap : 16;
				struct fs_nsfile_ent *a;

				a = realloc(f->ent, c * sizeof(*a));
				if (!a) {
					rc = -ENOMEM;
					goto bad;
				}
				f->ent = a;
				cap = c;
			}
			if (parse_ns(tok + 1, &f->ent[f->n]))
				goto bad;
			if (ver >= 2) {
				uint64_t v;
				if (parse_u64_base(tok[10], 10, UINT32_MAX, &v))
					goto bad;
				f->ent[f->n].chunk_tokens = (uint32_t)v;
			}
			f->n++;
		} else {
			goto bad;
		}
	}
	if (!have_root)
		goto bad;
	/* one line per name: sorted, a duplicate is next to its twin */
	if (f->n > 1) {
		qsort(f->ent, f->n, sizeof(*f->ent), ent_name_cmp);
		for (size_t i = 1; i < f->n; i++)
			if (!strcmp(f->ent[i - 1].name, f->ent[i].name))
				goto bad;
	}
	return 0;
bad:
	fs_nsfile_free(f);
	return rc;
}

void fs_nsfile_free(struct fs_nsfile *f)
{
	free(f->ent);
	f->ent = NULL;
	f->n = 0;
}

/* -------------------------------------------------------------- the file */

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int fs_nsfile_write(int dirfd, const char *buf, size_t len)
{
	int fd, rc;

	fd = openat(dirfd, NSFILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
		    O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, buf, len);
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, NSFILE_TMP, dirfd, FS_NSFILE_NAME))
		rc = -errno;
	if (rc) {
		unlinkat(dirfd, NSFILE_TMP, 0);
		return rc;
	}
	/* the rename itself must survive a crash */
	if (fsync(dirfd))
		return -errno;
	return 0;
}

int fs_nsfile_read(int dirfd, char **buf, size_t *len)
{
	struct stat st;
	size_t got = 0;
	char *b;
	int fd, rc = 0;

	fd = openat(dirfd, FS_NSFILE_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > NSFILE_SIZE_MAX) {
		rc = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
		goto out_close;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		rc = -ENOMEM;
		goto out_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO; /* shrank under us */
			free(b);
			goto out_close;
		}
		got += (size_t)n;
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
out_close:
	close(fd);
	return rc;
}
