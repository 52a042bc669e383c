/*
 * test_gpu.c - gpu/: the host backend, spec parsing, the CUDA runtime
 * loader, and the pinned/cuda backends: -ENODEV with a reason where no GPU
 * is usable (as on the build machine), real round trips where one is.
 * Also the client's CUDA handle checks (lib/client_cuda.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"
#include "gpu/gpu_rt.h"
#include "kvfs.h"
#include "tests/gpu/gpu_test.h"
#include "tests/common/kvfs_test.h"

#define MIB (1024u * 1024u)

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

/* 1 when a GPU is usable here; else why not in why. */
static int have_gpu(char *why, size_t len)
{
	return gpu_rt_probe(why, len) > 0;
}

/* ------------------------------------------------------------ host */

static void round_trip(struct gpu_arena *a, uint64_t off, size_t len,
		       uint32_t seed)
{
	uint8_t *src = malloc(len), *dst = malloc(len);

	assert_non_null(src);
	assert_non_null(dst);
	fill(src, len, seed);
	memset(dst, 0xee, len);
	assert_int_equal(gpu_copy_in(a, off, src, len), 0);
	assert_int_equal(gpu_copy_out(a, off, dst, len), 0);
	assert_memory_equal(src, dst, len);
	free(src);
	free(dst);
}

static void range_checks(struct gpu_arena *a)
{
	uint8_t b[16] = { 0 };

	assert_int_equal(gpu_copy_in(a, a->size - 8, b, 16), -EINVAL);
	assert_int_equal(gpu_copy_out(a, a->size - 8, b, 16), -EINVAL);
	assert_int_equal(gpu_copy_in(a, a->size + 1, b, 0), -EINVAL);
	assert_int_equal(gpu_copy_out(a, UINT64_MAX, b, 1), -EINVAL);
	assert_int_equal(gpu_zero(a, a->size - 1, 2), -EINVAL);
	/* The very end is fine. */
	assert_int_equal(gpu_copy_in(a, a->size - 16, b, 16), 0);
	assert_int_equal(gpu_copy_in(a, a->size, b, 0), 0);
}

/* move: disjoint ranges copy, anything else is refused. */
static void move_check(struct gpu_arena *a)
{
	uint8_t src[5000], back[5000];

	fill(src, sizeof(src), 77);
	assert_int_equal(gpu_copy_in(a, 100000, src, sizeof(src)), 0);
	assert_int_equal(gpu_move(a, 300001, 100000, sizeof(src)), 0);
	assert_int_equal(gpu_copy_out(a, 300001, back, sizeof(back)), 0);
	assert_memory_equal(src, back, sizeof(src));
	assert_int_equal(gpu_move(a, 100100, 100000, sizeof(src)), -EINVAL);
	assert_int_equal(gpu_move(a, a->size - 10, 0, 11), -EINVAL);
	assert_int_equal(gpu_move(a, 0, a->size, 1), -EINVAL);
	assert_int_equal(gpu_move(a, 0, 4096, 0), 0);
}

static void zero_check(struct gpu_arena *a)
{
	uint8_t buf[4096], want[4096];

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(gpu_copy_in(a, 8192, buf, sizeof(buf)), 0);
	assert_int_equal(gpu_zero(a, 8192 + 100, 1000), 0);
	memset(want, 0x5a, sizeof(want));
	memset(want + 100, 0, 1000);
	assert_int_equal(gpu_copy_out(a, 8192, buf, sizeof(buf)), 0);
	assert_memory_equal(buf, want, sizeof(buf));
}

