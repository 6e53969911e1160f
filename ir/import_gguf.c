/* import_gguf.c — GGUF file → unfused ignis graph (ir_import_gguf), and the GGUF tokenizer
 * metadata → plain data (ir_gguf_read_tokenizer) that package assembly turns into HF tokenizer
 * files (compiler/pkg_tokenizer.c).
 *
 * Architectures (general.architecture) llama (llama.cpp also files Mistral, Mixtral and SmolLM
 * under it), qwen2, qwen3, qwen2moe, qwen3moe, phi3, glm4, gemma3: metadata keys are prefixed by
 * the architecture's name. The graph is the op sequence ir/import_hf.c builds for the same HF
 * family (compiler passes pattern-match it; change both together); fused tensors (Phi-3's
 * attn_qkv, the fused ffn_up of Phi-3 / GLM-4) and 3-D expert tensors are split into byte ranges, with weights recorded by GGUF file offset and ggml storage type;
 * nothing is dequantized here. GGUF lists dims fastest first, so a [K] x [N] tensor is our
 * [N][K] matrix. llama.cpp's converter row-permutes attn_q / attn_k for its interleaved rope;
 * those weights carry IR_XFORM_UNPERMUTE_ROPE so ir/sources.c undoes it on read.
 *
 * The tokenizer reader checks every key the synthesis uses (model, token list, types, scores,
 * merges) and copies them out of the mapping, so what it returns outlives the file.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "ir.h"

/* ---- hyper-parameters */

typedef struct gg_ctx {
    gguf_file *f;
    const char *path;
    ir_graph *g;
    int32_t file_id;
    ig_err *err;
    char arch[32];    /* general.architecture: the prefix of the model's metadata keys */
    int kind;         /* gg_arch */
    char keys[4][96]; /* K()'s buffers, used in turn */
    int next_key;
} gg_ctx;

/* The architectures read, by general.architecture (llama covers Mistral and Mixtral). */
typedef enum gg_arch { GG_LLAMA, GG_QWEN2, GG_QWEN3, GG_QWEN2MOE, GG_QWEN3MOE, GG_PHI3, GG_GLM4, GG_GEMMA3 } gg_arch;
static const struct {
    const char *name, *hf_name;
} gg_archs[] = {
    [GG_LLAMA] = {"llama", "LlamaForCausalLM"},          [GG_QWEN2] = {"qwen2", "Qwen2ForCausalLM"},
    [GG_QWEN3] = {"qwen3", "Qwen3ForCausalLM"},          [GG_QWEN2MOE] = {"qwen2moe", "Qwen2MoeForCausalLM"},
    [GG_QWEN3MOE] = {"qwen3moe", "Qwen3MoeForCausalLM"}, [GG_PHI3] = {"phi3", "Phi3ForCausalLM"},
    [GG_GLM4] = {"glm4", "Glm4ForCausalLM"},             [GG_GEMMA3] = {"gemma3", "Gemma3ForCausalLM"},
};

/* "<arch>.<suffix>": the metadata key of this file's architecture (valid for four more calls). */
static const char *K(gg_ctx *c, const char *suffix) {
    char *b = c->keys[c->next_key++ % 4];
    snprintf(b, sizeof c->keys[0], "%s.%s", c->arch, suffix);
    return b;
}

/* Positive int32 key; def < 0 makes it required. */
static ig_status key_int(gg_ctx *c, const char *key, int64_t def, int32_t *out) {
    if (!gguf_find_kv(c->f, key)) {
        if (def < 0)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key %s is missing", c->path, key);
        *out = (int32_t)def;
        return IG_OK;
    }
    int64_t v;
    ig_status st = gguf_get_int(c->f, key, &v, c->err);
    if (st) return st;
    if (v <= 0 || v > INT32_MAX)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key %s = %lld must be a positive int32",
                       c->path, key, (long long)v);
    *out = (int32_t)v;
    return IG_OK;
}

static ig_status key_num(gg_ctx *c, const char *key, double def, double *out) {
    if (!gguf_find_kv(c->f, key)) {
        if (def < 0)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key %s is missing", c->path, key);
        *out = def;
        return IG_OK;
    }
    ig_status st = gguf_get_float(c->f, key, out, c->err);
    if (st) return st;
    if (!(*out > 0) || !isfinite(*out))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key %s = %g must be a positive number",
                       c->path, key, *out);
    return IG_OK;
}

/* llama.cpp stores Llama-3.1-style rope scaling only as the tensor rope_freqs.weight (one divisor
 * per frequency). Recover the HF parameters: factor is the largest divisor; low/high freq factors
 * and the original context are checked against the standard values by recomputing the tensor. */
