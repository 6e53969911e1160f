/* gr_schema_check.c — a JSON Schema validator for values known at compile time.
 *
 * Where a schema lists its values (enum / const), the grammar is the alternation of those values
 * that satisfy every other keyword of the schema: gr_schema.c asks gr_schema_check about each
 * one, so keywords the grammar could not express beside an enum (not, oneOf, patternProperties,
 * uniqueItems, ...) cost nothing. The verdict is 1 (valid), 0 (invalid) or -1 (undecided: a
 * $ref that does not resolve, a pattern our regex engine refuses, nesting past a limit); the
 * caller treats -1 as "cannot tell" and falls back to its own handling.
 *
 * Keywords (drafts 4 to 2020-12): type, enum, const, minimum, maximum, exclusiveMinimum /
 * exclusiveMaximum (boolean and numeric), multipleOf, minLength, maxLength (code points), pattern
 * (unanchored search, gr_regex.c), * items (schema or tuple), prefixItems, additionalItems, minItems, maxItems, uniqueItems,
 * contains / minContains / maxContains, properties, required, additionalProperties,
 * patternProperties, minProperties, maxProperties, propertyNames, dependencies,
 * dependentRequired, dependentSchemas, not, allOf, anyOf, oneOf, if / then / else, local $ref,
 * nullable. Other keywords (format among them) are annotations. Equality is JSON's: numbers by value, objects
 * regardless of key order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gr_internal.h"

#define CHECK_DEPTH 64

/* A JSON pointer fragment ("#/a/b~1c", percent-decoded) into root; NULL if it does not resolve. */
const cJSON *gr_json_pointer(const cJSON *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *cur = root;
    const char *p = ref + 1;
    if (*p && *p != '/') return NULL;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') { tok[n++] = '~'; p += 2; }
            else if (p[0] == '~' && p[1] == '1') { tok[n++] = '/'; p += 2; }
            else if (p[0] == '%' && p[1] && p[2]) {
                char h[3] = {p[1], p[2], 0};
                tok[n++] = (char)strtol(h, NULL, 16);
                p += 3;
            } else tok[n++] = *p++;
        }
        tok[n] = 0;
        if (cJSON_IsArray(cur)) {
            char *e;
            long i = strtol(tok, &e, 10);
            cur = *e ? NULL : cJSON_GetArrayItem(cur, (int)i);
        } else cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        if (!cur) return NULL;
    }
    return cur;
}

static int one_byte(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx; (void)id; (void)cap;
    buf[0] = 'a';
    return 1;
}

/* 1 if regex re (JSON Schema: unanchored unless ^ / $) finds a match in s, 0 if not, -1 if the
 * regex engine refuses it. */
int gr_regex_search(const char *re, const char *s, size_t n) {
    gr_builder b;
    gb_init(&b);
    ig_err err;
    ig_status st;
    gr_grammar *g = NULL;
    gr_vocab *v = NULL;
    gr_matcher *m = NULL;
    int r = -1;
    int node = gr_regex_build(&b, re, strlen(re), 0, 1, &err, &st);
    if (node >= 0) {
        int root = gb_rule(&b, "root");
        gb_set_body(&b, root, node);
        if (!gb_finish(&b, root, &g, &err) && !gr_vocab_new(1, one_byte, NULL, NULL, 0, &v, &err) &&
            !gr_matcher_new(g, v, &m, &err)) {
            int a = gr_matcher_accept_bytes(m, s, n, &err);
            r = a < 0 ? -1 : a == 1 && gr_matcher_can_end(m);
        }
    }
    gr_matcher_free(m);
    gr_vocab_free(v);
    gr_grammar_free(g);
    gb_free(&b);
    return r;
}

/* JSON equality (numbers by value, objects without regard to key order). */
static int json_equal(const cJSON *a, const cJSON *b) {
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) return a->valuedouble == b->valuedouble;
    if ((a->type & 0xFF) != (b->type & 0xFF)) return 0;
    if (cJSON_IsString(a)) return !strcmp(a->valuestring, b->valuestring);
    if (cJSON_IsArray(a)) {
        const cJSON *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next)
            if (!json_equal(x, y)) return 0;
        return !x && !y;
    }
    if (cJSON_IsObject(a)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
        for (const cJSON *x = a->child; x; x = x->next) {
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y || !json_equal(x, y)) return 0;
        }
        return 1;
    }
    return 1; /* null, true, false */
}

