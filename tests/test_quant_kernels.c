/* test_quant_kernels.c — checks the CPU templates on quantized weight panels (matmul.c with
 * MM_WQ, embed.c with EM_WQ; layouts in templates/cpu/quant.h) against plain C references.
 *
 * The weights are drawn already on the quantization grid (int8 q times a per-row scale, or a
 * per-row, per-group one for q8g; uint4 q times a per-row, per-group scale plus a min; for q4k
 * d sc q - dmin mn with 8-bit codes under a per-superblock f16 pair), packed here from the layout the header documents
 * (not with the compiler's packer), and the reference is a double-precision matmul over the
 * logical weights: any difference is the kernels' (or the layout contract's), not quantization
 * error. Cases: decode (T = 1) and prefill (T = 3, 37, 200: row blocks, K chunks of 256),
 * N not a multiple of 16 or 32 (a lone last panel), K not a multiple of the group (a short last
 * group), groups 32/64/128, f32 and bf16 activations, the store / residual-add / SwiGLU epilogues.
 * q4z / q8z (GPTQ / AWQ): integer codes and zero points (the zero may exceed the codes' range, as
 * GPTQ v1's stored zero + 1 can), f16 scales, one group per whole row included.
 * Built per ISA by tests/test_quant_isa.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MM_NAME q8_store
#define MM_K 600
#define MM_N 200
#define MM_WQ 8
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q8_acc_f
#define MM_K 96
#define MM_N 40
#define MM_WQ 8
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q4_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 4
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q4_64_acc
#define MM_K 96
#define MM_N 200
#define MM_WQ 4
#define MM_WG 64
#define MM_XBF16 0
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q4_128_swiglu
#define MM_K 320
#define MM_N 96
#define MM_WQ 4
#define MM_WG 128
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME q8_swiglu_f
#define MM_K 64
#define MM_N 64
#define MM_WQ 8
#define MM_XBF16 0
#define MM_BIAS 1
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"

#define MM_NAME q8g_32_store
#define MM_K 608
#define MM_N 72
#define MM_WQ 9
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q8g_64_swiglu_f
#define MM_K 96
#define MM_N 192
#define MM_WQ 9
#define MM_WG 64
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"

#define MM_NAME q4k_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 5
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q4k_64_acc_f
#define MM_K 96
#define MM_N 200
#define MM_WQ 5
#define MM_WG 64
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q4k_128_swiglu
#define MM_K 1100
#define MM_N 96
#define MM_WQ 5
#define MM_WG 128
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME q6k_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 6
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q6k_64_acc_f
#define MM_K 96
#define MM_N 200
#define MM_WQ 6
#define MM_WG 64
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q8a_amx_acc /* K % 32 == 0, bf16 x: AMX builds take tiles from 32 rows */
#define MM_K 512
#define MM_N 72
#define MM_WQ 10
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q8a_store
#define MM_K 600
#define MM_N 200
#define MM_WQ 10
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q8a_swiglu_f
#define MM_K 98
#define MM_N 64
#define MM_WQ 10
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"
#define MM_NAME q6s_16_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 13
#define MM_WG 16
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"
#define MM_NAME q6s_16_acc_f
#define MM_K 256
#define MM_N 200
#define MM_WQ 13
#define MM_WG 16
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"
#define MM_NAME q4z_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 11
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"
#define MM_NAME q4z_128_swiglu_f
#define MM_K 352
#define MM_N 96
#define MM_WQ 11
#define MM_WG 128
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"
#define MM_NAME q8z_64_acc
#define MM_K 600
#define MM_N 200
#define MM_WQ 12
#define MM_WG 64
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"
#define MM_NAME q8z_352_store_f
#define MM_K 352
#define MM_N 40
#define MM_WQ 12
#define MM_WG 352
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q8a_acc_f
#define MM_K 1030
#define MM_N 40
#define MM_WQ 10
#define MM_XBF16 0
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define EM_NAME em_q8a
#define EM_D 96
#define EM_WQ 10
#include "embed.c"

#define EM_NAME em_q6s
#define EM_D 96
#define EM_WQ 13
#define EM_WG 16
#include "embed.c"

#define EM_NAME em_q4z
#define EM_D 96
#define EM_WQ 11
#define EM_WG 32
#include "embed.c"

#define EM_NAME em_q8z
#define EM_D 96
#define EM_WQ 12
#define EM_WG 64
#include "embed.c"

#define EM_NAME em_q6k
#define EM_D 96
#define EM_WQ 6
#define EM_WG 32
#include "embed.c"

#define EM_NAME em_q4k
#define EM_D 96
#define EM_WQ 5
#define EM_WG 32
#include "embed.c"

#define EM_NAME em_q8g
#define EM_D 96
#define EM_WQ 9
#define EM_WG 32
#include "embed.c"

#define EM_NAME em_q8
#define EM_D 96
#define EM_WQ 8
#include "embed.c"

#define EM_NAME em_q4
#define EM_D 96
#define EM_WQ 4
#define EM_WG 64
#include "embed.c"

/* the integer-activation a16 formats: q4i (a16w4: q4k's codes in k-octets, int8 activations per
 * 32 columns) and q8i (a16w8: q8a's codes, int16 activations per 256 columns) */
#define MM_NAME q4i_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 14
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

