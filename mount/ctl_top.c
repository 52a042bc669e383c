/*
 * ctl_top.c - `kvfsctl top MOUNTPOINT`: a live view of a mount, like
 * iotop. Every interval it reads MOUNTPOINT/.kvfs/stats (as kvfsctl stats
 * does) and prints what changed since the last read: hit ratio per tier,
 * bytes in and out per second, publishes, evictions, promotions, leases,
 * L2 use and errors. On a terminal the frame redraws in place (ANSI home
 * and clear) and `q` quits (stdin in non-canonical mode, restored on exit
 * and on SIGINT/SIGTERM/SIGHUP/SIGPIPE, and while ^Z stops it); otherwise frames follow each other with
 * no escape codes. --json prints one object a line per interval.
 *
 * Hit ratios are a cascade over the interval's deltas: L1 = reads served
 * without a promotion / reads; L2 = promotions from L2 / reads L1 missed;
 * L3 = L3 GETs that found the chunk / L3 GETs.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "mount/ctl.h"
#include "mount/ctl_evsub.h"

static const struct ctl_cmd CMD = {
	"top", "top [--interval S] [--iterations N] [--once] [--json] "
	"MOUNTPOINT",
	"A live view of the mount from the deltas of MOUNTPOINT/.kvfs/stats:\n"
	"hit ratio per tier, GB/s in and out, chunks, evictions, promotions,\n"
	"leases, L2 use, errors. On a terminal it redraws in place; q quits.\n\n"
	"  -d, --interval S    seconds between frames (default 1; 0.1 to 3600)\n"
	"  -n, --iterations N  stop after N frames\n"
	"      --once          one frame (after one interval), then exit\n"
	"      --json          one JSON object a line per interval, no redraw\n",
};

static volatile sig_atomic_t got_sig;

static void on_sig(int sig)
{
	got_sig = sig;
}

/* ---------------------------------------------------------------- samples */

struct sample {
	json_t *st;
	struct timespec at;
};

/* The number at a dotted path ("ioctl.leases.active"); NAN when absent. */
static double num(json_t *root, const char *path)
{
	char part[64];
	json_t *v = root;

	while (v && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(part))
			return NAN;
		memcpy(part, path, n);
		part[n] = '\0';
		v = json_object_get(v, part);
		path += n + (path[n] == '.');
	}
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static double val(const struct sample *s, const char *path)
{
	double v = num(s->st, path);

	return isnan(v) ? 0 : v;
}

/* A counter's growth over the interval (0 when absent or reset). */
static double delta(const struct sample *a, const struct sample *b,
		    const char *path)
{
	double d = val(b, path) - val(a, path);

	return d > 0 ? d : 0;
}

static double secs(const struct sample *a, const struct sample *b)
{
	double s = (double)(b->at.tv_sec - a->at.tv_sec) +
		   (double)(b->at.tv_nsec - a->at.tv_nsec) / 1e9;

	return s > 1e-6 ? s : 1e-6;
}

/* ---------------------------------------------------------------- a frame */

struct tier_row {
	const char *name;
	bool on;
	double hits, asked; /* over the interval */
	double chunks, bytes, capacity;
};

struct frame {
	double dt;
	struct tier_row t[3];
	double in_bps, out_bps; /* NAN: the daemon has no byte counters */
	double publishes, evictions, promotions, demotions; /* per second */
	double leases_active, leases_taken, leases_expired;
	double err_l2, err_l3, err_ioctl, err_total; /* per interval */
	double l2_use; /* bytes on disk / capacity, NAN without L2 */
};

static void compute(const struct sample *a, const struct sample *b,
		    struct frame *f)
{
	double hits = delta(a, b, "hits"), reads = hits + delta(a, b, "misses");
	double prom = delta(a, b, "promotions");
	double l3prom = delta(a, b, "l3.promotions");
	double l2prom = prom > l3prom ? prom - l3prom : 0;
	double l1hits = hits > prom ? hits - prom : 0;

