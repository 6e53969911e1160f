/* cg_c.c — emits model.c for the CPU target (see cg.h).
 *
 * The generated file reads like hand-written code: a header naming the model and target, the
 * model's constants, one `#include` of a kernel template per distinct (op, shape, dtype), each
 * preceded by a comment naming the IR node it serves, the weight table, and a forward() that
 * loops over the decoder layers — layers share kernels and differ only in weight pointers. */
#include "cg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

static const cg_target targets[] = {
    {"avx512bf16", "cpu-x86_64-avx512bf16",
     "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni",
     IG_CPU_AVX2 | IG_CPU_AVX512F | IG_CPU_AVX512BF16 | IG_CPU_AVX512VNNI},
    {"avx512", "cpu-x86_64-avx512", "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl",
     IG_CPU_AVX2 | IG_CPU_AVX512F},
    {"avx2", "cpu-x86_64-avx2", "-mavx2 -mfma -mf16c", IG_CPU_AVX2},
    {"generic", "cpu-x86_64-generic", "", 0},
};

const cg_target *cg_target_find(const char *name) {
    size_t n = sizeof targets / sizeof targets[0];
    if (!name || !strcmp(name, "native") || !strcmp(name, "cpu")) {
        uint32_t have = rt_cpu_features();
        for (size_t i = 0; i < n; i++)
            if ((targets[i].cpu_features & have) == targets[i].cpu_features) return &targets[i];
        return &targets[n - 1];
    }
    if (!strncmp(name, "cpu:", 4)) name += 4;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, targets[i].name)) return &targets[i];
    return NULL;
}

const char *cg_target_names(void) { return "cpu (= native), cpu:avx512bf16, cpu:avx512, cpu:avx2, cpu:generic"; }

/* ---- small emit helpers */

typedef struct kinst {
    char key[256];  /* template + parameters: identical keys share one instantiation */
    char name[64];
} kinst;

typedef struct cg {
    const ir_graph *g;
    const pk_plan *plan;
    const cg_options *o;
    FILE *out;
    FILE *kern; /* kernel instantiations, emitted before forward() */
    kinst inst[64];
    int n_inst;
    int bf16;
} cg;

/* Returns the function name for a template instance, emitting it on first use. `params` is a
 * sequence of "#define X v\n" lines; `comment` names the IR node. */
static const char *instance(cg *c, const char *tpl, const char *prefix, const char *params,
                            const char *comment, const char *name_macro) {
    char key[256];
    snprintf(key, sizeof key, "%s|%s", tpl, params);
    for (int i = 0; i < c->n_inst; i++)
        if (!strcmp(c->inst[i].key, key)) return c->inst[i].name;
    kinst *k = &c->inst[c->n_inst++];
    snprintf(k->key, sizeof k->key, "%s", key);
    snprintf(k->name, sizeof k->name, "%s", prefix);
    /* make the name unique if two shapes share a prefix */
    for (int i = 0; i < c->n_inst - 1; i++)
        if (!strcmp(c->inst[i].name, k->name)) {
            snprintf(k->name, sizeof k->name, "%s_v%d", prefix, c->n_inst);
            break;
        }
    fprintf(c->kern, "\n/* %s */\n#define %s %s\n%s#include \"%s\"\n", comment, name_macro,
            k->name, params, tpl);
    return k->name;
}

static const char *dtname(int bf16) { return bf16 ? "bf16" : "f32"; }

/* Activation buffers of the step: the residual stream `x` and one buffer per other tensor. */
typedef struct buf {
    int32_t tensor; /* first tensor (layer 0 or global) using it */
    char ident[64];
    int64_t cols;
    int bf16;       /* element type */
    int rows_out;   /* 1: sized by tokens (all buffers are) */
} buf;