/* K % 32 == 0 with bf16 activations: AMX builds take tiles for 32+ rows (2.5 superblocks of g32;
 * g128 with a short last group of 32, two superblocks, SwiGLU into bf16) */
#define MM_NAME q4i_amx_32_store
#define MM_K 640
#define MM_N 200
#define MM_WQ 14
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q4i_amx_128_swiglu
#define MM_K 1056
#define MM_N 96
#define MM_WQ 14
#define MM_WG 128
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME q4i_64_acc_f
#define MM_K 100
#define MM_N 200
#define MM_WQ 14
#define MM_WG 64
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q4i_128_swiglu
#define MM_K 1100
#define MM_N 96
#define MM_WQ 14
#define MM_WG 128
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME q8i_store
#define MM_K 600
#define MM_N 200
#define MM_WQ 15
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

/* K % 32 == 0 with bf16 activations: on AMX builds, steps of 32+ rows take the tile path (a K
 * of two and a half chunks, an odd panel count; SwiGLU into bf16) */
#define MM_NAME q8i_amx_store
#define MM_K 640
#define MM_N 200
#define MM_WQ 15
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q8i_amx_swiglu
#define MM_K 256
#define MM_N 96
#define MM_WQ 15
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define MM_NAME q8i_acc_f
#define MM_K 1030
#define MM_N 40
#define MM_WQ 15
#define MM_XBF16 0
#define MM_BIAS 1
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q8i_swiglu_f
#define MM_K 98
#define MM_N 64
#define MM_WQ 15
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"

#define EM_NAME em_q4i
#define EM_D 96
#define EM_WQ 14
#define EM_WG 64
#include "embed.c"

#define MM_NAME q6i_32_store
#define MM_K 600
#define MM_N 72
#define MM_WQ 16
#define MM_WG 32
#define MM_XBF16 1
#define MM_BIAS 1
#define MM_EPI MM_EPI_STORE
#include "matmul.c"

#define MM_NAME q6i_32_acc_f
#define MM_K 100
#define MM_N 200
#define MM_WQ 16
#define MM_WG 32
#define MM_XBF16 0
#define MM_BIAS 0
#define MM_EPI MM_EPI_ACC
#include "matmul.c"

#define MM_NAME q6i_64_swiglu
#define MM_K 1100
#define MM_N 96
#define MM_WQ 16
#define MM_WG 64
#define MM_XBF16 1
#define MM_BIAS 0
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"

#define EM_NAME em_q6i
#define EM_D 96
#define EM_WQ 16
#define EM_WG 32
#include "embed.c"

#define EM_NAME em_q8i
#define EM_D 96
#define EM_WQ 15
#include "embed.c"

typedef void (*mm_fn)(int, const void *, const void *, const float *, void *, int);

/* moe.c with quantized experts: hidden 128, 6 experts of 64 (top-2), each over two matmul instances
 * of its format (gate/up with SwiGLU, down), as codegen/cg_c.c instantiates them */
#define MM_NAME moe_gu_q4i
#define MM_K 128
#define MM_N 128
#define MM_WQ 14
#define MM_WG 32
#define MM_XBF16 1
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"
#define MM_NAME moe_dn_q8i
#define MM_K 64
#define MM_N 128
#define MM_WQ 15
#define MM_XBF16 1
#include "matmul.c"
#define MO_NAME moe_q4i_q8i
#define MO_D 128
#define MO_E 6
#define MO_TOPK 2
#define MO_I 64
#define MO_NORM 1
#define MO_XBF16 1
#define MO_WBF16 1
#define MO_WQ 14
#define MO_WG 32
#define MO_DN_WQ 15
#define MO_GU moe_gu_q4i
#define MO_DN moe_dn_q8i
#include "moe.c"
/* q4k gate/up in groups of 64 with f32 rows (the group sums' GEMV), q8c down */
#define MM_NAME moe_gu_q4k
#define MM_K 128
#define MM_N 128
#define MM_WQ 5
#define MM_WG 64
#define MM_XBF16 0
#define MM_EPI MM_EPI_SWIGLU
#include "matmul.c"
#define MM_NAME moe_dn_q8c
#define MM_K 64
#define MM_N 128
#define MM_WQ 8
#define MM_XBF16 0
#include "matmul.c"
#define MO_NAME moe_q4k_q8c
#define MO_D 128
#define MO_E 6
#define MO_TOPK 2
#define MO_I 64
#define MO_NORM 0
#define MO_XBF16 0
#define MO_WBF16 0
#define MO_WQ 5
#define MO_WG 64
#define MO_DN_WQ 8
#define MO_GU moe_gu_q4k
#define MO_DN moe_dn_q8c
#include "moe.c"
/* a8w8 (q8a) gate/up and down, the shared-expert form */
#define MM_NAME moe_gu_q8a
#define MM_K 128
#define MM_N 128
#define MM_WQ 10
#define MM_XBF16 1
#define MM_EPI MM_EPI_SWIGLU
#define MM_YBF16 1
#include "matmul.c"
#define MM_NAME moe_dn_q8a
#define MM_K 64
#define MM_N 128
#define MM_WQ 10
#define MM_XBF16 1
#include "matmul.c"
#define MO_NAME moe_shared_q8a
#define MO_SHARED 1
#define MO_D 128
#define MO_E 1
#define MO_TOPK 1
#define MO_I 64
#define MO_XBF16 1
#define MO_WBF16 1
#define MO_WQ 10
#define MO_DN_WQ 10
#define MO_GU moe_gu_q8a
#define MO_DN moe_dn_q8a
#include "moe.c"
typedef void (*moe_fn)(int, const float *, const float *, const void *, const void *, float *, uint8_t *, int);

