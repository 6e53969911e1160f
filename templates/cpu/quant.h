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
 *   IG_WQ_Q4K (5): uint4, asymmetric, K-quant style (4.5-4.6 bits per weight): groups of G along
 *       K carry 8-bit scale and min codes relative to an f16 pair per row and superblock of
 *       IG_WQ_KSB = 8 groups (8G columns; the last superblock holds the remaining groups). A panel
 *       is, per superblock, f16 d[16], f16 dmin[16] (64 bytes), then its groups' blocks of 32 + 8G
 *       bytes (the last group, K % G columns, 32 + 8 (K % G)): uint8 sc[16], uint8 mn[16], then
 *       bytes b[G][8] as Q4G's;                          w[n][k] = d[j] sc[j] q[k][j] - dmin[j] mn[j]
 *       (GGUF Q4_K's formula: a Q4_K block is G = 32 with 6-bit codes)
 *   IG_WQ_Q6K (6): uint6, the same superblocks, codes and formula with q in 0..63; a group block
 *       of n columns is 32 + 12n bytes: sc[16], mn[16], then per column 8 bytes of low nibbles
 *       (as Q4K's) and a 32-bit little-endian word of high bit pairs (lane j: bits 2j, 2j + 1),
 *       q = nibble | pair << 4. a16w4's vocabulary matrices (embedding, lm_head) use it.
 *   IG_WQ_Q8G (9): int8, symmetric, f16 scale per row and group of G along K (GGUF Q8_0 kept as
 *       it is stored, G = 32); a panel is ceil(K/G) group blocks of 32 + 16G bytes (the last one
 *       32 + 16 (K % G)): f16 scale[16], then int8 q[G][16];  w[n][k] = scale[j] * q[k][j]
 *   IG_WQ_Q8A (10): int8, symmetric, one f32 scale per output row, for int8 activations (a8w8):
 *       panel = f32 scale[16], then int8 q[KQ][16][4] with KQ = ceil(K/4) (k = 4l + i at
 *       q[l][j][i]; columns past K are 0);                w[n][k] = scale[j] * q[k/4][j][k%4]
 *       The activations are quantized per row (token) and group of IG_WQ_AG = 32 columns:
 *       xs[g] = max|x over the group| / 127, xq = round(x / xs[g]);
 *       y = scale[j] sum_g xs[g] sum_{k in g} xq[k] q[k][j], the inner sums in int32 (AVX2
 *       vpmaddubsw + vpmaddwd with the sign moved onto the weights, AVX-512 VNNI vpdpbusd where
 *       compiled in). (SmolLM2: one scale per whole row costs 1.047x the f32 perplexity, one per 32 columns 1.008x.)
 *   IG_WQ_Q6S (13): GGUF Q6_K kept as stored: Q6K's layout with G = 16 and the sc, mn bytes signed
 *       (int8): sc = mn = the block's scale, d as stored, dmin = 32 d, so that
 *       d sc q - dmin mn = d sc (q - 32), Q6_K's formula.
 *   IG_WQ_Q4Z (11): uint4 with an integer zero point (GPTQ / AWQ checkpoints, imported as stored):
 *       Q4G's layout with the min slot holding the zero point z (an integer, exact in f16):
 *                                                          w[n][k] = scale[j] (q[k][j] - z[j])
 *   IG_WQ_Q4I (14): Q4K's superblocks, codes and formula, each group's levels in k-octets: after
 *       sc[16], mn[16], ceil(n/8) blocks of 64 bytes, byte 4j + i of octet o = lane j's level at
 *       column 8o + i (low nibble) and 8o + 4 + i (high); columns past n are 0. a16w4 on x86-64
 *       with bf16 activations: integer activations (below, "integer activations").
 *   IG_WQ_Q8I (15): Q8A's bytes (a16w8 on x86-64 with bf16 activations), int16 activations.
 *   IG_WQ_Q6I (16): Q6K's superblocks, codes and formula, each group's levels in k-sixteens for
 *       integer dot products (a16w4's vocabulary matrices next to Q4I): after sc[16], mn[16],
 *       ceil(n/16) blocks of 192 bytes, two k-octets of nibbles as Q4I's (columns 16s + 8o + i,
 *       o = 0, 1) then 64 bytes of high bit pairs: byte 4j + i holds lane j's pairs of columns
 *       16s + 4b + i at bits 2b, 2b + 1 (b = 0..3); q = nibble | pair << 4, columns past n are 0.
 *   IG_WQ_Q8Z (12): 8-bit codes with an integer zero point (GPTQ 8-bit); a panel is ceil(K/G)
 *       group blocks of 64 + 16G bytes: f16 scale[16], f16 zero[16], then int8 q[G][16] holding
 *       the code minus 128 (the zero likewise: z = zero - 128);  w[n][k] = scale[j] (q[k][j] - z[j])
 *       Both are computed as scale q + (-scale z): exact in f32 (11-bit scale times 9-bit integers).
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
#define IG_WQ_Q4K 5
#define IG_WQ_Q8A 10
#define IG_WQ_AG 32 /* Q8A: activation columns per scale (8 k-quads) */
#define IG_WQ_Q6K 6
#define IG_WQ_KSB 8 /* Q4K / Q6K groups per superblock */
#define IG_WQ_Q6S 13
#define IG_WQ_Q4I 14 /* Q4K's codes, nibbles in k-octets for integer dot products (a16w4, bf16 activations) */
#define IG_WQ_Q6I 16 /* Q6K's codes in k-sixteens for integer dot products (a16w4's vocabulary, bf16 activations) */
#define IG_WQ_ISK(wq) ((wq) == IG_WQ_Q4K || (wq) == IG_WQ_Q6K || (wq) == IG_WQ_Q6S || (wq) == IG_WQ_Q4I || (wq) == IG_WQ_Q6I)
#define IG_WQ_KI(wq) ((wq) == IG_WQ_Q4I || (wq) == IG_WQ_Q6I) /* K-quant codes for int8 activations */
#define IG_WQ_K6(wq) ((wq) == IG_WQ_Q6K || (wq) == IG_WQ_Q6S) /* 6-bit levels */
#define IG_WQ_Q4Z 11
#define IG_WQ_Q8Z 12
#define IG_WQ_ISZ(wq) ((wq) == IG_WQ_Q4Z || (wq) == IG_WQ_Q8Z) /* integer zero points */
#define IG_WQ_Q8I 15 /* Q8A's layout with 16-bit integer activations (a16w8, bf16 activations) */
#define IG_WQ_AG16 256 /* Q8I: activation columns per int16 scale */
/* formats whose matmul quantizes the activations (ig_wq_xquant) and sums in int32 (ig_wq_xgemm) */
#define IG_WQ_XQ(wq) ((wq) == IG_WQ_Q8A || IG_WQ_KI(wq) || (wq) == IG_WQ_Q8I)
/* formats whose decode needs the group sums of x (a min or zero-point term) */
#define IG_WQ_GSUMS(wq) ((wq) == IG_WQ_Q4G || IG_WQ_ISK(wq) || IG_WQ_ISZ(wq))

/* Bytes of one Q8G / Q4G / Q4K group block of n columns. */
#define IG_WQ_GBYTES(wq, n)                                                                                   \
    ((wq) == IG_WQ_Q4K   ? 32 + (size_t)8 * (n)                                                                \
     : (wq) == IG_WQ_Q4I ? 32 + (size_t)64 * (((n) + 7) / 8) /* Q4I: whole k-octets */                      \
     : (wq) == IG_WQ_Q6I ? 32 + (size_t)192 * (((n) + 15) / 16) /* Q6I: whole k-sixteens */                 \
     : IG_WQ_K6(wq)      ? 32 + (size_t)12 * (n)                                                               \
     : (wq) == IG_WQ_Q8G ? 32 + (size_t)16 * (n)                                                               \
     : (wq) == IG_WQ_Q8Z ? 64 + (size_t)16 * (n)                                                               \
                         : 64 + (size_t)8 * (n))
/* Q4K / Q6K: bytes of a full superblock, and the offsets of group g's superblock header and block
 * in a panel (only the last group of a row is short, so every earlier superblock is full). */
#define IG_WQ_KSBB(wq, G) (64 + (size_t)IG_WQ_KSB * IG_WQ_GBYTES(wq, G))
#define IG_WQ_KHDR(wq, G, g) ((size_t)((g) / IG_WQ_KSB) * IG_WQ_KSBB(wq, G))
#define IG_WQ_KGRP(wq, G, g) (IG_WQ_KHDR(wq, G, g) + 64 + (size_t)((g) % IG_WQ_KSB) * IG_WQ_GBYTES(wq, G))
/* Q4K / Q6K: bytes per column of a group block, and lane j's level at column i of block gb */
#define IG_WQ_KCOL(wq) (IG_WQ_K6(wq) ? 12 : 8)
/* Q4K / Q6K / Q6S: group block gb's scale and min code of lane j (Q6S: signed) */
#define IG_WQ_KSC(wq, gb, j) ((wq) == IG_WQ_Q6S ? (float)((const int8_t *)(gb))[j] : (float)((const uint8_t *)(gb))[j])
IG_INLINE int ig_wq_klevel(int wq, const char *gb, int i, int j) {
    if (wq == IG_WQ_Q4I) { /* octet i / 8, byte 4j + i % 4; columns 4..7 of an octet in the high nibbles */
        const uint8_t b = ((const uint8_t *)gb)[32 + (size_t)(i / 8) * 64 + 4 * j + i % 4];
        return i % 8 < 4 ? b & 15 : b >> 4;
    }
    if (wq == IG_WQ_Q6I) { /* sixteen i / 16: nibbles as Q4I's two octets, then the pairs at byte 4j + i % 4 */
        const uint8_t *s = (const uint8_t *)gb + 32 + (size_t)(i / 16) * 192;
        const uint8_t b = s[(i % 16) / 8 * 64 + 4 * j + i % 4], h = s[128 + 4 * j + i % 4];
        return (i % 8 < 4 ? b & 15 : b >> 4) | ((h >> (2 * ((i % 16) / 4))) & 3) << 4;
    }
    const uint8_t *c = (const uint8_t *)gb + 32 + (size_t)i * IG_WQ_KCOL(wq);
    int q = j < 8 ? c[j] & 15 : c[j - 8] >> 4;
    if (IG_WQ_K6(wq)) {
        uint32_t h;
        memcpy(&h, c + 8, 4);
        q |= (int)((h >> (2 * j)) & 3u) << 4;
    }
    return q;
}

/* 8 bytes at p (any alignment) as one 64-bit word. */
IG_INLINE long long ig_wq_ld64(const void *p) {
    long long v;
    memcpy(&v, p, 8);
    return v;
}

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
#elif defined(IG_NEON)
    for (int g = 0; g < 4; g++) vst1q_f32(out + 4 * g, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p + 4 * g))));
#else
    for (int j = 0; j < 16; j++) out[j] = ig_wq_f16((const char *)p + 2 * j);
#endif
}

