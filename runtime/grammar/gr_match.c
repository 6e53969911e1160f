/* gr_match.c — the vocabulary trie and the matcher: parse stacks over bytes, lazily built into a
 * DFA, and token masks (see grammar.h for the design).
 *
 * A stack node is (pos, parent): "at element pos of an alternative; when it ends, continue with
 * parent". Node 0 is the empty stack (the grammar has ended). Nodes are hash-consed, so a stack is
 * one id and equal stacks are equal ids; a rule reference in tail position pushes no frame, so
 * right-recursive loops run in constant depth. Left recursion would grow stacks without bound: a
 * depth limit turns it into an error. A state is an interned sorted set of stacks whose tops are
 * byte sets (or the empty stack); state × byte → state is cached in a 256-entry row per state.
 *
 * A reference to a counted rule (X{lo,hi}, gr_internal.h) is a counter node (pos, parent, owed,
 * allowed): its expansion is one more X under the node with both counts less one, and, when
 * nothing is owed, what follows. Counts still differ per node, so a long string is still one
 * state per character, but canon_state clamps them for the mask cache, and a counted JSON
 * string's masks need no walk of its content (json_count_state).
 */
#include <stdlib.h>
#include <string.h>

#include "gr_internal.h"

#define MAX_DEPTH 2048
#define MAX_NODES (1 << 22)
#define MAX_MEMBERS (1 << 24)
#define MASK_SLOTS 32
#define MAX_TOKEN_BYTES 1024
#define ALEN_MAX 32
#define JLE_MAX 64 /* per-length sets of JSON content tokens up to this many characters; longer ones are listed */
#define UNI_MAX 16 /* how far uniform depths look ahead (each level is a state built on its first visit) */
#define UNKNOWN (-2)
#define DEAD (-1)
#define CINF INT32_MAX /* a counter without an upper bound */
#define JQ_REST 0x4000 /* gr_vocab.jq_chars: the closing quote is not the token's last byte */

/* ---- vocabulary ------------------------------------------------------------------------------- */

/* A trie node as the mask walk reads it: one 16-byte record (one cache line fetch per node). */
typedef struct tnode {
    int32_t skip, tok;          /* the node after this subtree; first token ending here (-1) */
    uint16_t depth, amax, cmax; /* see the arrays of the same names below */
    uint8_t byte, has_np;
} tnode;

typedef struct trie {
    uint8_t *byte; uint16_t *depth; int32_t *skip; int32_t *tok; /* tok: first token ending here, -1 */
    uint8_t *has_np;   /* the subtree holds a token with a non-plain byte */
    int32_t *tpos;     /* [n + 1] tokens ending before node i, in DFS order: order[tpos[i] .. tpos[skip[i]]) */
    int32_t *order;    /* token ids in DFS order */
    uint16_t *amax;    /* longest token below, when all of them are ASCII-plain; 0xFFFF if not */
    uint16_t *cmax;    /* most characters of a token below, when all of them are UTF-8-plain; 0xFFFF if not */
    tnode *nd;         /* the fields above packed per node; the arrays are freed once it is built */
    const int32_t *next; /* next token with the same bytes (the vocabulary's array for this trie) */
    int32_t n;
} trie;

struct gr_vocab {
    int32_t n;
    int32_t max_len;     /* the longest token's bytes */
    int32_t *eos; int n_eos;
    int32_t *tok_next;   /* [n] next token with the same bytes, -1 */
    trie full;           /* every token */
    trie sfx;            /* tokens with a non-plain byte after a plain first one, each from its first
                            non-plain byte on (from a plain fixed point, only that part decides) */
    int32_t *sfx_next;   /* [n] next token with the same suffix, -1 */
    uint32_t *plain;     /* bitmask: tokens made only of plain bytes */
    uint32_t *ascii;     /* bitmask: tokens made only of ASCII plain bytes (0x20..0x7E but '"' '\\') */
    uint32_t *first_plain; /* bitmask: tokens whose first byte is plain */
    uint32_t *ascii_le;  /* [ALEN_MAX + 1][words]: ASCII-plain tokens of at most L bytes */
    uint32_t *utf8_le;   /* [ALEN_MAX + 1][words]: UTF-8-plain tokens (whole valid characters, no
                            control, DEL, '"' or '\\') of at most L characters */
    gr_bset plain_class; /* bytes 0x20..0xFF but '"' and '\\' */
    /* JSON string content (RFC 8259 characters, gb_json_char_utf8), for counted strings: */
    uint32_t *jle;       /* [JLE_MAX + 1][words]: tokens of 1..L characters of content (a last one
                            may be incomplete: it counts as one) */
    int32_t *jlong; int32_t n_jlong; /* content tokens of more than JLE_MAX characters */
    int16_t *jlong_chars;            /* [n_jlong] their characters */
    int32_t *jq;         /* ids of tokens of content, an unescaped '"', anything: the closing ones */
    int16_t *jq_chars;   /* [n] characters before that quote, + JQ_REST when bytes follow it; -1: not closing */
    int32_t n_jq;
    trie jqs;            /* the closing tokens from just after their quote (empty rests excluded) */
    int32_t *jqs_next;   /* [n] next token with the same rest, -1 */
    char *arena; int32_t *off, *len; /* each token's bytes */
};

/* Characters of s[0..n) when every one is a whole, valid UTF-8 character (no surrogate, no
 * overlong form) other than a control, DEL, '"' or '\\'; -1 otherwise. */
static int utf8_plain_chars(const unsigned char *s, int n) {
    int chars = 0;
    for (int i = 0; i < n; chars++) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') return -1;
            i++;
            continue;
        }
        int k = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (k < 0 || i + k >= n) return -1;
        unsigned lo = 0x80, hi = 0xBF, c1 = s[i + 1]; /* the second byte's range depends on the lead */
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        if (c1 < lo || c1 > hi) return -1;
        for (int j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF) return -1;
        i += k + 1;
    }
    return chars;
}

/* JSON string content from a character boundary (the characters of gb_json_char_utf8): the
 * characters of s[0..n) when all of it is content, a last incomplete character or escape counting
 * as one (*q = -1); or, at the first unescaped '"' after whole characters, the characters before
 * it (*q = its offset); -1 when neither. */
static int json_content(const unsigned char *s, int n, int *q) {
    *q = -1;
    int chars = 0;
    for (int i = 0; i < n; chars++) {
        unsigned c = s[i];
        if (c == '"') { *q = i; return chars; }
        if (c == '\\') {
            if (i + 1 == n) return chars + 1;
            unsigned e = s[i + 1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') { i += 2; continue; }
            if (e != 'u') return -1;
            for (int j = 2; j < 6; j++) {
                if (i + j == n) return chars + 1;
                unsigned h = s[i + j];
                if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return -1;
            }
            i += 6;
            continue;
        }
        if (c < 0x20) return -1;
        if (c < 0x80) { i++; continue; }
        int k = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (k < 0) return -1;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        for (int j = 1; j <= k; j++) {
            if (i + j == n) return chars + 1;
            unsigned x = s[i + j];
            if (x < (j == 1 ? lo : 0x80) || x > (j == 1 ? hi : 0xBF)) return -1;
        }
        i += k + 1;
    }
    return chars;
}

/* Token ids sorted by their bytes (then by id, a total order), for the tries. A merge sort of
 * its own with the bytes passed in: qsort has no context argument, and a file-level variable for
 * its comparator would make two vocabularies built at once in two threads sort with each other's
 * bytes. */
typedef struct { const char *arena; const int32_t *off, *len; } sort_ctx;

static int tok_before(const sort_ctx *c, int32_t x, int32_t y) {
    int32_t lx = c->len[x], ly = c->len[y];
    int r = memcmp(c->arena + c->off[x], c->arena + c->off[y], (size_t)(lx < ly ? lx : ly));
    if (r) return r < 0;
    return lx != ly ? lx < ly : x < y;
}

/* Sorts ids[0..n) in place (tmp: n scratch ids). Bottom-up: runs of 1, 2, 4, ... merged
 * between ids and tmp, copied back when the last pass left them in tmp. */
static void sort_tokens_with(const sort_ctx *c, int32_t *ids, int32_t *tmp, int32_t n) {
    int32_t *a = ids, *b = tmp;
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = tok_before(c, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        int32_t *t = a; a = b; b = t;
    }
    if (a != ids) memcpy(ids, a, (size_t)n * sizeof *ids);
}

/* Returns 0, or -1 when out of memory (ids unchanged). */
static int sort_tokens(const char *arena, const int32_t *off, const int32_t *len, int32_t *ids, int32_t n) {
    if (n < 2) return 0;
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) return -1;
    const sort_ctx c = {arena, off, len};
    sort_tokens_with(&c, ids, tmp, n);
    free(tmp);
    return 0;
}

