/* import_hf.c — HuggingFace folder (config.json + safetensors) → unfused ignis graph.
 *
 * Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM — the
 * pre-norm decoder with GQA attention, rotary embeddings (default / linear / llama3 scaling),
 * SwiGLU MLP and RMSNorm, differing only in biases, per-head q/k norms and defaults; and the
 * families built on it: Phi3ForCausalLM (fused qkv_proj / gate_up_proj, split here into row
 * ranges of the same file), Glm4ForCausalLM (partial rotary on interleaved pairs, fused
 * gate_up_proj, norms on the attention and MLP outputs), Gemma3ForCausalLM (text model: (1 + w)
 * RMSNorms, GeGLU with tanh GELU, embeddings scaled by sqrt(hidden), query_pre_attn_scalar,
 * sliding-window and global layers with their own rope bases). Sliding windows (Mistral, Qwen2,
 * Phi-3, Gemma 3) are recorded per layer in hp.layer_sliding. Both config dialects load: the older `rope_theta` + `rope_scaling` + `torch_dtype` and the newer
 * `rope_parameters` + `dtype`. Defaults for absent keys follow the transformers config classes.
 *
 * Every weight the architecture needs is looked up (through model.safetensors.index.json when
 * sharded), its dtype and shape checked, and recorded by file, byte offset and size; no weight
 * bytes are read here. The graph is the op sequence documented in ir_import_hf's contract (see
 * build_graph); compiler passes pattern-match it, so change it only together with them.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ir.h"
#include "safetensors.h"

enum { HF_MAX_SHARDS = 4096 };

typedef struct hf_ctx {
    char dir[PATH_MAX];        /* absolute folder */
    char cfg_path[PATH_MAX + 32]; /* .../config.json, for messages */
    cJSON *cfg;
    ir_graph *g;
    st_index *ix;              /* NULL when not sharded */
    char ix_path[PATH_MAX + 64]; /* .../model.safetensors.index.json when sharded */
    int32_t n_st;
    st_file **st;              /* [n_st], same order as g->files */
    int32_t *st_file_id;       /* [n_st] graph file index */
    int arch;                  /* hf_arch */
    /* quantization_config: GPTQ / AWQ (method 0: none); group -1 = per output channel */
    struct {
        ir_stype method;
        int32_t bits, group, zero_add;
    } q;
    /* mixture of experts: the checkpoint's expert and shared-expert sizes (hp holds them padded
     * to 16-row panels) and, where dense and MoE layers mix, which layers are dense */
    int32_t moe_rows, shared_rows;
    uint8_t *dense_mlp;        /* [n_layers] or NULL (every layer MoE) */
    ig_err *err;
} hf_ctx;

/* ---- small helpers */

static ig_status read_json(const char *path, cJSON **out, int optional, ig_err *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (optional && errno == ENOENT) return IG_OK;
        return ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    if (bad) {
        free(buf);
        return ig_fail(err, IG_ERR_IO, "%s: read error", path);
    }
    cJSON *j = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return ig_fail(err, IG_ERR_FORMAT, "%s: not a JSON object", path);
    }
    *out = j;
    return IG_OK;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* An item that is absent or JSON null counts as absent. */
static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *j = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNull(j) ? NULL : j;
}

static int json_int(const cJSON *j, int64_t *v) {
    if (!cJSON_IsNumber(j) || floor(j->valuedouble) != j->valuedouble ||
        fabs(j->valuedouble) > 9007199254740992.0)
        return 0;
    *v = (int64_t)j->valuedouble;
    return 1;
}

/* Positive int config key; `def` < 0 makes it required. */
static ig_status cfg_int(hf_ctx *c, const char *key, int64_t def, int32_t *out) {
    const cJSON *j = item(c->cfg, key);
    int64_t v;
    if (!j) {
        if (def < 0)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing required key \"%s\"", c->cfg_path, key);
        *out = (int32_t)def;
        return IG_OK;
    }
    if (!json_int(j, &v) || v <= 0 || v > INT32_MAX)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" must be a positive integer",
                       c->cfg_path, key);
    *out = (int32_t)v;
    return IG_OK;
}

/* Positive number from object `o` (named `where` in messages); `def` < 0 makes it required. */
static ig_status obj_num(hf_ctx *c, const cJSON *o, const char *where, const char *key, double def,
                         double *out) {
    const cJSON *j = item(o, key);
    if (!j) {
        if (def < 0)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing required key \"%s%s%s\"",
                           c->cfg_path, where, *where ? "." : "", key);
        *out = def;
        return IG_OK;
    }
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0) || !isfinite(j->valuedouble))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s%s%s\" must be a positive number",
                       c->cfg_path, where, *where ? "." : "", key);
    *out = j->valuedouble;
    return IG_OK;
}

static ig_status cfg_bool(hf_ctx *c, const char *key, int def, int32_t *out) {
    const cJSON *j = item(c->cfg, key);
    if (!j) {
        *out = def;
        return IG_OK;
    }
    if (!cJSON_IsBool(j))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" must be true or false", c->cfg_path, key);
    *out = cJSON_IsTrue(j);
    return IG_OK;
}

/* Token id list: an int or a list of ints. Returns 0 and sets *n = -1 when `j` is absent. */
static ig_status token_ids(hf_ctx *c, const cJSON *j, const char *file, const char *key,
                           int32_t *ids, int32_t cap, int32_t *n) {
    *n = -1;
    if (!j) return IG_OK;
    int64_t v;
    if (cJSON_IsArray(j)) {
        int m = cJSON_GetArraySize(j);
        if (m > cap)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: key \"%s\" lists %d ids, at most %d supported",
                           file, key, m, cap);
        const cJSON *e;
        int k = 0;
        cJSON_ArrayForEach(e, j) {
            if (!json_int(e, &v) || v < 0 || v > INT32_MAX)
                return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" holds a non-integer id", file, key);
            if (v >= c->g->hp.vocab)
                return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" holds id %lld, outside the vocabulary of %d tokens",
                               file, key, (long long)v, c->g->hp.vocab);
            ids[k++] = (int32_t)v;
        }
        *n = k;
        return IG_OK;
    }
    if (!json_int(j, &v) || v < 0 || v > INT32_MAX)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" must be a token id or a list of them",
                       file, key);
    if (v >= c->g->hp.vocab)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" is id %lld, outside the vocabulary of %d tokens",
                       file, key, (long long)v, c->g->hp.vocab);
    ids[0] = (int32_t)v;
    *n = 1;
    return IG_OK;
}

/* ---- hyper-parameters */

typedef enum hf_arch {
    HF_LLAMA, HF_MISTRAL, HF_QWEN2, HF_QWEN3, HF_PHI3, HF_GLM4, HF_GEMMA3, HF_MIXTRAL, HF_QWEN2MOE, HF_QWEN3MOE
} hf_arch;

static const struct {
    const char *name, *model_type;
    hf_arch arch;
    int32_t max_pos_default;
} hf_archs[] = {
    {"LlamaForCausalLM", "llama", HF_LLAMA, 2048},
    {"MistralForCausalLM", "mistral", HF_MISTRAL, 4096 * 32},
    {"Qwen2ForCausalLM", "qwen2", HF_QWEN2, 32768},
    {"Qwen3ForCausalLM", "qwen3", HF_QWEN3, 32768},
    {"Phi3ForCausalLM", "phi3", HF_PHI3, 4096},
    {"Glm4ForCausalLM", "glm4", HF_GLM4, 131072},
    {"Gemma3ForCausalLM", "gemma3_text", HF_GEMMA3, 131072},
    {"MixtralForCausalLM", "mixtral", HF_MIXTRAL, 4096 * 32},
    {"Qwen2MoeForCausalLM", "qwen2_moe", HF_QWEN2MOE, 32768},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HF_QWEN3MOE, 32768},
};
#define HF_ARCH_NAMES                                                                              \
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, " \
    "Glm4ForCausalLM, Gemma3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM"

/* Phi-3's "longrope" ("su"): inverse frequency i divided by short_factor[i], cos and sin multiplied
 * by attention_factor (default sqrt(1 + ln(s) / ln(orig)), s = factor or else max_position_embeddings / orig, 1
 * when s <= 1), which on full rotary is the softmax scale times attention_factor^2 (set after the
 * architecture's rotary fraction is known, import_hparams). transformers switches to long_factor
 * for a sequence longer than original_max_position_embeddings (orig), re-rotating every key: the
 * package's context is capped at orig instead, so every position it runs is exact. */
