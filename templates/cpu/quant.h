/* quant.h — quantized weight panels for the CPU templates (matmul.c, embed.c): their layout, a
 * decode GEMV that streams them, and the dequantization of a K chunk into the f32 panel layout
 * that matmul.c's micro-kernels take for prefill.
 *
 * Both formats keep matmul's 16-row panels (row n of W [N][K] is lane n % 16 of panel n / 16), so
 * a tied embedding and lm_head share one copy, and panels are read once, front to back:
 *   IG_WQ_Q8C (8): int8, symmetric, one f32 scale per output row:
 *       panel = f32 scale[16], then int8 q[K][16];           w[n][k] = scale[j] * q[k][j]
 *   IG_WQ_Q4G (4): uint4, asymmetric, f16 scale and min per row and group of G along K; a panel is
 *       ceil(K/G) group blocks of 64 + 8G bytes (a last group of K % G columns takes 64 + 8 (K % G)):
 *       f16 scale[16], f16 min[16], then bytes b[G][8] (low nibble: lane j, high: lane j + 8);
 *                                                          w[n][k] = min[j] + scale[j] * q[k][j]
 *   IG_WQ_Q8G (9): int8, symmetric, f16 scale per row and group of G along K (GGUF Q8_0 kept as
 *       it is stored, G = 32); a panel is ceil(K/G) group blocks of 32 + 16G bytes (the last one
 *       32 + 16 (K % G)): f16 scale[16], then int8 q[G][16];  w[n][k] = scale[j] * q[k][j]
 * (f16 group scales, as GGUF stores them: a kept Q4_1 / Q8_0 block has its own bytes' worth.)
 * The packers are compiler/pack.c (pk_pack_q8c, pk_pack_q4g; pk_repack_* for GGUF blocks); SPEC.md records the layout too.
 *
 * Decode computes, per panel, sum_k x[k] q[k][j] in f32 and applies the scale once per row (Q8C)
 * or once per group (Q8G; Q4G with min[j] times the group's sum of x): the weights are never
 * dequantized to memory. Activations come in as f32 (xf, converted once per thread). */
#ifndef IG_CPU_QUANT_H
#define IG_CPU_QUANT_H

#include "common.h"

#define IG_WQ_Q8C 8
#define IG_WQ_Q4G 4
#define IG_WQ_Q8G 9

/* Bytes of one Q8G / Q4G group block of n columns. */
#define IG_WQ_GBYTES(wq, n) ((wq) == IG_WQ_Q8G ? 32 + (size_t)16 * (n) : 64 + (size_t)8 * (n))

/* IEEE half at p (unaligned) -> f32, exact (subnormals, inf and NaN included). */
IG_INLINE float ig_wq_f16(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    uint32_t e = (h >> 10) & 31u, m = h & 1023u;
    float v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexpf((float)(m | 1024u), (int)e - 25) : ldexpf((float)m, -24);
    return h & 0x8000u ? -v : v;
}

/* The 16 f16 values at p as f32 into out[16] (F16C / AVX-512 conversions where compiled in). */
IG_INLINE void ig_wq_f16x16(const void *p, float *out) {
#if defined(IG_AVX512)
    _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)));
#elif defined(IG_AVX2)
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
    _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1)));
#else
    for (int j = 0; j < 16; j++) out[j] = ig_wq_f16((const char *)p + 2 * j);
#endif
}

/* Bytes of one panel of K columns. */
IG_INLINE size_t ig_wq_panel_bytes(int wq, int K, int G) {
    if (wq == IG_WQ_Q8C) return 64 + (size_t)16 * K;
    return (size_t)(K / G) * IG_WQ_GBYTES(wq, G) + (K % G ? IG_WQ_GBYTES(wq, K % G) : 0); /* last group: K % G */
}

