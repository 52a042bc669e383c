/*
 * ctl_stats.c - `kvfsctl stats [--json] MOUNTPOINT`: prints the mount's
 * MOUNTPOINT/.kvfs/stats, as is (--json) or for people: nested objects
 * indented, byte counts with units. The printer walks whatever JSON the
 * daemon writes, so fields added later show up without changes here.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvfs.h"
#include "mount/ctl.h"

struct jp {
	const char *s;
	bool bad;
};

static void skip_ws(struct jp *p)
{
	while (isspace((unsigned char)*p->s))
		p->s++;
}

/* Copies a JSON string (unescaping the simple escapes) into out. */
static void parse_str(struct jp *p, char *out, size_t outlen)
{
	size_t n = 0;

	if (*p->s != '"') {
		p->bad = true;
		return;
	}
	p->s++;
	while (*p->s && *p->s != '"') {
		char c = *p->s++;

		if (c == '\\' && *p->s) {
			c = *p->s++;
			if (c == 'u') {
				unsigned v = 0;

				for (int i = 0; i < 4 && isxdigit((unsigned char)*p->s); i++)
					v = v * 16 + (unsigned)(isdigit((unsigned char)*p->s) ?
						*p->s - '0' :
						tolower((unsigned char)*p->s) - 'a' + 10), p->s++;
				c = v < 0x80 ? (char)v : '?';
			} else if (c == 'n') {
				c = '\n';
			} else if (c == 't') {
				c = '\t';
			}
		}
		if (n + 1 < outlen)
			out[n++] = c;
	}
	if (*p->s != '"')
		p->bad = true;
	else
		p->s++;
	out[n] = '\0';
}

static bool is_bytes_key(const char *k)
{
	return strstr(k, "bytes") || strstr(k, "capacity");
}

static void print_scalar(const char *key, const char *val, size_t vlen)
{
	char num[64];
	unsigned long long v;
	char *end;

	if (vlen >= sizeof(num))
		vlen = sizeof(num) - 1;
	memcpy(num, val, vlen);
	num[vlen] = '\0';
	v = strtoull(num, &end, 10);
	if (is_bytes_key(key) && *end == '\0' && end != num && v >= 1024) {
		static const char *const unit[] = { "KiB", "MiB", "GiB",
						    "TiB", "PiB" };
		double d = (double)v / 1024;
		int u = 0;

		while (d >= 1024 && u < 4) {
			d /= 1024;
			u++;
		}
		printf("%.1f %s (%llu)\n", d, unit[u], v);
	} else {
		printf("%s\n", num);
	}
}

static void print_value(struct jp *p, const char *key, int depth);

static void print_object(struct jp *p, int depth)
{
	char key[256];

	p->s++; /* '{' */
	skip_ws(p);
	if (*p->s == '}') {
		p->s++;
		return;
	}
	while (!p->bad) {
		skip_ws(p);
		parse_str(p, key, sizeof(key));
		skip_ws(p);
		if (*p->s != ':') {
			p->bad = true;
			return;
		}
		p->s++;
		skip_ws(p);
		printf("%*s%s:", depth * 2, "", key);
		if (*p->s == '{') {
			printf("\n");
			print_object(p, depth + 1);
		} else {
			int pad = 24 - depth * 2 - (int)strlen(key);

			printf("%*s", pad < 1 ? 1 : pad, "");
			print_value(p, key, depth + 1);
		}
		skip_ws(p);
		if (*p->s == ',') {
			p->s++;
			continue;
		}
		if (*p->s == '}') {
			p->s++;
			return;
		}
		p->bad = true;
	}
}

static void print_value(struct jp *p, const char *key, int depth)
{
	const char *start = p->s;

	if (*p->s == '"') {
		char val[512];

		parse_str(p, val, sizeof(val));
		printf("%s\n", val);
		return;
	}
	if (*p->s == '[') {
		/* arrays are printed as they are */
		int level = 0;

		do {
			if (*p->s == '[')
				level++;
			else if (*p->s == ']')
				level--;
			p->s++;
		} while (*p->s && level);
		printf("%.*s\n", (int)(p->s - start), start);
		return;
	}
	while (*p->s && *p->s != ',' && *p->s != '}' && *p->s != ']' &&
	       !isspace((unsigned char)*p->s))
		p->s++;
	if (p->s == start) {
		p->bad = true;
		return;
	}
	print_scalar(key, start, (size_t)(p->s - start));
}

static char *read_all(const char *path, int *err)
{
	int fd = open(path, O_RDONLY);
	size_t cap = 65536, n = 0;
	char *buf;
	ssize_t r;

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
	close(fd);
	if (buf)
		buf[n] = '\0';
	return buf;
}

int ctl_stats(int argc, char **argv)
{
	const char *mnt = NULL;
	bool json = false;
	char path[4096];
	char *text;
	struct jp p;
	int err = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			goto usage;
		else if (argv[i][0] == '-' || mnt)
			goto usage;
		else
			mnt = argv[i];
	}
	if (!mnt)
		goto usage;
	snprintf(path, sizeof(path), "%s/%s", mnt, KVFS_CTL_STATS);
	text = read_all(path, &err);
	if (!text) {
		fprintf(stderr, "kvfsctl stats: %s: %s%s\n", path,
			strerror(err), err == ENOENT ?
			" (is a kvfs mounted there?)" : "");
		return 1;
	}
	if (json) {
		fputs(text, stdout);
		free(text);
		return 0;
	}
	p.s = text;
	p.bad = false;
	skip_ws(&p);
	printf("kvfs at %s\n", mnt);
	if (*p.s == '{')
		print_object(&p, 0);
	else
		p.bad = true;
	if (p.bad) {
		fprintf(stderr, "kvfsctl stats: %s: not the JSON expected\n",
			path);
		free(text);
		return 1;
	}
	free(text);
	return 0;
usage:
	fprintf(stderr, "usage: kvfsctl stats [--json] MOUNTPOINT\n");
	return 2;
}
