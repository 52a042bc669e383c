/*
 * kvfs_cudacheck - which CUDA this machine gives kvfs, for make
 * gpu-bundle's run.sh: the runtime gpu_rt_load finds (as kvfs-mount and
 * libkvfs would: $KVFS_CUDART, $CUDA_HOME/lib64, the loader's path), the
 * CUDA version it implements, the version the driver supports, and each
 * device's PCI id and memory. Human lines first, then KEY=VALUE lines that
 * run.sh reads, then one verdict line.
 *
 *   kvfs_cudacheck
 *
 * Exit status: 0 usable (a runtime, a driver at least as new, a device);
 * 2 no runtime; 3 no driver; 4 driver older than the runtime; 5 no device;
 * 1 any other failure.
 */
#include <stdio.h>

#include "gpu/gpu_rt.h"

static void ver(char *out, size_t len, int v)
{
	if (v <= 0)
		snprintf(out, len, "none");
	else
		snprintf(out, len, "%d.%d", v / 1000, v % 1000 / 10);
}

int main(void)
{
	struct gpu_rt rt;
	char err[512], rs[16], ds[16];
	int drv = 0, run = 0, count = 0, cr, rc;

	if (gpu_rt_load(&rt, err, sizeof(err)) < 0) {
		printf("runtime: none: %s\nRUNTIME=\nRUNTIME_VERSION=0\n"
		       "verdict: MISSING: a CUDA runtime (libcudart): %s\n",
		       err, err);
		return 2;
	}
	rt.RuntimeGetVersion(&run);
	/* 0 when no driver is installed; never fails otherwise. */
	if (rt.DriverGetVersion(&drv) != GPU_RT_SUCCESS)
		drv = 0;
	ver(rs, sizeof(rs), run);
	ver(ds, sizeof(ds), drv);
	printf("runtime: %s (CUDA %s)\ndriver: CUDA %s\n", rt.path, rs, ds);
	cr = rt.GetDeviceCount(&count);
	if (cr != GPU_RT_SUCCESS)
		count = 0;
	printf("devices: %d%s%s\n", count, cr ? " " : "",
	       cr ? gpu_rt_errname(&rt, cr) : "");
	for (int d = 0; d < count; d++) {
		char bus[64] = "?";
		size_t fr = 0, tot = 0;

		rt.DeviceGetPCIBusId(bus, (int)sizeof(bus), d);
		if (rt.SetDevice(d) == GPU_RT_SUCCESS &&
		    rt.MemGetInfo(&fr, &tot) == GPU_RT_SUCCESS)
			printf("device %d: PCI %s, %.1f GiB, %.1f GiB free\n", d,
			       bus, (double)tot / (1u << 30),
			       (double)fr / (1u << 30));
		else
			printf("device %d: PCI %s, memory unknown (%s)\n", d,
			       bus, gpu_rt_errname(&rt, rt.GetLastError()));
	}
	printf("RUNTIME=%s\nRUNTIME_VERSION=%d\nDRIVER_VERSION=%d\nDEVICES=%d\n",
	       rt.path, run, drv, count);
	if (drv == 0) {
		printf("verdict: MISSING: the NVIDIA driver (libcuda.so.1 not "
		       "loadable or no kernel module; runtime CUDA %s)\n", rs);
		rc = 3;
	} else if (drv < run) {
		printf("verdict: MISSING: a driver for CUDA %s: this driver "
		       "supports CUDA %s; use an older libcudart "
		       "(KVFS_CUDART=/path/libcudart.so.N)\n", rs, ds);
		rc = 4;
	} else if (count <= 0) {
		rc = gpu_rt_open_device(&rt, 0, err, sizeof(err));
		printf("verdict: MISSING: a CUDA device (%s)\n",
		       rc < 0 ? err : "none visible");
		rc = 5;
	} else {
		rc = gpu_rt_open_device(&rt, 0, err, sizeof(err));
		if (rc < 0) {
			printf("verdict: FAILED: device 0: %s\n", err);
			rc = 1;
		} else {
			printf("verdict: ok: CUDA %s runtime on a CUDA %s driver,"
			       " %d device%s\n", rs, ds, count,
			       count == 1 ? "" : "s");
			rc = 0;
		}
	}
	gpu_rt_unload(&rt);
	return rc;
}