static void trie_free(trie *t) {
    free(t->byte); free(t->depth); free(t->skip); free(t->tok); free(t->has_np); free(t->tpos); free(t->order);
    free(t->amax); free(t->cmax); free(t->nd);
}

/* DFS token order, subtree token ranges and the non-plain flags (after trie_build). */
static int trie_index(trie *t, const int32_t *tok_next, const uint32_t *plain, const uint32_t *ascii, const int16_t *nchar,
                      int32_t n_tokens) {
    t->has_np = calloc((size_t)t->n + 1, 1);
    t->tpos = malloc(((size_t)t->n + 1) * 4);
    t->order = malloc(((size_t)n_tokens + 1) * 4);
    if (!t->has_np || !t->tpos || !t->order) return -1;
    int32_t k = 0;
    for (int32_t i = 0; i < t->n; i++) {
        t->tpos[i] = k;
        for (int32_t id = t->tok[i]; id >= 0; id = tok_next[id]) {
            t->order[k++] = id;
            if (!(plain[id >> 5] >> (id & 31) & 1)) t->has_np[i] = 1;
        }
    }
    t->tpos[t->n] = k;
    t->amax = malloc(((size_t)t->n + 1) * 2);
    t->cmax = malloc(((size_t)t->n + 1) * 2);
    int32_t *parent = malloc(((size_t)t->n + 1) * 4), path[MAX_TOKEN_BYTES + 1];
    if (!t->amax || !t->cmax || !parent) { free(parent); return -1; }
    for (int32_t i = 0; i < t->n; i++) { /* parents from the DFS order */
        path[t->depth[i]] = i;
        parent[i] = t->depth[i] > 1 ? path[t->depth[i] - 1] : -1;
        t->amax[i] = t->cmax[i] = 0;
        for (int32_t id = t->tok[i]; id >= 0; id = tok_next[id]) {
            if (!(ascii[id >> 5] >> (id & 31) & 1)) t->amax[i] = 0xFFFF;
            else if (t->amax[i] < t->depth[i]) t->amax[i] = t->depth[i];
            if (nchar[id] < 0) t->cmax[i] = 0xFFFF;
            else if (t->cmax[i] < nchar[id]) t->cmax[i] = (uint16_t)nchar[id];
        }
    }
    for (int32_t i = t->n - 1; i >= 0; i--) { /* children come after parents: fold upward */
        int32_t p = parent[i];
        if (p < 0) continue;
        if (t->has_np[i]) t->has_np[p] = 1;
        if (t->amax[i] > t->amax[p]) t->amax[p] = t->amax[i];
        if (t->cmax[i] > t->cmax[p]) t->cmax[p] = t->cmax[i];
    }
    free(parent);
    if (!(t->nd = malloc(((size_t)t->n + 1) * sizeof *t->nd))) return -1;
    for (int32_t i = 0; i < t->n; i++)
        t->nd[i] = (tnode){.skip = t->skip[i], .tok = t->tok[i], .depth = t->depth[i], .amax = t->amax[i], .cmax = t->cmax[i],
                           .byte = t->byte[i], .has_np = t->has_np[i]};
    free(t->byte); free(t->depth); free(t->skip); free(t->tok); free(t->has_np); free(t->amax); free(t->cmax);
    t->byte = NULL; t->depth = NULL; t->skip = NULL; t->tok = NULL; t->has_np = NULL; t->amax = NULL; t->cmax = NULL;
    return 0;
}

/* Builds a trie over the sorted tokens ids[0..n) (bytes in arena). */
static int trie_build(trie *t, const int32_t *ids, int32_t n, const char *arena, const int32_t *off,
                      const int32_t *len, int32_t *tok_next) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += (size_t)len[ids[i]];
    memset(t, 0, sizeof *t);
    t->byte = malloc(total + 1); t->depth = malloc((total + 1) * 2);
    t->skip = malloc((total + 1) * 4); t->tok = malloc((total + 1) * 4);
    int32_t path[MAX_TOKEN_BYTES + 1]; /* node index at each depth of the current path */
    if (!t->byte || !t->depth || !t->skip || !t->tok) return -1;
    int32_t pd = 0; /* path depth */
    const char *prev = NULL;
    int32_t prevlen = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = ids[i], l = len[id];
        const char *s = arena + off[id];
        int32_t lcp = 0;
        while (prev && lcp < l && lcp < prevlen && s[lcp] == prev[lcp]) lcp++;
        if (prev && lcp == l && l == prevlen) { /* same bytes as the previous token */
            int32_t node = path[l - 1];
            tok_next[id] = t->tok[node];
            t->tok[node] = id;
            continue;
        }
        while (pd > lcp) t->skip[path[--pd]] = t->n;
        for (int32_t k = lcp; k < l; k++) {
            t->byte[t->n] = (uint8_t)s[k];
            t->depth[t->n] = (uint16_t)(k + 1);
            t->tok[t->n] = -1;
            path[pd++] = t->n++;
        }
        t->tok[path[l - 1]] = id;
        prev = s;
        prevlen = l;
    }
    while (pd > 0) t->skip[path[--pd]] = t->n;
    return 0;
}

/* The JSON content tables (gr_vocab.jle, jq, jq_chars, jqs) once arena / off / len are set. */
static int json_tables(gr_vocab *v, const int16_t *nchar) {
    int32_t n = v->n, nr = 0;
    size_t words = (size_t)(n + 31) / 32 + 1;
    v->jle = calloc(JLE_MAX + 1, words * 4);
    v->jlong = malloc((size_t)(n + 1) * 4);
    v->jlong_chars = malloc((size_t)(n + 1) * 2);
    v->jq = malloc((size_t)(n + 1) * 4);
    v->jq_chars = malloc((size_t)(n + 1) * 2);
    v->jqs_next = malloc((size_t)(n + 1) * 4);
    int32_t *roff = malloc((size_t)(n + 1) * 4), *rlen = calloc((size_t)n + 1, 4), *rids = malloc((size_t)(n + 1) * 4);
    int rc = -1;
    if (!v->jle || !v->jlong || !v->jlong_chars || !v->jq || !v->jq_chars || !v->jqs_next || !roff || !rlen || !rids) goto out;
    for (int32_t id = 0; id < n; id++) {
        v->jq_chars[id] = -1;
        v->jqs_next[id] = -1;
        int q, l = v->len[id];
        int c = l > 0 ? json_content((const unsigned char *)v->arena + v->off[id], l, &q) : -1;
        if (c < 0) continue;
        if (q < 0 && c > JLE_MAX) { v->jlong_chars[v->n_jlong] = (int16_t)c; v->jlong[v->n_jlong++] = id; continue; }
        if (q < 0) { v->jle[(size_t)c * words + (id >> 5)] |= 1u << (id & 31); continue; }
        v->jq[v->n_jq++] = id;
        v->jq_chars[id] = (int16_t)(c + (q + 1 < l ? JQ_REST : 0));
        if (q + 1 < l) { roff[id] = v->off[id] + q + 1; rlen[id] = l - q - 1; rids[nr++] = id; }
    }
    for (int32_t L = 1; L <= JLE_MAX; L++)
        for (size_t w = 0; w < words; w++) v->jle[(size_t)L * words + w] |= v->jle[(size_t)(L - 1) * words + w];
    if (sort_tokens(v->arena, roff, rlen, rids, nr) || trie_build(&v->jqs, rids, nr, v->arena, roff, rlen, v->jqs_next) ||
        trie_index(&v->jqs, v->jqs_next, v->plain, v->ascii, nchar, n)) goto out;
    v->jqs.next = v->jqs_next;
    rc = 0;
out:
    free(roff); free(rlen); free(rids);
    return rc;
}

