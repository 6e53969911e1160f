/* act8.cu — template: the kernels around the 8-bit-activation GEMMs of prefill-sized matmuls: cuBLAS's
 * int8 GEMM in CUDA a8w8 packages (`--quant a8w8`: q8r weight rows, wq.cuh, whose codes the GEMM
 * reads in place with a row stride of K + 16 bytes), or on sm_90a this file's own int8 GEMM with
 * the scaling fused (A8_WG_NAME), and cuBLASLt's e4m3 GEMM in fp8 packages (f8r rows; the
 * quantizers with A8_F8). Steps of fewer than a8_tmin tokens (the tuning key, 33 by
 * default) keep the 16-bit-activation kernels on the same rows (the GEMVs, the persistent decode
 * kernel, qgemm.cu): those are bound by the weight bytes, which 8-bit activations do not change.
 *
 * Instantiate with A8_QUANT_NAME, A8_NQUANT_NAME (+ A8_EPS) or A8_GQUANT_NAME (+ A8_GLU) and A8_K
 * [A8_F8], and / or A8_DQ_NAME or A8_WG_NAME with A8_N, A8_K, A8_LDY, A8_BIAS, A8_ACC, A8_GLU; defines
 *   extern "C" __global__ void A8_QUANT_NAME(int T, const unsigned short *x, signed char *xq, float *xs);
 *       one token per CTA: xs[t] = max_k |x[t][k]| / 127 (0 for an all-zero row), xq[t][k] =
 *       rint(x[t][k] * 127 / max |x|), codes in -127..127; x [T][A8_K] in the package's 16-bit type;
 *       with A8_F8 1 (fp8 packages, cuBLASLt's e4m3 GEMM) xs[t] = max |x| / 448 and xq[t][k] the
 *       e4m3fn code of x[t][k] * 448 / max |x| (kv_quant.cuh's rounding: nearest even, saturating)
 *       launch: grid T, block IG_A8_BLOCK = 256, smem 0
 *   extern "C" __global__ void A8_NQUANT_NAME(int T, const float *x, const float *gamma, signed char *xq, float *xs);
 *       the same codes of the RMSNorm of the f32 residual rows x [T][A8_K] (eps A8_EPS, times gamma,
 *       rounded to the 16-bit type as rmsnorm.cu stores it): the norm in front of a matmul, fused
 *   extern "C" __global__ void A8_GQUANT_NAME(int T, const unsigned short *gu, const float *bias,
 *                                             signed char *xq, float *xs);
 *       the same codes of SwiGLU (A8_GLU 1) / GeGLU (2) of the packed gate/up rows gu [T][2 A8_K]
 *       (16-bit, epilogue.cu's order and bias, null for none), rounded to the 16-bit type: the
 *       down projection's input, fused into the gate/up GEMM's epilogue launch
 *       launch: NQUANT grid T, block IG_A8_BLOCK; GQUANT grid T, block IG_A8_GBLOCK; smem 0
 *       (GQUANT's rows are 4x a layer input's: a block of 1024 holds K 8192 in 8 values a thread, so
 *       more of the loads' latency is hidden by other CTAs than with 256 threads of 32 values and
 *       85 registers each; H100, 1B fp8 prefill profile: 59 us a 2048-token call with 256)
 *   extern "C" __global__ void A8_DQ_NAME(int T, const int *acc, const float *xs, const unsigned char *w,
 *                                         const float *bias, void *y);
 *       acc [T][NP] (NP = A8_N padded to 16: the GEMM's int32 sums over the padded rows), v[t][n] =
 *       acc[t][n] xs[t] s_n (s_n: row n's q8r scale) + bias[n] (A8_BIAS), then
 *         A8_GLU 0: y f32 [T][A8_LDY]: y[t][n] = v (A8_ACC 0) or y[t][n] + v (A8_ACC 1: the residual)
 *         A8_GLU 1 / 2: the packed gate / up rows (16-row blocks interleaved, SPEC.md) through SwiGLU /
 *           GeGLU (common.cuh's ig_glu) into y [T][A8_N / 2] in the 16-bit type
 *       launch: grid (IG_A8_DQ_GRID_X(A8_N, A8_GLU), IG_A8_DQ_GRID_Y(T)), block IG_A8_BLOCK, smem 0
 *   extern "C" __global__ void A8_WG_NAME(int T, int S, const float *xs, const unsigned char *w, const float *bias,
 *                                         void *y, int *part, unsigned *cnt, ig_tmap xm, ig_tmap wm);
 *       the int8 GEMM and A8_DQ_NAME's epilogue in one kernel on sm_90a's wgmma (its section below):
 *       xm / wm tensor maps of xq [T][A8_K] and the q8r rows (launch.h's IG_A8_WG_*), each tile's K
 *       split S ways (S > 1: int32 sums meeting in part, counted in cnt); empty elsewhere
 * The CPU's a8w8 quantizes activations per 32 columns (templates/cpu/quant.h's Q8A); a GEMM can
 * only scale whole rows, so these are per token: the issue's rule, coarser than the CPU's.
 */
