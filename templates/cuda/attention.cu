/* attention.cu — template: causal attention of a mixed batch (prefill chunks + decode tokens of
 * many sequences) over the paged KV pool, with a split-over-context variant for decode.
 *
 * Instantiate with AT_NAME, AT_H, AT_KV, AT_D, AT_PS, AT_PAGE_BYTES, AT_KVBF16, AT_OBF16, AT_SCALE,
 * AT_MAXCTX (accepted, unused), AT_SPLIT, AT_WINDOW (0: causal over the whole context; w > 0: a
 * token at position p attends keys (p - w, p] only, Mistral / Gemma 3 sliding windows, as
 * templates/cpu/attention.c: keys before the window are never read, their pages may be gone),
 * and for the fused decode kernel AT_QKNORM, AT_EPS, AT_ROT, AT_INTERLEAVE (rope_kv.cu's
 * RK_QKNORM, RK_EPS, RK_ROT, RK_INTERLEAVE); defines two kernels:
 *   extern "C" __global__ void AT_NAME(int T, const float *q, const unsigned char *kv_pool,
 *       unsigned long long layer_off, const int *positions, const int *token_seq,
 *       const int *page_table, int max_pages, AT *out);
 *   extern "C" __global__ void AT_NAME_split(<same arguments but> float *ws, unsigned *counters,
 *       AT *out);
 * q f32 [T][H * D] (roped, from rope_kv); out [T][H * D] of AT (AT_OBF16); token t of sequence
 * token_seq[t] at position p attends keys lo..p of its sequence, lo = 0 or with a window
 * max(0, p - AT_WINDOW + 1) (pool layout: SPEC.md / rope_kv.cu);
 * head h uses kv head h / (H / KV); out = softmax(q·kᵀ · AT_SCALE) · V, f32 online softmax.
 * launch (launch.h):
 *   direct: AT_NAME        grid (KV, T, 1),        block IG_AT_BLOCK = 256, smem IG_AT_SMEM(H, KV, D)
 *   split:  AT_NAME_split  grid (KV, T, AT_SPLIT), block 256, smem IG_AT_SMEM(H, KV, D);
 *           ws f32 [T][H][AT_SPLIT][D + 2] = IG_AT_WS_FLOATS(T, H, D, AT_SPLIT) floats of partial
 *           results, counters [T][KV] (IG_AT_COUNTERS(T, KV)) zero before the first launch; the
 *           last split CTA of each (token, kv head) merges the partials into out and re-zeroes
 *           its counter, so no second kernel is needed.
 * (IG_AT_SMEM is 33 KB for G = 8, D = 128; above 48 KB the host sets the max-dynamic-smem attribute.)
 * The direct kernel suits prefill and large decode batches (T * KV CTAs); the split pair suits a
 * few decode tokens with long contexts (a single sequence with 8 KV heads still gets 8 * AT_SPLIT
 * CTAs). A token with n = p + 1 keys takes S = min(AT_SPLIT, ceil(n / AT_SPLIT_KEYS)) splits (the
 * grid's other split CTAs return at once: a short context is not cut into slivers that each pay
 * the rope, a round trip and the merge), split s handling keys [s*c, min(n, (s+1)*c)), c = ceil(n/S).
 *
 * Inside a CTA (one token, one kv head, a key range): the G query heads of the GQA group share
 * every K/V load. A key row is read by TPK lanes with 16-byte loads (TPK = D/8 for bf16 KV, D/4
 * for f32, rounded up to a power of two and capped at 32), so a warp handles 32/TPK keys per step
 * and 8 warps interleave over the range, 4 steps unrolled (K and V of 4 keys in flight per lane; 8 for
 * items of at most 2 heads).
 * Each lane group keeps its own online-softmax state (m, l, acc in the log2 domain: q is
 * pre-scaled by AT_SCALE*log2(e), so exp2 (common.cuh's ig_exp2) is the only exponential); states are merged across the
 * lane groups of a warp with shuffles, then across warps through shared memory.
 * Not yet: a tensor-core (mma.sync) prefill path that shares K/V tiles across query tokens; prefill
 * here re-reads the context per token (from L2).
 */
#include "rope.cuh"
#include "kv_quant.cuh"
#include "attn_decode.cuh"
#include "attn_decode_tc.cuh"

