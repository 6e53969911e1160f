/* test_host_runtime.c — the CUDA packages' host runtime (templates/cuda/host_runtime.c), compiled
 * on its own with its default model and run without a GPU: the tuning it derives its launch
 * choices from, the last guard on a batch, the multi-step run length, and forward's chained steps
 * (a queued step is returned only for exactly the step it computed), the host tier's page copies
 * (chunks of pinned memory made on first use, addresses, range guards), the MoE products' tensor-map
 * cache, the a8w8 cluster GEMM's grid (the clusters the driver says fit), through a stand-in driver
 * whose calls always succeed and a launch_step that counts its calls.
 * Built and run by tests/test_cuda_package.py (it needs the CUDA toolkit's headers). */
#define IG_HOST_TEST_HOOK on_step /* the default launch_step calls it */
#define A8_CL_FN 0   /* a package whose int8 GEMM runs in clusters of two (a8_wg=2): its grid's sizing */
#define A8_CL_SIZE 2
#include "host_runtime.c"

static int n_steps;
static void on_step(dev_state *st, int T, int chain) { n_steps++; }

static int fails;
#define EXPECT(c)                                                         \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                      \
        }                                                                 \
    } while (0)

static const ig_model_tuning defaults = {.persistent = 1, .run_steps = 0, .chain = 1, .graphs = 1, .graph_tmax = -1,
                                         .gemv_tmax = 1, .mvt_tmax = 2, .mv_ctas_per_sm = 0, .dl_keys = 256,
                                         .dl_heads = 1, .mvtq_tmax = 8};

static void test_tuning(void) {
    dev_state st;
    memset(&st, 0, sizeof st);
    apply_tuning(&st, &defaults, 9, 132, 256);
    EXPECT(st.use_graphs && st.chain_on && !st.sync_each && !st.prof.on);
    EXPECT(st.gemv_tmax == 1 && st.mvt_tmax == 2 && st.mvtq_tmax == 8 && st.mv_ctas == 132 * IG_MV_CTAS_PER_SM);
    EXPECT(st.run_max == PAGE_SIZE && st.run_steps == 1 && st.graph_tmax == 256 && st.dl_keys == 256 && st.dl_heads == 1);
    EXPECT(st.a8_wg_tiles == 66); /* half of 132 SMs */
    EXPECT(st.a8_wg_sms == 132);  /* the fused int8 GEMM's grid before a cluster package asks the driver */
    ig_model_tuning t = defaults;
    apply_tuning(&st, &t, 7, 80, 256); /* no tensor-core GEMV before sm_80 */
    EXPECT(st.mvt_tmax == 0 && st.mvtq_tmax == 0);
    t.sync = 1;
    apply_tuning(&st, &t, 9, 132, 256); /* a synchronizing launch cannot be captured */
    EXPECT(!st.use_graphs && st.sync_each);
    t = defaults, t.profile = 1, t.run_steps = 8;
    apply_tuning(&st, &t, 9, 132, 256); /* profiles time single steps, without graphs */
    EXPECT(st.prof.on && !st.use_graphs && st.run_max == 1);
    t = defaults, t.run_steps = 64, t.graph_tmax = 0, t.mv_ctas_per_sm = 2, t.gemv_tmax = 8;
    apply_tuning(&st, &t, 9, 132, 256);
    EXPECT(st.run_max == 64 && st.graph_tmax == 0 && st.mv_ctas == 264 && st.gemv_tmax == 8);
    t.a8_wg_tiles = 1;
    apply_tuning(&st, &t, 9, 132, 256);
    EXPECT(st.a8_wg_tiles == 1 && IG_A8_WG_USE(128, 256, st.a8_wg_tiles) && !IG_A8_WG_USE(127, 256, st.a8_wg_tiles));
    EXPECT(IG_A8_WG_USE(2048, 2048, 66) && !IG_A8_WG_USE(512, 2048, 66) && IG_A8_WG_USE(256, 16384, 66)); /* 128 / 32 / 128 tiles */
    /* K splits (a8_wg_split): off by default; SMs / tiles, at most the key, half the K steps, 160 / tiles */
    EXPECT(st.a8_wg_split == 1 && IG_A8_WG_SPLITS(128, 3072, 2048, 132, 1, st.a8_wg_split) == 1);
    t.a8_wg_split = 64;
    apply_tuning(&st, &t, 9, 132, 256);
    EXPECT(st.a8_wg_split == 64);
    EXPECT(IG_A8_WG_SPLITS(128, 3072, 2048, 132, 1, 64) == 8);   /* 12 tiles: 11 by SMs, 8 by 16 K steps */
    EXPECT(IG_A8_WG_SPLITS(128, 3072, 2048, 132, 1, 4) == 4);    /* the key */
    EXPECT(IG_A8_WG_SPLITS(128, 16384, 2048, 132, 1, 64) == 2);  /* 64 tiles */
    EXPECT(IG_A8_WG_SPLITS(2048, 16384, 2048, 132, 1, 64) == 1); /* 1024 tiles: none */
    EXPECT(IG_A8_WG_SPLITS(40, 2048, 8192, 132, 2, 64) == 8);    /* 8 tiles, 16 a cluster pair: 132 / 16 */
    EXPECT(IG_A8_WG_SPLITS(128, 2048, 8192, 132, 1, 64) == 16);  /* 8 tiles: 16 by SMs, 32 by K, 20 by the buffer */
    EXPECT(IG_A8_WG_SPLITS(128, 256, 256, 132, 1, 64) == 1);     /* 2 K steps: one a split at most */
    EXPECT(IG_A8_WG_GRID(128, 3072, 132, 1, 8) == 96 && IG_A8_WG_GRID(40, 2048, 132, 2, 8) == 128);
    t.run_steps = 1;
    apply_tuning(&st, &t, 9, 132, 256);
    EXPECT(st.run_max == 1); /* 1: runs off */
}

