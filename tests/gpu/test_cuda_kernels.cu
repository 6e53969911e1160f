/* test_cuda_kernels.cu — GPU harness for the CUDA kernel templates (templates/cuda).
 *
 * Instantiates every template with several parameter sets (the CPU harness's cases: T = 1..200,
 * N not a multiple of 16, bf16 and f32, SwiGLU, GQA 1/3/4/8, head dims 16/48/64/128/256, pages
 * crossed, two sequences mixed over three steps, direct and split attention; int8 / uint4 KV pages in
 * test_kvq.cuh) and checks each
 * against a plain C++ reference on the host (double accumulation). Then it times the decode GEMV
 * shapes and decode attention, and prints GB/s next to a measured device-to-device copy bandwidth.
 * Timed operands rotate through copies totalling more than the L2 cache so that HBM is measured.
 *
 * Kernels are launched with cudaLaunchKernel and the launch-shape macros of launch.h, i.e. the
 * same grid/block/smem the generated host code passes to cuLaunchKernel.
 * Build: nvcc -O2 -arch=sm_90 -Itemplates/cuda tests/gpu/test_cuda_kernels.cu -o test_cuda_kernels
 * Exit: 0 all passed (or "SKIP: no CUDA device"), 1 on any mismatch or CUDA error. Every failure
 * prints the case, the index of the first bad element, got/want, and the max error of the case.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <functional>
#include <vector>

/* ------------------------------------------------------------------ template instances */

/* GEMV: the CPU harness's matmul cases plus long-K / explicit-ROWS / timing shapes. */
#define MV_NAME mv_bb_store_bias
#define MV_K 96
#define MV_N 1000
#define MV_BIAS 1
#include "gemv.cu"
#define MV_NAME mv_ff_store
#define MV_K 48
#define MV_N 1000
#define MV_WBF16 0
#define MV_XBF16 0
#include "gemv.cu"
#define MV_NAME mv_bf_acc_bias
#define MV_K 128
#define MV_N 200
#define MV_XBF16 0
#define MV_BIAS 1
#define MV_EPI 1
#include "gemv.cu"
#define MV_NAME mv_fb_acc
#define MV_K 96
#define MV_N 40
#define MV_WBF16 0
#define MV_EPI 1
#include "gemv.cu"
#define MV_NAME mv_bb_swiglu_bias
#define MV_K 128
#define MV_N 96
#define MV_BIAS 1
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mv_ff_swiglu
#define MV_K 48
#define MV_N 64
#define MV_WBF16 0
#define MV_XBF16 0
#define MV_EPI 2
#include "gemv.cu"
#define MV_NAME mv_bb_ldy
#define MV_K 64
#define MV_N 48
#define MV_LDY 80
#include "gemv.cu"
#define MV_NAME mv_bb_longk
#define MV_K 8200
#define MV_N 72
#include "gemv.cu"
#define MV_NAME mv_fb_2056
#define MV_K 2056
#define MV_N 33
#define MV_WBF16 0
#include "gemv.cu"
/* RMSNorm fused in front (x is the f32 residual stream) */
#define MV_NAME mv_bb_norm_swiglu
#define MV_K 1000
#define MV_N 96
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#include "gemv.cu"
/* issue 21: GeGLU epilogue (Gemma 3), plain and with the fused norm */
#define MV_NAME mv_bb_geglu_bias
#define MV_K 128
#define MV_N 96
#define MV_BIAS 1
#define MV_EPI 3
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mv_ff_norm_geglu
#define MV_K 200
#define MV_N 64
#define MV_WBF16 0
#define MV_XBF16 0
#define MV_EPI 3
#define MV_NORM 1
#define MV_EPS 1e-6f
#include "gemv.cu"
#define MV_NAME mv_ff_norm_bias
#define MV_K 200
#define MV_N 70
#define MV_WBF16 0
#define MV_XBF16 0
#define MV_BIAS 1
#define MV_NORM 1
#define MV_EPS 1e-5f
#include "gemv.cu"
#define MV_NAME mv_bb_norm_lmhead
#define MV_K 2048
#define MV_N 5000
#define MV_NORM 1
#define MV_EPS 1e-5f
#include "gemv.cu"
#define MV_NAME mv_bb_swiglu_big
#define MV_K 2048
#define MV_N 16384
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
/* timing shapes (bf16 x bf16, store) */
#define MV_NAME mv_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#include "gemv.cu"
#define MV_NAME mv_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#include "gemv.cu"
#define MV_NAME mv_p_3072_2048
#define MV_K 2048
#define MV_N 3072
#include "gemv.cu"
#define MV_NAME mv_p_2048_2048
#define MV_K 2048
#define MV_N 2048
#include "gemv.cu"
#define MV_NAME mv_p_128256_2048
#define MV_K 2048
#define MV_N 128256
#include "gemv.cu"
/* quantized rows (wq.cuh): q8r and q4r with each epilogue, a fused norm, split K, K not a multiple
 * of a chunk, and the timing shapes */
#define MV_NAME mvq8_store_bias
#define MV_K 576
#define MV_N 1000
#define MV_BIAS 1
#define MV_WQ 8
#include "gemv.cu"
#define MV_NAME mvq8_norm_swiglu
#define MV_K 2048
#define MV_N 96
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#define MV_WQ 8
#include "gemv.cu"
#define MV_NAME mvq4_acc_g32
#define MV_K 576
#define MV_N 200
#define MV_EPI 1
#define MV_WQ 4
#define MV_WG 32
#include "gemv.cu"
#define MV_NAME mvq4_longk_g128
#define MV_K 8192
#define MV_N 72
#define MV_WQ 4
#define MV_WG 128
#include "gemv.cu"
#define MV_NAME mvq4_norm_swiglu_g64
#define MV_K 1536
#define MV_N 160
#define MV_BIAS 1
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_WQ 4
#define MV_WG 64
#include "gemv.cu"
#define MV_NAME mvq8_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 8
#include "gemv.cu"
#define MV_NAME mvq8_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#define MV_WQ 8
#include "gemv.cu"
#define MV_NAME mvq4_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 4
#include "gemv.cu"
#define MV_NAME mvq4_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#define MV_WQ 4
#include "gemv.cu"
#define MV_NAME mvq4_p_128256_2048
#define MV_K 2048
#define MV_N 128256
#define MV_WQ 4
#include "gemv.cu"
#define DQ_NAME dq8_576
#define DQ_K 576
#define DQ_NP 48
#define DQ_WQ 8
#include "dequant.cu"
#define DQ_NAME dq4_2048_g64
#define DQ_K 2048
#define DQ_NP 32
#define DQ_WQ 4
#define DQ_WG 64
#include "dequant.cu"
#define EM_NAME em_q8_576
#define EM_D 576
#define EM_WQ 8
#include "embed.cu"
#define EM_NAME em_q4_96_g32
#define EM_D 96
#define EM_WQ 4
#define EM_WG 32
#include "embed.cu"
/* the tensor-core GEMV for 2..8 tokens (gemv_tc.cu): 16-bit W and x only, K % 32 == 0 */
#define MV_NAME mvt_store_bias
#define MV_K 96
#define MV_N 1000
#define MV_BIAS 1
#include "gemv_tc.cu"
#define MV_NAME mvt_acc_bias
#define MV_K 128
#define MV_N 200
#define MV_BIAS 1
#define MV_EPI 1
#include "gemv_tc.cu"
#define MV_NAME mvt_swiglu_bias
#define MV_K 128
#define MV_N 96
#define MV_BIAS 1
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv_tc.cu"
#define MV_NAME mvt_ldy
#define MV_K 64
#define MV_N 48
#define MV_LDY 80
#include "gemv_tc.cu"
#define MV_NAME mvt_longk
#define MV_K 8224
#define MV_N 72
#include "gemv_tc.cu"
#define MV_NAME mvt_k1056
#define MV_K 1056
#define MV_N 40
#define MV_EPI 1
#include "gemv_tc.cu"
#define MV_NAME mvt_swiglu_big
#define MV_K 2048
#define MV_N 16384
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv_tc.cu"
#define MV_NAME mvt_norm_swiglu
#define MV_K 992
#define MV_N 96
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#include "gemv_tc.cu"
#define MV_NAME mvt_norm_geglu /* issue 21: GeGLU (Gemma 3) */
#define MV_K 128
#define MV_N 384
#define MV_BIAS 1
#define MV_EPI 3
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#include "gemv_tc.cu"
#define MV_NAME mvt_norm_lmhead
#define MV_K 2048
#define MV_N 5000
#define MV_NORM 1
#define MV_EPS 1e-5f
#include "gemv_tc.cu"
#define MV_NAME mvt_norm_k4096
#define MV_K 4096
#define MV_N 300
#define MV_NORM 1
#define MV_BIAS 1
#define MV_EPS 1e-5f
#include "gemv_tc.cu"
/* gemv_tc.cu with q8r rows (K % 64 == 0): each epilogue, a fused norm, a long row */
#define MV_NAME mvtq8_store_bias
#define MV_K 576
#define MV_N 1000
#define MV_BIAS 1
#define MV_WQ 8
#include "gemv_tc.cu"
#define MV_NAME mvtq8_norm_swiglu
#define MV_K 2048
#define MV_N 96
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#define MV_WQ 8
#include "gemv_tc.cu"
#define MV_NAME mvtq8_acc_longk
#define MV_K 8192
#define MV_N 72
#define MV_EPI 1
#define MV_BIAS 1
#define MV_WQ 8
#include "gemv_tc.cu"
#define MV_NAME mvtq8_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 8
#include "gemv_tc.cu"
#define MV_NAME mvtq8_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#define MV_WQ 8
#include "gemv_tc.cu"
/* gemv_tc.cu with q4r rows (K % 128 == 0): each epilogue and group size, a fused norm, a long row */
#define MV_NAME mvtq4_store_bias_g32
#define MV_K 512
#define MV_N 1000
#define MV_BIAS 1
#define MV_WQ 4
#define MV_WG 32
#include "gemv_tc.cu"
#define MV_NAME mvtq4_norm_swiglu_g128
#define MV_K 2048
#define MV_N 96
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-6f
#define MV_WQ 4
#define MV_WG 128
#include "gemv_tc.cu"
#define MV_NAME mvtq4_acc_longk_g64
#define MV_K 8192
#define MV_N 72
#define MV_EPI 1
#define MV_BIAS 1
#define MV_WQ 4
#define MV_WG 64
#include "gemv_tc.cu"
#define MV_NAME mvtq4_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 4
#define MV_WG 32
#include "gemv_tc.cu"
#define MV_NAME mvtq4_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#define MV_WQ 4
#define MV_WG 32
#include "gemv_tc.cu"
/* tensor-core timing shapes */
#define MV_NAME mvt_p_2048_8192
#define MV_K 8192
#define MV_N 2048
#include "gemv_tc.cu"
#define MV_NAME mvt_p_8192_2048
#define MV_K 2048
#define MV_N 8192
#include "gemv_tc.cu"
#define MV_NAME mvt_p_3072_2048
#define MV_K 2048
#define MV_N 3072
#include "gemv_tc.cu"
#define MV_NAME mvt_p_2048_2048
#define MV_K 2048
#define MV_N 2048
#include "gemv_tc.cu"
#define MV_NAME mvt_p_128256_2048
#define MV_K 2048
#define MV_N 128256
#include "gemv_tc.cu"
#define MV_NAME mvt_p_gu_norm /* the 1B's gate/up: fused RMSNorm, SwiGLU */
#define MV_K 2048
#define MV_N 16384
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-5f
#include "gemv_tc.cu"

#define EP_BIAS_NAME ep_bias
#define EP_SWIGLU_NAME ep_swiglu_b
#define EP_N 1000
#define EP_LDY 1024
#define EP_I 48
#define EP_GUBF16 1
#include "epilogue.cu"
#define EP_SWIGLU_NAME ep_swiglu_f
#define EP_I 32
#define EP_LDGU 80
#define EP_OBF16 0
#include "epilogue.cu"
#define EP_SWIGLU_NAME ep_geglu_b /* issue 21: GeGLU (Gemma 3) */
#define EP_I 48
#define EP_GUBF16 1
#define EP_GELU 1
#include "epilogue.cu"

#define RN_NAME rn_f48
#define RN_D 48
#define RN_EPS 1e-5f
#include "rmsnorm.cu"
#define RN_NAME rn_b1000
#define RN_D 1000
#define RN_EPS 1e-6f
#define RN_OBF16 1
#include "rmsnorm.cu"
#define RN_NAME rn_b4096
#define RN_D 4096
#define RN_EPS 1e-5f
#define RN_OBF16 1
#include "rmsnorm.cu"
#define RN_NAME rn_add200 /* issue 21: post-norm into the residual stream (GLM-4, Gemma 3) */
#define RN_D 200
#define RN_EPS 1e-6f
#define RN_ADD 1
#include "rmsnorm.cu"

#define EM_NAME em_b96
#define EM_D 96
#define EM_WBF16 1
#include "embed.cu"
#define EM_NAME em_f48
#define EM_D 48
#define EM_WBF16 0
#include "embed.cu"
#define EM_NAME em_b96_scaled /* issue 21: Gemma's sqrt(hidden) */
#define EM_D 96
#define EM_WBF16 1
#define EM_SCALE 9.797958971132712f
#include "embed.cu"

/* issue 21: mixture of experts (moe.cu): routed bf16 (Qwen2-MoE's unnormalized top-k), routed f32
 * (renormalized, Mixtral / Qwen3-MoE), the gated shared expert */
#define MO_NAME mo_r6
#define MO_D 128
#define MO_E 6
#define MO_TOPK 2
#define MO_I 48
#define MO_NORM 0
#include "moe.cu"
#define MO_NAME mo_r8n
#define MO_D 96
#define MO_E 8
#define MO_TOPK 3
#define MO_I 32
#define MO_NORM 1
#define MO_WBF16 0
#define MO_XBF16 0
#include "moe.cu"
#define MO_NAME mo_sh
#define MO_D 128
#define MO_E 1
#define MO_TOPK 1
#define MO_I 96
#define MO_SHARED 1
#include "moe.cu"
/* the tensor-core grouped products: two gate/up tiles (the second partial), two down tiles (the
 * second partial), K of 8 / 3 tiles; its router runs as _logits + _select (as codegen launches a
 * routed block's) */
#define MO_NAME mo_tc
#define MO_D 256
#define MO_E 8
#define MO_TOPK 2
#define MO_I 96
#define MO_NORM 1
#include "moe.cu"
/* the two-launch decode (_dgu/_ddown): more experts than a warp's lanes (the top-k's two values a
 * lane), a large top-k; and Qwen3-30B-A3B's shape (the bench line) */
#define MO_NAME mo_e40
#define MO_D 256
#define MO_E 40
#define MO_TOPK 6
#define MO_I 64
#define MO_NORM 0
#define MO_WBF16 0
#define MO_XBF16 0
#include "moe.cu"
#define MO_NAME mo_q3
#define MO_D 2048
#define MO_E 128
#define MO_TOPK 8
#define MO_I 768
#define MO_NORM 1
#include "moe.cu"

#define SM_NAME sm_1000
#define SM_V 1000
#define SM_LD 1024
#include "sample.cu"
#define SM_NAME sm_5000
#define SM_V 5000
#include "sample.cu"
#define SM_NAME sm_128256
#define SM_V 128256
#include "sample.cu"

/* rope_kv + attention configurations: two layers per page, tests run on layer 1. */
#define TPS 16
#define ATTN_CASE(P, H_, KV_, D_, KVB_, QKN_, OB_, SPLIT_)                                 \
    enum { P##_H = H_, P##_KV = KV_, P##_D = D_, P##_KVB = KVB_, P##_QKN = QKN_, P##_OB = OB_, P##_SPLIT = SPLIT_ };
ATTN_CASE(A, 4, 4, 16, 0, 0, 0, 4)
ATTN_CASE(B, 6, 2, 48, 1, 1, 1, 4)
ATTN_CASE(C, 8, 2, 64, 0, 1, 0, 3)
ATTN_CASE(D, 8, 1, 64, 1, 0, 0, 8)
ATTN_CASE(E, 16, 2, 128, 1, 0, 1, 4)
ATTN_CASE(F, 8, 4, 256, 0, 0, 0, 2)
ATTN_CASE(G, 24, 8, 128, 1, 1, 1, 16)
/* issue 21 (below with the instances): H partial rotary with interleaved pairs (GLM-4), I a
 * sliding window of 8 with q/k norm (Gemma 3's local layers), J a window of 5 with partial
 * rotary (halves), f32 */
ATTN_CASE(H, 4, 2, 32, 1, 0, 1, 4)
ATTN_CASE(I, 4, 2, 32, 1, 1, 1, 4)
ATTN_CASE(J, 8, 2, 64, 0, 0, 0, 3)

/* rope_kv/attention instances, written out (a macro cannot #define); values match ATTN_CASE */
#define RK_NAME rk_A
#define RK_H 4
#define RK_KV 4
#define RK_D 16
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 4 * TPS * 16 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 0
#include "rope_kv.cu"
#define AT_NAME at_A
#define AT_H 4
#define AT_KV 4
#define AT_D 16
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 4 * TPS * 16 * 4)
#define AT_KVBF16 0
#define AT_SCALE 0.25f
#define AT_SPLIT 4
#include "attention.cu"

#define RK_NAME rk_B
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 48 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME at_B
#define AT_QKNORM 1
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 48 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.14433756729740643f
#define AT_SPLIT 4
#include "attention.cu"

#define RK_NAME rk_C
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME at_C
#define AT_QKNORM 1
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define AT_KVBF16 0
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#include "attention.cu"

#define RK_NAME rk_D
#define RK_H 8
#define RK_KV 1
#define RK_D 64
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 1 * TPS * 64 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 0
#include "rope_kv.cu"
#define AT_NAME at_D
#define AT_H 8
#define AT_KV 1
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 1 * TPS * 64 * 2)
#define AT_KVBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT 8
#include "attention.cu"

#define RK_NAME rk_E
#define RK_H 16
#define RK_KV 2
#define RK_D 128
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 128 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 0
#include "rope_kv.cu"
#define AT_NAME at_E
#define AT_H 16
#define AT_KV 2
#define AT_D 128
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 128 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 4
#include "attention.cu"

#define RK_NAME rk_F
#define RK_H 8
#define RK_KV 4
#define RK_D 256
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 4 * TPS * 256 * 4)
#define RK_KVBF16 0
#define RK_QKNORM 0
#include "rope_kv.cu"
#define AT_NAME at_F
#define AT_H 8
#define AT_KV 4
#define AT_D 256
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 4 * TPS * 256 * 4)
#define AT_KVBF16 0
#define AT_SCALE 0.0625f
#define AT_SPLIT 2
#include "attention.cu"

