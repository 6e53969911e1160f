/* ir.h — the ignis model graph.
 *
 * A graph is a model's hyper-parameters, its tensors (weights with the place their bytes come
 * from, and activations) and an ordered list of nodes (ops from ops.def). Importers (HF folder,
 * GGUF) build the unfused graph; compiler passes rewrite it into the fused form codegen lowers.
 * Nodes carry the decoder layer they belong to (-1 for the embedding and the head), so codegen
 * can emit one loop over identical layers instead of one copy per layer.
 *
 * Memory: everything hangs off the graph's arena and is freed by ir_graph_free. Weight bytes are
 * never copied into the graph: a weight names a source file (mmap'd by ir_sources) and a byte
 * range plus the element type stored there and an optional transform applied when it is read.
 */
#ifndef IG_IR_H
#define IG_IR_H

#include <stddef.h>
#include <stdint.h>
#include "ig_model_abi.h" /* ig_dtype (common/) */
#include "ig_status.h"

typedef enum ir_op {
#define IR_OP(e, name, nin, fused) IR_OP_##e,
#include "ops.def"
#undef IR_OP
    IR_OP_COUNT
} ir_op;

const char *ir_op_name(ir_op op);
int ir_op_arity(ir_op op);
int ir_op_is_fused(ir_op op);
/* Returns the op named `name`, or IR_OP_COUNT. */
ir_op ir_op_from_name(const char *name);

/* Storage type of weight bytes in a source file: the ig_dtype values plus quantized formats. */
typedef enum ir_stype {
    IR_STYPE_F32 = 0,
    IR_STYPE_BF16 = 1,
    IR_STYPE_F16 = 2,
    IR_STYPE_I32 = 3,   /* int32 (GPTQ / AWQ packed codes, zero points, group indices) */
    IR_STYPE_Q8_0 = 10, /* GGUF block formats, dequantized at compile time */
    IR_STYPE_Q4_0 = 11,
    IR_STYPE_Q4_1 = 12,
    IR_STYPE_Q4_K = 13,
    IR_STYPE_Q5_K = 14,
    IR_STYPE_Q6_K = 15,
    IR_STYPE_Q5_0 = 16,
    IR_STYPE_Q5_1 = 17,
    /* a GPTQ / AWQ linear layer (ir_tensor.gq): src_* is its qweight, the other tensors are
     * named by gq; read as f32 (dequantized) or as integer rows (ir_weight_read_blocks) */
    IR_STYPE_GPTQ = 20,
    IR_STYPE_AWQ = 21
} ir_stype;

/* The quantization of a GPTQ / AWQ linear layer W [N][K] (logical rows n, columns k):
 *   GPTQ: qweight int32 [K * bits / 32][N], code of (k, n) in word [k / (32 / bits)][n] at bits
 *         bits * (k % (32 / bits)); qzeros int32 [ceil(K / G)][N * bits / 32], packed the same way
 *         along N; scales [ceil(K / G)][N]; g_idx int32 [K] (the group of column k; optional);
 *   AWQ (GEMM): qweight int32 [K][N / 8], column n's code at nibble AWQ_POS[n % 8] of word
 *         [k][n / 8] (AWQ packs columns 0, 2, 4, 6, 1, 3, 5, 7 in nibbles 0..7); qzeros int32
 *         [K / G][N / 8] packed the same way; scales [K / G][N];
 *   w[n][k] = scale[g][n] (code[k][n] - (zero[g][n] + zero_add)), g = g_idx[k] or k / G. */
typedef struct ir_gq {
    int32_t bits;     /* 4 or 8 */
    int32_t group;    /* G: columns of K per group (per channel: K) */
    int32_t zero_add; /* added to the stored zero points: 1 for GPTQ's v1 format (stores zero - 1) */
    int32_t scales, zeros, g_idx; /* weight tensor ids of scales (F16/BF16/F32), qzeros (I32), g_idx (I32) or -1 */
} ir_gq;
const char *ir_stype_name(ir_stype t);

