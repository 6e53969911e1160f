/* common.h — helpers shared by the CPU kernel templates (matmul, rmsnorm, rope_kv, attention,
 * embed): bf16 <-> f32 conversion, ISA selection, OpenMP helpers, small SIMD building blocks
 * (dot products, axpy, horizontal sums, a vectorized exp).
 *
 * Every template includes this file; it is include-guarded and defines only static inline
 * functions and constant macros, so a generated translation unit can include many templates many
 * times. The ISA is picked at compile time from the compiler's predefined macros (codegen passes
 * the -m flags of the target), never detected at run time:
 *   IG_AVX512      AVX-512 F+BW+VL (16 f32 lanes)
 *   IG_AVX512BF16  ... plus AVX512_BF16 (vdpbf16ps)
 *   IG_AMX         ... plus AMX-TILE and AMX-BF16 (matmul.c's prefill of bf16 weights and
 *                  activations runs on tiles; the process must hold the Linux permission for tile
 *                  data: ig_amx_request, which the runtime's feature probe calls)
 *   IG_AVX2        AVX2+FMA (8 f32 lanes), when AVX-512 is absent
 *   IG_NEON        AArch64 Advanced SIMD (4 f32 lanes, FMA), with, as the target enables them:
 *   IG_NEON_BF16   ... BFDOT (vbfdotq_f32: bf16 x bf16 pairs into f32; ARMv8.6 +bf16)
 *   IG_NEON_DOT    ... SDOT (vdotq_s32: int8 quads into int32; +dotprod)
 *   IG_SVE         ... and SVE: the decode GEMVs of f32, bf16 (IG_SVE_BF16: svbfdot) and int8
 *                  (svdot) weights are vector-length agnostic SVE (matmul.c, quant.h); the other
 *                  kernels stay NEON, which every SVE core also runs
 *   none           portable scalar C
 */
#ifndef IG_CPU_COMMON_H
#define IG_CPU_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define IG_AVX512 1
#if defined(__AVX512BF16__)
#define IG_AVX512BF16 1
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define IG_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#define IG_AVX2 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define IG_NEON 1
#if defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#define IG_NEON_BF16 1
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define IG_NEON_DOT 1
#endif
#if defined(__ARM_FEATURE_SVE)
#define IG_SVE 1
#if defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#define IG_SVE_BF16 1
#endif
#endif
#endif

/* the kernels' ISA in words (tests and benchmarks print it) */
#if defined(IG_AMX)
#define IG_ISA_NAME "avx512+bf16+amx"
#elif defined(IG_AVX512BF16)
#define IG_ISA_NAME "avx512+bf16"
#elif defined(IG_AVX512)
#define IG_ISA_NAME "avx512"
#elif defined(IG_AVX2)
#define IG_ISA_NAME "avx2+fma"
#elif defined(IG_SVE_BF16)
#define IG_ISA_NAME "sve+bf16 (neon+bfdot+sdot)"
#elif defined(IG_SVE)
#define IG_ISA_NAME "sve (neon+sdot)"
#elif defined(IG_NEON_BF16) && defined(IG_NEON_DOT)
#define IG_ISA_NAME "neon+bfdot+sdot"
#elif defined(IG_NEON_DOT)
#define IG_ISA_NAME "neon+sdot"
#elif defined(IG_NEON)
#define IG_ISA_NAME "neon"
#else
#define IG_ISA_NAME "scalar"
#endif

#if defined(IG_AVX512) || defined(IG_AVX2)
#include <immintrin.h>
#endif
#ifdef IG_NEON
#include <arm_neon.h>
#endif
#ifdef IG_SVE
#include <arm_sve.h>
#endif

#define IG_RESTRICT __restrict
#define IG_ALIGN64 _Alignas(64)
/* Kernel helpers take shapes as arguments but are always inlined into a template instance whose
 * shapes are constants, so the compiler specializes them (unrolled rows, constant strides). */