#ifndef AT_NAME
#define AT_NAME ig_attention
#endif
#ifndef AT_H
#define AT_H 32
#endif
#ifndef AT_KV
#define AT_KV 8
#endif
#ifndef AT_D
#define AT_D 64
#endif
#ifndef AT_PS
#define AT_PS 16
#endif
#ifndef AT_KVBF16
#define AT_KVBF16 0
#endif
#ifndef AT_OBF16
#define AT_OBF16 0
#endif
#ifndef AT_KVQ /* 0: KV rows as floats (AT_KVBF16); 8 or 4: quantized rows (kv_quant.cuh) */
#define AT_KVQ 0
#endif
#ifndef AT_PAGE_BYTES /* default: one layer per page */
#define AT_PAGE_BYTES (AT_KVQ ? IG_KVQ_LAYER_BYTES(AT_KV, AT_PS, AT_D, AT_KVQ) : 2ull * AT_KV * AT_PS * AT_D * (AT_KVBF16 ? 2 : 4))
#endif
#ifndef AT_SCALE
#define AT_SCALE 0.125f
#endif
#ifndef AT_MAXCTX
#define AT_MAXCTX 4096
#endif
#ifndef AT_SPLIT
#define AT_SPLIT 16
#endif
#ifndef AT_SPLIT_KEYS /* keys per split at least (codegen: 64) */
#define AT_SPLIT_KEYS 1
#endif
#ifndef AT_QKNORM /* the fused decode kernel's q/k RMSNorm (as rope_kv.cu's RK_QKNORM) */
#define AT_QKNORM 0
#endif
#ifndef AT_EPS
#define AT_EPS 1e-6f
#endif
#ifndef AT_WINDOW /* sliding window (keys a token attends, itself included), 0 = none */
#define AT_WINDOW 0
#endif
#ifndef AT_ROT /* the fused decode kernel's rotary dims and pair layout (rope.cuh) */
#define AT_ROT AT_D
#endif
#ifndef AT_INTERLEAVE
#define AT_INTERLEAVE 0
#endif
#ifndef AT_PIPE /* 1: decode tiles' loads one tile ahead (attn_decode.cuh: ~170 registers; the persistent
                  kernel's 168 would spill), 0: a tile loaded then computed */
#define AT_PIPE 0
#endif
#ifndef AT_TC /* 1: decode attention on tensor cores (attn_decode_tc.cuh) where the shape allows and the arch has
                mma.sync (sm_80+); 0: attn_decode.cuh's CUDA-core loop everywhere */
#define AT_TC 1
#endif
#ifndef AT_L2PF /* 1: each decode tile's loads followed by L2 prefetches of the warp's next tile */
#define AT_L2PF 0 /* H200, H32 KV8 D128 bf16 per token: 8k 30.64 us with, 28.54 without; 128k 215.6 / 200.1 */
#endif
/* CTAs an SM the kernels are built for: two (at most 128 registers a thread), but one for groups of
 * more than 4 heads (their accumulators) and with AT_PIPE */
#define AT_MINB_ ((AT_PIPE || AT_H / AT_KV > 4) ? 1 : 2)
#ifndef AT_DEVFN /* 1: only the device functions, for the persistent decode kernel (decode_layers.cu) */
#define AT_DEVFN 0
#endif
#if AT_DEVFN /* the CTA's IG_AT_BLOCK consumer threads meet at named barrier 1 (stream.cuh's) */
#define AT_SYNC_() asm volatile("bar.sync 1, %0;" ::"n"(IG_AT_BLOCK) : "memory")
#else
#define AT_SYNC_() __syncthreads()
#endif

#define AT_QS_ ((float)(AT_SCALE) * 1.4426950408889634f) /* the scores' factor: softmax scale x log2 e */

#if AT_OBF16
#define AT_OT_ unsigned short
#else
#define AT_OT_ float
#endif

#ifndef IG_ATTN_HELPERS
#define IG_ATTN_HELPERS
IG_DEV void ig_at_store(void *out, size_t i, float v, bool bf) {
    if (bf) ((unsigned short *)out)[i] = ig_f32_to_h(v);
    else ((float *)out)[i] = v;
}
IG_DEV constexpr int ig_at_pow2ceil(int x) { return x <= 1 ? 1 : 2 * ig_at_pow2ceil((x + 1) / 2); }
#endif

#if IG_ADT_ARCH && AT_TC
/* The tensor-core loop's query fragments (attn_decode_tc.cuh), one array for every _core instance
 * of a kernel (the persistent kernel's group and one-head items share it). */
__shared__ uint4 IG_CAT(AT_NAME, _qf)[AT_D / 16 * 32];
#endif

