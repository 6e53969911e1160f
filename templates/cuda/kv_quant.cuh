/* kv_quant.cuh — device side of the quantized KV cache rows (--kv-cache int8 | uint4 | fp8): the same
 * format as templates/cpu/kv_quant.h, so a page means the same on both targets. Written by
 * rope_kv.cu (and attention.cu's fused decode kernel), read with fused dequantization by
 * attention.cu and attention_prefill.cu.
 *
 * Format (kv_quant.h has the rationale): a key or value row of D elements of one token and KV head
 * is rotated by R = H S (S: sign flips IG_KVQ_FLIP, H: Walsh-Hadamard on blocks of the largest
 * power of two dividing D, scaled by 1/sqrt(B)), then coded asymmetrically: codes q in 0..QMAX
 * (255 / 15; 4-bit codes two a byte, element 2i in the low nibble), an f16 scale s (rounded up, so
 * the codes stay in range) and an 8-bit zero point z, x ~ s (q - z). 4-bit keys are delta-coded
 * within a page: slot j > 0 holds K_j - a K^_{j-1}, K^ the reconstruction, the predictor a =
 * IG_KVQ_PRED(i) for i in bits 4..6 of the row's zero byte (the zero point in bits 0..3), chosen by
 * the writer as the one whose row quantizes with the least squared error (ig_kvq_store_key_w,
 * kv_quant.h's ig_kvq_store_key). fp8 rows (BITS =
 * IG_KVQ_E4M3) take the int8 layout with e4m3fn codes, a symmetric scale amax / 448 (rounded up
 * to f16) and the zero point byte 0: x ~ s e4m3(q). Queries are rotated the
 * same way and the attention output is rotated back with R^T. Layout of one layer's part of a page
 * (PS slots, KV heads, RB = D * bits / 8):
 *   K codes [KV][PS][RB] | V codes [KV][PS][RB] | K scales f16 [KV][PS] | V scales f16 [KV][PS]
 *   | K zeros u8 [KV][PS] | V zeros u8 [KV][PS]   (IG_KVQ_LAYER_BYTES bytes)
 *
 * The encoder's arithmetic is the CPU's operation for operation (the butterflies in the same
 * order, IEEE-rounded division / square root / multiply through the __f*_rn intrinsics, rintf,
 * round-to-nearest f16), so the same rotated-in floats give the same bytes; the harness checks that
 * against kv_quant.h itself. Readers load a row's codes in chunks of VE = 16 or 8 codes (ig_kvq_geom).
 * Include-guarded, templates only: no kernel is defined here. */
#ifndef IG_CUDA_KV_QUANT_CUH
#define IG_CUDA_KV_QUANT_CUH

#include "common.cuh"

/* A format's code, the templates' BITS: 8 (int8), 4 (uint4) or IG_KVQ_E4M3 (fp8), as in
 * kv_quant.h; IG_KVQ_BITS its bits a code. */
#define IG_KVQ_E4M3 0xe4
#define IG_KVQ_BITS(q) ((q) == IG_KVQ_E4M3 ? 8 : (q))
#define IG_KVQ_LAYER_BYTES(kv, ps, d, bits) ((unsigned long long)2 * (kv) * (ps) * ((unsigned long long)(d) * IG_KVQ_BITS(bits) / 8 + 3))
#define IG_KVQ_KDELTA(bits) ((bits) == 4)
#ifndef IG_KVQ_PRED /* (identical in kv_quant.h) 1, 15/16, 7/8, 3/4, 5/8, 1/2, 1/4, 0 */
#define IG_KVQ_NPRED 8
#define IG_KVQ_PRED(i) ((float)((0x0004080a0c0e0f10ULL >> (8 * ((i) & 7))) & 0xffu) * 0.0625f)
#endif
#define IG_KVQ_FLIP(i) ((0x6a09e667u >> ((7 * (i) + (i) / 32) & 31)) & 1u)
/* code bytes of a row */
#define IG_KVQ_RB(d, bits) ((d) * IG_KVQ_BITS(bits) / 8)

/* Byte offsets, from the layer's part of a page, of row r = h * PS + slot of tensor kv01 (0 = K,
 * 1 = V): its codes, its f16 scale, its zero point. */
