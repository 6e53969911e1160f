/* decode_layers.cu — template: the whole layer stack of a one-token decode step as one persistent
 * kernel (sm_90), built on stream.cuh. Per layer, with a grid barrier before each phase:
 *   qkv = rmsnorm(resid; g1) . Wqkv^T (+ bqkv)            tensor-core GEMV phase
 *   attention of the token (q/k norm, RoPE, k/v into the paged pool, split over the context in
 *     one split per keys_per_split keys, up to DL_SPLIT, the last split merging),
 *     attention.cu's decode item as a device function (AT_DEVFN)
 *   resid += att . Wo^T (+ bo)
 *   h = silu(gate) * up of rmsnorm(resid; g2) . Wgu^T (+ bgu)
 *   resid += h . Wdown^T (+ bdown)
 * while the producer thread streams every layer's weights, in that order, through the ring.
 * Embedding before and the final norm + lm_head after stay separate kernels (the lm_head GEMV
 * already streams at full bandwidth).
 *
 * Instantiate with DL_NAME, DL_LAYERS, DL_HID, DL_QKV_ROWS / DL_QKV_N (packed rows / outputs),
 * DL_HD (heads x head_dim, o's K), DL_GU_ROWS (packed gate/up rows; outputs DL_GU_ROWS / 2 = down's
 * K), DL_EPS1, DL_EPS2, DL_BQKV, DL_BO, DL_BGU, DL_BDOWN (0/1: bias present), DL_ATTN (an
 * attention.cu instance with AT_DEVFN 1), DL_KV, DL_SPLIT, DL_KV_LAYER_BYTES, and IG_ST_NSLOT
 * before the first include of stream.cuh. Defines
 *   extern "C" __global__ void DL_NAME(const ig_dl_layer *L, float *resid, float *qkv, float *q_out,
 *       ig_bf16 *att, ig_bf16 *h, const double *inv_freq, unsigned char *kv, const int *positions,
 *       const int *token_seq, const int *page_table, int max_pages, float *attn_ws,
 *       unsigned *attn_cnt, unsigned long long *bar, int keys_per_split);
 * L[DL_LAYERS]: device pointers of each layer's bf16 weights and f32 norms / biases (null where
 * absent). resid f32 [DL_HID] in and out; qkv f32 [DL_QKV_N], q_out f32 [DL_HD], att bf16 [DL_HD],
 * h bf16 [DL_GU_ROWS / 2] are scratch; attn_ws / attn_cnt as attention.cu's split kernels (counters
 * zero between launches); bar: 8 bytes, zero before the first launch, only this kernel uses it;
 * keys_per_split >= 1 (the host's default 256: ~1-2 us of K/V per CTA; small values in tests make
 * short contexts take the multi-split merge).
 * launch: cooperative, grid = the number of SMs (one CTA each, all resident, the same count every
 * launch), block IG_ST_THREADS, dynamic smem IG_ST_NSLOT * IG_ST_SLOT + IG_AT_SMEM(H, KV, D).
 * The host checks before using it: one CTA per SM fits, every phase gives a CTA at most
 * IG_ST_MAXCH slots and a residual-add phase at most IG_ST_CTHREADS rows.
 * Before sm_90 the kernel body is empty (the host never launches it there).
 */
#ifndef IG_ST_NSLOT
#define IG_ST_NSLOT 12
#endif
#include "stream.cuh"

#ifndef IG_DL_LAYER_T
#define IG_DL_LAYER_T
struct ig_dl_layer {
    const ig_bf16 *wqkv, *wo, *wgu, *wdown;
    const float *g1, *g2, *bqkv, *bo, *bgu, *bdown, *qn, *kn;
};
#endif

