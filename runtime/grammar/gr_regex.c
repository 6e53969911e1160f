/* gr_regex.c — regular expressions (the ECMA-262 subset JSON Schema `pattern` uses) into grammar
 * expressions over UTF-8 bytes.
 *
 * Supported: literals, . [..] [^..] ranges, \d \D \w \W \s \S, \n \r \t \f \v \0 \xHH \uHHHH
 * \u{H..}, escaped punctuation, groups (..) (?:..) (?<name>..), | and the quantifiers * + ?
 * {n} {n,} {n,m} (lazy forms match the same strings). ^ and $ only at the start / end of a
 * top-level alternative. Refused (IG_ERR_UNSUPPORTED, naming the construct): lookaround,
 * backreferences, \b \B, \p{..}, flags, anchors elsewhere.
 *
 * In a JSON string (json = 1) each code point is matched as json.dumps writes it (quote,
 * backslash and controls escaped). search = 1 gives JSON Schema's unanchored semantics: an
 * alternative without ^ may be preceded, one without $ followed, by any string characters.
 */
#include <stdlib.h>
#include <string.h>

#include "gr_internal.h"

int gr_json_char(gr_builder *b); /* gr_schema.c: one character of a JSON string, escapes included */

typedef struct rx {
    gr_builder *b;
    const char *s; size_t n, i;
    int json, search, depth;
    int quote_end; /* gr_regex_build_quoted: every '$' is the end marker 0x01 */
    ig_err *err; ig_status st;
} rx;

static int rx_fail(rx *r, ig_status st, const char *what) {
    if (!r->st) {
        r->st = st;
        ig_fail(r->err, st, "regex: %s at offset %zu of /%.*s/", what, r->i, (int)(r->n > 200 ? 200 : r->n), r->s);
    }
    return -1;
}

static uint32_t next_cp(rx *r) { /* decodes one UTF-8 code point (invalid bytes as themselves) */
    const unsigned char *p = (const unsigned char *)r->s + r->i;
    size_t left = r->n - r->i;
    uint32_t c = p[0];
    int l = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 1;
    if ((size_t)l > left) l = 1;
    if (l == 2) c = (c & 31) << 6 | (p[1] & 63);
    else if (l == 3) c = (c & 15) << 12 | (p[1] & 63) << 6 | (p[2] & 63);
    else if (l == 4) c = (c & 7) << 18 | (p[1] & 63) << 12 | (p[2] & 63) << 6 | (p[3] & 63);
    r->i += (size_t)l;
    return c;
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int read_hex(rx *r, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        if (r->i >= r->n || hexval(r->s[r->i]) < 0) return -1;
        v = v * 16 + (uint32_t)hexval(r->s[r->i++]);
    }
    *out = v;
    return 0;
}

/* Adds a class escape's code points (\d \w \s and negations) to set; 1 if c was one. */
static int class_escape(int c, gr_cpset *set) {
    gr_cpset t = {0};
    int neg = c == 'D' || c == 'W' || c == 'S';
    switch (c | 0x20) {
    case 'd': cps_add(&t, '0', '9'); break;
    case 'w': cps_add(&t, '0', '9'); cps_add(&t, 'A', 'Z'); cps_add(&t, 'a', 'z'); cps_add(&t, '_', '_'); break;
    case 's':
        cps_add(&t, 9, 13); cps_add(&t, ' ', ' '); cps_add(&t, 0xA0, 0xA0); cps_add(&t, 0x1680, 0x1680);
        cps_add(&t, 0x2000, 0x200A); cps_add(&t, 0x2028, 0x2029); cps_add(&t, 0x202F, 0x202F);
        cps_add(&t, 0x205F, 0x205F); cps_add(&t, 0x3000, 0x3000); cps_add(&t, 0xFEFF, 0xFEFF);
        break;
    default: return 0;
    }
    if (neg) cps_negate(&t);
    for (int k = 0; k < t.n; k++) cps_add(set, t.r[k][0], t.r[k][1]);
    cps_free(&t);
    return 1;
}

