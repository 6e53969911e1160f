/* test_import.c — the HF importer, safetensors validation, weight reading and .igraph files.
 *
 * Imports every test model and checks its hyper-parameters against facts of its config.json,
 * the unfused node sequence the compiler passes expect, and weight values against the raw
 * safetensors bytes decoded here independently (own header scan, own bf16/f16 decoding).
 * Then save/load round trips, the read-time transforms (rope unpermute, 16-row interleave,
 * concatenation) on synthetic files, and bad inputs: each must fail with a message naming the
 * culprit. Bad inputs are built in temp folders under /tmp from modified copies of a model.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ir.h"

static int n_fail, n_check;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        n_check++;                                                               \
        if (!(cond)) {                                                           \
            n_fail++;                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

static char models[1024];

/* ---- small file helpers */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

static int spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

/* A temp folder whose entries symlink to model `name`'s files (config.json is copied so that
 * it can be rewritten). Returns a static buffer. */
static const char *tmp_model(const char *name, char *dir, size_t cap) {
    snprintf(dir, cap, "/tmp/ignis_test_import_XXXXXX");
    if (!mkdtemp(dir)) return NULL;
    static const char *const files[] = {
        "config.json", "generation_config.json", "model.safetensors",
        "model.safetensors.index.json", "model-00001-of-00005.safetensors",
        "model-00002-of-00005.safetensors", "model-00003-of-00005.safetensors",
        "model-00004-of-00005.safetensors", "model-00005-of-00005.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char src[2048], dst[2048];
        snprintf(src, sizeof src, "%s/%s/%s", models, name, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (access(src, R_OK) != 0) continue;
        if (i == 0) {
            size_t n;
            char *b = slurp(src, &n);
            spit(dst, b, n);
            free(b);
        } else if (symlink(src, dst) != 0) {
            return NULL;
        }
    }
    return dir;
}

static void rm_tree(const char *dir) {
    char cmd[2200];
    if (strncmp(dir, "/tmp/ignis_test_import_", 23) != 0) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static cJSON *load_json(const char *path) {
    char *b = slurp(path, NULL);
    cJSON *j = b ? cJSON_Parse(b) : NULL;
    free(b);
    return j;
}

static void save_json(const char *path, cJSON *j) {
    char *s = cJSON_Print(j);
    spit(path, s, strlen(s));
    free(s);
}

/* Import `dir` expecting failure; checks the message contains each of the NULL-ended needles. */
static void expect_fail(const char *what, const char *dir, ...) {
    ir_graph *g = NULL;
    ig_err err = {{0}};
    ig_status st = ir_import_hf(dir, &g, &err);
    CHECK(st != IG_OK, "%s: import succeeded", what);
    CHECK(g == NULL, "%s: graph returned on failure", what);
    ir_graph_free(g);
    if (getenv("IGNIS_TEST_VERBOSE")) printf("  %-22s -> %s: %s\n", what, ig_status_name(st), err.msg);
    va_list ap;
    va_start(ap, dir);
    for (const char *s; (s = va_arg(ap, const char *));)
        CHECK(strstr(err.msg, s) != NULL, "%s: message \"%s\" does not name \"%s\"", what, err.msg, s);
    va_end(ap);
}

/* ---- independent safetensors access: locate a tensor's bytes by scanning the header text */

typedef struct raw_tensor {
    char dtype[8];
    const uint8_t *data;
    size_t nbytes;
} raw_tensor;

static int raw_find(const char *file_bytes, const char *name, raw_tensor *r) {
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(uint8_t)file_bytes[i] << (8 * i);
    char key[256];
    snprintf(key, sizeof key, "\"%s\"", name);
    char *hdr = strndup(file_bytes + 8, hlen);
    char *p = strstr(hdr, key);
    if (!p) {
        free(hdr);
        return 0;
    }
    char *dt = strstr(p, "\"dtype\"");
    char *off = strstr(p, "\"data_offsets\"");
    unsigned long long b, e;
    int ok = dt && off && sscanf(strchr(dt + 7, '"') + 1, "%7[A-Z0-9]", r->dtype) == 1 &&
             sscanf(strchr(off, '[') + 1, "%llu , %llu", &b, &e) == 2;
    free(hdr);
    if (!ok) return 0;
    r->data = (const uint8_t *)file_bytes + 8 + hlen + b;
    r->nbytes = (size_t)(e - b);
    return 1;
}

/* Decodes element i with arithmetic (not bit tricks), independent of sources.c. */
static double raw_elem(const raw_tensor *r, size_t i) {
    if (!strcmp(r->dtype, "F32")) {
        float f;
        memcpy(&f, r->data + 4 * i, 4);
        return f;
    }
    unsigned h = r->data[2 * i] | (unsigned)r->data[2 * i + 1] << 8;
    int sign = h >> 15 ? -1 : 1;
    if (!strcmp(r->dtype, "BF16")) {
        int e = (h >> 7) & 0xff, m = h & 0x7f;
        if (e == 0) return sign * ldexp(m, -126 - 7);
        return sign * ldexp(128 + m, e - 127 - 7);
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff; /* F16 */
    if (e == 31) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp(m, -14 - 10);
    return sign * ldexp(1024 + m, e - 15 - 10);
}

/* Compares weight `name` read through ir_weight_read_f32 with the raw bytes at several spots. */
static void check_weight_values(const char *model, ir_graph *g, const char *name, const char *file) {
    ir_tensor *t = ir_tensor_by_name(g, name);
    CHECK(t != NULL, "%s: no tensor %s", model, name);
    if (!t) return;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/%s", models, model, file);
    size_t flen;
    char *bytes = slurp(path, &flen);
    raw_tensor r;
    CHECK(bytes && raw_find(bytes, name, &r), "%s: cannot find %s in %s", model, name, path);
    if (!bytes) return;
    size_t n = (size_t)t->shape[0] * (size_t)(t->rank == 2 ? t->shape[1] : 1);
    float *buf = malloc(n * sizeof *buf);
    ir_sources *s = ir_sources_open(g);
    ig_err err = {{0}};
    ig_status st = ir_weight_read_f32(s, g, t, buf, &err);
    CHECK(st == IG_OK, "%s: reading %s: %s", model, name, err.msg);
    size_t esz = !strcmp(r.dtype, "F32") ? 4 : 2;
    CHECK(r.nbytes == n * esz, "%s: %s: %zu raw bytes for %zu elements", model, name, r.nbytes, n);
    size_t spots[] = {0, 1, 7, n / 3, n / 2, n - 2, n - 1};
    int nonzero = 0;
    for (size_t k = 0; st == IG_OK && k < sizeof spots / sizeof spots[0]; k++) {
        size_t i = spots[k];
        double want = raw_elem(&r, i);
        CHECK(buf[i] == (float)want, "%s: %s[%zu] = %.9g, raw bytes say %.9g", model, name, i,
              buf[i], want);
        nonzero += buf[i] != 0;
    }
    CHECK(nonzero > 0, "%s: %s reads as zeros", model, name);
    ir_sources_close(s);
    free(buf);
    free(bytes);
}

/* ---- per-model expectations */

typedef struct model_facts {
    const char *name, *arch;
    int layers, hidden, heads, kv_heads, head_dim, inter, vocab, max_ctx;
    double eps, theta;
    ir_rope_type rope;
    double factor;
    int tied, attn_bias, qk_norm, n_files;
    ig_dtype dtype;
    int bos, eos;
    const char *weight, *weight_file; /* a weight to compare against raw bytes */
} model_facts;

static const model_facts facts[] = {
    {"llama-gqa", "LlamaForCausalLM", 3, 128, 8, 2, 16, 352, 1024, 256, 1e-5, 10000, IR_ROPE_DEFAULT,
     1.0, 0, 0, 0, 1, IG_DTYPE_F32, 1, 2, "model.layers.2.self_attn.k_proj.weight", "model.safetensors"},
    {"llama3-rope-tied", "LlamaForCausalLM", 2, 96, 6, 2, 16, 256, 768, 512, 1e-5, 500000,
     IR_ROPE_LLAMA3, 8.0, 1, 0, 0, 1, IG_DTYPE_BF16, 1, 2, "model.layers.1.mlp.down_proj.weight",
     "model.safetensors"},
    {"qwen2-bias-tied", "Qwen2ForCausalLM", 2, 128, 4, 2, 32, 384, 1000, 512, 1e-6, 1000000,
     IR_ROPE_DEFAULT, 1.0, 1, 1, 0, 1, IG_DTYPE_BF16, -1, -1, "model.layers.0.self_attn.q_proj.bias",
     "model.safetensors"},
    {"qwen3-qknorm", "Qwen3ForCausalLM", 2, 128, 4, 2, 48, 320, 1024, 512, 1e-6, 1000000,
     IR_ROPE_DEFAULT, 1.0, 0, 0, 1, 1, IG_DTYPE_F16, -1, -1, "model.layers.1.self_attn.q_proj.weight",
     "model.safetensors"},
    {"mistral-sharded", "MistralForCausalLM", 2, 128, 8, 4, 16, 256, 512, 512, 1e-5, 10000,
     IR_ROPE_DEFAULT, 1.0, 0, 0, 0, 5, IG_DTYPE_F32, 1, 2, "model.layers.1.self_attn.o_proj.weight",
     "model-00003-of-00005.safetensors"},
};

static int act_cols(const ir_graph *g, int32_t id) { return id >= 0 ? (int)g->tensors[id].shape[1] : -1; }

/* The unfused sequence the compiler passes pattern-match (see the brief in import_hf.c). */
static void check_node_sequence(const model_facts *f, const ir_graph *g) {
    const ir_hparams *h = &g->hp;
    int per = 16 + 2 * h->qk_norm;
    CHECK(g->n_nodes == 4 + per * h->n_layers, "%s: %d nodes, expected 1 + %d per layer + 3", f->name,
          g->n_nodes, per);
    if (g->n_nodes != 4 + per * h->n_layers) return;
    const ir_node *n = g->nodes;
    CHECK(n[0].op == IR_OP_EMBED && n[0].layer == -1, "%s: node 0 is %s", f->name, ir_op_name(n[0].op));
    CHECK(g->tensors[n[0].in[0]].dtype == IG_DTYPE_I32 && act_cols(g, n[0].in[0]) == 1,
          "%s: embed ids not i32 [.,1]", f->name);
    CHECK(strcmp(g->tensors[n[0].in[1]].name, "model.embed_tokens.weight") == 0, "%s: embed table",
          f->name);
    int32_t x = n[0].out;
    for (int L = 0; L < h->n_layers; L++) {
        const ir_node *l = &g->nodes[1 + per * L];
        ir_op want[18] = {IR_OP_RMSNORM, IR_OP_MATMUL, IR_OP_MATMUL, IR_OP_MATMUL};
        int k = 4;
        if (h->qk_norm) want[k++] = IR_OP_HEAD_RMSNORM, want[k++] = IR_OP_HEAD_RMSNORM;
        ir_op rest[] = {IR_OP_ROPE, IR_OP_ROPE, IR_OP_KV_WRITE, IR_OP_ATTENTION, IR_OP_MATMUL,
                        IR_OP_ADD, IR_OP_RMSNORM, IR_OP_MATMUL, IR_OP_MATMUL, IR_OP_SILU_MUL,
                        IR_OP_MATMUL, IR_OP_ADD};
        memcpy(want + k, rest, sizeof rest);
        for (int i = 0; i < per; i++) {
            CHECK(l[i].op == want[i] && l[i].layer == L, "%s: layer %d node %d is %s (layer %d), expected %s",
                  f->name, L, i, ir_op_name(l[i].op), l[i].layer, ir_op_name(want[i]));
        }
        CHECK(l[0].in[0] == x, "%s: layer %d does not read the previous residual", f->name, L);
        CHECK(l[0].eps == (float)f->eps, "%s: rms eps %g", f->name, l[0].eps);
        const char *suffix[] = {"q_proj", "k_proj", "v_proj"};
        for (int i = 0; i < 3; i++) {
            char nm[128];
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.%s.weight", L, suffix[i]);
            CHECK(l[1 + i].in[0] == l[0].out && !strcmp(g->tensors[l[1 + i].in[1]].name, nm),
                  "%s: layer %d matmul %d weight %s", f->name, L, i, g->tensors[l[1 + i].in[1]].name);
            CHECK((l[1 + i].in[2] >= 0) == (f->attn_bias != 0), "%s: layer %d qkv bias presence", f->name, L);
        }
        int r = 4 + 2 * h->qk_norm;
        int32_t q_in = h->qk_norm ? l[4].out : l[1].out, k_in = h->qk_norm ? l[5].out : l[2].out;
        if (h->qk_norm) {
            CHECK(l[4].in[0] == l[1].out && l[4].n_heads == f->heads, "%s: q head norm", f->name);
            CHECK(l[5].in[0] == l[2].out && l[5].n_heads == f->kv_heads, "%s: k head norm", f->name);
        }
        CHECK(l[r].in[0] == q_in && l[r].n_heads == f->heads, "%s: rope q", f->name);
        CHECK(l[r + 1].in[0] == k_in && l[r + 1].n_heads == f->kv_heads, "%s: rope k", f->name);
        CHECK(l[r + 2].in[0] == l[r + 1].out && l[r + 2].in[1] == l[3].out && l[r + 2].out == -1,
              "%s: kv_write(kr, v)", f->name);
        CHECK(l[r + 3].in[0] == l[r].out && act_cols(g, l[r + 3].out) == f->heads * f->head_dim,
              "%s: attention(qr)", f->name);
        CHECK(l[r + 5].in[0] == x && l[r + 5].in[1] == l[r + 4].out, "%s: add(x, o)", f->name);
        CHECK(l[r + 6].in[0] == l[r + 5].out && l[r + 7].in[0] == l[r + 6].out &&
                  l[r + 8].in[0] == l[r + 6].out, "%s: post-attention norm feeds gate and up", f->name);
        CHECK(l[r + 9].in[0] == l[r + 7].out && l[r + 9].in[1] == l[r + 8].out, "%s: silu_mul(g, u)", f->name);
        CHECK(l[r + 10].in[0] == l[r + 9].out, "%s: down(m)", f->name);
        CHECK(l[r + 11].in[0] == l[r + 5].out && l[r + 11].in[1] == l[r + 10].out, "%s: add(x2, d)", f->name);
        CHECK(act_cols(g, l[r + 7].out) == f->inter && act_cols(g, l[r + 11].out) == f->hidden,
              "%s: gate / residual cols", f->name);
        x = l[r + 11].out;
    }
    const ir_node *t = &g->nodes[g->n_nodes - 3];
    CHECK(t[0].op == IR_OP_GATHER_ROWS && t[0].in[0] == x && t[0].layer == -1, "%s: gather_rows", f->name);
    CHECK(t[1].op == IR_OP_RMSNORM && t[1].in[0] == t[0].out &&
          !strcmp(g->tensors[t[1].in[1]].name, "model.norm.weight"), "%s: final norm", f->name);
    CHECK(t[2].op == IR_OP_MATMUL && t[2].in[0] == t[1].out && act_cols(g, t[2].out) == f->vocab,
          "%s: lm head", f->name);
    const char *head = g->tensors[t[2].in[1]].name;
    CHECK(!strcmp(head, f->tied ? "model.embed_tokens.weight" : "lm_head.weight"), "%s: head weight %s",
          f->name, head);
}

static void check_equal_graphs(const char *what, const ir_graph *a, const ir_graph *b) {
    const ir_hparams *x = &a->hp, *y = &b->hp;
    CHECK(!strcmp(x->arch, y->arch) && x->n_layers == y->n_layers && x->hidden == y->hidden &&
              x->n_heads == y->n_heads && x->n_kv_heads == y->n_kv_heads && x->head_dim == y->head_dim &&
              x->intermediate == y->intermediate && x->vocab == y->vocab &&
              x->max_context == y->max_context && x->rms_eps == y->rms_eps &&
              x->rope_theta == y->rope_theta && x->rope_type == y->rope_type &&
              x->rope_factor == y->rope_factor && x->rope_low_freq_factor == y->rope_low_freq_factor &&
              x->rope_high_freq_factor == y->rope_high_freq_factor && x->rope_orig_max == y->rope_orig_max &&
              x->tie_embeddings == y->tie_embeddings && x->attn_bias == y->attn_bias &&
              x->o_bias == y->o_bias && x->mlp_bias == y->mlp_bias && x->qk_norm == y->qk_norm &&
              x->src_dtype == y->src_dtype && x->bos_id == y->bos_id && x->n_eos == y->n_eos &&
              !memcmp(x->eos_ids, y->eos_ids, sizeof x->eos_ids) && x->rope_dim == y->rope_dim &&
              x->rope_interleaved == y->rope_interleaved && x->rope_theta_local == y->rope_theta_local &&
              x->sliding_window == y->sliding_window && !memcmp(x->layer_sliding, y->layer_sliding, sizeof x->layer_sliding) &&
              x->embed_scale == y->embed_scale && x->attn_scale == y->attn_scale && x->mlp_act == y->mlp_act &&
              x->post_norms == y->post_norms && x->n_experts == y->n_experts && x->top_k == y->top_k &&
              x->moe_intermediate == y->moe_intermediate && x->norm_topk == y->norm_topk &&
              x->shared_intermediate == y->shared_intermediate,
          "%s: hparams differ", what);
    CHECK(a->n_files == b->n_files, "%s: files", what);
    for (int i = 0; i < a->n_files && i < b->n_files; i++)
        CHECK(!strcmp(a->files[i], b->files[i]), "%s: file %d %s vs %s", what, i, a->files[i], b->files[i]);
    CHECK((a->tokenizer_dir == NULL) == (b->tokenizer_dir == NULL) &&
              (!a->tokenizer_dir || !strcmp(a->tokenizer_dir, b->tokenizer_dir)),
          "%s: tokenizer_dir", what);
    CHECK(a->n_tensors == b->n_tensors && a->n_nodes == b->n_nodes, "%s: counts", what);
    if (a->n_tensors != b->n_tensors || a->n_nodes != b->n_nodes) return;
    for (int i = 0; i < a->n_tensors; i++) {
        const ir_tensor *s = &a->tensors[i], *t = &b->tensors[i];
        CHECK(!strcmp(s->name, t->name) && s->id == t->id && s->kind == t->kind &&
                  s->dtype == t->dtype && s->rank == t->rank && s->shape[0] == t->shape[0] &&
                  s->shape[1] == t->shape[1] && s->layer == t->layer && s->src_file == t->src_file &&
                  s->src_offset == t->src_offset && s->src_nbytes == t->src_nbytes &&
                  s->src_type == t->src_type && s->xform == t->xform &&
                  s->xform_heads == t->xform_heads && s->n_parts == t->n_parts &&
                  (s->n_parts <= 0 || !memcmp(s->parts, t->parts, sizeof *s->parts * (size_t)s->n_parts)) &&
                  s->interleave16 == t->interleave16,
              "%s: tensor %s differs", what, s->name);
    }
    CHECK(!memcmp(a->nodes, b->nodes, (size_t)a->n_nodes * sizeof *a->nodes), "%s: nodes differ", what);
}

static void test_models(void) {
    for (size_t m = 0; m < sizeof facts / sizeof facts[0]; m++) {
        const model_facts *f = &facts[m];
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", models, f->name);
        ir_graph *g = NULL;
        ig_err err = {{0}};
        ig_status st = ir_import_hf(dir, &g, &err);
        CHECK(st == IG_OK, "%s: import failed: %s", f->name, err.msg);
        if (st) continue;
        const ir_hparams *h = &g->hp;
        CHECK(!strcmp(h->arch, f->arch), "%s: arch %s", f->name, h->arch);
        CHECK(h->n_layers == f->layers && h->hidden == f->hidden && h->n_heads == f->heads &&
                  h->n_kv_heads == f->kv_heads && h->head_dim == f->head_dim &&
                  h->intermediate == f->inter && h->vocab == f->vocab && h->max_context == f->max_ctx,
              "%s: dims L%d D%d H%d KV%d hd%d I%d V%d ctx%d", f->name, h->n_layers, h->hidden,
              h->n_heads, h->n_kv_heads, h->head_dim, h->intermediate, h->vocab, h->max_context);
        CHECK(h->rms_eps == f->eps && h->rope_theta == f->theta, "%s: eps %g theta %g", f->name,
              h->rms_eps, h->rope_theta);
        CHECK(h->rope_type == f->rope && h->rope_factor == f->factor, "%s: rope %d factor %g", f->name,
              h->rope_type, h->rope_factor);
        if (f->rope == IR_ROPE_LLAMA3)
            CHECK(h->rope_low_freq_factor == 1.0 && h->rope_high_freq_factor == 4.0 && h->rope_orig_max == 64,
                  "%s: llama3 rope params", f->name);
        CHECK(h->tie_embeddings == f->tied, "%s: tied %d", f->name, h->tie_embeddings);
        CHECK(h->attn_bias == f->attn_bias && h->o_bias == 0 && h->mlp_bias == 0, "%s: biases", f->name);
        CHECK(h->qk_norm == f->qk_norm, "%s: qk_norm", f->name);
        CHECK(h->src_dtype == f->dtype, "%s: src dtype %d", f->name, h->src_dtype);
        CHECK(h->bos_id == f->bos, "%s: bos %d", f->name, h->bos_id);
        CHECK(f->eos < 0 ? h->n_eos == 0 : (h->n_eos == 1 && h->eos_ids[0] == f->eos), "%s: eos", f->name);
        CHECK(g->n_files == f->n_files, "%s: %d files", f->name, g->n_files);
        for (int i = 0; i < g->n_files; i++) CHECK(g->files[i][0] == '/', "%s: relative path %s", f->name, g->files[i]);
        CHECK(g->tokenizer_dir == NULL, "%s: tokenizer_dir without tokenizer.json", f->name);
        int nw = 0;
        for (int i = 0; i < g->n_tensors; i++) nw += g->tensors[i].kind == IR_TENSOR_WEIGHT;
        int want_w = 2 + !f->tied + f->layers * (9 + 3 * f->attn_bias + 2 * f->qk_norm);
        CHECK(nw == want_w, "%s: %d weights, expected %d", f->name, nw, want_w);
        ir_tensor *q = ir_tensor_by_name(g, "model.layers.0.self_attn.q_proj.weight");
        CHECK(q && q->rank == 2 && q->shape[0] == f->heads * f->head_dim && q->shape[1] == f->hidden &&
                  q->layer == 0 && q->dtype == f->dtype,
              "%s: q_proj tensor", f->name);
        ir_tensor *nrm = ir_tensor_by_name(g, "model.norm.weight");
        CHECK(nrm && nrm->rank == 1 && nrm->shape[0] == f->hidden && nrm->layer == -1, "%s: norm tensor", f->name);
        CHECK(ir_verify(g, &err) == IG_OK, "%s: verify: %s", f->name, err.msg);
        check_node_sequence(f, g);
        check_weight_values(f->name, g, f->weight, f->weight_file);
        check_weight_values(f->name, g, "model.embed_tokens.weight",
                            m == 4 ? "model-00001-of-00005.safetensors" : "model.safetensors");

        /* every weight reads without error */
        ir_sources *s = ir_sources_open(g);
        for (int i = 0; i < g->n_tensors; i++) {
            ir_tensor *t = &g->tensors[i];
            if (t->kind != IR_TENSOR_WEIGHT) continue;
            float *buf = malloc(sizeof(float) * (size_t)(t->shape[0] * (t->rank == 2 ? t->shape[1] : 1)));
            st = ir_weight_read_f32(s, g, t, buf, &err);
            CHECK(st == IG_OK, "%s: read %s: %s", f->name, t->name, err.msg);
            free(buf);
        }
        ir_sources_close(s);

        /* dump mentions the essentials */
        char *dump = NULL;
        size_t dlen = 0;
        FILE *mf = open_memstream(&dump, &dlen);
        ir_dump(g, mf);
        fclose(mf);
        CHECK(strstr(dump, f->arch) && strstr(dump, "model.layers.0.self_attn.q_proj.weight") &&
                  strstr(dump, "kv_write") && strstr(dump, "logits"),
              "%s: dump lacks essentials", f->name);
        free(dump);

        /* save -> load, and ir_import_any on the folder and on the .igraph */
        char path[256];
        snprintf(path, sizeof path, "/tmp/ignis_test_import_%d_%s.igraph", (int)getpid(), f->name);
        st = ir_save(g, path, &err);
        CHECK(st == IG_OK, "%s: save: %s", f->name, err.msg);
        ir_graph *g2 = NULL;
        st = ir_load(path, &g2, &err);
        CHECK(st == IG_OK, "%s: load: %s", f->name, err.msg);
        if (g2) check_equal_graphs(f->name, g, g2);
        ir_graph_free(g2);
        g2 = NULL;
        st = ir_import_any(path, &g2, &err);
        CHECK(st == IG_OK && g2 && g2->n_nodes == g->n_nodes, "%s: import_any(igraph): %s", f->name, err.msg);
        ir_graph_free(g2);
        g2 = NULL;
        st = ir_import_any(dir, &g2, &err);
        CHECK(st == IG_OK && g2, "%s: import_any(dir): %s", f->name, err.msg);
        if (g2) check_equal_graphs(f->name, g, g2);
        ir_graph_free(g2);
        /* a damaged .igraph fails cleanly */
        size_t len;
        char *bytes = slurp(path, &len);
        if (bytes) {
            spit(path, bytes, len / 2);
            g2 = NULL;
            st = ir_load(path, &g2, &err);
            CHECK(st != IG_OK && g2 == NULL && strstr(err.msg, path), "%s: truncated igraph: %s", f->name, err.msg);
            bytes[0] = 'X';
            spit(path, bytes, len);
            st = ir_load(path, &g2, &err);
            CHECK(st != IG_OK && strstr(err.msg, "magic"), "%s: bad magic: %s", f->name, err.msg);
            free(bytes);
        }
        unlink(path);
        ir_graph_free(g);
    }
}

/* ---- read-time transforms on synthetic files */

static void test_transforms(void) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/ignis_test_import_%d.bin", (int)getpid());
    /* f32 region: 8 rows x 3 cols of the rope-permuted layout, then gate [20][2], up [20][2];
     * f16 and bf16 regions with special values */
    enum { R = 8, C = 3, H = 2, I = 20 };
    float hf[R][C], stored[R][C], gate[I][2], up[I][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) hf[r][c] = (float)(r * 10 + c);
    int Dh = R / H, half = Dh / 2;
    for (int h = 0; h < H; h++) /* llama.cpp permute, HF -> GGUF */
        for (int i = 0; i < half; i++)
            for (int s = 0; s < 2; s++) memcpy(stored[h * Dh + 2 * i + s], hf[h * Dh + s * half + i], sizeof hf[0]);
    for (int r = 0; r < I; r++) {
        gate[r][0] = (float)r, gate[r][1] = (float)r + 0.5f;
        up[r][0] = 100.0f + (float)r, up[r][1] = 100.5f + (float)r;
    }
    uint16_t f16[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x7c00, 0xfc00, 0x8001, 0x7bff, 0x3555};
    float f16_want[] = {ldexpf(1, -24), ldexpf(1023, -24), ldexpf(1, -14), 1.0f, -2.0f, INFINITY,
                        -INFINITY, -ldexpf(1, -24), 65504.0f, 0.333251953125f};
    uint16_t bf16[] = {0x3f80, 0xc040, 0x0001, 0x7f80, 0x4049};
    float bf16_want[] = {1.0f, -3.0f, ldexpf(1, -133), INFINITY, 3.140625f};
    FILE *fp = fopen(path, "wb");
    fwrite(stored, sizeof stored, 1, fp);
    fwrite(gate, sizeof gate, 1, fp);
    fwrite(up, sizeof up, 1, fp);
    fwrite(f16, sizeof f16, 1, fp);
    fwrite(bf16, sizeof bf16, 1, fp);
    fclose(fp);

    ir_graph *g = ir_graph_new();
    int32_t fi = ir_add_file(g, path);
    CHECK(ir_add_file(g, path) == fi, "ir_add_file dedups");
    ir_tensor t = {0};
    t.kind = IR_TENSOR_WEIGHT;
    t.rank = 2;
    t.src_file = fi;
    t.layer = -1;
    t.name = "wq";
    t.shape[0] = R, t.shape[1] = C;
    t.src_nbytes = sizeof stored;
    t.xform = IR_XFORM_UNPERMUTE_ROPE;
    t.xform_heads = H;
    int32_t wq = ir_add_tensor(g, &t);
    t.xform = IR_XFORM_NONE, t.xform_heads = 0;
    t.name = "gate", t.shape[0] = I, t.shape[1] = 2, t.src_offset = sizeof stored, t.src_nbytes = sizeof gate;
    int32_t wg = ir_add_tensor(g, &t);
    t.name = "up", t.src_offset += sizeof gate;
    int32_t wu = ir_add_tensor(g, &t);
    t.name = "gate_up", t.shape[0] = 2 * I, t.n_parts = 2, t.parts = (int32_t[]){wg, wu}, t.interleave16 = 1;
    t.src_file = -1;
    int32_t wgu = ir_add_tensor(g, &t);
    t.name = "cat", t.interleave16 = 0;
    int32_t wcat = ir_add_tensor(g, &t);
    ir_tensor v = {0};
    v.kind = IR_TENSOR_WEIGHT, v.rank = 1, v.layer = -1, v.src_file = fi;
    v.name = "f16", v.shape[0] = 10, v.src_type = IR_STYPE_F16, v.dtype = IG_DTYPE_F16;
    v.src_offset = sizeof stored + sizeof gate + sizeof up, v.src_nbytes = sizeof f16;
    int32_t wf16 = ir_add_tensor(g, &v);
    v.name = "bf16", v.shape[0] = 5, v.src_type = IR_STYPE_BF16, v.dtype = IG_DTYPE_BF16;
    v.src_offset += sizeof f16, v.src_nbytes = sizeof bf16;
    int32_t wbf16 = ir_add_tensor(g, &v);
    v.name = "q4", v.shape[0] = 32, v.src_type = IR_STYPE_Q4_0, v.src_offset = 0, v.src_nbytes = 18;
    int32_t wq4 = ir_add_tensor(g, &v);
    v.name = "past_end", v.shape[0] = 4, v.src_type = IR_STYPE_F32, v.src_offset = 1u << 20, v.src_nbytes = 16;
    int32_t wpast = ir_add_tensor(g, &v);
    ig_err err = {{0}};
    CHECK(ir_verify(g, &err) == IG_OK, "synthetic verify: %s", err.msg);

    ir_sources *s = ir_sources_open(g);
    float out[2 * I * 2];
    CHECK(ir_weight_read_f32(s, g, &g->tensors[wq], out, &err) == IG_OK, "read wq: %s", err.msg);
    CHECK(!memcmp(out, hf, sizeof hf), "rope unpermute does not give back the HF rows (row1 = %g)", out[C]);
    CHECK(ir_weight_read_f32(s, g, &g->tensors[wgu], out, &err) == IG_OK, "read gate_up: %s", err.msg);
    int bad = 0;
    for (int r = 0, o = 0; r < I; r += 16) {
        int m = I - r < 16 ? I - r : 16;
        for (int i = 0; i < m; i++, o++) bad += out[2 * o] != gate[r + i][0] || out[2 * o + 1] != gate[r + i][1];
        for (int i = 0; i < m; i++, o++) bad += out[2 * o] != up[r + i][0] || out[2 * o + 1] != up[r + i][1];
    }
    CHECK(bad == 0 && out[2 * 16] == 100.0f && out[2 * 32] == 16.0f, "interleave16 order wrong (%d bad)", bad);
    CHECK(ir_weight_read_f32(s, g, &g->tensors[wcat], out, &err) == IG_OK, "read cat: %s", err.msg);
    CHECK(!memcmp(out, gate, sizeof gate) && !memcmp(out + 2 * I, up, sizeof up), "concat order wrong");
    CHECK(ir_weight_read_f32(s, g, &g->tensors[wf16], out, &err) == IG_OK, "read f16: %s", err.msg);
    for (int i = 0; i < 10; i++) CHECK(out[i] == f16_want[i], "f16 %04x -> %.9g, want %.9g", f16[i], out[i], f16_want[i]);
    CHECK(ir_weight_read_f32(s, g, &g->tensors[wbf16], out, &err) == IG_OK, "read bf16: %s", err.msg);
    for (int i = 0; i < 5; i++) CHECK(out[i] == bf16_want[i], "bf16 %04x -> %.9g, want %.9g", bf16[i], out[i], bf16_want[i]);
    ig_status st = ir_weight_read_f32(s, g, &g->tensors[wpast], out, &err);
    CHECK(st != IG_OK && strstr(err.msg, path) && strstr(err.msg, "past_end"), "read past end: %s", err.msg);
    st = ir_weight_read_f32(s, g, &g->tensors[wq4], out, &err); /* decodes with dequant.c, or refuses */
    CHECK(st == IG_OK || st == IG_ERR_UNSUPPORTED, "q4_0: %s", err.msg);
    /* truncate the file while mapped: must be an error, not SIGBUS */
    CHECK(truncate(path, 64) == 0, "truncate");
    st = ir_weight_read_f32(s, g, &g->tensors[wgu], out, &err);
    CHECK(st != IG_OK && strstr(err.msg, path) && strstr(err.msg, "truncated"), "read truncated: %s", err.msg);
    ir_sources_close(s);

    /* verifier: matmul K mismatch, bad ids, missing input */
    int32_t xa = ir_add_act(g, "x", 5, -1), ya = ir_add_act(g, "y", R, -1);
    ir_node *n = ir_add_node(g, IR_OP_MATMUL, -1);
    n->in[0] = xa, n->in[1] = wq, n->out = ya;
    st = ir_verify(g, &err);
    CHECK(st == IG_ERR_MISMATCH && strstr(err.msg, "wq") && strstr(err.msg, "x"), "K mismatch: %s", err.msg);
    g->tensors[xa].shape[1] = C;
    CHECK(ir_verify(g, &err) == IG_OK, "fixed K: %s", err.msg);
    g->nodes[0].in[2] = 999;
    CHECK(ir_verify(g, &err) != IG_OK, "bad id accepted");
    g->nodes[0].in[2] = -1, g->nodes[0].in[1] = -1;
    CHECK(ir_verify(g, &err) != IG_OK && strstr(err.msg, "required"), "missing input: %s", err.msg);
    g->nodes[0].in[1] = wq, g->nodes[0].in[3] = wq;
    CHECK(ir_verify(g, &err) != IG_OK && strstr(err.msg, "arity"), "arity: %s", err.msg);
    ir_graph_free(g);
    unlink(path);

    /* op table */
    for (int op = 0; op < IR_OP_COUNT; op++)
        CHECK(ir_op_from_name(ir_op_name((ir_op)op)) == op, "op name round trip %d", op);
    CHECK(ir_op_from_name("nope") == IR_OP_COUNT && ir_op_arity(IR_OP_MATMUL) == 3 &&
              ir_op_is_fused(IR_OP_NORM_MATMUL) && !ir_op_is_fused(IR_OP_ROPE),
          "op tables");
    CHECK(!strcmp(ir_stype_name(IR_STYPE_Q4_K), "q4_k") && !strcmp(ig_status_name(IG_ERR_IO), "io error"),
          "names");
}

/* ---- bad inputs */

typedef void (*cfg_edit)(cJSON *cfg);

static void edit_cfg(const char *dir, cfg_edit fn) {
    char p[1200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    cJSON *j = load_json(p);
    fn(j);
    save_json(p, j);
    cJSON_Delete(j);
}

static void del_hidden(cJSON *c) { cJSON_DeleteItemFromObject(c, "hidden_size"); }
static void del_eps(cJSON *c) { cJSON_DeleteItemFromObject(c, "rms_norm_eps"); }
static void bad_arch(cJSON *c) {
    cJSON_ReplaceItemInObject(c, "architectures", cJSON_CreateStringArray((const char *[]){"GPT2LMHeadModel"}, 1));
}
static void rope_yarn(cJSON *c) {
    cJSON *rs = cJSON_GetObjectItem(c, "rope_scaling");
    cJSON_ReplaceItemInObject(rs, "rope_type", cJSON_CreateString("yarn"));
}
static void rope_dynamic_new(cJSON *c) {
    cJSON *rp = cJSON_GetObjectItem(c, "rope_parameters");
    cJSON_ReplaceItemInObject(rp, "rope_type", cJSON_CreateString("dynamic"));
}
static void rope_linear_alias(cJSON *c) {
    cJSON *rs = cJSON_CreateObject();
    cJSON_AddStringToObject(rs, "type", "linear");
    cJSON_AddNumberToObject(rs, "factor", 2.5);
    cJSON_DeleteItemFromObject(c, "rope_parameters");
    cJSON_AddNumberToObject(c, "rope_theta", 20000);
    cJSON_AddItemToObject(c, "rope_scaling", rs);
}
static void llama3_no_low(cJSON *c) {
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(c, "rope_scaling"), "low_freq_factor");
}
static void untie(cJSON *c) { cJSON_ReplaceItemInObject(c, "tie_word_embeddings", cJSON_CreateFalse()); }
static void mistral_sw(cJSON *c) { cJSON_ReplaceItemInObject(c, "sliding_window", cJSON_CreateNumber(128)); }
static void qwen_sw(cJSON *c) {
    cJSON_ReplaceItemInObject(c, "use_sliding_window", cJSON_CreateTrue());
    cJSON_ReplaceItemInObject(c, "sliding_window", cJSON_CreateNumber(64));
    cJSON_ReplaceItemInObject(c, "max_window_layers", cJSON_CreateNumber(0));
    cJSON_DeleteItemFromObject(c, "layer_types");
}
static void softcap_neg(cJSON *c) { cJSON_ReplaceItemInObject(c, "final_logit_softcapping", cJSON_CreateNumber(-30)); }
static void attn_softcap_str(cJSON *c) {
    cJSON_ReplaceItemInObject(c, "attn_logit_softcapping", cJSON_CreateString("50"));
}
static void topk_over(cJSON *c) { cJSON_ReplaceItemInObject(c, "num_experts_per_tok", cJSON_CreateNumber(5)); }
static void mlp_only(cJSON *c) {
    int l[1] = {1};
    cJSON_ReplaceItemInObject(c, "mlp_only_layers", cJSON_CreateIntArray(l, 1));
}
static void bad_layer_type(cJSON *c) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(c, "layer_types"), 1, cJSON_CreateString("chunked_attention"));
}
static void head_dim_null(cJSON *c) { cJSON_ReplaceItemInObject(c, "head_dim", cJSON_CreateNull()); }
static void gelu(cJSON *c) { cJSON_ReplaceItemInObject(c, "hidden_act", cJSON_CreateString("gelu")); }
/* a factor whose product with head_dim overflows int (the fuzzer's find: an undefined cast) */
static void rotary_huge(cJSON *c) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(c, "rope_parameters"), "partial_rotary_factor", cJSON_CreateNumber(1e300));
}
static void huge_layers(cJSON *c) { cJSON_ReplaceItemInObject(c, "num_hidden_layers", cJSON_CreateNumber(2000000000)); }
static void eos_past_vocab(cJSON *c) {
    cJSON_DeleteItemFromObject(c, "eos_token_id");
    cJSON_AddItemToObject(c, "eos_token_id", cJSON_CreateNumber(1000000));
}
static void bos_past_vocab(cJSON *c) {
    cJSON_DeleteItemFromObject(c, "bos_token_id");
    cJSON_AddItemToObject(c, "bos_token_id", cJSON_CreateNumber(1000000));
}
static void attn_bias_on(cJSON *c) { cJSON_ReplaceItemInObject(c, "attention_bias", cJSON_CreateTrue()); }

