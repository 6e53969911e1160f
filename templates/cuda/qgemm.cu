/* qgemm.cu — template: y = x · Wᵀ (+ bias) on tensor cores for quantized rows (wq.cuh: q8r, q4r)
 * and steps of more tokens than the GEMVs take (9 .. the `qg_tmax` tuning key): the quantized
 * bytes are read once per step (per 64 tokens) and never written out as 16 bits.
 *
 * Why: before, such a step dequantized every matrix into a 16-bit scratch (dequant.cu: reads the
 * codes, writes 2 bytes a weight) for cuBLAS, which reads it again: 4.5x (q8r) / 9x (q4r) the
 * quantized bytes per matrix, so batched decode (8..128 tokens a step, bound by reading the
 * weights) ran at 0.43-0.64x of bf16. Here a 16-byte vector of codes becomes mma A fragments in
 * registers (logic ops and one or two fma per pair, exact for q8r), each reused by the CTA's 8 token
 * tiles of 8.
 *
 * Instantiate with QG_NAME, QG_K, QG_N (packed rows; SwiGLU: 2I, gate and up interleaved by 16),
 * QG_WQ (8: q8r, 4: q4r), QG_WG (q4r's group: 32, 64, 128), QG_BIAS, QG_EPI (0 store f32 y[T][QG_LDY],
 * 1 add into f32 y (the residual), 2 SwiGLU, 3 GeGLU: y[T][QG_N / 2] of the 16-bit type when QG_YBF16,
 * else f32), QG_LDY, QG_YBF16, QG_SPLIT (K split over that many CTAs, see below); defines
 *   extern "C" __global__ void QG_NAME(int T, const unsigned short *x, const unsigned char *w,
 *                                      const float *bias, void *y, float *ws, unsigned *cnt);
 * x [T][QG_K] in the package's 16-bit type (bf16, or half when IG_F16), w the quantized rows.
 * launch: grid (IG_QG_GRID_X(QG_N), IG_QG_GRID_Y(T), QG_SPLIT), block IG_QG_BLOCK = 256, dynamic
 * smem IG_QG_SMEM (80 KB: the host raises every function's limit to 96 KB). With QG_SPLIT > 1, ws
 * holds IG_QG_WS_FLOATS(QG_N, T, QG_SPLIT) floats and cnt IG_QG_COUNTERS(QG_N, T) counters, zero
 * before the first launch (the workspace is cleared at init; the last CTA of a tile puts its
 * counter back to zero). Requires QG_K % 64 == 0 (q4r: and whole groups), sm_80+.
 *
 * Tiling: a CTA computes 128 packed rows x 64 tokens; warp w owns rows 16w .. 16w + 15 and all 8
 * token tiles of 8 (tiles past T are skipped, warp-uniformly), f32 accumulators 8 x 4 a lane.
 * K goes in stages of 64 columns through IG_QG_STAGES cp.async buffers: the rows' code bytes
 * (q8r 64, q4r 32 a row; q4r also the stage's (scale, min) words) and the 64 tokens' x (tokens
 * past T zero-filled). Per 16-byte chunk of a row (16 q8r / 32 q4r columns) one ldmatrix.x4 gives
 * a lane (g = lane / 4, q = lane % 4) the 32-bit word q of rows g, g + 8 of two chunks: q8r
 * columns 4q .. 4q + 3 (ig_wq8_frag: pairs (4q, 4q+2), (4q+1, 4q+3) as the mma's k (2q, 2q+1),
 * (2q+8, 2q+9)), q4r columns 8q .. 8q + 7 (pairs (j, j + 4) of the nibbles, two mma a word, each
 * weight scale q + min rounded once to the 16-bit type: ig_wq4_pair). x is read in the same
 * permuted k order: a 64-bit (q8r) / 128-bit (q4r) shared load of token g's columns and byte permutes
 * (ig_wq_xpairs). Shared rows are padded so that ldmatrix and the x loads are free of bank conflicts.
 * q8r's row scales multiply in the epilogue (exact codes, f32 scale); q4r's group scales are in the
 * fragments (the 16-bit weight the dequantized copy held: f16 scale and min, one rounding).
 *
 * Split K (QG_SPLIT = S > 1, for matrices with few row tiles: the o / down projections): CTA z takes
 * stages [z nk / S, (z + 1) nk / S), writes its accumulators to ws and counts itself in; the last of
 * a tile sums the S partials in z order (deterministic) and runs the epilogue.
 *
 * Epilogue: the tile through shared memory (q8r rows scaled on the way), then written row-fastest:
 * y[t][n] = v + bias, or += (residual), or the GLU of gate row 32u + r and up row 32u + 16 + r into
 * output column 16u + r.
 */
