/* cli_grammar.c — the guided-decoding tools of the ignis CLI: `grammar-check` (walks an instance
 * token by token through a constraint's masks) and `bench-grammar` (compile time and time per
 * mask over a JSON-lines file of schemas with test instances), and the shared helpers that turn
 * --json-schema / --json / --regex / --grammar flags into a constraint (also used by generate).
 *
 * grammar-check exit status: 0 accepted, 1 rejected (the token index is printed), 3 the
 * constraint is not supported (the message says why), 2 a bad command line or unreadable file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli_grammar.h"
#include "grammar.h"
#include "rt_util.h"
#include "tokenizer.h"

static int tok_bytes_cb(void *ctx, int32_t id, char *buf, size_t cap) {
    const tok_tokenizer *t = ctx;
    if (tok_is_special(t, id)) return -1;
    return tok_token_bytes(t, id, buf, cap);
}

ig_status cli_grammar_vocab(const tok_tokenizer *t, const int32_t *eos, int n_eos, gr_vocab **out, ig_err *err) {
    int32_t e = tok_eos_id(t);
    if (!eos || !n_eos) { eos = &e; n_eos = e >= 0; }
    return gr_vocab_new(tok_vocab_size(t), tok_bytes_cb, (void *)t, eos, n_eos, out, err);
}

ig_status cli_constraint_text(const cli_constraint_opts *o, int *kind, char **text, size_t *len, ig_err *err) {
    int n = !!o->json_schema + !!o->json + !!o->regex + !!o->grammar;
    *kind = GR_NONE;
    *text = NULL;
    *len = 0;
    if (n > 1) return ig_fail(err, IG_ERR_INVALID, "give at most one of --json-schema, --json, --regex, --grammar");
    if (o->json_schema) { *kind = GR_JSON_SCHEMA; return rt_read_file(o->json_schema, text, len, err); }
    if (o->grammar) { *kind = GR_GBNF; return rt_read_file(o->grammar, text, len, err); }
    if (o->regex) {
        *kind = GR_REGEX;
        *text = strdup(o->regex);
        *len = strlen(o->regex);
        return *text ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (o->json) { *kind = GR_JSON; *text = strdup(""); return IG_OK; }
    return IG_OK;
}

/* Bytes of ids[0..n) (tok_token_bytes: what masks match) into a malloc'd buffer; *ends[i]: bytes
 * up to the end of token i. NULL when out of memory or a token has no bytes. */
static char *ids_bytes(const tok_tokenizer *t, const int32_t *ids, size_t n, size_t *total, size_t **ends) {
    size_t cap = 256, k = 0;
    char *b = malloc(cap);
    *ends = malloc((n + 1) * sizeof **ends);
    for (size_t i = 0; b && *ends && i < n; i++) {
        if (k + 1024 > cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) break;
            b = q;
        }
        int l = tok_is_special(t, ids[i]) ? -1 : tok_token_bytes(t, ids[i], b + k, cap - k);
        if (l < 0) break;
        k += (size_t)l;
        (*ends)[i] = k;
        if (i + 1 == n) { *total = k; return b; }
    }
    if (b && *ends && n == 0) { *total = 0; return b; }
    free(b);
    free(*ends);
    *ends = NULL;
    return NULL;
}

ig_status cli_encode_continuation(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids_out,
                                  size_t *n_out, ig_err *err) {
    /* markers that no tokenizer merges with what follows: a newline (SentencePiece: a byte
     * token), then a letter and a space */
    static const char *const markers[] = {"", "\n", "a "};
    *ids_out = NULL;
    *n_out = 0;
    char *buf = malloc(len + 4);
    if (!buf) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ig_status st = IG_OK;
    for (size_t m = 0; m < sizeof markers / sizeof *markers; m++) {
        size_t ml = strlen(markers[m]), n = 0, total = 0, *ends = NULL;
        int32_t *ids = NULL;
        memcpy(buf, markers[m], ml);
        memcpy(buf + ml, text, len);
        if ((st = tok_encode(t, buf, ml + len, 0, 0, &ids, &n, err))) break;
        char *b = ids_bytes(t, ids, n, &total, &ends);
        /* the text's tokens: those after the token boundary where the text's bytes begin */
        size_t skip = 0;
        int ok = b && total >= len && !memcmp(b + total - len, text, len);
        if (ok && total > len) {
            while (skip < n && ends[skip] < total - len) skip++;
            ok = skip < n && ends[skip] == total - len;
            skip++;
        }
        free(b);
        free(ends);
        if (ok) {
            memmove(ids, ids + skip, (n - skip) * sizeof *ids);
            *ids_out = ids;
            *n_out = n - skip;
            free(buf);
            return IG_OK;
        }
        free(ids);
    }
    free(buf);
    return st ? st : ig_fail(err, IG_ERR_UNSUPPORTED, "the tokenizer does not encode the text as a continuation (its tokens' bytes differ from the text)");
}

