/* import_gguf.c — GGUF file → unfused ignis graph (ir_import_gguf), and the GGUF tokenizer
 * metadata → HF tokenizer.json / tokenizer_config.json (ir_gguf_write_tokenizer).
 *
 * Architecture `llama` only (llama.cpp also files Mistral and SmolLM under it). The graph is the
 * same op sequence ir/import_hf.c builds for LlamaForCausalLM (compiler passes pattern-match
 * it; change both together), with weights recorded by GGUF file offset and ggml storage type;
 * nothing is dequantized here. GGUF lists dims fastest first, so a [K] x [N] tensor is our
 * [N][K] matrix. llama.cpp's converter row-permutes attn_q / attn_k for its interleaved rope;
 * those weights carry IR_XFORM_UNPERMUTE_ROPE so ir/sources.c undoes it on read.
 *
 * The tokenizer writer follows what transformers does when it loads a GGUF tokenizer
 * (integrations/gguf/gguf_tokenizer_mapping.py): byte-level BPE for tokenizer.ggml.model "gpt2"
 * with the split regex chosen by tokenizer.ggml.pre, SentencePiece BPE with byte fallback for
 * "llama" with merges recovered from the scores (tokenization_utils_base.generate_merges).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "ir.h"

/* ---- hyper-parameters */

typedef struct gg_ctx {
    gguf_file *f;
    const char *path;
    ir_graph *g;
    int32_t file_id;
    ig_err *err;
} gg_ctx;

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
    if (gguf_find_kv(c->f, "llama.rope.scaling.original_context_length") &&
        (st = key_int(c, "llama.rope.scaling.original_context_length", -1, &orig)))
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