/* Lane j's weights [k0, k1) of one panel as f32 into out[k - k0] (embedding rows). */
IG_INLINE void ig_wq_row(int wq, int K, int G, const char *panel, int j, int k0, int k1, float *out) {
    if (wq == IG_WQ_Q8C) {
        float s;
        memcpy(&s, panel + 4 * j, 4);
        const int8_t *q = (const int8_t *)(panel + 64);
        for (int k = k0; k < k1; k++) out[k - k0] = s * (float)q[(size_t)k * 16 + j];
        return;
    }
    (void)K;
    if (wq == IG_WQ_Q8G) {
        for (int k = k0; k < k1; k++) {
            const char *gb = panel + (size_t)(k / G) * IG_WQ_GBYTES(wq, G);
            out[k - k0] = ig_wq_f16(gb + 2 * j) * (float)((const int8_t *)gb)[32 + (k % G) * 16 + j];
        }
        return;
    }
    for (int k = k0; k < k1; k++) {
        const char *gb = panel + (size_t)(k / G) * IG_WQ_GBYTES(wq, G);
        float s = ig_wq_f16(gb + 2 * j), m = ig_wq_f16(gb + 32 + 2 * j);
        uint8_t b = (uint8_t)gb[64 + (k % G) * 8 + (j & 7)];
        out[k - k0] = m + s * (float)(j < 8 ? b & 15 : b >> 4);
    }
}

/* Dequantizes k-pairs [l0, l1) of one panel into the f32 panel layout of matmul.c (k-pair l at
 * dst + 32 (l - l0): 16 even-k lanes, then 16 odd-k lanes). */
IG_INLINE void ig_wq_dequant_chunk(int wq, int G, const char *panel, int l0, int l1, float *dst) {
    if (wq == IG_WQ_Q8C) {
        IG_ALIGN64 float s[16];
        memcpy(s, panel, 64);
        const int8_t *q = (const int8_t *)(panel + 64);
        for (int l = l0; l < l1; l++) {
            float *d = dst + (size_t)(l - l0) * 32;
            const int8_t *qe = q + (size_t)(2 * l) * 16, *qo = qe + 16;
            for (int j = 0; j < 16; j++) {
                d[j] = s[j] * (float)qe[j];
                d[16 + j] = s[j] * (float)qo[j];
            }
        }
        return;
    }
    /* a k pair never straddles groups (G and K % G are even): scales converted once per group */
    IG_ALIGN64 float s[16], m[16];
    int cur = -1;
    for (int l = l0; l < l1; l++) {
        float *d = dst + (size_t)(l - l0) * 32;
        int g = 2 * l / G;
        const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
        if (g != cur) {
            ig_wq_f16x16(gb, s);
            if (wq == IG_WQ_Q4G) ig_wq_f16x16(gb + 32, m);
            cur = g;
        }
        for (int h = 0; h < 2; h++) {
            int k = 2 * l + h;
            if (wq == IG_WQ_Q8G) {
                const int8_t *q = (const int8_t *)gb + 32 + (k % G) * 16;
                for (int j = 0; j < 16; j++) d[16 * h + j] = s[j] * (float)q[j];
                continue;
            }
            const uint8_t *b = (const uint8_t *)gb + 64 + (k % G) * 8;
            for (int j = 0; j < 8; j++) {
                d[16 * h + j] = m[j] + s[j] * (float)(b[j] & 15);
                d[16 * h + j + 8] = m[j + 8] + s[j + 8] * (float)(b[j] >> 4);
            }
        }
    }
}

/* Activations of one row as f32 (xb: stored as bf16). */
IG_INLINE void ig_wq_x_f32(int xb, const void *x, int K, float *xf) {
    if (xb)
        for (int k = 0; k < K; k++) xf[k] = ig_bf16_to_f32(((const uint16_t *)x)[k]);
    else
        memcpy(xf, x, sizeof(float) * (size_t)K);
}

/* Sums of xf over each group of G (Q4G's min term). */
IG_INLINE void ig_wq_group_sums(const float *xf, int K, int G, float *gs) {
    for (int g = 0; g * G < K; g++) {
        float s = 0.0f;
        for (int k = g * G; k < IG_MIN(K, g * G + G); k++) s += xf[k];
        gs[g] = s;
    }
}

#if defined(IG_AVX512)

