/* cg_cuda.c — emits a CUDA package's code (see cg.h): model.cu holds the kernels (templates of
 * templates/cuda instantiated once per distinct shape), model.c the host side that runs the
 * model through the ABI of ig_model_abi.h: init() loads the driver and cuBLAS, picks the kernel
 * image for the GPU, uploads the weights and allocates the KV pool and workspace; forward()
 * stages the batch, launches the kernels of each layer (GEMV kernels for decode-sized steps,
 * cuBLAS GEMMs plus epilogue kernels for prefill) and copies the logits back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

ig_status cg_cuda_target_parse(const char *spec, cg_cuda_target *t, ig_err *err) {
    memset(t, 0, sizeof *t);
    const char *list = strchr(spec, ':');
    if (!list) list = "sm_80,sm_90";
    else list++;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int cc = 0;
        char suffix = 0;
        if (sscanf(tok, "sm_%d%c", &cc, &suffix) < 1 || cc < 70 || cc > 120 || (suffix && suffix != 'a'))
            return ig_fail(err, IG_ERR_INVALID, "unknown CUDA architecture '%s' in --target %s (expected sm_70 ... sm_90a)", tok, spec);
        if (t->n_archs == CG_MAX_ARCHS) return ig_fail(err, IG_ERR_INVALID, "too many architectures in --target %s", spec);
        snprintf(t->archs[t->n_archs++], 16, "%s", tok);
    }
    if (!t->n_archs) return ig_fail(err, IG_ERR_INVALID, "--target %s names no architecture", spec);
    return IG_OK;
}

/* ---- kernel instances: one per distinct (template, parameters) */

typedef struct kinst {
    char key[512];
    char name[64];
} kinst;

typedef struct gen {
    FILE *cu;                 /* device code */
    kinst inst[96];
    int n_inst;
    char fnames[160][64];     /* every __global__ function host code launches */
    int n_fn;
    int f16;                  /* the 16-bit element type is IEEE half (--dtype f16), else bf16 */
} gen;

static int fn_index(gen *c, const char *name) {
    for (int i = 0; i < c->n_fn; i++)
        if (!strcmp(c->fnames[i], name)) return i;
    snprintf(c->fnames[c->n_fn], 64, "%s", name);
    return c->n_fn++;
}

/* Instantiates `tpl` with `params` once; returns the instance name. */
static const char *instance(gen *c, const char *tpl, const char *prefix, const char *name_macro, const char *params,
                            const char *comment) {
    char key[512];
    snprintf(key, sizeof key, "%s|%s", tpl, params);
    for (int i = 0; i < c->n_inst; i++)
        if (!strcmp(c->inst[i].key, key)) return c->inst[i].name;
    kinst *k = &c->inst[c->n_inst++];
    snprintf(k->key, sizeof k->key, "%s", key);
    snprintf(k->name, sizeof k->name, "%s", prefix);
    for (int i = 0; i < c->n_inst - 1; i++)
        if (!strcmp(c->inst[i].name, k->name)) snprintf(k->name, sizeof k->name, "%s_v%d", prefix, c->n_inst);
    fprintf(c->cu, "\n/* %s */\n#define %s %s\n%s#include \"%s\"\n", comment, name_macro, k->name, params, tpl);
    return k->name;
}

/* The name of an element type: f32, or the package's 16-bit type. */
static const char *dtn(const gen *c, int bf) { return !bf ? "f32" : c->f16 ? "f16" : "bf16"; }

/* The RMSNorm in front of a matmul (norm_matmul): gamma and eps, and the f32 rows it reads. */
typedef struct mm_norm {
    const char *src;   /* f32 residual rows [T][K] */
    const char *gamma; /* weight variable of gamma */
    double eps;
} mm_norm;

/* Emits one matmul y = x·Wᵀ (+bias) with epilogue epi, preceded by an RMSNorm of norm->src into x
 * when norm is set: a GEMV launch for up to st->gemv_tmax rows (the norm fused into it), else an
 * rmsnorm launch, cuBLAS and bias / SwiGLU epilogue kernels. */
static void emit_matmul(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w,
                        const char *bias, const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf,
                        const char *what, const mm_norm *norm) {
    char params[1024], comment[512], nm[96];
    int swiglu = epi == IR_EPI_SWIGLU, has_bias = strcmp(bias, "zero") != 0;
    const char *targ = rows[0] == 'T' ? "T" : "n_out";
    snprintf(params, sizeof params,
             "#define MV_K %lld\n#define MV_N %lld\n#define MV_WBF16 %d\n#define MV_XBF16 %d\n#define MV_BIAS %d\n"
             "#define MV_EPI %d\n#define MV_LDY %lld\n#define MV_YBF16 %d\n#define MV_NORM %d\n#define MV_EPS %.9gf\n",
             (long long)K, (long long)N, bf, bf, has_bias, (int)epi, (long long)ldy, swiglu ? bf : 0, norm != NULL,
             norm ? norm->eps : 1e-5);
    snprintf(comment, sizeof comment, "%s: gemv %sx[T,%lld] %s . w[%lld,%lld]^T %s, %s", what, norm ? "rms_norm(x) then " : "",
             (long long)K, dtn(c, bf), (long long)N, (long long)K, dtn(c, bf),
             epi == IR_EPI_ACC ? "added to the residual" : swiglu ? "SwiGLU epilogue" : "stored f32");
    snprintf(nm, sizeof nm, "gemv_k%lld_n%lld%s%s%s", (long long)K, (long long)N, norm ? "_norm" : "",
             epi == IR_EPI_ACC ? "_acc" : swiglu ? "_swiglu" : "", has_bias ? "_bias" : "");
    const char *mv = instance(c, "gemv.cu", nm, "MV_NAME", params, comment);
    int fmv = fn_index(c, mv);
    /* 2..8 tokens: the tensor-core GEMV (gemv_tc.cu; 16-bit W and x, K % 32 == 0, a fused norm's x
     * staged in at most 96 KB) when the GPU has it (sm_80+) */
    if (bf && K % 32 == 0 && (!norm || (K + 32) * 16 <= 96 * 1024)) {
        char tnm[112], tcm[sizeof comment + 32];
        snprintf(tcm, sizeof tcm, "%s; on tensor cores, for 2..8 tokens", comment); /* the same product */
        snprintf(tnm, sizeof tnm, "%s_tc", nm);
        int fmt = fn_index(c, instance(c, "gemv_tc.cu", tnm, "MV_NAME", params, tcm));
        fprintf(fw, "%sif (%s >= 2 && %s <= st->mvt_tmax) {\n", ind, rows, rows);
        fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s, &%s, &%s, &%s};\n", ind, targ, norm ? norm->src : x,
                norm ? norm->gamma : "zero", w, bias, y);
        fprintf(fw, "%s    LAUNCH(%d, IG_MVT_GRID_X(%lld, %lld, %d, st->mv_ctas), 1, 1, IG_MVT_BLOCK, IG_MVT_SMEM(%lld, %d), args);\n",
                ind, fmt, (long long)N, (long long)K, swiglu, (long long)K, norm != NULL);
        fprintf(fw, "%s} else ", ind);
    } else {
        fprintf(fw, "%s", ind);
    }
    fprintf(fw, "if (%s <= st->gemv_tmax) {\n", rows);
    fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s, &%s, &%s, &%s};\n", ind, targ, norm ? norm->src : x,
            norm ? norm->gamma : "zero", w, bias, y);
    fprintf(fw, "%s    LAUNCH(%d, IG_MV_GRID_X(%lld, %lld, %d, st->mv_ctas), 1, 1, IG_MV_BLOCK, IG_MV_SMEM(%lld, %d), args);\n", ind,
            fmv, (long long)N, (long long)K, bf ? 2 : 4, (long long)K, bf ? 2 : 4);
    fprintf(fw, "%s} else {\n", ind);
    if (norm) {
        snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 %d\n", (long long)K, norm->eps, bf);
        snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g -> %s", (long long)K, norm->eps, dtn(c, bf));
        snprintf(nm, sizeof nm, "rms_norm_%lld", (long long)K);
        const char *rn = instance(c, "rmsnorm.cu", nm, "RN_NAME", params, comment);
        fprintf(fw, "%s    { void *argsn[] = {&%s, &%s, &%s, &%s};\n%s      LAUNCH(%d, IG_RN_GRID_X(%s), 1, 1, IG_RN_BLOCK(%lld), 0, argsn); }\n",
                ind, targ, norm->src, norm->gamma, x, ind, fn_index(c, rn), rows, (long long)K);
    }
    if (swiglu) {
        int64_t I = N / 2;
        snprintf(params, sizeof params, "#define EP_I %lld\n#define EP_OBF16 %d\n#define EP_GUBF16 %d\n", (long long)I, bf, bf);
        snprintf(comment, sizeof comment, "%s: SwiGLU (+ gate/up bias) of the packed gate/up GEMM output [T,%lld] %s -> [T,%lld] %s",
                 what, (long long)N, dtn(c, bf), (long long)I, dtn(c, bf));
        snprintf(nm, sizeof nm, "swiglu_i%lld", (long long)I);
        const char *ep = instance(c, "epilogue.cu", nm, "EP_SWIGLU_NAME", params, comment);
        /* gate/up leave the GEMM in the activation type (as in the reference model), the
         * mlp_bias (packed gate/up order) is added inside the SwiGLU kernel */
        fprintf(fw, "%s    GEMM_OUT(%lld, %s, %lld, %s, %s, a_gu, %lld, 0.0f, W_BF16);\n", ind, (long long)N, rows, (long long)K, w, x,
                (long long)N);
        fprintf(fw, "%s    void *args[] = {&%s, &a_gu, &%s, &%s};\n", ind, rows[0] == 'T' ? "T" : "n_out", bias, y);
        fprintf(fw, "%s    LAUNCH(%d, IG_EP_SWIGLU_GRID_X(%s, %lld), IG_EP_SWIGLU_GRID_Y(%s), 1, IG_EP_BLOCK, 0, args);\n", ind,
                fn_index(c, ep), rows, (long long)I, rows);
    } else {
        fprintf(fw, "%s    GEMM(%lld, %s, %lld, %s, %s, %s, %lld, %s);\n", ind, (long long)N, rows, (long long)K, w, x, y,
                (long long)ldy, epi == IR_EPI_ACC ? "1.0f" : "0.0f");
        if (has_bias) {
            snprintf(params, sizeof params, "#define EP_N %lld\n#define EP_LDY %lld\n", (long long)N, (long long)ldy);
            snprintf(comment, sizeof comment, "%s: bias add after the GEMM, [T,%lld]", what, (long long)N);
            snprintf(nm, sizeof nm, "bias_n%lld", (long long)N);
            const char *ep = instance(c, "epilogue.cu", nm, "EP_BIAS_NAME", params, comment);
            fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s};\n", ind, rows[0] == 'T' ? "T" : "n_out", y, bias);
            fprintf(fw, "%s    LAUNCH(%d, IG_EP_BIAS_GRID_X(%s, %lld), IG_EP_BIAS_GRID_Y(%s), 1, IG_EP_BLOCK, 0, args);\n", ind,
                    fn_index(c, ep), rows, (long long)N, rows);
        }
    }
    fprintf(fw, "%s}\n", ind);
}

typedef struct buf {
    char ident[64];
    int64_t cols;
    int bf16;
} buf;

