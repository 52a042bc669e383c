/* mount_log.h - kvfs-mount's log sink (mount_log.c): stderr or syslog, with
 * a rate limit on repeated messages. Thread-safe. */
#ifndef KVFS_MOUNT_LOG_H
#define KVFS_MOUNT_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* Of each kind of line, this many per window are written... */
#define MOUNT_LOG_BURST 5
/* ...and the rest of the window counted into one summary line. */
#define MOUNT_LOG_WINDOW_S 60

/*
 * mount_log_start - routes fuse_log (and so every daemon log line) through
 * the rate limit to stderr, or with to_syslog to syslog after
 * openlog("kvfs-mount", LOG_PID, LOG_DAEMON). Call again with true when
 * the daemon detaches from its terminal.
 */
void mount_log_start(bool to_syslog);

/*
 * mount_log_line - logs one line (no trailing newline) at syslog level
 * `level` as of now_ms (CLOCK_MONOTONIC milliseconds), unless MOUNT_LOG_BURST
 * lines of its kind were written in this kind's window already. Returns 1
 * when written, 0 when suppressed (counted for the summary).
 */
int mount_log_line(int level, const char *line, uint64_t now_ms);

/* mount_log_flush - writes the summary of every kind with suppressed lines
 * (at exit, so no count is lost). */
void mount_log_flush(void);

/* mount_log_suppressed - lines suppressed since start, all kinds. */
unsigned long mount_log_suppressed(void);

/* mount_log_signature - the kind of a line: a hash of it with every number
 * (decimal, or hex after 0x) folded to one placeholder. Never 0. */
uint64_t mount_log_signature(const char *line);

#endif
