/* engine.c — the public API of include/ignis.h: configuration defaults and their layout check,
 * opening and closing an engine, starting requests and reading their output queues. The work
 * itself is the scheduler thread's (scheduler.c, whose header describes the shared state and
 * its locking).
 *
 * Closing races: every call on the engine holds core.mu while it looks at core.closing, and the
 * calls that use the engine's resources outside the lock (request start: validation,
 * tokenization, sampler setup) count themselves in core.n_calls; ig_engine_close sets closing,
 * waits for n_calls to drain, stops the scheduler, then frees the resources. The ig_engine shell
 * and the core are freed by whichever of close and the last request release comes last, so
 * request handles stay valid after close. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler.h"

/* ---------------------------------------------------------------- helpers */

void ig_engine_config_default(ig_engine_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = (uint32_t)sizeof *cfg;
    cfg->max_seqs = 32;
    cfg->max_tokens_per_step = 256;
    cfg->max_waiting = 1024;
    cfg->verify_hashes = 1;
    cfg->prefix_cache = 1;
    cfg->device_sampling = 1;
    cfg->kv_fraction = 0.85f;
    cfg->kv_host_bytes = -1;
}

void ig_gen_config_default(ig_gen_config *g) {
    memset(g, 0, sizeof *g);
    g->struct_size = (uint32_t)sizeof *g;
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

/* Rejects a config struct laid out by another ignis.h (or not made by its *_default function). */
static ig_status check_size(const char *what, uint32_t got, size_t want, ig_err *err) {
    if (got == want) return IG_OK;
    return ig_fail(err, IG_ERR_MISMATCH,
                   "%s.struct_size is %u but this libignis (%s) has a %zu-byte %s: the caller was built against "
                   "another ignis.h, or did not fill the struct with %s_default",
                   what, got, IGNIS_VERSION, want, what, what);
}

static void core_unref_locked(core *c, int *free_it) {
    *free_it = --c->refs == 0;
}

/* Frees the core and the engine shell in it (the engine's resources are already gone). */
static void core_free(core *c) {
    for (ig_request *r = c->shelf_head; r;) {
        ig_request *nx = r->next;
        free(r);
        r = nx;
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->calls_done);
    free(c->engine);
    free(c);
}

/* Enters an engine call that uses the engine's resources outside c->mu: IG_ERR_CLOSED once
 * ig_engine_close has begun; otherwise close waits for the matching engine_leave. */
static ig_status engine_enter(ig_engine *e, ig_err *err) {
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    int closing = c->closing;
    if (!closing) c->n_calls++;
    pthread_mutex_unlock(&c->mu);
    return closing ? ig_fail(err, IG_ERR_CLOSED, "the engine is closed (ig_engine_close was called)") : IG_OK;
}

static void engine_leave(ig_engine *e) {
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    if (--c->n_calls == 0 && c->closing) pthread_cond_broadcast(&c->calls_done);
    pthread_mutex_unlock(&c->mu);
}

/* Frees what r holds, not r itself. */
static void request_clear(ig_request *r) {
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
    gr_matcher_free(r->gm);
    free(r->gmask);
    gr_grammar_free(r->gg);
    tok_stream_free(r->ts);
    stop_free(r->sm);
    free(r->kv.pages);
    if (r->final) ig_output_free(&r->final->o);
    pthread_cond_destroy(&r->cv);
}

/* A request that never reached the user (start failed): gone at once. */
static void request_free(ig_request *r) {
    request_clear(r);
    free(r);
}

/* A shell for a new request of c: a released one once the shelf holds more than REQ_SHELF_MIN
 * (so stale handles stay recognizable), else a new one. Zeroed but for c; NULL when out of memory. */
static ig_request *request_shell(core *c) {
    ig_request *r = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->n_shelf > REQ_SHELF_MIN) {
        r = c->shelf_head;
        c->shelf_head = r->next;
        if (!c->shelf_head) c->shelf_tail = NULL;
        c->n_shelf--;
    }
    pthread_mutex_unlock(&c->mu);
    if (r)
        memset((char *)r + sizeof r->c, 0, sizeof *r - sizeof r->c); /* r->c stays: readers of stale handles use it */
    else if ((r = calloc(1, sizeof *r)))
        r->c = c;
    return r;
}