/* sum over k in [k0, k1) of xf[k] q8[k][0..16) */
IG_INLINE __m512 ig_wq_dot8(const float *xf, const int8_t *q, int k0, int k1) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int k = k0;
    for (; k + 4 <= k1; k += 4) {
        const int8_t *p = q + (size_t)k * 16;
        _mm_prefetch((const char *)p + 1024, _MM_HINT_T0);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k + 1]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16)))), a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k + 2]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 32)))), a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k + 3]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 48)))), a3);
    }
    for (; k < k1; k++)
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + (size_t)k * 16)))), a0);
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* sum over k in [0, n) of xf[k] q4[k][0..16) for one group's bytes b[n][8] */
IG_INLINE __m512 ig_wq_dot4(const float *xf, const uint8_t *b, int n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    const __m512i lo = _mm512_set1_epi32(15);
    const __m512i shift = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    int k = 0;
    for (; k + 2 <= n; k += 2) {
        /* 8 bytes -> lanes 0..7 and again 8..15; lanes 8..15 take the high nibble */
        __m128i v0 = _mm_set1_epi64x(*(const long long *)(b + (size_t)k * 8));
        __m128i v1 = _mm_set1_epi64x(*(const long long *)(b + (size_t)k * 8 + 8));
        __m512i q0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v0), shift), lo);
        __m512i q1 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v1), shift), lo);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q0), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k + 1]), _mm512_cvtepi32_ps(q1), a1);
    }
    for (; k < n; k++) {
        __m128i v0 = _mm_set1_epi64x(*(const long long *)(b + (size_t)k * 8));
        __m512i q0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v0), shift), lo);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q0), a0);
    }
    return _mm512_add_ps(a0, a1);
}

/* out[0..16) = x . W[panel] for a whole panel (decode). gs: the group sums (Q4G). */
IG_INLINE void ig_wq_gemv(int wq, int K, int G, const float *xf, const float *gs, const char *panel, float *out) {
    if (wq == IG_WQ_Q8C) {
        __m512 a = ig_wq_dot8(xf, (const int8_t *)(panel + 64), 0, K);
        _mm512_storeu_ps(out, _mm512_mul_ps(a, _mm512_loadu_ps((const float *)panel)));
        return;
    }
    __m512 acc = _mm512_setzero_ps();
    if (wq == IG_WQ_Q8G) {
        for (int g = 0; g * G < K; g++) {
            const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
            __m512 d = ig_wq_dot8(xf + g * G, (const int8_t *)(gb + 32), 0, IG_MIN(G, K - g * G));
            acc = _mm512_fmadd_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb)), acc);
        }
        _mm512_storeu_ps(out, acc);
        return;
    }
    for (int g = 0; g * G < K; g++) {
        const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
        _mm_prefetch(gb + 2048, _MM_HINT_T0);
        __m512 d = ig_wq_dot4(xf + g * G, (const uint8_t *)gb + 64, IG_MIN(G, K - g * G));
        acc = _mm512_fmadd_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb)), acc);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(gs[g]), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32))), acc);
    }
    _mm512_storeu_ps(out, acc);
}

#elif defined(IG_AVX2)

/* lanes 0..7 in *lo, 8..15 in *hi of sum over k in [k0, k1) of xf[k] q8[k][.] */
IG_INLINE void ig_wq_dot8(const float *xf, const int8_t *q, int k0, int k1, __m256 *lo, __m256 *hi) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int k = k0;
    for (; k + 2 <= k1; k += 2) {
        const int8_t *p = q + (size_t)k * 16;
        _mm_prefetch((const char *)p + 1024, _MM_HINT_T0);
        __m128i v0 = _mm_loadu_si128((const __m128i *)p), v1 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m256 x0 = _mm256_set1_ps(xf[k]), x1 = _mm256_set1_ps(xf[k + 1]);
        a0 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), a0);
        a1 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), a1);
        a2 = _mm256_fmadd_ps(x1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), a2);
        a3 = _mm256_fmadd_ps(x1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), a3);
    }
    for (; k < k1; k++) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)(q + (size_t)k * 16));
        __m256 x0 = _mm256_set1_ps(xf[k]);
        a0 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), a0);
        a1 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), a1);
    }
    *lo = _mm256_add_ps(a0, a2);
    *hi = _mm256_add_ps(a1, a3);
}

/* the same for one Q4G group's bytes b[n][8] */
IG_INLINE void ig_wq_dot4(const float *xf, const uint8_t *b, int n, __m256 *lo, __m256 *hi) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const __m256i m15 = _mm256_set1_epi32(15);
    int k = 0;
    for (; k + 2 <= n; k += 2) {
        __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + (size_t)k * 8)));
        __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + (size_t)k * 8 + 8)));
        __m256 x0 = _mm256_set1_ps(xf[k]), x1 = _mm256_set1_ps(xf[k + 1]);
        a0 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_and_si256(v0, m15)), a0);
        a1 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)), a1);
        a2 = _mm256_fmadd_ps(x1, _mm256_cvtepi32_ps(_mm256_and_si256(v1, m15)), a2);
        a3 = _mm256_fmadd_ps(x1, _mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4)), a3);
    }
    for (; k < n; k++) {
        __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + (size_t)k * 8)));
        __m256 x0 = _mm256_set1_ps(xf[k]);
        a0 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_and_si256(v0, m15)), a0);
        a1 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)), a1);
    }
    *lo = _mm256_add_ps(a0, a2);
    *hi = _mm256_add_ps(a1, a3);
}

