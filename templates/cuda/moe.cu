/* moe.cu — template: a mixture-of-experts feed-forward block (or a gated shared expert) added to
 * the residual stream, as templates/cpu/moe.c computes it, in three kernels: the router, the
 * selected experts' gate/up with SwiGLU, their down projections weighted and summed into the
 * residual. Each (token, selected expert) reads only that expert's rows, so a decode step streams
 * the active experts' weights and no others.
 *
 * Instantiate with MO_NAME, MO_D (hidden), MO_E (experts), MO_TOPK, MO_I (rows of one expert's gate
 * or up projection), MO_NORM (1: the top-k weights renormalized to sum 1), MO_WBF16 (weight type),
 * MO_XBF16 (1: the experts' input rows and their SwiGLU output rounded to the 16-bit type, as the
 * CPU's matmuls read them), MO_SHARED (1: the shared-expert form); defines
 *   extern "C" __global__ void MO_NAME_route(int T, const float *x, const float *router, int *sel, float *wt);
 *   extern "C" __global__ void MO_NAME_gu(int T, const float *x, const int *sel, const WT *w_gu, AT *h);
 *   extern "C" __global__ void MO_NAME_down(int T, const AT *h, const int *sel, const float *wt,
 *                                          const WT *w_down, float *resid);
 * x: the normalized rows f32 [T][MO_D]; sel int [T][MO_TOPK], wt f32 [T][MO_TOPK]; h AT
 * [T][MO_TOPK][MO_I]; resid f32 [T][MO_D] (+=).
 * Routed form: router f32 [MO_E][MO_D]; logits, softmax over all experts and top-k in f32 (ties to
 * the lower expert index, as torch.topk), weight = softmax value (renormalized over the k with
 * MO_NORM); w_gu holds the experts' gate/up stacked [MO_E][2 MO_I][MO_D] (each expert's gate and
 * up rows interleaved by 16, SPEC.md), w_down [MO_E][MO_D][MO_I].
 * Shared form (MO_E = MO_TOPK = 1): router is the gate row f32 [MO_D], sel = 0 and
 * wt = sigmoid(x . gate): resid += sigmoid(x . gate) * mlp(x).
 * launch (launch.h):
 *   route: grid (IG_MO_ROUTE_GRID_X(T) = T), block IG_MO_BLOCK = 256, smem 0 (or, routed form, the
 *          router over many SMs: MO_NAME_logits(T, x, router, lg) grid (IG_MO_LG_GRID_X(E), T),
 *          block 256, lg f32 [T][MO_E], then MO_NAME_select(T, lg, sel, wt) grid T, block 32)
 *   gu:    grid (IG_MO_GU_GRID_X(I), T * TOPK), block 256, smem 0: a warp per output (gate and up row)
 *   down:  grid (IG_MO_DN_GRID_X(D), T), block 256, smem 0: a warp per output row, summing the k experts
 * Rows are read with 16-byte loads (MO_D and MO_I multiples of 8), lanes striding over the row,
 * warp-shuffle sums.
 *
 * Expert-grouped form, for prefill-sized steps: each CTA stages 8 weight rows of one expert once
 * and runs them over all of that expert's pairs (the per-pair kernels re-read them per pair). The
 * same arithmetic up to the order of the f32 sums; deterministic (each pair is computed by one warp,
 * whatever its place in the expert's list):
 *   extern "C" __global__ void MO_NAME_group(int T, const int *sel, int *off, int *list);
 *       off [MO_E + 1], list [T * MO_TOPK]: the pairs t * MO_TOPK + k grouped by expert (one CTA)
 *   extern "C" __global__ void MO_NAME_gu_grouped(int T, const float *x, const int *off, const int *list,
 *                                                const WT *w_gu, AT *h);
 *   extern "C" __global__ void MO_NAME_down_grouped(int T, const AT *h, const int *off, const int *list,
 *                                                  const float *wt, const WT *w_down, float *y);
 *       y f32 [T][MO_TOPK][MO_D] = wt x the expert's down projection of the pair
 *   extern "C" __global__ void MO_NAME_sum(int T, const float *y, float *resid);
 *       resid[t] += sum over k of y[t][k] (in k order)
 * launch: group grid 1, block 1024; gu_grouped grid (IG_MO_GGU_GRID_X(I), MO_E), down_grouped grid
 * (IG_MO_GDN_GRID_X(D), MO_E), block 256, dynamic smem IG_MO_GSMEM(K, WES) (K = MO_D, then MO_I:
 * the CTA's 8 weight rows of its expert, staged once and used for all of the expert's pairs);
 * sum grid (IG_MO_SUM_GRID_X(D), T), block 256. A CTA of an expert without pairs returns at once.
 * off holds 2 (MO_E + 1) ints: after the pairs' offsets, _group writes the scan of each expert's
 * row tiles for the tensor-core form.
 *
 * Expert-grouped on tensor cores (16-bit weights and rows, MO_D and MO_I multiples of IG_MO_TC_BK;
 * the kernels do nothing below sm_80, where codegen does not launch them): the same results up to
 * the order of the f32 sums, with x rounded to the 16-bit type first:
 *   extern "C" __global__ void MO_NAME_xround(int T, const float *x, AT *xb);   grid (IG_MO_SUM_GRID_X(D), T)
 *   extern "C" __global__ void MO_NAME_gu_tc(int T, const AT *xb, const int *off, const int *list,
 *                                           const WT *w_gu, AT *h);
 *       grid (IG_MO_TC_GU_GRID_X(I), IG_MO_TC_GRID_Y(T, K, E))
 *   extern "C" __global__ void MO_NAME_down_tc(int T, const AT *h, const int *off, const int *list,
 *                                             const float *wt, const WT *w_down, float *y);
 *       grid (IG_MO_TC_DN_GRID_X(D), IG_MO_TC_GRID_Y(T, K, E))
 * block IG_MO_TC_THREADS, dynamic smem IG_MO_TC_SMEM (80 KB); then MO_NAME_sum as above. A CTA is
 * a tile of IG_MO_TC_BM pairs of one expert (the tiles of all experts numbered back to back; CTAs
 * past the last return) times IG_MO_TC_BN weight rows: mma.sync m16n8k16 with f32 accumulate,
 * operands through IG_MO_TC_NST cp.async stages and ldmatrix, the pairs' rows gathered by index;
 * gate/up's epilogue pairs each group of 16 gate rows with their 16 up rows (the packing's
 * interleave) for the SwiGLU.
 * The same products on Hopper's warpgroup tensor cores (sm_90a images; empty kernels elsewhere),
 * fed by TMA through tensor maps the host encodes (a map: 16-bit rows, boxes of 64 columns in the
 * 128-byte swizzle, 128 rows for the pairs' operand, 256 for the weights), with the pairs' rows in
 * _group's order so that a tile's rows are consecutive:
 *   extern "C" __global__ void MO_NAME_xgather(int T, const float *x, const int *list, AT *xg);
 *       xg [T K][D]: pair p's token row, rounded; grid IG_MO_XG_GRID(T, K, D)
 *       (the shared form has no list: its pairs are the tokens, _xround's rows)
 *   extern "C" __global__ void MO_NAME_gu_wg(int T, const int *off, AT *h, ig_tmap xm, ig_tmap wm);
 *       h [T K][I] in grouped order; xm over xg ([T K][D]), wm over w_gu ([E 2I][D])
 *   extern "C" __global__ void MO_NAME_down_wg(int T, const int *off, const int *list, const float *wt,
 *                                             float *y, ig_tmap hm, ig_tmap wm);
 *       y as _down_tc's (by pair); hm over that h ([T K][I]), wm over w_down ([E D][I])
 * block IG_MO_WG_THREADS, dynamic smem IG_MO_WG_SMEM, grids as the _tc kernels' with IG_MO_WG_*_GRID_X.
 * Decode-sized steps (T <= IG_MO_DTMAX) in two launches over all SMs (the section below _select):
 *   extern "C" __global__ void MO_NAME_dgu(int T, const float *x, const float *gamma, float eps,
 *                                          const float *router, float *lg, int *sel, float *wt,
 *                                          const WT *w_gu, AT *h, unsigned *sync);
 *       gamma null: x holds the normalized rows; else x is the residual and the layer's RMSNorm
 *       (x / sqrt(mean(x^2) + eps) * gamma, rmsnorm.cu's arithmetic) is folded in, every CTA
 *       taking the rows' scales itself;
 *   extern "C" __global__ void MO_NAME_ddown(int T, const AT *h, const int *sel, const float *wt,
 *                                            const WT *w_down, float *resid);
 * launch (launch.h): grid = CTAs all resident at once (the SM count), block IG_MO_DBLOCK; _dgu's
 * dynamic smem IG_MO_DSMEM(T, MO_D, AT bytes); lg f32 [T][MO_E]; sync 2 unsigned, zero before the
 * first launch (_dgu's arrival counter and release count).
 *
 * Quantized experts (`--quant a16w8|a16w4`: MO_WQ / MO_WG for gate/up, MO_DN_WQ / MO_DN_WG for
 * down, 8: q8r, 4: q4r with groups of G, 0: floats; wq.cuh's rows, expert e's gate/up at row
 * e * 2 MO_I, its down at row e * MO_D): _dgu and _ddown read the codes (a lane per 16-byte vector
 * of codes, the scales applied per row (q8r) or per vector's group (q4r)); every other kernel here
 * keeps reading 16-bit rows, which the code generator makes for steps past IG_MO_DTMAX by
 * dequantizing the layer's stack (dequant.cu) into its scratch first.
 * The persistent decode kernel's MoE layers (--tune dl_moe) are stream_moe.cuh's; they pick
 * experts by the same moe_select.cuh.
 */
