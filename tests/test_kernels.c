/* test_kernels.c — checks the CPU kernel templates (templates/cpu/) against plain C references
 * written here: double accumulation, reading the logical (unpacked) weights, with bf16 inputs
 * rounded the same way on both sides. Each template is instantiated with several parameter sets:
 * odd T (1, 7, 37, 200), N not a multiple of 16, K chunking, f32 and bf16 on each operand, all
 * three matmul epilogues with and without bias, GQA ratios 1/3/4/8, head dims 16/48/64, pages
 * crossed by two sequences at different positions in one batch (prefill chunk + decode mixed).
 *
 * The same file is built for whatever ISA the compiler flags select (AVX-512 BF16, AVX2+FMA or
 * scalar); run it under each (see the report / tests/ notes). Returns nonzero and names the case
 * on any mismatch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---------------- instances ---------------- */
#define MM_NAME mm_bb_store
#define MM_K 96
#define MM_N 1000
#define MM_WBF16 1
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME mm_ff_store
#define MM_K 48
#define MM_N 1000
#define MM_WBF16 0
#define MM_XBF16 0
#define MM_BIAS 0
#include "matmul.c"

#define MM_NAME mm_bf_acc
#define MM_K 128
#define MM_N 200
#define MM_WBF16 1
#define MM_XBF16 0
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME mm_fb_acc
#define MM_K 96
#define MM_N 40
#define MM_WBF16 0
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME mm_bb_swiglu_b
#define MM_K 128
#define MM_N 96
#define MM_WBF16 1
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME mm_ff_swiglu
#define MM_K 48
#define MM_N 64
#define MM_WBF16 0
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"

/* K chunking (3 chunks of 128 k-pairs) and row blocks (MM_TB 24) with T up to 200. */
#define MM_NAME mm_bb_chunk
#define MM_K 640
#define MM_N 72
#define MM_WBF16 1
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_TB 24
#include "matmul.c"

/* an odd number of k-pairs (51) in odd chunks (25, 25, 1): BFMMLA's tail of one k-pair, and its
 * chunks after the first adding into the tile */
#define MM_NAME mm_bb_oddk
#define MM_K 102
#define MM_N 40
#define MM_WBF16 1
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#define MM_KC 25
#include "matmul.c"

#define MM_NAME mm_ff_chunk
#define MM_K 520
#define MM_N 33
#define MM_WBF16 0
#define MM_XBF16 0
#define MM_KC 16
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

/* y with a row stride wider than N */
#define MM_NAME mm_bb_ldy
#define MM_K 64
#define MM_N 48
#define MM_LDY 80
#include "matmul.c"

#define RN_NAME rn_f
#define RN_D 48
#define RN_EPS 1e-5f
#include "rmsnorm.c"
#define RN_NAME rn_b
#define RN_D 1000
#define RN_EPS 1e-6f
#define RN_OBF16 1
#include "rmsnorm.c"

#define EM_NAME em_b
#define EM_D 96
#define EM_WBF16 1
#include "embed.c"
#define EM_NAME em_f
#define EM_D 48
#define EM_WBF16 0
#include "embed.c"

#ifndef TPS /* tokens per KV page (test_kernels_isa.sh also builds 32: kernels that walk a page in blocks of 16) */
#define TPS 16
#endif
/* pages hold 2 layers; the tests use layer 1 (layer_off = one layer's bytes) */
#define ATTN_INST(sfx, h, kv, d, kvb, qkn, ob)                                              \
    enum { sfx##_H = h, sfx##_KV = kv, sfx##_D = d, sfx##_KVB = kvb, sfx##_QKN = qkn, sfx##_OB = ob };
ATTN_INST(A, 4, 4, 16, 0, 0, 0)
ATTN_INST(B, 6, 2, 48, 1, 1, 1)
ATTN_INST(C, 8, 2, 64, 0, 1, 0)
ATTN_INST(D, 8, 1, 64, 1, 0, 0)
ATTN_INST(E, 32, 1, 16, 0, 0, 0) /* MQA with a group of 32: larger than the 16 heads kept in registers */

#define RK_NAME rk_A
#define RK_H 4
#define RK_KV 4
#define RK_D 16
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 4 * TPS * 16 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_A
#define AT_H 4
#define AT_KV 4
#define AT_D 16
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 4 * TPS * 16 * 4)
#define AT_KVBF16 0
#define AT_OBF16 0
#define AT_SCALE 0.25f
#include "attention.c"

#define RK_NAME rk_B
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 48 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 1
#define RK_EPS 1e-6f
#include "rope_kv.c"
#define AT_NAME at_B
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 48 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.14433756729740643f
#include "attention.c"

#define RK_NAME rk_C
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 1
#define RK_EPS 1e-6f
#include "rope_kv.c"
#define AT_NAME at_C
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define AT_KVBF16 0
#define AT_OBF16 0
#define AT_SCALE 0.125f
#include "attention.c"

#define RK_NAME rk_D
#define RK_H 8
#define RK_KV 1
#define RK_D 64
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 1 * TPS * 64 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_D
#define AT_H 8
#define AT_KV 1
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 1 * TPS * 64 * 2)
#define AT_KVBF16 1
#define AT_OBF16 0
#define AT_SCALE 0.125f
#include "attention.c"

#define RK_NAME rk_E
#define RK_H 32
#define RK_KV 1
#define RK_D 16
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 1 * TPS * 16 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_E
#define AT_H 32
#define AT_KV 1
#define AT_D 16
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 1 * TPS * 16 * 4)
#define AT_KVBF16 0
#define AT_OBF16 0
#define AT_SCALE 0.25f
#include "attention.c"