/* This thread's CPU time: on a busy machine wall time would count the waits for a core. */
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Walks ids through m: -1 accepted, else the index of the first token not allowed (n: the
 * grammar cannot end after the last). mask_us (may be NULL) collects each mask's time. */
static long walk_ids(gr_matcher *m, const int32_t *ids, size_t n, uint32_t *bits, double *mask_us, ig_err *err,
                     ig_status *st) {
    *st = IG_OK;
    for (size_t i = 0; i < n; i++) {
        double t0 = now_us();
        if ((*st = gr_matcher_mask(m, bits, err))) return (long)i;
        if (mask_us) mask_us[i] = now_us() - t0;
        if (!(bits[ids[i] >> 5] >> (ids[i] & 31) & 1)) return (long)i;
        int r = gr_matcher_accept(m, ids[i], err);
        if (r < 0) { *st = IG_ERR_UNSUPPORTED; return (long)i; }
        if (r == 0) { /* the mask allowed it: a matcher inconsistency */
            *st = ig_fail(err, IG_ERR_INTERNAL, "token %zu allowed by the mask but not accepted", i);
            return (long)i;
        }
    }
    return gr_matcher_can_end(m) ? -1 : (long)n;
}

int cli_grammar_check(const char *tok_dir, const cli_constraint_opts *o, const char *instance) {
    ig_err err = {{0}};
    int kind;
    char *text = NULL, *inst = NULL;
    size_t len, ilen;
    tok_tokenizer *t = NULL;
    gr_vocab *v = NULL;
    gr_grammar *g = NULL;
    gr_matcher *m = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    uint32_t *bits = NULL;
    int rc = 2;
    ig_status st = cli_constraint_text(o, &kind, &text, &len, &err);
    if (!st && kind == GR_NONE) st = ig_fail(&err, IG_ERR_INVALID, "give one of --json-schema, --json, --regex, --grammar");
    if (!st) st = rt_read_file(instance, &inst, &ilen, &err);
    if (!st) st = tok_load_dir(tok_dir, &t, &err);
    if (st) goto out;
    rc = 3;
    if ((st = gr_compile((gr_kind)kind, text, len, &g, &err))) goto out;
    rc = 2;
    if ((st = cli_grammar_vocab(t, NULL, 0, &v, &err)) || (st = gr_matcher_new(g, v, &m, &err))) goto out;
    if ((st = cli_encode_continuation(t, inst, ilen, &ids, &n, &err))) goto out;
    bits = calloc((size_t)(tok_vocab_size(t) + 31) / 32 + 1, 4);
    if (!bits) { st = ig_fail(&err, IG_ERR_NOMEM, "out of memory"); goto out; }
    long at = walk_ids(m, ids, n, bits, NULL, &err, &st);
    if (st) { rc = 3; goto out; }
    if (at < 0) { printf("accepted: %zu tokens\n", n); rc = 0; }
    else if ((size_t)at == n) { printf("rejected: the grammar cannot end after token %zu (of %zu)\n", n - 1, n); rc = 1; }
    else {
        const char *s = tok_token_str(t, ids[at]);
        printf("rejected at token %ld (id %d, %s)\n", at, ids[at], s ? s : "?");
        rc = 1;
    }
out:
    if (st) fprintf(stderr, "ignis grammar-check: %s: %s\n", rc == 3 ? "unsupported" : "error", err.msg);
    free(bits); free(ids); free(text); free(inst);
    gr_matcher_free(m); gr_grammar_free(g); gr_vocab_free(v); tok_free(t);
    return rc;
}

/* ---- json.dumps (default separators, ensure_ascii=False) for bench-grammar's instances ------- */

typedef struct dbuf { char *p; size_t n, cap; } dbuf;
static void dput(dbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 256;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) return;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void dputs(dbuf *b, const char *s) { dput(b, s, strlen(s)); }

static void dump_str(dbuf *b, const char *s) {
    dputs(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        const char *x = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : *p == '\r' ? "\\r" :
                        *p == '\t' ? "\\t" : *p == '\b' ? "\\b" : *p == '\f' ? "\\f" : NULL;
        if (x) dputs(b, x);
        else if (*p < 0x20) { snprintf(e, sizeof e, "\\u%04x", *p); dputs(b, e); }
        else dput(b, (const char *)p, 1);
    }
    dputs(b, "\"");
}

