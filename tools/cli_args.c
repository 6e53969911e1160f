/* cli_args.c — the table-driven flag parser and help writer (see cli_args.h). */
#include "cli_args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#define CLI_MAX_FLAGS 128 /* flags of one command, all groups together */

/* ---- looking flags up */

typedef struct found {
    const cli_flag *f;
    void *dest; /* the flag's destination */
    int index;  /* across all groups, for the seen[] marks */
} found;

static int find_flag(const cli_group *groups, const char *name, size_t len, found *out) {
    int index = 0;
    for (const cli_group *g = groups; g->flags; g++)
        for (const cli_flag *f = g->flags; f->name; f++, index++) {
            int hit = (strlen(f->name) == len && !strncmp(f->name, name, len)) ||
                      (f->alias && strlen(f->alias) == len && !strncmp(f->alias, name, len));
            if (hit) {
                *out = (found){f, (char *)g->dest + f->offset, index};
                return 1;
            }
        }
    return 0;
}

/* Edit distance of two short strings (longer ones count as far apart). */
static int distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The flag closest to a misspelled name, if one is close enough to be a likely typo. */
static const char *nearest_flag(const cli_group *groups, const char *name) {
    const char *best = NULL;
    int best_d = 3;
    for (const cli_group *g = groups; g->flags; g++)
        for (const cli_flag *f = g->flags; f->name; f++) {
            int d = distance(name, f->name);
            if (d < best_d) best_d = d, best = f->name;
        }
    return best;
}

static ig_status unknown_flag(const cli_group *groups, const char *arg, size_t len, ig_err *err) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), arg);
    const char *near = nearest_flag(groups, name);
    if (near) return ig_fail(err, IG_ERR_INVALID, "unknown flag %s (did you mean %s?)", name, near);
    return ig_fail(err, IG_ERR_INVALID, "unknown flag %s", name);
}

/* ---- values */

/* The accepted range as text; an int32 flag's open sides show the type's limits. */
static void range_text(const cli_flag *f, char *buf, size_t n) {
    buf[0] = 0;
    if (f->kind == CLI_STR || f->kind == CLI_SWITCH || f->kind == CLI_STRS) return;
    double lo = f->lo, hi = f->hi;
    if (f->kind == CLI_INT && lo == -CLI_NONE) lo = INT32_MIN;
    if (f->kind == CLI_INT && hi == CLI_NONE) hi = INT32_MAX;
    int has_lo = lo != -CLI_NONE, has_hi = hi != CLI_NONE;
    const char *lb = f->flags & CLI_LO_OPEN ? "(" : "[", *rb = f->flags & CLI_HI_OPEN ? ")" : "]";
    if (has_lo && has_hi) snprintf(buf, n, "%s%.10g, %.10g%s", lb, lo, hi, rb);
    else if (has_lo) snprintf(buf, n, "%s %.10g", f->flags & CLI_LO_OPEN ? ">" : ">=", lo);
    else if (has_hi) snprintf(buf, n, "%s %.10g", f->flags & CLI_HI_OPEN ? "<" : "<=", hi);
    else buf[0] = 0;
}

static int in_range(const cli_flag *f, double x) {
    if (f->flags & CLI_LO_OPEN ? !(x > f->lo) : !(x >= f->lo)) return 0;
    if (f->flags & CLI_HI_OPEN ? !(x < f->hi) : !(x <= f->hi)) return 0;
    return 1;
}

static ig_status out_of_range(const cli_flag *f, const char *v, ig_err *err) {
    char r[96];
    range_text(f, r, sizeof r);
    if (!r[0]) return ig_fail(err, IG_ERR_INVALID, "%s: %s is out of range", f->name, v);
    return ig_fail(err, IG_ERR_INVALID, "%s: %s is out of range (accepted: %s)", f->name, v, r);
}

/* Integers of every kind: the whole string, no overflow, the table's range, the type's range. */
static ig_status set_integer(const found *x, const char *v, ig_err *err) {
    const cli_flag *f = x->f;
    const char *kind = f->kind == CLI_U64 ? "a non-negative integer" : "an integer";
    if (!*v || isspace((unsigned char)*v) || (f->kind == CLI_U64 && *v == '-'))
        return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not %s", f->name, v, kind);
    char *end;
    errno = 0;
    long long s = 0;
    unsigned long long u = 0;
    if (f->kind == CLI_U64) u = strtoull(v, &end, 0);
    else s = strtoll(v, &end, 10);
    if (end == v || *end) return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not %s", f->name, v, kind);
    if (errno == ERANGE) return out_of_range(f, v, err);
    if (f->kind == CLI_U64) {
        *(uint64_t *)x->dest = u;
        return IG_OK;
    }
    if (!in_range(f, (double)s) || (f->kind == CLI_INT && (s < INT32_MIN || s > INT32_MAX))) return out_of_range(f, v, err);
    if (f->kind == CLI_INT) *(int32_t *)x->dest = (int32_t)s;
    else *(int64_t *)x->dest = (int64_t)s;
    return IG_OK;
}

