/* pack.c — weight layout planning, packing and writing (see pack.h). */
#include "pack.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"
#include "../templates/cpu/kv_quant.h" /* ig_f32_to_e4m3: the fp8 KV rows' e4m3 rule, for f8r */

#define ALIGN 64u

uint16_t pk_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

uint16_t pk_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN: quiet */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds past 65504: inf */
    if (a < 0x38800000u) {                       /* below 2^-14: a subnormal half, in units of 2^-24 */
        if (a < 0x33000000u) return sign;        /* at most 2^-25: zero (the tie goes to even) */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23); /* |f| = m 2^(e - 150) */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u))) r++; /* may carry into the smallest normal */
        return (uint16_t)(sign | r);
    }
    uint32_t v = a - 0x38000000u;     /* exponent rebiased 127 -> 15 */
    v += 0xfffu + ((v >> 13) & 1u); /* round to nearest even on the 13 dropped bits */
    return (uint16_t)(sign | (v >> 13));
}

/* bf16 or f16: 2-byte elements */
static int is16(ig_dtype dt) { return dt == IG_DTYPE_BF16 || dt == IG_DTYPE_F16; }

uint64_t pk_panel_bytes(int64_t N, int64_t K, ig_dtype dt) {
    uint64_t np = (uint64_t)(N + 15) / 16;
    return np * (uint64_t)K * 16u * (is16(dt) ? 2u : 4u);
}

void pk_pack_panels(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst) {
    int64_t np = (N + 15) / 16;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; p++) {
        for (int64_t j = 0; j < 16; j++) {
            int64_t n = p * 16 + j;
            const float *row = n < N ? w + n * K : NULL;
            if (dt == IG_DTYPE_BF16) {
                uint16_t *o = (uint16_t *)dst + (size_t)p * K * 16;
                for (int64_t k = 0; k < K; k++)
                    o[(k / 2) * 32 + j * 2 + (k & 1)] = row ? pk_f32_to_bf16(row[k]) : 0;
            } else {
                float *o = (float *)dst + (size_t)p * K * 16;
                for (int64_t k = 0; k < K; k++) o[k * 16 + j] = row ? row[k] : 0.0f;
            }
        }
    }
}

void pk_pack_rows(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst) {
    /* rows past N stay zero: dst is zeroed by the caller */
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        if (is16(dt)) {
            uint16_t *o = (uint16_t *)dst + (size_t)n * K;
            for (int64_t k = 0; k < K; k++) o[k] = dt == IG_DTYPE_F16 ? pk_f32_to_f16(w[n * K + k]) : pk_f32_to_bf16(w[n * K + k]);
        } else {
            memcpy((float *)dst + (size_t)n * K, w + n * K, sizeof(float) * (size_t)K);
        }
    }
}

/* ---- quantized panels (templates/cpu/quant.h) */

uint64_t pk_quant_bytes(int64_t N, int64_t K, ig_dtype dt, int32_t group) {
    uint64_t np = (uint64_t)(N + 15) / 16, per;
    if (dt == IG_DTYPE_Q8C) per = 64u + 16u * (uint64_t)K;
    else if (dt == IG_DTYPE_Q8A || dt == IG_DTYPE_Q8I) per = 64u + 64u * (uint64_t)((K + 3) / 4);
    else if (dt == IG_DTYPE_Q8G)
        per = (uint64_t)(K / group) * (32u + 16u * (uint64_t)group) + (K % group ? 32u + 16u * (uint64_t)(K % group) : 0);
    else if (dt == IG_DTYPE_Q8Z)
        per = (uint64_t)(K / group) * (64u + 16u * (uint64_t)group) + (K % group ? 64u + 16u * (uint64_t)(K % group) : 0);
    else if (dt == IG_DTYPE_Q4K || dt == IG_DTYPE_Q6K || dt == IG_DTYPE_Q6S || dt == IG_DTYPE_Q4I || dt == IG_DTYPE_Q6I) {
        /* an f16 pair per 8 groups, 8-bit codes per group; q4i / q6i: a short last group in whole
         * k-octets / k-sixteens */
        const uint64_t cb = dt == IG_DTYPE_Q4K || dt == IG_DTYPE_Q4I ? 8u : 12u;
        const uint64_t tail = dt == IG_DTYPE_Q4I   ? (uint64_t)(K % group + 7) / 8 * 8
                              : dt == IG_DTYPE_Q6I ? (uint64_t)(K % group + 15) / 16 * 16
                                                   : (uint64_t)(K % group);
        per = 64u * (uint64_t)((K + 8 * group - 1) / (8 * group)) + (uint64_t)(K / group) * (32u + cb * (uint64_t)group) +
              (K % group ? 32u + cb * tail : 0);
    }
    else per = (uint64_t)(K / group) * (64u + 8u * (uint64_t)group) + (K % group ? 64u + 8u * (uint64_t)(K % group) : 0);
    return np * per;
}

