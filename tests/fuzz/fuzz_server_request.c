/* fuzz_server_request.c — libFuzzer target for the HTTP server's request-body parsing and
 * validation (server/srv_request.c, srv_messages.c): every input is parsed as a chat and as a
 * completion request against a fixed model description; a parse that succeeds must leave a
 * consistent ig_gen_config (counts within their arrays, ranges the engine accepts), and the
 * error reply of one that fails must be valid JSON; the input also goes through the tool-call parser
 * (srv_tools.c) as a model reply. No engine or tokenizer is needed.
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Iserver -Iruntime/text -Iruntime/serving -Icommon tests/fuzz/fuzz_server_request.c server/srv_request.c server/srv_messages.c server/srv_job.c server/srv_metrics.c server/srv_tools.c runtime/text/tok_unicode.c runtime/text/tok_unicode_tables.c -lcjson -lm -o fuzz_server_request
 * (srv_job.c / srv_metrics.c / srv_tools.c only for their helpers; the engine symbols they name are stubbed below). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

/* ---- stubs: the parser never reaches the engine, tokenizer or template */
void ig_gen_config_default(ig_gen_config *g) {
    memset(g, 0, sizeof *g);
    g->struct_size = sizeof *g;
    g->max_new_tokens = 128;
    g->top_p = 1.0f;
    g->repetition_penalty = 1.0f;
}
ig_status ig_request_start(ig_engine *e, const int32_t *ids, int32_t n, const ig_gen_config *g, ig_request **out, ig_err *err) {
    abort();
}
ig_status ig_request_read(ig_request *r, int t, ig_output **out, ig_err *err) { abort(); }
void ig_request_stop(ig_request *r) { abort(); }
void ig_request_release(ig_request *r) {}
void ig_request_set_notify(ig_request *r, void (*fn)(void *), void *u) { abort(); }
void ig_output_free(ig_output *o) { abort(); }
void ig_engine_get_stats(ig_engine *e, ig_engine_stats *s) { abort(); }
ig_status ct_render(const ct_template *t, const cJSON *m, const ct_vars *v, char **out, size_t *len, ig_err *err) { abort(); }
ig_status tok_encode(const tok_tokenizer *t, const char *s, size_t n, int a, int p, int32_t **ids, size_t *k, ig_err *err) {
    abort();
}
ig_status tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, int s, char **text, size_t *len, ig_err *err) {
    abort();
}

static void check_params(const srv_params *p, const srv_model_info *mi) {
    const ig_gen_config *g = &p->g;
    if (g->max_new_tokens < 1 || g->max_new_tokens > mi->max_context) abort();
    if (g->n_stop_strings < 0 || g->n_stop_strings > 16 || (g->n_stop_strings && !g->stop_strings)) abort();
    for (int32_t i = 0; i < g->n_stop_strings; i++)
        if (!g->stop_strings[i] || !g->stop_strings[i][0]) abort();
    for (int32_t i = 0; i < g->n_stop_ids; i++)
        if (g->stop_ids[i] < 0 || g->stop_ids[i] >= mi->vocab) abort();
    for (int32_t i = 0; i < g->n_logit_bias; i++)
        if (g->logit_bias_ids[i] < 0 || g->logit_bias_ids[i] >= mi->vocab || !isfinite(g->logit_bias_values[i])) abort();
    if (!(g->temperature >= 0 && g->temperature <= 2) || !(g->top_p > 0 && g->top_p <= 1)) abort();
    if (g->top_logprobs < 0 || g->top_logprobs > 20 || p->n < 1 || p->n * p->n_prompts > mi->max_n) abort();
    if (p->n_prompts < 1 || !p->prompts) abort();
    for (int32_t i = 0; i < p->n_prompts; i++) {
        const srv_prompt *pr = &p->prompts[i];
        if (p->kind == SRV_COMPLETIONS && !pr->text && pr->n_ids < 1) abort();
        for (int32_t k = 0; k < pr->n_ids; k++)
            if (pr->ids[k] < 0 || pr->ids[k] >= mi->vocab) abort();
    }
    if (p->kind == SRV_CHAT && cJSON_GetArraySize(p->messages) < 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const srv_model_info mi = {.vocab = 1000, .max_context = 512, .max_n = 16, .name = "m"};
    for (int kind = 0; kind < 2; kind++) {
        srv_params p;
        srv_error err;
        if (srv_parse_request(kind ? SRV_COMPLETIONS : SRV_CHAT, (const char *)data, size, &mi, &p, &err) == 0) {
            check_params(&p, &mi);
            srv_params_free(&p);
        } else {
            char *j = srv_error_json(&err);
            cJSON *back = j ? cJSON_Parse(j) : NULL;
            if (!back || err.status < 400 || err.status > 599) abort();
            cJSON_Delete(back);
            free(j);
        }
    }
    /* the same bytes as a model's reply, through the tool-call parser */
    char *text = malloc(size + 1), *rest = NULL;
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    cJSON *calls = srv_parse_tool_calls(text, &rest, 1);
    if (calls && !cJSON_GetArraySize(calls)) abort();
    cJSON_Delete(calls);
    free(rest);
    free(text);
    return 0;
}
