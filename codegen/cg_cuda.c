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
#include "tuning.h"
#include "../templates/cuda/launch.h" /* the launch-shape rules the generated code and the templates share */

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

/* ---- the generator's state */

/* Pointers of a layer in the persistent kernel's table (decode_layers.cu's ig_dl_layer; model.c gets it as
 * DL_TAB for host_runtime.c) */
#define DL_TAB 16

/* What the persistent decode kernel (decode_layers.cu, sm_90) takes of this model, if anything. */
typedef struct dl_plan {
    int ok;
    const ir_node *n[7];             /* the layer's nodes: norm+qkv, rope_kv, attention, o, norm+gate/up, down
                                      * (moe: ..., o, rms_norm, moe[, moe_shared]) */
    const ir_node *emb, *head;       /* the embedding before the layers, the lm_head after, when it takes them */
    int nslot;                       /* ring slots per SM */
    int slot;                        /* their bytes: 16 KB, 16 KB + 256 for quantized rows (stream.cuh) */
    int resid_rows;                  /* rows of a residual-add phase per CTA */
    int wq, wg, hwq, hwg;            /* the layers' matrices and the lm_head: bf16 (0) or quantized rows (wq.cuh) */
    int moe;                         /* every layer's MLP is routed experts (stream_moe.cuh; --tune dl_moe) */
    int64_t moe_i;                   /* ... of this many rows each (gate or up), the top-k's activations moe_h */
    int64_t moe_is;                  /* ... and a shared expert of this many (0: none) */
} dl_plan;

typedef struct gen {
    const ir_graph *g;
    const pk_plan *plan;
    const cg_options *o;
    const cg_tuning *tune;
    const cg_format *fmt; /* the package's format: f32, or the 16-bit type of weights, KV and activations */
    int bf;               /* fmt is 16-bit */
    cg_layout lay;
    FILE *cu;             /* device code: template instances */
    FILE *fw;             /* host code: the step's launch sequence */
    cg_insts in;          /* instances of model.cu; the kernel functions host code launches */
    cg_bufs bufs;         /* activation buffers of the workspace */
    int32_t resid;        /* buffer of the residual stream */
    int32_t rk_node;      /* the rope_kv feeding the next attention (fused for decode) */
    int64_t xn_cols, gu_cols; /* widths of the normed-x and gate/up scratch buffers */
    int64_t moe_k, moe_ki;    /* MoE scratch per token: selections (top-k), expert activations (top-k x I) */
    int64_t moe_e;            /* ... and the expert-grouped path's: experts (offsets), 0 when no layer takes it */
    int moe_tc;               /* some MoE block takes the tensor-core grouped products (moe_xb: x in 16 bits) */
    int64_t moe_lg;           /* the routed blocks' experts: router logits per token (moe_lg) */
    int moe_dec;              /* some MoE block takes moe.cu's two-launch decode (moe_sync: its counters) */
    /* the layer's lone rms_norm whose only reader is the next node, a MoE block taking the
     * two-launch decode: on decode-sized steps its _dgu applies it (rn_src the residual buffer,
     * rn_gamma its weight's reference, rn_eps); rn_out its output tensor, -1 when none */
    int32_t rn_out;
    char rn_src[64], rn_gamma[96];
    float rn_eps;
    char at_params[1024]; /* the layers' attention instance parameters (the persistent kernel adds AT_DEVFN) */
    uint64_t kv_layer_page;
    int kvq;              /* quantized KV: code bits (8, 4; the templates' RK_KVQ / AT_KVQ / AP_KVQ), 0 for floats */
    const char *kv_name;  /* the KV format's name, for comments */
    dl_plan dl;
    int dl_fn;            /* the persistent kernel's index in the launch table, or -1 */
    int sample_fn;        /* sample.cu's index (host_runtime.c launches it for masked rows) */
    int gemm_fn;          /* gemm.cu's index (host_runtime.c's gemm() without cuBLAS) */
    int wq_any;           /* some matrix is quantized (q8r / q4r rows, templates/cuda/wq.cuh) */
    int64_t wdq_elems;    /* the largest quantized matrix's elements: its 16-bit copy for cuBLAS (a_wdq) */
    int qg_any;           /* some matrix takes qgemm.cu (quantized rows on tensor cores) */
    int f8_any;           /* some matmul calls GEMM_F8 (fp8: f8r rows on cuBLASLt's e4m3 GEMM) */
    int f8_glu_codes;     /* the gate/up matmul being emitted leaves its activation as e4m3 codes (glu_codes_fuse) */
    char f8_codes_of[64]; /* the activation whose codes a8_xq / a8_xs hold on the fp8 branch, "" none */
    int64_t qg_gxs, qg_gx; /* its split instances' largest row tiles x splits (qg_ws) and row tiles (qg_cnt) */
    int64_t a8_k, a8_np;  /* a8w8 (o->act8): the widest int8 activation row (a8_xq) and int32 GEMM row (a8_acc) */
    int a8_wg_any;        /* some matmul launches act8.cu's fused int8 GEMM (its split sums a8_part, counts a8_cnt) */
    int a8_cl_fn;         /* ... in clusters (a8_wg 2): one of its instances, whose co-resident clusters size the grid (-1) */
    char archs[128];      /* "sm_80,sm_90" */
} gen;

/* Instantiates `tpl` with `params` once; returns the instance name. */
static const char *instance(gen *c, const char *tpl, const char *prefix, const char *name_macro, const char *params,
                            const char *comment) {
    return cg_instance(&c->in, c->cu, tpl, prefix, name_macro, params, comment);
}

static int fn_index(gen *c, const char *name) { return cg_fn_index(&c->in, name); }

/* A new activation buffer for tensor t; its index. */
static int32_t new_buf(gen *c, int32_t t, int64_t cols, int is16) { return cg_buf_new(&c->bufs, c->g, t, cols, is16); }

/* The C identifier of tensor t's buffer. */
static const char *buf_name(const gen *c, int32_t t) {
    int32_t b = c->bufs.buf_of[t];
    return b >= 0 ? c->bufs.v[b].ident : "zero";
}

/* The name of an element type: f32, or the package's 16-bit type. */
static const char *dtn(const gen *c, int bf) { return bf ? c->fmt->name : "f32"; }

/* How a matrix is stored: wq 0 (the package's float type), 8 (q8r, or f8r with f8: e4m3 codes) or 4
 * (q4r with groups of wg). */
typedef struct mm_wfmt {
    int wq, wg, f8;
} mm_wfmt;

static mm_wfmt weight_format(const gen *c, int32_t t) {
    int32_t k = pk_find(c->plan, t);
    const cg_format *f = k >= 0 ? cg_format_of(c->plan->e[k].dtype) : NULL;
    mm_wfmt m = {f ? f->wq : 0, k >= 0 ? (int)c->plan->e[k].group : 0, f && f->dtype == IG_DTYPE_F8R};
    return m;
}

/* A matrix's format in kernel names and comments: "q8r", "f8r", "q4r32" (the group) or "16-bit". */
static const char *wq_label(mm_wfmt f, char *buf, size_t cap) {
    if (f.wq == 4) snprintf(buf, cap, "q4r%d", f.wg);
    else snprintf(buf, cap, "%s", f.f8 ? "f8r" : f.wq == 8 ? "q8r" : "16-bit");
    return buf;
}

/* The RMSNorm in front of a matmul (norm_matmul): gamma and eps, and the f32 rows it reads. */
typedef struct mm_norm {
    const char *src;   /* f32 residual rows [T][K] */
    const char *gamma; /* weight variable of gamma */
    double eps;
} mm_norm;

static void emit_gemm(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w, const char *bias,
                      const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf, const char *what,
                      const mm_norm *norm, int f8);
static void emit_norm_rows(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, int64_t K, int bf,
                           const mm_norm *norm);
static void emit_act_quant(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, int64_t K, int f8,
                           const mm_norm *norm);
static void emit_matmul_q(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w,
                          const char *bias, const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf,
                          const char *what, const mm_norm *norm, mm_wfmt wf, int fmv, int ftc);

/* Emits one matmul y = x·Wᵀ (+bias) with epilogue epi, preceded by an RMSNorm of norm->src into x
 * when norm is set: a GEMV launch for up to st->gemv_tmax rows (the norm fused into it), else an
 * rmsnorm launch, cuBLAS and bias / SwiGLU / GeGLU epilogue kernels. */
static void emit_matmul(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w,
                        const char *bias, const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf,
                        const char *what, const mm_norm *norm, mm_wfmt wf) {
    char params[1024], comment[512], nm[96], wname[24] = "", qp[64] = "";
    int geglu = epi == IR_EPI_GEGLU, swiglu = epi == IR_EPI_SWIGLU || geglu, has_bias = strcmp(bias, "zero") != 0;
    const char *targ = rows[0] == 'T' ? "T" : "n_out";
    if (wf.wq) {
        snprintf(qp, sizeof qp, "#define MV_WQ %d\n#define MV_WG %d\n#define MV_WF8 %d\n", wf.wq, wf.wq == 4 ? wf.wg : 32, wf.f8);
        wq_label(wf, wname, sizeof wname);
    }
    snprintf(params, sizeof params,
             "#define MV_K %lld\n#define MV_N %lld\n#define MV_WBF16 %d\n#define MV_XBF16 %d\n#define MV_BIAS %d\n"
             "#define MV_EPI %d\n#define MV_LDY %lld\n#define MV_YBF16 %d\n#define MV_NORM %d\n#define MV_EPS %.9gf\n%s",
             (long long)K, (long long)N, bf, bf, has_bias, (int)epi, (long long)ldy, swiglu ? bf : 0, norm != NULL,
             norm ? norm->eps : 1e-5, qp);
    snprintf(comment, sizeof comment, "%s: gemv %sx[T,%lld] %s . w[%lld,%lld]^T %s, %s", what, norm ? "rms_norm(x) then " : "",
             (long long)K, dtn(c, bf), (long long)N, (long long)K, wf.wq ? wname : dtn(c, bf),
             epi == IR_EPI_ACC ? "added to the residual" : geglu ? "GeGLU (tanh GELU) epilogue" : swiglu ? "SwiGLU epilogue" : "stored f32");
    snprintf(nm, sizeof nm, "gemv_k%lld_n%lld%s%s%s%s%s", (long long)K, (long long)N, norm ? "_norm" : "",
             epi == IR_EPI_ACC ? "_acc" : geglu ? "_geglu" : swiglu ? "_swiglu" : "", has_bias ? "_bias" : "", wf.wq ? "_" : "", wname);
    const char *mv = instance(c, "gemv.cu", nm, "MV_NAME", params, comment);
    int fmv = fn_index(c, mv);
    /* 2..8 tokens: the tensor-core GEMV (gemv_tc.cu; 16-bit x, 16-bit W with K % 32 == 0, q8r rows
     * with K % 64 == 0 or q4r rows with K % 128 == 0, a fused norm's x staged in at most 96 KB) when
     * the GPU has it (sm_80+) */
    const int tc = bf && (wf.wq == 8 ? K % 64 == 0 : wf.wq == 4 ? K % 128 == 0 && K % wf.wg == 0 : K % 32 == 0) &&
                   (!norm || (K + 32) * 16 <= 96 * 1024);
    if (wf.wq) {
        int ftc = -1;
        if (tc) {
            char tnm[112], tcm[sizeof comment + 32];
            snprintf(tcm, sizeof tcm, "%s; on tensor cores, for 2..8 tokens", comment);
            snprintf(tnm, sizeof tnm, "%s_tc", nm);
            ftc = fn_index(c, instance(c, "gemv_tc.cu", tnm, "MV_NAME", params, tcm));
        }
        emit_matmul_q(c, fw, ind, rows, x, w, bias, y, K, N, epi, ldy, bf, what, norm, wf, fmv, ftc);
        return;
    }
    if (tc) {
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
    emit_gemm(c, fw, ind, rows, x, w, bias, y, K, N, epi, ldy, bf, what, norm, 0);
    fprintf(fw, "%s}\n", ind);
}

/* The RMSNorm of norm->src into the 16-bit (or f32) rows x before a GEMM (inside the caller's block). */
static void emit_norm_rows(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, int64_t K, int bf,
                           const mm_norm *norm) {
    char params[256], comment[256], nm[64];
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 %d\n", (long long)K, norm->eps, bf);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g -> %s", (long long)K, norm->eps, dtn(c, bf));
    snprintf(nm, sizeof nm, "rms_norm_%lld", (long long)K);
    const char *rn = instance(c, "rmsnorm.cu", nm, "RN_NAME", params, comment);
    fprintf(fw, "%s    { void *argsn[] = {&%s, &%s, &%s, &%s};\n%s      LAUNCH(%d, IG_RN_GRID_X(%s), 1, 1, IG_RN_BLOCK(%lld), 0, argsn); }\n",
            ind, rows[0] == 'T' ? "T" : "n_out", norm->src, norm->gamma, x, ind, fn_index(c, rn), rows, (long long)K);
}

/* The cuBLAS path of a matmul (inside the caller's else block): the RMSNorm into x when norm is
 * set, the GEMM with W (16-bit or f32, the package's type), the bias / SwiGLU epilogue kernels.
 * With f8 (fp8 packages: W f8r rows, inside "if (st->f8_on)") x goes to e4m3 per token first
 * (act8.cu's quantizers with A8_F8, the norm fused in, into a8_xq / a8_xs; skipped where the gate/up
 * matmul before left x's codes there: c->f8_codes_of) and the GEMM is cuBLASLt's (GEMM_F8); a
 * gate/up matmul with c->f8_glu_codes leaves its activation as those codes instead of y. */
