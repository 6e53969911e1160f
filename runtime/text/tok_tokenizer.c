/* tok_tokenizer.c — HF tokenizer.json: loading, the encode pipeline (added tokens, normalizers,
 * pre-tokenizers, BPE, post-processors), decoders and the streaming decoder.
 *
 * Every stage follows the semantics of HF `tokenizers` (0.2x) so that ids and text come out
 * byte-identical; comments name the HF behaviour where it is not obvious. Offsets are not
 * tracked: nothing downstream needs them, and it keeps every stage a plain string transform.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r */
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pkg_file.h"
#include "tokenizer.h"

/* ---- growable buffers ----------------------------------------------------------------------- */

typedef struct sbuf { char *p; size_t n, cap; } sbuf;           /* bytes */
typedef struct ibuf { int32_t *p; size_t n, cap; } ibuf;        /* ids */
typedef struct span { size_t off, len; } span;
typedef struct plist { sbuf b; span *s; size_t n, cap; } plist; /* pieces: spans into b */

static int sb_reserve(sbuf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) return -1;
    b->p = np; b->cap = cap;
    return 0;
}
static int sb_put(sbuf *b, const void *s, size_t n) {
    if (sb_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}
static int ib_push(ibuf *b, int32_t v) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *np = realloc(b->p, cap * sizeof *np);
        if (!np) return -1;
        b->p = np; b->cap = cap;
    }
    b->p[b->n++] = v;
    return 0;
}
static void pl_clear(plist *l) { l->b.n = 0; l->n = 0; }
static void pl_free(plist *l) { free(l->b.p); free(l->s); }
/* Appends a piece with bytes s[0..n) (copied). Empty pieces are dropped, as HF does. */
static int pl_add(plist *l, const char *s, size_t n) {
    if (!n) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        span *ns = realloc(l->s, cap * sizeof *ns);
        if (!ns) return -1;
        l->s = ns; l->cap = cap;
    }
    size_t off = l->b.n;
    if (sb_put(&l->b, s, n)) return -1;
    l->s[l->n].off = off; l->s[l->n].len = n;
    l->n++;
    return 0;
}
/* Like pl_add but keeps empty pieces (decoders keep empty tokens). */
static int pl_add0(plist *l, const char *s, size_t n) {
    if (n) return pl_add(l, s, n);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        span *ns = realloc(l->s, cap * sizeof *ns);
        if (!ns) return -1;
        l->s = ns; l->cap = cap;
    }
    l->s[l->n].off = l->b.n; l->s[l->n].len = 0;
    l->n++;
    return 0;
}
/* (never NULL + 0: a list of empty pieces has no buffer) */
#define PIECE(l, i) ((l)->b.p ? (l)->b.p + (l)->s[i].off : "")

static uint64_t hash_bytes(const void *p, size_t n) { /* FNV-1a, 64-bit */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ull; }
    return h;
}
static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

/* ---- pipeline components -------------------------------------------------------------------- */

enum { NM_SEQ, NM_NFC, NM_NFD, NM_NFKC, NM_NFKD, NM_LOWER, NM_STRIP, NM_PREPEND, NM_REPLACE };
typedef struct tnorm {
    int kind;
    char *a; size_t alen;   /* NM_PREPEND: text; NM_REPLACE: literal pattern (when re NULL) */
    char *b; size_t blen;   /* NM_REPLACE: replacement */
    tok_regex *re;          /* NM_REPLACE with a Regex pattern */
    int left, right;        /* NM_STRIP */
    struct tnorm *kids; int nkids;
} tnorm;

enum { PT_SEQ, PT_BYTELEVEL, PT_SPLIT, PT_METASPACE, PT_DIGITS, PT_WHITESPACE, PT_WSSPLIT, PT_PUNCT,
       PT_BERT };
enum { BH_REMOVED, BH_ISOLATED, BH_MERGED_PREV, BH_MERGED_NEXT, BH_CONTIGUOUS };
enum { PS_ALWAYS, PS_FIRST, PS_NEVER };
typedef struct tpre {
    int kind;
    tok_regex *re;          /* PT_SPLIT regex, PT_BYTELEVEL GPT-2 regex, PT_WHITESPACE */
    char *lit; size_t litlen; /* PT_SPLIT String pattern */
    int behavior, invert;
    int add_prefix_space, use_regex; /* PT_BYTELEVEL */
    char repl[8]; int repl_len; uint32_t repl_cp; int prepend_scheme, split; /* PT_METASPACE */
    int individual;         /* PT_DIGITS */
    struct tpre *kids; int nkids;
} tpre;

enum { DC_SEQ, DC_BYTELEVEL, DC_BYTEFALLBACK, DC_FUSE, DC_STRIP, DC_REPLACE, DC_METASPACE, DC_BPE };
typedef struct tdec {
    int kind;
    char *a; size_t alen; char *b; size_t blen; tok_regex *re; /* DC_REPLACE; DC_BPE suffix in a */
    uint32_t ch; int start, stop;                  /* DC_STRIP */
    char repl[8]; int repl_len; uint32_t repl_cp; int prepend_scheme; /* DC_METASPACE */
    struct tdec *kids; int nkids;
} tdec;

enum { PP_NONE, PP_TEMPLATE, PP_BYTELEVEL, PP_ROBERTA, PP_SEQ };
typedef struct tpost {
    int kind;
    int32_t *pre; size_t npre;   /* PP_TEMPLATE / ROBERTA: ids before sequence A */
    int32_t *post; size_t npost; /* ... and after */
    struct tpost *kids; int nkids;
} tpost;

typedef struct added_tok {
    char *content; size_t len;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} added_tok;

/* Bounded pre-token → ids cache, direct mapped, guarded by striped locks. */
#define CACHE_SLOTS 16384
#define CACHE_KEY 46
#define CACHE_IDS 12
#define CACHE_LOCKS 64
typedef struct cache_ent {
    uint64_t h;
    uint8_t klen, nids;
    char key[CACHE_KEY];
    int32_t ids[CACHE_IDS];
} cache_ent;

struct tok_tokenizer {
    /* id table: id → token string (model vocab, overridden by added tokens) */
    char **str; uint32_t *slen; int32_t nids;
    uint8_t *special;                /* [nids] 1 if a special added token */
    /* model vocab map (model tokens only): open addressing, slots hold id+1 */
    int32_t *vmap; size_t vcap;
    char *arena;                     /* backing store of model token strings */
    char **mstr; uint32_t *mlen;     /* [nids] model vocab strings (NULL where the model has none) */
    /* merges: key (a << 32 | b) → value (rank << 32 | new id) */
    uint64_t *mkeys, *mvals; size_t mcap;
    int32_t unk_id; int byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix; size_t cont_len; char *eow_suffix; size_t eow_len;
    int32_t byte_tok[256];           /* <0xXX> ids for byte fallback, -1 if absent */
    int32_t char_id[1024];           /* id of the one-char token for cp < 1024, -1 if none */
    /* byte-level mapping (GPT-2 bytes_to_unicode) */
    char bl_utf8[256][3]; uint8_t bl_len[256];
    int16_t bl_rev[512];             /* code point → byte, -1 if not a mapped char */
    tnorm *norm; tpre *pre; tdec *dec; tpost *post;
    added_tok *added; int nadded;
    int16_t *first_byte[256]; int nfirst[256]; /* non-normalized added tokens by first byte, longest first */
    int16_t *nfirst_byte[256]; int nnfirst[256]; /* normalized ones (content normalized) */
    char **added_norm; size_t *added_norm_len; /* normalized contents for normalized tokens */
    int32_t bos, eos;
    cache_ent *cache;
    pthread_mutex_t locks[CACHE_LOCKS];
};

/* ---- small helpers ---------------------------------------------------------------------------- */

static char *xstrndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static int32_t vocab_get(const tok_tokenizer *t, const char *s, size_t n) {
    if (!t->vcap) return -1;
    size_t mask = t->vcap - 1, i = hash_bytes(s, n) & mask;
    for (;;) {
        int32_t v = t->vmap[i];
        if (!v) return -1;
        int32_t id = v - 1;
        if (t->mlen[id] == n && !memcmp(t->mstr[id], s, n)) return id;
        i = (i + 1) & mask;
    }
}

static int merge_get(const tok_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *nid) {
    if (!t->mcap) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = t->mcap - 1, i = hash_u64(key) & mask;
    for (;;) {
        if (t->mkeys[i] == UINT64_MAX) return 0;
        if (t->mkeys[i] == key) {
            *rank = (uint32_t)(t->mvals[i] >> 32);
            *nid = (int32_t)(uint32_t)t->mvals[i];
            return 1;
        }
        i = (i + 1) & mask;
    }
}

/* ---- normalizers ------------------------------------------------------------------------------ */

static ig_status norm_form(const char *s, size_t n, int form, sbuf *out) {
    uint32_t *cps = malloc((n + 1) * sizeof *cps), *o = NULL;
    if (!cps) return IG_ERR_NOMEM;
    size_t m = tok_utf8_decode(s, n, cps, NULL), no = 0;
    ig_status st = tok_unorm(cps, m, form, &o, &no);
    free(cps);
    if (st) return st;
    out->n = 0;
    if (sb_reserve(out, no * 4)) { free(o); return IG_ERR_NOMEM; }
    for (size_t i = 0; i < no; i++) out->n += (size_t)tok_utf8_put(o[i], out->p + out->n);
    out->p[out->n] = 0;
    free(o);
    return IG_OK;
}

/* Replaces every match of (re or literal lit) in s with rep, into out. */
static ig_status replace_all(const char *s, size_t n, const tok_regex *re, const char *lit, size_t litlen,
                             const char *rep, size_t replen, sbuf *out) {
    out->n = 0;
    if (sb_reserve(out, n)) return IG_ERR_NOMEM;
    if (!re) {
        size_t i = 0;
        while (i < n) {
            if (litlen && i + litlen <= n && !memcmp(s + i, lit, litlen)) {
                if (sb_put(out, rep, replen)) return IG_ERR_NOMEM;
                i += litlen;
            } else {
                if (sb_put(out, s + i, 1)) return IG_ERR_NOMEM;
                i++;
            }
        }
        return IG_OK;
    }
    uint32_t *cps = malloc((n + 1) * sizeof *cps), *off = malloc((n + 2) * sizeof *off);
    if (!cps || !off) { free(cps); free(off); return IG_ERR_NOMEM; }
    size_t m = tok_utf8_decode(s, n, cps, off), pos = 0, last = 0, ms, me;
    ig_status st = IG_OK;
    while (pos <= m) {
        int r = tok_regex_search(re, cps, m, pos, &ms, &me);
        if (r < 0) { st = IG_ERR_NOMEM; break; }
        if (!r) break;
        if (me == ms) { pos = ms + 1; continue; } /* empty matches replace nothing */
        if (sb_put(out, s + off[last], off[ms] - off[last]) || sb_put(out, rep, replen)) { st = IG_ERR_NOMEM; break; }
        last = pos = me;
    }
    if (!st && sb_put(out, s + off[last], n - off[last])) st = IG_ERR_NOMEM;
    free(cps); free(off);
    return st;
}

