/* shard.c — the tensor-parallel sharding pass (see shard.h).
 *
 * One walk over the imported node list, re-emitting every node: matmuls get their weight (and
 * bias) replaced by a shard tensor (ir_tensor.slice_axis: rows or columns of the checkpoint's
 * tensor, read by ir/sources.c), activations shrink to the rank's width, and the row-parallel
 * matmuls (o, down), the MoE blocks (experts rebuilt from their sharded gate / up / down leaves),
 * the embedding and the lm_head get a collective after them. */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

/* The rank's share of the model. */
typedef struct shard {
    ir_graph *g;
    int32_t rank, ranks;
    int32_t H, KV, D;  /* the model's heads, KV heads, head_dim */
    int32_t Hl, KVl;   /* per rank */
    int32_t kv0;       /* the rank's first KV head */
    int64_t Il, Vl;    /* intermediate and vocabulary per rank */
    int64_t El, Sl;    /* one expert's and the shared expert's intermediate per rank (before padding) */
    cp_tp_plan *plan;
    ig_err *err;
} shard;

ig_status cp_shard_check(const ir_hparams *hp, int32_t ranks, ig_err *err) {
    if (ranks <= 1) return IG_OK;
    if (ranks > 64) return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: at most 64 ranks", ranks);
    if (hp->n_experts > 0 && hp->moe_intermediate % ranks)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: the experts' intermediate size %d does not split evenly over "
                       "%d ranks", ranks, hp->moe_intermediate, ranks);
    if (hp->n_experts > 0 && hp->shared_intermediate % ranks)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: the shared expert's intermediate size %d does not split evenly "
                       "over %d ranks", ranks, hp->shared_intermediate, ranks);
    if (hp->n_heads % ranks)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: the %d attention heads do not split evenly over %d ranks", ranks,
                       hp->n_heads, ranks);
    if (hp->n_kv_heads % ranks && ranks % hp->n_kv_heads)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: the %d KV heads neither split over %d ranks nor replicate evenly "
                       "onto them", ranks, hp->n_kv_heads, ranks);
    if (!hp->n_experts && hp->intermediate % ranks)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--tp %d: the MLP's intermediate size %d does not split evenly over %d ranks",
                       ranks, hp->intermediate, ranks);
    return IG_OK;
}

void cp_tp_plan_free(cp_tp_plan *plan) {
    if (!plan) return;
    free(plan->v);
    memset(plan, 0, sizeof *plan);
}

static int record(shard *s, const ir_tensor *w, int axis, int64_t start, int64_t count) {
    cp_tp_plan *p = s->plan;
    if (!p) return 1;
    for (int32_t i = 0; i < p->n; i++)
        if (!strcmp(p->v[i].name, w->name)) return 1; /* tied embeddings: one split */
    if (p->n == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 64;
        cp_tp_split *v = realloc(p->v, sizeof *v * (size_t)nc);
        if (!v) return 0;
        p->v = v, p->cap = nc;
    }
    p->v[p->n++] = (cp_tp_split){w->name, axis, axis == 1 ? w->shape[0] : w->shape[1], start, count};
    return 1;
}

/* A shard of weight w: `count` rows (axis 1) or columns (axis 2) from `start`; *id = its tensor, or
 * w itself for -1. Tensors share their checkpoint name: every rank's table names the same weights. */
static ig_status slice(shard *s, int32_t *id, int axis, int64_t start, int64_t count) {
    if (*id < 0) return IG_OK;
    for (int32_t i = 0; i < s->g->n_tensors; i++) { /* the same shard again (a tied lm_head): share it */
        const ir_tensor *e = &s->g->tensors[i];
        if (e->slice_axis == axis && e->parts[0] == *id && e->slice_start == start && e->shape[axis - 1] == count) {
            *id = i;
            return IG_OK;
        }
    }
    ir_tensor t = s->g->tensors[*id];
    int32_t part = *id;
    if (!record(s, &t, axis, start, count)) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    t.n_parts = 1;
    t.parts = &part;
    t.slice_axis = axis;
    t.slice_start = start;
    t.xform = IR_XFORM_NONE; /* the part applies its own */
    t.interleave16 = t.pad16 = 0;
    t.shape[axis - 1] = count;
    int32_t nid = ir_add_tensor(s->g, &t);
    if (nid < 0) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    *id = nid;
    return IG_OK;
}

/* The role of a node's output: "q", "o", ... inside layers ("layers.L.<role>"), else its name. */
static const char *role(const ir_graph *g, int32_t t) {
    const char *n = t >= 0 ? g->tensors[t].name : "";
    if (strncmp(n, "layers.", 7)) return n;
    const char *d = strchr(n + 7, '.');
    return d ? d + 1 : n;
}

/* Appends a copy of node n to the graph. */
static ig_status emit(shard *s, const ir_node *n) {
    ir_node *m = ir_add_node(s->g, n->op, n->layer);
    if (!m) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    *m = *n;
    return IG_OK;
}

/* n (a matmul or the embedding) computes a partial result: its output moves to a new activation
 * "<name>_part" of `cols`, and collective `op` turns that into the original output. */