static void emit_gemm(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w, const char *bias,
                      const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf, const char *what,
                      const mm_norm *norm, int f8) {
    char params[1024], comment[512], nm[96];
    int geglu = epi == IR_EPI_GEGLU, swiglu = epi == IR_EPI_SWIGLU || geglu, has_bias = strcmp(bias, "zero") != 0;
    if (f8) { /* x to e4m3 (the norm fused in), unless the gate/up matmul before left x's codes */
        if (norm || strcmp(x, c->f8_codes_of) != 0) emit_act_quant(c, fw, ind, rows, x, K, 1, norm);
        else fprintf(fw, "%s    /* a8_xq / a8_xs hold %s's codes (the gate/up matmul's epilogue) */\n", ind, x);
        c->f8_codes_of[0] = 0;
        c->f8_any = 1;
    } else if (norm) {
        emit_norm_rows(c, fw, ind, rows, x, K, bf, norm);
    }
    if (swiglu) {
        /* gate/up leave the GEMM in the activation type (as in the reference model), the
         * mlp_bias (packed gate/up order) is added by the kernel after it */
        if (f8)
            fprintf(fw, "%s    GEMM_F8(%lld, %s, %lld, %s, a8_xq, a8_xs, a_gu, %lld, 0.0f, 1);\n", ind, (long long)N, rows,
                    (long long)K, w, (long long)N);
        else
            fprintf(fw, "%s    GEMM_OUT(%lld, %s, %lld, %s, %s, a_gu, %lld, 0.0f, W_BF16);\n", ind, (long long)N, rows, (long long)K,
                    w, x, (long long)N);
        const int64_t I = N / 2;
        if (f8 && c->f8_glu_codes) { /* the down projection's e4m3 input straight from the gate/up rows */
            snprintf(params, sizeof params, "#define A8_K %lld\n#define A8_F8 1\n#define A8_GLU %d\n", (long long)I, geglu ? 2 : 1);
            snprintf(comment, sizeof comment, "%s: %s (+ gate/up bias) of the packed gate/up GEMM output [T,%lld] %s -> e4m3 [T,%lld] per token",
                     what, geglu ? "GeGLU" : "SwiGLU", (long long)N, dtn(c, bf), (long long)I);
            snprintf(nm, sizeof nm, "act8_f8_%s_quant_k%lld", geglu ? "geglu" : "swiglu", (long long)I);
            const int fg = fn_index(c, instance(c, "act8.cu", nm, "A8_GQUANT_NAME", params, comment));
            fprintf(fw, "%s    { void *argsg[] = {&T, &a_gu, &%s, &a8_xq, &a8_xs};\n%s      LAUNCH(%d, T, 1, 1, IG_A8_GBLOCK, 0, argsg); }\n",
                    ind, bias, ind, fg);
            if (I > c->a8_k) c->a8_k = I;
            snprintf(c->f8_codes_of, sizeof c->f8_codes_of, "%s", y);
            return;
        }
        snprintf(params, sizeof params, "#define EP_I %lld\n#define EP_OBF16 %d\n#define EP_GUBF16 %d\n#define EP_GELU %d\n",
                 (long long)I, bf, bf, geglu);
        snprintf(comment, sizeof comment, "%s: %s (+ gate/up bias) of the packed gate/up GEMM output [T,%lld] %s -> [T,%lld] %s",
                 what, geglu ? "GeGLU" : "SwiGLU", (long long)N, dtn(c, bf), (long long)I, dtn(c, bf));
        snprintf(nm, sizeof nm, "%s_i%lld", geglu ? "geglu" : "swiglu", (long long)I);
        const char *ep = instance(c, "epilogue.cu", nm, "EP_SWIGLU_NAME", params, comment);
        fprintf(fw, "%s    void *args[] = {&%s, &a_gu, &%s, &%s};\n", ind, rows[0] == 'T' ? "T" : "n_out", bias, y);
        fprintf(fw, "%s    LAUNCH(%d, IG_EP_SWIGLU_GRID_X(%s, %lld), IG_EP_SWIGLU_GRID_Y(%s), 1, IG_EP_BLOCK, 0, args);\n", ind,
                fn_index(c, ep), rows, (long long)I, rows);
    } else {
        if (f8)
            fprintf(fw, "%s    GEMM_F8(%lld, %s, %lld, %s, a8_xq, a8_xs, %s, %lld, %s, 0);\n", ind, (long long)N, rows, (long long)K,
                    w, y, (long long)ldy, epi == IR_EPI_ACC ? "1.0f" : "0.0f");
        else
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
}

/* Whether a wgmma kernel's launches are generated (moe.cu's _gu_wg / _down_wg, act8.cu's
 * A8_WG_NAME, launched where the loaded image has them: st->wg): its tuning key (--tune moe_wg /
 * a8_wg) and an sm_90 architecture among the package's (its cubin is built for sm_90a,
 * build_kernels). */
static int sm90_wg_ok(const gen *c, int32_t key) {
    if (!key) return 0;
    for (const char *p = strstr(c->archs, "sm_"); p; p = strstr(p + 3, "sm_"))
        if (atoi(p + 3) == 90) return 1;
    return 0;
}

/* The qgemm.cu branch of emit_matmul_q (after its GEMV branch): the instance, the workspace it needs,
 * the launch for qg_tmin..tmax rows (qg_tmax, or below a8w8's a8_tmin; a norm in front runs as
 * rmsnorm.cu into x). */
static void emit_qgemm(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w, const char *bias,
                       const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf, const char *what,
                       const mm_norm *norm, mm_wfmt wf, int tmax) {
    const char *targ = rows[0] == 'T' ? "T" : "n_out";
    const int swiglu = epi == IR_EPI_SWIGLU || epi == IR_EPI_GEGLU, has_bias = strcmp(bias, "zero") != 0;
    char params[512], comment[512], nm[96];
    const int split = IG_QG_SPLIT_AUTO(N, K);
    char wname[16];
    wq_label(wf, wname, sizeof wname);
    snprintf(params, sizeof params,
             "#define QG_K %lld\n#define QG_N %lld\n#define QG_WQ %d\n#define QG_WG %d\n#define QG_BIAS %d\n#define QG_EPI %d\n"
             "#define QG_LDY %lld\n#define QG_YBF16 %d\n#define QG_SPLIT %d\n#define QG_WF8 %d\n",
             (long long)K, (long long)N, wf.wq, wf.wq == 4 ? wf.wg : 32, has_bias, (int)epi, (long long)ldy, swiglu ? bf : 0, split,
             wf.f8);
    snprintf(comment, sizeof comment, "%s: x[T,%lld] %s . w[%lld,%lld]^T %s on tensor cores (%d..%d tokens)%s, %s", what,
             (long long)K, dtn(c, bf), (long long)N, (long long)K, wname, c->tune->qg_tmin, tmax,
             split > 1 ? ", K split" : "",
             epi == IR_EPI_ACC ? "added to the residual" : epi == IR_EPI_GEGLU ? "GeGLU epilogue" : swiglu ? "SwiGLU epilogue" : "stored f32");
    snprintf(nm, sizeof nm, "qgemm_k%lld_n%lld%s%s_%s", (long long)K, (long long)N,
             epi == IR_EPI_ACC ? "_acc" : epi == IR_EPI_GEGLU ? "_geglu" : swiglu ? "_swiglu" : "", has_bias ? "_bias" : "", wname);
    const int fqg = fn_index(c, instance(c, "qgemm.cu", nm, "QG_NAME", params, comment));
    c->qg_any = 1;
    if (split > 1 && (int64_t)IG_QG_GRID_X(N) * split > c->qg_gxs) c->qg_gxs = (int64_t)IG_QG_GRID_X(N) * split;
    if (split > 1 && IG_QG_GRID_X(N) > c->qg_gx) c->qg_gx = IG_QG_GRID_X(N);
    fprintf(fw, "%s} else if (st->qg_on && %s <= %d) {\n", ind, rows, tmax);
    if (norm) emit_norm_rows(c, fw, ind, rows, x, K, bf, norm);
    fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s, &%s, &%s, &qg_ws, &qg_cnt};\n", ind, targ, x, w, bias, y);
    fprintf(fw, "%s    LAUNCH(%d, IG_QG_GRID_X(%lld), IG_QG_GRID_Y(%s), %d, IG_QG_BLOCK, IG_QG_SMEM, args);\n", ind, fqg,
            (long long)N, rows, split);
}

/* dequant.cu's instance for NP quantized rows of K columns in format f (comment above it): its
 * kernel index; the 16-bit scratch a_wdq grows to hold them. */
static int dequant_fn(gen *c, mm_wfmt f, int64_t K, int64_t NP, const char *comment) {
    char params[192], nm[96];
    snprintf(params, sizeof params, "#define DQ_K %lld\n#define DQ_NP %lld\n#define DQ_WQ %d\n#define DQ_WG %d\n#define DQ_WF8 %d\n",
             (long long)K, (long long)NP, f.wq, f.wq == 4 ? f.wg : 32, f.f8);
    snprintf(nm, sizeof nm, "dequant_k%lld_n%lld_%s%d", (long long)K, (long long)NP, f.f8 ? "f" : "q", f.wq);
    if (NP * K > c->wdq_elems) c->wdq_elems = NP * K;
    return fn_index(c, instance(c, "dequant.cu", nm, "DQ_NAME", params, comment));
}

/* The activation rows of a matmul to 8-bit codes per token (act8.cu) into a8_xq / a8_xs: int8, or
 * e4m3 with f8; with norm the RMSNorm of norm->src fused in (A8_NQUANT), else the 16-bit rows x. */
static void emit_act_quant(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, int64_t K, int f8,
                           const mm_norm *norm) {
    char params[256], comment[256], nm[96];
    snprintf(params, sizeof params, "#define A8_K %lld\n#define A8_F8 %d\n#define A8_EPS %.9gf\n", (long long)K, f8,
             norm ? norm->eps : 1e-5);
    snprintf(comment, sizeof comment, "%s: %sactivation rows of %lld to %s per token", f8 ? "fp8" : "a8w8",
             norm ? "rms_norm fused in, " : "", (long long)K, f8 ? "e4m3" : "int8");
    snprintf(nm, sizeof nm, "act8%s_%squant_k%lld", f8 ? "_f8" : "", norm ? "norm_" : "", (long long)K);
    const int fq = fn_index(c, instance(c, "act8.cu", nm, norm ? "A8_NQUANT_NAME" : "A8_QUANT_NAME", params, comment));
    const char *targ = rows[0] == 'T' ? "T" : "n_out";
    if (norm)
        fprintf(fw, "%s    { void *argsq[] = {&%s, &%s, &%s, &a8_xq, &a8_xs};\n", ind, targ, norm->src, norm->gamma);
    else
        fprintf(fw, "%s    { void *argsq[] = {&%s, &%s, &a8_xq, &a8_xs};\n", ind, targ, x);
    fprintf(fw, "%s      LAUNCH(%d, %s, 1, 1, IG_A8_BLOCK, 0, argsq); }\n", ind, fq, rows);
    if (K > c->a8_k) c->a8_k = K;
}

/* a8w8's branch of emit_matmul_q for steps past the GEMV and qgemm.cu paths, where cuBLAS is (st->blas): the
 * activation rows (after the RMSNorm when norm is set) to int8 per token, cuBLAS's int8 GEMM on the
 * q8r codes into the int32 scratch, act8.cu's epilogue (scales, bias, the residual add or the
 * SwiGLU / GeGLU of the packed gate/up rows) into y. Opens with "} else if (st->blas) {". */
static void emit_act8(gen *c, FILE *fw, const char *ind, const char *x, const char *w, const char *bias, const char *y,
                      int64_t K, int64_t N, ir_epi epi, int64_t ldy, const char *what, const mm_norm *norm) {
    const long long np = (N + 15) / 16 * 16;
    const int glu = epi == IR_EPI_GEGLU ? 2 : epi == IR_EPI_SWIGLU ? 1 : 0, has_bias = strcmp(bias, "zero") != 0;
    char params[512], comment[512], nm[96];
    snprintf(params, sizeof params, "#define A8_K %lld\n#define A8_N %lld\n#define A8_LDY %lld\n#define A8_BIAS %d\n"
             "#define A8_ACC %d\n#define A8_GLU %d\n", (long long)K, (long long)N, (long long)ldy, has_bias,
             epi == IR_EPI_ACC, glu);
    /* the epilogue in words and in the instances' names, shared by the dq kernel and the fused GEMM */
    const char *epi_txt = glu == 2 ? "GeGLU" : glu ? "SwiGLU" : epi == IR_EPI_ACC ? "added to the residual" : "stored f32";
    const char *epi_sfx = glu == 2 ? "_geglu" : glu ? "_swiglu" : epi == IR_EPI_ACC ? "_acc" : "";
    snprintf(comment, sizeof comment, "%s: int32 sums of x[T,%lld] int8 . w[%lld,%lld]^T q8r scaled back%s, %s", what,
             (long long)K, (long long)N, (long long)K, has_bias ? " + bias" : "", epi_txt);
    snprintf(nm, sizeof nm, "act8_dq_k%lld_n%lld%s%s", (long long)K, (long long)N, epi_sfx, has_bias ? "_bias" : "");
    const int fd = fn_index(c, instance(c, "act8.cu", nm, "A8_DQ_NAME", params, comment));
    if (np > c->a8_np) c->a8_np = np;
    fprintf(fw, "%s} else if (st->blas) { /* a8w8: int8 activations on int8 tensor cores */\n", ind);
    emit_act_quant(c, fw, ind, "T", x, K, 0, norm);
    const char *in = ind;
    char ind2[64];
    /* the GEMM with this epilogue fused, where the image has wgmma and the operands hold a TMA box
     * (a tensor map's box may not exceed its tensor: K >= 128 codes, NP >= the weight box; a8_xq
     * holds 128 rows at least); at run time T >= 128 and at least st->a8_wg_tiles tiles
     * (IG_A8_WG_USE), or fewer tiles with K split (st->a8_wg_split: IG_A8_WG_SPLITS) */
    if (sm90_wg_ok(c, c->tune->a8_wg) && K >= 128 && np >= IG_A8_WG_BN) {
        snprintf(comment, sizeof comment, "%s: x[T,%lld] int8 . w[%lld,%lld]^T q8r on wgmma, scaled back%s, %s", what,
                 (long long)K, (long long)N, (long long)K, has_bias ? " + bias" : "", epi_txt);
        /* a8_wg 2: clusters of two CTAs, each loading half of the weight box for both (A8_WG_CL) */
        const int cl = c->tune->a8_wg;
        char params_cl[576];
        snprintf(params_cl, sizeof params_cl, "%s#define A8_WG_CL %d\n", params, cl);
        snprintf(nm, sizeof nm, "act8_wg%s_k%lld_n%lld%s%s", cl > 1 ? "c2" : "", (long long)K, (long long)N, epi_sfx, has_bias ? "_bias" : "");
        const int fw8 = fn_index(c, instance(c, "act8.cu", nm, "A8_WG_NAME", params_cl, comment));
        c->a8_wg_any = 1;
        if (cl > 1 && c->a8_cl_fn < 0) c->a8_cl_fn = fw8; /* the one the host asks how many clusters fit */
        fprintf(fw, "%s    CUtensorMap m_xq, m_w;\n"
                    "%s    int a8_s = IG_A8_WG_SPLITS(T, %lld, %lld, st->a8_wg_sms, %d, st->a8_wg_split);\n"
                    "%s    if (st->wg && (a8_s > 1 || IG_A8_WG_USE(T, %lld, st->a8_wg_tiles)) &&\n"
                    "%s        tile_map_of(st, &m_xq, a8_xq, (uint64_t)(T < IG_A8_WG_BM ? IG_A8_WG_BM : T), %lld, %lld, 1, IG_A8_WG_BM) &&\n"
                    "%s        tile_map_of(st, &m_w, %s, %lld, %lld, %lld, 1, IG_A8_WG_BN / %d)) {\n"
                    "%s        void *args[] = {&T, &a8_s, &a8_xs, &%s, &%s, &%s, &a8_part, &a8_cnt, &m_xq, &m_w};\n"
                    "%s        LAUNCH(%d, IG_A8_WG_GRID(T, %lld, st->a8_wg_sms, %d, a8_s), 1, 1, IG_A8_WG_THREADS, IG_A8_WG_SMEM, args);\n"
                    "%s    } else {\n",
                ind, ind, (long long)N, (long long)K, cl, ind, (long long)N, ind, (long long)K, (long long)K, ind, w, np, (long long)K,
                (long long)K + 16, cl, ind, w, bias, y, ind, fw8, (long long)N, cl, ind);
        snprintf(ind2, sizeof ind2, "%s    ", ind);
        in = ind2;
    }
    fprintf(fw, "%s    GEMM_I8(%lld, T, %lld, %s, a8_xq, a8_acc);\n", in, np, (long long)K, w);
    fprintf(fw, "%s    { void *args[] = {&T, &a8_acc, &a8_xs, &%s, &%s, &%s};\n", in, w, bias, y);
    fprintf(fw, "%s      LAUNCH(%d, IG_A8_DQ_GRID_X(%lld, %d), IG_A8_DQ_GRID_Y(T), 1, IG_A8_BLOCK, 0, args); }\n", in, fd, (long long)N, glu);
    if (in != ind) fprintf(fw, "%s    }\n", ind);
}

/* A matmul with quantized rows (wq.cuh): for 2..8 tokens gemv_tc.cu's instance `ftc` (-1: none),
 * else gemv.cu's quantized instance `fmv` for up to MV_TMAX tokens (the codes stream once per pass of
 * up to 4 tokens) below the `qg_tmin` tuning key, else up to `qg_tmax` tokens (a8w8's layer matmuls:
 * below `a8_tmin`) qgemm.cu (the codes on tensor cores; 16-bit packages with K % 64 == 0, sm_80+:
 * st->qg_on), else in a8w8 packages with cuBLAS the int8-activation GEMM (emit_act8), in fp8 packages
 * (f8r rows) from a8_tmin tokens where st->f8_on cuBLASLt's e4m3 GEMM (emit_gemm with f8), else the
 * matrix dequantized into the 16-bit scratch a_wdq (dequant.cu) and the cuBLAS path on it. */