static ig_status parse_longrope(hf_ctx *c, const cJSON *rp, const char *where) {
    ir_hparams *h = &c->g->hp;
    const cJSON *sf = item(rp, "short_factor"), *lf = item(rp, "long_factor");
    int n = cJSON_IsArray(sf) ? cJSON_GetArraySize(sf) : -1;
    if (n < 1 || n > IR_MAX_ROPE_EXT || !cJSON_IsArray(lf) || cJSON_GetArraySize(lf) != n)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: \"%s\" (longrope) needs short_factor and long_factor lists of one "
                       "length (at most %d)", c->cfg_path, where, IR_MAX_ROPE_EXT);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(sf, i);
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0))
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: \"%s.short_factor[%d]\" must be a positive number", c->cfg_path,
                           where, i);
        h->rope_ext[i] = e->valuedouble;
    }
    h->rope_n_ext = n;
    h->rope_type = IR_ROPE_LONGROPE;
    double orig = h->max_context, af = 0;
    ig_status st;
    if (item(rp, "original_max_position_embeddings"))
        st = obj_num(c, rp, where, "original_max_position_embeddings", -1, &orig);
    else
        st = obj_num(c, c->cfg, "", "original_max_position_embeddings", h->max_context, &orig);
    if (st) return st;
    if (orig != floor(orig) || orig < 2 || orig > INT32_MAX)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: original_max_position_embeddings must be an integer >= 2", c->cfg_path);
    if (item(rp, "attention_factor") && (st = obj_num(c, rp, where, "attention_factor", -1, &af))) return st;
    double s = (double)h->max_context / orig; /* transformers: rope_parameters.factor, else this ratio */
    if (item(rp, "factor") && (st = obj_num(c, rp, where, "factor", -1, &s))) return st;
    h->rope_factor = item(rp, "attention_factor") ? af : s <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log(orig));
    h->rope_orig_max = (int32_t)orig;
    if (h->max_context > h->rope_orig_max) h->max_context = h->rope_orig_max;
    return IG_OK;
}

/* The rope of rope-parameter object rp (named `where`; NULL: none) into h's rope_type/factor and
 * theta (its rope_theta, else the top-level one, else theta_def). */
static ig_status parse_rope_obj(hf_ctx *c, const cJSON *rp, const char *where, double theta_def) {
    ir_hparams *h = &c->g->hp;
    if (rp && !cJSON_IsObject(rp))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s\" must be an object", c->cfg_path, where);
    /* theta: inside rope_parameters (new), else top level (legacy) */
    ig_status st;
    if (rp && item(rp, "rope_theta")) {
        if ((st = obj_num(c, rp, where, "rope_theta", -1, &h->rope_theta))) return st;
    } else if ((st = obj_num(c, c->cfg, "", "rope_theta", theta_def, &h->rope_theta))) {
        return st;
    }
    h->rope_type = IR_ROPE_DEFAULT;
    h->rope_factor = 1.0;
    if (!rp) return IG_OK;
    const char *tkey = "rope_type";
    const cJSON *t = item(rp, "rope_type");
    if (!t) {
        t = item(rp, "type"); /* older alias */
        tkey = "type";
    }
    if (!t) return IG_OK;
    if (!cJSON_IsString(t))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"%s.%s\" must be a string", c->cfg_path,
                       where, tkey);
    const char *ty = t->valuestring;
    if (!strcmp(ty, "default")) return IG_OK;
    if (!strcmp(ty, "linear")) {
        h->rope_type = IR_ROPE_LINEAR;
        return obj_num(c, rp, where, "factor", -1, &h->rope_factor);
    }
    if (!strcmp(ty, "llama3")) {
        h->rope_type = IR_ROPE_LLAMA3;
        double orig;
        if ((st = obj_num(c, rp, where, "factor", -1, &h->rope_factor)) ||
            (st = obj_num(c, rp, where, "low_freq_factor", -1, &h->rope_low_freq_factor)) ||
            (st = obj_num(c, rp, where, "high_freq_factor", -1, &h->rope_high_freq_factor)) ||
            (st = obj_num(c, rp, where, "original_max_position_embeddings", -1, &orig)))
            return st;
        if (orig != floor(orig) || orig > INT32_MAX)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: key \"%s.original_max_position_embeddings\" must be an integer",
                           c->cfg_path, where);
        if (h->rope_high_freq_factor <= h->rope_low_freq_factor)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: \"%s.high_freq_factor\" (%g) must exceed low_freq_factor (%g)",
                           c->cfg_path, where, h->rope_high_freq_factor, h->rope_low_freq_factor);
        h->rope_orig_max = (int32_t)orig;
        return IG_OK;
    }
    if (!strcmp(ty, "longrope") || !strcmp(ty, "su")) return parse_longrope(c, rp, where);
    return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                   "%s: key \"%s.%s\" = \"%s\" is not supported (supported: default, linear, llama3, longrope, su)",
                   c->cfg_path, where, tkey, ty);
}

/* Rope of the model: rope_parameters (new) or rope_scaling (legacy). Gemma 3 has one per layer
 * type: rope_parameters.{full_attention, sliding_attention} (new), or rope_theta + rope_scaling
 * for global layers and rope_local_base_freq for sliding ones (legacy); sliding layers take
 * theta only (transformers gives them the default rope). */
static ig_status parse_rope(hf_ctx *c, hf_arch arch) {
    ir_hparams *h = &c->g->hp;
    const cJSON *rp = item(c->cfg, "rope_parameters");
    const char *where = "rope_parameters";
    if (!rp) {
        rp = item(c->cfg, "rope_scaling");
        where = "rope_scaling";
    }
    double theta_def = arch == HF_GEMMA3 ? 1000000.0 : 10000.0;
    if (arch != HF_GEMMA3 || !rp || !item(rp, "full_attention")) {
        ig_status st = parse_rope_obj(c, rp, where, theta_def);
        if (st || arch != HF_GEMMA3) return st;
        return obj_num(c, c->cfg, "", "rope_local_base_freq", 10000.0, &h->rope_theta_local);
    }
    ig_status st = parse_rope_obj(c, item(rp, "full_attention"), "rope_parameters.full_attention", theta_def);
    if (st) return st;
    const cJSON *sl = item(rp, "sliding_attention");
    const cJSON *ty = sl ? item(sl, "rope_type") : NULL;
    if (sl && (!cJSON_IsObject(sl) || (ty && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "default")))))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: key \"rope_parameters.sliding_attention\" must be an object with rope_type \"default\"",
                       c->cfg_path);
    return obj_num(c, sl, "rope_parameters.sliding_attention", "rope_theta", 10000.0, &h->rope_theta_local);
}

/* Partial rotary: partial_rotary_factor (in rope_parameters or at the top level) x head_dim. */
static ig_status parse_partial_rotary(hf_ctx *c, double def) {
    ir_hparams *h = &c->g->hp;
    const cJSON *rp = item(c->cfg, "rope_parameters");
    double f;
    ig_status st;
    if (rp && cJSON_IsObject(rp) && item(rp, "partial_rotary_factor"))
        st = obj_num(c, rp, "rope_parameters", "partial_rotary_factor", -1, &f);
    else
        st = obj_num(c, c->cfg, "", "partial_rotary_factor", def, &f);
    if (st) return st;
    /* transformers: int(head_dim * factor); a factor outside (0, 1] is refused before the cast */
    int32_t rd = f > 0 && f <= 1 ? (int32_t)(f * h->head_dim) : 0;
    if (rd < 2 || rd % 2)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: partial_rotary_factor %g gives %d rotary dimensions of head_dim %d (need an even "
                       "number >= 2)", c->cfg_path, f, rd, h->head_dim);
    h->rope_dim = rd == h->head_dim ? 0 : rd;
    return IG_OK;
}

/* Sliding-window attention: the window (sliding_window, null = none; absent = the config class's
 * default `def`) and which layers use it: layer_types when given, else all layers (Mistral,
 * Phi-3), layers >= max_window_layers when use_sliding_window (Qwen2/3), or every layer but each
 * sliding_window_pattern-th (Gemma 3). A window as long as the context is no window. */
