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
 * layer, bf16 KV 299 us, both bound by the f32 FMAs; at 8k int8 1597 us, bf16 2642. On AVX-512
 * the decode path now multiplies integers instead (ig_attn_scores_q16 / ig_attn_pv_q16: the
 * query and each page's weights p s as int16 codes against the key / value codes by vpdpwssd,
 * exact int32 sums; their rounding, within 1/65534 of the largest, is far below the codes'
 * own; bench_kernels, one Zen 4 thread, H32 KV8 D64 at 2k in cache: 0.217 -> 0.148 ms, bf16 KV
 * 0.178; 4-bit codes are widened to bytes 16 rows at a time and take the same kernels, the
 * delta-coded keys' scores as running sums from the page's slot 0: 0.36 -> 0.166 ms; AVX2 has
 * the same kernels on 8 lanes: int8 0.317 -> 0.247, uint4 0.507 -> 0.274, bf16 0.283); elsewhere
 * 4-bit rows are dequantized 16 keys at a time into a stack
 * tile (delta-coded keys reconstructed in order) that the f32 paths then read), AT_OBF16,
 * AT_SCALE, AT_MAXCTX, AT_WINDOW (0: causal over the whole context; w > 0: a token at position p
 * attends keys p-w+1 .. p only, and reads only the pages holding them), AT_TILES (1: prefill
 * runs in tiles, below; 0: every token on the decode path, --tune cpu_attn_tiles=0); defines
 *   static void AT_NAME(int T, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
 *                       const int32_t *positions, const int32_t *token_seq,
 *                       const int32_t *page_table, int max_pages, void *out, float *scratch,
 *                       int nth);
 * One work item is (tile, kv head): the G = AT_H / AT_KV query heads of a GQA group are done
 * together so each K and V row is loaded once for all of them. A tile is a lone token (decode, or
 * a token that does not continue its predecessor: the per-token path above) or a run of up to
 * AT_QB_ consecutive tokens of one sequence (prefill chunks), whose tokens x heads rows meet each
 * 16-key chunk of K / V once, made f32 (or bf16 pairs for vdpbf16ps: bf16 KV on AVX-512 BF16),
 * with the vector over the rows (ig_attn_tile_*: no horizontal sums; SmolLM2 bf16, one Zen 4
 * thread, 4096-token prefill 2.2x the per-token path). The decode path prefetches the page
 * AT_PF_ pages ahead (a context's pages lie anywhere in the pool, beyond the hardware
 * prefetcher's reach): SmolLM2 bf16 weights and KV, decode after 2048 tokens, one thread,
 * 12.1 -> 10.3 ms per token. Keys are visited one page at a time with a
 * block-wise online softmax (running max m, running sum l, rescaled accumulator), which is
 * numerically stable and needs no context-sized buffer: `scratch` is not used (codegen may still
 * pass it), and AT_MAXCTX is accepted but unused.
 */
#include "common.h"
#include "kv_quant.h"
#include <stdlib.h> /* malloc: the prefill tiles' table */

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
#ifndef AT_TILES /* 0: prefill tokens on the decode path too (--tune cpu_attn_tiles=0) */
#define AT_TILES 1
#endif

#ifndef IG_ATTN_HELPERS
#define IG_ATTN_HELPERS

/* max_j v[j] for 0 < j < n. */
IG_INLINE float ig_max_row(const float *v, int n) {
#if defined(IG_AVX512)
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16)
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1), v + j));
    return _mm512_reduce_max_ps(mx);
#else
    float mx = v[0];
    for (int j = 1; j < n; j++) mx = IG_MAX(mx, v[j]);
    return mx;
#endif
}

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
 * are converted in registers, no row is dequantized. On AVX-512 / AVX2 only for head_dim % 4 != 0
 * (ig_attn_scores_q16 takes the rest; its f32 predecessor with the same 16-key transpose was
 * 0.217 ms against 0.148 at H32 KV8 D64, 2k context). */
IG_INLINE void ig_attn_scores_q8(int ng, int dim, int ps, const float *qs, const float *qsum, const uint8_t *codes,
                                 const uint16_t *scales, const uint8_t *zeros, int n, float *sc) {
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

#if defined(IG_AVX512) || defined(IG_AVX2)
/* The queries of ig_attn_scores_q16: head g's f32 row qs[g] as int16 codes, qs ~ qx[g] code, with
 * |code| <= qmax, qmax 255 dim < 2^31 (so no int32 sum of codes times key codes overflows);
 * qp[g][2t + h] holds the codes of dimensions 4t + h (low half) and 4t + h + 2 (high half), the
 * pairs the key codes' dword t splits into; qn[g] = the sum of the codes (exact in f32). */
IG_INLINE void ig_attn_q16(int ng, int dim, const float *qs, int32_t *qp, float *qx, float *qn) {
    const float qmax = fminf(32767.0f, floorf(2147483647.0f / (255.0f * (float)dim)));
    for (int g = 0; g < ng; g++) {
        const float *r = qs + (size_t)g * dim;
        float amax = 0.0f;
        for (int i = 0; i < dim; i++) amax = fmaxf(amax, fabsf(r[i]));
        const float inv = amax > 0.0f ? qmax / amax : 0.0f;
        qx[g] = amax > 0.0f ? amax / qmax : 0.0f;
        int32_t sum = 0, *o = qp + (size_t)g * (dim / 2);
        for (int t = 0; t < dim / 4; t++)
            for (int h = 0; h < 2; h++) {
                const int32_t c0 = (int32_t)lrintf(r[4 * t + h] * inv), c1 = (int32_t)lrintf(r[4 * t + h + 2] * inv);
                o[2 * t + h] = (int32_t)((uint32_t)(uint16_t)c0 | (uint32_t)(uint16_t)c1 << 16);
                sum += c0 + c1;
            }
        qn[g] = (float)sum;
    }
}

#endif

#if defined(IG_AVX512)
/* out[j][i] = code i of the 4-bit row j (dim / 2 bytes, element 2i in the low nibble), j < nr:
 * rows widened to one byte a code for the integer kernels. */
IG_INLINE void ig_attn_widen4(const uint8_t *c4, int nr, int dim, uint8_t *out) {
    const __m512i m0 = _mm512_set1_epi16(0x000f), m1 = _mm512_set1_epi16(0x0f00);
    for (int j = 0; j < nr; j++)
        for (int i = 0; i < dim / 2; i += 32) {
            const int nb = IG_MIN(32, dim / 2 - i);
            const __m512i x = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8((__mmask32)(nb == 32 ? ~0u : (1u << nb) - 1),
                                                                           c4 + (size_t)j * (dim / 2) + i));
            const __m512i y = _mm512_or_si512(_mm512_and_si512(x, m0), _mm512_and_si512(_mm512_slli_epi16(x, 4), m1));
            _mm512_mask_storeu_epi8(out + (size_t)j * dim + 2 * i, nb == 32 ? ~(__mmask64)0 : ((__mmask64)1 << (2 * nb)) - 1, y);
        }
}

/* sc[g*ps + j] = s_j qx[g] (q16[g] · c_j - z_j qn[g]) for j < n (ng <= 16, dim % 4 == 0): the
 * int8 KV scores on integer dot products. 16 keys' codes are transposed in registers (a dword
 * lane holds 4 dimensions of one key), split into two int16 pairs per lane (dimensions 4t, 4t + 2
 * and 4t + 1, 4t + 3) and multiplied with the queries' int16 codes (ig_attn_q16) by vpdpwssd
 * (vpmaddwd + vpaddd without AVX-512 VNNI): exact int32 sums, 2 instructions per 4 dimensions of
 * 16 keys and head where the f32 path needs 4 FMAs and shares 12 conversions. */
