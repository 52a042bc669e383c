/*
 * bench_threads.h - the --threads option of kvfs_bench and kvfs_xbench: a
 * comma-separated list of thread counts ("1,2,4,8,16"), each run against
 * tmpfs in the same run, and the scaling table printed after the main one:
 * each count's throughput over the first count's, kvfs beside tmpfs, so a
 * reader sees where kvfs stops scaling while tmpfs does not.
 */
#ifndef KVFS_BENCH_THREADS_H
#define KVFS_BENCH_THREADS_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_MAX_THREADS 64 /* per count */
#define BENCH_MAX_TCOUNTS 8  /* counts per run */

/*
 * bench_parse_threads - parses s ("1,2,4") into out[BENCH_MAX_TCOUNTS].
 * Returns how many counts (>= 1), or -1 when s is empty, has a count
 * outside 1..BENCH_MAX_THREADS, more than BENCH_MAX_TCOUNTS counts, or
 * anything but digits and commas.
 */
static inline int bench_parse_threads(const char *s, unsigned *out)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < 1 || v > BENCH_MAX_THREADS ||
		    n == BENCH_MAX_TCOUNTS || (*end && *end != ','))
			return -1;
		out[n++] = (unsigned)v;
		s = *end ? end + 1 : end;
		if (*end && !*s)
			return -1; /* a trailing comma */
	}
	return n ? n : -1;
}

/* The largest count of out[0..n). */
static inline unsigned bench_max_threads(const unsigned *t, int n)
{
	unsigned m = 0;

	for (int i = 0; i < n; i++)
		m = t[i] > m ? t[i] : m;
	return m;
}

/*
 * bench_scaling_table - the scaling table, when there is more than one
 * count: per chunk size (2 MiB, then 256 KiB) and op, each count's
 * throughput over the first count's (the same bytes: best seconds of the
 * first over best seconds of this one), kvfs then tmpfs. rows: the
 * bench's rows ordered by size, then count, then op, each row_size bytes
 * with a double best[2] (kvfs, tmpfs) at best_off.
 */
static inline void bench_scaling_table(const unsigned *threads, int nt,
				       int nops, const char *const *op_names,
				       const void *rows, size_t row_size,
				       size_t best_off)
{
	char c[64];

	if (nt < 2)
		return;
	printf("\nscaling: throughput over %u %s (kvfs, tmpfs)\n%-22s",
	       threads[0], threads[0] == 1 ? "thread's" : "threads'", "");
	for (int t = 0; t < nt; t++) {
		snprintf(c, sizeof(c), "%u thr", threads[t]);
		printf(" | %15s", c);
	}
	printf("\n%-22s", "");
	for (int t = 0; t < nt; t++)
		printf(" | %7s %7s", "kvfs", "tmpfs");
	printf("\n");
	for (int s = 0; s < 2; s++) {
		for (int op = 0; op < nops; op++) {
			const double *b0 = NULL;

			snprintf(c, sizeof(c), "%s %s", s ? "256 KiB" : "2 MiB",
				 op_names[op]);
			printf("%-22s", c);
			for (int t = 0; t < nt; t++) {
				const double *b = (const double *)(const void *)
					((const char *)rows +
					 (size_t)((s * nt + t) * nops + op) * row_size +
					 best_off);

				if (!b0)
					b0 = b;
				printf(" | %6.2fx %6.2fx", b0[0] / b[0],
				       b0[1] / b[1]);
			}
			printf("\n");
		}
	}
}

#endif /* KVFS_BENCH_THREADS_H */
