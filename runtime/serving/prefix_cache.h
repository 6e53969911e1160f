/* prefix_cache.h — reuse of KV pages across requests that share a prompt prefix.
 *
 * A full page is keyed by a chained 64-bit hash: the hash of its tokens seeded with the previous
 * page's key, so a key names the whole prefix up to and including the page. An entry holds one
 * reference to its page (kv_ref), so a cached page survives its sequence; a hit is verified
 * against the stored tokens (a hash collision is a miss, never wrong output). Entries are evicted
 * least-recently-used first, and only when no sequence holds the page any more.
 *
 * Host tier (optional, pc_host_tier): an entry evicted from the pool is not dropped but moved to a
 * host page (the tier's copy callback: on a GPU an asynchronous device-to-host copy, ordered with
 * the forward steps), and a hit on it takes a free pool page and copies it back; the hit is
 * verified by the same tokens. The host tier has its own LRU order and drops its oldest entry when
 * full. Any failure (no pool page free, no host memory, a copy refused) drops the entry: the
 * sequence recomputes those tokens, as without a cache.
 * Owned and used by the scheduler thread only. */
#ifndef IG_PREFIX_CACHE_H
#define IG_PREFIX_CACHE_H

#include <stdint.h>
#include "ig_status.h"
#include "kv_pager.h"

typedef struct prefix_cache prefix_cache;

/* The host tier: n_pages pages of page_bytes (0: no tier); copy moves pool page `page` to host
 * page host_page (to_host 1) or back (0), IG_OK or a failure (the entry is then dropped). */
typedef struct pc_host_tier {
    int32_t n_pages;
    uint64_t page_bytes;
    void *user;
    ig_status (*copy)(void *user, int to_host, int32_t page, int32_t host_page);
} pc_host_tier;

/* Counters since pc_new. */
typedef struct pc_stats {
    int64_t hits_device, hits_host;      /* pages found in the pool / brought back from the host tier */
    int64_t bytes_to_host, bytes_to_device; /* bytes the host tier moved */
    int32_t host_pages, host_pages_used; /* the host tier's size and its pages holding entries */
} pc_stats;

/* A cache of at most max_entries pool pages of page_size tokens, plus the host tier's pages (tier
 * may be NULL: none; borrowed, its user must outlive the cache). *out: free with pc_free. */
ig_status pc_new(int32_t page_size, int32_t max_entries, const pc_host_tier *tier, prefix_cache **out, ig_err *err);
/* Drops every entry's reference (pages go back to the pager when unused) and frees the cache. */
void pc_free(prefix_cache *pc, kv_pager *pager);

/* Key of the page holding tokens[0..page_size) after the prefix keyed `parent` (0 for the first). */
uint64_t pc_key(uint64_t parent, const int32_t *tokens, int32_t page_size);
/* Pool page cached under key whose tokens equal `tokens`, or -1. A hit becomes most recently used;
 * a hit in the host tier is copied into a free pool page first (evicting another entry to the
 * host tier when none is free), or is a miss when that fails. */
int32_t pc_lookup(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens);
/* Caches `page` under key (takes a reference on it). No-op when the key is present or the cache
 * is full of pages still in use. */
void pc_insert(prefix_cache *pc, kv_pager *pager, uint64_t key, const int32_t *tokens, int32_t page);
/* Evicts the least recently used pool entry whose page only the cache holds, returning the page to
 * the pool (its entry goes to the host tier when there is one). Returns 1 if a page was freed. */
int pc_evict_one(prefix_cache *pc, kv_pager *pager);
/* Entries held, both tiers. */
int32_t pc_count(const prefix_cache *pc);
/* Pool pages held by the cache alone (what eviction could free right now). */
int32_t pc_evictable(const prefix_cache *pc, const kv_pager *pager);
void pc_get_stats(const prefix_cache *pc, pc_stats *s);

#endif