void eng_request_unref_locked(ig_request *r, int *free_core) {
    *free_core = 0;
    if (--r->refs > 0) return;
    core *c = r->c;
    request_clear(r);
    r->magic = REQ_MAGIC_DEAD;
    r->next = NULL;
    if (c->shelf_tail)
        c->shelf_tail->next = r;
    else
        c->shelf_head = r;
    c->shelf_tail = r;
    c->n_shelf++;
    core_unref_locked(c, free_core);
}

/* IG_OK when r is a live handle (c->mu held): not released, not a shelf shell. */
static ig_status handle_ok_locked(const ig_request *r, const char *fn, ig_err *err) {
    if (r->magic != REQ_MAGIC_LIVE || r->released)
        return ig_fail(err, IG_ERR_INVALID, "%s: the request handle was already released (or is not a request handle)", fn);
    return IG_OK;
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
            if (!r->stop_strings[i]) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        }
    }
    r->g.stop_ids = r->stop_ids;
    r->g.stop_strings = (const char *const *)r->stop_strings;
    r->g.logit_bias_ids = r->bias_ids;
    r->g.logit_bias_values = r->bias_vals;
    return IG_OK;
}

/* Checks a request against the model and the engine; fills the sampler's parameters. */
static ig_status validate_request(const ig_engine *e, const int32_t *ids, int32_t n_ids, const ig_gen_config *g,
                                  smp_params *sp, ig_err *err) {
    const ig_model_desc *d = e->pkg->desc;
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
    if (g->max_new_tokens < 1) return ig_fail(err, IG_ERR_INVALID, "max_new_tokens must be >= 1, got %d", g->max_new_tokens);
    if (g->min_new_tokens < 0 || g->min_new_tokens > g->max_new_tokens)
        return ig_fail(err, IG_ERR_INVALID, "min_new_tokens must be in [0, max_new_tokens=%d], got %d", g->max_new_tokens, g->min_new_tokens);
    for (int32_t i = 0; i < g->n_stop_ids; i++)
        if (g->stop_ids && (g->stop_ids[i] < 0 || g->stop_ids[i] >= d->vocab))
            return ig_fail(err, IG_ERR_INVALID, "stop token id %d is out of range (vocabulary %d)", g->stop_ids[i], d->vocab);
    if (g->n_stop_strings > 0 && !e->tok)
        return ig_fail(err, IG_ERR_INVALID, "stop strings need a tokenizer, and this package has none");
    smp_params_default(sp);
    sp->temperature = g->temperature;
    sp->top_k = g->top_k;
    sp->top_p = g->top_p;
    sp->min_p = g->min_p;
    sp->repetition_penalty = g->repetition_penalty;
    sp->presence_penalty = g->presence_penalty;
    sp->frequency_penalty = g->frequency_penalty;
    sp->seed = g->seed;
    sp->n_logit_bias = g->n_logit_bias;
    sp->logit_bias_ids = g->logit_bias_ids;
    sp->logit_bias_values = g->logit_bias_values;
    sp->top_logprobs = g->top_logprobs;
    sp->logprobs = g->logprobs;
    return smp_validate(sp, d->vocab, err);
}

static int vocab_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    const tok_tokenizer *t = ctx;
    return tok_is_special(t, id) ? -1 : tok_token_bytes(t, id, buf, cap);
}

/* The constraint of g compiled for r (its matcher over the engine's token bytes, which the first
 * constrained request builds). */