/* The suffix trie (gr_vocab.sfx) over the sorted tokens ids[0..nk). */
static int sfx_build(gr_vocab *v, const int32_t *ids, int32_t nk, const char *arena, const int32_t *off, const int32_t *len,
                     const int16_t *nchar) {
    int32_t n = v->n, ns = 0;
    int32_t *soff = malloc((size_t)(n + 1) * 4), *slen = calloc((size_t)n + 1, 4), *sids = malloc((size_t)(n + 1) * 4);
    v->sfx_next = malloc((size_t)(n + 1) * 4);
    int rc = -1;
    if (!soff || !slen || !sids || !v->sfx_next) goto out;
    for (int32_t id = 0; id < n; id++) v->sfx_next[id] = -1;
    for (int32_t i = 0; i < nk; i++) {
        int32_t id = ids[i], k = 0;
        if (v->plain[id >> 5] >> (id & 31) & 1) continue;
        while (k < len[id] && bset_has(&v->plain_class, (unsigned char)arena[off[id] + k])) k++;
        if (k == 0) continue; /* the root walk sees it */
        soff[id] = off[id] + k;
        slen[id] = len[id] - k;
        sids[ns++] = id;
    }
    if (sort_tokens(arena, soff, slen, sids, ns) || trie_build(&v->sfx, sids, ns, arena, soff, slen, v->sfx_next) ||
        trie_index(&v->sfx, v->sfx_next, v->plain, v->ascii, nchar, n)) goto out;
    v->sfx.next = v->sfx_next;
    rc = 0;
out:
    free(soff); free(slen); free(sids);
    return rc;
}

ig_status gr_vocab_new(int32_t n, gr_token_bytes_fn tok_bytes, void *ctx, const int32_t *eos_ids, int n_eos,
                       gr_vocab **out, ig_err *err) {
    *out = NULL;
    gr_vocab *v = calloc(1, sizeof *v);
    int32_t *off = malloc((size_t)(n + 1) * 4), *len = malloc((size_t)(n + 1) * 4);
    int32_t *ids = malloc((size_t)(n + 1) * 4), *rest = malloc((size_t)(n + 1) * 4);
    int16_t *nchar = malloc((size_t)(n + 1) * 2);
    size_t acap = 1 << 20, an = 0;
    char *arena = malloc(acap), buf[MAX_TOKEN_BYTES];
    ig_status st = IG_ERR_NOMEM;
    if (!v || !off || !len || !ids || !rest || !arena || !nchar) goto done;
    v->n = n;
    v->tok_next = malloc((size_t)(n + 1) * 4);
    v->plain = calloc((size_t)(n + 31) / 32 + 1, 4);
    v->ascii = calloc((size_t)(n + 31) / 32 + 1, 4);
    v->first_plain = calloc((size_t)(n + 31) / 32 + 1, 4);
    v->eos = malloc((size_t)(n_eos + 1) * 4);
    if (!v->tok_next || !v->plain || !v->ascii || !v->first_plain || !v->eos) goto done;
    for (int i = 0; i < n_eos; i++) v->eos[i] = eos_ids[i];
    v->n_eos = n_eos;
    bset_add_range(&v->plain_class, 0x20, 0xFF);
    v->plain_class.w['"' >> 6] &= ~(1ull << ('"' & 63));
    v->plain_class.w['\\' >> 6] &= ~(1ull << ('\\' & 63));
    int32_t nk = 0, nr = 0;
    for (int32_t id = 0; id < n; id++) {
        v->tok_next[id] = -1;
        int is_eos = 0;
        for (int i = 0; i < n_eos; i++) is_eos |= eos_ids[i] == id;
        int l = is_eos ? -1 : tok_bytes(ctx, id, buf, sizeof buf);
        off[id] = (int32_t)an;
        len[id] = l > 0 ? l : 0;
        nchar[id] = -1;
        if (l <= 0) continue;
        if (l > v->max_len) v->max_len = l;
        int nc = utf8_plain_chars((const unsigned char *)buf, l);
        nchar[id] = (int16_t)(nc <= ALEN_MAX ? nc : -1);
        if (an + (size_t)l > acap) {
            char *a2 = realloc(arena, acap *= 2);
            if (!a2) goto done;
            arena = a2;
        }
        memcpy(arena + an, buf, (size_t)l);
        an += (size_t)l;
        ids[nk++] = id;
        int plain = 1;
        for (int k = 0; k < l; k++) plain &= bset_has(&v->plain_class, (unsigned char)buf[k]);
        if (plain) v->plain[id >> 5] |= 1u << (id & 31);
        if (bset_has(&v->plain_class, (unsigned char)buf[0])) v->first_plain[id >> 5] |= 1u << (id & 31);
        int asc = plain;
        for (int k = 0; k < l; k++) asc &= (unsigned char)buf[k] < 0x7F;
        if (asc) v->ascii[id >> 5] |= 1u << (id & 31);
    }
    if (sort_tokens(arena, off, len, ids, nk)) goto done;
    for (int32_t i = 0; i < nk; i++)
        if (!(v->plain[ids[i] >> 5] >> (ids[i] & 31) & 1)) rest[nr++] = ids[i];
    if (trie_build(&v->full, ids, nk, arena, off, len, v->tok_next)) goto done;
    (void)nr;
    if (trie_index(&v->full, v->tok_next, v->plain, v->ascii, nchar, n)) goto done;
    v->full.next = v->tok_next;
    if (sfx_build(v, ids, nk, arena, off, len, nchar)) goto done;
    size_t words = (size_t)(n + 31) / 32 + 1;
    if (!(v->ascii_le = calloc(ALEN_MAX + 1, words * 4)) || !(v->utf8_le = calloc(ALEN_MAX + 1, words * 4))) goto done;
    for (int32_t id = 0; id < n; id++) {
        if ((v->ascii[id >> 5] >> (id & 31) & 1) && len[id] <= ALEN_MAX)
            for (int L = len[id]; L <= ALEN_MAX; L++) v->ascii_le[(size_t)L * words + (id >> 5)] |= 1u << (id & 31);
        if (nchar[id] > 0)
            for (int L = nchar[id]; L <= ALEN_MAX; L++) v->utf8_le[(size_t)L * words + (id >> 5)] |= 1u << (id & 31);
    }
    v->arena = arena; v->off = off; v->len = len;
    arena = NULL; off = len = NULL;
    if (json_tables(v, nchar)) goto done;
    st = IG_OK;
done:
    free(off); free(len); free(ids); free(rest); free(arena); free(nchar);
    if (st) { gr_vocab_free(v); return ig_fail(err, st, "grammar: out of memory building the vocabulary trie"); }
    *out = v;
    return IG_OK;
}

