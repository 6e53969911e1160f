/* attn_decode_tc.cuh — decode attention's inner loop on tensor cores (mma.sync m16n8k16, sm_80+),
 * for 16-bit, int8, fp8 and uint4 KV rows: what attention.cu's _core runs where ig_adt_geom::OK
 * holds (else attn_decode.cuh's CUDA-core loop, which f32 rows and odd head sizes keep).
 *
 * Why: the CUDA-core loop spends G FMAs a K element and G a V element plus the unpacking, ~55-70
 * warp instructions a key, the same for every format, so 8- and 4-bit rows were no faster than
 * bf16 ones once bytes stopped bounding the loop. Here a warp scores a tile of KT keys for its
 * G <= 8 query heads with mma (the codes unpacked to f16 pairs by a few integer instructions) and
 * accumulates the values with mma: ~3 instructions a 16-bit pair of codes plus 1.5-3 mma a key.
 *
 * Layouts (lane = 4 g + t; m16n8k16: A row g / g + 8 and k pairs (2t, 2t+1), (2t+8, 2t+9); B k
 * pairs at column g; C row g / g + 8, columns 2t, 2t + 1):
 *   scores S^T = Q K^T: A = the queries (row g = head g; rows 8..15 zero), B = 8 keys (column g =
 *     key 8 nb + g), k = 16 dims a step, DS = D / 16 steps. Lane t reads the D / 4 dims [t D / 4,
 *     (t + 1) D / 4) of its key (KB bytes, a quarter row: the row is read by 4 lanes, 16-byte
 *     loads), and which dim each of a step's 4 B elements is (ig_adt_kd) follows from how a
 *     format's word unpacks cheaply; the query fragments are built in the same order once per CTA
 *     (ig_adt_qfrag, in shared memory), as hi + lo halves of the same 16-bit type (q to ~16 / 22
 *     bits, errors below the f32 loop's). C: lane (g, t) holds head g's scores of keys
 *     8 nb + 2t, 8 nb + 2t + 1 — exactly the B fragment the values' product needs, no shuffle.
 *   values O^T += V^T P^T: A = 16 dims x 16 keys, B = the probabilities (k = key, column g = head
 *     g), C = O^T (rows = dims, columns = heads). Lane g reads dims [g D / 8, (g + 1) D / 8) of keys
 *     16 ks + {2t, 2t+1, 2t+8, 2t+9} (VB bytes each), and m-block mb's rows g / g + 8 are its dims
 *     2 mb / 2 mb + 1: an A register pairs two keys' same dim (a byte permute).
 * Quantized rows: codes become exact f16 (1024 + c as the half 0x6400 | c, then minus 1024 + z:
 * c - z in [-255, 255] is exact), the key scale multiplies the score after the dot, the value
 * scale the probability (B = p s as hi + lo halves, as the queries); fp8 codes become e4m3(c) / 2^8 halves
 * (kv_quant.cuh's ig_kvq_e4m3_h2). 4-bit keys are delta-coded within a page: the per-slot dots
 * d_j are scanned into scores s_j = a_j s_{j-1} + d_j over (n-block, t, e) order (a within-lane
 * pair, a scan over the quad's 4 lanes, a carry between n-blocks and tiles), with a_j = 0 at a
 * page's slot 0 so a page start resets the scan wherever it falls. Per-key scales and zero points
 * are loaded once a tile (lane i: key tb + i) and fetched by shuffles where a layout needs them.
 * The online softmax keeps m (log2 domain) per head in the head's quad; a tile's rescale of O^T
 * takes heads 2t, 2t+1's factors from lanes 8t, 8t + 4.
 *
 * Include-guarded, templates only. */
#ifndef IG_CUDA_ATTN_DECODE_TC_CUH
#define IG_CUDA_ATTN_DECODE_TC_CUH

#include "kv_quant.cuh"
#include "mma.cuh"
#include "attn_decode.cuh"

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(IG_CUDA_EMUL)
#define IG_ADT_ARCH 1
#else
#define IG_ADT_ARCH 0
#endif