#include "common.cuh"
#include "mma.cuh"
#include "moe_select.cuh"
#include "mbar.cuh"
#include "wgmma.cuh"
#include "wq.cuh"

#ifndef MO_NAME
#define MO_NAME ig_moe
#endif
#ifndef MO_D
#define MO_D 128
#endif
#ifndef MO_E
#define MO_E 8
#endif
#ifndef MO_TOPK
#define MO_TOPK 2
#endif
#ifndef MO_I
#define MO_I 64
#endif
#ifndef MO_NORM
#define MO_NORM 1
#endif
#ifndef MO_WBF16
#define MO_WBF16 1
#endif
#ifndef MO_XBF16
#define MO_XBF16 1
#endif
#ifndef MO_SHARED
#define MO_SHARED 0
#endif
#ifndef MO_WQ /* gate/up rows: 0 floats, 8 q8r, 4 q4r (wq.cuh) */
#define MO_WQ 0
#endif
#ifndef MO_WG
#define MO_WG 32
#endif
#ifndef MO_DN_WQ /* down rows, the same */
#define MO_DN_WQ 0
#endif
#ifndef MO_DN_WG
#define MO_DN_WG 32
#endif

#if MO_WBF16
#define MO_WT_ unsigned short
#else
#define MO_WT_ float
#endif
#if MO_XBF16
#define MO_AT_ unsigned short
#else
#define MO_AT_ float
#endif
#if MO_WQ /* the decode kernels' weight types (quantized: bytes of rows) */
#define MO_GWT_ unsigned char
#else
#define MO_GWT_ MO_WT_
#endif
#if MO_DN_WQ
#define MO_DWT_ unsigned char
#else
#define MO_DWT_ MO_WT_
#endif

#ifndef IG_MO_HELPERS
#define IG_MO_HELPERS
/* x (f32, n elements) rounded to the 16-bit type when bf, as the CPU's ig_store_row */
IG_DEV float ig_mo_round(float v, bool bf) { return bf ? ig_round_h(v) : v; }
#endif

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _route)(int T, const float *x, const float *router, int *sel, float *wt) {
    static_assert(MO_D % 8 == 0, "MO_D must be a multiple of 8");
    __shared__ float lg[MO_E];
    const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (t >= T) return;
    const float *xr = x + (size_t)t * MO_D;
    for (int e = warp; e < MO_E; e += IG_MO_BLOCK / 32) {
        float s = 0.0f;
        for (int i = lane; i < MO_D; i += 32) s = fmaf(xr[i], router[(size_t)e * MO_D + i], s);
        s = ig_warp_sum(s);
        if (lane == 0) lg[e] = s;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
#if MO_SHARED
    sel[t] = 0, wt[t] = 1.0f / (1.0f + expf(-lg[0]));
#else
    float mx = IG_NEG_INF, sum = 0.0f, ksum = 0.0f;
    for (int e = 0; e < MO_E; e++) mx = fmaxf(mx, lg[e]);
    for (int e = 0; e < MO_E; e++) sum += (lg[e] = expf(lg[e] - mx));
    float w[MO_TOPK];
    for (int k = 0; k < MO_TOPK; k++) {
        int best = -1;
        for (int e = 0; e < MO_E; e++)
            if (lg[e] >= 0.0f && (best < 0 || lg[e] > lg[best])) best = e;
        if (best < 0) best = 0; /* NaN logits (a NaN input): a valid expert, the output NaN as it should be */
        sel[t * MO_TOPK + k] = best;
        w[k] = lg[best] / sum, ksum += w[k];
        lg[best] = -1.0f; /* taken */
    }
    for (int k = 0; k < MO_TOPK; k++) wt[t * MO_TOPK + k] = MO_NORM ? w[k] / ksum : w[k];
#endif
}

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _gu)(int T, const float *x, const int *sel, const MO_WT_ *w_gu, MO_AT_ *h) {
    static_assert(MO_D % 8 == 0 && MO_I % 16 == 0, "MO_D % 8, MO_I % 16 (16-row panels)");
    constexpr int WES = MO_WBF16 ? 2 : 4;
    __shared__ float xs[MO_D];
    const int tk = blockIdx.y, t = tk / MO_TOPK, warp = threadIdx.x >> 5;
    if (t >= T) return;
    for (int i = threadIdx.x; i < MO_D; i += IG_MO_BLOCK) xs[i] = ig_mo_round(x[(size_t)t * MO_D + i], MO_XBF16);
    __syncthreads();
    const int e = sel[tk], i = blockIdx.x * (IG_MO_BLOCK / 32) + warp;
    if (i >= MO_I) return;
    const int g = 32 * (i / 16) + i % 16; /* packed row of gate i; its up row is 16 further */
    const unsigned char *we = (const unsigned char *)w_gu + (size_t)e * 2 * MO_I * MO_D * WES;
    /* the gate and up rows in one pass (both streams' loads in flight together): lanes stride over
     * 16-byte chunks, f32 sums in chunk order, a warp-shuffle sum each */
    const unsigned char *wg = we + (size_t)g * MO_D * WES, *wu = we + (size_t)(g + 16) * MO_D * WES;
    constexpr int VE = 16 / WES;
    float gs = 0.0f, us = 0.0f;
#pragma unroll 4
    for (int c = threadIdx.x & 31; c < MO_D / VE; c += 32) {
        float fg[8], fu[8];
        ig_unpack16(ig_ldg16(wg + (size_t)c * 16), WES, fg);
        ig_unpack16(ig_ldg16(wu + (size_t)c * 16), WES, fu);
        for (int j = 0; j < VE; j++) gs = fmaf(fg[j], xs[c * VE + j], gs), us = fmaf(fu[j], xs[c * VE + j], us);
    }
    gs = ig_warp_sum(gs), us = ig_warp_sum(us);
    if ((threadIdx.x & 31) == 0) {
        const float o = ig_glu(gs, us, false);
        if (MO_XBF16) ((unsigned short *)h)[(size_t)tk * MO_I + i] = ig_f32_to_h(o);
        else ((float *)h)[(size_t)tk * MO_I + i] = o;
    }
}

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _down)(int T, const MO_AT_ *h, const int *sel, const float *wt, const MO_WT_ *w_down, float *resid) {
    static_assert(MO_I % 8 == 0, "MO_I must be a multiple of 8");
    constexpr int WES = MO_WBF16 ? 2 : 4;
    __shared__ float hs[MO_TOPK * MO_I];
    const int t = blockIdx.y, warp = threadIdx.x >> 5;
    if (t >= T) return;
    for (int i = threadIdx.x; i < MO_TOPK * MO_I; i += IG_MO_BLOCK)
        hs[i] = MO_XBF16 ? ig_h_to_f32(((const unsigned short *)h)[(size_t)t * MO_TOPK * MO_I + i])
                         : ((const float *)h)[(size_t)t * MO_TOPK * MO_I + i];
    __syncthreads();
    const int d = blockIdx.x * (IG_MO_BLOCK / 32) + warp;
    if (d >= MO_D) return;
    /* every selected expert's row streamed at once (all their loads in flight), each expert's sum
     * kept apart and reduced alone (as for gate/up), then weighted in the selection's order */
    constexpr int VE = 16 / WES;
    const unsigned char *wr[MO_TOPK];
    float ps[MO_TOPK];
#pragma unroll
    for (int k = 0; k < MO_TOPK; k++)
        wr[k] = (const unsigned char *)w_down + ((size_t)sel[t * MO_TOPK + k] * MO_D + d) * MO_I * WES, ps[k] = 0.0f;
    for (int c = threadIdx.x & 31; c < MO_I / VE; c += 32) {
#pragma unroll
        for (int k = 0; k < MO_TOPK; k++) {
            float f[8];
            ig_unpack16(ig_ldg16(wr[k] + (size_t)c * 16), WES, f);
            for (int j = 0; j < VE; j++) ps[k] = fmaf(f[j], hs[k * MO_I + c * VE + j], ps[k]);
        }
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < MO_TOPK; k++) acc = fmaf(wt[t * MO_TOPK + k], ig_warp_sum(ps[k]), acc);
    if ((threadIdx.x & 31) == 0) resid[(size_t)t * MO_D + d] += acc;
}

#if !MO_SHARED
/* The router for decode-sized steps over many SMs: _logits (a warp per expert, 16-byte loads,
 * grid (IG_MO_LG_GRID_X(E), T)) writes lg f32 [T][MO_E] (prefill-sized steps get them from
 * gemm.cu's f32 instance instead: a warp a (token, expert) would read the router T times);
 * _select (grid T, block 32, defined below with _dselect) takes the softmax, top-k and weights. */
extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _logits)(int T, const float *x, const float *router, float *lg) {
    static_assert(MO_D % 4 == 0, "MO_D must be a multiple of 4");
    const int t = blockIdx.y, e = blockIdx.x * (IG_MO_BLOCK / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (t >= T || e >= MO_E) return;
    const float4 *xr = (const float4 *)(x + (size_t)t * MO_D), *rr = (const float4 *)(router + (size_t)e * MO_D);
    float s = 0.0f;
#pragma unroll 4
    for (int i = lane; i < MO_D / 4; i += 32) {
        const float4 a = __ldg(xr + i), b = __ldg(rr + i);
        s = fmaf(a.x, b.x, s), s = fmaf(a.y, b.y, s), s = fmaf(a.z, b.z, s), s = fmaf(a.w, b.w, s);
    }
    s = ig_warp_sum(s);
    if (lane == 0) lg[(size_t)t * MO_E + e] = s;
}

#endif

/* ---- decode-sized steps (T <= IG_MO_DTMAX) in two launches over all SMs ----
 * _dgu: every CTA stages the token rows (rounded as the experts read them); the router's logits
 * (routed form) are an expert a CTA (its warps split the row: one trip to memory); the last CTA to
 * arrive (a counter in sync[0]) takes the softmax and top-k of each token (a warp per token, the
 * experts over its lanes) and bumps sync[1], which the others wait on; then a warp per (pair,
 * output) streams that expert's gate and up rows, up to 16 16-byte loads a lane in flight, and
 * writes the SwiGLU. The shared form needs no wait: its gate/up reads no selection, and the
 * sigmoid weight (CTA 0's) is for _ddown. The wait needs every CTA resident at once (the host's
 * grid: one a SM).
 * _ddown: a warp per (token, output row) streams the k selected experts' down rows together (up to
 * 16 16-byte loads a lane), sums each expert's product alone and adds their weighted sum to the
 * residual in the selection's order. Gate/up and down are the same arithmetic as _gu / _down (a
 * row's chunks in the same lane order); the logits and the softmax's sum add in another order than
 * _logits or gemm.cu (f32 rounding: a near tie may pick the other expert). */
#if !MO_SHARED
/* token t's top-k from lg (written by other CTAs of this launch: read through L2), by one warp
 * (moe_select.cuh, as the persistent decode kernel's MoE layers pick) */
IG_DEV void IG_CAT(MO_NAME, _dselect)(int t, const float *lg, int *sel, float *wt) {
    ig_moe_select<MO_E, MO_TOPK, MO_NORM != 0>(lg + (size_t)t * MO_E, sel + t * MO_TOPK, wt + t * MO_TOPK);
}

/* _select: token t = blockIdx.x's softmax, top-k and weights from lgs by one warp (the experts
 * over its lanes, as the decode launch's _dselect: both paths pick by the same arithmetic) */
extern "C" __global__ void __launch_bounds__(32) IG_CAT(MO_NAME, _select)(int T, const float *lgs, int *sel, float *wt) {
    if ((int)blockIdx.x < T) IG_CAT(MO_NAME, _dselect)(blockIdx.x, lgs, sel, wt);
}
#endif

/* row . x_t over MO_D for the T token rows x (f32, global memory; with gamma, x_t * rs[t] * gamma,
 * the RMSNorm folded in), by the whole CTA (every thread calls it): the warps split the row's
 * 16-byte chunks (one load a lane for MO_D = 2048: a single trip to memory), their sums are
 * reduced in warp order; thread t < T returns token t's. */
IG_DEV float IG_CAT(MO_NAME, _dlogit)(const float *row, const float *x, const float *gamma, const float *rs, int T,
                                      float (*red)[IG_MO_DTMAX]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float s[IG_MO_DTMAX];
#pragma unroll
    for (int t = 0; t < IG_MO_DTMAX; t++) s[t] = 0.0f;
    for (int i = warp * 32 + lane; i < MO_D / 4; i += IG_MO_DBLOCK) {
        const float4 b = __ldg((const float4 *)row + i);
        float4 g = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
        if (gamma) g = __ldg((const float4 *)gamma + i);
#pragma unroll
        for (int t = 0; t < IG_MO_DTMAX; t++)
            if (t < T) {
                float4 a = __ldg((const float4 *)(x + (size_t)t * MO_D) + i);
                if (gamma) /* as rmsnorm.cu: x * s * gamma */
                    a.x = a.x * rs[t] * g.x, a.y = a.y * rs[t] * g.y, a.z = a.z * rs[t] * g.z, a.w = a.w * rs[t] * g.w;
                s[t] = fmaf(a.x, b.x, s[t]), s[t] = fmaf(a.y, b.y, s[t]), s[t] = fmaf(a.z, b.z, s[t]), s[t] = fmaf(a.w, b.w, s[t]);
            }
    }
    __syncthreads(); /* red is free (a previous call's sums are read) */
#pragma unroll
    for (int t = 0; t < IG_MO_DTMAX; t++)
        if (t < T) {
            const float v = ig_warp_sum(s[t]);
            if (lane == 0) red[warp][t] = v;
        }
    __syncthreads();
    float a = 0.0f;
    if ((int)threadIdx.x < T)
        for (int w = 0; w < IG_MO_DBLOCK / 32; w++) a += red[w][threadIdx.x];
    return a;
}

/* VE (16 / WES) activations of element type AES bytes at p (shared or global memory) as f32 */
template <int VE, int AES>
IG_DEV void IG_CAT(MO_NAME, _dact)(const unsigned char *p, float *f) {
    if (VE * AES == 16) {
        ig_unpack16(*(const uint4 *)p, AES, f);
    } else {
#pragma unroll
        for (int j = 0; j < VE; j++)
            f[j] = AES == 2 ? ig_h_to_f32(((const unsigned short *)p)[j]) : ((const float *)p)[j];
    }
}

/* Lane partials p[r] of NR quantized rows (WQ 8: q8r, 4: q4r with groups of G; K columns; row r at
 * w[r]) dotted with activation rows x[r] (AES bytes an element, shared or global memory; SX: one
 * row x[0] for all, loaded once): the lanes of a warp stride over the rows' 16-byte code vectors,
 * CBL of them in flight per row; q4r applies each vector's group scale and min
 * (scale sum(q x) + min sum(x)), q8r the row's scale at the end. The warp's sum of p[r] is
 * row r . x[r]. */
template <int WQ, int G, int K, int AES, int NR, int CBL, bool SX>
IG_DEV void IG_CAT(MO_NAME, _qrows)(const unsigned char *const *w, const unsigned char *const *x, int lane, float *p) {
    constexpr int CB = IG_WQ_CODEB(K, WQ), RB = IG_WQ_ROWB(K, WQ, G), VE = WQ == 8 ? 16 : 32, KV = CB / 16;
    constexpr int PER = (KV + 31) / 32;
    static_assert((WQ == 8 && K % 16 == 0) || (WQ == 4 && K % 32 == 0 && K % G == 0 && G % 32 == 0),
                  "q8r rows need K % 16 == 0, q4r rows K % 32 == 0 and whole groups of a multiple of 32");
#pragma unroll
    for (int r = 0; r < NR; r++) p[r] = 0.0f;
    for (int c0 = 0; c0 < PER; c0 += CBL) {
        uint4 v[NR][CBL];
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int j = 0; j < CBL; j++) {
                const int c = (c0 + j) * 32 + lane;
                if (c < KV) v[r][j] = ig_ldg16(w[r] + (size_t)c * 16);
            }
#pragma unroll
        for (int j = 0; j < CBL; j++) {
            const int c = (c0 + j) * 32 + lane;
            if (c >= KV) continue;
            float d[NR], sx[NR];
#pragma unroll
            for (int r = 0; r < NR; r++) d[r] = sx[r] = 0.0f;
#pragma unroll
            for (int pc = 0; pc < VE / 8; pc++) { /* 8 codes of each row against 8 activations (16-byte loads) */
                float xf[SX ? 1 : NR][8];
#pragma unroll
                for (int r = 0; r < (SX ? 1 : NR); r++) {
                    const unsigned char *xp = x[r] + (size_t)(c * VE + 8 * pc) * AES;
                    ig_unpack16(*(const uint4 *)xp, AES, xf[r]);
                    if (AES == 4) ig_unpack16(*(const uint4 *)(xp + 16), AES, xf[r] + 4);
                }
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    float f[8];
                    if (WQ == 8) ig_wq8_word(ig_wq_w(v[r][j], 2 * pc), f), ig_wq8_word(ig_wq_w(v[r][j], 2 * pc + 1), f + 4);
                    else ig_wq4_word(ig_wq_w(v[r][j], pc), f);
                    const float *xr = xf[SX ? 0 : r];
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        d[r] = fmaf(f[e], xr[e], d[r]);
                        if (WQ == 4 && (!SX || r == 0)) sx[r] += xr[e];
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < NR; r++) {
                if (WQ == 4) {
                    const float2 sm = ig_wq4_sm<K, RB, G>(w[r], 0, c * VE);
                    p[r] += fmaf(sm.x, d[r], sm.y * sx[SX ? 0 : r]);
                } else {
                    p[r] += d[r];
                }
            }
        }
    }
    if (WQ == 8)
#pragma unroll
        for (int r = 0; r < NR; r++) p[r] *= ig_wq8_scale<K>(w[r], 0);
}