/* A one-sequence decode batch: token tok at position pos, pages 0.. of its row. */
typedef struct one {
    int32_t id, pos, seq, row, pages[MAX_PAGES_PER_SEQ], sampled;
    ig_fwd_sample smp;
    ig_fwd_batch b;
} one;

static void one_init(one *o, int32_t tok, int32_t pos, int32_t mp) {
    memset(o, 0, sizeof *o);
    o->id = tok, o->pos = pos;
    for (int i = 0; i < mp; i++) o->pages[i] = i;
    o->smp.on = 1; /* greedy (temperature 0) */
    o->b = (ig_fwd_batch){.n_tokens = 1, .token_ids = &o->id, .positions = &o->pos, .token_seq = &o->seq, .n_seqs = 1,
                          .page_table = o->pages, .max_pages_per_seq = mp, .n_out = 1, .out_rows = &o->row,
                          .sample = &o->smp, .sampled = &o->sampled};
}

static void test_batch_guard(void) {
    dev_state st;
    memset(&st, 0, sizeof st);
    st.max_tokens = 8, st.max_pages = MAX_PAGES_PER_SEQ;
    ig_model_ctx ctx = {.n_pages = 4, .device_state = &st};
    one o;
    one_init(&o, 5, 3, 1);
    EXPECT(check_batch(&ctx, &st, &o.b) == 0);
    o.id = VOCAB;
    EXPECT(check_batch(&ctx, &st, &o.b) == -2);
    one_init(&o, 5, PAGE_SIZE, 1); /* position past the row's pages */
    EXPECT(check_batch(&ctx, &st, &o.b) == -2);
    one_init(&o, 5, 3, 1);
    o.pages[0] = 4; /* page outside the pool */
    EXPECT(check_batch(&ctx, &st, &o.b) == -3);
    one_init(&o, 5, 3, 1);
    o.row = 1;
    EXPECT(check_batch(&ctx, &st, &o.b) == -4);
    o.b.n_tokens = 9;
    EXPECT(check_batch(&ctx, &st, &o.b) == -1);
    EXPECT(check_batch(&ctx, NULL, &o.b) == -1);
}

