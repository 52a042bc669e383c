/*
 * gpu_rt.h - the CUDA runtime (libcudart), loaded with dlopen at run time.
 *
 * No CUDA headers here: the prototypes mirror cuda_runtime_api.h (enums are
 * passed as int, which is how the C ABI passes them; gpu_cuda.c checks the
 * constants against the real headers where the toolkit is installed). So
 * libkvfs, kvfs-mount and the tests build everywhere, link no libcudart, and
 * only a machine with a driver, a device and libcudart gets a working
 * struct gpu_rt. Always built, CUDA=0 included: the client side
 * (lib/client_cuda.c) may run on a machine with CUDA even when this build
 * had no toolkit.
 *
 * A struct gpu_rt is owned by one user (an arena, a client mapping, a test);
 * its fields are written once by gpu_rt_load and read-only afterwards, so
 * any thread may call through it. The CUDA runtime itself is thread-safe;
 * its current device is per thread, so callers set it before each use.
 */
#ifndef KVFS_GPU_RT_H
#define KVFS_GPU_RT_H

#include <stddef.h>

/* cudaError_t values we react to (driver_types.h). */
#define GPU_RT_SUCCESS 0
#define GPU_RT_ERR_INVALID_VALUE 1
#define GPU_RT_ERR_MEMORY_ALLOCATION 2
#define GPU_RT_ERR_INSUFFICIENT_DRIVER 35
#define GPU_RT_ERR_NO_DEVICE 100
#define GPU_RT_ERR_INVALID_DEVICE 101
#define GPU_RT_ERR_HOST_MEMORY_ALREADY_REGISTERED 712
#define GPU_RT_ERR_NOT_SUPPORTED 801

/* cudaMemcpyKind */
#define GPU_RT_H2H 0
#define GPU_RT_H2D 1
#define GPU_RT_D2H 2
#define GPU_RT_D2D 3

/* flags */
#define GPU_RT_HOST_ALLOC_PORTABLE 0x01u    /* cudaHostAllocPortable */
#define GPU_RT_HOST_REGISTER_PORTABLE 0x01u /* cudaHostRegisterPortable */
#define GPU_RT_HOST_REGISTER_MAPPED 0x02u   /* cudaHostRegisterMapped */
#define GPU_RT_HOST_REGISTER_READONLY 0x08u /* cudaHostRegisterReadOnly */
#define GPU_RT_STREAM_NON_BLOCKING 0x01u    /* cudaStreamNonBlocking */
#define GPU_RT_IPC_LAZY_PEER 0x01u          /* cudaIpcMemLazyEnablePeerAccess */

#define GPU_RT_IPC_SIZE 64 /* CUDA_IPC_HANDLE_SIZE */

/* cudaIpcMemHandle_t: 64 opaque bytes, passed by value. */
struct gpu_rt_ipc {
	char reserved[GPU_RT_IPC_SIZE];
};

/* cudaStream_t and cudaEvent_t are pointers to opaque driver structs. */
typedef struct CUstream_st *gpu_rt_stream;
typedef struct CUevent_st *gpu_rt_event;

struct gpu_rt {
	void *dl;           /* dlopen handle (RTLD_NODELETE) */
	char path[256];     /* which library was loaded */
	int (*GetDeviceCount)(int *count);
	int (*SetDevice)(int device);
	int (*GetDevice)(int *device);
	int (*DriverGetVersion)(int *version);
	int (*RuntimeGetVersion)(int *version);
	const char *(*GetErrorString)(int error);
	const char *(*GetErrorName)(int error);
	int (*GetLastError)(void);
	int (*Malloc)(void **ptr, size_t size);
	int (*Free)(void *ptr);
	int (*HostAlloc)(void **ptr, size_t size, unsigned int flags);
	int (*FreeHost)(void *ptr);
	int (*HostRegister)(void *ptr, size_t size, unsigned int flags);
	int (*HostUnregister)(void *ptr);
	int (*Memcpy)(void *dst, const void *src, size_t count, int kind);
	int (*MemcpyAsync)(void *dst, const void *src, size_t count, int kind,
			   gpu_rt_stream stream);
	int (*Memset)(void *ptr, int value, size_t count);
	int (*MemsetAsync)(void *ptr, int value, size_t count,
			   gpu_rt_stream stream);
	int (*StreamCreateWithFlags)(gpu_rt_stream *stream, unsigned int flags);
	int (*StreamDestroy)(gpu_rt_stream stream);
	int (*StreamSynchronize)(gpu_rt_stream stream);
	int (*DeviceSynchronize)(void);
	int (*IpcGetMemHandle)(struct gpu_rt_ipc *handle, void *ptr);
	int (*IpcOpenMemHandle)(void **ptr, struct gpu_rt_ipc handle,
				unsigned int flags);
	int (*IpcCloseMemHandle)(void *ptr);
	int (*MemGetInfo)(size_t *free_bytes, size_t *total_bytes);
	int (*DeviceGetPCIBusId)(char *bus_id, int len, int device);
	int (*EventCreate)(gpu_rt_event *event);
	int (*EventRecord)(gpu_rt_event event, gpu_rt_stream stream);
	int (*EventSynchronize)(gpu_rt_event event);
	int (*EventElapsedTime)(float *ms, gpu_rt_event start, gpu_rt_event end);
	int (*EventDestroy)(gpu_rt_event event);
};

/*
 * gpu_rt_load - finds and loads libcudart: $KVFS_CUDART (a path), then a
 * copy already loaded in this process (so an engine's own runtime is
 * shared), then $CUDA_HOME/lib64, the loader's search path
 * (libcudart.so, .so.13, .so.12, .so.11.0) and /usr/local/cuda/lib64.
 * Resolves every function above. Returns 0, or -ENODEV with the reason in
 * err. Loading does not touch the driver; see gpu_rt_open_device.
 */
int gpu_rt_load(struct gpu_rt *rt, char *err, size_t errlen);

/* gpu_rt_unload - forgets rt (the library stays mapped: libcudart does not
 * survive being unmapped while its threads or atexit hooks live). */
void gpu_rt_unload(struct gpu_rt *rt);

/*
 * gpu_rt_open_device - checks that the driver works and device exists, and
 * makes it the calling thread's current device. Returns the number of
 * devices (> 0), or -ENODEV with a reason in err such as
 * "no CUDA driver (cudaErrorInsufficientDriver: ...)" or
 * "CUDA device 3 does not exist (2 devices)".
 */
int gpu_rt_open_device(struct gpu_rt *rt, int device, char *err,
		       size_t errlen);

/* gpu_rt_errname - "cudaErrorFoo" for a runtime error code (never NULL). */
const char *gpu_rt_errname(const struct gpu_rt *rt, int code);

/* gpu_rt_errno - the negative errno for a runtime error code: -ENOMEM for
 * allocation failures, -EINVAL for invalid values, -ENODEV for driver and
 * device errors, else -EIO. 0 for success. */
int gpu_rt_errno(int code);

/*
 * gpu_rt_probe - loads the runtime, counts devices and unloads. Returns the
 * device count (> 0), or -ENODEV with the reason in err. For tests and
 * tools that must say why they skip.
 */
int gpu_rt_probe(char *err, size_t errlen);

#endif /* KVFS_GPU_RT_H */