/* Bytes of one panel of K columns. */
IG_INLINE size_t ig_wq_panel_bytes(int wq, int K, int G) {
    if (wq == IG_WQ_Q8C) return 64 + (size_t)16 * K;
    if (wq == IG_WQ_Q8A || wq == IG_WQ_Q8I) return 64 + (size_t)64 * ((K + 3) / 4);
    if (IG_WQ_ISK(wq))
        return (size_t)64 * ((K + G * IG_WQ_KSB - 1) / (G * IG_WQ_KSB)) + (size_t)(K / G) * IG_WQ_GBYTES(wq, G) +
               (K % G ? IG_WQ_GBYTES(wq, K % G) : 0);
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
    if (wq == IG_WQ_Q8A || wq == IG_WQ_Q8I) {
        float s;
        memcpy(&s, panel + 4 * j, 4);
        const int8_t *q = (const int8_t *)(panel + 64);
        for (int k = k0; k < k1; k++) out[k - k0] = s * (float)q[(size_t)(k / 4) * 64 + j * 4 + k % 4];
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
    if (wq == IG_WQ_Q8Z) {
        for (int k = k0; k < k1; k++) {
            const char *gb = panel + (size_t)(k / G) * IG_WQ_GBYTES(wq, G);
            float sc = ig_wq_f16(gb + 2 * j);
            out[k - k0] = sc * (float)((const int8_t *)gb)[64 + (k % G) * 16 + j] - sc * ig_wq_f16(gb + 32 + 2 * j);
        }
        return;
    }
    if (IG_WQ_ISK(wq)) {
        for (int k = k0; k < k1; k++) {
            const char *hb = panel + IG_WQ_KHDR(wq, G, k / G), *gb = panel + IG_WQ_KGRP(wq, G, k / G);
            float s = ig_wq_f16(hb + 2 * j) * IG_WQ_KSC(wq, gb, j), m = -(ig_wq_f16(hb + 32 + 2 * j) * IG_WQ_KSC(wq, gb, 16 + j));
            out[k - k0] = m + s * (float)ig_wq_klevel(wq, gb, k % G, j);
        }
        return;
    }
    for (int k = k0; k < k1; k++) {
        const char *gb = panel + (size_t)(k / G) * IG_WQ_GBYTES(wq, G);
        float s = ig_wq_f16(gb + 2 * j), m = ig_wq_f16(gb + 32 + 2 * j);
        if (wq == IG_WQ_Q4Z) m = -(s * m);
        uint8_t b = (uint8_t)gb[64 + (k % G) * 8 + (j & 7)];
        out[k - k0] = m + s * (float)(j < 8 ? b & 15 : b >> 4);
    }
}

/* Q4K / Q6K: one group's 16 scales d sc and mins -dmin mn as f32 (hb: its superblock header, gb: its block). */
IG_INLINE void ig_wq_k_scales(int wq, const char *hb, const uint8_t *gb, float *s, float *m) {
    IG_ALIGN64 float d[16], dm[16];
    ig_wq_f16x16(hb, d);
    ig_wq_f16x16(hb + 32, dm);
    for (int j = 0; j < 16; j++) s[j] = d[j] * IG_WQ_KSC(wq, gb, j), m[j] = -(dm[j] * IG_WQ_KSC(wq, gb, 16 + j));
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
    /* a k pair never straddles groups (G and K % G are even): scales converted once per group
     * (zeroed first only for the compiler, which cannot see that the first k pair sets them) */
    IG_ALIGN64 float s[16] = {0}, m[16] = {0};
    int cur = -1;
    for (int l = l0; l < l1; l++) {
        float *d = dst + (size_t)(l - l0) * 32;
        int g = 2 * l / G;
        const char *gb = panel + (IG_WQ_ISK(wq) ? IG_WQ_KGRP(wq, G, g) : (size_t)g * IG_WQ_GBYTES(wq, G));
        if (g != cur) {
            if (IG_WQ_ISK(wq)) {
                ig_wq_k_scales(wq, panel + IG_WQ_KHDR(wq, G, g), (const uint8_t *)gb, s, m);
            } else {
                ig_wq_f16x16(gb, s);
                if (wq == IG_WQ_Q4G || IG_WQ_ISZ(wq)) ig_wq_f16x16(gb + 32, m);
                if (IG_WQ_ISZ(wq))
                    for (int j = 0; j < 16; j++) m[j] = -(s[j] * m[j]);
            }
            cur = g;
        }
        for (int h = 0; h < 2; h++) {
            int k = 2 * l + h;
            if (wq == IG_WQ_Q8G) {
                const int8_t *q = (const int8_t *)gb + 32 + (k % G) * 16;
                for (int j = 0; j < 16; j++) d[16 * h + j] = s[j] * (float)q[j];
                continue;
            }
            if (wq == IG_WQ_Q8Z) {
                const int8_t *q = (const int8_t *)gb + 64 + (k % G) * 16;
                for (int j = 0; j < 16; j++) d[16 * h + j] = m[j] + s[j] * (float)q[j];
                continue;
            }
            if (IG_WQ_K6(wq) || IG_WQ_KI(wq)) {
                for (int j = 0; j < 16; j++) d[16 * h + j] = m[j] + s[j] * (float)ig_wq_klevel(wq, gb, k % G, j);
                continue;
            }
            const uint8_t *b = (const uint8_t *)gb + (wq == IG_WQ_Q4K ? 32 : 64) + (k % G) * 8;
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

/* Q8A: row xf [K] as int8 codes xq [4 ceil(K/4)] (zero padded) and one scale per group of
 * IG_WQ_AG columns, xs[g] = max|x over the group| / 127. */
IG_INLINE void ig_wq_quant_row(const float *xf, int K, int8_t *xq, float *xs) {
    for (int g = 0; g * IG_WQ_AG < K; g++) {
        const int k0 = g * IG_WQ_AG, k1 = IG_MIN(K, k0 + IG_WQ_AG);
        float amax = 0.0f;
        for (int k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(xf[k]));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int k = k0; k < k1; k++) {
            long v = lrintf(xf[k] * inv);
            xq[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        xs[g] = amax / 127.0f;
    }
    for (int k = K; k % 4; k++) xq[k] = 0;
}

/* Q8A: acc[j] = sum_k xq[k] q[k][j] over k-quads [l0, l1) of one panel's codes q (exact, int32). */
IG_INLINE void ig_wq_idot(const int8_t *xq, const int8_t *q, int l0, int l1, int32_t *acc) {
#if defined(IG_AVX512)
    __m512i a = _mm512_setzero_si512();
#if !defined(__AVX512VNNI__)
    const __m512i ones = _mm512_set1_epi16(1);
#endif
    for (int l = l0; l < l1; l++) {
        int32_t xw;
        memcpy(&xw, xq + 4 * l, 4);
        __m512i xv = _mm512_set1_epi32(xw), ax = _mm512_abs_epi8(xv);
        __m512i w = _mm512_loadu_si512((const void *)(q + (size_t)l * 64));
        _mm_prefetch((const char *)q + (size_t)l * 64 + 8192, _MM_HINT_T0);
        w = _mm512_mask_sub_epi8(w, _mm512_movepi8_mask(xv), _mm512_setzero_si512(), w); /* x's sign onto w */
#if defined(__AVX512VNNI__)
        a = ig_dpbusd512(a, ax, w);
#else
        a = _mm512_add_epi32(a, _mm512_madd_epi16(_mm512_maddubs_epi16(ax, w), ones));
#endif
    }
    _mm512_storeu_si512((void *)acc, a);
#elif defined(IG_SVE)
    /* SVE SDOT at any vector length: a quad of 16 lanes is one stream unit (common.h) */
    ig_sve_stream_s8((const uint32_t *)(q + (size_t)l0 * 64), (const uint32_t *)(xq + 4 * l0), l1 - l0, acc);
#elif defined(IG_NEON_DOT)
    /* SDOT: lane j's quad of codes times the row's quad, 4 products summed into int32; the row's
     * quads come four at a time (laneq) */
    int32x4_t a[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    int l = l0;
    for (; l + 4 <= l1; l += 4) {
        const int8x16_t xv = vld1q_s8(xq + 4 * l);
        const int8_t *p = q + (size_t)l * 64;
        __builtin_prefetch(p + 1024);
#define IG_WQ_SDOT(L) \
        for (int g = 0; g < 4; g++) a[g] = vdotq_laneq_s32(a[g], vld1q_s8(p + 64 * L + 16 * g), xv, L);
        IG_WQ_SDOT(0) IG_WQ_SDOT(1) IG_WQ_SDOT(2) IG_WQ_SDOT(3)
#undef IG_WQ_SDOT
    }
    for (; l < l1; l++) {
        const int8x16_t xv = vreinterpretq_s8_u32(vld1q_dup_u32((const uint32_t *)(xq + 4 * l)));
        for (int g = 0; g < 4; g++) a[g] = vdotq_s32(a[g], vld1q_s8(q + (size_t)l * 64 + 16 * g), xv);
    }
    for (int g = 0; g < 4; g++) vst1q_s32(acc + 4 * g, a[g]);
#elif defined(IG_NEON)
    /* ARMv8.0: SMULL of 8 codes (2 lanes x 4 k) by the broadcast quad, pairwise-accumulated into
     * int32 (|products| <= 127 127 fit int16); a last pairwise add folds each lane's two halves */
    int32x4_t a[8];
    for (int g = 0; g < 8; g++) a[g] = vdupq_n_s32(0);
    for (int l = l0; l < l1; l++) {
        const int8x8_t xv = vreinterpret_s8_u32(vld1_dup_u32((const uint32_t *)(xq + 4 * l)));
        const int8_t *p = q + (size_t)l * 64;
        for (int g = 0; g < 8; g++) a[g] = vpadalq_s16(a[g], vmull_s8(vld1_s8(p + 8 * g), xv));
    }
    for (int g = 0; g < 4; g++) vst1q_s32(acc + 4 * g, vpaddq_s32(a[2 * g], a[2 * g + 1]));
#else
    for (int j = 0; j < 16; j++) acc[j] = 0;
    for (int l = l0; l < l1; l++)
        for (int j = 0; j < 16; j++)
            for (int i = 0; i < 4; i++) acc[j] += (int32_t)xq[4 * l + i] * q[(size_t)l * 64 + j * 4 + i];
#endif
}

/* Q8A: out[0..16) = x . W[panel] for one quantized row (codes xq, group scales xs). */
IG_INLINE void ig_wq_igemv(int K, const int8_t *xq, const float *xs, const char *panel, float *out) {
    IG_ALIGN64 int32_t acc[16];
    IG_ALIGN64 float f[16] = {0};
    const int KQ = (K + 3) / 4, QG = IG_WQ_AG / 4;
#if defined(IG_SVE)
    /* 512-bit SVE and up: a group's 16 QG lanes are whole vectors; its int32 sums are scaled in
     * the vector and the NL / 16 partial sums of each output folded once per panel */
    const int NL = (int)svcntw();
    if (NL % 16 == 0) {
        const svbool_t pt = svptrue_b32(), pu = svwhilelt_b32_s32(0, NL / 16);
        const svuint32_t idx = svlsr_n_u32_x(pt, svindex_u32(0, 1), 4);
        const uint32_t *w = (const uint32_t *)(panel + 64), *xu = (const uint32_t *)xq;
        svfloat32_t fa = svdup_n_f32(0.0f);
        for (int g = 0; g * QG < KQ; g++) {
            const int u0 = g * QG, u1 = IG_MIN(KQ, u0 + QG);
            svint32_t ia = svdup_n_s32(0);
            for (int u = u0; u < u1; u += NL / 16) {
                svbool_t pg = svwhilelt_b32_s32(16 * u, 16 * u1);
                svuint32_t xv = svtbl_u32(svld1_u32(svand_b_z(pt, pu, svwhilelt_b32_s32(u, u1)), xu + u), idx);
                ia = svdot_s32(ia, svreinterpret_s8_u32(svld1_u32(pg, w + (size_t)16 * u)), svreinterpret_s8_u32(xv));
            }
            fa = svmla_n_f32_x(pt, fa, svcvt_f32_s32_x(pt, ia), xs[g]);
        }
        float buf[64];
        svst1_f32(pt, buf, fa);
        for (int j = 0; j < 16; j++) {
            float t = buf[j];
            for (int c = 1; c < NL / 16; c++) t += buf[16 * c + j];
            float sc;
            memcpy(&sc, panel + 4 * j, 4);
            out[j] = t * sc;
        }
        return;
    }
#endif
    for (int g = 0; g * QG < KQ; g++) {
        ig_wq_idot(xq, (const int8_t *)(panel + 64), g * QG, IG_MIN(KQ, g * QG + QG), acc);
        for (int j = 0; j < 16; j++) f[j] += (float)acc[j] * xs[g];
    }
    for (int j = 0; j < 16; j++) {
        float s;
        memcpy(&s, panel + 4 * j, 4);
        out[j] = f[j] * s;
    }
}

/* ---- integer activations for the a16 formats (Q4I, Q8I) and a8w8 (Q8A)
 *
 * A row of activations is quantized once per matmul call (ig_wq_xquant; a matmul reads one input,
 * and the inputs several matrices share are fused: q|k|v, gate|up) into a buffer of
 * IG_WQ_XQ_BYTES: the codes at 0, the f32 scales at IG_WQ_XS_OFF, for Q4I the f32 sums of the
 * quantized x per weight group at IG_WQ_GS_OFF (the min term: sum_b xs_b sum xq).
 *   Q8A, Q4I: int8, symmetric per IG_WQ_AG = 32 columns, xs = max|x| / 127 (codes -127..127);
 *   Q8I: int16, symmetric per IG_WQ_AG16 = 256 columns, xs = max|x| / 32767 (int8 activations
 *        per 32 cost a8w8 1.008x the f32 perplexity on SmolLM2, over a16w8's 1.005 budget;
 *        16 bits cost nothing measurable and run at the same memory-bound speed).
 * ig_wq_xgemm sums codes times weight codes in int32 per activation block (exact: Q4I 32 x 15 x
 * 127, Q8I 256 x 127 x 32767 < 2^31), then in f32: y = sum_b xs_b isum_b (x the weight scales). */
#define IG_WQ_R64(n) (((size_t)(n) + 63) / 64 * 64)
#define IG_WQ_XAG(wq) ((wq) == IG_WQ_Q8I ? IG_WQ_AG16 : IG_WQ_AG)
#define IG_WQ_XC(wq, K) ((wq) == IG_WQ_Q8I ? 2 * (((K) + 3) / 4 * 4) : IG_WQ_KI(wq) ? ((K) + 31) / 32 * 32 : ((K) + 3) / 4 * 4)
#define IG_WQ_XS_OFF(wq, K) IG_WQ_R64(IG_WQ_XC(wq, K))
#define IG_WQ_GS_OFF(wq, K) (IG_WQ_XS_OFF(wq, K) + IG_WQ_R64(4 * (((K) + IG_WQ_XAG(wq) - 1) / IG_WQ_XAG(wq))))
#define IG_WQ_XQ_BYTES(wq, K, G) \
    (IG_WQ_GS_OFF(wq, K) + (IG_WQ_KI(wq) ? IG_WQ_R64(4 * (((K) + (G) - 1) / ((G) > 0 ? (G) : 1))) : 0))

/* Q8I: row xf [K] as int16 codes xw [4 ceil(K/4)] (zero padded), one scale per IG_WQ_AG16 columns. */
IG_INLINE void ig_wq_quant_row16(const float *xf, int K, int16_t *xw, float *xs) {
    for (int g = 0; g * IG_WQ_AG16 < K; g++) {
        const int k0 = g * IG_WQ_AG16, k1 = IG_MIN(K, k0 + IG_WQ_AG16);
        float amax = 0.0f;
        for (int k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(xf[k]));
        const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
        for (int k = k0; k < k1; k++) {
            long v = lrintf(xf[k] * inv);
            xw[k] = (int16_t)(v > 32767 ? 32767 : v < -32767 ? -32767 : v);
        }
        xs[g] = amax / 32767.0f;
    }
    for (int k = K; k % 4; k++) xw[k] = 0;
}

/* Row xf [K] quantized for format wq (group G) into xb [IG_WQ_XQ_BYTES(wq, K, G)], 64-aligned. */
IG_INLINE void ig_wq_xquant(int wq, int K, int G, const float *xf, char *xb) {
    float *xs = (float *)(xb + IG_WQ_XS_OFF(wq, K));
    if (wq == IG_WQ_Q8I) {
        ig_wq_quant_row16(xf, K, (int16_t *)xb, xs);
        return;
    }
    ig_wq_quant_row(xf, K, (int8_t *)xb, xs);
    if (!IG_WQ_KI(wq)) return;
    for (int k = K; k % 32; k++) xb[k] = 0; /* Q4I / Q6I read whole octets / sixteens; the padding's codes meet 0 */
    /* the min term's group sums of the quantized row, xs_b sum xq (exact integer sums per block):
     * then sum_k (d sc q_k - dmin mn) x_k is computed as if x were its codes, and the rounding
     * error of x meets only the weights w_k, not their offset codes q_k (with the exact sums of x
     * the error grows by the mean code, 7.5: 7.9e-2 of max |logit| on tests/test_quant.py's
     * llama-gqa, against 1.1e-2 for bf16 activations alone) */
    float *gs = (float *)(xb + IG_WQ_GS_OFF(wq, K));
    for (int g = 0; g * G < K; g++) {
        float s = 0.0f;
        for (int k0 = g * G; k0 < IG_MIN(K, g * G + G); k0 += IG_WQ_AG) {
            int32_t is = 0;
            for (int k = k0; k < IG_MIN(K, k0 + IG_WQ_AG); k++) is += ((const int8_t *)xb)[k];
            s += (float)is * xs[k0 / IG_WQ_AG];
        }
        gs[g] = s;
    }
}

/* ---- Q4I / Q6I: R rows (at most IG_WQ_XR) of quantized activations against one panel. Each
 * weight vector is loaded and unpacked once and multiplied into every row's accumulators (the
 * prefill's register blocking; decode is R = 1). Integer sums are exact, and the f32 steps are the
 * same per row whatever R, so a row's result does not depend on the rows beside it. */
#if defined(IG_AVX512)
#define IG_WQ_XR 4 /* rows per call: 5 vector accumulators a row */
#elif defined(IG_AVX2)
#define IG_WQ_XR 2 /* 16 ymm registers: lanes 0..7 and 8..15 of a row are two of each */
#else
#define IG_WQ_XR 1
#endif
/* rows a prefill block of wq is a multiple of (matmul.c's MM_QRB): Q8I on AVX-512 runs 8 at a time
 * (ig_wq_q8i_gemm: its per-row state is three vectors) */
#if defined(IG_AVX512)
#define IG_WQ_XRB(wq) ((wq) == IG_WQ_Q8I ? 8 : IG_WQ_XR)
#else
#define IG_WQ_XRB(wq) IG_WQ_XR
#endif

/* Q4I: a[r] = sum over no k-octets (at most 4: one activation block) of the octets' codes c (64
 * bytes each) times row r's int8 activations x + r xst [8 no] (int32; the int16 sums of the paths
 * without VNNI stay below 16 x 15 x 127 < 2^15). AVX2: a[2r] lanes 0..7, a[2r + 1] lanes 8..15. */
#if defined(IG_AVX512)
IG_INLINE void ig_wq_q4i_idotr(const uint8_t *c, const int8_t *x, size_t xst, int no, int R, __m512i *a) {
    const __m512i m15 = _mm512_set1_epi8(15);
    for (int r = 0; r < R; r++) a[r] = _mm512_setzero_si512();
    for (int o = 0; o < no; o++) {
        const __m512i v = _mm512_loadu_si512((const void *)(c + (size_t)o * 64));
        _mm_prefetch((const char *)c + (size_t)o * 64 + 8192, _MM_HINT_T0);
        const __m512i lo = _mm512_and_si512(v, m15), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m15);
        for (int r = 0; r < R; r++) {
            int32_t xa, xb;
            memcpy(&xa, x + r * xst + 8 * o, 4), memcpy(&xb, x + r * xst + 8 * o + 4, 4);
#if defined(__AVX512VNNI__)
            a[r] = ig_dpbusd512(ig_dpbusd512(a[r], lo, _mm512_set1_epi32(xa)), hi, _mm512_set1_epi32(xb));
#else
            a[r] = _mm512_add_epi16(a[r], _mm512_add_epi16(_mm512_maddubs_epi16(lo, _mm512_set1_epi32(xa)),
                                                           _mm512_maddubs_epi16(hi, _mm512_set1_epi32(xb))));
#endif
        }
    }
#if !defined(__AVX512VNNI__)
    for (int r = 0; r < R; r++) a[r] = _mm512_madd_epi16(a[r], _mm512_set1_epi16(1));
#endif
}
#elif defined(IG_AVX2)
#if defined(__AVXVNNI__)
#define IG_WQ_DP2(a, w0, x0, w1, x1) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(a, w0, x0), w1, x1)
#else /* int16 sums of two vpmaddubsw pairs (callers keep them below 2^15) */
#define IG_WQ_DP2(a, w0, x0, w1, x1) _mm256_add_epi16(a, _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1)))
#endif
IG_INLINE void ig_wq_q4i_idotr(const uint8_t *c, const int8_t *x, size_t xst, int no, int R, __m256i *a) {
    const __m256i m15 = _mm256_set1_epi8(15);
    for (int r = 0; r < 2 * R; r++) a[r] = _mm256_setzero_si256();
    for (int o = 0; o < no; o++) {
        const __m256i *p = (const __m256i *)(c + (size_t)o * 64);
        _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
        const __m256i v0 = _mm256_loadu_si256(p), v1 = _mm256_loadu_si256(p + 1); /* lanes 0..7, 8..15 */
        const __m256i l0 = _mm256_and_si256(v0, m15), h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m15);
        const __m256i l1 = _mm256_and_si256(v1, m15), h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m15);
        for (int r = 0; r < R; r++) {
            int32_t xa, xb;
            memcpy(&xa, x + r * xst + 8 * o, 4), memcpy(&xb, x + r * xst + 8 * o + 4, 4);
            const __m256i va = _mm256_set1_epi32(xa), vb = _mm256_set1_epi32(xb);
            a[2 * r] = IG_WQ_DP2(a[2 * r], l0, va, h0, vb);
            a[2 * r + 1] = IG_WQ_DP2(a[2 * r + 1], l1, va, h1, vb);
        }
    }
#if !defined(__AVXVNNI__)
    for (int r = 0; r < 2 * R; r++) a[r] = _mm256_madd_epi16(a[r], _mm256_set1_epi16(1));
#endif
}
#endif

/* Q6I: a[r] = sum over ns k-sixteens (at most 2: one activation block) of the codes c (192 bytes
 * each: two octets of nibbles, then the high bit pairs) times row r's int8 activations [16 ns].
 * A 6-bit code is assembled in its byte, nibble | (pair << 4): the pairs of columns 4b + i sit at
 * bits 2b of byte 4j + i, so shifting the 16-bit words by 4, 2, 0 or -2 brings pair b to bits 4..5
 * (bits that cross from the other byte of a word are masked off). int32 sums (without VNNI:
 * vpmaddubsw pairs, 2 x 63 x 127, two of them per int16 before vpmaddwd). */
#if defined(IG_AVX512)
IG_INLINE void ig_wq_q6i_idotr(const uint8_t *c, const int8_t *x, size_t xst, int ns, int R, __m512i *a) {
    const __m512i m15 = _mm512_set1_epi8(15), m48 = _mm512_set1_epi8(48);
    for (int r = 0; r < R; r++) a[r] = _mm512_setzero_si512();
    for (int s = 0; s < ns; s++) {
        const uint8_t *p = c + (size_t)s * 192;
        _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
        _mm_prefetch((const char *)p + 8192 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)p + 8192 + 128, _MM_HINT_T0);
        const __m512i v0 = _mm512_loadu_si512((const void *)p), v1 = _mm512_loadu_si512((const void *)(p + 64));
        const __m512i h = _mm512_loadu_si512((const void *)(p + 128));
        /* (v & 15) | (hs & 48) as one ternary-logic op per code vector (0xb8: B ? C : A with B = 15) */
        const __m512i h0 = _mm512_and_si512(_mm512_slli_epi16(h, 4), m48), h1 = _mm512_and_si512(_mm512_slli_epi16(h, 2), m48);
        const __m512i h2 = _mm512_and_si512(h, m48), h3 = _mm512_and_si512(_mm512_srli_epi16(h, 2), m48);
        const __m512i q0 = _mm512_ternarylogic_epi32(h0, m15, v0, 0xb8), q1 = _mm512_ternarylogic_epi32(h1, m15, _mm512_srli_epi16(v0, 4), 0xb8);
        const __m512i q2 = _mm512_ternarylogic_epi32(h2, m15, v1, 0xb8), q3 = _mm512_ternarylogic_epi32(h3, m15, _mm512_srli_epi16(v1, 4), 0xb8);
        for (int r = 0; r < R; r++) {
            int32_t xv[4];
            memcpy(xv, x + r * xst + 16 * s, 16);
#if defined(__AVX512VNNI__)
            a[r] = ig_dpbusd512(ig_dpbusd512(a[r], q0, _mm512_set1_epi32(xv[0])), q1, _mm512_set1_epi32(xv[1]));
            a[r] = ig_dpbusd512(ig_dpbusd512(a[r], q2, _mm512_set1_epi32(xv[2])), q3, _mm512_set1_epi32(xv[3]));
#else
            const __m512i ones = _mm512_set1_epi16(1);
            a[r] = _mm512_add_epi32(a[r], _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(q0, _mm512_set1_epi32(xv[0])),
                                                                             _mm512_maddubs_epi16(q1, _mm512_set1_epi32(xv[1]))), ones));
            a[r] = _mm512_add_epi32(a[r], _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(q2, _mm512_set1_epi32(xv[2])),
                                                                             _mm512_maddubs_epi16(q3, _mm512_set1_epi32(xv[3]))), ones));
#endif
        }
    }
}
#elif defined(IG_AVX2)
IG_INLINE void ig_wq_q6i_idotr(const uint8_t *c, const int8_t *x, size_t xst, int ns, int R, __m256i *a) {
    const __m256i m15 = _mm256_set1_epi8(15), m48 = _mm256_set1_epi8(48);
    for (int r = 0; r < 2 * R; r++) a[r] = _mm256_setzero_si256();
    for (int s = 0; s < ns; s++) {
        const uint8_t *p = c + (size_t)s * 192;
        _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
        _mm_prefetch((const char *)p + 8192 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)p + 8192 + 128, _MM_HINT_T0);
        for (int hf = 0; hf < 2; hf++) { /* lanes 0..7, then 8..15: the low and high 32 bytes of each 64 */
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(p + 32 * hf)), v1 = _mm256_loadu_si256((const __m256i *)(p + 64 + 32 * hf));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * hf));
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(v0, m15), _mm256_and_si256(_mm256_slli_epi16(h, 4), m48));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m15), _mm256_and_si256(_mm256_slli_epi16(h, 2), m48));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(v1, m15), _mm256_and_si256(h, m48));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m15), _mm256_and_si256(_mm256_srli_epi16(h, 2), m48));
            for (int r = 0; r < R; r++) {
                int32_t xv[4];
                memcpy(xv, x + r * xst + 16 * s, 16);
                __m256i *ar = &a[2 * r + hf];
#if defined(__AVXVNNI__)
                *ar = IG_WQ_DP2(IG_WQ_DP2(*ar, q0, _mm256_set1_epi32(xv[0]), q1, _mm256_set1_epi32(xv[1])), q2,
                                _mm256_set1_epi32(xv[2]), q3, _mm256_set1_epi32(xv[3]));
#else
                const __m256i ones = _mm256_set1_epi16(1), z = _mm256_setzero_si256();
                *ar = _mm256_add_epi32(*ar, _mm256_madd_epi16(IG_WQ_DP2(z, q0, _mm256_set1_epi32(xv[0]), q1, _mm256_set1_epi32(xv[1])), ones));
                *ar = _mm256_add_epi32(*ar, _mm256_madd_epi16(IG_WQ_DP2(z, q2, _mm256_set1_epi32(xv[2]), q3, _mm256_set1_epi32(xv[3])), ones));
#endif
            }
        }
    }
}
#undef IG_WQ_DP2
#endif