template <int KV, int PS, int D, int BITS>
IG_DEV unsigned ig_kvq_codes_off(int kv01, int r) { return (unsigned)((kv01 * KV * PS + r) * IG_KVQ_RB(D, BITS)); }
template <int KV, int PS, int D, int BITS>
IG_DEV unsigned ig_kvq_scale_off(int kv01, int r) { return (unsigned)(2 * KV * PS * IG_KVQ_RB(D, BITS) + 2 * (kv01 * KV * PS + r)); }
template <int KV, int PS, int D, int BITS>
IG_DEV unsigned ig_kvq_zero_off(int kv01, int r) { return (unsigned)(2 * KV * PS * IG_KVQ_RB(D, BITS) + 4 * KV * PS + kv01 * KV * PS + r); }

/* The Walsh-Hadamard transform of x[D] (shared memory) on blocks of B = D & -D, scaled by
 * 1/sqrt(B), by one warp: kv_quant.h's butterflies (len = 1, 2, 4, ...; a + c, a - c), so each
 * element gets the same roundings. Starts and ends with __syncwarp. */
template <int D>
IG_DEV void ig_kvq_hadamard_w(float *x) {
    constexpr int B = D & -D, HB = B / 2;
    const int lane = threadIdx.x & 31;
    __syncwarp();
    for (int len = 1; len < B; len <<= 1) {
        for (int p = lane; p < D / 2; p += 32) {
            const int b0 = (p / HB) * B, q = p % HB, j = b0 + (q / len) * 2 * len + q % len;
            const float a = x[j], c = x[j + len];
            x[j] = __fadd_rn(a, c), x[j + len] = __fsub_rn(a, c);
        }
        __syncwarp();
    }
    const float sc = __fdiv_rn(1.0f, __fsqrt_rn((float)B));
    for (int i = lane; i < D; i += 32) x[i] = __fmul_rn(x[i], sc);
    __syncwarp();
}
template <int D>
IG_DEV void ig_kvq_flip_w(float *x) {
    __syncwarp();
    for (int i = threadIdx.x & 31; i < D; i += 32)
        if (IG_KVQ_FLIP(i)) x[i] = -x[i];
    __syncwarp();
}
/* x <- R x (rows before quantization, and q); x <- R^T x (attention's output). One warp. */
template <int D>
IG_DEV void ig_kvq_rotate_w(float *x) { ig_kvq_flip_w<D>(x), ig_kvq_hadamard_w<D>(x); }
template <int D>
IG_DEV void ig_kvq_unrotate_w(float *x) { ig_kvq_hadamard_w<D>(x), ig_kvq_flip_w<D>(x); }

/* IEEE half helpers for the scale (common.cuh's cvt-based ones, named for the format) */
IG_DEV unsigned short ig_kvq_f2h(float f) { return ig_f32_to_f16(f); }
IG_DEV float ig_kvq_h2f(unsigned short h) { return ig_f16_to_f32(h); }

/* e4m3fn code of f (kv_quant.h's ig_f32_to_e4m3, the same integer steps): nearest even,
 * saturating to +-448, NaN -> 0x7f. */
IG_DEV unsigned char ig_kvq_f2e4m3(float f) {
    const unsigned x = __float_as_uint(f), sign = (x >> 24) & 0x80u;
    const float a = fabsf(f);
    if (a != a) return 0x7f;
    if (a >= 448.0f) return (unsigned char)(sign | 0x7eu);
    if (a < 0.015625f) return (unsigned char)(sign | (unsigned)rintf(__fmul_rn(a, 512.0f))); /* subnormal: m 2^-9 */
    unsigned u = __float_as_uint(a);
    u += 0x7ffffu + ((u >> 20) & 1u); /* the 20 dropped mantissa bits to nearest even */
    return (unsigned char)(sign | ((u >> 20) - (120u << 3)));
}

/* The IEEE half whose bits are e4m3 byte c's sign, exponent and mantissa moved into place: its
 * value is e4m3(c) / 2^8 exactly (e4m3's bias 7 read with half's 15; e4m3 subnormals land on half
 * subnormals), so readers fold the 2^8 into the row's scale. c 0x7f / 0xff (NaN, never written for
 * finite rows) reads as +-480. Two codes at once: the bytes at bits 0 and 16 of x (the rest 0). */
