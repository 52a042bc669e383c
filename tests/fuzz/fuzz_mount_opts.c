/*
 * fuzz_mount_opts - kvfs-mount's option parsing on untrusted bytes: the
 * input is one -o string (as fstab or a user gives it) run through the
 * daemon's own fuse_opt table and build_config (sizes with suffixes,
 * numbers, enumerations, l2_dir), and each comma-separated value also
 * through mopts_parse_size and mopts_parse_num directly. mount_opts.c is
 * included whole so the static table and parsers are the ones the daemon
 * runs, not copies. No crash, leak or sanitizer report on any input;
 * errors are printed to stderr (run with -close_fd_mask=2).
 */
#include <stddef.h>
#include <stdint.h>

#include "../../mount/mount_opts.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *argv[] = { "kvfs-mount", "-o", s,
						 "/mnt", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(4, argv);
	struct tier_config tc;
	struct fs_config fc;
	struct mopts o;
	uint64_t v;

	if (!s || size > 4096) {
		free(s);
		return 0;
	}
	memcpy(s, data, size);
	s[size] = 0;
	memset(&o, 0, sizeof(o));
	if (fuse_opt_parse(&args, &o, opt_spec, opt_proc) == 0 && !o.bad)
		mopts_build(&o, &tc, &fc);
	fuse_opt_free_args(&args);
	mopts_free(&o);
	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		mopts_parse_size("size", tok, &v);
		mopts_parse_num("num", tok, UINT64_MAX, &v);
	}
	free(s);
	return 0;
}
