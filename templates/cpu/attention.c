/* attention.c — template: causal attention of a mixed batch (prefill chunks + decode tokens of
 * many sequences) over the paged KV cache.
 *
 * Instantiate with AT_NAME, AT_H, AT_KV, AT_D, AT_PS, AT_PAGE_BYTES, AT_KVBF16, AT_KVQ (0: float KV
 * per AT_KVBF16; 8 or 4: rotated and quantized KV, kv_quant.h; q comes rotated from rope_kv.c and
 * the output is rotated back. 8-bit codes are read in registers by fused dot products,
 * s (q · c - z sum(q)) for scores and sum_j (p_j s_j) c_j - sum_j p_j s_j z_j for the values
 * (ig_attn_scores_q8 / ig_attn_pv_q8; on AVX-512 the scores of 16 keys at a time, their codes
 * transposed in registers so that a vector holds one dimension of 16 keys and no horizontal sum
 * is needed: at 2k context one thread's decode attention (1B shape) went from 384 to 304 us per
 * layer, bf16 KV 299 us, both bound by the f32 FMAs; at 8k int8 1597 us, bf16 2642); 4-bit rows are dequantized 16 keys at a time into a stack
 * tile (delta-coded keys reconstructed in order) that the f32 paths then read), AT_OBF16,
 * AT_SCALE, AT_MAXCTX, AT_WINDOW (0: causal over the whole context; w > 0: a token at position p
 * attends keys p-w+1 .. p only, and reads only the pages holding them); defines
 *   static void AT_NAME(int T, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
 *                       const int32_t *positions, const int32_t *token_seq,
 *                       const int32_t *page_table, int max_pages, void *out, float *scratch,
 *                       int nth);
 * One work item is (token, kv head): the G = AT_H / AT_KV query heads of a GQA group are done
 * together so each K and V row is loaded once for all of them. Keys are visited one page at a
 * time with a block-wise online softmax (running max m, running sum l, rescaled accumulator),
 * which is numerically stable and needs no context-sized buffer: `scratch` is not used (codegen
 * may still pass it), and AT_MAXCTX is accepted but unused.
 */
#include "common.h"
#include "kv_quant.h"

#ifndef AT_NAME
#define AT_NAME ig_attention
#endif
#ifndef AT_H
#define AT_H 32
#endif
#ifndef AT_KV
#define AT_KV 8
#endif
#ifndef AT_D
#define AT_D 64
#endif
#ifndef AT_PS
#define AT_PS 16
#endif
#ifndef AT_KVBF16
#define AT_KVBF16 0
#endif
#ifndef AT_OBF16
#define AT_OBF16 0
#endif
#ifndef AT_KVQ
#define AT_KVQ 0
#endif
#ifndef AT_PAGE_BYTES /* default: one layer per page */
#define AT_PAGE_BYTES (AT_KVQ ? IG_KVQ_LAYER_BYTES(AT_KV, AT_PS, AT_D, AT_KVQ) : (uint64_t)2 * AT_KV * AT_PS * AT_D * (AT_KVBF16 ? 2 : 4))
#endif
#ifndef AT_SCALE
#define AT_SCALE 0.125f
#endif
#ifndef AT_MAXCTX
#define AT_MAXCTX 4096
#endif
#ifndef AT_WINDOW
#define AT_WINDOW 0
#endif

#ifndef IG_ATTN_HELPERS
#define IG_ATTN_HELPERS

/* v[j] = exp(v[j] - sub) for j < n; returns the sum. */
IG_INLINE float ig_exp_row(float *v, float sub, int n) {
    int j = 0;
    float s = 0.0f;
#if defined(IG_AVX512)
    __m512 acc = _mm512_setzero_ps(), vs = _mm512_set1_ps(sub);
    for (; j < n; j += 16) {
        __mmask16 m = (j + 16 <= n) ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        __m512 e = ig_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + j), vs));
        e = _mm512_maskz_mov_ps(m, e);
        _mm512_mask_storeu_ps(v + j, m, e);
        acc = _mm512_add_ps(acc, e);
    }
    return ig_hsum512(acc);