void pk_pack_q8c(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst) {
    const uint64_t per = pk_quant_bytes(16, K, dt, 0);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        uint8_t *panel = (uint8_t *)dst + (uint64_t)(n / 16) * per;
        int j = (int)(n % 16);
        const float *row = w + n * K;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
        float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        memcpy(panel + 4 * j, &s, 4);
        int8_t *q = (int8_t *)(panel + 64);
        for (int64_t k = 0; k < K; k++) {
            long v = lrintf(row[k] * inv);
            /* q8c: q[k][j]; q8a, q8i: k-quads, q[k / 4][j][k % 4] (the tail of the last quad stays 0) */
            q[dt != IG_DTYPE_Q8C ? (k / 4) * 64 + j * 4 + k % 4 : k * 16 + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
}

static float f16_to_f32(const uint8_t *p);

/* a16w8 with --quant-group G: int8 per row and group of G along K, symmetric, the f16 scale
 * max |w| / 127 of the group (rounded up as stored, so the codes stay within +-127) and the codes
 * rounded on the stored scale: q8g panels (quant.h), GGUF Q8_0's grid at G = 32. */
void pk_pack_q8g(const float *w, int64_t N, int64_t K, int32_t G, void *dst) {
    const uint64_t per = pk_quant_bytes(16, K, IG_DTYPE_Q8G, G);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        uint8_t *gb = (uint8_t *)dst + (uint64_t)(n / 16) * per;
        const int j = (int)(n % 16);
        const float *row = w + n * K;
        for (int64_t k0 = 0; k0 < K; k0 += G) {
            const int len = (int)(K - k0 < G ? K - k0 : G);
            float amax = 0.0f;
            for (int k = 0; k < len; k++) amax = fmaxf(amax, fabsf(row[k0 + k]));
            uint16_t hs = pk_f32_to_f16(amax / 127.0f);
            if (f16_to_f32((const uint8_t *)&hs) * 127.0f < amax && hs < 0x7bffu) hs++;
            const float s = f16_to_f32((const uint8_t *)&hs), inv = s > 0.0f ? 1.0f / s : 0.0f;
            memcpy(gb + 2 * j, &hs, 2);
            int8_t *q = (int8_t *)(gb + 32);
            for (int k = 0; k < len; k++) {
                long v = lrintf(row[k0 + k] * inv);
                q[k * 16 + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
            gb += 32 + 16 * (uint64_t)len;
        }
    }
}

/* The squared rounding error of group x[n], weighted by w[n], on the grid (scale s, min m),
 * rounded as the packer rounds (to nearest, clamped to 0..L; L = 15 for 4 bits, 63 for 6). */
static float q4_err(const float *x, const float *w, int n, float s, float m, float L) {
    float err = 0.0f;
    for (int i = 0; i < n; i++) {
        float q = fminf(L, fmaxf(0.0f, rintf((x[i] - m) / s)));
        float d = m + s * q - x[i];
        err += w[i] * d * d;
    }
    return err;
}

/* Weighted least-squares (scale, min) for x[n] given the levels that grid (s, m) rounds it to:
 * minimizes sum w_i (min + scale q_i - x_i)^2 over scale and min. Returns that sum (an upper bound of the error
 * after rounding x onto the new grid, since rounding to the nearest level only lowers each term),
 * or INFINITY when the levels are all equal. */
static float q4_refit(const float *x, const float *w, int n, float s, float m, float L, float *fs, float *fm) {
    float sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0, sxx = 0, inv = 1.0f / s;
    for (int i = 0; i < n; i++) {
        float q = fminf(L, fmaxf(0.0f, rintf((x[i] - m) * inv))), wx = w[i] * x[i], wq = w[i] * q;
        sw += w[i], sq += wq, sqq += wq * q, sx += wx, sqx += wq * x[i], sxx += wx * x[i];
    }
    double det = (double)sw * sqq - (double)sq * sq;
    if (det <= 0) return INFINITY;
    double a = ((double)sw * sqx - (double)sq * sx) / det, b = (sx - a * sq) / sw;
    if (!(a > 0)) return INFINITY;
    *fs = (float)a, *fm = (float)b;
    return (float)(sxx - 2 * a * sqx - 2 * b * sx + a * a * sqq + 2 * a * b * sq + (double)sw * b * b);
}

/* Scale and min of one group x[n] (n <= 128; no calibration data). The objective is the squared
 * rounding error weighted by rms(x) + |x_i| (large weights count more: a cheap stand-in for
 * their effect on the output). Candidate grids span the group's range with 15 +- 1.5 steps,
 * centred on it (a grid finer than min-max clips the extremes, a coarser one moves its levels);
 * each candidate's levels get a weighted least-squares refit of (scale, min), twice. The best of
 * all, min-max itself included, wins. Measured on SmolLM2 (docs: the note of issue 16): plain
 * min-max with a shrink search and an unweighted refit give the same perplexity; the weights
 * take a16w4 g128 from 1.66x to 1.52x the f32 perplexity. */
/* The error weights of group x[n]: rms(x) + |x_i|. */
static void q4_weights(const float *x, int n, float *w) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    for (int i = 0; i < n; i++) w[i] = sqrtf(ss / (float)n) + fabsf(x[i]);
}

static void q4_range(const float *x, int n, float L, float *scale, float *min) {
    float lo = x[0], hi = x[0], w[128];
    for (int i = 1; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    *scale = 0.0f, *min = lo;
    if (!(hi > lo)) return;
    q4_weights(x, n, w);
    float bs = (hi - lo) / L, bm = lo, best = q4_err(x, w, n, bs, bm, L);
    for (int c = -10; c <= 10; c += 2) {
        float s = (hi - lo) / (L + 0.01f * L * (float)c), m = 0.5f * (lo + hi) - 0.5f * L * s, fs, fm;
        for (int it = 0; it < 2; it++) {
            float e = q4_refit(x, w, n, s, m, L, &fs, &fm);
            if (!(e < INFINITY)) break;
            if (e < best) best = e, bs = fs, bm = fm;
            s = fs, m = fm;
        }
    }
    *scale = bs, *min = bm;
}

static float f16_to_f32(const uint8_t *p);

/* Row `row` [K] as lane j of one q4g panel. Scale and min are stored as f16 and the levels are
 * rounded on the grid of the stored values. */
static void q4_pack_lane(const float *row, int64_t K, int32_t G, int j, uint8_t *panel) {
    const uint64_t gbytes = 64u + 8u * (uint64_t)G;
    for (int64_t g = 0; g * G < K; g++) {
        const float *x = row + g * G;
        int len = (int)(K - g * G < G ? K - g * G : G);
        float s, m;
        q4_range(x, len, 15.0f, &s, &m);
        uint8_t *gb = panel + g * gbytes;
        uint16_t hs = pk_f32_to_f16(s), hm = pk_f32_to_f16(m);
        memcpy(gb + 2 * j, &hs, 2);
        memcpy(gb + 32 + 2 * j, &hm, 2);
        s = f16_to_f32(gb + 2 * j), m = f16_to_f32(gb + 32 + 2 * j);
        for (int i = 0; i < len; i++) {
            int q = s > 0.0f ? (int)fminf(15.0f, fmaxf(0.0f, rintf((x[i] - m) / s))) : 0;
            uint8_t *b = gb + 64 + (size_t)i * 8 + (j & 7);
            *b = (uint8_t)(j < 8 ? (*b & 0xf0) | q : (*b & 0x0f) | (q << 4));
        }
    }
}

void pk_pack_q4g(const float *w, int64_t N, int64_t K, int32_t G, void *dst) {
    const uint64_t per = pk_quant_bytes(16, K, IG_DTYPE_Q4G, G);
    /* by panels: lanes j and j + 8 share bytes */
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < (N + 15) / 16; p++)
        for (int j = 0; j < 16 && p * 16 + j < N; j++) q4_pack_lane(w + (p * 16 + j) * K, K, G, j, (uint8_t *)dst + (uint64_t)p * per);
}

/* Level q of lane j at column i of a Q4K / Q6K group block whose columns start at c (cb bytes
 * each: 8 bytes of nibbles, then for Q6K the word of high bit pairs). ki: Q4I (cb 8), k-octets of
 * 64 bytes, lane j's columns 8o + i at byte 4j + i of octet o, low nibble for i % 8 < 4, else
 * high; Q6I (cb 12), k-sixteens of 192 bytes: two such octets, then byte 4j + i % 4 holds the
 * high bit pair of column 16s + 4b + i % 4 at bits 2b. The block starts zeroed. */
static void put_level(uint8_t *c, int cb, int ki, int i, int j, int q) {
    if (ki) {
        uint8_t *s = c + (cb == 12 ? (size_t)(i / 16) * 192 : 0), *o = s + (size_t)((cb == 12 ? i % 16 : i) / 8) * 64 + 4 * j + i % 4;
        *o = (uint8_t)(i % 8 < 4 ? (*o & 0xf0) | (q & 15) : (*o & 0x0f) | ((q & 15) << 4));
        if (cb == 12) s[128 + 4 * j + i % 4] |= (uint8_t)(((q >> 4) & 3) << (2 * ((i % 16) / 4)));
        return;
    }
    uint8_t *o = c + (size_t)i * cb + (j & 7);
    *o = (uint8_t)(j < 8 ? (*o & 0xf0) | (q & 15) : (*o & 0x0f) | ((q & 15) << 4));
    if (cb == 12) c[(size_t)i * cb + 8 + j / 4] |= (uint8_t)(((q >> 4) & 3) << (2 * (j % 4)));
}

/* Q4K / Q6K: codes (sc, mn) of one group x[n] with levels 0..L under the superblock's stored
 * pair (d, dm): the weighted-error best of sc, mn within +-1 of the rounded search result
 * (s, m), plus mn = 0 with the scale that covers [0, max] for a group whose min is above 0
 * (mins are subtracted codes, so m > 0 clamps to 0). */
static void q4k_codes(const float *x, int n, float L, float s, float m, float d, float dm, int *sc, int *mn) {
    float w[128], best = INFINITY, hi = x[0];
    for (int i = 1; i < n; i++) hi = fmaxf(hi, x[i]);
    q4_weights(x, n, w);
    int s0 = d > 0.0f ? (int)lrintf(s / d) : 0, m0 = dm > 0.0f && m < 0.0f ? (int)lrintf(-m / dm) : 0;
    int sc_max = d > 0.0f && hi > 0.0f ? (int)ceilf(hi / (L * d)) : 0;
    *sc = 0, *mn = 0;
    for (int c = 0; c < 10; c++) {
        int a = c < 9 ? s0 - 1 + c % 3 : sc_max, b = c < 9 ? m0 - 1 + c / 3 : 0;
        if (a < 1 || a > 255 || b < 0 || b > 255) continue;
        float e = q4_err(x, w, n, d * (float)a, -(dm * (float)b), L);
        if (e < best) best = e, *sc = a, *mn = b;
    }
}

/* Row `row` [K] as lane j of one q4k / q6k (levels 0..L) panel: each group's (scale, min) by
 * q4_range, then per superblock d = max scale / 255 and dmin = max(-min) / 255 (f16, rounded as
 * stored), the codes by q4k_codes, and the levels rounded on the grid of the codes. */
static void q4k_pack_lane(const float *row, int64_t K, int32_t G, float L, int ki, int j, uint8_t *panel) {
    const int64_t ng = (K + G - 1) / G;
    const int cb = L > 15.0f ? 12 : 8; /* bytes per column (q4i / q6i: 8 / 12 too, in k-octets / sixteens; G % 16 == 0) */
    for (int64_t g0 = 0; g0 < ng; g0 += 8) {
        float s[8], m[8], smax = 0.0f, mmax = 0.0f;
        int n8 = (int)(ng - g0 < 8 ? ng - g0 : 8);
        for (int i = 0; i < n8; i++) {
            int64_t k0 = (g0 + i) * G;
            q4_range(row + k0, (int)(K - k0 < G ? K - k0 : G), L, &s[i], &m[i]);
            smax = fmaxf(smax, s[i]), mmax = fmaxf(mmax, -m[i]);
        }
        uint8_t *hb = panel + (size_t)(g0 / 8) * (64u + 8u * (32u + (uint64_t)cb * (uint64_t)G));
        uint16_t hd = pk_f32_to_f16(smax / 255.0f), hm = pk_f32_to_f16(mmax / 255.0f);
        memcpy(hb + 2 * j, &hd, 2);
        memcpy(hb + 32 + 2 * j, &hm, 2);
        float d = f16_to_f32(hb + 2 * j), dm = f16_to_f32(hb + 32 + 2 * j);
        for (int i = 0; i < n8; i++) {
            int64_t k0 = (g0 + i) * G;
            int len = (int)(K - k0 < G ? K - k0 : G), sc, mn;
            const float *x = row + k0;
            uint8_t *gb = hb + 64 + (size_t)i * (32u + (uint64_t)cb * (uint64_t)G);
            q4k_codes(x, len, L, s[i], m[i], d, dm, &sc, &mn);
            gb[j] = (uint8_t)sc, gb[16 + j] = (uint8_t)mn;
            float qs = d * (float)sc, qm = -(dm * (float)mn);
            for (int k = 0; k < len; k++)
                put_level(gb + 32, cb, ki, k, j, qs > 0.0f ? (int)fminf(L, fmaxf(0.0f, rintf((x[k] - qm) / qs))) : 0);
        }
    }
}

void pk_pack_q4k(const float *w, int64_t N, int64_t K, int32_t G, ig_dtype dt, void *dst) {
    const uint64_t per = pk_quant_bytes(16, K, dt, G);
    const float L = dt == IG_DTYPE_Q6K || dt == IG_DTYPE_Q6I ? 63.0f : 15.0f;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < (N + 15) / 16; p++)
        for (int j = 0; j < 16 && p * 16 + j < N; j++)
            q4k_pack_lane(w + (p * 16 + j) * K, K, G, L, dt == IG_DTYPE_Q4I || dt == IG_DTYPE_Q6I, j, (uint8_t *)dst + (uint64_t)p * per);
}

/* ---- quantized rows of CUDA packages (templates/cuda/wq.cuh): q8r = K int8 codes, then the
 * row's f32 scale in a 16-byte tail; q4r = K / 2 bytes of uint4 codes (element 2i in the low
 * nibble of byte i), then an (f16 scale, f16 min) pair per group, padded to 16 bytes. A weight
 * is scale * q (q8r) or scale * q + min (q4r). Rows past N stay zero (dst is zeroed). */

uint64_t pk_qrow_bytes(int64_t K, ig_dtype dt, int32_t group) {
    if (dt == IG_DTYPE_Q8R || dt == IG_DTYPE_F8R) return (uint64_t)K + 16u;
    return (uint64_t)K / 2u + ((uint64_t)(4 * (K / group)) + 15u) / 16u * 16u;
}

void pk_pack_q8r(const float *w, int64_t N, int64_t K, void *dst) {
    const uint64_t rb = pk_qrow_bytes(K, IG_DTYPE_Q8R, 0);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *row = w + n * K;
        uint8_t *o = (uint8_t *)dst + (uint64_t)n * rb;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
        /* the a16w8 rule of the CPU's q8c: the same codes and scale */
        float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int64_t k = 0; k < K; k++) {
            long v = lrintf(row[k] * inv);
            o[k] = (uint8_t)(int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        memcpy(o + K, &s, 4);
    }
}

int pk_pack_f8r(const float *w, int64_t N, int64_t K, void *dst) {
    const uint64_t rb = pk_qrow_bytes(K, IG_DTYPE_F8R, 0);
    float *vec = (float *)((uint8_t *)dst + (uint64_t)((N + 15) / 16 * 16) * rb); /* the scales again, [NP] */
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t n = 0; n < N; n++) {
        const float *row = w + n * K;
        uint8_t *o = (uint8_t *)dst + (uint64_t)n * rb;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
        /* per output channel, symmetric: the largest weight at e4m3's largest finite value */
        const float s = amax / 448.0f, inv = amax > 0.0f ? 448.0f / amax : 0.0f;
        bad |= !(amax < PK_F8R_WMAX);
        for (int64_t k = 0; k < K; k++) o[k] = ig_f32_to_e4m3(row[k] * inv); /* kv_quant.h's: nearest even, saturating */
        memcpy(o + K, &s, 4);
        vec[n] = s;
    }
    return bad;
}

