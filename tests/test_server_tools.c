/* test_server_tools.c — the server's tool-call parser (server/srv_tools.c) on the formats the
 * Qwen2.5/3 (Hermes <tool_call>) and Llama 3 (JSON) chat templates describe to the model: calls
 * found with their names and arguments (as JSON strings), the text around them kept as content,
 * and text that only looks like a call left alone. The streamed parser (srv_tool_stream) gets
 * the same replies cut into pieces of every size: the deltas it sends add up to the same calls
 * (names, arguments as JSON) and the same content as the whole-reply parser finds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

static int fails;

static void expect_in(const char *text, int array, int n_calls, const char *name0, const char *args0, const char *content) {
    char *rest = NULL;
    cJSON *calls = srv_parse_tool_calls(text, &rest, 42, array);
    int n = calls ? cJSON_GetArraySize(calls) : 0, ok = n == n_calls;
    if (ok && n) {
        cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
        ok = !strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, name0) &&
             !strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring, args0) &&
             !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "type")->valuestring, "function");
        ok = ok && (content ? rest && !strcmp(rest, content) : !rest || !rest[strspn(rest, " \n")]);
    }
    if (!ok) {
        fprintf(stderr, "FAIL: %s -> %d calls, content '%s'\n", text, n, rest ? rest : "(null)");
        fails++;
    }
    cJSON_Delete(calls);
    free(rest);
}

static void expect(const char *text, int n_calls, const char *name0, const char *args0, const char *content) {
    expect_in(text, 0, n_calls, name0, args0, content);
}

/* Streams text in pieces of `step` bytes; the calls' names and argument strings put together,
 * and the content, must equal srv_parse_tool_calls's (arguments compared as parsed JSON). array: a
 * tool_choice "required" reply (a JSON array of calls). */
static void expect_stream(const char *text, size_t step, int array) {
    char *rest = NULL;
    cJSON *want = srv_parse_tool_calls(text, &rest, 42, array), *got = cJSON_CreateArray();
    srv_tool_stream *ts = srv_tool_stream_new(NULL, array, 42);
    sbuf content = {0};
    size_t n = strlen(text);
    char names[8][64] = {{0}}, ids[8][64] = {{0}};
    sbuf args[8] = {{0}};
    int ok = 1, headers = 0;
    for (size_t i = 0; i <= n; i += step) {
        size_t k = i + step < n ? step : n - i;
        cJSON *calls = cJSON_CreateArray(), *d;
        ok &= srv_tool_stream_feed(ts, text + i, k, i + step > n, &content, calls) == 0;
        cJSON_ArrayForEach(d, calls) {
            int ix = cJSON_GetObjectItem(d, "index")->valueint;
            const cJSON *fn = cJSON_GetObjectItem(d, "function"), *nm = cJSON_GetObjectItem(fn, "name");
            const cJSON *id = cJSON_GetObjectItem(d, "id");
            ok &= ix >= 0 && ix < 8 && (!nm || (!names[ix][0] && id)) && (nm || names[ix][0]);
            if (!ok) break;
            if (nm) snprintf(names[ix], 64, "%s", nm->valuestring), snprintf(ids[ix], 64, "%s", id->valuestring), headers++;
            const char *a = cJSON_GetObjectItem(fn, "arguments")->valuestring;
            sbuf_add(&args[ix], a, strlen(a));
        }
        cJSON_Delete(calls);
        if (i + step > n) break;
    }
    int nw = want ? cJSON_GetArraySize(want) : 0;
    ok &= headers == nw && srv_tool_stream_calls(ts) == nw;
    for (int i = 0; ok && i < nw; i++) {
        cJSON *w = cJSON_GetArrayItem(want, i), *fn = cJSON_GetObjectItem(w, "function");
        cJSON *wa = cJSON_Parse(cJSON_GetObjectItem(fn, "arguments")->valuestring), *ga = cJSON_Parse(args[i].p ? args[i].p : "");
        ok &= !strcmp(names[i], cJSON_GetObjectItem(fn, "name")->valuestring) && cJSON_Compare(wa, ga, 1) &&
              !strcmp(ids[i], cJSON_GetObjectItem(w, "id")->valuestring);
        cJSON_Delete(wa);
        cJSON_Delete(ga);
    }
    const char *wc = nw ? (rest ? rest : "") : text, *gc = content.p ? content.p : "";
    size_t lw = strlen(wc), lg = strlen(gc);
    while (lw && strchr(" \n", wc[lw - 1])) lw--;
    while (lg && strchr(" \n", gc[lg - 1])) lg--;
    if (nw) { /* leading whitespace: the whole-reply parser keeps it, the stream holds it back */
        while (lw && strchr(" \n", *wc)) wc++, lw--;
    }
    ok &= lw == lg && !memcmp(wc, gc, lw);
    if (!ok) {
        fprintf(stderr, "FAIL (stream, pieces of %zu): %s -> %d headers, content '%s'\n", step, text, headers, gc);
        fails++;
    }
    for (int i = 0; i < 8; i++) sbuf_free(&args[i]);
    sbuf_free(&content);
    srv_tool_stream_free(ts);
    cJSON_Delete(want);
    cJSON_Delete(got);
    free(rest);
}

