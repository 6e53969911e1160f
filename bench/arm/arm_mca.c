/* arm_mca.c — the AArch64 decode kernels of templates/cpu as plain functions, compiled to assembly
 * by scripts/arm_speed_estimate.py (aarch64-linux-gnu-gcc -O2 -S with a target's -march) so that
 * llvm-mca can time their inner loops on a Neoverse core. Not linked into anything; each function
 * is one kernel that a decode step streams the weights through (matmul.c's T == 1 path):
 *   mca_gemv_bf16   bf16 weights, bf16 activations (BFDOT on +bf16, svbfdot on +sve+bf16)
 *   mca_gemv_f32    f32 weights and activations (FMA; SVE fmla on +sve)
 *   mca_q8c         a16w8: int8 codes, f32 activations (NEON widening + FMA)
 *   mca_q4k         a16w4: q4k nibbles, f32 activations
 *   mca_q8a         a8w8: int8 codes, int8 activations (SDOT; svdot on +sve) */
#include "common.h"
#include "quant.h"
#define MM_NAME mca_unused_matmul
#include "matmul.c"

void mca_gemv_bf16(const void *x, const char *w, int nl, float *out) { ig_mm_gemv(1, 1, x, w, nl, out); }
void mca_gemv_f32(const void *x, const char *w, int nl, float *out) { ig_mm_gemv(0, 0, x, w, nl, out); }
void mca_q8c(const float *xf, const char *panel, int K, float *out) { ig_wq_gemv(IG_WQ_Q8C, K, 32, xf, NULL, panel, out); }
void mca_q4k(const float *xf, const float *gs, const char *panel, int K, float *out) {
    ig_wq_gemv(IG_WQ_Q4K, K, 32, xf, gs, panel, out);
}
void mca_q8a(int K, const int8_t *xq, const float *xs, const char *panel, float *out) { ig_wq_igemv(K, xq, xs, panel, out); }
/* keeps the template instance referenced (it is static) */
void mca_matmul(int T, const void *x, const void *w, void *y) { mca_unused_matmul(T, x, w, NULL, y, 1); }