/* quantized KV (kv_quant.h): 8-bit codes with qknorm and GQA, 4-bit codes with MQA */
ATTN_INST(F, 8, 2, 64, 8, 1, 0)
ATTN_INST(G, 6, 1, 48, 4, 0, 1)
#define RK_NAME rk_F
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 8))
#define RK_QKNORM 1
#define RK_EPS 1e-6f
#include "rope_kv.c"
#define AT_NAME at_F
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 8))
#define AT_OBF16 0
#define AT_SCALE 0.125f
#include "attention.c"
#define RK_NAME rk_G
#define RK_H 6
#define RK_KV 1
#define RK_D 48
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 48, 4))
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_G
#define AT_H 6
#define AT_KV 1
#define AT_D 48
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 48, 4))
#define AT_OBF16 1
#define AT_SCALE 0.14433756729740643f
#include "attention.c"
/* sliding windows (AT_WINDOW) over the KV that rk_B / rk_C / rk_G write: windows that start
 * inside a page, for prefill tiles and decode tokens, 4-bit delta keys among them */
#define AT_NAME at_Bw
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 48 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.14433756729740643f
#define AT_WINDOW 20
#include "attention.c"
#define AT_NAME at_Cw
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define AT_KVBF16 0
#define AT_OBF16 0
#define AT_SCALE 0.125f
#define AT_WINDOW 9
#include "attention.c"
#define AT_NAME at_Gw
#define AT_H 6
#define AT_KV 1
#define AT_D 48
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 48, 4))
#define AT_OBF16 1
#define AT_SCALE 0.14433756729740643f
#define AT_WINDOW 13
#include "attention.c"
/* 8-bit codes with a head_dim that is no multiple of 8 (the fused dots' tails) and a group of
 * 20 heads (more than the 16 / 8 the SIMD paths keep in registers) */
ATTN_INST(H, 20, 1, 36, 8, 0, 0)
#define RK_NAME rk_H
#define RK_H 20
#define RK_KV 1
#define RK_D 36
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 36, 8))
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_H
#define AT_H 20
#define AT_KV 1
#define AT_D 36
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 36, 8))
#define AT_OBF16 0
#define AT_SCALE 0.16666666666666666f
#include "attention.c"
/* fp8 (e4m3) codes with qknorm, GQA and a bf16 output */
ATTN_INST(I, 8, 2, 64, IG_KVQ_E4M3, 1, 1)
#define RK_NAME rk_I
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ IG_KVQ_E4M3
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, IG_KVQ_E4M3))
#define RK_QKNORM 1
#define RK_EPS 1e-6f
#include "rope_kv.c"
#define AT_NAME at_I
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ IG_KVQ_E4M3
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, IG_KVQ_E4M3))
#define AT_OBF16 1
#define AT_SCALE 0.125f
#include "attention.c"
/* 4-bit codes with head_dim 64 (the values' integer path, D % 32 == 0), GQA and qknorm; and with
 * a window of 21 starting inside pages (the delta-coded keys' running sum from slot 0) */
ATTN_INST(J, 8, 2, 64, 4, 1, 0)
#define RK_NAME rk_J
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 4))
#define RK_QKNORM 1
#define RK_EPS 1e-6f
#include "rope_kv.c"
#define AT_NAME at_J
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 4))
#define AT_OBF16 0
#define AT_SCALE 0.125f
#include "attention.c"
#define AT_NAME at_Jw
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 4))
#define AT_OBF16 0
#define AT_SCALE 0.125f
#define AT_WINDOW 21
#include "attention.c"
/* 8-bit codes with head_dim % 4 != 0 (the f32 fused dots, not the int16 kernels) */
ATTN_INST(K, 6, 2, 30, 8, 0, 0)
#define RK_NAME rk_K
#define RK_H 6
#define RK_KV 2
#define RK_D 30
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 30, 8))
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_K
#define AT_H 6
#define AT_KV 2
#define AT_D 30
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 30, 8))
#define AT_OBF16 0
#define AT_SCALE 0.18257418583505536f
#include "attention.c"
/* int8 codes with a bf16 output, SmolLM2's group of 3 at head_dim 64: on AVX-512 BF16 the prefill
 * tiles take the codes as bf16 (attention.c's AT_TQ8_); with a window of 21 too */
ATTN_INST(L, 9, 3, 64, 8, 0, 1)
#define RK_NAME rk_L
#define RK_H 9
#define RK_KV 3
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(3, TPS, 64, 8))
#define RK_QKNORM 0
#include "rope_kv.c"
#define AT_NAME at_L
#define AT_H 9
#define AT_KV 3
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(3, TPS, 64, 8))
#define AT_OBF16 1
#define AT_SCALE 0.125f
#include "attention.c"
#define AT_NAME at_Lw
#define AT_H 9
#define AT_KV 3
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(3, TPS, 64, 8))
#define AT_OBF16 1
#define AT_SCALE 0.125f
#define AT_WINDOW 21
#include "attention.c"

/* ---------------- helpers ---------------- */
typedef void (*mm_fn)(int, const void *, const void *, const float *, void *, int);
typedef void (*rk_fn)(int, const float *, const float *, const float *, const float *, float *,
                      uint8_t *, uint64_t, const int32_t *, const int32_t *, const int32_t *, int, int);
typedef void (*at_fn)(int, const float *, const uint8_t *, uint64_t, const int32_t *,
                      const int32_t *, const int32_t *, int, void *, float *, int);

