/* serialize.c — saving and loading graphs as .igraph files (ir_save, ir_load).
 *
 * An .igraph file is the magic "IGGRAPH\0" then one protobuf Graph message (ignis_ir.proto).
 * Loading trusts nothing: every enum value, count and rank is range-checked while the graph is
 * rebuilt, and ir_verify checks the references between tensors and nodes afterwards, so a
 * corrupt file fails with a message instead of producing a graph that crashes a later pass.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ignis_ir.pb-c.h"
#include "ir.h"

#define IR_SERIAL_VERSION 1u
static const char ir_magic[8] = {'I', 'G', 'G', 'R', 'A', 'P', 'H', 0};

/* ---- save */

/* Absolute form of `p` into buf (realpath when it exists, else cwd-relative). */
static const char *abs_path(const char *p, char *buf, size_t cap) {
    if (p[0] == '/') return p;
    char rp[PATH_MAX];
    if (realpath(p, rp)) {
        snprintf(buf, cap, "%s", rp);
        return buf;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return p;
    snprintf(buf, cap, "%s/%s", cwd, p);
    return buf;
}

ig_status ir_save(const ir_graph *g, const char *path, ig_err *err) {
    ig_status st = IG_OK;
    for (int32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].src_type == IR_STYPE_GPTQ || g->tensors[i].src_type == IR_STYPE_AWQ ||
            g->tensors[i].src_type == IR_STYPE_I32)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "%s: tensor %s is part of a %s layer, which .igraph files do not carry yet; compile the "
                           "HF folder itself", path, g->tensors[i].name,
                           g->tensors[i].src_type == IR_STYPE_AWQ ? "AWQ" : "GPTQ / AWQ");
    Ignis__Ir__Graph G = IGNIS__IR__GRAPH__INIT;
    Ignis__Ir__Hparams H = IGNIS__IR__HPARAMS__INIT;
    const ir_hparams *h = &g->hp;
    size_t nt = (size_t)g->n_tensors, nn = (size_t)g->n_nodes, nf = (size_t)g->n_files;
    Ignis__Ir__Tensor *T = calloc(nt + 1, sizeof *T);
    Ignis__Ir__Tensor **Tp = calloc(nt + 1, sizeof *Tp);
    Ignis__Ir__Node *N = calloc(nn + 1, sizeof *N);
    Ignis__Ir__Node **Np = calloc(nn + 1, sizeof *Np);
    int64_t *shapes = calloc(2 * nt + 1, sizeof *shapes);
    size_t np_all = 0;
    for (size_t i = 0; i < nt; i++) np_all += (size_t)(g->tensors[i].n_parts > 0 ? g->tensors[i].n_parts : 0);
    int32_t *parts = calloc(np_all + 1, sizeof *parts);
    size_t np_used = 0;
    int32_t *ins = calloc(IR_MAX_IN * nn + 1, sizeof *ins);
    char **files = calloc(nf + 1, sizeof *files);
    char *pathbuf = calloc(nf + 1, PATH_MAX + 1);
    uint8_t *buf = NULL;
    FILE *fp = NULL;
    if (!T || !Tp || !N || !Np || !shapes || !parts || !ins || !files || !pathbuf) {
        st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    H.arch = (char *)h->arch;
    H.n_layers = h->n_layers;
    H.hidden = h->hidden;
    H.n_heads = h->n_heads;
    H.n_kv_heads = h->n_kv_heads;
    H.head_dim = h->head_dim;
    H.intermediate = h->intermediate;
    H.vocab = h->vocab;
    H.max_context = h->max_context;
    H.rms_eps = h->rms_eps;
    H.rope_theta = h->rope_theta;
    H.rope_type = (int32_t)h->rope_type;
    H.rope_factor = h->rope_factor;
    H.rope_low_freq_factor = h->rope_low_freq_factor;
    H.rope_high_freq_factor = h->rope_high_freq_factor;
    H.rope_orig_max = h->rope_orig_max;
    H.tie_embeddings = h->tie_embeddings;
    H.attn_bias = h->attn_bias;
    H.o_bias = h->o_bias;
    H.mlp_bias = h->mlp_bias;
    H.qk_norm = h->qk_norm;
    H.src_dtype = (int32_t)h->src_dtype;
    H.bos_id = h->bos_id;
    H.n_eos_ids = (size_t)(h->n_eos < 0 ? 0 : h->n_eos > 8 ? 8 : h->n_eos);
    H.eos_ids = (int32_t *)h->eos_ids;
    H.rope_dim = h->rope_dim;
    H.rope_interleaved = h->rope_interleaved;
    H.rope_theta_local = h->rope_theta_local;
    H.sliding_window = h->sliding_window;
    H.layer_sliding.len = (size_t)(h->n_layers < 0 ? 0 : h->n_layers > IR_MAX_LAYER_TYPES ? IR_MAX_LAYER_TYPES : h->n_layers);
    H.layer_sliding.data = (uint8_t *)h->layer_sliding;
    H.embed_scale = h->embed_scale;
    H.attn_scale = h->attn_scale;
    H.final_softcap = h->final_softcap;
    H.mlp_act = (int32_t)h->mlp_act;
    H.post_norms = h->post_norms;
    H.n_experts = h->n_experts;
    H.top_k = h->top_k;
    H.moe_intermediate = h->moe_intermediate;
    H.norm_topk = h->norm_topk;
    H.shared_intermediate = h->shared_intermediate;
    H.n_rope_ext = (size_t)(h->rope_n_ext < 0 ? 0 : h->rope_n_ext > IR_MAX_ROPE_EXT ? IR_MAX_ROPE_EXT : h->rope_n_ext);
    H.rope_ext = (double *)h->rope_ext;
    G.version = IR_SERIAL_VERSION;
    G.hp = &H;
    for (size_t i = 0; i < nf; i++)
        files[i] = (char *)abs_path(g->files[i], pathbuf + i * (PATH_MAX + 1), PATH_MAX + 1);
    G.n_files = nf;
    G.files = files;
    for (size_t i = 0; i < nt; i++) {
        const ir_tensor *t = &g->tensors[i];
        Ignis__Ir__Tensor *m = &T[i];
        ignis__ir__tensor__init(m);
        m->name = t->name ? t->name : "";
        m->kind = (int32_t)t->kind;
        m->dtype = (int32_t)t->dtype;
        m->n_shape = (size_t)(t->rank < 0 ? 0 : t->rank > 2 ? 2 : t->rank);
        m->shape = shapes + 2 * i;
        memcpy(m->shape, t->shape, sizeof t->shape);
        m->layer = t->layer;
        m->src_file = t->src_file;
        m->src_offset = t->src_offset;
        m->src_nbytes = t->src_nbytes;
        m->src_type = (int32_t)t->src_type;
        m->xform = (int32_t)t->xform;
        m->xform_heads = t->xform_heads;
        m->n_parts = (size_t)(t->n_parts < 0 ? 0 : t->n_parts);
        m->parts = parts + np_used;
        if (m->n_parts) memcpy(m->parts, t->parts, sizeof *t->parts * m->n_parts);
        np_used += m->n_parts;
        m->interleave16 = t->interleave16;
        m->pad16 = t->pad16;
        Tp[i] = m;
    }
    G.n_tensors = nt;
    G.tensors = Tp;
    for (size_t i = 0; i < nn; i++) {
        const ir_node *n = &g->nodes[i];
        Ignis__Ir__Node *m = &N[i];
        ignis__ir__node__init(m);
        m->op = (char *)ir_op_name(n->op);
        m->layer = n->layer;
        m->n_in = IR_MAX_IN;
        m->in = ins + IR_MAX_IN * i;
        memcpy(m->in, n->in, sizeof n->in);
        m->out = n->out;
        m->eps = n->eps;
        m->n_heads = n->n_heads;
        m->epi = (int32_t)n->epi;
        Np[i] = m;
    }
    G.n_nodes = nn;
    G.nodes = Np;
    G.tokenizer_dir = g->tokenizer_dir ? g->tokenizer_dir : "";

    size_t len = ignis__ir__graph__get_packed_size(&G);
    buf = malloc(len + 1);
    if (!buf) {
        st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, len);
        goto done;
    }
    ignis__ir__graph__pack(&G, buf);
    fp = fopen(path, "wb");
    if (!fp) {
        st = ig_fail(err, IG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto done;
    }
    if (fwrite(ir_magic, 1, sizeof ir_magic, fp) != sizeof ir_magic ||
        fwrite(buf, 1, len, fp) != len) {
        st = ig_fail(err, IG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        goto done;
    }
    int rc = fclose(fp);
    fp = NULL;
    if (rc != 0) st = ig_fail(err, IG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
done:
    if (fp) fclose(fp);
    free(buf);
    free(T);
    free(Tp);
    free(N);
    free(Np);
    free(shapes);
    free(parts);
    free(ins);
    free(files);
    free(pathbuf);
    return st;
}

/* ---- load */

static int stype_valid(int32_t v) {
    return (v >= IR_STYPE_F32 && v <= IR_STYPE_F16) || (v >= IR_STYPE_Q8_0 && v <= IR_STYPE_Q5_1);
}

static ig_status load_msg(const char *path, const Ignis__Ir__Graph *G, ir_graph *g, ig_err *err) {
    if (G->version != IR_SERIAL_VERSION)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: graph format version %u, this build reads %u",
                       path, G->version, IR_SERIAL_VERSION);
    if (!G->hp) return ig_fail(err, IG_ERR_FORMAT, "%s: no hyper-parameters", path);
    if (G->n_files > INT32_MAX || G->n_tensors > INT32_MAX || G->n_nodes > INT32_MAX)
        return ig_fail(err, IG_ERR_FORMAT, "%s: too many entries", path);
    const Ignis__Ir__Hparams *H = G->hp;
    ir_hparams *h = &g->hp;
    if (strlen(H->arch) >= sizeof h->arch)
        return ig_fail(err, IG_ERR_FORMAT, "%s: architecture name too long", path);
    snprintf(h->arch, sizeof h->arch, "%s", H->arch);
    h->n_layers = H->n_layers;
    h->hidden = H->hidden;
    h->n_heads = H->n_heads;
    h->n_kv_heads = H->n_kv_heads;
    h->head_dim = H->head_dim;
    h->intermediate = H->intermediate;
    h->vocab = H->vocab;
    h->max_context = H->max_context;
    h->rms_eps = H->rms_eps;
    h->rope_theta = H->rope_theta;
    if (H->rope_type < IR_ROPE_DEFAULT || H->rope_type > IR_ROPE_LONGROPE)
        return ig_fail(err, IG_ERR_FORMAT, "%s: rope type %d", path, H->rope_type);
    h->rope_type = (ir_rope_type)H->rope_type;
    h->rope_factor = H->rope_factor;
    h->rope_low_freq_factor = H->rope_low_freq_factor;
    h->rope_high_freq_factor = H->rope_high_freq_factor;
    h->rope_orig_max = H->rope_orig_max;
    if (H->n_rope_ext > IR_MAX_ROPE_EXT || (h->rope_type == IR_ROPE_LONGROPE && H->n_rope_ext < 1))
        return ig_fail(err, IG_ERR_FORMAT, "%s: %zu rope factors", path, H->n_rope_ext);
    h->rope_n_ext = (int32_t)H->n_rope_ext;
    for (size_t i = 0; i < H->n_rope_ext; i++) {
        if (!(H->rope_ext[i] > 0)) return ig_fail(err, IG_ERR_FORMAT, "%s: rope factor %zu is not positive", path, i);
        h->rope_ext[i] = H->rope_ext[i];
    }
    h->tie_embeddings = H->tie_embeddings;
    h->attn_bias = H->attn_bias;
    h->o_bias = H->o_bias;
    h->mlp_bias = H->mlp_bias;
    h->qk_norm = H->qk_norm;
    if (H->src_dtype < IG_DTYPE_F32 || H->src_dtype > IG_DTYPE_I32)
        return ig_fail(err, IG_ERR_FORMAT, "%s: source dtype %d", path, H->src_dtype);
    h->src_dtype = (ig_dtype)H->src_dtype;
    h->bos_id = H->bos_id;
    if (H->n_eos_ids > 8) return ig_fail(err, IG_ERR_FORMAT, "%s: %zu eos ids", path, H->n_eos_ids);
    h->n_eos = (int32_t)H->n_eos_ids;
    for (size_t i = 0; i < H->n_eos_ids; i++) h->eos_ids[i] = H->eos_ids[i];
    if (H->rope_dim < 0 || H->rope_dim > h->head_dim || H->rope_dim % 2 || H->sliding_window < 0 ||
        H->layer_sliding.len > IR_MAX_LAYER_TYPES || (H->mlp_act != IR_ACT_SILU && H->mlp_act != IR_ACT_GELU_TANH))
        return ig_fail(err, IG_ERR_FORMAT, "%s: bad rope_dim, sliding window or activation", path);
    h->rope_dim = H->rope_dim;
    h->rope_interleaved = H->rope_interleaved;
    h->rope_theta_local = H->rope_theta_local;
    h->sliding_window = H->sliding_window;
    for (size_t i = 0; i < H->layer_sliding.len; i++) h->layer_sliding[i] = H->layer_sliding.data[i] != 0;
    h->embed_scale = H->embed_scale;
    h->attn_scale = H->attn_scale;
    if (!(H->final_softcap >= 0) || H->final_softcap > 1e30)
        return ig_fail(err, IG_ERR_FORMAT, "%s: final logit soft-cap %g (need a finite value >= 0)", path, H->final_softcap);
    h->final_softcap = H->final_softcap;
    h->mlp_act = (ir_act)H->mlp_act;
    h->post_norms = H->post_norms;
    if (H->n_experts < 0 || H->top_k < 0 || H->top_k > H->n_experts || H->top_k > 64 || H->moe_intermediate < 0 ||
        H->shared_intermediate < 0 || (H->n_experts > 0 && H->top_k < 1))
        return ig_fail(err, IG_ERR_FORMAT, "%s: bad mixture-of-experts parameters", path);
    h->n_experts = H->n_experts;
    h->top_k = H->top_k;
    h->moe_intermediate = H->moe_intermediate;
    h->norm_topk = H->norm_topk;
    h->shared_intermediate = H->shared_intermediate;

    for (size_t i = 0; i < G->n_files; i++)
        if (ir_add_file(g, G->files[i]) != (int32_t)i)
            return ig_fail(err, IG_ERR_FORMAT, "%s: source file %s listed twice (or out of memory)",
                           path, G->files[i]);
    for (size_t i = 0; i < G->n_tensors; i++) {
        const Ignis__Ir__Tensor *m = G->tensors[i];
        ir_tensor t = {0};
        t.name = m->name;
        if (m->kind != IR_TENSOR_ACT && m->kind != IR_TENSOR_WEIGHT)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has kind %d", path, m->name, m->kind);
        t.kind = (ir_tensor_kind)m->kind;
        if (m->dtype < IG_DTYPE_F32 || m->dtype > IG_DTYPE_I32)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has dtype %d", path, m->name, m->dtype);
        t.dtype = (ig_dtype)m->dtype;
        if (m->n_shape < 1 || m->n_shape > 2)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has rank %zu", path, m->name, m->n_shape);
        t.rank = (int32_t)m->n_shape;
        for (size_t d = 0; d < m->n_shape; d++) t.shape[d] = m->shape[d];
        t.layer = m->layer;
        t.src_file = m->src_file;
        t.src_offset = m->src_offset;
        t.src_nbytes = m->src_nbytes;
        if (!stype_valid(m->src_type))
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has storage type %d", path, m->name,
                           m->src_type);
        t.src_type = (ir_stype)m->src_type;
        if (m->xform < IR_XFORM_NONE || m->xform > IR_XFORM_TIMES_TWO)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has transform %d", path, m->name, m->xform);
        t.xform = (ir_xform)m->xform;
        t.xform_heads = m->xform_heads;
        if (m->n_parts > IR_MAX_PARTS)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s has %zu parts", path, m->name, m->n_parts);
        t.n_parts = (int32_t)m->n_parts;
        t.parts = m->parts; /* copied by ir_add_tensor */
        t.interleave16 = m->interleave16;
        t.pad16 = m->pad16 != 0;
        if (ir_add_tensor(g, &t) != (int32_t)i) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < G->n_nodes; i++) {
        const Ignis__Ir__Node *m = G->nodes[i];
        ir_op op = ir_op_from_name(m->op);
        if (op == IR_OP_COUNT) return ig_fail(err, IG_ERR_FORMAT, "%s: node %zu has unknown op \"%s\"", path, i, m->op);
        if (m->n_in > IR_MAX_IN)
            return ig_fail(err, IG_ERR_FORMAT, "%s: node %zu has %zu inputs", path, i, m->n_in);
        if (m->epi < IR_EPI_STORE || m->epi > IR_EPI_SWIGLU)
            return ig_fail(err, IG_ERR_FORMAT, "%s: node %zu has epilogue %d", path, i, m->epi);
        ir_node *n = ir_add_node(g, op, m->layer);
        if (!n) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        for (size_t k = 0; k < m->n_in; k++) n->in[k] = m->in[k];
        n->out = m->out;
        n->eps = m->eps;
        n->n_heads = m->n_heads;
        n->epi = (ir_epi)m->epi;
    }
    if (G->tokenizer_dir && G->tokenizer_dir[0] && !(g->tokenizer_dir = ir_strdup(g, G->tokenizer_dir)))
        return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    ig_status st = ir_verify(g, err);
    if (st) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        return ig_fail(err, IG_ERR_FORMAT, "%s: %s", path, m);
    }
    return IG_OK;
}

