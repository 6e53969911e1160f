/* srv_tools.c — tool calls in generated text, into OpenAI `tool_calls`. Two formats:
 *   Hermes (Qwen2.5 / Qwen3 templates): one or more <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *     blocks; the text outside them is the message content;
 *   Llama 3 (JSON tool calling): the whole reply is {"name": ..., "parameters": {...}} (or
 *     "arguments"), optionally after <|python_tag|>, or several such objects separated by ';'.
 * and, for a tool_choice "required" reply (guided to that shape), a JSON array of such objects.
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

/* The whole reply is [call, ...] (at least one). */
static cJSON *array_of_calls(const char *text, uint64_t id) {
    cJSON *a = cJSON_Parse(text), *o;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
        cJSON_Delete(a);
        return NULL;
    }
    cJSON *calls = cJSON_CreateArray();
    int k = 0;
    cJSON_ArrayForEach(o, a) {
        cJSON *c = call_from(o, k++, id);
        if (!c) {
            cJSON_Delete(calls);
            calls = NULL;
            break;
        }
        cJSON_AddItemToArray(calls, c);
    }
    cJSON_Delete(a);
    return calls;
}

cJSON *srv_parse_tool_calls(const char *text, char **content, uint64_t id, int array) {
    *content = NULL;
    if (array) return array_of_calls(text, id);
    cJSON *c = hermes(text, content, id);
    return c ? c : llama3(text, content, id);
}

/* ---- streamed tool calls
 *
 * The reply arrives in pieces; the stream keeps all of it (acc) and how much is decided (pos).
 * Modes: START (only whitespace so far: a Llama 3 JSON call or <|python_tag|> may begin), TEXT
 * (content; a Hermes <tool_call> may begin: a tail that could be the start of the tag is held back),
 * CALL (inside a call object: its name is sent in the call's first delta once known, then the
 * arguments object's bytes as they come), HEND (after a Hermes call object, up to </tool_call>),
 * BETWEEN (after a Llama 3 call: ';' or whitespace, then another call or content), PLAIN (content
 * only: something that looked like a call was not one), NAMED (a forced tool_choice: the whole
 * reply is the arguments), ARRAY (tool_choice "required": between the calls of a JSON array,
 * where '[', ',' and ']' separate them). Whitespace-only content is held until other content follows (and
 * dropped at the end when there were calls), as the non-streamed reply drops it. */
enum { TS_START, TS_TEXT, TS_CALL, TS_HEND, TS_BETWEEN, TS_PLAIN, TS_NAMED, TS_ARRAY };

struct srv_tool_stream {
    sbuf acc, ws;            /* the reply so far; held whitespace-only content */
    size_t pos, call_at;     /* decided bytes; where the current call's object (or its tag) starts */
    int mode, hermes, k;     /* mode; the current call is a Hermes one; calls begun */
    int header;              /* the current call's first delta went out */
    int array;               /* the reply is a JSON array of calls */
    size_t args_sent;        /* bytes of acc streamed as arguments */
    const char *named;
    uint64_t id;
    char name_buf[1];
};

srv_tool_stream *srv_tool_stream_new(const char *named, int array, uint64_t id) {
    size_t n = named ? strlen(named) : 0;
    srv_tool_stream *ts = calloc(1, sizeof *ts + n);
    if (!ts) return NULL;
    if (named) memcpy(ts->name_buf, named, n + 1), ts->named = ts->name_buf;
    ts->mode = named ? TS_NAMED : array ? TS_ARRAY : TS_START;
    ts->array = array;
    ts->id = id;
    return ts;
}

void srv_tool_stream_free(srv_tool_stream *ts) {
    if (!ts) return;
    sbuf_free(&ts->acc);
    sbuf_free(&ts->ws);
    free(ts);
}

int srv_tool_stream_calls(const srv_tool_stream *ts) { return ts->k; }

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Content s[0..n): whitespace-only runs wait in ts->ws for the content after them. */
static int put_content(srv_tool_stream *ts, const char *s, size_t n, sbuf *out) {
    size_t body = n;
    while (body && is_ws(s[body - 1])) body--;
    if (!body) return sbuf_add(&ts->ws, s, n);
    int rc = sbuf_add(out, ts->ws.p ? ts->ws.p : "", ts->ws.len) | sbuf_add(out, s, body);
    ts->ws.len = 0;
    return rc | sbuf_add(&ts->ws, s + body, n - body);
}

