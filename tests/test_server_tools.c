/* test_server_tools.c — the server's tool-call parser (server/srv_tools.c) on the formats the
 * Qwen2.5/3 (Hermes <tool_call>) and Llama 3 (JSON) chat templates describe to the model: calls
 * found with their names and arguments (as JSON strings), the text around them kept as content,
 * and text that only looks like a call left alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

static int fails;

static void expect(const char *text, int n_calls, const char *name0, const char *args0, const char *content) {
    char *rest = NULL;
    cJSON *calls = srv_parse_tool_calls(text, &rest, 42);
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

int main(void) {
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
    printf(fails ? "%d failed\n" : "all ok\n", fails);
    return fails != 0;
}
