/* gr_schema.c — JSON Schema (and JSON mode) into grammar expressions.
 *
 * Output is JSON as json.dumps writes it and any flexible variant: whitespace (space, tab, CR,
 * LF) is allowed wherever JSON allows it. Handled: type (one or a list), enum, const, properties,
 * required, additionalProperties, patternProperties, items (schema or draft-4 tuple), prefixItems,
 * additionalItems, minItems, maxItems, uniqueItems over items from a small finite set, minLength,
 * maxLength, pattern (gr_regex.c), format (date-time, date, time, email, uuid, uri, ipv4,
 * hostname; other formats are annotations, as JSON Schema 2019+ says), minimum / maximum /
 * exclusive* on integers and on numbers with integral bounds, multipleOf 1, anyOf, oneOf (as
 * anyOf, exact where the branches are about key presence), allOf (merged), not in the forms below,
 * dependencies / dependentRequired / dependentSchemas of key lists, local $ref / $defs /
 * definitions (recursion through rules), nullable. Object members may come in any order;
 * required members and the keys that presence constraints name are tracked as a subset state
 * while 2^keys stays small (the object may close where the set satisfies required, dependencies,
 * not {required}, oneOf / anyOf of required), otherwise required members follow the schema's order.
 * A schema with enum / const is the alternation of its values that satisfy every other keyword,
 * decided at compile time by gr_schema_check.c (so not, oneOf, uniqueItems ... beside an enum
 * cost nothing). Regular languages the expression tree cannot say go through DFAs (gr_dfa.c): a
 * pattern or format within minLength / maxLength (the pattern's DFA x a character count), a string
 * pattern less a not-enum's strings, the keys of patternProperties beside other keys (for each set
 * of patterns the keys matching exactly those, and keys matching none, in json.dumps spelling), a
 * '$' inside a pattern's group. `not`: {type}, {enum / const of strings} (beside string
 * constraints too), key presence ({required}, allOf / anyOf / oneOf / not of such), and anything
 * beside an enum. Asserting keywords we cannot express (if/then/else, propertyNames, contains,
 * uniqueItems over unbounded items, other not forms, ...) are IG_ERR_UNSUPPORTED naming the
 * keyword and its JSON path, as are the DFA constructions past their state limits; keywords
 * unknown to JSON Schema are annotations and ignored.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gr_internal.h"

#define MAX_SUBSET_RULES 4096
#define MAX_SCHEMA_DEPTH 64

typedef struct sc {
    gr_builder *b;
    const cJSON *root;
    ig_err *err;
    ig_status st;
    int depth;
    char **ref_keys; int *ref_rules; int n_refs, cap_refs;
    cJSON **owned; int n_owned, cap_owned; /* merged schemas made here */
    int ws, any_value, str_char;           /* shared rules / nodes */
    int frac_max;                          /* multipleOf 10^-k: at most k fraction digits; -1 any */
} sc;

static int sfail(sc *c, ig_status st, const char *path, const char *fmt, const char *what) {
    if (!c->st) {
        char m[600];
        snprintf(m, sizeof m, fmt, what);
        c->st = st;
        ig_fail(c->err, st, "json schema: %s at %s", m, *path ? path : "/");
    }
    return -1;
}

static void subpath(char *out, size_t cap, const char *path, const char *a, const char *b2) {
    snprintf(out, cap, "%s/%s%s%s", path, a, b2 ? "/" : "", b2 ? b2 : "");
}

/* ---- shared pieces --------------------------------------------------------------------------------- */

int gr_json_char(gr_builder *b) {
    gr_bset plain;
    bset_clear(&plain);
    bset_add_range(&plain, 0x20, 0xFF);
    plain.w['"' >> 6] &= ~(1ull << ('"' & 63));
    plain.w['\\' >> 6] &= ~(1ull << ('\\' & 63));
    gr_bset esc, hex;
    bset_clear(&esc);
    const char *e = "\"\\/bfnrt";
    for (; *e; e++) bset_add_range(&esc, (unsigned char)*e, (unsigned char)*e);
    bset_clear(&hex);
    bset_add_range(&hex, '0', '9'); bset_add_range(&hex, 'a', 'f'); bset_add_range(&hex, 'A', 'F');
    int h = gb_bytes(b, &hex);
    int u = gb_seq2(b, gb_str(b, "u"), gb_rep(b, h, 4, 4));
    return gb_alt2(b, gb_bytes(b, &plain), gb_seq2(b, gb_str(b, "\\"), gb_alt2(b, gb_bytes(b, &esc), u)));
}

static int ws(sc *c) { return gb_ref(c->b, c->ws); }
static int sep(sc *c) { return gb_seq3(c->b, ws(c), gb_str(c->b, ","), ws(c)); }
static int colon(sc *c) { return gb_seq3(c->b, ws(c), gb_str(c->b, ":"), ws(c)); }
static int free_string(sc *c) {
    return gb_seq3(c->b, gb_str(c->b, "\""), gb_rep(c->b, c->str_char, 0, GR_INF), gb_str(c->b, "\""));
}

static int digits(sc *c, int min) { return gb_rep(c->b, gb_range(c->b, '0', '9'), min, GR_INF); }
static int int_syntax(sc *c) { /* -?(0|[1-9][0-9]*) */
    gr_builder *b = c->b;
    return gb_seq2(b, gb_opt(b, gb_str(b, "-")), gb_alt2(b, gb_str(b, "0"), gb_seq2(b, gb_range(b, '1', '9'), digits(c, 0))));
}
static int frac_digits_any(sc *c) { /* one or more fraction digits (within frac_max) */
    gr_builder *b = c->b;
    if (c->frac_max < 0) return digits(c, 1);
    return gb_seq2(b, gb_rep(b, gb_range(b, '0', '9'), 1, c->frac_max), gb_rep(b, gb_str(b, "0"), 0, GR_INF));
}
static int frac_any(sc *c) { return gb_opt(c->b, gb_seq2(c->b, gb_str(c->b, "."), frac_digits_any(c))); }
static int exp_part(sc *c) {
    gr_builder *b = c->b;
    gr_bset e, pm;
    bset_clear(&e); bset_add_range(&e, 'e', 'e'); bset_add_range(&e, 'E', 'E');
    bset_clear(&pm); bset_add_range(&pm, '+', '+'); bset_add_range(&pm, '-', '-');
    return gb_opt(b, gb_seq3(b, gb_bytes(b, &e), gb_opt(b, gb_bytes(b, &pm)), digits(c, 1)));
}
static int number_syntax(sc *c) { return gb_seq3(c->b, int_syntax(c), frac_any(c), exp_part(c)); }

/* The "any JSON value" rules (JSON mode and unconstrained schemas). */
static void any_rules(sc *c) {
    gr_builder *b = c->b;
    int v = gb_rule(b, "json-value"), o = gb_rule(b, "json-object"), a = gb_rule(b, "json-array");
    c->any_value = v;
    int member = gb_seq3(b, free_string(c), colon(c), gb_ref(b, v));
    int members = gb_seq2(b, member, gb_rep(b, gb_seq2(b, sep(c), member), 0, GR_INF));
    gb_set_body(b, o, gb_seq3(b, gb_seq2(b, gb_str(b, "{"), ws(c)), gb_opt(b, gb_seq2(b, members, ws(c))), gb_str(b, "}")));
    int items = gb_seq2(b, gb_ref(b, v), gb_rep(b, gb_seq2(b, sep(c), gb_ref(b, v)), 0, GR_INF));
    gb_set_body(b, a, gb_seq3(b, gb_seq2(b, gb_str(b, "["), ws(c)), gb_opt(b, gb_seq2(b, items, ws(c))), gb_str(b, "]")));
    int k[7] = {gb_ref(b, o), gb_ref(b, a), free_string(c), number_syntax(c), gb_str(b, "true"), gb_str(b, "false"),
                gb_str(b, "null")};
    gb_set_body(b, v, gb_alt(b, k, 7));
}

/* ---- literal values (enum / const) as json.dumps writes them -------------------------------------- */

typedef struct sbuf { char *p; size_t n, cap; int oom; } sbuf;
static void sb_put(sbuf *s, const char *x, size_t n) {
    if (s->oom) return;
    if (s->n + n + 1 > s->cap) {
        size_t c = s->cap ? s->cap : 64;
        while (c < s->n + n + 1) c *= 2;
        char *q = realloc(s->p, c);
        if (!q) { s->oom = 1; return; }
        s->p = q; s->cap = c;
    }
    memcpy(s->p + s->n, x, n);
    s->n += n;
    s->p[s->n] = 0;
}
static void sb_puts(sbuf *s, const char *x) { sb_put(s, x, strlen(x)); }

static void dump_string(sbuf *o, const char *s) {
    sb_puts(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        switch (*p) {
        case '"': sb_puts(o, "\\\""); break;
        case '\\': sb_puts(o, "\\\\"); break;
        case '\n': sb_puts(o, "\\n"); break;
        case '\r': sb_puts(o, "\\r"); break;
        case '\t': sb_puts(o, "\\t"); break;
        case '\b': sb_puts(o, "\\b"); break;
        case '\f': sb_puts(o, "\\f"); break;
        default:
            if (*p < 0x20) { snprintf(e, sizeof e, "\\u%04x", *p); sb_puts(o, e); }
            else sb_put(o, (const char *)p, 1);
        }
    }
    sb_puts(o, "\"");
}

static void dump_number(sbuf *o, double d) {
    char t[40];
    if (d == floor(d) && fabs(d) < 1e16) snprintf(t, sizeof t, "%.0f", d);
    else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, d);
            if (strtod(t, NULL) == d) break;
        }
    }
    sb_puts(o, t);
}

/* A value as a grammar: scalars literally, containers with flexible whitespace. */
static int literal(sc *c, const cJSON *v) {
    gr_builder *b = c->b;
    sbuf o = {0};
    int node;
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int obj = cJSON_IsObject(v), n = cJSON_GetArraySize(v), k[3];
        int *items = malloc(sizeof(int) * (size_t)(n + 1));
        if (!items) { b->oom = 1; return -1; }
        int i = 0;
        for (const cJSON *x = v->child; x; x = x->next, i++) {
            int val = literal(c, x);
            if (obj) {
                sbuf ks = {0};
                dump_string(&ks, x->string ? x->string : "");
                val = gb_seq3(b, gb_lit(b, ks.p ? ks.p : "\"\"", ks.n), colon(c), val);
                free(ks.p);
            }
            items[i] = i ? gb_seq2(b, sep(c), val) : val;
        }
        k[0] = gb_seq2(b, gb_str(b, obj ? "{" : "["), ws(c));
        k[1] = n ? gb_seq2(b, gb_seq(b, items, n), ws(c)) : gb_empty(b);
        k[2] = gb_str(b, obj ? "}" : "]");
        free(items);
        return gb_seq(b, k, 3);
    }
    if (cJSON_IsString(v)) dump_string(&o, v->valuestring);
    else if (cJSON_IsNumber(v)) dump_number(&o, v->valuedouble);
    else if (cJSON_IsTrue(v)) sb_puts(&o, "true");
    else if (cJSON_IsFalse(v)) sb_puts(&o, "false");
    else sb_puts(&o, "null");
    if (o.oom) { free(o.p); b->oom = 1; return -1; }
    node = gb_lit(b, o.p, o.n);
    if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e16)
        node = gb_seq2(b, node, gb_opt(b, gb_seq2(b, gb_str(b, "."), gb_rep(b, gb_str(b, "0"), 1, GR_INF))));
    free(o.p);
    return node;
}

/* ---- integer and number ranges ------------------------------------------------------------------- */

