/* kv_quant.h — quantized KV cache rows (8 or 4 bits) for rope_kv.c (write) and attention.c (read).
 *
 * A key or value row of D elements of one token and KV head is stored asymmetrically: codes
 * q in 0..QMAX (QMAX = 255 for 8 bits, 15 for 4 bits; 4-bit codes two per byte, element 2i in
 * the low nibble), an f16 scale s and an 8-bit zero point z, so x ~ s * (q - z). The range
 * [min(x, 0), max(x, 0)] is mapped onto 0..QMAX (0 is always exact); the scale is rounded up to
 * f16 before the codes are made, so the stored scale is the one the codes were made with.
 *
 * Before quantization each key and value row is rotated by an orthonormal R (random signs, then
 * a Hadamard transform; ig_kvq_rotate), which spreads the few large channels of keys over all of
 * them so that one scale per row fits every element. rope_kv.c rotates q the same way (q . k is
 * unchanged: R is orthonormal) and attention.c rotates its output back with R^T, so the rotation
 * is invisible outside the two kernels. On SmolLM2-135M it took the uint4 perplexity ratio from
 * 1.163 to 1.07 and int8's from 1.0035 to 1.001 (GPL-3 text, 1k tokens).
 *
 * 4-bit keys are delta-coded within a page: slot 0 holds its (rotated) key, slot j > 0 holds
 * K_j - K^_{j-1}, where K^_{j-1} is the previous slot's key as reconstructed from the page (so
 * errors do not accumulate: K^_j = K^_{j-1} + s_j (q_j - z_j)). Keys of neighbouring tokens are
 * strongly correlated and the difference has a much smaller range; on SmolLM2-135M this took the
 * uint4 ratio from 1.073 to 1.011 at no extra bytes (slot 0 of the page as the reference for all
 * slots: 1.031; the running mean of the page's earlier slots: 1.012; delta-coded values too:
 * 1.065, so values stay absolute). That 1.011 was one 1024-token window; the ratio moves by +-0.02
 * with anything that flips a few codes, and over 3-4k tokens it reads 1.028 .. 1.038 (2026-12-05,
 * tests/test_kv_cache_smollm2.py). The keys carry the error: in a bf16 package with rows
 * fake-quantized (no delta coding), mean KL against bf16 KV 0.075 for 4-bit keys alone, 0.008 for
 * 4-bit values alone. A per-row clip search for the range (6 candidates 1 .. 0.75 x, least squared
 * error) took the real package's KL from 0.035 to 0.030 (noise +-0.003) but not its perplexity:
 * 1.0380 -> 1.0394 over the test's three windows (2026-12-05, AVX2); dropped. A page's slot 0 is
 * the one key stored absolute in 4 bits, so longer pages have fewer of them: uint4 packages default
 * to pages of 64 tokens (compiler/driver.c; `--page-size` still sets any). SmolLM2, bf16 weights,
 * 3072 tokens in 1024-token windows, ratio against bf16 KV, pages of 16 / 64 / 256: GPL-3 1.0380 /
 * 1.0268 / 1.0297, GPL-2 1.0246 / 1.0258, Apache-2.0 (2212 tokens) 1.0422 / 1.0355; mean of the
 * three 1.0349 / 1.0294 (2026-12-05, Zen 2). Where that 1.029 comes from (same texts, an int8
 * package whose values or keys were written on the 4-bit grid, codes 17 q4: a measurement hack, not
 * kept): GPL-3 / GPL-2 / Apache-2.0, int8 1.0003 / 0.9989 / 1.0012, 4-bit values with 8-bit keys
 * 1.0044 / 1.0133 / 1.0031, 4-bit keys absolute (no delta) with 8-bit values 1.072 / 1.068 / 1.092,
 * uint4 as stored 1.0268 / 1.0258 / 1.0355: the delta-coded keys still carry about two thirds
 * (2026-12-05, Zen 2). Each delta-coded row also picks its predictor: it holds K_j - a K^_{j-1}
 * with a one of 1, 15/16, 7/8, 3/4, 5/8, 1/2, 1/4, 0 (the index in bits 4..6 of its zero byte, the
 * zero point in bits 0..3), the one whose row quantizes with the least squared error
 * (ig_kvq_store_key); readers rebuild K^_j = a K^_{j-1} + s (q - z). A key that follows its
 * neighbour loosely (a fast RoPE pair, a new word) is coded against a shrunken or no prediction
 * instead of a difference of twice the spread. SmolLM2, bf16 weights, six license texts (GPL-3,
 * GPL-2, Apache-2.0, LGPL-2.1, MPL-2.0, Artistic; 1.3k-7.6k tokens each in `ignis verify`'s default
 * 512-token windows) against bf16 KV: mean KL 0.0424 -> 0.0340 nats per token, perplexity ratio
 * 1.0313 -> 1.0235 (per text 1.0278 / 1.0405 / 1.0507 / 1.0339 / 1.0120 / 1.0227 -> 1.0233 /
 * 1.0435 / 1.0254 / 1.0201 / 1.0212 / 1.0074: the ratio of one text moves by +-0.01 with any
 * change, the KL fell on every text). Chosen by the row's range instead of its error: KL 0.0370
 * (8 predictors), 0.0376 (1, 3/4, 1/2, 0); values coded the same way (a = 0 among the choices:
 * absolute rows stay possible) moved it only to 0.0338: dropped, values stay absolute. Non-uniform
 * 4-bit levels (NF4's, symmetric on absmax: ratio 1.040 / 1.022 / 1.050 on GPL-3 / GPL-2 / Apache
 * in 1024-token windows against 1.027 / 1.026 / 1.036; NF4's levels over the row's [min, max]:
 * 1.026 / 1.024 / 1.025) were tried before the predictors and dropped. kv_quant.cuh's writers
 * choose the same way (the error summed in another order: a near tie may pick differently) and
 * its readers scan the predictors too. A row depends only on its own token and the page's
 * earlier rows, so a page's bytes do not depend on how its tokens were split into steps (chunked
 * prefill, decode, recompute after preemption) and shared prefix pages stay valid. 8-bit keys
 * and all values are stored absolute.
 *
 * Layout of one layer's part of a KV page (PS tokens, KV heads, RB = D * bits / 8 code bytes):
 *   K codes [KV][PS][RB] | V codes [KV][PS][RB] | K scales f16 [KV][PS] | V scales f16 [KV][PS]
 *   | K zeros u8 [KV][PS] | V zeros u8 [KV][PS]
 * = 2 * KV * PS * (RB + 3) bytes (IG_KVQ_LAYER_BYTES).
 *
 * fp8 (IG_KVQ_E4M3) rows use the int8 layout: one e4m3fn code a byte, scale = amax / 448 (rounded
 * up to f16), no zero point (its byte is written 0): x ~ s * e4m3(q). Rotated like the others. */
