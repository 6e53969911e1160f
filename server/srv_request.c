/* srv_request.c — request bodies of /v1/chat/completions and /v1/completions: JSON parsing and
 * validation, field by field, into srv_params (an ig_gen_config plus what the HTTP side needs).
 *
 * Each top-level field has a row in `fields`: its name, the endpoints that take it and the
 * function that checks it. A field no row names is refused (400 naming it), as OpenAI does; a
 * JSON null counts as "not given". Every number is checked for its type (integers must be
 * integral) and range; messages and prompts for their shape. Cross-field rules (top_logprobs
 * needs logprobs, stream_options needs stream, min_tokens <= max_tokens, a named tool_choice
 * names a tool) run after the rows. Guided decoding's fields are read in srv_guided.c.
 * Nothing here needs the engine: the fuzz target (tests/fuzz/fuzz_server_request.c) drives
 * srv_parse_request directly. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

#define MAX_STOPS 16
#define MAX_LOGIT_BIAS 1024
#define MAX_STOP_IDS 1024

int srv_fail(srv_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    e->code = NULL;
    e->type = status == 401   ? "authentication_error"
              : status == 404 ? "not_found_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

char *srv_error_json(const srv_error *e) {
    cJSON *root = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(root, "error");
    char *msg = srv_utf8_clean(e->msg, strlen(e->msg)); /* it may quote the client's bytes */
    cJSON_AddStringToObject(o, "message", msg ? msg : "out of memory");
    free(msg);
    cJSON_AddStringToObject(o, "type", e->type ? e->type : "server_error");
    if (e->param[0])
        cJSON_AddStringToObject(o, "param", e->param);
    else
        cJSON_AddNullToObject(o, "param");
    if (e->code)
        cJSON_AddStringToObject(o, "code", e->code);
    else
        cJSON_AddNullToObject(o, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

cJSON *srv_parse_json(const char *body, size_t len, srv_error *err) {
    if (len == 0) return srv_fail(err, 400, NULL, "the request body is empty: a JSON object is expected"), NULL;
    if (!tok_utf8_valid(body, len)) return srv_fail(err, 400, NULL, "the request body is not valid UTF-8"), NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return srv_fail(err, 400, NULL, "malformed JSON in the request body near byte %zu", at), NULL;
    }
    for (const char *q = end; q && q < body + len; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r' && *q != 0) {
            cJSON_Delete(root);
            return srv_fail(err, 400, NULL, "malformed JSON: extra text after the object at byte %zu", (size_t)(q - body)), NULL;
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return srv_fail(err, 400, NULL, "the request body must be a JSON object"), NULL;
    }
    return root;
}

/* ---- typed field readers: each returns 0 or -1 with err naming the field */

static int get_number(const cJSON *v, const char *name, double lo, double hi, double *out, srv_error *err) {
    if (!cJSON_IsNumber(v)) return srv_fail(err, 400, name, "'%s' must be a number", name);
    double x = v->valuedouble;
    if (!isfinite(x) || x < lo || x > hi)
        return srv_fail(err, 400, name, "'%s' must be in [%g, %g], got %g", name, lo, hi, x);
    *out = x;
    return 0;
}

static int get_int(const cJSON *v, const char *name, double lo, double hi, int64_t *out, srv_error *err) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return srv_fail(err, 400, name, "'%s' must be an integer", name);
    double x = v->valuedouble;
    if (x < lo || x > hi) return srv_fail(err, 400, name, "'%s' must be in [%.0f, %.0f], got %.0f", name, lo, hi, x);
    *out = (int64_t)x;
    return 0;
}

