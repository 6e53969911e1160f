/* dequant.c — ir_dequant (see dequant.h): ggml block formats, f16, bf16 and f32 to f32.
 *
 * Block layouts (ggml, little-endian, no padding):
 *   Q4_0 {f16 d; u8 qs[16]}                 x = (nibble - 8) * d
 *   Q4_1 {f16 d, m; u8 qs[16]}              x = nibble * d + m
 *   Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}       x = ((nibble | hbit << 4) - 16) * d
 *   Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}    x = (nibble | hbit << 4) * d + m
 *   Q8_0 {f16 d; i8 qs[32]}                 x = q * d
 * In the 32-element formats byte j's low nibble is element j and its high nibble element j+16;
 * bit j of qh is the fifth bit of element j.
 *   Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}           8 sub-blocks of 32
 *   Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
 *   Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}       16 sub-blocks of 16
 * Q4_K/Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes (scale_min_k4 below);
 * each 64-element chunk uses 32 bytes of qs, low nibbles for its first 32 elements, high nibbles
 * for the next 32, x = d * sc * q - dmin * m.
 *
 * Contract (dequant.h): src_nbytes must be exactly the size of n elements, else IG_ERR_FORMAT.
 */
#include "dequant.h"

#include <string.h>

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float ld_f16(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0xF) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void deq_q4_1(const uint8_t *b, float *y) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void deq_q5_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

static void deq_q5_1(const uint8_t *b, float *y) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

static void deq_q8_0(const uint8_t *b, float *y) {
    float d = ld_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void deq_q4_k(const uint8_t *b, float *y) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int c = 0; c < 4; c++) { /* 64-element chunks */
        uint8_t sc, m;
        scale_min_k4(2 * c, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(2 * c + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) {
            y[l] = d1 * (float)(q[l] & 0xF) - m1;
            y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
        q += 32;
        y += 64;
    }
}

static void deq_q5_k(const uint8_t *b, float *y) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    for (int c = 0; c < 4; c++) {
        uint8_t sc, m;
        scale_min_k4(2 * c, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(2 * c + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
        for (int l = 0; l < 32; l++) {
            y[l] = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
            y[l + 32] = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
        ql += 32;
        y += 64;
    }
}

static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = ld_f16(b + 208);
    for (int half = 0; half < 2; half++) { /* 128 elements each */
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

ig_status ir_dequant(ir_stype t, const void *src, uint64_t src_nbytes, int64_t n, float *dst,
                     ig_err *err) {
    const uint8_t *s = src;
    int be, bb;
    void (*fn)(const uint8_t *, float *) = NULL;
    switch (t) {
    case IR_STYPE_F32: be = 1; bb = 4; break;
    case IR_STYPE_F16: be = 1; bb = 2; break;
    case IR_STYPE_BF16: be = 1; bb = 2; break;
    case IR_STYPE_Q4_0: be = 32; bb = 18; fn = deq_q4_0; break;
    case IR_STYPE_Q4_1: be = 32; bb = 20; fn = deq_q4_1; break;
    case IR_STYPE_Q5_0: be = 32; bb = 22; fn = deq_q5_0; break;
    case IR_STYPE_Q5_1: be = 32; bb = 24; fn = deq_q5_1; break;
    case IR_STYPE_Q8_0: be = 32; bb = 34; fn = deq_q8_0; break;
    case IR_STYPE_Q4_K: be = 256; bb = 144; fn = deq_q4_k; break;
    case IR_STYPE_Q5_K: be = 256; bb = 176; fn = deq_q5_k; break;
    case IR_STYPE_Q6_K: be = 256; bb = 210; fn = deq_q6_k; break;
    default:
        return ig_fail(err, IG_ERR_UNSUPPORTED, "ir_dequant: storage type %d is not supported",
                       (int)t);
    }
    if (n < 0 || n % be)
        return ig_fail(err, IG_ERR_FORMAT,
                       "ir_dequant: %lld %s elements is not a multiple of the block size %d",
                       (long long)n, ir_stype_name(t), be);
    uint64_t blocks = (uint64_t)n / (uint64_t)be;
    if (src_nbytes / (uint64_t)bb != blocks || src_nbytes % (uint64_t)bb)
        return ig_fail(err, IG_ERR_FORMAT,
                       "ir_dequant: %lld %s elements take %llu bytes, source has %llu",
                       (long long)n, ir_stype_name(t), (unsigned long long)(blocks * (uint64_t)bb),
                       (unsigned long long)src_nbytes);
    switch (t) {
    case IR_STYPE_F32:
        memcpy(dst, s, (size_t)n * 4);
        return IG_OK;
    case IR_STYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = ld_f16(s + 2 * i);
        return IG_OK;
    case IR_STYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(s[2 * i] | s[2 * i + 1] << 8) << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return IG_OK;
    default:
        break;
    }
    for (uint64_t i = 0; i < blocks; i++) fn(s + i * (uint64_t)bb, dst + i * (uint64_t)be);
    return IG_OK;
}
