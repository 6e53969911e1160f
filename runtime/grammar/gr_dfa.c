/* gr_dfa.c — deterministic automata over bytes for the regular parts of a grammar: complement,
 * intersection, and back into rules.
 *
 * A regular expression node of the builder (byte sets, sequences, alternations, repetitions; no
 * rule references) becomes an NFA (Thompson), then a DFA by the subset construction over byte
 * classes (bytes no set of the node tells apart share a column). Two DFAs combine by the product
 * construction: L(a) ∩ L(b) or L(a) \ L(b) (b completed with a rejecting sink). A DFA goes back
 * into the builder as right-linear rules, one per state that can still reach an accepting one,
 * each alternative a byte set and the next state's rule in tail position (the matcher pushes no
 * frame for it). JSON Schema uses it where an expression tree cannot say it: keys that match
 * none of the patternProperties, a pattern and not one of listed strings, a pattern within
 * minLength / maxLength. Every construction has a state limit (gr_dfa_* return -1 past it, and
 * the schema keyword is refused).
 */
#include <stdlib.h>
#include <string.h>

#include "gr_internal.h"

/* ---- NFA ---------------------------------------------------------------------------------------- */

typedef struct nfa {
    int32_t *set, *to, *eps1, *eps2; /* per state: byte set (-1 none) and its target; two epsilon edges (-1) */
    int n, cap, max;
} nfa;

static int nfa_state(nfa *a) {
    if (a->n >= a->max) return -1;
    if (a->n == a->cap) {
        size_t cap = a->cap ? (size_t)a->cap * 2 : 256;
        int32_t **f[4] = {&a->set, &a->to, &a->eps1, &a->eps2};
        for (int i = 0; i < 4; i++) {
            int32_t *p = realloc(*f[i], 4u * cap);
            if (!p) return -1;
            *f[i] = p;
        }
        a->cap = (int)cap;
    }
    a->set[a->n] = a->to[a->n] = a->eps1[a->n] = a->eps2[a->n] = -1;
    return a->n++;
}

static int eps(nfa *a, int from, int to) {
    if (a->eps1[from] < 0) a->eps1[from] = to;
    else if (a->eps2[from] < 0) a->eps2[from] = to;
    else {
        int m = nfa_state(a);
        if (m < 0) return -1;
        a->eps1[m] = a->eps2[from];
        a->eps2[m] = to;
        a->eps2[from] = m;
    }
    return 0;
}

/* A fragment for node x: states *s (entry) and *e (exit, no edges yet). -1: too big or a rule reference. */
static int frag(nfa *a, const gr_builder *b, int x, int *s, int *e, int depth) {
    const gr_node *n = &b->nodes[x];
    if (depth > 200 || (*s = nfa_state(a)) < 0 || (*e = nfa_state(a)) < 0) return -1;
    switch (n->kind) {
    case GN_EMPTY: return eps(a, *s, *e);
    case GN_NEVER: return 0;
    case GN_BYTES: a->set[*s] = n->a; a->to[*s] = *e; return 0;
    case GN_SEQ: case GN_ALT: {
        int prev = *s;
        for (int i = 0; i < n->nkid; i++) {
            int ks, ke;
            if (frag(a, b, b->kids[n->kid + i], &ks, &ke, depth + 1)) return -1;
            if (n->kind == GN_ALT) { if (eps(a, *s, ks) || eps(a, ke, *e)) return -1; }
            else { if (eps(a, prev, ks)) return -1; prev = ke; }
        }
        return n->kind == GN_SEQ ? eps(a, prev, *e) : 0;
    }
    case GN_REP: {
        int prev = *s, kid = b->kids[n->kid], lo = n->a, hi = n->b;
        for (int i = 0; i < lo || (hi != GR_INF && i < hi); i++) { /* copies: lo required, then optional */
            int ks, ke;
            if (frag(a, b, kid, &ks, &ke, depth + 1) || eps(a, prev, ks)) return -1;
            if (i >= lo && eps(a, prev, *e)) return -1;
            prev = ke;
        }
        if (hi == GR_INF) { /* then a loop */
            int ks, ke;
            if (frag(a, b, kid, &ks, &ke, depth + 1) || eps(a, prev, ks) || eps(a, ke, prev)) return -1;
        }
        return eps(a, prev, *e);
    }
    default: return -1;
    }
}

/* ---- subset construction -------------------------------------------------------------------------- */

typedef struct sets { /* interned sorted state sets */
    int32_t *off, *len, *data; int n, cap; size_t dn, dcap;
    int32_t *slot; int nslot;
} sets;

static uint64_t hash_set(const int32_t *s, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)s[i]) * 1099511628211ull;
    return h;
}

