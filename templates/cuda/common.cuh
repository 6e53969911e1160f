/* common.cuh — device helpers shared by the CUDA kernel templates (gemv, epilogue, rmsnorm,
 * rope_kv, attention, embed, sample): bf16 <-> f32 by bit manipulation, 16-byte vector loads,
 * warp reductions, an online-softmax merge, and the launch-shape macros (launch.h).
 *
 * Everything here must compile under NVRTC, which has no host headers: no <stdint.h>, <math.h>,
 * <cuda_bf16.h>. We use plain integer types, the vector types NVRTC predefines (uint4, float4),
 * and CUDA built-ins (__ldg, __shfl_xor_sync, exp2f, rsqrtf, sincos). Include-guarded; defines only
 * __device__ inline functions and constant macros, so a generated model.cu can include many
 * template instances in one translation unit.
 */
#ifndef IG_CUDA_COMMON_CUH
#define IG_CUDA_COMMON_CUH

#include "launch.h"

/* bf16 is stored as unsigned short: the upper half of an IEEE f32. */
typedef unsigned short ig_bf16;

#define IG_DEV static __device__ __forceinline__
#define IG_CAT_(a, b) a##b
#define IG_CAT(a, b) IG_CAT_(a, b)
#define IG_NEG_INF (__int_as_float(0xff800000))
#define IG_FULL_MASK 0xffffffffu
/* The kernel's dynamic shared memory as an array `name` of T (a macro so that the host emulation of
 * tests/cuda_host/cuda_emul.h can point it at its own storage). */
#define IG_DYN_SMEM(T, name) extern __shared__ T name[]


IG_DEV float ig_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

/* Round to nearest even; NaN stays NaN (quiet bit forced so the payload cannot round to inf).
 * Same rule as the CPU templates' ig_f32_to_bf16, so both targets round identically. */
IG_DEV unsigned short ig_f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

/* The 8 bf16 of a 16-byte word, as f32 (exact: a shift or a mask per element). */
IG_DEV void ig_unpack8_bf16(uint4 v, float *o) {
    o[0] = __uint_as_float(v.x << 16), o[1] = __uint_as_float(v.x & 0xffff0000u);
    o[2] = __uint_as_float(v.y << 16), o[3] = __uint_as_float(v.y & 0xffff0000u);
    o[4] = __uint_as_float(v.z << 16), o[5] = __uint_as_float(v.z & 0xffff0000u);
    o[6] = __uint_as_float(v.w << 16), o[7] = __uint_as_float(v.w & 0xffff0000u);
}
IG_DEV void ig_unpack4_f32(uint4 v, float *o) {
    o[0] = __uint_as_float(v.x), o[1] = __uint_as_float(v.y);
    o[2] = __uint_as_float(v.z), o[3] = __uint_as_float(v.w);
}
IG_DEV unsigned ig_pack2_bf16(float a, float b) {
    return (unsigned)ig_f32_to_bf16(a) | ((unsigned)ig_f32_to_bf16(b) << 16);
}

/* The package's 16-bit element type (weights, KV pages, 16-bit activations): bf16, or IEEE half
 * when the package was compiled with --dtype f16 (codegen defines IG_F16 1). Every kernel but the
 * persistent decode kernel (bf16 only) converts through the ig_h* helpers below; with IG_F16 0
 * they are the bf16 functions above. Half conversions are the PTX cvt instructions (round to
 * nearest even; out-of-range values become inf, as any f16 engine's). */