#define IG_INLINE static inline __attribute__((always_inline))
#define IG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define IG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define IG_PASTE2(a, b) a##b
#define IG_PASTE(a, b) IG_PASTE2(a, b) /* pastes after expanding: IG_PASTE(MM_NAME, _x) */

#if defined(IG_AMX)
/* Asks Linux for this process's permission to use AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM,
 * feature 18 XTILEDATA; granted once for every thread of the process, asking again is harmless).
 * 0 when granted. Without it the first tile instruction faults. */
static inline int ig_amx_request(void) {
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 0 : -1;
}
#endif

/* ---- bf16 (stored as uint16_t: the upper half of an IEEE f32) ---- */

#if defined(__AVX512VNNI__)
/* a + the int16 pair products of w and x (vpdpwssd). Inline assembly ties the accumulator to one
 * register: with the intrinsic, GCC 12 copies each accumulator of an unrolled row loop into a
 * scratch register and back around every vpdpwssd (two extra moves per dot product; the q8i
 * prefill ran 0.66x bf16's tokens/s for it). */
IG_INLINE __m512i ig_dpwssd512(__m512i a, __m512i w, __m512i x) {
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpwssd %2, %1, %0" : "+v"(a) : "v"(w), "v"(x));
    return a;
#else
    return _mm512_dpwssd_epi32(a, w, x);
#endif
}

/* a + the sums of four unsigned bytes of u times the signed bytes of s (vpdpbusd), in place as
 * ig_dpwssd512. */
IG_INLINE __m512i ig_dpbusd512(__m512i a, __m512i u, __m512i s) {
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpbusd %2, %1, %0" : "+v"(a) : "v"(u), "v"(s));
    return a;
#else
    return _mm512_dpbusd_epi32(a, u, s);
#endif
}
#endif

#if defined(__AVX2__)
/* a + the int16 pair products of w and x (vpmaddwd, vpaddd), the accumulator tied to its register
 * as ig_dpwssd512's: with the intrinsics GCC 12 kept one of a two-row kernel's eight accumulators
 * on the stack (a store-to-load round trip every step) and copied the others around each add;
 * q8i gate|up 2048 x 16384 at T = 128, one Zen 2 core: 75 GFLOP/s -> 94 */
IG_INLINE __m256i ig_maddwd_acc256(__m256i a, __m256i w, __m256i x) {
#if defined(__GNUC__) && !defined(__clang__)
    __m256i t;
    __asm__("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(a), "=&x"(t) : "x"(x), "x"(w));
    return a;
#else
    return _mm256_add_epi32(a, _mm256_madd_epi16(w, x));
#endif
}
#endif

IG_INLINE float ig_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even; NaN stays NaN (quiet bit forced so the payload cannot round to inf). */
IG_INLINE uint16_t ig_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- OpenMP helpers: kernels also build without -fopenmp (one thread) ---- */

IG_INLINE int ig_omp_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

IG_INLINE int ig_omp_nth(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Splits [0, n) into nt nearly equal contiguous parts; part i is [*lo, *hi). */
IG_INLINE void ig_split(int n, int nt, int i, int *lo, int *hi) {
    int q = n / nt, r = n % nt;
    *lo = i * q + IG_MIN(i, r);
    *hi = *lo + q + (i < r);
}

/* This OpenMP thread's share of a grid over n_cols column units (a matmul's panel pairs) and n_rows
 * rows: the threads split the columns and, when there are fewer columns than threads, the remaining
 * factor splits the rows. Columns [*c0, *c1) of rows [*r0, *r1); 0 when the thread has no share. */
IG_INLINE int ig_grid_share(int n_cols, int n_rows, int *c0, int *c1, int *r0, int *r1) {
    int nt = ig_omp_nth(), tid = ig_omp_tid();
    int ncol = IG_MIN(nt, n_cols), nrow = nt / ncol;
    if (tid / ncol >= nrow) return 0;
    ig_split(n_cols, ncol, tid % ncol, c0, c1);
    ig_split(n_rows, nrow, tid / ncol, r0, r1);
    return 1;
}

/* ---- SIMD building blocks ---- */

#ifdef IG_AVX512
IG_INLINE float ig_hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

/* 16 bf16 -> 16 f32 (exact). */
IG_INLINE __m512 ig_load16_bf16(const uint16_t *p) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
IG_INLINE __m512 ig_maskload16_bf16(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
/* 16 f32 -> 16 bf16, round to nearest even, the same rule as ig_f32_to_bf16 on every ISA (the
 * hardware vcvtneps2bf16 flushes denormals, which would make results differ between paths). */
IG_INLINE __m256i ig_cvt16_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}
IG_INLINE void ig_store16_bf16(uint16_t *p, __m512 v) {
    _mm256_storeu_si256((__m256i *)p, ig_cvt16_bf16(v));
}
IG_INLINE void ig_maskstore16_bf16(uint16_t *p, __mmask16 m, __m512 v) {
    _mm256_mask_storeu_epi16(p, m, ig_cvt16_bf16(v));
}

/* exp(x) for 16 lanes: Cephes expf polynomial after range reduction by ln2 (about 1-2 ulp);
 * scalef makes underflow/overflow saturate to 0/inf. */
IG_INLINE __m512 ig_exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}
#endif

#ifdef IG_AVX2
IG_INLINE float ig_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
IG_INLINE __m256 ig_load8_bf16(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
IG_INLINE void ig_store8_bf16(uint16_t *p, __m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    r = _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(r),
        _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000))), nan));
    r = _mm256_srli_epi32(r, 16);
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(lo, hi));
}
/* Same polynomial as ig_exp512; 2^n built in the exponent field (n clamped to normal range). */
IG_INLINE __m256 ig_exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

