/* driver.c — the compile pipeline (see driver.h). */
#include "driver.h"
#include "tuning.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cg.h"
#include "cg_templates.h"
#include "nvrtc.h"
#include "pack.h"
#include "passes.h"
#include "shard.h"
#include "pkg_tokenizer.h"
#include "rt_util.h"

#define LOG(o, ...)                                   \
    do {                                              \
        if ((o)->log) {                               \
            fprintf((o)->log, __VA_ARGS__);           \
            fflush((o)->log);                         \
        }                                             \
    } while (0)

static int is_gguf_path(const char *path) {
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    if (!f) return 0;
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(magic, "GGUF", 4);
}

/* Writes the templates of one target folder ("cpu" or "cuda") and the ABI header into src/, so
 * the generated code there builds on its own. */
static ig_status write_sources(const char *src_dir, const char *folder, ig_err *err) {
    char path[4096];
    size_t fl = strlen(folder);
    for (const cg_template *t = cg_templates; t->name; t++) {
        if (strncmp(t->name, "common/", 7) && !(strncmp(t->name, folder, fl) == 0 && t->name[fl] == '/')) continue;
        snprintf(path, sizeof path, "%s/%s", src_dir, strchr(t->name, '/') + 1);
        ig_status st = rt_write_file(path, t->text, t->len, err);
        if (st) return st;
    }
    return IG_OK;
}

static const char *cuda_home(void) {
    const char *h = getenv("CUDA_HOME");
    return h && *h ? h : "/usr/local/cuda";
}

/* Runs the C compiler; its output goes to build.log in the package. CPU packages get the ISA
 * flags and OpenMP; CUDA packages the CUDA headers (types only: the libraries are opened at run
 * time) and the assembler include path for the .incbin'd kernel images. */
/* The C compiler for target t: --cc / IGNIS_CC when given, the cross compiler of t's architecture
 * when it is not this machine's (aarch64 packages from an x86-64 box), cc otherwise. */
static ig_status pick_cc(const cc_options *o, const cg_target *t, const char **cc, ig_err *err) {
    *cc = o->cc ? o->cc : getenv("IGNIS_CC");
    if (*cc && **cc) return IG_OK;
    *cc = "cc";
    if (!t || !strcmp(t->arch, rt_host_arch())) return IG_OK;
    *cc = t->cross_cc;
    char probe[256];
    snprintf(probe, sizeof probe, "command -v %s > /dev/null 2>&1", t->cross_cc);
    if (system(probe) != 0)
        return ig_fail(err, IG_ERR_BUILD,
                       "--target %s needs the %s cross compiler %s, not found on PATH (Debian: apt install gcc-%.*s; "
                       "or name one with --cc)", t->name, t->arch, t->cross_cc, (int)strlen(t->cross_cc) - 4, t->cross_cc);
    return IG_OK;
}

static ig_status build_so(const cc_options *o, const cg_target *t, int cuda, const char *pkg, ig_err *err) {
    const char *cc;
    ig_status cst = pick_cc(o, t, &cc, err);
    if (cst) return cst;
    char cmd[8192];
    if (cuda) /* model.o (the kernel images assembled in) stays too: `ignis bundle` links it */
        snprintf(cmd, sizeof cmd,
                 "%s -O2 -std=gnu11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -I'%s/src' -I'%s/include' -Wa,-I'%s/src' -c "
                 "-o '%s/model.o' '%s/src/model.c' > '%s/build.log' 2>&1 && %s -shared -o '%s/model.so' '%s/model.o' -ldl "
                 ">> '%s/build.log' 2>&1",
                 cc, pkg, cuda_home(), pkg, pkg, pkg, pkg, cc, pkg, pkg, pkg);
    else
        /* the object model.o stays in the package: `ignis bundle` links it into an executable */
        snprintf(cmd, sizeof cmd,
                 "%s -O3 -std=gnu11 -fPIC -fopenmp -fvisibility=hidden -fno-math-errno %s -I'%s/src' -c -o '%s/model.o' "
                 "'%s/src/model.c' > '%s/build.log' 2>&1 && %s -shared -fopenmp -o '%s/model.so' '%s/model.o' -lm >> '%s/build.log' 2>&1",
                 cc, t->cflags, pkg, pkg, pkg, pkg, cc, pkg, pkg, pkg);
    int rc = system(cmd);
    if (rc != 0)
        return ig_fail(err, IG_ERR_BUILD, "C compiler failed (exit %d) building %s/model.so: see %s/build.log",
                       WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, pkg, pkg);
    return IG_OK;
}

/* NVRTC: model.cu → a cubin per architecture and PTX of the newest, next to model.c (which
 * embeds them with .incbin). */
static ig_status build_kernels(const cc_options *o, const cg_cuda_target *ct, const char *src_dir, ig_err *err) {
    char path[4096];
    char *src;
    snprintf(path, sizeof path, "%s/model.cu", src_dir);
    ig_status st = rt_read_file(path, &src, NULL, err);
    if (st) return st;
    int newest = 0;
    for (int i = 0; i < ct->n_archs; i++)
        if (atoi(ct->archs[i] + 3) > newest) newest = atoi(ct->archs[i] + 3);
    for (int i = 0; i <= ct->n_archs && !st; i++) {
        char arch[32], file[64];
        if (i < ct->n_archs) { /* sm_90's cubin for sm_90a (the same GPUs): wgmma for the kernels that have it */
            snprintf(arch, sizeof arch, "%s%s", ct->archs[i], strcmp(ct->archs[i], "sm_90") ? "" : "a");
            snprintf(file, sizeof file, "kernel_%s.cubin", ct->archs[i]);
        } else {
            snprintf(arch, sizeof arch, "compute_%d", newest);
            snprintf(file, sizeof file, "kernel_compute_%d.ptx", newest);
        }
        double t1 = rt_now();
        unsigned char *img;
        size_t len;
        st = nv_compile(src, "model.cu", arch, src_dir, &img, &len, err);
        if (st) break;
        snprintf(path, sizeof path, "%s/%s", src_dir, file);
        st = rt_write_file(path, img, len, err);
        free(img);
        LOG(o, "NVRTC: %s, %zu bytes (%.2f s)\n", file, len, rt_now() - t1);
    }
    free(src);
    return st;
}