IG_INLINE void ig_attn_scores_q16(int ng, int dim, int ps, const int32_t *qp, const float *qx, const float *qn,
                                  const uint8_t *codes, const uint16_t *scales, const uint8_t *zeros, int n, float *sc) {
    const __m512i lo = _mm512_set1_epi32(0x00ff00ff);
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int nj = IG_MIN(16, n - j0);
        const __mmask16 mj = (__mmask16)((1u << nj) - 1);
        __m512i a[16];
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) a[g] = _mm512_setzero_si512();
        for (int i0 = 0; i0 < dim; i0 += 64) {
            const int nb = IG_MIN(64, dim - i0); /* code bytes of this chunk */
            const __mmask64 mb = nb == 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1;
            __m512i r[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                r[j] = j < nj ? _mm512_maskz_loadu_epi8(mb, codes + (size_t)(j0 + j) * dim + i0) : _mm512_setzero_si512();
            ig_tr16_epi32(r); /* r[t] lane j: codes 4t .. 4t + 3 of key j's chunk */
            for (int t = 0; t < nb / 4; t++) {
                const __m512i ce = _mm512_and_si512(r[t], lo), co = _mm512_and_si512(_mm512_srli_epi32(r[t], 8), lo);
                const int32_t *qt = qp + i0 / 2 + 2 * t;
#pragma GCC unroll 16
                for (int g = 0; g < ng; g++) {
#if defined(__AVX512VNNI__)
                    a[g] = ig_dpwssd512(a[g], ce, _mm512_set1_epi32(qt[g * (dim / 2)]));
                    a[g] = ig_dpwssd512(a[g], co, _mm512_set1_epi32(qt[g * (dim / 2) + 1]));
#else
                    a[g] = _mm512_add_epi32(a[g], _mm512_madd_epi16(ce, _mm512_set1_epi32(qt[g * (dim / 2)])));
                    a[g] = _mm512_add_epi32(a[g], _mm512_madd_epi16(co, _mm512_set1_epi32(qt[g * (dim / 2) + 1])));
#endif
                }
            }
        }
        const __m512 sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mj, scales + j0));
        const __m512 zv = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mj, zeros + j0)));
#pragma GCC unroll 16
        for (int g = 0; g < ng; g++) {
            const __m512 d = _mm512_fnmadd_ps(zv, _mm512_set1_ps(qn[g]), _mm512_cvtepi32_ps(a[g]));
            _mm512_mask_storeu_ps(sc + g * ps + j0, mj, _mm512_mul_ps(_mm512_mul_ps(sv, _mm512_set1_ps(qx[g])), d));
        }
    }
}
#endif

#if defined(IG_AVX512)
/* acc[g] += sum_j p[g*ps + j] s_j (c_j - z_j) for j < n <= 16 (ng <= 16, dim % 32 == 0), V rows as
 * 8-bit codes, on integer dot products: head g's weights w_j = p_j s_j become int16 codes
 * w ~ wx code (max |code| 32767; 16 x 32767 x 255 < 2^31), two keys' codes of a dimension are
 * widened into one dword's int16 pair and vpdpwssd (vpmaddwd + vpaddd without AVX-512 VNNI) adds
 * code(w_j) c_j + code(w_j+1) c_j+1 in int32; the zero points' sum_j code(w_j) z_j comes off in
 * int32 too, then one conversion and one FMA per element and page. vpunpck*wd interleaves within
 * 128-bit lanes, so the sums come out in the order dimensions 0-3, 8-11, .. (low) and 4-7, 12-15, ..
 * (high) and vpermt2d puts them back in order. */
IG_INLINE void ig_attn_pv_q16(int ng, int dim, int ps, const float *p, const uint8_t *codes, const uint16_t *scales,
                              const uint8_t *zeros, int n, float *acc) {
    const __mmask16 mj = (__mmask16)((1u << n) - 1);
    const __m512 sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mj, scales));
    const __m512i zv = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mj, zeros));
    const __m512i ix0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i ix1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    int32_t wp[16][8]; /* head g: the int16 codes of keys 2u, 2u + 1 in dword u */
    float wx[16];
    int32_t wz[16];
    for (int g = 0; g < ng; g++) {
        const __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(mj, p + g * ps), sv);
        const float wmax = _mm512_reduce_max_ps(w);
        const __m512i wq = _mm512_cvtps_epi32(_mm512_mul_ps(w, _mm512_set1_ps(wmax > 0.0f ? 32767.0f / wmax : 0.0f)));
        wx[g] = wmax / 32767.0f;
        wz[g] = _mm512_reduce_add_epi32(_mm512_mullo_epi32(wq, zv));
        _mm256_storeu_si256((__m256i *)wp[g], _mm512_cvtepi32_epi16(wq));
    }
    for (int i0 = 0; i0 < dim; i0 += 32)
        for (int g0 = 0; g0 < ng; g0 += 8) {
            const int gn = IG_MIN(8, ng - g0);
            __m512i al[8], ah[8];
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) al[g] = ah[g] = _mm512_setzero_si512();
            for (int j = 0; j < n; j += 2) {
                const __m512i c0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(codes + (size_t)j * dim + i0)));
                const __m512i c1 = j + 1 < n ? _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(codes + (size_t)(j + 1) * dim + i0)))
                                             : _mm512_setzero_si512();
                const __m512i lo = _mm512_unpacklo_epi16(c0, c1), hi = _mm512_unpackhi_epi16(c0, c1);
#pragma GCC unroll 8
                for (int g = 0; g < gn; g++) {
                    const __m512i wv = _mm512_set1_epi32(wp[g0 + g][j / 2]);
#if defined(__AVX512VNNI__)
                    al[g] = ig_dpwssd512(al[g], lo, wv);
                    ah[g] = ig_dpwssd512(ah[g], hi, wv);
#else
                    al[g] = _mm512_add_epi32(al[g], _mm512_madd_epi16(lo, wv));
                    ah[g] = _mm512_add_epi32(ah[g], _mm512_madd_epi16(hi, wv));
#endif
                }
            }
#pragma GCC unroll 8
            for (int g = 0; g < gn; g++) {
                float *o = acc + (size_t)(g0 + g) * dim + i0;
                const __m512i z = _mm512_set1_epi32(wz[g0 + g]);
                const __m512 x = _mm512_set1_ps(wx[g0 + g]);
                const __m512i d0 = _mm512_sub_epi32(_mm512_permutex2var_epi32(al[g], ix0, ah[g]), z);
                const __m512i d1 = _mm512_sub_epi32(_mm512_permutex2var_epi32(al[g], ix1, ah[g]), z);
                _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), x, _mm512_loadu_ps(o)));
                _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), x, _mm512_loadu_ps(o + 16)));
            }
        }
}
#endif

#if defined(IG_AVX2)
/* AVX2 versions of ig_attn_widen4, ig_attn_scores_q16 and ig_attn_pv_q16 (same arguments and
 * results): 8 keys a vector in the scores (an 8 x 8 dword transpose per 32 code bytes), heads
 * in blocks of 4 (16 registers), vpmaddwd + vpaddd; the values need dim % 16 == 0 and put the
 * two 128-bit lanes' interleaved sums back in order with vperm2i128. */
IG_INLINE void ig_attn_widen4(const uint8_t *c4, int nr, int dim, uint8_t *out) {
    const __m256i m0 = _mm256_set1_epi16(0x000f), m1 = _mm256_set1_epi16(0x0f00);
    for (int j = 0; j < nr; j++) {
        const uint8_t *c = c4 + (size_t)j * (dim / 2);
        uint8_t *o = out + (size_t)j * dim;
        int i = 0;
        for (; i + 16 <= dim / 2; i += 16) {
            const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(c + i)));
            _mm256_storeu_si256((__m256i *)(o + 2 * i),
                                _mm256_or_si256(_mm256_and_si256(x, m0), _mm256_and_si256(_mm256_slli_epi16(x, 4), m1)));
        }
        for (; i < dim / 2; i++) o[2 * i] = c[i] & 15, o[2 * i + 1] = c[i] >> 4;
    }
}

