/* gemv_tc.cu — template: the decode matmul of gemv.cu for 2..8 tokens on tensor cores. Same
 * parameters, arguments and results as gemv.cu (see there), for 16-bit x (bf16, or half when
 * IG_F16) and 16-bit weights or q8r rows (MV_WQ 8, wq.cuh): y = x · Wᵀ (+ bias), an optional fused
 * RMSNorm prologue, and the store / residual add / SwiGLU / GeGLU epilogues.
 *
 * Why: gemv.cu multiplies every weight by every token on the CUDA cores, so at 8 tokens it is
 * bound by FMAs and shared-memory reads of x, not by HBM (the harness: 22-26% of the copy
 * bandwidth at T = 8 against 60-100% at T = 1). Here the tokens are the N = 8 columns of
 * mma.sync m16n8k16: a warp multiplies 16 weight rows by 16 k of all (up to) 8 tokens in one
 * instruction, and the weights stream once, as at T = 1.
 *
 * Instantiate with MV_NAME, MV_K, MV_N, MV_BIAS, MV_EPI, MV_LDY, MV_YBF16, MV_NORM, MV_EPS, MV_WQ, MV_WG
 * (MV_WBF16 and MV_XBF16 are 1 by definition); defines
 *   extern "C" __global__ void MV_NAME(int T, const void *x, const float *gamma, const unsigned short *w,
 *                                      const float *bias, void *y);
 * with T <= IG_MVT_TMAX (8) and MV_K % 32 == 0 (q8r: % 64 == 0, q4r: % 128 == 0).
 *
 * q8r rows (K codes, then the row's f32 scale): a lane's 16 bytes of a row are 16 codes, so a block
 * is 64 columns and four mma; the A fragments come from the codes by wq.cuh's ig_wq8_frag (logic
 * ops and one fma per pair, exact), x is paired the same way (ig_wq_xpairs), and the epilogue
 * multiplies by the rows' scales. Half the blocks are in flight (a block is as many bytes). f8r
 * rows (MV_WF8 1, e4m3 codes in q8r's layout): ig_wf8_frag (e4m3's bits moved into the 16-bit type,
 * three logic ops a pair), the sums times IG_WF8_UNIT_H before the scales.
 *
 * q4r rows (MV_WQ 4: K / 2 bytes of nibbles, then an f16 (scale, min) per group of MV_WG): a lane's
 * 16 bytes are 32 columns inside one group, so a block is 128 columns and eight mma; wq.cuh's
 * ig_wq4_adj turns the two nibbles of a byte into the weights of adjacent columns (scale q + min in
 * f16 arithmetic, rounded to f16 then to the 16-bit type), so x pairs as it lies (no byte
 * permutes; before: ig_wq4_pair's (c + j, c + j + 4) in f32 and a permute per x pair, as qgemm.cu
 * had until its rework); the scales are in the weights, so the epilogue takes none. x is read
 * at the mma (L1), not staged with the weights, to keep the registers of a block's 64 bytes of x
 * free for weights in flight. (Before this path, q4r at 2..8 tokens ran gemv.cu: 10-14% of the copy
 * bandwidth at T = 8 on an H100, against 50-67% for q8r here; q4r here 32% with ig_wq4_pair, its fma + cvt
 * per pair bound it, 35-36.5% with ig_wq4_adj: H100, 2048 x 8192 11.07 -> 9.72 us, 8192 x 2048 11.20 -> 10.22.)
 *
 * launch: grid = IG_MVT_GRID_X(MV_N, MV_K, MV_EPI >= 2, max_ctas), block = IG_MVT_BLOCK = 256,
 *         dynamic smem = IG_MVT_SMEM(MV_K, MV_NORM) (the normalized x when MV_NORM, else 0; the
 *         host raises every function's dynamic smem limit to 96 KB, enough for K <= 6112).
 *
 * Work split: a unit is 16 packed rows (SwiGLU: 32, the 16 gate rows and their 16 up rows, as
 * packed). KS = IG_MVT_KS(K) warps share a unit, warp ks taking the 32-column blocks ks, ks + KS,
 * ...; their partial tiles meet in shared memory. Per block, lane (g = lane / 4, q = lane % 4)
 * loads 16 bytes of rows g and g + 8 (and the up rows): columns 8q .. 8q + 7 of the block, and the
 * same 16 bytes of token g's x. Within a block the k order is permuted, the same for A and B:
 * physical columns 8q + {0,1}, {2,3} are the first mma's logical columns 2q + {0,1}, 2q + 8 + {0,1},
 * and 8q + {4,5}, {6,7} the second's, so every fragment is one 16-byte load and no shuffles are
 * needed. D[r][t] lands in lane (r % 8) * 4 + t / 2: lanes hold rows g, g + 8 of tokens 2q, 2q + 1.
 * x comes from global memory through the read-only path (L1: every warp of an SM reads the same
 * few KB), or from shared memory after the fused RMSNorm (rows padded by 64 bytes when 2K is a
 * multiple of 128, so the 8 tokens of a load fall in different banks). Tokens >= T read nothing
 * and their columns are never stored.
 */