static ig_status new_constraint(ig_engine *e, ig_request *r, const ig_gen_config *g, ig_err *err) {
    if (g->constraint < IG_CONSTRAINT_JSON_SCHEMA || g->constraint > IG_CONSTRAINT_GBNF)
        return ig_fail(err, IG_ERR_INVALID, "constraint must be one of the IG_CONSTRAINT_* values, got %d", g->constraint);
    if (!e->tok) return ig_fail(err, IG_ERR_INVALID, "a constraint needs a tokenizer and this package has none");
    const char *text = g->constraint_text ? g->constraint_text : "";
    if (g->constraint != IG_CONSTRAINT_JSON && !g->constraint_text)
        return ig_fail(err, IG_ERR_INVALID, "constraint_text is NULL");
    ig_status st = IG_OK;
    pthread_mutex_lock(&e->gvocab_mu);
    /* checked before the vocabulary is kept: masks are sized by the model's vocabulary */
    if (tok_vocab_size(e->tok) > e->vocab)
        st = ig_fail(err, IG_ERR_MISMATCH, "the tokenizer has %d tokens but the model's vocabulary %d", tok_vocab_size(e->tok), e->vocab);
    else if (!e->gvocab)
        st = gr_vocab_new(tok_vocab_size(e->tok), vocab_bytes, e->tok, e->pkg->eos_ids, e->pkg->n_eos, &e->gvocab, err);
    pthread_mutex_unlock(&e->gvocab_mu);
    if (!st) st = gr_compile((gr_kind)g->constraint, text, strlen(text), &r->gg, err);
    if (!st) st = gr_matcher_new(r->gg, e->gvocab, &r->gm, err);
    if (!st && !(r->gmask = calloc((size_t)e->vocab / 32 + 2, 4))) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    return st;
}

/* A new request in state QUEUED, not yet queued (free with request_free on failure). */
static ig_status new_request(ig_engine *e, const int32_t *ids, int32_t n_ids, const ig_gen_config *g,
                             const smp_params *sp, ig_request **out, ig_err *err) {
    ig_request *r = request_shell(e->c);
    if (!r) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* read timeouts ignore wall-clock jumps */
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = r;
    r->status = IG_REQ_QUEUED;
    r->step_row = -1;
    ig_status st = copy_config(r, g, err);
    if (st) return st;
    /* tokens never pass the context (generation ends there), whatever max_new_tokens says */
    int64_t cap = (int64_t)n_ids + g->max_new_tokens;
    r->cap = (int32_t)(cap < e->max_context ? cap : e->max_context) + 1;
    r->tokens = malloc(sizeof(int32_t) * r->cap);
    /* the final element exists from the start, so a request always gets its end (and its
     * error message) even when memory runs out later */
    ig_output *fin = sched_new_output(r, 0);
    if (!r->tokens || !fin) {
        ig_output_free(fin);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    r->final = OUT_NODE(fin);
    memcpy(r->tokens, ids, sizeof(int32_t) * n_ids);
    r->n_prompt = r->n_tokens = n_ids;
    st = smp_new(sp, e->vocab, ids, n_ids, &r->smp, err);
    if (!st && e->tok) {
        r->ts = tok_stream_new(e->tok, 1);
        if (!r->ts) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    if (!st && r->g.n_stop_strings) st = stop_new((const char *const *)r->stop_strings, r->g.n_stop_strings, &r->sm, err);
    if (!st && g->constraint != IG_CONSTRAINT_NONE) st = new_constraint(e, r, g, err);
    r->g.constraint_text = NULL; /* borrowed: compiled above */
    return st;
}

/* Queues r for the scheduler, or frees it (BUSY, CLOSED). */
static ig_status enqueue(ig_engine *e, ig_request *r, ig_err *err) {
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    if (c->shutdown) {
        pthread_mutex_unlock(&c->mu);
        request_free(r);
        return ig_fail(err, IG_ERR_CLOSED, "the engine is closed (ig_engine_close was called)");
    }
    if (c->n_waiting >= e->cfg.max_waiting) {
        int32_t nw = c->n_waiting;
        pthread_mutex_unlock(&c->mu);
        request_free(r);
        return ig_fail(err, IG_ERR_BUSY, "too many requests: %d are already waiting (max_waiting); try again later", nw);
    }
    r->magic = REQ_MAGIC_LIVE;
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
    return IG_OK;
}

/* ig_request_start inside engine_enter / engine_leave. */
static ig_status start_entered(ig_engine *e, const int32_t *ids, int32_t n_ids, const ig_gen_config *gin,
                               ig_request **out, ig_err *err) {
    ig_gen_config gdef;
    if (!gin) {
        ig_gen_config_default(&gdef);
        gin = &gdef;
    }
    ig_status st = check_size("ig_gen_config", gin->struct_size, sizeof *gin, err);
    smp_params sp;
    if (!st) st = validate_request(e, ids, n_ids, gin, &sp, err);
    ig_request *r = NULL;
    if (!st) st = new_request(e, ids, n_ids, gin, &sp, &r, err);
    if (st) {
        if (r) request_free(r);
        return st;
    }
    st = enqueue(e, r, err);
    if (!st) *out = r;
    return st;
}

ig_status ig_request_start(ig_engine *e, const int32_t *ids, int32_t n_ids, const ig_gen_config *gin,
                           ig_request **out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "ig_request_start: out is NULL");
    *out = NULL;
    if (!e) return ig_fail(err, IG_ERR_INVALID, "ig_request_start: the engine is NULL");
    ig_status st = engine_enter(e, err);
    if (st) return st;
    st = start_entered(e, ids, n_ids, gin, out, err);
    engine_leave(e);
    return st;
}

ig_status ig_request_start_text(ig_engine *e, const char *text, const ig_gen_config *g,
                                ig_request **out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "ig_request_start_text: out is NULL");
    *out = NULL;
    if (!e) return ig_fail(err, IG_ERR_INVALID, "ig_request_start_text: the engine is NULL");
    if (!e->has_tokenizer) return ig_fail(err, IG_ERR_INVALID, "this package has no tokenizer: start the request with token ids");
    if (!text) return ig_fail(err, IG_ERR_INVALID, "text is NULL");
    ig_status st = engine_enter(e, err);
    if (st) return st;
    int32_t *ids = NULL;
    size_t n = 0;
    st = tok_encode(e->tok, text, strlen(text), 1, 1, &ids, &n, err);
    if (!st) st = start_entered(e, ids, (int32_t)n, g, out, err);
    free(ids);
    engine_leave(e);
    return st;
}

