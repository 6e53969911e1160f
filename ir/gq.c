/* gq.c — decoding GPTQ / AWQ layers (see gq.h; the layouts are ir_gq's in ir.h). */
#include "gq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float f16_to_f32(uint16_t h) {
    uint32_t e = (h >> 10) & 31u, m = h & 1023u;
    float v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexpf((float)(m | 1024u), (int)e - 25) : ldexpf((float)m, -24);
    return h & 0x8000u ? -v : v;
}

/* f as an IEEE half when it is exactly one (finite); 0 otherwise. */
static int f16_exact(float f, uint16_t *h) {
    if (!isfinite(f)) return 0;
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    float a = fabsf(f);
    if (a == 0.0f) return *h = sign, 1;
    if (a < 0x1p-14f) { /* subnormal: a multiple of 2^-24 below 2^-14 */
        float m = a * 0x1p24f;
        if (m != floorf(m)) return 0;
        return *h = (uint16_t)(sign | (uint16_t)m), 1;
    }
    int e;
    float fr = frexpf(a, &e); /* a = fr 2^e, fr in [0.5, 1) */
    float mant = (2.0f * fr - 1.0f) * 1024.0f;
    if (e - 1 > 15 || mant != floorf(mant)) return 0;
    return *h = (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)mant), 1;
}

static uint32_t word(const uint8_t *p, uint64_t i) {
    uint32_t w;
    memcpy(&w, p + 4 * i, 4);
    return w;
}

