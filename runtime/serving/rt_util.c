/* rt_util.c — hash, CPU features and the CPU target table, files, .npy (see rt_util.h). */
#include "rt_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ig_model_abi.h"
#include "pkg_file.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t lane(uint64_t acc, uint64_t w) { return rotl64(acc + w * P2, 31) * P1; }
static inline uint64_t avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t rt_hash64(const void *data, size_t n, uint64_t seed) {
    const uint8_t *p = data;
    uint64_t a = seed + P1 + P2, b = seed + P2, c = seed, d = seed - P1;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        a = lane(a, w[0]);
        b = lane(b, w[1]);
        c = lane(c, w[2]);
        d = lane(d, w[3]);
    }
    uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18) + (uint64_t)n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = rotl64(h ^ lane(0, w), 27) * P1 + P3;
    }
    for (; i < n; i++) h = rotl64(h ^ (p[i] * P3), 11) * P1;
    return avalanche(h);
}

uint64_t rt_hash64_par(const void *data, size_t n) {
    const size_t blk = (size_t)1 << 20;
    size_t nb = (n + blk - 1) / blk;
    uint64_t acc = rt_hash64(NULL, 0, n);
    /* combine block hashes in order: sum of block hash times an odd, index-dependent factor */
#pragma omp parallel for reduction(+ : acc) schedule(static)
    for (size_t i = 0; i < nb; i++) {
        size_t len = (i + 1) * blk <= n ? blk : n - i * blk;
        uint64_t h = rt_hash64((const uint8_t *)data + i * blk, len, i);
        acc += h * (2 * i + 1);
    }
    return avalanche(acc);
}

static uint32_t cpu_features_probe(void);

/* IGNIS_CPU_MASK (an integer of IG_CPU_* bits) hides features, to test and to emulate an older
 * machine: a package that needs a hidden feature is refused as it would be there. */
uint32_t rt_cpu_features(void) {
    uint32_t f = cpu_features_probe();
    const char *mask = getenv("IGNIS_CPU_MASK");
    if (mask && *mask) f &= (uint32_t)strtoul(mask, NULL, 0);
    return f;
}

const char *rt_host_arch(void) {
#if defined(__aarch64__)
    return "aarch64";
#else
    return "x86_64";
#endif
}

/* Best first within an architecture: a native target is the first whose features the machine has.
 * AArch64: NEON (ARMv8.0) is the baseline; dotprod, bf16 + i8mm (ARMv8.6) and SVE are options the
 * runtime checks (common.h's kernels are NEON; SVE builds let the compiler vectorize for SVE). */
static const rt_cpu_target cpu_targets[] = {
    {"cpu:amx", "cpu-x86_64-amx",
     "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 "
     "-mamx-int8",
     IG_CPU_AVX2 | IG_CPU_AVX512F | IG_CPU_AVX512BF16 | IG_CPU_AVX512VNNI | IG_CPU_AMX, "x86_64", "x86_64-linux-gnu-gcc"},
    {"cpu:avx512bf16", "cpu-x86_64-avx512bf16",
     "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni",
     IG_CPU_AVX2 | IG_CPU_AVX512F | IG_CPU_AVX512BF16 | IG_CPU_AVX512VNNI, "x86_64", "x86_64-linux-gnu-gcc"},
    {"cpu:avx512", "cpu-x86_64-avx512", "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl",
     IG_CPU_AVX2 | IG_CPU_AVX512F, "x86_64", "x86_64-linux-gnu-gcc"},
    {"cpu:avx2", "cpu-x86_64-avx2", "-mavx2 -mfma -mf16c", IG_CPU_AVX2, "x86_64", "x86_64-linux-gnu-gcc"},
    {"cpu:generic", "cpu-x86_64-generic", "", 0, "x86_64", "x86_64-linux-gnu-gcc"},
    {"cpu:aarch64+sve+bf16", "cpu-aarch64-sve-bf16", "-march=armv8.6-a+sve+bf16+i8mm",
     IG_CPU_SVE | IG_CPU_NEON_DOTPROD | IG_CPU_NEON_BF16 | IG_CPU_NEON_I8MM, "aarch64", "aarch64-linux-gnu-gcc"},
    {"cpu:aarch64+sve", "cpu-aarch64-sve", "-march=armv8.2-a+sve+dotprod", IG_CPU_SVE | IG_CPU_NEON_DOTPROD, "aarch64",
     "aarch64-linux-gnu-gcc"},
    {"cpu:aarch64+bf16", "cpu-aarch64-neon-bf16", "-march=armv8.6-a+bf16+i8mm",
     IG_CPU_NEON_DOTPROD | IG_CPU_NEON_BF16 | IG_CPU_NEON_I8MM, "aarch64", "aarch64-linux-gnu-gcc"},
    {"cpu:aarch64+dotprod", "cpu-aarch64-neon-dotprod", "-march=armv8.2-a+dotprod", IG_CPU_NEON_DOTPROD, "aarch64",
     "aarch64-linux-gnu-gcc"},
    {"cpu:aarch64", "cpu-aarch64-neon", "-march=armv8-a", 0, "aarch64", "aarch64-linux-gnu-gcc"},
};

const rt_cpu_target *rt_cpu_target_table(size_t *n) {
    *n = sizeof cpu_targets / sizeof cpu_targets[0];
    return cpu_targets;
}