static ig_status parse_window(hf_ctx *c, hf_arch arch, int64_t def) {
    ir_hparams *h = &c->g->hp;
    ig_status st;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(c->cfg, "sliding_window");
    int64_t w = def;
    if (cJSON_IsNull(sw)) w = 0;
    else if (sw && (!json_int(sw, &w) || w < 0))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"sliding_window\" must be a non-negative integer or null",
                       c->cfg_path);
    int32_t use = 1;
    if ((arch == HF_QWEN2 || arch == HF_QWEN3 || arch == HF_QWEN2MOE || arch == HF_QWEN3MOE) &&
        (st = cfg_bool(c, "use_sliding_window", 0, &use)))
        return st;
    if (!use || w <= 0 || w >= h->max_context) w = 0;
    const cJSON *lt = item(c->cfg, "layer_types");
    if (lt && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != h->n_layers))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"layer_types\" must list num_hidden_layers (%d) strings",
                       c->cfg_path, h->n_layers);
    if ((lt || w) && h->n_layers > IR_MAX_LAYER_TYPES)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: %d layers with per-layer attention types (at most %d)",
                       c->cfg_path, h->n_layers, IR_MAX_LAYER_TYPES);
    int64_t mwl = 28, pattern = 6;
    const cJSON *mw = item(c->cfg, "max_window_layers");
    if (mw && (!json_int(mw, &mwl) || mwl < 0))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"max_window_layers\" must be a non-negative integer",
                       c->cfg_path);
    const cJSON *pt = item(c->cfg, "sliding_window_pattern");
    if (!pt) pt = item(c->cfg, "_sliding_window_pattern");
    if (pt && (!json_int(pt, &pattern) || pattern < 1))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"sliding_window_pattern\" must be a positive integer",
                       c->cfg_path);
    int any = 0;
    for (int32_t L = 0; L < h->n_layers; L++) {
        int sl;
        if (lt) {
            const cJSON *e = cJSON_GetArrayItem(lt, L);
            if (!cJSON_IsString(e) ||
                (strcmp(e->valuestring, "full_attention") && strcmp(e->valuestring, "sliding_attention")))
                return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                               "%s: key \"layer_types[%d]\" = %s%s%s is not supported (full_attention, "
                               "sliding_attention)", c->cfg_path, L, cJSON_IsString(e) ? "\"" : "",
                               cJSON_IsString(e) ? e->valuestring : "(non-string)", cJSON_IsString(e) ? "\"" : "");
            sl = !strcmp(e->valuestring, "sliding_attention");
        } else if (arch == HF_QWEN2 || arch == HF_QWEN3 || arch == HF_QWEN2MOE || arch == HF_QWEN3MOE) {
            sl = L >= mwl;
        } else if (arch == HF_GEMMA3) {
            sl = (L + 1) % pattern != 0;
        } else {
            sl = 1;
        }
        if (L < IR_MAX_LAYER_TYPES) h->layer_sliding[L] = (uint8_t)(sl && w > 0);
        any |= sl && w > 0;
    }
    h->sliding_window = any ? (int32_t)w : 0;
    return IG_OK;
}

static int32_t pad16(int64_t n) { return (int32_t)((n + 15) / 16 * 16); }

/* Qwen2/3-MoE's dense layers: layer L's MLP is an MoE block unless L is in mlp_only_layers or
 * (L + 1) is not a multiple of decoder_sparse_step (transformers' rule). Sets c->dense_mlp when
 * some layers are dense, and h->n_experts = 0 when all are (a dense model then). */
static ig_status parse_dense_layers(hf_ctx *c) {
    ir_hparams *h = &c->g->hp;
    int32_t step = 1;
    ig_status st;
    if ((st = cfg_int(c, "decoder_sparse_step", 1, &step))) return st;
    const cJSON *mo = item(c->cfg, "mlp_only_layers");
    if (step < 1 || (mo && !cJSON_IsArray(mo)))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: decoder_sparse_step must be >= 1 and mlp_only_layers a list",
                       c->cfg_path);
    int n_dense = 0;
    for (int32_t L = 0; L < h->n_layers; L++) {
        int dense = (L + 1) % step != 0;
        for (int i = 0; mo && i < cJSON_GetArraySize(mo); i++) {
            int64_t v;
            if (!json_int(cJSON_GetArrayItem(mo, i), &v))
                return ig_fail(c->err, IG_ERR_FORMAT, "%s: mlp_only_layers must list integers", c->cfg_path);
            dense |= v == L;
        }
        if (dense && !c->dense_mlp && !(c->dense_mlp = calloc((size_t)h->n_layers, 1)))
            return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
        if (dense) c->dense_mlp[L] = 1;
        n_dense += dense;
    }
    if (n_dense == h->n_layers) { /* no MoE layer at all: a dense model */
        free(c->dense_mlp);
        c->dense_mlp = NULL;
        h->n_experts = h->top_k = h->moe_intermediate = h->norm_topk = h->shared_intermediate = 0;
    }
    return IG_OK;
}

/* Mixture of experts: expert count and top-k (Mixtral: num_local_experts, Qwen: num_experts; the
 * other name accepted too), expert size (Mixtral: intermediate_size), top-k renormalization
 * (Mixtral always; Qwen: norm_topk_prob), Qwen2-MoE's shared expert, Qwen's dense layers. Expert
 * sizes are padded with zero rows to 16-row panels (exact: a zero row adds silu(0) * 0 = 0).
 * Every layer of the graph has one shape (codegen's template layer), so where dense and MoE
 * layers mix, each layer gets both a routed block and a shared expert: a dense layer's MLP runs as
 * the shared expert (its down projection doubled, its gate zero: sigmoid(0) = 1/2) beside zero
 * experts, and an MoE layer without a shared expert gets a zero one; the zero halves cost their
 * weights' memory and time, which only such mixed models pay. */
static ig_status parse_moe(hf_ctx *c, hf_arch arch) {
    ir_hparams *h = &c->g->hp;
    if (arch != HF_MIXTRAL && arch != HF_QWEN2MOE && arch != HF_QWEN3MOE) return IG_OK;
    ig_status st;
    const char *ekey = item(c->cfg, "num_experts") ? "num_experts" : "num_local_experts";
    int64_t edef = arch == HF_MIXTRAL ? 8 : arch == HF_QWEN2MOE ? 60 : 128;
    int64_t kdef = arch == HF_MIXTRAL ? 2 : arch == HF_QWEN2MOE ? 4 : 8;
    if ((st = cfg_int(c, ekey, edef, &h->n_experts)) || (st = cfg_int(c, "num_experts_per_tok", kdef, &h->top_k)))
        return st;
    if (h->top_k < 1 || h->n_experts < 1 || h->top_k > h->n_experts || h->n_experts > IR_MAX_PARTS || h->top_k > 64)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: num_experts_per_tok %d of %d experts is not supported "
                       "(top-k from 1 to 64 and the expert count, experts at most %d)",
                       c->cfg_path, h->top_k, h->n_experts, IR_MAX_PARTS);
    if (arch == HF_MIXTRAL) {
        h->moe_intermediate = h->intermediate;
        h->norm_topk = 1;
    } else {
        if ((st = cfg_int(c, "moe_intermediate_size", arch == HF_QWEN2MOE ? 1408 : 768, &h->moe_intermediate)) ||
            (st = cfg_bool(c, "norm_topk_prob", 0, &h->norm_topk)))
            return st;
    }
    if (arch == HF_QWEN2MOE) {
        const cJSON *si = item(c->cfg, "shared_expert_intermediate_size");
        int64_t v = 5632;
        if (si && (!json_int(si, &v) || v < 0 || v > INT32_MAX))
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: key \"shared_expert_intermediate_size\" must be a "
                           "non-negative integer", c->cfg_path);
        h->shared_intermediate = (int32_t)v;
    }
    if (h->moe_intermediate < 1 || h->hidden % 16)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: MoE needs hidden_size (%d) to be a multiple of 16 and an expert "
                       "size (%d) >= 1", c->cfg_path, h->hidden, h->moe_intermediate);
    c->moe_rows = h->moe_intermediate;
    c->shared_rows = h->shared_intermediate;
    if (arch != HF_MIXTRAL && (st = parse_dense_layers(c))) return st;
    if (!h->n_experts) return IG_OK;
    h->moe_intermediate = pad16(c->moe_rows);
    int32_t s = c->dense_mlp && h->intermediate > c->shared_rows ? h->intermediate : c->shared_rows;
    h->shared_intermediate = s ? pad16(s) : 0;
    return IG_OK;
}

/* An integer key of quantization_config (the first of two names present), or def. */
static ig_status q_int(hf_ctx *c, const cJSON *q, const char *k1, const char *k2, int64_t def, int64_t *v) {
    const cJSON *j = item(q, k1);
    if (!j && k2) j = item(q, k2);
    *v = def;
    if (j && !json_int(j, v))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: quantization_config.%s must be an integer", c->cfg_path,
                       item(q, k1) ? k1 : k2);
    return IG_OK;
}

/* A string key of quantization_config (the first of two names present), or def. */
static ig_status q_str(hf_ctx *c, const cJSON *q, const char *k1, const char *k2, const char *def, const char **v) {
    const cJSON *j = item(q, k1);
    if (!j && k2) j = item(q, k2);
    *v = def;
    if (!j || cJSON_IsNull(j)) return IG_OK;
    if (!cJSON_IsString(j))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: quantization_config.%s must be a string", c->cfg_path,
                       item(q, k1) ? k1 : k2);
    *v = j->valuestring;
    return IG_OK;
}

/* quantization_config: GPTQ (bits 4 / 8, the v1 "gptq" checkpoint format that stores zero points
 * minus one, or "gptq_v2") and AWQ (4 bits, GEMM packing, with zero points); every other method,
 * format or bit width is refused by name. Group size -1 is one group per output channel. */