static ig_status set_float(const found *x, const char *v, ig_err *err) {
    const cli_flag *f = x->f;
    char *end;
    errno = 0;
    double d = *v && !isspace((unsigned char)*v) ? strtod(v, &end) : 0;
    if (!*v || isspace((unsigned char)*v) || end == v || *end || isnan(d))
        return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not a number", f->name, v);
    if (!(fabs(d) <= FLT_MAX)) return ig_fail(err, IG_ERR_INVALID, "%s: %s is too large for a float", f->name, v);
    if (errno == ERANGE || !in_range(f, d)) return out_of_range(f, v, err);
    *(float *)x->dest = (float)d;
    return IG_OK;
}

static ig_status push_str(cli_strs *s, const char *v, ig_err *err) {
    const char **nv = realloc(s->v, sizeof *nv * (size_t)(s->n + 1));
    if (!nv) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    s->v = nv;
    s->v[s->n++] = v;
    return IG_OK;
}

static ig_status set_value(const found *x, const char *v, ig_err *err) {
    switch (x->f->kind) {
    case CLI_INT:
    case CLI_INT64:
    case CLI_U64: return set_integer(x, v, err);
    case CLI_FLOAT: return set_float(x, v, err);
    case CLI_STR: *(const char **)x->dest = v; return IG_OK;
    case CLI_STRS: return push_str(x->dest, v, err);
    case CLI_SWITCH: *(int *)x->dest = 1; return IG_OK;
    }
    return ig_fail(err, IG_ERR_INTERNAL, "%s: unknown flag kind", x->f->name);
}

/* ---- the walk over argv */

typedef struct walk {
    const cli_cmd *c;
    const cli_group *groups;
    const char **pos;
    int *n_pos;
    unsigned char seen[CLI_MAX_FLAGS];
} walk;

static ig_status positional(walk *w, const char *arg, ig_err *err) {
    if (*w->n_pos >= w->c->max_pos) {
        if (w->c->max_pos == 0) return ig_fail(err, IG_ERR_INVALID, "unexpected argument '%s' (%s takes none)", arg, w->c->name);
        return ig_fail(err, IG_ERR_INVALID, "unexpected argument '%s' (%s takes %s)", arg, w->c->name, w->c->args);
    }
    w->pos[(*w->n_pos)++] = arg;
    return IG_OK;
}

/* One flag at argv[*i] (and its value, after '=' or in the next argument). */
static ig_status one_flag(walk *w, int argc, char **argv, int *i, ig_err *err) {
    const char *arg = argv[*i], *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    found x;
    if (!find_flag(w->groups, arg, len, &x)) return unknown_flag(w->groups, arg, len, err);
    if (x.index < CLI_MAX_FLAGS) w->seen[x.index] = 1;
    if (x.f->kind == CLI_SWITCH) {
        if (eq) return ig_fail(err, IG_ERR_INVALID, "%s takes no value (got '%s')", x.f->name, eq + 1);
        return set_value(&x, "", err);
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
        if (*i + 1 >= argc) return ig_fail(err, IG_ERR_INVALID, "%s needs a value (%s)", x.f->name, x.f->metavar);
        v = argv[++*i];
    }
    return set_value(&x, v, err);
}

static ig_status check_complete(const walk *w, ig_err *err) {
    if (*w->n_pos < w->c->min_pos) return ig_fail(err, IG_ERR_INVALID, "missing %s (usage: ignis %s %s %s)", w->c->args,
                                                 w->c->name, w->c->args, w->c->usage);
    int index = 0;
    for (const cli_group *g = w->groups; g->flags; g++)
        for (const cli_flag *f = g->flags; f->name; f++, index++)
            if ((f->flags & CLI_REQUIRED) && index < CLI_MAX_FLAGS && !w->seen[index])
                return ig_fail(err, IG_ERR_INVALID, "missing %s%s%s %s (required)", f->alias ? f->alias : "",
                               f->alias ? "/" : "", f->name, f->metavar ? f->metavar : "");
    return IG_OK;
}

/* Whether -h / --help stands among the flags (not as a flag's value, not after `--`). Looked for
 * before parsing, so the help shows the defaults, not values given before it. */
static int wants_help(const cli_group *groups, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) return 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        found x;
        if (a[0] == '-' && a[1] && !strchr(a, '=') && find_flag(groups, a, strlen(a), &x) && x.f->kind != CLI_SWITCH) i++;
    }
    return 0;
}

