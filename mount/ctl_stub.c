/* ctl_stub.c - TEMPORARY placeholders while subcommands are written; each
 * helper deletes its entry here when its ctl_*.c lands. */
#include <stdio.h>
#include "mount/ctl.h"
#define TODO(fn) int fn(int argc, char **argv) { (void)argc; fprintf(stderr, "kvfsctl %s: not built yet\n", argv[0]); return 2; }
TODO(ctl_replay)
TODO(ctl_stats)
TODO(ctl_lookup)
TODO(ctl_pin)
TODO(ctl_unpin)
TODO(ctl_prefetch)