#include "common.cuh"
#include "launch.h"

#ifndef MV_NAME
#define MV_NAME ig_gemv_tc
#endif
#ifndef MV_K
#define MV_K 2048
#endif
#ifndef MV_N
#define MV_N 2048
#endif
#ifndef MV_BIAS
#define MV_BIAS 0
#endif
#ifndef MV_EPI
#define MV_EPI 0
#endif
#ifndef MV_LDY
#define MV_LDY ((MV_EPI) >= 2 ? MV_N / 2 : MV_N)
#endif
#ifndef MV_YBF16
#define MV_YBF16 0
#endif
#ifndef MV_NORM
#define MV_NORM 0
#endif
#ifndef MV_EPS
#define MV_EPS 1e-6f
#endif
#ifndef MV_WQ
#define MV_WQ 0
#endif
#ifndef MV_WF8 /* 1: the 8-bit rows are f8r (e4m3 codes, wq.cuh) */
#define MV_WF8 0
#endif
#ifndef MV_WG
#define MV_WG 32
#endif
#include "wq.cuh"

#ifndef IG_MVT_HELPERS
#define IG_MVT_HELPERS
/* d += a (16 rows x 16 k) . b (16 k x 8 tokens) of the package's 16-bit type, f32 accumulate */
IG_DEV void ig_mvt_mma(float *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#if defined(IG_CUDA_EMUL) /* tests/cuda_host/cuda_emul.h's warp-collective stand-in */
    const unsigned a[4] = {a0, a1, a2, a3};
    ig_mma16(d, a, b0, b1);
#elif IG_F16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}
#endif /* IG_MVT_HELPERS */

extern "C" __global__ void __launch_bounds__(IG_MVT_BLOCK, 2)
MV_NAME(int T, const void *x, const float *gamma, const void *w, const float *bias, void *y) {
#if __CUDA_ARCH__ >= 800 || defined(IG_CUDA_EMUL)
    constexpr bool SW = (MV_EPI) == 2 || (MV_EPI) == 3, GELU = (MV_EPI) == 3;
    constexpr int RT = SW ? 32 : 16;               /* packed rows per unit */
    constexpr int NU = IG_NPAD16(MV_N) / RT;       /* units */
    constexpr bool Q8 = MV_WQ == 8, Q4 = MV_WQ == 4;
    constexpr int CB = Q8 ? 64 : Q4 ? 128 : 32;    /* columns of a block (64 bytes of a row) */
    /* bytes of a packed row (q8r: codes, scale; q4r: codes, (scale, min) pairs) */
    constexpr int RBY = Q8 ? MV_K + 16 : Q4 ? IG_WQ_ROWB(MV_K, 4, MV_WG) : MV_K * 2;
    constexpr int NJ = MV_K / CB;                  /* blocks of a row */
    constexpr int KS = IG_MVT_KS(MV_K), UPC = 8 / KS; /* warps per unit, units per CTA step */
    constexpr int NA = SW ? 4 : 2;                 /* rows a lane loads per block: g, g + 8 (, up) */
    constexpr int U = (SW ? 4 : 8) / (Q8 || Q4 ? 2 : 1); /* blocks in flight per warp */
    constexpr int XS = IG_MVT_XS(MV_K);            /* staged x row stride (elements) */
    static_assert(MV_K % CB == 0, "gemv_tc needs K % 32 == 0 (q8r: K % 64 == 0, q4r: K % 128 == 0)");
    static_assert(MV_WQ == 0 || MV_WQ == 8 || (Q4 && MV_WG >= 32 && MV_K % MV_WG == 0), "gemv_tc reads 16-bit, q8r or q4r rows");
    static_assert(!SW || IG_NPAD16(MV_N) % 32 == 0, "SwiGLU units are 32 packed rows");
    static_assert(IG_MVT_BLOCK == 256, "8 warps per CTA");
    IG_DYN_SMEM(uint4, ig_mvt_smem);
    __shared__ float part[8][32][2 * NA];
    const int lane = threadIdx.x & 31, w8 = threadIdx.x >> 5, slot = w8 / KS, ks = w8 % KS;
    const int g = lane >> 2, q = lane & 3;

    /* this lane's token row of x: normalized into shared memory, or straight from global */
    const unsigned short *xt;
    if (MV_NORM) {
        /* a warp per token row, all rows at once: their loads in flight together and warp sums only
         * (a block-wide sum per row in turn put T dependent L2 round trips and 2T barriers in front
         * of every CTA's first load of W) */
        unsigned short *xs = (unsigned short *)ig_mvt_smem;
        for (int t = w8; t < T; t += IG_MVT_BLOCK / 32) {
            const float *xr = (const float *)x + (size_t)t * MV_K;
            float ss = 0.0f;
            for (int i = 4 * lane; i < MV_K; i += 128) {
                const float4 v = *(const float4 *)(xr + i);
                ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
            }
            ss = ig_warp_sum(ss);
            const float s = 1.0f / sqrtf(ss / (float)MV_K + MV_EPS); /* as rmsnorm.cu */
            for (int i = 4 * lane; i < MV_K; i += 128) { /* the row again (L1) */
                const float4 v = *(const float4 *)(xr + i), gm = *(const float4 *)(gamma + i);
                *(uint2 *)(xs + (size_t)t * XS + i) = make_uint2(ig_pack2_h(v.x * s * gm.x, v.y * s * gm.y),
                                                                 ig_pack2_h(v.z * s * gm.z, v.w * s * gm.w));
            }
        }
        __syncthreads();
        xt = xs + (size_t)(g < T ? g : 0) * XS;
    } else {
        xt = (const unsigned short *)x + (size_t)(g < T ? g : 0) * MV_K;
    }
    const bool tok = g < T;

    for (int ub = blockIdx.x * UPC; ub < NU; ub += gridDim.x * UPC) { /* CTA-uniform (barriers inside) */
        const int u = ub + slot;
        float d[SW ? 2 : 1][4];
#pragma unroll
        for (int i = 0; i < (SW ? 2 : 1); i++) d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.0f;
        if (u < NU) {
            /* this lane's 16 bytes of row g of the unit in block 0; row g + 8r is 8r rows on */
            const char *wr = (const char *)w + ((size_t)u * RT + g) * RBY + 16 * q;
            constexpr int XV = Q8 ? 2 : Q4 ? 0 : 1; /* 16-byte vectors of x per block and lane staged with W */
            for (int j0 = ks; j0 < NJ; j0 += KS * U) {
                uint4 a[U][NA], b[U][XV > 0 ? XV : 1];
                unsigned sm[U][Q4 ? NA : 1]; /* q4r: each row's (scale, min) of the lane's group */
#pragma unroll
                for (int i = 0; i < U; i++) {
                    const int j = j0 + i * KS;
#pragma unroll
                    for (int r = 0; r < NA; r++) {
                        a[i][r] = j < NJ ? ig_ldg16(wr + (size_t)r * 8 * RBY + (size_t)j * 64) : make_uint4(0u, 0u, 0u, 0u);
                        if (Q4)
                            sm[i][Q4 ? r : 0] = j < NJ ? __ldg((const unsigned *)(wr - 16 * q + (size_t)r * 8 * RBY + MV_K / 2 +
                                                                                  4 * ((j * CB + 32 * q) / MV_WG)))
                                                       : 0u;
                    }
#pragma unroll
                    for (int v = 0; v < XV; v++) {
                        const unsigned short *xp = xt + j * CB + 8 * (XV * q + v);
                        if (j < NJ && tok)
                            b[i][v] = MV_NORM ? *(const uint4 *)xp : ig_ldg16(xp);
                        else
                            b[i][v] = make_uint4(0u, 0u, 0u, 0u);
                    }
                }
#pragma unroll
                for (int i = 0; i < U; i++)
#pragma unroll
                    for (int h = 0; h < (SW ? 2 : 1); h++) { /* the gate (or only) tile, the up tile */
                        const uint4 r0 = a[i][2 * h], r8 = a[i][2 * h + 1];
                        if (Q4) { /* word p of the 32 codes: columns 8p..8p+7 of the lane's 32; two mma */
                            const int j = j0 + i * KS;
                            unsigned s0, m0, s8, m8;
                            ig_wq4_sm2h(sm[i][Q4 ? 2 * h : 0], &s0, &m0), ig_wq4_sm2h(sm[i][Q4 ? 2 * h + 1 : 0], &s8, &m8);
#pragma unroll
                            for (int p = 0; p < 4; p++) {
                                const unsigned c0 = ig_wq_w(r0, p), c8 = ig_wq_w(r8, p), c04 = c0 >> 4, c84 = c8 >> 4;
                                uint4 xv = make_uint4(0u, 0u, 0u, 0u);
                                if (j < NJ && tok) {
                                    const unsigned short *xp = xt + j * CB + 32 * q + 8 * p;
                                    xv = MV_NORM ? *(const uint4 *)xp : ig_ldg16(xp);
                                }
                                /* adjacent pairs (bytes 0, 1: columns c .. c + 3, then bytes 2, 3): x as it lies */
                                ig_mvt_mma(d[h], ig_wq4_adj(c0, c04, 0, s0, m0), ig_wq4_adj(c8, c84, 0, s8, m8),
                                           ig_wq4_adj(c0, c04, 1, s0, m0), ig_wq4_adj(c8, c84, 1, s8, m8), xv.x, xv.y);
                                ig_mvt_mma(d[h], ig_wq4_adj(c0, c04, 2, s0, m0), ig_wq4_adj(c8, c84, 2, s8, m8),
                                           ig_wq4_adj(c0, c04, 3, s0, m0), ig_wq4_adj(c8, c84, 3, s8, m8), xv.z, xv.w);
                            }
                        } else if (Q8) { /* word p of the 16 codes: columns 4p..4p+3 of the lane's 16 */
#pragma unroll
                            for (int p = 0; p < 4; p++) {
                                const uint2 f0 = MV_WF8 ? ig_wf8_frag(ig_wq_w(r0, p)) : ig_wq8_frag(ig_wq_w(r0, p));
                                const uint2 f8 = MV_WF8 ? ig_wf8_frag(ig_wq_w(r8, p)) : ig_wq8_frag(ig_wq_w(r8, p));
                                const uint4 xv = b[i][p >> 1];
                                const uint2 xp = (p & 1) ? ig_wq_xpairs(xv.z, xv.w) : ig_wq_xpairs(xv.x, xv.y);
                                ig_mvt_mma(d[h], f0.x, f8.x, f0.y, f8.y, xp.x, xp.y);
                            }
                        } else {
                            ig_mvt_mma(d[h], r0.x, r8.x, r0.y, r8.y, b[i][0].x, b[i][0].y);
                            ig_mvt_mma(d[h], r0.z, r8.z, r0.w, r8.w, b[i][0].z, b[i][0].w);
                        }
                    }
            }
        }
        if (KS > 1) { /* the unit's KS partial tiles meet in warp ks == 0 */
            if (u < NU)
#pragma unroll
                for (int h = 0; h < (SW ? 2 : 1); h++)
#pragma unroll
                    for (int e = 0; e < 4; e++) part[w8][lane][4 * h + e] = d[h][e];
            __syncthreads();
            if (ks == 0 && u < NU)
                for (int k = 1; k < KS; k++)
#pragma unroll
                    for (int h = 0; h < (SW ? 2 : 1); h++)
#pragma unroll
                        for (int e = 0; e < 4; e++) d[h][e] += part[w8 + k][lane][4 * h + e];
        }
        if (ks == 0 && u < NU) {
            /* element e of the lane: row g + 8 (e / 2) of the unit, token 2q + e % 2 */
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int t = 2 * q + (e & 1), r = g + 8 * (e >> 1);
                if (t >= T) continue;
                /* q8r / f8r: the rows' scales (after each row's codes; f8r's sums first times their
                 * codes' unit: the product of unit and scale may be past f32's range) */
                constexpr float QU = MV_WF8 ? IG_WF8_UNIT_H : 1.0f;
                auto rs = [&](int row) { return Q8 ? __ldg((const float *)((const char *)w + (size_t)row * RBY + MV_K)) : 1.0f; };
                if (!SW) {
                    const int n = u * 16 + r;
                    if (n >= MV_N) continue; /* padded rows are computed (zero weights) but never stored */
                    const float s = d[0][e] * QU * rs(n) + (MV_BIAS ? bias[n] : 0.0f);
                    float *yr = (float *)y + (size_t)t * MV_LDY;
                    if ((MV_EPI) == 1) yr[n] += s;
                    else yr[n] = s;
                } else {
                    const float ga = d[0][e] * QU * rs(u * 32 + r) + (MV_BIAS ? bias[u * 32 + r] : 0.0f);
                    const float up = d[1][e] * QU * rs(u * 32 + 16 + r) + (MV_BIAS ? bias[u * 32 + 16 + r] : 0.0f);
                    const float o = ig_glu(ga, up, GELU);
                    const size_t yo = (size_t)t * MV_LDY + u * 16 + r;
                    if (MV_YBF16) ((unsigned short *)y)[yo] = ig_f32_to_h(o);
                    else ((float *)y)[yo] = o;
                }
            }
        }
        if (KS > 1) __syncthreads(); /* part is free for the next step */
    }
#endif
}

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
