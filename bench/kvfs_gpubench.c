/*
 * kvfs_gpubench.c - how fast cached chunks reach an engine's device buffer.
 *
 * For 2 MiB chunks (--chunk-mib), GB/s of chunk bytes landing in a device
 * buffer of the engine, through:
 *   read()+cudaMemcpy  read(2) of the chunk file into a pinned staging
 *                      buffer, then cudaMemcpy host to device (l1=pinned);
 *   pinned mmap        the handle ioctl says HOST_MMAP: mmap the chunk fd and
 *                      cudaMemcpy from the mapping (l1=pinned);
 *   IPC handle (D2D)   the handle ioctl gives a CUDA IPC handle: open it,
 *                      cudaMemcpy device to device, close, release (l1=cuda);
 *   read() l1=cuda     read(2) through FUSE from device L1 (bounce buffers);
 * each against, in the same run, cudaMemcpy of the same bytes from a pinned
 * host buffer (the PCIe ceiling) and device to device (the HBM ceiling).
 *
 * No GPU: prints why and exits 77. KVFS_CUDART=.../libfakecudart.so runs it
 * on the stand-in runtime (the numbers then only exercise the code).
 * Environment (bench/run.sh): KVFS_MOUNT_BIN, TMPDIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu_rt.h"
#include "kvfs.h"

#define MIB (1024ull * 1024ull)

struct bench {
	struct gpu_rt rt;
	size_t chunk;       /* bytes per chunk */
	int nchunks;        /* chunks per namespace */
	int rounds;         /* passes per path; the best is reported */
	const char *bin;    /* kvfs-mount */
	char work[2048];    /* our temporary directory */
	char mnt[4096];     /* the current mount, or "" */
	pid_t pid;          /* its daemon */
	void *pinned;       /* cudaHostAlloc'd staging, one chunk */
	void *dev;          /* the engine's device buffer, one chunk */
	void *dev2;         /* a second device buffer (D2D baseline) */
	double h2d_gbs;     /* baselines of this run */
	double d2d_gbs;
	/* where an IPC path's time goes: seconds per step, summed over the
	 * timed rounds (open, handle ioctl, kvfs_cuda_open, cudaMemcpy,
	 * kvfs_cuda_close, release ioctl, close) and the chunks moved */
	double step[7];
	long stepn;
};

static const char *const step_name[7] = { "open", "handle", "map", "copy",
					   "unmap", "release", "close" };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void unmount_kvfs(struct bench *b)
{
	double end;
	int st;

	if (!b->mnt[0])
		return;
	if (fork() == 0) {
		execlp("fusermount3", "fusermount3", "-u", b->mnt, (char *)NULL);
		_exit(127);
	}
	wait(NULL);
	end = now_s() + 20;
	while (b->pid > 0 && waitpid(b->pid, &st, WNOHANG) != b->pid) {
		if (now_s() > end) {
			fprintf(stderr, "kvfs_gpubench: daemon outlived unmount\n");
			umount2(b->mnt, MNT_DETACH);
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &st, 0);
			break;
		}
		usleep(10000);
	}
	rmdir(b->mnt);
	b->mnt[0] = '\0';
	b->pid = 0;
}

static void die(struct bench *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "kvfs_gpubench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	unmount_kvfs(b);
	rmdir(b->work);
	exit(1);
}