/* How stored bytes are turned into the logical [rows][cols] matrix when read. */
typedef enum ir_xform {
    IR_XFORM_NONE = 0,
    IR_XFORM_UNPERMUTE_ROPE = 1, /* GGUF llama q/k: undo the interleaved-rope row permutation; attr xform_heads */
    IR_XFORM_PLUS_ONE = 2,       /* Gemma norm weights: the checkpoint stores w, the norm multiplies by 1 + w */
    IR_XFORM_ZERO = 3,           /* a leaf with no stored data (src_nbytes 0): reads as zeros (the empty MLP
                                    halves of a model whose layers mix dense and MoE MLPs, import_hf.c) */
    IR_XFORM_TIMES_TWO = 4       /* the stored values times 2 (exact): a dense MLP run as a shared expert
                                    whose zero gate weighs it by sigmoid(0) = 1/2 */
} ir_xform;

typedef enum ir_tensor_kind { IR_TENSOR_ACT = 0, IR_TENSOR_WEIGHT = 1 } ir_tensor_kind;

typedef struct ir_tensor {
    int32_t id;           /* index in graph->tensors */
    char *name;           /* e.g. "layers.0.attn.q.w" or HF name for weights */
    ir_tensor_kind kind;
    ig_dtype dtype;       /* logical element type (activations: F32) */
    int32_t rank;         /* 1 or 2 */
    int64_t shape[2];     /* weights: [rows, cols] = [N, K] for matrices, [D] for vectors;
                             activations: [-1 (tokens), cols] */
    int32_t layer;        /* decoder layer, or -1 */
    /* weight source (kind == WEIGHT) */
    int32_t src_file;     /* index into graph->files */
    uint64_t src_offset;  /* byte offset of the data in that file */
    uint64_t src_nbytes;  /* byte size of the stored data */
    ir_stype src_type;
    ir_xform xform;
    int32_t xform_heads;  /* for IR_XFORM_UNPERMUTE_ROPE */
    /* weights made by passes from other weights: concatenated (rows) or gate/up interleaved */
    int32_t n_parts;      /* 0: plain source weight; at most IR_MAX_PARTS */
    int32_t *parts;       /* [n_parts] tensor ids (ir_add_tensor copies them into the arena) */
    int32_t interleave16; /* 1: parts[0]/parts[1] interleaved by 16-row panels (gate/up) */
    int32_t pad16;        /* 1: zero padding so kernels see multiples of 16: interleaved parts are
                             padded with zero rows to shape[0] / 2 rows each (at least the part's
                             rows rounded up to 16); a single part is padded with zero columns up
                             to this tensor's cols (made by passes and importers, not stored) */
    /* a tensor-parallel shard (compiler/shard.c): one part, of which this tensor holds rows
     * (slice_axis 1) or columns (2) slice_start .. slice_start + its own rows / cols; what lies
     * past the part's end reads as zeros (vocabulary padding, a bias only rank 0 adds) */
    int32_t slice_axis;
    int64_t slice_start;
    ir_gq gq;             /* src_type IR_STYPE_GPTQ / IR_STYPE_AWQ */
} ir_tensor;

/* Parts of a merged weight: up to 3 (q/k/v) for projections, one per expert for stacked experts. */
#define IR_MAX_PARTS 4096

/* Epilogue of a fused matmul. */
typedef enum ir_epi { IR_EPI_STORE = 0, IR_EPI_ACC = 1, IR_EPI_SWIGLU = 2, IR_EPI_GEGLU = 3 } ir_epi;

#define IR_MAX_IN 4
typedef struct ir_node {
    ir_op op;
    int32_t layer;          /* decoder layer, or -1 */
    int32_t in[IR_MAX_IN];  /* tensor ids, -1 = absent */
    int32_t out;            /* tensor id, -1 for ops with only side effects (KV_WRITE) */
    float eps;              /* norms */
    int32_t n_heads;        /* HEAD_RMSNORM / ROPE */
    ir_epi epi;             /* fused matmuls */
} ir_node;

typedef enum ir_rope_type {
    IR_ROPE_DEFAULT = 0,
    IR_ROPE_LINEAR = 1,
    IR_ROPE_LLAMA3 = 2,
    IR_ROPE_LONGROPE = 3 /* Phi-3 "longrope" / "su": per-frequency divisors rope_ext (its short_factor) */
} ir_rope_type;

/* Per-frequency rope divisors (longrope): at most this many (head_dim / 2). */
#define IR_MAX_ROPE_EXT 256

/* Layers whose attention type can differ (sliding window vs. global): at most this many. */
#define IR_MAX_LAYER_TYPES 512

/* Feed-forward activation of the gated MLP. */
typedef enum ir_act { IR_ACT_SILU = 0, IR_ACT_GELU_TANH = 1 } ir_act;

