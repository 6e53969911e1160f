/* moe.c — template: a mixture-of-experts feed-forward block (or a gated shared expert), added to
 * the residual stream.
 *
 * Instantiate with MO_NAME, MO_D (hidden), MO_E (experts), MO_TOPK, MO_I (rows of one expert's
 * gate or up projection), MO_NORM (1: renormalize the top-k weights to sum 1), MO_XBF16 (type of
 * the experts' input rows), MO_WBF16 (weight type), MO_GU and MO_DN (matmul.c instances:
 * x[T,MO_D] . gate_up[2*MO_I, MO_D] with the SwiGLU epilogue into [T,MO_I] of MO_XBF16's type, and
 * [T,MO_I] . down[MO_D, MO_I] stored in f32), and MO_SHARED (1: the shared-expert form); defines
 *   static void MO_NAME(int T, const float *x, const float *router, const void *w_gu,
 *                       const void *w_down, float *resid, uint8_t *ws, int nth);
 * x: the normalized rows [T][MO_D] in f32. ws: MO_WS_BYTES(T) bytes of scratch.
 *
 * Routed form (MO_SHARED 0): router [MO_E][MO_D] f32 rows; the router logits, the softmax and the
 * top-k are computed in f32 (ties go to the lower expert index, as torch.topk does on CPU);
 * w_gu / w_down hold the experts stacked, expert e at byte e * (its panel bytes). Tokens are
 * grouped by expert: each expert with tokens runs one GEMM over its gathered rows (prefill), so a
 * decode step reads only the selected experts' weights; results are added in expert order, scaled
 * by their routing weight.
 * Shared form (MO_SHARED 1): router is the gate row [MO_D]; resid += sigmoid(x . gate) * mlp(x).
 */
#include "common.h"

#ifndef MO_NAME
#define MO_NAME ig_moe
#endif
#ifndef MO_SHARED
#define MO_SHARED 0
#endif
#ifndef MO_E
#define MO_E 8
#endif
#ifndef MO_TOPK
#define MO_TOPK 2
#endif
#ifndef MO_NORM
#define MO_NORM 1
#endif

#ifndef MO_WS_BYTES
/* scratch: gathered rows, gate/up output, down output, logits, selection, grouping */
#define MO_WS_BYTES(T, D, I, E, K) \
    ((uint64_t)(T) * (4u * (D) + 4u * (I) + 4u * (D) + 4u * (E) + 12u * (K)) + 8u * (E) + 4u * 64u)
#endif

