/* attention_prefill.cu — template: causal attention of a mixed batch over the paged KV pool, with
 * FlashAttention-2 on tensor cores (mma.sync m16n8k16 bf16, f32 accumulate) for runs of query
 * tokens of one sequence at consecutive positions (prefill chunks). Drop-in for AT_NAME of
 * attention.cu (same arguments, same semantics, different launch shape).
 *
 * Instantiate with AP_NAME, AP_H, AP_KV, AP_D, AP_PS, AP_PAGE_BYTES, AP_KVBF16, AP_OBF16, AP_SCALE,
 * AP_WINDOW (0: causal over the whole context; w > 0: a token at position p attends keys
 * (p - w, p] only, as attention.cu's AT_WINDOW: keys before a run's windows are never loaded);
 * defines
 *   extern "C" __global__ void AP_NAME(int T, const float *q, const unsigned char *kv_pool,
 *       unsigned long long layer_off, const int *positions, const int *token_seq,
 *       const int *page_table, int max_pages, AT *out, const __grid_constant__ ig_tmap kvm);
 * q f32 [T][H * D] (roped, from rope_kv); out [T][H * D] of AT (bf16 when AP_OBF16, else f32);
 * token t of sequence token_seq[t] at position p attends keys 0..p of its sequence (or the last
 * AP_WINDOW of them); head h reads
 * kv head h / (H / KV); out = softmax(q·kᵀ · AP_SCALE) · V. Pool layout as rope_kv.cu: K of kv head
 * kh, slot s at base + (kh * PS + s) * D elements, V after the KV * PS * D keys of the page.
 * launch (launch.h):
 *   grid (IG_AP_GRID_XH(H, AP_HPC), IG_AP_GRID_Y(T) = ceil(T / IG_AP_BM)), block IG_AP_BLOCKH(AP_HPC)
 *   (a warpgroup of 128 threads for each of the CTA's AP_HPC heads), dynamic smem
 *   IG_AP_SMEM_H(D, AP_HPC) (launch.h: 33 KB for D 64 with two heads, 65 KB for D 128 with two: the
 *   kernel's attribute must allow it; 0 for D > 128). Instances with the warp-specialized form
 *   (_flash_ws below: sm_90a images, 16-bit KV, D 64 or 128) take a last parameter
 *       const __grid_constant__ ig_tmap kvm
 *   (every instance has it; only _flash_ws reads it): the KV pool's tensor map (mbar.cuh), and run
 *   that form when launched with block IG_AP_BLOCKW(AP_HPC) (one more warpgroup) and dynamic smem
 *   IG_AP_SMEM_WS(D, AP_HPC, AP_WBN).
 *
 * A CTA owns BM = 64 consecutive token indices (a tile) and AP_HPC query heads of one KV head (a
 * warpgroup each, on the same K/V tiles; the text below is one warpgroup's). Heads are the fast grid
 * axis so that the G heads of a GQA group run side by side and read the same K/V tiles from L2;
 * tiles are taken last-first so that the longest causal rows start first. The tile is cut into runs
 * (maximal stretches of one sequence at consecutive positions). A run of >= AP_MINRUN tokens goes
 * through the tensor-core path with the whole CTA: the 4 warps own 16 rows each (rows outside the
 * run get q = 0, are never stored), Q is converted f32 -> bf16 (pre-scaled by AP_SCALE·log2 e) into
 * A fragments held in registers, K/V tiles of BN = 64 keys stream through shared memory (rows padded
 * by 16 bytes: conflict-free ldmatrix) with cp.async (FA2 order: V load overlaps QKᵀ + softmax, the
 * next K load overlaps P·V), P stays in registers as the A operand of P·V, online softmax in f32
 * with exp2 (common.cuh's ig_exp2), causal mask only on tiles that reach past the run's first position, keys beyond the
 * run's last position zero-filled (never read: their page may not exist). Shorter runs (decode
 * tokens of a mixed batch) are spread over the 4 warps, one token at a time, on CUDA cores (the
 * same lane-group scheme as attention.cu, one head). The CUDA-core path also serves every token
 * when the tensor-core path does not apply: f32 KV (bf16 rounding would cost accuracy), D not a
 * multiple of 16 or above 128 (register budget), or an sm_75 build (no bf16 mma).
 * Accuracy of the tensor-core path: q and P rounded to bf16 (relative 2^-9), as any bf16 FA kernel.
 */
#include "common.cuh"
#include "kv_quant.cuh"
#include "mbar.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

#ifndef AP_NAME
#define AP_NAME ig_attention_prefill
#endif
#ifndef AP_H
#define AP_H 32
#endif
#ifndef AP_KV
#define AP_KV 8
#endif
#ifndef AP_D
#define AP_D 128
#endif
#ifndef AP_PS
#define AP_PS 16
#endif
#ifndef AP_KVBF16
#define AP_KVBF16 1
#endif
#ifndef AP_OBF16
#define AP_OBF16 1
#endif
#ifndef AP_KVQ /* 0: KV rows as floats (AP_KVBF16); 8 or 4: quantized rows (kv_quant.cuh) */
#define AP_KVQ 0
#endif
#ifndef AP_PAGE_BYTES /* default: one layer per page */
#define AP_PAGE_BYTES (AP_KVQ ? IG_KVQ_LAYER_BYTES(AP_KV, AP_PS, AP_D, AP_KVQ) : 2ull * AP_KV * AP_PS * AP_D * (AP_KVBF16 ? 2 : 4))
#endif
#ifndef AP_SCALE
#define AP_SCALE 0.08838834764831845f
#endif
#ifndef AP_WINDOW /* sliding window (keys a token attends, itself included), 0 = none */
#define AP_WINDOW 0
#endif
#ifndef AP_HPC /* query heads a CTA (of one KV head: they share the K/V tiles): 1, 2 or 4 (launch.h) */
#define AP_HPC 1
#endif
#ifndef AP_MINRUN /* runs shorter than this take the per-token CUDA-core path */
#define AP_MINRUN 4
#endif

#if AP_OBF16
#define AP_OT_ unsigned short
#else
#define AP_OT_ float
#endif
/* tensor-core path compiled in (besides the arch check) */
/* (quantized KV: tiles dequantized to the 16-bit type, in 16-bit packages only, whatever AP_KVBF16
 * says: it names float rows, and its default 1 once sent an f32 instance of quantized KV through
 * bf16 tiles) */
#define AP_MMA_ ((AP_KVQ ? AP_OBF16 : AP_KVBF16) && AP_D % 16 == 0 && AP_D <= 128)
#ifndef AP_WG /* 1: sm_90a images run 16-bit KV tiles (D 64, 128) on wgmma (_flash_wg); 0: --tune ap_wg=0 */
#define AP_WG 1
#endif
/* the tensor-core path on wgmma (_flash_wg) instead of mma.sync (_flash) */
#define AP_WGMMA_ (AP_WG && IG_WG && !AP_KVQ && AP_D % 64 == 0)
#ifndef AP_WS /* 1: wgmma images also have _flash_ws, run when launched with its producer warpgroup; 0: --tune ap_ws=0 */
#define AP_WS 1
#endif
/* _flash_ws where the image has wgmma: 16-bit K/V, TMA boxes of whole pages (or 64-slot parts of
 * them), 8-row aligned in the swizzle */
#define AP_WS_SHAPE_ (AP_WS && AP_WG && AP_MMA_ && !AP_KVQ && AP_D % 64 == 0 && AP_PS % 8 == 0 && (AP_PS % 64 == 0 || 64 % AP_PS == 0))
#ifndef AP_WBN /* _flash_ws: keys a K / V tile (64 or 128) */
#define AP_WBN 64
#endif
#ifndef AP_WS_CTAS /* _flash_ws: CTAs an SM its registers are sized for (__launch_bounds__) */
#define AP_WS_CTAS (AP_HPC == 1 ? 2 : 1)
#endif
#define AP_WS_ (AP_WS_SHAPE_ && AP_WGMMA_)
#define AP_NTH_ (IG_AP_BLOCK * AP_HPC)        /* the heads' threads: a warpgroup per head */
#define AP_NT_ (AP_NTH_ + (AP_WS_ ? IG_AP_BLOCK : 0)) /* threads a CTA at most (+ _flash_ws's producer warpgroup) */