static void test_run_length(void) {
    dev_state st;
    memset(&st, 0, sizeof st);
    st.run_max = 64;
    EXPECT(run_length(&st, 0) == PAGE_SIZE);
    EXPECT(run_length(&st, PAGE_SIZE + 5) == PAGE_SIZE - 5); /* never past the KV page */
    EXPECT(run_length(&st, MAX_CONTEXT - 2) == 2);          /* nor past the context */
    st.run_max = 3;
    EXPECT(run_length(&st, 0) == 3);
}

/* ---- forward with a stand-in driver */

static int n_graph_launches;
static CUresult ok0(void) { return CUDA_SUCCESS; }
static CUresult fake_capture(CUstream s, CUstreamCaptureMode m) { return CUDA_ERROR_NOT_SUPPORTED; }
static CUresult fake_graph_launch(CUgraphExec e, CUstream s) { return n_graph_launches++, CUDA_SUCCESS; }

static void test_chain(void) {
    static dev_state st;
    memset(&st, 0, sizeof st);
    void **api = (void **)&st.api;
    for (size_t i = 0; i < sizeof st.api / sizeof(void *); i++) api[i] = (void *)ok0; /* every call succeeds */
    st.api.cuStreamBeginCapture = fake_capture; /* graphs: steps run directly */
    st.api.cuGraphLaunch = fake_graph_launch;
    apply_tuning(&st, &defaults, 9, 132, 8);
    st.dl_on = 1;
    static int32_t pinned[8 * (4 + MAX_PAGES_PER_SEQ)];
    static unsigned char smp[(sizeof(ig_fwd_sample) + 4) * 8 + 8];
    st.pinned = pinned, st.pinned_smp = smp;
    ig_model_ctx ctx = {.n_pages = 4, .device_state = &st, .max_tokens = 8};
    one o;
    one_init(&o, 5, 3, 1);
    o.b.logits = (float[VOCAB]){0}; /* logits wanted: no multi-step run, a chained step instead */
    n_steps = 0;
    EXPECT(forward(&ctx, &o.b) == 0);
    EXPECT(n_steps == 2 && st.chain_q == 1 && st.chain_pos == 4); /* the step, then the chained one */
    SAMPLED_IDS(&st)[st.max_tokens + st.chain_par - 1] = 77;      /* what the chained step picked */
    int32_t picked = SAMPLED_IDS(&st)[0];
    one n;
    one_init(&n, picked, 4, 1);
    n.b.logits = o.b.logits;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == 3 && n.sampled == 77); /* taken: only the next chained step was launched */
    /* the step after the chained one, but with another token than the chained step was given: its
     * result must not be taken (it would return the pick for the wrong input) */
    SAMPLED_IDS(&st)[0] = 11, SAMPLED_IDS(&st)[st.max_tokens + st.chain_par - 1] = 88;
    one_init(&n, 76, 5, 1);
    n.b.logits = o.b.logits;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n.sampled == 11);
    st.use_graphs = 1; /* (that step's capture failed in the stand-in driver, turning graphs off) */
    /* a different step (another token, another page row) is launched anew, the queued one ran for
     * nothing (new row widths below keep the graph keys new: every step runs directly) */
    one_init(&n, 1234 % VOCAB, 5, 2);
    n.b.logits = o.b.logits;
    int before = n_steps;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == before + 2);
    /* the last position of a page: nothing is chained past it */
    one_init(&n, 9, PAGE_SIZE - 1, 4);
    n.b.logits = o.b.logits;
    before = n_steps;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == before + 1 && !st.chain_q);
    /* chain=0: never */
    ig_model_tuning t = defaults;
    t.chain = 0;
    apply_tuning(&st, &t, 9, 132, 8);
    one_init(&n, 9, 2, 8);
    n.b.logits = o.b.logits;
    before = n_steps;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == before + 1 && !st.chain_q);
    EXPECT(n_graph_launches == 0);
}

/* ---- a step with masked rows: logits first, the runtime's masks waited for after the step's
 * launches, staged as a row table and bitmasks, sample.cu launched over every row with them; never
 * a multi-step run (its picks would be unmasked); a single masked row's next step chained behind
 * the sampling, which hands it the pick, and taken only by exactly that step */