/* Waits on r->cv until r has output, has ended, was released or the deadline passed (c->mu
 * held; until NULL waits without limit). */
static void wait_output_locked(ig_request *r, const struct timespec *until) {
    while (!r->head && !r->ended && !r->released) {
        if (!until)
            pthread_cond_wait(&r->cv, &r->c->mu);
        else if (pthread_cond_timedwait(&r->cv, &r->c->mu, until) == ETIMEDOUT)
            break;
    }
}

/* Drops a reference a blocked call took (c->mu held), then unlocks; frees the core if it was the last. */
static void unref_unlock(ig_request *r) {
    core *c = r->c;
    int free_core;
    eng_request_unref_locked(r, &free_core);
    pthread_mutex_unlock(&c->mu);
    if (free_core) core_free(c);
}

ig_status ig_request_read(ig_request *r, int timeout_ms, ig_output **out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "ig_request_read: out is NULL");
    *out = NULL;
    if (!r) return ig_fail(err, IG_ERR_INVALID, "ig_request_read: the request handle is NULL");
    core *c = r->c;
    pthread_mutex_lock(&c->mu);
    ig_status st = handle_ok_locked(r, "ig_request_read", err);
    if (st) {
        pthread_mutex_unlock(&c->mu);
        return st;
    }
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_MONOTONIC, &until); /* the clock of r->cv */
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    r->refs++; /* a release meanwhile must not free r under this wait */
    if (timeout_ms != 0) wait_output_locked(r, timeout_ms > 0 ? &until : NULL);
    if (r->released) {
        st = ig_fail(err, IG_ERR_INVALID, "ig_request_read: the request handle was released while this read waited");
    } else if (r->head) {
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
    unref_unlock(r);
    return st;
}

ig_req_status ig_request_status(ig_request *r) {
    if (!r) return IG_REQ_ERROR;
    pthread_mutex_lock(&r->c->mu);
    ig_req_status s = handle_ok_locked(r, "", NULL) ? IG_REQ_ERROR : r->status;
    pthread_mutex_unlock(&r->c->mu);
    return s;
}