/* Rewrites the safetensors header of dir/model.safetensors (a symlink replaced by a real file). */
typedef void (*hdr_edit)(cJSON *hdr);
static void edit_st(const char *dir, const char *file, hdr_edit fn, int64_t hlen_delta) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    size_t n;
    char *b = slurp(p, &n);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(uint8_t)b[i] << (8 * i);
    char *ht = strndup(b + 8, hl);
    cJSON *h = cJSON_Parse(ht);
    free(ht);
    fn(h);
    char *nh = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    uint64_t nl = strlen(nh), wl = nl + (uint64_t)hlen_delta;
    unlink(p);
    FILE *f = fopen(p, "wb");
    for (int i = 0; i < 8; i++) fputc((int)((wl >> (8 * i)) & 0xff), f);
    fwrite(nh, 1, nl, f);
    fwrite(b + 8 + hl, 1, n - 8 - hl, f);
    fclose(f);
    free(nh);
    free(b);
}

static const char *const QW = "model.layers.0.self_attn.q_proj.weight";
static void hdr_offsets_past_end(cJSON *h) {
    cJSON *off = cJSON_GetObjectItem(cJSON_GetObjectItem(h, QW), "data_offsets");
    cJSON_ReplaceItemInArray(off, 1, cJSON_CreateNumber(1e9));
}
static void hdr_wrong_shape(cJSON *h) {
    int s[2] = {64, 256};
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, QW), "shape", cJSON_CreateIntArray(s, 2));
}
static void hdr_i64(cJSON *h) {
    int s[2] = {128, 64};
    cJSON *t = cJSON_GetObjectItem(h, QW);
    cJSON_ReplaceItemInObject(t, "shape", cJSON_CreateIntArray(s, 2));
    cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("I64"));
}
static void hdr_unknown_dtype(cJSON *h) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, QW), "dtype", cJSON_CreateString("X42"));
}
static void hdr_bad_bytes(cJSON *h) {
    int s[2] = {128, 127};
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, QW), "shape", cJSON_CreateIntArray(s, 2));
}
static void hdr_overlap(cJSON *h) {
    /* k_proj's range moved onto the start of q_proj's (its own length kept) */
    cJSON *q = cJSON_GetObjectItem(cJSON_GetObjectItem(h, QW), "data_offsets");
    cJSON *k = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "model.layers.0.self_attn.k_proj.weight"), "data_offsets");
    double qb = cJSON_GetArrayItem(q, 0)->valuedouble, kb = cJSON_GetArrayItem(k, 0)->valuedouble,
           ke = cJSON_GetArrayItem(k, 1)->valuedouble;
    cJSON_ReplaceItemInArray(k, 0, cJSON_CreateNumber(qb));
    cJSON_ReplaceItemInArray(k, 1, cJSON_CreateNumber(qb + (ke - kb)));
}
static void hdr_drop_up(cJSON *h) { cJSON_DeleteItemFromObject(h, "model.layers.1.mlp.up_proj.weight"); }
static void hdr_noop(cJSON *h) { (void)h; }

