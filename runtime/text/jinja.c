/* jinja.c — the chat-template interpreter: lexer, parser, values and tree-walking renderer.
 *
 * Memory: the compiled tree lives in one arena owned by the ct_template; every render allocates
 * its values, frames and output in its own arena, freed at the end. Because nothing inside a
 * render or a compile is malloc'd outside an arena, errors unwind with longjmp to the entry point
 * (as Lua does) instead of threading a status through every expression evaluator.
 */
#include "chat_template.h"
#include "pkg_file.h"

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------------------ arena */

typedef struct ar_chunk {
    struct ar_chunk *next;
    size_t used, cap; /* bytes */
} ar_chunk;

#define AR_HDR ((sizeof(ar_chunk) + 15) & ~(size_t)15)

typedef struct arena {
    ar_chunk *head;
    size_t total, limit; /* bytes taken from malloc; 0: no limit */
    int over;            /* an allocation was refused by the limit */
} arena;

static void *ar_alloc(arena *a, size_t n) {
    if (n > ((size_t)1 << 40)) return NULL;
    n = (n + 15) & ~(size_t)15;
    ar_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->limit && a->total + AR_HDR + cap > a->limit) {
            a->over = 1;
            return NULL;
        }
        a->total += AR_HDR + cap;
        c = malloc(AR_HDR + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        if (a->head && n > 32768) { /* keep bump-allocating from the current chunk */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = (char *)c + AR_HDR + c->used;
    c->used += n;
    return p;
}

static void ar_release(arena *a) {
    for (ar_chunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ------------------------------------------------------------------------------- errors */

typedef struct jerr {
    jmp_buf jb;
    ig_err *err;
    ig_status st;
    arena *ar;
    int line;       /* template line being parsed or run, for messages without one */
    uint64_t steps; /* expressions evaluated and statements run (JINJA_MAX_STEPS) */
    int depth;      /* parser recursion (JINJA_MAX_DEPTH) */
} jerr;

/* Limits of one compile or render, so a hostile template (downloaded with a model) fails with a
 * message naming its line instead of running without bound: steps (each expression evaluated,
 * each statement run), memory of its values and output, and nesting of its expressions and
 * blocks (the parser and the evaluator recurse over them). Real chat templates use a few
 * thousand steps and kilobytes. */
#define JINJA_MAX_STEPS 20000000ull
#define JINJA_MAX_BYTES ((size_t)64 << 20)
#define JINJA_MAX_DEPTH 200
#define JINJA_MAX_EVAL_DEPTH 1000

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static _Noreturn void jfail(jerr *e, ig_status st, int line, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w >= (int)sizeof msg) { /* truncated: do not leave half a UTF-8 character */
        size_t k = sizeof msg - 1;
        while (k > 0 && ((unsigned char)msg[k - 1] & 0xC0) == 0x80) k--;
        if (k > 0 && ((unsigned char)msg[k - 1] & 0x80)) k--;
        msg[k] = 0;
    }
    if (line <= 0) line = e->line;
    if (line > 0)
        ig_fail(e->err, st, "chat template line %d: %s", line, msg);
    else
        ig_fail(e->err, st, "chat template: %s", msg);
    e->st = st;
    longjmp(e->jb, 1);
}

/* Fails for an allocation the arena refused. */
static _Noreturn void nomem(jerr *e) {
    if (e->ar->over)
        jfail(e, IG_ERR_INVALID, 0, "the template needs more than %zu MB of memory", JINJA_MAX_BYTES >> 20);
    jfail(e, IG_ERR_NOMEM, 0, "out of memory");
}

static void *jalloc(jerr *e, size_t n) {
    void *p = ar_alloc(e->ar, n ? n : 1);
    if (!p) nomem(e);
    memset(p, 0, n);
    return p;
}

static char *jstrdup(jerr *e, const char *s, size_t n) {
    char *p = ar_alloc(e->ar, n + 1);
    if (!p) nomem(e);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ------------------------------------------------------------------------------- values */

typedef enum jvt {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_LOOP,
    JV_MACRO, JV_FUNC
} jvt;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct js js;

typedef struct jv {
    jvt t;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p; /* UTF-8, not NUL-terminated; for JV_UNDEF the missing name or NULL */
            size_t n;      /* bytes */
        } s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        jloop *lp;
        const js *m;
        int fn; /* JV_FUNC: a BI_* id */
    } u;
} jv;

struct jlist {
    size_t n, cap;
    jv *v;
    int tuple; /* a Python tuple: prints as (a, b), unequal to a list */
};
struct jdict { /* insertion-ordered, as Python dicts */
    size_t n, cap;
    jv *k, *v;
};
struct jloop {
    const jlist *items;
    size_t i; /* current index0 */
};

static jv v_undef(const char *name) {
    jv v = {.t = JV_UNDEF};
    v.u.s.p = name;
    v.u.s.n = name ? strlen(name) : 0;
    return v;
}
static jv v_none(void) { return (jv){.t = JV_NONE}; }
static jv v_bool(int b) { return (jv){.t = JV_BOOL, .u.b = !!b}; }
static jv v_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
static jv v_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }
static jv v_str(const char *p, size_t n) {
    jv v = {.t = JV_STR};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}
static jv v_cstr(const char *p) { return v_str(p, strlen(p)); }