static void test_host_backend(void **state)
{
	struct gpu_arena a;
	struct gpu_export ex = { 0 };
	char err[256] = "", desc[128];
	uint8_t pat[4096], back[4096];

	(void)state;
	assert_int_equal(gpu_arena_open("host", 4 * MIB, &a, err, sizeof(err)),
			 0);
	assert_string_equal(a.ops->name, "host");
	assert_non_null(a.host);
	assert_int_equal(a.device, -1);
	assert_int_equal(a.handle_kind, KVFS_HANDLE_HOST_MMAP);
	assert_int_equal(a.size, 4 * MIB);

	round_trip(&a, 0, 4 * MIB, 1);
	round_trip(&a, 12345, 100000, 2);
	range_checks(&a);
	zero_check(&a);
	move_check(&a);

	/* The arena is a->host: what was copied in is there. */
	fill(pat, sizeof(pat), 3);
	assert_int_equal(gpu_copy_in(&a, MIB, pat, sizeof(pat)), 0);
	memcpy(back, (const uint8_t *)a.host + MIB, sizeof(back));
	assert_memory_equal(pat, back, sizeof(pat));

	/* Host memory has no IPC handle; unexport of nothing is harmless. */
	memset(&ex, 0xff, sizeof(ex));
	assert_int_equal(gpu_export_range(&a, 0, 4096, &ex), -ENOTSUP);
	assert_null(ex.cookie);
	gpu_unexport(&a, NULL);

	assert_true(gpu_arena_describe(&a, desc, sizeof(desc)) > 0);
	assert_non_null(strstr(desc, "host"));
	gpu_arena_close(&a);
	assert_null(a.ops);
	gpu_arena_close(&a); /* twice is harmless */

	/* No GPU here: the default is host (pinned where one is usable). */
	{
		char why[256];

		assert_string_equal(gpu_default_spec(),
				    have_gpu(why, sizeof(why)) ? "pinned" :
								 "host");
		assert_int_equal(gpu_arena_open("auto", MIB, &a, err,
						sizeof(err)),
				 0);
		assert_string_equal(a.ops->name, gpu_default_spec());
		gpu_arena_close(&a);
	}

	/* NULL spec means host. */
	assert_int_equal(gpu_arena_open(NULL, MIB, &a, err, sizeof(err)), 0);
	assert_string_equal(a.ops->name, "host");
	gpu_arena_close(&a);
}

struct mt_arg {
	struct gpu_arena *a;
	int id;
	int failures;
};

/* Distinct ranges from several threads at once (FUSE workers do this). */
static void *mt_worker(void *v)
{
	struct mt_arg *m = v;
	size_t len = 256 * 1024 + (size_t)m->id * 4096 + 7;
	uint64_t off = (uint64_t)m->id * MIB + 3;
	uint8_t *src = malloc(len), *dst = malloc(len);
	int i;

	for (i = 0; i < 8 && src && dst; i++) {
		fill(src, len, (uint32_t)(m->id * 100 + i));
		if (gpu_copy_in(m->a, off, src, len) != 0 ||
		    gpu_copy_out(m->a, off, dst, len) != 0 ||
		    memcmp(src, dst, len) != 0)
			m->failures++;
	}
	if (!src || !dst)
		m->failures++;
	free(src);
	free(dst);
	return NULL;
}

