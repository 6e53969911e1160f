/* gr_build.c — the expression builder every grammar source uses, code point sets as UTF-8 byte
 * sequences, and the lowering of expressions into rules of byte-set elements (gr_internal.h).
 *
 * Lowering keeps every alternative's elements contiguous: a nested alternation or repetition
 * becomes a helper rule, queued and lowered after the alternative that refers to it. X* is
 * S ::= X S | ε (right recursion, which the matcher runs in constant stack depth). X{m,n} with
 * n (or, unbounded, m) above four and an X that cannot match the empty string is a counted rule
 * (gr_internal.h): one rule whatever the counts, run with a counter by the matcher; other
 * repetitions are m copies followed by n-m nested optionals.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "gr_internal.h"

static int grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

void gb_init(gr_builder *b) { memset(b, 0, sizeof *b); b->json_char = -1; }

void gb_free(gr_builder *b) {
    for (int i = 0; i < b->n_rules; i++) free(b->rule_names[i]);
    free(b->rule_names); free(b->rule_body); free(b->nodes); free(b->kids); free(b->sets);
    memset(b, 0, sizeof *b);
}

static int new_node(gr_builder *b, int kind, int32_t a, int32_t bb, const int *k, int n) {
    if (b->oom) return -1;
    if (b->n_nodes >= GR_MAX_NODES || grow((void **)&b->nodes, &b->cap_nodes, b->n_nodes + 1, sizeof(gr_node)) ||
        grow((void **)&b->kids, &b->cap_kids, b->n_kids + n, sizeof(int32_t))) {
        b->oom = 1;
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (k[i] < 0) { b->oom = 1; return -1; }
    gr_node *x = &b->nodes[b->n_nodes];
    x->kind = (uint8_t)kind; x->a = a; x->b = bb; x->kid = b->n_kids; x->nkid = n;
    if (n) memcpy(b->kids + b->n_kids, k, (size_t)n * sizeof(int32_t));
    b->n_kids += n;
    return b->n_nodes++;
}

void bset_clear(gr_bset *s) { memset(s, 0, sizeof *s); }
void bset_add_range(gr_bset *s, int lo, int hi) {
    for (int c = lo; c <= hi; c++) s->w[c >> 6] |= 1ull << (c & 63);
}

int gb_bytes(gr_builder *b, const gr_bset *s) {
    if (b->oom) return -1;
    int32_t i;
    for (i = b->n_sets - 1; i >= 0 && i >= b->n_sets - 64; i--) /* recent sets repeat most */
        if (!memcmp(&b->sets[i], s, sizeof *s)) break;
    if (i < 0 || i < b->n_sets - 64) {
        for (i = 0; i < b->n_sets; i++)
            if (!memcmp(&b->sets[i], s, sizeof *s)) break;
    }
    if (i >= b->n_sets) {
        if (grow((void **)&b->sets, &b->cap_sets, b->n_sets + 1, sizeof(gr_bset))) { b->oom = 1; return -1; }
        b->sets[b->n_sets] = *s;
        i = b->n_sets++;
    }
    return new_node(b, GN_BYTES, i, 0, NULL, 0);
}

int gb_range(gr_builder *b, int lo, int hi) {
    gr_bset s;
    bset_clear(&s);
    bset_add_range(&s, lo, hi);
    return gb_bytes(b, &s);
}

int gb_lit(gr_builder *b, const char *s, size_t n) {
    if (n == 1) return gb_range(b, (unsigned char)s[0], (unsigned char)s[0]);
    int *k = malloc((n ? n : 1) * sizeof(int));
    if (!k) { b->oom = 1; return -1; }
    for (size_t i = 0; i < n; i++) k[i] = gb_range(b, (unsigned char)s[i], (unsigned char)s[i]);
    int r = gb_seq(b, k, (int)n);
    free(k);
    return r;
}
int gb_str(gr_builder *b, const char *s) { return gb_lit(b, s, strlen(s)); }
int gb_seq(gr_builder *b, const int *k, int n) { return n == 1 ? k[0] : new_node(b, GN_SEQ, 0, 0, k, n); }
int gb_seq2(gr_builder *b, int x, int y) { int k[2] = {x, y}; return gb_seq(b, k, 2); }
int gb_seq3(gr_builder *b, int x, int y, int z) { int k[3] = {x, y, z}; return gb_seq(b, k, 3); }
int gb_alt(gr_builder *b, const int *k, int n) { return n == 1 ? k[0] : new_node(b, GN_ALT, 0, 0, k, n); }
int gb_alt2(gr_builder *b, int x, int y) { int k[2] = {x, y}; return gb_alt(b, k, 2); }
int gb_rep(gr_builder *b, int x, int min, int max) {
    if (min == 1 && max == 1) return x;
    return new_node(b, GN_REP, min, max, &x, 1);
}
int gb_opt(gr_builder *b, int x) { return gb_rep(b, x, 0, 1); }
int gb_empty(gr_builder *b) { return new_node(b, GN_EMPTY, 0, 0, NULL, 0); }
int gb_never(gr_builder *b) { return new_node(b, GN_NEVER, 0, 0, NULL, 0); }