void gr_vocab_free(gr_vocab *v) {
    if (!v) return;
    trie_free(&v->full);
    trie_free(&v->sfx);
    free(v->sfx_next);
    trie_free(&v->jqs);
    free(v->jqs_next); free(v->jle); free(v->jlong); free(v->jlong_chars); free(v->jq); free(v->jq_chars); free(v->first_plain);
    free(v->tok_next); free(v->plain); free(v->ascii); free(v->ascii_le); free(v->utf8_le); free(v->eos); free(v->arena); free(v->off); free(v->len);
    free(v);
}

int32_t gr_vocab_size(const gr_vocab *v) { return v ? v->n : 0; }

/* ---- matcher ----------------------------------------------------------------------------------- */

typedef struct sstate {
    int32_t off, n;     /* members[off .. off+n) */
    uint32_t hash;
    int8_t accept;      /* contains the empty stack */
    int8_t slice;       /* -1 unknown, 0/1: a stack loops over every plain byte */
    int8_t uni;         /* -1 unknown, else D: every ASCII-plain string of <= D bytes stays alive */
    int8_t uni8;        /* -1 unknown, else D: every UTF-8-plain string of <= D characters stays alive */
    int32_t usucc;      /* UNKNOWN, DEAD (none), or the one state every UTF-8-plain character leads to */
    int8_t fixp;        /* -1 unknown, 0/1: every plain byte leads back to this state */
    int32_t canon;      /* UNKNOWN, or the state with every counter clamped (same mask: canon_state) */
    int32_t *next;      /* [256] or NULL */
} sstate;

struct gr_matcher {
    const gr_grammar *g;
    const gr_vocab *v;
    int32_t *pos, *parent, *depth; int32_t n_nodes, cap_nodes;
    int32_t *cmin, *cmax;                    /* a counter node's iterations owed / allowed; -1: none */
    int32_t *cnode;                          /* the node with its counters clamped (UNKNOWN: not yet) */
    int32_t clamp;                           /* counters clamp to this: the longest token + 1 */
    int32_t *nhash; int32_t nh_cap;          /* node intern table: id + 1 */
    int32_t *members; int32_t n_members, cap_members;
    sstate *st; int32_t n_st, cap_st;
    int32_t *shash; int32_t sh_cap;          /* state intern table: id + 1 */
    uint32_t *stamp; int32_t cap_stamp; uint32_t gen;
    int32_t *tmp; int32_t n_tmp, cap_tmp;
    int32_t init, cur;
    int done;
    int failed; char fail_msg[200];
    int nested;                              /* inside fixed_root: no second level */
    uint32_t *mask_cache; int32_t mask_owner[MASK_SLOTS]; int32_t words;
    uint32_t *scratch;                       /* [words]: closing tokens of a counted JSON string */
    int32_t walk[MAX_TOKEN_BYTES + 1];
};

static int grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void fail(gr_matcher *m, const char *msg) {
    if (!m->failed) { m->failed = 1; strncpy(m->fail_msg, msg, sizeof m->fail_msg - 1); }
}

static uint32_t mix(uint32_t h, uint32_t x) { h ^= x; h *= 0x9E3779B1u; return h ^ (h >> 15); }

static uint32_t node_hash(int32_t pos, int32_t parent, int32_t cmin, int32_t cmax) {
    uint32_t h = mix(mix(0, (uint32_t)pos), (uint32_t)parent);
    return cmin < 0 ? h : mix(mix(h, (uint32_t)cmin), (uint32_t)cmax);
}

static int rehash_nodes(gr_matcher *m, int32_t cap) {
    int32_t *t = calloc((size_t)cap, 4);
    if (!t) return -1;
    for (int32_t id = 1; id < m->n_nodes; id++) {
        uint32_t i = node_hash(m->pos[id], m->parent[id], m->cmin[id], m->cmax[id]) & (uint32_t)(cap - 1);
        while (t[i]) i = (i + 1) & (uint32_t)(cap - 1);
        t[i] = id + 1;
    }
    free(m->nhash);
    m->nhash = t;
    m->nh_cap = cap;
    return 0;
}

/* The node (pos, parent, counters cmin / cmax: -1 for none), made if new; -1 on failure
 * (m->failed set). */
static int32_t intern_cnode(gr_matcher *m, int32_t pos, int32_t parent, int32_t cmin, int32_t cmax) {
    uint32_t h = node_hash(pos, parent, cmin, cmax), mk = (uint32_t)(m->nh_cap - 1);
    for (uint32_t i = h & mk;; i = (i + 1) & mk) {
        int32_t e = m->nhash[i];
        if (!e) break;
        if (m->pos[e - 1] == pos && m->parent[e - 1] == parent && m->cmin[e - 1] == cmin && m->cmax[e - 1] == cmax) return e - 1;
    }
    int32_t d = m->depth[parent] + 1;
    if (d > MAX_DEPTH) { fail(m, "grammar: parse stack too deep (left recursion?)"); return -1; }
    if (m->n_nodes >= MAX_NODES) { fail(m, "grammar: automaton state limit reached"); return -1; }
    int32_t c1 = m->cap_nodes, c2 = m->cap_nodes, c3 = m->cap_nodes, c4 = m->cap_nodes, c5 = m->cap_nodes, c6 = m->cap_nodes;
    if (grow((void **)&m->pos, &c1, m->n_nodes + 1, 4) || grow((void **)&m->parent, &c2, m->n_nodes + 1, 4) ||
        grow((void **)&m->depth, &c3, m->n_nodes + 1, 4) || grow((void **)&m->cmin, &c4, m->n_nodes + 1, 4) ||
        grow((void **)&m->cmax, &c5, m->n_nodes + 1, 4) || grow((void **)&m->cnode, &c6, m->n_nodes + 1, 4)) {
        fail(m, "grammar: out of memory");
        return -1;
    }
    m->cap_nodes = c1;
    int32_t id = m->n_nodes++;
    m->pos[id] = pos; m->parent[id] = parent; m->depth[id] = d; m->cmin[id] = cmin; m->cmax[id] = cmax; m->cnode[id] = UNKNOWN;
    if (m->n_nodes * 2 > m->nh_cap) {
        if (rehash_nodes(m, m->nh_cap * 2)) { fail(m, "grammar: out of memory"); return -1; }
    } else {
        uint32_t i = h & mk;
        while (m->nhash[i]) i = (i + 1) & mk;
        m->nhash[i] = id + 1;
    }
    return id;
}

static int32_t intern_node(gr_matcher *m, int32_t pos, int32_t parent) { return intern_cnode(m, pos, parent, -1, -1); }

static int visit(gr_matcher *m, int32_t s) {
    if (s >= m->cap_stamp) {
        int32_t old = m->cap_stamp;
        if (grow((void **)&m->stamp, &m->cap_stamp, s + 1, 4)) { fail(m, "grammar: out of memory"); return 0; }
        memset(m->stamp + old, 0, (size_t)(m->cap_stamp - old) * 4);
    }
    if (m->stamp[s] == m->gen) return 0;
    m->stamp[s] = m->gen;
    return 1;
}

static void add_tmp(gr_matcher *m, int32_t s) {
    if (grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, 4)) { fail(m, "grammar: out of memory"); return; }
    m->tmp[m->n_tmp++] = s;
}

static void expand(gr_matcher *m, int32_t s);

/* Counter node s (at a reference to counted rule r, cmin iterations owed, cmax allowed): one more
 * iteration under the node with both counts less one, and, when none is owed, what follows. */
static void expand_counted(gr_matcher *m, int32_t s, int32_t r) {
    const gr_grammar *g = m->g;
    int32_t pos = m->pos[s], par = m->parent[s], lo = m->cmin[s], hi = m->cmax[s];
    if (hi > 0) {
        int32_t child = intern_cnode(m, pos, par, lo > 0 ? lo - 1 : 0, hi == CINF ? CINF : hi - 1);
        if (child < 0) return;
        for (int32_t a = 0; a < g->alt_count[r]; a++) {
            int32_t c = intern_node(m, g->alts[g->alt_start[r] + a], child);
            if (c < 0) return;
            expand(m, c);
        }
    }
    if (lo == 0) {
        int32_t cont = g->elems[pos + 1] == GR_END ? par : intern_node(m, pos + 1, par);
        if (cont >= 0) expand(m, cont);
    }
}

