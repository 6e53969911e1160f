/* engine.c — the serving engine behind include/ignis.h.
 *
 * One scheduler thread owns the model instance, the KV pager and every sequence. A step is built
 * from the running sequences (decode tokens first, then prefill chunks, under a token budget),
 * then waiting requests are admitted while KV pages and the sequence limit allow; the flattened
 * batch goes through the model ABI in one forward call; each sequence whose chunk reached its
 * last known token is sampled, checked for its end conditions and gets one queue element.
 *
 * A sequence is "tokens[0..n_tokens) known, KV computed for [0..n_kv)": prefill and decode are the
 * same operation (feed tokens[n_kv..n_tokens)). Preemption (no page left for a running sequence)
 * first evicts pages only the prefix cache holds, then releases the newest sequence's pages and
 * sends it back to the head of the waiting queue with n_kv = 0: it is recomputed from prompt +
 * generated tokens later (its prefix mostly from the cache), never failed.
 *
 * Prefix cache (prefix_cache.h): every full page a sequence completes is offered to the cache
 * under a chained hash of the tokens up to it; at admission a sequence takes the cached pages
 * that prefix its tokens (shared, read-only: its own writes start on a page of its own).
 *
 * Locking: one mutex (core->mu) guards request state, queues and lists; the scheduler drops it
 * during the forward pass. Each request has a condition variable for its readers; the scheduler
 * has one for new work. The core outlives ig_engine_close while request handles remain, so a
 * handle can always be read and released safely. An idle engine sleeps on its condition
 * variable: no polling. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <stddef.h>

#include "ignis.h"
#include "kv_pager.h"
#include "prefix_cache.h"
#include "rt_package.h"
#include "sampler.h"
#include "stop.h"
#include "tokenizer.h"

/* One queued output in one allocation: the queue link, the public ig_output, and behind them its
 * arrays (tokens, logprobs, top) and OUT_TEXT_INLINE bytes for its text, so a decode step costs
 * one malloc per sequence; text that outgrows the inline bytes moves to its own buffer.
 * ig_output_free finds the block from the ig_output (every ig_output is made by new_output). */
#define OUT_TEXT_INLINE 64
typedef struct out_node {
    struct out_node *next;
    ig_output o;
    char *text_inline; /* o.text points here while the text fits */
    size_t text_cap;   /* bytes o.text can hold, NUL included */
} out_node;
#define OUT_NODE(op) ((out_node *)((char *)(op) - offsetof(out_node, o)))

typedef struct core core;

struct ig_request {
    core *c;
    int refs;                   /* user handle + engine */
    pthread_cond_t cv;          /* readers wait here (on c->mu) */
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
    /* scheduler-only */
    kv_seq kv;
    int32_t n_kv;               /* tokens whose K/V are in the cache */
    int32_t n_keyed;            /* leading full pages offered to the prefix cache */
    uint64_t last_key;          /* prefix-cache key of page n_keyed - 1 (0: none) */
    smp_state *smp;
    tok_stream *ts;
    stop_matcher *sm;
    struct ig_request *next;    /* in the waiting or running list */
    int32_t step_take;          /* tokens fed in the current step */
    int32_t step_row;           /* logits row in the current step, or -1 */
};

struct core {
    pthread_mutex_t mu;
    pthread_cond_t work;        /* the scheduler waits here */
    int refs;                   /* engine + live requests */
    int shutdown;
    /* lists (FIFO) */
    ig_request *wait_head, *wait_tail;
    ig_request *run_head;       /* admission order, newest last */
    int32_t n_waiting, n_running;
    ig_engine_stats stats;
};

struct ig_engine {
    core *c;
    ig_engine_config cfg;
    rt_package *pkg;
    rt_model *model;
    kv_pager *pager;
    prefix_cache *pc;           /* NULL when disabled */
    tok_tokenizer *tok;
    pthread_t thread;
    int thread_started;
    /* step buffers, sized once (no malloc on the step path) */
    int32_t *b_ids, *b_pos, *b_seq, *b_rows, *b_pages;
    float *b_logits;
    ig_request **b_reqs;
    smp_result *b_res;          /* [max_seqs] sampling results of the step */
    ig_fwd_sample *b_sp;        /* [max_seqs] device sampling per logits row (device_sampling) */
    int32_t *b_dev_tok;         /* [max_seqs] tokens the device chose */
    int device_sampling;        /* the model samples eligible rows (config and IG_MODEL_CAP_SAMPLE) */
    ig_status *b_sampled;       /* [max_seqs] */
    ig_err *b_errs;             /* [max_seqs] */
    int32_t max_pages_per_seq;
};

/* ---------------------------------------------------------------- helpers */

void ig_engine_config_default(ig_engine_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->max_seqs = 32;
    cfg->max_tokens_per_step = 256;
    cfg->max_waiting = 1024;
    cfg->verify_hashes = 1;
    cfg->prefix_cache = 1;
    cfg->device_sampling = 1;
}

void ig_gen_config_default(ig_gen_config *g) {
    memset(g, 0, sizeof *g);
    g->max_new_tokens = 128;
    g->top_p = 1.0f;
    g->repetition_penalty = 1.0f;
}

void ig_output_free(ig_output *o) {
    if (!o) return;
    out_node *n = OUT_NODE(o);
    if (o->text != n->text_inline) free(o->text);
    free(n);
}

