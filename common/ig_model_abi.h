/* ig_model_abi.h — the contract between the ignis runtime and a generated model.so.
 *
 * A package's model.so exports one symbol, `ig_model_entry`, returning a pointer to a constant
 * ig_model_desc: the model's fixed shapes (compile-time constants of the generated code), the
 * table of packed weights it expects (name, byte offset and size inside weights.bin), and the
 * functions the runtime calls. The runtime owns memory (weights mapping, KV pool, workspace) and
 * scheduling; the model owns math.
 *
 * One forward call takes a flattened batch of tokens from many sequences: prefill chunks and
 * decode tokens mixed. Token i belongs to sequence token_seq[i], sits at absolute position
 * positions[i] of that sequence, and attends causally to positions 0..positions[i] of the same
 * sequence. Before attention of each layer the step's keys/values are written into the KV pool at
 * (page_table[seq][pos / page_size], pos % page_size), so tokens of one sequence inside one step
 * see each other. Logits are produced only for the rows listed in out_rows.
 *
 * KV pool layout (page-major, one page id addresses all layers):
 *   pool + page * kv_page_bytes + layer * kv_layer_page_bytes
 *     → K [n_kv_heads][page_size][head_dim] then V [n_kv_heads][page_size][head_dim],
 *   elements of kv_dtype (IG_DTYPE_F32, IG_DTYPE_BF16, or IG_DTYPE_F16 on CUDA); the quantized
 *   kv_dtypes IG_DTYPE_KV8 / KV4 / KVF8 lay a layer's page out as codes, then scales, then zero points
 *   (templates/cpu/kv_quant.h). Either way the runtime sizes the pool by kv_page_bytes alone.
 *
 * Tensor parallelism (desc.tp > 1, `ignis compile --tp N`): the package is one model sharded over
 * tp ranks (processes); every rank loads the same model.so with its own weights and KV pool and
 * runs forward() on the same batch; the generated code calls the collectives of ctx->comm, which
 * the runtime provides (MPI on CPUs): the model links no communication library itself.
 *
 * This header is copied verbatim into every package's src/ so generated code builds on its own.
 */
#ifndef IG_MODEL_ABI_H
#define IG_MODEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#define IG_MODEL_ABI_VERSION 13u

/* Element types, shared by the IR, packer, manifest and generated code. */
typedef enum ig_dtype {
    IG_DTYPE_F32 = 0,
    IG_DTYPE_BF16 = 1,
    IG_DTYPE_F16 = 2,
    IG_DTYPE_I32 = 3,
    /* quantized weight formats (weights.bin only; layouts in templates/cpu/quant.h) */
    IG_DTYPE_Q8C = 4, /* int8, symmetric, f32 scale per output row */
    IG_DTYPE_Q4G = 5, /* uint4, f16 scale and min per row and group of K */
    IG_DTYPE_Q8G = 6, /* int8, symmetric, f16 scale per row and group of K (GGUF Q8_0 kept) */
    IG_DTYPE_Q4K = 7, /* uint4, 8-bit scale and min codes per group under an f16 pair per 8 groups */
    IG_DTYPE_Q6K = 8, /* uint6, the same codes and superblocks (a16w4's vocabulary matrices) */
    IG_DTYPE_Q8A = 9, /* int8, symmetric, f32 scale per output row, k in quads (a8w8: int8 activations) */
    IG_DTYPE_Q4Z = 10, /* uint4, f16 scale and integer zero point per row and group of K (GPTQ / AWQ) */
    IG_DTYPE_Q8Z = 11, /* 8-bit codes, f16 scale and integer zero point per row and group of K (GPTQ) */
    IG_DTYPE_Q6S = 12, /* uint6, Q6K's superblocks with signed scale codes (GGUF Q6_K kept) */
    IG_DTYPE_Q4I = 13, /* Q4K's codes with the nibbles in k-octets (a16w4 on x86-64: int8 activations) */
    /* quantized weight rows of CUDA packages (layouts in templates/cuda/wq.cuh) */
    IG_DTYPE_Q8R = 14, /* int8 rows, symmetric, an f32 scale after each row (a16w8) */
    IG_DTYPE_Q4R = 15, /* uint4 rows, an f16 scale and min per group of K after each row (a16w4) */
    /* quantized KV cache formats (kv_dtype only; layout in templates/cpu/kv_quant.h) */
    IG_DTYPE_KV8 = 16, /* 8-bit codes, f16 scale and 8-bit zero point per token and KV head */
    IG_DTYPE_KV4 = 17, /* 4-bit codes two per byte, f16 scale and zero point per token and KV head */
    IG_DTYPE_KVF8 = 18, /* e4m3 codes (fp8), f16 scale per token and KV head, the KV8 layout (zero unused) */
    IG_DTYPE_Q8I = 19, /* Q8A's panels (a16w8 on x86-64: int16 activations); a weight format like 4..13 */
    IG_DTYPE_Q6I = 20, /* Q6K's codes in k-sixteens (a16w4's vocabulary on x86-64: int8 activations) */
    IG_DTYPE_F8R = 21  /* e4m3 rows of CUDA packages (fp8): q8r's layout with e4m3fn codes, then the row scales
                          again as one f32 vector (templates/cuda/wq.cuh) */
} ig_dtype;

