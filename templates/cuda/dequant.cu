/* dequant.cu — template: quantized weight rows (wq.cuh) -> the package's 16-bit type, row-major
 * [NP][DQ_K], for the cuBLAS GEMMs of steps larger than the GEMV path takes (prefill, big batches).
 *
 * Instantiate with DQ_NAME, DQ_K, DQ_NP (rows, padded to 16), DQ_WQ (8: q8r, 4: q4r), DQ_WG (q4r's
 * group), DQ_WF8 (1: the 8-bit rows are f8r, e4m3 codes); defines
 *   extern "C" __global__ void DQ_NAME(const unsigned char *w, unsigned short *out);
 * launch: grid = IG_DQ_GRID_X(DQ_NP, DQ_K, DQ_WQ), block = IG_DQ_BLOCK = 256, smem 0.
 * One thread per 16-byte vector of codes (16 or 32 weights), written as 16-bit values with 16-byte
 * stores: out[n][k] = to16(scale * q (+ min)), the weight the GEMV path multiplies, rounded once.
 * Memory-bound: reads the codes once and writes 2 bytes per weight (2.25x / 4.5x the bytes of the
 * quantized matrix, against the GEMM's own read of the 16-bit copy).
 */
#include "common.cuh"
#include "wq.cuh"

#ifndef DQ_NAME
#define DQ_NAME ig_dequant
#endif
#ifndef DQ_K
#define DQ_K 2048
#endif
#ifndef DQ_NP
#define DQ_NP 2048
#endif
#ifndef DQ_WQ
#define DQ_WQ 8
#endif
#ifndef DQ_WG
#define DQ_WG 32
#endif
#ifndef DQ_WF8
#define DQ_WF8 0
#endif

extern "C" __global__ void __launch_bounds__(IG_DQ_BLOCK) DQ_NAME(const unsigned char *w, unsigned short *out) {
    constexpr int CB = IG_WQ_CODEB(DQ_K, DQ_WQ), RB = IG_WQ_ROWB(DQ_K, DQ_WQ, DQ_WG), KV = CB / 16;
    constexpr int QE = DQ_WQ == 8 ? 16 : 32; /* weights per vector */
    static_assert((DQ_WQ == 8 && DQ_K % 16 == 0) || (DQ_WQ == 4 && DQ_K % 32 == 0 && DQ_K % DQ_WG == 0),
                  "q8r rows need K % 16 == 0, q4r rows K % 32 == 0 and whole groups");
    const long long i = (long long)blockIdx.x * IG_DQ_BLOCK + threadIdx.x;
    if (i >= (long long)DQ_NP * KV) return;
    const int n = (int)(i / KV), v = (int)(i % KV);
    const uint4 c = ig_ldg16(w + (size_t)n * RB + (size_t)v * 16);
    float2 sm;
    if (DQ_WQ == 8) sm = make_float2(ig_wq8_scale<DQ_K>(w, n), 0.0f);
    else sm = ig_wq4_sm<DQ_K, RB, DQ_WG>(w, n, v * QE);
    float f[QE];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (DQ_WQ == 8 && DQ_WF8) ig_wf8_word(ig_wq_w(c, k), f + 4 * k);
        else if (DQ_WQ == 8) ig_wq8_word(ig_wq_w(c, k), f + 4 * k);
        else ig_wq4_word(ig_wq_w(c, k), f + 8 * k);
    }
    if (DQ_WF8) { /* e4m3 2^-120 -> e4m3, exact */
#pragma unroll
        for (int e = 0; e < QE; e++) f[e] *= IG_WF8_UNIT_F32;
    }
    uint4 *o = (uint4 *)(out + (size_t)n * DQ_K + (size_t)v * QE);
#pragma unroll
    for (int e = 0; e < QE; e += 8)
        o[e / 8] = make_uint4(ig_pack2_h(fmaf(sm.x, f[e], sm.y), fmaf(sm.x, f[e + 1], sm.y)),
                              ig_pack2_h(fmaf(sm.x, f[e + 2], sm.y), fmaf(sm.x, f[e + 3], sm.y)),
                              ig_pack2_h(fmaf(sm.x, f[e + 4], sm.y), fmaf(sm.x, f[e + 5], sm.y)),
                              ig_pack2_h(fmaf(sm.x, f[e + 6], sm.y), fmaf(sm.x, f[e + 7], sm.y)));
}

#undef DQ_NAME
#undef DQ_K
#undef DQ_NP
#undef DQ_WQ
#undef DQ_WG
#undef DQ_WF8