/* The 8 x 8 dwords r[j] element t -> r[t] element j. */
IG_INLINE void ig_tr8_epi32(__m256i *r) {
    __m256i a[8], b[8];
    for (int k = 0; k < 4; k++) {
        a[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        b[4 * k] = _mm256_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm256_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm256_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm256_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
    }
    for (int e = 0; e < 4; e++) {
        r[e] = _mm256_permute2x128_si256(b[e], b[4 + e], 0x20);
        r[4 + e] = _mm256_permute2x128_si256(b[e], b[4 + e], 0x31);
    }
}

IG_INLINE void ig_attn_scores_q16(int ng, int dim, int ps, const int32_t *qp, const float *qx, const float *qn,
                                  const uint8_t *codes, const uint16_t *scales, const uint8_t *zeros, int n, float *sc) {
    const __m256i lo = _mm256_set1_epi32(0x00ff00ff);
    for (int j0 = 0; j0 < n; j0 += 8) {
        const int nj = IG_MIN(8, n - j0);
        uint16_t sb[8] = {0};
        uint8_t zb[8] = {0};
        memcpy(sb, scales + j0, 2 * (size_t)nj), memcpy(zb, zeros + j0, (size_t)nj);
        const __m256 sv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
        const __m256 zv = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)zb)));
        const __m256i mj = _mm256_cmpgt_epi32(_mm256_set1_epi32(nj), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int g0 = 0; g0 < ng; g0 += 4) {
            const int gn = IG_MIN(4, ng - g0);
            __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int i0 = 0; i0 < dim; i0 += 32) {
                const int nb = IG_MIN(32, dim - i0); /* code bytes of this chunk */
                __m256i r[8];
                for (int j = 0; j < 8; j++) {
                    const uint8_t *c = codes + (size_t)(j0 + j) * dim + i0;
                    if (j >= nj) r[j] = _mm256_setzero_si256();
                    else if (nb == 32) r[j] = _mm256_loadu_si256((const __m256i *)c);
                    else {
                        uint8_t t[32] = {0};
                        memcpy(t, c, (size_t)nb);
                        r[j] = _mm256_loadu_si256((const __m256i *)t);
                    }
                }
                ig_tr8_epi32(r); /* r[t] lane j: codes 4t .. 4t + 3 of key j's chunk */
                for (int t = 0; t < nb / 4; t++) {
                    const __m256i ce = _mm256_and_si256(r[t], lo), co = _mm256_and_si256(_mm256_srli_epi32(r[t], 8), lo);
                    const int32_t *qt = qp + (size_t)g0 * (dim / 2) + i0 / 2 + 2 * t;
                    for (int g = 0; g < gn; g++) {
                        a[g] = _mm256_add_epi32(a[g], _mm256_madd_epi16(ce, _mm256_set1_epi32(qt[g * (dim / 2)])));
                        a[g] = _mm256_add_epi32(a[g], _mm256_madd_epi16(co, _mm256_set1_epi32(qt[g * (dim / 2) + 1])));
                    }
                }
            }
            for (int g = 0; g < gn; g++) {
                const __m256 d = _mm256_fnmadd_ps(zv, _mm256_set1_ps(qn[g0 + g]), _mm256_cvtepi32_ps(a[g]));
                _mm256_maskstore_ps(sc + (size_t)(g0 + g) * ps + j0, mj, _mm256_mul_ps(_mm256_mul_ps(sv, _mm256_set1_ps(qx[g0 + g])), d));
            }
        }
    }
}

IG_INLINE void ig_attn_pv_q16(int ng, int dim, int ps, const float *p, const uint8_t *codes, const uint16_t *scales,
                              const uint8_t *zeros, int n, float *acc) {
    int32_t wp[16][8]; /* head g: the int16 codes of keys 2u, 2u + 1 in dword u */
    float wx[16];
    int32_t wz[16];
    uint16_t sb[16] = {0};
    uint8_t zb[16] = {0};
    memcpy(sb, scales, 2 * (size_t)n), memcpy(zb, zeros, (size_t)n);
    const __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb)), s1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 8)));
    const __m256i z0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)zb)), z1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zb + 8)));
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota), m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), iota);
    for (int g = 0; g < ng; g++) {
        const __m256 w0 = _mm256_mul_ps(_mm256_maskload_ps(p + g * ps, m0), s0);
        const __m256 w1 = _mm256_mul_ps(_mm256_maskload_ps(p + g * ps + 8, m1), s1);
        __m256 mx = _mm256_max_ps(w0, w1);
        mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, 0x4e));
        mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, 0xb1));
        const float wmax = _mm256_cvtss_f32(mx);
        const __m256 inv = _mm256_set1_ps(wmax > 0.0f ? 32767.0f / wmax : 0.0f);
        const __m256i c0 = _mm256_cvtps_epi32(_mm256_mul_ps(w0, inv)), c1 = _mm256_cvtps_epi32(_mm256_mul_ps(w1, inv));
        _mm256_storeu_si256((__m256i *)wp[g], _mm256_permute4x64_epi64(_mm256_packs_epi32(c0, c1), 0xd8));
        const __m256i zs = _mm256_add_epi32(_mm256_mullo_epi32(c0, z0), _mm256_mullo_epi32(c1, z1));
        const __m128i z4 = _mm_add_epi32(_mm256_castsi256_si128(zs), _mm256_extracti128_si256(zs, 1));
        const __m128i z2 = _mm_add_epi32(z4, _mm_shuffle_epi32(z4, 0x4e));
        wz[g] = _mm_cvtsi128_si32(_mm_add_epi32(z2, _mm_shuffle_epi32(z2, 0xb1)));
        wx[g] = wmax / 32767.0f;
    }
    for (int i0 = 0; i0 < dim; i0 += 16)
        for (int g0 = 0; g0 < ng; g0 += 4) {
            const int gn = IG_MIN(4, ng - g0);
            __m256i al[4], ah[4];
            for (int g = 0; g < 4; g++) al[g] = ah[g] = _mm256_setzero_si256();
            for (int j = 0; j < n; j += 2) {
                const __m256i c0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(codes + (size_t)j * dim + i0)));
                const __m256i c1 = j + 1 < n ? _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(codes + (size_t)(j + 1) * dim + i0)))
                                             : _mm256_setzero_si256();
                const __m256i l = _mm256_unpacklo_epi16(c0, c1), h = _mm256_unpackhi_epi16(c0, c1);
                for (int g = 0; g < gn; g++) {
                    const __m256i wv = _mm256_set1_epi32(wp[g0 + g][j / 2]);
                    al[g] = _mm256_add_epi32(al[g], _mm256_madd_epi16(l, wv));
                    ah[g] = _mm256_add_epi32(ah[g], _mm256_madd_epi16(h, wv));
                }
            }
            for (int g = 0; g < gn; g++) {
                float *o = acc + (size_t)(g0 + g) * dim + i0;
                const __m256i z = _mm256_set1_epi32(wz[g0 + g]);
                const __m256 x = _mm256_set1_ps(wx[g0 + g]);
                const __m256i d0 = _mm256_sub_epi32(_mm256_permute2x128_si256(al[g], ah[g], 0x20), z);
                const __m256i d1 = _mm256_sub_epi32(_mm256_permute2x128_si256(al[g], ah[g], 0x31), z);
                _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), x, _mm256_loadu_ps(o)));
                _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), x, _mm256_loadu_ps(o + 8)));
            }
        }
}
#endif

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

/* ---- prefill tiles: a run of consecutive tokens of one sequence against each K/V row once ----
 * Rows r of a tile are (token i, head g) pairs, r = i * ng + g, padded to a multiple of the vector
 * width; the arrays indexed [.][r] have a row stride rs. The vector runs over rows, so a key's
 * element is one broadcast and the softmax needs no horizontal sums: scores S[j][r] = sum_d
 * QT[d][r] K[j][d], p = exp(S - m) with m the running max per row, the accumulator transposed
 * AT[d][r] += sum_j p[j][r] V[j][d]. K and V come as f32 chunks of IG_AT_KC rows (converted or
 * dequantized once per tile, zero rows past the chunk's end). */
enum { IG_AT_KC = 16 }; /* keys of a chunk */
#if defined(IG_AVX512)
typedef __m512 ig_atv;
enum { IG_ATV_W = 16, IG_ATV_JB = 16 };
#define IG_ATV_LD(p) _mm512_loadu_ps(p)
#define IG_ATV_ST(p, v) _mm512_storeu_ps(p, v)
#define IG_ATV_SET1(x) _mm512_set1_ps(x)
#define IG_ATV_ZERO() _mm512_setzero_ps()
#define IG_ATV_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define IG_ATV_MUL(a, b) _mm512_mul_ps(a, b)
#define IG_ATV_ADD(a, b) _mm512_add_ps(a, b)
#define IG_ATV_SUB(a, b) _mm512_sub_ps(a, b)
#define IG_ATV_MAX(a, b) _mm512_max_ps(a, b)
#define IG_ATV_EXP(a) ig_exp512(a)
#elif defined(IG_AVX2)
typedef __m256 ig_atv;
enum { IG_ATV_W = 8, IG_ATV_JB = 8 };
#define IG_ATV_LD(p) _mm256_loadu_ps(p)
#define IG_ATV_ST(p, v) _mm256_storeu_ps(p, v)
#define IG_ATV_SET1(x) _mm256_set1_ps(x)
#define IG_ATV_ZERO() _mm256_setzero_ps()
#define IG_ATV_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define IG_ATV_MUL(a, b) _mm256_mul_ps(a, b)
#define IG_ATV_ADD(a, b) _mm256_add_ps(a, b)
#define IG_ATV_SUB(a, b) _mm256_sub_ps(a, b)
#define IG_ATV_MAX(a, b) _mm256_max_ps(a, b)
#define IG_ATV_EXP(a) ig_exp256(a)
#elif defined(IG_NEON)
typedef float32x4_t ig_atv;
enum { IG_ATV_W = 4, IG_ATV_JB = 16 };
IG_INLINE float32x4_t ig_atv_exp_neon(float32x4_t x) {
    float v[4];
    vst1q_f32(v, x);
    for (int i = 0; i < 4; i++) v[i] = expf(v[i]);
    return vld1q_f32(v);
}
#define IG_ATV_LD(p) vld1q_f32(p)
#define IG_ATV_ST(p, v) vst1q_f32(p, v)
#define IG_ATV_SET1(x) vdupq_n_f32(x)
#define IG_ATV_ZERO() vdupq_n_f32(0.0f)
#define IG_ATV_FMA(a, b, c) vfmaq_f32(c, a, b)
#define IG_ATV_MUL(a, b) vmulq_f32(a, b)
#define IG_ATV_ADD(a, b) vaddq_f32(a, b)
#define IG_ATV_SUB(a, b) vsubq_f32(a, b)
#define IG_ATV_MAX(a, b) vmaxq_f32(a, b)
#define IG_ATV_EXP(a) ig_atv_exp_neon(a)
#else
typedef float ig_atv;
enum { IG_ATV_W = 1, IG_ATV_JB = 4 };
#define IG_ATV_LD(p) (*(p))
#define IG_ATV_ST(p, v) (*(p) = (v))
#define IG_ATV_SET1(x) (x)
#define IG_ATV_ZERO() 0.0f
#define IG_ATV_FMA(a, b, c) fmaf(a, b, c)
#define IG_ATV_MUL(a, b) ((a) * (b))
#define IG_ATV_ADD(a, b) ((a) + (b))
#define IG_ATV_SUB(a, b) ((a) - (b))
#define IG_ATV_MAX(a, b) fmaxf(a, b)
#define IG_ATV_EXP(a) expf(a)
#endif

