/* bench_kernels.c — times the CPU kernel templates on model-sized shapes and puts the numbers
 * next to what the machine can do: memory bandwidth measured with a plain 2-thread read loop, and
 * peak dpbf16 / FMA throughput measured with unrolled independent-accumulator loops. Decode
 * matmuls (T = 1) report GB/s of weights streamed and the fraction of measured bandwidth;
 * prefill matmuls report GFLOP/s and the fraction of measured peak. Weights rotate over enough
 * copies (> 2x L3) that decode timings read from DRAM, not cache. Not a test: prints only.
 * Usage: bench_kernels [threads]   (default 2)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define MM_NAME mm_2048x8192
#define MM_K 2048
#define MM_N 8192
#include "matmul.c"
#define MM_NAME mm_8192x2048
#define MM_K 8192
#define MM_N 2048
#include "matmul.c"
#define MM_NAME mm_2048x128256
#define MM_K 2048
#define MM_N 128256
#include "matmul.c"
#define MM_NAME mm_2048x8192_f32
#define MM_K 2048
#define MM_N 8192
#define MM_WBF16 0
#define MM_XBF16 0
#include "matmul.c"
#define MM_NAME mm_2048x8192_swiglu
#define MM_K 2048
#define MM_N 8192
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define AT_NAME at_32x8x64
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 16
#define AT_KVBF16 1
#include "attention.c"
#define AT_NAME at_32x8x64_int8 /* the quantized KV formats (--kv-cache int8 / uint4, kv_quant.h) */
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 16
#define AT_KVQ 8
#include "attention.c"
#define AT_NAME at_32x8x64_uint4
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 16
#define AT_KVQ 4
#include "attention.c"
/* SmolLM2-135M's shape: groups of 3 heads */
#define AT_NAME at_9x3x64
#define AT_H 9
#define AT_KV 3
#define AT_D 64
#define AT_PS 16
#define AT_KVBF16 1
#include "attention.c"
#define AT_NAME at_9x3x64_int8
#define AT_H 9
#define AT_KV 3
#define AT_D 64
#define AT_PS 16
#define AT_KVQ 8
#include "attention.c"
#define AT_NAME at_9x3x64_uint4
#define AT_H 9
#define AT_KV 3
#define AT_D 64
#define AT_PS 16
#define AT_KVQ 4
#include "attention.c"

typedef void (*mm_fn)(int, const void *, const void *, const float *, void *, int);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "out of memory (%zu bytes)\n", n); exit(2); }
    return p;
}
static void fill_bf16(uint16_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = ig_f32_to_bf16(((seed >> 9) * (1.0f / 8388608.0f) - 0.5f) * 0.1f);
    }
}

/* Read bandwidth: each thread sums its half of a 1 GiB buffer with 4 independent vector adds. */
static double measure_bw(int nth) {
    size_t n = (size_t)1 << 30;
    char *b = xalloc(n);
    memset(b, 1, n);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now();
#pragma omp parallel num_threads(nth) reduction(+ : sink)
        {
            int lo, hi;
            ig_split((int)(n / 4096), ig_omp_nth(), ig_omp_tid(), &lo, &hi);
#if defined(IG_AVX512)
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
            for (size_t i = (size_t)lo * 4096; i < (size_t)hi * 4096; i += 256) {
                _mm_prefetch(b + i + 2048, _MM_HINT_T0);
                _mm_prefetch(b + i + 2048 + 64, _MM_HINT_T0);
                _mm_prefetch(b + i + 2048 + 128, _MM_HINT_T0);
                _mm_prefetch(b + i + 2048 + 192, _MM_HINT_T0);
                a0 = _mm512_add_epi64(a0, _mm512_load_si512(b + i));
                a1 = _mm512_add_epi64(a1, _mm512_load_si512(b + i + 64));
                a2 = _mm512_add_epi64(a2, _mm512_load_si512(b + i + 128));
                a3 = _mm512_add_epi64(a3, _mm512_load_si512(b + i + 192));
            }
            sink += (double)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
#else
            uint64_t s = 0;
            for (size_t i = (size_t)lo * 4096; i < (size_t)hi * 4096; i += 8) {
                uint64_t v;
                memcpy(&v, b + i, 8);
                s += v;
            }
            sink += (double)s;
#endif
        }
        double gbs = n / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    if (sink == 42) printf(" ");
    free(b);
    return best;
}

