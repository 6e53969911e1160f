/* test_grammar.c — the grammar module without a tokenizer: GBNF, regex, JSON Schema and JSON
 * mode accept / reject texts byte by byte and through token masks over a small made-up
 * vocabulary; unsupported and malformed inputs fail at compile time with a message naming what
 * is wrong; left recursion fails cleanly instead of hanging. Masks equal a brute-force mask
 * (every token tried on a matcher in the same state) at every byte of instances that take the
 * shortcuts: counted strings with multi-byte characters, object keys beside named ones, free
 * strings, over a vocabulary of all single bytes (partial UTF-8 included) and longer pieces.
 * Counted strings (minLength / maxLength, run with counters whose long counts share one cached
 * mask) are checked against lengths the test counts itself: a token is allowed exactly when the
 * characters it adds (a multi-byte UTF-8 character or an escape is one) keep the string within
 * its bounds, at both ends of a 3..5 range and of one up to 32767. Two vocabularies built at once
 * in two threads give the masks each gives built alone (the token sort once shared a file-level
 * comparator context). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* 1 if the grammar accepts exactly s (walked byte by byte, then may end), 0 if not, -1 if it
 * did not compile. */
static int accepts(gr_kind kind, const char *src, const char *s, const gr_vocab *v) {
    gr_grammar *g;
    gr_matcher *m;
    ig_err err;
    if (gr_compile(kind, src, strlen(src), &g, &err)) return -1;
    if (gr_matcher_new(g, v, &m, &err)) { gr_grammar_free(g); return 0; }
    int r = gr_matcher_accept_bytes(m, s, strlen(s), &err) == 1 && gr_matcher_can_end(m);
    gr_matcher_free(m);
    gr_grammar_free(g);
    return r;
}

/* vocabulary: every single byte (ids 0..255), a few words, EOS = 300 */
static const char *words[] = {"{\"", "\":", "\", \"", "true", "false", "null", "abc", "12", "\"}", " ", "\n", NULL};
static int tok_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx;
    if (id < 256) { buf[0] = (char)id; return 1; }
    int k = id - 256;
    for (int i = 0; words[i]; i++)
        if (i == k) { size_t n = strlen(words[i]); memcpy(buf, words[i], n); return (int)n; }
    return -1;
}

static int bit(const uint32_t *b, int id) { return (int)(b[id >> 5] >> (id & 31) & 1); }

static void test_gbnf(const gr_vocab *v) {
    const char *g1 = "root ::= \"a\" b* | \"x\" [0-9]{2,3}\nb ::= \"b\" | \"c\"   # comment\n";
    CHECK(accepts(GR_GBNF, g1, "abcb", v) == 1, "gbnf a b*");
    CHECK(accepts(GR_GBNF, g1, "a", v) == 1, "gbnf a");
    CHECK(accepts(GR_GBNF, g1, "ad", v) == 0, "gbnf rejects ad");
    CHECK(accepts(GR_GBNF, g1, "x12", v) == 1 && accepts(GR_GBNF, g1, "x123", v) == 1, "gbnf {2,3}");
    CHECK(accepts(GR_GBNF, g1, "x1", v) == 0 && accepts(GR_GBNF, g1, "x1234", v) == 0, "gbnf {2,3} bounds");
    const char *g2 = "root ::= [^\"\\\\]+ ( \"é\" | [α-ω] )";
    CHECK(accepts(GR_GBNF, g2, "hi é", v) == 1 && accepts(GR_GBNF, g2, "hiλ", v) == 1, "gbnf utf-8 classes");
    CHECK(accepts(GR_GBNF, g2, "hi\"é", v) == 0, "gbnf negated class");
    CHECK(accepts(GR_GBNF, "root ::= x\n", "", v) == -1, "gbnf undefined rule refused");
    CHECK(accepts(GR_GBNF, "root ::= (\"a\"", "", v) == -1, "gbnf missing ) refused");
    CHECK(accepts(GR_GBNF, "start ::= \"a\"", "a", v) == -1, "gbnf without root refused");
    /* left recursion compiles but must fail cleanly when matched, not hang or overflow */
    gr_grammar *g;
    gr_matcher *m = NULL;
    ig_err err;
    const char *lr = "root ::= root \"a\" | \"b\"";
    CHECK(gr_compile(GR_GBNF, lr, strlen(lr), &g, &err) == IG_OK, "left recursion compiles");
    ig_status st = gr_matcher_new(g, v, &m, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "recursion"), "left recursion: %d %s", st, err.msg);
    gr_matcher_free(m);
    gr_grammar_free(g);
}