/* The code of (k, n) and the stored zero point of (group g, n). */
static int code_at(const ir_tensor *t, const ir_gq_src *s, int64_t k, int64_t n) {
    const int b = t->gq.bits, pack = 32 / b, N = (int)t->shape[0];
    if (t->src_type == IR_STYPE_AWQ) { /* nibble p holds column 8c + {0,2,4,6,1,3,5,7}[p] */
        static const int pos[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        return (int)((word(s->qweight, (uint64_t)k * (N / 8) + n / 8) >> (4 * pos[n % 8])) & 15u);
    }
    return (int)((word(s->qweight, (uint64_t)(k / pack) * N + n) >> (b * (k % pack))) & ((1u << b) - 1u));
}

static int zero_at(const ir_tensor *t, const ir_gq_src *s, int64_t g, int64_t n) {
    const int b = t->gq.bits, pack = 32 / b, N = (int)t->shape[0];
    if (t->src_type == IR_STYPE_AWQ) {
        static const int pos[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        return (int)((word(s->zeros, (uint64_t)g * (N / 8) + n / 8) >> (4 * pos[n % 8])) & 15u);
    }
    return (int)((word(s->zeros, (uint64_t)g * (N / pack) + n / pack) >> (b * (n % pack))) & ((1u << b) - 1u));
}

static float scale_at(const ir_gq_src *s, int64_t i) {
    if (s->scales_type == IR_STYPE_F32) {
        float f;
        memcpy(&f, s->scales + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, s->scales + 2 * i, 2);
    if (s->scales_type == IR_STYPE_F16) return f16_to_f32(h);
    uint32_t u = (uint32_t)h << 16; /* bf16 */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Sizes of the stored tensors against the layer's shape; *ng: the number of groups. */
static ig_status check_sizes(const ir_tensor *t, const ir_gq_src *s, int64_t *ng, ig_err *err) {
    const int64_t N = t->shape[0], K = t->rank == 2 ? t->shape[1] : 0, G = t->gq.group;
    const int b = t->gq.bits, awq = t->src_type == IR_STYPE_AWQ;
    const char *m = awq ? "AWQ" : "GPTQ";
    if (t->rank != 2 || N <= 0 || K <= 0 || G <= 0 || (b != 4 && b != 8) || (awq && b != 4))
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: a %s layer of %d bits, group %lld, shape [%lld, %lld]", t->name, m, b,
                       (long long)G, (long long)N, (long long)K);
    const int pack = 32 / b;
    *ng = (K + G - 1) / G;
    if (awq ? N % 8 || K % G : K % pack || N % pack)
        return ig_fail(err, IG_ERR_MISMATCH, "tensor %s: %s %d-bit layers need %s; this one is [%lld out, %lld in] with group %lld",
                       t->name, m, b, awq ? "out features in words of 8 and in features in whole groups"
                                          : "in and out features in whole 32-bit words",
                       (long long)N, (long long)K, (long long)G);
    uint64_t es = s->scales_type == IR_STYPE_F32 ? 4 : 2;
    uint64_t want_q = awq ? (uint64_t)K * (uint64_t)(N / 8) * 4 : (uint64_t)(K / pack) * (uint64_t)N * 4;
    uint64_t want_z = (uint64_t)*ng * (uint64_t)(N / (awq ? 8 : pack)) * 4, want_s = (uint64_t)*ng * (uint64_t)N * es;
    if (s->n_qweight != want_q || s->n_zeros != want_z || s->n_scales != want_s || (s->g_idx && s->n_gidx != (uint64_t)K * 4))
        return ig_fail(err, IG_ERR_MISMATCH, "tensor %s: qweight / qzeros / scales%s hold %llu / %llu / %llu%s bytes, a %s layer "
                       "[%lld, %lld] of %d bits and group %lld needs %llu / %llu / %llu%s", t->name, s->g_idx ? " / g_idx" : "",
                       (unsigned long long)s->n_qweight, (unsigned long long)s->n_zeros, (unsigned long long)s->n_scales,
                       s->g_idx ? " / ..." : "", m, (long long)N, (long long)K, b, (long long)G, (unsigned long long)want_q,
                       (unsigned long long)want_z, (unsigned long long)want_s, s->g_idx ? " / 4 K" : "");
    return IG_OK;
}

/* grp[k]: the group of column k (g_idx, or k / G), each checked to be in range. */
static ig_status groups(const ir_tensor *t, const ir_gq_src *s, int64_t ng, int raw, int32_t *grp, ig_err *err) {
    const int64_t K = t->shape[1], G = t->gq.group;
    for (int64_t k = 0; k < K; k++) {
        int32_t v = (int32_t)(k / G);
        if (s->g_idx) memcpy(&v, s->g_idx + 4 * k, 4);
        if (v < 0 || v >= ng)
            return ig_fail(err, IG_ERR_FORMAT, "tensor %s: g_idx[%lld] = %d is out of range (%lld groups)", t->name,
                           (long long)k, v, (long long)ng);
        if (raw && k % G && v != grp[k - k % G])
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "tensor %s: g_idx[%lld] = %d but g_idx[%lld] = %d: columns are permuted within groups "
                           "(an act-order / desc_act checkpoint), which the integer formats do not keep; compile with "
                           "--quant none to dequantize it, or use a checkpoint quantized without desc_act",
                           t->name, (long long)k, v, (long long)(k - k % G), grp[k - k % G]);
        grp[k] = v;
    }
    return IG_OK;
}

ig_status ir_gq_decode(const ir_tensor *t, const ir_gq_src *s, int raw, uint8_t *out, ig_err *err) {
    int64_t ng = 0;
    ig_status st = check_sizes(t, s, &ng, err);
    if (st) return st;
    const int64_t N = t->shape[0], K = t->shape[1], G = t->gq.group;
    int32_t *grp = malloc(sizeof *grp * (size_t)K);
    if (!grp) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
    st = groups(t, s, ng, raw, grp, err);
    const size_t rb = ir_gq_row_bytes(K, (int32_t)G);
    for (int64_t n = 0; n < N && !st; n++) {
        if (raw) {
            uint8_t *row = out + (size_t)n * rb, *codes = row + 4 * (size_t)ng;
            for (int64_t b = 0; b < ng && !st; b++) {
                int64_t gi = grp[b * G];
                float sc = scale_at(s, gi * N + n);
                int z = zero_at(t, s, gi, n) + t->gq.zero_add;
                uint16_t hs, hz;
                if (!f16_exact(sc, &hs))
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: scale [%lld][%lld] = %g is not an f16 value (%s scales)",
                                 t->name, (long long)gi, (long long)n, (double)sc, ir_stype_name(s->scales_type));
                f16_exact((float)z, &hz); /* an integer 0 .. 256: exact */
                memcpy(row + 4 * b, &hs, 2);
                memcpy(row + 4 * b + 2, &hz, 2);
            }
            for (int64_t k = 0; k < K; k++) codes[k] = (uint8_t)code_at(t, s, k, n);
        } else {
            float *o = (float *)out + (size_t)n * K;
            for (int64_t k = 0; k < K; k++) {
                int z = zero_at(t, s, grp[k], n) + t->gq.zero_add;
                o[k] = scale_at(s, (int64_t)grp[k] * N + n) * (float)(code_at(t, s, k, n) - z);
            }
        }
    }
    free(grp);
    return st;
}