#ifndef IG_KV_QUANT_H
#define IG_KV_QUANT_H

#include "common.h"

/* A format's code: 8 (int8), 4 (uint4) or IG_KVQ_E4M3 (fp8: one e4m3 byte an element, the int8
 * layout; symmetric, scale = amax / 448, the zero point byte stays 0); IG_KVQ_BITS its code bits. */
#define IG_KVQ_E4M3 0xe4
#define IG_KVQ_BITS(q) ((q) == IG_KVQ_E4M3 ? 8 : (q))
#define IG_KVQ_LAYER_BYTES(kv, ps, d, q) ((uint64_t)2 * (kv) * (ps) * ((uint64_t)(d) * IG_KVQ_BITS(q) / 8 + 3))
/* Are keys of this code width delta-coded within a page (above)? */
#define IG_KVQ_KDELTA(bits) ((bits) == 4)
/* The predictors of a delta-coded key row (above): row j holds K_j - a K^_{j-1} with a =
 * IG_KVQ_PRED(i), i in bits 4..6 of its zero byte (bits 0..3: the zero point); i = 0 (a = 1) is
 * the plain difference. */
#define IG_KVQ_NPRED 8
#define IG_KVQ_MAXD 512 /* the longest row ig_kvq_store_key takes */
#define IG_KVQ_PRED(i) ((float)((0x0004080a0c0e0f10ULL >> (8 * ((i) & 7))) & 0xffu) * 0.0625f) /* 1, 15/16, 7/8, 3/4, 5/8, 1/2, 1/4, 0 */

