/* wq.cuh — quantized weight rows of CUDA packages (`--quant a16w8|a16w4` with a CUDA target) and
 * their device-side decoding, shared by gemv.cu, gemv_tc.cu, qgemm.cu, embed.cu, dequant.cu and stream.cuh.
 *
 * A matrix W[N][K] keeps the row-major order of the float formats (N padded to 16 zero rows, gate
 * and up interleaved by 16 rows), each row followed by its scales, so that one row is one
 * contiguous run of bytes (the persistent kernel copies whole rows into its ring):
 *   q8r (WQ 8): K int8 codes, then the row's f32 scale and 12 bytes of padding;
 *               w[k] = scale * q[k] (symmetric, the CPU q8c rule: scale = max |w| / 127).
 *   q4r (WQ 4): K / 2 bytes of uint4 codes (element 2i in the low nibble of byte i, so element j of
 *               a 32-bit word is its nibble j), then K / G (f16 scale, f16 min) pairs, padded to
 *               16 bytes; w[k] = scale[k / G] * q[k] + min[k / G] (asymmetric, groups of G = 32, 64
 *               or 128 along K).
 *   f8r (WQ 8, the kernels' WF8 1; `--quant fp8`): q8r's rows with e4m3fn codes (w[k] = scale *
 *               e4m3(q[k]), scale = max |w| / 448), then, after the NP rows, the NP scales again as
 *               one f32 vector (cuBLASLt's outer-vector scale, host_runtime.c's GEMM_F8). The kernels
 *               here read it as q8r with another code-to-float step (ig_wf8_word / ig_wf8_pair):
 *               e4m3's bits moved into a float's (f32, bf16) or a half's, the value times 2^-120 or
 *               2^-8 exactly (subnormal codes land on subnormals), undone with the row scale
 *               (IG_WF8_UNIT).
 * Row bytes: IG_WQ_ROWB(K, WQ, G) (launch.h). The packers are compiler/pack.c's pk_pack_q8r /
 * pk_pack_q4r.
 *
 * A 16-byte vector of codes is 16 weights (q8r) or 32 (q4r), always inside one group (G >= 32).
 * Kernels multiply codes (exact in f32 and bf16) and apply the scale once per vector or row:
 * q8r sums scale * sum(q x) per row; q4r adds scale * sum(q x) + min * sum(x) per vector.
 */
#ifndef IG_CUDA_WQ_CUH
#define IG_CUDA_WQ_CUH

#include "common.cuh"
#include "kv_quant.cuh" /* ig_kvq_e4m3_h2: e4m3 codes as halves (f8r) */

/* Codes to floats without conversion instructions (cvt runs at a quarter of the FMA rate, and a
 * GEMV on quantized rows needs one per weight at 15-30 weights per clock and SM): a code c of up
 * to 8 bits in the low mantissa bits of 2^23 is the float 2^23 + c, and one exact subtraction
 * leaves c. */
/* The 4 int8 codes of word u as floats: q + 128 (the sign bit flipped) placed by a byte permute. */
IG_DEV void ig_wq8_word(unsigned u, float *o) {
    const unsigned v = u ^ 0x80808080u;
#pragma unroll
    for (int b = 0; b < 4; b++) o[b] = __uint_as_float(__byte_perm(v, 0x4b000000u, 0x7540u | (unsigned)b)) - 8388736.0f;
}
/* The 8 uint4 codes of word u as floats (nibble j is element j). */
IG_DEV void ig_wq4_word(unsigned u, float *o) {
#pragma unroll
    for (int b = 0; b < 8; b++) o[b] = __uint_as_float(((u >> (4 * b)) & 15u) | 0x4b000000u) - 8388608.0f;
}
/* f8r: the 4 e4m3 codes of word u as floats of value e4m3(q) 2^-120 (sign to bit 31, exponent and
 * mantissa to bits 20..26: e4m3's bias 7 read with f32's 127), exact, subnormal codes included. */
IG_DEV void ig_wf8_word(unsigned u, float *o) {
#pragma unroll
    for (int b = 0; b < 4; b++) {
        const unsigned c = u >> (8 * b);
        o[b] = __uint_as_float(((c & 0x80u) << 24) | ((c & 0x7fu) << 20));
    }
}
/* What multiplies an f8r row's sum (before its scale): 2^120 for the f32 / bf16 codes, 2^8 for the
 * half ones (ig_wf8_pair in f16 packages). */
#define IG_WF8_UNIT_F32 1.329227995784916e36f /* 2^120 */
#define IG_WF8_UNIT_H (IG_F16 ? 256.0f : IG_WF8_UNIT_F32)
/* f8r: bytes 0 and 2 of x as an mma register of the package's 16-bit type: bf16 e4m3 2^-120 (the
 * float's top half), half e4m3 2^-8 (kv_quant.cuh's ig_kvq_e4m3_h2), exact. */
