/* tok_regex.c — a small backtracking regex engine over Unicode code points, enough for the
 * pre-tokenizer patterns of real tokenizers (GPT-2, Llama 3, Qwen2/3, DeepSeek, ...).
 *
 * The pattern is parsed into an AST, then compiled to a program for a backtracking VM (the
 * re1 "backtrack" design): SPLIT instructions push the alternative onto an explicit stack, so
 * the first path that reaches MATCH wins, which gives the leftmost-first semantics Oniguruma
 * (HF tokenizers' engine) has. Lookahead runs a nested VM at the current position.
 * Counted repeats are expanded by copying the body. Loops whose body can match the empty string
 * are rejected at compile time (they would spin in a backtracker).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* ---- character classes ------------------------------------------------------------------ */

enum { CI_RANGE, CI_CATS, CI_NCATS, CI_SPACE, CI_NSPACE };
typedef struct citem {
    uint8_t kind;     /* CI_* */
    uint32_t lo, hi;  /* CI_RANGE: inclusive code point range; CI_CATS/NCATS: lo = category mask */
} citem;

typedef struct rclass {
    uint64_t ascii[2]; /* precomputed membership (after negation and case folding) for cp < 128 */
    citem *items;
    int n, cap;
    int neg, icase;
} rclass;

static int citem_has(const citem *it, uint32_t c) {
    switch (it->kind) {
    case CI_RANGE: return c >= it->lo && c <= it->hi;
    case CI_CATS: return (it->lo >> tok_ucat(c)) & 1;
    case CI_NCATS: return !((it->lo >> tok_ucat(c)) & 1);
    case CI_SPACE: return tok_uspace(c);
    case CI_NSPACE: return !tok_uspace(c);
    }
    return 0;
}

static int class_raw(const rclass *cl, uint32_t c) {
    for (int i = 0; i < cl->n; i++)
        if (citem_has(&cl->items[i], c)) return 1;
    return 0;
}

static int class_slow(const rclass *cl, uint32_t c) {
    int in = class_raw(cl, c);
    if (!in && cl->icase) {
        uint32_t l = tok_ulower(c), u = tok_uupper(c);
        in = (l != c && class_raw(cl, l)) || (u != c && class_raw(cl, u));
    }
    return in != cl->neg;
}

static inline int class_has(const rclass *cl, uint32_t c) {
    if (c < 128) return (cl->ascii[c >> 6] >> (c & 63)) & 1;
    return class_slow(cl, c);
}

/* ---- AST ---------------------------------------------------------------------------------- */

enum { N_EMPTY, N_CHAR, N_ANY, N_CLASS, N_CAT, N_ALT, N_REP, N_BOL, N_EOL, N_BOT, N_EOT, N_WORDB,
       N_NWORDB, N_LOOK };
typedef struct rnode {
    int kind;
    uint32_t c;       /* N_CHAR: code point (case-folded when icase) */
    int icase;        /* N_CHAR */
    int cls;          /* N_CLASS: index into classes */
    int min, max;     /* N_REP: max -1 = unbounded */
    int greedy;       /* N_REP */
    int neg;          /* N_LOOK */
    int kid, next;    /* first child, next sibling (node indices, -1 = none) */
} rnode;

enum { OP_CHAR, OP_CHARI, OP_ANY, OP_CLASS, OP_SPLIT, OP_JMP, OP_MATCH, OP_BOL, OP_EOL, OP_BOT,
       OP_EOT, OP_WORDB, OP_NWORDB, OP_LOOK };
typedef struct rinst {
    uint8_t op;
    uint8_t neg;  /* OP_LOOK: negative lookahead */
    uint32_t c;   /* OP_CHAR(I): code point; OP_CLASS: class index */
    int32_t x, y; /* OP_SPLIT: preferred, alternative; OP_JMP: x; OP_LOOK: x = continuation */
} rinst;

struct tok_regex {
    rinst *prog;
    int nprog;
    rclass *classes;
    int nclasses;
};

typedef struct parser {
    const uint32_t *p;
    size_t n, i;
    rnode *nodes;
    int nn, ncap;
    rclass *classes;
    int nc, ccap;
    ig_err *err;
    ig_status st;
    const char *src;
    int flag_icase; /* set by a flag-only group (?i) for parse_concat */
} parser;