/* Q4I / Q6I: out[16 r + j] = row r (the quantized rows xb + r xst, ig_wq_xquant) . W[panel] lane
 * j, r < R <= IG_WQ_XR: per superblock d sum_g sc_g sum_b xs_b isum_b - dmin sum_g mn_g gs_g. */
IG_INLINE void ig_wq_ki_gemm(int wq, int K, int G, int R, const char *xb, size_t xst, const char *panel, float *out) {
    const int six = wq == IG_WQ_Q6I, cb = six ? 12 : 8; /* code bytes per column */
    const size_t xso = IG_WQ_XS_OFF(wq, K), gso = IG_WQ_GS_OFF(wq, K);
#define IG_WQ_XS(r, b) (((const float *)(xb + (r) * xst + xso))[b]) /* row r's activation scale b */
#define IG_WQ_GS(r, g) (((const float *)(xb + (r) * xst + gso))[g]) /* row r's group sum g */
#if defined(IG_AVX512)
    __m512 acc[IG_WQ_XR];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
        const char *hb = panel + IG_WQ_KHDR(wq, G, g0);
        __m512 sd[IG_WQ_XR], sm[IG_WQ_XR];
        for (int r = 0; r < R; r++) sd[r] = sm[r] = _mm512_setzero_ps();
        for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
            const uint8_t *gb = (const uint8_t *)panel + IG_WQ_KGRP(wq, G, g);
            const int k1 = IG_MIN(K, g * G + G);
            __m512 d[IG_WQ_XR];
            for (int r = 0; r < R; r++) d[r] = _mm512_setzero_ps();
            for (int k = g * G; k < k1; k += IG_WQ_AG) {
                const int n = IG_MIN(k1, k + IG_WQ_AG) - k;
                const uint8_t *c = gb + 32 + (size_t)(k - g * G) * cb;
                __m512i a[IG_WQ_XR];
                if (six) ig_wq_q6i_idotr(c, (const int8_t *)xb + k, xst, (n + 15) / 16, R, a);
                else ig_wq_q4i_idotr(c, (const int8_t *)xb + k, xst, (n + 7) / 8, R, a);
                for (int r = 0; r < R; r++) d[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r]), _mm512_set1_ps(IG_WQ_XS(r, k / IG_WQ_AG)), d[r]);
            }
            const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)gb)));
            const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gb + 16))));
            for (int r = 0; r < R; r++) {
                sd[r] = _mm512_fmadd_ps(d[r], sc, sd[r]);
                sm[r] = _mm512_fmadd_ps(_mm512_set1_ps(IG_WQ_GS(r, g)), mn, sm[r]);
            }
        }
        const __m512 hd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hb));
        const __m512 hm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hb + 32)));
        for (int r = 0; r < R; r++) acc[r] = _mm512_fnmadd_ps(sm[r], hm, _mm512_fmadd_ps(sd[r], hd, acc[r]));
    }
    for (int r = 0; r < R; r++) _mm512_storeu_ps(out + 16 * r, acc[r]);