/* The CUDA-core loop (attn_decode.cuh) of _core below for G heads whose queries qs [G][D] are in
 * shared memory: each warp's state into sm, as _core says. */
template <bool COH, int G>
static __device__ __forceinline__ void IG_CAT(AT_NAME, _core_cc)(int kh, int k0, int k1, const float *qs,
                                                                  const unsigned char *kv_pool, unsigned long long layer_off,
                                                                  const int *pt, float *sm) {
    constexpr int D = AT_D, BITS = AT_KVQ ? AT_KVQ : AT_KVBF16 ? 16 : 32, NW = IG_AT_WARPS;
    typedef ig_ad_geom<D, BITS> A;
    constexpr int E = A::E, VE = A::VE, TPK = A::TPK, NV = A::NV, DV = A::DV;
    constexpr int PWN = ig_ad_pw<D, BITS, G>();
    constexpr bool PW_IN_SM = PWN <= G * (D + 2); /* else a scratch of its own */
    __shared__ float pwb[PW_IN_SM ? 1 : NW * PWN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float acc[G][E], m[G], l[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int e = 0; e < E; e++) acc[g][e] = 0.0f;
        m[g] = IG_NEG_INF, l[g] = 0.0f;
    }
    ig_ad_attend<AT_KV, AT_PS, D, BITS, G, NW, COH, AT_PAGE_BYTES, AT_PIPE, AT_L2PF>(kh, k0, k1, warp, qs, AT_QS_,
                                                                  (PW_IN_SM ? sm : pwb) + warp * PWN, acc, m, l,
                                                                  kv_pool, layer_off, pt);
    /* the key groups' accumulators and the lanes' sums; m is the same in every lane */
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int o = TPK; o < 32; o <<= 1)
#pragma unroll
            for (int e = 0; e < E; e++) acc[g][e] += __shfl_xor_sync(IG_FULL_MASK, acc[g][e], o);
        l[g] = ig_warp_sum(l[g]);
    }
    if (PW_IN_SM) AT_SYNC_(); /* every warp is done with its scratch */
    if (lane < TPK) {
#pragma unroll
        for (int g = 0; g < G; g++) {
            float *w = sm + (size_t)(warp * G + g) * (D + 2);
#pragma unroll
            for (int jv = 0; jv < NV; jv++) {
                const int v = lane + TPK * jv;
                if (v < DV)
#pragma unroll
                    for (int e = 0; e < VE; e++) w[v * VE + e] = acc[g][jv * VE + e];
            }
            if (lane == 0) w[D] = m[g], w[D + 1] = l[g];
        }
    }
}

/* Attention of kv head kh over keys [k0, k1) for GS query heads of its group (their queries
 * qg [GS][D], roped (and rotated for quantized KV), in global or shared memory; pt: the token's
 * page-table row): all G = AT_H / AT_KV of them, or fewer when the group's heads are spread over
 * several CTAs (the persistent decode kernel's one-head items). The tiles of attn_decode_tc.cuh
 * (tensor cores) or attn_decode.cuh (_core_cc) over the CTA's warps (warp w takes tiles w, w + NW,
 * ...), every K/V byte loaded once for the GS heads.
 * Leaves one online-softmax state per warp and head in shared memory, sm[warp][g][0..D+2) = acc
 * (unnormalized, relative to m), m (log2 domain), l; AT_NAME_merge combines them. The queries are
 * staged in shared memory first, unless QSH: qg is there already (16-byte aligned, visible to every
 * thread); the CUDA-core loop's probability scratch lies in sm where it fits. Ends with a barrier,
 * so every thread may read sm afterwards. */