/* Adds to tmp every stack with a byte set (or nothing) on top that stack s reaches without
 * consuming a byte. */
static void expand(gr_matcher *m, int32_t s) {
    const gr_grammar *g = m->g;
    while (!m->failed && visit(m, s)) {
        if (s == 0) { add_tmp(m, 0); return; }
        int32_t pos = m->pos[s], e = g->elems[pos];
        if (e == GR_END) { s = m->parent[s]; continue; }
        if (e >= 0) { add_tmp(m, s); return; }
        int32_t r = GR_REF_RULE(e), par = m->parent[s];
        if (g->n_counted && g->rep_lo[r] >= 0) { /* a counted rule: the node carries its counters */
            if (m->cmin[s] < 0) { /* entering: the full counts */
                s = intern_cnode(m, pos, par, g->rep_lo[r], g->rep_hi[r] == GR_INF ? CINF : g->rep_hi[r]);
                if (s < 0) return;
                continue;
            }
            expand_counted(m, s, r);
            return;
        }
        int32_t cont = g->elems[pos + 1] == GR_END ? par : intern_node(m, pos + 1, par);
        if (cont < 0) return;
        for (int32_t a = 0; a < g->alt_count[r]; a++) {
            int32_t c = intern_node(m, g->alts[g->alt_start[r] + a], cont);
            if (c < 0) return;
            expand(m, c);
        }
        return;
    }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int rehash_states(gr_matcher *m, int32_t cap) {
    int32_t *t = calloc((size_t)cap, 4);
    if (!t) return -1;
    for (int32_t id = 0; id < m->n_st; id++) {
        uint32_t i = m->st[id].hash & (uint32_t)(cap - 1);
        while (t[i]) i = (i + 1) & (uint32_t)(cap - 1);
        t[i] = id + 1;
    }
    free(m->shash);
    m->shash = t;
    m->sh_cap = cap;
    return 0;
}

/* Interns tmp[0..n_tmp) as a state; DEAD if empty; -3 on failure. */
static int32_t intern_state(gr_matcher *m) {
    if (m->failed) return -3;
    if (!m->n_tmp) return DEAD;
    qsort(m->tmp, (size_t)m->n_tmp, 4, cmp_i32);
    int32_t nu = 1; /* duplicates: only from clamped counters (canon_state) */
    for (int32_t i = 1; i < m->n_tmp; i++)
        if (m->tmp[i] != m->tmp[nu - 1]) m->tmp[nu++] = m->tmp[i];
    m->n_tmp = nu;
    uint32_t h = 0;
    for (int32_t i = 0; i < m->n_tmp; i++) h = mix(h, (uint32_t)m->tmp[i]);
    uint32_t mk = (uint32_t)(m->sh_cap - 1);
    for (uint32_t i = h & mk;; i = (i + 1) & mk) {
        int32_t e = m->shash[i];
        if (!e) break;
        sstate *x = &m->st[e - 1];
        if (x->hash == h && x->n == m->n_tmp && !memcmp(m->members + x->off, m->tmp, (size_t)x->n * 4)) return e - 1;
    }
    if (m->n_members + m->n_tmp > MAX_MEMBERS) { fail(m, "grammar: automaton state limit reached"); return -3; }
    if (grow((void **)&m->members, &m->cap_members, m->n_members + m->n_tmp, 4) ||
        grow((void **)&m->st, &m->cap_st, m->n_st + 1, sizeof(sstate))) { fail(m, "grammar: out of memory"); return -3; }
    sstate *x = &m->st[m->n_st];
    x->off = m->n_members; x->n = m->n_tmp; x->hash = h; x->accept = m->tmp[0] == 0; x->slice = -1; x->uni = -1; x->uni8 = -1; x->fixp = -1; x->usucc = UNKNOWN; x->canon = UNKNOWN; x->next = NULL;
    memcpy(m->members + m->n_members, m->tmp, (size_t)m->n_tmp * 4);
    m->n_members += m->n_tmp;
    int32_t id = m->n_st++;
    if (m->n_st * 2 > m->sh_cap) {
        if (rehash_states(m, m->sh_cap * 2)) { fail(m, "grammar: out of memory"); return -3; }
    } else {
        uint32_t i = h & mk;
        while (m->shash[i]) i = (i + 1) & mk;
        m->shash[i] = id + 1;
    }
    return id;
}

/* Stack s after consuming one byte its top accepts: expanded into tmp. */
static void step_stack(gr_matcher *m, int32_t s) {
    int32_t pos = m->pos[s], par = m->parent[s];
    int32_t nx = m->g->elems[pos + 1] == GR_END ? par : intern_node(m, pos + 1, par);
    if (nx >= 0) expand(m, nx);
}

static int32_t compute_next(gr_matcher *m, int32_t state, int c) {
    m->gen++;
    m->n_tmp = 0;
    const sstate *x = &m->st[state];
    for (int32_t i = 0; i < x->n; i++) {
        int32_t s = m->members[m->st[state].off + i];
        if (s == 0) continue;
        if (bset_has(&m->g->sets[m->g->elems[m->pos[s]]], c)) step_stack(m, s);
    }
    return intern_state(m);
}

/* The bytes of a state split into classes that every member's byte set treats alike (partition
 * refinement: one pass over the 256 bytes per member): bytes of a class lead to the same state.
 * cls[c] is the class of byte c; returns the number of classes. */
static int byte_classes(const gr_matcher *m, int32_t state, uint8_t cls[256]) {
    memset(cls, 0, 256);
    int n = 1;
    const sstate *x = &m->st[state];
    int32_t prev_set = -1;
    for (int32_t i = 0; i < x->n && n < 256; i++) {
        int32_t s = m->members[x->off + i];
        if (s == 0) continue;
        int32_t set = m->g->elems[m->pos[s]];
        if (set == prev_set) continue;
        prev_set = set;
        const gr_bset *X = &m->g->sets[set];
        int16_t map[2][256];
        memset(map, 0xff, sizeof map);
        int n2 = 0;
        for (int c = 0; c < 256; c++) {
            int b = bset_has(X, c), k = cls[c];
            if (map[b][k] < 0) map[b][k] = (int16_t)n2++;
            cls[c] = (uint8_t)map[b][k];
        }
        n = n2;
    }
    return n;
}

/* The state's row of transitions, every byte filled: one computation per byte class. */
static int fill_row(gr_matcher *m, int32_t state) {
    int32_t *row = malloc(256 * 4);
    if (!row) { fail(m, "grammar: out of memory"); return -1; }
    uint8_t cls[256];
    int n = byte_classes(m, state, cls);
    int32_t res[256];
    for (int k = 0; k < n; k++) res[k] = UNKNOWN;
    for (int c = 0; c < 256; c++) {
        int k = cls[c];
        if (res[k] == UNKNOWN) res[k] = compute_next(m, state, c);
        if (res[k] == -3) { free(row); return -1; }
        row[c] = res[k];
    }
    m->st[state].next = row; /* m->st may have moved while computing */
    return 0;
}

/* state × byte → state (DEAD), cached; -3 on failure. */
static inline int32_t next_state(gr_matcher *m, int32_t state, int c) {
    int32_t *row = m->st[state].next;
    if (row) return row[c];
    if (fill_row(m, state)) return -3;
    return m->st[state].next[c];
}

/* 1 if some stack of the state loops on itself over every plain byte. */
static int slice_ok(gr_matcher *m, int32_t state) {
    if (m->st[state].slice >= 0) return m->st[state].slice;
    int ok = 0;
    for (int32_t i = 0; !ok && i < m->st[state].n; i++) {
        int32_t s = m->members[m->st[state].off + i];
        if (s == 0) continue;
        const gr_bset *X = &m->g->sets[m->g->elems[m->pos[s]]];
        int sup = 1;
        for (int w = 0; w < 4; w++) sup &= (m->v->plain_class.w[w] & ~X->w[w]) == 0;
        if (!sup) continue;
        m->gen++;
        m->n_tmp = 0;
        step_stack(m, s);
        for (int32_t k = 0; k < m->n_tmp; k++) ok |= m->tmp[k] == s;
    }
    m->n_tmp = 0;
    m->st[state].slice = (int8_t)ok;
    return ok;
}

ig_status gr_matcher_new(const gr_grammar *g, const gr_vocab *v, gr_matcher **out, ig_err *err) {
    *out = NULL;
    gr_matcher *m = calloc(1, sizeof *m);
    if (!m) return ig_fail(err, IG_ERR_NOMEM, "grammar: out of memory");
    m->g = g;
    m->v = v;
    m->words = (v->n + 31) / 32;
    m->nh_cap = 1024;
    m->sh_cap = 256;
    m->nhash = calloc((size_t)m->nh_cap, 4);
    m->shash = calloc((size_t)m->sh_cap, 4);
    m->mask_cache = malloc((size_t)MASK_SLOTS * (size_t)(m->words ? m->words : 1) * 4);
    if (!m->nhash || !m->shash || !m->mask_cache || grow((void **)&m->pos, &m->cap_nodes, 1, 4)) goto oom;
    m->parent = malloc((size_t)m->cap_nodes * 4);
    m->depth = malloc((size_t)m->cap_nodes * 4);
    m->cmin = malloc((size_t)m->cap_nodes * 4);
    m->cmax = malloc((size_t)m->cap_nodes * 4);
    m->cnode = malloc((size_t)m->cap_nodes * 4);
    if (!m->parent || !m->depth || !m->cmin || !m->cmax || !m->cnode) goto oom;
    for (int i = 0; i < MASK_SLOTS; i++) m->mask_owner[i] = -1;
    m->pos[0] = -1; m->parent[0] = 0; m->depth[0] = 0; m->cmin[0] = m->cmax[0] = -1; m->cnode[0] = 0;
    m->clamp = v->max_len + 1;
    m->n_nodes = 1;
    m->gen = 1;
    m->n_tmp = 0;
    for (int32_t a = 0; a < g->alt_count[g->root]; a++) {
        int32_t c = intern_node(m, g->alts[g->alt_start[g->root] + a], 0);
        if (c < 0) break;
        expand(m, c);
    }
    m->init = intern_state(m);
    if (m->failed || m->init == DEAD) {
        ig_status st = m->failed ? IG_ERR_UNSUPPORTED : IG_ERR_INVALID;
        ig_fail(err, st, "%s", m->failed ? m->fail_msg : "grammar: the start rule matches nothing");
        gr_matcher_free(m);
        return st;
    }
    m->cur = m->init;
    *out = m;
    return IG_OK;
oom:
    gr_matcher_free(m);
    return ig_fail(err, IG_ERR_NOMEM, "grammar: out of memory");
}

void gr_matcher_free(gr_matcher *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->n_st; i++) free(m->st[i].next);
    free(m->pos); free(m->parent); free(m->depth); free(m->cmin); free(m->cmax); free(m->cnode); free(m->nhash); free(m->members); free(m->st);
    free(m->shash); free(m->stamp); free(m->tmp); free(m->mask_cache); free(m->scratch);
    free(m);
}