#elif defined(IG_AVX2)
    __m256 acc[2 * IG_WQ_XR]; /* row r: lanes 0..7 at 2r, 8..15 at 2r + 1 */
    for (int r = 0; r < 2 * R; r++) acc[r] = _mm256_setzero_ps();
    for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
        const char *hb = panel + IG_WQ_KHDR(wq, G, g0);
        __m256 sd[2 * IG_WQ_XR], sm[2 * IG_WQ_XR];
        for (int r = 0; r < 2 * R; r++) sd[r] = sm[r] = _mm256_setzero_ps();
        for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
            const uint8_t *gb = (const uint8_t *)panel + IG_WQ_KGRP(wq, G, g);
            const int k1 = IG_MIN(K, g * G + G);
            __m256 e[2 * IG_WQ_XR];
            for (int r = 0; r < 2 * R; r++) e[r] = _mm256_setzero_ps();
            for (int k = g * G; k < k1; k += IG_WQ_AG) {
                const int n = IG_MIN(k1, k + IG_WQ_AG) - k;
                const uint8_t *c = gb + 32 + (size_t)(k - g * G) * cb;
                __m256i a[2 * IG_WQ_XR];
                if (six) ig_wq_q6i_idotr(c, (const int8_t *)xb + k, xst, (n + 15) / 16, R, a);
                else ig_wq_q4i_idotr(c, (const int8_t *)xb + k, xst, (n + 7) / 8, R, a);
                for (int r = 0; r < 2 * R; r++) e[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r]), _mm256_set1_ps(IG_WQ_XS(r / 2, k / IG_WQ_AG)), e[r]);
            }
#define IG_WQ_U8F(o) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(gb + (o)))))
            const __m256 s0 = IG_WQ_U8F(0), s1 = IG_WQ_U8F(8), n0 = IG_WQ_U8F(16), n1 = IG_WQ_U8F(24);
#undef IG_WQ_U8F
            for (int r = 0; r < R; r++) {
                const __m256 gv = _mm256_set1_ps(IG_WQ_GS(r, g));
                sd[2 * r] = _mm256_fmadd_ps(e[2 * r], s0, sd[2 * r]);
                sd[2 * r + 1] = _mm256_fmadd_ps(e[2 * r + 1], s1, sd[2 * r + 1]);
                sm[2 * r] = _mm256_fmadd_ps(gv, n0, sm[2 * r]);
                sm[2 * r + 1] = _mm256_fmadd_ps(gv, n1, sm[2 * r + 1]);
            }
        }
        const __m128i *h = (const __m128i *)hb; /* f16 d[0..8), d[8..16), dmin[0..8), dmin[8..16) */
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128(h)), d1 = _mm256_cvtph_ps(_mm_loadu_si128(h + 1));
        const __m256 m0 = _mm256_cvtph_ps(_mm_loadu_si128(h + 2)), m1 = _mm256_cvtph_ps(_mm_loadu_si128(h + 3));
        for (int r = 0; r < R; r++) {
            acc[2 * r] = _mm256_fnmadd_ps(sm[2 * r], m0, _mm256_fmadd_ps(sd[2 * r], d0, acc[2 * r]));
            acc[2 * r + 1] = _mm256_fnmadd_ps(sm[2 * r + 1], m1, _mm256_fmadd_ps(sd[2 * r + 1], d1, acc[2 * r + 1]));
        }
    }
    for (int r = 0; r < 2 * R; r++) _mm256_storeu_ps(out + 8 * r, acc[r]);