#include "common.cuh"
#include "wq.cuh"
#include "kv_quant.cuh"
#include "mbar.cuh"
#include "wgmma.cuh"

#ifndef A8_K
#define A8_K 2048
#endif
#ifndef A8_N
#define A8_N 2048
#endif
#ifndef A8_LDY
#define A8_LDY A8_N
#endif
#ifndef A8_BIAS
#define A8_BIAS 0
#endif
#ifndef A8_ACC
#define A8_ACC 0
#endif
#ifndef A8_GLU
#define A8_GLU 0
#endif
#ifndef A8_F8
#define A8_F8 0
#endif
#ifndef A8_EPS
#define A8_EPS 1e-5f
#endif

#ifndef IG_ACT8_ROW_
#define IG_ACT8_ROW_
/* The first of the 8 columns a thread of a CTA of B threads holds in its vector j of a row. */
template <int B = IG_A8_BLOCK>
IG_DEV int ig_a8_col(int j) { return ((int)threadIdx.x + j * B) * 8; }

/* Two e4m3fn codes (x0 in the low byte), kv_quant.cuh's ig_kvq_f2e4m3 rounding: nearest even,
 * saturating at +-448; on sm_89+ one cvt for the pair, the same codes for every finite value. */
IG_DEV unsigned ig_a8_e4m3x2(float x0, float x1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(x1), "f"(x0));
    return d;
#else
    return (unsigned)ig_kvq_f2e4m3(x0) | (unsigned)ig_kvq_f2e4m3(x1) << 8;
#endif
}

/* The quantizers' second half: one token's row of K values held in registers by the CTA's B
 * threads (f[j][e]: column ig_a8_col<B>(j) + e, zero past K) to its codes xq [K] and scale *xs
 * (int8: max |x| / 127, rint; F8: max |x| / 448, e4m3fn). red: 32 floats of shared memory, free on
 * entry. */
template <int K, int NV, bool F8, int B = IG_A8_BLOCK>
IG_DEV void ig_a8_row_codes(const float (&f)[NV][8], float *red, signed char *xq, float *xs) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int e = 0; e < 8; e++) amax = fmaxf(amax, fabsf(f[j][e]));
    amax = ig_warp_max(amax);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = red[0];
    for (int w = 1; w < B / 32; w++) amax = fmaxf(amax, red[w]);
    constexpr float QMAX = F8 ? 448.0f : 127.0f; /* the codes' largest magnitude */
    const float inv = amax > 0.0f ? QMAX / amax : 0.0f;
    if (threadIdx.x == 0) *xs = amax / QMAX;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int k = ig_a8_col<B>(j);
        if (k >= K) break;
        unsigned w[2] = {0u, 0u};
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            unsigned q2;
            if (F8) {
                q2 = ig_a8_e4m3x2(f[j][e] * inv, f[j][e + 1] * inv);
            } else {
                const int q0 = (int)fminf(fmaxf(rintf(f[j][e] * inv), -127.0f), 127.0f);
                const int q1 = (int)fminf(fmaxf(rintf(f[j][e + 1] * inv), -127.0f), 127.0f);
                q2 = ((unsigned)q0 & 0xffu) | ((unsigned)q1 & 0xffu) << 8;
            }
            w[e >> 2] |= q2 << (8 * (e & 3));
        }
        *(uint2 *)(xq + k) = make_uint2(w[0], w[1]);
    }
}
#endif

/* 16-byte vectors of a row a thread holds (GQUANT: of its CTA's IG_A8_GBLOCK threads) */
#define A8_NV_ ((A8_K / 8 + IG_A8_BLOCK - 1) / IG_A8_BLOCK)
#define A8_GNV_ ((A8_K / 8 + IG_A8_GBLOCK - 1) / IG_A8_GBLOCK)

