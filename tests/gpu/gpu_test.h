/*
 * gpu_test.h - what the GPU test programs share: an engine-like scenario
 * run against a mounted kvfs (write chunks through the mount, take handles,
 * open them on the device, compare, copy into the engine's own device
 * buffer), and the setup that makes CUDA work under AddressSanitizer.
 *
 * The scenario talks to CUDA through gpu/gpu_rt.h (dlopen), so the same
 * code runs on a real GPU (test_gpu_ipc) and on tests/gpu/fake's stand-in
 * runtime (test_gpu_sim). Each check failing prints why and returns -1.
 */
#ifndef KVFS_GPU_TEST_H
#define KVFS_GPU_TEST_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu_rt.h"
#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define GT_MIB (1024u * 1024u)
#define GT_EXPORT_ALIGN (2u * GT_MIB) /* see struct gpu_export */

/* The chunks of the scenario: 2 MiB ones, and odd sizes. */
#define GT_NCHUNKS ((size_t)5)
static inline size_t gt_size(size_t i)
{
	static const size_t sizes[GT_NCHUNKS] = { 2 * GT_MIB, 2 * GT_MIB,
						  300000, 2 * GT_MIB + 4096,
						  4096 };

	return sizes[i % GT_NCHUNKS];
}

static inline int gt_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline int gt_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/*
 * Under ASan, CUDA needs protect_shadow_gap=0 (the driver maps memory where
 * ASan's shadow gap is), and the driver's allocations at exit are not ours
 * to report. ASAN_OPTIONS is read at start, so set it and exec ourselves
 * again; the daemon started later inherits it.
 */
static inline void gt_asan_reexec(char **argv)
{
#if defined(__SANITIZE_ADDRESS__)
	const char *o = getenv("ASAN_OPTIONS");
	char buf[2048], supp[PATH_MAX + 32], exe[PATH_MAX];
	ssize_t n;

	if (o && strstr(o, "protect_shadow_gap=0"))
		return;
	snprintf(buf, sizeof(buf), "%s%sprotect_shadow_gap=0", o ? o : "",
		 o && *o ? ":" : "");
	setenv("ASAN_OPTIONS", buf, 1);
	if (!getenv("LSAN_OPTIONS")) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			/* Written next to the binary by gt_write_supp. */
			FILE *f;

			snprintf(supp, sizeof(supp),
				 "suppressions=%s.lsan", exe);
			setenv("LSAN_OPTIONS", supp, 1);
			f = fopen(supp + strlen("suppressions="), "w");
			if (f) {
				fputs("leak:libcuda.so\nleak:libcudart.so\n"
				      "leak:libnvidia\n",
				      f);
				fclose(f);
			}
		}
	}
	execv("/proc/self/exe", argv);
	/* If exec fails, go on: only a real GPU under ASan needs it. */
#else
	(void)argv;
#endif
}

/*
 * gt_probe - kvfs_cuda_probe in a throwaway child. CUDA does not survive
 * fork(): a process that initialized it cannot fork engines that use it,
 * so the test's main process never touches CUDA itself.
 */
