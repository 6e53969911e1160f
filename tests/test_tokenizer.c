/* test_tokenizer.c — golden tests of the C tokenizer against HF tokenizers' outputs
 * ($IGNIS_TESTDATA/tokenizers/{qwen3,llama3,llama2}/expected.json), the regex engine against
 * matches computed with Python's `regex` module, and bad-input handling. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer.h"

static int g_fail = 0;
#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);         \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            g_fail++;                                                     \
        }                                                                 \
    } while (0)

/* Expected matches produced with Python `regex` 2026.5.9: [(m.start, m.end) in UTF-8 bytes]. */
static const struct {
    const char *pat, *text;
    int n;
    int m[12][2];
} k_re_cases[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "I'M here's 12 ab  \012\012 x!!\015\012", 11, {{0, 1}, {1, 3}, {3, 8}, {8, 10}, {10, 11}, {11, 12}, {12, 13}, {13, 16}, {16, 20}, {20, 22}, {22, 26}}},
    {"\\p{N}{1,3}", "1234567 \331\243\331\244\331\245", 4, {{0, 3}, {3, 6}, {6, 7}, {8, 14}}},
    {"\\s+(?!\\S)|\\s+", "a   b  ", 3, {{1, 3}, {3, 4}, {5, 7}}},
    {"[\344\270\200-\351\276\245\340\240\200-\344\270\200\352\260\200-\355\237\277]+", "abc\344\270\255\346\226\207\355\225\234\352\265\255\354\226\264x", 1, {{3, 18}}},
    {"\\p{Lu}\\p{Ll}*|\\p{P}+|\\p{S}|\\p{M}", "HelloWorld, \342\202\254x\314\201!?", 6, {{0, 5}, {5, 10}, {10, 11}, {12, 15}, {16, 18}, {18, 20}}},
    {"a+?b|a{2,}", "aaab aaa a", 2, {{0, 4}, {5, 8}}},
    {"[^a-c\\d]+", "xyzabc123d\303\251f", 2, {{0, 3}, {9, 13}}},
    {"\\w+|\\W", "\303\247a va?", 4, {{0, 3}, {3, 4}, {4, 6}, {6, 7}}},
    {"(?i)stra\303\237e|\303\211COLE", "STRA\303\237E \303\251cole", 2, {{0, 7}, {8, 14}}},
    {"x(?=y)|\\bq\\b", "xy xz q qq", 2, {{0, 1}, {6, 7}}},
};

static void test_regex(void) {
    for (size_t c = 0; c < sizeof k_re_cases / sizeof k_re_cases[0]; c++) {
        tok_regex *re;
        ig_err err;
        ig_status st = tok_regex_compile(k_re_cases[c].pat, strlen(k_re_cases[c].pat), &re, &err);
        CHECK(st == IG_OK, "regex %zu compile: %s", c, err.msg);
        if (st) continue;
        const char *t = k_re_cases[c].text;
        size_t len = strlen(t);
        uint32_t *cps = malloc((len + 1) * 4), *off = malloc((len + 2) * 4);
        size_t n = tok_utf8_decode(t, len, cps, off), pos = 0, ms, me;
        int k = 0;
        while (pos <= n && tok_regex_search(re, cps, n, pos, &ms, &me) == 1) {
            CHECK(k < k_re_cases[c].n && (int)off[ms] == k_re_cases[c].m[k][0] && (int)off[me] == k_re_cases[c].m[k][1],
                  "regex %zu match %d: got [%u,%u)", c, k, off[ms], off[me]);
            k++;
            pos = me > ms ? me : me + 1;
        }
        CHECK(k == k_re_cases[c].n, "regex %zu: %d matches, want %d", c, k, k_re_cases[c].n);
        free(cps);
        free(off);
        tok_regex_free(re);
    }
    /* nested quantifiers that backtrack exponentially (28 characters took 16 s, x4 per 2 more):
     * the memo of expanded states makes them linear, with the same (leftmost, backtracking-order) matches */
    {
        static const struct { const char *pat; size_t n; int match; size_t ms, me; } slow[] = {
            {"(a+)+b", 20000, 0, 0, 0},
            {"(a|aa)+c", 20000, 0, 0, 0},
            {"(a+)+$", 20000, 1, 0, 20000},
            {"(?:a|a)*x|a", 20000, 1, 0, 1},
        };
        for (size_t c = 0; c < sizeof slow / sizeof slow[0]; c++) {
            tok_regex *re = NULL;
            ig_err err;
            if (tok_regex_compile(slow[c].pat, strlen(slow[c].pat), &re, &err)) {
                CHECK(0, "regex %s: %s", slow[c].pat, err.msg);
                continue;
            }
            uint32_t *cps = malloc(slow[c].n * 4);
            for (size_t i = 0; i < slow[c].n; i++) cps[i] = 'a';
            size_t ms = 99, me = 99;
            int r = tok_regex_search(re, cps, slow[c].n, 0, &ms, &me);
            CHECK(r == slow[c].match && (!r || (ms == slow[c].ms && me == slow[c].me)), "regex %s on %zu a's: %d [%zu,%zu)",
                  slow[c].pat, slow[c].n, r, ms, me);
            free(cps);
            tok_regex_free(re);
        }
    }
    static const char *bad[] = {"(a", "a)", "[a-", "\\p{Nope}", "(?<=a)b", "a{3,1}", "(a*)*"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tok_regex *re = NULL;
        ig_err err = {{0}};
        CHECK(tok_regex_compile(bad[i], strlen(bad[i]), &re, &err) != IG_OK && err.msg[0], "bad regex %s accepted", bad[i]);
        tok_regex_free(re);
    }
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); fclose(f); return NULL; }
    fclose(f);
    b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