#ifndef IG_AP_HELPERS
#define IG_AP_HELPERS
IG_DEV constexpr int ig_ap_pow2ceil(int x) { return x <= 1 ? 1 : 2 * ig_ap_pow2ceil((x + 1) / 2); }
/* the end of the run starting at tile row r: rows of one sequence at consecutive positions */
IG_DEV int ig_ap_run_end(int r, int n, const int *s_pos, const int *s_seq) {
    int e = r + 1;
    while (e < n && s_seq[e] == s_seq[r] && s_pos[e] == s_pos[e - 1] + 1) e++;
    return e;
}
IG_DEV void ig_ap_store(void *out, size_t i, float v, bool bf) {
    if (bf) ((unsigned short *)out)[i] = ig_f32_to_h(v);
    else ((float *)out)[i] = v;
}
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
IG_DEV void ig_ap_store2(void *out, size_t i, float a, float b, bool bf) {
    if (bf) *(unsigned *)((unsigned short *)out + i) = ig_pack2_h(a, b);
    else *(float2 *)((float *)out + i) = make_float2(a, b);
}
/* This thread's two rows of a tensor-core tile (ra = 16 warp + lane / 4, rb = ra + 8; valid inside
 * the run's rows r0 .. r1 - 1) and their positions (the run's last, plast, where not valid); jlo the
 * first key any row of the run attends (its first row's window w, 0 without one) */
struct ig_ap_rows {
    int ra, rb, pa, pb, plast, jlo;
    bool va, vb;
};
IG_DEV ig_ap_rows ig_ap_rows_of(int r0, int r1, int p0, int w) {
    ig_ap_rows g;
    g.plast = p0 + (r1 - r0 - 1);
    g.jlo = w > 0 && p0 >= w ? p0 - w + 1 : 0;
    g.ra = 16 * (int)((threadIdx.x % IG_AP_BLOCK) >> 5) + (int)((threadIdx.x & 31) >> 2), g.rb = g.ra + 8;
    g.va = g.ra >= r0 && g.ra < r1, g.vb = g.rb >= r0 && g.rb < r1;
    g.pa = g.va ? p0 + g.ra - r0 : g.plast, g.pb = g.vb ? p0 + g.rb - r0 : g.plast;
    return g;
}
/* (lo, hi) -> a 16-bit pair with lo in the low half, round to nearest even */
IG_DEV unsigned ig_ap_pack_h(float lo, float hi) {
#ifdef IG_CUDA_EMUL
    return ig_pack2_h(lo, hi);
#else
    unsigned r;
#if IG_F16
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
#endif
}
#endif
#endif /* IG_AP_HELPERS */

#if AP_KVQ
/* _tok for quantized KV: kv_quant.cuh's ig_kvq_attend by this warp alone, the lane groups merged,
 * the row staged in shared memory, rotated back (R^T) and stored. */
static __device__ __noinline__ void IG_CAT(AP_NAME, _tok)(int t, int h, int n, const float *q,
                                                           const unsigned char *kv_pool,
                                                           unsigned long long layer_off, const int *pt,
                                                           AP_OT_ *out) {
    typedef ig_kvq_geom<AP_D, AP_KVQ, AP_D % 16 == 0 ? 16 : 8> Q;
    constexpr int G = AP_H / AP_KV, D = AP_D, VE = Q::VE, DV = Q::DV, TPK = Q::TPK, NV = Q::NV, E = Q::E;
    constexpr float QS = (float)(AP_SCALE) * 1.4426950408889634f;
    __shared__ float rows[IG_AP_WARPS][D];
    const int lane = threadIdx.x & 31, kk = lane / TPK, vl = lane % TPK, kh = h / G, warp = threadIdx.x >> 5;
    float qr[1][E], acc[1][E], m[1] = {IG_NEG_INF}, l[1] = {0.0f};
    const float *qh = q + (size_t)t * AP_H * D + (size_t)h * D;
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int e = 0; e < VE; e++) {
            const int v = vl + TPK * j;
            qr[0][j * VE + e] = v < DV ? qh[v * VE + e] * QS : 0.0f;
            acc[0][j * VE + e] = 0.0f;
        }
    const int lo = AP_WINDOW > 0 && n > AP_WINDOW ? n - AP_WINDOW : 0; /* the window's first key */
    ig_kvq_attend<AP_KV, AP_PS, D, AP_KVQ, VE, 1, 1, 2, false, AP_PAGE_BYTES>(kh, lo, n, 0, qr, acc, m, l, kv_pool, layer_off, pt);
#pragma unroll
    for (int o = TPK; o < 32; o <<= 1) {
        const float om = __shfl_xor_sync(IG_FULL_MASK, m[0], o), ol = __shfl_xor_sync(IG_FULL_MASK, l[0], o);
        const float M = fmaxf(m[0], om), f1 = ig_sm_factor(m[0], M), f2 = ig_sm_factor(om, M);
        l[0] = l[0] * f1 + ol * f2;
#pragma unroll
        for (int e = 0; e < E; e++) acc[0][e] = acc[0][e] * f1 + __shfl_xor_sync(IG_FULL_MASK, acc[0][e], o) * f2;
        m[0] = M;
    }
    float *row = rows[warp];
    __syncwarp();
    if (kk == 0) {
        const float inv = 1.0f / l[0];
#pragma unroll
        for (int jv = 0; jv < NV; jv++) {
            const int v = vl + TPK * jv;
            if (v < DV)
#pragma unroll
                for (int e = 0; e < VE; e++) row[v * VE + e] = acc[0][jv * VE + e] * inv;
        }
    }
    ig_kvq_unrotate_w<D>(row);
    const size_t o0 = (size_t)t * AP_H * D + (size_t)h * D;
    for (int d = lane; d < D; d += 32) ig_ap_store(out, o0 + d, row[d], AP_OBF16);
    __syncwarp();
}
#else
/* One token t (head h, keys 0..n-1 through page table pt) by one warp on CUDA cores. TPK lanes read
 * a key row with 16-byte loads, 32/TPK keys per step, 2 steps in flight; each lane group keeps its
 * own online-softmax state, merged by shuffles at the end. */