void gr_matcher_reset(gr_matcher *m) { m->cur = m->init; m->done = 0; }

/* D for state s: how many ASCII-plain bytes in a row every choice of them survives, all choices
 * leading to the same state at each step (at most UNI_MAX). */
static int uniform_depth(gr_matcher *m, int32_t s) {
    if (m->st[s].uni >= 0) return m->st[s].uni;
    int D = 0;
    for (int32_t cur = s; D < UNI_MAX; D++) {
        int32_t r = next_state(m, cur, 'a');
        if (r < 0) break;
        int same = 1;
        for (int c = 0x20; c < 0x7F && same; c++)
            if (c != '"' && c != '\\') same = next_state(m, cur, c) == r;
        if (!same) break;
        cur = r;
    }
    m->st[s].uni = (int8_t)D;
    return D;
}

/* 1 if every continuation byte in [lo, hi] (more bytes to go after it: k) leads from t to r.
 * seen[] memoizes (state, k) pairs already checked in this call. */
typedef struct { int32_t st[16]; int8_t k[16]; int n; } cont_memo;

static int cont_all(gr_matcher *m, int32_t t, int lo, int hi, int k, int32_t r, cont_memo *memo) {
    for (int i = 0; i < memo->n; i++)
        if (memo->st[i] == t && memo->k[i] == k && lo == 0x80 && hi == 0xBF) return 1;
    for (int c = lo; c <= hi; c++) {
        int32_t u = next_state(m, t, c);
        if (u < 0) return 0;
        if (k == 0 ? u != r : !cont_all(m, u, 0x80, 0xBF, k - 1, r, memo)) return 0;
    }
    if (lo == 0x80 && hi == 0xBF && memo->n < 16) memo->st[memo->n] = t, memo->k[memo->n++] = (int8_t)k;
    return 1;
}

/* The one state every UTF-8-plain character (ASCII but controls, DEL, '"', '\\'; every valid
 * multi-byte character) leads to from s, or DEAD when they do not all lead to one state. */
static int32_t uniform_succ(gr_matcher *m, int32_t s) {
    if (m->st[s].usucc != UNKNOWN) return m->st[s].usucc;
    int32_t r = next_state(m, s, 'a');
    int ok = r >= 0;
    for (int c = 0x20; c < 0x7F && ok; c++)
        if (c != '"' && c != '\\') ok = next_state(m, s, c) == r;
    cont_memo memo = {.n = 0};
    for (int c = 0xC2; c <= 0xF4 && ok; c++) { /* lead bytes; the second byte's range follows UTF-8 */
        int k = c <= 0xDF ? 0 : c <= 0xEF ? 1 : 2;
        int lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        int32_t t = next_state(m, s, c);
        ok = t >= 0 && cont_all(m, t, lo, hi, k, r, &memo);
    }
    if (m->failed) ok = 0;
    m->st[s].usucc = ok ? r : DEAD;
    return m->st[s].usucc;
}

/* D for state s in characters: how many UTF-8-plain characters in a row every choice of them
 * survives, all choices leading to one state at each step (at most UNI_MAX). */
static int uniform_depth8(gr_matcher *m, int32_t s) {
    if (m->st[s].uni8 >= 0) return m->st[s].uni8;
    int D = 0;
    for (int32_t cur = s; D < UNI_MAX; D++) {
        int32_t r = uniform_succ(m, cur);
        if (r < 0) break;
        if (m->st[r].uni8 >= 0) { /* the rest of the chain is known */
            D += 1 + m->st[r].uni8;
            break;
        }
        cur = r;
    }
    if (D > UNI_MAX) D = UNI_MAX;
    m->st[s].uni8 = (int8_t)D;
    return D;
}

/* Marks the tokens of trie nodes [from, to) (whole subtrees, the first at depth 1) alive from
 * state s0. Where a state loops over every plain byte (slice_ok), all plain tokens below that node
 * are marked from the subtree's token range at once, and only subtrees holding a non-plain token
 * are walked further. uni / uni8: subtrees of short plain tokens already marked by the caller.
 * s0 is the state before node from's byte (the nodes below may share m->walk with a caller's walk
 * above them: only the entries from that depth on are written). */