/* s[j][r] = sum_i qt[i][r] kf[j][i] for the chunk's IG_AT_KC keys (kf zero past its end), r < rp. */
IG_INLINE void ig_attn_tile_scores(int dim, int rp, int rs, const float *IG_RESTRICT qt, const float *IG_RESTRICT kf,
                                   float *IG_RESTRICT s) {
    for (int rb = 0; rb < rp; rb += IG_ATV_W)
        for (int j0 = 0; j0 < IG_AT_KC; j0 += IG_ATV_JB) {
            ig_atv a[IG_ATV_JB];
            const float *kr = kf + (size_t)j0 * dim;
#pragma GCC unroll 16
            for (int jj = 0; jj < IG_ATV_JB; jj++) a[jj] = IG_ATV_ZERO();
            for (int i = 0; i < dim; i++) {
                const ig_atv q = IG_ATV_LD(qt + (size_t)i * rs + rb);
#pragma GCC unroll 16
                for (int jj = 0; jj < IG_ATV_JB; jj++) a[jj] = IG_ATV_FMA(IG_ATV_SET1(kr[(size_t)jj * dim + i]), q, a[jj]);
            }
#pragma GCC unroll 16
            for (int jj = 0; jj < IG_ATV_JB; jj++) IG_ATV_ST(s + (size_t)(j0 + jj) * rs + rb, a[jj]);
        }
}

/* The chunk's softmax step for rows < rp over keys < nk: m (running max, finite start), l (running
 * sum) updated, s[j][r] replaced by exp(s - m_new), cr[r] = exp(m_old - m_new). Masked scores are
 * -inf and give 0. */
IG_INLINE void ig_attn_tile_softmax(int rp, int rs, int nk, float *IG_RESTRICT s, float *IG_RESTRICT m,
                                    float *IG_RESTRICT l, float *IG_RESTRICT cr) {
    for (int rb = 0; rb < rp; rb += IG_ATV_W) {
        ig_atv mx = IG_ATV_LD(s + rb);
        for (int j = 1; j < nk; j++) mx = IG_ATV_MAX(mx, IG_ATV_LD(s + (size_t)j * rs + rb));
        const ig_atv mo = IG_ATV_LD(m + rb), mn = IG_ATV_MAX(mo, mx);
        ig_atv sum = IG_ATV_ZERO();
        for (int j = 0; j < nk; j++) {
            const ig_atv p = IG_ATV_EXP(IG_ATV_SUB(IG_ATV_LD(s + (size_t)j * rs + rb), mn));
            IG_ATV_ST(s + (size_t)j * rs + rb, p);
            sum = IG_ATV_ADD(sum, p);
        }
        const ig_atv c = IG_ATV_EXP(IG_ATV_SUB(mo, mn));
        IG_ATV_ST(l + rb, IG_ATV_FMA(IG_ATV_LD(l + rb), c, sum));
        IG_ATV_ST(m + rb, mn);
        IG_ATV_ST(cr + rb, c);
    }
}

/* at[i][r] = at[i][r] cr[r] + sum_{j < nk} p[j][r] vf[j][i] for r < rp. */
IG_INLINE void ig_attn_tile_pv(int dim, int rp, int rs, int nk, const float *IG_RESTRICT p,
                               const float *IG_RESTRICT vf, const float *IG_RESTRICT cr, float *IG_RESTRICT at) {
    enum { DB = 8 };
    for (int rb = 0; rb < rp; rb += IG_ATV_W) {
        const ig_atv c = IG_ATV_LD(cr + rb);
        int i0 = 0;
        for (; i0 + DB <= dim; i0 += DB) {
            ig_atv a[DB];
#pragma GCC unroll 8
            for (int e = 0; e < DB; e++) a[e] = IG_ATV_MUL(IG_ATV_LD(at + (size_t)(i0 + e) * rs + rb), c);
            for (int j = 0; j < nk; j++) {
                const ig_atv pv = IG_ATV_LD(p + (size_t)j * rs + rb);
                const float *vr = vf + (size_t)j * dim + i0;
#pragma GCC unroll 8
                for (int e = 0; e < DB; e++) a[e] = IG_ATV_FMA(IG_ATV_SET1(vr[e]), pv, a[e]);
            }
#pragma GCC unroll 8
            for (int e = 0; e < DB; e++) IG_ATV_ST(at + (size_t)(i0 + e) * rs + rb, a[e]);
        }
        for (; i0 < dim; i0++) {
            ig_atv a = IG_ATV_MUL(IG_ATV_LD(at + (size_t)i0 * rs + rb), c);
            for (int j = 0; j < nk; j++) a = IG_ATV_FMA(IG_ATV_SET1(vf[(size_t)j * dim + i0]), IG_ATV_LD(p + (size_t)j * rs + rb), a);
            IG_ATV_ST(at + (size_t)i0 * rs + rb, a);
        }
    }
}

/* Float K or V rows (f32 or bf16, dim elements apart) into dst [IG_AT_KC][dim] as f32, rows past n zero. */
IG_INLINE void ig_attn_tile_rows(float *IG_RESTRICT dst, const void *src, int kvbf16, int dim, int n) {
    for (int j = 0; j < n; j++) {
        float *o = dst + (size_t)j * dim;
        if (kvbf16) {
            const uint16_t *h = (const uint16_t *)src + (size_t)j * dim;
            for (int i = 0; i < dim; i++) o[i] = ig_bf16_to_f32(h[i]);
        } else memcpy(o, (const float *)src + (size_t)j * dim, sizeof(float) * (size_t)dim);
    }
    memset(dst + (size_t)n * dim, 0, sizeof(float) * (size_t)(IG_AT_KC - n) * dim);
}

/* Scores of keys past a row's position (or before its window, w > 0) to -inf: key kb + j against
 * row r's position pr[r]. */
IG_INLINE void ig_attn_tile_mask(int rp, int rs, int nk, int kb, int w, const int *pr, float *s) {
    for (int j = 0; j < nk; j++)
        for (int r = 0; r < rp; r++)
            if (kb + j > pr[r] || (w > 0 && kb + j <= pr[r] - w)) s[(size_t)j * rs + r] = -INFINITY;
}

#if defined(IG_AVX512BF16)
/* bf16 tiles (bf16 KV on AVX-512 BF16): the same steps with vdpbf16ps, two products a lane per
 * instruction. Queries and probabilities are rounded to bf16 pairs, as the K / V they meet
 * (sums stay f32): qp[i/2][r] = (q[r][i], q[r][i+1]), pp[j/2][r] = (p[j][r], p[j+1][r]),
 * vp[j/2][i] = (V[j][i], V[j+1][i]), low half first. */
