/* rmsnorm.cu — template: out = x / sqrt(mean(x²) + eps) * gamma, one CTA per token row.
 *
 * Instantiate with RN_NAME, RN_D (row length), RN_EPS (float literal), RN_OBF16 (0 f32 out,
 * 1 bf16 out, e.g. to feed a bf16 GEMV directly), RN_ADD (1: out is f32 and the normalized row is
 * added to it, out += x / sqrt(mean(x²) + eps) * gamma: a post-norm into the residual stream,
 * GLM-4 / Gemma 3, as templates/cpu/rmsnorm.c's RN_ADD); defines
 *   extern "C" __global__ void RN_NAME(int T, const float *x, const float *gamma, AT *out);
 * x f32 [T][RN_D], gamma f32 [RN_D], out [T][RN_D].
 * launch: grid = (IG_RN_GRID_X(T) = T), block = IG_RN_BLOCK(RN_D) (128, 256 or 1024), smem 0.
 * The sum of squares is f32 (per-thread partials, then a warp-shuffle and a cross-warp sum), like
 * the CPU template; the scale is 1/sqrtf (IEEE sqrt) rather than rsqrtf so both targets agree to
 * ~1 ulp. The row is read twice; the second read hits L1/L2 (a row is at most a few tens of KB).
 */
#include "common.cuh"

#ifndef RN_NAME
#define RN_NAME ig_rmsnorm
#endif
#ifndef RN_D
#define RN_D 2048
#endif
#ifndef RN_EPS
#define RN_EPS 1e-5f
#endif
#ifndef RN_OBF16
#define RN_OBF16 0
#endif
#ifndef RN_ADD
#define RN_ADD 0
#endif

#if RN_OBF16
#define RN_AT_ unsigned short
#else
#define RN_AT_ float
#endif

extern "C" __global__ void __launch_bounds__(IG_RN_BLOCK(RN_D))
RN_NAME(int T, const float *x, const float *gamma, RN_AT_ *out) {
    static_assert(!RN_ADD || !RN_OBF16, "RN_ADD accumulates into f32");
    __shared__ float red[32];
    const int t = blockIdx.x;
    if (t >= T) return;
    const float *xr = x + (size_t)t * RN_D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < RN_D; i += IG_RN_BLOCK(RN_D)) ss = fmaf(xr[i], xr[i], ss);
    ss = ig_block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)RN_D + RN_EPS);
    for (int i = threadIdx.x; i < RN_D; i += IG_RN_BLOCK(RN_D)) {
        const float o = xr[i] * s * gamma[i];
        if (RN_ADD) ((float *)out)[(size_t)t * RN_D + i] += o;
        else if (RN_OBF16) ((unsigned short *)out)[(size_t)t * RN_D + i] = ig_f32_to_h(o);
        else ((float *)out)[(size_t)t * RN_D + i] = o;
    }
}

#undef RN_AT_
#undef RN_NAME
#undef RN_D
#undef RN_EPS
#undef RN_OBF16
#undef RN_ADD