static ig_status rope_from_freqs(gg_ctx *c, const gguf_tensor_info *t) {
    ir_hparams *h = &c->g->hp;
    int64_t half = h->head_dim / 2;
    if (t->type != GGML_T_F32 || t->n_dims != 1 || t->ne[0] != half)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: tensor rope_freqs.weight: want F32 [%lld], has type %s and %lld elements",
                       c->path, (long long)half, gguf_type_name(t->type) ? gguf_type_name(t->type) : "?",
                       (long long)t->n_elements);
    const float *fr = (const float *)(gguf_base(c->f) + t->file_offset);
    double factor = 0;
    for (int64_t i = 0; i < half; i++) {
        float v;
        memcpy(&v, &fr[i], 4);
        if (v > factor) factor = v;
    }
    if (factor == 1.0) return IG_OK;
    int32_t orig = 8192;
    ig_status st;
    if (gguf_find_kv(c->f, K(c, "rope.scaling.original_context_length")) &&
        (st = key_int(c, K(c, "rope.scaling.original_context_length"), -1, &orig)))
        return st;
    const double lo = 1.0, hi = 4.0, pi = 3.14159265358979323846;
    for (int64_t i = 0; i < half; i++) {
        double freq = 1.0 / pow(h->rope_theta, (double)(2 * i) / (double)h->head_dim);
        double wl = 2 * pi / freq, want;
        if (wl < orig / hi) want = 1.0;
        else if (wl > orig / lo) want = factor;
        else {
            double s = (orig / wl - lo) / (hi - lo);
            want = 1.0 / ((1 - s) / factor + s);
        }
        float v;
        memcpy(&v, &fr[i], 4);
        if (fabs(v - want) > 1e-3 * want)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                           "%s: tensor rope_freqs.weight[%lld] = %g does not match llama3 rope "
                           "scaling (factor %g, low 1, high 4, original context %d)",
                           c->path, (long long)i, v, factor, orig);
    }
    h->rope_type = IR_ROPE_LLAMA3;
    h->rope_factor = factor;
    h->rope_low_freq_factor = lo;
    h->rope_high_freq_factor = hi;
    h->rope_orig_max = orig;
    return IG_OK;
}

/* Optional non-negative int key (def when absent). */
static ig_status key_int0(gg_ctx *c, const char *key, int64_t def, int32_t *out) {
    if (!gguf_find_kv(c->f, key)) {
        *out = (int32_t)def;
        return IG_OK;
    }
    int64_t v;
    ig_status st = gguf_get_int(c->f, key, &v, c->err);
    if (st) return st;
    if (v < 0 || v > INT32_MAX)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key %s = %lld must be a non-negative int32", c->path, key,
                       (long long)v);
    *out = (int32_t)v;
    return IG_OK;
}

/* Sliding windows: <arch>.attention.sliding_window, on the layers that
 * <arch>.attention.sliding_window_pattern names: an array of bools (true = sliding) or an int n
 * (every n-th layer global); absent: every layer (Mistral), Gemma 3: n = 6 as llama.cpp has it. */
static ig_status parse_window(gg_ctx *c) {
    ir_hparams *h = &c->g->hp;
    int32_t w = 0;
    ig_status st = key_int0(c, K(c, "attention.sliding_window"), 0, &w);
    if (st || w == 0 || w >= h->max_context) return st;
    if (h->n_layers > IR_MAX_LAYER_TYPES)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: %d layers with per-layer attention types (at most %d)", c->path,
                       h->n_layers, IR_MAX_LAYER_TYPES);
    const gguf_kv *pk = gguf_find_kv(c->f, K(c, "attention.sliding_window_pattern"));
    int64_t pattern = c->kind == GG_GEMMA3 ? 6 : 0;
    if (pk && pk->type == GGUF_VT_ARRAY) {
        if (pk->arr_n != (uint64_t)h->n_layers || pk->arr_type == GGUF_VT_STRING || pk->arr_type == GGUF_VT_ARRAY)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: %s.attention.sliding_window_pattern must hold one bool per layer",
                           c->path, c->arch);
        for (int32_t L = 0; L < h->n_layers; L++) h->layer_sliding[L] = gguf_arr_int(pk, (uint64_t)L) != 0;
    } else {
        if (pk && (st = gguf_get_int(c->f, K(c, "attention.sliding_window_pattern"), &pattern, c->err))) return st;
        if (pattern < 0) return ig_fail(c->err, IG_ERR_FORMAT, "%s: negative sliding_window_pattern", c->path);
        for (int32_t L = 0; L < h->n_layers; L++) h->layer_sliding[L] = pattern ? (L + 1) % pattern != 0 : 1;
    }
    h->sliding_window = w;
    return IG_OK;
}

/* What the architecture adds to the Llama decoder (the choices of ir/import_hf.c, in llama.cpp's
 * terms; q/k/v biases are taken where the file has them): q/k norms, post-norms, GELU, Gemma's scales and local rope base, experts. */