static ig_status parse_quant_config(hf_ctx *c) {
    const cJSON *q = item(c->cfg, "quantization_config");
    if (!q || cJSON_IsNull(q)) return IG_OK;
    if (!cJSON_IsObject(q)) return ig_fail(c->err, IG_ERR_FORMAT, "%s: quantization_config must be an object", c->cfg_path);
    const char *m, *fmt;
    int64_t bits, group;
    ig_status st;
    if ((st = q_str(c, q, "quant_method", NULL, NULL, &m))) return st;
    if (!m) return ig_fail(c->err, IG_ERR_FORMAT, "%s: quantization_config has no quant_method", c->cfg_path);
    int awq = !strcasecmp(m, "awq");
    if (!awq && strcasecmp(m, "gptq"))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: quantization_config.quant_method \"%s\" is not supported "
                       "(supported: gptq, awq)", c->cfg_path, m);
    if ((st = q_int(c, q, "bits", "w_bit", 4, &bits)) || (st = q_int(c, q, "group_size", "q_group_size", 128, &group)))
        return st;
    if (awq ? bits != 4 : bits != 4 && bits != 8)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: quantization_config.bits %lld is not supported (%s)", c->cfg_path,
                       (long long)bits, awq ? "AWQ: 4" : "GPTQ: 4 or 8");
    if (group != -1 && (group < 8 || group > 65536 || group % 8))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: quantization_config.group_size %lld is not supported (-1, or a "
                       "multiple of 8 such as 32, 64, 128)", c->cfg_path, (long long)group);
    c->q.method = awq ? IR_STYPE_AWQ : IR_STYPE_GPTQ;
    c->q.bits = (int32_t)bits, c->q.group = (int32_t)group;
    if (awq) {
        const cJSON *zp = item(q, "zero_point");
        if ((st = q_str(c, q, "version", NULL, "gemm", &fmt))) return st;
        if (strcasecmp(fmt, "gemm"))
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: AWQ version \"%s\" is not supported (supported: gemm)",
                           c->cfg_path, fmt);
        if (zp && !cJSON_IsTrue(zp))
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: AWQ without zero points (zero_point false) is not supported",
                           c->cfg_path);
        return IG_OK;
    }
    /* transformers / optimum name it checkpoint_format, GPTQModel format */
    if ((st = q_str(c, q, "checkpoint_format", "format", "gptq", &fmt))) return st;
    if (!strcasecmp(fmt, "gptq")) c->q.zero_add = 1;
    else if (strcasecmp(fmt, "gptq_v2"))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: GPTQ checkpoint format \"%s\" is not supported (supported: gptq, "
                       "gptq_v2)", c->cfg_path, fmt);
    return IG_OK;
}

static ig_status parse_config(hf_ctx *c, hf_arch *arch_out) {
    ir_hparams *h = &c->g->hp;
    ig_status st;
    /* architecture: "architectures"[0], else model_type */
    const cJSON *archs = item(c->cfg, "architectures");
    const char *aname = NULL;
    if (cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0) {
        const cJSON *a0 = cJSON_GetArrayItem(archs, 0);
        if (!cJSON_IsString(a0))
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: \"architectures\" must list strings", c->cfg_path);
        aname = a0->valuestring;
    }
    const cJSON *mt = item(c->cfg, "model_type");
    int ai = -1;
    for (int i = 0; i < (int)(sizeof hf_archs / sizeof hf_archs[0]); i++) {
        if (aname ? !strcmp(aname, hf_archs[i].name)
                  : (cJSON_IsString(mt) && !strcmp(mt->valuestring, hf_archs[i].model_type)))
            ai = i;
    }
    if (ai < 0) {
        if (aname)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: architecture \"%s\" is not supported (supported: "
                           HF_ARCH_NAMES ")", c->cfg_path, aname);
        if (cJSON_IsString(mt))
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported",
                           c->cfg_path, mt->valuestring);
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing required key \"architectures\"", c->cfg_path);
    }
    hf_arch arch = hf_archs[ai].arch;
    *arch_out = arch;
    c->arch = arch;
    snprintf(h->arch, sizeof h->arch, "%s", hf_archs[ai].name);

    if ((st = cfg_int(c, "hidden_size", -1, &h->hidden)) ||
        (st = cfg_int(c, "num_hidden_layers", -1, &h->n_layers)) ||
        (st = cfg_int(c, "num_attention_heads", -1, &h->n_heads)) ||
        (st = cfg_int(c, "intermediate_size", -1, &h->intermediate)) ||
        (st = cfg_int(c, "vocab_size", -1, &h->vocab)) ||
        (st = cfg_int(c, "num_key_value_heads", h->n_heads, &h->n_kv_heads)) ||
        (st = cfg_int(c, "max_position_embeddings", hf_archs[ai].max_pos_default, &h->max_context)))
        return st;
    if ((st = obj_num(c, c->cfg, "", "rms_norm_eps", -1, &h->rms_eps))) return st;
    if (item(c->cfg, "head_dim") || arch == HF_GEMMA3) {
        if ((st = cfg_int(c, "head_dim", 256, &h->head_dim))) return st;
    } else {
        if (h->hidden % h->n_heads)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: hidden_size %d is not a multiple of num_attention_heads %d and "
                           "head_dim is not given", c->cfg_path, h->hidden, h->n_heads);
        h->head_dim = h->hidden / h->n_heads;
    }
    if (h->n_heads % h->n_kv_heads)
        return ig_fail(c->err, IG_ERR_FORMAT,
                       "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       c->cfg_path, h->n_heads, h->n_kv_heads);
    if (h->head_dim % 2)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: head_dim %d is odd (rope needs pairs)",
                       c->cfg_path, h->head_dim);

    /* Gemma names it hidden_activation (default gelu_pytorch_tanh) */
    const char *akey = arch == HF_GEMMA3 && item(c->cfg, "hidden_activation") ? "hidden_activation" : "hidden_act";
    const cJSON *act = item(c->cfg, akey);
    h->mlp_act = arch == HF_GEMMA3 ? IR_ACT_GELU_TANH : IR_ACT_SILU;
    if (act && cJSON_IsString(act) && !strcmp(act->valuestring, "silu")) h->mlp_act = IR_ACT_SILU;
    else if (act && cJSON_IsString(act) && !strcmp(act->valuestring, "gelu_pytorch_tanh")) h->mlp_act = IR_ACT_GELU_TANH;
    else if (act)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: key \"%s\" = %s%s%s is not supported (silu, gelu_pytorch_tanh)",
                       c->cfg_path, akey, cJSON_IsString(act) ? "\"" : "",
                       cJSON_IsString(act) ? act->valuestring : "(non-string)",
                       cJSON_IsString(act) ? "\"" : "");
    if ((st = parse_rope(c, arch))) return st;

    /* biases and norms per architecture (transformers' modeling code) */
    int32_t b = 0;
    switch (arch) {
    case HF_LLAMA:
        if ((st = cfg_bool(c, "attention_bias", 0, &b)) || (st = cfg_bool(c, "mlp_bias", 0, &h->mlp_bias)))
            return st;
        h->attn_bias = h->o_bias = b;
        break;
    case HF_MISTRAL:
    case HF_MIXTRAL: break;
    case HF_QWEN2MOE:
        if ((st = cfg_bool(c, "qkv_bias", 1, &h->attn_bias))) return st;
        break;
    case HF_QWEN3MOE:
        if ((st = cfg_bool(c, "attention_bias", 0, &b))) return st;
        h->attn_bias = h->o_bias = b;
        h->qk_norm = 1;
        break;
    case HF_QWEN2: h->attn_bias = 1; break;
    case HF_QWEN3:
        if ((st = cfg_bool(c, "attention_bias", 0, &b))) return st;
        h->attn_bias = h->o_bias = b;
        h->qk_norm = 1;
        break;
    case HF_PHI3:
        if ((st = parse_partial_rotary(c, 1.0))) return st;
        break;
    case HF_GLM4: /* q/k/v biases (attention_bias, default true), no o_proj bias; rotary on pairs */
        if ((st = cfg_bool(c, "attention_bias", 1, &h->attn_bias)) || (st = parse_partial_rotary(c, 0.5))) return st;
        h->rope_interleaved = 1;
        h->post_norms = 1;
        break;
    case HF_GEMMA3: {
        if ((st = cfg_bool(c, "attention_bias", 0, &b))) return st;
        h->attn_bias = h->o_bias = b;
        h->qk_norm = 1;
        h->post_norms = 1;
        h->embed_scale = sqrt((double)h->hidden);
        double qs;
        if ((st = obj_num(c, c->cfg, "", "query_pre_attn_scalar", 256, &qs))) return st;
        h->attn_scale = 1.0 / sqrt(qs);
        /* final_logit_softcapping caps the logits; attn_logit_softcapping is read by Gemma3Attention
         * but never applied to its scores (transformers 5.x), so it is only checked (a positive number or null) */
        double cap = 0;
        if ((st = obj_num(c, c->cfg, "", "final_logit_softcapping", 0, &cap))) return st;
        h->final_softcap = cap;
        if ((st = obj_num(c, c->cfg, "", "attn_logit_softcapping", 0, &cap))) return st;
        int32_t bidi = 0;
        if ((st = cfg_bool(c, "use_bidirectional_attention", 0, &bidi))) return st;
        if (bidi)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: key \"use_bidirectional_attention\" is true: only causal "
                           "attention is supported", c->cfg_path);
        break;
    }
    }
    if (h->rope_type == IR_ROPE_LONGROPE) { /* longrope's attention factor: on q and k, so squared on the scores */
        int32_t rd = h->rope_dim ? h->rope_dim : h->head_dim;
        if (h->rope_dim || rd / 2 != h->rope_n_ext)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: longrope with %d factors over %d of head_dim %d rotary "
                           "dimensions: supported with full rotary (partial_rotary_factor 1) and head_dim / 2 factors",
                           c->cfg_path, h->rope_n_ext, rd, h->head_dim);
        double base = h->attn_scale > 0 ? h->attn_scale : 1.0 / sqrt((double)h->head_dim);
        h->attn_scale = base * h->rope_factor * h->rope_factor;
    }
    if ((st = parse_moe(c, arch))) return st;
    /* tie_word_embeddings: false by default in these config classes but Gemma 3's */
    if ((st = cfg_bool(c, "tie_word_embeddings", arch == HF_GEMMA3, &h->tie_embeddings))) return st;
    /* sliding windows, per layer; the class defaults of an absent sliding_window key */
    int64_t wdef = arch == HF_MISTRAL || arch == HF_GEMMA3 || arch == HF_QWEN2 || arch == HF_QWEN3 ||
                           arch == HF_QWEN2MOE || arch == HF_QWEN3MOE ? 4096 : 0;
    if ((st = parse_window(c, arch, wdef))) return st;
    if ((st = parse_quant_config(c))) return st;

    /* checkpoint dtype (informational; the tensors' own dtypes are what gets read) */
    const cJSON *dt = item(c->cfg, "dtype");
    if (!dt) dt = item(c->cfg, "torch_dtype");
    h->src_dtype = IG_DTYPE_F32;
    if (cJSON_IsString(dt)) {
        const char *s = dt->valuestring;
        if (!strcmp(s, "bfloat16")) h->src_dtype = IG_DTYPE_BF16;
        else if (!strcmp(s, "float16") || !strcmp(s, "half")) h->src_dtype = IG_DTYPE_F16;
    }
    return IG_OK;
}