static long utf8_chars(const char *s) {
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

typedef struct ck { const cJSON *root; int depth; } ck;
static int check(ck *k, const cJSON *s, const cJSON *v, int skip_enum);

static int type_ok(const cJSON *t, const cJSON *v) {
    if (cJSON_IsArray(t)) {
        for (const cJSON *x = t->child; x; x = x->next)
            if (type_ok(x, v)) return 1;
        return 0;
    }
    if (!cJSON_IsString(t)) return 1;
    const char *n = t->valuestring;
    if (!strcmp(n, "null")) return cJSON_IsNull(v);
    if (!strcmp(n, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(n, "object")) return cJSON_IsObject(v);
    if (!strcmp(n, "array")) return cJSON_IsArray(v);
    if (!strcmp(n, "string")) return cJSON_IsString(v);
    if (!strcmp(n, "number")) return cJSON_IsNumber(v);
    if (!strcmp(n, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    return 0;
}

#define KW(name) (!strcmp(w, name))
#define SUB(schema, value) do { int r_ = check(k, schema, value, 0); if (r_ <= 0) return r_; } while (0)

static int check_number(const cJSON *s, const char *w, const cJSON *x, double d) {
    int excl_min = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"));
    int excl_max = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum"));
    if (!cJSON_IsNumber(x)) return 1;
    double b = x->valuedouble;
    if (KW("minimum")) return excl_min ? d > b : d >= b;
    if (KW("maximum")) return excl_max ? d < b : d <= b;
    if (KW("exclusiveMinimum")) return d > b;
    if (KW("exclusiveMaximum")) return d < b;
    if (KW("multipleOf") && b > 0) {
        double q = d / b;
        return fabs(q - nearbyint(q)) < 1e-9 * fmax(1, fabs(q));
    }
    return 1;
}

static int check_string(ck *k, const char *w, const cJSON *x, const char *str) {
    (void)k;
    if (KW("minLength") && cJSON_IsNumber(x)) return utf8_chars(str) >= x->valuedouble;
    if (KW("maxLength") && cJSON_IsNumber(x)) return utf8_chars(str) <= x->valuedouble;
    if (KW("pattern") && cJSON_IsString(x)) return gr_regex_search(x->valuestring, str, strlen(str));
    /* format: an annotation (JSON Schema 2019+), as for any value the schema lists */
    return 1;
}

static int check_array(ck *k, const cJSON *s, const char *w, const cJSON *x, const cJSON *v) {
    int n = cJSON_GetArraySize(v);
    const cJSON *tuple = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (!tuple && cJSON_IsArray(items)) tuple = items;
    int nt = tuple ? cJSON_GetArraySize(tuple) : 0;
    if (KW("minItems") && cJSON_IsNumber(x)) return n >= x->valuedouble;
    if (KW("maxItems") && cJSON_IsNumber(x)) return n <= x->valuedouble;
    if ((KW("prefixItems") || (KW("items") && cJSON_IsArray(x)))) {
        const cJSON *e = v->child;
        for (const cJSON *t = x->child; t && e; t = t->next, e = e->next) SUB(t, e);
        return 1;
    }
    if (KW("items") || (KW("additionalItems") && tuple == items && tuple)) {
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++)
            if (i >= nt) SUB(x, e);
        return 1;
    }
    if (KW("uniqueItems") && cJSON_IsTrue(x)) {
        for (const cJSON *a = v->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (json_equal(a, b)) return 0;
        return 1;
    }
    if (KW("contains")) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minContains"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxContains");
        int hits = 0;
        for (const cJSON *e = v->child; e; e = e->next) {
            int r = check(k, x, e, 0);
            if (r < 0) return -1;
            hits += r;
        }
        return hits >= (cJSON_IsNumber(mn) ? mn->valuedouble : 1) && (!cJSON_IsNumber(mx) || hits <= mx->valuedouble);
    }
    return 1;
}

static int check_object(ck *k, const cJSON *s, const char *w, const cJSON *x, const cJSON *v) {
    if (KW("required") && cJSON_IsArray(x)) {
        for (const cJSON *r = x->child; r; r = r->next)
            if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return 0;
        return 1;
    }
    if (KW("minProperties") && cJSON_IsNumber(x)) return cJSON_GetArraySize(v) >= x->valuedouble;
    if (KW("maxProperties") && cJSON_IsNumber(x)) return cJSON_GetArraySize(v) <= x->valuedouble;
    if (KW("properties") && cJSON_IsObject(x)) {
        for (const cJSON *p = x->child; p; p = p->next) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, p->string);
            if (m) SUB(p, m);
        }
        return 1;
    }
    if (KW("patternProperties") || KW("additionalProperties") || KW("propertyNames")) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties"), *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
        for (const cJSON *m = v->child; m; m = m->next) {
            int matched = props && cJSON_GetObjectItemCaseSensitive(props, m->string);
            if (KW("propertyNames")) {
                cJSON *name = cJSON_CreateString(m->string);
                int r = name ? check(k, x, name, 0) : -1;
                cJSON_Delete(name);
                if (r <= 0) return r;
                continue;
            }
            for (const cJSON *p = cJSON_IsObject(pp) ? pp->child : NULL; p; p = p->next) {
                int r = gr_regex_search(p->string, m->string, strlen(m->string));
                if (r < 0) return -1;
                if (r) { matched = 1; if (KW("patternProperties")) SUB(p, m); }
            }
            if (KW("additionalProperties") && !matched) SUB(x, m);
        }
        return 1;
    }
    if (KW("dependencies") || KW("dependentRequired") || KW("dependentSchemas")) {
        for (const cJSON *d = cJSON_IsObject(x) ? x->child : NULL; d; d = d->next) {
            if (!cJSON_GetObjectItemCaseSensitive(v, d->string)) continue;
            if (cJSON_IsArray(d)) {
                for (const cJSON *r = d->child; r; r = r->next)
                    if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return 0;
            } else SUB(d, v);
        }
        return 1;
    }
    return 1;
}

