/* srv_job.c — one chat or completion request as engine requests: prompts rendered (chat
 * template) and tokenized, n choices per prompt started with their own seeds, their outputs
 * taken as they come (srv_job_pump, on the server's loop thread) and turned into server-sent
 * event chunks (stream) or kept for the response object. The engine's text is already cut at
 * UTF-8 character boundaries (tok_stream) and at stop strings, so a chunk never splits a
 * character. Token strings in logprobs are the tokens' bytes as valid UTF-8 (U+FFFD for a
 * partial character), with the raw bytes beside them as OpenAI gives them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "srv_internal.h"

/* ---- small helpers */

double srv_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int sbuf_add(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int sbuf_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof tmp) return sbuf_add(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = sbuf_add(b, big, (size_t)n);
    free(big);
    return rc;
}

void sbuf_free(sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *srv_utf8_clean(const char *s, size_t n) {
    uint32_t *cps = malloc(sizeof(uint32_t) * (n + 1));
    char *out = malloc(3 * n + 1); /* an invalid byte (1) becomes U+FFFD (3) */
    if (!cps || !out) {
        free(cps);
        free(out);
        return NULL;
    }
    size_t k = tok_utf8_decode(s, n, cps, NULL), o = 0;
    for (size_t i = 0; i < k; i++) o += (size_t)tok_utf8_put(cps[i], out + o);
    out[o] = 0;
    free(cps);
    return out;
}

static uint64_t next_rand(srv *s) { /* xorshift64* */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ull;
}

static const char *finish_name(const srv_choice *c) {
    /* the KV cache cutting a sequence is a length limit to an OpenAI client */
    if (c->status == IG_REQ_FINISHED)
        return c->finish == IG_FINISH_LENGTH || c->finish == IG_FINISH_KV || c->finish == IG_FINISH_INCOMPLETE ? "length" : "stop";
    return c->status == IG_REQ_ERROR ? "error" : "abort";
}

/* ---- starting */

/* Tokens of prompt i: the chat template's rendering, or the completion prompt's text. */
static int tokenize_prompt(srv_job *j, srv_prompt *pr, srv_error *err) {
    srv *s = j->s;
    if (pr->ids) return 0;
    ig_err e = {{0}};
    char *text = NULL;
    size_t len = 0, n = 0;
    int add_special = 1;
    if (j->p.kind == SRV_CHAT) {
        ct_vars v = {.bos_token = s->bos, .eos_token = s->eos, .add_generation_prompt = 1, .tools = j->p.tools};
        ig_status st = ct_render(s->tmpl, j->p.messages, &v, &text, &len, &e);
        if (st) return srv_fail(err, st == IG_ERR_NOMEM ? 503 : 400, "messages", "the chat template failed: %s", e.msg);
        add_special = 0; /* the template writes the special tokens itself */
    }
    const char *t = text ? text : pr->text;
    ig_status st = tok_encode(s->tok, t, text ? len : strlen(t), add_special, 1, &pr->ids, &n, &e);
    free(text);
    if (st) return srv_fail(err, 400, j->p.kind == SRV_CHAT ? "messages" : "prompt", "tokenization failed: %s", e.msg);
    pr->n_ids = (int32_t)n;
    return 0;
}

/* The prompt against the context: prompt + max_tokens must fit (max_tokens defaults to the rest). */
static int check_length(srv_job *j, const srv_prompt *pr, ig_gen_config *g, srv_error *err) {
    int32_t ctx = j->s->mi.max_context;
    const char *what = j->p.kind == SRV_CHAT ? "messages" : "prompt";
    if (pr->n_ids < 1) return srv_fail(err, 400, what, "the prompt is empty (0 tokens)");
    if (pr->n_ids >= ctx)
        return srv_fail(err, 400, what, "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens",
                        ctx, what, pr->n_ids);
    if (!j->p.max_tokens_given) {
        g->max_new_tokens = ctx - pr->n_ids;
    } else if ((int64_t)pr->n_ids + g->max_new_tokens > ctx) {
        return srv_fail(err, 400, "max_tokens",
                        "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the %s, "
                        "%d for the completion)", ctx, (long long)pr->n_ids + g->max_new_tokens, pr->n_ids, what,
                        g->max_new_tokens);
    }
    if (g->min_new_tokens > g->max_new_tokens) g->min_new_tokens = g->max_new_tokens;
    return 0;
}

static void on_output(void *user) {
    srv_job *j = user;
    srv *s = j->s;
    pthread_mutex_lock(&s->ready_mu);
    int wake = !s->ready;
    if (!j->queued) {
        j->queued = 1;
        j->ready_next = s->ready;
        s->ready = j;
    }
    pthread_mutex_unlock(&s->ready_mu);
    if (wake) {
        uint64_t one = 1;
        ssize_t w = write(s->efd, &one, sizeof one);
        (void)w;
    }
}

/* Replies are searched for tool calls when the request has tools, unless response_format asked
 * for JSON: that reply is the content the client wants, whatever keys it has. */
static int parse_calls(const srv_params *p) {
    return p->tools && !(p->guide_param && !strcmp(p->guide_param, "response_format"));
}

static int start_choice(srv_job *j, srv_choice *c, const ig_gen_config *g0, srv_error *err) {
    srv *s = j->s;
    ig_gen_config g = *g0;
    g.seed = j->p.seed_given ? g0->seed + (uint64_t)c->index : next_rand(s);
    const srv_prompt *pr = &j->p.prompts[c->prompt];
    ig_err e = {{0}};
    ig_status st = ig_request_start(s->e, pr->ids, pr->n_ids, &g, &c->req, &e);
    if (st == IG_ERR_BUSY) return srv_fail(err, 429, NULL, "the server is busy: %s", e.msg);
    if (st == IG_ERR_CLOSED) return srv_fail(err, 503, NULL, "the server is shutting down");
    if (st == IG_ERR_INVALID) return srv_fail(err, 400, j->p.kind == SRV_CHAT ? "messages" : "prompt", "%s", e.msg);
    if ((st == IG_ERR_UNSUPPORTED || st == IG_ERR_FORMAT) && j->p.guide_param)
        return srv_fail(err, 400, j->p.guide_param, "'%s' cannot be used for guided decoding: %s", j->p.guide_param, e.msg);
    if (st) return srv_fail(err, 500, NULL, "the engine could not start the request: %s", e.msg);
    c->t_last = j->t_start;
    if (j->p.kind == SRV_CHAT && j->p.stream && (parse_calls(&j->p) || j->p.tool_name) &&
        !(c->ts = srv_tool_stream_new(j->p.tool_name, j->p.tools_required, next_rand(s))))
        return srv_fail(err, 503, NULL, "out of memory");
    ig_request_set_notify(c->req, on_output, j);
    return 0;
}

int srv_job_start(srv *s, srv_params *p, srv_job **out, srv_error *err) {
    *out = NULL;
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_params_free(p);
        return srv_fail(err, 503, NULL, "out of memory");
    }
    j->s = s;
    j->p = *p;
    memset(p, 0, sizeof *p);
    j->t_start = srv_now();
    j->created = (long)time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%016llx", j->p.kind == SRV_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)next_rand(s));
    j->n_choices = j->p.n * j->p.n_prompts;
    if (!(j->ch = calloc((size_t)j->n_choices, sizeof *j->ch))) {
        srv_job_free(j);
        return srv_fail(err, 503, NULL, "out of memory");
    }
    s->n_jobs++;
    int rc = 0;
    for (int32_t i = 0; i < j->p.n_prompts && !rc; i++) {
        ig_gen_config g = j->p.g;
        rc = tokenize_prompt(j, &j->p.prompts[i], err);
        if (!rc) rc = check_length(j, &j->p.prompts[i], &g, err);
        j->prompt_tokens += j->p.prompts[i].n_ids;
        for (int32_t k = 0; k < j->p.n && !rc; k++) {
            srv_choice *c = &j->ch[i * j->p.n + k];
            c->index = i * j->p.n + k;
            c->prompt = i;
            rc = start_choice(j, c, &g, err);
        }
    }
    if (rc) {
        srv_job_free(j);
        return -1;
    }
    s->m.prompt_tokens += (uint64_t)j->prompt_tokens;
    *out = j;
    return 0;
}

