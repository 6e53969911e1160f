/* cg_common.c — what every code generator needs from a lowered graph: the layer layout (one
 * template layer, the weights each layer reads), the weight tables and the RoPE frequencies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

ig_status cg_analyze(const ir_graph *g, const pk_plan *plan, cg_layout *lay, ig_err *err) {
    const ir_hparams *hp = &g->hp;
    memset(lay, 0, sizeof *lay);
    lay->first_layer = lay->last_layer = -1;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].layer >= 0) {
            if (lay->first_layer < 0) lay->first_layer = i;
            lay->last_layer = i;
        }
    if (lay->first_layer < 0 || hp->n_layers < 1) return ig_fail(err, IG_ERR_INVALID, "codegen: graph has no decoder layers");
    int32_t span = lay->last_layer - lay->first_layer + 1;
    lay->per_layer = span / hp->n_layers;
    if (lay->per_layer * hp->n_layers != span) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: layers have different node counts");
    for (int32_t L = 0; L < hp->n_layers; L++)
        for (int32_t j = 0; j < lay->per_layer; j++) {
            const ir_node *a = &g->nodes[lay->first_layer + j], *b = &g->nodes[lay->first_layer + L * lay->per_layer + j];
            if (a->op != b->op || b->layer != L || a->epi != b->epi)
                return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: layer %d differs from layer 0 at node %d (%s vs %s)", L, j,
                               ir_op_name(b->op), ir_op_name(a->op));
            for (int s = 0; s < IR_MAX_IN; s++) {
                int32_t ta = a->in[s], tb = b->in[s];
                if ((ta < 0) != (tb < 0)) goto mismatch;
                if (ta < 0 || g->tensors[ta].kind != IR_TENSOR_WEIGHT) continue;
                if (g->tensors[ta].shape[0] != g->tensors[tb].shape[0] || g->tensors[ta].shape[1] != g->tensors[tb].shape[1] ||
                    pk_find(plan, tb) < 0)
                    goto mismatch;
                const pk_entry *ea = &plan->e[pk_find(plan, ta)], *eb = &plan->e[pk_find(plan, tb)];
                if (ea->dtype != eb->dtype || ea->group != eb->group)
                    return ig_fail(err, IG_ERR_UNSUPPORTED,
                                   "codegen: %s is stored as %s but layer 0's as %s: layers share kernels, so quantize or "
                                   "keep a matrix in every layer (--quant-skip without a layer number)",
                                   g->tensors[tb].name, cg_format_of(eb->dtype)->name, cg_format_of(ea->dtype)->name);
            }
            continue;
        mismatch:
            return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: layer %d's weights differ in shape from layer 0's (node %s)", L,
                           ir_op_name(a->op));
        }
    for (int32_t j = 0; j < lay->per_layer; j++)
        for (int s = 0; s < IR_MAX_IN; s++) {
            int32_t ti = g->nodes[lay->first_layer + j].in[s];
            if (ti < 0 || g->tensors[ti].kind != IR_TENSOR_WEIGHT) continue;
            if (lay->n_fld == 32) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: more than 32 weights per layer");
            lay->fld_node[lay->n_fld] = j;
            lay->fld_slot[lay->n_fld] = s;
            lay->n_fld++;
        }
    return IG_OK;
}

void cg_weight_ref(const pk_plan *plan, const cg_layout *lay, int in_layer, int32_t node, int slot,
                   int32_t tensor, char *buf, size_t cap) {
    if (in_layer) {
        int f = 0;
        while (f < lay->n_fld && !(lay->fld_node[f] == node - lay->first_layer && lay->fld_slot[f] == slot)) f++;
        snprintf(buf, cap, "W(lw[%d])", f);
    } else {
        snprintf(buf, cap, "W(%d)", pk_find(plan, tensor));
    }
}

void cg_emit_weight_list(FILE *out, const pk_plan *plan) {
    fprintf(out, "\n/* ---- packed weights (weights.bin; offsets from the compiler's plan) */\n"
                 "static const ig_weight_info weights[%d] = {\n", plan->n);
    for (int32_t i = 0; i < plan->n; i++)
        fprintf(out, "    {\"%s\", %lluull, %lluull},\n", plan->e[i].name, (unsigned long long)plan->e[i].offset,
                (unsigned long long)plan->e[i].nbytes);
    fprintf(out, "};\n");
}

