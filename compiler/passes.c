/* passes.c — fusion passes over the model graph (see passes.h).
 *
 * The passes match the node sequence the importers emit for a Llama-family decoder layer. They
 * work on tensor ids, not positions, where it matters (who consumes what), and fail with an error
 * naming the layer when a graph does not have the shape a fusion expects, rather than silently
 * producing a graph codegen cannot lower. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#define DEAD IR_OP_COUNT

static void compact(ir_graph *g) {
    int32_t w = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op != DEAD) g->nodes[w++] = g->nodes[i];
    g->n_nodes = w;
}

/* Number of node inputs reading tensor t. */
static int uses(const ir_graph *g, int32_t t) {
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == DEAD) continue;
        for (int k = 0; k < IR_MAX_IN; k++) n += g->nodes[i].in[k] == t;
    }
    return n;
}

/* First live node after index `from` in `layer` with op `op` whose input slot `slot` is `t`
 * (t = -2: any input). Returns its index or -1. */
static int32_t find_consumer(const ir_graph *g, int32_t from, int32_t layer, ir_op op, int slot,
                             int32_t t) {
    for (int32_t i = from + 1; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != op || n->layer != layer) continue;
        if (t == -2 || n->in[slot] == t) return i;
    }
    return -1;
}

/* Adds a weight made of parts (concatenated rows, or gate/up interleaved by 16 rows). */
static int32_t add_merged_weight(ir_graph *g, const char *name, const int32_t *parts, int np,
                                 int interleave) {
    const ir_tensor *p0 = &g->tensors[parts[0]];
    ir_tensor t;
    memset(&t, 0, sizeof t);
    t.name = (char *)name;
    t.kind = IR_TENSOR_WEIGHT;
    t.dtype = p0->dtype;
    t.rank = p0->rank;
    t.layer = p0->layer;
    t.src_file = -1;
    t.n_parts = np;
    int64_t rows = 0;
    t.parts = (int32_t *)parts; /* copied by ir_add_tensor */
    for (int i = 0; i < np; i++) rows += g->tensors[parts[i]].shape[0];
    t.shape[0] = rows;
    t.shape[1] = p0->rank == 2 ? p0->shape[1] : 0;
    t.interleave16 = interleave;
    return ir_add_tensor(g, &t);
}