IG_INLINE __m512bh ig_attn_bcast_pair(const uint16_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

/* two vectors of probabilities as one vector of bf16 pairs (lo, hi): vcvtne2ps2bf16 (round to
 * nearest even; it flushes denormals, which for probabilities only drops weights below 1.2e-38)
 * and one word permute that interleaves the halves */
IG_INLINE __m512i ig_attn_pair16(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                         20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* s[j][r] for nb (1 or 2, a constant where inlined) row blocks of 16 from rb: 8 keys a pass, so a
 * K pair's broadcast serves every block (2 x 8 accumulators). */
IG_INLINE void ig_attn_tile_scores_bf16_nb(int nb, int dim, int rb, int rs, const uint32_t *IG_RESTRICT qp,
                                           const uint16_t *IG_RESTRICT k, float *IG_RESTRICT s) {
    for (int j0 = 0; j0 < IG_AT_KC; j0 += 8) {
        __m512 a[2][8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) a[0][j] = a[1][j] = _mm512_setzero_ps();
        for (int i2 = 0; i2 < dim / 2; i2++) {
            __m512bh q[2];
            for (int b = 0; b < nb; b++) q[b] = (__m512bh)_mm512_loadu_si512((const void *)(qp + (size_t)i2 * rs + rb + 16 * b));
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                const __m512bh kb = ig_attn_bcast_pair(k + (size_t)(j0 + j) * dim + 2 * i2);
                for (int b = 0; b < nb; b++) a[b][j] = _mm512_dpbf16_ps(a[b][j], q[b], kb);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            for (int b = 0; b < nb; b++) _mm512_storeu_ps(s + (size_t)(j0 + j) * rs + rb + 16 * b, a[b][j]);
    }
}

/* s[j][r] = sum_i q[r][i] k[j][i] for the IG_AT_KC bf16 K rows at k (dim apart), r < rp: two row
 * blocks a pass, a last odd one alone. */
IG_INLINE void ig_attn_tile_scores_bf16(int dim, int rp, int rs, const uint32_t *IG_RESTRICT qp,
                                        const uint16_t *IG_RESTRICT k, float *IG_RESTRICT s) {
    int rb = 0;
    for (; rb + 32 <= rp; rb += 32) ig_attn_tile_scores_bf16_nb(2, dim, rb, rs, qp, k, s);
    if (rb < rp) ig_attn_tile_scores_bf16_nb(1, dim, rb, rs, qp, k, s);
}

/* pp[j/2][r] from the probabilities p[j][r] (j < nk; an odd nk pairs its last with 0), r < rp. */
IG_INLINE void ig_attn_tile_ppairs(int rp, int rs, int nk, const float *IG_RESTRICT p, uint32_t *IG_RESTRICT pp) {
    for (int j = 0; j < nk; j += 2)
        for (int rb = 0; rb < rp; rb += 16) {
            const __m512 hi = j + 1 < nk ? _mm512_loadu_ps(p + (size_t)(j + 1) * rs + rb) : _mm512_setzero_ps();
            _mm512_storeu_si512((void *)(pp + (size_t)(j / 2) * rs + rb), ig_attn_pair16(_mm512_loadu_ps(p + (size_t)j * rs + rb), hi));
        }
}

/* vp[j/2][i] from nk bf16 V rows at v (dim apart); an odd nk pairs its last row with 0. */
IG_INLINE void ig_attn_tile_vpairs(int dim, int nk, const uint16_t *IG_RESTRICT v, uint32_t *IG_RESTRICT vp) {
    for (int j = 0; j < nk; j += 2) {
        const uint16_t *a = v + (size_t)j * dim, *b = j + 1 < nk ? a + dim : NULL;
        uint32_t *o = vp + (size_t)(j / 2) * dim;
        int i = 0;
        for (; i + 16 <= dim; i += 16) {
            const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(a + i)));
            const __m512i hi = b ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + i))) : _mm512_setzero_si512();
            _mm512_storeu_si512((void *)(o + i), _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
        for (; i < dim; i++) o[i] = (uint32_t)a[i] | (b ? (uint32_t)b[i] << 16 : 0u);
    }
}

/* at[i][r] = at[i][r] cr[r] + sum_j p[j][r] v[j][i] over np pairs of keys for nb (1 or 2, a
 * constant where inlined) row blocks of 16 from rb (dim a multiple of 8): a V pair's broadcast
 * serves every block. */
IG_INLINE void ig_attn_tile_pv_bf16_nb(int nb, int dim, int rb, int rs, int np, const uint32_t *IG_RESTRICT pp,
                                       const uint32_t *IG_RESTRICT vp, const float *IG_RESTRICT cr, float *IG_RESTRICT at) {
    enum { DB = 8 };
    __m512 c[2];
    for (int b = 0; b < nb; b++) c[b] = _mm512_loadu_ps(cr + rb + 16 * b);
    for (int i0 = 0; i0 < dim; i0 += DB) {
        __m512 a[2][DB];
#pragma GCC unroll 8
        for (int e = 0; e < DB; e++)
            for (int b = 0; b < nb; b++) a[b][e] = _mm512_mul_ps(_mm512_loadu_ps(at + (size_t)(i0 + e) * rs + rb + 16 * b), c[b]);
        for (int j2 = 0; j2 < np; j2++) {
            __m512bh p[2];
            for (int b = 0; b < nb; b++) p[b] = (__m512bh)_mm512_loadu_si512((const void *)(pp + (size_t)j2 * rs + rb + 16 * b));
            const uint32_t *vr = vp + (size_t)j2 * dim + i0;
#pragma GCC unroll 8
            for (int e = 0; e < DB; e++) {
                const __m512bh v = (__m512bh)_mm512_set1_epi32((int)vr[e]);
                for (int b = 0; b < nb; b++) a[b][e] = _mm512_dpbf16_ps(a[b][e], p[b], v);
            }
        }
#pragma GCC unroll 8
        for (int e = 0; e < DB; e++)
            for (int b = 0; b < nb; b++) _mm512_storeu_ps(at + (size_t)(i0 + e) * rs + rb + 16 * b, a[b][e]);
    }
}

/* at[i][r] = at[i][r] cr[r] + sum_j p[j][r] v[j][i] over np pairs of keys, r < rp: two row blocks
 * a pass, a last odd one alone. */
IG_INLINE void ig_attn_tile_pv_bf16(int dim, int rp, int rs, int np, const uint32_t *IG_RESTRICT pp,
                                    const uint32_t *IG_RESTRICT vp, const float *IG_RESTRICT cr, float *IG_RESTRICT at) {
    int rb = 0;
    for (; rb + 32 <= rp; rb += 32) ig_attn_tile_pv_bf16_nb(2, dim, rb, rs, np, pp, vp, cr, at);
    if (rb < rp) ig_attn_tile_pv_bf16_nb(1, dim, rb, rs, np, pp, vp, cr, at);
}

/* int8 KV rows (kv_quant.h: row j is sc_j c_j + zb_j, zb_j = -sc_j z_j) for the bf16 tiles: the
 * codes c (0..255, exact in bf16) of nk rows at `codes` (dim apart) into o [IG_AT_KC][dim] (zero
 * rows past nk), the rows' scales and biases into sc, zb (0 past nk). */
IG_INLINE void ig_attn_tile_codes16(int dim, int nk, const uint8_t *IG_RESTRICT codes, const uint16_t *IG_RESTRICT scales,
                                    const uint8_t *IG_RESTRICT zeros, uint16_t *IG_RESTRICT o, float *IG_RESTRICT sc,
                                    float *IG_RESTRICT zb) {
    for (int j = 0; j < IG_AT_KC; j++) {
        sc[j] = j < nk ? ig_f16_to_f32(scales[j]) : 0.0f;
        zb[j] = j < nk ? -sc[j] * (float)zeros[j] : 0.0f;
        uint16_t *r = o + (size_t)j * dim;
        int i = 0;
        if (j < nk)
            for (; i + 16 <= dim; i += 16) /* bf16(c) = the high half of float(c) */
                _mm256_storeu_si256((__m256i *)(r + i),
                                    _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(
                                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(codes + (size_t)j * dim + i))))), 16)));
        for (; i < dim; i++) r[i] = j < nk ? ig_f32_to_bf16((float)codes[(size_t)j * dim + i]) : 0;
    }
}
#endif
#endif /* IG_ATTN_HELPERS */

#define AT_CAT2_(a, b) a##b
#define AT_CAT_(a, b) AT_CAT2_(a, b)
#define AT_FN_(suffix) AT_CAT_(AT_NAME, suffix)
/* prefill tiles on bf16 dot products: bf16 KV on AVX-512 BF16 */
#if defined(IG_AVX512BF16) && AT_KVBF16 && !AT_KVQ && AT_D % 8 == 0
#define AT_TBF_ 1
#else
#define AT_TBF_ 0
#endif
/* ... and int8 KV in bf16-activation packages on AVX-512 BF16: the codes as bf16 (exact), each
 * key's scale and zero point applied to its scores, each value row's to the probabilities */
