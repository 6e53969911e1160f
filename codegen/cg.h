/* cg.h — code generation: lowered graph + weight plan + target → one C translation unit
 * (model.c) that instantiates the kernel templates once per distinct shape and runs the model
 * through the ABI of ig_model_abi.h.
 *
 * Targets are data: a cg_target names the ISA level, the compiler flags that select it and the
 * CPU feature bits the package will require at load time. The kernels pick their code path from
 * the compiler's predefined macros, so the flags are the only difference between targets. */
#ifndef IG_CG_H
#define IG_CG_H

#include <stdio.h>
#include "ir.h"
#include "pack.h"
#include "rt_util.h"

/* the CPU target table lives with the runtime (rt_util.h), which names the best one a machine runs */
typedef rt_cpu_target cg_target;

/* Looks up a target by name ("native" picks the best this machine supports). NULL if unknown. */
const cg_target *cg_target_find(const char *name);
/* Comma-separated list of known target names, for error messages. */
const char *cg_target_names(void);

struct cg_tuning; /* tuning.h: compile-time choices of the CUDA templates */

typedef struct cg_options {
    ig_dtype dtype;     /* weights and stored activations: F32, BF16 (or F16 on CUDA) */
    ig_dtype kv_dtype;  /* the KV cache (cg_kv_format_of); 0 (F32) with dtype F32 */
    int32_t page_size;  /* KV tokens per page */
    const char *compiler_version;
    const struct cg_tuning *tuning; /* CUDA: never NULL (tune_compile_defaults) */
    int act8;           /* CUDA a8w8: q8r matmuls of steps past the GEMV path on int8 activations (act8.cu) */
    int fp8;            /* CUDA fp8: f8r matmuls of steps past the GEMV path on e4m3 activations (cuBLASLt) */
} cg_options;

/* Writes model.c for the lowered graph g to out (borrowed). */
ig_status cg_emit_c(const ir_graph *g, const pk_plan *plan, const cg_target *t,
                    const cg_options *o, FILE *out, ig_err *err);

/* A CUDA target: architectures to build cubins for ("sm_80", "sm_90", "sm_90a"); PTX of the
 * newest is embedded too, for newer GPUs. */
#define CG_MAX_ARCHS 8
typedef struct cg_cuda_target {
    int n_archs;
    char archs[CG_MAX_ARCHS][16];
} cg_cuda_target;

/* Parses "cuda", "cuda:sm_80,sm_90" (sm_70 .. sm_90a). */
ig_status cg_cuda_target_parse(const char *spec, cg_cuda_target *t, ig_err *err);

/* Writes the device code (model.cu: kernel template instantiations) and the host code (model.c:
 * driver-API launches, cuBLAS for prefill GEMMs, the embedded kernel images named
 * kernel_<arch>.cubin / kernel_compute_<nn>.ptx next to it) for the lowered graph. */
ig_status cg_emit_cuda(const ir_graph *g, const pk_plan *plan, const cg_cuda_target *t, const cg_options *o,
                       FILE *cu, FILE *host, ig_err *err);

/* ---- shared by the generators (cg_common.c) */

/* How weights, activations and the KV cache are stored: one row per element format. Adding a
 * format is a row here, its packer (compiler/pack.c) and the template instances that read it.
 * Quantized rows (wq != 0) are weight formats only; `bytes` is then 0 (see the packer). */
typedef struct cg_format {
    ig_dtype dtype;
    const char *name;   /* "f32", "bf16", "f16": comments, manifests, messages */
    int bytes;          /* per element */
    int is16;           /* a 16-bit float: the kernels' 16-bit paths (MV_WBF16, AT_KVBF16, ...) */
    const char *c_type; /* storage type in generated code: "float", "uint16_t" */
    const char *cu_def; /* defined at the top of model.cu for this format ("IG_F16 1"), or NULL */
    int cpu, cuda;      /* targets whose kernels take it */
    int wq;             /* quantized weights: the templates' MM_WQ / EM_WQ (quant.h), 0 for floats */
} cg_format;
/* The storage format of dt, or NULL when dt is not one (I32). */
const cg_format *cg_format_of(ig_dtype dt);

/* How the KV cache is stored (--kv-cache): floats, or codes quantized per token and KV head
 * (templates/cpu/kv_quant.h). */
typedef struct cg_kv_format {
    ig_dtype dtype;   /* F32, BF16, F16, KV8, KV4, KVF8 */
    const char *name; /* "f32", "bf16", "f16", "int8", "uint4", "fp8": the flag, manifests, messages */
    int bytes;        /* per element for float formats, 0 for quantized ones */
    int bits;         /* quantized: code bits (row sizes), 0 for floats */
    int kvq;          /* quantized: the templates' RK_KVQ / AT_KVQ (8, 4, IG_KVQ_E4M3 = 0xe4), 0 for floats */
    int cpu, cuda;    /* targets whose kernels take it */
    const char *scheme; /* quantized: how rows are coded (the manifest's kv_scheme), NULL for floats */
} cg_kv_format;
/* The KV format of dt / named name, or NULL. */
const cg_kv_format *cg_kv_format_of(ig_dtype dt);
const cg_kv_format *cg_kv_format_find(const char *name);
/* Comma-separated names, for messages. */
const char *cg_kv_format_names(void);
/* Bytes of one layer's part of a KV page of page_size tokens in format f. */
uint64_t cg_kv_layer_page_bytes(const ir_hparams *hp, int32_t page_size, const cg_kv_format *f);