void pk_pack_q4r(const float *w, int64_t N, int64_t K, int32_t G, void *dst) {
    const uint64_t rb = pk_qrow_bytes(K, IG_DTYPE_Q4R, G);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        uint8_t *o = (uint8_t *)dst + (uint64_t)n * rb;
        for (int64_t g = 0; g < K / G; g++) {
            const float *x = w + n * K + g * G;
            float s, m;
            q4_range(x, G, 15.0f, &s, &m);
            uint16_t hs = pk_f32_to_f16(s), hm = pk_f32_to_f16(m);
            uint8_t *sm = o + K / 2 + 4 * g;
            memcpy(sm, &hs, 2);
            memcpy(sm + 2, &hm, 2);
            s = f16_to_f32(sm), m = f16_to_f32(sm + 2); /* the levels on the stored grid */
            for (int i = 0; i < G; i++) {
                int q = s > 0.0f ? (int)fminf(15.0f, fmaxf(0.0f, rintf((x[i] - m) / s))) : 0;
                const int64_t k = g * G + i;
                o[k / 2] |= (uint8_t)(k & 1 ? q << 4 : q);
            }
        }
    }
}

/* ---- GGUF blocks kept (--quant keep): Q4_0 {f16 d; u8 qs[16]}, Q4_1 {f16 d, m; u8 qs[16]},
 * Q8_0 {f16 d; i8 qs[32]}; byte i's low nibble is element i, its high nibble element i + 16. */