static ig_status emit_partial(shard *s, ir_node n, ir_op op, int64_t cols) {
    char nm[160];
    const ir_tensor *o = &s->g->tensors[n.out];
    snprintf(nm, sizeof nm, "%s_part", o->name);
    int32_t out = n.out, part = ir_add_act(s->g, nm, cols, n.layer);
    if (part < 0) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    n.out = part;
    ig_status st = emit(s, &n);
    if (st) return st;
    ir_node c = {.op = op, .layer = n.layer, .in = {part, -1, -1, -1}, .out = out};
    return emit(s, &c);
}

static void set_cols(shard *s, int32_t t, int64_t cols) {
    if (t >= 0) s->g->tensors[t].shape[1] = cols;
}

/* One matmul of build_decoder.c's graph, by the role of its output. */
static ig_status shard_matmul(shard *s, ir_node n) {
    const char *r = role(s->g, n.out);
    int64_t D = s->D, hid = s->g->hp.hidden, zero = s->rank ? hid : 0; /* biases of o / down: rank 0 adds them */
    ig_status st = IG_OK;
    if (!strcmp(r, "q")) {
        if (!(st = slice(s, &n.in[1], 1, s->rank * s->Hl * D, s->Hl * D)))
            st = slice(s, &n.in[2], 1, s->rank * s->Hl * D, s->Hl * D);
        set_cols(s, n.out, s->Hl * D);
    } else if (!strcmp(r, "k") || !strcmp(r, "v")) {
        if (!(st = slice(s, &n.in[1], 1, s->kv0 * D, s->KVl * D))) st = slice(s, &n.in[2], 1, s->kv0 * D, s->KVl * D);
        set_cols(s, n.out, s->KVl * D);
    } else if (!strcmp(r, "g") || !strcmp(r, "u")) {
        if (!(st = slice(s, &n.in[1], 1, s->rank * s->Il, s->Il))) st = slice(s, &n.in[2], 1, s->rank * s->Il, s->Il);
        set_cols(s, n.out, s->Il);
    } else if (!strcmp(r, "o") || !strcmp(r, "d")) {
        int64_t k = r[0] == 'o' ? s->Hl * D : s->Il;
        if (!(st = slice(s, &n.in[1], 2, s->rank * k, k))) st = slice(s, &n.in[2], 1, zero, hid);
        return st ? st : emit_partial(s, n, IR_OP_ALL_REDUCE, hid);
    } else if (!strcmp(r, "logits")) {
        if ((st = slice(s, &n.in[1], 1, s->rank * s->Vl, s->Vl))) return st;
        return emit_partial(s, n, IR_OP_ALL_GATHER, s->Vl);
    } else {
        return ig_fail(s->err, IG_ERR_UNSUPPORTED, "--tp: no split known for the matmul writing %s",
                       s->g->tensors[n.out].name);
    }
    return st ? st : emit(s, &n);
}

/* Rounds an expert's per-rank intermediate up to the 16-row panels moe.c stacks experts in. */
static int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

/* One expert's gate/up pair (a 16-row interleave of two [I, D] tensors), sharded: rows
 * [rank * il, +il) of each, interleaved again and zero-padded to pad16(il) rows each. */
static ig_status shard_gate_up(shard *s, int32_t *id, int64_t il) {
    const ir_tensor *t = &s->g->tensors[*id];
    if (t->n_parts != 2 || !t->interleave16 || t->slice_axis)
        return ig_fail(s->err, IG_ERR_UNSUPPORTED, "--tp: expert weight %s is not a gate/up pair", t->name);
    int32_t pr[2] = {t->parts[0], t->parts[1]};
    const char *name = t->name;
    ig_status st;
    if ((st = slice(s, &pr[0], 1, s->rank * il, il)) || (st = slice(s, &pr[1], 1, s->rank * il, il))) return st;
    int32_t nid = ir_add_merged_weight(s->g, name, pr, 2, 1);
    if (nid < 0) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    s->g->tensors[nid].pad16 = 1;
    s->g->tensors[nid].shape[0] = 2 * pad16(il);
    *id = nid;
    return IG_OK;
}

/* One expert's down projection [D, I], sharded: columns [rank * il, +il), zero columns up to pad16(il). */
static ig_status shard_down(shard *s, int32_t *id, int64_t il) {
    const char *name = s->g->tensors[*id].name;
    ig_status st = slice(s, id, 2, s->rank * il, il);
    if (st || pad16(il) == il) return st;
    int32_t nid = ir_add_merged_weight(s->g, name, id, 1, 0);
    if (nid < 0) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    s->g->tensors[nid].pad16 = 1;
    s->g->tensors[nid].shape[1] = pad16(il);
    *id = nid;
    return IG_OK;
}