static ig_status norm_apply(const tnorm *nm, sbuf *io, sbuf *tmp) {
    sbuf sw;
    ig_status st = IG_OK;
    switch (nm->kind) {
    case NM_SEQ:
        for (int k = 0; k < nm->nkids && !st; k++) st = norm_apply(&nm->kids[k], io, tmp);
        return st;
    case NM_NFC: case NM_NFD: case NM_NFKC: case NM_NFKD:
        st = norm_form(io->p, io->n, nm->kind - NM_NFC, tmp);
        break;
    case NM_LOWER: {
        /* Rust str::to_lowercase; simple mappings (the special-casing rules for final sigma and
         * İ are not reproduced). */
        uint32_t *cps = malloc((io->n + 1) * sizeof *cps);
        if (!cps) return IG_ERR_NOMEM;
        size_t m = tok_utf8_decode(io->p, io->n, cps, NULL);
        tmp->n = 0;
        if (sb_reserve(tmp, m * 4)) { free(cps); return IG_ERR_NOMEM; }
        for (size_t i = 0; i < m; i++) tmp->n += (size_t)tok_utf8_put(tok_ulower(cps[i]), tmp->p + tmp->n);
        tmp->p[tmp->n] = 0;
        free(cps);
        break;
    }
    case NM_STRIP: {
        uint32_t *cps = malloc((io->n + 1) * sizeof *cps), *off = malloc((io->n + 2) * sizeof *off);
        if (!cps || !off) { free(cps); free(off); return IG_ERR_NOMEM; }
        size_t m = tok_utf8_decode(io->p, io->n, cps, off), a = 0, b = m;
        if (nm->left) while (a < b && tok_uspace(cps[a])) a++;
        if (nm->right) while (b > a && tok_uspace(cps[b - 1])) b--;
        tmp->n = 0;
        st = sb_put(tmp, io->p + off[a], off[b] - off[a]) ? IG_ERR_NOMEM : IG_OK;
        free(cps); free(off);
        break;
    }
    case NM_PREPEND:
        if (!io->n) return IG_OK; /* HF prepends only to non-empty strings */
        tmp->n = 0;
        if (sb_put(tmp, nm->a, nm->alen) || sb_put(tmp, io->p, io->n)) return IG_ERR_NOMEM;
        break;
    case NM_REPLACE:
        st = replace_all(io->p, io->n, nm->re, nm->a, nm->alen, nm->b, nm->blen, tmp);
        break;
    }
    if (st) return st;
    sw = *io; *io = *tmp; *tmp = sw;
    if (sb_reserve(io, 0)) return IG_ERR_NOMEM;
    io->p[io->n] = 0;
    return IG_OK;
}

/* ---- pre-tokenizers --------------------------------------------------------------------------- */

typedef struct seg { size_t a, b; int m; } seg; /* byte range, is-match */
typedef struct segbuf { seg *p; size_t n, cap; } segbuf;
static int seg_push(segbuf *s, size_t a, size_t b, int m) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        seg *np = realloc(s->p, cap * sizeof *np);
        if (!np) return -1;
        s->p = np; s->cap = cap;
    }
    s->p[s->n].a = a; s->p[s->n].b = b; s->p[s->n].m = m;
    s->n++;
    return 0;
}

typedef struct scratch {
    uint32_t *cps, *off; size_t ccap;
    segbuf segs, segs2;
    plist pa, pb;
    sbuf s1, s2, s3;
    /* BPE */
    struct sym { int32_t id, prev, next; uint32_t len; } *sym; size_t symcap;
    struct hent { uint32_t rank, pos; int32_t nid; } *heap; size_t heapcap;
} scratch;

static void scratch_free(scratch *sc) {
    free(sc->cps); free(sc->off); free(sc->segs.p); free(sc->segs2.p);
    pl_free(&sc->pa); pl_free(&sc->pb);
    free(sc->s1.p); free(sc->s2.p); free(sc->s3.p); free(sc->sym); free(sc->heap);
}

static int decode_cps(scratch *sc, const char *s, size_t n, size_t *m) {
    if (n + 2 > sc->ccap) {
        size_t cap = (n + 2) * 2;
        uint32_t *a = realloc(sc->cps, cap * sizeof *a);
        if (!a) return -1;
        sc->cps = a;
        uint32_t *b = realloc(sc->off, cap * sizeof *b);
        if (!b) return -1;
        sc->off = b;
        sc->ccap = cap;
    }
    *m = tok_utf8_decode(s, n, sc->cps, sc->off);
    return 0;
}

/* Applies an HF SplitDelimiterBehavior to alternating segments, appending pieces of s to out. */
static int apply_behavior(const char *s, segbuf *sg, int behavior, int invert, segbuf *tmp, plist *out) {
    if (invert)
        for (size_t i = 0; i < sg->n; i++) sg->p[i].m = !sg->p[i].m;
    tmp->n = 0;
    int prev = 0;
    switch (behavior) {
    case BH_REMOVED:
        for (size_t i = 0; i < sg->n; i++)
            if (!sg->p[i].m && pl_add(out, s + sg->p[i].a, sg->p[i].b - sg->p[i].a)) return -1;
        return 0;
    case BH_ISOLATED:
        for (size_t i = 0; i < sg->n; i++)
            if (pl_add(out, s + sg->p[i].a, sg->p[i].b - sg->p[i].a)) return -1;
        return 0;
    case BH_MERGED_PREV:
        for (size_t i = 0; i < sg->n; i++) {
            seg g = sg->p[i];
            if (g.m && !prev && tmp->n) tmp->p[tmp->n - 1].b = g.b;
            else if (seg_push(tmp, g.a, g.b, g.m)) return -1;
            prev = g.m;
        }
        break;
    case BH_MERGED_NEXT:
        for (size_t i = sg->n; i-- > 0;) {
            seg g = sg->p[i];
            if (g.m && !prev && tmp->n) tmp->p[tmp->n - 1].a = g.a;
            else if (seg_push(tmp, g.a, g.b, g.m)) return -1;
            prev = g.m;
        }
        for (size_t i = 0, j = tmp->n; i < j / 2; i++) {
            seg x = tmp->p[i]; tmp->p[i] = tmp->p[j - 1 - i]; tmp->p[j - 1 - i] = x;
        }
        break;
    case BH_CONTIGUOUS:
        for (size_t i = 0; i < sg->n; i++) {
            seg g = sg->p[i];
            if (g.m == prev && tmp->n) tmp->p[tmp->n - 1].b = g.b;
            else if (seg_push(tmp, g.a, g.b, g.m)) return -1;
            prev = g.m;
        }
        break;
    }
    for (size_t i = 0; i < tmp->n; i++)
        if (pl_add(out, s + tmp->p[i].a, tmp->p[i].b - tmp->p[i].a)) return -1;
    return 0;
}

/* Segments of s by regex matches (HF's Pattern::find_matches for a regex). */
static int regex_segments(const tok_regex *re, const char *s, size_t n, scratch *sc) {
    size_t m;
    sc->segs.n = 0;
    if (decode_cps(sc, s, n, &m)) return -1;
    size_t pos = 0, prev = 0, ms, me;
    while (pos <= m) {
        int r = tok_regex_search(re, sc->cps, m, pos, &ms, &me);
        if (r < 0) return -1;
        if (!r) break;
        if (ms != prev && seg_push(&sc->segs, sc->off[prev], sc->off[ms], 0)) return -1;
        if (seg_push(&sc->segs, sc->off[ms], sc->off[me], 1)) return -1;
        prev = me;
        pos = me > ms ? me : me + 1;
    }
    if (prev != m && seg_push(&sc->segs, sc->off[prev], n, 0)) return -1;
    return 0;
}

static int lit_segments(const char *lit, size_t ll, const char *s, size_t n, scratch *sc) {
    sc->segs.n = 0;
    size_t prev = 0, i = 0;
    while (ll && i + ll <= n) {
        if (!memcmp(s + i, lit, ll)) {
            if (i != prev && seg_push(&sc->segs, prev, i, 0)) return -1;
            if (seg_push(&sc->segs, i, i + ll, 1)) return -1;
            i += ll; prev = i;
        } else {
            i++;
        }
    }
    if (prev != n && seg_push(&sc->segs, prev, n, 0)) return -1;
    return 0;
}

enum { PRED_DIGIT, PRED_SPACE, PRED_PUNCT };
static int pred(int kind, uint32_t c) {
    int cat;
    switch (kind) {
    case PRED_DIGIT: cat = tok_ucat(c); return cat == TOK_UC_Nd || cat == TOK_UC_Nl || cat == TOK_UC_No;
    case PRED_SPACE: return tok_uspace(c);
    default:
        if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
        cat = tok_ucat(c);
        return cat >= TOK_UC_Pc && cat <= TOK_UC_Po;
    }
}

/* Segments where each char satisfying the predicate is a one-char match. */
static int pred_segments(int kind, const char *s, size_t n, scratch *sc) {
    size_t m;
    sc->segs.n = 0;
    if (decode_cps(sc, s, n, &m)) return -1;
    size_t prev = 0;
    for (size_t i = 0; i < m; i++) {
        if (!pred(kind, sc->cps[i])) continue;
        if (i != prev && seg_push(&sc->segs, sc->off[prev], sc->off[i], 0)) return -1;
        if (seg_push(&sc->segs, sc->off[i], sc->off[i + 1], 1)) return -1;
        prev = i + 1;
    }
    if (prev != m && seg_push(&sc->segs, sc->off[prev], n, 0)) return -1;
    return 0;
}

/* Runs pre-tokenizer p over the pieces in `in` into `out`. first: the first piece starts the
 * original text (Metaspace prepend_scheme "first"). */
static ig_status pre_apply(const tok_tokenizer *t, const tpre *p, plist *in, plist *out, scratch *sc,
                           int first);