static ig_status parse_family(gg_ctx *c) {
    ir_hparams *h = &c->g->hp;
    ig_status st;
    int k = c->kind;
    h->qk_norm = k == GG_QWEN3 || k == GG_QWEN3MOE || k == GG_GEMMA3;
    h->post_norms = k == GG_GLM4 || k == GG_GEMMA3;
    h->rope_interleaved = k == GG_GLM4; /* llama.cpp's "normal" rope on GLM-4's unpermuted rows */
    if (k == GG_GEMMA3) {
        h->mlp_act = IR_ACT_GELU_TANH;
        h->embed_scale = sqrt((double)h->hidden);
        double sc = 0;
        if (gguf_find_kv(c->f, K(c, "attention.scale")) && (st = key_num(c, K(c, "attention.scale"), -1, &sc))) return st;
        h->attn_scale = sc > 0 ? sc : 1.0 / sqrt((double)h->head_dim);
        if ((st = key_num(c, K(c, "rope.freq_base_swa"), 10000.0, &h->rope_theta_local))) return st;
        /* as the HF importer: the final cap applies, Gemma 3 leaves the attention cap unapplied */
        double v = 0;
        if (gguf_find_kv(c->f, K(c, "final_logit_softcapping")) &&
            (st = gguf_get_float(c->f, K(c, "final_logit_softcapping"), &v, c->err)))
            return st;
        if (!(v >= 0) || v > 1e30)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: %s.final_logit_softcapping = %g (need a value >= 0)", c->path,
                           c->arch, v);
        h->final_softcap = v;
    }
    if ((st = parse_window(c))) return st;
    if ((st = key_int0(c, K(c, "expert_count"), 0, &h->n_experts))) return st;
    if (h->n_experts == 0) return IG_OK;
    if (k != GG_LLAMA && k != GG_QWEN2MOE && k != GG_QWEN3MOE)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: experts in a %s file are not supported", c->path, c->arch);
    if ((st = key_int(c, K(c, "expert_used_count"), -1, &h->top_k)) ||
        (st = key_int(c, K(c, "expert_feed_forward_length"), h->intermediate, &h->moe_intermediate)) ||
        (st = key_int0(c, K(c, "expert_shared_feed_forward_length"), 0, &h->shared_intermediate)))
        return st;
    if (h->top_k > h->n_experts || h->top_k > 64 || h->n_experts > IR_MAX_PARTS)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: %d of %d experts per token is not supported", c->path, h->top_k,
                       h->n_experts);
    /* llama.cpp: Mixtral and Qwen3-MoE renormalize the top-k weights, Qwen2-MoE does not;
     * <arch>.expert_weights_norm says so explicitly where a converter wrote it */
    const gguf_kv *nk = gguf_find_kv(c->f, K(c, "expert_weights_norm"));
    h->norm_topk = nk && nk->type == GGUF_VT_BOOL ? nk->u != 0 : k != GG_QWEN2MOE;
    if (h->moe_intermediate % 16 || h->hidden % 16 || h->shared_intermediate % 16)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: MoE needs the hidden and expert sizes to be multiples of 16", c->path);
    return IG_OK;
}

static ig_status parse_hparams(gg_ctx *c) {
    ir_hparams *h = &c->g->hp;
    gguf_str arch;
    ig_status st = gguf_get_str(c->f, "general.architecture", &arch, c->err);
    if (st) return st;
    c->kind = -1;
    for (int i = 0; i < (int)(sizeof gg_archs / sizeof gg_archs[0]); i++)
        if (gguf_str_eq(arch, gg_archs[i].name)) c->kind = i;
    if (c->kind < 0)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: general.architecture \"%.*s\" is not supported (supported: llama, qwen2, qwen3, qwen2moe, "
                       "qwen3moe, phi3, glm4, gemma3)",
                       c->path, (int)(arch.n > 64 ? 64 : arch.n), arch.p);
    snprintf(c->arch, sizeof c->arch, "%s", gg_archs[c->kind].name);
    snprintf(h->arch, sizeof h->arch, "%s", gg_archs[c->kind].hf_name);
    if ((st = key_int(c, K(c, "block_count"), -1, &h->n_layers)) ||
        (st = key_int(c, K(c, "embedding_length"), -1, &h->hidden)) ||
        (st = key_int(c, K(c, "feed_forward_length"), -1, &h->intermediate)) ||
        (st = key_int(c, K(c, "attention.head_count"), -1, &h->n_heads)) ||
        (st = key_int(c, K(c, "attention.head_count_kv"), h->n_heads, &h->n_kv_heads)) ||
        (st = key_int(c, K(c, "context_length"), 2048, &h->max_context)) ||
        (st = key_num(c, K(c, "attention.layer_norm_rms_epsilon"), -1, &h->rms_eps)) ||
        (st = key_num(c, K(c, "rope.freq_base"), 10000.0, &h->rope_theta)))
        return st;
    if (gguf_find_kv(c->f, K(c, "attention.key_length"))) {
        if ((st = key_int(c, K(c, "attention.key_length"), -1, &h->head_dim))) return st;
    } else {
        if (h->hidden % h->n_heads)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: %s.embedding_length %d is not a multiple of attention.head_count %d", c->path,
                           c->arch, h->hidden, h->n_heads);
        h->head_dim = h->hidden / h->n_heads;
    }
    int32_t vlen = h->head_dim, rdim = h->head_dim;
    if ((st = key_int(c, K(c, "attention.value_length"), h->head_dim, &vlen)) ||
        (st = key_int(c, K(c, "rope.dimension_count"), h->head_dim, &rdim)))
        return st;
    if (vlen != h->head_dim)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: %s.attention.value_length %d differs from key_length %d", c->path, c->arch,
                       vlen, h->head_dim);
    /* partial rotary: Phi-3 / GLM-4 (llama's permuted q/k rows assume rotary on the whole head) */
    if (rdim != h->head_dim && (c->kind == GG_LLAMA || rdim > h->head_dim || rdim % 2 || rdim < 2))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: %s.rope.dimension_count %d of head dim %d is not supported", c->path, c->arch, rdim,
                       h->head_dim);
    h->rope_dim = rdim == h->head_dim ? 0 : rdim;
    if (h->n_heads % h->n_kv_heads)
        return ig_fail(c->err, IG_ERR_FORMAT,
                       "%s: %s.attention.head_count %d is not a multiple of head_count_kv %d",
                       c->path, c->arch, h->n_heads, h->n_kv_heads);
    if (h->head_dim % 2)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: head dim %d is odd (rope needs pairs)",
                       c->path, h->head_dim);

    /* rope scaling */
    h->rope_type = IR_ROPE_DEFAULT;
    h->rope_factor = 1.0;
    const gguf_kv *sty = gguf_find_kv(c->f, K(c, "rope.scaling.type"));
    if (sty) {
        gguf_str s;
        if ((st = gguf_get_str(c->f, K(c, "rope.scaling.type"), &s, c->err))) return st;
        if (gguf_str_eq(s, "linear")) {
            h->rope_type = IR_ROPE_LINEAR;
            if ((st = key_num(c, K(c, "rope.scaling.factor"), -1, &h->rope_factor))) return st;
        } else if (!gguf_str_eq(s, "none")) {
            return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                           "%s: llama.rope.scaling.type \"%.*s\" is not supported (none, linear)",
                           c->path, (int)(s.n > 32 ? 32 : s.n), s.p);
        }
    } else if (gguf_find_kv(c->f, K(c, "rope.scale_linear"))) { /* older files */
        if ((st = key_num(c, K(c, "rope.scale_linear"), -1, &h->rope_factor))) return st;
        if (h->rope_factor != 1.0) h->rope_type = IR_ROPE_LINEAR;
    }
    const gguf_tensor_info *rf = gguf_find_tensor(c->f, "rope_freqs.weight");
    if (rf) {
        if (h->rope_type != IR_ROPE_DEFAULT)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                           "%s: both llama.rope.scaling.type and rope_freqs.weight are set", c->path);
        if ((st = rope_from_freqs(c, rf))) return st;
    }

    if ((st = parse_family(c))) return st;

    /* vocab: the token list, checked against token_embd below */
    const gguf_kv *toks = gguf_find_kv(c->f, "tokenizer.ggml.tokens");
    if (toks) {
        if (toks->type != GGUF_VT_ARRAY || toks->arr_type != GGUF_VT_STRING)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens is not an array of strings",
                           c->path);
        if (toks->arr_n == 0 || toks->arr_n > INT32_MAX)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                           c->path, (unsigned long long)toks->arr_n);
        h->vocab = (int32_t)toks->arr_n;
    } else if ((st = key_int(c, K(c, "vocab_size"), -1, &h->vocab))) {
        return st;
    }

    /* special tokens */
    h->bos_id = -1;
    h->n_eos = 0;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    int64_t v;
    if (gguf_find_kv(c->f, "tokenizer.ggml.bos_token_id")) {
        if ((st = gguf_get_int(c->f, "tokenizer.ggml.bos_token_id", &v, c->err))) return st;
        if (v >= 0 && v < h->vocab) h->bos_id = (int32_t)v;
    }
    for (int k = 0; k < 3; k++) {
        if (!gguf_find_kv(c->f, eos_keys[k])) continue;
        if ((st = gguf_get_int(c->f, eos_keys[k], &v, c->err))) return st;
        if (v < 0 || v >= h->vocab) continue;
        int dup = 0;
        for (int i = 0; i < h->n_eos; i++) dup |= h->eos_ids[i] == v;
        if (!dup) h->eos_ids[h->n_eos++] = (int32_t)v;
    }

    int64_t ft = 1;
    if (gguf_find_kv(c->f, "general.file_type") &&
        (st = gguf_get_int(c->f, "general.file_type", &ft, c->err)))
        return st;
    h->src_dtype = ft == 0 ? IG_DTYPE_F32 : ft == 32 ? IG_DTYPE_BF16 : IG_DTYPE_F16;
    return IG_OK;
}

