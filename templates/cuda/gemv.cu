/* gemv.cu — template: decode matmul y = x · Wᵀ (+ bias) for a few tokens, with an optional fused
 * RMSNorm prologue and a fused epilogue (store, residual add, SwiGLU / GeGLU). Memory-bound: W streams
 * from HBM once per pass of up to IG_MV_TG(K, XES) tokens (one pass for the usual T = 1..4).
 *
 * Instantiate with MV_NAME, MV_K, MV_N, MV_WBF16, MV_XBF16, MV_BIAS, MV_EPI, MV_LDY, MV_YBF16,
 * MV_NORM, MV_EPS, and for quantized weights MV_WQ (8: q8r, 4: q4r, wq.cuh; 0 = floats), MV_WG
 * (q4r's group) and MV_WF8 (1: the 8-bit rows are f8r, e4m3 codes); defines
 *   extern "C" __global__ void MV_NAME(int T, const void *x, const float *gamma, const WT *w,
 *                                      const float *bias, void *y);
 * W row-major [Np][MV_K] (WT by MV_WBF16, Np = MV_N rounded up to 16, padded rows zero, SwiGLU
 * gate/up interleaved by 16 rows; quantized: rows of IG_WQ_ROWB bytes, codes then scales); bias f32 [Np] in packed row order (or null when MV_BIAS == 0).
 * MV_NORM 0: x is AT [T][MV_K] (AT = bf16 when MV_XBF16, else f32); gamma unused (may be null).
 * MV_NORM 1: x is the f32 residual stream [T][MV_K]; the kernel applies RMSNorm first,
 *   xn = x / sqrt(mean(x²) + MV_EPS) * gamma rounded to AT, exactly as rmsnorm.cu computes it,
 *   so the separate rmsnorm launch (and its round trip through memory) disappears.
 * MV_EPI: 0 y f32 [T][MV_LDY] = acc; 1 y f32 [T][MV_LDY] += acc (residual add); 2 SwiGLU:
 * y [T][MV_LDY] (MV_LDY default MV_N/2) of type MV_YBF16, y[t][i] = silu(gate_i) * up_i; 3 GeGLU:
 * as 2 with gelu_tanh(gate_i) * up_i (Gemma 3; common.cuh's ig_glu).
 *
 * launch: grid = IG_MV_GRID_X(MV_N, MV_K, WES, max_ctas) (one CTA per step of 8 / KS pairs, capped
 *         at max_ctas: the host passes 4 per SM; quantized W: IG_MV_GRID_XB(MV_N, IG_WQ_CODEB(MV_K,
 *         MV_WQ), max_ctas)), block = IG_MV_BLOCK = 256,
 *         dynamic smem = IG_MV_SMEM(MV_K, XES) (= IG_MV_TG tokens of x in AT; <= 48 KB unless
 *         K * XES > 48 KB, then the host must raise the function's dynamic smem limit).
 *
 * Work split: the unit of work is a pair of packed rows (SwiGLU: gate row j and its up row). A
 * lane reads 16 bytes per row per step, IG_MV_VPL steps per chunk (one chunk = 2048 bf16), so a
 * warp has 2 x 8 x 512 B = 8 KB of W in flight and an SM with 16 warps 128 KB, several times
 * what HBM latency needs. Rows of one chunk (K = 2048 in bf16): a warp owns whole pairs and
 * strides over them on its own (no barrier). Longer rows: KS = min(chunks, 8) warps share a pair
 * (split K), each taking every KS-th chunk, so the chunks of a long row are in flight at once;
 * their partial sums meet in shared memory and the CTA steps over pairs together. x (all the
 * tokens of a pass) is staged once per CTA in shared memory, after the RMSNorm when fused; lanes
 * read it with conflict-free 16-byte loads. Partial sums are reduced with warp shuffles; the lane
 * of token t applies the epilogue (no atomics, deterministic).
 *
 * Programmatic dependent launch (sm_90, when the host asks for it): the kernel lets the next
 * kernel in the stream launch early, and issues its first chunk of W loads (weights do not depend
 * on earlier kernels) before waiting for the previous kernel's results. On older GPUs, or
 * launched without the attribute, both steps are no-ops.
 */
#include "common.cuh"
#include "wq.cuh"