void cg_emit_layer_table(FILE *out, const ir_graph *g, const pk_plan *plan, const cg_layout *lay) {
    fprintf(out, "/* per layer: index into weights[] of each weight the layer reads, in order:");
    for (int f = 0; f < lay->n_fld; f++) {
        const ir_node *n = &g->nodes[lay->first_layer + lay->fld_node[f]];
        const char *nm = g->tensors[n->in[lay->fld_slot[f]]].name;
        /* drop "model.layers.N." / "layers.N." so the comment names the role */
        const char *d = strstr(nm, "layers.");
        if (d) {
            d = strchr(d + 7, '.');
            nm = d ? d + 1 : nm;
        }
        fprintf(out, "%s %d=%s", f ? "," : "", f, nm);
    }
    fprintf(out, " */\nstatic const int32_t layer_weights[N_LAYERS][%d] = {\n", lay->n_fld);
    for (int32_t L = 0; L < g->hp.n_layers; L++) {
        fprintf(out, "    {");
        for (int f = 0; f < lay->n_fld; f++)
            fprintf(out, "%s%d", f ? ", " : "",
                    pk_find(plan, g->nodes[lay->first_layer + L * lay->per_layer + lay->fld_node[f]].in[lay->fld_slot[f]]));
        fprintf(out, "},\n");
    }
    fprintf(out, "};\n");
}

static void emit_freqs(FILE *out, const char *name, const double *inv, int n) {
    fprintf(out, "static const double %s[HEAD_DIM / 2] = {", name);
    for (int i = 0; i < n; i++) fprintf(out, "%s%.17g", i == 0 ? "\n    " : i % 4 ? ", " : ",\n    ", inv[i]);
    fprintf(out, "};\n");
}

ig_status cg_emit_rope_table(FILE *out, const ir_hparams *hp, ig_err *err) {
    double inv[1024];
    int D = hp->head_dim, R = hp->rope_dim ? hp->rope_dim : D;
    if (D / 2 > 1024) return ig_fail(err, IG_ERR_UNSUPPORTED, "codegen: head_dim %d too large", D);
    cg_rope_inv_freq(hp, inv);
    fprintf(out, "\n/* RoPE inverse frequencies (theta %g, scaling %s", hp->rope_theta,
            hp->rope_type == IR_ROPE_LLAMA3     ? "llama3"
            : hp->rope_type == IR_ROPE_LINEAR   ? "linear"
            : hp->rope_type == IR_ROPE_LONGROPE ? "longrope (short factors)"
                                                : "none");
    if (R != D) fprintf(out, "; rotary on the first %d of %d dims, the rest 0", R, D);
    fprintf(out, ") */\n");
    emit_freqs(out, "rope_inv_freq", inv, D / 2);
    if (hp->rope_theta_local > 0) { /* sliding-window layers: their own theta, no scaling */
        ir_hparams lh = *hp;
        lh.rope_theta = hp->rope_theta_local;
        lh.rope_type = IR_ROPE_DEFAULT;
        cg_rope_inv_freq(&lh, inv);
        fprintf(out, "/* RoPE of the sliding-window layers (theta %g) */\n", hp->rope_theta_local);
        emit_freqs(out, "rope_inv_freq_local", inv, D / 2);
    }
    return IG_OK;
}