#define RK_NAME rk_G
#define RK_H 24
#define RK_KV 8
#define RK_D 128
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 8 * TPS * 128 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME at_G
#define AT_QKNORM 1
#define AT_H 24
#define AT_KV 8
#define AT_D 128
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 8 * TPS * 128 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 16
#include "attention.cu"

#define RK_NAME rk_H
#define RK_H 4
#define RK_KV 2
#define RK_D 32
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 32 * 2)
#define RK_KVBF16 1
#define RK_ROT 16
#define RK_INTERLEAVE 1
#include "rope_kv.cu"
#define AT_NAME at_H
#define AT_H 4
#define AT_KV 2
#define AT_D 32
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 32 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.17677669529663687f
#define AT_SPLIT 4
#define AT_ROT 16
#define AT_INTERLEAVE 1
#include "attention.cu"

#define RK_NAME rk_I
#define RK_H 4
#define RK_KV 2
#define RK_D 32
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 32 * 2)
#define RK_KVBF16 1
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME at_I
#define AT_QKNORM 1
#define AT_H 4
#define AT_KV 2
#define AT_D 32
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 32 * 2)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.17677669529663687f
#define AT_SPLIT 4
#define AT_WINDOW 8
#include "attention.cu"

#define RK_NAME rk_J
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define RK_KVBF16 0
#define RK_ROT 32
#include "rope_kv.cu"
#define AT_NAME at_J
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_PAGE_BYTES (2ull * 2 * 2 * TPS * 64 * 4)
#define AT_KVBF16 0
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#define AT_WINDOW 5
#define AT_ROT 32
#include "attention.cu"

/* timing: Llama-3-8B-like attention, 32 layers per page (so rotating layers defeats the L2) */
#define PERF_LAYERS 32
#define PERF_SPLIT 32
#define AT_NAME at_perf
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_PAGE_BYTES (2ull * 8 * 16 * 128 * 2 * PERF_LAYERS)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"


/* attention_prefill (flash, tensor cores): two layers per page, tests run on layer 1. */
#define AP_NAME ap_g1_d16_f32
#define AP_H 4
#define AP_KV 4
#define AP_D 16
#define AP_PS 16
#define AP_KVBF16 0
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 16 * 4)
#define AP_SCALE 0.25f
#include "attention_prefill.cu"
#define AP_NAME ap_g8_d16_bf
#define AP_H 8
#define AP_KV 1
#define AP_D 16
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 1 * 16 * 16 * 2)
#define AP_SCALE 0.25f
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d48_bf
#define AP_H 8
#define AP_KV 2
#define AP_D 48
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 48 * 2)
#define AP_SCALE 0.14433756729740643f
#include "attention_prefill.cu"
#define AP_NAME ap_g8_d64_bf
#define AP_H 8
#define AP_KV 1
#define AP_D 64
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 1 * 16 * 64 * 2)
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d64_f32
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVBF16 0
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 64 * 4)
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d64_ps7
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 7
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 2 * 7 * 64 * 2)
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d128_bf
#define AP_H 16
#define AP_KV 4
#define AP_D 128
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 128 * 2)
#define AP_SCALE 0.08838834764831845f
#include "attention_prefill.cu"
#define AP_NAME ap_g1_d96_bf
#define AP_H 4
#define AP_KV 4
#define AP_D 96
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 96 * 2)
#define AP_SCALE 0.10206207261596575f
#include "attention_prefill.cu"
#define AP_NAME ap_g2_d80_bf
#define AP_H 4
#define AP_KV 2
#define AP_D 80
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 80 * 2)
#define AP_SCALE 0.11180339887498948f
#include "attention_prefill.cu"
#define AP_NAME ap_g2_d256_bf
#define AP_H 4
#define AP_KV 2
#define AP_D 256
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 256 * 2)
#define AP_SCALE 0.0625f
#include "attention_prefill.cu"
/* issue 21: sliding windows (Mistral, Gemma 3): a window inside one key tile, one across tiles
 * (bf16, tensor cores), and the CUDA-core path (f32 KV) */
#define AP_NAME ap_g2_d32_w8
#define AP_H 4
#define AP_KV 2
#define AP_D 32
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 32 * 2)
#define AP_SCALE 0.17677669529663687f
#define AP_WINDOW 8
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d64_w100
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 64 * 2)
#define AP_SCALE 0.125f
#define AP_WINDOW 100
#include "attention_prefill.cu"
#define AP_NAME ap_g1_d16_f32_w5
#define AP_H 4
#define AP_KV 4
#define AP_D 16
#define AP_PS 16
#define AP_KVBF16 0
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 16 * 4)
#define AP_SCALE 0.25f
#define AP_WINDOW 5
#include "attention_prefill.cu"
/* several query heads of a KV head a CTA (AP_HPC) */
#define AP_NAME ap_g4_d64_h4
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 64 * 2)
#define AP_SCALE 0.125f
#define AP_HPC 4
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d128_h2
#define AP_H 16
#define AP_KV 4
#define AP_D 128
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 128 * 2)
#define AP_SCALE 0.08838834764831845f
#define AP_HPC 2
#include "attention_prefill.cu"
#define AP_NAME ap_g4_d64_w100_h2
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 0
#define AP_PAGE_BYTES (2ull * 2 * 2 * 16 * 64 * 2)
#define AP_SCALE 0.125f
#define AP_WINDOW 100
#define AP_HPC 2
#include "attention_prefill.cu"
/* prefill timing, Llama shapes (one layer per page), against the direct kernel: _flash_wg (AP_WS 0, as
 * --tune ap_ws=0 packages build it: the launch bounds of the warp-specialized form would change its
 * registers), then the _flash_ws instances codegen makes (D 128: one head on 64-key tiles, two on 128;
 * D 64: four heads on 64) */
#define AP_NAME ap_p128
#define AP_H 32
#define AP_KV 8
#define AP_D 128
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WS 0
#include "attention_prefill.cu"
#define AT_NAME at_p128
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#include "attention.cu"
#define AP_NAME ap_p64
#define AP_H 32
#define AP_KV 8
#define AP_D 64
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_WS 0
#include "attention_prefill.cu"
#define AP_NAME ap_p64_h2
#define AP_H 32
#define AP_KV 8
#define AP_D 64
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_HPC 2
#define AP_WS 0
#include "attention_prefill.cu"
#define AP_NAME ap_p64_h4
#define AP_H 32
#define AP_KV 8
#define AP_D 64
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_HPC 4
#define AP_WS 0
#include "attention_prefill.cu"
#define AP_NAME ap_p128_h2
#define AP_H 32
#define AP_KV 8
#define AP_D 128
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_HPC 2
#define AP_WS 0
#include "attention_prefill.cu"
#define AP_NAME ap_w128
#define AP_H 32
#define AP_KV 8
#define AP_D 128
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#include "attention_prefill.cu"
#define AP_NAME ap_w64_h4
#define AP_H 32
#define AP_KV 8
#define AP_D 64
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_HPC 4
#include "attention_prefill.cu"
#define AP_NAME ap_w128_h2
#define AP_H 32
#define AP_KV 8
#define AP_D 128
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_HPC 2
#define AP_WBN 128
#include "attention_prefill.cu"
/* correctness of 128-key tiles: windows, mixed batches (test_ap's scenarios) */
#define AP_NAME ap_g4_d128_h2_b128
#define AP_H 16
#define AP_KV 4
#define AP_D 128
#define AP_PS 16
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_PAGE_BYTES (2ull * 2 * 4 * 16 * 128 * 2)
#define AP_SCALE 0.08838834764831845f
#define AP_WINDOW 100
#define AP_HPC 2
#define AP_WBN 128
#include "attention_prefill.cu"
#define AT_NAME at_p64
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.125f
#include "attention.cu"

/* ------------------------------------------------------------------ host helpers */

struct ctx {
    int fails;       /* failed cases */
    uint64_t rng;    /* xorshift state */
};

/* --only <substring>: run only the cases (and bench lines) whose label contains it */
static const char *g_only = NULL;
static bool sel(const char *label) { return !g_only || strstr(label, g_only) != NULL; }

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                    __LINE__, #call);                                                         \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* transformers' gelu_pytorch_tanh, in double */
static double h_gelu_tanh(double g) { return 0.5 * g * (1 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))); }

