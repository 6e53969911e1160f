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
#include "tuning.h"

const cg_target *cg_target_find(const char *name) {
    size_t n;
    const cg_target *targets = rt_cpu_target_table(&n);
    if (!name || !strcmp(name, "native") || !strcmp(name, "cpu")) {
        uint32_t have = rt_cpu_features();
        const cg_target *last = NULL;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(targets[i].arch, rt_host_arch())) continue;
            last = &targets[i];
            if ((targets[i].cpu_features & have) == targets[i].cpu_features) return last;
        }
        return last;
    }
    /* the x86-64 psABI levels: v3 (AVX2, FMA, F16C) is avx2, v4 (AVX-512 F/BW/DQ/VL) avx512 */
    if (!strcmp(name, "cpu:x86-64-v3") || !strcmp(name, "x86-64-v3")) name = "cpu:avx2";
    if (!strcmp(name, "cpu:x86-64-v4") || !strcmp(name, "x86-64-v4")) name = "cpu:avx512";
    int bare = strncmp(name, "cpu:", 4) != 0; /* "avx2" is "cpu:avx2" */
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, targets[i].name + (bare ? 4 : 0))) return &targets[i];
    return NULL;
}

const char *cg_target_names(void) {
    return "cpu (= native), cpu:amx, cpu:avx512bf16, cpu:avx512 (= cpu:x86-64-v4), cpu:avx2 (= cpu:x86-64-v3), cpu:generic, cpu:aarch64, cpu:aarch64+dotprod, "
           "cpu:aarch64+bf16, cpu:aarch64+sve, cpu:aarch64+sve+bf16";
}

/* ---- lowering: one function per op (cpu_lowering below) */

typedef struct cg {
    const ir_graph *g;
    const pk_plan *plan;
    const cg_options *o;
    cg_layout lay;
    const cg_format *wf; /* weights */
    const cg_format *af; /* stored activations */
    const cg_kv_format *kvf; /* the KV cache */
    FILE *kern;          /* kernel instantiations, emitted before forward() */
    FILE *fw;            /* forward()'s body */
    cg_insts in;
    cg_bufs bufs;
    int32_t resid;       /* the residual stream's buffer */
    int64_t xn_cols;     /* width of the normed-x scratch buffer */
    uint64_t moe_tok, moe_fix; /* MoE scratch: bytes per token and fixed (moe.c's MO_WS_BYTES) */
} cg;

/* What the lowering of one node sees: where it sits (pass 0: before the layers, 1: the layer
 * loop, 2: the logits block), its row count expression, indent and weight expressions. */
typedef struct node_ctx {
    int32_t i;
    const ir_node *n;
    int pass;
    const char *rows, *ind;
    char wexpr[IR_MAX_IN][96];
} node_ctx;

static const char *instance(cg *c, const char *tpl, const char *prefix, const char *name_macro, const char *params,
                            const char *comment) {
    return cg_instance(&c->in, c->kern, tpl, prefix, name_macro, params, comment);
}

/* Gives tensor t a new buffer and copies its identifier to id[64]; 0 after an allocation failure.
 * (Identifiers are copied: the buffer table may move as it grows.) */
static int new_buf(cg *c, int32_t t, int64_t cols, int is16, char *id) {
    int b = cg_buf_new(&c->bufs, c->g, t, cols, is16);
    if (b < 0) return 0;
    snprintf(id, 64, "%s", c->bufs.v[b].ident);
    return 1;
}

/* Copies the identifier of the buffer tensor t lives in to id[64] (`or_resid`: the residual
 * stream when t has none of its own; t = -1: the residual stream). 0 when there is none (a graph
 * that reads a tensor no node wrote). */
static int buf_of(const cg *c, int32_t t, int or_resid, char *id) {
    int32_t b = t >= 0 && t < c->g->n_tensors ? c->bufs.buf_of[t] : -1;
    if (b < 0 && or_resid) b = c->resid;
    if (b < 0) return 0;
    snprintf(id, 64, "%s", c->bufs.v[b].ident);
    return 1;
}

/* How weight tensor t is stored: its format, and for quantized ones the templates' extra
 * parameters (prefix "MM" or "EM": "#define MM_WQ 4\n#define MM_WG 128\n") into qp, a
 * name suffix ("_q4g128") into sfx and a name for comments ("q4g128") into nm; all empty for floats. */
static const cg_format *weight_fmt(const cg *c, int32_t t, const char *prefix, char *qp, size_t qcap, char *sfx,
                                   char *nm) {
    int32_t k = pk_find(c->plan, t);
    const pk_entry *e = k >= 0 ? &c->plan->e[k] : NULL;
    const cg_format *f = e ? cg_format_of(e->dtype) : NULL;
    qp[0] = sfx[0] = 0;
    if (!f || !f->wq) {
        snprintf(nm, 32, "%s", c->wf->name);
        return c->wf;
    }
    if (e->group) {
        snprintf(qp, qcap, "#define %s_WQ %d\n#define %s_WG %d\n", prefix, f->wq, prefix, (int)e->group);
        snprintf(nm, 32, "%s%d", f->name, (int)e->group);
    } else {
        snprintf(qp, qcap, "#define %s_WQ %d\n", prefix, f->wq);
        snprintf(nm, 32, "%s", f->name);
    }
    snprintf(sfx, 32, "_%s", nm);
    return f;
}

static ig_status no_buf(const cg *c, const node_ctx *x, ig_err *err) {
    if (c->bufs.failed || c->in.failed) return ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    return ig_fail(err, IG_ERR_INVALID, "codegen: node %d (%s) reads a tensor no earlier node wrote", x->i,
                   ir_op_name(x->n->op));
}