/* CPU features a package may require (bit set in ig_model_desc.cpu_features). */
#define IG_CPU_AVX2 (1u << 0)       /* AVX2 + FMA + F16C */
#define IG_CPU_AVX512F (1u << 1)    /* AVX-512 F/BW/DQ/VL */
#define IG_CPU_AVX512BF16 (1u << 2) /* AVX512_BF16 (vdpbf16ps) */
#define IG_CPU_AVX512VNNI (1u << 3)
#define IG_CPU_AMX (1u << 4) /* AMX-TILE + AMX-BF16 + AMX-INT8, and Linux's permission for tile data */
/* AArch64 options (the NEON baseline needs no bit; the package's target names its architecture) */
#define IG_CPU_NEON_DOTPROD (1u << 8) /* SDOT/UDOT (FEAT_DotProd) */
#define IG_CPU_NEON_BF16 (1u << 9)    /* BFDOT/BFMMLA (FEAT_BF16) */
#define IG_CPU_NEON_I8MM (1u << 10)   /* SMMLA/USDOT (FEAT_I8MM) */
#define IG_CPU_SVE (1u << 11)         /* SVE, any vector length */

/* One packed weight inside weights.bin. */
typedef struct ig_weight_info {
    const char *name;  /* e.g. "layers.3.qkv.w" */
    uint64_t offset;   /* bytes from the start of weights.bin, 64-byte aligned */
    uint64_t nbytes;   /* packed size in bytes */
} ig_weight_info;

/* One forward step (see the header comment). All arrays are borrowed for the call. */
/* How one logits row is sampled on the device (models whose desc.caps has IG_MODEL_CAP_SAMPLE).
 * The semantics are sampler.h's steps 3-8 without bias or penalties: greedy when temperature is 0,
 * else softmax of logits / temperature, top-k (ties with the k-th kept), top-p over what top-k
 * left (the crossing token kept), min-p, then the token where the cumulative kept mass, walked in
 * id order, first exceeds u x (kept mass). */
typedef struct ig_fwd_sample {
    int32_t on;        /* 1: sample this row on the device; 0: the runtime samples it from logits */
    float temperature; /* 0 = greedy (argmax, lowest id on ties) */
    int32_t top_k;     /* 0 or >= vocab: off */
    float top_p;       /* (0, 1]; 1 = off */
    float min_p;       /* [0, 1); 0 = off */
    float u;           /* this step's uniform draw in [0, 1) (unused when greedy) */
} ig_fwd_sample;

typedef struct ig_fwd_batch {
    int32_t n_tokens;          /* tokens in this step, >= 1 */
    const int32_t *token_ids;  /* [n_tokens] */
    const int32_t *positions;  /* [n_tokens] absolute position inside its sequence */
    const int32_t *token_seq;  /* [n_tokens] sequence index in 0..n_seqs-1 */
    int32_t n_seqs;            /* sequences in this step */
    const int32_t *page_table; /* [n_seqs][max_pages_per_seq] KV page ids */
    int32_t max_pages_per_seq; /* row stride of page_table */
    int32_t n_out;             /* rows whose logits are wanted */
    const int32_t *out_rows;   /* [n_out] token indices in 0..n_tokens-1 */
    float *logits;             /* [n_out][vocab], written by forward; may be NULL when sample
                                  is set and every row has sample[i].on */
    /* Device sampling (NULL on models without IG_MODEL_CAP_SAMPLE): sample [n_out] params;
     * forward writes sampled[i] for rows with sample[i].on: the token id, or -1 when the row's
     * logits held NaN or +inf, or were all -inf. */
    const ig_fwd_sample *sample;
    int32_t *sampled;          /* [n_out] */
    /* Token masks of device-sampled rows (guided decoding; models with IG_MODEL_CAP_MASK; NULL
     * elsewhere and in steps without one): masks[i] for out row i is NULL (no mask) or
     * IG_MASK_WORDS(vocab) words, bit (id & 31) of word id >> 5 set where token id may be sampled
     * (bits of ids >= vocab are ignored); only rows with sample[i].on take theirs, and such a row
     * samples as if every other logit were -inf (a row with no allowed token gives -1). The masks
     * may still be being computed when forward is called: forward reads them only after
     * masks_wait(masks_user) returns (when masks_wait is set), which it calls once the step's
     * kernels up to the logits are queued, so the host computes them while the device runs the
     * step. logits, when wanted, are the unmasked ones. */
    const uint32_t *const *masks;
    void (*masks_wait)(void *user);
    void *masks_user;
} ig_fwd_batch;

