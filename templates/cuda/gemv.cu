/* gemv.cu — template: decode matmul y = x · Wᵀ (+ bias) with a fused epilogue (store, residual
 * add, SwiGLU) for a few tokens (T <= MV_TMAX, typically 1..8). Memory-bound: W streams from HBM
 * exactly once per call for T <= 8 (once per group of 8 tokens beyond that).
 *
 * Instantiate with MV_NAME, MV_K, MV_N, MV_WBF16, MV_XBF16, MV_BIAS, MV_EPI, MV_LDY, MV_YBF16,
 * MV_TMAX, MV_ROWS; defines
 *   extern "C" __global__ void MV_NAME(int T, const AT *x, const WT *w, const float *bias, void *y);
 * x [T][MV_K] (AT = f32, or bf16 as unsigned short when MV_XBF16); W row-major [Np][MV_K] (WT by
 * MV_WBF16, Np = MV_N rounded up to 16, padded rows zero, SwiGLU gate/up interleaved by 16 rows);
 * bias f32 [Np] in packed row order (or null when MV_BIAS == 0).
 * MV_EPI: 0 y f32 [T][MV_LDY] = acc; 1 y f32 [T][MV_LDY] += acc (residual add); 2 SwiGLU:
 * y [T][MV_LDY] (MV_LDY default MV_N/2) of type MV_YBF16, y[t][i] = silu(gate_i) * up_i.
 *
 * launch: grid = (IG_MV_GRID_X(T, MV_N, MV_ROWS) = Np / MV_ROWS, 1, 1), block = IG_MV_BLOCK = 256,
 *         dynamic smem = 0 (launch.h; MV_ROWS defaults to IG_MV_ROWS_DEFAULT(MV_N, MV_EPI == 2)).
 *
 * Work split: a CTA owns MV_ROWS packed rows (at most 8); its 8 warps split K into 8 slices and
 * each warp computes all of the CTA's rows over its slice, so that even N = 2048 with K = 8192 has
 * 512 CTAs of long streams. A lane reads 16 bytes of W per row per step (coalesced 512-byte warp
 * transactions), several rows and unrolled steps in flight; W goes through registers only.
 * x is not staged in shared memory: with K split over warps each x element is used by exactly one
 * warp of the CTA (so shared memory would give no reuse), it is read with __ldg from L1/L2 once
 * per 16-byte W vector and reused in registers across the CTA's rows, and T*K*4 bytes of staging
 * would not fit shared memory for K = 8192, T = 8 anyway. Partial sums are reduced inside each warp
 * by a transposing butterfly (V values in 31 shuffles instead of 5V), then across the 8 warps
 * through 2 KB of static shared memory; one thread per output applies the epilogue (no atomics,
 * deterministic). At most 32 accumulators per lane: T <= 4 runs as one pass over W with all rows,
 * 5 <= T <= 8 as two half-row passes (each W byte still read once), T > 8 in groups of 8.
 */
#include "common.cuh"

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
#define MV_LDY ((MV_EPI) == 2 ? (MV_N) / 2 : (MV_N))
#endif
#ifndef MV_YBF16
#define MV_YBF16 0
#endif
#ifndef MV_TMAX /* accepted for the contract; any T works (T > 8 re-streams W per group of 8) */
#define MV_TMAX 8
#endif
#ifndef MV_ROWS
#define MV_ROWS IG_MV_ROWS_DEFAULT(MV_N, (MV_EPI) == 2)
#endif

#ifndef IG_GEMV_HELPERS
#define IG_GEMV_HELPERS

/* Packed row of W for local row r of CTA c. SwiGLU CTAs own RW/2 gate rows and the matching up
 * rows (packed rows 32q+j and 32q+16+j are gate and up of output 16q+j), so the epilogue finds
 * both halves in the same CTA. */
template <int RW, bool SW>
IG_DEV int ig_mv_row(int c, int r) {
    if (!SW) return c * RW + r;
    const int h = RW >= 2 ? RW / 2 : 1, p = c * h + (r % h);
    return 32 * (p >> 4) + (r >= h ? 16 : 0) + (p & 15);
}

