/* epilogue.cu — template: elementwise epilogues around a cuBLAS(Lt) GEMM on the prefill path
 * (T > MV_TMAX), where the GEMM itself cannot fuse them: bias add and SwiGLU of the packed
 * gate/up output.
 *
 * Instantiate with EP_BIAS_NAME, EP_SWIGLU_NAME, EP_N, EP_LDY, EP_I, EP_LDGU,
 * EP_GUBF16, EP_OBF16, EP_GELU; defines
 *   extern "C" __global__ void EP_BIAS_NAME(int T, float *y, const float *bias);
 *       y[t][n] += bias[n] for n < EP_N, row stride EP_LDY (default EP_N)
 *   extern "C" __global__ void EP_SWIGLU_NAME(int T, const void *gu, const float *bias, AT *out);
 *       gu [T][EP_LDGU] (default 2*EP_I; f32, or bf16 when EP_GUBF16) in packed gate/up order
 *       (16-row blocks interleaved, SPEC.md); bias f32 [2*EP_I] in the same packed order, or null;
 *       out [T][EP_I] of AT (EP_OBF16): with g = gu[t][32q+j] + bias[32q+j] and
 *       u = gu[t][32q+16+j] + bias[32q+16+j], out[t][16q+j] = silu(g) * u, or with EP_GELU 1
 *       gelu_tanh(g) * u (GeGLU, common.cuh's ig_glu)
 * launch (launch.h):
 *   bias:   grid (IG_EP_BIAS_GRID_X(T, EP_N), T),   block IG_EP_BLOCK = 256, smem 0
 *   swiglu: grid (IG_EP_SWIGLU_GRID_X(T, EP_I), T), block 256, smem 0; a thread does 8
 *           consecutive outputs with 16-byte (bf16) or 2 x 16-byte (f32) loads
 * Tensor parallel (compiler/shard.c):
 *   extern "C" __global__ void EP_ADD_NAME(int T, float *y, const float *x);
 *       y[t][n] += x[t][n] for n < EP_N (the all-reduced partial result into the residual stream)
 *   extern "C" __global__ void EP_UNSHARD_NAME(int T, const float *g, float *y);
 *       g [ranks][T][EP_NL] (every rank's logits columns, as gathered) -> y [T][EP_N], column
 *       r * EP_NL + j from g[r][t][j], the padding past EP_N dropped
 * Logits (Gemma's final_logit_softcapping):
 *   extern "C" __global__ void EP_SOFTCAP_NAME(int T, float *y);
 *       y[t][n] = EP_CAP * tanh(y[t][n] / EP_CAP) for n < EP_N, in place
 *   launch: grid (IG_EP_BIAS_GRID_X(T, EP_N), T), block IG_EP_BLOCK, smem 0
 *   launch: grid (IG_EP_BIAS_GRID_X(T, EP_N), T), block IG_EP_BLOCK, smem 0
 * A name left undefined skips that kernel, so one instantiation can define only what it needs
 * (by default both are defined with ig_ep_* names).
 */
#include "common.cuh"

#if !defined(EP_BIAS_NAME) && !defined(EP_SWIGLU_NAME) && !defined(EP_ADD_NAME) && !defined(EP_UNSHARD_NAME) && \
    !defined(EP_SOFTCAP_NAME)
#define EP_BIAS_NAME ig_ep_bias
#define EP_SWIGLU_NAME ig_ep_swiglu
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
#ifndef EP_NL
#define EP_NL EP_N
#endif
#ifndef EP_LDGU
#define EP_LDGU (2 * (EP_I))
#endif
#ifndef EP_GUBF16
#define EP_GUBF16 0
#endif
#ifndef EP_OBF16
#define EP_OBF16 1
#endif
#ifndef EP_GELU
#define EP_GELU 0
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

#ifdef EP_ADD_NAME
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_ADD_NAME(int T, float *y, const float *x) {
    const int n = blockIdx.x * IG_EP_BLOCK + threadIdx.x, t = blockIdx.y;
    if (n < EP_N && t < T) y[(size_t)t * EP_N + n] += x[(size_t)t * EP_N + n];
}
#endif

#ifdef EP_UNSHARD_NAME
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_UNSHARD_NAME(int T, const float *g, float *y) {
    const int n = blockIdx.x * IG_EP_BLOCK + threadIdx.x, t = blockIdx.y;
    if (n < EP_N && t < T) y[(size_t)t * EP_N + n] = g[((size_t)(n / EP_NL) * T + t) * EP_NL + n % EP_NL];
}
#endif

#ifdef EP_SOFTCAP_NAME
#ifndef EP_CAP
#error "EP_SOFTCAP_NAME needs EP_CAP, the soft-cap"
#endif
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK) EP_SOFTCAP_NAME(int T, float *y) {
    const int n = blockIdx.x * IG_EP_BLOCK + threadIdx.x, t = blockIdx.y;
    if (n < EP_N && t < T) {
        float *p = y + (size_t)t * EP_N + n;
        *p = EP_CAP * tanhf(*p / EP_CAP);
    }
}
#endif

#ifdef EP_SWIGLU_NAME
extern "C" __global__ void __launch_bounds__(IG_EP_BLOCK)
EP_SWIGLU_NAME(int T, const void *gu, const float *bias, EP_AT_ *out) {
    static_assert(EP_I % 16 == 0 && EP_LDGU % 8 == 0, "SwiGLU needs I % 16 == 0 and 16-byte rows");
    const int i0 = (blockIdx.x * IG_EP_BLOCK + threadIdx.x) * 8, t = blockIdx.y;
    if (i0 >= EP_I || t >= T) return;
    const int c = 32 * (i0 >> 4) + (i0 & 15); /* packed column of gate i0; up is 16 further */
    float g[8], u[8];
    if (EP_GUBF16) {
        const unsigned short *r = (const unsigned short *)gu + (size_t)t * EP_LDGU + c;
        ig_unpack8_h(*(const uint4 *)r, g);
        ig_unpack8_h(*(const uint4 *)(r + 16), u);
    } else {
        const float *r = (const float *)gu + (size_t)t * EP_LDGU + c;
        ig_unpack4_f32(*(const uint4 *)r, g), ig_unpack4_f32(*(const uint4 *)(r + 4), g + 4);
        ig_unpack4_f32(*(const uint4 *)(r + 16), u), ig_unpack4_f32(*(const uint4 *)(r + 20), u + 4);
    }
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const float ge = bias ? g[e] + bias[c + e] : g[e], ue = bias ? u[e] + bias[c + 16 + e] : u[e];
        o[e] = ig_glu(ge, ue, EP_GELU);
    }
    if (EP_OBF16) {
        uint4 v = make_uint4(ig_pack2_h(o[0], o[1]), ig_pack2_h(o[2], o[3]), ig_pack2_h(o[4], o[5]),
                             ig_pack2_h(o[6], o[7]));
        *(uint4 *)((unsigned short *)out + (size_t)t * EP_I + i0) = v;
    } else {
        float4 *p = (float4 *)((float *)out + (size_t)t * EP_I + i0);
        p[0] = make_float4(o[0], o[1], o[2], o[3]), p[1] = make_float4(o[4], o[5], o[6], o[7]);
    }
}
#endif

#undef EP_AT_
#undef EP_BIAS_NAME
#undef EP_SWIGLU_NAME
#undef EP_ADD_NAME
#undef EP_UNSHARD_NAME
#undef EP_NL
#undef EP_N
#undef EP_LDY
#undef EP_I
#undef EP_LDGU
#undef EP_GUBF16
#undef EP_OBF16
#undef EP_GELU