ig_status cg_emit_c(const ir_graph *g, const pk_plan *plan, const cg_target *t,
                    const cg_options *o, FILE *out, ig_err *err) {
    const ir_hparams *hp = &g->hp;
    cg c = {.g = g, .plan = plan, .o = o, .out = out, .bf16 = o->dtype == IG_DTYPE_BF16};
    char *kern_text = NULL;
    size_t kern_len = 0;
    c.kern = open_memstream(&kern_text, &kern_len);
    char *fwd_text = NULL;
    size_t fwd_len = 0;
    FILE *fw = open_memstream(&fwd_text, &fwd_len);
    if (!c.kern || !fw) return ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    ig_status st = IG_OK;

    cg_layout lay;
    st = cg_analyze(g, plan, &lay, err);
    if (st) goto done;
    const int32_t first_layer = lay.first_layer, last_layer = lay.last_layer, per_layer = lay.per_layer;

    int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim, HID = hp->hidden;
    int PS = o->page_size;
    size_t kv_elem = c.bf16 ? 2 : 4;
    uint64_t kv_layer_page = 2ull * KV * PS * D * kv_elem;
    int bf = c.bf16;

    /* ---- buffers */
    buf bufs[32];
    int n_bufs = 0;
    int32_t buf_of[4096];
    if (g->n_tensors > 4096) {
        st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: too many tensors");
        goto done;
    }
    for (int32_t i = 0; i < g->n_tensors; i++) buf_of[i] = -1;
    int64_t xn_cols = HID;
    uint64_t moe_tok = 0, moe_fix = 0; /* MoE scratch: bytes per token and fixed (moe.c's MO_WS_BYTES) */
    /* buffer for a tensor produced by node n in position j of the layer template (or global) */
#define NEW_BUF(tid, colsv, isbf)                                                  \
    do {                                                                          \
        buf *b_ = &bufs[n_bufs];                                                  \
        b_->tensor = (tid);                                                       \
        b_->cols = (colsv);                                                       \
        b_->bf16 = (isbf);                                                        \
        cg_act_ident(g, (tid), b_->ident, sizeof b_->ident);                         \
        for (int q_ = 0; q_ < n_bufs; q_++)                                       \
            if (!strcmp(bufs[q_].ident, b_->ident))                               \
                snprintf(b_->ident + strlen(b_->ident), 8, "_%d", n_bufs);        \
        buf_of[(tid)] = n_bufs++;                                                 \
    } while (0)

    /* ---- header */
    fprintf(out,
            "/* model.c — generated by ignis %s. Do not edit: regenerate with `ignis compile`.\n"
            " *\n"
            " * model:  %s, %d layers, hidden %d, %d heads / %d KV heads x %d, intermediate %d, "
            "vocab %d\n"
            " * target: %s (%s)\n"
            " * dtype:  weights and stored activations %s, f32 accumulation; KV cache %s, page "
            "size %d\n"
            " *\n"
            " * One forward() runs a flattened batch of tokens from many sequences (see "
            "ig_model_abi.h).\n"
            " * Kernels are instantiated once per distinct shape; layers share them. */\n",
            o->compiler_version, hp->arch, hp->n_layers, HID, H, KV, D, hp->intermediate,
            hp->vocab, t->full_name, t->cflags[0] ? t->cflags : "portable C", dtname(bf),
            dtname(bf), PS);
    fprintf(out,
            "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n"
            "#include \"ig_model_abi.h\"\n#include \"common.h\"\n\n");
    cg_emit_shape_defines(out, hp, PS, kv_layer_page);

    /* ---- the forward body (kernels are collected on the side) */
    char nm[64], params[1024], comment[512];
    fprintf(fw, "\n/* Runs one step: see ig_fwd_batch in ig_model_abi.h. */\n"
                "static int forward(const ig_model_ctx *ctx, const ig_fwd_batch *b) {\n"
                "    const int T = b->n_tokens, nth = ctx->n_threads > 0 ? ctx->n_threads : 1;\n"
                "    if (T < 1 || T > ctx->max_tokens || b->n_out < 0 || b->n_out > T || b->n_seqs < 1)\n"
                "        return -1;\n"
                "    for (int t = 0; t < T; t++) {\n"
                "        int s = b->token_seq[t], p = b->positions[t];\n"
                "        if (b->token_ids[t] < 0 || b->token_ids[t] >= VOCAB || s < 0 || s >= b->n_seqs ||\n"
                "            p < 0 || p >= MAX_CONTEXT || p / PAGE_SIZE >= b->max_pages_per_seq)\n"
                "            return -2;\n"
                "        int32_t pg = b->page_table[s * b->max_pages_per_seq + p / PAGE_SIZE];\n"
                "        if (pg < 0 || pg >= ctx->n_pages) return -3;\n"
                "    }\n"
                "    for (int i = 0; i < b->n_out; i++)\n"
                "        if (b->out_rows[i] < 0 || b->out_rows[i] >= T) return -4;\n\n"
                "    WORKSPACE_CARVE(ctx->workspace, ctx->max_tokens, nth);\n\n"
                "    /* RoPE (cos, sin) per token, angles in double precision */\n"
                "#pragma omp parallel for num_threads(nth) schedule(static)\n"
                "    for (int t = 0; t < T; t++)\n"
                "        for (int i = 0; i < HEAD_DIM / 2; i++) {\n"
                "            double a = (double)b->positions[t] * rope_inv_freq[i];\n"
                "            rope_cs[(t * (HEAD_DIM / 2) + i) * 2] = (float)cos(a);\n"
                "            rope_cs[(t * (HEAD_DIM / 2) + i) * 2 + 1] = (float)sin(a);\n"
                "        }\n");
    if (hp->rope_theta_local > 0)
        fprintf(fw, "    /* and with the sliding-window layers' theta */\n"
                    "#pragma omp parallel for num_threads(nth) schedule(static)\n"
                    "    for (int t = 0; t < T; t++)\n"
                    "        for (int i = 0; i < HEAD_DIM / 2; i++) {\n"
                    "            double a = (double)b->positions[t] * rope_inv_freq_local[i];\n"
                    "            rope_cs_local[(t * (HEAD_DIM / 2) + i) * 2] = (float)cos(a);\n"
                    "            rope_cs_local[(t * (HEAD_DIM / 2) + i) * 2 + 1] = (float)sin(a);\n"
                    "        }\n");

    int32_t resid = -1; /* the residual stream buffer */
    for (int pass = 0; pass < 3 && !st; pass++) {
        int32_t lo = pass == 0 ? 0 : pass == 1 ? first_layer : last_layer + 1;
        int32_t hi = pass == 0 ? first_layer : pass == 1 ? first_layer + per_layer : g->n_nodes;
        if (pass == 1)
            fprintf(fw, "\n    for (int l = 0; l < N_LAYERS; l++) {\n"
                        "        const int32_t *lw = layer_weights[l];\n"
                        "        const uint64_t kv_off = (uint64_t)l * KV_LAYER_PAGE_BYTES;\n");
        if (pass == 2) fprintf(fw, "\n    if (b->n_out == 0) return 0;\n");
        const char *ind = pass == 1 ? "        " : "    ";
        for (int32_t i = lo; i < hi && !st; i++) {
            const ir_node *n = &g->nodes[i];
            char lbl[96];
            const char *rows = pass == 2 ? "b->n_out" : "T";
            /* weight expression for input slot s */
            char wexpr[IR_MAX_IN][96];
            for (int s = 0; s < IR_MAX_IN; s++) {
                wexpr[s][0] = 0;
                int32_t ti = n->in[s];
                if (ti < 0 || g->tensors[ti].kind != IR_TENSOR_WEIGHT) {
                    snprintf(wexpr[s], sizeof wexpr[s], "NULL");
                    continue;
                }
                cg_weight_ref(plan, &lay, pass == 1, i, s, ti, wexpr[s], sizeof wexpr[s]);
            }
            const ir_tensor *wt = NULL;
            char inb[64] = "", outb[64] = "";
            switch (n->op) {
            case IR_OP_EMBED:
                NEW_BUF(n->out, HID, 0);
                resid = buf_of[n->out];
                snprintf(outb, sizeof outb, "%s", bufs[resid].ident);
                snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 %d\n#define EM_SCALE ((float)%.17g)\n", HID, bf,
                         hp->embed_scale > 0 ? hp->embed_scale : 1.0);
                snprintf(comment, sizeof comment, "%s: embed ids[T] -> %s[T,%d] f32, table %s [%d,%d] panels",
                         g->tensors[n->in[1]].name, cg_node_label(g, n->out, lbl, sizeof lbl), HID, dtname(bf), hp->vocab, HID);
                snprintf(nm, sizeof nm, "embed_%d", HID);
                fprintf(fw, "\n    /* %s */\n    %s(T, b->token_ids, %s, %s, nth);\n", comment,
                        instance(&c, "embed.c", nm, params, comment, "EM_NAME"), wexpr[1], outb);
                break;
            case IR_OP_GATHER_ROWS:
                NEW_BUF(n->out, HID, 0);
                fprintf(fw, "\n    /* %s: gather the rows whose logits are wanted */\n"
                            "    for (int i = 0; i < b->n_out; i++)\n"
                            "        memcpy(%s + (size_t)i * HIDDEN, %s + (size_t)b->out_rows[i] * HIDDEN, sizeof(float) * HIDDEN);\n",
                        cg_node_label(g, n->out, lbl, sizeof lbl), bufs[buf_of[n->out]].ident,
                        bufs[buf_of[n->in[0]] >= 0 ? buf_of[n->in[0]] : resid].ident);
                break;
            case IR_OP_NORM_MATMUL: {
                wt = &g->tensors[n->in[2]];
                int64_t N = wt->shape[0], K = wt->shape[1];
                int32_t src = buf_of[n->in[0]] >= 0 ? buf_of[n->in[0]] : resid;
                snprintf(inb, sizeof inb, "%s", bufs[src].ident);
                if (K > xn_cols) xn_cols = K;
                int logits = pass == 2;
                int swiglu = n->epi == IR_EPI_SWIGLU || n->epi == IR_EPI_GEGLU, geglu = n->epi == IR_EPI_GEGLU;
                int64_t out_cols = swiglu ? N / 2 : N;
                if (!logits && buf_of[n->out] < 0) NEW_BUF(n->out, out_cols, swiglu ? bf : 0);
                snprintf(outb, sizeof outb, "%s", logits ? "b->logits" : bufs[buf_of[n->out]].ident);
                snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 %d\n",
                         (long long)K, n->eps, bf);
                snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, output %s", (long long)K, n->eps, dtname(bf));
                snprintf(nm, sizeof nm, "rms_norm_%lld", (long long)K);
                const char *rn = instance(&c, "rmsnorm.c", nm, params, comment, "RN_NAME");
                snprintf(params, sizeof params,
                         "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n#define MM_XBF16 %d\n"
                         "#define MM_BIAS %d\n#define MM_EPI %s\n#define MM_YBF16 %d\n",
                         (long long)K, (long long)N, bf, bf, n->in[3] >= 0,
                         geglu ? "MM_EPI_GEGLU" : swiglu ? "MM_EPI_SWIGLU" : "MM_EPI_STORE", swiglu ? bf : 0);
                snprintf(comment, sizeof comment, "%s: matmul x[T,%lld] %s . w[%lld,%lld]^T %s%s -> [T,%lld] %s",
                         pass == 1 ? "layers.*" : wt->name, (long long)K, dtname(bf), (long long)N, (long long)K,
                         dtname(bf), geglu ? ", gate/up panels interleaved, GeGLU (tanh GELU) epilogue"
                                     : swiglu ? ", gate/up panels interleaved, SwiGLU epilogue" : "",
                         (long long)out_cols, swiglu ? dtname(bf) : "f32");
                snprintf(nm, sizeof nm, "matmul_k%lld_n%lld%s%s", (long long)K, (long long)N,
                         geglu ? "_geglu" : swiglu ? "_swiglu" : "",
                         n->in[3] >= 0 ? "_bias" : "");
                const char *mm = instance(&c, "matmul.c", nm, params, comment, "MM_NAME");
                fprintf(fw, "\n%s/* %s: norm_matmul (rms_norm fused into the %s) */\n", ind,
                        pass == 1 ? cg_node_label(g, n->out, lbl, sizeof lbl) : g->tensors[n->in[2]].name,
                        geglu ? "gate/up matmul with GeGLU" : swiglu ? "gate/up matmul with SwiGLU" : "following matmul");
                fprintf(fw, "%s%s(%s, %s, %s, xn, nth);\n", ind, rn, rows, inb, wexpr[1]);
                fprintf(fw, "%s%s(%s, xn, %s, %s, %s, nth);\n", ind, mm, rows, wexpr[2],
                        n->in[3] >= 0 ? wexpr[3] : "NULL", outb);
                break;
            }
            case IR_OP_MATMUL_EPI: {
                wt = &g->tensors[n->in[1]];
                int64_t N = wt->shape[0], K = wt->shape[1];
                if (n->epi == IR_EPI_STORE && pass == 1) { /* a layer output that a post-norm reads */
                    NEW_BUF(n->out, N, 0);
                    snprintf(params, sizeof params,
                             "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n#define MM_XBF16 %d\n"
                             "#define MM_BIAS %d\n#define MM_EPI MM_EPI_STORE\n",
                             (long long)K, (long long)N, bf, bf, n->in[2] >= 0);
                    snprintf(comment, sizeof comment, "layers.*: matmul x[T,%lld] %s . w[%lld,%lld]^T %s -> [T,%lld] f32",
                             (long long)K, dtname(bf), (long long)N, (long long)K, dtname(bf), (long long)N);
                    snprintf(nm, sizeof nm, "matmul_k%lld_n%lld%s", (long long)K, (long long)N, n->in[2] >= 0 ? "_bias" : "");
                    const char *mm = instance(&c, "matmul.c", nm, params, comment, "MM_NAME");
                    fprintf(fw, "\n%s/* %s: matmul */\n%s%s(T, %s, %s, %s, %s, nth);\n", ind,
                            cg_node_label(g, n->out, lbl, sizeof lbl), ind, mm, bufs[buf_of[n->in[0]]].ident, wexpr[1],
                            n->in[2] >= 0 ? wexpr[2] : "NULL", bufs[buf_of[n->out]].ident);
                    break;
                }
                if (n->epi != IR_EPI_ACC) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: matmul_epi without a norm must accumulate or store in a layer");
                    break;
                }
                buf_of[n->out] = resid;
                snprintf(params, sizeof params,
                         "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n#define MM_XBF16 %d\n"
                         "#define MM_BIAS %d\n#define MM_EPI MM_EPI_ACC\n",
                         (long long)K, (long long)N, bf, bf, n->in[2] >= 0);
                snprintf(comment, sizeof comment, "layers.*: matmul x[T,%lld] %s . w[%lld,%lld]^T %s, accumulated into the residual stream",
                         (long long)K, dtname(bf), (long long)N, (long long)K, dtname(bf));
                snprintf(nm, sizeof nm, "matmul_k%lld_n%lld_acc%s", (long long)K, (long long)N, n->in[2] >= 0 ? "_bias" : "");
                const char *mm = instance(&c, "matmul.c", nm, params, comment, "MM_NAME");
                fprintf(fw, "\n%s/* %s: matmul + residual add */\n%s%s(T, %s, %s, %s, %s, nth);\n", ind,
                        cg_node_label(g, n->out, lbl, sizeof lbl), ind, mm, bufs[buf_of[n->in[0]]].ident, wexpr[1],
                        n->in[2] >= 0 ? wexpr[2] : "NULL", bufs[resid].ident);
                break;
            }
            case IR_OP_RMSNORM: { /* a layer's norm read by several ops (MoE router, experts): f32 rows */
                int64_t K = g->tensors[n->in[1]].shape[0];
                if (pass != 1) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: a lone rms_norm outside a layer");
                    break;
                }
                NEW_BUF(n->out, K, 0);
                int32_t src = buf_of[n->in[0]] >= 0 ? buf_of[n->in[0]] : resid;
                snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 0\n", (long long)K, n->eps);
                snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, output f32", (long long)K, n->eps);
                snprintf(nm, sizeof nm, "rms_norm_%lld_f32", (long long)K);
                const char *rn = instance(&c, "rmsnorm.c", nm, params, comment, "RN_NAME");
                fprintf(fw, "\n%s/* %s: rms_norm */\n%s%s(T, %s, %s, %s, nth);\n", ind, cg_node_label(g, n->out, lbl, sizeof lbl),
                        ind, rn, bufs[src].ident, wexpr[1], bufs[buf_of[n->out]].ident);
                break;
            }
            case IR_OP_MOE:
            case IR_OP_MOE_SHARED: {
                int shared = n->op == IR_OP_MOE_SHARED;
                int64_t I = shared ? hp->shared_intermediate : hp->moe_intermediate;
                int E = shared ? 1 : hp->n_experts, K = shared ? 1 : hp->top_k;
                if (pass != 1 || n->epi != IR_EPI_ACC || buf_of[n->in[0]] < 0) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: %s must be a layer op added to the residual stream",
                                 ir_op_name(n->op));
                    break;
                }
                buf_of[n->out] = resid;
                uint64_t tok = 4u * (2u * HID + (uint64_t)I + (uint64_t)E) + 12u * (uint64_t)K, fix = 8u * (uint64_t)E + 256u;
                if (tok > moe_tok) moe_tok = tok;
                if (fix > moe_fix) moe_fix = fix;
                snprintf(params, sizeof params,
                         "#define MM_K %d\n#define MM_N %lld\n#define MM_WBF16 %d\n#define MM_XBF16 %d\n"
                         "#define MM_BIAS 0\n#define MM_EPI MM_EPI_SWIGLU\n#define MM_YBF16 %d\n", HID, (long long)(2 * I), bf, bf, bf);
                snprintf(comment, sizeof comment, "layers.*: one %s's gate/up matmul x[n,%d] . w[%lld,%d]^T %s, SwiGLU -> [n,%lld]",
                         shared ? "shared expert" : "expert", HID, (long long)(2 * I), HID, dtname(bf), (long long)I);
                snprintf(nm, sizeof nm, "matmul_k%d_n%lld_swiglu", HID, (long long)(2 * I));
                const char *gu = instance(&c, "matmul.c", nm, params, comment, "MM_NAME");
                snprintf(params, sizeof params,
                         "#define MM_K %lld\n#define MM_N %d\n#define MM_WBF16 %d\n#define MM_XBF16 %d\n"
                         "#define MM_BIAS 0\n#define MM_EPI MM_EPI_STORE\n", (long long)I, HID, bf, bf);
                snprintf(comment, sizeof comment, "layers.*: one %s's down matmul [n,%lld] . w[%d,%lld]^T %s -> [n,%d] f32",
                         shared ? "shared expert" : "expert", (long long)I, HID, (long long)I, dtname(bf), HID);
                snprintf(nm, sizeof nm, "matmul_k%lld_n%d", (long long)I, HID);
                const char *dn = instance(&c, "matmul.c", nm, params, comment, "MM_NAME");
                snprintf(params, sizeof params,
                         "#define MO_SHARED %d\n#define MO_D %d\n#define MO_E %d\n#define MO_TOPK %d\n#define MO_I %lld\n"
                         "#define MO_NORM %d\n#define MO_XBF16 %d\n#define MO_WBF16 %d\n#define MO_GU %s\n#define MO_DN %s\n",
                         shared, HID, E, K, (long long)I, hp->norm_topk, bf, bf, gu, dn);
                if (shared)
                    snprintf(comment, sizeof comment, "layers.*: shared expert (%lld), scaled by sigmoid(x . gate), added to the residual stream",
                             (long long)I);
                else
                    snprintf(comment, sizeof comment, "layers.*: mixture of %d experts (%lld), top-%d of the f32 router softmax%s, "
                             "tokens grouped by expert, added to the residual stream", E, (long long)I, K,
                             hp->norm_topk ? " renormalized" : "");
                if (shared) snprintf(nm, sizeof nm, "shared_expert_i%lld", (long long)I);
                else snprintf(nm, sizeof nm, "moe_e%d_k%d_i%lld", E, K, (long long)I);
                const char *mo = instance(&c, "moe.c", nm, params, comment, "MO_NAME");
                fprintf(fw, "\n%s/* %s: %s */\n%s%s(T, %s, %s, %s, %s, %s, moe_ws, nth);\n", ind,
                        cg_node_label(g, n->out, lbl, sizeof lbl), ir_op_name(n->op), ind, mo, bufs[buf_of[n->in[0]]].ident,
                        wexpr[1], wexpr[2], wexpr[3], bufs[resid].ident);
                break;
            }
            case IR_OP_NORM_ADD: {
                int64_t K = g->tensors[n->in[1]].shape[1];
                if (pass != 1 || buf_of[n->in[1]] < 0) {
                    st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: norm_add outside a layer or of an unstored tensor");
                    break;
                }
                buf_of[n->out] = resid;
                snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_ADD 1\n", (long long)K, n->eps);
                snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, added to the residual stream", (long long)K, n->eps);
                snprintf(nm, sizeof nm, "rms_norm_add_%lld", (long long)K);
                const char *rn = instance(&c, "rmsnorm.c", nm, params, comment, "RN_NAME");
                fprintf(fw, "\n%s/* %s: norm_add (post-norm, then residual add) */\n%s%s(T, %s, %s, %s, nth);\n", ind,
                        cg_node_label(g, n->out, lbl, sizeof lbl), ind, rn, bufs[buf_of[n->in[1]]].ident, wexpr[2],
                        bufs[resid].ident);
                break;
            }
            case IR_OP_ROPE_KV: {
                NEW_BUF(n->out, (int64_t)H * D, 0);
                int qk = n->in[1] >= 0;
                snprintf(params, sizeof params,
                         "#define RK_H %d\n#define RK_KV %d\n#define RK_D %d\n#define RK_PS %d\n"
                         "#define RK_PAGE_BYTES KV_PAGE_BYTES\n#define RK_KVBF16 %d\n#define RK_QKNORM %d\n#define RK_EPS %.9gf\n"
                         "#define RK_ROT %d\n#define RK_INTERLEAVE %d\n",
                         H, KV, D, PS, bf, qk, qk ? n->eps : 1e-6, hp->rope_dim ? hp->rope_dim : D, hp->rope_interleaved);
                snprintf(comment, sizeof comment, "layers.*: %srope on q[T,%d] and k[T,%d] (head_dim %d), k/v written to the %s KV pages",
                         qk ? "q/k rms_norm, " : "", H * D, KV * D, D, dtname(bf));
                snprintf(nm, sizeof nm, "rope_kv_h%d_kv%d_d%d", H, KV, D);
                const char *rk = instance(&c, "rope_kv.c", nm, params, comment, "RK_NAME");
                fprintf(fw, "\n%s/* %s: rope_kv */\n%s%s(T, %s, %s, %s, %s, %s, ctx->kv_pool, kv_off,\n"
                            "%s    b->positions, b->token_seq, b->page_table, b->max_pages_per_seq, nth);\n",
                        ind, cg_node_label(g, n->out, lbl, sizeof lbl), ind, rk, bufs[buf_of[n->in[0]]].ident,
                        hp->rope_theta_local > 0 ? "layer_sliding[l] ? rope_cs_local : rope_cs" : "rope_cs",
                        qk ? wexpr[1] : "NULL", qk ? wexpr[2] : "NULL", bufs[buf_of[n->out]].ident, ind);
                break;
            }
            case IR_OP_ATTENTION: {
                NEW_BUF(n->out, (int64_t)H * D, bf);
                /* sliding-window layers get their own instance (AT_WINDOW), chosen per layer */
                int nsl = 0;
                for (int L = 0; L < hp->n_layers && L < IR_MAX_LAYER_TYPES; L++) nsl += hp->layer_sliding[L];
                const char *at[2] = {NULL, NULL}; /* [0] global, [1] sliding */
                for (int sl = 0; sl < 2; sl++) {
                    if ((sl ? nsl : hp->n_layers - nsl) == 0) continue;
                    int win = sl ? hp->sliding_window : 0;
                    snprintf(params, sizeof params,
                             "#define AT_H %d\n#define AT_KV %d\n#define AT_D %d\n#define AT_PS %d\n"
                             "#define AT_PAGE_BYTES KV_PAGE_BYTES\n#define AT_KVBF16 %d\n#define AT_OBF16 %d\n"
                             "#define AT_SCALE %.9gf\n#define AT_MAXCTX MAX_CONTEXT\n#define AT_WINDOW %d\n",
                             H, KV, D, PS, bf, bf, hp->attn_scale > 0 ? hp->attn_scale : 1.0 / sqrt((double)D), win);
                    snprintf(comment, sizeof comment, "layers.*: causal attention%s, %d heads over %d KV heads x %d, paged KV %s -> [T,%d] %s",
                             win ? " over a sliding window" : "", H, KV, D, dtname(bf), H * D, dtname(bf));
                    snprintf(nm, sizeof nm, "attention_h%d_kv%d_d%d%s", H, KV, D, win ? "_window" : "");
                    at[sl] = instance(&c, "attention.c", nm, params, comment, "AT_NAME");
                }
                char fn[160];
                if (at[0] && at[1]) snprintf(fn, sizeof fn, "(layer_sliding[l] ? %s : %s)", at[1], at[0]);
                else snprintf(fn, sizeof fn, "%s", at[0] ? at[0] : at[1]);
                fprintf(fw, "\n%s/* %s: attention */\n%s%s(T, %s, ctx->kv_pool, kv_off, b->positions, b->token_seq,\n"
                            "%s    b->page_table, b->max_pages_per_seq, %s, attn_scratch, nth);\n",
                        ind, cg_node_label(g, n->out, lbl, sizeof lbl), ind, fn, bufs[buf_of[n->in[0]]].ident, ind,
                        bufs[buf_of[n->out]].ident);
                break;
            }
            default:
                st = ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: cannot lower op %s", ir_op_name(n->op));
            }
        }
        if (pass == 1) fprintf(fw, "    }\n");
    }
    if (st) goto done;
    fprintf(fw, "    return 0;\n}\n");
    fflush(c.kern);
    fflush(fw);

    /* ---- kernels */
    fprintf(out, "\n/* ---- kernels: one instantiation per distinct shape */\n%s", kern_text);

    /* ---- weights */
    cg_emit_weight_list(out, plan);
    fprintf(out, "#define W(i) ((const void *)(ctx->weights + weights[i].offset))\n\n");
    cg_emit_layer_table(out, g, plan, &lay);
    if (hp->sliding_window > 0 || hp->rope_theta_local > 0) {
        fprintf(out, "\n/* per layer: 1 = sliding-window attention (SLIDING_WINDOW keys)%s */\n"
                     "#define SLIDING_WINDOW %d\nstatic const uint8_t layer_sliding[N_LAYERS] = {",
                hp->rope_theta_local > 0 ? " with the local RoPE theta" : "", hp->sliding_window);
        for (int L = 0; L < hp->n_layers; L++)
            fprintf(out, "%s%d", L ? ", " : "", L < IR_MAX_LAYER_TYPES ? hp->layer_sliding[L] : 0);
        fprintf(out, "};\n");
    }
    /* ---- RoPE frequencies */
    st = cg_emit_rope_table(out, hp, err);
    if (st) goto done;

    /* ---- workspace */
    fprintf(out, "\n/* ---- workspace: activation buffers for up to max_tokens tokens, 64-byte aligned */\n"
                 "#define WS_ALIGN(n) (((n) + 63) & ~(uint64_t)63)\n"
                 "#define WORKSPACE_LIST(X, T, NTH) \\\n"
                 "    X(float, rope_cs, (uint64_t)(T) * HEAD_DIM) \\\n"
                 "%s"
                 "    X(float, attn_scratch, (uint64_t)(NTH) * (MAX_CONTEXT + 2 * HEAD_DIM)) \\\n"
                 "    X(uint8_t, moe_ws, (uint64_t)(T) * %lluu + %lluu) \\\n"
                 "    X(%s, xn, (uint64_t)(T) * %lld)",
                 hp->rope_theta_local > 0 ? "    X(float, rope_cs_local, (uint64_t)(T) * HEAD_DIM) \\\n" : "",
                 (unsigned long long)moe_tok, (unsigned long long)moe_fix,
                 bf ? "uint16_t" : "float", (long long)xn_cols);
    for (int i = 0; i < n_bufs; i++)
        fprintf(out, " \\\n    X(%s, %s, (uint64_t)(T) * %lld)", bufs[i].bf16 ? "uint16_t" : "float",
                bufs[i].ident, (long long)bufs[i].cols);
    fprintf(out, "\n\nstatic uint64_t workspace_bytes(int32_t max_tokens, int32_t n_threads) {\n"
                 "    uint64_t n = 0;\n"
                 "#define X(type, name, count) n += WS_ALIGN(sizeof(type) * (count));\n"
                 "    WORKSPACE_LIST(X, max_tokens, n_threads)\n#undef X\n"
                 "    return n;\n}\n\n"
                 "#define WORKSPACE_CARVE(base, max_t, nth_) \\\n"
                 "    uint8_t *ws_ = (base); \\\n"
                 "    WORKSPACE_LIST(WS_CARVE_ONE, max_t, nth_)\n"
                 "#define WS_CARVE_ONE(type, name, count) \\\n"
                 "    type *name = (type *)ws_; ws_ += WS_ALIGN(sizeof(type) * (count));\n");

    fprintf(out, "%s", fwd_text);

    cg_emit_desc(out, hp, t->full_name, o->compiler_version, t->cpu_features, bf ? IG_DTYPE_BF16 : IG_DTYPE_F32, plan->n, NULL);
done:
    fclose(c.kern);
    fclose(fw);
    free(kern_text);
    free(fwd_text);
    return st;
}