static ig_status pre_piece(const tok_tokenizer *t, const tpre *p, const char *s, size_t n, plist *out,
                           scratch *sc, int first) {
    switch (p->kind) {
    case PT_BYTELEVEL: {
        sbuf *tmp = &sc->s3;
        tmp->n = 0;
        if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
            if (sb_put(tmp, " ", 1)) return IG_ERR_NOMEM;
        }
        if (sb_put(tmp, s, n)) return IG_ERR_NOMEM;
        const char *q = tmp->p;
        size_t qn = tmp->n;
        size_t start_n = out->n;
        if (p->use_regex) {
            if (regex_segments(p->re, q, qn, sc) || apply_behavior(q, &sc->segs, BH_ISOLATED, 0, &sc->segs2, out))
                return IG_ERR_NOMEM;
        } else if (pl_add(out, q, qn)) {
            return IG_ERR_NOMEM;
        }
        /* map the new pieces' bytes to GPT-2 byte-level characters, rebuilding them in place */
        size_t nb = out->n - start_n;
        if (!nb) return IG_OK;
        size_t base = out->s[start_n].off;
        sbuf *raw = &sc->s2;
        raw->n = 0;
        if (sb_put(raw, out->b.p + base, out->b.n - base)) return IG_ERR_NOMEM;
        out->b.n = base;
        if (sb_reserve(&out->b, raw->n * 2)) return IG_ERR_NOMEM;
        for (size_t k = start_n; k < out->n; k++) {
            const unsigned char *r = (const unsigned char *)raw->p + (out->s[k].off - base);
            size_t len = out->s[k].len, o = out->b.n;
            for (size_t j = 0; j < len; j++) {
                memcpy(out->b.p + out->b.n, t->bl_utf8[r[j]], t->bl_len[r[j]]);
                out->b.n += t->bl_len[r[j]];
            }
            out->s[k].off = o; out->s[k].len = out->b.n - o;
        }
        out->b.p[out->b.n] = 0;
        return IG_OK;
    }
    case PT_SPLIT:
        if ((p->re ? regex_segments(p->re, s, n, sc) : lit_segments(p->lit, p->litlen, s, n, sc)) ||
            apply_behavior(s, &sc->segs, p->behavior, p->invert, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    case PT_METASPACE: {
        sbuf *tmp = &sc->s3;
        tmp->n = 0;
        int starts = n >= (size_t)p->repl_len && !memcmp(s, p->repl, (size_t)p->repl_len);
        /* the replacement of ' ' happens before the prefix check */
        if (n && s[0] == ' ') starts = 1;
        if (!starts && (p->prepend_scheme == PS_ALWAYS || (p->prepend_scheme == PS_FIRST && first)))
            if (sb_put(tmp, p->repl, (size_t)p->repl_len)) return IG_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ' ? sb_put(tmp, p->repl, (size_t)p->repl_len) : sb_put(tmp, s + i, 1)) return IG_ERR_NOMEM;
        }
        if (!p->split) return pl_add(out, tmp->p, tmp->n) ? IG_ERR_NOMEM : IG_OK;
        sbuf keep = *tmp; /* lit_segments does not touch s3 */
        if (lit_segments(p->repl, (size_t)p->repl_len, keep.p, keep.n, sc) ||
            apply_behavior(keep.p, &sc->segs, BH_MERGED_NEXT, 0, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    }
    case PT_DIGITS:
        if (pred_segments(PRED_DIGIT, s, n, sc) ||
            apply_behavior(s, &sc->segs, p->individual ? BH_ISOLATED : BH_CONTIGUOUS, 0, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    case PT_WHITESPACE:
        if (regex_segments(p->re, s, n, sc) || apply_behavior(s, &sc->segs, BH_REMOVED, 1, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    case PT_WSSPLIT:
        if (pred_segments(PRED_SPACE, s, n, sc) || apply_behavior(s, &sc->segs, BH_REMOVED, 0, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    case PT_PUNCT:
        if (pred_segments(PRED_PUNCT, s, n, sc) || apply_behavior(s, &sc->segs, p->behavior, 0, &sc->segs2, out))
            return IG_ERR_NOMEM;
        return IG_OK;
    }
    return IG_ERR_INTERNAL;
}

static ig_status pre_apply(const tok_tokenizer *t, const tpre *p, plist *in, plist *out, scratch *sc,
                           int first) {
    if (p->kind == PT_SEQ || p->kind == PT_BERT) {
        /* ping-pong between in and out; the result must end in out */
        plist *a = in, *b = out;
        for (int k = 0; k < p->nkids; k++) {
            pl_clear(b);
            ig_status st = pre_apply(t, &p->kids[k], a, b, sc, first);
            if (st) return st;
            plist *x = a; a = b; b = x;
        }
        if (a != out) { plist x = *out; *out = *a; *a = x; }
        return IG_OK;
    }
    pl_clear(out);
    for (size_t i = 0; i < in->n; i++) {
        ig_status st = pre_piece(t, p, PIECE(in, i), in->s[i].len, out, sc, first && i == 0);
        if (st) return st;
    }
    return IG_OK;
}

/* ---- BPE model -------------------------------------------------------------------------------- */

static int heap_push(scratch *sc, size_t *hn, uint32_t rank, uint32_t pos, int32_t nid) {
    if (*hn == sc->heapcap) {
        size_t cap = sc->heapcap ? sc->heapcap * 2 : 64;
        struct hent *nh = realloc(sc->heap, cap * sizeof *nh);
        if (!nh) return -1;
        sc->heap = nh; sc->heapcap = cap;
    }
    struct hent *h = sc->heap;
    size_t i = (*hn)++;
    struct hent e = {rank, pos, nid};
    while (i) {
        size_t par = (i - 1) / 2;
        if (h[par].rank < e.rank || (h[par].rank == e.rank && h[par].pos < e.pos)) break;
        h[i] = h[par];
        i = par;
    }
    h[i] = e;
    return 0;
}
static struct hent heap_pop(scratch *sc, size_t *hn) {
    struct hent *h = sc->heap, top = h[0], e = h[--(*hn)];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (h[c + 1].rank < h[c].rank || (h[c + 1].rank == h[c].rank && h[c + 1].pos < h[c].pos))) c++;
        if (e.rank < h[c].rank || (e.rank == h[c].rank && e.pos < h[c].pos)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = e;
    return top;
}

static int sym_add(scratch *sc, size_t *m, int32_t id, uint32_t len) {
    if (*m == sc->symcap) {
        size_t cap = sc->symcap ? sc->symcap * 2 : 64;
        struct sym *ns = realloc(sc->sym, cap * sizeof *ns);
        if (!ns) return -1;
        sc->sym = ns; sc->symcap = cap;
    }
    sc->sym[*m].id = id; sc->sym[*m].len = len;
    (*m)++;
    return 0;
}

/* BPE of one pre-token (HF BPE::merge_word + word.merge_all, without dropout). */
static ig_status bpe_word(const tok_tokenizer *t, const char *w, size_t n, ibuf *out, scratch *sc) {
    if (t->ignore_merges) {
        int32_t id = vocab_get(t, w, n);
        if (id >= 0) return ib_push(out, id) ? IG_ERR_NOMEM : IG_OK;
    }
    size_t m = 0, i = 0;
    int32_t unk = -1; uint32_t unk_len = 0;
    sbuf *tmp = &sc->s3;
    while (i < n) {
        unsigned char c0 = (unsigned char)w[i];
        size_t cl = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC0 ? 2 : 1;
        if (i + cl > n) cl = n - i;
        size_t end = i + cl;
        int is_first = i == 0, is_last = end == n;
        int32_t id = -1;
        const char *s = w + i;
        size_t sl = cl;
        int decorated = (!is_first && t->cont_prefix) || (is_last && t->eow_suffix);
        if (!decorated && cl <= 2) {
            uint32_t cp = cl == 1 ? c0 : ((uint32_t)(c0 & 0x1F) << 6) | ((unsigned char)w[i + 1] & 0x3F);
            id = cp < 1024 ? t->char_id[cp] : vocab_get(t, s, sl);
        } else {
            if (decorated) {
                tmp->n = 0;
                if ((!is_first && t->cont_prefix && sb_put(tmp, t->cont_prefix, t->cont_len)) || sb_put(tmp, s, cl) ||
                    (is_last && t->eow_suffix && sb_put(tmp, t->eow_suffix, t->eow_len)))
                    return IG_ERR_NOMEM;
                s = tmp->p; sl = tmp->n;
            }
            id = vocab_get(t, s, sl);
        }
        if (id >= 0) {
            if (unk >= 0) { if (sym_add(sc, &m, unk, unk_len)) return IG_ERR_NOMEM; unk = -1; }
            if (sym_add(sc, &m, id, (uint32_t)cl)) return IG_ERR_NOMEM;
        } else {
            int done = 0;
            if (t->byte_fallback) {
                size_t j;
                for (j = 0; j < sl && t->byte_tok[(unsigned char)s[j]] >= 0; j++) {}
                if (j == sl) {
                    if (unk >= 0) { if (sym_add(sc, &m, unk, unk_len)) return IG_ERR_NOMEM; unk = -1; }
                    for (j = 0; j < sl; j++)
                        if (sym_add(sc, &m, t->byte_tok[(unsigned char)s[j]], 1)) return IG_ERR_NOMEM;
                    done = 1;
                }
            }
            if (!done && t->unk_id >= 0) {
                if (unk >= 0 && t->fuse_unk) unk_len += (uint32_t)cl;
                else {
                    if (unk >= 0 && sym_add(sc, &m, unk, unk_len)) return IG_ERR_NOMEM;
                    unk = t->unk_id; unk_len = (uint32_t)cl;
                }
            }
        }
        i = end;
    }
    if (unk >= 0 && sym_add(sc, &m, unk, unk_len)) return IG_ERR_NOMEM;
    struct sym *sy = sc->sym;
    for (size_t k = 0; k < m; k++) { sy[k].prev = (int32_t)k - 1; sy[k].next = k + 1 < m ? (int32_t)k + 1 : -1; }
    size_t hn = 0;
    uint32_t rank;
    int32_t nid;
    for (size_t k = 0; k + 1 < m; k++)
        if (merge_get(t, sy[k].id, sy[k + 1].id, &rank, &nid) && heap_push(sc, &hn, rank, (uint32_t)k, nid))
            return IG_ERR_NOMEM;
    while (hn) {
        struct hent top = heap_pop(sc, &hn);
        sy = sc->sym;
        struct sym *a = &sy[top.pos];
        if (!a->len || a->next < 0) continue;
        struct sym *b = &sy[a->next];
        if (!merge_get(t, a->id, b->id, &rank, &nid) || nid != top.nid) continue;
        a->id = nid;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) sy[a->next].prev = (int32_t)top.pos;
        if (a->prev >= 0 && merge_get(t, sy[a->prev].id, a->id, &rank, &nid) &&
            heap_push(sc, &hn, rank, (uint32_t)a->prev, nid))
            return IG_ERR_NOMEM;
        sy = sc->sym;
        a = &sy[top.pos];
        if (a->next >= 0 && merge_get(t, a->id, sy[a->next].id, &rank, &nid) &&
            heap_push(sc, &hn, rank, top.pos, nid))
            return IG_ERR_NOMEM;
    }
    for (int32_t k = m ? 0 : -1; k >= 0; k = sc->sym[k].next)
        if (ib_push(out, sc->sym[k].id)) return IG_ERR_NOMEM;
    return IG_OK;
}

static ig_status model_piece(const tok_tokenizer *t, const char *w, size_t n, ibuf *out, scratch *sc) {
    if (n <= CACHE_KEY) {
        uint64_t h = hash_bytes(w, n);
        size_t slot = (size_t)(h >> 20) & (CACHE_SLOTS - 1);
        pthread_mutex_t *lk = (pthread_mutex_t *)&t->locks[slot & (CACHE_LOCKS - 1)];
        cache_ent *e = &t->cache[slot];
        int32_t ids[CACHE_IDS];
        int hit = 0, nids = 0;
        pthread_mutex_lock(lk);
        if (e->h == h && e->klen == n && !memcmp(e->key, w, n)) {
            hit = 1; nids = e->nids;
            memcpy(ids, e->ids, (size_t)nids * sizeof *ids);
        }
        pthread_mutex_unlock(lk);
        if (hit) {
            for (int k = 0; k < nids; k++)
                if (ib_push(out, ids[k])) return IG_ERR_NOMEM;
            return IG_OK;
        }
        size_t before = out->n;
        ig_status st = bpe_word(t, w, n, out, sc);
        if (st) return st;
        size_t got = out->n - before;
        if (got <= CACHE_IDS) {
            pthread_mutex_lock(lk);
            e->h = h; e->klen = (uint8_t)n; e->nids = (uint8_t)got;
            memcpy(e->key, w, n);
            if (got) memcpy(e->ids, out->p + before, got * sizeof *ids); /* (out->p is NULL when nothing came) */
            pthread_mutex_unlock(lk);
        }
        return IG_OK;
    }
    return bpe_word(t, w, n, out, sc);
}

/* ---- added tokens ----------------------------------------------------------------------------- */

static int is_wordc(uint32_t c) {
    int cat = tok_ucat(c);
    return c == '_' || (cat >= TOK_UC_Lu && cat <= TOK_UC_Lo) || (cat >= TOK_UC_Nd && cat <= TOK_UC_No);
}
static uint32_t last_cp(const char *s, size_t n) {
    if (!n) return 0;
    size_t i = n - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t c;
    tok_utf8_decode(s + i, n - i, &c, NULL);
    return c;
}
static uint32_t first_cp(const char *s, size_t n, size_t *cl) {
    uint32_t c[4];
    size_t k = n < 4 ? n : 4;
    unsigned char c0 = (unsigned char)s[0];
    size_t want = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC0 ? 2 : 1;
    if (want < k) k = want;
    tok_utf8_decode(s, k, c, NULL);
    if (cl) *cl = k;
    return c[0];
}

typedef struct aseg { size_t a, b; int32_t id; } aseg; /* id -1: text */

/* Splits s by added tokens (HF AddedVocabulary::find_matches with leftmost-longest matching). */
static int split_added(const tok_tokenizer *t, const char *s, size_t n, int normalized_set, int parse_special,
                       aseg **out, size_t *nout, size_t *cap) {
    int16_t *const *fb = normalized_set ? t->nfirst_byte : t->first_byte;
    const int *nf = normalized_set ? t->nnfirst : t->nfirst;
    size_t start_off = 0, pos = 0;
    *nout = 0;
#define ASEG_PUSH(A, B, ID)                                                  \
    do {                                                                     \
        if (*nout == *cap) {                                                 \
            size_t nc = *cap ? *cap * 2 : 16;                                \
            aseg *na = realloc(*out, nc * sizeof *na);                       \
            if (!na) return -1;                                              \
            *out = na; *cap = nc;                                            \
        }                                                                    \
        (*out)[*nout].a = (A); (*out)[*nout].b = (B); (*out)[*nout].id = (ID); \
        (*nout)++;                                                           \
    } while (0)
    while (pos < n) {
        unsigned char c = (unsigned char)s[pos];
        int hit = -1;
        for (int k = 0; k < nf[c]; k++) {
            const added_tok *a = &t->added[fb[c][k]];
            const char *cs = normalized_set ? t->added_norm[fb[c][k]] : a->content;
            size_t cl = normalized_set ? t->added_norm_len[fb[c][k]] : a->len;
            if (cl && pos + cl <= n && !memcmp(s + pos, cs, cl)) { hit = fb[c][k]; break; }
        }
        if (hit < 0) { pos++; continue; }
        const added_tok *a = &t->added[hit];
        size_t ms = pos, me = pos + (normalized_set ? t->added_norm_len[hit] : a->len);
        pos = me;
        if (!parse_special && a->special) continue;
        if (a->single_word) {
            int ss = ms == 0 || !is_wordc(last_cp(s, ms));
            int es = me == n || !is_wordc(first_cp(s + me, n - me, NULL));
            if (!ss || !es) continue;
        }
        if (a->lstrip) {
            size_t ns = ms;
            while (ns > start_off) {
                size_t q = ns - 1;
                while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                uint32_t cp;
                tok_utf8_decode(s + q, ns - q, &cp, NULL);
                if (!tok_uspace(cp)) break;
                ns = q;
            }
            ms = ns;
        }
        if (a->rstrip) {
            while (me < n) {
                size_t cl;
                uint32_t cp = first_cp(s + me, n - me, &cl);
                if (!tok_uspace(cp)) break;
                me += cl;
            }
            pos = me;
        }
        if (ms > start_off) ASEG_PUSH(start_off, ms, -1);
        ASEG_PUSH(ms, me, a->id);
        start_off = me;
    }
    if (start_off < n || *nout == 0) ASEG_PUSH(start_off, n, -1);
#undef ASEG_PUSH
    return 0;
}

/* ---- encode ----------------------------------------------------------------------------------- */

static ig_status encode_text(const tok_tokenizer *t, const char *s, size_t n, int first, scratch *sc, ibuf *ids) {
    if (!n) return IG_OK;
    plist *in = &sc->pa, *out = &sc->pb;
    pl_clear(in);
    if (pl_add(in, s, n)) return IG_ERR_NOMEM;
    if (t->pre) {
        ig_status st = pre_apply(t, t->pre, in, out, sc, first);
        if (st) return st;
    } else {
        plist x = *in; *in = *out; *out = x;
    }
    for (size_t i = 0; i < out->n; i++) {
        ig_status st = model_piece(t, PIECE(out, i), out->s[i].len, ids, sc);
        if (st) return st;
    }
    return IG_OK;
}

static ig_status post_apply(const tpost *p, ibuf *ids) {
    if (p->kind == PP_SEQ) {
        for (int k = 0; k < p->nkids; k++) {
            ig_status st = post_apply(&p->kids[k], ids);
            if (st) return st;
        }
        return IG_OK;
    }
    if (p->kind != PP_TEMPLATE && p->kind != PP_ROBERTA) return IG_OK;
    size_t n = ids->n, total = p->npre + n + p->npost;
    if (!total) return IG_OK; /* (ids->p may be NULL: no pointer arithmetic on it) */
    if (ids->cap < total) {
        int32_t *np = realloc(ids->p, total * sizeof *np);
        if (!np) return IG_ERR_NOMEM;
        ids->p = np; ids->cap = total;
    }
    memmove(ids->p + p->npre, ids->p, n * sizeof *ids->p);
    if (p->npre) memcpy(ids->p, p->pre, p->npre * sizeof *ids->p);
    if (p->npost) memcpy(ids->p + p->npre + n, p->post, p->npost * sizeof *ids->p);
    ids->n = total;
    return IG_OK;
}

ig_status tok_encode(const tok_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                     int32_t **ids_out, size_t *n_ids, ig_err *err) {
    *ids_out = NULL;
    *n_ids = 0;
    if (!t || (!text && len)) return ig_fail(err, IG_ERR_INVALID, "tok_encode: NULL tokenizer or text");
    char *clean = NULL;
    if (!tok_utf8_valid(text, len)) { /* U+FFFD per maximal subpart, as String::from_utf8_lossy */
        uint32_t *cps = malloc((len + 1) * sizeof *cps);
        clean = malloc(len * 3 + 1);
        if (!cps || !clean) { free(cps); free(clean); return ig_fail(err, IG_ERR_NOMEM, "tok_encode: out of memory"); }
        size_t m = tok_utf8_decode(text, len, cps, NULL), o = 0;
        for (size_t i = 0; i < m; i++) o += (size_t)tok_utf8_put(cps[i], clean + o);
        free(cps);
        text = clean;
        len = o;
    }
    scratch sc = {0};
    ibuf ids = {0};
    aseg *segs = NULL, *segs2 = NULL;
    size_t ns = 0, cap = 0, ns2 = 0, cap2 = 0;
    sbuf nb = {0}, tmp = {0};
    ig_status st = IG_OK;
    if (split_added(t, text, len, 0, parse_special, &segs, &ns, &cap)) { st = IG_ERR_NOMEM; goto out; }
    for (size_t i = 0; i < ns && !st; i++) {
        if (segs[i].id >= 0) { if (ib_push(&ids, segs[i].id)) st = IG_ERR_NOMEM; continue; }
        nb.n = 0;
        if (sb_put(&nb, text + segs[i].a, segs[i].b - segs[i].a)) { st = IG_ERR_NOMEM; break; }
        if (t->norm && (st = norm_apply(t->norm, &nb, &tmp))) break;
        if (split_added(t, nb.p, nb.n, 1, parse_special, &segs2, &ns2, &cap2)) { st = IG_ERR_NOMEM; break; }
        for (size_t j = 0; j < ns2 && !st; j++) {
            if (segs2[j].id >= 0) { if (ib_push(&ids, segs2[j].id)) st = IG_ERR_NOMEM; continue; }
            st = encode_text(t, nb.p + segs2[j].a, segs2[j].b - segs2[j].a, segs[i].a == 0 && j == 0, &sc, &ids);
        }
    }
    if (!st && add_special && t->post) st = post_apply(t->post, &ids);
out:
    free(segs); free(segs2); free(nb.p); free(tmp.p); free(clean);
    scratch_free(&sc);
    if (st) {
        free(ids.p);
        return ig_fail(err, st, "tok_encode: %s", st == IG_ERR_NOMEM ? "out of memory" : "failed");
    }
    if (!ids.p) ids.p = malloc(sizeof(int32_t));
    *ids_out = ids.p;
    *n_ids = ids.n;
    return IG_OK;
}

/* ---- decoders --------------------------------------------------------------------------------- */

/* String::from_utf8_lossy of s into out (appends). */
static int lossy_append(sbuf *out, const char *s, size_t n) {
    if (tok_utf8_valid(s, n)) return sb_put(out, s, n);
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    if (!cps) return -1;
    size_t m = tok_utf8_decode(s, n, cps, NULL);
    if (sb_reserve(out, m * 4)) { free(cps); return -1; }
    for (size_t i = 0; i < m; i++) out->n += (size_t)tok_utf8_put(cps[i], out->p + out->n);
    out->p[out->n] = 0;
    free(cps);
    return 0;
}

static int is_byte_token(const char *s, size_t n, unsigned *v) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    int h = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        h = h * 16 + d;
    }
    *v = (unsigned)h;
    return 1;
}

static ig_status dec_apply(const tok_tokenizer *t, const tdec *d, plist *in, plist *out, sbuf *tmp) {
    if (d->kind == DC_SEQ) {
        plist *a = in, *b = out;
        for (int k = 0; k < d->nkids; k++) {
            pl_clear(b);
            ig_status st = dec_apply(t, &d->kids[k], a, b, tmp);
            if (st) return st;
            plist *x = a; a = b; b = x;
        }
        if (a != out) { plist x = *out; *out = *a; *a = x; }
        return IG_OK;
    }
    pl_clear(out);
    switch (d->kind) {
    case DC_BYTELEVEL: {
        tmp->n = 0;
        for (size_t i = 0; i < in->n; i++) {
            const unsigned char *s = (const unsigned char *)PIECE(in, i);
            size_t n = in->s[i].len, j = 0, start = tmp->n;
            int ok = 1;
            while (j < n) {
                uint32_t cp;
                size_t cl;
                cp = first_cp((const char *)s + j, n - j, &cl);
                if (cp >= 512 || t->bl_rev[cp] < 0) { ok = 0; break; }
                unsigned char b = (unsigned char)t->bl_rev[cp];
                if (sb_put(tmp, &b, 1)) return IG_ERR_NOMEM;
                j += cl;
            }
            if (!ok) { tmp->n = start; if (sb_put(tmp, s, n)) return IG_ERR_NOMEM; }
        }
        sbuf o = {0};
        if (lossy_append(&o, tmp->p ? tmp->p : "", tmp->n)) { free(o.p); return IG_ERR_NOMEM; }
        int r = pl_add0(out, o.p ? o.p : "", o.n);
        free(o.p);
        return r ? IG_ERR_NOMEM : IG_OK;
    }
    case DC_BYTEFALLBACK: {
        tmp->n = 0; /* pending byte run */
        for (size_t i = 0; i <= in->n; i++) {
            unsigned v;
            if (i < in->n && is_byte_token(PIECE(in, i), in->s[i].len, &v)) {
                unsigned char b = (unsigned char)v;
                if (sb_put(tmp, &b, 1)) return IG_ERR_NOMEM;
                continue;
            }
            if (tmp->n) {
                if (tok_utf8_valid(tmp->p, tmp->n)) {
                    if (pl_add0(out, tmp->p, tmp->n)) return IG_ERR_NOMEM;
                } else {
                    for (size_t k = 0; k < tmp->n; k++)
                        if (pl_add0(out, "\xEF\xBF\xBD", 3)) return IG_ERR_NOMEM;
                }
                tmp->n = 0;
            }
            if (i < in->n && pl_add0(out, PIECE(in, i), in->s[i].len)) return IG_ERR_NOMEM;
        }
        return IG_OK;
    }
    case DC_FUSE:
        tmp->n = 0;
        for (size_t i = 0; i < in->n; i++)
            if (sb_put(tmp, PIECE(in, i), in->s[i].len)) return IG_ERR_NOMEM;
        return pl_add0(out, tmp->p ? tmp->p : "", tmp->n) ? IG_ERR_NOMEM : IG_OK;
    case DC_STRIP: {
        char cu[4];
        size_t cl = (size_t)tok_utf8_put(d->ch, cu);
        for (size_t i = 0; i < in->n; i++) {
            const char *s = PIECE(in, i);
            size_t a = 0, b = in->s[i].len;
            for (int k = 0; k < d->start && a + cl <= b && !memcmp(s + a, cu, cl); k++) a += cl;
            for (int k = 0; k < d->stop && b >= a + cl && !memcmp(s + b - cl, cu, cl); k++) b -= cl;
            if (pl_add0(out, s + a, b - a)) return IG_ERR_NOMEM;
        }
        return IG_OK;
    }
    case DC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            ig_status st = replace_all(PIECE(in, i), in->s[i].len, d->re, d->a, d->alen, d->b, d->blen, tmp);
            if (st) return st;
            if (pl_add0(out, tmp->p ? tmp->p : "", tmp->n)) return IG_ERR_NOMEM;
        }
        return IG_OK;
    case DC_METASPACE:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = PIECE(in, i);
            size_t n = in->s[i].len;
            tmp->n = 0;
            for (size_t j = 0; j < n;) {
                if (j + (size_t)d->repl_len <= n && !memcmp(s + j, d->repl, (size_t)d->repl_len)) {
                    if (!(i == 0 && d->prepend_scheme != PS_NEVER) && sb_put(tmp, " ", 1)) return IG_ERR_NOMEM;
                    j += (size_t)d->repl_len;
                } else {
                    if (sb_put(tmp, s + j, 1)) return IG_ERR_NOMEM;
                    j++;
                }
            }
            if (pl_add0(out, tmp->p ? tmp->p : "", tmp->n)) return IG_ERR_NOMEM;
        }
        return IG_OK;
    case DC_BPE:
        for (size_t i = 0; i < in->n; i++) {
            ig_status st = replace_all(PIECE(in, i), in->s[i].len, NULL, d->a, d->alen, i + 1 == in->n ? "" : " ",
                                       i + 1 == in->n ? 0 : 1, tmp);
            if (st) return st;
            if (pl_add0(out, tmp->p ? tmp->p : "", tmp->n)) return IG_ERR_NOMEM;
        }
        return IG_OK;
    }
    return IG_ERR_INTERNAL;
}

typedef struct dscratch { plist a, b; sbuf tmp; } dscratch;
static void dscratch_free(dscratch *d) { pl_free(&d->a); pl_free(&d->b); free(d->tmp.p); }

/* Decodes into out (replacing its contents). */
static ig_status decode_into(const tok_tokenizer *t, const int32_t *ids, size_t n, int skip_special, dscratch *ds,
                             sbuf *out) {
    pl_clear(&ds->a);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->nids || !t->str[id]) continue;
        if (skip_special && (t->special[id] & 1)) continue;
        if (pl_add0(&ds->a, t->str[id], t->slen[id])) return IG_ERR_NOMEM;
    }
    out->n = 0;
    if (sb_reserve(out, 0)) return IG_ERR_NOMEM;
    out->p[0] = 0;
    if (!t->dec) { /* HF joins with spaces when there is no decoder */
        for (size_t i = 0; i < ds->a.n; i++)
            if ((i && sb_put(out, " ", 1)) || sb_put(out, PIECE(&ds->a, i), ds->a.s[i].len)) return IG_ERR_NOMEM;
        return IG_OK;
    }
    ig_status st = dec_apply(t, t->dec, &ds->a, &ds->b, &ds->tmp);
    if (st) return st;
    for (size_t i = 0; i < ds->b.n; i++)
        if (sb_put(out, PIECE(&ds->b, i), ds->b.s[i].len)) return IG_ERR_NOMEM;
    return IG_OK;
}

ig_status tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
                     ig_err *err) {
    *text = NULL;
    *len = 0;
    if (!t || (!ids && n)) return ig_fail(err, IG_ERR_INVALID, "tok_decode: NULL tokenizer or ids");
    dscratch ds = {0};
    sbuf out = {0};
    ig_status st = decode_into(t, ids, n, skip_special, &ds, &out);
    dscratch_free(&ds);
    if (st) { free(out.p); return ig_fail(err, st, "tok_decode: out of memory"); }
    *text = out.p;
    *len = out.n;
    return IG_OK;
}