#else
    for (int r = 0; r < R; r++) {
        const int8_t *xq = (const int8_t *)xb + r * xst;
        float a[16] = {0};
        for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
            const char *hb = panel + IG_WQ_KHDR(wq, G, g0);
            float sd[16] = {0}, sm[16] = {0};
            for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
                const uint8_t *gb = (const uint8_t *)panel + IG_WQ_KGRP(wq, G, g);
                float d[16] = {0};
                for (int k = g * G; k < IG_MIN(K, g * G + G); k++) /* exact int32 per activation block, then f32 */
                    if (k % IG_WQ_AG == 0) {
                        int32_t s[16] = {0};
                        for (int kk = k; kk < IG_MIN(IG_MIN(K, g * G + G), k + IG_WQ_AG); kk++)
                            for (int j = 0; j < 16; j++) s[j] += ig_wq_klevel(wq, (const char *)gb, kk - g * G, j) * (int32_t)xq[kk];
                        for (int j = 0; j < 16; j++) d[j] += (float)s[j] * IG_WQ_XS(r, k / IG_WQ_AG);
                    }
                for (int j = 0; j < 16; j++) sd[j] += d[j] * (float)gb[j], sm[j] += IG_WQ_GS(r, g) * (float)gb[16 + j];
            }
            IG_ALIGN64 float d[16], dm[16];
            ig_wq_f16x16(hb, d);
            ig_wq_f16x16(hb + 32, dm);
            for (int j = 0; j < 16; j++) a[j] += sd[j] * d[j] - sm[j] * dm[j];
        }
        memcpy(out + 16 * r, a, sizeof a);
    }
    (void)cb, (void)six;
#endif
#undef IG_WQ_XS
#undef IG_WQ_GS
}

/* Q8I: out[0..16) = x . W[panel] from the int16 row xb: per quad l of codes q[l][16][4], lane j's
 * 4 codes times x[4l..4l+3] as two pairs (vpdpwssd / vpmaddwd: lane j's sums land in two int32
 * slots), per block of IG_WQ_AG16 columns the slots folded into lane j's int32 total (exact: at
 * most 256 x 32767 x 128 < 2^31), then f_j += total_j x the block's scale in f32 (AVX-512: the
 * same steps as ig_wq_q8i_gemm, so a row's result does not depend on the
 * kernel its batch takes). */
#if defined(IG_AVX512)
/* Lane j's int32 total from the two slots of a Q8I quad's sums: a holds lanes 0..7 (slots 2j,
 * 2j + 1: code pairs (0, 1) and (2, 3)), b lanes 8..15. */
IG_INLINE __m512i ig_wq_q8i_fold(__m512i a, __m512i b) {
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, b), _mm512_permutex2var_epi32(a, od, b));
}
#endif

IG_INLINE void ig_wq_q8i_gemv(int K, const char *xb, const char *panel, float *out) {
    const int16_t *xw = (const int16_t *)xb;
    const float *xs = (const float *)(xb + IG_WQ_XS_OFF(IG_WQ_Q8I, K));
    const int8_t *q = (const int8_t *)(panel + 64);
    const int KQ = (K + 3) / 4, QG = IG_WQ_AG16 / 4;
#if defined(IG_AVX512)
    __m512 f = _mm512_setzero_ps();
    for (int u0 = 0; u0 < KQ; u0 += QG) {
        const int u1 = IG_MIN(KQ, u0 + QG);
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0; /* slots 2j, 2j + 1 of lane j (a0, a2), 8 + j (a1, a3) */
        int l = u0;
#if defined(__AVX512VNNI__)
#define IG_WQ_D16(a, w, x) a = ig_dpwssd512(a, w, x)
#else
#define IG_WQ_D16(a, w, x) a = _mm512_add_epi32(a, _mm512_madd_epi16(w, x))
#endif
#define IG_WQ_Q8I_STEP(l, a, b)                                                                          \
        do {                                                                                         \
            const int8_t *p = q + (size_t)(l) * 64;                                                  \
            long long xv;                                                                            \
            memcpy(&xv, xw + 4 * (size_t)(l), 8);                                                    \
            _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);                                       \
            const __m512i xx = _mm512_set1_epi64(xv);                                                \
            IG_WQ_D16(a, _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)), xx);          \
            IG_WQ_D16(b, _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32))), xx);   \
        } while (0)
        for (; l + 2 <= u1; l += 2) {
            IG_WQ_Q8I_STEP(l, a0, a1);
            IG_WQ_Q8I_STEP(l + 1, a2, a3);
        }
        if (l < u1) IG_WQ_Q8I_STEP(l, a0, a1);
#undef IG_WQ_Q8I_STEP
#undef IG_WQ_D16
        f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ig_wq_q8i_fold(_mm512_add_epi32(a0, a2), _mm512_add_epi32(a1, a3))),
                            _mm512_set1_ps(xs[u0 / QG]), f);
    }
    _mm512_storeu_ps(out, _mm512_mul_ps(f, _mm512_loadu_ps((const float *)panel)));
#elif defined(IG_AVX2)
    __m256 f[4]; /* lanes 4r..4r+3, two slots each */
    for (int r = 0; r < 4; r++) f[r] = _mm256_setzero_ps();
    for (int u0 = 0; u0 < KQ; u0 += QG) {
        const int u1 = IG_MIN(KQ, u0 + QG);
        __m256i a[4];
        for (int r = 0; r < 4; r++) a[r] = _mm256_setzero_si256();
        for (int l = u0; l < u1; l++) {
            const int8_t *p = q + (size_t)l * 64;
            long long xv;
            memcpy(&xv, xw + 4 * (size_t)l, 8);
            _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
            const __m256i xx = _mm256_set1_epi64x(xv);
            for (int r = 0; r < 4; r++) {
                const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 * r)));
#if defined(__AVXVNNI__)
                a[r] = _mm256_dpwssd_avx_epi32(a[r], w, xx);
#else
                a[r] = _mm256_add_epi32(a[r], _mm256_madd_epi16(w, xx));
#endif
            }
        }
        const __m256 s = _mm256_set1_ps(xs[u0 / QG]);
        for (int r = 0; r < 4; r++) f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r]), s, f[r]);
    }
    /* hadd(f0, f1) = lanes 0, 1, 4, 5 | 2, 3, 6, 7: the 64-bit permute puts them in order */
    const __m256 lo = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(f[0], f[1])), 0xD8));
    const __m256 hi = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(f[2], f[3])), 0xD8));
    _mm256_storeu_ps(out, _mm256_mul_ps(lo, _mm256_loadu_ps((const float *)panel)));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(hi, _mm256_loadu_ps((const float *)panel + 8)));
#else
    float f[16] = {0};
    for (int u0 = 0; u0 < KQ; u0 += QG) {
        int32_t a[16] = {0};
        for (int l = u0; l < IG_MIN(KQ, u0 + QG); l++)
            for (int j = 0; j < 16; j++)
                for (int i = 0; i < 4; i++) a[j] += (int32_t)xw[4 * l + i] * q[(size_t)l * 64 + 4 * j + i];
        for (int j = 0; j < 16; j++) f[j] += (float)a[j] * xs[u0 / QG];
    }
    for (int j = 0; j < 16; j++) {
        float s;
        memcpy(&s, panel + 4 * j, 4);
        out[j] = f[j] * s;
    }
#endif
}

/* Q8I: ig_wq_q8i_gemv for R rows at once (2 <= R <= 8 on AVX-512, 2 on AVX2; the decode's R = 1
 * keeps the single-row kernel and its two interleaved chains): each quad's codes are widened once
 * for all R rows, and each row's int32 sums and f32 steps are the single-row kernel's. On AVX2 two
 * rows' int32 and f32 vectors (8 + 8 ymm) do not fit beside the codes, so the f32 ones live in
 * memory (one pass per activation block of 64 quads) and each widened vector of codes goes to both
 * rows before the next is loaded (8 + 2 + 2 ymm); bench shape gate|up at T = 128, one Zen 2 core:
 * 94 GFLOP/s against 78 row by row (bf16 70; registers for all, which spilled, 80.6 against 90.7
 * on a Zen 4 core's AVX2 build). Scalar C goes row by row. */
IG_INLINE void ig_wq_q8i_gemm(int K, int R, const char *xb, size_t xst, const char *panel, float *out) {
    const size_t xso = IG_WQ_XS_OFF(IG_WQ_Q8I, K);
    const int8_t *q = (const int8_t *)(panel + 64);
    const int KQ = (K + 3) / 4, QG = IG_WQ_AG16 / 4;
#if defined(IG_AVX512)
#if defined(__AVX512VNNI__)
#define IG_WQ_D16(a, w, x) ig_dpwssd512(a, w, x)
#else
#define IG_WQ_D16(a, w, x) _mm512_add_epi32(a, _mm512_madd_epi16(w, x))
#endif
    __m512 f[8]; /* as the single-row kernel's, per row */
    for (int r = 0; r < R; r++) f[r] = _mm512_setzero_ps();
    for (int u0 = 0; u0 < KQ; u0 += QG) {
        const int u1 = IG_MIN(KQ, u0 + QG);
        __m512i a0[8], a1[8];
        for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_si512();
        for (int l = u0; l < u1; l++) {
            const int8_t *p = q + (size_t)l * 64;
            _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
            const __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
            const __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32)));
            for (int r = 0; r < R; r++) {
                long long xv;
                memcpy(&xv, (const int16_t *)(xb + r * xst) + 4 * (size_t)l, 8);
                const __m512i xx = _mm512_set1_epi64(xv);
                a0[r] = IG_WQ_D16(a0[r], w0, xx);
                a1[r] = IG_WQ_D16(a1[r], w1, xx);
            }
        }
        for (int r = 0; r < R; r++) {
            const __m512 s = _mm512_set1_ps(((const float *)(xb + r * xst + xso))[u0 / QG]);
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ig_wq_q8i_fold(a0[r], a1[r])), s, f[r]);
        }
    }
#undef IG_WQ_D16
    const __m512 sc = _mm512_loadu_ps((const float *)panel);
    for (int r = 0; r < R; r++) _mm512_storeu_ps(out + 16 * r, _mm512_mul_ps(f[r], sc));
