/* decode_layers.cu — template: the whole layer stack of a one-token decode step as one persistent
 * kernel (sm_90), built on stream.cuh. Per layer, with a grid barrier before each phase:
 *   qkv = rmsnorm(resid; g1) . Wqkv^T (+ bqkv)            tensor-core GEMV phase
 *   attention of the token (q/k norm, RoPE, k/v into the paged pool, split over the context in
 *     one split per keys_per_split keys, up to DL_SPLIT, the last split merging),
 *     attention.cu's decode item as a device function (AT_DEVFN): one item per query head and
 *     split when head_items is set and they fit the grid at once, else one per kv head (its GQA
 *     group) and split
 *   resid += att . Wo^T (+ bo)
 *   h = silu(gate) * up of rmsnorm(resid; g2) . Wgu^T (+ bgu)
 *   resid += h . Wdown^T (+ bdown)
 * while the producer thread streams every layer's weights, in that order, through the ring.
 * With DL_MOE every layer's MLP is a mixture of experts instead (stream_moe.cuh): a route phase
 * (RMSNorm, the f32 router's logits over the CTAs into moe_lg, a grid barrier, each CTA's top-k),
 * then gate/up over the selected experts' rows only (DL_MOE_K x 2 DL_MOE_I rows, SwiGLU into h
 * [DL_MOE_K][DL_MOE_I]) and down over their concatenated rows (K = DL_MOE_K x DL_MOE_I, each
 * expert's sums times its routing weight) added to the residual; L[l].wgu / wdown are then the
 * stacked experts [DL_MOE_E][2 DL_MOE_I][DL_HID] / [DL_MOE_E][DL_HID][DL_MOE_I] and L[l].router the
 * f32 router [DL_MOE_E][DL_HID]; DL_MOE_NORM: the top-k weights renormalized (moe.cu's MO_NORM);
 * DL_MOE_IS (0: none): a shared expert of that many rows (L[l].sgate f32 [DL_HID], sgu, sdn), one
 * more segment of both phases weighted by sigmoid(x . sgate).
 * With emb set, layer 0 reads the token's embedding row (and CTA 0 stores it as the residual);
 * with w_head set, a last phase computes logits = rmsnorm(resid; g_head) . Whead^T and each CTA's
 * best key (ig_amax_key) over its logits into amax[blockIdx.x], for sample.cu's greedy pass.
 * With pick set and n_steps > 1, the kernel runs up to n_steps greedy steps of one sequence: each
 * step's token is the previous step's pick (a grid barrier between steps; the producer streams on
 * across them, so the ring is full when a step starts), at the next position, in the same KV page
 * (the host guarantees it); see the arguments below.
 *
 * Instantiate with DL_NAME, DL_LAYERS, DL_HID, DL_QKV_ROWS / DL_QKV_N (packed rows / outputs),
 * DL_HD (heads x head_dim, o's K), DL_GU_ROWS (packed gate/up rows; outputs DL_GU_ROWS / 2 = down's
 * K), DL_EPS1, DL_EPS2, DL_BQKV, DL_BO, DL_BGU, DL_BDOWN (0/1: bias present), DL_ATTN (an
 * attention.cu instance with AT_DEVFN 1), DL_KV, DL_D (head_dim), DL_SPLIT, DL_KV_LAYER_BYTES, DL_VOCAB,
 * DL_EPS_HEAD, DL_WQ / DL_WG (the layers' matrices: 0 bf16, or quantized rows of wq.cuh, 8 q8r /
 * 4 q4r with groups of DL_WG; the pointers in L are then those rows' bytes), DL_HWQ / DL_HWG (the
 * lm_head's), DL_MOE (0, or 1 with DL_MOE_E / DL_MOE_K / DL_MOE_I / DL_MOE_NORM / DL_MOE_IS), and IG_ST_NSLOT
 * before the first include of stream.cuh. Defines
 *   extern "C" __global__ void DL_NAME(const ig_dl_layer *L, float *resid, float *qkv,
 *       ig_bf16 *att, ig_bf16 *h, const double *inv_freq, unsigned char *kv, const int *positions,
 *       const int *token_seq, const int *page_table, int max_pages, float *attn_ws,
 *       unsigned *attn_cnt, unsigned long long *bar, int keys_per_split, const ig_bf16 *emb,
 *       const int *ids, const ig_bf16 *w_head, const float *g_head, float *logits,
 *       unsigned long long *amax, int *pick, int *next_ids, int *next_pos, int n_steps, int *tokens,
 *       const volatile int *cancel, int *go, int head_items, float *moe_lg);
 * L[DL_LAYERS]: device pointers of each layer's bf16 weights and f32 norms / biases (null where
 * absent). moe_lg f32 [DL_MOE_E]: the router's logits (DL_MOE; else unused). resid f32 [DL_HID]
 * in and out; qkv f32 [DL_QKV_N], att bf16 [DL_HD], h bf16 [DL_GU_ROWS / 2] (MoE: [DL_MOE_K
 * DL_MOE_I + DL_MOE_IS]) are scratch; attn_ws / attn_cnt as attention.cu's split kernels (counters
 * zero between launches); bar: 8 bytes, zero before the first launch, only this kernel uses it;
 * keys_per_split >= 1 (the host's default 256: ~1-2 us of K/V per CTA; small values in tests make
 * short contexts take the multi-split merge). head_items (0/1): spread a GQA group's query heads
 * over CTAs (each item reads the group's K/V, from L2, for one head: a quarter of the arithmetic
 * and shuffles of a 4-head item on the otherwise idle CTAs; attn_cnt then needs a counter per
 * query head). emb: the bf16 embedding table [vocab][DL_HID] and
 * ids[0] the token, or null (resid holds the input); w_head: the bf16 lm_head [DL_VOCAB][DL_HID]
 * and g_head its norm, or null (no logits); logits f32 [DL_VOCAB]; amax [grid]; pick: where the last
 * CTA writes the greedy token (the reduction of amax), or null (sample.cu picks). next_ids /
 * next_pos (with pick, or null): the same CTA also writes the next step's input there, the picked
 * token (0 when the pick is -1) and positions[0] + 1, so a following launch can run that step
 * without a batch upload (the host's chained greedy steps). bar[16] counts the CTAs done with the
 * lm_head (back to zero after each step). n_steps >= 1; with more than one (pick and next_* set):
 * tokens[s] (host-mapped memory) receives step s's token as soon as it is picked; cancel (device
 * memory: the host sets it with a copy on another stream) read as nonzero by step s's pick stops the
 * run after step s + 1 at the latest; go [n_steps], zero before the launch, is where step s's pick
 * publishes whether step s + 2 runs (1) or not (2), so the producer, which runs a step ahead, and
 * every CTA agree on the number of steps. (One reader of cancel per step: 132 CTAs each reading a
 * host-mapped flag made every step ~0.1 ms slower on the H200, the PCIe reads queueing.)
 * launch: cooperative, grid = the number of SMs (one CTA each, all resident, the same count every
 * launch), block IG_ST_THREADS, dynamic smem IG_ST_NSLOT * IG_ST_SLOT + IG_AT_SMEM(H, KV, D).
 * The host checks before using it: one CTA per SM fits, a residual-add phase gives a CTA at most
 * IG_ST_CTHREADS rows, and the grid is at most 1024 CTAs (the host's amax buffer).
 * Before sm_90 the kernel body is empty (the host never launches it there).
 */