/* ---- outputs */

static cJSON *token_entry(srv *s, int32_t id, float lp, int with_bytes) {
    char *text = NULL;
    size_t len = 0;
    ig_err e;
    cJSON *o = cJSON_CreateObject();
    if (tok_decode(s->tok, &id, 1, 0, &text, &len, &e)) text = NULL, len = 0;
    char *clean = srv_utf8_clean(text ? text : "", len);
    cJSON_AddStringToObject(o, "token", clean ? clean : "");
    cJSON_AddNumberToObject(o, "logprob", isfinite(lp) ? lp : -9999.0);
    if (with_bytes) {
        cJSON *b = cJSON_AddArrayToObject(o, "bytes");
        for (size_t i = 0; i < len; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)text[i]));
    }
    free(clean);
    free(text);
    return o;
}

/* Chat logprobs of tokens [0, n) of o: entries appended to arr. */
static void chat_logprobs(srv *s, const ig_output *o, int32_t n, cJSON *arr) {
    for (int32_t t = 0; t < n; t++) {
        cJSON *e = token_entry(s, o->tokens[t], o->logprobs[t], 1);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int32_t k = 0; k < o->n_top; k++) {
            const ig_logprob *l = &o->top[(size_t)t * o->n_top + k];
            cJSON_AddItemToArray(top, token_entry(s, l->id, l->logprob, 1));
        }
        cJSON_AddItemToArray(arr, e);
    }
}