static __device__ __noinline__ void IG_CAT(AP_NAME, _tok)(int t, int h, int n, const float *q,
                                                           const unsigned char *kv_pool,
                                                           unsigned long long layer_off, const int *pt,
                                                           AP_OT_ *out) {
    constexpr int G = AP_H / AP_KV, D = AP_D, ES = AP_KVBF16 ? 2 : 4, VE = 16 / ES, DV = D / VE;
    constexpr int TPK = ig_ap_pow2ceil(DV) < 32 ? ig_ap_pow2ceil(DV) : 32;
    constexpr int NV = (DV + TPK - 1) / TPK, KPW = 32 / TPK, UK = 2, E = NV * VE;
    constexpr float QS = (float)(AP_SCALE) * 1.4426950408889634f;
    const int lane = threadIdx.x & 31, kk = lane / TPK, vl = lane % TPK, kh = h / G;
    float qr[E], acc[E], m = IG_NEG_INF, l = 0.0f;
    const float *qh = q + (size_t)t * AP_H * D + (size_t)h * D;
#pragma unroll
    for (int j = 0; j < NV; j++)
#pragma unroll
        for (int e = 0; e < VE; e++) {
            const int v = vl + TPK * j;
            qr[j * VE + e] = v < DV ? qh[v * VE + e] * QS : 0.0f;
            acc[j * VE + e] = 0.0f;
        }
    const size_t koff = (size_t)kh * AP_PS * D * ES;
    const size_t voff = ((size_t)AP_KV * AP_PS * D + (size_t)kh * AP_PS * D) * ES;
    const int lo = AP_WINDOW > 0 && n > AP_WINDOW ? n - AP_WINDOW : 0; /* the window's first key */
    for (int jb = lo; jb < n; jb += KPW * UK) {
        uint4 kr[UK][NV], vr[UK][NV];
#pragma unroll
        for (int u = 0; u < UK; u++) {
            const int j = jb + u * KPW + kk;
            const bool ok = j < n;
            const unsigned char *base =
                kv_pool + (unsigned long long)(ok ? __ldg(pt + j / AP_PS) : 0) * AP_PAGE_BYTES + layer_off;
            const size_t row = (size_t)(ok ? j % AP_PS : 0) * D * ES;
#pragma unroll
            for (int jv = 0; jv < NV; jv++) {
                const int v = vl + TPK * jv;
                const bool okv = ok && v < DV;
                kr[u][jv] = okv ? ig_ldg16(base + koff + row + (size_t)v * 16) : make_uint4(0u, 0u, 0u, 0u);
                vr[u][jv] = okv ? ig_ldg16(base + voff + row + (size_t)v * 16) : make_uint4(0u, 0u, 0u, 0u);
            }
        }
#pragma unroll
        for (int u = 0; u < UK; u++) {
            float kf[E], vf[E];
#pragma unroll
            for (int jv = 0; jv < NV; jv++) ig_unpack16(kr[u][jv], ES, kf + jv * VE), ig_unpack16(vr[u][jv], ES, vf + jv * VE);
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < E; e++) d = fmaf(qr[e], kf[e], d);
#pragma unroll
            for (int o = TPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(IG_FULL_MASK, d, o);
            if (jb + u * KPW + kk < n) {
                const float mn = fmaxf(m, d), corr = ig_exp2(m - mn), p = ig_exp2(d - mn);
                l = l * corr + p;
#pragma unroll
                for (int e = 0; e < E; e++) acc[e] = fmaf(p, vf[e], acc[e] * corr);
                m = mn;
            }
        }
    }
#pragma unroll
    for (int o = TPK; o < 32; o <<= 1) {
        const float om = __shfl_xor_sync(IG_FULL_MASK, m, o), ol = __shfl_xor_sync(IG_FULL_MASK, l, o);
        const float M = fmaxf(m, om), f1 = ig_sm_factor(m, M), f2 = ig_sm_factor(om, M);
        l = l * f1 + ol * f2;
#pragma unroll
        for (int e = 0; e < E; e++) acc[e] = acc[e] * f1 + __shfl_xor_sync(IG_FULL_MASK, acc[e], o) * f2;
        m = M;
    }
    if (kk == 0) {
        const float inv = 1.0f / l;
        const size_t o0 = (size_t)t * AP_H * D + (size_t)h * D;
#pragma unroll
        for (int jv = 0; jv < NV; jv++) {
            const int v = vl + TPK * jv;
            if (v < DV)
#pragma unroll
                for (int e = 0; e < VE; e++) ig_ap_store(out, o0 + v * VE + e, acc[jv * VE + e] * inv, AP_OBF16);
        }
    }
}

#endif /* AP_KVQ */

/* The tile's runs shorter than minrun (decode tokens of a mixed batch): token by token, round-robin
 * over the warps of head h's warpgroup. */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _short_runs)(int n, int minrun, const int *s_pos, const int *s_seq,
                                                                     int t0, int h, const float *q,
                                                                     const unsigned char *kv_pool, unsigned long long layer_off,
                                                                     const int *page_table, int max_pages, AP_OT_ *out) {
    const int warp = (threadIdx.x % IG_AP_BLOCK) >> 5;
    int k = 0;
    for (int r = 0, e; r < n; r = e) {
        e = ig_ap_run_end(r, n, s_pos, s_seq);
        if (e - r >= minrun) continue;
        for (int i = r; i < e; i++, k++)
            if (k % IG_AP_WARPS == warp)
                IG_CAT(AP_NAME, _tok)(t0 + i, h, s_pos[i] + 1, q, kv_pool, layer_off, page_table + (size_t)s_seq[i] * max_pages,
                                      out);
    }
}

#if AP_MMA_ && ((defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL))
/* The online softmax of one key tile (keys kbase .. kbase + BN - 1, BN = 8 NB) for this thread's two
 * rows (a at position pa, b at pb; the run's rows p0 .. plast): s[NB][4] the scores (mma's
 * accumulator layout: keys kbase + 8 nb + 2 tig + 0 / 1) masked causally and by the window, then
 * exp2 against the new maxima ma / mb; the row sums la / lb and the outputs o[NO][4] rescaled. */
template <int NB, int NO>
static __device__ __forceinline__ void IG_CAT(AP_NAME, _softmax)(float (*s)[4], float (*o)[4], int kbase, int p0, int plast,
                                                                  int pa, int pb, int tig, float &ma, float &mb, float &la,
                                                                  float &lb) {
    constexpr int BN = 8 * NB, D = 8 * NO;
    if (kbase + BN - 1 > p0) { /* diagonal (or beyond-the-end) tile: causal mask */
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const int j = kbase + nb * 8 + 2 * tig;
            if (j > pa) s[nb][0] = IG_NEG_INF;
            if (j + 1 > pa) s[nb][1] = IG_NEG_INF;
            if (j > pb) s[nb][2] = IG_NEG_INF;
            if (j + 1 > pb) s[nb][3] = IG_NEG_INF;
        }
    }
    if (AP_WINDOW > 0 && kbase <= plast - AP_WINDOW) { /* a tile reaching before some row's window */
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const int j = kbase + nb * 8 + 2 * tig;
            if (j <= pa - AP_WINDOW) s[nb][0] = IG_NEG_INF;
            if (j + 1 <= pa - AP_WINDOW) s[nb][1] = IG_NEG_INF;
            if (j <= pb - AP_WINDOW) s[nb][2] = IG_NEG_INF;
            if (j + 1 <= pb - AP_WINDOW) s[nb][3] = IG_NEG_INF;
        }
    }
    float xa = IG_NEG_INF, xb = IG_NEG_INF;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) xa = fmaxf(xa, fmaxf(s[nb][0], s[nb][1])), xb = fmaxf(xb, fmaxf(s[nb][2], s[nb][3]));
    xa = fmaxf(xa, __shfl_xor_sync(IG_FULL_MASK, xa, 1)), xa = fmaxf(xa, __shfl_xor_sync(IG_FULL_MASK, xa, 2));
    xb = fmaxf(xb, __shfl_xor_sync(IG_FULL_MASK, xb, 1)), xb = fmaxf(xb, __shfl_xor_sync(IG_FULL_MASK, xb, 2));
    /* without a window, key 0 of tile 0 is visible to every row, so the new maxima are
     * finite; with one, a row may see no key of a tile before its window starts: its
     * maximum stays -inf, and its exponentials are taken against 0 (all of them 0) */
    const float na = fmaxf(ma, xa), nb_ = fmaxf(mb, xb);
    const float ua = AP_WINDOW > 0 && na == IG_NEG_INF ? 0.0f : na;
    const float ub = AP_WINDOW > 0 && nb_ == IG_NEG_INF ? 0.0f : nb_;
    const float ca = ig_exp2(ma - ua), cb = ig_exp2(mb - ub);
    ma = na, mb = nb_;
    float sa = 0.0f, sb = 0.0f;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        s[nb][0] = ig_exp2(s[nb][0] - ua), s[nb][1] = ig_exp2(s[nb][1] - ua);
        s[nb][2] = ig_exp2(s[nb][2] - ub), s[nb][3] = ig_exp2(s[nb][3] - ub);
        sa += s[nb][0] + s[nb][1], sb += s[nb][2] + s[nb][3];
    }
    la = la * ca + sa, lb = lb * cb + sb;
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] *= ca, o[i][1] *= ca, o[i][2] *= cb, o[i][3] *= cb;
}
/* Q fragments (the A operand, 16 rows x D per warp, pre-scaled by AP_SCALE log2 e, rounded to the
 * 16-bit type) of this thread's rows ra / rb of the tile at token t0 (zeros where not valid) */