static CUresult fake_alloc_host(void **p, size_t n);
static CUresult fake_free_host(void *p);
static int steps_at_wait = -1, n_waits, n_sample_launches, sample_grid;
static CUdeviceptr sample_rows_arg, sample_words_arg, sample_next_ids, sample_next_pos;
static size_t mask_up_bytes;
static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, CUstream s, void **args, void **extra) {
    n_sample_launches++, sample_grid = (int)gx; /* the default model's launch_step launches nothing */
    sample_words_arg = *(CUdeviceptr *)args[6], sample_rows_arg = *(CUdeviceptr *)args[7];
    sample_next_ids = *(CUdeviceptr *)args[8], sample_next_pos = *(CUdeviceptr *)args[9];
    return CUDA_SUCCESS;
}
static CUdeviceptr next_dev = 0x200000000ull;
static CUresult fake_dev_alloc(CUdeviceptr *p, size_t n) { return *p = next_dev, next_dev += (n + 255) & ~(size_t)255, CUDA_SUCCESS; }
static const dev_state *masked_st;
static CUresult fake_mask_h2d(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    if (dst == masked_st->d_mask && src == masked_st->pinned_mask) mask_up_bytes = n;
    return CUDA_SUCCESS;
}
static void on_masks_wait(void *user) {
    steps_at_wait = n_steps, n_waits++;
    uint32_t *m = user; /* written only now: the model must read it after this call */
    m[0] = 0x5u, m[MASK_WORDS - 1] = 0x80000000u;
}

