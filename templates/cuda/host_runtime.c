/* host_runtime.c — the host side of every CUDA package: device state, init and fini, forward
 * (batch staging, multi-step greedy runs, chained steps, token masks of guided decoding), the CUDA
 * graph cache and cuBLAS GEMMs.
 *
 * The generated model.c defines what is specific to one model — its shape constants, kernel
 * images and names, weight and layer tables, RoPE frequencies, the model's workspace buffers
 * (MODEL_WORKSPACE) and, for the persistent decode kernel, where its inputs live — then includes
 * this file, then defines the step's launch sequence (launch_step) and, when the model has the
 * persistent kernel, its per-layer pointer table (dl_layer_table). Nothing here is generated.
 *
 * Compiled without IG_MODEL_GENERATED (tests/cuda_host/test_host_runtime.c does), this file
 * stands alone with a small default model, so its logic is tested on a machine without a GPU:
 * the driver is opened with dlopen in init (host.h), and everything before the first driver call
 * — tuning, batch validation, the choice of multi-step runs and chained steps — is plain C.
 *
 * Run-time choices come from ctx->tuning (ig_model_abi.h; keys, ranges and defaults in
 * runtime/serving/tuning.c), never from the environment. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "ig_model_abi.h"
#include "launch.h"

#ifndef IG_MODEL_GENERATED
/* ---- a default model, so that this file compiles and is tested on its own */
#define N_LAYERS 2
#define HIDDEN 256
#define N_HEADS 4
#define N_KV_HEADS 2
#define HEAD_DIM 64
#define INTERMEDIATE 512
#define VOCAB 320
#define MAX_CONTEXT 256
#define PAGE_SIZE 16
#define KV_LAYER_PAGE_BYTES 8192ull
#define KV_PAGE_BYTES (KV_LAYER_PAGE_BYTES * N_LAYERS)
#define W_BF16 1
#define W_F16 0
#define W_BYTES 4096ull
#define HAS_DECODE_LAYERS 0
#define N_KERNELS 1
#define SAMPLE_FN 0
#define GEMM_FN 0
#define N_IMAGES 1
#define PACKAGE_ARCHS "sm_90"
#define PACKAGE_PTX 90
static const char *const kernel_names[N_KERNELS] = {"k"};
static const unsigned char default_image[1];
static const unsigned char *const image_data[N_IMAGES] = {default_image}, *const image_end[N_IMAGES] = {default_image};
static const int image_arch[N_IMAGES] = {90}, image_is_ptx[N_IMAGES] = {0};
static const double rope_inv_freq[HEAD_DIM / 2];
#define MODEL_WORKSPACE(X, T) X(float, a_x, (uint64_t)(T) * HIDDEN)
#endif

#ifndef F8_GEMM /* 1: the model's matmuls call GEMM_F8 (fp8 packages: f8r rows, cuBLASLt) */
#define F8_GEMM 0
#endif

#ifndef KV_TMAP /* 1: prefill attention may run _flash_ws (attention_prefill.cu), which reads the KV pool through st->kvmap */
#define KV_TMAP 0
#endif

#ifndef ROPE_LOCAL /* the model has a second RoPE table, rope_inv_freq_local (model.c) */
#define ROPE_LOCAL 0
#endif

#define RUN_MAX 64                    /* steps of a multi-step greedy run at most (forward) */
#ifndef DL_RUNS
#define DL_RUNS 0 /* the persistent kernel takes the embedding and the lm_head: it can run several steps */
#endif
#define RUN_PENDING (-2147483647 - 1) /* a run's token slot not written yet */
#define BLAS_WS_BYTES (32u << 20)     /* cuBLAS's workspace (its recommendation for sm_90) */
#define MV_TMAX 8                     /* steps of up to this many tokens take the GEMV path */
#define ATTN_SPLIT 32                 /* context partitions of decode attention (same value in model.cu) */
#define MAX_PAGES_PER_SEQ ((MAX_CONTEXT + PAGE_SIZE - 1) / PAGE_SIZE)

/* ---- device workspace for up to max_tokens tokens (offsets from st->ws, 256-byte aligned): the
 * staged batch, logits, sampling, attention and persistent-kernel scratch, then the model's own
 * activation buffers */
#define WS_ALIGN(n) (((n) + 255) & ~(uint64_t)255)
#define WORKSPACE_LIST(X, T)                                                                          \
    X(int32_t, batch, (uint64_t)(T) * (4 + MAX_PAGES_PER_SEQ))                                        \
    X(float, d_logits, (uint64_t)(T) * VOCAB)                                                         \
    X(ig_fwd_sample, d_sp, (uint64_t)(T))                                                             \
    X(int32_t, d_sampled, (uint64_t)(T))                                                              \
    X(float, attn_ws, IG_AT_WS_FLOATS(MV_TMAX, N_HEADS, HEAD_DIM, ATTN_SPLIT))                        \
    X(unsigned, attn_cnt, IG_AT_COUNTERS(MV_TMAX, N_HEADS)) /* a counter per query head */            \
    X(unsigned long long, dl_bar, 32)                                                                 \
    X(unsigned long long, dl_amax, 1024) /* the persistent kernel's greedy pick per CTA */            \
    X(int32_t, dl_go, RUN_MAX + 1)       /* its multi-step runs' decisions, then their cancel flag */ \
    MODEL_WORKSPACE(X, T)

static uint64_t workspace_bytes(int32_t max_tokens, int32_t n_threads) {
    (void)n_threads;
    uint64_t n = 0;
#define X(type, name, count) n += WS_ALIGN(sizeof(type) * (count));
    WORKSPACE_LIST(X, max_tokens)
#undef X
    return n;
}
/* Declares a CUdeviceptr for every workspace buffer, carved from base in list order. */
#define WORKSPACE_CARVE(base, max_t) \
    CUdeviceptr ws_ = (base);        \
    WORKSPACE_LIST(WS_CARVE_ONE, max_t)
#define WS_CARVE_ONE(type, name, count)                  \
    CUdeviceptr name __attribute__((unused)) = ws_; \
    ws_ += WS_ALIGN(sizeof(type) * (count));

/* One shape of the fp8 GEMM (gemm_f8): cuBLASLt's descriptors and the algorithm its heuristic
 * chose, made on the shape's first call (a heuristic query per call cost the host about as much as
 * the GPU spent on a decode step's GEMM). */
#define F8_PLANS 64
typedef struct f8_plan {
    int N, T, K, ldy, ybf16, beta1, ok, has_algo; /* ok: made; has_algo: else cuBLASLt's implicit heuristic per call */
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} f8_plan;

/* One tensor map of the warp-specialized products (tile_map_of): rows at p, the map's key (p,
 * cols, row bytes, element bytes, box rows) and its rows, which may change from step to step (the
 * workspace's operands hold T or T K rows). */
#define TILE_MAP_SLOTS 256
typedef struct tile_map_slot {
    CUtensorMap map;
    CUdeviceptr p;
    uint64_t rows, cols, ld;
    uint32_t esz, box_rows, ok;
} tile_map_slot;

