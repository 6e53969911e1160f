/* rope_kv.cu — template: optional per-head q/k RMSNorm (Qwen3-style), rotary embedding on q and k
 * ("rotate half", HF Llama), and the write of this step's keys and values into the paged KV pool.
 * Same semantics as templates/cpu/rope_kv.c, except that the angles are computed here from the
 * positions (no rope_cs buffer).
 *
 * Instantiate with RK_NAME, RK_H, RK_KV, RK_D, RK_PS, RK_PAGE_BYTES, RK_KVBF16, RK_KVQ (0: KV rows as
 * floats per RK_KVBF16; 8 or 4: rotated and quantized per token and KV head, kv_quant.cuh — q_out
 * is then rotated too), RK_QKNORM, RK_EPS, RK_ROT (rotary dims, the first RK_ROT of each head:
 * partial rotary; default RK_D) and RK_INTERLEAVE (1: rotate pairs (2i, 2i+1) as GLM-4; 0: halves
 * (i, i + RK_ROT/2) as Llama), as templates/cpu/rope_kv.c; defines
 *   extern "C" __global__ void RK_NAME(int T, const float *qkv, const double *inv_freq,
 *       const float *q_norm, const float *k_norm, float *q_out, unsigned char *kv_pool,
 *       unsigned long long layer_off, const int *positions, const int *token_seq,
 *       const int *page_table, int max_pages);
 * qkv f32 [T][(H + 2KV) * D] = [q heads | k heads | v heads]; inv_freq f64 [D/2] in device memory
 * (the same double values the CPU path uses: angle = pos * inv_freq[i] in double, cos/sin in
 * double, rounded to f32 — float inv_freq would be off by ~1e-3 rad at position 1e5);
 * q_norm/k_norm f32 [D] (read only when RK_QKNORM); q_out f32 [T][H * D]; K (roped) and V go to
 *   page = page_table[token_seq[t] * max_pages + pos / PS], slot = pos % PS,
 *   base = kv_pool + page * RK_PAGE_BYTES + layer_off,
 *   K at base + ((h * PS + slot) * D) elements, V at base + (KV * PS * D + (h * PS + slot) * D).
 * launch: grid = (IG_RK_GRID_X(T, RK_H, RK_KV) = T, IG_RK_GRID_Y(T) = 1),
 *         block = IG_RK_BLOCK(RK_D) = 256, smem 0.
 * One CTA per token: its threads first compute the D/2 angles' cos/sin once (double sincos is
 * the expensive part, shared by every head), then each warp takes heads in turn, a lane owning
 * the rotated pairs (i, i + D/2) for i = lane, lane + 32, ...; the q/k RMSNorm is a warp sum.
 * v heads are only copied (converted to the KV type).
 * Quantized KV (RK_KVQ): each warp ropes its head into a shared-memory row, rotates it there and
 * quantizes it (kv_quant.cuh). 4-bit keys are delta-coded within a page, so a key needs the
 * reconstruction of the page's previous slot: the CTA of the first token of each run (tokens of one
 * sequence at consecutive positions in one page, consecutive in the batch, as the engine builds
 * steps) writes the keys of the whole run, in slot order, a warp per KV head, starting from the
 * page's stored earlier slots (kv_quant.cuh's ig_kvq_key_before_w). A token of a page whose
 * previous slot is written in the same step by a token that is not its batch predecessor is not
 * supported (the engine never builds one).
 */
#include "rope.cuh"
#include "kv_quant.cuh"

#ifndef RK_NAME
#define RK_NAME ig_rope_kv
#endif
#ifndef RK_H
#define RK_H 32
#endif
#ifndef RK_KV
#define RK_KV 8
#endif
#ifndef RK_D
#define RK_D 64
#endif
#ifndef RK_PS
#define RK_PS 16
#endif
#ifndef RK_KVBF16
#define RK_KVBF16 0
#endif
#ifndef RK_KVQ
#define RK_KVQ 0
#endif
#ifndef RK_PAGE_BYTES /* default: one layer per page */
#define RK_PAGE_BYTES (RK_KVQ ? IG_KVQ_LAYER_BYTES(RK_KV, RK_PS, RK_D, RK_KVQ) : 2ull * RK_KV * RK_PS * RK_D * (RK_KVBF16 ? 2 : 4))
#endif
#ifndef RK_QKNORM
#define RK_QKNORM 0
#endif
#ifndef RK_EPS
#define RK_EPS 1e-6f
#endif
#ifndef RK_ROT
#define RK_ROT RK_D
#endif
#ifndef RK_INTERLEAVE
#define RK_INTERLEAVE 0
#endif