static int g_fail;
static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static int irand(int n) { return (int)((frand() + 1.0f) * 0.5f * n) % n; }
static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    memset(p, 0, (n + 63) / 64 * 64);
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

/* v (a normal number whose significand fits 11 bits) as IEEE half bits at p. */
static void put_f16(uint8_t *p, float v) {
    if (v == 0.0f) {
        memset(p, 0, 2);
        return;
    }
    int e;
    float fr = frexpf(fabsf(v), &e); /* |v| = fr 2^e, fr in [0.5, 1) */
    uint16_t h = (uint16_t)((v < 0 ? 0x8000 : 0) | (unsigned)(e - 1 + 15) << 10 | (unsigned)lrintf((2 * fr - 1) * 1024));
    if (ldexpf(1.0f + (float)(h & 1023) / 1024.0f, e - 1) != fabsf(v)) { fprintf(stderr, "put_f16: %g not exact\n", v); exit(2); }
    memcpy(p, &h, 2);
}

/* Logical W [N][K] on the grid of format wq (group G) and its panels, per quant.h's layout. */
static void *make_w(int wq, int N, int K, int G, float *W) {
    int NP = (N + 15) / 16, ng = G ? (K + G - 1) / G : 1;
    int KG = G ? K % G : 0; /* the short last group's columns */
    size_t gb1 = wq == 9 ? 32 + 16 * (size_t)G : 64 + 8 * (size_t)G, gbl = wq == 9 ? 32 + 16 * (size_t)KG : 64 + 8 * (size_t)KG;
    if (wq == 12) gb1 = 64 + 16 * (size_t)G, gbl = 64 + 16 * (size_t)KG;
    const int cb = wq == 6 || wq == 13 || wq == 16 ? 12 : 8; /* q4k / q6k / q6s / q6i: bytes per column of a group block */
    if (wq == 5 || wq == 6 || wq == 13) gb1 = 32 + cb * (size_t)G, gbl = 32 + cb * (size_t)KG;
    if (wq == 14) gb1 = 32 + 8 * (size_t)G, gbl = 32 + 64 * (size_t)((KG + 7) / 8); /* q4i: whole octets of 64 bytes */
    if (wq == 16) gb1 = 32 + 12 * (size_t)G, gbl = 32 + 192 * (size_t)((KG + 15) / 16); /* q6i: whole sixteens of 192 bytes */
    size_t per = wq == 8 ? 64 + (size_t)16 * K : wq == 10 || wq == 15 ? 64 + (size_t)64 * ((K + 3) / 4) : (size_t)(K / G) * gb1 + (KG ? gbl : 0);
    if (wq == 5 || wq == 6 || wq == 13 || wq == 14 || wq == 16) per += 64 * (size_t)((ng + 7) / 8); /* one f16 pair (d, dmin) per row and 8 groups */
    uint8_t *p = xalloc(NP * per);
    for (int n = 0; n < N; n++) {
        uint8_t *panel = p + (size_t)(n / 16) * per;
        int j = n % 16;
        if (wq == 8 || wq == 10 || wq == 15) { /* q8a, q8i: q[k/4][j][k%4] */
            float s = 0.01f + 0.02f * (frand() + 1.0f);
            memcpy(panel + 4 * j, &s, 4);
            for (int k = 0; k < K; k++) {
                int q = irand(255) - 127;
                ((int8_t *)(panel + 64))[wq == 8 ? (size_t)k * 16 + j : (size_t)(k / 4) * 64 + j * 4 + k % 4] = (int8_t)q;
                W[(size_t)n * K + k] = s * (float)q;
            }
            continue;
        }
        for (int g = 0; g < ng && wq == 9; g++) { /* q8g: f16 scale[16], int8 q[G][16] per group */
            uint8_t *gb = panel + (size_t)g * gb1;
            float s = (float)(512 + irand(1024)) / 65536.0f; /* exact in f16 */
            put_f16(gb + 2 * j, s);
            for (int k = g * G; k < K && k < g * G + G; k++) {
                int q = irand(255) - 127;
                ((int8_t *)(gb + 32))[(size_t)(k - g * G) * 16 + j] = (int8_t)q;
                W[(size_t)n * K + k] = s * (float)q;
            }
        }
        for (int g = 0; g < ng && (wq == 5 || wq == 6 || wq == 13 || wq == 14 || wq == 16); g++) { /* q4k / q6k / q6s: superblock header, then sc[16], mn[16], columns */
            uint8_t *hb = panel + (size_t)(g / 8) * (64 + 8 * gb1), *gb = hb + 64 + (size_t)(g % 8) * gb1;
            if (g % 8 == 0) { /* d, dmin in [2^-14, 2^-13): normal halves with 11 significant bits (q6s: dmin = 32 d) */
                float dd = (float)(1024 + irand(1024)) / 16777216.0f;
                put_f16(hb + 2 * j, dd);
                put_f16(hb + 32 + 2 * j, wq == 13 ? 32.0f * dd : (float)(1024 + irand(1024)) / 16777216.0f);
            }
            uint16_t hd, hm;
            memcpy(&hd, hb + 2 * j, 2), memcpy(&hm, hb + 32 + 2 * j, 2);
            double d = ldexp(1024 + (hd & 1023), (hd >> 10) - 25), dm = ldexp(1024 + (hm & 1023), (hm >> 10) - 25);
            int sc = 40 + irand(wq == 6 || wq == 16 ? 88 : 216), mn = irand(256); /* d sc q stays exact in f32 (24 bits) */
            if (wq == 13) sc = mn = irand(256) - 128; /* q6s: signed, sc = mn (Q6_K's d sc (q - 32)) */
            gb[j] = (uint8_t)(int8_t)sc, gb[16 + j] = (uint8_t)(int8_t)mn;
            for (int k = g * G; k < K && k < g * G + G; k++) {
                int q = irand(wq == 6 || wq == 13 || wq == 16 ? 64 : 16);
                uint8_t *c = gb + 32 + (size_t)(k - g * G) * cb, *b = c + (j & 7);
                if (wq == 14) { /* q4i: octet i / 8 of 64 bytes, byte 4j + i % 4, columns 4..7 high */
                    int i = k - g * G;
                    b = gb + 32 + (size_t)(i / 8) * 64 + 4 * j + i % 4;
                    *b = (uint8_t)(i % 8 < 4 ? (*b & 0xf0) | q : (*b & 0x0f) | (q << 4));
                } else if (wq == 16) { /* q6i: sixteen i / 16 of 192 bytes: octets of nibbles as q4i's, then the pairs */
                    int i = k - g * G;
                    uint8_t *sx = gb + 32 + (size_t)(i / 16) * 192;
                    b = sx + (size_t)(i % 16 / 8) * 64 + 4 * j + i % 4;
                    *b = (uint8_t)(i % 8 < 4 ? (*b & 0xf0) | (q & 15) : (*b & 0x0f) | ((q & 15) << 4));
                    sx[128 + 4 * j + i % 4] |= (uint8_t)((q >> 4) << (2 * (i % 16 / 4))); /* column 4b + i % 4 at bits 2b */
                } else
                *b = (uint8_t)(j < 8 ? (*b & 0xf0) | (q & 15) : (*b & 0x0f) | ((q & 15) << 4));
                if (wq == 6 || wq == 13) c[8 + j / 4] |= (uint8_t)((q >> 4) << (2 * (j % 4))); /* bits 2j of the word */
                W[(size_t)n * K + k] = (float)(d * sc * q - dm * mn);
            }
        }
        for (int g = 0; g < ng && (wq == 11 || wq == 12); g++) {
            /* f16 scale[16], f16 zero[16], then nibbles (q4z) or int8 codes - 128 (q8z, zero - 128 too) */
            uint8_t *gb = panel + (size_t)g * gb1;
            float s = (float)(820 + irand(820)) / 16384.0f;
            int z = wq == 11 ? irand(17) : irand(257); /* 0 .. 16 / 0 .. 256 */
            put_f16(gb + 2 * j, s);
            if (wq == 11) put_f16(gb + 32 + 2 * j, (float)z);
            else put_f16(gb + 32 + 2 * j, (float)(z - 128));
            for (int k = g * G; k < K && k < g * G + G; k++) {
                int q = irand(wq == 11 ? 16 : 256);
                if (wq == 12) {
                    ((int8_t *)(gb + 64))[(size_t)(k - g * G) * 16 + j] = (int8_t)(q - 128);
                } else {
                    uint8_t *b = gb + 64 + (size_t)(k - g * G) * 8 + (j & 7);
                    *b = (uint8_t)(j < 8 ? (*b & 0xf0) | q : (*b & 0x0f) | (q << 4));
                }
                W[(size_t)n * K + k] = s * (float)(q - z);
            }
        }
        for (int g = 0; g < ng && wq == 4; g++) {
            uint8_t *gb = panel + (size_t)g * gb1;
            /* f16 scale[16], f16 min[16], nibbles; values exact in f16 (integers over 2^14 / 2^11) */
            float s = (float)(820 + irand(820)) / 16384.0f, m = -8.0f * s + (float)(irand(400) - 200) / 2048.0f;
            m = (float)lrintf(m * 2048.0f) / 2048.0f;
            put_f16(gb + 2 * j, s);
            put_f16(gb + 32 + 2 * j, m);
            for (int k = g * G; k < K && k < g * G + G; k++) {
                int q = irand(16);
                uint8_t *b = gb + 64 + (size_t)(k - g * G) * 8 + (j & 7);
                *b = (uint8_t)(j < 8 ? (*b & 0xf0) | q : (*b & 0x0f) | (q << 4));
                W[(size_t)n * K + k] = m + s * (float)q;
            }
        }
    }
    return p;
}

