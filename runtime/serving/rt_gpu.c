/* rt_gpu.c — the CUDA driver probe (see rt_gpu.h). */
#include "rt_gpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few driver entry points the probe needs, typed here (libignis builds without CUDA headers):
 * CUresult is an int enum, CUdevice an int. */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_name_fn)(char *, int, int);
enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

void rt_gpu_probe_run(int index, rt_gpu_probe *p) {
    memset(p, 0, sizeof *p);
    p->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!p->lib) {
        snprintf(p->why, sizeof p->why, "no CUDA driver (libcuda.so.1) on this machine");
        return;
    }
    cu_init_fn init = (cu_init_fn)dlsym(p->lib, "cuInit");
    cu_count_fn count = (cu_count_fn)dlsym(p->lib, "cuDeviceGetCount");
    cu_get_fn get = (cu_get_fn)dlsym(p->lib, "cuDeviceGet");
    cu_attr_fn attr = (cu_attr_fn)dlsym(p->lib, "cuDeviceGetAttribute");
    cu_name_fn name = (cu_name_fn)dlsym(p->lib, "cuDeviceGetName");
    if (!init || !count || !get || !attr || !name) {
        snprintf(p->why, sizeof p->why, "the CUDA driver (libcuda.so.1) lacks cuInit / cuDeviceGet* (too old?)");
        return;
    }
    int r = init(0), dev = 0, major = 0, minor = 0;
    if (r == 0) r = count(&p->n_devices);
    if (r != 0) {
        snprintf(p->why, sizeof p->why, "the CUDA driver found no usable GPU (cuInit: error %d)", r);
        p->n_devices = 0;
        return;
    }
    if (index < 0 || index >= p->n_devices) {
        snprintf(p->why, sizeof p->why, "no CUDA device %d (the driver sees %d)", index, p->n_devices);
        return;
    }
    if (get(&dev, index) || attr(&major, CU_ATTR_CC_MAJOR, dev) || attr(&minor, CU_ATTR_CC_MINOR, dev) ||
        name(p->name, (int)sizeof p->name, dev)) {
        snprintf(p->why, sizeof p->why, "the CUDA driver could not describe device %d", index);
        p->name[0] = 0;
        return;
    }
    p->cc = major * 10 + minor;
}

void rt_gpu_probe_close(rt_gpu_probe *p) {
    if (p && p->lib) dlclose(p->lib);
    if (p) p->lib = NULL;
}

int rt_gpu_arch_runs(const char *archs, int ptx, int cc) {
    if (cc <= 0) return 0;
    for (const char *s = archs; s && (s = strstr(s, "sm_")); s += 3)
        if (atoi(s + 3) == cc) return 1; /* sm_90a: the cubin of 90 */
    return ptx > 0 && ptx <= cc;
}