extern "C" __global__ void __launch_bounds__(IG_MO_DBLOCK, 1)
IG_CAT(MO_NAME, _dgu)(int T, const float *x, const float *gamma, float eps, const float *router, float *lg, int *sel,
                      float *wt, const MO_GWT_ *w_gu, MO_AT_ *h, unsigned *sync) {
    static_assert(MO_D % 8 == 0 && MO_I % 16 == 0, "MO_D % 8, MO_I % 16 (16-row panels)");
    constexpr int WES = MO_WBF16 ? 2 : 4, AES = MO_XBF16 ? 2 : 4, VE = 16 / WES, NW = IG_MO_DBLOCK / 32;
    constexpr int NC = MO_D / VE, PER = (NC + 31) / 32, CB = PER < 8 ? PER : 8;
    IG_DYN_SMEM(uint4, mo_dyn); /* [T][MO_D] rounded as AT */
    unsigned char *mo_xs = (unsigned char *)mo_dyn;
    __shared__ int ssel[IG_MO_DTMAX * MO_TOPK];
    __shared__ float red[IG_MO_DBLOCK / 32][IG_MO_DTMAX];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x;
    __shared__ float rs[IG_MO_DTMAX];
    if (T > IG_MO_DTMAX) return;
    if (gamma) { /* the layer's RMSNorm folded in: every CTA takes the rows' scales */
        float ss[IG_MO_DTMAX];
#pragma unroll
        for (int t = 0; t < IG_MO_DTMAX; t++) {
            ss[t] = 0.0f;
            if (t < T)
                for (int i = threadIdx.x; i < MO_D; i += IG_MO_DBLOCK) ss[t] = fmaf(x[(size_t)t * MO_D + i], x[(size_t)t * MO_D + i], ss[t]);
        }
#pragma unroll
        for (int t = 0; t < IG_MO_DTMAX; t++)
            if (t < T) {
                const float v = ig_warp_sum(ss[t]);
                if (lane == 0) red[warp][t] = v;
            }
        __syncthreads();
        if ((int)threadIdx.x < T) {
            float a = 0.0f;
            for (int w = 0; w < NW; w++) a += red[w][threadIdx.x];
            rs[threadIdx.x] = 1.0f / sqrtf(a / (float)MO_D + eps);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < T * MO_D; i += IG_MO_DBLOCK) {
        const float v = gamma ? x[i] * rs[i / MO_D] * gamma[i % MO_D] : x[i];
        if (MO_XBF16) ((unsigned short *)mo_xs)[i] = ig_f32_to_h(v);
        else ((float *)mo_xs)[i] = v;
    }
#if MO_SHARED
    (void)lg, (void)sync;
    if (blockIdx.x == 0) { /* the gate's sigmoid */
        const float s = IG_CAT(MO_NAME, _dlogit)(router, x, gamma, rs, T, red);
        if ((int)threadIdx.x < T) sel[threadIdx.x] = 0, wt[threadIdx.x] = 1.0f / (1.0f + expf(-s));
    }
    if ((int)threadIdx.x < T) ssel[threadIdx.x] = 0;
    __syncthreads();
#else
    __shared__ unsigned s_f0;
    __shared__ int s_last;
    for (int e = blockIdx.x; e < MO_E; e += G) { /* expert e's logits: CTA e % G */
        const float s = IG_CAT(MO_NAME, _dlogit)(router + (size_t)e * MO_D, x, gamma, rs, T, red);
        if ((int)threadIdx.x < T) lg[(size_t)threadIdx.x * MO_E + e] = s;
    }
    /* publish and wait as common.cuh's ig_atom_add_acq_rel_gpu says: a barrier then one release by
     * thread 0; thread 0's acquire then a barrier */
    __syncthreads();
    if (threadIdx.x == 0) { /* arrive; the last CTA resets the counter for the next launch */
        /* the release orders this read before the arrival: it cannot see this launch's bump */
        const unsigned f0 = *(volatile unsigned *)(sync + 1);
        const unsigned old = ig_atom_add_acq_rel_gpu(sync, 1u);
        s_f0 = f0, s_last = old == (unsigned)G - 1;
        if (s_last) atomicExch(sync, 0u);
    }
    __syncthreads();
    if (s_last) {
        for (int t = warp; t < T; t += NW) IG_CAT(MO_NAME, _dselect)(t, lg, sel, wt);
        __syncthreads();
        if (threadIdx.x == 0) ig_red_add_release_gpu(sync + 1, 1u); /* the choices out */
    }
    if (threadIdx.x == 0)
        while (ig_ld_acquire_gpu(sync + 1) == s_f0) __nanosleep(32);
    __syncthreads();
    if ((int)threadIdx.x < T * MO_TOPK) ssel[threadIdx.x] = __ldcg(sel + threadIdx.x);
    __syncthreads();
#endif
#if MO_WQ
    /* quantized gate/up: a warp per (pair, output), the gate and up rows' codes in flight together
     * against the token's row, loaded once per vector. _dgu us per call, Qwen3-30B-A3B shapes, q8r /
     * q4r g32: H100 27.2-27.9 / 25.4-26.1 (16-bit rows 33.2-34.5); on the H200 (16-bit rows 28.4)
     * the first version, activations read 4 at a time, 24.4 / 24.1, and 4 outputs a warp (a quarter
     * of the items, fewer than the warps; dropped) 27.8 / 29.6 */
    (void)PER, (void)CB, (void)VE;
    constexpr int QRB = IG_WQ_ROWB(MO_D, MO_WQ, MO_WG);
    for (int it = blockIdx.x * NW + warp; it < T * MO_TOPK * MO_I; it += G * NW) {
        const int tk = it / MO_I, i = it % MO_I, t = tk / MO_TOPK, e = ssel[tk];
        const int g = 32 * (i / 16) + i % 16; /* packed row of gate i; its up row is 16 further */
        const unsigned char *wr[2], *xq[1] = {mo_xs + (size_t)t * MO_D * AES};
        wr[0] = (const unsigned char *)w_gu + ((size_t)e * 2 * MO_I + g) * QRB, wr[1] = wr[0] + (size_t)16 * QRB;
        float pq[2];
        IG_CAT(MO_NAME, _qrows)<MO_WQ, MO_WG, MO_D, AES, 2, 4, true>(wr, xq, lane, pq);
        const float gs = ig_warp_sum(pq[0]), us = ig_warp_sum(pq[1]);
        if (lane == 0) {
            const float v = ig_glu(gs, us, false);
            if (MO_XBF16) ((unsigned short *)h)[(size_t)tk * MO_I + i] = ig_f32_to_h(v);
            else ((float *)h)[(size_t)tk * MO_I + i] = v;
        }
    }
#else
    /* gate/up: a warp per (pair, output), the gate and up rows' loads in flight together */
    for (int it = blockIdx.x * NW + warp; it < T * MO_TOPK * MO_I; it += G * NW) {
        const int tk = it / MO_I, i = it % MO_I, t = tk / MO_TOPK, e = ssel[tk];
        const int g = 32 * (i / 16) + i % 16; /* packed row of gate i; its up row is 16 further */
        const unsigned char *wg = (const unsigned char *)w_gu + ((size_t)e * 2 * MO_I + g) * MO_D * WES;
        const unsigned char *wu = wg + (size_t)16 * MO_D * WES, *xr = mo_xs + (size_t)t * MO_D * AES;
        float gs = 0.0f, us = 0.0f;
        for (int c0 = 0; c0 < PER; c0 += CB) {
            uint4 rg[CB], ru[CB];
#pragma unroll
            for (int j = 0; j < CB; j++) {
                const int c = (c0 + j) * 32 + lane;
                if (c < NC) rg[j] = ig_ldg16(wg + (size_t)c * 16), ru[j] = ig_ldg16(wu + (size_t)c * 16);
            }
#pragma unroll
            for (int j = 0; j < CB; j++) {
                const int c = (c0 + j) * 32 + lane;
                if (c >= NC) continue;
                float fg[8], fu[8], xv[8];
                ig_unpack16(rg[j], WES, fg), ig_unpack16(ru[j], WES, fu);
                IG_CAT(MO_NAME, _dact)<VE, AES>(xr + (size_t)c * VE * AES, xv);
#pragma unroll
                for (int q = 0; q < VE; q++) gs = fmaf(fg[q], xv[q], gs), us = fmaf(fu[q], xv[q], us);
            }
        }
        gs = ig_warp_sum(gs), us = ig_warp_sum(us);
        if (lane == 0) {
            const float o = ig_glu(gs, us, false);
            if (MO_XBF16) ((unsigned short *)h)[(size_t)tk * MO_I + i] = ig_f32_to_h(o);
            else ((float *)h)[(size_t)tk * MO_I + i] = o;
        }
    }
#endif
}

extern "C" __global__ void __launch_bounds__(IG_MO_DBLOCK, 1)
IG_CAT(MO_NAME, _ddown)(int T, const MO_AT_ *h, const int *sel, const float *wt, const MO_DWT_ *w_down, float *resid) {
    static_assert(MO_I % 8 == 0, "MO_I must be a multiple of 8");
    constexpr int WES = MO_WBF16 ? 2 : 4, AES = MO_XBF16 ? 2 : 4, VE = 16 / WES, NW = IG_MO_DBLOCK / 32;
    constexpr int NC = MO_I / VE, PER = (NC + 31) / 32, CB = PER < 8 ? PER : 8;
    constexpr int KB = 16 / CB < 1 ? 1 : 16 / CB < MO_TOPK ? 16 / CB : MO_TOPK; /* experts a batch */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (T > IG_MO_DTMAX) return;
#if MO_DN_WQ
    (void)KB;
    constexpr int QRB = IG_WQ_ROWB(MO_I, MO_DN_WQ, MO_DN_WG), QB = MO_TOPK < 8 ? MO_TOPK : 8; /* experts a batch */
    for (int it = blockIdx.x * NW + warp; it < T * MO_D; it += gridDim.x * NW) {
        const int t = it / MO_D, d = it % MO_D;
        float acc = 0.0f;
        for (int k0 = 0; k0 < MO_TOPK; k0 += QB) {
            const unsigned char *wr[QB], *hr[QB];
            float pq[QB];
#pragma unroll
            for (int kk = 0; kk < QB; kk++) { /* past the last expert: the last one again, unused */
                const int k = k0 + kk < MO_TOPK ? k0 + kk : MO_TOPK - 1;
                wr[kk] = (const unsigned char *)w_down + ((size_t)__ldg(sel + t * MO_TOPK + k) * MO_D + d) * QRB;
                hr[kk] = (const unsigned char *)h + ((size_t)t * MO_TOPK + k) * MO_I * AES;
            }
            IG_CAT(MO_NAME, _qrows)<MO_DN_WQ, MO_DN_WG, MO_I, AES, QB, 2, false>(wr, hr, lane, pq);
#pragma unroll
            for (int kk = 0; kk < QB; kk++)
                if (k0 + kk < MO_TOPK) acc = fmaf(__ldg(wt + t * MO_TOPK + k0 + kk), ig_warp_sum(pq[kk]), acc);
        }
        if (lane == 0) resid[(size_t)t * MO_D + d] += acc;
    }
#else
    for (int it = blockIdx.x * NW + warp; it < T * MO_D; it += gridDim.x * NW) {
        const int t = it / MO_D, d = it % MO_D;
        float ps[MO_TOPK];
#pragma unroll
        for (int k = 0; k < MO_TOPK; k++) ps[k] = 0.0f;
#pragma unroll
        for (int k0 = 0; k0 < MO_TOPK; k0 += KB) {
            const unsigned char *wr[KB], *hr[KB];
#pragma unroll
            for (int kk = 0; kk < KB; kk++) {
                const int k = k0 + kk < MO_TOPK ? k0 + kk : MO_TOPK - 1;
                wr[kk] = (const unsigned char *)w_down + ((size_t)__ldg(sel + t * MO_TOPK + k) * MO_D + d) * MO_I * WES;
                hr[kk] = (const unsigned char *)h + ((size_t)t * MO_TOPK + k) * MO_I * AES;
            }
            for (int c0 = 0; c0 < PER; c0 += CB) {
                uint4 r[KB][CB];
#pragma unroll
                for (int kk = 0; kk < KB; kk++)
#pragma unroll
                    for (int j = 0; j < CB; j++) {
                        const int c = (c0 + j) * 32 + lane;
                        if (k0 + kk < MO_TOPK && c < NC) r[kk][j] = ig_ldg16(wr[kk] + (size_t)c * 16);
                    }
#pragma unroll
                for (int kk = 0; kk < KB; kk++)
#pragma unroll
                    for (int j = 0; j < CB; j++) {
                        const int c = (c0 + j) * 32 + lane;
                        if (k0 + kk >= MO_TOPK || c >= NC) continue;
                        float f[8], hv[8];
                        ig_unpack16(r[kk][j], WES, f);
                        IG_CAT(MO_NAME, _dact)<VE, AES>(hr[kk] + (size_t)c * VE * AES, hv);
#pragma unroll
                        for (int q = 0; q < VE; q++) ps[k0 + kk] = fmaf(f[q], hv[q], ps[k0 + kk]);
                    }
            }
        }
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < MO_TOPK; k++) acc = fmaf(__ldg(wt + t * MO_TOPK + k), ig_warp_sum(ps[k]), acc);
        if (lane == 0) resid[(size_t)t * MO_D + d] += acc;
    }
#endif
}