int gb_rule(gr_builder *b, const char *name) {
    if (b->oom) return -1;
    for (int i = 0; name && i < b->n_rules; i++)
        if (b->rule_names[i] && !strcmp(b->rule_names[i], name)) return i;
    int32_t c1 = b->cap_rules;
    if (grow((void **)&b->rule_names, &c1, b->n_rules + 1, sizeof(char *))) { b->oom = 1; return -1; }
    int32_t c2 = b->cap_rules;
    if (grow((void **)&b->rule_body, &c2, b->n_rules + 1, sizeof(int32_t))) { b->oom = 1; return -1; }
    b->cap_rules = c1 < c2 ? c1 : c2;
    b->rule_names[b->n_rules] = name ? strdup(name) : NULL;
    if (name && !b->rule_names[b->n_rules]) { b->oom = 1; return -1; }
    b->rule_body[b->n_rules] = -1;
    return b->n_rules++;
}
int gb_ref(gr_builder *b, int rule) { return rule < 0 ? (b->oom = 1, -1) : new_node(b, GN_REF, rule, 0, NULL, 0); }
void gb_set_body(gr_builder *b, int rule, int node) {
    if (rule < 0 || node < 0) { b->oom = 1; return; }
    b->rule_body[rule] = node;
}

/* ---- code point sets ---------------------------------------------------------------------------- */

void cps_free(gr_cpset *s) { free(s->r); memset(s, 0, sizeof *s); }
int cps_add(gr_cpset *s, uint32_t lo, uint32_t hi) {
    if (lo > hi) return 0;
    if (grow((void **)&s->r, &s->cap, s->n + 1, sizeof s->r[0])) return -1;
    s->r[s->n][0] = lo; s->r[s->n][1] = hi; s->n++;
    return 0;
}
static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}
int cps_normalize(gr_cpset *s) {
    if (!s->n) return 0;
    qsort(s->r, (size_t)s->n, sizeof s->r[0], cmp_range);
    int o = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[o][1] + 1) { if (s->r[i][1] > s->r[o][1]) s->r[o][1] = s->r[i][1]; }
        else { o++; s->r[o][0] = s->r[i][0]; s->r[o][1] = s->r[i][1]; }
    }
    s->n = o + 1;
    return 0;
}
int cps_negate(gr_cpset *s) {
    cps_normalize(s);
    gr_cpset t = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i][0] > next && cps_add(&t, next, s->r[i][0] - 1)) { cps_free(&t); return -1; }
        next = s->r[i][1] + 1;
    }
    if (next <= 0x10FFFF && cps_add(&t, next, 0x10FFFF)) { cps_free(&t); return -1; }
    cps_free(s);
    *s = t;
    return 0;
}

static int utf8_enc(uint32_t c, unsigned char *o) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 63)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12); o[1] = (unsigned char)(0x80 | (c >> 6 & 63));
        o[2] = (unsigned char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18); o[1] = (unsigned char)(0x80 | (c >> 12 & 63));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 63)); o[3] = (unsigned char)(0x80 | (c & 63));
    return 4;
}