static int ids_equal(const int32_t *a, size_t na, const cJSON *arr) {
    if ((size_t)cJSON_GetArraySize(arr) != na) return 0;
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) if (a[i++] != (int32_t)it->valuedouble) return 0;
    return 1;
}

static void test_model(const char *root, const char *name) {
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/tokenizers/%s", root, name);
    tok_tokenizer *t = NULL;
    ig_err err;
    ig_status st = tok_load_dir(dir, &t, &err);
    CHECK(st == IG_OK, "%s: load: %s", name, err.msg);
    if (st) return;
    snprintf(path, sizeof path, "%s/expected.json", dir);
    char *js = slurp(path, NULL);
    CHECK(js, "%s: cannot read %s", name, path);
    cJSON *exp = js ? cJSON_Parse(js) : NULL;
    free(js);
    int n_ok[4] = {0}, n_all = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(exp, "encode")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const char *dec = cJSON_GetObjectItem(c, "decoded")->valuestring;
        const cJSON *eids = cJSON_GetObjectItem(c, "ids"), *sids = cJSON_GetObjectItem(c, "ids_with_special");
        n_all++;
        int32_t *ids = NULL;
        size_t n = 0;
        st = tok_encode(t, text, strlen(text), 0, 1, &ids, &n, &err);
        int ok = st == IG_OK && ids_equal(ids, n, eids);
        CHECK(ok, "%s: encode ids mismatch for \"%.60s\"", name, text);
        n_ok[0] += ok;
        int32_t *ids2 = NULL;
        size_t n2 = 0;
        st = tok_encode(t, text, strlen(text), 1, 1, &ids2, &n2, &err);
        ok = st == IG_OK && ids_equal(ids2, n2, sids);
        CHECK(ok, "%s: ids_with_special mismatch for \"%.60s\"", name, text);
        n_ok[1] += ok;
        free(ids2);
        /* decode the reference ids, so a decode check does not depend on encode */
        size_t ne = (size_t)cJSON_GetArraySize(eids), k = 0;
        int32_t *ref = malloc((ne + 1) * sizeof *ref);
        const cJSON *it;
        cJSON_ArrayForEach(it, eids) ref[k++] = (int32_t)it->valuedouble;
        char *txt = NULL;
        size_t tl = 0;
        st = tok_decode(t, ref, ne, 0, &txt, &tl, &err);
        ok = st == IG_OK && tl == strlen(dec) && !memcmp(txt, dec, tl);
        CHECK(ok, "%s: decode mismatch for \"%.60s\": got \"%.60s\"", name, dec, txt ? txt : "");
        n_ok[2] += ok;
        free(txt);
        /* streaming */
        tok_stream *s = tok_stream_new(t, 0);
        char *acc = malloc(strlen(dec) * 2 + 64);
        size_t al = 0;
        ok = 1;
        for (size_t i = 0; i < ne && ok; i++) {
            const char *piece;
            size_t pl;
            if (tok_stream_push(s, ref[i], &piece, &pl, &err) != IG_OK) { ok = 0; break; }
            if (al + pl > strlen(dec) * 2 + 32) { ok = 0; break; }
            /* never half a character: every piece must be valid UTF-8 on its own */
            if (!tok_utf8_valid(piece, pl)) ok = 0;
            memcpy(acc + al, piece, pl);
            al += pl;
        }
        ok = ok && al == strlen(dec) && !memcmp(acc, dec, al);
        CHECK(ok, "%s: stream mismatch for \"%.60s\"", name, dec);
        n_ok[3] += ok;
        tok_stream_free(s);
        free(acc);
        free(ref);
        free(ids);
    }
    printf("%s: %d cases: ids %d, ids_with_special %d, decoded %d, stream %d\n", name, n_all, n_ok[0], n_ok[1], n_ok[2],
           n_ok[3]);
    CHECK(n_all > 0, "%s: no encode cases", name);
    /* invalid UTF-8 must not crash, and comes out as U+FFFD */
    static const char bad[] = "ok \xff\xfe \xe4\xb8 end \xf0\x9f\x98";
    int32_t *ids = NULL;
    size_t n = 0;
    st = tok_encode(t, bad, sizeof bad - 1, 1, 1, &ids, &n, &err);
    CHECK(st == IG_OK && n > 0, "%s: invalid UTF-8 encode failed", name);
    char *txt = NULL;
    size_t tl = 0;
    if (st == IG_OK && tok_decode(t, ids, n, 1, &txt, &tl, &err) == IG_OK)
        CHECK(strstr(txt, "\xEF\xBF\xBD") != NULL, "%s: invalid UTF-8 did not become U+FFFD", name);
    free(txt);
    free(ids);
    cJSON_Delete(exp);
    tok_free(t);
}