/* Peak of one core: 16 independent accumulators, no loads in the loop; the machine's peak is
 * this times the thread count. (On the 2-vCPU EPYC VM this was written on, this register-only
 * loop run on both vCPUs at once reached only one core's total, while the matmul itself scaled
 * 2x across them, so the per-core figure times threads is the honest ceiling.) */
static double measure_peak(int nth_total, int bf16) {
    const int nth = 1;
    const long iters = 20000000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        float sink = 0;
        double t0 = now();
#pragma omp parallel num_threads(nth) reduction(+ : sink)
        {
#if defined(IG_AVX512)
            __m512 a[16];
            for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
            __m512 b = _mm512_set1_ps(1e-7f), c = _mm512_set1_ps(1.0f);
            for (long it = 0; it < iters; it++) {
                /* the asm barrier keeps the compiler from folding the loop; costs nothing */
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) {
#if defined(IG_AVX512BF16)
                    if (bf16) a[i] = _mm512_dpbf16_ps(a[i], (__m512bh)_mm512_castps_si512(b), (__m512bh)_mm512_castps_si512(c));
                    else
#endif
                    a[i] = _mm512_fmadd_ps(a[i], b, c);
                }
                __asm__ volatile("" : "+v"(b), "+v"(c));
            }
            for (int i = 1; i < 16; i++) a[0] = _mm512_add_ps(a[0], a[i]);
            sink += _mm512_reduce_add_ps(a[0]);
#elif defined(IG_AVX2)
            __m256 a[12];
            for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
            __m256 b = _mm256_set1_ps(1e-7f), c = _mm256_set1_ps(1.0f);
            for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
                for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
                __asm__ volatile("" : "+x"(b), "+x"(c));
            }
            for (int i = 1; i < 12; i++) a[0] = _mm256_add_ps(a[0], a[i]);
            sink += ig_hsum256(a[0]);
#endif
        }
        double dt = now() - t0;
        /* flops: FMA zmm = 16 lanes x 2; dpbf16 zmm = 16 lanes x 2 pairs x 2 */
#if defined(IG_AVX512)
        double gf = (double)nth * iters * 16 * (bf16 ? 64 : 32) / dt / 1e9;
#elif defined(IG_AVX2)
        double gf = (double)nth * iters * 12 * 16 / dt / 1e9;
#else
        double gf = 1e-9 / dt; /* no SIMD peak loop for the portable build */
#endif
        if (gf > best) best = gf;
        if (sink == 42) printf(" ");
    }
    return best * nth_total;
}

static void bench_mm(const char *name, mm_fn fn, int K, int N, int T, int wbf16, int xbf16,
                     int nth, double bw, double peak) {
    size_t wbytes = (size_t)(N + 15) / 16 * 16 * K * (wbf16 ? 2 : 4);
    /* enough copies (>= 1 GiB: the host's last-level cache may be far larger than the 32 MB
     * the VM reports) that decode timings read weights from DRAM, not cache */
    int ncopy = T == 1 ? (int)IG_MIN(32, (size_t)1 + (1024u << 20) / wbytes) : 1;
    uint16_t *w[32];
    for (int c = 0; c < ncopy; c++) {
        w[c] = xalloc(wbytes);
        if (c == 0) fill_bf16(w[c], wbytes / 2, 1234);
        else memcpy(w[c], w[0], wbytes);
    }
    void *x = xalloc((size_t)T * K * 4);
    fill_bf16(x, (size_t)T * K * (xbf16 ? 1 : 2), 99);
    if (!xbf16) for (size_t i = 0; i < (size_t)T * K; i++) ((float *)x)[i] = 0.01f * (float)(i % 7);
    if (!wbf16) for (int c = 0; c < ncopy; c++) for (size_t i = 0; i < wbytes / 4; i++) ((float *)w[c])[i] = 0.001f * (float)(i % 13);
    float *y = xalloc((size_t)T * N * 4);
    fn(T, x, w[0], NULL, y, nth);
    int reps = 0;
    double best = 1e9, t_all = now();
    while (reps < 5 || (now() - t_all < 1.0 && reps < 200)) {
        double t0 = now();
        fn(T, x, w[reps % ncopy], NULL, y, nth);
        double dt = now() - t0;
        if (dt < best) best = dt;
        reps++;
    }
    double gbs = wbytes / best / 1e9, gf = 2.0 * T * K * (double)N / best / 1e9;
    if (T == 1)
        printf("%-34s T=%-4d %8.3f ms  %6.1f GB/s  (%.0f%% of bw)  %7.1f GFLOP/s\n", name, T, best * 1e3, gbs, 100 * gbs / bw, gf);
    else
        printf("%-34s T=%-4d %8.3f ms  %6.1f GB/s  %7.1f GFLOP/s  (%.0f%% of peak)\n", name, T, best * 1e3, gbs, gf, 100 * gf / peak);
    for (int c = 0; c < ncopy; c++) free(w[c]);
    free(x), free(y);
}