/* ---- weights */

static int stype_of(uint32_t t, ir_stype *st, ig_dtype *dt) {
    *dt = IG_DTYPE_F32; /* quantized weights are f32 once dequantized */
    switch (t) {
    case GGML_T_F32: *st = IR_STYPE_F32; return 1;
    case GGML_T_F16: *st = IR_STYPE_F16; *dt = IG_DTYPE_F16; return 1;
    case GGML_T_BF16: *st = IR_STYPE_BF16; *dt = IG_DTYPE_BF16; return 1;
    case GGML_T_Q4_0: *st = IR_STYPE_Q4_0; return 1;
    case GGML_T_Q4_1: *st = IR_STYPE_Q4_1; return 1;
    case GGML_T_Q5_0: *st = IR_STYPE_Q5_0; return 1;
    case GGML_T_Q5_1: *st = IR_STYPE_Q5_1; return 1;
    case GGML_T_Q8_0: *st = IR_STYPE_Q8_0; return 1;
    case GGML_T_Q4_K: *st = IR_STYPE_Q4_K; return 1;
    case GGML_T_Q5_K: *st = IR_STYPE_Q5_K; return 1;
    case GGML_T_Q6_K: *st = IR_STYPE_Q6_K; return 1;
    default: return 0;
    }
}

