/* qgemm.cu — template: y = x · Wᵀ (+ bias) on tensor cores for quantized rows (wq.cuh: q8r, q4r)
 * and steps of more tokens than the GEMVs take (9 .. the `qg_tmax` tuning key, 128 by default): the
 * quantized bytes are read once per 64 tokens and never written out as 16 bits.
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
 * Tiling: a CTA computes 128 packed rows x 64 tokens; warp w owns rows 16w .. 16w + 15 and the
 * token tiles of 8 that hold a token (ig_qg_stage is compiled for each count 1..8 and picked per
 * stage by a CTA-uniform switch, so the x loads of all tiles issue unguarded, ahead of the mma chain),
 * f32 accumulators 8 x 4 a lane. K goes in stages of 64 columns through IG_QG_STAGES cp.async buffers:
 * the rows' code bytes (q8r 64, q4r 32 a row; q4r also the stage's (scale, min) words) and the
 * tokens' x (rows past T never copied: their sums are neither stored nor mixed with other tokens');
 * which chunks a thread copies is fixed for the K loop, their offsets set once before it. Per 16-byte
 * chunk of a row (16 q8r / 32 q4r columns) one ldmatrix.x4 gives a lane (g = lane / 4, q = lane % 4)
 * the 32-bit word q of rows g, g + 8 of two chunks: q8r columns 4q .. 4q + 3 (ig_wq8_frag_adj: pairs
 * (4q, 4q+1), (4q+2, 4q+3) as the mma's k (2q, 2q+1), (2q+8, 2q+9)), q4r columns 8q .. 8q + 7
 * (ig_wq4_adj: the two nibbles of byte i, columns (8q + 2i, 8q + 2i + 1), bytes 2p and 2p + 1 one
 * mma; each weight scale q + min in f16 arithmetic, rounded to f16 then to bf16 in bf16 packages).
 * Since columns pair as they lie, x is read as it lies: a 64-bit (q8r) / 128-bit (q4r) shared load
 * of token g's columns is the B fragment, no byte permutes. Shared rows are padded so that ldmatrix
 * and the x loads are free of bank conflicts. q8r's row scales multiply in the epilogue (exact codes,
 * f32 scale); q4r's group scales are in the fragments. f8r rows (QG_WF8 1, e4m3 codes in q8r's
 * layout) take q8r's path with ig_wf8_frag_adj, their scales times IG_WF8_UNIT_H.
 *
 * Measured (H100, tests/gpu/test_qgemm.cu's bench, 1B layer qkv + o + gate/up + down, q4r g128):
 * 106.5 -> 71.2 us at 32 tokens, 220.7 -> 123.8 at 128 (q8r 97.3 -> 70.2 at 32) from the three
 * changes above; ncu before them (gate/up, 32 tokens): 452 instructions a warp and stage (the copy
 * loops ~200, the q4r dequantization ~10 a pair, two byte permutes an mma), 0.45 issued a cycle per
 * scheduler with 2 warps each: the stage was bound by issue and latency, not by memory (a clock64
 * trace: 15-70 cycles of each 900-2900 cycle stage waiting for the copies). After: ~210 a warp and
 * stage. Tried and dropped: 6 or 8 stages (one CTA an SM: 0-13% slower at 64-128 tokens, no gain
 * below), twice the CTAs through more K splits (gate/up 43.4 -> 41.1 us at 32 tokens, qkv 20.3 ->
 * 15.7; before the rework), cp.async with an L2 prefetch of 256-byte blocks (within 3%).
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
#ifndef QG_WF8 /* 1: the 8-bit rows are f8r (e4m3 codes, wq.cuh) */
#define QG_WF8 0
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
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
/* One stage's products of warp wp: its 16 rows x the stage's 64 columns into acc[0 .. NT), NT the
 * tiles of 8 tokens that hold a token (a compile-time count, so that the x loads of all tiles are
 * unguarded and issue together, ahead of the mma chain that consumes them). */
