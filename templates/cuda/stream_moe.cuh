/* stream_moe.cuh — a mixture-of-experts layer's MLP in the persistent decode kernel
 * (decode_layers.cu with DL_MOE), on stream.cuh's ring: the router, then only the token's selected
 * experts streamed, as three phases in place of the dense layer's gate/up and down:
 *
 *   route   every CTA takes the RMSNorm of the residual itself (f32, not rounded: moe.cu's router
 *           reads the same values); CTA b computes the logits of experts b, b + G, ... from the f32
 *           router rows (which the producer prefetched into L2 during the o phase) into lg; a grid
 *           barrier; then every CTA takes the softmax and top-k itself (moe_select.cuh, the same
 *           rule as moe.cu) into st->msel / st->mwt and hands the experts to its producer through
 *           st->selb (the one place the producer waits on the step's activations).
 *   gate/up one stream.cuh phase over a virtual matrix of TOPK x 2I rows: row r is row r % 2I of
 *           expert msel[r / 2I]'s packed gate/up rows (interleaved by 16, as moe.cu's), so the
 *           ordinary SwiGLU epilogue writes h [TOPK][I], the selected experts' activations back
 *           to back, unweighted (moe.cu's _dgu writes the same).
 *   down    one residual-add phase of D rows over K = TOPK x I: row d is the concatenation of row d
 *           of each selected expert's down matrix (a slot filled by one copy per expert segment),
 *           x is h, and each window's sums are scaled by its expert's routing weight (SEGW = I in
 *           ig_st_gemv_tc) before they join the row's: resid[d] += sum_k wt_k (down_k[d] . h_k),
 *           moe.cu's _ddown arithmetic up to the order of the f32 sums.
 *
 * A shared expert of IS rows (Qwen2-MoE's; IS 0: none) is one more segment of both phases: its
 * 2 IS gate/up rows after the routed ones, its down row after theirs (h [TOPK I + IS]), weighted by
 * sigmoid(x . gate), which every CTA computes in the route phase (st->mwt[TOPK]; moe.cu's shared
 * form). (A model with dense layers among MoE ones imports each dense MLP as such a shared expert
 * beside zero experts: it runs here too.)
 *
 * The producer waits for the selection before the gate/up rows, so the ring runs dry across the
 * route phase (one cold start a MoE layer, in place of the per-op path's two launches, their ramps
 * and _dgu's grid-wide wait). Requirements (codegen's plan_moe_layers): bf16 experts, I and IS
 * multiples of 128 (a window of down's x lies in one expert), TOPK <= IG_ST_MOEK, TOPK x I + IS a row
 * of at most two slots (stream.cuh's SPLIT), E <= 256.
 */
#ifndef IG_CUDA_STREAM_MOE_CUH
#define IG_CUDA_STREAM_MOE_CUH

#include "moe_select.cuh"
#include "stream.cuh"

/* The CTA's dot of row (f32 [K], global memory) with its normed x (xv: this thread's float4 chunks),
 * reduced in warp order through red (IG_ST_CWARPS floats of psum, not in use by the previous call:
 * callers alternate two halves); thread 0 gets the sum. */
template <int K>
IG_DEV float ig_st_rdot(const float *row, const float4 *xv, float *red) {
    constexpr int K4 = K / 4, J = (K4 + IG_ST_CTHREADS - 1) / IG_ST_CTHREADS;
    const int t = threadIdx.x;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int c = t + IG_ST_CTHREADS * j;
        if (c >= K4) continue;
        const float4 b = __ldg((const float4 *)row + c);
        s = fmaf(xv[j].x, b.x, fmaf(xv[j].y, b.y, fmaf(xv[j].z, b.z, fmaf(xv[j].w, b.w, s))));
    }
    s = ig_warp_sum(s);
    if ((t & 31) == 0) red[t >> 5] = s;
    ig_st_cbar();
    float a = 0.0f;
    if (t == 0)
#pragma unroll
        for (int w = 0; w < IG_ST_CWARPS; w++) a += red[w];
    return a;
}

/* The route phase (consumer threads): x the f32 residual [K] (complete after the grid barrier this
 * starts with), gamma / eps the layer's RMSNorm, router f32 [E][K], lg f32 [E] global scratch;
 * sgate f32 [K]: the shared expert's gate (or null). */