/* The end of a JSON string starting at s[i] == '"' (index after the quote), or 0 if cut. */
static size_t str_end(const char *s, size_t i, size_t n) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* The end of the JSON value at s[i] (not whitespace), or 0 if it is cut at n. */
static size_t value_end(const char *s, size_t i, size_t n) {
    if (s[i] == '"') return str_end(s, i, n);
    if (s[i] != '{' && s[i] != '[') {
        while (i < n && !strchr(",}] \n\r\t", s[i])) i++;
        return i < n ? i : 0;
    }
    int depth = 0;
    for (; i < n; i++) {
        if (s[i] == '"') {
            size_t e = str_end(s, i, n);
            if (!e) return 0;
            i = e - 1;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if ((s[i] == '}' || s[i] == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

static size_t skip_ws(const char *s, size_t i, size_t n) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* What of a call object at s[i..n) has arrived: name [n0, n1) once whole, the arguments value
 * from a0 (to a1 once whole), the object's end. 1: well-formed so far; 0: not a call. */
typedef struct call_scan {
    size_t n0, n1, a0, a1, end;
} call_scan;

static int scan_call(const char *s, size_t i, size_t n, call_scan *c) {
    memset(c, 0, sizeof *c);
    i = skip_ws(s, i, n);
    if (i == n) return 1;
    if (s[i++] != '{') return 0;
    for (int first = 1;; first = 0) {
        i = skip_ws(s, i, n);
        if (i == n) return 1;
        if (s[i] == '}' && first) return c->end = i + 1, 1;
        if (s[i] != '"') return 0;
        size_t k0 = i, k1 = str_end(s, i, n);
        if (!k1) return 1;
        i = skip_ws(s, k1, n);
        if (i == n) return 1;
        if (s[i] != ':') return 0;
        i = skip_ws(s, i + 1, n);
        if (i == n) return 1;
        int is_name = k1 - k0 == 6 && !memcmp(s + k0, "\"name\"", 6);
        int is_args = (k1 - k0 == 11 && !memcmp(s + k0, "\"arguments\"", 11)) ||
                      (k1 - k0 == 12 && !memcmp(s + k0, "\"parameters\"", 12));
        if (is_name && s[i] != '"') return 0;
        if (is_args) c->a0 = i;
        size_t e = value_end(s, i, n);
        if (!e) return 1;
        if (is_name) c->n0 = i, c->n1 = e;
        if (is_args) c->a1 = e;
        i = skip_ws(s, e, n);
        if (i == n) return 1;
        if (s[i] == '}') return c->end = i + 1, 1;
        if (s[i++] != ',') return 0;
    }
}

/* One tool_calls delta entry: index k; the header (id, type, name) when name is not NULL. */
static int add_delta(srv_tool_stream *ts, cJSON *calls, const char *name, const char *args, size_t n_args) {
    cJSON *d = cJSON_CreateObject();
    if (!d || !cJSON_AddItemToArray(calls, d)) return cJSON_Delete(d), -1;
    cJSON_AddNumberToObject(d, "index", ts->k);
    if (name) {
        char cid[40];
        snprintf(cid, sizeof cid, "call_%012llx%02d", (unsigned long long)(ts->id & 0xffffffffffffull), ts->k);
        cJSON_AddStringToObject(d, "id", cid);
        cJSON_AddStringToObject(d, "type", "function");
    }
    cJSON *fn = cJSON_AddObjectToObject(d, "function");
    if (name) cJSON_AddStringToObject(fn, "name", name);
    char *a = malloc(n_args + 1);
    if (!fn || !a) return free(a), -1;
    memcpy(a, args, n_args);
    a[n_args] = 0;
    cJSON *as = cJSON_AddStringToObject(fn, "arguments", a);
    free(a);
    return as ? 0 : -1;
}

/* The decoded JSON string s[0..n) (quotes included), malloc'd, or NULL. */
static char *json_string(const char *s, size_t n) {
    cJSON *v = cJSON_ParseWithLength(s, n);
    char *r = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(v);
    return r;
}

/* Inside a call: sends its header and argument bytes as they become known. 1: progress. */
static int call_step(srv_tool_stream *ts, int final, sbuf *content, cJSON *calls, int *rc) {
    const char *s = ts->acc.p;
    size_t n = ts->acc.len;
    call_scan c;
    int ok = scan_call(s, ts->call_at, n, &c);
    int str_args = c.a0 && s[c.a0] == '"';
    if (ok && !ts->header && c.n1 && (c.a1 || (c.a0 && !str_args) || c.end)) {
        char *name = json_string(s + c.n0, c.n1 - c.n0), *args = NULL;
        if (str_args) args = json_string(s + c.a0, c.a1 - c.a0);
        if (!name || (str_args && !args)) ok = 0;
        else *rc |= add_delta(ts, calls, name, args ? args : c.a0 ? "" : "{}", args ? strlen(args) : c.a0 ? 0 : 2);
        free(name);
        free(args);
        ts->header = ok;
        ts->args_sent = str_args || !c.a0 ? (c.end ? c.end : n) : c.a0;
    }
    if (!ok) { /* not a call after all: content from where it began, and no more calls */
        if (!ts->header) *rc |= put_content(ts, s + ts->call_at - (ts->hermes ? 11 : 0), n - ts->call_at + (ts->hermes ? 11 : 0), content);
        else if (ts->args_sent < n) *rc |= put_content(ts, s + ts->args_sent, n - ts->args_sent, content);
        ts->pos = n;
        ts->mode = TS_PLAIN;
        return 1;
    }
    if (!ts->header) {
        if (!final) return 0;
        /* cut before its name: content */
        *rc |= put_content(ts, s + ts->call_at - (ts->hermes ? 11 : 0), n - ts->call_at + (ts->hermes ? 11 : 0), content);
        ts->pos = n;
        ts->mode = TS_PLAIN;
        return 1;
    }
    size_t upto = c.a1 ? c.a1 : n;
    if (!str_args && c.a0 && upto > ts->args_sent) {
        *rc |= add_delta(ts, calls, NULL, s + ts->args_sent, upto - ts->args_sent);
        ts->args_sent = upto;
    }
    if (!c.end) {
        ts->pos = n;
        return 0;
    }
    ts->k++;
    ts->header = 0;
    ts->pos = c.end;
    ts->mode = ts->array ? TS_ARRAY : ts->hermes ? TS_HEND : TS_BETWEEN;
    return 1;
}

/* Length of the longest tail of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

/* Outside calls: one mode's step over acc[pos..]. 1: progress (the mode may have changed). */
static int text_step(srv_tool_stream *ts, int final, sbuf *content, int *rc) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>", tag[] = "<|python_tag|>";
    const char *s = ts->acc.p + ts->pos;
    size_t n = ts->acc.len - ts->pos;
    if (ts->mode == TS_ARRAY) { /* the grammar made the shape: skip to the next call's '{' */
        size_t i = 0;
        while (i < n && s[i] != '{') i++;
        ts->pos += i;
        if (i == n) return 0;
        ts->mode = TS_CALL;
        ts->hermes = 0;
        ts->call_at = ts->pos;
        return 1;
    }
    if (ts->mode == TS_START || ts->mode == TS_BETWEEN) {
        size_t i = 0;
        while (i < n && (is_ws(s[i]) || (ts->mode == TS_BETWEEN && s[i] == ';'))) i++;
        if (i == n) return 0;
        if (ts->mode == TS_START && n - i < 14 && !memcmp(s + i, tag, n - i) && !final) return 0;
        if (ts->mode == TS_START && n - i >= 14 && !memcmp(s + i, tag, 14)) {
            i = skip_ws(s, i + 14, n);
            if (i == n && !final) return 0;
        }
        if (i < n && s[i] == '{') {
            ts->mode = TS_CALL;
            ts->hermes = 0;
            ts->call_at = ts->pos + i;
        } else {
            ts->mode = ts->mode == TS_START ? TS_TEXT : TS_PLAIN;
        }
        return 1;
    }
    if (ts->mode == TS_HEND) {
        size_t i = 0;
        while (i < n && is_ws(s[i])) i++;
        if (n - i < sizeof close - 1 && !memcmp(s + i, close, n - i)) { /* the tag so far (dropped when cut there) */
            if (!final) return 0;
            ts->pos += n;
        }
        if (n - i >= sizeof close - 1 && !memcmp(s + i, close, sizeof close - 1)) ts->pos += i + sizeof close - 1;
        ts->mode = TS_TEXT;
        return 1;
    }
    const char *q = ts->mode == TS_TEXT ? memmem(s, n, open, sizeof open - 1) : NULL;
    if (q) {
        *rc |= put_content(ts, s, (size_t)(q - s), content);
        ts->pos += (size_t)(q - s) + sizeof open - 1;
        ts->mode = TS_CALL;
        ts->hermes = 1;
        ts->call_at = ts->pos;
        return 1;
    }
    size_t hold = final || ts->mode == TS_PLAIN ? 0 : partial_tag(s, n, open);
    if (n > hold) *rc |= put_content(ts, s, n - hold, content);
    ts->pos += n - hold;
    return 0;
}

int srv_tool_stream_feed(srv_tool_stream *ts, const char *s, size_t n, int final, sbuf *content, cJSON *calls) {
    int rc = sbuf_add(&ts->acc, s, n);
    if (rc) return -1;
    if (ts->mode == TS_NAMED) {
        if (!ts->header) rc |= add_delta(ts, calls, ts->named, "", 0), ts->header = 1;
        if (n) rc |= add_delta(ts, calls, NULL, s, n);
        if (final) ts->k = 1;
        return rc ? -1 : 0;
    }
    for (int progress = 1; progress;)
        progress = ts->mode == TS_CALL ? call_step(ts, final, content, calls, &rc) : text_step(ts, final, content, &rc);
    if (final && !ts->k && ts->ws.len) rc |= sbuf_add(content, ts->ws.p, ts->ws.len);
    if (final) ts->ws.len = 0;
    return rc ? -1 : 0;
}