#elif defined(IG_AVX2)
    __m256 acc = _mm256_setzero_ps(), vs = _mm256_set1_ps(sub);
    for (; j + 8 <= n; j += 8) {
        __m256 e = ig_exp256(_mm256_sub_ps(_mm256_loadu_ps(v + j), vs));
        _mm256_storeu_ps(v + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    s = ig_hsum256(acc);
#endif
    for (; j < n; j++) {
        v[j] = expf(v[j] - sub);
        s += v[j];
    }
    return s;
}

/* sc[g*ps + j] = qs[g] · K[j] for j < n; K rows dim elements apart. */
IG_INLINE void ig_attn_scores(int ng, int dim, int ps, int kvbf16, const float *qs, const void *K,
                              int n, float *sc) {
#if defined(IG_AVX512)
    enum { GM = 16 };
    const int nc = (dim + 15) / 16;
    const __mmask16 mt = (dim % 16) ? (__mmask16)((1u << (dim % 16)) - 1) : (__mmask16)0xffff;
    for (int j = 0; j < n; j++) {
        __m512 s[GM];
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) s[g] = _mm512_setzero_ps();
        for (int c = 0; c < nc; c++) {
            __mmask16 m = (c == nc - 1) ? mt : (__mmask16)0xffff;
            __m512 k = kvbf16 ? ig_maskload16_bf16((const uint16_t *)K + (size_t)j * dim + 16 * c, m)
                              : _mm512_maskz_loadu_ps(m, (const float *)K + (size_t)j * dim + 16 * c);
#pragma GCC unroll 16
            for (int g = 0; g < ng; g++)
                s[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qs + g * dim + 16 * c), k, s[g]);
        }
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) sc[g * ps + j] = ig_hsum512(s[g]);
    }
#else
    for (int j = 0; j < n; j++) {
        const void *kr = kvbf16 ? (const void *)((const uint16_t *)K + (size_t)j * dim)
                                : (const void *)((const float *)K + (size_t)j * dim);
        for (int g = 0; g < ng; g++) sc[g * ps + j] = ig_dot(qs + g * dim, kr, kvbf16, dim);
    }
#endif
}

/* acc[g] += sum_j p[g*ps + j] * V[j] for j < n. */
IG_INLINE void ig_attn_pv(int ng, int dim, int ps, int kvbf16, const float *p, const void *V, int n,
                          float *acc) {
#if defined(IG_AVX512)
    enum { GM = 16 };
    const int nc = (dim + 15) / 16;
    const __mmask16 mt = (dim % 16) ? (__mmask16)((1u << (dim % 16)) - 1) : (__mmask16)0xffff;
    for (int c = 0; c < nc; c++) {
        __mmask16 m = (c == nc - 1) ? mt : (__mmask16)0xffff;
        __m512 a[GM];
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) a[g] = _mm512_maskz_loadu_ps(m, acc + g * dim + 16 * c);
        for (int j = 0; j < n; j++) {
            __m512 v = kvbf16 ? ig_maskload16_bf16((const uint16_t *)V + (size_t)j * dim + 16 * c, m)
                              : _mm512_maskz_loadu_ps(m, (const float *)V + (size_t)j * dim + 16 * c);
#pragma GCC unroll 16
            for (int g = 0; g < ng; g++) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(p[g * ps + j]), v, a[g]);
        }
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) _mm512_mask_storeu_ps(acc + g * dim + 16 * c, m, a[g]);
    }
#else
    for (int j = 0; j < n; j++) {
        const void *vr = kvbf16 ? (const void *)((const uint16_t *)V + (size_t)j * dim)
                                : (const void *)((const float *)V + (size_t)j * dim);
        for (int g = 0; g < ng; g++) ig_axpy(acc + g * dim, p[g * ps + j], vr, kvbf16, dim);
    }
#endif
}

#if defined(IG_AVX512)
/* In-register transpose of 16 x 16 32-bit elements: r[j] element t becomes r[t] element j
 * (unpack 32-bit, unpack 64-bit, then two rounds of 128-bit lane shuffles: 64 shuffles). */