void cg_rope_inv_freq(const ir_hparams *hp, double *inv) {
    int D = hp->rope_dim ? hp->rope_dim : hp->head_dim; /* partial rotary: frequencies of rope_dim */
    for (int i = D / 2; i < hp->head_dim / 2; i++) inv[i] = 0.0;
    for (int i = 0; i < D / 2; i++) {
        double f = 1.0 / pow(hp->rope_theta, (2.0 * i) / D);
        if (hp->rope_type == IR_ROPE_LINEAR) {
            f /= hp->rope_factor;
        } else if (hp->rope_type == IR_ROPE_LONGROPE) {
            f /= i < hp->rope_n_ext ? hp->rope_ext[i] : 1.0; /* Phi-3's short_factor */
        } else if (hp->rope_type == IR_ROPE_LLAMA3) {
            /* Llama 3.1 scaling: keep high frequencies, divide low ones by factor, blend between */
            double old = hp->rope_orig_max, lo = hp->rope_low_freq_factor, hi = hp->rope_high_freq_factor,
                   fac = hp->rope_factor;
            double wavelen = 2.0 * M_PI / f;
            double lo_wl = old / lo, hi_wl = old / hi;
            if (wavelen > lo_wl) {
                f = f / fac;
            } else if (wavelen >= hi_wl) {
                double smooth = (old / wavelen - lo) / (hi - lo);
                f = (1.0 - smooth) * f / fac + smooth * f;
            }
        }
        inv[i] = f;
    }
}