/* Template instances of one generated file: one per distinct (template, parameters), named after
 * a prefix made unique, plus the list of kernel functions host code launches (CUDA). Grows as
 * needed; an allocation failure sets `failed` and the functions return NULL / -1 from then on. */
typedef struct cg_insts {
    struct cg_inst { char *key; char name[64]; } *v;
    int n, cap;
    char (*fn)[64];
    int n_fn, cap_fn;
    int failed;
} cg_insts;
/* Returns the instance name of `tpl` entered by `name_macro` with `params` ("#define X v\n" lines),
 * one per (tpl, name_macro, params), writing the instance (a comment naming the IR node, the name
 * macro, the parameters and the #include) to out on first use. NULL after an allocation failure. */
const char *cg_instance(cg_insts *s, FILE *out, const char *tpl, const char *prefix, const char *name_macro,
                        const char *params, const char *comment);
/* Index of kernel function `name` in the launch table (added on first use); -1 after a failure or
 * for a NULL name. */
int cg_fn_index(cg_insts *s, const char *name);
void cg_insts_free(cg_insts *s);

/* Activation buffers of a step: one per IR tensor that needs storage (buf_of maps tensors to
 * them), each `cols` elements per token of the format `is16` says. */
typedef struct cg_buf {
    char ident[64]; /* C identifier: cg_act_ident, made unique */
    int64_t cols;
    int is16;
} cg_buf;
typedef struct cg_bufs {
    cg_buf *v;
    int n, cap;
    int32_t *buf_of; /* [n_tensors]: buffer index or -1 */
    int failed;
} cg_bufs;
ig_status cg_bufs_init(cg_bufs *b, const ir_graph *g, ig_err *err);
/* Gives tensor t a new buffer; returns its index (-1 after an allocation failure). */
int cg_buf_new(cg_bufs *b, const ir_graph *g, int32_t t, int64_t cols, int is16);
void cg_bufs_free(cg_bufs *b);

/* Where the decoder layers sit in the lowered graph, and which (node, input slot) pairs of the
 * layer template read weights: layers share kernels and differ only in these. */
typedef struct cg_layout {
    int32_t first_layer, last_layer; /* node indices of the first and last layer node */
    int32_t per_layer;               /* nodes per layer */
    int32_t n_fld;                   /* weights read per layer */
    int32_t fld_node[32], fld_slot[32];
} cg_layout;

/* Checks that every layer has layer 0's ops and weight shapes, and fills the layout. */
ig_status cg_analyze(const ir_graph *g, const pk_plan *plan, cg_layout *lay, ig_err *err);
/* Writes the expression for the weight in input `slot` of node `node`: "W(lw[f])" inside the
 * layer loop, "W(i)" outside. */
void cg_weight_ref(const pk_plan *plan, const cg_layout *lay, int in_layer, int32_t node, int slot,
                   int32_t tensor, char *buf, size_t cap);
/* Emits `static const ig_weight_info weights[]` (the plan's table). */
void cg_emit_weight_list(FILE *out, const pk_plan *plan);
/* Emits `static const int32_t layer_weights[N_LAYERS][n_fld]` with a comment naming the fields. */
void cg_emit_layer_table(FILE *out, const ir_graph *g, const pk_plan *plan, const cg_layout *lay);
/* Name of tensor t for a comment in generated code: "layers.l.<name>" for layer tensors (the
 * code runs in a loop over l). Returns buf. */
const char *cg_node_label(const ir_graph *g, int32_t t, char *buf, size_t cap);
/* C identifier of an activation buffer: "a_" + the tensor's IR name without its layer prefix. */
void cg_act_ident(const ir_graph *g, int32_t t, char *buf, size_t cap);
/* The model's shape as the #defines every generated model.c uses (N_LAYERS .. KV_PAGE_BYTES). */
void cg_emit_shape_defines(FILE *out, const ir_hparams *hp, int32_t page_size, uint64_t kv_layer_page_bytes);

/* The package's ig_model_desc and its entry point. cpu_features: IG_CPU_* bits (0 on devices);
 * device_archs: NULL for host targets, else the CUDA architectures (then init/fini and
 * device sampling are declared, from the generated init, fini and forward). */
void cg_emit_desc(FILE *out, const ir_hparams *hp, const char *target, const char *compiler_version,
                  uint32_t cpu_features, ig_dtype dtype, ig_dtype kv_dtype, int32_t n_weights,
                  const char *device_archs);

/* Emits `static const double rope_inv_freq[HEAD_DIM / 2]` (and rope_inv_freq_local for the
 * sliding layers' theta when hp->rope_theta_local is set). */
ig_status cg_emit_rope_table(FILE *out, const ir_hparams *hp, ig_err *err);

/* Computes RoPE inverse frequencies [head_dim/2] from the hyper-parameters (default, linear,
 * llama3 scaling), in double precision; with partial rotary (rope_dim) the first rope_dim/2 are
 * those of a rope_dim-wide head and the rest 0. */
void cg_rope_inv_freq(const ir_hparams *hp, double *inv_freq);

#endif