typedef struct ir_hparams {
    char arch[64];          /* HF architecture name, e.g. "Qwen3ForCausalLM" */
    int32_t n_layers, hidden, n_heads, n_kv_heads, head_dim, intermediate, vocab;
    int32_t max_context;    /* max_position_embeddings */
    double rms_eps;
    double rope_theta;
    ir_rope_type rope_type;
    double rope_factor;     /* linear / llama3; longrope: its attention_factor (on cos and sin) */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int32_t rope_orig_max;  /* llama3 / longrope original_max_position_embeddings */
    int32_t rope_n_ext;     /* longrope: rope_ext[0 .. rope_n_ext) = rotary dims / 2 */
    double rope_ext[IR_MAX_ROPE_EXT]; /* longrope: inverse frequency i is divided by rope_ext[i] */
    int32_t tie_embeddings;
    int32_t attn_bias;      /* q/k/v biases (Qwen2) */
    int32_t o_bias;         /* o_proj bias */
    int32_t mlp_bias;
    int32_t qk_norm;        /* per-head q/k RMSNorm (Qwen3) */
    /* beyond the Llama family (0 = the Llama default everywhere) */
    int32_t rope_dim;       /* rotary dimensions per head (partial rotary), 0 = head_dim */
    int32_t rope_interleaved; /* 1: rotate pairs (2i, 2i+1) (GLM-4), 0: halves (i, i + dim/2) */
    double rope_theta_local; /* theta of sliding-window layers (Gemma 3), 0 = rope_theta */
    int32_t sliding_window; /* keys a sliding layer attends to (itself included), 0 = none */
    uint8_t layer_sliding[IR_MAX_LAYER_TYPES]; /* 1: layer L uses sliding_window and rope_theta_local */
    double embed_scale;     /* embedding rows multiplied by this (Gemma: sqrt(hidden)), 0 = 1 */
    double attn_scale;      /* softmax scale, 0 = 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2) */
    double final_softcap;   /* > 0: logits = cap * tanh(logits / cap) (Gemma's final_logit_softcapping), 0 = none */
    ir_act mlp_act;
    int32_t post_norms;     /* RMSNorm on the attention and MLP outputs before the residual adds */
    /* mixture of experts (n_experts > 0): every layer's MLP is a routed MoE block */
    int32_t n_experts, top_k;
    int32_t moe_intermediate; /* rows of one expert's gate / up projections */
    int32_t norm_topk;        /* 1: the top-k softmax weights are renormalized to sum 1 (Mixtral, Qwen3-MoE) */
    int32_t shared_intermediate; /* > 0: a shared expert of this size, gated by sigmoid(x . w) (Qwen2-MoE) */
    ig_dtype src_dtype;     /* checkpoint's dtype (torch_dtype / dtype) */
    /* tensor parallelism (compiler/shard.c; 0 or 1 = none): the graph is one rank's shard of tp;
     * n_heads, n_kv_heads and intermediate are then the rank's, vocab stays the model's and
     * tp_vocab is the rank's slice of it (vocab / tp rounded up) */
    int32_t tp, tp_vocab;
    int32_t bos_id;         /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[8];
} ir_hparams;

typedef struct ir_arena ir_arena;

typedef struct ir_graph {
    ir_arena *arena;
    ir_hparams hp;
    int32_t n_files;
    char **files;           /* source paths (absolute) */
    int32_t n_tensors, cap_tensors;
    ir_tensor *tensors;
    int32_t n_nodes, cap_nodes;
    ir_node *nodes;
    char *tokenizer_dir;    /* folder holding tokenizer files, or NULL */
} ir_graph;

/* Graph building. ir_graph_new: free with ir_graph_free. Strings are copied into the arena. */
ir_graph *ir_graph_new(void);
void ir_graph_free(ir_graph *g);
void *ir_alloc(ir_graph *g, size_t n);           /* zeroed, lives as long as g */
char *ir_strdup(ir_graph *g, const char *s);
int32_t ir_add_file(ir_graph *g, const char *path);
/* Adds a tensor (copied); returns its id. */
int32_t ir_add_tensor(ir_graph *g, const ir_tensor *t);
int32_t ir_add_act(ir_graph *g, const char *name, int64_t cols, int32_t layer);
ir_node *ir_add_node(ir_graph *g, ir_op op, int32_t layer); /* inputs set to -1, out -1 */
ir_tensor *ir_tensor_by_name(ir_graph *g, const char *name);