#ifndef IG_ADT_KT4 /* keys a tile for uint4 rows (16 or 32; 16 for 16- and 8-bit rows: 32 spilled) */
#define IG_ADT_KT4 32
#endif
#ifndef IG_ADT_Q4_DMIN /* the smallest head size whose uint4 rows take this loop (below) */
#define IG_ADT_Q4_DMIN 128
#endif

/* The values' probabilities p s are formed as p (s U) and the accumulators scaled back by 1 / U:
 * s of small-range rows would put the low half of p s among f16 subnormals, and s U must stay a
 * finite half for every f16 scale (int8: s <= 65504 / 255, U 128; uint4: s <= 65504 / 15, U 8) */
#define IG_ADT_VUNIT(nb) ((nb) == 8 ? 128.0f : 8.0f)

/* Geometry for rows of D elements of BITS (16, 8, 4, IG_KVQ_E4M3): KT keys a tile (NK n-blocks of
 * 8 for the scores, NS k-steps of 16 for the values), KB / VB bytes of a key / value row a lane
 * reads in loads of KC / VC bytes, KW / VW words. OK: the tensor-core loop serves the shape; uint4
 * rows from D IG_ADT_Q4_DMIN = 128 only (H100, 1B shape, D 64, decode after an 8k prompt: 1.380 ms/token here
 * against 1.175 for bf16 KV, where the CUDA-core loop was at 1.006x bf16; at D 128 the harness
 * gains, templates/cuda/SPEC.md). */
template <int D, int BITS>
struct ig_adt_geom {
    static constexpr bool Q = BITS != 16 && BITS != 32;
    static constexpr int NB = IG_KVQ_BITS(BITS), DS = D / 16;
    static constexpr int KT = NB == 4 ? IG_ADT_KT4 : 16, NK = KT / 8, NS = KT / 16;
    static constexpr int KB = D / 4 * NB / 8, VB = D / 8 * NB / 8, KW = KB / 4, VW = VB / 4;
    static constexpr int KC = KB % 16 == 0 ? 16 : KB % 8 == 0 ? 8 : 4, VC = VB % 16 == 0 ? 16 : VB % 8 == 0 ? 8 : 4;
    static constexpr bool OK = BITS != 32 && D % 16 == 0 && KB % 4 == 0 && VB % 4 == 0 && (NB != 4 || D >= IG_ADT_Q4_DMIN);
};

#if IG_ADT_ARCH /* the rest needs mma.cuh's sm_80 instructions (or their host emulation) */
/* The dim (within a lane's quarter row) of element r of step s's B fragment: r 0 / 1 the low /
 * high half of b0, 2 / 3 of b1 (as ig_adt_kfrag unpacks a word). */
template <int BITS>
IG_DEV constexpr int ig_adt_kd(int s, int r) {
    return IG_KVQ_BITS(BITS) == 16 ? 4 * s + r
           : IG_KVQ_BITS(BITS) == 8 ? 4 * s + (r == 1 ? 2 : r == 2 ? 1 : r)
                                    : 8 * (s / 2) + 2 * (s % 2) + (r == 1 ? 4 : r == 2 ? 1 : r == 3 ? 5 : 0);
}

/* f16x2 of (1024 + z0, 1024 + z1): two codes' biases (exact for z < 1024) */
IG_DEV unsigned ig_adt_bias2(unsigned z0, unsigned z1) { return (0x6400u + z0) | (0x6400u + z1) << 16; }

/* The codes at the bits of mask in x's two halves (8 or 4 bits at the bottom of each) as exact
 * halves, less the bias pair zz: (1024 + c) - (1024 + z). */
IG_DEV unsigned ig_adt_codes2(unsigned x, unsigned mask, unsigned zz) { return ig_hsub2((x & mask) | 0x64006400u, zz); }

/* Step s's B fragment (b0, b1) of a lane's key words w (zz: its key's bias pair). */
template <int BITS>
IG_DEV void ig_adt_kfrag(const unsigned *w, int s, unsigned zz, unsigned &b0, unsigned &b1) {
    if (BITS == 16) b0 = w[2 * s], b1 = w[2 * s + 1];
    else if (BITS == IG_KVQ_E4M3) b0 = ig_kvq_e4m3_h2(w[s]), b1 = ig_kvq_e4m3_h2(w[s] >> 8);
    else if (BITS == 8) {
        b0 = ig_adt_codes2(w[s], 0x00ff00ffu, zz), b1 = ig_adt_codes2(w[s] >> 8, 0x00ff00ffu, zz);
    } else {
        const unsigned x = w[s / 2] >> (8 * (s % 2));
        b0 = ig_adt_codes2(x, 0x000f000fu, zz), b1 = ig_adt_codes2(x >> 4, 0x000f000fu, zz);
    }
}

