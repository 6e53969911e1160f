/* scheduler.h — the engine's scheduler thread and the state it shares with the public API
 * (engine.c). Internal to libignis.
 *
 * One scheduler thread owns the model instance, the KV pager, the prefix cache and every
 * sequence's scheduling state. Each step it
 *   1. ends the requests asked to stop (sched_reap_stopped),
 *   2. plans the step under the token budget: running sequences' decode tokens first, then their
 *      prefill chunks, then waiting requests admitted while KV pages and max_seqs allow
 *      (chunked prefill: a prompt longer than the budget is fed over several steps);
 *      when pages run out it evicts prefix-cache-only pages, then preempts the newest running
 *      sequence (recompute: back to the head of the queue with no KV);
 *   3. runs the flattened batch through the model without the lock, samples each sequence whose
 *      chunk reached its last known token (in parallel), and
 *   4. under the lock, appends the tokens, checks end conditions and queues one output element
 *      per sampled sequence.
 *
 * Locking: core.mu guards request state, queues, lists, the pager and the stats; the scheduler
 * drops it only for the forward pass and the sampling, which touch scheduler-only state.
 *
 * Lifetimes: the core (and the ig_engine shell inside it) is reference counted: one reference
 * for the open engine, one per request handle not yet released. ig_engine_close frees the
 * model, package and buffers but the shell and core live on until the last handle goes, so
 * handles and calls racing close touch live memory (see ignis.h). */
#ifndef IG_SCHEDULER_H
#define IG_SCHEDULER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ignis.h"
#include "kv_pager.h"
#include "prefix_cache.h"
#include "rt_package.h"
#include "sampler.h"
#include "stop.h"
#include "tokenizer.h"
#include "grammar.h"

/* One queued output in one allocation: the queue link, the public ig_output, and behind them its
 * arrays (tokens, logprobs, top) and OUT_TEXT_INLINE bytes for its text, so a decode step costs
 * one malloc per sequence; text that outgrows the inline bytes moves to its own buffer.
 * ig_output_free finds the block from the ig_output (every ig_output is made by sched_new_output). */
#define OUT_TEXT_INLINE 64
typedef struct out_node {
    struct out_node *next;
    ig_output o;
    char *text_inline; /* o.text points here while the text fits */
    size_t text_cap;   /* bytes o.text can hold, NUL included */
} out_node;
#define OUT_NODE(op) ((out_node *)((char *)(op) - offsetof(out_node, o)))

typedef struct core core;

/* A request handle's magic while the handle is the user's; a released one (on the core's shelf
 * or still held by the scheduler) is detected by the API instead of used. */
#define REQ_MAGIC_LIVE 0x1971a11eu
#define REQ_MAGIC_DEAD 0xdeadbeefu
/* Released request shells kept per core before one is reused (FIFO), so a stale handle is
 * recognized for at least this many later releases; freed with the core. */
#define REQ_SHELF_MIN 256

struct ig_request {
    core *c;                    /* set once per shell, kept across reuse (same core) */
    uint32_t magic;             /* REQ_MAGIC_LIVE until the user's release */
    int released;               /* ig_request_release was called (c->mu) */
    int refs;                   /* user handle + engine + readers/syncs blocked in it */
    pthread_cond_t cv;          /* readers wait here (on c->mu); CLOCK_MONOTONIC */
    /* generation config (arrays copied) */
    ig_gen_config g;
    int32_t *stop_ids;
    char **stop_strings;
    int32_t *bias_ids;
    float *bias_vals;
    /* tokens: prompt then generated */
    int32_t *tokens;
    int32_t n_prompt, n_tokens, cap;
    int32_t n_gen;
    /* visible state */
    ig_req_status status;
    ig_finish_reason finish;
    int ended;                  /* final element queued */
    int stop_requested;
    out_node *head, *tail;
    out_node *final;            /* the end element, allocated at start (NULL once queued) */
    void (*notify)(void *);     /* ig_request_set_notify: called (c->mu held) on each push */
    void *notify_user;
    /* scheduler-only */
    kv_seq kv;
    int32_t n_kv;               /* tokens whose K/V are in the cache */
    int32_t n_keyed;            /* leading full pages offered to the prefix cache */
    uint64_t last_key;          /* prefix-cache key of page n_keyed - 1 (0: none) */
    smp_state *smp;
    tok_stream *ts;
    stop_matcher *sm;
    gr_grammar *gg;             /* constraint (NULL: none) and its matcher */
    gr_matcher *gm;
    uint32_t *gmask;            /* [vocab / 32 + 1] the step's allowed tokens */
    int gmask_ready;            /* gmask (and gmask_st) computed beside this step's forward */
    ig_status gmask_st;         /* its status (the message in the step slot's b_errs) */
    struct ig_request *next;    /* in the waiting or running list */
    int32_t step_take;          /* tokens fed in the current step */
    int32_t step_row;           /* logits row in the current step, or -1 */
};

