/* pack.h — weight packing: decides which tensors of a lowered graph go into weights.bin, in
 * which layout (the "panel" layout of templates/cpu/SPEC.md for matrices, plain f32 for norm
 * weights and biases), at which 64-byte-aligned offset; then converts, packs and hashes them.
 * Codegen reads the same plan, so the offsets baked into model.so and the file agree. */
#ifndef IG_PACK_H
#define IG_PACK_H

#include "ir.h"

typedef enum pk_format {
    PK_PANEL = 0,   /* matrix [N][K] → 16-row panels in the weight dtype (CPU kernels) */
    PK_VEC_F32 = 1, /* vector [n] → f32, zero-padded to a multiple of 16 */
    PK_ROWMAJOR = 2 /* matrix [N][K] → row-major, N padded to 16 with zero rows (GPU kernels) */
} pk_format;

typedef struct pk_entry {
    int32_t tensor;   /* graph tensor id */
    const char *name; /* borrowed from the graph */
    pk_format fmt;
    ig_dtype dtype;   /* element type in the file (IG_DTYPE_Q8C / Q4G: quantized panels) */
    int32_t group;    /* Q4G / Q4K / Q8G: group size along K; else 0 */
    int32_t kept;     /* 1: repacked from the source's GGUF blocks of type stype (--quant keep), or from
                         GPTQ / AWQ layers (stype IR_STYPE_GPTQ, dtype Q4Z / Q8Z) */
    ir_stype stype;
    int32_t bits;     /* GPTQ / AWQ: 4 or 8 */
    uint64_t offset;  /* bytes from the start of weights.bin */
    uint64_t nbytes;
    uint64_t hash;    /* rt_hash64 of the packed bytes, set by pk_write */
} pk_entry;

typedef struct pk_plan {
    int32_t n;
    pk_entry *e;    /* [n], malloc'd; free with pk_plan_free */
    uint64_t total; /* file size in bytes */
} pk_plan;

/* Weight quantization of a CPU package (InstantQuant: from the weights alone, no calibration). */
typedef struct pk_quant {
    ig_dtype wdtype;  /* CPU: IG_DTYPE_Q8C / Q8I / Q8G (a16w8; Q8G with --quant-group), Q4K / Q4I (a16w4), Q8A (a8w8) or Q4G; CUDA: Q8R, Q4R, F8R (fp8); unused with keep */
    int32_t group;    /* Q4G / Q4K / Q4I / Q8G: 32, 64 or 128 */
    ig_dtype head;    /* format of the vocabulary matrices (embedding, lm_head), or 0 for wdtype */
    int32_t keep;     /* 1: GGUF Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K / Q5_K / Q6_K matrices repacked losslessly
                         (q4g / q8g / q4k / q6k, group 32; q6s, group 16) and
                         GPTQ / AWQ layers as their integers (q4z / q8z, their group), float ones stay
                         float, other block types are an error; a matrix whose parts or layers differ in
                         type stays float (dequantized) */
    const char *skip; /* comma-separated names of matrices kept in the float dtype (borrowed), or NULL */
} pk_quant;

/* Lays out every weight the lowered graph reads. wdtype: IG_DTYPE_F32 or IG_DTYPE_BF16;
 * matrices in matrix_fmt (PK_PANEL for CPU targets, PK_ROWMAJOR for GPU targets); quant (NULL:
 * none; panels only) quantizes (or keeps, quant->keep) every panel matrix that quant->skip does
 * not name. */
ig_status pk_plan_build(const ir_graph *g, ig_dtype wdtype, pk_format matrix_fmt, const pk_quant *quant, pk_plan *plan,
                        ig_err *err);
/* Whether `skip` (comma-separated) names tensor `name`: the name itself, or its last dot-separated
 * parts, with or without ".weight" ("lm_head", "mlp.down_proj", "model.layers.0.mlp.down_proj.weight"). */
int pk_quant_skips(const char *skip, const char *name);
void pk_plan_free(pk_plan *plan);
/* Index of the entry for tensor id t, or -1. */
int32_t pk_find(const pk_plan *plan, int32_t t);
/* Reads, converts, packs and writes every entry to path, filling in the hashes. */
ig_status pk_write(const ir_graph *g, pk_plan *plan, const char *path, ig_err *err);

/* Exposed for tests: packs logical f32 w[N][K] into the panel layout (dst sized by
 * pk_panel_bytes). */