static float frand(ctx *c) { /* uniform in [-1, 1) */
    c->rng ^= c->rng << 13, c->rng ^= c->rng >> 7, c->rng ^= c->rng << 17;
    return (float)((c->rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static uint16_t h_f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float h_b2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Random values; when bf16, rounded to bf16 so the f32 copy is exactly what the device sees. */
static void fill(ctx *c, std::vector<float> &f, size_t n, bool bf, float scale = 1.0f) {
    f.resize(n);
    for (size_t i = 0; i < n; i++) {
        f[i] = frand(c) * scale;
        if (bf) f[i] = h_b2f(h_f2b(f[i]));
    }
}
/* Device copy of f as f32 or bf16. */
static void *upload(const std::vector<float> &f, bool bf) {
    void *d;
    size_t es = bf ? 2 : 4;
    CK(cudaMalloc(&d, f.size() * es + 16));
    if (bf) {
        std::vector<uint16_t> h(f.size());
        for (size_t i = 0; i < f.size(); i++) h[i] = h_f2b(f[i]);
        CK(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(d, f.data(), f.size() * 4, cudaMemcpyHostToDevice));
    }
    return d;
}
static std::vector<float> download(const void *d, size_t n, bool bf) {
    std::vector<float> f(n);
    if (bf) {
        std::vector<uint16_t> h(n);
        CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) f[i] = h_b2f(h[i]);
    } else {
        CK(cudaMemcpy(f.data(), d, n * 4, cudaMemcpyDeviceToHost));
    }
    return f;
}

/* Compares got[i] with ref[i] under tol[i]; prints the first bad index and the max error. */
struct checker {
    const char *what;
    double maxerr, maxrel;
    long first_bad, nbad;
    double bad_got, bad_ref, bad_tol;
};
static void chk_init(checker *k, const char *what) {
    memset(k, 0, sizeof *k);
    k->what = what;
    k->first_bad = -1;
}
static void chk(checker *k, long i, double got, double ref, double tol) {
    double e = fabs(got - ref);
    if (!(e <= tol)) {
        if (k->first_bad < 0) k->first_bad = i, k->bad_got = got, k->bad_ref = ref, k->bad_tol = tol;
        k->nbad++;
    }
    if (e > k->maxerr || e != e) k->maxerr = e;
    if (e / (fabs(ref) + 1e-6) > k->maxrel) k->maxrel = e / (fabs(ref) + 1e-6);
}
static void chk_done(ctx *c, checker *k) {
    if (k->nbad) {
        c->fails++;
        printf("FAIL %-58s %ld bad, first [%ld] got %.8g want %.8g (tol %.3g), max abs err %.3g\n", k->what,
               k->nbad, k->first_bad, k->bad_got, k->bad_ref, k->bad_tol, k->maxerr);
    } else {
        printf("ok   %-58s max abs err %.3g, max rel %.3g\n", k->what, k->maxerr, k->maxrel);
    }
}

static void launch(const void *fn, dim3 grid, dim3 block, size_t smem, void **args) {
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CK(cudaLaunchKernel(fn, grid, block, args, smem, 0));
    CK(cudaGetLastError());
}

/* ------------------------------------------------------------------ gemv */

struct mv_case {
    const char *name;
    const void *fn;
    int K, N, wb, xb, bias, epi, yb, ldy, norm;
    float eps;
    int tc; /* gemv_tc.cu (2 <= T <= 8): its launch shape */
    int wq, wg; /* quantized rows (wq.cuh): 8 q8r, 4 q4r with groups of wg */
};
#define MVC(fn, K, N, wb, xb, bias, epi, yb, ldy) \
    { #fn, (const void *)fn, K, N, wb, xb, bias, epi, yb, ldy, 0, 0.0f, 0 }
#define MVN(fn, K, N, wb, xb, bias, epi, yb, ldy, eps) \
    { #fn, (const void *)fn, K, N, wb, xb, bias, epi, yb, ldy, 1, eps, 0 }
#define MVT(fn, K, N, bias, epi, yb, ldy, norm, eps) \
    { #fn, (const void *)fn, K, N, 1, 1, bias, epi, yb, ldy, norm, eps, 1 }
#define MVTQ(fn, K, N, bias, epi, yb, ldy, norm, eps) \
    { #fn, (const void *)fn, K, N, 1, 1, bias, epi, yb, ldy, norm, eps, 1, 8, 0 }
#define MVTQ4(fn, K, N, bias, epi, yb, ldy, norm, eps, wg) \
    { #fn, (const void *)fn, K, N, 1, 1, bias, epi, yb, ldy, norm, eps, 1, 4, wg }
#define MVQ(fn, K, N, bias, epi, yb, ldy, norm, eps, wq, wg) \
    { #fn, (const void *)fn, K, N, 1, 1, bias, epi, yb, ldy, norm, eps, 0, wq, wg }

/* IEEE half <-> f32 on the host for normal numbers (the scales the quantized tests store) */
static uint16_t h_f2h(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t e = ((u >> 23) & 255u) - 127u + 15u;
    return (uint16_t)(((u >> 16) & 0x8000u) | (e << 10) | ((u >> 13) & 1023u)); /* truncated */
}
static float h_h2f(uint16_t h) {
    const int e = (h >> 10) & 31;
    const float v = ldexpf((float)((h & 1023) | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}
/* Random quantized rows (wq.cuh layout) of Np x K: the bytes, and w the weights they mean. Codes
 * uniform over their range; q8r scales 2^-8..2^-7; q4r scales 0.01..0.05 and mins -0.4..0 (f16). */
static std::vector<uint8_t> make_qrows(ctx *c, int N, int Np, int K, int wq, int G, std::vector<float> &w) {
    const size_t rb = IG_WQ_ROWB(K, wq, G);
    std::vector<uint8_t> q(rb * Np, 0);
    w.assign((size_t)Np * K, 0.0f);
    for (int n = 0; n < N; n++) {
        uint8_t *r = q.data() + rb * n;
        if (wq == 8) {
            const float s = ldexpf(1.0f + 0.5f * (frand(c) + 1.0f), -8);
            memcpy(r + K, &s, 4);
            for (int k = 0; k < K; k++) {
                int v = (int)lrintf(frand(c) * 127.0f);
                r[k] = (uint8_t)(int8_t)v;
                w[(size_t)n * K + k] = s * (float)v;
            }
        } else {
            for (int g = 0; g < K / G; g++) {
                const uint16_t hs = h_f2h(0.03f + 0.02f * frand(c)), hm = h_f2h(-0.2f + 0.2f * frand(c) - 1e-3f);
                memcpy(r + K / 2 + 4 * g, &hs, 2), memcpy(r + K / 2 + 4 * g + 2, &hm, 2);
                for (int i = 0; i < G; i++) {
                    const int k = g * G + i, v = (int)((frand(c) + 1.0f) * 8.0f) & 15;
                    r[k / 2] |= (uint8_t)(k & 1 ? v << 4 : v);
                    w[(size_t)n * K + k] = (float)((double)h_h2f(hs) * v + h_h2f(hm));
                }
            }
        }
    }
    return q;
}
static void *upload_bytes(const std::vector<uint8_t> &b) {
    void *d;
    CK(cudaMalloc(&d, b.size() + 16));
    CK(cudaMemcpy(d, b.data(), b.size(), cudaMemcpyHostToDevice));
    return d;
}
static int g_sms = 132; /* multiprocessors of the device, set in main */

/* maxc: the grid cap (few CTAs make every warp stride over many row pairs) */
static void test_mv(ctx *c, const mv_case &m, int T, int maxc) {
    {
        char lab[160];
        snprintf(lab, sizeof lab, "gemv %s T=%d", m.name, T);
        if (!sel(lab)) return;
    }
    const int Np = IG_NPAD16(m.N), I = m.N / 2, ycols = m.epi >= 2 ? I : m.N;
    std::vector<float> x, w, b, y0, xr, gam;
    fill(c, x, (size_t)T * m.K, m.xb && !m.norm, m.norm ? 3.0f : 1.0f);
    if (m.norm) {
        /* the device normalizes the f32 rows x into what the GEMV reads (rounded to bf16 when xb) */
        xr = x;
        fill(c, gam, m.K, false);
        for (auto &v : gam) v += 1.5f;
        for (int t = 0; t < T; t++) {
            double ss = 0;
            for (int i = 0; i < m.K; i++) ss += (double)x[(size_t)t * m.K + i] * x[(size_t)t * m.K + i];
            const float s = (float)(1 / sqrt(ss / m.K + m.eps));
            for (int i = 0; i < m.K; i++) {
                float o = x[(size_t)t * m.K + i] * s * gam[i];
                xr[(size_t)t * m.K + i] = m.xb ? h_b2f(h_f2b(o)) : o;
            }
        }
    }
    std::vector<uint8_t> wqb;
    if (m.wq) {
        wqb = make_qrows(c, m.N, Np, m.K, m.wq, m.wg, w);
        if (m.wq == 4 && m.tc) /* gemv_tc.cu (wq.cuh ig_wq4_adj) rounds each q4r weight to f16, then to bf16, for the mma */
            for (auto &v : w) v = h_b2f(h_f2b(__half2float(__float2half_rn(v))));
    } else {
        fill(c, w, (size_t)Np * m.K, m.wb);
        for (size_t i = (size_t)m.N * m.K; i < w.size(); i++) w[i] = 0; /* padded rows */
    }
    fill(c, b, Np, false);
    fill(c, y0, (size_t)T * m.ldy, m.epi >= 2 && m.yb);
    void *dx = upload(x, m.xb && !m.norm), *dw = m.wq ? upload_bytes(wqb) : upload(w, m.wb), *db = upload(b, false),
         *dy = upload(y0, m.epi >= 2 && m.yb);
    void *dg = m.norm ? upload(gam, false) : NULL;
    const float *bias = m.bias ? (const float *)db : NULL;
    void *args[] = {&T, &dx, &dg, &dw, &bias, &dy};
    if (m.tc) {
        CK(cudaFuncSetAttribute(m.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024)); /* as the host */
        launch(m.fn, dim3(IG_MVT_GRID_X(m.N, m.K, m.epi >= 2, maxc)), dim3(IG_MVT_BLOCK), IG_MVT_SMEM(m.K, m.norm), args);
    } else if (m.wq) {
        launch(m.fn, dim3(IG_MV_GRID_XB(m.N, IG_WQ_CODEB(m.K, m.wq), maxc)), dim3(IG_MV_BLOCK), IG_MV_SMEM(m.K, 2), args);
    } else {
        launch(m.fn, dim3(IG_MV_GRID_X(m.N, m.K, m.wb ? 2 : 4, maxc)), dim3(IG_MV_BLOCK), IG_MV_SMEM(m.K, m.xb ? 2 : 4), args);
    }
    const std::vector<float> &xv = m.norm ? xr : x;
    CK(cudaDeviceSynchronize());
    std::vector<float> y = download(dy, (size_t)T * m.ldy, m.epi >= 2 && m.yb);
    char what[160];
    snprintf(what, sizeof what, "gemv %s T=%d", m.name, T);
    checker k;
    chk_init(&k, what);
    std::vector<double> acc(Np), mag(Np);
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < Np; n++) {
            double s = 0, a = 0, big = 0;
            for (int i = 0; i < m.K; i++) {
                double p = (double)xv[(size_t)t * m.K + i] * w[(size_t)n * m.K + i];
                s += p, a += fabs(p), big = fmax(big, fabs(p));
            }
            /* fused norm: the device's scale may differ from ours by an ulp, which can flip the
             * bf16 rounding of a few elements by one bf16 ulp (2^-8 relative) */
            acc[n] = s + (m.bias ? b[n] : 0.0), mag[n] = a + (m.bias ? fabs(b[n]) : 0.0);
            /* (tolerances below are 1e-5 x mag: the slack is scaled to match) */
            if (m.norm) mag[n] += 4 * a + (m.xb ? 4 * big / 256 / 1e-5 : 0);
        }
        for (int n = 0; n < ycols; n++) {
            size_t o = (size_t)t * m.ldy + n;
            double ref, tol;
            if (m.epi >= 2) { /* SwiGLU, GeGLU (tanh GELU; its slope is within 1.2 as silu's) */
                int g = 32 * (n / 16) + n % 16, u = g + 16;
                double sg = m.epi == 3 ? h_gelu_tanh(acc[g]) : acc[g] / (1 + exp(-acc[g]));
                ref = sg * acc[u];
                tol = 1e-5 * (mag[g] * fabs(acc[u]) * 1.2 + mag[u] * fabs(sg) + fabs(ref)) + 1e-6;
                if (m.yb) tol += fabs(ref) / 256;
            } else {
                ref = acc[n] + (m.epi == 1 ? y0[o] : 0.0);
                tol = 1e-5 * mag[n] + 1e-6 + (m.epi == 1 ? 1e-7 * fabs(y0[o]) : 0);
            }
            chk(&k, (long)o, y[o], ref, tol);
        }
        /* columns between ycols and ldy must be untouched */
        for (int n = ycols; n < m.ldy; n++) chk(&k, (long)t * m.ldy + n, y[(size_t)t * m.ldy + n], y0[(size_t)t * m.ldy + n], 0);
    }
    chk_done(c, &k);
    CK(cudaFree(dx)); CK(cudaFree(dw)); CK(cudaFree(db)); CK(cudaFree(dy));
    if (dg) CK(cudaFree(dg));
}

/* ------------------------------------------------------------------ epilogues, rmsnorm, embed, sample */

static void test_ep(ctx *c, int T) {
    char what[160];
    checker k;
    { /* bias: N 1000, LDY 1024 */
        std::vector<float> y, b;
        fill(c, y, (size_t)T * 1024, false), fill(c, b, 1000, false);
        float *dy = (float *)upload(y, false), *db = (float *)upload(b, false);
        void *args[] = {&T, &dy, &db};
        launch((const void *)ep_bias, dim3(IG_EP_BIAS_GRID_X(T, 1000), IG_EP_BIAS_GRID_Y(T)), dim3(IG_EP_BLOCK), 0, args);
        std::vector<float> o = download(dy, y.size(), false);
        snprintf(what, sizeof what, "ep_bias N1000 LDY1024 T=%d", T);
        chk_init(&k, what);
        for (int t = 0; t < T; t++)
            for (int n = 0; n < 1024; n++) {
                size_t i = (size_t)t * 1024 + n;
                chk(&k, (long)i, o[i], n < 1000 ? (double)(y[i] + b[n]) : y[i], 0);
            }
        chk_done(c, &k);
        CK(cudaFree(dy)); CK(cudaFree(db));
    }
    /* swiglu: f32 I32 LDGU 80, bf16 gu/out I48 LDGU 96 with bias; then GeGLU as the bf16 one */
    for (int v = 0; v < 3; v++) {
        const int bf = v > 0, gelu = v == 2, I = bf ? 48 : 32, ld = bf ? 96 : 80;
        std::vector<float> gu, o0, bs;
        fill(c, gu, (size_t)T * ld, bf, 4.0f);
        fill(c, o0, (size_t)T * I, bf);
        fill(c, bs, 2 * I, false);
        if (!bf) bs.assign(2 * I, 0.0f);
        void *dgu = upload(gu, bf);
        float *dbs = bf ? (float *)upload(bs, false) : NULL;
        void *dout = upload(o0, bf);
        void *args[] = {&T, &dgu, &dbs, &dout};
        launch(gelu ? (const void *)ep_geglu_b : bf ? (const void *)ep_swiglu_b : (const void *)ep_swiglu_f,
               dim3(IG_EP_SWIGLU_GRID_X(T, I), IG_EP_SWIGLU_GRID_Y(T)), dim3(IG_EP_BLOCK), 0, args);
        std::vector<float> o = download(dout, o0.size(), bf);
        snprintf(what, sizeof what, "ep_%s %s I%d T=%d", gelu ? "geglu" : "swiglu", bf ? "bf16" : "f32", I, T);
        chk_init(&k, what);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < I; i++) {
                const int gc = 32 * (i / 16) + i % 16;
                double g = gu[(size_t)t * ld + gc] + bs[gc], u = gu[(size_t)t * ld + gc + 16] + bs[gc + 16];
                double ref = (gelu ? h_gelu_tanh(g) : g / (1 + exp(-g))) * u;
                chk(&k, (long)t * I + i, o[(size_t)t * I + i], ref, 2e-6 * (fabs(ref) + fabs(u)) + 1e-7 + (bf ? fabs(ref) / 256 : 0));
            }
        chk_done(c, &k);
        CK(cudaFree(dgu)); CK(cudaFree(dout));
        if (dbs) CK(cudaFree(dbs));
    }
}

/* add: RN_ADD (out += the normed row; out starts random) */
static void test_rn(ctx *c, const char *name, const void *fn, int D, float eps, int ob, int T, int add = 0) {
    std::vector<float> x, g, y0;
    fill(c, x, (size_t)T * D, false, 3.0f), fill(c, g, D, false), fill(c, y0, (size_t)T * D, false, 2.0f);
    for (auto &v : g) v += 1.5f;
    float *dx = (float *)upload(x, false), *dg = (float *)upload(g, false);
    void *dout = upload(y0, false);
    void *args[] = {&T, &dx, &dg, &dout};
    launch(fn, dim3(IG_RN_GRID_X(T)), dim3(IG_RN_BLOCK(D)), 0, args);
    std::vector<float> o = download(dout, (size_t)T * D, ob);
    char what[160];
    snprintf(what, sizeof what, "%s T=%d", name, T);
    checker k;
    chk_init(&k, what);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)t * D + i] * x[(size_t)t * D + i];
        double s = 1 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) {
            double nv = x[(size_t)t * D + i] * s * g[i], ref = nv + (add ? y0[(size_t)t * D + i] : 0.0);
            chk(&k, (long)t * D + i, o[(size_t)t * D + i], ref, 3e-6 * fabs(nv) + 1e-7 * (1 + fabs(ref)) + (ob ? fabs(ref) / 256 : 0));
        }
    }
    chk_done(c, &k);
    CK(cudaFree(dx)); CK(cudaFree(dg)); CK(cudaFree(dout));
}

static void test_em(ctx *c, const char *name, const void *fn, int D, int wb, float scale = 1.0f) {
    const int V = 1000, T = 37;
    std::vector<float> w;
    fill(c, w, (size_t)V * D, wb);
    std::vector<int> ids(T);
    for (int t = 0; t < T; t++) ids[t] = (t * 389 + 7) % V;
    ids[0] = 0, ids[1] = V - 1;
    void *dw = upload(w, wb);
    int *dids;
    float *dx;
    CK(cudaMalloc(&dids, T * 4)); CK(cudaMalloc(&dx, (size_t)T * D * 4));
    CK(cudaMemcpy(dids, ids.data(), T * 4, cudaMemcpyHostToDevice));
    int Tv = T;
    void *args[] = {&Tv, &dids, &dw, &dx};
    launch(fn, dim3(IG_EM_GRID_X(T)), dim3(IG_EM_BLOCK), 0, args);
    std::vector<float> x = download(dx, (size_t)T * D, false);
    checker k;
    chk_init(&k, name);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) /* the f32 product: exact */
            chk(&k, (long)t * D + i, x[(size_t)t * D + i], (double)(w[(size_t)ids[t] * D + i] * scale), 0);
    chk_done(c, &k);
    CK(cudaFree(dw)); CK(cudaFree(dids)); CK(cudaFree(dx));
}

/* A quantized embedding table: rows dequantized to f32 (scale q (+ min), one fma). */
static void test_emq(ctx *c, const char *name, const void *fn, int D, int wq, int G) {
    const int V = 500, T = 37, Vp = IG_NPAD16(V);
    std::vector<float> w;
    std::vector<uint8_t> qb = make_qrows(c, V, Vp, D, wq, G, w);
    std::vector<int> ids(T);
    for (int t = 0; t < T; t++) ids[t] = (t * 389 + 7) % V;
    ids[0] = 0, ids[1] = V - 1;
    void *dw = upload_bytes(qb);
    int *dids;
    float *dx;
    CK(cudaMalloc(&dids, T * 4)); CK(cudaMalloc(&dx, (size_t)T * D * 4));
    CK(cudaMemcpy(dids, ids.data(), T * 4, cudaMemcpyHostToDevice));
    int Tv = T;
    void *args[] = {&Tv, &dids, &dw, &dx};
    launch(fn, dim3(IG_EM_GRID_X(T)), dim3(IG_EM_BLOCK), 0, args);
    std::vector<float> x = download(dx, (size_t)T * D, false);
    checker k;
    chk_init(&k, name);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            const double ref = w[(size_t)ids[t] * D + i];
            chk(&k, (long)t * D + i, x[(size_t)t * D + i], ref, 1e-6 * fabs(ref) + 1e-7);
        }
    chk_done(c, &k);
    CK(cudaFree(dw)); CK(cudaFree(dids)); CK(cudaFree(dx));
}

/* dequant.cu: quantized rows -> bf16, each weight rounded once. */
static void test_dq(ctx *c, const char *name, const void *fn, int Np, int K, int wq, int G) {
    std::vector<float> w;
    std::vector<uint8_t> qb = make_qrows(c, Np - 3, Np, K, wq, G, w); /* 3 padded rows stay zero */
    void *dw = upload_bytes(qb), *dout;
    CK(cudaMalloc(&dout, (size_t)Np * K * 2));
    CK(cudaMemset(dout, 0xff, (size_t)Np * K * 2));
    void *args[] = {&dw, &dout};
    launch(fn, dim3(IG_DQ_GRID_X(Np, K, wq)), dim3(IG_DQ_BLOCK), 0, args);
    std::vector<float> o = download(dout, (size_t)Np * K, true);
    checker k;
    chk_init(&k, name);
    for (size_t i = 0; i < o.size(); i++) chk(&k, (long)i, o[i], w[i], fabs(w[i]) / 256 + 1e-7); /* one bf16 rounding */
    chk_done(c, &k);
    CK(cudaFree(dw)); CK(cudaFree(dout));
}

/* Per-part greedy keys of logits rows, as a kernel that writes logits leaves them (decode_layers.cu):
 * block (p, r) takes columns [p V / parts, (p + 1) V / parts) of row r. */
__global__ void amax_parts(const float *l, int V, int ld, unsigned long long *out) {
    const int p = blockIdx.x, r = blockIdx.y, parts = gridDim.x;
    __shared__ unsigned long long best[32];
    unsigned long long b = 0ull;
    for (int j = p * V / parts + (int)threadIdx.x; j < (p + 1) * V / parts; j += blockDim.x)
        b = max(b, ig_amax_key(l[(size_t)r * ld + j], j));
    for (int o = 16; o > 0; o >>= 1) b = max(b, __shfl_xor_sync(IG_FULL_MASK, b, o));
    if ((threadIdx.x & 31) == 0) best[threadIdx.x >> 5] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)blockDim.x / 32; w++) b = max(b, best[w]);
        out[(size_t)r * parts + p] = b;
    }
}

/* Runs the sampler over the rows of l (f32) with params ps; returns one id per row. With parts > 0
 * its first pass reads per-part greedy keys (amax_parts over V columns of rows ld apart). */
static std::vector<int> run_sample(const void *fn, const std::vector<float> &l, const std::vector<ig_sm_params> &ps,
                                   int parts = 0, int V = 0, int ld = 0, const std::vector<unsigned> *mask = NULL,
                                   const std::vector<int> *mask_row = NULL) {
    const int n = (int)ps.size();
    float *dl = (float *)upload(l, false);
    unsigned long long *dk = NULL;
    if (parts > 0) {
        CK(cudaMalloc(&dk, sizeof(unsigned long long) * parts * n));
        amax_parts<<<dim3(parts, n), 128>>>(dl, V, ld, dk);
        CK(cudaGetLastError());
    }
    void *dp;
    int *dout;
    CK(cudaMalloc(&dp, n * sizeof(ig_sm_params)));
    CK(cudaMemcpy(dp, ps.data(), n * sizeof(ig_sm_params), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, n * 4));
    CK(cudaMemset(dout, 0x7f, n * 4));
    int nv = n;
    unsigned *dm = NULL;
    int *dr = NULL;
    if (mask && mask_row) {
        CK(cudaMalloc(&dm, mask->size() * 4 + 4));
        CK(cudaMemcpy(dm, mask->data(), mask->size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&dr, n * 4));
        CK(cudaMemcpy(dr, mask_row->data(), n * 4, cudaMemcpyHostToDevice));
    }
    int *dnone = NULL; /* no next step's input */
    void *args[] = {&nv, &dl, &dp, &dout, &dk, &parts, &dm, &dr, &dnone, &dnone};
    launch(fn, dim3(IG_SM_GRID_X(n)), dim3(IG_SM_BLOCK), 0, args);
    std::vector<int> o(n);
    CK(cudaMemcpy(o.data(), dout, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(dl)); CK(cudaFree(dp)); CK(cudaFree(dout));
    if (dm) CK(cudaFree(dm));
    if (dr) CK(cudaFree(dr));
    if (dk) CK(cudaFree(dk));
    return o;
}

/* Greedy rows (ties, last id, all equal, beyond-V columns ignored) and invalid rows (NaN, +inf,
 * all -inf) of the device sampler, against a host scan. */
static void test_sm_greedy(ctx *c, const char *name, const void *fn, int V, int ld, int parts = 0) {
    const int n = 7;
    std::vector<float> l;
    fill(c, l, (size_t)n * ld, false);
    l[17] = l[900 % V] = 5.0f;
    l[(size_t)ld + V - 1] = 7.0f;
    for (int j = 0; j < V; j++) l[2 * (size_t)ld + j] = -3.0f;
    l[3 * (size_t)ld + 5] = NAN;                        /* NaN: invalid */
    l[4 * (size_t)ld + 9] = INFINITY;                   /* +inf: invalid */
    for (int j = 0; j < V; j++) l[5 * (size_t)ld + j] = -INFINITY; /* nothing to pick */
    for (int j = V; j < ld; j++)
        for (int r = 0; r < n; r++) l[(size_t)r * ld + j] = 100.0f; /* beyond V: must be ignored */
    std::vector<ig_sm_params> ps(n);
    for (auto &q : ps) q = {1, 0.0f, 0, 1.0f, 0.0f, 0.5f};
    /* -0 and +0 tie: the lower id wins */
    for (int j = 0; j < V; j++) l[6 * (size_t)ld + j] = j == V / 2 ? -0.0f : j == V - 2 ? 0.0f : -1.0f;
    const std::vector<int> o = run_sample(fn, l, ps, parts, V, ld);
    checker k;
    chk_init(&k, name);
    for (int r = 0; r < n; r++) {
        int best = -1, bad = 0;
        for (int j = 0; j < V; j++) {
            float v = l[(size_t)r * ld + j];
            if (v != v || v == INFINITY) bad = 1;
            if (v > -INFINITY && (best < 0 || v > l[(size_t)r * ld + best])) best = j;
        }
        chk(&k, r, o[r], bad ? -1 : best, 0);
    }
    chk_done(c, &k);
}

/* Sampling rows: for each (temperature, top-k, top-p, min-p) and several u, the host computes
 * the kept set in double and the cumulative kept mass in id order; the device's token must be
 * kept (tokens within 1e-4 of a threshold may go either way) and its mass interval must contain
 * u x (kept mass) to within 1e-4 of the total. */
static void test_sm_sample(ctx *c, const char *name, const void *fn, int V, int parts = 0) {
    struct pcase { float temp; int k; float p, minp; };
    const pcase pcs[] = {{1.0f, 0, 1.0f, 0.0f}, {0.7f, 50, 1.0f, 0.0f}, {1.3f, 0, 0.9f, 0.0f},
                         {1.0f, 1000, 0.5f, 0.01f}, {1.0f, 0, 1.0f, 0.1f}, {2.0f, 3, 1.0f, 0.0f},
                         {0.5f, 0, 0.3f, 0.0f}, {1.0f, 1, 1.0f, 0.0f}};
    const float us[] = {0.0f, 0.001f, 0.3f, 0.77f, 0.999f};
    const int np = sizeof pcs / sizeof pcs[0], nu = sizeof us / sizeof us[0], n = np * nu;
    std::vector<float> row;
    fill(c, row, V, false, 4.0f);
    std::vector<float> l((size_t)n * V);
    std::vector<ig_sm_params> ps(n);
    for (int i = 0; i < n; i++) {
        memcpy(&l[(size_t)i * V], row.data(), sizeof(float) * V);
        const pcase &q = pcs[i / nu];
        ps[i] = {1, q.temp, q.k, q.p, q.minp, us[i % nu]};
    }
    const std::vector<int> o = run_sample(fn, l, ps, parts, V, V);
    checker k;
    chk_init(&k, name);
    double m = -INFINITY;
    for (int j = 0; j < V; j++) m = fmax(m, row[j]);
    for (int pi = 0; pi < np; pi++) {
        const pcase &q = pcs[pi];
        std::vector<double> w(V), srt(V);
        for (int j = 0; j < V; j++) w[j] = srt[j] = exp((row[j] - m) / q.temp);
        std::sort(srt.begin(), srt.end(), std::greater<double>());
        double tk = q.k > 0 && q.k < V ? srt[q.k - 1] : 0.0, tp = 0.0;
        if (q.p < 1.0f) {
            double tot = 0, cum = 0;
            for (int j = 0; j < V && srt[j] >= tk; j++) tot += srt[j];
            for (int j = 0; j < V && srt[j] >= tk; j++) {
                cum += srt[j];
                if (cum >= q.p * tot) { tp = srt[j]; break; }
            }
        }
        const double tau = fmax(fmax(tk, tp), (double)q.minp);
        double z = 0;
        for (int j = 0; j < V; j++) if (w[j] >= tau) z += w[j];
        for (int ui = 0; ui < nu; ui++) {
            const int r = pi * nu + ui, t = o[r];
            if (t < 0 || t >= V) { chk(&k, r, t, 0, -1); continue; }
            const bool near = fabs(w[t] - tau) <= 1e-4 * fmax(tau, 1e-30);
            chk(&k, r, (w[t] >= tau || near) ? 1 : 0, 1, 0); /* kept */
            double before = 0;
            for (int j = 0; j < t; j++) if (w[j] >= tau) before += w[j];
            const double target = us[ui] * z, slack = 1e-4 * z;
            chk(&k, r, (before <= target + slack && before + w[t] >= target - slack) ? 1 : 0, 1, 0); /* the walk */
        }
    }
    chk_done(c, &k);
}

/* Token masks (guided decoding): rows of one random row of V logits whose argmax is disallowed;
 * greedy under a mask of a few ids must pick the best allowed one (and ignore the per-part keys,
 * which are of the unmasked row), a mask allowing nothing gives -1; sampled rows (temperature,
 * top-k, top-p, min-p, u over (0, 1)) under the mask never pick a disallowed id over many draws;
 * rows without a mask in the same launch give exactly what a launch without masks gives. */
static void test_sm_masked(ctx *c, const char *name, const void *fn, int V, int ld, int parts = 0) {
    const int W = IG_SM_MASK_WORDS(V), allowed[] = {3, 77, 78, V / 2, V - 1};
    const int na = sizeof allowed / sizeof allowed[0], draws = 256, n = 2 + draws + 8;
    std::vector<float> row;
    fill(c, row, (size_t)ld, false, 4.0f);
    row[11] = 50.0f; /* the argmax: disallowed */
    std::vector<float> l((size_t)n * ld);
    for (int i = 0; i < n; i++) memcpy(&l[(size_t)i * ld], row.data(), sizeof(float) * ld);
    std::vector<unsigned> mask((size_t)2 * W, 0u);
    for (int a = 0; a < na; a++) mask[allowed[a] / 32] |= 1u << (allowed[a] % 32);
    std::vector<int> mrow(n, 0);
    std::vector<ig_sm_params> ps(n);
    ps[0] = {1, 0.0f, 0, 1.0f, 0.0f, 0.5f};
    ps[1] = ps[0], mrow[1] = 1; /* mask 1 allows nothing */
    const float temps[] = {1.0f, 0.7f, 1.5f, 3.0f};
    for (int i = 0; i < draws; i++)
        ps[2 + i] = {1, temps[i % 4], i % 3 == 1 ? 2 : 0, i % 5 == 2 ? 0.8f : 1.0f, i % 7 == 3 ? 0.05f : 0.0f,
                     (float)((i + 0.5) / draws)};
    for (int i = 0; i < 8; i++) { /* no mask: greedy and sampled */
        const int r = 2 + draws + i;
        mrow[r] = -1;
        ps[r] = {1, i < 2 ? 0.0f : 1.0f, i == 3 ? 5 : 0, i == 4 ? 0.9f : 1.0f, 0.0f, 0.1f * (float)i + 0.05f};
    }
    const std::vector<int> o = run_sample(fn, l, ps, parts, V, ld, &mask, &mrow);
    std::vector<float> lu(l.begin() + (size_t)(2 + draws) * ld, l.end());
    std::vector<ig_sm_params> pu(ps.begin() + 2 + draws, ps.end());
    const std::vector<int> ou = run_sample(fn, lu, pu, parts, V, ld);
    checker k;
    chk_init(&k, name);
    int best = allowed[0];
    for (int a = 1; a < na; a++)
        if (row[allowed[a]] > row[best]) best = allowed[a];
    chk(&k, 0, o[0], best, 0);
    chk(&k, 1, o[1], -1, 0);
    for (int i = 0; i < draws; i++) {
        bool in = false;
        for (int a = 0; a < na; a++) in |= o[2 + i] == allowed[a];
        chk(&k, 2 + i, in ? 1 : 0, 1, 0);
    }
    for (int i = 0; i < 8; i++) chk(&k, 2 + draws + i, o[2 + draws + i], ou[i], 0);
    chk(&k, n, ou[0], 11, 0); /* the unmasked greedy row: the argmax */
    chk_done(c, &k);
}

/* ------------------------------------------------------------------ mixture of experts */

/* moe.cu's three kernels against a host reference in double: the device's expert choice must be the
 * host's top-k (tokens whose k-th and (k+1)-th logits are within 1e-4 are not compared: either is
 * right), its weights the softmax (renormalized) of the chosen ones, and resid += the weighted sum
 * of the chosen experts' SwiGLU MLPs (x and h rounded to bf16 when xb, as the device). */
/* A tensor map of rows x cols 16-bit elements at p, boxes of 64 columns x box_rows rows in the
 * 128-byte swizzle (host_runtime.c's tile_map and open_kv_map; linked with -lcuda) */
static CUtensorMap tile_map2(const void *p, unsigned long long cols, unsigned long long rows, unsigned box_rows) {
    CUtensorMap m;
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {2ull * cols};
    const cuuint32_t box[2] = {64, box_rows}, step[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)p, dims, strides, box, step,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
        exit(1);
    }
    return m;
}