template <bool COH, int G = AT_H / AT_KV, bool QSH = false> /* COH: coherent (L2) loads, the kernel itself wrote some keys */
static __device__ __forceinline__ void IG_CAT(AT_NAME, _core)(
    int kh, int k0, int k1, const float *qg, const unsigned char *kv_pool,
    unsigned long long layer_off, const int *pt, float *sm) {
    constexpr int D = AT_D, BITS = AT_KVQ ? AT_KVQ : AT_KVBF16 ? 16 : 32;
    constexpr bool TC = AT_TC && IG_ADT_ARCH && ig_adt_geom<D, BITS>::OK && G <= 8;
    __shared__ __align__(16) float qst[QSH ? 4 : G * D];
    const float *qs = QSH ? qg : qst;
    if (!QSH) {
        for (int i = threadIdx.x; i < G * D; i += IG_AT_BLOCK) qst[i] = qg[i];
        AT_SYNC_();
    }
#if IG_ADT_ARCH
    if constexpr (TC) { /* attn_decode_tc.cuh: the warps' states straight into sm */
        uint4 *qf = IG_CAT(AT_NAME, _qf);
        ig_adt_qfrag<D, BITS, G>(qs, qf, threadIdx.x, IG_AT_BLOCK);
        AT_SYNC_();
        ig_adt_attend<AT_KV, AT_PS, D, BITS, G, IG_AT_WARPS, COH, AT_PAGE_BYTES>(kh, k0, k1, threadIdx.x >> 5, qf, AT_QS_,
                                                                                 sm + (size_t)(threadIdx.x >> 5) * G * (D + 2),
                                                                                 kv_pool, layer_off, pt);
    } else
#endif
        IG_CAT(AT_NAME, _core_cc)<COH, G>(kh, k0, k1, qs, kv_pool, layer_off, pt, sm);
    AT_SYNC_();
}

/* Quantized KV: the output rows of query heads hb .. hb + GS - 1 of token t, staged (normalized,
 * still rotated) in uo[GS][D] in shared memory, rotated back (R^T, kv_quant.cuh) and stored, a
 * warp per head. Starts with a barrier (the staging is complete). */
template <int GS>
static __device__ __forceinline__ void IG_CAT(AT_NAME, _put_rows)(float *uo, int t, int hb, AT_OT_ *out) {
    constexpr int D = AT_D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    AT_SYNC_();
    for (int g = warp; g < GS; g += IG_AT_WARPS) {
        ig_kvq_unrotate_w<D>(uo + g * D);
        for (int d = lane; d < D; d += 32) ig_at_store(out, (size_t)t * AT_H * D + (size_t)(hb + g) * D + d, uo[g * D + d], AT_OBF16);
    }
}

/* Combination of the NW warp states for element (g, d) of _core<G>'s sm: the merged (O, M, L). */
template <int G = AT_H / AT_KV>
static __device__ __forceinline__ void IG_CAT(AT_NAME, _merge)(const float *sm, int g, int d, float *O,
                                                                float *M, float *L) {
    constexpr int D = AT_D;
    float mx = IG_NEG_INF;
#pragma unroll
    for (int w = 0; w < IG_AT_WARPS; w++) mx = fmaxf(mx, sm[(size_t)(w * G + g) * (D + 2) + D]);
    float o = 0.0f, s = 0.0f;
#pragma unroll
    for (int w = 0; w < IG_AT_WARPS; w++) {
        const float *st = sm + (size_t)(w * G + g) * (D + 2);
        const float f = ig_sm_factor(st[D], mx);
        o += st[d] * f, s += st[D + 1] * f;
    }
    *O = o, *M = mx, *L = s;
}

/* The first key a token at position pos attends (the sliding window's, or 0). */
static __device__ __forceinline__ int IG_CAT(AT_NAME, _lo)(int pos) {
    return AT_WINDOW > 0 && pos >= AT_WINDOW ? pos - AT_WINDOW + 1 : 0;
}

/* Split sp of ns of the keys [lo, n) of a token at position n - 1: keys [*k0, *k1). */
static __device__ __forceinline__ void IG_CAT(AT_NAME, _range)(int n, int sp, int ns, int *k0, int *k1) {
    const int lo = IG_CAT(AT_NAME, _lo)(n - 1), nk = n - lo, c = (nk + ns - 1) / ns;
    *k0 = lo + min(nk, sp * c), *k1 = min(n, *k0 + c);
}

