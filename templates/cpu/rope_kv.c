/* rope_kv.c — template: optional per-head q/k RMSNorm (Qwen3-style), rotary embedding on q and k
 * ("rotate half", HF Llama), and the write of this step's keys and values into the paged KV pool.
 *
 * Instantiate with RK_NAME, RK_H, RK_KV, RK_D, RK_PS, RK_PAGE_BYTES, RK_KVBF16, RK_KVQ (0: KV rows
 * stored as floats per RK_KVBF16; 8 or 4: rotated and quantized per token and KV head, kv_quant.h;
 * q_out is then rotated too), RK_QKNORM, RK_EPS,
 * RK_ROT (rotary dimensions, the first RK_ROT of each head: partial rotary; default RK_D) and
 * RK_INTERLEAVE (1: rotate pairs (2i, 2i+1) as GLM-4; 0: halves (i, i + RK_ROT/2) as Llama);
 * defines
 *   static void RK_NAME(int T, const float *qkv, const float *rope_cs, const float *q_norm,
 *                       const float *k_norm, float *q_out, uint8_t *kv_pool, uint64_t layer_off,
 *                       const int32_t *positions, const int32_t *token_seq,
 *                       const int32_t *page_table, int max_pages, int nth);
 * Layouts are in SPEC.md. One pass per token: each head is read once, normalized and rotated in
 * a small stack buffer, and written once (q to q_out, k and v to their page slot), so tokens of
 * one sequence written in this step are visible to the attention that follows. With 4-bit KV
 * (delta-coded keys, kv_quant.h) the tokens are written in RK_PS passes, slot 0 of every page
 * first, so each key finds the earlier slots of its page already stored.
 */
#include "common.h"
#include "kv_quant.h"

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
#define RK_PAGE_BYTES (RK_KVQ ? IG_KVQ_LAYER_BYTES(RK_KV, RK_PS, RK_D, RK_KVQ) : (uint64_t)2 * RK_KV * RK_PS * RK_D * (RK_KVBF16 ? 2 : 4))
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

#ifndef IG_ROPE_HELPERS
#define IG_ROPE_HELPERS
/* o (dim floats) <- rope(norm(v)) on the first `rot` dims (the rest copied, normalized);
 * cs = [rot/2][2] (cos, sin); g = per-head norm weight or NULL; inter: pairs (2i, 2i+1), else
 * (i, i + rot/2). */
IG_INLINE void ig_rope_head(float *IG_RESTRICT o, const float *IG_RESTRICT v, const float *cs,
                            const float *g, float eps, int dim, int rot, int inter) {
    float s = 1.0f;
    if (g) s = 1.0f / sqrtf(ig_sumsq(v, dim) / (float)dim + eps);
    const int h = rot / 2;
    for (int i = 0; i < h; i++) {
        int ia = inter ? 2 * i : i, ib = inter ? 2 * i + 1 : i + h;
        float a = v[ia] * s, b = v[ib] * s;
        if (g) a *= g[ia], b *= g[ib];
        float c = cs[2 * i], sn = cs[2 * i + 1];
        o[ia] = a * c - b * sn;
        o[ib] = b * c + a * sn;
    }
    for (int i = rot; i < dim; i++) o[i] = v[i] * s * (g ? g[i] : 1.0f);
}
#endif

static void RK_NAME(int T, const float *qkv, const float *rope_cs, const float *q_norm,
                    const float *k_norm, float *q_out, uint8_t *kv_pool, uint64_t layer_off,
                    const int32_t *positions, const int32_t *token_seq,
                    const int32_t *page_table, int max_pages, int nth) {
    _Static_assert(RK_D % 2 == 0, "RK_D must be even");
    _Static_assert(RK_ROT % 2 == 0 && RK_ROT <= RK_D, "RK_ROT must be even and at most RK_D");
    _Static_assert(RK_H % RK_KV == 0, "RK_H must be a multiple of RK_KV");
    _Static_assert(!RK_KVQ || RK_D <= IG_KVQ_MAXD, "quantized KV rows of at most IG_KVQ_MAXD elements");
    enum { W_ = (RK_H + 2 * RK_KV) * RK_D, ES_ = RK_KVBF16 ? 2 : 4 };
    const float *qn = RK_QKNORM ? q_norm : NULL, *kn = RK_QKNORM ? k_norm : NULL;
    /* delta-coded keys (kv_quant.h) read the page's earlier slots: slot s is written in pass s */
    const int passes = RK_KVQ && IG_KVQ_KDELTA(RK_KVQ) ? RK_PS : 1;
    for (int pass = 0; pass < passes; pass++)
#pragma omp parallel for num_threads(nth) schedule(static) if (T >= 16)
    for (int t = 0; t < T; t++) {
        const float *row = qkv + (size_t)t * W_;
        const float *cs = rope_cs + (size_t)t * RK_D;
        int pos = positions[t];
        if (passes > 1 && pos % RK_PS != pass) continue;
        int page = page_table[(size_t)token_seq[t] * max_pages + pos / RK_PS], slot = pos % RK_PS;
        uint8_t *base = kv_pool + (uint64_t)page * RK_PAGE_BYTES + layer_off;
        for (int h = 0; h < RK_H; h++) {
            float *qo = q_out + (size_t)t * RK_H * RK_D + h * RK_D;
            ig_rope_head(qo, row + h * RK_D, cs, qn, RK_EPS, RK_D, RK_ROT, RK_INTERLEAVE);
            if (RK_KVQ) ig_kvq_rotate(qo, RK_D); /* keys are stored rotated (kv_quant.h) */
        }
        for (int h = 0; h < RK_KV; h++) {
            IG_ALIGN64 float kr[RK_D];
            ig_rope_head(kr, row + (RK_H + h) * RK_D, cs, kn, RK_EPS, RK_D, RK_ROT, RK_INTERLEAVE);
            if (RK_KVQ) { /* rotated, then quantized (kv_quant.h) */
                IG_ALIGN64 float vr[RK_D];
                ig_kvq_rotate(kr, RK_D);
                IG_ALIGN64 float kp[RK_D]; /* delta-coded keys: the previous slot's reconstruction */
                if (IG_KVQ_KDELTA(RK_KVQ) && slot > 0) ig_kvq_key_before(base, RK_KV, RK_PS, RK_D, RK_KVQ, h, slot, vr, kp);
                memcpy(vr, row + (RK_H + RK_KV + h) * RK_D, sizeof vr);
                ig_kvq_rotate(vr, RK_D);
                ig_kvq_store_key(base, RK_KV, RK_PS, RK_D, RK_KVQ, h, slot, kr, kp, IG_KVQ_NPRED);
                ig_kvq_store(base, RK_KV, RK_PS, RK_D, RK_KVQ, 1, h, slot, vr);
                continue;
            }
            size_t ko = ((size_t)h * RK_PS + slot) * RK_D;
            size_t vo = (size_t)RK_KV * RK_PS * RK_D + ko;
            ig_store_row(base + ko * ES_, kr, RK_KVBF16, RK_D);
            ig_store_row(base + vo * ES_, row + (RK_H + RK_KV + h) * RK_D, RK_KVBF16, RK_D);
        }
    }
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