/* VE activations of row xr starting at element k, as f32 (zero when !ok). */
template <int VE, bool XB>
IG_DEV void ig_mv_loadx(const void *xr, int k, bool ok, float *xf) {
    if (!ok) {
#pragma unroll
        for (int e = 0; e < VE; e++) xf[e] = 0.0f;
    } else if (XB) {
        const unsigned short *p = (const unsigned short *)xr + k;
        if (VE == 8) {
            ig_unpack8_bf16(__ldg((const uint4 *)p), xf);
        } else {
            uint2 v = __ldg((const uint2 *)p);
            xf[0] = __uint_as_float(v.x << 16), xf[1] = __uint_as_float(v.x & 0xffff0000u);
            xf[2] = __uint_as_float(v.y << 16), xf[3] = __uint_as_float(v.y & 0xffff0000u);
        }
    } else {
        const float *p = (const float *)xr + k;
#pragma unroll
        for (int e = 0; e < VE; e += 4) {
            float4 v = __ldg((const float4 *)(p + e));
            xf[e] = v.x, xf[e + 1] = v.y, xf[e + 2] = v.z, xf[e + 3] = v.w;
        }
    }
}

/* Butterfly reduce-scatter of V = 2^p values (p <= 5) across the warp: at offset o the lane
 * keeps the half of its values selected by (lane & o) and adds the partner's copy of that half;
 * after p steps each lane holds one value summed over 2^p lanes, then plain xor steps finish the
 * sum. Returns the total of value index ig_mv_bfly_idx(lane) (valid in every lane). */
template <int V>
IG_DEV float ig_mv_bfly(float *a, int lane) {
#pragma unroll
    for (int o = 16, h = V / 2; h >= 1; o >>= 1, h >>= 1) {
        const bool hi = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < h; i++) {
            float keep = hi ? a[i + h] : a[i], send = hi ? a[i] : a[i + h];
            a[i] = keep + __shfl_xor_sync(IG_FULL_MASK, send, o);
        }
    }
    float s = a[0];
    /* remaining offsets: 16 >> log2(V) .. 1 */
#pragma unroll
    for (int o = (V >= 32 ? 0 : 16 / V); o > 0; o >>= 1) s += __shfl_xor_sync(IG_FULL_MASK, s, o);
    return s;
}
template <int V>
IG_DEV int ig_mv_bfly_idx(int lane) {
    int idx = 0;
#pragma unroll
    for (int o = 16, h = V / 2; h >= 1; o >>= 1, h >>= 1)
        if (lane & o) idx += h;
    return idx;
}

/* One pass over this warp's K slice for TB tokens (rows >= tn of the group read as zero) and RC
 * CTA rows starting at local row r0; writes red[warp][t][r0 + r] (red is [8][8][8] floats). */
template <int K, bool WB, bool XB, int RW, bool SW, int TB, int RC>
IG_DEV void ig_mv_pass(const void *x, int tn, const char *w, int c, int r0, float *red) {
    constexpr int WES = WB ? 2 : 4, XES = XB ? 2 : 4;
    constexpr int VE = 16 / WES;          /* elements per 16-byte W vector */
    constexpr int KV = K / VE;            /* vectors per row */
    constexpr int U = RC >= 8 ? 1 : 8 / RC; /* steps per iteration: ~8 W loads in flight per lane */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int v0 = warp * KV / 8, v1 = (warp + 1) * KV / 8;
    const char *wr[RC];
#pragma unroll
    for (int r = 0; r < RC; r++) wr[r] = w + (size_t)ig_mv_row<RW, SW>(c, r0 + r) * (K * WES);
    float acc[TB * RC];
#pragma unroll
    for (int i = 0; i < TB * RC; i++) acc[i] = 0.0f;

    for (int v = v0 + lane; v < v1; v += 32 * U) {
        uint4 raw[U][RC];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < RC; r++)
                raw[u][r] = (v + 32 * u < v1) ? ig_ldg16(wr[r] + (size_t)(v + 32 * u) * 16)
                                              : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int vv = v + 32 * u;
            if (vv >= v1) break;
            float wf[RC][VE];
#pragma unroll
            for (int r = 0; r < RC; r++) ig_unpack16(raw[u][r], WES, wf[r]);
#pragma unroll
            for (int t = 0; t < TB; t++) {
                float xf[VE];
                ig_mv_loadx<VE, XB>((const char *)x + (size_t)t * K * XES, vv * VE, t < tn, xf);
#pragma unroll
                for (int r = 0; r < RC; r++)
#pragma unroll
                    for (int e = 0; e < VE; e++) acc[t * RC + r] = fmaf(xf[e], wf[r][e], acc[t * RC + r]);
            }
        }
    }
    const float s = ig_mv_bfly<TB * RC>(acc, lane);
    const int idx = ig_mv_bfly_idx<TB * RC>(lane);
    /* lanes that differ only in the bits the plain xor steps reduced hold the same value */
    if ((lane & ((TB * RC >= 32) ? 0 : (32 / (TB * RC) - 1))) == 0) {
        /* value index idx is acc[t * RC + r]; lanes with the low bits set hold copies */
        red[(warp * 8 + idx / RC) * 8 + r0 + idx % RC] = s;
    }
}

