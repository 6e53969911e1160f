/* prefix_cache.c — page-granular prefix cache (see prefix_cache.h). Open-addressing hash table
 * (linear probing, tombstone-free deletion by backward shift) over a fixed array of entries, each
 * linked in the LRU list of its tier (0: the pool, 1: the host tier). */
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

typedef struct pc_entry {
    uint64_t key;
    int32_t page;   /* pool page, -1 in the host tier */
    int32_t hpage;  /* host page, -1 in the pool */
    int32_t prev, next; /* LRU list of its tier: head = most recent */
} pc_entry;

struct prefix_cache {
    int32_t page_size, cap, n;
    int32_t pool_cap, n_pool; /* entries holding a pool page: at most pool_cap (max_entries) */
    pc_entry *e;        /* [cap] */
    int32_t *tokens;    /* [cap][page_size] */
    int32_t *slots;     /* [nslots] entry index or -1 */
    int32_t nslots;     /* power of two >= 2 * cap */
    int32_t *free_list; /* [cap] unused entry indices */
    int32_t n_free;
    int32_t head[2], tail[2];
    pc_host_tier tier;  /* n_pages 0: none */
    kv_pager *host;     /* the host tier's page ids, NULL without a tier */
    pc_stats st;
};

ig_status pc_new(int32_t page_size, int32_t max_entries, const pc_host_tier *tier, prefix_cache **out, ig_err *err) {
    *out = NULL;
    if (page_size < 1 || max_entries < 1) return ig_fail(err, IG_ERR_INVALID, "prefix cache needs pages and entries");
    const int32_t nh = tier && tier->copy && tier->n_pages > 0 ? tier->n_pages : 0;
    if (nh > INT32_MAX / 4 - max_entries) return ig_fail(err, IG_ERR_INVALID, "prefix cache of %d + %d pages is too large", max_entries, nh);
    prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    pc->page_size = page_size;
    pc->cap = max_entries + nh;
    pc->pool_cap = max_entries;
    pc->nslots = 16;
    while (pc->nslots < 2 * pc->cap) pc->nslots *= 2;
    pc->e = calloc((size_t)pc->cap, sizeof *pc->e);
    pc->tokens = malloc(sizeof(int32_t) * (size_t)pc->cap * page_size);
    pc->slots = malloc(sizeof(int32_t) * (size_t)pc->nslots);
    pc->free_list = malloc(sizeof(int32_t) * (size_t)pc->cap);
    if (nh) {
        pc->tier = *tier;
        pc->tier.n_pages = nh;
        pc->st.host_pages = nh;
    }
    if (!pc->e || !pc->tokens || !pc->slots || !pc->free_list || (nh && kv_pager_new(nh, &pc->host, err) != IG_OK)) {
        pc_free(pc, NULL);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory for the prefix cache");
    }
    for (int32_t i = 0; i < pc->nslots; i++) pc->slots[i] = -1;
    for (int32_t i = 0; i < pc->cap; i++) pc->free_list[i] = pc->cap - 1 - i;
    pc->n_free = pc->cap;
    pc->head[0] = pc->tail[0] = pc->head[1] = pc->tail[1] = -1;
    *out = pc;
    return IG_OK;
}

void pc_free(prefix_cache *pc, kv_pager *pager) {
    if (!pc) return;
    if (pager)
        for (int32_t i = pc->head[0]; i >= 0; i = pc->e[i].next) kv_unref(pager, pc->e[i].page);
    kv_pager_free(pc->host);
    free(pc->e);
    free(pc->tokens);
    free(pc->slots);
    free(pc->free_list);
    free(pc);
}

uint64_t pc_key(uint64_t parent, const int32_t *tokens, int32_t page_size) {
    /* never 0, so 0 can mean "no parent" */
    return rt_hash64(tokens, sizeof(int32_t) * (size_t)page_size, parent ^ 0x5bd1e9955bd1e995ull) | 1;
}

static int32_t slot_of(const prefix_cache *pc, uint64_t key) {
    return (int32_t)(key & (uint64_t)(pc->nslots - 1));
}

