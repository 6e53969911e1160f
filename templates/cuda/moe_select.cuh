/* moe_select.cuh — a token's expert selection from its router logits, by one warp: softmax over
 * the E experts in f32, the top K (ties to the lower expert index, as torch.topk), each weight the
 * softmax value, renormalized over the K with NORM. Shared by moe.cu's decode and prefill paths
 * (_dselect, _select) and the persistent decode kernel's MoE layers (decode_layers.cu), so every
 * path picks by the same arithmetic.
 *
 * lg: the E logits, written earlier in the same kernel by other CTAs or by an earlier launch (read
 * through L2); lane 0 writes sel[0..K) and wt[0..K). A row of NaN logits selects expert 0 (and
 * the output is NaN), never an index out of range. All 32 lanes call it.
 */
#ifndef IG_CUDA_MOE_SELECT_CUH
#define IG_CUDA_MOE_SELECT_CUH

#include "common.cuh"

template <int E, int K, bool NORM>
IG_DEV void ig_moe_select(const float *lg, int *sel, float *wt) {
    constexpr int EJ = (E + 31) / 32;
    const int lane = threadIdx.x & 31;
    float v[EJ], mx = IG_NEG_INF, sum = 0.0f, ksum = 0.0f, w[K];
    int be_k[K];
#pragma unroll
    for (int j = 0; j < EJ; j++) {
        const int e = lane + 32 * j;
        v[j] = e < E ? __ldcg(lg + e) : IG_NEG_INF;
        mx = fmaxf(mx, v[j]);
    }
    mx = ig_warp_max(mx);
#pragma unroll
    for (int j = 0; j < EJ; j++) {
        const int e = lane + 32 * j;
        v[j] = e < E ? expf(v[j] - mx) : -1.0f;
        sum += e < E ? v[j] : 0.0f;
    }
    sum = ig_warp_sum(sum);
    const float v0 = __shfl_sync(IG_FULL_MASK, v[0], 0); /* expert 0's, for NaN rows */
#pragma unroll
    for (int k = 0; k < K; k++) {
        float bv = -1.0f;
        int be = -1;
#pragma unroll
        for (int j = 0; j < EJ; j++) /* this lane's best untaken expert (v >= 0; the lowest index on ties) */
            if (v[j] >= 0.0f && (be < 0 || v[j] > bv)) bv = v[j], be = lane + 32 * j;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(IG_FULL_MASK, bv, o);
            const int oe = __shfl_xor_sync(IG_FULL_MASK, be, o);
            if (oe >= 0 && (be < 0 || ov > bv || (ov == bv && oe < be))) bv = ov, be = oe;
        }
        if (be < 0) be = 0, bv = v0; /* NaN logits: a valid expert, the output NaN */
#pragma unroll
        for (int j = 0; j < EJ; j++)
            if (lane + 32 * j == be) v[j] = -1.0f; /* taken */
        be_k[k] = be, w[k] = bv / sum, ksum += w[k];
    }
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < K; k++) sel[k] = be_k[k], wt[k] = NORM ? w[k] / ksum : w[k];
}

#endif /* IG_CUDA_MOE_SELECT_CUH */