#define IG_MASK_WORDS(vocab) (((vocab) + 31) / 32) /* 32-bit words of one row's token mask */

/* Run-time tuning of a device package's code (runtime/serving/tuning.c holds the table: names, ranges,
 * defaults and what each measured). The runtime fills it from ig_engine_config.tune. */
typedef struct ig_model_tuning {
    int32_t persistent;     /* one-token steps on the persistent decode kernel where it exists (1) */
    int32_t run_steps;      /* most steps of a multi-step greedy run (0: the KV page size; 1: off) */
    int32_t chain;          /* queue a single greedy row's next step behind the current one (1) */
    int32_t graphs;         /* decode steps replay CUDA graphs (1) */
    int32_t graph_tmax;     /* decode-only steps of up to this many tokens replay graphs (-1: any) */
    int32_t gemv_tmax;      /* steps of up to this many tokens use the GEMV kernels (1) */
    int32_t mvt_tmax;       /* matmuls of 2..mvt_tmax tokens on the tensor-core GEMV (2; 0: off) */
    int32_t mv_ctas_per_sm; /* GEMV grid cap per SM (0: the template's IG_MV_CTAS_PER_SM) */
    int32_t dl_keys;        /* persistent kernel attention: keys per context split (256) */
    int32_t dl_heads;       /* its attention items per query head where they fit (1; 0: per kv head) */
    int32_t sync;           /* synchronize after every launch: a faulting kernel is the one named (0) */
    int32_t profile;        /* time every kernel, print the table at fini (0; turns graphs off) */
    int32_t at_ctas_per_sm; /* decode attention's split CTAs aimed at per SM (0: the template's IG_AT_CTAS_PER_SM) */
    int32_t dl_ctx_max;     /* one-token steps whose page-table row spans more tokens run the per-op kernels (32768) */
    int32_t cublas;         /* prefill GEMMs on cuBLAS where it loads (1); 0: on the package's own GEMM (gemm.cu) */
    int32_t mvtq_tmax;      /* matmuls of quantized rows (q8r / q4r) with 2..mvtq_tmax tokens on the tensor-core GEMV (8) */
    int32_t a8_wg_tiles;    /* a8w8's fused int8 GEMM (sm_90a) for matmuls of at least this many tiles (0: half the SMs) */
    int32_t a8_wg_split;    /* and for fewer tiles, split in up to this many ranges of K (1 or 0: off) */
} ig_model_tuning;

/* Collectives of a tensor-parallel step, provided by the runtime (runtime/serving/rt_tp.c). Every
 * rank calls them in the same order with the same n; each returns 0, nonzero on failure (forward
 * then returns IG_MODEL_ERR_COMM). */
typedef struct ig_model_comm {
    int32_t rank, size; /* this rank, and the ranks of the step (== desc.tp) */
    void *user;         /* the runtime's */
    /* buf[n] := the elementwise sum of every rank's buf[n] */
    int (*all_reduce_sum)(const struct ig_model_comm *c, float *buf, int64_t n);
    /* recv[size][n] := every rank's send[n], in rank order */
    int (*all_gather)(const struct ig_model_comm *c, const float *send, float *recv, int64_t n);
    /* Device targets (CUDA, over NCCL; NULL until the runtime has a device communicator): the same
     * on device buffers (CUdeviceptr), queued on `stream` (a CUstream; may be capturing a graph) */
    int (*all_reduce_sum_dev)(const struct ig_model_comm *c, uint64_t buf, int64_t n, void *stream);
    int (*all_gather_dev)(const struct ig_model_comm *c, uint64_t send, uint64_t recv, int64_t n, void *stream);
} ig_model_comm;

/* forward()'s results of a tensor-parallel package: ctx->comm missing or of another size, or a
 * collective that failed */
#define IG_MODEL_ERR_TP_SIZE (-5)
#define IG_MODEL_ERR_COMM (-6)

