/* graph.c — building, checking and dumping the ignis model graph (see ir.h).
 *
 * The graph owns an arena: a chain of blocks from which every string and auxiliary allocation
 * of the graph is carved, so that ir_graph_free releases everything at once and passes never
 * track individual frees. The tensor and node arrays grow by doubling (they are the only
 * things that grow in place) and are malloc'd separately.
 *
 * The op tables (name, arity, fused) come from ops.def through the X-macro, so adding an op is
 * one line there.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ---- arena */

typedef struct ir_block {
    struct ir_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} ir_block;

struct ir_arena {
    ir_block *head;
};

enum { IR_ARENA_BLOCK = 64 * 1024 };

static void *arena_alloc(ir_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    ir_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > IR_ARENA_BLOCK ? n : IR_ARENA_BLOCK;
        ir_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        /* a big one-off allocation goes behind the current block so the current one keeps
         * serving small requests */
        if (b && n > IR_ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

ir_graph *ir_graph_new(void) {
    ir_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = calloc(1, sizeof *g->arena);
    if (!g->arena) {
        free(g);
        return NULL;
    }
    g->hp.bos_id = -1;
    g->hp.rope_factor = 1.0;
    return g;
}

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    if (g->arena) {
        ir_block *b = g->arena->head;
        while (b) {
            ir_block *n = b->next;
            free(b);
            b = n;
        }
        free(g->arena);
    }
    free(g->files);
    free(g->tensors);
    free(g->nodes);
    free(g);
}

void *ir_alloc(ir_graph *g, size_t n) { return arena_alloc(g->arena, n ? n : 1); }

char *ir_strdup(ir_graph *g, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = ir_alloc(g, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Returns the index of `path` in g->files, adding it if new; -1 when out of memory. */
int32_t ir_add_file(ir_graph *g, const char *path) {
    for (int32_t i = 0; i < g->n_files; i++)
        if (strcmp(g->files[i], path) == 0) return i;
    char **nf = realloc(g->files, (size_t)(g->n_files + 1) * sizeof *nf);
    if (!nf) return -1;
    g->files = nf;
    char *s = ir_strdup(g, path);
    if (!s) return -1;
    g->files[g->n_files] = s;
    return g->n_files++;
}

/* Copies *t (and its name into the arena); returns the new id, or -1 when out of memory. */
int32_t ir_add_tensor(ir_graph *g, const ir_tensor *t) {
    if (g->n_tensors == g->cap_tensors) {
        int32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
        ir_tensor *nt = realloc(g->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        g->tensors = nt;
        g->cap_tensors = cap;
    }
    ir_tensor *d = &g->tensors[g->n_tensors];
    *d = *t;
    d->id = g->n_tensors;
    d->name = ir_strdup(g, t->name ? t->name : "");
    if (!d->name) return -1;
    if (t->n_parts > 0 && t->parts) {
        if (t->n_parts > IR_MAX_PARTS || !(d->parts = ir_alloc(g, sizeof *d->parts * (size_t)t->n_parts))) return -1;
        memcpy(d->parts, t->parts, sizeof *d->parts * (size_t)t->n_parts);
    } else {
        d->parts = NULL;
    }
    return g->n_tensors++;
}

int32_t ir_add_merged_weight(ir_graph *g, const char *name, const int32_t *parts, int n, int interleave16) {
    const ir_tensor *p0 = &g->tensors[parts[0]];
    ir_tensor t = {0};
    t.name = (char *)name;
    t.kind = IR_TENSOR_WEIGHT;
    t.dtype = p0->dtype;
    t.rank = p0->rank;
    t.layer = p0->layer;
    t.src_file = -1;
    t.n_parts = n;
    t.parts = (int32_t *)parts;
    for (int i = 0; i < n; i++) t.shape[0] += g->tensors[parts[i]].shape[0];
    t.shape[1] = p0->rank == 2 ? p0->shape[1] : 0;
    t.interleave16 = interleave16;
    return ir_add_tensor(g, &t);
}

int32_t ir_add_act(ir_graph *g, const char *name, int64_t cols, int32_t layer) {
    ir_tensor t = {0};
    t.name = (char *)name;
    t.kind = IR_TENSOR_ACT;
    t.dtype = IG_DTYPE_F32;
    t.rank = 2;
    t.shape[0] = -1;
    t.shape[1] = cols;
    t.layer = layer;
    t.src_file = -1;
    return ir_add_tensor(g, &t);
}

/* Returns the new node (inputs -1, out -1), or NULL when out of memory. The pointer is valid
 * until the next ir_add_node. */
ir_node *ir_add_node(ir_graph *g, ir_op op, int32_t layer) {
    if (g->n_nodes == g->cap_nodes) {
        int32_t cap = g->cap_nodes ? g->cap_nodes * 2 : 128;
        ir_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return NULL;
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    ir_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->layer = layer;
    for (int i = 0; i < IR_MAX_IN; i++) n->in[i] = -1;
    n->out = -1;
    return n;
}

ir_tensor *ir_tensor_by_name(ir_graph *g, const char *name) {
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

/* ---- op tables */

static const char *const op_names[IR_OP_COUNT] = {
#define IR_OP(e, name, nin, fused) name,
#include "ops.def"
#undef IR_OP
};
static const int op_arity[IR_OP_COUNT] = {
#define IR_OP(e, name, nin, fused) nin,
#include "ops.def"
#undef IR_OP
};
static const int op_fused[IR_OP_COUNT] = {
#define IR_OP(e, name, nin, fused) fused,
#include "ops.def"
#undef IR_OP
};

const char *ir_op_name(ir_op op) {
    return (unsigned)op < IR_OP_COUNT ? op_names[op] : "?";
}
int ir_op_arity(ir_op op) { return (unsigned)op < IR_OP_COUNT ? op_arity[op] : 0; }
int ir_op_is_fused(ir_op op) { return (unsigned)op < IR_OP_COUNT ? op_fused[op] : 0; }

ir_op ir_op_from_name(const char *name) {
    if (!name) return IR_OP_COUNT;
    for (int i = 0; i < IR_OP_COUNT; i++)
        if (strcmp(op_names[i], name) == 0) return (ir_op)i;
    return IR_OP_COUNT;
}

/* Inputs an op cannot do without (the rest up to its arity are optional, -1 when absent). */
static int op_required_inputs(ir_op op) {
    switch (op) {
    case IR_OP_MATMUL: return 2;      /* bias optional */
    case IR_OP_NORM_MATMUL: return 3; /* bias optional */
    case IR_OP_ROPE_KV: return 1;     /* q_norm / k_norm optional */
    case IR_OP_MATMUL_EPI: return 2;  /* bias optional */
    case IR_OP_ALL_REDUCE: return 1;  /* residual optional */
    default: return ir_op_arity(op);
    }
}

const char *ir_stype_name(ir_stype t) {
    switch (t) {
    case IR_STYPE_F32: return "f32";
    case IR_STYPE_BF16: return "bf16";
    case IR_STYPE_F16: return "f16";
    case IR_STYPE_I32: return "i32";
    case IR_STYPE_GPTQ: return "gptq";
    case IR_STYPE_AWQ: return "awq";
    case IR_STYPE_Q8_0: return "q8_0";
    case IR_STYPE_Q4_0: return "q4_0";
    case IR_STYPE_Q4_1: return "q4_1";
    case IR_STYPE_Q4_K: return "q4_k";
    case IR_STYPE_Q5_K: return "q5_k";
    case IR_STYPE_Q6_K: return "q6_k";
    case IR_STYPE_Q5_0: return "q5_0";
    case IR_STYPE_Q5_1: return "q5_1";
    }
    return "?";
}

static const char *dtype_name(ig_dtype d) {
    switch (d) {
    case IG_DTYPE_F32: return "f32";
    case IG_DTYPE_BF16: return "bf16";
    case IG_DTYPE_F16: return "f16";
    case IG_DTYPE_I32: return "i32";
    case IG_DTYPE_Q8C: return "q8c";
    case IG_DTYPE_Q4G: return "q4g";
    case IG_DTYPE_Q8G: return "q8g";
    case IG_DTYPE_Q4K: return "q4k";
    case IG_DTYPE_Q6K: return "q6k";
    case IG_DTYPE_Q8A: return "q8a";
    case IG_DTYPE_Q4Z: return "q4z";
    case IG_DTYPE_Q8Z: return "q8z";
    case IG_DTYPE_Q6S: return "q6s";
    case IG_DTYPE_Q4I: return "q4i";
    case IG_DTYPE_Q8I: return "q8i";
    case IG_DTYPE_Q6I: return "q6i";
    case IG_DTYPE_Q8R: return "q8r";
    case IG_DTYPE_Q4R: return "q4r";
    case IG_DTYPE_F8R: return "f8r";
    case IG_DTYPE_KV8: return "kv8";
    case IG_DTYPE_KV4: return "kv4";
    case IG_DTYPE_KVF8: return "kvf8";
    }
    return "?";
}

/* ---- verifier */

/* The weight input of a matmul-like node and its activation input, or -1. */
static int matmul_w_slot(ir_op op) {
    switch (op) {
    case IR_OP_MATMUL:
    case IR_OP_MATMUL_EPI: return 1;
    case IR_OP_NORM_MATMUL: return 2;
    default: return -1;
    }
}

ig_status ir_verify(const ir_graph *g, ig_err *err) {
    if (g->n_tensors < 0 || g->n_nodes < 0 || g->n_files < 0)
        return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: negative counts");
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const ir_tensor *t = &g->tensors[i];
        const char *nm = t->name ? t->name : "?";
        if (t->id != i)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: tensor %d (%s) has id %d", i, nm, t->id);
        if (t->rank < 1 || t->rank > 2)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: tensor %s has rank %d", nm, t->rank);
        if (t->kind == IR_TENSOR_WEIGHT) {
            for (int d = 0; d < t->rank; d++)
                if (t->shape[d] <= 0)
                    return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: weight %s has dim %d = %lld",
                                   nm, d, (long long)t->shape[d]);
            if (t->n_parts < 0 || t->n_parts > IR_MAX_PARTS || (t->n_parts > 0 && !t->parts))
                return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: weight %s has n_parts %d", nm,
                               t->n_parts);
            if (t->n_parts == 0) {
                if (t->src_file < 0 || t->src_file >= g->n_files)
                    return ig_fail(err, IG_ERR_INTERNAL,
                                   "ir_verify: weight %s has source file %d (graph has %d)", nm,
                                   t->src_file, g->n_files);
            } else if (t->slice_axis) {
                const ir_tensor *pt = t->n_parts == 1 && t->parts[0] >= 0 && t->parts[0] < g->n_tensors && t->parts[0] != i
                                          ? &g->tensors[t->parts[0]] : NULL;
                int ax = t->slice_axis == 1 ? 1 : 0; /* the dimension that must match the part's */
                if (!pt || pt->kind != IR_TENSOR_WEIGHT || t->slice_axis > 2 || t->slice_start < 0 || pt->rank != t->rank ||
                    (ax < t->rank && pt->shape[ax] != t->shape[ax]))
                    return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: weight %s is not a shard of one weight", nm);
            } else {
                int64_t rows = 0;
                for (int p = 0; p < t->n_parts; p++) {
                    int32_t pid = t->parts[p];
                    if (pid < 0 || pid >= g->n_tensors || pid == i ||
                        g->tensors[pid].kind != IR_TENSOR_WEIGHT)
                        return ig_fail(err, IG_ERR_INTERNAL,
                                       "ir_verify: weight %s part %d is tensor %d, not a weight",
                                       nm, p, pid);
                    const ir_tensor *pt = &g->tensors[pid];
                    int64_t pc = pt->rank == 2 ? pt->shape[1] : 1, tc = t->rank == 2 ? t->shape[1] : 1;
                    /* pad16: a single part may be narrower (zero columns added) */
                    if (pc != tc && !(t->pad16 && t->n_parts == 1 && !t->interleave16 && pc < tc))
                        return ig_fail(err, IG_ERR_INTERNAL,
                                       "ir_verify: weight %s part %s has %lld cols, expected %lld",
                                       nm, pt->name, (long long)pc, (long long)tc);
                    /* pad16 + interleave16: each part is padded to a multiple of 16 rows */
                    rows += t->pad16 && t->interleave16 ? (pt->shape[0] + 15) / 16 * 16 : pt->shape[0];
                }
                if (t->interleave16 && t->pad16 && t->shape[0] % 2 == 0 && t->shape[0] >= rows)
                    rows = t->shape[0]; /* parts padded to shape[0] / 2 rows each */
                if (t->interleave16 && t->n_parts != 2)
                    return ig_fail(err, IG_ERR_INTERNAL,
                                   "ir_verify: interleaved weight %s needs 2 parts, has %d", nm,
                                   t->n_parts);
                if (rows != t->shape[0])
                    return ig_fail(err, IG_ERR_INTERNAL,
                                   "ir_verify: weight %s has %lld rows but its parts add up to %lld",
                                   nm, (long long)t->shape[0], (long long)rows);
            }
            if (t->xform == IR_XFORM_UNPERMUTE_ROPE &&
                (t->xform_heads <= 0 || t->shape[0] % (2 * (int64_t)t->xform_heads) != 0))
                return ig_fail(err, IG_ERR_INTERNAL,
                               "ir_verify: weight %s: %lld rows do not split into %d rope heads",
                               nm, (long long)t->shape[0], t->xform_heads);
        } else if (t->kind != IR_TENSOR_ACT) {
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: tensor %s has kind %d", nm, t->kind);
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if ((unsigned)n->op >= IR_OP_COUNT)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d has op %d", i, (int)n->op);
        const char *on = ir_op_name(n->op);
        int ar = ir_op_arity(n->op), req = op_required_inputs(n->op);
        for (int k = 0; k < IR_MAX_IN; k++) {
            int32_t id = n->in[k];
            if (id < -1 || id >= g->n_tensors)
                return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (%s) input %d is tensor %d",
                               i, on, k, id);
            if (k >= ar && id != -1)
                return ig_fail(err, IG_ERR_INTERNAL,
                               "ir_verify: node %d (%s) has input %d but arity %d", i, on, k, ar);
            if (k < req && id == -1)
                return ig_fail(err, IG_ERR_INTERNAL,
                               "ir_verify: node %d (%s) lacks required input %d", i, on, k);
        }
        if (n->out < -1 || n->out >= g->n_tensors)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (%s) output is tensor %d", i,
                           on, n->out);
        if (n->op == IR_OP_KV_WRITE) {
            if (n->out != -1)
                return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (kv_write) has an output", i);
        } else if (n->out == -1) {
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (%s) has no output", i, on);
        }
        if (n->out >= 0 && g->tensors[n->out].kind != IR_TENSOR_ACT)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (%s) writes weight %s", i, on,
                           g->tensors[n->out].name);
        if ((n->op == IR_OP_HEAD_RMSNORM || n->op == IR_OP_ROPE) && n->n_heads <= 0)
            return ig_fail(err, IG_ERR_INTERNAL, "ir_verify: node %d (%s) has n_heads %d", i, on,
                           n->n_heads);
        int ws = matmul_w_slot(n->op);
        if (ws >= 0) {
            const ir_tensor *x = &g->tensors[n->in[0]], *w = &g->tensors[n->in[ws]];
            if (w->kind != IR_TENSOR_WEIGHT || w->rank != 2)
                return ig_fail(err, IG_ERR_INTERNAL,
                               "ir_verify: node %d (%s) weight %s is not a matrix", i, on, w->name);
            int64_t K = w->shape[1], N = w->shape[0];
            if (x->kind == IR_TENSOR_ACT && x->shape[1] > 0 && x->shape[1] != K)
                return ig_fail(err, IG_ERR_MISMATCH,
                               "ir_verify: node %d (%s): input %s has %lld cols but weight %s "
                               "has K = %lld",
                               i, on, x->name, (long long)x->shape[1], w->name, (long long)K);
            if (n->out >= 0) {
                const ir_tensor *y = &g->tensors[n->out];
                /* a SwiGLU epilogue halves the columns: gate and up rows share one weight */
                int64_t want = n->epi == IR_EPI_SWIGLU || n->epi == IR_EPI_GEGLU ? N / 2 : N;
                if (y->shape[1] > 0 && y->shape[1] != want)
                    return ig_fail(err, IG_ERR_MISMATCH,
                                   "ir_verify: node %d (%s): output %s has %lld cols but weight "
                                   "%s has N = %lld",
                                   i, on, y->name, (long long)y->shape[1], w->name, (long long)want);
            }
            int bs = ws + 1;
            if (bs < ar && n->in[bs] >= 0) {
                const ir_tensor *b = &g->tensors[n->in[bs]];
                if (b->kind != IR_TENSOR_WEIGHT || b->rank != 1 || b->shape[0] != N)
                    return ig_fail(err, IG_ERR_MISMATCH,
                                   "ir_verify: node %d (%s): bias %s does not have shape [%lld]",
                                   i, on, b->name, (long long)N);
            }
        }
    }
    return IG_OK;
}

/* ---- dump */

static void dump_tensor_ref(const ir_graph *g, int32_t id, FILE *f) {
    if (id < 0)
        fputs("-", f);
    else if (id >= g->n_tensors)
        fprintf(f, "#%d?", id);
    else
        fputs(g->tensors[id].name, f);
}

void ir_dump(const ir_graph *g, FILE *f) {
    const ir_hparams *h = &g->hp;
    static const char *const rope_names[] = {"default", "linear", "llama3", "longrope"};
    fprintf(f, "graph %s\n", h->arch);
    fprintf(f, "  layers %d  hidden %d  heads %d  kv_heads %d  head_dim %d  intermediate %d  "
               "vocab %d  max_context %d\n",
            h->n_layers, h->hidden, h->n_heads, h->n_kv_heads, h->head_dim, h->intermediate,
            h->vocab, h->max_context);
    fprintf(f, "  rms_eps %g  rope %s theta %g", h->rms_eps,
            (unsigned)h->rope_type < 4 ? rope_names[h->rope_type] : "?", h->rope_theta);
    if (h->rope_type != IR_ROPE_DEFAULT) fprintf(f, " factor %g", h->rope_factor);
    if (h->rope_type == IR_ROPE_LONGROPE) fprintf(f, " orig_max %d factors %d", h->rope_orig_max, h->rope_n_ext);
    if (h->rope_type == IR_ROPE_LLAMA3)
        fprintf(f, " low_freq %g high_freq %g orig_max %d", h->rope_low_freq_factor,
                h->rope_high_freq_factor, h->rope_orig_max);
    fprintf(f, "\n  tied %d  attn_bias %d  o_bias %d  mlp_bias %d  qk_norm %d  src_dtype %s  bos %d  eos [",
            h->tie_embeddings, h->attn_bias, h->o_bias, h->mlp_bias, h->qk_norm,
            dtype_name(h->src_dtype), h->bos_id);
    for (int i = 0; i < h->n_eos; i++) fprintf(f, "%s%d", i ? " " : "", h->eos_ids[i]);
    fprintf(f, "]\n");
    if (h->rope_dim || h->rope_interleaved || h->rope_theta_local > 0 || h->sliding_window || h->embed_scale > 0 ||
        h->attn_scale > 0 || h->mlp_act || h->post_norms) {
        fprintf(f, "  rope_dim %d%s  theta_local %g  embed_scale %g  attn_scale %g  act %s  post_norms %d  window %d [",
                h->rope_dim, h->rope_interleaved ? " interleaved" : "", h->rope_theta_local, h->embed_scale,
                h->attn_scale, h->mlp_act == IR_ACT_GELU_TANH ? "gelu_tanh" : "silu", h->post_norms, h->sliding_window);
        for (int i = 0; i < h->n_layers && i < IR_MAX_LAYER_TYPES; i++) fputc(h->layer_sliding[i] ? 'S' : 'G', f);
        fprintf(f, "]\n");
    }
    if (h->final_softcap > 0) fprintf(f, "  final_softcap %g\n", h->final_softcap);
    if (h->n_experts)
        fprintf(f, "  experts %d  top_k %d  expert_intermediate %d  norm_topk %d  shared_expert %d\n", h->n_experts,
                h->top_k, h->moe_intermediate, h->norm_topk, h->shared_intermediate);
    if (g->tokenizer_dir) fprintf(f, "  tokenizer %s\n", g->tokenizer_dir);
    fprintf(f, "files %d\n", g->n_files);
    for (int32_t i = 0; i < g->n_files; i++) fprintf(f, "  [%d] %s\n", i, g->files[i]);
    int32_t nw = 0;
    for (int32_t i = 0; i < g->n_tensors; i++) nw += g->tensors[i].kind == IR_TENSOR_WEIGHT;
    fprintf(f, "weights %d\n", nw);
    for (int32_t i = 0; i < g->n_tensors; i++) {
        const ir_tensor *t = &g->tensors[i];
        if (t->kind != IR_TENSOR_WEIGHT) continue;
        fprintf(f, "  %-48s ", t->name);
        if (t->rank == 2)
            fprintf(f, "[%lld, %lld]", (long long)t->shape[0], (long long)t->shape[1]);
        else
            fprintf(f, "[%lld]", (long long)t->shape[0]);
        fprintf(f, " %s", dtype_name(t->dtype));
        if (t->slice_axis) {
            fprintf(f, " = %s(", t->slice_axis == 1 ? "rows" : "cols");
            dump_tensor_ref(g, t->parts[0], f);
            fprintf(f, ", from %lld)", (long long)t->slice_start);
        } else if (t->n_parts > 0) {
            fprintf(f, " = %s(", t->interleave16 ? "interleave16" : "concat");
            for (int p = 0; p < t->n_parts; p++) {
                if (p) fputs(", ", f);
                dump_tensor_ref(g, t->parts[p], f);
            }
            fputs(")", f);
        } else {
            fprintf(f, " <- file %d @%llu +%llu %s", t->src_file, (unsigned long long)t->src_offset,
                    (unsigned long long)t->src_nbytes, ir_stype_name(t->src_type));
        }
        if (t->xform == IR_XFORM_UNPERMUTE_ROPE) fprintf(f, " unpermute_rope(%d)", t->xform_heads);
        if (t->xform == IR_XFORM_PLUS_ONE) fprintf(f, " plus_one");
        fputc('\n', f);
    }
    fprintf(f, "nodes %d\n", g->n_nodes);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        fprintf(f, "  %4d %-14s L%-3d ", i, ir_op_name(n->op), n->layer);
        int ar = ir_op_arity(n->op);
        for (int k = 0; k < ar; k++) {
            if (k) fputs(", ", f);
            dump_tensor_ref(g, n->in[k], f);
        }
        fputs(" -> ", f);
        dump_tensor_ref(g, n->out, f);
        if (n->out >= 0 && n->out < g->n_tensors)
            fprintf(f, " [%lld]", (long long)g->tensors[n->out].shape[1]);
        if (n->op == IR_OP_RMSNORM || n->op == IR_OP_HEAD_RMSNORM || n->op == IR_OP_NORM_MATMUL ||
            n->eps != 0)
            fprintf(f, "  eps=%g", n->eps);
        if (n->n_heads) fprintf(f, "  n_heads=%d", n->n_heads);
        if (ir_op_is_fused(n->op) || n->epi != IR_EPI_STORE) {
            static const char *const epi[] = {"store", "acc", "swiglu"};
            fprintf(f, "  epi=%s", (unsigned)n->epi < 3 ? epi[n->epi] : "?");
        }
        fputc('\n', f);
    }
}