static inline int gt_probe(char *why, size_t len)
{
	int pfd[2], n = -ENODEV, st;
	pid_t pid;
	ssize_t r;

	snprintf(why, len, "probe failed");
	if (pipe(pfd) < 0)
		return -ENODEV;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -ENODEV;
	if (pid == 0) {
		char buf[512];
		int c = kvfs_cuda_probe(buf, sizeof(buf));

		close(pfd[0]);
		if (write(pfd[1], &c, sizeof(c)) != sizeof(c) ||
		    write(pfd[1], buf, strlen(buf) + 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &n, sizeof(n)) != sizeof(n))
		n = -ENODEV;
	r = read(pfd[0], why, len - 1);
	why[r > 0 ? r : 0] = '\0';
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return n;
}

/* Finds BUILD/tests/gpu/libfakecudart.so next to this test binary. */
static inline int gt_fake_path(char *out, size_t len)
{
	const char *env = getenv("KVFS_FAKECUDART");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	snprintf(out, len, "%s/libfakecudart.so", dirname(exe));
	return access(out, R_OK);
}

/* 0 when the mount binary exists; else prints why the test skips. */
static inline int gt_have_mount_bin(void)
{
	if (access(kvfs_test_bin(), X_OK) == 0)
		return 0;
	printf("skipped: %s not built\n", kvfs_test_bin());
	return -1;
}

/*
 * The size of the device allocation that contains p, to prove a handle
 * reaches one chunk's buffer and nothing else: the driver's
 * cuMemGetAddressRange on a GPU, the fake runtime's own call in
 * simulation. 0 when neither is available (the check is then skipped).
 */
static inline size_t gt_alloc_size(void *p)
{
	size_t (*fake)(const void *);
	int (*range)(unsigned long long *, size_t *, unsigned long long);
	unsigned long long base = 0;
	size_t size = 0;
	void *dl;

	fake = (size_t (*)(const void *))dlsym(RTLD_DEFAULT,
						"fakecuda_alloc_size");
	if (!fake) {
		const char *f = getenv("KVFS_CUDART");

		dl = f ? dlopen(f, RTLD_NOW | RTLD_NOLOAD) : NULL;
		if (dl)
			fake = (size_t (*)(const void *))dlsym(
				dl, "fakecuda_alloc_size");
	}
	if (fake)
		return fake(p);
	dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!dl)
		return 0;
	range = (int (*)(unsigned long long *, size_t *,
			 unsigned long long))dlsym(dl, "cuMemGetAddressRange_v2");
	if (!range || range(&base, &size, (unsigned long long)(uintptr_t)p))
		return 0;
	return size;
}

static inline void gt_key_path(const struct kvfs_mnt *m, const char *ns,
			       int i, char *buf)
{
	char name[33];

	kvfs_test_key_name(1000 + (uint64_t)i, name);
	kvfs_test_path(m, buf, "%s/%s", ns, name);
}

/* Creates ns and writes the scenario's chunks (seed base + i). */
static inline int gt_write_chunks(const struct kvfs_mnt *m, const char *ns,
				  uint64_t base)
{
	char path[PATH_MAX];
	size_t i;
	int rc;

	kvfs_test_path(m, path, "%s", ns);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return gt_fail("mkdir %s: %s", path, strerror(errno));
	for (i = 0; i < GT_NCHUNKS; i++) {
		gt_key_path(m, ns, (int)i, path);
		rc = kvfs_test_write_file(path, gt_size(i), base + i, GT_MIB);
		if (rc < 0)
			return gt_fail("write %s: %s", path, strerror(-rc));
	}
	return 0;
}

/* Device-side check: copies the device bytes back and compares. */
static inline int gt_check_device(struct gpu_rt *rt, const void *dptr,
				  size_t len, uint64_t seed, const char *what)
{
	char *host = malloc(len ? len : 1);
	int cr, rc = 0;

	if (!host)
		return gt_fail("%s: out of memory", what);
	cr = rt->Memcpy(host, dptr, len, GPU_RT_D2H);
	if (cr != GPU_RT_SUCCESS)
		rc = gt_fail("%s: cudaMemcpy D2H: %s", what,
			     gpu_rt_errname(rt, cr));
	else if (kvfs_test_check(host, len, seed, 0) != 0)
		rc = gt_fail("%s: device bytes differ from what was written",
			     what);
	free(host);
	return rc;
}

/*
 * The engine with CUDA IPC handles (kind: 0 for the arena's own, or
 * KVFS_HANDLE_CUDA_IPC): per chunk, open, take a handle, map it on the
 * device, compare, copy into an own device buffer and compare that, check
 * the mapping is this chunk's buffer only (2 MiB-rounded, zero tail), close
 * the mapping, release, and read the chunk through FUSE too (for l1=cuda,
 * the arena's bounce path).
 */