static void test_bad_inputs(void) {
    char d[256];
    const char *LG = "llama-gqa";

#define CFG_CASE(model, fn, ...)                 \
    do {                                         \
        tmp_model(model, d, sizeof d);           \
        edit_cfg(d, fn);                         \
        expect_fail(#fn, d, __VA_ARGS__, NULL);  \
        rm_tree(d);                              \
    } while (0)
    CFG_CASE(LG, del_hidden, "hidden_size", "config.json");
    CFG_CASE(LG, del_eps, "rms_norm_eps", "config.json");
    CFG_CASE(LG, bad_arch, "GPT2LMHeadModel");
    CFG_CASE("llama3-rope-tied", rope_yarn, "yarn", "rope_scaling.rope_type");
    CFG_CASE(LG, rope_dynamic_new, "dynamic", "rope_parameters.rope_type");
    CFG_CASE("llama3-rope-tied", llama3_no_low, "rope_scaling.low_freq_factor");
    CFG_CASE("llama3-rope-tied", untie, "lm_head.weight");
    CFG_CASE("gemma3", softcap_neg, "final_logit_softcapping", "positive");
    CFG_CASE("gemma3", attn_softcap_str, "attn_logit_softcapping");
    CFG_CASE("gemma3", bad_layer_type, "layer_types[1]", "chunked_attention");
    CFG_CASE("mixtral", topk_over, "num_experts_per_tok");
    /* a dense layer 1 (mlp_only_layers) reads a dense MLP there, which this checkpoint lacks */
    CFG_CASE("qwen3-moe", mlp_only, "model.layers.1.mlp.gate_proj.weight");

    /* sliding windows shorter than the context: every Mistral layer, Qwen2 layers from max_window_layers */
    {
        static const struct {
            const char *model;
            void (*fn)(cJSON *);
            int32_t window;
        } sw[] = {{"mistral-sharded", mistral_sw, 128}, {"qwen2-bias-tied", qwen_sw, 64}};
        for (int i = 0; i < 2; i++) {
            ir_graph *gw = NULL;
            ig_err ew = {{0}};
            tmp_model(sw[i].model, d, sizeof d);
            edit_cfg(d, sw[i].fn);
            CHECK(ir_import_hf(d, &gw, &ew) == IG_OK, "%s with a sliding window: %s", sw[i].model, ew.msg);
            if (gw) {
                int all = 1;
                for (int L = 0; L < gw->hp.n_layers; L++) all &= gw->hp.layer_sliding[L] == 1;
                CHECK(gw->hp.sliding_window == sw[i].window && all, "%s: window %d, every layer sliding %d", sw[i].model,
                      gw->hp.sliding_window, all);
            }
            ir_graph_free(gw);
            rm_tree(d);
        }
    }
    CFG_CASE(LG, gelu, "hidden_act", "gelu");
    /* limits: a layer count far beyond the tensors (was a 150 GB calloc), ids past the vocabulary
     * (an eos id there made the engine write past its logits row) */
    CFG_CASE(LG, huge_layers, "num_hidden_layers", "2000000000", "tensors");
    CFG_CASE(LG, bos_past_vocab, "bos_token_id", "1000000", "vocabulary");
    CFG_CASE("phi3", rotary_huge, "partial_rotary_factor", "rotary dimensions");
    CFG_CASE(LG, attn_bias_on, "model.layers.0.self_attn.q_proj.bias"); /* bias tensors absent */

    /* accepted variants: `type` alias of rope_type with legacy theta; head_dim null; eos lists */
    ir_graph *g = NULL;
    ig_err err = {{0}};
    tmp_model(LG, d, sizeof d);
    edit_cfg(d, rope_linear_alias);
    edit_cfg(d, head_dim_null);
    char p[400];
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    unlink(p);
    const char *gen = "{\"bos_token_id\": 1, \"eos_token_id\": [2, 7, 9]}";
    spit(p, gen, strlen(gen));
    snprintf(p, sizeof p, "%s/tokenizer.json", d);
    spit(p, "{}", 2);
    ig_status st = ir_import_hf(d, &g, &err);
    CHECK(st == IG_OK, "rope type alias: %s", err.msg);
    if (g) {
        CHECK(g->hp.rope_type == IR_ROPE_LINEAR && g->hp.rope_factor == 2.5 && g->hp.rope_theta == 20000,
              "linear rope via `type`: %d %g %g", g->hp.rope_type, g->hp.rope_factor, g->hp.rope_theta);
        CHECK(g->hp.head_dim == 16, "head_dim null -> hidden/heads");
        CHECK(g->hp.n_eos == 3 && g->hp.eos_ids[0] == 2 && g->hp.eos_ids[2] == 9, "eos list from generation_config");
        CHECK(g->tokenizer_dir && !strcmp(g->tokenizer_dir, d), "tokenizer_dir %s", g->tokenizer_dir ? g->tokenizer_dir : "(null)");
    }
    ir_graph_free(g);
    rm_tree(d);
    /* an eos id outside the vocabulary in generation_config.json */
    tmp_model(LG, d, sizeof d);
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    unlink(p);
    const char *bad_gen = "{\"eos_token_id\": [2, 70000]}";
    spit(p, bad_gen, strlen(bad_gen));
    expect_fail("eos past vocab", d, "eos_token_id", "70000", "vocabulary", NULL);
    rm_tree(d);
    tmp_model(LG, d, sizeof d);
    edit_cfg(d, eos_past_vocab);
    snprintf(p, sizeof p, "%s/generation_config.json", d);
    unlink(p);
    expect_fail("eos past vocab (config.json)", d, "eos_token_id", "1000000", "vocabulary", NULL);
    rm_tree(d);

    /* safetensors damage */
#define ST_CASE(model, file, fn, delta, ...)            \
    do {                                                \
        tmp_model(model, d, sizeof d);                  \
        edit_st(d, file, fn, delta);                    \
        expect_fail(#fn, d, __VA_ARGS__, NULL);         \
        rm_tree(d);                                     \
    } while (0)
    ST_CASE(LG, "model.safetensors", hdr_offsets_past_end, 0, QW, "model.safetensors", "out of range");
    ST_CASE(LG, "model.safetensors", hdr_wrong_shape, 0, QW, "[64, 256]", "[128, 128]");
    ST_CASE(LG, "model.safetensors", hdr_i64, 0, QW, "I64");
    ST_CASE(LG, "model.safetensors", hdr_unknown_dtype, 0, QW, "X42");
    ST_CASE(LG, "model.safetensors", hdr_bad_bytes, 0, QW, "bytes");
    ST_CASE(LG, "model.safetensors", hdr_overlap, 0, "overlap", "k_proj");
    ST_CASE(LG, "model.safetensors", hdr_drop_up, 0, "missing tensor", "model.layers.1.mlp.up_proj.weight");
    ST_CASE(LG, "model.safetensors", hdr_noop, 1000000000, "header length", "model.safetensors");
    ST_CASE("mistral-sharded", "model-00004-of-00005.safetensors", hdr_drop_up, 0,
            "model.layers.1.mlp.up_proj.weight", "model-00004-of-00005.safetensors");

    /* truncated copy */
    tmp_model(LG, d, sizeof d);
    {
        char src[1200], dst[400];
        snprintf(src, sizeof src, "%s/%s/model.safetensors", models, LG);
        snprintf(dst, sizeof dst, "%s/model.safetensors", d);
        size_t n;
        char *b = slurp(src, &n);
        unlink(dst);
        spit(dst, b, n - 1000);
        free(b);
        expect_fail("truncated", d, "model.safetensors", "out of range", NULL);
        /* import intact, then truncate: the read must fail naming the file */
        b = slurp(src, &n);
        spit(dst, b, n);
        free(b);
        g = NULL;
        st = ir_import_hf(d, &g, &err);
        CHECK(st == IG_OK, "copy import: %s", err.msg);
        if (g) {
            CHECK(truncate(dst, (off_t)n / 2) == 0, "truncate");
            ir_sources *s = ir_sources_open(g);
            ir_tensor *t = NULL; /* the weight stored last in the file */
            for (int i = 0; i < g->n_tensors; i++)
                if (g->tensors[i].kind == IR_TENSOR_WEIGHT && (!t || g->tensors[i].src_offset > t->src_offset))
                    t = &g->tensors[i];
            float *buf = malloc(sizeof(float) * (size_t)(t->shape[0] * (t->rank == 2 ? t->shape[1] : 1)));
            st = ir_weight_read_f32(s, g, t, buf, &err);
            CHECK(st != IG_OK && strstr(err.msg, dst) && strstr(err.msg, t->name),
                  "read after truncate: %s", err.msg);
            free(buf);
            ir_sources_close(s);
            ir_graph_free(g);
        }
        /* a file shorter than the length prefix */
        spit(dst, "abc", 3);
        expect_fail("tiny", d, "model.safetensors", NULL);
    }
    rm_tree(d);

    /* missing shard, missing config, missing weights file, unknown path kind */
    tmp_model("mistral-sharded", d, sizeof d);
    snprintf(p, sizeof p, "%s/model-00003-of-00005.safetensors", d);
    unlink(p);
    expect_fail("missing shard", d, "model-00003-of-00005.safetensors", "model.safetensors.index.json", NULL);
    snprintf(p, sizeof p, "%s/config.json", d);
    unlink(p);
    expect_fail("missing config", d, "config.json", NULL);
    rm_tree(d);
    tmp_model(LG, d, sizeof d);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    expect_fail("no weights", d, "model.safetensors", NULL);
    snprintf(p, sizeof p, "%s/config.json", d);
    g = NULL;
    st = ir_import_any(p, &g, &err);
    CHECK(st != IG_OK && g == NULL && strstr(err.msg, p), "import_any(json): %s", err.msg);
    rm_tree(d);
}

int main(void) {
    const char *td = getenv("IGNIS_TESTDATA");
    snprintf(models, sizeof models, "%s/models", td ? td : "../shared/testdata");
    struct stat sb;
    if (stat(models, &sb) != 0) {
        fprintf(stderr, "test_import: no test models at %s (set IGNIS_TESTDATA)\n", models);
        return 1;
    }
    test_models();
    test_transforms();
    test_bad_inputs();
    printf("test_import: %d checks, %d failed\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