ig_status cp_fuse_qkv(ir_graph *g, ig_err *err) {
    char name[128];
    for (int32_t i = 0; i + 2 < g->n_nodes; i++) {
        ir_node *a = &g->nodes[i], *b = a + 1, *c = a + 2;
        if (a->op != IR_OP_MATMUL || b->op != IR_OP_MATMUL || c->op != IR_OP_MATMUL) continue;
        if (a->in[0] != b->in[0] || a->in[0] != c->in[0] || a->layer < 0) continue;
        int32_t L = a->layer;
        int32_t q = a->out, k = b->out, v = c->out;
        /* the K/V consumers identify the three: KV_WRITE reads (roped k, v) */
        int32_t kw = find_consumer(g, i, L, IR_OP_KV_WRITE, 1, v);
        if (kw < 0) continue; /* not an attention projection triple (e.g. gate/up + something) */
        int nb = (a->in[2] >= 0) + (b->in[2] >= 0) + (c->in[2] >= 0);
        if (nb != 0 && nb != 3)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "fuse_qkv: layer %d has biases on only some of q/k/v", L);
        int32_t ws[3] = {a->in[1], b->in[1], c->in[1]};
        snprintf(name, sizeof name, "layers.%d.attn.qkv.weight", L);
        int32_t wqkv = add_merged_weight(g, ir_strdup(g, name), ws, 3, 0);
        int32_t bqkv = -1;
        if (nb == 3) {
            int32_t bs[3] = {a->in[2], b->in[2], c->in[2]};
            snprintf(name, sizeof name, "layers.%d.attn.qkv.bias", L);
            bqkv = add_merged_weight(g, ir_strdup(g, name), bs, 3, 0);
        }
        snprintf(name, sizeof name, "layers.%d.qkv", L);
        int64_t cols = g->tensors[ws[0]].shape[0] + g->tensors[ws[1]].shape[0] +
                       g->tensors[ws[2]].shape[0];
        int32_t qkv = ir_add_act(g, name, cols, L);
        a = &g->nodes[i]; /* tensors may have moved; nodes did not */
        b = a + 1;
        c = a + 2;
        a->in[1] = wqkv;
        a->in[2] = bqkv;
        a->out = qkv;
        b->op = DEAD;
        c->op = DEAD;

        /* q/k chain: [HEAD_RMSNORM q] [HEAD_RMSNORM k] ROPE q, ROPE k, KV_WRITE */
        int32_t qn_i = find_consumer(g, i, L, IR_OP_HEAD_RMSNORM, 0, q);
        int32_t kn_i = find_consumer(g, i, L, IR_OP_HEAD_RMSNORM, 0, k);
        if ((qn_i < 0) != (kn_i < 0))
            return ig_fail(err, IG_ERR_UNSUPPORTED, "fuse_qkv: layer %d normalizes only q or k",
                           L);
        int32_t qsrc = qn_i >= 0 ? g->nodes[qn_i].out : q;
        int32_t ksrc = kn_i >= 0 ? g->nodes[kn_i].out : k;
        int32_t rq = find_consumer(g, i, L, IR_OP_ROPE, 0, qsrc);
        int32_t rk = find_consumer(g, i, L, IR_OP_ROPE, 0, ksrc);
        if (rq < 0 || rk < 0 || g->nodes[kw].in[0] != g->nodes[rk].out)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "fuse_qkv: layer %d: q/k do not go through ROPE into KV_WRITE", L);
        ir_node *r = &g->nodes[rq];
        r->op = IR_OP_ROPE_KV;
        r->in[0] = qkv;
        r->in[1] = qn_i >= 0 ? g->nodes[qn_i].in[1] : -1;
        r->in[2] = kn_i >= 0 ? g->nodes[kn_i].in[1] : -1;
        r->in[3] = -1;
        if (qn_i >= 0) r->eps = g->nodes[qn_i].eps;
        g->nodes[rk].op = DEAD;
        g->nodes[kw].op = DEAD;
        if (qn_i >= 0) g->nodes[qn_i].op = DEAD;
        if (kn_i >= 0) g->nodes[kn_i].op = DEAD;
    }
    compact(g);
    return IG_OK;
}