/* f32 <-> IEEE half (round to nearest even; F16C where the target has it). */
IG_INLINE uint16_t ig_f32_to_f16(float f) {
#if defined(__F16C__) && (defined(IG_AVX512) || defined(IG_AVX2))
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (ax < 0x38800000u) {                                    /* subnormal half or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int sh = 126 - (int)(ax >> 23); /* 14..24 */
        uint32_t h = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((ax - 0x38000000u) >> 13), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
#endif
}

IG_INLINE float ig_f16_to_f32(uint16_t h) {
#if defined(__F16C__) && (defined(IG_AVX512) || defined(IG_AVX2))
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e + 112) << 23) | (m << 13);
    else if (!m) x = sign;
    else {
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
#endif
}

/* e4m3fn (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities, 0x7f / 0xff NaN,
 * largest 448): f32 -> code rounds to nearest even and saturates to +-448 (NaN -> 0x7f). */
IG_INLINE uint8_t ig_f32_to_e4m3(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    float a = fabsf(f);
    if (a != a) return 0x7f;
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);
    if (a < 0.015625f) return (uint8_t)(sign | (uint8_t)rintf(a * 512.0f)); /* subnormal: m 2^-9; 8 is 2^-6 */
    uint32_t u;
    memcpy(&u, &a, 4);
    u += 0x7ffffu + ((u >> 20) & 1u); /* round the 20 dropped mantissa bits to nearest even */
    return (uint8_t)(sign | ((u >> 20) - (120u << 3)));
}

IG_INLINE float ig_e4m3_to_f32(uint8_t c) {
    const uint32_t e = (c >> 3) & 15u, m = c & 7u;
    uint32_t x = e ? ((e + 120u) << 23) | (m << 20) : 0u;
    float v;
    memcpy(&v, &x, 4);
    if (!e) v = (float)m * (1.0f / 512.0f);
    if ((c & 0x7f) == 0x7f) v = NAN;
    return c & 0x80 ? -v : v;
}

/* o[i] = e4m3(c[i]) s for i < d, 16 (AVX2: 8) codes a vector: a normal code's bits shifted into
 * an f32's place with the exponent rebiased (+120), subnormals (exponent 0) as m 2^-9, the NaN
 * code 0x7f kept NaN, the sign bit moved over; the scalar ig_e4m3_to_f32 for the tail (fp8 KV
 * decode on SmolLM2 at 2k context was 10x slower than bf16 KV with the scalar conversion alone). */
IG_INLINE void ig_kvq_e4m3_row(const uint8_t *IG_RESTRICT c, int d, float s, float *IG_RESTRICT o) {
    int i = 0;
#if defined(IG_AVX512)
    const __m512i m7f = _mm512_set1_epi32(0x7f), bias = _mm512_set1_epi32(120 << 23);
    for (; i + 16 <= d; i += 16) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + i))), mag = _mm512_and_si512(x, m7f);
        __m512 v = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, 20), bias));
        v = _mm512_mask_mul_ps(v, _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8)), _mm512_cvtepi32_ps(mag),
                               _mm512_set1_ps(1.0f / 512.0f));
        v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(mag, m7f), _mm512_set1_ps(NAN));
        v = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_slli_epi32(_mm512_andnot_si512(m7f, x), 24)));
        _mm512_storeu_ps(o + i, _mm512_mul_ps(v, _mm512_set1_ps(s)));
    }