static ig_status copy_file(const char *from, const char *to, ig_err *err) {
    char *data;
    size_t len;
    ig_status st = rt_read_file(from, &data, &len, err);
    if (st) return st;
    st = rt_write_file(to, data, len, err);
    free(data);
    return st;
}

/* The compile-time tuning: defaults, then --tune. Keys named cpu_* tune the CPU templates, the
 * others the CUDA ones: a key set away from its default on the other kind of target is an error
 * naming it. */
static ig_status compile_tuning(const cc_options *o, int cuda, cg_tuning *t, ig_err *err) {
    tune_compile_defaults(t);
    ig_status st = tune_apply(TUNE_COMPILE, o->tune, "--tune", t, err);
    for (const tune_key *k = tune_keys; !st && k->name; k++)
        if (k->phase == TUNE_COMPILE && tune_get(k, t) != k->def && !strncmp(k->name, "cpu_", 4) == !!cuda)
            st = ig_fail(err, IG_ERR_INVALID, "--tune %s: %s tunes %s targets, not %s", o->tune, k->name,
                         cuda ? "CPU" : "CUDA", o->target ? o->target : "cpu");
    return st;
}

/* manifest.json's "tuning": every compile-time key with the value the package was built with. */
static cJSON *tuning_json(const cg_tuning *t) {
    cJSON *j = cJSON_CreateObject();
    for (const tune_key *k = tune_keys; k->name; k++)
        if (k->phase == TUNE_COMPILE) cJSON_AddNumberToObject(j, k->name, tune_get(k, t));
    return j;
}

static cJSON *hparams_json(const ir_hparams *hp) {
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "architecture", hp->arch);
    cJSON_AddNumberToObject(h, "n_layers", hp->n_layers);
    cJSON_AddNumberToObject(h, "hidden", hp->hidden);
    cJSON_AddNumberToObject(h, "n_heads", hp->n_heads);
    cJSON_AddNumberToObject(h, "n_kv_heads", hp->n_kv_heads);
    cJSON_AddNumberToObject(h, "head_dim", hp->head_dim);
    cJSON_AddNumberToObject(h, "intermediate", hp->intermediate);
    cJSON_AddNumberToObject(h, "vocab", hp->vocab);
    cJSON_AddNumberToObject(h, "max_context", hp->max_context);
    cJSON_AddNumberToObject(h, "rms_eps", hp->rms_eps);
    cJSON_AddNumberToObject(h, "rope_theta", hp->rope_theta);
    cJSON_AddStringToObject(h, "rope_type", hp->rope_type == IR_ROPE_LLAMA3 ? "llama3" : hp->rope_type == IR_ROPE_LINEAR ? "linear" : "default");
    cJSON_AddBoolToObject(h, "tie_embeddings", hp->tie_embeddings);
    cJSON_AddBoolToObject(h, "attn_bias", hp->attn_bias);
    cJSON_AddBoolToObject(h, "qk_norm", hp->qk_norm);
    if (hp->sliding_window > 0) {
        int all = 1;
        for (int32_t L = 0; L < hp->n_layers; L++) all &= L < IR_MAX_LAYER_TYPES && hp->layer_sliding[L];
        cJSON_AddNumberToObject(h, "sliding_window", hp->sliding_window);
        /* every layer windowed: the runtime may release pages that fell out of the window */
        if (all) cJSON_AddNumberToObject(h, "kv_window", hp->sliding_window);
    }
    if (hp->n_experts > 0) {
        cJSON_AddNumberToObject(h, "n_experts", hp->n_experts);
        cJSON_AddNumberToObject(h, "experts_per_token", hp->top_k);
        cJSON_AddNumberToObject(h, "moe_intermediate", hp->moe_intermediate);
    }
    return h;
}

/* The manifest's name of a package element type. */
static const char *dtype_str(ig_dtype d) {
    const cg_format *f = cg_format_of(d);
    return f ? f->name : "f32";
}

/* --quant / --quant-group / --quant-skip into the packer's options; *on = 0 for none. The
 * activations of an a16 package are bf16 unless --dtype says f32. */