static ig_status parse_special_tokens(hf_ctx *c) {
    ir_hparams *h = &c->g->hp;
    char gpath[PATH_MAX + 32];
    snprintf(gpath, sizeof gpath, "%s/generation_config.json", c->dir);
    cJSON *gen = NULL;
    ig_status st = read_json(gpath, &gen, 1, c->err);
    if (st) return st;
    int32_t ids[8], n;
    h->bos_id = -1;
    h->n_eos = 0;
    /* bos: config.json, else generation_config.json */
    if ((st = token_ids(c, item(c->cfg, "bos_token_id"), c->cfg_path, "bos_token_id", ids, 1, &n)))
        goto done;
    if (n < 0 && gen && (st = token_ids(c, item(gen, "bos_token_id"), gpath, "bos_token_id", ids, 1, &n)))
        goto done;
    if (n > 0) h->bos_id = ids[0];
    /* eos: generation_config.json's list wins (chat models list several there) */
    n = -1;
    if (gen && (st = token_ids(c, item(gen, "eos_token_id"), gpath, "eos_token_id", ids, 8, &n)))
        goto done;
    if (n < 0 && (st = token_ids(c, item(c->cfg, "eos_token_id"), c->cfg_path, "eos_token_id", ids, 8, &n)))
        goto done;
    for (int32_t i = 0; i < n; i++) h->eos_ids[h->n_eos++] = ids[i];
done:
    cJSON_Delete(gen);
    return st;
}

/* ---- checkpoint files */

static ig_status open_shard(hf_ctx *c, const char *fname, const char *listed_in) {
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", c->dir, fname);
    if (!file_exists(path)) {
        if (listed_in)
            return ig_fail(c->err, IG_ERR_IO, "%s: shard %s listed in %s does not exist", path,
                           fname, listed_in);
        return ig_fail(c->err, IG_ERR_IO, "%s: no such file", path);
    }
    st_file *f;
    ig_status st = st_open(path, &f, c->err);
    if (st) return st;
    c->st[c->n_st] = f;
    int32_t fid = ir_add_file(c->g, path);
    if (fid < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    c->st_file_id[c->n_st++] = fid;
    return IG_OK;
}

static ig_status open_checkpoint(hf_ctx *c) {
    char *ipath = c->ix_path;
    snprintf(c->ix_path, sizeof c->ix_path, "%s/model.safetensors.index.json", c->dir);
    ig_status st;
    int32_t n = 1;
    if (file_exists(ipath)) {
        if ((st = st_index_load(ipath, &c->ix, c->err))) return st;
        n = c->ix->n_shards;
        if (n < 1) return ig_fail(c->err, IG_ERR_FORMAT, "%s: weight_map is empty", ipath);
        if (n > HF_MAX_SHARDS) return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: %d shards", ipath, n);
    }
    c->st = calloc((size_t)n, sizeof *c->st);
    c->st_file_id = calloc((size_t)n, sizeof *c->st_file_id);
    if (!c->st || !c->st_file_id) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    if (!c->ix) {
        char mpath[PATH_MAX + 64];
        snprintf(mpath, sizeof mpath, "%s/model.safetensors", c->dir);
        if (!file_exists(mpath))
            return ig_fail(c->err, IG_ERR_IO,
                           "%s: no model.safetensors or model.safetensors.index.json", c->dir);
        return open_shard(c, "model.safetensors", NULL);
    }
    for (int32_t i = 0; i < n; i++)
        if ((st = open_shard(c, c->ix->shards[i], c->ix_path))) return st;
    return IG_OK;
}

/* Finds `name` in the checkpoint; *shard = -1 when absent. */
static ig_status find_tensor(hf_ctx *c, const char *name, const st_tensor **t, int32_t *shard) {
    *t = NULL;
    *shard = -1;
    if (c->ix) {
        int32_t s = st_index_lookup(c->ix, name);
        if (s < 0) return IG_OK;
        const st_tensor *x = st_find(c->st[s], name);
        if (!x)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: tensor %s is listed in model.safetensors.index.json but missing from the shard",
                           c->st[s]->path, name);
        *t = x;
        *shard = s;
        return IG_OK;
    }
    *t = st_find(c->st[0], name);
    if (*t) *shard = 0;
    return IG_OK;
}