static void mount_kvfs(struct bench *b, const char *l1)
{
	char opts[128];
	struct stat before, st;
	double end;
	int status;

	snprintf(b->mnt, sizeof(b->mnt), "%s/mnt.XXXXXX", b->work);
	if (!mkdtemp(b->mnt))
		die(b, "mkdtemp: %s", strerror(errno));
	stat(b->mnt, &before);
	/* Room for every chunk twice over: nothing is evicted mid-run. */
	snprintf(opts, sizeof(opts), "l1=%s,l1_size=%lluM", l1,
		 (unsigned long long)(2 * (b->chunk * b->nchunks) / MIB + 64));
	b->pid = fork();
	if (b->pid == 0) {
		execl(b->bin, b->bin, "-f", "-o", opts, b->mnt, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", b->bin, strerror(errno));
		_exit(127);
	}
	end = now_s() + 60;
	for (;;) {
		if (stat(b->mnt, &st) == 0 && st.st_dev != before.st_dev)
			break;
		if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
			b->pid = 0;
			rmdir(b->mnt);
			b->mnt[0] = '\0';
			die(b, "kvfs-mount -o %s exited (status %d)", opts,
			    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		}
		if (now_s() > end)
			die(b, "kvfs-mount -o %s: no mount after 60 s", opts);
		usleep(10000);
	}
}

static void chunk_path(struct bench *b, int i, char *out, size_t len)
{
	snprintf(out, len, "%s/bench/%032x", b->mnt, i + 1);
}

/* Writes the chunks (deterministic bytes) through the mount. */
static void write_chunks(struct bench *b)
{
	char path[4200];
	char *buf = malloc(b->chunk);
	int i;

	if (!buf)
		die(b, "out of memory");
	snprintf(path, sizeof(path), "%s/bench", b->mnt);
	if (mkdir(path, 0755) < 0)
		die(b, "mkdir %s: %s", path, strerror(errno));
	for (i = 0; i < b->nchunks; i++) {
		size_t j;
		int fd;

		for (j = 0; j < b->chunk; j++)
			buf[j] = (char)(i * 31 + j * 7);
		chunk_path(b, i, path, sizeof(path));
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			die(b, "create %s: %s", path, strerror(errno));
		for (j = 0; j < b->chunk;) {
			ssize_t n = write(fd, buf + j, b->chunk - j);

			if (n <= 0)
				die(b, "write %s: %s", path, strerror(errno));
			j += (size_t)n;
		}
		if (close(fd) < 0)
			die(b, "close %s: %s", path, strerror(errno));
	}
	free(buf);
}

/* Checks the engine's device buffer holds chunk i (first and last bytes
 * and a stride through it: cheap enough not to distort the timing runs,
 * which do not call it). */
static void verify_dev(struct bench *b, int i)
{
	char *host = malloc(b->chunk);
	size_t j;

	if (!host || b->rt.Memcpy(host, b->dev, b->chunk, GPU_RT_D2H))
		die(b, "verify: copy back failed");
	for (j = 0; j < b->chunk; j += 4093)
		if (host[j] != (char)(i * 31 + j * 7))
			die(b, "chunk %d: wrong byte at %zu on the device", i,
			    j);
	free(host);
}

enum path { P_READ, P_MMAP, P_IPC };

/* Moves chunk i into b->dev through path p. */
static void move_chunk(struct bench *b, enum path p, int i)
{
	char path[4200];
	struct kvfs_handle h;
	struct kvfs_cuda_map m;
	const void *map;
	size_t got = 0;
	int fd, rc, cr = 0;

	double t0 = now_s(), t1 = 0;
	double *st = b->step;

	chunk_path(b, i, path, sizeof(path));
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die(b, "open %s: %s", path, strerror(errno));
	switch (p) {
	case P_READ:
		while (got < b->chunk) {
			ssize_t n = read(fd, (char *)b->pinned + got,
					 b->chunk - got);

			if (n <= 0)
				die(b, "read %s: %s", path,
				    n ? strerror(errno) : "short");
			got += (size_t)n;
		}
		cr = b->rt.Memcpy(b->dev, b->pinned, b->chunk, GPU_RT_H2D);
		break;
	case P_MMAP:
		rc = kvfs_handle_get(fd, &h);
		if (rc < 0 || h.kind != KVFS_HANDLE_HOST_MMAP)
			die(b, "handle on %s: %s", path,
			    rc < 0 ? strerror(-rc) : "not HOST_MMAP");
		rc = kvfs_handle_map(fd, &h, &map);
		if (rc < 0)
			die(b, "mmap %s: %s", path, strerror(-rc));
		cr = b->rt.Memcpy(b->dev, map, b->chunk, GPU_RT_H2D);
		kvfs_handle_unmap(map, &h);
		kvfs_handle_put(fd, &h);
		break;
	case P_IPC:
		/* cuda L1: the arena's own kind; pinned L1: asked for (the
		 * daemon DMAs the chunk into the handle's buffer) */
		t1 = now_s();
		st[0] += t1 - t0;
		rc = kvfs_handle_get_kind(fd, KVFS_HANDLE_CUDA_IPC, &h);
		if (rc < 0 || h.kind != KVFS_HANDLE_CUDA_IPC)
			die(b, "handle on %s: %s", path,
			    rc < 0 ? strerror(-rc) : "not CUDA_IPC");
		st[1] += now_s() - t1;
		t1 = now_s();
		rc = kvfs_cuda_open(&h, -1, &m);
		if (rc < 0)
			die(b, "kvfs_cuda_open: %s", strerror(-rc));
		st[2] += now_s() - t1;
		t1 = now_s();
		cr = b->rt.Memcpy(b->dev, m.dptr, b->chunk, GPU_RT_D2D);
		st[3] += now_s() - t1;
		t1 = now_s();
		kvfs_cuda_close(&m);
		st[4] += now_s() - t1;
		t1 = now_s();
		kvfs_handle_put(fd, &h);
		st[5] += now_s() - t1;
		t1 = now_s();
		break;
	}
	close(fd);
	if (t1) {
		st[6] += now_s() - t1;
		b->stepn++;
	}
	if (cr)
		die(b, "cudaMemcpy: %s", gpu_rt_errname(&b->rt, cr));
}

/* Best GB/s over the rounds of moving every chunk through p. */
static double run_path(struct bench *b, enum path p)
{
	double best = 0;
	int r, i;

	/* Once, verified, so a fast wrong path cannot win. */
	for (i = 0; i < b->nchunks; i++) {
		move_chunk(b, p, i);
		verify_dev(b, i);
	}
	memset(b->step, 0, sizeof(b->step));
	b->stepn = 0;
	for (r = 0; r < b->rounds; r++) {
		double t = now_s(), gbs;

		for (i = 0; i < b->nchunks; i++)
			move_chunk(b, p, i);
		b->rt.DeviceSynchronize();
		t = now_s() - t;
		gbs = (double)b->chunk * b->nchunks / t / 1e9;
		if (gbs > best)
			best = gbs;
	}
	return best;
}

/* The IPC path's time per chunk, by step (means over the timed rounds). */
static void steps(const struct bench *b)
{
	printf("    per chunk:");
	for (int k = 0; k < 7 && b->stepn; k++)
		printf(" %s %.0f us%s", step_name[k],
		       b->step[k] / (double)b->stepn * 1e6, k < 6 ? "," : "");
	printf("\n");
}

/* cudaMemcpy of chunk-sized pieces, kind H2D or D2D, best of rounds. */
static double run_baseline(struct bench *b, int kind)
{
	double best = 0;
	int r, i, cr;

	for (r = 0; r <= b->rounds; r++) {
		double t = now_s(), gbs;

		for (i = 0; i < b->nchunks; i++) {
			cr = kind == GPU_RT_H2D ?
				     b->rt.Memcpy(b->dev, b->pinned, b->chunk,
						  GPU_RT_H2D) :
				     b->rt.Memcpy(b->dev, b->dev2, b->chunk,
						  GPU_RT_D2D);
			if (cr)
				die(b, "baseline cudaMemcpy: %s",
				    gpu_rt_errname(&b->rt, cr));
		}
		b->rt.DeviceSynchronize();
		t = now_s() - t;
		gbs = (double)b->chunk * b->nchunks / t / 1e9;
		if (r > 0 && gbs > best) /* round 0 warms up */
			best = gbs;
	}
	return best;
}

static void row(const struct bench *b, const char *name, const char *l1,
		double gbs, double base, const char *base_name)
{
	printf("%-24s %-7s %9.2f %9.0f  %5.2fx %s\n", name, l1, gbs,
	       gbs * 1e9 / (double)b->chunk, gbs / base, base_name);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: kvfs_gpubench [--chunks N] [--chunk-mib M] "
		"[--rounds R]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "chunks", required_argument, NULL, 'n' },
		{ "chunk-mib", required_argument, NULL, 'c' },
		{ "rounds", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b;
	const char *tmp = getenv("TMPDIR");
	char err[256];
	double g;
	int o, cr;

	memset(&b, 0, sizeof(b));
	b.chunk = 2 * MIB;
	b.nchunks = 64;
	b.rounds = 3;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'n': b.nchunks = atoi(optarg); break;
		case 'c': b.chunk = (size_t)atoi(optarg) * MIB; break;
		case 'r': b.rounds = atoi(optarg); break;
		default: usage();
		}
	}
	if (b.nchunks < 1 || b.chunk < MIB || b.rounds < 1)
		usage();
	if (kvfs_cuda_probe(err, sizeof(err)) <= 0) {
		printf("kvfs_gpubench: no GPU: %s\n", err);
		return 77;
	}
	b.bin = getenv("KVFS_MOUNT_BIN");
	if (!b.bin || !*b.bin)
		b.bin = "build/kvfs-mount";
	if (access(b.bin, X_OK) != 0) {
		printf("kvfs_gpubench: %s not built\n", b.bin);
		return 77;
	}
	if (gpu_rt_load(&b.rt, err, sizeof(err)) < 0 ||
	    gpu_rt_open_device(&b.rt, 0, err, sizeof(err)) < 0) {
		printf("kvfs_gpubench: no GPU: %s\n", err);
		return 77;
	}
	cr = b.rt.HostAlloc(&b.pinned, b.chunk, 0);
	if (!cr)
		cr = b.rt.Malloc(&b.dev, b.chunk);
	if (!cr)
		cr = b.rt.Malloc(&b.dev2, b.chunk);
	if (cr) {
		fprintf(stderr, "kvfs_gpubench: buffers: %s\n",
			gpu_rt_errname(&b.rt, cr));
		return 1;
	}
	snprintf(b.work, sizeof(b.work), "%s/kvfs-gpubench.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(b.work))
		die(&b, "mkdtemp: %s", strerror(errno));
	if (getenv("KVFS_CUDART"))
		printf("NOTE: KVFS_CUDART=%s: not the real runtime, numbers "
		       "are meaningless\n",
		       getenv("KVFS_CUDART"));
	printf("kvfs_gpubench: %d chunks of %zu MiB, best of %d rounds, "
	       "runtime %s\n",
	       b.nchunks, b.chunk / (size_t)MIB, b.rounds, b.rt.path);

	b.h2d_gbs = run_baseline(&b, GPU_RT_H2D);
	b.d2d_gbs = run_baseline(&b, GPU_RT_D2D);
	printf("%-24s %-7s %9s %9s  %s\n", "path", "l1", "GB/s",
	       "chunks/s", "vs baseline");
	row(&b, "cudaMemcpy pinned H2D", "-", b.h2d_gbs, b.h2d_gbs, "(baseline)");
	row(&b, "cudaMemcpy D2D", "-", b.d2d_gbs, b.d2d_gbs, "(baseline)");

	mount_kvfs(&b, "pinned");
	write_chunks(&b);
	g = run_path(&b, P_READ);
	row(&b, "read()+cudaMemcpy", "pinned", g, b.h2d_gbs, "of pinned H2D");
	g = run_path(&b, P_MMAP);
	row(&b, "pinned mmap+cudaMemcpy", "pinned", g, b.h2d_gbs, "of pinned H2D");
	g = run_path(&b, P_IPC);
	row(&b, "IPC handle (daemon DMA)", "pinned", g, b.h2d_gbs, "of pinned H2D");
	steps(&b);
	unmount_kvfs(&b);

	mount_kvfs(&b, "cuda");
	write_chunks(&b);
	g = run_path(&b, P_IPC);
	row(&b, "IPC handle D2D", "cuda", g, b.d2d_gbs, "of D2D");
	steps(&b);
	g = run_path(&b, P_READ);
	row(&b, "read()+cudaMemcpy", "cuda", g, b.h2d_gbs, "of pinned H2D");
	unmount_kvfs(&b);

	b.rt.FreeHost(b.pinned);
	b.rt.Free(b.dev);
	b.rt.Free(b.dev2);
	gpu_rt_unload(&b.rt);
	rmdir(b.work);
	return 0;
}