	memset(f, 0, sizeof(*f));
	f->dt = secs(a, b);
	f->t[0] = (struct tier_row){ "L1", true, l1hits, reads,
		val(b, "l1.chunks"), val(b, "l1.bytes"), val(b, "l1.capacity") };
	f->t[1] = (struct tier_row){ "L2", val(b, "l2.capacity") > 0, l2prom,
		reads - l1hits, val(b, "l2.chunks"), val(b, "l2.bytes"),
		val(b, "l2.capacity") };
	f->t[2] = (struct tier_row){ "L3", val(b, "l3.enabled") > 0,
		delta(a, b, "l3.hits"),
		delta(a, b, "l3.hits") + delta(a, b, "l3.misses"), NAN, NAN,
		NAN };
	if (!isnan(num(b->st, "read.hits_l1"))) {
		/* the daemon counts reads by the tier they came from
		 * (kvfs(7) COUNTERS): each tier's share of what reached it */
		double h1 = delta(a, b, "read.hits_l1");
		double h2 = delta(a, b, "read.hits_l2");
		double asked = h1 + h2 + delta(a, b, "read.hits_l3") +
			       delta(a, b, "read.misses") +
			       delta(a, b, "name_misses");

		f->t[0].hits = h1;
		f->t[0].asked = asked;
		f->t[1].hits = h2;
		f->t[1].asked = asked - h1;
		f->t[2].hits = delta(a, b, "read.hits_l3");
		f->t[2].asked = asked - h1 - h2;
	}
	for (int i = 0; i < 3; i++)
		if (f->t[i].hits > f->t[i].asked) /* prefetches promote too */
			f->t[i].hits = f->t[i].asked;
	f->in_bps = isnan(num(b->st, "bytes_in")) ? NAN :
		    delta(a, b, "bytes_in") / f->dt;
	f->out_bps = isnan(num(b->st, "bytes_out")) ? NAN :
		     delta(a, b, "bytes_out") / f->dt;
	f->publishes = delta(a, b, "publishes") / f->dt;
	f->evictions = delta(a, b, "evictions") / f->dt;
	f->promotions = prom / f->dt;
	f->demotions = delta(a, b, "demotions") / f->dt;
	f->leases_active = val(b, "ioctl.leases.active");
	f->leases_taken = delta(a, b, "ioctl.leases.taken") / f->dt;
	f->leases_expired = delta(a, b, "ioctl.leases.expired") / f->dt;
	f->err_l2 = delta(a, b, "l2.errors") + delta(a, b, "l2.corrupt");
	f->err_l3 = delta(a, b, "l3.errors");
	f->err_ioctl = delta(a, b, "ioctl.errors");
	f->err_total = f->err_l2 + f->err_l3 + f->err_ioctl;
	f->l2_use = f->t[1].on ? val(b, "l2.bytes") / val(b, "l2.capacity")
			       : NAN;
}

/* Bytes with a binary unit, in a field of 9. */
static const char *hbytes(char out[16], double v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB",
					    "PiB" };
	int u = 0;

	if (isnan(v))
		return "-";
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, 16, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return out;
}

static const char *ratio(char out[16], double hits, double asked)
{
	if (asked <= 0)
		return "-";
	snprintf(out, 16, "%.1f", 100.0 * hits / asked);
	return out;
}

/* The header says the interval asked for (-d), not the one measured
 * (f->dt, a little longer under load), which only scales the rates. */
static void print_text(FILE *o, const char *mnt, double interval,
		       const struct frame *f, bool tty, bool q_quits)
{
	char now[32], b1[16], b2[16], b3[16];
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(now, sizeof(now), "%H:%M:%S", &tm);
	if (tty)
		fputs("\033[H\033[2J", o);
	fprintf(o, "kvfs top - %s  %s  every %g s%s\n", mnt, now, interval,
		tty && q_quits ? "  (q quits)" : "");
	fprintf(o, "in %7.3f GB/s   out %7.3f GB/s   publishes %8.0f/s"
		"   evictions %8.0f/s\n",
		isnan(f->in_bps) ? 0 : f->in_bps / 1e9,
		isnan(f->out_bps) ? 0 : f->out_bps / 1e9, f->publishes,
		f->evictions);
	fprintf(o, "promotions %8.0f/s   demotions %8.0f/s   leases %.0f "
		"active, %.0f/s taken, %.0f/s expired\n", f->promotions,
		f->demotions, f->leases_active, f->leases_taken,
		f->leases_expired);
	fprintf(o, "L2 use %s   errors %.0f (l2 %.0f, l3 %.0f, ioctl %.0f)\n",
		isnan(f->l2_use) ? "-" :
		(snprintf(b1, sizeof(b1), "%.1f%%", 100 * f->l2_use), b1),
		f->err_total, f->err_l2, f->err_l3, f->err_ioctl);
	fprintf(o, "\n%-4s %6s %10s %10s %10s %10s %10s\n", "TIER", "HIT%",
		"HITS/s", "ASKED/s", "CHUNKS", "BYTES", "CAPACITY");
	for (int i = 0; i < 3; i++) {
		const struct tier_row *r = &f->t[i];

		if (!r->on) {
			fprintf(o, "%-4s %6s %10s\n", r->name, "-", "off");
			continue;
		}
		fprintf(o, "%-4s %6s %10.0f %10.0f ", r->name,
			ratio(b1, r->hits, r->asked), r->hits / f->dt,
			r->asked / f->dt);
		if (isnan(r->chunks))
			fprintf(o, "%10s %10s %10s\n", "-", "-", "-");
		else
			fprintf(o, "%10.0f %10s %10s\n", r->chunks,
				hbytes(b2, r->bytes), hbytes(b3, r->capacity));
	}
}