template <int NT, int WQ, int WG, bool F8 = false>
IG_DEV void ig_qg_stage(const unsigned char *st, float (&acc)[8][4], int lane, int wp) {
    constexpr int WRS = IG_QG_WRS(WQ), XRS = IG_QG_XRS(WQ), SOFF = IG_QG_SOFF(WQ), XOFF = IG_QG_XOFF(WQ);
    const int g = lane >> 2, q = lane & 3;
    /* ldmatrix: lane L names row (L & 7) + 8 ((L >> 3) & 1) of the warp's 16, chunk + (L >> 4) */
    const int lrow = 16 * wp + (lane & 7) + 8 * ((lane >> 3) & 1), lch = lane >> 4;
    const unsigned char *xs = st + XOFF + g * XRS;
    if (WQ == 8) {
#pragma unroll
        for (int c2 = 0; c2 < 4; c2 += 2) {
            unsigned r[4]; /* row g / g + 8 of chunk c2, then of chunk c2 + 1 */
            ig_ldsm4(ig_smem_addr(st + lrow * WRS + 16 * (c2 + lch)), r);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint2 v[NT];
#pragma unroll
                for (int j = 0; j < NT; j++) v[j] = *(const uint2 *)(xs + j * 8 * XRS + 32 * (c2 + h) + 8 * q);
                const uint2 f0 = F8 ? ig_wf8_frag_adj(r[2 * h]) : ig_wq8_frag_adj(r[2 * h]);
                const uint2 f8 = F8 ? ig_wf8_frag_adj(r[2 * h + 1]) : ig_wq8_frag_adj(r[2 * h + 1]);
                const unsigned a[4] = {f0.x, f8.x, f0.y, f8.y};
#pragma unroll
                for (int j = 0; j < NT; j++) ig_mma16(acc[j], a, v[j].x, v[j].y);
            }
        }
    } else {
        unsigned r[4]; /* row g / g + 8 of chunk 0, then of chunk 1 (32 columns each) */
        ig_ldsm4(ig_smem_addr(st + lrow * WRS + 16 * lch), r);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint4 v[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) v[j] = *(const uint4 *)(xs + j * 8 * XRS + 64 * h + 16 * q);
            /* the chunk's group: (scale, min) of rows g and g + 8 as f16 pairs */
            const int gi = WG == 32 ? h : 0;
            unsigned s0, n0, s8, n8;
            ig_wq4_sm2h(*(const unsigned *)(st + SOFF + 16 * (16 * wp + g) + 4 * gi), &s0, &n0);
            ig_wq4_sm2h(*(const unsigned *)(st + SOFF + 16 * (16 * wp + g + 8) + 4 * gi), &s8, &n8);
            const unsigned w0 = r[2 * h], w8 = r[2 * h + 1], w04 = w0 >> 4, w84 = w8 >> 4;
#pragma unroll
            for (int p = 0; p < 2; p++) { /* bytes 2p, 2p + 1 (columns 8q + 4p .. + 3): one mma */
                const unsigned a[4] = {ig_wq4_adj(w0, w04, 2 * p, s0, n0), ig_wq4_adj(w8, w84, 2 * p, s8, n8),
                                       ig_wq4_adj(w0, w04, 2 * p + 1, s0, n0), ig_wq4_adj(w8, w84, 2 * p + 1, s8, n8)};
#pragma unroll
                for (int j = 0; j < NT; j++) ig_mma16(acc[j], a, p == 0 ? v[j].x : v[j].z, p == 0 ? v[j].y : v[j].w);
            }
        }
    }
}
#endif
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

    /* stage kb (of the row) into buffer b: every thread copies NWC 16-byte code chunks (q8r 2, q4r
     * 1), q4r's scale words of one row (the first BM threads) and NXC chunks of 8 x elements; which
     * ones is fixed for the whole K loop, so their offsets are set once here (x rows past T are
     * never copied: their tokens' sums are neither stored nor mixed with the others') */
    constexpr int NWC = BM * CPR / IG_QG_BLOCK, NXC = BN * 8 / IG_QG_BLOCK;
    static_assert(NWC * IG_QG_BLOCK == BM * CPR && NXC * IG_QG_BLOCK == BN * 8 && BM <= IG_QG_BLOCK, "stage copies");
    size_t w_off[NWC], x_off[NXC];
    unsigned w_dst[NWC], x_dst[NXC];
    bool x_ok[NXC];
#pragma unroll
    for (int k = 0; k < NWC; k++) {
        const int i = tid + k * IG_QG_BLOCK, r = i / CPR, c = i % CPR, n = m0 + r < NP ? m0 + r : NP - 1;
        w_off[k] = (size_t)n * RB + 16 * c, w_dst[k] = r * WRS + 16 * c;
    }
    const size_t s_off = (size_t)(m0 + tid < NP ? m0 + tid : NP - 1) * RB + K / 2;
#pragma unroll
    for (int k = 0; k < NXC; k++) {
        const int i = tid + k * IG_QG_BLOCK, t = i / 8, c = i % 8;
        x_off[k] = (size_t)(t < tn ? t0 + t : 0) * K + 8 * c, x_dst[k] = XOFF + t * XRS + 16 * c, x_ok[k] = t < tn;
    }
    const unsigned sm0 = ig_smem_addr(sm);
    auto load = [&](int kb, int b) {
        const unsigned st = sm0 + b * STB;
#pragma unroll
        for (int k = 0; k < NWC; k++) ig_cp16(st + w_dst[k], w + w_off[k] + (size_t)kb * (16 * CPR), 16);
        if (!Q8 && tid < BM) {
            const unsigned char *src = w + s_off + (size_t)4 * (kb * 64 / QG_WG);
            if (SB == 8) ig_cp8(st + SOFF + 16 * tid, src, 8);
            else ig_cp4(st + SOFF + 16 * tid, src, 4);
        }
#pragma unroll
        for (int k = 0; k < NXC; k++)
            if (x_ok[k]) ig_cp16(st + x_dst[k], x + x_off[k] + (size_t)kb * 64, 16);
    };

    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    const int ntile = (tn + 7) / 8; /* token tiles with a token */

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
        switch (ntile) { /* (uniform over the CTA) */
        case 1: ig_qg_stage<1, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 2: ig_qg_stage<2, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 3: ig_qg_stage<3, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 4: ig_qg_stage<4, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 5: ig_qg_stage<5, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 6: ig_qg_stage<6, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        case 7: ig_qg_stage<7, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
        default: ig_qg_stage<8, QG_WQ, QG_WG, QG_WF8>(st, acc, lane, wp); break;
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
        __syncthreads(); /* then one acq_rel arrival (common.cuh's ig_atom_add_acq_rel_gpu) */
        if (tid == 0) last = ig_atom_add_acq_rel_gpu(cnt + tile, 1u) == (unsigned)(S - 1);
        __syncthreads();
        if (!last) return;
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
        constexpr float QU = QG_WF8 ? IG_WF8_UNIT_H : 1.0f; /* f8r: its codes' unit (finite times any f8r scale) */
        const float sc0 = Q8 && m0 + r0 < NP ? __ldg((const float *)(w + (size_t)(m0 + r0) * RB + K)) * QU : 1.0f;
        const float sc8 = Q8 && m0 + r8 < NP ? __ldg((const float *)(w + (size_t)(m0 + r8) * RB + K)) * QU : 1.0f;
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
#undef QG_WF8
#undef QG_BIAS
#undef QG_EPI
#undef QG_LDY
#undef QG_YBF16
#undef QG_SPLIT