/* Adds GGUF tensor `name` as weight [n] (k == 0) or [n][k]; absent and optional: *id = -1. */
static ig_status add_weight(gg_ctx *c, const char *name, int32_t layer, int64_t n, int64_t k,
                            int optional, int32_t *id) {
    *id = -1;
    const gguf_tensor_info *t = gguf_find_tensor(c->f, name);
    if (!t) {
        if (optional) return IG_OK;
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing tensor %s", c->path, name);
    }
    int rank = k ? 2 : 1;
    /* trailing dims of 1 are allowed (some converters write [D, 1]) */
    int ok = rank == 1 ? t->ne[0] == n : t->ne[0] == k && t->ne[1] == n;
    for (int d = rank; d < GGUF_MAX_DIMS; d++) ok &= t->ne[d] == 1;
    if (!ok)
        return ig_fail(c->err, IG_ERR_MISMATCH,
                       "%s: tensor %s has GGUF dims [%lld, %lld, %lld, %lld], expected %s[%lld%s%lld]",
                       c->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], rank == 2 ? "(cols, rows) " : "",
                       (long long)(rank == 2 ? k : n), rank == 2 ? ", " : "",
                       rank == 2 ? (long long)n : 0LL);
    ir_tensor w = {0};
    if (!stype_of(t->type, &w.src_type, &w.dtype)) {
        const char *tn = gguf_type_name(t->type);
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: tensor %s has ggml type %s (%u), not supported (F32, F16, BF16, Q4_0, "
                       "Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K are)",
                       c->path, name, tn ? tn : "unknown", t->type);
    }
    w.name = (char *)name;
    w.kind = IR_TENSOR_WEIGHT;
    w.rank = rank;
    w.shape[0] = n;
    w.shape[1] = rank == 2 ? k : 0;
    w.layer = layer;
    w.src_file = c->file_id;
    w.src_offset = t->file_offset;
    w.src_nbytes = t->nbytes;
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* Adds rows [r0, r0 + n) of 2-D GGUF tensor `name` ([k] x [rows]), or with n_exp > 0 expert r0's
 * [n][k] matrix of a 3-D expert tensor ([k] x [n] x [n_exp]), as weight `part`: rows and experts
 * are whole blocks in every ggml type, so the slice is a byte range of the file. */
static ig_status add_slice(gg_ctx *c, const char *name, const char *part, int32_t layer, int64_t r0, int64_t n,
                           int64_t rows, int64_t k, int64_t n_exp, int32_t *id) {
    *id = -1;
    const gguf_tensor_info *t = gguf_find_tensor(c->f, name);
    if (!t) return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing tensor %s", c->path, name);
    int ok = n_exp ? t->ne[0] == k && t->ne[1] == n && t->ne[2] == n_exp && t->ne[3] == 1
                   : t->ne[0] == k && t->ne[1] == rows && t->ne[2] == 1 && t->ne[3] == 1;
    if (!ok)
        return ig_fail(c->err, IG_ERR_MISMATCH, "%s: tensor %s has GGUF dims [%lld, %lld, %lld], expected [%lld, %lld, %lld]",
                       c->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)k,
                       (long long)(n_exp ? n : rows), (long long)(n_exp ? n_exp : 1));
    ir_tensor w = {0};
    if (!stype_of(t->type, &w.src_type, &w.dtype) || !t->nbytes)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: tensor %s has an unsupported ggml type %u", c->path, name, t->type);
    uint64_t unit = n_exp ? t->nbytes / (uint64_t)n_exp : t->nbytes / (uint64_t)rows; /* bytes per expert / row */
    w.name = (char *)part;
    w.kind = IR_TENSOR_WEIGHT;
    w.rank = 2;
    w.shape[0] = n;
    w.shape[1] = k;
    w.layer = layer;
    w.src_file = c->file_id;
    w.src_offset = t->file_offset + (uint64_t)r0 * unit;
    w.src_nbytes = n_exp ? unit : unit * (uint64_t)n;
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* Experts of layer L: router ffn_gate_inp, 3-D ffn_{gate,up,down}_exps, and the shared expert
 * (ffn_*_shexp, gated by ffn_gate_inp_shexp) when the file has one. */
