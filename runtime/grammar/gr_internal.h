/* gr_internal.h — the grammar module's internals: the expression builder every source uses, the
 * lowered rule form the matcher runs, and the code point set helpers of the regex and GBNF
 * parsers. Not a public interface (see grammar.h).
 *
 * Expressions are nodes in one arena (gr_builder); a node is a byte set, a sequence, an
 * alternation, a repetition {min,max} or a reference to a named rule. Lowering turns each rule's
 * body into alternatives of elements: an element is a byte set index (>= 0), a rule reference
 * (GR_REF(r) < 0), and every alternative ends with GR_END.
 *
 * A counted rule (rep_lo[r] >= 0) is a repetition X{lo,hi} of its alternatives as one rule: a
 * reference to it is run by the matcher as one stack node carrying the iterations still owed and
 * still allowed (gr_match.c), instead of one rule per count. Its body never matches the empty
 * string, so every iteration consumes at least one byte.
 */
#ifndef IG_GR_INTERNAL_H
#define IG_GR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"

#define GR_END INT32_MIN
#define GR_REF(r) (-1 - (int32_t)(r))
#define GR_REF_RULE(e) (-1 - (e))
#define GR_INF (-1)                /* unbounded repetition */
#define GR_MAX_NODES (1 << 22)     /* expression nodes of one grammar */
#define GR_MAX_ELEMS (1 << 22)     /* lowered elements */

typedef struct { uint64_t w[4]; } gr_bset; /* a set of bytes */

enum { GN_EMPTY, GN_BYTES, GN_SEQ, GN_ALT, GN_REP, GN_REF, GN_NEVER };
typedef struct gr_node {
    uint8_t kind;
    int32_t a, b;      /* BYTES: set index; REP: min, max; REF: rule */
    int32_t kid, nkid; /* SEQ / ALT: kids[kid .. kid+nkid); REP: kids[kid] */
} gr_node;

typedef struct gr_builder {
    gr_node *nodes; int32_t n_nodes, cap_nodes;
    int32_t *kids; int32_t n_kids, cap_kids;
    gr_bset *sets; int32_t n_sets, cap_sets;
    char **rule_names; int32_t *rule_body; int32_t n_rules, cap_rules;
    int32_t json_char; /* the node of one JSON string character (gb_json_char_utf8), -1 until made */
    int oom; /* sticky: an allocation failed or a limit was passed */
} gr_builder;

struct gr_grammar {
    gr_bset *sets; int32_t n_sets;
    int32_t *elems; int32_t n_elems;
    int32_t *alt_start; int32_t *alt_count; /* per rule: first index into alts, count */
    int32_t *alts; int32_t n_alts;          /* element index where each alternative begins */
    int32_t n_rules;
    int32_t root;
    int32_t *rep_lo, *rep_hi; /* per rule: counted repetition bounds (hi GR_INF: unbounded); lo -1: a plain rule */
    int8_t *rep_json;         /* per rule: the counted body is one JSON string character (gb_json_char_utf8) */
    int32_t n_counted;        /* counted rules (0: rep_lo / rep_hi may be NULL) */
};

/* ---- builder (gr_build.c); every function returns a node id, or -1 once oom is set ---------- */
void gb_init(gr_builder *b);
void gb_free(gr_builder *b);
int gb_bytes(gr_builder *b, const gr_bset *s);
int gb_range(gr_builder *b, int lo, int hi);         /* one byte in [lo, hi] */
int gb_lit(gr_builder *b, const char *s, size_t n);  /* exactly these bytes */
int gb_str(gr_builder *b, const char *s);            /* gb_lit of a C string */
int gb_seq(gr_builder *b, const int *k, int n);
int gb_seq2(gr_builder *b, int x, int y);
int gb_seq3(gr_builder *b, int x, int y, int z);
int gb_alt(gr_builder *b, const int *k, int n);
int gb_alt2(gr_builder *b, int x, int y);
int gb_rep(gr_builder *b, int x, int min, int max); /* max GR_INF: unbounded */
int gb_opt(gr_builder *b, int x);
int gb_empty(gr_builder *b);
int gb_never(gr_builder *b);                       /* matches nothing */
/* One JSON string character (RFC 8259: a whole UTF-8 character other than '"', '\\' and the
 * controls, or an escape), made once per builder: a counted repetition of it is a counted JSON
 * string, whose masks gr_match.c computes from per-length token sets. */