/* Digit strings of length n between lo and hi (same length), inclusive. */
static int range_fixed(sc *c, const char *lo, const char *hi, int n) {
    gr_builder *b = c->b;
    if (n == 0) return gb_empty(b);
    if (lo[0] == hi[0]) return gb_seq2(b, gb_range(b, lo[0], lo[0]), range_fixed(c, lo + 1, hi + 1, n - 1));
    char nines[24], zeros[24];
    memset(nines, '9', (size_t)n); memset(zeros, '0', (size_t)n);
    int lo0 = !memcmp(lo + 1, zeros, (size_t)n - 1), hi9 = !memcmp(hi + 1, nines, (size_t)n - 1);
    int k[3], m = 0, s = lo[0], e = hi[0];
    if (!lo0) { k[m++] = gb_seq2(b, gb_range(b, lo[0], lo[0]), range_fixed(c, lo + 1, nines, n - 1)); s++; }
    if (!hi9) { k[m++] = gb_seq2(b, gb_range(b, hi[0], hi[0]), range_fixed(c, zeros, hi + 1, n - 1)); e--; }
    if (s <= e) k[m++] = gb_seq2(b, gb_range(b, s, e), gb_rep(b, gb_range(b, '0', '9'), n - 1, n - 1));
    return gb_alt(b, k, m);
}

/* Non-negative integers in [lo, hi] (hi < 0: unbounded), canonical (no leading zeros). */
static int uint_range(sc *c, long long lo, long long hi) {
    gr_builder *b = c->b;
    if (hi >= 0 && lo > hi) return gb_never(b);
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%lld", lo), lb = hi >= 0 ? snprintf(z, sizeof z, "%lld", hi) : 99;
    int k[24], m = 0;
    if (hi < 0) lb = la; /* then longer numbers below */
    for (int d = la; d <= lb && d <= 19; d++) {
        char l[24], h[24];
        if (d == la) memcpy(l, a, (size_t)d + 1);
        else { l[0] = '1'; memset(l + 1, '0', (size_t)d - 1); l[d] = 0; }
        if (d == lb && hi >= 0) memcpy(h, z, (size_t)d + 1);
        else { memset(h, '9', (size_t)d); h[d] = 0; }
        k[m++] = range_fixed(c, l, h, d);
    }
    if (hi < 0) k[m++] = gb_seq2(b, gb_range(b, '1', '9'), gb_rep(b, gb_range(b, '0', '9'), la, GR_INF));
    return gb_alt(b, k, m);
}

typedef struct bound { int has, excl; double v; long long ip; char frac[24]; } bound;

/* Splits a bound's magnitude into integer part and fraction digits (no trailing zeros);
 * -1 if it does not print exactly in plain decimal. */
static int split_bound(bound *x) {
    char t[64];
    if (!x->has) return 0;
    double m = fabs(x->v);
    x->frac[0] = 0;
    if (m == floor(m)) { /* integral: exact up to 2^63 - 1 (a bound at 2^63 means int64's maximum) */
        x->ip = m >= 9223372036854775807.0 ? 9223372036854775807LL : (long long)m;
        return 0;
    }
    snprintf(t, sizeof t, "%.15g", m);
    if (strchr(t, 'e') || strtod(t, NULL) != m) return -1;
    char *dot = strchr(t, '.');
    x->frac[0] = 0;
    if (dot) {
        *dot = 0;
        snprintf(x->frac, sizeof x->frac, "%s", dot + 1);
        size_t l = strlen(x->frac);
        while (l && x->frac[l - 1] == '0') x->frac[--l] = 0;
    }
    x->ip = atoll(t);
    return 0;
}

enum { F_GE, F_GT, F_LE, F_LT };
/* Fraction digits D (after the point) compared with digits F: D >= F, D > F, D <= F, D < F. */
static int frac_digits(sc *c, const char *F, int cmp) {
    gr_builder *b = c->b;
    int any = gb_rep(b, gb_range(b, '0', '9'), 0, GR_INF);
    if (!*F) {
        if (cmp == F_GE) return any;
        if (cmp == F_GT) return gb_seq3(b, any, gb_range(b, '1', '9'), gb_rep(b, gb_range(b, '0', '9'), 0, GR_INF));
        if (cmp == F_LE) return gb_rep(b, gb_str(b, "0"), 0, GR_INF);
        return gb_never(b);
    }
    int k[2], m = 0, d = F[0];
    int up = cmp == F_GE || cmp == F_GT;
    if (up && d < '9') k[m++] = gb_seq2(b, gb_range(b, d + 1, '9'), any);
    if (!up && d > '0') k[m++] = gb_seq2(b, gb_range(b, '0', d - 1), any);
    k[m++] = gb_seq2(b, gb_range(b, d, d), frac_digits(c, F + 1, cmp));
    return gb_alt(b, k, m);
}

/* The fraction part (".digits" or none) of a number whose integer part equals the bound's. */
static int frac_part(sc *c, const char *F, int cmp) {
    gr_builder *b = c->b;
    int dot_any = gb_seq2(b, gb_str(b, "."), frac_digits_any(c));
    if (!*F) {
        if (cmp == F_GE) return gb_opt(b, dot_any);
        if (cmp == F_GT) return gb_seq2(b, gb_str(b, "."), frac_digits(c, "", F_GT));
        if (cmp == F_LE) return gb_opt(b, gb_seq2(b, gb_str(b, "."), gb_rep(b, gb_str(b, "0"), 1, GR_INF)));
        return gb_never(b);
    }
    int digits_part = gb_seq2(b, gb_str(b, "."), frac_digits(c, F, cmp));
    return cmp == F_GE || cmp == F_GT ? digits_part : gb_alt2(b, gb_empty(b), digits_part);
}

/* Magnitudes y (no sign) with lo <= y <= hi (either side optional, exclusive per flag);
 * with_frac: a fraction may follow (numbers), else integers. */
static int mag_range(sc *c, bound lo, bound hi, int with_frac) {
    gr_builder *b = c->b;
    long long A = lo.has ? lo.ip : 0, B = hi.has ? hi.ip : -1;
    if (!with_frac) {
        if (lo.has && lo.excl) A++;
        if (hi.has && hi.excl) B--;
        if (hi.has && B < A) return gb_never(b);
        return uint_range(c, A, hi.has ? B : -1);
    }
    int k[3], m = 0;
    const char *Fa = lo.has ? lo.frac : "", *Fb = hi.has ? hi.frac : "";
    int ca = lo.has && lo.excl ? F_GT : F_GE, cb = hi.has && hi.excl ? F_LT : F_LE;
    if (hi.has && A == B) {
        if (*Fa && *Fb) return -2; /* both bounds inside one integer: not expressed */
        if (!*Fa) return gb_seq2(b, uint_range(c, A, A), frac_part(c, Fb, cb)); /* and >= A.0 (or > A.0) */
        return gb_seq2(b, uint_range(c, A, A), frac_part(c, Fa, ca));
    }
    if (hi.has && B < A) return gb_never(b);
    if (!hi.has || A + 1 <= B - 1) k[m++] = gb_seq2(b, uint_range(c, A + 1, hi.has ? B - 1 : -1), frac_any(c));
    k[m++] = gb_seq2(b, uint_range(c, A, A), frac_part(c, Fa, ca));
    if (hi.has) k[m++] = gb_seq2(b, uint_range(c, B, B), frac_part(c, Fb, cb));
    return gb_alt(b, k, m);
}

static int read_bound(const cJSON *s, const char *kw, const char *xkw, int upper, bound *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw), *x = cJSON_GetObjectItemCaseSensitive(s, xkw);
    memset(out, 0, sizeof *out);
    if (cJSON_IsNumber(v)) { out->has = 1; out->v = v->valuedouble; }
    if (cJSON_IsTrue(x) && out->has) out->excl = 1;           /* draft 4 */
    if (cJSON_IsNumber(x)) {                                   /* draft 6+ */
        if (!out->has || (upper ? x->valuedouble <= out->v : x->valuedouble >= out->v)) {
            out->has = 1; out->excl = 1; out->v = x->valuedouble;
        }
    }
    return 0;
}

static int numeric_range(sc *c, const char *path, int integer, bound lo, bound hi);

static int numeric(sc *c, const cJSON *s, const char *path, int integer) {
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    bound lo, hi;
    read_bound(s, "minimum", "exclusiveMinimum", 0, &lo);
    read_bound(s, "maximum", "exclusiveMaximum", 1, &hi);
    c->frac_max = -1;
    if (mo) { /* 1 on integers; 10^-k on numbers: at most k fraction digits (decimal semantics) */
        int k = -1;
        double p = 1;
        for (int i = 0; i <= 15 && cJSON_IsNumber(mo); i++, p /= 10)
            if (fabs(mo->valuedouble - p) < p * 1e-9) k = i;
        int plain_bounds = !(lo.has && (lo.excl || lo.v != floor(lo.v))) && !(hi.has && (hi.excl || hi.v != floor(hi.v)));
        if (k < 0 || (k == 0 && !integer) || (!integer && !plain_bounds))
            return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (only 1 on integers, 10^-k on numbers without exclusive or fractional bounds)", "multipleOf");
        if (!integer) c->frac_max = k;
    }
    int node = numeric_range(c, path, integer, lo, hi);
    c->frac_max = -1;
    return node;
}

static int numeric_range(sc *c, const char *path, int integer, bound lo, bound hi) {
    gr_builder *b = c->b;
    if (!lo.has && !hi.has) return integer ? int_syntax(c) : c->frac_max >= 0 ? gb_seq2(b, int_syntax(c), frac_any(c)) : number_syntax(c);
    if (integer) { /* integral bounds: ceil / floor, exclusivity kept on integral values */
        if (lo.has && lo.v != floor(lo.v)) { lo.v = ceil(lo.v); lo.excl = 0; }
        if (hi.has && hi.v != floor(hi.v)) { hi.v = floor(hi.v); hi.excl = 0; }
    }
    if ((lo.has && fabs(lo.v) > 1e18 && !integer) || (hi.has && fabs(hi.v) > 1e18 && !integer))
        return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (a bound beyond 1e18)", "minimum/maximum");
    int k[2], m = 0, frac = !integer;
    /* the sign split below works on magnitudes; a bound sits on one side of zero */
    /* x >= 0: magnitude in [max(lo, 0), hi] */
    if (!hi.has || hi.v > 0 || (hi.v == 0 && !hi.excl)) {
        bound l2 = lo, h2 = hi;
        if (!lo.has || lo.v < 0) { l2.has = 1; l2.v = 0; l2.excl = 0; }
        if (!hi.has && l2.v == 0 && !l2.excl && !integer && c->frac_max < 0) k[m++] = gb_seq3(b, uint_range(c, 0, -1), frac_any(c), exp_part(c));
        else if (split_bound(&l2) || split_bound(&h2) || (k[m++] = mag_range(c, l2, h2, frac)) == -2)
            return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (bounds not expressible)", "minimum/maximum");
    }
    /* x < 0: "-" and magnitude y with -hi <= y <= -lo, y > 0 */
    if (!lo.has || lo.v < 0) {
        bound l2 = {.has = 1, .excl = 1}, h2 = {0};
        if (hi.has && hi.v < 0) { l2.v = -hi.v; l2.excl = hi.excl; }
        if (lo.has) { h2.has = 1; h2.v = -lo.v; h2.excl = lo.excl; }
        int mag = split_bound(&l2) || split_bound(&h2) ? -2 : mag_range(c, l2, h2, frac);
        if (mag == -2) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (bounds not expressible)", "minimum/maximum");
        k[m++] = gb_seq2(b, gb_str(b, "-"), mag);
    }
    return m ? gb_alt(b, k, m) : gb_never(b);
}

/* ---- strings ---------------------------------------------------------------------------------------- */

