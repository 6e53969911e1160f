/* epilogue.cu — template: elementwise epilogues around a cuBLAS(Lt) GEMM on the prefill path
 * (T > MV_TMAX), where the GEMM itself cannot fuse them: bias add, SwiGLU of the packed gate/up
 * output, and the f32 -> activation-type cast of a GEMM input.
 *
 * Instantiate with EP_BIAS_NAME, EP_SWIGLU_NAME, EP_CAST_NAME, EP_N, EP_LDY, EP_I, EP_LDGU,
 * EP_OBF16; defines
 *   extern "C" __global__ void EP_BIAS_NAME(int T, float *y, const float *bias);
 *       y[t][n] += bias[n] for n < EP_N, row stride EP_LDY (default EP_N)
 *   extern "C" __global__ void EP_SWIGLU_NAME(int T, const float *gu, AT *out);
 *       gu f32 [T][EP_LDGU] (default 2*EP_I) in packed gate/up order (16-row blocks interleaved,
 *       SPEC.md); out [T][EP_I] of AT (EP_OBF16): out[t][16q+j] = silu(gu[t][32q+j]) * gu[t][32q+16+j]
 *   extern "C" __global__ void EP_CAST_NAME(int T, const float *x, AT *out, int n);
 *       out[i] = x[i] for i < T*n (T contiguous rows of n), AT by EP_OBF16
 * launch (launch.h):
 *   bias:   grid (IG_EP_BIAS_GRID_X(T, EP_N), T),   block IG_EP_BLOCK = 256, smem 0
 *   swiglu: grid (IG_EP_SWIGLU_GRID_X(T, EP_I), T), block 256, smem 0
 *   cast:   grid (IG_EP_CAST_GRID_X(T, n)),         block 256, smem 0 (grid-stride loop)
 * A name left undefined skips that kernel, so one instantiation can define only what it needs
 * (by default all three are defined with ig_ep_* names).
 */
#include "common.cuh"

#if !defined(EP_BIAS_NAME) && !defined(EP_SWIGLU_NAME) && !defined(EP_CAST_NAME)
#define EP_BIAS_NAME ig_ep_bias
#define EP_SWIGLU_NAME ig_ep_swiglu
#define EP_CAST_NAME ig_ep_cast
#endif
#ifndef EP_N
#define EP_N 2048
#endif
#ifndef EP_LDY
#define EP_LDY EP_N
#endif
#ifndef EP_I
#define EP_I 8192
#endif
#ifndef EP_LDGU
#define EP_LDGU (2 * (EP_I))
#endif
#ifndef EP_OBF16
#define EP_OBF16 1
#endif

#if EP_OBF16
#define EP_AT_ unsigned short
#else
#define EP_AT_ float
#endif

#ifdef EP_BIAS_NAME
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_BIAS_NAME(int T, float *y, const float *bias) {
    const int n = blockIdx.x * IG_EP_BLOCK + threadIdx.x, t = blockIdx.y;
    if (n < EP_N && t < T) y[(size_t)t * EP_LDY + n] += bias[n];
}
#endif

#ifdef EP_SWIGLU_NAME
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_SWIGLU_NAME(int T, const float *gu, EP_AT_ *out) {
    static_assert(EP_I % 16 == 0, "SwiGLU needs I % 16 == 0");
    const int i = blockIdx.x * IG_EP_BLOCK + threadIdx.x, t = blockIdx.y;
    if (i >= EP_I || t >= T) return;
    const float *r = gu + (size_t)t * EP_LDGU + 32 * (i >> 4) + (i & 15);
    const float g = r[0], u = r[16], o = g / (1.0f + expf(-g)) * u;
    if (EP_OBF16) ((unsigned short *)out)[(size_t)t * EP_I + i] = ig_f32_to_bf16(o);
    else ((float *)out)[(size_t)t * EP_I + i] = o;
}
#endif

#ifdef EP_CAST_NAME
/* Four elements per thread per step; the tail (T*n not a multiple of 4) is done elementwise. */
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_CAST_NAME(int T, const float *x, EP_AT_ *out, int n) {
    const long long total = (long long)T * n, n4 = total / 4;
    const long long stride = (long long)gridDim.x * IG_EP_BLOCK;
    const bool al = (((unsigned long long)x | (unsigned long long)out) & 15) == 0;
    long long i = (long long)blockIdx.x * IG_EP_BLOCK + threadIdx.x;
    if (al) {
        for (; i < n4; i += stride) {
            float4 v = ((const float4 *)x)[i];
            if (EP_OBF16) {
                ((uint2 *)out)[i] = make_uint2(ig_pack2_bf16(v.x, v.y), ig_pack2_bf16(v.z, v.w));
            } else {
                ((float4 *)out)[i] = v;
            }
        }
        i = 4 * n4 + (long long)blockIdx.x * IG_EP_BLOCK + threadIdx.x;
    }
    for (; i < total; i += stride) {
        if (EP_OBF16) ((unsigned short *)out)[i] = ig_f32_to_bf16(x[i]);
        else ((float *)out)[i] = x[i];
    }
}
#endif

#undef EP_AT_
#undef EP_BIAS_NAME
#undef EP_SWIGLU_NAME
#undef EP_CAST_NAME
#undef EP_N
#undef EP_LDY
#undef EP_I
#undef EP_LDGU
#undef EP_OBF16