typedef void (*at_fn)(int, const float *, const uint8_t *, uint64_t, const int32_t *, const int32_t *, const int32_t *,
                      int, void *, float *, int);
/* An attention shape (head_dim 64, pages of 16) and its instances per KV format: bf16, int8, uint4. */
typedef struct {
    int H, KV;
    at_fn fn[3];
} at_shape;
static const at_shape at_shapes[] = {{32, 8, {at_32x8x64, at_32x8x64_int8, at_32x8x64_uint4}},
                                     {9, 3, {at_9x3x64, at_9x3x64_int8, at_9x3x64_uint4}}};

/* kvq: the KV format: 0 bf16, 8 int8, 4 uint4 (codes random, scales 2^-7, zeros mid-range).
 * layers: a KV page holds this many layers (as a package's pages hold all of theirs) and one call
 * is timed per layer, so with 30 layers at 2k context the KV cache (~50 MB bf16) streams from
 * memory as in a model's decode step rather than sitting in cache. */
static void bench_attn_shape(const at_shape *sh, int T, int ctx, int nth, int kvq, int layers) {
    enum { D = 64, PS = 16 };
    const int H = sh->H, KV = sh->KV;
    int np = (ctx + PS - 1) / PS;
    size_t layer_bytes = kvq ? IG_KVQ_LAYER_BYTES(KV, PS, D, kvq) : 2ull * KV * PS * D * 2, page_bytes = layer_bytes * layers;
    uint8_t *pool = xalloc(np * page_bytes);
    fill_bf16((uint16_t *)pool, np * page_bytes / 2, 7);
    for (int p = 0; kvq && p < np * layers; p++) {
        uint8_t *par = pool + p * layer_bytes + 2ull * KV * PS * D * kvq / 8;
        for (int r = 0; r < 2 * KV * PS; r++) ((uint16_t *)par)[r] = 0x2000; /* f16 2^-7 */
        memset(par + 4 * KV * PS, kvq == 8 ? 128 : 8, 2 * KV * PS);
    }
    at_fn at = sh->fn[kvq == 8 ? 1 : kvq == 4 ? 2 : 0];
    int32_t *pt = xalloc(np * 4), *pos = xalloc(T * 4), *seq = xalloc(T * 4);
    for (int i = 0; i < np; i++) pt[i] = (int32_t)((i * 37L) % np); /* scattered, as a pool's pages are */
    for (int t = 0; t < T; t++) pos[t] = ctx - T + t, seq[t] = 0;
    float *q = xalloc((size_t)T * H * D * 4), *out = xalloc((size_t)T * H * D * 4);
    for (size_t i = 0; i < (size_t)T * H * D; i++) q[i] = 0.01f * (float)(i % 17);
    /* with layers > 1, a 128 MB read between the timed calls evicts the KV cache from the caches
     * (a model's weights do between its decode steps) */
    const size_t flush_n = layers > 1 ? (size_t)32 << 20 : 0;
    float *flush = flush_n ? xalloc(flush_n * 4) : NULL;
    for (size_t i = 0; i < flush_n; i++) flush[i] = (float)(i & 7);
    double best = 1e9, t_all = now(), sink = 0;
    for (int reps = 0; reps < 5 || (now() - t_all < 0.5 && reps < 200); reps++) {
        for (size_t i = 0; i < flush_n; i += 16) sink += flush[i];
        double t0 = now();
        for (int l = 0; l < layers; l++) at(T, q, pool, l * layer_bytes, pos, seq, pt, np, out, NULL, nth);
        double dt = (now() - t0) / layers;
        if (dt < best) best = dt;
    }
    double keys = 0;
    for (int t = 0; t < T; t++) keys += pos[t] + 1;
    double flops = keys * H * D * 4.0, kvb = T == 1 ? (double)ctx * layer_bytes / PS : 0;
    printf("attention H%d KV%d D64 %-5s ctx=%-5d T=%-4d L=%-2d %8.3f ms  %7.1f GFLOP/s", H, KV,
           kvq == 8 ? "int8" : kvq == 4 ? "uint4" : "bf16", ctx, T, layers, best * 1e3, flops / best / 1e9);
    if (T == 1) printf("  %6.1f GB/s of KV", kvb / best / 1e9);
    printf("\n");
    if (sink == 1.0) printf(" ");
    free(pool), free(pt), free(pos), free(seq), free(q), free(out), free(flush);
}

