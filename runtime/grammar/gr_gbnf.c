/* gr_gbnf.c — GBNF grammars (llama.cpp's syntax) into grammar expressions.
 *
 *   root ::= "{" ws item ("," ws item)* "}"      # rules; the start rule is `root`
 *   item ::= [a-z]+ | "\"" [^"\\]* "\"" | (x | y)? z{2,5} .
 *
 * Terminals: "literals" and [classes] ([^..] negated, ranges) with escapes \n \r \t \\ \" \]
 * \- \xHH \uHHHH \UHHHHHHHH; `.` is any character. Postfix * + ? {n} {n,} {n,m}; ( ) groups;
 * `#` comments. A rule ends at a newline unless inside parentheses or right after `|`.
 * Classes and `.` are Unicode code points, matched as UTF-8. Token references (<[id]>) are
 * refused. Left-recursive rules compile but fail when matched (the matcher's depth limit).
 */
#include <stdlib.h>
#include <string.h>

#include "gr_internal.h"

typedef struct gp {
    gr_builder *b;
    const char *s; size_t n, i;
    int line;
    int depth;
    ig_err *err; ig_status st;
} gp;

static int gfail(gp *p, ig_status st, const char *what) {
    if (!p->st) {
        p->st = st;
        ig_fail(p->err, st, "gbnf: %s at line %d", what, p->line);
    }
    return -1;
}

static void skip_space(gp *p, int newline_ok) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '#') { while (p->i < p->n && p->s[p->i] != '\n') p->i++; continue; }
        if (c == ' ' || c == '\t' || c == '\r') { p->i++; continue; }
        if (c == '\n' && newline_ok) { p->line++; p->i++; continue; }
        break;
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hexv(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One (possibly escaped) code point of a literal or class. -1 on error. */
static long read_char(gp *p) {
    if (p->i >= p->n) return gfail(p, IG_ERR_FORMAT, "unexpected end of grammar");
    const unsigned char *u = (const unsigned char *)p->s + p->i;
    if (u[0] == '\\') {
        if (p->i + 1 >= p->n) return gfail(p, IG_ERR_FORMAT, "trailing backslash");
        char e = (char)u[1];
        p->i += 2;
        int nd = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nd) {
            long v = 0;
            for (int k = 0; k < nd; k++) {
                if (p->i >= p->n || hexv(p->s[p->i]) < 0) return gfail(p, IG_ERR_FORMAT, "bad hex escape");
                v = v * 16 + hexv(p->s[p->i++]);
            }
            return v > 0x10FFFF ? gfail(p, IG_ERR_FORMAT, "code point beyond U+10FFFF") : v;
        }
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return e;
        }
        return gfail(p, IG_ERR_FORMAT, "unknown escape");
    }
    uint32_t c = u[0];
    int l = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 1;
    if ((size_t)l > p->n - p->i) l = 1;
    if (l == 2) c = (c & 31) << 6 | (u[1] & 63);
    else if (l == 3) c = (c & 15) << 12 | (u[1] & 63) << 6 | (u[2] & 63);
    else if (l == 4) c = (c & 7) << 18 | (u[1] & 63) << 12 | (u[2] & 63) << 6 | (u[3] & 63);
    p->i += (size_t)l;
    return c;
}

static int cp_node(gp *p, uint32_t c) {
    gr_cpset s = {0};
    cps_add(&s, c, c);
    int node = gb_cpset(p->b, &s, 0);
    cps_free(&s);
    return node;
}

static int parse_alts(gp *p);