static inline int gt_engine_ipc(const struct kvfs_mnt *m, const char *ns,
				uint64_t base, uint32_t kind)
{
	struct gpu_rt rt;
	char err[256], path[PATH_MAX];
	size_t i;

	if (gpu_rt_load(&rt, err, sizeof(err)) < 0 ||
	    gpu_rt_open_device(&rt, 0, err, sizeof(err)) < 0)
		return gt_fail("engine: %s", err);
	for (i = 0; i < GT_NCHUNKS; i++) {
		size_t len = gt_size(i), cap, got, j;
		struct kvfs_handle h;
		struct kvfs_cuda_map map;
		void *mine = NULL;
		char *tail;
		int fd, rc, cr;

		gt_key_path(m, ns, (int)i, path);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return gt_fail("open %s: %s", path, strerror(errno));
		rc = kvfs_handle_get_kind(fd, kind, &h);
		if (rc < 0)
			return gt_fail("KVFS_IOC_HANDLE (kind %u) on %s: %s",
				       kind, path, strerror(-rc));
		if (h.kind != KVFS_HANDLE_CUDA_IPC || h.length != len ||
		    h.device < 0)
			return gt_fail("handle: kind %u length %llu device %d,"
				       " want CUDA_IPC, %zu, >= 0",
				       h.kind, (unsigned long long)h.length,
				       h.device, len);
		rc = kvfs_cuda_open(&h, -1, &map);
		if (rc < 0)
			return gt_fail("kvfs_cuda_open: %s", strerror(-rc));
		if (gt_check_device(&rt, map.dptr, len, base + i,
				    "IPC mapping") < 0)
			return -1;
		/* Isolation: the mapping is one buffer of this chunk. */
		cap = (h.offset + len + GT_EXPORT_ALIGN - 1) /
		      GT_EXPORT_ALIGN * GT_EXPORT_ALIGN;
		got = gt_alloc_size((char *)map.dptr - h.offset);
		if (got == 0)
			printf("note: cannot query allocation sizes here\n");
		else if (got != cap)
			return gt_fail("handle reaches %zu bytes, want %zu",
				       got, cap);
		tail = malloc(cap - h.offset - len + 1);
		if (!tail)
			return gt_fail("out of memory");
		if (cap > h.offset + len) {
			cr = rt.Memcpy(tail, (char *)map.dptr + len,
				       cap - h.offset - len, GPU_RT_D2H);
			if (cr != GPU_RT_SUCCESS)
				return gt_fail("tail D2H: %s",
					       gpu_rt_errname(&rt, cr));
			for (j = 0; j < cap - h.offset - len; j++)
				if (tail[j])
					return gt_fail("non-zero byte past "
						       "the chunk at +%zu", j);
		}
		free(tail);
		/* Into the engine's own KV buffer, device to device. */
		cr = rt.Malloc(&mine, len);
		if (cr == GPU_RT_SUCCESS)
			cr = rt.Memcpy(mine, map.dptr, len, GPU_RT_D2D);
		if (cr != GPU_RT_SUCCESS)
			return gt_fail("own buffer: %s", gpu_rt_errname(&rt, cr));
		if (gt_check_device(&rt, mine, len, base + i, "own buffer") < 0)
			return -1;
		rt.Free(mine);
		rc = kvfs_cuda_close(&map);
		if (rc < 0)
			return gt_fail("kvfs_cuda_close: %s", strerror(-rc));
		rc = kvfs_handle_put(fd, &h);
		if (rc < 0)
			return gt_fail("KVFS_IOC_HANDLE_RELEASE: %s",
				       strerror(-rc));
		close(fd);
		rc = kvfs_test_read_check(path, len, base + i);
		if (rc < 0)
			return gt_fail("read() of %s: %s", path,
				       strerror(-rc));
	}
	gpu_rt_unload(&rt);
	return 0;
}

/* The engine, l1=cuda: the arena's own handles (CUDA IPC). */
static inline int gt_engine_cuda(const struct kvfs_mnt *m, const char *ns,
				 uint64_t base)
{
	return gt_engine_ipc(m, ns, base, 0);
}

/* The engine, l1=pinned, asking for CUDA IPC handles: the daemon DMAs each
 * chunk from its page-locked arena into a device buffer of its own. */
static inline int gt_engine_pinned_ipc(const struct kvfs_mnt *m,
				       const char *ns, uint64_t base)
{
	return gt_engine_ipc(m, ns, base, KVFS_HANDLE_CUDA_IPC);
}

/*
 * The engine, l1=pinned: the handle says HOST_MMAP; mmap the chunk fd,
 * register the mapping read-only where CUDA allows it, cudaMemcpyAsync it
 * into an own device buffer on a stream, compare.
 */