/* ---- device state (ctx->device_state) */
typedef struct dev_state {
    cu_api api;
    CUdevice dev;
    CUcontext cctx;
    CUmodule mod;
    CUstream stream;
    cublasHandle_t blas;
    cublasLtHandle_t blaslt; /* fp8 packages (F8_GEMM): cuBLASLt's e4m3 GEMM, where f8_on */
    int f8_on;               /* the e4m3 GEMM runs here (sm_89+, cuBLASLt, its probe passed): GEMM_F8 may be called */
    int wg;                  /* the loaded image has wgmma kernels (wgmma.cuh's ig_wg_built: an sm_90a cubin) */
    f8_plan f8[F8_PLANS];    /* its descriptors and chosen algorithm per shape (gemm_f8), filled round robin */
    int f8_next;
    CUfunction fn[N_KERNELS];
    CUdeviceptr w, kv, ws, inv_freq;
    CUtensorMap kvmap; /* the KV pool for TMA (KV_TMAP, open_kv_map): passed to prefill attention */
    int kvmap_on;      /* ... made: launches take the warp-specialized form */
    tile_map_slot tmaps[TILE_MAP_SLOTS]; /* moe.cu's products' operands for TMA (tile_map), by p's hash */
    int32_t *pinned;           /* staging of one batch */
    unsigned char *pinned_smp; /* staging of device sampling: params [max_tokens], then ids [max_tokens] */
    /* token masks of a masked step (forward, sample_masked), made on the first such step and grown
     * as more rows come: pinned staging and its device copy, both laid out as MASK_ROWS_BYTES of a
     * row -> mask index table [max_tokens], then mask_cap masks of MASK_WORDS words */
    unsigned char *pinned_mask;
    CUdeviceptr d_mask;
    int32_t mask_cap;
    int32_t max_tokens, max_pages;
    int sync_each;  /* tuning sync: a debug aid */
    int use_graphs; /* decode steps replay CUDA graphs */
    int gemv_tmax;  /* steps of up to this many tokens use the GEMV kernels, larger ones cuBLAS (tuning) */
    int mv_ctas;    /* GEMV grid cap: SMs x mv_ctas_per_sm */
    int at_ctas;    /* decode attention's split CTAs aimed at: SMs x at_ctas_per_sm (IG_AT_SPLITS) */
    int mvt_tmax;   /* matmuls of 2..mvt_tmax tokens on the tensor-core GEMV (sm_80+; 0 or 1: off) */
    int mvtq_tmax;  /* ... of quantized rows (q8r / q4r) */
    int a8_wg_tiles; /* a8w8's fused int8 GEMM for matmuls of at least this many tiles (IG_A8_WG_USE) */
    int a8_wg_sms;   /* ... its persistent grid: the SMs, or the CTAs of the clusters that fit at once (A8_CL_FN) */
    int a8_wg_split; /* and for fewer, K split in up to this many ranges (IG_A8_WG_SPLITS; 1: off) */
    int qg_on;      /* quantized-row matmuls may take qgemm.cu (sm_80+; the steps it takes are codegen's) */
    cu_prof prof;   /* tuning profile: per-kernel times, printed by fini */
    cu_graph_cache graphs;
    CUresult graph_error; /* why graphs were turned off, if they were */
    int graph_tmax;       /* decode-only steps of up to this many tokens replay graphs too (0: one-token only) */
    CUdeviceptr blas_ws;  /* cuBLAS's workspace, ours so that a graph capture never allocates */
    CUdeviceptr d_logits; /* in the workspace */
    int n_sm;             /* SMs: the persistent kernel's grid */
    int dl_on;            /* one-token steps run the persistent decode kernel (decode_layers.cu) */
    int dl_keys;          /* its attention: keys per context split */
    int dl_ctx_max;       /* ... and only while a page-table row spans at most this many tokens */
    int dl_heads;         /* 1: one attention item per query head where they fit */
    CUdeviceptr d_layers; /* its per-layer weight pointers */
    /* chained greedy steps (forward): one may be queued, with its sampled-id slot (1 or 2), the
     * position it runs at, the token it was given, the page-row width */
    int chain_on, chain_q, chain_par, chain_masked; /* chain_masked: the queued step computes logits only, its
                                                      * row sampled under a mask by the call that takes it */
    int32_t chain_pos, chain_tok, chain_mp;
    CUevent chain_ev[3]; /* recorded after the step launched in a call (0) and after each chained one */
    /* multi-step greedy runs (forward): run_steps is what the next persistent launch runs; a run in
     * flight has run_k steps from position run_pos0, run_j of them returned, the last with token
     * run_tok; run_host (mapped, run_dev on the device): RUN_MAX token slots, a 1 (what a cancel
     * copies), RUN_MAX + 1 zeros; d_cancel: the run's cancel flag, set through the side stream while
     * the run occupies st->stream */
    int run_max, run_steps, run_k, run_j;
    int32_t run_pos0, run_mp, run_tok;
    int32_t *run_host;
    CUdeviceptr run_dev, d_cancel;
    CUstream side;
    const ig_model_comm *comm; /* tensor-parallel packages: the runtime's collectives (ctx->comm) */
    /* the prefix cache's host tier (kv_page_copy): ctx->n_host_pages pages of pinned memory in
     * chunks of HOST_CHUNK_PAGES, each allocated when a page of it is first written */
    unsigned char **host_chunks; /* [n_host_chunks], NULL until used */
    int32_t n_host_chunks;
} dev_state;
#define MASK_WORDS IG_MASK_WORDS(VOCAB)
#define MASK_ROWS_BYTES(st) WS_ALIGN(sizeof(int32_t) * (uint64_t)(st)->max_tokens)
/* host-tier pages per pinned chunk: about 64 MB */
#define HOST_CHUNK_PAGES ((int32_t)((64u << 20) / KV_PAGE_BYTES > 0 ? (64u << 20) / KV_PAGE_BYTES : 1))
/* where a step's sampled ids land: the staging area after the sampling parameters (max_tokens ids,
 * then one for each of the two chained-step slots) */
#define SAMPLED_IDS(st) ((int32_t *)((st)->pinned_smp + sizeof(ig_fwd_sample) * (st)->max_tokens))

/* A failed CUDA call returns -(IG_DEVICE_ERR + result * 10000 + line) (ig_model_abi.h): the line of
 * model.c, or of this file plus IG_DEVICE_ERR_HOST_LINE, so that the runtime's error names the call
 * and the driver's error code. */
#ifndef CU_LINE
#define CU_LINE (IG_DEVICE_ERR_HOST_LINE + __LINE__)
#endif
#define CU(call)                                                                       \
    do {                                                                               \
        CUresult r_ = (call);                                                          \
        if (r_ != CUDA_SUCCESS) return -(IG_DEVICE_ERR + (int)(r_ % 1000) * 10000 + CU_LINE); \
    } while (0)
/* tuning sync synchronizes after every launch, so a faulting kernel is the one named */
#define LAUNCH(k, gx, gy, gz, bx, smem, args)                                                             \
    do {                                                                                                  \
        cu_prof_begin(&st->api, &st->prof, st->stream);                                                   \
        CU(cu_launch(&st->api, st->fn[k], st->stream, (gx), (gy), (gz), (bx), (smem), (args)));           \
        if (st->sync_each) CU(st->api.cuStreamSynchronize(st->stream));                                   \
        cu_prof_end(&st->api, &st->prof, st->stream, (k));                                                \
    } while (0)
/* y[T][ldy] (f32) = beta * y + x[T][K] . w[N][K]^T on cuBLAS (column-major view: y^T = w . x^T) */
#define GEMM(N, T_, K, w_, x_, y_, ldy, beta_) GEMM_OUT(N, T_, K, w_, x_, y_, ldy, beta_, 0)
/* ... with y in the 16-bit type when ybf16 */
#define GEMM_OUT(N, T_, K, w_, x_, y_, ldy, beta_, ybf16)                                          \
    do {                                                                                           \
        cu_prof_begin(&st->api, &st->prof, st->stream);                                            \
        CU(gemm(st, GEMM_FN, 0, (N), (T_), (K), (w_), (x_), (y_), (ldy), (beta_), (ybf16)));       \
        cu_prof_end(&st->api, &st->prof, st->stream, CU_PROF_SLOTS - 1);                           \
    } while (0)
/* y[T][ldy] = x[T][K] . w[N][K]^T with f32 operands and f32 arithmetic whatever the package's
 * type (the MoE router's logits of prefill-sized steps): cuBLAS's SGEMM (CUBLAS_COMPUTE_32F on a
 * handle left in its default math mode: no TF32), else gemm.cu's f32 instance, kernel fk (on the
 * H100 it took 247-254 us for a 2048- or 16-token step's router, 2048 x 128 x 2048, before it
 * prefetched its K slices; 121-125 us after: SPEC.md) */
#define GEMM_F32(fk, N, T_, K, w_, x_, y_, ldy)                                                    \
    do {                                                                                           \
        cu_prof_begin(&st->api, &st->prof, st->stream);                                            \
        CU(gemm(st, (fk), 1, (N), (T_), (K), (w_), (x_), (y_), (ldy), 0.0f, 0));                   \
        cu_prof_end(&st->api, &st->prof, st->stream, st->blas ? CU_PROF_SLOTS - 1 : (fk));          \
    } while (0)

/* acc[T][N] (int32) = xq[T][K] . w[N][K]^T in int8 on cuBLAS (CUBLAS_COMPUTE_32I: int8 tensor
 * cores), w the q8r rows read in place (row stride K + 16 bytes: wq.cuh), xq act8.cu's codes; the
 * prefill matmuls of a8w8 packages, only where st->blas is set (the generated code falls back to
 * the 16-bit path without cuBLAS) */
#define GEMM_I8(N, T_, K, w_, x_, acc_)                                                            \
    do {                                                                                           \
        cu_prof_begin(&st->api, &st->prof, st->stream);                                            \
        CU(gemm_i8(st, (N), (T_), (K), (w_), (x_), (acc_)));                                        \
        cu_prof_end(&st->api, &st->prof, st->stream, CU_PROF_SLOTS - 1);                           \
    } while (0)
static __attribute__((unused)) CUresult gemm_i8(dev_state *st, int N, int T, int K, CUdeviceptr w, CUdeviceptr xq, CUdeviceptr acc) {
    const int32_t alpha = 1, beta = 0;
    cublasStatus_t s = st->api.cublasGemmEx(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &alpha, (const void *)w, CUDA_R_8I,
                                            K + 16, (const void *)xq, CUDA_R_8I, K, &beta, (void *)acc, CUDA_R_32I, N,
                                            CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

/* y[T][ldy] = beta y + the e4m3 GEMM of fp8 packages (F8_GEMM) on cuBLASLt: w the f8r rows read in
 * place (row stride K + 16 bytes; their scales again as one f32 vector after the NP = N rounded up
 * to 16 rows: wq.cuh), xq [T][K] act8.cu's e4m3 codes (A8_F8) with their scales xs [T]; each sum
 * times s_n xs[t] inside the GEMM (outer-vector scale modes), f32 accumulation; y f32 (beta 0, or 1:
 * the residual add) or with ybf16 the package's 16-bit type (beta 0). Only where st->f8_on. */
#define GEMM_F8(N, T_, K, w_, xq_, xs_, y_, ldy, beta_, ybf16)                                     \
    do {                                                                                           \
        cu_prof_begin(&st->api, &st->prof, st->stream);                                            \
        CU(gemm_f8(st, (N), (T_), (K), (w_), (xq_), (xs_), (y_), (ldy), (beta_), (ybf16)));        \
        cu_prof_end(&st->api, &st->prof, st->stream, CU_PROF_SLOTS - 1);                           \
    } while (0)
static cublasStatus_t lt_set(const cu_api *a, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t k, const void *v,
                             size_t n) {
    return a->cublasLtMatmulDescSetAttribute(d, k, v, n);
}
static void f8_plan_free(const cu_api *a, f8_plan *p) {
    if (p->lc) a->cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) a->cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) a->cublasLtMatrixLayoutDestroy(p->la);
    if (p->d) a->cublasLtMatmulDescDestroy(p->d);
    memset(p, 0, sizeof *p);
}
/* Makes plan p for the shape: TN (A = the rows, K x N column-major with ld K + 16, transposed; B =
 * xq, K x T; C = D = y, N x T), both operands e4m3 with outer-vector f32 scales (pa, pb: this call's,
 * which the heuristic reads for their alignment; every later call's are 16-byte aligned too), f32
 * compute in fast-accumulation mode (the tensor cores' sums not promoted to f32 every few k steps:
 * H200, the 1B's 2048-token GEMMs qkv / o / gate/up / down 28.7 / 19.7 / 118.3 / 61.2 us -> 26.1 /
 * 17.7 / 107.1 / 55.8, 1.40-1.53x -> 1.54-1.68x bf16's cuBLAS; its rounding is far below the e4m3
 * activations'), and the heuristic's first algorithm for our workspace (none: cuBLASLt's implicit query at
 * each call, as before the cache). (Timing the heuristic's first six algorithms on a 256+ token
 * plan's own call and keeping the fastest left the 1B's 2048-token prefill as it was: H100, fp8
 * 230.4k tokens/s, its GEMMs 100 us a call against 97 with the first; dropped.) */