/* After a backslash: a single code point escape into *cp (0), a class into set (1), or -1. */
static int read_escape(rx *r, gr_cpset *set, uint32_t *cp, int in_class) {
    if (r->i >= r->n) return rx_fail(r, IG_ERR_FORMAT, "trailing backslash");
    int c = (unsigned char)r->s[r->i];
    if (class_escape(c, set)) { r->i++; return 1; }
    r->i++;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0': *cp = 0; return 0;
    case 'x': if (read_hex(r, 2, cp)) return rx_fail(r, IG_ERR_FORMAT, "bad \\x escape"); return 0;
    case 'u':
        if (r->i < r->n && r->s[r->i] == '{') {
            r->i++;
            uint32_t v = 0;
            int nd = 0;
            while (r->i < r->n && hexval(r->s[r->i]) >= 0 && nd < 7) v = v * 16 + (uint32_t)hexval(r->s[r->i++]), nd++;
            if (!nd || r->i >= r->n || r->s[r->i] != '}' || v > 0x10FFFF) return rx_fail(r, IG_ERR_FORMAT, "bad \\u{} escape");
            r->i++;
            *cp = v;
            return 0;
        }
        if (read_hex(r, 4, cp)) return rx_fail(r, IG_ERR_FORMAT, "bad \\u escape");
        return 0;
    case 'b':
        if (in_class) { *cp = '\b'; return 0; }
        r->i--;
        return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported word boundary \\b");
    case 'B': r->i--; return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported \\B");
    case 'p': case 'P': r->i--; return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported Unicode property class");
    case 'k': r->i--; return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported backreference");
    case 'c': r->i--; return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported \\c escape");
    }
    if (c >= '1' && c <= '9') { r->i--; return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported backreference"); }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        r->i--;
        return rx_fail(r, IG_ERR_UNSUPPORTED, "unknown escape");
    }
    r->i--;
    *cp = next_cp(r);
    return 0;
}

static int parse_class(rx *r) { /* after '[' */
    gr_cpset set = {0};
    int neg = 0, first = 1;
    if (r->i < r->n && r->s[r->i] == '^') { neg = 1; r->i++; }
    for (;;) {
        if (r->i >= r->n) { cps_free(&set); return rx_fail(r, IG_ERR_FORMAT, "unterminated [ class"); }
        if (r->s[r->i] == ']' && !first) { r->i++; break; }
        first = 0;
        uint32_t lo, hi;
        if (r->s[r->i] == '\\') {
            r->i++;
            int k = read_escape(r, &set, &lo, 1);
            if (k < 0) { cps_free(&set); return -1; }
            if (k == 1) continue;
        } else if (r->s[r->i] == '[' && r->i + 1 < r->n && r->s[r->i + 1] == ':') {
            cps_free(&set);
            return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported POSIX class");
        } else lo = next_cp(r);
        hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                gr_cpset tmp = {0};
                int k = read_escape(r, &tmp, &hi, 1);
                cps_free(&tmp);
                if (k != 0) { cps_free(&set); return k < 0 ? -1 : rx_fail(r, IG_ERR_FORMAT, "class escape as a range end"); }
            } else hi = next_cp(r);
            if (hi < lo) { cps_free(&set); return rx_fail(r, IG_ERR_FORMAT, "range out of order in class"); }
        }
        cps_add(&set, lo, hi);
    }
    cps_normalize(&set);
    if (neg) cps_negate(&set);
    int node = gb_cpset(r->b, &set, r->json);
    cps_free(&set);
    return node;
}

static int one_cp(rx *r, uint32_t c) {
    if (!r->json && c < 0x80) return gb_range(r->b, (int)c, (int)c);
    gr_cpset s = {0};
    cps_add(&s, c, c);
    int node = gb_cpset(r->b, &s, r->json);
    cps_free(&s);
    return node;
}

static int parse_alt(rx *r);