static inline int gt_engine_pinned(const struct kvfs_mnt *m,
				   const char *ns, uint64_t base)
{
	struct gpu_rt rt;
	gpu_rt_stream s = NULL;
	char err[256], path[PATH_MAX];
	size_t i;
	int cr;

	if (gpu_rt_load(&rt, err, sizeof(err)) < 0 ||
	    gpu_rt_open_device(&rt, 0, err, sizeof(err)) < 0)
		return gt_fail("engine: %s", err);
	cr = rt.StreamCreateWithFlags(&s, GPU_RT_STREAM_NON_BLOCKING);
	if (cr != GPU_RT_SUCCESS)
		return gt_fail("stream: %s", gpu_rt_errname(&rt, cr));
	for (i = 0; i < GT_NCHUNKS; i++) {
		size_t len = gt_size(i);
		struct kvfs_handle h;
		const void *p = NULL;
		void *mine = NULL;
		int fd, rc, reg;

		gt_key_path(m, ns, (int)i, path);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return gt_fail("open %s: %s", path, strerror(errno));
		rc = kvfs_handle_get(fd, &h);
		if (rc < 0)
			return gt_fail("KVFS_IOC_HANDLE: %s", strerror(-rc));
		if (h.kind != KVFS_HANDLE_HOST_MMAP || h.length != len)
			return gt_fail("handle kind %u length %llu, want "
				       "HOST_MMAP %zu",
				       h.kind, (unsigned long long)h.length,
				       len);
		rc = kvfs_handle_map(fd, &h, &p);
		if (rc < 0)
			return gt_fail("kvfs_handle_map: %s", strerror(-rc));
		/* Page-locking a FUSE mapping may be refused; then the copy
		 * is staged by the driver, slower but correct. */
		reg = rt.HostRegister((void *)p, len,
				      GPU_RT_HOST_REGISTER_READONLY) ==
		      GPU_RT_SUCCESS;
		if (!reg)
			rt.GetLastError();
		cr = rt.Malloc(&mine, len);
		if (cr == GPU_RT_SUCCESS)
			cr = rt.MemcpyAsync(mine, p, len, GPU_RT_H2D, s);
		if (cr == GPU_RT_SUCCESS)
			cr = rt.StreamSynchronize(s);
		if (cr != GPU_RT_SUCCESS)
			return gt_fail("cudaMemcpyAsync from the mmap: %s",
				       gpu_rt_errname(&rt, cr));
		if (gt_check_device(&rt, mine, len, base + i,
				    "pinned mmap copy") < 0)
			return -1;
		if (i == 0)
			printf("pinned: mmap %s page-locked in the engine\n",
			       reg ? "was" : "was not");
		if (reg)
			rt.HostUnregister((void *)p);
		rt.Free(mine);
		kvfs_handle_unmap(p, &h);
		rc = kvfs_handle_put(fd, &h);
		if (rc < 0)
			return gt_fail("KVFS_IOC_HANDLE_RELEASE: %s",
				       strerror(-rc));
		close(fd);
	}
	rt.StreamDestroy(s);
	gpu_rt_unload(&rt);
	return 0;
}

/* Runs fn in a child process (the engine is not the writer); 0 if it
 * exited 0. */
typedef int (*gt_engine_fn)(const struct kvfs_mnt *, const char *, uint64_t);

static inline int gt_in_child(gt_engine_fn fn, const struct kvfs_mnt *m,
			      const char *ns, uint64_t base)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return gt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		_exit(fn(m, ns, base) == 0 ? 0 : 1);
	if (waitpid(pid, &st, 0) != pid)
		return gt_fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return gt_fail("engine process failed (status 0x%x)", st);
	return 0;
}

/*
 * Runs kvfs_devcheck (the nvcc-built check next to this binary, comparing
 * chunk bytes on the device with a kernel) on ns's chunks. Real GPUs
 * only: it links the real libcudart, so it is skipped on the stand-in,
 * and when $KVFS_DEVCHECK_SKIP says why it cannot run (make gpu-bundle's
 * run.sh: a driver older than the CUDA it was built with).
 */
