/* host.h — host-side support for generated CUDA packages (included by the generated model.c).
 *
 * The package's model.so must load on machines without a GPU or CUDA (it is built on CI boxes
 * and inspected there), so it links nothing from CUDA: the driver (libcuda) and cuBLAS are
 * opened with dlopen in init(), and a missing driver, no device, or a GPU whose architecture the
 * package lacks is a clear error instead of a loader failure. NVRTC is not needed at run time (the
 * kernels are cubins and PTX assembled into the object); cuBLAS (+ cuBLASLt) is, for prefill's
 * GEMMs (cu_open_blas: where it is looked for, a one-file bundle's folder among the places).
 *
 * What is here: the table of driver/cuBLAS entry points (cu_api), error formatting, choosing the
 * kernel image (cubin for this SM, else the PTX if it is not newer than the GPU), and small
 * launch/copy helpers. Everything is static: one copy per model.so, no shared mutable state. */
#ifndef IG_CUDA_HOST_H
#define IG_CUDA_HOST_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct cu_api {
    void *lib_cuda, *lib_blas; /* lib_blas NULL: no cuBLAS (blas_why says why), prefill on gemm.cu */
    void *lib_blaslt;          /* cuBLASLt (fp8 packages' e4m3 GEMMs): NULL without it (their prefill dequantizes) */
    char blas_why[1024];
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
    CUresult (*cuModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
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
    CUresult (*cuStreamQuery)(CUstream);
    CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, CUstream, void **, void **);
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    /* NULL where the driver lacks it (before CUDA 12): no TMA kernels then */
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                       const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                       CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    /* NULL where the driver lacks it: clusters of act8.cu's int8 GEMM then take SMs / CL */
    CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* events: chained steps, and the profile (tuning key profile) */
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
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
    cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                   const void *, const void *, cudaDataType, int, const void *,
                                   cudaDataType, int, const void *, void *, cudaDataType, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);
    /* cuBLASLt, for the e4m3 GEMM with per-row and per-token scale vectors (host_runtime.c's gemm_f8) */
    cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *);
    cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t);
    cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *,
                                                     size_t);
    cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                           const void *, size_t);
    cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *, int *);
    cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                                     cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *,
                                     const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                     const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
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

/* cuBLAS, looked for (1) by soname through the loader's path and cache, (2) beside the code that
 * runs: the folder of the package's model.so, or of a one-file bundle's executable (the code's
 * object as dladdr names it, else /proc/self/exe), so a libcublas.so.N copied there with its
 * libcublasLt.so.N (found through cuBLAS's RUNPATH $ORIGIN) serves, (3) in the CUDA toolkit's
 * default folder. *where gets the folder of (2), for the caller's message. */
static void *cu_open_blas(char *where, size_t cap) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    static const char *const toolkit[] = {"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12",
                                          "/usr/local/cuda/lib64/libcublas.so", NULL};
    void *h = cu_dlopen_any(names);
    if (h) return h;
    char self[4096] = "", path[4200];
