/* fuzz_gptq.c — the GPTQ / AWQ layer decoder (ir/gq.c) on untrusted tensor bytes: qweight, qzeros,
 * scales and g_idx of a layer whose shape, bits, group, method and zero offset the first 8 bytes
 * choose, sized as the layer needs (or, when byte 7 says so, off by the next bytes' amounts so the
 * size checks run), decoded as integer rows and as f32. */
#include "fuzz_util.h"
#include "gq.h"

static void take(const uint8_t **d, size_t *n, uint8_t *dst, size_t want) {
    for (size_t i = 0; i < want; i++) dst[i] = *n ? (*d)[i % *n] : 0;
    size_t used = want < *n ? want : *n;
    *d += used, *n -= used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 8) return 0;
    const int awq = data[0] & 1, bits = awq || !(data[0] & 2) ? 4 : 8, pack = 32 / bits;
    const int64_t N = 8 * (1 + data[1] % 8), K = 8 * (1 + data[2] % 24);
    static const int32_t groups[] = {8, 16, 32, 64, 128, 0};
    int32_t G = groups[data[3] % 6];
    if (!G) G = (int32_t)K;
    if (awq && K % G) G = 8;
    const int64_t ng = (K + G - 1) / G;
    ir_tensor t = {.name = "fuzz.weight", .kind = IR_TENSOR_WEIGHT, .rank = 2, .shape = {N, K},
                   .src_type = awq ? IR_STYPE_AWQ : IR_STYPE_GPTQ,
                   .gq = {.bits = bits, .group = G, .zero_add = data[4] & 1, .scales = -1, .zeros = -1, .g_idx = -1}};
    ir_gq_src s = {.scales_type = data[5] % 3 == 0 ? IR_STYPE_F16 : data[5] % 3 == 1 ? IR_STYPE_BF16 : IR_STYPE_F32};
    uint64_t es = s.scales_type == IR_STYPE_F32 ? 4 : 2;
    s.n_qweight = awq ? (uint64_t)K * (uint64_t)(N / 8) * 4 : (uint64_t)(K / pack) * (uint64_t)N * 4;
    s.n_zeros = (uint64_t)ng * (uint64_t)(N / (awq ? 8 : pack)) * 4;
    s.n_scales = (uint64_t)ng * (uint64_t)N * es;
    s.n_gidx = !awq && (data[6] & 1) ? (uint64_t)K * 4 : 0;
    if (data[7] & 1) s.n_qweight += data[7] >> 1; /* a size the layer does not need */
    const uint8_t *d = data + 8;
    size_t left = n - 8;
    uint8_t *q = malloc(s.n_qweight + 1), *z = malloc(s.n_zeros + 1), *sc = malloc(s.n_scales + 1),
            *gi = malloc(s.n_gidx + 1);
    float *out = malloc(sizeof(float) * (size_t)(N * K) + ir_gq_row_bytes(K, G) * (size_t)N);
    if (!q || !z || !sc || !gi || !out) abort();
    take(&d, &left, q, s.n_qweight);
    take(&d, &left, z, s.n_zeros);
    take(&d, &left, sc, s.n_scales);
    take(&d, &left, gi, s.n_gidx);
    for (uint64_t i = 0; (data[6] & 2) && i < s.n_gidx / 4; i++) { /* mostly-valid group indices */
        int32_t v = (int32_t)(i / (uint64_t)G);
        if (gi[4 * i] & 1) v = gi[4 * i + 1] % (ng + 1);
        memcpy(gi + 4 * i, &v, 4);
    }
    s.qweight = q, s.zeros = z, s.scales = sc, s.g_idx = s.n_gidx ? gi : NULL;
    ig_err err;
    ir_gq_decode(&t, &s, 1, (uint8_t *)out, &err);
    ir_gq_decode(&t, &s, 0, (uint8_t *)out, &err);
    free(q), free(z), free(sc), free(gi), free(out);
    return 0;
}
