/* rope.cuh — device helpers shared by rope_kv.cu and attention.cu's fused decode kernel: the
 * RoPE angles of a position, and the per-head step (optional q/k RMSNorm, RoPE on all or the first
 * rotary dims of a head, rotate-half or interleaved pairs, the
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

/* Element pair i of a head of D (i < D / 2) for rotary dims ROT (ROT <= D, even): the rotated pair
 * (i, i + ROT/2) ("rotate half", Llama) or (2i, 2i + 1) (IL: interleaved pairs, GLM-4) for i <
 * ROT / 2, else two of the pass-through dims ROT .. D - 1 (partial rotary: copied, normalized). */
template <int D, int ROT, bool IL>
IG_DEV void ig_rope_pair(int i, int *ia, int *ib) {
    constexpr int R2 = ROT / 2;
    if (i >= R2) *ia = ROT + 2 * (i - R2), *ib = *ia + 1;
    else if (IL) *ia = 2 * i, *ib = 2 * i + 1;
    else *ia = i, *ib = i + R2;
}

/* One head of one token, by one warp. kind 0: q head -> qdst[0..D) f32; 1: k head -> the KV row
 * at base + row (elements); 2: v head (copied, no RoPE, no norm) -> base + row. src: the head's
 * D projected values (f32). QKN: RMSNorm with g[D] first (q and k only). ROT, IL: rotary dims
 * and pair layout (ig_rope_pair; cs / sn hold ROT / 2 angles); the defaults are Llama's. */
template <int D, bool KVB, bool QKN, int ROT = D, bool IL = false>
IG_DEV void ig_rope_head(int kind, const float *src, const float *cs, const float *sn, const float *g, float eps,
                         float *qdst, unsigned char *base, size_t row) {
    static_assert(ROT % 2 == 0 && ROT <= D && (D - ROT) % 2 == 0, "rotary dims: even, at most D");
    constexpr int HD = D / 2, NP = IG_CDIV(HD, 32), R2 = ROT / 2;
    const int lane = threadIdx.x & 31;
    float a[NP], b[NP];
    int ia[NP], ib[NP];
#pragma unroll
    for (int j = 0; j < NP; j++) {
        const int i = lane + 32 * j;
        ig_rope_pair<D, ROT, IL>(i < HD ? i : 0, &ia[j], &ib[j]);
        a[j] = i < HD ? src[ia[j]] : 0.0f, b[j] = i < HD ? src[ib[j]] : 0.0f;
    }
    if (kind == 2) {
#pragma unroll
        for (int j = 0; j < NP; j++) {
            const int i = lane + 32 * j;
            if (i < HD) ig_rk_store(base, row + ia[j], a[j], KVB), ig_rk_store(base, row + ib[j], b[j], KVB);
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
            if (i < HD) a[j] = a[j] * s * g[ia[j]], b[j] = b[j] * s * g[ib[j]];
        }
    }
#pragma unroll
    for (int j = 0; j < NP; j++) {
        const int i = lane + 32 * j;
        if (i >= HD) break;
        float o0 = a[j], o1 = b[j];
        if (i < R2) {
            const float c = cs[i], s = sn[i];
            o0 = a[j] * c - b[j] * s, o1 = b[j] * c + a[j] * s;
        }
        if (kind == 0) qdst[ia[j]] = o0, qdst[ib[j]] = o1;
        else ig_rk_store(base, row + ia[j], o0, KVB), ig_rk_store(base, row + ib[j], o1, KVB);
    }
}

#endif /* IG_CUDA_ROPE_CUH */