#ifdef IG_NEON
/* 4 bf16 -> 4 f32: the bf16 bits are the upper half of the f32 */
IG_INLINE float32x4_t ig_load4_bf16(const uint16_t *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
IG_INLINE float32x4_t ig_load4(const void *p, int bf16, int i) {
    return bf16 ? ig_load4_bf16((const uint16_t *)p + i) : vld1q_f32((const float *)p + i);
}
#endif

#ifdef IG_SVE
/* Vector-length agnostic decode over one weight panel (SVE). The panels of matmul.c and quant.h's
 * Q8A share one shape: a stream of 32-bit lanes in which lane m belongs to output m % 16 and
 * meets the activation "unit" m / 16: an f32 (f32 panels: a k-pair is two lines of 16 lanes), a
 * bf16 pair (bf16 panels) or an int8 quad (Q8A). So, for nu units, out[j] = sum over u of
 * op(w[16 u + j], xu[u]). The vector holds NL = svcntw() lanes:
 *  - NL < 16 (128 / 256-bit SVE): a unit spans 16 / NL vectors, each with its own accumulators,
 *    the unit broadcast;
 *  - NL a multiple of 16 (512 bits and up): a vector spans NL / 16 units; svtbl spreads them
 *    (lane i takes unit i / 16 of the vector's share), and the NL / 16 partial sums of output j
 *    are added at the end. A last partial vector is predicated.
 *  - any other length (not a power of two, which later revisions of the architecture forbid):
 *    4 lanes of each vector, as at 128 bits.
 * IG_SVE_STREAM defines one such function per accumulator type and operation:
 *   NAME(const uint32_t *w, const uint32_t *xu, int nu, T *out)   (out[16]) */
#define IG_SVE_STREAM(NAME, T, VT, ZERO, OP, ADD, ST)                                                      \
    IG_INLINE void NAME(const uint32_t *IG_RESTRICT w, const uint32_t *IG_RESTRICT xu, int nu, T *out) {     \
        const int NL = (int)svcntw();                                                                      \
        const svbool_t pt = svptrue_b32();                                                                 \
        VT a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO;                                                     \
        if (NL % 16 == 0) {                                                                                \
            const int upv = NL / 16;                                                                       \
            const uint64_t nlanes = (uint64_t)nu * 16;                                                     \
            const svuint32_t idx = svlsr_n_u32_x(pt, svindex_u32(0, 1), 4);                               \
            const svbool_t pu = svwhilelt_b32_s32(0, upv);                                                 \
            uint64_t m = 0;                                                                                \
            int u = 0;                                                                                     \
            for (; m + 2 * (uint64_t)NL <= nlanes; m += 2 * (uint64_t)NL, u += 2 * upv) {                  \
                svuint32_t x0 = svtbl_u32(svld1_u32(pu, xu + u), idx);                                     \
                svuint32_t x1 = svtbl_u32(svld1_u32(pu, xu + u + upv), idx);                               \
                a0 = OP(pt, a0, svld1_u32(pt, w + m), x0);                                                 \
                a1 = OP(pt, a1, svld1_u32(pt, w + m + NL), x1);                                            \
            }                                                                                              \
            for (; m < nlanes; m += (uint64_t)NL, u += upv) {                                              \
                svbool_t pg = svwhilelt_b32_u64(m, nlanes);                                                \
                svuint32_t x0 = svtbl_u32(svld1_u32(svwhilelt_b32_s32(u, IG_MIN(nu, u + upv)), xu + u), idx); \
                a0 = OP(pg, a0, svld1_u32(pg, w + m), x0);                                                 \
            }                                                                                              \
            T buf[64];                                                                                     \
            ST(pt, buf, ADD(pt, a0, a1));                                                                  \
            for (int j = 0; j < 16; j++) {                                                                 \
                T s = buf[j];                                                                              \
                for (int c = 1; c < upv; c++) s += buf[16 * c + j];                                        \
                out[j] = s;                                                                                \
            }                                                                                              \
        } else if (NL == 8) {                                                                              \
            int u = 0;                                                                                     \
            for (; u + 2 <= nu; u += 2) {                                                                  \
                const uint32_t *wu = w + (size_t)16 * u;                                                   \
                svuint32_t x0 = svdup_n_u32(xu[u]), x1 = svdup_n_u32(xu[u + 1]);                           \
                a0 = OP(pt, a0, svld1_u32(pt, wu), x0);                                                    \
                a1 = OP(pt, a1, svld1_u32(pt, wu + 8), x0);                                                \
                a2 = OP(pt, a2, svld1_u32(pt, wu + 16), x1);                                               \
                a3 = OP(pt, a3, svld1_u32(pt, wu + 24), x1);                                               \
            }                                                                                              \
            for (; u < nu; u++) {                                                                          \
                svuint32_t x0 = svdup_n_u32(xu[u]);                                                        \
                a0 = OP(pt, a0, svld1_u32(pt, w + (size_t)16 * u), x0);                                    \
                a1 = OP(pt, a1, svld1_u32(pt, w + (size_t)16 * u + 8), x0);                                \
            }                                                                                              \
            ST(pt, out, ADD(pt, a0, a2));                                                                  \
            ST(pt, out + 8, ADD(pt, a1, a3));                                                              \
        } else { /* NL == 4, or a length that is no power of two: 4 lanes of it */                        \
            const svbool_t p4 = svwhilelt_b32_s32(0, 4);                                                   \
            for (int u = 0; u < nu; u++) {                                                                 \
                const uint32_t *wu = w + (size_t)16 * u;                                                   \
                svuint32_t x0 = svdup_n_u32(xu[u]);                                                        \
                a0 = OP(p4, a0, svld1_u32(p4, wu), x0);                                                    \
                a1 = OP(p4, a1, svld1_u32(p4, wu + 4), x0);                                                \
                a2 = OP(p4, a2, svld1_u32(p4, wu + 8), x0);                                                \
                a3 = OP(p4, a3, svld1_u32(p4, wu + 12), x0);                                               \
            }                                                                                              \
            ST(p4, out, a0);                                                                               \
            ST(p4, out + 4, a1);                                                                           \
            ST(p4, out + 8, a2);                                                                           \
            ST(p4, out + 12, a3);                                                                          \
        }                                                                                                  \
    }
/* f32 units: acc += w * x (merging: a predicated-off lane keeps its sum) */
#define IG_SVE_OP_F32(pg, a, w, x) svmla_f32_m(pg, a, svreinterpret_f32_u32(w), svreinterpret_f32_u32(x))
#define IG_SVE_ADD_F32(pg, a, b) svadd_f32_x(pg, a, b)
IG_SVE_STREAM(ig_sve_stream_f32, float, svfloat32_t, svdup_n_f32(0.0f), IG_SVE_OP_F32, IG_SVE_ADD_F32, svst1_f32)
/* int8 quads: acc += sum of 4 products (predicated-off lanes load zeros: adding 0) */
#define IG_SVE_OP_S8(pg, a, w, x) svdot_s32(a, svreinterpret_s8_u32(w), svreinterpret_s8_u32(x))
#define IG_SVE_ADD_S32(pg, a, b) svadd_s32_x(pg, a, b)
IG_SVE_STREAM(ig_sve_stream_s8, int32_t, svint32_t, svdup_n_s32(0), IG_SVE_OP_S8, IG_SVE_ADD_S32, svst1_s32)
#ifdef IG_SVE_BF16
/* bf16 pairs: acc += w0 x0 + w1 x1 (BFDOT) */
#define IG_SVE_OP_BF16(pg, a, w, x) svbfdot_f32(a, svreinterpret_bf16_u32(w), svreinterpret_bf16_u32(x))
IG_SVE_STREAM(ig_sve_stream_bf16, float, svfloat32_t, svdup_n_f32(0.0f), IG_SVE_OP_BF16, IG_SVE_ADD_F32, svst1_f32)
#endif
#endif /* IG_SVE */

/* sum of a[i]*b[i] (b is f32 when bbf16 == 0, bf16 otherwise), f32 accumulation. */
IG_INLINE float ig_dot(const float *IG_RESTRICT a, const void *IG_RESTRICT b, int bbf16, int n) {
    int i = 0;
    float s = 0.0f;
#if defined(IG_AVX512)
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        __m512 b0 = bbf16 ? ig_load16_bf16((const uint16_t *)b + i) : _mm512_loadu_ps((const float *)b + i);
        __m512 b1 = bbf16 ? ig_load16_bf16((const uint16_t *)b + i + 16) : _mm512_loadu_ps((const float *)b + i + 16);
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), b0, s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), b1, s1);
    }
    if (i < n) {
        __mmask16 m = (i + 16 <= n) ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 b0 = bbf16 ? ig_maskload16_bf16((const uint16_t *)b + i, m) : _mm512_maskz_loadu_ps(m, (const float *)b + i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), b0, s0);
        i += 16;
        if (i < n) {
            m = (__mmask16)((1u << (n - i)) - 1);
            b0 = bbf16 ? ig_maskload16_bf16((const uint16_t *)b + i, m) : _mm512_maskz_loadu_ps(m, (const float *)b + i);
            s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), b0, s1);
        }
    }
    return ig_hsum512(_mm512_add_ps(s0, s1));