static void expect_load_error(const char *json, ig_status want, const char *needle) {
    tok_tokenizer *t = NULL;
    ig_err err = {{0}};
    ig_status st = tok_load_json(json, strlen(json), NULL, &t, &err);
    CHECK(st == want && strstr(err.msg, needle), "load error: got %d \"%s\", want %d naming \"%s\"", st, err.msg, want, needle);
    tok_free(t);
}

static void test_bad_input(void) {
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}", IG_ERR_FORMAT, "malformed JSON");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", IG_ERR_UNSUPPORTED, "WordPiece");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"pre_tokenizer\": {\"type\": \"FancySplit\"}}",
                      IG_ERR_UNSUPPORTED, "FancySplit");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a q\"]}}", IG_ERR_FORMAT, "merge 0");
    /* both halves in the vocab, their concatenation not: the message quotes the result */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"q\": 1}, \"merges\": [\"a q\"]}}", IG_ERR_FORMAT,
                      "merge 0 result \"aq\" not in vocab");
    /* a word the model encodes to no id at all (no unk token) went into the word cache as
     * memcpy(.., NULL + 0, 0): found by fuzz_tokenizer_load under UBSan */
    {
        static const char js[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                                 " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\":"
                                 " {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}}}";
        tok_tokenizer *t = NULL;
        ig_err err;
        int32_t *ids = NULL;
        size_t n = 99;
        CHECK(tok_load_json(js, strlen(js), NULL, &t, &err) == IG_OK, "tiny BPE: %s", err.msg);
        CHECK(t && tok_encode(t, "zz", 2, 0, 0, &ids, &n, &err) == IG_OK && n == 0, "unknown word: %zu ids", n);
        free(ids);
        ids = NULL;
        /* and the post-processor over that empty encoding (fuzz_tokenizer_load: NULL + 0 there too) */
        CHECK(t && tok_encode(t, "zz", 2, 1, 0, &ids, &n, &err) == IG_OK && n == 0, "unknown word, post-processed: %zu", n);
        free(ids);
        tok_free(t);
    }
    /* post-processor ids that are no token ids (1e300 was an undefined cast to int32) */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"a\", 1e300], \"sep\": [\"a\", 0]}}",
                      IG_ERR_FORMAT, "cls/sep");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\":"
                      " {\"id\": \"A\"}}], \"special_tokens\": {\"A\": {\"ids\": [-3]}}}}",
                      IG_ERR_FORMAT, "\"A\"");
    /* fractional ids were truncated (1.5 read as 1, a duplicate of "b" here, or as a silent id) */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 1.5}, \"merges\": []}}",
                      IG_ERR_FORMAT, "vocab entry \"c\"");
    expect_load_error("{\"added_tokens\": [{\"id\": 0.25, \"content\": \"<s>\"}], \"model\": {\"type\": \"BPE\","
                      " \"vocab\": {\"a\": 0}, \"merges\": []}}",
                      IG_ERR_FORMAT, "added token");
    /* one listed token with id 99,999,999 sized five tables by it */
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}, \"merges\": []}}", IG_ERR_FORMAT,
                      "99999999");
    /* added-token strings of a load that fails later were leaked: 200 such loads must not grow the heap */
    {
        char js[8192];
        size_t o = (size_t)snprintf(js, sizeof js, "{\"added_tokens\": [");
        for (int i = 0; i < 64; i++)
            o += (size_t)snprintf(js + o, sizeof js - o, "%s{\"id\": %d, \"content\": \"<tok%d-padding-padding-padding>\"}",
                                  i ? "," : "", i, i);
        snprintf(js + o, sizeof js - o, "], \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}");
        tok_tokenizer *t = NULL;
        ig_err err;
        CHECK(tok_load_json(js, strlen(js), NULL, &t, &err) == IG_ERR_FORMAT, "bad vocab id accepted");
        size_t base = mallinfo2().uordblks;
        for (int k = 0; k < 200; k++) tok_load_json(js, strlen(js), NULL, &t, &err);
        size_t after = mallinfo2().uordblks;
        CHECK(after < base + 100000, "200 failed loads grew the heap from %zu to %zu bytes", base, after);
    }
    ig_err err;
    tok_tokenizer *t = NULL;
    CHECK(tok_load_dir("/nonexistent-dir", &t, &err) == IG_ERR_IO && strstr(err.msg, "nonexistent"), "missing dir: %s", err.msg);
}

