/* ctl_hash.c - `kvfsctl hash`: token ids on stdin, one key per line out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

#include "kvfs.h"
#include "mount/ctl.h"

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

int ctl_hash(int argc, char **argv)
{
	unsigned long long chunk = 0, seed = 0, tok;
	const char *extra = "";
	uint32_t *buf;
	size_t n = 0;
	struct kvfs_key prev, key;
	int have_prev = 0, c;
	char word[32], hex[KVFS_KEY_HEX_LEN + 1];
	size_t wl = 0;
	unsigned long long line = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--chunk-tokens") && i + 1 < argc) {
			if (ctl_parse_count(argv[++i], &chunk) || chunk == 0 ||
			    chunk > (1u << 24)) {
				fprintf(stderr, "kvfsctl hash: bad --chunk-tokens '%s'\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			if (ctl_parse_count(argv[++i], &seed)) {
				fprintf(stderr, "kvfsctl hash: bad --seed '%s'\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--extra") && i + 1 < argc) {
			extra = argv[++i];
		} else {
			fprintf(stderr, "usage: kvfsctl hash --chunk-tokens N [--seed S] [--extra STR] < tokens\n");
			return 2;
		}
	}
	if (!chunk) {
		fprintf(stderr, "kvfsctl hash: --chunk-tokens N is required\n");
		return 2;
	}
	buf = malloc(chunk * sizeof(*buf));
	if (!buf) {
		perror("kvfsctl hash");
		return 1;
	}
	do {
		c = getchar();
		if (c == '\0') {
			fprintf(stderr, "kvfsctl hash: line %llu: NUL byte in the input\n", line);
			free(buf);
			return 1;
		}
		if (c != EOF && !isspace(c)) {
			if (wl + 1 >= sizeof(word)) {
				fprintf(stderr, "kvfsctl hash: line %llu: token too long\n", line);
				free(buf);
				return 1;
			}
			word[wl++] = (char)c;
			continue;
		}
		if (wl) {
			char *end;

			word[wl] = '\0';
			errno = 0;
			tok = strtoull(word, &end, 10);
			if (errno || *end || word[0] == '-' || tok > UINT32_MAX) {
				fprintf(stderr, "kvfsctl hash: line %llu: bad token id '%s' (want 0..4294967295)\n",
					line, word);
				free(buf);
				return 1;
			}
			buf[n++] = (uint32_t)tok;
			wl = 0;
			if (n == chunk) {
				kvfs_key_chunk(have_prev ? &prev : NULL, seed, extra,
					       (uint32_t)strlen(extra), buf, n, &key);
				kvfs_key_hex(&key, hex);
				puts(hex);
				prev = key;
				have_prev = 1;
				n = 0;
			}
		}
		if (c == '\n')
			line++;
	} while (c != EOF);
	free(buf);
	return 0;
}