static void dump(dbuf *b, const cJSON *v) {
    char t[40];
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int obj = cJSON_IsObject(v);
        dputs(b, obj ? "{" : "[");
        for (const cJSON *x = v->child; x; x = x->next) {
            if (x != v->child) dputs(b, ", ");
            if (obj) { dump_str(b, x->string); dputs(b, ": "); }
            dump(b, x);
        }
        dputs(b, obj ? "}" : "]");
    } else if (cJSON_IsString(v)) dump_str(b, v->valuestring);
    else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == (double)(long long)d && d < 1e16 && d > -1e16) snprintf(t, sizeof t, "%lld", (long long)d);
        else for (int p = 1; p <= 17; p++) { snprintf(t, sizeof t, "%.*g", p, d); if (strtod(t, NULL) == d) break; }
        dputs(b, t);
    } else dputs(b, cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false" : "null");
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct dvec { double *v; size_t n, cap; } dvec;
static void dvec_push(dvec *d, double x) {
    if (d->n == d->cap) {
        size_t c = d->cap ? d->cap * 2 : 1024;
        double *q = realloc(d->v, c * sizeof(double));
        if (!q) return;
        d->v = q;
        d->cap = c;
    }
    d->v[d->n++] = x;
}

static double pct(const dvec *d, double p) { return d->n ? d->v[(size_t)(p * (double)(d->n - 1))] : 0; }

/* One schema line of the bench file: compile, walk each valid instance (its "text" when the line
 * gives one, else its "data" serialized like json.dumps). */
static void bench_one(const cJSON *row, tok_tokenizer *t, const gr_vocab *v, uint32_t *bits, dvec *mask_us,
                      dvec *compile_ms, int *supported, int *valid_ok, int *valid_n, int verbose) {
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(row, "schema");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "name");
    char *text = cJSON_PrintUnformatted(schema);
    ig_err err = {{0}};
    gr_grammar *g = NULL;
    gr_matcher *m = NULL;
    double t0 = now_us();
    ig_status st = text ? gr_compile(GR_JSON_SCHEMA, text, strlen(text), &g, &err) : IG_ERR_NOMEM;
    if (!st) st = gr_matcher_new(g, v, &m, &err);
    double t1 = now_us();
    free(text);
    if (st) {
        if (verbose) printf("unsupported %s: %s\n", cJSON_IsString(name) ? name->valuestring : "?", err.msg);
        gr_grammar_free(g);
        return;
    }
    dvec_push(compile_ms, (t1 - t0) / 1e3);
    (*supported)++;
    const cJSON *tests = cJSON_GetObjectItemCaseSensitive(row, "tests");
    for (const cJSON *x = cJSON_IsArray(tests) ? tests->child : NULL; x; x = x->next) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "valid"))) continue;
        dbuf b = {0};
        const cJSON *given = cJSON_GetObjectItemCaseSensitive(x, "text"); /* already serialized (the peer's) */
        if (cJSON_IsString(given)) dputs(&b, given->valuestring);
        else dump(&b, cJSON_GetObjectItemCaseSensitive(x, "data"));
        int32_t *ids = NULL;
        size_t n = 0;
        if (b.p && !cli_encode_continuation(t, b.p, b.n, &ids, &n, &err)) {
            double *us = malloc((n + 1) * sizeof(double));
            gr_matcher_reset(m);
            long at = us ? walk_ids(m, ids, n, bits, us, &err, &st) : 0;
            size_t timed = at < 0 ? n : (size_t)at;
            for (size_t i = 0; us && i < timed && i < n; i++) dvec_push(mask_us, us[i]);
            (*valid_n)++;
            if (at < 0) (*valid_ok)++;
            else if (verbose) printf("valid instance rejected at token %ld: %s\n", at, cJSON_IsString(name) ? name->valuestring : "?");
            free(us);
        }
        free(ids);
        free(b.p);
    }
    gr_matcher_free(m);
    gr_grammar_free(g);
}