/* m-block mb's A fragment of the values: keys v0 / v1 (k pair 2t, 2t+1) and v2 / v3 (2t+8, 2t+9),
 * dims 2 mb (row g) and 2 mb + 1 (row g + 8) of the lane's row part; z01 / z23 the keys' bias
 * pairs. */
template <int BITS>
IG_DEV void ig_adt_vfrag(const unsigned *v0, const unsigned *v1, const unsigned *v2, const unsigned *v3, int mb,
                         unsigned z01, unsigned z23, unsigned *a) {
    constexpr int NB = IG_KVQ_BITS(BITS);
    if (NB == 16) {
        a[0] = __byte_perm(v0[mb], v1[mb], 0x5410), a[1] = __byte_perm(v0[mb], v1[mb], 0x7632);
        a[2] = __byte_perm(v2[mb], v3[mb], 0x5410), a[3] = __byte_perm(v2[mb], v3[mb], 0x7632);
        return;
    }
    /* x: bytes 0, 1 of the first key's word and of the second's (8-bit: dims 2 mb, 2 mb + 1 sit in
     * word mb / 2 at bytes 2 (mb % 2) and up; 4-bit: in word mb / 4, byte mb % 4, two nibbles) */
    const int wi = NB == 8 ? mb / 2 : mb / 4, sel = (NB == 8 ? mb % 2 : (mb % 4) / 2) ? 0x7632 : 0x5410;
    const unsigned x01 = __byte_perm(v0[wi], v1[wi], sel), x23 = __byte_perm(v2[wi], v3[wi], sel);
    if (BITS == IG_KVQ_E4M3) {
        a[0] = ig_kvq_e4m3_h2(x01), a[1] = ig_kvq_e4m3_h2(x01 >> 8);
        a[2] = ig_kvq_e4m3_h2(x23), a[3] = ig_kvq_e4m3_h2(x23 >> 8);
    } else { /* 8-bit: the words' bytes 0 / 1; 4-bit: the nibbles of byte mb % 2 */
        const int sh = NB == 8 ? 0 : 8 * (mb % 2), st = NB == 8 ? 8 : 4;
        const unsigned mask = NB == 8 ? 0x00ff00ffu : 0x000f000fu;
        a[0] = ig_adt_codes2(x01 >> sh, mask, z01), a[1] = ig_adt_codes2(x01 >> (sh + st), mask, z01);
        a[2] = ig_adt_codes2(x23 >> sh, mask, z23), a[3] = ig_adt_codes2(x23 >> (sh + st), mask, z23);
    }
}

/* Two values as a fragment register: the package's 16-bit type for 16-bit rows, f16 for codes. */
template <int BITS>
IG_DEV unsigned ig_adt_pack(float a, float b) {
    return BITS == 16 ? ig_pack2_h(a, b) : (unsigned)ig_f32_to_f16(a) | (unsigned)ig_f32_to_f16(b) << 16;
}
/* (a, b) as hi + lo fragment registers: hi rounded, lo the rounded remainder */
template <int BITS>
IG_DEV void ig_adt_split2(float a, float b, unsigned &hi, unsigned &lo) {
    hi = ig_adt_pack<BITS>(a, b);
    const unsigned short h0 = (unsigned short)(hi & 0xffffu), h1 = (unsigned short)(hi >> 16);
    lo = BITS == 16 ? ig_adt_pack<BITS>(a - ig_h_to_f32(h0), b - ig_h_to_f32(h1))
                    : ig_adt_pack<BITS>(a - ig_f16_to_f32(h0), b - ig_f16_to_f32(h1));
}
template <int BITS>
IG_DEV void ig_adt_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) {
    if (BITS == 16) ig_mma16(c, a, b0, b1);
    else ig_mma16f(c, a, b0, b1);
}