static void walk_trie(gr_matcher *m, const trie *t, int32_t from, int32_t to, int32_t s0, uint32_t *bits, int slice0,
                      int uni, int uni8) {
    int32_t *stk = m->walk;
    stk[t->nd[from].depth - 1] = s0; /* the state before node from's byte */
    const int32_t *tok_next = t->next;
    const uint32_t *plain = m->v->plain;
    int slice_depth = slice0 ? 0 : 1 << 30; /* the subtree below this depth is in slice mode */
    const tnode *nd = t->nd;
    for (int32_t i = from; i < to;) {
        const tnode *x = &nd[i];
        int d = x->depth;
        if (d <= slice_depth) slice_depth = 1 << 30;
        else if (!x->has_np) { i = x->skip; continue; } /* all plain: marked already */
        if (x->amax <= uni || x->cmax <= uni8) { i = x->skip; continue; } /* short plain: marked already */
        int32_t ns = next_state(m, stk[d - 1], x->byte);
        if (ns < 0) {
            if (ns == -3) return;
            i = x->skip;
            continue;
        }
        stk[d] = ns;
        for (int32_t id = x->tok; id >= 0; id = tok_next[id]) bits[id >> 5] |= 1u << (id & 31);
        if (slice_depth > d && (m->st[ns].slice >= 0 ? m->st[ns].slice : slice_ok(m, ns))) {
            for (int32_t k = t->tpos[i], e = t->tpos[x->skip]; k < e; k++) {
                int32_t id = t->order[k];
                bits[id >> 5] |= plain[id >> 5] & (1u << (id & 31));
            }
            slice_depth = d;
        }
        i++;
    }
}

/* 1 if every plain byte leads from s back to s (the body of a free string, a key included). */
static int plain_fixed(gr_matcher *m, int32_t s) {
    if (m->st[s].fixp >= 0) return m->st[s].fixp;
    int ok = 1;
    for (int c = 0x20; c < 256 && ok; c++)
        if (bset_has(&m->v->plain_class, c)) ok = next_state(m, s, c) == s;
    m->st[s].fixp = (int8_t)ok;
    return ok;
}

static int mask_state(gr_matcher *m, int32_t s0, uint32_t *bits);

/* The mask of a plain fixed point s0 (the body of a free string): every plain token, the tokens
 * whose first byte is not plain walked from s0, and the others by their suffix from the first
 * non-plain byte (the suffix trie), since their plain prefix leads back to s0. */
static void fixed_point_mask(gr_matcher *m, int32_t s0, uint32_t *bits) {
    const trie *t = &m->v->full;
    memcpy(bits, m->v->plain, (size_t)m->words * 4);
    if (m->v->sfx.n) walk_trie(m, &m->v->sfx, 0, m->v->sfx.n, s0, bits, 0, 0, 0);
    for (int32_t i = 0; i < t->n && !m->failed; i = t->nd[i].skip)
        if (!bset_has(&m->v->plain_class, t->nd[i].byte)) walk_trie(m, t, i, t->nd[i].skip, s0, bits, 0, 0, 0);
}

static void clear_range(const trie *t, int32_t i, uint32_t *bits) {
    for (int32_t k = t->tpos[i], e = t->tpos[t->nd[i].skip]; k < e; k++) bits[t->order[k] >> 5] &= ~(1u << (t->order[k] & 31));
}

/* A state whose first bytes mostly lead to one plain fixed point F (an object's key: after its
 * first character that starts no named key, any string): from a token's first byte on, F accepts
 * what it accepts anywhere, so the mask is F's own (cached) for the tokens whose first byte is
 * plain and leads to F, and the other first bytes' subtrees are walked from s0. 1: done; 0: does not apply; -1: failure. */
static int fixed_root(gr_matcher *m, int32_t s0, uint32_t *bits) {
    const trie *t = &m->v->full;
    int32_t F = -1;
    int64_t nF = 0;
    const tnode *nd = t->nd;
    for (int32_t i = 0; i < t->n; i = nd[i].skip) {
        int32_t ns = next_state(m, s0, nd[i].byte);
        if (ns == -3) return -1;
        if (ns < 0 || ns == s0 || !bset_has(&m->v->plain_class, nd[i].byte)) continue;
        if (F < 0 && plain_fixed(m, ns)) F = ns;
        if (ns == F) nF += t->tpos[nd[i].skip] - t->tpos[i];
    }
    if (F < 0 || nF * 2 < t->tpos[t->n]) return 0;
    if (mask_state(m, F, bits)) return -1;
    for (int32_t w = 0; w < m->words; w++) bits[w] &= m->v->first_plain[w]; /* EOS and non-plain first bytes: walked */
    for (int32_t i = 0; i < t->n; i = nd[i].skip) {
        int pl = bset_has(&m->v->plain_class, nd[i].byte);
        if (pl && next_state(m, s0, nd[i].byte) == F) continue;
        if (pl) clear_range(t, i, bits);
        walk_trie(m, t, i, nd[i].skip, s0, bits, 0, 0, 0);
    }
    return m->failed ? -1 : 1;
}

/* Node n with every counter on its stack clamped: owed min(cmin, K), allowed min(cmax, K) for
 * K = clamp (the longest token + 1); -1 on failure. */
static int32_t canon_node(gr_matcher *m, int32_t n) {
    if (m->cnode[n] != UNKNOWN) return m->cnode[n];
    int32_t p = canon_node(m, m->parent[n]);
    if (p < 0) return -1;
    int32_t hi = m->cmax[n] > m->clamp ? m->clamp : m->cmax[n], lo = m->cmin[n] > hi ? hi : m->cmin[n];
    int32_t c = p == m->parent[n] && lo == m->cmin[n] && hi == m->cmax[n] ? n : intern_cnode(m, m->pos[n], p, lo, hi);
    if (c >= 0) m->cnode[n] = c; /* m->cnode may have moved */
    return c;
}

/* The state whose stacks are s's with their counters clamped (canon_node). Every iteration of a
 * counted rule consumes a byte, so along any token (at most clamp - 1 bytes) an allowance of clamp
 * never runs out and an owed count of clamp is never met, as with any larger one: both states
 * allow the same tokens, and states that differ only in long counts share one cached mask.
 * UNKNOWN-free: returns s itself when nothing changes; -3 on failure. */
static int32_t canon_state(gr_matcher *m, int32_t s) {
    if (!m->g->n_counted) return s;
    if (m->st[s].canon != UNKNOWN) return m->st[s].canon;
    m->n_tmp = 0;
    int changed = 0;
    for (int32_t i = 0; i < m->st[s].n; i++) {
        int32_t x = m->members[m->st[s].off + i], c = canon_node(m, x);
        if (c < 0) return -3;
        changed |= c != x;
        add_tmp(m, c);
    }
    int32_t c = changed ? intern_state(m) : s;
    m->n_tmp = 0;
    if (c < 0) return -3;
    m->st[s].canon = c;
    m->st[c].canon = c;
    return c;
}

/* 1 if tmp[0..n_tmp) (sorted, unique) are the members of state s. */
static int tmp_is_state(gr_matcher *m, int32_t s) {
    qsort(m->tmp, (size_t)m->n_tmp, 4, cmp_i32);
    return m->n_tmp == m->st[s].n && !memcmp(m->tmp, m->members + m->st[s].off, (size_t)m->n_tmp * 4);
}

/* 1 if s0 is exactly a counted JSON string at a character boundary: the stacks of a counter node
 * X of a JSON character body (gb_json_char_utf8), nothing else. Then *lo / *hi: characters owed /
 * allowed (CINF), *after: the state after the closing quote (DEAD when none). 0: not such a
 * state; -1: failure. */