static int get_bool(const cJSON *v, const char *name, int *out, srv_error *err) {
    if (!cJSON_IsBool(v)) return srv_fail(err, 400, name, "'%s' must be true or false", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_i32(const cJSON *v, const char *name, double lo, double hi, int32_t *out, srv_error *err) {
    int64_t x = 0;
    if (get_int(v, name, lo, hi, &x, err)) return -1;
    *out = (int32_t)x;
    return 0;
}

static int get_f32(const cJSON *v, const char *name, double lo, double hi, float *out, srv_error *err) {
    double x = 0;
    if (get_number(v, name, lo, hi, &x, err)) return -1;
    *out = (float)x;
    return 0;
}

/* ---- the fields */

typedef int (*field_fn)(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err);

static int f_model(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (!cJSON_IsString(v)) return srv_fail(err, 400, "model", "'model' must be a string");
    if (strcmp(v->valuestring, mi->name)) {
        srv_fail(err, 404, "model", "The model '%s' does not exist: this server serves '%s'", v->valuestring, mi->name);
        err->code = "model_not_found";
        return -1;
    }
    return 0;
}

static int f_max_tokens(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (get_i32(v, v->string, 1, 0x7fffffff, &p->g.max_new_tokens, err)) return -1;
    if (p->g.max_new_tokens >= mi->max_context)
        return srv_fail(err, 400, v->string, "'%s' is %d but the model's context is %d tokens, the prompt included",
                        v->string, p->g.max_new_tokens, mi->max_context);
    p->max_tokens_given = 1;
    return 0;
}

static int f_temperature(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_f32(v, "temperature", 0, 2, &p->g.temperature, err);
}

static int f_top_p(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (get_f32(v, "top_p", 0, 1, &p->g.top_p, err)) return -1;
    return p->g.top_p > 0 ? 0 : srv_fail(err, 400, "top_p", "'top_p' must be in (0, 1], got 0");
}

static int f_n(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_i32(v, "n", 1, mi->max_n, &p->n, err);
}

static int f_best_of(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    int32_t b = 0;
    if (get_i32(v, "best_of", 1, mi->max_n, &b, err)) return -1;
    return b == 1 ? 0 : srv_fail(err, 400, "best_of", "'best_of' other than 1 is not supported (use n)");
}

static int add_stop(srv_params *p, const cJSON *s, srv_error *err) {
    if (!cJSON_IsString(s)) return srv_fail(err, 400, "stop", "'stop' must be a string or a list of strings");
    if (!s->valuestring[0]) return srv_fail(err, 400, "stop", "'stop' strings must not be empty");
    if (p->g.n_stop_strings >= MAX_STOPS) return srv_fail(err, 400, "stop", "'stop' takes at most %d strings", MAX_STOPS);
    p->stops[p->g.n_stop_strings++] = s->valuestring;
    return 0;
}

static int f_stop(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (!p->stops && !(p->stops = calloc(MAX_STOPS, sizeof *p->stops)))
        return srv_fail(err, 503, NULL, "out of memory");
    if (!cJSON_IsArray(v)) return add_stop(p, v, err);
    const cJSON *s;
    cJSON_ArrayForEach(s, v) if (add_stop(p, s, err)) return -1;
    return 0;
}

static int f_seed(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    int64_t s;
    /* int64 range; the top bound is the largest double below 2^63, so the cast cannot overflow */
    if (get_int(v, "seed", -9223372036854775808.0, 9223372036854774784.0, &s, err)) return -1;
    p->g.seed = (uint64_t)s;
    p->seed_given = 1;
    return 0;
}

static int f_presence(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_f32(v, "presence_penalty", -2, 2, &p->g.presence_penalty, err);
}

static int f_frequency(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_f32(v, "frequency_penalty", -2, 2, &p->g.frequency_penalty, err);
}

static int f_logit_bias(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (!cJSON_IsObject(v)) return srv_fail(err, 400, "logit_bias", "'logit_bias' must be an object of token id -> bias");
    int n = cJSON_GetArraySize(v);
    if (n > MAX_LOGIT_BIAS) return srv_fail(err, 400, "logit_bias", "'logit_bias' takes at most %d entries", MAX_LOGIT_BIAS);
    p->bias_ids = malloc(sizeof(int32_t) * (n + 1));
    p->bias_vals = malloc(sizeof(float) * (n + 1));
    if (!p->bias_ids || !p->bias_vals) return srv_fail(err, 503, NULL, "out of memory");
    const cJSON *b;
    int k = 0;
    cJSON_ArrayForEach(b, v) {
        char *end;
        long id = strtol(b->string, &end, 10);
        if (!b->string[0] || *end || id < 0 || id >= mi->vocab)
            return srv_fail(err, 400, "logit_bias", "'logit_bias' key '%s' is not a token id in [0, %d)", b->string, mi->vocab);
        p->bias_ids[k] = (int32_t)id;
        if (get_f32(b, "logit_bias", -100, 100, &p->bias_vals[k], err)) return -1;
        k++;
    }
    p->g.n_logit_bias = k;
    return 0;
}

static int f_logprobs(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (p->kind == SRV_CHAT) return get_bool(v, "logprobs", &p->logprobs, err);
    return get_i32(v, "logprobs", 0, 20, &p->logprobs, err);
}

static int f_top_logprobs(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_i32(v, "top_logprobs", 0, 20, &p->top_logprobs, err);
}

static int f_string(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return cJSON_IsString(v) ? 0 : srv_fail(err, 400, v->string, "'%s' must be a string", v->string);
}

static int f_ignored_object(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return cJSON_IsObject(v) ? 0 : srv_fail(err, 400, v->string, "'%s' must be an object", v->string);
}

static int f_ignored_bool(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    int b = 0;
    return get_bool(v, v->string, &b, err);
}

static int f_store(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    int b = 0;
    if (get_bool(v, "store", &b, err)) return -1;
    return b ? srv_fail(err, 400, "store", "'store': true is not supported (this server keeps no completions)") : 0;
}

static int f_top_k(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (get_i32(v, "top_k", -1, 0x7fffffff, &p->g.top_k, err)) return -1;
    if (p->g.top_k < 0) p->g.top_k = 0; /* vLLM: -1 = off */
    return 0;
}

static int f_min_p(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (get_f32(v, "min_p", 0, 1, &p->g.min_p, err)) return -1;
    return p->g.min_p < 1 ? 0 : srv_fail(err, 400, "min_p", "'min_p' must be in [0, 1), got 1");
}

static int f_repetition(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (get_f32(v, "repetition_penalty", 0, 100, &p->g.repetition_penalty, err)) return -1;
    return p->g.repetition_penalty > 0 ? 0 : srv_fail(err, 400, "repetition_penalty", "'repetition_penalty' must be > 0");
}

static int f_min_tokens(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_i32(v, "min_tokens", 0, mi->max_context, &p->g.min_new_tokens, err);
}

static int f_ignore_eos(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_bool(v, "ignore_eos", &p->g.ignore_eos, err);
}

static int f_stop_token_ids(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (!cJSON_IsArray(v)) return srv_fail(err, 400, "stop_token_ids", "'stop_token_ids' must be a list of token ids");
    int n = cJSON_GetArraySize(v);
    if (n > MAX_STOP_IDS) return srv_fail(err, 400, "stop_token_ids", "'stop_token_ids' takes at most %d ids", MAX_STOP_IDS);
    if (!(p->stop_ids = malloc(sizeof(int32_t) * (n + 1)))) return srv_fail(err, 503, NULL, "out of memory");
    const cJSON *x;
    cJSON_ArrayForEach(x, v) if (get_i32(x, "stop_token_ids", 0, mi->vocab - 1, &p->stop_ids[p->g.n_stop_ids++], err)) return -1;
    return 0;
}

static int f_stream(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return get_bool(v, "stream", &p->stream, err);
}

static int f_stream_options(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (!cJSON_IsObject(v)) return srv_fail(err, 400, "stream_options", "'stream_options' must be an object");
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        if (!strcmp(x->string, "include_usage")) {
            if (get_bool(x, "stream_options.include_usage", &p->include_usage, err)) return -1;
        } else if (strcmp(x->string, "continuous_usage_stats") || !cJSON_IsBool(x)) {
            return srv_fail(err, 400, "stream_options", "unknown or malformed stream option '%s'", x->string);
        }
    }
    return 0;
}

static int f_echo(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    int b = 0;
    if (get_bool(v, "echo", &b, err)) return -1;
    return b ? srv_fail(err, 400, "echo", "'echo': true is not supported") : 0;
}

static int f_suffix(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_fail(err, 400, "suffix", "'suffix' is not supported");
}

static int f_response_format(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_response_format(v, p, err);
}

int srv_parse_messages(const cJSON *v, srv_params *p, srv_error *err);
int srv_parse_prompt(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err);
int srv_parse_tools(const cJSON *v, srv_params *p, srv_error *err);
int srv_parse_tool_choice(const cJSON *v, srv_params *p, srv_error *err);

static int f_messages(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_parse_messages(v, p, err);
}
static int f_prompt(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_parse_prompt(v, p, mi, err);
}
static int f_tools(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_parse_tools(v, p, err);
}
static int f_guided(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_guided_field(v, p, err);
}
static int f_tool_choice(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    return srv_parse_tool_choice(v, p, err);
}

enum { CHAT = 1, COMPL = 2, BOTH = 3 };
static const struct field {
    const char *name;
    int kinds;
    field_fn fn;
} fields[] = {
    {"model", BOTH, f_model},
    {"messages", CHAT, f_messages},
    {"prompt", COMPL, f_prompt},
    {"max_tokens", BOTH, f_max_tokens},
    {"max_completion_tokens", CHAT, f_max_tokens},
    {"temperature", BOTH, f_temperature},
    {"top_p", BOTH, f_top_p},
    {"n", BOTH, f_n},
    {"best_of", COMPL, f_best_of},
    {"stop", BOTH, f_stop},
    {"seed", BOTH, f_seed},
    {"presence_penalty", BOTH, f_presence},
    {"frequency_penalty", BOTH, f_frequency},
    {"logit_bias", BOTH, f_logit_bias},
    {"logprobs", BOTH, f_logprobs},
    {"top_logprobs", CHAT, f_top_logprobs},
    {"user", BOTH, f_string},
    {"stream", BOTH, f_stream},
    {"stream_options", BOTH, f_stream_options},
    {"response_format", BOTH, f_response_format},
    {"tools", CHAT, f_tools},
    {"tool_choice", CHAT, f_tool_choice},
    {"parallel_tool_calls", CHAT, f_ignored_bool},
    {"metadata", BOTH, f_ignored_object},
    {"store", CHAT, f_store},
    {"service_tier", BOTH, f_string},
    {"echo", COMPL, f_echo},
    {"suffix", COMPL, f_suffix},
    /* vLLM's extensions */
    {"top_k", BOTH, f_top_k},
    {"min_p", BOTH, f_min_p},
    {"repetition_penalty", BOTH, f_repetition},
    {"min_tokens", BOTH, f_min_tokens},
    {"ignore_eos", BOTH, f_ignore_eos},
    {"stop_token_ids", BOTH, f_stop_token_ids},
    {"guided_json", BOTH, f_guided},
    {"guided_regex", BOTH, f_guided},
    {"guided_grammar", BOTH, f_guided},
    {"guided_choice", BOTH, f_guided},
};
#define N_FIELDS (int)(sizeof fields / sizeof fields[0])

static const struct field *find_field(const char *name, srv_kind kind) {
    int k = kind == SRV_CHAT ? CHAT : COMPL;
    for (int i = 0; i < N_FIELDS; i++)
        if (!strcmp(fields[i].name, name) && (fields[i].kinds & k)) return &fields[i];
    return NULL;
}

/* The rules between fields, after every field was read. */
static int cross_checks(srv_params *p, const srv_model_info *mi, srv_error *err) {
    if (p->kind == SRV_CHAT && !p->messages) return srv_fail(err, 400, "messages", "'messages' is required");
    if (p->kind == SRV_COMPLETIONS && !p->prompts) return srv_fail(err, 400, "prompt", "'prompt' is required");
    if (p->kind == SRV_CHAT) {
        if (p->top_logprobs && !p->logprobs)
            return srv_fail(err, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        p->g.logprobs = p->logprobs;
        p->g.top_logprobs = p->top_logprobs;
    } else {
        p->g.logprobs = p->logprobs > 0;
        p->g.top_logprobs = p->logprobs;
    }
    if (p->include_usage && !p->stream)
        return srv_fail(err, 400, "stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (p->max_tokens_given && p->g.min_new_tokens > p->g.max_new_tokens)
        return srv_fail(err, 400, "min_tokens", "'min_tokens' (%d) must not exceed max_tokens (%d)", p->g.min_new_tokens,
                        p->g.max_new_tokens);
    if ((int64_t)p->n * p->n_prompts > mi->max_n)
        return srv_fail(err, 400, "n", "n (%d) times the number of prompts (%d) exceeds %d choices", p->n, p->n_prompts, mi->max_n);
    if (srv_guided_checks(p, err)) return -1;
    p->g.stop_strings = p->stops;
    p->g.stop_ids = p->stop_ids;
    p->g.logit_bias_ids = p->bias_ids;
    p->g.logit_bias_values = p->bias_vals;
    return 0;
}

int srv_parse_request(srv_kind kind, const char *body, size_t len, const srv_model_info *mi, srv_params *p,
                      srv_error *err) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->n = 1;
    ig_gen_config_default(&p->g);
    p->g.max_new_tokens = mi->max_context; /* cut to what the context leaves when the prompt is known */
    if (!(p->root = srv_parse_json(body, len, err))) return -1;
    const cJSON *v;
    int bad = 0;
    cJSON_ArrayForEach(v, p->root) {
        const struct field *f = find_field(v->string, kind);
        if (!f) {
            bad = srv_fail(err, 400, v->string, "Unrecognized request argument supplied: '%s'", v->string);
            break;
        }
        if (cJSON_IsNull(v) && strcmp(v->string, "messages") && strcmp(v->string, "prompt")) continue;
        if ((bad = f->fn(v, p, mi, err))) break;
    }
    if (bad || cross_checks(p, mi, err)) {
        srv_params_free(p);
        return -1;
    }
    return 0;
}

void srv_params_free(srv_params *p) {
    for (int32_t i = 0; i < p->n_prompts; i++) free(p->prompts[i].ids);
    free(p->prompts);
    free(p->stops);
    free(p->stop_ids);
    free(p->bias_ids);
    free(p->bias_vals);
    free(p->guide_text);
    cJSON_Delete(p->messages);
    cJSON_Delete(p->root);
    memset(p, 0, sizeof *p);
}