static jlist *l_new(jerr *e, size_t cap) {
    jlist *l = jalloc(e, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = jalloc(e, l->cap * sizeof(jv));
    return l;
}
static void l_push(jerr *e, jlist *l, jv v) {
    if (l->n == l->cap) {
        jv *nv = jalloc(e, l->cap * 2 * sizeof(jv));
        memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}
static jv v_list(jlist *l) { return (jv){.t = JV_LIST, .u.l = l}; }

static jv v_pair(jerr *e, jv a, jv b) {
    jlist *p = l_new(e, 2);
    p->tuple = 1;
    l_push(e, p, a);
    l_push(e, p, b);
    return v_list(p);
}

static jdict *d_new(jerr *e) { return jalloc(e, sizeof(jdict)); }
static jv v_dict(jdict *d) { return (jv){.t = JV_DICT, .u.d = d}; }

static int streq(jv v, const char *s, size_t n) {
    return v.t == JV_STR && v.u.s.n == n && memcmp(v.u.s.p, s, n) == 0;
}

static jv *d_get(const jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (streq(d->k[i], k, n)) return &d->v[i];
    return NULL;
}

static int jv_eq(jv a, jv b);

static jv *d_getv(const jdict *d, jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

static void d_set(jerr *e, jdict *d, jv k, jv v) {
    jv *slot = d_getv(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *nk = jalloc(e, cap * sizeof(jv)), *nv = jalloc(e, cap * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static int is_intish(jv v) { return v.t == JV_BOOL || v.t == JV_INT; }
static int64_t as_int(jv v) { return v.t == JV_BOOL ? v.u.b : v.t == JV_INT ? v.u.i : (int64_t)v.u.f; }
static double as_dbl(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)as_int(v); }

static int truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static int jv_eq(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (is_intish(a) && is_intish(b)) return as_int(a) == as_int(b);
        return as_dbl(a) == as_dbl(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = d_getv(b.u.d, a.u.d->k[i]);
            if (!o || !jv_eq(a.u.d->v[i], *o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_LOOP: return a.u.lp == b.u.lp;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

static const char *type_name(jv v) {
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str",
                                        "list", "dict", "Namespace", "LoopContext", "Macro",
                                        "function"};
    return names[v.t];
}

/* ---------------------------------------------------------------------- string builder */

typedef struct sb {
    jerr *e;
    char *p;
    size_t n, cap; /* bytes */
} sb;

static void sb_put(sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = ar_alloc(b->e->ar, cap);
        if (!np) nomem(b->e);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void sb_c(sb *b, char c) { sb_put(b, &c, 1); }
static void sb_s(sb *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_sv(sb *b, jv v) { sb_put(b, v.u.s.p, v.u.s.n); }
static jv sb_v(sb *b) { return v_str(b->n ? b->p : "", b->n); }

/* ------------------------------------------------------------------------------- UTF-8 */

static uint32_t u8_dec(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) { *len = 1; return u[0]; }
    if ((u[0] & 0xE0) == 0xC0 && (u[1] & 0xC0) == 0x80) {
        *len = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if ((u[0] & 0xF0) == 0xE0 && n >= 3 && (u[1] & 0xC0) == 0x80 && (u[2] & 0xC0) == 0x80) {
        *len = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    if ((u[0] & 0xF8) == 0xF0 && n >= 4 && (u[1] & 0xC0) == 0x80 && (u[2] & 0xC0) == 0x80 &&
        (u[3] & 0xC0) == 0x80) {
        *len = 4;
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
    *len = 1;
    return u[0];
}

static void u8_enc(sb *b, uint32_t c) {
    char t[4];
    if (c < 0x80) { t[0] = (char)c; sb_put(b, t, 1); }
    else if (c < 0x800) { t[0] = (char)(0xC0 | (c >> 6)); t[1] = (char)(0x80 | (c & 0x3F)); sb_put(b, t, 2); }
    else if (c < 0x10000) {
        t[0] = (char)(0xE0 | (c >> 12)); t[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        t[2] = (char)(0x80 | (c & 0x3F)); sb_put(b, t, 3);
    } else {
        t[0] = (char)(0xF0 | (c >> 18)); t[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((c >> 6) & 0x3F)); t[3] = (char)(0x80 | (c & 0x3F)); sb_put(b, t, 4);
    }
}

static size_t u8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t l;
        u8_dec(s + i, n - i, &l);
        i += l;
    }
    return k;
}

/* byte offsets of each codepoint start, plus n at the end; returns count */
static size_t u8_offsets(jerr *e, const char *s, size_t n, size_t **offs) {
    size_t cnt = u8_len(s, n);
    size_t *o = jalloc(e, (cnt + 1) * sizeof(size_t));
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t l;
        o[k] = i;
        u8_dec(s + i, n - i, &l);
        i += l;
    }
    o[cnt] = n;
    *offs = o;
    return cnt;
}

static int py_space(uint32_t c) {
    return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

static int c_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* ------------------------------------------------------------------------- tree types */

enum { T_EOF, T_TEXT, T_VB, T_VE, T_BB, T_BE, T_NAME, T_STR, T_INT, T_FLOAT, T_OP };

typedef struct tok {
    int t, line;
    const char *s; /* NAME / OP / TEXT: into the source; STR: decoded, in the arena */
    size_t n;
    int64_t i;
    double f;
} tok;

enum {
    X_LIT, X_NAME, X_ATTR, X_ITEM, X_SLICE, X_CALL, X_FILTER, X_TEST, X_BIN, X_AND, X_OR, X_NOT,
    X_NEG, X_POS, X_COND, X_LIST, X_DICT, X_CHAIN
};
enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_LE,
    OP_GT, OP_GE, OP_IN, OP_NOTIN
};

typedef struct jx {
    int k, line, op; /* op: OP_* for X_BIN, filter/test id for X_FILTER/X_TEST, negation flag */
    int neg;         /* X_TEST: `is not` */
    jv lit;
    const char *name; /* X_NAME / X_ATTR / X_FILTER / X_TEST */
    struct jx *a, *b, *c, *d;
    struct jx **args; /* positional args, list items, dict keys */
    int nargs;
    const char **kwn; /* keyword names; X_DICT: unused */
    struct jx **kwv;  /* keyword values; X_DICT: dict values */
    int nkw;
    int *ops; /* X_CHAIN: nargs-1 comparison OP_*s between args (Python's a < b < c) */
} jx;

enum { S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE, S_BLOCK };

struct js {
    int k, line;
    const char *text; /* S_TEXT */
    size_t tlen;
    jx *e;             /* S_OUT / S_IF cond / S_FOR iterable / S_SET value */
    jx *filt;          /* S_FOR `if` filter */
    struct js *body, *els;
    const char **names; /* S_FOR / S_SET targets, S_MACRO params; S_MACRO name in attr */
    jx **defs;          /* S_MACRO param defaults (NULL entries: none) */
    int nnames;
    const char *attr; /* S_SET `ns.attr`; S_MACRO name */
    struct js *next;
};

struct ct_template {
    arena ar;
    js *body;
};

/* ------------------------------------------------------------- filters and tests by id */

#define FILTER_LIST(X)                                                                          \
    X(abs) X(attr) X(capitalize) X(count) X(d) X(default) X(dictsort) X(e) X(escape) X(first)  \
    X(float) X(indent) X(int) X(items) X(join) X(last) X(length) X(list) X(lower) X(map)       \
    X(max) X(min) X(reject) X(rejectattr) X(replace) X(reverse) X(round) X(safe) X(select)     \
    X(selectattr) X(sort) X(string) X(sum) X(title) X(tojson) X(trim) X(unique) X(upper)       \
    X(wordcount)
#define X_ENUM(n) F_##n,
#define X_NAMES(n) #n,
enum { FILTER_LIST(X_ENUM) F_COUNT_ };
static const char *const filter_names[] = {FILTER_LIST(X_NAMES)};

#define TEST_LIST(X)                                                                            \
    X(defined) X(undefined) X(none) X(boolean) X(false) X(true) X(integer) X(float) X(number)  \
    X(string) X(mapping) X(iterable) X(sequence) X(callable) X(sameas) X(escaped) X(odd)       \
    X(even) X(divisibleby) X(eq) X(equalto) X(ne) X(lt) X(lessthan) X(le) X(gt)                \
    X(greaterthan) X(ge) X(in) X(lower) X(upper) X(filter) X(test)
#define T_ENUM(n) TS_##n,
enum { TEST_LIST(T_ENUM) TS_COUNT_ };
static const char *const test_names[] = {TEST_LIST(X_NAMES)};

enum { BI_RAISE, BI_STRFTIME, BI_NAMESPACE, BI_RANGE, BI_DICT, BI_COUNT_ };
static const char *const builtin_names[] = {"raise_exception", "strftime_now", "namespace", "range",
                                            "dict"};

static int find_name(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

/* =================================================================================== lexer */

typedef struct cc {
    jerr e;
    tok *tk;
    size_t nt, ct, p;
    int loops; /* loop nesting while parsing, for break/continue */
} cc;

static void push_tok(cc *c, int t, int line, const char *s, size_t n) {
    if (c->nt == c->ct) {
        size_t ct = c->ct ? c->ct * 2 : 256;
        tok *nt = jalloc(&c->e, ct * sizeof(tok));
        if (c->nt) memcpy(nt, c->tk, c->nt * sizeof(tok));
        c->tk = nt;
        c->ct = ct;
    }
    tok *k = &c->tk[c->nt++];
    memset(k, 0, sizeof *k);
    k->t = t;
    k->line = line;
    k->s = s;
    k->n = n;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Decodes a Python string literal body s[0..n) (escapes as Python's unicode-escape). */
static jv decode_str(cc *c, const char *s, size_t n) {
    sb b = {.e = &c->e};
    sb_put(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            sb_c(&b, s[i]);
            continue;
        }
        char e = s[++i];
        switch (e) {
        case 'n': sb_c(&b, '\n'); break;
        case 't': sb_c(&b, '\t'); break;
        case 'r': sb_c(&b, '\r'); break;
        case 'b': sb_c(&b, '\b'); break;
        case 'f': sb_c(&b, '\f'); break;
        case 'v': sb_c(&b, '\v'); break;
        case 'a': sb_c(&b, '\a'); break;
        case '\\': sb_c(&b, '\\'); break;
        case '\'': sb_c(&b, '\''); break;
        case '"': sb_c(&b, '"'); break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            int ok = i + (size_t)nd < n;
            for (int k = 1; ok && k <= nd; k++) {
                int h = i + k < n ? hexval(s[i + k]) : -1;
                if (h < 0) ok = 0;
                else v = v * 16 + (uint32_t)h;
            }
            if (!ok) {
                sb_c(&b, '\\');
                sb_c(&b, e);
                break;
            }
            u8_enc(&b, v);
            i += (size_t)nd;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') { v = v * 8 + (uint32_t)(s[i] - '0'); i++; k++; }
                i--;
                u8_enc(&b, v);
            } else {
                sb_c(&b, '\\');
                sb_c(&b, e);
            }
        }
    }
    return sb_v(&b);
}

/* After a tag end: `-` strips all whitespace; a block/comment end without `+` eats one newline. */
static size_t after_end(const char *s, size_t n, size_t pos, char sign, int trim, int *line) {
    if (sign == '-') {
        while (pos < n && c_ws(s[pos])) { *line += s[pos] == '\n'; pos++; }
    } else if (sign != '+' && trim && pos < n && s[pos] == '\n') {
        (*line)++;
        pos++;
    }
    return pos;
}

static void lex(cc *c, const char *s, size_t n) {
    size_t pos = 0;
    int line = 1, line_start = 1;
    while (pos < n) {
        size_t q = pos;
        char kind = 0;
        for (; q + 1 < n; q++)
            if (s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')) {
                kind = s[q + 1];
                break;
            }
        if (!kind) {
            push_tok(c, T_TEXT, line, s + pos, n - pos);
            break;
        }
        char sign = (q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+')) ? s[q + 2] : 0;
        size_t te = q;
        if (sign == '-') {
            while (te > pos && c_ws(s[te - 1])) te--;
        } else if (sign != '+' && kind != '{') { /* lstrip_blocks */
            size_t l = te;
            while (l > pos && s[l - 1] != '\n') l--;
            if (l > pos || line_start) {
                size_t k = l;
                while (k < te && (s[k] == ' ' || s[k] == '\t')) k++;
                if (k == te) te = l;
            }
        }
        if (te > pos) push_tok(c, T_TEXT, line, s + pos, te - pos);
        line += count_nl(s + pos, q - pos);
        int tag_line = line;
        size_t p = q + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            const char *e = NULL;
            for (size_t k = p; k + 1 < n; k++)
                if (s[k] == '#' && s[k + 1] == '}') { e = s + k; break; }
            if (!e) jfail(&c->e, IG_ERR_FORMAT, tag_line, "unclosed comment: '{#' without '#}'");
            size_t ei = (size_t)(e - s);
            char es = (ei > q + 2 && (s[ei - 1] == '-' || s[ei - 1] == '+')) ? s[ei - 1] : 0;
            line += count_nl(s + p, ei + 2 - p);
            pos = after_end(s, n, ei + 2, es, 1, &line);
            line_start = pos > 0 && s[pos - 1] == '\n';
            continue;
        }
        size_t first_tok = c->nt;
        push_tok(c, kind == '{' ? T_VB : T_BB, tag_line, NULL, 0);
        int depth = 0;
        for (;;) {
            while (p < n && c_ws(s[p])) { line += s[p] == '\n'; p++; }
            if (p >= n)
                jfail(&c->e, IG_ERR_FORMAT, tag_line, "unclosed tag: '%s' without '%s'",
                      kind == '{' ? "{{" : "{%", kind == '{' ? "}}" : "%}");
            char ec = kind == '{' ? '}' : '%';
            if (depth == 0) {
                char es = 0;
                size_t el = 0;
                if ((s[p] == '-' || (s[p] == '+' && kind == '%')) && p + 2 < n &&
                    s[p + 1] == ec && s[p + 2] == '}') {
                    es = s[p];
                    el = 3;
                } else if (s[p] == ec && p + 1 < n && s[p + 1] == '}') {
                    el = 2;
                }
                if (el) {
                    push_tok(c, kind == '{' ? T_VE : T_BE, line, NULL, 0);
                    pos = after_end(s, n, p + el, es, kind == '%', &line);
                    break;
                }
            }
            char ch = s[p];
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
                size_t b = p;
                while (p < n && ((s[p] >= 'a' && s[p] <= 'z') || (s[p] >= 'A' && s[p] <= 'Z') ||
                                 (s[p] >= '0' && s[p] <= '9') || s[p] == '_'))
                    p++;
                push_tok(c, T_NAME, line, s + b, p - b);
            } else if (ch >= '0' && ch <= '9') {
                size_t b = p;
                int isf = 0;
                while (p < n && ((s[p] >= '0' && s[p] <= '9') || s[p] == '_')) p++;
                if (p + 1 < n && s[p] == '.' && s[p + 1] >= '0' && s[p + 1] <= '9') {
                    isf = 1;
                    p++;
                    while (p < n && ((s[p] >= '0' && s[p] <= '9') || s[p] == '_')) p++;
                }
                if (p < n && (s[p] == 'e' || s[p] == 'E')) {
                    size_t k = p + 1;
                    if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                    if (k < n && s[k] >= '0' && s[k] <= '9') {
                        isf = 1;
                        p = k;
                        while (p < n && s[p] >= '0' && s[p] <= '9') p++;
                    }
                }
                char buf[64];
                size_t bl = 0;
                for (size_t k = b; k < p && bl < sizeof buf - 1; k++)
                    if (s[k] != '_') buf[bl++] = s[k];
                buf[bl] = 0;
                push_tok(c, isf ? T_FLOAT : T_INT, line, s + b, p - b);
                if (isf) c->tk[c->nt - 1].f = strtod(buf, NULL);
                else c->tk[c->nt - 1].i = strtoll(buf, NULL, 10);
            } else if (ch == '\'' || ch == '"') {
                size_t b = ++p;
                int l0 = line;
                while (p < n && s[p] != ch) {
                    if (s[p] == '\\' && p + 1 < n) p++;
                    line += s[p] == '\n';
                    p++;
                }
                if (p >= n) jfail(&c->e, IG_ERR_FORMAT, l0, "unterminated string literal");
                jv v = decode_str(c, s + b, p - b);
                push_tok(c, T_STR, l0, v.u.s.p, v.u.s.n);
                p++;
            } else {
                static const char *const two[] = {"//", "**", "==", "!=", "<=", ">="};
                size_t len = 0;
                for (int k = 0; k < 6; k++)
                    if (p + 1 < n && s[p] == two[k][0] && s[p + 1] == two[k][1]) len = 2;
                if (!len) {
                    if (!strchr("+-*/%~<>=()[]{}.,:|", ch) || ch == 0) {
                        size_t cl;
                        u8_dec(s + p, n - p, &cl);
                        jfail(&c->e, IG_ERR_FORMAT, line, "unexpected character '%.*s' in tag", (int)cl, s + p);
                    }
                    len = 1;
                    if (ch == '(' || ch == '[' || ch == '{') depth++;
                    if ((ch == ')' || ch == ']' || ch == '}') && depth > 0) depth--;
                }
                push_tok(c, T_OP, line, s + p, len);
                p += len;
            }
        }
        /* {% raw %}...{% endraw %}: the body is text */
        if (kind == '%' && c->nt - first_tok == 3 && c->tk[first_tok + 1].t == T_NAME &&
            c->tk[first_tok + 1].n == 3 && memcmp(c->tk[first_tok + 1].s, "raw", 3) == 0) {
            c->nt = first_tok;
            size_t k = pos, found = 0, after = 0;
            char sg1 = 0, sg2 = 0;
            for (; k + 1 < n; k++) {
                if (s[k] != '{' || s[k + 1] != '%') continue;
                size_t m = k + 2;
                char a1 = 0;
                if (m < n && (s[m] == '-' || s[m] == '+')) a1 = s[m++];
                while (m < n && c_ws(s[m])) m++;
                if (m + 6 > n || memcmp(s + m, "endraw", 6) != 0) continue;
                m += 6;
                while (m < n && c_ws(s[m])) m++;
                char a2 = 0;
                if (m < n && (s[m] == '-' || s[m] == '+')) a2 = s[m++];
                if (m + 1 < n && s[m] == '%' && s[m + 1] == '}') {
                    found = 1;
                    after = m + 2;
                    sg1 = a1;
                    sg2 = a2;
                    break;
                }
            }
            if (!found) jfail(&c->e, IG_ERR_FORMAT, tag_line, "unclosed raw block: no '{%% endraw %%}'");
            size_t te2 = k;
            if (sg1 == '-')
                while (te2 > pos && c_ws(s[te2 - 1])) te2--;
            if (te2 > pos) push_tok(c, T_TEXT, line, s + pos, te2 - pos);
            line += count_nl(s + pos, after - pos);
            pos = after_end(s, n, after, sg2, 1, &line);
        }
        line_start = pos > 0 && s[pos - 1] == '\n';
    }
    push_tok(c, T_EOF, line, NULL, 0);
}

/* ================================================================================== parser */

static tok *pk(cc *c) { return &c->tk[c->p]; }
static tok *pk2(cc *c) { return &c->tk[c->p + 1 < c->nt ? c->p + 1 : c->p]; }
static tok *nx(cc *c) {
    tok *t = &c->tk[c->p];
    if (t->t != T_EOF) c->p++;
    return t;
}
static int t_op(const tok *t, const char *op) {
    return t->t == T_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static int t_name(const tok *t, const char *nm) {
    return t->t == T_NAME && t->n == strlen(nm) && memcmp(t->s, nm, t->n) == 0;
}
static const char *tok_desc(cc *c, const tok *t) {
    switch (t->t) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template text";
    case T_VB: return "'{{'";
    case T_VE: return "'}}'";
    case T_BB: return "'{%'";
    case T_BE: return "'%}'";
    case T_STR: return "string literal";
    case T_INT: case T_FLOAT: return "number";
    default: {
        size_t n = t->n < 40 ? t->n : 40;
        char *q = jalloc(&c->e, n + 3);
        q[0] = '\'';
        memcpy(q + 1, t->s, n);
        q[n + 1] = '\'';
        return q;
    }
    }
}
static void expect_op(cc *c, const char *op) {
    tok *t = pk(c);
    if (!t_op(t, op))
        jfail(&c->e, IG_ERR_FORMAT, t->line, "expected '%s', got %s", op, tok_desc(c, t));
    nx(c);
}
static void expect_t(cc *c, int type, const char *what) {
    tok *t = pk(c);
    if (t->t != type) jfail(&c->e, IG_ERR_FORMAT, t->line, "expected %s, got %s", what, tok_desc(c, t));
    nx(c);
}
static const char *expect_name(cc *c) {
    tok *t = pk(c);
    if (t->t != T_NAME) jfail(&c->e, IG_ERR_FORMAT, t->line, "expected a name, got %s", tok_desc(c, t));
    nx(c);
    return jstrdup(&c->e, t->s, t->n);
}

static jx *mk(cc *c, int k, int line) {
    jx *x = jalloc(&c->e, sizeof *x);
    x->k = k;
    x->line = line;
    return x;
}

typedef struct xvec {
    jx **v;
    const char **names;
    int n, cap;
} xvec;
static void xv_push(cc *c, xvec *v, jx *x, const char *name) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jx **nv = jalloc(&c->e, (size_t)cap * sizeof(jx *));
        const char **nn = jalloc(&c->e, (size_t)cap * sizeof(char *));
        if (v->n) {
            memcpy(nv, v->v, (size_t)v->n * sizeof(jx *));
            memcpy(nn, v->names, (size_t)v->n * sizeof(char *));
        }
        v->v = nv;
        v->names = nn;
        v->cap = cap;
    }
    v->names[v->n] = name;
    v->v[v->n++] = x;
}

static jx *p_expr(cc *c);
static jx *p_or(cc *c);
static jx *p_unary(cc *c, int with_filter);

/* `(a, k=v)` — the '(' is current */
static void p_call_args(cc *c, jx *x) {
    expect_op(c, "(");
    xvec pos = {0}, kw = {0};
    while (!t_op(pk(c), ")")) {
        if (pos.n + kw.n) expect_op(c, ",");
        if (t_op(pk(c), ")")) break;
        if (t_op(pk(c), "*") || t_op(pk(c), "**"))
            jfail(&c->e, IG_ERR_UNSUPPORTED, pk(c)->line, "unsupported: *args / **kwargs in calls");
        if (pk(c)->t == T_NAME && t_op(pk2(c), "=")) {
            const char *nm = expect_name(c);
            nx(c);
            xv_push(c, &kw, p_expr(c), nm);
        } else {
            if (kw.n) jfail(&c->e, IG_ERR_FORMAT, pk(c)->line, "positional argument after keyword argument");
            xv_push(c, &pos, p_expr(c), NULL);
        }
    }
    nx(c);
    x->args = pos.v;
    x->nargs = pos.n;
    x->kwn = kw.names;
    x->kwv = kw.v;
    x->nkw = kw.n;
}

static jx *p_primary(cc *c) {
    tok *t = nx(c);
    jx *x;
    switch (t->t) {
    case T_NAME:
        x = mk(c, X_LIT, t->line);
        if (t_name(t, "true") || t_name(t, "True")) x->lit = v_bool(1);
        else if (t_name(t, "false") || t_name(t, "False")) x->lit = v_bool(0);
        else if (t_name(t, "none") || t_name(t, "None")) x->lit = v_none();
        else {
            x->k = X_NAME;
            x->name = jstrdup(&c->e, t->s, t->n);
        }
        return x;
    case T_STR: {
        x = mk(c, X_LIT, t->line);
        if (pk(c)->t != T_STR) {
            x->lit = v_str(t->s, t->n);
            return x;
        }
        sb b = {.e = &c->e};
        sb_put(&b, t->s, t->n);
        while (pk(c)->t == T_STR) {
            tok *u = nx(c);
            sb_put(&b, u->s, u->n);
        }
        x->lit = sb_v(&b);
        return x;
    }
    case T_INT:
        x = mk(c, X_LIT, t->line);
        x->lit = v_int(t->i);
        return x;
    case T_FLOAT:
        x = mk(c, X_LIT, t->line);
        x->lit = v_float(t->f);
        return x;
    case T_OP:
        if (t_op(t, "(")) {
            if (t_op(pk(c), ")")) {
                nx(c);
                x = mk(c, X_LIST, t->line);
                x->op = 1;
                return x;
            }
            jx *first = p_expr(c);
            if (!t_op(pk(c), ",")) {
                expect_op(c, ")");
                return first;
            }
            xvec v = {0};
            xv_push(c, &v, first, NULL);
            while (t_op(pk(c), ",")) {
                nx(c);
                if (t_op(pk(c), ")")) break;
                xv_push(c, &v, p_expr(c), NULL);
            }
            expect_op(c, ")");
            x = mk(c, X_LIST, t->line);
            x->args = v.v;
            x->nargs = v.n;
            x->op = 1;
            return x;
        }
        if (t_op(t, "[")) {
            xvec v = {0};
            while (!t_op(pk(c), "]")) {
                if (v.n) expect_op(c, ",");
                if (t_op(pk(c), "]")) break;
                xv_push(c, &v, p_expr(c), NULL);
            }
            nx(c);
            x = mk(c, X_LIST, t->line);
            x->args = v.v;
            x->nargs = v.n;
            return x;
        }
        if (t_op(t, "{")) {
            xvec ks = {0}, vs = {0};
            while (!t_op(pk(c), "}")) {
                if (ks.n) expect_op(c, ",");
                if (t_op(pk(c), "}")) break;
                xv_push(c, &ks, p_expr(c), NULL);
                expect_op(c, ":");
                xv_push(c, &vs, p_expr(c), NULL);
            }
            nx(c);
            x = mk(c, X_DICT, t->line);
            x->args = ks.v;
            x->nargs = ks.n;
            x->kwv = vs.v;
            return x;
        }
        break;
    default: break;
    }
    jfail(&c->e, IG_ERR_FORMAT, t->line, "unexpected %s in expression", tok_desc(c, t));
}

static jx *p_postfix(cc *c, jx *x) {
    for (;;) {
        tok *t = pk(c);
        if (t_op(t, ".")) {
            nx(c);
            tok *u = nx(c);
            jx *y;
            if (u->t == T_NAME) {
                y = mk(c, X_ATTR, u->line);
                y->name = jstrdup(&c->e, u->s, u->n);
            } else if (u->t == T_INT) {
                y = mk(c, X_ITEM, u->line);
                y->b = mk(c, X_LIT, u->line);
                y->b->lit = v_int(u->i);
            } else {
                jfail(&c->e, IG_ERR_FORMAT, u->line, "expected an attribute name after '.'");
            }
            y->a = x;
            x = y;
        } else if (t_op(t, "[")) {
            nx(c);
            jx *parts[3] = {NULL, NULL, NULL};
            int colons = 0;
            while (!t_op(pk(c), "]")) {
                if (t_op(pk(c), ":")) {
                    if (++colons > 2) jfail(&c->e, IG_ERR_FORMAT, pk(c)->line, "bad slice");
                    nx(c);
                    continue;
                }
                if (parts[colons]) jfail(&c->e, IG_ERR_FORMAT, pk(c)->line, "expected ']' in subscript");
                parts[colons] = p_expr(c);
            }
            nx(c);
            jx *y;
            if (colons == 0) {
                if (!parts[0]) jfail(&c->e, IG_ERR_FORMAT, t->line, "empty subscript");
                y = mk(c, X_ITEM, t->line);
                y->b = parts[0];
            } else {
                y = mk(c, X_SLICE, t->line);
                y->b = parts[0];
                y->c = parts[1];
                y->d = parts[2];
            }
            y->a = x;
            x = y;
        } else if (t_op(t, "(")) {
            jx *y = mk(c, X_CALL, t->line);
            y->a = x;
            p_call_args(c, y);
            x = y;
        } else {
            return x;
        }
    }
}

static const char *p_dotted_name(cc *c) {
    const char *nm = expect_name(c);
    while (t_op(pk(c), ".")) {
        nx(c);
        const char *more = expect_name(c);
        size_t a = strlen(nm), b = strlen(more);
        char *j = jalloc(&c->e, a + b + 2);
        memcpy(j, nm, a);
        j[a] = '.';
        memcpy(j + a + 1, more, b + 1);
        nm = j;
    }
    return nm;
}

static jx *p_filter_expr(cc *c, jx *x) {
    for (;;) {
        tok *t = pk(c);
        if (t_op(t, "|")) {
            nx(c);
            int line = pk(c)->line;
            const char *nm = p_dotted_name(c);
            /* unknown filters fail when reached, as in jinja2 3.x, so that a template whose
             * unused branch needs one still renders */
            int id = find_name(filter_names, F_COUNT_, nm);
            jx *y = mk(c, X_FILTER, line);
            y->a = x;
            y->name = nm;
            y->op = id;
            if (t_op(pk(c), "(")) p_call_args(c, y);
            x = y;
        } else if (t_name(t, "is")) {
            nx(c);
            int neg = 0;
            if (t_name(pk(c), "not")) {
                nx(c);
                neg = 1;
            }
            int line = pk(c)->line;
            const char *nm = p_dotted_name(c);
            int id = find_name(test_names, TS_COUNT_, nm);
            jx *y = mk(c, X_TEST, line);
            y->a = x;
            y->name = nm;
            y->op = id;
            y->neg = neg;
            tok *u = pk(c);
            if (t_op(u, "(")) {
                p_call_args(c, y);
            } else if ((u->t == T_NAME || u->t == T_STR || u->t == T_INT || u->t == T_FLOAT ||
                        t_op(u, "[") || t_op(u, "{")) &&
                       !t_name(u, "else") && !t_name(u, "or") && !t_name(u, "and")) {
                if (t_name(u, "is")) jfail(&c->e, IG_ERR_FORMAT, u->line, "cannot chain tests with 'is'");
                jx *arg = p_postfix(c, p_primary(c));
                y->args = jalloc(&c->e, sizeof(jx *));
                y->args[0] = arg;
                y->nargs = 1;
            }
            x = y;
        } else if (t_op(t, "(")) {
            jx *y = mk(c, X_CALL, t->line);
            y->a = x;
            p_call_args(c, y);
            x = y;
        } else {
            return x;
        }
    }
}

/* Counts a level of parser recursion (c->e.depth; the caller decrements). */
static void nest(cc *c, int line) {
    if (++c->e.depth > JINJA_MAX_DEPTH)
        jfail(&c->e, IG_ERR_INVALID, line, "expressions or blocks nested more than %d deep", JINJA_MAX_DEPTH);
}

static jx *p_unary(cc *c, int with_filter) {
    tok *t = pk(c);
    jx *x;
    nest(c, t->line);
    if (t_op(t, "-") || t_op(t, "+")) {
        nx(c);
        x = mk(c, t_op(t, "-") ? X_NEG : X_POS, t->line);
        x->a = p_unary(c, 0);
    } else {
        x = p_primary(c);
    }
    x = p_postfix(c, x);
    if (with_filter) x = p_filter_expr(c, x);
    c->e.depth--;
    return x;
}

static jx *mkbin(cc *c, int op, jx *a, jx *b, int line) {
    jx *x = mk(c, X_BIN, line);
    x->op = op;
    x->a = a;
    x->b = b;
    return x;
}

static jx *p_pow(cc *c) {
    jx *x = p_unary(c, 1);
    while (t_op(pk(c), "**")) {
        int line = nx(c)->line;
        x = mkbin(c, OP_POW, x, p_unary(c, 1), line);
    }
    return x;
}
static jx *p_mul(cc *c) {
    jx *x = p_pow(c);
    for (;;) {
        tok *t = pk(c);
        int op = t_op(t, "*") ? OP_MUL : t_op(t, "/") ? OP_DIV : t_op(t, "//") ? OP_FDIV
                 : t_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return x;
        nx(c);
        x = mkbin(c, op, x, p_pow(c), t->line);
    }
}
static jx *p_cat(cc *c) {
    jx *x = p_mul(c);
    while (t_op(pk(c), "~")) {
        int line = nx(c)->line;
        x = mkbin(c, OP_CAT, x, p_mul(c), line);
    }
    return x;
}
static jx *p_add(cc *c) {
    jx *x = p_cat(c);
    for (;;) {
        tok *t = pk(c);
        int op = t_op(t, "+") ? OP_ADD : t_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return x;
        nx(c);
        x = mkbin(c, op, x, p_cat(c), t->line);
    }
}
static jx *p_cmp(cc *c) {
    int line = pk(c)->line;
    jx *first = p_add(c);
    xvec v = {0};
    int ops[64], nops = 0;
    for (;;) {
        tok *t = pk(c);
        int op = t_op(t, "==") ? OP_EQ : t_op(t, "!=") ? OP_NE : t_op(t, "<") ? OP_LT
                 : t_op(t, "<=") ? OP_LE : t_op(t, ">") ? OP_GT : t_op(t, ">=") ? OP_GE
                 : t_name(t, "in") ? OP_IN : -1;
        if (op < 0 && t_name(t, "not") && t_name(pk2(c), "in")) {
            nx(c);
            op = OP_NOTIN;
        }
        if (op < 0) break;
        nx(c);
        if (nops == 64) jfail(&c->e, IG_ERR_UNSUPPORTED, t->line, "unsupported: comparison chain longer than 64");
        if (!v.n) xv_push(c, &v, first, NULL);
        ops[nops++] = op;
        xv_push(c, &v, p_add(c), NULL);
    }
    if (nops == 0) return first;
    if (nops == 1) return mkbin(c, ops[0], v.v[0], v.v[1], line);
    jx *x = mk(c, X_CHAIN, line);
    x->args = v.v;
    x->nargs = v.n;
    x->ops = jalloc(&c->e, (size_t)nops * sizeof(int));
    memcpy(x->ops, ops, (size_t)nops * sizeof(int));
    return x;
}
static jx *p_not(cc *c) {
    if (t_name(pk(c), "not")) {
        int line = nx(c)->line;
        jx *x = mk(c, X_NOT, line);
        nest(c, line);
        x->a = p_not(c);
        c->e.depth--;
        return x;
    }
    return p_cmp(c);
}
static jx *p_and(cc *c) {
    jx *x = p_not(c);
    while (t_name(pk(c), "and")) {
        int line = nx(c)->line;
        jx *y = mk(c, X_AND, line);
        y->a = x;
        y->b = p_not(c);
        x = y;
    }
    return x;
}
static jx *p_or(cc *c) {
    jx *x = p_and(c);
    while (t_name(pk(c), "or")) {
        int line = nx(c)->line;
        jx *y = mk(c, X_OR, line);
        y->a = x;
        y->b = p_and(c);
        x = y;
    }
    return x;
}
static jx *p_expr(cc *c) {
    nest(c, pk(c)->line);
    jx *x = p_or(c);
    while (t_name(pk(c), "if")) {
        int line = nx(c)->line;
        jx *y = mk(c, X_COND, line);
        y->a = x;
        y->b = p_or(c);
        if (t_name(pk(c), "else")) {
            nx(c);
            y->c = p_expr(c);
        }
        x = y;
    }
    c->e.depth--;
    return x;
}
/* a bare tuple `a, b` where jinja2 allows one (set values, for iterables) */
static jx *p_tuple(cc *c, int cond) {
    int line = pk(c)->line;
    jx *x = cond ? p_expr(c) : p_or(c);
    if (!t_op(pk(c), ",")) return x;
    xvec v = {0};
    xv_push(c, &v, x, NULL);
    while (t_op(pk(c), ",")) {
        nx(c);
        if (pk(c)->t == T_BE || pk(c)->t == T_VE || t_name(pk(c), "if")) break;
        xv_push(c, &v, cond ? p_expr(c) : p_or(c), NULL);
    }
    jx *y = mk(c, X_LIST, line);
    y->args = v.v;
    y->nargs = v.n;
    y->op = 1;
    return y;
}

/* ------------------------------------------------------------------------- statements */

static js *mks(cc *c, int k, int line) {
    js *s = jalloc(&c->e, sizeof *s);
    s->k = k;
    s->line = line;
    return s;
}

static js *p_body(cc *c, const char *const *ends, int nends, const char **which, int open_line,
                  const char *open_name);

static void end_tag(cc *c) { expect_t(c, T_BE, "'%}'"); }

/* a tag that opens a body may end in ':' (jinja2 allows it for Python's sake) */
static void open_tag(cc *c) {
    if (t_op(pk(c), ":")) nx(c);
    end_tag(c);
}

static js *p_if_rest(cc *c, int line) {
    js *s = mks(c, S_IF, line);
    s->e = p_expr(c);
    open_tag(c);
    static const char *const ends[] = {"elif", "else", "endif"};
    const char *w;
    s->body = p_body(c, ends, 3, &w, line, "if");
    if (strcmp(w, "elif") == 0) {
        s->els = p_if_rest(c, c->tk[c->p - 1].line);
    } else if (strcmp(w, "else") == 0) {
        open_tag(c);
        static const char *const e2[] = {"endif"};
        s->els = p_body(c, e2, 1, &w, line, "if");
        end_tag(c);
    } else {
        end_tag(c);
    }
    return s;
}

static js *p_stmt(cc *c) {
    tok *bb = nx(c); /* T_BB */
    tok *t = pk(c);
    int line = t->line;
    if (t->t != T_NAME) jfail(&c->e, IG_ERR_FORMAT, line, "expected a statement name after '{%%'");
    const char *nm = jstrdup(&c->e, t->s, t->n);
    nx(c);
    (void)bb;
    if (strcmp(nm, "if") == 0) return p_if_rest(c, line);
    if (strcmp(nm, "for") == 0) {
        js *s = mks(c, S_FOR, line);
        const char *names[16];
        int nn = 0;
        int paren = 0;
        if (t_op(pk(c), "(")) { nx(c); paren = 1; }
        do {
            if (nn && t_op(pk(c), ",")) nx(c);
            if (nn == 16) jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported: more than 16 loop targets");
            names[nn++] = expect_name(c);
        } while (t_op(pk(c), ","));
        if (paren) expect_op(c, ")");
        s->names = jalloc(&c->e, (size_t)nn * sizeof(char *));
        memcpy(s->names, names, (size_t)nn * sizeof(char *));
        s->nnames = nn;
        if (!t_name(pk(c), "in")) jfail(&c->e, IG_ERR_FORMAT, pk(c)->line, "expected 'in' in for loop");
        nx(c);
        s->e = p_tuple(c, 0);
        if (t_name(pk(c), "if")) {
            nx(c);
            s->filt = p_expr(c);
        }
        if (t_name(pk(c), "recursive"))
            jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported: recursive for loops");
        open_tag(c);
        static const char *const ends[] = {"else", "endfor"};
        const char *w;
        c->loops++;
        s->body = p_body(c, ends, 2, &w, line, "for");
        c->loops--;
        open_tag(c);
        if (strcmp(w, "else") == 0) {
            static const char *const e2[] = {"endfor"};
            s->els = p_body(c, e2, 1, &w, line, "for");
            end_tag(c);
        }
        return s;
    }
    if (strcmp(nm, "set") == 0) {
        js *s = mks(c, S_SET, line);
        const char *names[16];
        int nn = 0;
        names[nn++] = expect_name(c);
        if (t_op(pk(c), ".")) {
            nx(c);
            s->attr = expect_name(c);
        } else {
            while (t_op(pk(c), ",")) {
                nx(c);
                if (nn == 16) jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported: more than 16 set targets");
                names[nn++] = expect_name(c);
            }
        }
        s->names = jalloc(&c->e, (size_t)nn * sizeof(char *));
        memcpy(s->names, names, (size_t)nn * sizeof(char *));
        s->nnames = nn;
        if (t_op(pk(c), "=")) {
            nx(c);
            s->e = p_tuple(c, 1);
            end_tag(c);
            return s;
        }
        if (pk(c)->t == T_BE && nn == 1 && !s->attr) {
            open_tag(c);
            s->k = S_SETBLOCK;
            static const char *const ends[] = {"endset"};
            const char *w;
            s->body = p_body(c, ends, 1, &w, line, "set");
            end_tag(c);
            return s;
        }
        if (t_op(pk(c), "|"))
            jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported: filtered block set");
        jfail(&c->e, IG_ERR_FORMAT, pk(c)->line, "expected '=' in set statement");
    }
    if (strcmp(nm, "macro") == 0) {
        js *s = mks(c, S_MACRO, line);
        s->attr = expect_name(c);
        expect_op(c, "(");
        const char *names[32];
        jx *defs[32];
        int nn = 0;
        while (!t_op(pk(c), ")")) {
            if (nn) expect_op(c, ",");
            if (t_op(pk(c), ")")) break;
            if (nn == 32) jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported: more than 32 macro parameters");
            names[nn] = expect_name(c);
            defs[nn] = NULL;
            if (t_op(pk(c), "=")) {
                nx(c);
                defs[nn] = p_expr(c);
            }
            nn++;
        }
        nx(c);
        end_tag(c);
        s->names = jalloc(&c->e, (size_t)(nn + 1) * sizeof(char *));
        s->defs = jalloc(&c->e, (size_t)(nn + 1) * sizeof(jx *));
        memcpy(s->names, names, (size_t)nn * sizeof(char *));
        memcpy(s->defs, defs, (size_t)nn * sizeof(jx *));
        s->nnames = nn;
        static const char *const ends[] = {"endmacro"};
        const char *w;
        int saved = c->loops;
        c->loops = 0;
        s->body = p_body(c, ends, 1, &w, line, "macro");
        c->loops = saved;
        if (pk(c)->t == T_NAME) nx(c);
        end_tag(c);
        return s;
    }
    if (strcmp(nm, "break") == 0 || strcmp(nm, "continue") == 0) {
        if (!c->loops) jfail(&c->e, IG_ERR_FORMAT, line, "'%s' outside of a loop", nm);
        end_tag(c);
        return mks(c, nm[0] == 'b' ? S_BREAK : S_CONTINUE, line);
    }
    if (strcmp(nm, "generation") == 0) {
        open_tag(c);
        js *s = mks(c, S_BLOCK, line);
        static const char *const ends[] = {"endgeneration"};
        const char *w;
        s->body = p_body(c, ends, 1, &w, line, "generation");
        end_tag(c);
        return s;
    }
    static const char *const known_ends[] = {"endif", "endfor", "else", "elif", "endset",
                                             "endmacro", "endgeneration", "endraw"};
    for (int i = 0; i < 8; i++)
        if (strcmp(nm, known_ends[i]) == 0)
            jfail(&c->e, IG_ERR_FORMAT, line, "unexpected '%s' (no open block it could close)", nm);
    jfail(&c->e, IG_ERR_UNSUPPORTED, line, "unsupported statement '%s'", nm);
}

static js *p_body(cc *c, const char *const *ends, int nends, const char **which, int open_line,
                  const char *open_name) {
    js *head = NULL, **tail = &head;
    nest(c, open_line);
    for (;;) {
        tok *t = pk(c);
        js *s = NULL;
        if (t->t == T_EOF) {
            if (nends)
                jfail(&c->e, IG_ERR_FORMAT, open_line,
                      "unclosed '%s' block: reached the end of the template looking for '%s'",
                      open_name, ends[nends - 1]);
            c->e.depth--;
            return head;
        }
        if (t->t == T_TEXT) {
            nx(c);
            s = mks(c, S_TEXT, t->line);
            s->text = t->s;
            s->tlen = t->n;
        } else if (t->t == T_VB) {
            nx(c);
            s = mks(c, S_OUT, t->line);
            s->e = p_tuple(c, 1);
            expect_t(c, T_VE, "'}}'");
        } else if (t->t == T_BB) {
            tok *u = pk2(c);
            for (int i = 0; i < nends; i++)
                if (t_name(u, ends[i])) {
                    c->p += 2;
                    *which = ends[i];
                    c->e.depth--;
                    return head;
                }
            s = p_stmt(c);
        } else {
            jfail(&c->e, IG_ERR_FORMAT, t->line, "unexpected %s", tok_desc(c, t));
        }
        *tail = s;
        tail = &s->next;
    }
}

/* ================================================================================== render */

typedef struct frame {
    struct frame *up;
    jdict vars;
} frame;

typedef struct rctx {
    jerr e;
    arena ar;
    sb out;
    frame *root;
    int brk; /* 1: break pending, 2: continue pending */
    int depth; /* macro call depth */
    int eval_depth; /* ev recursion */
} rctx;

#define RF(r, line, ...) jfail(&(r)->e, IG_ERR_INVALID, line, __VA_ARGS__)

static jv *f_lookup(frame *f, const char *name) {
    size_t n = strlen(name);
    for (; f; f = f->up) {
        jv *v = d_get(&f->vars, name, n);
        if (v) return v;
    }
    return NULL;
}
static void f_set(rctx *r, frame *f, const char *name, jv v) { d_set(&r->e, &f->vars, v_cstr(name), v); }

static jv ev(rctx *r, frame *f, const jx *x);
static void ex_list(rctx *r, frame *f, const js *s);

/* ---- text forms: Python str() / repr(), float repr, JSON */

static void fmt_float(sb *b, double d, int json) {
    if (isnan(d)) { sb_s(b, json ? "NaN" : "nan"); return; }
    if (isinf(d)) { sb_s(b, d < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf")); return; }
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    /* buf: [-]D[.DDD]e[+-]XX */
    char digits[24];
    int nd = 0, neg = 0;
    const char *p = buf;
    if (*p == '-') { neg = 1; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int ex = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) sb_c(b, '-');
    if (ex >= -4 && ex < 16) {
        if (ex >= 0) {
            for (int i = 0; i <= ex; i++) sb_c(b, i < nd ? digits[i] : '0');
            sb_c(b, '.');
            if (nd > ex + 1) sb_put(b, digits + ex + 1, (size_t)(nd - ex - 1));
            else sb_c(b, '0');
        } else {
            sb_s(b, "0.");
            for (int i = 0; i < -ex - 1; i++) sb_c(b, '0');
            sb_put(b, digits, (size_t)nd);
        }
    } else {
        sb_c(b, digits[0]);
        if (nd > 1) {
            sb_c(b, '.');
            sb_put(b, digits + 1, (size_t)nd - 1);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        sb_s(b, e);
    }
}

static void fmt_int(sb *b, int64_t i) {
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, i);
    sb_s(b, t);
}

static void py_repr(sb *b, jv v);

static void py_str(sb *b, jv v) {
    switch (v.t) {
    case JV_UNDEF: return; /* str(Undefined) is '' even though repr() is not */
    case JV_STR: sb_sv(b, v); return;
    default: py_repr(b, v);
    }
}

static void repr_str(sb *b, const char *s, size_t n) {
    int sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = (sq && !dq) ? '"' : '\'';
    sb_c(b, q);
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t ch = u8_dec(s + i, n - i, &l);
        char t[12];
        if (ch == '\\') sb_s(b, "\\\\");
        else if (ch == (uint32_t)q) { sb_c(b, '\\'); sb_c(b, q); }
        else if (ch == '\n') sb_s(b, "\\n");
        else if (ch == '\r') sb_s(b, "\\r");
        else if (ch == '\t') sb_s(b, "\\t");
        else if (ch < 0x20 || (ch >= 0x7f && ch <= 0xa0)) { snprintf(t, sizeof t, "\\x%02x", ch); sb_s(b, t); }
        else sb_put(b, s + i, l);
        i += l;
    }
    sb_c(b, q);
}

static void py_repr(sb *b, jv v) {
    switch (v.t) {
    case JV_UNDEF: sb_s(b, "Undefined"); return;
    case JV_NONE: sb_s(b, "None"); return;
    case JV_BOOL: sb_s(b, v.u.b ? "True" : "False"); return;
    case JV_INT: fmt_int(b, v.u.i); return;
    case JV_FLOAT: fmt_float(b, v.u.f, 0); return;
    case JV_STR: repr_str(b, v.u.s.p, v.u.s.n); return;
    case JV_LIST:
        sb_c(b, v.u.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) sb_s(b, ", ");
            py_repr(b, v.u.l->v[i]);
        }
        if (v.u.l->tuple && v.u.l->n == 1) sb_c(b, ',');
        sb_c(b, v.u.l->tuple ? ')' : ']');
        return;
    case JV_DICT:
        sb_c(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) sb_s(b, ", ");
            py_repr(b, v.u.d->k[i]);
            sb_s(b, ": ");
            py_repr(b, v.u.d->v[i]);
        }
        sb_c(b, '}');
        return;
    case JV_NS: sb_s(b, "<Namespace>"); return;
    case JV_LOOP: {
        char t[64];
        snprintf(t, sizeof t, "<LoopContext %zu/%zu>", v.u.lp->i + 1, v.u.lp->items->n);
        sb_s(b, t);
        return;
    }
    case JV_MACRO: sb_s(b, "<Macro>"); return;
    case JV_FUNC: sb_s(b, "<function>"); return;
    }
}

static jv to_str(rctx *r, jv v) {
    if (v.t == JV_STR) return v;
    sb b = {.e = &r->e};
    py_str(&b, v);
    return sb_v(&b);
}

typedef struct jsonopt {
    const char *indent; /* NULL: compact one-line form */
    const char *item_sep, *key_sep;
    int sort_keys, ensure_ascii;
    int line;
} jsonopt;

static void json_str(sb *b, const char *s, size_t n, int ascii) {
    sb_c(b, '"');
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t ch = u8_dec(s + i, n - i, &l);
        char t[16];
        switch (ch) {
        case '"': sb_s(b, "\\\""); break;
        case '\\': sb_s(b, "\\\\"); break;
        case '\n': sb_s(b, "\\n"); break;
        case '\r': sb_s(b, "\\r"); break;
        case '\t': sb_s(b, "\\t"); break;
        case '\b': sb_s(b, "\\b"); break;
        case '\f': sb_s(b, "\\f"); break;
        default:
            if (ch < 0x20) {
                snprintf(t, sizeof t, "\\u%04x", ch);
                sb_s(b, t);
            } else if (ascii && ch >= 0x80) {
                if (ch >= 0x10000) {
                    uint32_t v = ch - 0x10000;
                    snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                } else {
                    snprintf(t, sizeof t, "\\u%04x", ch);
                }
                sb_s(b, t);
            } else {
                sb_put(b, s + i, l);
            }
        }
        i += l;
    }
    sb_c(b, '"');
}

static int cmp_vals(rctx *r, jv a, jv b, int line);

static void json_nl(sb *b, const jsonopt *o, int level) {
    sb_c(b, '\n');
    for (int i = 0; i < level; i++) sb_s(b, o->indent);
}

static void to_json(rctx *r, sb *b, jv v, const jsonopt *o, int level) {
    switch (v.t) {
    case JV_NONE: sb_s(b, "null"); return;
    case JV_BOOL: sb_s(b, v.u.b ? "true" : "false"); return;
    case JV_INT: fmt_int(b, v.u.i); return;
    case JV_FLOAT: fmt_float(b, v.u.f, 1); return;
    case JV_STR: json_str(b, v.u.s.p, v.u.s.n, o->ensure_ascii); return;
    case JV_LIST:
        if (!v.u.l->n) { sb_s(b, "[]"); return; }
        sb_c(b, '[');
        if (o->indent) json_nl(b, o, level + 1);
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) {
                sb_s(b, o->item_sep);
                if (o->indent) json_nl(b, o, level + 1);
            }
            to_json(r, b, v.u.l->v[i], o, level + 1);
        }
        if (o->indent) json_nl(b, o, level);
        sb_c(b, ']');
        return;
    case JV_DICT: {
        jdict *d = v.u.d;
        if (!d->n) { sb_s(b, "{}"); return; }
        size_t *ord = jalloc(&r->e, d->n * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (o->sort_keys) /* insertion sort: stable, and dicts here are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && cmp_vals(r, d->k[ord[j - 1]], d->k[ord[j]], o->line) > 0; j--) {
                    size_t t = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = t;
                }
        sb_c(b, '{');
        if (o->indent) json_nl(b, o, level + 1);
        for (size_t i = 0; i < d->n; i++) {
            if (i) {
                sb_s(b, o->item_sep);
                if (o->indent) json_nl(b, o, level + 1);
            }
            jv k = d->k[ord[i]];
            if (k.t == JV_STR) json_str(b, k.u.s.p, k.u.s.n, o->ensure_ascii);
            else if (k.t == JV_NONE || k.t == JV_BOOL || k.t == JV_INT || k.t == JV_FLOAT) {
                sb t = {.e = &r->e};
                to_json(r, &t, k, o, 0);
                json_str(b, t.p, t.n, 0);
            } else RF(r, o->line, "tojson: keys must be str, int, float, bool or None, not %s", type_name(k));
            sb_s(b, o->key_sep);
            to_json(r, b, d->v[ord[i]], o, level + 1);
        }
        if (o->indent) json_nl(b, o, level);
        sb_c(b, '}');
        return;
    }
    default:
        RF(r, o->line, "tojson: Object of type %s is not JSON serializable", type_name(v));
    }
}

/* ---- conversions from cJSON */

static jv from_json(rctx *r, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return v_none();
    if (cJSON_IsTrue(j)) return v_bool(1);
    if (cJSON_IsFalse(j)) return v_bool(0);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return v_int((int64_t)d);
        return v_float(d);
    }
    if (cJSON_IsString(j)) return v_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        jlist *l = l_new(&r->e, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next) l_push(&r->e, l, from_json(r, c));
        return v_list(l);
    }
    if (cJSON_IsObject(j)) {
        jdict *d = d_new(&r->e);
        for (const cJSON *c = j->child; c; c = c->next)
            d_set(&r->e, d, v_cstr(c->string ? c->string : ""), from_json(r, c));
        return v_dict(d);
    }
    return v_none();
}

/* ---- comparisons and arithmetic */

static int cmp_vals(rctx *r, jv a, jv b, int line) {
    if (is_num(a) && is_num(b)) {
        if (is_intish(a) && is_intish(b)) return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
        double x = as_dbl(a), y = as_dbl(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c) return c < 0 ? -1 : 1;
        return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return cmp_vals(r, a.u.l->v[i], b.u.l->v[i], line);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        RF(r, line, "'%s' is undefined", a.t == JV_UNDEF ? (a.u.s.p ? a.u.s.p : "value") : (b.u.s.p ? b.u.s.p : "value"));
    RF(r, line, "comparison not supported between instances of '%s' and '%s'", type_name(a), type_name(b));
}

static _Noreturn void undef_fail(rctx *r, jv u, int line) {
    RF(r, line, "'%.200s' is undefined", u.u.s.p ? u.u.s.p : "value");
}

static jv str_repeat(rctx *r, jv s, int64_t k) {
    if (k > 0 && s.u.s.n && (uint64_t)k > JINJA_MAX_BYTES / s.u.s.n)
        RF(r, r->e.line, "a string of %zu bytes repeated %lld times exceeds the template's %zu MB", s.u.s.n, (long long)k,
           JINJA_MAX_BYTES >> 20);
    sb b = {.e = &r->e};
    sb_put(&b, "", 0);
    for (int64_t i = 0; i < k; i++) sb_sv(&b, s);
    return sb_v(&b);
}

static int contains(rctx *r, jv hay, jv needle, int line) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            RF(r, line, "'in <string>' requires string as left operand, not %s", type_name(needle));
        if (!needle.u.s.n) return 1;
        if (needle.u.s.n > hay.u.s.n) return 0;
        for (size_t i = 0; i + needle.u.s.n <= hay.u.s.n; i++)
            if (memcmp(hay.u.s.p + i, needle.u.s.p, needle.u.s.n) == 0) return 1;
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_eq(hay.u.l->v[i], needle)) return 1;
        return 0;
    case JV_DICT: case JV_NS: return d_getv(hay.u.d, needle) != NULL;
    case JV_UNDEF: return 0;
    default: RF(r, line, "argument of type '%s' is not iterable", type_name(hay));
    }
}

static jv binop(rctx *r, int op, jv a, jv b, int line) {
    if (op == OP_CAT) {
        sb o = {.e = &r->e};
        sb_put(&o, "", 0);
        py_str(&o, a);
        py_str(&o, b);
        return sb_v(&o);
    }
    switch (op) {
    case OP_EQ: return v_bool(jv_eq(a, b));
    case OP_NE: return v_bool(!jv_eq(a, b));
    case OP_LT: return v_bool(cmp_vals(r, a, b, line) < 0);
    case OP_LE: return v_bool(cmp_vals(r, a, b, line) <= 0);
    case OP_GT: return v_bool(cmp_vals(r, a, b, line) > 0);
    case OP_GE: return v_bool(cmp_vals(r, a, b, line) >= 0);
    case OP_IN: return v_bool(contains(r, b, a, line));
    case OP_NOTIN: return v_bool(!contains(r, b, a, line));
    default: break;
    }
    if (a.t == JV_UNDEF) undef_fail(r, a, line);
    if (b.t == JV_UNDEF) undef_fail(r, b, line);
    static const char *const opn[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        sb o = {.e = &r->e};
        sb_put(&o, "", 0);
        sb_sv(&o, a);
        sb_sv(&o, b);
        return sb_v(&o);
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        jlist *l = l_new(&r->e, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++) l_push(&r->e, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) l_push(&r->e, l, b.u.l->v[i]);
        return v_list(l);
    }
    if (op == OP_MUL && ((a.t == JV_STR && is_intish(b)) || (b.t == JV_STR && is_intish(a)))) {
        return a.t == JV_STR ? str_repeat(r, a, as_int(b)) : str_repeat(r, b, as_int(a));
    }
    if (op == OP_MUL && a.t == JV_LIST && is_intish(b)) {
        if (as_int(b) > 0 && a.u.l->n && (uint64_t)as_int(b) > JINJA_MAX_BYTES / sizeof(jv) / a.u.l->n)
            RF(r, line, "a list of %zu items repeated %lld times exceeds the template's %zu MB", a.u.l->n,
               (long long)as_int(b), JINJA_MAX_BYTES >> 20);
        jlist *l = l_new(&r->e, 4);
        for (int64_t k = 0; k < as_int(b); k++)
            for (size_t i = 0; i < a.u.l->n; i++) l_push(&r->e, l, a.u.l->v[i]);
        return v_list(l);
    }
    if (op == OP_MOD && a.t == JV_STR)
        jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported: printf-style string formatting with '%%'");
    if (!is_num(a) || !is_num(b))
        RF(r, line, "unsupported operand type(s) for %s: '%s' and '%s'", opn[op], type_name(a), type_name(b));
    if (is_intish(a) && is_intish(b) && op != OP_DIV) {
        int64_t x = as_int(a), y = as_int(b), z;
        switch (op) {
        case OP_ADD: if (!__builtin_add_overflow(x, y, &z)) return v_int(z); break;
        case OP_SUB: if (!__builtin_sub_overflow(x, y, &z)) return v_int(z); break;
        case OP_MUL: if (!__builtin_mul_overflow(x, y, &z)) return v_int(z); break;
        case OP_FDIV: case OP_MOD: {
            if (y == 0) RF(r, line, "integer division or modulo by zero");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
            return v_int(op == OP_FDIV ? q : m);
        }
        case OP_POW:
            if (y >= 0) { /* by squaring: O(log y) steps also for a base of 0 or +-1 */
                int64_t acc = 1, base = x;
                int ovf = 0;
                for (; y && !ovf; y >>= 1) {
                    if (y & 1) ovf = __builtin_mul_overflow(acc, base, &acc);
                    if (y > 1 && !ovf) ovf = __builtin_mul_overflow(base, base, &base);
                }
                if (!ovf) return v_int(acc);
            }
            break;
        }
    }
    double x = as_dbl(a), y = as_dbl(b);
    switch (op) {
    case OP_ADD: return v_float(x + y);
    case OP_SUB: return v_float(x - y);
    case OP_MUL: return v_float(x * y);
    case OP_DIV:
        if (y == 0) RF(r, line, "division by zero");
        return v_float(x / y);
    case OP_FDIV:
        if (y == 0) RF(r, line, "float floor division by zero");
        return v_float(floor(x / y));
    case OP_MOD: {
        if (y == 0) RF(r, line, "float modulo");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return v_float(m);
    }
    default: return v_float(pow(x, y));
    }
}

/* ---- attribute / item access */

static jv loop_attr(rctx *r, jloop *lp, const char *name) {
    size_t n = lp->items->n, i = lp->i;
    if (!strcmp(name, "index")) return v_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return v_int((int64_t)i);
    if (!strcmp(name, "revindex")) return v_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return v_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return v_bool(i == 0);
    if (!strcmp(name, "last")) return v_bool(i + 1 == n);
    if (!strcmp(name, "length")) return v_int((int64_t)n);
    if (!strcmp(name, "depth")) return v_int(1);
    if (!strcmp(name, "depth0")) return v_int(0);
    if (!strcmp(name, "previtem")) return i > 0 ? lp->items->v[i - 1] : v_undef("previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? lp->items->v[i + 1] : v_undef("nextitem");
    (void)r;
    return v_undef(name);
}

static jv get_attr(rctx *r, jv o, const char *name, int line) {
    switch (o.t) {
    case JV_DICT: case JV_NS: {
        jv *v = d_get(o.u.d, name, strlen(name));
        return v ? *v : v_undef(name);
    }
    case JV_LOOP: return loop_attr(r, o.u.lp, name);
    case JV_UNDEF: undef_fail(r, o, line);
    default: return v_undef(name);
    }
}


static jv get_item(rctx *r, jv o, jv k, int line) {
    switch (o.t) {
    case JV_DICT: case JV_NS: {
        jv *v = d_getv(o.u.d, k);
        return v ? *v : v_undef(k.t == JV_STR ? jstrdup(&r->e, k.u.s.p, k.u.s.n) : NULL);
    }
    case JV_LIST:
        if (is_intish(k)) {
            int64_t i = as_int(k), n = (int64_t)o.u.l->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return v_undef(NULL);
            return o.u.l->v[i];
        }
        return v_undef(NULL);
    case JV_STR:
        if (is_intish(k)) {
            size_t *offs;
            int64_t n = (int64_t)u8_offsets(&r->e, o.u.s.p, o.u.s.n, &offs), i = as_int(k);
            if (i < 0) i += n;
            if (i < 0 || i >= n) return v_undef(NULL);
            return v_str(o.u.s.p + offs[i], offs[i + 1] - offs[i]);
        }
        return v_undef(NULL);
    case JV_LOOP:
        if (k.t == JV_STR) return loop_attr(r, o.u.lp, jstrdup(&r->e, k.u.s.p, k.u.s.n));
        return v_undef(NULL);
    case JV_UNDEF: undef_fail(r, o, line);
    default: return v_undef(NULL);
    }
}

/* Python slice index adjustment */
static int64_t slice_count(int64_t len, int64_t *start, int64_t *stop, int64_t step, int has_start, int has_stop) {
    if (!has_start) *start = step < 0 ? len - 1 : 0;
    else {
        if (*start < 0) *start += len;
        if (*start < 0) *start = step < 0 ? -1 : 0;
        else if (*start >= len) *start = step < 0 ? len - 1 : len;
    }
    if (!has_stop) *stop = step < 0 ? -1 : len;
    else {
        if (*stop < 0) *stop += len;
        if (*stop < 0) *stop = step < 0 ? -1 : 0;
        else if (*stop >= len) *stop = step < 0 ? len - 1 : len;
    }
    if (step < 0) return *stop < *start ? (*start - *stop - 1) / (-step) + 1 : 0;
    return *start < *stop ? (*stop - *start - 1) / step + 1 : 0;
}

static jv do_slice(rctx *r, jv o, jv a, jv b, jv c, int line) {
    int64_t step = 1, start = 0, stop = 0;
    if (c.t != JV_NONE && c.t != JV_UNDEF) {
        if (!is_intish(c)) RF(r, line, "slice indices must be integers");
        step = as_int(c);
        if (step == 0) RF(r, line, "slice step cannot be zero");
    }
    int hs = a.t != JV_NONE && a.t != JV_UNDEF, he = b.t != JV_NONE && b.t != JV_UNDEF;
    if ((hs && !is_intish(a)) || (he && !is_intish(b))) RF(r, line, "slice indices must be integers");
    if (hs) start = as_int(a);
    if (he) stop = as_int(b);
    if (o.t == JV_LIST) {
        int64_t cnt = slice_count((int64_t)o.u.l->n, &start, &stop, step, hs, he);
        jlist *l = l_new(&r->e, (size_t)cnt);
        for (int64_t k = 0, i = start; k < cnt; k++, i += step) l_push(&r->e, l, o.u.l->v[i]);
        return v_list(l);
    }
    if (o.t == JV_STR) {
        size_t *offs;
        int64_t n = (int64_t)u8_offsets(&r->e, o.u.s.p, o.u.s.n, &offs);
        int64_t cnt = slice_count(n, &start, &stop, step, hs, he);
        sb s = {.e = &r->e};
        sb_put(&s, "", 0);
        for (int64_t k = 0, i = start; k < cnt; k++, i += step)
            sb_put(&s, o.u.s.p + offs[i], offs[i + 1] - offs[i]);
        return sb_v(&s);
    }
    if (o.t == JV_UNDEF) undef_fail(r, o, line);
    RF(r, line, "'%s' object is not subscriptable", type_name(o));
}

/* iteration */
static jlist *iter_list(rctx *r, jv v, int line) {
    switch (v.t) {
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        jlist *l = l_new(&r->e, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) l_push(&r->e, l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jlist *l = l_new(&r->e, v.u.s.n);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k;
            u8_dec(v.u.s.p + i, v.u.s.n - i, &k);
            l_push(&r->e, l, v_str(v.u.s.p + i, k));
            i += k;
        }
        return l;
    }
    case JV_UNDEF: return l_new(&r->e, 1);
    default: RF(r, line, "'%s' object is not iterable", type_name(v));
    }
}

/* ---- string helpers (Python str methods) */

static int in_chars(uint32_t ch, jv chars) {
    for (size_t i = 0; i < chars.u.s.n;) {
        size_t l;
        uint32_t c = u8_dec(chars.u.s.p + i, chars.u.s.n - i, &l);
        if (c == ch) return 1;
        i += l;
    }
    return 0;
}

/* how: 1 left, 2 right, 3 both; chars: JV_STR set or anything else for whitespace */
static jv str_strip(jv s, jv chars, int how) {
    const char *p = s.u.s.p;
    size_t b = 0, e = s.u.s.n;
    int ws = chars.t != JV_STR;
    if (how & 1)
        while (b < e) {
            size_t l;
            uint32_t c = u8_dec(p + b, e - b, &l);
            if (ws ? !py_space(c) : !in_chars(c, chars)) break;
            b += l;
        }
    if (how & 2)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            size_t l;
            uint32_t c = u8_dec(p + st, e - st, &l);
            if (st + l != e) { st = e - 1; c = (unsigned char)p[st]; }
            if (ws ? !py_space(c) : !in_chars(c, chars)) break;
            e = st;
        }
    return v_str(p + b, e - b);
}

static const char *memfind(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, n, nn) == 0) return h + i;
    return NULL;
}
static const char *memrfind(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, n, nn) == 0) return h + i;
    return NULL;
}