static cublasStatus_t f8_plan_make(dev_state *st, f8_plan *p, int N, int T, int K, int ldy, int ybf16, int beta1, const void *pa,
                                   const void *pb) {
    const cu_api *a = &st->api;
    const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N, mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const int8_t fast = 1;
    const cudaDataType yt = ybf16 ? (W_F16 ? CUDA_R_16F : CUDA_R_16BF) : CUDA_R_32F;
    const uint64_t wsb = BLAS_WS_BYTES;
    p->N = N, p->T = T, p->K = K, p->ldy = ldy, p->ybf16 = ybf16, p->beta1 = beta1;
    cublasStatus_t s = a->cublasLtMatmulDescCreate(&p->d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb);
    if (!s) s = a->cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K + 16);
    if (!s) s = a->cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)T, K);
    if (!s) s = a->cublasLtMatrixLayoutCreate(&p->lc, yt, (uint64_t)N, (uint64_t)T, ldy);
    if (s) {
        f8_plan_free(a, p);
        return s;
    }
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t r;
    int n = 0;
    cublasStatus_t h = a->cublasLtMatmulPreferenceCreate(&pref);
    if (!h) h = a->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (!h) h = a->cublasLtMatmulAlgoGetHeuristic(st->blaslt, p->d, p->la, p->lb, p->lc, p->lc, pref, 1, &r, &n);
    if (pref) a->cublasLtMatmulPreferenceDestroy(pref);
    p->has_algo = !h && n >= 1 && r.state == CUBLAS_STATUS_SUCCESS;
    if (p->has_algo) p->algo = r.algo;
    p->ok = 1;
    return CUBLAS_STATUS_SUCCESS;
}
static __attribute__((unused)) CUresult gemm_f8(dev_state *st, int N, int T, int K, CUdeviceptr w, CUdeviceptr xq,
                                                CUdeviceptr xs, CUdeviceptr y, int ldy, float beta, int ybf16) {
    const cu_api *a = &st->api;
    const int beta1 = beta != 0.0f;
    f8_plan *p = NULL;
    for (int i = 0; i < F8_PLANS && !p; i++) {
        f8_plan *q = &st->f8[i];
        if (q->ok && q->N == N && q->T == T && q->K == K && q->ldy == ldy && q->ybf16 == ybf16 && q->beta1 == beta1) p = q;
    }
    /* the scales: the rows' vector after the NP = N rounded up to 16 rows (wq.cuh), the tokens' xs */
    const CUdeviceptr wsc = w + (CUdeviceptr)((N + 15) / 16 * 16) * (CUdeviceptr)(K + 16);
    const void *pa = (const void *)(uintptr_t)wsc, *pb = (const void *)(uintptr_t)xs;
    if (!p) { /* a new shape: the next slot, round robin */
        p = &st->f8[st->f8_next];
        st->f8_next = (st->f8_next + 1) % F8_PLANS;
        f8_plan_free(a, p);
        if (f8_plan_make(st, p, N, T, K, ldy, ybf16, beta1, pa, pb)) return CUDA_ERROR_UNKNOWN;
    }
    const float alpha = 1.0f;
    cublasStatus_t s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa);
    if (!s) s = lt_set(a, p->d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb);
    if (!s)
        s = a->cublasLtMatmul(st->blaslt, p->d, &alpha, (const void *)(uintptr_t)w, p->la, (const void *)(uintptr_t)xq, p->lb,
                              &beta, (const void *)(uintptr_t)y, p->lc, (void *)(uintptr_t)y, p->lc, p->has_algo ? &p->algo : NULL,
                              (void *)(uintptr_t)st->blas_ws, BLAS_WS_BYTES, (cudaStream_t)st->stream);
    return s == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

/* The GEMM of the two macros above: w and x in the package's element type, or f32 when f32 is set;
 * without cuBLAS, gemm.cu's instance fk (GEMM_FN: the package's type), same contract. */
static CUresult gemm(dev_state *st, int fk, int f32, int N, int T, int K, CUdeviceptr w, CUdeviceptr x, CUdeviceptr y,
                     int ldy, float beta, int ybf16) {
    if (!st->blas) {
        void *args[] = {&N, &T, &K, &w, &x, &y, &ldy, &beta, &ybf16};
        return cu_launch(&st->api, st->fn[fk], st->stream, IG_GM_GRID_X(N), IG_GM_GRID_Y(T), 1, IG_GM_BLOCK, 0, args);
    }
    const float alpha = 1.0f;
    const cudaDataType h = W_F16 ? CUDA_R_16F : CUDA_R_16BF, dt = W_BF16 && !f32 ? h : CUDA_R_32F;
    cublasStatus_t s = st->api.cublasGemmEx(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &alpha, (const void *)w, dt,
                                            K, (const void *)x, dt, K, &beta, (void *)y, ybf16 ? h : CUDA_R_32F, ldy,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

/* The model's launch sequence (generated, after this file): one step's kernels on st->stream, the
 * batch already staged in st->pinned; run directly or while a CUDA graph captures it. Everything it
 * bakes in is in the graph key. */
static int launch_step(dev_state *st, int T, int n_out, int mpv, int prefill_runs, int do_sample, int decode_only,
                       int batch_ints, int chain);

/* ---- the persistent decode kernel (decode_layers.cu): where the model has it, model.c defines
 * DL_FN (its kernel index), DL_THREADS, DL_SMEM, DL_RESID_ROWS, the activations it reads and
 * writes (DL_X, DL_QKV, DL_ATTN, DL_MLP, DL_MOE_LG: workspace buffer names or 0), the embedding table and the
 * lm_head with its norm (DL_EMB, DL_HEAD_W, DL_HEAD_G: 0 when the kernel leaves them to the per-op
 * kernels) and dl_layer_table. */

/* Whether a one-token step whose page-table rows hold mpb pages runs on the persistent kernel: past
 * dl_ctx_max tokens the per-op kernels' split attention reads the context faster than the
 * persistent kernel's attention items (H200, 1B bf16, per-op against persistent: 24k 1.38 against
 * 1.33 ms/token, 32k 1.45 against 1.51, 128k 2.41 against 3.79). mpb is a power of two and part
 * of every graph's key, so a graph never replays the other choice. */
static int dl_fits(const dev_state *st, int mpb) {
    return st->dl_on && (long long)mpb * PAGE_SIZE <= st->dl_ctx_max;
}

#if HAS_DECODE_LAYERS
/* Fills tab[l] with layer l's DL_TAB weight pointers, in ig_dl_layer's order (generated). */
static void dl_layer_table(const dev_state *st, CUdeviceptr tab[N_LAYERS][DL_TAB]);

/* Launches a one-token step's layer stack as one cooperative kernel; *done = 1 when it ran. If the
 * GPU refuses the cooperative launch (e.g. an MPS share of the SMs), the per-op kernels run from
 * then on (st->dl_on = 0, *done stays 0). */
static int decode_layers(dev_state *st, int T, int n_out, int mpv, int do_sample, int *done) {
    WORKSPACE_CARVE(st->ws, st->max_tokens);
    CUdeviceptr d_ids = batch, d_pos = batch + 4ull * T, d_seq = batch + 8ull * T, d_pages = batch + 16ull * T;
    CUdeviceptr kv = st->kv, inv_freq = st->inv_freq;
    CUdeviceptr dl_x = DL_X, dl_qkv = DL_QKV, dl_attn = DL_ATTN, dl_mlp = DL_MLP, dl_lg = DL_MOE_LG;
    CUdeviceptr dl_tab = st->d_layers, dl_emb = DL_EMB, dl_hw = n_out > 0 ? DL_HEAD_W : 0, dl_hg = DL_HEAD_G;
    CUdeviceptr dl_pick = do_sample == 2 ? d_sampled : 0, dl_nid = do_sample == 2 ? d_ids : 0;
    CUdeviceptr dl_npos = do_sample == 2 ? d_pos : 0;
    /* a multi-step run (forward; never captured in a graph) or one step */
    int dl_steps = do_sample == 2 ? st->run_steps : 1;
    CUdeviceptr dl_tok = dl_steps > 1 ? st->run_dev : 0, dl_cancel = dl_steps > 1 ? dl_go + 4 * RUN_MAX : 0;
    CUdeviceptr dl_gop = dl_steps > 1 ? dl_go : 0; /* its decisions and cancel flag start at zero: */
    if (dl_steps > 1) CU(st->api.cuMemcpyHtoDAsync(dl_go, st->run_host + RUN_MAX + 1, 4 * (RUN_MAX + 1), st->stream));
    void *dl_args[] = {&dl_tab,   &dl_x,    &dl_qkv,  &dl_attn,  &dl_mlp,  &inv_freq,   &kv,      &d_pos,
                       &d_seq,    &d_pages, &mpv,     &attn_ws,  &attn_cnt, &dl_bar,    &st->dl_keys, &dl_emb,
                       &d_ids,    &dl_hw,   &dl_hg,   &d_logits, &dl_amax, &dl_pick,   &dl_nid,  &dl_npos,
                       &dl_steps, &dl_tok,  &dl_cancel, &dl_gop, &st->dl_heads, &dl_lg};
    cu_prof_begin(&st->api, &st->prof, st->stream);
    CUresult r = cu_launch_coop(&st->api, st->fn[DL_FN], st->stream, (unsigned)st->n_sm, DL_THREADS, DL_SMEM, dl_args);
    if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
        st->dl_on = 0;
        return 0;
    }
    CU(r);
    if (st->sync_each) CU(st->api.cuStreamSynchronize(st->stream));
    cu_prof_end(&st->api, &st->prof, st->stream, DL_FN);
    *done = 1;
    return 0;
}
#endif

/* ---- CUDA graphs */

/* Replays the CUDA graph of this step's shape, capturing it on first use. Steps of one token (the
 * GEMV kernels or the persistent one) and decode-only steps of more (cuBLAS, batched decode) both
 * take graphs; the batch's contents are uploaded by the graph's first node. */
static int launch_graph(dev_state *st, int T, int n_out, int mpb, int do_sample, int decode_only, int chain) {
    const int batch_ints = 4 * T + T * mpb; /* every page-table row the key allows: one size per graph */
    cu_graph_cache *gc = &st->graphs;
    const int key[6] = {T, n_out, mpb, do_sample, decode_only, chain};
    int i = 0;
    while (i < gc->n && memcmp(gc->key[i], key, sizeof key)) i++;
    if (i < gc->n) {
        gc->used[i] = ++gc->tick;
        CU(st->api.cuGraphLaunch(gc->exec[i], st->stream));
        return 0;
    }
    /* not captured: run the step directly (this also makes the driver load every kernel it uses,
     * which must not happen during a capture); the second time, capture it for the next */
    int rc0 = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, batch_ints, chain);
    if (rc0 || !cu_graphs_seen(gc, key)) return rc0;
    /* graphs are an optimization: if capturing fails, this engine runs such steps directly (a
     * batched step's failure leaves the one-token graphs on) */
    const int batched = !(T <= MV_TMAX && T <= st->gemv_tmax);
    CUgraph g = NULL;
    if (st->api.cuStreamBeginCapture(st->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) {
        if (batched) st->graph_tmax = 0;
        else st->use_graphs = 0;
        return 0;
    }
    int rc = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, batch_ints, chain);
    CUresult re = st->api.cuStreamEndCapture(st->stream, &g);
    CUgraphExec ex = NULL;
    CUresult ri = rc || re != CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : st->api.cuGraphInstantiate(&ex, g, 0);
    if (g) st->api.cuGraphDestroy(g);
    if (ri != CUDA_SUCCESS) {
        st->graph_error = ri;
        if (batched) st->graph_tmax = 0;
        else st->use_graphs = 0;
        return 0;
    }
    i = cu_graphs_slot(&st->api, gc);
    gc->exec[i] = ex, gc->used[i] = ++gc->tick;
    memcpy(gc->key[i], key, sizeof key);
    return 0;
}

