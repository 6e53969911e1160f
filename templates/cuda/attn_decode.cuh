/* attn_decode.cuh — the inner loop of decode attention (attention.cu's _core: the direct, split and
 * fused split kernels and the persistent decode kernel's attention items) for every KV format:
 * f32, the 16-bit type, and kv_quant.cuh's int8 / uint4 / fp8 rows.
 *
 * One warp walks tiles of KT keys of one kv head for the G query heads of its GQA group, so each
 * K/V byte is loaded once for the whole group. A tile has two phases:
 *   scores: LPK lanes a key (a key row in at most 8 loads of 16 / 8 / 4 bytes a lane), each lane
 *     dotting its chunks with the group's queries read from shared memory (broadcasts), the LPK
 *     partial dots summed by shuffles; one max per tile and head (a warp butterfly), one rescale
 *     of the running state per tile where the max moved (not one per key);
 *   values: TPK lanes a value row (VE elements a lane), KG keys a step, the tile's probabilities
 *     read back from the warp's scratch in shared memory; no shuffles per key.
 * Both phases' loads (K and V of the whole tile) are issued at the top of the tile, so a warp keeps
 * a tile's K and V bytes in flight at once (8 KB for bf16 rows of 128).
 *
 * Quantized rows are dotted on their codes: q . (s (c - z)) = s (q . (c - z)), c - z formed exactly
 * in float (codes as the mantissa of 2^23 + c: a byte permute / mask, then one subtraction of the
 * key's 2^23 + z; no int-to-float conversions), the scale applied once per key after the dot; values
 * accumulate p s (c - z) with p s stored per key. 4-bit keys, delta-coded within a page (slot j
 * holds K_j - K^_{j-1}), are scored by prefix sums of the per-slot dots over the page (a segmented
 * shuffle scan inside a tile, a carry between the tiles of a page), never rebuilt as vectors. fp8
 * codes unpack to halves of e4m3(c) / 2^8 (kv_quant.cuh's ig_kvq_e4m3_h2: shifts and masks, no
 * fp8 hardware needed), the 2^8 folded into the scale; their zero point is 0.
 *
 * Include-guarded, templates only. */
#ifndef IG_CUDA_ATTN_DECODE_CUH
#define IG_CUDA_ATTN_DECODE_CUH

#include "kv_quant.cuh"

#ifndef IG_AD_KC8 /* key chunk bytes of 8-bit codes (int8, fp8): 16 (2 lanes a key at D 128, 16 keys a tile) or 8
                     (4 lanes, 8 keys: the earlier geometry, H200 numbers in SPEC.md) */
#define IG_AD_KC8 16
#endif

IG_DEV constexpr int ig_ad_p2(int x) { return x <= 1 ? 1 : 2 * ig_ad_p2((x + 1) / 2); }

/* Geometry for rows of D elements of BITS (32 f32, 16 the 16-bit type, 8 / 4 / IG_KVQ_E4M3 codes):
 * RB bytes a row; key chunks of KCB bytes (KCE elements; 16 bytes where the row allows, for 8-bit
 * codes IG_AD_KC8), NKC a row, LPK lanes a key, NCL (at most 4, so a tile's loads fit the registers
 * of two CTAs an SM) chunks a lane, KT keys a tile (D 128: bf16 8, int8 / fp8 16, uint4 32); value
 * chunks of VE elements (CB bytes), DV a row, TPK lanes a row, NV chunks a lane, E elements a lane,
 * KG keys a step, VS steps a tile. */