/* Appends to alts (node ids) the byte-range sequences of code points [lo, hi]. */
static int utf8_ranges(gr_builder *b, uint32_t lo, uint32_t hi, int *alts, int *na, int cap) {
    static const uint32_t bound[] = {0x7F, 0x7FF, 0xFFFF};
    if (lo > hi) return 0;
    if (lo <= 0xDFFF && hi >= 0xD800) { /* no surrogates */
        if (lo < 0xD800 && utf8_ranges(b, lo, 0xD7FF, alts, na, cap)) return -1;
        return hi > 0xDFFF ? utf8_ranges(b, 0xE000, hi, alts, na, cap) : 0;
    }
    for (int i = 0; i < 3; i++)
        if (lo <= bound[i] && hi > bound[i])
            return utf8_ranges(b, lo, bound[i], alts, na, cap) || utf8_ranges(b, bound[i] + 1, hi, alts, na, cap) ? -1 : 0;
    unsigned char el[4], eh[4];
    int n = utf8_enc(lo, el);
    utf8_enc(hi, eh);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) return utf8_ranges(b, lo, lo | m, alts, na, cap) || utf8_ranges(b, (lo | m) + 1, hi, alts, na, cap) ? -1 : 0;
            if ((hi & m) != m) return utf8_ranges(b, lo, (hi & ~m) - 1, alts, na, cap) || utf8_ranges(b, hi & ~m, hi, alts, na, cap) ? -1 : 0;
        }
    }
    if (*na >= cap) return -1;
    int k[4];
    for (int i = 0; i < n; i++) k[i] = gb_range(b, el[i], eh[i]);
    alts[(*na)++] = gb_seq(b, k, n);
    return 0;
}

static int json_escape_node(gr_builder *b, uint32_t c) {
    char e[8];
    switch (c) {
    case '"': return gb_str(b, "\\\"");
    case '\\': return gb_str(b, "\\\\");
    case '\n': return gb_str(b, "\\n");
    case '\r': return gb_str(b, "\\r");
    case '\t': return gb_str(b, "\\t");
    case '\b': return gb_str(b, "\\b");
    case '\f': return gb_str(b, "\\f");
    }
    snprintf(e, sizeof e, "\\u%04x", (unsigned)c);
    return gb_str(b, e);
}

int gb_cpset(gr_builder *b, const gr_cpset *s0, int json) {
    int cap = 4096, na = 0;
    int *alts = malloc((size_t)cap * sizeof(int));
    if (!alts) { b->oom = 1; return -1; }
    for (int i = 0; i < s0->n; i++) {
        uint32_t lo = s0->r[i][0], hi = s0->r[i][1];
        if (json) { /* escapes for the specials inside, raw UTF-8 for the rest */
            for (uint32_t c = lo; c <= hi && c < 0x20; c++) if (na < cap) alts[na++] = json_escape_node(b, c);
            if (lo <= '"' && hi >= '"' && na < cap) alts[na++] = json_escape_node(b, '"');
            if (lo <= '\\' && hi >= '\\' && na < cap) alts[na++] = json_escape_node(b, '\\');
            if (lo < 0x20) lo = 0x20;
            if (lo > hi) continue;
            uint32_t cut[2] = {'"', '\\'};
            for (int k = 0; k < 2; k++)
                if (lo <= cut[k] && hi >= cut[k]) {
                    if (lo < cut[k] && utf8_ranges(b, lo, cut[k] - 1, alts, &na, cap)) goto fail;
                    lo = cut[k] + 1;
                }
            if (lo > hi) continue;
        }
        if (utf8_ranges(b, lo, hi, alts, &na, cap)) goto fail;
    }
    int r = na ? gb_alt(b, alts, na) : gb_never(b);
    free(alts);
    return r;
fail:
    free(alts);
    b->oom = 1;
    return -1;
}

int gb_json_char_utf8(gr_builder *b) {
    if (b->json_char >= 0 || b->oom) return b->oom ? -1 : b->json_char;
    gr_cpset s = {0};
    int bad = cps_add(&s, 0x20, 0x21) || cps_add(&s, 0x23, 0x5B) || cps_add(&s, 0x5D, 0x10FFFF);
    int raw = bad ? (b->oom = 1, -1) : gb_cpset(b, &s, 0);
    cps_free(&s);
    gr_bset esc, hex;
    bset_clear(&esc);
    for (const char *e = "\"\\/bfnrt"; *e; e++) bset_add_range(&esc, (unsigned char)*e, (unsigned char)*e);
    bset_clear(&hex);
    bset_add_range(&hex, '0', '9'); bset_add_range(&hex, 'a', 'f'); bset_add_range(&hex, 'A', 'F');
    int h = gb_bytes(b, &hex), u = gb_seq(b, (int[]){gb_str(b, "u"), h, h, h, h}, 5);
    int r = gb_alt2(b, raw, gb_seq2(b, gb_str(b, "\\"), gb_alt2(b, gb_bytes(b, &esc), u)));
    if (r >= 0) b->json_char = r;
    return r;
}