IG_DEV unsigned ig_kvq_e4m3_h2(unsigned x) { return ((x << 8) & 0x80008000u) | ((x << 7) & 0x3f803f80u); }
#define IG_KVQ_E4M3_UNIT 256.0f /* e4m3(c) = ig_kvq_e4m3_h2's half times this */

/* fp8 rows (kv_quant.h's ig_kvq_row_e4m3): s = amax / 448 rounded up to f16, codes x / s, zero 0.
 * One warp, as ig_kvq_store_w. */
template <int KV, int PS, int D>
IG_DEV void ig_kvq_store_e4m3_w(unsigned char *base, int kv01, int r, const float *x) {
    constexpr int BITS = IG_KVQ_E4M3;
    const int lane = threadIdx.x & 31;
    float mx = 0.0f;
    for (int i = lane; i < D; i += 32) mx = fmaxf(mx, fabsf(x[i]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(IG_FULL_MASK, mx, o));
    const float s = __fdiv_rn(mx, 448.0f);
    unsigned short hs = ig_kvq_f2h(s);
    if (ig_kvq_h2f(hs) < s && hs < 0x7bffu) hs++; /* round the scale up: codes within +-448 */
    const float sf = ig_kvq_h2f(hs), inv = sf > 0.0f ? __fdiv_rn(1.0f, sf) : 0.0f; /* all-zero or NaN row: codes 0 */
    unsigned char *codes = base + ig_kvq_codes_off<KV, PS, D, BITS>(kv01, r);
    if (lane == 0) {
        *(unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(kv01, r)) = hs;
        base[ig_kvq_zero_off<KV, PS, D, BITS>(kv01, r)] = 0;
    }
    for (int i = lane; i < D; i += 32) codes[i] = ig_kvq_f2e4m3(__fmul_rn(x[i], inv));
    __syncwarp();
}

/* The steps of kv_quant.h's ig_kvq_row that the writers below share: the warp's range (mn, mx
 * already each lane's min(., 0) / max(., 0); every lane gets the warp's), the scale (mx - mn) /
 * qmax rounded up to f16 (*hs; returned as a float) and one code x / s + z rounded and clamped. */
IG_DEV void ig_kvq_range_w(float &mn, float &mx) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        mn = fminf(mn, __shfl_xor_sync(IG_FULL_MASK, mn, o)), mx = fmaxf(mx, __shfl_xor_sync(IG_FULL_MASK, mx, o));
}
IG_DEV float ig_kvq_scale(float mn, float mx, float qmax, unsigned short *hs) {
    const float s = __fdiv_rn(__fsub_rn(mx, mn), qmax);
    *hs = ig_kvq_f2h(s);
    if (ig_kvq_h2f(*hs) < s && *hs < 0x7bffu) (*hs)++; /* round the scale up: codes stay in range */
    return ig_kvq_h2f(*hs);
}
IG_DEV float ig_kvq_code(float x, float inv, float z, float qmax) {
    return fminf(fmaxf(__fadd_rn(rintf(__fmul_rn(x, inv)), z), 0.0f), qmax);
}

/* Quantizes x[D] (shared memory, already rotated; for delta keys the difference) into row r of
 * tensor kv01 of the layer's page part at base, by one warp: kv_quant.h's ig_kvq_row. rec: null,
 * or kp[D] (shared memory) for a delta-coded key: it becomes this row's reconstruction
 * s (q - z) + pred kp (kp ignored when first: slot 0), as kv_quant.h's ig_kvq_load computes it;
 * pi (the predictor's index) goes to the zero byte's bits 4..6. Ends with __syncwarp. */