static ig_status lower_embed(cg *c, node_ctx *x, ig_err *err) {
    const ir_graph *g = c->g;
    int HID = g->hp.hidden;
    char params[256], comment[512], nm[64], lbl[96];
    char out[64];
    if (!new_buf(c, x->n->out, HID, 0, out)) return no_buf(c, x, err);
    c->resid = c->bufs.buf_of[x->n->out];
    char qp[96], sfx[32], wname[32];
    const cg_format *wf = weight_fmt(c, x->n->in[1], "EM", qp, sizeof qp, sfx, wname);
    int tp = g->hp.tp > 1;
    snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 %d\n#define EM_SCALE ((float)%.17g)\n%s%s", HID,
             wf->is16, g->hp.embed_scale > 0 ? g->hp.embed_scale : 1.0, qp, tp ? "#define EM_ROWS TP_VOCAB\n" : "");
    snprintf(comment, sizeof comment, "%s: embed ids[T] -> %s[T,%d] f32, table %s [%d,%d] panels", g->tensors[x->n->in[1]].name,
             cg_node_label(g, x->n->out, lbl, sizeof lbl), HID, wname, g->hp.vocab, HID);
    snprintf(nm, sizeof nm, "embed_%d%s", HID, sfx);
    const char *em = instance(c, "embed.c", nm, "EM_NAME", params, comment);
    if (!em) return no_buf(c, x, err);
    fprintf(c->fw, "\n    /* %s%s */\n    %s(T, b->token_ids, %s, %s, nth%s);\n", comment,
            tp ? ", this rank's rows of the vocabulary" : "", em, x->wexpr[1], out, tp ? ", ctx->comm->rank * TP_VOCAB" : "");
    return IG_OK;
}

static ig_status lower_gather_rows(cg *c, node_ctx *x, ig_err *err) {
    char lbl[96];
    char out[64], in[64];
    if (!new_buf(c, x->n->out, c->g->hp.hidden, 0, out) || !buf_of(c, x->n->in[0], 1, in)) return no_buf(c, x, err);
    fprintf(c->fw, "\n    /* %s: gather the rows whose logits are wanted */\n"
                   "    for (int i = 0; i < b->n_out; i++)\n"
                   "        memcpy(%s + (size_t)i * HIDDEN, %s + (size_t)b->out_rows[i] * HIDDEN, sizeof(float) * HIDDEN);\n",
            cg_node_label(c->g, x->n->out, lbl, sizeof lbl), out, in);
    return IG_OK;
}

static ig_status lower_norm_matmul(cg *c, node_ctx *x, ig_err *err) {
    const ir_graph *g = c->g;
    const ir_node *n = x->n;
    const ir_tensor *wt = &g->tensors[n->in[2]];
    const cg_format *af = c->af;
    int64_t N = wt->shape[0], K = wt->shape[1];
    char params[1024], comment[512], nm[64], lbl[96], qp[96], sfx[32], wname[32];
    const cg_format *wf = weight_fmt(c, n->in[2], "MM", qp, sizeof qp, sfx, wname);
    char in[64], out[64] = "b->logits";
    if (!buf_of(c, n->in[0], 1, in)) return no_buf(c, x, err);
    if (K > c->xn_cols) c->xn_cols = K;
    int logits = x->pass == 2 && g->hp.tp <= 1, geglu = n->epi == IR_EPI_GEGLU, swiglu = n->epi == IR_EPI_SWIGLU || geglu,
        bias = n->in[3] >= 0;
    int64_t out_cols = swiglu ? N / 2 : N;
    if (!logits && !buf_of(c, n->out, 0, out) && !new_buf(c, n->out, out_cols, swiglu ? af->is16 : 0, out))
        return no_buf(c, x, err);
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 %d\n", (long long)K, n->eps,
             af->is16);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, output %s", (long long)K, n->eps, af->name);
    snprintf(nm, sizeof nm, "rms_norm_%lld", (long long)K);
    const char *rn = instance(c, "rmsnorm.c", nm, "RN_NAME", params, comment);
    snprintf(params, sizeof params,
             "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n%s#define MM_XBF16 %d\n"
             "#define MM_BIAS %d\n#define MM_EPI %s\n#define MM_YBF16 %d\n",
             (long long)K, (long long)N, wf->is16, qp, af->is16, bias,
             geglu ? "MM_EPI_GEGLU" : swiglu ? "MM_EPI_SWIGLU" : "MM_EPI_STORE",
             swiglu ? af->is16 : 0);
    snprintf(comment, sizeof comment, "%s: matmul x[T,%lld] %s . w[%lld,%lld]^T %s%s -> [T,%lld] %s",
             x->pass == 1 ? "layers.*" : wt->name, (long long)K, af->name, (long long)N, (long long)K, wname,
             geglu    ? ", gate/up panels interleaved, GeGLU (tanh GELU) epilogue"
             : swiglu ? ", gate/up panels interleaved, SwiGLU epilogue"
                      : "",
             (long long)out_cols, swiglu ? af->name : "f32");
    snprintf(nm, sizeof nm, "matmul_k%lld_n%lld%s%s%s", (long long)K, (long long)N, geglu ? "_geglu" : swiglu ? "_swiglu" : "",
             bias ? "_bias" : "", sfx);
    const char *mm = instance(c, "matmul.c", nm, "MM_NAME", params, comment);
    if (!rn || !mm) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: norm_matmul (rms_norm fused into the %s) */\n", x->ind,
            x->pass == 1 ? cg_node_label(g, n->out, lbl, sizeof lbl) : wt->name,
            geglu ? "gate/up matmul with GeGLU" : swiglu ? "gate/up matmul with SwiGLU" : "following matmul");
    fprintf(c->fw, "%s%s(%s, %s, %s, xn, nth);\n", x->ind, rn, x->rows, in, x->wexpr[1]);
    fprintf(c->fw, "%s%s(%s, xn, %s, %s, %s, nth);\n", x->ind, mm, x->rows, x->wexpr[2], bias ? x->wexpr[3] : "NULL", out);
    return IG_OK;
}