static int new_node(parser *ps, int kind) {
    if (ps->nn == ps->ncap) {
        int cap = ps->ncap ? ps->ncap * 2 : 64;
        rnode *nn = realloc(ps->nodes, (size_t)cap * sizeof *nn);
        if (!nn) { ps->st = IG_ERR_NOMEM; return -1; }
        ps->nodes = nn; ps->ncap = cap;
    }
    rnode *r = &ps->nodes[ps->nn];
    memset(r, 0, sizeof *r);
    r->kind = kind; r->kid = -1; r->next = -1;
    return ps->nn++;
}

static int new_class(parser *ps) {
    if (ps->nc == ps->ccap) {
        int cap = ps->ccap ? ps->ccap * 2 : 16;
        rclass *nc = realloc(ps->classes, (size_t)cap * sizeof *nc);
        if (!nc) { ps->st = IG_ERR_NOMEM; return -1; }
        ps->classes = nc; ps->ccap = cap;
    }
    memset(&ps->classes[ps->nc], 0, sizeof(rclass));
    return ps->nc++;
}

static int class_add(parser *ps, int ci, int kind, uint32_t lo, uint32_t hi) {
    rclass *cl = &ps->classes[ci];
    if (cl->n == cl->cap) {
        int cap = cl->cap ? cl->cap * 2 : 8;
        citem *ni = realloc(cl->items, (size_t)cap * sizeof *ni);
        if (!ni) { ps->st = IG_ERR_NOMEM; return -1; }
        cl->items = ni; cl->cap = cap;
    }
    cl->items[cl->n].kind = (uint8_t)kind; cl->items[cl->n].lo = lo; cl->items[cl->n].hi = hi;
    cl->n++;
    return 0;
}

static void class_finish(rclass *cl) {
    cl->ascii[0] = cl->ascii[1] = 0;
    for (uint32_t c = 0; c < 128; c++)
        if (class_slow(cl, c)) cl->ascii[c >> 6] |= 1ull << (c & 63);
}

static int perr(parser *ps, ig_status st, const char *what) {
    if (ps->st == IG_OK) {
        ps->st = st;
        ig_fail(ps->err, st, "regex: %s at code point %zu of pattern \"%.200s\"", what, ps->i, ps->src);
    }
    return -1;
}

#define M(x) (1u << TOK_UC_##x)
#define MASK_L (M(Lu) | M(Ll) | M(Lt) | M(Lm) | M(Lo))
#define MASK_M (M(Mn) | M(Mc) | M(Me))
#define MASK_N (M(Nd) | M(Nl) | M(No))
#define MASK_P (M(Pc) | M(Pd) | M(Ps) | M(Pe) | M(Pi) | M(Pf) | M(Po))
#define MASK_S (M(Sm) | M(Sc) | M(Sk) | M(So))
#define MASK_Z (M(Zs) | M(Zl) | M(Zp))
#define MASK_C (M(Cc) | M(Cf) | M(Cs) | M(Co) | M(Cn))
#define MASK_W (MASK_L | MASK_M | M(Nd) | M(Pc))

static const struct { const char *name; uint32_t mask; } k_props[] = {
    {"L", MASK_L}, {"Letter", MASK_L}, {"Lu", M(Lu)}, {"Uppercase_Letter", M(Lu)},
    {"Ll", M(Ll)}, {"Lowercase_Letter", M(Ll)}, {"Lt", M(Lt)}, {"Lm", M(Lm)}, {"Lo", M(Lo)},
    {"LC", M(Lu) | M(Ll) | M(Lt)}, {"L&", M(Lu) | M(Ll) | M(Lt)},
    {"M", MASK_M}, {"Mark", MASK_M}, {"Mn", M(Mn)}, {"Mc", M(Mc)}, {"Me", M(Me)},
    {"N", MASK_N}, {"Number", MASK_N}, {"Nd", M(Nd)}, {"Nl", M(Nl)}, {"No", M(No)},
    {"P", MASK_P}, {"Punctuation", MASK_P}, {"Pc", M(Pc)}, {"Pd", M(Pd)}, {"Ps", M(Ps)},
    {"Pe", M(Pe)}, {"Pi", M(Pi)}, {"Pf", M(Pf)}, {"Po", M(Po)},
    {"S", MASK_S}, {"Symbol", MASK_S}, {"Sm", M(Sm)}, {"Sc", M(Sc)}, {"Sk", M(Sk)}, {"So", M(So)},
    {"Z", MASK_Z}, {"Separator", MASK_Z}, {"Zs", M(Zs)}, {"Zl", M(Zl)}, {"Zp", M(Zp)},
    {"C", MASK_C}, {"Other", MASK_C}, {"Cc", M(Cc)}, {"Cf", M(Cf)}, {"Cs", M(Cs)}, {"Co", M(Co)},
    {"Cn", M(Cn)},
};