/* Completion logprobs of tokens [0, n) of o appended to the object's four lists. */
static void completion_logprobs(srv *s, srv_choice *c, const ig_output *o, int32_t n, cJSON *lp) {
    cJSON *toks = cJSON_GetObjectItem(lp, "tokens"), *lps = cJSON_GetObjectItem(lp, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItem(lp, "top_logprobs"), *offs = cJSON_GetObjectItem(lp, "text_offset");
    for (int32_t t = 0; t < n; t++) {
        cJSON *e = token_entry(s, o->tokens[t], o->logprobs[t], 0);
        const char *str = cJSON_GetObjectItem(e, "token")->valuestring;
        cJSON_AddItemToArray(toks, cJSON_CreateString(str));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(cJSON_GetObjectItem(e, "logprob")->valuedouble));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)c->text_off));
        c->text_off += strlen(str);
        cJSON *top = cJSON_CreateObject();
        for (int32_t k = 0; k < o->n_top; k++) {
            const ig_logprob *l = &o->top[(size_t)t * o->n_top + k];
            cJSON *te = token_entry(s, l->id, l->logprob, 0);
            cJSON_AddNumberToObject(top, cJSON_GetObjectItem(te, "token")->valuestring, l->logprob);
            cJSON_Delete(te);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_Delete(e);
    }
}

static cJSON *new_logprobs(srv_kind kind) {
    if (kind == SRV_CHAT) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddArrayToObject(o, "content");
        return o;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddArrayToObject(o, "tokens");
    cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON_AddArrayToObject(o, "text_offset");
    return o;
}

/* The logprobs of o's tokens (the EOS token that ended the choice left out) into lp. */
static void add_logprobs(srv_job *j, srv_choice *c, const ig_output *o, cJSON *lp) {
    int32_t n = o->n_tokens;
    if (o->status == IG_REQ_FINISHED && o->finish == IG_FINISH_EOS && n > 0) n--;
    if (j->p.kind == SRV_CHAT)
        chat_logprobs(j->s, o, n, cJSON_GetObjectItem(lp, "content"));
    else
        completion_logprobs(j->s, c, o, n, lp);
}

static cJSON *chunk_base(srv_job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", j->p.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->s->model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", j->s->fingerprint);
    cJSON_AddArrayToObject(o, "choices");
    return o;
}

static void emit(srv_job *j, cJSON *chunk) {
    if (j->p.include_usage && !cJSON_GetObjectItem(chunk, "usage")) cJSON_AddNullToObject(chunk, "usage");
    char *s = cJSON_PrintUnformatted(chunk);
    cJSON_Delete(chunk);
    if (!s || sbuf_add(&j->out, "data: ", 6) || sbuf_add(&j->out, s, strlen(s)) || sbuf_add(&j->out, "\n\n", 2))
        j->failed = 1;
    free(s);
}

/* One streamed chunk for choice c: text (may be NULL), delta.tool_calls (taken; NULL or empty:
 * none), logprobs (taken), finish reason or NULL. */