#if !MO_SHARED
extern "C" __global__ void __launch_bounds__(1024) IG_CAT(MO_NAME, _group)(int T, const int *sel, int *off, int *list) {
    __shared__ int cnt[MO_E + 1], cur[MO_E], tl[MO_E + 1];
    for (int e = threadIdx.x; e <= MO_E; e += 1024) cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < T * MO_TOPK; i += 1024) atomicAdd(&cnt[sel[i]], 1);
    __syncthreads();
    if (threadIdx.x == 0) { /* exclusive scans: the pairs, and the tensor-core kernels' row tiles */
        int a = 0, b = 0;
        for (int e = 0; e < MO_E; e++) {
            const int n = cnt[e];
            cnt[e] = a, tl[e] = b, cur[e] = 0, a += n, b += (n + IG_MO_TC_BM - 1) / IG_MO_TC_BM;
        }
        cnt[MO_E] = a, tl[MO_E] = b;
    }
    __syncthreads();
    for (int e = threadIdx.x; e <= MO_E; e += 1024) off[e] = cnt[e], off[MO_E + 1 + e] = tl[e];
    /* the order within an expert does not matter: each pair is computed alone */
    for (int i = threadIdx.x; i < T * MO_TOPK; i += 1024) list[cnt[sel[i]] + atomicAdd(&cur[sel[i]], 1)] = i;
}
#endif

/* 8 rows of R elements each (row r at w + rows[r] * R elements, WES bytes each) into shared memory,
 * as f32 (by the CTA) */
template <int R, int WES>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _stage)(const unsigned char *w, const int *rows, float *ws) {
    for (int c = threadIdx.x; c < 8 * R / (16 / WES); c += IG_MO_BLOCK) {
        const int r = c / (R / (16 / WES)), v = c % (R / (16 / WES));
        float f[8];
        ig_unpack16(ig_ldg16(w + ((size_t)rows[r] * R + (size_t)v * (16 / WES)) * WES), WES, f);
        for (int e = 0; e < 16 / WES; e++) ws[(size_t)r * R + v * (16 / WES) + e] = f[e];
    }
}

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _gu_grouped)(int T, const float *x, const int *off, const int *list, const MO_WT_ *w_gu, MO_AT_ *h) {
    constexpr int WES = MO_WBF16 ? 2 : 4;
    IG_DYN_SMEM(float, mo_ws); /* [8][MO_D]: gate rows of outputs i0..i0+3, then their up rows */
    const int e = blockIdx.y, i0 = blockIdx.x * 4, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int p0 = MO_SHARED ? 0 : off[e], np = MO_SHARED ? T : off[e + 1] - off[e];
    if (np == 0) return;
    int rows[8];
    for (int j = 0; j < 4; j++) {
        const int i = min(i0 + j, MO_I - 1), g = 32 * (i / 16) + i % 16;
        rows[j] = e * 2 * MO_I + g, rows[4 + j] = e * 2 * MO_I + g + 16;
    }
    IG_CAT(MO_NAME, _stage)<MO_D, WES>((const unsigned char *)w_gu, rows, mo_ws);
    __syncthreads();
    for (int p = warp; p < np; p += IG_MO_BLOCK / 32) {
        const int tk = MO_SHARED ? p : list[p0 + p], t = tk / MO_TOPK;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int c = lane; c < MO_D; c += 32) {
            const float xv = ig_mo_round(x[(size_t)t * MO_D + c], MO_XBF16);
#pragma unroll
            for (int r = 0; r < 8; r++) acc[r] = fmaf(mo_ws[r * MO_D + c], xv, acc[r]);
        }
#pragma unroll
        for (int r = 0; r < 8; r++) acc[r] = ig_warp_sum(acc[r]);
        if (lane < 4 && i0 + lane < MO_I) {
            float o = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (lane == j) o = ig_glu(acc[j], acc[4 + j], false);
            if (MO_XBF16) ((unsigned short *)h)[(size_t)tk * MO_I + i0 + lane] = ig_f32_to_h(o);
            else ((float *)h)[(size_t)tk * MO_I + i0 + lane] = o;
        }
    }
}

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK)
IG_CAT(MO_NAME, _down_grouped)(int T, const MO_AT_ *h, const int *off, const int *list, const float *wt,
                               const MO_WT_ *w_down, float *y) {
    constexpr int WES = MO_WBF16 ? 2 : 4;
    IG_DYN_SMEM(float, mo_ws); /* [8][MO_I]: down rows d0..d0+7 of the expert */
    const int e = blockIdx.y, d0 = blockIdx.x * 8, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int p0 = MO_SHARED ? 0 : off[e], np = MO_SHARED ? T : off[e + 1] - off[e];
    if (np == 0) return;
    int rows[8];
    for (int j = 0; j < 8; j++) rows[j] = e * MO_D + min(d0 + j, MO_D - 1);
    IG_CAT(MO_NAME, _stage)<MO_I, WES>((const unsigned char *)w_down, rows, mo_ws);
    __syncthreads();
    for (int p = warp; p < np; p += IG_MO_BLOCK / 32) {
        const int tk = MO_SHARED ? p : list[p0 + p];
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int c = lane; c < MO_I; c += 32) {
            const float hv = MO_XBF16 ? ig_h_to_f32(((const unsigned short *)h)[(size_t)tk * MO_I + c])
                                      : ((const float *)h)[(size_t)tk * MO_I + c];
#pragma unroll
            for (int r = 0; r < 8; r++) acc[r] = fmaf(mo_ws[r * MO_I + c], hv, acc[r]);
        }
#pragma unroll
        for (int r = 0; r < 8; r++) acc[r] = ig_warp_sum(acc[r]);
        if (lane < 8 && d0 + lane < MO_D) {
            float o = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (lane == j) o = acc[j];
            y[(size_t)tk * MO_D + d0 + lane] = wt[tk] * o;
        }
    }
}

extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK) IG_CAT(MO_NAME, _sum)(int T, const float *y, float *resid) {
    const int d = blockIdx.x * IG_MO_BLOCK + threadIdx.x, t = blockIdx.y;
    if (d >= MO_D || t >= T) return;
    float s = 0.0f;
    for (int k = 0; k < MO_TOPK; k++) s += y[((size_t)t * MO_TOPK + k) * MO_D + d];
    resid[(size_t)t * MO_D + d] += s;
}

/* ---- the expert-grouped products on tensor cores (16-bit weights and rows, sm_80+) ----
 * A CTA multiplies one row tile (IG_MO_TC_BM = 128 pairs of one expert) by IG_MO_TC_BN = 128
 * weight rows of that expert: IG_MO_TC_WM x IG_MO_TC_WN (2 x 2) warps, each 64 x 64 of mma.sync
 * m16n8k16 (f32 accumulate), K in steps of IG_MO_TC_BK through IG_MO_TC_NST (4) cp.async stages;
 * the pairs' rows are gathered by index. At prefill sizes the products are bound by L2 -> SM
 * traffic and latency (every CTA re-reads its pairs' rows and its expert's weight rows: the traffic
 * per FLOP is (BM + BN) / (BM BN)); SPEC.md has the variants measured.
 * Tiles of the routed form are numbered across experts (off[MO_E + 1 + e]: expert e's first tile,
 * written by _group); a CTA finds its expert by binary search. */
#if MO_WBF16 && MO_XBF16 && MO_D % IG_MO_TC_BK == 0 && MO_I % IG_MO_TC_BK == 0

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
/* The row tile's pairs and the A rows they read: tks[r] the pair index (-1 past np), rows[r] row
 * tk / DIV of src (rows of STRIDE elements: x for gate/up, one row per token; h for down, one per pair). */
template <int DIV, int STRIDE>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _gather)(const int *list, int p0, int np, const unsigned short *src,
                                                                int *tks, const unsigned short **rows) {
    for (int r = threadIdx.x; r < IG_MO_TC_BM; r += IG_MO_TC_THREADS) {
        const int tk = r < np ? (MO_SHARED ? p0 + r : list[p0 + r]) : -1;
        tks[r] = tk, rows[r] = tk >= 0 ? src + (size_t)(tk / DIV) * STRIDE : nullptr;
    }
    __syncthreads();
}
/* This CTA's row tile: expert *e, its pairs [*p0, *p0 + *np); 0 when the tile is past the last. */
static __device__ __forceinline__ int IG_CAT(MO_NAME, _tile)(int T, const int *off, int *e, int *p0, int *np) {
    const int tile = blockIdx.y;
#if MO_SHARED
    (void)off;
    *e = 0, *p0 = tile * IG_MO_TC_BM, *np = min(IG_MO_TC_BM, T - *p0);
    return *p0 < T;
#else
    (void)T;
    const int *toff = off + MO_E + 1;
    if (tile >= toff[MO_E]) return 0;
    int lo = 0, hi = MO_E; /* the last expert whose first tile is <= tile: toff[lo] <= tile < toff[lo + 1] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (toff[mid] <= tile) lo = mid;
        else hi = mid;
    }
    *e = lo, *p0 = off[lo] + (tile - toff[lo]) * IG_MO_TC_BM;
    *np = min(IG_MO_TC_BM, off[lo + 1] - *p0);
    return 1;
#endif
}

/* The global rows a thread copies a 16-byte chunk of, AR of the tile's gathered rows a[lr + RS j]
 * (null: zeros, nothing read; ab their byte counts) and BR weight rows w + (n0 + lr + RS j) KD
 * (rows >= NR: zeros), for _tc_loop's cp.async */
template <int AR, int BR, int RS, int KD, int NR>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _rowptrs)(const unsigned short *const *a, const unsigned short *w, int n0,
                                                                  int lr, const unsigned short **ar, int *ab,
                                                                  const unsigned short **br, int *bb) {
#pragma unroll
    for (int j = 0; j < AR; j++) {
        ar[j] = a[lr + RS * j], ab[j] = ar[j] ? 16 : 0;
        if (!ar[j]) ar[j] = w; /* a valid address; nothing is read */
    }
#pragma unroll
    for (int j = 0; j < BR; j++) {
        const int n = n0 + lr + RS * j;
        br[j] = w + (size_t)min(n, NR - 1) * KD, bb[j] = n < NR ? 16 : 0;
    }
}
#endif

/* acc[4][8][4] (this warp's 64 x 64 of the tile: 4 row tiles of 16 x 8 column tiles of 8) = rows
 * (a[r] + k, r < BM: the tile's gathered rows; null: zeros) x weight rows w + (n0 + n) * KD, n < BN
 * (rows >= NR read as zeros), over k < KD. Warps whose 64 rows are all past np (a partial tile)
 * skip the fragments and mma but keep the loads and barriers. As / Bs: the dynamic shared memory's
 * NST stages of BM and BN rows of LD elements. */
template <int KD, int NR>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _tc_loop)(const unsigned short *const *a, const unsigned short *w,
                                                                  int n0, int np, float (*acc)[8][4], unsigned short *As,
                                                                  unsigned short *Bs) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
    constexpr int BM = IG_MO_TC_BM, BN = IG_MO_TC_BN, BK = IG_MO_TC_BK, LD = IG_MO_TC_LD, KT = KD / BK;
    constexpr int NST = IG_MO_TC_NST, NT = IG_MO_TC_THREADS, RS = NT / 4, AR = BM / RS, BR = BN / RS;
    static_assert(KD % BK == 0 && BK == 32 && BM == 64 * IG_MO_TC_WM && BN == 64 * IG_MO_TC_WN && NT == 32 * IG_MO_TC_WM * IG_MO_TC_WN &&
                      BM % RS == 0 && BN % RS == 0 && NST >= 2,
                  "tile loads: warps of 64 x 64, 16-byte chunks, 4 a row of BK");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / IG_MO_TC_WN, wn = warp % IG_MO_TC_WN;
    const int lr = tid >> 2, lc = (tid & 3) * 8; /* this thread's chunks: rows lr + RS j, column lc */
    const bool live = wm * 64 < np;
    const unsigned short *ar[AR], *br[BR];
    int ab[AR], bb[BR];
    IG_CAT(MO_NAME, _rowptrs)<AR, BR, RS, KD, NR>(a, w, n0, lr, ar, ab, br, bb);
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 8; ni++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[mi][ni][j] = 0.0f;
    auto load = [&](int kt, int st) {
        const int k0 = kt * BK + lc;
#pragma unroll
        for (int j = 0; j < AR; j++) ig_cp16(ig_smem_addr(As + (st * BM + lr + RS * j) * LD + lc), ar[j] + k0, ab[j]);
#pragma unroll
        for (int j = 0; j < BR; j++) ig_cp16(ig_smem_addr(Bs + (st * BN + lr + RS * j) * LD + lc), br[j] + k0, bb[j]);
        ig_cp_commit();
    };
    /* NST stages: a group committed every step (empty past the last k tile), so waiting for all
     * but the NST - 1 newest leaves tile kt landed */
#pragma unroll
    for (int s = 0; s < NST - 1; s++) {
        if (s < KT) load(s, s);
        else ig_cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        const int st = kt % NST;
        if (kt + NST - 1 < KT) load(kt + NST - 1, (kt + NST - 1) % NST); /* the stage computed at step kt - 1 */
        else ig_cp_commit();
        ig_cp_wait<NST - 1>();
        __syncthreads();
        if (live) {
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                unsigned af[4][4], bf[4][4];
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
                    ig_ldsm4(ig_smem_addr(As + (st * BM + wm * 64 + mi * 16 + (lane & 15)) * LD + kk + (lane >> 4) * 8), af[mi]);
#pragma unroll
                for (int nj = 0; nj < 4; nj++)
                    ig_ldsm4(ig_smem_addr(Bs + (st * BN + wn * 64 + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + kk +
                                           ((lane >> 3) & 1) * 8),
                                bf[nj]);
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
#pragma unroll
                    for (int ni = 0; ni < 8; ni++) ig_mma16(acc[mi][ni], af[mi], bf[ni >> 1][(ni & 1) * 2], bf[ni >> 1][(ni & 1) * 2 + 1]);
            }
        }
        __syncthreads();
    }