static float f16_to_f32(const uint8_t *p) {
    unsigned h = (unsigned)p[0] | (unsigned)p[1] << 8, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexpf((float)(m | 1024), (int)e - 25) : ldexpf((float)m, -24);
    return h & 0x8000 ? -v : v;
}

/* Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]} / Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32];
 * u8 qs[128]} blocks of 256 as lane j of a q4k / q6k panel with G = 32: one superblock per block,
 * d and dmin copied, the eight 6-bit scale and min codes as 8-bit ones, the levels as they are
 * (Q5_K's fifth bit as q6k's high bit pair). Element 64c + l of a block is the low nibble of
 * qs[32c + l], element 64c + 32 + l its high nibble; Q5_K's fifth bits are bits 2c, 2c + 1 of qh[l]. */
static void repack_k_lane(const uint8_t *b, ir_stype st, int64_t K, int j, uint8_t *panel) {
    const int q5 = st == IR_STYPE_Q5_K, cb = q5 ? 12 : 8;
    const size_t gbytes = 32 + (size_t)cb * 32, sbytes = 64 + 8 * gbytes;
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *blk = b + sb * (q5 ? 176 : 144), *sc = blk + 4, *qh = blk + 16, *qs = blk + (q5 ? 48 : 16);
        uint8_t *hb = panel + sb * sbytes;
        memcpy(hb + 2 * j, blk, 2);
        memcpy(hb + 32 + 2 * j, blk + 2, 2);
        for (int g = 0; g < 8; g++) {
            uint8_t *gb = hb + 64 + g * gbytes;
            gb[j] = (uint8_t)(g < 4 ? sc[g] & 63 : (sc[g + 4] & 15) | (sc[g - 4] >> 6) << 4);
            gb[16 + j] = (uint8_t)(g < 4 ? sc[g + 4] & 63 : (sc[g + 4] >> 4) | (sc[g] >> 6) << 4);
            for (int i = 0; i < 32; i++) {
                const int c = g / 2, hi = g & 1, l = i;
                int q = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
                if (q5 && (qh[l] >> (2 * c + hi)) & 1) q |= 16;
                put_level(gb + 32, cb, 0, i, j, q);
            }
        }
    }
}

/* Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} blocks of 256 as lane j of a q6s panel with
 * G = 16: two superblocks per block, each with d as stored and dmin = 32 d (exact in f16 unless it
 * overflows: returns 1), sc = mn = the sub-block's int8 scale. In each half of 128 (ql + 64 n,
 * qh + 32 n) element 32 i + l has level (ql[l + 32 (i & 1)] >> 4 (i >> 1)) & 15 | (qh[l] >> 2 i & 3) << 4
 * and scale 2 i + l / 16 of the half's eight. */
static int repack_q6k_lane(const uint8_t *b, int64_t K, int j, uint8_t *panel) {
    const size_t gbytes = 32 + 12 * 16, sbytes = 64 + 8 * gbytes;
    int bad = 0;
    for (int64_t blk = 0; blk < K / 256; blk++) {
        const uint8_t *bb = b + blk * 210;
        const float dm = 32.0f * f16_to_f32(bb + 208);
        const uint16_t hdm = pk_f32_to_f16(dm);
        bad |= !(fabsf(dm) <= 65504.0f) && isfinite(dm);
        for (int n = 0; n < 2; n++) {
            uint8_t *hb = panel + (blk * 2 + n) * sbytes;
            const uint8_t *ql = bb + 64 * n, *qh = bb + 128 + 32 * n, *sc = bb + 192 + 8 * n;
            memcpy(hb + 2 * j, bb + 208, 2);
            memcpy(hb + 32 + 2 * j, &hdm, 2);
            for (int g = 0; g < 8; g++) hb[64 + g * gbytes + j] = hb[64 + g * gbytes + 16 + j] = sc[g];
            for (int i = 0; i < 4; i++)
                for (int l = 0; l < 32; l++) {
                    int e = 32 * i + l, q = ((ql[l + 32 * (i & 1)] >> (4 * (i >> 1))) & 15) | ((qh[l] >> (2 * i)) & 3) << 4;
                    put_level(hb + 64 + (e / 16) * gbytes + 32, 12, 0, e % 16, j, q);
                }
        }
    }
    return bad;
}

/* Level i (0..31) of a Q4_0 / Q4_1 block's nibbles qs: byte i's low nibble, or byte i - 16's high. */
static int q4_level(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }

/* A Q4_0 / Q4_1 block's (f16 scale, f16 min) as q4g / q4r store them: d, and m (Q4_1) or -8d
 * (Q4_0, exact in f16 unless it overflows: returns 1 then). */
static int q4_scale_min(const uint8_t *blk, ir_stype st, uint8_t *d, uint8_t *m) {
    memcpy(d, blk, 2);
    if (st == IR_STYPE_Q4_1) {
        memcpy(m, blk + 2, 2);
        return 0;
    }
    const float mf = -8.0f * f16_to_f32(blk);
    const uint16_t hm = pk_f32_to_f16(mf);
    memcpy(m, &hm, 2);
    return isfinite(mf) && !(fabsf(mf) <= 65504.0f);
}

/* Row n's blocks as lane j = n % 16 of its panel: the f16 scales (and Q4_1 mins) are copied as
 * they are; Q4_0's min -8d is exact in f16 unless it overflows (returns 1 then); Q5_0's levels
 * minus 16 are q8g's int8 codes under its d. */