/* ---- lowering ------------------------------------------------------------------------------------ */

typedef struct lowerer {
    gr_builder *b;
    gr_grammar *g;
    int32_t cap_elems, cap_alts, cap_rules;
    int32_t *node_rule; int32_t cap_nr; /* node → helper rule whose body it is, -1 */
    int32_t *star_rule; int32_t cap_sr; /* repetition node → its S ::= X S | ε rule or its counted rule, -1 */
    int32_t *queue; int32_t nq, cap_q;  /* rules left to lower */
    int32_t (*counted)[4]; int32_t n_counted, cap_counted; /* (rule, lo, hi, JSON character body) of each counted rule */
    int oom;
} lowerer;

static int push_elem(lowerer *L, int32_t e) {
    if (L->g->n_elems >= GR_MAX_ELEMS || grow((void **)&L->g->elems, &L->cap_elems, L->g->n_elems + 1, sizeof(int32_t))) {
        L->oom = 1;
        return -1;
    }
    L->g->elems[L->g->n_elems++] = e;
    return 0;
}

static int queue_rule(lowerer *L, int r) {
    if (grow((void **)&L->queue, &L->cap_q, L->nq + 1, sizeof(int32_t))) return -1;
    L->queue[L->nq++] = r;
    return 0;
}

/* Keeps node_rule as long as the builder's node array (-1 where unset). */
static int node_rule_fit(lowerer *L) {
    int32_t old = L->cap_nr, old2 = L->cap_sr;
    if (grow((void **)&L->node_rule, &L->cap_nr, L->b->n_nodes, sizeof(int32_t))) return -1;
    if (L->cap_nr > old) memset(L->node_rule + old, 0xff, (size_t)(L->cap_nr - old) * sizeof(int32_t));
    if (grow((void **)&L->star_rule, &L->cap_sr, L->b->n_nodes, sizeof(int32_t))) return -1;
    if (L->cap_sr > old2) memset(L->star_rule + old2, 0xff, (size_t)(L->cap_sr - old2) * sizeof(int32_t));
    return 0;
}

/* The helper rule whose body is node x (made once per node). */
static int helper_rule(lowerer *L, int x) {
    gr_builder *b = L->b;
    if (node_rule_fit(L)) { L->oom = 1; return -1; }
    if (L->node_rule[x] >= 0) return L->node_rule[x];
    int r = gb_rule(b, NULL);
    if (r < 0) { L->oom = 1; return -1; }
    gb_set_body(b, r, x);
    if (queue_rule(L, r)) { L->oom = 1; return -1; }
    L->node_rule[x] = r;
    return r;
}

static int elem_of(lowerer *L, int x) { /* a single element standing for node x */
    gr_node *n = &L->b->nodes[x];
    if (n->kind == GN_BYTES) return n->a;
    if (n->kind == GN_REF) return GR_REF(n->a);
    int r = helper_rule(L, x);
    return r < 0 ? GR_END : GR_REF(r);
}

/* 1 if node x may match the empty string (a rule reference counts as nullable: conservative). */
static int nullable(const gr_builder *b, int x, int depth) {
    const gr_node *n = &b->nodes[x];
    if (depth > 64) return 1;
    switch (n->kind) {
    case GN_BYTES: case GN_NEVER: return 0;
    case GN_SEQ:
        for (int i = 0; i < n->nkid; i++)
            if (!nullable(b, b->kids[n->kid + i], depth + 1)) return 0;
        return 1;
    case GN_ALT:
        for (int i = 0; i < n->nkid; i++)
            if (nullable(b, b->kids[n->kid + i], depth + 1)) return 1;
        return 0;
    case GN_REP: return n->a == 0 || nullable(b, b->kids[n->kid], depth + 1);
    default: return 1; /* EMPTY, REF */
    }
}

/* The counted rule of repetition node x (made once per node); -1 on failure. */
static int counted_rule(lowerer *L, int x) {
    gr_builder *b = L->b;
    if (node_rule_fit(L)) return -1;
    if (L->star_rule[x] >= 0) return L->star_rule[x];
    gr_node n = b->nodes[x];
    int r = gb_rule(b, NULL);
    if (r < 0 || grow((void **)&L->counted, &L->cap_counted, L->n_counted + 1, sizeof L->counted[0])) return -1;
    gb_set_body(b, r, b->kids[n.kid]);
    if (b->oom || queue_rule(L, r) || node_rule_fit(L)) return -1;
    L->counted[L->n_counted][0] = r; L->counted[L->n_counted][1] = n.a; L->counted[L->n_counted][2] = n.b;
    L->counted[L->n_counted][3] = b->json_char >= 0 && b->kids[n.kid] == b->json_char;
    L->n_counted++;
    L->star_rule[x] = r;
    return r;
}

