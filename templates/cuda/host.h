/* host.h — host-side support for generated CUDA packages (included by the generated model.c).
 *
 * The package's model.so must load on machines without a GPU or CUDA (it is built on CI boxes
 * and inspected there), so it links nothing from CUDA: the driver (libcuda) and cuBLAS are
 * opened with dlopen in init(), and a missing driver, no device, or a GPU whose architecture the
 * package lacks is a clear error instead of a loader failure.
 *
 * What is here: the table of driver/cuBLAS entry points (cu_api), error formatting, choosing the
 * kernel image (cubin for this SM, else the PTX if it is not newer than the GPU), and small
 * launch/copy helpers. Everything is static: one copy per model.so, no shared mutable state. */
#ifndef IG_CUDA_HOST_H
#define IG_CUDA_HOST_H

#include <cublas_v2.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct cu_api {
    void *lib_cuda, *lib_blas;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemAllocHost)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, CUstream, void **, void **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* CUDA graphs: decode-sized steps are captured once per shape and replayed */
    CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuGraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    cublasStatus_t (*cublasCreate)(cublasHandle_t *);
    cublasStatus_t (*cublasDestroy)(cublasHandle_t);
    cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream);
    cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                   const void *, const void *, cudaDataType, int, const void *,
                                   cudaDataType, int, const void *, void *, cudaDataType, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);
} cu_api;

static void cu_errf(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

static void *cu_dlopen_any(const char *const *names) {
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

/* Opens libcuda and libcublas and resolves every entry point. 0 on success. */
static int cu_api_load(cu_api *a, char *err, size_t cap) {
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
    static const char *const blas_names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                             "/usr/local/cuda/lib64/libcublas.so", NULL};
    memset(a, 0, sizeof *a);
    a->lib_cuda = cu_dlopen_any(cuda_names);
    if (!a->lib_cuda) {
        cu_errf(err, cap, "this package targets CUDA, but no CUDA driver (libcuda.so.1) is installed: %s", dlerror());
        return -1;
    }
#define SYM(lib, field, name)                                                                  \
    do {                                                                                       \
        *(void **)&a->field = dlsym(a->lib_##lib, name);                                       \
        if (!a->field) {                                                                       \
            cu_errf(err, cap, "the CUDA library lacks %s (driver or cuBLAS too old?)", name);  \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
    SYM(cuda, cuInit, "cuInit");
    SYM(cuda, cuDeviceGetCount, "cuDeviceGetCount");
    SYM(cuda, cuDeviceGet, "cuDeviceGet");
    SYM(cuda, cuDeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(cuda, cuDeviceGetName, "cuDeviceGetName");
    SYM(cuda, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cuda, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(cuda, cuCtxSetCurrent, "cuCtxSetCurrent");
    SYM(cuda, cuModuleLoadData, "cuModuleLoadData");
    SYM(cuda, cuModuleUnload, "cuModuleUnload");
    SYM(cuda, cuModuleGetFunction, "cuModuleGetFunction");
    SYM(cuda, cuFuncSetAttribute, "cuFuncSetAttribute");
    SYM(cuda, cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuda, cuMemFree, "cuMemFree_v2");
    SYM(cuda, cuMemAllocHost, "cuMemAllocHost_v2");
    SYM(cuda, cuMemFreeHost, "cuMemFreeHost");
    SYM(cuda, cuMemGetInfo, "cuMemGetInfo_v2");
    SYM(cuda, cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuda, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(cuda, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(cuda, cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    SYM(cuda, cuMemsetD8, "cuMemsetD8_v2");
    SYM(cuda, cuStreamCreate, "cuStreamCreate");
    SYM(cuda, cuStreamDestroy, "cuStreamDestroy_v2");
    SYM(cuda, cuStreamSynchronize, "cuStreamSynchronize");
    SYM(cuda, cuLaunchKernel, "cuLaunchKernel");
    SYM(cuda, cuGetErrorString, "cuGetErrorString");
    SYM(cuda, cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    SYM(cuda, cuStreamEndCapture, "cuStreamEndCapture");
    SYM(cuda, cuGraphInstantiate, "cuGraphInstantiateWithFlags");
    SYM(cuda, cuGraphLaunch, "cuGraphLaunch");
    SYM(cuda, cuGraphExecDestroy, "cuGraphExecDestroy");
    SYM(cuda, cuGraphDestroy, "cuGraphDestroy");
    a->lib_blas = cu_dlopen_any(blas_names);
    if (!a->lib_blas) {
        cu_errf(err, cap, "cuBLAS (libcublas.so) is not installed; this CUDA package needs it for prefill: %s", dlerror());
        return -1;
    }
    SYM(blas, cublasCreate, "cublasCreate_v2");
    SYM(blas, cublasDestroy, "cublasDestroy_v2");
    SYM(blas, cublasSetStream, "cublasSetStream_v2");
    SYM(blas, cublasGemmEx, "cublasGemmEx");
#undef SYM
    return 0;
}

static void cu_api_close(cu_api *a) {
    if (a->lib_blas) dlclose(a->lib_blas);
    if (a->lib_cuda) dlclose(a->lib_cuda);
    memset(a, 0, sizeof *a);
}

static const char *cu_strerr(const cu_api *a, CUresult r) {
    const char *s = NULL;
    if (a->cuGetErrorString) a->cuGetErrorString(r, &s);
    return s ? s : "unknown CUDA error";
}

/* One kernel image embedded in model.so. */
typedef struct cu_image {
    int arch;          /* 70, 80, 90, ... */
    int is_ptx;        /* 1: PTX (JIT-compiled by the driver for this or newer GPUs) */
    const unsigned char *data;
    size_t len;
} cu_image;

/* Index of the image to load on a GPU of compute capability `cc` (e.g. 90): the cubin of that
 * exact architecture, else the newest PTX not newer than the GPU; -1 if none fits. */
static int cu_pick_image(const cu_image *im, int n, int cc) {
    for (int i = 0; i < n; i++)
        if (!im[i].is_ptx && im[i].arch == cc) return i;
    int best = -1;
    for (int i = 0; i < n; i++)
        if (im[i].is_ptx && im[i].arch <= cc && (best < 0 || im[i].arch > im[best].arch)) best = i;
    return best;
}

/* Replayable steps, keyed by what the captured launches baked in (token count, logit rows,
 * page-table width); the batch's contents live in device memory and change between replays. */
#define CU_GRAPHS 32
typedef struct cu_graph_cache {
    int n;
    int key[CU_GRAPHS][3];
    CUgraphExec exec[CU_GRAPHS];
} cu_graph_cache;

static void cu_graphs_clear(const cu_api *a, cu_graph_cache *g) {
    for (int i = 0; i < g->n; i++) a->cuGraphExecDestroy(g->exec[i]);
    g->n = 0;
}

#endif
