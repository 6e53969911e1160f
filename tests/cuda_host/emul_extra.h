/* emul_extra.h — cuda_emul.h (after cpukv.h) and what moe.cu needs beyond it to run on the host
 * (tests/cuda_host): the atomics of _group and _dgu's arrival counter, __nanosleep, ig_warp_max,
 * dynamic shared memory in cuda_emul.h's buffer; and the helpers these host tests share (random values, bf16 rounding, CHECK counting failures). Include before the
 * kernel instances. Test code only. */
#ifndef IG_EMUL_EXTRA_H
#define IG_EMUL_EXTRA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "cpukv.h"
#include "cuda_emul.h"

static int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static void __nanosleep(unsigned) {}
IG_DEV float ig_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(IG_FULL_MASK, v, o));
    return v;
}
#undef IG_DYN_SMEM
#define IG_DYN_SMEM(T, name) T *name = (T *)ig_emul_dyn

static uint32_t g_rng = 12345;
static float frand() { /* uniform in [-1, 1) */
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) * (1.0f / 8388608.0f) - 1.0f;
}
static float bround(float v) { return ig_bf16_to_f32(ig_f32_to_bf16(v)); }

static int fails = 0;
#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
            printf(__VA_ARGS__);                              \
            printf("\n");                                     \
            fails++;                                          \
        }                                                     \
    } while (0)

/* W [N][K] as wq.cuh's rows (8: q8r, K codes then the f32 scale max |w| / 127 in a 16-byte tail;
 * 4: q4r, K / 2 bytes of nibbles, element 2i low, then an (f16 scale, f16 min) pair per group of
 * G, padded to 16), packed here from that documentation; W becomes the values the rows hold. */
static std::vector<unsigned char> pack_rows(std::vector<float> &w, size_t N, int K, int wq, int G) {
    const size_t rb = wq == 8 ? (size_t)K + 16 : (size_t)K / 2 + (4 * (K / G) + 15) / 16 * 16;
    std::vector<unsigned char> out(N * rb, 0);
    for (size_t n = 0; n < N; n++) {
        float *r = &w[n * K];
        unsigned char *o = &out[n * rb];
        if (wq == 8) {
            float amax = 0.0f;
            for (int k = 0; k < K; k++) amax = std::max(amax, fabsf(r[k]));
            const float s = amax / 127.0f;
            for (int k = 0; k < K; k++) {
                const long q = amax > 0.0f ? std::min(127L, std::max(-127L, lrintf(r[k] / s))) : 0;
                o[k] = (unsigned char)(signed char)q, r[k] = s * (float)q;
            }
            memcpy(o + K, &s, 4);
            continue;
        }
        for (int g = 0; g < K / G; g++) {
            float lo = r[g * G], hi = r[g * G];
            for (int k = g * G; k < (g + 1) * G; k++) lo = std::min(lo, r[k]), hi = std::max(hi, r[k]);
            const unsigned short sh = cpukv::ig_f32_to_f16(hi > lo ? (hi - lo) / 15.0f : 1.0f), mh = cpukv::ig_f32_to_f16(lo);
            const float sf = cpukv::ig_f16_to_f32(sh), mf = cpukv::ig_f16_to_f32(mh);
            for (int k = g * G; k < (g + 1) * G; k++) {
                const long q = std::min(15L, std::max(0L, lrintf((r[k] - mf) / sf)));
                o[k / 2] |= (unsigned char)(q << (4 * (k % 2)));
                r[k] = (float)((double)sf * q + mf);
            }
            const uint32_t sm = sh | (uint32_t)mh << 16;
            memcpy(o + K / 2 + 4 * g, &sm, 4);
        }
    }
    return out;
}

/* f8r rows (wq.cuh): q8r's layout with e4m3fn codes of w / s, s = max |w| / 448 per row (nearest
 * even, saturating: kv_quant.h's coder), then the NP scales again as one f32 vector; w becomes
 * the decoded s e4m3(q). */
static std::vector<unsigned char> pack_rows_f8(std::vector<float> &w, size_t N, int K) {
    const size_t rb = (size_t)K + 16;
    std::vector<unsigned char> out(N * rb + 4 * N, 0);
    for (size_t n = 0; n < N; n++) {
        float *r = &w[n * K];
        unsigned char *o = &out[n * rb];
        float amax = 0.0f;
        for (int k = 0; k < K; k++) amax = std::max(amax, fabsf(r[k]));
        const float s = amax / 448.0f;
        for (int k = 0; k < K; k++) {
            o[k] = amax > 0.0f ? cpukv::ig_f32_to_e4m3(r[k] / s) : 0;
            r[k] = s * cpukv::ig_e4m3_to_f32(o[k]);
        }
        memcpy(o + K, &s, 4), memcpy(&out[N * rb + 4 * n], &s, 4);
    }
    return out;
}

#endif /* IG_EMUL_EXTRA_H */