static jv str_split(rctx *r, jv s, jv sep, int64_t maxsplit, int right, int line) {
    jlist *l = l_new(&r->e, 4);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (sep.t != JV_STR) { /* whitespace runs, empties dropped */
        jv parts[1];
        (void)parts;
        jlist *tmp = l_new(&r->e, 4);
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                while (i < n) { size_t k; uint32_t c = u8_dec(p + i, n - i, &k); if (!py_space(c)) break; i += k; }
                if (i >= n) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    jv rest = str_strip(v_str(p + i, n - i), v_none(), 2);
                    l_push(&r->e, tmp, rest);
                    break;
                }
                size_t b = i;
                while (i < n) { size_t k; uint32_t c = u8_dec(p + i, n - i, &k); if (py_space(c)) break; i += k; }
                l_push(&r->e, tmp, v_str(p + b, i - b));
                splits++;
            }
            return v_list(tmp);
        }
        /* rsplit on whitespace */
        size_t e = n;
        int64_t splits = 0;
        for (;;) {
            while (e > 0 && c_ws(p[e - 1])) e--;
            if (e == 0) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                l_push(&r->e, tmp, v_str(p, e));
                break;
            }
            size_t b = e;
            while (b > 0 && !c_ws(p[b - 1])) b--;
            l_push(&r->e, tmp, v_str(p + b, e - b));
            e = b;
            splits++;
        }
        for (size_t i = tmp->n; i-- > 0;) l_push(&r->e, l, tmp->v[i]);
        return v_list(l);
    }
    if (sep.u.s.n == 0) RF(r, line, "split: empty separator");
    if (!right) {
        size_t i = 0;
        int64_t splits = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || splits < maxsplit) ? memfind(p + i, n - i, sep.u.s.p, sep.u.s.n) : NULL;
            if (!f) {
                l_push(&r->e, l, v_str(p + i, n - i));
                break;
            }
            l_push(&r->e, l, v_str(p + i, (size_t)(f - (p + i))));
            i = (size_t)(f - p) + sep.u.s.n;
            splits++;
        }
        return v_list(l);
    }
    jlist *tmp = l_new(&r->e, 4);
    size_t e = n;
    int64_t splits = 0;
    for (;;) {
        const char *f = (maxsplit < 0 || splits < maxsplit) ? memrfind(p, e, sep.u.s.p, sep.u.s.n) : NULL;
        if (!f) {
            l_push(&r->e, tmp, v_str(p, e));
            break;
        }
        size_t fi = (size_t)(f - p);
        l_push(&r->e, tmp, v_str(p + fi + sep.u.s.n, e - fi - sep.u.s.n));
        e = fi;
        splits++;
    }
    for (size_t i = tmp->n; i-- > 0;) l_push(&r->e, l, tmp->v[i]);
    return v_list(l);
}