/* The query fragments of G <= 8 heads qs [G][D] (shared memory, roped; rotated for quantized
 * rows) into qf [DS][32] (shared): lane (g, t)'s step s as {a0 hi, a2 hi, a0 lo, a2 lo}, hi + lo
 * the value in two halves of the fragment type. All nthr threads of the caller take part; the
 * caller synchronizes before reading qf. */
template <int D, int BITS, int G>
IG_DEV void ig_adt_qfrag(const float *qs, uint4 *qf, int tid, int nthr) {
    for (int i = tid; i < D / 16 * 32; i += nthr) {
        const int s = i / 32, lane = i % 32, g = lane / 4, base = (lane % 4) * (D / 4);
        unsigned hl[4] = {0u, 0u, 0u, 0u};
        if (g < G)
            for (int p = 0; p < 2; p++) {
                const float x0 = qs[g * D + base + ig_adt_kd<BITS>(s, 2 * p)];
                const float x1 = qs[g * D + base + ig_adt_kd<BITS>(s, 2 * p + 1)];
                ig_adt_split2<BITS>(x0, x1, hl[p], hl[2 + p]);
            }
        qf[i] = make_uint4(hl[0], hl[1], hl[2], hl[3]);
    }
}

/* A tile's loads (a lane's part): its key's row words, its value rows' words, and lane i's key
 * (tb + i) scale and zero bytes (quantized rows). */
template <int D, int BITS>
struct ig_adt_tile {
    typedef ig_adt_geom<D, BITS> A;
    unsigned k[A::NK][A::KW], v[A::NS][4][A::VW];
    float ksc, vsc;
    unsigned kz, vz;
};

template <int C, bool COH>
IG_DEV void ig_adt_ldw(const unsigned char *p, bool ok, unsigned *w, int nw) {
#pragma unroll
    for (int i = 0; i < nw; i += C / 4) {
        const uint4 x = ok ? ig_kvq_ld<C, COH>(p + 4 * i) : make_uint4(0u, 0u, 0u, 0u);
        w[i] = x.x;
        if (C >= 8) w[i + 1] = x.y;
        if (C == 16) w[i + 2] = x.z, w[i + 3] = x.w;
    }
}