template <int D, int BITS>
struct ig_ad_geom {
    static constexpr bool Q = BITS != 16 && BITS != 32;
    static constexpr int NB = IG_KVQ_BITS(BITS); /* bits an element */
    static constexpr int RB = D * NB / 8;
    static constexpr int KCB = RB % 16 == 0 && (NB != 8 || IG_AD_KC8 == 16) ? 16 : RB % 8 == 0 ? 8 : 4;
    static constexpr int NKC = RB / KCB, KCE = KCB * 8 / NB;
    static constexpr int LPK = ig_ad_p2((NKC + 3) / 4) < 32 ? ig_ad_p2((NKC + 3) / 4) : 32;
    static constexpr int KT = 32 / LPK, NCL = (NKC + LPK - 1) / LPK;
    static constexpr int VE = Q ? 8 : 128 / BITS, CB = VE * NB / 8, DV = D / VE;
    static constexpr int TPK = ig_ad_p2(DV) < 32 ? ig_ad_p2(DV) : 32;
    static constexpr int NV = (DV + TPK - 1) / TPK, KG = 32 / TPK, E = NV * VE, VS = KT / KG;
};

/* floats of a warp's scratch: KT keys x (G probabilities + the value zero point) */
template <int D, int BITS, int G>
IG_DEV constexpr int ig_ad_pw() { return ig_ad_geom<D, BITS>::KT * (G + 1); }

/* The elements of a chunk w (CB bytes) as floats: the 16-bit type or f32, or codes minus bias
 * (bias = 2^23 + zero point for values, 2^23 for keys), or e4m3(code) / 2^8 (bias unused). */
template <int CB, int BITS>
IG_DEV void ig_ad_unpack(uint4 w, float bias, float *o) {
    if (BITS == 16) ig_unpack16(w, 2, o);
    else if (BITS == 32) ig_unpack16(w, 4, o);
    else if (BITS == IG_KVQ_E4M3) {
        const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < CB / 4; k++)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const unsigned h2 = ig_kvq_e4m3_h2(__byte_perm(ws[k], 0u, 0x4140u + 0x202u * (unsigned)(e / 2)));
                o[4 * k + e] = ig_kvq_h2f((unsigned short)(h2 & 0xffffu));
                o[4 * k + e + 1] = ig_kvq_h2f((unsigned short)(h2 >> 16));
            }
    } else {
        const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < CB / 4; k++)
#pragma unroll
            for (int e = 0; e < 32 / BITS; e++) {
                const unsigned u = ws[k];
                o[k * (32 / BITS) + e] = BITS == 8 ? __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7540u | (unsigned)e)) - bias
                                                   : __uint_as_float(((u >> (4 * e)) & 15u) | 0x4b000000u) - bias;
            }
    }
}

/* One tile's loads (a lane's part): key chunks, value chunks, the key's scale and zero point (and
 * the value's, on the key's first lane) for quantized rows. */
template <int D, int BITS>
struct ig_ad_tile {
    typedef ig_ad_geom<D, BITS> A;
    uint4 kr[A::NCL], vr[A::VS][A::NV];
    float ksc, kz, vsc, vz, ka; /* ka: a delta-coded key's predictor (kv_quant.cuh) */
};

/* The keys of tile i of a warp (its i-th, in the order ig_ad_attend walks them). */
template <int KT, int UNIT, int NST, int NW>
IG_DEV int ig_ad_tile_base(int k0, int warp, int i) {
    return (k0 / UNIT + warp + NW * (i / NST)) * UNIT + (i % NST) * KT;
}

