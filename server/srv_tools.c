/* srv_tools.c — tool calls in generated text, into OpenAI `tool_calls`. Two formats:
 *   Hermes (Qwen2.5 / Qwen3 templates): one or more <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *     blocks; the text outside them is the message content;
 *   Llama 3 (JSON tool calling): the whole reply is {"name": ..., "parameters": {...}} (or
 *     "arguments"), optionally after <|python_tag|>, or several such objects separated by ';'.
 * A block that is not such an object leaves the text as plain content (no call). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

/* {"name", "arguments"|"parameters"} into an OpenAI tool call, or NULL. */
static cJSON *call_from(const cJSON *o, int k, uint64_t id) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || (args && !cJSON_IsObject(args) && !cJSON_IsString(args))) return NULL;
    char *a = !args ? strdup("{}") : cJSON_IsString(args) ? strdup(args->valuestring) : cJSON_PrintUnformatted(args);
    if (!a) return NULL;
    char cid[40];
    snprintf(cid, sizeof cid, "call_%012llx%02d", (unsigned long long)(id & 0xffffffffffffull), k);
    cJSON *c = cJSON_CreateObject(), *fn;
    cJSON_AddStringToObject(c, "id", cid);
    cJSON_AddStringToObject(c, "type", "function");
    fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", name->valuestring);
    cJSON_AddStringToObject(fn, "arguments", a);
    free(a);
    return c;
}

static cJSON *hermes(const char *text, char **content, uint64_t id) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    if (!strstr(text, open)) return NULL;
    cJSON *calls = cJSON_CreateArray();
    sbuf rest = {0};
    const char *p = text;
    int k = 0;
    for (const char *q; (q = strstr(p, open));) {
        const char *body = q + sizeof open - 1, *end = strstr(body, close);
        size_t n = end ? (size_t)(end - body) : strlen(body);
        cJSON *o = cJSON_ParseWithLength(body, n), *c = call_from(o, k, id);
        cJSON_Delete(o);
        if (!c) break; /* not a call: the text stays content */
        cJSON_AddItemToArray(calls, c);
        k++;
        sbuf_add(&rest, p, (size_t)(q - p));
        p = end ? end + sizeof close - 1 : body + n;
    }
    if (!k || (*p && strstr(p, open))) {
        cJSON_Delete(calls);
        sbuf_free(&rest);
        return NULL;
    }
    sbuf_add(&rest, p, strlen(p));
    *content = rest.p;
    return calls;
}

static cJSON *llama3(const char *text, char **content, uint64_t id) {
    const char *p = text;
    while (*p == ' ' || *p == '\n') p++;
    if (!strncmp(p, "<|python_tag|>", 14)) p += 14;
    if (*p != '{') return NULL;
    cJSON *calls = cJSON_CreateArray();
    int k = 0;
    for (;;) {
        const char *end = NULL;
        cJSON *o = cJSON_ParseWithOpts(p, &end, 0), *c = call_from(o, k, id);
        cJSON_Delete(o);
        if (!c) break;
        cJSON_AddItemToArray(calls, c);
        k++;
        p = end;
        while (*p == ' ' || *p == '\n' || *p == ';') p++;
        if (*p != '{') break;
    }
    if (!k || *p) {
        cJSON_Delete(calls);
        return NULL;
    }
    *content = NULL;
    return calls;
}

cJSON *srv_parse_tool_calls(const char *text, char **content, uint64_t id) {
    *content = NULL;
    cJSON *c = hermes(text, content, id);
    return c ? c : llama3(text, content, id);
}