/* ---- multi-step greedy runs and chained steps */

/* Waits for step j of the multi-step run in flight to publish its token (the host-mapped slot),
 * checking now and then that the stream has not failed or ended without it. */
static int run_wait(dev_state *st, int j) {
    volatile int32_t *slot = st->run_host + j;
    for (unsigned n = 1; *slot == RUN_PENDING; n++)
        if (!(n & 4095)) {
            CUresult q = st->api.cuStreamQuery(st->stream);
            if (q == CUDA_SUCCESS) return *slot == RUN_PENDING ? -5 : 0; /* the run stopped before step j */
            if (q != CUDA_ERROR_NOT_READY) CU(q);
        }
    return 0;
}

/* Returns step j of the multi-step run in flight as b's token, once it is out; the run ends after
 * its last step, or on an error. */
static int run_take(dev_state *st, int j, const ig_fwd_batch *b) {
    int rw = run_wait(st, j);
    if (rw) {
        st->run_k = 0;
        return rw;
    }
    b->sampled[0] = st->run_tok = st->run_host[j];
    st->run_j = j + 1;
    if (st->run_j == st->run_k) st->run_k = 0;
    return 0;
}

/* The kinds of step a chained step or a multi-step run continues: a single greedy row the step
 * samples itself (the persistent kernel's pick), or a single row sampled under its mask after the
 * step (sample_masked); 0 anything else. */
#define STEP_GREEDY 2
#define STEP_MASKED 3
/* Is b exactly the step that continues the last one of a single row of kind `want` (b's is `kind`):
 * token tok at position pos, with the page-table row (mp entries) the last launched step staged?
 * (What a chained step or a run's next step computed.) */
static int next_of(const dev_state *st, const ig_fwd_batch *b, int kind, int want, int32_t tok, int32_t pos, int32_t mp) {
    return b->n_tokens == 1 && b->n_out == 1 && b->n_seqs == 1 && kind == want && b->out_rows[0] == 0 &&
           b->token_ids[0] == tok && b->positions[0] == pos && b->max_pages_per_seq == mp &&
           !memcmp(b->page_table, st->pinned + 4, sizeof(int32_t) * (size_t)mp);
}

/* Stops the multi-step run in flight after its next step: its cancel flag is set by a copy on the
 * side stream (the run holds st->stream), waited for so that it cannot land in a later run. */
static CUresult run_cancel(dev_state *st) {
    st->run_k = 0;
    CUresult r = st->api.cuMemcpyHtoDAsync(st->d_cancel, st->run_host + RUN_MAX, sizeof(int32_t), st->side);
    return r == CUDA_SUCCESS ? st->api.cuStreamSynchronize(st->side) : r;
}

/* Steps a lone greedy sequence at position pos may run in one launch: the rest of its KV page,
 * within the context and st->run_max. */
static int run_length(const dev_state *st, int32_t pos) {
    int run = PAGE_SIZE - pos % PAGE_SIZE;
    if (run > MAX_CONTEXT - pos) run = MAX_CONTEXT - pos;
    if (run > st->run_max) run = st->run_max;
    return run;
}

/* ---- forward */

/* A last guard on the batch (the runtime validated it): 0, or the negative code forward returns. */
static int check_batch(const ig_model_ctx *ctx, const dev_state *st, const ig_fwd_batch *b) {
    const int T = b->n_tokens, n_out = b->n_out, mp = b->max_pages_per_seq;
#ifdef TP_RANKS /* a tensor-parallel package: the runtime's device collectives (NCCL) for this many ranks */
    if (!ctx->comm || ctx->comm->size != TP_RANKS || !ctx->comm->all_reduce_sum_dev || !ctx->comm->all_gather_dev)
        return IG_MODEL_ERR_TP_SIZE;
#endif
    if (!st || T < 1 || T > st->max_tokens || n_out < 0 || n_out > T || b->n_seqs < 1 || b->n_seqs > T || mp < 1 ||
        mp > st->max_pages)
        return -1;
    for (int t = 0; t < T; t++) {
        int s = b->token_seq[t], p = b->positions[t];
        if (b->token_ids[t] < 0 || b->token_ids[t] >= VOCAB || s < 0 || s >= b->n_seqs || p < 0 || p >= MAX_CONTEXT ||
            p / PAGE_SIZE >= mp)
            return -2;
        int32_t pg = b->page_table[s * mp + p / PAGE_SIZE];
        if (pg < 0 || pg >= ctx->n_pages) return -3;
    }
    for (int i = 0; i < n_out; i++)
        if (b->out_rows[i] < 0 || b->out_rows[i] >= T) return -4;
    return 0;
}

/* Stages b for one copy (ids, positions, sequences, logit rows, page-table rows of mpb entries,
 * sampling parameters); returns whether the step holds prefill runs (16 consecutive positions of a
 * sequence) for the tensor-core attention. */
static int stage_batch(dev_state *st, const ig_fwd_batch *b, int mpb, int do_sample) {
    const int T = b->n_tokens, n_out = b->n_out, mp = b->max_pages_per_seq;
    int32_t *hb = st->pinned;
    memcpy(hb, b->token_ids, sizeof(int32_t) * T);
    memcpy(hb + T, b->positions, sizeof(int32_t) * T);
    memcpy(hb + 2 * T, b->token_seq, sizeof(int32_t) * T);
    memcpy(hb + 3 * T, b->out_rows, sizeof(int32_t) * n_out);
    for (int s = 0; s < b->n_seqs; s++) memcpy(hb + 4 * T + s * mpb, b->page_table + s * mp, sizeof(int32_t) * mp);
    int prefill_runs = 0;
    for (int t = 1, run = 1; t < T && !prefill_runs; t++) {
        run = b->token_seq[t] == b->token_seq[t - 1] && b->positions[t] == b->positions[t - 1] + 1 ? run + 1 : 1;
        prefill_runs = run >= 16;
    }
    if (do_sample) memcpy(st->pinned_smp, b->sample, sizeof(ig_fwd_sample) * n_out);
    return prefill_runs;
}

/* Launches the step b asks for (staged first): a multi-step run, a graph replay or a direct launch. */
static int launch_new(dev_state *st, const ig_fwd_batch *b, int mpb, int do_sample, int decode_only) {
    const int T = b->n_tokens, n_out = b->n_out;
    const int prefill_runs = stage_batch(st, b, mpb, do_sample);
    /* a single greedy row with no logits wanted runs the rest of its KV page (up to run_max steps) in
     * one persistent launch, each step's token the previous one's pick, published as soon as picked */
    int run = DL_RUNS && st->run_max > 1 && dl_fits(st, mpb) && do_sample == 2 && T == 1 && decode_only && !b->logits
                  ? run_length(st, b->positions[0]) : 0;
    if (run > 1) {
        for (int j = 0; j < run; j++) st->run_host[j] = RUN_PENDING;
        st->run_steps = run;
        int rr = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, 4 * T + mpb, 0);
        st->run_steps = 1;
        if (rr) return rr;
        if (st->dl_on) { /* else the GPU refused the cooperative launch: that was one per-op step */
            st->run_k = run, st->run_j = 0, st->run_pos0 = b->positions[0], st->run_mp = b->max_pages_per_seq;
            return run_take(st, 0, b);
        }
        return 0;
    }
    /* one-token steps and decode-only batches replay graphs (batch sizes up to graph_tmax) */
    const int graph = st->use_graphs && ((T <= MV_TMAX && T <= st->gemv_tmax) || (decode_only && T <= st->graph_tmax));
    return graph ? launch_graph(st, T, n_out, mpb, do_sample, decode_only, 0)
                 : launch_step(st, T, n_out, mpb, prefill_runs, do_sample, decode_only, 4 * T + b->n_seqs * mpb, 0);
}