/* Issues the loads of the tile whose first key is tb (keys up to ue, the tile's unit's end). */
template <int KV, int PS, int D, int BITS, bool COH, unsigned long long PAGE_BYTES>
IG_DEV void ig_ad_load(ig_ad_tile<D, BITS> &t, int kh, int tb, int ue, int k0, int klo, const unsigned char *kv_pool,
                       unsigned long long layer_off, const int *pt) {
    typedef ig_ad_geom<D, BITS> A;
    constexpr bool QT = A::Q;
    constexpr int LPK = A::LPK, TPK = A::TPK, KCB = A::KCB, CB = A::CB;
    const int lane = threadIdx.x & 31, js = tb + lane / LPK, h = lane % LPK, kg = lane / TPK, vl = lane % TPK;
    const bool kok = js >= klo && js < ue, valid = js >= k0 && js < ue;
    const uint4 z4 = make_uint4(0u, 0u, 0u, 0u);
    /* tiles start at multiples of KT: with PS % KT == 0 a tile lies in one page (holding a key of the
     * range), looked up once for its keys and values */
    constexpr bool ONEPAGE = PS % A::KT == 0;
    const unsigned char *pb = ONEPAGE ? kv_pool + (unsigned long long)__ldg(pt + tb / PS) * PAGE_BYTES + layer_off : nullptr;
    const unsigned char *kb = ONEPAGE ? pb : kv_pool + (unsigned long long)(kok ? __ldg(pt + js / PS) : 0) * PAGE_BYTES + layer_off;
    const int rs = kh * PS + (kok ? js % PS : 0);
    const unsigned char *krow = QT ? kb + ig_kvq_codes_off<KV, PS, D, BITS>(0, rs) : kb + (size_t)rs * A::RB;
#pragma unroll
    for (int i = 0; i < A::NCL; i++) {
        const int c = h + LPK * i;
        t.kr[i] = kok && c < A::NKC ? ig_kvq_ld<KCB, COH>(krow + c * KCB) : z4;
    }
    t.ksc = t.kz = t.vsc = t.vz = 0.0f, t.ka = 1.0f;
    if (QT && kok) {
        const unsigned short *pk = (const unsigned short *)(kb + ig_kvq_scale_off<KV, PS, D, BITS>(0, rs));
        const unsigned char *qk = kb + ig_kvq_zero_off<KV, PS, D, BITS>(0, rs);
        const unsigned zq = COH ? __ldcg(qk) : __ldg(qk);
        t.ksc = ig_kvq_h2f(COH ? __ldcg(pk) : __ldg(pk)), t.kz = (float)(IG_KVQ_KDELTA(BITS) ? zq & 15u : zq);
        if (IG_KVQ_KDELTA(BITS)) t.ka = IG_KVQ_PRED(zq >> 4);
        if (BITS == IG_KVQ_E4M3) t.ksc *= IG_KVQ_E4M3_UNIT;
    }
    if (QT && valid && h == 0) {
        const unsigned short *pv = (const unsigned short *)(kb + ig_kvq_scale_off<KV, PS, D, BITS>(1, rs));
        const unsigned char *qv = kb + ig_kvq_zero_off<KV, PS, D, BITS>(1, rs);
        t.vsc = ig_kvq_h2f(COH ? __ldcg(pv) : __ldg(pv)), t.vz = (float)(COH ? __ldcg(qv) : __ldg(qv));
        if (BITS == IG_KVQ_E4M3) t.vsc *= IG_KVQ_E4M3_UNIT;
    }
#pragma unroll
    for (int i = 0; i < A::VS; i++) {
        const int j = tb + i * A::KG + kg;
        const bool ok = j >= k0 && j < ue;
        const unsigned char *vb = ONEPAGE ? pb : kv_pool + (unsigned long long)(ok ? __ldg(pt + j / PS) : 0) * PAGE_BYTES + layer_off;
        const int r = kh * PS + (ok ? j % PS : 0);
        const unsigned char *vrow = QT ? vb + ig_kvq_codes_off<KV, PS, D, BITS>(1, r) : vb + ((size_t)KV * PS + r) * A::RB;
#pragma unroll
        for (int jv = 0; jv < A::NV; jv++) {
            const int v = vl + TPK * jv;
            t.vr[i][jv] = ok && v < A::DV ? ig_kvq_ld<CB, COH>(vrow + v * CB) : z4;
        }
    }
}

/* L2 prefetches of what ig_ad_load would load for the tile at tb (no registers held: the warp's
 * next tile is on its way from HBM while this one is computed). A no-op off the device. */