/* ---- streaming decode ------------------------------------------------------------------------- */

/* HF DecodeStream: keep a window of ids whose decoded text (prefix) was already emitted; decode
 * window + new id and emit what extends the prefix, unless it ends in U+FFFD (an unfinished
 * character). The window keeps one token of left context, so leading-space stripping (Strip /
 * Metaspace decoders) applies only where it would in a full decode. */
#define STREAM_PENDING 8
struct tok_stream {
    const tok_tokenizer *t;
    int skip_special;
    ibuf ids;          /* window */
    size_t prefix_index;
    sbuf prefix, cur, piece;
    dscratch ds;
};

tok_stream *tok_stream_new(const tok_tokenizer *t, int skip_special) {
    tok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->skip_special = skip_special;
    return s;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->ids.p); free(s->prefix.p); free(s->cur.p); free(s->piece.p);
    dscratch_free(&s->ds);
    free(s);
}

ig_status tok_stream_push(tok_stream *s, int32_t id, const char **piece, size_t *len, ig_err *err) {
    *piece = "";
    *len = 0;
    if (ib_push(&s->ids, id)) return ig_fail(err, IG_ERR_NOMEM, "tok_stream_push: out of memory");
    ig_status st = decode_into(s->t, s->ids.p, s->ids.n, s->skip_special, &s->ds, &s->cur);
    if (st) return ig_fail(err, st, "tok_stream_push: out of memory");
    size_t pl = s->prefix.n, cl = s->cur.n;
    /* text ending in U+FFFD waits for the rest of its character, but at most STREAM_PENDING tokens:
     * a character is at most 4 byte tokens, and a window that grew without bound made every push
     * decode it again (8192 lone byte tokens took seconds on the scheduler thread) */
    int held = cl >= 3 && !memcmp(s->cur.p + cl - 3, "\xEF\xBF\xBD", 3) && s->ids.n - s->prefix_index < STREAM_PENDING;
    if (cl > pl && !held) {
        if (pl && memcmp(s->cur.p, s->prefix.p, pl))
            return ig_fail(err, IG_ERR_INTERNAL, "tok_stream_push: decoded text no longer extends the emitted prefix");
        s->piece.n = 0;
        if (sb_put(&s->piece, s->cur.p + pl, cl - pl)) return ig_fail(err, IG_ERR_NOMEM, "tok_stream_push: out of memory");
        size_t new_pi = s->ids.n - s->prefix_index;
        memmove(s->ids.p, s->ids.p + s->prefix_index, (s->ids.n - s->prefix_index) * sizeof *s->ids.p);
        s->ids.n -= s->prefix_index;
        st = decode_into(s->t, s->ids.p, s->ids.n, s->skip_special, &s->ds, &s->prefix);
        if (st) return ig_fail(err, st, "tok_stream_push: out of memory");
        s->prefix_index = new_pi;
        *piece = s->piece.p;
        *len = s->piece.n;
    }
    return IG_OK;
}