ig_status cli_parse(const cli_cmd *c, const cli_group *groups, int argc, char **argv, const char **pos,
                    int *n_pos, int *help, ig_err *err) {
    walk w = {.c = c, .groups = groups, .pos = pos, .n_pos = n_pos};
    *n_pos = 0;
    *help = wants_help(groups, argc, argv);
    if (*help) return IG_OK;
    int flags_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        ig_status st;
        if (flags_done || a[0] != '-' || !a[1]) st = positional(&w, a, err);
        else if (!strcmp(a, "--")) st = IG_OK, flags_done = 1;
        else st = one_flag(&w, argc, argv, &i, err);
        if (st) return st;
    }
    return check_complete(&w, err);
}

void cli_free(const cli_group *groups) {
    for (const cli_group *g = groups; g->flags; g++)
        for (const cli_flag *f = g->flags; f->name; f++)
            if (f->kind == CLI_STRS) {
                cli_strs *s = (cli_strs *)((char *)g->dest + f->offset);
                free(s->v);
                s->v = NULL;
                s->n = 0;
            }
}

ig_status cli_join(const cli_strs *s, char sep, char **out, ig_err *err) {
    size_t len = 0;
    *out = NULL;
    for (int32_t i = 0; i < s->n; i++) len += strlen(s->v[i]) + 1;
    if (len == 0 || len == (size_t)s->n) return IG_OK; /* none, or all empty */
    char *j = malloc(len), *p = j;
    if (!j) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < s->n; i++) {
        size_t l = strlen(s->v[i]);
        if (!l) continue;
        if (p != j) *p++ = sep;
        memcpy(p, s->v[i], l);
        p += l;
    }
    *p = 0;
    *out = j;
    return IG_OK;
}

/* ---- help */

/* "default X" from the table's text or the destination's value (nothing for switches, lists,
 * unset strings and values outside the range, which mean "not given"). */
static void default_text(const cli_flag *f, const void *dest, char *buf, size_t n) {
    buf[0] = 0;
    if (f->dflt) {
        snprintf(buf, n, "default %s", f->dflt);
        return;
    }
    switch (f->kind) {
    case CLI_INT:
        if (in_range(f, *(const int32_t *)dest)) snprintf(buf, n, "default %d", *(const int32_t *)dest);
        break;
    case CLI_INT64:
        if (in_range(f, (double)*(const int64_t *)dest)) snprintf(buf, n, "default %lld", (long long)*(const int64_t *)dest);
        break;
    case CLI_U64: snprintf(buf, n, "default %llu", (unsigned long long)*(const uint64_t *)dest); break;
    case CLI_FLOAT:
        if (in_range(f, *(const float *)dest)) snprintf(buf, n, "default %g", (double)*(const float *)dest);
        break;
    case CLI_STR:
        if (*(const char *const *)dest) snprintf(buf, n, "default %s", *(const char *const *)dest);
        break;
    default: break;
    }
}

static void flag_help(FILE *out, const cli_flag *f, const void *dest) {
    char left[96], range[96], dflt[160];
    snprintf(left, sizeof left, "%s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "", f->name,
             f->metavar ? " " : "", f->metavar ? f->metavar : "");
    range_text(f, range, sizeof range);
    default_text(f, dest, dflt, sizeof dflt);
    if (strlen(left) > 28) fprintf(out, "  %s\n  %-28s %s", left, "", f->help);
    else fprintf(out, "  %-28s %s", left, f->help);
    if (range[0] || dflt[0])
        fprintf(out, " (%s%s%s%s)", range[0] ? "accepts " : "", range, range[0] && dflt[0] ? "; " : "", dflt);
    if (f->kind == CLI_STRS) fprintf(out, " [repeatable]");
    if (f->flags & CLI_REQUIRED) fprintf(out, " [required]");
    fputc('\n', out);
}

void cli_help(FILE *out, const cli_cmd *c, const cli_group *groups) {
    fprintf(out, "usage: ignis %s%s%s%s%s\n", c->name, c->args && *c->args ? " " : "", c->args ? c->args : "",
            c->usage && *c->usage ? " " : "", c->usage ? c->usage : "");
    fprintf(out, "%s\n", c->summary);
    const cli_group *prev = NULL;
    for (const cli_group *g = groups; g->flags; g++) {
        if (!g->flags->name) continue;
        /* groups of one title share a heading */
        int same = prev && (prev->title == g->title || (prev->title && g->title && !strcmp(prev->title, g->title)));
        if (!same) fprintf(out, "\n%s%soptions:\n", g->title ? g->title : "", g->title ? " " : "");
        prev = g;
        for (const cli_flag *f = g->flags; f->name; f++) flag_help(out, f, (const char *)g->dest + f->offset);
    }
    fprintf(out, "\n  %-28s %s\n", "-h, --help", "print this help and exit");
}
