/* grammar.h — guided decoding: JSON Schema, JSON mode, regular expressions and GBNF grammars
 * compiled into token masks over a tokenizer's vocabulary.
 *
 * Pipeline: every source (gr_schema.c, gr_regex.c, gr_gbnf.c) builds one expression tree over
 * bytes (gr_build.c), which is lowered to context-free rules whose terminals are byte sets
 * (UTF-8 is spelled out as byte sequences); regular parts that need a complement, an
 * intersection or a character count (patternProperties' keys, a pattern within minLength /
 * maxLength) are built as DFAs and put back as right-linear rules (gr_dfa.c). A matcher (gr_match.c) runs those rules as a set of
 * parse stacks over bytes; stacks are hash-consed into a graph (a stack is one id), sets of stacks
 * are interned too, and each (set, byte) transition is computed once and cached, so the matcher is
 * a lazily built DFA over the grammar's pushdown automaton. A token mask walks a byte trie of the
 * vocabulary once, pruning a subtree at the first byte no stack accepts. A state's transitions are
 * computed once per class of bytes its stacks treat alike. Context-independent shortcuts: when a
 * stack sits in a loop over a byte set that contains every "plain" byte (the body of a free JSON
 * string), all tokens made only of plain bytes are allowed without a walk and only the other tokens
 * are walked, and at a plain fixed point (every plain byte leads back to the state) the other
 * tokens are walked only from their first non-plain byte on (a suffix trie); a repetition with
 * counts above four is one rule run with a counter in the stack node, and a state's mask is its
 * counters' clamped to the longest token + 1 (no token can tell the difference), so the states of
 * a long string share one mask; in a counted JSON string (minLength / maxLength) the tokens of pure
 * content come from per-length sets and only the tokens that close the string are walked, from
 * just after their quote; in other counted runs, where every character leads to one state for D
 * characters, tokens of whole plain characters up to D long come from per-length bitmasks; a
 * state whose first bytes mostly lead to a plain fixed point F (an object key past its first
 * character) takes F's mask and walks only the other first bytes; and the mask of a state set
 * already seen is reused.
 *
 * Unsupported schema keywords or grammar constructs are compile-time errors (IG_ERR_UNSUPPORTED)
 * naming the keyword and its JSON path; a malformed source is IG_ERR_FORMAT.
 *
 * Thread-safety: a gr_grammar and a gr_vocab are immutable once built and may be shared; a
 * gr_matcher belongs to one thread at a time.
 */
#ifndef IG_GRAMMAR_H
#define IG_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "ig_status.h"

typedef struct gr_grammar gr_grammar;
typedef struct gr_vocab gr_vocab;
typedef struct gr_matcher gr_matcher;

typedef enum gr_kind {
    GR_NONE = 0,
    GR_JSON_SCHEMA = 1, /* text: a JSON Schema document */
    GR_JSON = 2,        /* any JSON object (text ignored) */
    GR_REGEX = 3,       /* text: a regular expression the whole output must match */
    GR_GBNF = 4         /* text: a GBNF grammar (llama.cpp syntax), start rule `root` */
} gr_kind;

/* Compiles len bytes of text (borrowed). *out: free with gr_grammar_free. */
ig_status gr_compile(gr_kind kind, const char *text, size_t len, gr_grammar **out, ig_err *err);
void gr_grammar_free(gr_grammar *g); /* accepts NULL */
/* Rules and elements of the lowered grammar (for tests and benchmarks). */
void gr_grammar_size(const gr_grammar *g, int *n_rules, int *n_elems);

/* The vocabulary as bytes: n tokens; tok_bytes(ctx, id, buf, cap) returns the token's bytes
 * length or -1 (no bytes: never allowed). eos_ids (borrowed, copied) are allowed exactly where
 * the grammar may end. *out: free with gr_vocab_free. */
typedef int (*gr_token_bytes_fn)(void *ctx, int32_t id, char *buf, size_t cap);
ig_status gr_vocab_new(int32_t n, gr_token_bytes_fn tok_bytes, void *ctx, const int32_t *eos_ids, int n_eos,
                       gr_vocab **out, ig_err *err);
void gr_vocab_free(gr_vocab *v); /* accepts NULL */
int32_t gr_vocab_size(const gr_vocab *v);

/* A matcher: one request's position in the grammar. Borrows g and v, which must outlive it.
 * *out: free with gr_matcher_free. */
ig_status gr_matcher_new(const gr_grammar *g, const gr_vocab *v, gr_matcher **out, ig_err *err);
void gr_matcher_free(gr_matcher *m); /* accepts NULL */
/* Back to the start of the grammar, keeping the cached automaton. */
void gr_matcher_reset(gr_matcher *m);
/* Writes the allowed tokens as a bitmask: bit (id & 31) of bits[id >> 5], (n + 31) / 32 words.
 * IG_ERR_NOMEM / IG_ERR_UNSUPPORTED (state limit, left recursion) with a message. */
ig_status gr_matcher_mask(gr_matcher *m, uint32_t *bits, ig_err *err);
/* Advances by token id. Returns 1 if the token was allowed (state advanced), 0 if not (state
 * unchanged), -1 on error (message in err). An EOS id is allowed only where the grammar may end,
 * after which the matcher is finished. */
int gr_matcher_accept(gr_matcher *m, int32_t id, ig_err *err);
/* Advances by raw bytes; same returns as gr_matcher_accept. */
int gr_matcher_accept_bytes(gr_matcher *m, const char *s, size_t n, ig_err *err);
int gr_matcher_can_end(const gr_matcher *m);   /* the grammar may end here */
int gr_matcher_must_end(const gr_matcher *m);  /* nothing but the end may come (or EOS taken) */

#endif