IG_INLINE void ig_tr16_epi32(__m512i *r) {
    __m512i a[16], b[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* b[4k + e], 128-bit lane L: rows 4k .. 4k + 3 of element 4L + e */
        b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
    }
#pragma GCC unroll 4
    for (int e = 0; e < 4; e++) {
        const __m512i c0 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x88), c1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xdd);
        const __m512i c2 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x88), c3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xdd);
        r[e] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        r[4 + e] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(c0, c2, 0xdd);
        r[12 + e] = _mm512_shuffle_i32x4(c1, c3, 0xdd);
    }
}
#endif

/* sc[g*ps + j] = qs[g] · K[j] for j < n, K rows stored as 8-bit codes c with an f16 scale s and
 * a zero point z (kv_quant.h): s (qs[g] · c - z qsum[g]), qsum[g] = the sum of qs[g]; the codes
 * are converted in registers, no row is dequantized. */
IG_INLINE void ig_attn_scores_q8(int ng, int dim, int ps, const float *qs, const float *qsum, const uint8_t *codes,
                                 const uint16_t *scales, const uint8_t *zeros, int n, float *sc) {
#if defined(IG_AVX512)
    if (dim % 4 == 0) { /* 16 keys a vector (ig_tr16_epi32), so no horizontal sums */
        const __m512i m255 = _mm512_set1_epi32(255);
        for (int j0 = 0; j0 < n; j0 += 16) {
            const int nj = IG_MIN(16, n - j0);
            const __mmask16 mj = (__mmask16)((1u << nj) - 1);
            __m512 a[16];
#pragma GCC unroll 16
            for (int g = 0; g < 16; g++) a[g] = _mm512_setzero_ps();
            for (int i0 = 0; i0 < dim; i0 += 64) {
                const int nb = IG_MIN(64, dim - i0); /* code bytes of this chunk: 4 nd */
                const __mmask64 mb = nb == 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1;
                __m512i r[16];
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++)
                    r[j] = j < nj ? _mm512_maskz_loadu_epi8(mb, codes + (size_t)(j0 + j) * dim + i0) : _mm512_setzero_si512();
                ig_tr16_epi32(r); /* r[t] lane j: codes 4t .. 4t + 3 of key j's chunk */
                for (int t = 0; t < nb / 4; t++)
                    for (int b = 0; b < 4; b++) {
                        const __m512 k = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(r[t], 8 * b), m255));
                        const float *qi = qs + i0 + 4 * t + b;
#pragma GCC unroll 16
                        for (int g = 0; g < ng; g++) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(qi[g * dim]), k, a[g]);
                    }
            }
            const __m512 sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mj, scales + j0));
            const __m512 zv = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mj, zeros + j0)));
#pragma GCC unroll 16
            for (int g = 0; g < ng; g++)
                _mm512_mask_storeu_ps(sc + g * ps + j0, mj, _mm512_mul_ps(sv, _mm512_fnmadd_ps(zv, _mm512_set1_ps(qsum[g]), a[g])));
        }
        return;
    }
#endif
    for (int j = 0; j < n; j++) {
        const uint8_t *c = codes + (size_t)j * dim;
        const float s = ig_f16_to_f32(scales[j]), z = (float)zeros[j];
#if defined(IG_AVX512)
        enum { GM = 16 };
        __m512 a[GM];
#pragma GCC unroll 16
        for (int g = 0; g < GM; g++) a[g] = _mm512_setzero_ps();
        for (int i = 0; i < dim; i += 16) {
            __mmask16 m = i + 16 <= dim ? (__mmask16)0xffff : (__mmask16)((1u << (dim - i)) - 1);
            __m512 k = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, c + i)));
#pragma GCC unroll 16
            for (int g = 0; g < ng; g++) a[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qs + g * dim + i), k, a[g]);
        }
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) sc[g * ps + j] = s * (ig_hsum512(a[g]) - z * qsum[g]);
#elif defined(IG_AVX2)
        enum { GM = 8 };
        for (int g0 = 0; g0 < ng; g0 += GM) {
            const int gn = IG_MIN(GM, ng - g0);
            __m256 a[GM];
            float t[GM] = {0};
#pragma GCC unroll 8
            for (int g = 0; g < GM; g++) a[g] = _mm256_setzero_ps();
            int i = 0;
            for (; i + 8 <= dim; i += 8) {
                __m256 k = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i))));