template <int KV, int PS, int D, int BITS>
IG_DEV void ig_kvq_store_w(unsigned char *base, int kv01, int r, const float *x, float *rec = nullptr,
                           bool first = true, int pi = 0) {
    const float pa = IG_KVQ_PRED(pi);
    constexpr int QMAX = BITS == 4 ? 15 : 255;
    const int lane = threadIdx.x & 31;
    __syncwarp();
    if (BITS == IG_KVQ_E4M3) {
        ig_kvq_store_e4m3_w<KV, PS, D>(base, kv01, r, x);
        return;
    }
    float mn = 0.0f, mx = 0.0f;
    for (int i = lane; i < D; i += 32) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    ig_kvq_range_w(mn, mx);
    unsigned short hs;
    const float sf = ig_kvq_scale(mn, mx, (float)QMAX, &hs);
    unsigned char *codes = base + ig_kvq_codes_off<KV, PS, D, BITS>(kv01, r);
    if (lane == 0) *(unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(kv01, r)) = hs;
    if (!(sf > 0.0f)) { /* an all-zero row (or NaN): codes 0, zero 0 */
        for (int i = lane; i < IG_KVQ_RB(D, BITS); i += 32) codes[i] = 0;
        const float o = __fadd_rn(__fmul_rn(0.0f, sf), -sf * 0.0f);
        if (lane == 0) base[ig_kvq_zero_off<KV, PS, D, BITS>(kv01, r)] = (unsigned char)(pi << 4);
        if (rec)
            for (int i = lane; i < D; i += 32) rec[i] = first ? o : __fmaf_rn(pa, rec[i], o);
        __syncwarp();
        return;
    }
    const float inv = __fdiv_rn(1.0f, sf);
    const float z = fminf(fmaxf(rintf(__fmul_rn(-mn, inv)), 0.0f), (float)QMAX);
    if (lane == 0) base[ig_kvq_zero_off<KV, PS, D, BITS>(kv01, r)] = (unsigned char)((int)z | pi << 4);
    if (BITS == 8) {
        for (int i = lane; i < D; i += 32)
            codes[i] = (unsigned char)ig_kvq_code(x[i], inv, z, 255.0f);
    } else {
        for (int i = lane; i < D / 2; i += 32) {
            const int a = (int)ig_kvq_code(x[2 * i], inv, z, 15.0f), b = (int)ig_kvq_code(x[2 * i + 1], inv, z, 15.0f);
            codes[i] = (unsigned char)(a | (b << 4));
            if (rec) {
                const float zb = -sf * z;
                const float oa = __fadd_rn(__fmul_rn((float)a, sf), zb), ob = __fadd_rn(__fmul_rn((float)b, sf), zb);
                rec[2 * i] = first ? oa : __fmaf_rn(pa, rec[2 * i], oa);
                rec[2 * i + 1] = first ? ob : __fmaf_rn(pa, rec[2 * i + 1], ob);
            }
        }
    }
    __syncwarp();
}

/* Writes the rotated 4-bit key x[D] (shared memory) at row r = h PS + slot of a page whose keys are
 * delta-coded, by one warp: kv_quant.h's ig_kvq_store_key. first (slot 0): x as it is; else the
 * difference x - a kp for the predictor a (the first npred of IG_KVQ_PRED) whose row quantizes with
 * the least squared error (summed in double: ties to the lower index as on the CPU, whose order of
 * summation differs). x becomes the stored row, kp[D] (shared memory, the previous slot's
 * reconstruction) this row's. Ends with __syncwarp. */
template <int KV, int PS, int D, int BITS>
IG_DEV void ig_kvq_store_key_w(unsigned char *base, int r, float *x, float *kp, bool first, int npred = IG_KVQ_NPRED) {
    const int lane = threadIdx.x & 31;
    __syncwarp();
    int best = 0;
    double best_e = 0.0;
    for (int a = 0; !first && a < npred; a++) {
        const float pa = IG_KVQ_PRED(a);
        float rv[(D + 31) / 32];
        float mn = 0.0f, mx = 0.0f;
        for (int i = lane, k = 0; i < D; i += 32, k++) rv[k] = __fmaf_rn(-pa, kp[i], x[i]), mn = fminf(mn, rv[k]), mx = fmaxf(mx, rv[k]);
        ig_kvq_range_w(mn, mx);
        unsigned short hs;
        const float sf = ig_kvq_scale(mn, mx, 15.0f, &hs);
        const float inv = sf > 0.0f ? __fdiv_rn(1.0f, sf) : 0.0f;
        const float z = sf > 0.0f ? fminf(fmaxf(rintf(__fmul_rn(-mn, inv)), 0.0f), 15.0f) : 0.0f, zb = -sf * z;
        double e = 0.0;
        for (int i = lane, k = 0; i < D; i += 32, k++) {
            const float c = sf > 0.0f ? ig_kvq_code(rv[k], inv, z, 15.0f) : 0.0f;
            const double t = (double)rv[k] - (double)__fadd_rn(__fmul_rn(c, sf), zb);
            e += t * t;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) e += __shfl_xor_sync(IG_FULL_MASK, e, o);
        if (a == 0 || e < best_e) best_e = e, best = a;
    }
    if (!first) {
        const float pa = IG_KVQ_PRED(best);
        for (int i = lane; i < D; i += 32) x[i] = __fmaf_rn(-pa, kp[i], x[i]);
    }
    ig_kvq_store_w<KV, PS, D, BITS>(base, 0, r, x, kp, first, best);
}