/* A rate or ratio for JSON: null when it is not known. */
static json_t *jnum(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

static json_t *frame_json(const char *mnt, const struct frame *f)
{
	json_t *o = json_object(), *tiers = json_object();
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	json_object_set_new(o, "mount", ctl_json_str(mnt));
	json_object_set_new(o, "time", json_real((double)ts.tv_sec +
						  (double)ts.tv_nsec / 1e9));
	json_object_set_new(o, "interval_s", json_real(f->dt));
	for (int i = 0; i < 3; i++) {
		const struct tier_row *r = &f->t[i];
		json_t *t = json_object();
		char name[4] = { 'l', r->name[1], 0, 0 };

		json_object_set_new(t, "enabled", json_boolean(r->on));
		json_object_set_new(t, "hit_ratio", r->on && r->asked > 0 ?
				    json_real(r->hits / r->asked) : json_null());
		json_object_set_new(t, "hits_per_s", json_real(r->hits / f->dt));
		json_object_set_new(t, "asked_per_s",
				    json_real(r->asked / f->dt));
		if (!isnan(r->chunks)) {
			json_object_set_new(t, "chunks",
					    json_integer((json_int_t)r->chunks));
			json_object_set_new(t, "bytes",
					    json_integer((json_int_t)r->bytes));
			json_object_set_new(t, "capacity",
					    json_integer((json_int_t)r->capacity));
		}
		json_object_set_new(tiers, name, t);
	}
	json_object_set_new(o, "tiers", tiers);
	json_object_set_new(o, "in_bytes_per_s", jnum(f->in_bps));
	json_object_set_new(o, "out_bytes_per_s", jnum(f->out_bps));
	json_object_set_new(o, "publishes_per_s", json_real(f->publishes));
	json_object_set_new(o, "evictions_per_s", json_real(f->evictions));
	json_object_set_new(o, "promotions_per_s", json_real(f->promotions));
	json_object_set_new(o, "demotions_per_s", json_real(f->demotions));
	json_object_set_new(o, "leases", json_pack("{s:I, s:f, s:f}",
		"active", (json_int_t)f->leases_active,
		"taken_per_s", f->leases_taken,
		"expired_per_s", f->leases_expired));
	json_object_set_new(o, "l2_use", jnum(f->l2_use));
	json_object_set_new(o, "errors", json_pack("{s:I, s:I, s:I, s:I}",
		"total", (json_int_t)f->err_total, "l2", (json_int_t)f->err_l2,
		"l3", (json_int_t)f->err_l3, "ioctl", (json_int_t)f->err_ioctl));
	return o;
}

/* ---------------------------------------------------------------- terminal */

/* The terminal's mode before top, and top's own (no echo, no line
 * editing, ISIG kept so ^C and ^Z work): file-static, since the SIGTSTP
 * handler switches between them. */
static struct termios tty_saved, tty_top;
static volatile sig_atomic_t tty_is_raw;

static void term_raw(void)
{
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &tty_saved))
		return;
	tty_top = tty_saved;
	tty_top.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	tty_top.c_cc[VMIN] = 0;
	tty_top.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &tty_top) == 0)
		tty_is_raw = 1;
}

