/* cli_grammar.h — guided-decoding commands and helpers of the ignis CLI (cli_grammar.c). */
#ifndef IG_CLI_GRAMMAR_H
#define IG_CLI_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"
#include "ig_status.h"
#include "tokenizer.h"

/* The constraint flags (--json-schema FILE, --json, --regex RE, --grammar FILE); borrowed. */
typedef struct cli_constraint_opts {
    const char *json_schema, *regex, *grammar;
    int json;
} cli_constraint_opts;

/* The constraint the flags give: *kind a gr_kind (GR_NONE: none given) and its text (malloc'd,
 * free with free()). More than one flag is IG_ERR_INVALID. */
ig_status cli_constraint_text(const cli_constraint_opts *o, int *kind, char **text, size_t *len, ig_err *err);
/* The tokenizer's vocabulary for masks (special tokens never allowed; eos_ids, or the
 * tokenizer's EOS when none, allowed where the grammar ends). Borrows t for the call. */
ig_status cli_grammar_vocab(const tok_tokenizer *t, const int32_t *eos_ids, int n_eos, gr_vocab **out, ig_err *err);

/* Encodes text (borrowed) as a model generates it after a prompt: tokens whose bytes (what masks
 * match) are exactly the text. A tokenizer that decorates a text's start (SentencePiece's dummy
 * prefix: a Prepend normalizer, Metaspace's prepend_scheme; byte-level add_prefix_space) would
 * put a space first that no generation makes, so then the text is encoded behind a marker and the
 * marker's tokens dropped. *ids: free with free(). IG_ERR_UNSUPPORTED when no marker splits off
 * cleanly. */
ig_status cli_encode_continuation(const tok_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                                  ig_err *err);

/* The commands; each returns the exit status and prints its own messages. */
int cli_grammar_check(const char *tok_dir, const cli_constraint_opts *o, const char *instance);
int cli_grammar_batch(const char *tok_dir, const char *file);
int cli_bench_grammar(const char *tok_dir, const char *schemas, int verbose);

#endif