#endif
}

/* h[pair] = SwiGLU of its expert's gate/up rows: grid (IG_MO_TC_GU_GRID_X(I), IG_MO_TC_GRID_Y(T, K, E)),
 * dynamic smem IG_MO_TC_SMEM */
extern "C" __global__ void __launch_bounds__(IG_MO_TC_THREADS)
IG_CAT(MO_NAME, _gu_tc)(int T, const unsigned short *xb, const int *off, const int *list, const unsigned short *w_gu,
                        unsigned short *h) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
    constexpr int BM = IG_MO_TC_BM;
    IG_DYN_SMEM(uint4, mo_tc_dyn);
    unsigned short *As = (unsigned short *)mo_tc_dyn, *Bs = As + IG_MO_TC_NST * BM * IG_MO_TC_LD;
    __shared__ const unsigned short *rows[BM];
    __shared__ int tks[BM];
    int e, p0, np;
    if (!IG_CAT(MO_NAME, _tile)(T, off, &e, &p0, &np)) return;
    IG_CAT(MO_NAME, _gather)<MO_TOPK, MO_D>(list, p0, np, xb, tks, rows);
    const int n0 = blockIdx.x * IG_MO_TC_BN;
    float acc[4][8][4];
    IG_CAT(MO_NAME, _tc_loop)<MO_D, 2 * MO_I>(rows, w_gu + (size_t)e * 2 * MO_I * MO_D, n0, np, acc, As, Bs);
    /* the warp's 64 packed rows are two groups of 16 gate rows (n-tiles 4 gq + 0, 1) and their 16
     * up rows (4 gq + 2, 3): the packing's interleave */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp / IG_MO_TC_WN, wn = warp % IG_MO_TC_WN;
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int gq = 0; gq < 2; gq++) {
        const int c0 = n0 + wn * 64 + 32 * gq; /* this group's first packed row */
        if (c0 >= 2 * MO_I) break;
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int r = wm * 64 + mi * 16 + g + 8 * hf;
                if (r >= np) continue;
                const int tk = tks[r];
#pragma unroll
                for (int ni = 0; ni < 2; ni++) {
                    const int o = c0 / 2 + ni * 8 + 2 * q;
                    const float *gv = acc[mi][4 * gq + ni], *uv = acc[mi][4 * gq + ni + 2];
                    const float v0 = ig_glu(gv[2 * hf], uv[2 * hf], false), v1 = ig_glu(gv[2 * hf + 1], uv[2 * hf + 1], false);
                    *(unsigned *)(h + (size_t)tk * MO_I + o) = ig_pack2_h(v0, v1);
                }
            }
    }
#endif
}

/* y[pair] = its weight x its expert's down projection of h[pair]: grid (IG_MO_TC_DN_GRID_X(D),
 * IG_MO_TC_GRID_Y(T, K, E)), dynamic smem IG_MO_TC_SMEM */
extern "C" __global__ void __launch_bounds__(IG_MO_TC_THREADS)
IG_CAT(MO_NAME, _down_tc)(int T, const unsigned short *h, const int *off, const int *list, const float *wt,
                          const unsigned short *w_down, float *y) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
    constexpr int BM = IG_MO_TC_BM;
    IG_DYN_SMEM(uint4, mo_tc_dyn);
    unsigned short *As = (unsigned short *)mo_tc_dyn, *Bs = As + IG_MO_TC_NST * BM * IG_MO_TC_LD;
    __shared__ const unsigned short *rows[BM];
    __shared__ int tks[BM];
    int e, p0, np;
    if (!IG_CAT(MO_NAME, _tile)(T, off, &e, &p0, &np)) return;
    IG_CAT(MO_NAME, _gather)<1, MO_I>(list, p0, np, h, tks, rows);
    const int n0 = blockIdx.x * IG_MO_TC_BN;
    float acc[4][8][4];
    IG_CAT(MO_NAME, _tc_loop)<MO_I, MO_D>(rows, w_down + (size_t)e * MO_D * MO_I, n0, np, acc, As, Bs);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp / IG_MO_TC_WN, wn = warp % IG_MO_TC_WN;
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            const int r = wm * 64 + mi * 16 + g + 8 * hf;
            if (r >= np) continue;
            const int tk = tks[r];
            const float wk = wt[tk];
#pragma unroll
            for (int ni = 0; ni < 8; ni++) {
                const int d = n0 + wn * 64 + ni * 8 + 2 * q;
                if (d < MO_D)
                    *(float2 *)(y + (size_t)tk * MO_D + d) = make_float2(wk * acc[mi][ni][2 * hf], wk * acc[mi][ni][2 * hf + 1]);
            }
        }
#endif
}

/* ---- the same products on Hopper's warpgroup tensor cores (sm_90a; wgmma.cuh, mbar.cuh) ----
 * Warp-specialized: a CTA of IG_MO_WG_THREADS is two consumer warpgroups and a producer warpgroup,
 * which gives them its registers (setmaxnreg) and whose thread 0 alone loads every tile by TMA.
 * A CTA is the row tile of _gu_tc / _down_tc (IG_MO_TC_BM = 128 pairs of one expert) x IG_MO_WG_BN
 * = 256 weight rows; consumer warpgroup g multiplies pairs 64 g .. 64 g + 63 by all 256 rows, one
 * wgmma m64n256k16 per 16 of K, both operands read by the tensor cores from shared memory, 128 f32
 * accumulators a thread. K in steps of 64 (a swizzled tile row of 128 bytes) through IG_MO_WG_NST
 * stages; a stage's "full" mbarrier completes when its two boxes have landed, its "empty" one when
 * each consumer warp has seen its products of that stage done (one group stays in flight, so a
 * stage goes back one step after its products were issued). No block barrier in the loop.
 * TMA needs the A rows of a tile to be consecutive, so the pairs' rows are in _group's order:
 * gate/up reads _xgather's copy of each pair's token row, and writes h in that order, which down
 * then reads as it lies (the mma.sync kernels index both by pair). Rows and columns past a
 * tensor's end land as zeros; rows of the next expert in a partial tile are multiplied and never
 * stored (each output row depends only on its own A row). A warpgroup whose 64 pairs are all past
 * the tile's np skips its products. */
#if IG_WG
/* the stages' barriers: [0] full (one arrival: the producer's expect), [1] empty (the 8 consumer warps) */
typedef unsigned long long ig_mo_wg_bars[2][IG_MO_WG_NST];
static __device__ __forceinline__ void IG_CAT(MO_NAME, _wg_init)(ig_mo_wg_bars &bars) {
    if (threadIdx.x == 0) ig_ring_init(bars, 8);
    __syncthreads();
}
/* the producer (one thread): each step's A box (64 columns x 128 rows from row arow of am) and B box
 * (64 x 256 from row brow of bm) into its stage, once the consumers gave that stage back */
template <int KD>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _wg_produce)(const ig_tmap *am, const ig_tmap *bm, int arow, int brow,
                                                                     unsigned sbase, ig_mo_wg_bars &bars) {
    constexpr int BK = IG_MO_WG_BK, KT = (KD + BK - 1) / BK;
    constexpr unsigned STAGE = (IG_MO_TC_BM + IG_MO_WG_BN) * 128;
    for (int kt = 0; kt < KT; kt++) {
        const int st = ig_ring_fill(bars, kt, STAGE);
        const unsigned s0 = sbase + (unsigned)st * STAGE;
        ig_tma_load2(s0, am, kt * BK, arow, &bars[0][st]);
        ig_tma_load2(s0 + IG_MO_TC_BM * 128, bm, kt * BK, brow, &bars[0][st]);
    }
}
/* a consumer warpgroup: acc (this thread's 128 of its warpgroup's 64 x 256) over k < KD */
template <int KD>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _wg_consume)(int np, float *acc, unsigned sbase, ig_mo_wg_bars &bars) {
    constexpr int BK = IG_MO_WG_BK, KT = (KD + BK - 1) / BK, NST = IG_MO_WG_NST;
    constexpr unsigned STAGE = (IG_MO_TC_BM + IG_MO_WG_BN) * 128;
    static_assert(IG_MO_TC_BM == 128 && BK == 64 && KD % 8 == 0, "two warpgroups of 64 pairs, 128-byte tile rows");
    const int wg = (int)threadIdx.x >> 7, lane = threadIdx.x & 31;
    /* uniform by a broadcast: ptxas serializes products under a branch it cannot prove uniform */
    const bool live = __shfl_sync(0xffffffffu, (unsigned)(wg * 64 < np), 0) != 0;
#pragma unroll
    for (int i = 0; i < 128; i++) acc[i] = 0.0f;
    for (int kt = 0; kt < KT; kt++) {
        const int st = ig_ring_take(bars, kt);
        if (live) {
            const unsigned sa = sbase + (unsigned)st * STAGE + (unsigned)wg * 64 * 128, sb = sbase + (unsigned)st * STAGE + IG_MO_TC_BM * 128;
            ig_wg_fence();
#pragma unroll
            for (int j = 0; j < BK / 16; j++) ig_wg_mma_ss<256>(acc, ig_wg_desc(sa + 32 * j), ig_wg_desc(sb + 32 * j));
            ig_wg_commit();
            ig_wg_wait<1>();
        }
        __syncwarp();
        if (kt > 0 && lane == 0) ig_mb_arrive(&bars[1][(kt - 1) % NST]); /* step kt - 1's products are done */
    }
    ig_wg_wait<0>();
    ig_wg_hold<128>(acc);
}
#endif