template <int KV, int PS, int D, int BITS, unsigned long long PAGE_BYTES>
IG_DEV void ig_ad_prefetch(int kh, int tb, int ue, int k0, int klo, const unsigned char *kv_pool, unsigned long long layer_off,
                           const int *pt) {
#if defined(__CUDA_ARCH__)
    typedef ig_ad_geom<D, BITS> A;
    constexpr bool QT = A::Q;
    constexpr int LPK = A::LPK, TPK = A::TPK;
    const int lane = threadIdx.x & 31, js = tb + lane / LPK, h = lane % LPK, kg = lane / TPK, vl = lane % TPK;
    if (js >= klo && js < ue) {
        const unsigned char *kb = kv_pool + (unsigned long long)__ldg(pt + js / PS) * PAGE_BYTES + layer_off;
        const int rs = kh * PS + js % PS;
        const unsigned char *krow = QT ? kb + ig_kvq_codes_off<KV, PS, D, BITS>(0, rs) : kb + (size_t)rs * A::RB;
#pragma unroll
        for (int i = 0; i < A::NCL; i++)
            if (h + LPK * i < A::NKC) asm volatile("prefetch.global.L2 [%0];" ::"l"(krow + (h + LPK * i) * A::KCB));
    }
#pragma unroll
    for (int i = 0; i < A::VS; i++) {
        const int j = tb + i * A::KG + kg;
        if (j < k0 || j >= ue) continue;
        const unsigned char *vb = kv_pool + (unsigned long long)__ldg(pt + j / PS) * PAGE_BYTES + layer_off;
        const int r = kh * PS + j % PS;
        const unsigned char *vrow = QT ? vb + ig_kvq_codes_off<KV, PS, D, BITS>(1, r) : vb + ((size_t)KV * PS + r) * A::RB;
#pragma unroll
        for (int jv = 0; jv < A::NV; jv++)
            if (vl + TPK * jv < A::DV) asm volatile("prefetch.global.L2 [%0];" ::"l"(vrow + (vl + TPK * jv) * A::CB));
    }
#else
    (void)kh, (void)tb, (void)ue, (void)k0, (void)klo, (void)kv_pool, (void)layer_off, (void)pt;
#endif
}

/* The tile at tb (loaded in t; st: its index within its unit) into the running state: scores,
 * the tile's softmax, values. carry: delta keys' running prefix over the unit's earlier tiles. */