/* Appends node x's elements to the current alternative; 1 if x can match nothing. */
static int lower_seq(lowerer *L, int x) {
    gr_builder *b = L->b;
    gr_node n = b->nodes[x];
    switch (n.kind) {
    case GN_EMPTY: return 0;
    case GN_NEVER: return 1;
    case GN_BYTES: return push_elem(L, n.a), 0;
    case GN_REF: return push_elem(L, GR_REF(n.a)), 0;
    case GN_SEQ:
        for (int i = 0; i < n.nkid; i++)
            if (lower_seq(L, b->kids[n.kid + i])) return 1;
        return 0;
    case GN_ALT: { int e = elem_of(L, x); return push_elem(L, e), 0; }
    case GN_REP: {
        int kid = b->kids[n.kid];
        if (b->nodes[kid].kind == GN_NEVER) return n.a > 0;
        if ((n.b == GR_INF ? n.a : n.b) > 4 && (n.b == GR_INF || n.b >= n.a) && !nullable(b, kid, 0)) { /* a counter */
            int r = counted_rule(L, x);
            if (r < 0) { L->oom = 1; return 1; }
            push_elem(L, GR_REF(r));
            return 0;
        }
        int e = elem_of(L, kid);
        if (e == GR_END || node_rule_fit(L)) { L->oom = 1; return 1; }
        for (int i = 0; i < n.a; i++) push_elem(L, e);
        if (n.b == n.a) return 0;
        int tail;
        if (n.b == GR_INF) { /* S ::= X S | ε, one rule per repetition node */
            if (L->star_rule[x] < 0) {
                int s = gb_rule(b, NULL);
                int xe = e >= 0 ? gb_bytes(b, &b->sets[e]) : gb_ref(b, GR_REF_RULE(e)); /* X as one element */
                tail = gb_alt2(b, gb_seq2(b, xe, gb_ref(b, s)), gb_empty(b));
                gb_set_body(b, s, tail);
                if (b->oom || queue_rule(L, s) || node_rule_fit(L)) { L->oom = 1; return 1; }
                L->star_rule[x] = s;
            }
            push_elem(L, GR_REF(L->star_rule[x]));
            return 0;
        }
        tail = gb_empty(b); /* O_k ::= X O_{k-1} | ε */
        int xe = e >= 0 ? gb_bytes(b, &b->sets[e]) : gb_ref(b, GR_REF_RULE(e));
        for (int k = 0; k < n.b - n.a; k++) tail = gb_alt2(b, gb_seq2(b, xe, tail), gb_empty(b));
        if (b->oom) { L->oom = 1; return 1; }
        push_elem(L, elem_of(L, tail));
        return 0;
    }
    }
    return 1;
}

static int lower_rule(lowerer *L, int r) {
    gr_builder *b = L->b;
    gr_grammar *g = L->g;
    int body = b->rule_body[r];
    g->alt_start[r] = g->n_alts;
    g->alt_count[r] = 0;
    if (body < 0) return 0;
    const gr_node *n = &b->nodes[body];
    int nalt = n->kind == GN_ALT ? n->nkid : 1;
    for (int i = 0; i < nalt; i++) {
        int x = n->kind == GN_ALT ? b->kids[n->kid + i] : body;
        int32_t mark = g->n_elems;
        if (lower_seq(L, x)) { g->n_elems = mark; n = &b->nodes[body]; continue; }
        n = &b->nodes[body]; /* lower_seq may move the node array */
        push_elem(L, GR_END);
        if (grow((void **)&g->alts, &L->cap_alts, g->n_alts + 1, sizeof(int32_t))) { L->oom = 1; return -1; }
        g->alts[g->n_alts++] = mark;
        g->alt_count[r]++;
    }
    return L->oom ? -1 : 0;
}

void gr_grammar_free(gr_grammar *g) {
    if (!g) return;
    free(g->sets); free(g->elems); free(g->alt_start); free(g->alt_count); free(g->alts); free(g->rep_lo); free(g->rep_hi); free(g->rep_json);
    free(g);
}