template <int K, int E, int TOPK, bool NORM>
IG_DEV void ig_st_route(ig_st *st, const float *x, const float *gamma, float eps, const float *router, float *lg,
                        const float *sgate, unsigned long long *bar) {
    static_assert(K % 4 == 0 && TOPK <= IG_ST_MOEK && E <= 256, "route: K % 4, TOPK <= IG_ST_MOEK, E <= 256");
    constexpr int K4 = K / 4, J = (K4 + IG_ST_CTHREADS - 1) / IG_ST_CTHREADS;
    const int t = threadIdx.x, warp = t >> 5, G = (int)gridDim.x;
    ig_st_grid_sync(st, bar, gridDim.x); /* the residual is the o phase's */
    float4 xv[J];
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int c = t + IG_ST_CTHREADS * j;
        xv[j] = c < K4 ? __ldcg((const float4 *)x + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    const float scale = ig_st_rms_scale<J>(st, xv, K, eps);
#pragma unroll
    for (int j = 0; j < J; j++) { /* x * s * gamma, as rmsnorm.cu, in f32 */
        const int c = t + IG_ST_CTHREADS * j;
        if (c >= K4) continue;
        const float4 g = __ldg((const float4 *)gamma + c);
        xv[j] = make_float4(xv[j].x * scale * g.x, xv[j].y * scale * g.y, xv[j].z * scale * g.z, xv[j].w * scale * g.w);
    }
    /* psum's two halves in turn: one barrier a dot */
    if (sgate) { /* every CTA: the shared expert's weight */
        const float s = ig_st_rdot<K>(sgate, xv, st->psum + IG_ST_CWARPS);
        if (t == 0) st->mwt[TOPK] = 1.0f / (1.0f + expf(-s));
    }
    for (int e = blockIdx.x, n = 0; e < E; e += G, n++) { /* this CTA's experts */
        const float s = ig_st_rdot<K>(router + (size_t)e * K, xv, st->psum + (n & 1) * IG_ST_CWARPS);
        if (t == 0) lg[e] = s;
    }
    ig_st_grid_sync(st, bar, gridDim.x); /* every expert's logit is out */
    if (warp == 0) ig_moe_select<E, TOPK, NORM>(lg, st->msel, st->mwt);
    ig_st_cbar();
    if (t == 0) ig_mb_arrive(&st->selb); /* the experts, to this CTA's producer */
}

/* The producer's part of a MoE layer after its o rows: wait for the selection (*nsel counts the
 * MoE layers it has waited for), then queue this CTA's rows of the gate/up phase (rot_gu; w_gu
 * [E][2I][K] bf16, then the shared expert's s_gu [2IS][K]; gamma pf into L2 first) and of the down
 * phase (rot_dn; w_dn [E][K][I], the shared expert's s_dn [K][IS]). */
template <int K, int TOPK, int I, int IS>
IG_DEV void ig_st_produce_moe(ig_st *st, unsigned char *ring, const ig_bf16 *w_gu, const ig_bf16 *w_dn,
                              const ig_bf16 *s_gu, const ig_bf16 *s_dn, int rot_gu, int rot_dn, unsigned *it,
                              unsigned *nsel, const void *pf, unsigned pf_bytes) {
    constexpr int I2 = 2 * I, KD = TOPK * I + IS;
    typedef ig_st_shape<K> SG;
    typedef ig_st_shape<KD> SD;
    static_assert(I % 16 == 0 && IS % 16 == 0 && I2 % SG::R == 0 && SG::SPLIT == 1,
                  "gate/up: a slot's rows lie in one expert");
    ig_mb_wait(&st->selb, *nsel & 1);
    ++*nsel;
    int sel[TOPK];
#pragma unroll
    for (int k = 0; k < TOPK; k++) sel[k] = st->msel[k];
    if (pf) ig_st_prefetch(pf, pf_bytes);
    ig_st_produce_rows<K, 0, 32>(st, ring, TOPK * I2 + 2 * IS, 32, rot_gu, it,
                                 [&](unsigned char *dst, int r, int, int n, unsigned long long *bar) {
                                     const ig_bf16 *src = r < TOPK * I2 ? w_gu + ((size_t)sel[r / I2] * I2 + r % I2) * K
                                                                        : s_gu + (size_t)(r - TOPK * I2) * K;
                                     ig_st_bulk(dst, src, (unsigned)(n * K * 2), bar);
                                 });
    /* down: row piece h of rows r..r+n-1, one copy per expert segment the piece holds */
    ig_st_produce_rows<KD, 0, 32>(st, ring, K, 1, rot_dn, it, [&](unsigned char *dst, int r, int h, int n, unsigned long long *bar) {
        const int p0 = h * SD::KS, p1 = p0 + SD::KS;
        ig_mb_expect(bar, (unsigned)(n * SD::KS * 2));
        for (int i = 0; i < n; i++)
#pragma unroll
            for (int k = 0; k <= TOPK; k++) { /* k == TOPK: the shared expert's segment */
                const int s0 = k * I, s1 = k < TOPK ? s0 + I : s0 + IS, c0 = max(s0, p0), c1 = min(s1, p1);
                if (c0 >= c1) continue;
                const ig_bf16 *src = k < TOPK ? w_dn + ((size_t)sel[k] * K + r + i) * I + (c0 - s0)
                                              : s_dn + (size_t)(r + i) * IS + (c0 - s0);
                ig_st_copy(dst + ((size_t)i * SD::KS + (c0 - p0)) * 2, src, (unsigned)((c1 - c0) * 2), bar);
            }
    });
}

#endif /* IG_CUDA_STREAM_MOE_CUH */