static int g_fail;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float rbf(float f) { return ig_bf16_to_f32(ig_f32_to_bf16(f)); }
static void fill(float *a, size_t n, int bf) {
    for (size_t i = 0; i < n; i++) a[i] = bf ? rbf(frand()) : frand();
}
static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    memset(p, 0, (n + 63) / 64 * 64);
    return p;
}
/* Stores n floats as f32 or bf16 (values are already representable when bf). */
static void *to_type(const float *a, size_t n, int bf) {
    void *p = xalloc(n * (bf ? 2 : 4));
    for (size_t i = 0; i < n; i++) {
        if (bf) ((uint16_t *)p)[i] = ig_f32_to_bf16(a[i]);
        else ((float *)p)[i] = a[i];
    }
    return p;
}
static float get(const void *p, size_t i, int bf) {
    return bf ? ig_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
/* IEEE half -> double, written out here (not the template's) */
static double half(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}
/* e4m3fn code -> double, written out here (not the template's): 1 sign, 4 exponent bits (bias 7),
 * 3 mantissa bits; 0x7f / 0xff NaN */
static double e4m3(uint8_t c) {
    int e = (c >> 3) & 15, m = c & 7;
    double v = (c & 0x7f) == 0x7f ? NAN : e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return c & 0x80 ? -v : v;
}
/* Element i of the K (kv01 0) or V (1) row of kv head h, page slot `slot`, in one layer's part of
 * a page: floats (kvf 0 f32, 1 bf16) or codes (kvf 8, 4, IG_KVQ_E4M3) by the layout kv_quant.h
 * documents. */
static const double kv_pred_a[8] = {1, 15.0 / 16, 7.0 / 8, 3.0 / 4, 5.0 / 8, 1.0 / 2, 1.0 / 4, 0};
static double kv_elem(const uint8_t *base, int KV, int D, int kvf, int kv01, int h, int slot, int i) {
    size_t n = (size_t)KV * TPS, r = (size_t)h * TPS + slot;
    if (kvf < 2) return get(base, (kv01 * n + r) * D + i, kvf);
    size_t rb = (size_t)D * IG_KVQ_BITS(kvf) / 8;
    /* 4-bit keys: slot j holds K_j - a K^_{j-1}, a = {1, 15/16, 7/8, 3/4, 5/8, 1/2, 1/4, 0}[p] for
     * p in bits 4..6 of its zero byte, the zero point in bits 0..3 */
    const int zq = kvf == 4 ? base[2 * n * rb + 4 * n + (kv01 & 1) * n + r] : 0;
    if (kvf == 4 && kv01 == 0 && slot > 0)
        return kv_pred_a[(zq >> 4) & 7] * kv_elem(base, KV, D, kvf, 0, h, slot - 1, i) + kv_elem(base, KV, D, kvf, 2, h, slot, i);
    if (kv01 == 2) kv01 = 0; /* the stored difference itself */
    const uint8_t *c = base + (kv01 * n + r) * rb;
    int q = kvf == 8 ? c[i] : (c[i / 2] >> (4 * (i % 2))) & 15;
    uint16_t sh;
    memcpy(&sh, base + 2 * n * rb + 2 * (kv01 * n + r), 2);
    if (kvf == IG_KVQ_E4M3) return base[2 * n * rb + 4 * n + kv01 * n + r] ? NAN : half(sh) * e4m3(c[i]); /* zero byte 0 */
    return half(sh) * (q - (kvf == 4 ? zq & 15 : (int)base[2 * n * rb + 4 * n + kv01 * n + r]));
}
/* The predictor a of 4-bit key row `slot` (kv_elem), 1 for slot 0. */
static double kv_pred(const uint8_t *base, int KV, int D, int h, int slot) {
    const size_t n = (size_t)KV * TPS, rb = (size_t)D / 2;
    return slot ? kv_pred_a[(base[2 * n * rb + 4 * n + (size_t)h * TPS + slot] >> 4) & 7] : 1.0;
}
/* Packs logical W [N][K] into panels (SPEC.md), rows >= N zero. */
static void *pack(const float *W, int N, int K, int bf) {
    int NP = (N + 15) / 16;
    void *p = xalloc((size_t)NP * 16 * K * (bf ? 2 : 4));
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            int pn = n / 16, j = n % 16;
            if (bf) ((uint16_t *)p)[(size_t)pn * K * 16 + (size_t)(k / 2) * 32 + j * 2 + k % 2] = ig_f32_to_bf16(W[(size_t)n * K + k]);
            else ((float *)p)[(size_t)pn * K * 16 + (size_t)k * 16 + j] = W[(size_t)n * K + k];
        }
    return p;
}
static int check(const char *what, int idx, double got, double ref, double tol) {
    if (!(fabs(got - ref) <= tol)) {
        if (g_fail < 20) fprintf(stderr, "FAIL %s [%d]: got %.8g want %.8g (tol %.3g)\n", what, idx, got, ref, tol);
        g_fail++;
        return 1;
    }
    return 0;
}

