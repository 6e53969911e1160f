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
 *   route: grid (IG_MO_ROUTE_GRID_X(T) = T), block IG_MO_BLOCK = 256, smem 0
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
 * Not yet: tensor cores for the grouped products, and the persistent decode kernel.
 */
#include "common.cuh"

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

#ifndef IG_MO_HELPERS
#define IG_MO_HELPERS
/* x (f32, n elements) rounded to the 16-bit type when bf, as the CPU's ig_store_row */
IG_DEV float ig_mo_round(float v, bool bf) { return bf ? ig_h_to_f32(ig_f32_to_h(v)) : v; }
/* sum over a row of n (n % 8 == 0) of w (es bytes an element) times xs (f32, shared), by one warp */
IG_DEV float ig_mo_dot(const unsigned char *w, int es, const float *xs, int n) {
    const int lane = threadIdx.x & 31, ve = 16 / es;
    float s = 0.0f;
    for (int c = lane; c < n / ve; c += 32) {
        float f[8];
        ig_unpack16(ig_ldg16(w + (size_t)c * 16), es, f);
        for (int e = 0; e < ve; e++) s = fmaf(f[e], xs[c * ve + e], s);
    }
    return ig_warp_sum(s);
}
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
    const float gs = ig_mo_dot(we + (size_t)g * MO_D * WES, WES, xs, MO_D);
    const float us = ig_mo_dot(we + (size_t)(g + 16) * MO_D * WES, WES, xs, MO_D);
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
    float acc = 0.0f;
    for (int k = 0; k < MO_TOPK; k++) { /* expert order of the selection */
        const int e = sel[t * MO_TOPK + k];
        const unsigned char *wr = (const unsigned char *)w_down + ((size_t)e * MO_D + d) * MO_I * WES;
        acc = fmaf(wt[t * MO_TOPK + k], ig_mo_dot(wr, WES, hs + k * MO_I, MO_I), acc);
    }
    if ((threadIdx.x & 31) == 0) resid[(size_t)t * MO_D + d] += acc;
}

#if !MO_SHARED
extern "C" __global__ void __launch_bounds__(1024) IG_CAT(MO_NAME, _group)(int T, const int *sel, int *off, int *list) {
    __shared__ int cnt[MO_E + 1], cur[MO_E];
    for (int e = threadIdx.x; e <= MO_E; e += 1024) cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < T * MO_TOPK; i += 1024) atomicAdd(&cnt[sel[i]], 1);
    __syncthreads();
    if (threadIdx.x == 0) { /* exclusive scan */
        int a = 0;
        for (int e = 0; e < MO_E; e++) {
            const int n = cnt[e];
            cnt[e] = a, cur[e] = 0, a += n;
        }
        cnt[MO_E] = a;
    }
    __syncthreads();
    for (int e = threadIdx.x; e <= MO_E; e += 1024) off[e] = cnt[e];
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
    extern __shared__ float mo_ws[]; /* [8][MO_D]: gate rows of outputs i0..i0+3, then their up rows */
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
    extern __shared__ float mo_ws[]; /* [8][MO_I]: down rows d0..d0+7 of the expert */
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

#undef MO_WT_
#undef MO_AT_
#undef MO_NAME
#undef MO_D
#undef MO_E
#undef MO_TOPK
#undef MO_I
#undef MO_NORM
#undef MO_WBF16
#undef MO_XBF16
#undef MO_SHARED