static void MO_NAME(int T, const float *x, const float *router, const void *w_gu, const void *w_down, float *resid,
                    uint8_t *ws, int nth) {
    enum { D_ = MO_D, I_ = MO_I, E_ = MO_E, K_ = MO_TOPK, XS_ = MO_XBF16 ? 2 : 4, WS_ = MO_WBF16 ? 2 : 4 };
    _Static_assert(D_ % 16 == 0 && I_ % 16 == 0, "experts are stacked in 16-row panels");
    uint8_t *p = ws;
#define MO_CARVE(type, name, count) \
    type *name = (type *)p;         \
    p += ((sizeof(type) * (size_t)(count)) + 63) & ~(size_t)63;
    MO_CARVE(uint8_t, xg, (size_t)T * D_ * XS_)
    MO_CARVE(uint8_t, hg, (size_t)T * I_ * XS_)
    MO_CARVE(float, yg, (size_t)T * D_)
#if MO_SHARED
    (void)E_, (void)K_, (void)WS_;
    for (int t = 0; t < T; t++) ig_store_row(xg + (size_t)t * D_ * XS_, x + (size_t)t * D_, MO_XBF16, D_);
    MO_GU(T, xg, w_gu, NULL, hg, nth);
    MO_DN(T, hg, w_down, NULL, yg, nth);
#pragma omp parallel for num_threads(nth) schedule(static) if (T >= 16)
    for (int t = 0; t < T; t++) {
        float gl = ig_dot(x + (size_t)t * D_, router, 0, D_);
        float gs = 1.0f / (1.0f + expf(-gl));
        float *r = resid + (size_t)t * D_;
        const float *y = yg + (size_t)t * D_;
        for (int i = 0; i < D_; i++) r[i] += gs * y[i];
    }
#else
    MO_CARVE(float, wt, (size_t)T * K_)      /* routing weight of token t's k-th expert */
    MO_CARVE(int32_t, sel, (size_t)T * K_)   /* its expert */
    MO_CARVE(int32_t, list, (size_t)T * K_)  /* (token * K + k) grouped by expert */
    MO_CARVE(int32_t, cnt, (size_t)E_ + 1)
    MO_CARVE(int32_t, off, (size_t)E_ + 1)
    /* router: logits, softmax over all experts, top-k, optional renormalization (f32) */
#pragma omp parallel for num_threads(nth) schedule(static) if (T >= 16)
    for (int t = 0; t < T; t++) {
        float lg[E_], mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < E_; e++) {
            lg[e] = ig_dot(x + (size_t)t * D_, router + (size_t)e * D_, 0, D_);
            mx = IG_MAX(mx, lg[e]);
        }
        for (int e = 0; e < E_; e++) sum += (lg[e] = expf(lg[e] - mx));
        float ksum = 0.0f;
        for (int k = 0; k < K_; k++) {
            int best = -1;
            for (int e = 0; e < E_; e++)
                if (lg[e] >= 0.0f && (best < 0 || lg[e] > lg[best])) best = e;
            sel[t * K_ + k] = best;
            wt[t * K_ + k] = lg[best] / sum;
            ksum += wt[t * K_ + k];
            lg[best] = -1.0f; /* taken */
        }
        if (MO_NORM)
            for (int k = 0; k < K_; k++) wt[t * K_ + k] /= ksum;
    }
    /* group (token, k) pairs by expert, in token order */
    memset(cnt, 0, sizeof(int32_t) * (E_ + 1));
    for (int i = 0; i < T * K_; i++) cnt[sel[i]]++;
    off[0] = 0;
    for (int e = 0; e < E_; e++) off[e + 1] = off[e] + cnt[e];
    for (int e = 0; e <= E_; e++) cnt[e] = 0;
    for (int i = 0; i < T * K_; i++) list[off[sel[i]] + cnt[sel[i]]++] = i;
    /* one GEMM pair per expert over its tokens; expert e's panels start at e * (its bytes) */
    const size_t gu_bytes = (size_t)2 * I_ * D_ * WS_, dn_bytes = (size_t)D_ * I_ * WS_;
    for (int e = 0; e < E_; e++) {
        int n = off[e + 1] - off[e];
        if (n == 0) continue;
        const int32_t *li = list + off[e];
        for (int j = 0; j < n; j++)
            ig_store_row(xg + (size_t)j * D_ * XS_, x + (size_t)(li[j] / K_) * D_, MO_XBF16, D_);
        MO_GU(n, xg, (const char *)w_gu + e * gu_bytes, NULL, hg, nth);
        MO_DN(n, hg, (const char *)w_down + e * dn_bytes, NULL, yg, nth);
#pragma omp parallel for num_threads(nth) schedule(static) if (n >= 16)
        for (int j = 0; j < n; j++) {
            float *r = resid + (size_t)(li[j] / K_) * D_, w = wt[li[j]];
            const float *y = yg + (size_t)j * D_;
            for (int i = 0; i < D_; i++) r[i] += w * y[i];
        }
    }
#endif
#undef MO_CARVE
}

#undef MO_NAME
#undef MO_SHARED
#undef MO_D
#undef MO_I
#undef MO_E
#undef MO_TOPK
#undef MO_NORM
#undef MO_XBF16
#undef MO_WBF16
#undef MO_GU
#undef MO_DN
