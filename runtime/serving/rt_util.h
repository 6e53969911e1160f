/* rt_util.h — small shared services of the runtime and compiler: a fast 64-bit content hash for
 * weight integrity, CPU feature detection (so a package built for AVX-512 BF16 refuses to load on
 * a machine without it instead of dying with SIGILL), file helpers and a .npy writer. */
#ifndef IG_RT_UTIL_H
#define IG_RT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "ig_status.h"

/* 64-bit non-cryptographic hash of n bytes (4 independent multiply-rotate lanes over 8-byte
 * words, then a final avalanche); fast enough (~10 GB/s) to check gigabytes of weights at load.
 * It guards against truncation and corruption, not against an adversary. */
uint64_t rt_hash64(const void *data, size_t n, uint64_t seed);
/* Same hash, split over OpenMP threads by 1 MiB blocks (a different value from rt_hash64). */
uint64_t rt_hash64_par(const void *data, size_t n);

/* A CPU target of `ignis compile --target`: its code runs where the machine has cpu_features. */
typedef struct rt_cpu_target {
    const char *name;      /* "cpu:avx512bf16", "cpu:avx2", "cpu:generic", "cpu:aarch64", "cpu:aarch64+sve", ... */
    const char *full_name; /* "cpu-x86_64-avx512bf16": cpu-ARCH-ISA, ARCH as rt_host_arch() names it */
    const char *cflags;    /* ISA flags for the C compiler */
    uint32_t cpu_features; /* IG_CPU_* bits required at run time */
    const char *arch;      /* "x86_64" or "aarch64" */
    const char *cross_cc;  /* the C compiler used when the compiling machine is another architecture */
} rt_cpu_target;

/* Every CPU target, best first within an architecture (static; *n entries). */
const rt_cpu_target *rt_cpu_target_table(size_t *n);

/* The most capable --target value whose code runs on a CPU with `features` (IG_CPU_* bits):
 * on x86-64 "cpu:avx512bf16", "cpu:avx512", "cpu:avx2" or "cpu:generic"; on AArch64
 * "cpu:aarch64[+sve][+bf16]" or "cpu:aarch64+dotprod". A static string. */
const char *rt_cpu_best_target(uint32_t features);

/* The architecture this program was built for, as CPU target names spell it ("x86_64",
 * "aarch64"). A static string. */
const char *rt_host_arch(void);

/* IG_CPU_* bits (ig_model_abi.h) that this machine and its OS support. */
uint32_t rt_cpu_features(void);
/* Writes the names of the bits in `mask` ("avx2 avx512f ...") to buf. */
void rt_cpu_feature_names(uint32_t mask, char *buf, size_t cap);

/* Reads a whole file; *data malloc'd (NUL-terminated), free with free(). */
ig_status rt_read_file(const char *path, char **data, size_t *len, ig_err *err);
ig_status rt_write_file(const char *path, const void *data, size_t len, ig_err *err);
/* mkdir -p */
ig_status rt_mkdirs(const char *path, ig_err *err);

/* Writes a float32 C-order .npy array of the given shape. */
ig_status rt_write_npy_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                           ig_err *err);

/* Monotonic seconds. */
double rt_now(void);

#endif