static int eat(parser *ps, uint32_t c) {
    if (ps->i < ps->n && ps->p[ps->i] == c) { ps->i++; return 1; }
    return 0;
}

static int hexval(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* Parses \p{..} / \pX after the 'p'/'P'; returns the category mask or 0 on error. */
static uint32_t parse_prop(parser *ps) {
    char name[64];
    size_t k = 0;
    if (eat(ps, '{')) {
        int neg = eat(ps, '^');
        while (ps->i < ps->n && ps->p[ps->i] != '}' && k < sizeof name - 1) {
            uint32_t c = ps->p[ps->i++];
            if (c != ' ' && c != '_' && c != '-') name[k++] = (char)c; /* loose matching */
            else if (c == '_') name[k++] = '_';
        }
        if (!eat(ps, '}')) { perr(ps, IG_ERR_FORMAT, "unterminated \\p{"); return 0; }
        name[k] = 0;
        if (neg) { perr(ps, IG_ERR_UNSUPPORTED, "\\p{^..} not supported"); return 0; }
    } else if (ps->i < ps->n) {
        name[0] = (char)ps->p[ps->i++]; name[1] = 0;
    } else {
        perr(ps, IG_ERR_FORMAT, "dangling \\p"); return 0;
    }
    for (size_t j = 0; j < sizeof k_props / sizeof k_props[0]; j++)
        if (!strcmp(k_props[j].name, name)) return k_props[j].mask;
    if (ps->st == IG_OK) {
        ps->st = IG_ERR_UNSUPPORTED;
        ig_fail(ps->err, IG_ERR_UNSUPPORTED, "regex: unsupported Unicode property \\p{%s} in pattern \"%.200s\"",
                name, ps->src);
    }
    return 0;
}

/* Parses an escape after '\'. Either yields a literal (*lit, returns 1) or adds items to class ci
 * (returns 2); -1 on error. */
static int parse_escape(parser *ps, int ci, uint32_t *lit) {
    if (ps->i >= ps->n) return perr(ps, IG_ERR_FORMAT, "trailing backslash");
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case 'n': *lit = '\n'; return 1;
    case 'r': *lit = '\r'; return 1;
    case 't': *lit = '\t'; return 1;
    case 'f': *lit = '\f'; return 1;
    case 'v': *lit = '\v'; return 1;
    case 'a': *lit = 7; return 1;
    case 'e': *lit = 27; return 1;
    case '0': *lit = 0; return 1;
    case 'x': case 'u': {
        uint32_t v = 0;
        if (c == 'x' && eat(ps, '{')) {
            int d, k = 0;
            while (ps->i < ps->n && (d = hexval(ps->p[ps->i])) >= 0) { v = v * 16 + (uint32_t)d; ps->i++; k++; }
            if (!k || !eat(ps, '}')) return perr(ps, IG_ERR_FORMAT, "bad \\x{..}");
        } else {
            int want = c == 'x' ? 2 : 4;
            for (int k = 0; k < want; k++) {
                int d = ps->i < ps->n ? hexval(ps->p[ps->i]) : -1;
                if (d < 0) return perr(ps, IG_ERR_FORMAT, "bad hex escape");
                v = v * 16 + (uint32_t)d; ps->i++;
            }
        }
        *lit = v;
        return 1;
    }
    case 's': return class_add(ps, ci, CI_SPACE, 0, 0) < 0 ? -1 : 2;
    case 'S': return class_add(ps, ci, CI_NSPACE, 0, 0) < 0 ? -1 : 2;
    case 'd': return class_add(ps, ci, CI_CATS, M(Nd), 0) < 0 ? -1 : 2;
    case 'D': return class_add(ps, ci, CI_NCATS, M(Nd), 0) < 0 ? -1 : 2;
    case 'w': return class_add(ps, ci, CI_CATS, MASK_W, 0) < 0 ? -1 : 2;
    case 'W': return class_add(ps, ci, CI_NCATS, MASK_W, 0) < 0 ? -1 : 2;
    case 'h': return class_add(ps, ci, CI_RANGE, '0', '9') < 0 || class_add(ps, ci, CI_RANGE, 'a', 'f') < 0 ||
                     class_add(ps, ci, CI_RANGE, 'A', 'F') < 0 ? -1 : 2;
    case 'p': case 'P': {
        uint32_t m = parse_prop(ps);
        if (!m) return -1;
        return class_add(ps, ci, c == 'p' ? CI_CATS : CI_NCATS, m, 0) < 0 ? -1 : 2;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
            return perr(ps, IG_ERR_UNSUPPORTED, "unsupported escape");
        *lit = c;
        return 1;
    }
}

static int parse_alt(parser *ps, int icase);

static int parse_class(parser *ps, int icase) {
    int ci = new_class(ps);
    if (ci < 0) return -1;
    ps->classes[ci].icase = icase;
    if (eat(ps, '^')) ps->classes[ci].neg = 1;
    int first = 1;
    for (;;) {
        if (ps->i >= ps->n) return perr(ps, IG_ERR_FORMAT, "unterminated character class");
        uint32_t c = ps->p[ps->i];
        if (c == ']' && !first) { ps->i++; break; }
        first = 0;
        if (c == '[') {
            if (ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':')
                return perr(ps, IG_ERR_UNSUPPORTED, "POSIX bracket expressions not supported");
            return perr(ps, IG_ERR_UNSUPPORTED, "nested character classes not supported");
        }
        uint32_t lo;
        ps->i++;
        if (c == '\\') {
            int r = parse_escape(ps, ci, &lo);
            if (r < 0) return -1;
            if (r == 2) continue;
        } else {
            lo = c;
        }
        uint32_t hi = lo;
        if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            ps->i++;
            uint32_t c2 = ps->p[ps->i++];
            if (c2 == '\\') {
                int r = parse_escape(ps, ci, &hi);
                if (r < 0) return -1;
                if (r == 2) return perr(ps, IG_ERR_FORMAT, "class escape as range end");
            } else {
                hi = c2;
            }
            if (hi < lo) return perr(ps, IG_ERR_FORMAT, "character range out of order");
        }
        if (class_add(ps, ci, CI_RANGE, lo, hi) < 0) return -1;
    }
    int nd = new_node(ps, N_CLASS);
    if (nd >= 0) ps->nodes[nd].cls = ci;
    return nd;
}