/* Issues the loads of the tile whose first key is tb (keys up to ue). */
template <int KV, int PS, int D, int BITS, bool COH, unsigned long long PAGE_BYTES>
IG_DEV void ig_adt_load(ig_adt_tile<D, BITS> &t, int kh, int tb, int ue, int k0, int klo, const unsigned char *kv_pool,
                        unsigned long long layer_off, const int *pt) {
    typedef ig_adt_geom<D, BITS> A;
    constexpr int RB = D * A::NB / 8;
    constexpr bool ONEPAGE = PS % A::KT == 0;
    const int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
    const unsigned char *pb = ONEPAGE ? kv_pool + (unsigned long long)__ldg(pt + tb / PS) * PAGE_BYTES + layer_off : nullptr;
#pragma unroll
    for (int nb = 0; nb < A::NK; nb++) {
        const int j = tb + 8 * nb + g;
        const bool ok = j >= klo && j < ue;
        const unsigned char *b = ONEPAGE ? pb : kv_pool + (unsigned long long)(ok ? __ldg(pt + j / PS) : 0) * PAGE_BYTES + layer_off;
        const int r = kh * PS + (ok ? j % PS : 0);
        const unsigned char *row = A::Q ? b + ig_kvq_codes_off<KV, PS, D, BITS>(0, r) : b + (size_t)r * RB;
        ig_adt_ldw<A::KC, COH>(row + q4 * A::KB, ok, t.k[nb], A::KW);
    }
#pragma unroll
    for (int ks = 0; ks < A::NS; ks++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int j = tb + 16 * ks + 2 * q4 + (i & 1) + 8 * (i >> 1);
            const bool ok = j >= k0 && j < ue;
            const unsigned char *b = ONEPAGE ? pb : kv_pool + (unsigned long long)(ok ? __ldg(pt + j / PS) : 0) * PAGE_BYTES + layer_off;
            const int r = kh * PS + (ok ? j % PS : 0);
            const unsigned char *row = A::Q ? b + ig_kvq_codes_off<KV, PS, D, BITS>(1, r) : b + ((size_t)KV * PS + r) * RB;
            ig_adt_ldw<A::VC, COH>(row + g * A::VB, ok, t.v[ks][i], A::VW);
        }
    t.ksc = t.vsc = 0.0f, t.kz = t.vz = 0u;
    if (A::Q && lane < A::KT) {
        const int j = tb + lane;
        const unsigned char *b = ONEPAGE ? pb : kv_pool + (unsigned long long)(j < ue ? __ldg(pt + j / PS) : 0) * PAGE_BYTES + layer_off;
        const int r = kh * PS + j % PS;
        if (j >= klo && j < ue) {
            const unsigned short *sk = (const unsigned short *)(b + ig_kvq_scale_off<KV, PS, D, BITS>(0, r));
            const unsigned char *zk = b + ig_kvq_zero_off<KV, PS, D, BITS>(0, r);
            t.ksc = ig_kvq_h2f(COH ? __ldcg(sk) : __ldg(sk)), t.kz = COH ? __ldcg(zk) : __ldg(zk);
        }
        if (j >= k0 && j < ue) {
            const unsigned short *sv = (const unsigned short *)(b + ig_kvq_scale_off<KV, PS, D, BITS>(1, r));
            const unsigned char *zv = b + ig_kvq_zero_off<KV, PS, D, BITS>(1, r);
            t.vsc = ig_kvq_h2f(COH ? __ldcg(sv) : __ldg(sv)), t.vz = COH ? __ldcg(zv) : __ldg(zv);
        }
        if (BITS == IG_KVQ_E4M3) t.ksc *= IG_KVQ_E4M3_UNIT;
        t.vsc *= BITS == IG_KVQ_E4M3 ? IG_KVQ_E4M3_UNIT : IG_ADT_VUNIT(A::NB);
    }
}

/* The scores of a tile (c: its C fragments, lane (g, t): head g, keys 8 nb + 2t + e) from the key
 * words and the staged query fragments; scaled by the keys' scales, delta keys scanned (carry: the
 * running score of the page, head g). */
template <int PS, int D, int BITS>
IG_DEV void ig_adt_scores(const ig_adt_tile<D, BITS> &t, int tb, const uint4 *qf, float (&c)[ig_adt_geom<D, BITS>::NK][4],
                          float &carry) {
    typedef ig_adt_geom<D, BITS> A;
    const int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
    unsigned zz[A::NK]; /* the bias pairs of the lane's B keys (8 nb + g) */
#pragma unroll
    for (int nb = 0; nb < A::NK; nb++) {
        const unsigned z = __shfl_sync(IG_FULL_MASK, BITS == 4 ? t.kz & 15u : t.kz, 8 * nb + g);
        zz[nb] = ig_adt_bias2(z, z);
#pragma unroll
        for (int e = 0; e < 4; e++) c[nb][e] = 0.0f;
    }
#pragma unroll
    for (int s = 0; s < A::DS; s++) {
        const uint4 qa = qf[s * 32 + lane];
        const unsigned ah[4] = {qa.x, 0u, qa.y, 0u}, al[4] = {qa.z, 0u, qa.w, 0u};
#pragma unroll
        for (int nb = 0; nb < A::NK; nb++) {
            unsigned b0, b1;
            ig_adt_kfrag<BITS>(t.k[nb], s, zz[nb], b0, b1);
            ig_adt_mma<BITS>(c[nb], ah, b0, b1);
            ig_adt_mma<BITS>(c[nb], al, b0, b1);
        }
    }
    if constexpr (A::Q) { /* the key scales; delta keys scanned */
#pragma unroll
        for (int nb = 0; nb < A::NK; nb++) {
            const int j0 = 8 * nb + 2 * q4; /* the lane's C keys j0, j0 + 1 */
            float d[2] = {c[nb][0] * __shfl_sync(IG_FULL_MASK, t.ksc, j0), c[nb][1] * __shfl_sync(IG_FULL_MASK, t.ksc, j0 + 1)};
            if (IG_KVQ_KDELTA(BITS)) { /* the quad's inclusive scan of the lanes' pairs (a, d), then each key */
                float a[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const unsigned kz = __shfl_sync(IG_FULL_MASK, t.kz, j0 + e);
                    a[e] = (tb + j0 + e) % PS == 0 ? 0.0f : IG_KVQ_PRED(kz >> 4); /* a page's slot 0 starts afresh */
                }
                float sa = a[1] * a[0], sd = fmaf(a[1], d[0], d[1]);
#pragma unroll
                for (int o = 1; o < 4; o <<= 1) {
                    const float ua = __shfl_sync(IG_FULL_MASK, sa, lane - o), ud = __shfl_sync(IG_FULL_MASK, sd, lane - o);
                    if (q4 >= o) sd = fmaf(sa, ud, sd), sa *= ua;
                }
                const float ea = __shfl_sync(IG_FULL_MASK, sa, lane - 1), ed = __shfl_sync(IG_FULL_MASK, sd, lane - 1);
                const float x = q4 > 0 ? fmaf(ea, carry, ed) : carry; /* the score of the key before the lane's first */
                d[0] = fmaf(a[0], x, d[0]), d[1] = fmaf(a[1], d[0], d[1]);
                carry = __shfl_sync(IG_FULL_MASK, d[1], 4 * g + 3);
            }
            c[nb][0] = d[0], c[nb][1] = d[1];
        }
    }
}