/* Whether to queue the next step of a single row of kind STEP_GREEDY or STEP_MASKED behind this one:
 * its next position stays in this KV page, so the step's pick left everything it needs in the batch
 * (the persistent kernel's pick, decode_layers.cu, or sample.cu's next_ids / next_pos). */
static int chain_next(const dev_state *st, const ig_fwd_batch *b, int kind, int decode_only) {
    return st->chain_on && st->dl_on && st->use_graphs && (kind == STEP_GREEDY || kind == STEP_MASKED) &&
           b->n_tokens == 1 && decode_only &&
           b->positions[0] + 1 < MAX_CONTEXT && (b->positions[0] + 1) / PAGE_SIZE == b->positions[0] / PAGE_SIZE;
}

/* ---- token masks (guided decoding): the rows' masks go up as a bitmask, sample.cu applies them */

/* Rows of b sampled on the device under a mask. */
static int count_masked(const ig_fwd_batch *b) {
    int n = 0;
    for (int i = 0; b->masks && i < b->n_out; i++) n += b->sample[i].on && b->masks[i] != NULL;
    return n;
}

/* Room for n masks, in pinned staging and on the device: grown to twice what it was (at most
 * max_tokens rows), the old buffers freed (no step in flight reads them: each call to forward
 * waited for its own). Run before the step's launches, so that nothing here waits on them. */
static int masks_reserve(dev_state *st, int n) {
    if (n <= st->mask_cap) return 0;
    int cap = st->mask_cap * 2 > n ? st->mask_cap * 2 : n < 4 ? 4 : n;
    if (cap > st->max_tokens) cap = st->max_tokens;
    const size_t bytes = MASK_ROWS_BYTES(st) + sizeof(uint32_t) * MASK_WORDS * (size_t)cap;
    /* allocations take the current context, which the caller's thread may not have made current
     * (stream-ordered calls name their stream) */
    if (st->api.cuCtxSetCurrent && st->cctx) CU(st->api.cuCtxSetCurrent(st->cctx));
    if (st->pinned_mask) CU(st->api.cuMemFreeHost(st->pinned_mask));
    if (st->d_mask) CU(st->api.cuMemFree(st->d_mask));
    st->pinned_mask = NULL, st->d_mask = 0, st->mask_cap = 0;
    CU(st->api.cuMemAllocHost((void **)&st->pinned_mask, bytes));
    CU(st->api.cuMemAlloc(&st->d_mask, bytes));
    st->mask_cap = cap;
    return 0;
}

/* Stages the step's row -> mask table and masks (b's, read now: the caller waited for them);
 * returns the bytes to copy up. Plain C: tested without a GPU. */
static size_t stage_masks(dev_state *st, const ig_fwd_batch *b) {
    int32_t *rows = (int32_t *)st->pinned_mask;
    uint32_t *words = (uint32_t *)(st->pinned_mask + MASK_ROWS_BYTES(st));
    int k = 0;
    for (int i = 0; i < b->n_out; i++) {
        rows[i] = b->sample[i].on && b->masks[i] ? k : -1;
        if (rows[i] < 0) continue;
        memcpy(words + (size_t)k * MASK_WORDS, b->masks[i], sizeof(uint32_t) * MASK_WORDS);
        k++;
    }
    return MASK_ROWS_BYTES(st) + sizeof(uint32_t) * MASK_WORDS * (size_t)k;
}

/* The sampling of a step with masked rows, queued after its kernels (which computed the logits
 * only): waits for the runtime's masks (the host computes them while the device runs the step),
 * then the parameters and masks up, sample.cu over every row (reading the rows, not the
 * persistent kernel's per-CTA picks, which are of unmasked rows), the ids back to the staging slot
 * of `cur` (0: a step launched by this call, 1 / 2: a chained one). With `chain`, the pick also
 * becomes the input of the chained step queued next (the batch's token and position). */
static int sample_masked(dev_state *st, const ig_fwd_batch *b, int cur, int chain) {
    WORKSPACE_CARVE(st->ws, st->max_tokens);
    int n_out = b->n_out, n_part = 0;
    CUdeviceptr next_ids = chain ? batch : 0, next_pos = chain ? batch + 4 : 0; /* one token: ids, then positions */
    if (b->masks_wait) b->masks_wait(b->masks_user);
    const size_t up = stage_masks(st, b);
    memcpy(st->pinned_smp, b->sample, sizeof(ig_fwd_sample) * n_out);
    CU(st->api.cuMemcpyHtoDAsync(d_sp, st->pinned_smp, sizeof(ig_fwd_sample) * n_out, st->stream));
    CU(st->api.cuMemcpyHtoDAsync(st->d_mask, st->pinned_mask, up, st->stream));
    CUdeviceptr d_words = st->d_mask + MASK_ROWS_BYTES(st), d_rows = st->d_mask;
    void *args[] = {&n_out, &d_logits, &d_sp, &d_sampled, &dl_amax, &n_part, &d_words, &d_rows, &next_ids, &next_pos};
    LAUNCH(SAMPLE_FN, IG_SM_GRID_X(n_out), 1, 1, IG_SM_BLOCK, 0, args);
    CU(st->api.cuMemcpyDtoHAsync(SAMPLED_IDS(st) + (cur ? st->max_tokens + cur - 1 : 0), d_sampled,
                                 sizeof(int32_t) * n_out, st->stream));
    return 0;
}

/* Runs one step: see ig_fwd_batch in ig_model_abi.h. */
static int forward(const ig_model_ctx *ctx, const ig_fwd_batch *b) {
    dev_state *st = ctx->device_state;
    int bad = check_batch(ctx, st, b);
    if (bad) return bad;
    const int T = b->n_tokens, n_out = b->n_out, mp = b->max_pages_per_seq;
    /* page-table rows padded to a power of two, so decode steps reuse a few graphs as contexts grow */
    int mpb = 1;
    while (mpb < mp) mpb *= 2;
    if (mpb > st->max_pages) mpb = st->max_pages;
    /* device sampling: the rows' parameters go up with the batch, one id per row comes back;
     * 2: a single greedy row, which the persistent kernel picks itself when it runs the step */
    const int masked = b->sample != NULL && n_out > 0 ? count_masked(b) : 0;
    /* a step with masked rows computes only the logits, its sampling queued after them
     * (sample_masked): never a multi-step run (its picks are unmasked); a single masked row may
     * chain (STEP_MASKED), its next step queued behind the sampling, which hands it the pick */
    const int do_sample = b->sample != NULL && n_out > 0 && !masked
                              ? (n_out == 1 && b->sample[0].on && b->sample[0].temperature == 0.0f ? 2 : 1) : 0;
    const int kind = masked ? (n_out == 1 ? STEP_MASKED : 0) : do_sample == 2 ? STEP_GREEDY : 0;
    if (masked) CU(masks_reserve(st, masked));
    /* one token per sequence (pure decode): rope_kv runs inside the attention kernel */
    const int decode_only = b->n_seqs == T;
    /* a multi-step run in flight: this step is its next one when the engine asks for exactly that
     * (the token the run returned last, the next position, the same page-table row) */
    if (st->run_k) {
        if (!b->logits && next_of(st, b, kind, STEP_GREEDY, st->run_tok, st->run_pos0 + st->run_j, st->run_mp))
            return run_take(st, st->run_j, b);
        /* otherwise the run stops after its next step (it reads the flag during each step's lm_head);
         * like a chained step, its extra steps leave only K/V in the page its sequence wrote last. It
         * must be over before run_host is reused (a run still going would write its tokens into a new
         * run's slots). */
        CU(run_cancel(st));
        CU(st->api.cuStreamSynchronize(st->stream));
    }
    /* the chained step the previous call queued is this step when the engine asks for exactly what it
     * computes: the same single row of the same kind, with the token the previous step returned, at the next
     * position, with the same page-table row; otherwise it ran for nothing, before this step in
     * stream order: all it leaves is the K/V of position chain_pos in the page its sequence wrote
     * last, which no other sequence reads */
    int cur = 0; /* whose results this call returns: 0 a step launched here, 1 / 2 the chained one */
    if (st->chain_q) {
        st->chain_q = 0;
        if (next_of(st, b, kind, st->chain_masked ? STEP_MASKED : STEP_GREEDY, st->chain_tok, st->chain_pos, st->chain_mp))
            cur = st->chain_par;
    }
    if (!cur) {
        int rc = launch_new(st, b, mpb, do_sample, decode_only);
        if (rc || st->run_k) return rc; /* an error, or a run started (its first token is out) */
    }
    if (n_out > 0 && b->logits)
        CU(st->api.cuMemcpyDtoHAsync(b->logits, st->d_logits, sizeof(float) * n_out * VOCAB, st->stream));
    const int chain = chain_next(st, b, kind, decode_only);
    if (masked) { /* after the logits' copy: the masks are applied in place */
        int rs = sample_masked(st, b, cur, chain);
        if (rs) return rs;
    }
    CU(st->api.cuEventRecord(st->chain_ev[cur], st->stream));
    if (chain) {
        const int nxt = cur == 1 ? 2 : 1; /* its sampled id lands apart from this step's */
        /* a greedy row's step picks its own token; a masked row's computes the logits only */
        if (launch_graph(st, 1, 1, mpb, kind == STEP_MASKED ? 0 : 2, 1, nxt) == 0 &&
            st->api.cuEventRecord(st->chain_ev[nxt], st->stream) == CUDA_SUCCESS)
            st->chain_q = 1, st->chain_par = nxt, st->chain_pos = b->positions[0] + 1, st->chain_mp = mp,
            st->chain_masked = kind == STEP_MASKED;
        else
            st->chain_on = 0; /* a failing device shows in the wait below */
    }
    CU(st->api.cuEventSynchronize(st->chain_ev[cur]));
    const int32_t *tok = SAMPLED_IDS(st) + (cur ? st->max_tokens + cur - 1 : 0);
    if (do_sample || masked)
        for (int i = 0; i < n_out; i++)
            if (b->sample[i].on) b->sampled[i] = tok[i];
    if (st->chain_q) st->chain_tok = tok[0];
    return 0;
}


