/*
 * bench_cpu.h - CPU time of another process (the daemon a bench mounted),
 * for the benches' "CPU per operation" columns: load on the machine moves
 * CPU time much less than wall time.
 */
#ifndef KVFS_BENCH_CPU_H
#define KVFS_BENCH_CPU_H

#include <dirent.h>
#include <stdio.h>
#include <sys/types.h>

/* Seconds on a CPU of every thread of pid so far (the first field of
 * /proc/PID/task/TID/schedstat, in ns), 0 where that cannot be read.
 * Threads that already exited are not counted. */
static inline double bench_task_cpu_s(pid_t pid)
{
	char path[64], f[400];
	struct dirent *de;
	double s = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		unsigned long long ns;
		FILE *fp;

		if (de->d_name[0] == '.')
			continue;
		snprintf(f, sizeof(f), "%s/%s/schedstat", path, de->d_name);
		fp = fopen(f, "r");
		if (fp && fscanf(fp, "%llu", &ns) == 1)
			s += (double)ns / 1e9;
		if (fp)
			fclose(fp);
	}
	if (d)
		closedir(d);
	return s;
}

#endif