#ifndef IG_F16
#define IG_F16 0
#endif
IG_DEV float ig_f16_to_f32(unsigned short h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
IG_DEV unsigned short ig_f32_to_f16(float f) {
    unsigned short h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
IG_DEV float ig_h_to_f32(unsigned short h) { return IG_F16 ? ig_f16_to_f32(h) : ig_bf16_to_f32(h); }
IG_DEV unsigned short ig_f32_to_h(float f) { return IG_F16 ? ig_f32_to_f16(f) : ig_f32_to_bf16(f); }
/* A value as 16-bit rows hold it: rounded to the package's 16-bit type and back. */
IG_DEV float ig_round_h(float v) { return ig_h_to_f32(ig_f32_to_h(v)); }
IG_DEV unsigned ig_pack2_h(float a, float b) { return (unsigned)ig_f32_to_h(a) | ((unsigned)ig_f32_to_h(b) << 16); }
/* The 2 elements of a 32-bit word (the first in the low half), as f32. */
IG_DEV void ig_unpack2_h(unsigned w, float *o) {
    if (IG_F16) o[0] = ig_f16_to_f32((unsigned short)(w & 0xffffu)), o[1] = ig_f16_to_f32((unsigned short)(w >> 16));
    else o[0] = __uint_as_float(w << 16), o[1] = __uint_as_float(w & 0xffff0000u);
}
IG_DEV void ig_unpack8_h(uint4 v, float *o) {
    if (IG_F16) ig_unpack2_h(v.x, o), ig_unpack2_h(v.y, o + 2), ig_unpack2_h(v.z, o + 4), ig_unpack2_h(v.w, o + 6);
    else ig_unpack8_bf16(v, o);
}
/* 16-byte word -> 16/ES f32 values (ES = element bytes: 2 the 16-bit type, 4 f32). */
IG_DEV void ig_unpack16(uint4 v, int es, float *o) {
    if (es == 2) ig_unpack8_h(v, o);
    else ig_unpack4_f32(v, o);
}

/* Read-only 16-byte load through the non-coherent (texture) path: the streamed operands (weights,
 * KV pages) are never written by the kernel that reads them. */
IG_DEV uint4 ig_ldg16(const void *p) { return __ldg((const uint4 *)p); }

/* One CTA's global writes handed to another CTA of the same launch (split reductions, arrival
 * counters) in the PTX memory model's release / acquire form, as CUTLASS's semaphore and
 * stream.cuh's grid barrier: the writers store, bar.sync (every thread's writes ordered before
 * thread 0's next operation), thread 0 does one release (or acq_rel) atomic at gpu scope; a CTA
 * whose thread 0 reads that count (or a later one) with an acquire, then bar.syncs, sees those
 * writes in every thread. No __threadfence (fence.sc.gpu: a MEMBAR.SC.GPU in every warp) on
 * either side. */
IG_DEV unsigned ig_atom_add_acq_rel_gpu(unsigned *p, unsigned v) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
IG_DEV unsigned long long ig_atom_add_acq_rel_gpu(unsigned long long *p, unsigned long long v) {
    unsigned long long old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}
IG_DEV void ig_red_add_release_gpu(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
IG_DEV unsigned ig_ld_acquire_gpu(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

IG_DEV float ig_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(IG_FULL_MASK, v, o);
    return v;
}
IG_DEV float ig_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(IG_FULL_MASK, v, o));
    return v;
}

/* Sum over a whole CTA (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
 * `red` is 32 floats of shared memory; the trailing barrier lets the caller reuse it. */
/* Greedy pick by key (ig_amax_key): the largest key is the largest value with the smallest index,
 * as a max over 64-bit integers. NaN keys above +inf's, so a row holding NaN or +inf has its best
 * key >= IG_AMAX_BAD; -0 keys as +0. A kernel that writes logits can leave per-CTA best keys for
 * sample.cu, which then skips its pass over the row. */
#define IG_AMAX_BAD 0xff800000u /* high word of +inf's key */
IG_DEV unsigned long long ig_amax_key(float v, int i) {
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    const unsigned k = v != v ? 0xffffffffu : (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)k << 32) | (0xffffffffu - (unsigned)i);
}
/* The value and index of a key (the value is meaningless when the key is >= IG_AMAX_BAD). */
IG_DEV float ig_amax_value(unsigned long long key) {
    const unsigned k = (unsigned)(key >> 32);
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
IG_DEV int ig_amax_index(unsigned long long key) { return (int)(0xffffffffu - (unsigned)key); }

IG_DEV float ig_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ig_warp_sum(v);
    if (lane == 0) red[wid] = v;
    __syncthreads();
    float s = lane < nw ? red[lane] : 0.0f;
    s = ig_warp_sum(s);
    __syncthreads();
    return s;
}

/* 2^x for softmax weights: one MUFU.EX2 (ex2.approx.ftz). exp2f is the same approximation wrapped in
 * three more instructions that keep results below 2^-126 subnormal (a compare and two multiplies:
 * seen in the SASS of the attention kernels); a weight that small is 0 here. */
IG_DEV float ig_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/* Online-softmax scale factor exp2(m - M) that is 0 for an empty state (m == -inf), so that
 * merging two empty states gives 0 instead of exp2(-inf - -inf) = NaN. Scores are kept in the
 * log2 domain (q pre-scaled by log2(e)) so that ig_exp2 is the only exp used. */
IG_DEV float ig_sm_factor(float m, float M) { return m == IG_NEG_INF ? 0.0f : ig_exp2(m - M); }

/* The gated MLP's activation of one (gate, up) pair: silu(g) * u (SwiGLU), or with gelu
 * gelu_tanh(g) * u (GeGLU: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), tanh(z) = 1 - 2 /
 * (exp(2z) + 1), clamped at |z| > 20: templates/cpu/common.h's ig_gelu_mul16, transformers'
 * gelu_pytorch_tanh). */
IG_DEV float ig_glu(float g, float u, bool gelu) {
    if (!gelu) return g / (1.0f + expf(-g)) * u;
    const float z = 0.7978845608028654f * (g + 0.044715f * g * g * g);
    const float th = z > 20.0f ? 1.0f : z < -20.0f ? -1.0f : 1.0f - 2.0f / (expf(2.0f * z) + 1.0f);
    return 0.5f * g * (1.0f + th) * u;
}

#endif /* IG_CUDA_COMMON_CUH */
