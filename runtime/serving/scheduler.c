/* scheduler.c — the engine's scheduler thread (see scheduler.h): admission, step planning under
 * the token budget, chunked prefill, preemption by recompute, the prefix cache's bookkeeping,
 * sampling, end conditions and the output queue each request's readers consume.
 *
 * A sequence is "tokens[0..n_tokens) known, KV computed for [0..n_kv)": prefill and decode are the
 * same operation (feed tokens[n_kv..n_tokens)). Preemption (no page left for a running sequence)
 * first evicts pages only the prefix cache holds, then releases the newest sequence's pages and
 * sends it back to the head of the waiting queue with n_kv = 0: it is recomputed from prompt +
 * generated tokens later (its prefix mostly from the cache), never failed.
 *
 * Prefix cache (prefix_cache.h): every full page a sequence completes is offered to the cache
 * under a chained hash of the tokens up to it; at admission a sequence takes the cached pages
 * that prefix its tokens (shared, read-only: its own writes start on a page of its own). With a
 * host tier, the evictions below move cached pages to host memory, and the admission's lookups
 * copy them back (queued before the step that reads them).
 *
 * Out of memory while queueing a token or its text ends that request with status ERROR and a
 * message (the final element is allocated when the request starts, so it always arrives). An
 * idle engine sleeps on core.work: no polling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

static void push_output(ig_request *r, ig_output *o) {
    out_node *n = OUT_NODE(o);
    n->next = NULL;
    if (r->tail)
        r->tail->next = n;
    else
        r->head = n;
    r->tail = n;
    pthread_cond_broadcast(&r->cv);
    if (r->notify) r->notify(r->notify_user);
}

ig_output *sched_new_output(const ig_request *r, int32_t n_tokens) {
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

/* Appends text. Returns 0, or -1 when out of memory (the text is kept as it was). */
static int output_append_text(ig_output *o, const char *s, size_t len) {
    if (!len) return 0;
    out_node *n = OUT_NODE(o);
    if (o->text_len + len + 1 > n->text_cap) {
        size_t cap = 2 * n->text_cap > o->text_len + len + 1 ? 2 * n->text_cap : o->text_len + len + 1;
        char *t = o->text == n->text_inline ? malloc(cap) : realloc(o->text, cap);
        if (!t) return -1;
        if (o->text == n->text_inline) memcpy(t, o->text, o->text_len + 1);
        o->text = t;
        n->text_cap = cap;
    }
    memcpy(o->text + o->text_len, s, len);
    o->text_len += len;
    o->text[o->text_len] = 0;
    return 0;
}

/* Ends a request (c->mu held): frees its pages, queues the final element (`last` when it carries
 * a token or text, taking ownership, else the one allocated at start), and drops the engine's
 * reference. The request must not be in any
 * list. */
static void finish_request(ig_engine *e, ig_request *r, ig_req_status st, ig_finish_reason why,
                           const char *errmsg, ig_output *last) {
    if (r->ended) return;
    kv_seq_release(e->pager, &r->kv);
    r->n_kv = 0;
    r->status = st;
    r->finish = why;
    if (last)
        ig_output_free(&r->final->o); /* not needed: last ends the queue */
    else
        last = &r->final->o;        /* allocated at start: the end always reaches the readers */
    r->final = NULL;
    last->status = st;
    last->finish = why;
    if (errmsg) snprintf(last->error, sizeof last->error, "%s", errmsg);
    push_output(r, last);
    r->ended = 1;
    pthread_cond_broadcast(&r->cv);
    int free_core;
    eng_request_unref_locked(r, &free_core); /* the engine's reference; the core is held by the engine */
}