#ifdef A8_QUANT_NAME
extern "C" __global__ void __launch_bounds__(IG_A8_BLOCK)
A8_QUANT_NAME(int T, const unsigned short *x, signed char *xq, float *xs) {
    static_assert(A8_K % 8 == 0, "act8 quantizes rows of whole 16-byte vectors");
    __shared__ float red[32];
    const int t = blockIdx.x;
    if (t >= T) return;
    const unsigned short *row = x + (size_t)t * A8_K;
    /* the row in registers, every load issued before the first use (one pass over memory, all of it
     * in flight at once: the kernel is bound by that latency, not by bandwidth) */
    float f[A8_NV_][8];
#pragma unroll
    for (int j = 0; j < A8_NV_; j++) {
        const int k = ig_a8_col(j);
        const uint4 v = k < A8_K ? __ldg((const uint4 *)(row + k)) : make_uint4(0u, 0u, 0u, 0u);
        ig_unpack8_h(v, f[j]);
    }
    ig_a8_row_codes<A8_K, A8_NV_, A8_F8 != 0>(f, red, xq + (size_t)t * A8_K, xs + t);
}
#endif

#ifdef A8_NQUANT_NAME
/* RMSNorm fused in front: rmsnorm.cu's row (sum of squares in f32, 1 / sqrtf, times gamma, rounded
 * to the 16-bit type) quantized without the 16-bit row going through memory. */
extern "C" __global__ void __launch_bounds__(IG_A8_BLOCK)
A8_NQUANT_NAME(int T, const float *x, const float *gamma, signed char *xq, float *xs) {
    static_assert(A8_K % 8 == 0, "act8 quantizes rows of whole 16-byte vectors");
    __shared__ float red[32];
    const int t = blockIdx.x;
    if (t >= T) return;
    const float *row = x + (size_t)t * A8_K;
    float f[A8_NV_][8], ss = 0.0f;
#pragma unroll
    for (int j = 0; j < A8_NV_; j++) {
        const int k = ig_a8_col(j);
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        ig_unpack4_f32(k < A8_K ? __ldg((const uint4 *)(row + k)) : z, f[j]);
        ig_unpack4_f32(k < A8_K ? __ldg((const uint4 *)(row + k + 4)) : z, f[j] + 4);
    }
#pragma unroll
    for (int j = 0; j < A8_NV_; j++)
#pragma unroll
        for (int e = 0; e < 8; e++) ss = fmaf(f[j][e], f[j][e], ss);
    ss = ig_block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)A8_K + A8_EPS);
#pragma unroll
    for (int j = 0; j < A8_NV_; j++) {
        const int k = ig_a8_col(j);
        if (k >= A8_K) break;
        float g[8];
        ig_unpack4_f32(__ldg((const uint4 *)(gamma + k)), g), ig_unpack4_f32(__ldg((const uint4 *)(gamma + k + 4)), g + 4);
#pragma unroll
        for (int e = 0; e < 8; e++) f[j][e] = ig_round_h(f[j][e] * s * g[e]);
    }
    ig_a8_row_codes<A8_K, A8_NV_, A8_F8 != 0>(f, red, xq + (size_t)t * A8_K, xs + t);
}
#endif

#ifdef A8_GQUANT_NAME
/* The gated MLP's activation fused in front: epilogue.cu's SwiGLU / GeGLU (A8_GLU 1 / 2) of the
 * packed gate/up GEMM output (16-bit, [T][2 A8_K], 16-row blocks interleaved) plus its bias,
 * rounded to the 16-bit type, quantized as the down projection's input; the 16-bit row itself is
 * never stored (its one reader takes the codes). */