/* kp[D] (shared memory) = the reconstructed key of slot `slot` - 1 (slot >= 1) of row block h of
 * a page whose 4-bit keys are delta-coded: rows 0 .. slot-1 walked in order, by one warp, as
 * kv_quant.h's ig_kvq_key_before (the same float operations). COH: read through L2 (the caller's
 * kernel may have written the rows). */
template <int KV, int PS, int D, int BITS, bool COH>
IG_DEV void ig_kvq_key_before_w(const unsigned char *base, int h, int slot, float *kp) {
    const int lane = threadIdx.x & 31;
    __syncwarp();
    for (int i = lane; i < D; i += 32) kp[i] = 0.0f;
    for (int j = 0; j < slot; j++) {
        const int r = h * PS + j;
        const unsigned short hs = COH ? __ldcg((const unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(0, r)))
                                      : *(const unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(0, r));
        const unsigned char z = COH ? __ldcg(base + ig_kvq_zero_off<KV, PS, D, BITS>(0, r))
                                    : base[ig_kvq_zero_off<KV, PS, D, BITS>(0, r)];
        const float s = ig_kvq_h2f(hs), b = -s * (float)(z & 15), pa = IG_KVQ_PRED(z >> 4);
        const unsigned char *c = base + ig_kvq_codes_off<KV, PS, D, BITS>(0, r);
        for (int i = lane; i < D; i += 32) {
            const unsigned char byte = COH ? __ldcg(c + i / 2) : c[i / 2];
            const float o = __fadd_rn(__fmul_rn((float)((i & 1) ? byte >> 4 : byte & 15), s), b);
            kp[i] = j > 0 ? __fmaf_rn(pa, kp[i], o) : o;
        }
    }
    __syncwarp();
}

/* CB bytes at p (CB-aligned) into a 16-byte word (the rest zero); COH: through L2 only. */
template <int CB, bool COH>
IG_DEV uint4 ig_kvq_ld(const unsigned char *p) {
    if (CB == 16) return COH ? __ldcg((const uint4 *)p) : __ldg((const uint4 *)p);
    if (CB == 8) {
        const uint2 v = COH ? __ldcg((const uint2 *)p) : __ldg((const uint2 *)p);
        return make_uint4(v.x, v.y, 0u, 0u);
    }
    return make_uint4(COH ? __ldcg((const unsigned *)p) : __ldg((const unsigned *)p), 0u, 0u, 0u);
}

/* The VE = CB * 8 / IG_KVQ_BITS(BITS) codes of a chunk dequantized: o[e] = code * s + b (b = -s z);
 * fp8: e4m3(code) * s (b is 0). */
template <int CB, int BITS>
IG_DEV void ig_kvq_unpack(uint4 w, float s, float b, float *o) {
    const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < CB / 4; k++) {
        const unsigned u = ws[k];
        if (BITS == IG_KVQ_E4M3) {
            const float su = s * IG_KVQ_E4M3_UNIT;
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const unsigned h2 = ig_kvq_e4m3_h2(__byte_perm(u, 0u, 0x4140u + 0x202u * (unsigned)(e / 2)));
                o[4 * k + e] = ig_kvq_h2f((unsigned short)(h2 & 0xffffu)) * su;
                o[4 * k + e + 1] = ig_kvq_h2f((unsigned short)(h2 >> 16)) * su;
            }
        } else if (BITS == 8) {
#pragma unroll
            for (int e = 0; e < 4; e++) o[4 * k + e] = fmaf((float)((u >> (8 * e)) & 255u), s, b);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) o[8 * k + e] = fmaf((float)((u >> (4 * e)) & 15u), s, b);
        }
    }
}