template <int PS, int D, int BITS, int G>
IG_DEV void ig_ad_step(const ig_ad_tile<D, BITS> &t, int tb, int st, int ue, int k0, const float *qs, float qscale,
                       float (&carry)[G], float *pw, float (&acc)[G][ig_ad_geom<D, BITS>::E],
                       float (&m)[G], float (&l)[G]) {
    typedef ig_ad_geom<D, BITS> A;
    constexpr bool QT = A::Q, KD = QT && IG_KVQ_KDELTA(BITS);
    constexpr int LPK = A::LPK, KT = A::KT, KCE = A::KCE, VE = A::VE, KG = A::KG;
    const int lane = threadIdx.x & 31, kl = lane / LPK, h = lane % LPK, kg = lane / A::TPK, js = tb + kl;
    const bool valid = js >= k0 && js < ue;
    float d[G];
#pragma unroll
    for (int g = 0; g < G; g++) d[g] = 0.0f;
    const float kbias = 8388608.0f + t.kz; /* codes minus the key's zero point, exact */
#pragma unroll
    for (int i = 0; i < A::NCL; i++) {
        const int c = h + LPK * i;
        if (QT && A::NB == 8 && (A::NKC % LPK == 0 || c < A::NKC)) { /* 8-bit codes a word at a time (registers) */
            const unsigned ws[4] = {t.kr[i].x, t.kr[i].y, t.kr[i].z, t.kr[i].w};
            constexpr int WE = 32 / A::NB; /* codes a word */
#pragma unroll
            for (int k = 0; k < A::KCB / 4; k++) {
                float kf[WE];
                ig_ad_unpack<4, BITS>(make_uint4(ws[k], 0u, 0u, 0u), kbias, kf);
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const float *qq = qs + g * D + c * KCE + k * WE;
#pragma unroll
                    for (int e = 0; e < WE; e++) d[g] = fmaf(qq[e], kf[e], d[g]);
                }
            }
        } else if (A::NKC % LPK == 0 || c < A::NKC) {
            float kf[KCE];
            ig_ad_unpack<A::KCB, BITS>(t.kr[i], kbias, kf);
#pragma unroll
            for (int g = 0; g < G; g++) {
                const float *qq = qs + g * D + c * KCE;
#pragma unroll
                for (int e = 0; e < KCE; e++) d[g] = fmaf(qq[e], kf[e], d[g]);
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
#pragma unroll
        for (int o = 1; o < LPK; o <<= 1) d[g] += __shfl_xor_sync(IG_FULL_MASK, d[g], o);
        if (QT) d[g] *= t.ksc;
    }
    if (KD) { /* a scan over the page's slots: the delta-coded keys' scores s_j = a_j s_{j-1} + d_j,
               * composing (a, d) pairs (a2 a1, a2 d1 + d2) */
        const int sit = js - max(tb, js - js % PS);
        float a = t.ka;
#pragma unroll
        for (int o = 1; o < KT; o <<= 1) {
            const float au = __shfl_up_sync(IG_FULL_MASK, a, o * LPK);
#pragma unroll
            for (int g = 0; g < G; g++) {
                const float u = __shfl_up_sync(IG_FULL_MASK, d[g], o * LPK);
                if (sit >= o) d[g] = fmaf(a, u, d[g]);
            }
            if (sit >= o) a *= au;
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (st > 0) d[g] = fmaf(a, carry[g], d[g]);
            carry[g] = __shfl_sync(IG_FULL_MASK, d[g], (KT - 1) * LPK);
        }
    }
    /* the tile's softmax: one max per head, a rescale where it moved */
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float s = valid ? d[g] * qscale : IG_NEG_INF;
        float mt = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) mt = fmaxf(mt, __shfl_xor_sync(IG_FULL_MASK, mt, o));
        if (mt > m[g]) { /* the same in every lane */
            const float corr = ig_sm_factor(m[g], mt);
            l[g] *= corr;
#pragma unroll
            for (int e = 0; e < A::E; e++) acc[g][e] *= corr;
            m[g] = mt;
        }
        const float p = valid ? ig_exp2(s - m[g]) : 0.0f;
        if (h == 0) l[g] += p, pw[kl * (G + 1) + g] = QT ? p * t.vsc : p;
    }
    if (QT && h == 0) pw[kl * (G + 1) + G] = 8388608.0f + t.vz;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < A::VS; i++) {
        const float *pp = pw + (i * KG + kg) * (G + 1);
        float pg[G];
#pragma unroll
        for (int g = 0; g < G; g++) pg[g] = pp[g];
        const float bias = QT ? pp[G] : 0.0f;
#pragma unroll
        for (int jv = 0; jv < A::NV; jv++) {
            float vf[VE];
            ig_ad_unpack<A::CB, BITS>(t.vr[i][jv], bias, vf);
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int e = 0; e < VE; e++) acc[g][jv * VE + e] = fmaf(pg[g], vf[e], acc[g][jv * VE + e]);
        }
    }
    __syncwarp();
}

/* Online softmax of G query heads over keys [k0, k1) of kv head kh (page table pt) by warp `warp`
 * of NW: qs [G][D] the heads' queries in shared memory (roped; rotated for quantized rows), qscale
 * the scores' factor (softmax scale * log2 e), pw this warp's scratch (ig_ad_pw floats, shared).
 * acc [G][E] (the lane's value elements: row elements (vl + TPK jv) VE + e, vl = lane % TPK, for
 * key group lane / TPK; the caller sums the key groups), m [G] (log2 domain, equal in every lane),
 * l [G] (the lane's part of the sum; the caller sums the warp) are updated. Warp w takes units
 * w, w + NW, ... of UNIT keys (KT, or a page for delta keys when KT is not a multiple of PS) in
 * tiles of KT; with PIPE the next tile's loads are issued before the current tile is computed (two
 * tiles of registers: ~170 a thread at D = 128, for kernels of one CTA an SM such as the persistent
 * one), else each tile is loaded then computed (~100-128 registers: two CTAs an SM), with L2PF
 * after L2 prefetches of the warp's next tile. COH: loads through L2 only (the caller's kernel wrote some rows). Every lane of the
 * warp runs it. */