static ig_status add_experts(gg_ctx *c, int32_t L, ir_layer_weights *w) {
    const ir_hparams *h = &c->g->hp;
    int64_t D = h->hidden, I = h->moe_intermediate, E = h->n_experts, Is = h->shared_intermediate;
    char nm[96], part[128];
    ig_status st;
    snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", L);
    if ((st = add_weight(c, nm, L, E, D, 0, &w->router))) return st;
    int32_t *gu = calloc((size_t)E, sizeof *gu), *dn = calloc((size_t)E, sizeof *dn);
    if (!gu || !dn) st = ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < E && !st; e++) {
        int32_t pr[2];
        static const char *const nms[3] = {"gate", "up", "down"};
        int32_t *dst[3] = {&pr[0], &pr[1], &dn[e]};
        for (int j = 0; j < 3 && !st; j++) {
            snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", L, nms[j]);
            snprintf(part, sizeof part, "%s[%lld]", nm, (long long)e);
            st = add_slice(c, nm, part, L, e, j == 2 ? D : I, 0, j == 2 ? I : D, E, dst[j]);
        }
        snprintf(part, sizeof part, "blk.%d.ffn_exps.%lld.gate_up", L, (long long)e);
        if (!st && (gu[e] = ir_add_merged_weight(c->g, part, pr, 2, 1)) < 0) st = ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        snprintf(part, sizeof part, "blk.%d.ffn_exps.gate_up", L);
        w->experts_gate_up = ir_add_merged_weight(c->g, part, gu, (int)E, 0);
        snprintf(part, sizeof part, "blk.%d.ffn_exps.down", L);
        w->experts_down = ir_add_merged_weight(c->g, part, dn, (int)E, 0);
        if (w->experts_gate_up < 0 || w->experts_down < 0) st = ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    }
    free(gu);
    free(dn);
    if (st || !Is) return st;
    int32_t pr[2];
    snprintf(nm, sizeof nm, "blk.%d.ffn_gate_shexp.weight", L);
    if ((st = add_weight(c, nm, L, Is, D, 0, &pr[0]))) return st;
    snprintf(nm, sizeof nm, "blk.%d.ffn_up_shexp.weight", L);
    if ((st = add_weight(c, nm, L, Is, D, 0, &pr[1]))) return st;
    snprintf(nm, sizeof nm, "blk.%d.ffn_down_shexp.weight", L);
    if ((st = add_weight(c, nm, L, D, Is, 0, &w->shared_down))) return st;
    snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp_shexp.weight", L);
    if ((st = add_weight(c, nm, L, D, 0, 0, &w->shared_gate))) return st;
    snprintf(part, sizeof part, "blk.%d.ffn_shexp.gate_up", L);
    if ((w->shared_gate_up = ir_add_merged_weight(c->g, part, pr, 2, 1)) < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* One layer's weights in llama.cpp's names (blk.L.*). */
static ig_status add_layer(gg_ctx *c, int32_t L, ir_layer_weights *w) {
    const ir_hparams *h = &c->g->hp;
    int64_t D = h->hidden, qd = (int64_t)h->n_heads * h->head_dim, kvd = (int64_t)h->n_kv_heads * h->head_dim,
            I = h->intermediate;
    char nm[96], part[128];
    ig_status st;
    w->qb = w->kb = w->vb = w->ob = w->q_norm = w->k_norm = w->gate_b = w->up_b = w->down_b = -1;
    w->attn_out_norm = w->mlp_out_norm = -1;
    w->router = w->experts_gate_up = w->experts_down = w->shared_gate_up = w->shared_down = w->shared_gate = -1;
#define W(var, suffix, n, k)                                                \
    do {                                                                    \
        snprintf(nm, sizeof nm, "blk.%d.%s.weight", L, suffix);             \
        if ((st = add_weight(c, nm, L, n, k, 0, &w->var))) return st;       \
    } while (0)
#define WR(var, suffix, tag, r0, n, rows)                                                          \
    do {                                                                                          \
        snprintf(nm, sizeof nm, "blk.%d.%s.weight", L, suffix);                                   \
        snprintf(part, sizeof part, "%s%s", nm, tag);                                             \
        if ((st = add_slice(c, nm, part, L, r0, n, rows, D, 0, &w->var))) return st;             \
    } while (0)
    W(in_norm, "attn_norm", D, 0);
    if (c->kind == GG_PHI3) {
        WR(q, "attn_qkv", "[q]", 0, qd, qd + 2 * kvd);
        WR(k, "attn_qkv", "[k]", qd, kvd, qd + 2 * kvd);
        WR(v, "attn_qkv", "[v]", qd + kvd, kvd, qd + 2 * kvd);
    } else {
        W(q, "attn_q", qd, D);
        W(k, "attn_k", kvd, D);
        W(v, "attn_v", kvd, D);
    }
    if (h->attn_bias) {
        snprintf(nm, sizeof nm, "blk.%d.attn_q.bias", L);
        if ((st = add_weight(c, nm, L, qd, 0, 0, &w->qb))) return st;
        snprintf(nm, sizeof nm, "blk.%d.attn_k.bias", L);
        if ((st = add_weight(c, nm, L, kvd, 0, 0, &w->kb))) return st;
        snprintf(nm, sizeof nm, "blk.%d.attn_v.bias", L);
        if ((st = add_weight(c, nm, L, kvd, 0, 0, &w->vb))) return st;
    }
    if (h->qk_norm) {
        W(q_norm, "attn_q_norm", h->head_dim, 0);
        W(k_norm, "attn_k_norm", h->head_dim, 0);
    }
    W(o, "attn_output", D, qd);
    if (h->post_norms) {
        W(attn_out_norm, "post_attention_norm", D, 0);
        W(mlp_out_norm, "post_ffw_norm", D, 0);
    }
    W(post_norm, "ffn_norm", D, 0);
    if (h->n_experts) {
        if ((st = add_experts(c, L, w))) return st;
    } else if (c->kind == GG_PHI3 || c->kind == GG_GLM4) { /* ffn_up holds gate rows, then up rows */
        WR(gate, "ffn_up", "[gate]", 0, I, 2 * I);
        WR(up, "ffn_up", "[up]", I, I, 2 * I);
        W(down, "ffn_down", D, I);
    } else {
        W(gate, "ffn_gate", I, D);
        W(up, "ffn_up", I, D);
        W(down, "ffn_down", D, I);
    }
#undef W
#undef WR
    if (c->kind == GG_LLAMA) { /* llama GGUF q/k rows are permuted for interleaved RoPE: read them back in HF order */
        c->g->tensors[w->q].xform = IR_XFORM_UNPERMUTE_ROPE;
        c->g->tensors[w->q].xform_heads = h->n_heads;
        c->g->tensors[w->k].xform = IR_XFORM_UNPERMUTE_ROPE;
        c->g->tensors[w->k].xform_heads = h->n_kv_heads;
    }
    return IG_OK;
}

static ig_status build_graph(gg_ctx *c) {
    ir_graph *g = c->g;
    const ir_hparams *h = &g->hp;
    int64_t D = h->hidden;
    ig_status st;
    int32_t embed, fnorm, head;
    const gguf_tensor_info *te = gguf_find_tensor(c->f, "token_embd.weight");
    if (te && te->ne[1] != h->vocab)
        return ig_fail(c->err, IG_ERR_MISMATCH,
                       "%s: tensor token_embd.weight has %lld rows but the vocabulary has %d tokens",
                       c->path, (long long)te->ne[1], h->vocab);
    if ((st = add_weight(c, "token_embd.weight", -1, h->vocab, D, 0, &embed))) return st;
    /* absent output.weight: the head is tied to the embedding */
    if ((st = add_weight(c, "output.weight", -1, h->vocab, D, 1, &head))) return st;
    g->hp.tie_embeddings = head < 0;
    if (head < 0) head = embed;
    if ((st = add_weight(c, "output_norm.weight", -1, D, 0, 0, &fnorm))) return st;
    /* q/k/v biases: where the file has them (Qwen2, GLM-4; llama.cpp writes none for the rest) */
    g->hp.attn_bias = gguf_find_tensor(c->f, "blk.0.attn_q.bias") != NULL;

    if (h->n_layers > gguf_n_tensors(c->f)) /* every layer has tensors of its own */
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: block_count is %d but the file holds only %lld tensors", c->path,
                       h->n_layers, (long long)gguf_n_tensors(c->f));
    ir_layer_weights *lw = calloc((size_t)h->n_layers, sizeof *lw);
    if (!lw) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    for (int32_t L = 0; L < h->n_layers && !st; L++) st = add_layer(c, L, &lw[L]);
    if (!st) st = ir_build_decoder(g, embed, lw, fnorm, head, c->err);
    free(lw);
    return st;
}