ig_status cg_emit_cuda(const ir_graph *g, const pk_plan *plan, const cg_cuda_target *t, const cg_options *o,
                       FILE *cu, FILE *out, ig_err *err) {
    const ir_hparams *hp = &g->hp;
    gen c;
    memset(&c, 0, sizeof c);
    c.cu = cu;
    /* bf: 16-bit weights, KV and activations (bf16, or half for --dtype f16: c.f16) */
    c.f16 = o->dtype == IG_DTYPE_F16;
    int bf = o->dtype == IG_DTYPE_BF16 || c.f16;
    char *fwd_text = NULL;
    size_t fwd_len = 0;
    FILE *fw = open_memstream(&fwd_text, &fwd_len);
    if (!fw) return ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    cg_layout lay;
    ig_status st = cg_analyze(g, plan, &lay, err);
    if (st) {
        fclose(fw);
        free(fwd_text);
        return st;
    }
    int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim, HID = hp->hidden, PS = o->page_size;
    /* the GEMV stages a token's row of x in shared memory: at most 96 KB (IG_MV_SMEM, see init) */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int32_t wi = n->op == IR_OP_NORM_MATMUL ? n->in[2] : n->op == IR_OP_MATMUL_EPI ? n->in[1] : -1;
        if (wi >= 0 && g->tensors[wi].shape[1] * (bf ? 2 : 4) > 98304) {
            fclose(fw);
            free(fwd_text);
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "codegen (cuda): %s has rows of %lld %s elements; the decode GEMV stages a row in 96 KB of "
                           "shared memory (at most %d elements)", g->tensors[wi].name, (long long)g->tensors[wi].shape[1],
                           dtn(&c, bf), 98304 / (bf ? 2 : 4));
        }
    }
    uint64_t kv_layer_page = 2ull * KV * PS * D * (bf ? 2 : 4);
    /* The persistent decode kernel (decode_layers.cu, sm_90) takes layers of exactly the usual
     * shape: [norm+qkv, rope_kv, attention, o + residual, norm+gate/up SwiGLU, down + residual],
     * bf16, with every GEMV's K a multiple of 128 (tensor-core windows) whose row fits a 16 KB slot, or
     * a multiple of 256 up to 16384 whose row fits two (stream.cuh's SPLIT; Llama-3-8B's down, 14336). */
    int dl_ok = 0, dl_resid_rows = 256; /* rows of a residual-add phase per CTA the kernel takes */
    const ir_node *dln[6] = {0};
    if (bf && !c.f16 && lay.per_layer == 6) { /* (bf16 only) */
        static const int ops[6] = {IR_OP_NORM_MATMUL, IR_OP_ROPE_KV, IR_OP_ATTENTION, IR_OP_MATMUL_EPI, IR_OP_NORM_MATMUL,
                                   IR_OP_MATMUL_EPI};
        dl_ok = 1;
        for (int k = 0; k < 6; k++) {
            dln[k] = &g->nodes[lay.first_layer + k];
            if ((int)dln[k]->op != ops[k]) dl_ok = 0;
        }
        if (dl_ok) {
            int64_t kq = g->tensors[dln[0]->in[2]].shape[1], ko = g->tensors[dln[3]->in[1]].shape[1];
            int64_t kg = g->tensors[dln[4]->in[2]].shape[1], kd = g->tensors[dln[5]->in[1]].shape[1];
            int64_t ng = g->tensors[dln[4]->in[2]].shape[0];
            dl_ok = dln[0]->epi == IR_EPI_STORE && dln[4]->epi == IR_EPI_SWIGLU && dln[3]->epi == IR_EPI_ACC &&
                    dln[5]->epi == IR_EPI_ACC && kq == HID && kg == HID && ko == (int64_t)H * D && kd == ng / 2 &&
                    g->tensors[dln[3]->in[1]].shape[0] == HID && g->tensors[dln[5]->in[1]].shape[0] == HID;
            for (int k = 0; k < 4 && dl_ok; k++) {
                int64_t kk = k == 0 ? kq : k == 1 ? ko : k == 2 ? kg : kd;
                if (kk % 128 || kk > 16384 || (kk > 8192 && kk % 256)) dl_ok = 0;
            }
            /* a residual add's rows must fit one batch of sums: 256 slots, 128 rows when they take two */
            if (ko > 8192 || kd > 8192) dl_resid_rows = 128;
            if (HID % 128) dl_ok = 0;
        }
    }
    /* It also takes the embedding (a step whose only node before the layers is a bf16 embed) and
     * the lm_head (after the layers exactly: gather the output row, then norm + matmul to the
     * vocabulary with K = hidden), so a decode step is one kernel plus sampling. */
    const ir_node *dl_emb = NULL, *dl_head = NULL;
    if (dl_ok) {
        if (lay.first_layer == 1 && g->nodes[0].op == IR_OP_EMBED) dl_emb = &g->nodes[0];
        const int32_t tail = lay.last_layer + 1;
        if (g->n_nodes - tail == 2 && g->nodes[tail].op == IR_OP_GATHER_ROWS && g->nodes[tail + 1].op == IR_OP_NORM_MATMUL &&
            g->nodes[tail + 1].epi == IR_EPI_STORE && g->nodes[tail + 1].in[3] < 0 &&
            g->tensors[g->nodes[tail + 1].in[2]].shape[1] == HID && g->tensors[g->nodes[tail + 1].in[2]].shape[0] == hp->vocab)
            dl_head = &g->nodes[tail + 1];
    }
    /* ring slots: 12 x 16 KB where they fit beside attention's scratch and the static state (~18 KB,
     * and the rope table and the group's queries) */
    const int dl_at_smem = 8 * (H / KV) * (D + 2) * 4; /* IG_AT_SMEM */
    /* static shared memory of the attention items: rope tables and queries, of the group's items and
     * of the one-head items */
    int dl_nslot = (227 * 1024 - 18 * 1024 - (4 * D + (H / KV + 1) * D) * 4 - dl_at_smem) / 16384;
    if (dl_nslot > 12) dl_nslot = 12;
    if (dl_nslot < 4) dl_ok = 0;
    if (!dl_ok) dl_emb = dl_head = NULL;
    char archs[128] = "";
    for (int i = 0; i < t->n_archs; i++) snprintf(archs + strlen(archs), sizeof archs - strlen(archs), "%s%s", i ? "," : "", t->archs[i]);

    fprintf(cu, "/* model.cu — generated by ignis %s: the kernels of %s (%d layers, hidden %d), %s.\n"
                " * Compiled by NVRTC for %s (+ PTX). Do not edit: regenerate with `ignis compile`. */\n"
                "%s#include \"common.cuh\"\n\n"
                "#define ATTN_SPLIT 16 /* context partitions of decode attention (same value in model.c) */\n",
            o->compiler_version, hp->arch, hp->n_layers, HID, dtn(&c, bf), archs,
            c.f16 ? "#define IG_F16 1 /* the 16-bit type is IEEE half */\n" : "");

    buf bufs[32];
    int n_bufs = 0;
    int32_t *buf_of = malloc(sizeof(int32_t) * (size_t)g->n_tensors);
    for (int32_t i = 0; i < g->n_tensors; i++) buf_of[i] = -1;