static int grow_slots(sets *t) {
    int ns = t->nslot ? t->nslot * 2 : 1024;
    int32_t *sl = malloc(4u * (size_t)ns);
    if (!sl) return -1;
    memset(sl, 0xFF, 4u * (size_t)ns);
    for (int i = 0; i < t->n; i++) {
        uint64_t h = hash_set(t->data + t->off[i], t->len[i]);
        int j = (int)(h & (uint64_t)(ns - 1));
        while (sl[j] >= 0) j = (j + 1) & (ns - 1);
        sl[j] = i;
    }
    free(t->slot);
    t->slot = sl;
    t->nslot = ns;
    return 0;
}

/* The id of set s[0..n) (sorted), new ones appended; -1 on OOM. */
static int intern(sets *t, const int32_t *s, int n) {
    if (2 * (t->n + 1) > t->nslot && grow_slots(t)) return -1;
    uint64_t h = hash_set(s, n);
    int j = (int)(h & (uint64_t)(t->nslot - 1));
    for (; t->slot[j] >= 0; j = (j + 1) & (t->nslot - 1)) {
        int i = t->slot[j];
        if (t->len[i] == n && !memcmp(t->data + t->off[i], s, 4u * (size_t)n)) return i;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        int32_t *o = realloc(t->off, 4u * (size_t)cap);
        if (!o) return -1;
        t->off = o;
        int32_t *l = realloc(t->len, 4u * (size_t)cap);
        if (!l) return -1;
        t->len = l;
        t->cap = cap;
    }
    if (t->dn + (size_t)n > t->dcap) {
        size_t dc = t->dcap ? t->dcap : 4096;
        while (dc < t->dn + (size_t)n) dc *= 2;
        int32_t *d = realloc(t->data, 4u * dc);
        if (!d) return -1;
        t->data = d;
        t->dcap = dc;
    }
    memcpy(t->data + t->dn, s, 4u * (size_t)n);
    t->off[t->n] = (int32_t)t->dn;
    t->len[t->n] = n;
    t->dn += (size_t)n;
    t->slot[j] = t->n;
    return t->n++;
}

static int cmp_i32(const void *x, const void *y) { int32_t a = *(const int32_t *)x, b = *(const int32_t *)y; return (a > b) - (a < b); }

/* Epsilon closure of the n states in buf (room for every NFA state), in place; returns its size. */
static int closure(const nfa *a, int32_t *buf, int n, uint32_t *mark, uint32_t stamp, int32_t *stack) {
    int sp = 0, m = 0;
    for (int i = 0; i < n; i++) if (mark[buf[i]] != stamp) { mark[buf[i]] = stamp; stack[sp++] = buf[i]; }
    while (sp) {
        int q = stack[--sp];
        buf[m++] = q;
        int e[2] = {a->eps1[q], a->eps2[q]};
        for (int k = 0; k < 2; k++)
            if (e[k] >= 0 && mark[e[k]] != stamp) { mark[e[k]] = stamp; stack[sp++] = e[k]; }
    }
    qsort(buf, (size_t)m, 4, cmp_i32);
    return m;
}

static int dfa_alloc(gr_dfa *d, int cap) {
    int32_t *nx = realloc(d->next, 4u * (size_t)cap * (size_t)(d->nclass ? d->nclass : 1));
    if (!nx) return -1;
    d->next = nx;
    uint8_t *ac = realloc(d->acc, (size_t)cap);
    if (!ac) return -1;
    d->acc = ac;
    d->cap = cap;
    return 0;
}

/* Byte classes: bytes that every set in use treats alike. */
static void byte_classes(const gr_builder *b, const nfa *a, gr_dfa *d) {
    uint8_t *used = calloc((size_t)b->n_sets + 1, 1);
    memset(d->cls, 0, sizeof d->cls);
    d->nclass = 1;
    for (int q = 0; q < a->n; q++) {
        int si = a->set[q];
        if (si < 0 || (used && used[si])) continue;
        if (used) used[si] = 1;
        int map[512], nc = 0; /* (old class, in set) -> new class */
        for (int i = 0; i < 512; i++) map[i] = -1;
        uint8_t nw[256];
        for (int c = 0; c < 256; c++) {
            int key = d->cls[c] * 2 + bset_has(&b->sets[si], c);
            if (map[key] < 0) map[key] = nc++;
            nw[c] = (uint8_t)map[key];
        }
        memcpy(d->cls, nw, sizeof nw);
        d->nclass = nc;
    }
    free(used);
}