ig_status tok_stream_flush(tok_stream *s, const char **piece, size_t *len, ig_err *err) {
    *piece = "";
    *len = 0;
    ig_status st = decode_into(s->t, s->ids.p, s->ids.n, s->skip_special, &s->ds, &s->cur);
    if (st) return ig_fail(err, st, "tok_stream_flush: out of memory");
    if (s->cur.n > s->prefix.n && (!s->prefix.n || !memcmp(s->cur.p, s->prefix.p, s->prefix.n))) {
        s->piece.n = 0;
        if (sb_put(&s->piece, s->cur.p + s->prefix.n, s->cur.n - s->prefix.n))
            return ig_fail(err, IG_ERR_NOMEM, "tok_stream_flush: out of memory");
        *piece = s->piece.p;
        *len = s->piece.n;
    }
    s->ids.n = 0; s->prefix.n = 0; s->prefix_index = 0;
    return IG_OK;
}

/* ---- accessors -------------------------------------------------------------------------------- */

int32_t tok_vocab_size(const tok_tokenizer *t) { return t ? t->nids : 0; }

static int dec_has(const tdec *d, int kind) {
    if (!d) return 0;
    if (d->kind == kind) return 1;
    for (int k = 0; k < d->nkids; k++)
        if (dec_has(&d->kids[k], kind)) return 1;
    return 0;
}