static void test_regex(const gr_vocab *v) {
    CHECK(accepts(GR_REGEX, "\\d{3}-[a-z]+(\\.[a-z]+)?", "123-ab.cd", v) == 1, "regex");
    CHECK(accepts(GR_REGEX, "\\d{3}-[a-z]+(\\.[a-z]+)?", "12-ab", v) == 0, "regex rejects");
    CHECK(accepts(GR_REGEX, "(a*)*b|c", "aab", v) == 1 && accepts(GR_REGEX, "(a*)*b|c", "c", v) == 1, "nested star");
    CHECK(accepts(GR_REGEX, "[^x]*", "ab\xc3\xa9", v) == 1, "negated class over UTF-8");
    CHECK(accepts(GR_REGEX, "a(?=b)", "a", v) == -1, "lookahead refused");
    CHECK(accepts(GR_REGEX, "(a)\\1", "aa", v) == -1, "backreference refused");
    CHECK(accepts(GR_REGEX, "a{3,2}", "aaa", v) == -1, "bad repetition refused");
}

static void test_schema(const gr_vocab *v) {
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120},"
                    "\"b\":{\"enum\":[\"x\",null]},\"c\":{\"type\":\"number\",\"minimum\":0.5}},\"required\":[\"a\"],"
                    "\"additionalProperties\":false}";
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": 120}", v) == 1, "schema max");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": 121}", v) == 0, "schema above max");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": -5, \"b\": null}", v) == 1, "schema min, enum null");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": -6}", v) == 0, "schema below min");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"b\": \"x\", \"a\": 7}", v) == 1, "schema any member order");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"b\": \"x\"}", v) == 0, "schema missing required");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": 1, \"d\": 1}", v) == 0, "schema no additional properties");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": 1, \"c\": 0.5}", v) == 1 && accepts(GR_JSON_SCHEMA, s, "{\"a\": 1, \"c\": 0.49}", v) == 0,
          "schema fractional minimum");
    CHECK(accepts(GR_JSON_SCHEMA, s, "{\"a\": 1, \"c\": 12.25}", v) == 1, "schema number above minimum");
    const char *r = "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"},"
                    "\"maxItems\":2}},\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}";
    CHECK(accepts(GR_JSON_SCHEMA, r, "{\"k\": [{\"k\": []}, {}]}", v) == 1, "recursive $ref");
    CHECK(accepts(GR_JSON_SCHEMA, r, "{\"k\": [{}, {}, {}]}", v) == 0, "maxItems");
    const char *f = "{\"type\":\"string\",\"format\":\"date\"}";
    CHECK(accepts(GR_JSON_SCHEMA, f, "\"2024-02-29\"", v) == 1 && accepts(GR_JSON_SCHEMA, f, "\"2024-13-01\"", v) == 0, "format date");
    CHECK(accepts(GR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", v) == 1,
          "lengths count characters");
    CHECK(accepts(GR_JSON_SCHEMA, "{\"type\":\"string\",\"maxLength\":2}", "\"abc\"", v) == 0, "maxLength");
    CHECK(accepts(GR_JSON, "", "{\"x\": [1, 2.5e3, \"s\\n\", {\"y\": null}]}", v) == 1, "json mode");
    CHECK(accepts(GR_JSON, "", "[1]", v) == 0, "json mode wants an object");
    /* refusals name the keyword and where it is */
    gr_grammar *g;
    ig_err err;
    const char *u = "{\"properties\":{\"p\":{\"type\":\"array\",\"uniqueItems\":true}}}";
    ig_status st = gr_compile(GR_JSON_SCHEMA, u, strlen(u), &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "uniqueItems") && strstr(err.msg, "/properties/p"), "refusal: %s", err.msg);
    st = gr_compile(GR_JSON_SCHEMA, "{\"type\":", 8, &g, &err);
    CHECK(st == IG_ERR_FORMAT, "malformed schema: %d", st);
    st = gr_compile(GR_JSON_SCHEMA, "{\"$ref\":\"http://x/y.json\"}", 26, &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "$ref"), "remote $ref: %s", err.msg);
    /* counts past int (were an undefined cast) are refused; a negative maximum admits nothing
     * (-1 read as GR_INF, unbounded, before) */
    const char *huge = "{\"type\":\"string\",\"minLength\":1e300}";
    st = gr_compile(GR_JSON_SCHEMA, huge, strlen(huge), &g, &err);
    CHECK(st == IG_ERR_UNSUPPORTED && strstr(err.msg, "minLength"), "minLength 1e300: %d %s", st, st ? err.msg : "");
    if (!st) gr_grammar_free(g);
    CHECK(accepts(GR_JSON_SCHEMA, "{\"type\":\"array\",\"maxItems\":-1}", "[]", v) == 0, "maxItems -1 admits nothing");
    CHECK(accepts(GR_JSON_SCHEMA, "{\"type\":\"string\",\"maxLength\":-1}", "\"ab\"", v) == 0, "maxLength -1 admits nothing");
}