#elif defined(IG_AVX2)
    __m256 s0 = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 b0 = bbf16 ? ig_load8_bf16((const uint16_t *)b + i) : _mm256_loadu_ps((const float *)b + i);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, s0);
    }
    s = ig_hsum256(s0);
#elif defined(IG_NEON)
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), ig_load4(b, bbf16, i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), ig_load4(b, bbf16, i + 4));
    }
    s = vaddvq_f32(vaddq_f32(s0, s1));
#endif
    for (; i < n; i++) s += a[i] * (bbf16 ? ig_bf16_to_f32(((const uint16_t *)b)[i]) : ((const float *)b)[i]);
    return s;
}

/* y[i] += a * x[i] (x is f32 when xbf16 == 0, bf16 otherwise). */
IG_INLINE void ig_axpy(float *IG_RESTRICT y, float a, const void *IG_RESTRICT x, int xbf16, int n) {
    int i = 0;
#if defined(IG_AVX512)
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16) {
        __m512 v = xbf16 ? ig_load16_bf16((const uint16_t *)x + i) : _mm512_loadu_ps((const float *)x + i);
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, v, _mm512_loadu_ps(y + i)));
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = xbf16 ? ig_maskload16_bf16((const uint16_t *)x + i, m) : _mm512_maskz_loadu_ps(m, (const float *)x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, v, _mm512_maskz_loadu_ps(m, y + i)));
        return;
    }