/* Dates: days within their month (February up to 29, whatever the year). */
static const struct { const char *name, *re; } formats[] = {
    {"date-time", "\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)|02-(0[1-9]|1\\d|2\\d))[Tt]([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d+)?([Zz]|[+-]([01]\\d|2[0-3]):[0-5]\\d)"},
    {"date", "\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)|02-(0[1-9]|1\\d|2\\d))"},
    {"time", "([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d+)?([Zz]|[+-]([01]\\d|2[0-3]):[0-5]\\d)?"},
    {"email", "[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"uri", "[A-Za-z][A-Za-z0-9+.\\-]*:[^\\x00-\\x20\"<>\\\\^`{|}\\x7f]*"},
    {"ipv4", "((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"},
    {"hostname", "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"},
};

/* Byte lengths of the strings node x matches: [*mn, *mx] (*mx -1: unbounded). */
static void byte_lengths(const gr_builder *b, int x, long *mn, long *mx, int depth) {
    const gr_node *n = &b->nodes[x];
    *mn = 0; *mx = 0;
    if (depth > 200) { *mx = -1; return; }
    switch (n->kind) {
    case GN_BYTES: *mn = *mx = 1; return;
    case GN_SEQ: case GN_ALT:
        for (int i = 0; i < n->nkid; i++) {
            long a, z;
            byte_lengths(b, b->kids[n->kid + i], &a, &z, depth + 1);
            if (n->kind == GN_SEQ) { *mn += a; *mx = (*mx < 0 || z < 0) ? -1 : *mx + z; }
            else { if (!i || a < *mn) *mn = a; if (z < 0 || *mx < 0) *mx = -1; else if (z > *mx) *mx = z; }
        }
        return;
    case GN_REP: {
        long a, z;
        byte_lengths(b, b->kids[n->kid], &a, &z, depth + 1);
        *mn = a * n->a;
        *mx = (z < 0 || n->b == GR_INF) ? (z == 0 ? 0 : -1) : z * n->b;
        return;
    }
    case GN_REF: *mx = -1; return;
    default: return;
    }
}

/* Fewest characters node x matches: a byte set counts one unless it holds only UTF-8
 * continuation bytes or only the backslash of an escape. */
static long char_min(const gr_builder *b, int x, int depth) {
    const gr_node *n = &b->nodes[x];
    if (depth > 200) return 0;
    switch (n->kind) {
    case GN_BYTES: {
        const gr_bset *s = &b->sets[n->a];
        int cont = 1, bs = 1;
        for (int ch = 0; ch < 256; ch++)
            if (bset_has(s, ch)) { cont &= ch >= 0x80 && ch < 0xC0; bs &= ch == '\\'; }
        return cont || bs ? 0 : 1;
    }
    case GN_SEQ: case GN_ALT: {
        long t = 0;
        for (int i = 0; i < n->nkid; i++) {
            long a = char_min(b, b->kids[n->kid + i], depth + 1);
            if (n->kind == GN_SEQ) t += a;
            else if (!i || a < t) t = a;
        }
        return t;
    }
    case GN_REP: return char_min(b, b->kids[n->kid], depth + 1) * n->a;
    default: return 0;
    }
}

/* 0 if every string node x matches has lo..hi characters (so the lengths add nothing), or
 * narrows a whole-pattern repetition of one character class to them in place; -1 if neither. */
static int length_within(sc *c, int x, int lo, int hi) {
    gr_builder *b = c->b;
    long mn, mx;
    byte_lengths(b, x, &mn, &mx, 0);
    /* at most one character per byte; at least char_min characters */
    if (char_min(b, x, 0) >= lo && mx >= 0 && (hi == GR_INF || mx <= hi)) return 0;
    gr_node *n = &b->nodes[x];
    if (n->kind == GN_REP) {
        long a, z;
        byte_lengths(b, b->kids[n->kid], &a, &z, 0);
        int one_char = z >= 0 && z <= 1; /* ASCII class: one byte, one character */
        if (one_char) {
            int nlo = n->a > lo ? n->a : lo, nhi = n->b == GR_INF ? hi : (hi == GR_INF || n->b < hi ? n->b : hi);
            n->a = nlo; n->b = nhi;
            if (nhi != GR_INF && nhi < nlo) n->kind = GN_NEVER;
            return 0;
        }
    }
    return -1;
}

/* ---- regular string languages through DFAs (gr_dfa.c) ----------------------------------------------- */

#define DFA_MAX_STATES 50000

/* Every string body as json.dumps writes it (ensure_ascii=False): raw bytes but the quote, the
 * backslash and the controls, which are \" \\ \n \r \t \b \f or \u00xx: the one spelling of each
 * string, so a language intersected with it can be complemented without missing a spelling. Raw
 * bytes one by one (as in a free string) rather than whole UTF-8 characters, so the matcher's
 * plain fixed point holds in a key past its patterns' decision. */
static int canonical_body(sc *c) {
    gr_builder *b = c->b;
    gr_bset plain, lo16, hex;
    bset_clear(&plain);
    bset_add_range(&plain, 0x20, 0xFF);
    plain.w['"' >> 6] &= ~(1ull << ('"' & 63));
    plain.w['\\' >> 6] &= ~(1ull << ('\\' & 63));
    bset_clear(&lo16); /* \u000X but 8, 9, a, c, d (\b \t \n \f \r) */
    bset_add_range(&lo16, '0', '7'); bset_add_range(&lo16, 'b', 'b'); bset_add_range(&lo16, 'e', 'f');
    bset_clear(&hex);
    bset_add_range(&hex, '0', '9'); bset_add_range(&hex, 'a', 'f');
    int k[9] = {gb_bytes(b, &plain), gb_str(b, "\\\""), gb_str(b, "\\\\"), gb_str(b, "\\n"), gb_str(b, "\\r"), gb_str(b, "\\t"),
                gb_str(b, "\\b"), gb_str(b, "\\f"),
                gb_seq2(b, gb_str(b, "\\u00"), gb_alt2(b, gb_seq2(b, gb_str(b, "0"), gb_bytes(b, &lo16)), gb_seq2(b, gb_str(b, "1"), gb_bytes(b, &hex))))};
    return gb_rep(b, gb_alt(b, k, 9), 0, GR_INF);
}

/* The language of pos, less that of each neg[i] (NULL / -1: none), within lo..hi characters
 * (hi GR_INF, lo 0: any), as rules; -1 past the state limit. */
static int regular_diff(sc *c, int pos, const int *neg, int nneg, int lo, int hi) {
    gr_builder *b = c->b;
    gr_dfa cur, x, y;
    if (gr_dfa_from_node(b, pos, &cur, DFA_MAX_STATES)) return -1;
    for (int i = 0; i <= nneg; i++) {
        if (i < nneg) {
            if (gr_dfa_from_node(b, neg[i], &x, DFA_MAX_STATES)) { gr_dfa_free(&cur); return -1; }
        } else if (lo || hi != GR_INF) { /* JSON string characters, counted */
            gr_dfa one;
            if (gr_dfa_from_node(b, gb_json_char_utf8(b), &one, DFA_MAX_STATES)) { gr_dfa_free(&cur); return -1; }
            int bad = gr_dfa_counted(&one, lo, hi, &x);
            gr_dfa_free(&one);
            if (bad) { gr_dfa_free(&cur); return -1; }
        } else continue;
        int bad = gr_dfa_product(&cur, &x, i < nneg, &y, DFA_MAX_STATES);
        gr_dfa_free(&cur);
        gr_dfa_free(&x);
        if (bad) return -1;
        cur = y;
    }
    int r = gr_dfa_to_node(b, &cur);
    gr_dfa_free(&cur);
    return r;
}

/* A pattern with '$' inside a group (gr_regex_build_quoted) as a string body: its language with
 * the end markers only at the end, then erased. -1 if refused. */
static int quoted_pattern(sc *c, const char *re) {
    gr_builder *b = c->b;
    ig_err e2;
    ig_status st;
    int p = gr_regex_build_quoted(b, re, strlen(re), &e2, &st);
    if (p < 0) return -1;
    gr_dfa dp, du, d;
    int u = gb_seq2(b, gb_rep(b, c->str_char, 0, GR_INF), gb_rep(b, gb_str(b, "\x01"), 0, GR_INF)), r = -1;
    if (gr_dfa_from_node(b, p, &dp, DFA_MAX_STATES)) return -1;
    if (!gr_dfa_from_node(b, u, &du, DFA_MAX_STATES)) {
        if (!gr_dfa_product(&dp, &du, 0, &d, DFA_MAX_STATES)) {
            if (!gr_dfa_end_marker(&d, 1)) r = gr_dfa_to_node(b, &d);
            gr_dfa_free(&d);
        }
        gr_dfa_free(&du);
    }
    gr_dfa_free(&dp);
    return r;
}

/* The bodies (no quotes) of strings keys[0..n) as dumped with their closing quote. */
static int bodies_node(sc *c, char **keys, int n) {
    int *alts = malloc(sizeof(int) * (size_t)(n + 1));
    if (!alts) { c->b->oom = 1; return -1; }
    for (int i = 0; i < n; i++) alts[i] = gb_lit(c->b, keys[i], strlen(keys[i]) - 1);
    int node = n ? gb_alt(c->b, alts, n) : gb_never(c->b);
    free(alts);
    return node;
}

/* A length or item count keyword (minLength, maxItems, ...): `def` when absent, -2 when negative
 * (no instance can satisfy it; -2 is neither a count nor GR_INF), else the count truncated and
 * capped at 1e9 (far above every limit the callers accept, and inside int without an overflowing
 * cast). */
static int schema_count(const cJSON *v, int def) {
    if (!cJSON_IsNumber(v)) return def;
    double d = v->valuedouble;
    return d < 0 ? -2 : d > 1e9 ? 1000000000 : (int)d;
}

static int string_schema(sc *c, const cJSON *s, const char *path) {
    gr_builder *b = c->b;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern"), *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    int lo = schema_count(mn, 0), hi = schema_count(mx, GR_INF);
    if (lo < 0 || (hi != GR_INF && hi < lo)) return gb_never(b);
    if (lo > 100000 || hi > 100000) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (above 100000)", "minLength/maxLength");
    const char *re = NULL;
    int search = 1;
    if (cJSON_IsString(fmt))
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(fmt->valuestring, formats[i].name)) { re = formats[i].re; search = 0; }
    if (cJSON_IsString(pat)) {
        if (re) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (pattern together with format)", "pattern");
        re = pat->valuestring;
    }
    int body;
    if (re) {
        ig_status st;
        body = gr_regex_build(b, re, strlen(re), 1, search, c->err, &st);
        if (body < 0 && search && st == IG_ERR_UNSUPPORTED && c->err && strstr(c->err->msg, "anchor inside")) {
            int q = quoted_pattern(c, re); /* a '$' inside a group, through a DFA */
            if (q >= 0) { body = q; search = 0; }
        }
        if (body >= 0 && search && hi != GR_INF) { /* lengths that leave no room around the match */
            int core = gr_regex_build(b, re, strlen(re), 1, 0, c->err, &st);
            if (core >= 0 && char_min(b, core, 0) >= hi) body = core;
        }
        if (body >= 0 && (lo || hi != GR_INF) && length_within(c, body, lo, hi) < 0 &&
            (body = regular_diff(c, body, NULL, 0, lo, hi)) < 0) /* the pattern's DFA x a character count */
            return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (with a pattern or format: too many states)", "minLength/maxLength");
        if (body < 0) {
            if (!c->st) {
                char m[1024];
                snprintf(m, sizeof m, "%s", c->err ? c->err->msg : "bad pattern");
                c->st = st;
                ig_fail(c->err, st, "json schema: %s at %s", m, *path ? path : "/");
            }
            return -1;
        }
    } else if (lo || hi != GR_INF) body = gb_rep(b, gb_json_char_utf8(b), lo, hi);
    else body = gb_rep(b, c->str_char, 0, GR_INF);
    return gb_seq3(b, gb_str(b, "\""), body, gb_str(b, "\""));
}

/* ---- references and allOf ------------------------------------------------------------------------- */

static const cJSON *resolve_ref(sc *c, const char *ref) { return gr_json_pointer(c->root, ref); }

static int schema(sc *c, const cJSON *s, const char *path);