#if defined(IG_AVX512BF16) && AT_KVQ == 8 && AT_OBF16 && AT_D % 8 == 0
#define AT_TQ8_ 1
#else
#define AT_TQ8_ 0
#endif
/* the decode path prefetches the page this many pages ahead */
#define AT_PF_ 2
/* int8 / uint4 KV decode on int16 codes (ig_attn_scores_q16, ig_attn_pv_q16 where AT_D % 32 == 0) */
#if (defined(IG_AVX512) || defined(IG_AVX2)) && (AT_KVQ == 8 || AT_KVQ == 4) && AT_D % 4 == 0
#define AT_Q16_ 1
#else
#define AT_Q16_ 0
#endif
/* ... and ig_attn_pv_q16 for the values (whole vectors of dimensions) */
#if AT_Q16_ && AT_D % (defined(IG_AVX512) ? 32 : 16) == 0
#define AT_Q16V_ 1
#else
#define AT_Q16V_ 0
#endif
/* rows of a prefill tile (tokens x the group's heads), the stride of its [.][row] arrays */
#define AT_TR_ (AT_D <= 128 ? 64 : 32)
/* tokens of a prefill tile: 1 (no tiles) when a group has more heads than half a tile's rows */
#define AT_QB_ (AT_TILES && 2 * (AT_H / AT_KV) <= AT_TR_ ? IG_MIN(32, AT_TR_ / (AT_H / AT_KV)) : 1)

/* Prefetch kv head kh's K and V rows (and for quantized KV their scales and zero points) of the
 * page at `base`: the pages of a context lie anywhere in the pool, so the hardware prefetcher
 * cannot run ahead across them. Always inlined: as a plain static inline function GCC 12 found
 * it free of side effects and deleted its calls (the int8 decode path had no prefetch at all). */
IG_INLINE void AT_FN_(_prefetch)(const uint8_t *base, int kh) {
    enum { RB_ = AT_KVQ ? AT_D * IG_KVQ_BITS(AT_KVQ) / 8 : AT_D * (AT_KVBF16 ? 2 : 4), N_ = AT_KV * AT_PS };
    for (int kv01 = 0; AT_KVQ && kv01 < 2; kv01++) { /* scales and zero points first */
        __builtin_prefetch(base + (size_t)2 * N_ * RB_ + 2 * ((size_t)kv01 * N_ + (size_t)kh * AT_PS));
        __builtin_prefetch(base + (size_t)2 * N_ * RB_ + 4 * N_ + (size_t)kv01 * N_ + (size_t)kh * AT_PS);
    }
    for (int kv01 = 0; kv01 < 2; kv01++) {
        const uint8_t *r = base + ((size_t)kv01 * N_ + (size_t)kh * AT_PS) * RB_;
        for (int o = 0; o < AT_PS * RB_; o += 64) __builtin_prefetch(r + o);
    }
}

/* One decode token's G queries, scaled, in the forms the score kernels take: f32 rows and their
 * sums, and for the integer kernels int16 codes (ig_attn_q16). */
typedef struct {
    IG_ALIGN64 float qs[AT_H / AT_KV * AT_D];
    float qsum[AT_H / AT_KV];
#if AT_Q16_
    int32_t qp[AT_H / AT_KV * AT_D / 2];
    float qx[AT_H / AT_KV], qn[AT_H / AT_KV];
#endif
} AT_FN_(_q);

/* sc[g][j] (rows AT_PS apart) = the scores of keys j0 .. j0+n-1 of page `base`, kv head kh; kt:
 * scratch for 16 dequantized rows. */
static inline void AT_FN_(_scores)(const AT_FN_(_q) *tq, const uint8_t *base, int kh, int j0, int n, float *sc,
                                   float *kt) {
    enum { G_ = AT_H / AT_KV, ES_ = AT_KVBF16 ? 2 : 4 };
#if AT_Q16_
    /* integer dot products; 4-bit codes widened to bytes 16 rows at a time, and as 4-bit keys are
     * delta-coded from the page's slot 0 (kv_quant.h: K^_j = a_j K^_{j-1} + delta_j),
     * q . K^_j = a_j q . K^_{j-1} + q . delta_j: a running sum of the rows' scores from slot 0 (the
     * zero bytes' predictor bits masked off for the dot products) */
    const int d4 = AT_KVQ == 4, from = d4 ? 0 : j0;
    const uint8_t *kc, *kz;
    const uint16_t *ks;
    ig_kvq_rows(base, AT_KV, AT_PS, AT_D, AT_KVQ, 0, kh, from, &kc, &ks, &kz);
    IG_ALIGN64 uint8_t cb[AT_KVQ == 4 ? 16 * AT_D : 1];
    IG_ALIGN64 float st[AT_KVQ == 4 ? G_ * 16 : 1];
    float run[G_] = {0};
    for (int jc = 0; jc < j0 + n - from; jc += 16) {
        const int nc = IG_MIN(16, j0 + n - from - jc);
        const uint8_t *c = d4 ? cb : kc + (size_t)jc * AT_D;
        uint8_t zq[16];
        float pa[16];
        if (d4) {
            ig_attn_widen4(kc + (size_t)jc * AT_D / 2, nc, AT_D, cb);
            for (int j = 0; j < nc; j++) zq[j] = kz[jc + j] & 15, pa[j] = IG_KVQ_PRED(kz[jc + j] >> 4);
        }
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_scores_q16(IG_MIN(16, G_ - g0), AT_D, d4 ? 16 : AT_PS, tq->qp + g0 * (AT_D / 2), tq->qx + g0,
                               tq->qn + g0, c, ks + jc, d4 ? zq : kz + jc, nc, d4 ? st + g0 * 16 : sc + g0 * AT_PS + jc);
        for (int g = 0; d4 && g < G_; g++) {
            float r = run[g];
            for (int j = 0; j < nc; j++) {
                r = fmaf(pa[j], r, st[g * 16 + j]);
                if (jc + j >= j0) sc[g * AT_PS + jc + j - j0] = r;
            }
            run[g] = r;
        }
    }
    (void)kt;
#else
    if (AT_KVQ == 8) { /* codes read in registers (ig_attn_scores_q8) */
        const uint8_t *kc, *kz;
        const uint16_t *ks;
        ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 0, kh, j0, &kc, &ks, &kz);
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_scores_q8(IG_MIN(16, G_ - g0), AT_D, AT_PS, tq->qs + g0 * AT_D, tq->qsum + g0, kc, ks, kz, n,
                              sc + g0 * AT_PS);
    } else if (AT_KVQ) { /* 16 keys at a time: dequantized into kt, then the f32 path */
        IG_ALIGN64 float kp[AT_KVQ ? AT_D : 1]; /* delta-coded keys: the previous row */
        if (j0 > 0) ig_kvq_key_before(base, AT_KV, AT_PS, AT_D, AT_KVQ, kh, j0, kt, kp);
        for (int jc = 0; jc < n; jc += 16) {
            int nc = IG_MIN(16, n - jc);
            ig_kvq_load(base, AT_KV, AT_PS, AT_D, AT_KVQ, 0, kh, j0 + jc, nc, kt, kp);
            for (int g0 = 0; g0 < G_; g0 += 16)
                ig_attn_scores(IG_MIN(16, G_ - g0), AT_D, AT_PS, 0, tq->qs + g0 * AT_D, kt, nc, sc + g0 * AT_PS + jc);
        }
    } else {
        /* the SIMD helpers keep up to 16 heads in registers: larger groups go in chunks */
        const uint8_t *K = base + ((size_t)kh * AT_PS + j0) * AT_D * ES_;
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_scores(IG_MIN(16, G_ - g0), AT_D, AT_PS, AT_KVBF16, tq->qs + g0 * AT_D, K, n, sc + g0 * AT_PS);
    }
#endif
}

/* acc[g] += sum_j p[g][j] V_j over keys j0 .. j0+n-1 of page `base`, kv head kh (p rows AT_PS
 * apart); kt: scratch for 16 dequantized rows. */