struct core {
    pthread_mutex_t mu;
    pthread_cond_t work;        /* the scheduler waits here */
    pthread_cond_t calls_done;  /* ig_engine_close waits here for n_calls to reach 0 */
    int refs;                   /* engine + live request handles */
    int shutdown;               /* the scheduler must end every request and exit */
    int closing;                /* ig_engine_close has begun: new engine calls fail (CLOSED) */
    int n_calls;                /* engine calls inside the engine (start, start_text) */
    /* lists (FIFO) */
    struct ig_request *wait_head, *wait_tail;
    struct ig_request *run_head; /* admission order, newest last */
    int32_t n_waiting, n_running;
    ig_engine_stats stats;
    struct ig_engine *engine;   /* the shell, freed with the core */
    struct ig_request *shelf_head, *shelf_tail; /* released request shells (FIFO, REQ_SHELF_MIN) */
    int32_t n_shelf;
};

struct ig_engine {
    core *c;
    ig_engine_config cfg;
    int32_t vocab, max_context; /* model facts, valid after close too */
    int has_tokenizer;
    int32_t n_targets;         /* the package's targets (1 unless fat) */
    char target[704];          /* the target loaded; a fat package's: which and why (rt_package.choice) */
    rt_package *pkg;
    rt_model *model;
    kv_pager *pager;
    prefix_cache *pc;           /* NULL when disabled */
    tok_tokenizer *tok;
    gr_vocab *gvocab;           /* token bytes for constraints, made by the first constrained request */
    pthread_mutex_t gvocab_mu;
    pthread_t thread;
    int thread_started;
    /* step buffers, sized once (no malloc on the step path) */
    int32_t *b_ids, *b_pos, *b_seq, *b_rows, *b_pages;
    float *b_logits;
    struct ig_request **b_reqs;
    smp_result *b_res;          /* [max_seqs] sampling results of the step */
    ig_fwd_sample *b_sp;        /* [max_seqs] device sampling per logits row (device_sampling) */
    int32_t *b_dev_tok;         /* [max_seqs] tokens the device chose */
    int device_sampling;        /* the model samples eligible rows (config and IG_MODEL_CAP_SAMPLE) */
    int device_masks;           /* ... constrained ones too, under their masks (IG_MODEL_CAP_MASK, no --tp) */
    const uint32_t **b_masks;   /* [max_seqs] per logits row: the request's mask when the device applies it */
    int32_t b_n_seqs;           /* sequences of the step in flight (sched_masks_ready reads b_reqs) */
    ig_status *b_sampled;       /* [max_seqs] */
    ig_err *b_errs;             /* [max_seqs] */
    int32_t max_pages_per_seq;
    struct eng_scorer *scorer;  /* ig_engine_logits' model instance (engine_logits.c) */
    int masks_overlap;          /* constrained rows' masks on a helper during the forward (sched_masks_overlap) */
    struct sched_masks *masks;  /* that helper, started by the scheduler on first use, freed when it exits */
};

/* ---- provided by scheduler.c */

/* The scheduler thread's body; arg is the ig_engine (borrowed). Returns once core.shutdown is
 * set, with every request it held ended. */
void *sched_main(void *arg);
/* Ends the requests asked to stop, wherever they are, and all of them once core.shutdown is set
 * (c->mu held). */
void sched_reap_stopped(struct ig_engine *e);
/* An output element for n_tokens tokens of r (arrays uninitialized, text empty, status r's), or
 * NULL when out of memory. Free with ig_output_free. */
ig_output *sched_new_output(const struct ig_request *r, int32_t n_tokens);

/* ---- provided by sched_masks.c: guided decoding's masks computed while the model runs the step */

typedef struct sched_masks sched_masks;
/* Whether e's constrained masks overlap its forward: device packages (the forward waits on the
 * GPU), and CPU packages whose threads leave a CPU of the process's affinity free. */
int sched_masks_overlap(const struct ig_engine *e);
/* Hands b's constrained rows (a matcher and a logits row) to the helper, started on first use
 * (scheduler thread, lock not needed: the state it touches is the scheduler's); each gets
 * gmask_ready once its mask is in. Returns how many were handed over (0: none, or no overlap;
 * sample_one then computes them). */
int32_t sched_masks_begin(struct ig_engine *e, const ig_fwd_batch *b);
/* Waits until the masks handed over are written (returns at once when none were). */
void sched_masks_end(struct ig_engine *e);
/* ig_fwd_batch.masks_wait of a step with device-masked rows (user: the engine): waits for the
 * helper, computes any mask it was not handed, and makes each row's words what the device reads
 * (no bits past the constraint's vocabulary; EOS and stop ids banned before min_new_tokens). */
void sched_masks_ready(void *user);
/* Stops and joins the helper. Accepts NULL. */
void sched_masks_free(sched_masks *m);

/* ---- provided by engine_logits.c (ig_engine_logits beside the scheduler) */

/* The scorer of e: a lock and, made on first use, a one-sequence model instance. */
ig_status eng_scorer_new(struct ig_engine *e, ig_err *err);
void eng_scorer_free(struct eng_scorer *s); /* accepts NULL */
/* Teacher-forced logits of ids into out[n_ids][vocab] (see ig_engine_logits). */
ig_status eng_scorer_run(struct ig_engine *e, const int32_t *ids, int32_t n_ids, float *out, ig_err *err);

/* ---- provided by engine.c */

/* Drops one reference to r (c->mu held): frees r at zero and then drops r's reference to the
 * core; *free_core says the caller must core_release the core after unlocking. */
void eng_request_unref_locked(struct ig_request *r, int *free_core);

#endif