static ig_status parse_hparams(gg_ctx *c) {
    ir_hparams *h = &c->g->hp;
    gguf_str arch;
    ig_status st = gguf_get_str(c->f, "general.architecture", &arch, c->err);
    if (st) return st;
    if (!gguf_str_eq(arch, "llama"))
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: general.architecture \"%.*s\" is not supported (supported: llama)",
                       c->path, (int)(arch.n > 64 ? 64 : arch.n), arch.p);
    snprintf(h->arch, sizeof h->arch, "LlamaForCausalLM");
    if ((st = key_int(c, "llama.block_count", -1, &h->n_layers)) ||
        (st = key_int(c, "llama.embedding_length", -1, &h->hidden)) ||
        (st = key_int(c, "llama.feed_forward_length", -1, &h->intermediate)) ||
        (st = key_int(c, "llama.attention.head_count", -1, &h->n_heads)) ||
        (st = key_int(c, "llama.attention.head_count_kv", h->n_heads, &h->n_kv_heads)) ||
        (st = key_int(c, "llama.context_length", 2048, &h->max_context)) ||
        (st = key_num(c, "llama.attention.layer_norm_rms_epsilon", -1, &h->rms_eps)) ||
        (st = key_num(c, "llama.rope.freq_base", 10000.0, &h->rope_theta)))
        return st;
    if (gguf_find_kv(c->f, "llama.attention.key_length")) {
        if ((st = key_int(c, "llama.attention.key_length", -1, &h->head_dim))) return st;
    } else {
        if (h->hidden % h->n_heads)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: llama.embedding_length %d is not a multiple of "
                           "llama.attention.head_count %d", c->path, h->hidden, h->n_heads);
        h->head_dim = h->hidden / h->n_heads;
    }
    int32_t vlen = h->head_dim, rdim = h->head_dim;
    if ((st = key_int(c, "llama.attention.value_length", h->head_dim, &vlen)) ||
        (st = key_int(c, "llama.rope.dimension_count", h->head_dim, &rdim)))
        return st;
    if (vlen != h->head_dim)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: llama.attention.value_length %d differs from key_length %d", c->path,
                       vlen, h->head_dim);
    if (rdim != h->head_dim)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                       "%s: llama.rope.dimension_count %d differs from head dim %d (partial rotary "
                       "is not supported)", c->path, rdim, h->head_dim);
    if (h->n_heads % h->n_kv_heads)
        return ig_fail(c->err, IG_ERR_FORMAT,
                       "%s: llama.attention.head_count %d is not a multiple of head_count_kv %d",
                       c->path, h->n_heads, h->n_kv_heads);
    if (h->head_dim % 2)
        return ig_fail(c->err, IG_ERR_UNSUPPORTED, "%s: head dim %d is odd (rope needs pairs)",
                       c->path, h->head_dim);

    /* rope scaling */
    h->rope_type = IR_ROPE_DEFAULT;
    h->rope_factor = 1.0;
    const gguf_kv *sty = gguf_find_kv(c->f, "llama.rope.scaling.type");
    if (sty) {
        gguf_str s;
        if ((st = gguf_get_str(c->f, "llama.rope.scaling.type", &s, c->err))) return st;
        if (gguf_str_eq(s, "linear")) {
            h->rope_type = IR_ROPE_LINEAR;
            if ((st = key_num(c, "llama.rope.scaling.factor", -1, &h->rope_factor))) return st;
        } else if (!gguf_str_eq(s, "none")) {
            return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                           "%s: llama.rope.scaling.type \"%.*s\" is not supported (none, linear)",
                           c->path, (int)(s.n > 32 ? 32 : s.n), s.p);
        }
    } else if (gguf_find_kv(c->f, "llama.rope.scale_linear")) { /* older files */
        if ((st = key_num(c, "llama.rope.scale_linear", -1, &h->rope_factor))) return st;
        if (h->rope_factor != 1.0) h->rope_type = IR_ROPE_LINEAR;
    }
    const gguf_tensor_info *rf = gguf_find_tensor(c->f, "rope_freqs.weight");
    if (rf) {
        if (h->rope_type != IR_ROPE_DEFAULT)
            return ig_fail(c->err, IG_ERR_UNSUPPORTED,
                           "%s: both llama.rope.scaling.type and rope_freqs.weight are set", c->path);
        if ((st = rope_from_freqs(c, rf))) return st;
    }

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
    } else if ((st = key_int(c, "llama.vocab_size", -1, &h->vocab))) {
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

static ig_status build_graph(gg_ctx *c) {
    ir_graph *g = c->g;
    const ir_hparams *h = &g->hp;
    int64_t D = h->hidden, qd = (int64_t)h->n_heads * h->head_dim,
            kvd = (int64_t)h->n_kv_heads * h->head_dim, I = h->intermediate;
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

    ir_layer_weights *lw = calloc((size_t)h->n_layers, sizeof *lw);
    if (!lw) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    for (int32_t L = 0; L < h->n_layers; L++) {
        ir_layer_weights *w = &lw[L];
        char nm[96];
        w->qb = w->kb = w->vb = w->ob = w->q_norm = w->k_norm = w->gate_b = w->up_b = w->down_b = -1;
#define W(var, suffix, n, k)                                                \
    do {                                                                    \
        snprintf(nm, sizeof nm, "blk.%d.%s.weight", L, suffix);             \
        if ((st = add_weight(c, nm, L, n, k, 0, &w->var))) goto done;       \
    } while (0)
        W(in_norm, "attn_norm", D, 0);
        W(q, "attn_q", qd, D);
        W(k, "attn_k", kvd, D);
        W(v, "attn_v", kvd, D);
        W(o, "attn_output", D, qd);
        W(post_norm, "ffn_norm", D, 0);
        W(gate, "ffn_gate", I, D);
        W(up, "ffn_up", I, D);
        W(down, "ffn_down", D, I);
#undef W
        /* llama GGUF q/k rows are permuted for interleaved RoPE: read them back in HF order */
        g->tensors[w->q].xform = IR_XFORM_UNPERMUTE_ROPE;
        g->tensors[w->q].xform_heads = h->n_heads;
        g->tensors[w->k].xform = IR_XFORM_UNPERMUTE_ROPE;
        g->tensors[w->k].xform_heads = h->n_kv_heads;
    }
    st = ir_build_decoder(g, embed, lw, fnorm, head, c->err);
done:
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
    /* tokenizer_dir stays NULL: the tokenizer lives in the GGUF; the compiler driver writes
       HF files from it with ir_gguf_write_tokenizer */
done:
    gguf_close(c.f);
    if (st) {
        ir_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return IG_OK;
}

/* ==== tokenizer ==== */

/* token string -> id (last occurrence wins, like a Python dict built in order; or the first) */
typedef struct tok_map {
    uint64_t cap;     /* power of two */
    int32_t *slot;    /* [cap] token id or -1 */
    const gguf_str *toks;
} tok_map;

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static int map_init(tok_map *m, const gguf_str *toks, int32_t n, int keep_first) {
    m->cap = 16;
    while (m->cap < (uint64_t)n * 2) m->cap <<= 1;
    m->toks = toks;
    m->slot = malloc(m->cap * sizeof *m->slot);
    if (!m->slot) return 0;
    memset(m->slot, 0xff, m->cap * sizeof *m->slot);
    for (int32_t i = 0; i < n; i++) {
        uint64_t j = hash_bytes(toks[i].p, toks[i].n) & (m->cap - 1);
        for (;; j = (j + 1) & (m->cap - 1)) {
            int32_t s = m->slot[j];
            if (s < 0 || (toks[s].n == toks[i].n && !memcmp(toks[s].p, toks[i].p, toks[i].n))) {
                if (s < 0 || !keep_first) m->slot[j] = i;
                break;
            }
        }
    }
    return 1;
}

static int32_t map_get(const tok_map *m, const char *p, uint64_t n) {
    uint64_t j = hash_bytes(p, n) & (m->cap - 1);
    for (;; j = (j + 1) & (m->cap - 1)) {
        int32_t s = m->slot[j];
        if (s < 0) return -1;
        if (m->toks[s].n == n && !memcmp(m->toks[s].p, p, n)) return s;
    }
}

typedef struct merge_cand {
    int32_t l, r;     /* token ids */
    uint32_t nl, nr;  /* lengths in code points */
    uint32_t off;     /* split byte offset inside the merged token */
    int32_t tok;      /* merged token id */
    double score;
    uint64_t seq;     /* order of discovery, for a stable sort */
} merge_cand;

static int utf8_len(uint8_t b) {
    return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
}

static uint32_t cp_count(const char *p, uint64_t n) {
    uint32_t k = 0;
    for (uint64_t i = 0; i < n; i += (uint64_t)utf8_len((uint8_t)p[i])) k++;
    return k;
}

static int cmp_local(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    return 0;
}

static int cmp_global_asc(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    if (x->nl != y->nl) return x->nl < y->nl ? -1 : 1;
    if (x->nr != y->nr) return x->nr < y->nr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_global_desc(const void *a, const void *b) {
    const merge_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->nl != y->nl) return x->nl > y->nl ? -1 : 1;
    if (x->nr != y->nr) return x->nr > y->nr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* Python's reverse sort stays stable */
}

/* Merges implied by a vocabulary, the way transformers' generate_merges does it: every split of
 * every token into two vocabulary tokens, ordered per token by (left id, right id), then over all
 * by (score, left length, right length) — descending when scores are given (SentencePiece), by
 * token id ascending otherwise. *out: free(). */
static ig_status derive_merges(const gguf_str *toks, int32_t n, const tok_map *m,
                               const tok_map *first, const gguf_kv *scores, merge_cand **out, int64_t *n_out,
                               ig_err *err) {
    int64_t cap = 1024, cnt = 0;
    merge_cand *v = malloc((size_t)cap * sizeof *v);
    if (!v) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        const gguf_str t = toks[i];
        /* dict order: a repeated token is visited once, at its first position, with the id
           (and score) of its last */
        if (map_get(first, t.p, t.n) != i) continue;
        int32_t last_id = map_get(m, t.p, t.n);
        double score = scores ? gguf_arr_float(scores, (uint64_t)last_id) : (double)last_id;
        int64_t start = cnt;
        for (uint64_t off = (uint64_t)utf8_len((uint8_t)t.p[0]); off < t.n;
             off += (uint64_t)utf8_len((uint8_t)t.p[off])) {
            int32_t l = map_get(m, t.p, off), r = map_get(m, t.p + off, t.n - off);
            if (l < 0 || r < 0) continue;
            if (cnt == cap) {
                cap *= 2;
                merge_cand *nv = realloc(v, (size_t)cap * sizeof *nv);
                if (!nv) {
                    free(v);
                    return ig_fail(err, IG_ERR_NOMEM, "out of memory");
                }
                v = nv;
            }
            v[cnt++] = (merge_cand){l, r, cp_count(t.p, off), cp_count(t.p + off, t.n - off),
                                    (uint32_t)off, i, score, 0};
        }
        if (cnt - start > 1) qsort(v + start, (size_t)(cnt - start), sizeof *v, cmp_local);
    }
    for (int64_t i = 0; i < cnt; i++) v[i].seq = (uint64_t)i;
    qsort(v, (size_t)cnt, sizeof *v, scores ? cmp_global_desc : cmp_global_asc);
    *out = v;
    *n_out = cnt;
    return IG_OK;
}

/* GPT-2 byte-to-unicode table: printable bytes map to themselves, the rest to U+0100... */
static void byte_alphabet(uint32_t cp_of[256]) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp_of[b] = keep ? (uint32_t)b : next++;
    }
}

