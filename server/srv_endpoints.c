/* srv_endpoints.c — the answers that need no generation: GET /v1/models[/ID], GET /health,
 * GET /metrics, POST /tokenize (vLLM's shape: {"prompt"} or {"messages"} in, {"count",
 * "max_model_len", "tokens"} out) and POST /detokenize ({"tokens"} in, {"prompt"} out). Each
 * returns 0 and a malloc'd body, or -1 with err. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv_endpoints.h"

static cJSON *model_object(const srv *s) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "ignis");
    cJSON_AddStringToObject(m, "root", s->model_name);
    cJSON_AddNumberToObject(m, "max_model_len", s->mi.max_context);
    return m;
}

static int print_json(cJSON *o, char **out, srv_error *err) {
    *out = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return *out ? 0 : srv_fail(err, 503, NULL, "out of memory");
}

int srv_ep_models(const srv *s, const char *id, char **out, srv_error *err) {
    if (id) {
        if (strcmp(id, s->model_name)) {
            srv_fail(err, 404, "model", "The model '%s' does not exist: this server serves '%s'", id, s->model_name);
            err->code = "model_not_found";
            return -1;
        }
        return print_json(model_object(s), out, err);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), model_object(s));
    return print_json(o, out, err);
}

int srv_ep_health(const srv *s, char **out, srv_error *err) {
    if (s->draining) return srv_fail(err, 503, NULL, "the server is shutting down");
    return (*out = strdup("{\"status\":\"ok\"}")) ? 0 : srv_fail(err, 503, NULL, "out of memory");
}

/* Refuses fields other than the names given (NULL-terminated). */
static int only_fields(const cJSON *root, const char *const *names, srv_error *err) {
    const cJSON *v;
    cJSON_ArrayForEach(v, root) {
        int ok = 0;
        for (const char *const *n = names; *n; n++) ok |= !strcmp(*n, v->string);
        if (!ok) return srv_fail(err, 400, v->string, "Unrecognized request argument supplied: '%s'", v->string);
    }
    return 0;
}

static int flag(const cJSON *root, const char *name, int dflt, int *out, srv_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = dflt;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return srv_fail(err, 400, name, "'%s' must be true or false", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int check_model(const srv *s, const cJSON *root, srv_error *err) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!m || cJSON_IsNull(m)) return 0;
    if (!cJSON_IsString(m)) return srv_fail(err, 400, "model", "'model' must be a string");
    char *o;
    if (srv_ep_models(s, m->valuestring, &o, err)) return -1;
    free(o);
    return 0;
}

/* The text /tokenize encodes: the prompt, or the messages through the chat template. */
static int tokenize_text(srv *s, const cJSON *root, char **text, int *add_special, srv_error *err) {
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!!prompt == !!msgs) return srv_fail(err, 400, "prompt", "give either 'prompt' (a string) or 'messages'");
    if (prompt) {
        if (!cJSON_IsString(prompt)) return srv_fail(err, 400, "prompt", "'prompt' must be a string");
        if (flag(root, "add_special_tokens", 1, add_special, err)) return -1;
        return (*text = strdup(prompt->valuestring)) ? 0 : srv_fail(err, 503, NULL, "out of memory");
    }
    srv_params p = {0};
    int agp;
    if (flag(root, "add_special_tokens", 0, add_special, err) || flag(root, "add_generation_prompt", 1, &agp, err) ||
        srv_parse_messages(msgs, &p, err)) {
        srv_params_free(&p);
        return -1;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools) && srv_parse_tools(tools, &p, err)) {
        srv_params_free(&p);
        return -1;
    }
    ct_vars v = {.bos_token = s->bos, .eos_token = s->eos, .add_generation_prompt = agp, .tools = p.tools};
    ig_err e = {{0}};
    ig_status st = ct_render(s->tmpl, p.messages, &v, text, NULL, &e);
    srv_params_free(&p);
    return st ? srv_fail(err, 400, "messages", "the chat template failed: %s", e.msg) : 0;
}

int srv_ep_tokenize(srv *s, const char *body, size_t len, char **out, srv_error *err) {
    static const char *const names[] = {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "tools", NULL};
    cJSON *root = srv_parse_json(body, len, err);
    char *text = NULL;
    int add_special = 0, rc = -1;
    int32_t *ids = NULL;
    size_t n = 0;
    if (root && !only_fields(root, names, err) && !check_model(s, root, err) &&
        !tokenize_text(s, root, &text, &add_special, err)) {
        ig_err e = {{0}};
        if (tok_encode(s->tok, text, strlen(text), add_special, 1, &ids, &n, &e)) {
            srv_fail(err, 400, "prompt", "tokenization failed: %s", e.msg);
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "count", (double)n);
            cJSON_AddNumberToObject(o, "max_model_len", s->mi.max_context);
            cJSON *t = cJSON_AddArrayToObject(o, "tokens");
            for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(ids[i]));
            rc = print_json(o, out, err);
        }
    }
    free(ids);
    free(text);
    cJSON_Delete(root);
    return rc;
}

int srv_ep_detokenize(srv *s, const char *body, size_t len, char **out, srv_error *err) {
    static const char *const names[] = {"model", "tokens", NULL};
    cJSON *root = srv_parse_json(body, len, err);
    if (!root || only_fields(root, names, err) || check_model(s, root, err)) {
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens"), *x;
    int n = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : -1, rc = -1;
    int32_t *ids = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
    int k = 0;
    if (n >= 0 && ids)
        cJSON_ArrayForEach(x, t) {
            double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
            if (!(d >= 0 && d < s->mi.vocab) || d != floor(d)) break;
            ids[k++] = (int32_t)d;
        }
    char *text = NULL;
    size_t tl;
    ig_err e = {{0}};
    if (!ids) {
        srv_fail(err, 503, NULL, "out of memory");
    } else if (n < 0 || k != n) {
        srv_fail(err, 400, "tokens", "'tokens' must be a list of token ids in [0, %d)", s->mi.vocab);
    } else if (tok_decode(s->tok, ids, (size_t)n, 0, &text, &tl, &e)) {
        srv_fail(err, 400, "tokens", "%s", e.msg);
    } else {
        char *clean = srv_utf8_clean(text, tl);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", clean ? clean : "");
        rc = clean ? print_json(o, out, err) : (cJSON_Delete(o), srv_fail(err, 503, NULL, "out of memory"));
        free(clean);
    }
    free(text);
    free(ids);
    cJSON_Delete(root);
    return rc;
}