/* ---------------- matmul ---------------- */
static void test_mm(const char *name, mm_fn fn, int K, int N, int wb, int xb, int bias, int epi,
                    int ybf, int ldy, int T, int nth) {
    char what[128];
    snprintf(what, sizeof what, "%s T=%d nth=%d", name, T, nth);
    int I = N / 2, NO = epi == 2 ? I : N, NP = (N + 15) / 16;
    float *W = xalloc((size_t)N * K * 4), *X = xalloc((size_t)T * K * 4), *B = xalloc((size_t)NP * 16 * 4);
    fill(W, (size_t)N * K, wb);
    fill(X, (size_t)T * K, xb);
    fill(B, N, 0);
    /* for SwiGLU the packed rows interleave per 16: row 32q+j = gate 16q+j, 32q+16+j = up */
    float *Wp = xalloc((size_t)N * K * 4);
    for (int n = 0; n < N; n++) {
        int src = n;
        if (epi == 2) src = (n % 32 < 16) ? (n / 32) * 16 + n % 32 : I + (n / 32) * 16 + n % 32 - 16;
        memcpy(Wp + (size_t)n * K, W + (size_t)src * K, K * 4);
    }
    float *Bp = xalloc((size_t)NP * 16 * 4);
    for (int n = 0; n < N; n++) {
        int src = n;
        if (epi == 2) src = (n % 32 < 16) ? (n / 32) * 16 + n % 32 : I + (n / 32) * 16 + n % 32 - 16;
        Bp[n] = B[src];
    }
    void *wp = pack(Wp, N, K, wb), *xp = to_type(X, (size_t)T * K, xb);
    size_t ysz = (size_t)T * ldy;
    float *Y0 = xalloc(ysz * 4);
    fill(Y0, ysz, 0);
    void *y = xalloc(ysz * 4);
    memcpy(y, Y0, ysz * 4);
    if (epi == 2 && ybf) {
        for (size_t i = 0; i < ysz; i++) ((uint16_t *)y)[i] = 0x7fc0; /* NaN: catches gaps */
    }
    fn(T, xp, wp, bias ? Bp : NULL, y, nth);
    for (int t = 0; t < T; t++) {
        for (int o = 0; o < NO; o++) {
            double s[2] = {0, 0}, a[2] = {0, 0};
            int rows[2] = {o, I + o};
            for (int h = 0; h < (epi == 2 ? 2 : 1); h++) {
                for (int k = 0; k < K; k++) {
                    double v = (double)X[(size_t)t * K + k] * W[(size_t)rows[h] * K + k];
                    s[h] += v, a[h] += fabs(v);
                }
                if (bias) s[h] += B[rows[h]];
            }
            double ref, tol;
            if (epi == 2) {
                double g = s[0], u = s[1], sg = g / (1 + exp(-g));
                ref = sg * u;
                tol = 1e-5 * (a[0] * fabs(u) * 1.2 + a[1] * fabs(sg) + fabs(ref)) + 1e-6;
                if (ybf) tol += fabs(ref) * (1.0 / 256);
            } else {
                ref = s[0] + (epi == 1 ? Y0[(size_t)t * ldy + o] : 0);
                tol = 1e-5 * a[0] + 1e-6;
            }
            double got = get(y, (size_t)t * ldy + o, epi == 2 && ybf);
            if (check(what, t * NO + o, got, ref, tol)) goto done;
        }
        for (int o = NO; o < ldy; o++) /* columns past the outputs are untouched */
            if (epi != 2 || !ybf)
                if (check(what, -1 - o, get(y, (size_t)t * ldy + o, 0), Y0[(size_t)t * ldy + o], 0)) goto done;
    }
done:
    free(W), free(X), free(B), free(Wp), free(Bp), free(wp), free(xp), free(Y0), free(y);
}

/* ---------------- rmsnorm, embed ---------------- */
static void test_rn(const char *name, void (*fn)(int, const float *, const float *, void *, int),
                    int D, float eps, int obf, int T) {
    char what[128];
    snprintf(what, sizeof what, "%s T=%d", name, T);
    float *x = xalloc((size_t)T * D * 4), *g = xalloc(D * 4);
    fill(x, (size_t)T * D, 0);
    fill(g, D, 0);
    void *o = xalloc((size_t)T * D * 4);
    fn(T, x, g, o, 2);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[t * D + i] * x[t * D + i];
        double s = 1 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) {
            double ref = x[t * D + i] * s * g[i];
            double tol = 3e-6 * fabs(ref) + 1e-7 + (obf ? fabs(ref) / 256 : 0);
            if (check(what, t * D + i, get(o, (size_t)t * D + i, obf), ref, tol)) goto done;
        }
    }
done:
    free(x), free(g), free(o);
}

static void test_em(const char *name, void (*fn)(int, const int32_t *, const void *, float *, int),
                    int D, int wb) {
    const int V = 1000, T = 37;
    float *E = xalloc((size_t)V * D * 4), *x = xalloc((size_t)T * D * 4);
    fill(E, (size_t)V * D, wb);
    void *ep = pack(E, V, D, wb);
    int32_t ids[37];
    for (int t = 0; t < T; t++) ids[t] = (t * 331 + 7) % V;
    ids[0] = V - 1, ids[1] = 0;
    fn(T, ids, ep, x, 2);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < D; k++)
            if (check(name, t * D + k, x[t * D + k], E[(size_t)ids[t] * D + k], 0)) goto done;
done:
    free(E), free(x), free(ep);
}

/* ---------------- rope_kv + attention ---------------- */
/* Two sequences over three steps: step 1 prefills seq0 0..29 and seq1 0..4 (T=35), step 2 mixes
 * seq0's decode token 30 with seq1's prefill chunk 5..40 (T=37), step 3 decodes seq1 at 41
 * (T=1). Page ids are scattered; the tests run on layer 1 of 2. */
/* y = R x (tr 0) or R^T x (tr 1) for the rotation of quantized KV rows, as kv_quant.h defines it:
 * R = H S, S = diag(-1 where bit (7i + i/32) mod 32 of 0x6a09e667 is set), H the Hadamard matrix
 * (-1)^popcount(i & j) / sqrt(B) on blocks of B = the largest power of two dividing d. */
