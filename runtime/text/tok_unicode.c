/* tok_unicode.c — Unicode lookups (categories, case, white space), UTF-8 coding and the
 * NFC/NFD/NFKC/NFKD normalization forms, over the tables that tools/gen_unicode_tables.py
 * generated into tok_unicode_tables.c. Hangul syllables are (de)composed algorithmically. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

extern const uint32_t tok_ucat_nruns;
extern const uint32_t tok_ucat_starts[];
extern const uint8_t tok_ucat_vals[];
extern const uint32_t tok_ulower_n, tok_ulower_map[];
extern const uint32_t tok_uupper_n, tok_uupper_map[];
extern const uint32_t tok_uccc_n, tok_uccc[];
extern const uint32_t tok_unfd_n, tok_unfd_idx[], tok_unfd_flat[];
extern const uint32_t tok_unfkd_n, tok_unfkd_idx[], tok_unfkd_flat[];
extern const uint32_t tok_ucomp_n, tok_ucomp[];
extern const uint32_t tok_unorm_unsafe_n, tok_unorm_unsafe[];

int tok_ucat(uint32_t cp) {
    if (cp >= 0x110000) return TOK_UC_Cn;
    size_t lo = 0, hi = tok_ucat_nruns; /* last run with start <= cp */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (tok_ucat_starts[mid] <= cp) lo = mid; else hi = mid;
    }
    return tok_ucat_vals[lo];
}

/* Binary search in sorted (key, value) pairs; returns index or -1. */
static long pair_find(const uint32_t *pairs, size_t n, uint32_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pairs[2 * mid] < key) lo = mid + 1; else hi = mid;
    }
    return (lo < n && pairs[2 * lo] == key) ? (long)lo : -1;
}

uint32_t tok_ulower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    long i = pair_find(tok_ulower_map, tok_ulower_n, cp);
    return i < 0 ? cp : tok_ulower_map[2 * i + 1];
}

uint32_t tok_uupper(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    long i = pair_find(tok_uupper_map, tok_uupper_n, cp);
    return i < 0 ? cp : tok_uupper_map[2 * i + 1];
}

int tok_uspace(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Decodes with the "maximal subpart" policy of Unicode §3.9 / WHATWG, which is also what Rust's
 * String::from_utf8_lossy does: each maximal prefix of a valid sequence becomes one U+FFFD. */
size_t tok_utf8_decode(const char *str, size_t len, uint32_t *cps, uint32_t *byte_off) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, n = 0;
    while (i < len) {
        unsigned c = s[i];
        if (byte_off) byte_off[n] = (uint32_t)i;
        if (c < 0x80) { cps[n++] = c; i++; continue; }
        int need;
        uint32_t cp;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2; cp = c & 0x0F;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3; cp = c & 0x07;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else { cps[n++] = 0xFFFD; i++; continue; }
        size_t j = i + 1;
        int ok = 1;
        for (int k = 0; k < need; k++, j++) {
            if (j >= len || s[j] < lo || s[j] > hi) { ok = 0; break; }
            cp = (cp << 6) | (s[j] & 0x3F);
            lo = 0x80; hi = 0xBF;
        }
        if (ok) { cps[n++] = cp; i = j; }
        else { cps[n++] = 0xFFFD; i = j; } /* j stops at the first byte that broke the sequence */
    }
    if (byte_off) byte_off[n] = (uint32_t)len;
    return n;
}

int tok_utf8_put(uint32_t cp, char *o) {
    unsigned char *out = (unsigned char *)o;
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { out[0] = 0xC0 | (cp >> 6); out[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) {
        out[0] = 0xE0 | (cp >> 12); out[1] = 0x80 | ((cp >> 6) & 0x3F); out[2] = 0x80 | (cp & 0x3F);
        return 3;
    }
    out[0] = 0xF0 | (cp >> 18); out[1] = 0x80 | ((cp >> 12) & 0x3F);
    out[2] = 0x80 | ((cp >> 6) & 0x3F); out[3] = 0x80 | (cp & 0x3F);
    return 4;
}

int tok_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) { i++; continue; }
        unsigned c = s[i];
        int need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return 0;
        for (int k = 1; k <= need; k++) {
            if (i + k >= len || s[i + k] < lo || s[i + k] > hi) return 0;
            lo = 0x80; hi = 0xBF;
        }
        i += need + 1;
    }
    return 1;
}

/* ---- normalization ---------------------------------------------------------------------- */

enum { H_SBASE = 0xAC00, H_LBASE = 0x1100, H_VBASE = 0x1161, H_TBASE = 0x11A7, H_LCOUNT = 19,
       H_VCOUNT = 21, H_TCOUNT = 28, H_NCOUNT = 588, H_SCOUNT = 11172 };

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = tok_uccc_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_uccc[3 * mid + 1] < cp) lo = mid + 1; else hi = mid;
    }
    return (lo < tok_uccc_n && tok_uccc[3 * lo] <= cp) ? (int)tok_uccc[3 * lo + 2] : 0;
}