#ifndef DL_NAME /* standalone (nvcc -c, tests/gpu/build_and_run.sh): a small default model and its attention */
#define DL_NAME ig_decode_layers
#define DL_LAYERS 2
#define DL_HID 256
#define DL_D 64
#define DL_KV 2
#define DL_HD 256     /* 4 heads x 64 */
#define DL_QKV_N 512  /* (4 + 2 x 2) x 64 */
#define DL_QKV_ROWS 512
#define DL_GU_ROWS 1024
#define DL_EPS1 1e-5f
#define DL_EPS2 1e-5f
#define DL_EPS_HEAD 1e-5f
#define DL_BQKV 0
#define DL_BO 0
#define DL_BGU 0
#define DL_BDOWN 0
#define DL_SPLIT 16
#define DL_KV_LAYER_BYTES (2ull * 2 * 16 * 64 * 2)
#define DL_VOCAB 1000
#define AT_NAME ig_dl_attention
#define AT_H 4
#define AT_KV 2
#define AT_D 64
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_DEVFN 1
#include "attention.cu"
#define DL_ATTN ig_dl_attention
#endif
#ifndef IG_ST_NSLOT
#define IG_ST_NSLOT 12
#endif
#include "stream.cuh"
#ifndef DL_MOE
#define DL_MOE 0
#endif
#if DL_MOE
#include "stream_moe.cuh"
#ifndef DL_MOE_IS
#define DL_MOE_IS 0
#endif
#endif
#ifndef DL_WQ
#define DL_WQ 0
#endif
#ifndef DL_WG
#define DL_WG 32
#endif
#ifndef DL_HWQ
#define DL_HWQ 0
#endif
#ifndef DL_HWG
#define DL_HWG 32
#endif