/* A layer's matmul stored in f32 (its output goes through a post-norm: GLM-4, Gemma 3). */
static ig_status lower_matmul_store(cg *c, node_ctx *x, ig_err *err) {
    const ir_graph *g = c->g;
    const ir_node *n = x->n;
    const ir_tensor *wt = &g->tensors[n->in[1]];
    const cg_format *af = c->af;
    int64_t N = wt->shape[0], K = wt->shape[1];
    char params[1024], comment[512], nm[64], lbl[96], in[64], out[64], qp[96], sfx[32], wname[32];
    const cg_format *wf = weight_fmt(c, n->in[1], "MM", qp, sizeof qp, sfx, wname);
    if (!buf_of(c, n->in[0], 0, in) || !new_buf(c, n->out, N, 0, out)) return no_buf(c, x, err);
    int bias = n->in[2] >= 0;
    snprintf(params, sizeof params,
             "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n%s#define MM_XBF16 %d\n"
             "#define MM_BIAS %d\n#define MM_EPI MM_EPI_STORE\n",
             (long long)K, (long long)N, wf->is16, qp, af->is16, bias);
    snprintf(comment, sizeof comment, "layers.*: matmul x[T,%lld] %s . w[%lld,%lld]^T %s -> [T,%lld] f32", (long long)K,
             af->name, (long long)N, (long long)K, wname, (long long)N);
    snprintf(nm, sizeof nm, "matmul_k%lld_n%lld%s%s", (long long)K, (long long)N, bias ? "_bias" : "", sfx);
    const char *mm = instance(c, "matmul.c", nm, "MM_NAME", params, comment);
    if (!mm) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: matmul */\n%s%s(T, %s, %s, %s, %s, nth);\n", x->ind, cg_node_label(g, n->out, lbl, sizeof lbl),
            x->ind, mm, in, x->wexpr[1], bias ? x->wexpr[2] : "NULL", out);
    return IG_OK;
}

/* A layer's RMSNorm whose output several ops read (the MoE router and experts): f32 rows. */
static ig_status lower_rmsnorm(cg *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    int64_t K = c->g->tensors[n->in[1]].shape[0];
    char params[256], comment[256], nm[64], lbl[96], in[64], out[64];
    if (x->pass != 1) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: a lone rms_norm outside a layer");
    if (!buf_of(c, n->in[0], 1, in) || !new_buf(c, n->out, K, 0, out)) return no_buf(c, x, err);
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 0\n", (long long)K, n->eps);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, output f32", (long long)K, n->eps);
    snprintf(nm, sizeof nm, "rms_norm_%lld_f32", (long long)K);
    const char *rn = instance(c, "rmsnorm.c", nm, "RN_NAME", params, comment);
    if (!rn) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: rms_norm */\n%s%s(T, %s, %s, %s, nth);\n", x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl),
            x->ind, rn, in, x->wexpr[1], out);
    return IG_OK;
}

/* Post-norm into the residual stream: resid += rms_norm(y) * gamma. */
static ig_status lower_norm_add(cg *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    int64_t K = c->g->tensors[n->in[1]].shape[1];
    char params[256], comment[256], nm[64], lbl[96], in[64], res[64];
    if (x->pass != 1) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: norm_add outside a layer");
    if (!buf_of(c, n->in[1], 0, in) || !buf_of(c, -1, 1, res)) return no_buf(c, x, err);
    c->bufs.buf_of[n->out] = c->resid;
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_ADD 1\n", (long long)K, n->eps);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, added to the residual stream", (long long)K, n->eps);
    snprintf(nm, sizeof nm, "rms_norm_add_%lld", (long long)K);
    const char *rn = instance(c, "rmsnorm.c", nm, "RN_NAME", params, comment);
    if (!rn) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: norm_add (post-norm, then residual add) */\n%s%s(T, %s, %s, %s, nth);\n", x->ind,
            cg_node_label(c->g, n->out, lbl, sizeof lbl), x->ind, rn, in, x->wexpr[2], res);
    return IG_OK;
}

/* The experts' block (MOE: router, top-k, expert-grouped GEMMs) or the shared expert
 * (MOE_SHARED), added to the residual stream (epi ACC), or, in a tensor-parallel shard, stored
 * as this rank's partial sum for the all-reduce (epi STORE: moe.c adds into a zeroed buffer):
 * moe.c over two matmul.c instances. */
/* Steps of at most this many tokens run moe.c's pair path (one OpenMP region, a GEMV per
 * (token, expert) pair); longer ones its expert-grouped GEMMs. */
#define CG_MOE_PAIR_TMAX 8
/* moe.c's MO_QROW_MAX: bytes of one row of K columns prepared for a quantized expert's kernels */
static uint64_t cg_moe_qrow_max(int64_t K) { return 4u * (uint64_t)K + 8u * (((uint64_t)K + 15u) / 16u) + 256u; }