static jv str_replace(rctx *r, jv s, jv old, jv nw, int64_t count) {
    sb b = {.e = &r->e};
    sb_put(&b, "", 0);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    if (old.u.s.n == 0) {
        while (i <= n) {
            if (count >= 0 && done >= count) { sb_put(&b, p + i, n - i); break; }
            sb_sv(&b, nw);
            done++;
            if (i == n) break;
            size_t l;
            u8_dec(p + i, n - i, &l);
            sb_put(&b, p + i, l);
            i += l;
        }
        return sb_v(&b);
    }
    while (i < n) {
        const char *f = (count < 0 || done < count) ? memfind(p + i, n - i, old.u.s.p, old.u.s.n) : NULL;
        if (!f) break;
        sb_put(&b, p + i, (size_t)(f - (p + i)));
        sb_sv(&b, nw);
        i = (size_t)(f - p) + old.u.s.n;
        done++;
    }
    sb_put(&b, p + i, n - i);
    return sb_v(&b);
}

/* Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (what Python's
 * str.upper/lower do for those letters, minus the few that change length, like U+00DF). */
static uint32_t case_map(uint32_t c, int up) {
    if (c < 0x80) {
        if (up && c >= 'a' && c <= 'z') return c - 32;
        if (!up && c >= 'A' && c <= 'Z') return c + 32;
        return c;
    }
    if (up) {
        if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
            (c >= 0x430 && c <= 0x44F))
            return c - 32;
        if (c == 0x3C2) return 0x3A3;
        if (c == 0xFF) return 0x178;
        if (c >= 0x450 && c <= 0x45F) return c - 80;
        if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
            int odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
            if (odd_upper ? !(c & 1) : (c & 1)) return c - 1;
        }
        return c;
    }
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
        (c >= 0x410 && c <= 0x42F))
        return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        int odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper ? (c & 1) : !(c & 1)) return c + 1;
    }
    return c;
}