#pragma GCC unroll 8
                for (int g = 0; g < gn; g++)
                    a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + (g0 + g) * dim + i), k, a[g]);
            }
            for (; i < dim; i++)
                for (int g = 0; g < gn; g++) t[g] += qs[(g0 + g) * dim + i] * (float)c[i];
            for (int g = 0; g < gn; g++) sc[(g0 + g) * ps + j] = s * (ig_hsum256(a[g]) + t[g] - z * qsum[g0 + g]);
        }
#else
        for (int g = 0; g < ng; g++) {
            float a = 0.0f;
            for (int i = 0; i < dim; i++) a += qs[g * dim + i] * (float)c[i];
            sc[g * ps + j] = s * (a - z * qsum[g]);
        }
#endif
    }
}

/* acc[g] += sum_j p[g*ps + j] s_j (c_j - z_j) for j < n (ng <= 16), V rows as 8-bit codes
 * (kv_quant.h): the codes are accumulated with the weights w = p s in registers, and
 * sum_j w z_j is subtracted from every element once; no row is dequantized. */
IG_INLINE void ig_attn_pv_q8(int ng, int dim, int ps, const float *p, const uint8_t *codes, const uint16_t *scales,
                             const uint8_t *zeros, int n, float *acc) {
    enum { JB = 16 };
    for (int jb = 0; jb < n; jb += JB) {
        const int nj = IG_MIN(JB, n - jb);
        const uint8_t *cb = codes + (size_t)jb * dim;
        IG_ALIGN64 float w[16][JB];
        float bz[16];
#if defined(IG_AVX512)
        const __mmask16 mj = (__mmask16)((1u << nj) - 1);
        const __m512 sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mj, scales + jb));
        const __m512 zv = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mj, zeros + jb)));
        for (int g = 0; g < ng; g++) {
            const __m512 wv = _mm512_mul_ps(_mm512_maskz_loadu_ps(mj, p + g * ps + jb), sv);
            _mm512_store_ps(w[g], wv);
            bz[g] = _mm512_reduce_add_ps(_mm512_mul_ps(wv, zv));
        }
#else
        for (int g = 0; g < ng; g++) {
            bz[g] = 0.0f;
            for (int j = 0; j < nj; j++) {
                w[g][j] = p[g * ps + jb + j] * ig_f16_to_f32(scales[jb + j]);
                bz[g] += w[g][j] * (float)zeros[jb + j];
            }
        }
#endif
#if defined(IG_AVX512)
        enum { GM = 16 };
        for (int i = 0; i < dim; i += 16) {
            __mmask16 m = i + 16 <= dim ? (__mmask16)0xffff : (__mmask16)((1u << (dim - i)) - 1);
            __m512 a[GM];
#pragma GCC unroll 16
            for (int g = 0; g < GM; g++) a[g] = g < ng ? _mm512_maskz_loadu_ps(m, acc + g * dim + i) : _mm512_setzero_ps();
            for (int j = 0; j < nj; j++) {
                __m512 k = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, cb + (size_t)j * dim + i)));
#pragma GCC unroll 16
                for (int g = 0; g < ng; g++) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(w[g][j]), k, a[g]);
            }
#pragma GCC unroll 16
            for (int g = 0; g < ng; g++)
                _mm512_mask_storeu_ps(acc + g * dim + i, m, _mm512_sub_ps(a[g], _mm512_set1_ps(bz[g])));
        }
#elif defined(IG_AVX2)
        enum { GM = 8 };
        for (int g0 = 0; g0 < ng; g0 += GM) {
            const int gn = IG_MIN(GM, ng - g0);
            int i = 0;
            for (; i + 8 <= dim; i += 8) {
                __m256 a[GM];
#pragma GCC unroll 8
                for (int g = 0; g < GM; g++) a[g] = g < gn ? _mm256_loadu_ps(acc + (g0 + g) * dim + i) : _mm256_setzero_ps();
                for (int j = 0; j < nj; j++) {
                    __m256 k = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cb + (size_t)j * dim + i))));