void cg_act_ident(const ir_graph *g, int32_t t, char *buf, size_t cap) {
    const char *n = g->tensors[t].name;
    if (!strncmp(n, "layers.", 7)) {
        const char *d = strchr(n + 7, '.');
        if (d) n = d + 1;
    }
    size_t j = (size_t)snprintf(buf, cap, "a_");
    for (; *n && j + 1 < cap; n++)
        buf[j++] = (char)((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ? *n : '_');
    buf[j] = 0;
}

const char *cg_node_label(const ir_graph *g, int32_t t, char *buf, size_t cap) {
    const char *n = g->tensors[t].name;
    /* inside the layer loop a comment names the tensor of layer l, not of layer 0 */
    if (!strncmp(n, "layers.", 7) && g->tensors[t].layer >= 0) {
        const char *d = strchr(n + 7, '.');
        if (d) {
            snprintf(buf, cap, "layers.l.%s", d + 1);
            return buf;
        }
    }
    snprintf(buf, cap, "%s", n);
    return buf;
}

void cg_emit_shape_defines(FILE *out, const ir_hparams *hp, int32_t page_size, uint64_t kv_layer_page_bytes) {
    fprintf(out,
            "#define N_LAYERS %d\n#define HIDDEN %d\n#define N_HEADS %d\n#define N_KV_HEADS %d\n"
            "#define HEAD_DIM %d\n#define INTERMEDIATE %d\n#define VOCAB %d\n#define MAX_CONTEXT %d\n"
            "#define PAGE_SIZE %d\n#define KV_LAYER_PAGE_BYTES %lluull\n"
            "#define KV_PAGE_BYTES (KV_LAYER_PAGE_BYTES * N_LAYERS)\n",
            hp->n_layers, hp->hidden, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->intermediate, hp->vocab,
            hp->max_context, page_size, (unsigned long long)kv_layer_page_bytes);
    if (hp->tp > 1)
        fprintf(out, "/* tensor parallel: this code runs one rank's shard of %d; heads, KV heads and intermediate above\n"
                     " * are one rank's, VOCAB the model's, of which a rank holds TP_VOCAB rows (the last one padded) */\n"
                     "#define TP_RANKS %d\n#define TP_VOCAB %d\n",
                hp->tp, hp->tp, hp->tp_vocab);
}

static const char *dtype_macro(ig_dtype d) {
    switch (d) {
    case IG_DTYPE_BF16: return "IG_DTYPE_BF16";
    case IG_DTYPE_F16: return "IG_DTYPE_F16";
    case IG_DTYPE_KV8: return "IG_DTYPE_KV8";
    case IG_DTYPE_KV4: return "IG_DTYPE_KV4";
    case IG_DTYPE_KVF8: return "IG_DTYPE_KVF8";
    default: return "IG_DTYPE_F32";
    }
}

void cg_emit_desc(FILE *out, const ir_hparams *hp, const char *target, const char *compiler_version,
                  uint32_t cpu_features, ig_dtype dtype, ig_dtype kv_dtype, int32_t n_weights,
                  const char *device_archs) {
    const char *dt = dtype_macro(dtype), *kvt = dtype_macro(kv_dtype);
    char cf[16] = "0";
    if (!device_archs) snprintf(cf, sizeof cf, "%uu", (unsigned)cpu_features);
    fprintf(out, "\nstatic const ig_model_desc desc = {\n"
                 "    .abi_version = IG_MODEL_ABI_VERSION,\n"
                 "    .arch = \"%s\",\n    .target = \"%s\",\n    .compiler_version = \"%s\",\n"
                 "    .cpu_features = %s,\n    .dtype = %s,\n    .kv_dtype = %s,\n"
                 "    .n_layers = N_LAYERS, .hidden = HIDDEN, .n_heads = N_HEADS, .n_kv_heads = N_KV_HEADS,\n"
                 "    .head_dim = HEAD_DIM, .intermediate = INTERMEDIATE, .vocab = VOCAB,\n"
                 "    .max_context = MAX_CONTEXT, .page_size = PAGE_SIZE,\n"
                 "    .kv_page_bytes = KV_PAGE_BYTES, .kv_layer_page_bytes = KV_LAYER_PAGE_BYTES,\n"
                 "    .n_weights = %d, .weights = weights,\n"
                 "    .tp = %d,\n",
            hp->arch, target, compiler_version, cf, dt, kvt, (int)n_weights, hp->tp > 1 ? hp->tp : 1);
    if (device_archs)
        fprintf(out, "    .device = IG_DEVICE_CUDA, .device_archs = \"%s\",\n"
                     "    .init = init, .fini = fini, .kv_page_copy = kv_page_copy,\n"
                     "    .workspace_bytes = workspace_bytes,\n    .forward = forward,\n"
                     "    .caps = IG_MODEL_CAP_SAMPLE | IG_MODEL_CAP_MASK,\n};\n\n",
                device_archs);
    else
        fprintf(out, "    .device = IG_DEVICE_CPU, .device_archs = \"\",\n"
                     "    .workspace_bytes = workspace_bytes,\n    .forward = forward,\n};\n\n");
    fprintf(out, "__attribute__((visibility(\"default\"))) const ig_model_desc *ig_model_entry(void) { return &desc; }\n");
}

/* ---- formats */

static const cg_format formats[] = {
    {IG_DTYPE_F32, "f32", 4, 0, "float", NULL, 1, 1, 0},
    {IG_DTYPE_BF16, "bf16", 2, 1, "uint16_t", NULL, 1, 1, 0},
    {IG_DTYPE_F16, "f16", 2, 1, "uint16_t", "IG_F16 1", 0, 1, 0},
    {IG_DTYPE_Q8C, "q8c", 0, 0, "int8_t", NULL, 1, 0, 8},
    {IG_DTYPE_Q4G, "q4g", 0, 0, "uint8_t", NULL, 1, 0, 4},
    {IG_DTYPE_Q8G, "q8g", 0, 0, "int8_t", NULL, 1, 0, 9},
    {IG_DTYPE_Q4K, "q4k", 0, 0, "uint8_t", NULL, 1, 0, 5},
    {IG_DTYPE_Q6K, "q6k", 0, 0, "uint8_t", NULL, 1, 0, 6},
    {IG_DTYPE_Q8A, "q8a", 0, 0, "int8_t", NULL, 1, 0, 10},
    {IG_DTYPE_Q4Z, "q4z", 0, 0, "uint8_t", NULL, 1, 0, 11},
    {IG_DTYPE_Q8Z, "q8z", 0, 0, "int8_t", NULL, 1, 0, 12},
    {IG_DTYPE_Q6S, "q6s", 0, 0, "uint8_t", NULL, 1, 0, 13},
    {IG_DTYPE_Q4I, "q4i", 0, 0, "uint8_t", NULL, 1, 0, 14},
    {IG_DTYPE_Q8I, "q8i", 0, 0, "int8_t", NULL, 1, 0, 15},
    {IG_DTYPE_Q6I, "q6i", 0, 0, "uint8_t", NULL, 1, 0, 16},
    {IG_DTYPE_Q8R, "q8r", 0, 0, "int8_t", NULL, 0, 1, 8},
    {IG_DTYPE_Q4R, "q4r", 0, 0, "uint8_t", NULL, 0, 1, 4},
    {IG_DTYPE_F8R, "f8r", 0, 0, "uint8_t", NULL, 0, 1, 8}, /* q8r's row bytes (wq 8), e4m3 codes */
};

const cg_format *cg_format_of(ig_dtype dt) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i].dtype == dt) return &formats[i];
    return NULL;
}

