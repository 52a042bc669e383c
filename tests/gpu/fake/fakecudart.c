/*
 * fakecudart.c - a stand-in for libcudart, for testing kvfs's GPU paths on
 * machines without a GPU. Loaded through KVFS_CUDART=.../libfakecudart.so.
 *
 * "Device memory" is a memfd mapped MAP_SHARED, one per cudaMalloc, so an
 * IPC handle (pid, fd, size) can be opened by another process through
 * /proc/PID/fd/FD, which gives the same cross-process semantics as CUDA
 * IPC: the importer sees exactly the exporter's allocation, no more. Copies
 * check that each pointer is on the side its cudaMemcpyKind says (a device
 * pointer must lie inside an allocation or an opened IPC mapping, a host
 * pointer must not), so a copy in the wrong direction fails as it would on
 * a GPU (cudaErrorInvalidValue) instead of silently working.
 *
 * FAKECUDA_DEVICES=N sets the device count (default 1; 0 gives
 * cudaErrorNoDevice). fakecuda_alloc_size() is an extra for tests: the size
 * of the allocation or mapping that contains a device pointer.
 *
 * Not part of kvfs; test code only. No sanitizer: it is built plain.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define OK 0
#define E_INVALID_VALUE 1
#define E_MEMORY 2
#define E_INVALID_DEVICE 101
#define E_NO_DEVICE 100
#define E_ALREADY_REGISTERED 712
#define E_NOT_REGISTERED 713
#define E_INVALID_HANDLE 400

#define FAKE_MAGIC 0x6b7666734655ull /* "kvfsFU" */

struct ipc {
	char reserved[64];
};

struct ipc_body {
	uint64_t magic;
	int32_t pid;
	int32_t fd;
	uint64_t size;
	uint64_t serial;
};

enum region_kind { R_DEV = 1, R_IPC, R_HOSTALLOC, R_REGISTERED };

struct region {
	char *p;
	size_t size;
	int fd;
	enum region_kind kind;
	uint64_t serial;
	struct region *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions; /* lock */
static uint64_t serials;       /* lock */
static __thread int cur_dev;

static int ndev(void)
{
	const char *e = getenv("FAKECUDA_DEVICES");

	return e ? atoi(e) : 1;
}

static void add(char *p, size_t size, int fd, enum region_kind k,
		uint64_t serial)
{
	struct region *r = calloc(1, sizeof(*r));

	r->p = p;
	r->size = size;
	r->fd = fd;
	r->kind = k;
	r->serial = serial;
	pthread_mutex_lock(&lock);
	r->next = regions;
	regions = r;
	pthread_mutex_unlock(&lock);
}

/* Removes and returns the region whose base is p and kind matches. */
static struct region *take(const void *p, enum region_kind k)
{
	struct region **pp, *r = NULL;