template <int KV, int PS, int D, int BITS, int G, int NW, bool COH, unsigned long long PAGE_BYTES, bool PIPE, bool L2PF>
IG_DEV void ig_ad_attend(int kh, int k0, int k1, int warp, const float *qs, float qscale, float *pw,
                         float (&acc)[G][ig_ad_geom<D, BITS>::E], float (&m)[G], float (&l)[G],
                         const unsigned char *kv_pool, unsigned long long layer_off, const int *pt) {
    typedef ig_ad_geom<D, BITS> A;
    constexpr bool QT = A::Q, KD = QT && IG_KVQ_KDELTA(BITS);
    constexpr int KT = A::KT, UNIT = (KD && KT % PS != 0) ? PS : KT, NST = (UNIT + KT - 1) / KT;
    static_assert(A::VS >= 1 && KT % A::KG == 0, "a tile is whole value steps");
    static_assert(QT || A::KCB == 16, "float rows are whole 16-byte chunks");
    if (k1 <= k0) return;
    float carry[G]; /* delta keys: the page's running score */
#pragma unroll
    for (int g = 0; g < G; g++) carry[g] = 0.0f;
    const int klo = KD ? k0 - k0 % PS : k0; /* the first key whose codes are read */
    const int nu = (k1 - 1) / UNIT - k0 / UNIT + 1;           /* units of the range */
    const int n = nu > warp ? ((nu - warp + NW - 1) / NW) * NST : 0; /* this warp's tiles */
    ig_ad_tile<D, BITS> ta, tb;
#define IG_AD_TILE_(i, tl, op)                                                                                    \
    do {                                                                                                            \
        const int b_ = ig_ad_tile_base<KT, UNIT, NST, NW>(k0, warp, (i));                                       \
        const int ue_ = min(k1, (b_ / UNIT + 1) * UNIT);                                                          \
        if (op == 2) ig_ad_prefetch<KV, PS, D, BITS, PAGE_BYTES>(kh, b_, ue_, k0, klo, kv_pool, layer_off, pt);  \
        else if (op) ig_ad_load<KV, PS, D, BITS, COH, PAGE_BYTES>(tl, kh, b_, ue_, k0, klo, kv_pool, layer_off, pt); \
        else ig_ad_step<PS, D, BITS, G>(tl, b_, (i) % NST, ue_, k0, qs, qscale, carry, pw, acc, m, l);      \
    } while (0)
    if (!PIPE) { /* one tile of registers: load, the next tile into L2, compute */
        for (int i = 0; i < n; i++) {
            IG_AD_TILE_(i, ta, 1);
            if (L2PF && i + 1 < n) IG_AD_TILE_(i + 1, ta, 2);
            IG_AD_TILE_(i, ta, 0);
        }
        return;
    }
    if (n > 0) IG_AD_TILE_(0, ta, 1);
    for (int i = 0; i < n; i += 2) {
        if (i + 1 < n) IG_AD_TILE_(i + 1, tb, 1);
        IG_AD_TILE_(i, ta, 0);
        if (i + 1 >= n) break;
        if (i + 2 < n) IG_AD_TILE_(i + 2, ta, 1);
        IG_AD_TILE_(i + 1, tb, 0);
    }
#undef IG_AD_TILE_
}

#endif /* IG_CUDA_ATTN_DECODE_CUH */
