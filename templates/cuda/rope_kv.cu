/* rope_kv.cu — template: optional per-head q/k RMSNorm (Qwen3-style), rotary embedding on q and k
 * ("rotate half", HF Llama), and the write of this step's keys and values into the paged KV pool.
 * Same semantics as templates/cpu/rope_kv.c, except that the angles are computed here from the
 * positions (no rope_cs buffer).
 *
 * Instantiate with RK_NAME, RK_H, RK_KV, RK_D, RK_PS, RK_PAGE_BYTES, RK_KVBF16, RK_QKNORM, RK_EPS;
 * defines
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
 */
#include "common.cuh"

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
#ifndef RK_PAGE_BYTES /* default: one layer per page */
#define RK_PAGE_BYTES (2ull * RK_KV * RK_PS * RK_D * (RK_KVBF16 ? 2 : 4))
#endif
#ifndef RK_QKNORM
#define RK_QKNORM 0
#endif
#ifndef RK_EPS
#define RK_EPS 1e-6f
#endif

#ifndef IG_ROPE_HELPERS
#define IG_ROPE_HELPERS
IG_DEV void ig_rk_store(unsigned char *p, size_t idx, float v, bool bf) {
    if (bf) ((unsigned short *)p)[idx] = ig_f32_to_bf16(v);
    else ((float *)p)[idx] = v;
}
#endif

extern "C" __global__ void __launch_bounds__(IG_RK_BLOCK(RK_D))
RK_NAME(int T, const float *qkv, const double *inv_freq, const float *q_norm, const float *k_norm,
        float *q_out, unsigned char *kv_pool, unsigned long long layer_off, const int *positions,
        const int *token_seq, const int *page_table, int max_pages) {
    IG_PDL_ENTER();
    static_assert(RK_D % 2 == 0, "RK_D must be even");
    static_assert(RK_H % RK_KV == 0, "RK_H must be a multiple of RK_KV");
    constexpr int HD = RK_D / 2, W = (RK_H + 2 * RK_KV) * RK_D, NP = IG_CDIV(HD, 32);
    __shared__ float cs[HD], sn[HD];
    const int t = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (t >= T) return;
    const int pos = positions[t];
    for (int i = threadIdx.x; i < HD; i += IG_RK_BLOCK(RK_D)) {
        double s, c;
        sincos((double)pos * inv_freq[i], &s, &c);
        cs[i] = (float)c, sn[i] = (float)s;
    }
    __syncthreads();
    const int page = page_table[(size_t)token_seq[t] * max_pages + pos / RK_PS], slot = pos % RK_PS;
    unsigned char *base = kv_pool + (unsigned long long)page * RK_PAGE_BYTES + layer_off;
    for (int hh = warp; hh < RK_H + 2 * RK_KV; hh += IG_RK_BLOCK(RK_D) / 32) {
        const float *v = qkv + (size_t)t * W + (size_t)hh * RK_D;
        float a[NP], b[NP];
#pragma unroll
        for (int j = 0; j < NP; j++) {
            const int i = lane + 32 * j;
            a[j] = i < HD ? v[i] : 0.0f, b[j] = i < HD ? v[i + HD] : 0.0f;
        }
        if (hh >= RK_H + RK_KV) { /* v head: copy */
            const size_t o = (size_t)RK_KV * RK_PS * RK_D + ((size_t)(hh - RK_H - RK_KV) * RK_PS + slot) * RK_D;
#pragma unroll
            for (int j = 0; j < NP; j++) {
                const int i = lane + 32 * j;
                if (i < HD) ig_rk_store(base, o + i, a[j], RK_KVBF16), ig_rk_store(base, o + i + HD, b[j], RK_KVBF16);
            }
            continue;
        }
        if (RK_QKNORM) { /* warp-uniform: the whole warp holds this head */
            float ss = 0.0f;
#pragma unroll
            for (int j = 0; j < NP; j++) ss += a[j] * a[j] + b[j] * b[j];
            ss = ig_warp_sum(ss);
            const float s = 1.0f / sqrtf(ss / (float)RK_D + RK_EPS);
            const float *g = hh < RK_H ? q_norm : k_norm;
#pragma unroll
            for (int j = 0; j < NP; j++) {
                const int i = lane + 32 * j;
                if (i < HD) a[j] = a[j] * s * g[i], b[j] = b[j] * s * g[i + HD];
            }
        }
#pragma unroll
        for (int j = 0; j < NP; j++) {
            const int i = lane + 32 * j;
            if (i >= HD) break;
            const float c = cs[i], s = sn[i];
            const float o0 = a[j] * c - b[j] * s, o1 = b[j] * c + a[j] * s;
            if (hh < RK_H) {
                float *q = q_out + (size_t)t * RK_H * RK_D + (size_t)hh * RK_D;
                q[i] = o0, q[i + HD] = o1;
            } else {
                const size_t o = ((size_t)(hh - RK_H) * RK_PS + slot) * RK_D;
                ig_rk_store(base, o + i, o0, RK_KVBF16), ig_rk_store(base, o + i + HD, o1, RK_KVBF16);
            }
        }
    }
}

#undef RK_NAME
#undef RK_H
#undef RK_KV
#undef RK_D
#undef RK_PS
#undef RK_KVBF16
#undef RK_PAGE_BYTES
#undef RK_QKNORM
#undef RK_EPS