static void test_mm(const char *name, mm_fn fn, int wq, int G, int K, int N, int xb, int bias, int epi, int ybf, int T) {
    char what[128];
    snprintf(what, sizeof what, "%s T=%d", name, T);
    int I = N / 2, NO = epi == 2 ? I : N, ldy = NO;
    float *W = xalloc((size_t)N * K * 4), *X = xalloc((size_t)T * K * 4), *B = xalloc((size_t)(N + 16) * 4);
    void *wp = make_w(wq, N, K, G, W); /* packed rows: for SwiGLU, row 32q+j is gate 16q+j, 32q+16+j is up */
    for (int n = 0; n < N; n++) B[n] = 0.5f * frand();
    for (size_t i = 0; i < (size_t)T * K; i++) X[i] = xb ? ig_bf16_to_f32(ig_f32_to_bf16(frand())) : frand();
    void *xp = xalloc((size_t)T * K * 4);
    for (size_t i = 0; i < (size_t)T * K; i++) {
        if (xb) ((uint16_t *)xp)[i] = ig_f32_to_bf16(X[i]);
        else ((float *)xp)[i] = X[i];
    }
    /* integer activations (a8w8 q8a, a16w4 q4i: int8 per 32 columns; a16w8 q8i: int16 per 256): the
     * tight reference sees each block of a row as its codes round(x L / max|x|) times max|x| / L
     * (L = 127, 32767), as quant.h documents; the unquantized row X0 is kept for a second check
     * whose bound is the rounding's: sum_k |w_k| (max|x| / L) / 2 */
    const int AG = wq == 15 ? 256 : 32, xint = wq == 10 || wq == 14 || wq == 15 || wq == 16;
    const float L = wq == 15 ? 32767.0f : 127.0f;
    float *X0 = xalloc((size_t)T * K * 4), *H = xalloc((size_t)T * K * 4); /* H: half a quantization step */
    memcpy(X0, X, (size_t)T * K * 4);
#if defined(IG_AMX)
    /* AMX builds run q8i / q8a / q4i steps of 32+ rows of bf16 x (K % 32 == 0) on tiles: the rows as they
     * are (the tight reference takes X unquantized), q4i's weights m + s q rounded to bf16 (a
     * relative 2^-9 each: the tolerance adds sum |w x| / 512), q8i's / q8a's codes exact, f32 sums */
    const int tiles = (wq == 15 || wq == 14 || wq == 10) && xb && K % 32 == 0 && T >= 32;
#else
    const int tiles = 0;
#endif
    const double rel = tiles && wq == 14 ? 2e-5 + 1.0 / 512 : 2e-5; /* the tight check's bound per sum |w x| */
    for (int t = 0; t < T && xint; t++)
        for (int k0 = 0; k0 < K; k0 += AG) {
            float amax = 0.0f, *xr = X + (size_t)t * K;
            for (int k = k0; k < K && k < k0 + AG; k++) amax = fmaxf(amax, fabsf(xr[k]));
            float inv = L / amax;
            for (int k = k0; k < K && k < k0 + AG; k++) {
                if (!tiles) xr[k] = (float)((double)lrintf(xr[k] * inv) * (amax / L));
                H[(size_t)t * K + k] = 0.5f * amax / L;
            }
        }
    size_t ysz = (size_t)T * ldy;
    float *Y0 = xalloc(ysz * 4);
    for (size_t i = 0; i < ysz; i++) Y0[i] = frand();
    void *y = xalloc(ysz * 4);
    memcpy(y, Y0, ysz * 4);
    fn(T, xp, wp, bias ? B : NULL, y, 2);
    if (xint && T > 1 && !tiles) { /* integer activations: a row's result is the same alone as among T (bit for bit) */
        const size_t yes = ybf ? 2 : 4, xes = xb ? 2 : 4;
        void *y1 = xalloc((size_t)ldy * 4);
        for (int t = 0; t < T; t++) {
            memcpy(y1, (char *)Y0 + (size_t)t * ldy * 4, (size_t)ldy * 4); /* ACC: the same residual row */
            if (ybf) memset(y1, 0, (size_t)ldy * 4);
            fn(1, (const char *)xp + (size_t)t * K * xes, wp, bias ? B : NULL, y1, 1);
            if (memcmp(y1, (const char *)y + (size_t)t * ldy * yes, (size_t)NO * yes)) {
                fprintf(stderr, "FAIL %s: row %d alone differs from the same row among %d\n", what, t, T);
                g_fail++;
                break;
            }
        }
        free(y1);
    }
    for (int t = 0; t < T; t++)
        for (int o = 0; o < NO; o++) {
            int rows[2] = {o, o};
            if (epi == 2) rows[0] = (o / 16) * 32 + o % 16, rows[1] = rows[0] + 16;
            double s[2] = {0, 0}, a[2] = {0, 0}, s0[2] = {0, 0}, e[2] = {0, 0};
            for (int h = 0; h < (epi == 2 ? 2 : 1); h++) {
                for (int k = 0; k < K; k++) {
                    double w = W[(size_t)rows[h] * K + k], v = (double)X[(size_t)t * K + k] * w;
                    s[h] += v, a[h] += fabs(v);
                    s0[h] += (double)X0[(size_t)t * K + k] * w, e[h] += fabs(w) * H[(size_t)t * K + k];
                }
                if (bias) s[h] += B[rows[h]], s0[h] += B[rows[h]];
            }
            if (xint && epi != 2) { /* against the unquantized activations, within the rounding's bound */
                double got0 = ((float *)y)[(size_t)t * ldy + o] - (epi == 1 ? Y0[(size_t)t * ldy + o] : 0);
                if (check(what, t * NO + o, got0, s0[0], e[0] * 1.001 + 2e-5 * a[0] + 1e-6)) goto done;
            }
            double ref, tol, got;
            if (epi == 2) {
                double sg = s[0] / (1 + exp(-s[0]));
                ref = sg * s[1];
                tol = rel * (a[0] * fabs(s[1]) * 1.2 + a[1] * fabs(sg) + fabs(ref)) + 1e-6;
                if (ybf) tol += fabs(ref) * (1.0 / 256);
                got = ybf ? ig_bf16_to_f32(((uint16_t *)y)[(size_t)t * ldy + o]) : ((float *)y)[(size_t)t * ldy + o];
            } else {
                ref = s[0] + (epi == 1 ? Y0[(size_t)t * ldy + o] : 0);
                tol = rel * a[0] + 1e-6;
                got = ((float *)y)[(size_t)t * ldy + o];
            }
            if (check(what, t * NO + o, got, ref, tol)) goto done;
        }
done:
    free(W), free(X), free(X0), free(H), free(B), free(wp), free(xp), free(Y0), free(y);
}