/* The four operand maps of _gu_wg / _down_wg as the generated code encodes them: the pairs' token rows
 * (T K rows of D), the gate/up stack, h (T K rows of I), the down stack */
struct moe_wg_maps {
    CUtensorMap x, gu, h, dn;
};
static moe_wg_maps moe_maps(const void *xrows, const void *wgu, const void *h, const void *wdn, int T, int D, int E, int K, int I) {
    const unsigned long long tk = (unsigned long long)T * K;
    return {tile_map2(xrows, D, tk, IG_MO_TC_BM), tile_map2(wgu, D, (unsigned long long)E * 2 * I, IG_MO_WG_BN),
            tile_map2(h, I, tk, IG_MO_TC_BM), tile_map2(wdn, I, (unsigned long long)E * D, IG_MO_WG_BN)};
}

struct moe_fns {
    const void *route, *gu, *dn;           /* per (token, expert) pair */
    const void *group, *ggu, *gdn, *gsum;  /* expert-grouped (group: null for the shared expert) */
    const void *xr, *tgu, *tdn;            /* expert-grouped on tensor cores (null: not instantiated) */
    const void *wgu, *wdn, *xg;            /* the same on warpgroup tensor cores (sm_90a images), _xgather */
    const void *lg, *slc;                  /* the router as _logits + _select (null: _route) */
    const void *dgu, *ddn;                 /* decode-sized steps in two launches */
};
#define MOF(P) { (const void *)P##_route, (const void *)P##_gu, (const void *)P##_down, NULL, \
                 (const void *)P##_gu_grouped, (const void *)P##_down_grouped, (const void *)P##_sum, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 (const void *)P##_dgu, (const void *)P##_ddown }
#define MOFG(P) { (const void *)P##_route, (const void *)P##_gu, (const void *)P##_down, (const void *)P##_group, \
                  (const void *)P##_gu_grouped, (const void *)P##_down_grouped, (const void *)P##_sum, NULL, NULL, NULL, NULL, NULL, \
                  NULL, NULL, NULL, (const void *)P##_dgu, (const void *)P##_ddown }
#define MOFT(P, G, L, S) { (const void *)P##_route, (const void *)P##_gu, (const void *)P##_down, G, \
                     (const void *)P##_gu_grouped, (const void *)P##_down_grouped, (const void *)P##_sum, \
                     (const void *)P##_xround, (const void *)P##_gu_tc, (const void *)P##_down_tc, \
                     (const void *)P##_gu_wg, (const void *)P##_down_wg, (const void *)P##_xgather, L, S, \
                     (const void *)P##_dgu, (const void *)P##_ddown }
/* ... the shared expert's (no _group, no _xgather: its pairs are the tokens, _xround's rows) */
#define MOFTS(P) { (const void *)P##_route, (const void *)P##_gu, (const void *)P##_down, NULL, \
                   (const void *)P##_gu_grouped, (const void *)P##_down_grouped, (const void *)P##_sum, \
                   (const void *)P##_xround, (const void *)P##_gu_tc, (const void *)P##_down_tc, \
                   (const void *)P##_gu_wg, (const void *)P##_down_wg, NULL, NULL, NULL, \
                   (const void *)P##_dgu, (const void *)P##_ddown }

/* grouped: the expert-grouped kernels (prefill) after the same router; 2: those on tensor cores;
 * 4: on warpgroup tensor cores (skipped where the image has no wgmma: ig_wg_built); 3: the two-launch decode (_dgu, _ddown) over a grid of dgrid CTAs (0: the SM count), _dgu run
 * twice (the second finds the counters the first left) */
static void test_moe(ctx *c, const char *name, const moe_fns &f, int D, int E, int K, int I, int norm, int wb, int xb,
                     int shared, int T, int grouped, int dgrid = 0, int fold = 0) {
    char what[200], gbuf[64];
    snprintf(gbuf, sizeof gbuf, " decode2 G=%d%s", dgrid > 0 ? dgrid : g_sms, fold ? " + rms_norm" : "");
    const char *gname = grouped == 4 ? " grouped wgmma" : grouped == 3 ? gbuf : grouped == 2 ? " grouped tc" : grouped ? " grouped" : "";
    snprintf(what, sizeof what, "moe %s%s T=%d", name, gname, T);
    if (!sel(what)) return;
    if (grouped == 4) {
        int built = 0;
        CK(cudaMemcpyFromSymbol(&built, ig_wg_built, sizeof built));
        if (!built) {
            printf("skip %s: no wgmma in this image (build for sm_90a)\n", what);
            return;
        }
    }
    std::vector<float> x, rt, wgu, wdn, r0;
    fill(c, x, (size_t)T * D, false, 2.0f), fill(c, rt, (size_t)E * D, false, 0.5f);
    fill(c, wgu, (size_t)E * 2 * I * D, wb, 0.3f), fill(c, wdn, (size_t)E * D * I, wb, 0.3f), fill(c, r0, (size_t)T * D, false);
    /* fold (decode2): the kernel gets the residual and gamma and applies the RMSNorm itself; the
     * reference below reads x := the normalized rows (double, then f32) */
    std::vector<float> gm;
    if (fold) fill(c, gm, D, false, 0.5f);
    for (auto &v : gm) v += 1.0f;
    float *dx = (float *)upload(x, false), *drt = (float *)upload(rt, false), *dr = (float *)upload(r0, false), *dwt;
    float *dgm = fold ? (float *)upload(gm, false) : nullptr, eps = 1e-6f;
    for (int t = 0; fold && t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)t * D + i] * x[(size_t)t * D + i];
        const double r = 1 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) x[(size_t)t * D + i] = (float)(x[(size_t)t * D + i] * r * gm[i]);
    }
    void *dgu = upload(wgu, wb), *ddn = upload(wdn, wb), *dh;
    int *dsel;
    CK(cudaMalloc(&dsel, (size_t)T * K * 4)); CK(cudaMalloc(&dwt, (size_t)T * K * 4));
    CK(cudaMalloc(&dh, (size_t)T * K * I * 4));
    int Tv = T;
    if (grouped == 3) {
        float *dlg;
        unsigned *dsync, hs[2];
        const int G = dgrid > 0 ? dgrid : g_sms;
        CK(cudaMalloc(&dlg, (size_t)T * E * 4)); CK(cudaMalloc(&dsync, 8)); CK(cudaMemset(dsync, 0, 8));
        CK(cudaMemset(dh, 0xff, (size_t)T * K * I * 4)); /* NaN: every pair's SwiGLU row must be written */
        void *a1[] = {&Tv, &dx, &dgm, &eps, &drt, &dlg, &dsel, &dwt, &dgu, &dh, &dsync};
        for (int rep = 0; rep < 2; rep++)
            launch(f.dgu, dim3(G), dim3(IG_MO_DBLOCK), IG_MO_DSMEM(T, D, xb ? 2 : 4), a1);
        void *a2[] = {&Tv, &dh, &dsel, &dwt, &ddn, &dr};
        launch(f.ddn, dim3(G), dim3(IG_MO_DBLOCK), 0, a2);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hs, dsync, 8, cudaMemcpyDeviceToHost));
        if (!shared && (hs[0] != 0 || hs[1] != 2)) {
            printf("FAIL %s: counters after two launches %u %u (want 0 2)\n", what, hs[0], hs[1]);
            c->fails++;
        }
        CK(cudaFree(dlg)); CK(cudaFree(dsync));
    } else if (f.lg) { /* the router over many SMs, then the top-k */
        float *dlg;
        CK(cudaMalloc(&dlg, (size_t)T * E * 4));
        void *al[] = {&Tv, &dx, &drt, &dlg};
        launch(f.lg, dim3(IG_MO_LG_GRID_X(E), T), dim3(IG_MO_BLOCK), 0, al);
        void *as[] = {&Tv, &dlg, &dsel, &dwt};
        launch(f.slc, dim3(T), dim3(32), 0, as);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(dlg));
    } else {
        void *a1[] = {&Tv, &dx, &drt, &dsel, &dwt};
        launch(f.route, dim3(IG_MO_ROUTE_GRID_X(T)), dim3(IG_MO_BLOCK), 0, a1);
    }
    if (grouped == 3) {
    } else if (!grouped) {
        void *a2[] = {&Tv, &dx, &dsel, &dgu, &dh};
        launch(f.gu, dim3(IG_MO_GU_GRID_X(I), IG_MO_GU_GRID_Y(T, K)), dim3(IG_MO_BLOCK), 0, a2);
        void *a3[] = {&Tv, &dh, &dsel, &dwt, &ddn, &dr};
        launch(f.dn, dim3(IG_MO_DN_GRID_X(D), IG_MO_DN_GRID_Y(T)), dim3(IG_MO_BLOCK), 0, a3);
    } else {
        int *doff, *dlist;
        float *dy;
        CK(cudaMalloc(&doff, 2 * (E + 1) * 4)); CK(cudaMalloc(&dlist, (size_t)T * K * 4));
        CK(cudaMalloc(&dy, (size_t)T * K * D * 4));
        CK(cudaMemset(dy, 0xff, (size_t)T * K * D * 4)); /* NaN: every pair's row must be written */
        CK(cudaMemset(dh, 0xff, (size_t)T * K * I * 4)); /* and every pair's SwiGLU row */
        if (f.group) {
            void *a0[] = {&Tv, &dsel, &doff, &dlist};
            launch(f.group, dim3(1), dim3(1024), 0, a0);
        }
        if (grouped == 2 || grouped == 4) { /* x rounded to bf16, then the tensor-core tiles */
            void *xb;
            CK(cudaMalloc(&xb, (size_t)T * D * 2));
            void *ax[] = {&Tv, &dx, &xb};
            launch(f.xr, dim3(IG_MO_SUM_GRID_X(D), T), dim3(IG_MO_BLOCK), 0, ax);
            void *a2[] = {&Tv, &xb, &doff, &dlist, &dgu, &dh};
            void *a3[] = {&Tv, &dh, &doff, &dlist, &dwt, &ddn, &dy};
            if (grouped == 4) { /* the pairs' rows in _group's order (dy's room, as the generated code) through tensor maps */
                const void *xrows = xb;
                if (f.xg) {
                    void *ag[] = {&Tv, &dx, &dlist, &dy};
                    launch(f.xg, dim3((unsigned)IG_MO_XG_GRID(T, K, D)), dim3(IG_MO_BLOCK), 0, ag);
                    xrows = dy;
                }
                moe_wg_maps m = moe_maps(xrows, dgu, dh, ddn, T, D, E, K, I);
                void *w2[] = {&Tv, &doff, &dh, &m.x, &m.gu}, *w3[] = {&Tv, &doff, &dlist, &dwt, &dy, &m.h, &m.dn};
                launch(f.wgu, dim3(IG_MO_WG_GU_GRID_X(I), IG_MO_TC_GRID_Y(T, K, E)), dim3(IG_MO_WG_THREADS), IG_MO_WG_SMEM, w2);
                launch(f.wdn, dim3(IG_MO_WG_DN_GRID_X(D), IG_MO_TC_GRID_Y(T, K, E)), dim3(IG_MO_WG_THREADS), IG_MO_WG_SMEM, w3);
            } else {
                launch(f.tgu, dim3(IG_MO_TC_GU_GRID_X(I), IG_MO_TC_GRID_Y(T, K, E)), dim3(IG_MO_TC_THREADS), IG_MO_TC_SMEM, a2);
                launch(f.tdn, dim3(IG_MO_TC_DN_GRID_X(D), IG_MO_TC_GRID_Y(T, K, E)), dim3(IG_MO_TC_THREADS), IG_MO_TC_SMEM, a3);
            }
            CK(cudaDeviceSynchronize());
            CK(cudaFree(xb));
        } else {
            void *a2[] = {&Tv, &dx, &doff, &dlist, &dgu, &dh};
            launch(f.ggu, dim3(IG_MO_GGU_GRID_X(I), E), dim3(IG_MO_BLOCK), IG_MO_GSMEM(D, wb ? 2 : 4), a2);
            void *a3[] = {&Tv, &dh, &doff, &dlist, &dwt, &ddn, &dy};
            launch(f.gdn, dim3(IG_MO_GDN_GRID_X(D), E), dim3(IG_MO_BLOCK), IG_MO_GSMEM(I, wb ? 2 : 4), a3);
        }
        void *a4[] = {&Tv, &dy, &dr};
        launch(f.gsum, dim3(IG_MO_SUM_GRID_X(D), T), dim3(IG_MO_BLOCK), 0, a4);
        CK(cudaDeviceSynchronize());
        CK(cudaFree(doff)); CK(cudaFree(dlist)); CK(cudaFree(dy));
    }
    CK(cudaDeviceSynchronize());
    std::vector<int> gs((size_t)T * K);
    CK(cudaMemcpy(gs.data(), dsel, gs.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<float> gw = download(dwt, (size_t)T * K, false), out = download(dr, (size_t)T * D, false);
    checker ks, kw, ko;
    char w1[220], w2[220];
    snprintf(w1, sizeof w1, "moe %s%s T=%d: top-%d experts", name, gname, T, K);
    snprintf(w2, sizeof w2, "moe %s%s T=%d: routing weights", name, gname, T);
    chk_init(&ks, w1), chk_init(&kw, w2), chk_init(&ko, what);
    int ties = 0;
    for (int t = 0; t < T; t++) {
        std::vector<double> lg(E), p(E);
        double mx = -1e300, z = 0;
        for (int e = 0; e < E; e++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)x[(size_t)t * D + i] * rt[(size_t)e * D + i];
            lg[e] = s, mx = fmax(mx, s);
        }
        for (int e = 0; e < E; e++) z += (p[e] = exp(lg[e] - mx));
        std::vector<int> ord(E);
        for (int e = 0; e < E; e++) ord[e] = e;
        std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return lg[a] > lg[b]; });
        const bool tie = !shared && K < E && lg[ord[K - 1]] - lg[ord[K]] < 1e-4;
        ties += tie;
        double ksum = 0;
        for (int k = 0; k < K; k++) ksum += p[gs[(size_t)t * K + k]] / z;
        std::vector<double> acc(D, 0.0), tol(D, 1e-6);
        for (int k = 0; k < K; k++) {
            const int e = gs[(size_t)t * K + k];
            if (e < 0 || e >= E) { chk(&ks, (long)t * K + k, e, 0, -1); continue; }
            if (!tie && !shared) chk(&ks, (long)t * K + k, e, ord[k], 0);
            const double w = shared ? 1 / (1 + exp(-lg[0])) : norm ? p[e] / z / ksum : p[e] / z;
            chk(&kw, (long)t * K + k, gw[(size_t)t * K + k], w, 1e-5 * fabs(w) + 1e-7);
            for (int d = 0; d < D; d++) tol[d] += 1e-5 * fabs(w); /* the weight's f32 error */
            std::vector<double> h(I), hm(I);
            for (int i = 0; i < I; i++) {
                const int g = 32 * (i / 16) + i % 16;
                double sg = 0, su = 0, ag = 0, au = 0;
                for (int j = 0; j < D; j++) {
                    const double xv = xb ? h_b2f(h_f2b(x[(size_t)t * D + j])) : x[(size_t)t * D + j];
                    const double wg = wgu[((size_t)e * 2 * I + g) * D + j], wu = wgu[((size_t)e * 2 * I + g + 16) * D + j];
                    sg += xv * wg, su += xv * wu, ag += fabs(xv * wg), au += fabs(xv * wu);
                }
                const double si = sg / (1 + exp(-sg));
                h[i] = si * su;
                /* f32 sums (1e-5 of their magnitude through silu's slope <= 1.1), then bf16 rounding */
                hm[i] = 1e-5 * (1.2 * ag * fabs(su) + au * fabs(si)) + (xb ? fabs(h[i]) / 128 : 0) + 1e-7;
            }
            for (int d = 0; d < D; d++) {
                double s = 0, a = 0;
                for (int i = 0; i < I; i++) {
                    const double wv = wdn[((size_t)e * D + d) * I + i];
                    s += wv * h[i], a += fabs(wv) * (fabs(h[i]) * 1e-5 + hm[i]);
                }
                acc[d] += w * s, tol[d] += fabs(w) * a + 1e-5 * fabs(w * s);
            }
        }
        for (int d = 0; d < D; d++)
            chk(&ko, (long)t * D + d, out[(size_t)t * D + d], r0[(size_t)t * D + d] + acc[d], tol[d] + 1e-7 * fabs(r0[(size_t)t * D + d]));
    }
    if (!shared) chk_done(c, &ks);
    chk_done(c, &kw), chk_done(c, &ko);
    if (ties) printf("     (%d of %d tokens with a near tie at the k-th expert: choice not compared)\n", ties, T);
    CK(cudaFree(dx)); CK(cudaFree(drt)); CK(cudaFree(dr)); CK(cudaFree(dwt)); CK(cudaFree(dgu)); CK(cudaFree(ddn));
    CK(cudaFree(dh)); CK(cudaFree(dsel));
    if (dgm) CK(cudaFree(dgm));
}