static void test_masked(void) {
    static dev_state st;
    memset(&st, 0, sizeof st);
    masked_st = &st;
    void **api = (void **)&st.api;
    for (size_t i = 0; i < sizeof st.api / sizeof(void *); i++) api[i] = (void *)ok0;
    st.api.cuStreamBeginCapture = fake_capture;
    st.api.cuMemAllocHost = fake_alloc_host, st.api.cuMemFreeHost = fake_free_host;
    st.api.cuMemAlloc = fake_dev_alloc, st.api.cuMemcpyHtoDAsync = fake_mask_h2d;
    st.api.cuLaunchKernel = fake_launch;
    apply_tuning(&st, &defaults, 9, 132, 8);
    st.dl_on = 1;
    static int32_t pinned[8 * (4 + MAX_PAGES_PER_SEQ)];
    static unsigned char smp[(sizeof(ig_fwd_sample) + 4) * 8 + 8];
    st.pinned = pinned, st.pinned_smp = smp;
    ig_model_ctx ctx = {.n_pages = 4, .device_state = &st, .max_tokens = 8};
    /* one greedy row under a mask: the step that would otherwise be a multi-step run */
    static uint32_t mask[MASK_WORDS];
    const uint32_t *masks[2] = {mask, NULL};
    one o;
    one_init(&o, 5, 3, 1);
    o.b.masks = masks, o.b.masks_wait = on_masks_wait, o.b.masks_user = mask;
    n_steps = 0;
    SAMPLED_IDS(&st)[0] = 2;
    EXPECT(forward(&ctx, &o.b) == 0);
    /* the step, the wait (after its launch), then the chained step, queued behind the sampling */
    EXPECT(n_steps == 2 && steps_at_wait == 1 && n_waits == 1);
    EXPECT(n_sample_launches == 1 && sample_grid == 1 && !st.run_k && o.sampled == 2);
    EXPECT(st.chain_q && st.chain_masked && st.chain_pos == 4 && st.chain_tok == 2);
    EXPECT(sample_next_ids == st.ws && sample_next_pos == st.ws + 4); /* the batch's token and position */
    EXPECT(st.mask_cap == 4 && st.pinned_mask && sample_rows_arg == st.d_mask);
    EXPECT(sample_words_arg == st.d_mask + MASK_ROWS_BYTES(&st));
    const int32_t *rows = (const int32_t *)st.pinned_mask;
    const uint32_t *words = (const uint32_t *)(st.pinned_mask + MASK_ROWS_BYTES(&st));
    EXPECT(rows[0] == 0 && words[0] == 0x5u && words[MASK_WORDS - 1] == 0x80000000u); /* read after the wait */
    EXPECT(mask_up_bytes == MASK_ROWS_BYTES(&st) + 4 * MASK_WORDS);
    /* the next step with the token picked: the chained step's results, sampled under the new mask;
     * only the step after it is launched */
    one n;
    one_init(&n, 2, 4, 1);
    n.b.masks = masks, n.b.masks_wait = on_masks_wait, n.b.masks_user = mask;
    SAMPLED_IDS(&st)[st.max_tokens + st.chain_par - 1] = 66;
    const int par = st.chain_par;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == 3 && steps_at_wait == 2 && n_waits == 2 && n_sample_launches == 2 && n.sampled == 66);
    EXPECT(st.chain_q && st.chain_par != par && st.chain_pos == 5 && st.chain_tok == 66);
    /* not that step (another token): launched anew; the chained one ran for nothing (new page-row
     * widths keep the graph keys new: a second sighting's capture fails in the stand-in driver,
     * turning graphs, and with them chained steps, off) */
    one_init(&n, 65, 5, 2);
    n.b.masks = masks, n.b.masks_wait = on_masks_wait, n.b.masks_user = mask;
    SAMPLED_IDS(&st)[0] = 4;
    EXPECT(forward(&ctx, &n.b) == 0);
    EXPECT(n_steps == 5 && n_waits == 3 && n.sampled == 4);
    /* an unmasked greedy row does not take a masked row's chained step, nor the reverse */
    one_init(&n, 4, 6, 4);
    SAMPLED_IDS(&st)[0] = 9;
    n.b.logits = (float[VOCAB]){0};
    EXPECT(forward(&ctx, &n.b) == 0 && n_steps == 7 && n_waits == 3 && n.sampled == 9 && st.chain_q && !st.chain_masked);
    one_init(&n, 9, 7, 4);
    n.b.masks = masks, n.b.masks_wait = on_masks_wait, n.b.masks_user = mask;
    SAMPLED_IDS(&st)[0] = 5;
    EXPECT(forward(&ctx, &n.b) == 0 && n_steps == 9 && n_waits == 4 && n.sampled == 5 && st.chain_masked);
    /* three rows: masked, plain, masked; the middle one without a mask; then five masked rows grow
     * the staging (to the step's max_tokens at most) */
    int32_t ids[3] = {1, 2, 3}, pos[3] = {3, 3, 3}, seq[3] = {0, 1, 2}, out_rows[3] = {0, 1, 2}, pages[3] = {0, 1, 2}, got[3];
    ig_fwd_sample sp[3] = {{.on = 1}, {.on = 1}, {.on = 1, .temperature = 1.0f, .u = 0.5f}};
    const uint32_t *m3[3] = {mask, NULL, mask};
    ig_fwd_batch b = {.n_tokens = 3, .token_ids = ids, .positions = pos, .token_seq = seq, .n_seqs = 3,
                      .page_table = pages, .max_pages_per_seq = 1, .n_out = 3, .out_rows = out_rows, .sample = sp,
                      .sampled = got, .masks = m3, .masks_wait = on_masks_wait, .masks_user = mask};
    SAMPLED_IDS(&st)[0] = 7, SAMPLED_IDS(&st)[1] = 8, SAMPLED_IDS(&st)[2] = 9;
    EXPECT(forward(&ctx, &b) == 0);
    EXPECT(n_waits == 5 && n_sample_launches == 5 && sample_grid == 3 && got[0] == 7 && got[1] == 8 && got[2] == 9);
    EXPECT(!st.chain_q && sample_next_ids == 0); /* several rows: nothing chained */
    EXPECT(rows[0] == 0 && rows[1] == -1 && rows[2] == 1 && st.mask_cap == 4);
    EXPECT(mask_up_bytes == MASK_ROWS_BYTES(&st) + 2 * 4 * MASK_WORDS);
    /* a row sampled here (on = 0) takes no mask, and a step with no masked row waits for nothing */
    sp[0].on = sp[2].on = 0;
    float logits[3 * VOCAB];
    b.logits = logits;
    EXPECT(forward(&ctx, &b) == 0 && n_waits == 5 && n_sample_launches == 5);
    EXPECT(masks_reserve(&st, 6) == 0 && st.mask_cap == 8 && masks_reserve(&st, 3) == 0 && st.mask_cap == 8);
    fake_free_host(st.pinned_mask);
}