static void term_restore(void)
{
	if (tty_is_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
	tty_is_raw = 0;
}

/* ^Z: the shell gets its terminal mode back while top is stopped, and top
 * its own when it continues (tcsetattr is async-signal-safe). */
static void on_tstp(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct sigaction me = { .sa_handler = on_tstp };
	int saved_errno = errno;
	sigset_t set;

	if (tty_is_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig); /* stops here until SIGCONT */
	sigaction(sig, &me, NULL);
	if (tty_is_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_top);
	errno = saved_errno;
}

/* Waits up to ms for a key. true when q (or Q) was pressed. */
static bool wait_key(int ms)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	uint64_t end = evsub_now_ms() + (uint64_t)ms;

	while (!got_sig) {
		uint64_t now = evsub_now_ms();
		long left = now < end ? (long)(end - now) : 0;

		if (left <= 0)
			return false;
		if (!tty_is_raw) {
			struct timespec d = { left / 1000,
					      (left % 1000) * 1000000L };

			nanosleep(&d, NULL); /* EINTR: the loop sees got_sig */
			continue;
		}
		if (poll(&p, 1, (int)left) > 0) {
			char c[16];
			ssize_t n = read(STDIN_FILENO, c, sizeof(c));

			for (ssize_t i = 0; i < n; i++)
				if (c[i] == 'q' || c[i] == 'Q')
					return true;
			if (n == 0) /* the terminal went away */
				return true;
		}
	}
	return false;
}

/* ---------------------------------------------------------------- main */

static int take(struct sample *s, const char *mnt)
{
	json_decref(s->st);
	s->st = ctl_load_stats("top", mnt, NULL);
	clock_gettime(CLOCK_MONOTONIC, &s->at);
	return s->st ? 0 : -1;
}

int ctl_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "once", no_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sample a = { 0 }, b = { 0 };
	unsigned long long iters = 0, done = 0;
	double interval = 1.0;
	bool json = false, tty, quit = false;
	struct sigaction sa = { .sa_handler = on_sig };
	const char *mnt;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "d:n:h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'd':
			errno = 0;
			interval = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(interval >= 0.1) ||
			    interval > 3600)
				return ctl_usage_err(&CMD, "bad --interval '%s' "
						     "(seconds, 0.1 to 3600)",
						     optarg);
			break;
		case 'n':
			if (ctl_parse_count(optarg, &iters) || iters == 0)
				return ctl_usage_err(&CMD, "bad --iterations '%s'",
						     optarg);
			break;
		case 'o': iters = 1; break;
		case 'j': json = true; break;
		case 'h': return ctl_help(&CMD);
		default: return ctl_usage_err(&CMD, NULL);
		}
	}
	if (optind >= argc)
		return ctl_usage_err(&CMD, "MOUNTPOINT is required");
	if (optind + 1 < argc)
		return ctl_usage_err(&CMD, "unexpected '%s'", argv[optind + 1]);
	mnt = argv[optind];
	if (take(&a, mnt))
		return 1;
	tty = !json && isatty(STDOUT_FILENO);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL); /* `top | head`: restore, then die */
	sa.sa_handler = on_tstp;
	sigaction(SIGTSTP, &sa, NULL);
	term_raw();
	while (!got_sig && !quit) {
		struct frame f;

		quit = wait_key((int)(interval * 1000));
		if (got_sig || quit)
			break;
		if (take(&b, mnt)) {
			rc = 1;
			break;
		}
		compute(&a, &b, &f);
		if (json) {
			if (ctl_json_out(frame_json(mnt, &f), JSON_COMPACT |
					 JSON_REAL_PRECISION(12))) {
				rc = 1;
				break;
			}
		} else {
			/* q only quits when stdin is the terminal */
			print_text(stdout, mnt, interval, &f, tty, tty_is_raw);
			if (!tty && iters != 1)
				putchar('\n');
			if (fflush(stdout)) {
				rc = 1;
				break;
			}
		}
		json_decref(a.st);
		a = b;
		b.st = NULL;
		if (iters && ++done >= iters)
			break;
	}
	term_restore();
	json_decref(a.st);
	json_decref(b.st);
	if (got_sig) {
		/* die of the signal, as the shell expects, the terminal
		 * restored */
		signal(got_sig, SIG_DFL);
		raise(got_sig);
	}
	return rc;
}