static int parse_primary(gp *p) {
    char c = p->s[p->i];
    if (c == '"') {
        p->i++;
        int cap = 16, n = 0;
        int *k = malloc(sizeof(int) * (size_t)cap);
        if (!k) return gfail(p, IG_ERR_NOMEM, "out of memory");
        while (p->i < p->n && p->s[p->i] != '"') {
            if (p->s[p->i] == '\n') { free(k); return gfail(p, IG_ERR_FORMAT, "newline inside a literal"); }
            long ch = read_char(p);
            if (ch < 0) { free(k); return -1; }
            if (n == cap) {
                int *k2 = realloc(k, sizeof(int) * (size_t)(cap *= 2));
                if (!k2) { free(k); return gfail(p, IG_ERR_NOMEM, "out of memory"); }
                k = k2;
            }
            k[n++] = cp_node(p, (uint32_t)ch);
        }
        if (p->i >= p->n) { free(k); return gfail(p, IG_ERR_FORMAT, "unterminated literal"); }
        p->i++;
        int node = n ? gb_seq(p->b, k, n) : gb_empty(p->b);
        free(k);
        return node;
    }
    if (c == '[') {
        p->i++;
        gr_cpset s = {0};
        int neg = 0;
        if (p->i < p->n && p->s[p->i] == '^') { neg = 1; p->i++; }
        while (p->i < p->n && p->s[p->i] != ']') {
            long lo = read_char(p), hi;
            if (lo < 0) { cps_free(&s); return -1; }
            hi = lo;
            if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                p->i++;
                if ((hi = read_char(p)) < 0) { cps_free(&s); return -1; }
                if (hi < lo) { cps_free(&s); return gfail(p, IG_ERR_FORMAT, "class range out of order"); }
            }
            cps_add(&s, (uint32_t)lo, (uint32_t)hi);
        }
        if (p->i >= p->n) { cps_free(&s); return gfail(p, IG_ERR_FORMAT, "unterminated character class"); }
        p->i++;
        cps_normalize(&s);
        if (neg) cps_negate(&s);
        int node = gb_cpset(p->b, &s, 0);
        cps_free(&s);
        return node;
    }
    if (c == '.') {
        p->i++;
        gr_cpset s = {0};
        cps_add(&s, 0, 0x10FFFF);
        int node = gb_cpset(p->b, &s, 0);
        cps_free(&s);
        return node;
    }
    if (c == '(') {
        p->i++;
        if (++p->depth > 200) return gfail(p, IG_ERR_UNSUPPORTED, "groups nested too deeply");
        skip_space(p, 1);
        int node = parse_alts(p);
        p->depth--;
        if (node < 0) return -1;
        skip_space(p, 1);
        if (p->i >= p->n || p->s[p->i] != ')') return gfail(p, IG_ERR_FORMAT, "missing )");
        p->i++;
        return node;
    }
    if (c == '<') return gfail(p, IG_ERR_UNSUPPORTED, "token references are not supported");
    if (is_name_char(c)) {
        size_t st = p->i;
        while (p->i < p->n && is_name_char(p->s[p->i])) p->i++;
        char name[128];
        size_t l = p->i - st;
        if (l >= sizeof name) return gfail(p, IG_ERR_FORMAT, "rule name too long");
        memcpy(name, p->s + st, l);
        name[l] = 0;
        return gb_ref(p->b, gb_rule(p->b, name));
    }
    return gfail(p, IG_ERR_FORMAT, "unexpected character");
}

static int parse_postfix(gp *p, int node) {
    while (p->i < p->n && node >= 0) {
        char c = p->s[p->i];
        if (c == '*') { p->i++; node = gb_rep(p->b, node, 0, GR_INF); }
        else if (c == '+') { p->i++; node = gb_rep(p->b, node, 1, GR_INF); }
        else if (c == '?') { p->i++; node = gb_rep(p->b, node, 0, 1); }
        else if (c == '{') {
            p->i++;
            skip_space(p, 0);
            long lo = 0, hi;
            int nd = 0;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && lo < 100000) lo = lo * 10 + (p->s[p->i++] - '0'), nd++;
            if (!nd) return gfail(p, IG_ERR_FORMAT, "bad repetition");
            hi = lo;
            skip_space(p, 0);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_space(p, 0);
                hi = GR_INF;
                if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
                    hi = 0;
                    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && hi < 100000) hi = hi * 10 + (p->s[p->i++] - '0');
                }
            }
            skip_space(p, 0);
            if (p->i >= p->n || p->s[p->i] != '}') return gfail(p, IG_ERR_FORMAT, "missing } in repetition");
            p->i++;
            if (lo > 10000 || hi > 10000) return gfail(p, IG_ERR_UNSUPPORTED, "repetition count above 10000");
            if (hi != GR_INF && hi < lo) return gfail(p, IG_ERR_FORMAT, "{n,m} with m < n");
            node = gb_rep(p->b, node, (int)lo, (int)hi);
        } else break;
    }
    return node;
}

