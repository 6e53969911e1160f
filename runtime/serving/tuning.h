/* tuning.h — tuning as configuration: every knob of the generated code, in one table.
 *
 * A knob is either a compile-time choice (it changes the generated source: `ignis compile --tune
 * key=value`, recorded in the package's manifest.json under "tuning") or a run-time choice of the
 * package's code (`ig_engine_config.tune`, handed to the model's init through ig_model_ctx). Both
 * are written "key=value,key=value"; a key unknown to the phase, a value that is not an integer or
 * one outside the key's range is an error naming the key. There is no environment override: a
 * measurement passes --tune like any user (the compile-time values show in the manifest).
 *
 * The table (tuning.c) is the documentation of every key: `ignis help tune` prints it, and
 * docs/TUNING.md lists the same keys with the measurements behind their defaults. */
#ifndef IG_TUNING_H
#define IG_TUNING_H

#include <stddef.h>
#include <stdint.h>

#include "ig_model_abi.h"
#include "ig_status.h"

typedef enum tune_phase {
    TUNE_COMPILE = 1, /* fields of cg_tuning */
    TUNE_RUN = 2      /* fields of ig_model_tuning (ig_model_abi.h) */
} tune_phase;

/* Compile-time tuning of the CUDA templates (the persistent decode kernel's weight stream and the
 * decode attention's context splits). Values equal to the defaults leave the generated source as
 * it is without --tune: only other values are written into it. */
typedef struct cg_tuning {
    int32_t st_group;      /* stream.cuh consumer slots per group: 1, 2 or 4 (default 2) */
    int32_t st_acc;        /* accumulators per slot: 1 or 2 (default 2) */
    int32_t st_inflight;   /* weight slots in flight per producer: 1..12 (default 3) */
    int32_t st_l2hint;     /* weight copies carry an L2 evict-first policy: 0 or 1 (default 1) */
    int32_t at_split_keys; /* a decode attention split takes at least this many keys (default 64) */
    int32_t dl_quant;      /* the persistent decode kernel for quantized weight rows: 1 (default) q8r and q4r, 0 none, -1 q4r only */
    int32_t qg_tmax;       /* matmuls on quantized rows of qg_tmin..qg_tmax tokens on qgemm.cu, larger dequantized for cuBLAS (default 128; 0: never qgemm.cu) */
    int32_t qg_tmin;       /* ... from this many tokens (2..9; smaller steps take the GEMVs) */
    int32_t a8_tmin;       /* a8w8: layer matmuls of this many tokens and more on int8 activations (act8.cu + cuBLAS), before qgemm.cu (default 33) */
    int32_t dl_kvq;        /* quantized-KV packages on the persistent decode kernel: 1 (default), or 0 (per-op kernels) */
    int32_t moe_dec;       /* CUDA MoE steps of up to 8 tokens in two launches over all SMs (moe.cu _dgu/_ddown): 1 (default) or 0 */
    int32_t ap_wg;         /* CUDA prefill attention's tensor-core path on wgmma in sm_90a images (attention_prefill.cu _flash_wg): 1 (default) or 0 */
    int32_t ap_ws;         /* ... and its warp-specialized form (_flash_ws: TMA loads by a producer warpgroup, mbarrier stages) where measured faster: 1 (default) or 0 */
    int32_t ap_heads;      /* CUDA prefill attention: at most this many query heads of a KV head a CTA (AP_HPC 1, 2 or 4; default 2) */
    int32_t moe_wg;        /* CUDA MoE prefill's grouped products on wgmma where the image has it (sm_90a; moe.cu _gu_wg/_down_wg): 1 (default) or 0 */
    int32_t a8_wg;         /* CUDA a8w8 prefill matmuls of 128+ tokens on sm_90a's int8 wgmma with the epilogue fused (act8.cu A8_WG_NAME): 2 (default) in clusters of two CTAs, 1 CTAs alone, or 0 */
    int32_t dl_moe;        /* CUDA MoE models on the persistent decode kernel (stream_moe.cuh): 1 (default), or 0 the per-op kernels */
    int32_t cpu_iact;      /* CPU (x86-64): a16w8 / a16w4 pack as q8i / q4i (+ q6i), integer activations: 1 (default), or 0 (q8c / q4k) */
    int32_t cpu_attn_tiles; /* CPU prefill attention in tiles of consecutive tokens (attention.c AT_TILES): 1 (default), or 0 (per token) */
    int32_t cpu_amx_q;      /* cpu:amx: q8i / q8a / q4i prefill of 32+ rows on AMX tiles (matmul.c IG_AMX_QUANT): 1 (default), or 0 */
} cg_tuning;

typedef struct tune_key {
    const char *name;
    tune_phase phase;
    size_t offset;  /* of the int32_t field in cg_tuning or ig_model_tuning */
    int32_t min, max, def;
    uint32_t only;  /* nonzero: bit (v - min) set for each accepted value v (a set, not a range) */
    const char *macro; /* compile-time keys: the template macro it sets when not the default, or NULL */
    const char *doc;
} tune_key;

/* The table, ended by a row with name NULL. */
extern const tune_key tune_keys[];

/* Fills t with every compile-time / run-time default. */
void tune_compile_defaults(cg_tuning *t);
void tune_run_defaults(ig_model_tuning *t);

/* Applies "key=value,key=value" (borrowed; NULL or "" does nothing) to dst (a cg_tuning for
 * TUNE_COMPILE, an ig_model_tuning for TUNE_RUN). `what` names the source in errors ("--tune",
 * "ig_engine_config.tune"). Stops at the first bad entry, naming it. */
ig_status tune_apply(tune_phase phase, const char *spec, const char *what, void *dst, ig_err *err);

/* The key, or NULL. */
const tune_key *tune_find(const char *name);
/* The value of key k in src (a cg_tuning or ig_model_tuning of k's phase). */
int32_t tune_get(const tune_key *k, const void *src);

#endif