void gr_grammar_size(const gr_grammar *g, int *n_rules, int *n_elems) {
    *n_rules = g ? g->n_rules : 0;
    *n_elems = g ? g->n_elems : 0;
}

ig_status gb_finish(gr_builder *b, int root, gr_grammar **out, ig_err *err) {
    *out = NULL;
    if (b->oom || root < 0) return ig_fail(err, IG_ERR_UNSUPPORTED, "grammar too large (or out of memory)");
    for (int i = 0; i < b->n_rules; i++)
        if (b->rule_body[i] == -1)
            return ig_fail(err, IG_ERR_FORMAT, "grammar: rule '%s' is used but not defined",
                           b->rule_names[i] ? b->rule_names[i] : "?");
    lowerer L = {.b = b};
    gr_grammar *g = calloc(1, sizeof *g);
    if (!g) return ig_fail(err, IG_ERR_NOMEM, "grammar: out of memory");
    L.g = g;
    L.nq = b->n_rules;
    L.cap_q = b->n_rules + 64;
    L.queue = malloc((size_t)L.cap_q * sizeof(int32_t));
    if (!L.queue) L.oom = 1;
    else for (int i = 0; i < b->n_rules; i++) L.queue[i] = i;
    int32_t cap_s = 0, cap_c = 0;
    for (int qi = 0; !L.oom && qi < L.nq; qi++) {
        int r = L.queue[qi];
        if (grow((void **)&g->alt_start, &cap_s, b->n_rules, sizeof(int32_t)) ||
            grow((void **)&g->alt_count, &cap_c, b->n_rules, sizeof(int32_t))) { L.oom = 1; break; }
        if (lower_rule(&L, r)) break;
    }
    free(L.queue);
    free(L.node_rule);
    free(L.star_rule);
    if (!L.oom && L.n_counted) {
        g->rep_lo = malloc((size_t)b->n_rules * sizeof(int32_t));
        g->rep_hi = malloc((size_t)b->n_rules * sizeof(int32_t));
        g->rep_json = calloc((size_t)b->n_rules, 1);
        if (!g->rep_lo || !g->rep_hi || !g->rep_json) L.oom = 1;
        for (int i = 0; !L.oom && i < b->n_rules; i++) g->rep_lo[i] = g->rep_hi[i] = -1;
        for (int i = 0; !L.oom && i < L.n_counted; i++) {
            g->rep_lo[L.counted[i][0]] = L.counted[i][1];
            g->rep_hi[L.counted[i][0]] = L.counted[i][2];
            g->rep_json[L.counted[i][0]] = (int8_t)L.counted[i][3];
        }
        g->n_counted = L.n_counted;
    }
    free(L.counted);
    if (L.oom) { gr_grammar_free(g); return ig_fail(err, IG_ERR_UNSUPPORTED, "grammar too large (or out of memory)"); }
    g->n_rules = b->n_rules;
    g->root = root;
    g->n_sets = b->n_sets;
    g->sets = malloc((size_t)(b->n_sets ? b->n_sets : 1) * sizeof(gr_bset));
    if (!g->sets) { gr_grammar_free(g); return ig_fail(err, IG_ERR_NOMEM, "grammar: out of memory"); }
    if (b->n_sets) memcpy(g->sets, b->sets, (size_t)b->n_sets * sizeof(gr_bset));
    *out = g;
    return IG_OK;
}

ig_status gr_compile(gr_kind kind, const char *text, size_t len, gr_grammar **out, ig_err *err) {
    *out = NULL;
    gr_builder b;
    gb_init(&b);
    int root = -1;
    ig_status st;
    switch (kind) {
    case GR_JSON_SCHEMA: st = gr_schema_build(&b, text, len, 0, &root, err); break;
    case GR_JSON: st = gr_schema_build(&b, NULL, 0, 1, &root, err); break;
    case GR_GBNF: st = gr_gbnf_build(&b, text, len, &root, err); break;
    case GR_REGEX: {
        int node = gr_regex_build(&b, text, len, 0, 0, err, &st);
        if (node >= 0) { root = gb_rule(&b, "root"); gb_set_body(&b, root, node); }
        break;
    }
    default: st = ig_fail(err, IG_ERR_INVALID, "grammar: unknown constraint kind %d", (int)kind);
    }
    if (!st) st = gb_finish(&b, root, out, err);
    gb_free(&b);
    return st;
}