static void list_remove(ig_request **head, ig_request *r) {
    for (ig_request **p = head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
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
void sched_reap_stopped(ig_engine *e) {
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
        int32_t page = pc_lookup(e->pc, e->pager, k, t);
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

/* With sliding windows on every layer, the next token (at position n_kv) reads keys from
 * n_kv - window + 1 on: pages wholly before that are released (after publish_pages offered them
 * to the prefix cache, which keeps its own reference). */
static void release_window(ig_engine *e, ig_request *r) {
    const int32_t w = e->pkg->kv_window, ps = e->pkg->desc->page_size;
    if (w <= 0 || r->n_kv - w + 1 < ps) return;
    kv_seq_drop_before(e->pager, &r->kv, (r->n_kv - w + 1) / ps);
}

/* Moves the head of the waiting queue into the running list with its first chunk of at most
 * `budget` tokens, reusing prefix-cache pages (c->mu held). Returns the chunk's length, or 0 when
 * it does not fit now (it stays at the head). */
static int32_t admit_head(ig_engine *e, int32_t budget) {
    core *c = e->c;
    const ig_model_desc *d = e->pkg->desc;
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
        return 0;
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
    return take;
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
                    finish_request(e, r, IG_REQ_FINISHED, IG_FINISH_KV, NULL, NULL);
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
        int32_t take = admit_head(e, budget);
        if (take == 0) break;
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
        /* released pages (-1, before the window) are never read: any valid id stands in */
        for (int32_t i = 0; i < mp; i++) e->b_pages[s * mp + i] = i < r->kv.n_pages && r->kv.pages[i] >= 0 ? r->kv.pages[i] : 0;
        if (r->n_kv + r->step_take == r->n_tokens) {
            r->step_row = n_out;
            e->b_rows[n_out++] = t - 1;
        }
        e->b_reqs[s] = r;
        s++;
    }
    /* rows whose request samples on the device: decided by the request's own params only. A
     * constrained row goes there with its mask where the model applies masks (its bans of EOS and
     * stop ids before min_new_tokens go into the mask, sched_masks_ready); other rows with bans,
     * and rows the device sampler cannot take (bias, penalties, logprobs), are sampled here */
    int32_t n_dev = 0, n_masked = 0;
    for (int32_t i = 0; i < s && e->device_sampling; i++) {
        ig_request *r = e->b_reqs[i];
        if (r->step_row < 0) continue;
        ig_fwd_sample *sp = &e->b_sp[r->step_row];
        memset(sp, 0, sizeof *sp);
        e->b_masks[r->step_row] = NULL;
        int bans = r->gm ? !e->device_masks
                         : r->n_gen < r->g.min_new_tokens && (e->pkg->n_eos > 0 || r->g.n_stop_ids > 0);
        if (bans || !smp_device_step(r->smp, sp)) continue;
        n_dev++;
        if (r->gm) e->b_masks[r->step_row] = r->gmask, n_masked++;
    }
    e->b_n_seqs = s;
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
    if (n_masked) {
        b->masks = e->b_masks;
        b->masks_wait = sched_masks_ready;
        b->masks_user = e;
    }
}

/* logits[i] := -inf for every token i the mask bits do not allow (and every i >= nv, the ids the
 * constraint's vocabulary does not cover); whole words of allowed tokens are skipped. */
static void apply_mask(float *logits, const uint32_t *bits, int32_t nv, int32_t vocab) {
    int32_t n = nv < vocab ? nv : vocab;
    for (int32_t w = 0; w * 32 < n; w++) {
        uint32_t x = bits[w];
        if (x == 0xFFFFFFFFu && w * 32 + 32 <= n) continue;
        int32_t end = w * 32 + 32 < n ? w * 32 + 32 : n;
        for (int32_t i = w * 32; i < end; i++)
            if (!(x >> (i & 31) & 1)) logits[i] = -INFINITY;
    }
    for (int32_t i = n; i < vocab; i++) logits[i] = -INFINITY;
}

/* Samples the next token of r from its logits row. Runs without the lock, for all sequences of
 * a step in parallel: it touches only r's sampler state and its row, both the scheduler's. */
static ig_status sample_one(ig_engine *e, ig_request *r, float *logits, smp_result *res, ig_err *err) {
    if (r->n_gen < r->g.min_new_tokens) {
        for (int32_t i = 0; i < e->pkg->n_eos; i++) logits[e->pkg->eos_ids[i]] = -INFINITY;
        for (int32_t i = 0; i < r->g.n_stop_ids; i++) logits[r->stop_ids[i]] = -INFINITY;
    }
    if (r->gm) { /* the constraint's mask: computed beside the forward (sched_masks.c), or here */
        uint32_t *bits = r->gmask;
        ig_status st = r->gmask_ready ? r->gmask_st : gr_matcher_mask(r->gm, bits, err);
        r->gmask_ready = 0;
        if (st) return st;
        apply_mask(logits, bits, gr_vocab_size(e->gvocab), e->vocab);
    }
    ig_status st = smp_sample(r->smp, logits, res, err);
    if (!st && r->gm && gr_matcher_accept(r->gm, res->token, err) != 1)
        st = ig_fail(err, IG_ERR_INTERNAL, "the constraint refused token %d that its mask allowed", res->token);
    return st;
}

/* Takes the token the device sampled for r (under r's mask when masked). */
static ig_status device_token(ig_engine *e, ig_request *r, int masked, int32_t tok, smp_result *res, ig_err *err) {
    if (masked) {
        r->gmask_ready = 0;
        if (r->gmask_st) return r->gmask_st; /* the mask failed (its message is in err) */
    }
    if (tok < 0 || tok >= e->vocab)
        return ig_fail(err, IG_ERR_INVALID, masked ? "the step's logits held NaN or +inf (or the constraint allowed no token)"
                                                   : "the step's logits held NaN or +inf (or were all -inf)");
    smp_device_accept(r->smp, tok, res);
    if (masked && gr_matcher_accept(r->gm, tok, err) != 1)
        return ig_fail(err, IG_ERR_INTERNAL, "the constraint refused token %d that its mask allowed", tok);
    return IG_OK;
}

/* Routes newly decoded text through r's stop-string matcher into o. Returns 1 when a stop
 * string completed (its text and anything after it are never emitted), -1 when out of memory. */
static int emit_text(ig_request *r, ig_output *o, const char *piece, size_t len) {
    if (!len) return 0;
    if (!r->sm) return output_append_text(o, piece, len);
    const char *em;
    size_t emn;
    int stopped = 0;
    if (stop_feed(r->sm, piece, len, &em, &emn, &stopped) != IG_OK) return -1;
    if (output_append_text(o, em, emn)) return -1;
    return stopped;
}

/* The text of token tok into o: incremental detokenization, then stop strings; at the end
 * (*why set by the caller, or a stop string completing here) what the detokenizer (not after
 * EOS: its text is not emitted) and the stop matcher still hold back. Returns 0, or -1 when
 * out of memory. */
static int token_text(ig_request *r, ig_output *o, int32_t tok, ig_finish_reason *why, int at_length) {
    const char *piece;
    size_t len = 0;
    ig_err err;
    int stop_string = 0;
    if (r->ts && *why == IG_FINISH_NONE && tok_stream_push(r->ts, tok, &piece, &len, &err) == IG_OK) {
        stop_string = emit_text(r, o, piece, len);
        if (stop_string < 0) return -1;
        if (stop_string) *why = IG_FINISH_STOP;
    }
    if (*why == IG_FINISH_NONE && at_length) *why = IG_FINISH_LENGTH;
    if (*why == IG_FINISH_NONE || stop_string) return 0;
    len = 0;
    if (r->ts && *why != IG_FINISH_EOS && tok_stream_flush(r->ts, &piece, &len, &err) == IG_OK) {
        stop_string = emit_text(r, o, piece, len);
        if (stop_string < 0) return -1;
    }
    if (r->sm && !stop_string) {
        const char *em;
        size_t emn;
        stop_flush(r->sm, &em, &emn);
        if (output_append_text(o, em, emn)) return -1;
    }
    return 0;
}

/* Takes r out of the running list and ends it (c->mu held); see finish_request. */
static void end_running(ig_engine *e, ig_request *r, ig_req_status st, ig_finish_reason why, const char *msg,
                        ig_output *last) {
    list_remove(&e->c->run_head, r);
    e->c->n_running--;
    finish_request(e, r, st, why, msg, last);
}

/* Appends the sampled token to r and emits it, or ends r (c->mu held). */
static void advance(ig_engine *e, ig_request *r, ig_status sampled, const smp_result *res, const ig_err *serr) {
    core *c = e->c;
    const ig_model_desc *d = e->pkg->desc;
    if (sampled != IG_OK) {
        end_running(e, r, IG_REQ_ERROR, IG_FINISH_NONE, serr->msg, NULL);
        return;
    }
    int32_t tok = res->token;
    r->tokens[r->n_tokens++] = tok;
    r->n_gen++;
    c->stats.tokens_generated++;
    r->status = IG_REQ_GENERATING;
    ig_output *o = sched_new_output(r, 1);
    ig_finish_reason why = IG_FINISH_NONE;
    if (is_eos(e, r, tok))
        why = IG_FINISH_EOS;
    else if (is_stop_id(r, tok))
        why = IG_FINISH_STOP;
    int at_length = r->n_gen >= r->g.max_new_tokens || r->n_tokens >= d->max_context;
    int complete = r->gm && why == IG_FINISH_NONE && !at_length && gr_matcher_must_end(r->gm); /* nothing may follow */
    if (!o || token_text(r, o, tok, &why, at_length || complete)) {
        ig_output_free(o);
        char msg[96];
        snprintf(msg, sizeof msg, "out of memory queueing generated token %d (the %d-th)", tok, r->n_gen);
        end_running(e, r, IG_REQ_ERROR, IG_FINISH_NONE, msg, NULL);
        return;
    }
    o->n_tokens = 1;
    o->tokens[0] = tok;
    o->logprobs[0] = res->logprob;
    for (int32_t k = 0; k < o->n_top; k++) {
        o->top[k].id = res->top[k].id;
        o->top[k].logprob = res->top[k].logprob;
    }
    if (complete && why == IG_FINISH_LENGTH) why = IG_FINISH_STOP; /* the constraint's end */
    else if (why == IG_FINISH_LENGTH && r->gm && !gr_matcher_can_end(r->gm)) why = IG_FINISH_INCOMPLETE;
    if (why != IG_FINISH_NONE)
        end_running(e, r, IG_REQ_FINISHED, why, NULL, o);
    else
        push_output(r, o);
}

/* Samples every sequence of the step whose chunk reached its last known token, in parallel and
 * without the lock (each touches only its own sampler state and logits row). */
static void sample_step(ig_engine *e, const ig_fwd_batch *b) {
    const int32_t V = e->vocab;
    /* as many threads as the model's steps: a larger team would grow libgomp's pool past the
     * CPUs and throttle every barrier's spin-wait into a futex sleep */
    const int nth = e->model->ctx.n_threads > 0 ? e->model->ctx.n_threads : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth) if (b->n_out > 1)
    for (int32_t s = 0; s < b->n_seqs; s++) {
        ig_request *r = e->b_reqs[s];
        if (r->step_row < 0) continue;
        if (b->sample && b->sample[r->step_row].on) {
            e->b_sampled[s] = device_token(e, r, b->masks && b->masks[r->step_row], b->sampled[r->step_row],
                                           &e->b_res[s], &e->b_errs[s]);
        } else {
            e->b_sampled[s] = sample_one(e, r, e->b_logits + (size_t)r->step_row * V, &e->b_res[s], &e->b_errs[s]);
        }
    }
}

/* Takes the step's results (c->mu held): KV progress, prefix-cache pages, sampled tokens; a
 * failed forward (st) ends every sequence of the step with its message. */
static void apply_step(ig_engine *e, const ig_fwd_batch *b, ig_status st, const ig_err *err) {
    core *c = e->c;
    c->stats.steps++;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        ig_request *r = e->b_reqs[s];
        int32_t take = r->step_take;
        r->step_take = 0;
        if (st) {
            end_running(e, r, IG_REQ_ERROR, IG_FINISH_NONE, err->msg, NULL);
            continue;
        }
        if (r->n_kv < r->n_prompt) c->stats.tokens_prefilled += take;
        r->n_kv += take;
        publish_pages(e, r);
        release_window(e, r);
        if (r->step_row >= 0) advance(e, r, e->b_sampled[s], &e->b_res[s], &e->b_errs[s]);
    }
}

