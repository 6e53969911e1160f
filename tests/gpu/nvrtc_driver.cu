/* nvrtc_driver.cu — instantiates every CUDA template twice with different parameters in one
 * translation unit, the way a generated model.cu does; compiled by nvrtc_check (NVRTC, no host
 * headers) and by nvcc in build_and_run.sh. Not linked into anything. */
#define MV_NAME mv_a
#define MV_K 2048
#define MV_N 1000
#include "gemv.cu"
#define MV_NAME mv_b
#define MV_K 96
#define MV_N 96
#define MV_WBF16 0
#define MV_XBF16 0
#define MV_BIAS 1
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mv_q8
#define MV_K 576
#define MV_N 1000
#define MV_WQ 8
#define MV_NORM 1
#include "gemv.cu"
#define MV_NAME mv_q4
#define MV_K 8192
#define MV_N 64
#define MV_WQ 4
#define MV_WG 128
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"

#define DQ_NAME dq_a
#include "dequant.cu"
#define DQ_NAME dq_b
#define DQ_K 576
#define DQ_NP 48
#define DQ_WQ 4
#define DQ_WG 64
#include "dequant.cu"
#define MV_NAME mv_geglu /* issue 21: GeGLU epilogue, fused norm */
#define MV_K 128
#define MV_N 384
#define MV_EPI 3
#define MV_YBF16 1
#define MV_NORM 1
#include "gemv.cu"
#define MV_NAME mvt_geglu
#define MV_K 128
#define MV_N 384
#define MV_EPI 3
#define MV_YBF16 1
#include "gemv_tc.cu"
#define QG_NAME qg_a /* quantized tensor-core GEMM: q8r residual add with split K, q4r SwiGLU */
#define QG_K 2048
#define QG_N 2048
#define QG_WQ 8
#define QG_EPI 1
#define QG_SPLIT 8
#include "qgemm.cu"
#define QG_NAME qg_b
#define QG_K 576
#define QG_N 96
#define QG_WQ 4
#define QG_WG 64
#define QG_BIAS 1
#define QG_EPI 2
#define QG_YBF16 1
#include "qgemm.cu"

#define EP_BIAS_NAME ep_bias_a
#define EP_SWIGLU_NAME ep_swiglu_a
#include "epilogue.cu"
#define EP_BIAS_NAME ep_bias_b
#define EP_SWIGLU_NAME ep_swiglu_b
#define EP_N 33
#define EP_I 48
#define EP_OBF16 0
#include "epilogue.cu"
#define EP_SWIGLU_NAME ep_geglu
#define EP_I 192
#define EP_GELU 1
#include "epilogue.cu"

#define RN_NAME rn_a
#include "rmsnorm.cu"
#define RN_NAME rn_b
#define RN_D 48
#define RN_OBF16 1
#include "rmsnorm.cu"
#define RN_NAME rn_add
#define RN_D 128
#define RN_ADD 1
#include "rmsnorm.cu"

#define RK_NAME rk_a
#include "rope_kv.cu"
#define RK_NAME rk_b
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_KVBF16 1
#define RK_QKNORM 1
#include "rope_kv.cu"
#define RK_NAME rk_glm /* partial rotary, interleaved pairs */
#define RK_H 4
#define RK_KV 2
#define RK_D 32
#define RK_ROT 16
#define RK_INTERLEAVE 1
#include "rope_kv.cu"

#define AT_NAME at_a
#include "attention.cu"
#define AT_NAME at_b
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SPLIT 4
#include "attention.cu"
#define AT_NAME at_window
#define AT_H 4
#define AT_KV 2
#define AT_D 32
#define AT_KVBF16 1
#define AT_WINDOW 8
#define AT_QKNORM 1
#define AT_ROT 16
#define AT_INTERLEAVE 1
#include "attention.cu"

#define AP_NAME ap_a
#include "attention_prefill.cu"
#define AP_NAME ap_b
#define AP_H 6
#define AP_KV 2
#define AP_D 48
#define AP_PS 7
#define AP_OBF16 0
#include "attention_prefill.cu"
#define AP_NAME ap_c
#define AP_D 256
#define AP_KVBF16 0
#include "attention_prefill.cu"
#define AP_NAME ap_window
#define AP_H 4
#define AP_KV 2
#define AP_D 32
#define AP_WINDOW 8
#include "attention_prefill.cu"

/* quantized KV (kv_quant.cuh): int8 and uint4 (delta-coded keys), q/k norm, 16-bit output */
#define RK_NAME rk_q8
#define RK_KVQ 8
#define RK_QKNORM 1
#include "rope_kv.cu"
#define RK_NAME rk_q4
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_KVQ 4
#include "rope_kv.cu"
#define AT_NAME at_q8
#define AT_KVQ 8
#define AT_QKNORM 1
#define AT_OBF16 1
#include "attention.cu"
#define AT_NAME at_q4
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_KVQ 4
#include "attention.cu"
#define AP_NAME ap_q8
#define AP_KVQ 8
#include "attention_prefill.cu"
#define AP_NAME ap_q4
#define AP_H 6
#define AP_KV 2
#define AP_D 48
#define AP_KVQ 4
#define AP_OBF16 0
#include "attention_prefill.cu"

#define EM_NAME em_a
#include "embed.cu"
#define EM_NAME em_b
#define EM_D 48
#define EM_WBF16 0
#include "embed.cu"
#define EM_NAME em_q8
#define EM_D 576
#define EM_WQ 8
#include "embed.cu"
#define EM_NAME em_q4
#define EM_D 64
#define EM_WQ 4
#define EM_WG 64
#include "embed.cu"
#define EM_NAME em_scaled
#define EM_D 128
#define EM_SCALE 11.313708498984761f
#include "embed.cu"

#define MO_NAME mo_a
#include "moe.cu"
#define MO_NAME mo_shared
#define MO_D 96
#define MO_E 1
#define MO_TOPK 1
#define MO_I 48
#define MO_WBF16 0
#define MO_XBF16 0
#define MO_SHARED 1
#include "moe.cu"

#define SM_NAME sm_a
#include "sample.cu"
#define SM_NAME sm_b
#define SM_V 1000
#define SM_LD 1024
#include "sample.cu"