	pthread_mutex_lock(&lock);
	for (pp = &regions; *pp; pp = &(*pp)->next) {
		if ((*pp)->p == p && (*pp)->kind == k) {
			r = *pp;
			*pp = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* 1 when [p, p + n) lies inside device memory (own or IPC-mapped). */
static int is_dev(const void *p, size_t n)
{
	const char *c = p;
	struct region *r;
	int yes = 0;

	pthread_mutex_lock(&lock);
	for (r = regions; r; r = r->next) {
		if ((r->kind == R_DEV || r->kind == R_IPC) && c >= r->p &&
		    c + n <= r->p + r->size && c + n >= c) {
			yes = 1;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return yes;
}

/* 1 when any byte of [p, p + n) is device memory. */
static int touches_dev(const void *p, size_t n)
{
	const char *c = p;
	struct region *r;
	int yes = 0;

	pthread_mutex_lock(&lock);
	for (r = regions; r; r = r->next) {
		if ((r->kind == R_DEV || r->kind == R_IPC) &&
		    c < r->p + r->size && c + n > r->p) {
			yes = 1;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return yes;
}

size_t fakecuda_alloc_size(const void *p);
size_t fakecuda_alloc_size(const void *p)
{
	const char *c = p;
	struct region *r;
	size_t s = 0;

	pthread_mutex_lock(&lock);
	for (r = regions; r; r = r->next)
		if ((r->kind == R_DEV || r->kind == R_IPC) && c >= r->p &&
		    c < r->p + r->size)
			s = r->size;
	pthread_mutex_unlock(&lock);
	return s;
}

#define API(ret, name, args) ret name args; ret name args

API(int, cudaGetDeviceCount, (int *n))
{
	*n = ndev();
	return *n > 0 ? OK : E_NO_DEVICE;
}

API(int, cudaSetDevice, (int d))
{
	if (d < 0 || d >= ndev())
		return E_INVALID_DEVICE;
	cur_dev = d;
	return OK;
}

API(int, cudaGetDevice, (int *d))
{
	*d = cur_dev;
	return ndev() > 0 ? OK : E_NO_DEVICE;
}

API(int, cudaDriverGetVersion, (int *v))
{
	*v = 13000;
	return OK;
}

API(int, cudaRuntimeGetVersion, (int *v))
{
	*v = 13000;
	return OK;
}

API(const char *, cudaGetErrorString, (int e))
{
	return e == OK ? "no error" : "fake CUDA error";
}

API(const char *, cudaGetErrorName, (int e))
{
	switch (e) {
	case OK: return "cudaSuccess";
	case E_INVALID_VALUE: return "cudaErrorInvalidValue";
	case E_MEMORY: return "cudaErrorMemoryAllocation";
	case E_NO_DEVICE: return "cudaErrorNoDevice";
	case E_INVALID_DEVICE: return "cudaErrorInvalidDevice";
	case E_INVALID_HANDLE: return "cudaErrorInvalidResourceHandle";
	default: return "cudaErrorFake";
	}
}

API(int, cudaGetLastError, (void))
{
	return OK;
}

API(int, cudaMalloc, (void **pp, size_t size))
{
	int fd;
	char *p;
	uint64_t serial;

	*pp = NULL;
	if (size == 0)
		return OK;
	fd = memfd_create("fakecuda", 0);
	if (fd < 0)
		return E_MEMORY;
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		return E_MEMORY;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return E_MEMORY;
	}
	/* Fresh device memory is not zero on a GPU either. */
	memset(p, 0xa5, size);
	pthread_mutex_lock(&lock);
	serial = ++serials;
	pthread_mutex_unlock(&lock);
	add(p, size, fd, R_DEV, serial);
	*pp = p;
	return OK;
}

API(int, cudaFree, (void *p))
{
	struct region *r;

	if (!p)
		return OK;
	r = take(p, R_DEV);
	if (!r)
		return E_INVALID_VALUE;
	munmap(r->p, r->size);
	close(r->fd);
	free(r);
	return OK;
}

API(int, cudaHostAlloc, (void **pp, size_t size, unsigned int flags))
{
	void *p = NULL;

	(void)flags;
	if (posix_memalign(&p, 4096, size ? size : 1))
		return E_MEMORY;
	add(p, size, -1, R_HOSTALLOC, 0);
	*pp = p;
	return OK;
}

API(int, cudaFreeHost, (void *p))
{
	struct region *r = take(p, R_HOSTALLOC);

	if (!r)
		return E_INVALID_VALUE;
	free(r->p);
	free(r);
	return OK;
}

API(int, cudaHostRegister, (void *p, size_t size, unsigned int flags))
{
	struct region *r;

	(void)flags;
	if (!p || !size || touches_dev(p, size))
		return E_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (r = regions; r; r = r->next) {
		if (r->kind == R_REGISTERED && r->p == p) {
			pthread_mutex_unlock(&lock);
			return E_ALREADY_REGISTERED;
		}
	}
	pthread_mutex_unlock(&lock);
	add(p, size, -1, R_REGISTERED, 0);
	return OK;
}

API(int, cudaHostUnregister, (void *p))
{
	struct region *r = take(p, R_REGISTERED);

	if (!r)
		return E_NOT_REGISTERED;
	free(r);
	return OK;
}

static int check_kind(void *dst, const void *src, size_t n, int kind)
{
	int ddev = is_dev(dst, n), sdev = is_dev(src, n);

	switch (kind) {
	case 0: return !touches_dev(dst, n) && !touches_dev(src, n);
	case 1: return ddev && !touches_dev(src, n);
	case 2: return !touches_dev(dst, n) && sdev;
	case 3: return ddev && sdev;
	case 4: return 1; /* cudaMemcpyDefault */
	default: return 0;
	}
}

API(int, cudaMemcpy, (void *dst, const void *src, size_t n, int kind))
{
	if (n == 0)
		return OK;
	if (!check_kind(dst, src, n, kind))
		return E_INVALID_VALUE;
	memmove(dst, src, n);
	return OK;
}

API(int, cudaMemcpyAsync,
    (void *dst, const void *src, size_t n, int kind, void *stream))
{
	(void)stream;
	return cudaMemcpy(dst, src, n, kind);
}

API(int, cudaMemset, (void *p, int v, size_t n))
{
	if (n == 0)
		return OK;
	if (!is_dev(p, n))
		return E_INVALID_VALUE;
	memset(p, v, n);
	return OK;
}

API(int, cudaMemsetAsync, (void *p, int v, size_t n, void *stream))
{
	(void)stream;
	return cudaMemset(p, v, n);
}

API(int, cudaStreamCreateWithFlags, (void **s, unsigned int flags))
{
	(void)flags;
	*s = malloc(16);
	return *s ? OK : E_MEMORY;
}

API(int, cudaStreamDestroy, (void *s))
{
	free(s);
	return OK;
}

API(int, cudaStreamSynchronize, (void *s))
{
	(void)s;
	return OK;
}

API(int, cudaDeviceSynchronize, (void))
{
	return OK;
}

API(int, cudaIpcGetMemHandle, (struct ipc *h, void *p))
{
	struct ipc_body b;
	struct region *r;
	int found = 0;

	memset(&b, 0, sizeof(b));
	pthread_mutex_lock(&lock);
	for (r = regions; r; r = r->next) {
		if (r->kind == R_DEV && r->p == p) {
			b.fd = r->fd;
			b.size = r->size;
			b.serial = r->serial;
			found = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	if (!found)
		return E_INVALID_VALUE; /* not the base of a cudaMalloc */
	b.magic = FAKE_MAGIC;
	b.pid = getpid();
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &b, sizeof(b));
	return OK;
}

API(int, cudaIpcOpenMemHandle, (void **pp, struct ipc h, unsigned int flags))
{
	struct ipc_body b;
	char path[64];
	char *p;
	int fd;

	(void)flags;
	*pp = NULL;
	memcpy(&b, h.reserved, sizeof(b));
	/* CUDA refuses handles exported by the calling process itself. */
	if (b.magic != FAKE_MAGIC || b.pid == getpid() || b.size == 0)
		return E_INVALID_HANDLE;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", b.pid, b.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return E_INVALID_HANDLE;
	p = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return E_INVALID_HANDLE;
	add(p, b.size, -1, R_IPC, b.serial);
	*pp = p;
	return OK;
}

API(int, cudaIpcCloseMemHandle, (void *p))
{
	struct region *r = take(p, R_IPC);

	if (!r)
		return E_INVALID_VALUE;
	munmap(r->p, r->size);
	free(r);
	return OK;
}

API(int, cudaMemGetInfo, (size_t *f, size_t *t))
{
	*f = (size_t)1 << 34;
	*t = (size_t)1 << 34;
	return OK;
}

API(int, cudaDeviceGetPCIBusId, (char *id, int len, int d))
{
	snprintf(id, (size_t)len, "0000:%02x:00.0", d);
	return OK;
}

struct ev {
	struct timespec t;
};

API(int, cudaEventCreate, (void **e))
{
	*e = calloc(1, sizeof(struct ev));
	return *e ? OK : E_MEMORY;
}

API(int, cudaEventRecord, (void *e, void *s))
{
	(void)s;
	clock_gettime(CLOCK_MONOTONIC, &((struct ev *)e)->t);
	return OK;
}

API(int, cudaEventSynchronize, (void *e))
{
	(void)e;
	return OK;
}

API(int, cudaEventElapsedTime, (float *ms, void *a, void *b))
{
	struct ev *x = a, *y = b;

	*ms = (float)((y->t.tv_sec - x->t.tv_sec) * 1e3 +
		      (y->t.tv_nsec - x->t.tv_nsec) / 1e6);
	return OK;
}

API(int, cudaEventDestroy, (void *e))
{
	free(e);
	return OK;
}