ig_req_status ig_request_sync(ig_request *r) {
    if (!r) return IG_REQ_ERROR;
    pthread_mutex_lock(&r->c->mu);
    if (handle_ok_locked(r, "", NULL)) {
        pthread_mutex_unlock(&r->c->mu);
        return IG_REQ_ERROR;
    }
    r->refs++;
    while (!r->ended && !r->released) pthread_cond_wait(&r->cv, &r->c->mu);
    ig_req_status s = r->released ? IG_REQ_ERROR : r->status;
    unref_unlock(r);
    return s;
}

ig_status ig_request_stop(ig_request *r) {
    if (!r) return IG_OK;
    pthread_mutex_lock(&r->c->mu);
    ig_status st = handle_ok_locked(r, "ig_request_stop", NULL);
    if (!st && !r->ended) {
        r->stop_requested = 1;
        pthread_cond_signal(&r->c->work);
    }
    pthread_mutex_unlock(&r->c->mu);
    return st;
}

ig_status ig_request_release(ig_request *r) {
    if (!r) return IG_OK;
    core *c = r->c;
    pthread_mutex_lock(&c->mu);
    ig_status st = handle_ok_locked(r, "ig_request_release", NULL);
    if (st) {
        pthread_mutex_unlock(&c->mu);
        return st;
    }
    r->released = 1;
    if (!r->ended) {
        r->stop_requested = 1;
        pthread_cond_signal(&c->work);
    }
    r->notify = NULL; /* never called once release returns */
    pthread_cond_broadcast(&r->cv); /* readers and syncs blocked in r return (IG_ERR_INVALID) */
    unref_unlock(r);
    return IG_OK;
}

void ig_request_set_notify(ig_request *r, void (*fn)(void *user), void *user) {
    if (!r) return;
    pthread_mutex_lock(&r->c->mu);
    if (handle_ok_locked(r, "", NULL)) { /* a released handle: nothing to notify */
        pthread_mutex_unlock(&r->c->mu);
        return;
    }
    r->notify = fn;
    r->notify_user = user;
    if (fn && r->head) fn(user);
    pthread_mutex_unlock(&r->c->mu);
}

/* ---------------------------------------------------------------- engine */

/* pc_host_tier.copy over the model instance (the scheduler thread's) */
static ig_status host_tier_copy(void *user, int to_host, int32_t page, int32_t host_page) {
    ig_err err;
    return rt_model_kv_copy(user, to_host, page, host_page, &err);
}

/* The prefix cache's bound in pages (ig_engine_config.prefix_cache_pages; see ignis.h). A CPU
 * pool is an anonymous mapping committed page by page: without a bound the cache would keep every
 * page a distinct prompt ever wrote, and the resident memory would creep up to the whole pool. */
static int32_t prefix_cache_cap(const ig_engine_config *cfg, const ig_model_desc *d, int32_t n_pages) {
    int64_t cap = cfg->prefix_cache_pages;
    if (cap == 0 && d->device == IG_DEVICE_CPU) cap = n_pages / 16 > 256 ? n_pages / 16 : 256;
    if (cap <= 0 || cap > n_pages) cap = n_pages;
    return (int32_t)cap;
}