/* mode: 0 lower, 1 upper, 2 capitalize, 3 title */
static jv str_case(rctx *r, jv s, int mode) {
    sb b = {.e = &r->e};
    sb_put(&b, "", 0);
    int prev_sep = 1, first = 1;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t l;
        uint32_t c = u8_dec(s.u.s.p + i, s.u.s.n - i, &l);
        int up = mode == 1 || (mode == 2 && first) || (mode == 3 && prev_sep);
        uint32_t m = case_map(c, up);
        if (m == c) sb_put(&b, s.u.s.p + i, l);
        else u8_enc(&b, m);
        if (mode == 3) prev_sep = py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        first = 0;
        i += l;
    }
    return sb_v(&b);
}

static int starts_with(jv s, jv pre) {
    return pre.t == JV_STR && pre.u.s.n <= s.u.s.n && memcmp(s.u.s.p, pre.u.s.p, pre.u.s.n) == 0;
}
static int ends_with(jv s, jv suf) {
    return suf.t == JV_STR && suf.u.s.n <= s.u.s.n &&
           memcmp(s.u.s.p + s.u.s.n - suf.u.s.n, suf.u.s.p, suf.u.s.n) == 0;
}

/* splitlines without keepends */
static jlist *splitlines(rctx *r, jv s) {
    jlist *l = l_new(&r->e, 4);
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, b = 0, i = 0;
    while (i < n) {
        size_t k;
        uint32_t c = u8_dec(p + i, n - i, &k);
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
            c == 0x2028 || c == 0x2029) {
            l_push(&r->e, l, v_str(p + b, i - b));
            if (c == '\r' && i + 1 < n && p[i + 1] == '\n') k = 2;
            i += k;
            b = i;
        } else {
            i += k;
        }
    }
    if (b < n) l_push(&r->e, l, v_str(p + b, n - b));
    return l;
}

/* ---- arguments */

typedef struct jargs {
    const jv *a;
    int na;
    const char *const *kn;
    const jv *kv;
    int nk;
} jargs;

static jv arg(const jargs *g, int pos, const char *kw, jv def) {
    if (pos >= 0 && pos < g->na) return g->a[pos];
    for (int k = 0; k < g->nk; k++)
        if (kw && strcmp(g->kn[k], kw) == 0) return g->kv[k];
    return def;
}

static jv need_str(rctx *r, jv v, const char *what, int line) {
    if (v.t != JV_STR) RF(r, line, "%s: expected a string, got %s", what, type_name(v));
    return v;
}

/* ---- tests */