/* Geometry of a reader of quantized rows: chunks of VE codes (16 or 8: CB = 16 / 8 bytes of int8
 * codes, 8 / 4 of uint4; rows are whole chunks), DV chunks a row, TPK lanes a row (a power of two,
 * at most 32), NV chunks a lane, KPW keys a warp step, E elements a lane. Readers take VE = 16
 * where the queries and accumulators of their heads fit the registers (more bytes in flight a
 * lane), else 8 (as many elements a lane as bf16 rows' 16-byte loads). */
IG_DEV constexpr int ig_kvq_pow2ceil(int x) { return x <= 1 ? 1 : 2 * ig_kvq_pow2ceil((x + 1) / 2); }
template <int D, int BITS, int VE_>
struct ig_kvq_geom {
    static constexpr int VE = VE_, CB = VE * IG_KVQ_BITS(BITS) / 8, DV = D / VE;
    static constexpr int TPK = ig_kvq_pow2ceil(DV) < 32 ? ig_kvq_pow2ceil(DV) : 32;
    static constexpr int NV = (DV + TPK - 1) / TPK, KPW = 32 / TPK, E = NV * VE;
};

/* Online softmax of G query heads over keys [k0, k1) of kv head kh (page table pt) by NW warps of
 * which this is warp wi, lanes in groups of TPK per key (ig_kvq_geom), UK key steps of loads in
 * flight: qr[G][E] the lane's part of the queries (rotated, pre-scaled to the log2 domain),
 * acc / m / l its running state (updated). Each key's f16 scale and zero point are loaded beside
 * its codes and applied while unpacking. Delta-coded 4-bit keys are rebuilt page by page: a lane
 * group walks a page's slots in order from slot 0 (K^_j = K^_{j-1} + s_j (q_j - z_j), in
 * registers; K^_j = a_j K^_{j-1} + s_j (q_j - z_j) with the row's predictor a_j), scoring the slots
 * inside [k0, k1); the groups take pages in turn. All lanes of the
 * warp run the same steps (shuffles inside the TPK-lane groups). COH: loads through L2 only. */
