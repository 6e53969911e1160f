/* kv_pager.c — page pool bookkeeping (see kv_pager.h). */
#include "kv_pager.h"

#include <stdlib.h>
#include <string.h>

ig_status kv_pager_new(int32_t n_pages, kv_pager **out, ig_err *err) {
    *out = NULL;
    if (n_pages < 1) return ig_fail(err, IG_ERR_INVALID, "KV pool needs at least one page (got %d)", n_pages);
    kv_pager *p = calloc(1, sizeof *p);
    if (!p) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    p->free_ids = malloc(sizeof(int32_t) * (size_t)n_pages);
    p->refs = calloc((size_t)n_pages, sizeof(int32_t));
    if (!p->free_ids || !p->refs) {
        kv_pager_free(p);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    p->n_pages = p->n_free = n_pages;
    /* lowest ids on top of the stack, so a fresh pool hands out 0, 1, 2, ... */
    for (int32_t i = 0; i < n_pages; i++) p->free_ids[i] = n_pages - 1 - i;
    *out = p;
    return IG_OK;
}

void kv_pager_free(kv_pager *p) {
    if (!p) return;
    free(p->free_ids);
    free(p->refs);
    free(p);
}

ig_status kv_alloc(kv_pager *p, int32_t *page, ig_err *err) {
    if (p->n_free == 0) return ig_fail(err, IG_ERR_NOMEM, "KV cache full: all %d pages are in use", p->n_pages);
    int32_t id = p->free_ids[--p->n_free];
    p->refs[id] = 1;
    *page = id;
    return IG_OK;
}

void kv_ref(kv_pager *p, int32_t page) { p->refs[page]++; }

void kv_unref(kv_pager *p, int32_t page) {
    if (p->refs[page] > 0 && --p->refs[page] == 0) p->free_ids[p->n_free++] = page;
}

ig_status kv_seq_reserve(kv_pager *p, kv_seq *s, int32_t need, int32_t page_size, ig_err *err) {
    int32_t want = (need + page_size - 1) / page_size;
    if (want > s->cap) {
        int32_t cap = s->cap ? s->cap : 8;
        while (cap < want) cap *= 2;
        int32_t *np = realloc(s->pages, sizeof(int32_t) * (size_t)cap);
        if (!np) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        s->pages = np;
        s->cap = cap;
    }
    if (want - s->n_pages > p->n_free)
        return ig_fail(err, IG_ERR_NOMEM, "KV cache full: %d more pages needed, %d of %d free",
                       want - s->n_pages, p->n_free, p->n_pages);
    while (s->n_pages < want) {
        ig_status st = kv_alloc(p, &s->pages[s->n_pages], err);
        if (st) return st;
        s->n_pages++;
    }
    return IG_OK;
}

ig_status kv_seq_push_shared(kv_pager *p, kv_seq *s, int32_t page, ig_err *err) {
    if (s->n_pages == s->cap) {
        int32_t cap = s->cap ? s->cap * 2 : 8;
        int32_t *np = realloc(s->pages, sizeof(int32_t) * (size_t)cap);
        if (!np) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        s->pages = np;
        s->cap = cap;
    }
    kv_ref(p, page);
    s->pages[s->n_pages++] = page;
    return IG_OK;
}

int32_t kv_seq_drop_before(kv_pager *p, kv_seq *s, int32_t n) {
    int32_t k = 0;
    for (int32_t i = 0; i < n && i < s->n_pages; i++)
        if (s->pages[i] >= 0) {
            kv_unref(p, s->pages[i]);
            s->pages[i] = -1;
            k++;
        }
    return k;
}

void kv_seq_release(kv_pager *p, kv_seq *s) {
    for (int32_t i = 0; i < s->n_pages; i++)
        if (s->pages[i] >= 0) kv_unref(p, s->pages[i]);
    s->n_pages = 0;
    s->len = 0;
}

void kv_seq_free(kv_pager *p, kv_seq *s) {
    if (!s) return;
    if (p) kv_seq_release(p, s);
    free(s->pages);
    memset(s, 0, sizeof *s);
}