ig_status ir_import_gguf(const char *path, ir_graph **out, ig_err *err) {
    *out = NULL;
    char abs[PATH_MAX];
    if (!realpath(path, abs)) return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    gg_ctx c = {0};
    c.path = abs;
    c.err = err;
    ig_status st = gguf_open(abs, &c.f, err);
    if (st) return st;
    c.g = ir_graph_new();
    if (!c.g) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((c.file_id = ir_add_file(c.g, abs)) < 0) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = parse_hparams(&c)) || (st = build_graph(&c))) goto done;
    /* tokenizer_dir stays NULL: the tokenizer lives in the GGUF; the compiler driver reads it
       with ir_gguf_read_tokenizer and writes HF files from it (compiler/pkg_tokenizer.c) */
done:
    gguf_close(c.f);
    if (st) {
        ir_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return IG_OK;
}

/* ==== tokenizer metadata (turned into tokenizer files by compiler/pkg_tokenizer.c) ==== */

/* The tokenizer keys, found and checked; values point into the mapping. */
typedef struct tok_keys {
    gguf_str model, pre;
    const gguf_kv *toks, *types, *scores, *merges; /* types, scores, merges: NULL when absent */
} tok_keys;

static ig_status find_tok_keys(gguf_file *f, const char *path, ir_gguf_tokenizer *t, tok_keys *k,
                               ig_err *err) {
    ig_status st;
    k->pre = (gguf_str){"", 0};
    if ((st = gguf_get_str(f, "tokenizer.ggml.model", &k->model, err)) ||
        (st = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &k->toks, err)))
        return st;
    int bpe = gguf_str_eq(k->model, "gpt2"), spm = gguf_str_eq(k->model, "llama");
    if (!bpe && !spm)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "%s: tokenizer.ggml.model \"%.*s\" is not supported (gpt2, llama are)",
                       path, (int)(k->model.n > 32 ? 32 : k->model.n), k->model.p);
    t->model = spm ? IR_TOK_SPM : IR_TOK_BPE;
    if (k->toks->arr_n == 0 || k->toks->arr_n > INT32_MAX)
        return ig_fail(err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                       (unsigned long long)k->toks->arr_n);
    int32_t n = (int32_t)k->toks->arr_n;
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && (st = gguf_get_str(f, "tokenizer.ggml.pre", &k->pre, err)))
        return st;
    if (gguf_find_kv(f, "tokenizer.ggml.token_type")) {
        const gguf_kv *ty;
        if ((st = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_COUNT, &ty, err))) return st;
        if (ty->arr_n != k->toks->arr_n || ty->arr_type == GGUF_VT_STRING || ty->arr_type == GGUF_VT_ARRAY)
            return ig_fail(err, IG_ERR_FORMAT,
                           "%s: tokenizer.ggml.token_type has %llu entries of %s for %d tokens", path,
                           (unsigned long long)ty->arr_n, gguf_vtype_name(ty->arr_type), n);
        k->types = ty;
    }
    if (gguf_find_kv(f, "tokenizer.ggml.merges") &&
        (st = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, &k->merges, err)))
        return st;
    if (spm) {
        const gguf_kv *sc;
        if ((st = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_COUNT, &sc, err))) return st;
        if (sc->arr_n != k->toks->arr_n || (sc->arr_type != GGUF_VT_FLOAT32 && sc->arr_type != GGUF_VT_FLOAT64))
            return ig_fail(err, IG_ERR_FORMAT,
                           "%s: tokenizer.ggml.scores has %llu entries of %s for %d tokens", path,
                           (unsigned long long)sc->arr_n, gguf_vtype_name(sc->arr_type), n);
        k->scores = sc;
    }
    return IG_OK;
}

/* NUL-terminated malloc'd copy of s; NULL when out of memory. */
static char *str_dup(gguf_str s) {
    char *o = malloc(s.n + 1);
    if (!o) return NULL;
    memcpy(o, s.p, s.n);
    o[s.n] = 0;
    return o;
}