static int tier_of(const pc_entry *x) { return x->page < 0; }

static void lru_unlink(prefix_cache *pc, int32_t i) {
    pc_entry *x = &pc->e[i];
    const int t = tier_of(x);
    if (x->prev >= 0) pc->e[x->prev].next = x->next;
    else pc->head[t] = x->next;
    if (x->next >= 0) pc->e[x->next].prev = x->prev;
    else pc->tail[t] = x->prev;
}

static void lru_push_front(prefix_cache *pc, int32_t i) {
    const int t = tier_of(&pc->e[i]);
    pc->e[i].prev = -1;
    pc->e[i].next = pc->head[t];
    if (pc->head[t] >= 0) pc->e[pc->head[t]].prev = i;
    pc->head[t] = i;
    if (pc->tail[t] < 0) pc->tail[t] = i;
}

static int32_t find(const prefix_cache *pc, uint64_t key, const int32_t *tokens, int32_t *slot_out) {
    for (int32_t s = slot_of(pc, key);; s = (s + 1) & (pc->nslots - 1)) {
        int32_t i = pc->slots[s];
        if (i < 0) {
            if (slot_out) *slot_out = s;
            return -1;
        }
        if (pc->e[i].key == key &&
            !memcmp(pc->tokens + (size_t)i * pc->page_size, tokens, sizeof(int32_t) * (size_t)pc->page_size)) {
            if (slot_out) *slot_out = s;
            return i;
        }
    }
}

/* Removes entry i from the table (backward-shift deletion keeps probe chains intact). */
static void table_remove(prefix_cache *pc, int32_t i) {
    int32_t s = slot_of(pc, pc->e[i].key);
    while (pc->slots[s] != i) s = (s + 1) & (pc->nslots - 1);
    pc->slots[s] = -1;
    for (int32_t j = (s + 1) & (pc->nslots - 1); pc->slots[j] >= 0; j = (j + 1) & (pc->nslots - 1)) {
        int32_t k = pc->slots[j], home = slot_of(pc, pc->e[k].key);
        /* move k back into the hole if the hole lies cyclically in [home, j) */
        int in_range = s <= j ? (home <= s || home > j) : (home <= s && home > j);
        if (in_range) {
            pc->slots[s] = k;
            pc->slots[j] = -1;
            s = j;
        }
    }
}

/* Drops entry i (not linked in a list: the caller unlinked it) and what it holds. */
static void drop_unlinked(prefix_cache *pc, kv_pager *pager, int32_t i) {
    pc_entry *x = &pc->e[i];
    table_remove(pc, i);
    if (x->page >= 0) kv_unref(pager, x->page), pc->n_pool--;
    if (x->hpage >= 0) kv_unref(pc->host, x->hpage), pc->st.host_pages_used--;
    pc->free_list[pc->n_free++] = i;
    pc->n--;
}

/* A free host page, the host tier's oldest entry dropped for it when none is; -1 without a tier. */
static int32_t host_page(prefix_cache *pc) {
    if (!pc->host) return -1;
    if (pc->host->n_free == 0) {
        const int32_t i = pc->tail[1];
        if (i < 0) return -1;
        lru_unlink(pc, i);
        drop_unlinked(pc, NULL, i);
    }
    int32_t hp;
    ig_err err;
    if (kv_alloc(pc->host, &hp, &err) != IG_OK) return -1;
    pc->st.host_pages_used++;
    return hp;
}

int pc_evict_one(prefix_cache *pc, kv_pager *pager) {
    for (int32_t i = pc->tail[0]; i >= 0; i = pc->e[i].prev) {
        pc_entry *x = &pc->e[i];
        if (pager->refs[x->page] != 1) continue; /* a sequence still reads it */
        lru_unlink(pc, i);
        const int32_t hp = host_page(pc);
        if (hp >= 0 && pc->tier.copy(pc->tier.user, 1, x->page, hp) == IG_OK) {
            kv_unref(pager, x->page); /* the copy is ordered before any later write of the page */
            x->page = -1, x->hpage = hp;
            pc->n_pool--;
            pc->st.bytes_to_host += (int64_t)pc->tier.page_bytes;
            lru_push_front(pc, i);
            return 1;
        }
        if (hp >= 0) kv_unref(pc->host, hp), pc->st.host_pages_used--;
        drop_unlinked(pc, pager, i);
        return 1;
    }
    return 0;
}

