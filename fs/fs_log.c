/*
 * fs_log.c - the daemon's log line for fs/ (through fuse_log, which
 * kvfs-mount routes to stderr or syslog). Calls nothing of fs/.
 */
#include <stdarg.h>
#include <stdio.h>

#include "fs/fs_i.h"

void fs_log(struct fs *fs, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fuse_log(FUSE_LOG_ERR, "kvfs: %s\n", msg);
}