/* Checks structural invariants (ids in range, arities, shapes of matmuls). */
ig_status ir_verify(const ir_graph *g, ig_err *err);
/* Writes a readable dump of the graph. */
void ir_dump(const ir_graph *g, FILE *f);

/* Reads weight `t` as logical f32 [rows * cols] (dequantizing, converting, applying the
 * transform, concatenating parts). `out` holds rows*cols floats. Sources are mmap'd on first
 * use and stay mapped while `src` lives. */
typedef struct ir_sources ir_sources;
ir_sources *ir_sources_open(const ir_graph *g);           /* free with ir_sources_close */
void ir_sources_close(ir_sources *s);
ig_status ir_weight_read_f32(ir_sources *s, const ir_graph *g, const ir_tensor *t, float *out,
                             ig_err *err);
/* Whether every stored leaf of weight t (through its parts) has one storage type; sets *stype. */
int ir_weight_stype(const ir_graph *g, const ir_tensor *t, ir_stype *stype);
/* Weight t as rows of raw GGUF blocks of type stype (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K), in the row order
 * ir_weight_read_f32 gives: rows x (cols / block elements) blocks into out (caller-allocated; padding rows of
 * merged tensors come out zero). IG_ERR_UNSUPPORTED when a leaf has another type or a step of
 * the tensor is not a row move.
 * stype IR_STYPE_GPTQ: a weight whose leaves are GPTQ or AWQ layers of one group size G, as
 * integer rows of ir_gq_row_bytes(cols, G) bytes: ceil(cols / G) pairs (f16 scale, f16 zero point:
 * an integer, zero_add applied) then one byte per column (its code); w = scale (code - zero). */
ig_status ir_weight_read_blocks(ir_sources *s, const ir_graph *g, const ir_tensor *t, ir_stype stype, void *out,
                                ig_err *err);

/* GPTQ / AWQ: bytes of one integer row (ir_weight_read_blocks), and the bits and group size
 * shared by every leaf of t (0 when t has none or they differ). */
size_t ir_gq_row_bytes(int64_t cols, int32_t group);
int ir_weight_gq(const ir_graph *g, const ir_tensor *t, int32_t *bits, int32_t *group);

/* Weight tensor ids of one decoder layer, -1 for absent optional ones (biases, q/k norms). */
typedef struct ir_layer_weights {
    int32_t in_norm, q, k, v, o, qb, kb, vb, ob, q_norm, k_norm;
    int32_t post_norm, gate, up, down, gate_b, up_b, down_b;
    int32_t attn_out_norm, mlp_out_norm; /* hp.post_norms: norms of the attention / MLP outputs */
    /* MoE (hp.n_experts): router [E, D]; experts' gate/up, each pair interleaved by 16 rows and
     * stacked [E * 2I, D]; experts' down projections stacked [E * D, I]; shared expert (fused
     * gate/up [2Is, D], down [D, Is], gate [1, D]) or -1 */
    int32_t router, experts_gate_up, experts_down, shared_gate_up, shared_down, shared_gate;
} ir_layer_weights;

/* Adds a weight whose rows are its parts' (concatenated; interleave16: two parts interleaved
 * by 16-row panels); returns its id or -1 when out of memory. */
int32_t ir_add_merged_weight(ir_graph *g, const char *name, const int32_t *parts, int n, int interleave16);

/* Emits the unfused Llama-family decoder graph over weights an importer has added and checked
 * (ir/build_decoder.c): lw has hp.n_layers entries (borrowed). Ends with ir_verify. */
ig_status ir_build_decoder(ir_graph *g, int32_t embed, const ir_layer_weights *lw, int32_t final_norm,
                           int32_t head, ig_err *err);

/* Importers (ir/import_hf.c, ir/import_gguf.c). *out: free with ir_graph_free. */
ig_status ir_import_hf(const char *dir, ir_graph **out, ig_err *err);
ig_status ir_import_gguf(const char *path, ir_graph **out, ig_err *err);
/* Any: a folder (HF), a .gguf file, or a serialized .igraph. */
ig_status ir_import_any(const char *path, ir_graph **out, ig_err *err);

/* Serialization (protobuf-c, ir/ignis_ir.proto). */
ig_status ir_save(const ir_graph *g, const char *path, ig_err *err);
ig_status ir_load(const char *path, ir_graph **out, ig_err *err);

#endif