/* Keywords beyond an expression tree: key presence, enum filtering, DFAs (byte-level walks; the
 * same keywords on a real tokenizer, labels cross-checked with Python jsonschema, are in
 * tests/test_grammar_keywords.py). */
static void test_schema_regular(const gr_vocab *v) {
    const char *np = "{\"type\":\"object\",\"not\":{\"required\":[\"a\",\"b\"]}}";
    CHECK(accepts(GR_JSON_SCHEMA, np, "{\"a\": 1, \"c\": 2}", v) == 1 && accepts(GR_JSON_SCHEMA, np, "{\"b\": 1, \"a\": 2}", v) == 0,
          "not required");
    const char *dep = "{\"dependentRequired\":{\"a\":[\"b\"]}}";
    CHECK(accepts(GR_JSON_SCHEMA, dep, "{\"a\": 1}", v) == 0 && accepts(GR_JSON_SCHEMA, dep, "{\"a\": 1, \"b\": 1}", v) == 1 &&
          accepts(GR_JSON_SCHEMA, dep, "7", v) == 1, "dependentRequired");
    const char *one = "{\"type\":\"object\",\"oneOf\":[{\"required\":[\"u\"]},{\"required\":[\"v\"]}]}";
    CHECK(accepts(GR_JSON_SCHEMA, one, "{\"u\": 1}", v) == 1 && accepts(GR_JSON_SCHEMA, one, "{\"u\": 1, \"v\": 2}", v) == 0 &&
          accepts(GR_JSON_SCHEMA, one, "{}", v) == 0, "oneOf of required, exclusive");
    const char *en = "{\"enum\":[\"ab\",\"abc\",3],\"maxLength\":2,\"not\":{\"const\":3}}";
    CHECK(accepts(GR_JSON_SCHEMA, en, "\"ab\"", v) == 1 && accepts(GR_JSON_SCHEMA, en, "\"abc\"", v) == 0 &&
          accepts(GR_JSON_SCHEMA, en, "3", v) == 0, "enum filtered by the other keywords");
    const char *ne = "{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"not\":{\"enum\":[\"int\"]}}";
    CHECK(accepts(GR_JSON_SCHEMA, ne, "\"in\"", v) == 1 && accepts(GR_JSON_SCHEMA, ne, "\"int\"", v) == 0 &&
          accepts(GR_JSON_SCHEMA, ne, "\"ints\"", v) == 1 && accepts(GR_JSON_SCHEMA, ne, "\"I\"", v) == 0, "not enum beside a pattern");
    const char *lp = "{\"type\":\"string\",\"pattern\":\"^[a-z]+@[a-z]+$\",\"minLength\":5,\"maxLength\":6}";
    CHECK(accepts(GR_JSON_SCHEMA, lp, "\"ab@cd\"", v) == 1 && accepts(GR_JSON_SCHEMA, lp, "\"a@cd\"", v) == 0 &&
          accepts(GR_JSON_SCHEMA, lp, "\"abc@def\"", v) == 0 && accepts(GR_JSON_SCHEMA, lp, "\"abc@de\"", v) == 1, "lengths with a pattern");
    const char *pp = "{\"properties\":{\"xa\":{\"type\":\"integer\"}},\"patternProperties\":{\"^x\":{\"minimum\":5}},"
                     "\"additionalProperties\":{\"type\":\"boolean\"}}";
    CHECK(accepts(GR_JSON_SCHEMA, pp, "{\"xa\": 7, \"xb\": 9.5, \"y\": true}", v) == 1, "patternProperties beside others");
    CHECK(accepts(GR_JSON_SCHEMA, pp, "{\"xa\": 3}", v) == 0 && accepts(GR_JSON_SCHEMA, pp, "{\"xb\": 3}", v) == 0 &&
          accepts(GR_JSON_SCHEMA, pp, "{\"y\": 3}", v) == 0 && accepts(GR_JSON_SCHEMA, pp, "{\"xa\": 7.5}", v) == 0, "patternProperties rejects");
    const char *uq = "{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"uniqueItems\":true}";
    CHECK(accepts(GR_JSON_SCHEMA, uq, "[\"b\", \"a\"]", v) == 1 && accepts(GR_JSON_SCHEMA, uq, "[\"a\", \"a\"]", v) == 0, "uniqueItems over an enum");
    const char *dl = "{\"type\":\"string\",\"pattern\":\"^(ab($|-))+\"}";
    CHECK(accepts(GR_JSON_SCHEMA, dl, "\"ab-ab\"", v) == 1 && accepts(GR_JSON_SCHEMA, dl, "\"abx\"", v) == 0 &&
          accepts(GR_JSON_SCHEMA, dl, "\"ab-abx\"", v) == 1, "'$' inside a group");
}