/* A tiny tokenizer exercising the array form of merges, byte fallback, unk fusion, Metaspace
 * and a single-word / lstrip added token, with ids checked by hand against the merge rules. */
static void test_tiny(void) {
    static const char js[] =
        "{\"added_tokens\": [{\"id\": 9, \"content\": \"<x>\", \"special\": true, \"lstrip\": true,"
        "  \"rstrip\": false, \"single_word\": false, \"normalized\": false}],"
        " \"normalizer\": null,"
        " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\", \"split\": true},"
        " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\"},"
        " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": false,"
        "  \"vocab\": {\"<unk>\": 0, \"\\u2581\": 1, \"a\": 2, \"b\": 3, \"ab\": 4, \"\\u2581ab\": 5, \"c\": 6},"
        "  \"merges\": [[\"a\", \"b\"], [\"\\u2581\", \"ab\"]]}}";
    tok_tokenizer *t = NULL;
    ig_err err;
    ig_status st = tok_load_json(js, sizeof js - 1, NULL, &t, &err);
    CHECK(st == IG_OK, "tiny load: %s", err.msg);
    if (st) return;
    /* "ab abzzc <x>" → ▁ab | ▁ab zz c (zz fused unk) | lstrip eats the space before <x> */
    const char *text = "ab abzzc <x>";
    int32_t *ids;
    size_t n;
    st = tok_encode(t, text, strlen(text), 0, 1, &ids, &n, &err);
    static const int32_t want[] = {5, 5, 0, 6, 9};
    CHECK(st == IG_OK && n == 5 && !memcmp(ids, want, sizeof want), "tiny encode: n=%zu", n);
    char *txt;
    size_t tl;
    if (st == IG_OK) {
        st = tok_decode(t, ids, n, 1, &txt, &tl, &err);
        CHECK(st == IG_OK && !strcmp(txt, "ab ab<unk>c"), "tiny decode: \"%s\"", st ? "" : txt);
        if (!st) free(txt);
        free(ids);
    }
    CHECK(tok_token_id(t, "\xe2\x96\x81" "ab") == 5 && tok_is_special(t, 9) && !tok_is_special(t, 5), "tiny lookups");
    tok_free(t);
}

/* Encodes the same texts from several threads at once (the pre-token cache is shared) and
 * checks each thread gets the single-threaded ids. */
typedef struct thr_arg { const tok_tokenizer *t; const char *text; const int32_t *want; size_t nwant; int bad; } thr_arg;
static void *thr_main(void *p) {
    thr_arg *a = p;
    for (int rep = 0; rep < 50; rep++) {
        int32_t *ids;
        size_t n;
        ig_err err;
        if (tok_encode(a->t, a->text, strlen(a->text), 1, 1, &ids, &n, &err) != IG_OK) { a->bad++; continue; }
        if (n != a->nwant || memcmp(ids, a->want, n * sizeof *ids)) a->bad++;
        free(ids);
    }
    return NULL;
}