static int ref_rule(sc *c, const char *ref, const char *path) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->ref_keys[i], ref)) return gb_ref(c->b, c->ref_rules[i]);
    const cJSON *t = resolve_ref(c, ref);
    if (!t) return sfail(c, IG_ERR_UNSUPPORTED, path, "unresolvable $ref '%s' (only local JSON pointers)", ref);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 16;
        char **k = realloc(c->ref_keys, sizeof(char *) * (size_t)cap);
        if (k) c->ref_keys = k;
        int *r = realloc(c->ref_rules, sizeof(int) * (size_t)cap);
        if (r) c->ref_rules = r;
        if (!k || !r) { c->b->oom = 1; return -1; }
        c->cap_refs = cap;
    }
    int rule = gb_rule(c->b, NULL);
    c->ref_keys[c->n_refs] = strdup(ref);
    c->ref_rules[c->n_refs++] = rule;
    char p2[512];
    snprintf(p2, sizeof p2, "%s", ref + 1);
    int body = schema(c, t, p2);
    if (body < 0) return -1;
    gb_set_body(c->b, rule, body);
    return gb_ref(c->b, rule);
}

static cJSON *own(sc *c, cJSON *x) {
    if (!x) return NULL;
    if (c->n_owned == c->cap_owned) {
        int cap = c->cap_owned ? c->cap_owned * 2 : 16;
        cJSON **o = realloc(c->owned, sizeof(cJSON *) * (size_t)cap);
        if (!o) { cJSON_Delete(x); return NULL; }
        c->owned = o;
        c->cap_owned = cap;
    }
    return c->owned[c->n_owned++] = x;
}

static int is_annotation(const char *k) {
    static const char *ann[] = {"$schema", "$id", "id", "title", "description", "default", "examples", "example",
                                "$comment", "readOnly", "writeOnly", "deprecated", "$defs", "definitions",
                                "contentMediaType", "contentEncoding", "discriminator", "xml", "externalDocs", NULL};
    for (int i = 0; ann[i]; i++)
        if (!strcmp(k, ann[i])) return 1;
    return 0;
}

static const cJSON *deref(sc *c, const cJSON *s, int depth) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    while (cJSON_IsString(r) && depth++ < 32) {
        const cJSON *t = resolve_ref(c, r->valuestring);
        if (!t) return NULL;
        int others = 0;
        for (const cJSON *k = s->child; k; k = k->next) others |= strcmp(k->string, "$ref") && !is_annotation(k->string);
        if (others) return NULL;
        s = t;
        r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    }
    return s;
}

static int type_names_ok(const cJSON *t) {
    if (cJSON_IsString(t)) return 1;
    if (!cJSON_IsArray(t)) return 0;
    for (const cJSON *x = t->child; x; x = x->next) if (!cJSON_IsString(x)) return 0;
    return 1;
}

static int type_has(const cJSON *t, const char *name) {
    for (const cJSON *x = cJSON_IsArray(t) ? t->child : t; x; x = cJSON_IsArray(t) ? x->next : NULL)
        if (!strcmp(x->valuestring, name)) return 1;
    return 0;
}

/* The types both lists allow (integer where one says number and the other integer). */
static cJSON *type_meet(const cJSON *a, const cJSON *b2) {
    static const char *names[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < 7 && out; i++) {
        int in_a = type_has(a, names[i]) || (i == 6 && type_has(a, "number"));
        int in_b = type_has(b2, names[i]) || (i == 6 && type_has(b2, "number"));
        if (in_a && in_b && !(i == 6 && type_has(a, "number") && type_has(b2, "number")))
            cJSON_AddItemToArray(out, cJSON_CreateString(names[i]));
    }
    return out;
}

/* Merges schema b into a (a copy, owned by c): allOf. NULL with an error where they conflict. */
static cJSON *merge(sc *c, const cJSON *a, const cJSON *b2, const char *path) {
    a = deref(c, a, 0);
    b2 = deref(c, b2, 0);
    if (!a || !b2) { sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (a $ref with siblings inside allOf)", "allOf"); return NULL; }
    if (cJSON_IsTrue(a)) return own(c, cJSON_Duplicate(b2, 1));
    if (cJSON_IsTrue(b2)) return own(c, cJSON_Duplicate(a, 1));
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b2)) { sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (a boolean subschema)", "allOf"); return NULL; }
    cJSON *m = own(c, cJSON_Duplicate(a, 1));
    if (!m) { c->b->oom = 1; return NULL; }
    for (const cJSON *k = b2->child; k; k = k->next) {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m, k->string);
        if (is_annotation(k->string)) continue;
        if (!have) { cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, 1)); continue; }
        if (cJSON_Compare(have, k, 1)) continue;
        if (!strcmp(k->string, "properties") && cJSON_IsObject(have) && cJSON_IsObject(k)) {
            for (const cJSON *p = k->child; p; p = p->next) {
                cJSON *hp = cJSON_GetObjectItemCaseSensitive(have, p->string);
                if (!hp) { cJSON_AddItemToObject(have, p->string, cJSON_Duplicate(p, 1)); continue; }
                cJSON *all = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(all, "allOf");
                cJSON_AddItemToArray(arr, cJSON_Duplicate(hp, 1));
                cJSON_AddItemToArray(arr, cJSON_Duplicate(p, 1));
                cJSON_ReplaceItemInObjectCaseSensitive(have, p->string, all);
            }
        } else if (!strcmp(k->string, "required") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
            for (const cJSON *p = k->child; p; p = p->next) cJSON_AddItemToArray(have, cJSON_Duplicate(p, 1));
        } else if (!strcmp(k->string, "type") && type_names_ok(have) && type_names_ok(k)) {
            cJSON_ReplaceItemInObjectCaseSensitive(m, "type", type_meet(have, k)); /* [] where none is left */
        } else if (!strcmp(k->string, "enum") && cJSON_IsArray(have) && cJSON_IsArray(k)) {
            cJSON *both = cJSON_CreateArray();
            for (const cJSON *x = have->child; x; x = x->next)
                for (const cJSON *y = k->child; y; y = y->next)
                    if (cJSON_Compare(x, y, 1)) { cJSON_AddItemToArray(both, cJSON_Duplicate(x, 1)); break; }
            cJSON_ReplaceItemInObjectCaseSensitive(m, "enum", both);
        } else if (!strcmp(k->string, "additionalProperties") && cJSON_IsTrue(have)) {
            cJSON_ReplaceItemInObjectCaseSensitive(m, k->string, cJSON_Duplicate(k, 1));
        } else if (!strcmp(k->string, "additionalProperties") && cJSON_IsTrue(k)) {
        } else {
            sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (allOf branches that disagree on it)", k->string);
            return NULL;
        }
    }
    return m;
}

/* ---- objects ---------------------------------------------------------------------------------------- */

typedef struct prop { const char *name; int member; int req; } prop;

/* A JSON string (with quotes) that is none of names[0..n) (their dumped forms). */
static int key_not_in(sc *c, char **keys, int n, int depth) {
    gr_builder *b = c->b;
    gr_bset kids, rest;
    bset_clear(&kids);
    int ends = 0;
    for (int i = 0; i < n; i++) {
        if (keys[i][depth] == '"') ends = 1; /* an unescaped quote only ends a key */
        else bset_add_range(&kids, (unsigned char)keys[i][depth], (unsigned char)keys[i][depth]);
    }
    int any_tail = gb_seq2(b, gb_rep(b, c->str_char, 0, GR_INF), gb_str(b, "\""));
    int alts[260], m = 0;
    if (!ends) alts[m++] = gb_str(b, "\"");
    bset_clear(&rest);
    bset_add_range(&rest, 0x20, 0xFF);
    for (int w = 0; w < 4; w++) rest.w[w] &= ~kids.w[w];
    rest.w['"' >> 6] &= ~(1ull << ('"' & 63));
    int esc_is_kid = bset_has(&kids, '\\');
    rest.w['\\' >> 6] &= ~(1ull << ('\\' & 63));
    alts[m++] = gb_seq2(b, gb_bytes(b, &rest), any_tail);
    if (!esc_is_kid) alts[m++] = gb_seq2(b, gb_seq2(b, gb_str(b, "\\"), gb_range(b, 0x20, 0xFF)), any_tail);
    for (int ch = 0x20; ch < 256; ch++) {
        if (!bset_has(&kids, ch) || ch == '"') continue;
        char **sub = malloc(sizeof(char *) * (size_t)n);
        if (!sub) { b->oom = 1; return -1; }
        int ns = 0;
        for (int i = 0; i < n; i++)
            if ((unsigned char)keys[i][depth] == ch) sub[ns++] = keys[i];
        alts[m++] = gb_seq2(b, gb_range(b, ch, ch), key_not_in(c, sub, ns, depth + 1));
        free(sub);
    }
    return gb_alt(b, alts, m);
}

/* ---- key presence: required, dependencies, and not / oneOf / anyOf of such ----------------------- */

/* Schemas that constrain only which keys an object has (never its values): required, type
 * "object", dependentRequired / dependencies of key lists or of such schemas, not / allOf /
 * anyOf / oneOf of such schemas, properties without assertions. An object's members are tracked
 * as a set of these keys (object_members), and the set must satisfy them at the closing brace. */
#define MAX_TRACKED 12

static int only_annotations(const cJSON *s) {
    if (cJSON_IsTrue(s)) return 1;
    if (!cJSON_IsObject(s)) return 0;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!is_annotation(k->string)) return 0;
    return 1;
}

static int string_list(const cJSON *a) {
    if (!cJSON_IsArray(a)) return 0;
    for (const cJSON *x = a->child; x; x = x->next)
        if (!cJSON_IsString(x)) return 0;
    return 1;
}

static int presence_only(sc *c, const cJSON *n, int depth) {
    if (depth > 16) return 0;
    if (cJSON_IsBool(n)) return 1;
    if (!(n = deref(c, n, 0)) || !cJSON_IsObject(n)) return 0;
    for (const cJSON *k = n->child; k; k = k->next) {
        const char *w = k->string;
        if (is_annotation(w)) continue;
        if (!strcmp(w, "required")) { if (!string_list(k)) return 0; }
        else if (!strcmp(w, "type")) { if (!cJSON_IsString(k) || strcmp(k->valuestring, "object")) return 0; }
        else if (!strcmp(w, "properties") && cJSON_IsObject(k)) {
            for (const cJSON *p = k->child; p; p = p->next)
                if (!only_annotations(p)) return 0;
        } else if (!strcmp(w, "additionalProperties")) { if (!cJSON_IsTrue(k) && !only_annotations(k)) return 0; }
        else if (!strcmp(w, "dependencies") || !strcmp(w, "dependentRequired") || !strcmp(w, "dependentSchemas")) {
            if (!cJSON_IsObject(k)) return 0;
            for (const cJSON *d = k->child; d; d = d->next)
                if (!(w[9] != 'S' && string_list(d)) && !(w[9] != 'R' && presence_only(c, d, depth + 1))) return 0;
        } else if (!strcmp(w, "not")) { if (!presence_only(c, k, depth + 1)) return 0; }
        else if (!strcmp(w, "allOf") || !strcmp(w, "anyOf") || !strcmp(w, "oneOf")) {
            if (!cJSON_IsArray(k) || !k->child) return 0;
            for (const cJSON *x = k->child; x; x = x->next)
                if (!presence_only(c, x, depth + 1)) return 0;
        } else return 0;
    }
    return 1;
}

typedef struct keyset { const char **name; int n, cap; } keyset;

static int ks_find(const keyset *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->name[i], name)) return i;
    return -1;
}
static int ks_add(keyset *t, const char *name) {
    if (ks_find(t, name) >= 0) return 0;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        const char **q = realloc(t->name, sizeof(char *) * (size_t)cap);
        if (!q) return -1;
        t->name = q; t->cap = cap;
    }
    t->name[t->n++] = name;
    return 0;
}