extern "C" __global__ void __launch_bounds__(IG_RK_BLOCK(RK_D))
RK_NAME(int T, const float *qkv, const double *inv_freq, const float *q_norm, const float *k_norm,
        float *q_out, unsigned char *kv_pool, unsigned long long layer_off, const int *positions,
        const int *token_seq, const int *page_table, int max_pages) {
    static_assert(RK_D % 2 == 0, "RK_D must be even");
    static_assert(RK_H % RK_KV == 0, "RK_H must be a multiple of RK_KV");
    constexpr int HD = RK_D / 2, W = (RK_H + 2 * RK_KV) * RK_D;
    __shared__ float cs[HD], sn[HD];
    const int t = blockIdx.x, warp = threadIdx.x >> 5;
    if (t >= T) return;
    const int pos = positions[t];
    ig_rope_angles<HD>(pos, inv_freq, cs, sn, IG_RK_BLOCK(RK_D));
    __syncthreads();
    const int page = page_table[(size_t)token_seq[t] * max_pages + pos / RK_PS], slot = pos % RK_PS;
    unsigned char *base = kv_pool + (unsigned long long)page * RK_PAGE_BYTES + layer_off;
#if RK_KVQ
    constexpr int NW = IG_RK_BLOCK(RK_D) / 32;
    __shared__ float xs[NW][RK_D];
    float *x = xs[warp];
    const int lane = threadIdx.x & 31;
    for (int hh = warp; hh < RK_H + 2 * RK_KV; hh += NW) {
        const float *src = qkv + (size_t)t * W + (size_t)hh * RK_D;
        if (hh >= RK_H && hh < RK_H + RK_KV && IG_KVQ_KDELTA(RK_KVQ)) continue; /* below, per run */
        if (hh < RK_H + RK_KV)
            ig_rope_head<RK_D, false, RK_QKNORM, RK_ROT, RK_INTERLEAVE>(0, src, cs, sn, hh < RK_H ? q_norm : k_norm, RK_EPS, x, NULL, 0);
        else
            for (int i = lane; i < RK_D; i += 32) x[i] = src[i];
        ig_kvq_rotate_w<RK_D>(x);
        if (hh < RK_H) {
            float *qo = q_out + ((size_t)t * RK_H + hh) * RK_D;
            for (int i = lane; i < RK_D; i += 32) qo[i] = x[i];
        } else if (hh < RK_H + RK_KV) {
            ig_kvq_store_w<RK_KV, RK_PS, RK_D, RK_KVQ>(base, 0, (hh - RK_H) * RK_PS + slot, x);
        } else {
            ig_kvq_store_w<RK_KV, RK_PS, RK_D, RK_KVQ>(base, 1, (hh - RK_H - RK_KV) * RK_PS + slot, x);
        }
        __syncwarp();
    }
#if IG_KVQ_KDELTA(RK_KVQ)
    /* delta-coded keys: the run's first token writes the run */
    const int seq = token_seq[t];
    if (t > 0 && slot > 0 && token_seq[t - 1] == seq && positions[t - 1] == pos - 1) return;
    __shared__ float kps[NW][RK_D], csw[NW][HD], snw[NW][HD];
    float *kp = kps[warp];
    for (int h = warp; h < RK_KV; h += NW) {
        if (slot > 0) ig_kvq_key_before_w<RK_KV, RK_PS, RK_D, RK_KVQ, false>(base, h, slot, kp);
        for (int u = t, su = slot; u < T; u++, su++) {
            const int pu = positions[u];
            if (u > t && (token_seq[u] != seq || pu != positions[u - 1] + 1 || su >= RK_PS)) break;
            for (int i = lane; i < HD; i += 32) {
                double sd, cd;
                sincos((double)pu * inv_freq[i], &sd, &cd);
                csw[warp][i] = (float)cd, snw[warp][i] = (float)sd;
            }
            __syncwarp();
            ig_rope_head<RK_D, false, RK_QKNORM, RK_ROT, RK_INTERLEAVE>(0, qkv + (size_t)u * W + (size_t)(RK_H + h) * RK_D, csw[warp], snw[warp],
                                                 k_norm, RK_EPS, x, NULL, 0);
            ig_kvq_rotate_w<RK_D>(x);
            ig_kvq_store_key_w<RK_KV, RK_PS, RK_D, RK_KVQ>(base, h * RK_PS + su, x, kp, su == 0);
        }
    }
#endif
#else
    for (int hh = warp; hh < RK_H + 2 * RK_KV; hh += IG_RK_BLOCK(RK_D) / 32) {
        const float *src = qkv + (size_t)t * W + (size_t)hh * RK_D;
        if (hh < RK_H)
            ig_rope_head<RK_D, RK_KVBF16, RK_QKNORM, RK_ROT, RK_INTERLEAVE>(0, src, cs, sn, q_norm, RK_EPS, q_out + ((size_t)t * RK_H + hh) * RK_D,
                                                     base, 0);
        else if (hh < RK_H + RK_KV)
            ig_rope_head<RK_D, RK_KVBF16, RK_QKNORM, RK_ROT, RK_INTERLEAVE>(1, src, cs, sn, k_norm, RK_EPS, NULL, base,
                                                     ((size_t)(hh - RK_H) * RK_PS + slot) * RK_D);
        else
            ig_rope_head<RK_D, RK_KVBF16, RK_QKNORM, RK_ROT, RK_INTERLEAVE>(2, src, cs, sn, NULL, RK_EPS, NULL, base,
                                                     (size_t)RK_KV * RK_PS * RK_D + ((size_t)(hh - RK_H - RK_KV) * RK_PS + slot) * RK_D);
    }
#endif
}

#undef RK_NAME
#undef RK_H
#undef RK_KV
#undef RK_D
#undef RK_PS
#undef RK_KVBF16
#undef RK_KVQ
#undef RK_PAGE_BYTES
#undef RK_QKNORM
#undef RK_EPS
#undef RK_ROT
#undef RK_INTERLEAVE