static int json_count_state(gr_matcher *m, int32_t s0, int32_t *lo, int32_t *hi, int32_t *after) {
    const gr_grammar *g = m->g;
    int32_t P = -1;
    for (int32_t i = 0; i < m->st[s0].n && P < 0; i++) {
        int32_t t = m->members[m->st[s0].off + i], p = t ? m->parent[t] : 0;
        if (p && m->cmin[p] >= 0 && g->rep_json[GR_REF_RULE(g->elems[m->pos[p]])]) P = p;
    }
    if (P < 0) return 0;
    int32_t pos = m->pos[P], par = m->parent[P], phi = m->cmax[P] == CINF ? CINF : m->cmax[P] + 1;
    for (int32_t plo = m->cmin[P] + 1; plo >= (m->cmin[P] ? m->cmin[P] + 1 : 0); plo--) {
        int32_t X = intern_cnode(m, pos, par, plo, phi);
        if (X < 0) return -1;
        m->gen++;
        m->n_tmp = 0;
        expand(m, X);
        if (m->failed) return -1;
        if (!tmp_is_state(m, s0)) continue;
        int32_t cont = g->elems[pos + 1] == GR_END ? par : intern_node(m, pos + 1, par);
        if (cont < 0) return -1;
        m->gen++;
        m->n_tmp = 0;
        expand(m, cont);
        int32_t z = intern_state(m);
        if (z == -3) return -1;
        for (int32_t i = 0; z >= 0 && i < m->st[z].n; i++) { /* what follows must be the closing quote alone */
            int32_t t = m->members[m->st[z].off + i];
            const gr_bset *q = t ? &m->g->sets[g->elems[m->pos[t]]] : NULL;
            if (!q || q->w[0] != 1ull << '"' || q->w[1] || q->w[2] || q->w[3]) return 0;
        }
        *after = z == DEAD ? DEAD : next_state(m, z, '"');
        if (*after == -3) return -1;
        *lo = plo;
        *hi = phi;
        return 1;
    }
    m->n_tmp = 0;
    return 0;
}

/* The mask of a counted JSON string state (json_count_state): tokens of content of at most hi
 * characters (a per-length set), and the tokens with an unescaped quote after lo..hi characters
 * whose rest the state after the quote allows (one walk of those rests). */
static int json_count_mask(gr_matcher *m, int32_t lo, int32_t hi, int32_t after, uint32_t *bits) {
    const gr_vocab *v = m->v;
    size_t stride = (size_t)m->words + 1;
    memcpy(bits, v->jle + (size_t)(hi > JLE_MAX ? JLE_MAX : hi) * stride, (size_t)m->words * 4);
    for (int32_t i = 0; hi > JLE_MAX && i < v->n_jlong; i++)
        if (v->jlong_chars[i] <= hi) bits[v->jlong[i] >> 5] |= 1u << (v->jlong[i] & 31);
    if (after < 0 || lo > v->max_len) return 0;
    if (!m->scratch && !(m->scratch = malloc(stride * 4))) { fail(m, "grammar: out of memory"); return -1; }
    memset(m->scratch, 0, stride * 4);
    if (v->jqs.n) walk_trie(m, &v->jqs, 0, v->jqs.n, after, m->scratch, 0, 0, 0);
    if (m->failed) return -1;
    for (int32_t i = 0; i < v->n_jq; i++) {
        int32_t id = v->jq[i], c = v->jq_chars[id] & (JQ_REST - 1), rest = v->jq_chars[id] & JQ_REST;
        if (c >= lo && c <= hi && (!rest || (m->scratch[id >> 5] >> (id & 31) & 1))) bits[id >> 5] |= 1u << (id & 31);
    }
    return 0;
}

/* The mask of state s0 (canonical, not cached) into bits, EOS aside; -1 on failure. The first
 * shortcut that applies: a counted JSON string (per-length sets), a plain fixed point (the suffix
 * trie), a state whose first bytes mostly lead to one (fixed_root), else one walk of the trie with
 * the plain-slice and uniform-depth shortcuts. */
static int compute_mask(gr_matcher *m, int32_t s0, uint32_t *bits) {
    size_t wb = (size_t)m->words * 4;
    int32_t jlo, jhi, jafter;
    int jc = m->g->n_counted ? json_count_state(m, s0, &jlo, &jhi, &jafter) : 0;
    if (jc) return jc < 0 ? -1 : json_count_mask(m, jlo, jhi, jafter, bits);
    int sl = slice_ok(m, s0);
    if (sl && plain_fixed(m, s0)) { fixed_point_mask(m, s0, bits); return 0; }
    if (!m->nested) { /* F's own mask is a plain fixed point's */
        m->nested = 1;
        int fr = fixed_root(m, s0, bits);
        m->nested = 0;
        if (fr) return fr < 0 ? -1 : 0;
    }
    int uni = sl ? 0 : uniform_depth(m, s0), uni8 = uni > 0 ? uniform_depth8(m, s0) : 0;
    if (sl) memcpy(bits, m->v->plain, wb);
    else if (uni > 0) memcpy(bits, m->v->ascii_le + (size_t)uni * (wb / 4 + 1), wb);
    else memset(bits, 0, wb);
    if (uni8 > 0) {
        const uint32_t *u = m->v->utf8_le + (size_t)uni8 * (wb / 4 + 1);
        for (int32_t w = 0; w < m->words; w++) bits[w] |= u[w];
    }
    walk_trie(m, &m->v->full, 0, m->v->full.n, s0, bits, sl, uni, uni8);
    return 0;
}

/* The mask of state s0 into bits (cached per canonical state); -1 on failure (m->fail_msg). */
static int mask_state(gr_matcher *m, int32_t s0, uint32_t *bits) {
    size_t wb = (size_t)m->words * 4;
    if ((s0 = canon_state(m, s0)) < 0) return -1;
    int slot = s0 & (MASK_SLOTS - 1);
    uint32_t *cached = m->mask_cache + (size_t)slot * m->words;
    if (m->mask_owner[slot] == s0) { memcpy(bits, cached, wb); return 0; }
    if (compute_mask(m, s0, bits) || m->failed) return -1;
    if (m->st[s0].accept)
        for (int i = 0; i < m->v->n_eos; i++) bits[m->v->eos[i] >> 5] |= 1u << (m->v->eos[i] & 31);
    memcpy(cached, bits, wb);
    m->mask_owner[slot] = s0;
    return 0;
}

ig_status gr_matcher_mask(gr_matcher *m, uint32_t *bits, ig_err *err) {
    if (m->done) { memset(bits, 0, (size_t)m->words * 4); return IG_OK; }
    if (mask_state(m, m->cur, bits)) return ig_fail(err, IG_ERR_UNSUPPORTED, "%s", m->fail_msg);
    return IG_OK;
}

int gr_matcher_accept_bytes(gr_matcher *m, const char *s, size_t n, ig_err *err) {
    if (m->done) return 0;
    int32_t st = m->cur;
    for (size_t i = 0; i < n; i++) {
        st = next_state(m, st, (unsigned char)s[i]);
        if (st == -3) { ig_fail(err, IG_ERR_UNSUPPORTED, "%s", m->fail_msg); return -1; }
        if (st == DEAD) return 0;
    }
    m->cur = st;
    return 1;
}

int gr_matcher_accept(gr_matcher *m, int32_t id, ig_err *err) {
    if (m->done || id < 0 || id >= m->v->n) return 0;
    for (int i = 0; i < m->v->n_eos; i++)
        if (m->v->eos[i] == id) {
            if (!m->st[m->cur].accept) return 0;
            m->done = 1;
            return 1;
        }
    if (!m->v->len[id]) return 0;
    return gr_matcher_accept_bytes(m, m->v->arena + m->v->off[id], (size_t)m->v->len[id], err);
}

int gr_matcher_can_end(const gr_matcher *m) { return m->done || m->st[m->cur].accept; }
int gr_matcher_must_end(const gr_matcher *m) {
    return m->done || (m->st[m->cur].n == 1 && m->st[m->cur].accept);
}