/* ------------------------------------------------------------------ rope_kv + attention */

struct attn_case {
    const char *name;
    const void *rk, *at, *at_split, *at_split_rope;
    int H, KV, D, kvb, qkn, ob, split;
    float scale;
    int rot, il, win; /* rotary dims, interleaved pairs, sliding window (issue 21; D, 0, 0 = Llama) */
};
#define ATCW(P, name, scale, rot, il, win)                                                                  \
    { name, (const void *)rk_##P, (const void *)at_##P, (const void *)at_##P##_split, (const void *)at_##P##_split_rope, \
      P##_H, P##_KV, P##_D, P##_KVB, P##_QKN, P##_OB, P##_SPLIT, scale, rot, il, win }
#define ATC(P, name, scale) ATCW(P, name, scale, P##_D, 0, 0)

static double pool_get(const std::vector<uint8_t> &pool, size_t byte_off, size_t idx, bool bf) {
    if (bf) {
        uint16_t h;
        memcpy(&h, &pool[byte_off + idx * 2], 2);
        return h_b2f(h);
    }
    float f;
    memcpy(&f, &pool[byte_off + idx * 4], 4);
    return f;
}

/* Two sequences over three steps (as in tests/test_kernels.c): step 1 prefills seq0 0..29 and
 * seq1 0..4 (T=35), step 2 mixes seq0's decode token 30 with seq1's prefill chunk 5..40 (T=37),
 * step 3 decodes seq1 at 41 (T=1). Scattered page ids, layer 1 of 2. Attention runs direct and
 * split (+ reduce); both are checked. */
static void test_attn(ctx *c, const attn_case &a) {
    const int H = a.H, KV = a.KV, D = a.D, MAXP = 4, NPAGES = 9, W = (H + 2 * KV) * D, es = a.kvb ? 2 : 4;
    const uint64_t layer_bytes = 2ull * KV * TPS * D * es, page_bytes = 2 * layer_bytes;
    const int ptab[2 * 4] = {7, 2, 5, 0, 3, 8, 1, 6};
    uint8_t *dpool;
    int *dptab;
    CK(cudaMalloc(&dpool, NPAGES * page_bytes));
    CK(cudaMemset(dpool, 0xff, NPAGES * page_bytes)); /* NaN everywhere unwritten */
    CK(cudaMalloc(&dptab, sizeof ptab));
    CK(cudaMemcpy(dptab, ptab, sizeof ptab, cudaMemcpyHostToDevice));
    std::vector<float> qn, kn;
    fill(c, qn, D, false), fill(c, kn, D, false);
    for (int i = 0; i < D; i++) qn[i] = 1 + 0.5f * qn[i], kn[i] = 1 + 0.5f * kn[i];
    float *dqn = (float *)upload(qn, false), *dkn = (float *)upload(kn, false);
    std::vector<double> invf(D / 2, 0.0); /* partial rotary: frequencies of the rotary dims, the rest 0 */
    for (int i = 0; i < a.rot / 2; i++) invf[i] = pow(10000.0, -2.0 * i / a.rot);
    double *dinvf;
    CK(cudaMalloc(&dinvf, D / 2 * 8));
    CK(cudaMemcpy(dinvf, invf.data(), D / 2 * 8, cudaMemcpyHostToDevice));
    /* step 2 is a decode step (one token per sequence): the fused rope + split kernel runs first
     * (on pool rows still NaN), and must match rope_kv + split bit for bit */
    int steps[3][2][2] = {{{0, 30}, {0, 5}}, {{30, 31}, {5, 41}}, {{31, 32}, {41, 42}}};
    for (int st = 0; st < 3; st++) {
        std::vector<int> pos, seq;
        for (int s = 0; s < 2; s++)
            for (int p = steps[st][s][0]; p < steps[st][s][1]; p++) pos.push_back(p), seq.push_back(s);
        int T = (int)pos.size();
        std::vector<float> qkv;
        fill(c, qkv, (size_t)T * W, false, 2.0f);
        float *dqkv = (float *)upload(qkv, false), *dqo, *dws;
        int *dpos, *dseq;
        void *dout, *dout2;
        CK(cudaMalloc(&dqo, (size_t)T * H * D * 4));
        CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
        CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&dout, (size_t)T * H * D * 4)); CK(cudaMalloc(&dout2, (size_t)T * H * D * 4));
        CK(cudaMalloc(&dws, IG_AT_WS_FLOATS(T, H, D, a.split) * 4));
        unsigned *dcnt;
        CK(cudaMalloc(&dcnt, IG_AT_COUNTERS(T, KV) * 4));
        CK(cudaMemset(dcnt, 0, IG_AT_COUNTERS(T, KV) * 4));
        unsigned long long loff = layer_bytes;
        int maxp = MAXP;
        void *dout3 = NULL;
        if (st == 2) {
            CK(cudaMalloc(&dout3, (size_t)T * H * D * 4));
            void *args[] = {&T, &dqkv, &dinvf, &dqn, &dkn, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dws, &dcnt, &dout3};
            launch(a.at_split_rope, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, a.split)), dim3(IG_AT_BLOCK),
                   IG_AT_SMEM(H, KV, D), args);
            CK(cudaDeviceSynchronize());
        }
        {
            void *args[] = {&T, &dqkv, &dinvf, &dqn, &dkn, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp};
            launch(a.rk, dim3(IG_RK_GRID_X(T, H, KV), IG_RK_GRID_Y(T)), dim3(IG_RK_BLOCK(D)), IG_RK_SMEM(T), args);
        }
        {
            void *args[] = {&T, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dout};
            launch(a.at, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), 1), dim3(IG_AT_BLOCK), IG_AT_SMEM(H, KV, D), args);
            void *args2[] = {&T, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dws, &dcnt, &dout2};
            /* twice: the last CTA of each group must leave its counter at zero for the next launch */
            for (int rep = 0; rep < 2; rep++) {
                if (rep) CK(cudaMemset(dout2, 0, (size_t)T * H * D * (a.ob ? 2 : 4)));
                launch(a.at_split, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, a.split)), dim3(IG_AT_BLOCK),
                       IG_AT_SMEM(H, KV, D), args2);
            }
        }
        CK(cudaDeviceSynchronize());
        std::vector<float> qo = download(dqo, (size_t)T * H * D, false);
        std::vector<uint8_t> pool(NPAGES * page_bytes);
        CK(cudaMemcpy(pool.data(), dpool, pool.size(), cudaMemcpyDeviceToHost));
        char what[160];
        checker k;
        snprintf(what, sizeof what, "rope_kv %s step %d T=%d", a.name, st, T);
        chk_init(&k, what);
        for (int t = 0; t < T; t++) {
            size_t base = ptab[seq[t] * MAXP + pos[t] / TPS] * page_bytes + layer_bytes;
            int slot = pos[t] % TPS;
            for (int h = 0; h < H + 2 * KV; h++) {
                const float *v = &qkv[(size_t)t * W + h * D];
                double r[512], s = 1;
                const float *g = h < H ? qn.data() : kn.data();
                bool nrm = a.qkn && h < H + KV;
                if (nrm) {
                    double ss = 0;
                    for (int i = 0; i < D; i++) ss += (double)v[i] * v[i];
                    s = 1 / sqrt(ss / D + 1e-6);
                }
                for (int i = 0; i < D / 2; i++) {
                    /* pair i: rotated (i, i + rot/2) or (2i, 2i+1), past rot/2 two pass-through dims */
                    const int ia = i >= a.rot / 2 ? a.rot + 2 * (i - a.rot / 2) : a.il ? 2 * i : i;
                    const int ib = i >= a.rot / 2 ? ia + 1 : a.il ? 2 * i + 1 : i + a.rot / 2;
                    double x0 = v[ia] * s, x1 = v[ib] * s;
                    if (nrm) x0 *= g[ia], x1 *= g[ib];
                    if (h < H + KV && i < a.rot / 2) {
                        double an = pos[t] * invf[i], cs = (float)cos(an), sn = (float)sin(an);
                        r[ia] = x0 * cs - x1 * sn, r[ib] = x1 * cs + x0 * sn;
                    } else if (h < H + KV) {
                        r[ia] = x0, r[ib] = x1;
                    } else {
                        r[ia] = v[ia], r[ib] = v[ib];
                    }
                }
                for (int i = 0; i < D; i++) {
                    double got;
                    if (h < H) got = qo[(size_t)t * H * D + h * D + i];
                    else if (h < H + KV) got = pool_get(pool, base, ((size_t)(h - H) * TPS + slot) * D + i, a.kvb);
                    else got = pool_get(pool, base, (size_t)KV * TPS * D + ((size_t)(h - H - KV) * TPS + slot) * D + i, a.kvb);
                    double tol = 1e-5 * (1 + fabs(r[i])) + (h >= H && a.kvb ? fabs(r[i]) / 256 : 0);
                    chk(&k, ((long)t * (H + 2 * KV) + h) * D + i, got, r[i], tol);
                }
            }
        }
        chk_done(c, &k);
        /* attention reference from the q_out and the K/V the pool holds (double softmax) */
        std::vector<float> o1 = download(dout, (size_t)T * H * D, a.ob), o2 = download(dout2, (size_t)T * H * D, a.ob);
        if (dout3) {
            /* the same queries (rope.cuh's arithmetic, in shared memory) and keys: the same bits */
            std::vector<float> o3 = download(dout3, (size_t)T * H * D, a.ob);
            checker k3;
            char w3[160];
            snprintf(w3, sizeof w3, "attention split_rope (fused) %s step %d T=%d", a.name, st, T);
            chk_init(&k3, w3);
            for (size_t i = 0; i < o3.size(); i++) chk(&k3, (long)i, o3[i], o2[i], 0);
            chk_done(c, &k3);
            CK(cudaFree(dout3));
        }
        checker k1, k2;
        char w1[160], w2[160];
        snprintf(w1, sizeof w1, "attention %s step %d T=%d", a.name, st, T);
        snprintf(w2, sizeof w2, "attention split%d %s step %d T=%d", a.split, a.name, st, T);
        chk_init(&k1, w1), chk_init(&k2, w2);
        const int G = H / KV;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                int kh = h / G, n = pos[t] + 1, lo = a.win > 0 && pos[t] >= a.win ? pos[t] - a.win + 1 : 0;
                std::vector<double> sc(n), o(D, 0.0);
                double mx = -1e300, l = 0;
                for (int j = lo; j < n; j++) {
                    size_t base = ptab[seq[t] * MAXP + j / TPS] * page_bytes + layer_bytes;
                    double s = 0;
                    for (int i = 0; i < D; i++)
                        s += (double)qo[(size_t)t * H * D + h * D + i] * pool_get(pool, base, ((size_t)kh * TPS + j % TPS) * D + i, a.kvb);
                    sc[j] = s * a.scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = lo; j < n; j++) {
                    size_t base = ptab[seq[t] * MAXP + j / TPS] * page_bytes + layer_bytes;
                    double p = exp(sc[j] - mx);
                    l += p;
                    for (int i = 0; i < D; i++) o[i] += p * pool_get(pool, base, (size_t)KV * TPS * D + ((size_t)kh * TPS + j % TPS) * D + i, a.kvb);
                }
                for (int i = 0; i < D; i++) {
                    double ref = o[i] / l, tol = 2e-5 + (a.ob ? fabs(ref) / 256 : 0);
                    size_t idx = (size_t)t * H * D + h * D + i;
                    chk(&k1, (long)idx, o1[idx], ref, tol);
                    chk(&k2, (long)idx, o2[idx], ref, tol);
                }
            }
        chk_done(c, &k1), chk_done(c, &k2);
        CK(cudaFree(dqkv)); CK(cudaFree(dqo)); CK(cudaFree(dpos)); CK(cudaFree(dseq));
        CK(cudaFree(dout)); CK(cudaFree(dout2)); CK(cudaFree(dws)); CK(cudaFree(dcnt));
    }
    CK(cudaFree(dpool)); CK(cudaFree(dptab)); CK(cudaFree(dqn)); CK(cudaFree(dkn)); CK(cudaFree(dinvf));
}

/* ------------------------------------------------------------------ timings */

/* Fills n bf16 with hash-based pseudo-random values in [-1, 1) (pools of GBs, no host copy). */
__global__ void fill_bf16(unsigned short *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        p[i] = ig_f32_to_bf16((float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f);
    }
}

/* Median-free simple timing: warm-up, then `iters` launches of fn(i) between two events. */
template <typename F>
static double time_us(F fn, int iters) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) fn(i);
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; i++) fn(i);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    return ms * 1000.0 / iters;
}