static int apply_test(rctx *r, int id, jv v, const jargs *g, int line) {
    jv a0 = arg(g, 0, NULL, v_undef(NULL));
    switch (id) {
    case TS_defined: return v.t != JV_UNDEF;
    case TS_undefined: return v.t == JV_UNDEF;
    case TS_none: return v.t == JV_NONE;
    case TS_boolean: return v.t == JV_BOOL;
    case TS_false: return v.t == JV_BOOL && !v.u.b;
    case TS_true: return v.t == JV_BOOL && v.u.b;
    case TS_integer: return v.t == JV_INT;
    case TS_float: return v.t == JV_FLOAT;
    case TS_number: return is_num(v);
    case TS_string: return v.t == JV_STR;
    case TS_mapping: return v.t == JV_DICT;
    case TS_iterable: return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    case TS_sequence: return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
    case TS_callable: return v.t == JV_MACRO || v.t == JV_FUNC;
    case TS_sameas:
        if (v.t != a0.t) return 0;
        if (v.t == JV_NONE || v.t == JV_UNDEF) return 1;
        if (v.t == JV_BOOL) return v.u.b == a0.u.b;
        if (v.t == JV_LIST) return v.u.l == a0.u.l;
        if (v.t == JV_DICT || v.t == JV_NS) return v.u.d == a0.u.d;
        return jv_eq(v, a0);
    case TS_escaped: return 0;
    case TS_odd: case TS_even:
        if (!is_intish(v)) RF(r, line, "test '%s' needs an integer", test_names[id]);
        return (((as_int(v) % 2) + 2) % 2) == (id == TS_odd);
    case TS_divisibleby:
        if (!is_num(v) || !is_num(a0)) RF(r, line, "test 'divisibleby' needs numbers");
        if (as_dbl(a0) == 0) RF(r, line, "divisibleby(0)");
        return fmod(as_dbl(v), as_dbl(a0)) == 0;
    case TS_eq: case TS_equalto: return jv_eq(v, a0);
    case TS_ne: return !jv_eq(v, a0);
    case TS_lt: case TS_lessthan: return cmp_vals(r, v, a0, line) < 0;
    case TS_le: return cmp_vals(r, v, a0, line) <= 0;
    case TS_gt: case TS_greaterthan: return cmp_vals(r, v, a0, line) > 0;
    case TS_ge: return cmp_vals(r, v, a0, line) >= 0;
    case TS_in: return contains(r, a0, v, line);
    case TS_lower: case TS_upper: {
        if (v.t != JV_STR) return 0;
        int any = 0;
        for (size_t i = 0; i < v.u.s.n; i++) {
            char c = v.u.s.p[i];
            if ((c >= 'a' && c <= 'z')) { any = 1; if (id == TS_upper) return 0; }
            if ((c >= 'A' && c <= 'Z')) { any = 1; if (id == TS_lower) return 0; }
        }
        return any;
    }
    case TS_filter: case TS_test: {
        if (a0.t != JV_STR) return 0;
        char *nm = jstrdup(&r->e, a0.u.s.p, a0.u.s.n);
        return find_name(id == TS_filter ? filter_names : test_names, id == TS_filter ? F_COUNT_ : TS_COUNT_, nm) >= 0;
    }
    }
    jfail(&r->e, IG_ERR_INTERNAL, line, "bad test id");
}

/* ---- filters */

static jv apply_filter(rctx *r, int id, jv v, const jargs *g, int line);

/* attribute path "a.b.0" as jinja2's make_attrgetter */
static jv attr_path(rctx *r, jv v, jv path, int line) {
    if (is_intish(path)) return get_item(r, v, path, line);
    if (path.t != JV_STR) RF(r, line, "attribute must be a string");
    const char *p = path.u.s.p, *e = p + path.u.s.n;
    while (p <= e) {
        const char *d = memchr(p, '.', (size_t)(e - p));
        if (!d) d = e;
        size_t n = (size_t)(d - p);
        int digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
        jv k = digits ? v_int(strtoll(jstrdup(&r->e, p, n), NULL, 10)) : v_str(jstrdup(&r->e, p, n), n);
        if (v.t == JV_UNDEF) return v;
        v = get_item(r, v, k, line);
        if (k.t == JV_STR && v.t == JV_UNDEF) v.u.s.p = k.u.s.p, v.u.s.n = k.u.s.n;
        p = d + 1;
    }
    return v;
}

static int lookup_test(rctx *r, jv name, int line) {
    if (name.t != JV_STR) RF(r, line, "test name must be a string");
    int id = find_name(test_names, TS_COUNT_, jstrdup(&r->e, name.u.s.p, name.u.s.n));
    if (id < 0) jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported test '%.*s'", (int)name.u.s.n, name.u.s.p);
    return id;
}

/* select / reject / selectattr / rejectattr */
static jv select_impl(rctx *r, jv v, const jargs *g, int by_attr, int keep, int line) {
    jlist *in = iter_list(r, v, line), *out = l_new(&r->e, in->n);
    int off = by_attr ? 1 : 0;
    jv attr = by_attr ? arg(g, 0, NULL, v_undef(NULL)) : v_none();
    int has_test = g->na > off;
    int tid = has_test ? lookup_test(r, g->a[off], line) : -1;
    jargs tg = {g->a + off + 1, has_test ? g->na - off - 1 : 0, g->kn, g->kv, g->nk};
    for (size_t i = 0; i < in->n; i++) {
        jv x = by_attr ? attr_path(r, in->v[i], attr, line) : in->v[i];
        int ok = has_test ? apply_test(r, tid, x, &tg, line) : truthy(x);
        if (ok == keep) l_push(&r->e, out, in->v[i]);
    }
    return v_list(out);
}

static int sort_cmp(rctx *r, jv a, jv b, int cs, int line) {
    if (!cs && a.t == JV_STR && b.t == JV_STR) return cmp_vals(r, str_case(r, a, 0), str_case(r, b, 0), line);
    return cmp_vals(r, a, b, line);
}

static void stable_sort(rctx *r, jv *keys, jv *vals, size_t n, int cs, int rev, int line) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            int c = sort_cmp(r, keys[j - 1], keys[j], cs, line);
            if (rev ? c >= 0 : c <= 0) break;
            jv t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
            t = vals[j]; vals[j] = vals[j - 1]; vals[j - 1] = t;
        }
}

static jv html_escape(rctx *r, jv s) {
    sb b = {.e = &r->e};
    sb_put(&b, "", 0);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        switch (c) {
        case '&': sb_s(&b, "&amp;"); break;
        case '<': sb_s(&b, "&lt;"); break;
        case '>': sb_s(&b, "&gt;"); break;
        case '"': sb_s(&b, "&#34;"); break;
        case '\'': sb_s(&b, "&#39;"); break;
        default: sb_c(&b, c);
        }
    }
    return sb_v(&b);
}

static int parse_int_str(jv s, int64_t *out) {
    char buf[64];
    jv t = str_strip(s, v_none(), 3);
    size_t k = 0;
    for (size_t i = 0; i < t.u.s.n && k < sizeof buf - 1; i++)
        if (t.u.s.p[i] != '_') buf[k++] = t.u.s.p[i];
    buf[k] = 0;
    if (!k) return 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (*end) return 0;
    *out = v;
    return 1;
}
static int parse_float_str(jv s, double *out) {
    char buf[64];
    jv t = str_strip(s, v_none(), 3);
    if (!t.u.s.n || t.u.s.n >= sizeof buf) return 0;
    memcpy(buf, t.u.s.p, t.u.s.n);
    buf[t.u.s.n] = 0;
    char *end;
    double d = strtod(buf, &end);
    if (*end) return 0;
    *out = d;
    return 1;
}

static jv apply_filter(rctx *r, int id, jv v, const jargs *g, int line) {
    jv U = v_undef(NULL);
    switch (id) {
    case F_abs:
        if (v.t == JV_INT) return v_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == JV_BOOL) return v_int(v.u.b);
        if (v.t == JV_FLOAT) return v_float(fabs(v.u.f));
        RF(r, line, "bad operand type for abs(): '%s'", type_name(v));
    case F_attr: {
        jv a = arg(g, 0, "name", U);
        if (a.t != JV_STR) RF(r, line, "attr: name must be a string");
        if (v.t == JV_DICT) return v_undef(NULL); /* jinja2's attr() uses getattr only */
        return get_attr(r, v, jstrdup(&r->e, a.u.s.p, a.u.s.n), line);
    }
    case F_capitalize: return str_case(r, to_str(r, v), 2);
    case F_count: case F_length:
        switch (v.t) {
        case JV_STR: return v_int((int64_t)u8_len(v.u.s.p, v.u.s.n));
        case JV_LIST: return v_int((int64_t)v.u.l->n);
        case JV_DICT: case JV_NS: return v_int((int64_t)v.u.d->n);
        case JV_UNDEF: return v_int(0);
        default: RF(r, line, "object of type '%s' has no len()", type_name(v));
        }
    case F_d: case F_default: {
        jv dv = arg(g, 0, "default_value", v_cstr(""));
        int boolean = truthy(arg(g, 1, "boolean", v_bool(0)));
        if (v.t == JV_UNDEF || (boolean && !truthy(v))) return dv;
        return v;
    }
    case F_dictsort: {
        if (v.t != JV_DICT) RF(r, line, "dictsort: expected a dict, got %s", type_name(v));
        int cs = truthy(arg(g, 0, "case_sensitive", v_bool(0)));
        jv by = arg(g, 1, "by", v_cstr("key"));
        int rev = truthy(arg(g, 2, "reverse", v_bool(0)));
        size_t n = v.u.d->n;
        jv *keys = jalloc(&r->e, (n + 1) * sizeof(jv)), *vals = jalloc(&r->e, (n + 1) * sizeof(jv));
        for (size_t i = 0; i < n; i++) {
            vals[i] = v_pair(&r->e, v.u.d->k[i], v.u.d->v[i]);
            keys[i] = streq(by, "value", 5) ? v.u.d->v[i] : v.u.d->k[i];
        }
        stable_sort(r, keys, vals, n, cs, rev, line);
        jlist *l = l_new(&r->e, n);
        for (size_t i = 0; i < n; i++) l_push(&r->e, l, vals[i]);
        return v_list(l);
    }
    case F_e: case F_escape: return html_escape(r, to_str(r, v));
    case F_first: case F_last: {
        jlist *l = iter_list(r, v, line);
        if (!l->n) return v_undef(NULL);
        return id == F_first ? l->v[0] : l->v[l->n - 1];
    }
    case F_float: {
        jv dv = arg(g, 0, "default", v_float(0.0));
        if (is_num(v)) return v_float(as_dbl(v));
        double d;
        if (v.t == JV_STR && parse_float_str(v, &d)) return v_float(d);
        return dv;
    }
    case F_int: {
        jv dv = arg(g, 0, "default", v_int(0));
        if (is_num(v)) return v_int(v.t == JV_FLOAT ? (int64_t)trunc(v.u.f) : as_int(v));
        int64_t i;
        double d;
        if (v.t == JV_STR && parse_int_str(v, &i)) return v_int(i);
        if (v.t == JV_STR && parse_float_str(v, &d)) return v_int((int64_t)trunc(d));
        return dv;
    }
    case F_indent: {
        jv w = arg(g, 0, "width", v_int(4));
        int first = truthy(arg(g, 1, "first", v_bool(0))), blank = truthy(arg(g, 2, "blank", v_bool(0)));
        jv ind = w.t == JV_STR ? w : str_repeat(r, v_cstr(" "), is_intish(w) ? as_int(w) : 4);
        sb s0 = {.e = &r->e};
        py_str(&s0, v);
        sb_c(&s0, '\n');
        jlist *lines = splitlines(r, sb_v(&s0));
        sb b = {.e = &r->e};
        sb_put(&b, "", 0);
        if (first) sb_sv(&b, ind);
        for (size_t i = 0; i < lines->n; i++) {
            jv ln = lines->v[i];
            if (i) {
                sb_c(&b, '\n');
                if (blank || ln.u.s.n) sb_sv(&b, ind);
            }
            sb_sv(&b, ln);
        }
        return sb_v(&b);
    }
    case F_items: {
        if (v.t == JV_UNDEF) return v_list(l_new(&r->e, 1));
        if (v.t != JV_DICT) RF(r, line, "items: expected a mapping, got %s", type_name(v));
        jlist *l = l_new(&r->e, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) {
            l_push(&r->e, l, v_pair(&r->e, v.u.d->k[i], v.u.d->v[i]));
        }
        return v_list(l);
    }
    case F_join: {
        jv sep = arg(g, 0, "d", v_cstr(""));
        jv at = arg(g, 1, "attribute", v_none());
        jlist *l = iter_list(r, v, line);
        sb b = {.e = &r->e};
        sb_put(&b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (i) py_str(&b, sep);
            py_str(&b, at.t == JV_NONE ? l->v[i] : attr_path(r, l->v[i], at, line));
        }
        return sb_v(&b);
    }
    case F_list: {
        jlist *l = iter_list(r, v, line), *o = l_new(&r->e, l->n);
        for (size_t i = 0; i < l->n; i++) l_push(&r->e, o, l->v[i]);
        return v_list(o);
    }
    case F_lower: return str_case(r, to_str(r, v), 0);
    case F_upper: return str_case(r, to_str(r, v), 1);
    case F_title: return str_case(r, to_str(r, v), 3);
    case F_map: {
        jlist *in = iter_list(r, v, line), *out = l_new(&r->e, in->n);
        jv at = arg(g, -1, "attribute", U);
        if (at.t != JV_UNDEF) {
            jv dv = arg(g, -1, "default", U);
            for (size_t i = 0; i < in->n; i++) {
                jv x = attr_path(r, in->v[i], at, line);
                l_push(&r->e, out, x.t == JV_UNDEF && dv.t != JV_UNDEF ? dv : x);
            }
            return v_list(out);
        }
        if (g->na < 1 || g->a[0].t != JV_STR) RF(r, line, "map: expected a filter name or attribute=");
        int fid = find_name(filter_names, F_COUNT_, jstrdup(&r->e, g->a[0].u.s.p, g->a[0].u.s.n));
        if (fid < 0)
            jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported filter '%.*s'", (int)g->a[0].u.s.n, g->a[0].u.s.p);
        jargs fg = {g->a + 1, g->na - 1, g->kn, g->kv, g->nk};
        for (size_t i = 0; i < in->n; i++) l_push(&r->e, out, apply_filter(r, fid, in->v[i], &fg, line));
        return v_list(out);
    }
    case F_max: case F_min: {
        jlist *l = iter_list(r, v, line);
        int cs = truthy(arg(g, 0, "case_sensitive", v_bool(0)));
        jv at = arg(g, 1, "attribute", v_none());
        if (!l->n) return v_undef(NULL);
        size_t best = 0;
        for (size_t i = 1; i < l->n; i++) {
            jv a = at.t == JV_NONE ? l->v[i] : attr_path(r, l->v[i], at, line);
            jv b = at.t == JV_NONE ? l->v[best] : attr_path(r, l->v[best], at, line);
            int c = sort_cmp(r, a, b, cs, line);
            if (id == F_max ? c > 0 : c < 0) best = i;
        }
        return l->v[best];
    }
    case F_reject: return select_impl(r, v, g, 0, 0, line);
    case F_select: return select_impl(r, v, g, 0, 1, line);
    case F_rejectattr: return select_impl(r, v, g, 1, 0, line);
    case F_selectattr: return select_impl(r, v, g, 1, 1, line);
    case F_replace: {
        jv s = to_str(r, v);
        jv old = need_str(r, arg(g, 0, "old", U), "replace", line);
        jv nw = need_str(r, arg(g, 1, "new", U), "replace", line);
        jv cnt = arg(g, 2, "count", v_none());
        return str_replace(r, s, old, nw, is_intish(cnt) ? as_int(cnt) : -1);
    }
    case F_reverse: {
        if (v.t == JV_STR) {
            size_t *offs;
            size_t n = u8_offsets(&r->e, v.u.s.p, v.u.s.n, &offs);
            sb b = {.e = &r->e};
            sb_put(&b, "", 0);
            for (size_t i = n; i-- > 0;) sb_put(&b, v.u.s.p + offs[i], offs[i + 1] - offs[i]);
            return sb_v(&b);
        }
        jlist *l = iter_list(r, v, line), *o = l_new(&r->e, l->n);
        for (size_t i = l->n; i-- > 0;) l_push(&r->e, o, l->v[i]);
        return v_list(o);
    }
    case F_round: {
        jv pr = arg(g, 0, "precision", v_int(0));
        jv method = arg(g, 1, "method", v_cstr("common"));
        if (!is_num(v)) RF(r, line, "round: expected a number");
        if (is_intish(v) && !streq(method, "ceil", 4) && !streq(method, "floor", 5) && as_int(pr) >= 0)
            return v_int(as_int(v));
        double x = as_dbl(v), m = pow(10.0, (double)as_int(pr)), y;
        if (streq(method, "ceil", 4)) y = ceil(x * m) / m;
        else if (streq(method, "floor", 5)) y = floor(x * m) / m;
        else y = nearbyint(x * m) / m;
        return v_float(y);
    }
    case F_safe: return v;
    case F_sort: {
        int rev = truthy(arg(g, 0, "reverse", v_bool(0)));
        int cs = truthy(arg(g, 1, "case_sensitive", v_bool(0)));
        jv at = arg(g, 2, "attribute", v_none());
        jlist *l = iter_list(r, v, line);
        jv *keys = jalloc(&r->e, (l->n + 1) * sizeof(jv)), *vals = jalloc(&r->e, (l->n + 1) * sizeof(jv));
        for (size_t i = 0; i < l->n; i++) {
            vals[i] = l->v[i];
            keys[i] = at.t == JV_NONE ? l->v[i] : attr_path(r, l->v[i], at, line);
        }
        stable_sort(r, keys, vals, l->n, cs, rev, line);
        jlist *o = l_new(&r->e, l->n);
        for (size_t i = 0; i < l->n; i++) l_push(&r->e, o, vals[i]);
        return v_list(o);
    }
    case F_string: return to_str(r, v);
    case F_sum: {
        jv at = arg(g, 0, "attribute", v_none());
        jv acc = arg(g, 1, "start", v_int(0));
        jlist *l = iter_list(r, v, line);
        for (size_t i = 0; i < l->n; i++)
            acc = binop(r, OP_ADD, acc, at.t == JV_NONE ? l->v[i] : attr_path(r, l->v[i], at, line), line);
        return acc;
    }
    case F_tojson: {
        jsonopt o = {.line = line};
        o.ensure_ascii = truthy(arg(g, 0, "ensure_ascii", v_bool(0)));
        jv ind = arg(g, 1, "indent", v_none());
        jv seps = arg(g, 2, "separators", v_none());
        o.sort_keys = truthy(arg(g, 3, "sort_keys", v_bool(0)));
        if (is_intish(ind)) {
            jv sp = str_repeat(r, v_cstr(" "), as_int(ind) > 0 ? as_int(ind) : 0);
            o.indent = jstrdup(&r->e, sp.u.s.p, sp.u.s.n);
        }
        else if (ind.t == JV_STR) o.indent = jstrdup(&r->e, ind.u.s.p, ind.u.s.n);
        else if (ind.t != JV_NONE) RF(r, line, "tojson: indent must be an int or a string");
        o.item_sep = o.indent ? "," : ", ";
        o.key_sep = ": ";
        if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
            o.item_sep = jstrdup(&r->e, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
            o.key_sep = jstrdup(&r->e, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
        } else if (seps.t != JV_NONE) {
            RF(r, line, "tojson: separators must be a pair of strings");
        }
        sb b = {.e = &r->e};
        sb_put(&b, "", 0);
        to_json(r, &b, v, &o, 0);
        return sb_v(&b);
    }
    case F_trim: return str_strip(to_str(r, v), arg(g, 0, "chars", v_none()), 3);
    case F_unique: {
        int cs = truthy(arg(g, 0, "case_sensitive", v_bool(0)));
        jv at = arg(g, 1, "attribute", v_none());
        jlist *l = iter_list(r, v, line), *o = l_new(&r->e, l->n), *seen = l_new(&r->e, l->n);
        for (size_t i = 0; i < l->n; i++) {
            jv k = at.t == JV_NONE ? l->v[i] : attr_path(r, l->v[i], at, line);
            if (!cs && k.t == JV_STR) k = str_case(r, k, 0);
            if (contains(r, v_list(seen), k, line)) continue;
            l_push(&r->e, seen, k);
            l_push(&r->e, o, l->v[i]);
        }
        return v_list(o);
    }
    case F_wordcount: {
        jv s = to_str(r, v);
        int64_t n = 0;
        int in = 0;
        for (size_t i = 0; i < s.u.s.n; i++) {
            unsigned char c = (unsigned char)s.u.s.p[i];
            int w = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
            if (w && !in) n++;
            in = w;
        }
        return v_int(n);
    }
    }
    jfail(&r->e, IG_ERR_INTERNAL, line, "bad filter id");
}