static int parse_atom(rx *r) {
    char c = r->s[r->i];
    if (c == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else if (r->i + 2 < r->n && r->s[r->i + 1] == '<' && r->s[r->i + 2] != '=' && r->s[r->i + 2] != '!') {
                while (r->i < r->n && r->s[r->i] != '>') r->i++;
                if (r->i >= r->n) return rx_fail(r, IG_ERR_FORMAT, "unterminated group name");
                r->i++;
            } else if (r->i + 1 < r->n && r->s[r->i + 1] == 'P' && r->i + 2 < r->n && r->s[r->i + 2] == '<') {
                while (r->i < r->n && r->s[r->i] != '>') r->i++;
                if (r->i >= r->n) return rx_fail(r, IG_ERR_FORMAT, "unterminated group name");
                r->i++;
            } else return rx_fail(r, IG_ERR_UNSUPPORTED, "unsupported group (lookaround or flags)");
        }
        if (++r->depth > 200) return rx_fail(r, IG_ERR_UNSUPPORTED, "groups nested too deeply");
        int node = parse_alt(r);
        r->depth--;
        if (node < 0) return -1;
        if (r->i >= r->n || r->s[r->i] != ')') return rx_fail(r, IG_ERR_FORMAT, "missing )");
        r->i++;
        return node;
    }
    if (c == '[') { r->i++; return parse_class(r); }
    if (c == '.') {
        r->i++;
        gr_cpset s = {0};
        cps_add(&s, '\n', '\n'); cps_add(&s, '\r', '\r'); cps_add(&s, 0x2028, 0x2029);
        cps_negate(&s);
        int node = gb_cpset(r->b, &s, r->json);
        cps_free(&s);
        return node;
    }
    if (c == '\\') {
        r->i++;
        gr_cpset s = {0};
        uint32_t cp;
        int k = read_escape(r, &s, &cp, 0);
        int node = k < 0 ? -1 : k == 1 ? (cps_normalize(&s), gb_cpset(r->b, &s, r->json)) : one_cp(r, cp);
        cps_free(&s);
        return node;
    }
    if (c == '$' && r->quote_end) { r->i++; return gb_str(r->b, "\x01"); } /* the end marker */
    if (c == '^' || c == '$') return rx_fail(r, IG_ERR_UNSUPPORTED, "anchor inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (c == '{' && !(r->i + 1 < r->n && r->s[r->i + 1] >= '0' && r->s[r->i + 1] <= '9')) {
            r->i++;
            return one_cp(r, '{');
        }
        return rx_fail(r, IG_ERR_FORMAT, "quantifier without an operand");
    }
    if (c == ')') return rx_fail(r, IG_ERR_FORMAT, "unmatched )");
    return one_cp(r, next_cp(r));
}

static int read_int(rx *r, int *v) {
    size_t st = r->i;
    long x = 0;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9' && x < 100000) x = x * 10 + (r->s[r->i++] - '0');
    *v = (int)x;
    return r->i > st ? 0 : -1;
}

/* Reads a quantifier after an atom into min/max; 0 if none, 1 if one, -1 on error. */
static int parse_quant(rx *r, int *min, int *max) {
    if (r->i >= r->n) return 0;
    char c = r->s[r->i];
    if (c == '*') { *min = 0; *max = GR_INF; r->i++; }
    else if (c == '+') { *min = 1; *max = GR_INF; r->i++; }
    else if (c == '?') { *min = 0; *max = 1; r->i++; }
    else if (c == '{') {
        size_t save = r->i++;
        if (read_int(r, min)) { r->i = save; return 0; }
        *max = *min;
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            if (read_int(r, max)) *max = GR_INF;
        }
        if (r->i >= r->n || r->s[r->i] != '}') { r->i = save; return 0; }
        r->i++;
        if (*max != GR_INF && *max < *min) return rx_fail(r, IG_ERR_FORMAT, "{n,m} with m < n");
        if (*min > 10000 || *max > 10000) return rx_fail(r, IG_ERR_UNSUPPORTED, "repetition count above 10000");
    } else return 0;
    if (r->i < r->n && r->s[r->i] == '?') r->i++;
    else if (r->i < r->n && r->s[r->i] == '+') return rx_fail(r, IG_ERR_UNSUPPORTED, "possessive quantifier");
    return 1;
}