static ig_status parse_quant(const cc_options *o, int cuda, ig_dtype *dt, pk_quant *q, int *on, ig_err *err) {
    *on = 0;
    memset(q, 0, sizeof *q);
    if (!o->quant || !strcmp(o->quant, "none")) {
        if (o->quant_group || o->quant_skip)
            return ig_fail(err, IG_ERR_INVALID, "--quant-group and --quant-skip need --quant a16w8, a16w4, a8w8, fp8 or keep");
        return IG_OK;
    }
    if (!strcmp(o->quant, "a16w8")) q->wdtype = IG_DTYPE_Q8C;
    else if (!strcmp(o->quant, "a8w8")) q->wdtype = IG_DTYPE_Q8A; /* activations quantized per token in the kernels */
    else if (!strcmp(o->quant, "a16w4")) q->wdtype = IG_DTYPE_Q4K, q->head = IG_DTYPE_Q6K; /* vocabulary: 6 bits, group 32 */
    else if (!strcmp(o->quant, "keep")) q->keep = 1;
    else if (!strcmp(o->quant, "fp8")) { /* e4m3 weights per channel: CUDA only */
        if (!cuda)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "--quant fp8 (e4m3 weights) is for CUDA targets; CPU packages take "
                           "a16w8 (int8 weights, the same bytes) or a8w8 (int8 activations too)");
        if (o->tp > 1)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "--quant fp8 is not built for tensor-parallel packages (--tp %d): use a16w8",
                           o->tp);
        q->wdtype = IG_DTYPE_F8R, q->head = IG_DTYPE_Q8R; /* the vocabulary matrices in int8 rows */
    } else return ig_fail(err, IG_ERR_INVALID, "unknown --quant '%s' (expected none, a16w8, a16w4, a8w8, fp8, keep)", o->quant);
    /* GPU rows (templates/cuda/wq.cuh): a16w8 and a8w8 q8r (a8w8's activations become int8 in the
     * prefill matmuls, templates/cuda/act8.cu), a16w4 q4r with its vocabulary matrices in int8, fp8
     * f8r (e4m3 codes in q8r's layout; activations to e4m3 per token in the prefill matmuls, the
     * vocabulary matrices and MoE experts in q8r) */
    if (cuda && !q->keep && q->wdtype != IG_DTYPE_F8R) {
        const int w8 = q->wdtype == IG_DTYPE_Q8C || q->wdtype == IG_DTYPE_Q8A;
        q->head = w8 ? 0 : IG_DTYPE_Q8R, q->wdtype = w8 ? IG_DTYPE_Q8R : IG_DTYPE_Q4R;
    }
    if (cuda && o->dtype && !strcmp(o->dtype, "f32"))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--quant %s: CUDA packages with quantized weights compute in bf16 or f16, "
                       "not --dtype f32", o->quant);
    /* group 32 by default: on SmolLM2 (a Q4_1 GGUF) g128 costs 1.52x the perplexity, g32 1.0004x */
    q->group = o->quant_group ? o->quant_group : 32;
    if (q->keep && o->quant_group)
        return ig_fail(err, IG_ERR_INVALID, "--quant-group is for a16w4 (keep keeps the GGUF's blocks of 32)");
    if (q->wdtype == IG_DTYPE_Q8C && o->quant_group) /* CPU a16w8 per group of K: q8g (f16 scales) */
        q->wdtype = IG_DTYPE_Q8G;
    if ((q->wdtype == IG_DTYPE_Q8A || q->wdtype == IG_DTYPE_Q8R || q->wdtype == IG_DTYPE_F8R) && o->quant_group)
        return ig_fail(err, IG_ERR_INVALID, "--quant-group is for a16w4%s (%s scales each output channel%s)", cuda ? "" : " and CPU a16w8",
                       o->quant, cuda ? " on CUDA" : "");
    if (q->group != 32 && q->group != 64 && q->group != 128)
        return ig_fail(err, IG_ERR_INVALID, "--quant-group %d: expected 32, 64 or 128", q->group);
    q->skip = o->quant_skip;
    if (!o->dtype) *dt = IG_DTYPE_BF16;
    *on = 1;
    return IG_OK;
}

/* Whether g holds a GPTQ / AWQ layer. */
static int has_gq_layers(const ir_graph *g) {
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].src_type == IR_STYPE_GPTQ || g->tensors[i].src_type == IR_STYPE_AWQ) return 1;
    return 0;
}

/* Whether g holds weights stored as GGUF blocks. */
static int has_blocks(const ir_graph *g) {
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == IR_TENSOR_WEIGHT && g->tensors[i].src_type >= IR_STYPE_Q8_0 &&
            g->tensors[i].src_type <= IR_STYPE_Q5_1)
            return 1;
    return 0;
}

/* The quantization without --quant: a GPTQ / AWQ checkpoint keeps its integers and a GGUF of
 * quantized blocks keeps them as stored (--quant keep, 16-bit activations unless --dtype says
 * otherwise), as the file's bytes are what its user chose. CPU targets of one rank keep every GGUF
 * block type but Q5_1 (a file holding Q5_1 is dequantized, the log naming the tensor); CUDA
 * targets of one rank keep Q4_0 / Q4_1 as q4r rows and dequantize the other types to the 16-bit
 * type (pk_plan_build; the log counts them), and dequantize GPTQ / AWQ; --tp dequantizes. */
static void default_quant(const cc_options *o, const ir_graph *g, int cuda, pk_quant *quant, int *quant_on,
                          ig_dtype *dt) {
    const int gq = has_gq_layers(g);
    const ir_tensor *bad = NULL;
    if (o->tp > 1 || (cuda && (gq || !pk_keep_rows_default(g)))) {
        if (!gq && has_blocks(g))
            LOG(o, "%s (--quant a16w8 / a16w4 quantize them again)\n",
                o->tp > 1 ? "tensor-parallel packages dequantize a GGUF's blocks"
                          : "CUDA packages keep Q4_0 / Q4_1 blocks only (as q4r rows): this file's are dequantized");
        return;
    }
    if (!cuda && !gq && !pk_keep_default(g, &bad)) {
        if (bad)
            LOG(o, "%s is stored as %s, which CPU packages cannot keep: the GGUF's weights are dequantized "
                   "(--quant a16w8 / a16w4 quantize them again)\n", bad->name, ir_stype_name(bad->src_type));
        return;
    }
    quant->keep = 1, *quant_on = 1;
    if (!o->dtype) *dt = IG_DTYPE_BF16;
    LOG(o, gq ? "GPTQ / AWQ checkpoint: weights kept as their integers (--quant keep; --quant none dequantizes)\n"
        : cuda ? "GGUF Q4_0 / Q4_1 blocks kept as q4r rows, other block types dequantized (--quant keep; --quant none "
                 "dequantizes all)\n"
               : "GGUF blocks kept as stored (--quant keep; --quant none dequantizes)\n");
}

/* --quant keep on CUDA: the log names the matrices stored as GGUF blocks that the plan dequantized
 * (block types q4r cannot hold exactly, parts of different types, layers that differ). */
static void log_unkept(const cc_options *o, const ir_graph *g, const pk_plan *plan, ig_dtype dt) {
    for (int32_t i = 0; i < plan->n; i++) {
        ir_stype st;
        const ir_tensor *x = &g->tensors[plan->e[i].tensor];
        if (plan->e[i].kept || plan->e[i].fmt != PK_ROWMAJOR || plan->e[i].dtype >= IG_DTYPE_Q8C) continue;
        if (!ir_weight_stype(g, x, &st))
            LOG(o, "%s: parts stored in different types, dequantized to %s\n", x->name, dtype_str(dt));
        else if (st >= IR_STYPE_Q8_0 && st <= IR_STYPE_Q5_1)
            LOG(o, "%s: %s blocks dequantized to %s (CUDA packages keep Q4_0 / Q4_1)\n", x->name, ir_stype_name(st),
                dtype_str(dt));
    }
}