#if !AT_DEVFN
extern "C" __global__ void __launch_bounds__(IG_AT_BLOCK, AT_KVQ ? 1 : AT_MINB_) /* many CTAs: one an SM will do */
AT_NAME(int T, const float *q, const unsigned char *kv_pool, unsigned long long layer_off,
        const int *positions, const int *token_seq, const int *page_table, int max_pages, AT_OT_ *out) {
    static_assert(AT_H % AT_KV == 0, "AT_H must be a multiple of AT_KV");
    static_assert(AT_D % 8 == 0, "AT_D must be a multiple of 8 (16-byte loads)");
    static_assert(!AT_KVQ || AT_PS % 8 == 0, "quantized KV: pages of a multiple of 8 slots (aligned code rows)");
    IG_DYN_SMEM(float, ig_dyn_smem);
    constexpr int G = AT_H / AT_KV, D = AT_D;
    const int kh = blockIdx.x, t = blockIdx.y;
    if (t >= T) return;
    const int *pt = page_table + (size_t)token_seq[t] * max_pages;
    IG_CAT(AT_NAME, _core)<false>(kh, IG_CAT(AT_NAME, _lo)(positions[t]), positions[t] + 1,
                                  q + ((size_t)t * AT_H + kh * G) * D, kv_pool, layer_off, pt, ig_dyn_smem);
#if AT_KVQ
    __shared__ float uo[G * D];
#endif
    for (int i = threadIdx.x; i < G * D; i += IG_AT_BLOCK) {
        const int g = i / D, d = i % D;
        float O, M, L;
        IG_CAT(AT_NAME, _merge)(ig_dyn_smem, g, d, &O, &M, &L);
#if AT_KVQ
        uo[i] = O / L;
#else
        ig_at_store(out, (size_t)t * AT_H * D + (size_t)(kh * G + g) * D + d, O / L, AT_OBF16);
#endif
    }
#if AT_KVQ
    IG_CAT(AT_NAME, _put_rows)<G>(uo, t, kh * G, out);
#endif
}
#endif

/* End of a split CTA (one of ns <= AT_SPLIT splits) of _core<G>, query heads hb .. hb + G - 1 of
 * token t: its partial results to ws; the last split of (t, hb) to finish merges all of them into
 * out. Partials are published with a fence before the count (counter t * AT_H / G + hb / G), and
 * the last CTA reads them from L2 (__ldcg) after it: every split's (M, L) at once, the factors in
 * sm, then each output element's ns partials at once (two round trips; a loop over the splits took
 * ~16, 4.5 us of a T=1 launch on the H200), and re-zeroes the counter for the next launch. A single
 * split (ns == 1) writes out directly. */
template <int G = AT_H / AT_KV>
static __device__ __forceinline__ void IG_CAT(AT_NAME, _split_tail)(int t, int hb, int sp, int ns, float *sm,
                                                                     float *ws, unsigned *counters, AT_OT_ *out) {
    constexpr int D = AT_D;
    __shared__ int s_last;
#if AT_KVQ
    __shared__ float uo[G * D];
#endif
    for (int i = threadIdx.x; i < G * D; i += IG_AT_BLOCK) {
        const int g = i / D, d = i % D;
        float O, M, L;
        IG_CAT(AT_NAME, _merge)<G>(sm, g, d, &O, &M, &L);
        if (ns == 1) {
#if AT_KVQ
            uo[i] = O / L;
#else
            ig_at_store(out, (size_t)t * AT_H * D + (size_t)(hb + g) * D + d, O / L, AT_OBF16);
#endif
            continue;
        }
        float *w = ws + (((size_t)t * AT_H + hb + g) * AT_SPLIT + sp) * (D + 2);
        w[d] = O;
        if (d == 0) w[D] = M, w[D + 1] = L;
    }
    if (ns == 1) {
#if AT_KVQ
        IG_CAT(AT_NAME, _put_rows)<G>(uo, t, hb, out);
#endif
        return;
    }
    /* the partials out to the last split's CTA: a barrier, one acq_rel arrival (common.cuh's
     * ig_atom_add_acq_rel_gpu), a barrier */
    AT_SYNC_();
    unsigned *cnt = counters + ((size_t)t * AT_H + hb) / G;
    if (threadIdx.x == 0) s_last = ig_atom_add_acq_rel_gpu(cnt, 1u) == (unsigned)ns - 1;
    AT_SYNC_();
    if (!s_last) return;
    /* each split's (M, L) once, into shared memory (sm's warp states are read: its first 2 G AT_SPLIT
     * floats); then every output element's ns loads at once */
    static_assert(IG_AT_WARPS * (D + 2) >= 2 * AT_SPLIT, "the merge's factors fit sm");
    float(*mf_)[AT_SPLIT] = (float(*)[AT_SPLIT])sm, (*lf_)[AT_SPLIT] = (float(*)[AT_SPLIT])(sm + G * AT_SPLIT);
    for (int i = threadIdx.x; i < G * ns; i += IG_AT_BLOCK) {
        const int g = i / ns, s = i % ns;
        const float *p = ws + (((size_t)t * AT_H + hb + g) * AT_SPLIT + s) * (D + 2) + D;
        mf_[g][s] = __ldcg(p), lf_[g][s] = __ldcg(p + 1);
    }
    AT_SYNC_();
    if ((int)threadIdx.x < G) { /* the factors exp2(M_s - max) and the merged sum, one thread a head */
        const int g = threadIdx.x;
        float mx = IG_NEG_INF, l = 0.0f;
        for (int s = 0; s < ns; s++) mx = fmaxf(mx, mf_[g][s]);
        for (int s = 0; s < ns; s++) {
            const float f = ig_sm_factor(mf_[g][s], mx);
            mf_[g][s] = f, l += lf_[g][s] * f;
        }
        lf_[g][0] = l;
    }
    AT_SYNC_();
#pragma unroll 1
    for (int i = threadIdx.x; i < G * D; i += IG_AT_BLOCK) {
        const int g = i / D, d = i % D;
        const float *w = ws + ((size_t)t * AT_H + hb + g) * AT_SPLIT * (D + 2) + d;
        float o = 0.0f;
        for (int s0 = 0; s0 < ns; s0 += 16)
#pragma unroll
            for (int s = s0; s < s0 + 16; s++)
                if (s < ns) o += __ldcg(w + (size_t)s * (D + 2)) * mf_[g][s];
        const float l = lf_[g][0];
#if AT_KVQ
        uo[i] = o / l;
#else
        ig_at_store(out, (size_t)t * AT_H * D + (size_t)(hb + g) * D + d, o / l, AT_OBF16);
#endif
    }
    if (threadIdx.x == 0) *cnt = 0u;
#if AT_KVQ
    IG_CAT(AT_NAME, _put_rows)<G>(uo, t, hb, out);
#endif
}