#elif defined(IG_AVX2)
    const __m256i m7f = _mm256_set1_epi32(0x7f), bias = _mm256_set1_epi32(120 << 23);
    for (; i + 8 <= d; i += 8) {
        const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i))), mag = _mm256_and_si256(x, m7f);
        __m256 v = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(mag, 20), bias));
        v = _mm256_blendv_ps(v, _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(1.0f / 512.0f)),
                             _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag)));
        v = _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, m7f)));
        v = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), _mm256_slli_epi32(_mm256_andnot_si256(m7f, x), 24)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(v, _mm256_set1_ps(s)));
    }
#endif
    for (; i < d; i++) o[i] = ig_e4m3_to_f32(c[i]) * s;
}

/* The rotation R = H S: S flips the sign of element i where bit (7 i + i / 32) mod 32 of
 * 0x6a09e667 (the first fraction bits of sqrt 2) is set, so that a row's mean does not all land
 * on one coefficient; H is the Walsh-Hadamard transform on each block of B = the largest power of
 * two dividing d, scaled by 1/sqrt(B). R is orthonormal: R^T = S H undoes it. */
#define IG_KVQ_FLIP(i) ((0x6a09e667u >> ((7 * (i) + (i) / 32) & 31)) & 1u)

IG_INLINE void ig_kvq_hadamard(float *x, int d) {
    const int B = d & -d;
    const float sc = 1.0f / sqrtf((float)B);
    for (int b0 = 0; b0 < d; b0 += B) {
        float *v = x + b0;
        for (int len = 1; len < B; len <<= 1)
            for (int i = 0; i < B; i += 2 * len)
                for (int j = i; j < i + len; j++) {
                    float a = v[j], c = v[j + len];
                    v[j] = a + c, v[j + len] = a - c;
                }
        for (int i = 0; i < B; i++) v[i] *= sc;
    }
}

IG_INLINE void ig_kvq_flip(float *x, int d) {
    for (int i = 0; i < d; i++)
        if (IG_KVQ_FLIP(i)) x[i] = -x[i];
}

/* x <- R x (before quantization, and on q) */
IG_INLINE void ig_kvq_rotate(float *x, int d) {
    ig_kvq_flip(x, d);
    ig_kvq_hadamard(x, d);
}

/* x <- R^T x (attention's output) */
IG_INLINE void ig_kvq_unrotate(float *x, int d) {
    ig_kvq_hadamard(x, d);
    ig_kvq_flip(x, d);
}

/* e4m3 row: symmetric, s = amax / 448 rounded up to f16, codes x / s, zero 0. */
IG_INLINE void ig_kvq_row_e4m3(const float *IG_RESTRICT x, int d, uint8_t *IG_RESTRICT codes, uint16_t *scale,
                               uint8_t *zero) {
    float mx = 0.0f;
    for (int i = 0; i < d; i++) mx = IG_MAX(mx, fabsf(x[i]));
    const float s = mx / 448.0f;
    uint16_t hs = ig_f32_to_f16(s);
    if (ig_f16_to_f32(hs) < s && hs < 0x7bffu) hs++; /* round the scale up: codes within +-448 */
    const float sf = ig_f16_to_f32(hs);
    *scale = hs, *zero = 0;
    const float inv = sf > 0.0f ? 1.0f / sf : 0.0f; /* an all-zero row (or NaN): codes 0 */
    for (int i = 0; i < d; i++) codes[i] = ig_f32_to_e4m3(x[i] * inv);
}

/* Quantizes row x[d] into codes (d * IG_KVQ_BITS(bits) / 8 bytes), *scale and *zero; bits is the
 * format's code (8, 4, IG_KVQ_E4M3). */