/* ---- builtin functions and methods */

static jv call_builtin(rctx *r, int fn, const jargs *g, int line) {
    switch (fn) {
    case BI_RAISE: {
        jv m = arg(g, 0, NULL, v_cstr(""));
        sb b = {.e = &r->e};
        py_str(&b, m);
        sb_c(&b, 0);
        jfail(&r->e, IG_ERR_INVALID, line, "raise_exception: %s", b.p);
    }
    case BI_STRFTIME: {
        jv f = need_str(r, arg(g, 0, NULL, v_undef(NULL)), "strftime_now", line);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[512];
        size_t n = strftime(buf, sizeof buf, jstrdup(&r->e, f.u.s.p, f.u.s.n), &tmv);
        return v_str(jstrdup(&r->e, buf, n), n);
    }
    case BI_NAMESPACE: case BI_DICT: {
        jdict *d = d_new(&r->e);
        for (int i = 0; i < g->na; i++) {
            if (g->a[i].t != JV_DICT) RF(r, line, "%s(): positional arguments must be mappings", builtin_names[fn]);
            for (size_t k = 0; k < g->a[i].u.d->n; k++) d_set(&r->e, d, g->a[i].u.d->k[k], g->a[i].u.d->v[k]);
        }
        for (int k = 0; k < g->nk; k++) d_set(&r->e, d, v_cstr(g->kn[k]), g->kv[k]);
        jv v = v_dict(d);
        if (fn == BI_NAMESPACE) v.t = JV_NS;
        return v;
    }
    case BI_RANGE: {
        int64_t a = 0, b, s = 1;
        for (int i = 0; i < g->na; i++)
            if (!is_intish(g->a[i])) RF(r, line, "range(): arguments must be integers");
        if (g->na == 1) b = as_int(g->a[0]);
        else if (g->na >= 2) { a = as_int(g->a[0]); b = as_int(g->a[1]); if (g->na > 2) s = as_int(g->a[2]); }
        else RF(r, line, "range expected at least 1 argument");
        if (s == 0) RF(r, line, "range() arg 3 must not be zero");
        jlist *l = l_new(&r->e, 8);
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s) {
            if (l->n >= 1000000) RF(r, line, "range() too large");
            l_push(&r->e, l, v_int(i));
        }
        return v_list(l);
    }
    }
    jfail(&r->e, IG_ERR_INTERNAL, line, "bad builtin");
}

static jv str_method(rctx *r, jv s, const char *m, const jargs *g, int line) {
    jv U = v_undef(NULL);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        jv p = arg(g, 0, NULL, U);
        int (*fn)(jv, jv) = m[0] == 's' ? starts_with : ends_with;
        if (p.t == JV_LIST) {
            for (size_t i = 0; i < p.u.l->n; i++)
                if (fn(s, need_str(r, p.u.l->v[i], m, line))) return v_bool(1);
            return v_bool(0);
        }
        return v_bool(fn(s, need_str(r, p, m, line)));
    }
    if (!strcmp(m, "strip")) return str_strip(s, arg(g, 0, "chars", v_none()), 3);
    if (!strcmp(m, "lstrip")) return str_strip(s, arg(g, 0, "chars", v_none()), 1);
    if (!strcmp(m, "rstrip")) return str_strip(s, arg(g, 0, "chars", v_none()), 2);
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = arg(g, 0, "sep", v_none());
        jv ms = arg(g, 1, "maxsplit", v_int(-1));
        if (sep.t != JV_NONE) need_str(r, sep, m, line);
        return str_split(r, s, sep, is_intish(ms) ? as_int(ms) : -1, m[0] == 'r', line);
    }
    if (!strcmp(m, "splitlines")) return v_list(splitlines(r, s));
    if (!strcmp(m, "lower")) return str_case(r, s, 0);
    if (!strcmp(m, "upper")) return str_case(r, s, 1);
    if (!strcmp(m, "capitalize")) return str_case(r, s, 2);
    if (!strcmp(m, "title")) return str_case(r, s, 3);
    if (!strcmp(m, "replace")) {
        jv cnt = arg(g, 2, "count", v_int(-1));
        return str_replace(r, s, need_str(r, arg(g, 0, NULL, U), m, line), need_str(r, arg(g, 1, NULL, U), m, line),
                           is_intish(cnt) ? as_int(cnt) : -1);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") ||
        !strcmp(m, "count")) {
        jv sub = need_str(r, arg(g, 0, NULL, U), m, line);
        if (m[0] == 'c') {
            int64_t k = 0;
            if (!sub.u.s.n) return v_int((int64_t)u8_len(s.u.s.p, s.u.s.n) + 1);
            for (size_t i = 0; i + sub.u.s.n <= s.u.s.n;) {
                if (memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n) == 0) { k++; i += sub.u.s.n; }
                else i++;
            }
            return v_int(k);
        }
        const char *f = m[0] == 'r' ? memrfind(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n)
                                    : memfind(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
        if (!f) {
            if (m[0] == 'i' || m[1] == 'i') RF(r, line, "substring not found");
            return v_int(-1);
        }
        return v_int((int64_t)u8_len(s.u.s.p, (size_t)(f - s.u.s.p)));
    }
    if (!strcmp(m, "join")) {
        jlist *l = iter_list(r, arg(g, 0, NULL, U), line);
        sb b = {.e = &r->e};
        sb_put(&b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (i) sb_sv(&b, s);
            sb_sv(&b, need_str(r, l->v[i], "join", line));
        }
        return sb_v(&b);
    }
    if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isalnum") || !strcmp(m, "isspace") ||
        !strcmp(m, "islower") || !strcmp(m, "isupper")) {
        if (!s.u.s.n) return v_bool(0);
        int any_cased = 0;
        for (size_t i = 0; i < s.u.s.n; i++) {
            unsigned char c = (unsigned char)s.u.s.p[i];
            int dig = c >= '0' && c <= '9', lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
            if (!strcmp(m, "isdigit") && !dig) return v_bool(0);
            if (!strcmp(m, "isalpha") && !(lo || up)) return v_bool(0);
            if (!strcmp(m, "isalnum") && !(lo || up || dig)) return v_bool(0);
            if (!strcmp(m, "isspace") && !c_ws((char)c)) return v_bool(0);
            if (!strcmp(m, "islower") && up) return v_bool(0);
            if (!strcmp(m, "isupper") && lo) return v_bool(0);
            any_cased |= lo || up;
        }
        if (!strcmp(m, "islower") || !strcmp(m, "isupper")) return v_bool(any_cased);
        return v_bool(1);
    }
    if (!strcmp(m, "format")) {
        sb b = {.e = &r->e};
        sb_put(&b, "", 0);
        int auto_i = 0;
        for (size_t i = 0; i < s.u.s.n; i++) {
            char c = s.u.s.p[i];
            if (c == '{' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '{') { sb_c(&b, '{'); i++; continue; }
            if (c == '}' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '}') { sb_c(&b, '}'); i++; continue; }
            if (c != '{') { sb_c(&b, c); continue; }
            const char *e = memchr(s.u.s.p + i, '}', s.u.s.n - i);
            if (!e) RF(r, line, "format: single '{' encountered");
            size_t fl = (size_t)(e - (s.u.s.p + i + 1));
            const char *f = s.u.s.p + i + 1;
            if (memchr(f, ':', fl) || memchr(f, '!', fl))
                jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported: format specs in str.format");
            jv val;
            if (fl == 0) val = arg(g, auto_i++, NULL, U);
            else if (f[0] >= '0' && f[0] <= '9') val = arg(g, atoi(f), NULL, U);
            else val = arg(g, -1, jstrdup(&r->e, f, fl), U);
            if (val.t == JV_UNDEF) RF(r, line, "format: missing argument for '{%.*s}'", (int)fl, f);
            py_str(&b, val);
            i = (size_t)(e - s.u.s.p);
        }
        return sb_v(&b);
    }
    jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported string method '%s'", m);
}

static jv call_method(rctx *r, jv o, const char *m, const jargs *g, int line) {
    if (o.t == JV_STR) return str_method(r, o, m, g, line);
    if (o.t == JV_DICT) {
        jdict *d = o.u.d;
        if (!strcmp(m, "get")) {
            jv *v = d_getv(d, arg(g, 0, NULL, v_undef(NULL)));
            return v ? *v : arg(g, 1, NULL, v_none());
        }
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            jlist *l = l_new(&r->e, d->n);
            for (size_t i = 0; i < d->n; i++) {
                if (m[0] == 'k') l_push(&r->e, l, d->k[i]);
                else if (m[0] == 'v') l_push(&r->e, l, d->v[i]);
                else {
                    l_push(&r->e, l, v_pair(&r->e, d->k[i], d->v[i]));
                }
            }
            return v_list(l);
        }
        jv *v = d_get(d, m, strlen(m));
        if (v && (v->t == JV_MACRO || v->t == JV_FUNC)) {
            if (v->t == JV_FUNC) return call_builtin(r, v->u.fn, g, line);
        }
        jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported dict method '%s'", m);
    }
    if (o.t == JV_LIST) {
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            jv x = arg(g, 0, NULL, v_undef(NULL));
            int64_t k = 0;
            for (size_t i = 0; i < o.u.l->n; i++)
                if (jv_eq(o.u.l->v[i], x)) {
                    if (m[0] == 'i') return v_int((int64_t)i);
                    k++;
                }
            if (m[0] == 'i') RF(r, line, "list.index(x): x not in list");
            return v_int(k);
        }
        if (!strcmp(m, "append") || !strcmp(m, "pop") || !strcmp(m, "extend") || !strcmp(m, "insert") ||
            !strcmp(m, "remove") || !strcmp(m, "clear") || !strcmp(m, "sort") || !strcmp(m, "reverse"))
            jfail(&r->e, IG_ERR_UNSUPPORTED, line,
                  "unsupported: list.%s (lists are immutable in transformers' sandbox)", m);
        jfail(&r->e, IG_ERR_UNSUPPORTED, line, "unsupported list method '%s'", m);
    }
    if (o.t == JV_LOOP && !strcmp(m, "cycle")) {
        if (!g->na) RF(r, line, "loop.cycle needs at least one argument");
        return g->a[o.u.lp->i % (size_t)g->na];
    }
    if (o.t == JV_UNDEF) undef_fail(r, o, line);
    RF(r, line, "'%s' object has no attribute '%s'", type_name(o), m);
}

static jv call_macro(rctx *r, const js *m, const jargs *g, int line) {
    if (r->depth >= 64) RF(r, line, "macro recursion too deep");
    if (g->na > m->nnames) RF(r, line, "macro '%s' takes %d arguments, %d given", m->attr, m->nnames, g->na);
    frame *fr = jalloc(&r->e, sizeof *fr);
    fr->up = r->root;
    for (int i = 0; i < m->nnames; i++) {
        jv v = arg(g, i, m->names[i], v_undef(NULL));
        if (v.t == JV_UNDEF && m->defs[i]) v = ev(r, fr, m->defs[i]);
        else if (v.t == JV_UNDEF) v = v_undef(m->names[i]);
        f_set(r, fr, m->names[i], v);
    }
    for (int k = 0; k < g->nk; k++) {
        int ok = 0;
        for (int i = 0; i < m->nnames; i++) ok |= !strcmp(g->kn[k], m->names[i]);
        if (!ok) RF(r, line, "macro '%s' has no parameter '%s'", m->attr, g->kn[k]);
    }
    size_t mark = r->out.n;
    r->depth++;
    ex_list(r, fr, m->body);
    r->depth--;
    r->brk = 0;
    jv res = v_str(jstrdup(&r->e, r->out.p ? r->out.p + mark : "", r->out.n - mark), r->out.n - mark);
    r->out.n = mark;
    return res;
}