extern "C" __global__ void __launch_bounds__(IG_A8_GBLOCK)
A8_GQUANT_NAME(int T, const unsigned short *gu, const float *bias, signed char *xq, float *xs) {
    static_assert(A8_K % 16 == 0 && (A8_GLU == 1 || A8_GLU == 2), "packed gate/up rows in blocks of 16; SwiGLU or GeGLU");
    constexpr int B = IG_A8_GBLOCK;
    __shared__ float red[32];
    const int t = blockIdx.x;
    if (t >= T) return;
    const unsigned short *row = gu + (size_t)t * 2 * A8_K;
    float f[A8_GNV_][8], u[A8_GNV_][8];
#pragma unroll
    for (int j = 0; j < A8_GNV_; j++) {
        const int k = ig_a8_col<B>(j), c = 32 * (k >> 4) + (k & 15);
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        ig_unpack8_h(k < A8_K ? __ldg((const uint4 *)(row + c)) : z, f[j]);
        ig_unpack8_h(k < A8_K ? __ldg((const uint4 *)(row + c + 16)) : z, u[j]);
    }
#pragma unroll
    for (int j = 0; j < A8_GNV_; j++) {
        const int k = ig_a8_col<B>(j), c = 32 * (k >> 4) + (k & 15);
        if (k >= A8_K) break;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float g = bias ? f[j][e] + bias[c + e] : f[j][e], v = bias ? u[j][e] + bias[c + 16 + e] : u[j][e];
            f[j][e] = ig_round_h(ig_glu(g, v, A8_GLU == 2));
        }
    }
    ig_a8_row_codes<A8_K, A8_GNV_, A8_F8 != 0, B>(f, red, xq + (size_t)t * A8_K, xs + t);
}
#endif

#ifdef A8_DQ_NAME
/* A thread per output column over IG_A8_TT tokens: its row scale(s) read once (rows are K + 16
 * bytes apart, so a warp's scale loads are 32 sectors), the int32 sums and stores coalesced along
 * the columns. (A thread per (token, column) re-read the scales for every token: ~0.72x of bf16's
 * 2048-token prefill on an H100, the dq launches the largest part of the difference.) */
extern "C" __global__ void __launch_bounds__(IG_A8_BLOCK)
A8_DQ_NAME(int T, const int *acc, const float *xs, const unsigned char *w, const float *bias, void *y) {
    constexpr int NP = IG_NPAD16(A8_N), OUTS = A8_GLU ? A8_N / 2 : A8_N;
    static_assert(A8_GLU == 0 || A8_N % 32 == 0, "packed gate/up rows come in blocks of 32");
    const int i = blockIdx.x * IG_A8_BLOCK + threadIdx.x, t0 = blockIdx.y * IG_A8_TT;
    if (i >= OUTS) return;
    /* GLU output i: gate at packed row 32 (i / 16) + i % 16, up 16 rows further */
    const int c = A8_GLU ? 32 * (i >> 4) + (i & 15) : i;
    const float sg = ig_wq8_scale<A8_K>(w, c), su = A8_GLU ? ig_wq8_scale<A8_K>(w, c + 16) : 0.0f;
    const float bg = A8_BIAS ? bias[c] : 0.0f, bu = A8_BIAS && A8_GLU ? bias[c + 16] : 0.0f;
    for (int t = t0; t < T && t < t0 + IG_A8_TT; t++) {
        const int *a = acc + (size_t)t * NP;
        const float sx = xs[t];
        if (A8_GLU == 0) {
            const float v = (float)a[c] * sx * sg + bg;
            float *o = (float *)y + (size_t)t * A8_LDY + i;
            *o = A8_ACC ? *o + v : v;
        } else {
            const float g = (float)a[c] * sx * sg + bg, u = (float)a[c + 16] * sx * su + bu;
            ((unsigned short *)y)[(size_t)t * OUTS + i] = ig_f32_to_h(ig_glu(g, u, A8_GLU == 2));
        }
    }
}
#endif

#ifdef A8_WG_NAME
/* A consumer thread's part of a tile (token rows m0 + its 2 rows x weight rows n0 .. n0 + 255) through
 * A8_DQ_NAME's epilogue: v = acc xs[t] s_n (+ bias), stored f32 / added to the residual, or the
 * packed gate/up pairs (16-row blocks: 8-column groups 4 j + 0, 1 gate, 4 j + 2, 3 up) through
 * SwiGLU / GeGLU into the 16-bit output. sc / bi: the tile's row scales and biases (staged in shared
 * memory at the tile's start), sx: this thread's two tokens' scales. The residual rows are read 8
 * column groups at a time, all loads in flight before the first add (one at a time, each waiting
 * its L2 round trip, the epilogue of a 128 x 256 tile took ~9 us: H100, session 33). */