static int class_node_from_escape(parser *ps, int icase, uint32_t *lit, int *is_lit) {
    int ci = new_class(ps);
    if (ci < 0) return -1;
    ps->classes[ci].icase = icase;
    int r = parse_escape(ps, ci, lit);
    if (r < 0) return -1;
    if (r == 1) { ps->nc--; *is_lit = 1; return 0; }
    *is_lit = 0;
    int nd = new_node(ps, N_CLASS);
    if (nd >= 0) ps->nodes[nd].cls = ci;
    return nd;
}

static int char_node(parser *ps, uint32_t c, int icase) {
    int nd = new_node(ps, N_CHAR);
    if (nd < 0) return -1;
    if (icase && tok_ulower(c) == c && tok_uupper(c) == c) icase = 0;
    ps->nodes[nd].icase = icase;
    ps->nodes[nd].c = icase ? tok_ulower(c) : c;
    return nd;
}

static int parse_int(parser *ps, int *v) {
    size_t s = ps->i;
    long x = 0;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        x = x * 10 + (long)(ps->p[ps->i++] - '0');
        if (x > 1000) return perr(ps, IG_ERR_UNSUPPORTED, "repeat count over 1000");
    }
    *v = (int)x;
    return ps->i > s ? 1 : 0;
}

static int parse_atom(parser *ps, int icase) {
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case '(': {
        int sub_icase = icase, kind = -1, neg = 0;
        if (eat(ps, '?')) {
            if (eat(ps, ':')) {
            } else if (eat(ps, '=')) { kind = N_LOOK; }
            else if (eat(ps, '!')) { kind = N_LOOK; neg = 1; }
            else if (ps->i < ps->n && ps->p[ps->i] == '<' && ps->i + 1 < ps->n &&
                     (ps->p[ps->i + 1] == '=' || ps->p[ps->i + 1] == '!'))
                return perr(ps, IG_ERR_UNSUPPORTED, "lookbehind not supported");
            else if (eat(ps, '<') || eat(ps, 'P')) { /* named group: (?<name>..) / (?P<name>..) */
                if (ps->p[ps->i - 1] == 'P' && !eat(ps, '<')) return perr(ps, IG_ERR_UNSUPPORTED, "unsupported (?P");
                while (ps->i < ps->n && ps->p[ps->i] != '>') ps->i++;
                if (!eat(ps, '>')) return perr(ps, IG_ERR_FORMAT, "unterminated group name");
            } else {
                /* inline flags: (?i) (?i:..) (?-i:..) */
                int on = 1, seen = 0;
                while (ps->i < ps->n && ps->p[ps->i] != ':' && ps->p[ps->i] != ')') {
                    uint32_t f = ps->p[ps->i++];
                    if (f == '-') on = 0;
                    else if (f == 'i') { sub_icase = on; seen = 1; }
                    else return perr(ps, IG_ERR_UNSUPPORTED, "unsupported inline flag");
                }
                if (!seen && !(ps->i < ps->n)) return perr(ps, IG_ERR_FORMAT, "bad group");
                if (eat(ps, ')')) { ps->flag_icase = sub_icase; return -2; } /* flag-only group */
                if (!eat(ps, ':')) return perr(ps, IG_ERR_FORMAT, "bad group");
            }
        }
        int inner = parse_alt(ps, sub_icase);
        if (inner < 0) return -1;
        if (!eat(ps, ')')) return perr(ps, IG_ERR_FORMAT, "missing )");
        if (kind == N_LOOK) {
            int nd = new_node(ps, N_LOOK);
            if (nd < 0) return -1;
            ps->nodes[nd].kid = inner; ps->nodes[nd].neg = neg;
            return nd;
        }
        return inner;
    }
    case '[': return parse_class(ps, icase);
    case '.': return new_node(ps, N_ANY);
    case '^': return new_node(ps, N_BOL);
    case '$': return new_node(ps, N_EOL);
    case '\\': {
        if (ps->i < ps->n) {
            uint32_t e = ps->p[ps->i];
            int k = e == 'A' ? N_BOT : e == 'z' ? N_EOT : e == 'b' ? N_WORDB : e == 'B' ? N_NWORDB : -1;
            if (k >= 0) { ps->i++; return new_node(ps, k); }
        }
        uint32_t lit = 0;
        int is_lit = 0;
        int nd = class_node_from_escape(ps, icase, &lit, &is_lit);
        if (nd < 0) return -1;
        if (is_lit) return char_node(ps, lit, icase);
        return nd;
    }
    case '*': case '+': case '?': case '{':
        if (c == '{') { ps->i--; break; }
        ps->i--;
        return perr(ps, IG_ERR_FORMAT, "quantifier without operand");
    case ')': case '|':
        ps->i--;
        return perr(ps, IG_ERR_INTERNAL, "unexpected");
    default: break;
    }
    if (c == '{') ps->i++;
    return char_node(ps, c, icase);
}