static ig_status lower_moe(cg *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    const int HID = hp->hidden, w16 = c->wf->is16, a16 = c->af->is16, shared = n->op == IR_OP_MOE_SHARED;
    const int64_t I = shared ? hp->shared_intermediate : hp->moe_intermediate;
    const int E = shared ? 1 : hp->n_experts, K = shared ? 1 : hp->top_k;
    char params[1024], comment[512], nm[64], lbl[96], in[64], res[64];
    const int acc = n->epi == IR_EPI_ACC;
    if (x->pass != 1 || (!acc && n->epi != IR_EPI_STORE))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: %s must be a layer op added to the residual stream", ir_op_name(n->op));
    if (!buf_of(c, n->in[0], 0, in)) return no_buf(c, x, err);
    if (acc) {
        if (!buf_of(c, -1, 1, res)) return no_buf(c, x, err);
        c->bufs.buf_of[n->out] = c->resid;
    } else if (!new_buf(c, n->out, HID, 0, res)) {
        return no_buf(c, x, err);
    }
    /* the experts' formats (quantized panels or the float weight type), for the matmul instances
     * (MM_WQ, MM_WG) and for moe.c (MO_WQ, MO_WG: gate/up; MO_DN_WQ, MO_DN_WG: down) */
    char gq[96], gsx[32], gnm[32], dq[96], dsx[32], dnm[32], mq[192], scratch[96];
    const cg_format *gf = weight_fmt(c, n->in[2], "MM", gq, sizeof gq, gsx, gnm);
    const cg_format *df = weight_fmt(c, n->in[3], "MM", dq, sizeof dq, dsx, dnm);
    weight_fmt(c, n->in[2], "MO", mq, sizeof mq, scratch, scratch + 32);
    weight_fmt(c, n->in[3], "MO_DN", mq + strlen(mq), sizeof mq - strlen(mq), scratch, scratch + 32);
    const int quant = gf->wq || df->wq;
    /* moe.c's MO_WS_BYTES per token and fixed, plus its pair path's MO_PAIR_WS (and MO_PAIR_QWS
     * with quantized experts: MO_QROW_MAX bytes per prepared row) and an alignment */
    uint64_t tok = 4u * (2u * (uint64_t)HID + (uint64_t)I + (uint64_t)E) + 12u * (uint64_t)K, fix = 8u * (uint64_t)E + 256u;
    fix += (uint64_t)CG_MOE_PAIR_TMAX * (4u * (uint64_t)K * (uint64_t)I + 4u * (uint64_t)E) + 2u * 64u + 64u;
    if (quant) fix += (uint64_t)CG_MOE_PAIR_TMAX * (cg_moe_qrow_max(HID) + (uint64_t)K * cg_moe_qrow_max(I));
    if (tok > c->moe_tok) c->moe_tok = tok;
    if (fix > c->moe_fix) c->moe_fix = fix;
    const char *what = shared ? "shared expert" : "expert";
    snprintf(params, sizeof params,
             "#define MM_K %d\n#define MM_N %lld\n#define MM_WBF16 %d\n%s#define MM_XBF16 %d\n"
             "#define MM_BIAS 0\n#define MM_EPI MM_EPI_SWIGLU\n#define MM_YBF16 %d\n", HID, (long long)(2 * I), w16, gq, a16, a16);
    snprintf(comment, sizeof comment, "layers.*: one %s's gate/up matmul x[n,%d] . w[%lld,%d]^T %s, SwiGLU -> [n,%lld]", what,
             HID, (long long)(2 * I), HID, gnm, (long long)I);
    snprintf(nm, sizeof nm, "matmul_k%d_n%lld_swiglu%s", HID, (long long)(2 * I), gsx);
    const char *gu = instance(c, "matmul.c", nm, "MM_NAME", params, comment);
    snprintf(params, sizeof params,
             "#define MM_K %lld\n#define MM_N %d\n#define MM_WBF16 %d\n%s#define MM_XBF16 %d\n"
             "#define MM_BIAS 0\n#define MM_EPI MM_EPI_STORE\n", (long long)I, HID, w16, dq, a16);
    snprintf(comment, sizeof comment, "layers.*: one %s's down matmul [n,%lld] . w[%d,%lld]^T %s -> [n,%d] f32", what,
             (long long)I, HID, (long long)I, dnm, HID);
    snprintf(nm, sizeof nm, "matmul_k%lld_n%d%s", (long long)I, HID, dsx);
    const char *dn = instance(c, "matmul.c", nm, "MM_NAME", params, comment);
    if (!gu || !dn) return no_buf(c, x, err);
    snprintf(params, sizeof params,
             "#define MO_SHARED %d\n#define MO_D %d\n#define MO_E %d\n#define MO_TOPK %d\n#define MO_I %lld\n"
             "#define MO_NORM %d\n#define MO_XBF16 %d\n#define MO_WBF16 %d\n%s#define MO_GU %s\n#define MO_DN %s\n"
             "#define MO_PAIR_TMAX %d\n",
             shared, HID, E, K, (long long)I, hp->norm_topk, a16, w16, mq, gu, dn, CG_MOE_PAIR_TMAX);
    const char *into = acc ? "added to the residual stream" : "summed into a zeroed buffer (this rank's partial sum)";
    if (shared)
        snprintf(comment, sizeof comment, "layers.*: shared expert (%lld, %s / %s), scaled by sigmoid(x . gate), %s", (long long)I,
                 gnm, dnm, into);
    else
        snprintf(comment, sizeof comment, "layers.*: mixture of %d experts (%lld, %s / %s), top-%d of the f32 router softmax%s, "
                 "tokens grouped by expert, %s", E, (long long)I, gnm, dnm, K, hp->norm_topk ? " renormalized" : "", into);
    if (shared) snprintf(nm, sizeof nm, "shared_expert_i%lld%s", (long long)I, gsx);
    else snprintf(nm, sizeof nm, "moe_e%d_k%d_i%lld%s", E, K, (long long)I, gsx);
    const char *mo = instance(c, "moe.c", nm, "MO_NAME", params, comment);
    if (!mo) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: %s%s */\n", x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), ir_op_name(n->op),
            acc ? "" : ", this rank's partial sum");
    if (!acc) fprintf(c->fw, "%smemset(%s, 0, sizeof(float) * (size_t)T * %d);\n", x->ind, res, HID);
    fprintf(c->fw, "%s%s(T, %s, %s, %s, %s, %s, moe_ws, nth);\n", x->ind, mo, in, x->wexpr[1], x->wexpr[2], x->wexpr[3], res);
    return IG_OK;
}