static int repack_lane(const uint8_t *b, ir_stype st, int64_t K, int j, uint8_t *panel) {
    int bad = 0;
    if (st == IR_STYPE_Q4_K || st == IR_STYPE_Q5_K) {
        repack_k_lane(b, st, K, j, panel);
        return 0;
    }
    if (st == IR_STYPE_Q6_K) return repack_q6k_lane(b, K, j, panel);
    for (int64_t g = 0; g < K / 32; g++) {
        if (st == IR_STYPE_Q5_0) { /* {f16 d; u8 qh[4]; u8 qs[16]}: bit i of qh is element i's fifth bit */
            const uint8_t *blk = b + g * 22, *qs = blk + 6;
            uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 | (uint32_t)blk[5] << 24;
            uint8_t *gb = panel + g * (32 + 16 * 32);
            memcpy(gb + 2 * j, blk, 2);
            for (int i = 0; i < 32; i++) {
                int q = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (int)((qh >> i) & 1u) << 4;
                gb[32 + i * 16 + j] = (uint8_t)(int8_t)(q - 16);
            }
            continue;
        }
        if (st == IR_STYPE_Q8_0) {
            const uint8_t *blk = b + g * 34;
            uint8_t *gb = panel + g * (32 + 16 * 32);
            memcpy(gb + 2 * j, blk, 2);
            for (int i = 0; i < 32; i++) gb[32 + i * 16 + j] = blk[2 + i];
            continue;
        }
        const uint8_t *blk = b + g * (st == IR_STYPE_Q4_1 ? 20 : 18), *qs = blk + (st == IR_STYPE_Q4_1 ? 4 : 2);
        uint8_t *gb = panel + g * (64 + 8 * 32);
        bad |= q4_scale_min(blk, st, gb + 2 * j, gb + 32 + 2 * j);
        for (int i = 0; i < 32; i++) {
            int q = q4_level(qs, i);
            uint8_t *o = gb + 64 + (size_t)i * 8 + (j & 7);
            *o = (uint8_t)(j < 8 ? (*o & 0xf0) | q : (*o & 0x0f) | (q << 4));
        }
    }
    return bad;
}

/* The panel format --quant keep gives GGUF block type st (G = 32), or F32 for none. */
static ig_dtype keep_dtype(ir_stype st) {
    switch (st) {
    case IR_STYPE_Q4_0: case IR_STYPE_Q4_1: return IG_DTYPE_Q4G;
    case IR_STYPE_Q8_0: case IR_STYPE_Q5_0: return IG_DTYPE_Q8G;
    case IR_STYPE_Q4_K: return IG_DTYPE_Q4K;
    case IR_STYPE_Q5_K: return IG_DTYPE_Q6K;
    case IR_STYPE_Q6_K: return IG_DTYPE_Q6S;
    default: return IG_DTYPE_F32;
    }
}

int pk_keep_default(const ir_graph *g, const ir_tensor **bad) {
    int blocks = 0;
    *bad = NULL;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const ir_tensor *t = &g->tensors[i];
        if (t->kind != IR_TENSOR_WEIGHT || t->src_type < IR_STYPE_Q8_0 || t->src_type > IR_STYPE_Q5_1) continue;
        blocks = 1;
        if (keep_dtype(t->src_type) == IG_DTYPE_F32) {
            *bad = t;
            return 0;
        }
    }
    return blocks;
}

int pk_repack_blocks(const void *blocks, ir_stype st, int64_t N, int64_t K, void *dst) {
    const ig_dtype dt = keep_dtype(st);
    const uint64_t per = pk_quant_bytes(16, K, dt, dt == IG_DTYPE_Q6S ? 16 : 32);
    const size_t rb = st == IR_STYPE_Q4_K ? (size_t)(K / 256) * 144 : st == IR_STYPE_Q5_K ? (size_t)(K / 256) * 176
                      : st == IR_STYPE_Q6_K ? (size_t)(K / 256) * 210
                      : (size_t)(K / 32) * (st == IR_STYPE_Q8_0 ? 34 : st == IR_STYPE_Q4_1 ? 20 : st == IR_STYPE_Q5_0 ? 22 : 18);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t p = 0; p < (N + 15) / 16; p++)
        for (int j = 0; j < 16 && p * 16 + j < N; j++)
            bad |= repack_lane((const uint8_t *)blocks + (size_t)(p * 16 + j) * rb, st, K, j, (uint8_t *)dst + (uint64_t)p * per);
    return bad ? -1 : 0;
}

/* Q4_0 / Q4_1 rows of blocks as q4r rows (pack.h): a block's byte i holds elements i (low nibble)
 * and i + 16 (high); q4r's byte i of a row holds elements 2i (low) and 2i + 1 (high). */
int pk_repack_blocks_q4r(const void *blocks, ir_stype st, int64_t N, int64_t K, void *dst) {
    const uint64_t rb = pk_qrow_bytes(K, IG_DTYPE_Q4R, 32);
    const size_t bb = st == IR_STYPE_Q4_1 ? 20 : 18;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = (const uint8_t *)blocks + (size_t)n * (size_t)(K / 32) * bb;
        uint8_t *o = (uint8_t *)dst + (uint64_t)n * rb;
        for (int64_t g = 0; g < K / 32; g++) {
            const uint8_t *blk = row + g * bb, *qs = blk + (st == IR_STYPE_Q4_1 ? 4 : 2);
            uint8_t *sm = o + K / 2 + 4 * g;
            bad |= q4_scale_min(blk, st, sm, sm + 2);
            for (int i = 0; i < 16; i++) /* elements 2i, 2i + 1 of the group */
                o[g * 16 + i] = (uint8_t)(q4_level(qs, 2 * i) | q4_level(qs, 2 * i + 1) << 4);
        }
    }
    return bad ? -1 : 0;
}

int pk_keep_rows_default(const ir_graph *g) {
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const ir_tensor *t = &g->tensors[i];
        if (t->kind == IR_TENSOR_WEIGHT && (t->src_type == IR_STYPE_Q4_0 || t->src_type == IR_STYPE_Q4_1)) return 1;
    }
    return 0;
}

/* ---- GPTQ / AWQ layers kept: integer rows (ir_weight_read_blocks with IR_STYPE_GPTQ: per
 * group an f16 scale and an f16 integer zero, then a byte per code) into q4z / q8z panels */

static void repack_gq_lane(const uint8_t *row, int64_t K, int32_t G, int bits, int j, uint8_t *panel) {
    const int64_t ng = (K + G - 1) / G;
    const uint8_t *codes = row + 4 * ng;
    const ig_dtype dt = bits == 8 ? IG_DTYPE_Q8Z : IG_DTYPE_Q4Z;
    for (int64_t g = 0; g < ng; g++) {
        uint8_t *gb = panel + pk_quant_bytes(16, g * G, dt, G); /* g whole groups precede */
        int64_t len = K - g * G < G ? K - g * G : G;
        memcpy(gb + 2 * j, row + 4 * g, 2);
        if (bits == 8) { /* codes and zero minus 128: int8 codes, zero exact in f16 */
            uint16_t hz = pk_f32_to_f16(f16_to_f32(row + 4 * g + 2) - 128.0f);
            memcpy(gb + 32 + 2 * j, &hz, 2);
            for (int64_t i = 0; i < len; i++) gb[64 + i * 16 + j] = (uint8_t)(int8_t)((int)codes[g * G + i] - 128);
            continue;
        }
        memcpy(gb + 32 + 2 * j, row + 4 * g + 2, 2);
        for (int64_t i = 0; i < len; i++) {
            int q = codes[g * G + i] & 15;
            uint8_t *o = gb + 64 + (size_t)i * 8 + (j & 7);
            *o = (uint8_t)(j < 8 ? (*o & 0xf0) | q : (*o & 0x0f) | (q << 4));
        }
    }
}

