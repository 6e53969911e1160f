/* text_api.c — the public text API of include/ignis.h: ig_tokenizer (a tokenizer.json tokenizer
 * plus the chat template of tokenizer_config.json) for programs and the Python package, which
 * cannot reach the internal tok_* / ct_* modules. A thin layer: the work is tok_tokenizer.c and
 * jinja.c; this file owns the pairing of the two and the buffers handed out (ig_free). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_template.h"
#include "pkg_file.h"
#include "ignis.h"
#include "tokenizer.h"

struct ig_tokenizer {
    tok_tokenizer *tok;
    ct_template *tmpl;  /* the folder's chat template, or ChatML */
    char *bos, *eos;    /* template variables bos_token / eos_token (NULL: undefined) */
};

void ig_free(void *p) { free(p); }

void ig_tokenizer_close(ig_tokenizer *t) {
    if (!t) return;
    tok_free(t->tok);
    ct_free(t->tmpl);
    free(t->bos);
    free(t->eos);
    free(t);
}

ig_status ig_tokenizer_open(const char *dir, ig_tokenizer **out, ig_err *err) {
    *out = NULL;
    if (!dir) return ig_fail(err, IG_ERR_INVALID, "tokenizer folder is NULL");
    ig_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ig_status st = tok_load_dir(dir, &t->tok, err);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!st && pkgf_exists(path)) st = ct_load_tokenizer_config(path, &t->tmpl, &t->bos, &t->eos, err);
    if (!st && !t->tmpl) st = ct_compile(ct_chatml_source(), &t->tmpl, err);
    if (st) {
        ig_tokenizer_close(t);
        return st;
    }
    *out = t;
    return IG_OK;
}

int32_t ig_tokenizer_vocab(const ig_tokenizer *t) { return tok_vocab_size(t->tok); }
int32_t ig_tokenizer_bos(const ig_tokenizer *t) { return tok_bos_id(t->tok); }
int32_t ig_tokenizer_eos(const ig_tokenizer *t) { return tok_eos_id(t->tok); }

ig_status ig_tokenize(const ig_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                      int32_t **ids, int32_t *n_ids, ig_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return ig_fail(err, IG_ERR_INVALID, "text is NULL but its length is %zu", len);
    size_t n = 0;
    ig_status st = tok_encode(t->tok, text ? text : "", len, add_special, parse_special, ids, &n, err);
    if (!st && n > INT32_MAX) {
        free(*ids);
        *ids = NULL;
        return ig_fail(err, IG_ERR_INVALID, "text of %zu bytes gives more than 2^31 tokens", len);
    }
    *n_ids = (int32_t)n;
    return st;
}

ig_status ig_detokenize(const ig_tokenizer *t, const int32_t *ids, int32_t n_ids, int skip_special, char **text,
                        size_t *len, ig_err *err) {
    *text = NULL;
    *len = 0;
    if (n_ids < 0 || (n_ids && !ids)) return ig_fail(err, IG_ERR_INVALID, "invalid id array (%d ids)", n_ids);
    return tok_decode(t->tok, ids, (size_t)n_ids, skip_special, text, len, err);
}

ig_status ig_chat_template_apply(const ig_tokenizer *t, const char *messages_json, const char *tools_json,
                                 int add_generation_prompt, char **text, size_t *len, ig_err *err) {
    *text = NULL;
    *len = 0;
    if (!messages_json) return ig_fail(err, IG_ERR_INVALID, "messages are NULL");
    cJSON *msgs = cJSON_Parse(messages_json), *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    ig_status st = IG_OK;
    if (!msgs || !cJSON_IsArray(msgs))
        st = ig_fail(err, IG_ERR_FORMAT, "messages: not a JSON array of {role, content} objects");
    else if (tools_json && (!tools || !cJSON_IsArray(tools)))
        st = ig_fail(err, IG_ERR_FORMAT, "tools: not a JSON array");
    for (int i = 0; !st && i < cJSON_GetArraySize(msgs); i++)
        if (!cJSON_IsObject(cJSON_GetArrayItem(msgs, i)))
            st = ig_fail(err, IG_ERR_FORMAT, "messages[%d]: not a JSON object", i);
    if (!st) {
        ct_vars v = {.bos_token = t->bos, .eos_token = t->eos, .add_generation_prompt = add_generation_prompt != 0,
                     .tools = tools};
        st = ct_render(t->tmpl, msgs, &v, text, len, err);
    }
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    return st;
}