/* The split kernels' number of splits for a token with n keys (in its window). */
static __device__ __forceinline__ int IG_CAT(AT_NAME, _splits)(int n) {
    return max(1, min(min(AT_SPLIT, (int)gridDim.z), (n + AT_SPLIT_KEYS - 1) / AT_SPLIT_KEYS));
}

#if !AT_DEVFN
extern "C" __global__ void __launch_bounds__(IG_AT_BLOCK, AT_MINB_)
IG_CAT(AT_NAME, _split)(int T, const float *q, const unsigned char *kv_pool, unsigned long long layer_off,
                        const int *positions, const int *token_seq, const int *page_table, int max_pages,
                        float *ws, unsigned *counters, AT_OT_ *out) {
    IG_DYN_SMEM(float, ig_dyn_smem);
    const int kh = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
    if (t >= T) return;
    const int n = positions[t] + 1, ns = IG_CAT(AT_NAME, _splits)(n - IG_CAT(AT_NAME, _lo)(n - 1));
    if (sp >= ns) return;
    int k0, k1;
    IG_CAT(AT_NAME, _range)(n, sp, ns, &k0, &k1);
    const int *pt = page_table + (size_t)token_seq[t] * max_pages;
    IG_CAT(AT_NAME, _core)<false>(kh, k0, k1, q + ((size_t)t * AT_H + kh * AT_H / AT_KV) * AT_D, kv_pool, layer_off, pt,
                                  ig_dyn_smem);
    IG_CAT(AT_NAME, _split_tail)(t, kh * (AT_H / AT_KV), sp, ns, ig_dyn_smem, ws, counters, out);
}

/* Decode steps (every token of the step from a different sequence): rope_kv fused in front of
 * the split kernel. Each CTA applies RoPE (and the q/k norm) to its group's q heads itself (every
 * split of the group computes the same queries, into its shared memory); the split that holds the
 * token's own position also writes its k and v into the pool, then reads the pool coherently.
 *   extern "C" __global__ void AT_NAME_split_rope(int T, const float *qkv, const double *inv_freq,
 *       const float *q_norm, const float *k_norm, unsigned char *kv_pool, unsigned long long layer_off,
 *       const int *positions, const int *token_seq, const int *page_table, int max_pages,
 *       float *ws, unsigned *counters, AT *out);
 * qkv f32 [T][(H + 2 KV) D] (the qkv projection), q_norm / k_norm f32 [D] or null (AT_QKNORM);
 * launched like AT_NAME_split. */
#endif

/* One (kv head kh, query heads sub GS .. sub GS + GS - 1 of its group, token t, split sp of ns) of
 * the fused decode attention; the kernel below runs one per CTA (ns from _splits, GS = G: the whole
 * group, sub 0), the persistent decode kernel loops its CTAs over them. The roped queries stay in
 * shared memory. The split holding the token's position writes its key and value row into the
 * pool; with GS < G every item of that split writes the same row (the same bytes), so each reads
 * the row its own write made visible. rope_cs: the token's cos and sin table ([D / 2] each,
 * ig_rope_angles) when the caller has it, else null (computed here). */