int tok_token_bytes(const tok_tokenizer *t, int32_t id, char *out, size_t cap) {
    if (!t || id < 0 || id >= t->nids || !t->str[id]) return -1;
    const char *s = t->str[id];
    size_t n = t->slen[id], o = 0;
    if (t->special[id] & 1) {
        if (n > cap) return -1;
        memcpy(out, s, n);
        return (int)n;
    }
    if (dec_has(t->dec, DC_BYTELEVEL)) {
        for (size_t j = 0; j < n;) {
            size_t cl;
            uint32_t cp = first_cp(s + j, n - j, &cl);
            if (o >= cap) return -1;
            if (cp < 512 && t->bl_rev[cp] >= 0) out[o++] = (char)t->bl_rev[cp];
            else { /* not a mapped char (an added token's text): its bytes as they are */
                if (o + cl > cap) return -1;
                memcpy(out + o, s + j, cl);
                o += cl;
            }
            j += cl;
        }
        return (int)o;
    }
    unsigned v;
    if (dec_has(t->dec, DC_BYTEFALLBACK) && is_byte_token(s, n, &v)) {
        if (cap < 1) return -1;
        out[0] = (char)v;
        return 1;
    }
    for (size_t j = 0; j < n;) { /* SentencePiece: U+2581 is a space */
        if (j + 3 <= n && !memcmp(s + j, "\xE2\x96\x81", 3)) {
            if (o >= cap) return -1;
            out[o++] = ' ';
            j += 3;
        } else {
            if (o >= cap) return -1;
            out[o++] = s[j++];
        }
    }
    return (int)o;
}

int32_t tok_token_id(const tok_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    for (int k = 0; k < t->nadded; k++)
        if (t->added[k].len == n && !memcmp(t->added[k].content, token, n)) return t->added[k].id;
    return vocab_get(t, token, n);
}

const char *tok_token_str(const tok_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->nids) return NULL;
    return t->str[id];
}

int32_t tok_bos_id(const tok_tokenizer *t) { return t ? t->bos : -1; }
int32_t tok_eos_id(const tok_tokenizer *t) { return t ? t->eos : -1; }
int tok_is_special(const tok_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->nids && (t->special[id] & 1);
}

/* ---- loading ---------------------------------------------------------------------------------- */

static void norm_free(tnorm *n) {
    if (!n) return;
    for (int k = 0; k < n->nkids; k++) norm_free(&n->kids[k]);
    free(n->kids); free(n->a); free(n->b); tok_regex_free(n->re);
}
static void pre_free(tpre *p) {
    if (!p) return;
    for (int k = 0; k < p->nkids; k++) pre_free(&p->kids[k]);
    free(p->kids); free(p->lit); tok_regex_free(p->re);
}
static void dec_free(tdec *d) {
    if (!d) return;
    for (int k = 0; k < d->nkids; k++) dec_free(&d->kids[k]);
    free(d->kids); free(d->a); free(d->b); tok_regex_free(d->re);
}
static void post_free(tpost *p) {
    if (!p) return;
    for (int k = 0; k < p->nkids; k++) post_free(&p->kids[k]);
    free(p->kids); free(p->pre); free(p->post);
}

void tok_free(tok_tokenizer *t) {
    if (!t) return;
    for (int k = 0; k < t->nadded; k++) { /* also when the load failed before the id table */
        free(t->added[k].content);
        if (t->added_norm) free(t->added_norm[k]);
    }
    free(t->added); free(t->added_norm); free(t->added_norm_len);
    for (int k = 0; k < 256; k++) { free(t->first_byte[k]); free(t->nfirst_byte[k]); }
    free(t->str); free(t->slen); free(t->mstr); free(t->mlen); free(t->special); free(t->vmap); free(t->arena);
    free(t->mkeys); free(t->mvals); free(t->cont_prefix); free(t->eow_suffix);
    if (t->norm) { norm_free(t->norm); free(t->norm); }
    if (t->pre) { pre_free(t->pre); free(t->pre); }
    if (t->dec) { dec_free(t->dec); free(t->dec); }
    if (t->post) { post_free(t->post); free(t->post); }
    if (t->cache) {
        for (int k = 0; k < CACHE_LOCKS; k++) pthread_mutex_destroy(&t->locks[k]);
        free(t->cache);
    }
    free(t);
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
/* A token id in tokenizer.json: an integer in [0, 1e8] (the bound the vocabulary's ids keep too). */
static int json_id(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1e8 && v->valuedouble == floor(v->valuedouble);
}
static int jbool(const cJSON *o, const char *key, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
}

/* Reads a {"String": s} / {"Regex": r} pattern into (lit) or (re). */
static ig_status load_pattern(const cJSON *pat, const char *where, char **lit, size_t *litlen, tok_regex **re, ig_err *err) {
    const char *s = jstr(pat, "String"), *r = jstr(pat, "Regex");
    if (s) {
        *litlen = strlen(s);
        *lit = xstrndup(s, *litlen);
        return *lit ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (r) {
        ig_err e2;
        ig_status st = tok_regex_compile(r, strlen(r), re, &e2);
        if (st) return ig_fail(err, st, "tokenizer.json: %s: %s", where, e2.msg);
        return IG_OK;
    }
    return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: %s: pattern is neither String nor Regex", where);
}

static ig_status load_norm(const cJSON *j, tnorm *n, ig_err *err) {
    memset(n, 0, sizeof *n);
    const char *type = jstr(j, "type");
    if (!type) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: normalizer without a type");
    if (!strcmp(type, "Sequence")) {
        n->kind = NM_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        int cnt = cJSON_GetArraySize(arr);
        n->kids = calloc((size_t)(cnt ? cnt : 1), sizeof *n->kids);
        if (!n->kids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            ig_status st = load_norm(it, &n->kids[n->nkids], err);
            n->nkids++;
            if (st) return st;
        }
        return IG_OK;
    }
    if (!strcmp(type, "NFC")) { n->kind = NM_NFC; return IG_OK; }
    if (!strcmp(type, "NFD")) { n->kind = NM_NFD; return IG_OK; }
    if (!strcmp(type, "NFKC")) { n->kind = NM_NFKC; return IG_OK; }
    if (!strcmp(type, "NFKD")) { n->kind = NM_NFKD; return IG_OK; }
    if (!strcmp(type, "Lowercase")) { n->kind = NM_LOWER; return IG_OK; }
    if (!strcmp(type, "Strip")) {
        n->kind = NM_STRIP;
        n->left = jbool(j, "strip_left", 1);
        n->right = jbool(j, "strip_right", 1);
        return IG_OK;
    }
    if (!strcmp(type, "Prepend")) {
        const char *p = jstr(j, "prepend");
        if (!p) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: Prepend normalizer without \"prepend\"");
        n->kind = NM_PREPEND;
        n->alen = strlen(p);
        n->a = xstrndup(p, n->alen);
        return n->a ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (!strcmp(type, "Replace")) {
        const char *c = jstr(j, "content");
        if (!c) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: Replace normalizer without \"content\"");
        n->kind = NM_REPLACE;
        n->blen = strlen(c);
        n->b = xstrndup(c, n->blen);
        if (!n->b) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        return load_pattern(cJSON_GetObjectItemCaseSensitive(j, "pattern"), "Replace normalizer", &n->a, &n->alen, &n->re, err);
    }
    return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: normalizer type \"%s\" not supported", type);
}

static int parse_behavior(const char *b) {
    if (!b) return BH_REMOVED;
    if (!strcmp(b, "Removed")) return BH_REMOVED;
    if (!strcmp(b, "Isolated")) return BH_ISOLATED;
    if (!strcmp(b, "MergedWithPrevious")) return BH_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return BH_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return BH_CONTIGUOUS;
    return -1;
}

static const char k_gpt2_re[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static ig_status load_metaspace_common(const cJSON *j, char *repl, int *repl_len, uint32_t *cp, int *scheme, ig_err *err) {
    const char *r = jstr(j, "replacement");
    if (!r) r = "\xE2\x96\x81";
    size_t rl = strlen(r);
    if (rl == 0 || rl > 4) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: Metaspace replacement must be one character");
    memcpy(repl, r, rl);
    *repl_len = (int)rl;
    tok_utf8_decode(r, rl, cp, NULL);
    const char *ps = jstr(j, "prepend_scheme");
    if (ps) {
        if (!strcmp(ps, "always")) *scheme = PS_ALWAYS;
        else if (!strcmp(ps, "first")) *scheme = PS_FIRST;
        else if (!strcmp(ps, "never")) *scheme = PS_NEVER;
        else return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: Metaspace prepend_scheme \"%s\" not supported", ps);
    } else {
        *scheme = jbool(j, "add_prefix_space", 1) ? PS_ALWAYS : PS_NEVER;
    }
    return IG_OK;
}

static ig_status load_pre(const cJSON *j, tpre *p, ig_err *err) {
    memset(p, 0, sizeof *p);
    const char *type = jstr(j, "type");
    if (!type) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: pre_tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        p->kind = PT_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        int cnt = cJSON_GetArraySize(arr);
        p->kids = calloc((size_t)(cnt ? cnt : 1), sizeof *p->kids);
        if (!p->kids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            ig_status st = load_pre(it, &p->kids[p->nkids], err);
            p->nkids++;
            if (st) return st;
        }
        return IG_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        p->kind = PT_BYTELEVEL;
        p->add_prefix_space = jbool(j, "add_prefix_space", 1);
        p->use_regex = jbool(j, "use_regex", 1);
        if (p->use_regex) {
            ig_status st = tok_regex_compile(k_gpt2_re, sizeof k_gpt2_re - 1, &p->re, err);
            if (st) return st;
        }
        return IG_OK;
    }
    if (!strcmp(type, "Split")) {
        p->kind = PT_SPLIT;
        p->behavior = parse_behavior(jstr(j, "behavior"));
        if (p->behavior < 0)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: Split behavior \"%s\" not supported", jstr(j, "behavior"));
        p->invert = jbool(j, "invert", 0);
        return load_pattern(cJSON_GetObjectItemCaseSensitive(j, "pattern"), "Split pre-tokenizer", &p->lit, &p->litlen, &p->re, err);
    }
    if (!strcmp(type, "Metaspace")) {
        p->kind = PT_METASPACE;
        p->split = jbool(j, "split", 1);
        return load_metaspace_common(j, p->repl, &p->repl_len, &p->repl_cp, &p->prepend_scheme, err);
    }
    if (!strcmp(type, "Digits")) {
        p->kind = PT_DIGITS;
        p->individual = jbool(j, "individual_digits", 0);
        return IG_OK;
    }
    if (!strcmp(type, "Whitespace")) {
        p->kind = PT_WHITESPACE;
        static const char wre[] = "\\w+|[^\\w\\s]+";
        return tok_regex_compile(wre, sizeof wre - 1, &p->re, err);
    }
    if (!strcmp(type, "WhitespaceSplit")) { p->kind = PT_WSSPLIT; return IG_OK; }
    if (!strcmp(type, "Punctuation")) {
        p->kind = PT_PUNCT;
        const char *b = jstr(j, "behavior");
        p->behavior = b ? parse_behavior(b) : BH_ISOLATED;
        if (p->behavior < 0) return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: Punctuation behavior \"%s\" not supported", b);
        return IG_OK;
    }
    if (!strcmp(type, "BertPreTokenizer")) {
        p->kind = PT_BERT;
        p->kids = calloc(2, sizeof *p->kids);
        if (!p->kids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        p->nkids = 2;
        p->kids[0].kind = PT_WSSPLIT;
        p->kids[1].kind = PT_PUNCT;
        p->kids[1].behavior = BH_ISOLATED;
        return IG_OK;
    }
    return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer type \"%s\" not supported", type);
}