#ifdef _GNU_SOURCE /* (model.c is built with it; tests/cuda_host's standalone build goes without) */
    Dl_info info;
    if (dladdr((void *)&cu_open_blas, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
        snprintf(self, sizeof self, "%s", info.dli_fname);
#endif
    if (!self[0]) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = 0;
    }
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(where, cap, "%s", slash ? self : ".");
    for (int i = 0; slash && names[i] && !h; i++) {
        snprintf(path, sizeof path, "%s/%s", self, names[i]);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    return h ? h : cu_dlopen_any(toolkit);
}

/* Opens libcuda and resolves its entry points, then libcublas's when want_blas and it is found:
 * not found, a->lib_blas stays NULL and a->blas_why says where it looked (the package then runs its
 * own GEMM, gemm.cu). 0 on success. */
static int cu_api_load(cu_api *a, int want_blas, char *err, size_t cap) {
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
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
    SYM(cuda, cuModuleGetGlobal, "cuModuleGetGlobal_v2");
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
    SYM(cuda, cuStreamQuery, "cuStreamQuery");
    SYM(cuda, cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    SYM(cuda, cuLaunchKernel, "cuLaunchKernel");
    SYM(cuda, cuLaunchKernelEx, "cuLaunchKernelEx");
    *(void **)&a->cuTensorMapEncodeTiled = dlsym(a->lib_cuda, "cuTensorMapEncodeTiled");
    SYM(cuda, cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    *(void **)&a->cuOccupancyMaxActiveClusters = dlsym(a->lib_cuda, "cuOccupancyMaxActiveClusters");
    SYM(cuda, cuGetErrorString, "cuGetErrorString");
    SYM(cuda, cuEventCreate, "cuEventCreate");
    SYM(cuda, cuEventDestroy, "cuEventDestroy_v2");
    SYM(cuda, cuEventRecord, "cuEventRecord");
    SYM(cuda, cuEventSynchronize, "cuEventSynchronize");
    SYM(cuda, cuEventElapsedTime, "cuEventElapsedTime_v2");
    SYM(cuda, cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    SYM(cuda, cuStreamEndCapture, "cuStreamEndCapture");
    SYM(cuda, cuGraphInstantiate, "cuGraphInstantiateWithFlags");
    SYM(cuda, cuGraphLaunch, "cuGraphLaunch");
    SYM(cuda, cuGraphExecDestroy, "cuGraphExecDestroy");
    SYM(cuda, cuGraphDestroy, "cuGraphDestroy");
    char beside[1024];
    if (!want_blas) return 0;
    a->lib_blas = cu_open_blas(beside, sizeof beside);
    if (!a->lib_blas) {
        const char *e = dlerror();
        snprintf(a->blas_why, sizeof a->blas_why, "no libcublas.so.13 / .12 on the loader's path, in %.600s or the toolkit's "
                 "lib64 (%.300s)", beside, e ? e : "?");
        return 0;
    }
    SYM(blas, cublasCreate, "cublasCreate_v2");
    SYM(blas, cublasDestroy, "cublasDestroy_v2");
    SYM(blas, cublasSetStream, "cublasSetStream_v2");
    SYM(blas, cublasSetWorkspace, "cublasSetWorkspace_v2");
    SYM(blas, cublasGemmEx, "cublasGemmEx");
    /* cuBLASLt: cuBLAS loaded it (its DT_NEEDED, found through cuBLAS's RUNPATH), so its soname
     * names the copy in the process; optional (a missing symbol leaves lib_blaslt NULL) */
    static const char *const lt_names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL};
    a->lib_blaslt = cu_dlopen_any(lt_names);
#define SYMLT(field)                                                                             \
    do {                                                                                         \
        if (a->lib_blaslt && !(*(void **)&a->field = dlsym(a->lib_blaslt, #field))) {            \
            dlclose(a->lib_blaslt);                                                              \
            a->lib_blaslt = NULL;                                                                \
        }                                                                                        \
    } while (0)
    SYMLT(cublasLtCreate);
    SYMLT(cublasLtDestroy);
    SYMLT(cublasLtMatmulDescCreate);
    SYMLT(cublasLtMatmulDescDestroy);
    SYMLT(cublasLtMatmulDescSetAttribute);
    SYMLT(cublasLtMatrixLayoutCreate);
    SYMLT(cublasLtMatrixLayoutDestroy);
    SYMLT(cublasLtMatmulPreferenceCreate);
    SYMLT(cublasLtMatmulPreferenceDestroy);
    SYMLT(cublasLtMatmulPreferenceSetAttribute);
    SYMLT(cublasLtMatmulAlgoGetHeuristic);
    SYMLT(cublasLtMatmul);
#undef SYMLT
#undef SYM
    return 0;
}

static void cu_api_close(cu_api *a) {
    if (a->lib_blaslt) dlclose(a->lib_blaslt);
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
 * page-table width, device sampling on/off, decode-only, chained: no uploads); the batch's contents live
 * in device memory and change between replays. A full cache makes room by dropping the graph used
 * least recently, so a batch size that comes and goes does not evict the steady ones. */
#define CU_GRAPHS 32
typedef struct cu_graph_cache {
    int n;
    int key[CU_GRAPHS][6];
    CUgraphExec exec[CU_GRAPHS];
    unsigned long long used[CU_GRAPHS], tick; /* last use of each, the use counter */
    int seen[CU_GRAPHS][6], n_seen, seen_next;  /* shapes run once and not captured (a ring) */
} cu_graph_cache;

/* Whether a step of this key ran before without a graph; if not, remembers it. A shape is captured
 * the second time it comes, so the batch sizes that pass once (a batch draining as its requests
 * finish) cost no capture. */
static int cu_graphs_seen(cu_graph_cache *g, const int key[6]) {
    for (int i = 0; i < g->n_seen; i++)
        if (!memcmp(g->seen[i], key, sizeof g->seen[i])) return 1;
    memcpy(g->seen[g->seen_next], key, sizeof g->seen[0]);
    g->seen_next = (g->seen_next + 1) % CU_GRAPHS;
    if (g->n_seen < CU_GRAPHS) g->n_seen++;
    return 0;
}

static void cu_graphs_clear(const cu_api *a, cu_graph_cache *g) {
    for (int i = 0; i < g->n; i++) a->cuGraphExecDestroy(g->exec[i]);
    g->n = 0;
}

/* The index for a new graph: the next free one, or the least recently used one, whose graph is
 * destroyed (the caller fills the entry and its key). */
static int cu_graphs_slot(const cu_api *a, cu_graph_cache *g) {
    if (g->n < CU_GRAPHS) return g->n++;
    int lru = 0;
    for (int i = 1; i < CU_GRAPHS; i++)
        if (g->used[i] < g->used[lru]) lru = i;
    a->cuGraphExecDestroy(g->exec[lru]);
    return lru;
}

/* ---- kernel launches: profiling, plain and cooperative launches */

/* tuning profile=1: every launch is timed with a pair of events and synchronized (so steps
 * run slower and without graphs); fini prints the per-kernel table to stderr. Slot CU_PROF_SLOTS-1
 * collects the cuBLAS GEMMs. */
#define CU_PROF_SLOTS 192
typedef struct cu_prof {
    int on;
    CUevent ev[2];
    double ms[CU_PROF_SLOTS];
    long calls[CU_PROF_SLOTS];
} cu_prof;

static void cu_prof_begin(const cu_api *a, cu_prof *p, CUstream s) {
    if (p->on) a->cuEventRecord(p->ev[0], s);
}
static void cu_prof_end(const cu_api *a, cu_prof *p, CUstream s, int slot) {
    if (!p->on) return;
    float ms = 0.0f;
    a->cuEventRecord(p->ev[1], s);
    a->cuEventSynchronize(p->ev[1]);
    a->cuEventElapsedTime(&ms, p->ev[0], p->ev[1]);
    if (slot < 0 || slot >= CU_PROF_SLOTS) slot = CU_PROF_SLOTS - 1;
    p->ms[slot] += ms, p->calls[slot]++;
}

/* Prints the profile: kernels by total time. names[i] names slot i (n of them). */
static void cu_prof_print(const cu_prof *p, const char *const *names, int n) {
    double total = 0.0;
    int order[CU_PROF_SLOTS], m = 0;
    for (int i = 0; i < CU_PROF_SLOTS; i++)
        if (p->calls[i]) total += p->ms[i], order[m++] = i;
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && p->ms[order[j]] > p->ms[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    fprintf(stderr, "ignis CUDA profile (tuning profile=1): %.3f ms of kernels\n%-44s %8s %10s %10s %6s\n", total,
            "kernel", "calls", "total ms", "mean us", "share");
    for (int k = 0; k < m; k++) {
        int i = order[k];
        fprintf(stderr, "%-44s %8ld %10.3f %10.2f %5.1f%%\n", i < n ? names[i] : "cublas gemm", p->calls[i], p->ms[i],
                1e3 * p->ms[i] / p->calls[i], total > 0 ? 100.0 * p->ms[i] / total : 0.0);
    }
}

/* Launches f on stream s through cuLaunchKernelEx with one launch attribute. */
static CUresult cu_launch_attr(const cu_api *a, CUfunction f, CUstream s, const CUlaunchAttribute *at, unsigned gx,
                               unsigned gy, unsigned gz, unsigned bx, unsigned smem, void **args) {
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = gx, cfg.gridDimY = gy, cfg.gridDimZ = gz;
    cfg.blockDimX = bx, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = smem, cfg.hStream = s;
    cfg.attrs = (CUlaunchAttribute *)at, cfg.numAttrs = 1;
    return a->cuLaunchKernelEx(&cfg, f, args, NULL);
}

/* Launches f on stream s. (Programmatic dependent launch was measured here and dropped: H200 1B
 * decode 1.076 ms/token with it, 1.071 without; templates/cuda/SPEC.md.) */
static CUresult cu_launch(const cu_api *a, CUfunction f, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned smem, void **args) {
    return a->cuLaunchKernel(f, gx, gy, gz, bx, 1, 1, smem, s, args, NULL);
}

/* Cooperative launch (every CTA resident at once, which grid barriers need); valid in CUDA graphs. */
static CUresult cu_launch_coop(const cu_api *a, CUfunction f, CUstream s, unsigned gx, unsigned bx, unsigned smem,
                               void **args) {
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    at.value.cooperative = 1;
    return cu_launch_attr(a, f, s, &at, gx, 1, 1, bx, smem, args);
}

#endif