static void emit_matmul_q(gen *c, FILE *fw, const char *ind, const char *rows, const char *x, const char *w,
                          const char *bias, const char *y, int64_t K, int64_t N, ir_epi epi, int64_t ldy, int bf,
                          const char *what, const mm_norm *norm, mm_wfmt wf, int fmv, int ftc) {
    const char *targ = rows[0] == 'T' ? "T" : "n_out";
    const long long np = (N + 15) / 16 * 16;
    const int swiglu = epi == IR_EPI_SWIGLU || epi == IR_EPI_GEGLU;
    /* a8w8: the layers' matmuls (not the logits block's vocabulary rows: int32 sums of every
     * position's logits would be 4 bytes x vocabulary a row) take int8 activations from a8_tmin
     * tokens on, so qgemm.cu stops below that */
    const int a8 = c->o->act8 && wf.wq == 8 && !wf.f8 && bf && K % 16 == 0 && rows[0] == 'T' && (!swiglu || np % 32 == 0);
    /* fp8: the f8r matmuls of a8_tmin tokens and more on cuBLASLt's e4m3 GEMM where the GPU runs it
     * (st->f8_on), so qgemm.cu stops below that too */
    const int f8 = wf.f8 && bf && rows[0] == 'T';
    const int qg_hi = (a8 || f8) && c->tune->a8_tmin - 1 < c->tune->qg_tmax ? c->tune->a8_tmin - 1 : c->tune->qg_tmax;
    const int qg = bf && K % 64 == 0 && (wf.wq != 4 || K % wf.wg == 0) && qg_hi >= c->tune->qg_tmin && (!swiglu || np % 32 == 0);
    char comment[512];
    if (ftc >= 0) {
        fprintf(fw, "%sif (%s >= 2 && %s <= st->mvtq_tmax) {\n", ind, rows, rows);
        fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s, &%s, &%s, &%s};\n", ind, targ, norm ? norm->src : x,
                norm ? norm->gamma : "zero", w, bias, y);
        fprintf(fw, "%s    LAUNCH(%d, IG_MVT_GRID_X(%lld, %lld, %d, st->mv_ctas), 1, 1, IG_MVT_BLOCK, IG_MVT_SMEM(%lld, %d), args);\n",
                ind, ftc, (long long)N, (long long)K, swiglu, (long long)K, norm != NULL);
        fprintf(fw, "%s} else ", ind);
    } else {
        fprintf(fw, "%s", ind);
    }
    if (qg) fprintf(fw, "if (%s <= MV_TMAX && !(st->qg_on && %s >= %d)) {\n", rows, rows, c->tune->qg_tmin);
    else fprintf(fw, "if (%s <= MV_TMAX) {\n", rows);
    fprintf(fw, "%s    void *args[] = {&%s, &%s, &%s, &%s, &%s, &%s};\n", ind, targ, norm ? norm->src : x,
            norm ? norm->gamma : "zero", w, bias, y);
    fprintf(fw, "%s    LAUNCH(%d, IG_MV_GRID_XB(%lld, IG_WQ_CODEB(%lld, %d), st->mv_ctas), 1, 1, IG_MV_BLOCK, IG_MV_SMEM(%lld, %d), args);\n",
            ind, fmv, (long long)N, (long long)K, wf.wq, (long long)K, bf ? 2 : 4);
    if (qg) emit_qgemm(c, fw, ind, rows, x, w, bias, y, K, N, epi, ldy, bf, what, norm, wf, qg_hi);
    if (a8) emit_act8(c, fw, ind, x, w, bias, y, K, N, epi, ldy, what, norm);
    if (f8) {
        fprintf(fw, "%s} else if (st->f8_on && %s >= %d) { /* fp8: e4m3 activations on cuBLASLt's e4m3 GEMM */\n", ind, rows,
                c->tune->a8_tmin);
        emit_gemm(c, fw, ind, rows, x, w, bias, y, K, N, epi, ldy, bf, what, norm, 1);
    }
    fprintf(fw, "%s} else {\n", ind);
    char wname[16];
    snprintf(comment, sizeof comment, "%s: w[%lld,%lld] %s -> %s for cuBLAS", what, np, (long long)K,
             wq_label(wf, wname, sizeof wname), dtn(c, bf));
    const int fdq = dequant_fn(c, wf, K, np, comment);
    fprintf(fw, "%s    { void *argsq[] = {&%s, &a_wdq};\n%s      LAUNCH(%d, IG_DQ_GRID_X(%lld, %lld, %d), 1, 1, IG_DQ_BLOCK, 0, argsq); }\n",
            ind, w, ind, fdq, np, (long long)K, wf.wq);
    emit_gemm(c, fw, ind, rows, x, "a_wdq", bias, y, K, N, epi, ldy, bf, what, norm, 0);
    fprintf(fw, "%s}\n", ind);
}

/* ---- lowering: one emit function per op, the table below says which */

/* One node of the step as the launch sequence sees it. */
typedef struct node_ctx {
    int32_t i;              /* node index */
    const ir_node *n;
    int pass;               /* 0 before the layers, 1 the layer loop (weights by lw[]), 2 the logits block */
    const char *ind;        /* indentation of the node's block */
    const char *rows;       /* "T", or "n_out" in the logits block */
    char wexpr[IR_MAX_IN][96]; /* each input's weight variable ("w1"), or "zero" */
} node_ctx;

static ig_status emit_embed(gen *c, node_ctx *x, ig_err *err) {
    const int HID = c->g->hp.hidden;
    char params[256], comment[256], nm[64];
    c->resid = new_buf(c, x->n->out, HID, 0);
    const int tp = c->g->hp.tp > 1;
    char rows[48] = "";
    if (tp) snprintf(rows, sizeof rows, "#define EM_ROWS %d\n", c->g->hp.tp_vocab);
    const mm_wfmt wf = weight_format(c, x->n->in[1]);
    char qp[64] = "";
    if (wf.wq) snprintf(qp, sizeof qp, "#define EM_WQ %d\n#define EM_WG %d\n", wf.wq, wf.wq == 4 ? wf.wg : 32);
    const double scale = c->g->hp.embed_scale > 0 ? c->g->hp.embed_scale : 1.0;
    snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 %d\n#define EM_SCALE ((float)%.17g)\n%s%s", HID, c->bf,
             scale, rows, qp);
    snprintf(comment, sizeof comment, "embed ids[T] -> x[T,%d] f32 from a %s [%d,%d] table%s%s", HID,
             wf.wq == 8 ? "q8r" : wf.wq == 4 ? "q4r" : dtn(c, c->bf), tp ? c->g->hp.tp_vocab : c->g->hp.vocab, HID,
             tp ? " (this rank's rows of the vocabulary)" : "", scale != 1.0 ? ", rows scaled" : "");
    snprintf(nm, sizeof nm, "embed_%d%s%s%s", HID, tp ? "_tp" : "", scale != 1.0 ? "_scaled" : "",
             wf.wq == 8 ? "_q8r" : wf.wq == 4 ? "_q4r" : "");
    const char *k = instance(c, "embed.cu", nm, "EM_NAME", params, comment);
    if (tp) fprintf(c->fw, "%sint lo = st->comm->rank * TP_VOCAB;\n", x->ind);
    fprintf(c->fw, "%s/* %s */\n%svoid *args[] = {&T, &d_ids, &w1, &%s%s};\n%sLAUNCH(%d, IG_EM_GRID_X(T), 1, 1, IG_EM_BLOCK, 0, args);\n",
            x->ind, comment, x->ind, c->bufs.v[c->resid].ident, tp ? ", &lo" : "", x->ind, fn_index(c, k));
    return IG_OK;
}

static ig_status emit_gather_rows(gen *c, node_ctx *x, ig_err *err) {
    const int HID = c->g->hp.hidden;
    char params[256], comment[256], nm[64];
    new_buf(c, x->n->out, HID, 0);
    /* the embedding gather over an f32 table: rows of the residual stream by d_rows */
    snprintf(params, sizeof params, "#define EM_D %d\n#define EM_WBF16 0\n", HID);
    snprintf(comment, sizeof comment, "gather the rows whose logits are wanted: x[rows[i]] -> xo[i], f32 [%d]", HID);
    snprintf(nm, sizeof nm, "gather_rows_%d", HID);
    const char *k = instance(c, "embed.cu", nm, "EM_NAME", params, comment);
    fprintf(c->fw, "%s/* %s */\n%svoid *args[] = {&n_out, &d_rows, &%s, &%s};\n%sLAUNCH(%d, IG_EM_GRID_X(n_out), 1, 1, IG_EM_BLOCK, 0, args);\n",
            x->ind, comment, x->ind, c->bufs.v[c->resid].ident, buf_name(c, x->n->out), x->ind, fn_index(c, k));
    return IG_OK;
}

/* Whether the gate/up matmul node i (SwiGLU / GeGLU epilogue) of an fp8 package hands its
 * activation to the next node as e4m3 codes (act8.cu's A8_GQUANT in place of the 16-bit rows): that
 * node is its only reader, a matmul on f8r rows taking it as x (the down projection). Both take
 * their fp8 branches on the same steps: T >= a8_tmin (at least 9) on a GPU with st->f8_on, past
 * the GEMV paths (up to MV_TMAX = IG_MVT_TMAX = 8 tokens) and qgemm.cu (below a8_tmin for f8r). */
static int glu_codes_fuse(const gen *c, int32_t i) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[i];
    if (i + 1 >= g->n_nodes || !weight_format(c, n->in[2]).f8) return 0;
    const ir_node *d = &g->nodes[i + 1];
    if (d->op != IR_OP_MATMUL_EPI || d->in[0] != n->out || !weight_format(c, d->in[1]).f8) return 0;
    for (int32_t j = 0; j < g->n_nodes; j++)
        for (int k = 0; k < IR_MAX_IN; k++)
            if (g->nodes[j].in[k] == n->out && !(j == i + 1 && k == 0)) return 0;
    return 1;
}

static ig_status emit_norm_matmul(gen *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    const ir_tensor *wt = &c->g->tensors[n->in[2]];
    char lbl[96];
    int64_t N = wt->shape[0], K = wt->shape[1];
    int32_t src = c->bufs.buf_of[n->in[0]] >= 0 ? c->bufs.buf_of[n->in[0]] : c->resid;
    if (K > c->xn_cols) c->xn_cols = K;
    /* TP: all_gather writes d_logits */
    int logits = x->pass == 2 && c->g->hp.tp <= 1, swiglu = n->epi == IR_EPI_SWIGLU || n->epi == IR_EPI_GEGLU;
    if (swiglu && N > c->gu_cols) c->gu_cols = N;
    if (!logits && c->bufs.buf_of[n->out] < 0) new_buf(c, n->out, swiglu ? N / 2 : N, swiglu ? c->bf : 0);
    const char *y = logits ? "d_logits" : buf_name(c, n->out);
    fprintf(c->fw, "%s/* %s: norm_matmul */\n", x->ind, logits ? wt->name : cg_node_label(c->g, n->out, lbl, sizeof lbl));
    if (n->in[3] < 0) snprintf(x->wexpr[3], sizeof x->wexpr[3], "zero");
    mm_norm nrm = {c->bufs.v[src].ident, "w1", n->eps};
    c->f8_glu_codes = swiglu && x->pass == 1 && glu_codes_fuse(c, x->i);
    emit_matmul(c, c->fw, x->ind, x->rows, "xn", "w2", x->wexpr[3], y, K, N, swiglu ? n->epi : IR_EPI_STORE,
                swiglu ? N / 2 : N, c->bf, logits ? "lm_head" : "layers.*", &nrm, weight_format(c, n->in[2]));
    c->f8_glu_codes = 0;
    return IG_OK;
}

static ig_status emit_matmul_epi(gen *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    const ir_tensor *wt = &c->g->tensors[n->in[1]];
    char lbl[96];
    /* stored f32: a tensor-parallel partial product (then all_reduce), or a projection whose
     * output goes through a post-norm (norm_add: GLM-4, Gemma 3) */
    if (n->epi == IR_EPI_STORE && x->pass == 1) {
        if (n->in[2] < 0) snprintf(x->wexpr[2], sizeof x->wexpr[2], "zero");
        new_buf(c, n->out, wt->shape[0], 0);
        fprintf(c->fw, "%s/* %s: matmul */\n", x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl));
        emit_matmul(c, c->fw, x->ind, x->rows, buf_name(c, n->in[0]), "w1", x->wexpr[2], buf_name(c, n->out), wt->shape[1],
                    wt->shape[0], IR_EPI_STORE, wt->shape[0], c->bf, "layers.*", NULL, weight_format(c, n->in[1]));
        return IG_OK;
    }
    if (n->epi != IR_EPI_ACC) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: matmul_epi without a norm must accumulate");
    c->bufs.buf_of[n->out] = c->resid;
    if (n->in[2] < 0) snprintf(x->wexpr[2], sizeof x->wexpr[2], "zero");
    fprintf(c->fw, "%s/* %s: matmul + residual add */\n", x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl));
    emit_matmul(c, c->fw, x->ind, x->rows, buf_name(c, n->in[0]), "w1", x->wexpr[2], c->bufs.v[c->resid].ident,
                wt->shape[1], wt->shape[0], IR_EPI_ACC, wt->shape[0], c->bf, "layers.*", NULL, weight_format(c, n->in[1]));
    return IG_OK;
}

static ig_status emit_rope_kv(gen *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    const int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim, PS = c->o->page_size;
    char params[1024], comment[256], nm[96], lbl[96];
    new_buf(c, n->out, (int64_t)H * D, 0);
    int qk = n->in[1] >= 0;
    const int rot = hp->rope_dim ? hp->rope_dim : D;
    snprintf(params, sizeof params,
             "#define RK_H %d\n#define RK_KV %d\n#define RK_D %d\n#define RK_PS %d\n#define RK_PAGE_BYTES %lluull\n"
             "#define RK_KVBF16 %d\n#define RK_KVQ %d\n#define RK_QKNORM %d\n#define RK_EPS %.9gf\n#define RK_ROT %d\n"
             "#define RK_INTERLEAVE %d\n",
             H, KV, D, PS, (unsigned long long)c->kv_layer_page * hp->n_layers, c->bf && !c->kvq, c->kvq, qk,
             qk ? n->eps : 1e-6, rot, hp->rope_interleaved);
    snprintf(comment, sizeof comment, "%srope%s on q[T,%d] and k[T,%d], k/v into the %s KV pages", qk ? "q/k rms_norm, " : "",
             rot != D ? (hp->rope_interleaved ? " (first dims, interleaved pairs)" : " (first dims)")
                      : hp->rope_interleaved ? " (interleaved pairs)" : "",
             H * D, KV * D, c->kv_name);
    snprintf(nm, sizeof nm, "rope_kv_h%d_kv%d_d%d", H, KV, D);
    const char *k = instance(c, "rope_kv.cu", nm, "RK_NAME", params, comment);
    c->rk_node = x->i;
    const char *ind = x->ind;
    fprintf(c->fw, "%s/* %s: rope_kv (in the attention kernel on decode steps) */\n"
                   "%sif (!(T <= MV_TMAX && decode_only)) {\n"
                   "%s    void *args[] = {&T, &%s, &ifq, &%s, &%s, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv};\n"
                   "%s    LAUNCH(%d, IG_RK_GRID_X(T, %d, %d), IG_RK_GRID_Y(T), 1, IG_RK_BLOCK(%d), 0, args);\n%s}\n",
            ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), ind, ind, buf_name(c, n->in[0]), qk ? x->wexpr[1] : "zero",
            qk ? x->wexpr[2] : "zero", buf_name(c, n->out), ind, fn_index(c, k), H, KV, D, ind);
    return IG_OK;
}

/* Launch-table indices of one attention variant's kernels: prefill, decode, split, split with rope. */
typedef struct at_fns {
    int ap, k, split, rope;
} at_fns;

/* Query heads of one KV head a prefill-attention CTA takes without _flash_ws (AP_HPC: a warpgroup
 * each, one stream of K/V tiles for all): the largest of 4, 2, 1 within --tune ap_heads that divides
 * the group, at most 2 above D 64 (registers of two warpgroups), 1 where the tensor-core path does
 * not run or for quantized KV (its loaders are written for one warpgroup). */
static int ap_hpc_plain(const gen *c) {
    const ir_hparams *hp = &c->g->hp;
    const int G = hp->n_heads / hp->n_kv_heads, D = hp->head_dim;
    int m = c->tune->ap_heads;
    if (D > 64 && m > 2) m = 2;
    if (!c->bf || c->kvq || D % 16 || D > 128) m = 1;
    for (int h = m >= 4 ? 4 : m >= 2 ? 2 : 1; h > 1; h /= 2)
        if (G % h == 0) return h;
    return 1;
}

/* Keys a K/V tile of the prefill attention's warp-specialized form (_flash_ws, --tune ap_ws), 0 where
 * it does not run. It needs wgmma images (the host checks), 16-bit KV and pages whose TMA boxes fall
 * on 8-row swizzle lines (attention_prefill.cu's AP_WS_SHAPE_); the host then makes the KV pool's
 * tensor map. Chosen as measured (H100, templates/cuda/SPEC.md): head size 128 with 2 heads a CTA
 * on 128-key tiles, with one on 64; head size 64 with 4 heads a CTA only (fewer lose to _flash_wg's
 * two CTAs an SM), on 64-key tiles. */
static int ap_ws(const gen *c) {
    const ir_hparams *hp = &c->g->hp;
    const int D = hp->head_dim, PS = c->o->page_size, G = hp->n_heads / hp->n_kv_heads;
    if (!c->tune->ap_wg || !c->tune->ap_ws || !c->bf || c->kvq || PS % 8 || (PS % 64 && 64 % PS)) return 0;
    if (D == 64) return G % 4 == 0 && c->tune->ap_heads >= 2 ? 64 : 0;
    if (D == 128) return ap_hpc_plain(c) == 2 ? 128 : 64;
    return 0;
}

/* Query heads a prefill-attention CTA takes: 4 for _flash_ws at head size 64, else ap_hpc_plain's. */
static int ap_hpc(const gen *c) { return ap_ws(c) && c->g->hp.head_dim == 64 ? 4 : ap_hpc_plain(c); }

/* The attention instances of one variant (win > 0: sliding-window layers; decode, split decode
 * with and without the rope fused in, prefill on tensor cores); their launch-table indices. */