static ig_status load_dec(const cJSON *j, tdec *d, ig_err *err) {
    memset(d, 0, sizeof *d);
    const char *type = jstr(j, "type");
    if (!type) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: decoder without a type");
    if (!strcmp(type, "Sequence")) {
        d->kind = DC_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "decoders");
        int cnt = cJSON_GetArraySize(arr);
        d->kids = calloc((size_t)(cnt ? cnt : 1), sizeof *d->kids);
        if (!d->kids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            ig_status st = load_dec(it, &d->kids[d->nkids], err);
            d->nkids++;
            if (st) return st;
        }
        return IG_OK;
    }
    if (!strcmp(type, "ByteLevel")) { d->kind = DC_BYTELEVEL; return IG_OK; }
    if (!strcmp(type, "ByteFallback")) { d->kind = DC_BYTEFALLBACK; return IG_OK; }
    if (!strcmp(type, "Fuse")) { d->kind = DC_FUSE; return IG_OK; }
    if (!strcmp(type, "Strip")) {
        d->kind = DC_STRIP;
        const char *c = jstr(j, "content");
        d->ch = ' ';
        if (c && *c) tok_utf8_decode(c, strlen(c) < 4 ? strlen(c) : 4, &d->ch, NULL);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "start"), *b = cJSON_GetObjectItemCaseSensitive(j, "stop");
        d->start = cJSON_IsNumber(a) ? a->valueint : 0;
        d->stop = cJSON_IsNumber(b) ? b->valueint : 0;
        return IG_OK;
    }
    if (!strcmp(type, "Replace")) {
        d->kind = DC_REPLACE;
        const char *c = jstr(j, "content");
        if (!c) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: Replace decoder without \"content\"");
        d->blen = strlen(c);
        d->b = xstrndup(c, d->blen);
        if (!d->b) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        return load_pattern(cJSON_GetObjectItemCaseSensitive(j, "pattern"), "Replace decoder", &d->a, &d->alen, &d->re, err);
    }
    if (!strcmp(type, "Metaspace")) {
        d->kind = DC_METASPACE;
        return load_metaspace_common(j, d->repl, &d->repl_len, &d->repl_cp, &d->prepend_scheme, err);
    }
    if (!strcmp(type, "BPEDecoder")) {
        d->kind = DC_BPE;
        const char *s = jstr(j, "suffix");
        if (!s) s = "</w>";
        d->alen = strlen(s);
        d->a = xstrndup(s, d->alen);
        return d->a ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: decoder type \"%s\" not supported", type);
}

/* Looks up a token for the post-processor: added tokens first, then the model vocab. */
static int32_t lookup_any(const tok_tokenizer *t, const char *s) { return tok_token_id(t, s); }

static ig_status load_post(const tok_tokenizer *t, const cJSON *j, tpost *p, ig_err *err) {
    memset(p, 0, sizeof *p);
    const char *type = jstr(j, "type");
    if (!type) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: post_processor without a type");
    if (!strcmp(type, "Sequence")) {
        p->kind = PP_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "processors");
        int cnt = cJSON_GetArraySize(arr);
        p->kids = calloc((size_t)(cnt ? cnt : 1), sizeof *p->kids);
        if (!p->kids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            ig_status st = load_post(t, it, &p->kids[p->nkids], err);
            p->nkids++;
            if (st) return st;
        }
        return IG_OK;
    }
    if (!strcmp(type, "ByteLevel")) { p->kind = PP_BYTELEVEL; return IG_OK; }
    if (!strcmp(type, "TemplateProcessing")) {
        p->kind = PP_TEMPLATE;
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
        const cJSON *specials = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
        int cnt = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, single) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
            if (st) {
                const char *name = jstr(st, "id");
                const cJSON *sp = name ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
                const cJSON *ids = cJSON_GetObjectItemCaseSensitive(sp, "ids");
                if (!cJSON_IsArray(ids))
                    return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: TemplateProcessing special token \"%s\" has no ids",
                                   name ? name : "?");
                const cJSON *idv;
                cJSON_ArrayForEach(idv, ids) {
                    if (!json_id(idv))
                        return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: TemplateProcessing special token \"%s\" "
                                       "has an id that is not a token id", name ? name : "?");
                    int32_t **dst = cnt ? &p->post : &p->pre;
                    size_t *dn = cnt ? &p->npost : &p->npre;
                    int32_t *np = realloc(*dst, (*dn + 1) * sizeof *np);
                    if (!np) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
                    np[(*dn)++] = (int32_t)idv->valuedouble;
                    *dst = np;
                }
            } else if (cJSON_GetObjectItemCaseSensitive(it, "Sequence")) {
                if (cnt++) return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: TemplateProcessing with two sequences in \"single\"");
            } else {
                return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: TemplateProcessing piece is neither SpecialToken nor Sequence");
            }
        }
        return IG_OK;
    }
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        p->kind = PP_ROBERTA;
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(j, "sep");
        const cJSON *ci = cJSON_GetArrayItem(cls, 1), *si = cJSON_GetArrayItem(sep, 1);
        if (!json_id(ci) || !json_id(si)) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: %s without cls/sep ids", type);
        p->pre = malloc(sizeof *p->pre);
        p->post = malloc(sizeof *p->post);
        if (!p->pre || !p->post) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        p->pre[0] = (int32_t)ci->valuedouble; p->npre = 1;
        p->post[0] = (int32_t)si->valuedouble; p->npost = 1;
        (void)lookup_any;
        return IG_OK;
    }
    return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: post_processor type \"%s\" not supported", type);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static void bytelevel_tables(tok_tokenizer *t) {
    /* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the rest to 256+k */
    int k = 0;
    for (int i = 0; i < 512; i++) t->bl_rev[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = keep ? (uint32_t)b : (uint32_t)(256 + k++);
        t->bl_len[b] = (uint8_t)tok_utf8_put(cp, t->bl_utf8[b]);
        t->bl_rev[cp] = (int16_t)b;
    }
}

static ig_status add_added(tok_tokenizer *t, const cJSON *it, int32_t id, int *cap, ig_err *err) {
    const char *content = jstr(it, "content");
    if (!content) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: added token %d without content", (int)id);
    for (int k = 0; k < t->nadded; k++)
        if (t->added[k].id == id) return IG_OK;
    if (t->nadded == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        added_tok *na = realloc(t->added, (size_t)*cap * sizeof *na);
        if (!na) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        t->added = na;
    }
    added_tok *a = &t->added[t->nadded];
    memset(a, 0, sizeof *a);
    a->len = strlen(content);
    a->content = xstrndup(content, a->len);
    if (!a->content) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    a->id = id;
    a->special = (uint8_t)jbool(it, "special", 0);
    a->lstrip = (uint8_t)jbool(it, "lstrip", 0);
    a->rstrip = (uint8_t)jbool(it, "rstrip", 0);
    a->single_word = (uint8_t)jbool(it, "single_word", 0);
    a->normalized = (uint8_t)jbool(it, "normalized", !a->special);
    t->nadded++;
    return IG_OK;
}

static int32_t config_token(const tok_tokenizer *t, const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(v) ? v->valuestring : jstr(v, "content");
    return s ? tok_token_id(t, s) : -1;
}

typedef struct sort_ctx { const tok_tokenizer *t; int norm; } sort_ctx;

static int cmp_len_desc(const void *a, const void *b, void *ctx) {
    const sort_ctx *c = ctx;
    int16_t x = *(const int16_t *)a, y = *(const int16_t *)b;
    size_t lx = c->norm ? c->t->added_norm_len[x] : c->t->added[x].len;
    size_t ly = c->norm ? c->t->added_norm_len[y] : c->t->added[y].len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x - y;
}