#elif defined(IG_AVX2)
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8) {
        __m256 v = xbf16 ? ig_load8_bf16((const uint16_t *)x + i) : _mm256_loadu_ps((const float *)x + i);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, v, _mm256_loadu_ps(y + i)));
    }
#elif defined(IG_NEON)
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), ig_load4(x, xbf16, i), a));
#endif
    for (; i < n; i++) y[i] += a * (xbf16 ? ig_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i]);
}

/* y[i] *= a */
IG_INLINE void ig_scale(float *y, float a, int n) {
    int i = 0;
#if defined(IG_AVX512)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), _mm512_set1_ps(a)));
#elif defined(IG_AVX2)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), _mm256_set1_ps(a)));
#elif defined(IG_NEON)
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), a));
#endif
    for (; i < n; i++) y[i] *= a;
}

/* Writes n f32 values to dst as f32 (obf16 == 0) or bf16. */
IG_INLINE void ig_store_row(void *IG_RESTRICT dst, const float *IG_RESTRICT src, int obf16, int n) {
    if (!obf16) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = (uint16_t *)dst;
    int i = 0;
#if defined(IG_AVX512)
    for (; i + 16 <= n; i += 16) ig_store16_bf16(d + i, _mm512_loadu_ps(src + i));
#elif defined(IG_AVX2)
    for (; i + 8 <= n; i += 8) ig_store8_bf16(d + i, _mm256_loadu_ps(src + i));
#endif
    for (; i < n; i++) d[i] = ig_f32_to_bf16(src[i]);
}