/* The tile at tb into the running state: scores, the tile's softmax, values. acc: O^T fragments
 * (m-block mb: rows dims 2 mb / 2 mb + 1 of lane g's value part, columns heads 2t / 2t + 1), m:
 * head g's running max (log2 domain, the same in its quad), l: the lane's part of head g's sum. */
template <int PS, int D, int BITS>
IG_DEV void ig_adt_step(const ig_adt_tile<D, BITS> &t, int tb, int ue, int k0, const uint4 *qf, float qscale, float &carry,
                        float (&acc)[D / 16][4], float &m, float &l) {
    typedef ig_adt_geom<D, BITS> A;
    const int lane = threadIdx.x & 31, q4 = lane & 3;
    float c[A::NK][4];
    ig_adt_scores<PS, D, BITS>(t, tb, qf, c, carry);
    float mt = IG_NEG_INF;
#pragma unroll
    for (int nb = 0; nb < A::NK; nb++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int j = tb + 8 * nb + 2 * q4 + e;
            c[nb][e] = j >= k0 && j < ue ? c[nb][e] * qscale : IG_NEG_INF;
            mt = fmaxf(mt, c[nb][e]);
        }
    mt = fmaxf(mt, __shfl_xor_sync(IG_FULL_MASK, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(IG_FULL_MASK, mt, 2));
    /* a rescale where a head's max moved: heads 2t, 2t + 1's factors from lanes 8t, 8t + 4 */
    const float mn = fmaxf(m, mt), corr = ig_sm_factor(m, mn);
    m = mn, l *= corr;
    const float c0 = __shfl_sync(IG_FULL_MASK, corr, 8 * q4), c1 = __shfl_sync(IG_FULL_MASK, corr, 8 * q4 + 4);
#pragma unroll
    for (int mb = 0; mb < A::DS; mb++) acc[mb][0] *= c0, acc[mb][1] *= c1, acc[mb][2] *= c0, acc[mb][3] *= c1;
#pragma unroll
    for (int ks = 0; ks < A::NS; ks++) {
        unsigned bh[2], bl[2], zb[2] = {0u, 0u};
#pragma unroll
        for (int h = 0; h < 2; h++) { /* keys 16 ks + 8 h + 2t + e: n-block 2 ks + h */
            float p[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int jl = 16 * ks + 8 * h + 2 * q4 + e;
                p[e] = m == IG_NEG_INF ? 0.0f : ig_exp2(c[2 * ks + h][e] - m);
                l += p[e];
                if (A::Q) p[e] *= __shfl_sync(IG_FULL_MASK, t.vsc, jl);
            }
            if (A::Q && BITS != IG_KVQ_E4M3)
                zb[h] = ig_adt_bias2(__shfl_sync(IG_FULL_MASK, t.vz, 16 * ks + 8 * h + 2 * q4),
                                     __shfl_sync(IG_FULL_MASK, t.vz, 16 * ks + 8 * h + 2 * q4 + 1));
            ig_adt_split2<BITS>(p[0], p[1], bh[h], bl[h]);
        }
#pragma unroll
        for (int mb = 0; mb < A::DS; mb++) {
            unsigned a[4];
            ig_adt_vfrag<BITS>(t.v[ks][0], t.v[ks][1], t.v[ks][2], t.v[ks][3], mb, zb[0], zb[1], a);
            ig_adt_mma<BITS>(acc[mb], a, bh[0], bh[1]);
            ig_adt_mma<BITS>(acc[mb], a, bl[0], bl[1]);
        }
    }
}

/* Online softmax of G <= 8 query heads over keys [k0, k1) of kv head kh by warp `warp` of NW
 * (qf: ig_adt_qfrag's fragments, qscale: softmax scale * log2 e): the warp's state into
 * wst [G][D + 2] (shared: acc unnormalized relative to m, m in the log2 domain, l), the layout
 * attention.cu's _merge reads. Tiles of KT keys in units as attn_decode.cuh's (a page for delta
 * keys when KT is not a multiple of PS, so a unit's scan starts at a page start). Every lane of
 * the warp runs it. */
template <int KV, int PS, int D, int BITS, int G, int NW, bool COH, unsigned long long PAGE_BYTES>
IG_DEV void ig_adt_attend(int kh, int k0, int k1, int warp, const uint4 *qf, float qscale, float *wst,
                          const unsigned char *kv_pool, unsigned long long layer_off, const int *pt) {
    typedef ig_adt_geom<D, BITS> A;
    static_assert(A::OK && G <= 8, "the tensor-core loop's shapes");
    constexpr bool KD = A::Q && IG_KVQ_KDELTA(BITS);
    constexpr int KT = A::KT, UNIT = (KD && KT % PS != 0) ? PS : KT, NST = (UNIT + KT - 1) / KT;
    const int lane = threadIdx.x & 31, g = lane >> 2, q4 = lane & 3;
    float acc[A::DS][4], m = IG_NEG_INF, l = 0.0f, carry = 0.0f;
#pragma unroll
    for (int mb = 0; mb < A::DS; mb++) acc[mb][0] = acc[mb][1] = acc[mb][2] = acc[mb][3] = 0.0f;
    if (k1 > k0) {
        const int klo = KD ? k0 - k0 % PS : k0;
        const int nu = (k1 - 1) / UNIT - k0 / UNIT + 1;
        const int n = nu > warp ? ((nu - warp + NW - 1) / NW) * NST : 0;
        ig_adt_tile<D, BITS> tl;
        for (int i = 0; i < n; i++) {
            const int tb = ig_ad_tile_base<KT, UNIT, NST, NW>(k0, warp, i), ue = min(k1, (tb / UNIT + 1) * UNIT);
            if (i % NST == 0) carry = 0.0f;
            ig_adt_load<KV, PS, D, BITS, COH, PAGE_BYTES>(tl, kh, tb, ue, k0, klo, kv_pool, layer_off, pt);
            ig_adt_step<PS, D, BITS>(tl, tb, ue, k0, qf, qscale, carry, acc, m, l);
        }
    }
    l += __shfl_xor_sync(IG_FULL_MASK, l, 1);
    l += __shfl_xor_sync(IG_FULL_MASK, l, 2);
    if (q4 == 0 && g < G) wst[g * (D + 2) + D] = m, wst[g * (D + 2) + D + 1] = l;
#pragma unroll
    for (int mb = 0; mb < A::DS; mb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = 2 * q4 + (e & 1), d = (D / 8) * g + 2 * mb + (e >> 1);
            if (h < G) wst[h * (D + 2) + d] = A::Q && BITS != IG_KVQ_E4M3 ? acc[mb][e] * (1.0f / IG_ADT_VUNIT(A::NB)) : acc[mb][e];
        }
}

#endif /* IG_ADT_ARCH */

#endif /* IG_CUDA_ATTN_DECODE_TC_CUH */
