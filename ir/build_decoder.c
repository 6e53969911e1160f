/* build_decoder.c — the unfused graph of a Llama-family decoder, shared by every importer.
 *
 * Importers find and check the weights (each in its own naming scheme: HF, GGUF) and hand their
 * tensor ids here; this file emits the node sequence that compiler/passes.c pattern-matches:
 *   EMBED(ids, embed) -> x
 *   per layer: RMSNORM -> h; MATMUL q, k, v; [HEAD_RMSNORM q, k]; ROPE q, k; KV_WRITE(k, v);
 *              ATTENTION -> a; MATMUL o; ADD -> x2; RMSNORM -> h2; MATMUL gate, up; SILU_MUL;
 *              MATMUL down; ADD -> out
 *   (GELU_MUL instead of SILU_MUL for hp.mlp_act gelu_tanh; with hp.post_norms the outputs of
 *    MATMUL o and MATMUL down go through an RMSNORM before their ADD: GLM-4, Gemma 3; with
 *    hp.n_experts the MLP is MOE(h2, router, experts) -> ADD [MOE_SHARED(h2, ...) -> ADD])
 *   GATHER_ROWS(x) -> xo; RMSNORM -> hn; MATMUL(head) -> logits
 * Activation names are "layers.L.<name>" inside layers. */
#include "ir.h"

#include <stdio.h>

typedef struct bctx {
    ir_graph *g;
    ig_err *err;
} bctx;

/* Adds node op(a, b, bias) -> new activation out_name[cols] (no output when out_name is NULL). */
static ig_status node(bctx *c, ir_op op, int32_t layer, int32_t a, int32_t b, int32_t bias,
                      const char *out_name, int64_t cols, int32_t *out) {
    int32_t o = -1;
    if (out_name) {
        char nm[96];
        if (layer >= 0)
            snprintf(nm, sizeof nm, "layers.%d.%s", layer, out_name);
        else
            snprintf(nm, sizeof nm, "%s", out_name);
        if ((o = ir_add_act(c->g, nm, cols, layer)) < 0) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    }
    ir_node *n = ir_add_node(c->g, op, layer);
    if (!n) return ig_fail(c->err, IG_ERR_NOMEM, "out of memory");
    n->in[0] = a;
    n->in[1] = b;
    n->in[2] = bias;
    n->out = o;
    if (out) *out = o;
    return IG_OK;
}

static ir_node *last(bctx *c) { return &c->g->nodes[c->g->n_nodes - 1]; }