/* sum of x[i]^2 in f32 with several lanes (the caller needs ~1e-6 relative, not bitwise). */
IG_INLINE float ig_sumsq(const float *x, int n) { return ig_dot(x, x, 0, n); }

/* out[j] = silu(g[j]) * u[j] for 16 values, silu(g) = g / (1 + exp(-g)). */
IG_INLINE void ig_silu_mul16(const float *IG_RESTRICT g, const float *IG_RESTRICT u, float *IG_RESTRICT out) {
#if defined(IG_AVX512)
    __m512 vg = _mm512_loadu_ps(g);
    __m512 e = ig_exp512(_mm512_sub_ps(_mm512_setzero_ps(), vg));
    __m512 s = _mm512_div_ps(vg, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
    _mm512_storeu_ps(out, _mm512_mul_ps(s, _mm512_loadu_ps(u)));
#elif defined(IG_AVX2)
    for (int h = 0; h < 16; h += 8) {
        __m256 vg = _mm256_loadu_ps(g + h);
        __m256 e = ig_exp256(_mm256_sub_ps(_mm256_setzero_ps(), vg));
        __m256 s = _mm256_div_ps(vg, _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
        _mm256_storeu_ps(out + h, _mm256_mul_ps(s, _mm256_loadu_ps(u + h)));
    }
#else
    for (int j = 0; j < 16; j++) out[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
#endif
}

/* out[j] = gelu_tanh(g[j]) * u[j] for 16 lanes: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))),
 * with tanh(z) = 1 - 2 / (exp(2z) + 1) (GeGLU of Gemma, transformers' gelu_pytorch_tanh). */
IG_INLINE void ig_gelu_mul16(const float *IG_RESTRICT g, const float *IG_RESTRICT u, float *IG_RESTRICT out) {
    for (int j = 0; j < 16; j++) {
        float x = g[j], z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        float th = z > 20.0f ? 1.0f : z < -20.0f ? -1.0f : 1.0f - 2.0f / (expf(2.0f * z) + 1.0f);
        out[j] = 0.5f * x * (1.0f + th) * u[j];
    }
}

#endif /* IG_CPU_COMMON_H */
