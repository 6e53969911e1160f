/* rt_gpu.h — is there a GPU here that a CUDA model object can run on? Asked by the package loader
 * (rt_package.c) before it picks a fat package's target, so that a package holding CUDA and CPU
 * code loads the CUDA code only where it can run and says why it chose what it chose.
 *
 * The probe opens the driver (libcuda.so.1) with dlopen, as CUDA model objects do (nothing of CUDA
 * is linked into libignis), and asks it for the device count and each device's name and compute
 * capability. It loads no kernel and allocates no device memory. */
#ifndef IG_RT_GPU_H
#define IG_RT_GPU_H

#include <stddef.h>

typedef struct rt_gpu_probe {
    int n_devices;     /* CUDA devices the driver sees (0: none, or no driver: see why) */
    int cc;            /* device `index`'s compute capability, e.g. 90 (0: no such device) */
    char name[96];     /* its name ("NVIDIA H200"), "" when none */
    char why[256];     /* when cc is 0: what is missing ("no CUDA driver (libcuda.so.1) on this machine", ...) */
    void *lib;         /* the driver's dlopen handle, kept open: close with rt_gpu_probe_close */
} rt_gpu_probe;

/* Fills *p for CUDA device `index`. Never fails: an absent driver or device is a result (p->cc 0,
 * p->why says which). */
void rt_gpu_probe_run(int index, rt_gpu_probe *p);
void rt_gpu_probe_close(rt_gpu_probe *p);

/* Whether a CUDA model object holding cubins for `archs` (a comma list: "sm_80,sm_90") and PTX of
 * `ptx` (the newest arch, e.g. 90; 0 none) runs on a GPU of compute capability cc: a cubin of that
 * exact arch, or PTX not newer than it (the image choice of templates/cuda/host.h). */
int rt_gpu_arch_runs(const char *archs, int ptx, int cc);

#endif