IG_DEV void IG_CAT(A8_WG_NAME, _store)(int T, int m0, int n0, const int *acc, const float *sc, const float *bi, float2 sx, void *y) {
    constexpr int OUTS = A8_GLU ? A8_N / 2 : A8_N;
    const int t = threadIdx.x & 127, g = (t & 31) >> 2, q = t & 3, r0 = m0 + ((int)threadIdx.x >> 7) * 64 + 16 * (t >> 5) + g;
    if (A8_GLU == 0) {
#pragma unroll
        for (int nb = 0; nb < IG_A8_WG_BN / 8; nb += 8) {
            float2 old[8][2];
#pragma unroll
            for (int ni = nb; ni < nb + 8; ni++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = r0 + 8 * hf, c = n0 + ni * 8 + 2 * q;
                    old[ni - nb][hf] = make_float2(0.0f, 0.0f);
                    if (A8_ACC && r < T && c < A8_N) {
                        const float *o = (const float *)y + (size_t)r * A8_LDY + c;
                        old[ni - nb][hf] = c + 1 < A8_N ? make_float2(o[0], o[1]) : make_float2(o[0], 0.0f);
                    }
                }
#pragma unroll
            for (int ni = nb; ni < nb + 8; ni++) {
                const int cl = ni * 8 + 2 * q, c = n0 + cl;
                if (c >= A8_N) continue;
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = r0 + 8 * hf;
                    if (r >= T) continue;
                    const float x = hf ? sx.y : sx.x;
                    float *o = (float *)y + (size_t)r * A8_LDY + c;
                    /* A8_DQ_NAME's arithmetic, operation for operation: the same bits */
                    const float v0 = (float)acc[ni * 4 + 2 * hf] * x * sc[cl] + bi[cl];
                    const float v1 = (float)acc[ni * 4 + 2 * hf + 1] * x * sc[cl + 1] + bi[cl + 1];
                    o[0] = A8_ACC ? old[ni - nb][hf].x + v0 : v0;
                    if (c + 1 < A8_N) o[1] = A8_ACC ? old[ni - nb][hf].y + v1 : v1;
                }
            }
        }
    } else {
#pragma unroll
        for (int gq = 0; gq < IG_A8_WG_BN / 32; gq++) {
            if (n0 + 32 * gq >= A8_N) continue;
#pragma unroll
            for (int ni = 0; ni < 2; ni++) {
                const int cl = 32 * gq + ni * 8 + 2 * q, o = (n0 + 32 * gq) / 2 + ni * 8 + 2 * q, gi = (4 * gq + ni) * 4, ui = gi + 8;
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = r0 + 8 * hf;
                    if (r >= T) continue;
                    const float x = hf ? sx.y : sx.x;
                    const float g0 = (float)acc[gi + 2 * hf] * x * sc[cl] + bi[cl], g1 = (float)acc[gi + 2 * hf + 1] * x * sc[cl + 1] + bi[cl + 1];
                    const float u0 = (float)acc[ui + 2 * hf] * x * sc[cl + 16] + bi[cl + 16];
                    const float u1 = (float)acc[ui + 2 * hf + 1] * x * sc[cl + 17] + bi[cl + 17];
                    *(unsigned *)((unsigned short *)y + (size_t)r * OUTS + o) = ig_pack2_h(ig_glu(g0, u0, A8_GLU == 2), ig_glu(g1, u1, A8_GLU == 2));
                }
            }
        }
    }
}
#endif

#ifdef A8_WG_NAME
/* ---- the int8 GEMM itself, its epilogue fused (sm_90a): A8_DQ_NAME's v and stores straight from
 * the accumulators, so no int32 sum reaches memory.
 * Persistent and warp-specialized, moe.cu's _wg_run in int8: a CTA of IG_A8_WG_THREADS is two
 * consumer warpgroups (rows 64 g .. 64 g + 63 of a 128-token tile x IG_A8_WG_BN weight rows, one
 * wgmma m64n256k32 per 32 of K from shared memory, 128 int32 accumulators a thread) and a producer
 * warpgroup whose thread 0 loads both operand boxes of each K step (128 codes = one 128-byte
 * swizzled tile row) by TMA into IG_A8_WG_NST stages (full / empty mbarriers as moe.cu's: a stage
 * goes back to the producer one step after its products were issued). A CTA walks the tiles (token
 * tiles fastest) grid-size apart; the producer runs up to NST steps ahead, into the next tile while
 * the consumers store this one's outputs. A8_WG_CL 2 (`--tune a8_wg=2`, the default): clusters of two
 * CTAs on adjacent token tiles sharing each weight box by TMA multicast, a third less from L2 a
 * stage (SPEC.md has the measurements of the forms, clusters of four among them; the host sizes
 * the grid of clusters by the driver's count of those that fit at once, host_runtime.c's
 * a8_cluster_grid). Steps of few tiles (T from a8_tmin, 33, up) split each
 * tile's K in S ranges (`a8_wg_split`): a CTA an item (tile x range), the item's int32 sums to a
 * buffer, the tile's last range to arrive adds the others' (exact) and stores through the epilogue. */