/* A forced tool_choice: the header first, then the reply itself as the arguments. */
static void expect_named(void) {
    srv_tool_stream *ts = srv_tool_stream_new("get_weather", 0, 7);
    sbuf content = {0};
    cJSON *a = cJSON_CreateArray(), *b = cJSON_CreateArray();
    srv_tool_stream_feed(ts, "{\"city\": ", 10, 0, &content, a);
    srv_tool_stream_feed(ts, "\"Paris\"}", 9, 1, &content, b);
    const cJSON *h = cJSON_GetArrayItem(a, 0), *fn = cJSON_GetObjectItem(h, "function");
    int ok = cJSON_GetArraySize(a) == 2 && cJSON_GetArraySize(b) == 1 && !content.len &&
             !strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, "get_weather") &&
             !strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring, "") &&
             !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 1), "function"), "arguments")->valuestring,
                     "{\"city\": ") &&
             !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(b, 0), "function"), "arguments")->valuestring,
                     "\"Paris\"}");
    if (!ok) {
        fprintf(stderr, "FAIL: named tool_choice stream\n");
        fails++;
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    sbuf_free(&content);
    srv_tool_stream_free(ts);
}

static const char *const stream_cases[] = {
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\\\"\", \"n\": [1, {\"x\": 2}]}}\n</tool_call>",
    "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
    "\"arguments\": {\"x\": 1}}\n</tool_call>",
    "<tool_call>\n{\"arguments\": {\"q\": 1}, \"name\": \"f\"}\n</tool_call>",
    "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
    "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"k\": true}}",
    "The answer is {\"name\": \"x\"} in JSON, a < b and <tool_ not a call.",
    "{\"title\": \"not a call\"}",
    "<tool_call>not json</tool_call>",
    "plain text <tool",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n</tool", /* cut at max_tokens */
};

/* tool_choice "required": the grammar's array of calls (the keys in either order, with strings
 * holding the separators), one or several. */
static const char *const array_cases[] = {
    "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa,ris]{\"}}]",
    " [ {\"arguments\": {\"x\": [1, {\"y\": \"}\"}]}, \"name\": \"a\"} ,\n{\"name\": \"b\", \"arguments\": {}} ] ",
};

int main(void) {
    for (size_t c = 0; c < sizeof stream_cases / sizeof stream_cases[0]; c++)
        for (size_t step = 1; step <= strlen(stream_cases[c]) + 1; step++) expect_stream(stream_cases[c], step, 0);
    for (size_t c = 0; c < sizeof array_cases / sizeof array_cases[0]; c++)
        for (size_t step = 1; step <= strlen(array_cases[c]) + 1; step++) expect_stream(array_cases[c], step, 1);
    expect_named();
    expect("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 1, "get_weather",
           "{\"city\":\"Paris\"}", NULL);
    expect("Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
           "\"arguments\": {\"x\": 1}}\n</tool_call>", 2, "a", "{}", "Let me check.\n\n");
    expect("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}", 1, "f", "{\"q\":1}", NULL); /* cut at max_tokens */
    expect("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", 1, "get_weather", "{\"city\":\"Rome\"}", NULL);
    expect("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {}}", 2, "f", "{}", NULL);
    expect("The answer is {\"name\": \"x\"} in JSON.", 0, NULL, NULL, NULL);
    expect("{\"title\": \"not a call\"}", 0, NULL, NULL, NULL);
    expect("<tool_call>not json</tool_call>", 0, NULL, NULL, NULL);
    expect("plain text", 0, NULL, NULL, NULL);
    expect_in(array_cases[0], 1, 1, "get_weather", "{\"city\":\"Pa,ris]{\"}", NULL);
    expect_in(array_cases[1], 1, 2, "a", "{\"x\":[1,{\"y\":\"}\"}]}", NULL);
    expect_in("[]", 1, 0, NULL, NULL, NULL);
    expect_in("[{\"title\": 1}]", 1, 0, NULL, NULL, NULL);
    expect_in(array_cases[0], 0, 0, NULL, NULL, NULL); /* outside "required" an array is content */
    printf(fails ? "%d failed\n" : "all ok\n", fails);
    return fails != 0;
}