static double bench_copy(void) {
    const size_t n = 1ull << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    double us = time_us([&](int) { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 10);
    CK(cudaFree(a)); CK(cudaFree(b));
    double gbs = 2.0 * n / (us * 1e-6) / 1e9;
    printf("bench cudaMemcpy D2D 1 GiB: %.1f us, %.0f GB/s (read + write)\n", us, gbs);
    return gbs;
}

/* tc: the tensor-core GEMV (gemv_tc.cu), timed at T = 8 only; norm_sw: its fused-RMSNorm SwiGLU
 * instance (x f32, gamma of ones) */
static void bench_mv(ctx *c, const char *name, const void *fn, int N, int K, double copy_gbs, bool tc = false,
                     bool norm_sw = false, int wq = 0) {
    const int Np = IG_NPAD16(N);
    const int grid = tc   ? IG_MVT_GRID_X(N, K, norm_sw, g_sms * IG_MV_CTAS_PER_SM)
                     : wq ? IG_MV_GRID_XB(N, IG_WQ_CODEB(K, wq), g_sms * IG_MV_CTAS_PER_SM)
                          : IG_MV_GRID_X(N, K, 2, g_sms * IG_MV_CTAS_PER_SM);
    const size_t wbytes = wq ? (size_t)Np * IG_WQ_ROWB(K, wq, 32) : (size_t)Np * K * 2;
    const int ncopy = (int)(512ull * 1024 * 1024 / wbytes) + 2; /* > 512 MB in rotation: not L2 */
    std::vector<void *> ws(ncopy);
    for (int i = 0; i < ncopy; i++) {
        CK(cudaMalloc(&ws[i], wbytes));
        CK(cudaMemset(ws[i], 0x3c, wbytes)); /* bf16 ~0.0117 */
    }
    std::vector<float> x, ones((size_t)K, 1.0f);
    fill(c, x, (size_t)8 * K, !norm_sw);
    void *dx = upload(x, !norm_sw), *dy, *dg = upload(ones, false);
    CK(cudaMalloc(&dy, (size_t)8 * N * 4));
    const int smem = tc ? IG_MVT_SMEM(K, norm_sw) : IG_MV_SMEM(K, 2);
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (int T = tc ? 8 : 1; T <= 8; T += 7) {
        void *w;
        const float *bias = NULL;
        const float *gamma = norm_sw ? (const float *)dg : NULL;
        void *args[] = {&T, &dx, &gamma, &w, &bias, &dy};
        double us = time_us(
            [&](int i) {
                w = ws[i % ncopy];
                CK(cudaLaunchKernel(fn, dim3(grid), dim3(IG_MV_BLOCK), args, smem, 0));
            },
            50);
        CK(cudaGetLastError());
        double gbs = (wbytes + (size_t)T * K * (norm_sw ? 4 : 2) + (size_t)T * N * 4) / (us * 1e-6) / 1e9;
        printf("bench gemv%s %-22s N=%-6d K=%-5d T=%d: %8.2f us  %6.0f GB/s  %5.1f%% of copy BW (%d CTAs)\n",
               tc ? "_tc" : wq == 8 ? "_q8r" : wq == 4 ? "_q4r" : "", name, N, K, T, us, gbs, 100.0 * gbs / copy_gbs, grid);
    }
    for (auto p : ws) CK(cudaFree(p));
    CK(cudaFree(dx)); CK(cudaFree(dy)); CK(cudaFree(dg));
}

/* The expert-grouped products of one MoE block at Qwen3-30B-A3B's shape (hidden 2048, 128 experts of
 * 768, top-8, bf16) for a T-token prefill step, experts chosen uniformly at random: gate/up (with the
 * rows' rounding / gathering) and down on mma.sync (_xround + _gu_tc, _down_tc) and, where the image has
 * wgmma, on the warp-specialized warpgroups (_xgather + _gu_wg, _down_wg): us a call and TFLOP/s of
 * the useful products (2 T K D 2I and 2 T K I D) against the 989 TFLOP/s bf16 dense peak. */
static void bench_moe_prefill(ctx *c, const moe_fns &f, int T) {
    const int D = 2048, E = 128, K = 8, I = 768;
    std::vector<float> x;
    fill(c, x, (size_t)T * D, false, 1.0f);
    std::vector<int> sel((size_t)T * K);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            int e;
            do e = (int)((frand(c) + 1.0f) * 0.5f * E) % E;
            while (std::find(&sel[(size_t)t * K], &sel[(size_t)t * K + k], e) != &sel[(size_t)t * K + k]);
            sel[(size_t)t * K + k] = e;
        }
    std::vector<float> wtv((size_t)T * K, 0.125f);
    float *dx = (float *)upload(x, false), *dwt = (float *)upload(wtv, false), *dy;
    void *dgu, *ddn, *dh, *xb;
    int *dsel, *doff, *dlist;
    const size_t ngu = (size_t)E * 2 * I * D * 2, ndn = (size_t)E * D * I * 2;
    CK(cudaMalloc(&dgu, ngu)); CK(cudaMalloc(&ddn, ndn));
    CK(cudaMemset(dgu, 0x3c, ngu)); CK(cudaMemset(ddn, 0x3c, ndn));
    CK(cudaMalloc(&dsel, (size_t)T * K * 4)); CK(cudaMalloc(&doff, 2 * (E + 1) * 4)); CK(cudaMalloc(&dlist, (size_t)T * K * 4));
    CK(cudaMemcpy(dsel, sel.data(), sel.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dh, (size_t)T * K * I * 2)); CK(cudaMalloc(&xb, (size_t)T * D * 2)); CK(cudaMalloc(&dy, (size_t)T * K * D * 4));
    int Tv = T;
    void *a0[] = {&Tv, &dsel, &doff, &dlist};
    launch(f.group, dim3(1), dim3(1024), 0, a0);
    const unsigned ty = (unsigned)IG_MO_TC_GRID_Y(T, K, E);
    void *ax[] = {&Tv, &dx, &xb}, *a2[] = {&Tv, &xb, &doff, &dlist, &dgu, &dh}, *a3[] = {&Tv, &dh, &doff, &dlist, &dwt, &ddn, &dy};
    const double gf = 2.0 * T * K * D * 2 * I, df = 2.0 * T * K * I * D;
    const double tgu = time_us([&](int) {
        launch(f.xr, dim3(IG_MO_SUM_GRID_X(D), T), dim3(IG_MO_BLOCK), 0, ax);
        launch(f.tgu, dim3(IG_MO_TC_GU_GRID_X(I), ty), dim3(IG_MO_TC_THREADS), IG_MO_TC_SMEM, a2);
    }, 20);
    const double tdn = time_us([&](int) {
        launch(f.tdn, dim3(IG_MO_TC_DN_GRID_X(D), ty), dim3(IG_MO_TC_THREADS), IG_MO_TC_SMEM, a3);
    }, 20);
    printf("bench moe prefill Qwen3-30B-A3B block T=%d mma.sync: gate/up %7.1f us %5.1f TFLOP/s, down %7.1f us %5.1f TFLOP/s\n", T,
           tgu, gf / tgu * 1e-6, tdn, df / tdn * 1e-6);
    int built = 0;
    CK(cudaMemcpyFromSymbol(&built, ig_wg_built, sizeof built));
    if (built) {
        moe_wg_maps m = moe_maps(dy, dgu, dh, ddn, T, D, E, K, I);
        void *ag[] = {&Tv, &dx, &dlist, &dy}, *w2[] = {&Tv, &doff, &dh, &m.x, &m.gu}, *w3[] = {&Tv, &doff, &dlist, &dwt, &dy, &m.h, &m.dn};
        const double wgu = time_us([&](int) {
            launch(f.xg, dim3((unsigned)IG_MO_XG_GRID(T, K, D)), dim3(IG_MO_BLOCK), 0, ag);
            launch(f.wgu, dim3(IG_MO_WG_GU_GRID_X(I), ty), dim3(IG_MO_WG_THREADS), IG_MO_WG_SMEM, w2);
        }, 20);
        const double wxg = time_us([&](int) {
            launch(f.xg, dim3((unsigned)IG_MO_XG_GRID(T, K, D)), dim3(IG_MO_BLOCK), 0, ag);
        }, 20);
        const double wdn = time_us([&](int) {
            launch(f.wdn, dim3(IG_MO_WG_DN_GRID_X(D), ty), dim3(IG_MO_WG_THREADS), IG_MO_WG_SMEM, w3);
        }, 20);
        printf("bench moe prefill Qwen3-30B-A3B block T=%d wgmma ws: gate/up %7.1f us %5.1f TFLOP/s (_xgather %.1f us), down %7.1f us "
               "%5.1f TFLOP/s; %.1f%% / %.1f%% of 989\n", T, wgu, gf / wgu * 1e-6, wxg, wdn, df / wdn * 1e-6,
               100 * gf / wgu * 1e-6 / 989, 100 * df / wdn * 1e-6 / 989);
    }
    CK(cudaGetLastError());
    for (void *p : {(void *)dx, (void *)dwt, (void *)dy, dgu, ddn, dh, xb, (void *)dsel, (void *)doff, (void *)dlist}) CK(cudaFree(p));
}

/* One MoE block's decode step at Qwen3-30B-A3B's shape (hidden 2048, 128 experts of 768, top-8,
 * bf16), T tokens: the two-launch path (_dgu, _ddown) against the per-op one (_logits, _select,
 * _gu, _down). Each launch takes the next of 64 token sets, so the selected experts change (the
 * 1.2 GB of experts do not fit L2); bytes = the router plus the distinct selected experts of the
 * sets (counted from the last run's choices), against the measured copy bandwidth. */
static void bench_moe_dec(ctx *c, const moe_fns &f, int T, double copy_gbs) {
    const int D = 2048, E = 128, K = 8, I = 768, NS = 64;
    std::vector<float> x, rt;
    fill(c, x, (size_t)NS * T * D, false, 2.0f), fill(c, rt, (size_t)E * D, false, 0.5f);
    float *dx = (float *)upload(x, false), *drt = (float *)upload(rt, false), *dr, *dwt, *dlg;
    void *dgu, *ddn, *dh;
    int *dsel;
    unsigned *dsync;
    const size_t ngu = (size_t)E * 2 * I * D * 2, ndn = (size_t)E * D * I * 2;
    CK(cudaMalloc(&dgu, ngu)); CK(cudaMalloc(&ddn, ndn));
    CK(cudaMemset(dgu, 0x3c, ngu)); CK(cudaMemset(ddn, 0x3c, ndn)); /* bf16 ~0.0117 */
    CK(cudaMalloc(&dr, (size_t)T * D * 4)); CK(cudaMemset(dr, 0, (size_t)T * D * 4));
    CK(cudaMalloc(&dsel, (size_t)NS * T * K * 4)); CK(cudaMalloc(&dwt, (size_t)T * K * 4));
    CK(cudaMalloc(&dlg, (size_t)T * E * 4)); CK(cudaMalloc(&dh, (size_t)T * K * I * 2));
    CK(cudaMalloc(&dsync, 8)); CK(cudaMemset(dsync, 0, 8));
    int Tv = T;
    const float *xi, *gnull = nullptr;
    float eps = 1e-6f;
    int *si;
    void *a1[] = {&Tv, &xi, &gnull, &eps, &drt, &dlg, &si, &dwt, &dgu, &dh, &dsync}, *a2[] = {&Tv, &dh, &si, &dwt, &ddn, &dr};
    void *al[] = {&Tv, &xi, &drt, &dlg}, *as[] = {&Tv, &dlg, &si, &dwt}, *ag[] = {&Tv, &xi, &si, &dgu, &dh};
    auto at = [&](int i) { xi = dx + (size_t)(i % NS) * T * D, si = dsel + (size_t)(i % NS) * T * K; };
    const double us2 = time_us([&](int i) {
        at(i);
        CK(cudaLaunchKernel(f.dgu, dim3(g_sms), dim3(IG_MO_DBLOCK), a1, IG_MO_DSMEM(T, D, 2), 0));
        CK(cudaLaunchKernel(f.ddn, dim3(g_sms), dim3(IG_MO_DBLOCK), a2, 0, 0));
    }, 200);
    const double us4 = time_us([&](int i) {
        at(i);
        CK(cudaLaunchKernel(f.lg, dim3(IG_MO_LG_GRID_X(E), T), dim3(IG_MO_BLOCK), al, 0, 0));
        CK(cudaLaunchKernel(f.slc, dim3(T), dim3(32), as, 0, 0));
        CK(cudaLaunchKernel(f.gu, dim3(IG_MO_GU_GRID_X(I), IG_MO_GU_GRID_Y(T, K)), dim3(IG_MO_BLOCK), ag, 0, 0));
        CK(cudaLaunchKernel(f.dn, dim3(IG_MO_DN_GRID_X(D), IG_MO_DN_GRID_Y(T)), dim3(IG_MO_BLOCK), a2, 0, 0));
    }, 200);
    CK(cudaGetLastError());
    std::vector<int> hs((size_t)NS * T * K);
    CK(cudaMemcpy(hs.data(), dsel, hs.size() * 4, cudaMemcpyDeviceToHost));
    double experts = 0;
    for (int s = 0; s < NS; s++) {
        std::vector<char> seen(E, 0);
        for (int j = 0; j < T * K; j++) {
            const int e = hs[(size_t)s * T * K + j];
            if (e >= 0 && e < E && !seen[e]) seen[e] = 1, experts++;
        }
    }
    experts /= NS;
    const double bytes = (double)E * D * 4 + experts * 3.0 * I * D * 2;
    const double gb2 = bytes / (us2 * 1e-6) / 1e9, gb4 = bytes / (us4 * 1e-6) / 1e9;
    printf("bench moe decode Qwen3-30B-A3B block T=%d (%.1f experts, %.1f MB): two launches %7.2f us %5.0f GB/s "
           "(%4.1f%% of copy BW) | per-op four %7.2f us %5.0f GB/s (%4.1f%%)\n",
           T, experts, bytes / 1e6, us2, gb2, 100.0 * gb2 / copy_gbs, us4, gb4, 100.0 * gb4 / copy_gbs);
    CK(cudaFree(dx)); CK(cudaFree(drt)); CK(cudaFree(dr)); CK(cudaFree(dwt)); CK(cudaFree(dlg)); CK(cudaFree(dgu));
    CK(cudaFree(ddn)); CK(cudaFree(dh)); CK(cudaFree(dsel)); CK(cudaFree(dsync));
}

/* Decode attention, Llama-3-8B shapes (H 32, KV 8, D 128, bf16 KV, page 16): T sequences of
 * context ctx, one decode token each; layers rotate (32 per page) so the KV is read from HBM.
 * Also checks the first token of the last layer against the host reference. */
static void bench_attn(ctx *c, int T, int ctx_len, double copy_gbs) {
    const int H = 32, KV = 8, D = 128, PS = 16, L = PERF_LAYERS;
    const size_t layer_bytes = 2ull * KV * PS * D * 2, page_bytes = layer_bytes * L;
    const int maxp = (ctx_len + PS - 1) / PS, npages = maxp * T;
    uint8_t *dpool;
    CK(cudaMalloc(&dpool, npages * page_bytes));
    fill_bf16<<<4096, 256>>>((unsigned short *)dpool, npages * page_bytes / 2, 12345u);
    CK(cudaGetLastError());
    std::vector<int> ptab(npages), pos(T), seq(T);
    for (int i = 0; i < npages; i++) ptab[i] = (int)((i * 7919ull) % npages); /* scattered */
    for (int t = 0; t < T; t++) pos[t] = ctx_len - 1 - t, seq[t] = t;
    std::vector<float> q;
    fill(c, q, (size_t)T * H * D, false);
    float *dq = (float *)upload(q, false), *dws;
    int *dptab, *dpos, *dseq;
    void *dout;
    CK(cudaMalloc(&dptab, npages * 4)); CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
    CK(cudaMemcpy(dptab, ptab.data(), npages * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, (size_t)T * H * D * 2)); CK(cudaMalloc(&dws, IG_AT_WS_FLOATS(T, H, D, PERF_SPLIT) * 4));
    unsigned *dcnt;
    CK(cudaMalloc(&dcnt, IG_AT_COUNTERS(T, KV) * 4));
    CK(cudaMemset(dcnt, 0, IG_AT_COUNTERS(T, KV) * 4));
    unsigned long long loff = 0;
    int Tv = T, mp = maxp;
    void *args[] = {&Tv, &dq, &dpool, &loff, &dpos, &dseq, &dptab, &mp, &dout};
    void *args2[] = {&Tv, &dq, &dpool, &loff, &dpos, &dseq, &dptab, &mp, &dws, &dcnt, &dout};
    const size_t smem = IG_AT_SMEM(H, KV, D);
    double bytes = 0;
    for (int t = 0; t < T; t++) bytes += (double)(pos[t] + 1) * KV * D * 2 * 2;
    double us_d = time_us(
        [&](int i) {
            loff = (unsigned long long)(i % L) * layer_bytes;
            CK(cudaLaunchKernel((const void *)at_perf, dim3(KV, T, 1), dim3(IG_AT_BLOCK), args, smem, 0));
        },
        64);
    double us_s = time_us(
        [&](int i) {
            loff = (unsigned long long)(i % L) * layer_bytes;
            CK(cudaLaunchKernel((const void *)at_perf_split, dim3(KV, T, 16), dim3(IG_AT_BLOCK), args2, smem, 0));
        },
        64);
    CK(cudaGetLastError());
    printf("bench attention H32 KV8 D128 bf16 T=%d ctx=%-5d direct: %8.2f us %6.0f GB/s (%4.1f%%) | split16 (merged in): %8.2f us %6.0f GB/s (%4.1f%%)\n",
           T, ctx_len, us_d, bytes / (us_d * 1e-6) / 1e9, 100.0 * bytes / (us_d * 1e-6) / 1e9 / copy_gbs, us_s,
           bytes / (us_s * 1e-6) / 1e9, 100.0 * bytes / (us_s * 1e-6) / 1e9 / copy_gbs);
    /* loff is now that of the last launch; check token 0 of the split result against the host */
    CK(cudaDeviceSynchronize());
    std::vector<float> o = download(dout, (size_t)T * H * D, true);
    /* the checked layer of sequence 0's pages, as consecutive host "pages" of layer_bytes */
    std::vector<uint8_t> pool((size_t)maxp * layer_bytes);
    for (int p = 0; p < maxp; p++)
        CK(cudaMemcpy(&pool[(size_t)p * layer_bytes], dpool + (size_t)ptab[p] * page_bytes + loff, layer_bytes, cudaMemcpyDeviceToHost));
    char what[160];
    snprintf(what, sizeof what, "attention perf T=%d ctx=%d (split, token 0)", T, ctx_len);
    checker k;
    chk_init(&k, what);
    for (int h = 0; h < H; h++) {
        int kh = h / (H / KV), n = pos[0] + 1;
        std::vector<double> sc(n), acc(D, 0.0);
        double mx = -1e300, l = 0;
        for (int j = 0; j < n; j++) {
            size_t base = (size_t)(j / PS) * layer_bytes;
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)q[h * D + i] * pool_get(pool, base, ((size_t)kh * PS + j % PS) * D + i, true);
            sc[j] = s * 0.08838834764831845;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = 0; j < n; j++) {
            size_t base = (size_t)(j / PS) * layer_bytes;
            double p = exp(sc[j] - mx);
            l += p;
            for (int i = 0; i < D; i++) acc[i] += p * pool_get(pool, base, (size_t)KV * PS * D + ((size_t)kh * PS + j % PS) * D + i, true);
        }
        for (int i = 0; i < D; i++) chk(&k, h * D + i, o[h * D + i], acc[i] / l, 2e-5 + fabs(acc[i] / l) / 256);
    }
    chk_done(c, &k);
    CK(cudaFree(dpool)); CK(cudaFree(dq)); CK(cudaFree(dws)); CK(cudaFree(dcnt)); CK(cudaFree(dptab)); CK(cudaFree(dpos));
    CK(cudaFree(dseq)); CK(cudaFree(dout));
}

/* ------------------------------------------------------------------ attention_prefill */