ig_status ir_build_decoder(ir_graph *g, int32_t embed, const ir_layer_weights *lw, int32_t final_norm,
                           int32_t head, ig_err *err) {
    bctx cc = {g, err}, *c = &cc;
    const ir_hparams *h = &g->hp;
    int64_t D = h->hidden, qd = (int64_t)h->n_heads * h->head_dim,
            kvd = (int64_t)h->n_kv_heads * h->head_dim, I = h->intermediate;
    float eps = (float)h->rms_eps;
    ig_status st;
    int32_t ids = ir_add_act(g, "ids", 1, -1), x;
    if (ids < 0) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    g->tensors[ids].dtype = IG_DTYPE_I32;
    if ((st = node(c, IR_OP_EMBED, -1, ids, embed, -1, "x", D, &x))) return st;
    for (int32_t L = 0; L < h->n_layers; L++) {
        const ir_layer_weights *w = &lw[L];
        int32_t hh, q, k, v, qr, kr, a, o, x2, h2, gt, up, m, d;
        if ((st = node(c, IR_OP_RMSNORM, L, x, w->in_norm, -1, "h", D, &hh))) return st;
        last(c)->eps = eps;
        if ((st = node(c, IR_OP_MATMUL, L, hh, w->q, w->qb, "q", qd, &q)) ||
            (st = node(c, IR_OP_MATMUL, L, hh, w->k, w->kb, "k", kvd, &k)) ||
            (st = node(c, IR_OP_MATMUL, L, hh, w->v, w->vb, "v", kvd, &v)))
            return st;
        if (h->qk_norm) {
            if ((st = node(c, IR_OP_HEAD_RMSNORM, L, q, w->q_norm, -1, "qn", qd, &q))) return st;
            last(c)->eps = eps;
            last(c)->n_heads = h->n_heads;
            if ((st = node(c, IR_OP_HEAD_RMSNORM, L, k, w->k_norm, -1, "kn", kvd, &k))) return st;
            last(c)->eps = eps;
            last(c)->n_heads = h->n_kv_heads;
        }
        if ((st = node(c, IR_OP_ROPE, L, q, -1, -1, "qr", qd, &qr))) return st;
        last(c)->n_heads = h->n_heads;
        if ((st = node(c, IR_OP_ROPE, L, k, -1, -1, "kr", kvd, &kr))) return st;
        last(c)->n_heads = h->n_kv_heads;
        if ((st = node(c, IR_OP_KV_WRITE, L, kr, v, -1, NULL, 0, NULL)) ||
            (st = node(c, IR_OP_ATTENTION, L, qr, -1, -1, "a", qd, &a)) ||
            (st = node(c, IR_OP_MATMUL, L, a, w->o, w->ob, "o", D, &o)))
            return st;
        if (h->post_norms) {
            if ((st = node(c, IR_OP_RMSNORM, L, o, w->attn_out_norm, -1, "on", D, &o))) return st;
            last(c)->eps = eps;
        }
        if ((st = node(c, IR_OP_ADD, L, x, o, -1, "x2", D, &x2)) ||
            (st = node(c, IR_OP_RMSNORM, L, x2, w->post_norm, -1, "h2", D, &h2)))
            return st;
        last(c)->eps = eps;
        if (h->n_experts > 0) { /* routed experts, then the shared expert, each added to the residual */
            if ((st = node(c, IR_OP_MOE, L, h2, w->router, w->experts_gate_up, "moe", D, &d))) return st;
            last(c)->in[3] = w->experts_down;
            if ((st = node(c, IR_OP_ADD, L, x2, d, -1, h->shared_intermediate ? "x3" : "out", D, &x))) return st;
            if (h->shared_intermediate) {
                if ((st = node(c, IR_OP_MOE_SHARED, L, h2, w->shared_gate, w->shared_gate_up, "shared", D, &d))) return st;
                last(c)->in[3] = w->shared_down;
                if ((st = node(c, IR_OP_ADD, L, x, d, -1, "out", D, &x))) return st;
            }
            continue;
        }
        if ((st = node(c, IR_OP_MATMUL, L, h2, w->gate, w->gate_b, "g", I, &gt)) ||
            (st = node(c, IR_OP_MATMUL, L, h2, w->up, w->up_b, "u", I, &up)) ||
            (st = node(c, h->mlp_act == IR_ACT_GELU_TANH ? IR_OP_GELU_MUL : IR_OP_SILU_MUL, L, gt, up, -1, "m", I,
                       &m)) ||
            (st = node(c, IR_OP_MATMUL, L, m, w->down, w->down_b, "d", D, &d)))
            return st;
        if (h->post_norms) {
            if ((st = node(c, IR_OP_RMSNORM, L, d, w->mlp_out_norm, -1, "dn", D, &d))) return st;
            last(c)->eps = eps;
        }
        if ((st = node(c, IR_OP_ADD, L, x2, d, -1, "out", D, &x))) return st;
    }
    int32_t xo, hn;
    if ((st = node(c, IR_OP_GATHER_ROWS, -1, x, -1, -1, "xo", D, &xo)) ||
        (st = node(c, IR_OP_RMSNORM, -1, xo, final_norm, -1, "hn", D, &hn)))
        return st;
    last(c)->eps = eps;
    if ((st = node(c, IR_OP_MATMUL, -1, hn, head, -1, "logits", h->vocab, NULL))) return st;
    return ir_verify(g, err);
}