/* The MoE block `fn` (hidden D = 128, E experts of I = 64, top-K; shared: the gated shared expert)
 * with quantized experts (gate/up format wq group G, down dwq group DG, made by make_w: the stacked
 * experts are ordinary panels) against a composition made here: the router's softmax and top-k in
 * double (tokens whose k-th and next logits are within 1e-4 are skipped: f32 may order them either
 * way), then for each selected expert its own gate/up and down matmul instances (gu, dn: checked by
 * test_mm) on that expert's panels at the offset the layout gives, weighted and summed. Steps of
 * T <= 8 take moe.c's pair path, longer ones the expert-grouped GEMMs; the scratch is exactly the
 * documented size (ASan builds catch an overrun). */
static void test_moe(const char *name, moe_fn fn, mm_fn gu, mm_fn dn, int wq, int G, int dwq, int DG, int xb, int E, int K,
                     int norm, int shared, int T) {
    enum { D = 128, I = 64 };
    char what[160];
    snprintf(what, sizeof what, "moe %s T=%d", name, T);
    float *Wg = xalloc((size_t)E * 2 * I * D * 4), *Wd = xalloc((size_t)E * D * I * 4);
    uint8_t *wg = make_w(wq, E * 2 * I, D, G, Wg), *wd = make_w(dwq, E * D, I, DG, Wd);
    const size_t gpb = ig_wq_panel_bytes(wq, D, G), dpb = ig_wq_panel_bytes(dwq, I, DG); /* quant.h's panel bytes */
    float *x = xalloc((size_t)T * D * 4), *rt = xalloc((size_t)E * D * 4), *r0 = xalloc((size_t)T * D * 4), *r = xalloc((size_t)T * D * 4);
    for (int i = 0; i < T * D; i++) x[i] = frand(), r0[i] = frand();
    for (int i = 0; i < E * D; i++) rt[i] = 0.3f * frand();
    memcpy(r, r0, (size_t)T * D * 4);
#define MO_PAIR_TMAX 8 /* moe.c's default, which codegen passes too */
    const uint64_t ws_bytes = ((MO_WS_BYTES((uint64_t)T, D, I, E, K) + 63) & ~(uint64_t)63) + MO_PAIR_WS(I, E, K) + MO_PAIR_QWS(D, I, K);
#undef MO_PAIR_TMAX
    uint8_t *ws = malloc(ws_bytes); /* exactly the documented size */
    fn(T, x, rt, wg, wd, r, ws, 2);
    uint8_t *xr = xalloc(D * 4), *h = xalloc(I * 4);
    float *y = xalloc(D * 4);
    int skipped = 0;
    for (int t = 0; t < T; t++) {
        double lg[16], p[16], z = 0, mx = -1e300;
        int sel[8];
        for (int e = 0; e < E; e++) {
            lg[e] = 0;
            for (int i = 0; i < D; i++) lg[e] += (double)x[(size_t)t * D + i] * rt[(size_t)(shared ? 0 : e) * D + i];
            mx = fmax(mx, lg[e]);
        }
        for (int e = 0; e < E; e++) z += (p[e] = exp(lg[e] - mx));
        int tie = 0;
        for (int k = 0; k < K; k++) {
            int b = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int j = 0; j < k; j++) used |= sel[j] == e;
                if (!used && (b < 0 || lg[e] > lg[b])) b = e;
            }
            sel[k] = b;
        }
        for (int e = 0; e < E && K < E; e++) {
            int used = 0;
            for (int j = 0; j < K; j++) used |= sel[j] == e;
            tie |= !used && lg[sel[K - 1]] - lg[e] < 1e-4;
        }
        if (tie) {
            skipped++;
            continue;
        }
        double ksum = 0, ref[128] = {0}, mag[128] = {0};
        for (int k = 0; k < K; k++) ksum += p[sel[k]] / z;
        for (int k = 0; k < K; k++) {
            const int e = sel[k];
            const double w = shared ? 1 / (1 + exp(-lg[0])) : norm ? p[e] / z / ksum : p[e] / z;
            for (int i = 0; i < D; i++) {
                if (xb) ((uint16_t *)xr)[i] = ig_f32_to_bf16(x[(size_t)t * D + i]);
                else ((float *)xr)[i] = x[(size_t)t * D + i];
            }
            gu(1, xr, wg + (size_t)e * (2 * I / 16) * gpb, NULL, h, 1);
            dn(1, h, wd + (size_t)e * (D / 16) * dpb, NULL, y, 1);
            for (int i = 0; i < D; i++) ref[i] += w * y[i], mag[i] += fabs(w * y[i]);
        }
        for (int i = 0; i < D; i++)
            if (check(what, t * D + i, (double)r[(size_t)t * D + i] - r0[(size_t)t * D + i], ref[i], 1e-5 * mag[i] + 1e-5)) goto done;
    }
    if (skipped * 2 > T) {
        fprintf(stderr, "FAIL %s: %d of %d tokens near a router tie\n", what, skipped, T);
        g_fail++;
    }
    /* integer activations: a token's residual is the same bit for bit alone (the pair path) as
     * among T (the grouped GEMMs past MO_PAIR_TMAX), so a sequence recomputed after preemption
     * continues exactly */
    if (T > 1 && (wq == 10 || wq == 14 || wq == 15) && (dwq == 10 || dwq == 14 || dwq == 15)) {
        uint8_t *ws1 = malloc(ws_bytes);
        float *r1 = xalloc(D * 4);
        for (int t = 0; t < T; t++) {
            memcpy(r1, r0 + (size_t)t * D, D * 4);
            fn(1, x + (size_t)t * D, rt, wg, wd, r1, ws1, 1);
            if (memcmp(r1, r + (size_t)t * D, D * 4)) {
                int i = 0;
                while (r1[i] == r[(size_t)t * D + i]) i++;
                fprintf(stderr, "FAIL %s: token %d alone differs from the same token among %d ([%d] %.9g vs %.9g)\n", what,
                        t, T, i, r1[i], r[(size_t)t * D + i]);
                g_fail++;
                break;
            }
        }
        free(ws1), free(r1);
    }
