/* ctl_hash.c - `kvfsctl hash`: token ids on stdin, one key per line out. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfs.h"
#include "mount/ctl.h"

static const struct ctl_cmd CMD = {
	"hash", "hash --chunk-tokens N [--seed S] [--extra STR] [--json] "
	"< tokens",
	"Reads token ids (whitespace-separated, 0..4294967295) on stdin and\n"
	"prints the chained key of each complete chunk of N tokens.\n\n"
	"  --chunk-tokens N  tokens per chunk (required, 1..16777216)\n"
	"  --seed S          64-bit seed (decimal, or hex after 0x; default 0)\n"
	"  --extra STR       bytes that separate adapters/inputs (default \"\")\n"
	"  --json            one JSON array of the keys instead of a key a line\n",
};

/* The tokens on stdin into keys, printed as they come (or appended to
 * out). Returns 0, or 1 after a message. */
static int hash_stdin(unsigned long long chunk, unsigned long long seed,
		      const char *extra, json_t *out)
{
	uint32_t *buf = malloc(chunk * sizeof(*buf));
	char word[32], hex[KVFS_KEY_HEX_LEN + 1];
	unsigned long long line = 1, tok;
	struct kvfs_key prev, key;
	bool have_prev = false;
	size_t n = 0, wl = 0;
	int c, rc = 1;

	if (!buf) {
		perror("kvfsctl hash");
		return 1;
	}
	do {
		c = getchar();
		if (c == '\0') {
			fprintf(stderr, "kvfsctl hash: line %llu: NUL byte in the input\n", line);
			goto out;
		}
		if (c != EOF && !isspace(c)) {
			if (wl + 1 >= sizeof(word)) {
				fprintf(stderr, "kvfsctl hash: line %llu: token too long\n", line);
				goto out;
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
				goto out;
			}
			buf[n++] = (uint32_t)tok;
			wl = 0;
			if (n == chunk) {
				kvfs_key_chunk(have_prev ? &prev : NULL, seed, extra,
					       (uint32_t)strlen(extra), buf, n, &key);
				kvfs_key_hex(&key, hex);
				if (!out)
					puts(hex);
				else if (json_array_append_new(out, json_string(hex)))
					goto out;
				prev = key;
				have_prev = true;
				n = 0;
			}
		}
		if (c == '\n')
			line++;
	} while (c != EOF);
	if (ferror(stdin)) {
		fprintf(stderr, "kvfsctl hash: stdin: %s\n", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

int ctl_hash(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "chunk-tokens", required_argument, NULL, 'c' },
		{ "seed", required_argument, NULL, 's' },
		{ "extra", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long chunk = 0, seed = 0;
	const char *extra = "";
	json_t *out = NULL;
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (ctl_parse_count(optarg, &chunk) || chunk == 0 ||
			    chunk > (1u << 24))
				return ctl_usage_err(&CMD, "bad --chunk-tokens '%s' "
						     "(1 to 16777216)", optarg);
			break;
		case 's':
			if (ctl_parse_count(optarg, &seed))
				return ctl_usage_err(&CMD, "bad --seed '%s'", optarg);
			break;
		case 'e': extra = optarg; break;
		case 'j': json = true; break;
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (optind < argc)
		return ctl_usage_err(&CMD, "unexpected '%s' (tokens come on stdin)",
				     argv[optind]);
	if (!chunk)
		return ctl_usage_err(&CMD, "--chunk-tokens N is required");
	if (json && !(out = json_array())) {
		perror("kvfsctl hash");
		return 1;
	}
	if (hash_stdin(chunk, seed, extra, out)) {
		json_decref(out);
		return 1;
	}
	return out ? ctl_json_out(out, JSON_COMPACT) : 0;
}