ig_status cp_fuse_gate_up(ir_graph *g, ig_err *err) {
    char name[128];
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *s = &g->nodes[i];
        if (s->op != IR_OP_SILU_MUL && s->op != IR_OP_GELU_MUL) continue;
        ir_epi epi = s->op == IR_OP_GELU_MUL ? IR_EPI_GEGLU : IR_EPI_SWIGLU;
        int32_t gi = -1, ui = -1;
        for (int32_t j = 0; j < i; j++) {
            if (g->nodes[j].op != IR_OP_MATMUL) continue;
            if (g->nodes[j].out == s->in[0]) gi = j;
            if (g->nodes[j].out == s->in[1]) ui = j;
        }
        if (gi < 0 || ui < 0) continue;
        ir_node *gn = &g->nodes[gi], *un = &g->nodes[ui];
        int32_t L = s->layer;
        if (gn->in[0] != un->in[0] || uses(g, s->in[0]) != 1 || uses(g, s->in[1]) != 1) continue;
        if ((gn->in[2] >= 0) != (un->in[2] >= 0))
            return ig_fail(err, IG_ERR_UNSUPPORTED, "fuse_gate_up: layer %d has a bias on only one of gate/up", L);
        int64_t I = g->tensors[gn->in[1]].shape[0];
        if (g->tensors[un->in[1]].shape[0] != I)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "fuse_gate_up: layer %d: gate and up differ in size", L);
        /* kernels work on 16-row panels: an intermediate size that is not a multiple of 16 is
         * padded with zero gate/up rows (silu(0) * 0 = 0) and zero down-projection columns */
        int64_t Ip = (I + 15) / 16 * 16;
        int32_t ws[2] = {gn->in[1], un->in[1]};
        snprintf(name, sizeof name, "layers.%d.mlp.gate_up.weight", L);
        int32_t w = add_merged_weight(g, ir_strdup(g, name), ws, 2, 1);
        int32_t bias = -1;
        if (gn->in[2] >= 0) { /* mlp_bias: interleaved like the rows they add to */
            int32_t bs[2] = {g->nodes[gi].in[2], g->nodes[ui].in[2]};
            snprintf(name, sizeof name, "layers.%d.mlp.gate_up.bias", L);
            bias = add_merged_weight(g, ir_strdup(g, name), bs, 2, 1);
        }
        if (Ip != I) {
            g->tensors[w].pad16 = 1;
            g->tensors[w].shape[0] = 2 * Ip;
            if (bias >= 0) {
                g->tensors[bias].pad16 = 1;
                g->tensors[bias].shape[0] = 2 * Ip;
            }
            int32_t m = g->nodes[i].out;
            g->tensors[m].shape[1] = Ip;
            for (int32_t j = i + 1; j < g->n_nodes; j++) {
                ir_node *dn = &g->nodes[j];
                if (dn->op != IR_OP_MATMUL || dn->in[0] != m) continue;
                int32_t dw = dn->in[1];
                snprintf(name, sizeof name, "layers.%d.mlp.down.padded", L);
                int32_t pw = add_merged_weight(g, ir_strdup(g, name), &dw, 1, 0);
                g->tensors[pw].pad16 = 1;
                g->tensors[pw].shape[1] = Ip;
                g->nodes[j].in[1] = pw;
            }
        }
        s = &g->nodes[i];
        gn = &g->nodes[gi];
        un = &g->nodes[ui];
        s->op = IR_OP_MATMUL_EPI;
        s->epi = epi;
        s->in[0] = gn->in[0];
        s->in[1] = w;
        s->in[2] = bias;
        s->in[3] = -1;
        gn->op = DEAD;
        un->op = DEAD;
    }
    compact(g);
    return IG_OK;
}

ig_status cp_fuse_post_norm(ir_graph *g, ig_err *err) {
    (void)err;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_RMSNORM || n->layer < 0 || uses(g, n->out) != 1) continue;
        for (int32_t j = i + 1; j < g->n_nodes; j++) {
            ir_node *a = &g->nodes[j];
            if (a->op != IR_OP_ADD || (a->in[0] != n->out && a->in[1] != n->out)) continue;
            int32_t res = a->in[0] == n->out ? a->in[1] : a->in[0];
            a->op = IR_OP_NORM_ADD;
            a->in[0] = res;
            a->in[1] = n->in[0];
            a->in[2] = n->in[1];
            a->eps = n->eps;
            n->op = DEAD;
            break;
        }
    }
    compact(g);
    return IG_OK;
}

ig_status cp_fuse_moe(ir_graph *g, ig_err *err) {
    (void)err;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *a = &g->nodes[i];
        if (a->op != IR_OP_ADD) continue;
        for (int side = 0; side < 2; side++) {
            int32_t t = a->in[side], mi = -1;
            for (int32_t j = 0; j < i; j++)
                if ((g->nodes[j].op == IR_OP_MOE || g->nodes[j].op == IR_OP_MOE_SHARED) && g->nodes[j].epi != IR_EPI_ACC &&
                    g->nodes[j].out == t)
                    mi = j;
            if (mi < 0 || uses(g, t) != 1) continue;
            ir_node fused = g->nodes[mi];
            fused.epi = IR_EPI_ACC; /* accumulates into the ADD's other input, the residual stream */
            fused.out = a->out;
            g->nodes[mi].op = DEAD;
            *a = fused;
            break;
        }
    }
    compact(g);
    return IG_OK;
}

ig_status cp_lower_matmul(ir_graph *g, ig_err *err) {
    (void)err;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_MATMUL) {
            g->nodes[i].op = IR_OP_MATMUL_EPI;
            g->nodes[i].epi = IR_EPI_STORE;
        }
    return IG_OK;
}