static void test_masks(const gr_vocab *v) {
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"],\"additionalProperties\":false}";
    gr_grammar *g;
    gr_matcher *m;
    ig_err err;
    uint32_t bits[16];
    CHECK(!gr_compile(GR_JSON_SCHEMA, s, strlen(s), &g, &err) && !gr_matcher_new(g, v, &m, &err), "compile");
    gr_matcher_mask(m, bits, &err);
    CHECK(bit(bits, '{') && bit(bits, 256) && !bit(bits, '[') && !bit(bits, 300), "first mask");
    CHECK(gr_matcher_accept(m, 256, &err) == 1, "accept {\"");
    CHECK(gr_matcher_accept(m, 'b', &err) == 0, "refuse a token the mask forbids");
    gr_matcher_accept(m, 'a', &err);
    gr_matcher_accept(m, 257, &err); /* ": */
    gr_matcher_mask(m, bits, &err);
    CHECK(bit(bits, 259) && bit(bits, 260) && bit(bits, ' ') && !bit(bits, 261) && !bit(bits, 262), "boolean value mask");
    gr_matcher_accept(m, 259, &err); /* true */
    gr_matcher_mask(m, bits, &err);
    CHECK(bit(bits, '}') && !bit(bits, 300), "no EOS before the end");
    gr_matcher_accept(m, '}', &err);
    gr_matcher_mask(m, bits, &err);
    CHECK(bit(bits, 300) && !bit(bits, ' ') && gr_matcher_must_end(m), "only EOS at the end");
    CHECK(gr_matcher_accept(m, 300, &err) == 1, "EOS accepted");
    gr_matcher_free(m);
    gr_grammar_free(g);
}

/* vocabulary for the brute-force check: single bytes 0..255, then these; EOS = its size */
static const char *pieces[] = {"\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "a\xc3\xa9", "\xc3\xa9\"", "\xe6\x97", "\xa5\xe6",
    "abcdefghijklmnopqrstuvwxyz", "name", "na", "nab", "nam", "x\"", "\":", "\", \"", " \"", "{\"", "\"}", "\\n", "a\\\"b",
    "ab", "abc", "abcd", "12", ", ", "\xf0\x9f\x98\x80", "z\xf0\x9f", "\"]", "[\"", "\n  ", "true", "\xed\xa0\x80", "name\":1", "ame\":1", "x\":1", NULL};
static int n_pieces(void) { int n = 0; while (pieces[n]) n++; return n; }
static int piece_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx;
    if (id < 256) { buf[0] = (char)id; return 1; }
    if (id - 256 >= n_pieces()) return -1;
    size_t n = strlen(pieces[id - 256]);
    memcpy(buf, pieces[id - 256], n);
    return (int)n;
}