#ifndef IG_DL_LAYER_T
#define IG_DL_LAYER_T
struct ig_dl_layer {
    const ig_bf16 *wqkv, *wo, *wgu, *wdown;
    const float *g1, *g2, *bqkv, *bo, *bgu, *bdown, *qn, *kn;
    const float *router; /* DL_MOE: the f32 router; wgu / wdown are the stacked experts */
    const float *sgate;  /* ... and a shared expert's gate, gate/up and down (DL_MOE_IS) */
    const ig_bf16 *sgu, *sdn;
};
#endif

extern "C" __global__ void __launch_bounds__(IG_ST_THREADS, 1)
DL_NAME(const ig_dl_layer *L, float *resid, float *qkv, ig_bf16 *att, ig_bf16 *h, const double *inv_freq,
        unsigned char *kv, const int *positions, const int *token_seq, const int *page_table, int max_pages,
        float *attn_ws, unsigned *attn_cnt, unsigned long long *bar, int keys_per_split, const ig_bf16 *emb,
        const int *ids, const ig_bf16 *w_head, const float *g_head, float *logits, unsigned long long *amax,
        int *pick, int *next_ids, int *next_pos, int n_steps, int *tokens, const volatile int *cancel, int *go,
        int head_items, float *moe_lg) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    static_assert(IG_ST_CWARPS == IG_AT_WARPS, "attention items run on the consumer warps");
    constexpr int NH = DL_HD / DL_D, GQ = NH / DL_KV; /* query heads, per kv head */
#if DL_MOE
    static_assert(DL_WQ == 0, "MoE layers stream bf16 rows");
    constexpr int MOE_H = DL_MOE_K * DL_MOE_I + DL_MOE_IS; /* h: the experts' activations, down's K */
#else
    constexpr int DOWN_K = DL_GU_ROWS / 2;
    (void)moe_lg;
