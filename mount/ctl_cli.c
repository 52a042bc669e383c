/*
 * ctl_cli.c - what every kvfsctl subcommand shares: --help and usage
 * errors in one shape, number parsing for option values, JSON output
 * through jansson, and reading a control file whole. The convention is
 * written down in ctl.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount/ctl.h"

/* The column where the option descriptions of help start (that of its
 * first "  -opt   text" line), so -h lines up with them; at least 14. */
static int help_column(const char *help)
{
	const char *l = help;

	while (l && *l) {
		const char *end = strchrnul(l, '\n'), *gap;

		gap = strncmp(l, "  -", 3) ? NULL : strstr(l + 3, "  ");
		if (gap && gap < end) {
			int col = (int)(gap + strspn(gap, " ") - l);

			return col < 14 ? 14 : col;
		}
		l = *end ? end + 1 : NULL;
	}
	return 14;
}

int ctl_help(const struct ctl_cmd *c)
{
	printf("usage: kvfsctl %s\n", c->synopsis);
	if (c->help)
		printf("\n%s", c->help);
	printf("%-*sprint this help and exit\n", help_column(c->help),
	       "  -h, --help");
	return 0;
}

int ctl_usage_err(const struct ctl_cmd *c, const char *fmt, ...)
{
	if (fmt) {
		va_list ap;

		fprintf(stderr, "kvfsctl %s: ", c->name);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fprintf(stderr, "usage: kvfsctl %s\n"
		"Try 'kvfsctl %s --help' for more information.\n",
		c->synopsis, c->name);
	return 2;
}

int ctl_json_out(json_t *v, size_t flags)
{
	char *s;
	int rc;

	if (!v) {
		fprintf(stderr, "kvfsctl: out of memory building JSON\n");
		return 1;
	}
	s = json_dumps(v, flags | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(v);
	if (!s) {
		fprintf(stderr, "kvfsctl: out of memory writing JSON\n");
		return 1;
	}
	rc = puts(s) < 0 || fflush(stdout) ? 1 : 0;
	free(s);
	return rc;
}

json_t *ctl_json_str(const char *s)
{
	json_t *v = json_string(s);
	char *q, *p;

	if (v || !s)
		return v;
	q = p = malloc(4 * strlen(s) + 1);
	if (!q)
		return NULL;
	for (; *s; s++)
		p += (unsigned char)*s < 0x80 ? sprintf(p, "%c", *s) :
		     sprintf(p, "\\x%02X", (unsigned char)*s);
	*p = '\0';
	v = json_string(q);
	free(q);
	return v;
}

/* Decimal, or hex after 0x; never octal (a seed typed as 010 is ten). */
static int parse_base(const char *s, unsigned long long *v, char **end)
{
	int base = s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;

	if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, base);
	if (errno || *end == s)
		return -EINVAL;
	return 0;
}

int ctl_parse_count(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || parse_base(s, &v, &end) || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int ctl_parse_u64(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || parse_base(s, &v, &end))
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: break;
	}
	if (*end != '\0' || (mul > 1 && v > ~0ull / mul))
		return -EINVAL;
	*out = v * mul;
	return 0;
}

char *ctl_read_file(const char *path, int *err)
{
	size_t len;

	return ctl_read_file_len(path, err, &len);
}

char *ctl_read_file_len(const char *path, int *err, size_t *len)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	size_t cap = 65536, n = 0;
	ssize_t r = 0;
	char *buf;

	if (fd < 0) {
		*err = errno;
		return NULL;
	}
	buf = malloc(cap + 1);
	while (buf && (r = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (buf && r < 0) {
		*err = errno;
		free(buf);
		buf = NULL;
	} else if (!buf) {
		*err = ENOMEM;
	}
	if (fd > 0)
		close(fd);
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

json_t *ctl_load_stats(const char *cmd, const char *mnt, const char *file)
{
	char path[4096];
	json_error_t je;
	json_t *root;
	char *text;
	size_t len;
	int err = 0;

	if (!file) {
		snprintf(path, sizeof(path), "%s/%s", mnt, KVFS_CTL_STATS);
		file = path;
	}
	text = ctl_read_file_len(file, &err, &len);
	if (!text) {
		fprintf(stderr, "kvfsctl %s: %s: %s%s\n", cmd, file,
			strerror(err), err == ENOENT && file == path ?
			" (is a kvfs mounted there?)" : "");
		return NULL;
	}
	/* loadb: a NUL byte is an error, not the end of the input */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!root) {
		fprintf(stderr, "kvfsctl %s: %s: line %d, column %d: %s\n",
			cmd, file, je.line, je.column, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		fprintf(stderr, "kvfsctl %s: %s: line 1, column 1: not a JSON "
			"object\n", cmd, file);
		json_decref(root);
		return NULL;
	}
	return root;
}