static at_fns attention_instances(gen *c, const ir_node *rk, int win) {
    const ir_hparams *hp = &c->g->hp;
    const int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim, PS = c->o->page_size, bf = c->bf;
    const unsigned long long pb = (unsigned long long)c->kv_layer_page * hp->n_layers;
    const int rk_qk = rk->in[1] >= 0, rot = hp->rope_dim ? hp->rope_dim : D;
    const double scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0 / sqrt((double)D);
    char params[1024], comment[256], nm[96], wname[32] = "";
    if (win) snprintf(wname, sizeof wname, "_window%d", win);
    snprintf(params, sizeof params,
             "#define AT_H %d\n#define AT_KV %d\n#define AT_D %d\n#define AT_PS %d\n#define AT_PAGE_BYTES %lluull\n"
             "#define AT_KVBF16 %d\n#define AT_KVQ %d\n#define AT_OBF16 %d\n#define AT_SCALE %.9gf\n#define AT_SPLIT ATTN_SPLIT\n"
             "#define AT_SPLIT_KEYS %d\n#define AT_QKNORM %d\n#define AT_EPS %.9gf\n#define AT_WINDOW %d\n"
             "#define AT_ROT %d\n#define AT_INTERLEAVE %d\n",
             H, KV, D, PS, pb, bf && !c->kvq, c->kvq, bf, scale, c->tune->at_split_keys, rk_qk, rk_qk ? rk->eps : 1e-6, win,
             rot, hp->rope_interleaved);
    snprintf(comment, sizeof comment, "causal attention%s, %d heads over %d KV heads x %d, paged %s KV -> [T,%d] %s",
             win ? " over a sliding window" : "", H, KV, D, c->kv_name, H * D, dtn(c, bf));
    snprintf(nm, sizeof nm, "attention_h%d_kv%d_d%d%s", H, KV, D, wname);
    const char *k = instance(c, "attention.cu", nm, "AT_NAME", params, comment);
    if (!win) snprintf(c->at_params, sizeof c->at_params, "%s", params);
    snprintf(params, sizeof params,
             "#define AP_H %d\n#define AP_KV %d\n#define AP_D %d\n#define AP_PS %d\n#define AP_PAGE_BYTES %lluull\n"
             "#define AP_KVBF16 %d\n#define AP_KVQ %d\n#define AP_OBF16 %d\n#define AP_SCALE %.9gf\n#define AP_WINDOW %d\n"
             "#define AP_HPC %d\n%s",
             H, KV, D, PS, pb, bf && !c->kvq, c->kvq, bf, scale, win, ap_hpc(c),
             !c->tune->ap_wg ? "#define AP_WG 0\n" : !ap_ws(c) ? "#define AP_WS 0\n" : ap_ws(c) == 128 ? "#define AP_WBN 128\n" : "");
    snprintf(comment, sizeof comment, "causal flash attention%s for prefill runs (tensor cores), %d heads over %d KV heads x %d",
             win ? " over a sliding window" : "", H, KV, D);
    snprintf(nm, sizeof nm, "attention_prefill_h%d_kv%d_d%d%s", H, KV, D, wname);
    const char *ap = instance(c, "attention_prefill.cu", nm, "AP_NAME", params, comment);
    char split[112], split_rope[112];
    snprintf(split, sizeof split, "%s_split", k ? k : "");
    snprintf(split_rope, sizeof split_rope, "%s_split_rope", k ? k : "");
    /* launch-table order: prefill, decode, split, split with rope (as kernel_names lists them) */
    at_fns f = {fn_index(c, ap), fn_index(c, k), 0, 0};
    f.split = fn_index(c, split), f.rope = fn_index(c, split_rope);
    return f;
}

/* Layers with a sliding window, of all (hp.layer_sliding; a window on no layer is none). */
static int sliding_layers(const ir_hparams *hp) {
    int n = 0;
    for (int L = 0; L < hp->n_layers && L < IR_MAX_LAYER_TYPES && hp->sliding_window > 0; L++) n += hp->layer_sliding[L];
    return n;
}

static ig_status emit_attention(gen *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    const int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim;
    char lbl[96];
    new_buf(c, n->out, (int64_t)H * D, c->bf);
    const ir_node *rk = c->rk_node >= 0 && c->g->nodes[c->rk_node].out == n->in[0] ? &c->g->nodes[c->rk_node] : NULL;
    if (!rk) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): attention whose q does not come from rope_kv");
    /* [0]: the global layers' kernels, [1]: the sliding-window layers' (AT_WINDOW / AP_WINDOW) */
    const int nsl = x->pass == 1 ? sliding_layers(hp) : 0;
    at_fns f[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (nsl < hp->n_layers) f[0] = attention_instances(c, rk, 0);
    if (nsl > 0) f[1] = attention_instances(c, rk, hp->sliding_window);
    if (nsl == hp->n_layers) f[0] = f[1];
    char fap[64], fk[64], fsplit[64], frope[64];
    if (nsl > 0 && nsl < hp->n_layers) { /* chosen per layer */
        snprintf(fap, sizeof fap, "layer_sliding[l] ? %d : %d", f[1].ap, f[0].ap);
        snprintf(fk, sizeof fk, "layer_sliding[l] ? %d : %d", f[1].k, f[0].k);
        snprintf(fsplit, sizeof fsplit, "layer_sliding[l] ? %d : %d", f[1].split, f[0].split);
        snprintf(frope, sizeof frope, "layer_sliding[l] ? %d : %d", f[1].rope, f[0].rope);
    } else {
        snprintf(fap, sizeof fap, "%d", f[0].ap), snprintf(fk, sizeof fk, "%d", f[0].k);
        snprintf(fsplit, sizeof fsplit, "%d", f[0].split), snprintf(frope, sizeof frope, "%d", f[0].rope);
    }
    char qn[96] = "zero", kn[96] = "zero";
    if (rk->in[1] >= 0) {
        cg_weight_ref(c->plan, &c->lay, x->pass == 1, c->rk_node, 1, rk->in[1], qn, sizeof qn);
        cg_weight_ref(c->plan, &c->lay, x->pass == 1, c->rk_node, 2, rk->in[2], kn, sizeof kn);
    }
    const char *o_ = buf_name(c, n->out), *q_ = buf_name(c, n->in[0]), *ind = x->ind;
    fprintf(c->fw, "%s/* %s: attention%s (split over the context for decode-sized steps) */\n", ind,
            cg_node_label(c->g, n->out, lbl, sizeof lbl),
            nsl == hp->n_layers ? " over a sliding window" : nsl ? " (a sliding window on the layers layer_sliding marks)" : "");
    fprintf(c->fw, "%sif (T <= MV_TMAX && decode_only) {\n"
                   "%s    /* one token per sequence: rope_kv fused in */\n"
                   "%s    CUdeviceptr qn = %s, kn = %s;\n"
                   "%s    void *args[] = {&T, &%s, &ifq, &qn, &kn, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &attn_ws, &attn_cnt, &%s};\n"
                   "%s    LAUNCH(%s, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), IG_AT_SPLITS(T, %d, ATTN_SPLIT, st->at_ctas), IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n",
            ind, ind, ind, qn, kn, ind, buf_name(c, rk->in[0]), o_, ind, frope, KV, KV, H, KV, D);
    fprintf(c->fw, "%s} else if (T <= MV_TMAX) {\n"
                   "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &attn_ws, &attn_cnt, &%s};\n"
                   "%s    LAUNCH(%s, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), IG_AT_SPLITS(T, %d, ATTN_SPLIT, st->at_ctas), IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n",
            ind, ind, q_, o_, ind, fsplit, KV, KV, H, KV, D);
    fprintf(c->fw, "%s} else if (!prefill_runs) {\n"
                   "%s    /* many decode tokens: one CTA per (token, KV head) keeps the GPU busy */\n"
                   "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &%s};\n"
                   "%s    LAUNCH(%s, IG_AT_GRID_X(T, %d), IG_AT_GRID_Y(T), 1, IG_AT_BLOCK, IG_AT_SMEM(%d, %d, %d), args);\n",
            ind, ind, ind, q_, o_, ind, fk, KV, H, KV, D);
    const int hpc = ap_hpc(c);
    fprintf(c->fw, "%s} else {\n"
                   "%s    void *args[] = {&T, &%s, &kv, &kv_off, &d_pos, &d_seq, &d_pages, &mpv, &%s, &st->kvmap};\n",
            ind, ind, q_, o_);
    if (ap_ws(c)) /* the warp-specialized form where the pool's tensor map was made (KV_TMAP) */
        fprintf(c->fw, "%s    if (st->kvmap_on)\n"
                       "%s        LAUNCH(%s, IG_AP_GRID_XH(%d, %d), IG_AP_GRID_Y(T), 1, IG_AP_BLOCKW(%d), IG_AP_SMEM_WS(%d, %d, %d), args);\n"
                       "%s    else\n",
                ind, ind, fap, H, hpc, hpc, D, hpc, ap_ws(c), ind);
    fprintf(c->fw, "%s%s    LAUNCH(%s, IG_AP_GRID_XH(%d, %d), IG_AP_GRID_Y(T), 1, IG_AP_BLOCKH(%d), IG_AP_SMEM_H(%d, %d), args);\n"
                   "%s}\n",
            ind, ap_ws(c) ? "    " : "", fap, H, hpc, hpc, D, hpc, ind);
    return IG_OK;
}

/* Post-norm into the residual stream (GLM-4, Gemma 3): resid += rms_norm(y) * gamma, y the f32
 * output of the projection before it (rmsnorm.cu with RN_ADD). */
static ig_status emit_norm_add(gen *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    const int64_t K = c->g->tensors[n->in[1]].shape[1];
    char params[256], comment[256], nm[64], lbl[96];
    if (x->pass != 1) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): norm_add outside a layer");
    if (c->bufs.buf_of[n->in[1]] < 0 || c->resid < 0)
        return ig_fail(err, IG_ERR_INVALID, "codegen (cuda): norm_add reads a tensor no earlier node wrote");
    c->bufs.buf_of[n->out] = c->resid;
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_ADD 1\n", (long long)K, n->eps);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g, added to the residual stream", (long long)K, n->eps);
    snprintf(nm, sizeof nm, "rms_norm_add_%lld", (long long)K);
    const char *rn = instance(c, "rmsnorm.cu", nm, "RN_NAME", params, comment);
    fprintf(c->fw, "%s/* %s: norm_add (post-norm, then residual add) */\n"
                   "%svoid *args[] = {&%s, &%s, &%s, &%s};\n"
                   "%sLAUNCH(%d, IG_RN_GRID_X(%s), 1, 1, IG_RN_BLOCK(%lld), 0, args);\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), x->ind, x->rows, buf_name(c, n->in[1]), x->wexpr[2],
            c->bufs.v[c->resid].ident, x->ind, fn_index(c, rn), x->rows, (long long)K);
    return IG_OK;
}

/* Tensor parallel: the ranks' partial results summed in place on the stream (NCCL through the
 * runtime's ig_model_comm), then, for epi acc, added to the residual stream. */
static ig_status emit_all_reduce(gen *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    int64_t cols = c->g->tensors[n->in[0]].shape[1];
    char params[128], comment[160], nm[64], lbl[96];
    const char *in = buf_name(c, n->in[0]);
    fprintf(c->fw, "%s/* %s: all_reduce of the ranks' partial results */\n"
                   "%sif (st->comm->all_reduce_sum_dev(st->comm, %s, (int64_t)%s * %lld, st->stream)) return IG_MODEL_ERR_COMM;\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), x->ind, in, x->rows, (long long)cols);
    if (n->epi != IR_EPI_ACC) {
        c->bufs.buf_of[n->out] = c->bufs.buf_of[n->in[0]];
        return IG_OK;
    }
    c->bufs.buf_of[n->out] = c->resid;
    snprintf(params, sizeof params, "#define EP_N %lld\n", (long long)cols);
    snprintf(comment, sizeof comment, "the all-reduced partial result added to the residual stream, [T,%lld] f32", (long long)cols);
    snprintf(nm, sizeof nm, "add_n%lld", (long long)cols);
    const char *k = instance(c, "epilogue.cu", nm, "EP_ADD_NAME", params, comment);
    fprintf(c->fw, "%svoid *args[] = {&T, &%s, &%s};\n%sLAUNCH(%d, IG_EP_BIAS_GRID_X(T, %lld), IG_EP_BIAS_GRID_Y(T), 1, IG_EP_BLOCK, 0, args);\n",
            x->ind, c->bufs.v[c->resid].ident, in, x->ind, fn_index(c, k), (long long)cols);
    return IG_OK;
}

/* Tensor parallel: every rank's logits columns gathered, then put in vocabulary order in d_logits. */
static ig_status emit_all_gather(gen *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    char params[160], comment[160];
    if (x->pass != 2) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): all_gather is for the logits only");
    new_buf(c, x->n->out, (int64_t)hp->tp * hp->tp_vocab, 0);
    const char *in = buf_name(c, x->n->in[0]), *all = buf_name(c, x->n->out);
    snprintf(params, sizeof params, "#define EP_N %d\n#define EP_NL %d\n", hp->vocab, hp->tp_vocab);
    snprintf(comment, sizeof comment, "gathered logits [%d ranks][n_out][%d] -> d_logits [n_out][%d]", hp->tp, hp->tp_vocab, hp->vocab);
    const char *k = instance(c, "epilogue.cu", "unshard_logits", "EP_UNSHARD_NAME", params, comment);
    fprintf(c->fw, "%s/* logits: all_gather of every rank's vocabulary slice */\n"
                   "%sif (st->comm->all_gather_dev(st->comm, %s, %s, (int64_t)n_out * TP_VOCAB, st->stream)) return IG_MODEL_ERR_COMM;\n"
                   "%svoid *args[] = {&n_out, &%s, &d_logits};\n"
                   "%sLAUNCH(%d, IG_EP_BIAS_GRID_X(n_out, VOCAB), IG_EP_BIAS_GRID_Y(n_out), 1, IG_EP_BLOCK, 0, args);\n",
            x->ind, x->ind, in, all, x->ind, all, x->ind, fn_index(c, k));
    return IG_OK;
}

/* moe.cu's two-launch decode for the model's MoE blocks: --tune moe_dec, and 8 token rows of the
 * hidden size in the package's type fit _dgu's 96 KB of shared memory. */
static int moe_dec_ok(const gen *c) {
    return c->tune->moe_dec && (int64_t)8 /* launch.h's IG_MO_DTMAX */ * c->g->hp.hidden * (c->bf ? 2 : 4) <= 96 * 1024;
}

/* Whether node i + 1 is a MoE block (routed or shared) reading tensor t and no other node reads
 * t: nothing between them changes the residual, so the block can normalize it itself. (Qwen2-MoE's
 * shared expert reads the norm after the routed block has added into the residual: not folded.) */
static int next_is_lone_moe_reader(const gen *c, int32_t i, int32_t t) {
    if (i + 1 >= c->g->n_nodes) return 0;
    const ir_node *nx = &c->g->nodes[i + 1];
    if ((nx->op != IR_OP_MOE && nx->op != IR_OP_MOE_SHARED) || nx->in[0] != t) return 0;
    int readers = 0;
    for (int32_t j = 0; j < c->g->n_nodes; j++)
        for (int s = 0; s < IR_MAX_IN; s++) readers += c->g->nodes[j].in[s] == t;
    return readers == 1;
}

/* A layer's RMSNorm whose output several ops read (the MoE router and experts): f32 rows. When
 * only the next node, a MoE block on the two-launch decode, reads it, decode-sized steps skip it
 * (the block's _dgu applies it) and the block finds what it needs in c->rn_*. */
static ig_status emit_rmsnorm(gen *c, node_ctx *x, ig_err *err) {
    const ir_node *n = x->n;
    const int64_t K = c->g->tensors[n->in[1]].shape[0];
    char params[256], comment[256], nm[64], lbl[96];
    if (x->pass != 1) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): a lone rms_norm outside a layer");
    int32_t src = c->bufs.buf_of[n->in[0]] >= 0 ? c->bufs.buf_of[n->in[0]] : c->resid;
    if (src < 0) return ig_fail(err, IG_ERR_INVALID, "codegen (cuda): rms_norm reads a tensor no earlier node wrote");
    new_buf(c, n->out, K, 0);
    snprintf(params, sizeof params, "#define RN_D %lld\n#define RN_EPS %.9gf\n#define RN_OBF16 0\n", (long long)K, n->eps);
    snprintf(comment, sizeof comment, "rms_norm rows of %lld, eps %g -> f32", (long long)K, n->eps);
    snprintf(nm, sizeof nm, "rms_norm_%lld_f32", (long long)K);
    const char *rn = instance(c, "rmsnorm.cu", nm, "RN_NAME", params, comment);
    const int fold = moe_dec_ok(c) && K == c->g->hp.hidden && next_is_lone_moe_reader(c, x->i, n->out) &&
                     strlen(c->bufs.v[src].ident) < sizeof c->rn_src;
    c->rn_out = -1;
    if (fold) {
        int32_t ti = n->in[1];
        c->rn_out = n->out, c->rn_eps = n->eps;
        snprintf(c->rn_src, sizeof c->rn_src, "%s", c->bufs.v[src].ident);
        cg_weight_ref(c->plan, &c->lay, 1, x->i, 1, ti, c->rn_gamma, sizeof c->rn_gamma);
    }
    fprintf(c->fw, "%s/* %s: rms_norm%s */\n%s%svoid *args[] = {&%s, &%s, &%s, &%s};\n"
                   "%sLAUNCH(%d, IG_RN_GRID_X(%s), 1, 1, IG_RN_BLOCK(%lld), 0, args);%s\n",
            x->ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), fold ? " (decode-sized steps: in the MoE blocks' _dgu)" : "",
            x->ind, fold ? "if (T > IG_MO_DTMAX) { " : "", x->rows, c->bufs.v[src].ident, x->wexpr[1], buf_name(c, n->out),
            x->ind, fn_index(c, rn), x->rows, (long long)K, fold ? " }" : "");
    return IG_OK;
}