#ifndef A8_WG_CL
#define A8_WG_CL 1
#endif
#if IG_WG && !defined(IG_ACT8_WG_)
#define IG_ACT8_WG_
typedef unsigned long long ig_a8_wg_bars[2][IG_A8_WG_NST]; /* [0] full (the expect), [1] empty (consumer warps) */
/* CL 2: the CTAs of a cluster take the tiles of CL consecutive token tiles x one weight tile (a
 * cluster tile); each loads its own token box and 1 / CL of the weight box, multicast to all, and a
 * stage is free once every CTA's consumers are done with it (its empty barrier counts them all). */
template <int K, int N, int CL>
struct ig_a8_wg {
    static constexpr int BM = IG_A8_WG_BM, BN = IG_A8_WG_BN, BK = 128, NST = IG_A8_WG_NST;
    static constexpr int KT = (K + BK - 1) / BK, NT = (IG_NPAD16(N) + BN - 1) / BN;
    static constexpr unsigned STAGE = (BM + BN) * 128;
    static_assert(CL == 1 || CL == 2, "clusters of one or two CTAs");
    /* cluster tile `ct` of a step of T tokens: this CTA's (cluster rank `rk`) first token row, first weight row */
    static __device__ __forceinline__ void at(int T, int ct, int rk, int *m0, int *n0) {
        const int MC = IG_CDIV(IG_CDIV(T, BM), CL);
        *m0 = ((ct % MC) * CL + rk) * BM, *n0 = (ct / MC) * BN;
    }
    static __device__ __forceinline__ int ctiles(int T) { return IG_CDIV(IG_CDIV(T, BM), CL) * NT; }
    /* split z of S: its K steps k0 .. k1 - 1 (S <= KT: none empty) */
    static __device__ __forceinline__ int kfirst(int z, int S) { return z * KT / S; }
    /* the producer thread: every K step of the CTA's items (cluster tile x K split) into the stages, NST ahead */
    static __device__ __forceinline__ void produce(int T, int S, int rk, const ig_tmap *xm, const ig_tmap *wm, unsigned sbase,
                                                   ig_a8_wg_bars &bars) {
        int g = 0;
        for (int it = (int)blockIdx.x / CL; it < ctiles(T) * S; it += (int)gridDim.x / CL) {
            int m0, n0;
            at(T, it / S, rk, &m0, &n0);
            for (int kt = kfirst(it % S, S); kt < kfirst(it % S + 1, S); kt++, g++) {
                const int st = ig_ring_fill(bars, g, STAGE);
                const unsigned s0 = sbase + (unsigned)st * STAGE;
                ig_tma_load2(s0, xm, kt * BK, m0, &bars[0][st]);
#ifdef IG_CUDA_EMUL
                ig_tma_load2(s0 + BM * 128, wm, kt * BK, n0, &bars[0][st]);
#else
                if (CL == 1) ig_tma_load2(s0 + BM * 128, wm, kt * BK, n0, &bars[0][st]);
                else ig_tma_load2_mc(s0 + (BM + rk * BN / CL) * 128, wm, kt * BK, n0 + rk * BN / CL, &bars[0][st], (1u << CL) - 1);
#endif
            }
        }
    }
    /* step g - 1's stage back to every CTA's producer (this warp's arrival in each) */
    static __device__ __forceinline__ void release(int g, ig_a8_wg_bars &bars) {
#ifdef IG_CUDA_EMUL
        ig_mb_arrive(&bars[1][g % NST]);
#else
        if (CL == 1) ig_mb_arrive(&bars[1][g % NST]);
        else
            for (int r = 0; r < CL; r++) ig_mb_arrive_cl(&bars[1][g % NST], (unsigned)r);
#endif
    }
    /* a consumer warpgroup's products of one item (K steps k0 .. k1 - 1, at least one) into acc; g:
     * the K steps consumed so far */
    static __device__ __forceinline__ void consume(int *acc, int &g, int k0, int k1, unsigned sbase, ig_a8_wg_bars &bars) {
        const int wg = (int)threadIdx.x >> 7, lane = (int)threadIdx.x & 31;
#pragma unroll
        for (int i = 0; i < 128; i++) acc[i] = 0;
        for (int kt = k0; kt < k1; kt++, g++) {
            const int st = ig_ring_take(bars, g);
            const unsigned sa = sbase + (unsigned)st * STAGE + (unsigned)wg * 64 * 128, sb = sbase + (unsigned)st * STAGE + BM * 128;
            ig_wg_fence();
#pragma unroll
            for (int j = 0; j < BK / 32; j++) ig_wg_mma_s8(acc, ig_wg_desc(sa + 32 * j), ig_wg_desc(sb + 32 * j));
            ig_wg_commit();
            ig_wg_wait<1>();
            __syncwarp();
            if (kt > k0 && lane == 0) release(g - 1, bars); /* step g - 1's products are done */
        }
        ig_wg_wait<0>();
        ig_wg_hold_i<128>(acc);
        __syncwarp();
        if (lane == 0) release(g - 1, bars);
    }
    /* K split z of S of CTA tile `tile` (S > 1): this consumer thread's sums (rows r0, r0 + 8, which
     * hold tokens where r0 < T) out to part, then the tile's last split to arrive (a barrier of the
     * consumers and thread 0's acq_rel count, common.cuh) adds every other split's into acc: int32
     * sums, exact in any order, so the outputs equal the unsplit kernel's bit for bit. Returns
     * whether this CTA stores the tile (and puts the tile's count back to 0 for the next launch). */
    static __device__ __forceinline__ bool split_sum(int *acc, int tile, int z, int S, bool rows, int *part, unsigned *cnt,
                                                     unsigned *last) {
        const int tc = (int)threadIdx.x;
        uint4 *pz = (uint4 *)part + ((size_t)tile * S + z) * 32 * 256 + tc; /* 16 bytes a thread a row of 256 */
        if (rows)
#pragma unroll
            for (int j = 0; j < 32; j++)
                __stcg(pz + j * 256, make_uint4((unsigned)acc[4 * j], (unsigned)acc[4 * j + 1], (unsigned)acc[4 * j + 2], (unsigned)acc[4 * j + 3]));
        ig_bar_named(2, 256);
        if (tc == 0) {
            *last = ig_atom_add_acq_rel_gpu(cnt + tile, 1u) == (unsigned)S - 1;
            if (*last) cnt[tile] = 0;
        }
        ig_bar_named(2, 256);
        if (!*last) return false;
        if (rows)
            for (int o = 0; o < S; o++) {
                if (o == z) continue;
                const uint4 *po = (const uint4 *)part + ((size_t)tile * S + o) * 32 * 256 + tc;
#pragma unroll
                for (int j = 0; j < 32; j++) { /* int32 sums in wrapping unsigned arithmetic: exact */
                    const uint4 v = __ldcg(po + j * 256);
                    acc[4 * j] = (int)((unsigned)acc[4 * j] + v.x), acc[4 * j + 1] = (int)((unsigned)acc[4 * j + 1] + v.y);
                    acc[4 * j + 2] = (int)((unsigned)acc[4 * j + 2] + v.z), acc[4 * j + 3] = (int)((unsigned)acc[4 * j + 3] + v.w);
                }
            }
        return true;
    }
};
#endif