/* Package, model instance, pager, prefix cache and tokenizer of e (e->cfg set). */
static ig_status open_resources(ig_engine *e, const char *pkg_dir, ig_err *err) {
    const ig_engine_config *cfg = &e->cfg;
    rt_open_opts oo = {.verify_hashes = cfg->verify_hashes, .device = cfg->device};
    ig_status st = rt_package_open(pkg_dir, &oo, &e->pkg, err);
    if (st) return st;
    e->n_targets = e->pkg->n_variants > 1 ? e->pkg->n_variants : 1;
    snprintf(e->target, sizeof e->target, "%s", e->pkg->choice[0] ? e->pkg->choice : e->pkg->target);
    const ig_model_desc *d = e->pkg->desc;
    int64_t pages = cfg->kv_pages; /* 0 (with kv_bytes 0): rt_model_new sizes it by kv_fraction */
    if (cfg->kv_bytes > 0) pages = cfg->kv_bytes / (int64_t)d->kv_page_bytes;
    if (pages < 1 && cfg->kv_bytes > 0)
        return ig_fail(err, IG_ERR_INVALID, "KV budget of %lld bytes is less than one page (%llu bytes)",
                       (long long)cfg->kv_bytes, (unsigned long long)d->kv_page_bytes);
    if (pages > 0x7fffffff) pages = 0x7fffffff;
    rt_model_opts mo = {.max_tokens = cfg->max_tokens_per_step, .n_pages = (int32_t)pages, .kv_fraction = cfg->kv_fraction,
                        .n_threads = cfg->n_threads, .max_seqs = cfg->max_seqs, .tune = cfg->tune,
                        .kv_host_bytes = cfg->prefix_cache ? cfg->kv_host_bytes : 0};
    st = rt_model_new(e->pkg, &mo, &e->model, err);
    if (!st) st = kv_pager_new(e->model->ctx.n_pages, &e->pager, err);
    if (!st && cfg->prefix_cache) {
        /* the host tier's entries beside the pool's: at most 4x the pool's (a bounded table) */
        int64_t nh = e->model->n_host_pages, cap = 4 * (int64_t)e->model->ctx.n_pages;
        pc_host_tier tier = {.n_pages = (int32_t)(nh < cap ? nh : cap), .page_bytes = d->kv_page_bytes,
                             .user = e->model, .copy = host_tier_copy};
        st = pc_new(d->page_size, prefix_cache_cap(cfg, d, e->model->ctx.n_pages), &tier, &e->pc, err);
    }
    if (!st && e->pkg->has_tokenizer) st = tok_load_dir(pkg_dir, &e->tok, err);
    e->vocab = d->vocab;
    e->max_context = d->max_context;
    e->has_tokenizer = e->tok != NULL;
    return st;
}

/* The step buffers, sized once for max_tokens_per_step tokens and max_seqs sequences. */
static ig_status alloc_step_buffers(ig_engine *e, ig_err *err) {
    const ig_model_desc *d = e->pkg->desc;
    int32_t T = e->cfg.max_tokens_per_step, S = e->cfg.max_seqs;
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
    e->device_sampling = e->cfg.device_sampling && (d->caps & IG_MODEL_CAP_SAMPLE);
    /* constrained rows too, their masks uploaded beside the step (a --tp package's ranks would
     * disagree on the step's launches: their rows go through the host) */
    e->device_masks = e->device_sampling && (d->caps & IG_MODEL_CAP_MASK) && d->tp <= 1;
    e->b_masks = calloc((size_t)S, sizeof *e->b_masks);
    e->b_sampled = malloc(sizeof(ig_status) * S);
    e->b_errs = malloc(sizeof(ig_err) * S);
    if (!e->b_ids || !e->b_pos || !e->b_seq || !e->b_rows || !e->b_pages || !e->b_logits || !e->b_reqs ||
        !e->b_res || !e->b_sampled || !e->b_errs || !e->b_sp || !e->b_dev_tok || !e->b_masks)
        return ig_fail(err, IG_ERR_NOMEM, "out of memory for step buffers");
    return IG_OK;
}

/* Frees what open_resources and alloc_step_buffers made (the scheduler has stopped). */
static void free_resources(ig_engine *e) {
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
    free(e->b_masks);
    free(e->b_sampled);
    free(e->b_errs);
    eng_scorer_free(e->scorer);
    tok_free(e->tok);
    gr_vocab_free(e->gvocab);
    pthread_mutex_destroy(&e->gvocab_mu);
    pc_free(e->pc, e->pager);
    kv_pager_free(e->pager);
    rt_model_free(e->model);
    rt_package_close(e->pkg);
    ig_engine_config cfg = e->cfg;
    int32_t vocab = e->vocab, max_context = e->max_context;
    int has_tok = e->has_tokenizer;
    core *c = e->c;
    memset(e, 0, sizeof *e); /* the shell stays (core_free frees it) with the model facts */
    e->c = c;
    e->cfg = cfg;
    e->vocab = vocab;
    e->max_context = max_context;
    e->has_tokenizer = has_tok;
}