static inline void AT_FN_(_values)(const uint8_t *base, int kh, int j0, int n, const float *p, float *acc, float *kt) {
    enum { G_ = AT_H / AT_KV, ES_ = AT_KVBF16 ? 2 : 4 };
#if AT_Q16V_
    const uint8_t *vc, *vz;
    const uint16_t *vs;
    ig_kvq_rows(base, AT_KV, AT_PS, AT_D, AT_KVQ, 1, kh, j0, &vc, &vs, &vz);
    IG_ALIGN64 uint8_t cb[AT_KVQ == 4 ? 16 * AT_D : 1];
    for (int jc = 0; jc < n; jc += 16) {
        const int nc = IG_MIN(16, n - jc);
        const uint8_t *c = AT_KVQ == 4 ? cb : vc + (size_t)jc * AT_D;
        if (AT_KVQ == 4) ig_attn_widen4(vc + (size_t)jc * AT_D / 2, nc, AT_D, cb);
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_pv_q16(IG_MIN(16, G_ - g0), AT_D, AT_PS, p + g0 * AT_PS + jc, c, vs + jc, vz + jc, nc, acc + g0 * AT_D);
    }
    (void)kt;
#else
    if (AT_KVQ == 8) {
        const uint8_t *vc, *vz;
        const uint16_t *vs;
        ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 1, kh, j0, &vc, &vs, &vz);
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_pv_q8(IG_MIN(16, G_ - g0), AT_D, AT_PS, p + g0 * AT_PS, vc, vs, vz, n, acc + g0 * AT_D);
    } else if (AT_KVQ) {
        for (int jc = 0; jc < n; jc += 16) {
            int nc = IG_MIN(16, n - jc);
            ig_kvq_load(base, AT_KV, AT_PS, AT_D, AT_KVQ, 1, kh, j0 + jc, nc, kt, NULL);
            for (int g0 = 0; g0 < G_; g0 += 16)
                ig_attn_pv(IG_MIN(16, G_ - g0), AT_D, AT_PS, 0, p + g0 * AT_PS + jc, kt, nc, acc + g0 * AT_D);
        }
    } else {
        const uint8_t *V = base + ((size_t)AT_KV * AT_PS * AT_D + ((size_t)kh * AT_PS + j0) * AT_D) * ES_;
        for (int g0 = 0; g0 < G_; g0 += 16)
            ig_attn_pv(IG_MIN(16, G_ - g0), AT_D, AT_PS, AT_KVBF16, p + g0 * AT_PS, V, n, acc + g0 * AT_D);
    }
#endif
}

/* Token t, kv head kh: the decode path (one token's G heads against its context, page by page). */
static void AT_FN_(_token)(int t, int kh, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
                           const int32_t *positions, const int32_t *pt, void *out) {
    enum { G_ = AT_H / AT_KV };
    int pos = positions[t];
    IG_ALIGN64 float acc[G_ * AT_D], sc[G_ * AT_PS], kt[AT_KVQ ? 16 * AT_D : 1];
    float m[G_], l[G_];
    AT_FN_(_q) tq;
    for (int g = 0; g < G_; g++) {
        const float *qh = q + (size_t)t * AT_H * AT_D + (size_t)(kh * G_ + g) * AT_D;
        tq.qsum[g] = 0.0f; /* read by the f32 int8 dots only (ig_attn_scores_q8) */
        for (int i = 0; i < AT_D; i++) tq.qs[g * AT_D + i] = qh[i] * AT_SCALE;
        for (int i = 0; AT_KVQ == 8 && !AT_Q16_ && i < AT_D; i++) tq.qsum[g] += tq.qs[g * AT_D + i];
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }
    memset(acc, 0, sizeof acc);
#if AT_Q16_
    ig_attn_q16(G_, AT_D, tq.qs, tq.qp, tq.qx, tq.qn);
#endif
    const int lo = AT_WINDOW > 0 && pos >= AT_WINDOW ? pos - AT_WINDOW + 1 : 0; /* first key */
    for (int pi = lo / AT_PS; pi <= pos / AT_PS; pi++) {
        int j0 = pi == lo / AT_PS ? lo % AT_PS : 0; /* keys before the window in its first page */
        int n = IG_MIN(AT_PS, pos + 1 - pi * AT_PS) - j0;
        const uint8_t *base = kv_pool + (uint64_t)pt[pi] * AT_PAGE_BYTES + layer_off;
        if (pi + AT_PF_ <= pos / AT_PS) AT_FN_(_prefetch)(kv_pool + (uint64_t)pt[pi + AT_PF_] * AT_PAGE_BYTES + layer_off, kh);
        AT_FN_(_scores)(&tq, base, kh, j0, n, sc, kt);
        for (int g = 0; g < G_; g++) {
            const float mn = IG_MAX(m[g], ig_max_row(sc + g * AT_PS, n));
            const float corr = mn == m[g] ? 1.0f : m[g] == -INFINITY ? 0.0f : expf(m[g] - mn);
            l[g] = l[g] * corr + ig_exp_row(sc + g * AT_PS, mn, n);
            if (corr != 1.0f) ig_scale(acc + g * AT_D, corr, AT_D);
            m[g] = mn;
        }
        AT_FN_(_values)(base, kh, j0, n, sc, acc, kt);
    }
    for (int g = 0; g < G_; g++) {
        ig_scale(acc + g * AT_D, 1.0f / l[g], AT_D);
        if (AT_KVQ) ig_kvq_unrotate(acc + g * AT_D, AT_D); /* values are stored rotated (kv_quant.h) */
        size_t o = (size_t)t * AT_H * AT_D + (size_t)(kh * G_ + g) * AT_D;
        ig_store_row((char *)out + o * (AT_OBF16 ? 2 : 4), acc + g * AT_D, AT_OBF16, AT_D);
    }
}

/* K (kv01 0) or V rows jc .. jc+nk-1 of page `base`, kv head kh, as f32 into dst [IG_AT_KC][AT_D]
 * (zero rows past nk); kp: delta-coded keys' previous row (kv_quant.h). */
static inline void AT_FN_(_chunk)(float *dst, const uint8_t *base, int kv01, int kh, int jc, int nk, float *kp) {
    if (AT_KVQ) {
        ig_kvq_load(base, AT_KV, AT_PS, AT_D, AT_KVQ, kv01, kh, jc, nk, dst, kp);
        memset(dst + (size_t)nk * AT_D, 0, sizeof(float) * (size_t)(IG_AT_KC - nk) * AT_D);
    } else {
        const size_t es = AT_KVBF16 ? 2 : 4, row = ((size_t)kv01 * AT_KV * AT_PS + (size_t)kh * AT_PS + jc) * AT_D;
        ig_attn_tile_rows(dst, base + row * es, AT_KVBF16, AT_D, nk);
    }
}

#if AT_TQ8_
/* int8 keys jc .. jc+nk-1 of page `base`, kv head kh, against the tile's bf16 queries qp:
 * s[j][r] = sc_j (q~_r . c_j) + zb_j sum(q~_r), q~ the bf16-rounded query (qs its sums), which
 * is q~ . K_j as the f32 tiles would make it from the same rounded query. */
static inline void AT_FN_(_tq8_scores)(const uint8_t *base, int kh, int jc, int nk, int rp, const uint32_t *qp,
                                       const float *qs, uint16_t *kb16, float *sc, float *zb, float *s) {
    const uint8_t *codes, *zeros;
    const uint16_t *scales;
    ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 0, kh, jc, &codes, &scales, &zeros);
    ig_attn_tile_codes16(AT_D, nk, codes, scales, zeros, kb16, sc, zb);
    ig_attn_tile_scores_bf16(AT_D, rp, AT_TR_, qp, kb16, s);
    for (int j = 0; j < nk; j++)
        for (int r = 0; r < rp; r++) s[j * AT_TR_ + r] = s[j * AT_TR_ + r] * sc[j] + zb[j] * qs[r];
}

/* at[d][r] = at[d][r] cr[r] + sum_j p[j][r] V[j][d] for int8 values V_j = sc_j c_j + zb_j: the
 * probabilities times sc_j against the codes in bf16, then sum_j p[j][r] zb_j added to the row
 * (s holds p and is scaled in place). */
static inline void AT_FN_(_tq8_values)(const uint8_t *base, int kh, int jc, int nk, int rp, float *s, uint32_t *pp,
                                       uint32_t *vp, uint16_t *kb16, float *sc, float *zb, float *bt, const float *cr,
                                       float *at) {
    const uint8_t *codes, *zeros;
    const uint16_t *scales;
    ig_kvq_rows(base, AT_KV, AT_PS, AT_D, 8, 1, kh, jc, &codes, &scales, &zeros);
    ig_attn_tile_codes16(AT_D, nk, codes, scales, zeros, kb16, sc, zb);
    for (int r = 0; r < rp; r++) bt[r] = 0.0f;
    for (int j = 0; j < nk; j++)
        for (int r = 0; r < rp; r++) {
            bt[r] += s[j * AT_TR_ + r] * zb[j];
            s[j * AT_TR_ + r] *= sc[j];
        }
    ig_attn_tile_ppairs(rp, AT_TR_, nk, s, pp);
    ig_attn_tile_vpairs(AT_D, nk, kb16, vp);
    ig_attn_tile_pv_bf16(AT_D, rp, AT_TR_, (nk + 1) / 2, pp, vp, cr, at);
    for (int d = 0; d < AT_D; d++)
        for (int r = 0; r < rp; r++) at[d * AT_TR_ + r] += bt[r];
}
#endif