int gr_dfa_from_node(const gr_builder *b, int node, gr_dfa *d, int max_states) {
    memset(d, 0, sizeof *d);
    nfa a = {.max = max_states * 8};
    sets t = {0};
    int s, e, r = -1;
    int32_t *buf = NULL, *stack = NULL;
    uint32_t *mark = NULL, stamp = 0;
    if (b->oom || frag(&a, b, node, &s, &e, 0)) goto out;
    byte_classes(b, &a, d);
    buf = malloc(4u * (size_t)a.n * 2);
    stack = malloc(4u * (size_t)a.n * 2);
    mark = calloc((size_t)a.n, 4);
    if (!buf || !stack || !mark || dfa_alloc(d, 64)) goto out;
    int rep[256]; /* a byte of each class */
    for (int c = 255; c >= 0; c--) rep[d->cls[c]] = c;
    buf[0] = s;
    int n = closure(&a, buf, 1, mark, ++stamp, stack);
    if (intern(&t, buf, n) != 0) goto out;
    for (int i = 0; i < t.n; i++) {
        if (i >= max_states) goto out;
        if (i >= d->cap && dfa_alloc(d, d->cap * 2)) goto out;
        const int32_t *S = t.data + t.off[i];
        int ns = t.len[i];
        d->acc[i] = 0;
        for (int k = 0; k < ns; k++) d->acc[i] |= S[k] == e;
        for (int cl = 0; cl < d->nclass; cl++) {
            int m = 0, c = rep[cl];
            S = t.data + t.off[i]; /* intern may move data */
            for (int k = 0; k < ns; k++) {
                int q = S[k];
                if (a.set[q] >= 0 && bset_has(&b->sets[a.set[q]], c)) buf[m++] = a.to[q];
            }
            int id = -1;
            if (m) {
                m = closure(&a, buf, m, mark, ++stamp, stack);
                if ((id = intern(&t, buf, m)) < 0) goto out;
            }
            d->next[(size_t)i * (size_t)d->nclass + (size_t)cl] = id;
        }
    }
    d->n = t.n;
    r = gr_dfa_minimize(d);
out:
    free(buf); free(stack); free(mark);
    free(a.set); free(a.to); free(a.eps1); free(a.eps2);
    free(t.off); free(t.len); free(t.data); free(t.slot);
    if (r) gr_dfa_free(d);
    return r;
}

void gr_dfa_free(gr_dfa *d) {
    free(d->next);
    free(d->acc);
    memset(d, 0, sizeof *d);
}


/* ---- product ------------------------------------------------------------------------------------ */

int gr_dfa_product(const gr_dfa *x, const gr_dfa *y, int minus, gr_dfa *d, int max_states) {
    memset(d, 0, sizeof *d);
    int nc = 0, xc[256], yc[256], pair[256]; /* class pairs in use -> product class */
    for (int c = 0; c < 256; c++) {
        int k;
        for (k = 0; k < nc && !(xc[k] == x->cls[c] && yc[k] == y->cls[c]); k++) {}
        if (k == nc) { xc[nc] = x->cls[c]; yc[nc] = y->cls[c]; nc++; }
        pair[c] = k;
    }
    for (int c = 0; c < 256; c++) d->cls[c] = (uint8_t)pair[c];
    d->nclass = nc;
    int sink = y->n; /* y's missing edges lead to a rejecting sink (for minus) */
    sets t = {0};
    int r = -1;
    if (dfa_alloc(d, 64)) goto out;
    if (x->n == 0) { d->n = 0; r = 0; goto out; }
    int32_t st[2] = {0, y->n ? 0 : sink};
    if (!minus && y->n == 0) { d->n = 0; r = 0; goto out; }
    if (intern(&t, st, 2) != 0) goto out;
    for (int i = 0; i < t.n; i++) {
        if (i >= max_states) goto out;
        if (i >= d->cap && dfa_alloc(d, d->cap * 2)) goto out;
        int32_t qx = t.data[t.off[i]], qy = t.data[t.off[i] + 1];
        int ay = qy != sink && y->acc[qy];
        d->acc[i] = (uint8_t)(x->acc[qx] && (minus ? !ay : ay));
        for (int k = 0; k < nc; k++) {
            int tx = x->next[(size_t)qx * (size_t)x->nclass + (size_t)xc[k]];
            int ty = qy == sink ? -1 : y->next[(size_t)qy * (size_t)y->nclass + (size_t)yc[k]];
            int id = -1;
            if (tx >= 0 && (ty >= 0 || minus)) {
                int32_t p[2] = {tx, ty >= 0 ? ty : sink};
                if ((id = intern(&t, p, 2)) < 0) goto out;
            }
            d->next[(size_t)i * (size_t)nc + (size_t)k] = id;
        }
    }
    d->n = t.n;
    r = d->n <= 4096 ? gr_dfa_minimize(d) : 0; /* Moore's rounds grow with the longest chain: only small ones */
out:
    free(t.off); free(t.len); free(t.data); free(t.slot);
    if (r) gr_dfa_free(d);
    return r;
}