IG_DEV unsigned ig_wf8_b02(unsigned x) {
#if IG_F16
    return ig_kvq_e4m3_h2(x);
#else
    return ((x << 8) & 0x80008000u) | ((x << 4) & 0x07f007f0u);
#endif
}
/* ig_wq8_frag's pairs (c, c+2) in .x and (c+1, c+3) in .y of f8r codes */
IG_DEV uint2 ig_wf8_frag(unsigned u) { return make_uint2(ig_wf8_b02(u), ig_wf8_b02(u >> 8)); }
/* ig_wq8_frag_adj's adjacent pairs (c, c+1) in .x and (c+2, c+3) in .y of f8r codes */
IG_DEV uint2 ig_wf8_frag_adj(unsigned u) {
    return make_uint2(ig_wf8_b02(__byte_perm(u, 0u, 0x4140u)), ig_wf8_b02(__byte_perm(u, 0u, 0x4342u)));
}
/* The same pairs as halves e4m3 / 2^8 whatever the package's type (stream.cuh's f16 mma) */
IG_DEV uint2 ig_wf8_adj_h(unsigned u) {
    return make_uint2(ig_kvq_e4m3_h2(__byte_perm(u, 0u, 0x4140u)), ig_kvq_e4m3_h2(__byte_perm(u, 0u, 0x4342u)));
}

/* (a & m) | c in one lop3 (the compiler makes two of it, its constants being immediates). */
IG_DEV unsigned ig_andor(unsigned a, unsigned m, unsigned c) {
#if defined(IG_CUDA_EMUL)
    return (a & m) | c;
#else
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(m), "r"(c));
    return d;
#endif
}
/* mma A fragments from 4 int8 codes (word u, columns c..c+3), in the package's 16-bit type, exact
 * and without cvt: the pairs (c, c+2) in .x and (c+1, c+3) in .y (the B operand must pair x the
 * same way: ig_wq_xpairs). bf16: a byte with low bits m and sign bit s gives 0x4300 | m = 128 + m
 * and 0xc300 | s << 7 = -(128 + 128 s), summed by one bf16x2 fma into m - 128 s, the code. half:
 * the byte with its sign bit flipped (q + 128) in the mantissa of 1024 (0x6400), minus 1152. sm_80+. */
#if !defined(IG_CUDA_EMUL) && !IG_F16
/* bf16 packages: the int8 codes in bytes 0 and 2 of v as a bf16 pair (the fma trick below) */
IG_DEV unsigned ig_wq8_bf16_b02(unsigned v) {
    unsigned d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;"
        : "=r"(d)
        : "r"(ig_andor(v, 0x007f007fu, 0x43004300u)), "r"(0x3f803f80u), "r"(ig_andor(v, 0x00800080u, 0xc300c300u)));
    return d;
}
#endif
IG_DEV unsigned ig_wq8_pair(unsigned u, int hi) {
    unsigned d;
#if defined(IG_CUDA_EMUL) /* the host emulation (tests/cuda_host/cuda_emul.h): the same values */
    const int b = hi ? 1 : 0;
    d = (unsigned)ig_f32_to_h((float)(signed char)(u >> (8 * b))) | (unsigned)ig_f32_to_h((float)(signed char)(u >> (8 * b + 16))) << 16;
#elif IG_F16
    const unsigned a = __byte_perm(u ^ 0x80808080u, 0x64646464u, hi ? 0x4341u : 0x4240u);
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0x3c003c00u), "r"(0xe480e480u));
#else
    d = ig_wq8_bf16_b02(hi ? u >> 8 : u);
#endif
    return d;
}
IG_DEV uint2 ig_wq8_frag(unsigned u) { return make_uint2(ig_wq8_pair(u, 0), ig_wq8_pair(u, 1)); }
/* The same codes paired as they lie, (c, c+1) in .x and (c+2, c+3) in .y, so that x pairs as it
 * lies in memory (no byte permutes on the B side): one byte permute more a pair than
 * ig_wq8_frag's (c, c+2) pairs, against two fewer per mma for x (qgemm.cu's stages, which reuse a
 * fragment for up to 8 token tiles). */
IG_DEV unsigned ig_wq8_adj(unsigned u, int i) {
    unsigned d;
#if defined(IG_CUDA_EMUL)
    d = (unsigned)ig_f32_to_h((float)(signed char)(u >> (16 * i))) | (unsigned)ig_f32_to_h((float)(signed char)(u >> (16 * i + 8))) << 16;
#elif IG_F16
    const unsigned a = __byte_perm(u ^ 0x80808080u, 0x64646464u, i ? 0x4342u : 0x4140u);
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0x3c003c00u), "r"(0xe480e480u));
#else
    d = ig_wq8_bf16_b02(__byte_perm(u, 0u, i ? 0x4342u : 0x4140u)); /* bytes 2i, 2i + 1 at 0 and 2 */