static void test_workspace(void) {
    WORKSPACE_CARVE(0, 8);
    EXPECT(ws_ == workspace_bytes(8, 1)); /* the carve ends where the size says */
    EXPECT(batch == 0 && d_logits % 256 == 0 && a_x % 256 == 0 && a_x < ws_);
}

/* the KV pool the package sizes when the runtime passes n_pages 0 */
static void test_kv_pages(void) {
    const size_t G = 1000000000ull, fixed = 3 * G;
    EXPECT(kv_pages_for(2 * G, fixed, 0.85f) == 0); /* weights alone do not fit */
    EXPECT(kv_pages_for(100 * G, fixed, 0.0f) == 0);
    int32_t p = kv_pages_for(100 * G, fixed, 0.5f);
    EXPECT(p == (int32_t)(97 * G / 2 / KV_PAGE_BYTES));
    EXPECT((size_t)p * KV_PAGE_BYTES + fixed <= 100 * G);
    EXPECT(kv_pages_for(100 * G, fixed, 1.0f) == (int32_t)(97 * G / KV_PAGE_BYTES));
    EXPECT(kv_pages_for((size_t)1 << 62, 0, 1.0f) == 2147483647); /* clamped, not wrapped */
}

/* ---- the prefix cache's host tier: pinned chunks made on first use, copies on the stream */

static int n_host_allocs;
static void *last_dst;
static const void *last_src;
static size_t last_bytes;
static CUresult fake_alloc_host(void **p, size_t n) { return n_host_allocs++, *p = malloc(n), *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY; }
static CUresult fake_free_host(void *p) { return free(p), CUDA_SUCCESS; }
static CUresult fake_d2h(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    return last_dst = dst, last_src = (const void *)(uintptr_t)src, last_bytes = n, CUDA_SUCCESS;
}
static CUresult fake_h2d(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    return last_dst = (void *)(uintptr_t)dst, last_src = src, last_bytes = n, CUDA_SUCCESS;
}

static void test_host_tier(void) {
    static dev_state st;
    memset(&st, 0, sizeof st);
    st.api.cuMemAllocHost = fake_alloc_host;
    st.api.cuMemcpyDtoHAsync = fake_d2h;
    st.api.cuMemcpyHtoDAsync = fake_h2d;
    st.kv = (CUdeviceptr)0x100000000ull;
    const int32_t n_host = HOST_CHUNK_PAGES + 3; /* two chunks, the second part used */
    st.n_host_chunks = 2;
    st.host_chunks = calloc(2, sizeof *st.host_chunks);
    ig_model_ctx ctx = {.n_pages = 4, .device_state = &st, .n_host_pages = n_host};
    EXPECT(kv_page_copy(&ctx, 0, 1, 0) == -2 && n_host_allocs == 0); /* a host page never written: refused */
    EXPECT(kv_page_copy(&ctx, 1, 2, HOST_CHUNK_PAGES + 1) == 0 && n_host_allocs == 1 && st.host_chunks[1]);
    EXPECT(last_src == (const void *)(uintptr_t)(st.kv + 2 * (CUdeviceptr)KV_PAGE_BYTES) && last_bytes == KV_PAGE_BYTES);
    EXPECT(last_dst == st.host_chunks[1] + (size_t)KV_PAGE_BYTES);
    EXPECT(kv_page_copy(&ctx, 0, 3, HOST_CHUNK_PAGES + 1) == 0 && n_host_allocs == 1); /* back: the same bytes */
    EXPECT(last_dst == (void *)(uintptr_t)(st.kv + 3 * (CUdeviceptr)KV_PAGE_BYTES) && last_src == st.host_chunks[1] + KV_PAGE_BYTES);
    EXPECT(kv_page_copy(&ctx, 1, 4, 0) == -1 && kv_page_copy(&ctx, 1, 0, n_host) == -1 && kv_page_copy(&ctx, 1, -1, 0) == -1);
    EXPECT(!st.host_chunks[0] && n_host_allocs == 1); /* the first chunk was never needed */
    fake_free_host(st.host_chunks[1]);
    free(st.host_chunks);
}

