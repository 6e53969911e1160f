/* prefix_cache.h — reuse of KV pages across requests that share a prompt prefix.
 *
 * A full page is keyed by a chained 64-bit hash: the hash of its tokens seeded with the previous
 * page's key, so a key names the whole prefix up to and including the page. An entry holds one
 * reference to its page (kv_ref), so a cached page survives its sequence; a hit is verified
 * against the stored tokens (a hash collision is a miss, never wrong output). Entries are evicted
 * least-recently-used first, and only when no sequence holds the page any more.
 * Owned and used by the scheduler thread only. */
#ifndef IG_PREFIX_CACHE_H
#define IG_PREFIX_CACHE_H

#include <stdint.h>
#include "ig_status.h"
#include "kv_pager.h"

typedef struct prefix_cache prefix_cache;

/* A cache of at most max_entries pages of page_size tokens. *out: free with pc_free. */
ig_status pc_new(int32_t page_size, int32_t max_entries, prefix_cache **out, ig_err *err);
/* Drops every entry's reference (pages go back to the pager when unused) and frees the cache. */
void pc_free(prefix_cache *pc, kv_pager *pager);

/* Key of the page holding tokens[0..page_size) after the prefix keyed `parent` (0 for the first). */
uint64_t pc_key(uint64_t parent, const int32_t *tokens, int32_t page_size);
/* Page cached under key whose tokens equal `tokens`, or -1. A hit becomes most recently used. */
int32_t pc_lookup(prefix_cache *pc, uint64_t key, const int32_t *tokens);
/* Caches `page` under key (takes a reference on it). No-op when the key is present or the cache
 * is full of pages still in use. */
void pc_insert(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens, int32_t page);
/* Evicts the least recently used entry whose page only the cache holds, returning the page to
 * the pool. Returns 1 if a page was freed. */
int pc_evict_one(prefix_cache *pc, kv_pager *pager);
/* Entries held (pages the cache keeps alive). */
int32_t pc_count(const prefix_cache *pc);
/* Pages held by the cache alone (what eviction could free right now). */
int32_t pc_evictable(const prefix_cache *pc, const kv_pager *pager);

#endif