static jargs eval_args(rctx *r, frame *f, const jx *x) {
    jargs g = {0};
    jv *a = jalloc(&r->e, (size_t)(x->nargs + 1) * sizeof(jv));
    jv *kv = jalloc(&r->e, (size_t)(x->nkw + 1) * sizeof(jv));
    for (int i = 0; i < x->nargs; i++) a[i] = ev(r, f, x->args[i]);
    for (int i = 0; i < x->nkw; i++) kv[i] = ev(r, f, x->kwv[i]);
    g.a = a;
    g.na = x->nargs;
    g.kn = x->kwn;
    g.kv = kv;
    g.nk = x->nkw;
    return g;
}

/* Counts one step at `line` (JINJA_MAX_STEPS). */
static void step(rctx *r, int line) {
    r->e.line = line;
    if (++r->e.steps > JINJA_MAX_STEPS)
        RF(r, line, "the template ran more than %llu steps (a loop without bound?)", (unsigned long long)JINJA_MAX_STEPS);
}

static jv ev_node(rctx *r, frame *f, const jx *x);

/* Evaluates x: a step, and a level of evaluator recursion (macros calling macros nest the
 * parser's bounded depth again: JINJA_MAX_EVAL_DEPTH bounds the stack). */
static jv ev(rctx *r, frame *f, const jx *x) {
    step(r, x->line);
    if (++r->eval_depth > JINJA_MAX_EVAL_DEPTH)
        RF(r, x->line, "expressions evaluated more than %d deep (recursion?)", JINJA_MAX_EVAL_DEPTH);
    jv v = ev_node(r, f, x);
    r->eval_depth--;
    return v;
}

static jv ev_node(rctx *r, frame *f, const jx *x) {
    switch (x->k) {
    case X_LIT: return x->lit;
    case X_NAME: {
        jv *v = f_lookup(f, x->name);
        if (v) return *v;
        int b = find_name(builtin_names, BI_COUNT_, x->name);
        if (b >= 0) return (jv){.t = JV_FUNC, .u.fn = b};
        return v_undef(x->name);
    }
    case X_ATTR: return get_attr(r, ev(r, f, x->a), x->name, x->line);
    case X_ITEM: return get_item(r, ev(r, f, x->a), ev(r, f, x->b), x->line);
    case X_SLICE: {
        jv o = ev(r, f, x->a);
        jv a = x->b ? ev(r, f, x->b) : v_none(), b = x->c ? ev(r, f, x->c) : v_none(),
           c = x->d ? ev(r, f, x->d) : v_none();
        return do_slice(r, o, a, b, c, x->line);
    }
    case X_CALL: {
        if (x->a->k == X_ATTR) {
            jv o = ev(r, f, x->a->a);
            jargs g = eval_args(r, f, x);
            if (o.t == JV_NS || (o.t == JV_DICT && d_get(o.u.d, x->a->name, strlen(x->a->name)) &&
                                 d_get(o.u.d, x->a->name, strlen(x->a->name))->t == JV_MACRO)) {
                jv *mv = d_get(o.u.d, x->a->name, strlen(x->a->name));
                if (mv && mv->t == JV_MACRO) return call_macro(r, mv->u.m, &g, x->line);
                if (mv && mv->t == JV_FUNC) return call_builtin(r, mv->u.fn, &g, x->line);
                RF(r, x->line, "'%s' is not callable", x->a->name);
            }
            return call_method(r, o, x->a->name, &g, x->line);
        }
        jv fn = ev(r, f, x->a);
        jargs g = eval_args(r, f, x);
        if (fn.t == JV_MACRO) return call_macro(r, fn.u.m, &g, x->line);
        if (fn.t == JV_FUNC) return call_builtin(r, fn.u.fn, &g, x->line);
        if (fn.t == JV_UNDEF) {
            if (x->a->k == X_NAME)
                jfail(&r->e, IG_ERR_UNSUPPORTED, x->line, "unsupported function '%s'", x->a->name);
            undef_fail(r, fn, x->line);
        }
        RF(r, x->line, "'%s' object is not callable", type_name(fn));
    }
    case X_FILTER: {
        if (x->op < 0) jfail(&r->e, IG_ERR_UNSUPPORTED, x->line, "unsupported filter '%s'", x->name);
        jv v = ev(r, f, x->a);
        jargs g = eval_args(r, f, x);
        return apply_filter(r, x->op, v, &g, x->line);
    }
    case X_TEST: {
        if (x->op < 0) jfail(&r->e, IG_ERR_UNSUPPORTED, x->line, "unsupported test '%s'", x->name);
        jv v = ev(r, f, x->a);
        jargs g = eval_args(r, f, x);
        int t = apply_test(r, x->op, v, &g, x->line);
        return v_bool(x->neg ? !t : t);
    }
    case X_BIN: return binop(r, x->op, ev(r, f, x->a), ev(r, f, x->b), x->line);
    case X_AND: {
        jv a = ev(r, f, x->a);
        return truthy(a) ? ev(r, f, x->b) : a;
    }
    case X_OR: {
        jv a = ev(r, f, x->a);
        return truthy(a) ? a : ev(r, f, x->b);
    }
    case X_NOT: return v_bool(!truthy(ev(r, f, x->a)));
    case X_CHAIN: {
        jv a = ev(r, f, x->args[0]), res = v_bool(1);
        for (int i = 1; i < x->nargs; i++) {
            jv b = ev(r, f, x->args[i]);
            res = binop(r, x->ops[i - 1], a, b, x->line);
            if (!truthy(res)) return res;
            a = b;
        }
        return res;
    }
    case X_NEG: case X_POS: {
        jv a = ev(r, f, x->a);
        if (a.t == JV_UNDEF) undef_fail(r, a, x->line);
        if (!is_num(a)) RF(r, x->line, "bad operand type for unary %c: '%s'", x->k == X_NEG ? '-' : '+', type_name(a));
        if (x->k == X_POS) return a.t == JV_BOOL ? v_int(a.u.b) : a;
        return a.t == JV_FLOAT ? v_float(-a.u.f) : v_int(-as_int(a));
    }
    case X_COND:
        if (truthy(ev(r, f, x->b))) return ev(r, f, x->a);
        return x->c ? ev(r, f, x->c) : v_undef(NULL);
    case X_LIST: {
        jlist *l = l_new(&r->e, (size_t)x->nargs);
        l->tuple = x->op;
        for (int i = 0; i < x->nargs; i++) l_push(&r->e, l, ev(r, f, x->args[i]));
        return v_list(l);
    }
    case X_DICT: {
        jdict *d = d_new(&r->e);
        for (int i = 0; i < x->nargs; i++) d_set(&r->e, d, ev(r, f, x->args[i]), ev(r, f, x->kwv[i]));
        return v_dict(d);
    }
    }
    jfail(&r->e, IG_ERR_INTERNAL, x->line, "bad expression node");
}

static void bind_targets(rctx *r, frame *f, const js *s, jv v) {
    if (s->nnames == 1) {
        f_set(r, f, s->names[0], v);
        return;
    }
    jlist *l = iter_list(r, v, s->line);
    if ((int)l->n != s->nnames)
        RF(r, s->line, "cannot unpack %zu values into %d names", l->n, s->nnames);
    for (int i = 0; i < s->nnames; i++) f_set(r, f, s->names[i], l->v[i]);
}

static void ex(rctx *r, frame *f, const js *s) {
    step(r, s->line);
    switch (s->k) {
    case S_TEXT: sb_put(&r->out, s->text, s->tlen); return;
    case S_OUT: py_str(&r->out, ev(r, f, s->e)); return;
    case S_IF:
        if (truthy(ev(r, f, s->e))) ex_list(r, f, s->body);
        else if (s->els) ex_list(r, f, s->els);
        return;
    case S_FOR: {
        jlist *items = iter_list(r, ev(r, f, s->e), s->line);
        if (s->filt) {
            jlist *kept = l_new(&r->e, items->n);
            for (size_t i = 0; i < items->n; i++) {
                frame tmp = {.up = f};
                bind_targets(r, &tmp, s, items->v[i]);
                if (truthy(ev(r, &tmp, s->filt))) l_push(&r->e, kept, items->v[i]);
            }
            items = kept;
        }
        jloop *lp = jalloc(&r->e, sizeof *lp);
        lp->items = items;
        for (size_t i = 0; i < items->n; i++) {
            lp->i = i;
            frame *fr = jalloc(&r->e, sizeof *fr);
            fr->up = f;
            bind_targets(r, fr, s, items->v[i]);
            f_set(r, fr, "loop", (jv){.t = JV_LOOP, .u.lp = lp});
            ex_list(r, fr, s->body);
            if (r->brk == 1) {
                r->brk = 0;
                break;
            }
            r->brk = 0;
        }
        if (!items->n && s->els) ex_list(r, f, s->els);
        return;
    }
    case S_SET: {
        jv v = ev(r, f, s->e);
        if (s->attr) {
            jv *ns = f_lookup(f, s->names[0]);
            if (!ns || ns->t != JV_NS)
                RF(r, s->line, "cannot assign attribute '%s' on '%s': not a namespace()", s->attr, s->names[0]);
            d_set(&r->e, ns->u.d, v_cstr(s->attr), v);
            return;
        }
        bind_targets(r, f, s, v);
        return;
    }
    case S_SETBLOCK: {
        size_t mark = r->out.n;
        ex_list(r, f, s->body);
        jv v = v_str(jstrdup(&r->e, r->out.p ? r->out.p + mark : "", r->out.n - mark), r->out.n - mark);
        r->out.n = mark;
        f_set(r, f, s->names[0], v);
        return;
    }
    case S_MACRO: f_set(r, f, s->attr, (jv){.t = JV_MACRO, .u.m = s}); return;
    case S_BREAK: r->brk = 1; return;
    case S_CONTINUE: r->brk = 2; return;
    case S_BLOCK: ex_list(r, f, s->body); return;
    }
}

static void ex_list(rctx *r, frame *f, const js *s) {
    for (; s && !r->brk; s = s->next) ex(r, f, s);
}

/* ===================================================================================== API */

ig_status ct_compile(const char *source, ct_template **out, ig_err *err) {
    if (!source || !out) return ig_fail(err, IG_ERR_INVALID, "ct_compile: NULL argument");
    *out = NULL;
    ct_template *t = calloc(1, sizeof *t);
    if (!t) return ig_fail(err, IG_ERR_NOMEM, "ct_compile: out of memory");
    cc *c = calloc(1, sizeof *c);
    if (!c) {
        free(t);
        return ig_fail(err, IG_ERR_NOMEM, "ct_compile: out of memory");
    }
    c->e.err = err;
    c->e.ar = &t->ar;
    t->ar.limit = JINJA_MAX_BYTES;
    if (setjmp(c->e.jb)) {
        ig_status st = c->e.st;
        free(c);
        ct_free(t);
        return st;
    }
    /* newlines normalized to \n, one trailing newline dropped (keep_trailing_newline=False) */
    size_t n = strlen(source);
    char *src = jalloc(&c->e, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (source[i] == '\r') {
            src[k++] = '\n';
            if (i + 1 < n && source[i + 1] == '\n') i++;
        } else {
            src[k++] = source[i];
        }
    }
    if (k && src[k - 1] == '\n') k--;
    src[k] = 0;
    lex(c, src, k);
    const char *w = NULL;
    t->body = p_body(c, NULL, 0, &w, 0, NULL);
    free(c);
    *out = t;
    return IG_OK;
}

void ct_free(ct_template *t) {
    if (!t) return;
    ar_release(&t->ar);
    free(t);
}

ig_status ct_render(const ct_template *t, const cJSON *messages, const ct_vars *vars, char **out,
                    size_t *out_len, ig_err *err) {
    if (!t || !out) return ig_fail(err, IG_ERR_INVALID, "ct_render: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    if (messages && !cJSON_IsArray(messages))
        return ig_fail(err, IG_ERR_INVALID, "ct_render: messages must be a JSON array");
    rctx *r = calloc(1, sizeof *r);
    if (!r) return ig_fail(err, IG_ERR_NOMEM, "ct_render: out of memory");
    r->e.err = err;
    r->e.ar = &r->ar;
    r->ar.limit = JINJA_MAX_BYTES;
    r->out.e = &r->e;
    if (setjmp(r->e.jb)) {
        ig_status st = r->e.st;
        ar_release(&r->ar);
        free(r);
        return st;
    }
    frame *root = jalloc(&r->e, sizeof *root);
    r->root = root;
    f_set(r, root, "messages", messages ? from_json(r, messages) : v_list(l_new(&r->e, 1)));
    f_set(r, root, "add_generation_prompt", v_bool(vars && vars->add_generation_prompt));
    if (vars && vars->bos_token) f_set(r, root, "bos_token", v_cstr(vars->bos_token));
    if (vars && vars->eos_token) f_set(r, root, "eos_token", v_cstr(vars->eos_token));
    f_set(r, root, "tools", vars && vars->tools ? from_json(r, vars->tools) : v_none());
    f_set(r, root, "documents", v_none());
    ex_list(r, root, t->body);
    char *res = malloc(r->out.n + 1);
    if (!res) jfail(&r->e, IG_ERR_NOMEM, 0, "out of memory");
    if (r->out.n) memcpy(res, r->out.p, r->out.n);
    res[r->out.n] = 0;
    *out = res;
    if (out_len) *out_len = r->out.n;
    ar_release(&r->ar);
    free(r);
    return IG_OK;
}

static char *token_string(const cJSON *v) {
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v) || !v->valuestring) return NULL;
    return strdup(v->valuestring);
}

ig_status ct_load_tokenizer_config(const char *path, ct_template **tmpl, char **bos_token,
                                   char **eos_token, ig_err *err) {
    if (tmpl) *tmpl = NULL;
    if (bos_token) *bos_token = NULL;
    if (eos_token) *eos_token = NULL;
    if (!path) return ig_fail(err, IG_ERR_INVALID, "ct_load_tokenizer_config: NULL path");
    char *buf; /* a file, or a one-file bundle's entry (pkg_file.h) */
    size_t n;
    ig_status rst = pkgf_read(path, &buf, &n, err);
    if (rst) return rst;
    cJSON *j = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return ig_fail(err, IG_ERR_FORMAT, "%s: not a JSON object", path);
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    const char *src = NULL;
    if (cJSON_IsString(ct)) {
        src = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, "default") == 0 && cJSON_IsString(tp))
                src = tp->valuestring;
        }
        if (!src) {
            cJSON_Delete(j);
            return ig_fail(err, IG_ERR_FORMAT, "%s: chat_template list has no \"default\" entry", path);
        }
    } else if (ct && !cJSON_IsNull(ct)) {
        cJSON_Delete(j);
        return ig_fail(err, IG_ERR_FORMAT, "%s: chat_template is neither a string nor a list", path);
    }
    ig_status st = IG_OK;
    if (src && tmpl) {
        st = ct_compile(src, tmpl, err);
        if (st != IG_OK) {
            if (err) {
                char msg[sizeof err->msg];
                memcpy(msg, err->msg, sizeof msg);
                snprintf(err->msg, sizeof err->msg, "%.200s: %.800s", path, msg);
            }
            cJSON_Delete(j);
            return st;
        }
    }
    if (bos_token) *bos_token = token_string(cJSON_GetObjectItemCaseSensitive(j, "bos_token"));
    if (eos_token) *eos_token = token_string(cJSON_GetObjectItemCaseSensitive(j, "eos_token"));
    cJSON_Delete(j);
    return st;
}

const char *ct_chatml_source(void) {
    return "{% for message in messages %}"
           "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
           "{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}