IG_INLINE void ig_kvq_row(const float *IG_RESTRICT x, int d, int bits, uint8_t *IG_RESTRICT codes,
                          uint16_t *scale, uint8_t *zero) {
    if (bits == IG_KVQ_E4M3) {
        ig_kvq_row_e4m3(x, d, codes, scale, zero);
        return;
    }
    const int qmax = bits == 8 ? 255 : 15;
    float mn = 0.0f, mx = 0.0f;
    for (int i = 0; i < d; i++) mn = IG_MIN(mn, x[i]), mx = IG_MAX(mx, x[i]);
    float s = (mx - mn) / (float)qmax;
    uint16_t hs = ig_f32_to_f16(s);
    if (ig_f16_to_f32(hs) < s && hs < 0x7bffu) hs++; /* round the scale up: codes stay in range */
    float sf = ig_f16_to_f32(hs);
    *scale = hs;
    if (!(sf > 0.0f)) { /* an all-zero row (or NaN): codes 0, zero 0 */
        memset(codes, 0, (size_t)d * bits / 8);
        *zero = 0;
        return;
    }
    const float inv = 1.0f / sf;
    float z = IG_MIN(IG_MAX(rintf(-mn * inv), 0.0f), (float)qmax);
    *zero = (uint8_t)z;
    if (bits == 8) {
        for (int i = 0; i < d; i++) codes[i] = (uint8_t)IG_MIN(IG_MAX(rintf(x[i] * inv) + z, 0.0f), 255.0f);
    } else {
        for (int i = 0; i < d; i += 2) {
            int a = (int)IG_MIN(IG_MAX(rintf(x[i] * inv) + z, 0.0f), 15.0f);
            int b = (int)IG_MIN(IG_MAX(rintf(x[i + 1] * inv) + z, 0.0f), 15.0f);
            codes[i / 2] = (uint8_t)(a | (b << 4));
        }
    }
}

/* Writes row x[d] of KV head h, page slot `slot`, tensor kv01 (0 = K, 1 = V) into one layer's
 * part of a page at base (layout above). */
IG_INLINE void ig_kvq_store(uint8_t *base, int kv, int ps, int d, int bits, int kv01, int h, int slot,
                            const float *x) {
    const size_t rb = (size_t)d * IG_KVQ_BITS(bits) / 8, n = (size_t)kv * ps, r = (size_t)h * ps + slot;
    uint8_t *codes = base + (kv01 * n + r) * rb;
    uint16_t *scales = (uint16_t *)(base + 2 * n * rb) + kv01 * n + r;
    uint8_t *zeros = base + 2 * n * rb + 4 * n + kv01 * n + r;
    ig_kvq_row(x, d, bits, codes, scales, zeros);
}

/* The codes, scales and zero points of row j0 of KV head h, tensor kv01 (layout above). */
IG_INLINE void ig_kvq_rows(const uint8_t *base, int kv, int ps, int d, int bits, int kv01, int h, int j0,
                           const uint8_t **codes, const uint16_t **scales, const uint8_t **zeros) {
    const size_t rb = (size_t)d * IG_KVQ_BITS(bits) / 8, n = (size_t)kv * ps, r0 = (size_t)h * ps + j0;
    *codes = base + (kv01 * n + r0) * rb;
    *scales = (const uint16_t *)(base + 2 * n * rb) + kv01 * n + r0;
    *zeros = base + 2 * n * rb + 4 * n + kv01 * n + r0;
}

/* out[j][d] = the rows j0 .. j0+cnt-1 of KV head h, tensor kv01, dequantized (layout above).
 * Delta-coded keys (IG_KVQ_KDELTA) need kprev: the reconstructed row j0 - 1 (not read when j0 is
 * 0), which is updated to the last row loaded, so consecutive calls walk a page; kprev is not
 * used for absolute rows. */
