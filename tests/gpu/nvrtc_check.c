/* nvrtc_check.c — compiles a CUDA source through NVRTC (the way ignis builds model.cu when nvcc is
 * absent) for one or more SM architectures and prints the compile log on failure. It proves the
 * kernel templates need no host headers (NVRTC has no <stdint.h>, <math.h>, <cuda_bf16.h>).
 *
 * usage: nvrtc_check [-I dir]... file.cu [sm_XX ...]     (default archs: sm_75 sm_80 sm_90)
 * build: cc -O2 -I/usr/local/cuda/include tests/gpu/nvrtc_check.c -L/usr/local/cuda/lib64 -lnvrtc
 * Exits 0 when every architecture compiles, 1 otherwise.
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Compiles src for one architecture; 0 on success. */
static int compile_one(const char *src, const char *name, const char *arch, char **incs, int ninc) {
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        fprintf(stderr, "%s: nvrtcCreateProgram: %s\n", arch, nvrtcGetErrorString(r));
        return 1;
    }
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    const char *opts[40];
    int no = 0;
    opts[no++] = archopt;
    opts[no++] = "--std=c++17";
    opts[no++] = "-default-device";
    for (int i = 0; i < ninc && no < 38; i++) opts[no++] = incs[i];
    r = nvrtcCompileProgram(prog, no, opts);
    size_t logn = 0;
    nvrtcGetProgramLogSize(prog, &logn);
    if (r != NVRTC_SUCCESS) {
        char *log = malloc(logn + 1);
        if (log) {
            nvrtcGetProgramLog(prog, log);
            log[logn] = 0;
            fprintf(stderr, "%s: %s\n%s\n", arch, nvrtcGetErrorString(r), log);
            free(log);
        }
        nvrtcDestroyProgram(&prog);
        return 1;
    }
    size_t cubin = 0;
    int isreal = strncmp(arch, "sm_", 3) == 0;
    if (isreal) nvrtcGetCUBINSize(prog, &cubin);
    else nvrtcGetPTXSize(prog, &cubin);
    printf("%s: ok (%zu bytes of %s)\n", arch, cubin, isreal ? "cubin" : "ptx");
    nvrtcDestroyProgram(&prog);
    return 0;
}

int main(int argc, char **argv) {
    char *incs[32];
    int ninc = 0, ai = 1;
    const char *file = NULL;
    const char *archs[16];
    int narch = 0;
    while (ai < argc) {
        if (!strcmp(argv[ai], "-I") && ai + 1 < argc && ninc < 32) {
            size_t n = strlen(argv[ai + 1]) + 3;
            incs[ninc] = malloc(n);
            snprintf(incs[ninc++], n, "-I%s", argv[ai + 1]);
            ai += 2;
        } else if (!file) {
            file = argv[ai++];
        } else if (narch < 16) {
            archs[narch++] = argv[ai++];
        } else {
            ai++;
        }
    }
    if (!file) {
        fprintf(stderr, "usage: %s [-I dir]... file.cu [sm_XX ...]\n", argv[0]);
        return 2;
    }
    if (!narch) archs[narch++] = "sm_75", archs[narch++] = "sm_80", archs[narch++] = "sm_90";
    char *src = read_file(file);
    if (!src) {
        fprintf(stderr, "cannot read %s\n", file);
        return 2;
    }
    int fails = 0;
    for (int i = 0; i < narch; i++) fails += compile_one(src, file, archs[i], incs, ninc);
    free(src);
    for (int i = 0; i < ninc; i++) free(incs[i]);
    return fails ? 1 : 0;
}