static int check_logic(ck *k, const cJSON *s, const char *w, const cJSON *x, const cJSON *v) {
    if (KW("not")) {
        int r = check(k, x, v, 0);
        return r < 0 ? -1 : !r;
    }
    if ((KW("allOf") || KW("anyOf") || KW("oneOf")) && cJSON_IsArray(x)) {
        int yes = 0, n = 0;
        for (const cJSON *b = x->child; b; b = b->next, n++) {
            int r = check(k, b, v, 0);
            if (r < 0) return -1;
            yes += r;
        }
        return KW("allOf") ? yes == n : KW("anyOf") ? yes > 0 : yes == 1;
    }
    if (KW("if")) {
        int r = check(k, x, v, 0);
        const cJSON *then = cJSON_GetObjectItemCaseSensitive(s, r ? "then" : "else");
        if (r < 0) return -1;
        return then ? check(k, then, v, 0) : 1;
    }
    return 1;
}

static int check(ck *k, const cJSON *s, const cJSON *v, int skip_enum) {
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s);
    if (!cJSON_IsObject(s)) return -1;
    if (++k->depth > CHECK_DEPTH) { k->depth--; return -1; }
    int r = 1;
    if (cJSON_IsNull(v) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"))) goto out;
    for (const cJSON *x = s->child; x && r == 1; x = x->next) {
        const char *w = x->string;
        if (KW("$ref")) {
            const cJSON *t = cJSON_IsString(x) ? gr_json_pointer(k->root, x->valuestring) : NULL;
            r = t ? check(k, t, v, 0) : -1;
        } else if (KW("type")) r = type_ok(x, v);
        else if (KW("enum") && !skip_enum) {
            r = 0;
            for (const cJSON *e = cJSON_IsArray(x) ? x->child : NULL; e && !r; e = e->next) r = json_equal(e, v);
        } else if (KW("const") && !skip_enum) r = json_equal(x, v);
        else if (cJSON_IsNumber(v)) r = check_number(s, w, x, v->valuedouble);
        else if (cJSON_IsString(v)) r = check_string(k, w, x, v->valuestring);
        else if (cJSON_IsArray(v)) r = check_array(k, s, w, x, v);
        else if (cJSON_IsObject(v)) r = check_object(k, s, w, x, v);
        if (r == 1) r = check_logic(k, s, w, x, v);
    }
out:
    k->depth--;
    return r;
}

int gr_schema_check(const cJSON *root, const cJSON *schema, const cJSON *value, int skip_enum) {
    ck k = {.root = root};
    return check(&k, schema, value, skip_enum);
}