/* Every key a presence-only schema names, into t. */
static int presence_keys(sc *c, const cJSON *n, keyset *t) {
    if (!(n = deref(c, n, 0)) || !cJSON_IsObject(n)) return 0;
    for (const cJSON *k = n->child; k; k = k->next) {
        const char *w = k->string;
        if (!strcmp(w, "required"))
            for (const cJSON *x = k->child; x; x = x->next) { if (ks_add(t, x->valuestring)) return -1; }
        else if (!strcmp(w, "dependencies") || !strcmp(w, "dependentRequired") || !strcmp(w, "dependentSchemas"))
            for (const cJSON *d = k->child; d; d = d->next) {
                if (ks_add(t, d->string)) return -1;
                if (cJSON_IsArray(d)) { for (const cJSON *x = d->child; x; x = x->next) if (ks_add(t, x->valuestring)) return -1; }
                else if (presence_keys(c, d, t)) return -1;
            }
        else if (!strcmp(w, "not")) { if (presence_keys(c, k, t)) return -1; }
        else if (cJSON_IsArray(k) && (!strcmp(w, "allOf") || !strcmp(w, "anyOf") || !strcmp(w, "oneOf")))
            for (const cJSON *x = k->child; x; x = x->next) if (presence_keys(c, x, t)) return -1;
    }
    return 0;
}

static int has_key(const keyset *t, unsigned S, const char *name) {
    int i = ks_find(t, name);
    return i >= 0 && (S >> i & 1);
}

/* A presence-only schema's verdict on an object whose tracked keys present are S (obj = 1), or
 * on any value that is not an object (obj = 0). */
static int presence_eval(sc *c, const cJSON *n, const keyset *t, unsigned S, int obj) {
    if (cJSON_IsBool(n)) return cJSON_IsTrue(n);
    n = deref(c, n, 0);
    for (const cJSON *k = n->child; k; k = k->next) {
        const char *w = k->string;
        if (!strcmp(w, "required") && obj) {
            for (const cJSON *x = k->child; x; x = x->next) if (!has_key(t, S, x->valuestring)) return 0;
        } else if (!strcmp(w, "type")) { if (!obj) return 0; }
        else if ((!strcmp(w, "dependencies") || !strcmp(w, "dependentRequired") || !strcmp(w, "dependentSchemas")) && obj) {
            for (const cJSON *d = k->child; d; d = d->next) {
                if (!has_key(t, S, d->string)) continue;
                if (cJSON_IsArray(d)) { for (const cJSON *x = d->child; x; x = x->next) if (!has_key(t, S, x->valuestring)) return 0; }
                else if (!presence_eval(c, d, t, S, obj)) return 0;
            }
        } else if (!strcmp(w, "not")) { if (presence_eval(c, k, t, S, obj)) return 0; }
        else if (cJSON_IsArray(k) && (!strcmp(w, "allOf") || !strcmp(w, "anyOf") || !strcmp(w, "oneOf"))) {
            int yes = 0, all = 1;
            for (const cJSON *x = k->child; x; x = x->next) {
                int v = presence_eval(c, x, t, S, obj);
                yes += v; all &= v;
            }
            if (w[0] == 'a' && w[1] == 'l' ? !all : w[0] == 'a' ? !yes : yes != 1) return 0;
        }
    }
    return 1;
}

/* Members in any order, each tracked key at most once: rule O_S after some members with the
 * tracked set S seen; the object may close where acc[S], and no member leads to a set from which
 * no accepting set can be reached (live). */
static int object_members(sc *c, prop *P, int np, int ntr, const unsigned char *acc, int add_member, int min1) {
    gr_builder *b = c->b;
    int nsub = 1 << ntr;
    int *rules = malloc(sizeof(int) * (size_t)nsub);
    int *alts = malloc(sizeof(int) * (size_t)(np + 2));
    unsigned char *live = malloc((size_t)nsub);
    if (!rules || !alts || !live) { free(rules); free(alts); free(live); b->oom = 1; return -1; }
    unsigned addable = 0;
    for (int i = 0; i < np; i++) if (P[i].req >= 0) addable |= 1u << P[i].req;
    for (int S = nsub - 1; S >= 0; S--) { /* a superset reachable by adding keys is accepting */
        live[S] = acc[S];
        for (int k = 0; k < ntr && !live[S]; k++)
            if ((addable >> k & 1) && !(S >> k & 1)) live[S] = live[S | 1 << k];
    }
    for (int S = 0; S < nsub; S++) rules[S] = gb_rule(b, NULL);
    for (int S = 0; S < nsub; S++) {
        int m = 0;
        for (int i = 0; i < np && live[S]; i++) {
            if (P[i].req >= 0 && (S >> P[i].req & 1)) continue;
            int T = P[i].req >= 0 ? S | 1 << P[i].req : S;
            if (live[T]) alts[m++] = gb_seq3(b, sep(c), gb_ref(b, P[i].member), gb_ref(b, rules[T]));
        }
        if (add_member >= 0 && live[S]) alts[m++] = gb_seq3(b, sep(c), gb_ref(b, add_member), gb_ref(b, rules[S]));
        if (acc[S]) alts[m++] = gb_empty(b);
        gb_set_body(b, rules[S], m ? gb_alt(b, alts, m) : gb_never(b));
    }
    int m = 0; /* the first member */
    for (int i = 0; i < np; i++) {
        int T = P[i].req >= 0 ? 1 << P[i].req : 0;
        if (live[T]) alts[m++] = gb_seq2(b, gb_ref(b, P[i].member), gb_ref(b, rules[T]));
    }
    if (add_member >= 0 && live[0]) alts[m++] = gb_seq2(b, gb_ref(b, add_member), gb_ref(b, rules[0]));
    int first = m ? gb_alt(b, alts, m) : gb_never(b);
    int empty_ok = acc[0] && !min1;
    free(rules);
    free(alts);
    free(live);
    int body = gb_seq2(b, first, ws(c));
    return empty_ok ? gb_opt(b, body) : body;
}

/* Members in the schema's order (too many required members to track as a set). */
static int object_ordered(sc *c, prop *P, int np, int add_member) {
    gr_builder *b = c->b;
    int tail = add_member >= 0 ? gb_rep(b, gb_seq2(b, sep(c), gb_ref(b, add_member)), 0, GR_INF) : gb_empty(b);
    int first = add_member >= 0 ? gb_opt(b, gb_seq2(b, gb_ref(b, add_member), tail)) : gb_empty(b);
    for (int i = np - 1; i >= 0; i--) { /* T_i: after a member; F_i: none yet */
        int t = gb_seq3(b, sep(c), gb_ref(b, P[i].member), tail);
        int f = gb_seq2(b, gb_ref(b, P[i].member), tail);
        int tr = gb_rule(b, NULL), fr = gb_rule(b, NULL);
        gb_set_body(b, tr, P[i].req >= 0 ? t : gb_alt2(b, t, tail));
        gb_set_body(b, fr, P[i].req >= 0 ? f : gb_alt2(b, f, first));
        tail = gb_ref(b, tr);
        first = gb_ref(b, fr);
    }
    return gb_seq2(b, first, ws(c));
}

/* ---- patternProperties beside properties / additionalProperties (key languages as DFAs) ---------- */

#define MAX_PATTERNS 4

/* The schema a key's value must satisfy: base (a property's schema; NULL: the additional one,
 * *use_addv set) and every pattern that matches the key. NULL with c->st on error. */
static const cJSON *pattern_value(sc *c, const cJSON *pp, const char *name, const cJSON *base, int *use_addv, const char *path) {
    cJSON *all = NULL;
    *use_addv = 0;
    for (const cJSON *x = pp->child; x; x = x->next) {
        int r = gr_regex_search(x->string, name, strlen(name));
        if (r < 0) { sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (a pattern the regex engine refuses)", "patternProperties"); return NULL; }
        if (!r) continue;
        if (!all) {
            if (!(all = own(c, cJSON_CreateObject()))) { c->b->oom = 1; return NULL; }
            cJSON *l = cJSON_AddArrayToObject(all, "allOf");
            if (base) cJSON_AddItemToArray(l, cJSON_Duplicate(base, 1));
        }
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(all, "allOf"), cJSON_Duplicate(x, 1));
    }
    if (all) return all;
    if (!base) *use_addv = 1;
    return base;
}

/* Members whose keys are not named (keys[0..n): dumped, closing quote kept): for each set T of
 * patterns, keys matching exactly those (the allOf of their schemas), and keys matching none
 * (addv; -1: not allowed); every key in its json.dumps spelling. The member rule, or -1. */
static int pattern_members(sc *c, const cJSON *pp, char **keys, int n, int addv, const char *path) {
    gr_builder *b = c->b;
    int k = cJSON_GetArraySize(pp), m = 0, rule = -1, alts[1 << MAX_PATTERNS];
    gr_dfa D[MAX_PATTERNS], canon, names;
    int nd = 0, ok = 0;
    char p2[512];
    memset(D, 0, sizeof D); memset(&canon, 0, sizeof canon); memset(&names, 0, sizeof names);
    if (gr_dfa_from_node(b, canonical_body(c), &canon, DFA_MAX_STATES) || gr_dfa_from_node(b, bodies_node(c, keys, n), &names, DFA_MAX_STATES)) goto out;
    for (const cJSON *x = pp->child; x; x = x->next, nd++) {
        ig_status st;
        gr_dfa raw;
        int key = gr_regex_build(b, x->string, strlen(x->string), 1, 1, c->err, &st);
        if (key < 0) { sfail(c, st, path, "patternProperties: %s", c->err ? c->err->msg : "bad pattern"); goto out; }
        if (gr_dfa_from_node(b, key, &raw, DFA_MAX_STATES)) goto out;
        int bad = gr_dfa_product(&raw, &canon, 0, &D[nd], DFA_MAX_STATES);
        gr_dfa_free(&raw);
        if (bad) goto out;
    }
    for (int T = (1 << k) - 1; T >= 0; T--) {
        gr_dfa cur, nx;
        if (gr_dfa_product(&canon, &names, 1, &cur, DFA_MAX_STATES)) goto out;
        for (int i = 0; i < k; i++) {
            int bad = gr_dfa_product(&cur, &D[i], !(T >> i & 1), &nx, DFA_MAX_STATES);
            gr_dfa_free(&cur);
            if (bad) goto out;
            cur = nx;
        }
        int val = -2;
        if (!gr_dfa_empty(&cur)) {
            if (!T) val = addv;
            else {
                cJSON *all = own(c, cJSON_CreateObject());
                if (!all) { b->oom = 1; gr_dfa_free(&cur); goto out; }
                cJSON *l = cJSON_AddArrayToObject(all, "allOf");
                int i = 0;
                for (const cJSON *x = pp->child; x; x = x->next, i++)
                    if (T >> i & 1) cJSON_AddItemToArray(l, cJSON_Duplicate(x, 1));
                subpath(p2, sizeof p2, path, "patternProperties", NULL);
                val = schema(c, cJSON_GetArraySize(l) == 1 ? cJSON_GetArrayItem(l, 0) : all, p2);
                if (val < 0) { gr_dfa_free(&cur); goto out; }
            }
        }
        if (val >= 0) {
            int key = gr_dfa_to_node(b, &cur);
            alts[m++] = gb_seq3(b, gb_seq3(b, gb_str(b, "\""), key, gb_str(b, "\"")), colon(c), val);
        }
        gr_dfa_free(&cur);
    }
    ok = 1;
    if (m) { rule = gb_rule(b, NULL); gb_set_body(b, rule, gb_alt(b, alts, m)); }
out:
    for (int i = 0; i < nd; i++) gr_dfa_free(&D[i]);
    gr_dfa_free(&canon); gr_dfa_free(&names);
    if (!ok && !c->st) sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (key languages past the state limit)", "patternProperties");
    return ok ? (m ? rule : -2) : -1;
}