static ig_status build(tok_tokenizer *t, const cJSON *root, const cJSON *cfg, ig_err *err) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: no \"model\" object");
    const char *mtype = jstr(model, "type");
    if (!mtype && cJSON_GetObjectItemCaseSensitive(model, "merges")) mtype = "BPE";
    if (!mtype || strcmp(mtype, "BPE"))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: model type \"%s\" not supported (only BPE)",
                       mtype ? mtype : "(none)");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    /* added tokens */
    int acap = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) {
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!json_id(idv)) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: added token without a valid id (an integer in [0, 1e8])");
        ig_status st = add_added(t, it, (int32_t)idv->valuedouble, &acap, err);
        if (st) return st;
    }
    const cJSON *atd = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder") : NULL;
    cJSON_ArrayForEach(it, atd) {
        char *end;
        long id = strtol(it->string ? it->string : "", &end, 10);
        if (!it->string || *end || id < 0 || id > 100000000) continue;
        ig_status st = add_added(t, it, (int32_t)id, &acap, err);
        if (st) return st;
    }
    /* id table size */
    int32_t nids = 0;
    size_t total = 0, nv = 0;
    cJSON_ArrayForEach(it, vocab) {
        if (!json_id(it))
            return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: vocab entry \"%.100s\" has no valid id (an integer in [0, 1e8])",
                           it->string);
        int32_t id = (int32_t)it->valuedouble;
        if (id + 1 > nids) nids = id + 1;
        total += strlen(it->string) + 1;
        nv++;
    }
    for (int k = 0; k < t->nadded; k++)
        if (t->added[k].id + 1 > nids) nids = t->added[k].id + 1;
    /* ids are dense in real tokenizers: a sparse one would size five tables by its largest id */
    if ((size_t)nids > 2 * (nv + (size_t)t->nadded) + 65536)
        return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: token id %d is far beyond the %zu tokens listed", (int)nids - 1,
                       nv + (size_t)t->nadded);
    t->nids = nids;
    t->str = calloc((size_t)nids + 1, sizeof *t->str);
    t->slen = calloc((size_t)nids + 1, sizeof *t->slen);
    t->special = calloc((size_t)nids + 1, 1);
    t->mstr = calloc((size_t)nids + 1, sizeof *t->mstr);
    t->mlen = calloc((size_t)nids + 1, sizeof *t->mlen);
    t->arena = malloc(total + 1);
    t->vcap = pow2_at_least(nv * 2 + 1);
    t->vmap = calloc(t->vcap, sizeof *t->vmap);
    if (!t->str || !t->slen || !t->mstr || !t->mlen || !t->special || !t->arena || !t->vmap) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    size_t ao = 0;
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        size_t l = strlen(it->string);
        memcpy(t->arena + ao, it->string, l + 1);
        if (t->str[id]) return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: vocab id %d used twice", (int)id);
        t->str[id] = t->mstr[id] = t->arena + ao;
        t->slen[id] = t->mlen[id] = (uint32_t)l;
        ao += l + 1;
        size_t mask = t->vcap - 1, i = hash_bytes(it->string, l) & mask;
        while (t->vmap[i]) i = (i + 1) & mask;
        t->vmap[i] = id + 1;
    }
    /* model params */
    const char *unk = jstr(model, "unk_token");
    t->unk_id = unk ? vocab_get(t, unk, strlen(unk)) : -1;
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    t->ignore_merges = jbool(model, "ignore_merges", 0);
    const char *cp = jstr(model, "continuing_subword_prefix"), *es = jstr(model, "end_of_word_suffix");
    if (cp && *cp) { t->cont_len = strlen(cp); t->cont_prefix = xstrndup(cp, t->cont_len); }
    if (es && *es) { t->eow_len = strlen(es); t->eow_suffix = xstrndup(es, t->eow_len); }
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(drop) && drop->valuedouble > 0)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout %g not supported", drop->valuedouble);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_tok[b] = vocab_get(t, name, 6);
    }
    for (uint32_t c = 0; c < 1024; c++) {
        char u[4];
        int l = tok_utf8_put(c, u);
        t->char_id[c] = vocab_get(t, u, (size_t)l);
    }
    /* merges */
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int nm = cJSON_GetArraySize(merges);
    t->mcap = pow2_at_least((size_t)nm * 2 + 1);
    t->mkeys = malloc(t->mcap * sizeof *t->mkeys);
    t->mvals = malloc(t->mcap * sizeof *t->mvals);
    if (!t->mkeys || !t->mvals) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    memset(t->mkeys, 0xFF, t->mcap * sizeof *t->mkeys);
    uint32_t rank = 0;
    sbuf tmp = {0};
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t al, bl;
        if (cJSON_IsString(it)) {
            const char *s = it->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) { free(tmp.p); return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: merge %u \"%.100s\" is not \"a b\"", rank, s); }
            a = s; al = (size_t)(sp - s); b = sp + 1; bl = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring; al = strlen(a);
            b = cJSON_GetArrayItem(it, 1)->valuestring; bl = strlen(b);
        } else {
            free(tmp.p);
            return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: merge %u is neither \"a b\" nor [a, b]", rank);
        }
        int32_t ia = vocab_get(t, a, al), ib = vocab_get(t, b, bl);
        if (ia < 0 || ib < 0) { free(tmp.p); return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: merge %u \"%.*s\" \"%.*s\": token not in vocab", rank, (int)al, a, (int)bl, b); }
        tmp.n = 0;
        size_t skip = (t->cont_prefix && bl >= t->cont_len && !memcmp(b, t->cont_prefix, t->cont_len)) ? t->cont_len : 0;
        if (sb_put(&tmp, a, al) || sb_put(&tmp, b + skip, bl - skip)) { free(tmp.p); return ig_fail(err, IG_ERR_NOMEM, "out of memory"); }
        int32_t in = vocab_get(t, tmp.p, tmp.n);
        if (in < 0) { /* the message is formatted before the buffer it quotes is freed */
            ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: merge %u result \"%.*s\" not in vocab", rank, (int)(tmp.n < 100 ? tmp.n : 100), tmp.p);
            free(tmp.p);
            return IG_ERR_FORMAT;
        }
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        size_t mask = t->mcap - 1, i = hash_u64(key) & mask;
        while (t->mkeys[i] != UINT64_MAX && t->mkeys[i] != key) i = (i + 1) & mask;
        if (t->mkeys[i] == UINT64_MAX) { /* first occurrence wins, as HF's map insert order */
            t->mkeys[i] = key;
            t->mvals[i] = ((uint64_t)rank << 32) | (uint32_t)in;
        }
        rank++;
    }
    free(tmp.p);
    /* added tokens into the id table; mark them so the model vocab lookup skips non-model ones */
    for (int k = 0; k < t->nadded; k++) {
        added_tok *a = &t->added[k];
        t->str[a->id] = a->content; /* HF id_to_token asks the added vocabulary first */
        t->slen[a->id] = (uint32_t)a->len;
        if (a->special) t->special[a->id] |= 1;
    }
    /* pipeline */
    const cJSON *j;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "normalizer")) && !cJSON_IsNull(j)) {
        t->norm = calloc(1, sizeof *t->norm);
        if (!t->norm) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        ig_status st = load_norm(j, t->norm, err);
        if (st) return st;
    }
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")) && !cJSON_IsNull(j)) {
        t->pre = calloc(1, sizeof *t->pre);
        if (!t->pre) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        ig_status st = load_pre(j, t->pre, err);
        if (st) return st;
    }
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "decoder")) && !cJSON_IsNull(j)) {
        t->dec = calloc(1, sizeof *t->dec);
        if (!t->dec) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        ig_status st = load_dec(j, t->dec, err);
        if (st) return st;
    }
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "post_processor")) && !cJSON_IsNull(j)) {
        t->post = calloc(1, sizeof *t->post);
        if (!t->post) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        ig_status st = load_post(t, j, t->post, err);
        if (st) return st;
    }
    /* added-token match tables: normalized tokens match the normalized text, with their content
     * normalized the same way (HF refresh_added_tokens) */
    t->added_norm = calloc((size_t)t->nadded + 1, sizeof *t->added_norm);
    t->added_norm_len = calloc((size_t)t->nadded + 1, sizeof *t->added_norm_len);
    if (!t->added_norm || !t->added_norm_len) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    sbuf nb = {0}, nt = {0};
    for (int k = 0; k < t->nadded; k++) {
        added_tok *a = &t->added[k];
        if (!a->normalized) continue;
        nb.n = 0;
        if (sb_put(&nb, a->content, a->len) || (t->norm && norm_apply(t->norm, &nb, &nt))) {
            free(nb.p); free(nt.p);
            return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        }
        t->added_norm[k] = xstrndup(nb.p, nb.n);
        t->added_norm_len[k] = nb.n;
        if (!t->added_norm[k]) { free(nb.p); free(nt.p); return ig_fail(err, IG_ERR_NOMEM, "out of memory"); }
    }
    free(nb.p); free(nt.p);
    for (int k = 0; k < t->nadded; k++) {
        int norm = t->added[k].normalized;
        const char *c = norm ? t->added_norm[k] : t->added[k].content;
        size_t cl = norm ? t->added_norm_len[k] : t->added[k].len;
        if (!cl) continue;
        unsigned char fb = (unsigned char)c[0];
        int16_t **tab = norm ? &t->nfirst_byte[fb] : &t->first_byte[fb];
        int *cnt = norm ? &t->nnfirst[fb] : &t->nfirst[fb];
        int16_t *nt2 = realloc(*tab, (size_t)(*cnt + 1) * sizeof *nt2);
        if (!nt2) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        nt2[(*cnt)++] = (int16_t)k;
        *tab = nt2;
    }
    if (t->nadded > 32767) return ig_fail(err, IG_ERR_UNSUPPORTED, "tokenizer.json: more than 32767 added tokens");
    for (int b = 0; b < 256; b++) {
        sort_ctx c0 = {t, 0}, c1 = {t, 1};
        if (t->nfirst[b] > 1) qsort_r(t->first_byte[b], (size_t)t->nfirst[b], sizeof(int16_t), cmp_len_desc, &c0);
        if (t->nnfirst[b] > 1) qsort_r(t->nfirst_byte[b], (size_t)t->nnfirst[b], sizeof(int16_t), cmp_len_desc, &c1);
    }
    bytelevel_tables(t);
    t->bos = cfg ? config_token(t, cfg, "bos_token") : -1;
    t->eos = cfg ? config_token(t, cfg, "eos_token") : -1;
    t->cache = calloc(CACHE_SLOTS, sizeof *t->cache);
    if (!t->cache) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    for (int k = 0; k < CACHE_LOCKS; k++) pthread_mutex_init(&t->locks[k], NULL);
    return IG_OK;
}

ig_status tok_load_json(const char *json, size_t len, const char *config_json, tok_tokenizer **out, ig_err *err) {
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = (ep && ep >= json && ep <= json + len) ? (size_t)(ep - json) : 0;
        return ig_fail(err, IG_ERR_FORMAT, "tokenizer.json: malformed JSON near byte %zu", at);
    }
    cJSON *cfg = NULL;
    if (config_json) {
        cfg = cJSON_Parse(config_json);
        if (!cfg) { cJSON_Delete(root); return ig_fail(err, IG_ERR_FORMAT, "tokenizer_config.json: malformed JSON"); }
    }
    tok_tokenizer *t = calloc(1, sizeof *t);
    ig_status st = t ? build(t, root, cfg, err) : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (st) {
        tok_free(t); /* build initializes the cache locks last, after every failure point */
        return st;
    }
    *out = t;
    return IG_OK;
}

/* a file of a package directory or of a one-file bundle (pkg_file.h) */
static ig_status read_file(const char *path, char **buf, size_t *len, ig_err *err) { return pkgf_read(path, buf, len, err); }

ig_status tok_load_file(const char *json_path, const char *config_path, tok_tokenizer **out, ig_err *err) {
    *out = NULL;
    char *js = NULL, *cf = NULL;
    size_t jl, cl;
    ig_status st = read_file(json_path, &js, &jl, err);
    if (st) return st;
    if (config_path && (st = read_file(config_path, &cf, &cl, err))) { free(js); return st; }
    st = tok_load_json(js, jl, cf, out, err);
    if (st) {
        char msg[sizeof err->msg];
        if (err) {
            snprintf(msg, sizeof msg, "%.300s: %.700s", json_path, err->msg);
            memcpy(err->msg, msg, sizeof msg);
        }
    }
    free(js);
    free(cf);
    return st;
}

ig_status tok_load_dir(const char *dir, tok_tokenizer **out, ig_err *err) {
    char jp[4096], cp[4096];
    snprintf(jp, sizeof jp, "%s/tokenizer.json", dir);
    snprintf(cp, sizeof cp, "%s/tokenizer_config.json", dir);
    return tok_load_file(jp, pkgf_exists(cp) ? cp : NULL, out, err);
}