static void core_unref_locked(core *c, int *free_it) {
    *free_it = --c->refs == 0;
}

static void core_free(core *c) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work);
    free(c);
}

static void request_free(ig_request *r) {
    for (out_node *n = r->head; n;) {
        out_node *nx = n->next;
        ig_output_free(&n->o);
        n = nx;
    }
    for (int32_t i = 0; i < r->g.n_stop_strings; i++) free(r->stop_strings ? r->stop_strings[i] : NULL);
    free(r->stop_strings);
    free(r->stop_ids);
    free(r->bias_ids);
    free(r->bias_vals);
    free(r->tokens);
    smp_free(r->smp);
    tok_stream_free(r->ts);
    stop_free(r->sm);
    free(r->kv.pages);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* Drops one reference (c->mu held). Frees the request, and the core if it was the last user. */
static void request_unref_locked(ig_request *r, int *free_core) {
    *free_core = 0;
    if (--r->refs > 0) return;
    core *c = r->c;
    request_free(r);
    core_unref_locked(c, free_core);
}

/* Queues an element for the readers (c->mu held). Takes ownership of o. */
static void push_output(ig_request *r, ig_output *o) {
    out_node *n = OUT_NODE(o);
    n->next = NULL;
    if (r->tail)
        r->tail->next = n;
    else
        r->head = n;
    r->tail = n;
    pthread_cond_broadcast(&r->cv);
}

/* An output for n_tokens tokens (arrays uninitialized, text empty), or NULL when out of memory. */
static ig_output *new_output(ig_request *r, int32_t n_tokens) {
    const size_t n_top = (size_t)r->g.top_logprobs, nt = n_tokens > 0 ? (size_t)n_tokens : 0;
    /* ig_logprob first: its alignment covers the int32 and float arrays after it */
    const size_t b_top = sizeof(ig_logprob) * nt * n_top, b_tok = sizeof(int32_t) * nt, b_lp = sizeof(float) * nt;
    out_node *n = malloc(sizeof *n + b_top + b_tok + b_lp + OUT_TEXT_INLINE);
    if (!n) return NULL;
    char *p = (char *)(n + 1);
    memset(&n->o, 0, sizeof n->o);
    n->next = NULL;
    ig_output *o = &n->o;
    o->status = r->status;
    o->finish = r->finish;
    o->n_top = (int32_t)n_top;
    o->top = n_top && nt ? (ig_logprob *)p : NULL;
    o->tokens = nt ? (int32_t *)(p + b_top) : NULL;
    o->logprobs = nt ? (float *)(p + b_top + b_tok) : NULL;
    n->text_inline = o->text = p + b_top + b_tok + b_lp;
    n->text_cap = OUT_TEXT_INLINE;
    o->text[0] = 0;
    return o;
}

/* Appends text; on allocation failure the text is kept as it was (the piece is dropped). */
static void output_append_text(ig_output *o, const char *s, size_t len) {
    if (!len) return;
    out_node *n = OUT_NODE(o);
    if (o->text_len + len + 1 > n->text_cap) {
        size_t cap = 2 * n->text_cap > o->text_len + len + 1 ? 2 * n->text_cap : o->text_len + len + 1;
        char *t = o->text == n->text_inline ? malloc(cap) : realloc(o->text, cap);
        if (!t) return;
        if (o->text == n->text_inline) memcpy(t, o->text, o->text_len + 1);
        o->text = t;
        n->text_cap = cap;
    }
    memcpy(o->text + o->text_len, s, len);
    o->text_len += len;
    o->text[o->text_len] = 0;
}

/* Ends a request (c->mu held): frees its pages and per-sequence state, queues the final element
 * (with extra text, if any), and drops the engine's reference. The request must not be in any
 * list. */
static void finish_request(ig_engine *e, ig_request *r, ig_req_status st, ig_finish_reason why,
                           const char *errmsg, ig_output *last) {
    if (r->ended) return;
    kv_seq_release(e->pager, &r->kv);
    r->n_kv = 0;
    r->status = st;
    r->finish = why;
    if (!last) last = new_output(r, 0);
    if (last) {
        last->status = st;
        last->finish = why;
        if (errmsg) snprintf(last->error, sizeof last->error, "%s", errmsg);
        push_output(r, last);
    }
    r->ended = 1;
    pthread_cond_broadcast(&r->cv);
    int free_core;
    request_unref_locked(r, &free_core); /* the engine's reference; the core is held by the engine */
}

static void list_remove(ig_request **head, ig_request *r) {
    for (ig_request **p = head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
}

/* ---------------------------------------------------------------- requests */

static ig_status copy_config(ig_request *r, const ig_gen_config *g, ig_err *err) {
    r->g = *g;
    if (g->n_stop_ids < 0 || g->n_stop_strings < 0 || g->n_logit_bias < 0)
        return ig_fail(err, IG_ERR_INVALID, "negative array length in the generation config");
    if (g->n_stop_ids) {
        if (!g->stop_ids) return ig_fail(err, IG_ERR_INVALID, "stop_ids is NULL but n_stop_ids is %d", g->n_stop_ids);
        r->stop_ids = malloc(sizeof(int32_t) * g->n_stop_ids);
        if (!r->stop_ids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        memcpy(r->stop_ids, g->stop_ids, sizeof(int32_t) * g->n_stop_ids);
    }
    if (g->n_logit_bias) {
        if (!g->logit_bias_ids || !g->logit_bias_values)
            return ig_fail(err, IG_ERR_INVALID, "logit bias arrays are NULL but n_logit_bias is %d", g->n_logit_bias);
        r->bias_ids = malloc(sizeof(int32_t) * g->n_logit_bias);
        r->bias_vals = malloc(sizeof(float) * g->n_logit_bias);
        if (!r->bias_ids || !r->bias_vals) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        memcpy(r->bias_ids, g->logit_bias_ids, sizeof(int32_t) * g->n_logit_bias);
        memcpy(r->bias_vals, g->logit_bias_values, sizeof(float) * g->n_logit_bias);
    }
    if (g->n_stop_strings) {
        if (!g->stop_strings) return ig_fail(err, IG_ERR_INVALID, "stop_strings is NULL but n_stop_strings is %d", g->n_stop_strings);
        r->stop_strings = calloc(g->n_stop_strings, sizeof(char *));
        if (!r->stop_strings) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        for (int32_t i = 0; i < g->n_stop_strings; i++) {
            if (!g->stop_strings[i]) return ig_fail(err, IG_ERR_INVALID, "stop string %d is NULL", i);
            r->stop_strings[i] = strdup(g->stop_strings[i]);
        }
    }
    r->g.stop_ids = r->stop_ids;
    r->g.stop_strings = (const char *const *)r->stop_strings;
    r->g.logit_bias_ids = r->bias_ids;
    r->g.logit_bias_values = r->bias_vals;
    return IG_OK;
}

ig_status ig_request_start(ig_engine *e, const int32_t *ids, int32_t n_ids, const ig_gen_config *gin,
                           ig_request **out, ig_err *err) {
    *out = NULL;
    const ig_model_desc *d = e->pkg->desc;
    ig_gen_config gdef;
    if (!gin) {
        ig_gen_config_default(&gdef);
        gin = &gdef;
    }
    if (n_ids < 1 || !ids) return ig_fail(err, IG_ERR_INVALID, "the prompt is empty");
    for (int32_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= d->vocab)
            return ig_fail(err, IG_ERR_INVALID, "prompt token id %d (at index %d) is out of range: the vocabulary has %d tokens",
                           ids[i], i, d->vocab);
    if (n_ids >= d->max_context)
        return ig_fail(err, IG_ERR_INVALID, "prompt of %d tokens does not fit the model's context of %d tokens (one is needed to generate)",
                       n_ids, d->max_context);
    int32_t pages_needed = (n_ids + 1 + d->page_size - 1) / d->page_size;
    if (pages_needed > e->pager->n_pages)
        return ig_fail(err, IG_ERR_INVALID, "prompt of %d tokens needs %d KV pages; the engine's KV cache has %d",
                       n_ids, pages_needed, e->pager->n_pages);
    if (gin->max_new_tokens < 1) return ig_fail(err, IG_ERR_INVALID, "max_new_tokens must be >= 1, got %d", gin->max_new_tokens);
    if (gin->min_new_tokens < 0 || gin->min_new_tokens > gin->max_new_tokens)
        return ig_fail(err, IG_ERR_INVALID, "min_new_tokens must be in [0, max_new_tokens=%d], got %d", gin->max_new_tokens, gin->min_new_tokens);
    for (int32_t i = 0; i < gin->n_stop_ids; i++)
        if (gin->stop_ids && (gin->stop_ids[i] < 0 || gin->stop_ids[i] >= d->vocab))
            return ig_fail(err, IG_ERR_INVALID, "stop token id %d is out of range (vocabulary %d)", gin->stop_ids[i], d->vocab);
    if (gin->n_stop_strings > 0 && !e->tok)
        return ig_fail(err, IG_ERR_INVALID, "stop strings need a tokenizer, and this package has none");
    smp_params sp;
    smp_params_default(&sp);
    sp.temperature = gin->temperature;
    sp.top_k = gin->top_k;
    sp.top_p = gin->top_p;
    sp.min_p = gin->min_p;
    sp.repetition_penalty = gin->repetition_penalty;
    sp.presence_penalty = gin->presence_penalty;
    sp.frequency_penalty = gin->frequency_penalty;
    sp.seed = gin->seed;
    sp.n_logit_bias = gin->n_logit_bias;
    sp.logit_bias_ids = gin->logit_bias_ids;
    sp.logit_bias_values = gin->logit_bias_values;
    sp.top_logprobs = gin->top_logprobs;
    sp.logprobs = gin->logprobs;
    ig_status st = smp_validate(&sp, d->vocab, err);
    if (st) return st;

    ig_request *r = calloc(1, sizeof *r);
    if (!r) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    pthread_cond_init(&r->cv, NULL);
    st = copy_config(r, gin, err);
    int32_t cap = n_ids + gin->max_new_tokens + 1;
    r->tokens = st ? NULL : malloc(sizeof(int32_t) * cap);
    if (!st && !r->tokens) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    if (!st) {
        memcpy(r->tokens, ids, sizeof(int32_t) * n_ids);
        r->cap = cap;
        r->n_prompt = r->n_tokens = n_ids;
        st = smp_new(&sp, d->vocab, ids, n_ids, &r->smp, err);
    }
    if (!st && e->tok) {
        r->ts = tok_stream_new(e->tok, 1);
        if (!r->ts) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (!st && r->g.n_stop_strings) st = stop_new((const char *const *)r->stop_strings, r->g.n_stop_strings, &r->sm, err);
    if (st) {
        request_free(r);
        return st;
    }
    r->status = IG_REQ_QUEUED;
    r->step_row = -1;
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    if (c->shutdown) {
        pthread_mutex_unlock(&c->mu);
        request_free(r);
        return ig_fail(err, IG_ERR_CLOSED, "the engine is closed");
    }
    if (c->n_waiting >= e->cfg.max_waiting) {
        int32_t nw = c->n_waiting;
        pthread_mutex_unlock(&c->mu);
        request_free(r);
        return ig_fail(err, IG_ERR_BUSY, "too many requests: %d are already waiting (max_waiting); try again later", nw);
    }
    r->c = c;
    r->refs = 2;
    c->refs++;
    if (c->wait_tail)
        c->wait_tail->next = r;
    else
        c->wait_head = r;
    c->wait_tail = r;
    c->n_waiting++;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->mu);
    *out = r;
    return IG_OK;
}

ig_status ig_request_start_text(ig_engine *e, const char *text, const ig_gen_config *g,
                                ig_request **out, ig_err *err) {
    *out = NULL;
    if (!e->tok) return ig_fail(err, IG_ERR_INVALID, "this package has no tokenizer: start the request with token ids");
    if (!text) return ig_fail(err, IG_ERR_INVALID, "text is NULL");
    int32_t *ids = NULL;
    size_t n = 0;
    ig_status st = tok_encode(e->tok, text, strlen(text), 1, 1, &ids, &n, err);
    if (!st) st = ig_request_start(e, ids, (int32_t)n, g, out, err);
    free(ids);
    return st;
}

ig_status ig_request_read(ig_request *r, int timeout_ms, ig_output **out, ig_err *err) {
    *out = NULL;
    core *c = r->c;
    pthread_mutex_lock(&c->mu);
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    while (!r->head && !r->ended && timeout_ms != 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&r->cv, &c->mu);
        } else if (pthread_cond_timedwait(&r->cv, &c->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    ig_status st = IG_OK;
    if (r->head) {
        out_node *n = r->head;
        r->head = n->next;
        if (!r->head) r->tail = NULL;
        n->next = NULL;
        *out = &n->o;
    } else if (r->ended) {
        st = ig_fail(err, IG_ERR_CLOSED, "the request has ended and its queue is empty");
    } else {
        st = ig_fail(err, IG_ERR_TIMEOUT, "no output within %d ms", timeout_ms);
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

ig_req_status ig_request_status(ig_request *r) {
    pthread_mutex_lock(&r->c->mu);
    ig_req_status s = r->status;
    pthread_mutex_unlock(&r->c->mu);
    return s;
}

ig_req_status ig_request_sync(ig_request *r) {
    pthread_mutex_lock(&r->c->mu);
    while (!r->ended) pthread_cond_wait(&r->cv, &r->c->mu);
    ig_req_status s = r->status;
    pthread_mutex_unlock(&r->c->mu);
    return s;
}

void ig_request_stop(ig_request *r) {
    if (!r) return;
    pthread_mutex_lock(&r->c->mu);
    if (!r->ended) {
        r->stop_requested = 1;
        pthread_cond_signal(&r->c->work);
    }
    pthread_mutex_unlock(&r->c->mu);
}

void ig_request_release(ig_request *r) {
    if (!r) return;
    core *c = r->c;
    pthread_mutex_lock(&c->mu);
    if (!r->ended) {
        r->stop_requested = 1;
        pthread_cond_signal(&c->work);
    }
    int free_core;
    request_unref_locked(r, &free_core);
    pthread_mutex_unlock(&c->mu);
    if (free_core) core_free(c);
}

/* ---------------------------------------------------------------- scheduler */

static int is_eos(const ig_engine *e, const ig_request *r, int32_t id) {
    if (!r->g.ignore_eos)
        for (int32_t i = 0; i < e->pkg->n_eos; i++)
            if (id == e->pkg->eos_ids[i]) return 1;
    return 0;
}

static int is_stop_id(const ig_request *r, int32_t id) {
    for (int32_t i = 0; i < r->g.n_stop_ids; i++)
        if (id == r->stop_ids[i]) return 1;
    return 0;
}

/* Ends the requests of one list that were asked to stop (all of them at shutdown). */
static void reap_list(ig_engine *e, ig_request **head, int32_t *count) {
    for (ig_request **p = head; *p;) {
        ig_request *r = *p;
        if (r->stop_requested || e->c->shutdown) {
            *p = r->next;
            r->next = NULL;
            (*count)--;
            finish_request(e, r, IG_REQ_STOPPED, IG_FINISH_NONE, NULL, NULL);
        } else {
            p = &r->next;
        }
    }
}

/* Ends requests asked to stop, wherever they are (c->mu held). */
static void reap_stopped(ig_engine *e) {
    core *c = e->c;
    reap_list(e, &c->wait_head, &c->n_waiting);
    c->wait_tail = NULL;
    for (ig_request *r = c->wait_head; r; r = r->next) c->wait_tail = r;
    reap_list(e, &c->run_head, &c->n_running);
}

/* Preemption by recompute (c->mu held): r leaves the running list, its pages go back to the pool
 * and it waits at the head of the queue, to be recomputed from prompt + generated tokens. */
static void requeue_front(ig_engine *e, ig_request *r) {
    core *c = e->c;
    list_remove(&c->run_head, r);
    c->n_running--;
    kv_seq_release(e->pager, &r->kv);
    r->n_kv = 0;
    r->n_keyed = 0;
    r->last_key = 0;
    r->next = c->wait_head;
    c->wait_head = r;
    if (!c->wait_tail) c->wait_tail = r;
    c->n_waiting++;
    c->stats.preemptions++;
}

/* Preempts the newest running request other than `keep` that is not yet in this step.
 * Returns 0 if there is none. */
static int preempt_newest(ig_engine *e, ig_request *keep) {
    core *c = e->c;
    ig_request *victim = NULL;
    for (ig_request *r = c->run_head; r; r = r->next)
        if (r != keep && r->step_take == 0) victim = r;
    if (!victim) return 0;
    requeue_front(e, victim);
    return 1;
}

/* Takes the longest run of cached full pages that prefixes r's tokens, stopping before the page
 * that holds the last known token (that token must be computed to give logits, and the page it
 * is written to must be r's own). */
static void match_prefix(ig_engine *e, ig_request *r) {
    if (!e->pc) return;
    const int32_t ps = e->pkg->desc->page_size, limit = (r->n_tokens - 1) / ps;
    uint64_t key = 0;
    int32_t m = 0;
    ig_err err;
    for (; m < limit; m++) {
        const int32_t *t = r->tokens + (size_t)m * ps;
        uint64_t k = pc_key(key, t, ps);
        int32_t page = pc_lookup(e->pc, k, t);
        if (page < 0 || kv_seq_push_shared(e->pager, &r->kv, page, &err) != IG_OK) break;
        key = k;
    }
    r->n_kv = m * ps;
    r->n_keyed = m;
    r->last_key = key;
}

/* Offers r's newly completed full pages to the prefix cache (c->mu held). */
static void publish_pages(ig_engine *e, ig_request *r) {
    if (!e->pc) return;
    const int32_t ps = e->pkg->desc->page_size;
    while ((r->n_keyed + 1) * ps <= r->n_kv) {
        const int32_t *t = r->tokens + (size_t)r->n_keyed * ps;
        uint64_t k = pc_key(r->last_key, t, ps);
        pc_insert(e->pc, e->pager, k, t, r->kv.pages[r->n_keyed]);
        r->last_key = k;
        r->n_keyed++;
    }
}

/* Plans the next step (c->mu held). Returns the number of sequences in it. */
static int32_t plan_step(ig_engine *e, int32_t *n_tokens_out) {
    core *c = e->c;
    const ig_model_desc *d = e->pkg->desc;
    int32_t budget = e->cfg.max_tokens_per_step, n_seq = 0, n_tok = 0;
    for (ig_request *r = c->run_head; r; r = r->next) {
        r->step_take = 0;
        r->step_row = -1;
    }
    /* running sequences: decode tokens first (one each), then prefill chunks */
    for (int phase = 0; phase < 2; phase++) {
        for (ig_request *r = c->run_head; r && budget > 0;) {
            ig_request *next = r->next;
            int32_t need = r->n_tokens - r->n_kv;
            if (r->step_take || need < 1 || (phase == 0) != (need == 1)) {
                r = next;
                continue;
            }
            int32_t take = need < budget ? need : budget;
            ig_err err;
            while (kv_seq_reserve(e->pager, &r->kv, r->n_kv + take, d->page_size, &err) != IG_OK) {
                if (e->pc && pc_evict_one(e->pc, e->pager)) continue; /* cached pages go first */
                if (!preempt_newest(e, r)) break;
                next = r->next; /* the list changed */
            }
            if (r->kv.n_pages * d->page_size < r->n_kv + take) {
                if (c->n_running > 1) {
                    /* every other sequence is already in this step: r yields its own pages and
                     * is recomputed later, so the others can progress */
                    requeue_front(e, r);
                } else {
                    /* alone in the pool and still no room: it has outgrown the KV cache */
                    list_remove(&c->run_head, r);
                    c->n_running--;
                    finish_request(e, r, IG_REQ_FINISHED, IG_FINISH_LENGTH, NULL, NULL);
                }
                r = next;
                continue;
            }
            r->step_take = take;
            budget -= take;
            n_tok += take;
            n_seq++;
            r = next;
        }
    }
    /* admit waiting requests while there is room */
    while (c->wait_head && budget > 0 && c->n_running < e->cfg.max_seqs) {
        ig_request *r = c->wait_head;
        if (r->n_kv == 0) match_prefix(e, r);
        int32_t need_pages = (r->n_tokens + 1 + d->page_size - 1) / d->page_size - r->kv.n_pages;
        /* keep one page per running sequence in reserve so admission does not immediately
         * force a preemption at the next decode step; cached pages are given up first */
        while (need_pages + c->n_running > e->pager->n_free && e->pc && pc_evict_one(e->pc, e->pager)) {}
        int32_t take = r->n_tokens - r->n_kv < budget ? r->n_tokens - r->n_kv : budget;
        ig_err err;
        if ((need_pages + c->n_running > e->pager->n_free && c->n_running > 0) ||
            kv_seq_reserve(e->pager, &r->kv, r->n_kv + take, d->page_size, &err) != IG_OK) {
            /* not now: give the matched pages back, the match is redone at admission */
            kv_seq_release(e->pager, &r->kv);
            r->n_kv = r->n_keyed = 0;
            r->last_key = 0;
            break;
        }
        c->stats.prefix_hit_tokens += r->n_kv;
        c->wait_head = r->next;
        if (!c->wait_head) c->wait_tail = NULL;
        c->n_waiting--;
        r->next = NULL;
        ig_request **p = &c->run_head;
        while (*p) p = &(*p)->next;
        *p = r;
        c->n_running++;
        if (r->status == IG_REQ_QUEUED) r->status = IG_REQ_PREFILLING;
        r->step_take = take;
        budget -= take;
        n_tok += take;
        n_seq++;
    }
    *n_tokens_out = n_tok;
    return n_seq;
}

/* Fills the batch arrays for the planned step (c->mu held). */
static void build_batch(ig_engine *e, ig_fwd_batch *b) {
    core *c = e->c;
    int32_t t = 0, s = 0, n_out = 0, mp = 1;
    for (ig_request *r = c->run_head; r; r = r->next)
        if (r->step_take && r->kv.n_pages > mp) mp = r->kv.n_pages;
    for (ig_request *r = c->run_head; r; r = r->next) {
        if (!r->step_take) continue;
        for (int32_t i = 0; i < r->step_take; i++) {
            e->b_ids[t] = r->tokens[r->n_kv + i];
            e->b_pos[t] = r->n_kv + i;
            e->b_seq[t] = s;
            t++;
        }
        for (int32_t i = 0; i < mp; i++) e->b_pages[s * mp + i] = i < r->kv.n_pages ? r->kv.pages[i] : 0;
        if (r->n_kv + r->step_take == r->n_tokens) {
            r->step_row = n_out;
            e->b_rows[n_out++] = t - 1;
        }
        e->b_reqs[s] = r;
        s++;
    }
    /* rows whose request samples on the device: decided by the request's own params only */
    int32_t n_dev = 0;
    for (int32_t i = 0; i < s && e->device_sampling; i++) {
        ig_request *r = e->b_reqs[i];
        if (r->step_row < 0) continue;
        ig_fwd_sample *sp = &e->b_sp[r->step_row];
        memset(sp, 0, sizeof *sp);
        int bans = r->n_gen < r->g.min_new_tokens && (e->pkg->n_eos > 0 || r->g.n_stop_ids > 0);
        if (!bans && smp_device_step(r->smp, sp)) n_dev++;
    }
    memset(b, 0, sizeof *b);
    b->n_tokens = t;
    b->token_ids = e->b_ids;
    b->positions = e->b_pos;
    b->token_seq = e->b_seq;
    b->n_seqs = s;
    b->page_table = e->b_pages;
    b->max_pages_per_seq = mp;
    b->n_out = n_out;
    b->out_rows = e->b_rows;
    b->logits = n_out > 0 && n_dev == n_out ? NULL : e->b_logits;
    if (e->device_sampling) {
        b->sample = e->b_sp;
        b->sampled = e->b_dev_tok;
    }
}

/* Samples the next token of r from its logits row. Runs without the lock, for all sequences of
 * a step in parallel: it touches only r's sampler state and its row, both the scheduler's. */
static ig_status sample_one(ig_engine *e, ig_request *r, float *logits, smp_result *res, ig_err *err) {
    if (r->n_gen < r->g.min_new_tokens) {
        for (int32_t i = 0; i < e->pkg->n_eos; i++) logits[e->pkg->eos_ids[i]] = -INFINITY;
        for (int32_t i = 0; i < r->g.n_stop_ids; i++) logits[r->stop_ids[i]] = -INFINITY;
    }
    return smp_sample(r->smp, logits, res, err);
}

/* Routes newly decoded text through r's stop-string matcher into o. Returns 1 when a stop
 * string completed (its text and anything after it are never emitted). */
static int emit_text(ig_request *r, ig_output *o, const char *piece, size_t len) {
    if (!len) return 0;
    if (!r->sm) {
        output_append_text(o, piece, len);
        return 0;
    }
    const char *em;
    size_t emn;
    int stopped = 0;
    if (stop_feed(r->sm, piece, len, &em, &emn, &stopped) != IG_OK) return 0;
    output_append_text(o, em, emn);
    return stopped;
}

/* Appends the sampled token to r and emits it, or ends r (c->mu held). */
static void advance(ig_engine *e, ig_request *r, ig_status sampled, const smp_result *res, const ig_err *serr) {
    core *c = e->c;
    const ig_model_desc *d = e->pkg->desc;
    ig_err err;
    if (sampled != IG_OK) {
        list_remove(&c->run_head, r);
        c->n_running--;
        finish_request(e, r, IG_REQ_ERROR, IG_FINISH_NONE, serr->msg, NULL);
        return;
    }
    int32_t tok = res->token;
    r->tokens[r->n_tokens++] = tok;
    r->n_gen++;
    c->stats.tokens_generated++;
    r->status = IG_REQ_GENERATING;
    ig_output *o = new_output(r, 1);
    if (!o) return;
    o->n_tokens = 1;
    o->tokens[0] = tok;
    o->logprobs[0] = res->logprob;
    for (int32_t k = 0; k < o->n_top; k++) {
        o->top[k].id = res->top[k].id;
        o->top[k].logprob = res->top[k].logprob;
    }
    ig_finish_reason why = IG_FINISH_NONE;
    if (is_eos(e, r, tok))
        why = IG_FINISH_EOS;
    else if (is_stop_id(r, tok))
        why = IG_FINISH_STOP;
    /* text: incremental detokenization, then stop strings */
    int stop_string = 0;
    if (r->ts && why == IG_FINISH_NONE) {
        const char *piece;
        size_t len = 0;
        if (tok_stream_push(r->ts, tok, &piece, &len, &err) == IG_OK) stop_string = emit_text(r, o, piece, len);
        if (stop_string) why = IG_FINISH_STOP;
    }
    if (why == IG_FINISH_NONE && (r->n_gen >= r->g.max_new_tokens || r->n_tokens >= d->max_context))
        why = IG_FINISH_LENGTH;
    if (why != IG_FINISH_NONE) {
        if (!stop_string) {
            /* flush what the detokenizer (not after EOS: its text is not emitted) and the stop
             * matcher still hold back */
            const char *piece;
            size_t len = 0;
            if (r->ts && why != IG_FINISH_EOS && tok_stream_flush(r->ts, &piece, &len, &err) == IG_OK)
                stop_string = emit_text(r, o, piece, len);
            if (r->sm && !stop_string) {
                const char *em;
                size_t emn;
                stop_flush(r->sm, &em, &emn);
                output_append_text(o, em, emn);
            }
        }
        list_remove(&c->run_head, r);
        c->n_running--;
        finish_request(e, r, IG_REQ_FINISHED, why, NULL, o);
        return;
    }
    push_output(r, o);
}

static void *scheduler_main(void *arg) {
    ig_engine *e = arg;
    core *c = e->c;
    const int32_t V = e->pkg->desc->vocab;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        reap_stopped(e);
        if (c->shutdown) break;
        int32_t n_tok = 0;
        int32_t n_seq = plan_step(e, &n_tok);
        if (n_seq == 0) {
            if (!c->run_head && !c->wait_head) {
                pthread_cond_wait(&c->work, &c->mu);
            } else if (!c->run_head) {
                /* nothing running and the head of the queue still does not fit: it can never
                 * run (start() checks prompts against the pool; this guards recomputes) */
                ig_request *r = c->wait_head;
                c->wait_head = r->next;
                if (!c->wait_head) c->wait_tail = NULL;
                r->next = NULL;
                c->n_waiting--;
                finish_request(e, r, IG_REQ_ERROR, IG_FINISH_NONE,
                               "the sequence no longer fits in the KV cache", NULL);
            }
            continue;
        }
        ig_fwd_batch b;
        build_batch(e, &b);
        pthread_mutex_unlock(&c->mu);
        ig_err err;
        ig_status st = rt_model_forward(e->model, &b, &err);
        if (!st) {
            /* sample every sequence of the step in parallel, still without the lock */
#pragma omp parallel for schedule(dynamic, 1) if (b.n_out > 1)
            for (int32_t s = 0; s < b.n_seqs; s++) {
                ig_request *r = e->b_reqs[s];
                if (r->step_row < 0) continue;
                if (b.sample && b.sample[r->step_row].on) {
                    int32_t tok = b.sampled[r->step_row];
                    e->b_sampled[s] = tok >= 0 && tok < V ? IG_OK
                                                          : ig_fail(&e->b_errs[s], IG_ERR_INVALID,
                                                                    "the step's logits held NaN or +inf (or were all -inf)");
                    if (!e->b_sampled[s]) smp_device_accept(r->smp, tok, &e->b_res[s]);
                } else {
                    e->b_sampled[s] = sample_one(e, r, e->b_logits + (size_t)r->step_row * V, &e->b_res[s], &e->b_errs[s]);
                }
            }
        }
        pthread_mutex_lock(&c->mu);
        c->stats.steps++;
        for (int32_t s = 0; s < b.n_seqs; s++) {
            ig_request *r = e->b_reqs[s];
            int32_t take = r->step_take;
            r->step_take = 0;
            if (st) {
                list_remove(&c->run_head, r);
                c->n_running--;
                finish_request(e, r, IG_REQ_ERROR, IG_FINISH_NONE, err.msg, NULL);
                continue;
            }
            if (r->n_kv < r->n_prompt) c->stats.tokens_prefilled += take;
            r->n_kv += take;
            publish_pages(e, r);
            if (r->step_row >= 0) advance(e, r, e->b_sampled[s], &e->b_res[s], &e->b_errs[s]);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---------------------------------------------------------------- engine */

ig_status ig_engine_open(const char *pkg_dir, const ig_engine_config *cfg_in, ig_engine **out, ig_err *err) {
    *out = NULL;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    if (cfg_in) cfg = *cfg_in;
    if (cfg.max_seqs <= 0) cfg.max_seqs = 32;
    if (cfg.max_tokens_per_step <= 0) cfg.max_tokens_per_step = 256;
    if (cfg.max_waiting <= 0) cfg.max_waiting = 1024;
    if (cfg.max_tokens_per_step < cfg.max_seqs)
        return ig_fail(err, IG_ERR_INVALID, "max_tokens_per_step (%d) must be at least max_seqs (%d)", cfg.max_tokens_per_step, cfg.max_seqs);
    ig_engine *e = calloc(1, sizeof *e);
    core *c = calloc(1, sizeof *c);
    if (!e || !c) {
        free(e);
        free(c);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work, NULL);
    c->refs = 1;
    e->c = c;
    e->cfg = cfg;
    rt_open_opts oo = {.verify_hashes = cfg.verify_hashes};
    ig_status st = rt_package_open(pkg_dir, &oo, &e->pkg, err);
    const ig_model_desc *d = st ? NULL : e->pkg->desc;
    if (!st) {
        int64_t pages = cfg.kv_pages;
        if (cfg.kv_bytes > 0) pages = cfg.kv_bytes / (int64_t)d->kv_page_bytes;
        if (pages <= 0 && cfg.kv_bytes <= 0) pages = (int64_t)((512ull << 20) / d->kv_page_bytes);
        if (pages < 1) st = ig_fail(err, IG_ERR_INVALID, "KV budget of %lld bytes is less than one page (%llu bytes)",
                                    (long long)cfg.kv_bytes, (unsigned long long)d->kv_page_bytes);
        if (pages > 0x7fffffff) pages = 0x7fffffff;
        rt_model_opts mo = {.max_tokens = cfg.max_tokens_per_step, .n_pages = (int32_t)pages,
                            .n_threads = cfg.n_threads, .max_seqs = cfg.max_seqs, .tune = cfg.tune};
        if (!st) st = rt_model_new(e->pkg, &mo, &e->model, err);
        if (!st) st = kv_pager_new(e->model->ctx.n_pages, &e->pager, err);
        if (!st && cfg.prefix_cache) st = pc_new(d->page_size, e->model->ctx.n_pages, &e->pc, err);
    }
    if (!st && e->pkg->has_tokenizer) st = tok_load_dir(pkg_dir, &e->tok, err);
    if (!st) {
        int32_t T = cfg.max_tokens_per_step, S = cfg.max_seqs;
        e->max_pages_per_seq = (d->max_context + d->page_size - 1) / d->page_size;
        e->b_ids = malloc(sizeof(int32_t) * T);
        e->b_pos = malloc(sizeof(int32_t) * T);
        e->b_seq = malloc(sizeof(int32_t) * T);
        e->b_rows = malloc(sizeof(int32_t) * S);
        e->b_pages = malloc(sizeof(int32_t) * (size_t)S * e->max_pages_per_seq);
        e->b_logits = malloc(sizeof(float) * (size_t)S * d->vocab);
        e->b_reqs = malloc(sizeof(ig_request *) * S);
        e->b_res = malloc(sizeof(smp_result) * S);
        e->b_sp = calloc((size_t)S, sizeof(ig_fwd_sample));
        e->b_dev_tok = calloc((size_t)S, sizeof(int32_t));
        e->device_sampling = cfg.device_sampling && (d->caps & IG_MODEL_CAP_SAMPLE);
        e->b_sampled = malloc(sizeof(ig_status) * S);
        e->b_errs = malloc(sizeof(ig_err) * S);
        if (!e->b_ids || !e->b_pos || !e->b_seq || !e->b_rows || !e->b_pages || !e->b_logits || !e->b_reqs ||
            !e->b_res || !e->b_sampled || !e->b_errs || !e->b_sp || !e->b_dev_tok)
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory for step buffers");
    }
    if (!st) {
        if (pthread_create(&e->thread, NULL, scheduler_main, e) != 0)
            st = ig_fail(err, IG_ERR_INTERNAL, "cannot start the scheduler thread");
        else
            e->thread_started = 1;
    }
    if (st) {
        ig_engine_close(e);
        return st;
    }
    *out = e;
    return IG_OK;
}

void ig_engine_close(ig_engine *e) {
    if (!e) return;
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    c->shutdown = 1;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->mu);
    if (e->thread_started) pthread_join(e->thread, NULL);
    pthread_mutex_lock(&c->mu);
    reap_stopped(e); /* any request that arrived before shutdown was seen */
    int free_core;
    core_unref_locked(c, &free_core);
    pthread_mutex_unlock(&c->mu);
    if (free_core) core_free(c);
    free(e->b_ids);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_rows);
    free(e->b_pages);
    free(e->b_logits);
    free(e->b_reqs);
    free(e->b_res);
    free(e->b_sp);
    free(e->b_dev_tok);
    free(e->b_sampled);
    free(e->b_errs);
    tok_free(e->tok);
    pc_free(e->pc, e->pager);
    kv_pager_free(e->pager);
    rt_model_free(e->model);
    rt_package_close(e->pkg);
    free(e);
}

void ig_engine_get_stats(ig_engine *e, ig_engine_stats *s) {
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    *s = c->stats;
    s->running = c->n_running;
    s->waiting = c->n_waiting;
    s->kv_pages_total = e->pager->n_pages;
    s->kv_pages_free = e->pager->n_free;
    s->kv_pages_used = e->pager->n_pages - e->pager->n_free;
    s->kv_pages_cached = e->pc ? pc_evictable(e->pc, e->pager) : 0;
    pthread_mutex_unlock(&c->mu);
}

int32_t ig_engine_vocab(const ig_engine *e) { return e->pkg->desc->vocab; }
int32_t ig_engine_max_context(const ig_engine *e) { return e->pkg->desc->max_context; }
int ig_engine_has_tokenizer(const ig_engine *e) { return e->tok != NULL; }