static int parse_concat(parser *ps, int *icase) {
    int first = -1, last = -1;
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        int a = parse_atom(ps, *icase);
        if (a == -2) { /* (?i) flag group: applies to the rest of the enclosing group */
            *icase = ps->flag_icase;
            continue;
        }
        if (a < 0) return -1;
        /* quantifiers */
        for (;;) {
            if (ps->i >= ps->n) break;
            uint32_t q = ps->p[ps->i];
            int mn, mx;
            if (q == '*') { mn = 0; mx = -1; ps->i++; }
            else if (q == '+') { mn = 1; mx = -1; ps->i++; }
            else if (q == '?') { mn = 0; mx = 1; ps->i++; }
            else if (q == '{') {
                size_t save = ps->i;
                ps->i++;
                if (parse_int(ps, &mn) <= 0) { ps->i = save; break; }
                if (eat(ps, ',')) {
                    int r = parse_int(ps, &mx);
                    if (r < 0) return -1;
                    if (r == 0) mx = -1;
                } else {
                    mx = mn;
                }
                if (!eat(ps, '}')) { ps->i = save; break; }
                if (mx >= 0 && mx < mn) return perr(ps, IG_ERR_FORMAT, "bad repeat range");
            } else break;
            int greedy = 1;
            if (eat(ps, '?')) greedy = 0;
            else if (ps->i < ps->n && ps->p[ps->i] == '+')
                return perr(ps, IG_ERR_UNSUPPORTED, "possessive quantifier not supported");
            int r = new_node(ps, N_REP);
            if (r < 0) return -1;
            ps->nodes[r].kid = a; ps->nodes[r].min = mn; ps->nodes[r].max = mx; ps->nodes[r].greedy = greedy;
            a = r;
        }
        if (first < 0) first = a; else ps->nodes[last].next = a;
        last = a;
    }
    int nd = new_node(ps, N_CAT);
    if (nd < 0) return -1;
    ps->nodes[nd].kid = first;
    return nd;
}