template <int KV, int PS, int D, int BITS, int VE_, int G, int NW, int UK, bool COH, unsigned long long PAGE_BYTES>
IG_DEV void ig_kvq_attend(int kh, int k0, int k1, int wi, const float (&qr)[G][ig_kvq_geom<D, BITS, VE_>::E],
                          float (&acc)[G][ig_kvq_geom<D, BITS, VE_>::E], float (&m)[G], float (&l)[G],
                          const unsigned char *kv_pool, unsigned long long layer_off, const int *pt) {
    typedef ig_kvq_geom<D, BITS, VE_> Q;
    constexpr int CB = Q::CB, VE = Q::VE, DV = Q::DV, TPK = Q::TPK, NV = Q::NV, KPW = Q::KPW, E = Q::E;
    static_assert(D % VE == 0, "a row is whole chunks");
    constexpr bool KD = IG_KVQ_KDELTA(BITS);
    const int lane = threadIdx.x & 31, warp = wi, kk = lane / TPK, vl = lane % TPK;
    float kp[E]; /* delta keys: the group's reconstruction of the previous slot */
#pragma unroll
    for (int e = 0; e < E; e++) kp[e] = 0.0f;
    /* key steps: plain keys j = jw + u NW KPW + kk; delta keys: page pg = jw / PS + kk... of slot u */
    const int pfirst = k0 / PS;
    const int nsteps = KD ? (k1 > k0 ? IG_CDIV((k1 - 1) / PS - pfirst + 1, NW * KPW) * IG_CDIV(PS, UK) : 0)
                          : IG_CDIV(k1 - k0, NW * KPW * UK);
    for (int step = 0; step < nsteps; step++) {
        int jb[UK];
        bool okk[UK], sc[UK];
        uint4 kr[UK][NV], vr[UK][NV];
        float ks[UK], kb[UK], vs[UK], vb[UK], ka[UK];
#pragma unroll
        for (int u = 0; u < UK; u++) {
            int j;
            bool ok;
            if (KD) {
                const int so = (step % IG_CDIV(PS, UK)) * UK + u, pg = pfirst + (step / IG_CDIV(PS, UK)) * NW * KPW + warp * KPW + kk;
                j = pg * PS + so;
                ok = so < PS && j < k1;
                sc[u] = ok && j >= k0;
            } else {
                j = k0 + step * NW * KPW * UK + u * NW * KPW + warp * KPW + kk;
                ok = j < k1;
                sc[u] = ok;
            }
            jb[u] = j, okk[u] = ok;
            const unsigned char *base =
                kv_pool + (unsigned long long)(ok ? __ldg(pt + j / PS) : 0) * PAGE_BYTES + layer_off;
            const int r = kh * PS + (ok ? j % PS : 0);
            const unsigned char *kc = base + ig_kvq_codes_off<KV, PS, D, BITS>(0, r);
            const unsigned char *vc = base + ig_kvq_codes_off<KV, PS, D, BITS>(1, r);
#pragma unroll
            for (int jv = 0; jv < NV; jv++) {
                const int v = vl + TPK * jv;
                const bool okv = ok && v < DV;
                const uint4 z = make_uint4(0u, 0u, 0u, 0u);
                kr[u][jv] = okv ? ig_kvq_ld<CB, COH>(kc + v * CB) : z;
                vr[u][jv] = okv ? ig_kvq_ld<CB, COH>(vc + v * CB) : z;
            }
            unsigned short hk = 0, hv = 0;
            unsigned char zk = 0, zv = 0;
            if (ok) {
                const unsigned short *pk = (const unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(0, r));
                const unsigned short *pv = (const unsigned short *)(base + ig_kvq_scale_off<KV, PS, D, BITS>(1, r));
                const unsigned char *qk = base + ig_kvq_zero_off<KV, PS, D, BITS>(0, r);
                const unsigned char *qv = base + ig_kvq_zero_off<KV, PS, D, BITS>(1, r);
                hk = COH ? __ldcg(pk) : __ldg(pk), hv = COH ? __ldcg(pv) : __ldg(pv);
                zk = COH ? __ldcg(qk) : __ldg(qk), zv = COH ? __ldcg(qv) : __ldg(qv);
            }
            ks[u] = ig_kvq_h2f(hk), vs[u] = ig_kvq_h2f(hv);
            kb[u] = -ks[u] * (float)(KD ? zk & 15 : zk), vb[u] = -vs[u] * (float)zv;
            ka[u] = KD ? IG_KVQ_PRED(zk >> 4) : 1.0f; /* the row's predictor */
        }
        (void)jb;
#pragma unroll
        for (int u = 0; u < UK; u++) {
            float kf[E], vf[E], s[G];
#pragma unroll
            for (int jv = 0; jv < NV; jv++) {
                ig_kvq_unpack<CB, BITS>(kr[u][jv], ks[u], kb[u], kf + jv * VE);
                ig_kvq_unpack<CB, BITS>(vr[u][jv], vs[u], vb[u], vf + jv * VE);
            }
            if (KD) { /* slot 0 starts the page's chain; invalid slots leave it as is */
                const bool first = jb[u] % PS == 0;
#pragma unroll
                for (int e = 0; e < E; e++) {
                    kf[e] = first ? kf[e] : fmaf(ka[u], kp[e], kf[e]);
                    kp[e] = okk[u] ? kf[e] : kp[e];
                }
            }
#pragma unroll
            for (int g = 0; g < G; g++) {
                float d = 0.0f;
#pragma unroll
                for (int e = 0; e < E; e++) d = fmaf(qr[g][e], kf[e], d);
#pragma unroll
                for (int o = TPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(IG_FULL_MASK, d, o);
                s[g] = d;
            }
            if (sc[u]) {
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const float mn = fmaxf(m[g], s[g]);
                    const float corr = ig_exp2(m[g] - mn), p = ig_exp2(s[g] - mn);
                    l[g] = l[g] * corr + p;
#pragma unroll
                    for (int e = 0; e < E; e++) acc[g][e] = fmaf(p, vf[e], acc[g][e] * corr);
                    m[g] = mn;
                }
            }
        }
    }
}

#endif /* IG_CUDA_KV_QUANT_CUH */