/* the dynamic shared memory's first address aligned to 1024 (the swizzled tiles') */
#define IG_MO_WG_SMEM_ALIGNED(name)                                                                                    \
    IG_DYN_SMEM(uint4, name##_dyn);                                                                                    \
    unsigned char *name = (unsigned char *)name##_dyn + ((1024u - (ig_smem_addr(name##_dyn) & 1023u)) & 1023u)
/* registers a consumer thread (setmaxnreg): the producer warpgroup keeps 40 */
#define IG_MO_WG_CREGS ((65536 - 128 * 40) / 256 / 8 * 8)

#if IG_WG
/* One CTA of _gu_wg / _down_wg: its row tile (nothing where past the last), the barriers, then the
 * producer warpgroup's loads (A rows from the tile's first pair p0 of am, B rows from e EROWS + n0 of
 * bm: expert e's stack) and the consumers' products over k < KD, which each consumer thread hands to
 * epi(acc, p0, np, n0). Each side runs its own code to the end: ptxas honours setmaxnreg only so. */
template <int KD, int EROWS, typename Epi>
static __device__ __forceinline__ void IG_CAT(MO_NAME, _wg_run)(int T, const int *off, const ig_tmap *am, const ig_tmap *bm, Epi epi) {
    IG_MO_WG_SMEM_ALIGNED(sm);
    __shared__ ig_mo_wg_bars bars;
    int e, p0, np;
    if (!IG_CAT(MO_NAME, _tile)(T, off, &e, &p0, &np)) return;
    const int n0 = blockIdx.x * IG_MO_WG_BN;
    IG_CAT(MO_NAME, _wg_init)(bars);
    if (threadIdx.x >= 256) {
        ig_setmaxnreg_dec<40>();
        if (threadIdx.x == 256) IG_CAT(MO_NAME, _wg_produce)<KD>(am, bm, p0, e * EROWS + n0, ig_smem_addr(sm), bars);
    } else {
        ig_setmaxnreg_inc<IG_MO_WG_CREGS>();
        float acc[128];
        IG_CAT(MO_NAME, _wg_consume)<KD>(np, acc, ig_smem_addr(sm), bars);
        epi(acc, p0, np, n0);
    }
}
#endif

/* h[grouped pair] = SwiGLU of its expert's gate/up rows: grid (IG_MO_WG_GU_GRID_X(I), IG_MO_TC_GRID_Y(T,
 * K, E)), IG_MO_WG_THREADS threads, dynamic smem IG_MO_WG_SMEM; xm: the pairs' token rows in grouped
 * order ([T K][D], boxes of 128 rows; the shared form: the T token rows), wm: the gate/up stack
 * ([E 2I][D], boxes of 256 rows). Empty where IG_WG is 0 (the host launches it only where ig_wg_built) */
extern "C" __global__ void __launch_bounds__(IG_MO_WG_THREADS, 1)
IG_CAT(MO_NAME, _gu_wg)(int T, const int *off, unsigned short *h, const __grid_constant__ ig_tmap xm,
                        const __grid_constant__ ig_tmap wm) {
#if IG_WG
    IG_CAT(MO_NAME, _wg_run)<MO_D, 2 * MO_I>(T, off, &xm, &wm, [&](const float *acc, int p0, int np, int n0) {
        /* the 256 packed rows are 8 groups of 16 gate rows (8-column tiles 4 gq + 0, 1) and their 16 up
         * rows (4 gq + 2, 3): the packing's interleave */
        const int t = threadIdx.x & 127, wg = threadIdx.x >> 7, g = (t & 31) >> 2, q = t & 3, rw = wg * 64 + 16 * (t >> 5) + g;
#pragma unroll
        for (int gq = 0; gq < IG_MO_WG_BN / 32; gq++) {
            const int c0 = n0 + 32 * gq; /* this group's first packed row */
            if (c0 < 2 * MO_I) {
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = rw + 8 * hf;
                    if (r >= np) continue;
#pragma unroll
                    for (int ni = 0; ni < 2; ni++) {
                        const int o = c0 / 2 + ni * 8 + 2 * q, gi = (4 * gq + ni) * 4 + 2 * hf, ui = gi + 8;
                        const float v0 = ig_glu(acc[gi], acc[ui], false), v1 = ig_glu(acc[gi + 1], acc[ui + 1], false);
                        *(unsigned *)(h + (size_t)(p0 + r) * MO_I + o) = ig_pack2_h(v0, v1);
                    }
                }
            }
        }
    });
#else
    (void)T, (void)off, (void)h, (void)xm, (void)wm;
#endif
}

/* y[pair] = its weight x its expert's down projection of h[grouped pair]: grid (IG_MO_WG_DN_GRID_X(D),
 * IG_MO_TC_GRID_Y(T, K, E)), as _gu_wg; hm: h in grouped order ([T K][I], boxes of 128 rows), wm: the
 * down stack ([E D][I], boxes of 256 rows) */
extern "C" __global__ void __launch_bounds__(IG_MO_WG_THREADS, 1)
IG_CAT(MO_NAME, _down_wg)(int T, const int *off, const int *list, const float *wt, float *y, const __grid_constant__ ig_tmap hm,
                          const __grid_constant__ ig_tmap wm) {
#if IG_WG
    IG_CAT(MO_NAME, _wg_run)<MO_I, MO_D>(T, off, &hm, &wm, [&](const float *acc, int p0, int np, int n0) {
        const int t = threadIdx.x & 127, wg = threadIdx.x >> 7, g = (t & 31) >> 2, q = t & 3, rw = wg * 64 + 16 * (t >> 5) + g;
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            const int r = rw + 8 * hf;
            if (r >= np) continue;
            const int tk = MO_SHARED ? p0 + r : list[p0 + r];
            const float wk = wt[tk];
#pragma unroll
            for (int ni = 0; ni < IG_MO_WG_BN / 8; ni++) {
                const int d = n0 + ni * 8 + 2 * q;
                if (d < MO_D) *(float2 *)(y + (size_t)tk * MO_D + d) = make_float2(wk * acc[ni * 4 + 2 * hf], wk * acc[ni * 4 + 2 * hf + 1]);
            }
        }
    });
#else
    (void)T, (void)off, (void)list, (void)wt, (void)y, (void)hm, (void)wm;
#endif
}
#undef IG_MO_WG_SMEM_ALIGNED
#undef IG_MO_WG_CREGS

#if !MO_SHARED
/* xg[p] = the token row of grouped pair p (row list[p] / K of x), rounded to the 16-bit type: _gu_wg's
 * A rows, one after another as TMA loads them. A thread a 16-byte chunk of an output row (8 columns);
 * grid IG_MO_XG_GRID(T, K, D) */
extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK) IG_CAT(MO_NAME, _xgather)(int T, const float *x, const int *list,
                                                                                   unsigned short *xg) {
    constexpr int CH = MO_D / 8;
    static_assert(MO_D % 8 == 0, "rows of 16-byte chunks");
    const long long i = (long long)blockIdx.x * IG_MO_BLOCK + threadIdx.x;
    if (i >= (long long)T * MO_TOPK * CH) return;
    const float4 *px = (const float4 *)(x + (size_t)(__ldg(list + i / CH) / MO_TOPK) * MO_D + (i % CH) * 8);
    const float4 a = px[0], b = px[1];
    *(uint4 *)(xg + (size_t)i * 8) = make_uint4(ig_pack2_h(a.x, a.y), ig_pack2_h(a.z, a.w), ig_pack2_h(b.x, b.y), ig_pack2_h(b.z, b.w));
}
#endif

/* xb[t] = x[t] rounded to the 16-bit type (the tensor-core gate/up's rows): grid (IG_MO_SUM_GRID_X(D), T) */
extern "C" __global__ void __launch_bounds__(IG_MO_BLOCK) IG_CAT(MO_NAME, _xround)(int T, const float *x, unsigned short *xb) {
    const int d = blockIdx.x * IG_MO_BLOCK + threadIdx.x, t = blockIdx.y;
    if (d < MO_D && t < T) xb[(size_t)t * MO_D + d] = ig_f32_to_h(x[(size_t)t * MO_D + d]);
}
#endif /* MO_WBF16 && MO_XBF16 && MO_D, MO_I multiples of IG_MO_TC_BK */

#undef MO_WT_
#undef MO_AT_
#undef MO_GWT_
#undef MO_DWT_
#undef MO_WQ
#undef MO_WG
#undef MO_DN_WQ
#undef MO_DN_WG
#undef MO_NAME
#undef MO_D
#undef MO_E
#undef MO_TOPK
#undef MO_I
#undef MO_NORM
#undef MO_WBF16
#undef MO_XBF16
#undef MO_SHARED