/* Copies the token strings, types and scores (arrays already checked by find_tok_keys). */
static ig_status copy_tokens(const char *path, const tok_keys *k, ir_gguf_tokenizer *t, ig_err *err) {
    int32_t n = (int32_t)k->toks->arr_n;
    if (!(t->tokens = calloc((size_t)n, sizeof *t->tokens))) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    t->n_tokens = n;
    for (int32_t i = 0; i < n; i++) {
        gguf_str s = k->toks->arr_strs[i];
        if (memchr(s.p, 0, s.n))
            return ig_fail(err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] contains a NUL byte", path, i);
        if (!(t->tokens[i] = str_dup(s))) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (k->types) {
        if (!(t->token_type = malloc((size_t)n * sizeof *t->token_type)))
            return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        for (int32_t i = 0; i < n; i++) t->token_type[i] = gguf_arr_int(k->types, (uint64_t)i);
    }
    if (k->scores) {
        if (!(t->scores = malloc((size_t)n * sizeof *t->scores))) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        for (int32_t i = 0; i < n; i++) t->scores[i] = gguf_arr_float(k->scores, (uint64_t)i);
    }
    return IG_OK;
}

static ig_status copy_merges(const char *path, const gguf_kv *merges, ir_gguf_tokenizer *t, ig_err *err) {
    t->n_merges = -1;
    if (!merges) return IG_OK;
    if (!(t->merges = calloc(merges->arr_n ? (size_t)merges->arr_n : 1, sizeof *t->merges)))
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    t->n_merges = 0;
    for (uint64_t i = 0; i < merges->arr_n; i++) {
        gguf_str s = merges->arr_strs[i];
        if (!memchr(s.p, ' ', s.n) || memchr(s.p, 0, s.n))
            return ig_fail(err, IG_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] is not \"left right\"",
                           path, (unsigned long long)i);
        if (!(t->merges[i] = str_dup(s))) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        t->n_merges++;
    }
    return IG_OK;
}

/* Optional token id key: -1 when absent or out of range. */
static int32_t opt_id(gguf_file *f, const char *key, int32_t n_tok) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type == GGUF_VT_STRING || kv->type == GGUF_VT_ARRAY) return -1;
    if (kv->type == GGUF_VT_FLOAT32 || kv->type == GGUF_VT_FLOAT64) return -1;
    return kv->i >= 0 && kv->i < n_tok ? (int32_t)kv->i : -1;
}

static int opt_bool(gguf_file *f, const char *key, int def) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    return kv && kv->type == GGUF_VT_BOOL ? kv->u != 0 : def;
}

/* The scalar keys: special token ids, flags, chat template, context length. */
static ig_status read_tok_scalars(gguf_file *f, ir_gguf_tokenizer *t, ig_err *err) {
    int32_t n = t->n_tokens;
    t->bos = opt_id(f, "tokenizer.ggml.bos_token_id", n);
    t->eos = opt_id(f, "tokenizer.ggml.eos_token_id", n);
    t->unk = opt_id(f, "tokenizer.ggml.unknown_token_id", n);
    t->pad = opt_id(f, "tokenizer.ggml.padding_token_id", n);
    t->add_bos = opt_bool(f, "tokenizer.ggml.add_bos_token", t->model == IR_TOK_SPM);
    t->add_eos = opt_bool(f, "tokenizer.ggml.add_eos_token", 0);
    t->add_space_prefix = opt_bool(f, "tokenizer.ggml.add_space_prefix", 1);
    const gguf_kv *ct = gguf_find_kv(f, "tokenizer.chat_template");
    if (ct && ct->type == GGUF_VT_STRING && !(t->chat_template = str_dup(ct->s)))
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    char ckey[96] = "llama.context_length";
    const gguf_kv *ak = gguf_find_kv(f, "general.architecture");
    if (ak && ak->type == GGUF_VT_STRING && ak->s.n < 64)
        snprintf(ckey, sizeof ckey, "%.*s.context_length", (int)ak->s.n, ak->s.p);
    const gguf_kv *ctx = gguf_find_kv(f, ckey);
    t->has_context_length = ctx && ctx->type != GGUF_VT_STRING && ctx->type != GGUF_VT_ARRAY;
    t->context_length = t->has_context_length ? ctx->u : 0;
    return IG_OK;
}

ig_status ir_gguf_read_tokenizer(const char *gguf_path, ir_gguf_tokenizer **out, ig_err *err) {
    *out = NULL;
    gguf_file *f = NULL;
    ig_status st = gguf_open(gguf_path, &f, err);
    if (st) return st;
    ir_gguf_tokenizer *t = calloc(1, sizeof *t);
    tok_keys k = {0};
    if (!t) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    } else if (!(st = find_tok_keys(f, gguf_path, t, &k, err)) &&
               !(st = copy_tokens(gguf_path, &k, t, err)) && !(st = copy_merges(gguf_path, k.merges, t, err)) &&
               !(st = read_tok_scalars(f, t, err))) {
        t->pre_len = k.pre.n;
        if (!(t->pre = str_dup(k.pre))) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    gguf_close(f);
    if (st) {
        ir_gguf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return IG_OK;
}

void ir_gguf_tokenizer_free(ir_gguf_tokenizer *t) {
    if (!t) return;
    if (t->tokens)
        for (int32_t i = 0; i < t->n_tokens; i++) free(t->tokens[i]);
    for (int64_t i = 0; i < t->n_merges; i++) free(t->merges[i]);
    free(t->tokens);
    free(t->token_type);
    free(t->scores);
    free(t->merges);
    free(t->pre);
    free(t->chat_template);
    free(t);
}
