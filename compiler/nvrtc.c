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

static ig_status nv_open(nv_api *a, ig_err *err) {
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so", NULL};
    memset(a, 0, sizeof *a);
    const char *env = getenv("IGNIS_NVRTC");
    /* NODELETE: one compile calls this once per architecture; the library (which carries its own
     * C++ runtime and allocates at load) is loaded once and stays, instead of being mapped,
     * initialized and torn down again for every architecture */
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    if (env) a->lib = dlopen(env, flags);
    for (int i = 0; !a->lib && names[i]; i++) a->lib = dlopen(names[i], flags);
    if (!a->lib)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "CUDA targets need NVRTC (libnvrtc.so from the CUDA toolkit), which was not found; "
                       "install the toolkit or set IGNIS_NVRTC to the library's path");
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

ig_status nv_compile(const char *source, const char *name, const char *arch, const char *include_dir,
                     unsigned char **out, size_t *out_len, ig_err *err) {
    *out = NULL;
    *out_len = 0;
    nv_api a;
    ig_status st = nv_open(&a, err);
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
                         "this CUDA toolkit's NVRTC cannot compile for %s (CUDA 13 dropped sm_70/sm_72): "
                         "target sm_75 or newer, or point IGNIS_NVRTC at an older toolkit's libnvrtc.so", arch);
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