static int parse_alt(parser *ps, int icase) {
    int ic = icase;
    int first = parse_concat(ps, &ic);
    if (first < 0) return -1;
    if (ps->i >= ps->n || ps->p[ps->i] != '|') return first;
    int last = first;
    while (eat(ps, '|')) {
        int b = parse_concat(ps, &ic);
        if (b < 0) return -1;
        ps->nodes[last].next = b;
        last = b;
    }
    int nd = new_node(ps, N_ALT);
    if (nd < 0) return -1;
    ps->nodes[nd].kid = first;
    return nd;
}

/* ---- compile ------------------------------------------------------------------------------ */

typedef struct emitter {
    rinst *prog;
    int n, cap;
    int oom;
} emitter;

static int emit(emitter *e, int op) {
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 64;
        rinst *np = realloc(e->prog, (size_t)cap * sizeof *np);
        if (!np) { e->oom = 1; return 0; }
        e->prog = np; e->cap = cap;
    }
    memset(&e->prog[e->n], 0, sizeof(rinst));
    e->prog[e->n].op = (uint8_t)op;
    return e->n++;
}

static int nullable(const parser *ps, int nd) {
    const rnode *r = &ps->nodes[nd];
    switch (r->kind) {
    case N_CHAR: case N_ANY: case N_CLASS: return 0;
    case N_CAT:
        for (int k = r->kid; k >= 0; k = ps->nodes[k].next)
            if (!nullable(ps, k)) return 0;
        return 1;
    case N_ALT:
        for (int k = r->kid; k >= 0; k = ps->nodes[k].next)
            if (nullable(ps, k)) return 1;
        return 0;
    case N_REP: return r->min == 0 || nullable(ps, r->kid);
    default: return 1;
    }
}

static int gen(parser *ps, emitter *e, int nd);

static int gen_opt(parser *ps, emitter *e, int kid, int greedy) {
    int s = emit(e, OP_SPLIT);
    if (e->oom) return -1;
    if (gen(ps, e, kid) < 0) return -1;
    e->prog[s].x = greedy ? s + 1 : e->n;
    e->prog[s].y = greedy ? e->n : s + 1;
    return 0;
}

static int gen(parser *ps, emitter *e, int nd) {
    const rnode r = ps->nodes[nd];
    int i;
    switch (r.kind) {
    case N_EMPTY: break;
    case N_CHAR:
        i = emit(e, r.icase ? OP_CHARI : OP_CHAR);
        if (!e->oom) e->prog[i].c = r.c;
        break;
    case N_ANY: emit(e, OP_ANY); break;
    case N_CLASS:
        i = emit(e, OP_CLASS);
        if (!e->oom) e->prog[i].c = (uint32_t)r.cls;
        break;
    case N_BOL: emit(e, OP_BOL); break;
    case N_EOL: emit(e, OP_EOL); break;
    case N_BOT: emit(e, OP_BOT); break;
    case N_EOT: emit(e, OP_EOT); break;
    case N_WORDB: emit(e, OP_WORDB); break;
    case N_NWORDB: emit(e, OP_NWORDB); break;
    case N_CAT:
        for (int k = r.kid; k >= 0; k = ps->nodes[k].next)
            if (gen(ps, e, k) < 0) return -1;
        break;
    case N_ALT: {
        int jumps[256], nj = 0;
        for (int k = r.kid; k >= 0; k = ps->nodes[k].next) {
            if (ps->nodes[k].next >= 0) {
                int s = emit(e, OP_SPLIT);
                if (e->oom) return -1;
                if (gen(ps, e, k) < 0) return -1;
                if (nj == 256) return perr(ps, IG_ERR_UNSUPPORTED, "more than 256 alternatives");
                jumps[nj++] = emit(e, OP_JMP);
                if (e->oom) return -1;
                e->prog[s].x = s + 1;
                e->prog[s].y = e->n;
            } else if (gen(ps, e, k) < 0) {
                return -1;
            }
        }
        for (int j = 0; j < nj; j++) e->prog[jumps[j]].x = e->n;
        break;
    }
    case N_REP: {
        if (r.max < 0 && nullable(ps, r.kid))
            return perr(ps, IG_ERR_UNSUPPORTED, "unbounded repeat of an empty-matching expression");
        for (int k = 0; k < r.min; k++)
            if (gen(ps, e, r.kid) < 0) return -1;
        if (r.max < 0) {
            int s = emit(e, OP_SPLIT);
            if (e->oom) return -1;
            if (gen(ps, e, r.kid) < 0) return -1;
            int j = emit(e, OP_JMP);
            if (e->oom) return -1;
            e->prog[j].x = s;
            e->prog[s].x = r.greedy ? s + 1 : e->n;
            e->prog[s].y = r.greedy ? e->n : s + 1;
        } else {
            for (int k = r.min; k < r.max; k++)
                if (gen_opt(ps, e, r.kid, r.greedy) < 0) return -1;
        }
        break;
    }
    case N_LOOK: {
        i = emit(e, OP_LOOK);
        if (e->oom) return -1;
        e->prog[i].neg = (uint8_t)r.neg;
        if (gen(ps, e, r.kid) < 0) return -1;
        emit(e, OP_MATCH);
        if (e->oom) return -1;
        e->prog[i].x = e->n;
        break;
    }
    }
    if (e->oom) return -1;
    if (e->n > 200000) return perr(ps, IG_ERR_UNSUPPORTED, "pattern too large");
    return 0;
}