const char *rt_cpu_best_target(uint32_t f) {
    size_t n = sizeof cpu_targets / sizeof cpu_targets[0];
    const char *last = "cpu:generic";
    for (size_t i = 0; i < n; i++) {
        if (strcmp(cpu_targets[i].arch, rt_host_arch())) continue;
        last = cpu_targets[i].name;
        if ((cpu_targets[i].cpu_features & f) == cpu_targets[i].cpu_features) break;
    }
    return last;
}

#if defined(__aarch64__)
/* HWCAP bits of the Linux arm64 ABI (asm/hwcap.h): the kernel reports what user space may use. */
static uint32_t cpu_features_probe(void) {
    unsigned long h1 = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
    uint32_t f = 0;
    if (h1 & (1ul << 20)) f |= IG_CPU_NEON_DOTPROD; /* HWCAP_ASIMDDP */
    if (h1 & (1ul << 22)) f |= IG_CPU_SVE;          /* HWCAP_SVE */
    if (h2 & (1ul << 14)) f |= IG_CPU_NEON_BF16;    /* HWCAP2_BF16 */
    if (h2 & (1ul << 13)) f |= IG_CPU_NEON_I8MM;    /* HWCAP2_I8MM */
    return f;
}
#elif defined(__x86_64__) || defined(__i386__)
/* AMX-TILE, AMX-BF16 and AMX-INT8 (CPUID 7.0 EDX bits 24, 22, 25), tile state enabled by the OS
 * (XCR0 bits 17, 18), and this process granted tile data: Linux asks for it explicitly
 * (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18; once per process, for all its
 * threads). The probe asks, so a process that found AMX may run AMX packages. */
static int amx_usable(unsigned xcr0_lo) {
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    if (((d >> 22) & 1) == 0 || ((d >> 24) & 1) == 0 || ((d >> 25) & 1) == 0) return 0;
    if ((xcr0_lo & 0x60000u) != 0x60000u) return 0;
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
#else
    return 0;
#endif
}

static uint32_t cpu_features_probe(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    int os_avx = (xlo & 0x6) == 0x6, os_avx512 = (xlo & 0xE6) == 0xE6;
    if (!os_avx) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1,
        avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1, vnni = (c >> 11) & 1;
    if (avx2 && fma && f16c) f |= IG_CPU_AVX2;
    if (os_avx512 && avx512f && avx512dq && avx512bw && avx512vl) {
        f |= IG_CPU_AVX512F;
        if (vnni) f |= IG_CPU_AVX512VNNI;
        __cpuid_count(7, 1, a, b, c, d);
        if ((a >> 5) & 1) f |= IG_CPU_AVX512BF16;
    }
    if ((f & IG_CPU_AVX512BF16) && amx_usable(xlo)) f |= IG_CPU_AMX;
    return f;
}
#else
static uint32_t cpu_features_probe(void) { return 0; }
#endif

void rt_cpu_feature_names(uint32_t mask, char *buf, size_t cap) {
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {{IG_CPU_AVX2, "avx2+fma"},
                 {IG_CPU_AVX512F, "avx512f/bw/dq/vl"},
                 {IG_CPU_AVX512BF16, "avx512_bf16"},
                 {IG_CPU_AVX512VNNI, "avx512_vnni"},
                 {IG_CPU_AMX, "amx"},
                 {IG_CPU_NEON_DOTPROD, "dotprod"},
                 {IG_CPU_NEON_BF16, "bf16"},
                 {IG_CPU_NEON_I8MM, "i8mm"},
                 {IG_CPU_SVE, "sve"}};
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (mask & names[i].bit)
            used += snprintf(buf + used, used < cap ? cap - used : 0, "%s%s", used ? " " : "",
                             names[i].name);
    if (!used) snprintf(buf, cap, "(none)");
}

/* through pkg_file.h: "BUNDLE/NAME" reads a one-file bundle's entry */
ig_status rt_read_file(const char *path, char **data, size_t *len, ig_err *err) { return pkgf_read(path, data, len, err); }

ig_status rt_write_file(const char *path, const void *data, size_t len, ig_err *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    size_t put = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || put != len) return ig_fail(err, IG_ERR_IO, "%s: write failed", path);
    return IG_OK;
}

ig_status rt_mkdirs(const char *path, ig_err *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return ig_fail(err, IG_ERR_INVALID, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return ig_fail(err, IG_ERR_IO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return ig_fail(err, IG_ERR_IO, "mkdir %s: %s", tmp, strerror(errno));
    return IG_OK;
}

ig_status rt_write_npy_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                           ig_err *err) {
    char hdr[256], dims[160] = "";
    size_t count = 1, used = 0;
    for (int i = 0; i < ndim; i++) {
        used += snprintf(dims + used, sizeof dims - used, "%lld,%s", (long long)shape[i],
                         (ndim > 1 && i < ndim - 1) ? " " : "");
        count *= (size_t)shape[i];
    }
    if (ndim > 1 && used) dims[used - 1] = 0; /* "(a, b)" instead of "(a, b,)" */
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                     dims);
    /* magic(6) + version(2) + len(2) + header padded with spaces, ending in \n, to 64 bytes */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    uint16_t hl = (uint16_t)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t put = fwrite(data, sizeof(float), count, f);
    if (fclose(f) != 0 || put != count) return ig_fail(err, IG_ERR_IO, "%s: write failed", path);
    return IG_OK;
}

double rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