static void test_threads(const char *root) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/qwen3", root);
    tok_tokenizer *t;
    ig_err err;
    if (tok_load_dir(dir, &t, &err) != IG_OK) { CHECK(0, "threads: load: %s", err.msg); return; }
    static const char *texts[4] = {"The quick brown fox jumps over the lazy dog, again and again.",
                                   "def f(x):\n    return x * 2  # twice\n", "日本語のテキストとカタカナ、ひらがな。",
                                   "emoji: \xf0\x9f\x98\x80 caf\xc3\xa9 na\xc3\xafve <|im_start|>user"};
    thr_arg args[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        int32_t *ids;
        size_t n;
        tok_encode(t, texts[i % 4], strlen(texts[i % 4]), 1, 1, &ids, &n, &err);
        args[i] = (thr_arg){t, texts[i % 4], ids, n, 0};
    }
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, thr_main, &args[i]);
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].bad == 0, "threads: thread %d got %d wrong encodes", i, args[i].bad);
        free((void *)args[i].want);
    }
    tok_free(t);
}

/* Lone continuation bytes (Llama 2's <0x80>) never finish a character: the stream emits their
 * U+FFFD as it goes (it held them all back and decoded a growing window at every push: quadratic)
 * and the whole text equals the full decode's. */
static void test_stream_bytes(const char *root) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/llama2", root);
    tok_tokenizer *t = NULL;
    ig_err err;
    if (tok_load_dir(dir, &t, &err)) {
        CHECK(0, "load %s: %s", dir, err.msg);
        return;
    }
    int32_t b80 = tok_token_id(t, "<0x80>");
    CHECK(b80 >= 0, "no <0x80> token");
    enum { N = 8192 };
    int32_t *ids = malloc(N * sizeof *ids);
    for (int i = 0; i < N; i++) ids[i] = b80;
    tok_stream *s = tok_stream_new(t, 1);
    size_t cap = 4 * N + 16, n = 0, after16 = 0;
    char *all = malloc(cap);
    for (int i = 0; i < N; i++) {
        const char *p;
        size_t len;
        CHECK(tok_stream_push(s, ids[i], &p, &len, &err) == IG_OK, "push %d: %s", i, err.msg);
        if (n + len < cap) memcpy(all + n, p, len), n += len;
        if (i == 15) after16 = n;
    }
    const char *p;
    size_t len;
    CHECK(tok_stream_flush(s, &p, &len, &err) == IG_OK, "flush");
    if (n + len < cap) memcpy(all + n, p, len), n += len;
    CHECK(after16 > 0, "16 lone byte tokens pushed and nothing emitted");
    char *full;
    size_t fl;
    CHECK(tok_decode(t, ids, N, 1, &full, &fl, &err) == IG_OK, "decode");
    CHECK(fl == n && !memcmp(full, all, n), "stream text (%zu bytes) differs from the full decode (%zu bytes)", n, fl);
    free(full);
    free(all);
    free(ids);
    tok_stream_free(s);
    /* a flush when nothing was emitted yet (the prefix has no buffer): found by fuzz_tokenizer_encode
     * as memcmp(cur, NULL, 0) under UBSan */
    s = tok_stream_new(t, 1);
    int32_t e2 = tok_token_id(t, "<0xE2>");
    CHECK(tok_stream_push(s, e2, &p, &len, &err) == IG_OK && len == 0, "an unfinished character is held back");
    CHECK(tok_stream_flush(s, &p, &len, &err) == IG_OK && len == 3 && !memcmp(p, "\xEF\xBF\xBD", 3),
          "flush of a held-back byte: %zu bytes", len);
    tok_stream_free(s);
    tok_free(t);
}

int main(void) {
    const char *root = getenv("IGNIS_TESTDATA");
    if (!root) root = "../shared/testdata";
    test_regex();
    test_bad_input();
    test_tiny();
    test_model(root, "qwen3");
    test_model(root, "llama3");
    test_model(root, "llama2");
    test_threads(root);
    test_stream_bytes(root);
    if (g_fail) { fprintf(stderr, "test_tokenizer: %d failures\n", g_fail); return 1; }
    printf("test_tokenizer: all passed\n");
    return 0;
}