/* ---- the prefix cache's host tier */

/* Host page hp's bytes, its chunk pinned now when `make` (a page going there), else NULL when the
 * chunk was never made. Plain C but for the allocation: tested without a GPU. */
static unsigned char *host_page(dev_state *st, int32_t hp, int make) {
    const int32_t c = hp / HOST_CHUNK_PAGES;
    if (!st->host_chunks || c >= st->n_host_chunks) return NULL;
    if (!st->host_chunks[c] && make &&
        st->api.cuMemAllocHost((void **)&st->host_chunks[c], (size_t)HOST_CHUNK_PAGES * KV_PAGE_BYTES) != CUDA_SUCCESS)
        st->host_chunks[c] = NULL;
    return st->host_chunks[c] ? st->host_chunks[c] + (size_t)(hp % HOST_CHUNK_PAGES) * KV_PAGE_BYTES : NULL;
}

/* ig_model_desc.kv_page_copy: device page <-> host page, queued on the forward stream (ordered
 * after the steps queued before, before those after: nothing waits here). */
static int kv_page_copy(const ig_model_ctx *ctx, int32_t to_host, int32_t page, int32_t hp) {
    dev_state *st = ctx->device_state;
    if (!st || page < 0 || page >= ctx->n_pages || hp < 0 || hp >= ctx->n_host_pages) return -1;
    /* the caller's thread (the engine's scheduler) may not have made the context current: the
     * stream-ordered calls name their stream, but a chunk's allocation takes the current context */
    if (st->api.cuCtxSetCurrent && st->cctx) CU(st->api.cuCtxSetCurrent(st->cctx));
    unsigned char *h = host_page(st, hp, to_host);
    if (!h) return -2;
    const CUdeviceptr d = st->kv + (CUdeviceptr)page * KV_PAGE_BYTES;
    CU(to_host ? st->api.cuMemcpyDtoHAsync(h, d, KV_PAGE_BYTES, st->stream)
               : st->api.cuMemcpyHtoDAsync(d, h, KV_PAGE_BYTES, st->stream));
    return 0;
}

/* ---- init and fini */

static void fini(ig_model_ctx *ctx) {
    dev_state *st = ctx->device_state;
    if (!st) return;
    if (st->api.cuCtxSetCurrent && st->cctx) st->api.cuCtxSetCurrent(st->cctx);
    if (st->run_k) run_cancel(st); /* a run in flight stops after its next step */
    if (st->stream) st->api.cuStreamSynchronize(st->stream);
    if (st->side) st->api.cuStreamDestroy(st->side);
    if (st->prof.on) {
        cu_prof_print(&st->prof, kernel_names, N_KERNELS);
        for (int i = 0; i < 2; i++)
            if (st->prof.ev[i]) st->api.cuEventDestroy(st->prof.ev[i]);
    }
    cu_graphs_clear(&st->api, &st->graphs);
    for (int i = 0; i < 3; i++)
        if (st->chain_ev[i]) st->api.cuEventDestroy(st->chain_ev[i]);
    for (int i = 0; i < F8_PLANS; i++)
        if (st->f8[i].d) f8_plan_free(&st->api, &st->f8[i]);
    if (st->blaslt) st->api.cublasLtDestroy(st->blaslt);
    if (st->blas) st->api.cublasDestroy(st->blas);
    if (st->pinned) st->api.cuMemFreeHost(st->pinned);
    if (st->pinned_smp) st->api.cuMemFreeHost(st->pinned_smp);
    if (st->pinned_mask) st->api.cuMemFreeHost(st->pinned_mask);
    if (st->run_host) st->api.cuMemFreeHost(st->run_host);
    for (int32_t i = 0; i < st->n_host_chunks; i++)
        if (st->host_chunks[i]) st->api.cuMemFreeHost(st->host_chunks[i]);
    free(st->host_chunks);
    CUdeviceptr bufs[] = {st->w, st->kv, st->ws, st->inv_freq, st->d_layers, st->blas_ws, st->d_mask};
    for (int i = 0; i < 7; i++)
        if (bufs[i]) st->api.cuMemFree(bufs[i]);
    if (st->mod) st->api.cuModuleUnload(st->mod);
    if (st->stream) st->api.cuStreamDestroy(st->stream);
    if (st->cctx) st->api.cuDevicePrimaryCtxRelease(st->dev);
    cu_api_close(&st->api);
    free(st);
    ctx->device_state = NULL;
}

/* In the init steps below: a failed call frees everything (fini) and fails init with a message. */
#define TRY(call, what)                                                        \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            cu_errf(err, cap, "%s: %s", what, cu_strerr(&st->api, r_));        \
            fini(ctx);                                                         \
            return -1;                                                         \
        }                                                                      \
    } while (0)
#define FAIL(...)                         \
    do {                                  \
        cu_errf(err, cap, __VA_ARGS__);   \
        fini(ctx);                        \
        return -1;                        \
    } while (0)

/* The run-time choices of a GPU of compute capability major.x with n_sm SMs, from the tuning (whose
 * values are in range: runtime/serving/tuning.c checked them). Plain C: tested without a GPU. */
static void apply_tuning(dev_state *st, const ig_model_tuning *t, int major, int n_sm, int32_t max_tokens) {
    st->max_tokens = max_tokens;
    st->max_pages = MAX_PAGES_PER_SEQ;
    st->sync_each = t->sync;
    st->use_graphs = !t->sync && t->graphs && !t->profile;
    st->prof.on = t->profile;
    st->gemv_tmax = t->gemv_tmax > MV_TMAX ? MV_TMAX : t->gemv_tmax;
    st->n_sm = n_sm;
    st->mv_ctas = (n_sm > 0 ? n_sm : 1) * (t->mv_ctas_per_sm > 0 ? t->mv_ctas_per_sm : IG_MV_CTAS_PER_SM);
    st->at_ctas = (n_sm > 0 ? n_sm : 1) * (t->at_ctas_per_sm > 0 ? t->at_ctas_per_sm : IG_AT_CTAS_PER_SM);
    st->mvt_tmax = major < 8 ? 0 : t->mvt_tmax > IG_MVT_TMAX ? IG_MVT_TMAX : t->mvt_tmax;
    st->mvtq_tmax = major < 8 ? 0 : t->mvtq_tmax > IG_MVT_TMAX ? IG_MVT_TMAX : t->mvtq_tmax;
    st->a8_wg_tiles = t->a8_wg_tiles > 0 ? t->a8_wg_tiles : (n_sm + 1) / 2;
    st->a8_wg_sms = n_sm > 0 ? n_sm : 1;
    st->a8_wg_split = t->a8_wg_split > 1 ? t->a8_wg_split : 1;
    st->qg_on = major >= 8;
    st->chain_on = t->chain;
    st->run_max = t->run_steps > 0 ? t->run_steps : PAGE_SIZE;
    if (st->run_max > RUN_MAX) st->run_max = RUN_MAX;
    if (t->profile) st->run_max = 1; /* profiles time single steps */
    st->run_steps = 1;
    st->graph_tmax = t->graph_tmax < 0 ? max_tokens : t->graph_tmax;
    st->dl_keys = t->dl_keys;
    st->dl_heads = t->dl_heads;
    st->dl_ctx_max = t->dl_ctx_max;
}

/* The driver, the GPU, its kernel image and the functions of model.cu; major: the GPU's compute
 * capability major, name: its name. */
static int open_device(ig_model_ctx *ctx, dev_state *st, int *major, char *name, size_t name_cap, char *err,
                       size_t cap) {
    if (cu_api_load(&st->api, ctx->tuning ? ctx->tuning->cublas : 1, err, cap)) {
        fini(ctx);
        return -1;
    }
    CUresult r = st->api.cuInit(0);
    int n_dev = 0, minor = 0;
    if (r == CUDA_SUCCESS) st->api.cuDeviceGetCount(&n_dev);
    if (r != CUDA_SUCCESS || n_dev == 0)
        FAIL("this package targets CUDA but no CUDA GPU is available (%s)", r ? cu_strerr(&st->api, r) : "0 devices");
    if (ctx->device_index < 0 || ctx->device_index >= n_dev) FAIL("GPU %d requested, %d present", ctx->device_index, n_dev);
    TRY(st->api.cuDeviceGet(&st->dev, ctx->device_index), "cuDeviceGet");
    st->api.cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev);
    st->api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev);
    st->api.cuDeviceGetName(name, (int)name_cap, st->dev);
    cu_image images[N_IMAGES];
    for (int i = 0; i < N_IMAGES; i++)
        images[i] = (cu_image){image_arch[i], image_is_ptx[i], image_data[i], (size_t)(image_end[i] - image_data[i])};
    int pick = cu_pick_image(images, N_IMAGES, *major * 10 + minor);
    if (pick < 0)
        FAIL("GPU %s is sm_%d%d; this package holds code for %s (PTX compute_%d): recompile with --target cuda:sm_%d%d",
             name, *major, minor, PACKAGE_ARCHS, PACKAGE_PTX, *major, minor);
    TRY(st->api.cuDevicePrimaryCtxRetain(&st->cctx, st->dev), "cuDevicePrimaryCtxRetain");
    TRY(st->api.cuCtxSetCurrent(st->cctx), "cuCtxSetCurrent");
    TRY(st->api.cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    TRY(st->api.cuModuleLoadData(&st->mod, images[pick].data), "loading the kernel image");
    /* wgmma kernels (an sm_90a cubin) may take IG_MO_WG_SMEM / IG_A8_WG_SMEM of shared memory; every other kernel 96 KB */
    CUdeviceptr wgp;
    size_t wgn = 0;
    if (st->api.cuModuleGetGlobal(&wgp, &wgn, st->mod, "ig_wg_built") == CUDA_SUCCESS && wgn == sizeof(int)) {
        TRY(st->api.cuMemcpyDtoHAsync(&st->wg, wgp, sizeof(int), st->stream), "reading ig_wg_built");
        TRY(st->api.cuStreamSynchronize(st->stream), "reading ig_wg_built");
    }
    for (int i = 0; i < N_KERNELS; i++) {
        CUresult rk = st->api.cuModuleGetFunction(&st->fn[i], st->mod, kernel_names[i]);
        if (rk != CUDA_SUCCESS) FAIL("kernel %s missing from the image: %s", kernel_names[i], cu_strerr(&st->api, rk));
        st->api.cuFuncSetAttribute(st->fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   st->wg ? (IG_MO_WG_SMEM > IG_A8_WG_SMEM ? IG_MO_WG_SMEM : IG_A8_WG_SMEM) : 96 * 1024);
    }
    return 0;
}