static void rot_ref(double *x, int d, int tr) {
    int B = d & -d;
    double y[512];
    for (int i = 0; i < d; i++) {
        double a = 0;
        for (int j = (i / B) * B; j < (i / B + 1) * B; j++) {
            double h = (__builtin_popcount((unsigned)((i % B) & (j % B))) & 1 ? -1.0 : 1.0) / sqrt(B);
            double sg = (0x6a09e667u >> ((7 * (tr ? i : j) + (tr ? i : j) / 32) & 31)) & 1 ? -1.0 : 1.0;
            a += h * sg * x[j];
        }
        y[i] = a;
    }
    memcpy(x, y, sizeof(double) * d);
}

/* kvb: the KV format: 0 f32, 1 bf16, 8 / 4 quantized codes, rows rotated (kv_quant.h) */
static void test_attn(const char *name, rk_fn rk, at_fn at, int H, int KV, int D, int kvb, int qkn,
                      int ob, float scale, int win) {
    const int MAXP = 4, NPAGES = 9, W = (H + 2 * KV) * D, es = kvb == 1 ? 2 : 4;
    const uint64_t layer_bytes = kvb >= 2 ? IG_KVQ_LAYER_BYTES(KV, TPS, D, kvb) : 2ull * KV * TPS * D * es,
                   page_bytes = 2 * layer_bytes;
    const int32_t ptab[2 * 4] = {7, 2, 5, 0, 3, 8, 1, 6};
    uint8_t *pool = xalloc(NPAGES * page_bytes);
    for (size_t i = 0; i < NPAGES * page_bytes; i++) pool[i] = 0xff; /* NaN everywhere unwritten */
    float *qn = xalloc(D * 4), *kn = xalloc(D * 4);
    for (int i = 0; i < D; i++) qn[i] = 1 + 0.5f * frand(), kn[i] = 1 + 0.5f * frand();
    int32_t pos[64], seq[64];
    int steps[3][2][2] = {{{0, 30}, {0, 5}}, {{30, 31}, {5, 41}}, {{0, 0}, {41, 42}}};
    for (int st = 0; st < 3; st++) {
        int T = 0;
        for (int s = 0; s < 2; s++)
            for (int p = steps[st][s][0]; p < steps[st][s][1]; p++) pos[T] = p, seq[T] = s, T++;
        char what[160];
        float *qkv = xalloc((size_t)T * W * 4), *cs = xalloc((size_t)T * D * 4), *qo = xalloc((size_t)T * H * D * 4);
        fill(qkv, (size_t)T * W, 0);
        for (size_t i = 0; i < (size_t)T * W; i++) qkv[i] *= 2;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D / 2; i++) {
                double a = pos[t] * pow(10000.0, -2.0 * i / D);
                cs[t * D + 2 * i] = (float)cos(a), cs[t * D + 2 * i + 1] = (float)sin(a);
            }
        rk(T, qkv, cs, qn, kn, qo, pool, layer_bytes, pos, seq, ptab, MAXP, 2);
        /* rope_kv reference (double), checked on q_out and on the pool */
        snprintf(what, sizeof what, "%s rope_kv step %d", name, st);
        for (int t = 0; t < T; t++) {
            uint8_t *base = pool + ptab[seq[t] * MAXP + pos[t] / TPS] * page_bytes + layer_bytes;
            for (int h = 0; h < H + 2 * KV; h++) {
                const float *v = qkv + (size_t)t * W + h * D;
                double r[512], s = 1;
                const float *g = h < H ? qn : kn;
                if (qkn && h < H + KV) {
                    double ss = 0;
                    for (int i = 0; i < D; i++) ss += (double)v[i] * v[i];
                    s = 1 / sqrt(ss / D + 1e-6);
                }
                for (int i = 0; i < D / 2; i++) {
                    double a = v[i] * s, b = v[i + D / 2] * s;
                    if (qkn && h < H + KV) a *= g[i], b *= g[i + D / 2];
                    if (h < H + KV) {
                        double c = cs[t * D + 2 * i], sn = cs[t * D + 2 * i + 1];
                        r[i] = a * c - b * sn, r[i + D / 2] = b * c + a * sn;
                    } else r[i] = v[i], r[i + D / 2] = v[i + D / 2];
                }
                if (kvb >= 2 && h < H + 2 * KV) rot_ref(r, D, 0); /* q, k and v rotated */
                /* quantized rows: within half a step of the row's range [min(r, 0), max(r, 0)];
                 * 4-bit keys past slot 0: of the range of the difference to the previous key times
                 * the row's predictor */
                double lo = 0, hi = 0, prev[512] = {0};
                if (kvb == 4 && h >= H && h < H + KV && pos[t] % TPS) {
                    const double a = kv_pred(base, KV, D, h - H, pos[t] % TPS);
                    for (int i = 0; i < D; i++) prev[i] = a * kv_elem(base, KV, D, 4, 0, h - H, pos[t] % TPS - 1, i);
                }
                for (int i = 0; i < D; i++) lo = fmin(lo, r[i] - prev[i]), hi = fmax(hi, r[i] - prev[i]);
                /* fp8: half an e4m3 step at the element (2^-4 relative, 2^-10 s in the subnormals,
                 * s = amax / 448) */
                const double amax = fmax(hi, -lo), fp8 = kvb == IG_KVQ_E4M3;
                double qstep = kvb >= 2 && !fp8 ? (hi - lo) / (kvb == 8 ? 255 : 15) : 0;
                for (int i = 0; i < D; i++) {
                    double got;
                    int slot = pos[t] % TPS;
                    if (h < H) got = qo[(size_t)t * H * D + h * D + i];
                    else got = kv_elem(base, KV, D, kvb, h >= H + KV, h < H + KV ? h - H : h - H - KV, slot, i);
                    double tol = 1e-5 * (1 + fabs(r[i])) + (h >= H && kvb == 1 ? fabs(r[i]) / 256 : 0) +
                                 (h >= H ? 0.5 * qstep * 1.002 : 0) +
                                 (h >= H && fp8 ? (fabs(r[i]) / 16 + amax / 448 / 1024) * 1.002 : 0);
                    if (check(what, (t * (H + 2 * KV) + h) * D + i, got, r[i], tol)) goto next;
                }
            }
        }
    next:;
        /* attention reference: reads q_out and the K/V the pool holds (double softmax) */
        void *out = xalloc((size_t)T * H * D * 4);
        at(T, qo, pool, layer_bytes, pos, seq, ptab, MAXP, out, NULL, 2);
        snprintf(what, sizeof what, "%s attention step %d", name, st);
        int G = H / KV;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                int kh = h / G, n = pos[t] + 1, j0 = win > 0 && n > win ? n - win : 0; /* keys j0 .. n-1 */
                double sc[64], mx = -1e300, l = 0, o[512] = {0}, sa = 0, vmax = 0, ka = 0;
                for (int j = j0; j < n; j++) {
                    uint8_t *base = pool + ptab[seq[t] * MAXP + j / TPS] * page_bytes + layer_bytes;
                    double s = 0, a = 0, k1 = 0;
                    for (int i = 0; i < D; i++) {
                        const double k = kv_elem(base, KV, D, kvb, 0, kh, j % TPS, i), x = (double)qo[(size_t)t * H * D + h * D + i] * k;
                        s += x, a += x * x, k1 += fabs(k);
                    }
                    sc[j] = s * scale, sa = fmax(sa, sqrt(a) * scale), ka = fmax(ka, k1);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = j0; j < n; j++) {
                    uint8_t *base = pool + ptab[seq[t] * MAXP + j / TPS] * page_bytes + layer_bytes;
                    double p = exp(sc[j] - mx);
                    l += p;
                    for (int i = 0; i < D; i++) {
                        const double v = kv_elem(base, KV, D, kvb, 1, kh, j % TPS, i);
                        o[i] += p * v, vmax = fmax(vmax, fabs(v));
                    }
                }
                for (int i = 0; i < D; i++) o[i] /= l;
                if (kvb >= 2) rot_ref(o, D, 1); /* the output rotated back */
                /* prefill tiles on bf16 dot products (bf16 KV, AVX-512 BF16, head_dim % 8 == 0):
                 * queries and probabilities rounded to bf16 (relative errors within 2^-9, of random
                 * sign) move a score by about 2^-9 |q o k|_2 scale (sa: the largest over the keys;
                 * 4x that as the bound), a weight by e^(2 that) (1 + 2^-9); observed within 0.2 of it */
                double tile = 0;
#if defined(IG_AVX512) || defined(IG_AVX2)
                const int in_run = (t > 0 && seq[t - 1] == seq[t] && pos[t - 1] + 1 == pos[t]) ||
                                   (t + 1 < T && seq[t + 1] == seq[t] && pos[t + 1] == pos[t] + 1);
#if defined(IG_AVX512BF16)
                if (kvb == 1 && D % 8 == 0 && in_run) tile = (4 * sa / 512 + 1.0 / 256) * vmax * 1.01;
                /* int8 KV with a bf16 output: the same, the weights p s_j rounded against codes c
                 * with s_j c <= s_j 255 <= 2 vmax (the row's range), so twice the value term */
                if (kvb == 8 && ob && D % 8 == 0 && in_run) tile = (4 * sa / 512 + 2.0 / 256) * vmax * 1.01;
#endif
                /* int8 / uint4 KV decode on int16 codes (ig_attn_scores_q16, ig_attn_pv_q16): the scaled
                 * query rounded to steps of qx = max |q scale| / qmax moves score j by at most
                 * qx / 2 sum_i |k_ji| (ka: the largest over the keys), the weights by e^(2 that);
                 * with D % 32 == 0 (AVX2: 16) each weight p_j s_j is rounded to 1/65534 of its page's largest,
                 * s_j |c - z| <= 2 vmax, so at most 16 x 2 vmax / 65534 over all pages (sum of the
                 * pages' largest p <= l); uint4's delta-coded keys: k is the reconstructed key */
                if ((kvb == 8 || kvb == 4) && D % 4 == 0 && !in_run) {
                    double qa = 0;
                    for (int i = 0; i < D; i++) qa = fmax(qa, fabs((double)qo[(size_t)t * H * D + h * D + i] * scale));
                    const double qmax = fmin(32767, floor(2147483647.0 / (255.0 * D)));
#if defined(IG_AVX512)
                    const int pv16 = D % 32 == 0;
#else
                    const int pv16 = D % 16 == 0;
#endif
                    tile = (exp(2 * qa / qmax / 2 * ka) - 1) * vmax * 1.01 + (pv16 ? 32 * vmax / 65534 : 0);
                }
#endif
                for (int i = 0; i < D; i++) {
                    double ref = o[i], tol = 2e-5 + (ob ? fabs(ref) / 256 : 0) + tile;
                    if (check(what, (t * H + h) * D + i, get(out, (size_t)t * H * D + h * D + i, ob), ref, tol)) goto next2;
                }
            }
    next2:
        free(qkv), free(cs), free(qo), free(out);
    }
    free(pool), free(qn), free(kn);
}