/* Walks inst byte by byte (single-byte tokens); at each step the mask must equal the tokens a
 * second matcher, replaying the same bytes, accepts. */
static void check_masks_brute(gr_kind kind, const char *src, const char *inst, const gr_vocab *v, int n) {
    gr_grammar *g;
    gr_matcher *m, *m2;
    ig_err err;
    if (gr_compile(kind, src, strlen(src), &g, &err) || gr_matcher_new(g, v, &m, &err)) {
        CHECK(0, "compile %s: %s", src, err.msg);
        return;
    }
    gr_matcher_new(g, v, &m2, &err);
    uint32_t bits[64];
    size_t len = strlen(inst);
    int bad = 0;
    for (size_t i = 0; i <= len && !bad; i++) {
        CHECK(gr_matcher_mask(m, bits, &err) == IG_OK, "mask: %s", err.msg);
        for (int32_t id = 0; id < n && !bad; id++) {
            gr_matcher_reset(m2);
            gr_matcher_accept_bytes(m2, inst, i, &err);
            int want = gr_matcher_accept(m2, id, &err) == 1;
            if (want != bit(bits, id)) {
                CHECK(0, "%s: after %zu bytes of %s the mask says %d for token %d, trying it says %d", src, i, inst, bit(bits, id), id, want);
                bad = 1;
            }
        }
        if (i < len) CHECK(gr_matcher_accept(m, (unsigned char)inst[i], &err) == 1, "byte %zu of %s", i, inst);
    }
    gr_matcher_free(m);
    gr_matcher_free(m2);
    gr_grammar_free(g);
}

static void test_masks_brute(void) {
    gr_vocab *v;
    ig_err err;
    int32_t n = 256 + n_pieces();
    if (gr_vocab_new(n + 1, piece_bytes, NULL, &n, 1, &v, &err)) { CHECK(0, "vocab: %s", err.msg); return; }
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
                      "\"nab\":{\"type\":\"integer\"}},\"required\":[\"name\"]}",
                      "{\"name\": \"\xe6\x97\xa5\xe6\x9c\xac\xc3\xa9\", \"nab\": 12, \"zz\": \"x\", \"na\": [true]}", v, n + 1);
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}}",
                      "[\"ab\", \"\xe6\x97\xa5\xf0\x9f\x98\x80\xc3\xa9\", \"\\n\xc3\xa9\"]", v, n + 1);
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":30}}",
                      "{\"nabc\": \"abcdefghijklmnopqrstuvwxyz\xc3\xa9\", \"\": \"\"}", v, n + 1);
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
                      "\"additionalProperties\":{\"type\":\"integer\"}}", "{\"name\": \"a\", \"nx\": 1, \"x\": 2}", v, n + 1);
    /* counts beyond the longest piece (26 bytes): masks of clamped counters against the real ones */
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":28,\"maxLength\":31}}",
                      "[\"abcdefghijklmnopqrstuvwxyz\xc3\xa9\\nab\", \"abcdefghijklmnopqrstuvwxyz\xe6\x97\xa5\xe6\x9c\xac\"]", v, n + 1);
    check_masks_brute(GR_REGEX, "(ab{2,40}c){2,30}x?", "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbcabbcx", v, n + 1);
    check_masks_brute(GR_JSON, "", "{\"a\xc3\xa9\": [1, \"x\\\"\", {\"name\": null}]}", v, n + 1);
    /* key languages and counted patterns as DFAs turned into right-linear rules */
    check_masks_brute(GR_JSON_SCHEMA, "{\"properties\":{\"nab\":{\"type\":\"integer\"}},\"patternProperties\":{\"^n\":{\"type\":\"integer\"}},"
                      "\"additionalProperties\":{\"type\":\"string\"}}", "{\"nab\": 1, \"na\": 2, \"ab\": \"\xc3\xa9\", \"\": \"x\"}", v, n + 1);
    check_masks_brute(GR_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"^[a-z\xc3\xa9]+@\",\"minLength\":3,\"maxLength\":6}",
                      "\"ab@\xc3\xa9x\"", v, n + 1);
    gr_vocab_free(v);
}