template <int GS = AT_H / AT_KV>
static __device__ __forceinline__ void IG_CAT(AT_NAME, _rope_item)(
    int T, int kh, int sub, int t, int sp, int ns, const float *qkv, const double *inv_freq, const float *rope_cs,
    const float *q_norm, const float *k_norm, unsigned char *kv_pool, unsigned long long layer_off, const int *positions,
    const int *token_seq, const int *page_table, int max_pages, float *ws, unsigned *counters, AT_OT_ *out, float *sm) {
    constexpr int G = AT_H / AT_KV, D = AT_D, HD = D / 2, W = (AT_H + 2 * AT_KV) * D;
    static_assert(G % GS == 0, "an item's query heads divide the group");
    __shared__ float cs_[HD], sn_[HD];
    __shared__ __align__(16) float qs[GS * D];
    const int hb = kh * G + sub * GS; /* the item's first query head */
    const int warp = threadIdx.x >> 5;
    if (t >= T) return;
    const int pos = positions[t], n = pos + 1;
    int k0, k1;
    IG_CAT(AT_NAME, _range)(n, sp, ns, &k0, &k1);
    const int *pt = page_table + (size_t)token_seq[t] * max_pages;
    const float *cs = rope_cs, *sn = rope_cs + HD;
    if (!rope_cs) {
        ig_rope_angles<HD>(pos, inv_freq, cs_, sn_, IG_AT_BLOCK);
        AT_SYNC_();
        cs = cs_, sn = sn_;
    }
    const float *src = qkv + (size_t)t * W;
    for (int g = warp; g < GS; g += IG_AT_WARPS) {
        ig_rope_head<D, AT_KVBF16, AT_QKNORM, AT_ROT, AT_INTERLEAVE>(0, src + (size_t)(hb + g) * D, cs, sn, q_norm, AT_EPS, qs + (size_t)g * D,
                                              NULL, 0);
#if AT_KVQ
        ig_kvq_rotate_w<D>(qs + (size_t)g * D); /* keys are stored rotated (kv_quant.cuh) */
#endif
    }
#if AT_KVQ
    if (pos >= k0 && pos < k1 && warp >= IG_AT_WARPS - 2) { /* rope, rotate, quantize (as rope_kv.cu) */
        __shared__ float xr[2][D], kpr[D];
        unsigned char *base = kv_pool + (unsigned long long)__ldg(pt + pos / AT_PS) * AT_PAGE_BYTES + layer_off;
        const int w2 = warp - (IG_AT_WARPS - 2), slot = pos % AT_PS, r = kh * AT_PS + slot, lane = threadIdx.x & 31;
        float *x = xr[w2];
        if (w2 == 0)
            ig_rope_head<D, false, AT_QKNORM, AT_ROT, AT_INTERLEAVE>(0, src + (size_t)(AT_H + kh) * D, cs, sn, k_norm, AT_EPS, x,
                                                                     NULL, 0);
        else
            for (int i = lane; i < D; i += 32) x[i] = src[(size_t)(AT_H + AT_KV + kh) * D + i];
        ig_kvq_rotate_w<D>(x);
        if (w2 == 0 && IG_KVQ_KDELTA(AT_KVQ)) { /* against the previous key, with the best predictor */
            if (slot > 0) ig_kvq_key_before_w<AT_KV, AT_PS, D, AT_KVQ, true>(base, kh, slot, kpr);
            ig_kvq_store_key_w<AT_KV, AT_PS, D, AT_KVQ>(base, r, x, kpr, slot == 0);
        } else {
            ig_kvq_store_w<AT_KV, AT_PS, D, AT_KVQ>(base, w2, r, x);
        }
        __threadfence_block();
    }
#else
    if (pos >= k0 && pos < k1 && warp >= IG_AT_WARPS - 2) {
        unsigned char *base = kv_pool + (unsigned long long)__ldg(pt + pos / AT_PS) * AT_PAGE_BYTES + layer_off;
        const size_t row = ((size_t)kh * AT_PS + pos % AT_PS) * D;
        if (warp == IG_AT_WARPS - 2)
            ig_rope_head<D, AT_KVBF16, AT_QKNORM, AT_ROT, AT_INTERLEAVE>(1, src + (size_t)(AT_H + kh) * D, cs, sn, k_norm, AT_EPS, NULL, base, row);
        else
            ig_rope_head<D, AT_KVBF16, AT_QKNORM, AT_ROT, AT_INTERLEAVE>(2, src + (size_t)(AT_H + AT_KV + kh) * D, cs, sn, NULL, AT_EPS, NULL, base,
                                                  (size_t)AT_KV * AT_PS * D + row);
    }
#endif
    AT_SYNC_(); /* the queries and the new key / value row, written by this CTA, are visible to it */
    IG_CAT(AT_NAME, _core)<true, GS, true>(kh, k0, k1, qs, kv_pool, layer_off, pt, sm);
    IG_CAT(AT_NAME, _split_tail)<GS>(t, hb, sp, ns, sm, ws, counters, out);
}