void pk_repack_gq(const void *rows, int64_t N, int64_t K, int32_t G, int bits, void *dst) {
    const ig_dtype dt = bits == 8 ? IG_DTYPE_Q8Z : IG_DTYPE_Q4Z;
    const uint64_t per = pk_quant_bytes(16, K, dt, G);
    const size_t rb = ir_gq_row_bytes(K, G);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < (N + 15) / 16; p++)
        for (int j = 0; j < 16 && p * 16 + j < N; j++)
            repack_gq_lane((const uint8_t *)rows + (size_t)(p * 16 + j) * rb, K, G, bits, j, (uint8_t *)dst + (uint64_t)p * per);
}

/* --quant keep: the format matrix x keeps (its dtype and group in *e), or an error naming the
 * block type that has no CPU format. */
static ig_status keep_format(const ir_graph *g, const ir_tensor *x, pk_entry *e, ig_err *err) {
    ir_stype st;
    int32_t bits, group;
    if (ir_weight_gq(g, x, &bits, &group)) { /* GPTQ / AWQ layers (q/k/v or gate/up merged: one group size) */
        e->kept = 1, e->stype = IR_STYPE_GPTQ, e->group = group, e->bits = bits;
        e->dtype = bits == 8 ? IG_DTYPE_Q8Z : IG_DTYPE_Q4Z;
        return IG_OK;
    }
    /* parts of different types (a Q4_K_M file's Q4_K q/k and Q6_K v, a GPTQ layer beside a float
     * one): one panel matrix holds one format, so the merge stays float (dequantized: exact) */
    if (!ir_weight_stype(g, x, &st)) return IG_OK;
    if (st == IR_STYPE_F32 || st == IR_STYPE_F16 || st == IR_STYPE_BF16) return IG_OK; /* a float matrix stays float */
    if (st == IR_STYPE_GPTQ || st == IR_STYPE_AWQ) return IG_OK; /* of different bit widths or group sizes: float */
    if (keep_dtype(st) == IG_DTYPE_F32)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "--quant keep: %s is stored as %s, which CPU packages cannot keep (kept: Q4_0, Q4_1, Q5_0, Q8_0, "
                       "Q4_K, Q5_K, Q6_K); compile with --quant none to dequantize it, or requantize with --quant a16w8 or a16w4",
                       x->name, ir_stype_name(st));
    const int be = st == IR_STYPE_Q4_K || st == IR_STYPE_Q5_K || st == IR_STYPE_Q6_K ? 256 : 32;
    if (x->shape[1] % be)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--quant keep: %s has %lld columns, not whole blocks of %d", x->name,
                       (long long)x->shape[1], be);
    e->kept = 1, e->stype = st, e->group = st == IR_STYPE_Q6_K ? 16 : 32;
    e->dtype = keep_dtype(st);
    return IG_OK;
}

/* --quant keep on CUDA: matrix x keeps its blocks as q4r rows of group 32 when they are Q4_0 or
 * Q4_1 (*e's dtype, group, size); any other type (or parts of different types) leaves *e as the
 * 16-bit rows it was given: dequantized, one rounding. */
static void keep_row_format(const ir_graph *g, const ir_tensor *x, pk_entry *e) {
    ir_stype st;
    if (!ir_weight_stype(g, x, &st) || (st != IR_STYPE_Q4_0 && st != IR_STYPE_Q4_1) || x->shape[1] % 32) return;
    e->kept = 1, e->stype = st, e->group = 32, e->dtype = IG_DTYPE_Q4R;
    e->nbytes = (uint64_t)((x->shape[0] + 15) / 16 * 16) * pk_qrow_bytes(x->shape[1], IG_DTYPE_Q4R, 32);
}

int pk_quant_skips(const char *skip, const char *name) {
    size_t nl = strlen(name);
    while (skip && *skip) {
        const char *e = strchr(skip, ',');
        size_t l = e ? (size_t)(e - skip) : strlen(skip);
        /* the entry matches at the end of the name, optionally followed by ".weight", and starts
         * the name or follows a dot */
        for (int wsuf = 0; wsuf < 2 && l; wsuf++) {
            size_t tail = l + (wsuf ? 7 : 0);
            if (tail > nl || (wsuf && strcmp(name + nl - 7, ".weight"))) continue;
            const char *at = name + nl - tail;
            if (!strncmp(at, skip, l) && (at == name || at[-1] == '.')) return 1;
        }
        skip = e ? e + 1 : NULL;
    }
    return 0;
}

/* Rows of a CUDA package's matrix x quantized to dt (Q8R, or Q4R with groups of G): e's format
 * and size, or an error naming a shape the kernels cannot take. */
static ig_status qrow_format(const ir_tensor *x, ig_dtype dt, int32_t G, pk_entry *e, ig_err *err) {
    const int64_t K = x->shape[1];
    if ((dt == IG_DTYPE_Q8R || dt == IG_DTYPE_F8R) && K % 16)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--quant %s (cuda): %s has %lld columns, not a multiple of 16",
                       dt == IG_DTYPE_F8R ? "fp8" : "a16w8", x->name, (long long)K);
    if (dt == IG_DTYPE_Q4R && (K % 32 || K % G))
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "--quant a16w4 (cuda): %s has %lld columns, not a multiple of 32 and of the group %d (--quant-group)",
                       x->name, (long long)K, (int)G);
    e->dtype = dt;
    e->group = dt == IG_DTYPE_Q4R ? G : 0;
    const uint64_t np = (uint64_t)((x->shape[0] + 15) / 16 * 16);
    e->nbytes = np * pk_qrow_bytes(K, dt, G) + (dt == IG_DTYPE_F8R ? 4u * np : 0u); /* f8r: + the scale vector */
    return IG_OK;
}

/* vocab: t is a vocabulary matrix (the embedding table, or the lm_head: the matmul after the
 * last layer) */