struct ap_case {
    const char *name;
    const void *fn;
    int H, KV, D, kvb, ob, ps;
    float scale;
    int win; /* AP_WINDOW (issue 21), 0 = none */
    int hpc; /* AP_HPC: query heads a CTA */
    bool ws; /* has _flash_ws: test_ap runs it too (a launch with the producer warp and the pool's map) */
    int wbn; /* ... on tiles of this many keys */
};
#define APCH(fn, H, KV, D, kvb, ob, ps, scale, win, hpc) \
    { #fn, (const void *)fn, H, KV, D, kvb, ob, ps, scale, win, hpc, fn##_has_ws, fn##_ws_bn }

/* The pool's tensor map for _flash_ws (as host_runtime.c's open_kv_map): rows of D 16-bit elements,
 * boxes of 64 columns x min(PS, 64) rows */
static CUtensorMap ap_map(const void *pool, size_t bytes, int D, int PS) {
    return tile_map2(pool, (unsigned long long)D, bytes / (2 * D), (unsigned)(PS < 64 ? PS : 64));
}
#define APCW(fn, H, KV, D, kvb, ob, ps, scale, win) APCH(fn, H, KV, D, kvb, ob, ps, scale, win, 1)
#define APC(fn, H, KV, D, kvb, ob, ps, scale) APCW(fn, H, KV, D, kvb, ob, ps, scale, 0)

/* A batch as segments: `n` tokens of sequence `seq` at positions start, start + 1, ... */
struct ap_seg {
    int seq, start, n;
};
struct ap_scn {
    const char *name;
    int nseg;
    ap_seg seg[10];
};

/* Host reference of one (token, head) over the pool (double softmax), with the error bound of the
 * bf16 tensor-core path: q and P rounded to bf16 (relative 2^-9, bound with 2^-8). Writes ref[D]
 * and tol[D]. */
static void ap_ref(const std::vector<uint8_t> &pool, const std::vector<int> &ptab, int maxp, size_t page_bytes,
                   size_t loff, int H, int KV, int D, int PS, bool kvb, bool ob, double scale, const float *qh, int h,
                   int seq, int pos, double *ref, double *tol, int win = 0) {
    const int kh = h / (H / KV), n = pos + 1, lo = win > 0 && pos >= win ? pos - win + 1 : 0; /* the window's keys */
    std::vector<double> sc(n), qk(n);
    double mx = -1e300;
    for (int j = lo; j < n; j++) {
        size_t base = (size_t)ptab[(size_t)seq * maxp + j / PS] * page_bytes + loff;
        double sum = 0, a = 0;
        for (int i = 0; i < D; i++) {
            double k = pool_get(pool, base, ((size_t)kh * PS + j % PS) * D + i, kvb);
            sum += (double)qh[i] * k, a += fabs((double)qh[i] * k);
        }
        sc[j] = sum * scale, qk[j] = a * scale;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    double l = 0, es_max = 0;
    std::vector<double> o(D, 0.0), av(D, 0.0);
    for (int j = lo; j < n; j++) {
        sc[j] = exp(sc[j] - mx), l += sc[j];
        es_max = qk[j] / 256 > es_max ? qk[j] / 256 : es_max;
    }
    for (int j = lo; j < n; j++) {
        size_t base = (size_t)ptab[(size_t)seq * maxp + j / PS] * page_bytes + loff;
        for (int i = 0; i < D; i++) {
            double v = pool_get(pool, base, (size_t)KV * PS * D + ((size_t)kh * PS + j % PS) * D + i, kvb);
            o[i] += sc[j] * v, av[i] += sc[j] * fabs(v);
        }
    }
    for (int i = 0; i < D; i++) {
        ref[i] = o[i] / l;
        tol[i] = 3e-5 + 1e-5 * fabs(ref[i]) + (ob ? fabs(ref[i]) / 256 : 0);
        /* dev of v from ref is at most |v| + |ref|: sum p |v - ref| <= av + |ref| */
        if (kvb) tol[i] += av[i] / l / 256 + es_max * (av[i] / l + fabs(ref[i]));
    }
}

/* Runs one scenario on one instance: pool with random K/V for every position a sequence of the
 * batch reaches (everything else NaN, unused page-table entries point at an all-NaN page), random
 * q, output prefilled with NaN (every element must be written). */
static void test_ap(ctx *c, const ap_case &a, const ap_scn &sc, bool ws = false) {
    char what[200];
    std::vector<int> pos, seq;
    for (int i = 0; i < sc.nseg; i++)
        for (int p = 0; p < sc.seg[i].n; p++) pos.push_back(sc.seg[i].start + p), seq.push_back(sc.seg[i].seq);
    const int T = (int)pos.size(), H = a.H, KV = a.KV, D = a.D, PS = a.ps, es = a.kvb ? 2 : 4;
    snprintf(what, sizeof what, "attention_prefill %s%s %s T=%d", a.name, ws ? " ws" : "", sc.name, T);
    if (!sel(what)) return;
    int nseq = 0, maxpos = 0;
    for (int t = 0; t < T; t++) nseq = seq[t] + 1 > nseq ? seq[t] + 1 : nseq, maxpos = pos[t] > maxpos ? pos[t] : maxpos;
    std::vector<int> seqmax(nseq, -1), seqlo(nseq, 1 << 30);
    for (int t = 0; t < T; t++) seqmax[seq[t]] = pos[t] > seqmax[seq[t]] ? pos[t] : seqmax[seq[t]];
    /* with a window: the first key any token of the sequence attends; keys before it stay NaN and
     * pages wholly before it are the NaN page (released pages: the kernel must never read them) */
    for (int t = 0; t < T; t++) {
        const int lo = a.win > 0 && pos[t] >= a.win ? pos[t] - a.win + 1 : 0;
        seqlo[seq[t]] = lo < seqlo[seq[t]] ? lo : seqlo[seq[t]];
    }
    const int maxp = maxpos / PS + 2, npages = nseq * maxp + 1, nan_page = npages - 1;
    const size_t layer_bytes = 2ull * KV * PS * D * es, page_bytes = 2 * layer_bytes, loff = layer_bytes;
    /* scattered page ids: a permutation of 0..npages-2 */
    std::vector<int> perm(npages - 1), ptab((size_t)nseq * maxp, nan_page);
    for (int i = 0; i < npages - 1; i++) perm[i] = i;
    for (int i = npages - 2; i > 0; i--) {
        int j = (int)((frand(c) + 1.0f) * 0.5f * (i + 1));
        j = j > i ? i : j;
        int tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    int used = 0;
    std::vector<uint8_t> pool((size_t)npages * page_bytes, 0xff);
    for (int s = 0; s < nseq; s++) {
        if (seqmax[s] < 0) continue;
        for (int pg = seqlo[s] / PS; pg <= seqmax[s] / PS; pg++) ptab[(size_t)s * maxp + pg] = perm[used++];
        for (int j = seqlo[s]; j <= seqmax[s]; j++) {
            size_t base = (size_t)ptab[(size_t)s * maxp + j / PS] * page_bytes + loff;
            for (int kh = 0; kh < KV; kh++)
                for (int i = 0; i < D; i++)
                    for (int kv = 0; kv < 2; kv++) {
                        float v = frand(c);
                        size_t idx = (size_t)kv * KV * PS * D + ((size_t)kh * PS + j % PS) * D + i;
                        if (a.kvb) {
                            uint16_t hv = h_f2b(v);
                            memcpy(&pool[base + idx * 2], &hv, 2);
                        } else {
                            memcpy(&pool[base + idx * 4], &v, 4);
                        }
                    }
        }
    }
    std::vector<float> q;
    fill(c, q, (size_t)T * H * D, false, 2.0f);
    uint8_t *dpool;
    int *dptab, *dpos, *dseq;
    CK(cudaMalloc(&dpool, pool.size()));
    CK(cudaMemcpy(dpool, pool.data(), pool.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dptab, ptab.size() * 4)); CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
    CK(cudaMemcpy(dptab, ptab.data(), ptab.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
    float *dq = (float *)upload(q, false);
    void *dout;
    const size_t on = (size_t)T * H * D;
    CK(cudaMalloc(&dout, on * 4));
    CK(cudaMemset(dout, 0xff, on * 4)); /* NaN (f32 and bf16) */
    unsigned long long lo = loff;
    int Tv = T, mp = maxp;
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    if (ws) map = ap_map(dpool, pool.size(), D, PS);
    void *args[] = {&Tv, &dq, &dpool, &lo, &dpos, &dseq, &dptab, &mp, &dout, &map};
    if (ws)
        launch(a.fn, dim3(IG_AP_GRID_XH(H, a.hpc), IG_AP_GRID_Y(T)), dim3(IG_AP_BLOCKW(a.hpc)), IG_AP_SMEM_WS(D, a.hpc, a.wbn), args);
    else
        launch(a.fn, dim3(IG_AP_GRID_XH(H, a.hpc), IG_AP_GRID_Y(T)), dim3(IG_AP_BLOCKH(a.hpc)), IG_AP_SMEM_H(D, a.hpc), args);
    CK(cudaDeviceSynchronize());
    std::vector<float> o = download(dout, on, a.ob);
    checker k;
    chk_init(&k, what);
    std::vector<double> ref(D), tol(D);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            ap_ref(pool, ptab, maxp, page_bytes, loff, H, KV, D, PS, a.kvb, a.ob, a.scale, &q[((size_t)t * H + h) * D], h,
                   seq[t], pos[t], ref.data(), tol.data(), a.win);
            for (int i = 0; i < D; i++) {
                size_t idx = ((size_t)t * H + h) * D + i;
                chk(&k, (long)idx, o[idx], ref[i], tol[i]);
            }
        }
    chk_done(c, &k);
    if (k.nbad) {
        long b = k.first_bad;
        int t = (int)(b / ((long)H * D)), h = (int)(b / D % H), i = (int)(b % D), run = 1;
        for (int u = t - 1; u >= 0 && seq[u] == seq[t] && pos[u] == pos[u + 1] - 1; u--) run++;
        for (int u = t + 1; u < T && seq[u] == seq[t] && pos[u] == pos[u - 1] + 1; u++) run++;
        printf("     first bad: token %d (tile %d row %d, seq %d pos %d, run of %d) head %d d %d\n", t, t / IG_AP_BM,
               t % IG_AP_BM, seq[t], pos[t], run, h, i);
        long nb_nan = 0;
        for (int u = 0; u < T; u++) {
            bool bad = false;
            for (size_t x = (size_t)u * H * D; x < (size_t)(u + 1) * H * D; x++) bad |= o[x] != o[x];
            nb_nan += bad;
        }
        printf("     tokens with NaN outputs (unwritten or NaN read): %ld of %d\n", nb_nan, T);
    }
    CK(cudaFree(dpool)); CK(cudaFree(dptab)); CK(cudaFree(dpos)); CK(cudaFree(dseq)); CK(cudaFree(dq));
    CK(cudaFree(dout));
}

/* Prefill of one sequence of T tokens (positions 0..T-1), H32 KV8, bf16 KV and output: flash vs the
 * direct kernel, TFLOP/s over the causal flops 4 * T * T/2 * H * D; checks a few tokens of the
 * flash output against the host. */
static void bench_ap(ctx *c, int D, const void *ap, const void *at, int T, int hpc = 1, bool ws = false, int wbn = 64,
                     const char *tag = "") {
    char what[200];
    snprintf(what, sizeof what, "bench_prefill attention H32 KV8 D%d T=%d heads a CTA %d%s%s", D, T, hpc, ws ? " ws" : "", tag);
    if (!sel(what)) return;
    const int H = 32, KV = 8, PS = 16, maxp = (T + PS - 1) / PS, npages = maxp;
    const size_t page_bytes = 2ull * KV * PS * D * 2;
    uint8_t *dpool;
    CK(cudaMalloc(&dpool, npages * page_bytes));
    fill_bf16<<<4096, 256>>>((unsigned short *)dpool, npages * page_bytes / 2, 777u);
    CK(cudaGetLastError());
    std::vector<int> ptab(maxp), pos(T), seq(T, 0);
    for (int i = 0; i < maxp; i++) ptab[i] = (int)((i * 7919ull) % npages);
    for (int t = 0; t < T; t++) pos[t] = t;
    std::vector<float> q;
    fill(c, q, (size_t)T * H * D, false, 2.0f);
    float *dq = (float *)upload(q, false);
    int *dptab, *dpos, *dseq;
    void *dout, *dout2;
    CK(cudaMalloc(&dptab, maxp * 4)); CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
    CK(cudaMemcpy(dptab, ptab.data(), maxp * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, (size_t)T * H * D * 2)); CK(cudaMalloc(&dout2, (size_t)T * H * D * 2));
    unsigned long long lo = 0;
    int Tv = T, mp = maxp;
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    if (ws) map = ap_map(dpool, npages * page_bytes, D, PS);
    void *args[] = {&Tv, &dq, &dpool, &lo, &dpos, &dseq, &dptab, &mp, &dout, &map};
    void *args2[] = {&Tv, &dq, &dpool, &lo, &dpos, &dseq, &dptab, &mp, &dout2};
    const int smem = ws ? IG_AP_SMEM_WS(D, hpc, wbn) : IG_AP_SMEM_H(D, hpc), block = ws ? IG_AP_BLOCKW(hpc) : IG_AP_BLOCKH(hpc);
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(ap, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (IG_AT_SMEM(H, KV, D) > 48 * 1024)
        CK(cudaFuncSetAttribute(at, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_AT_SMEM(H, KV, D)));
    double us_f = time_us(
        [&](int) {
            CK(cudaLaunchKernel(ap, dim3(IG_AP_GRID_XH(H, hpc), IG_AP_GRID_Y(T)), dim3(block), args, smem, 0));
        },
        20);
    CK(cudaGetLastError());
    double us_d = time_us(
        [&](int) {
            CK(cudaLaunchKernel(at, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T)), dim3(IG_AT_BLOCK), args2,
                                IG_AT_SMEM(H, KV, D), 0));
        },
        5);
    CK(cudaGetLastError());
    const double fl = 4.0 * T * (T / 2.0) * H * D;
    printf("bench_prefill attention H32 KV8 D%-3d bf16 T=%d one seq, %d heads a CTA%s%s: flash %8.1f us %6.1f TFLOP/s | direct %9.1f us "
           "%6.1f TFLOP/s | speedup %.1fx\n",
           D, T, hpc, ws ? " ws" : "", tag, us_f, fl / (us_f * 1e-6) / 1e12, us_d, fl / (us_d * 1e-6) / 1e12, us_d / us_f);
    CK(cudaDeviceSynchronize());
    std::vector<float> o = download(dout, (size_t)T * H * D, true), o2 = download(dout2, (size_t)T * H * D, true);
    std::vector<uint8_t> pool(npages * page_bytes);
    CK(cudaMemcpy(pool.data(), dpool, pool.size(), cudaMemcpyDeviceToHost));
    snprintf(what, sizeof what, "attention_prefill perf D%d T=%d (tokens 0, 63, 64, 1000, T-1)", D, T);
    checker k, k2;
    chk_init(&k, what);
    char what2[200];
    snprintf(what2, sizeof what2, "attention direct perf D%d T=%d (same tokens)", D, T);
    chk_init(&k2, what2);
    std::vector<double> ref(D), tol(D);
    for (int t : {0, 63, 64, 1000, T - 1}) {
        if (t >= T) continue;
        for (int h = 0; h < H; h++) {
            ap_ref(pool, ptab, maxp, page_bytes, 0, H, KV, D, PS, true, true, D == 128 ? 0.08838834764831845 : 0.125,
                   &q[((size_t)t * H + h) * D], h, 0, t, ref.data(), tol.data());
            for (int i = 0; i < D; i++) {
                size_t idx = ((size_t)t * H + h) * D + i;
                chk(&k, (long)idx, o[idx], ref[i], tol[i]);
                chk(&k2, (long)idx, o2[idx], ref[i], tol[i]);
            }
        }
    }
    chk_done(c, &k), chk_done(c, &k2);
    CK(cudaFree(dpool)); CK(cudaFree(dq)); CK(cudaFree(dptab)); CK(cudaFree(dpos)); CK(cudaFree(dseq));
    CK(cudaFree(dout)); CK(cudaFree(dout2));
}

/* ------------------------------------------------------------------ main */

/* ------------------------------------------------------------------ quantized KV (int8 / uint4) */
#include "test_kvq.cuh"

int main(int argc, char **argv) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    int no_bench = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bench")) no_bench = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--no-bench] [--only <substring of case labels>]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, sm_%d%d, %d SMs, %.0f GB\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           prop.totalGlobalMem / 1e9);
    ctx c = {0, 0x9e3779b97f4a7c15ull};

    g_sms = prop.multiProcessorCount;
    const mv_case mvs[] = {
        MVC(mv_bb_store_bias, 96, 1000, 1, 1, 1, 0, 0, 1000),
        MVC(mv_ff_store, 48, 1000, 0, 0, 0, 0, 0, 1000),
        MVC(mv_bf_acc_bias, 128, 200, 1, 0, 1, 1, 0, 200),
        MVC(mv_fb_acc, 96, 40, 0, 1, 0, 1, 0, 40),
        MVC(mv_bb_swiglu_bias, 128, 96, 1, 1, 1, 2, 1, 48),
        MVC(mv_ff_swiglu, 48, 64, 0, 0, 0, 2, 0, 32),
        MVC(mv_bb_ldy, 64, 48, 1, 1, 0, 0, 0, 80),
        MVC(mv_bb_longk, 8200, 72, 1, 1, 0, 0, 0, 72),
        MVC(mv_fb_2056, 2056, 33, 0, 1, 0, 0, 0, 33),
        MVC(mv_bb_swiglu_big, 2048, 16384, 1, 1, 0, 2, 1, 8192),
        MVC(mv_p_2048_8192, 8192, 2048, 1, 1, 0, 0, 0, 2048),
        MVC(mv_p_128256_2048, 2048, 128256, 1, 1, 0, 0, 0, 128256),
        MVN(mv_bb_norm_swiglu, 1000, 96, 1, 1, 0, 2, 1, 48, 1e-6f),
        MVN(mv_ff_norm_bias, 200, 70, 0, 0, 1, 0, 0, 70, 1e-5f),
        MVC(mv_bb_geglu_bias, 128, 96, 1, 1, 1, 3, 1, 48),
        MVN(mv_ff_norm_geglu, 200, 64, 0, 0, 0, 3, 0, 32, 1e-6f),
        MVT(mvt_norm_geglu, 128, 384, 1, 3, 1, 192, 1, 1e-6f),
        MVN(mv_bb_norm_lmhead, 2048, 5000, 1, 1, 0, 0, 0, 5000, 1e-5f),
        MVT(mvt_store_bias, 96, 1000, 1, 0, 0, 1000, 0, 0.0f),
        MVT(mvt_acc_bias, 128, 200, 1, 1, 0, 200, 0, 0.0f),
        MVT(mvt_swiglu_bias, 128, 96, 1, 2, 1, 48, 0, 0.0f),
        MVT(mvt_ldy, 64, 48, 0, 0, 0, 80, 0, 0.0f),
        MVT(mvt_longk, 8224, 72, 0, 0, 0, 72, 0, 0.0f),
        MVT(mvt_k1056, 1056, 40, 0, 1, 0, 40, 0, 0.0f),
        MVT(mvt_swiglu_big, 2048, 16384, 0, 2, 1, 8192, 0, 0.0f),
        MVT(mvt_p_2048_8192, 8192, 2048, 0, 0, 0, 2048, 0, 0.0f),
        MVT(mvt_norm_swiglu, 992, 96, 0, 2, 1, 48, 1, 1e-6f),
        MVT(mvt_norm_lmhead, 2048, 5000, 0, 0, 0, 5000, 1, 1e-5f),
        MVT(mvt_norm_k4096, 4096, 300, 1, 0, 0, 300, 1, 1e-5f),
        MVTQ(mvtq8_store_bias, 576, 1000, 1, 0, 0, 1000, 0, 0.0f),
        MVTQ(mvtq8_norm_swiglu, 2048, 96, 0, 2, 1, 48, 1, 1e-6f),
        MVTQ(mvtq8_acc_longk, 8192, 72, 1, 1, 0, 72, 0, 0.0f),
        MVTQ4(mvtq4_store_bias_g32, 512, 1000, 1, 0, 0, 1000, 0, 0.0f, 32),
        MVTQ4(mvtq4_norm_swiglu_g128, 2048, 96, 0, 2, 1, 48, 1, 1e-6f, 128),
        MVTQ4(mvtq4_acc_longk_g64, 8192, 72, 1, 1, 0, 72, 0, 0.0f, 64),
        MVQ(mvq8_store_bias, 576, 1000, 1, 0, 0, 1000, 0, 0.0f, 8, 0),
        MVQ(mvq8_norm_swiglu, 2048, 96, 0, 2, 1, 48, 1, 1e-6f, 8, 0),
        MVQ(mvq4_acc_g32, 576, 200, 0, 1, 0, 200, 0, 0.0f, 4, 32),
        MVQ(mvq4_longk_g128, 8192, 72, 0, 0, 0, 72, 0, 0.0f, 4, 128),
        MVQ(mvq4_norm_swiglu_g64, 1536, 160, 1, 2, 1, 80, 1, 1e-5f, 4, 64),
    };
    const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 37, 200};
    for (const auto &m : mvs)
        for (int T : Ts) {
            if ((size_t)T * IG_NPAD16(m.N) * m.K > 400000000ull) continue; /* host reference cost */
            if (m.tc && (T < 2 || T > IG_MVT_TMAX)) continue;
            test_mv(&c, m, T, g_sms * IG_MV_CTAS_PER_SM);
            if (T <= 5) test_mv(&c, m, T, 3); /* a small grid: warps stride over many pairs */
        }
    for (int T : {1, 7, 37}) {
        if (sel("ep_")) test_ep(&c, T);
        if (sel("rmsnorm D48 f32")) test_rn(&c, "rmsnorm D48 f32", (const void *)rn_f48, 48, 1e-5f, 0, T);
        if (sel("rmsnorm D1000 bf16")) test_rn(&c, "rmsnorm D1000 bf16", (const void *)rn_b1000, 1000, 1e-6f, 1, T);
        if (sel("rmsnorm D4096 bf16")) test_rn(&c, "rmsnorm D4096 bf16", (const void *)rn_b4096, 4096, 1e-5f, 1, T);
        if (sel("rmsnorm_add D200 (post-norm + residual)"))
            test_rn(&c, "rmsnorm_add D200 (post-norm + residual)", (const void *)rn_add200, 200, 1e-6f, 0, T, 1);
    }
    if (sel("embed bf16 D96")) test_em(&c, "embed bf16 D96", (const void *)em_b96, 96, 1);
    if (sel("embed f32 D48")) test_em(&c, "embed f32 D48", (const void *)em_f48, 48, 0);
    if (sel("embed q8r D576")) test_emq(&c, "embed q8r D576", (const void *)em_q8_576, 576, 8, 0);
    if (sel("embed q4r D96 g32")) test_emq(&c, "embed q4r D96 g32", (const void *)em_q4_96_g32, 96, 4, 32);
    if (sel("dequant q8r 48x576")) test_dq(&c, "dequant q8r 48x576", (const void *)dq8_576, 48, 576, 8, 0);
    if (sel("dequant q4r 32x2048 g64")) test_dq(&c, "dequant q4r 32x2048 g64", (const void *)dq4_2048_g64, 32, 2048, 4, 64);
    if (sel("embed bf16 D96 scaled")) test_em(&c, "embed bf16 D96 scaled", (const void *)em_b96_scaled, 96, 1, 9.797958971132712f);
    if (sel("sample greedy V1000 LD1024")) test_sm_greedy(&c, "sample greedy V1000 LD1024", (const void *)sm_1000, 1000, 1024);
    if (sel("sample greedy V128256")) test_sm_greedy(&c, "sample greedy V128256", (const void *)sm_128256, 128256, 128256);
    /* the first pass from per-part greedy keys (the persistent decode kernel's lm_head leaves one per CTA) */
    if (sel("sample greedy V1000 LD1024 from 7 parts"))
        test_sm_greedy(&c, "sample greedy V1000 LD1024 from 7 parts", (const void *)sm_1000, 1000, 1024, 7);
    if (sel("sample greedy V128256 from 132 parts"))
        test_sm_greedy(&c, "sample greedy V128256 from 132 parts", (const void *)sm_128256, 128256, 128256, 132);
    if (sel("sample top-k/top-p V128256")) test_sm_sample(&c, "sample top-k/top-p V128256", (const void *)sm_128256, 128256);
    if (sel("sample masked V1000 LD1024")) test_sm_masked(&c, "sample masked V1000 LD1024", (const void *)sm_1000, 1000, 1024);
    if (sel("sample masked V1000 LD1024 from 7 parts"))
        test_sm_masked(&c, "sample masked V1000 LD1024 from 7 parts", (const void *)sm_1000, 1000, 1024, 7);
    if (sel("sample masked V128256 from 132 parts"))
        test_sm_masked(&c, "sample masked V128256 from 132 parts", (const void *)sm_128256, 128256, 128256, 132);
    if (sel("sample top-k/top-p V5000")) test_sm_sample(&c, "sample top-k/top-p V5000", (const void *)sm_5000, 5000);
    if (sel("sample top-k/top-p V5000 from 40 parts"))
        test_sm_sample(&c, "sample top-k/top-p V5000 from 40 parts", (const void *)sm_5000, 5000, 40);
    const moe_fns mo_r6 = MOFG(mo_r6), mo_r8n = MOFG(mo_r8n), mo_sh = MOFTS(mo_sh);
    const moe_fns mo_tc = MOFT(mo_tc, (const void *)mo_tc_group, (const void *)mo_tc_logits, (const void *)mo_tc_select);
    for (int T : {1, 2, 7, 37, 200})
        for (int grouped = 0; grouped < 3; grouped++) {
            if (grouped < 2) {
                test_moe(&c, "E6 top-2 D128 I48 bf16 (unnormalized)", mo_r6, 128, 6, 2, 48, 0, 1, 1, 0, T, grouped);
                test_moe(&c, "E8 top-3 D96 I32 f32 (renormalized)", mo_r8n, 96, 8, 3, 32, 1, 0, 0, 0, T, grouped);
            }
            test_moe(&c, "shared expert D128 I96 bf16", mo_sh, 128, 1, 1, 96, 0, 1, 1, 1, T, grouped);
            test_moe(&c, "E8 top-2 D256 I96 bf16 (renormalized)", mo_tc, 256, 8, 2, 96, 1, 1, 1, 0, T, grouped);
        }
    /* the two-launch decode: T = 1, 2, 7, 8 over all SMs, and over 3 CTAs (items and experts
     * strided over the grid several times) */
    const moe_fns mo_e40f = MOFG(mo_e40);
    const moe_fns mo_q3f = MOFT(mo_q3, (const void *)mo_q3_group, (const void *)mo_q3_logits, (const void *)mo_q3_select);
    for (int T : {1, 2, 7, 8})
        for (int G : {0, 3}) {
            test_moe(&c, "E6 top-2 D128 I48 bf16 (unnormalized)", mo_r6, 128, 6, 2, 48, 0, 1, 1, 0, T, 3, G);
            test_moe(&c, "E8 top-3 D96 I32 f32 (renormalized)", mo_r8n, 96, 8, 3, 32, 1, 0, 0, 0, T, 3, G);
            test_moe(&c, "shared expert D128 I96 bf16", mo_sh, 128, 1, 1, 96, 0, 1, 1, 1, T, 3, G);
            test_moe(&c, "E8 top-2 D256 I96 bf16 (renormalized)", mo_tc, 256, 8, 2, 96, 1, 1, 1, 0, T, 3, G);
            test_moe(&c, "E40 top-6 D256 I64 f32 (unnormalized)", mo_e40f, 256, 40, 6, 64, 0, 0, 0, 0, T, 3, G);
        }
    for (int T : {1, 8}) { /* the layer's RMSNorm folded into _dgu */
        test_moe(&c, "E8 top-3 D96 I32 f32 (renormalized)", mo_r8n, 96, 8, 3, 32, 1, 0, 0, 0, T, 3, 0, 1);
        test_moe(&c, "E40 top-6 D256 I64 f32 (unnormalized)", mo_e40f, 256, 40, 6, 64, 0, 0, 0, 0, T, 3, 0, 1);
        test_moe(&c, "shared expert D128 I96 bf16", mo_sh, 128, 1, 1, 96, 0, 1, 1, 1, T, 3, 0, 1);
        test_moe(&c, "Qwen3-30B-A3B E128 top-8 D2048 I768 bf16", mo_q3f, 2048, 128, 8, 768, 1, 1, 1, 0, T, 3, 0, 1);
    }
    for (int T : {1, 2, 8}) {
        test_moe(&c, "E40 top-6 D256 I64 f32 (unnormalized)", mo_e40f, 256, 40, 6, 64, 0, 0, 0, 0, T, 0);
        test_moe(&c, "Qwen3-30B-A3B E128 top-8 D2048 I768 bf16", mo_q3f, 2048, 128, 8, 768, 1, 1, 1, 0, T, 3);
    }
    /* many pairs per expert: several row tiles of one expert, tiles of experts back to back */
    for (int T : {300, 1000})
        for (int grouped : {1, 2, 4})
            test_moe(&c, "E8 top-2 D256 I96 bf16 (renormalized)", mo_tc, 256, 8, 2, 96, 1, 1, 1, 0, T, grouped);
    /* the warpgroup products: partial tiles (T 37: one warpgroup without pairs), K 256 / 96 */
    for (int T : {7, 37, 200}) {
        test_moe(&c, "E8 top-2 D256 I96 bf16 (renormalized)", mo_tc, 256, 8, 2, 96, 1, 1, 1, 0, T, 4);
        test_moe(&c, "shared expert D128 I96 bf16", mo_sh, 128, 1, 1, 96, 0, 1, 1, 1, T, 4);
    }
    for (int grouped : {2, 4}) /* Qwen3-30B-A3B's shape: 6 / 8 column tiles of gate/up / down, K 2048 / 768 */
        test_moe(&c, "Qwen3-30B-A3B E128 top-8 D2048 I768 bf16", mo_q3f, 2048, 128, 8, 768, 1, 1, 1, 0, 96, grouped);
    const attn_case acs[] = {
        ATC(A, "H4 KV4 D16 f32", 0.25f),
        ATC(B, "H6 KV2 D48 bf16kv qknorm bf16out", 0.14433756729740643f),
        ATC(C, "H8 KV2 D64 f32 qknorm", 0.125f),
        ATC(D, "H8 KV1 D64 bf16kv", 0.125f),
        ATC(E, "H16 KV2 D128 bf16kv bf16out", 0.08838834764831845f),
        ATC(F, "H8 KV4 D256 f32", 0.0625f),
        ATC(G, "H24 KV8 D128 bf16kv qknorm bf16out", 0.08838834764831845f),
        ATCW(H, "H4 KV2 D32 bf16kv rot16 interleaved (GLM-4)", 0.17677669529663687f, 16, 1, 0),
        ATCW(I, "H4 KV2 D32 bf16kv qknorm window8 (Gemma 3 local)", 0.17677669529663687f, 32, 0, 8),
        ATCW(J, "H8 KV2 D64 f32 rot32 window5", 0.125f, 32, 0, 5),
    };
    for (const auto &a : acs) {
        char lab[200];
        snprintf(lab, sizeof lab, "rope_kv / attention %s", a.name);
        if (sel(lab)) test_attn(&c, a);
    }
    const ap_case aps[] = {
        APC(ap_g1_d16_f32, 4, 4, 16, 0, 0, 16, 0.25f),
        APC(ap_g8_d16_bf, 8, 1, 16, 1, 1, 16, 0.25f),
        APC(ap_g4_d48_bf, 8, 2, 48, 1, 1, 16, 0.14433756729740643f),
        APC(ap_g8_d64_bf, 8, 1, 64, 1, 0, 16, 0.125f),
        APC(ap_g4_d64_f32, 8, 2, 64, 0, 0, 16, 0.125f),
        APC(ap_g4_d64_ps7, 8, 2, 64, 1, 1, 7, 0.125f),
        APC(ap_g4_d128_bf, 16, 4, 128, 1, 1, 16, 0.08838834764831845f),
        APC(ap_g1_d96_bf, 4, 4, 96, 1, 0, 16, 0.10206207261596575f),
        APC(ap_g2_d80_bf, 4, 2, 80, 1, 1, 16, 0.11180339887498948f),
        APC(ap_g2_d256_bf, 4, 2, 256, 1, 0, 16, 0.0625f),
        APCW(ap_g2_d32_w8, 4, 2, 32, 1, 1, 16, 0.17677669529663687f, 8),
        APCW(ap_g4_d64_w100, 8, 2, 64, 1, 0, 16, 0.125f, 100),
        APCW(ap_g1_d16_f32_w5, 4, 4, 16, 0, 0, 16, 0.25f, 5),
        APCH(ap_g4_d64_h4, 8, 2, 64, 1, 1, 16, 0.125f, 0, 4),
        APCH(ap_g4_d128_h2, 16, 4, 128, 1, 1, 16, 0.08838834764831845f, 0, 2),
        APCH(ap_g4_d64_w100_h2, 8, 2, 64, 1, 0, 16, 0.125f, 100, 2),
        APCH(ap_g4_d128_h2_b128, 16, 4, 128, 1, 1, 16, 0.08838834764831845f, 100, 2),
    };
    const ap_scn scns[] = {
        {"decode", 1, {{0, 250, 1}}},
        {"one-seq", 1, {{0, 0, 37}}},
        {"chunk@100", 1, {{0, 100, 200}}},
        {"two-seqs", 2, {{0, 0, 150}, {1, 50, 150}}},
        {"mixed", 9, {{2, 300, 1}, {3, 17, 1}, {4, 64, 1}, {5, 0, 1}, {0, 40, 100}, {6, 129, 3}, {1, 60, 4}, {7, 5, 1}, {3, 18, 2}}},
        {"same-seq-gap", 2, {{0, 10, 40}, {0, 70, 30}}},
    };
    for (const auto &a : aps)
        for (const auto &sc : scns) {
            test_ap(&c, a, sc);
            if (a.ws) test_ap(&c, a, sc, true);
        }
    run_kvq_tests(&c, scns, (int)(sizeof scns / sizeof scns[0]));
    if (sel("attention long")) test_attn_long(&c);

    if (!no_bench) {
        double copy = bench_copy();
        if (sel("bench gemv")) {
            bench_mv(&c, "bf16 (2048x8192)", (const void *)mv_p_2048_8192, 2048, 8192, copy);
            bench_mv(&c, "bf16 (8192x2048)", (const void *)mv_p_8192_2048, 8192, 2048, copy);
            bench_mv(&c, "bf16 qkv (3072x2048)", (const void *)mv_p_3072_2048, 3072, 2048, copy);
            bench_mv(&c, "bf16 o (2048x2048)", (const void *)mv_p_2048_2048, 2048, 2048, copy);
            bench_mv(&c, "bf16 lm_head", (const void *)mv_p_128256_2048, 128256, 2048, copy);
            bench_mv(&c, "bf16 (2048x8192)", (const void *)mvt_p_2048_8192, 2048, 8192, copy, true);
            bench_mv(&c, "bf16 (8192x2048)", (const void *)mvt_p_8192_2048, 8192, 2048, copy, true);
            bench_mv(&c, "bf16 qkv (3072x2048)", (const void *)mvt_p_3072_2048, 3072, 2048, copy, true);
            bench_mv(&c, "bf16 o (2048x2048)", (const void *)mvt_p_2048_2048, 2048, 2048, copy, true);
            bench_mv(&c, "bf16 lm_head", (const void *)mvt_p_128256_2048, 128256, 2048, copy, true);
            bench_mv(&c, "bf16 norm gate/up", (const void *)mvt_p_gu_norm, 16384, 2048, copy, true, true);
            bench_mv(&c, "q8r (2048x8192)", (const void *)mvtq8_p_2048_8192, 2048, 8192, copy, true, false, 8);
            bench_mv(&c, "q8r (8192x2048)", (const void *)mvtq8_p_8192_2048, 8192, 2048, copy, true, false, 8);
            bench_mv(&c, "q4r g32 (2048x8192)", (const void *)mvtq4_p_2048_8192, 2048, 8192, copy, true, false, 4);
            bench_mv(&c, "q4r g32 (8192x2048)", (const void *)mvtq4_p_8192_2048, 8192, 2048, copy, true, false, 4);
            bench_mv(&c, "(2048x8192)", (const void *)mvq8_p_2048_8192, 2048, 8192, copy, false, false, 8);
            bench_mv(&c, "(8192x2048)", (const void *)mvq8_p_8192_2048, 8192, 2048, copy, false, false, 8);
            bench_mv(&c, "g32 (2048x8192)", (const void *)mvq4_p_2048_8192, 2048, 8192, copy, false, false, 4);
            bench_mv(&c, "g32 (8192x2048)", (const void *)mvq4_p_8192_2048, 8192, 2048, copy, false, false, 4);
            bench_mv(&c, "g32 lm_head", (const void *)mvq4_p_128256_2048, 128256, 2048, copy, false, false, 4);
        }
        if (sel("bench attention"))
            for (int ctxl : {1024, 4096}) {
                bench_attn(&c, 1, ctxl, copy);
                bench_attn(&c, 8, ctxl, copy);
            }
        if (sel("bench attention-kv"))
            bench_attn_kv(&c, copy);
        if (sel("bench moe")) {
            const moe_fns q3 = MOFT(mo_q3, (const void *)mo_q3_group, (const void *)mo_q3_logits, (const void *)mo_q3_select);
            for (int T : {1, 8}) bench_moe_dec(&c, q3, T, copy);
            for (int T : {512, 2048, 8192}) bench_moe_prefill(&c, q3, T);
        }
        bench_ap(&c, 128, (const void *)ap_p128, (const void *)at_p128, 2048);
        bench_ap(&c, 64, (const void *)ap_p64, (const void *)at_p64, 2048);
        bench_ap(&c, 128, (const void *)ap_p128, (const void *)at_p128, 8192);
        bench_ap(&c, 128, (const void *)ap_p128_h2, (const void *)at_p128, 2048, 2);
        bench_ap(&c, 128, (const void *)ap_p128_h2, (const void *)at_p128, 8192, 2);
        bench_ap(&c, 64, (const void *)ap_p64, (const void *)at_p64, 8192);
        bench_ap(&c, 64, (const void *)ap_p64_h2, (const void *)at_p64, 2048, 2);
        bench_ap(&c, 64, (const void *)ap_p64_h2, (const void *)at_p64, 8192, 2);
        bench_ap(&c, 64, (const void *)ap_p64_h4, (const void *)at_p64, 2048, 4);
        bench_ap(&c, 64, (const void *)ap_p64_h4, (const void *)at_p64, 8192, 4);
        /* the warp-specialized form (_flash_ws) as codegen makes it */
        for (int T : {2048, 8192}) {
            bench_ap(&c, 128, (const void *)ap_w128, (const void *)at_p128, T, 1, true);
            bench_ap(&c, 128, (const void *)ap_w128_h2, (const void *)at_p128, T, 2, true, 128, " BN 128");
            bench_ap(&c, 64, (const void *)ap_w64_h4, (const void *)at_p64, T, 4, true);
        }
    }
    if (c.fails) {
        printf("test_cuda_kernels: %d failed cases\n", c.fails);
        return 1;
    }
    printf("test_cuda_kernels: all passed\n");
    return 0;
}