static int norm_unsafe(uint32_t cp) {
    if (cp < 0xA0) return 0;
    size_t lo = 0, hi = tok_unorm_unsafe_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_unorm_unsafe[2 * mid + 1] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < tok_unorm_unsafe_n && tok_unorm_unsafe[2 * lo] <= cp;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= H_LBASE && a < H_LBASE + H_LCOUNT && b >= H_VBASE && b < H_VBASE + H_VCOUNT)
        return H_SBASE + ((a - H_LBASE) * H_VCOUNT + (b - H_VBASE)) * H_TCOUNT;
    if (a >= H_SBASE && a < H_SBASE + H_SCOUNT && (a - H_SBASE) % H_TCOUNT == 0 && b > H_TBASE &&
        b < H_TBASE + H_TCOUNT)
        return a + (b - H_TBASE);
    size_t lo = 0, hi = tok_ucomp_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *e = tok_ucomp + 3 * mid;
        if (e[0] < a || (e[0] == a && e[1] < b)) lo = mid + 1; else hi = mid;
    }
    if (lo < tok_ucomp_n && tok_ucomp[3 * lo] == a && tok_ucomp[3 * lo + 1] == b)
        return tok_ucomp[3 * lo + 2];
    return 0;
}

ig_status tok_unorm(const uint32_t *cps, size_t n, int form, uint32_t **out, size_t *n_out) {
    int compat = form >= 2, compose = form == 0 || form == 2;
    size_t i;
    for (i = 0; i < n; i++)
        if (norm_unsafe(cps[i]) || (cps[i] >= H_SBASE && cps[i] < H_SBASE + H_SCOUNT && !compose)) break;
    if (i == n) { /* quick check: nothing can change */
        uint32_t *o = malloc((n ? n : 1) * sizeof *o);
        if (!o) return IG_ERR_NOMEM;
        memcpy(o, cps, n * sizeof *o);
        *out = o; *n_out = n;
        return IG_OK;
    }
    /* decompose; the longest full decomposition is 18 code points */
    size_t cap = n * 4 + 32, m = 0;
    uint32_t *d = malloc(cap * sizeof *d);
    if (!d) return IG_ERR_NOMEM;
    for (i = 0; i < n; i++) {
        uint32_t c = cps[i];
        if (m + 20 > cap) {
            cap = cap * 2;
            uint32_t *nd = realloc(d, cap * sizeof *d);
            if (!nd) { free(d); return IG_ERR_NOMEM; }
            d = nd;
        }
        if (c >= H_SBASE && c < H_SBASE + H_SCOUNT) {
            uint32_t s = c - H_SBASE;
            d[m++] = H_LBASE + s / H_NCOUNT;
            d[m++] = H_VBASE + (s % H_NCOUNT) / H_TCOUNT;
            if (s % H_TCOUNT) d[m++] = H_TBASE + s % H_TCOUNT;
            continue;
        }
        if (!norm_unsafe(c)) { d[m++] = c; continue; }
        long k = -1;
        if (compat) {
            k = pair_find(tok_unfkd_idx, tok_unfkd_n, c);
            if (k >= 0) {
                uint32_t off = tok_unfkd_idx[2 * k + 1] & 0xFFFFFF, len = tok_unfkd_idx[2 * k + 1] >> 24;
                for (uint32_t j = 0; j < len; j++) d[m++] = tok_unfkd_flat[off + j];
                continue;
            }
        }
        k = pair_find(tok_unfd_idx, tok_unfd_n, c);
        if (k >= 0) {
            uint32_t off = tok_unfd_idx[2 * k + 1] & 0xFFFFFF, len = tok_unfd_idx[2 * k + 1] >> 24;
            for (uint32_t j = 0; j < len; j++) d[m++] = tok_unfd_flat[off + j];
        } else {
            d[m++] = c;
        }
    }
    /* canonical ordering: stable insertion sort of each run of non-starters by ccc */
    for (i = 1; i < m; i++) {
        int ci = ccc_of(d[i]);
        if (!ci) continue;
        size_t j = i;
        uint32_t c = d[i];
        while (j > 0) {
            int cj = ccc_of(d[j - 1]);
            if (cj <= ci) break;
            d[j] = d[j - 1];
            j--;
        }
        d[j] = c;
    }
    if (compose && m) {
        size_t starter = 0, w = 1;
        int have_starter = ccc_of(d[0]) == 0;
        int last_ccc = have_starter ? 0 : 256;
        for (i = 1; i < m; i++) {
            uint32_t c = d[i];
            int cc = ccc_of(c);
            if (have_starter && (last_ccc < cc || (last_ccc == 0 && w == starter + 1))) {
                uint32_t p = compose_pair(d[starter], c);
                if (p) { d[starter] = p; continue; }
            }
            if (cc == 0) { starter = w; have_starter = 1; last_ccc = 0; }
            else last_ccc = cc;
            d[w++] = c;
        }
        m = w;
    }
    *out = d; *n_out = m;
    return IG_OK;
}
