/* embed.cu — template: gather embedding rows, x[t][:] = E[ids[t]][:] as f32.
 *
 * Instantiate with EM_NAME, EM_D (hidden size, multiple of 8), EM_WBF16 (table type), EM_SCALE
 * (rows multiplied by it in f32, Gemma's sqrt(hidden); default 1: a plain copy), EM_WQ / EM_WG
 * (a quantized table: q8r or q4r rows of wq.cuh, dequantized to f32 here); defines
 *   extern "C" __global__ void EM_NAME(int T, const int *ids, const WT *w, float *x);
 * w is E [V][EM_D] row-major (the same bytes a tied lm_head GEMV reads), x f32 [T][EM_D].
 * launch: grid = (IG_EM_GRID_X(T) = T), block = IG_EM_BLOCK = 128, smem 0.
 * One CTA per token copies its row with 16-byte loads and 16-byte stores. ids must be valid
 * (0 <= id < V): the runtime checks them before the step.
 * Tensor parallel (EM_ROWS > 0): w holds only rows [lo, lo + EM_ROWS) of the vocabulary, and the
 * kernel takes lo as a last parameter (..., float *x, int lo); a token outside them gets zeros
 * (the all-reduce after the embedding adds the owning rank's row).
 */
#include "common.cuh"
#include "wq.cuh"

#ifndef EM_NAME
#define EM_NAME ig_embed
#endif
#ifndef EM_D
#define EM_D 2048
#endif
#ifndef EM_WBF16
#define EM_WBF16 1
#endif

#ifndef EM_WQ
#define EM_WQ 0
#endif
#ifndef EM_WG
#define EM_WG 32
#endif

#if EM_WQ
#define EM_WT_ unsigned char
#elif EM_WBF16
#define EM_WT_ unsigned short
#else
#define EM_WT_ float
#endif

#ifndef EM_ROWS
#define EM_ROWS 0
#endif
#ifndef EM_SCALE
#define EM_SCALE 1.0f
#endif

#if EM_ROWS
extern "C" __global__ void __launch_bounds__(IG_EM_BLOCK) EM_NAME(int T, const int *ids, const EM_WT_ *w, float *x, int lo) {
#else
extern "C" __global__ void __launch_bounds__(IG_EM_BLOCK) EM_NAME(int T, const int *ids, const EM_WT_ *w, float *x) {
    const int lo = 0;
#endif
    static_assert(EM_D % 8 == 0, "EM_D must be a multiple of 8");
    constexpr int ES = EM_WBF16 ? 2 : 4, VE = 16 / ES, NV = EM_D / VE;
    const int t = blockIdx.x;
    if (t >= T) return;
    const int id = ids[t] - lo;
    float *xr = x + (size_t)t * EM_D;
    if (EM_ROWS && (id < 0 || id >= EM_ROWS)) {
        for (int k = threadIdx.x; k < EM_D; k += IG_EM_BLOCK) xr[k] = 0.0f;
        return;
    }
    if (EM_WQ) { /* codes x scale (+ min) */
        constexpr int WQ = EM_WQ ? EM_WQ : 8, RB = IG_WQ_ROWB(EM_D, WQ, EM_WG), QE = WQ == 8 ? 16 : 32;
        const unsigned char *qr = (const unsigned char *)w + (size_t)id * RB;
        const float s8 = WQ == 8 ? ig_wq8_scale<EM_D>((const unsigned char *)w, id) : 0.0f;
        for (int v = threadIdx.x; v < IG_WQ_CODEB(EM_D, WQ) / 16; v += IG_EM_BLOCK) {
            const uint4 c = ig_ldg16(qr + (size_t)v * 16);
            float f[QE];
            float2 sm = make_float2(s8, 0.0f);
            if (WQ == 4) sm = ig_wq4_sm<EM_D, RB, EM_WG>((const unsigned char *)w, id, v * QE);
            sm.x *= EM_SCALE, sm.y *= EM_SCALE; /* (scale q + min) x EM_SCALE */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (WQ == 8) ig_wq8_word(ig_wq_w(c, i), f + 4 * i);
                else ig_wq4_word(ig_wq_w(c, i), f + 8 * i);
            }
#pragma unroll
            for (int e = 0; e < QE; e += 4)
                ((float4 *)(xr + v * QE))[e / 4] = make_float4(fmaf(sm.x, f[e], sm.y), fmaf(sm.x, f[e + 1], sm.y),
                                                               fmaf(sm.x, f[e + 2], sm.y), fmaf(sm.x, f[e + 3], sm.y));
        }
        return;
    }
    const char *row = (const char *)w + (size_t)id * EM_D * ES;
    for (int v = threadIdx.x; v < NV; v += IG_EM_BLOCK) {
        float f[VE];
        ig_unpack16(ig_ldg16(row + (size_t)v * 16), ES, f);
        if (EM_SCALE != 1.0f)
#pragma unroll
            for (int e = 0; e < VE; e++) f[e] *= EM_SCALE;
#pragma unroll
        for (int e = 0; e < VE; e += 4) ((float4 *)(xr + v * VE))[e / 4] = make_float4(f[e], f[e + 1], f[e + 2], f[e + 3]);
    }
}

#undef EM_WT_
#undef EM_WQ
#undef EM_WG
#undef EM_NAME
#undef EM_D
#undef EM_WBF16
#undef EM_ROWS
#undef EM_SCALE