/* The KV a sequence's tokens leave in its pages does not depend on how they were split into
 * steps: 40 tokens written at once (2 threads), one by one, and in chunks 0..2, 3..20, 21..39
 * give the same bytes (kv_quant.h: delta-coded keys read their page's earlier slots). */
static void test_kv_steps(const char *name, rk_fn rk, int H, int KV, int D, uint64_t layer_bytes) {
    enum { N = 40, MAXP = 4 };
    const int W = (H + 2 * KV) * D;
    const int32_t ptab[MAXP] = {2, 0, 3, 1};
    float *qkv = xalloc((size_t)N * W * 4), *cs = xalloc((size_t)N * D * 4), *qo = xalloc((size_t)N * H * D * 4);
    fill(qkv, (size_t)N * W, 0);
    int32_t pos[N], seq[N] = {0};
    for (int t = 0; t < N; t++) {
        pos[t] = t;
        for (int i = 0; i < D / 2; i++) {
            double a = t * pow(10000.0, -2.0 * i / D);
            cs[t * D + 2 * i] = (float)cos(a), cs[t * D + 2 * i + 1] = (float)sin(a);
        }
    }
    uint8_t *pools[3];
    const int cuts[3][4] = {{0, N, N, N}, {0, 0, 0, 0}, {0, 3, 21, N}};
    for (int v = 0; v < 3; v++) {
        pools[v] = xalloc(MAXP * 2 * layer_bytes); /* the instances' pages hold 2 layers */
        int t0 = 0;
        for (int c = 1; t0 < N; c++) {
            int t1 = v == 1 ? t0 + 1 : cuts[v][c];
            rk(t1 - t0, qkv + (size_t)t0 * W, cs + (size_t)t0 * D, NULL, NULL, qo + (size_t)t0 * H * D, pools[v], 0,
               pos + t0, seq + t0, ptab, MAXP, 2);
            t0 = t1;
        }
    }
    for (int v = 1; v < 3; v++)
        if (memcmp(pools[0], pools[v], MAXP * 2 * layer_bytes)) {
            fprintf(stderr, "FAIL %s: the KV pages written in steps (%s) differ from one step's\n", name,
                    v == 1 ? "one token each" : "chunks 3, 18, 19");
            g_fail++;
        }
    for (int v = 0; v < 3; v++) free(pools[v]);
    free(qkv), free(cs), free(qo);
}