ig_status tok_regex_compile(const char *pattern, size_t len, tok_regex **out, ig_err *err) {
    *out = NULL;
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) return ig_fail(err, IG_ERR_NOMEM, "regex: out of memory");
    char *src = malloc(len + 1);
    if (!src) { free(cps); return ig_fail(err, IG_ERR_NOMEM, "regex: out of memory"); }
    memcpy(src, pattern, len);
    src[len] = 0;
    parser ps = {0};
    ps.p = cps;
    ps.n = tok_utf8_decode(pattern, len, cps, NULL);
    ps.err = err;
    ps.src = src;
    emitter e = {0};
    int root = parse_alt(&ps, 0);
    if (root >= 0 && ps.i < ps.n) perr(&ps, IG_ERR_FORMAT, "unbalanced )");
    if (root >= 0 && ps.st == IG_OK) {
        gen(&ps, &e, root);
        emit(&e, OP_MATCH);
        if (e.oom && ps.st == IG_OK) ps.st = ig_fail(err, IG_ERR_NOMEM, "regex: out of memory");
    } else if (ps.st == IG_OK) {
        ps.st = ig_fail(err, IG_ERR_NOMEM, "regex: out of memory");
    }
    ig_status st = ps.st;
    free(cps);
    free(src);
    free(ps.nodes);
    tok_regex *re = NULL;
    if (st == IG_OK) {
        re = calloc(1, sizeof *re);
        if (!re) st = ig_fail(err, IG_ERR_NOMEM, "regex: out of memory");
    }
    if (st != IG_OK) {
        free(e.prog);
        for (int k = 0; k < ps.nc; k++) free(ps.classes[k].items);
        free(ps.classes);
        return st;
    }
    for (int k = 0; k < ps.nc; k++) class_finish(&ps.classes[k]);
    re->prog = e.prog; re->nprog = e.n;
    re->classes = ps.classes; re->nclasses = ps.nc;
    *out = re;
    return IG_OK;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
    for (int k = 0; k < re->nclasses; k++) free(re->classes[k].items);
    free(re->classes);
    free(re->prog);
    free(re);
}

/* ---- match -------------------------------------------------------------------------------- */

typedef struct bt { int32_t pc; uint32_t sp; } bt;

static int is_word(uint32_t c) {
    if (c < 128) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    return (MASK_W >> tok_ucat(c)) & 1;
}

/* Backtracking without exponential time: the outcome of a state (pc, sp) does not depend on the
 * path to it (no captures, no backreferences), so once a SPLIT state has been expanded and the
 * search came back to it, it failed and fails again. The memo of expanded SPLIT states (a bitset
 * over pc x sp, sp counted from the search's start) is made only when a search has taken more
 * than MEMO_AFTER steps, so ordinary pre-tokenizer matches never pay for it; results are the
 * same with or without it. Lookahead bodies run without the memo (their own success would be
 * misread as failure) under LOOK_STEPS steps per search. */
#define MEMO_AFTER 4096
#define LOOK_STEPS 20000000ull

typedef struct memo {
    uint8_t *bits;   /* NULL until MEMO_AFTER steps */
    size_t base, width; /* sp - base in [0, width) */
    uint64_t steps, look_steps;
} memo;

/* 1 when (pc, sp) was already expanded (and marks it); -1 when the memo cannot be made. */
static int memo_seen(const tok_regex *re, memo *m, int pc, size_t sp) {
    if (!m->bits) {
        if (++m->steps < MEMO_AFTER) return 0;
        m->bits = calloc(((size_t)re->nprog * m->width + 7) / 8, 1);
        if (!m->bits) return -1;
    }
    size_t k = (size_t)pc * m->width + (sp - m->base);
    if (m->bits[k >> 3] & (1u << (k & 7))) return 1;
    m->bits[k >> 3] |= (uint8_t)(1u << (k & 7));
    return 0;
}