/* Tokens t0 .. t0+n-1 (2 <= n <= AT_QB_; one sequence, consecutive positions), kv head kh: the
 * prefill tile. Each K/V chunk is made f32 once for the n tokens' G heads (ig_attn_tile_*). */
static void AT_FN_(_tile)(int t0, int n, int kh, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
                          const int32_t *positions, const int32_t *pt, void *out) {
    enum { G_ = AT_H / AT_KV, RS_ = AT_TR_ };
    IG_ALIGN64 float qt[AT_D * RS_], at[AT_D * RS_], s[IG_AT_KC * RS_], kf[AT_TBF_ || AT_TQ8_ ? 1 : IG_AT_KC * AT_D];
#if !AT_TBF_ && !AT_TQ8_
    IG_ALIGN64 float vf[IG_AT_KC * AT_D];
#endif
    IG_ALIGN64 float m[RS_], l[RS_], cr[RS_], row[AT_D], kp[AT_D];
    int pr[RS_];
#if AT_TBF_ || AT_TQ8_
    IG_ALIGN64 uint32_t qp[AT_D / 2 * RS_], pp[IG_AT_KC / 2 * RS_], vp[IG_AT_KC / 2 * AT_D];
    IG_ALIGN64 uint16_t kb16[IG_AT_KC * AT_D];
#endif
#if AT_TQ8_
    IG_ALIGN64 float qs[RS_], bt[RS_], sc[IG_AT_KC], zb[IG_AT_KC]; /* sums of the rounded queries, value biases */
#endif
    const int R = n * G_, rp = (R + IG_ATV_W - 1) / IG_ATV_W * IG_ATV_W, p0 = positions[t0], pl = p0 + n - 1;
    for (int r = 0; r < rp; r++) { /* rows past R: zero queries, ignored */
        const int i = r < R ? r / G_ : n - 1;
        const float *qh = q + ((size_t)(t0 + i) * AT_H + (size_t)kh * G_ + r % G_) * AT_D;
        for (int d = 0; d < AT_D; d++) qt[d * RS_ + r] = r < R ? qh[d] * AT_SCALE : 0.0f;
        pr[r] = p0 + i, m[r] = -1e30f, l[r] = 0.0f;
    }
#if AT_TQ8_
    for (int r = 0; r < rp; r++) qs[r] = 0.0f;
#endif
#if AT_TBF_ || AT_TQ8_
    for (int d = 0; d < AT_D; d += 2)
        for (int r = 0; r < rp; r++) {
            const uint16_t lo = ig_f32_to_bf16(qt[d * RS_ + r]), hi = ig_f32_to_bf16(qt[(d + 1) * RS_ + r]);
            qp[d / 2 * RS_ + r] = (uint32_t)lo | (uint32_t)hi << 16;
#if AT_TQ8_
            qs[r] += ig_bf16_to_f32(lo) + ig_bf16_to_f32(hi); /* the rounded query's sum */
#endif
        }
#endif
    memset(at, 0, sizeof at);
    const int lo = AT_WINDOW > 0 && p0 >= AT_WINDOW ? p0 - AT_WINDOW + 1 : 0; /* the first row's first key */
    for (int pi = lo / AT_PS; pi <= pl / AT_PS; pi++) {
        const uint8_t *base = kv_pool + (uint64_t)pt[pi] * AT_PAGE_BYTES + layer_off;
        const int js0 = pi == lo / AT_PS ? lo % AT_PS : 0, js1 = IG_MIN(AT_PS, pl + 1 - pi * AT_PS);
        if (AT_KVQ && IG_KVQ_KDELTA(AT_KVQ) && js0 > 0) ig_kvq_key_before(base, AT_KV, AT_PS, AT_D, AT_KVQ, kh, js0, kf, kp);
        for (int jc = js0; jc < js1; jc += IG_AT_KC) {
            const int nk = IG_MIN(IG_AT_KC, js1 - jc), kb = pi * AT_PS + jc;
#if AT_TBF_
            const uint16_t *K = (const uint16_t *)base + ((size_t)kh * AT_PS + jc) * AT_D, *V = K + (size_t)AT_KV * AT_PS * AT_D;
            if (jc + IG_AT_KC > AT_PS) { /* the rows past the chunk would leave the head's rows: a zeroed copy */
                memset(kb16, 0, sizeof kb16);
                memcpy(kb16, K, sizeof(uint16_t) * (size_t)nk * AT_D);
                K = kb16;
            }
            ig_attn_tile_scores_bf16(AT_D, rp, RS_, qp, K, s);
#elif AT_TQ8_
            AT_FN_(_tq8_scores)(base, kh, jc, nk, rp, qp, qs, kb16, sc, zb, s);
#else
            AT_FN_(_chunk)(kf, base, 0, kh, jc, nk, kp);
            ig_attn_tile_scores(AT_D, rp, RS_, qt, kf, s);
#endif
            if (kb + nk - 1 > p0 || (AT_WINDOW > 0 && kb <= pl - AT_WINDOW)) ig_attn_tile_mask(rp, RS_, nk, kb, AT_WINDOW, pr, s);
            ig_attn_tile_softmax(rp, RS_, nk, s, m, l, cr);
#if AT_TBF_
            ig_attn_tile_ppairs(rp, RS_, nk, s, pp);
            ig_attn_tile_vpairs(AT_D, nk, V, vp);
            ig_attn_tile_pv_bf16(AT_D, rp, RS_, (nk + 1) / 2, pp, vp, cr, at);
#elif AT_TQ8_
            AT_FN_(_tq8_values)(base, kh, jc, nk, rp, s, pp, vp, kb16, sc, zb, bt, cr, at);
#else
            AT_FN_(_chunk)(vf, base, 1, kh, jc, nk, NULL);
            ig_attn_tile_pv(AT_D, rp, RS_, nk, s, vf, cr, at);
#endif
        }
    }
    for (int r = 0; r < R; r++) {
        const float inv = 1.0f / l[r];
        for (int d = 0; d < AT_D; d++) row[d] = at[d * RS_ + r] * inv;
        if (AT_KVQ) ig_kvq_unrotate(row, AT_D); /* values are stored rotated (kv_quant.h) */
        const size_t o = (size_t)(t0 + r / G_) * AT_H * AT_D + (size_t)(kh * G_ + r % G_) * AT_D;
        ig_store_row((char *)out + o * (AT_OBF16 ? 2 : 4), row, AT_OBF16, AT_D);
    }
}

/* Work items: (tile, kv head), a tile being a run of up to AT_QB_ consecutive tokens of one
 * sequence (prefill chunks) or a lone token (decode); heaviest (latest) tiles first. */
static void AT_NAME(int T, const float *q, const uint8_t *kv_pool, uint64_t layer_off,
                    const int32_t *positions, const int32_t *token_seq,
                    const int32_t *page_table, int max_pages, void *out, float *scratch, int nth) {
    _Static_assert(AT_H % AT_KV == 0, "AT_H must be a multiple of AT_KV");
    (void)scratch;
    int *ts = AT_QB_ > 1 && T > 1 ? (int *)malloc(sizeof(int) * ((size_t)T + 1)) : NULL, nt = 0;
    for (int t = 0; t < T; t++)
        if (!ts || t == 0 || token_seq[t] != token_seq[t - 1] || positions[t] != positions[t - 1] + 1 ||
            t - ts[nt - 1] == AT_QB_) {
            if (ts) ts[nt] = t;
            nt++;
        }
    if (ts) ts[nt] = T;
    const int n_items = nt * AT_KV;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1) if (n_items > 1)
    for (int it = 0; it < n_items; it++) {
        const int ti = nt - 1 - it / AT_KV, kh = it % AT_KV, t0 = ts ? ts[ti] : ti, n = ts ? ts[ti + 1] - t0 : 1;
        const int32_t *pt = page_table + (size_t)token_seq[t0] * max_pages;
        if (n == 1) AT_FN_(_token)(t0, kh, q, kv_pool, layer_off, positions, pt, out);
        else AT_FN_(_tile)(t0, n, kh, q, kv_pool, layer_off, positions, pt, out);
    }
    free(ts);
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
#undef AT_TILES
#undef AT_CAT2_
#undef AT_CAT_
#undef AT_FN_
#undef AT_TR_
#undef AT_QB_
#undef AT_TBF_
#undef AT_TQ8_
#undef AT_Q16_
#undef AT_Q16V_
#undef AT_PF_