/* Entry i of the host tier back into a pool page: the page, or -1 (the entry then dropped, or
 * kept in the host tier when no pool page could be had). */
static int32_t bring_back(prefix_cache *pc, kv_pager *pager, int32_t i) {
    lru_unlink(pc, i); /* out of the host tier's order: evictions below must not take it */
    if (pager->n_free == 0 || pc->n_pool >= pc->pool_cap) pc_evict_one(pc, pager);
    if (pc->n_pool >= pc->pool_cap) { /* every cached pool page is still read: stay in the host tier */
        lru_push_front(pc, i);
        return -1;
    }
    int32_t page;
    ig_err err;
    if (kv_alloc(pager, &page, &err) != IG_OK) {
        lru_push_front(pc, i);
        return -1;
    }
    pc_entry *x = &pc->e[i];
    if (pc->tier.copy(pc->tier.user, 0, page, x->hpage) != IG_OK) {
        kv_unref(pager, page);
        drop_unlinked(pc, pager, i);
        return -1;
    }
    kv_unref(pc->host, x->hpage), pc->st.host_pages_used--;
    x->hpage = -1, x->page = page; /* the cache's reference: kv_alloc's */
    pc->n_pool++;
    pc->st.bytes_to_device += (int64_t)pc->tier.page_bytes;
    pc->st.hits_host++;
    lru_push_front(pc, i);
    return page;
}

int32_t pc_lookup(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens) {
    int32_t i = find(pc, key, tokens, NULL);
    if (i < 0) return -1;
    if (pc->e[i].page < 0) return bring_back(pc, pager, i);
    lru_unlink(pc, i);
    lru_push_front(pc, i);
    pc->st.hits_device++;
    return pc->e[i].page;
}

void pc_insert(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens, int32_t page) {
    int32_t slot;
    if (find(pc, key, tokens, &slot) >= 0) return;
    /* the pool's bound: its oldest unread entry goes to the host tier (or is dropped); none: the
     * page stays uncached */
    if (pc->n_pool >= pc->pool_cap) {
        if (!pc_evict_one(pc, pager)) return;
        find(pc, key, tokens, &slot); /* an entry dropped on the way changed the table */
    }
    if (pc->n_free == 0) { /* every entry in use: the oldest host entry goes, else a pool entry */
        int32_t j = pc->tail[1];
        if (j >= 0) {
            lru_unlink(pc, j);
            drop_unlinked(pc, pager, j);
        } else {
            for (j = pc->tail[0]; j >= 0 && pager->refs[pc->e[j].page] != 1; j = pc->e[j].prev) {}
            if (j < 0) return;
            lru_unlink(pc, j);
            drop_unlinked(pc, pager, j);
        }
        find(pc, key, tokens, &slot); /* the table changed */
    }
    int32_t i = pc->free_list[--pc->n_free];
    pc->e[i].key = key;
    pc->e[i].page = page;
    pc->e[i].hpage = -1;
    memcpy(pc->tokens + (size_t)i * pc->page_size, tokens, sizeof(int32_t) * (size_t)pc->page_size);
    pc->slots[slot] = i;
    lru_push_front(pc, i);
    kv_ref(pager, page);
    pc->n++;
    pc->n_pool++;
}

int32_t pc_count(const prefix_cache *pc) { return pc->n; }

int32_t pc_evictable(const prefix_cache *pc, const kv_pager *pager) {
    int32_t n = 0;
    for (int32_t i = pc->head[0]; i >= 0; i = pc->e[i].next) n += pager->refs[pc->e[i].page] == 1;
    return n;
}

void pc_get_stats(const prefix_cache *pc, pc_stats *s) { *s = pc->st; }