static int parse_seq(gp *p) {
    int cap = 8, n = 0;
    int *k = malloc(sizeof(int) * (size_t)cap);
    if (!k) return gfail(p, IG_ERR_NOMEM, "out of memory");
    for (;;) {
        skip_space(p, p->depth > 0);
        if (p->i >= p->n) break;
        char c = p->s[p->i];
        if (c == '|' || c == ')' || c == '\n') break;
        /* the next rule's "name ::=" ends this one (a newline already did at top level) */
        int a = parse_postfix(p, parse_primary(p));
        if (a < 0) { free(k); return -1; }
        if (n == cap) {
            int *k2 = realloc(k, sizeof(int) * (size_t)(cap *= 2));
            if (!k2) { free(k); return gfail(p, IG_ERR_NOMEM, "out of memory"); }
            k = k2;
        }
        k[n++] = a;
    }
    int node = n ? gb_seq(p->b, k, n) : gb_empty(p->b);
    free(k);
    return node;
}

static int parse_alts(gp *p) {
    int cap = 4, n = 0;
    int *k = malloc(sizeof(int) * (size_t)cap);
    if (!k) return gfail(p, IG_ERR_NOMEM, "out of memory");
    for (;;) {
        int s = parse_seq(p);
        if (s < 0) { free(k); return -1; }
        if (n == cap) {
            int *k2 = realloc(k, sizeof(int) * (size_t)(cap *= 2));
            if (!k2) { free(k); return gfail(p, IG_ERR_NOMEM, "out of memory"); }
            k = k2;
        }
        k[n++] = s;
        skip_space(p, p->depth > 0);
        if (p->i < p->n && p->s[p->i] == '|') { p->i++; skip_space(p, 1); continue; }
        break;
    }
    int node = gb_alt(p->b, k, n);
    free(k);
    return node;
}

ig_status gr_gbnf_build(gr_builder *b, const char *text, size_t len, int *root, ig_err *err) {
    gp p = {.b = b, .s = text, .n = len, .line = 1, .err = err};
    *root = -1;
    char *defined = calloc(1, 1);
    int n_def = 0;
    for (;;) {
        skip_space(&p, 1);
        if (p.i >= p.n) break;
        size_t st = p.i;
        while (p.i < p.n && is_name_char(p.s[p.i])) p.i++;
        if (p.i == st) { gfail(&p, IG_ERR_FORMAT, "expected a rule name"); break; }
        char name[128];
        if (p.i - st >= sizeof name) { gfail(&p, IG_ERR_FORMAT, "rule name too long"); break; }
        memcpy(name, p.s + st, p.i - st);
        name[p.i - st] = 0;
        skip_space(&p, 0);
        if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3)) { gfail(&p, IG_ERR_FORMAT, "expected ::= after the rule name"); break; }
        p.i += 3;
        skip_space(&p, 1);
        int r = gb_rule(b, name);
        if (r < 0) { gfail(&p, IG_ERR_NOMEM, "out of memory"); break; }
        if (r < n_def && defined[r]) { gfail(&p, IG_ERR_FORMAT, "rule defined twice"); break; }
        int body = parse_alts(&p);
        if (body < 0) break;
        if (p.i < p.n && p.s[p.i] == ')') { gfail(&p, IG_ERR_FORMAT, "unmatched )"); break; }
        gb_set_body(b, r, body);
        char *d2 = realloc(defined, (size_t)b->n_rules + 1);
        if (!d2) { gfail(&p, IG_ERR_NOMEM, "out of memory"); break; }
        defined = d2;
        memset(defined + n_def, 0, (size_t)(b->n_rules + 1 - n_def));
        n_def = b->n_rules + 1;
        defined[r] = 1;
    }
    free(defined);
    if (p.st) return p.st;
    for (int i = 0; i < b->n_rules; i++)
        if (b->rule_names[i] && !strcmp(b->rule_names[i], "root")) *root = i;
    if (*root < 0) return ig_fail(err, IG_ERR_FORMAT, "gbnf: no rule named 'root'");
    return IG_OK;
}