#elif defined(IG_AVX2)
    IG_ALIGN64 float f[IG_WQ_XR][32]; /* the single-row kernel's f[4] per row, in memory: one pass per block */
    memset(f, 0, sizeof f);
    for (int u0 = 0; u0 < KQ; u0 += QG) {
        const int u1 = IG_MIN(KQ, u0 + QG);
        __m256i a[IG_WQ_XR][4];
        for (int r = 0; r < R; r++)
            for (int i = 0; i < 4; i++) a[r][i] = _mm256_setzero_si256();
        for (int l = u0; l < u1; l++) {
            const int8_t *p = q + (size_t)l * 64;
            _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
            __m256i xx[IG_WQ_XR];
            for (int r = 0; r < R; r++) {
                long long xv;
                memcpy(&xv, (const int16_t *)(xb + r * xst) + 4 * (size_t)l, 8);
                xx[r] = _mm256_set1_epi64x(xv);
            }
            for (int i = 0; i < 4; i++) {
                const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 16 * i)));
                for (int r = 0; r < R; r++) {
#if defined(__AVXVNNI__)
                    a[r][i] = _mm256_dpwssd_avx_epi32(a[r][i], w, xx[r]);
#else
                    a[r][i] = ig_maddwd_acc256(a[r][i], w, xx[r]);
#endif
                }
            }
        }
        for (int r = 0; r < R; r++) {
            const __m256 s = _mm256_set1_ps(((const float *)(xb + r * xst + xso))[u0 / QG]);
            for (int i = 0; i < 4; i++)
                _mm256_store_ps(f[r] + 8 * i, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][i]), s, _mm256_load_ps(f[r] + 8 * i)));
        }
    }
    for (int r = 0; r < R; r++) {
        const __m256 f0 = _mm256_load_ps(f[r]), f1 = _mm256_load_ps(f[r] + 8), f2 = _mm256_load_ps(f[r] + 16),
                     f3 = _mm256_load_ps(f[r] + 24);
        const __m256 lo = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(f0, f1)), 0xD8));
        const __m256 hi = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(f2, f3)), 0xD8));
        _mm256_storeu_ps(out + 16 * r, _mm256_mul_ps(lo, _mm256_loadu_ps((const float *)panel)));
        _mm256_storeu_ps(out + 16 * r + 8, _mm256_mul_ps(hi, _mm256_loadu_ps((const float *)panel + 8)));
    }
#else
    for (int r = 0; r < R; r++) ig_wq_q8i_gemv(K, xb + r * xst, panel, out + 16 * r);
    (void)xso, (void)q, (void)KQ, (void)QG;
#endif
}

#if defined(IG_AVX512) && defined(__AVX512VNNI__)
/* Q8A with AVX-512 VNNI: ig_wq_igemv for R <= IG_WQ_XR rows at once (decode too, so a row's
 * result is the same alone or in a batch). vpdpbusd takes unsigned bytes, so each activation code
 * goes in as x + 128 (its sign bit flipped), which the weights need not know: per activation
 * block the panel's column sums sum_k q (one vpdpbusd against bytes of 1, shared by the rows) times
 * 128 come off every row's int32 sums (exact). The float steps are ig_wq_igemv's. */
IG_INLINE void ig_wq_q8a_gemm(int K, int R, const char *xb, size_t xst, const char *panel, float *out) {
    const size_t xso = IG_WQ_XS_OFF(IG_WQ_Q8A, K);
    const int8_t *q = (const int8_t *)(panel + 64);
    const int KQ = (K + 3) / 4, QG = IG_WQ_AG / 4;
    const __m512i ones = _mm512_set1_epi8(1), flip = _mm512_set1_epi8((char)0x80);
    __m512 f[IG_WQ_XR];
    for (int r = 0; r < R; r++) f[r] = _mm512_setzero_ps();
    for (int g = 0; g * QG < KQ; g++) {
        const int u1 = IG_MIN(KQ, g * QG + QG);
        __m512i a[IG_WQ_XR], cs = _mm512_setzero_si512();
        for (int r = 0; r < R; r++) a[r] = _mm512_setzero_si512();
        for (int l = g * QG; l < u1; l++) {
            const __m512i w = _mm512_loadu_si512((const void *)(q + (size_t)l * 64));
            _mm_prefetch((const char *)q + (size_t)l * 64 + 8192, _MM_HINT_T0);
            cs = ig_dpbusd512(cs, ones, w);
            for (int r = 0; r < R; r++) {
                int32_t xw;
                memcpy(&xw, xb + r * xst + 4 * (size_t)l, 4);
                a[r] = ig_dpbusd512(a[r], _mm512_xor_si512(_mm512_set1_epi32(xw), flip), w);
            }
        }
        const __m512i c = _mm512_slli_epi32(cs, 7);
        for (int r = 0; r < R; r++)
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[r], c)),
                                   _mm512_set1_ps(((const float *)(xb + r * xst + xso))[g]), f[r]);
    }
    const __m512 sc = _mm512_loadu_ps((const float *)panel);
    for (int r = 0; r < R; r++) _mm512_storeu_ps(out + 16 * r, _mm512_mul_ps(f[r], sc));
}
#elif defined(IG_AVX2)
/* Q8A on AVX2: ig_wq_igemv for R <= IG_WQ_XR rows at once (decode too), each quad's 64 weight
 * bytes loaded once for the R rows. vpmaddubsw's int16 pairs would saturate with x + 128, so each
 * row keeps the sign trick: |x| as u8 times w with x's sign (pairs at most 2 127 127 < 2^15),
 * summed into int32 against ones; lanes 0..7 and 8..15 of a row are two vectors, and each
 * activation group's sums go on in f32 by one vector FMA a half (ig_wq_igemv's steps: GCC -O3
 * made its per-group loop scalar extracts and inserts; bench shape gate|up 2048 x 16384 at T =
 * 128, one Zen 2 core: 54 GFLOP/s row by row that way, bf16 71). */
IG_INLINE void ig_wq_q8a_gemm(int K, int R, const char *xb, size_t xst, const char *panel, float *out) {
    const size_t xso = IG_WQ_XS_OFF(IG_WQ_Q8A, K);
    const int8_t *q = (const int8_t *)(panel + 64);
    const int KQ = (K + 3) / 4, QG = IG_WQ_AG / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[2 * IG_WQ_XR];
    for (int r = 0; r < 2 * R; r++) f[r] = _mm256_setzero_ps();
    for (int g = 0; g * QG < KQ; g++) {
        const int u1 = IG_MIN(KQ, g * QG + QG);
        __m256i a[2 * IG_WQ_XR];
        for (int r = 0; r < 2 * R; r++) a[r] = _mm256_setzero_si256();
        for (int l = g * QG; l < u1; l++) {
            const __m256i *p = (const __m256i *)(q + (size_t)l * 64);
            _mm_prefetch((const char *)p + 8192, _MM_HINT_T0);
            const __m256i w0 = _mm256_loadu_si256(p), w1 = _mm256_loadu_si256(p + 1);
            for (int r = 0; r < R; r++) {
                int32_t xw;
                memcpy(&xw, xb + r * xst + 4 * (size_t)l, 4);
                const __m256i xv = _mm256_set1_epi32(xw), ax = _mm256_sign_epi8(xv, xv);
                a[2 * r] = _mm256_add_epi32(a[2 * r], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xv)), ones));
                a[2 * r + 1] =
                    _mm256_add_epi32(a[2 * r + 1], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xv)), ones));
            }
        }
        for (int r = 0; r < R; r++) {
            const __m256 s = _mm256_set1_ps(((const float *)(xb + r * xst + xso))[g]);
            f[2 * r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[2 * r]), s, f[2 * r]);
            f[2 * r + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[2 * r + 1]), s, f[2 * r + 1]);
        }
    }
    const __m256 s0 = _mm256_loadu_ps((const float *)panel), s1 = _mm256_loadu_ps((const float *)panel + 8);
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(out + 16 * r, _mm256_mul_ps(f[2 * r], s0));
        _mm256_storeu_ps(out + 16 * r + 8, _mm256_mul_ps(f[2 * r + 1], s1));
    }
}
#endif

/* out[16 r + j] = row r . W[panel] lane j for R <= IG_WQ_XRB(wq) rows quantized by ig_wq_xquant
 * (Q8A, Q4I, Q6I, Q8I) at xb + r xst. */
IG_INLINE void ig_wq_xgemm(int wq, int K, int G, int R, const char *xb, size_t xst, const char *panel, float *out) {
    if (IG_WQ_KI(wq)) {
        ig_wq_ki_gemm(wq, K, G, R, xb, xst, panel, out);
        return;
    }
    if (wq == IG_WQ_Q8I && R > 1) {
        ig_wq_q8i_gemm(K, R, xb, xst, panel, out);
        return;
    }
#if (defined(IG_AVX512) && defined(__AVX512VNNI__)) || defined(IG_AVX2)
    if (wq == IG_WQ_Q8A) {
        ig_wq_q8a_gemm(K, R, xb, xst, panel, out);
        return;
    }
#endif
    for (int r = 0; r < R; r++) {
        const char *x = xb + r * xst;
        if (wq == IG_WQ_Q8I) ig_wq_q8i_gemv(K, x, panel, out + 16 * r);
        else ig_wq_igemv(K, (const int8_t *)x, (const float *)(x + IG_WQ_XS_OFF(wq, K)), panel, out + 16 * r);
    }
}

/* out[16 r + j] = row r . W[panel] lane j for the n rows of a block (any n) at xb + r xst, by
 * ig_wq_xgemm on IG_WQ_XRB(wq) rows at a time (R a constant at each call, so its row loops
 * unroll), then IG_WQ_XR, then one. */
IG_INLINE void ig_wq_xgemm_rows(int wq, int K, int G, int n, const char *xb, size_t xst, const char *panel, float *out) {
    int r = 0;
#if defined(IG_AVX512)
    if (wq == IG_WQ_Q8I)
        for (; r + 8 <= n; r += 8) ig_wq_xgemm(wq, K, G, 8, xb + r * xst, xst, panel, out + 16 * r);
#endif
    for (; r + IG_WQ_XR <= n; r += IG_WQ_XR) ig_wq_xgemm(wq, K, G, IG_WQ_XR, xb + r * xst, xst, panel, out + 16 * r);
    for (; r < n; r++) ig_wq_xgemm(wq, K, G, 1, xb + r * xst, xst, panel, out + 16 * r);
}

/* Sums of xf over each group of G (the min term of Q4G / Q4K / Q6K, the zero-point term of Q4Z / Q8Z). */
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
        __m128i v0 = _mm_set1_epi64x(ig_wq_ld64(b + (size_t)k * 8));
        __m128i v1 = _mm_set1_epi64x(ig_wq_ld64(b + (size_t)k * 8 + 8));
        __m512i q0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v0), shift), lo);
        __m512i q1 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v1), shift), lo);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q0), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k + 1]), _mm512_cvtepi32_ps(q1), a1);
    }
    for (; k < n; k++) {
        __m128i v0 = _mm_set1_epi64x(ig_wq_ld64(b + (size_t)k * 8));
        __m512i q0 = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(v0), shift), lo);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q0), a0);
    }
    return _mm512_add_ps(a0, a1);
}

/* the same for one Q6K group's columns c[n][12] (8 bytes of nibbles, a word of high bit pairs) */
IG_INLINE __m512 ig_wq_dot6(const float *xf, const uint8_t *c, int n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    const __m512i lo = _mm512_set1_epi32(15), three = _mm512_set1_epi32(3);
    const __m512i shift = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hsh = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (int k = 0; k < n; k++) {
        const uint8_t *p = c + (size_t)k * 12;
        uint32_t hw;
        memcpy(&hw, p + 8, 4);
        __m512i q = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_set1_epi64x(ig_wq_ld64(p))), shift), lo);
        __m512i h = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)hw), hsh), three);
        q = _mm512_or_si512(q, _mm512_slli_epi32(h, 4));
        if (k & 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q), a1);
        else a0 = _mm512_fmadd_ps(_mm512_set1_ps(xf[k]), _mm512_cvtepi32_ps(q), a0);
    }
    return _mm512_add_ps(a0, a1);
}