template <int KD>
static __device__ __forceinline__ void IG_CAT(AP_NAME, _qfrag)(const float *q, int t0, int ra, int rb, bool va, bool vb, int h,
                                                                int tig, unsigned (*qa)[4]) {
    constexpr int D = AP_D;
    constexpr float QS = (float)(AP_SCALE) * 1.4426950408889634f;
    const float *qra = q + (size_t)(t0 + ra) * AP_H * D + (size_t)h * D;
    const float *qrb = q + (size_t)(t0 + rb) * AP_H * D + (size_t)h * D;
#pragma unroll
    for (int k = 0; k < KD; k++) {
        const int c = 16 * k + 2 * tig;
        float2 x0 = va ? *(const float2 *)(qra + c) : make_float2(0.f, 0.f);
        float2 x1 = vb ? *(const float2 *)(qrb + c) : make_float2(0.f, 0.f);
        float2 x2 = va ? *(const float2 *)(qra + c + 8) : make_float2(0.f, 0.f);
        float2 x3 = vb ? *(const float2 *)(qrb + c + 8) : make_float2(0.f, 0.f);
        qa[k][0] = ig_ap_pack_h(x0.x * QS, x0.y * QS);
        qa[k][1] = ig_ap_pack_h(x1.x * QS, x1.y * QS);
        qa[k][2] = ig_ap_pack_h(x2.x * QS, x2.y * QS);
        qa[k][3] = ig_ap_pack_h(x3.x * QS, x3.y * QS);
    }
}
#if !AP_KVQ
/* the rows' outputs o / l (16-bit KV rows: nothing to rotate back) */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _store)(AP_OT_ *out, int t0, int ra, int rb, bool va, bool vb, int h,
                                                                int tig, float (*o)[4], float la, float lb) {
    constexpr int D = AP_D;
    la += __shfl_xor_sync(IG_FULL_MASK, la, 1), la += __shfl_xor_sync(IG_FULL_MASK, la, 2);
    lb += __shfl_xor_sync(IG_FULL_MASK, lb, 1), lb += __shfl_xor_sync(IG_FULL_MASK, lb, 2);
    const float ia = 1.0f / la, ib = 1.0f / lb;
    const size_t oa = (size_t)(t0 + ra) * AP_H * D + (size_t)h * D, ob = (size_t)(t0 + rb) * AP_H * D + (size_t)h * D;
#pragma unroll
    for (int i = 0; i < D / 8; i++) {
        const int c = 8 * i + 2 * tig;
        if (va) ig_ap_store2(out, oa + c, o[i][0] * ia, o[i][1] * ia, AP_OBF16);
        if (vb) ig_ap_store2(out, ob + c, o[i][2] * ib, o[i][3] * ib, AP_OBF16);
    }
}
#endif

#if !AP_KVQ
/* cp.async of 16-bit key tile kt (K or V: byte offset off in the pages' layer) into shared address
 * dst: a thread per 16-byte chunk c of key row r, keys past plast or before jlo (every row's window)
 * zero-filled and never read; rows padded to D + 8 elements (_flash's ldmatrix) or, with SW, in
 * 64-column blocks of 128-byte swizzled rows (_flash_wg's wgmma) */