/* bf16 rounding: ties to even, carries into the exponent, NaN kept, on the scalar and the
 * vector (ig_store_row) paths alike. */
static void test_bf16(void) {
    const uint32_t in[8] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f7fffffu,
                            0x7f800001u, 0xbf80c000u, 0x00008000u, 0x7f7fffffu};
    const uint16_t want[8] = {0x3f80, 0x3f82, 0x3f80, 0x3f80, 0, 0xbf81, 0x0000, 0x7f80};
    float f[40];
    uint16_t o[40];
    for (int i = 0; i < 40; i++) memcpy(&f[i], &in[i % 8], 4);
    ig_store_row(o, f, 1, 40);
    for (int i = 0; i < 40; i++) {
        uint16_t s = ig_f32_to_bf16(f[i]);
        int ok = (i % 8 == 4) ? ((s & 0x7fff) > 0x7f80 && (o[i] & 0x7fff) > 0x7f80) : (s == want[i % 8] && o[i] == want[i % 8]);
        if (!ok) {
            fprintf(stderr, "FAIL bf16 rounding of 0x%08x: scalar 0x%04x vector 0x%04x\n", in[i % 8], s, o[i]);
            g_fail++;
        }
    }
}

/* ig_kvq_e4m3_row (vectors on AVX-512 / AVX2) against the scalar ig_e4m3_to_f32 for every code,
 * at offsets that put codes in the vector body and in the scalar tail. */
static void test_e4m3_row(void) {
    uint8_t c[256 + 5];
    float o[256 + 5];
    for (int i = 0; i < 261; i++) c[i] = (uint8_t)(i * 151 + 7);
    for (int off = 0; off < 5; off++) {
        const float s = off ? 0.37f * off : 1.0f;
        ig_kvq_e4m3_row(c + off, 256, s, o);
        for (int i = 0; i < 256; i++) {
            const float want = ig_e4m3_to_f32(c[off + i]) * s;
            if (!(o[i] == want || (o[i] != o[i] && want != want)) || signbit(o[i]) != signbit(want)) {
                fprintf(stderr, "FAIL e4m3 row code 0x%02x scale %g: got %g want %g\n", c[off + i], s, o[i], want);
                g_fail++;
                return;
            }
        }
    }
}