/* ---- back into rules ------------------------------------------------------------------------------ */

/* live[i]: state i reaches an accepting state. Returns whether the start does. */
static int live_states(const gr_dfa *d, uint8_t *live) {
    for (int i = 0; i < d->n; i++) live[i] = d->acc[i];
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = d->n - 1; i >= 0; i--) {
            if (live[i]) continue;
            for (int k = 0; k < d->nclass && !live[i]; k++) {
                int t = d->next[(size_t)i * (size_t)d->nclass + (size_t)k];
                if (t >= 0 && live[t]) { live[i] = 1; changed = 1; }
            }
        }
    }
    return d->n && live[0];
}

int gr_dfa_empty(const gr_dfa *d) {
    uint8_t *live = malloc((size_t)d->n + 1);
    if (!live) return 0;
    int e = !live_states(d, live);
    free(live);
    return e;
}

int gr_dfa_to_node(gr_builder *b, const gr_dfa *d) {
    uint8_t *live = malloc((size_t)d->n + 1);
    int *rule = malloc(sizeof(int) * ((size_t)d->n + 1)), *alts = malloc(sizeof(int) * ((size_t)d->nclass + 1));
    int *tgt = malloc(sizeof(int) * ((size_t)d->nclass + 1));
    int node = -1;
    gr_bset *cb = calloc((size_t)d->nclass + 1, sizeof(gr_bset)); /* each class's bytes */
    if (!live || !rule || !alts || !tgt || !cb) { b->oom = 1; goto out; }
    for (int ch = 0; ch < 256; ch++) bset_add_range(&cb[d->cls[ch]], ch, ch);
    if (!live_states(d, live)) { node = gb_never(b); goto out; }
    for (int i = 0; i < d->n; i++) rule[i] = live[i] ? gb_rule(b, NULL) : -1;
    for (int i = 0; i < d->n && !b->oom; i++) {
        if (!live[i]) continue;
        int m = 0, nt = 0;
        for (int k = 0; k < d->nclass; k++) { /* distinct live targets */
            int t = d->next[(size_t)i * (size_t)d->nclass + (size_t)k], j;
            if (t < 0 || !live[t]) continue;
            for (j = 0; j < nt && tgt[j] != t; j++) {}
            if (j == nt) tgt[nt++] = t;
        }
        for (int j = 0; j < nt; j++) {
            gr_bset s;
            bset_clear(&s);
            for (int k = 0; k < d->nclass; k++)
                if (d->next[(size_t)i * (size_t)d->nclass + (size_t)k] == tgt[j])
                    for (int w = 0; w < 4; w++) s.w[w] |= cb[k].w[w];
            alts[m++] = gb_seq2(b, gb_bytes(b, &s), gb_ref(b, rule[tgt[j]]));
        }
        if (d->acc[i]) alts[m++] = gb_empty(b);
        gb_set_body(b, rule[i], gb_alt(b, alts, m));
    }
    node = b->oom ? -1 : gb_ref(b, rule[0]);
out:
    free(live); free(rule); free(alts); free(tgt); free(cb);
    return node;
}

/* ---- minimization (Moore: refine the accepting / rejecting split until it is stable) ----------- */