static ig_status add_entry(const ir_graph *g, pk_plan *p, int32_t t, pk_format fmt, ig_dtype dt, const pk_quant *q,
                           int vocab, ig_err *err) {
    if (t < 0 || pk_find(p, t) >= 0) return IG_OK;
    const ir_tensor *x = &g->tensors[t];
    if (x->kind != IR_TENSOR_WEIGHT)
        return ig_fail(err, IG_ERR_INTERNAL, "pack: tensor %s is not a weight", x->name);
    pk_entry e = {.tensor = t, .name = x->name, .fmt = fmt, .dtype = dt};
    if (fmt == PK_PANEL || fmt == PK_ROWMAJOR) {
        if (x->rank != 2)
            return ig_fail(err, IG_ERR_INTERNAL, "pack: %s is not a matrix", x->name);
        if (fmt == PK_ROWMAJOR && x->shape[1] % 8)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "pack: %s has an inner dimension %lld that is not a multiple of 8 (GPU kernels load 16 bytes)",
                           x->name, (long long)x->shape[1]);
        if (fmt == PK_PANEL && dt == IG_DTYPE_F16)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "pack: f16 weights are for CUDA packages only (CPU panels: f32 or bf16)");
        if (is16(dt) && x->shape[1] % 2)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "pack: %s has an odd inner dimension %lld (16-bit types pack pairs)", x->name,
                           (long long)x->shape[1]);
        e.nbytes = pk_panel_bytes(x->shape[0], x->shape[1], dt); /* row-major: the same bytes, N padded to 16 */
        if (q && q->keep && fmt == PK_ROWMAJOR && !pk_quant_skips(q->skip, x->name)) {
            keep_row_format(g, x, &e);
        } else if (q && fmt == PK_ROWMAJOR && !pk_quant_skips(q->skip, x->name)) {
            ig_status st = qrow_format(x, vocab && q->head ? q->head : q->wdtype, q->group, &e, err);
            if (st) return st;
        } else if (q && q->keep && fmt == PK_PANEL && !pk_quant_skips(q->skip, x->name)) {
            ig_status st = keep_format(g, x, &e, err);
            if (st) return st;
            if (e.kept) e.nbytes = pk_quant_bytes(x->shape[0], x->shape[1], e.dtype, e.group);
        } else if (q && fmt == PK_PANEL && !pk_quant_skips(q->skip, x->name)) {
            /* the vocabulary matrices (embedding table, lm_head) in q->head */
            e.dtype = vocab && q->head ? q->head : q->wdtype;
            e.group = e.dtype == IG_DTYPE_Q4G || e.dtype == IG_DTYPE_Q4K || e.dtype == IG_DTYPE_Q4I || e.dtype == IG_DTYPE_Q8G ? q->group
                      : e.dtype == IG_DTYPE_Q6K || e.dtype == IG_DTYPE_Q6I ? 32 : 0;
            e.nbytes = pk_quant_bytes(x->shape[0], x->shape[1], e.dtype, e.group);
        }
    } else {
        int64_t n = x->shape[0] * (x->rank == 2 ? x->shape[1] : 1);
        e.nbytes = (uint64_t)((n + 15) / 16) * 16u * 4u;
        e.dtype = IG_DTYPE_F32;
    }
    e.offset = (p->total + ALIGN - 1) / ALIGN * ALIGN;
    p->total = e.offset + e.nbytes;
    pk_entry *ne = realloc(p->e, sizeof *ne * (size_t)(p->n + 1));
    if (!ne) return ig_fail(err, IG_ERR_NOMEM, "pack: out of memory");
    p->e = ne;
    p->e[p->n++] = e;
    return IG_OK;
}

/* --quant keep: layers share kernels, so a matrix (the same node input in every layer) that some
 * layers keep in another format than others (GGUF files mixing block types across layers, as
 * Q4_K_M's down projections do; CPU panels or CUDA rows) is stored in the float dtype wdtype in every layer; then the
 * offsets are laid out again. */
static void unify_kept(const ir_graph *g, pk_plan *p, ig_dtype wdtype) {
    int32_t first = -1, per = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].layer == 0) {
            if (first < 0) first = i;
            per++;
        }
    const int32_t L = g->hp.n_layers;
    if (first < 0 || L < 2 || first + (int64_t)per * L > g->n_nodes) return;
    for (int32_t j = 0; j < per; j++)
        for (int s = 0; s < IR_MAX_IN; s++) {
            int32_t t0 = g->nodes[first + j].in[s], e0 = t0 >= 0 ? pk_find(p, t0) : -1, differ = 0;
            if (e0 < 0 || (p->e[e0].fmt != PK_PANEL && p->e[e0].fmt != PK_ROWMAJOR)) continue;
            for (int32_t l = 1; l < L && !differ; l++) {
                int32_t t = g->nodes[first + l * per + j].in[s], e = t >= 0 ? pk_find(p, t) : -1;
                differ = e >= 0 && (p->e[e].dtype != p->e[e0].dtype || p->e[e].group != p->e[e0].group);
            }
            for (int32_t l = 0; differ && l < L; l++) {
                int32_t t = g->nodes[first + l * per + j].in[s], e = t >= 0 ? pk_find(p, t) : -1;
                if (e < 0) continue;
                pk_entry *x = &p->e[e];
                x->kept = 0, x->stype = IR_STYPE_F32, x->group = 0, x->bits = 0, x->dtype = wdtype;
                x->nbytes = pk_panel_bytes(g->tensors[t].shape[0], g->tensors[t].shape[1], wdtype);
            }
        }
    p->total = 0;
    for (int32_t i = 0; i < p->n; i++) {
        p->e[i].offset = (p->total + ALIGN - 1) / ALIGN * ALIGN;
        p->total = p->e[i].offset + p->e[i].nbytes;
    }
}

ig_status pk_plan_build(const ir_graph *g, ig_dtype wdtype, pk_format mf, const pk_quant *q, pk_plan *plan, ig_err *err) {
    memset(plan, 0, sizeof *plan);
    int q4 = q && (q->wdtype == IG_DTYPE_Q4G || q->wdtype == IG_DTYPE_Q4K || q->wdtype == IG_DTYPE_Q4I || q->wdtype == IG_DTYPE_Q4R ||
                   q->wdtype == IG_DTYPE_Q8G); /* grouped formats */
    int rows = q && (q->wdtype == IG_DTYPE_Q8R || q->wdtype == IG_DTYPE_Q4R || q->wdtype == IG_DTYPE_F8R);
    if (q && !q->keep &&
        (mf != (rows ? PK_ROWMAJOR : PK_PANEL) ||
         (q->wdtype != IG_DTYPE_Q8C && q->wdtype != IG_DTYPE_Q8A && q->wdtype != IG_DTYPE_Q8I && q->wdtype != IG_DTYPE_Q8R &&
          q->wdtype != IG_DTYPE_F8R && !q4) ||
         (q4 && q->group != 32 && q->group != 64 && q->group != 128)))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "pack: quantized weights are int8 or uint4 with a group of 32, 64 or 128, "
                                                "in CPU panels (q8c, q8g, q8a, q8i, q4g, q4k, q4i) or GPU rows (q8r, q4r, f8r)");
    /* fp8 packages keep their experts in q8r (moe.cu reads int8 rows; the same bytes as e4m3) */
    pk_quant qf8 = q ? *q : (pk_quant){0};
    if (q && q->wdtype == IG_DTYPE_F8R) qf8.wdtype = IG_DTYPE_Q8R;
    const pk_quant *qe = q ? &qf8 : NULL;
    ig_status st = IG_OK;
    for (int32_t i = 0; i < g->n_nodes && !st; i++) {
        const ir_node *n = &g->nodes[i];
        switch (n->op) {
        case IR_OP_EMBED: st = add_entry(g, plan, n->in[1], mf, wdtype, q, 1, err); break;
        case IR_OP_NORM_MATMUL:
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            if (!st) st = add_entry(g, plan, n->in[2], mf, wdtype, q, n->layer < 0, err);
            if (!st) st = add_entry(g, plan, n->in[3], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            break;
        case IR_OP_MATMUL_EPI:
            st = add_entry(g, plan, n->in[1], mf, wdtype, q, n->layer < 0, err);
            if (!st) st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            break;
        case IR_OP_ROPE_KV:
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            if (!st) st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            break;
        case IR_OP_NORM_ADD: st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err); break;
        case IR_OP_RMSNORM: st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err); break;
        case IR_OP_MOE:        /* router (f32 rows), stacked experts (panels) */
        case IR_OP_MOE_SHARED: /* shared expert's gate (f32 row), its gate/up and down (panels) */
            /* the experts take the weight format: CPU panels (each expert's rows are a multiple of
             * 16, so no panel straddles two experts: moe.c finds expert e at e x its panels' bytes)
             * or GPU rows (moe.cu: expert e at row e x its rows); --quant keep repacks a GGUF's 3-D
             * expert blocks (each expert's slice is whole rows of blocks) like any matrix */
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, 0, err);
            if (!st) st = add_entry(g, plan, n->in[2], mf, wdtype, qe, 0, err);
            if (!st) st = add_entry(g, plan, n->in[3], mf, wdtype, qe, 0, err);
            break;
        default: break;
        }
    }
    if (!st && q && q->keep) unify_kept(g, plan, wdtype);
    /* every --quant-skip entry names some matrix (a typo would silently quantize it) */
    for (const char *k = q ? q->skip : NULL; !st && k && *k;) {
        const char *e = strchr(k, ',');
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)(e ? e - k : (long)strlen(k)), k);
        int hit = 0;
        for (int32_t i = 0; i < plan->n && !hit; i++)
            hit = (plan->e[i].fmt == PK_PANEL || plan->e[i].fmt == PK_ROWMAJOR) && pk_quant_skips(one, plan->e[i].name);
        if (!hit) st = ig_fail(err, IG_ERR_INVALID, "--quant-skip: '%s' names no weight matrix of this model", one);
        k = e ? e + 1 : NULL;
    }
    if (st) pk_plan_free(plan);
    return st;
}