#endif /* IG_GEMV_HELPERS */

#if MV_WBF16
#define MV_WT_ unsigned short
#else
#define MV_WT_ float
#endif
#if MV_XBF16
#define MV_XT_ unsigned short
#else
#define MV_XT_ float
#endif

extern "C" __global__ void __launch_bounds__(IG_MV_BLOCK, 2)
MV_NAME(int T, const MV_XT_ *x, const MV_WT_ *w, const float *bias, void *y) {
    constexpr int RW = MV_ROWS, XES = MV_XBF16 ? 2 : 4;
    constexpr bool SW = (MV_EPI) == 2;
    static_assert(MV_K % 8 == 0, "MV_K must be a multiple of 8 (16-byte loads)");
    static_assert(RW >= 1 && RW <= 8 && 16 % RW == 0, "MV_ROWS must be 1, 2, 4 or 8");
    static_assert(!SW || (RW >= 2 && MV_N % 32 == 0), "SwiGLU needs MV_ROWS >= 2 and I % 16 == 0");
    static_assert(IG_MV_BLOCK == 256, "the K split assumes 8 warps");
    __shared__ float red[8 * 8 * 8]; /* [warp][token][row] */
    const int c = blockIdx.x;
    const char *wc = (const char *)w;
    for (int t0 = 0; t0 < T; t0 += 8) {
        const int tn = min(8, T - t0);
        const void *xg = (const char *)x + (size_t)t0 * MV_K * XES;
        if (tn == 1) {
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 1, RW>(xg, tn, wc, c, 0, red);
        } else if (tn == 2) {
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 2, RW>(xg, tn, wc, c, 0, red);
        } else if (tn <= 4) {
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 4, RW>(xg, tn, wc, c, 0, red);
        } else if (RW >= 2) {
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 8, (RW >= 2 ? RW / 2 : 1)>(xg, tn, wc, c, 0, red);
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 8, (RW >= 2 ? RW / 2 : 1)>(xg, tn, wc, c, RW / 2, red);
        } else {
            ig_mv_pass<MV_K, MV_WBF16, MV_XBF16, RW, SW, 8, 1>(xg, tn, wc, c, 0, red);
        }
        __syncthreads();
        const int tid = threadIdx.x;
        if (!SW) {
            if (tid < tn * RW) {
                const int t = tid / RW, r = tid % RW, n = c * RW + r;
                float s = 0.0f;
#pragma unroll
                for (int wp = 0; wp < 8; wp++) s += red[(wp * 8 + t) * 8 + r];
                if (n < MV_N) { /* padded rows are computed (zero weights) but never stored */
                    if (MV_BIAS) s += bias[n];
                    float *yr = (float *)y + (size_t)(t0 + t) * MV_LDY;
                    if ((MV_EPI) == 1) yr[n] += s;
                    else yr[n] = s;
                }
            }
        } else {
            constexpr int H = RW >= 2 ? RW / 2 : 1; /* (RW >= 2 whenever SW) */
            if (tid < tn * H) {
                const int t = tid / H, i = tid % H;
                float g = 0.0f, u = 0.0f;
#pragma unroll
                for (int wp = 0; wp < 8; wp++) g += red[(wp * 8 + t) * 8 + i], u += red[(wp * 8 + t) * 8 + H + i];
                if (MV_BIAS) g += bias[ig_mv_row<RW, true>(c, i)], u += bias[ig_mv_row<RW, true>(c, H + i)];
                const float o = g / (1.0f + expf(-g)) * u;
                const size_t yo = (size_t)(t0 + t) * MV_LDY + c * H + i;
                if (MV_YBF16) ((unsigned short *)y)[yo] = ig_f32_to_bf16(o);
                else ((float *)y)[yo] = o;
            }
        }
        __syncthreads();
    }
}

#undef MV_WT_
#undef MV_XT_
#undef MV_NAME
#undef MV_K
#undef MV_N
#undef MV_WBF16
#undef MV_XBF16
#undef MV_BIAS
#undef MV_EPI
#undef MV_LDY
#undef MV_YBF16
#undef MV_TMAX
#undef MV_ROWS