/* vocabulary for the counter check: ids 0..N_CT-1 below; EOS = N_CT */
static const char *ctoks[] = {"\"", "a", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\\n", "ab", "a\xc3\xa9\xe6\x97\xa5",
                              "\"}", "a\"", "\xc3\xa9\"", "abcdefghijklmnopqrstuvwxyz", "\xc3",
                              "0123456789012345678901234567890123456789012345678901234567890123456789", NULL};
static const int ct_chars[] = {0, 1, 1, 1, 1, 1, 2, 3, 0, 1, 1, 26, 1, 70}; /* characters up to any quote (a lead byte: the one it starts) */
static const int ct_close[] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0};  /* the token ends the string */
#define N_CT 14
static int ctok_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx; (void)cap;
    if (id >= N_CT) return -1;
    size_t n = strlen(ctoks[id]);
    memcpy(buf, ctoks[id], n);
    return (int)n;
}

/* A string schema of [lo, hi] characters: after the quote and k characters (taken as tokens of
 * the cycle below), each token's bit must be what its character count says. */
static void check_counted(const gr_vocab *v, int lo, int hi, int upto) {
    char src[128];
    snprintf(src, sizeof src, "{\"type\":\"string\",\"minLength\":%d,\"maxLength\":%d}", lo, hi);
    gr_grammar *g;
    gr_matcher *m;
    ig_err err;
    if (gr_compile(GR_JSON_SCHEMA, src, strlen(src), &g, &err) || gr_matcher_new(g, v, &m, &err)) {
        CHECK(0, "compile %s: %s", src, err.msg);
        return;
    }
    uint32_t bits[2];
    CHECK(gr_matcher_accept(m, 0, &err) == 1, "%s: opening quote", src);
    static const int cycle[] = {1, 2, 3, 4, 5, 6, 7, 11}; /* ASCII, 2-, 3-, 4-byte UTF-8, an escape, longer tokens */
    int bad = 0;
    for (int k = 0, step = 0; k <= upto && !bad; step++) {
        CHECK(gr_matcher_mask(m, bits, &err) == IG_OK, "mask: %s", err.msg);
        for (int id = 0; id < N_CT && !bad; id++) {
            int n = ct_chars[id], want = k + n <= hi && (!ct_close[id] || k + n >= lo);
            if (id == 8) want = 0; /* '}' cannot follow a lone string */
            if (want != bit(bits, id)) {
                CHECK(0, "%s: after %d characters token %d (%s) has bit %d, want %d", src, k, id, ctoks[id], bit(bits, id), want);
                bad = 1;
            }
        }
        CHECK(!bit(bits, N_CT), "%s: no EOS inside the string", src);
        /* long runs: the 26-character token while far from the bounds */
        int id = k + 26 < lo - 30 || (k + 26 < hi - 30 && k > lo + 30) ? 11 : cycle[step % 7];
        if (k + ct_chars[id] > upto) break;
        if (gr_matcher_accept(m, id, &err) != 1) { CHECK(0, "%s: token %d after %d characters", src, id, k); break; }
        k += ct_chars[id];
    }
    gr_matcher_free(m);
    gr_grammar_free(g);
}

static void test_counted(void) {
    gr_vocab *v;
    ig_err err;
    int32_t eos = N_CT;
    if (gr_vocab_new(N_CT + 1, ctok_bytes, NULL, &eos, 1, &v, &err)) { CHECK(0, "vocab: %s", err.msg); return; }
    check_counted(v, 3, 5, 5);
    check_counted(v, 0, 1, 1);
    check_counted(v, 2, 2, 2);
    check_counted(v, 0, 32767, 300);
    check_counted(v, 32760, 32767, 32767); /* both ends of a long range */
    check_counted(v, 40, 100000, 200);
    check_counted(v, 0, 70, 4); /* a 70-character token fits exactly, then not */
    check_counted(v, 0, 69, 0);
    check_counted(v, 70, 71, 0);
    /* the end: after exactly lo..hi characters the quote closes and EOS follows */
    for (int n = 2; n <= 6; n++) {
        char inst[16] = "\"";
        memset(inst + 1, 'a', (size_t)n);
        strcpy(inst + 1 + n, "\"");
        CHECK(accepts(GR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":3,\"maxLength\":5}", inst, v) == (n >= 3 && n <= 5),
              "%d characters against 3..5", n);
    }
    gr_vocab_free(v);
}