/* The manifest's "quant": the scheme, its layout and how many matrices it took and kept. */
static cJSON *quant_json(const char *mode, const pk_quant *q, const pk_plan *plan) {
    cJSON *j = cJSON_CreateObject();
    int nq = 0, nkept = 0, rows = q->wdtype == IG_DTYPE_Q8R || q->wdtype == IG_DTYPE_Q4R || q->wdtype == IG_DTYPE_F8R, kept_rows = 0;
    for (int32_t i = 0; i < plan->n; i++) kept_rows |= plan->e[i].kept && plan->e[i].fmt == PK_ROWMAJOR;
    rows |= kept_rows;
    for (int32_t i = 0; i < plan->n; i++) {
        if (plan->e[i].fmt == PK_VEC_F32) continue;
        if (plan->e[i].dtype >= IG_DTYPE_Q8C) nq++;
        else nkept++;
    }
    cJSON_AddStringToObject(j, "mode", mode);
    char used[96] = "";
    int gq = 0, gguf = 0;
    for (int32_t i = 0; i < plan->n; i++) { /* the quantized formats the plan holds, in order of first use */
        const char *nm = dtype_str(plan->e[i].dtype);
        if (plan->e[i].dtype < IG_DTYPE_Q8C || strstr(used, nm)) continue;
        snprintf(used + strlen(used), sizeof used - strlen(used), "%s%s", used[0] ? ", " : "", nm);
        gq |= plan->e[i].kept && plan->e[i].stype == IR_STYPE_GPTQ;
        gguf |= plan->e[i].kept && plan->e[i].stype != IR_STYPE_GPTQ;
    }
    cJSON_AddStringToObject(j, "weights", q->keep ? used : dtype_str(q->wdtype));
    if (q->keep && gq) {
        cJSON_AddStringToObject(j, "scheme", "GPTQ / AWQ layers kept as their integers: 4-bit codes as q4z, 8-bit as q8z, "
                                             "per output channel and group of K an f16 scale and an integer zero point "
                                             "as stored (GPTQ v1: stored zero + 1): w = scale (q - zero); float matrices "
                                             "stay float");
        for (int32_t i = 0; i < plan->n; i++)
            if (plan->e[i].kept && plan->e[i].stype == IR_STYPE_GPTQ) {
                cJSON_AddNumberToObject(j, "group", plan->e[i].group);
                break;
            }
    }
    if (q->keep && kept_rows) {
        cJSON_AddStringToObject(j, "scheme", "GGUF blocks kept on CUDA: Q4_0 and Q4_1 as q4r rows with group 32 (scale d, "
                                             "min m or -8d, the nibbles as stored); matrices of other block types "
                                             "dequantized to the package's 16-bit type");
        cJSON_AddNumberToObject(j, "group", 32);
    } else if (q->keep && (gguf || !gq)) {
        cJSON_AddStringToObject(j, gq ? "gguf_scheme" : "scheme",
                                "GGUF blocks kept: Q4_0 and Q4_1 as q4g with group 32 (scale d, min m or -8d), "
                                "Q8_0 and Q5_0 as q8g with group 32 (scale d; Q5_0's levels minus 16), Q4_K as q4k and "
                                "Q5_K as q6k (group 32, superblocks of 256: d, dmin and the 6-bit scale and min codes as "
                                "stored), Q6_K as q6s (group 16: d as stored, dmin = 32 d, the int8 scales as signed "
                                "scale and min codes: d sc (q - 32)), scales f16 as stored; float matrices stay float");
        if (!gq) cJSON_AddNumberToObject(j, "group", 32);
    } else if (q->keep) {
        /* GPTQ / AWQ only: described above */
    } else if (q->wdtype == IG_DTYPE_Q8R && !strcmp(mode, "a8w8")) {
        cJSON_AddStringToObject(j, "scheme", "int8 symmetric weights, one f32 scale per output channel; steps past qgemm.cu's "
                                             "(a8_tmin tokens and more, 33 by default) quantize the layers' activations per "
                                             "token to int8 (max |x| / 127) for cuBLAS's int8 GEMM (int32 sums, scaled back "
                                             "after it); shorter steps and the vocabulary matrices take 16-bit activations "
                                             "(the a16w8 kernels)");
    } else if (q->wdtype == IG_DTYPE_F8R) {
        cJSON_AddStringToObject(j, "scheme", "fp8 e4m3fn weights (round to nearest even), one f32 scale per output channel "
                                             "(max |w| / 448); steps of a8_tmin tokens and more (33 by default) quantize the "
                                             "layers' activations per token to e4m3 (max |x| / 448) for cuBLASLt's fp8 GEMM "
                                             "(sm_89+; the two scale vectors applied in it), shorter steps decode the codes to "
                                             "16 bits in the kernels; the vocabulary matrices and MoE experts in int8 rows (q8r)");
        cJSON_AddStringToObject(j, "vocabulary_matrices", dtype_str(q->head));
    } else if (q->wdtype == IG_DTYPE_Q8C || q->wdtype == IG_DTYPE_Q8R) {
        cJSON_AddStringToObject(j, "scheme", "int8 symmetric, one f32 scale per output channel");
    } else if (q->wdtype == IG_DTYPE_Q8G) {
        cJSON_AddStringToObject(j, "scheme", "int8 symmetric, an f16 scale per output channel and group of K (max |w| / 127, "
                                             "rounded up): w = scale q");
        cJSON_AddNumberToObject(j, "group", q->group);
    } else if (q->wdtype == IG_DTYPE_Q4R) {
        cJSON_AddStringToObject(j, "scheme", "uint4 asymmetric, two per byte; an f16 scale and min per output channel and group "
                                             "of K after each row: w = scale q + min");
        cJSON_AddNumberToObject(j, "group", q->group);
        cJSON_AddStringToObject(j, "vocabulary_matrices", dtype_str(q->head));
    } else if (q->wdtype == IG_DTYPE_Q8I) {
        cJSON_AddStringToObject(j, "scheme", "int8 symmetric, one f32 scale per output channel, k in quads; the bf16 activations "
                                             "quantized per token to int16 per 256 columns (max |x| / 32767) in the matmul, "
                                             "int32 sums (vpdpwssd / vpmaddwd)");
    } else if (q->wdtype == IG_DTYPE_Q4I) {
        cJSON_AddStringToObject(j, "scheme", "uint4 asymmetric, two per byte in k-octets (lane j's columns 8o + i at byte 4j + i, "
                                             "4..7 in the high nibbles); per output channel and group of K an 8-bit scale and "
                                             "min code under an f16 pair (d, dmin) per 8 groups: w = d sc q - dmin mn; the bf16 "
                                             "activations quantized per token to int8 per 32 columns (max |x| / 127), int32 "
                                             "sums (vpdpbusd / vpmaddubsw), the min term on the group sums of the quantized "
                                             "activations; the vocabulary matrices the same in 6 bits (q6i: codes in k-sixteens, "
                                             "the high bit pairs after each two octets of nibbles, group 32)");
        cJSON_AddNumberToObject(j, "group", q->group);
        cJSON_AddNumberToObject(j, "superblock", 8 * q->group);
        cJSON_AddStringToObject(j, "vocabulary_matrices", dtype_str(q->head));
    } else if (q->wdtype == IG_DTYPE_Q8A) {
        cJSON_AddStringToObject(j, "scheme", "int8 symmetric weights, one f32 scale per output channel, times int8 activations "
                                             "quantized per token (max |x| / 127) in the matmul, int32 sums");
    } else if (q->wdtype == IG_DTYPE_Q4K) {
        cJSON_AddStringToObject(j, "scheme", "uint4 asymmetric, two per byte; per output channel and group of K an 8-bit scale "
                                             "and min code, under an f16 pair (d, dmin) per 8 groups: w = d sc q - dmin mn");
        cJSON_AddNumberToObject(j, "group", q->group);
        cJSON_AddNumberToObject(j, "superblock", 8 * q->group);
        cJSON_AddStringToObject(j, "vocabulary_matrices", dtype_str(q->head));
    } else {
        cJSON_AddStringToObject(j, "scheme", "uint4 asymmetric, f16 scale and min per output channel and group of K, two per byte");
        cJSON_AddNumberToObject(j, "group", q->group);
        cJSON_AddStringToObject(j, "vocabulary_matrices", dtype_str(q->head));
    }
    cJSON_AddStringToObject(j, "layout", rows ? "rows, codes then scales (templates/cuda/wq.cuh)"
                                              : "16-row panels (templates/cpu/quant.h)");
    cJSON_AddStringToObject(j, "skip", q->skip ? q->skip : "");
    cJSON_AddNumberToObject(j, "quantized_matrices", nq);
    cJSON_AddNumberToObject(j, "kept_matrices", nkept);
    return j;
}