uint64_t pk_panel_bytes(int64_t N, int64_t K, ig_dtype dt);
void pk_pack_panels(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst);
void pk_pack_rows(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst);
/* Quantized panels (layouts in templates/cpu/quant.h): bytes of N x K, and the packers. */
uint64_t pk_quant_bytes(int64_t N, int64_t K, ig_dtype dt, int32_t group);
/* int8 per row by the a16w8 rule, as q8c or as q8a / q8i (dt: k in quads) panels */
void pk_pack_q8c(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst);
void pk_pack_q4g(const float *w, int64_t N, int64_t K, int32_t group, void *dst);
/* int8 per row and group of K (a16w8 --quant-group), f16 scales rounded up: q8g panels */
void pk_pack_q8g(const float *w, int64_t N, int64_t K, int32_t group, void *dst);
/* q4k, q6k, q4i or q6i (dt; q4i / q6i: q4k's / q6k's codes with the levels in k-octets / k-sixteens)
 * panels with groups of `group` */
void pk_pack_q4k(const float *w, int64_t N, int64_t K, int32_t group, ig_dtype dt, void *dst);
/* GGUF blocks (rows of blocks of type st, as ir_weight_read_blocks gives them) into q4g (Q4_0,
 * Q4_1), q8g (Q8_0, Q5_0), q4k (Q4_K) or q6k (Q5_K) panels with group 32, or q6s (Q6_K) with group
 * 16: every weight keeps its exact value. Returns 0, or -1 when a Q4_0 min (-8d) or a Q6_K dmin
 * (32d) does not fit f16 (dst is then incomplete). */
int pk_repack_blocks(const void *blocks, ir_stype st, int64_t N, int64_t K, void *dst);
/* Q4_0 / Q4_1 blocks (rows of blocks of type st, as ir_weight_read_blocks gives them) into q4r rows
 * with group 32 (--quant keep on CUDA): each block's f16 d is the group's scale and its m (Q4_1) or
 * -8d (Q4_0) its min, the nibbles as they are, so every weight keeps its exact value. Returns 0, or
 * -1 when a Q4_0 min does not fit f16 (dst is then incomplete). */
int pk_repack_blocks_q4r(const void *blocks, ir_stype st, int64_t N, int64_t K, void *dst);
/* Whether a CUDA package keeps g's GGUF blocks by default (no --quant): 1 when some weight is stored
 * as Q4_0 or Q4_1 (the block types q4r holds exactly; the others are dequantized). Borrows g. */
int pk_keep_rows_default(const ir_graph *g);
/* Whether a CPU package keeps g's GGUF blocks by default (no --quant): 1 when g has weights stored
 * in GGUF block types and every one of those types has a CPU format (all but Q5_1); else 0, with
 * *bad the first weight whose type has none (NULL when g holds no blocks). Borrows g. */
int pk_keep_default(const ir_graph *g, const ir_tensor **bad);
/* Quantized rows of CUDA packages (layouts in templates/cuda/wq.cuh): bytes of one row of K, and
 * the packers of w[N][K] (dst zeroed, N rounded up to 16 rows). q8r takes the a16w8 rule of q8c
 * (the same codes and scales), q4r the (scale, min) search of q4g with groups of `group`. */
uint64_t pk_qrow_bytes(int64_t K, ig_dtype dt, int32_t group);
void pk_pack_q8r(const float *w, int64_t N, int64_t K, void *dst);
/* f8r (fp8): q8r's rows with e4m3fn codes (scale = max |w| / 448 per row, round to nearest even),
 * then the NP = N rounded up to 16 row scales again as one f32 vector (cuBLASLt's outer-vector
 * scale of the weights); dst holds pk_qrow_bytes(K, F8R) x NP + 4 NP bytes. The packers of q8r and q4r
 * take any finite weights; f8r's: */
int pk_pack_f8r(const float *w, int64_t N, int64_t K, void *dst);
/* f8r rows hold weights of magnitude below this (the kernels multiply a row's scale by 2^120,
 * templates/cuda/wq.cuh's IG_WF8_UNIT_F32, which must stay a finite f32): pk_pack_f8r returns 1 when
 * some row has a weight past it (or one that is not finite), else 0. */
#define PK_F8R_WMAX 65536.0f
void pk_pack_q4r(const float *w, int64_t N, int64_t K, int32_t group, void *dst);
/* GPTQ / AWQ integer rows (ir_weight_read_blocks, IR_STYPE_GPTQ, group G) into q4z (bits 4) or
 * q8z (bits 8) panels: scales, zero points and codes exactly as stored. */
void pk_repack_gq(const void *rows, int64_t N, int64_t K, int32_t G, int bits, void *dst);
uint16_t pk_f32_to_bf16(float f);
/* f32 -> IEEE half, round to nearest even; past 65504 (after rounding) inf, NaN stays NaN. */
uint16_t pk_f32_to_f16(float f);

#endif