/* The oldest SM of the package's architectures ("sm_80,sm_90" -> 80). */
static int min_sm(const gen *c) {
    int m = 1 << 30;
    for (const char *p = strstr(c->archs, "sm_"); p; p = strstr(p + 3, "sm_"))
        if (atoi(p + 3) < m) m = atoi(p + 3);
    return m == 1 << 30 ? 0 : m;
}

static const char *wq_name(mm_wfmt f) { return f.wq == 8 ? "q8r" : f.wq == 4 ? "q4r" : "16-bit"; }

/* Quantized experts (format f, K columns, NP rows stacked): the launch that dequantizes weight
 * variable w into the 16-bit scratch a_wdq, as one line into out (empty for 16-bit experts). */
static void moe_dequant(gen *c, mm_wfmt f, int64_t K, int64_t NP, const char *w, const char *what, char *out, size_t cap) {
    char comment[192];
    out[0] = 0;
    if (!f.wq) return;
    snprintf(comment, sizeof comment, "layers.*: the experts' stacked %s rows [%lld,%lld] %s -> %s for the prefill kernels", what,
             (long long)NP, (long long)K, wq_name(f), dtn(c, c->bf));
    const int fdq = dequant_fn(c, f, K, NP, comment);
    snprintf(out, cap, "{ void *argsq[] = {&%s, &a_wdq}; LAUNCH(%d, IG_DQ_GRID_X(%lld, %lld, %d), 1, 1, IG_DQ_BLOCK, 0, argsq); }\n",
             w, fdq, (long long)NP, (long long)K, f.wq);
}

/* The experts' block (MOE: router, top-k, the selected experts' gate/up and down) or the shared
 * expert (MOE_SHARED), added to the residual stream: moe.cu's three kernels. Each (token, selected
 * expert) reads only that expert's rows. */
/* What an MoE block's launches name: its moe.cu instance, its input rows and the residual, the
 * weight variables (or a_wdq) its 16-bit kernels read, the dequantizing launches before them (""
 * for 16-bit experts), and its shape. */
typedef struct moe_em {
    const char *mo, *in, *res, *w2, *w3, *dq_gu, *dq_dn;
    int HID, E, K, shared;
    int64_t I;
} moe_em;

/* The warp-specialized wgmma products (moe.cu _gu_wg / _down_wg) at indent ind, where the image has
 * wgmma and the driver encodes the four tensor maps; opens the "else" that the mma.sync launches
 * fill (fx, fgw, fdw: the _xround, _gu_wg and _down_wg kernels' names). */
static void emit_moe_wg(gen *c, const moe_em *m, const char *ind, const char *fx, const char *fgw, const char *fdw) {
    const char *mo = m->mo, *in = m->in, *w2 = m->w2, *w3 = m->w3, *dq_dn = m->dq_dn;
    const int HID = m->HID, E = m->E, K = m->K, shared = m->shared;
    const int64_t I = m->I;
    char fxg[96];
    snprintf(fxg, sizeof fxg, "%s_xgather", mo ? mo : "");
    /* the pairs' token rows in _group's order: moe_y's room, free until _down_wg writes it */
    const char *xrows = shared ? "moe_xb" : "moe_y";
    fprintf(c->fw, "%s    /* warp-specialized wgmma products fed by TMA: %s */\n"
                   "%s    CUtensorMap m_x, m_gu, m_h, m_dn;\n"
                   "%s    if (st->wg && tile_map(st, &m_x, %s, (uint64_t)T * %d, %d, IG_MO_TC_BM) &&\n"
                   "%s        tile_map(st, &m_gu, %s, %lld, %d, IG_MO_WG_BN) && tile_map(st, &m_h, moe_h, (uint64_t)T * %d, %lld, IG_MO_TC_BM) &&\n"
                   "%s        tile_map(st, &m_dn, %s, %lld, %lld, IG_MO_WG_BN)) {\n",
            ind, shared ? "the tokens' rows, moe_xb" : "the pairs' rows in _group's order, in moe_y's room", ind, ind, xrows, K, HID, ind, w2, (long long)E * 2 * I, HID, K, (long long)I, ind, w3, (long long)E * HID,
            (long long)I);
    if (shared)
        fprintf(c->fw, "%s        { void *args[] = {&T, &%s, &moe_xb};\n"
                       "%s          LAUNCH(%d, IG_MO_SUM_GRID_X(%d), T, 1, IG_MO_BLOCK, 0, args); }\n",
                ind, in, ind, fn_index(c, fx), HID);
    else
        fprintf(c->fw, "%s        { void *args[] = {&T, &%s, &moe_list, &moe_y};\n"
                       "%s          LAUNCH(%d, IG_MO_XG_GRID(T, %d, %d), 1, 1, IG_MO_BLOCK, 0, args); }\n",
                ind, in, ind, fn_index(c, fxg), K, HID);
    fprintf(c->fw, "%s        { void *args[] = {&T, &moe_off, &moe_h, &m_x, &m_gu};\n"
                   "%s          LAUNCH(%d, IG_MO_WG_GU_GRID_X(%lld), IG_MO_TC_GRID_Y(T, %d, %d), 1, IG_MO_WG_THREADS, IG_MO_WG_SMEM, args); }\n",
            ind, ind, fn_index(c, fgw), (long long)I, K, E);
    if (*dq_dn) fprintf(c->fw, "%s        %s", ind, dq_dn);
    fprintf(c->fw, "%s        { void *args[] = {&T, &moe_off, &moe_list, &moe_wt, &moe_y, &m_h, &m_dn};\n"
                   "%s          LAUNCH(%d, IG_MO_WG_DN_GRID_X(%d), IG_MO_TC_GRID_Y(T, %d, %d), 1, IG_MO_WG_THREADS, IG_MO_WG_SMEM, args); }\n"
                   "%s    } else {\n",
            ind, ind, fn_index(c, fdw), HID, K, E, ind);
}

/* The launches of steps past the decode kernels at indent ind: expert-grouped on tensor cores
 * (16-bit types, K a multiple of the tile's 32, every architecture sm_80+) or by 8 staged weight
 * rows of an expert a CTA (in at most 96 KB) for prefill-sized steps, the per-pair kernels for the
 * rest. */
static void emit_moe_prefill(gen *c, const moe_em *m, const char *ind) {
    const char *mo = m->mo, *in = m->in, *res = m->res, *w2 = m->w2, *w3 = m->w3, *dq_gu = m->dq_gu, *dq_dn = m->dq_dn;
    const int HID = m->HID, E = m->E, K = m->K, shared = m->shared;
    const int64_t I = m->I;
    char fg[80], fd[80];
    snprintf(fg, sizeof fg, "%s_gu", mo ? mo : "");
    snprintf(fd, sizeof fd, "%s_down", mo ? mo : "");
    const int tc = c->bf && HID % 32 == 0 && I % 32 == 0 && min_sm(c) >= 80;
    const int grouped = tc || ((int64_t)HID * 32 <= 96 * 1024 && I * 32 <= 96 * 1024);
    if (tc) {
        char fgr[96], fx[96], fgg[96], fgd[96], fgw[96], fdw[96], fs[96];
        snprintf(fgr, sizeof fgr, "%s_group", mo ? mo : "");
        snprintf(fx, sizeof fx, "%s_xround", mo ? mo : "");
        snprintf(fgg, sizeof fgg, "%s_gu_tc", mo ? mo : "");
        snprintf(fgd, sizeof fgd, "%s_down_tc", mo ? mo : "");
        snprintf(fgw, sizeof fgw, "%s_gu_wg", mo ? mo : "");
        snprintf(fdw, sizeof fdw, "%s_down_wg", mo ? mo : "");
        snprintf(fs, sizeof fs, "%s_sum", mo ? mo : "");
        if (2 * (E + 1) > c->moe_e) c->moe_e = 2 * (E + 1);
        c->moe_tc = 1;
        fprintf(c->fw, "%sif (T > MV_TMAX) { /* prefill: tokens grouped by expert, tensor cores */\n", ind);
        if (!shared)
            fprintf(c->fw, "%s    { void *args[] = {&T, &moe_sel, &moe_off, &moe_list};\n"
                           "%s      LAUNCH(%d, 1, 1, 1, 1024, 0, args); }\n",
                    ind, ind, fn_index(c, fgr));
        if (*dq_gu) fprintf(c->fw, "%s    %s", ind, dq_gu);
        const char *ind_tc = ind;
        char ind_wg[64];
        if (sm90_wg_ok(c, c->tune->moe_wg)) {
            emit_moe_wg(c, m, ind, fx, fgw, fdw);
            snprintf(ind_wg, sizeof ind_wg, "%s    ", ind);
            ind_tc = ind_wg;
        }
        fprintf(c->fw, "%s    { void *args[] = {&T, &%s, &moe_xb};\n"
                       "%s      LAUNCH(%d, IG_MO_SUM_GRID_X(%d), T, 1, IG_MO_BLOCK, 0, args); }\n",
                ind_tc, in, ind_tc, fn_index(c, fx), HID);
        fprintf(c->fw, "%s    { void *args[] = {&T, &moe_xb, &moe_off, &moe_list, &%s, &moe_h};\n"
                       "%s      LAUNCH(%d, IG_MO_TC_GU_GRID_X(%lld), IG_MO_TC_GRID_Y(T, %d, %d), 1, IG_MO_TC_THREADS, IG_MO_TC_SMEM, args); }\n",
                ind_tc, w2, ind_tc, fn_index(c, fgg), (long long)I, K, E);
        if (*dq_dn) fprintf(c->fw, "%s    %s", ind_tc, dq_dn);
        fprintf(c->fw, "%s    { void *args[] = {&T, &moe_h, &moe_off, &moe_list, &moe_wt, &%s, &moe_y};\n"
                       "%s      LAUNCH(%d, IG_MO_TC_DN_GRID_X(%d), IG_MO_TC_GRID_Y(T, %d, %d), 1, IG_MO_TC_THREADS, IG_MO_TC_SMEM, args); }\n",
                ind_tc, w3, ind_tc, fn_index(c, fgd), HID, K, E);
        if (ind_tc != ind) fprintf(c->fw, "%s    }\n", ind);
        fprintf(c->fw, "%s    { void *args[] = {&T, &moe_y, &%s};\n"
                       "%s      LAUNCH(%d, IG_MO_SUM_GRID_X(%d), T, 1, IG_MO_BLOCK, 0, args); }\n"
                       "%s} else {\n",
                ind, res, ind, fn_index(c, fs), HID, ind);
    } else if (grouped) {
        char fgr[96], fgg[96], fgd[96], fs[96];
        snprintf(fgr, sizeof fgr, "%s_group", mo ? mo : "");
        snprintf(fgg, sizeof fgg, "%s_gu_grouped", mo ? mo : "");
        snprintf(fgd, sizeof fgd, "%s_down_grouped", mo ? mo : "");
        snprintf(fs, sizeof fs, "%s_sum", mo ? mo : "");
        if (2 * (E + 1) > c->moe_e) c->moe_e = 2 * (E + 1); /* offsets, then the tensor-core tiles' scan (_group) */
        fprintf(c->fw, "%sif (T > MV_TMAX) { /* prefill: tokens grouped by expert */\n", ind);
        if (!shared)
            fprintf(c->fw, "%s    { void *args[] = {&T, &moe_sel, &moe_off, &moe_list};\n"
                           "%s      LAUNCH(%d, 1, 1, 1, 1024, 0, args); }\n",
                    ind, ind, fn_index(c, fgr));
        if (*dq_gu) fprintf(c->fw, "%s    %s", ind, dq_gu);
        fprintf(c->fw, "%s    { void *args[] = {&T, &%s, &moe_off, &moe_list, &%s, &moe_h};\n"
                       "%s      LAUNCH(%d, IG_MO_GGU_GRID_X(%lld), %d, 1, IG_MO_BLOCK, IG_MO_GSMEM(%d, %d), args); }\n",
                ind, in, w2, ind, fn_index(c, fgg), (long long)I, E, HID, c->bf ? 2 : 4);
        if (*dq_dn) fprintf(c->fw, "%s    %s", ind, dq_dn);
        fprintf(c->fw, "%s    { void *args[] = {&T, &moe_h, &moe_off, &moe_list, &moe_wt, &%s, &moe_y};\n"
                       "%s      LAUNCH(%d, IG_MO_GDN_GRID_X(%d), %d, 1, IG_MO_BLOCK, IG_MO_GSMEM(%lld, %d), args); }\n",
                ind, w3, ind, fn_index(c, fgd), HID, E, (long long)I, c->bf ? 2 : 4);
        fprintf(c->fw, "%s    { void *args[] = {&T, &moe_y, &%s};\n"
                       "%s      LAUNCH(%d, IG_MO_SUM_GRID_X(%d), T, 1, IG_MO_BLOCK, 0, args); }\n"
                       "%s} else {\n",
                ind, res, ind, fn_index(c, fs), HID, ind);
    }
    const char *ind2 = grouped ? "    " : "";
    if (*dq_gu) fprintf(c->fw, "%s%s%s", ind, ind2, dq_gu);
    fprintf(c->fw, "%s%s{ void *args[] = {&T, &%s, &moe_sel, &%s, &moe_h};\n"
                   "%s%s  LAUNCH(%d, IG_MO_GU_GRID_X(%lld), IG_MO_GU_GRID_Y(T, %d), 1, IG_MO_BLOCK, 0, args); }\n",
            ind, ind2, in, w2, ind, ind2, fn_index(c, fg), (long long)I, K);
    if (*dq_dn) fprintf(c->fw, "%s%s%s", ind, ind2, dq_dn);
    fprintf(c->fw, "%s%s{ void *args[] = {&T, &moe_h, &moe_sel, &moe_wt, &%s, &%s};\n"
                   "%s%s  LAUNCH(%d, IG_MO_DN_GRID_X(%d), IG_MO_DN_GRID_Y(T), 1, IG_MO_BLOCK, 0, args); }\n",
            ind, ind2, w3, res, ind, ind2, fn_index(c, fd), HID);
    if (grouped) fprintf(c->fw, "%s}\n", ind);
}