static int in_alphabet(uint32_t cp) {
    return (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 323);
}

/* Decodes one UTF-8 code point; returns its length, 0 when invalid. */
static int utf8_dec(const uint8_t *p, uint64_t n, uint32_t *cp) {
    int len = utf8_len(p[0]);
    if (p[0] >= 0x80 && len == 1) return 0;
    if ((uint64_t)len > n) return 0;
    uint32_t c = len == 1 ? p[0] : len == 2 ? p[0] & 0x1f : len == 3 ? p[0] & 0x0f : p[0] & 0x07;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    *cp = c;
    return len;
}

static size_t utf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    o[0] = (char)(0xe0 | cp >> 12);
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* 1 if every code point of s is in the byte-level alphabet. */
static int all_in_alphabet(gguf_str s) {
    uint64_t i = 0;
    while (i < s.n) {
        uint32_t cp;
        int k = utf8_dec((const uint8_t *)s.p + i, s.n - i, &cp);
        if (!k || !in_alphabet(cp)) return 0;
        i += (uint64_t)k;
    }
    return 1;
}

/* NUL-terminated copy of s; byte-level respelling when `respell` (each byte -> its alphabet
 * character). free(). */
static char *tok_cstr(gguf_str s, int respell, const uint32_t *cp_of) {
    char *o = malloc(respell ? s.n * 2 + 1 : s.n + 1), *q = o;
    if (!o) return NULL;
    if (!respell) {
        memcpy(o, s.p, s.n);
        o[s.n] = 0;
        return o;
    }
    for (uint64_t i = 0; i < s.n; i++) q += utf8_enc(cp_of[(uint8_t)s.p[i]], q);
    *q = 0;
    return o;
}

