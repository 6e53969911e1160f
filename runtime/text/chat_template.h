/* chat_template.h — chat templates: the Jinja subset that real `chat_template`s use.
 *
 * A model's tokenizer_config.json carries its prompt format as a Jinja2 template. This module
 * compiles that template once (ct_compile) into an immutable tree and renders it per request
 * (ct_render) byte-identically to HuggingFace transformers' apply_chat_template, which runs jinja2
 * with trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, the loopcontrols
 * extension, and the globals raise_exception / strftime_now and a `tojson` filter that does not
 * escape non-ASCII (json.dumps(ensure_ascii=False, indent=..., separators=..., sort_keys=...)).
 *
 * What is covered: {{ }}, {% %}, {# #}, `-`/`+` whitespace control, raw blocks; for (loop.*,
 * tuple unpacking, `if` filter, else), if/elif/else, set (names, tuples, namespace attributes,
 * block capture), macros, break/continue, {% generation %}; the usual expression grammar, filters,
 * tests, and Python string / dict methods. Anything else fails with IG_ERR_UNSUPPORTED naming the
 * feature and the template line; syntax errors fail with IG_ERR_FORMAT naming the line; a
 * template's raise_exception(msg) fails with IG_ERR_INVALID carrying msg.
 *
 * Values follow jinja2: a missing variable or key is Undefined (falsy, renders empty, `is defined`
 * false; taking an attribute of it is an error). JSON numbers that are integral become ints
 * (cJSON cannot tell 1 from 1.0).
 *
 * Thread-safety: a compiled template is never written after ct_compile returns; any number of
 * threads may render it at once. Each render owns its own arena.
 */
#ifndef CHAT_TEMPLATE_H
#define CHAT_TEMPLATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "ig_status.h"

typedef struct ct_template ct_template;

/* Parses source (borrowed, NUL-terminated) once. On success *out is owned by the caller: free
 * with ct_free. Unknown filters / tests / statements are reported here, not at render time. */
ig_status ct_compile(const char *source, ct_template **out, ig_err *err);

/* Frees a compiled template; accepts NULL. */
void ct_free(ct_template *t);

typedef struct ct_vars {
    const char *bos_token;      /* borrowed; NULL: the variable is undefined */
    const char *eos_token;      /* borrowed; NULL: the variable is undefined */
    int add_generation_prompt;  /* 0 or 1 */
    const cJSON *tools;         /* borrowed JSON array, or NULL: `tools` is none (as transformers) */
} ct_vars;

/* Renders messages (a borrowed JSON array of message objects: {role, content, ...}; content may be
 * a string or a list of parts, other fields pass through as values). vars may be NULL. On success
 * *out is a malloc'd NUL-terminated string owned by the caller (free()), *out_len its length
 * (out_len may be NULL). */
ig_status ct_render(const ct_template *t, const cJSON *messages, const ct_vars *vars, char **out,
                    size_t *out_len, ig_err *err);

/* Reads tokenizer_config.json at path: compiles `chat_template` (a string, or the list of
 * {name, template} objects, of which "default" is taken) into *tmpl (free with ct_free), and
 * copies bos_token / eos_token (strings or {content: ...} objects) into *bos_token / *eos_token
 * (malloc'd, free(); NULL when absent). A config without a template gives *tmpl = NULL and IG_OK.
 * Any of the out pointers may be NULL when the caller does not want that item. */
ig_status ct_load_tokenizer_config(const char *path, ct_template **tmpl, char **bos_token,
                                   char **eos_token, ig_err *err);

/* The ChatML template source (static storage), used when a model ships no template. */
const char *ct_chatml_source(void);

#endif