IG_INLINE void ig_kvq_load(const uint8_t *base, int kv, int ps, int d, int bits, int kv01, int h, int j0, int cnt,
                           float *IG_RESTRICT out, float *IG_RESTRICT kprev) {
    const size_t rb = (size_t)d * IG_KVQ_BITS(bits) / 8;
    const uint8_t *codes, *zeros;
    const uint16_t *scales;
    ig_kvq_rows(base, kv, ps, d, bits, kv01, h, j0, &codes, &scales, &zeros);
    const int delta = kv01 == 0 && IG_KVQ_KDELTA(bits);
    for (int j = 0; j < cnt; j++) {
        const int zb = delta ? zeros[j] & 15 : zeros[j];
        const float s = ig_f16_to_f32(scales[j]), b = -s * (float)zb, pa = delta ? IG_KVQ_PRED(zeros[j] >> 4) : 1.0f;
        const uint8_t *c = codes + (size_t)j * rb;
        float *o = out + (size_t)j * d;
        if (bits == IG_KVQ_E4M3) {
            ig_kvq_e4m3_row(c, d, s, o);
        } else if (bits == 8) {
            for (int i = 0; i < d; i++) o[i] = (float)c[i] * s + b;
        } else {
            for (int i = 0; i < d / 2; i++) {
                o[2 * i] = (float)(c[i] & 15) * s + b;
                o[2 * i + 1] = (float)(c[i] >> 4) * s + b;
            }
        }
        if (delta) {
            if (j0 + j > 0)
                for (int i = 0; i < d; i++) o[i] = fmaf(pa, kprev[i], o[i]);
            memcpy(kprev, o, sizeof(float) * (size_t)d);
        }
    }
}

/* kprev[d] = the reconstructed key of slot `slot` - 1 (slot >= 1) of KV head h: the page's
 * delta-coded rows 0 .. slot-1 walked in order; row[d] is scratch. */
IG_INLINE void ig_kvq_key_before(const uint8_t *base, int kv, int ps, int d, int bits, int h, int slot,
                                 float *IG_RESTRICT row, float *IG_RESTRICT kprev) {
    for (int j = 0; j < slot; j++) ig_kvq_load(base, kv, ps, d, bits, 0, h, j, 1, row, kprev);
}

/* Writes rotated key x[d] of KV head h at page slot `slot`. Delta-coded keys (slot > 0) take the
 * predictor a (IG_KVQ_PRED, the first npred of them; 1: the plain difference) whose row
 * x - a kprev quantizes with the least squared error (the header has the measurements), kprev[d]
 * being the reconstruction of slot - 1 (ig_kvq_key_before); x and kprev are not changed. */
IG_INLINE void ig_kvq_store_key(uint8_t *base, int kv, int ps, int d, int bits, int h, int slot, const float *x,
                                const float *kprev, int npred) {
    if (!IG_KVQ_KDELTA(bits) || slot == 0) {
        ig_kvq_store(base, kv, ps, d, bits, 0, h, slot, x);
        return;
    }
    float r[IG_KVQ_MAXD];
    int best = 0;
    double best_e = INFINITY;
    for (int a = 0; npred > 1 && a < npred && a < IG_KVQ_NPRED; a++) {
        uint8_t c[IG_KVQ_MAXD / 2], z;
        uint16_t hs;
        const float pa = IG_KVQ_PRED(a);
        for (int i = 0; i < d; i++) r[i] = fmaf(-pa, kprev[i], x[i]);
        ig_kvq_row(r, d, 4, c, &hs, &z);
        const float sf = ig_f16_to_f32(hs), b = -sf * (float)z;
        double e = 0.0;
        for (int i = 0; i < d; i++) {
            const double t = (double)r[i] - (double)((float)(i & 1 ? c[i / 2] >> 4 : c[i / 2] & 15) * sf + b);
            e += t * t;
        }
        if (e < best_e) best_e = e, best = a;
    }
    const float pa = IG_KVQ_PRED(best); /* a = 1: fmaf(-1, k, x) is x - k exactly */
    for (int i = 0; i < d; i++) r[i] = fmaf(-pa, kprev[i], x[i]);
    ig_kvq_store(base, kv, ps, d, bits, 0, h, slot, r);
    const uint8_t *c, *z;
    const uint16_t *sc;
    ig_kvq_rows(base, kv, ps, d, bits, 0, h, slot, &c, &sc, &z);
    *(uint8_t *)z = (uint8_t)(*z | best << 4);
}

#endif