/* Key-presence constraints of s (dependencies, dependentRequired, dependentSchemas) and extra (a
 * presence-only schema from not / oneOf / anyOf around s, or NULL), as one owned schema; NULL if
 * none; -1 in *bad where one constrains values. */
static cJSON *presence_constraints(sc *c, const cJSON *s, const cJSON *extra, const char *path, int *bad) {
    static const char *kws[] = {"dependencies", "dependentRequired", "dependentSchemas"};
    cJSON *pc = NULL;
    *bad = 0;
    for (int i = 0; i < 3 || (i == 3 && extra); i++) {
        const cJSON *k = i < 3 ? cJSON_GetObjectItemCaseSensitive(s, kws[i]) : extra;
        if (!k) continue;
        if (!pc && !(pc = own(c, cJSON_CreateObject()))) { c->b->oom = 1; *bad = 1; return NULL; }
        if (i < 3) cJSON_AddItemToObject(pc, kws[i], cJSON_Duplicate(k, 1));
        else cJSON_AddItemToArray(cJSON_AddArrayToObject(pc, "allOf"), cJSON_Duplicate(k, 1));
        if (!presence_only(c, pc, 0)) {
            *bad = 1;
            if (i < 3) sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (a dependent schema that constrains values)", kws[i]);
            else sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (key presence mixed with value constraints)", "not");
            return NULL;
        }
    }
    return pc;
}

/* With additionalProperties false: keys matching a pattern, with its schema (a key that is also
 * a named property is not told apart). The member rule, or -1. */
static int pattern_only_members(sc *c, const cJSON *pp, const char *path) {
    gr_builder *b = c->b;
    int alts[64], m = 0;
    char p2[512];
    for (const cJSON *x = pp->child; x && m < 64; x = x->next) {
        ig_status st;
        int key = gr_regex_build(b, x->string, strlen(x->string), 1, 1, c->err, &st);
        if (key < 0) return sfail(c, st, path, "patternProperties: %s", c->err ? c->err->msg : "bad pattern");
        subpath(p2, sizeof p2, path, "patternProperties", x->string);
        int val = schema(c, x, p2);
        if (val < 0) return -1;
        alts[m++] = gb_seq3(b, gb_seq3(b, gb_str(b, "\""), key, gb_str(b, "\"")), colon(c), val);
    }
    int rule = gb_rule(b, NULL);
    gb_set_body(b, rule, gb_alt(b, alts, m));
    return rule;
}

/* The members between the braces: tracked keys as a set (closing where the required keys are
 * there and pc holds), or, past the set's size limit and without pc, required members in order. */
static int members_body(sc *c, const cJSON *s, prop *P, int n, int nreq, unsigned need, const cJSON *pc, const keyset *tk,
                        int add_member, int min1, const cJSON *extra, const char *path) {
    if (nreq <= MAX_TRACKED && ((long)(n + 1) << nreq) <= MAX_SUBSET_RULES * 8) {
        unsigned char *acc = malloc((size_t)1 << nreq);
        if (!acc) { c->b->oom = 1; return -1; }
        for (unsigned S = 0; S < 1u << nreq; S++)
            acc[S] = (S & need) == need && (!pc || presence_eval(c, pc, tk, S, 1));
        int body = object_members(c, P, n, nreq, acc, add_member, min1);
        free(acc);
        return body;
    }
    if (pc)
        return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (more than 12 keys to track, or too many members)",
                     cJSON_GetObjectItemCaseSensitive(s, "dependencies") ? "dependencies"
                     : cJSON_GetObjectItemCaseSensitive(s, "dependentRequired") ? "dependentRequired" : extra ? "not" : "dependentSchemas");
    if (min1) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (with many required members)", "minProperties");
    return object_ordered(c, P, n, add_member);
}

static int object_schema(sc *c, const cJSON *s, const char *path, const cJSON *extra) {
    gr_builder *b = c->b;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(s, "minProperties");
    int pp_keys = 0; /* patternProperties as extra member kinds (only when no other key may come) */
    int pp_general = 0; /* patternProperties beside other keys: key languages through DFAs */
    if (pp && cJSON_GetArraySize(pp) > 0) {
        int universal = 1, trivial = 1;
        for (const cJSON *x = pp->child; x; x = x->next) {
            const char *re = x->string;
            universal &= !strcmp(re, ".*") || !strcmp(re, "^.*$") || !strcmp(re, ".*$") || !strcmp(re, "^.*");
            trivial &= cJSON_IsTrue(x) || (cJSON_IsObject(x) && !x->child);
        }
        if (cJSON_IsFalse(addl)) pp_keys = 1;
        else if (!trivial && !(universal && cJSON_GetArraySize(pp) == 1 && (!addl || cJSON_IsTrue(addl)))) {
            if (cJSON_GetArraySize(pp) > MAX_PATTERNS)
                return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (more than 4 patterns beside additional properties)", "patternProperties");
            pp_general = 1;
        } else if (!trivial) addl = pp->child; /* every other key: the pattern's schema */
    }
    if (mp && !(cJSON_IsNumber(mp) && mp->valuedouble <= 1)) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (above 1)", "minProperties");
    int min1 = cJSON_IsNumber(mp) && mp->valuedouble == 1;
    int bad;
    cJSON *pc = presence_constraints(c, s, extra, path, &bad);
    if (bad) return -1;
    keyset names = {0}, tk = {0}; /* keys named by required and pc; the tracked ones */
    for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && ks_add(&names, r->valuestring)) b->oom = 1;
    if (pc && presence_keys(c, pc, &names)) b->oom = 1;
    int np = cJSON_IsObject(props) ? cJSON_GetArraySize(props) : 0, nr = names.n;
    prop *P = calloc((size_t)(np + nr + 1), sizeof(prop));
    char **keys = calloc((size_t)(np + nr + 1), sizeof(char *));
    if (!P || !keys || b->oom) { free(P); free(keys); free(names.name); b->oom = 1; return -1; }
    int n = 0, nreq = 0, node = -1;
    char p2[512];
    int addv = -1; /* additional value node, -1: none allowed */
    if (!addl || cJSON_IsTrue(addl)) addv = gb_ref(b, c->any_value);
    else if (!cJSON_IsFalse(addl)) {
        subpath(p2, sizeof p2, path, "additionalProperties", NULL);
        if ((addv = schema(c, addl, p2)) < 0) goto done;
    }
    for (const cJSON *p = cJSON_IsObject(props) ? props->child : NULL; p; p = p->next, n++) {
        subpath(p2, sizeof p2, path, "properties", p->string);
        P[n].name = p->string;
        P[n].req = -1;
        int use_addv;
        const cJSON *ps = pp_general ? pattern_value(c, pp, p->string, p, &use_addv, p2) : p;
        int v = ps ? schema(c, ps, p2) : -1;
        if (v < 0) goto done;
        P[n].member = v;
    }
    unsigned need = 0; /* the required keys' bits */
    for (int j = 0; j < names.n; j++) {
        const char *name = names.name[j];
        int i, required = 0;
        for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
            required |= cJSON_IsString(r) && !strcmp(r->valuestring, name);
        for (i = 0; i < n && strcmp(P[i].name, name); i++) {}
        if (i == n) { /* named but only allowed as an additional property */
            if (addv < 0 && !required) continue; /* never present: untracked */
            P[n].name = name;
            P[n].req = -1;
            P[n].member = addv >= 0 ? addv : gb_never(b);
            if (pp_general) {
                int use_addv;
                const cJSON *ps = pattern_value(c, pp, name, NULL, &use_addv, path);
                if (!ps && !use_addv) goto done;
                if (!use_addv && (P[n].member = schema(c, ps, path)) < 0) goto done;
            }
            n++;
        }
        if (P[i].req < 0) {
            P[i].req = nreq++;
            if (ks_add(&tk, name)) { b->oom = 1; goto done; }
            if (required) need |= 1u << P[i].req;
        }
    }
    for (int i = 0; i < n; i++) { /* member rules: "key": value */
        sbuf k = {0};
        dump_string(&k, P[i].name);
        if (k.oom) { b->oom = 1; goto done; }
        keys[i] = k.p + 1; /* without the opening quote, keeping the closing one */
        int r = gb_rule(b, NULL);
        gb_set_body(b, r, gb_seq3(b, gb_lit(b, k.p, k.n), colon(c), P[i].member));
        P[i].member = r;
    }
    int add_member = -1;
    if (pp_general) {
        if ((add_member = pattern_members(c, pp, keys, n, addv, path)) == -1) goto done;
        if (add_member == -2) add_member = -1;
    } else if (addv >= 0) {
        add_member = gb_rule(b, NULL);
        int key = gb_seq2(b, gb_str(b, "\""), key_not_in(c, keys, n, 0));
        gb_set_body(b, add_member, gb_seq3(b, key, colon(c), addv));
    } else if (pp_keys && (add_member = pattern_only_members(c, pp, path)) < 0) goto done;
    if (pc && pp_keys) { sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (with key-presence constraints)", "patternProperties"); goto done; }
    int body = members_body(c, s, P, n, nreq, need, pc, &tk, add_member, min1, extra, path);
    if (body >= 0) node = gb_seq3(b, gb_seq2(b, gb_str(b, "{"), ws(c)), body, gb_str(b, "}"));
done:
    for (int i = 0; i < n; i++) if (keys[i]) free(keys[i] - 1);
    free(keys);
    free(names.name);
    free(tk.name);
    free(P);
    return node;
}

/* ---- arrays ----------------------------------------------------------------------------------------- */

#define MAX_UNIQUE_VALUES 12

/* uniqueItems over items from a small finite set (enum / const / boolean / null, each value
 * checked against the items schema): the values used so far are tracked as a set, so no value
 * comes twice. -2: the items are not such a set (the caller refuses). */
static int unique_array(sc *c, const cJSON *items, int lo, int hi, const char *path) {
    gr_builder *b = c->b;
    const cJSON *is = items ? deref(c, items, 0) : NULL;
    if (!cJSON_IsObject(is)) return -2;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(is, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(is, "const");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(is, "type");
    cJSON *cand = own(c, cJSON_CreateArray());
    if (!cand) { b->oom = 1; return -1; }
    if (cJSON_IsArray(en)) { for (const cJSON *v = en->child; v; v = v->next) cJSON_AddItemToArray(cand, cJSON_Duplicate(v, 1)); }
    else if (cn) cJSON_AddItemToArray(cand, cJSON_Duplicate(cn, 1));
    else if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "boolean")) { cJSON_AddItemToArray(cand, cJSON_CreateTrue()); cJSON_AddItemToArray(cand, cJSON_CreateFalse()); }
    else if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "null")) cJSON_AddItemToArray(cand, cJSON_CreateNull());
    else return -2;
    int vals[MAX_UNIQUE_VALUES], body_of[MAX_UNIQUE_VALUES], n = 0;
    const cJSON *kept[MAX_UNIQUE_VALUES];
    for (const cJSON *v = cand->child; v; v = v->next) {
        int r = gr_schema_check(c->root, is, v, 0), dup = -1;
        if (r < 0) return -2;
        for (int i = 0; i < n && r && dup < 0; i++) /* 1 and 1.0, or one object's key orders: one value */
            if (cJSON_Compare(kept[i], v, 1)) dup = i;
        if (!r) continue;
        if (dup >= 0) { body_of[dup] = gb_alt2(b, body_of[dup], literal(c, v)); continue; }
        if (n == MAX_UNIQUE_VALUES)
            return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (over more than 12 distinct values)", "uniqueItems");
        kept[n] = v;
        vals[n] = gb_rule(b, NULL);
        body_of[n++] = literal(c, v);
    }
    for (int i = 0; i < n; i++) gb_set_body(b, vals[i], body_of[i]);
    int nsub = 1 << n, *rules = malloc(sizeof(int) * (size_t)nsub), alts[MAX_UNIQUE_VALUES + 1];
    if (!rules) { b->oom = 1; return -1; }
    for (int S = 0; S < nsub; S++) rules[S] = gb_rule(b, NULL);
    for (int S = 0; S < nsub; S++) { /* after the values in S */
        int m = 0, k = __builtin_popcount((unsigned)S);
        for (int i = 0; i < n && (hi == GR_INF || k < hi); i++)
            if (!(S >> i & 1)) alts[m++] = gb_seq3(b, sep(c), gb_ref(b, vals[i]), gb_ref(b, rules[S | 1 << i]));
        if (k >= lo) alts[m++] = gb_empty(b);
        gb_set_body(b, rules[S], m ? gb_alt(b, alts, m) : gb_never(b));
    }
    int m = 0;
    for (int i = 0; i < n && hi != 0; i++) alts[m++] = gb_seq2(b, gb_ref(b, vals[i]), gb_ref(b, rules[1 << i]));
    int body = m ? gb_seq2(b, gb_alt(b, alts, m), ws(c)) : gb_never(b);
    if (lo == 0) body = gb_opt(b, body);
    free(rules);
    return gb_seq3(b, gb_seq2(b, gb_str(b, "["), ws(c)), body, gb_str(b, "]"));
}