extern "C" __global__ void __launch_bounds__(IG_ST_THREADS, 1)
DL_NAME(const ig_dl_layer *L, float *resid, float *qkv, float *q_out, ig_bf16 *att, ig_bf16 *h, const double *inv_freq,
        unsigned char *kv, const int *positions, const int *token_seq, const int *page_table, int max_pages,
        float *attn_ws, unsigned *attn_cnt, unsigned long long *bar, int keys_per_split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    static_assert(IG_ST_CWARPS == IG_AT_WARPS, "attention items run on the consumer warps");
    constexpr int DOWN_K = DL_GU_ROWS / 2;
    extern __shared__ __align__(128) unsigned char dl_smem[]; /* the ring, then attention's scratch */
    __shared__ ig_st st;
    ig_st_init(&st, bar, gridDim.x);
    unsigned it = 0;
    if (threadIdx.x >= IG_ST_CTHREADS) { /* the producer: every layer's weights in phase order */
        if (threadIdx.x == IG_ST_CTHREADS)
            for (int l = 0; l < DL_LAYERS; l++) {
                const int p = 4 * l;
                ig_st_produce<DL_HID>(&st, dl_smem, L[l].wqkv, DL_QKV_ROWS, 1, p * 41, &it, L[l].g1, DL_HID * 4);
                ig_st_produce<DL_HD>(&st, dl_smem, L[l].wo, DL_HID, 1, (p + 1) * 41, &it);
                ig_st_produce<DL_HID>(&st, dl_smem, L[l].wgu, DL_GU_ROWS, 32, (p + 2) * 41, &it, L[l].g2, DL_HID * 4);
                ig_st_produce<DOWN_K>(&st, dl_smem, L[l].wdown, DL_HID, 1, (p + 3) * 41, &it);
            }
        return;
    }
    const unsigned G = gridDim.x;
    /* attention splits: one per keys_per_split keys of context, at most DL_SPLIT (a single split
     * writes its output without the merge's extra round trips) */
    const int n_keys = __ldg(positions) + 1;
    const int ns = min(DL_SPLIT, (n_keys + keys_per_split - 1) / keys_per_split);
    float *at_sm = (float *)(dl_smem + (size_t)IG_ST_NSLOT * IG_ST_SLOT);
    for (int l = 0; l < DL_LAYERS; l++) {
        const int p = 4 * l;
        const ig_dl_layer *w = L + l;
        ig_st_gemv_tc<DL_HID, 0, true, DL_BQKV>(&st, dl_smem, DL_QKV_ROWS, DL_QKV_N, p * 41, resid, w->g1, DL_EPS1,
                                                w->bqkv, qkv, &it, l ? bar : (unsigned long long *)0);
        ig_st_grid_sync(&st, bar, G);
        for (unsigned i = blockIdx.x; i < DL_KV * ns; i += G)
            IG_CAT(DL_ATTN, _rope_item)(1, i % DL_KV, 0, i / DL_KV, ns, qkv, inv_freq, w->qn, w->kn, q_out, kv,
                                        (unsigned long long)l * DL_KV_LAYER_BYTES, positions, token_seq, page_table,
                                        max_pages, attn_ws, attn_cnt, att, at_sm);
        ig_st_gemv_tc<DL_HD, 1, false, DL_BO>(&st, dl_smem, DL_HID, DL_HID, (p + 1) * 41, att, 0, 0.0f, w->bo, resid, &it,
                                              bar);
        ig_st_gemv_tc<DL_HID, 2, true, DL_BGU>(&st, dl_smem, DL_GU_ROWS, DOWN_K, (p + 2) * 41, resid, w->g2, DL_EPS2,
                                               w->bgu, h, &it, bar);
        ig_st_gemv_tc<DOWN_K, 1, false, DL_BDOWN>(&st, dl_smem, DL_HID, DL_HID, (p + 3) * 41, h, 0, 0.0f, w->bdown, resid,
                                                  &it, bar);
    }
#endif
}

#undef DL_NAME
#undef DL_LAYERS
#undef DL_HID
#undef DL_QKV_ROWS
#undef DL_QKV_N
#undef DL_HD
#undef DL_GU_ROWS
#undef DL_EPS1
#undef DL_EPS2
#undef DL_BQKV
#undef DL_BO
#undef DL_BGU
#undef DL_BDOWN
#undef DL_ATTN
#undef DL_KV
#undef DL_SPLIT
#undef DL_KV_LAYER_BYTES