static void emit_choice(srv_job *j, srv_choice *c, const char *text, cJSON *calls, cJSON *lp, const char *finish) {
    cJSON *chunk = chunk_base(j), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", c->index);
    if (j->p.kind == SRV_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (!c->started) cJSON_AddStringToObject(d, "role", "assistant");
        if (text) cJSON_AddStringToObject(d, "content", text);
        if (calls && cJSON_GetArraySize(calls)) cJSON_AddItemToObject(d, "tool_calls", calls), calls = NULL;
        c->started = 1;
    } else {
        cJSON_AddStringToObject(ch, "text", text ? text : "");
    }
    if (lp)
        cJSON_AddItemToObject(ch, "logprobs", lp);
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(cJSON_GetObjectItem(chunk, "choices"), ch);
    cJSON_Delete(calls);
    emit(j, chunk);
}

/* A streamed chat piece through the tool-call parser: content and tool_calls deltas. */
static void emit_tool_piece(srv_job *j, srv_choice *c, const ig_output *o, cJSON *lp, int end) {
    sbuf content = {0};
    cJSON *calls = cJSON_CreateArray();
    if (!calls || srv_tool_stream_feed(c->ts, o->text, o->text_len, end, &content, calls)) j->failed = 1;
    if (content.len || cJSON_GetArraySize(calls) || lp || !c->started)
        emit_choice(j, c, content.len ? content.p : NULL, calls, lp, NULL);
    else
        cJSON_Delete(calls);
    sbuf_free(&content);
}

static cJSON *usage_json(const srv_job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", j->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", j->prompt_tokens + j->completion_tokens);
    return u;
}

/* The end of a streamed job: the usage chunk when asked for, then [DONE]. */
static void stream_end(srv_job *j) {
    if (j->p.include_usage) {
        cJSON *chunk = chunk_base(j);
        cJSON_AddItemToObject(chunk, "usage", usage_json(j));
        emit(j, chunk);
    }
    if (sbuf_add(&j->out, "data: [DONE]\n\n", 14)) j->failed = 1;
}

/* An engine error in a stream: an error event (the status line went out already). */
static void stream_error(srv_job *j, const srv_choice *c) {
    srv_error e;
    srv_fail(&e, 500, NULL, "generation failed: %s", c->error);
    char *s = srv_error_json(&e);
    if (s) sbuf_printf(&j->out, "data: %s\n\n", s);
    free(s);
}

static void timing(srv_job *j, srv_choice *c, int32_t n_tokens) {
    srv *s = j->s;
    double now = srv_now();
    if (n_tokens <= 0) return;
    if (!j->got_first) {
        srv_hist_add(&s->m.ttft, now - j->t_start);
        j->got_first = 1;
    } else if (c->n_gen > 0) {
        for (int32_t i = 0; i < n_tokens; i++) srv_hist_add(&s->m.itl, (now - c->t_last) / n_tokens);
    }
    c->t_last = now;
}

static void take_output(srv_job *j, srv_choice *c, const ig_output *o) {
    timing(j, c, o->n_tokens);
    c->n_gen += o->n_tokens;
    j->completion_tokens += o->n_tokens;
    j->s->m.generation_tokens += (uint64_t)o->n_tokens;
    int end = o->status >= IG_REQ_FINISHED;
    cJSON *lp = NULL;
    if (j->p.logprobs && o->n_tokens && o->logprobs) {
        if (j->p.stream) lp = new_logprobs(j->p.kind);
        else if (!c->lp) c->lp = new_logprobs(j->p.kind);
        add_logprobs(j, c, o, lp ? lp : c->lp);
    }
    if (end) {
        c->ended = 1;
        c->status = o->status;
        c->finish = o->finish;
        snprintf(c->error, sizeof c->error, "%s", o->error);
        j->n_ended++;
        if (o->status == IG_REQ_ERROR) j->failed = 1;
    }
    if (!j->p.stream) {
        if (sbuf_add(&c->text, o->text, o->text_len)) j->failed = 1;
        return;
    }
    if (o->status == IG_REQ_ERROR) {
        cJSON_Delete(lp);
        stream_error(j, c);
        return;
    }
    if (c->ts)
        emit_tool_piece(j, c, o, lp, end);
    else if (o->text_len || lp || !c->started)
        emit_choice(j, c, o->text, NULL, lp, NULL);
    if (end) {
        int calls = c->ts && !j->p.tool_name && srv_tool_stream_calls(c->ts) > 0;
        emit_choice(j, c, NULL, NULL, NULL, calls && c->status == IG_REQ_FINISHED ? "tool_calls" : finish_name(c));
    }
}