int main(void) {
#if defined(IG_AMX)
    if (ig_amx_request()) {
        printf("the kernel refused this process AMX tile data (arch_prctl); the AMX build cannot run\n");
        return 1;
    }
#endif
    test_bf16();
    test_e4m3_row();
    const int Ts[] = {1, 7, 37};
    for (int i = 0; i < 3; i++) {
        int T = Ts[i];
        for (int nth = 1; nth <= 3; nth += 2) {
            test_mm("mm bf16xbf16 store+bias K96 N1000", mm_bb_store, 96, 1000, 1, 1, 1, 0, 0, 1000, T, nth);
            test_mm("mm f32xf32 store K48 N1000", mm_ff_store, 48, 1000, 0, 0, 0, 0, 0, 1000, T, nth);
            test_mm("mm bf16w f32x acc+bias K128 N200", mm_bf_acc, 128, 200, 1, 0, 1, 1, 0, 200, T, nth);
            test_mm("mm f32w bf16x acc K96 N40", mm_fb_acc, 96, 40, 0, 1, 0, 1, 0, 40, T, nth);
            test_mm("mm bf16 swiglu->bf16 +bias K128 I48", mm_bb_swiglu_b, 128, 96, 1, 1, 1, 2, 1, 48, T, nth);
            test_mm("mm f32 swiglu K48 I32", mm_ff_swiglu, 48, 64, 0, 0, 0, 2, 0, 32, T, nth);
            test_mm("mm bf16 K640 chunked TB24", mm_bb_chunk, 640, 72, 1, 1, 1, 0, 0, 72, T, nth);
            test_mm("mm bf16 K102 KC25 acc+bias", mm_bb_oddk, 102, 40, 1, 1, 1, 1, 0, 40, T, nth);
            test_mm("mm f32 K520 N33 KC16 acc", mm_ff_chunk, 520, 33, 0, 0, 0, 1, 0, 33, T, nth);
            test_mm("mm bf16 LDY80", mm_bb_ldy, 64, 48, 1, 1, 0, 0, 0, 80, T, nth);
        }
        test_rn("rmsnorm D48 f32", rn_f, 48, 1e-5f, 0, T);
        test_rn("rmsnorm D1000 bf16", rn_b, 1000, 1e-6f, 1, T);
    }
    test_mm("mm bf16 K640 chunked TB24", mm_bb_chunk, 640, 72, 1, 1, 1, 0, 0, 72, 200, 2);
    test_mm("mm f32 swiglu K48 I32", mm_ff_swiglu, 48, 64, 0, 0, 0, 2, 0, 32, 200, 2);
    test_em("embed bf16 D96", em_b, 96, 1);
    test_em("embed f32 D48", em_f, 48, 0);
    test_attn("attn H6 KV2 D48 bf16kv window 20", rk_B, at_Bw, B_H, B_KV, B_D, B_KVB, B_QKN, B_OB, 0.14433756729740643f, 20);
    test_attn("attn H8 KV2 D64 f32 window 9", rk_C, at_Cw, C_H, C_KV, C_D, C_KVB, C_QKN, C_OB, 0.125f, 9);
    test_attn("attn H6 KV1 D48 uint4kv window 13", rk_G, at_Gw, G_H, G_KV, G_D, G_KVB, G_QKN, G_OB, 0.14433756729740643f, 13);
    test_attn("attn H4 KV4 D16 f32", rk_A, at_A, A_H, A_KV, A_D, A_KVB, A_QKN, A_OB, 0.25f, 0);
    test_attn("attn H6 KV2 D48 bf16kv qknorm bf16out", rk_B, at_B, B_H, B_KV, B_D, B_KVB, B_QKN, B_OB, 0.14433756729740643f, 0);
    test_attn("attn H8 KV2 D64 f32 qknorm", rk_C, at_C, C_H, C_KV, C_D, C_KVB, C_QKN, C_OB, 0.125f, 0);
    test_attn("attn H8 KV1 D64 bf16kv", rk_D, at_D, D_H, D_KV, D_D, D_KVB, D_QKN, D_OB, 0.125f, 0);
    test_attn("attn H32 KV1 D16 f32 (group 32)", rk_E, at_E, E_H, E_KV, E_D, E_KVB, E_QKN, E_OB, 0.25f, 0);
    test_attn("attn H8 KV2 D64 int8kv qknorm", rk_F, at_F, F_H, F_KV, F_D, F_KVB, F_QKN, F_OB, 0.125f, 0);
    test_attn("attn H6 KV1 D48 uint4kv bf16out", rk_G, at_G, G_H, G_KV, G_D, G_KVB, G_QKN, G_OB, 0.14433756729740643f, 0);
    test_attn("attn H20 KV1 D36 int8kv", rk_H, at_H, H_H, H_KV, H_D, H_KVB, H_QKN, H_OB, 0.16666666666666666f, 0);
    test_attn("attn H8 KV2 D64 fp8kv qknorm bf16out", rk_I, at_I, I_H, I_KV, I_D, I_KVB, I_QKN, I_OB, 0.125f, 0);
    test_attn("attn H6 KV2 D30 int8kv", rk_K, at_K, K_H, K_KV, K_D, K_KVB, K_QKN, K_OB, 0.18257418583505536f, 0);
    test_attn("attn H8 KV2 D64 uint4kv qknorm", rk_J, at_J, J_H, J_KV, J_D, J_KVB, J_QKN, J_OB, 0.125f, 0);
    test_attn("attn H8 KV2 D64 uint4kv qknorm window 21", rk_J, at_Jw, J_H, J_KV, J_D, J_KVB, J_QKN, J_OB, 0.125f, 21);
    test_attn("attn H9 KV3 D64 int8kv bf16out", rk_L, at_L, L_H, L_KV, L_D, L_KVB, L_QKN, L_OB, 0.125f, 0);
    test_attn("attn H9 KV3 D64 int8kv bf16out window 21", rk_L, at_Lw, L_H, L_KV, L_D, L_KVB, L_QKN, L_OB, 0.125f, 21);
    test_kv_steps("fp8kv", rk_I, I_H, I_KV, I_D, IG_KVQ_LAYER_BYTES(I_KV, TPS, I_D, IG_KVQ_E4M3));
    test_kv_steps("uint4kv", rk_G, G_H, G_KV, G_D, IG_KVQ_LAYER_BYTES(G_KV, TPS, G_D, 4));
    test_kv_steps("int8kv", rk_H, H_H, H_KV, H_D, IG_KVQ_LAYER_BYTES(H_KV, TPS, H_D, 8));
    const char *isa = IG_ISA_NAME;
    if (g_fail) {
        fprintf(stderr, "test_kernels (%s): %d mismatches\n", isa, g_fail);
        return 1;
    }
    printf("test_kernels (%s): all passed\n", isa);
    return 0;
}
