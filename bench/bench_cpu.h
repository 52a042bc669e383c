/*
 * bench_cpu.h - CPU time of another process (the daemon a bench mounted),
 * for the benches' "CPU per operation" columns: load on the machine moves
 * CPU time much less than wall time.
 */
#ifndef KVFS_BENCH_CPU_H
#define KVFS_BENCH_CPU_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

/* Seconds on a CPU of every thread of pid so far (the first field of
 * /proc/PID/task/TID/schedstat, in ns), 0 where that cannot be read.
 * The daemon's thread pool lets idle threads exit (libfuse keeps 8 idle):
 * a thread that exited keeps the last value read of it, so the sum never
 * goes back (before, a phase whose threads exited read as negative CPU);
 * what such a thread ran after its last reading is not counted. Not
 * thread-safe: one caller at a time (the benches read it from their main
 * thread). */
static inline double bench_task_cpu_s(pid_t pid)
{
	enum { BENCH_CPU_TIDS = 1024 };
	static struct { pid_t pid, tid; unsigned long long ns, gone; }
		seen[BENCH_CPU_TIDS];
	static int nseen;
	char path[64], f[400];
	struct dirent *de;
	double s = 0;
	DIR *d;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		unsigned long long ns;
		pid_t tid = (pid_t)atoi(de->d_name);
		FILE *fp;

		if (de->d_name[0] == '.')
			continue;
		snprintf(f, sizeof(f), "%s/%s/schedstat", path, de->d_name);
		fp = fopen(f, "r");
		if (fp && fscanf(fp, "%llu", &ns) == 1) {
			for (i = 0; i < nseen; i++)
				if (seen[i].pid == pid && seen[i].tid == tid)
					break;
			if (i == nseen && nseen < BENCH_CPU_TIDS)
				seen[nseen++] = (__typeof__(seen[0])){ pid, tid, 0, 0 };
			if (i < nseen && ns < seen[i].ns)
				seen[i].gone += seen[i].ns; /* tid reused */
			if (i < nseen)
				seen[i].ns = ns;
			else
				s += (double)ns / 1e9; /* table full: live only */
		}
		if (fp)
			fclose(fp);
	}
	if (d)
		closedir(d);
	for (i = 0; i < nseen; i++)
		if (seen[i].pid == pid)
			s += (double)(seen[i].ns + seen[i].gone) / 1e9;
	return s;
}

#endif