#pragma GCC unroll 8
                    for (int g = 0; g < gn; g++) a[g] = _mm256_fmadd_ps(_mm256_set1_ps(w[g0 + g][j]), k, a[g]);
                }
#pragma GCC unroll 8
                for (int g = 0; g < gn; g++)
                    _mm256_storeu_ps(acc + (g0 + g) * dim + i, _mm256_sub_ps(a[g], _mm256_set1_ps(bz[g0 + g])));
            }
            for (; i < dim; i++)
                for (int g = 0; g < gn; g++) {
                    float a = acc[(g0 + g) * dim + i];
                    for (int j = 0; j < nj; j++) a += w[g0 + g][j] * (float)cb[(size_t)j * dim + i];
                    acc[(g0 + g) * dim + i] = a - bz[g0 + g];
                }
        }
#else
        for (int g = 0; g < ng; g++)
            for (int i = 0; i < dim; i++) {
                float a = acc[g * dim + i];
                for (int j = 0; j < nj; j++) a += w[g][j] * (float)cb[(size_t)j * dim + i];
                acc[g * dim + i] = a - bz[g];
            }
#endif
    }
}
#endif /* IG_ATTN_HELPERS */

static void AT_NAME(int T, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
                    const int32_t *positions, const int32_t *token_seq,
                    const int32_t *page_table, int max_pages, void *out, float *scratch, int nth) {
    enum { G_ = AT_H / AT_KV, ES_ = AT_KVBF16 ? 2 : 4 };
    _Static_assert(AT_H % AT_KV == 0, "AT_H must be a multiple of AT_KV");
    const int n_items = T * AT_KV;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1) if (n_items > 1)
    for (int it = 0; it < n_items; it++) {
        int t = it / AT_KV, kh = it % AT_KV;
        int pos = positions[t];
        const int32_t *pt = page_table + (size_t)token_seq[t] * max_pages;
        IG_ALIGN64 float qs[G_ * AT_D], acc[G_ * AT_D], sc[G_ * AT_PS], kt[AT_KVQ ? 16 * AT_D : 1];
        float m[G_], l[G_], qsum[G_];
        for (int g = 0; g < G_; g++) {
            const float *qh = q + (size_t)t * AT_H * AT_D + (size_t)(kh * G_ + g) * AT_D;
            qsum[g] = 0.0f;
            for (int i = 0; i < AT_D; i++) qs[g * AT_D + i] = qh[i] * AT_SCALE, qsum[g] += qs[g * AT_D + i];
            m[g] = -INFINITY;
            l[g] = 0.0f;
        }
        memset(acc, 0, sizeof acc);
        const int lo = AT_WINDOW > 0 && pos >= AT_WINDOW ? pos - AT_WINDOW + 1 : 0; /* first key */
        for (int pi = lo / AT_PS; pi <= pos / AT_PS; pi++) {
            int j0 = pi == lo / AT_PS ? lo % AT_PS : 0; /* keys before the window in its first page */
            int n = IG_MIN(AT_PS, pos + 1 - pi * AT_PS) - j0;
            const uint8_t *base = kv_pool + (uint64_t)pt[pi] * AT_PAGE_BYTES + layer_off;
            const uint8_t *K = base + ((size_t)kh * AT_PS + j0) * AT_D * ES_;
            const uint8_t *V = base + ((size_t)AT_KV * AT_PS * AT_D + ((size_t)kh * AT_PS + j0) * AT_D) * ES_;
            if (AT_KVQ == 8) { /* codes read in registers (ig_attn_scores_q8) */
                const uint8_t *kc, *kz;
                const uint16_t *ks;
                ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 0, kh, j0, &kc, &ks, &kz);
                for (int g0 = 0; g0 < G_; g0 += 16)
                    ig_attn_scores_q8(IG_MIN(16, G_ - g0), AT_D, AT_PS, qs + g0 * AT_D, qsum + g0, kc, ks, kz, n, sc + g0 * AT_PS);
            } else if (AT_KVQ) { /* 16 keys at a time: dequantized into kt, then the f32 path */
                IG_ALIGN64 float kp[AT_KVQ ? AT_D : 1]; /* delta-coded keys: the previous row */
                if (j0 > 0) ig_kvq_key_before(base, AT_KV, AT_PS, AT_D, AT_KVQ, kh, j0, kt, kp);
                for (int jc = 0; jc < n; jc += 16) {
                    int nc = IG_MIN(16, n - jc);
                    ig_kvq_load(base, AT_KV, AT_PS, AT_D, AT_KVQ, 0, kh, j0 + jc, nc, kt, kp);
                    for (int g0 = 0; g0 < G_; g0 += 16)
                        ig_attn_scores(IG_MIN(16, G_ - g0), AT_D, AT_PS, 0, qs + g0 * AT_D, kt, nc, sc + g0 * AT_PS + jc);
                }
            } else {
                /* the SIMD helpers keep up to 16 heads in registers: larger groups go in chunks */
                for (int g0 = 0; g0 < G_; g0 += 16)
                    ig_attn_scores(IG_MIN(16, G_ - g0), AT_D, AT_PS, AT_KVBF16, qs + g0 * AT_D, K, n, sc + g0 * AT_PS);
            }
            for (int g = 0; g < G_; g++) {
                float mb = sc[g * AT_PS];
                for (int j = 1; j < n; j++) mb = IG_MAX(mb, sc[g * AT_PS + j]);
                float mn = IG_MAX(m[g], mb);
                float corr = (m[g] == -INFINITY) ? 0.0f : expf(m[g] - mn);
                l[g] = l[g] * corr + ig_exp_row(sc + g * AT_PS, mn, n);
                if (corr != 1.0f) ig_scale(acc + g * AT_D, corr, AT_D);
                m[g] = mn;
            }
            if (AT_KVQ == 8) {
                const uint8_t *vc, *vz;
                const uint16_t *vs;
                ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 1, kh, j0, &vc, &vs, &vz);
                for (int g0 = 0; g0 < G_; g0 += 16)
                    ig_attn_pv_q8(IG_MIN(16, G_ - g0), AT_D, AT_PS, sc + g0 * AT_PS, vc, vs, vz, n, acc + g0 * AT_D);
            } else if (AT_KVQ) {
                for (int jc = 0; jc < n; jc += 16) {
                    int nc = IG_MIN(16, n - jc);
                    ig_kvq_load(base, AT_KV, AT_PS, AT_D, AT_KVQ, 1, kh, j0 + jc, nc, kt, NULL);
                    for (int g0 = 0; g0 < G_; g0 += 16)
                        ig_attn_pv(IG_MIN(16, G_ - g0), AT_D, AT_PS, 0, sc + g0 * AT_PS + jc, kt, nc, acc + g0 * AT_D);
                }
            } else {
                for (int g0 = 0; g0 < G_; g0 += 16)
                    ig_attn_pv(IG_MIN(16, G_ - g0), AT_D, AT_PS, AT_KVBF16, sc + g0 * AT_PS, V, n, acc + g0 * AT_D);
            }
        }
        for (int g = 0; g < G_; g++) {
            ig_scale(acc + g * AT_D, 1.0f / l[g], AT_D);
            if (AT_KVQ) ig_kvq_unrotate(acc + g * AT_D, AT_D); /* values are stored rotated (kv_quant.h) */
            size_t o = (size_t)t * AT_H * AT_D + (size_t)(kh * G_ + g) * AT_D;
            ig_store_row((char *)out + o * (AT_OBF16 ? 2 : 4), acc + g * AT_D, AT_OBF16, AT_D);
        }
    }
}

#undef AT_NAME
#undef AT_H
#undef AT_KV
#undef AT_D
#undef AT_PS
#undef AT_KVBF16
#undef AT_KVQ
#undef AT_OBF16
#undef AT_PAGE_BYTES
#undef AT_SCALE
#undef AT_MAXCTX
#undef AT_WINDOW