/* --dtype not given: a 16-bit checkpoint (bf16 / f16; GGUF files other than all-f32 count as
 * 16-bit) compiles to bf16 where the target computes in bf16 (CUDA, CPUs with AVX-512 BF16),
 * everything else to f32. */
static ig_dtype default_dtype(const ir_hparams *hp, const cg_target *t, int cuda) {
    int src16 = hp->src_dtype == IG_DTYPE_BF16 || hp->src_dtype == IG_DTYPE_F16;
    int bf16 = cuda || (t && (t->cpu_features & IG_CPU_AVX512BF16));
    return src16 && bf16 ? IG_DTYPE_BF16 : IG_DTYPE_F32;
}

/* ---- tensor parallelism (--tp N): one graph, plan and weights file per rank */

/* Each rank's weights: the rank's graph (imported again, sharded, fused) must lay out exactly like
 * rank 0's (`plan`), since all ranks share model.so; its packed file is weights.rankR.bin. hash:
 * [ranks][plan->n] (row 0 is rank 0's, filled here from plan); split[r]: rank r's slices. */
static ig_status pack_ranks(const cc_options *o, ig_dtype dt, pk_format fmt, const pk_quant *quant, const pk_plan *plan,
                            uint64_t *hash, cp_tp_plan *split, ig_err *err) {
    for (int32_t i = 0; i < plan->n; i++) hash[i] = plan->e[i].hash;
    ig_status st = IG_OK;
    for (int32_t r = 1; r < o->tp && !st; r++) {
        ir_graph *g = NULL;
        pk_plan pr = {0};
        char path[4096];
        st = ir_import_any(o->input, &g, err);
        if (!st) st = cp_shard(g, r, o->tp, &split[r], err);
        if (!st) st = cp_run_all(g, NULL, err);
        if (!st) st = pk_plan_build(g, dt, fmt, quant, &pr, err);
        for (int32_t i = 0; !st && i < plan->n; i++)
            if (pr.n != plan->n || pr.e[i].offset != plan->e[i].offset || pr.e[i].nbytes != plan->e[i].nbytes)
                st = ig_fail(err, IG_ERR_INTERNAL, "--tp: rank %d's weights lay out unlike rank 0's (%s)", r, plan->e[i].name);
        snprintf(path, sizeof path, "%s/weights.rank%d.bin", o->out_dir, r);
        if (!st) st = pk_write(g, &pr, path, err);
        for (int32_t i = 0; !st && i < plan->n; i++) hash[(size_t)r * plan->n + i] = pr.e[i].hash;
        if (!st) LOG(o, "packed rank %d's weights (%s)\n", r, path);
        pk_plan_free(&pr);
        ir_graph_free(g);
    }
    return st;
}

/* manifest.json's "tp": the ranks, and how each sliced checkpoint tensor is split (every other
 * tensor is replicated). */
static cJSON *tp_json(int32_t ranks, const cp_tp_plan *split) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "ranks", ranks);
    cJSON_AddStringToObject(j, "weights", "weights.rankR.bin: rank R's slices, one layout for all ranks");
    cJSON_AddStringToObject(j, "replicated", "every tensor not listed (norms, MoE routers and gates)");
    cJSON *ts = cJSON_AddArrayToObject(j, "split");
    for (int32_t i = 0; i < split[0].n; i++) {
        const cp_tp_split *s = &split[0].v[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", s->name);
        cJSON_AddStringToObject(e, "axis", s->axis == 1 ? "rows" : "cols");
        cJSON_AddNumberToObject(e, "size", (double)s->full);
        cJSON_AddNumberToObject(e, "per_rank", (double)s->count);
        cJSON *st = cJSON_AddArrayToObject(e, "starts"); /* past size: zeros (padding, rank-0-only biases) */
        for (int32_t r = 0; r < ranks; r++)
            cJSON_AddItemToArray(st, cJSON_CreateNumber(i < split[r].n ? (double)split[r].v[i].start : -1));
        cJSON_AddItemToArray(ts, e);
    }
    return j;
}