#if AT_DEVFN && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* L2 prefetch of the K and V blocks (a page's AT_PS rows of kv head kh) that item (t, kh, sp of
 * ns) will read, by one warp: the persistent kernel issues it a phase ahead, so the item's key
 * loads are L2 hits instead of HBM round trips queued behind the weight stream. */
static __device__ __forceinline__ void IG_CAT(AT_NAME, _prefetch_item)(int t, int kh, int sp, int ns, const unsigned char *kv_pool,
                                                                        unsigned long long layer_off, const int *positions,
                                                                        const int *token_seq, const int *page_table, int max_pages) {
    /* a kv head's K (then V, AT_KV blocks on) code or element rows of a page; quantized rows' scales
     * and zero points are not prefetched */
    constexpr unsigned BLK = AT_KVQ ? AT_PS * IG_KVQ_RB(AT_D, AT_KVQ) : AT_PS * AT_D * (AT_KVBF16 ? 2 : 4);
    const int n = positions[t] + 1;
    int k0, k1;
    IG_CAT(AT_NAME, _range)(n, sp, ns, &k0, &k1);
    const int *pt = page_table + (size_t)token_seq[t] * max_pages;
    if (k0 >= k1) return;
    for (int p = k0 / AT_PS + (int)(threadIdx.x & 31); p <= (k1 - 1) / AT_PS; p += 32) {
        const unsigned char *b = kv_pool + (unsigned long long)__ldg(pt + p) * AT_PAGE_BYTES + layer_off + (size_t)kh * BLK;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(b), "r"(BLK) : "memory");
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(b + (size_t)AT_KV * BLK), "r"(BLK) : "memory");
    }
}
#endif

#if !AT_DEVFN
extern "C" __global__ void __launch_bounds__(IG_AT_BLOCK, AT_MINB_)
IG_CAT(AT_NAME, _split_rope)(int T, const float *qkv, const double *inv_freq, const float *q_norm,
                             const float *k_norm, unsigned char *kv_pool, unsigned long long layer_off,
                             const int *positions, const int *token_seq, const int *page_table, int max_pages,
                             float *ws, unsigned *counters, AT_OT_ *out) {
    IG_DYN_SMEM(float, ig_dyn_smem);
    if ((int)blockIdx.y >= T) return;
    const int pos = positions[blockIdx.y], ns = IG_CAT(AT_NAME, _splits)(pos + 1 - IG_CAT(AT_NAME, _lo)(pos));
    if ((int)blockIdx.z >= ns) return;
    IG_CAT(AT_NAME, _rope_item)(T, blockIdx.x, 0, blockIdx.y, blockIdx.z, ns, qkv, inv_freq, NULL, q_norm, k_norm, kv_pool,
                                layer_off, positions, token_seq, page_table, max_pages, ws, counters, out, ig_dyn_smem);
}
#endif

#undef AT_OT_
#undef AT_NAME
#undef AT_H
#undef AT_KV
#undef AT_D
#undef AT_PS
#undef AT_KVBF16
#undef AT_KVQ
#undef AT_OBF16
#undef AT_PAGE_BYTES
#undef AT_SCALE
#undef AT_MAXCTX
#undef AT_SPLIT
#undef AT_SPLIT_KEYS
#undef AT_QKNORM
#undef AT_EPS
#undef AT_DEVFN
#undef AT_WINDOW
#undef AT_ROT
#undef AT_INTERLEAVE
#undef AT_PIPE
#undef AT_L2PF
#undef AT_TC
#undef AT_QS_
#undef AT_MINB_
#undef AT_SYNC_