static ig_status emit_moe(gen *c, node_ctx *x, ig_err *err) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *n = x->n;
    const int shared = n->op == IR_OP_MOE_SHARED, HID = hp->hidden;
    const int64_t I = shared ? hp->shared_intermediate : hp->moe_intermediate;
    const int E = shared ? 1 : hp->n_experts, K = shared ? 1 : hp->top_k;
    char params[512], comment[256], nm[64], lbl[96], fr[80];
    if (x->pass != 1 || n->epi != IR_EPI_ACC)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): %s under tensor parallelism is not on CUDA yet; compile "
                       "it for the CPU", ir_op_name(n->op));
    if (c->bufs.buf_of[n->in[0]] < 0 || c->resid < 0)
        return ig_fail(err, IG_ERR_INVALID, "codegen (cuda): %s reads a tensor no earlier node wrote", ir_op_name(n->op));
    if (HID % 8 || I % 16)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): experts of %lld rows over hidden %d (moe.cu: multiples of "
                       "16 and 8)", (long long)I, HID);
    /* quantized experts (q8r / q4r rows): _dgu / _ddown read the codes; longer steps dequantize
     * the layer's stack into a_wdq for the 16-bit kernels */
    const mm_wfmt gwf = weight_format(c, n->in[2]), dwf = weight_format(c, n->in[3]);
    const int quant = gwf.wq || dwf.wq;
    if (quant && !moe_dec_ok(c))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): quantized experts decode through moe.cu's two-launch kernels, "
                       "which need --tune moe_dec=1 and 8 token rows of hidden %d in 96 KB of shared memory; keep the experts "
                       "in 16 bits with --quant-skip experts.gate_up,experts.down", HID);
    c->bufs.buf_of[n->out] = c->resid;
    if (K > c->moe_k) c->moe_k = K;
    if (K * I > c->moe_ki) c->moe_ki = K * I;
    snprintf(params, sizeof params,
             "#define MO_D %d\n#define MO_E %d\n#define MO_TOPK %d\n#define MO_I %lld\n#define MO_NORM %d\n"
             "#define MO_WBF16 %d\n#define MO_XBF16 %d\n#define MO_SHARED %d\n"
             "#define MO_WQ %d\n#define MO_WG %d\n#define MO_DN_WQ %d\n#define MO_DN_WG %d\n",
             HID, E, K, (long long)I, shared ? 0 : hp->norm_topk, c->bf, c->bf, shared, gwf.wq, gwf.wq == 4 ? gwf.wg : 32,
             dwf.wq, dwf.wq == 4 ? dwf.wg : 32);
    char fmts[48] = "";
    if (quant) snprintf(fmts, sizeof fmts, ", rows %s / %s", wq_name(gwf), wq_name(dwf));
    if (shared)
        snprintf(comment, sizeof comment, "layers.*: shared expert (%lld%s), scaled by sigmoid(x . gate), added to the residual",
                 (long long)I, fmts);
    else
        snprintf(comment, sizeof comment, "layers.*: mixture of %d experts (%lld%s), top-%d of the f32 router softmax%s, added "
                 "to the residual", E, (long long)I, fmts, K, hp->norm_topk ? " renormalized" : "");
    if (shared) snprintf(nm, sizeof nm, "shared_expert_i%lld%s", (long long)I, quant ? "_q" : "");
    else snprintf(nm, sizeof nm, "moe_e%d_k%d_i%lld%s", E, K, (long long)I, quant ? "_q" : "");
    /* steps past the decode kernels: the 16-bit kernels read w2 / w3 or, quantized, a_wdq after dq_gu / dq_dn */
    char dq_gu[512] = "", dq_dn[512] = "";
    const char *w2 = gwf.wq ? "a_wdq" : "w2", *w3 = dwf.wq ? "a_wdq" : "w3";
    moe_dequant(c, gwf, HID, (int64_t)E * 2 * I, "w2", "gate/up", dq_gu, sizeof dq_gu);
    moe_dequant(c, dwf, I, (int64_t)E * HID, "w3", "down", dq_dn, sizeof dq_dn);
    const char *mo = instance(c, "moe.cu", nm, "MO_NAME", params, comment);
    snprintf(fr, sizeof fr, "%s_route", mo ? mo : "");
    const char *in = buf_name(c, n->in[0]), *res = c->bufs.v[c->resid].ident, *ind = x->ind;
    fprintf(c->fw, "%s/* %s: %s */\n", ind, cg_node_label(c->g, n->out, lbl, sizeof lbl), ir_op_name(n->op));
    /* decode-sized steps: two launches over all SMs (_dgu: router, top-k, gate/up; _ddown: down
     * into the residual) where the token rows fit _dgu's shared memory */
    const int aes = c->bf ? 2 : 4, dec = moe_dec_ok(c), fold = dec && n->in[0] == c->rn_out;
    char ind_in[64];
    if (dec) {
        char fdg[96], fdd[96];
        snprintf(fdg, sizeof fdg, "%s_dgu", mo ? mo : "");
        snprintf(fdd, sizeof fdd, "%s_ddown", mo ? mo : "");
        if (E > c->moe_lg) c->moe_lg = E;
        c->moe_dec = 1;
        fprintf(c->fw, "%sif (T <= IG_MO_DTMAX) { /* decode-sized: two launches over all SMs%s */\n", ind,
                fold ? ", the layer's rms_norm in _dgu" : "");
        if (fold)
            fprintf(c->fw, "%s    CUdeviceptr rn_g = %s;\n%s    float rn_eps = %.9gf;\n", ind, c->rn_gamma, ind, c->rn_eps);
        else
            fprintf(c->fw, "%s    CUdeviceptr rn_g = 0;\n%s    float rn_eps = 0.0f;\n", ind, ind);
        fprintf(c->fw, "%s    { void *args[] = {&T, &%s, &rn_g, &rn_eps, &w1, &moe_lg, &moe_sel, &moe_wt, &w2, &moe_h, &moe_sync};\n"
                       "%s      LAUNCH(%d, st->n_sm, 1, 1, IG_MO_DBLOCK, IG_MO_DSMEM(T, %d, %d), args); }\n"
                       "%s    { void *args[] = {&T, &moe_h, &moe_sel, &moe_wt, &w3, &%s};\n"
                       "%s      LAUNCH(%d, st->n_sm, 1, 1, IG_MO_DBLOCK, 0, args); }\n"
                       "%s} else {\n",
                ind, fold ? c->rn_src : in, ind, fn_index(c, fdg), HID, aes, ind, res, ind, fn_index(c, fdd), ind);
        snprintf(ind_in, sizeof ind_in, "%s    ", ind);
        ind = ind_in;
    }
    if (shared) {
        fprintf(c->fw, "%s{ void *args[] = {&T, &%s, &w1, &moe_sel, &moe_wt};\n"
                       "%s  LAUNCH(%d, IG_MO_ROUTE_GRID_X(T), 1, 1, IG_MO_BLOCK, 0, args); }\n",
                ind, in, ind, fn_index(c, fr));
    } else { /* the router's logits (a warp per expert; prefill-sized steps: an f32 GEMM, cuBLAS's
              * SGEMM or gemm.cu's f32 tiles, host_runtime.c's GEMM_F32), then the top-k per token */
        char fl[96], fsel[96];
        snprintf(fl, sizeof fl, "%s_logits", mo ? mo : "");
        snprintf(fsel, sizeof fsel, "%s_select", mo ? mo : "");
        if (E > c->moe_lg) c->moe_lg = E;
        const char *fg = instance(c, "gemm.cu", "gemm_f32", "GM_NAME", "#define GM_ES 4\n",
                                  "f32 GEMM: the MoE router's logits of prefill-sized steps");
        fprintf(c->fw, "%sif (T > IG_MO_DTMAX) { /* lg [T][E] = x . router^T (f32) */\n"
                       "%s    GEMM_F32(%d, %d, T, %d, w1, %s, moe_lg, %d);\n"
                       "%s} else {\n"
                       "%s    void *args[] = {&T, &%s, &w1, &moe_lg};\n"
                       "%s    LAUNCH(%d, IG_MO_LG_GRID_X(%d), T, 1, IG_MO_BLOCK, 0, args);\n%s}\n"
                       "%s{ void *args[] = {&T, &moe_lg, &moe_sel, &moe_wt};\n"
                       "%s  LAUNCH(%d, T, 1, 1, 32, 0, args); }\n",
                ind, ind, fn_index(c, fg), E, HID, in, E, ind, ind, in, ind, fn_index(c, fl), E,
                ind, ind, ind, fn_index(c, fsel));
    }
    const moe_em m = {mo, in, res, w2, w3, dq_gu, dq_dn, HID, E, K, shared, I};
    emit_moe_prefill(c, &m, ind);
    if (dec) fprintf(c->fw, "%s}\n", x->ind);
    return IG_OK;
}

/* How each op lowers to CUDA: ops not listed are an error naming them. */
static const struct {
    ir_op op;
    ig_status (*emit)(gen *, node_ctx *, ig_err *);
} cuda_lowering[] = {
    {IR_OP_EMBED, emit_embed},         {IR_OP_GATHER_ROWS, emit_gather_rows}, {IR_OP_NORM_MATMUL, emit_norm_matmul},
    {IR_OP_MATMUL_EPI, emit_matmul_epi}, {IR_OP_ROPE_KV, emit_rope_kv},      {IR_OP_ATTENTION, emit_attention},
    {IR_OP_NORM_ADD, emit_norm_add},     {IR_OP_ALL_REDUCE, emit_all_reduce}, {IR_OP_ALL_GATHER, emit_all_gather},
    {IR_OP_RMSNORM, emit_rmsnorm},       {IR_OP_MOE, emit_moe},               {IR_OP_MOE_SHARED, emit_moe},
};

/* One node's block: its weights bound to variables (launches take their addresses), then its kernels. */
static ig_status emit_node(gen *c, int32_t i, int pass, ig_err *err) {
    node_ctx x = {.i = i, .n = &c->g->nodes[i], .pass = pass, .rows = pass == 2 ? "n_out" : "T"};
    const char *ind = pass == 0 ? "    " : "        "; /* the layer loop and the logits block nest once more */
    char ind2[32];
    snprintf(ind2, sizeof ind2, "%s    ", ind);
    x.ind = ind2;
    for (int s = 0; s < IR_MAX_IN; s++) {
        int32_t ti = x.n->in[s];
        if (ti < 0 || c->g->tensors[ti].kind != IR_TENSOR_WEIGHT) snprintf(x.wexpr[s], sizeof x.wexpr[s], "zero");
        else cg_weight_ref(c->plan, &c->lay, pass == 1, i, s, ti, x.wexpr[s], sizeof x.wexpr[s]);
    }
    fprintf(c->fw, "%s{\n", ind);
    for (int s = 0; s < IR_MAX_IN; s++)
        if (strcmp(x.wexpr[s], "zero")) {
            fprintf(c->fw, "%s    CUdeviceptr w%d = %s;\n", ind, s, x.wexpr[s]);
            snprintf(x.wexpr[s], sizeof x.wexpr[s], "w%d", s);
        }
    ig_status st = IG_ERR_UNSUPPORTED;
    size_t k = 0;
    while (k < sizeof cuda_lowering / sizeof cuda_lowering[0] && cuda_lowering[k].op != x.n->op) k++;
    if (k < sizeof cuda_lowering / sizeof cuda_lowering[0]) st = cuda_lowering[k].emit(c, &x, err);
    else ig_fail(err, st, "codegen (cuda): cannot lower op %s", ir_op_name(x.n->op));
    fprintf(c->fw, "%s}\n", ind);
    return st;
}

/* ---- the persistent decode kernel */

/* A MoE block's weights as the persistent kernel reads them: an f32 router / gate of `rows` rows,
 * then bf16 gate/up [E 2I][HID] and down [E HID][I] (E = rows, 1 for a shared expert). */
static int moe_block_fits(const gen *c, const ir_node *m, int64_t rows, int64_t I) {
    const ir_graph *g = c->g;
    const int HID = c->g->hp.hidden;
    const ir_tensor *rt = &g->tensors[m->in[1]], *gu = &g->tensors[m->in[2]], *dn = &g->tensors[m->in[3]];
    const int32_t rk = pk_find(c->plan, m->in[1]);
    const mm_wfmt fg = weight_format(c, m->in[2]), fd = weight_format(c, m->in[3]);
    return m->epi == IR_EPI_ACC && rk >= 0 && c->plan->e[rk].dtype == IG_DTYPE_F32 && rt->shape[0] == rows &&
           rt->shape[1] == HID && gu->shape[0] == rows * 2 * I && gu->shape[1] == HID && dn->shape[0] == rows * HID &&
           dn->shape[1] == I && !fg.wq && !fg.f8 && !fd.wq && !fd.f8;
}

/* A MoE model's layers on the persistent kernel (--tune dl_moe, stream_moe.cuh): [norm+qkv,
 * rope_kv, attention, o + residual, rms_norm, moe into the residual[, moe_shared into the
 * residual]], bf16 experts of I rows and a shared expert of IS (multiples of 128: a window of
 * down's x lies in one expert) over a hidden size whose rows fit a slot, top-k x I + IS within two
 * slots, at most 256 experts and IG_ST_MOEK (16) a token, f32 router and shared gate. *kd: down's K. */
static int plan_moe_layers(const gen *c, int64_t *kd) {
    const ir_graph *g = c->g;
    const ir_hparams *hp = &g->hp;
    const ir_node *const *n = c->dl.n;
    const int HID = hp->hidden, E = hp->n_experts, K = hp->top_k;
    const int64_t I = hp->moe_intermediate, IS = hp->shared_intermediate;
    if (!c->tune->dl_moe || c->lay.per_layer != (IS ? 7 : 6) || n[4]->op != IR_OP_RMSNORM || n[5]->op != IR_OP_MOE ||
        n[5]->in[0] != n[4]->out || E > 256 || K > 16 || I % 128 || IS % 128 || HID > 8192)
        return 0;
    if (IS && (n[6]->op != IR_OP_MOE_SHARED || n[6]->in[0] != n[4]->out || !moe_block_fits(c, n[6], 1, IS))) return 0;
    *kd = (int64_t)K * I + IS;
    if (*kd > 16384 || (*kd > 8192 && *kd % 256) || !moe_block_fits(c, n[5], E, I)) return 0;
    const mm_wfmt fq = weight_format(c, n[0]->in[2]), fo = weight_format(c, n[3]->in[1]);
    return !fq.wq && !fq.f8 && !fo.wq && !fo.f8;
}

/* Which part of the model the persistent decode kernel (decode_layers.cu, sm_90) takes: layers of
 * exactly the usual shape [norm+qkv, rope_kv, attention, o + residual, norm+gate/up SwiGLU, down +
 * residual] (or routed experts in place of gate/up and down: plan_moe_layers), bf16, with every
 * GEMV's K a multiple of 128 (tensor-core windows) whose row fits a 16 KB slot, or a multiple of 256
 * up to 16384 whose row fits two (stream.cuh's SPLIT; Llama-3-8B's down, 14336); and the embedding
 * before them and the lm_head after them when they are plain. */
static void plan_decode_layers(gen *c) {
    const ir_graph *g = c->g;
    const ir_hparams *hp = &g->hp;
    dl_plan *dl = &c->dl;
    memset(dl, 0, sizeof *dl);
    dl->resid_rows = 256;
    if (!c->bf || c->fmt->dtype != IG_DTYPE_BF16 || c->lay.per_layer != (hp->shared_intermediate ? 7 : 6)) return;
    /* the kernel's attention, RoPE and embedding are Llama's: a model with a sliding window,
     * partial / interleaved rotary, a second RoPE base or other scales runs on the per-op kernels */
    if (sliding_layers(hp) || hp->rope_dim || hp->rope_interleaved || hp->rope_theta_local > 0 || hp->embed_scale > 0 ||
        hp->attn_scale > 0 || hp->mlp_act != IR_ACT_SILU || hp->post_norms || hp->final_softcap > 0)
        return;
    /* quantized KV: the attention items read its rows through attn_decode.cuh (--tune dl_kvq=0
     * sends such packages to the per-op kernels instead) */
    if (c->kvq && !c->tune->dl_kvq) return;
    static const int ops[6] = {IR_OP_NORM_MATMUL, IR_OP_ROPE_KV, IR_OP_ATTENTION, IR_OP_MATMUL_EPI, IR_OP_NORM_MATMUL,
                               IR_OP_MATMUL_EPI};
    for (int k = 0; k < c->lay.per_layer; k++) {
        dl->n[k] = &g->nodes[c->lay.first_layer + k];
        if (k < 4 && (int)dl->n[k]->op != ops[k]) return;
    }
    const ir_node *const *n = dl->n;
    const int HID = hp->hidden, H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim;
    int64_t kq = g->tensors[n[0]->in[2]].shape[1], ko = g->tensors[n[3]->in[1]].shape[1], kg = HID, kd = 0;
    int ok = n[0]->epi == IR_EPI_STORE && n[3]->epi == IR_EPI_ACC && kq == HID && ko == (int64_t)H * D &&
             g->tensors[n[3]->in[1]].shape[0] == HID;
    if (hp->n_experts) {
        dl->moe = ok = ok && plan_moe_layers(c, &kd);
        dl->moe_i = hp->moe_intermediate, dl->moe_is = hp->shared_intermediate;
    } else {
        kg = g->tensors[n[4]->in[2]].shape[1], kd = g->tensors[n[5]->in[1]].shape[1];
        const int64_t ng = g->tensors[n[4]->in[2]].shape[0];
        ok = ok && (int)n[4]->op == ops[4] && (int)n[5]->op == ops[5] && n[4]->epi == IR_EPI_SWIGLU &&
             n[5]->epi == IR_EPI_ACC && kg == HID && kd == ng / 2 && g->tensors[n[5]->in[1]].shape[0] == HID;
    }
    if (!ok) return;
    const int64_t ks[4] = {kq, ko, kg, kd};
    for (int k = 0; k < 4 && ok; k++)
        if (ks[k] % 128 || ks[k] > 16384 || (ks[k] > 8192 && ks[k] % 256)) ok = 0;
    /* quantized rows (wq.cuh): the four matrices in one format, each row within one slot; by
     * --tune dl_quant: 1 (default) both formats, 0 neither, -1 q4r only (H200 1B a16w8: 0.611 ms/token
     * persistent, 0.867 per-op: templates/cuda/SPEC.md). MoE layers: bf16 (plan_moe_layers). */
    const int32_t wt[4] = {n[0]->in[2], n[3]->in[1], n[4]->in[2], n[5]->in[1]};
    const mm_wfmt f0 = weight_format(c, wt[0]);
    if (c->wq_any && (c->tune->dl_quant == 0 || (c->tune->dl_quant < 0 && f0.wq != 4))) ok = 0;
    dl->wq = f0.f8 ? 9 : f0.wq, dl->wg = f0.wq == 4 ? f0.wg : 32; /* stream.cuh's 9: f8r */
    for (int k = 0; k < 4 && ok && !dl->moe; k++) {
        const mm_wfmt f = weight_format(c, wt[k]);
        if (f.wq != f0.wq || (f.wq == 4 && f.wg != f0.wg)) ok = 0;
        if (f.f8 != f0.f8) ok = 0;
        if (f.wq == 8 && ks[k] + 16 > 16384) ok = 0;
        if (f.wq == 4 && ks[k] / 2 + (4 * (ks[k] / f.wg) + 15) / 16 * 16 > 16384) ok = 0;
    }
    /* a residual add's rows must fit one batch of sums: 256 slots, 128 rows when they take two */
    if (ko > 8192 || kd > 8192) dl->resid_rows = 128;
    if (HID % 128) ok = 0;
    /* ring slots: 12 x 16 KB where they fit beside attention's scratch and the static state (~18 KB,
     * and the rope table, the group's queries of the group's items and of the one-head items, and the
     * queries' mma fragments) */
    const int at_smem = 8 * (H / KV) * (D + 2) * 4; /* IG_AT_SMEM */
    dl->slot = f0.wq ? 16384 + 256 : 16384;
    const int kvq_smem = c->kvq ? (3 * D + (H / KV + 1) * D) * 4 : 0; /* the new row, its key before, outputs to rotate back */
    const int qf_smem = 32 * D; /* attention.cu's query fragments for the tensor-core loop */
    dl->nslot = (227 * 1024 - 18 * 1024 - (4 * D + (H / KV + 1) * D) * 4 - at_smem - kvq_smem - qf_smem) / dl->slot;
    if (dl->nslot > 12) dl->nslot = 12;
    if (dl->nslot < 4 || !ok) return;
    dl->ok = 1;
    /* a step whose only node before the layers is a bf16 embed; after the layers exactly: gather
     * the output row, then norm + matmul to the vocabulary with K = hidden */
    if (c->lay.first_layer == 1 && g->nodes[0].op == IR_OP_EMBED && !weight_format(c, g->nodes[0].in[1]).wq)
        dl->emb = &g->nodes[0];
    const int32_t tail = c->lay.last_layer + 1;
    if (g->n_nodes - tail == 2 && g->nodes[tail].op == IR_OP_GATHER_ROWS && g->nodes[tail + 1].op == IR_OP_NORM_MATMUL &&
        g->nodes[tail + 1].epi == IR_EPI_STORE && g->nodes[tail + 1].in[3] < 0 &&
        g->tensors[g->nodes[tail + 1].in[2]].shape[1] == HID && g->tensors[g->nodes[tail + 1].in[2]].shape[0] == hp->vocab) {
        const mm_wfmt hf = weight_format(c, g->nodes[tail + 1].in[2]);
        dl->hwq = hf.wq, dl->hwg = hf.wq == 4 ? hf.wg : 32;
        dl->head = &g->nodes[tail + 1];
    }
}