static ig_status lower_matmul_epi(cg *c, node_ctx *x, ig_err *err) {
    const ir_graph *g = c->g;
    const ir_node *n = x->n;
    const ir_tensor *wt = &g->tensors[n->in[1]];
    const cg_format *af = c->af;
    int64_t N = wt->shape[0], K = wt->shape[1];
    char params[1024], comment[512], nm[64], lbl[96], qp[96], sfx[32], wname[32];
    if (n->epi == IR_EPI_STORE && x->pass == 1) return lower_matmul_store(c, x, err);
    const cg_format *wf = weight_fmt(c, n->in[1], "MM", qp, sizeof qp, sfx, wname);
    if (n->epi != IR_EPI_ACC)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: matmul_epi without a norm must accumulate or store in a layer");
    char in[64], res[64];
    if (!buf_of(c, n->in[0], 0, in) || !buf_of(c, -1, 1, res)) return no_buf(c, x, err);
    c->bufs.buf_of[n->out] = c->resid;
    int bias = n->in[2] >= 0;
    snprintf(params, sizeof params,
             "#define MM_K %lld\n#define MM_N %lld\n#define MM_WBF16 %d\n%s#define MM_XBF16 %d\n"
             "#define MM_BIAS %d\n#define MM_EPI MM_EPI_ACC\n",
             (long long)K, (long long)N, wf->is16, qp, af->is16, bias);
    snprintf(comment, sizeof comment, "layers.*: matmul x[T,%lld] %s . w[%lld,%lld]^T %s, accumulated into the residual stream",
             (long long)K, af->name, (long long)N, (long long)K, wname);
    snprintf(nm, sizeof nm, "matmul_k%lld_n%lld_acc%s%s", (long long)K, (long long)N, bias ? "_bias" : "", sfx);
    const char *mm = instance(c, "matmul.c", nm, "MM_NAME", params, comment);
    if (!mm) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: matmul + residual add */\n%s%s(T, %s, %s, %s, %s, nth);\n", x->ind,
            cg_node_label(g, n->out, lbl, sizeof lbl), x->ind, mm, in, x->wexpr[1], bias ? x->wexpr[2] : "NULL", res);
    return IG_OK;
}

static ig_status lower_rope_kv(cg *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim, qk = n->in[1] >= 0;
    char params[1024], comment[512], nm[64], lbl[96];
    char in[64], out[64];
    if (!buf_of(c, n->in[0], 0, in) || !new_buf(c, n->out, (int64_t)H * D, 0, out)) return no_buf(c, x, err);
    snprintf(params, sizeof params,
             "#define RK_H %d\n#define RK_KV %d\n#define RK_D %d\n#define RK_PS %d\n"
             "#define RK_PAGE_BYTES KV_PAGE_BYTES\n#define RK_KVBF16 %d\n#define RK_KVQ %d\n#define RK_QKNORM %d\n"
             "#define RK_EPS %.9gf\n#define RK_ROT %d\n#define RK_INTERLEAVE %d\n",
             H, KV, D, c->o->page_size, c->kvf->dtype == IG_DTYPE_BF16, c->kvf->kvq, qk, qk ? n->eps : 1e-6, hp->rope_dim ? hp->rope_dim : D,
             hp->rope_interleaved);
    snprintf(comment, sizeof comment, "layers.*: %srope on q[T,%d] and k[T,%d] (head_dim %d), k/v written to the %s KV pages",
             qk ? "q/k rms_norm, " : "", H * D, KV * D, D, c->kvf->name);
    snprintf(nm, sizeof nm, "rope_kv_h%d_kv%d_d%d", H, KV, D);
    const char *rk = instance(c, "rope_kv.c", nm, "RK_NAME", params, comment);
    if (!rk) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: rope_kv */\n%s%s(T, %s, %s, %s, %s, %s, ctx->kv_pool, kv_off,\n"
                   "%s    b->positions, b->token_seq, b->page_table, b->max_pages_per_seq, nth);\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), x->ind, rk, in,
            hp->rope_theta_local > 0 ? "layer_sliding[l] ? rope_cs_local : rope_cs" : "rope_cs", qk ? x->wexpr[1] : "NULL",
            qk ? x->wexpr[2] : "NULL", out, x->ind);
    return IG_OK;
}