/* out[0..16) = x . W[panel] for a whole panel (decode). gs: the group sums (Q4G, Q4K, Q6K). */
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
    if (IG_WQ_ISZ(wq)) { /* per group: scale (dot - gs z) */
        for (int g = 0; g * G < K; g++) {
            const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
            _mm_prefetch(gb + 2048, _MM_HINT_T0);
            const int n = IG_MIN(G, K - g * G);
            __m512 d = wq == IG_WQ_Q8Z ? ig_wq_dot8(xf + g * G, (const int8_t *)(gb + 64), 0, n)
                                       : ig_wq_dot4(xf + g * G, (const uint8_t *)gb + 64, n);
            d = _mm512_fnmadd_ps(_mm512_set1_ps(gs[g]), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32))), d);
            acc = _mm512_fmadd_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb)), acc);
        }
        _mm512_storeu_ps(out, acc);
        return;
    }
    if (IG_WQ_ISK(wq)) {
        /* per superblock: sum_g dot_g sc_g times d, minus sum_g gs_g mn_g times dmin */
        for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
            const char *hb = panel + IG_WQ_KHDR(wq, G, g0);
            __m512 sd = _mm512_setzero_ps(), sm = sd;
            for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
                const char *gb = panel + IG_WQ_KGRP(wq, G, g);
                _mm_prefetch(gb + 2048, _MM_HINT_T0);
                __m512 d = IG_WQ_K6(wq) ? ig_wq_dot6(xf + g * G, (const uint8_t *)gb + 32, IG_MIN(G, K - g * G))
                                        : ig_wq_dot4(xf + g * G, (const uint8_t *)gb + 32, IG_MIN(G, K - g * G));
                const __m128i scb = _mm_loadu_si128((const __m128i *)gb), mnb = _mm_loadu_si128((const __m128i *)(gb + 16));
                __m512 sc = _mm512_cvtepi32_ps(wq == IG_WQ_Q6S ? _mm512_cvtepi8_epi32(scb) : _mm512_cvtepu8_epi32(scb));
                __m512 mn = _mm512_cvtepi32_ps(wq == IG_WQ_Q6S ? _mm512_cvtepi8_epi32(mnb) : _mm512_cvtepu8_epi32(mnb));
                sd = _mm512_fmadd_ps(d, sc, sd);
                sm = _mm512_fmadd_ps(_mm512_set1_ps(gs[g]), mn, sm);
            }
            acc = _mm512_fmadd_ps(sd, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hb)), acc);
            acc = _mm512_fnmadd_ps(sm, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hb + 32))), acc);
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

/* the same for one Q6K group's columns c[n][12] */
IG_INLINE void ig_wq_dot6(const float *xf, const uint8_t *c, int n, __m256 *lo, __m256 *hi) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    const __m256i m15 = _mm256_set1_epi32(15), three = _mm256_set1_epi32(3);
    const __m256i hs0 = _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0), hs1 = _mm256_set_epi32(30, 28, 26, 24, 22, 20, 18, 16);
    for (int k = 0; k < n; k++) {
        const uint8_t *p = c + (size_t)k * 12;
        uint32_t hw;
        memcpy(&hw, p + 8, 4);
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), h = _mm256_set1_epi32((int)hw);
        __m256i q0 = _mm256_or_si256(_mm256_and_si256(v, m15), _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(h, hs0), three), 4));
        __m256i q1 = _mm256_or_si256(_mm256_srli_epi32(v, 4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(h, hs1), three), 4));
        __m256 x0 = _mm256_set1_ps(xf[k]);
        a0 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(q0), a0);
        a1 = _mm256_fmadd_ps(x0, _mm256_cvtepi32_ps(q1), a1);
    }
    *lo = a0, *hi = a1;
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
    if (IG_WQ_ISZ(wq)) { /* per group: scale (dot - gs z) */
        for (int g = 0; g * G < K; g++) {
            const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
            _mm_prefetch(gb + 2048, _MM_HINT_T0);
            const int n = IG_MIN(G, K - g * G);
            if (wq == IG_WQ_Q8Z) ig_wq_dot8(xf + g * G, (const int8_t *)(gb + 64), 0, n, &lo, &hi);
            else ig_wq_dot4(xf + g * G, (const uint8_t *)(gb + 64), n, &lo, &hi);
            const __m128i *h = (const __m128i *)gb; /* f16 scale[0..8), scale[8..16), zero[0..8), zero[8..16) */
            __m256 xs = _mm256_set1_ps(gs[g]);
            lo = _mm256_fnmadd_ps(xs, _mm256_cvtph_ps(_mm_loadu_si128(h + 2)), lo);
            hi = _mm256_fnmadd_ps(xs, _mm256_cvtph_ps(_mm_loadu_si128(h + 3)), hi);
            c0 = _mm256_fmadd_ps(lo, _mm256_cvtph_ps(_mm_loadu_si128(h)), c0);
            c1 = _mm256_fmadd_ps(hi, _mm256_cvtph_ps(_mm_loadu_si128(h + 1)), c1);
        }
        _mm256_storeu_ps(out, c0);
        _mm256_storeu_ps(out + 8, c1);
        return;
    }
    if (IG_WQ_ISK(wq)) {
        for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
            const __m128i *h = (const __m128i *)(panel + IG_WQ_KHDR(wq, G, g0)); /* f16 d[0..8), d[8..16), dmin[0..8), dmin[8..16) */
            __m256 d0 = _mm256_setzero_ps(), d1 = d0, m0 = d0, m1 = d0;
            for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
                const char *gb = panel + IG_WQ_KGRP(wq, G, g);
                _mm_prefetch(gb + 2048, _MM_HINT_T0);
                if (IG_WQ_K6(wq)) ig_wq_dot6(xf + g * G, (const uint8_t *)(gb + 32), IG_MIN(G, K - g * G), &lo, &hi);
                else ig_wq_dot4(xf + g * G, (const uint8_t *)(gb + 32), IG_MIN(G, K - g * G), &lo, &hi);
                __m256 xs = _mm256_set1_ps(gs[g]);
#define IG_WQ_C8(o) (wq == IG_WQ_Q6S ? _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(gb + (o)))) \
                                     : _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(gb + (o)))))
                d0 = _mm256_fmadd_ps(lo, _mm256_cvtepi32_ps(IG_WQ_C8(0)), d0);
                d1 = _mm256_fmadd_ps(hi, _mm256_cvtepi32_ps(IG_WQ_C8(8)), d1);
                m0 = _mm256_fmadd_ps(xs, _mm256_cvtepi32_ps(IG_WQ_C8(16)), m0);
                m1 = _mm256_fmadd_ps(xs, _mm256_cvtepi32_ps(IG_WQ_C8(24)), m1);
#undef IG_WQ_C8
            }
            c0 = _mm256_fnmadd_ps(m0, _mm256_cvtph_ps(_mm_loadu_si128(h + 2)), _mm256_fmadd_ps(d0, _mm256_cvtph_ps(_mm_loadu_si128(h)), c0));
            c1 = _mm256_fnmadd_ps(m1, _mm256_cvtph_ps(_mm_loadu_si128(h + 3)), _mm256_fmadd_ps(d1, _mm256_cvtph_ps(_mm_loadu_si128(h + 1)), c1));
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

#else /* AArch64 NEON and portable scalar C: one GEMV over per-group column dots */

#if defined(IG_NEON)
/* d[0..16) = sum over k < n of xf[k] times lane j's code; the codes of a column widened to 4 x 4
 * f32 and FMA'd by the broadcast x, two columns per step into 8 chains. COLF(k, f) widens
 * column k into float32x4_t f[4]. */
#define IG_WQ_NEON_GDOT(COLF)                                                                         \
    float32x4_t a[8];                                                                              \
    for (int g = 0; g < 8; g++) a[g] = vdupq_n_f32(0.0f);                                          \
    int k = 0;                                                                                     \
    for (; k + 2 <= n; k += 2) {                                                                   \
        float32x4_t f0[4], f1[4];                                                                  \
        COLF(k, f0);                                                                               \
        COLF(k + 1, f1);                                                                           \
        for (int g = 0; g < 4; g++) {                                                              \
            a[g] = vfmaq_n_f32(a[g], f0[g], xf[k]);                                                \
            a[4 + g] = vfmaq_n_f32(a[4 + g], f1[g], xf[k + 1]);                                    \
        }                                                                                          \
    }                                                                                              \
    if (k < n) {                                                                                   \
        float32x4_t f0[4];                                                                         \
        COLF(k, f0);                                                                               \
        for (int g = 0; g < 4; g++) a[g] = vfmaq_n_f32(a[g], f0[g], xf[k]);                        \
    }                                                                                              \
    for (int g = 0; g < 4; g++) vst1q_f32(d + 4 * g, vaddq_f32(a[g], a[4 + g]));

/* u8 x 8 (lanes 0..7) and u8 x 8 (lanes 8..15) as 16 f32 */
IG_INLINE void ig_wq_neon_u8f(uint8x8_t lo, uint8x8_t hi, float32x4_t *f) {
    uint16x8_t l = vmovl_u8(lo), h = vmovl_u8(hi);
    f[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(l)));
    f[1] = vcvtq_f32_u32(vmovl_high_u16(l));
    f[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(h)));
    f[3] = vcvtq_f32_u32(vmovl_high_u16(h));
}
IG_INLINE void ig_wq_neon_gdot8(const float *xf, const int8_t *q, int n, float *d) {
#define IG_WQ_COL8(kk, f)                                                                               \
    do {                                                                                           \
        int8x16_t v = vld1q_s8(q + (size_t)(kk) * 16);                                             \
        int16x8_t l = vmovl_s8(vget_low_s8(v)), h = vmovl_high_s8(v);                              \
        f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(l)));                                          \
        f[1] = vcvtq_f32_s32(vmovl_high_s16(l));                                                   \
        f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));                                          \
        f[3] = vcvtq_f32_s32(vmovl_high_s16(h));                                                   \
    } while (0)
    IG_WQ_NEON_GDOT(IG_WQ_COL8)
#undef IG_WQ_COL8
}
/* nibbles: column k is 8 bytes, lane j < 8 the low nibble of byte j, lane j >= 8 the high one of j - 8 */
IG_INLINE void ig_wq_neon_gdot4(const float *xf, const uint8_t *b, int n, float *d) {
#define IG_WQ_COL4(kk, f)                                                                               \
    do {                                                                                           \
        uint8x8_t v = vld1_u8(b + (size_t)(kk) * 8);                                               \
        ig_wq_neon_u8f(vand_u8(v, vdup_n_u8(15)), vshr_n_u8(v, 4), f);                             \
    } while (0)
    IG_WQ_NEON_GDOT(IG_WQ_COL4)
#undef IG_WQ_COL4
}
/* 6-bit levels: column k is 12 bytes, nibbles as above then a word whose bits 2j, 2j + 1 are
 * lane j's high pair */