#ifndef MV_NAME
#define MV_NAME ig_gemv
#endif
#ifndef MV_K
#define MV_K 2048
#endif
#ifndef MV_N
#define MV_N 2048
#endif
#ifndef MV_WBF16
#define MV_WBF16 1
#endif
#ifndef MV_XBF16
#define MV_XBF16 1
#endif
#ifndef MV_BIAS
#define MV_BIAS 0
#endif
#ifndef MV_EPI
#define MV_EPI 0
#endif
#ifndef MV_LDY
#define MV_LDY ((MV_EPI) >= 2 ? (MV_N) / 2 : (MV_N))
#endif
#ifndef MV_YBF16
#define MV_YBF16 0
#endif
#ifndef MV_NORM
#define MV_NORM 0
#endif
#ifndef MV_EPS
#define MV_EPS 1e-5f
#endif
#ifndef MV_WQ
#define MV_WQ 0
#endif
#ifndef MV_WG
#define MV_WG 32
#endif
#ifndef MV_WF8
#define MV_WF8 0
#endif

#ifndef IG_GEMV_HELPERS
#define IG_GEMV_HELPERS

/* Packed row of W for row r (0 or 1) of pair p. SwiGLU pairs are (gate, up) of output p: packed
 * rows 32q+j and 32q+16+j for p = 16q+j. */
template <bool SW>
IG_DEV int ig_mv_row(int p, int r) {
    if (!SW) return 2 * p + r;
    return 32 * (p >> 4) + 16 * r + (p & 15);
}

/* VE activations starting at element k of a staged row in shared memory, as f32. */
template <int VE, bool XB>
IG_DEV void ig_mv_xs(const void *xs, int k, float *xf) {
    if (XB) {
        const unsigned short *p = (const unsigned short *)xs + k;
        if (VE == 8) {
            ig_unpack8_h(*(const uint4 *)p, xf);
        } else {
            uint2 v = *(const uint2 *)p;
            ig_unpack2_h(v.x, xf), ig_unpack2_h(v.y, xf + 2);
        }
    } else {
        const float *p = (const float *)xs + k;
#pragma unroll
        for (int e = 0; e < VE; e += 4) {
            float4 v = *(const float4 *)(p + e);
            xf[e] = v.x, xf[e + 1] = v.y, xf[e + 2] = v.z, xf[e + 3] = v.w;
        }
    }
}

/* The chunk c (IG_MV_VPL 16-byte vectors per lane) of both rows of pair p; zero past the row's KV
 * vectors (rows of RB bytes). */
template <int RB, int KV, bool SW>
IG_DEV void ig_mv_load(const char *w, int p, int c, int lane, uint4 (*raw)[IG_MV_VPL]) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const char *wr = w + (size_t)ig_mv_row<SW>(p, r) * RB;
#pragma unroll
        for (int u = 0; u < IG_MV_VPL; u++) {
            const int v = (c * IG_MV_VPL + u) * 32 + lane;
            raw[r][u] = v < KV ? ig_ldg16(wr + (size_t)v * 16) : make_uint4(0u, 0u, 0u, 0u);
        }
    }
}

/* acc[t][r] += x_t . (chunk c of row r) for the tn staged tokens (xs: [TG][K] of the x type). */
template <int K, int WES, bool XB, int TG>
IG_DEV void ig_mv_fma(const unsigned char *xs, int tn, int c, int lane, uint4 (*raw)[IG_MV_VPL], float (*acc)[2]) {
    constexpr int VE = 16 / WES, KV = K / VE, XES = XB ? 2 : 4;
    constexpr bool EXACT = KV % (32 * IG_MV_VPL) == 0;
#pragma unroll
    for (int u = 0; u < IG_MV_VPL; u++) {
        const int v = (c * IG_MV_VPL + u) * 32 + lane;
        if (!EXACT && v >= KV) break;
        float wf[2][VE];
        ig_unpack16(raw[0][u], WES, wf[0]);
        ig_unpack16(raw[1][u], WES, wf[1]);
#pragma unroll
        for (int t = 0; t < TG; t++) {
            if (t < tn) {
                float xf[VE];
                ig_mv_xs<VE, XB>(xs + (size_t)t * K * XES, v * VE, xf);
#pragma unroll
                for (int e = 0; e < VE; e++) {
                    acc[t][0] = fmaf(xf[e], wf[0][e], acc[t][0]);
                    acc[t][1] = fmaf(xf[e], wf[1][e], acc[t][1]);
                }
            }
        }
    }
}

/* The same for quantized rows (wq.cuh; WQ 8: q8r, or f8r with F8, 4: q4r with groups of G; x AT): 16
 * or 32 codes per vector, read 8 at a time against 8 staged activations. q8r sums q x (the epilogue
 * applies the row's scale), f8r e4m3(q) 2^-120 x (the epilogue applies 2^120 and the scale); q4r
 * adds scale * sum(q x) + min * sum(x) per vector (one group). */