IG_INLINE void ig_wq_gemv(int wq, int K, int G, const float *xf, const float *gs, const char *panel, float *out) {
    __m256 lo, hi;
    if (wq == IG_WQ_Q8C) {
        ig_wq_dot8(xf, (const int8_t *)(panel + 64), 0, K, &lo, &hi);
        _mm256_storeu_ps(out, _mm256_mul_ps(lo, _mm256_loadu_ps((const float *)panel)));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(hi, _mm256_loadu_ps((const float *)panel + 8)));
        return;
    }
    __m256 c0 = _mm256_setzero_ps(), c1 = c0;
    if (wq == IG_WQ_Q8G) {
        for (int g = 0; g * G < K; g++) {
            const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
            ig_wq_dot8(xf + g * G, (const int8_t *)(gb + 32), 0, IG_MIN(G, K - g * G), &lo, &hi);
            c0 = _mm256_fmadd_ps(lo, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb)), c0);
            c1 = _mm256_fmadd_ps(hi, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 16))), c1);
        }
        _mm256_storeu_ps(out, c0);
        _mm256_storeu_ps(out + 8, c1);
        return;
    }
    for (int g = 0; g * G < K; g++) {
        const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
        _mm_prefetch(gb + 2048, _MM_HINT_T0);
        ig_wq_dot4(xf + g * G, (const uint8_t *)(gb + 64), IG_MIN(G, K - g * G), &lo, &hi);
        __m256 xs = _mm256_set1_ps(gs[g]);
        const __m128i *h = (const __m128i *)gb; /* f16 scale[0..8), scale[8..16), min[0..8), min[8..16) */
        c0 = _mm256_fmadd_ps(lo, _mm256_cvtph_ps(_mm_loadu_si128(h)), _mm256_fmadd_ps(xs, _mm256_cvtph_ps(_mm_loadu_si128(h + 2)), c0));
        c1 = _mm256_fmadd_ps(hi, _mm256_cvtph_ps(_mm_loadu_si128(h + 1)), _mm256_fmadd_ps(xs, _mm256_cvtph_ps(_mm_loadu_si128(h + 3)), c1));
    }
    _mm256_storeu_ps(out, c0);
    _mm256_storeu_ps(out + 8, c1);
}

#else /* portable scalar C */

IG_INLINE void ig_wq_gemv(int wq, int K, int G, const float *xf, const float *gs, const char *panel, float *out) {
    float a[16] = {0};
    if (wq == IG_WQ_Q8C) {
        const int8_t *q = (const int8_t *)(panel + 64);
        for (int k = 0; k < K; k++)
            for (int j = 0; j < 16; j++) a[j] += xf[k] * (float)q[(size_t)k * 16 + j];
        for (int j = 0; j < 16; j++) {
            float s;
            memcpy(&s, panel + 4 * j, 4);
            out[j] = a[j] * s;
        }
        return;
    }
    if (wq == IG_WQ_Q8G) {
        for (int g = 0; g * G < K; g++) {
            const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
            const int8_t *q = (const int8_t *)gb + 32;
            float d[16] = {0};
            for (int k = 0; k < IG_MIN(G, K - g * G); k++)
                for (int j = 0; j < 16; j++) d[j] += xf[g * G + k] * (float)q[k * 16 + j];
            for (int j = 0; j < 16; j++) a[j] += ig_wq_f16(gb + 2 * j) * d[j];
        }
        memcpy(out, a, sizeof a);
        return;
    }
    for (int g = 0; g * G < K; g++) {
        const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
        float d[16] = {0};
        const uint8_t *b = (const uint8_t *)gb + 64;
        for (int k = 0; k < IG_MIN(G, K - g * G); k++)
            for (int j = 0; j < 8; j++) {
                d[j] += xf[g * G + k] * (float)(b[k * 8 + j] & 15);
                d[j + 8] += xf[g * G + k] * (float)(b[k * 8 + j] >> 4);
            }
        for (int j = 0; j < 16; j++) a[j] += ig_wq_f16(gb + 2 * j) * d[j] + ig_wq_f16(gb + 32 + 2 * j) * gs[g];
    }
    memcpy(out, a, sizeof a);
}

#endif
#endif /* IG_CPU_QUANT_H */