/* The compile-time tuning of the templates as #defines (the keys with a macro in tuning.c's
 * table): only values other than the defaults, which are the templates' own, so an untuned
 * package's source is the same. */
static void stream_tuning(const cg_tuning *t, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (const tune_key *k = tune_keys; k->name; k++)
        if (k->phase == TUNE_COMPILE && k->macro && tune_get(k, t) != k->def && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "#define %s %d\n", k->macro, tune_get(k, t));
}

/* The persistent kernel's instance (after the per-op ones: its attention device functions, then
 * the kernel). */
static void emit_decode_layers_instance(gen *c) {
    const ir_hparams *hp = &c->g->hp;
    const ir_node *const *n = c->dl.n;
    const int H = hp->n_heads, KV = hp->n_kv_heads, D = hp->head_dim;
    char params[2048], comment[256], nm[96], knobs[256];
    snprintf(params, sizeof params, "%s#define AT_DEVFN 1\n", c->at_params);
    snprintf(comment, sizeof comment, "decode attention as device functions for the persistent kernel");
    snprintf(nm, sizeof nm, "attention_dl_h%d_kv%d_d%d", H, KV, D);
    const char *an = instance(c, "attention.cu", nm, "AT_NAME", params, comment);
    const int moe = c->dl.moe;
    int64_t nq = c->g->tensors[n[0]->in[2]].shape[0], ng = moe ? 2 * c->dl.moe_i : c->g->tensors[n[4]->in[2]].shape[0];
    stream_tuning(c->tune, knobs, sizeof knobs);
    char moe_p[256] = "#define DL_MOE 0\n";
    if (moe)
        snprintf(moe_p, sizeof moe_p, "#define DL_MOE 1\n#define DL_MOE_E %d\n#define DL_MOE_K %d\n#define DL_MOE_I %lld\n"
                 "#define DL_MOE_NORM %d\n#define DL_MOE_IS %lld\n", hp->n_experts, hp->top_k, (long long)c->dl.moe_i,
                 hp->norm_topk, (long long)c->dl.moe_is);
    snprintf(params, sizeof params,
             "#define IG_ST_NSLOT %d\n#define IG_ST_SLOT %d\n#define DL_LAYERS %d\n#define DL_HID %d\n#define DL_QKV_ROWS %lld\n"
             "#define DL_QKV_N %lld\n#define DL_HD %d\n#define DL_GU_ROWS %lld\n#define DL_EPS1 %.9gf\n"
             "#define DL_EPS2 %.9gf\n#define DL_BQKV %d\n#define DL_BO %d\n#define DL_BGU %d\n#define DL_BDOWN %d\n"
             "#define DL_ATTN %s\n#define DL_KV %d\n#define DL_SPLIT ATTN_SPLIT\n#define DL_KV_LAYER_BYTES %lluull\n"
             "#define DL_VOCAB %d\n#define DL_EPS_HEAD %.9gf\n#define DL_D %d\n"
             "#define DL_WQ %d\n#define DL_WG %d\n#define DL_HWQ %d\n#define DL_HWG %d\n%s%s",
             c->dl.nslot, c->dl.slot, hp->n_layers, hp->hidden, (long long)nq, (long long)(H + 2 * KV) * D, H * D, (long long)ng,
             n[0]->eps, n[4]->eps, n[0]->in[3] >= 0, n[3]->in[2] >= 0, !moe && n[4]->in[3] >= 0, !moe && n[5]->in[2] >= 0,
             an ? an : "", KV, (unsigned long long)c->kv_layer_page, hp->vocab, c->dl.head ? c->dl.head->eps : 1e-6, D,
             c->dl.wq, c->dl.wg, c->dl.hwq, c->dl.hwg, moe_p, knobs);
    snprintf(comment, sizeof comment, "one-token decode: all %d layers in one persistent kernel, weights%s streamed "
                                      "through a %d x %d-byte ring per SM (sm_90)", hp->n_layers,
             moe ? " (of the selected experts)" : "", c->dl.nslot, c->dl.slot);
    c->dl_fn = fn_index(c, instance(c, "decode_layers.cu", "decode_layers", "DL_NAME", params, comment));
}

/* ---- the step's launch sequence */