/* The KV formats. Quantized rows (templates/cpu/kv_quant.h) are rotated, then coded with an f16
 * scale and an 8-bit zero point per token and KV head (fp8: the zero point unused): D * bits / 8
 * + 3 bytes a row. */
static const cg_kv_format kv_formats[] = {
    {IG_DTYPE_F32, "f32", 4, 0, 0, 1, 1, NULL},
    {IG_DTYPE_BF16, "bf16", 2, 0, 0, 1, 1, NULL},
    {IG_DTYPE_F16, "f16", 2, 0, 0, 0, 1, NULL},
    {IG_DTYPE_KV8, "int8", 0, 8, 8, 1, 1,
     "rotated rows (random signs + Hadamard), asymmetric 8-bit codes per token and KV head, f16 scale, 8-bit zero point "
     "(templates/cpu/kv_quant.h)"},
    {IG_DTYPE_KV4, "uint4", 0, 4, 4, 1, 1,
     "rotated rows (random signs + Hadamard), asymmetric 4-bit codes per token and KV head, f16 scale, 8-bit zero point; "
     "keys delta-coded within a page (slot j > 0 holds K_j minus the reconstructed K_j-1), values absolute "
     "(templates/cpu/kv_quant.h)"},
    {IG_DTYPE_KVF8, "fp8", 0, 8, 0xe4, 1, 1,
     "rotated rows (random signs + Hadamard), e4m3fn codes (round to nearest even, saturating at 448) per token and "
     "KV head, f16 scale amax / 448, symmetric (the int8 layout, zero point byte 0) (templates/cpu/kv_quant.h)"},
};

const cg_kv_format *cg_kv_format_of(ig_dtype dt) {
    for (size_t i = 0; i < sizeof kv_formats / sizeof kv_formats[0]; i++)
        if (kv_formats[i].dtype == dt) return &kv_formats[i];
    return NULL;
}

const cg_kv_format *cg_kv_format_find(const char *name) {
    for (size_t i = 0; name && i < sizeof kv_formats / sizeof kv_formats[0]; i++)
        if (!strcmp(kv_formats[i].name, name)) return &kv_formats[i];
    return NULL;
}

const char *cg_kv_format_names(void) { return "f32, bf16, f16 (CUDA), int8, uint4, fp8"; }

uint64_t cg_kv_layer_page_bytes(const ir_hparams *hp, int32_t page_size, const cg_kv_format *f) {
    /* quantized: codes + f16 scale + 8-bit zero per row (templates/cpu/kv_quant.h) */
    uint64_t row = f->bits ? (uint64_t)hp->head_dim * f->bits / 8 + 3 : (uint64_t)hp->head_dim * f->bytes;
    return 2ull * hp->n_kv_heads * page_size * row;
}