/* Split regexes per tokenizer.ggml.pre (from transformers' GGUF tokenizer mapping and the
 * models' tokenizer.json files). NULL regex: the GPT-2 pattern built into ByteLevel. */
static const char *const LLAMA3_SPLIT =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const QWEN2_SPLIT =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const TEKKEN_SPLIT =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const GPT4O_SPLIT =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const struct { const char *pre; const char *const *re; } pre_splits[] = {
    {"llama3", &LLAMA3_SPLIT}, {"llama-v3", &LLAMA3_SPLIT}, {"llama-bpe", &LLAMA3_SPLIT},
    {"falcon3", &LLAMA3_SPLIT}, {"pixtral", &LLAMA3_SPLIT}, {"dbrx", &LLAMA3_SPLIT},
    {"smaug-bpe", &LLAMA3_SPLIT}, {"tekken", &TEKKEN_SPLIT}, {"qwen2", &QWEN2_SPLIT},
    {"deepseek-r1-qwen", &QWEN2_SPLIT}, {"megrez", &QWEN2_SPLIT}, {"gpt-4o", &GPT4O_SPLIT},
    {"llama4", &GPT4O_SPLIT},
};

static cJSON *byte_level(int add_prefix_space, int trim_offsets, int use_regex) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space);
    cJSON_AddBoolToObject(o, "trim_offsets", trim_offsets);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

static cJSON *pre_tokenizer_for(gguf_str pre) {
    for (size_t i = 0; i < sizeof pre_splits / sizeof pre_splits[0]; i++) {
        if (!gguf_str_eq(pre, pre_splits[i].pre)) continue;
        cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *sp = cJSON_CreateObject(),
              *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddStringToObject(sp, "type", "Split");
        cJSON_AddStringToObject(pat, "Regex", *pre_splits[i].re);
        cJSON_AddItemToObject(sp, "pattern", pat);
        cJSON_AddStringToObject(sp, "behavior", "Isolated");
        cJSON_AddBoolToObject(sp, "invert", 0);
        cJSON_AddItemToArray(arr, sp);
        cJSON_AddItemToArray(arr, byte_level(0, 1, 0));
        cJSON_AddItemToObject(seq, "pretokenizers", arr);
        return seq;
    }
    if (gguf_str_eq(pre, "smollm")) {
        /* SmolLM / SmolLM2's own tokenizer.json: digits one by one, then GPT-2 byte level */
        cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *dg = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON_AddStringToObject(dg, "type", "Digits");
        cJSON_AddBoolToObject(dg, "individual_digits", 1);
        cJSON_AddItemToArray(arr, dg);
        cJSON_AddItemToArray(arr, byte_level(0, 1, 1));
        cJSON_AddItemToObject(seq, "pretokenizers", arr);
        return seq;
    }
    /* "default", "gpt2", absent, and names without a known pattern: GPT-2's regex, as
       transformers does */
    return byte_level(0, 1, 1);
}