#include "common.cuh"
#include "launch.h"
#include "mma.cuh"
#include "wq.cuh"

#ifndef QG_NAME
#define QG_NAME ig_qgemm
#endif
#ifndef QG_K
#define QG_K 2048
#endif
#ifndef QG_N
#define QG_N 2048
#endif
#ifndef QG_WQ
#define QG_WQ 8
#endif
#ifndef QG_WG
#define QG_WG 128
#endif
#ifndef QG_BIAS
#define QG_BIAS 0
#endif
#ifndef QG_EPI
#define QG_EPI 0
#endif
#ifndef QG_LDY
#define QG_LDY ((QG_EPI) >= 2 ? QG_N / 2 : QG_N)
#endif
#ifndef QG_YBF16
#define QG_YBF16 0
#endif
#ifndef QG_SPLIT
#define QG_SPLIT 1
#endif

#ifndef IG_QG_HELPERS
#define IG_QG_HELPERS
/* Stage geometry (bytes): W rows (codes, padded by 16 for ldmatrix), q4r's scale words (16 a row),
 * x rows of 64 elements padded so that 8 tokens' loads hit distinct banks. */
#define IG_QG_WRS(WQ) ((WQ) == 8 ? 80 : 48)
#define IG_QG_XRS(WQ) ((WQ) == 8 ? 160 : 192)
#define IG_QG_SOFF(WQ) (IG_QG_BM * IG_QG_WRS(WQ))
#define IG_QG_XOFF(WQ) (IG_QG_SOFF(WQ) + ((WQ) == 4 ? IG_QG_BM * 16 : 0))
#define IG_QG_STB(WQ) (IG_QG_XOFF(WQ) + IG_QG_BN * IG_QG_XRS(WQ))
#endif

extern "C" __global__ void __launch_bounds__(IG_QG_BLOCK, 2)
QG_NAME(int T, const unsigned short *x, const unsigned char *w, const float *bias, void *y, float *ws, unsigned *cnt) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
    constexpr bool Q8 = QG_WQ == 8, SW = (QG_EPI) == 2 || (QG_EPI) == 3, GELU = (QG_EPI) == 3;
    constexpr int K = QG_K, NP = IG_NPAD16(QG_N), RB = IG_WQ_ROWB(QG_K, QG_WQ, QG_WG), BM = IG_QG_BM, BN = IG_QG_BN;
    constexpr int WRS = IG_QG_WRS(QG_WQ), XRS = IG_QG_XRS(QG_WQ), SOFF = IG_QG_SOFF(QG_WQ), XOFF = IG_QG_XOFF(QG_WQ);
    constexpr int STB = IG_QG_STB(QG_WQ), NST = IG_QG_STAGES, S = QG_SPLIT;
    constexpr int CPR = Q8 ? 4 : 2;                                   /* 16-byte code chunks a row per stage */
    constexpr int SB = Q8 ? 0 : 4 * (64 / QG_WG > 0 ? 64 / QG_WG : 1); /* q4r scale bytes a row per stage */
    constexpr int NK = K / 64;                                        /* stages of the whole row */
    static_assert(K % 64 == 0 && (Q8 || (K % QG_WG == 0 && (QG_WG == 32 || QG_WG == 64 || QG_WG == 128))),
                  "qgemm needs K % 64 == 0 (q4r: whole groups of 32, 64 or 128)");
    static_assert(QG_WQ == 8 || QG_WQ == 4, "qgemm reads q8r or q4r rows");
    static_assert(!SW || NP % 32 == 0, "SwiGLU units are 32 packed rows");
    static_assert(IG_QG_BLOCK == 256 && BM == 128 && BN == 64, "8 warps of 16 rows x 64 tokens");
    static_assert(NST * STB <= IG_QG_SMEM && BN * (BM + 4) * 4 <= IG_QG_SMEM, "stages and the epilogue tile fit");
    IG_DYN_SMEM(uint4, ig_qg_smem);
    unsigned char *sm = (unsigned char *)ig_qg_smem;
    __shared__ int last;
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int m0 = blockIdx.x * BM, t0 = blockIdx.y * BN, tn = T - t0 < BN ? T - t0 : BN;
    const int z = S > 1 ? (int)blockIdx.z : 0;
    const int kb0 = z * NK / S, kb1 = (z + 1) * NK / S, nk = kb1 - kb0;

    /* stage kb (of the row) into buffer b: every thread copies 2 16-byte code chunks (q8r; q4r: 1
     * and a scale word for half the rows) and 2 (q8r) / 4 (q4r: 1024 chunks of 8 columns ...) of x */
    auto load = [&](int kb, int b) {
        unsigned char *st = sm + b * STB;
        for (int i = tid; i < BM * CPR; i += IG_QG_BLOCK) {
            const int r = i / CPR, c = i % CPR, n = m0 + r;
            const unsigned char *src = w + (size_t)(n < NP ? n : 0) * RB + (size_t)kb * (16 * CPR) + 16 * c;
            ig_cp16(ig_smem_addr(st + r * WRS + 16 * c), src, n < NP ? 16 : 0);
        }
        if (!Q8)
            for (int r = tid; r < BM; r += IG_QG_BLOCK) {
                const int n = m0 + r;
                const unsigned char *src = w + (size_t)(n < NP ? n : 0) * RB + K / 2 + (size_t)4 * (kb * 64 / QG_WG);
                if (SB == 8) ig_cp8(ig_smem_addr(st + SOFF + 16 * r), src, n < NP ? 8 : 0);
                else ig_cp4(ig_smem_addr(st + SOFF + 16 * r), src, n < NP ? 4 : 0);
            }
        for (int i = tid; i < BN * 8; i += IG_QG_BLOCK) { /* 8 chunks of 8 elements a token */
            const int t = i / 8, c = i % 8;
            const unsigned short *src = x + (size_t)(t < tn ? t0 + t : 0) * K + (size_t)kb * 64 + 8 * c;
            ig_cp16(ig_smem_addr(st + XOFF + t * XRS + 16 * c), src, t < tn ? 16 : 0);
        }
    };

    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    const int ntile = (tn + 7) / 8; /* token tiles with a token */
    /* ldmatrix: lane L names row (L & 7) + 8 ((L >> 3) & 1) of the warp's 16, chunk + (L >> 4) */
    const int lrow = 16 * wp + (lane & 7) + 8 * ((lane >> 3) & 1), lch = lane >> 4;