/* y = A8_DQ_NAME's epilogue of xq [T][A8_K] int8 . w [NP][A8_K]^T (q8r rows): grid IG_A8_WG_GRID(T,
 * A8_N, SMs, A8_WG_CL, S), IG_A8_WG_THREADS threads, dynamic smem IG_A8_WG_SMEM; xm: xq (T rows of
 * A8_K codes, at least IG_A8_WG_BM: rows past T may hold anything, boxes of 128 x IG_A8_WG_BM), wm:
 * the rows (NP of A8_K codes, K + 16 bytes apart, boxes of 128 x IG_A8_WG_BN / A8_WG_CL). A8_WG_CL 2:
 * clusters of two CTAs (the kernel's cluster dimensions). S: K splits a tile (IG_A8_WG_SPLITS; 1 for
 * none), whose int32 sums meet in part (S x the CTA tiles x 128 KB) and are counted in cnt (a word
 * a CTA tile, zero before the launch and after it). Empty where IG_WG is 0 (the host launches it
 * only where ig_wg_built). */
#if A8_WG_CL > 1 && !defined(IG_CUDA_EMUL)
#define IG_A8_WG_CLUSTER_ __cluster_dims__(A8_WG_CL, 1, 1)
#else
#define IG_A8_WG_CLUSTER_
#endif
extern "C" __global__ void __launch_bounds__(IG_A8_WG_THREADS, 1) IG_A8_WG_CLUSTER_
A8_WG_NAME(int T, int S, const float *xs, const unsigned char *w, const float *bias, void *y, int *part, unsigned *cnt,
           const __grid_constant__ ig_tmap xm, const __grid_constant__ ig_tmap wm) {
#if IG_WG
    typedef ig_a8_wg<A8_K, A8_N, A8_WG_CL> G;
    static_assert(A8_GLU == 0 || A8_N % 32 == 0, "packed gate/up rows come in blocks of 32");
#if defined(IG_CUDA_EMUL)
    static_assert(A8_WG_CL == 1, "the host emulation has no clusters");
    const int rk = 0;
#else
    const int rk = A8_WG_CL > 1 ? (int)ig_cluster_rank() : 0;
#endif
    IG_DYN_SMEM(uint4, dyn);
    const unsigned sbase = ig_smem_addr(dyn) + ((1024u - (ig_smem_addr(dyn) & 1023u)) & 1023u);
    __shared__ ig_a8_wg_bars bars;
    __shared__ float sc[2][IG_A8_WG_BN], bi[2][IG_A8_WG_BN];
    __shared__ unsigned last;
    if (threadIdx.x == 0) ig_ring_init(bars, 8 * A8_WG_CL);
    __syncthreads();
#if A8_WG_CL > 1 && !defined(IG_CUDA_EMUL)
    ig_cluster_sync(); /* every CTA's barriers initialised before any copy or arrival reaches them */
#endif
    if (threadIdx.x >= 256) {
        ig_setmaxnreg_dec<40>();
        if (threadIdx.x == 256) G::produce(T, S, rk, &xm, &wm, sbase, bars);
    } else {
        ig_setmaxnreg_inc<IG_A8_WG_CREGS>();
        const int tc = (int)threadIdx.x;
        int acc[128], g = 0, par = 0;
        for (int it = (int)blockIdx.x / A8_WG_CL; it < G::ctiles(T) * S; it += (int)gridDim.x / A8_WG_CL, par ^= 1) {
            const int ct = it / S, z = it % S;
            int m0, n0;
            G::at(T, ct, rk, &m0, &n0);
            /* the tile's row scales and biases (a consumer thread each; two buffers, so a thread
             * still storing the last tile never reads this one's) and this thread's token scales,
             * loaded while the products run */
            const int c = n0 + tc, r0 = m0 + (tc >> 7) * 64 + 16 * ((tc & 127) >> 5) + ((tc & 31) >> 2);
            sc[par][tc] = c < A8_N ? ig_wq8_scale<A8_K>(w, c) : 0.0f;
            bi[par][tc] = A8_BIAS && c < A8_N ? bias[c] : 0.0f;
            const float2 sx = make_float2(r0 < T ? xs[r0] : 0.0f, r0 + 8 < T ? xs[r0 + 8] : 0.0f);
            G::consume(acc, g, G::kfirst(z, S), G::kfirst(z + 1, S), sbase, bars);
            if (S > 1 && !G::split_sum(acc, ct * A8_WG_CL + rk, z, S, r0 < T, part, cnt, &last)) continue;
            ig_bar_named(1, 256); /* every consumer's scales are in */
            IG_CAT(A8_WG_NAME, _store)(T, m0, n0, acc, sc[par], bi[par], sx, y);
        }
    }
#if A8_WG_CL > 1 && !defined(IG_CUDA_EMUL)
    ig_cluster_sync(); /* the other CTAs' last arrivals on this one's barriers are in */
#endif
#else
    (void)T, (void)S, (void)xs, (void)w, (void)bias, (void)y, (void)part, (void)cnt, (void)xm, (void)wm;
#endif
}
#undef IG_A8_WG_CLUSTER_
#endif

#undef A8_NV_
#undef A8_GNV_
#undef A8_QUANT_NAME
#undef A8_NQUANT_NAME
#undef A8_GQUANT_NAME
#undef A8_EPS
#undef A8_DQ_NAME
#undef A8_WG_NAME
#undef A8_K
#undef A8_N
#undef A8_LDY
#undef A8_BIAS
#undef A8_ACC
#undef A8_GLU
#undef A8_F8
#undef A8_WG_CL
