/* srv_guided.c — the request fields that ask for guided decoding, into ig_gen_config's
 * constraint (the grammar module, runtime/grammar/):
 *   response_format {"type": "json_object"}                 -> IG_CONSTRAINT_JSON (any JSON object)
 *   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}
 *                                                           -> IG_CONSTRAINT_JSON_SCHEMA
 *   vLLM's extensions guided_json (schema object or string), guided_regex, guided_grammar (GBNF),
 *   guided_choice (a list of strings: the output is one of them)
 *   tool_choice {"type": "function", "function": {"name"}}  -> the named tool's parameters schema
 *   tool_choice "required"                                  -> an array of one or more calls:
 *       [{"name": <one of the tools>, "arguments": <that tool's parameters>}, ...]
 * At most one of them per request. The constraint is compiled here once to check it (the engine
 * compiles it again per choice), so an unsupported schema keyword or a malformed grammar is a 400
 * whose message names the keyword and its JSON path, before any work starts. `strict` is accepted
 * either way: the output always follows the schema. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "srv_internal.h"

/* Compiles text as kind to check it; on success the constraint of p (text owned by p). */
static int set_guide(srv_params *p, const char *param, int32_t kind, char *text, srv_error *err) {
    if (!text) return srv_fail(err, 503, NULL, "out of memory");
    if (p->g.constraint) {
        free(text);
        return srv_fail(err, 400, param, "'%s' and '%s' both ask for guided decoding: give at most one", p->guide_param,
                        param);
    }
    gr_grammar *gg = NULL;
    ig_err e = {{0}};
    ig_status st = gr_compile((gr_kind)kind, text, strlen(text), &gg, &e);
    gr_grammar_free(gg);
    if (st) {
        free(text);
        if (st == IG_ERR_NOMEM) return srv_fail(err, 503, NULL, "out of memory compiling '%s'", param);
        return srv_fail(err, 400, param, "'%s' cannot be used for guided decoding: %s", param, e.msg);
    }
    p->g.constraint = kind;
    p->g.constraint_text = p->guide_text = text;
    p->guide_param = param;
    return 0;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* A schema given as an object (or, for guided_json, a JSON string holding one). */
static int schema_guide(srv_params *p, const char *param, const cJSON *schema, srv_error *err) {
    if (cJSON_IsString(schema)) return set_guide(p, param, IG_CONSTRAINT_JSON_SCHEMA, dup_str(schema->valuestring), err);
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return srv_fail(err, 400, param, "'%s' must be a JSON Schema (an object)", param);
    return set_guide(p, param, IG_CONSTRAINT_JSON_SCHEMA, cJSON_PrintUnformatted(schema), err);
}

static int json_schema_format(const cJSON *js, srv_params *p, srv_error *err) {
    static const char *const keys[] = {"name", "schema", "strict", "description"};
    if (!cJSON_IsObject(js))
        return srv_fail(err, 400, "response_format", "'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"}");
    const cJSON *x;
    cJSON_ArrayForEach(x, js) {
        size_t k = 0;
        while (k < 4 && strcmp(x->string, keys[k])) k++;
        if (k == 4) return srv_fail(err, 400, "response_format", "unknown field 'response_format.json_schema.%s'", x->string);
        if (cJSON_IsNull(x)) continue;
        if ((k == 0 || k == 3) && !cJSON_IsString(x))
            return srv_fail(err, 400, "response_format", "'response_format.json_schema.%s' must be a string", x->string);
        if (k == 2 && !cJSON_IsBool(x))
            return srv_fail(err, 400, "response_format", "'response_format.json_schema.strict' must be true or false");
    }
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!schema || cJSON_IsNull(schema))
        return srv_fail(err, 400, "response_format", "'response_format.json_schema.schema' is required");
    if (!cJSON_IsObject(schema))
        return srv_fail(err, 400, "response_format", "'response_format.json_schema.schema' must be a JSON Schema (an object)");
    return set_guide(p, "response_format", IG_CONSTRAINT_JSON_SCHEMA, cJSON_PrintUnformatted(schema), err);
}