static ig_status lower_attention(cg *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    const cg_format *af = c->af;
    int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim;
    char params[1024], comment[512], nm[64], lbl[96];
    char in[64], out[64];
    if (!buf_of(c, n->in[0], 0, in) || !new_buf(c, n->out, (int64_t)H * D, af->is16, out)) return no_buf(c, x, err);
    /* sliding-window layers get their own instance (AT_WINDOW), chosen per layer */
    int nsl = 0;
    for (int L = 0; L < hp->n_layers && L < IR_MAX_LAYER_TYPES; L++) nsl += hp->layer_sliding[L];
    const char *at[2] = {NULL, NULL}; /* [0] global layers, [1] sliding ones */
    for (int sl = 0; sl < 2; sl++) {
        if ((sl ? nsl : hp->n_layers - nsl) == 0) continue;
        int win = sl ? hp->sliding_window : 0;
        snprintf(params, sizeof params,
                 "#define AT_H %d\n#define AT_KV %d\n#define AT_D %d\n#define AT_PS %d\n"
                 "#define AT_PAGE_BYTES KV_PAGE_BYTES\n#define AT_KVBF16 %d\n#define AT_KVQ %d\n#define AT_OBF16 %d\n"
                 "#define AT_SCALE %.9gf\n#define AT_MAXCTX MAX_CONTEXT\n#define AT_WINDOW %d\n#define AT_TILES %d\n",
                 H, KV, D, c->o->page_size, c->kvf->dtype == IG_DTYPE_BF16, c->kvf->kvq, af->is16, hp->attn_scale > 0 ? hp->attn_scale : 1.0 / sqrt((double)D),
                 win, !c->o->tuning || c->o->tuning->cpu_attn_tiles);
        snprintf(comment, sizeof comment, "layers.*: causal attention%s, %d heads over %d KV heads x %d, paged KV %s -> [T,%d] %s",
                 win ? " over a sliding window" : "", H, KV, D, c->kvf->name, H * D, af->name);
        snprintf(nm, sizeof nm, "attention_h%d_kv%d_d%d%s", H, KV, D, win ? "_window" : "");
        if (!(at[sl] = instance(c, "attention.c", nm, "AT_NAME", params, comment))) return no_buf(c, x, err);
    }
    char fn[160];
    if (at[0] && at[1]) snprintf(fn, sizeof fn, "(layer_sliding[l] ? %s : %s)", at[1], at[0]);
    else snprintf(fn, sizeof fn, "%s", at[0] ? at[0] : at[1]);
    fprintf(c->fw, "\n%s/* %s: attention */\n%s%s(T, %s, ctx->kv_pool, kv_off, b->positions, b->token_seq,\n"
                   "%s    b->page_table, b->max_pages_per_seq, %s, attn_scratch, nth);\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), x->ind, fn, in, x->ind, out);
    return IG_OK;
}

/* Tensor parallel: the sum over the ranks of a partial result, in place (the embedding, a
 * post-normed projection), or added to the residual stream (epi acc: the o / down projections). */
static ig_status lower_all_reduce(cg *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    int64_t cols = c->g->tensors[n->in[0]].shape[1];
    char lbl[96], in[64], res[64];
    if (!buf_of(c, n->in[0], 0, in)) return no_buf(c, x, err);
    fprintf(c->fw, "\n%s/* %s: all_reduce (sum of the ranks' partial results)%s */\n"
                   "%sif (ctx->comm->all_reduce_sum(ctx->comm, %s, (int64_t)%s * %lld)) return IG_MODEL_ERR_COMM;\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), n->epi == IR_EPI_ACC ? ", added to the residual stream" : "",
            x->ind, in, x->rows, (long long)cols);
    if (n->epi != IR_EPI_ACC) {
        c->bufs.buf_of[n->out] = c->bufs.buf_of[n->in[0]];
        return IG_OK;
    }
    if (!buf_of(c, -1, 1, res)) return no_buf(c, x, err);
    c->bufs.buf_of[n->out] = c->resid;
    fprintf(c->fw, "#pragma omp parallel for num_threads(nth) schedule(static)\n"
                   "%sfor (int64_t i = 0; i < (int64_t)%s * %lld; i++) %s[i] += %s[i];\n",
            x->ind, x->rows, (long long)cols, res, in);
    return IG_OK;
}

/* Tensor parallel: every rank's logits columns gathered into b->logits (vocabulary order; the
 * padding of the last slice dropped). */
static ig_status lower_all_gather(cg *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    char in[64], all[64];
    if (x->pass != 2) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: all_gather is for the logits only");
    if (!buf_of(c, n->in[0], 0, in) || !new_buf(c, n->out, (int64_t)c->g->hp.tp * c->g->hp.tp_vocab, 0, all))
        return no_buf(c, x, err);
    fprintf(c->fw, "\n    /* logits: all_gather of every rank's vocabulary slice [n_out][TP_VOCAB] */\n"
                   "    if (ctx->comm->all_gather(ctx->comm, %s, %s, (int64_t)b->n_out * TP_VOCAB)) return IG_MODEL_ERR_COMM;\n"
                   "    for (int r = 0; r < TP_RANKS; r++) {\n"
                   "        int v0 = r * TP_VOCAB, nv = VOCAB - v0 < TP_VOCAB ? VOCAB - v0 : TP_VOCAB;\n"
                   "        for (int i = 0; i < b->n_out && nv > 0; i++)\n"
                   "            memcpy(b->logits + (size_t)i * VOCAB + v0, %s + ((size_t)r * b->n_out + i) * TP_VOCAB,\n"
                   "                   sizeof(float) * (size_t)nv);\n"
                   "    }\n",
            in, all, all);
    return IG_OK;
}

/* How the CPU target lowers each op. */
static const struct {
    int op;
    ig_status (*emit)(cg *, node_ctx *, ig_err *);
} cpu_lowering[] = {
    {IR_OP_EMBED, lower_embed},           {IR_OP_GATHER_ROWS, lower_gather_rows}, {IR_OP_NORM_MATMUL, lower_norm_matmul},
    {IR_OP_MATMUL_EPI, lower_matmul_epi}, {IR_OP_ROPE_KV, lower_rope_kv},         {IR_OP_ATTENTION, lower_attention},
    {IR_OP_RMSNORM, lower_rmsnorm},       {IR_OP_NORM_ADD, lower_norm_add},       {IR_OP_MOE, lower_moe},
    {IR_OP_MOE_SHARED, lower_moe},         {IR_OP_ALL_REDUCE, lower_all_reduce},   {IR_OP_ALL_GATHER, lower_all_gather},
};

static ig_status lower_node(cg *c, int32_t i, int pass, ig_err *err) {
    node_ctx x = {.i = i, .n = &c->g->nodes[i], .pass = pass, .rows = pass == 2 ? "b->n_out" : "T",
                  .ind = pass == 1 ? "        " : "    "};
    for (int s = 0; s < IR_MAX_IN; s++) {
        int32_t ti = x.n->in[s];
        if (ti < 0 || c->g->tensors[ti].kind != IR_TENSOR_WEIGHT) snprintf(x.wexpr[s], sizeof x.wexpr[s], "NULL");
        else cg_weight_ref(c->plan, &c->lay, pass == 1, i, s, ti, x.wexpr[s], sizeof x.wexpr[s]);
    }
    size_t k = 0, nk = sizeof cpu_lowering / sizeof cpu_lowering[0];
    while (k < nk && cpu_lowering[k].op != (int)x.n->op) k++;
    if (k == nk) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: cannot lower op %s", ir_op_name(x.n->op));
    return cpu_lowering[k].emit(c, &x, err);
}

/* The file's opening comment, includes and shape constants. */
static void emit_header(const cg *c, const cg_target *t, FILE *out) {
    const ir_hparams *hp = &c->g->hp;
    char dt[160];
    int nq = 0, nm = 0;
    char qn[32] = "", qp[96], sfx[32];
    for (int32_t i = 0; i < c->plan->n; i++)
        if (c->plan->e[i].fmt == PK_PANEL) {
            nm++;
            if (weight_fmt(c, c->plan->e[i].tensor, "MM", qp, sizeof qp, sfx, qn)->wq) nq++;
        }
    if (nq) {
        for (int32_t i = 0; i < c->plan->n; i++) /* name the quantized format, not the last kept one */
            if (c->plan->e[i].fmt == PK_PANEL && weight_fmt(c, c->plan->e[i].tensor, "MM", qp, sizeof qp, sfx, qn)->wq) break;
        if (nq == nm)
            snprintf(dt, sizeof dt, "weights %s (all %d matrices), stored activations %s", qn, nm, c->af->name);
        else
            snprintf(dt, sizeof dt, "weights %s (%d of %d matrices, the rest %s), stored activations %s", qn, nq, nm,
                     c->wf->name, c->af->name);
    } else if (c->wf == c->af) {
        snprintf(dt, sizeof dt, "weights and stored activations %s", c->wf->name);
    } else {
        snprintf(dt, sizeof dt, "weights %s, stored activations %s", c->wf->name, c->af->name);
    }
    fprintf(out,
            "/* model.c — generated by ignis %s. Do not edit: regenerate with `ignis compile`.\n"
            " *\n"
            " * model:  %s, %d layers, hidden %d, %d heads / %d KV heads x %d, intermediate %d, "
            "vocab %d\n"
            " * target: %s (%s)\n"
            " * dtype:  %s, f32 accumulation; KV cache %s, page size %d\n"
            " *\n"
            " * One forward() runs a flattened batch of tokens from many sequences (see "
            "ig_model_abi.h).\n"
            " * Kernels are instantiated once per distinct shape; layers share them. */\n",
            c->o->compiler_version, hp->arch, hp->n_layers, hp->hidden, hp->n_heads, hp->n_kv_heads, hp->head_dim,
            hp->intermediate, hp->vocab, t->full_name, t->cflags[0] ? t->cflags : "portable C", dt, c->kvf->name,
            c->o->page_size);
    fprintf(out,
            "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n"
            "#include \"ig_model_abi.h\"\n#include \"common.h\"\n\n");
    if (c->o->tuning && !c->o->tuning->cpu_amx_q) /* --tune cpu_amx_q=0: quantized matmuls stay off the AMX tiles */
        fprintf(out, "#define IG_AMX_QUANT 0\n\n");
    cg_emit_shape_defines(out, hp, c->o->page_size, cg_kv_layer_page_bytes(hp, c->o->page_size, c->kvf));
}

/* forward()'s checks of the batch, the workspace carve and the RoPE table of the step. */
static void emit_forward_prologue(const ir_hparams *hp, FILE *fw) {
    fprintf(fw, "\n/* Runs one step: see ig_fwd_batch in ig_model_abi.h. */\n"
                "static int forward(const ig_model_ctx *ctx, const ig_fwd_batch *b) {\n"
                "    const int T = b->n_tokens, nth = ctx->n_threads > 0 ? ctx->n_threads : 1;\n");
    if (hp->tp > 1)
        fprintf(fw, "    if (!ctx->comm || ctx->comm->size != TP_RANKS) return IG_MODEL_ERR_TP_SIZE;\n");
    fprintf(fw, "    if (T < 1 || T > ctx->max_tokens || b->n_out < 0 || b->n_out > T || b->n_seqs < 1)\n"
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
}

/* forward()'s body in three passes: the nodes before the layers, one layer inside the loop over
 * N_LAYERS, the logits block. */
static ig_status lower_graph(cg *c, ig_err *err) {
    const cg_layout *lay = &c->lay;
    ig_status st = IG_OK;
    for (int pass = 0; pass < 3 && !st; pass++) {
        int32_t lo = pass == 0 ? 0 : pass == 1 ? lay->first_layer : lay->last_layer + 1;
        int32_t hi = pass == 0 ? lay->first_layer : pass == 1 ? lay->first_layer + lay->per_layer : c->g->n_nodes;
        if (pass == 1)
            fprintf(c->fw, "\n    for (int l = 0; l < N_LAYERS; l++) {\n"
                           "        const int32_t *lw = layer_weights[l];\n"
                           "        const uint64_t kv_off = (uint64_t)l * KV_LAYER_PAGE_BYTES;\n");
        if (pass == 2) fprintf(c->fw, "\n    if (b->n_out == 0) return 0;\n");
        for (int32_t i = lo; i < hi && !st; i++) st = lower_node(c, i, pass, err);
        if (pass == 1) fprintf(c->fw, "    }\n");
    }
    if (!st && c->g->hp.final_softcap > 0)
        fprintf(c->fw, "\n    /* final logit soft-capping: cap * tanh(logits / cap) */\n"
                       "#pragma omp parallel for num_threads(nth) schedule(static)\n"
                       "    for (int64_t i = 0; i < (int64_t)b->n_out * VOCAB; i++)\n"
                       "        b->logits[i] = %#.9gf * tanhf(b->logits[i] / %#.9gf);\n",
                c->g->hp.final_softcap, c->g->hp.final_softcap);
    if (!st) fprintf(c->fw, "    return 0;\n}\n");
    return st;
}

/* Per layer: which layers attend a sliding window (and take the local RoPE table), when any do. */
static void emit_layer_types(const ir_hparams *hp, FILE *out) {
    if (hp->sliding_window <= 0 && hp->rope_theta_local <= 0) return;
    fprintf(out, "\n/* per layer: 1 = sliding-window attention (%d keys)%s */\n"
                 "static const uint8_t layer_sliding[N_LAYERS] = {",
            hp->sliding_window, hp->rope_theta_local > 0 ? " with the local RoPE theta" : "");
    for (int L = 0; L < hp->n_layers; L++)
        fprintf(out, "%s%d", L ? ", " : "", L < IR_MAX_LAYER_TYPES ? hp->layer_sliding[L] : 0);
    fprintf(out, "};\n");
}

/* The workspace: the activation buffers as one X-macro list, its size and its carve. */
static void emit_workspace(const cg *c, FILE *out) {
    fprintf(out, "\n/* ---- workspace: activation buffers for up to max_tokens tokens, 64-byte aligned */\n"
                 "#define WS_ALIGN(n) (((n) + 63) & ~(uint64_t)63)\n"
                 "#define WORKSPACE_LIST(X, T, NTH) \\\n"
                 "    X(float, rope_cs, (uint64_t)(T) * HEAD_DIM) \\\n"
                 "    X(float, attn_scratch, (uint64_t)(NTH) * (MAX_CONTEXT + 2 * HEAD_DIM)) \\\n");
    if (c->g->hp.rope_theta_local > 0) fprintf(out, "    X(float, rope_cs_local, (uint64_t)(T) * HEAD_DIM) \\\n");
    if (c->moe_tok)
        fprintf(out, "    X(uint8_t, moe_ws, (uint64_t)(T) * %lluu + %lluu) \\\n", (unsigned long long)c->moe_tok,
                (unsigned long long)c->moe_fix);
    fprintf(out, "    X(%s, xn, (uint64_t)(T) * %lld)", c->af->c_type, (long long)c->xn_cols);
    for (int i = 0; i < c->bufs.n; i++)
        fprintf(out, " \\\n    X(%s, %s, (uint64_t)(T) * %lld)", c->bufs.v[i].is16 ? "uint16_t" : "float", c->bufs.v[i].ident,
                (long long)c->bufs.v[i].cols);
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
}

ig_status cg_emit_c(const ir_graph *g, const pk_plan *plan, const cg_target *t, const cg_options *o, FILE *out,
                    ig_err *err) {
    cg c = {.g = g, .plan = plan, .o = o, .wf = cg_format_of(o->dtype), .af = cg_format_of(o->dtype), .resid = -1,
            .xn_cols = g->hp.hidden, .kvf = cg_kv_format_of(o->kv_dtype)};
    if (!c.wf || !c.wf->cpu) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: the CPU target does not take this dtype");
    if (!c.kvf || !c.kvf->cpu)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--kv-cache %s is for CUDA targets; CPU packages take f32, bf16, int8 or uint4",
                       c.kvf ? c.kvf->name : "?");
    char *kern_text = NULL, *fwd_text = NULL;
    size_t kern_len = 0, fwd_len = 0;
    c.kern = open_memstream(&kern_text, &kern_len);
    c.fw = open_memstream(&fwd_text, &fwd_len);
    ig_status st = c.kern && c.fw ? cg_bufs_init(&c.bufs, g, err) : ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    if (!st) st = cg_analyze(g, plan, &c.lay, err);
    if (!st) {
        emit_header(&c, t, out);
        emit_forward_prologue(&g->hp, c.fw);
        st = lower_graph(&c, err);
    }
    if (!st) {
        fflush(c.kern);
        fflush(c.fw);
        fprintf(out, "\n/* ---- kernels: one instantiation per distinct shape */\n%s", kern_text);
        cg_emit_weight_list(out, plan);
        fprintf(out, "#define W(i) ((const void *)(ctx->weights + weights[i].offset))\n\n");
        cg_emit_layer_table(out, g, plan, &c.lay);
        emit_layer_types(&g->hp, out);
        st = cg_emit_rope_table(out, &g->hp, err);
    }
    if (!st) {
        emit_workspace(&c, out);
        fprintf(out, "%s", fwd_text);
        cg_emit_desc(out, &g->hp, t->full_name, o->compiler_version, t->cpu_features, c.wf->dtype, c.kvf->dtype, plan->n, NULL);
    }
    if (c.kern) fclose(c.kern);
    if (c.fw) fclose(c.fw);
    free(kern_text);
    free(fwd_text);
    cg_insts_free(&c.in);
    cg_bufs_free(&c.bufs);
    return st;
}