#endif
    return d;
}
IG_DEV uint2 ig_wq8_frag_adj(unsigned u) { return make_uint2(ig_wq8_adj(u, 0), ig_wq8_adj(u, 1)); }
/* x pairs (c, c+1), (c+2, c+3) as (c, c+2), (c+1, c+3), the order of ig_wq8_frag */
IG_DEV uint2 ig_wq_xpairs(unsigned a, unsigned b) { return make_uint2(__byte_perm(a, b, 0x5410), __byte_perm(a, b, 0x7632)); }

/* A q4r (scale, min) word as ig_wq4_adj takes it, in both package types: s2 = (scale, scale),
 * m2 = (min, min), f16x2. */
IG_DEV void ig_wq4_sm2h(unsigned sm, unsigned *s2, unsigned *m2) {
    *s2 = __byte_perm(sm, 0u, 0x1010), *m2 = __byte_perm(sm, 0u, 0x3232);
}
/* mma A fragment pair of adjacent columns (c + 2i, c + 2i + 1), the two nibbles of byte i (0..3) of
 * word u (columns c..c+7; u4 = u >> 4, shared by the word's four pairs), so that x pairs as it lies
 * in memory (no byte permutes on the B side). The weight scale q + min in f16 arithmetic: the
 * nibbles in the mantissa of 1024 (one byte permute, one lop3), one f16x2 fma takes 1024 off
 * (exact), one more applies scale and min (s2 = (scale, scale), m2 = (min, min) as ig_wq4_sm2h
 * gives them: the f16 values stored, exact) with one rounding to f16; bf16 packages round that
 * once more to bf16 (via f32: two cvt and one pack), which moves a weight by at most one bf16 ulp
 * from dequant.cu's single rounding (a per-weight error, not one shared by a group: rounding scale
 * and min to bf16 first, so that one bf16x2 fma would do, moved every weight of a group the same way,
 * and the GPU golden a16w4 33-token steps were 3.0-3.4e-2 of max |logit| off their decoded twins).
 * Replaced ig_wq4_pair (pairs (c + j, c + j + 4) in f32, one cvt a pair, a byte permute per x pair):
 * gemv_tc.cu's q4r at T = 8 11.1 / 11.2 -> 9.8 / 10.2 us (H100). sm_80+. */
IG_DEV unsigned ig_wq4_adj(unsigned u, unsigned u4, int i, unsigned s2, unsigned m2) {
    unsigned d;
#if defined(IG_CUDA_EMUL)
    (void)u4;
    const float s = ig_f16_to_f32((unsigned short)(s2 & 0xffffu)), m = ig_f16_to_f32((unsigned short)(m2 & 0xffffu));
    const unsigned short lo = ig_f32_to_f16(fmaf((float)((u >> (8 * i)) & 15u), s, m));
    const unsigned short hi = ig_f32_to_f16(fmaf((float)((u >> (8 * i + 4)) & 15u), s, m));
    d = IG_F16 ? (unsigned)lo | (unsigned)hi << 16
               : (unsigned)ig_f32_to_bf16(ig_f16_to_f32(lo)) | (unsigned)ig_f32_to_bf16(ig_f16_to_f32(hi)) << 16;
#else
    /* bytes 0, 1 <- byte i of u (low nibble: column c + 2i), bytes 2, 3 <- byte i of u4 (column c + 2i + 1) */
    const unsigned sel = (unsigned)i * 0x11u + (4u + (unsigned)i) * 0x1100u;
    const unsigned v = ig_andor(__byte_perm(u, u4, sel),
                                0x000f000fu, 0x64006400u);
    unsigned h;
    asm("{ .reg .b32 t;\n fma.rn.f16x2 t, %1, %2, %3;\n fma.rn.f16x2 %0, t, %4, %5; }"
        : "=r"(h) : "r"(v), "r"(0x3c003c00u), "r"(0xe400e400u), "r"(s2), "r"(m2));
#if IG_F16
    d = h;
#else
    asm("{ .reg .b16 l, u; .reg .f32 a, b;\n mov.b32 {l, u}, %1;\n cvt.f32.f16 a, l;\n cvt.f32.f16 b, u;\n"
        " cvt.rn.bf16x2.f32 %0, b, a; }"
        : "=r"(d) : "r"(h));
#endif
#endif
    return d;
}
/* Word i (0..3) of a 16-byte vector. */
IG_DEV unsigned ig_wq_w(uint4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

/* Row r's f32 scale (q8r). */
template <int K>
IG_DEV float ig_wq8_scale(const unsigned char *w, int r) {
    return __ldg((const float *)(w + (size_t)r * (K + 16) + K));
}
/* Row r's (scale, min) of the group holding column k (q4r; rows of RB bytes). */
template <int K, int RB, int G>
IG_DEV float2 ig_wq4_sm(const unsigned char *w, int r, int k) {
    const unsigned u = __ldg((const unsigned *)(w + (size_t)r * RB + K / 2 + 4 * (k / G)));
    return make_float2(ig_f16_to_f32((unsigned short)(u & 0xffffu)), ig_f16_to_f32((unsigned short)(u >> 16))); /* IEEE half */
}

#endif /* IG_CUDA_WQ_CUH */