ig_status ig_engine_open(const char *pkg_dir, const ig_engine_config *cfg_in, ig_engine **out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "ig_engine_open: out is NULL");
    *out = NULL;
    if (!pkg_dir) return ig_fail(err, IG_ERR_INVALID, "ig_engine_open: the package folder is NULL");
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    if (cfg_in) {
        ig_status st = check_size("ig_engine_config", cfg_in->struct_size, sizeof cfg, err);
        if (st) return st;
        cfg = *cfg_in;
    }
    if (cfg.max_seqs <= 0) cfg.max_seqs = 32;
    if (cfg.max_tokens_per_step <= 0) cfg.max_tokens_per_step = 256;
    if (cfg.max_waiting <= 0) cfg.max_waiting = 1024;
    if (!(cfg.kv_fraction > 0.0f && cfg.kv_fraction <= 1.0f)) /* also NaN */
        return ig_fail(err, IG_ERR_INVALID, "kv_fraction (%g) must be in (0, 1]", (double)cfg.kv_fraction);
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
    pthread_mutex_init(&e->gvocab_mu, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->calls_done, NULL);
    c->refs = 1;
    c->engine = e;
    e->c = c;
    e->cfg = cfg;
    ig_status st = open_resources(e, pkg_dir, err);
    if (!st) st = alloc_step_buffers(e, err);
    if (!st) e->masks_overlap = sched_masks_overlap(e);
    if (!st) st = eng_scorer_new(e, err);
    if (!st) {
        if (pthread_create(&e->thread, NULL, sched_main, e) != 0)
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
    if (c->closing) { /* a second close of a shell kept alive by request handles */
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->closing = 1;
    while (c->n_calls > 0) pthread_cond_wait(&c->calls_done, &c->mu); /* starts already inside */
    c->shutdown = 1;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->mu);
    if (e->thread_started) pthread_join(e->thread, NULL);
    pthread_mutex_lock(&c->mu);
    if (e->pager) sched_reap_stopped(e); /* any request that arrived before shutdown was seen */
    pthread_mutex_unlock(&c->mu);
    free_resources(e);
    pthread_mutex_lock(&c->mu);
    int free_core;
    core_unref_locked(c, &free_core);
    pthread_mutex_unlock(&c->mu);
    if (free_core) core_free(c);
}

void ig_engine_get_stats(ig_engine *e, ig_engine_stats *s) {
    if (!s) return;
    if (!e) {
        memset(s, 0, sizeof *s);
        return;
    }
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    *s = c->stats;
    s->running = c->n_running;
    s->waiting = c->n_waiting;
    if (!c->closing) { /* the pager and the cache are freed once close has begun */
        s->kv_pages_total = e->pager->n_pages;
        s->kv_pages_free = e->pager->n_free;
        s->kv_pages_used = e->pager->n_pages - e->pager->n_free;
        s->kv_pages_cached = e->pc ? pc_evictable(e->pc, e->pager) : 0;
        if (e->pc) {
            pc_stats ps;
            pc_get_stats(e->pc, &ps);
            s->prefix_host_hit_tokens = ps.hits_host * e->pkg->desc->page_size;
            s->kv_host_pages_total = ps.host_pages, s->kv_host_pages_used = ps.host_pages_used;
            s->kv_bytes_to_host = ps.bytes_to_host, s->kv_bytes_from_host = ps.bytes_to_device;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

ig_status ig_engine_logits(ig_engine *e, const int32_t *ids, int32_t n_ids, float *out, ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "the logits buffer is NULL");
    ig_status st = engine_enter(e, err);
    if (st) return st;
    st = eng_scorer_run(e, ids, n_ids, out, err);
    engine_leave(e);
    return st;
}

int32_t ig_engine_vocab(const ig_engine *e) { return e ? e->vocab : 0; }
int32_t ig_engine_max_context(const ig_engine *e) { return e ? e->max_context : 0; }
int ig_engine_has_tokenizer(const ig_engine *e) { return e && e->has_tokenizer; }
const char *ig_engine_target(const ig_engine *e, int32_t *n_targets) {
    if (n_targets) *n_targets = e ? e->n_targets : 0;
    return e ? e->target : "";
}