/* KV pages when the runtime left the pool's size to the package: the share `fraction` of the
 * memory that `fixed` bytes (weights, workspace, libraries) leave of `free_b`. Plain C: tested
 * without a GPU. */
static int32_t kv_pages_for(size_t free_b, size_t fixed, float fraction) {
    if (free_b <= fixed || !(fraction > 0.0f)) return 0;
    double pages = (double)(free_b - fixed) * (fraction > 1.0f ? 1.0f : fraction) / (double)KV_PAGE_BYTES;
    return pages >= 2147483647.0 ? 2147483647 : (int32_t)pages;
}

/* The KV pool's tensor map for prefill attention's _flash_ws (KV_TMAP packages on wgmma images): the
 * pool as rows of HEAD_DIM 16-bit elements, boxes of 64 columns x min(PAGE_SIZE, 64) rows (a page's
 * rows of one KV head, or 64 of them) in the 128-byte swizzle of wgmma.cuh's tiles. Left off (the
 * warpgroups load their own tiles, _flash_wg) where the driver lacks the call or refuses the map. */
static void open_kv_map(dev_state *st, size_t kv_bytes) {
#if KV_TMAP
    if (!st->wg || !st->api.cuTensorMapEncodeTiled) return;
    const cuuint64_t dims[2] = {HEAD_DIM, kv_bytes / (2 * HEAD_DIM)}, strides[1] = {2 * HEAD_DIM};
    const cuuint32_t box[2] = {64, PAGE_SIZE < 64 ? PAGE_SIZE : 64}, step[2] = {1, 1};
    st->kvmap_on = st->api.cuTensorMapEncodeTiled(&st->kvmap, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)st->kv, dims, strides,
                                                  box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#else
    (void)st, (void)kv_bytes;
#endif
}

/* *out = a tensor map of rows x cols elements of esz bytes (2: the 16-bit type, 1: int8 codes) at p,
 * rows ld bytes apart, boxes of 128 bytes of columns x box_rows rows in the 128-byte swizzle of
 * wgmma.cuh's tiles (moe.cu's _gu_wg / _down_wg, act8.cu's A8_WG_NAME): kept in st->tmaps (a slot per
 * (p, cols, ld, esz, box_rows) by p's hash, probing 8; past them the first is taken over) and
 * encoded again when its rows change. 0 where the driver lacks the call or refuses the map (the
 * generated code then launches the kernels without TMA). */
static __attribute__((unused)) int tile_map_of(dev_state *st, CUtensorMap *out, CUdeviceptr p, uint64_t rows, uint64_t cols,
                                               uint64_t ld, uint32_t esz, uint32_t box_rows) {
    if (!st->api.cuTensorMapEncodeTiled) return 0;
    const size_t home = (size_t)((p >> 8) ^ (p >> 20)) % TILE_MAP_SLOTS;
    tile_map_slot *s = &st->tmaps[home];
    for (size_t i = 0; i < 8; i++) {
        tile_map_slot *c = &st->tmaps[(home + i) % TILE_MAP_SLOTS];
        if ((c->p == p && c->cols == cols && c->ld == ld && c->esz == esz && c->box_rows == box_rows) || !c->p) {
            s = c;
            break;
        }
    }
    if (s->p != p || s->cols != cols || s->ld != ld || s->esz != esz || s->box_rows != box_rows || s->rows != rows) {
        const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld};
        const cuuint32_t box[2] = {128 / esz, box_rows}, step[2] = {1, 1};
        s->p = p, s->rows = rows, s->cols = cols, s->ld = ld, s->esz = esz, s->box_rows = box_rows;
        s->ok = st->api.cuTensorMapEncodeTiled(&s->map, esz == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 2,
                                               (void *)p, dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    }
    if (s->ok) *out = s->map;
    return (int)s->ok;
}
/* rows of cols 16-bit elements, packed (moe.cu) */
static __attribute__((unused)) int tile_map(dev_state *st, CUtensorMap *out, CUdeviceptr p, uint64_t rows, uint64_t cols,
                                            uint32_t box_rows) {
    return tile_map_of(st, out, p, rows, cols, 2 * cols, 2, box_rows);
}