/* A stack of experts (merged weight of one part per expert), each part sharded by `fn`. */
static ig_status shard_stack(shard *s, int32_t *id, int64_t il, ig_status (*fn)(shard *, int32_t *, int64_t)) {
    const ir_tensor *t = &s->g->tensors[*id];
    int32_t n = t->n_parts;
    if (n < 1 || t->interleave16 || t->slice_axis)
        return ig_fail(s->err, IG_ERR_UNSUPPORTED, "--tp: %s is not a stack of experts", t->name);
    const char *name = t->name;
    int32_t *parts = malloc(sizeof *parts * (size_t)n);
    if (!parts) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    memcpy(parts, t->parts, sizeof *parts * (size_t)n);
    ig_status st = IG_OK;
    for (int32_t e = 0; e < n && !st; e++) st = fn(s, &parts[e], il);
    int32_t nid = st ? -1 : ir_add_merged_weight(s->g, name, parts, n, 0);
    free(parts);
    if (st) return st;
    if (nid < 0) return ig_fail(s->err, IG_ERR_NOMEM, "out of memory");
    *id = nid;
    return IG_OK;
}

/* MOE (routed experts) or MOE_SHARED: each expert's FFN split by intermediate columns, the router
 * (or the shared expert's sigmoid gate) replicated so every rank routes alike; the block's output
 * is this rank's partial sum, all-reduced before the residual add. */
static ig_status shard_moe(shard *s, ir_node n) {
    int64_t il = n.op == IR_OP_MOE ? s->El : s->Sl;
    ig_status st;
    if (n.op == IR_OP_MOE) {
        if ((st = shard_stack(s, &n.in[2], il, shard_gate_up)) || (st = shard_stack(s, &n.in[3], il, shard_down))) return st;
    } else if ((st = shard_gate_up(s, &n.in[2], il)) || (st = shard_down(s, &n.in[3], il))) {
        return st;
    }
    return emit_partial(s, n, IR_OP_ALL_REDUCE, s->g->hp.hidden);
}

/* Every other node: the embedding (by vocabulary rows, then an all-reduce), per-head ops and the
 * ops whose output width shrinks; the rest unchanged. */
static ig_status shard_node(shard *s, ir_node n) {
    const char *r = role(s->g, n.out);
    int64_t D = s->D;
    switch (n.op) {
    case IR_OP_MATMUL: return shard_matmul(s, n);
    case IR_OP_EMBED: {
        ig_status st = slice(s, &n.in[1], 1, s->rank * s->Vl, s->Vl);
        return st ? st : emit_partial(s, n, IR_OP_ALL_REDUCE, s->g->hp.hidden);
    }
    case IR_OP_HEAD_RMSNORM:
    case IR_OP_ROPE: {
        int q = r[0] == 'q';
        n.n_heads = q ? s->Hl : s->KVl;
        set_cols(s, n.out, (int64_t)n.n_heads * D);
        break;
    }
    case IR_OP_ATTENTION: set_cols(s, n.out, s->Hl * D); break;
    case IR_OP_SILU_MUL:
    case IR_OP_GELU_MUL: set_cols(s, n.out, s->Il); break;
    case IR_OP_MOE:
    case IR_OP_MOE_SHARED: return shard_moe(s, n);
    default: break;
    }
    return emit(s, &n);
}

ig_status cp_shard(ir_graph *g, int32_t rank, int32_t ranks, cp_tp_plan *plan, ig_err *err) {
    ir_hparams *hp = &g->hp;
    if (ranks <= 1) return IG_OK;
    ig_status st = cp_shard_check(hp, ranks, err);
    if (st) return st;
    if (rank < 0 || rank >= ranks) return ig_fail(err, IG_ERR_INVALID, "cp_shard: rank %d of %d", rank, ranks);
    shard s = {.g = g, .rank = rank, .ranks = ranks, .H = hp->n_heads, .KV = hp->n_kv_heads, .D = hp->head_dim,
               .plan = plan, .err = err};
    s.Hl = s.H / ranks;
    s.KVl = s.KV >= ranks ? s.KV / ranks : 1;
    s.kv0 = s.KV >= ranks ? rank * s.KVl : rank / (ranks / s.KV);
    s.Il = hp->intermediate / ranks;
    s.El = hp->moe_intermediate / ranks;
    s.Sl = hp->shared_intermediate / ranks;
    s.Vl = (hp->vocab + ranks - 1) / ranks;
    int32_t n = g->n_nodes;
    ir_node *old = malloc(sizeof *old * (size_t)(n > 0 ? n : 1));
    if (!old) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    memcpy(old, g->nodes, sizeof *old * (size_t)n);
    g->n_nodes = 0;
    for (int32_t i = 0; i < n && !st; i++) st = shard_node(&s, old[i]);
    free(old);
    if (st) return st;
    hp->n_heads = s.Hl;
    hp->n_kv_heads = s.KVl;
    hp->intermediate = (int32_t)s.Il;
    if (hp->n_experts) { /* the kernels see the padded per-rank sizes */
        hp->moe_intermediate = (int32_t)pad16(s.El);
        hp->shared_intermediate = s.Sl ? (int32_t)pad16(s.Sl) : 0;
    }
    hp->tp = ranks;
    hp->tp_vocab = (int32_t)s.Vl;
    return ir_verify(g, err);
}
