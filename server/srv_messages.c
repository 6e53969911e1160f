/* srv_messages.c — the structured request fields: chat `messages` (normalized into the array the
 * chat template renders), completion `prompt`s (text or token ids) and `tools` / `tool_choice`.
 *
 * Messages: role system / developer / user / assistant / tool; content a string or a list of
 * {"type": "text", "text": ...} parts (joined with "\n", as vLLM does for string-content
 * templates); assistant messages may carry tool_calls (their JSON-string arguments become objects,
 * as templates expect) with null content; tool messages need tool_call_id. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srv_internal.h"

static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
static const char *const message_keys[] = {"role", "content", "name", "tool_calls", "tool_call_id",
                                           "refusal", "annotations", "audio", "function_call", "reasoning_content"};

static int known(const char *s, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, list[i])) return 1;
    return 0;
}

/* The content of message i as one string (parts joined), into *out (malloc'd). */
static int message_text(const cJSON *c, int i, char **out, srv_error *err) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) return (*out = strdup(c->valuestring)) ? 0 : srv_fail(err, 503, NULL, "out of memory");
    if (!cJSON_IsArray(c)) return srv_fail(err, 400, param, "'%s' must be a string or a list of text parts", param);
    sbuf b = {0};
    const cJSON *part;
    int k = 0;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            sbuf_free(&b);
            return srv_fail(err, 400, param, "'%s[%d]' must be {\"type\": \"text\", \"text\": string} (only text parts are supported)",
                            param, k);
        }
        if ((k++ && sbuf_add(&b, "\n", 1)) || sbuf_add(&b, x->valuestring, strlen(x->valuestring))) {
            sbuf_free(&b);
            return srv_fail(err, 503, NULL, "out of memory");
        }
    }
    if (sbuf_add(&b, "", 0) || (!b.p && !(b.p = calloc(1, 1)))) return srv_fail(err, 503, NULL, "out of memory");
    *out = b.p;
    return 0;
}

/* Copies tool_calls of message i, with JSON-string arguments parsed into objects. */
static int copy_tool_calls(const cJSON *tc, int i, cJSON *m, srv_error *err) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(tc)) return srv_fail(err, 400, param, "'%s' must be a list", param);
    cJSON *copy = cJSON_Duplicate(tc, 1);
    if (!copy) return srv_fail(err, 503, NULL, "out of memory");
    cJSON_AddItemToObject(m, "tool_calls", copy);
    cJSON *call;
    cJSON_ArrayForEach(call, copy) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name))
            return srv_fail(err, 400, param, "each of '%s' needs function.name", param);
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(args)) {
            cJSON *parsed = cJSON_Parse(args->valuestring);
            if (parsed) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
        }
    }
    return 0;
}

static int check_keys(const cJSON *msg, int i, srv_error *err) {
    const cJSON *k;
    cJSON_ArrayForEach(k, msg) if (!known(k->string, message_keys, sizeof message_keys / sizeof *message_keys)) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        return srv_fail(err, 400, param, "unknown field '%s' in messages[%d]", k->string, i);
    }
    return 0;
}

static int one_message(const cJSON *msg, int i, cJSON *out, srv_error *err) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(msg)) return srv_fail(err, 400, param, "'%s' must be an object", param);
    if (check_keys(msg, i, err)) return -1;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    if (!cJSON_IsString(role) || !known(role->valuestring, roles, 5))
        return srv_fail(err, 400, param, "'%s.role' must be one of system, developer, user, assistant, tool", param);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    int is_assistant = !strcmp(role->valuestring, "assistant");
    cJSON *m = cJSON_CreateObject();
    if (!m) return srv_fail(err, 503, NULL, "out of memory");
    cJSON_AddItemToArray(out, m);
    cJSON_AddStringToObject(m, "role", role->valuestring);
    char *text = NULL;
    if ((!content || cJSON_IsNull(content)) && is_assistant && tc && !cJSON_IsNull(tc))
        text = strdup("");
    else if (!content || cJSON_IsNull(content))
        return srv_fail(err, 400, param, "'%s.content' is required", param);
    else if (message_text(content, i, &text, err))
        return -1;
    if (!text) return srv_fail(err, 503, NULL, "out of memory");
    cJSON_AddStringToObject(m, "content", text);
    free(text);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(msg, "name");
    if (name && !cJSON_IsNull(name)) {
        if (!cJSON_IsString(name)) return srv_fail(err, 400, param, "'%s.name' must be a string", param);
        cJSON_AddStringToObject(m, "name", name->valuestring);
    }
    if (tc && !cJSON_IsNull(tc) && (!is_assistant || copy_tool_calls(tc, i, m, err)))
        return is_assistant ? -1 : srv_fail(err, 400, param, "only assistant messages carry tool_calls");
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
    if (!strcmp(role->valuestring, "tool") && !cJSON_IsString(tid))
        return srv_fail(err, 400, param, "'%s.tool_call_id' (a string) is required for tool messages", param);
    if (cJSON_IsString(tid)) cJSON_AddStringToObject(m, "tool_call_id", tid->valuestring);
    return 0;
}