static inline int gt_devcheck(const struct kvfs_mnt *m, const char *ns)
{
	char exe[PATH_MAX], bin[PATH_MAX + 32], paths[GT_NCHUNKS][PATH_MAX];
	char out[8192];
	const char *argv[GT_NCHUNKS + 2];
	ssize_t n;
	size_t i;
	int st;

	if (getenv("KVFS_CUDART"))
		return 0;
	if (getenv("KVFS_DEVCHECK_SKIP") && *getenv("KVFS_DEVCHECK_SKIP")) {
		printf("note: kvfs_devcheck not run: %s\n",
		       getenv("KVFS_DEVCHECK_SKIP"));
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	snprintf(bin, sizeof(bin), "%s/kvfs_devcheck", dirname(exe));
	if (access(bin, X_OK) != 0) {
		printf("note: %s not built (no nvcc)\n", bin);
		return 0;
	}
	argv[0] = bin;
	for (i = 0; i < GT_NCHUNKS; i++) {
		gt_key_path(m, ns, (int)i, paths[i]);
		argv[i + 1] = paths[i];
	}
	argv[GT_NCHUNKS + 1] = NULL;
	st = kvfs_test_run(argv, out, sizeof(out));
	printf("%s", out);
	return st == 0 ? 0 : gt_fail("kvfs_devcheck exited %d", st);
}

/*
 * The whole scenario on one backend: mount with l1=<l1>, write two
 * namespaces, run the engine on both in a second process, unmount.
 */
/* A CUDA IPC handle of chunk i of ns, mapped, its device bytes checked,
 * then unmapped and released; *h and *dptr say what it was. */
static inline int gt_handle_once(struct gpu_rt *rt, const struct kvfs_mnt *m,
				 const char *ns, uint64_t base, int i,
				 struct kvfs_handle *h, void **dptr)
{
	char path[PATH_MAX];
	struct kvfs_cuda_map map;
	int fd, rc;

	gt_key_path(m, ns, i, path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gt_fail("open %s: %s", path, strerror(errno));
	rc = kvfs_handle_get_kind(fd, KVFS_HANDLE_CUDA_IPC, h);
	if (rc < 0)
		return gt_fail("KVFS_IOC_HANDLE on %s: %s", path,
			       strerror(-rc));
	rc = kvfs_cuda_open(h, -1, &map);
	if (rc < 0)
		return gt_fail("kvfs_cuda_open: %s", strerror(-rc));
	*dptr = map.dptr;
	if (gt_check_device(rt, map.dptr, gt_size((size_t)i),
			    base + (uint64_t)i, "reused mapping") < 0)
		return -1;
	if (kvfs_cuda_close(&map) < 0 || kvfs_handle_put(fd, h) < 0)
		return gt_fail("close or release of %s", path);
	close(fd);
	return 0;
}

/*
 * The export buffers' reuse (gpu/gpu.h): the daemon gives a released
 * buffer back, with its IPC handle, for the next chunk of the same size to
 * the same uid, gid and namespace, and libkvfs reuses its mapping of it;
 * the bytes are then the new chunk's. Never to another namespace, nor to
 * another user (a child that became nobody, reading a 0755 namespace).
 */
static inline int gt_engine_reuse(const struct kvfs_mnt *m, const char *ns,
				  uint64_t base)
{
	struct kvfs_handle h0, h1, h2, h3;
	struct gpu_rt rt;
	char err[256], path[PATH_MAX];
	void *d0, *d1, *d2;
	pid_t pid;
	int st;

	if (gpu_rt_load(&rt, err, sizeof(err)) < 0 ||
	    gpu_rt_open_device(&rt, 0, err, sizeof(err)) < 0)
		return gt_fail("engine: %s", err);
	/* chunks 0 and 1 are both 2 MiB (gt_size) */
	if (gt_handle_once(&rt, m, ns, base, 0, &h0, &d0) < 0 ||
	    gt_handle_once(&rt, m, ns, base, 1, &h1, &d1) < 0)
		return -1;
	if (memcmp(h0.ipc, h1.ipc, sizeof(h0.ipc)))
		return gt_fail("a released buffer was not reused for the "
			       "same owner's next chunk");
	if (d0 != d1)
		return gt_fail("libkvfs opened the same IPC handle twice "
			       "instead of reusing its mapping");
	if (gt_handle_once(&rt, m, "other.tp1.r0", 200, 0, &h2, &d2) < 0)
		return -1;
	if (!memcmp(h0.ipc, h2.ipc, sizeof(h0.ipc)))
		return gt_fail("a buffer of %s went to another namespace", ns);
	/* another user, the same namespace and size: never root's buffer.
	 * The chunk is opened before the setuid (the mount may sit under a
	 * directory nobody cannot search); the handle ioctl checks its
	 * caller, nobody, against the namespace's 0755. */
	gt_key_path(m, ns, 1, path);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return gt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(2);
		if (kvfs_handle_get_kind(fd, KVFS_HANDLE_CUDA_IPC, &h3) < 0)
			_exit(3);
		/* h0's buffer (root's) is in the pool: not for nobody */
		_exit(memcmp(h3.ipc, h0.ipc, sizeof(h3.ipc)) ? 0 : 4);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return gt_fail("nobody's handle: status 0x%x (2: setuid, 3: "
			       "handle, 4: got root's buffer)", st);
	gpu_rt_unload(&rt);
	return 0;
}

/* gt_engine_reuse on a mount of its own (allow_other, so that nobody
 * reaches the daemon and its handle is refused or given by kvfs). */
static inline int gt_reuse(const char *l1)
{
	struct kvfs_mnt m;
	char opts[128];
	int rc = 0, st;

	if (geteuid() != 0) {
		printf("note: not root: the other-user part of the reuse "
		       "test needs setuid\n");
		return 0;
	}
	snprintf(opts, sizeof(opts), "allow_other,l1=%s,l1_size=64M", l1);
	if (kvfs_test_mount(&m, opts) < 0)
		return gt_fail("mount -o %s failed", opts);
	if (gt_write_chunks(&m, "llama.tp1.r0", 100) < 0 ||
	    gt_write_chunks(&m, "other.tp1.r0", 200) < 0)
		rc = -1;
	if (rc == 0)
		rc = gt_in_child(gt_engine_reuse, &m, "llama.tp1.r0", 100);
	st = kvfs_test_umount(&m);
	if (st != 0)
		rc = gt_fail("unmount: daemon status %d", st);
	if (rc == 0)
		printf("ok: l1=%s: export buffers reused for their owner "
		       "only, mappings reused\n", l1);
	return rc;
}

static inline int gt_scenario(const char *l1)
{
	struct kvfs_mnt m;
	char opts[128];
	int cuda = strncmp(l1, "cuda", 4) == 0, rc = 0, st;

	snprintf(opts, sizeof(opts), "l1=%s,l1_size=64M", l1);
	if (kvfs_test_mount(&m, opts) < 0)
		return gt_fail("mount -o %s failed", opts);
	printf("mounted kvfs -o %s on %s\n", opts, m.dir);
	if (gt_write_chunks(&m, "llama.tp1.r0", 100) < 0 ||
	    gt_write_chunks(&m, "other.tp1.r0", 200) < 0)
		rc = -1;
	if (rc == 0)
		rc = gt_in_child(cuda ? gt_engine_cuda : gt_engine_pinned, &m,
				 "llama.tp1.r0", 100);
	if (rc == 0)
		rc = gt_in_child(cuda ? gt_engine_cuda : gt_engine_pinned, &m,
				 "other.tp1.r0", 200);
	/* pinned L1 also hands out device copies on request */
	if (rc == 0 && !cuda)
		rc = gt_in_child(gt_engine_pinned_ipc, &m, "llama.tp1.r0", 100);
	if (rc == 0 && !cuda)
		rc = gt_in_child(gt_engine_pinned_ipc, &m, "other.tp1.r0", 200);
	if (rc == 0)
		rc = gt_devcheck(&m, "llama.tp1.r0");
	st = kvfs_test_umount(&m);
	if (st != 0)
		rc = gt_fail("unmount: daemon status %d", st);
	if (rc == 0)
		printf("ok: l1=%s: %zu chunks x 2 namespaces verified on the "
		       "device\n",
		       l1, GT_NCHUNKS);
	return rc;
}

#endif /* KVFS_GPU_TEST_H */