int cli_bench_grammar(const char *tok_dir, const char *schemas, int verbose) {
    ig_err err = {{0}};
    char *text = NULL;
    size_t len;
    tok_tokenizer *t = NULL;
    gr_vocab *v = NULL;
    if (rt_read_file(schemas, &text, &len, &err) || tok_load_dir(tok_dir, &t, &err) || cli_grammar_vocab(t, NULL, 0, &v, &err)) {
        fprintf(stderr, "ignis bench-grammar: error: %s\n", err.msg);
        free(text);
        tok_free(t);
        return 2;
    }
    uint32_t *bits = calloc((size_t)(tok_vocab_size(t) + 31) / 32 + 1, 4);
    dvec mask_us = {0}, compile_ms = {0};
    int total = 0, supported = 0, valid_ok = 0, valid_n = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *row = cJSON_Parse(line);
        if (!row) continue;
        total++;
        bench_one(row, t, v, bits, &mask_us, &compile_ms, &supported, &valid_ok, &valid_n, verbose);
        cJSON_Delete(row);
    }
    qsort(mask_us.v, mask_us.n, sizeof(double), cmp_d);
    qsort(compile_ms.v, compile_ms.n, sizeof(double), cmp_d);
    double sum = 0;
    for (size_t i = 0; i < mask_us.n; i++) sum += mask_us.v[i];
    printf("mask: average %.1f us, p50 %.1f us, p99 %.1f us (%zu masks, vocab %d, thread CPU time)\n", mask_us.n ? sum / (double)mask_us.n : 0,
           pct(&mask_us, 0.5), pct(&mask_us, 0.99), mask_us.n, tok_vocab_size(t));
    printf("compile: median %.2f ms, p99 %.2f ms\n", pct(&compile_ms, 0.5), pct(&compile_ms, 0.99));
    printf("supported: %d/%d\n", supported, total);
    printf("valid instances accepted: %d/%d\n", valid_ok, valid_n);
    free(mask_us.v); free(compile_ms.v); free(bits); free(text);
    gr_vocab_free(v);
    tok_free(t);
    return 0;
}

/* --batch: one JSON line per schema in, one JSON line of results out (for the conformance test,
 * which serializes the instances itself): in {"name", "schema", "tests": [{"valid", "text"}]},
 * out {"name", "supported", "error", "accepted": [bool per test]}. */
int cli_grammar_batch(const char *tok_dir, const char *file) {
    ig_err err = {{0}};
    char *text = NULL;
    size_t len;
    tok_tokenizer *t = NULL;
    gr_vocab *v = NULL;
    if (rt_read_file(file, &text, &len, &err) || tok_load_dir(tok_dir, &t, &err) || cli_grammar_vocab(t, NULL, 0, &v, &err)) {
        fprintf(stderr, "ignis grammar-check: error: %s\n", err.msg);
        free(text);
        tok_free(t);
        return 2;
    }
    uint32_t *bits = calloc((size_t)(tok_vocab_size(t) + 31) / 32 + 1, 4);
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *row = cJSON_Parse(line);
        if (!row) continue;
        cJSON *out = cJSON_CreateObject(), *acc = cJSON_CreateArray();
        cJSON_AddItemToObject(out, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(row, "name"), 1));
        char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(row, "schema"));
        gr_grammar *g = NULL;
        gr_matcher *m = NULL;
        ig_status st = gr_compile(GR_JSON_SCHEMA, schema, strlen(schema), &g, &err);
        if (!st) st = gr_matcher_new(g, v, &m, &err);
        cJSON_AddBoolToObject(out, "supported", !st);
        if (st) cJSON_AddStringToObject(out, "error", err.msg);
        const cJSON *tests = cJSON_GetObjectItemCaseSensitive(row, "tests");
        for (const cJSON *x = !st && cJSON_IsArray(tests) ? tests->child : NULL; x; x = x->next) {
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(x, "text");
            int32_t *ids = NULL;
            size_t n = 0;
            long at = 0;
            ig_status s2 = IG_ERR_INVALID;
            if (cJSON_IsString(it) && !cli_encode_continuation(t, it->valuestring, strlen(it->valuestring), &ids, &n, &err)) {
                gr_matcher_reset(m);
                at = walk_ids(m, ids, n, bits, NULL, &err, &s2);
            }
            if (s2 && !cJSON_GetObjectItemCaseSensitive(out, "error")) cJSON_AddStringToObject(out, "error", err.msg);
            cJSON_AddItemToArray(acc, cJSON_CreateBool(!s2 && at < 0));
            free(ids);
        }
        cJSON_AddItemToObject(out, "accepted", acc);
        char *o = cJSON_PrintUnformatted(out);
        printf("%s\n", o);
        fflush(stdout);
        free(o);
        free(schema);
        cJSON_Delete(out);
        cJSON_Delete(row);
        gr_matcher_free(m);
        gr_grammar_free(g);
    }
    free(bits);
    free(text);
    gr_vocab_free(v);
    tok_free(t);
    return 0;
}