static cJSON *template_processing(const char *bos, int32_t bos_id, const char *eos, int32_t eos_id) {
    cJSON *tp = cJSON_CreateObject(), *single = cJSON_CreateArray(), *pair = cJSON_CreateArray(),
          *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(tp, "type", "TemplateProcessing");
    for (int p = 0; p < 2; p++) {
        cJSON *arr = p ? pair : single;
        for (int seg = 0; seg <= p; seg++) {
            const char *names[3] = {bos, seg ? "B" : "A", eos};
            for (int k = 0; k < 3; k++) {
                if (!names[k]) continue;
                cJSON *e = cJSON_CreateObject(), *in = cJSON_CreateObject();
                cJSON_AddStringToObject(in, "id", names[k]);
                cJSON_AddNumberToObject(in, "type_id", seg);
                cJSON_AddItemToObject(e, k == 1 ? "Sequence" : "SpecialToken", in);
                cJSON_AddItemToArray(arr, e);
            }
        }
    }
    cJSON_AddItemToObject(tp, "single", single);
    cJSON_AddItemToObject(tp, "pair", pair);
    for (int k = 0; k < 2; k++) {
        const char *t = k ? eos : bos;
        if (!t || cJSON_GetObjectItemCaseSensitive(sp, t)) continue;
        cJSON *o = cJSON_CreateObject(), *ids = cJSON_CreateArray(), *ts = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "id", t);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(k ? eos_id : bos_id));
        cJSON_AddItemToArray(ts, cJSON_CreateString(t));
        cJSON_AddItemToObject(o, "ids", ids);
        cJSON_AddItemToObject(o, "tokens", ts);
        cJSON_AddItemToObject(sp, t, o);
    }
    cJSON_AddItemToObject(tp, "special_tokens", sp);
    return tp;
}