static int parse_seq(rx *r) {
    int cap = 16, n = 0;
    int *k = malloc((size_t)cap * sizeof(int));
    if (!k) return rx_fail(r, IG_ERR_NOMEM, "out of memory");
    int top = r->depth == 0, anch_start = 0, anch_end = 0;
    if (top && r->i < r->n && r->s[r->i] == '^') { anch_start = 1; r->i++; }
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (top && !r->quote_end && r->s[r->i] == '$' && (r->i + 1 == r->n || r->s[r->i + 1] == '|')) { anch_end = 1; r->i++; break; }
        int a = parse_atom(r), min, max;
        if (a < 0) { free(k); return -1; }
        int q = parse_quant(r, &min, &max);
        if (q < 0) { free(k); return -1; }
        if (q) a = gb_rep(r->b, a, min, max);
        if (n == cap) {
            int *k2 = realloc(k, (size_t)(cap *= 2) * sizeof(int));
            if (!k2) { free(k); return rx_fail(r, IG_ERR_NOMEM, "out of memory"); }
            k = k2;
        }
        k[n++] = a;
    }
    if (top && r->search) { /* JSON Schema patterns are unanchored */
        int any = gb_rep(r->b, r->json ? gr_json_char(r->b) : gb_range(r->b, 0, 255), 0, GR_INF);
        int k2[3], m = 0;
        if (!anch_start) k2[m++] = any;
        k2[m++] = n ? gb_seq(r->b, k, n) : gb_empty(r->b);
        if (!anch_end) k2[m++] = any;
        free(k);
        return gb_seq(r->b, k2, m);
    }
    int node = n ? gb_seq(r->b, k, n) : gb_empty(r->b);
    free(k);
    return node;
}

static int parse_alt(rx *r) {
    int cap = 8, n = 0;
    int *k = malloc((size_t)cap * sizeof(int));
    if (!k) return rx_fail(r, IG_ERR_NOMEM, "out of memory");
    for (;;) {
        int s = parse_seq(r);
        if (s < 0) { free(k); return -1; }
        if (n == cap) {
            int *k2 = realloc(k, (size_t)(cap *= 2) * sizeof(int));
            if (!k2) { free(k); return rx_fail(r, IG_ERR_NOMEM, "out of memory"); }
            k = k2;
        }
        k[n++] = s;
        if (r->i < r->n && r->s[r->i] == '|') { r->i++; continue; }
        break;
    }
    int node = gb_alt(r->b, k, n);
    free(k);
    return node;
}

int gr_regex_build_quoted(gr_builder *b, const char *re, size_t len, ig_err *err, ig_status *st) {
    rx r = {.b = b, .s = re, .n = len, .json = 1, .search = 1, .quote_end = 1, .err = err};
    int node = parse_alt(&r);
    if (node >= 0 && r.i < r.n) node = rx_fail(&r, IG_ERR_FORMAT, "unmatched )");
    if (node >= 0 && b->oom) node = rx_fail(&r, IG_ERR_UNSUPPORTED, "pattern too large");
    *st = node < 0 ? (r.st ? r.st : IG_ERR_UNSUPPORTED) : IG_OK;
    return node;
}

int gr_regex_build(gr_builder *b, const char *re, size_t len, int json, int search, ig_err *err, ig_status *st) {
    rx r = {.b = b, .s = re, .n = len, .json = json, .search = search, .err = err};
    int node = parse_alt(&r);
    if (node >= 0 && r.i < r.n) node = rx_fail(&r, IG_ERR_FORMAT, "unmatched )");
    if (node >= 0 && b->oom) node = rx_fail(&r, IG_ERR_UNSUPPORTED, "pattern too large");
    *st = node < 0 ? (r.st ? r.st : IG_ERR_UNSUPPORTED) : IG_OK;
    return node;
}
