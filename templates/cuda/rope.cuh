/* rope.cuh — device helpers shared by rope_kv.cu and attention.cu's fused decode kernel: the
 * RoPE angles of a position, and the per-head step (optional q/k RMSNorm, rotate-half RoPE, the
 * store of q into the q buffer or of k / v into their KV page row). Same semantics as
 * templates/cpu/rope_kv.c: angle = pos * inv_freq[i] with double inv_freq, cos/sin in double
 * rounded to f32. Include-guarded, templates only: no kernel is defined here. */
#ifndef IG_CUDA_ROPE_CUH
#define IG_CUDA_ROPE_CUH

#include "common.cuh"

IG_DEV void ig_rk_store(unsigned char *p, size_t idx, float v, bool bf) {
    if (bf) ((unsigned short *)p)[idx] = ig_f32_to_h(v);
    else ((float *)p)[idx] = v;
}

/* cs[i], sn[i] = cos, sin of pos * inv_freq[i] for i < HD, by the threads of the CTA (nthreads of
 * them); the caller synchronizes before reading. */
template <int HD>
IG_DEV void ig_rope_angles(int pos, const double *inv_freq, float *cs, float *sn, int nthreads) {
    for (int i = threadIdx.x; i < HD; i += nthreads) {
        double s, c;
        sincos((double)pos * inv_freq[i], &s, &c);
        cs[i] = (float)c, sn[i] = (float)s;
    }
}

/* One head of one token, by one warp. kind 0: q head -> qdst[0..D) f32; 1: k head -> the KV row
 * at base + row (elements); 2: v head (copied, no RoPE, no norm) -> base + row. src: the head's
 * D projected values (f32). QKN: RMSNorm with g[D] first (q and k only). */
template <int D, bool KVB, bool QKN>
IG_DEV void ig_rope_head(int kind, const float *src, const float *cs, const float *sn, const float *g, float eps,
                         float *qdst, unsigned char *base, size_t row) {
    constexpr int HD = D / 2, NP = IG_CDIV(HD, 32);
    const int lane = threadIdx.x & 31;
    float a[NP], b[NP];
#pragma unroll
    for (int j = 0; j < NP; j++) {
        const int i = lane + 32 * j;
        a[j] = i < HD ? src[i] : 0.0f, b[j] = i < HD ? src[i + HD] : 0.0f;
    }
    if (kind == 2) {
#pragma unroll
        for (int j = 0; j < NP; j++) {
            const int i = lane + 32 * j;
            if (i < HD) ig_rk_store(base, row + i, a[j], KVB), ig_rk_store(base, row + i + HD, b[j], KVB);
        }
        return;
    }
    if (QKN) { /* warp-uniform: the whole warp holds this head */
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < NP; j++) ss += a[j] * a[j] + b[j] * b[j];
        ss = ig_warp_sum(ss);
        const float s = 1.0f / sqrtf(ss / (float)D + eps);
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
        if (kind == 0) qdst[i] = o0, qdst[i + HD] = o1;
        else ig_rk_store(base, row + i, o0, KVB), ig_rk_store(base, row + i + HD, o1, KVB);
    }
}

#endif /* IG_CUDA_ROPE_CUH */
