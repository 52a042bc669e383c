/*
 * mount_log.c - where kvfs-mount's log lines go, and the rate limit that
 * keeps a flood of one message (a client retrying a bad request 2,000
 * times) from flooding the log.
 *
 * Every line the daemon logs (fs_log, the engine's log callback, libfuse's
 * own) goes through fuse_log and lands in log_line: to stderr in the
 * foreground, to syslog (ident "kvfs-mount", LOG_PID, LOG_DAEMON) once
 * daemonized. Lines are "similar" when they differ only in numbers (pids,
 * offsets, segment ids): of each kind, the first MOUNT_LOG_BURST per
 * MOUNT_LOG_WINDOW_S seconds are written, the rest counted and summarized
 * by one "suppressed N similar message(s)" line when the window has passed
 * and the kind comes back, when another line is logged, or at exit
 * (mount_log_flush).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "mount/mount_log.h"

#define SLOTS 32

struct slot {
	uint64_t sig;        /* 0: free */
	uint64_t start_ms;   /* the window's start */
	unsigned int shown;  /* lines written in this window */
	unsigned long suppressed;
	int level;
	char last[256];      /* the last suppressed line, for the summary */
};

static struct {
	pthread_mutex_t lock;
	bool syslog;
	struct slot s[SLOTS];
	unsigned long total_suppressed;
} lg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t mount_log_signature(const char *line)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	bool in_num = false;

	/* FNV-1a over the line with each run of digits (and of hex digits
	 * after "0x") folded into one '#' */
	for (const unsigned char *p = (const unsigned char *)line; *p; p++) {
		unsigned char c = *p;

		if ((c >= '0' && c <= '9') ||
		    (in_num && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
				c == 'x'))) {
			if (in_num)
				continue;
			in_num = true;
			c = '#';
		} else {
			in_num = false;
		}
		h = (h ^ c) * 0x100000001b3ULL;
	}
	return h ? h : 1;
}

static void emit(int level, const char *line)
{
	if (lg.syslog)
		syslog(level, "%s", line);
	else
		fprintf(stderr, "%s\n", line);
}

/* lg.lock held: writes the summary of what s suppressed, if anything. */
static void summarize(struct slot *s)
{
	char buf[400];

	if (!s->suppressed)
		return;
	snprintf(buf, sizeof(buf), "kvfs-mount: suppressed %lu similar "
		 "message%s (last: %s)", s->suppressed,
		 s->suppressed == 1 ? "" : "s", s->last);
	emit(s->level, buf);
	s->suppressed = 0;
}

int mount_log_line(int level, const char *line, uint64_t now)
{
	uint64_t sig = mount_log_signature(line);
	struct slot *s = NULL, *old = &lg.s[0];
	int shown = 1;

	pthread_mutex_lock(&lg.lock);
	for (int i = 0; i < SLOTS; i++) {
		struct slot *c = &lg.s[i];

		/* other kinds whose window has passed: their summary now */
		if (c->sig && c->sig != sig &&
		    now - c->start_ms >= MOUNT_LOG_WINDOW_S * 1000)
			summarize(c);
		if (c->sig == sig)
			s = c;
		else if (!s && (!c->sig || c->start_ms < old->start_ms))
			old = c;
	}
	if (!s) {
		s = old; /* a free slot, or the oldest kind's */
		summarize(s);
		memset(s, 0, sizeof(*s));
		s->sig = sig;
		s->start_ms = now;
	} else if (now - s->start_ms >= MOUNT_LOG_WINDOW_S * 1000) {
		summarize(s);
		s->start_ms = now;
		s->shown = 0;
	}
	s->level = level;
	if (s->shown < MOUNT_LOG_BURST) {
		s->shown++;
		emit(level, line);
	} else {
		s->suppressed++;
		lg.total_suppressed++;
		snprintf(s->last, sizeof(s->last), "%s", line);
		shown = 0;
	}
	pthread_mutex_unlock(&lg.lock);
	return shown;
}

void mount_log_flush(void)
{
	pthread_mutex_lock(&lg.lock);
	for (int i = 0; i < SLOTS; i++)
		summarize(&lg.s[i]);
	pthread_mutex_unlock(&lg.lock);
}

unsigned long mount_log_suppressed(void)
{
	unsigned long n;

	pthread_mutex_lock(&lg.lock);
	n = lg.total_suppressed;
	pthread_mutex_unlock(&lg.lock);
	return n;
}

/* fuse_log's sink: one line, without its trailing newline, rate-limited. */
static void log_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	if (n)
		mount_log_line((int)level, line, now_ms());
}

void mount_log_start(bool to_syslog)
{
	pthread_mutex_lock(&lg.lock);
	if (to_syslog && !lg.syslog)
		openlog("kvfs-mount", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	lg.syslog = to_syslog;
	pthread_mutex_unlock(&lg.lock);
	fuse_set_log_func(log_func);
}