int gb_json_char_utf8(gr_builder *b);
/* Named rules: gb_rule finds or creates (body unset); gb_ref refers to one. */
int gb_rule(gr_builder *b, const char *name);
int gb_ref(gr_builder *b, int rule);
void gb_set_body(gr_builder *b, int rule, int node);
/* Lowers every rule into *out (root rule index given). Names an undefined rule in err. */
ig_status gb_finish(gr_builder *b, int root, gr_grammar **out, ig_err *err);

void bset_clear(gr_bset *s);
void bset_add_range(gr_bset *s, int lo, int hi);
static inline int bset_has(const gr_bset *s, int c) { return (int)((s->w[c >> 6] >> (c & 63)) & 1); }

/* ---- code point sets (gr_build.c): sorted disjoint ranges ------------------------------------ */
typedef struct gr_cpset { uint32_t (*r)[2]; int n, cap; } gr_cpset;
void cps_free(gr_cpset *s);
int cps_add(gr_cpset *s, uint32_t lo, uint32_t hi); /* -1 on OOM */
int cps_normalize(gr_cpset *s);                      /* sort + merge */
int cps_negate(gr_cpset *s);                         /* complement in [0, 0x10FFFF] */
/* The code points as UTF-8 byte sequences. json: inside a JSON string, so '"', '\\' and
 * controls appear as the escapes json.dumps writes (\" \\ \n \t ... \u00XX). */
int gb_cpset(gr_builder *b, const gr_cpset *s, int json);

/* ---- DFAs over bytes (gr_dfa.c) --------------------------------------------------------------- */
typedef struct gr_dfa {
    int n, cap, nclass;
    uint8_t cls[256];  /* byte -> class */
    int32_t *next;     /* n x nclass: next state, -1 none */
    uint8_t *acc;      /* per state: accepting */
} gr_dfa;               /* state 0 is the start */
/* node: no rule references. 0 or -1 (a reference, more than max_states states, OOM). */
int gr_dfa_from_node(const gr_builder *b, int node, gr_dfa *out, int max_states);
/* L(x) ∩ L(y), or L(x) \ L(y) with minus. 0 or -1. */
int gr_dfa_product(const gr_dfa *x, const gr_dfa *y, int minus, gr_dfa *out, int max_states);
int gr_dfa_empty(const gr_dfa *d);
/* A zero-width end marker: a state becomes accepting where a run of the marker byte reaches an
 * accepting state, then the marker's edges go. 0, or -1 where the marker shares its class. */
int gr_dfa_end_marker(gr_dfa *d, int byte);
/* one{lo,hi} (hi GR_INF: unbounded) of a unit that matches no empty string and ends where it
 * accepts (a character): levels x states, built directly. 0 or -1. */
int gr_dfa_counted(const gr_dfa *one, int lo, int hi, gr_dfa *out);
int gr_dfa_minimize(gr_dfa *d); /* in place, dead states dropped; 0 or -1 (OOM) */
/* Right-linear rules matching L(d); the node, gb_never if empty, -1 on OOM. */
int gr_dfa_to_node(gr_builder *b, const gr_dfa *d);
void gr_dfa_free(gr_dfa *d);

/* ---- sources ---------------------------------------------------------------------------------- */
/* Regex: full match (anchored) when json == 0; inside a JSON string (JSON Schema `pattern`:
 * unanchored unless ^ / $) when json == 1. Returns the node or -1 with err set. */
int gr_regex_build(gr_builder *b, const char *re, size_t len, int json, int search, ig_err *err, ig_status *st);
/* A JSON Schema pattern inside a JSON string (unanchored unless ^) where a '$' anywhere (inside a
 * group too) is the byte 0x01, which no string body holds: intersected with bodies followed by
 * markers and the markers erased (gr_dfa_end_marker), it is the pattern's language. */
int gr_regex_build_quoted(gr_builder *b, const char *re, size_t len, ig_err *err, ig_status *st);
ig_status gr_gbnf_build(gr_builder *b, const char *text, size_t len, int *root, ig_err *err);
/* gr_schema_check.c: a value against a schema (root: the document, for local $ref): 1 valid,
 * 0 invalid, -1 undecided; skip_enum: the top level's enum / const are not checked. */
struct cJSON;
int gr_schema_check(const struct cJSON *root, const struct cJSON *schema, const struct cJSON *value, int skip_enum);
const struct cJSON *gr_json_pointer(const struct cJSON *root, const char *ref); /* NULL: does not resolve */
int gr_regex_search(const char *re, const char *s, size_t n);     /* 1 match, 0 none, -1 refused */
ig_status gr_schema_build(gr_builder *b, const char *text, size_t len, int json_mode, int *root, ig_err *err);

#endif