int gr_dfa_minimize(gr_dfa *d) {
    int n = d->n, nc = d->nclass, w = nc + 1;
    if (n <= 1) return 0;
    uint8_t *live = malloc((size_t)n);
    int32_t *blk = malloc(4u * (size_t)n), *sig = malloc(4u * (size_t)n * (size_t)w), *ord = malloc(4u * (size_t)n);
    int r = -1;
    if (!live || !blk || !sig || !ord) goto out;
    live_states(d, live);
    for (size_t i = 0; i < (size_t)n * (size_t)nc; i++) /* edges into dead states: none */
        if (d->next[i] >= 0 && !live[d->next[i]]) d->next[i] = -1;
    for (int i = 0; i < n; i++) blk[i] = d->acc[i];
    int nb = 2;
    for (int prev = -1; nb != prev;) {
        prev = nb;
        for (int i = 0; i < n; i++) {
            int32_t *s = sig + (size_t)i * (size_t)w;
            s[0] = blk[i];
            for (int k = 0; k < nc; k++) { int t = d->next[(size_t)i * (size_t)nc + (size_t)k]; s[k + 1] = t < 0 ? -1 : blk[t]; }
        }
        sets t = {0}; /* equal signatures: one new block */
        for (int i = 0; i < n && nb >= 0; i++) if ((ord[i] = intern(&t, sig + (size_t)i * (size_t)w, w)) < 0) nb = -1;
        if (nb >= 0) nb = t.n;
        free(t.off); free(t.len); free(t.data); free(t.slot);
        if (nb < 0) goto out;
        memcpy(blk, ord, 4u * (size_t)n);
    }
    /* renumber blocks so that the start's block is 0, in order of first appearance */
    int32_t *ren = ord;
    for (int i = 0; i < nb; i++) ren[i] = -1;
    int m = 0;
    ren[blk[0]] = m++;
    for (int i = 1; i < n; i++) if (ren[blk[i]] < 0) ren[blk[i]] = m++;
    int32_t *nx = malloc(4u * (size_t)m * (size_t)nc);
    uint8_t *ac = malloc((size_t)m);
    if (!nx || !ac) { free(nx); free(ac); goto out; }
    for (int i = 0; i < n; i++) {
        int b = ren[blk[i]];
        ac[b] = d->acc[i];
        for (int k = 0; k < nc; k++) { int t = d->next[(size_t)i * (size_t)nc + (size_t)k]; nx[(size_t)b * (size_t)nc + (size_t)k] = t < 0 ? -1 : ren[blk[t]]; }
    }
    free(d->next); free(d->acc);
    d->next = nx; d->acc = ac; d->n = d->cap = m;
    r = 0;
out:
    free(live); free(blk); free(sig); free(ord);
    return r;
}

/* ---- counted repetition ------------------------------------------------------------------------- */

int gr_dfa_counted(const gr_dfa *one, int lo, int hi, gr_dfa *d) {
    memset(d, 0, sizeof *d);
    if (!one->n || one->acc[0]) return -1; /* the unit must not match the empty string */
    int nq = 0, *idx = malloc(sizeof(int) * (size_t)one->n);
    if (!idx) return -1;
    for (int q = 0; q < one->n; q++) {
        idx[q] = one->acc[q] ? -1 : nq++;
        for (int k = 0; one->acc[q] && k < one->nclass; k++)
            if (one->next[(size_t)q * (size_t)one->nclass + (size_t)k] >= 0) { free(idx); return -1; } /* a unit must end where it is accepted */
    }
    int levels = hi == GR_INF ? lo + 1 : hi + 1, nc = one->nclass;
    memcpy(d->cls, one->cls, sizeof d->cls);
    d->nclass = nc;
    if ((long)levels * nq > 1000000 || dfa_alloc(d, levels * nq)) { free(idx); gr_dfa_free(d); return -1; }
    for (int lv = 0; lv < levels; lv++)
        for (int q = 0; q < one->n; q++) {
            if (idx[q] < 0) continue;
            int id = lv * nq + idx[q];
            d->acc[id] = q == 0 && lv >= lo;
            for (int k = 0; k < nc; k++) {
                int t = one->next[(size_t)q * (size_t)nc + (size_t)k], to = -1;
                if (t >= 0 && !one->acc[t]) to = lv * nq + idx[t];
                else if (t >= 0) { /* one more unit */
                    int nl = hi == GR_INF && lv + 1 > lo ? lo : lv + 1;
                    if (nl < levels) to = nl * nq + idx[0];
                }
                d->next[(size_t)id * (size_t)nc + (size_t)k] = to;
            }
        }
    d->n = levels * nq;
    free(idx);
    return 0;
}

/* ---- end markers -------------------------------------------------------------------------------- */

int gr_dfa_end_marker(gr_dfa *d, int byte) {
    int k = d->cls[byte & 255];
    for (int c = 0; c < 256; c++) /* the marker must have a class of its own */
        if (c != (byte & 255) && d->cls[c] == k) {
            for (int i = 0; i < d->n; i++)
                if (d->next[(size_t)i * (size_t)d->nclass + (size_t)k] >= 0) return -1;
            return 0; /* no state reads it: nothing to erase */
        }
    for (int changed = 1; changed;) { /* accepting: some run of markers reaches acceptance */
        changed = 0;
        for (int i = 0; i < d->n; i++) {
            int t = d->next[(size_t)i * (size_t)d->nclass + (size_t)k];
            if (!d->acc[i] && t >= 0 && d->acc[t]) { d->acc[i] = 1; changed = 1; }
        }
    }
    for (int i = 0; i < d->n; i++) d->next[(size_t)i * (size_t)d->nclass + (size_t)k] = -1;
    return 0;
}