ig_status ir_load(const char *path, ir_graph **out, ig_err *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return ig_fail(err, IG_ERR_IO, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    char magic[8];
    if (len < sizeof magic || fread(magic, 1, sizeof magic, fp) != sizeof magic ||
        memcmp(magic, ir_magic, sizeof magic) != 0) {
        fclose(fp);
        return ig_fail(err, IG_ERR_FORMAT, "%s: not an ignis graph (no IGGRAPH magic)", path);
    }
    len -= sizeof magic;
    uint8_t *buf = malloc(len + 1);
    if (!buf) {
        fclose(fp);
        return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, len, fp);
    fclose(fp);
    if (got != len) {
        free(buf);
        return ig_fail(err, IG_ERR_IO, "%s: short read", path);
    }
    Ignis__Ir__Graph *G = ignis__ir__graph__unpack(NULL, len, buf);
    free(buf);
    if (!G) return ig_fail(err, IG_ERR_FORMAT, "%s: corrupt graph (protobuf decode failed)", path);
    ir_graph *g = ir_graph_new();
    ig_status st = g ? load_msg(path, G, g, err) : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ignis__ir__graph__free_unpacked(G, NULL);
    if (st) {
        ir_graph_free(g);
        return st;
    }
    *out = g;
    return IG_OK;
}