static void bench_attn(int T, int ctx, int nth, int kvq) { bench_attn_shape(&at_shapes[0], T, ctx, nth, kvq, 1); }

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2 && !strcmp(argv[2], "kv")) { /* `bench_kernels N kv`: attention per KV format only, alternated */
        for (int r = 0; r < 3; r++)
            for (int f = 0; f < 3; f++) bench_attn(1, 2048, nth, (int[]){0, 8, 4}[f]);
        for (int f = 0; f < 3; f++) bench_attn(64, 2048, nth, (int[]){0, 8, 4}[f]);
        /* SmolLM2's shape, one per-layer call of its 30 layers' decode step at 2k context */
        for (int r = 0; r < 3; r++)
            for (int f = 0; f < 3; f++) bench_attn_shape(&at_shapes[1], 1, 2048, nth, (int[]){0, 8, 4}[f], 30);
        return 0;
    }
#if defined(IG_AVX512BF16)
    const char *isa = "avx512+bf16";
#elif defined(IG_AVX512)
    const char *isa = "avx512";
#elif defined(IG_AVX2)
    const char *isa = "avx2+fma";
#else
    const char *isa = "portable scalar (build with -march=native for real numbers)";
#endif
    printf("kernels built for: %s\n", isa);
    double bw = measure_bw(nth);
    double pk_bf = measure_peak(nth, 1), pk_f = measure_peak(nth, 0);
    printf("threads %d: read bandwidth %.1f GB/s, peak dpbf16 %.1f GFLOP/s, peak f32 FMA %.1f GFLOP/s (1-core peak x threads)\n",
           nth, bw, pk_bf, pk_f);
#if !defined(IG_AVX512BF16)
    pk_bf = pk_f; /* without vdpbf16ps the bf16 path runs on FMAs */
#endif
    bench_mm("matmul bf16 K2048 N8192", mm_2048x8192, 2048, 8192, 1, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K8192 N2048", mm_8192x2048, 8192, 2048, 1, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K2048 N128256 (lm_head)", mm_2048x128256, 2048, 128256, 1, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul f32 K2048 N8192", mm_2048x8192_f32, 2048, 8192, 1, 0, 0, nth, bw, pk_f);
    bench_mm("matmul bf16 K2048 N8192", mm_2048x8192, 2048, 8192, 4, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K2048 N8192", mm_2048x8192, 2048, 8192, 64, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K2048 N8192", mm_2048x8192, 2048, 8192, 256, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K8192 N2048", mm_8192x2048, 8192, 2048, 64, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 K8192 N2048", mm_8192x2048, 8192, 2048, 256, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul bf16 swiglu K2048 N2x4096", mm_2048x8192_swiglu, 2048, 8192, 256, 1, 1, nth, bw, pk_bf);
    bench_mm("matmul f32 K2048 N8192", mm_2048x8192_f32, 2048, 8192, 256, 0, 0, nth, bw, pk_f);
    for (int f = 0; f < 3; f++) {
        int kvq = (int[]){0, 8, 4}[f];
        bench_attn(1, 1024, nth, kvq);
        bench_attn(1, 4096, nth, kvq);
        bench_attn(256, 1024, nth, kvq);
    }
    return 0;
}