#define NEW_BUF(tid, colsv, isbf)                                                               \
    do {                                                                                       \
        buf *b_ = &bufs[n_bufs];                                                               \
        b_->cols = (colsv);                                                                    \
        b_->bf16 = (isbf);                                                                     \
        cg_act_ident(g, (tid), b_->ident, sizeof b_->ident);                                      \
        for (int q_ = 0; q_ < n_bufs; q_++)                                                    \
            if (!strcmp(bufs[q_].ident, b_->ident)) snprintf(b_->ident + strlen(b_->ident), 8, "_%d", n_bufs); \
        buf_of[(tid)] = n_bufs++;                                                              \
    } while (0)
    int64_t xn_cols = HID, gu_cols = 16;
    int32_t resid = -1, rk_node = -1; /* rk_node: the rope_kv feeding the next attention (fused for decode) */
    char params[1024], comment[512], nm[96];
    char at_params[1024] = ""; /* the layers' attention instance parameters */

    fprintf(fw, "\n/* Launches one step's kernels on st->stream (the batch is already in device memory): either\n"
                " * directly or while a CUDA graph captures them. Everything it bakes in is in the graph key. */\n"
                "static int launch_step(dev_state *st, int T, int n_out, int mpv, int prefill_runs, int do_sample, int decode_only,\n"
                "                       int batch_ints, int chain) {\n"
                "    WORKSPACE_CARVE(st->ws, st->max_tokens);\n"
                "    /* the staged batch (and sampling parameters) up; in a graph these are its first nodes. A chained\n"
                "     * step (chain 1 or 2) has none: the step before it left its input in the batch (forward) */\n"
                "    if (!chain) {\n"
                "        CU(st->api.cuMemcpyHtoDAsync(batch, st->pinned, sizeof(int32_t) * (size_t)batch_ints, st->stream));\n"
                "        if (do_sample) CU(st->api.cuMemcpyHtoDAsync(d_sp, st->pinned_smp, sizeof(ig_fwd_sample) * n_out, st->stream));\n"
                "    }\n"
                "    CUdeviceptr d_ids = batch, d_pos = batch + 4ull * T, d_seq = batch + 8ull * T, d_rows = batch + 12ull * T,\n"
                "                d_pages = batch + 16ull * T;\n"
                "    CUdeviceptr kv = st->kv, inv_freq = st->inv_freq, zero = 0; /* zero: an absent optional input */\n");
    for (int pass = 0; pass < 3 && !st; pass++) {
        int32_t lo = pass == 0 ? 0 : pass == 1 ? lay.first_layer : lay.last_layer + 1;
        int32_t hi = pass == 0 ? lay.first_layer : pass == 1 ? lay.first_layer + lay.per_layer : g->n_nodes;
        if (dl_ok && pass == (dl_emb ? 0 : 1))
            fprintf(fw, "\n    /* one token: the whole layer stack as one persistent kernel (decode_layers.cu)%s%s;\n"
                        "     * if the GPU refuses the cooperative launch (e.g. an MPS share of the SMs), the per-op\n"
                        "     * kernels run from then on */\n"
                        "    int dl_done = 0;\n"
                        "    if (T == 1 && decode_only && st->dl_on) DECODE_LAYERS(dl_done);\n",
                    dl_emb ? ",\n     * with the embedding" : "", dl_head ? (dl_emb ? " and the lm_head" : ",\n     * with the lm_head") : "");
        if (dl_ok && pass == 1) fprintf(fw, "    if (!dl_done)");
        if (dl_emb && pass == 0) fprintf(fw, "    if (!dl_done)\n");
        if (pass == 1)
            fprintf(fw, "\n    for (int l = 0; l < N_LAYERS; l++) {\n"
                        "        const int32_t *lw = layer_weights[l];\n"
                        "        unsigned long long kv_off = (unsigned long long)l * KV_LAYER_PAGE_BYTES;\n");
        if (pass == 2) fprintf(fw, "\n    if (n_out > 0%s) {\n", dl_head ? " && !dl_done" : "");
        const char *ind = pass == 0 ? "    " : "        "; /* the layer loop and the logits block nest once more */
        const char *rows = pass == 2 ? "n_out" : "T";
        for (int32_t i = lo; i < hi && !st; i++) {
            const ir_node *n = &g->nodes[i];
            char lbl[96];
            char wexpr[IR_MAX_IN][96];
            for (int s = 0; s < IR_MAX_IN; s++) {
                int32_t ti = n->in[s];
                if (ti < 0 || g->tensors[ti].kind != IR_TENSOR_WEIGHT) snprintf(wexpr[s], sizeof wexpr[s], "zero");
                else cg_weight_ref(plan, &lay, pass == 1, i, s, ti, wexpr[s], sizeof wexpr[s]);
            }
            /* weights are device addresses: bind each to a variable so launches can take its address */
            fprintf(fw, "%s{\n", ind);
            for (int s = 0; s < IR_MAX_IN; s++)
                if (strcmp(wexpr[s], "zero")) {
                    fprintf(fw, "%s    CUdeviceptr w%d = %s;\n", ind, s, wexpr[s]);
                    snprintf(wexpr[s], sizeof wexpr[s], "w%d", s);
                }
            char ind2[32];
            snprintf(ind2, sizeof ind2, "%s    ", ind);
            switch (n->op) {
            case IR_OP_EMBED: {
                NEW_BUF(n->out, HID, 0);
                resid = buf_of[n->out];
                snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 %d\n", HID, bf);
                snprintf(comment, sizeof comment, "embed ids[T] -> x[T,%d] f32 from a %s [%d,%d] table", HID, dtn(&c, bf), hp->vocab, HID);
                snprintf(nm, sizeof nm, "embed_%d", HID);
                const char *k = instance(&c, "embed.cu", nm, "EM_NAME", params, comment);
                fprintf(fw, "%s/* %s */\n%svoid *args[] = {&T, &d_ids, &w1, &%s};\n%sLAUNCH(%d, IG_EM_GRID_X(T), 1, 1, IG_EM_BLOCK, 0, args);\n",
                        ind2, comment, ind2, bufs[resid].ident, ind2, fn_index(&c, k));
                break;
            }
            case IR_OP_GATHER_ROWS: {
                NEW_BUF(n->out, HID, 0);
                /* the embedding gather over an f32 table: rows of the residual stream by d_rows */
                snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 0\n", HID);
                snprintf(comment, sizeof comment, "gather the rows whose logits are wanted: x[rows[i]] -> xo[i], f32 [%d]", HID);
                snprintf(nm, sizeof nm, "gather_rows_%d", HID);
                const char *k = instance(&c, "embed.cu", nm, "EM_NAME", params, comment);
                fprintf(fw, "%s/* %s */\n%svoid *args[] = {&n_out, &d_rows, &%s, &%s};\n%sLAUNCH(%d, IG_EM_GRID_X(n_out), 1, 1, IG_EM_BLOCK, 0, args);\n",
                        ind2, comment, ind2, bufs[resid].ident, bufs[buf_of[n->out]].ident, ind2, fn_index(&c, k));
                break;
            }
            case IR_OP_NORM_MATMUL: {
                const ir_tensor *wt = &g->tensors[n->in[2]];
                int64_t N = wt->shape[0], K = wt->shape[1];
                int32_t src = buf_of[n->in[0]] >= 0 ? buf_of[n->in[0]] : resid;
                if (K > xn_cols) xn_cols = K;
                int logits = pass == 2, swiglu = n->epi == IR_EPI_SWIGLU;
                int64_t out_cols = swiglu ? N / 2 : N;
                if (swiglu && N > gu_cols) gu_cols = N;
                if (!logits && buf_of[n->out] < 0) NEW_BUF(n->out, out_cols, swiglu ? bf : 0);
                const char *y = logits ? "d_logits" : bufs[buf_of[n->out]].ident;
                fprintf(fw, "%s/* %s: norm_matmul */\n", ind2, logits ? wt->name : cg_node_label(g, n->out, lbl, sizeof lbl));
                if (n->in[3] < 0) snprintf(wexpr[3], sizeof wexpr[3], "zero");
                mm_norm nrm = {bufs[src].ident, "w1", n->eps};
                emit_matmul(&c, fw, ind2, rows, "xn", "w2", wexpr[3], y, K, N, swiglu ? IR_EPI_SWIGLU : IR_EPI_STORE,
                            swiglu ? N / 2 : N, bf, logits ? "lm_head" : "layers.*", &nrm);
                break;
            }
            case IR_OP_MATMUL_EPI: {
                const ir_tensor *wt = &g->tensors[n->in[1]];
                if (n->epi != IR_EPI_ACC) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: matmul_epi without a norm must accumulate");
                    break;
                }
                buf_of[n->out] = resid;
                if (n->in[2] < 0) snprintf(wexpr[2], sizeof wexpr[2], "zero");
                fprintf(fw, "%s/* %s: matmul + residual add */\n", ind2, cg_node_label(g, n->out, lbl, sizeof lbl));
                emit_matmul(&c, fw, ind2, rows, bufs[buf_of[n->in[0]]].ident, "w1", wexpr[2], bufs[resid].ident, wt->shape[1],
                            wt->shape[0], IR_EPI_ACC, wt->shape[0], bf, "layers.*", NULL);
                break;
            }
            case IR_OP_ROPE_KV: {
                NEW_BUF(n->out, (int64_t)H * D, 0);
                int qk = n->in[1] >= 0;
                snprintf(params, sizeof params,
                         "#define RK_H %d\n#define RK_KV %d\n#define RK_D %d\n#define RK_PS %d\n#define RK_PAGE_BYTES %lluull\n"
                         "#define RK_KVBF16 %d\n#define RK_QKNORM %d\n#define RK_EPS %.9gf\n",
                         H, KV, D, PS, (unsigned long long)kv_layer_page * hp->n_layers, bf, qk, qk ? n->eps : 1e-6);
                snprintf(comment, sizeof comment, "%srope on q[T,%d] and k[T,%d], k/v into the %s KV pages", qk ? "q/k rms_norm, " : "",
                         H * D, KV * D, dtn(&c, bf));
                snprintf(nm, sizeof nm, "rope_kv_h%d_kv%d_d%d", H, KV, D);
                const char *k = instance(&c, "rope_kv.cu", nm, "RK_NAME", params, comment);
                rk_node = i;
                fprintf(fw, "%s/* %s: rope_kv (in the attention kernel on decode steps) */\n"
                            "%sif (!(T <= MV_TMAX && decode_only)) {\n"
                            "%s    void *args[] = {&T, &%s, &inv_freq, &%s, &%s, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv};\n"
                            "%s    LAUNCH(%d, IG_RK_GRID_X(T, %d, %d), IG_RK_GRID_Y(T), 1, IG_RK_BLOCK(%d), 0, args);\n%s}\n",
                        ind2, cg_node_label(g, n->out, lbl, sizeof lbl), ind2, ind2, bufs[buf_of[n->in[0]]].ident, qk ? wexpr[1] : "zero",
                        qk ? wexpr[2] : "zero", bufs[buf_of[n->out]].ident, ind2, fn_index(&c, k), H, KV, D, ind2);
                break;
            }
            case IR_OP_ATTENTION: {
                NEW_BUF(n->out, (int64_t)H * D, bf);
                const ir_node *rk = rk_node >= 0 && g->nodes[rk_node].out == n->in[0] ? &g->nodes[rk_node] : NULL;
                if (!rk) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): attention whose q does not come from rope_kv");
                    break;
                }
                int rk_qk = rk->in[1] >= 0;
                /* the split kernels' keys per split at least (IGNIS_COMPILE_AT_SPLIT_KEYS: another value, for
                 * measurement; 1 splits every context AT_SPLIT ways) */
                const char *ask = getenv("IGNIS_COMPILE_AT_SPLIT_KEYS");
                const int split_keys = ask && atoi(ask) >= 1 ? atoi(ask) : 64;
                snprintf(params, sizeof params,
                         "#define AT_H %d\n#define AT_KV %d\n#define AT_D %d\n#define AT_PS %d\n#define AT_PAGE_BYTES %lluull\n"
                         "#define AT_KVBF16 %d\n#define AT_OBF16 %d\n#define AT_SCALE %.9gf\n#define AT_SPLIT ATTN_SPLIT\n"
                         "#define AT_SPLIT_KEYS %d\n#define AT_QKNORM %d\n#define AT_EPS %.9gf\n",
                         H, KV, D, PS, (unsigned long long)kv_layer_page * hp->n_layers, bf, bf, 1.0 / sqrt((double)D),
                         split_keys, rk_qk, rk_qk ? rk->eps : 1e-6);
                snprintf(comment, sizeof comment, "causal attention, %d heads over %d KV heads x %d, paged %s KV -> [T,%d] %s", H, KV, D,
                         dtn(&c, bf), H * D, dtn(&c, bf));
                snprintf(nm, sizeof nm, "attention_h%d_kv%d_d%d", H, KV, D);
                const char *k = instance(&c, "attention.cu", nm, "AT_NAME", params, comment);
                snprintf(at_params, sizeof at_params, "%s", params); /* the persistent kernel's instance adds AT_DEVFN */
                char split[96], split_rope[96], qn[96] = "zero", kn[96] = "zero";
                snprintf(split, sizeof split, "%s_split", k);
                snprintf(split_rope, sizeof split_rope, "%s_split_rope", k);
                if (rk_qk) {
                    cg_weight_ref(plan, &lay, pass == 1, rk_node, 1, rk->in[1], qn, sizeof qn);
                    cg_weight_ref(plan, &lay, pass == 1, rk_node, 2, rk->in[2], kn, sizeof kn);
                }
                /* prefill: flash attention on tensor cores (same arguments as the direct kernel) */
                snprintf(params, sizeof params,
                         "#define AP_H %d\n#define AP_KV %d\n#define AP_D %d\n#define AP_PS %d\n#define AP_PAGE_BYTES %lluull\n"
                         "#define AP_KVBF16 %d\n#define AP_OBF16 %d\n#define AP_SCALE %.9gf\n",
                         H, KV, D, PS, (unsigned long long)kv_layer_page * hp->n_layers, bf, bf, 1.0 / sqrt((double)D));
                snprintf(comment, sizeof comment, "causal flash attention for prefill runs (tensor cores), %d heads over %d KV heads x %d",
                         H, KV, D);
                snprintf(nm, sizeof nm, "attention_prefill_h%d_kv%d_d%d", H, KV, D);
                const char *ap = instance(&c, "attention_prefill.cu", nm, "AP_NAME", params, comment);
                const char *o_ = bufs[buf_of[n->out]].ident, *q_ = bufs[buf_of[n->in[0]]].ident;
                fprintf(fw, "%s/* %s: attention (split over the context for decode-sized steps) */\n", ind2, cg_node_label(g, n->out, lbl, sizeof lbl));
                fprintf(fw, "%sif (T <= MV_TMAX && decode_only) {\n"
                            "%s    /* one token per sequence: rope_kv fused in */\n"
                            "%s    CUdeviceptr qn = %s, kn = %s;\n"
                            "%s    void *args[] = {&T, &%s, &inv_freq, &qn, &kn, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &attn_ws, &attn_cnt, &%s};\n"
                            "%s    LAUNCH(%d, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, ATTN_SPLIT), IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n"
                            "%s} else if (T <= MV_TMAX) {\n"
                            "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &attn_ws, &attn_cnt, &%s};\n"
                            "%s    LAUNCH(%d, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, ATTN_SPLIT), IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n"
                            "%s} else if (!prefill_runs) {\n"
                            "%s    /* many decode tokens: one CTA per (token, KV head) keeps the GPU busy */\n"
                            "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &%s};\n"
                            "%s    LAUNCH(%d, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), 1, IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n"
                            "%s} else {\n"
                            "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &%s};\n"
                            "%s    LAUNCH(%d, IG_AP_GRID_X(T, %d), IG_AP_GRID_Y(T), 1, IG_AP_BLOCK, IG_AP_SMEM(%d), args);\n"
                            "%s}\n",
                        ind2, ind2, ind2, qn, kn, ind2, bufs[buf_of[rk->in[0]]].ident, o_, ind2, fn_index(&c, split_rope), KV, H, KV, D,
                        ind2, ind2, q_, o_, ind2, fn_index(&c, split), KV, H, KV, D, ind2, ind2,
                        ind2, q_, o_, ind2, fn_index(&c, k), KV, H, KV, D, ind2, ind2, q_, o_, ind2, fn_index(&c, ap), H, D, ind2);
                break;
            }
            default:
                st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): cannot lower op %s", ir_op_name(n->op));
            }
            fprintf(fw, "%s}\n", ind);
        }
        if (pass == 1 || pass == 2) fprintf(fw, "    }\n");
        if (pass == 2 && !st) {
            /* device sampling of the logits rows */
            snprintf(params, sizeof params, "#define SM_V %d\n#define SM_LD %d\n", hp->vocab, hp->vocab);
            snprintf(comment, sizeof comment, "sampling on the device: one token per logits row of %d", hp->vocab);
            const char *k = instance(&c, "sample.cu", "sample", "SM_NAME", params, comment);
            fprintf(fw, "    if (do_sample%s) {\n"
                        "        /* %s%s */\n"
                        "        int n_part = %s;\n"
                        "        void *args[] = {&n_out, &d_logits, &d_sp, &d_sampled, &dl_amax, &n_part};\n"
                        "        LAUNCH(%d, IG_SM_GRID_X(n_out), 1, 1, IG_SM_BLOCK, 0, args);\n"
                        "    }\n",
                    dl_head ? " && !(dl_done && do_sample == 2)" : "", comment,
                    dl_head ? " (after the persistent kernel: from its per-CTA greedy picks)" : "",
                    dl_head ? "dl_done ? st->n_sm : 0" : "0", fn_index(&c, k));
        }
    }
    /* the persistent decode kernel: its attention device functions, then the kernel itself */
    int dl_fn = -1;
    char dl_macro[4096] = "", dl_init[4096] = "";
    if (!st && dl_ok) {
        snprintf(params, sizeof params, "%s#define AT_DEVFN 1\n", at_params);
        snprintf(comment, sizeof comment, "decode attention as device functions for the persistent kernel");
        snprintf(nm, sizeof nm, "attention_dl_h%d_kv%d_d%d", H, KV, D);
        const char *an = instance(&c, "attention.cu", nm, "AT_NAME", params, comment);
        int64_t nq = g->tensors[dln[0]->in[2]].shape[0], ng = g->tensors[dln[4]->in[2]].shape[0];
        /* stream.cuh's consumer slots per group, accumulators per slot and slots in flight, for
         * measuring them against its defaults: IGNIS_COMPILE_ST_GROUP (1, 2, 4), IGNIS_COMPILE_ST_ACC
         * (1, 2), IGNIS_COMPILE_ST_INFLIGHT (1..12), IGNIS_COMPILE_ST_LATE (0, 1), IGNIS_COMPILE_ST_L2HINT (0, 1) */
        static const struct {
            const char *env, *macro;
            unsigned ok; /* bit v: value v is accepted */
        } st_knob[] = {{"IGNIS_COMPILE_ST_GROUP", "IG_ST_GROUP", 1u << 1 | 1u << 2 | 1u << 4},
                       {"IGNIS_COMPILE_ST_ACC", "IG_ST_ACC", 1u << 1 | 1u << 2},
                       {"IGNIS_COMPILE_ST_INFLIGHT", "IG_ST_INFLIGHT", 0x1ffeu /* 1..12 */},
                       {"IGNIS_COMPILE_ST_LATE", "IG_ST_LATE_SCALE", 1u << 0 | 1u << 1},
                       {"IGNIS_COMPILE_ST_L2HINT", "IG_ST_L2HINT", 1u << 0 | 1u << 1}};
        char st_knobs[256] = "";
        for (size_t k = 0, kl = 0; k < sizeof st_knob / sizeof st_knob[0]; k++) {
            const char *e = getenv(st_knob[k].env);
            const int v = e && e[0] >= '0' && e[0] <= '9' ? atoi(e) : -1;
            if (v >= 0 && v < 16 && (st_knob[k].ok >> v & 1u))
                kl += (size_t)snprintf(st_knobs + kl, sizeof st_knobs - kl, "#define %s %d\n", st_knob[k].macro, v);
        }
        snprintf(params, sizeof params,
                 "#define IG_ST_NSLOT %d\n#define DL_LAYERS %d\n#define DL_HID %d\n#define DL_QKV_ROWS %lld\n"
                 "#define DL_QKV_N %lld\n#define DL_HD %d\n#define DL_GU_ROWS %lld\n#define DL_EPS1 %.9gf\n"
                 "#define DL_EPS2 %.9gf\n#define DL_BQKV %d\n#define DL_BO %d\n#define DL_BGU %d\n#define DL_BDOWN %d\n"
                 "#define DL_ATTN %s\n#define DL_KV %d\n#define DL_SPLIT ATTN_SPLIT\n#define DL_KV_LAYER_BYTES %lluull\n"
                 "#define DL_VOCAB %d\n#define DL_EPS_HEAD %.9gf\n#define DL_D %d\n%s",
                 dl_nslot, hp->n_layers, HID, (long long)nq, (long long)(H + 2 * KV) * D, H * D, (long long)ng,
                 dln[0]->eps, dln[4]->eps, dln[0]->in[3] >= 0, dln[3]->in[2] >= 0, dln[4]->in[3] >= 0,
                 dln[5]->in[2] >= 0, an, KV, (unsigned long long)kv_layer_page, hp->vocab,
                 dl_head ? dl_head->eps : 1e-6, D, st_knobs);
        snprintf(comment, sizeof comment, "one-token decode: all %d layers in one persistent kernel, weights streamed "
                                          "through a %d x 16 KB ring per SM (sm_90)", hp->n_layers, dl_nslot);
        const char *dk = instance(&c, "decode_layers.cu", "decode_layers", "DL_NAME", params, comment);
        dl_fn = fn_index(&c, dk);
        const char *bq = bufs[buf_of[dln[0]->out]].ident;
        const char *ba = bufs[buf_of[dln[2]->out]].ident, *bh = bufs[buf_of[dln[4]->out]].ident;
        /* the embedding table, the lm_head and its norm, when the kernel takes them */
        char emb_w[96] = "0", head_w[96] = "0", head_g[96] = "0";
        if (dl_emb) cg_weight_ref(plan, &lay, 0, 0, 1, dl_emb->in[1], emb_w, sizeof emb_w);
        if (dl_head) {
            int32_t hn = (int32_t)(dl_head - g->nodes);
            cg_weight_ref(plan, &lay, 0, hn, 2, dl_head->in[2], head_w, sizeof head_w);
            cg_weight_ref(plan, &lay, 0, hn, 1, dl_head->in[1], head_g, sizeof head_g);
        }
        int dl_len = snprintf(dl_macro, sizeof dl_macro,
                 "/* the layer stack of a one-token step as one cooperative launch (decode_layers.cu) */\n"
                 "#define DECODE_LAYERS(done) do { \\\n"
                 "    CUdeviceptr dl_tab = st->d_layers, dl_emb = %s, dl_hw = n_out > 0 ? %s : 0, dl_hg = %s; \\\n"
                 "    CUdeviceptr dl_pick = do_sample == 2 ? d_sampled : 0, dl_nid = do_sample == 2 ? d_ids : 0; \\\n"
                 "    CUdeviceptr dl_npos = do_sample == 2 ? d_pos : 0; \\\n"
                 "    /* a multi-step run (forward; never captured in a graph) or one step */ \\\n"
                 "    int dl_steps = do_sample == 2 ? st->run_steps : 1; \\\n"
                 "    CUdeviceptr dl_tok = dl_steps > 1 ? st->run_dev : 0, dl_cancel = dl_steps > 1 ? dl_go + 4 * RUN_MAX : 0; \\\n"
                 "    CUdeviceptr dl_gop = dl_steps > 1 ? dl_go : 0; /* its decisions and cancel flag start at zero: */ \\\n"
                 "    if (dl_steps > 1) CU(st->api.cuMemcpyHtoDAsync(dl_go, st->run_host + RUN_MAX + 1, 4 * (RUN_MAX + 1), st->stream)); \\\n"
                 "    void *dl_args[] = {&dl_tab, &%s, &%s, &%s, &%s, &inv_freq, &kv, &d_pos, &d_seq, &d_pages, &mpv, \\\n"
                 "                       &attn_ws, &attn_cnt, &dl_bar, &st->dl_keys, &dl_emb, &d_ids, &dl_hw, &dl_hg, \\\n"
                 "                       &d_logits, &dl_amax, &dl_pick, &dl_nid, &dl_npos, &dl_steps, &dl_tok, &dl_cancel, &dl_gop, \\\n"
                 "                       &st->dl_heads}; \\\n"
                 "    cu_prof_begin(&st->api, &st->prof, st->stream); \\\n"
                 "    CUresult dl_r = cu_launch_coop(&st->api, st->fn[%d], st->stream, (unsigned)st->n_sm, DL_THREADS, DL_SMEM, dl_args); \\\n"
                 "    if (dl_r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) { st->dl_on = 0; break; } \\\n"
                 "    CU(dl_r); \\\n"
                 "    if (st->sync_each) CU(st->api.cuStreamSynchronize(st->stream)); \\\n"
                 "    cu_prof_end(&st->api, &st->prof, st->stream, %d); \\\n"
                 "    (done) = 1; } while (0)\n",
                 emb_w, head_w, head_g, bufs[resid].ident, bq, ba, bh, dl_fn, dl_fn);
        if (dl_len < 0 || (size_t)dl_len >= sizeof dl_macro) st = ig_fail(err, IG_ERR_INTERNAL, "codegen: DECODE_LAYERS macro too long");
        /* init: the per-layer pointer table, when this GPU can run the kernel */
        char we[12][96];
        /* ig_dl_layer's fields: (layer node, input slot) of each */
        static const struct { int node, slot; } dlw[12] = {
            {0, 2} /* wqkv */, {3, 1} /* wo */, {4, 2} /* wgu */, {5, 1} /* wdown */, {0, 1} /* g1 */,
            {4, 1} /* g2 */,   {0, 3} /* bqkv */, {3, 2} /* bo */, {4, 3} /* bgu */, {5, 2} /* bdown */,
            {1, 1} /* qn */,   {1, 2} /* kn */};
        for (int k = 0; k < 12; k++) {
            int32_t ti = dln[dlw[k].node]->in[dlw[k].slot];
            if (ti < 0) snprintf(we[k], sizeof we[k], "0");
            else cg_weight_ref(plan, &lay, 1, lay.first_layer + dlw[k].node, dlw[k].slot, ti, we[k], sizeof we[k]);
        }
        int dl_ilen = snprintf(dl_init, sizeof dl_init,
                 "    st->n_sm = n_sm;\n"
                 "    {\n"
                 "        /* the persistent decode kernel: sm_90, cooperative launches, one CTA per SM with its ring,\n"
                 "         * at most 1024 CTAs (dl_amax) and one batch of sums of a residual add per CTA (256 rows, 128\n"
                 "         * when a row takes two slots)\n"
                 "         * (decode_layers.cu); IGNIS_CUDA_PERSISTENT=0 turns it off */\n"
                 "        const char *pe = getenv(\"IGNIS_CUDA_PERSISTENT\"), *pk = getenv(\"IGNIS_CUDA_DL_KEYS\");\n"
                 "        st->dl_keys = pk && atoi(pk) > 0 ? atoi(pk) : 256;\n"
                 "        const char *ph = getenv(\"IGNIS_CUDA_DL_HEADS\"); /* 0: attention items per kv head only */\n"
                 "        st->dl_heads = !(ph && ph[0] == '0');\n"
                 "        int coop = 0, fit = 0, G = n_sm > 0 ? n_sm : 1;\n"
                 "        st->api.cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, st->dev);\n"
                 "        int limits = G <= 1024 && (%d + G - 1) / G <= %d;\n"
                 "        if (major >= 9 && coop && limits && !(pe && pe[0] == '0') &&\n"
                 "            st->api.cuFuncSetAttribute(st->fn[%d], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, DL_SMEM) == CUDA_SUCCESS &&\n"
                 "            st->api.cuOccupancyMaxActiveBlocksPerMultiprocessor(&fit, st->fn[%d], DL_THREADS, DL_SMEM) == CUDA_SUCCESS &&\n"
                 "            fit >= 1) {\n"
                 "            CUdeviceptr tab[N_LAYERS][12]; /* ig_dl_layer: wqkv wo wgu wdown g1 g2 bqkv bo bgu bdown qn kn */\n"
                 "            for (int l = 0; l < N_LAYERS; l++) {\n"
                 "                const int32_t *lw = layer_weights[l];\n"
                 "                const CUdeviceptr e[12] = {%s, %s, %s, %s, %s, %s,\n"
                 "                                           %s, %s, %s, %s, %s, %s};\n"
                 "                memcpy(tab[l], e, sizeof e);\n"
                 "            }\n"
                 "            TRY(st->api.cuMemAlloc(&st->d_layers, sizeof tab), \"allocating the layer table\");\n"
                 "            TRY(st->api.cuMemcpyHtoD(st->d_layers, tab, sizeof tab), \"copying the layer table\");\n"
                 "            st->dl_on = 1;\n"
                 "        }\n"
                 "    }\n",
                 HID, dl_resid_rows, dl_fn, dl_fn, we[0], we[1], we[2], we[3],
                 we[4], we[5], we[6], we[7], we[8], we[9], we[10], we[11]);
        if (dl_ilen < 0 || (size_t)dl_ilen >= sizeof dl_init) st = ig_fail(err, IG_ERR_INTERNAL, "codegen: persistent kernel init too long");
    }
    if (!st) {
        fprintf(fw, "    /* the sampled ids back */\n"
                    "    if (do_sample) CU(st->api.cuMemcpyDtoHAsync(SAMPLED_IDS(st) + (chain ? st->max_tokens + chain - 1 : 0), d_sampled,\n"
                    "                                                sizeof(int32_t) * n_out, st->stream));\n"
                    "    return 0;\n}\n\n");
        fprintf(fw,
                "/* Replays the CUDA graph of this step's shape, capturing it on first use. Steps of one token (the\n"
                " * GEMV kernels or the persistent one) and decode-only steps of more (cuBLAS, batched decode) both\n"
                " * take graphs; the batch's contents are uploaded by the graph's first node. */\n"
                "static int launch_graph(dev_state *st, int T, int n_out, int mpb, int do_sample, int decode_only, int chain) {\n"
                "    const int batch_ints = 4 * T + T * mpb; /* every page-table row the key allows: one size per graph */\n"
                "    cu_graph_cache *gc = &st->graphs;\n"
                "    const int key[6] = {T, n_out, mpb, do_sample, decode_only, chain};\n"
                "    int i = 0;\n"
                "    while (i < gc->n && memcmp(gc->key[i], key, sizeof key)) i++;\n"
                "    if (i == gc->n) {\n"
                "        /* not captured: run the step directly (this also makes the driver load every kernel it\n"
                "         * uses, which must not happen during a capture); the second time, capture it for the next */\n"
                "        int rc0 = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, batch_ints, chain);\n"
                "        if (rc0 || !cu_graphs_seen(gc, key)) return rc0;\n"
                "        /* graphs are an optimization: if capturing fails, this engine runs such steps directly (a\n"
                "         * batched step's failure leaves the one-token graphs on) */\n"
                "        const int batched = !(T <= MV_TMAX && T <= st->gemv_tmax);\n"
                "        CUgraph g = NULL;\n"
                "        if (st->api.cuStreamBeginCapture(st->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) {\n"
                "            if (batched) st->graph_tmax = 0; else st->use_graphs = 0;\n"
                "            return 0;\n"
                "        }\n"
                "        int rc = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, batch_ints, chain);\n"
                "        CUresult re = st->api.cuStreamEndCapture(st->stream, &g);\n"
                "        CUgraphExec ex = NULL;\n"
                "        CUresult ri = rc || re != CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : st->api.cuGraphInstantiate(&ex, g, 0);\n"
                "        if (g) st->api.cuGraphDestroy(g);\n"
                "        if (ri != CUDA_SUCCESS) {\n"
                "            st->graph_error = ri;\n"
                "            if (batched) st->graph_tmax = 0; else st->use_graphs = 0;\n"
                "            return 0;\n"
                "        }\n"
                "        i = cu_graphs_slot(&st->api, gc);\n"
                "        gc->exec[i] = ex, gc->used[i] = ++gc->tick;\n"
                "        memcpy(gc->key[i], key, sizeof key);\n"
                "        return 0;\n"
                "    }\n"
                "    gc->used[i] = ++gc->tick;\n"
                "    CU(st->api.cuGraphLaunch(gc->exec[i], st->stream));\n"
                "    return 0;\n}\n\n");
        fprintf(fw,
                "/* Waits for step j of the multi-step run in flight to publish its token (the host-mapped slot), checking\n"
                " * now and then that the stream has not failed or ended without it. */\n"
                "static int run_wait(dev_state *st, int j) {\n"
                "    volatile int32_t *slot = st->run_host + j;\n"
                "    for (unsigned n = 1; *slot == RUN_PENDING; n++)\n"
                "        if (!(n & 4095)) {\n"
                "            CUresult q = st->api.cuStreamQuery(st->stream);\n"
                "            if (q == CUDA_SUCCESS) return *slot == RUN_PENDING ? -5 : 0; /* the run stopped before step j */\n"
                "            if (q != CUDA_ERROR_NOT_READY) CU(q);\n"
                "        }\n"
                "    return 0;\n}\n\n"
                "/* Returns step j of the multi-step run in flight as b's token, once it is out; the run ends after its\n"
                " * last step, or on an error. */\n"
                "static int run_take(dev_state *st, int j, const ig_fwd_batch *b) {\n"
                "    int rw = run_wait(st, j);\n"
                "    if (rw) {\n"
                "        st->run_k = 0;\n"
                "        return rw;\n"
                "    }\n"
                "    b->sampled[0] = st->run_tok = st->run_host[j];\n"
                "    st->run_j = j + 1;\n"
                "    if (st->run_j == st->run_k) st->run_k = 0;\n"
                "    return 0;\n}\n\n"
                "/* Is b exactly the step that continues the last one of a single greedy row: token tok at position\n"
                " * pos, with the page-table row (mp entries) the last launched step staged? (What a chained step or\n"
                " * a run's next step computed.) */\n"
                "static int next_of(const dev_state *st, const ig_fwd_batch *b, int do_sample, int32_t tok, int32_t pos,\n"
                "                   int32_t mp) {\n"
                "    return b->n_tokens == 1 && b->n_out == 1 && b->n_seqs == 1 && do_sample == 2 && b->out_rows[0] == 0 &&\n"
                "           b->token_ids[0] == tok && b->positions[0] == pos && b->max_pages_per_seq == mp &&\n"
                "           !memcmp(b->page_table, st->pinned + 4, sizeof(int32_t) * (size_t)mp);\n}\n\n"
                "/* Stops the multi-step run in flight after its next step: its cancel flag is set by a copy on the side\n"
                " * stream (the run holds st->stream), waited for so that it cannot land in a later run. */\n"
                "static CUresult run_cancel(dev_state *st) {\n"
                "    st->run_k = 0;\n"
                "    CUresult r = st->api.cuMemcpyHtoDAsync(st->d_cancel, st->run_host + RUN_MAX, sizeof(int32_t), st->side);\n"
                "    return r == CUDA_SUCCESS ? st->api.cuStreamSynchronize(st->side) : r;\n}\n\n"
                "/* Runs one step: see ig_fwd_batch in ig_model_abi.h. */\n"
                "static int forward(const ig_model_ctx *ctx, const ig_fwd_batch *b) {\n"
                "    dev_state *st = ctx->device_state;\n"
                "    const int T = b->n_tokens, n_out = b->n_out, mp = b->max_pages_per_seq;\n"
                "    if (!st || T < 1 || T > st->max_tokens || n_out < 0 || n_out > T || b->n_seqs < 1 || b->n_seqs > T ||\n"
                "        mp < 1 || mp > st->max_pages)\n"
                "        return -1;\n"
                "    for (int t = 0; t < T; t++) {\n"
                "        int s = b->token_seq[t], p = b->positions[t];\n"
                "        if (b->token_ids[t] < 0 || b->token_ids[t] >= VOCAB || s < 0 || s >= b->n_seqs || p < 0 ||\n"
                "            p >= MAX_CONTEXT || p / PAGE_SIZE >= mp)\n"
                "            return -2;\n"
                "        int32_t pg = b->page_table[s * mp + p / PAGE_SIZE];\n"
                "        if (pg < 0 || pg >= ctx->n_pages) return -3;\n"
                "    }\n"
                "    for (int i = 0; i < n_out; i++)\n"
                "        if (b->out_rows[i] < 0 || b->out_rows[i] >= T) return -4;\n"
                "    /* page-table rows padded to a power of two, so decode steps reuse a few graphs as contexts grow */\n"
                "    int mpb = 1;\n"
                "    while (mpb < mp) mpb *= 2;\n"
                "    if (mpb > st->max_pages) mpb = st->max_pages;\n"
                "    /* device sampling: the rows' parameters go up with the batch, one id per row comes back */\n"
                "    /* 2: a single greedy row, which the persistent kernel picks itself when it runs the step */\n"
                "    const int do_sample = b->sample != NULL && n_out > 0\n"
                "                              ? (n_out == 1 && b->sample[0].on && b->sample[0].temperature == 0.0f ? 2 : 1) : 0;\n"
                "    /* one token per sequence (pure decode): rope_kv runs inside the attention kernel */\n"
                "    const int decode_only = b->n_seqs == T;\n"
                "    /* a multi-step run (below) in flight: this step is its next one when the engine asks for exactly\n"
                "     * that (the token the run returned last, the next position, the same page-table row) */\n"
                "    if (st->run_k) {\n"
                "        if (!b->logits && next_of(st, b, do_sample, st->run_tok, st->run_pos0 + st->run_j, st->run_mp))\n"
                "            return run_take(st, st->run_j, b);\n"
                "        /* otherwise the run stops after its next step (it reads the flag during each step's lm_head); like a\n"
                "         * chained step, its extra steps leave only K/V in the page its sequence wrote last. It must be over\n"
                "         * before run_host is reused (a run still going would write its tokens into a new run's slots). */\n"
                "        CU(run_cancel(st));\n"
                "        CU(st->api.cuStreamSynchronize(st->stream));\n"
                "    }\n"
                "    /* the chained step the previous call queued (below) is this step when the engine asks for\n"
                "     * exactly what it computes: the same single greedy row, with the token the previous step\n"
                "     * returned, at the next position, with the same page-table row */\n"
                "    int cur = 0; /* whose results this call returns: 0 a step launched here, 1 / 2 the chained one */\n"
                "    if (st->chain_q) {\n"
                "        st->chain_q = 0;\n"
                "        if (next_of(st, b, do_sample, st->chain_tok, st->chain_pos, st->chain_mp)) cur = st->chain_par;\n"
                "        /* otherwise it ran for nothing, before this step in stream order: all it leaves is the K/V of\n"
                "         * position chain_pos in the page its sequence wrote last, which no other sequence reads */\n"
                "    }\n"
                "    if (!cur) {\n"
                "        /* the batch staged for one copy: ids, positions, sequences, logit rows, page table */\n"
                "        int32_t *hb = st->pinned;\n"
                "        memcpy(hb, b->token_ids, sizeof(int32_t) * T);\n"
                "        memcpy(hb + T, b->positions, sizeof(int32_t) * T);\n"
                "        memcpy(hb + 2 * T, b->token_seq, sizeof(int32_t) * T);\n"
                "        memcpy(hb + 3 * T, b->out_rows, sizeof(int32_t) * n_out);\n"
                "        for (int s = 0; s < b->n_seqs; s++) memcpy(hb + 4 * T + s * mpb, b->page_table + s * mp, sizeof(int32_t) * mp);\n"
                "        /* does the step hold prefill runs (a sequence's consecutive positions) for the tensor-core kernel? */\n"
                "        int prefill_runs = 0;\n"
                "        for (int t = 1, run = 1; t < T && !prefill_runs; t++) {\n"
                "            run = b->token_seq[t] == b->token_seq[t - 1] && b->positions[t] == b->positions[t - 1] + 1 ? run + 1 : 1;\n"
                "            prefill_runs = run >= 16;\n"
                "        }\n"
                "        if (do_sample) memcpy(st->pinned_smp, b->sample, sizeof(ig_fwd_sample) * n_out);\n"
                "        /* a single greedy row with no logits wanted runs the rest of its KV page (up to run_max steps) in one\n"
                "         * persistent launch, each step's token the previous one's pick, published as soon as picked */\n"
                "        int run = 0;\n"
                "        if (st->run_max > 1 && st->dl_on && do_sample == 2 && T == 1 && decode_only && !b->logits) {\n"
                "            run = PAGE_SIZE - b->positions[0] %% PAGE_SIZE;\n"
                "            if (run > MAX_CONTEXT - b->positions[0]) run = MAX_CONTEXT - b->positions[0];\n"
                "            if (run > st->run_max) run = st->run_max;\n"
                "        }\n"
                "        if (run > 1) {\n"
                "            for (int j = 0; j < run; j++) st->run_host[j] = RUN_PENDING;\n"
                "            st->run_steps = run;\n"
                "            int rr = launch_step(st, T, n_out, mpb, 0, do_sample, decode_only, 4 * T + mpb, 0);\n"
                "            st->run_steps = 1;\n"
                "            if (rr) return rr;\n"
                "            if (st->dl_on) { /* else the GPU refused the cooperative launch: that was one per-op step */\n"
                "                st->run_k = run, st->run_j = 0, st->run_pos0 = b->positions[0], st->run_mp = mp;\n"
                "                return run_take(st, 0, b);\n"
                "            }\n"
                "        }\n"
                "        /* one-token steps and decode-only batches replay graphs (batch sizes up to graph_tmax) */\n"
                "        const int graph = st->use_graphs &&\n"
                "                          ((T <= MV_TMAX && T <= st->gemv_tmax) || (decode_only && T <= st->graph_tmax));\n"
                "        int rc = run > 1 ? 0 : graph\n"
                "                     ? launch_graph(st, T, n_out, mpb, do_sample, decode_only, 0)\n"
                "                     : launch_step(st, T, n_out, mpb, prefill_runs, do_sample, decode_only, 4 * T + b->n_seqs * mpb, 0);\n"
                "        if (rc) return rc;\n"
                "    }\n"
                "    if (n_out > 0 && b->logits)\n"
                "        CU(st->api.cuMemcpyDtoHAsync(b->logits, st->d_logits, sizeof(float) * n_out * VOCAB, st->stream));\n"
                "    CU(st->api.cuEventRecord(st->chain_ev[cur], st->stream));\n"
                "    /* chain the next step: a single greedy row whose next position stays in this KV page runs again\n"
                "     * right behind this step, with the token and position this step's pick leaves in the batch\n"
                "     * (decode_layers.cu), so the GPU does not wait while the host turns this step around */\n"
                "    if (st->chain_on && st->dl_on && st->use_graphs && do_sample == 2 && T == 1 && decode_only &&\n"
                "        b->positions[0] + 1 < MAX_CONTEXT && (b->positions[0] + 1) / PAGE_SIZE == b->positions[0] / PAGE_SIZE) {\n"
                "        const int nxt = cur == 1 ? 2 : 1; /* its sampled id lands apart from this step's */\n"
                "        if (launch_graph(st, 1, 1, mpb, 2, 1, nxt) == 0 &&\n"
                "            st->api.cuEventRecord(st->chain_ev[nxt], st->stream) == CUDA_SUCCESS)\n"
                "            st->chain_q = 1, st->chain_par = nxt, st->chain_pos = b->positions[0] + 1, st->chain_mp = mp;\n"
                "        else\n"
                "            st->chain_on = 0; /* a failing device shows in the wait below */\n"
                "    }\n"
                "    CU(st->api.cuEventSynchronize(st->chain_ev[cur]));\n"
                "    const int32_t *tok = SAMPLED_IDS(st) + (cur ? st->max_tokens + cur - 1 : 0);\n"
                "    if (do_sample)\n"
                "        for (int i = 0; i < n_out; i++)\n"
                "            if (b->sample[i].on) b->sampled[i] = tok[i];\n"
                "    if (st->chain_q) st->chain_tok = tok[0];\n"
                "    return 0;\n}\n");
    }
    fflush(fw);
    if (st) goto done;

    /* ---- host file */
    fprintf(out,
            "/* model.c — generated by ignis %s: host side of a CUDA package. Do not edit: regenerate with\n"
            " * `ignis compile`.\n"
            " *\n"
            " * model:  %s, %d layers, hidden %d, %d heads / %d KV heads x %d, intermediate %d, vocab %d\n"
            " * target: CUDA %s (cubins + PTX embedded below); %s weights and activations, f32 accumulation\n"
            " * The kernels are in model.cu; this file loads them (driver API, opened with dlopen so the\n"
            " * package loads without a GPU) and runs them: GEMV kernels for up to MV_TMAX tokens a step,\n"
            " * cuBLAS GEMMs for larger (prefill) steps. */\n"
            "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
            "#include \"ig_model_abi.h\"\n#include \"host.h\"\n#include \"launch.h\"\n\n"
            ,
            o->compiler_version, hp->arch, hp->n_layers, HID, H, KV, D, hp->intermediate, hp->vocab, archs, dtn(&c, bf));
    cg_emit_shape_defines(out, hp, PS, kv_layer_page);
    if (dl_ok)
        fprintf(out, "#define DL_THREADS 288 /* decode_layers.cu: 8 consumer warps + a producer warp (IG_ST_THREADS) */\n"
                     "#define DL_SMEM (%d * 16384 + IG_AT_SMEM(N_HEADS, N_KV_HEADS, HEAD_DIM)) /* its ring + attention scratch */\n",
                dl_nslot);
    fprintf(out, "#define RUN_MAX 64     /* steps of a multi-step greedy run at most (forward) */\n"
                 "#define RUN_PENDING (-2147483647 - 1) /* a run's token slot not written yet */\n");
    fprintf(out, "#define BLAS_WS_BYTES (32u << 20) /* cuBLAS's workspace (its recommendation for sm_90) */\n");
    fprintf(out, "#define MV_TMAX 8      /* steps of up to this many tokens take the GEMV path */\n"
                 "#define ATTN_SPLIT 16  /* context partitions of decode attention */\n"
                 "#define W_BF16 %d     /* 16-bit weights (and activations where the kernels round) */\n"
                 "#define W_F16 %d      /* ... of IEEE half rather than bf16 */\n",
            bf, c.f16);

    /* kernel images, embedded with .incbin (files next to this one) */
    fprintf(out, "\n/* ---- kernel images: cubins per architecture and PTX of the newest, embedded at build time */\n");
    int newest = 0;
    for (int i = 0; i < t->n_archs; i++) {
        int cc = atoi(t->archs[i] + 3);
        if (cc > newest) newest = cc;
    }
    char imgs[CG_MAX_ARCHS + 1][48];
    int imgcc[CG_MAX_ARCHS + 1], imgptx[CG_MAX_ARCHS + 1], n_img = 0;
    for (int i = 0; i <= t->n_archs; i++) {
        if (i < t->n_archs) {
            snprintf(imgs[n_img], 48, "kernel_%s.cubin", t->archs[i]);
            imgcc[n_img] = atoi(t->archs[i] + 3);
            imgptx[n_img] = 0;
        } else {
            snprintf(imgs[n_img], 48, "kernel_compute_%d.ptx", newest);
            imgcc[n_img] = newest;
            imgptx[n_img] = 1;
        }
        fprintf(out, "__asm__(\".section .rodata\\n.balign 64\\n.hidden img%d\\n.globl img%d\\nimg%d:\\n.incbin \\\"%s\\\"\\n"
                     ".hidden img%d_end\\n.globl img%d_end\\nimg%d_end:\\n.byte 0\\n.previous\\n\");\n"
                     "extern const unsigned char img%d[], img%d_end[];\n",
                n_img, n_img, n_img, imgs[n_img], n_img, n_img, n_img, n_img, n_img);
        n_img++;
    }

    /* kernels */
    fprintf(out, "\n/* ---- kernels of model.cu launched below */\nstatic const char *const kernel_names[%d] = {", c.n_fn);
    for (int i = 0; i < c.n_fn; i++) fprintf(out, "%s\"%s\"", i ? ", " : "", c.fnames[i]);
    fprintf(out, "};\n");

    cg_emit_weight_list(out, plan);
    fprintf(out, "#define W(i) (st->w + weights[i].offset)\n\n");
    cg_emit_layer_table(out, g, plan, &lay);
    st = cg_emit_rope_table(out, hp, err);
    if (st) goto done;

    fprintf(out, "\n/* ---- device workspace for up to max_tokens tokens (offsets from st->ws, 256-byte aligned) */\n"
                 "#define WS_ALIGN(n) (((n) + 255) & ~(uint64_t)255)\n"
                 "#define WORKSPACE_LIST(X, T) \\\n"
                 "    X(int32_t, batch, (uint64_t)(T) * (4 + MAX_PAGES_PER_SEQ)) \\\n"
                 "    X(float, d_logits, (uint64_t)(T) * VOCAB) \\\n"
                 "    X(ig_fwd_sample, d_sp, (uint64_t)(T)) \\\n"
                 "    X(int32_t, d_sampled, (uint64_t)(T)) \\\n"
                 "    X(float, attn_ws, IG_AT_WS_FLOATS(MV_TMAX, N_HEADS, HEAD_DIM, ATTN_SPLIT)) \\\n"
                 "    X(unsigned, attn_cnt, IG_AT_COUNTERS(MV_TMAX, N_HEADS)) /* a counter per query head: one-head items */ \\\n"
                 "    X(unsigned long long, dl_bar, 32) \\\n"
                 "    X(unsigned long long, dl_amax, 1024) /* the persistent kernel's greedy pick per CTA */ \\\n"
                 "    X(int32_t, dl_go, RUN_MAX + 1) /* its multi-step runs' decisions, then their cancel flag */ \\\n"
                 "    X(%s, a_gu, (uint64_t)(T) * %lld) \\\n"
                 "    X(%s, xn, (uint64_t)(T) * %lld)",
            bf ? "uint16_t" : "float", (long long)gu_cols, bf ? "uint16_t" : "float", (long long)xn_cols);
    for (int i = 0; i < n_bufs; i++)
        fprintf(out, " \\\n    X(%s, %s, (uint64_t)(T) * %lld)", bufs[i].bf16 ? "uint16_t" : "float", bufs[i].ident, (long long)bufs[i].cols);
    fprintf(out, "\n#define MAX_PAGES_PER_SEQ ((MAX_CONTEXT + PAGE_SIZE - 1) / PAGE_SIZE)\n"
                 "static uint64_t workspace_bytes(int32_t max_tokens, int32_t n_threads) {\n"
                 "    (void)n_threads;\n    uint64_t n = 0;\n"
                 "#define X(type, name, count) n += WS_ALIGN(sizeof(type) * (count));\n"
                 "    WORKSPACE_LIST(X, max_tokens)\n#undef X\n    return n;\n}\n"
                 "#define WORKSPACE_CARVE(base, max_t) \\\n"
                 "    CUdeviceptr ws_ = (base); \\\n"
                 "    WORKSPACE_LIST(WS_CARVE_ONE, max_t)\n"
                 "#define WS_CARVE_ONE(type, name, count) \\\n"
                 "    CUdeviceptr name = ws_; ws_ += WS_ALIGN(sizeof(type) * (count));\n");

    fprintf(out,
            "\n/* ---- device state (ctx->device_state) */\n"
            "typedef struct dev_state {\n"
            "    cu_api api;\n    CUdevice dev;\n    CUcontext cctx;\n    CUmodule mod;\n    CUstream stream;\n"
            "    cublasHandle_t blas;\n    CUfunction fn[%d];\n"
            "    CUdeviceptr w, kv, ws, inv_freq;\n"
            "    int32_t *pinned;    /* staging of one batch */\n"
            "    unsigned char *pinned_smp; /* staging of device sampling: params [max_tokens], then ids [max_tokens] */\n"
            "    int32_t max_tokens, max_pages;\n"
            "    int sync_each;      /* IGNIS_CUDA_SYNC: debug aid */\n"
            "    int use_graphs;     /* decode steps replay CUDA graphs (IGNIS_CUDA_GRAPHS=0: off) */\n"
            "    int gemv_tmax;      /* steps of up to this many tokens use the GEMV kernels, larger ones cuBLAS:\n"
            "                         * 1 by default (H200, 1B shape: at 8 tokens cuBLAS steps took 2.3 ms, the\n"
            "                         * GEMV 4.4 ms; at 1 token they tie without graphs, and the GEMV step can be\n"
            "                         * replayed as a graph). IGNIS_CUDA_GEMV_TMAX=0..8 overrides it. */\n"
            "    int pdl;            /* programmatic dependent launch (sm_90+, IGNIS_CUDA_PDL=1; off by default: on the\n"
            "                         * H200 1B decode it measured 1.076 ms/token on, 1.071 off) */\n"
            "    int mv_ctas;        /* GEMV grid cap: SMs x IG_MV_CTAS_PER_SM (IGNIS_CUDA_MV_CTAS_PER_SM) */\n"
            "    int mvt_tmax;       /* matmuls of 2..mvt_tmax tokens on the tensor-core GEMV (sm_80+; IGNIS_CUDA_MVT=n,\n"
            "                         * at most IG_MVT_TMAX, default 2; 0 or 1: off) */\n"
            "    cu_prof prof;       /* IGNIS_CUDA_PROFILE=1: per-kernel times, printed by fini */\n"
            "    cu_graph_cache graphs;\n"
            "    CUresult graph_error; /* why graphs were turned off, if they were */\n"
            "    int graph_tmax;     /* decode-only steps of up to this many tokens replay graphs too (IGNIS_CUDA_GRAPH_TMAX,\n"
            "                         * default every size; 0: only one-token steps do) */\n"
            "    CUdeviceptr blas_ws; /* cuBLAS's workspace, ours so that a graph capture never allocates */\n"
            "    CUdeviceptr d_logits; /* in the workspace */\n"
            "    int n_sm;           /* SMs: the persistent kernel's grid */\n"
            "    int dl_on;          /* one-token steps run the persistent decode kernel (decode_layers.cu) */\n"
            "    int dl_keys;        /* its attention: keys per context split (IGNIS_CUDA_DL_KEYS, default 256) */\n"
            "    int dl_heads;       /* 1: one attention item per query head where they fit (IGNIS_CUDA_DL_HEADS=0: off) */\n"
            "    CUdeviceptr d_layers; /* its per-layer weight pointers */\n"
            "    /* chained greedy steps (forward; IGNIS_CUDA_CHAIN=0 turns them off): one may be queued, with its\n"
            "     * sampled-id slot (1 or 2), the position it runs at, the token it was given, the page-row width */\n"
            "    int chain_on, chain_q, chain_par;\n"
            "    int32_t chain_pos, chain_tok, chain_mp;\n"
            "    CUevent chain_ev[3]; /* recorded after the step launched in a call (0) and after each chained one */\n"
            "    /* multi-step greedy runs (forward; IGNIS_CUDA_RUN = most steps per run, 1: off): run_steps is what the\n"
            "     * next persistent launch runs; a run in flight has run_k steps from position run_pos0, run_j of them\n"
            "     * returned, the last with token run_tok; run_host (mapped, run_dev on the device): RUN_MAX token\n"
            "     * slots, a 1 (what a cancel copies), RUN_MAX + 1 zeros; d_cancel: the run's cancel flag, set through\n"
            "     * the side stream while the run occupies st->stream */\n"
            "    int run_max, run_steps, run_k, run_j;\n"
            "    int32_t run_pos0, run_mp, run_tok;\n"
            "    int32_t *run_host;\n"
            "    CUdeviceptr run_dev, d_cancel;\n"
            "    CUstream side;\n"
            "} dev_state;\n"
            "/* where a step's sampled ids land: the staging area after the sampling parameters (max_tokens ids, then\n"
            " * one for each of the two chained-step slots) */\n"
            "#define SAMPLED_IDS(st) ((int32_t *)((st)->pinned_smp + sizeof(ig_fwd_sample) * (st)->max_tokens))\n\n"
            "/* a failed CUDA call returns -(10000000 + result * 10000 + the line of this file), so the\n"
            " * runtime's error names the call and the driver's error code */\n"
            "#define CU(call) do { CUresult r_ = (call); \\\n"
            "    if (r_ != CUDA_SUCCESS) return -(10000000 + (int)(r_ %% 1000) * 10000 + __LINE__); } while (0)\n"
            "/* IGNIS_CUDA_SYNC=1 synchronizes after every launch, so a faulting kernel is the one named */\n"
            "#define LAUNCH(k, gx, gy, gz, bx, smem, args) do { \\\n"
            "    cu_prof_begin(&st->api, &st->prof, st->stream); \\\n"
            "    CU(cu_launch(&st->api, st->fn[k], st->stream, st->pdl, (gx), (gy), (gz), (bx), (smem), (args))); \\\n"
            "    if (st->sync_each) CU(st->api.cuStreamSynchronize(st->stream)); \\\n"
            "    cu_prof_end(&st->api, &st->prof, st->stream, (k)); } while (0)\n"
            "/* y[T][ldy] (f32) = beta * y + x[T][K] . w[N][K]^T on cuBLAS (column-major view: y^T = w . x^T) */\n"
            "#define GEMM(N, T_, K, w_, x_, y_, ldy, beta_) GEMM_OUT(N, T_, K, w_, x_, y_, ldy, beta_, 0)\n"
            "/* ... with y in bf16 when ybf16 */\n"
            "#define GEMM_OUT(N, T_, K, w_, x_, y_, ldy, beta_, ybf16) do { \\\n"
            "    cu_prof_begin(&st->api, &st->prof, st->stream); \\\n"
            "    CU(gemm(st, (N), (T_), (K), (w_), (x_), (y_), (ldy), (beta_), (ybf16))); \\\n"
            "    cu_prof_end(&st->api, &st->prof, st->stream, CU_PROF_SLOTS - 1); } while (0)\n"
            "static CUresult gemm(dev_state *st, int N, int T, int K, CUdeviceptr w, CUdeviceptr x, CUdeviceptr y, int ldy, float beta,\n"
            "                     int ybf16) {\n"
            "    const float alpha = 1.0f;\n"
            "    const cudaDataType h = W_F16 ? CUDA_R_16F : CUDA_R_16BF, dt = W_BF16 ? h : CUDA_R_32F;\n"
            "    cublasStatus_t s = st->api.cublasGemmEx(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &alpha, (const void *)w, dt, K,\n"
            "                                            (const void *)x, dt, K, &beta, (void *)y, ybf16 ? h : CUDA_R_32F, ldy,\n"
            "                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);\n"
            "    return s == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;\n}\n",
            c.n_fn);

    fprintf(out, "%s%s", dl_macro, fwd_text);

    /* init / fini */
    fprintf(out, "\nstatic void fini(ig_model_ctx *ctx) {\n"
                 "    dev_state *st = ctx->device_state;\n"
                 "    if (!st) return;\n"
                 "    if (st->api.cuCtxSetCurrent && st->cctx) st->api.cuCtxSetCurrent(st->cctx);\n"
                 "    if (st->run_k) run_cancel(st); /* a run in flight stops after its next step */\n"
                 "    if (st->stream) st->api.cuStreamSynchronize(st->stream);\n"
                 "    if (st->side) st->api.cuStreamDestroy(st->side);\n"
                 "    if (st->prof.on) {\n"
                 "        cu_prof_print(&st->prof, kernel_names, %d);\n"
                 "        for (int i = 0; i < 2; i++)\n            if (st->prof.ev[i]) st->api.cuEventDestroy(st->prof.ev[i]);\n"
                 "    }\n"
                 "    cu_graphs_clear(&st->api, &st->graphs);\n"
                 "    for (int i = 0; i < 3; i++)\n        if (st->chain_ev[i]) st->api.cuEventDestroy(st->chain_ev[i]);\n"
                 "    if (st->blas) st->api.cublasDestroy(st->blas);\n"
                 "    if (st->pinned) st->api.cuMemFreeHost(st->pinned);\n"
                 "    if (st->pinned_smp) st->api.cuMemFreeHost(st->pinned_smp);\n"
                 "    if (st->run_host) st->api.cuMemFreeHost(st->run_host);\n"
                 "    CUdeviceptr bufs[] = {st->w, st->kv, st->ws, st->inv_freq, st->d_layers, st->blas_ws};\n"
                 "    for (int i = 0; i < 6; i++)\n        if (bufs[i]) st->api.cuMemFree(bufs[i]);\n"
                 "    if (st->mod) st->api.cuModuleUnload(st->mod);\n"
                 "    if (st->stream) st->api.cuStreamDestroy(st->stream);\n"
                 "    if (st->cctx) st->api.cuDevicePrimaryCtxRelease(st->dev);\n"
                 "    cu_api_close(&st->api);\n"
                 "    free(st);\n"
                 "    ctx->device_state = NULL;\n}\n\n", c.n_fn);
    fprintf(out, "#define TRY(call, what) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \\\n"
                 "    cu_errf(err, cap, \"%%s: %%s\", what, cu_strerr(&st->api, r_)); fini(ctx); return -1; } } while (0)\n"
                 "static int init(ig_model_ctx *ctx, char *err, size_t cap) {\n"
                 "    dev_state *st = calloc(1, sizeof *st);\n"
                 "    if (!st) { cu_errf(err, cap, \"out of memory\"); return -1; }\n"
                 "    ctx->device_state = st;\n"
                 "    if (cu_api_load(&st->api, err, cap)) { fini(ctx); return -1; }\n"
                 "    CUresult r = st->api.cuInit(0);\n"
                 "    int n_dev = 0;\n"
                 "    if (r == CUDA_SUCCESS) st->api.cuDeviceGetCount(&n_dev);\n"
                 "    if (r != CUDA_SUCCESS || n_dev == 0) {\n"
                 "        cu_errf(err, cap, \"this package targets CUDA but no CUDA GPU is available (%%s)\", r ? cu_strerr(&st->api, r) : \"0 devices\");\n"
                 "        fini(ctx);\n        return -1;\n    }\n"
                 "    if (ctx->device_index < 0 || ctx->device_index >= n_dev) {\n"
                 "        cu_errf(err, cap, \"GPU %%d requested, %%d present\", ctx->device_index, n_dev);\n        fini(ctx);\n        return -1;\n    }\n"
                 "    TRY(st->api.cuDeviceGet(&st->dev, ctx->device_index), \"cuDeviceGet\");\n"
                 "    int major = 0, minor = 0;\n    char name[128] = \"?\";\n"
                 "    st->api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev);\n"
                 "    st->api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev);\n"
                 "    st->api.cuDeviceGetName(name, sizeof name, st->dev);\n"
                 "    cu_image images[%d] = {\n", n_img);
    for (int i = 0; i < n_img; i++)
        fprintf(out, "        {%d, %d, img%d, 0},\n", imgcc[i], imgptx[i], i);
    fprintf(out, "    };\n");
    for (int i = 0; i < n_img; i++) fprintf(out, "    images[%d].len = (size_t)(img%d_end - img%d);\n", i, i, i);
    fprintf(out, "    int pick = cu_pick_image(images, %d, major * 10 + minor);\n"
                 "    if (pick < 0) {\n"
                 "        cu_errf(err, cap, \"GPU %%s is sm_%%d%%d; this package holds code for %s (PTX compute_%d): recompile with --target cuda:sm_%%d%%d\",\n"
                 "                name, major, minor, major, minor);\n"
                 "        fini(ctx);\n        return -1;\n    }\n"
                 "    TRY(st->api.cuDevicePrimaryCtxRetain(&st->cctx, st->dev), \"cuDevicePrimaryCtxRetain\");\n"
                 "    TRY(st->api.cuCtxSetCurrent(st->cctx), \"cuCtxSetCurrent\");\n"
                 "    TRY(st->api.cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING), \"cuStreamCreate\");\n"
                 "    TRY(st->api.cuModuleLoadData(&st->mod, images[pick].data), \"loading the kernel image\");\n"
                 "    for (int i = 0; i < %d; i++) {\n"
                 "        CUresult rk = st->api.cuModuleGetFunction(&st->fn[i], st->mod, kernel_names[i]);\n"
                 "        if (rk != CUDA_SUCCESS) { cu_errf(err, cap, \"kernel %%s missing from the image: %%s\", kernel_names[i], cu_strerr(&st->api, rk)); fini(ctx); return -1; }\n"
                 "        st->api.cuFuncSetAttribute(st->fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 * 1024);\n"
                 "    }\n"
                 "    st->max_tokens = ctx->max_tokens;\n"
                 "    st->sync_each = getenv(\"IGNIS_CUDA_SYNC\") != NULL;\n"
                 "    const char *graphs = getenv(\"IGNIS_CUDA_GRAPHS\");\n"
                 "    st->use_graphs = !st->sync_each && !(graphs && graphs[0] == '0');\n"
                 "    const char *gt = getenv(\"IGNIS_CUDA_GEMV_TMAX\");\n"
                 "    st->gemv_tmax = gt ? atoi(gt) : 1;\n"
                 "    if (st->gemv_tmax > MV_TMAX) st->gemv_tmax = MV_TMAX;\n"
                 "    const char *pdl = getenv(\"IGNIS_CUDA_PDL\"), *mvc = getenv(\"IGNIS_CUDA_MV_CTAS_PER_SM\");\n"
                 "    st->pdl = major >= 9 && pdl && pdl[0] == '1';\n"
                 "    int n_sm = 0;\n"
                 "    st->api.cuDeviceGetAttribute(&n_sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, st->dev);\n"
                 "    st->mv_ctas = (n_sm > 0 ? n_sm : 1) * (mvc && atoi(mvc) > 0 ? atoi(mvc) : IG_MV_CTAS_PER_SM);\n"
                 "    const char *mvt = getenv(\"IGNIS_CUDA_MVT\");\n"
                 "    /* 2 tokens: faster than cuBLAS on the H200 (1B decode at 2 requests: +8%%); at 4 and 8 even with\n"
                 "     * it (3311 / 6347 against 3250 / 6350 decode tok/s), so larger batches stay on cuBLAS unless asked */\n"
                 "    st->mvt_tmax = major < 8 ? 0 : mvt ? atoi(mvt) : 2;\n"
                 "    if (st->mvt_tmax > IG_MVT_TMAX) st->mvt_tmax = IG_MVT_TMAX;\n"
                 "    if (getenv(\"IGNIS_CUDA_PROFILE\")) {\n"
                 "        st->prof.on = 1, st->use_graphs = 0;\n"
                 "        TRY(st->api.cuEventCreate(&st->prof.ev[0], 0), \"cuEventCreate\");\n"
                 "        TRY(st->api.cuEventCreate(&st->prof.ev[1], 0), \"cuEventCreate\");\n"
                 "    }\n"
                 "    st->max_pages = MAX_PAGES_PER_SEQ;\n"
                 "    size_t w_bytes = %lluull, kv_bytes = (size_t)ctx->n_pages * KV_PAGE_BYTES;\n"
                 "    size_t ws_bytes = workspace_bytes(ctx->max_tokens, 1), free_b = 0, total_b = 0;\n"
                 "    st->api.cuMemGetInfo(&free_b, &total_b);\n"
                 "    if (w_bytes + kv_bytes + ws_bytes + BLAS_WS_BYTES + (64u << 20) > free_b) {\n"
                 "        cu_errf(err, cap, \"not enough memory on %%s: weights %%.2f GB + KV cache %%.2f GB (%%d pages) + workspace %%.2f GB > %%.2f GB free; \"\n"
                 "                \"ask for fewer KV pages or tokens per step\", name, w_bytes / 1e9, kv_bytes / 1e9, ctx->n_pages, ws_bytes / 1e9, free_b / 1e9);\n"
                 "        fini(ctx);\n        return -1;\n    }\n"
                 "    TRY(st->api.cuMemAlloc(&st->w, w_bytes), \"allocating weights\");\n"
                 "    TRY(st->api.cuMemcpyHtoD(st->w, ctx->weights, w_bytes), \"copying weights\");\n"
                 "    TRY(st->api.cuMemAlloc(&st->kv, kv_bytes), \"allocating the KV cache\");\n"
                 "    TRY(st->api.cuMemsetD8(st->kv, 0, kv_bytes), \"clearing the KV cache\");\n"
                 "    TRY(st->api.cuMemAlloc(&st->ws, ws_bytes), \"allocating the workspace\");\n"
                 "    TRY(st->api.cuMemsetD8(st->ws, 0, ws_bytes), \"clearing the workspace\"); /* attention counters start at 0 */\n"
                 "    TRY(st->api.cuMemAlloc(&st->inv_freq, sizeof rope_inv_freq), \"allocating RoPE frequencies\");\n"
                 "    TRY(st->api.cuMemcpyHtoD(st->inv_freq, rope_inv_freq, sizeof rope_inv_freq), \"copying RoPE frequencies\");\n"
                 "    TRY(st->api.cuMemAllocHost((void **)&st->pinned, sizeof(int32_t) * (size_t)ctx->max_tokens * (4 + MAX_PAGES_PER_SEQ)), \"pinned staging\");\n"
                 "    TRY(st->api.cuMemAllocHost((void **)&st->pinned_smp, (sizeof(ig_fwd_sample) + sizeof(int32_t)) * (size_t)ctx->max_tokens + 2 * sizeof(int32_t)), \"pinned staging\");\n"
                 "    for (int i = 0; i < 3; i++) TRY(st->api.cuEventCreate(&st->chain_ev[i], CU_EVENT_DISABLE_TIMING), \"cuEventCreate\");\n"
                 "    const char *chain = getenv(\"IGNIS_CUDA_CHAIN\");\n"
                 "    st->chain_on = !(chain && chain[0] == '0');\n"
                 "    TRY(st->api.cuMemAllocHost((void **)&st->run_host, sizeof(int32_t) * (2 * RUN_MAX + 2)), \"pinned run slots\");\n"
                 "    memset(st->run_host, 0, sizeof(int32_t) * (2 * RUN_MAX + 2));\n"
                 "    st->run_host[RUN_MAX] = 1;\n"
                 "    TRY(st->api.cuStreamCreate(&st->side, CU_STREAM_NON_BLOCKING), \"cuStreamCreate\");\n"
                 "    TRY(st->api.cuMemHostGetDevicePointer(&st->run_dev, st->run_host, 0), \"mapping the run slots\");\n"
                 "    const char *run = getenv(\"IGNIS_CUDA_RUN\");\n"
                 "    st->run_max = run ? atoi(run) : PAGE_SIZE;\n"
                 "    if (st->run_max > RUN_MAX) st->run_max = RUN_MAX;\n"
                 "    if (st->prof.on) st->run_max = 1; /* profiles time single steps */\n"
                 "    st->run_steps = 1;\n"
                 "    if (st->api.cublasCreate(&st->blas) != CUBLAS_STATUS_SUCCESS) { cu_errf(err, cap, \"cublasCreate failed\"); fini(ctx); return -1; }\n"
                 "    st->api.cublasSetStream(st->blas, st->stream); /* (this resets the workspace: set it after) */\n"
                 "    TRY(st->api.cuMemAlloc(&st->blas_ws, BLAS_WS_BYTES), \"allocating the cuBLAS workspace\");\n"
                 "    if (st->api.cublasSetWorkspace(st->blas, (void *)(uintptr_t)st->blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS) {\n"
                 "        cu_errf(err, cap, \"cublasSetWorkspace failed\");\n        fini(ctx);\n        return -1;\n    }\n"
                 "    const char *gtm = getenv(\"IGNIS_CUDA_GRAPH_TMAX\");\n"
                 "    st->graph_tmax = gtm ? atoi(gtm) : ctx->max_tokens;\n"
                 "    {\n        WORKSPACE_CARVE(st->ws, st->max_tokens);\n        st->d_logits = d_logits;\n        st->d_cancel = dl_go + 4 * RUN_MAX;\n    }\n",
            n_img, archs, newest, c.n_fn, (unsigned long long)plan->total);
    fprintf(out, "%s    return 0;\n}\n", dl_init);

    {
        char tg[sizeof archs + 8];
        snprintf(tg, sizeof tg, "cuda-%s", archs);
        cg_emit_desc(out, hp, tg, o->compiler_version, 0, o->dtype, plan->n, archs);
    }
done:
    fclose(fw);
    free(fwd_text);
    free(buf_of);
    return st;
}