void pk_plan_free(pk_plan *plan) {
    if (!plan) return;
    free(plan->e);
    memset(plan, 0, sizeof *plan);
}

int32_t pk_find(const pk_plan *plan, int32_t t) {
    for (int32_t i = 0; i < plan->n; i++)
        if (plan->e[i].tensor == t) return i;
    return -1;
}

ig_status pk_write(const ir_graph *g, pk_plan *plan, const char *path, ig_err *err) {
    ir_sources *src = ir_sources_open(g);
    if (!src) return ig_fail(err, IG_ERR_NOMEM, "pack: cannot open weight sources");
    FILE *f = fopen(path, "wb");
    if (!f) {
        ir_sources_close(src);
        return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    ig_status st = IG_OK;
    uint64_t pos = 0;
    static const uint8_t zeros[ALIGN];
    for (int32_t i = 0; i < plan->n && !st; i++) {
        pk_entry *e = &plan->e[i];
        const ir_tensor *t = &g->tensors[e->tensor];
        int64_t rows = t->shape[0], cols = t->rank == 2 ? t->shape[1] : 1;
        /* kept blocks: rows x cols / 32 blocks of at most 34 bytes, or GPTQ / AWQ integer rows */
        size_t wbytes = e->kept && e->stype == IR_STYPE_GPTQ ? (size_t)rows * ir_gq_row_bytes(cols, e->group)
                        : e->kept ? (size_t)rows * (size_t)(cols / 32) * 34
                                  : sizeof(float) * (size_t)(rows * cols);
        float *w = malloc(wbytes);
        uint8_t *out = calloc(1, e->nbytes);
        if (!w || !out) {
            st = ig_fail(err, IG_ERR_NOMEM, "pack: out of memory for %s", t->name);
        } else {
            st = e->kept ? ir_weight_read_blocks(src, g, t, e->stype, w, err) : ir_weight_read_f32(src, g, t, w, err);
        }
        if (!st) {
            if (e->kept && e->stype == IR_STYPE_GPTQ) {
                pk_repack_gq(w, rows, cols, e->group, e->bits, out);
            } else if (e->kept) {
                if (e->fmt == PK_ROWMAJOR ? pk_repack_blocks_q4r(w, e->stype, rows, cols, out)
                                          : pk_repack_blocks(w, e->stype, rows, cols, out))
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "--quant keep: %s has a Q4_0 scale d whose -8d (or a Q6_K d whose 32d) is past f16's range",
                                 t->name);
            } else if (e->fmt == PK_PANEL && (e->dtype == IG_DTYPE_Q8C || e->dtype == IG_DTYPE_Q8A || e->dtype == IG_DTYPE_Q8I))
                pk_pack_q8c(w, rows, cols, e->dtype, out);
            else if (e->fmt == PK_PANEL && e->dtype == IG_DTYPE_Q4G)
                pk_pack_q4g(w, rows, cols, e->group, out);
            else if (e->fmt == PK_PANEL && e->dtype == IG_DTYPE_Q8G)
                pk_pack_q8g(w, rows, cols, e->group, out);
            else if (e->fmt == PK_PANEL && (e->dtype == IG_DTYPE_Q4K || e->dtype == IG_DTYPE_Q6K || e->dtype == IG_DTYPE_Q4I ||
                                            e->dtype == IG_DTYPE_Q6I))
                pk_pack_q4k(w, rows, cols, e->group, e->dtype, out);
            else if (e->fmt == PK_ROWMAJOR && e->dtype == IG_DTYPE_Q8R)
                pk_pack_q8r(w, rows, cols, out);
            else if (e->fmt == PK_ROWMAJOR && e->dtype == IG_DTYPE_F8R) {
                if (pk_pack_f8r(w, rows, cols, out))
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "--quant fp8: %s has a weight of magnitude %g or more (or not finite): "
                                 "f8r rows hold up to %g (keep it in 16 bits with --quant-skip, or use a16w8)",
                                 t->name, (double)PK_F8R_WMAX, (double)PK_F8R_WMAX);
            }
            else if (e->fmt == PK_ROWMAJOR && e->dtype == IG_DTYPE_Q4R)
                pk_pack_q4r(w, rows, cols, e->group, out);
            else if (e->fmt == PK_PANEL)
                pk_pack_panels(w, rows, cols, e->dtype, out);
            else if (e->fmt == PK_ROWMAJOR)
                pk_pack_rows(w, rows, cols, e->dtype, out);
            else
                memcpy(out, w, sizeof(float) * (size_t)(rows * cols));
        }
        if (!st) {
            e->hash = rt_hash64(out, e->nbytes, 0);
            if (fwrite(zeros, 1, e->offset - pos, f) != e->offset - pos ||
                fwrite(out, 1, e->nbytes, f) != e->nbytes)
                st = ig_fail(err, IG_ERR_IO, "%s: write failed (disk full?)", path);
            pos = e->offset + e->nbytes;
        }
        free(w);
        free(out);
    }
    if (fclose(f) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "%s: write failed", path);
    ir_sources_close(src);
    return st;
}
