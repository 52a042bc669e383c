/*
 * ctl_stats.c - `kvfsctl stats [--json] [--file F] MOUNTPOINT`: prints the
 * mount's MOUNTPOINT/.kvfs/stats (or a saved copy) for people: nested
 * objects indented, byte counts with units; or as JSON. The printer walks
 * whatever JSON the daemon writes (parsed by jansson), so fields added
 * later show up without changes here.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfs.h"
#include "mount/ctl.h"

static const struct ctl_cmd CMD = {
	"stats", "stats [--json] [--file FILE] MOUNTPOINT | --file FILE",
	"Prints MOUNTPOINT/.kvfs/stats for people: nested objects indented,\n"
	"byte counts with units.\n\n"
	"  --json        print the stats as JSON (checked, indented)\n"
	"  --file FILE   read the stats from FILE ('-' = stdin), e.g. a saved\n"
	"                copy, instead of MOUNTPOINT/.kvfs/stats\n",
};

static bool is_bytes_key(const char *k)
{
	return strstr(k, "bytes") || strstr(k, "capacity");
}

static void print_bytes(json_int_t v)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v / 1024;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	printf("%.1f %s (%lld)\n", d, unit[u], (long long)v);
}

static void print_value(const char *key, json_t *v)
{
	char *s;

	switch (json_typeof(v)) {
	case JSON_STRING:
		printf("%s\n", json_string_value(v));
		break;
	case JSON_INTEGER:
		if (is_bytes_key(key) && json_integer_value(v) >= 1024)
			print_bytes(json_integer_value(v));
		else
			printf("%lld\n", (long long)json_integer_value(v));
		break;
	case JSON_REAL:
		printf("%.3f\n", json_real_value(v));
		break;
	default: /* arrays, true, false, null: as JSON */
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		printf("%s\n", s ? s : "?");
		free(s);
		break;
	}
}

static void print_object(json_t *o, int depth)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		printf("%*s%s:", depth * 2, "", key);
		if (json_is_object(v)) {
			printf("\n");
			print_object(v, depth + 1);
		} else {
			int pad = 24 - depth * 2 - (int)strlen(key);

			printf("%*s", pad < 1 ? 1 : pad, "");
			print_value(key, v);
		}
	}
}

int ctl_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "file", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mnt = NULL, *file = NULL;
	bool json = false;
	json_t *root;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'f': file = optarg; break;
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (optind < argc)
		mnt = argv[optind++];
	if (optind < argc)
		return ctl_usage_err(&CMD, "unexpected '%s'", argv[optind]);
	if (!mnt && !file)
		return ctl_usage_err(&CMD, "MOUNTPOINT or --file is required");
	if (mnt && file)
		return ctl_usage_err(&CMD, "MOUNTPOINT and --file exclude "
				     "each other");
	root = ctl_load_stats("stats", mnt, file);
	if (!root)
		return 1;
	if (json)
		return ctl_json_out(root, JSON_INDENT(2));
	printf("kvfs at %s\n", mnt ? mnt : file);
	print_object(root, 0);
	json_decref(root);
	return fflush(stdout) ? 1 : 0;
}