/* ---- two vocabularies built at once: each must give the masks it gives built alone */

#define RV_N 60000
/* token id's bytes: a pseudo-random string of 1..6 bytes over JSON's punctuation and a few
 * letters, from the vocabulary's seed (ctx) and the id; the last id is EOS */
static int rand_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    static const char alpha[] = "{}[]\":, \n\\aeb19";
    if (id >= RV_N - 1) return -1;
    uint64_t x = (uint64_t)(uintptr_t)ctx * 0x9E3779B97F4A7C15ull + (uint64_t)id * 0xBF58476D1CE4E5B9ull + 1;
    int n = 1 + (int)((x >> 7) % 6);
    for (int i = 0; i < n && (size_t)i < cap; i++) {
        x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;
        buf[i] = alpha[x % (sizeof alpha - 1)];
    }
    return n;
}

/* masks of JSON mode over v at each byte of one instance, into out[bytes + 1][words] */
static void json_masks(const gr_vocab *v, uint32_t *out, size_t words) {
    static const char inst[] = "{\"a\": [1, \"e\\n\", {\"b\": 9}], \"ee\": 19}";
    gr_grammar *g;
    gr_matcher *m;
    ig_err err;
    if (gr_compile(GR_JSON, "", 0, &g, &err) || gr_matcher_new(g, v, &m, &err)) { CHECK(0, "json mode: %s", err.msg); return; }
    for (size_t i = 0; i < sizeof inst; i++) {
        CHECK(gr_matcher_mask(m, out + i * words, &err) == IG_OK, "mask: %s", err.msg);
        if (i + 1 < sizeof inst) CHECK(gr_matcher_accept_bytes(m, inst + i, 1, &err) == 1, "byte %zu", i);
    }
    gr_matcher_free(m);
    gr_grammar_free(g);
}

typedef struct { uintptr_t seed; int rounds; const uint32_t *want; size_t words, nw; int bad; } vb_job;
static void *build_many(void *arg) {
    vb_job *j = arg;
    uint32_t *got = calloc(j->nw, 4);
    for (int r = 0; r < j->rounds && got; r++) {
        gr_vocab *v;
        int32_t eos = RV_N - 1;
        ig_err err;
        if (gr_vocab_new(RV_N, rand_bytes, (void *)j->seed, &eos, 1, &v, &err)) { j->bad = 1; break; }
        json_masks(v, got, j->words);
        if (memcmp(got, j->want, j->nw * 4)) j->bad = 1;
        gr_vocab_free(v);
    }
    free(got);
    return NULL;
}

static void test_vocab_threads(void) {
    const size_t words = RV_N / 32 + 2, nw = words * 64;
    vb_job jobs[2] = {{1, 4, NULL, words, nw, 0}, {2, 4, NULL, words, nw, 0}};
    uint32_t *want[2];
    for (int k = 0; k < 2; k++) { /* the references, built alone */
        gr_vocab *v;
        int32_t eos = RV_N - 1;
        ig_err err;
        want[k] = calloc(nw, 4);
        if (!want[k] || gr_vocab_new(RV_N, rand_bytes, (void *)jobs[k].seed, &eos, 1, &v, &err)) { CHECK(0, "vocab"); return; }
        json_masks(v, want[k], words);
        gr_vocab_free(v);
        jobs[k].want = want[k];
    }
    CHECK(memcmp(want[0], want[1], nw * 4), "the two vocabularies should differ");
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, build_many, &jobs[k]);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) CHECK(!jobs[k].bad, "vocabulary %d built beside another gives other masks", k);
    free(want[0]);
    free(want[1]);
}

int main(void) {
    gr_vocab *v;
    ig_err err;
    int32_t eos = 300;
    if (gr_vocab_new(301, tok_bytes, NULL, &eos, 1, &v, &err)) { printf("vocab: %s\n", err.msg); return 1; }
    test_gbnf(v);
    test_regex(v);
    test_schema(v);
    test_schema_regular(v);
    test_masks(v);
    gr_vocab_free(v);
    test_masks_brute();
    test_counted();
    test_vocab_threads();
    if (!fails) printf("test_grammar: ok\n");
    return fails ? 1 : 0;
}