/* The weights' hashes of every rank as manifest strings, into tensor entry e. */
static void rank_hashes_json(cJSON *e, const uint64_t *hash, int32_t ranks, int32_t n, int32_t i) {
    cJSON *a = cJSON_AddArrayToObject(e, "rank_hashes");
    for (int32_t r = 0; r < ranks; r++) {
        char hx[17];
        snprintf(hx, sizeof hx, "%016llx", (unsigned long long)hash[(size_t)r * n + i]);
        cJSON_AddItemToArray(a, cJSON_CreateString(hx));
    }
}

/* --max-context: the package's context in place of the model's. Past the model's own, positions it
 * was not trained on are computed as transformers computes them (RoPE and its scaling have no end):
 * the log says so. A sliding window the importer dropped for covering the whole trained context
 * stays dropped. */
static void set_max_context(const cc_options *o, ir_hparams *hp) {
    if (o->max_context > hp->max_context)
        LOG(o, "warning: --max-context %d is past the model's %d tokens (max_position_embeddings%s): positions "
               "beyond it were not trained\n",
            o->max_context, hp->max_context, hp->rope_orig_max > 0 && hp->max_context == hp->rope_orig_max ? ", as capped for its rope" : "");
    hp->max_context = o->max_context;
}

ig_status cc_compile(const cc_options *o, ig_err *err) {
    const char *pkg = o->out_dir;
    ig_dtype dt = IG_DTYPE_F32;
    int cuda = o->target && !strncmp(o->target, "cuda", 4) && (o->target[4] == 0 || o->target[4] == ':');
    if (o->target && strchr(o->target, ',') && (!cuda || strstr(o->target, "cpu"))) return cc_compile_fat(o, err);
    if (o->dtype && !strcmp(o->dtype, "bf16"))
        dt = IG_DTYPE_BF16;
    else if (o->dtype && !strcmp(o->dtype, "f16"))
        dt = IG_DTYPE_F16;
    else if (o->dtype && strcmp(o->dtype, "f32"))
        return ig_fail(err, IG_ERR_INVALID, "unknown --dtype '%s' (expected f32, bf16, or f16 for CUDA)", o->dtype);
    if (dt == IG_DTYPE_F16 && !cuda)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--dtype f16 is for CUDA targets; CPU packages take f32 or bf16");
    pk_quant quant;
    int quant_on;
    ig_status qst = parse_quant(o, cuda, &dt, &quant, &quant_on, err);
    if (qst) return qst;
    cg_cuda_target ct;
    const cg_target *t = cuda ? NULL : cg_target_find(o->target);
    if (cuda) {
        ig_status st0 = cg_cuda_target_parse(o->target, &ct, err);
        if (st0) return st0;
    } else if (!t) {
        return ig_fail(err, IG_ERR_INVALID, "unknown --target '%s' (known: %s, cuda:sm_80,sm_90, ...)", o->target,
                       cg_target_names());
    }
    char target_name[160];
    if (cuda) {
        snprintf(target_name, sizeof target_name, "cuda-");
        for (int i = 0; i < ct.n_archs; i++)
            snprintf(target_name + strlen(target_name), sizeof target_name - strlen(target_name), "%s%s", i ? "," : "", ct.archs[i]);
    } else {
        snprintf(target_name, sizeof target_name, "%s", t->full_name);
    }
    cg_tuning tuning;
    ig_status tst = compile_tuning(o, cuda, &tuning, err);
    if (tst) return tst;
    /* --tune cpu_iact=1 (the default), a16 on x86-64 with AVX2 or better and bf16 activations: the integer-activation
     * layouts (int8 / int16 dot products, templates/cpu/quant.h); f32 activations and AArch64 keep
     * the float kernels of q8c / q4k */
    if (tuning.cpu_iact && quant_on && !quant.keep && t && dt == IG_DTYPE_BF16 && !strcmp(t->arch, "x86_64") &&
        (t->cpu_features & (IG_CPU_AVX2 | IG_CPU_AVX512F))) {
        quant.wdtype = quant.wdtype == IG_DTYPE_Q8C ? IG_DTYPE_Q8I : quant.wdtype == IG_DTYPE_Q4K ? IG_DTYPE_Q4I : quant.wdtype;
        if (quant.head == IG_DTYPE_Q6K) quant.head = IG_DTYPE_Q6I; /* a16w4's vocabulary: the same 6-bit codes, int8 activations */
    }
    const cg_kv_format *kv_req = o->kv_cache ? cg_kv_format_find(o->kv_cache) : NULL;
    /* pages of 16 tokens, 64 with uint4 KV: its keys are delta-coded within a page (kv_quant.h), so
     * a page's first key is the one stored absolute in 4 bits, and fewer of them cost less
     * (SmolLM2, bf16 weights, perplexity ratio against bf16 KV over three texts: 1.035 -> 1.029) */
    const int32_t ps = o->page_size > 0 ? o->page_size : kv_req && kv_req->kvq == 4 ? 64 : 16;
    if (ps > 4096) return ig_fail(err, IG_ERR_INVALID, "--page-size %d is too large", ps);
    if (o->kv_cache && !kv_req)
        return ig_fail(err, IG_ERR_INVALID, "unknown --kv-cache '%s' (expected %s)", o->kv_cache, cg_kv_format_names());
    if (kv_req && !(cuda ? kv_req->cuda : kv_req->cpu))
        return ig_fail(err, IG_ERR_UNSUPPORTED, cuda ? "--kv-cache %s is for CPU targets (CUDA packages take their dtype, int8, uint4 or fp8)"
                                                     : "--kv-cache %s is for CUDA targets; CPU packages take f32, bf16, int8, uint4 or fp8",
                       kv_req->name);

    double t0 = rt_now();
    ir_graph *g = NULL;
    ig_status st = ir_import_any(o->input, &g, err);
    if (st) return st;
    LOG(o, "imported %s: %s, %d layers, hidden %d, vocab %d (%.2f s)\n", o->input, g->hp.arch,
        g->hp.n_layers, g->hp.hidden, g->hp.vocab, rt_now() - t0);
    if (!st && !o->quant) default_quant(o, g, cuda, &quant, &quant_on, &dt);
    if (!o->dtype && !quant_on) { /* --quant without --dtype: 16-bit activations (parse_quant) */
        dt = default_dtype(&g->hp, t, cuda);
        LOG(o, "dtype %s (the checkpoint's is %s; --dtype chooses)\n", dtype_str(dt), dtype_str(g->hp.src_dtype));
    }
    if (g->hp.head_dim % 2)
        st = ig_fail(err, IG_ERR_UNSUPPORTED, "%s: head_dim %d is odd (RoPE needs pairs)", o->input, g->hp.head_dim);
    if (!st && o->max_context > 0) set_max_context(o, &g->hp);
    int32_t tp = o->tp > 1 ? o->tp : 1;
    cp_tp_plan *split = calloc((size_t)tp, sizeof *split);
    uint64_t *rank_hash = NULL;
    if (!split) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ir_hparams model_hp = g->hp; /* the manifest describes the model, tensor_parallel its shards */
    if (!st && tp > 1) st = cp_shard(g, 0, tp, &split[0], err);
    if (!st && tp > 1) LOG(o, "sharded for %d ranks: %d heads, %d KV heads, intermediate %d, vocab %d per rank\n", tp,
                           g->hp.n_heads, g->hp.n_kv_heads, g->hp.intermediate, g->hp.tp_vocab);
    if (!st) st = cp_run_all(g, o->dump, err);
    pk_plan plan = {0};
    char path[4096], src_dir[4096];
    if (!st) st = pk_plan_build(g, dt, cuda ? PK_ROWMAJOR : PK_PANEL, quant_on ? &quant : NULL, &plan, err);
    if (!st && cuda && quant_on && quant.keep) log_unkept(o, g, &plan, dt);
    snprintf(src_dir, sizeof src_dir, "%s/src", pkg);
    if (!st) st = rt_mkdirs(src_dir, err);
    if (!st) {
        snprintf(path, sizeof path, tp > 1 ? "%s/weights.rank0.bin" : "%s/weights.bin", pkg);
        double t1 = rt_now();
        st = pk_write(g, &plan, path, err);
        if (!st) LOG(o, "packed %d weights, %.1f MB (%.2f s)\n", plan.n, plan.total / 1e6, rt_now() - t1);
    }
    if (!st && tp > 1) {
        rank_hash = malloc(sizeof *rank_hash * (size_t)tp * (size_t)(plan.n ? plan.n : 1));
        st = rank_hash ? pack_ranks(o, dt, cuda ? PK_ROWMAJOR : PK_PANEL, quant_on ? &quant : NULL, &plan, rank_hash, split, err)
                       : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    const cg_kv_format *kvf = kv_req ? kv_req : cg_kv_format_of(dt);
    if (!st && o->kv_cache)
        LOG(o, "KV cache %s: %llu bytes per token\n", kvf->name,
            (unsigned long long)(cg_kv_layer_page_bytes(&g->hp, ps, kvf) * g->hp.n_layers / ps));
    if (!st) {
        cg_options co = {.dtype = dt, .kv_dtype = kvf->dtype, .page_size = ps, .compiler_version = IGNIS_VERSION,
                         .tuning = &tuning, .act8 = cuda && quant_on && o->quant && !strcmp(o->quant, "a8w8"),
                         .fp8 = cuda && quant_on && o->quant && !strcmp(o->quant, "fp8")};
        snprintf(path, sizeof path, "%s/model.c", src_dir);
        FILE *f = fopen(path, "w");
        char cu_path[4096];
        snprintf(cu_path, sizeof cu_path, "%s/model.cu", src_dir);
        FILE *fcu = cuda ? fopen(cu_path, "w") : NULL;
        if (!f || (cuda && !fcu)) {
            st = ig_fail(err, IG_ERR_IO, "%s: %s", !f ? path : cu_path, strerror(errno));
        } else if (cuda) {
            st = cg_emit_cuda(g, &plan, &ct, &co, fcu, f, err);
        } else {
            st = cg_emit_c(g, &plan, t, &co, f, err);
        }
        if (f && fclose(f) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "%s: write failed", path);
        if (fcu && fclose(fcu) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "%s: write failed", cu_path);
    }
    if (!st) st = write_sources(src_dir, cuda ? "cuda" : "cpu", err);
    if (!st && cuda) st = build_kernels(o, &ct, src_dir, err);
    if (!st) {
        double t1 = rt_now();
        st = build_so(o, t, cuda, pkg, err);
        if (!st) LOG(o, "built %s/model.so for %s (%.2f s)\n", pkg, target_name, rt_now() - t1);
    }
    /* tokenizer files travel with the package; a GGUF carries its tokenizer in metadata */
    int has_tok = 0;
    if (!st && !g->tokenizer_dir && g->n_files == 1 && is_gguf_path(g->files[0])) {
        st = pt_write_gguf_tokenizer(g->files[0], pkg, err);
        has_tok = !st;
    }
    if (!st && g->tokenizer_dir) {
        static const char *names[] = {"tokenizer.json", "tokenizer_config.json"};
        for (int i = 0; i < 2 && !st; i++) {
            char from[4096];
            snprintf(from, sizeof from, "%s/%s", g->tokenizer_dir, names[i]);
            snprintf(path, sizeof path, "%s/%s", pkg, names[i]);
            if (access(from, R_OK) == 0) {
                st = copy_file(from, path, err);
                has_tok |= i == 0;
            }
        }
    }
    if (!st) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "format", "ignis-package");
        cJSON_AddNumberToObject(m, "format_version", 1);
        cJSON_AddNumberToObject(m, "abi_version", IG_MODEL_ABI_VERSION);
        cJSON_AddStringToObject(m, "compiler_version", IGNIS_VERSION);
        cJSON_AddStringToObject(m, "target", target_name);
        cJSON_AddStringToObject(m, "device", cuda ? "cuda" : "cpu");
        cJSON_AddNumberToObject(m, "cpu_features", cuda ? 0 : t->cpu_features);
        cJSON_AddStringToObject(m, "dtype", dtype_str(dt));
        cJSON_AddStringToObject(m, "kv_dtype", kvf->name);
        if (kvf->scheme) cJSON_AddStringToObject(m, "kv_scheme", kvf->scheme);
        cJSON_AddNumberToObject(m, "kv_bytes_per_token", (double)(cg_kv_layer_page_bytes(&g->hp, ps, kvf) * g->hp.n_layers / ps));
        cJSON_AddNumberToObject(m, "page_size", ps);
        if (quant_on) cJSON_AddItemToObject(m, "quant", quant_json(o->quant ? o->quant : "keep", &quant, &plan));
        cJSON_AddItemToObject(m, "hparams", hparams_json(&model_hp));
        cJSON_AddItemToObject(m, "tuning", tuning_json(&tuning));
        if (cuda) {
            /* what a fat package's loader needs to know of the code: its cubins, its PTX, its host side */
            int newest = 0;
            for (int i = 0; i < ct.n_archs; i++)
                if (atoi(ct.archs[i] + 3) > newest) newest = atoi(ct.archs[i] + 3);
            cJSON_AddStringToObject(m, "cuda_archs", target_name + 5);
            cJSON_AddNumberToObject(m, "ptx", newest);
            cJSON_AddStringToObject(m, "host_arch", rt_host_arch());
        }
        cJSON *gen = cJSON_AddObjectToObject(m, "generation");
        cJSON_AddNumberToObject(gen, "bos_token_id", g->hp.bos_id);
        cJSON *eos = cJSON_AddArrayToObject(gen, "eos_token_ids");
        for (int i = 0; i < g->hp.n_eos; i++) cJSON_AddItemToArray(eos, cJSON_CreateNumber(g->hp.eos_ids[i]));
        cJSON_AddBoolToObject(m, "tokenizer", has_tok);
        /* inputs: the source files and their hashes, so a package says what it was built from */
        cJSON *inputs = cJSON_AddArrayToObject(m, "inputs");
        for (int32_t i = 0; i < g->n_files; i++) {
            cJSON *in = cJSON_CreateObject();
            cJSON_AddStringToObject(in, "path", g->files[i]);
            struct stat sb;
            if (stat(g->files[i], &sb) == 0) cJSON_AddNumberToObject(in, "bytes", (double)sb.st_size);
            char *data;
            size_t len;
            ig_err e2;
            if (sb.st_size < (1 << 20) && rt_read_file(g->files[i], &data, &len, &e2) == IG_OK) {
                char hx[17];
                snprintf(hx, sizeof hx, "%016llx", (unsigned long long)rt_hash64(data, len, 0));
                cJSON_AddStringToObject(in, "hash", hx);
                free(data);
            }
            cJSON_AddItemToArray(inputs, in);
        }
        if (tp > 1) {
            cJSON_AddNumberToObject(m, "tp", tp);
            cJSON *tj = tp_json(tp, split);
            cJSON *pr = cJSON_AddObjectToObject(tj, "per_rank");
            cJSON_AddNumberToObject(pr, "n_heads", g->hp.n_heads);
            cJSON_AddNumberToObject(pr, "n_kv_heads", g->hp.n_kv_heads);
            cJSON_AddNumberToObject(pr, "intermediate", g->hp.intermediate);
            if (g->hp.n_experts) { /* one expert's (and the shared expert's) rows per rank, padded to 16 */
                cJSON_AddNumberToObject(pr, "moe_intermediate", g->hp.moe_intermediate);
                cJSON_AddNumberToObject(pr, "shared_intermediate", g->hp.shared_intermediate);
                cJSON_AddStringToObject(tj, "experts", "every expert's gate/up rows and down columns split by intermediate "
                                        "(zero-padded to 16 per rank); routers replicated");
            }
            cJSON_AddNumberToObject(pr, "vocab", g->hp.tp_vocab);
            cJSON_AddItemToObject(m, "tensor_parallel", tj);
        }
        cJSON *w = cJSON_AddObjectToObject(m, "weights");
        cJSON_AddStringToObject(w, "file", tp > 1 ? "weights.rank0.bin" : "weights.bin");
        cJSON_AddNumberToObject(w, "bytes", (double)plan.total);
        cJSON *ts = cJSON_AddArrayToObject(w, "tensors");
        for (int32_t i = 0; i < plan.n; i++) {
            cJSON *e = cJSON_CreateObject();
            char hx[17];
            cJSON_AddStringToObject(e, "name", plan.e[i].name);
            cJSON_AddNumberToObject(e, "offset", (double)plan.e[i].offset);
            cJSON_AddNumberToObject(e, "bytes", (double)plan.e[i].nbytes);
            cJSON_AddStringToObject(e, "layout", plan.e[i].fmt == PK_PANEL      ? "panel16"
                                                 : plan.e[i].fmt == PK_ROWMAJOR ? "rows16"
                                                                                : "vector");
            cJSON_AddStringToObject(e, "dtype", dtype_str(plan.e[i].dtype));
            if (plan.e[i].group) cJSON_AddNumberToObject(e, "group", plan.e[i].group);
            snprintf(hx, sizeof hx, "%016llx", (unsigned long long)plan.e[i].hash);
            cJSON_AddStringToObject(e, "hash", hx);
            if (tp > 1) rank_hashes_json(e, rank_hash, tp, plan.n, i);
            cJSON_AddItemToArray(ts, e);
        }
        char *text = cJSON_Print(m);
        cJSON_Delete(m);
        snprintf(path, sizeof path, "%s/manifest.json", pkg);
        st = text ? rt_write_file(path, text, strlen(text), err) : ig_fail(err, IG_ERR_NOMEM, "manifest: out of memory");
        free(text);
    }
    if (!st) LOG(o, "package %s ready (%.2f s total)\n", pkg, rt_now() - t0);
    pk_plan_free(&plan);
    for (int32_t r = 0; split && r < tp; r++) cp_tp_plan_free(&split[r]);
    free(split);
    free(rank_hash);
    ir_graph_free(g);
    return st;
}