/* Nothing to run this step (c->mu held): sleep until work arrives, or fail the head of the queue
 * when nothing runs and it still does not fit (it never can: start() checks prompts against the
 * pool; this guards recomputes). */
static void idle_step(ig_engine *e) {
    core *c = e->c;
    if (!c->run_head && !c->wait_head) {
        pthread_cond_wait(&c->work, &c->mu);
    } else if (!c->run_head) {
        ig_request *r = c->wait_head;
        c->wait_head = r->next;
        if (!c->wait_head) c->wait_tail = NULL;
        r->next = NULL;
        c->n_waiting--;
        finish_request(e, r, IG_REQ_ERROR, IG_FINISH_NONE, "the sequence no longer fits in the KV cache", NULL);
    }
}

void *sched_main(void *arg) {
    ig_engine *e = arg;
    core *c = e->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        sched_reap_stopped(e);
        if (c->shutdown) break;
        int32_t n_tok = 0;
        if (plan_step(e, &n_tok) == 0) {
            idle_step(e);
            continue;
        }
        ig_fwd_batch b;
        build_batch(e, &b);
        pthread_mutex_unlock(&c->mu);
        ig_err err;
        sched_masks_begin(e, &b); /* the constrained rows' masks, while the model runs */
        ig_status st = rt_model_forward(e->model, &b, &err);
        sched_masks_end(e);
        if (!st) sample_step(e, &b);
        pthread_mutex_lock(&c->mu);
        apply_step(e, &b, st, &err);
    }
    pthread_mutex_unlock(&c->mu);
    sched_masks_free(e->masks);
    e->masks = NULL;
    return NULL;
}

