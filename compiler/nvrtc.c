/* nvrtc.c — NVRTC through dlopen (see nvrtc.h). The handful of NVRTC entry points are declared
 * here from the documented C API, so building ignis does not need the CUDA headers. */
#include "nvrtc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nv_prog_s *nv_prog;
typedef int nv_res; /* nvrtcResult: 0 = NVRTC_SUCCESS */

typedef struct nv_api {
    void *lib;
    nv_res (*create)(nv_prog *, const char *, const char *, int, const char *const *, const char *const *);
    nv_res (*compile)(nv_prog, int, const char *const *);
    nv_res (*log_size)(nv_prog, size_t *);
    nv_res (*log)(nv_prog, char *);
    nv_res (*cubin_size)(nv_prog, size_t *);
    nv_res (*cubin)(nv_prog, char *);
    nv_res (*ptx_size)(nv_prog, size_t *);
    nv_res (*ptx)(nv_prog, char *);
    nv_res (*destroy)(nv_prog *);
    const char *(*errstr)(nv_res);
} nv_api;

/* The NVRTC libraries tried, in order, when IGNIS_NVRTC (a measurement/packaging override naming
 * one library) is not set. CUDA 13 dropped sm_70/sm_72, so for those the CUDA 12 NVRTC is needed:
 * PyPI's nvidia-cuda-nvrtc-cu12 (scripts/install-deps.sh installs it; CMake records its path at
 * configure time as IG_NVRTC12_PATH) or a CUDA 12 toolkit's libnvrtc.so.12. */
static const char *const nv_candidates[] = {
    "libnvrtc.so", "libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so.12",
#ifdef IG_NVRTC12_PATH
    IG_NVRTC12_PATH,
#endif
    "/usr/local/cuda-12/lib64/libnvrtc.so.12", NULL};

static ig_status nv_syms(nv_api *a, ig_err *err) {
#define SYM(f, n)                                                                            \
    if (!(*(void **)&a->f = dlsym(a->lib, n)))                                               \
        return ig_fail(err, IG_ERR_UNSUPPORTED, "NVRTC library lacks %s (too old?)", n);
    SYM(create, "nvrtcCreateProgram");
    SYM(compile, "nvrtcCompileProgram");
    SYM(log_size, "nvrtcGetProgramLogSize");
    SYM(log, "nvrtcGetProgramLog");
    SYM(cubin_size, "nvrtcGetCUBINSize");
    SYM(cubin, "nvrtcGetCUBIN");
    SYM(ptx_size, "nvrtcGetPTXSize");
    SYM(ptx, "nvrtcGetPTX");
    SYM(destroy, "nvrtcDestroyProgram");
    SYM(errstr, "nvrtcGetErrorString");
#undef SYM
    return IG_OK;
}

/* 1 when the opened library lists `arch` ("sm_70", "compute_90") among the architectures it
 * compiles for (nvrtcGetSupportedArchs, CUDA 11.2+); 1 as well when it cannot say. */
static int nv_supports(void *lib, const char *arch) {
    int (*num)(int *) = (int (*)(int *))dlsym(lib, "nvrtcGetNumSupportedArchs");
    int (*list)(int *) = (int (*)(int *))dlsym(lib, "nvrtcGetSupportedArchs");
    const char *d = strchr(arch, '_');
    int n = 0, want = d ? atoi(d + 1) : 0;
    if (!num || !list || !want || num(&n) || n <= 0 || n > 256) return 1;
    int archs[256];
    if (list(archs)) return 1;
    for (int i = 0; i < n; i++)
        if (archs[i] == want) return 1;
    return 0;
}

/* Opens the first NVRTC library that compiles for `arch`. */
static ig_status nv_open(nv_api *a, const char *arch, ig_err *err) {
    memset(a, 0, sizeof *a);
    const char *env = getenv("IGNIS_NVRTC");
    /* NODELETE: one compile calls this once per architecture; the library (which carries its own
     * C++ runtime and allocates at load) is loaded once and stays, instead of being mapped,
     * initialized and torn down again for every architecture */
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    int found = 0;
    if (env) {
        a->lib = dlopen(env, flags);
        found = a->lib != NULL;
    }
    for (int i = 0; !env && !a->lib && nv_candidates[i]; i++) {
        a->lib = dlopen(nv_candidates[i], flags);
        if (a->lib) found = 1;
        if (a->lib && !nv_supports(a->lib, arch)) {
            dlclose(a->lib);
            a->lib = NULL;
        }
    }
    if (!a->lib && found)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "no NVRTC found here compiles for %s (CUDA 13 dropped sm_70/sm_72): install the "
                       "CUDA 12 NVRTC (pip install nvidia-cuda-nvrtc-cu12, as scripts/install-deps.sh does) "
                       "or a CUDA 12 toolkit, or target sm_75 or newer", arch);
    if (!a->lib)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "CUDA targets need NVRTC (libnvrtc.so from the CUDA toolkit), which was not found%s; "
                       "install the toolkit or set IGNIS_NVRTC to the library's path",
                       env ? " at IGNIS_NVRTC" : "");
    return nv_syms(a, err);
}

ig_status nv_compile(const char *source, const char *name, const char *arch, const char *include_dir,
                     unsigned char **out, size_t *out_len, ig_err *err) {
    *out = NULL;
    *out_len = 0;
    nv_api a;
    ig_status st = nv_open(&a, arch, err);
    if (st) {
        if (a.lib) dlclose(a.lib);
        return st;
    }
    nv_prog p = NULL;
    nv_res r = a.create(&p, source, name, 0, NULL, NULL);
    if (r) {
        st = ig_fail(err, IG_ERR_BUILD, "NVRTC: cannot create program %s: %s", name, a.errstr(r));
        dlclose(a.lib);
        return st;
    }
    char opt_arch[64], opt_inc[4200];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    snprintf(opt_inc, sizeof opt_inc, "--include-path=%s", include_dir);
    const char *opts[] = {opt_arch, opt_inc, "--std=c++17", "--device-as-default-execution-space"};
    r = a.compile(p, 4, opts);
    if (r) {
        size_t n = 0;
        a.log_size(p, &n);
        char *log = malloc(n + 1);
        if (log) {
            log[0] = 0;
            a.log(p, log);
            /* keep the first error lines: the message names file and line */
            if (strlen(log) > 700) strcpy(log + 690, " [...]");
        }
        if (log && strstr(log, "--gpu-architecture"))
            st = ig_fail(err, IG_ERR_UNSUPPORTED,
                         "the NVRTC in use cannot compile for %s (CUDA 13 dropped sm_70/sm_72): install the "
                         "CUDA 12 NVRTC (pip install nvidia-cuda-nvrtc-cu12) or target sm_75 or newer", arch);
        else
            st = ig_fail(err, IG_ERR_BUILD, "NVRTC failed to compile %s for %s: %s", name, arch, log ? log : a.errstr(r));
        free(log);
    } else {
        int ptx = !strncmp(arch, "compute_", 8);
        size_t n = 0;
        r = ptx ? a.ptx_size(p, &n) : a.cubin_size(p, &n);
        unsigned char *buf = r ? NULL : malloc(n + 1);
        if (!buf) {
            st = ig_fail(err, IG_ERR_BUILD, "NVRTC: no %s output for %s", ptx ? "PTX" : "cubin", arch);
        } else {
            r = ptx ? a.ptx(p, (char *)buf) : a.cubin(p, (char *)buf);
            buf[n] = 0;
            *out = buf;
            *out_len = n;
        }
    }
    a.destroy(&p);
    dlclose(a.lib);
    return st;
}