IG_INLINE void ig_wq_gdot6(const float *xf, const uint8_t *c, int n, float *d) {
    const int32x4_t sh[4] = {{0, -2, -4, -6}, {-8, -10, -12, -14}, {-16, -18, -20, -22}, {-24, -26, -28, -30}};
#define IG_WQ_COL6(kk, f)                                                                               \
    do {                                                                                           \
        const uint8_t *p = c + (size_t)(kk) * 12;                                                  \
        uint8x8_t v = vld1_u8(p);                                                                  \
        uint16x8_t l = vmovl_u8(vand_u8(v, vdup_n_u8(15))), h = vmovl_u8(vshr_n_u8(v, 4));         \
        uint32x4_t hw = vld1q_dup_u32((const uint32_t *)(p + 8)), n4[4];                           \
        n4[0] = vmovl_u16(vget_low_u16(l)), n4[1] = vmovl_high_u16(l);                             \
        n4[2] = vmovl_u16(vget_low_u16(h)), n4[3] = vmovl_high_u16(h);                             \
        for (int g = 0; g < 4; g++)                                                                \
            f[g] = vcvtq_f32_u32(vorrq_u32(n4[g], vshlq_n_u32(vandq_u32(vshlq_u32(hw, sh[g]), vdupq_n_u32(3)), 4))); \
    } while (0)
    IG_WQ_NEON_GDOT(IG_WQ_COL6)
#undef IG_WQ_COL6
}
#undef IG_WQ_NEON_GDOT

#if defined(IG_SVE)
/* SVE: LD1SB / LD1B widen the codes straight into 32-bit lanes, so a column costs a load, an
 * add, a subtract and an FMA per vector (NEON: 15 instructions per 16 lanes). 256 bits: a column is two
 * vectors; 512 bits and up: one (predicated to 16 lanes; q4's nibble halves take 8 each); at 128
 * bits (NEON's width) and other lengths the NEON code runs. */
/* integer codes (|v| < 2^22) to f32 without SCVTF (2 cycles per vector on Neoverse V1): v added
 * to the bits of 1.5 * 2^23 is the float 1.5 * 2^23 + v, exactly; subtracting 1.5 * 2^23 leaves v */
#define IG_WQ_SVE_CVT(pg, v) \
    svsub_n_f32_x(pg, svreinterpret_f32_s32(svadd_n_s32_x(pg, svreinterpret_s32_u32(svreinterpret_u32_s32(v)), 0x4B400000)), 12582912.0f)
#define IG_WQ_SVE_CVTU(pg, v) IG_WQ_SVE_CVT(pg, svreinterpret_s32_u32(v))
IG_INLINE void ig_wq_gdot8(const float *xf, const int8_t *q, int n, float *d) {
    const int NL = (int)svcntw();
    if (NL != 8 && NL < 16) {
        ig_wq_neon_gdot8(xf, q, n, d);
        return;
    }
    const svbool_t pg = svwhilelt_b32_s32(0, IG_MIN(NL, 8)), p16 = svwhilelt_b32_s32(0, 16);
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int k = 0;
    if (NL == 8) {
        for (; k + 2 <= n; k += 2) {
            const int8_t *c = q + (size_t)k * 16;
            a0 = svmla_n_f32_x(pg, a0, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c)), xf[k]);
            a1 = svmla_n_f32_x(pg, a1, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c + 8)), xf[k]);
            a2 = svmla_n_f32_x(pg, a2, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c + 16)), xf[k + 1]);
            a3 = svmla_n_f32_x(pg, a3, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c + 24)), xf[k + 1]);
        }
        for (; k < n; k++) {
            const int8_t *c = q + (size_t)k * 16;
            a0 = svmla_n_f32_x(pg, a0, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c)), xf[k]);
            a1 = svmla_n_f32_x(pg, a1, IG_WQ_SVE_CVT(pg, svld1sb_s32(pg, c + 8)), xf[k]);
        }
        svst1_f32(pg, d, svadd_f32_x(pg, a0, a2));
        svst1_f32(pg, d + 8, svadd_f32_x(pg, a1, a3));
        return;
    }
    for (; k + 2 <= n; k += 2) {
        a0 = svmla_n_f32_m(p16, a0, IG_WQ_SVE_CVT(p16, svld1sb_s32(p16, q + (size_t)k * 16)), xf[k]);
        a1 = svmla_n_f32_m(p16, a1, IG_WQ_SVE_CVT(p16, svld1sb_s32(p16, q + (size_t)k * 16 + 16)), xf[k + 1]);
    }
    if (k < n) a0 = svmla_n_f32_m(p16, a0, IG_WQ_SVE_CVT(p16, svld1sb_s32(p16, q + (size_t)k * 16)), xf[k]);
    svst1_f32(p16, d, svadd_f32_m(p16, a0, a1));
}
IG_INLINE void ig_wq_gdot4(const float *xf, const uint8_t *b, int n, float *d) {
    const int NL = (int)svcntw();
    if (NL != 8 && NL < 16) {
        ig_wq_neon_gdot4(xf, b, n, d);
        return;
    }
    const svbool_t pg = svwhilelt_b32_s32(0, 8); /* lanes 0..7: bytes 0..7 of a column */
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int k = 0;
    for (; k + 2 <= n; k += 2) {
        svuint32_t v0 = svld1ub_u32(pg, b + (size_t)k * 8), v1 = svld1ub_u32(pg, b + (size_t)k * 8 + 8);
        a0 = svmla_n_f32_m(pg, a0, IG_WQ_SVE_CVTU(pg, svand_n_u32_x(pg, v0, 15)), xf[k]);
        a1 = svmla_n_f32_m(pg, a1, IG_WQ_SVE_CVTU(pg, svlsr_n_u32_x(pg, v0, 4)), xf[k]);
        a2 = svmla_n_f32_m(pg, a2, IG_WQ_SVE_CVTU(pg, svand_n_u32_x(pg, v1, 15)), xf[k + 1]);
        a3 = svmla_n_f32_m(pg, a3, IG_WQ_SVE_CVTU(pg, svlsr_n_u32_x(pg, v1, 4)), xf[k + 1]);
    }
    if (k < n) {
        svuint32_t v0 = svld1ub_u32(pg, b + (size_t)k * 8);
        a0 = svmla_n_f32_m(pg, a0, IG_WQ_SVE_CVTU(pg, svand_n_u32_x(pg, v0, 15)), xf[k]);
        a1 = svmla_n_f32_m(pg, a1, IG_WQ_SVE_CVTU(pg, svlsr_n_u32_x(pg, v0, 4)), xf[k]);
    }
    svst1_f32(pg, d, svadd_f32_m(pg, a0, a2));
    svst1_f32(pg, d + 8, svadd_f32_m(pg, a1, a3));
}
#else
IG_INLINE void ig_wq_gdot8(const float *xf, const int8_t *q, int n, float *d) { ig_wq_neon_gdot8(xf, q, n, d); }
IG_INLINE void ig_wq_gdot4(const float *xf, const uint8_t *b, int n, float *d) { ig_wq_neon_gdot4(xf, b, n, d); }
#endif

#else /* portable scalar C */

IG_INLINE void ig_wq_gdot8(const float *xf, const int8_t *q, int n, float *d) {
    for (int j = 0; j < 16; j++) d[j] = 0.0f;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 16; j++) d[j] += xf[k] * (float)q[(size_t)k * 16 + j];
}
IG_INLINE void ig_wq_gdot4(const float *xf, const uint8_t *b, int n, float *d) {
    for (int j = 0; j < 16; j++) d[j] = 0.0f;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 8; j++) {
            d[j] += xf[k] * (float)(b[k * 8 + j] & 15);
            d[j + 8] += xf[k] * (float)(b[k * 8 + j] >> 4);
        }
}
IG_INLINE void ig_wq_gdot6(const float *xf, const uint8_t *c, int n, float *d) {
    for (int j = 0; j < 16; j++) d[j] = 0.0f;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 16; j++) d[j] += xf[k] * (float)ig_wq_klevel(IG_WQ_Q6K, (const char *)c - 32, k, j);
}

#endif

IG_INLINE void ig_wq_gemv(int wq, int K, int G, const float *xf, const float *gs, const char *panel, float *out) {
    IG_ALIGN64 float a[16] = {0}, d[16], s[16], m[16];
    if (wq == IG_WQ_Q8C) {
        ig_wq_gdot8(xf, (const int8_t *)(panel + 64), K, d);
        memcpy(s, panel, 64);
        for (int j = 0; j < 16; j++) out[j] = d[j] * s[j];
        return;
    }
    if (IG_WQ_ISK(wq)) {
        /* per superblock: sum_g dot_g sc_g times d, minus sum_g gs_g mn_g times dmin */
        for (int g0 = 0; g0 * G < K; g0 += IG_WQ_KSB) {
            const char *hb = panel + IG_WQ_KHDR(wq, G, g0);
            float sd[16] = {0}, sm[16] = {0};
            for (int g = g0; g < g0 + IG_WQ_KSB && g * G < K; g++) {
                const char *gb = panel + IG_WQ_KGRP(wq, G, g);
                __builtin_prefetch(gb + 2048);
                if (IG_WQ_K6(wq)) ig_wq_gdot6(xf + g * G, (const uint8_t *)gb + 32, IG_MIN(G, K - g * G), d);
                else ig_wq_gdot4(xf + g * G, (const uint8_t *)gb + 32, IG_MIN(G, K - g * G), d);
                for (int j = 0; j < 16; j++) {
                    sd[j] += d[j] * IG_WQ_KSC(wq, gb, j);
                    sm[j] += gs[g] * IG_WQ_KSC(wq, gb, 16 + j);
                }
            }
            ig_wq_f16x16(hb, s);
            ig_wq_f16x16(hb + 32, m);
            for (int j = 0; j < 16; j++) a[j] += sd[j] * s[j] - sm[j] * m[j];
        }
        memcpy(out, a, sizeof a);
        return;
    }
    for (int g = 0; g * G < K; g++) { /* Q8G, Q4G, Q4Z, Q8Z: one scale (and min or zero) per group */
        const char *gb = panel + (size_t)g * IG_WQ_GBYTES(wq, G);
        const int n = IG_MIN(G, K - g * G);
        __builtin_prefetch(gb + 2048);
        if (wq == IG_WQ_Q8G) ig_wq_gdot8(xf + g * G, (const int8_t *)gb + 32, n, d);
        else if (wq == IG_WQ_Q8Z) ig_wq_gdot8(xf + g * G, (const int8_t *)gb + 64, n, d);
        else ig_wq_gdot4(xf + g * G, (const uint8_t *)gb + 64, n, d);
        ig_wq_f16x16(gb, s);
        if (wq == IG_WQ_Q8G) {
            for (int j = 0; j < 16; j++) a[j] += s[j] * d[j];
            continue;
        }
        ig_wq_f16x16(gb + 32, m);
        if (IG_WQ_ISZ(wq)) /* scale (dot - gs z) */
            for (int j = 0; j < 16; j++) a[j] += s[j] * (d[j] - gs[g] * m[j]);
        else /* Q4G: scale dot + min gs */
            for (int j = 0; j < 16; j++) a[j] += s[j] * d[j] + m[j] * gs[g];
    }
    memcpy(out, a, sizeof a);
}

#endif
#endif /* IG_CPU_QUANT_H */