/* Weights, KV pool, workspace, RoPE table, pinned staging, events, the run slots and the side stream. */
static int alloc_device(ig_model_ctx *ctx, dev_state *st, const char *name, char *err, size_t cap) {
    size_t w_bytes = W_BYTES, ws_bytes = workspace_bytes(ctx->max_tokens, 1), free_b = 0, total_b = 0;
    st->api.cuMemGetInfo(&free_b, &total_b);
    const size_t fixed = w_bytes + ws_bytes + BLAS_WS_BYTES + (64u << 20); /* + staging, modules */
    if (ctx->n_pages == 0) ctx->n_pages = kv_pages_for(free_b, fixed, ctx->kv_fraction);
    if (ctx->n_pages < 1)
        FAIL("not enough memory on %s for a KV cache: weights %.2f GB + workspace %.2f GB leave no room in "
             "%.2f GB free", name, w_bytes / 1e9, ws_bytes / 1e9, free_b / 1e9);
    size_t kv_bytes = (size_t)ctx->n_pages * KV_PAGE_BYTES;
    if (fixed + kv_bytes > free_b)
        FAIL("not enough memory on %s: weights %.2f GB + KV cache %.2f GB (%d pages) + workspace %.2f GB > %.2f GB free; "
             "ask for fewer KV pages or tokens per step",
             name, w_bytes / 1e9, kv_bytes / 1e9, ctx->n_pages, ws_bytes / 1e9, free_b / 1e9);
    TRY(st->api.cuMemAlloc(&st->w, w_bytes), "allocating weights");
    TRY(st->api.cuMemcpyHtoD(st->w, ctx->weights, w_bytes), "copying weights");
    TRY(st->api.cuMemAlloc(&st->kv, kv_bytes), "allocating the KV cache");
    TRY(st->api.cuMemsetD8(st->kv, 0, kv_bytes), "clearing the KV cache");
    open_kv_map(st, kv_bytes);
    TRY(st->api.cuMemAlloc(&st->ws, ws_bytes), "allocating the workspace");
    TRY(st->api.cuMemsetD8(st->ws, 0, ws_bytes), "clearing the workspace"); /* attention counters start at 0 */
    /* the RoPE frequencies, then (ROPE_LOCAL: Gemma 3) the sliding-window layers' */
    TRY(st->api.cuMemAlloc(&st->inv_freq, (1 + ROPE_LOCAL) * sizeof rope_inv_freq), "allocating RoPE frequencies");
    TRY(st->api.cuMemcpyHtoD(st->inv_freq, rope_inv_freq, sizeof rope_inv_freq), "copying RoPE frequencies");
#if ROPE_LOCAL
    TRY(st->api.cuMemcpyHtoD(st->inv_freq + sizeof rope_inv_freq, rope_inv_freq_local, sizeof rope_inv_freq_local),
        "copying RoPE frequencies");
#endif
    TRY(st->api.cuMemAllocHost((void **)&st->pinned, sizeof(int32_t) * (size_t)ctx->max_tokens * (4 + MAX_PAGES_PER_SEQ)),
        "pinned staging");
    TRY(st->api.cuMemAllocHost((void **)&st->pinned_smp,
                               (sizeof(ig_fwd_sample) + sizeof(int32_t)) * (size_t)ctx->max_tokens + 2 * sizeof(int32_t)),
        "pinned staging");
    for (int i = 0; i < 3; i++) TRY(st->api.cuEventCreate(&st->chain_ev[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    TRY(st->api.cuMemAllocHost((void **)&st->run_host, sizeof(int32_t) * (2 * RUN_MAX + 2)), "pinned run slots");
    memset(st->run_host, 0, sizeof(int32_t) * (2 * RUN_MAX + 2));
    st->run_host[RUN_MAX] = 1;
    TRY(st->api.cuStreamCreate(&st->side, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    TRY(st->api.cuMemHostGetDevicePointer(&st->run_dev, st->run_host, 0), "mapping the run slots");
    if (ctx->n_host_pages > 0) { /* the host tier's chunk table (the chunks come as pages go there) */
        st->n_host_chunks = (ctx->n_host_pages + HOST_CHUNK_PAGES - 1) / HOST_CHUNK_PAGES;
        st->host_chunks = calloc((size_t)st->n_host_chunks, sizeof *st->host_chunks);
        if (!st->host_chunks) FAIL("out of memory for the host tier's table");
    }
    WORKSPACE_CARVE(st->ws, st->max_tokens);
    st->d_logits = d_logits;
    st->d_cancel = dl_go + 4 * RUN_MAX;
    return 0;
}

/* fp8 packages: cuBLASLt's e4m3 GEMM where the GPU has fp8 tensor cores (sm_89+) and cuBLASLt
 * takes the two outer-vector scales: a 16 x 16 x 16 probe on the zeroed workspace (zeros stay zeros)
 * into f32 with beta 1 and into the 16-bit type, as the generated code calls it. Otherwise st->f8_on
 * stays 0 and those steps dequantize the rows for cuBLAS's 16-bit GEMM (dequant.cu), said once. */
static int open_blaslt(ig_model_ctx *ctx, dev_state *st, char *err, size_t cap) {
    int major = 0, minor = 0;
    st->api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev);
    st->api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev);
    const char *why = major * 10 + minor < 89 ? "the GPU has no fp8 tensor cores (sm_89+)"
                      : !st->api.lib_blaslt  ? "cuBLASLt was not found beside cuBLAS"
                      : workspace_bytes(ctx->max_tokens, 1) < 4096 ? "the workspace is too small for its probe" : NULL;
    if (!why && st->api.cublasLtCreate(&st->blaslt) != CUBLAS_STATUS_SUCCESS) why = "cublasLtCreate failed";
    if (!why) {
        const CUdeviceptr z = st->ws; /* rows 16 x 32 bytes, their scales, then xq, xs, y */
        CUresult r = gemm_f8(st, 16, 16, 16, z, z + 1024, z + 1536, z + 2048, 16, 1.0f, 0);
        if (r == CUDA_SUCCESS) r = gemm_f8(st, 16, 16, 16, z, z + 1024, z + 1536, z + 3072, 16, 0.0f, 1);
        if (r == CUDA_SUCCESS) TRY(st->api.cuStreamSynchronize(st->stream), "cuBLASLt's first fp8 GEMM");
        else why = "cuBLASLt refused the e4m3 GEMM with per-row and per-token scales";
    }
    st->f8_on = !why;
    if (why)
        fprintf(stderr, "ignis (CUDA): fp8 package: %s; steps past the GEMV kernels dequantize the e4m3 rows to 16 bits "
                        "for cuBLAS instead (slower prefill, the same weights)\n", why);
    return 0;
}

/* cuBLAS on our stream, with our own workspace (so that a graph capture never allocates); where
 * host.h found none (or --tune cublas=0), st->blas stays NULL and gemm() runs gemm.cu. */
static int open_blas(ig_model_ctx *ctx, dev_state *st, char *err, size_t cap) {
    if (!st->api.lib_blas) {
        if (ctx->tuning->cublas) /* (not when --tune cublas=0 asked for it) */
            fprintf(stderr, "ignis (CUDA): cuBLAS not found: %s; prefill runs on the package's own GEMM (gemm.cu, "
                            "CUDA cores: slower)\n", st->api.blas_why);
        return 0;
    }
    if (st->api.cublasCreate(&st->blas) != CUBLAS_STATUS_SUCCESS) FAIL("cublasCreate failed");
    st->api.cublasSetStream(st->blas, st->stream); /* (this resets the workspace: set it after) */
    TRY(st->api.cuMemAlloc(&st->blas_ws, BLAS_WS_BYTES), "allocating the cuBLAS workspace");
    if (st->api.cublasSetWorkspace(st->blas, (void *)(uintptr_t)st->blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        FAIL("cublasSetWorkspace failed");
    /* cuBLAS sets itself up and loads its kernels on its first GEMM: 0.1-0.2 s on an H100, which
     * the first request big enough for cuBLAS paid in its time to first token (a16w4 / a16w8
     * packages run the steps up to qg_tmax tokens without cuBLAS: at 8 requests of 32 tokens the
     * first 256-token step took ~150 ms more). One 16 x 16 x 16 GEMM of the zeroed workspace's
     * first bytes into its next ones (zeros stay zeros) puts that in the load time. */
    if (workspace_bytes(ctx->max_tokens, 1) >= 4096) {
        TRY(gemm(st, 0, 0, 16, 16, 16, st->ws, st->ws, st->ws + 1024, 16, 0.0f, 0), "cuBLAS's first GEMM");
        TRY(st->api.cuStreamSynchronize(st->stream), "cuBLAS's first GEMM");
    }
    return F8_GEMM ? open_blaslt(ctx, st, err, cap) : 0;
}

#ifdef A8_CL_FN
/* act8.cu's int8 GEMM in clusters of A8_CL_SIZE CTAs (`--tune a8_wg=2`, the default) runs a
 * persistent grid: as many clusters as the GPU holds at once, which can be fewer than SMs / CL
 * (clusters stay inside a GPC: an H100 held 30 of four, 120 CTAs, not 33), and one more would wait
 * for a whole cluster to finish, doubling its tiles' time. The driver's count of them, else SMs / CL. */
static void a8_cluster_grid(dev_state *st) {
    int ncl = 0;
    if (st->wg && st->api.cuOccupancyMaxActiveClusters) {
        CUlaunchAttribute at = {0};
        at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at.value.clusterDim.x = A8_CL_SIZE, at.value.clusterDim.y = 1, at.value.clusterDim.z = 1;
        CUlaunchConfig cfg = {0};
        cfg.gridDimX = (unsigned)(st->a8_wg_sms / A8_CL_SIZE * A8_CL_SIZE), cfg.gridDimY = 1, cfg.gridDimZ = 1;
        cfg.blockDimX = IG_A8_WG_THREADS, cfg.blockDimY = 1, cfg.blockDimZ = 1;
        cfg.sharedMemBytes = IG_A8_WG_SMEM, cfg.attrs = &at, cfg.numAttrs = 1;
        if (st->api.cuOccupancyMaxActiveClusters(&ncl, st->fn[A8_CL_FN], &cfg) != CUDA_SUCCESS) ncl = 0;
    }
    if (ncl > 0 && ncl * A8_CL_SIZE <= st->a8_wg_sms) st->a8_wg_sms = ncl * A8_CL_SIZE;
}
#endif

#if HAS_DECODE_LAYERS
/* The persistent decode kernel, when this GPU runs it: sm_90, cooperative launches, one CTA per SM
 * with its ring, at most 1024 CTAs (dl_amax) and one batch of sums of a residual add per CTA
 * (DL_RESID_ROWS); then its per-layer pointer table goes to the device. */
static int open_decode_layers(ig_model_ctx *ctx, dev_state *st, int major, char *err, size_t cap) {
    int coop = 0, fit = 0, G = st->n_sm > 0 ? st->n_sm : 1;
    st->api.cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, st->dev);
    int limits = G <= 1024 && (HIDDEN + G - 1) / G <= DL_RESID_ROWS;
    if (!(major >= 9 && coop && limits && ctx->tuning->persistent &&
          st->api.cuFuncSetAttribute(st->fn[DL_FN], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, DL_SMEM) ==
              CUDA_SUCCESS &&
          st->api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&fit, st->fn[DL_FN], DL_THREADS, DL_SMEM) == CUDA_SUCCESS &&
          fit >= 1))
        return 0;
    CUdeviceptr tab[N_LAYERS][DL_TAB]; /* ig_dl_layer: wqkv wo wgu wdown g1 g2 bqkv bo bgu bdown qn kn router sgate sgu sdn */
    dl_layer_table(st, tab);
    TRY(st->api.cuMemAlloc(&st->d_layers, sizeof tab), "allocating the layer table");
    TRY(st->api.cuMemcpyHtoD(st->d_layers, tab, sizeof tab), "copying the layer table");
    st->dl_on = 1;
    return 0;
}
#endif

static int init(ig_model_ctx *ctx, char *err, size_t cap) {
    dev_state *st = calloc(1, sizeof *st);
    if (!st) {
        cu_errf(err, cap, "out of memory");
        return -1;
    }
    ctx->device_state = st;
    int major = 0, n_sm = 0;
    char name[128] = "?";
    if (open_device(ctx, st, &major, name, sizeof name, err, cap)) return -1;
    st->api.cuDeviceGetAttribute(&n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, st->dev);
    if (!ctx->tuning) FAIL("no tuning given by the runtime (ig_model_ctx.tuning)");
    apply_tuning(st, ctx->tuning, major, n_sm, ctx->max_tokens);
#ifdef A8_CL_FN
    a8_cluster_grid(st);
#endif
    st->comm = ctx->comm;
#ifdef TP_RANKS
    st->use_graphs = 0; /* tensor parallel: NCCL calls run directly (captured graphs of them: not yet) */
#endif
    if (st->prof.on) {
        TRY(st->api.cuEventCreate(&st->prof.ev[0], 0), "cuEventCreate");
        TRY(st->api.cuEventCreate(&st->prof.ev[1], 0), "cuEventCreate");
    }
    if (alloc_device(ctx, st, name, err, cap) || open_blas(ctx, st, err, cap)) return -1;
#if HAS_DECODE_LAYERS
    if (open_decode_layers(ctx, st, major, err, cap)) return -1;
#endif
    return 0;
}
#undef TRY
#undef FAIL

#ifndef IG_MODEL_GENERATED
/* The default model launches nothing; a test sees each step through IG_HOST_TEST_HOOK. */
#ifdef IG_HOST_TEST_HOOK
static void IG_HOST_TEST_HOOK(dev_state *st, int T, int chain);
#endif
static int launch_step(dev_state *st, int T, int n_out, int mpv, int prefill_runs, int do_sample, int decode_only,
                       int batch_ints, int chain) {
    (void)n_out, (void)mpv, (void)prefill_runs, (void)do_sample, (void)decode_only, (void)batch_ints;
#ifdef IG_HOST_TEST_HOOK
    IG_HOST_TEST_HOOK(st, T, chain);
#else
    (void)st, (void)T, (void)chain;
#endif
    return 0;
}
#endif