static int array_schema(sc *c, const cJSON *s, const char *path) {
    gr_builder *b = c->b;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items"), *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *addi = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    const cJSON *uq = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
    if (cJSON_GetObjectItemCaseSensitive(s, "contains")) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s'", "contains");
    int lo = schema_count(mn, 0), hi = schema_count(mx, GR_INF);
    if (lo > 1000 || hi > 1000) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (above 1000)", "minItems/maxItems");
    if (lo < 0 || (hi != GR_INF && hi < lo)) return gb_never(b);
    if (cJSON_IsTrue(uq)) {
        int node = prefix || cJSON_IsArray(items) ? -2 : unique_array(c, items, lo, hi, path);
        if (node == -2) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (only over items from a small finite set)", "uniqueItems");
        return node;
    }
    const cJSON *tuple = cJSON_IsArray(prefix) ? prefix : cJSON_IsArray(items) ? items : NULL;
    const cJSON *rest = tuple == items ? addi : items;
    char p2[512];
    int k = tuple ? cJSON_GetArraySize(tuple) : 0, it;
    if (!rest || cJSON_IsTrue(rest)) it = gb_ref(b, c->any_value);
    else if (cJSON_IsFalse(rest)) it = -1;
    else {
        subpath(p2, sizeof p2, path, tuple == items ? "additionalItems" : "items", NULL);
        if ((it = schema(c, rest, p2)) < 0) return -1;
    }
    int *el = malloc(sizeof(int) * (size_t)(k + 1));
    if (!el) { b->oom = 1; return -1; }
    int i = 0;
    for (const cJSON *x = tuple ? tuple->child : NULL; x; x = x->next, i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        subpath(p2, sizeof p2, path, tuple == items ? "items" : "prefixItems", idx);
        if ((el[i] = schema(c, x, p2)) < 0) { free(el); return -1; }
    }
    /* tail(i): the elements from index i on, each after a separator */
    int tail, start = k ? k : 1;
    if (it < 0 || (hi != GR_INF && hi <= start)) tail = gb_empty(b);
    else tail = gb_rep(b, gb_seq2(b, sep(c), it), lo > start ? lo - start : 0, hi == GR_INF ? GR_INF : hi - start);
    if (it < 0 && lo > k) tail = gb_never(b);
    for (i = k - 1; i >= 1; i--) {
        int more = hi != GR_INF && i >= hi ? gb_never(b) : gb_seq3(b, sep(c), el[i], tail);
        tail = i >= lo ? gb_alt2(b, more, gb_empty(b)) : more;
    }
    int e0 = k ? el[0] : it, body;
    free(el);
    if (hi == 0 || e0 < 0) body = lo == 0 ? gb_empty(b) : gb_never(b);
    else {
        body = gb_seq3(b, e0, tail, ws(c));
        if (lo == 0) body = gb_opt(b, body);
    }
    return gb_seq3(b, gb_seq2(b, gb_str(b, "["), ws(c)), body, gb_str(b, "]"));
}

/* ---- dispatch --------------------------------------------------------------------------------------- */

static const char *unsupported_kw[] = {"if", "then", "else", "propertyNames", "unevaluatedProperties",
                                       "unevaluatedItems", "$dynamicRef", "$recursiveRef", "minContains",
                                       "maxContains", "maxProperties", NULL};

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_INT = 64, T_ALL = 63 };

static int type_bits(sc *c, const cJSON *t, const char *path) {
    static const char *names[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
    if (!t) return T_ALL;
    int bits = 0;
    const cJSON *one = cJSON_IsArray(t) ? t->child : t;
    for (; one; one = cJSON_IsArray(t) ? one->next : NULL) {
        int k;
        for (k = 0; k < 7 && !(cJSON_IsString(one) && !strcmp(one->valuestring, names[k])); k++) {}
        if (k == 7) return sfail(c, IG_ERR_FORMAT, path, "unknown %s", "type");
        bits |= 1 << k;
    }
    return bits;
}

static int value_matches_type(const cJSON *v, int bits) {
    if (cJSON_IsNull(v)) return bits & T_NULL;
    if (cJSON_IsBool(v)) return bits & T_BOOL;
    if (cJSON_IsObject(v)) return bits & T_OBJ;
    if (cJSON_IsArray(v)) return bits & T_ARR;
    if (cJSON_IsString(v)) return bits & T_STR;
    if (cJSON_IsNumber(v)) return (bits & T_NUM) || ((bits & T_INT) && v->valuedouble == floor(v->valuedouble));
    return 0;
}

/* Asserting keywords besides `except` (one of anyOf / oneOf / allOf / $ref)? */
static cJSON *siblings(sc *c, const cJSON *s, const char *except) {
    cJSON *o = NULL;
    for (const cJSON *k = s->child; k; k = k->next) {
        if (!strcmp(k->string, except) || is_annotation(k->string)) continue;
        if (!o && !(o = own(c, cJSON_CreateObject()))) return NULL;
        cJSON_AddItemToObject(o, k->string, cJSON_Duplicate(k, 1));
    }
    return o;
}

static int typed(sc *c, const cJSON *s, const char *path, const cJSON *extra);

static int combinator(sc *c, const cJSON *s, const char *path, const char *kw) {
    gr_builder *b = c->b;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, kw);
    char p2[512];
    if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list)) return sfail(c, IG_ERR_FORMAT, path, "'%s' must be a non-empty array", kw);
    cJSON *rest = siblings(c, s, kw);
    if (!strcmp(kw, "allOf")) {
        const cJSON *m = rest ? rest : cJSON_GetArrayItem(list, 0);
        for (const cJSON *x = rest ? list->child : list->child->next; x; x = x->next)
            if (!(m = merge(c, m, x, path))) return -1;
        return schema(c, m, path);
    }
    int pres = 1; /* branches on key presence only: one object grammar tracking those keys (oneOf exact) */
    for (const cJSON *x = list->child; x && pres; x = x->next) pres = presence_only(c, x, 0);
    if (pres) {
        cJSON *extra = own(c, cJSON_CreateObject()), *base = rest ? rest : own(c, cJSON_CreateObject());
        if (!extra || !base) { b->oom = 1; return -1; }
        cJSON_AddItemToObject(extra, kw, cJSON_Duplicate(list, 1));
        return typed(c, base, path, extra);
    }
    int n = cJSON_GetArraySize(list), i = 0;
    int *alts = malloc(sizeof(int) * (size_t)n);
    if (!alts) { b->oom = 1; return -1; }
    for (const cJSON *x = list->child; x; x = x->next, i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        subpath(p2, sizeof p2, path, kw, idx);
        const cJSON *br = rest ? merge(c, rest, x, p2) : x;
        if (!br || (alts[i] = schema(c, br, p2)) < 0) { free(alts); return -1; }
    }
    int node = gb_alt(b, alts, n);
    free(alts);
    return node;
}

/* A schema about strings only: type "string" (or none), pattern, format, minLength, maxLength. */
static int string_only(const cJSON *n) {
    int any = 0;
    for (const cJSON *k = n->child; k; k = k->next) {
        const char *w = k->string;
        if (is_annotation(w)) continue;
        if (!strcmp(w, "type")) { if (!cJSON_IsString(k) || strcmp(k->valuestring, "string")) return 0; }
        else if (!strcmp(w, "pattern") || !strcmp(w, "format") || !strcmp(w, "minLength") || !strcmp(w, "maxLength")) any = 1;
        else return 0;
    }
    return any;
}

/* `not` in the forms we can express: {"type": ...} (types taken away), an enum / const (strings:
 * any other string; null, true, false: those literals taken away; numbers, arrays, objects: in
 * *not_other, which the caller refuses where those types remain), strings outside a pattern /
 * length / format (*not_str), and key presence. */
static int read_not(sc *c, const cJSON *s, const char *path, int *drop_bits, const cJSON **not_strings, const cJSON **not_pres,
                    int *not_bool, int *not_other, const cJSON **not_str) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "not");
    *drop_bits = 0;
    *not_strings = NULL;
    *not_pres = NULL;
    *not_bool = *not_other = 0;
    *not_str = NULL;
    if (!n) return 0;
    n = deref(c, n, 0);
    int nk = 0, ok = n && cJSON_IsObject(n);
    const cJSON *ts = ok ? cJSON_GetObjectItemCaseSensitive(n, "type") : NULL;
    int str_enum = cJSON_IsString(ts) && !strcmp(ts->valuestring, "string") &&
                   (cJSON_GetObjectItemCaseSensitive(n, "enum") || cJSON_GetObjectItemCaseSensitive(n, "const"));
    for (const cJSON *k = ok ? n->child : NULL; k; k = k->next)
        if (!is_annotation(k->string) && !(str_enum && !strcmp(k->string, "type"))) nk++;
    const cJSON *t = ok && !str_enum ? ts : NULL;
    const cJSON *e = ok ? cJSON_GetObjectItemCaseSensitive(n, "enum") : NULL, *cn = ok ? cJSON_GetObjectItemCaseSensitive(n, "const") : NULL;
    if (ok && nk == 1 && t) {
        *drop_bits = type_bits(c, t, path);
        return *drop_bits < 0 ? -1 : 0;
    }
    if (ok && nk == 1 && (cJSON_IsArray(e) || (cn && !e))) {
        cJSON *strs = own(c, cJSON_CreateArray());
        if (!strs) { c->b->oom = 1; return -1; }
        for (const cJSON *x = e ? e->child : cn; x; x = e ? x->next : NULL) {
            if (cJSON_IsString(x)) cJSON_AddItemToArray(strs, cJSON_CreateString(x->valuestring));
            else if (str_enum) continue; /* {type: string, enum: [...]}: only its strings count */
            else if (cJSON_IsNull(x)) *drop_bits |= T_NULL;
            else if (cJSON_IsBool(x)) *not_bool |= cJSON_IsTrue(x) ? 1 : 2;
            else *not_other |= cJSON_IsNumber(x) ? T_NUM | T_INT : cJSON_IsArray(x) ? T_ARR : T_OBJ;
        }
        if (*not_bool == 3) { *drop_bits |= T_BOOL; *not_bool = 0; }
        if (cJSON_GetArraySize(strs)) *not_strings = strs;
        return 0;
    }
    if (ok && string_only(n)) { /* strings outside a pattern / length / format */
        *not_str = n;
        if (!ts) *drop_bits |= T_ALL & ~T_STR; /* other values satisfy n, so fail not n */
        return 0;
    }
    if (n && presence_only(c, n, 0)) { /* keys an object must not have together */
        cJSON *x = own(c, cJSON_CreateObject());
        if (!x) { c->b->oom = 1; return -1; }
        cJSON_AddItemToObject(x, "not", cJSON_Duplicate(n, 1));
        *not_pres = x;
        keyset none = {0};
        if (!presence_eval(c, x, &none, 0, 0)) *drop_bits = T_ALL & ~T_OBJ;
        return 0;
    }
    return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (only {type}, an enum / const, key presence, or beside an enum)", "not");
}