int srv_job_pump(srv_job *j) {
    int got = 0;
    for (int32_t i = 0; i < j->n_choices; i++) {
        srv_choice *c = &j->ch[i];
        ig_output *o;
        ig_err e;
        while (!c->ended && ig_request_read(c->req, 0, &o, &e) == IG_OK) {
            take_output(j, c, o);
            ig_output_free(o);
            got = 1;
        }
    }
    if (!j->finished && j->n_ended == j->n_choices) {
        if (j->p.stream) stream_end(j);
        j->finished = 1;
        srv_hist_add(&j->s->m.e2e, srv_now() - j->t_start);
        got = 1;
    }
    return got;
}

/* A forced tool_choice's call: the reply is its arguments. */
static cJSON *named_call(srv_job *j, srv_choice *c) {
    char cid[40];
    snprintf(cid, sizeof cid, "call_%012llx%02d", (unsigned long long)(next_rand(j->s) & 0xffffffffffffull), 0);
    cJSON *calls = cJSON_CreateArray(), *call = cJSON_CreateObject();
    cJSON_AddItemToArray(calls, call);
    cJSON_AddStringToObject(call, "id", cid);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(call, "function");
    cJSON_AddStringToObject(fn, "name", j->p.tool_name);
    cJSON_AddStringToObject(fn, "arguments", c->text.p ? c->text.p : "");
    return calls;
}

static cJSON *response_choice(srv_job *j, srv_choice *c) {
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", c->index);
    const char *finish = finish_name(c);
    if (j->p.kind == SRV_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        char *content = NULL;
        cJSON *calls = j->p.tool_name ? named_call(j, c)
                       : parse_calls(&j->p) && c->text.p ? srv_parse_tool_calls(c->text.p, &content, next_rand(j->s), j->p.tools_required) : NULL;
        if (calls) {
            if (content && content[strspn(content, " \n")])
                cJSON_AddStringToObject(m, "content", content);
            else
                cJSON_AddNullToObject(m, "content");
            cJSON_AddItemToObject(m, "tool_calls", calls);
            if (!j->p.tool_name) finish = "tool_calls"; /* a forced call ends "stop", as OpenAI's do */
        } else {
            cJSON_AddStringToObject(m, "content", c->text.p ? c->text.p : "");
        }
        free(content);
    } else {
        cJSON_AddStringToObject(ch, "text", c->text.p ? c->text.p : "");
    }
    if (c->lp) {
        cJSON_AddItemToObject(ch, "logprobs", c->lp);
        c->lp = NULL;
    } else {
        cJSON_AddNullToObject(ch, "logprobs");
    }
    cJSON_AddStringToObject(ch, "finish_reason", finish);
    return ch;
}

char *srv_job_response(srv_job *j, srv_error *err) {
    for (int32_t i = 0; i < j->n_choices; i++)
        if (j->ch[i].status == IG_REQ_ERROR) return srv_fail(err, 500, NULL, "generation failed: %s", j->ch[i].error), NULL;
    if (j->failed) return srv_fail(err, 503, NULL, "out of memory building the response"), NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", j->p.kind == SRV_CHAT ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->s->model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", j->s->fingerprint);
    cJSON *chs = cJSON_AddArrayToObject(o, "choices");
    for (int32_t i = 0; i < j->n_choices; i++) cJSON_AddItemToArray(chs, response_choice(j, &j->ch[i]));
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) srv_fail(err, 503, NULL, "out of memory building the response");
    return s;
}

void srv_job_stop(srv_job *j) {
    for (int32_t i = 0; i < j->n_choices; i++)
        if (j->ch[i].req && !j->ch[i].ended) ig_request_stop(j->ch[i].req);
}

void srv_job_free(srv_job *j) {
    if (!j) return;
    srv *s = j->s;
    for (int32_t i = 0; j->ch && i < j->n_choices; i++) {
        ig_request_release(j->ch[i].req); /* no notify after this returns */
        sbuf_free(&j->ch[i].text);
        cJSON_Delete(j->ch[i].lp);
        srv_tool_stream_free(j->ch[i].ts);
    }
    pthread_mutex_lock(&s->ready_mu);
    if (j->queued)
        for (srv_job **p = &s->ready; *p; p = &(*p)->ready_next)
            if (*p == j) {
                *p = j->ready_next;
                break;
            }
    pthread_mutex_unlock(&s->ready_mu);
    if (j->ch) s->n_jobs--;
    free(j->ch);
    sbuf_free(&j->out);
    srv_params_free(&j->p);
    free(j);
}