template <int K, int WQ, int G, bool XB, int TG, bool SW, bool F8 = false>
IG_DEV void ig_mv_fmaq(const unsigned char *xs, int tn, int c, int lane, uint4 (*raw)[IG_MV_VPL], float (*acc)[2],
                       const unsigned char *w, int p) {
    constexpr int CB = IG_WQ_CODEB(K, WQ), RB = IG_WQ_ROWB(K, WQ, G), VE = WQ == 8 ? 16 : 32, KV = CB / 16;
    constexpr int XES = XB ? 2 : 4;
    constexpr bool EXACT = KV % (32 * IG_MV_VPL) == 0;
#pragma unroll
    for (int u = 0; u < IG_MV_VPL; u++) {
        const int v = (c * IG_MV_VPL + u) * 32 + lane;
        if (!EXACT && v >= KV) break;
        float d[TG][2], sx[TG];
#pragma unroll
        for (int t = 0; t < TG; t++) d[t][0] = d[t][1] = sx[t] = 0.0f;
#pragma unroll
        for (int pc = 0; pc < VE / 8; pc++) { /* 8 codes of each row */
            float w0[8], w1[8];
            if (WQ == 8 && F8) {
                ig_wf8_word(ig_wq_w(raw[0][u], 2 * pc), w0), ig_wf8_word(ig_wq_w(raw[0][u], 2 * pc + 1), w0 + 4);
                ig_wf8_word(ig_wq_w(raw[1][u], 2 * pc), w1), ig_wf8_word(ig_wq_w(raw[1][u], 2 * pc + 1), w1 + 4);
            } else if (WQ == 8) {
                ig_wq8_word(ig_wq_w(raw[0][u], 2 * pc), w0), ig_wq8_word(ig_wq_w(raw[0][u], 2 * pc + 1), w0 + 4);
                ig_wq8_word(ig_wq_w(raw[1][u], 2 * pc), w1), ig_wq8_word(ig_wq_w(raw[1][u], 2 * pc + 1), w1 + 4);
            } else {
                ig_wq4_word(ig_wq_w(raw[0][u], pc), w0), ig_wq4_word(ig_wq_w(raw[1][u], pc), w1);
            }
#pragma unroll
            for (int t = 0; t < TG; t++) {
                if (t < tn) {
                    float xf[8];
                    ig_mv_xs<8, XB>(xs + (size_t)t * K * XES, v * VE + 8 * pc, xf);
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        d[t][0] = fmaf(xf[e], w0[e], d[t][0]);
                        d[t][1] = fmaf(xf[e], w1[e], d[t][1]);
                        if (WQ == 4) sx[t] += xf[e];
                    }
                }
            }
        }
        if (WQ == 4) {
            const float2 a = ig_wq4_sm<K, RB, G>(w, ig_mv_row<SW>(p, 0), v * VE), b = ig_wq4_sm<K, RB, G>(w, ig_mv_row<SW>(p, 1), v * VE);
#pragma unroll
            for (int t = 0; t < TG; t++)
                acc[t][0] += fmaf(a.x, d[t][0], a.y * sx[t]), acc[t][1] += fmaf(b.x, d[t][1], b.y * sx[t]);
        } else {
#pragma unroll
            for (int t = 0; t < TG; t++) acc[t][0] += d[t][0], acc[t][1] += d[t][1];
        }
    }
}

#endif /* IG_GEMV_HELPERS */

#if MV_WQ
#define MV_WT_ unsigned char
#elif MV_WBF16
#define MV_WT_ unsigned short
#else
#define MV_WT_ float
#endif