done:
    free(Wg), free(Wd), free(wg), free(wd), free(x), free(rt), free(r0), free(r), free(ws), free(xr), free(h), free(y);
}

static void test_em(const char *name, void (*fn)(int, const int32_t *, const void *, float *, int), int wq, int G) {
    const int V = 1000, D = 96, T = 37;
    float *E = xalloc((size_t)V * D * 4), *x = xalloc((size_t)T * D * 4);
    void *ep = make_w(wq, V, D, G, E);
    int32_t ids[37];
    for (int t = 0; t < T; t++) ids[t] = (t * 331 + 7) % V;
    ids[0] = V - 1, ids[1] = 0;
    fn(T, ids, ep, x, 2);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < D; k++)
            if (check(name, t * D + k, x[t * D + k], E[(size_t)ids[t] * D + k], 1e-6 * fabs(E[(size_t)ids[t] * D + k])))
                goto done;
done:
    free(E), free(x), free(ep);
}

/* --short: T = 1 and 3 only (decode and a small prefill: the emulated SVE runs of
 * tests/test_kernels_aarch64.sh, where the longer prefills take minutes under qemu) */
int main(int argc, char **argv) {
#if defined(IG_AMX)
    if (ig_amx_request()) {
        printf("the kernel refused this process AMX tile data (arch_prctl); the AMX build cannot run\n");
        return 1;
    }
#endif
    static const int Ts[] = {1, 3, 37, 200};
    const size_t nT = argc > 1 && !strcmp(argv[1], "--short") ? 2 : sizeof Ts / sizeof Ts[0];
    for (size_t i = 0; i < nT; i++) {
        int T = Ts[i];
        test_mm("q8 store bf16-x bias", q8_store, 8, 0, 600, 200, 1, 1, 0, 0, T);
        test_mm("q8 acc f32-x", q8_acc_f, 8, 0, 96, 40, 0, 0, 1, 0, T);
        test_mm("q4 g32 store bf16-x", q4_32_store, 4, 32, 600, 72, 1, 0, 0, 0, T);
        test_mm("q4 g64 acc f32-x bias (short last group)", q4_64_acc, 4, 64, 96, 200, 0, 1, 1, 0, T);
        test_mm("q4 g128 swiglu bf16 (short last group)", q4_128_swiglu, 4, 128, 320, 96, 1, 0, 2, 1, T);
        test_mm("q8 swiglu f32 bias", q8_swiglu_f, 8, 0, 64, 64, 0, 1, 2, 0, T);
        test_mm("q8g g32 store bf16-x bias", q8g_32_store, 9, 32, 608, 72, 1, 1, 0, 0, T);
        test_mm("q8g g64 swiglu f32-x (short last group)", q8g_64_swiglu_f, 9, 64, 96, 192, 0, 0, 2, 0, T);
        test_mm("q4k g32 store bf16-x bias (3 superblocks, short last group)", q4k_32_store, 5, 32, 600, 72, 1, 1, 0, 0, T);
        test_mm("q4k g64 acc f32-x (short last group)", q4k_64_acc_f, 5, 64, 96, 200, 0, 0, 1, 0, T);
        test_mm("q4k g128 swiglu bf16 (2 superblocks)", q4k_128_swiglu, 5, 128, 1100, 96, 1, 0, 2, 1, T);
        test_mm("q6k g32 store bf16-x bias (3 superblocks, short last group)", q6k_32_store, 6, 32, 600, 72, 1, 1, 0, 0, T);
        test_mm("q6k g64 acc f32-x (short last group)", q6k_64_acc_f, 6, 64, 96, 200, 0, 0, 1, 0, T);
        test_mm("q8a acc bf16-x bias K512 (AMX from 32 rows)", q8a_amx_acc, 10, 0, 512, 72, 1, 1, 1, 0, T);
        test_mm("q8a store bf16-x bias", q8a_store, 10, 0, 600, 200, 1, 1, 0, 0, T);
        test_mm("q8a swiglu f32-x (K % 4 = 2)", q8a_swiglu_f, 10, 0, 98, 64, 0, 0, 2, 0, T);
        test_mm("q8a acc f32-x bias (K % 4 = 2)", q8a_acc_f, 10, 0, 1030, 40, 0, 1, 1, 0, T);
        test_mm("q6s g16 store bf16-x bias (5 superblocks, short last group)", q6s_16_store, 13, 16, 600, 72, 1, 1, 0, 0, T);
        test_mm("q6s g16 acc f32-x", q6s_16_acc_f, 13, 16, 256, 200, 0, 0, 1, 0, T);
        test_mm("q4z g32 store bf16-x bias (short last group)", q4z_32_store, 11, 32, 600, 72, 1, 1, 0, 0, T);
        test_mm("q4z g128 swiglu f32-x (short last group)", q4z_128_swiglu_f, 11, 128, 352, 96, 0, 0, 2, 0, T);
        test_mm("q8z g64 acc bf16-x bias (short last group)", q8z_64_acc, 12, 64, 600, 200, 1, 1, 1, 0, T);
        test_mm("q8z per row (G = K) store f32-x", q8z_352_store_f, 12, 352, 352, 40, 0, 0, 0, 0, T);
        test_mm("q4i g32 store bf16-x bias (3 superblocks, short last group)", q4i_32_store, 14, 32, 600, 72, 1, 1, 0, 0, T);
        test_mm("q4i g32 store bf16-x bias K640 (AMX from 32 rows)", q4i_amx_32_store, 14, 32, 640, 200, 1, 1, 0, 0, T);
        test_mm("q4i g128 swiglu bf16 K1056 (AMX from 32 rows, short last group)", q4i_amx_128_swiglu, 14, 128, 1056, 96, 1, 0, 2, 1, T);
        test_mm("q4i g64 acc f32-x (short last group of 36: a partial octet)", q4i_64_acc_f, 14, 64, 100, 200, 0, 0, 1, 0, T);
        test_mm("q4i g128 swiglu bf16 (2 superblocks, short last group)", q4i_128_swiglu, 14, 128, 1100, 96, 1, 0, 2, 1, T);
        test_mm("q6i g32 store bf16-x bias (3 superblocks, short last group of 24)", q6i_32_store, 16, 32, 600, 72, 1, 1, 0, 0, T);
        test_mm("q6i g32 acc f32-x (short last group of 4: a partial sixteen)", q6i_32_acc_f, 16, 32, 100, 200, 0, 0, 1, 0, T);
        test_mm("q6i g64 swiglu bf16 (3 superblocks, short last group of 12)", q6i_64_swiglu, 16, 64, 1100, 96, 1, 0, 2, 1, T);
        test_mm("q8i store bf16-x bias", q8i_store, 15, 0, 600, 200, 1, 1, 0, 0, T);
        test_mm("q8i store bf16-x bias K640 (AMX from 32 rows)", q8i_amx_store, 15, 0, 640, 200, 1, 1, 0, 0, T);
        test_mm("q8i swiglu bf16-x -> bf16 K256 (AMX from 32 rows)", q8i_amx_swiglu, 15, 0, 256, 96, 1, 0, 2, 1, T);
        test_mm("q8i acc f32-x bias (K % 4 = 2, 5 activation blocks)", q8i_acc_f, 15, 0, 1030, 40, 0, 1, 1, 0, T);
        test_mm("q8i swiglu f32-x (K % 4 = 2)", q8i_swiglu_f, 15, 0, 98, 64, 0, 0, 2, 0, T);
    }
    for (int T = 1; T <= 20; T += T < 3 ? 2 : 17) { /* 1, 3: the pair path; 20: expert-grouped GEMMs */
        test_moe("q4i g32 / q8i, bf16, renormalized", moe_q4i_q8i, moe_gu_q4i, moe_dn_q8i, 14, 32, 15, 0, 1, 6, 2, 1, 0, T);
        test_moe("q4k g64 / q8c, f32", moe_q4k_q8c, moe_gu_q4k, moe_dn_q8c, 5, 64, 8, 0, 0, 6, 2, 0, 0, T);
        test_moe("q8a / q8a shared expert, bf16", moe_shared_q8a, moe_gu_q8a, moe_dn_q8a, 10, 0, 10, 0, 1, 1, 1, 0, 1, T);
    }
    test_em("embed q8", em_q8, 8, 0);
    test_em("embed q4 g64", em_q4, 4, 64);
    test_em("embed q8g g32", em_q8g, 9, 32);
    test_em("embed q4k g32", em_q4k, 5, 32);
    test_em("embed q6k g32", em_q6k, 6, 32);
    test_em("embed q8a", em_q8a, 10, 0);
    test_em("embed q6s g16", em_q6s, 13, 16);
    test_em("embed q4z g32", em_q4z, 11, 32);
    test_em("embed q8z g64 (short last group)", em_q8z, 12, 64);
    test_em("embed q4i g64 (short last group)", em_q4i, 14, 64);
    test_em("embed q8i", em_q8i, 15, 0);
    test_em("embed q6i g32", em_q6i, 16, 32);
    if (g_fail) {
        fprintf(stderr, "%d quantized-kernel checks failed\n", g_fail);
        return 1;
    }
    const char *isa = IG_ISA_NAME;
    printf("quantized kernels (%s): all checks passed\n", isa);
    return 0;
}
