/* ctl_stub.c - TEMPORARY placeholders while subcommands are written; each
 * helper deletes its entry here when its ctl_*.c lands. */
#include <stdio.h>
#include "mount/ctl.h"
#define TODO(fn) int fn(int argc, char **argv) { (void)argc; fprintf(stderr, "kvfsctl %s: not built yet\n", argv[0]); return 2; }