int srv_response_format(const cJSON *rf, srv_params *p, srv_error *err) {
    if (!cJSON_IsObject(rf)) return srv_fail(err, 400, "response_format", "'response_format' must be an object");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type"), *x;
    if (!cJSON_IsString(t)) return srv_fail(err, 400, "response_format", "'response_format.type' must be a string");
    int schema = !strcmp(t->valuestring, "json_schema");
    cJSON_ArrayForEach(x, rf) if (strcmp(x->string, "type") && !(schema && !strcmp(x->string, "json_schema")))
        return srv_fail(err, 400, "response_format", "unknown field 'response_format.%s' for type '%s'", x->string, t->valuestring);
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) return set_guide(p, "response_format", IG_CONSTRAINT_JSON, dup_str(""), err);
    if (schema) return json_schema_format(cJSON_GetObjectItemCaseSensitive(rf, "json_schema"), p, err);
    return srv_fail(err, 400, "response_format", "unknown response_format type '%s' (text, json_object, json_schema)",
                    t->valuestring);
}

int srv_guided_field(const cJSON *v, srv_params *p, srv_error *err) {
    const char *f = v->string;
    if (!strcmp(f, "guided_json")) return schema_guide(p, "guided_json", v, err);
    if (!cJSON_IsString(v) && strcmp(f, "guided_choice")) return srv_fail(err, 400, f, "'%s' must be a string", f);
    if (!strcmp(f, "guided_regex")) return set_guide(p, "guided_regex", IG_CONSTRAINT_REGEX, dup_str(v->valuestring), err);
    if (!strcmp(f, "guided_grammar")) return set_guide(p, "guided_grammar", IG_CONSTRAINT_GBNF, dup_str(v->valuestring), err);
    /* guided_choice: a regex alternation of the strings, every character escaped */
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
        return srv_fail(err, 400, f, "'guided_choice' must be a non-empty list of strings");
    sbuf re = {0};
    const cJSON *s;
    int oom = 0;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s)) {
            sbuf_free(&re);
            return srv_fail(err, 400, f, "'guided_choice' must be a non-empty list of strings");
        }
        oom |= sbuf_add(&re, re.len ? "|(" : "(", re.len ? 2 : 1);
        for (const char *c = s->valuestring; *c; c++) {
            if (strchr("\\^$.|?*+()[]{}/-", *c)) oom |= sbuf_add(&re, "\\", 1);
            oom |= sbuf_add(&re, c, 1);
        }
        oom |= sbuf_add(&re, ")", 1);
    }
    if (oom) {
        sbuf_free(&re);
        return srv_fail(err, 503, NULL, "out of memory");
    }
    return set_guide(p, "guided_choice", IG_CONSTRAINT_REGEX, re.p, err);
}

/* tool_choice "required": the schema of a non-empty array whose items are calls of the tools. */
static char *calls_schema(const cJSON *tools) {
    cJSON *s = cJSON_CreateObject(), *any = cJSON_CreateArray(), *t;
    cJSON_AddStringToObject(s, "type", "array");
    cJSON_AddNumberToObject(s, "minItems", 1);
    cJSON_AddItemToObject(cJSON_AddObjectToObject(s, "items"), "anyOf", any);
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        cJSON *call = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(call, "properties"), *req = cJSON_CreateArray();
        cJSON_AddItemToArray(any, call);
        cJSON_AddStringToObject(call, "type", "object");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "name"), "const",
                                cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring);
        if (params) cJSON_AddItemToObject(props, "arguments", cJSON_Duplicate(params, 1));
        else cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "arguments"), "type", "object");
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
        cJSON_AddItemToObject(call, "required", req);
        cJSON_AddBoolToObject(call, "additionalProperties", 0);
    }
    char *text = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    return text;
}

/* After every field was read: a tool_choice naming a function gets that function's parameters
 * as its constraint (the reply is then the call's arguments); "required", the calls' schema. */
int srv_guided_checks(srv_params *p, srv_error *err) {
    if (p->tools_required) {
        if (!p->tools) return srv_fail(err, 400, "tool_choice", "tool_choice 'required' needs at least one function in 'tools'");
        return set_guide(p, "tool_choice", IG_CONSTRAINT_JSON_SCHEMA, calls_schema(p->tools), err);
    }
    if (!p->tool_name) return 0;
    const cJSON *t, *fn = NULL;
    cJSON_ArrayForEach(t, p->tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring, p->tool_name)) fn = f;
    }
    if (!fn)
        return srv_fail(err, 400, "tool_choice", "tool_choice names the function '%s' but 'tools' has no function of that name",
                        p->tool_name);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (!params) return set_guide(p, "tool_choice", IG_CONSTRAINT_JSON, dup_str(""), err);
    return set_guide(p, "tool_choice", IG_CONSTRAINT_JSON_SCHEMA, cJSON_PrintUnformatted(params), err);
}
