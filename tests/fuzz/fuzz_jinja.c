/* fuzz_jinja.c — the Jinja chat-template compiler and interpreter: the input is a template,
 * rendered with a small conversation, tools and the usual variables. The interpreter's limits
 * (steps, memory, nesting) keep each input bounded. */
#include <cjson/cJSON.h>

#include "chat_template.h"
#include "fuzz_util.h"

static cJSON *msgs, *tools;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    msgs = cJSON_Parse("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
                       "{\"role\":\"assistant\",\"content\":\"Hello\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                       "\"arguments\":{\"x\":1}}}]},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]");
    tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *src = fuzz_cstr(data, n);
    ct_template *t = NULL;
    ig_err err;
    if (ct_compile(src, &t, &err) == IG_OK) {
        ct_vars v = {.bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = 1, .tools = tools};
        char *out = NULL;
        if (ct_render(t, msgs, &v, &out, NULL, &err) == IG_OK) free(out);
        ct_free(t);
    }
    free(src);
    return 0;
}
