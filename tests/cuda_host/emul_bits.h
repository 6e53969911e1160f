/* emul_bits.h — the CUDA bit intrinsics the host stand-ins share (cuda_emul.h, and the one-warp
 * shim of test_kv_quant_warp.cpp): prmt's byte permute, the float / uint reinterpretations, and
 * common.cuh's ig_exp2. Needs <string.h> and <math.h>. */
#ifndef IG_EMUL_BITS_H
#define IG_EMUL_BITS_H
/* PTX prmt's default mode: byte i of the result is byte (s >> 4i) & 7 of {b, a} (sign mode unused) */
static unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
    const unsigned long long v = (unsigned long long)b << 32 | a;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(v >> (8 * ((s >> (4 * i)) & 7u)) & 0xffu) << (8 * i);
    return r;
}
static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
/* common.cuh's ig_exp2 (ex2.approx.ftz): subnormal results are 0 */
static inline float ig_exp2(float x) {
    const float r = exp2f(x);
    return r < 1.17549435e-38f ? 0.0f : r;
}

#endif