/* Memory the runtime hands to the model; all borrowed, owned by the runtime. */
typedef struct ig_model_ctx {
    const uint8_t *weights; /* base of weights.bin (mmap), 64-byte aligned (host memory) */
    uint8_t *kv_pool;       /* n_pages * kv_page_bytes (host targets; NULL on devices) */
    int32_t n_pages;        /* pages in kv_pool; device targets: 0 asks init to size the pool
                               (kv_fraction of the memory left after weights and workspace) and
                               set n_pages */
    float kv_fraction;      /* see n_pages */
    uint8_t *workspace;     /* workspace_bytes(max_tokens, n_threads) bytes, 64-byte aligned */
    int32_t max_tokens;     /* most tokens a single forward may carry */
    int32_t n_threads;      /* OpenMP threads for kernels, >= 1 */
    int32_t device_index;   /* device targets: which GPU (default 0) */
    void *device_state;     /* device targets: owned by the model, made by init, freed by fini */
    const ig_model_tuning *tuning; /* device targets: read by init (never NULL there) */
    const ig_model_comm *comm;     /* tensor-parallel packages (desc.tp > 1): the collectives; else NULL */
    int32_t n_host_pages;   /* device targets with kv_page_copy: pages of the host tier (pinned host
                               memory the model allocates as pages first go there; 0: none) */
} ig_model_ctx;

/* Where a package's code runs. Host targets use the runtime's kv_pool/workspace; device targets
 * allocate KV pool and workspace in device memory in init() and copy the weights there; forward()
 * then takes host arrays and returns host logits, so the runtime is the same for every target. */
#define IG_DEVICE_CPU 0
#define IG_DEVICE_CUDA 1

/* A device call that failed in forward() returns -(IG_DEVICE_ERR + result * 10000 + line), where
 * line is model.c's, or IG_DEVICE_ERR_HOST_LINE + the line of the shared host runtime
 * (templates/cuda/host_runtime.c, copied into the package's src/). */
#define IG_DEVICE_ERR 10000000
#define IG_DEVICE_ERR_HOST_LINE 5000

typedef struct ig_model_desc {
    uint32_t abi_version;         /* IG_MODEL_ABI_VERSION */
    const char *arch;             /* e.g. "LlamaForCausalLM" */
    const char *target;           /* e.g. "cpu-x86_64-avx512bf16" */
    const char *compiler_version; /* ignis version that generated the code */
    uint32_t cpu_features;        /* IG_CPU_* bits the code needs at run time */
    int32_t dtype;                /* ig_dtype of weights/activations (F32 or BF16) */
    int32_t kv_dtype;             /* ig_dtype of KV cache elements */
    int32_t n_layers, hidden, n_heads, n_kv_heads, head_dim, intermediate, vocab;
    int32_t max_context;          /* positions the model supports */
    int32_t page_size;            /* tokens per KV page */
    uint64_t kv_page_bytes;       /* bytes per page, all layers */
    uint64_t kv_layer_page_bytes; /* bytes per page per layer */
    int32_t n_weights;
    const ig_weight_info *weights; /* [n_weights] */
    int32_t device;               /* IG_DEVICE_* */
    const char *device_archs;     /* CUDA: "sm_80,sm_90" (cubins held, PTX of the last), else "" */
    /* Device targets (NULL for host targets): init checks the device, loads the kernels, copies
     * the weights and allocates ctx->n_pages KV pages and the workspace for ctx->max_tokens; on
     * failure returns nonzero with a message in err. fini frees what init made. */
    int (*init)(ig_model_ctx *ctx, char *err, size_t err_cap);
    void (*fini)(ig_model_ctx *ctx);
    /* Workspace bytes for a forward of up to max_tokens tokens on n_threads threads. */
    uint64_t (*workspace_bytes)(int32_t max_tokens, int32_t n_threads);
    /* Runs one step. Returns 0, or a negative value if the batch is malformed (the runtime
     * validates batches first; this is a last guard, never a crash). */
    int (*forward)(const ig_model_ctx *ctx, const ig_fwd_batch *batch);
    uint32_t caps;                /* IG_MODEL_CAP_* */
    /* Tensor parallelism: the ranks this package is sharded for (1: none). n_heads, n_kv_heads and
     * intermediate above are then one rank's, vocab the model's; kv_page_bytes is one rank's pool. */
    int32_t tp;
    /* The prefix cache's host tier (device targets; NULL elsewhere: host targets' pages are the
     * runtime's memory). Queues a copy of KV page `page` (every layer, kv_page_bytes) to host page
     * `host_page` (to_host 1) or back (to_host 0) on the stream that runs forward(), so it is
     * ordered after the steps queued before it and before those queued after: the runtime neither
     * waits for it nor reads host pages itself. Returns 0, or nonzero when the copy could not be
     * queued (no pinned memory for that host page: the runtime then drops the page). */
    int (*kv_page_copy)(const ig_model_ctx *ctx, int32_t to_host, int32_t page, int32_t host_page);
} ig_model_desc;

#define IG_MODEL_CAP_SAMPLE (1u << 0) /* forward honours ig_fwd_batch.sample (device sampling) */
#define IG_MODEL_CAP_MASK (1u << 1)   /* ... and ig_fwd_batch.masks (token masks of sampled rows) */

typedef const ig_model_desc *(*ig_model_entry_fn)(void);
#define IG_MODEL_ENTRY_SYMBOL "ig_model_entry"

#endif
