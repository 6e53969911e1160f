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
 *
 * Decode-sized steps (T <= MO_PAIR_TMAX, both forms) take the pair path instead: one OpenMP region
 * for the whole block, so a step pays three barriers rather than a fork/join per expert and
 * matmul. The threads split the router's experts, then the (token, selected expert) pairs x gate/up
 * panel pairs (each a contiguous stream of the expert's packed rows, gate and up panel together,
 * SwiGLU in the epilogue), then the down projection's panel pairs, each thread adding for its
 * outputs every token's experts in expert order. Each pair is a GEMV over only its expert's
 * weights (matmul.c's ig_mm_gemv / ig_mm_epi, the T == 1 kernels), so a token's result does not
 * depend on the other tokens of the step, and for T == 1 it is bit-identical to the grouped path.
 * It needs MO_PAIR_WS bytes of scratch beyond MO_WS_BYTES(T).
 *
 * Quantized experts (MO_WQ, MO_WG for gate/up, MO_DN_WQ, MO_DN_WG for down: a quant.h format and
 * its group, as matmul.c's MM_WQ / MM_WG; MO_GU / MO_DN are instances of those formats): the
 * stacked tensors are ordinary quantized panels (an expert's rows are a multiple of 16, so no
 * panel straddles two experts) and expert e starts at e x its panels x ig_wq_panel_bytes. The
 * grouped path is unchanged; the pair path prepares each token's row once (the integer-activation
 * formats: ig_wq_xquant's codes; the others: f32 and group sums) and each pair's SwiGLU row
 * likewise after one more barrier, then runs the kernels matmul.c's T == 1 path runs
 * (ig_wq_xgemm_rows over one row, or ig_wq_gemv), so a token's result still does not depend on
 * the other tokens of its step. It needs MO_PAIR_QWS more bytes.
 */
#include "common.h"
#include "quant.h"

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

#ifndef MO_WQ /* gate/up: 0, float experts (MO_WBF16), or a quant.h format */
#define MO_WQ 0
#endif
#ifndef MO_WG
#define MO_WG 128
#endif
#ifndef MO_DN_WQ /* down: the same, on its own (--quant-skip may keep one of the two in 16 bits) */
#define MO_DN_WQ 0
#endif
#ifndef MO_DN_WG
#define MO_DN_WG 128
#endif

#ifndef MO_PAIR_TMAX /* steps of at most this many tokens take the pair path */
#define MO_PAIR_TMAX 8
#endif

#ifndef MO_WS_BYTES
/* scratch: gathered rows, gate/up output, down output, logits, selection, grouping */
#define MO_WS_BYTES(T, D, I, E, K) \
    ((uint64_t)(T) * (4u * (D) + 4u * (I) + 4u * (D) + 4u * (E) + 12u * (K)) + 8u * (E) + 4u * 64u)
/* ... and the pair path's: its pairs' SwiGLU rows and the router logits, after the above */
#define MO_PAIR_WS(I, E, K) ((uint64_t)MO_PAIR_TMAX * (4u * (K) * (I) + 4u * (E)) + 2u * 64u)
/* ... and with quantized experts, every token's prepared row of D and every pair's of I, at most
 * MO_QROW_MAX bytes each (the code generator sizes the scratch by it) */
#define MO_QROW_MAX(K) (4u * (uint64_t)(K) + 8u * (((uint64_t)(K) + 15u) / 16u) + 256u)
#define MO_PAIR_QWS(D, I, K) ((uint64_t)MO_PAIR_TMAX * (MO_QROW_MAX(D) + (K) * MO_QROW_MAX(I)))
#endif
#ifndef IG_MO_QROW_DEFINED
#define IG_MO_QROW_DEFINED
/* bytes of one row of n columns prepared for format wq, group g: the integer formats' codes,
 * scales and group sums, the others' f32 row then its group sums; 0 for float experts (the row
 * as stored); and of one panel of n columns */
#define IG_MO_QROW(wq, g, n)                                                                   \
    (!(wq)           ? 0                                                                       \
     : IG_WQ_XQ(wq) ? IG_WQ_XQ_BYTES(wq, n, g)                                                \
                    : IG_WQ_R64(4 * (n)) + IG_WQ_R64(4 * (((n) + (g) - 1) / (g))))
#define IG_MO_PANEL(wq, g, wb, n) ((wq) ? ig_wq_panel_bytes(wq, n, g) : (size_t)((n) / 2) * IG_MM_LB(wb))
#endif

#ifndef IG_MO_HELPERS
#define IG_MO_HELPERS
/* Top-k of the f32 router logits lg[E] (overwritten), ties to the lower index; weights are the
 * softmax values, renormalized over the k when norm. */
static void ig_mo_topk(float *lg, int E, int K, int norm, int32_t *sel, float *wt) {
    float mx = -INFINITY, sum = 0.0f, ksum = 0.0f;
    for (int e = 0; e < E; e++) mx = IG_MAX(mx, lg[e]);
    for (int e = 0; e < E; e++) sum += (lg[e] = expf(lg[e] - mx));
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (lg[e] >= 0.0f && (best < 0 || lg[e] > lg[best])) best = e;
        if (best < 0) best = 0; /* NaN logits: a valid expert, the output NaN as it should be */
        sel[k] = best;
        wt[k] = lg[best] / sum;
        ksum += wt[k];
        lg[best] = -1.0f; /* taken */
    }
    if (norm)
        for (int k = 0; k < K; k++) wt[k] /= ksum;
}
#endif

#define MO_CAT2_(a, b) a##b
#define MO_CAT_(a, b) MO_CAT2_(a, b)
#define MO_PAIRS_ MO_CAT_(MO_NAME, _pairs)

/* One panel of n columns (format wq, group g) against a prepared row xr (float experts: the row
 * as stored; quantized: MO_PREP_'s bytes) into acc[16], as matmul.c's T == 1 path computes it. */
#define MO_GEMV_ MO_CAT_(MO_NAME, _gemv)
IG_INLINE void MO_GEMV_(int wq, int g, int n, const uint8_t *xr, const char *panel, float *acc) {
    if (!wq)
        ig_mm_gemv(MO_WBF16, MO_XBF16, xr, panel, n / 2, acc);
    else if (IG_WQ_XQ(wq))
        ig_wq_xgemm_rows(wq, n, g, 1, (const char *)xr, 0, panel, acc);
    else
        ig_wq_gemv(wq, n, g, (const float *)xr, (const float *)(xr + IG_WQ_R64(4 * n)), panel, acc);
}

/* Prepares row src [n] (MO_XBF16's type) for MO_GEMV_ of format wq (not 0), group g, into dst. */
#define MO_PREP_ MO_CAT_(MO_NAME, _prep)
IG_INLINE void MO_PREP_(int wq, int g, int n, const uint8_t *src, uint8_t *dst) {
    IG_ALIGN64 float xf[MO_D > MO_I ? MO_D : MO_I];
    ig_wq_x_f32(MO_XBF16, src, n, xf);
    if (IG_WQ_XQ(wq)) {
        ig_wq_xquant(wq, n, g, xf, (char *)dst);
        return;
    }
    memcpy(dst, xf, sizeof(float) * (size_t)n);
    if (IG_WQ_GSUMS(wq)) ig_wq_group_sums(xf, n, g, (float *)(dst + IG_WQ_R64(4 * n)));
}

/* The pair path (T <= MO_PAIR_TMAX): xg [T][MO_D] and pw (MO_PAIR_WS bytes, and MO_PAIR_QWS more
 * with quantized experts) are scratch. */
static void MO_PAIRS_(int T, const float *x, const float *router, const void *w_gu, const void *w_down, float *resid,
                      uint8_t *xg, uint8_t *pw, int nth) {
    enum {
        D_ = MO_D, I_ = MO_I, E_ = MO_SHARED ? 1 : MO_E, K_ = MO_SHARED ? 1 : MO_TOPK, XS_ = MO_XBF16 ? 2 : 4,
        GQ_ = MO_I / 16, DP_ = MO_D / 16, DQ_ = (DP_ + 1) / 2 /* panel pairs of gate/up, of down */
    };
    const size_t gu_panel = IG_MO_PANEL(MO_WQ, MO_WG, MO_WBF16, D_), dn_panel = IG_MO_PANEL(MO_DN_WQ, MO_DN_WG, MO_WBF16, I_);
    const size_t gu_bytes = (size_t)2 * GQ_ * gu_panel, dn_bytes = (size_t)DP_ * dn_panel;
    uint8_t *hg = pw;                                                /* [T * K][I] SwiGLU rows */
    float *lg = (float *)(pw + (((size_t)MO_PAIR_TMAX * K_ * I_ * XS_ + 63) & ~(size_t)63)); /* [T][E] */
    /* the rows the kernels read: as stored (float experts), or prepared per token and per pair
     * after the logits (MO_PAIR_QWS) */
    const size_t xrs = MO_WQ ? IG_MO_QROW(MO_WQ, MO_WG, D_) : (size_t)D_ * XS_;
    const size_t hrs = MO_DN_WQ ? IG_MO_QROW(MO_DN_WQ, MO_DN_WG, I_) : (size_t)I_ * XS_;
    uint8_t *xr = (uint8_t *)lg + (((size_t)MO_PAIR_TMAX * E_ * 4 + 63) & ~(size_t)63), *hr = xr + (size_t)MO_PAIR_TMAX * xrs;
    if (!MO_WQ) xr = xg;
    if (!MO_DN_WQ) hr = hg;
    _Static_assert(IG_MO_QROW(MO_WQ, MO_WG, MO_D) <= MO_QROW_MAX(MO_D) && IG_MO_QROW(MO_DN_WQ, MO_DN_WG, MO_I) <= MO_QROW_MAX(MO_I),
                   "scratch is sized by MO_QROW_MAX");
#pragma omp parallel num_threads(nth)
    {
        const int nt = ig_omp_nth(), tid = ig_omp_tid();
        int lo, hi;
        /* rows in the matmul input type (then prepared, for quantized experts); router logits, the
         * threads splitting the experts */
        ig_split(T, nt, tid, &lo, &hi);
        for (int t = lo; t < hi; t++) {
            ig_store_row(xg + (size_t)t * D_ * XS_, x + (size_t)t * D_, MO_XBF16, D_);
            if (MO_WQ) MO_PREP_(MO_WQ, MO_WG, D_, xg + (size_t)t * D_ * XS_, xr + (size_t)t * xrs);
        }
        ig_split(T * E_, nt, tid, &lo, &hi);
        for (int u = lo; u < hi; u++)
            lg[u] = ig_dot(x + (size_t)(u / E_) * D_, router + (size_t)(MO_SHARED ? 0 : u % E_) * D_, 0, D_);
#pragma omp barrier
        /* every thread selects every token's experts (the same f32 arithmetic, so the same picks) */
        int32_t sel[MO_PAIR_TMAX * K_];
        float wt[MO_PAIR_TMAX * K_];
        for (int t = 0; t < T; t++) {
#if MO_SHARED
            sel[t] = 0, wt[t] = 1.0f / (1.0f + expf(-lg[t]));
#else
            float l[E_];
            memcpy(l, lg + (size_t)t * E_, sizeof l);
            ig_mo_topk(l, E_, K_, MO_NORM, sel + t * K_, wt + t * K_);
#endif
        }
        /* gate/up: (pair, panel pair) units, each thread a contiguous range */
        ig_split(T * K_ * GQ_, nt, tid, &lo, &hi);
        for (int u = lo; u < hi; u++) {
            const int pr = u / GQ_, q = u % GQ_;
            const char *w = (const char *)w_gu + (size_t)sel[pr] * gu_bytes + (size_t)2 * q * gu_panel;
            IG_ALIGN64 float acc[32];
            MO_GEMV_(MO_WQ, MO_WG, D_, xr + (size_t)(pr / K_) * xrs, w, acc);
            MO_GEMV_(MO_WQ, MO_WG, D_, xr + (size_t)(pr / K_) * xrs, w + gu_panel, acc + 16);
            ig_mm_epi(MM_EPI_SWIGLU, MO_XBF16, 2 * I_, I_, NULL, acc, q, 2, hg, pr);
        }
#pragma omp barrier
#if MO_DN_WQ
        /* each pair's SwiGLU row, prepared once for the down projection's kernels */
        ig_split(T * K_, nt, tid, &lo, &hi);
        for (int pr = lo; pr < hi; pr++) MO_PREP_(MO_DN_WQ, MO_DN_WG, I_, hg + (size_t)pr * I_ * XS_, hr + (size_t)pr * hrs);
#pragma omp barrier
#endif
        /* down: the threads split the outputs; each adds its outputs' experts in expert order */
        ig_split(DQ_, nt, tid, &lo, &hi);
        for (int t = 0; t < T; t++) {
            int ord[K_];
            for (int k = 0; k < K_; k++) { /* the token's pairs by expert index (insertion sort) */
                int j = k;
                for (; j > 0 && sel[t * K_ + ord[j - 1]] > sel[t * K_ + k]; j--) ord[j] = ord[j - 1];
                ord[j] = k;
            }
            float *r = resid + (size_t)t * D_;
            for (int q = lo; q < hi; q++)
                for (int k = 0; k < K_; k++) {
                    const int pr = t * K_ + ord[k];
                    const char *w = (const char *)w_down + (size_t)sel[pr] * dn_bytes + (size_t)2 * q * dn_panel;
                    const int np = 2 * q + 1 < DP_ ? 2 : 1;
                    IG_ALIGN64 float acc[32];
                    MO_GEMV_(MO_DN_WQ, MO_DN_WG, I_, hr + (size_t)pr * hrs, w, acc);
                    if (np > 1) MO_GEMV_(MO_DN_WQ, MO_DN_WG, I_, hr + (size_t)pr * hrs, w + dn_panel, acc + 16);
                    for (int i = 0; i < 16 * np; i++) r[32 * q + i] += wt[pr] * acc[i];
                }
        }
    }
}

static void MO_NAME(int T, const float *x, const float *router, const void *w_gu, const void *w_down, float *resid,
                    uint8_t *ws, int nth) {
    enum { D_ = MO_D, I_ = MO_I, E_ = MO_E, K_ = MO_TOPK, XS_ = MO_XBF16 ? 2 : 4 };
    _Static_assert(D_ % 16 == 0 && I_ % 16 == 0, "experts are stacked in 16-row panels");
    if (T <= MO_PAIR_TMAX) { /* after the grouped path's scratch for T tokens, aligned */
        uint64_t off = (MO_WS_BYTES((uint64_t)T, D_, I_, E_, K_) + 63) & ~(uint64_t)63;
        MO_PAIRS_(T, x, router, w_gu, w_down, resid, ws, ws + off, nth);
        return;
    }
    uint8_t *p = ws;
#define MO_CARVE(type, name, count) \
    type *name = (type *)p;         \
    p += ((sizeof(type) * (size_t)(count)) + 63) & ~(size_t)63;
    MO_CARVE(uint8_t, xg, (size_t)T * D_ * XS_)
    MO_CARVE(uint8_t, hg, (size_t)T * I_ * XS_)
    MO_CARVE(float, yg, (size_t)T * D_)
#if MO_SHARED
    (void)E_, (void)K_;
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
        float lg[E_];
        for (int e = 0; e < E_; e++) lg[e] = ig_dot(x + (size_t)t * D_, router + (size_t)e * D_, 0, D_);
        ig_mo_topk(lg, E_, K_, MO_NORM, sel + t * K_, wt + t * K_);
    }
    /* group (token, k) pairs by expert, in token order */
    memset(cnt, 0, sizeof(int32_t) * (E_ + 1));
    for (int i = 0; i < T * K_; i++) cnt[sel[i]]++;
    off[0] = 0;
    for (int e = 0; e < E_; e++) off[e + 1] = off[e] + cnt[e];
    for (int e = 0; e <= E_; e++) cnt[e] = 0;
    for (int i = 0; i < T * K_; i++) list[off[sel[i]] + cnt[sel[i]]++] = i;
    /* one GEMM pair per expert over its tokens; expert e's panels start at e * (its bytes) */
    const size_t gu_bytes = (size_t)(2 * I_ / 16) * IG_MO_PANEL(MO_WQ, MO_WG, MO_WBF16, D_),
                 dn_bytes = (size_t)(D_ / 16) * IG_MO_PANEL(MO_DN_WQ, MO_DN_WG, MO_WBF16, I_);
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
#undef MO_PAIRS_
#undef MO_GEMV_
#undef MO_PREP_
#undef MO_WQ
#undef MO_WG
#undef MO_DN_WQ
#undef MO_DN_WG
#undef MO_PAIR_TMAX