/* The bodies (no quotes) of the strings in array a, as json.dumps writes them. */
static int listed_bodies(sc *c, const cJSON *a) {
    int n = cJSON_GetArraySize(a), nn = 0, node = -1;
    char **ks = calloc((size_t)n + 1, sizeof(char *));
    if (!ks) { c->b->oom = 1; return -1; }
    for (const cJSON *x = a->child; x; x = x->next, nn++) {
        sbuf k = {0};
        dump_string(&k, x->valuestring);
        if (!(ks[nn] = k.p)) c->b->oom = 1;
    }
    if (!c->b->oom) {
        for (int i = 0; i < nn; i++) ks[i]++;
        node = bodies_node(c, ks, nn);
        for (int i = 0; i < nn; i++) ks[i]--;
    }
    for (int i = 0; i < nn; i++) free(ks[i]);
    free(ks);
    return node;
}

/* The strings of s in their json.dumps spelling less those whose body neg matches, quoted;
 * -1 (refused by name) past the state limit. */
static int string_less(sc *c, const cJSON *s, int neg, const char *path) {
    gr_builder *b = c->b;
    int str = string_schema(c, s, path);
    if (str < 0) return -1;
    int body = b->kids[b->nodes[str].kid + 1], canon = canonical_body(c), r = -1;
    gr_dfa dc, db, dn, dl, dd;
    if (!gr_dfa_from_node(b, canon, &dc, DFA_MAX_STATES)) {
        if (!gr_dfa_from_node(b, body, &db, DFA_MAX_STATES)) {
            if (!gr_dfa_product(&db, &dc, 0, &dn, DFA_MAX_STATES)) { /* one spelling each */
                if (!gr_dfa_from_node(b, neg, &dl, DFA_MAX_STATES)) {
                    if (!gr_dfa_product(&dn, &dl, 1, &dd, DFA_MAX_STATES)) { r = gr_dfa_to_node(b, &dd); gr_dfa_free(&dd); }
                    gr_dfa_free(&dl);
                }
                gr_dfa_free(&dn);
            }
            gr_dfa_free(&db);
        }
        gr_dfa_free(&dc);
    }
    if (r < 0) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (with string constraints: too many states)", "not");
    return gb_seq3(b, gb_str(b, "\""), r, gb_str(b, "\""));
}

/* extra: a presence-only schema the value must also satisfy (from oneOf / anyOf), or NULL. */
static int typed(sc *c, const cJSON *s, const char *path, const cJSON *extra) {
    gr_builder *b = c->b;
    int bits = type_bits(c, cJSON_GetObjectItemCaseSensitive(s, "type"), path), drop;
    const cJSON *not_strings, *not_pres;
    const cJSON *not_str;
    int not_bool, not_other;
    if (bits < 0 || read_not(c, s, path, &drop, &not_strings, &not_pres, &not_bool, &not_other, &not_str)) return -1;
    if (extra) {
        keyset none = {0};
        if (!presence_eval(c, extra, &none, 0, 0)) drop |= T_ALL & ~T_OBJ;
    }
    if (extra && not_pres) {
        cJSON *both = own(c, cJSON_CreateObject());
        if (!both) { b->oom = 1; return -1; }
        cJSON *l = cJSON_AddArrayToObject(both, "allOf");
        cJSON_AddItemToArray(l, cJSON_Duplicate(extra, 1));
        cJSON_AddItemToArray(l, cJSON_Duplicate(not_pres, 1));
        extra = both;
    } else if (not_pres) extra = not_pres;
    if (drop & T_NUM) drop |= T_INT;
    bits &= ~drop;
    if ((drop & T_INT) && !(drop & T_NUM) && (bits & T_NUM))
        return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (numbers that are not integers)", "not");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"))) bits |= T_NULL;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if ((en || cn) && (drop || not_strings || not_bool || not_other || not_str)) return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (with enum)", "not");
    if (en || cn) {
        if (en && !cJSON_IsArray(en)) return sfail(c, IG_ERR_FORMAT, path, "'%s' must be an array", "enum");
        int n = en ? cJSON_GetArraySize(en) : 1, m = 0;
        int *alts = malloc(sizeof(int) * (size_t)(n + 1));
        if (!alts) { b->oom = 1; return -1; }
        for (const cJSON *v = en ? en->child : cn; v; v = en ? v->next : NULL)
            if (value_matches_type(v, bits | (bits & T_NUM ? T_INT : 0))) alts[m++] = literal(c, v);
        int node = m ? gb_alt(b, alts, m) : gb_never(b);
        free(alts);
        return node;
    }
    int alts[8], m = 0;
    if (bits & T_NULL) alts[m++] = gb_str(b, "null");
    if (bits & not_other)
        return sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (an enum of numbers, arrays or objects)", "not");
    if (bits & T_BOOL) alts[m++] = not_bool == 1 ? gb_str(b, "false") : not_bool == 2 ? gb_str(b, "true") : gb_alt2(b, gb_str(b, "true"), gb_str(b, "false"));
    if (bits & T_OBJ) { if ((alts[m++] = object_schema(c, s, path, extra)) < 0) return -1; }
    if (bits & T_ARR) { if ((alts[m++] = array_schema(c, s, path)) < 0) return -1; }
    if ((bits & T_STR) && (not_strings || not_str)) {
        int constrained = cJSON_GetObjectItemCaseSensitive(s, "pattern") || cJSON_GetObjectItemCaseSensitive(s, "format") ||
                          cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        if (constrained || not_str) { /* the string's language (canonical spellings) less the excluded ones */
            int neg = -1;
            if (not_str) {
                int ns = string_schema(c, not_str, path);
                if (ns >= 0) neg = b->kids[b->nodes[ns].kid + 1]; /* "\"" body "\"" */
            } else neg = listed_bodies(c, not_strings);
            if (neg < 0 || (alts[m++] = string_less(c, s, neg, path)) < 0) return -1;
            goto strings_done;
        }
        int n = cJSON_GetArraySize(not_strings), i = 0;
        char **keys = calloc((size_t)n + 1, sizeof(char *));
        if (!keys) { b->oom = 1; return -1; }
        for (const cJSON *x = not_strings->child; x; x = x->next, i++) {
            sbuf k = {0};
            dump_string(&k, x->valuestring);
            keys[i] = k.p;
        }
        for (i = 0; i < n; i++) if (!keys[i]) b->oom = 1;
        if (!b->oom) {
            for (i = 0; i < n; i++) keys[i]++;
            alts[m++] = gb_seq2(b, gb_str(b, "\""), key_not_in(c, keys, n, 0));
            for (i = 0; i < n; i++) keys[i]--;
        }
        for (i = 0; i < n; i++) free(keys[i]);
        free(keys);
    strings_done:;
    } else if (bits & T_STR) { if ((alts[m++] = string_schema(c, s, path)) < 0) return -1; }
    if (bits & T_NUM) { if ((alts[m++] = numeric(c, s, path, 0)) < 0) return -1; }
    else if (bits & T_INT) { if ((alts[m++] = numeric(c, s, path, 1)) < 0) return -1; }
    return m ? gb_alt(b, alts, m) : gb_never(b);
}

/* A schema with enum / const: the alternation of its values that satisfy all its other keywords
 * (gr_schema_check), or -2 where a verdict is undecided (the caller compiles it as usual). */
static int listed_values(sc *c, const cJSON *s) {
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (!(cJSON_IsArray(en) || cn) || (en && cn)) return -2;
    int n = en ? cJSON_GetArraySize(en) : 1, m = 0;
    int *alts = malloc(sizeof(int) * (size_t)(n + 1));
    if (!alts) { c->b->oom = 1; return -1; }
    for (const cJSON *v = en ? en->child : cn; v; v = en ? v->next : NULL) {
        int r = gr_schema_check(c->root, s, v, 1);
        if (r < 0) { free(alts); return -2; }
        if (r) alts[m++] = literal(c, v);
    }
    int node = m ? gb_alt(c->b, alts, m) : gb_never(c->b);
    free(alts);
    return node;
}

static int schema(sc *c, const cJSON *s, const char *path) {
    if (c->st) return -1;
    if (cJSON_IsTrue(s)) return gb_ref(c->b, c->any_value);
    if (cJSON_IsFalse(s)) return gb_never(c->b);
    if (!cJSON_IsObject(s)) return sfail(c, IG_ERR_FORMAT, path, "a schema must be an %s", "object or a boolean");
    if (++c->depth > MAX_SCHEMA_DEPTH) { c->depth--; return sfail(c, IG_ERR_UNSUPPORTED, path, "schema nested deeper than %s levels", "64"); }
    int node = -1;
    for (int i = 0; unsupported_kw[i]; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, unsupported_kw[i])) {
            sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s'", unsupported_kw[i]);
            goto out;
        }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) { sfail(c, IG_ERR_FORMAT, path, "'%s' must be a string", "$ref"); goto out; }
        cJSON *rest = siblings(c, s, "$ref");
        if (!rest) node = ref_rule(c, ref->valuestring, path);
        else {
            const cJSON *t = resolve_ref(c, ref->valuestring);
            if (!t) { sfail(c, IG_ERR_UNSUPPORTED, path, "unresolvable $ref '%s' (only local JSON pointers)", ref->valuestring); goto out; }
            const cJSON *m = merge(c, t, rest, path);
            node = m ? schema(c, m, path) : -1;
        }
        goto out;
    }
    if ((node = listed_values(c, s)) != -2) goto out;
    int has_any = cJSON_GetObjectItemCaseSensitive(s, "anyOf") != NULL, has_one = cJSON_GetObjectItemCaseSensitive(s, "oneOf") != NULL;
    if (cJSON_GetObjectItemCaseSensitive(s, "allOf")) node = combinator(c, s, path, "allOf");
    else if (has_any && has_one) sfail(c, IG_ERR_UNSUPPORTED, path, "unsupported keyword '%s' (together with anyOf)", "oneOf");
    else if (has_any) node = combinator(c, s, path, "anyOf");
    else if (has_one) node = combinator(c, s, path, "oneOf");
    else node = typed(c, s, path, NULL);
out:
    c->depth--;
    return c->st ? -1 : node;
}

ig_status gr_schema_build(gr_builder *b, const char *text, size_t len, int json_mode, int *root, ig_err *err) {
    sc c = {.b = b, .err = err, .frac_max = -1};
    cJSON *doc = NULL;
    *root = -1;
    if (!json_mode) {
        doc = cJSON_ParseWithLength(text, len);
        if (!doc) return ig_fail(err, IG_ERR_FORMAT, "json schema: not valid JSON (near byte %ld)",
                                 (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0));
        c.root = doc;
    }
    int wsr = gb_rule(b, "ws");
    gr_bset w;
    bset_clear(&w);
    bset_add_range(&w, ' ', ' '); bset_add_range(&w, '\t', '\n'); bset_add_range(&w, '\r', '\r');
    gb_set_body(b, wsr, gb_rep(b, gb_bytes(b, &w), 0, GR_INF));
    c.ws = wsr;
    c.str_char = gr_json_char(b);
    any_rules(&c);
    int top = gb_rule(b, "root"), body;
    if (json_mode) body = gb_ref(b, gb_rule(b, "json-object"));
    else body = schema(&c, doc, "");
    if (body >= 0) {
        gb_set_body(b, top, body);
        *root = top;
    }
    for (int i = 0; i < c.n_refs; i++) free(c.ref_keys[i]);
    free(c.ref_keys); free(c.ref_rules);
    for (int i = 0; i < c.n_owned; i++) cJSON_Delete(c.owned[i]);
    free(c.owned);
    cJSON_Delete(doc);
    if (body < 0) return c.st ? c.st : ig_fail(err, IG_ERR_UNSUPPORTED, "json schema: too large (or out of memory)");
    return IG_OK;
}