template <bool SW>
static __device__ __forceinline__ void IG_CAT(AP_NAME, _load_tile)(int kt, size_t off, unsigned dst, int plast, int jlo,
                                                                    const unsigned char *kv_pool, unsigned long long layer_off,
                                                                    const int *pt) {
    constexpr int D = AP_D, BN = IG_AP_BN, CH = D / 8;
#pragma unroll 2
    for (int i = (int)threadIdx.x; i < BN * CH; i += AP_NTH_) {
        const int r = i / CH, c = i % CH, j = kt * BN + r;
        const bool ok = j <= plast && j >= jlo;
        const unsigned char *src = ok ? kv_pool + (unsigned long long)__ldg(pt + j / AP_PS) * AP_PAGE_BYTES + layer_off + off +
                                            (size_t)(j % AP_PS) * D * 2 + (size_t)c * 16
                                      : kv_pool;
        const unsigned at = SW ? (unsigned)(c / 8) * BN * 128 + ig_wg_chunk(r, c % 8) : (unsigned)(r * (D + 8) + c * 8) * 2;
        ig_cp16(dst + at, src, ok ? 16 : 0);
    }
}
#endif
#if !AP_WGMMA_
/* Rows r0..r1-1 of the tile starting at token t0 (one sequence, positions p0.., page table pt) for
 * head h, by the whole CTA on tensor cores. sm: 2 * BN * (D + 8) bf16 (K tile, V tile). Starts and
 * ends with every warp past a barrier (the caller may reuse sm). */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _flash)(int t0, int r0, int r1, int p0, int h,
                                                                const float *q, const unsigned char *kv_pool,
                                                                unsigned long long layer_off, const int *pt,
                                                                AP_OT_ *out, unsigned short *sm) {
    constexpr int G = AP_H / AP_KV, D = AP_D, BN = IG_AP_BN, LD = D + 8, KD = D / 16, NB = BN / 8;
    static_assert(BN % 16 == 0, "key tiles of 16-key products");
    const int tid = threadIdx.x, lane = tid & 31, warp = (tid % IG_AP_BLOCK) >> 5, tig = lane & 3, kh = h / G;
    const ig_ap_rows g = ig_ap_rows_of(r0, r1, p0, AP_WINDOW);
    const int ra = g.ra, rb = g.rb, pa = g.pa, pb = g.pb, plast = g.plast, jlo = g.jlo;
    const bool va = g.va, vb = g.vb;
    /* of this warp's rows: the position of the last inside the run (-1: none), tiles past it skipped */
    const int wlo = 16 * warp, wlast = min(wlo + 15, r1 - 1);
    const int wmax = (wlast < r0 || wlast < wlo) ? -1 : p0 + wlast - r0;
    const int wfirst = max(wlo, r0), wmin = AP_WINDOW > 0 ? p0 + wfirst - r0 - AP_WINDOW + 1 : 0; /* its first key */

    unsigned qa[KD][4];
    IG_CAT(AP_NAME, _qfrag)<KD>(q, t0, ra, rb, va, vb, h, tig, qa);
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float ma = IG_NEG_INF, mb = IG_NEG_INF, la = 0.0f, lb = 0.0f;

    unsigned short *sk = sm, *sv = sm + BN * LD;
    const unsigned sk_a = ig_smem_addr(sk), sv_a = ig_smem_addr(sv);
#if AP_KVQ
    /* quantized KV: tiles dequantized into shared memory by plain loads (the cp.async groups
     * below are then empty); rows past plast zero. V and 8-bit K: a thread per CB-byte chunk;
     * delta-coded 4-bit K: a thread per column walks the tile's rows in order, its running
     * reconstruction kc (times each row's predictor) carried from tile to tile (reset at each
     * page's slot 0). */
    typedef ig_kvq_geom<D, AP_KVQ, 8> QG; /* 8 codes: one 16-byte store of the 16-bit type */
    constexpr int QCB = QG::CB, QVE = QG::VE, QCH = QG::DV;
    float kc = 0.0f;
    auto qload = [&](int kt, int kv01, unsigned short *dst) {
        if (kv01 == 0 && IG_KVQ_KDELTA(AP_KVQ)) {
            if (tid >= D) return;
#pragma unroll 8
            for (int r = 0; r < BN; r++) {
                const int j = kt * BN + r;
                float x = 0.0f;
                if (j <= plast) {
                    const unsigned char *b = kv_pool + (unsigned long long)__ldg(pt + j / AP_PS) * AP_PAGE_BYTES + layer_off;
                    const int rr = kh * AP_PS + j % AP_PS;
                    const float sc = ig_kvq_h2f(__ldg((const unsigned short *)(b + ig_kvq_scale_off<AP_KV, AP_PS, D, AP_KVQ>(0, rr))));
                    const unsigned zq = __ldg(b + ig_kvq_zero_off<AP_KV, AP_PS, D, AP_KVQ>(0, rr));
                    const float zb = -sc * (float)(zq & 15u); /* bits 4..6: the row's predictor */
                    const unsigned char byte = __ldg(b + ig_kvq_codes_off<AP_KV, AP_PS, D, AP_KVQ>(0, rr) + tid / 2);
                    const float o = fmaf((float)((tid & 1) ? byte >> 4 : byte & 15), sc, zb);
                    x = j % AP_PS ? fmaf(IG_KVQ_PRED(zq >> 4), kc, o) : o;
                    kc = x;
                }
                dst[r * LD + tid] = ig_f32_to_h(x);
            }
            return;
        }
        for (int i = tid; i < BN * QCH; i += IG_AP_BLOCK) {
            const int r = i / QCH, c = i % QCH, j = kt * BN + r;
            float x[QVE];
            if (j <= plast) {
                const unsigned char *b = kv_pool + (unsigned long long)__ldg(pt + j / AP_PS) * AP_PAGE_BYTES + layer_off;
                const int rr = kh * AP_PS + j % AP_PS;
                const float sc = ig_kvq_h2f(__ldg((const unsigned short *)(b + ig_kvq_scale_off<AP_KV, AP_PS, D, AP_KVQ>(kv01, rr))));
                const float zb = -sc * (float)__ldg(b + ig_kvq_zero_off<AP_KV, AP_PS, D, AP_KVQ>(kv01, rr));
                ig_kvq_unpack<QCB, AP_KVQ>(ig_kvq_ld<QCB, false>(b + ig_kvq_codes_off<AP_KV, AP_PS, D, AP_KVQ>(kv01, rr) + c * QCB),
                                           sc, zb, x);
            } else {
#pragma unroll
                for (int e = 0; e < QVE; e++) x[e] = 0.0f;
            }
            unsigned *w = (unsigned *)(dst + r * LD + c * QVE);
#pragma unroll
            for (int e = 0; e < QVE; e += 2) w[e / 2] = ig_ap_pack_h(x[e], x[e + 1]);
        }
    };
#define AP_LOAD_K_(kt) qload((kt), 0, sk)
#define AP_LOAD_V_(kt) qload((kt), 1, sv)
#else
    const size_t koff = (size_t)kh * AP_PS * D * 2;
    const size_t voff = ((size_t)AP_KV * AP_PS * D + (size_t)kh * AP_PS * D) * 2;
    /* issue the loads of key tile kt (K or V) into shared memory */
    auto load_tile = [&](int kt, size_t off, unsigned dst) {
        IG_CAT(AP_NAME, _load_tile)<false>(kt, off, dst, plast, jlo, kv_pool, layer_off, pt);
    };
#define AP_LOAD_K_(kt) load_tile((kt), koff, sk_a)
#define AP_LOAD_V_(kt) load_tile((kt), voff, sv_a)
#endif
    const int nt = plast / BN + 1, kt0 = jlo / BN;
    /* ldmatrix lane addresses (bytes, relative to the tile): K non-transposed, key-major pairs of
     * n-blocks; V transposed, 16 keys x 2 d-blocks */
    const unsigned k_lane = (unsigned)(((lane & 7) + ((lane >> 4) << 3)) * LD + ((lane >> 3) & 1) * 8) * 2;
    const unsigned v_lane = (unsigned)(((lane & 7) + (((lane >> 3) & 1) << 3)) * LD + (lane >> 4) * 8) * 2;

    AP_LOAD_K_(kt0);
    ig_cp_commit();
    for (int kt = kt0; kt < nt; kt++) {
        ig_cp_wait<0>();
        __syncthreads(); /* K[kt] visible; every warp done with V[kt-1] */
        AP_LOAD_V_(kt);
        ig_cp_commit();
        const int kbase = kt * BN;
        /* some row of this warp sees a key of the tile */
        const bool active = kbase <= wmax && kbase + BN - 1 >= wmin;
        float s[NB][4];
        if (active) {
#pragma unroll
            for (int i = 0; i < NB; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
            for (int k = 0; k < KD; k++)
#pragma unroll
                for (int nb = 0; nb < NB; nb += 2) {
                    unsigned b[4];
                    ig_ldsm4(sk_a + k_lane + (unsigned)(nb * 8 * LD + k * 16) * 2, b);
                    ig_mma16(s[nb], qa[k], b[0], b[1]);
                    ig_mma16(s[nb + 1], qa[k], b[2], b[3]);
                }
            IG_CAT(AP_NAME, _softmax)<NB, D / 8>(s, o, kbase, p0, plast, pa, pb, tig, ma, mb, la, lb);
        }
        __syncthreads(); /* every warp done with K[kt] */
        if (kt + 1 < nt) AP_LOAD_K_(kt + 1);
        ig_cp_commit();
        ig_cp_wait<1>(); /* V[kt] landed (K[kt+1] may still fly) */
        __syncthreads();
        if (active) {
#pragma unroll
            for (int j = 0; j < BN / 16; j++) {
                unsigned pfr[4];
                pfr[0] = ig_ap_pack_h(s[2 * j][0], s[2 * j][1]);
                pfr[1] = ig_ap_pack_h(s[2 * j][2], s[2 * j][3]);
                pfr[2] = ig_ap_pack_h(s[2 * j + 1][0], s[2 * j + 1][1]);
                pfr[3] = ig_ap_pack_h(s[2 * j + 1][2], s[2 * j + 1][3]);
#pragma unroll
                for (int db = 0; db < D / 8; db += 2) {
                    unsigned b[4];
                    ig_ldsm4t(sv_a + v_lane + (unsigned)(j * 16 * LD + db * 8) * 2, b);
                    ig_mma16(o[db], pfr, b[0], b[1]);
                    ig_mma16(o[db + 1], pfr, b[2], b[3]);
                }
            }
        }
    }
    ig_cp_wait<0>();
    __syncthreads(); /* the caller may run another run through sm */
#if AP_KVQ
    la += __shfl_xor_sync(IG_FULL_MASK, la, 1), la += __shfl_xor_sync(IG_FULL_MASK, la, 2);
    lb += __shfl_xor_sync(IG_FULL_MASK, lb, 1), lb += __shfl_xor_sync(IG_FULL_MASK, lb, 2);
    const float ia = 1.0f / la, ib = 1.0f / lb;
    /* rows staged in sm as f32 (the warp's 16 rows: 64 x D floats fit the two tiles), rotated back
     * (R^T) a row at a time by the warp, stored */
    float *rows = (float *)sm;
#pragma unroll
    for (int i = 0; i < D / 8; i++) {
        const int c = 8 * i + 2 * tig;
        rows[ra * D + c] = o[i][0] * ia, rows[ra * D + c + 1] = o[i][1] * ia;
        rows[rb * D + c] = o[i][2] * ib, rows[rb * D + c + 1] = o[i][3] * ib;
    }
    for (int rr = 16 * warp; rr < 16 * warp + 16; rr++) {
        if (rr < r0 || rr >= r1) continue; /* warp-uniform */
        float *x = rows + rr * D;
        ig_kvq_unrotate_w<D>(x);
        const size_t orow = (size_t)(t0 + rr) * AP_H * D + (size_t)h * D;
        for (int d = 2 * lane; d < D; d += 64) ig_ap_store2(out, orow + d, x[d], x[d + 1], AP_OBF16);
    }
    __syncthreads(); /* the caller may run another run through sm */
#else
    IG_CAT(AP_NAME, _store)(out, t0, ra, rb, va, vb, h, tig, o, la, lb);
#endif
}
#undef AP_LOAD_K_
#undef AP_LOAD_V_
#endif /* !AP_WGMMA_ */

#if AP_WGMMA_
/* The warpgroup's Q tile (rows ra / rb of this thread, pre-scaled and rounded as _qfrag makes them)
 * into shared memory at qt in wgmma.cuh's swizzled 64-column blocks of 64 rows, then fenced for the
 * products (which read it after a barrier of the warpgroup) */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _write_q)(const float *q, int t0, const ig_ap_rows &g, int h, int tig,
                                                                  unsigned char *qt) {
    constexpr int KD = AP_D / 16;
    constexpr unsigned QBLK = IG_AP_BM * 128;
    unsigned qa[KD][4];
    IG_CAT(AP_NAME, _qfrag)<KD>(q, t0, g.ra, g.rb, g.va, g.vb, h, tig, qa);
#pragma unroll
    for (int k = 0; k < KD; k++) { /* the words of mma.sync's A layout: rows ra / rb, columns 16 k + 2 tig (+ 8) */
        const unsigned blk = (unsigned)(k / 4) * QBLK, c = (unsigned)(2 * (k % 4)), b = 4u * (unsigned)tig;
        *(unsigned *)(qt + blk + ig_wg_chunk(g.ra, c) + b) = qa[k][0];
        *(unsigned *)(qt + blk + ig_wg_chunk(g.rb, c) + b) = qa[k][1];
        *(unsigned *)(qt + blk + ig_wg_chunk(g.ra, c + 1) + b) = qa[k][2];
        *(unsigned *)(qt + blk + ig_wg_chunk(g.rb, c + 1) + b) = qa[k][3];
    }
    ig_fence_async();
}
/* P (the softmax's exponentials in s, mma's accumulator layout) as the A operand of P V, 16 keys a
 * product */