static void emit_step_head(gen *c) {
    fprintf(c->fw, "\n/* One step's kernels (see launch_step in host_runtime.c). */\n"
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
}

/* Before pass `pass`: the persistent kernel's launch, where it starts, and the guards of what it replaces. */
static void emit_pass_open(gen *c, int pass) {
    const dl_plan *dl = &c->dl;
    FILE *fw = c->fw;
    if (dl->ok && pass == (dl->emb ? 0 : 1))
        fprintf(fw, "\n    /* one token: the whole layer stack as one persistent kernel (decode_layers.cu)%s%s;\n"
                    "     * if the GPU refuses the cooperative launch (e.g. an MPS share of the SMs), the per-op\n"
                    "     * kernels run from then on */\n"
                    "    int dl_done = 0;\n"
                    "    if (T == 1 && decode_only && dl_fits(st, mpv)) {\n"
                    "        int rd = decode_layers(st, T, n_out, mpv, do_sample, &dl_done);\n"
                    "        if (rd) return rd;\n"
                    "    }\n",
                dl->emb ? ",\n     * with the embedding" : "", dl->head ? (dl->emb ? " and the lm_head" : ",\n     * with the lm_head") : "");
    if (dl->ok && pass == 1) fprintf(fw, "    if (!dl_done)");
    if (dl->emb && pass == 0) fprintf(fw, "    if (!dl_done)\n");
    if (pass == 1)
        fprintf(fw, "\n    for (int l = 0; l < N_LAYERS; l++) {\n"
                    "        const int32_t *lw = layer_weights[l];\n"
                    "        unsigned long long kv_off = (unsigned long long)l * KV_LAYER_PAGE_BYTES;\n"
                    "        CUdeviceptr ifq = %s; /* the layer's RoPE frequencies */\n",
                c->g->hp.rope_theta_local > 0 ? "layer_sliding[l] ? inv_freq + sizeof rope_inv_freq : inv_freq" : "inv_freq");
    if (pass == 2) fprintf(fw, "\n    if (n_out > 0%s) {\n", dl->head ? " && !dl_done" : "");
}

/* After the logits block: device sampling of its rows, and the sampled ids back. */
static void emit_step_tail(gen *c) {
    const ir_hparams *hp = &c->g->hp;
    const int head = c->dl.head != NULL;
    char params[128], comment[128];
    snprintf(params, sizeof params, "#define SM_V %d\n#define SM_LD %d\n", hp->vocab, hp->vocab);
    snprintf(comment, sizeof comment, "sampling on the device: one token per logits row of %d", hp->vocab);
    const char *k = instance(c, "sample.cu", "sample", "SM_NAME", params, comment);
    fprintf(c->fw, "    if (do_sample%s) {\n"
                   "        /* %s%s */\n"
                   "        int n_part = %s;\n"
                   "        void *args[] = {&n_out, &d_logits, &d_sp, &d_sampled, &dl_amax, &n_part, &zero, &zero, &zero, &zero};\n"
                   "        LAUNCH(%d, IG_SM_GRID_X(n_out), 1, 1, IG_SM_BLOCK, 0, args);\n"
                   "    }\n",
            head ? " && !(dl_done && do_sample == 2)" : "", comment,
            head ? " (after the persistent kernel: from its per-CTA greedy picks)" : "", head ? "dl_done ? st->n_sm : 0" : "0",
            c->sample_fn = fn_index(c, k));
    snprintf(params, sizeof params, "#define GM_ES %d\n", c->bf ? 2 : 4);
    snprintf(comment, sizeof comment, "the prefill GEMM without cuBLAS (host_runtime.c's gemm())");
    c->gemm_fn = fn_index(c, instance(c, "gemm.cu", "gemm", "GM_NAME", params, comment));
    fprintf(c->fw, "    /* the sampled ids back */\n"
                   "    if (do_sample) CU(st->api.cuMemcpyDtoHAsync(SAMPLED_IDS(st) + (chain ? st->max_tokens + chain - 1 : 0), d_sampled,\n"
                   "                                                sizeof(int32_t) * n_out, st->stream));\n"
                   "    return 0;\n}\n");
}

/* The logits block's end: Gemma's final soft-capping of d_logits in place, before sampling or the
 * copy back (the persistent kernel never runs such a model: plan_decode_layers). */
static void emit_softcap(gen *c) {
    const ir_hparams *hp = &c->g->hp;
    if (!(hp->final_softcap > 0)) return;
    char params[128], comment[128];
    snprintf(params, sizeof params, "#define EP_N %d\n#define EP_CAP %#.9gf\n", hp->vocab, hp->final_softcap);
    snprintf(comment, sizeof comment, "final logit soft-capping: %g * tanh(logits / %g) over [n_out][%d]",
             hp->final_softcap, hp->final_softcap, hp->vocab);
    const char *k = instance(c, "epilogue.cu", "softcap_logits", "EP_SOFTCAP_NAME", params, comment);
    fprintf(c->fw, "        /* %s */\n"
                   "        {\n"
                   "            void *args[] = {&n_out, &d_logits};\n"
                   "            LAUNCH(%d, IG_EP_BIAS_GRID_X(n_out, VOCAB), IG_EP_BIAS_GRID_Y(n_out), 1, IG_EP_BLOCK, 0, args);\n"
                   "        }\n",
            comment, fn_index(c, k));
}

/* launch_step: the nodes before the layers, the layer loop, the logits block. */
static ig_status emit_launch_step(gen *c, ig_err *err) {
    ig_status st = IG_OK;
    emit_step_head(c);
    for (int pass = 0; pass < 3 && !st; pass++) {
        int32_t lo = pass == 0 ? 0 : pass == 1 ? c->lay.first_layer : c->lay.last_layer + 1;
        int32_t hi = pass == 0 ? c->lay.first_layer : pass == 1 ? c->lay.first_layer + c->lay.per_layer : c->g->n_nodes;
        emit_pass_open(c, pass);
        for (int32_t i = lo; i < hi && !st; i++) st = emit_node(c, i, pass, err);
        if (pass == 2 && !st) emit_softcap(c);
        if (pass == 1 || pass == 2) fprintf(c->fw, "    }\n");
    }
    if (st) return st;
    emit_step_tail(c);
    if (c->dl.ok) emit_decode_layers_instance(c);
    return IG_OK;
}

/* ---- model.c: the host side */

static void emit_host_header(gen *c, FILE *out) {
    const ir_hparams *hp = &c->g->hp;
    fprintf(out,
            "/* model.c — generated by ignis %s: host side of a CUDA package. Do not edit: regenerate with\n"
            " * `ignis compile`.\n"
            " *\n"
            " * model:  %s, %d layers, hidden %d, %d heads / %d KV heads x %d, intermediate %d, vocab %d\n"
            " * target: CUDA %s (cubins + PTX embedded below); %s weights and activations, f32 accumulation\n"
            " * The kernels are in model.cu. This file holds what is particular to this model: its constants\n"
            " * and tables, its workspace buffers and the launch sequence of a step (launch_step); the host\n"
            " * runtime every CUDA package shares (device state, init, forward, graphs) is host_runtime.c. */\n"
            "#define IG_MODEL_GENERATED 1\n"
            "#include <stdint.h>\n\n#include \"ig_model_abi.h\"\n\n",
            c->o->compiler_version, hp->arch, hp->n_layers, hp->hidden, hp->n_heads, hp->n_kv_heads, hp->head_dim,
            hp->intermediate, hp->vocab, c->archs, dtn(c, c->bf));
    cg_emit_shape_defines(out, hp, c->o->page_size, c->kv_layer_page);
    fprintf(out, "#define W_BF16 %d     /* 16-bit weights (and activations where the kernels round) */\n"
                 "#define W_F16 %d      /* ... of IEEE half rather than bf16 */\n"
                 "#define W_BYTES %lluull /* weights.bin, copied to the GPU */\n"
                 "#define N_KERNELS %d  /* functions of model.cu launched (kernel_names) */\n"
                 "#define SAMPLE_FN %d  /* sample.cu's: host_runtime.c launches it for the rows of a masked step */\n"
                 "#define GEMM_FN %d    /* gemm.cu's: host_runtime.c's gemm() where there is no cuBLAS */\n",
            c->bf, c->fmt->dtype == IG_DTYPE_F16, (unsigned long long)c->plan->total, c->in.n_fn, c->sample_fn,
            c->gemm_fn);
    if (c->f8_any) fprintf(out, "#define F8_GEMM 1     /* fp8: f8r matmuls on cuBLASLt's e4m3 GEMM (host_runtime.c's GEMM_F8) */\n");
    if (ap_ws(c)) fprintf(out, "#define KV_TMAP 1     /* prefill attention's _flash_ws reads the KV pool through a tensor map */\n");
    if (c->a8_cl_fn >= 0)
        fprintf(out, "#define A8_CL_FN %d   /* act8.cu's int8 GEMM in clusters of A8_CL_SIZE: the grid is the clusters that fit */\n"
                     "#define A8_CL_SIZE %d\n",
                c->a8_cl_fn, c->tune->a8_wg);
    if (!c->dl.ok) {
        fprintf(out, "#define HAS_DECODE_LAYERS 0 /* no persistent decode kernel: its shape conditions are not met */\n");
        return;
    }
    const char *x = c->bufs.v[c->resid].ident;
    fprintf(out, "#define HAS_DECODE_LAYERS 1 /* the persistent decode kernel (decode_layers.cu) */\n"
                 "#define DL_FN %d\n"
                 "#define DL_THREADS 288 /* 8 consumer warps + a producer warp (IG_ST_THREADS) */\n"
                 "#define DL_SMEM (%d * %d + IG_AT_SMEM(N_HEADS, N_KV_HEADS, HEAD_DIM)) /* its ring + attention scratch */\n"
                 "#define DL_RESID_ROWS %d /* rows of a residual add per CTA at most */\n"
                 "#define DL_X %s\n#define DL_QKV %s\n#define DL_ATTN %s\n#define DL_MLP %s /* its activations */\n"
                 "#define DL_MOE_LG %s /* MoE layers: the router's logits */\n"
                 "#define DL_TAB %d /* pointers of a layer in its table (ig_dl_layer) */\n",
            c->dl_fn, c->dl.nslot, c->dl.slot, c->dl.resid_rows, x, buf_name(c, c->dl.n[0]->out), buf_name(c, c->dl.n[2]->out),
            c->dl.moe ? "moe_h" : buf_name(c, c->dl.n[4]->out), c->dl.moe ? "moe_lg" : "0", DL_TAB);
    char emb[96] = "0", hw[96] = "0", hg[96] = "0";
    if (c->dl.emb) cg_weight_ref(c->plan, &c->lay, 0, 0, 1, c->dl.emb->in[1], emb, sizeof emb);
    if (c->dl.head) {
        int32_t hn = (int32_t)(c->dl.head - c->g->nodes);
        cg_weight_ref(c->plan, &c->lay, 0, hn, 2, c->dl.head->in[2], hw, sizeof hw);
        cg_weight_ref(c->plan, &c->lay, 0, hn, 1, c->dl.head->in[1], hg, sizeof hg);
    }
    fprintf(out, "#define DL_EMB %s\n#define DL_HEAD_W %s\n#define DL_HEAD_G %s /* 0: left to the per-op kernels */\n"
                 "#define DL_RUNS %d /* multi-step greedy runs: the kernel has the whole step (embedding and lm_head) */\n",
            emb, hw, hg, c->dl.emb && c->dl.head);
}

/* Kernel images, embedded with .incbin (files next to model.c): a cubin per architecture, then
 * the PTX of the newest. */
static void emit_images(const cg_cuda_target *t, FILE *out) {
    int newest = 0;
    for (int i = 0; i < t->n_archs; i++)
        if (atoi(t->archs[i] + 3) > newest) newest = atoi(t->archs[i] + 3);
    fprintf(out, "\n/* ---- kernel images: cubins per architecture and PTX of the newest, embedded at build time */\n"
                 "#define N_IMAGES %d\n#define PACKAGE_PTX %d\n", t->n_archs + 1, newest);
    for (int i = 0; i <= t->n_archs; i++) {
        char file[48];
        if (i < t->n_archs) snprintf(file, sizeof file, "kernel_%s.cubin", t->archs[i]);
        else snprintf(file, sizeof file, "kernel_compute_%d.ptx", newest);
        fprintf(out, "__asm__(\".section .rodata\\n.balign 64\\n.hidden img%d\\n.globl img%d\\nimg%d:\\n.incbin \\\"%s\\\"\\n"
                     ".hidden img%d_end\\n.globl img%d_end\\nimg%d_end:\\n.byte 0\\n.previous\\n\");\n"
                     "extern const unsigned char img%d[], img%d_end[];\n",
                i, i, i, file, i, i, i, i, i);
    }
    fprintf(out, "static const unsigned char *const image_data[N_IMAGES] = {");
    for (int i = 0; i <= t->n_archs; i++) fprintf(out, "%simg%d", i ? ", " : "", i);
    fprintf(out, "};\nstatic const unsigned char *const image_end[N_IMAGES] = {");
    for (int i = 0; i <= t->n_archs; i++) fprintf(out, "%simg%d_end", i ? ", " : "", i);
    fprintf(out, "};\nstatic const int image_arch[N_IMAGES] = {");
    for (int i = 0; i <= t->n_archs; i++) fprintf(out, "%s%d", i ? ", " : "", i < t->n_archs ? atoi(t->archs[i] + 3) : newest);
    fprintf(out, "}, image_is_ptx[N_IMAGES] = {");
    for (int i = 0; i <= t->n_archs; i++) fprintf(out, "%s%d", i ? ", " : "", i == t->n_archs);
    fprintf(out, "};\n");
}

/* Per layer, when layers differ: which attend a sliding window (the kernels' AT_WINDOW instances)
 * and take the local RoPE frequencies; ROPE_LOCAL tells host_runtime.c to upload those after the
 * global ones (ifq in launch_step). */
static void emit_layer_types(const ir_hparams *hp, FILE *out) {
    if (hp->rope_theta_local > 0) fprintf(out, "#define ROPE_LOCAL 1 /* rope_inv_freq_local follows rope_inv_freq on the GPU */\n");
    if (!sliding_layers(hp) && hp->rope_theta_local <= 0) return;
    fprintf(out, "\n/* per layer: 1 = sliding-window attention (%d keys)%s */\n"
                 "static const unsigned char layer_sliding[N_LAYERS] __attribute__((unused)) = {",
            hp->sliding_window, hp->rope_theta_local > 0 ? " with the local RoPE theta" : "");
    for (int L = 0; L < hp->n_layers; L++)
        fprintf(out, "%s%d", L ? ", " : "", L < IR_MAX_LAYER_TYPES && hp->sliding_window > 0 ? hp->layer_sliding[L] : 0);
    fprintf(out, "};\n");
}

/* The model's buffers of the workspace (host_runtime.c lists the shared ones before them). */
static void emit_workspace(gen *c, FILE *out) {
    const char *t16 = c->bf ? "uint16_t" : "float";
    fprintf(out, "\n/* ---- this model's workspace buffers, for up to T tokens (after host_runtime.c's own) */\n"
                 "#define MODEL_WORKSPACE(X, T) \\\n"
                 "    X(%s, a_gu, (uint64_t)(T) * %lld) \\\n"
                 "    X(%s, xn, (uint64_t)(T) * %lld)",
            t16, (long long)c->gu_cols, t16, (long long)c->xn_cols);
    if (c->wdq_elems) /* whatever T: one matrix at a time */
        fprintf(out, " \\\n    X(uint16_t, a_wdq, %lldull) /* a quantized matrix in 16 bits, for cuBLAS */", (long long)c->wdq_elems);
    if (c->a8_k) /* a8w8 / fp8: a step's int8 / e4m3 activation rows (128 at least: a tensor map's box) and their scales */
        fprintf(out, " \\\n    X(int8_t, a8_xq, (uint64_t)((T) < 128 ? 128 : (T)) * %lld) \\\n    X(float, a8_xs, (uint64_t)(T))",
                (long long)c->a8_k);
    if (c->a8_wg_any) /* act8.cu's split int8 GEMM: 128 KB of int32 sums a tile a split, a count a tile (zero at init) */
        fprintf(out, " \\\n    X(int32_t, a8_part, (uint64_t)IG_A8_WG_PITEMS * IG_A8_WG_BM * IG_A8_WG_BN) \\\n"
                     "    X(unsigned, a8_cnt, IG_A8_WG_PITEMS)");
    if (c->a8_np) /* a8w8: the int32 GEMM output */
        fprintf(out, " \\\n    X(int32_t, a8_acc, (uint64_t)(T) * %lld)", (long long)c->a8_np);
    if (c->qg_any) { /* qgemm.cu's split-K partials and tile counters (zero at init; each kernel puts them back) */
        const int tm = c->tune->qg_tmax;
        fprintf(out, " \\\n    X(float, qg_ws, (uint64_t)%lld * IG_QG_GRID_Y((T) < %d ? (T) : %d) * IG_QG_BLOCK * 32 + 1)"
                     " \\\n    X(unsigned, qg_cnt, (uint64_t)%lld * IG_QG_GRID_Y((T) < %d ? (T) : %d) + 1)",
                (long long)c->qg_gxs, tm, tm, (long long)c->qg_gx, tm, tm);
    }
    if (c->moe_k)
        fprintf(out, " \\\n    X(int32_t, moe_sel, (uint64_t)(T) * %lld) \\\n    X(float, moe_wt, (uint64_t)(T) * %lld) \\\n"
                     "    X(%s, moe_h, (uint64_t)(T) * %lld)",
                (long long)c->moe_k, (long long)c->moe_k, t16, (long long)c->moe_ki);
    if (c->moe_e) /* the expert-grouped path: offsets, the grouped pairs, each pair's weighted down output */
        fprintf(out, " \\\n    X(int32_t, moe_off, %lld) \\\n    X(int32_t, moe_list, (uint64_t)(T) * %lld) \\\n"
                     "    X(float, moe_y, (uint64_t)(T) * %lld)",
                (long long)c->moe_e, (long long)c->moe_k, (long long)c->moe_k * c->g->hp.hidden);
    if (c->moe_lg) /* the router's logits */
        fprintf(out, " \\\n    X(float, moe_lg, (uint64_t)(T) * %lld)", (long long)c->moe_lg);
    if (c->moe_dec) /* _dgu's arrival counter and release count (zero when the workspace is cleared) */
        fprintf(out, " \\\n    X(unsigned, moe_sync, 2)");
    if (c->moe_tc) /* the tensor-core gate/up's rows: x in the 16-bit type */
        fprintf(out, " \\\n    X(%s, moe_xb, (uint64_t)(T) * %d)", t16, c->g->hp.hidden);
    for (int i = 0; i < c->bufs.n; i++)
        fprintf(out, " \\\n    X(%s, %s, (uint64_t)(T) * %lld)", c->bufs.v[i].is16 ? "uint16_t" : "float", c->bufs.v[i].ident,
                (long long)c->bufs.v[i].cols);
    fprintf(out, "\n");
}

/* dl_layer_table: layer l's DL_TAB weight pointers for the persistent kernel. */
static void emit_dl_layer_table(gen *c, FILE *out) {
    /* ig_dl_layer's fields: (layer node, input slot) of each; MoE layers (nodes 4, 5, 6: rms_norm, moe, moe_shared)
     * put the stacked experts in wgu / wdown and their router last */
    typedef struct {
        int node, slot;
    } field;
    static const field dense[DL_TAB] = {{0, 2} /* wqkv */, {3, 1} /* wo */,   {4, 2} /* wgu */,   {5, 1} /* wdown */,
                                        {0, 1} /* g1 */,   {4, 1} /* g2 */,   {0, 3} /* bqkv */,  {3, 2} /* bo */,
                                        {4, 3} /* bgu */,  {5, 2} /* bdown */, {1, 1} /* qn */,  {1, 2} /* kn */,
                                        {-1, 0} /* router */, {-1, 0} /* sgate */, {-1, 0} /* sgu */, {-1, 0} /* sdn */};
    static const field moe[DL_TAB] = {{0, 2}, {3, 1}, {5, 2},  {5, 3},  {0, 1},  {4, 1},  {0, 3},  {3, 2},
                                      {-1, 0}, {-1, 0}, {1, 1}, {1, 2}, {5, 1}, {6, 1}, {6, 2}, {6, 3}};
    const field *dlw = c->dl.moe ? moe : dense;
    char we[DL_TAB][96];
    for (int k = 0; k < DL_TAB; k++) {
        int32_t ti = dlw[k].node < 0 || dlw[k].node >= c->lay.per_layer ? -1 : c->dl.n[dlw[k].node]->in[dlw[k].slot];
        if (ti < 0) snprintf(we[k], sizeof we[k], "0");
        else cg_weight_ref(c->plan, &c->lay, 1, c->lay.first_layer + dlw[k].node, dlw[k].slot, ti, we[k], sizeof we[k]);
    }
    fprintf(out, "\n/* The persistent kernel's per-layer weights (ig_dl_layer: wqkv wo wgu wdown g1 g2 bqkv bo bgu bdown qn kn\n"
                 " * router sgate sgu sdn; MoE layers: wgu / wdown the stacked experts). */\n"
                 "static void dl_layer_table(const dev_state *st, CUdeviceptr tab[N_LAYERS][DL_TAB]) {\n"
                 "    for (int l = 0; l < N_LAYERS; l++) {\n"
                 "        const int32_t *lw = layer_weights[l];\n"
                 "        const CUdeviceptr e[DL_TAB] = {%s, %s, %s, %s, %s, %s, %s, %s,\n"
                 "                                       %s, %s, %s, %s, %s, %s, %s, %s};\n"
                 "        memcpy(tab[l], e, sizeof e);\n"
                 "    }\n}\n",
            we[0], we[1], we[2], we[3], we[4], we[5], we[6], we[7], we[8], we[9], we[10], we[11], we[12], we[13], we[14],
            we[15]);
}

static ig_status emit_host(gen *c, const cg_cuda_target *t, const char *step, FILE *out, ig_err *err) {
    emit_host_header(c, out);
    fprintf(out, "#define PACKAGE_ARCHS \"%s\"\n", c->archs);
    emit_images(t, out);
    fprintf(out, "\n/* ---- kernels of model.cu launched below */\nstatic const char *const kernel_names[N_KERNELS] = {");
    for (int i = 0; i < c->in.n_fn; i++) fprintf(out, "%s\"%s\"", i ? ", " : "", c->in.fn[i]);
    fprintf(out, "};\n");
    cg_emit_weight_list(out, c->plan);
    fprintf(out, "#define W(i) (st->w + weights[i].offset)\n\n");
    cg_emit_layer_table(out, c->g, c->plan, &c->lay);
    ig_status st = cg_emit_rope_table(out, &c->g->hp, err);
    if (st) return st;
    emit_layer_types(&c->g->hp, out);
    emit_workspace(c, out);
    /* CU() below reports this file's lines (the host runtime's are offset, ig_model_abi.h) */
    fprintf(out, "\n#include \"host_runtime.c\"\n#undef CU_LINE\n#define CU_LINE __LINE__\n%s", step);
    if (c->dl.ok) emit_dl_layer_table(c, out);
    char tg[sizeof c->archs + 8];
    snprintf(tg, sizeof tg, "cuda-%s", c->archs);
    cg_emit_desc(out, &c->g->hp, tg, c->o->compiler_version, 0, c->o->dtype, c->o->kv_dtype, c->plan->n, c->archs);
    return IG_OK;
}

/* The decode GEMV stages a token's row of x in shared memory: at most 96 KB (IG_MV_SMEM). */
static ig_status check_rows(const gen *c, ig_err *err) {
    const ir_graph *g = c->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int32_t wi = n->op == IR_OP_NORM_MATMUL ? n->in[2] : n->op == IR_OP_MATMUL_EPI ? n->in[1] : -1;
        if (wi >= 0 && g->tensors[wi].shape[1] * c->fmt->bytes > 98304)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "codegen (cuda): %s has rows of %lld %s elements; the decode GEMV stages a row in 96 KB of "
                           "shared memory (at most %d elements)", g->tensors[wi].name, (long long)g->tensors[wi].shape[1],
                           c->fmt->name, 98304 / c->fmt->bytes);
    }
    return IG_OK;
}

ig_status cg_emit_cuda(const ir_graph *g, const pk_plan *plan, const cg_cuda_target *t, const cg_options *o,
                       FILE *cu, FILE *out, ig_err *err) {
    const ir_hparams *hp = &g->hp;
    gen c = {.g = g, .plan = plan, .o = o, .tune = o->tuning, .fmt = cg_format_of(o->dtype), .cu = cu, .resid = -1, .rn_out = -1,
             .rk_node = -1, .xn_cols = hp->hidden, .gu_cols = 16, .dl_fn = -1, .sample_fn = -1, .gemm_fn = -1, .a8_cl_fn = -1};
    if (!c.fmt || !c.fmt->cuda) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): no CUDA kernels for this dtype");
    if (!c.tune) return ig_fail(err, IG_ERR_INTERNAL, "codegen (cuda): no tuning given");
    const cg_kv_format *kvf = cg_kv_format_of(o->kv_dtype);
    /* float KV: the kernels' KV element is the package's type; quantized KV: kv_quant.cuh's rows */
    if (!kvf || (!kvf->bits && kvf->dtype != c.fmt->dtype))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--kv-cache %s: CUDA packages keep a float KV cache in their --dtype (%s)",
                       kvf ? kvf->name : "?", c.fmt->name);
    if (kvf->bits && (o->page_size % 8 || hp->head_dim % 8))
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "--kv-cache %s on CUDA needs a page size and a head_dim that are multiples of 8 (aligned code rows); "
                       "got --page-size %d, head_dim %d", kvf->name, o->page_size, hp->head_dim);
    c.bf = c.fmt->is16;
    c.kvq = kvf->kvq;
    c.kv_name = kvf->bits ? kvf->name : dtn(&c, c.bf);
    ig_status st = check_rows(&c, err);
    if (!st) st = cg_analyze(g, plan, &c.lay, err);
    if (st) return st;
    c.kv_layer_page = cg_kv_layer_page_bytes(hp, o->page_size, kvf);
    for (int i = 0; i < t->n_archs; i++)
        snprintf(c.archs + strlen(c.archs), sizeof c.archs - strlen(c.archs), "%s%s", i ? "," : "", t->archs[i]);
    for (int32_t i = 0; i < plan->n; i++) {
        const cg_format *f = cg_format_of(plan->e[i].dtype);
        if (f && f->wq && !f->cuda)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen (cuda): %s is stored as %s, a CPU format", plan->e[i].name, f->name);
        if (f && f->wq) c.wq_any = 1;
    }
    plan_decode_layers(&c);
    char *step = NULL;
    size_t step_len = 0;
    c.fw = open_memstream(&step, &step_len);
    st = c.fw ? cg_bufs_init(&c.bufs, g, err) : ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    if (!st) {
        fprintf(cu, "/* model.cu — generated by ignis %s: the kernels of %s (%d layers, hidden %d), %s.\n"
                    " * Compiled by NVRTC for %s (+ PTX). Do not edit: regenerate with `ignis compile`. */\n"
                    "%s%s%s#include \"common.cuh\"\n\n"
                    "#define ATTN_SPLIT 32 /* context partitions of decode attention (same value in host_runtime.c) */\n",
                o->compiler_version, hp->arch, hp->n_layers, hp->hidden, dtn(&c, c.bf), c.archs,
                c.fmt->cu_def ? "#define " : "", c.fmt->cu_def ? c.fmt->cu_def : "",
                c.fmt->cu_def ? " /* the 16-bit type is IEEE half */\n" : "");
        st = emit_launch_step(&c, err);
    }
    if (c.fw) fclose(c.fw);
    if (!st && (c.in.failed || c.bufs.failed)) st = ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    if (!st) st = emit_host(&c, t, step, out, err);
    free(step);
    cg_insts_free(&c.in);
    cg_bufs_free(&c.bufs);
    return st;
}
