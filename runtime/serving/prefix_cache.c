/* prefix_cache.c — page-granular prefix cache (see prefix_cache.h). Open-addressing hash table
 * (linear probing, tombstone-free deletion by backward shift) over a fixed array of entries
 * linked in LRU order. */
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

typedef struct pc_entry {
    uint64_t key;
    int32_t page;
    int32_t prev, next; /* LRU list: head = most recent */
} pc_entry;

struct prefix_cache {
    int32_t page_size, cap, n;
    pc_entry *e;        /* [cap] */
    int32_t *tokens;    /* [cap][page_size] */
    int32_t *slots;     /* [nslots] entry index or -1 */
    int32_t nslots;     /* power of two >= 2 * cap */
    int32_t *free_list; /* [cap] unused entry indices */
    int32_t n_free;
    int32_t head, tail;
};

ig_status pc_new(int32_t page_size, int32_t max_entries, prefix_cache **out, ig_err *err) {
    *out = NULL;
    if (page_size < 1 || max_entries < 1) return ig_fail(err, IG_ERR_INVALID, "prefix cache needs pages and entries");
    prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    pc->page_size = page_size;
    pc->cap = max_entries;
    pc->nslots = 16;
    while (pc->nslots < 2 * max_entries) pc->nslots *= 2;
    pc->e = calloc((size_t)max_entries, sizeof *pc->e);
    pc->tokens = malloc(sizeof(int32_t) * (size_t)max_entries * page_size);
    pc->slots = malloc(sizeof(int32_t) * (size_t)pc->nslots);
    pc->free_list = malloc(sizeof(int32_t) * (size_t)max_entries);
    if (!pc->e || !pc->tokens || !pc->slots || !pc->free_list) {
        pc_free(pc, NULL);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory for the prefix cache");
    }
    for (int32_t i = 0; i < pc->nslots; i++) pc->slots[i] = -1;
    for (int32_t i = 0; i < max_entries; i++) pc->free_list[i] = max_entries - 1 - i;
    pc->n_free = max_entries;
    pc->head = pc->tail = -1;
    *out = pc;
    return IG_OK;
}

void pc_free(prefix_cache *pc, kv_pager *pager) {
    if (!pc) return;
    if (pager)
        for (int32_t i = pc->head; i >= 0; i = pc->e[i].next) kv_unref(pager, pc->e[i].page);
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

static void lru_unlink(prefix_cache *pc, int32_t i) {
    pc_entry *x = &pc->e[i];
    if (x->prev >= 0) pc->e[x->prev].next = x->next;
    else pc->head = x->next;
    if (x->next >= 0) pc->e[x->next].prev = x->prev;
    else pc->tail = x->prev;
}

static void lru_push_front(prefix_cache *pc, int32_t i) {
    pc->e[i].prev = -1;
    pc->e[i].next = pc->head;
    if (pc->head >= 0) pc->e[pc->head].prev = i;
    pc->head = i;
    if (pc->tail < 0) pc->tail = i;
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

int32_t pc_lookup(prefix_cache *pc, uint64_t key, const int32_t *tokens) {
    int32_t i = find(pc, key, tokens, NULL);
    if (i < 0) return -1;
    lru_unlink(pc, i);
    lru_push_front(pc, i);
    return pc->e[i].page;
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

int pc_evict_one(prefix_cache *pc, kv_pager *pager) {
    for (int32_t i = pc->tail; i >= 0; i = pc->e[i].prev) {
        if (pager->refs[pc->e[i].page] != 1) continue; /* a sequence still reads it */
        table_remove(pc, i);
        lru_unlink(pc, i);
        kv_unref(pager, pc->e[i].page);
        pc->free_list[pc->n_free++] = i;
        pc->n--;
        return 1;
    }
    return 0;
}

void pc_insert(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens, int32_t page) {
    int32_t slot;
    if (find(pc, key, tokens, &slot) >= 0) return;
    if (pc->n_free == 0) {
        if (!pc_evict_one(pc, pager)) return;
        find(pc, key, tokens, &slot); /* the table changed */
    }
    int32_t i = pc->free_list[--pc->n_free];
    pc->e[i].key = key;
    pc->e[i].page = page;
    memcpy(pc->tokens + (size_t)i * pc->page_size, tokens, sizeof(int32_t) * (size_t)pc->page_size);
    pc->slots[slot] = i;
    lru_push_front(pc, i);
    kv_ref(pager, page);
    pc->n++;
}

int32_t pc_count(const prefix_cache *pc) { return pc->n; }

int32_t pc_evictable(const prefix_cache *pc, const kv_pager *pager) {
    int32_t n = 0;
    for (int32_t i = pc->head; i >= 0; i = pc->e[i].next) n += pager->refs[pc->e[i].page] == 1;
    return n;
}