/* tile_map's cache (moe.cu's tensor maps) through a stand-in encoder that records what it was asked
 * for in the map's words: each answer must describe exactly the operand asked for, encoded once
 * per (pointer, columns, box) until its rows change. */
static int n_encodes, refuse_encode;
static CUresult fake_encode(CUtensorMap *m, CUtensorMapDataType dt, cuuint32_t rank, void *p, const cuuint64_t *dims,
                            const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *step, CUtensorMapInterleave il,
                            CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    (void)step, (void)il, (void)l2, (void)oob;
    n_encodes++;
    if (refuse_encode) return CUDA_ERROR_INVALID_VALUE;
    uint64_t *w = (uint64_t *)m;
    w[0] = (uint64_t)(uintptr_t)p, w[1] = dims[0], w[2] = dims[1], w[3] = strides[0], w[4] = box[0], w[5] = box[1];
    w[6] = (uint64_t)dt << 32 | (uint64_t)sw << 16 | rank;
    return CUDA_SUCCESS;
}
static int map_is(const CUtensorMap *m, CUdeviceptr p, uint64_t rows, uint64_t cols, uint32_t box_rows) {
    const uint64_t *w = (const uint64_t *)m;
    return w[0] == p && w[1] == cols && w[2] == rows && w[3] == 2 * cols && w[4] == 64 && w[5] == box_rows &&
           w[6] == ((uint64_t)CU_TENSOR_MAP_DATA_TYPE_UINT16 << 32 | (uint64_t)CU_TENSOR_MAP_SWIZZLE_128B << 16 | 2);
}
static void test_tile_map(void) {
    static dev_state st;
    memset(&st, 0, sizeof st);
    CUtensorMap m;
    EXPECT(tile_map(&st, &m, 0x100000, 64, 128, 128) == 0); /* a driver without the call */
    st.api.cuTensorMapEncodeTiled = fake_encode;
    EXPECT(tile_map(&st, &m, 0x100000, 64, 2048, 128) && map_is(&m, 0x100000, 64, 2048, 128) && n_encodes == 1);
    EXPECT(tile_map(&st, &m, 0x100000, 64, 2048, 128) && map_is(&m, 0x100000, 64, 2048, 128) && n_encodes == 1);
    EXPECT(tile_map(&st, &m, 0x100000, 96, 2048, 128) && map_is(&m, 0x100000, 96, 2048, 128) && n_encodes == 2); /* new T */
    EXPECT(tile_map(&st, &m, 0x100000, 1536, 768, 256) && map_is(&m, 0x100000, 1536, 768, 256) && n_encodes == 3);
    EXPECT(tile_map(&st, &m, 0x100000, 96, 2048, 128) && map_is(&m, 0x100000, 96, 2048, 128) && n_encodes == 3); /* both kept */
    /* 600 operands (a slot's probes overflow): every answer is still the one asked for, and a second
     * pass over the last 100 finds them (they took the slots) */
    for (int i = 0; i < 600; i++) {
        const CUdeviceptr p = 0x7f0000000000ull + (CUdeviceptr)i * 0x200000;
        EXPECT(tile_map(&st, &m, p, 128 + i, 2048, 256) && map_is(&m, p, 128 + i, 2048, 256));
    }
    const int before = n_encodes;
    for (int i = 590; i < 600; i++) {
        const CUdeviceptr p = 0x7f0000000000ull + (CUdeviceptr)i * 0x200000;
        EXPECT(tile_map(&st, &m, p, 128 + i, 2048, 256) && map_is(&m, p, 128 + i, 2048, 256));
    }
    EXPECT(n_encodes == before);
    refuse_encode = 1; /* a refused map: 0, and the caller's map left alone */
    memset(&m, 0, sizeof m);
    EXPECT(tile_map(&st, &m, 0x300000, 64, 100, 128) == 0 && ((uint64_t *)&m)[0] == 0);
    refuse_encode = 0;
    EXPECT(tile_map(&st, &m, 0x300000, 65, 100, 128) && map_is(&m, 0x300000, 65, 100, 128));
    /* int8 rows with a wider stride (act8.cu's q8r rows: K codes, 16 bytes of scale): boxes of 128
     * codes, their own slot beside the 16-bit map of the same pointer (a fresh cache: the 600 above
     * filled every slot) */
    memset(&st, 0, sizeof st);
    st.api.cuTensorMapEncodeTiled = fake_encode;
    EXPECT(tile_map(&st, &m, 0x300000, 65, 100, 128) && map_is(&m, 0x300000, 65, 100, 128));
    const int n0 = n_encodes;
    EXPECT(tile_map_of(&st, &m, 0x300000, 65, 2048, 2064, 1, 128) && n_encodes == n0 + 1);
    const uint64_t *w = (const uint64_t *)&m;
    EXPECT(w[0] == 0x300000 && w[1] == 2048 && w[2] == 65 && w[3] == 2064 && w[4] == 128 && w[5] == 128 &&
           w[6] == ((uint64_t)CU_TENSOR_MAP_DATA_TYPE_UINT8 << 32 | (uint64_t)CU_TENSOR_MAP_SWIZZLE_128B << 16 | 2));
    EXPECT(tile_map(&st, &m, 0x300000, 65, 100, 128) && map_is(&m, 0x300000, 65, 100, 128) && n_encodes == n0 + 1);
    EXPECT(tile_map_of(&st, &m, 0x300000, 65, 2048, 2064, 1, 128) && w[3] == 2064 && n_encodes == n0 + 1);
}