static void threaded_round_trips(struct gpu_arena *a)
{
	pthread_t th[8];
	struct mt_arg args[8];
	int i;

	assert_true(a->size >= 8 * MIB);
	for (i = 0; i < 8; i++) {
		args[i] = (struct mt_arg){ .a = a, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, mt_worker,
						&args[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
}

static void test_host_threads(void **state)
{
	struct gpu_arena a;
	char err[256];

	(void)state;
	assert_int_equal(gpu_arena_open("host", 8 * MIB, &a, err, sizeof(err)),
			 0);
	threaded_round_trips(&a);
	gpu_arena_close(&a);
}

/* ------------------------------------------------------------ specs */

static void test_bad_specs(void **state)
{
	static const char *const bad[] = {
		"", "gpu", "Host", "hostx", "pinned:0", "cuda:", "cuda:x",
		"cuda:-1", "cuda:1x", "cuda:99999", "cuda0", "cudax", " host",
		"Auto", "auto:1",
	};
	struct gpu_arena a;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(gpu_arena_open(bad[i], MIB, &a, err,
						sizeof(err)),
				 -EINVAL);
		/* The message names the option as written. */
		assert_non_null(strstr(err, "l1="));
		assert_null(a.ops);
		gpu_arena_close(&a);
	}
}

/* ------------------------------------------------------- the loader */

static void test_rt_loader(void **state)
{
	struct gpu_rt rt;
	char err[256], *old = getenv("KVFS_CUDART");
	char *saved = old ? strdup(old) : NULL;
	int rc;

	(void)state;
	/* An explicit library that does not exist: a clear -ENODEV. */
	setenv("KVFS_CUDART", "/nonexistent/libcudart.so", 1);
	err[0] = '\0';
	assert_int_equal(gpu_rt_load(&rt, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "no CUDA runtime"));
	assert_null(rt.dl);
	/* A library that is not the CUDA runtime: names the missing symbol. */
	setenv("KVFS_CUDART", "libz.so.1", 1);
	rc = gpu_rt_load(&rt, err, sizeof(err));
	if (rc == -ENODEV && strstr(err, "lacks"))
		assert_non_null(strstr(err, "cudaGetDeviceCount"));
	else
		assert_int_equal(rc, -ENODEV); /* no libz: still ENODEV */
	if (saved)
		setenv("KVFS_CUDART", saved, 1);
	else
		unsetenv("KVFS_CUDART");
	free(saved);

	/* Where a libcudart exists, loading works and the driver decides. */
	rc = gpu_rt_load(&rt, err, sizeof(err));
	if (rc == 0) {
		int count = -1, cr = rt.GetDeviceCount(&count);

		print_message("libcudart: %s, cudaGetDeviceCount: %d (%s)\n",
			      rt.path, cr, gpu_rt_errname(&rt, cr));
		rc = gpu_rt_open_device(&rt, 0, err, sizeof(err));
		if (cr == GPU_RT_ERR_INSUFFICIENT_DRIVER) {
			assert_int_equal(rc, -ENODEV);
			assert_non_null(strstr(err,
					       "cudaErrorInsufficientDriver"));
		} else if (cr == GPU_RT_SUCCESS && count > 0) {
			assert_int_equal(rc, count);
			assert_int_equal(gpu_rt_open_device(&rt, count, err,
							    sizeof(err)),
					 -ENODEV);
			assert_non_null(strstr(err, "does not exist"));
		} else {
			assert_int_equal(rc, -ENODEV);
		}
		gpu_rt_unload(&rt);
		assert_null(rt.dl);
	} else {
		assert_int_equal(rc, -ENODEV);
		print_message("no libcudart here: %s\n", err);
	}

	assert_int_equal(gpu_rt_errno(GPU_RT_SUCCESS), 0);
	assert_int_equal(gpu_rt_errno(GPU_RT_ERR_MEMORY_ALLOCATION), -ENOMEM);
	assert_int_equal(gpu_rt_errno(GPU_RT_ERR_INSUFFICIENT_DRIVER), -ENODEV);
	assert_int_equal(gpu_rt_errno(GPU_RT_ERR_NO_DEVICE), -ENODEV);
	assert_int_equal(gpu_rt_errno(999), -EIO);
}

/* ------------------------------------------------- pinned and cuda */

/* Without a GPU: -ENODEV, the option named, the reason given, no arena. */
static void expect_nodev(const char *spec, const char *why)
{
	struct gpu_arena a;
	char err[512] = "", want[64];

	assert_int_equal(gpu_arena_open(spec, 4 * MIB, &a, err, sizeof(err)),
			 -ENODEV);
	print_message("l1=%s -> %s\n", spec, err);
	/* "l1=cuda:3: ..." (or "l1=cuda: ..." from a CUDA=0 build) */
	snprintf(want, sizeof(want), "l1=%.*s", (int)strcspn(spec, ":"), spec);
	assert_memory_equal(err, want, strlen(want));
	assert_true(strlen(err) > strlen(want) + 5);
	/* The same reason the probe gave (or "built without CUDA"). */
	assert_true(strstr(err, why) != NULL ||
		    strstr(err, "without CUDA") != NULL);
	assert_null(a.ops);
	gpu_arena_close(&a);
}

/*
 * The host arena is anonymous memory that starts on a huge page and has
 * huge pages where THP is on (FUSE replies from it pin a huge page at
 * once, not 512 small ones), and a forked child does not share it (the
 * daemon's writes would copy each page while the child lives). Before:
 * a shmem memfd, 4 KiB pages where shmem_enabled is never, inherited.
 */
static void test_host_huge_pages(void **state)
{
	const uint64_t size = 64 * MIB + 4096 * 3; /* not a multiple */
	struct gpu_arena a;
	char err[256] = "";
	long kb;
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(gpu_arena_open("host", size, &a, err, sizeof(err)),
			 0);
	assert_int_equal((uintptr_t)a.host % (2 * MIB), 0);
	assert_int_equal(a.size, size);
	round_trip(&a, size - 3 * MIB - 5, 3 * MIB + 5, 41); /* the tail */
	kb = kvfs_test_huge_kb(a.host);
	assert_true(kb >= 0);
	if (kvfs_test_thp_on())
		assert_true(kb >= 2048);
	else
		print_message("THP off here: %ld kB in huge pages\n", kb);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) /* not mapped in the child: msync says ENOMEM */
		_exit(msync(a.host, 4096, MS_ASYNC) == -1 && errno == ENOMEM ?
			      0 : 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	gpu_arena_close(&a);
}

static void test_pinned(void **state)
{
	struct gpu_arena a;
	struct gpu_export ex = { 0 };
	char why[256], err[512];

	(void)state;
	if (!have_gpu(why, sizeof(why))) {
		expect_nodev("pinned", why);
		return;
	}
	assert_int_equal(gpu_arena_open("pinned", 16 * MIB, &a, err,
					sizeof(err)),
			 0);
	assert_string_equal(a.ops->name, "pinned");
	assert_non_null(a.host);
	assert_int_equal(a.device, 0);
	assert_int_equal(a.handle_kind, KVFS_HANDLE_HOST_MMAP);
	round_trip(&a, 0, 16 * MIB, 11);
	round_trip(&a, 4097, 3 * MIB, 12);
	range_checks(&a);
	zero_check(&a);
	move_check(&a);
	/* an export DMAs the range into a device buffer of its own */
	assert_int_equal(gpu_export_range(&a, 4096, 3 * MIB, &ex), 0);
	assert_non_null(ex.cookie);
	assert_int_equal(ex.offset, 0);
	assert_int_equal(ex.length, 3 * MIB);
	assert_int_equal(ex.device, 0);
	gpu_unexport(&a, ex.cookie);
	assert_int_equal(gpu_export_range(&a, 15 * MIB, 2 * MIB, &ex),
			 -EINVAL);
	threaded_round_trips(&a);
	gpu_arena_close(&a);
}

static void test_cuda(void **state)
{
	struct gpu_arena a;
	struct gpu_export ex = { 0 }, ex2 = { 0 };
	char why[256], err[512], desc[128];
	int n;

	(void)state;
	n = gpu_rt_probe(why, sizeof(why));
	if (n <= 0) {
		expect_nodev("cuda", why);
		expect_nodev("cuda:3", why);
		return;
	}
	assert_int_equal(gpu_arena_open("cuda", 32 * MIB, &a, err,
					sizeof(err)),
			 0);
	assert_string_equal(a.ops->name, "cuda");
	assert_null(a.host);
	assert_int_equal(a.device, 0);
	assert_int_equal(a.handle_kind, KVFS_HANDLE_CUDA_IPC);
	assert_true(gpu_arena_describe(&a, desc, sizeof(desc)) > 0);
	assert_non_null(strstr(desc, "device"));
	/* Bigger than one bounce buffer, at odd offsets. */
	round_trip(&a, 0, 32 * MIB, 21);
	round_trip(&a, 12345, 9 * MIB + 17, 22);
	round_trip(&a, 31 * MIB, MIB, 23);
	range_checks(&a);
	zero_check(&a);
	move_check(&a);
	threaded_round_trips(&a);

	/* Exports: one buffer each, never the arena's handle. */
	assert_int_equal(gpu_export_range(&a, 3 * MIB, 2 * MIB, &ex), 0);
	assert_non_null(ex.cookie);
	assert_int_equal(ex.offset, 0);
	assert_int_equal(ex.length, 2 * MIB);
	assert_int_equal(ex.device, 0);
	assert_int_equal(gpu_export_range(&a, 3 * MIB, 2 * MIB, &ex2), 0);
	assert_ptr_not_equal(ex.cookie, ex2.cookie);
	assert_memory_not_equal(ex.ipc, ex2.ipc, sizeof(ex.ipc));
	gpu_unexport(&a, ex2.cookie);
	gpu_unexport(&a, ex.cookie);
	assert_int_equal(gpu_export_range(&a, 0, 0, &ex), 0); /* empty */
	gpu_unexport(&a, ex.cookie);
	assert_int_equal(gpu_export_range(&a, 31 * MIB, 2 * MIB, &ex),
			 -EINVAL);
	assert_null(ex.cookie);
	gpu_arena_close(&a);

	/* A device that does not exist. */
	err[0] = '\0';
	snprintf(why, sizeof(why), "cuda:%d", n);
	assert_int_equal(gpu_arena_open(why, MIB, &a, err, sizeof(err)),
			 -ENODEV);
	assert_non_null(strstr(err, "does not exist"));
}

/* ------------------------------------------------------- the client */

static void test_client_handle_checks(void **state)
{
	struct kvfs_handle h;
	struct kvfs_cuda_map m;
	char why[256];
	int rc;

	(void)state;
	memset(&h, 0, sizeof(h));
	h.version = KVFS_ABI_VERSION;
	h.size = sizeof(h);
	h.kind = KVFS_HANDLE_HOST_MMAP;
	h.length = 4096;
	assert_int_equal(kvfs_cuda_open(NULL, -1, &m), -EINVAL);
	assert_int_equal(kvfs_cuda_open(&h, -1, NULL), -EINVAL);
	assert_int_equal(kvfs_cuda_open(&h, -1, &m), -ENOTSUP);
	assert_null(m.priv);
	h.kind = KVFS_HANDLE_CUDA_IPC;
	h.version = KVFS_ABI_VERSION + 1;
	assert_int_equal(kvfs_cuda_open(&h, -1, &m), -EINVAL);
	h.version = KVFS_ABI_VERSION;
	h.size = sizeof(h) - 8;
	assert_int_equal(kvfs_cuda_open(&h, -1, &m), -EINVAL);
	h.size = sizeof(h);
	h.device = -1;
	assert_int_equal(kvfs_cuda_open(&h, -1, &m), -EINVAL);
	assert_int_equal(kvfs_cuda_close(&m), -EINVAL);
	assert_int_equal(kvfs_cuda_close(NULL), -EINVAL);

	/* A handle of garbage: -ENODEV without a GPU, -EIO with one. */
	h.device = 0;
	memset(h.ipc, 0xab, sizeof(h.ipc));
	rc = kvfs_cuda_probe(why, sizeof(why));
	if (rc > 0) {
		assert_int_equal(kvfs_cuda_open(&h, -1, &m), -EIO);
	} else {
		assert_int_equal(rc, -ENODEV);
		assert_true(strlen(why) > 0);
		assert_int_equal(kvfs_cuda_open(&h, -1, &m), -ENODEV);
		print_message("kvfs_cuda_probe: %s\n", why);
	}
	assert_null(m.priv);
	assert_int_equal(kvfs_cuda_probe(NULL, 0) > 0, rc > 0);
}

/* ---------------------------------------- simulated GPU (fakecudart) */

/*
 * The same backends against tests/gpu/fake/fakecudart.c, a stand-in for
 * libcudart whose "device memory" is shared memory, so the bounce buffers,
 * exports and cross-process handle opening run here without a GPU.
 */
static int fake_path(char *out, size_t len)
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
	/* BUILD/tests/unit/test_gpu -> BUILD/tests/gpu/libfakecudart.so */
	snprintf(out, len, "%s/../gpu/libfakecudart.so", dirname(exe));
	return access(out, R_OK);
}

static void handle_from_export(const struct gpu_export *ex,
			       struct kvfs_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->version = KVFS_ABI_VERSION;
	h->size = sizeof(*h);
	h->kind = KVFS_HANDLE_CUDA_IPC;
	h->device = ex->device;
	h->offset = ex->offset;
	h->length = ex->length;
	h->handle_id = 1;
	memcpy(h->ipc, ex->ipc, sizeof(h->ipc));
}

/*
 * In a second process, as an engine would: open the handle, check the
 * mapping holds the chunk and nothing else (zeros up to the 2 MiB-rounded
 * end), copy it into a device buffer of its own and back. Exit status 0 =
 * all good, else the step that failed.
 */
static int engine_child(const struct kvfs_handle *h, const uint8_t *want,
			const char *fake)
{
	size_t (*alloc_size)(const void *);
	struct kvfs_cuda_map m;
	struct gpu_rt rt;
	char err[256];
	uint8_t *back;
	void *mine = NULL, *dl;
	size_t cap = (h->length + (2u << 20) - 1) / (2u << 20) * (2u << 20), i;

	if (kvfs_cuda_open(h, -1, &m) != 0)
		return 2;
	if (m.length != h->length)
		return 3;
	dl = dlopen(fake, RTLD_NOW | RTLD_NOLOAD);
	alloc_size = dl ? (size_t (*)(const void *))dlsym(dl, "fakecuda_alloc_size")
			: NULL;
	/* The handle reaches one buffer of exactly cap bytes. */
	if (!alloc_size || alloc_size(m.dptr) != cap)
		return 4;
	if (gpu_rt_load(&rt, err, sizeof(err)) != 0)
		return 5;
	back = malloc(cap);
	if (!back || rt.Memcpy(back, (char *)m.dptr - h->offset, cap,
			       GPU_RT_D2H) != 0)
		return 6;
	if (memcmp(back + h->offset, want, h->length) != 0)
		return 7;
	for (i = h->offset + h->length; i < cap; i++)
		if (back[i] != 0)
			return 8;
	memset(back, 0, cap);
	if (rt.Malloc(&mine, h->length) != 0 ||
	    rt.Memcpy(mine, m.dptr, h->length, GPU_RT_D2D) != 0 ||
	    rt.Memcpy(back, mine, h->length, GPU_RT_D2H) != 0 ||
	    memcmp(back, want, h->length) != 0)
		return 9;
	/* A host pointer where a device one belongs fails, as on a GPU. */
	if (rt.Memcpy(back, want, 16, GPU_RT_D2H) == 0)
		return 10;
	rt.Free(mine);
	free(back);
	if (kvfs_cuda_close(&m) != 0 || m.priv != NULL)
		return 11;
	gpu_rt_unload(&rt);
	return 0;
}

static void test_sim_backends(void **state)
{
	struct gpu_arena a, b;
	struct gpu_export ex = { 0 }, ex2 = { 0 };
	struct kvfs_handle h;
	struct kvfs_cuda_map m;
	char fake[PATH_MAX], err[512];
	const char *old = getenv("KVFS_CUDART");
	char *saved;
	uint64_t off = 3 * MIB + 5;
	size_t len = 2 * MIB + 3;
	uint8_t *chunk, *other;
	pid_t pid;
	int st;

	(void)state;
	if (fake_path(fake, sizeof(fake)) != 0) {
		print_message("skipped: no libfakecudart.so (%s)\n", fake);
		skip();
	}
	if (!gpu_cuda_backend("pinned", err, sizeof(err))) {
		print_message("skipped: %s\n", err);
		skip();
	}
	saved = old ? strdup(old) : NULL;
	setenv("KVFS_CUDART", fake, 1);
	assert_int_equal(gpu_rt_probe(err, sizeof(err)), 1);
	/* A CUDA build with a device defaults to pinned. */
	assert_string_equal(gpu_default_spec(), "pinned");
	assert_int_equal(gpu_arena_open("auto", MIB, &a, err, sizeof(err)), 0);
	assert_string_equal(a.ops->name, "pinned");
	gpu_arena_close(&a);

	/* pinned */
	assert_int_equal(gpu_arena_open("pinned", 16 * MIB, &a, err,
					sizeof(err)),
			 0);
	assert_string_equal(a.ops->name, "pinned");
	assert_non_null(a.host);
	assert_int_equal(a.handle_kind, KVFS_HANDLE_HOST_MMAP);
	round_trip(&a, 4097, 3 * MIB, 31);
	zero_check(&a);
	move_check(&a);
	threaded_round_trips(&a);
	/* an export of pinned L1: the chunk DMA'd into a device buffer of
	 * its own, which an engine process opens and finds exactly the
	 * chunk in (then zeros) */
	{
		uint8_t *want = malloc(MIB + 17);

		assert_non_null(want);
		fill(want, MIB + 17, 37);
		assert_int_equal(gpu_copy_in(&a, 8192, want, MIB + 17), 0);
		assert_int_equal(gpu_export_range(&a, 8192, MIB + 17, &ex), 0);
		assert_int_equal(ex.offset, 0);
		assert_int_equal(ex.length, MIB + 17);
		handle_from_export(&ex, &h);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(engine_child(&h, want, fake));
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
		gpu_unexport(&a, ex.cookie);
		free(want);
	}
	gpu_arena_close(&a);

	/* cuda: copies through the bounce buffers, from many threads */
	assert_int_equal(gpu_arena_open("cuda", 32 * MIB, &a, err,
					sizeof(err)),
			 0);
	assert_null(a.host);
	assert_int_equal(a.handle_kind, KVFS_HANDLE_CUDA_IPC);
	round_trip(&a, 0, 32 * MIB, 32);
	round_trip(&a, 12345, 9 * MIB + 17, 33);
	range_checks(&a);
	zero_check(&a);
	move_check(&a);
	threaded_round_trips(&a);
	assert_int_equal(gpu_arena_open("cuda:1", MIB, &b, err, sizeof(err)),
			 -ENODEV);
	assert_non_null(strstr(err, "l1=cuda:1: CUDA device 1 does not exist"));

	/* Two chunks side by side; export the first. */
	chunk = malloc(len);
	other = malloc(len);
	assert_non_null(chunk);
	assert_non_null(other);
	fill(chunk, len, 34);
	fill(other, len, 35);
	assert_int_equal(gpu_copy_in(&a, off, chunk, len), 0);
	assert_int_equal(gpu_copy_in(&a, off + len, other, len), 0);
	assert_int_equal(gpu_copy_in(&a, off - 5, other, 5), 0);
	assert_int_equal(gpu_export_range(&a, off, len, &ex), 0);
	assert_int_equal(gpu_export_range(&a, off + len, len, &ex2), 0);
	assert_memory_not_equal(ex.ipc, ex2.ipc, sizeof(ex.ipc));
	handle_from_export(&ex, &h);

	/* CUDA does not open a handle in the process that exported it. */
	assert_int_equal(kvfs_cuda_open(&h, -1, &m), -EIO);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(engine_child(&h, chunk, fake));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* The arena's later changes do not reach an export already made. */
	fill(other, len, 36);
	assert_int_equal(gpu_copy_in(&a, off, other, len), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(engine_child(&h, chunk, fake));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	gpu_unexport(&a, ex.cookie);
	gpu_unexport(&a, ex2.cookie);

	/* Handle buffers together take at most the arena (32 MiB) plus one
	 * 2 MiB unit: then ENOSPC, until one is released. */
	{
		struct gpu_export many[17] = { { 0 } };

		for (int i = 0; i < 17; i++)
			assert_int_equal(gpu_export_range(&a, 0, MIB + 1,
							  &many[i]),
					 0);
		assert_int_equal(gpu_export_range(&a, 0, 1, &ex), -ENOSPC);
		assert_null(ex.cookie);
		gpu_unexport(&a, many[16].cookie);
		assert_int_equal(gpu_export_range(&a, 0, 1, &ex), 0);
		gpu_unexport(&a, ex.cookie);
		for (int i = 0; i < 16; i++)
			gpu_unexport(&a, many[i].cookie);
	}
	gpu_arena_close(&a);
	free(chunk);
	free(other);

	if (saved)
		setenv("KVFS_CUDART", saved, 1);
	else
		unsetenv("KVFS_CUDART");
	free(saved);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_backend),
		cmocka_unit_test(test_host_threads),
		cmocka_unit_test(test_host_huge_pages),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_rt_loader),
		cmocka_unit_test(test_pinned),
		cmocka_unit_test(test_cuda),
		cmocka_unit_test(test_client_handle_checks),
		cmocka_unit_test(test_sim_backends),
	};

	(void)argc;
	gt_asan_reexec(argv); /* CUDA under ASan, where a GPU exists */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