#pragma unroll
    for (int i = 0; i < NST - 1; i++) {
        if (i < nk) load(kb0 + i, i);
        ig_cp_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        ig_cp_wait<NST - 2>();
        __syncthreads(); /* stage kt landed for every thread; stage kt - 1's buffer is free */
        if (kt + NST - 1 < nk) load(kb0 + kt + NST - 1, (kt + NST - 1) % NST);
        ig_cp_commit();
        const unsigned char *st = sm + (kt % NST) * STB;
        const unsigned char *xs = st + XOFF + g * XRS;
        if (Q8) {
#pragma unroll
            for (int c2 = 0; c2 < 4; c2 += 2) {
                unsigned r[4]; /* row g / g + 8 of chunk c2, then of chunk c2 + 1 */
                ig_ldsm4(ig_smem_addr(st + lrow * WRS + 16 * (c2 + lch)), r);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint2 f0 = ig_wq8_frag(r[2 * h]), f8 = ig_wq8_frag(r[2 * h + 1]);
                    const unsigned a[4] = {f0.x, f8.x, f0.y, f8.y};
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        if (j < ntile) {
                            const uint2 v = *(const uint2 *)(xs + j * 8 * XRS + 32 * (c2 + h) + 8 * q);
                            const uint2 b = ig_wq_xpairs(v.x, v.y);
                            ig_mma16(acc[j], a, b.x, b.y);
                        }
                }
            }
        } else {
            unsigned r[4]; /* row g / g + 8 of chunk 0, then of chunk 1 (32 columns each) */
            ig_ldsm4(ig_smem_addr(st + lrow * WRS + 16 * lch), r);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* the chunk's group: (scale, min) of rows g and g + 8 as 16-bit pairs */
                const int gi = QG_WG == 32 ? h : 0;
                unsigned s0, n0, s8, n8;
                ig_wq4_sm2(*(const unsigned *)(st + SOFF + 16 * (16 * wp + g) + 4 * gi), &s0, &n0);
                ig_wq4_sm2(*(const unsigned *)(st + SOFF + 16 * (16 * wp + g + 8) + 4 * gi), &s8, &n8);
#pragma unroll
                for (int p = 0; p < 4; p += 2) { /* nibble pairs (p, p + 4), (p + 1, p + 5): one mma */
                    const unsigned a[4] = {ig_wq4_pair(r[2 * h], p, s0, n0), ig_wq4_pair(r[2 * h + 1], p, s8, n8),
                                           ig_wq4_pair(r[2 * h], p + 1, s0, n0), ig_wq4_pair(r[2 * h + 1], p + 1, s8, n8)};
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        if (j < ntile) {
                            const uint4 v = *(const uint4 *)(xs + j * 8 * XRS + 64 * h + 16 * q);
                            const uint2 b = p == 0 ? ig_wq_xpairs(v.x, v.z) : ig_wq_xpairs(v.y, v.w);
                            ig_mma16(acc[j], a, b.x, b.y);
                        }
                }
            }
        }
    }
    ig_cp_wait<0>();
    __syncthreads(); /* the stages are free for the epilogue tile */

    if (S > 1) { /* split K: partials to ws ([z][token tile j][thread] float4s, only the tiles with a
                  * token); the tile's last CTA sums them in z order, every split's loads of a token
                  * tile issued together */
        const int tile = blockIdx.y * gridDim.x + blockIdx.x;
        float4 *part = (float4 *)ws + (size_t)tile * S * 8 * IG_QG_BLOCK + tid;
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < ntile) __stcg(part + ((size_t)z * 8 + j) * IG_QG_BLOCK, make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
        __threadfence();
        __syncthreads();
        if (tid == 0) last = atomicAdd(cnt + tile, 1u) == (unsigned)(S - 1);
        __syncthreads();
        if (!last) return;
        __threadfence();
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < ntile) {
                float4 v[S];
#pragma unroll
                for (int s = 0; s < S; s++) v[s] = __ldcg(part + ((size_t)s * 8 + j) * IG_QG_BLOCK);
                acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
                for (int s = 0; s < S; s++) acc[j][0] += v[s].x, acc[j][1] += v[s].y, acc[j][2] += v[s].z, acc[j][3] += v[s].w;
            }
        if (tid == 0) cnt[tile] = 0u; /* for the next launch (stream order) */
    }

    /* the tile [token][row] through shared memory, q8r rows scaled */
    float *cs = (float *)sm;
    constexpr int CLD = BM + 4;
    {
        const int r0 = 16 * wp + g, r8 = r0 + 8;
        const float sc0 = Q8 && m0 + r0 < NP ? __ldg((const float *)(w + (size_t)(m0 + r0) * RB + K)) : 1.0f;
        const float sc8 = Q8 && m0 + r8 < NP ? __ldg((const float *)(w + (size_t)(m0 + r8) * RB + K)) : 1.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int t = 8 * j + 2 * q;
            cs[t * CLD + r0] = acc[j][0] * sc0, cs[(t + 1) * CLD + r0] = acc[j][1] * sc0;
            cs[t * CLD + r8] = acc[j][2] * sc8, cs[(t + 1) * CLD + r8] = acc[j][3] * sc8;
        }
    }
    __syncthreads();
    if (!SW) {
        for (int i = tid; i < tn * BM; i += IG_QG_BLOCK) {
            const int t = i / BM, r = i % BM, n = m0 + r;
            if (n >= QG_N) continue; /* padded rows are computed (zero codes) but never stored */
            const float v = cs[t * CLD + r] + (QG_BIAS ? bias[n] : 0.0f);
            float *yr = (float *)y + (size_t)(t0 + t) * QG_LDY + n;
            if ((QG_EPI) == 1) *yr += v;
            else *yr = v;
        }
    } else {
        for (int i = tid; i < tn * (BM / 2); i += IG_QG_BLOCK) {
            const int t = i / (BM / 2), o = i % (BM / 2), u = o / 16, r = o % 16;
            const int gr = 32 * u + r, ur = gr + 16, col = m0 / 2 + o;
            if (m0 + gr >= NP) continue;
            const float ga = cs[t * CLD + gr] + (QG_BIAS ? bias[m0 + gr] : 0.0f);
            const float up = cs[t * CLD + ur] + (QG_BIAS ? bias[m0 + ur] : 0.0f);
            const float v = ig_glu(ga, up, GELU);
            const size_t yo = (size_t)(t0 + t) * QG_LDY + col;
            if (QG_YBF16) ((unsigned short *)y)[yo] = ig_f32_to_h(v);
            else ((float *)y)[yo] = v;
        }
    }
#endif
}

#undef QG_NAME
#undef QG_K
#undef QG_N
#undef QG_WQ
#undef QG_WG
#undef QG_BIAS
#undef QG_EPI
#undef QG_LDY
#undef QG_YBF16
#undef QG_SPLIT