/* the driver's count of co-resident clusters, as the stand-in reports it, and what it was asked */
static int occ_clusters, occ_status, occ_dim, occ_grid;
static CUresult fake_occ_clusters(int *n, CUfunction f, const CUlaunchConfig *cfg) {
    (void)f;
    occ_dim = cfg->numAttrs == 1 && cfg->attrs[0].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION ? (int)cfg->attrs[0].value.clusterDim.x : 0;
    occ_grid = (int)cfg->gridDimX;
    *n = occ_clusters;
    return occ_status ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* a8_cluster_grid: the fused int8 GEMM's persistent grid is the CTAs of the clusters that fit at once
 * (an H100 held 30 clusters of four: a grid of SMs / CL would leave some for a second round); the SMs
 * where the driver cannot say, says nothing useful, or the image has no wgmma */
static void test_cluster_grid(void) {
    dev_state st;
    memset(&st, 0, sizeof st);
    apply_tuning(&st, &defaults, 9, 132, 256);
    st.wg = 1;
    a8_cluster_grid(&st); /* no cuOccupancyMaxActiveClusters in this driver */
    EXPECT(st.a8_wg_sms == 132);
    st.api.cuOccupancyMaxActiveClusters = fake_occ_clusters;
    occ_clusters = 60, occ_status = 0;
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 120 && occ_dim == 2 && occ_grid % 2 == 0); /* 60 clusters of two */
    apply_tuning(&st, &defaults, 9, 132, 256);
    occ_clusters = 66;
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 132);
    apply_tuning(&st, &defaults, 9, 132, 256);
    occ_clusters = 0; /* none fit (the query's answer when the smem limit is not set): keep the SMs */
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 132);
    occ_clusters = 40, occ_status = 1; /* an error: keep the SMs */
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 132);
    occ_clusters = 70, occ_status = 0; /* more than the SMs hold: keep the SMs */
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 132);
    occ_clusters = 30, st.wg = 0; /* no wgmma image: the kernel never runs */
    a8_cluster_grid(&st);
    EXPECT(st.a8_wg_sms == 132);
    EXPECT(IG_A8_WG_GRID(2048, 16384, 120, 2, 1) == 120 && IG_A8_WG_GRID(128, 2048, 120, 2, 1) == 16); /* 8 cluster tiles */
}

int main(void) {
    test_host_tier();
    test_cluster_grid();
    test_kv_pages();
    test_tuning();
    test_batch_guard();
    test_run_length();
    test_chain();
    test_masked();
    test_workspace();
    test_tile_map();
    if (!fails) printf("host runtime: ok\n");
    return fails ? 1 : 0;
}