template <int NB>
static __device__ __forceinline__ void IG_CAT(AP_NAME, _pack_p)(const float (*s)[4], unsigned (*pf)[4]) {
#pragma unroll
    for (int j = 0; j < NB / 2; j++) {
        pf[j][0] = ig_ap_pack_h(s[2 * j][0], s[2 * j][1]);
        pf[j][1] = ig_ap_pack_h(s[2 * j][2], s[2 * j][3]);
        pf[j][2] = ig_ap_pack_h(s[2 * j + 1][0], s[2 * j + 1][1]);
        pf[j][3] = ig_ap_pack_h(s[2 * j + 1][2], s[2 * j + 1][3]);
    }
}
/* _flash on Hopper's warpgroup tensor cores, by this warpgroup for its head (AP_HPC warpgroups a
 * CTA, on the same K/V tiles, which all the CTA's threads load). S = Q K^T a
 * wgmma m64n64k16 per 16 of D with both tiles in shared memory (Q is written there once a run, in
 * the package's 16-bit type, scaled), O += P V a wgmma m64nDk16 per 16 keys (P from registers, the V
 * tile MN-major: the products transpose it), so no fragment of K or V passes through registers.
 * The tiles: 64 rows (queries or keys) x D in 64-column blocks of 128-byte swizzled rows (wgmma.cuh),
 * 8 KB each for D 64, 16 KB for D 128: the heads' Q tiles, K and V, inside IG_AP_SMEM_H with the
 * 1 KB that aligns them.
 * (Q from registers, as P, was right only for the first key tile at D 64: ptxas 13.0 gave the
 * loop-invariant Q fragments' registers to other values inside the loop, seen in the SASS.) Loads,
 * barriers, masks and the online softmax as _flash's; each product is waited for before its
 * registers are read (no overlap of the softmax with the products yet). Every tile of the loop is
 * taken by the whole warpgroup (rows that see none of its keys mask them all). */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _flash_wg)(int t0, int r0, int r1, int p0, int h,
                                                                   const float *q, const unsigned char *kv_pool,
                                                                   unsigned long long layer_off, const int *pt,
                                                                   AP_OT_ *out, unsigned char *smraw) {
    constexpr int G = AP_H / AP_KV, D = AP_D, BN = IG_AP_BN, KD = D / 16, NB = BN / 8;
    constexpr unsigned TILE = BN * D * 2, BLK = BN * 128; /* a tile's bytes; a 64-column block's */
    static_assert(BN == 64 && IG_AP_BM == BN && IG_AP_BLOCK == 128 &&
                      (AP_HPC + 2) * TILE + 1024 <= IG_AP_SMEM_H(D, AP_HPC),
                  "a warpgroup a head, 64-row tiles in the launch's shared memory");
    const int tig = threadIdx.x & 3, kh = h / G, wgi = (int)threadIdx.x / IG_AP_BLOCK;
    const ig_ap_rows g = ig_ap_rows_of(r0, r1, p0, AP_WINDOW);
    const int ra = g.ra, rb = g.rb, pa = g.pa, pb = g.pb, plast = g.plast, jlo = g.jlo;
    const bool va = g.va, vb = g.vb;
    const unsigned sbase = (ig_smem_addr(smraw) + 1023u) & ~1023u, sq = sbase + (unsigned)wgi * TILE;
    const unsigned sk = sbase + AP_HPC * TILE, sv = sk + TILE;
    IG_CAT(AP_NAME, _write_q)(q, t0, g, h, tig, smraw + (sq - ig_smem_addr(smraw))); /* read after the loop's first barrier */
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float ma = IG_NEG_INF, mb = IG_NEG_INF, la = 0.0f, lb = 0.0f;
    const size_t koff = (size_t)kh * AP_PS * D * 2, voff = ((size_t)AP_KV * AP_PS * D + (size_t)kh * AP_PS * D) * 2;
    auto load_tile = [&](int kt, size_t off, unsigned dst) {
        IG_CAT(AP_NAME, _load_tile)<true>(kt, off, dst, plast, jlo, kv_pool, layer_off, pt);
    };
    const int nt = plast / BN + 1, kt0 = jlo / BN;
    load_tile(kt0, koff, sk);
    ig_cp_commit();
    for (int kt = kt0; kt < nt; kt++) {
        ig_cp_wait<0>();
        ig_fence_async();
        __syncthreads(); /* K[kt] visible; the products of V[kt-1] are done */
        load_tile(kt, voff, sv);
        ig_cp_commit();
        float s[NB][4];
#pragma unroll
        for (int i = 0; i < NB; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
        ig_wg_fence();
#pragma unroll
        for (int k = 0; k < KD; k++) { /* S = Q K^T */
            const unsigned at = (unsigned)(k / 4) * BLK + (unsigned)(k % 4) * 32;
            ig_wg_mma_ss<BN>(&s[0][0], ig_wg_desc(sq + at), ig_wg_desc(sk + at));
        }
        ig_wg_commit();
        ig_wg_wait<0>();
        ig_wg_hold<4 * NB>(&s[0][0]);
        IG_CAT(AP_NAME, _softmax)<NB, D / 8>(s, o, kt * BN, p0, plast, pa, pb, tig, ma, mb, la, lb);
        __syncthreads(); /* the products of K[kt] are done */
        if (kt + 1 < nt) load_tile(kt + 1, koff, sk);
        ig_cp_commit();
        ig_cp_wait<1>(); /* V[kt] landed (K[kt+1] may still fly) */
        ig_fence_async();
        __syncthreads();
        unsigned pf[BN / 16][4]; /* written before the fence */
        IG_CAT(AP_NAME, _pack_p)<NB>(s, pf);
        ig_wg_fence();
#pragma unroll
        for (int j = 0; j < BN / 16; j++) ig_wg_mma_rs<D, 1>(&o[0][0], pf[j], ig_wg_desc_mn(sv + (unsigned)j * 16 * 128, BLK));
        ig_wg_commit();
        ig_wg_wait<0>();
        ig_wg_hold<D / 2>(&o[0][0]);
    }
    ig_cp_wait<0>();
    __syncthreads(); /* the caller may run another run through sm */
    IG_CAT(AP_NAME, _store)(out, t0, ra, rb, va, vb, h, tig, o, la, lb);
}
#endif
#if AP_WS_
/* _flash_wg with the loads taken off the heads' warpgroups (FlashAttention-3's warp specialization):
 * launched with one more warpgroup (IG_AP_BLOCKW), which gives its registers to the heads' (setmaxnreg)
 * and whose first warp (_ws_load; lane 0 issues) brings each K and V tile by
 * TMA boxes of one page's rows (64 columns of the 128-byte swizzle a box) into IG_AP_WS_NS stages
 * of each, and the warpgroups (_ws_attend) wait for a stage's "full" mbarrier, take their products
 * from it and give it back on its "empty" one (an arrival a warp): no block barrier in the loop,
 * so each warpgroup's softmax runs while the tensor cores serve the other's products and the next
 * tiles land. Both sides walk the same tiles of the CTA's runs in the same order, counting them
 * in `it` (stage it % NS, its (it / NS)-th use). Boxes lying wholly past the run's last key or
 * before its first window are not loaded. Keys outside [jlo, plast] are masked, but P = 0 times a
 * V row that is not finite is NaN, and such rows may be in a loaded page (the pool past a
 * sequence's end holds whatever an earlier sequence wrote there): in a tile that reaches outside,
 * the whole warp waits for its V boxes (an auxiliary barrier, bars[4][0]), zeroes those rows,
 * fences them for the tensor cores and only then completes the stage's "full" barrier. K rows
 * need nothing (a masked score is set to -inf, whatever it was). bars: [0] K full, [1] V full,
 * [2] K empty, [3] V empty (all NS stages), [4][0] the auxiliary. */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _ws_load)(int r0, int r1, int p0, int kh, const ig_tmap *kvm,
                                                                  unsigned long long layer_off, const int *pt,
                                                                  unsigned char *smraw, unsigned sk, unsigned sv,
                                                                  unsigned long long (*bars)[IG_AP_WS_NS], int &it,
                                                                  unsigned &aux_ph) {
    constexpr int D = AP_D, BN = AP_WBN, NS = IG_AP_WS_NS, PB = AP_PS < 64 ? AP_PS : 64; /* a box: a page or 64 rows */
    constexpr unsigned TILE = BN * D * 2, BLK = BN * 128;
    static_assert((BN == 64 || BN == 128) && BN % PB == 0, "key tiles of whole boxes");
    constexpr unsigned long long PROWS = (unsigned long long)(AP_PAGE_BYTES) / (D * 2); /* rows of D a page */
    static_assert((unsigned long long)(AP_PAGE_BYTES) % (D * 2) == 0, "pages of whole rows");
    const int lane = threadIdx.x & 31;
    const ig_ap_rows g = ig_ap_rows_of(r0, r1, p0, AP_WINDOW);
    const unsigned long long base = layer_off / (D * 2) + (unsigned long long)kh * AP_PS;
    for (int kt = g.jlo / BN, nt = g.plast / BN + 1; kt < nt; kt++, it++) {
        const int st = it % NS, u = it / NS, lo = g.jlo - kt * BN, hi = g.plast - kt * BN; /* the tile's rows in use */
        const bool dirty = lo > 0 || hi < BN - 1;
        int nbox = 0;
        for (int j0 = kt * BN; j0 < kt * BN + BN; j0 += PB) nbox += j0 <= g.plast && j0 + PB - 1 >= g.jlo;
        for (int kv = 0; kv < 2; kv++) {
            unsigned long long *bar = kv && dirty ? &bars[4][0] : &bars[kv][st];
            const unsigned dst = (kv ? sv : sk) + (unsigned)st * TILE;
            if (lane == 0) {
                if (u) ig_mb_wait(&bars[2 + kv][st], (u - 1) & 1);
                ig_mb_expect(bar, (unsigned)nbox * (D / 64) * PB * 128);
                for (int j0 = kt * BN; j0 < kt * BN + BN; j0 += PB) {
                    if (j0 > g.plast || j0 + PB - 1 < g.jlo) continue;
                    const unsigned long long row = (unsigned long long)__ldg(pt + j0 / AP_PS) * PROWS + base +
                                                   (kv ? (unsigned long long)AP_KV * AP_PS : 0ull) + (unsigned)(j0 % AP_PS);
#pragma unroll
                    for (int b = 0; b < D / 64; b++)
                        ig_tma_load2(dst + (unsigned)b * BLK + (unsigned)(j0 - kt * BN) * 128, kvm, 64 * b, (int)row, bar);
                }
            }
            if (kv && dirty) { /* V rows outside [lo, hi] zeroed before the stage is published */
                ig_mb_wait(bar, aux_ph);
                aux_ph ^= 1u;
                unsigned char *v = smraw + (dst - ig_smem_addr(smraw));
                for (int i = lane; i < BN * (D / 64) * 8; i += 32) { /* 16-byte chunk i % 8 of line i / 8 */
                    const int line = i / 8, r = line % BN;
                    if (r < lo || r > hi) *(uint4 *)(v + (size_t)line * 128 + (i % 8) * 16) = make_uint4(0u, 0u, 0u, 0u);
                }
                ig_fence_async();
                __syncwarp();
                if (lane == 0) ig_mb_arrive(&bars[1][st]);
            }
        }
    }
}
/* A head's warpgroup (wgi) on the tiles _ws_load brings: _flash_wg's products and softmax. */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _ws_attend)(int t0, int r0, int r1, int p0, int h, const float *q,
                                                                    AP_OT_ *out, unsigned char *smraw, unsigned sq,
                                                                    unsigned sk, unsigned sv,
                                                                    unsigned long long (*bars)[IG_AP_WS_NS], int &it) {
    constexpr int D = AP_D, BN = AP_WBN, KD = D / 16, NB = BN / 8, NS = IG_AP_WS_NS;
    constexpr unsigned TILE = BN * D * 2, BLK = BN * 128, QBLK = IG_AP_BM * 128; /* 64-column blocks: K / V, Q */
    const int tig = threadIdx.x & 3, wgi = (int)threadIdx.x / IG_AP_BLOCK, lane = threadIdx.x & 31;
    const ig_ap_rows g = ig_ap_rows_of(r0, r1, p0, AP_WINDOW);
    ig_bar_named(1 + wgi, IG_AP_BLOCK); /* the warpgroup's products of an earlier run have read its Q tile */
    IG_CAT(AP_NAME, _write_q)(q, t0, g, h, tig, smraw + (sq - ig_smem_addr(smraw)));
    ig_bar_named(1 + wgi, IG_AP_BLOCK); /* the Q tile written */
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float ma = IG_NEG_INF, mb = IG_NEG_INF, la = 0.0f, lb = 0.0f;
    for (int kt = g.jlo / BN, nt = g.plast / BN + 1; kt < nt; kt++, it++) {
        const int st = it % NS;
        const unsigned ph = (unsigned)(it / NS) & 1u, k_s = sk + (unsigned)st * TILE, v_s = sv + (unsigned)st * TILE;
        float s[NB][4];
#pragma unroll
        for (int i = 0; i < NB; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
        ig_mb_wait(&bars[0][st], ph);
        ig_wg_fence();
#pragma unroll
        for (int k = 0; k < KD; k++) { /* S = Q K^T */
            const unsigned at = (unsigned)(k % 4) * 32;
            ig_wg_mma_ss<BN>(&s[0][0], ig_wg_desc(sq + (unsigned)(k / 4) * QBLK + at), ig_wg_desc(k_s + (unsigned)(k / 4) * BLK + at));
        }
        ig_wg_commit();
        ig_wg_wait<0>();
        ig_wg_hold<4 * NB>(&s[0][0]);
        __syncwarp();
        if (lane == 0) ig_mb_arrive(&bars[2][st]); /* this warp is done with K */
        IG_CAT(AP_NAME, _softmax)<NB, D / 8>(s, o, kt * BN, p0, g.plast, g.pa, g.pb, tig, ma, mb, la, lb);
        unsigned pf[BN / 16][4];
        IG_CAT(AP_NAME, _pack_p)<NB>(s, pf);
        ig_mb_wait(&bars[1][st], ph);
        ig_wg_fence();
#pragma unroll
        for (int j = 0; j < BN / 16; j++) ig_wg_mma_rs<D, 1>(&o[0][0], pf[j], ig_wg_desc_mn(v_s + (unsigned)j * 16 * 128, BLK));
        ig_wg_commit();
        ig_wg_wait<0>();
        ig_wg_hold<D / 2>(&o[0][0]);
        __syncwarp();
        if (lane == 0) ig_mb_arrive(&bars[3][st]); /* ... and with V */
    }
    IG_CAT(AP_NAME, _store)(out, t0, g.ra, g.rb, g.va, g.vb, h, tig, o, la, lb);
}
/* The CTA's long runs when launched with _flash_ws's producer warpgroup (every thread calls it, then
 * ends): the barriers set up, then the producer warpgroup gives registers to the heads' warpgroups
 * (setmaxnreg: ptxas honours it only where no code after it is shared by both sides, and gives the
 * heads' code more registers only without calls in it, hence each side's own loop to the end and
 * the short runs before) and its first warp loads, while each head's warpgroup attends. */
static __device__ __forceinline__ void IG_CAT(AP_NAME, _ws_runs)(int n, int minrun, const int *s_pos, const int *s_seq,
                                                                  int t0, const float *q, unsigned long long layer_off,
                                                                  const int *page_table,
                                                                  int max_pages, AP_OT_ *out, const ig_tmap *kvm,
                                                                  unsigned char *smraw) {
    constexpr int NS = IG_AP_WS_NS, G = AP_H / AP_KV;
    constexpr unsigned TILE = AP_WBN * AP_D * 2, QTILE = IG_AP_BM * AP_D * 2;
    /* registers: the launch's share (the bound's, BASE) moved from the producer (40 a thread) to the heads */
    constexpr int BASE = 65536 / (AP_WS_CTAS * AP_NT_) / 8 * 8, MORE = (BASE - 40) / AP_HPC / 8 * 8;
    __shared__ unsigned long long bars[5][NS];
    const unsigned s0 = ig_smem_addr(smraw), sbase = (s0 + 1023u) & ~1023u, sk = sbase + AP_HPC * QTILE, sv = sk + NS * TILE;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NS; i++) {
            ig_mb_init(&bars[0][i], 1), ig_mb_init(&bars[1][i], 1);
            ig_mb_init(&bars[2][i], AP_HPC * IG_AP_WARPS), ig_mb_init(&bars[3][i], AP_HPC * IG_AP_WARPS);
        }
        ig_mb_init(&bars[4][0], 1);
        ig_mb_fence_init();
    }
    __syncthreads();
    const int wgi = (int)threadIdx.x / IG_AP_BLOCK, h0 = (int)blockIdx.x * AP_HPC;
    int it = 0;
    if (wgi == AP_HPC) {
        ig_setmaxnreg_dec<40>();
        if ((int)threadIdx.x < AP_NTH_ + 32) { /* one warp loads */
            unsigned aux_ph = 0;
            for (int r = 0, e; r < n; r = e) {
                e = ig_ap_run_end(r, n, s_pos, s_seq);
                if (e - r >= minrun)
                    IG_CAT(AP_NAME, _ws_load)(r, e, s_pos[r], h0 / G, kvm, layer_off, page_table + (size_t)s_seq[r] * max_pages,
                                              smraw, sk, sv, bars, it, aux_ph);
            }
        }
    } else {
        ig_setmaxnreg_inc<(BASE + MORE > 256 ? 256 : BASE + MORE)>();
        for (int r = 0, e; r < n; r = e) {
            e = ig_ap_run_end(r, n, s_pos, s_seq);
            if (e - r >= minrun)
                IG_CAT(AP_NAME, _ws_attend)(t0, r, e, s_pos[r], h0 + wgi, q, out, smraw, sbase + (unsigned)wgi * QTILE, sk, sv,
                                            bars, it);
        }
    }
}
#endif
#endif /* tensor-core path */