extern "C" __global__ void __launch_bounds__(IG_MV_BLOCK, 2)
MV_NAME(int T, const void *x, const float *gamma, const MV_WT_ *w, const float *bias, void *y) {
    constexpr int WES = MV_WBF16 ? 2 : 4, XES = MV_XBF16 ? 2 : 4;
    constexpr int CB = MV_WQ ? IG_WQ_CODEB(MV_K, MV_WQ) : MV_K * WES; /* bytes of W per row */
    constexpr int RB = MV_WQ ? IG_WQ_ROWB(MV_K, MV_WQ, MV_WG) : CB;   /* ... with its scales: the row stride */
    constexpr int KV = CB / 16;                        /* 16-byte vectors per row */
    constexpr int NCH = IG_CDIV(KV, 32 * IG_MV_VPL);   /* chunks per row (IG_MV_VPL vectors a lane) */
    constexpr int NP = IG_NPAD16(MV_N), NPAIR = NP / 2;
    constexpr int TG = IG_MV_TG(MV_K, XES);
    constexpr bool SW = (MV_EPI) == 2 || (MV_EPI) == 3, GELU = (MV_EPI) == 3;
    static_assert(MV_K % 8 == 0, "MV_K must be a multiple of 8 (16-byte loads)");
    static_assert(MV_WQ == 0 || (MV_WQ == 8 && MV_K % 16 == 0) || (MV_WQ == 4 && MV_K % 32 == 0 && MV_K % MV_WG == 0 && MV_WG % 32 == 0),
                  "quantized rows: q8r needs K % 16 == 0, q4r K % 32 == 0 and whole groups of a multiple of 32");
    static_assert(!SW || MV_N % 32 == 0, "SwiGLU needs I % 16 == 0 (the pass pads it)");
    static_assert(IG_MV_BLOCK == 256, "8 warps per CTA");
    extern __shared__ uint4 ig_mv_smem[];
    unsigned char *xs = (unsigned char *)ig_mv_smem; /* [TG][MV_K] of AT */
    constexpr int KS = IG_MV_KSB(CB), SLOTS = 8 / KS; /* warps per pair, pairs per CTA step */
    static_assert(NCH == IG_MV_NCHB(CB) && TG <= IG_MV_TG_MAX, "launch.h and the kernel disagree");
    const int lane = threadIdx.x & 31, w8 = threadIdx.x >> 5, slot = w8 / KS, ks = w8 % KS;
    const int gw = blockIdx.x * 8 + w8, nw = gridDim.x * 8;
    const char *wc = (const char *)w;

    /* y[t] for pair p from the full sums s0, s1 of its two rows */
    auto epilogue = [&](int p, int t, float s0, float s1) {
        const size_t yo = (size_t)t * MV_LDY;
        if (MV_WQ == 8) { /* q8r / f8r: the rows' scales (f8r: after its codes' unit) */
            if (MV_WF8) s0 *= IG_WF8_UNIT_F32, s1 *= IG_WF8_UNIT_F32;
            s0 *= ig_wq8_scale<MV_K>((const unsigned char *)w, ig_mv_row<SW>(p, 0));
            s1 *= ig_wq8_scale<MV_K>((const unsigned char *)w, ig_mv_row<SW>(p, 1));
        }
        if (!SW) {
            const int n0 = 2 * p;
            if (MV_BIAS) s0 += bias[n0], s1 += bias[n0 + 1];
            float *yr = (float *)y + yo;
            /* padded rows are computed (zero weights) but never stored */
            if ((MV_EPI) == 1) {
                if (n0 < MV_N) yr[n0] += s0;
                if (n0 + 1 < MV_N) yr[n0 + 1] += s1;
            } else {
                if (n0 < MV_N) yr[n0] = s0;
                if (n0 + 1 < MV_N) yr[n0 + 1] = s1;
            }
        } else {
            float g = s0, u = s1;
            if (MV_BIAS) g += bias[ig_mv_row<true>(p, 0)], u += bias[ig_mv_row<true>(p, 1)];
            const float o = ig_glu(g, u, GELU);
            if (MV_YBF16) ((unsigned short *)y)[yo + p] = ig_f32_to_h(o);
            else ((float *)y)[yo + p] = o;
        }
    };

    /* acc += x . chunk c of pair p (in raw) */
#define FMA_(c_)                                                                                                   \
    do {                                                                                                           \
        if (MV_WQ)                                                                                                 \
            ig_mv_fmaq<MV_K, MV_WQ ? MV_WQ : 8, MV_WG, MV_XBF16, TG, SW, MV_WF8>(xs, tn, (c_), lane, raw, acc,    \
                                                                       (const unsigned char *)w, p);            \
        else                                                                                                       \
            ig_mv_fma<MV_K, WES, MV_XBF16, TG>(xs, tn, (c_), lane, raw, acc);                                      \
    } while (0)
    /* the first chunk of W this warp reads, before staging x */
    uint4 raw[2][IG_MV_VPL];
    const int p0 = KS == 1 ? gw : blockIdx.x * SLOTS + slot, c0 = KS == 1 ? 0 : ks;
    if (p0 < NPAIR && c0 < NCH) ig_mv_load<RB, KV, SW>(wc, p0, c0, lane, raw);

    for (int t0 = 0; t0 < T; t0 += TG) {
        const int tn = min(TG, T - t0);
        /* stage x (normalized when MV_NORM) for the pass's tokens */
        if (t0 > 0) __syncthreads(); /* every warp is done with the previous pass's x */
        for (int t = 0; t < tn; t++) {
            if (MV_NORM) {
                __shared__ float red[32];
                const float *xr = (const float *)x + (size_t)(t0 + t) * MV_K;
                float ss = 0.0f;
                for (int i = threadIdx.x; i < MV_K; i += IG_MV_BLOCK) ss = fmaf(xr[i], xr[i], ss);
                ss = ig_block_sum(ss, red);
                const float s = 1.0f / sqrtf(ss / (float)MV_K + MV_EPS); /* as rmsnorm.cu */
                for (int i = threadIdx.x; i < MV_K; i += IG_MV_BLOCK) {
                    const float o = xr[i] * s * gamma[i];
                    if (MV_XBF16) ((unsigned short *)xs)[(size_t)t * MV_K + i] = ig_f32_to_h(o);
                    else ((float *)xs)[(size_t)t * MV_K + i] = o;
                }
            } else {
                const uint4 *src = (const uint4 *)((const char *)x + (size_t)(t0 + t) * MV_K * XES);
                uint4 *dst = (uint4 *)(xs + (size_t)t * MV_K * XES);
                for (int i = threadIdx.x; i < MV_K * XES / 16; i += IG_MV_BLOCK) dst[i] = src[i];
            }
        }
        __syncthreads();
        if (t0 > 0 && p0 < NPAIR && c0 < NCH) ig_mv_load<RB, KV, SW>(wc, p0, c0, lane, raw);

        float acc[TG][2];
#pragma unroll
        for (int t = 0; t < TG; t++) acc[t][0] = acc[t][1] = 0.0f;
        if (KS == 1) {
            /* each warp owns whole pairs and strides over them on its own */
            int p = gw, c = 0;
            while (p < NPAIR) {
                FMA_(c); /* raw holds chunk c of p */
                if (++c == NCH) {
#pragma unroll
                    for (int t = 0; t < TG; t++) {
                        if (t < tn) {
                            const float s0 = ig_warp_sum(acc[t][0]), s1 = ig_warp_sum(acc[t][1]);
                            acc[t][0] = acc[t][1] = 0.0f;
                            if (lane == t) epilogue(p, t0 + t, s0, s1);
                        }
                    }
                    c = 0;
                    p += nw;
                }
                if (p < NPAIR) ig_mv_load<RB, KV, SW>(wc, p, c, lane, raw);
            }
        } else {
            /* KS warps share a pair, each over chunks ks, ks + KS, ...; partial sums meet in smem.
             * The loop is CTA-uniform (barriers inside). */
            __shared__ float part[8][IG_MV_TG_MAX][2];
            for (int pb = blockIdx.x * SLOTS; pb < NPAIR; pb += gridDim.x * SLOTS) {
                const int p = pb + slot;
                if (p < NPAIR) {
                    for (int c = ks; c < NCH; c += KS) {
                        if (c != ks) ig_mv_load<RB, KV, SW>(wc, p, c, lane, raw);
                        FMA_(c);
                    }
                    /* next pair's first chunk in flight while this one is reduced */
                    const int pn = p + gridDim.x * SLOTS;
                    if (pn < NPAIR) ig_mv_load<RB, KV, SW>(wc, pn, ks, lane, raw);
#pragma unroll
                    for (int t = 0; t < TG; t++) {
                        if (t < tn) {
                            const float s0 = ig_warp_sum(acc[t][0]), s1 = ig_warp_sum(acc[t][1]);
                            acc[t][0] = acc[t][1] = 0.0f;
                            if (lane == 0) part[w8][t][0] = s0, part[w8][t][1] = s1;
                        }
                    }
                }
                __syncthreads();
                if (ks == 0 && p < NPAIR && lane < tn) {
                    float s0 = 0.0f, s1 = 0.0f;
                    for (int k = 0; k < KS; k++) s0 += part[w8 + k][lane][0], s1 += part[w8 + k][lane][1];
                    epilogue(p, t0 + lane, s0, s1);
                }
                __syncthreads();
            }
        }
    }
}

#undef FMA_
#undef MV_WT_
#undef MV_WQ
#undef MV_WG
#undef MV_WF8
#undef MV_NAME
#undef MV_K
#undef MV_N
#undef MV_WBF16
#undef MV_XBF16
#undef MV_BIAS
#undef MV_EPI
#undef MV_LDY
#undef MV_YBF16
#undef MV_NORM
#undef MV_EPS
