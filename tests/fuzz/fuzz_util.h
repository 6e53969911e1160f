/* fuzz_util.h — helpers shared by the libFuzzer targets of tests/fuzz/ (header-only, so a new
 * target needs nothing but its own fuzz_NAME.c).
 *
 * Readers that take a path get the input written to a file in a per-process folder (in /dev/shm
 * when it exists); targets that need test data (tokenizers, a model) find it through
 * IGNIS_TESTDATA (default ../shared/testdata, relative to the repository root, where ctest runs
 * the targets). */
#ifndef IGNIS_FUZZ_UTIL_H
#define IGNIS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"

/* The per-process scratch folder (created on first use; a static buffer). */
static const char *fuzz_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/ignis-fuzz-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

/* Writes n bytes to fuzz_dir()/name; returns the path (a static buffer per call site is not
 * needed: callers copy it or use it before the next call). */
static const char *fuzz_write(const char *name, const uint8_t *data, size_t n) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
    return path;
}

/* The shared test data folder. */
static const char *fuzz_testdata(void) {
    const char *t = getenv("IGNIS_TESTDATA");
    return t ? t : "../shared/testdata";
}

/* A NUL-terminated copy of the input (free with free()). */
static char *fuzz_cstr(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

/* A package of the llama-gqa test model compiled once per process into fuzz_dir()/name (f32,
 * for this host); NULL when it cannot be made. A static buffer. */
__attribute__((unused)) static const char *fuzz_package(const char *name) {
    static char pkg[600];
    char src[1024];
    snprintf(src, sizeof src, "%s/models/llama-gqa", fuzz_testdata());
    snprintf(pkg, sizeof pkg, "%s/%s", fuzz_dir(), name);
    cc_options o = {.input = src, .out_dir = pkg, .dtype = "f32"};
    ig_err err;
    if (cc_compile(&o, &err)) {
        fprintf(stderr, "fuzz: cannot compile %s: %s\n", src, err.msg);
        return NULL;
    }
    return pkg;
}

#endif