static ig_status write_json(const char *dir, const char *name, cJSON *j, ig_err *err) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = cJSON_Print(j);
    if (!s) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory while formatting", path);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(s);
        return ig_fail(err, IG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    size_t n = strlen(s);
    int bad = fwrite(s, 1, n, fp) != n || fputc('\n', fp) == EOF;
    bad |= fclose(fp) != 0;
    free(s);
    if (bad) return ig_fail(err, IG_ERR_IO, "%s: write failed", path);
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

ig_status ir_gguf_write_tokenizer(const char *gguf_path, const char *out_dir, ig_err *err) {
    gguf_file *f = NULL;
    ig_status st = gguf_open(gguf_path, &f, err);
    if (st) return st;
    cJSON *tj = NULL, *cfg = NULL;
    char **cstr = NULL;
    int32_t n = 0;
    tok_map map = {0}, map_first = {0};
    merge_cand *mc = NULL;
    int64_t n_mc = 0;
    gguf_str model, pre = {"", 0};
    const gguf_kv *toks, *types = NULL, *scores = NULL, *merges = NULL;
    uint32_t cp_of[256];
    byte_alphabet(cp_of);

    if ((st = gguf_get_str(f, "tokenizer.ggml.model", &model, err)) ||
        (st = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, err)))
        goto done;
    int bpe = gguf_str_eq(model, "gpt2"), spm = gguf_str_eq(model, "llama");
    if (!bpe && !spm) {
        st = ig_fail(err, IG_ERR_UNSUPPORTED,
                     "%s: tokenizer.ggml.model \"%.*s\" is not supported (gpt2, llama are)",
                     gguf_path, (int)(model.n > 32 ? 32 : model.n), model.p);
        goto done;
    }
    if (toks->arr_n == 0 || toks->arr_n > INT32_MAX) {
        st = ig_fail(err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", gguf_path,
                     (unsigned long long)toks->arr_n);
        goto done;
    }
    n = (int32_t)toks->arr_n;
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && (st = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err)))
        goto done;
    if (gguf_find_kv(f, "tokenizer.ggml.token_type")) {
        if ((st = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_COUNT, &types, err))) goto done;
        if (types->arr_n != toks->arr_n || types->arr_type == GGUF_VT_STRING ||
            types->arr_type == GGUF_VT_ARRAY) {
            st = ig_fail(err, IG_ERR_FORMAT,
                         "%s: tokenizer.ggml.token_type has %llu entries of %s for %d tokens",
                         gguf_path, (unsigned long long)types->arr_n,
                         gguf_vtype_name(types->arr_type), n);
            goto done;
        }
    }
    if (gguf_find_kv(f, "tokenizer.ggml.merges") &&
        (st = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, &merges, err)))
        goto done;
    if (spm || !merges) {
        if (spm) {
            if ((st = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_COUNT, &scores, err))) goto done;
            if (scores->arr_n != toks->arr_n || (scores->arr_type != GGUF_VT_FLOAT32 &&
                                                 scores->arr_type != GGUF_VT_FLOAT64)) {
                st = ig_fail(err, IG_ERR_FORMAT,
                             "%s: tokenizer.ggml.scores has %llu entries of %s for %d tokens",
                             gguf_path, (unsigned long long)scores->arr_n,
                             gguf_vtype_name(scores->arr_type), n);
                goto done;
            }
        }
    }

    /* vocabulary strings as the tokenizer.json spells them */
    const gguf_str *ts = toks->arr_strs;
    cstr = calloc((size_t)n, sizeof *cstr);
    if (!cstr) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        if (memchr(ts[i].p, 0, ts[i].n)) {
            st = ig_fail(err, IG_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] contains a NUL byte",
                         gguf_path, i);
            goto done;
        }
        int respell = bpe && !all_in_alphabet(ts[i]);
        if (!(cstr[i] = tok_cstr(ts[i], respell, cp_of))) {
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            goto done;
        }
    }

    int32_t bos = opt_id(f, "tokenizer.ggml.bos_token_id", n), eos = opt_id(f, "tokenizer.ggml.eos_token_id", n),
            unk = opt_id(f, "tokenizer.ggml.unknown_token_id", n),
            pad = opt_id(f, "tokenizer.ggml.padding_token_id", n);
    int add_bos = opt_bool(f, "tokenizer.ggml.add_bos_token", spm), add_eos = opt_bool(f, "tokenizer.ggml.add_eos_token", 0);

    tj = cJSON_CreateObject();
    cJSON_AddStringToObject(tj, "version", "1.0");
    cJSON_AddNullToObject(tj, "truncation");
    cJSON_AddNullToObject(tj, "padding");

    /* added tokens: control (3) and unknown (2) as special, user-defined (4) as plain; the
       named special tokens too */
    cJSON *added = cJSON_AddArrayToObject(tj, "added_tokens");
    for (int32_t i = 0; i < n; i++) {
        int64_t ty = types ? gguf_arr_int(types, (uint64_t)i) : 1;
        int special = ty == 3 || (spm && ty == 2) || i == bos || i == eos || i == unk || i == pad;
        int plain = ty == 4;
        if (bpe && special && !all_in_alphabet(ts[i])) special = 0; /* llama.cpp mislabel */
        if (bpe && plain && !all_in_alphabet(ts[i])) plain = 0;
        if (!special && !plain) continue;
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", cstr[i]);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", special);
        cJSON_AddItemToArray(added, a);
    }

    const char *bos_s = bos >= 0 ? cstr[bos] : NULL, *eos_s = eos >= 0 ? cstr[eos] : NULL;
    int add_prefix = opt_bool(f, "tokenizer.ggml.add_space_prefix", 1);
    if (bpe) {
        cJSON_AddNullToObject(tj, "normalizer");
        cJSON_AddItemToObject(tj, "pre_tokenizer", pre_tokenizer_for(pre));
        cJSON *bl = byte_level(1, 0, 1);
        if ((add_bos && bos_s) || (add_eos && eos_s)) {
            cJSON *seq = cJSON_CreateObject(), *arr = cJSON_CreateArray();
            cJSON_AddStringToObject(seq, "type", "Sequence");
            cJSON_AddItemToArray(arr, bl);
            cJSON_AddItemToArray(arr, template_processing(add_bos ? bos_s : NULL, bos,
                                                          add_eos ? eos_s : NULL, eos));
            cJSON_AddItemToObject(seq, "processors", arr);
            cJSON_AddItemToObject(tj, "post_processor", seq);
        } else {
            cJSON_AddItemToObject(tj, "post_processor", bl);
        }
        cJSON_AddItemToObject(tj, "decoder", byte_level(1, 1, 1));
    } else {
        /* the Llama-2 tokenizer.json shape: prefix space and spaces as U+2581 by normalizer */
        if (add_prefix) {
            cJSON *nz = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *pp = cJSON_CreateObject(),
                  *rp = cJSON_CreateObject(), *pat = cJSON_CreateObject();
            cJSON_AddStringToObject(nz, "type", "Sequence");
            cJSON_AddStringToObject(pp, "type", "Prepend");
            cJSON_AddStringToObject(pp, "prepend", "\xe2\x96\x81");
            cJSON_AddItemToArray(arr, pp);
            cJSON_AddStringToObject(rp, "type", "Replace");
            cJSON_AddStringToObject(pat, "String", " ");
            cJSON_AddItemToObject(rp, "pattern", pat);
            cJSON_AddStringToObject(rp, "content", "\xe2\x96\x81");
            cJSON_AddItemToArray(arr, rp);
            cJSON_AddItemToObject(nz, "normalizers", arr);
            cJSON_AddItemToObject(tj, "normalizer", nz);
        } else {
            cJSON *rp = cJSON_CreateObject(), *pat = cJSON_CreateObject();
            cJSON_AddStringToObject(rp, "type", "Replace");
            cJSON_AddStringToObject(pat, "String", " ");
            cJSON_AddItemToObject(rp, "pattern", pat);
            cJSON_AddStringToObject(rp, "content", "\xe2\x96\x81");
            cJSON_AddItemToObject(tj, "normalizer", rp);
        }
        cJSON_AddNullToObject(tj, "pre_tokenizer");
        if ((add_bos && bos_s) || (add_eos && eos_s))
            cJSON_AddItemToObject(tj, "post_processor",
                                  template_processing(add_bos ? bos_s : NULL, bos,
                                                      add_eos ? eos_s : NULL, eos));
        else
            cJSON_AddNullToObject(tj, "post_processor");
        cJSON *dec = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *rp = cJSON_CreateObject(),
              *pat = cJSON_CreateObject(), *bf = cJSON_CreateObject(), *fu = cJSON_CreateObject();
        cJSON_AddStringToObject(dec, "type", "Sequence");
        cJSON_AddStringToObject(rp, "type", "Replace");
        cJSON_AddStringToObject(pat, "String", "\xe2\x96\x81");
        cJSON_AddItemToObject(rp, "pattern", pat);
        cJSON_AddStringToObject(rp, "content", " ");
        cJSON_AddItemToArray(arr, rp);
        cJSON_AddStringToObject(bf, "type", "ByteFallback");
        cJSON_AddItemToArray(arr, bf);
        cJSON_AddStringToObject(fu, "type", "Fuse");
        cJSON_AddItemToArray(arr, fu);
        if (add_prefix) {
            cJSON *sp = cJSON_CreateObject();
            cJSON_AddStringToObject(sp, "type", "Strip");
            cJSON_AddStringToObject(sp, "content", " ");
            cJSON_AddNumberToObject(sp, "start", 1);
            cJSON_AddNumberToObject(sp, "stop", 0);
            cJSON_AddItemToArray(arr, sp);
        }
        cJSON_AddItemToObject(dec, "decoders", arr);
        cJSON_AddItemToObject(tj, "decoder", dec);
    }

    cJSON *mod = cJSON_AddObjectToObject(tj, "model");
    cJSON_AddStringToObject(mod, "type", "BPE");
    cJSON_AddNullToObject(mod, "dropout");
    if (spm && unk >= 0) cJSON_AddStringToObject(mod, "unk_token", cstr[unk]);
    else cJSON_AddNullToObject(mod, "unk_token");
    if (spm) {
        cJSON_AddNullToObject(mod, "continuing_subword_prefix");
        cJSON_AddNullToObject(mod, "end_of_word_suffix");
    } else {
        cJSON_AddStringToObject(mod, "continuing_subword_prefix", "");
        cJSON_AddStringToObject(mod, "end_of_word_suffix", "");
    }
    cJSON_AddBoolToObject(mod, "fuse_unk", spm);
    cJSON_AddBoolToObject(mod, "byte_fallback", spm);
    cJSON_AddBoolToObject(mod, "ignore_merges", 0);
    cJSON *voc = cJSON_AddObjectToObject(mod, "vocab");
    for (int32_t i = 0; i < n; i++) cJSON_AddItemToObject(voc, cstr[i], cJSON_CreateNumber(i));
    cJSON *mj = cJSON_AddArrayToObject(mod, "merges");
    if (merges) {
        for (uint64_t i = 0; i < merges->arr_n; i++) {
            gguf_str s = merges->arr_strs[i];
            const char *sp = memchr(s.p, ' ', s.n);
            if (!sp || memchr(s.p, 0, s.n)) {
                st = ig_fail(err, IG_ERR_FORMAT,
                             "%s: tokenizer.ggml.merges[%llu] is not \"left right\"", gguf_path,
                             (unsigned long long)i);
                goto done;
            }
            char *c = tok_cstr(s, 0, cp_of);
            if (!c) {
                st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
                goto done;
            }
            cJSON_AddItemToArray(mj, cJSON_CreateString(c));
            free(c);
        }
    } else {
        /* no merges in the file: recover them from the vocabulary (scores for SentencePiece) */
        gguf_str *sp_toks = malloc((size_t)n * sizeof *sp_toks);
        if (!sp_toks) {
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int32_t i = 0; i < n; i++) sp_toks[i] = (gguf_str){cstr[i], strlen(cstr[i])};
        if (!map_init(&map, sp_toks, n, 0) || !map_init(&map_first, sp_toks, n, 1)) {
            free(sp_toks);
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            goto done;
        }
        st = derive_merges(sp_toks, n, &map, &map_first, scores, &mc, &n_mc, err);
        if (!st) {
            for (int64_t i = 0; i < n_mc; i++) {
                const merge_cand *m = &mc[i];
                size_t ll = strlen(cstr[m->l]), lr = strlen(cstr[m->r]);
                char *c = malloc(ll + lr + 2);
                if (!c) {
                    st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(c, cstr[m->l], ll);
                c[ll] = ' ';
                memcpy(c + ll + 1, cstr[m->r], lr + 1);
                cJSON_AddItemToArray(mj, cJSON_CreateString(c));
                free(c);
            }
        }
        free(sp_toks);
        if (st) goto done;
    }
    if ((st = write_json(out_dir, "tokenizer.json", tj, err))) goto done;

    cfg = cJSON_CreateObject();
    cJSON_AddBoolToObject(cfg, "add_bos_token", add_bos);
    cJSON_AddBoolToObject(cfg, "add_eos_token", add_eos);
    if (bpe) cJSON_AddBoolToObject(cfg, "add_prefix_space", 0);
    const struct { const char *k; int32_t id; } named[] = {
        {"bos_token", bos}, {"eos_token", eos}, {"unk_token", unk}, {"pad_token", pad}};
    for (int k = 0; k < 4; k++) {
        if (named[k].id >= 0) cJSON_AddStringToObject(cfg, named[k].k, cstr[named[k].id]);
        else cJSON_AddNullToObject(cfg, named[k].k);
    }
    const gguf_kv *ct = gguf_find_kv(f, "tokenizer.chat_template");
    if (ct && ct->type == GGUF_VT_STRING) {
        char *t = tok_cstr(ct->s, 0, cp_of);
        if (!t) {
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            goto done;
        }
        cJSON_AddStringToObject(cfg, "chat_template", t);
        free(t);
    }
    cJSON_AddBoolToObject(cfg, "clean_up_tokenization_spaces", 0);
    const gguf_kv *ctx = gguf_find_kv(f, "llama.context_length");
    if (ctx && ctx->type != GGUF_VT_STRING && ctx->type != GGUF_VT_ARRAY)
        cJSON_AddNumberToObject(cfg, "model_max_length", (double)ctx->u);
    cJSON_AddStringToObject(cfg, "tokenizer_class", bpe ? "GPT2Tokenizer" : "LlamaTokenizer");
    st = write_json(out_dir, "tokenizer_config.json", cfg, err);

done:
    cJSON_Delete(tj);
    cJSON_Delete(cfg);
    if (cstr)
        for (int32_t i = 0; i < n; i++) free(cstr[i]);
    free(cstr);
    free(map.slot);
    free(map_first.slot);
    free(mc);
    gguf_close(f);
    return st;
}
