/* kv_pager.h — the KV page pool's bookkeeping: which of the n fixed-size pages are free, and
 * reference counts so that sequences can share pages (prefix caching). The pages' memory lives
 * in the model instance (rt_model); the pager only hands out page ids. Not thread-safe: the
 * scheduler thread owns it. */
#ifndef IG_KV_PAGER_H
#define IG_KV_PAGER_H

#include <stdint.h>
#include "ig_status.h"

typedef struct kv_pager {
    int32_t n_pages;
    int32_t n_free;
    int32_t *free_ids; /* [n_pages] stack of free page ids */
    int32_t *refs;     /* [n_pages] reference counts, 0 = free */
} kv_pager;

/* *out: free with kv_pager_free. */
ig_status kv_pager_new(int32_t n_pages, kv_pager **out, ig_err *err);
void kv_pager_free(kv_pager *p);
/* Takes a free page (refcount 1). IG_ERR_NOMEM with "KV cache full" when none is left. */
ig_status kv_alloc(kv_pager *p, int32_t *page, ig_err *err);
void kv_ref(kv_pager *p, int32_t page);
/* Drops one reference; the page is free again at zero. */
void kv_unref(kv_pager *p, int32_t page);

/* One sequence's page table. */
typedef struct kv_seq {
    int32_t len;       /* tokens whose K/V are in the cache */
    int32_t n_pages;   /* pages held */
    int32_t cap;       /* capacity of pages[] */
    int32_t *pages;    /* [cap] */
} kv_seq;

/* Makes room for `need` tokens in total, allocating pages of page_size as needed. On failure
 * the sequence keeps what it had. */
ig_status kv_seq_reserve(kv_pager *p, kv_seq *s, int32_t need, int32_t page_size, ig_err *err);
/* Appends an existing page (shared, e.g. from the prefix cache) to the sequence, taking a
 * reference on it. */
ig_status kv_seq_push_shared(kv_pager *p, kv_seq *s, int32_t page, ig_err *err);
/* Releases the sequence's pages [0, n) that it still holds (sliding-window attention: keys no
 * later token reads), leaving -1 in their slots; returns how many it released. */
int32_t kv_seq_drop_before(kv_pager *p, kv_seq *s, int32_t n);
/* Returns every page of the sequence to the pool and empties it (keeps the array). */
void kv_seq_release(kv_pager *p, kv_seq *s);
void kv_seq_free(kv_pager *p, kv_seq *s); /* release + free the array */

#endif