#endif
    extern __shared__ __align__(128) unsigned char dl_smem[]; /* the ring, then attention's scratch */
    __shared__ ig_st st;
    ig_st_init(&st, bar, gridDim.x);
    unsigned it = 0;
    if (!(emb && w_head && pick && next_ids)) n_steps = 1; /* a run needs the whole step in here */
    /* the run's first position: read before any step's pick rewrites it (next_pos) */
    const int pos0 = __ldcg(positions);
    if (threadIdx.x >= IG_ST_CTHREADS) { /* the producer: every layer's weights in phase order, every step */
#if DL_MOE
        unsigned nsel = 0; /* MoE layers whose selection it has waited for */
#endif
        if (threadIdx.x == IG_ST_CTHREADS)
            for (int s = 0; s < n_steps; s++) {
                if (s >= 2) { /* published by step s - 2's pick, long before this point */
                    int g;
                    while ((g = *(volatile int *)(go + s)) == 0) {
                    }
                    if (g != 1) break;
                }
                for (int l = 0; l < DL_LAYERS; l++) {
                    const int p = 4 * l;
                    ig_st_produce<DL_HID, DL_WQ, DL_WG>(&st, dl_smem, L[l].wqkv, DL_QKV_ROWS, 1, p * 41, &it, L[l].g1,
                                                        DL_HID * 4);
#if DL_MOE /* this CTA's router rows into L2 before o's rows; the experts once they are chosen */
                    for (unsigned e = blockIdx.x; e < DL_MOE_E; e += gridDim.x)
                        ig_st_prefetch(L[l].router + (size_t)e * DL_HID, DL_HID * 4);
                    ig_st_produce<DL_HD, DL_WQ, DL_WG>(&st, dl_smem, L[l].wo, DL_HID, 1, (p + 1) * 41, &it);
                    ig_st_produce_moe<DL_HID, DL_MOE_K, DL_MOE_I, DL_MOE_IS>(&st, dl_smem, L[l].wgu, L[l].wdown, L[l].sgu,
                                                                             L[l].sdn, (p + 2) * 41, (p + 3) * 41, &it, &nsel,
                                                                             L[l].g2, DL_HID * 4);
#else
                    ig_st_produce<DL_HD, DL_WQ, DL_WG>(&st, dl_smem, L[l].wo, DL_HID, 1, (p + 1) * 41, &it);
                    ig_st_produce<DL_HID, DL_WQ, DL_WG>(&st, dl_smem, L[l].wgu, DL_GU_ROWS, 32, (p + 2) * 41, &it, L[l].g2,
                                                        DL_HID * 4);
                    ig_st_produce<DOWN_K, DL_WQ, DL_WG>(&st, dl_smem, L[l].wdown, DL_HID, 1, (p + 3) * 41, &it);
#endif
                }
                if (w_head)
                    ig_st_produce<DL_HID, DL_HWQ, DL_HWG>(&st, dl_smem, w_head, DL_VOCAB, 1, 4 * DL_LAYERS * 41, &it,
                                                          g_head, DL_HID * 4);
            }
        return;
    }
    const unsigned G = gridDim.x;
    __shared__ int dl_tok, dl_pos; /* this step's token and position */
    for (int s = 0;;) {
        if (threadIdx.x == 0) /* ids: uploaded, or the previous step's pick */
            dl_tok = ids ? __ldcg(ids) : 0, dl_pos = pos0 + s;
        ig_st_cbar();
        /* attention splits: one per keys_per_split keys of context, at most DL_SPLIT and at most one
         * round of items over the grid (a single split writes its output without the merge's extra
         * round trips) */
        const int n_keys = dl_pos + 1;
        const int ns = max(1, min(min(DL_SPLIT, (int)G / DL_KV), (n_keys + keys_per_split - 1) / keys_per_split));
        const bool one_head = GQ > 1 && head_items && NH * ns <= (int)G; /* one query head per item */
        const int n_items = (one_head ? NH : DL_KV) * ns;
        float *at_sm = (float *)(dl_smem + (size_t)IG_ST_NSLOT * IG_ST_SLOT);
        /* the CTAs with attention items: the token's rope table, once for all layers */
        __shared__ float rope_cs[DL_D]; /* cos [DL_D / 2], then sin */
        const bool att_cta = blockIdx.x < (unsigned)n_items;
        if (att_cta) {
            ig_rope_angles<DL_D / 2>(n_keys - 1, inv_freq, rope_cs, rope_cs + DL_D / 2, IG_ST_CTHREADS);
            ig_st_cbar();
        }
        for (int l = 0; l < DL_LAYERS; l++) {
            /* the layer's past keys and values into L2 while its qkv phase runs */
            if (att_cta && threadIdx.x < 32)
                for (unsigned i = blockIdx.x; i < DL_KV * ns; i += G)
                    IG_CAT(DL_ATTN, _prefetch_item)(0, i % DL_KV, i / DL_KV, ns, kv,
                                                    (unsigned long long)l * DL_KV_LAYER_BYTES, &dl_pos, token_seq,
                                                    page_table, max_pages);
            const int p = 4 * l;
            const ig_dl_layer *w = L + l;
            if (l == 0 && emb) /* the token's embedding row is the residual stream */
                ig_st_gemv_tc<DL_HID, 0, true, DL_BQKV, true, false, DL_WQ, DL_WG>(&st, dl_smem, DL_QKV_ROWS, DL_QKV_N, 0,
                                                              emb + (size_t)dl_tok * DL_HID, w->g1, DL_EPS1, w->bqkv,
                                                              qkv, &it, (unsigned long long *)0, resid);
            else
                ig_st_gemv_tc<DL_HID, 0, true, DL_BQKV, false, false, DL_WQ, DL_WG>(&st, dl_smem, DL_QKV_ROWS, DL_QKV_N, p * 41, resid, w->g1,
                                                        DL_EPS1, w->bqkv, qkv, &it,
                                                        l ? bar : (unsigned long long *)0);
            ig_st_grid_sync(&st, bar, G);
            for (unsigned i = blockIdx.x; i < (unsigned)n_items; i += G) {
                const unsigned long long lo = (unsigned long long)l * DL_KV_LAYER_BYTES;
                if (one_head) /* item i: split i / NH, query head i % NH */
                    IG_CAT(DL_ATTN, _rope_item)<1>(1, i % NH / GQ, i % GQ, 0, i / NH, ns, qkv, inv_freq, rope_cs, w->qn,
                                                   w->kn, kv, lo, &dl_pos, token_seq, page_table, max_pages, attn_ws,
                                                   attn_cnt, att, at_sm);
                else /* item i: split i / DL_KV, kv head i % DL_KV */
                    IG_CAT(DL_ATTN, _rope_item)(1, i % DL_KV, 0, 0, i / DL_KV, ns, qkv, inv_freq, rope_cs, w->qn, w->kn,
                                                kv, lo, &dl_pos, token_seq, page_table, max_pages, attn_ws, attn_cnt,
                                                att, at_sm);
            }
            ig_st_gemv_tc<DL_HD, 1, false, DL_BO, false, false, DL_WQ, DL_WG>(&st, dl_smem, DL_HID, DL_HID, (p + 1) * 41, att, 0, 0.0f, w->bo,
                                                  resid, &it, bar);
#if DL_MOE /* route (its two grid barriers order the residual for gate/up), the experts' gate/up, down */
            ig_st_route<DL_HID, DL_MOE_E, DL_MOE_K, DL_MOE_NORM != 0>(&st, resid, w->g2, DL_EPS2, w->router, moe_lg,
                                                                      DL_MOE_IS ? w->sgate : (const float *)0, bar);
            ig_st_gemv_tc<DL_HID, 2, true, false>(&st, dl_smem, 2 * MOE_H, MOE_H, (p + 2) * 41, resid, w->g2, DL_EPS2, 0, h,
                                                  &it, (unsigned long long *)0);
            ig_st_gemv_tc<MOE_H, 1, false, false, false, false, 0, 32, DL_MOE_I, DL_MOE_K>(
                &st, dl_smem, DL_HID, DL_HID, (p + 3) * 41, h, 0, 0.0f, 0, resid, &it, bar, 0, 0, st.mwt);
#else
            ig_st_gemv_tc<DL_HID, 2, true, DL_BGU, false, false, DL_WQ, DL_WG>(&st, dl_smem, DL_GU_ROWS, DOWN_K, (p + 2) * 41, resid, w->g2,
                                                   DL_EPS2, w->bgu, h, &it, bar);
            ig_st_gemv_tc<DOWN_K, 1, false, DL_BDOWN, false, false, DL_WQ, DL_WG>(&st, dl_smem, DL_HID, DL_HID, (p + 3) * 41, h, 0, 0.0f, w->bdown,
                                                      resid, &it, bar);
#endif
        }
        if (w_head) /* the final norm and the lm_head, with each CTA's greedy pick */
            ig_st_gemv_tc<DL_HID, 0, true, false, false, true, DL_HWQ, DL_HWG>(&st, dl_smem, DL_VOCAB, DL_VOCAB, 4 * DL_LAYERS * 41,
                                                               resid, g_head, DL_EPS_HEAD, 0, logits, &it, bar, 0, amax);
        if (w_head && pick) {
            /* the last CTA done picks the token from every CTA's key (sample.cu's greedy rule: the lowest
             * id of the largest logit, -1 when the row holds NaN or +inf or only -inf) */
            __shared__ unsigned dl_last;
            __shared__ unsigned long long dl_key[IG_ST_CWARPS];
            unsigned long long *cnt = bar + 16;
            /* thread 0 wrote this CTA's key: its acq_rel arrival publishes it, and the last CTA's
             * threads see every key past the barrier (common.cuh's ig_atom_add_acq_rel_gpu) */
            if (threadIdx.x == 0) dl_last = ig_atom_add_acq_rel_gpu(cnt, 1ull) == G - 1;
            ig_st_cbar();
            if (dl_last) {
                unsigned long long key = 0ull;
                for (unsigned i = threadIdx.x; i < G; i += IG_ST_CTHREADS) key = max(key, __ldcg(amax + i));
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) key = max(key, __shfl_xor_sync(IG_FULL_MASK, key, o));
                if ((threadIdx.x & 31) == 0) dl_key[threadIdx.x >> 5] = key;
                ig_st_cbar();
                if (threadIdx.x == 0) {
                    for (int w = 1; w < IG_ST_CWARPS; w++) key = max(key, dl_key[w]);
                    const bool bad = (unsigned)(key >> 32) >= IG_AMAX_BAD || ig_amax_value(key) == IG_NEG_INF;
                    *pick = bad ? -1 : ig_amax_index(key);
                    if (next_ids) { /* every CTA is past its reads of ids / positions */
                        next_ids[0] = bad ? 0 : ig_amax_index(key);
                        next_pos[0] = dl_pos + 1;
                    }
                    if (tokens) { /* to the host, now */
                        *(volatile int *)(tokens + s) = bad ? -1 : ig_amax_index(key);
                        __threadfence_system();
                    }
                    if (go && s + 2 < n_steps) go[s + 2] = cancel && *cancel ? 2 : 1;
                    *cnt = 0ull; /* for the next step or launch */
                }
            }
        }
        /* the next step, if the run has one: every CTA reads the same decision (go[s + 1] was
         * published by step s - 1's pick, before the barrier that started step s) */
        if (++s >= n_steps || (s >= 2 && __ldcg(go + s) != 1)) break;
        ig_st_grid_sync(&st, bar, G); /* this step's pick (the next token) is out */
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
#undef DL_D
#undef DL_SPLIT
#undef DL_KV_LAYER_BYTES
#undef DL_VOCAB
#undef DL_EPS_HEAD
#undef DL_WQ
#undef DL_WG
#undef DL_HWQ
#undef DL_HWG
#undef DL_MOE
#undef DL_MOE_E
#undef DL_MOE_K
#undef DL_MOE_I
#undef DL_MOE_NORM
#undef DL_MOE_IS