/* whether this instance has the tensor-core path (before the arch check): tests read it */
static constexpr bool IG_CAT(AP_NAME, _has_tiles16) = AP_MMA_;
/* ... and _flash_ws in sm_90a images (a launch of IG_AP_BLOCKW threads with the pool's tensor map) */
static constexpr bool IG_CAT(AP_NAME, _has_ws) = AP_WS_SHAPE_;
static constexpr int IG_CAT(AP_NAME, _ws_bn) = AP_WBN; /* its keys a tile (IG_AP_SMEM_WS) */

extern "C" __global__ void __launch_bounds__(AP_NT_, AP_WS_ ? AP_WS_CTAS : AP_HPC == 1 ? 3 : 1)
AP_NAME(int T, const float *q, const unsigned char *kv_pool, unsigned long long layer_off,
        const int *positions, const int *token_seq, const int *page_table, int max_pages, AP_OT_ *out,
        const __grid_constant__ ig_tmap kvm) {
    static_assert(AP_H % AP_KV == 0, "AP_H must be a multiple of AP_KV");
    static_assert(AP_D % 8 == 0, "AP_D must be a multiple of 8 (16-byte loads)");
    static_assert(IG_AP_BM == 16 * IG_AP_WARPS, "each warp owns 16 rows of the tile");
    static_assert(!AP_KVQ || (AP_PS % 8 == 0 && AP_D % 8 == 0), "quantized KV: pages of a multiple of 8 slots (aligned code rows)");
    __shared__ int s_pos[IG_AP_BM], s_seq[IG_AP_BM];
    static_assert((AP_HPC == 1 || AP_HPC == 2 || AP_HPC == 4) && (AP_H / AP_KV) % AP_HPC == 0 && (!AP_KVQ || AP_HPC == 1),
                  "heads a CTA: 1, 2 or 4 of one KV head's group, 16-bit KV");
    const int h = (int)blockIdx.x * AP_HPC + (int)threadIdx.x / IG_AP_BLOCK, t0 = (gridDim.y - 1 - blockIdx.y) * IG_AP_BM;
    if (t0 >= T) return;
    const int n = min(IG_AP_BM, T - t0);
    for (int i = threadIdx.x; i < IG_AP_BM; i += (int)blockDim.x)
        s_pos[i] = i < n ? positions[t0 + i] : -1, s_seq[i] = i < n ? token_seq[t0 + i] : -1;
    __syncthreads();
#if AP_MMA_ && ((defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL))
    constexpr int MINRUN = AP_MINRUN < 1 ? 1 : AP_MINRUN;
    IG_DYN_SMEM(uint4, ig_ap_dyn_smem);
#if AP_WS_
    static_assert(IG_AP_SMEM_WS(AP_D, AP_HPC, AP_WBN) >= (AP_HPC * IG_AP_BM + 2 * IG_AP_WS_NS * AP_WBN) * AP_D * 2 + 1024,
                  "_flash_ws's tiles");
    if (blockDim.x > AP_NTH_) { /* launched with the producer warpgroup: short runs first, long ones warp-specialized */
        if (threadIdx.x < AP_NTH_)
            IG_CAT(AP_NAME, _short_runs)(n, MINRUN, s_pos, s_seq, t0, h, q, kv_pool, layer_off, page_table, max_pages, out);
        IG_CAT(AP_NAME, _ws_runs)(n, MINRUN, s_pos, s_seq, t0, q, layer_off, page_table, max_pages, out, &kvm,
                                  (unsigned char *)ig_ap_dyn_smem);
        return;
    } else
#else
    (void)kvm;
#endif
    /* long runs: the whole CTA, one after the other (uniform: every thread sees the same runs) */
    for (int r = 0, e; r < n; r = e) {
        e = ig_ap_run_end(r, n, s_pos, s_seq);
        if (e - r < MINRUN) continue;
#if AP_WGMMA_
        IG_CAT(AP_NAME, _flash_wg)(t0, r, e, s_pos[r], h, q, kv_pool, layer_off, page_table + (size_t)s_seq[r] * max_pages,
                                   out, (unsigned char *)ig_ap_dyn_smem);
#else
        IG_CAT(AP_NAME, _flash)(t0, r, e, s_pos[r], h, q, kv_pool, layer_off, page_table + (size_t)s_seq[r] * max_pages, out,
                                (unsigned short *)ig_ap_dyn_smem);
#endif
    }
#else
    constexpr int MINRUN = 1 << 30;
#endif
    IG_CAT(AP_NAME, _short_runs)(n, MINRUN, s_pos, s_seq, t0, h, q, kv_pool, layer_off, page_table, max_pages, out);
}

#undef AP_OT_
#undef AP_MMA_
#undef AP_WGMMA_
#undef AP_WG
#undef AP_HPC
#undef AP_NT_
#undef AP_NTH_
#undef AP_WS_
#undef AP_WS_SHAPE_
#undef AP_WBN
#undef AP_WS_CTAS
#undef AP_WS
#undef AP_NAME
#undef AP_H
#undef AP_KV
#undef AP_D
#undef AP_PS
#undef AP_KVBF16
#undef AP_KVQ
#undef AP_OBF16
#undef AP_PAGE_BYTES
#undef AP_SCALE
#undef AP_MINRUN
#undef AP_WINDOW