static void fmt_shape(char *buf, size_t cap, int rank, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Adds stored tensor `name` (a GPTQ / AWQ layer's part) of dtype I32 (want_i32) or a float type
 * and shape want[0..rank) as a weight that no node reads; *id its tensor id. */
static ig_status add_gq_part(hf_ctx *c, const char *name, int32_t layer, int want_i32, int rank, const int64_t *want,
                             int optional, int32_t *id) {
    *id = -1;
    const st_tensor *t;
    int32_t s;
    ig_status st = find_tensor(c, name, &t, &s);
    if (st) return st;
    if (!t) {
        if (optional) return IG_OK;
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing tensor %s", c->ix ? c->ix_path : c->st[0]->path, name);
    }
    ir_tensor w = {0};
    switch (t->dtype) {
    case ST_I32: w.dtype = IG_DTYPE_I32, w.src_type = IR_STYPE_I32; break;
    case ST_F32: w.dtype = IG_DTYPE_F32, w.src_type = IR_STYPE_F32; break;
    case ST_BF16: w.dtype = IG_DTYPE_BF16, w.src_type = IR_STYPE_BF16; break;
    case ST_F16: w.dtype = IG_DTYPE_F16, w.src_type = IR_STYPE_F16; break;
    default: break;
    }
    if (want_i32 ? t->dtype != ST_I32 : t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F32)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s, expected %s", c->st[s]->path, name,
                       st_dtype_name(t->dtype), want_i32 ? "I32" : "F16, BF16 or F32");
    char ws[64], got[128];
    fmt_shape(ws, sizeof ws, rank, want);
    fmt_shape(got, sizeof got, t->rank, t->shape);
    int ok = t->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == want[d];
    if (!ok)
        return ig_fail(c->err, IG_ERR_MISMATCH, "%s: tensor %s has shape %s, expected %s (%s %d-bit, group %d)",
                       c->st[s]->path, name, got, ws, c->q.method == IR_STYPE_AWQ ? "AWQ" : "GPTQ", c->q.bits, c->q.group);
    w.name = (char *)name;
    w.kind = IR_TENSOR_WEIGHT;
    w.rank = rank;
    w.shape[0] = want[0];
    w.shape[1] = rank == 2 ? want[1] : 0;
    w.layer = layer;
    w.src_file = c->st_file_id[s];
    w.src_offset = t->offset;
    w.src_nbytes = t->nbytes;
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* The GPTQ / AWQ layer `base` (name without ".weight": base.qweight, .qzeros, .scales, .g_idx)
 * as the weight `name` [n][k]. */
static ig_status add_gq_layer(hf_ctx *c, const char *name, const char *base, int32_t layer, int64_t n, int64_t k,
                              int32_t *id) {
    int awq = c->q.method == IR_STYPE_AWQ, pack = 32 / c->q.bits;
    int64_t G = c->q.group > 0 ? c->q.group : k, ng = (k + G - 1) / G;
    char nm[4][320];
    const char *sfx[4] = {"qweight", "scales", "qzeros", "g_idx"};
    for (int i = 0; i < 4; i++) snprintf(nm[i], sizeof nm[i], "%s.%s", base, sfx[i]);
    if (awq ? n % 8 || k % G : k % pack || n % pack)
        return ig_fail(c->err, IG_ERR_MISMATCH, "%s: %s is [%lld out, %lld in]: %s", c->cfg_path, nm[0], (long long)n,
                       (long long)k, awq ? "AWQ needs out features in words of 8 and in features in whole groups"
                                         : "GPTQ needs in and out features in whole 32-bit words");
    int64_t wq[2] = {awq ? k : k / pack, awq ? n / 8 : n}, ws[2] = {ng, n}, wz[2] = {ng, awq ? n / 8 : n / pack}, wg[1] = {k};
    int32_t ids[4];
    ig_status st;
    if ((st = add_gq_part(c, nm[0], layer, 1, 2, wq, 0, &ids[0])) || (st = add_gq_part(c, nm[1], layer, 0, 2, ws, 0, &ids[1])) ||
        (st = add_gq_part(c, nm[2], layer, 1, 2, wz, 0, &ids[2])) ||
        (st = add_gq_part(c, nm[3], layer, 1, 1, wg, 1, &ids[3])))
        return st;
    ir_tensor w = c->g->tensors[ids[0]];
    char *wname = ir_strdup(c->g, name);
    if (!wname) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    w.id = 0;
    w.name = wname;
    w.dtype = IG_DTYPE_F16;
    w.shape[0] = n, w.shape[1] = k;
    w.src_type = c->q.method;
    w.gq = (ir_gq){.bits = c->q.bits, .group = (int32_t)G, .zero_add = c->q.zero_add, .scales = ids[1], .zeros = ids[2],
                   .g_idx = ids[3]};
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* Whether `name` (NAME.weight) is a GPTQ / AWQ layer of this checkpoint (*base: NAME). */
static int is_gq_layer(hf_ctx *c, const char *name, char *base, size_t cap) {
    size_t l = strlen(name);
    if (!c->q.method || l < 7 || l - 7 >= cap || strcmp(name + l - 7, ".weight")) return 0;
    char qn[320];
    snprintf(base, cap, "%.*s", (int)(l - 7), name);
    snprintf(qn, sizeof qn, "%s.qweight", base);
    const st_tensor *t;
    int32_t s;
    return find_tensor(c, name, &t, &s) == IG_OK && !t && find_tensor(c, qn, &t, &s) == IG_OK && t;
}

/* Adds weight `name` of shape [n] (k == 0) or [n][k]. Absent and optional: *id = -1. */
static ig_status add_weight(hf_ctx *c, const char *name, int32_t layer, int64_t n, int64_t k,
                            int optional, int32_t *id) {
    *id = -1;
    const st_tensor *t;
    int32_t s;
    char base[300];
    if (k && is_gq_layer(c, name, base, sizeof base)) return add_gq_layer(c, name, base, layer, n, k, id);
    ig_status st = find_tensor(c, name, &t, &s);
    if (st) return st;
    const char *where = c->ix ? c->ix_path : c->st[0]->path;
    if (!t) {
        if (optional) return IG_OK;
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing tensor %s", where, name);
    }
    ir_tensor w = {0};
    switch (t->dtype) {
    case ST_F32: w.dtype = IG_DTYPE_F32; w.src_type = IR_STYPE_F32; break;
    case ST_BF16: w.dtype = IG_DTYPE_BF16; w.src_type = IR_STYPE_BF16; break;
    case ST_F16: w.dtype = IG_DTYPE_F16; w.src_type = IR_STYPE_F16; break;
    default:
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: tensor %s has dtype %s, expected F32, BF16 or F16", c->st[s]->path,
                       name, st_dtype_name(t->dtype));
    }
    int rank = k ? 2 : 1;
    int64_t want[2] = {n, k};
    char ws[64], got[128];
    fmt_shape(ws, sizeof ws, rank, want);
    fmt_shape(got, sizeof got, t->rank, t->shape);
    if (t->rank != rank || t->shape[0] != n || (rank == 2 && t->shape[1] != k))
        return ig_fail(c->err, IG_ERR_MISMATCH, "%s: tensor %s has shape %s, expected %s",
                       c->st[s]->path, name, got, ws);
    w.name = (char *)name;
    w.kind = IR_TENSOR_WEIGHT;
    w.rank = rank;
    w.shape[0] = n;
    w.shape[1] = rank == 2 ? k : 0;
    w.layer = layer;
    w.src_file = c->st_file_id[s];
    w.src_offset = t->offset;
    w.src_nbytes = t->nbytes;
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* Adds the [n, k] block starting at element e0 of tensor `name` (which must have shape
 * want[0..rank)) as weight `part`: a row range of a row-major matrix (Phi-3's qkv_proj,
 * gate_up_proj) or one expert of a fused 3-D expert tensor is one contiguous byte range. */
static ig_status add_weight_part(hf_ctx *c, const char *name, const char *part, int32_t layer, int rank,
                                 const int64_t *want, int64_t e0, int64_t n, int64_t k, int32_t *id) {
    *id = -1;
    const st_tensor *t;
    int32_t s;
    char base[300];
    if (is_gq_layer(c, name, base, sizeof base))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: %s.qweight: fused %s layers (split into parts here) are not supported",
                       c->cfg_path, base, c->q.method == IR_STYPE_AWQ ? "AWQ" : "GPTQ");
    ig_status st = find_tensor(c, name, &t, &s);
    if (st) return st;
    if (!t) return ig_fail(c->err, IG_ERR_FORMAT, "%s: missing tensor %s", c->ix ? c->ix_path : c->st[0]->path, name);
    char ws[96], got[128];
    fmt_shape(ws, sizeof ws, rank, want);
    fmt_shape(got, sizeof got, t->rank, t->shape);
    int ok = t->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == want[d];
    if (!ok)
        return ig_fail(c->err, IG_ERR_MISMATCH, "%s: tensor %s has shape %s, expected %s", c->st[s]->path, name, got, ws);
    ir_tensor w = {0};
    switch (t->dtype) {
    case ST_F32: w.dtype = IG_DTYPE_F32; w.src_type = IR_STYPE_F32; break;
    case ST_BF16: w.dtype = IG_DTYPE_BF16; w.src_type = IR_STYPE_BF16; break;
    case ST_F16: w.dtype = IG_DTYPE_F16; w.src_type = IR_STYPE_F16; break;
    default:
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s, expected F32, BF16 or F16",
                       c->st[s]->path, name, st_dtype_name(t->dtype));
    }
    uint64_t es = w.dtype == IG_DTYPE_F32 ? 4 : 2;
    w.name = (char *)part;
    w.kind = IR_TENSOR_WEIGHT;
    w.rank = 2;
    w.shape[0] = n;
    w.shape[1] = k;
    w.layer = layer;
    w.src_file = c->st_file_id[s];
    w.src_offset = t->offset + (uint64_t)e0 * es;
    w.src_nbytes = (uint64_t)n * (uint64_t)k * es;
    *id = ir_add_tensor(c->g, &w);
    if (*id < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* Rows [r0, r0 + n) of the [rows, k] matrix `name`, as weight `part`. */
static ig_status add_weight_rows(hf_ctx *c, const char *name, const char *part, int32_t layer, int64_t r0,
                                 int64_t n, int64_t rows, int64_t k, int32_t *id) {
    int64_t want[2] = {rows, k};
    return add_weight_part(c, name, part, layer, 2, want, r0 * k, n, k, id);
}

/* Does the checkpoint hold tensor `name`? */
static int has_tensor(hf_ctx *c, const char *name) {
    const st_tensor *t;
    int32_t s;
    return find_tensor(c, name, &t, &s) == IG_OK && t;
}

/* A weight of no stored data that reads as zeros (IR_XFORM_ZERO), of the dtype of weight `like`. */
static ig_status add_zero(hf_ctx *c, const char *name, int32_t layer, int64_t rows, int64_t cols, int32_t like,
                          int32_t *id) {
    const ir_tensor *l = &c->g->tensors[like];
    ir_tensor t = {0};
    t.name = (char *)name;
    t.kind = IR_TENSOR_WEIGHT;
    t.dtype = l->dtype;
    t.rank = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.layer = layer;
    t.src_file = 0;
    t.src_type = l->src_type == IR_STYPE_GPTQ || l->src_type == IR_STYPE_AWQ ? IR_STYPE_F32 : l->src_type;
    t.xform = IR_XFORM_ZERO;
    if ((*id = ir_add_tensor(c->g, &t)) < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* A gate/up pair (each [n, D]) interleaved by 16 rows, each padded with zero rows to `rows`. */
static ig_status pair16(hf_ctx *c, const char *name, const int32_t pr[2], int64_t n, int64_t rows, int32_t *id) {
    if ((*id = ir_add_merged_weight(c->g, name, pr, 2, 1)) < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    if (rows != n) {
        c->g->tensors[*id].pad16 = 1;
        c->g->tensors[*id].shape[0] = 2 * rows;
    }
    return IG_OK;
}

/* A down projection [D, n] with zero columns up to `cols`. */
static ig_status pad_cols(hf_ctx *c, const char *name, int32_t *id, int64_t n, int64_t cols) {
    if (cols == n) return IG_OK;
    int32_t nid = ir_add_merged_weight(c->g, name, id, 1, 0);
    if (nid < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    c->g->tensors[nid].pad16 = 1;
    c->g->tensors[nid].shape[1] = cols;
    *id = nid;
    return IG_OK;
}

/* The shared-expert slot of layer L (hp.shared_intermediate rows, padded): Qwen2-MoE's shared
 * expert under `prefix` (`shared` 1), a dense layer's MLP `prefix.{gate,up,down}_proj` of
 * intermediate_size (`shared` 0: down doubled, gate zero), or zeros (prefix NULL). */
static ig_status add_shared(hf_ctx *c, int32_t L, const char *prefix, int shared, ir_layer_weights *w) {
    const ir_hparams *h = &c->g->hp;
    int64_t D = h->hidden, Isp = h->shared_intermediate, n = shared ? c->shared_rows : h->intermediate;
    char nm[256], part[300];
    ig_status st;
    int32_t pr[2];
    snprintf(part, sizeof part, "model.layers.%d.shared_slot.gate_up", L);
    if (!prefix) {
        if ((st = add_zero(c, part, L, 2 * Isp, D, w->q, &w->shared_gate_up))) return st;
        snprintf(nm, sizeof nm, "model.layers.%d.shared_slot.down", L);
        if ((st = add_zero(c, nm, L, D, Isp, w->q, &w->shared_down))) return st;
        snprintf(nm, sizeof nm, "model.layers.%d.shared_slot.gate", L);
        return add_zero(c, nm, L, 1, D, w->q, &w->shared_gate);
    }
    const char *ex = shared ? "shared_expert." : "";
    snprintf(nm, sizeof nm, "%s.%sgate_proj.weight", prefix, ex);
    if ((st = add_weight(c, nm, L, n, D, 0, &pr[0]))) return st;
    snprintf(nm, sizeof nm, "%s.%sup_proj.weight", prefix, ex);
    if ((st = add_weight(c, nm, L, n, D, 0, &pr[1]))) return st;
    snprintf(nm, sizeof nm, "%s.%sdown_proj.weight", prefix, ex);
    if ((st = add_weight(c, nm, L, D, n, 0, &w->shared_down))) return st;
    if (!shared) c->g->tensors[w->shared_down].xform = IR_XFORM_TIMES_TWO; /* a plain leaf: add_weight's */
    if ((st = pad_cols(c, nm, &w->shared_down, n, Isp)) || (st = pair16(c, part, pr, n, Isp, &w->shared_gate_up)))
        return st;
    if (!shared) {
        snprintf(nm, sizeof nm, "model.layers.%d.shared_slot.gate", L);
        return add_zero(c, nm, L, 1, D, w->q, &w->shared_gate);
    }
    snprintf(nm, sizeof nm, "%s.shared_expert_gate.weight", prefix);
    return add_weight(c, nm, L, 1, D, 0, &w->shared_gate);
}

/* The routed experts of layer L under `prefix` ("model.layers.L.mlp"): router `prefix.gate`, and
 * the experts either as published checkpoints store them, one tensor per expert
 * (experts.N.{gate,up,down}_proj, or Mixtral's experts.N.{w1,w3,w2}), or as transformers' fused
 * 3-D tensors experts.gate_up_proj [E, 2I, D] (gate rows, then up) and experts.down_proj [E, D, I].
 * Each expert's gate/up pair is interleaved by 16 rows (padded to hp.moe_intermediate) and the
 * experts stacked. A dense layer among MoE ones (c->dense_mlp) gets a zero router and zero experts. */
static ig_status add_experts(hf_ctx *c, int32_t L, const char *prefix, ir_layer_weights *w) {
    const ir_hparams *h = &c->g->hp;
    int64_t D = h->hidden, I = c->moe_rows, Ip = h->moe_intermediate, E = h->n_experts;
    char nm[256], part[300];
    ig_status st;
    int dense = c->dense_mlp && c->dense_mlp[L];
    if (dense) {
        snprintf(nm, sizeof nm, "%s.gate.weight", prefix);
        if ((st = add_zero(c, nm, L, E, D, w->q, &w->router))) return st;
        snprintf(part, sizeof part, "%s.experts.gate_up", prefix);
        if ((st = add_zero(c, part, L, E * 2 * Ip, D, w->q, &w->experts_gate_up))) return st;
        snprintf(part, sizeof part, "%s.experts.down", prefix);
        if ((st = add_zero(c, part, L, E * D, Ip, w->q, &w->experts_down))) return st;
        return add_shared(c, L, prefix, 0, w);
    }
    snprintf(nm, sizeof nm, "%s.gate.weight", prefix);
    if ((st = add_weight(c, nm, L, E, D, 0, &w->router))) return st;
    int32_t *gu = calloc((size_t)E, sizeof *gu), *dn = calloc((size_t)E, sizeof *dn);
    if (!gu || !dn) {
        st = ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    int mixtral = c->arch == HF_MIXTRAL;
    char fgu[256], fdn[256];
    snprintf(fgu, sizeof fgu, "%s.experts.gate_up_proj", prefix);
    snprintf(fdn, sizeof fdn, "%s.experts.down_proj", prefix);
    int fused = has_tensor(c, fgu);
    for (int64_t e = 0; e < E; e++) {
        int32_t pr[2];
        if (fused) {
            int64_t wgu[3] = {E, 2 * I, D}, wdn[3] = {E, D, I};
            snprintf(part, sizeof part, "%s[%lld].gate", fgu, (long long)e);
            if ((st = add_weight_part(c, fgu, part, L, 3, wgu, e * 2 * I * D, I, D, &pr[0]))) goto done;
            snprintf(part, sizeof part, "%s[%lld].up", fgu, (long long)e);
            if ((st = add_weight_part(c, fgu, part, L, 3, wgu, e * 2 * I * D + I * D, I, D, &pr[1]))) goto done;
            snprintf(part, sizeof part, "%s[%lld]", fdn, (long long)e);
            if ((st = add_weight_part(c, fdn, part, L, 3, wdn, e * D * I, D, I, &dn[e]))) goto done;
        } else {
            snprintf(nm, sizeof nm, "%s.experts.%lld.%s.weight", prefix, (long long)e, mixtral ? "w1" : "gate_proj");
            if ((st = add_weight(c, nm, L, I, D, 0, &pr[0]))) goto done;
            snprintf(nm, sizeof nm, "%s.experts.%lld.%s.weight", prefix, (long long)e, mixtral ? "w3" : "up_proj");
            if ((st = add_weight(c, nm, L, I, D, 0, &pr[1]))) goto done;
            snprintf(nm, sizeof nm, "%s.experts.%lld.%s.weight", prefix, (long long)e, mixtral ? "w2" : "down_proj");
            if ((st = add_weight(c, nm, L, D, I, 0, &dn[e]))) goto done;
        }
        snprintf(part, sizeof part, "%s.experts.%lld.gate_up", prefix, (long long)e);
        if ((st = pair16(c, part, pr, I, Ip, &gu[e]))) goto done;
        snprintf(part, sizeof part, "%s.experts.%lld.down", prefix, (long long)e);
        if ((st = pad_cols(c, part, &dn[e], I, Ip))) goto done;
    }
    snprintf(part, sizeof part, "%s.experts.gate_up", prefix);
    w->experts_gate_up = ir_add_merged_weight(c->g, part, gu, (int)E, 0);
    snprintf(part, sizeof part, "%s.experts.down", prefix);
    w->experts_down = ir_add_merged_weight(c->g, part, dn, (int)E, 0);
    if (w->experts_gate_up < 0 || w->experts_down < 0) st = ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    if (st || !h->shared_intermediate) goto done;
    /* Qwen2-MoE's shared expert: a gated MLP of its own, scaled by sigmoid(x . shared_expert_gate) */
    st = add_shared(c, L, c->shared_rows ? prefix : NULL, 1, w);
done:
    free(gu);
    free(dn);
    return st;
}

/* ---- graph */


static ig_status add_layer_weights(hf_ctx *c, int32_t L, ir_layer_weights *w) {
    const ir_hparams *h = &c->g->hp;
    int64_t D = h->hidden, qd = (int64_t)h->n_heads * h->head_dim,
            kvd = (int64_t)h->n_kv_heads * h->head_dim, I = h->intermediate;
    char nm[160], part[192];
    ig_status st;
#define W(field, suffix, n, k)                                                      \
    do {                                                                            \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", L, suffix);                   \
        if ((st = add_weight(c, nm, L, n, k, 0, &w->field))) return st;             \
    } while (0)
    /* rows [r0, r0 + n) of fused tensor `suffix` ([rows, k]), named suffix + tag */
#define WR(field, suffix, tag, r0, n, rows, k)                                                  \
    do {                                                                                       \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", L, suffix);                              \
        snprintf(part, sizeof part, "%s%s", nm, tag);                                          \
        if ((st = add_weight_rows(c, nm, part, L, r0, n, rows, k, &w->field))) return st;     \
    } while (0)
    int gemma = c->arch == HF_GEMMA3, fused = c->arch == HF_PHI3 || c->arch == HF_GLM4;
    W(in_norm, "input_layernorm.weight", D, 0);
    if (c->arch == HF_PHI3) { /* qkv_proj: q rows, then k, then v */
        WR(q, "self_attn.qkv_proj.weight", "[q]", 0, qd, qd + 2 * kvd, D);
        WR(k, "self_attn.qkv_proj.weight", "[k]", qd, kvd, qd + 2 * kvd, D);
        WR(v, "self_attn.qkv_proj.weight", "[v]", qd + kvd, kvd, qd + 2 * kvd, D);
    } else {
        W(q, "self_attn.q_proj.weight", qd, D);
        W(k, "self_attn.k_proj.weight", kvd, D);
        W(v, "self_attn.v_proj.weight", kvd, D);
    }
    w->qb = w->kb = w->vb = w->ob = w->q_norm = w->k_norm = -1;
    w->gate_b = w->up_b = w->down_b = -1;
    w->attn_out_norm = w->mlp_out_norm = -1;
    if (h->attn_bias) {
        W(qb, "self_attn.q_proj.bias", qd, 0);
        W(kb, "self_attn.k_proj.bias", kvd, 0);
        W(vb, "self_attn.v_proj.bias", kvd, 0);
    }
    if (h->qk_norm) {
        W(q_norm, "self_attn.q_norm.weight", h->head_dim, 0);
        W(k_norm, "self_attn.k_norm.weight", h->head_dim, 0);
    }
    W(o, "self_attn.o_proj.weight", D, qd);
    if (h->o_bias) W(ob, "self_attn.o_proj.bias", D, 0);
    if (gemma) { /* post_attention_layernorm is the attention output's norm here */
        W(attn_out_norm, "post_attention_layernorm.weight", D, 0);
        W(post_norm, "pre_feedforward_layernorm.weight", D, 0);
        W(mlp_out_norm, "post_feedforward_layernorm.weight", D, 0);
    } else {
        W(post_norm, "post_attention_layernorm.weight", D, 0);
        if (c->arch == HF_GLM4) {
            W(attn_out_norm, "post_self_attn_layernorm.weight", D, 0);
            W(mlp_out_norm, "post_mlp_layernorm.weight", D, 0);
        }
    }
    w->router = w->experts_gate_up = w->experts_down = -1;
    w->shared_gate_up = w->shared_down = w->shared_gate = -1;
    if (h->n_experts > 0) {
        snprintf(nm, sizeof nm, "model.layers.%d.%s", L, c->arch == HF_MIXTRAL ? "block_sparse_moe" : "mlp");
        if (c->arch == HF_MIXTRAL && !has_tensor(c, "model.layers.0.block_sparse_moe.gate.weight"))
            snprintf(nm, sizeof nm, "model.layers.%d.mlp", L); /* transformers 5 names */
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%s", nm);
        return add_experts(c, L, prefix, w);
    }
    if (fused) { /* gate_up_proj: gate rows, then up (chunk(2) in transformers) */
        WR(gate, "mlp.gate_up_proj.weight", "[gate]", 0, I, 2 * I, D);
        WR(up, "mlp.gate_up_proj.weight", "[up]", I, I, 2 * I, D);
    } else {
        W(gate, "mlp.gate_proj.weight", I, D);
        W(up, "mlp.up_proj.weight", I, D);
    }
    W(down, "mlp.down_proj.weight", D, I);
    if (h->mlp_bias) {
        W(gate_b, "mlp.gate_proj.bias", I, 0);
        W(up_b, "mlp.up_proj.bias", I, 0);
        W(down_b, "mlp.down_proj.bias", D, 0);
    }
    if (gemma) { /* (1 + w) RMSNorms */
        int32_t norms[] = {w->in_norm, w->q_norm, w->k_norm, w->attn_out_norm, w->post_norm, w->mlp_out_norm};
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
            if (norms[i] >= 0) c->g->tensors[norms[i]].xform = IR_XFORM_PLUS_ONE;
    }
#undef W
#undef WR
    return IG_OK;
}

static ig_status build_graph(hf_ctx *c) {
    ir_graph *g = c->g;
    const ir_hparams *h = &g->hp;
    int64_t D = h->hidden;
    ig_status st;
    int32_t embed, fnorm, head = -1;
    if ((st = add_weight(c, "model.embed_tokens.weight", -1, h->vocab, D, 0, &embed))) return st;
    if (!item(c->cfg, "dtype") && !item(c->cfg, "torch_dtype")) g->hp.src_dtype = g->tensors[embed].dtype;
    /* every layer has tensors of its own: a layer count beyond the checkpoint's tensor count is
     * a corrupt config, refused before anything is sized by it */
    int64_t n_tensors = 0;
    for (int32_t i = 0; i < c->n_st; i++) n_tensors += c->st[i]->n_tensors;
    if (h->n_layers > n_tensors)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: num_hidden_layers is %d but the checkpoint holds only %lld tensors",
                       c->cfg_path, h->n_layers, (long long)n_tensors);
    ir_layer_weights *lw = calloc((size_t)h->n_layers, sizeof *lw);
    if (!lw) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    for (int32_t L = 0; L < h->n_layers; L++)
        if ((st = add_layer_weights(c, L, &lw[L]))) goto done;
    if ((st = add_weight(c, "model.norm.weight", -1, D, 0, 0, &fnorm))) goto done;
    if (c->arch == HF_GEMMA3) g->tensors[fnorm].xform = IR_XFORM_PLUS_ONE;
    if (h->tie_embeddings) {
        head = embed;
    } else {
        if ((st = add_weight(c, "lm_head.weight", -1, h->vocab, D, 1, &head))) goto done;
        if (head < 0) {
            st = ig_fail(c->err, IG_ERR_FORMAT,
                         "%s: missing tensor lm_head.weight (tie_word_embeddings is false)",
                         c->ix ? c->ix_path : c->st[0]->path);
            goto done;
        }
    }

    st = ir_build_decoder(g, embed, lw, fnorm, head, c->err);
done:
    free(lw);
    return st;
}

ig_status ir_import_hf(const char *dir, ir_graph **out, ig_err *err) {
    *out = NULL;
    hf_ctx c = {0};
    c.err = err;
    if (!realpath(dir, c.dir)) return ig_fail(err, IG_ERR_IO, "%s: %s", dir, strerror(errno));
    snprintf(c.cfg_path, sizeof c.cfg_path, "%s/config.json", c.dir);
    ig_status st = read_json(c.cfg_path, &c.cfg, 0, err);
    if (st) return st;
    c.g = ir_graph_new();
    hf_arch arch;
    if (!c.g) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = parse_config(&c, &arch)) || (st = parse_special_tokens(&c)) ||
        (st = open_checkpoint(&c)) || (st = build_graph(&c)))
        goto done;
    char tpath[PATH_MAX + 32];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", c.dir);
    if (file_exists(tpath) && !(c.g->tokenizer_dir = ir_strdup(c.g, c.dir)))
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
done:
    for (int32_t i = 0; i < c.n_st; i++) st_close(c.st[i]);
    free(c.st);
    free(c.st_file_id);
    st_index_free(c.ix);
    free(c.dense_mlp);
    cJSON_Delete(c.cfg);
    if (st) {
        ir_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return IG_OK;
}
