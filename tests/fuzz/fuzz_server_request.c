/* fuzz_server_request.c — libFuzzer target for the HTTP server's request-body parsing and
 * validation (server/srv_request.c, srv_messages.c): every input is parsed as a chat and as a
 * completion request against a fixed model description; a parse that succeeds must leave a
 * consistent ig_gen_config (counts within their arrays, ranges the engine accepts), and the
 * error reply of one that fails must be valid JSON; the input also goes through the tool-call parser
 * (srv_tools.c) as a model reply, whole and streamed in pieces (the content sent never exceeds
 * the reply); guided-decoding fields compile their constraint (runtime/grammar). No engine or tokenizer is needed.
 * Built by the tests/fuzz convention (CMake, IGNIS_FUZZ=ON) and linked with the server library
 * (ignis_server) as well as ignis_core; the parser never calls the engine or the tokenizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

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
    if (g->constraint < IG_CONSTRAINT_NONE || g->constraint > IG_CONSTRAINT_GBNF) abort();
    if (g->constraint && (!g->constraint_text || g->constraint_text != p->guide_text || !p->guide_param)) abort();
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
    int array = size && (data[size - 1] & 1); /* the tool_choice "required" shape, by the last byte */
    cJSON *calls = srv_parse_tool_calls(text, &rest, 1, array);
    if (calls && !cJSON_GetArraySize(calls)) abort();
    cJSON_Delete(calls);
    /* and through the streamed parser, in pieces of a size taken from the input */
    srv_tool_stream *ts = srv_tool_stream_new(NULL, array, 1);
    sbuf content = {0};
    size_t step = size ? 1 + data[0] % 16 : 1;
    for (size_t i = 0; ts && i <= size; i += step) {
        cJSON *d = cJSON_CreateArray();
        size_t k = i + step < size ? step : size - i;
        if (srv_tool_stream_feed(ts, text + i, k, i + step > size, &content, d) == 0 && content.len > size) abort();
        cJSON_Delete(d);
        if (i + step > size) break;
    }
    sbuf_free(&content);
    srv_tool_stream_free(ts);
    free(rest);
    free(text);
    return 0;
}