/* Runs the VM from pc at sp; returns 1 with *end on match, 0 on no match, -1 on OOM or when a
 * lookahead ran past its step budget. m: the search's memo, NULL inside lookahead bodies
 * (which count steps in *look). */
static int run(const tok_regex *re, const uint32_t *cps, size_t n, int pc0, size_t sp0, size_t *end, memo *m,
               uint64_t *look) {
    bt local[256];
    bt *stk = local;
    size_t cap = 256, top = 0;
    int result = 0;
    stk[top].pc = pc0; stk[top].sp = (uint32_t)sp0; top++;
    while (top) {
        top--;
        int pc = stk[top].pc;
        size_t sp = stk[top].sp;
        for (;;) {
            const rinst *in = &re->prog[pc];
            switch (in->op) {
            case OP_CHAR:
                if (sp < n && cps[sp] == in->c) { pc++; sp++; continue; }
                goto fail;
            case OP_CHARI:
                if (sp < n && (cps[sp] == in->c || tok_ulower(cps[sp]) == in->c)) { pc++; sp++; continue; }
                goto fail;
            case OP_ANY:
                if (sp < n && cps[sp] != '\n') { pc++; sp++; continue; }
                goto fail;
            case OP_CLASS:
                if (sp < n && class_has(&re->classes[in->c], cps[sp])) { pc++; sp++; continue; }
                goto fail;
            case OP_JMP: pc = in->x; continue;
            case OP_SPLIT:
                if (m) {
                    int seen = memo_seen(re, m, pc, sp);
                    if (seen < 0) { result = -1; goto done; }
                    if (seen) goto fail;
                } else if (++*look > LOOK_STEPS) {
                    result = -1;
                    goto done;
                }
                if (top == cap) {
                    size_t ncap = cap * 2;
                    bt *ns = stk == local ? malloc(ncap * sizeof *ns) : realloc(stk, ncap * sizeof *ns);
                    if (!ns) { result = -1; goto done; }
                    if (stk == local) memcpy(ns, local, sizeof local);
                    stk = ns; cap = ncap;
                }
                stk[top].pc = in->y; stk[top].sp = (uint32_t)sp; top++;
                pc = in->x;
                continue;
            case OP_MATCH: *end = sp; result = 1; goto done;
            case OP_BOL:
                if (sp == 0 || cps[sp - 1] == '\n') { pc++; continue; }
                goto fail;
            case OP_EOL:
                if (sp == n || cps[sp] == '\n') { pc++; continue; }
                goto fail;
            case OP_BOT: if (sp == 0) { pc++; continue; } goto fail;
            case OP_EOT: if (sp == n) { pc++; continue; } goto fail;
            case OP_WORDB: case OP_NWORDB: {
                int a = sp > 0 && is_word(cps[sp - 1]), b = sp < n && is_word(cps[sp]);
                if ((a != b) == (in->op == OP_WORDB)) { pc++; continue; }
                goto fail;
            }
            case OP_LOOK: {
                size_t e2;
                int r = run(re, cps, n, pc + 1, sp, &e2, NULL, look);
                if (r < 0) { result = -1; goto done; }
                if (r != in->neg) { pc = in->x; continue; }
                goto fail;
            }
            }
        fail:
            break;
        }
    }
done:
    if (stk != local) free(stk);
    return result;
}

int tok_regex_search(const tok_regex *re, const uint32_t *cps, size_t n, size_t start, size_t *ms,
                     size_t *me) {
    /* Cheap first-instruction filter: when the program starts with a CHAR or CLASS (no SPLIT),
     * skip start positions it rejects. */
    const rinst *p0 = &re->prog[0];
    memo mo = {.base = start, .width = n - start + 1};
    for (size_t s = start; s <= n; s++) {
        if (p0->op == OP_CLASS) {
            if (s == n) break;
            if (!class_has(&re->classes[p0->c], cps[s])) continue;
        } else if (p0->op == OP_CHAR) {
            if (s == n) break;
            if (cps[s] != p0->c) continue;
        }
        size_t e;
        int r = run(re, cps, n, 0, s, &e, &mo, &mo.look_steps);
        if (r) {
            free(mo.bits);
            if (r < 0) return -1;
            *ms = s; *me = e;
            return 1;
        }
    }
    free(mo.bits);
    return 0;
}