ig_status cp_fuse_residual(ir_graph *g, ig_err *err) {
    (void)err;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *add = &g->nodes[i];
        if (add->op != IR_OP_ADD) continue;
        for (int side = 0; side < 2; side++) {
            int32_t t = add->in[side], res = add->in[1 - side];
            int32_t mi = -1;
            for (int32_t j = 0; j < i; j++)
                if ((g->nodes[j].op == IR_OP_MATMUL || (g->nodes[j].op == IR_OP_ALL_REDUCE && g->nodes[j].epi == IR_EPI_STORE)) &&
                    g->nodes[j].out == t)
                    mi = j;
            if (mi < 0 || uses(g, t) != 1) continue;
            ir_node *m = &g->nodes[mi];
            /* the accumulation happens where the ADD was: move the matmul (all-reduce) there */
            ir_node fused = *m;
            int reduce = m->op == IR_OP_ALL_REDUCE;
            fused.op = reduce ? IR_OP_ALL_REDUCE : IR_OP_MATMUL_EPI;
            fused.epi = IR_EPI_ACC;
            fused.in[reduce ? 1 : 3] = res;
            fused.out = add->out;
            m->op = DEAD;
            *add = fused;
            break;
        }
    }
    compact(g);
    return IG_OK;
}

ig_status cp_fuse_norm(ir_graph *g, ig_err *err) {
    (void)err;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_RMSNORM || uses(g, n->out) != 1) continue;
        for (int32_t j = i + 1; j < g->n_nodes; j++) {
            ir_node *m = &g->nodes[j];
            if (m->in[0] != n->out) continue;
            if (m->op != IR_OP_MATMUL && !(m->op == IR_OP_MATMUL_EPI && m->epi != IR_EPI_ACC))
                break;
            ir_node fused = *m;
            fused.op = IR_OP_NORM_MATMUL;
            fused.epi = m->op == IR_OP_MATMUL ? IR_EPI_STORE : m->epi;
            fused.in[0] = n->in[0];
            fused.in[1] = n->in[1];
            fused.in[2] = m->in[1];
            fused.in[3] = m->in[2];
            fused.eps = n->eps;
            *m = fused;
            n->op = DEAD;
            break;
        }
    }
    compact(g);
    return IG_OK;
}

ig_status cp_check_lowered(const ir_graph *g, ig_err *err) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_op op = g->nodes[i].op;
        if (op == IR_OP_EMBED || op == IR_OP_GATHER_ROWS || op == IR_OP_ATTENTION ||
            op == IR_OP_NORM_MATMUL || op == IR_OP_ROPE_KV || op == IR_OP_MATMUL_EPI || op == IR_OP_NORM_ADD ||
            op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER ||
            ((op == IR_OP_MOE || op == IR_OP_MOE_SHARED) && (g->nodes[i].epi == IR_EPI_ACC || g->hp.tp > 1)) ||
            (op == IR_OP_RMSNORM && g->nodes[i].layer >= 0))
            continue;
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "node %d (%s, layer %d) was not fused into an op the code generator lowers",
                       i, ir_op_name(op), g->nodes[i].layer);
    }
    return IG_OK;
}

ig_status cp_run_all(ir_graph *g, FILE *dump, ig_err *err) {
    static const struct {
        const char *name;
        ig_status (*fn)(ir_graph *, ig_err *);
    } passes[] = {{"fuse_qkv", cp_fuse_qkv},
                  {"fuse_gate_up", cp_fuse_gate_up},
                  {"fuse_post_norm", cp_fuse_post_norm},
                  {"fuse_residual", cp_fuse_residual},
                  {"fuse_moe", cp_fuse_moe},
                  {"fuse_norm", cp_fuse_norm},
                  {"lower_matmul", cp_lower_matmul}};
    ig_status st = ir_verify(g, err);
    if (st) return st;
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        st = passes[i].fn(g, err);
        if (!st) st = ir_verify(g, err);
        if (st) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            return ig_fail(err, st, "pass %s: %s", passes[i].name, msg);
        }
        if (dump) {
            fprintf(dump, "==== after %s\n", passes[i].name);
            ir_dump(g, dump);
        }
    }
    return cp_check_lowered(g, err);
}