/* ---- instances and kernel names */

/* Makes room for one more element of size sz in *v (n used, *cap allocated). 0 on failure. */
static int grow(void **v, int n, int *cap, size_t sz) {
    if (n < *cap) return 1;
    int nc = *cap ? 2 * *cap : 32;
    void *p = realloc(*v, sz * (size_t)nc);
    if (!p) return 0;
    *v = p, *cap = nc;
    return 1;
}

const char *cg_instance(cg_insts *s, FILE *out, const char *tpl, const char *prefix, const char *name_macro,
                        const char *params, const char *comment) {
    if (s->failed) return NULL;
    size_t kl = strlen(tpl) + strlen(name_macro) + strlen(params) + 3;
    char *key = malloc(kl);
    if (!key || !grow((void **)&s->v, s->n, &s->cap, sizeof s->v[0])) {
        free(key);
        s->failed = 1;
        return NULL;
    }
    snprintf(key, kl, "%s|%s|%s", tpl, name_macro, params); /* one template's entries share params */
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].key, key)) {
            free(key);
            return s->v[i].name;
        }
    struct cg_inst *k = &s->v[s->n++];
    k->key = key;
    snprintf(k->name, sizeof k->name, "%s", prefix);
    for (int i = 0; i < s->n - 1; i++) /* two shapes sharing a prefix: the later one is numbered */
        if (!strcmp(s->v[i].name, k->name)) {
            snprintf(k->name, sizeof k->name, "%s_v%d", prefix, s->n);
            break;
        }
    fprintf(out, "\n/* %s */\n#define %s %s\n%s#include \"%s\"\n", comment, name_macro, k->name, params, tpl);
    return k->name;
}

int cg_fn_index(cg_insts *s, const char *name) {
    if (!name || s->failed) return -1;
    for (int i = 0; i < s->n_fn; i++)
        if (!strcmp(s->fn[i], name)) return i;
    if (!grow((void **)&s->fn, s->n_fn, &s->cap_fn, sizeof s->fn[0])) {
        s->failed = 1;
        return -1;
    }
    snprintf(s->fn[s->n_fn], sizeof s->fn[0], "%s", name);
    return s->n_fn++;
}

void cg_insts_free(cg_insts *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i].key);
    free(s->v);
    free(s->fn);
    memset(s, 0, sizeof *s);
}

/* ---- activation buffers */

ig_status cg_bufs_init(cg_bufs *b, const ir_graph *g, ig_err *err) {
    memset(b, 0, sizeof *b);
    b->buf_of = malloc(sizeof(int32_t) * (size_t)(g->n_tensors > 0 ? g->n_tensors : 1));
    if (!b->buf_of) return ig_fail(err, IG_ERR_NOMEM, "codegen: out of memory");
    for (int32_t i = 0; i < g->n_tensors; i++) b->buf_of[i] = -1;
    return IG_OK;
}

int cg_buf_new(cg_bufs *b, const ir_graph *g, int32_t t, int64_t cols, int is16) {
    if (b->failed || !grow((void **)&b->v, b->n, &b->cap, sizeof b->v[0])) {
        b->failed = 1;
        return -1;
    }
    cg_buf *n = &b->v[b->n];
    n->cols = cols, n->is16 = is16;
    cg_act_ident(g, t, n->ident, sizeof n->ident);
    for (int q = 0; q < b->n; q++) /* two tensors of one name (a layer's and a global one) */
        if (!strcmp(b->v[q].ident, n->ident)) snprintf(n->ident + strlen(n->ident), 8, "_%d", b->n);
    b->buf_of[t] = b->n;
    return b->n++;
}

void cg_bufs_free(cg_bufs *b) {
    free(b->v);
    free(b->buf_of);
    memset(b, 0, sizeof *b);
}