int srv_parse_messages(const cJSON *v, srv_params *p, srv_error *err) {
    if (!cJSON_IsArray(v)) return srv_fail(err, 400, "messages", "'messages' must be a list of messages");
    if (!cJSON_GetArraySize(v)) return srv_fail(err, 400, "messages", "'messages' must not be empty");
    if (!(p->messages = cJSON_CreateArray())) return srv_fail(err, 503, NULL, "out of memory");
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, v) if (one_message(m, i++, p->messages, err)) return -1;
    p->n_prompts = 1;
    if (!(p->prompts = calloc(1, sizeof *p->prompts))) return srv_fail(err, 503, NULL, "out of memory");
    return 0;
}

/* A list of token ids into pr (ids owned). */
static int prompt_ids(const cJSON *v, const srv_model_info *mi, srv_prompt *pr, srv_error *err) {
    int n = cJSON_GetArraySize(v);
    if (n == 0) return srv_fail(err, 400, "prompt", "a token-id prompt must not be empty");
    if (!(pr->ids = malloc(sizeof(int32_t) * n))) return srv_fail(err, 503, NULL, "out of memory");
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (!(d >= 0 && d < mi->vocab) || d != floor(d)) /* range first: no cast of a huge double */
            return srv_fail(err, 400, "prompt", "prompt token ids must be integers in [0, %d)", mi->vocab);
        pr->ids[pr->n_ids++] = (int32_t)d;
    }
    return 0;
}

int srv_parse_prompt(const cJSON *v, srv_params *p, const srv_model_info *mi, srv_error *err) {
    const char *shape = "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists";
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (!cJSON_IsString(v) && !cJSON_IsArray(v)) return srv_fail(err, 400, "prompt", "%s", shape);
    if (n == 0) return srv_fail(err, 400, "prompt", "'prompt' must not be empty");
    int ids = cJSON_IsArray(v) && cJSON_IsNumber(v->child);
    if (!ids && n > mi->max_n) return srv_fail(err, 400, "prompt", "'prompt' holds %d prompts; at most %d", n, mi->max_n);
    if (!(p->prompts = calloc(ids ? 1 : n, sizeof *p->prompts))) return srv_fail(err, 503, NULL, "out of memory");
    if (cJSON_IsString(v)) {
        p->prompts[p->n_prompts++].text = v->valuestring;
        return 0;
    }
    if (ids) {
        p->n_prompts = 1;
        return prompt_ids(v, mi, &p->prompts[0], err);
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        srv_prompt *pr = &p->prompts[p->n_prompts++];
        if (cJSON_IsString(x))
            pr->text = x->valuestring;
        else if (!cJSON_IsArray(x) || prompt_ids(x, mi, pr, err))
            return cJSON_IsArray(x) ? -1 : srv_fail(err, 400, "prompt", "%s", shape);
    }
    return 0;
}

int srv_parse_tools(const cJSON *v, srv_params *p, srv_error *err) {
    if (!cJSON_IsArray(v)) return srv_fail(err, 400, "tools", "'tools' must be a list");
    const cJSON *t;
    int i = 0;
    cJSON_ArrayForEach(t, v) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn) ||
            !cJSON_IsString(name) || (params && !cJSON_IsObject(params)))
            return srv_fail(err, 400, "tools", "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": string, "
                            "\"parameters\": object, ...}}", i);
        i++;
    }
    if (!p->tools_off) p->tools = i ? v : NULL;
    return 0;
}

int srv_parse_tool_choice(const cJSON *v, srv_params *p, srv_error *err) {
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "none")) {
        p->tools_off = 1;
        p->tools = NULL;
        return 0;
    }
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) return 0;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "required")) {
        p->tools_required = 1; /* checked against tools once every field is read */
        return 0;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type"), *fn = cJSON_GetObjectItemCaseSensitive(v, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    if (cJSON_IsObject(v) && cJSON_IsString(type) && !strcmp(type->valuestring, "function") && cJSON_IsString(name)) {
        p->tool_name = name->valuestring; /* checked against tools once every field is read */
        return 0;
    }
    return srv_fail(err, 400, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", ...}");
}
