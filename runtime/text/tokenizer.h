/* tokenizer.h — HuggingFace `tokenizer.json` tokenizers in plain C: load, encode, decode, stream.
 *
 * Reads the tokenizer.json that HuggingFace `tokenizers` writes (plus tokenizer_config.json for
 * bos/eos) and encodes / decodes byte-identically to it for BPE models: byte-level BPE (GPT-2,
 * Qwen, Llama 3, SmolLM2, DeepSeek) and SentencePiece-style BPE with byte fallback (Llama 2).
 * The pipeline is HF's: added tokens split out first, then normalizer, pre-tokenizer, model,
 * post-processor; decode runs the decoder chain over token strings. Pre-tokenizer regexes run on
 * a small backtracking regex engine over code points (tok_regex_*; a memo of expanded states keeps it
 * linear in pathological patterns), with Unicode categories,
 * case mappings and normalization data generated from Unicode data (tools/gen_unicode_tables.py).
 *
 * Thread-safety: a loaded tok_tokenizer is immutable except for its bounded pre-token cache,
 * which is guarded by striped mutexes; encode and decode may run on one tokenizer from many
 * threads at once. A tok_stream belongs to one thread at a time.
 *
 * Text is UTF-8. Invalid UTF-8 input is replaced with U+FFFD per maximal subpart before encoding
 * (HF takes a Rust &str, so its callers cannot pass invalid UTF-8; this is what Rust's
 * String::from_utf8_lossy would hand it).
 */
#ifndef IG_TOKENIZER_H
#define IG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "ig_status.h"

typedef struct tok_tokenizer tok_tokenizer;

/* Loads tokenizer.json (and, when non-NULL, tokenizer_config.json for bos/eos and extra added
 * tokens). Borrows the paths. On success *out is owned by the caller: free with tok_free. */
ig_status tok_load_file(const char *tokenizer_json_path, const char *tokenizer_config_path_or_NULL,
                        tok_tokenizer **out, ig_err *err);
/* Loads dir/tokenizer.json, plus dir/tokenizer_config.json if present. Free with tok_free. */
ig_status tok_load_dir(const char *dir, tok_tokenizer **out, ig_err *err);
/* Loads from JSON text in memory (borrowed; config_json may be NULL). Free with tok_free. */
ig_status tok_load_json(const char *tokenizer_json, size_t len, const char *config_json_or_NULL,
                        tok_tokenizer **out, ig_err *err);
/* Accepts NULL. */
void tok_free(tok_tokenizer *t);

/* Encodes len bytes of text (borrowed). add_special: run the post-processor's special tokens
 * (e.g. BOS), like HF add_special_tokens=True. parse_special: special added tokens in the text
 * become their ids (HF's default); when 0 they are encoded as plain text (non-special added
 * tokens are always matched, as in HF). On success *ids is malloc'd: free with free(). */
ig_status tok_encode(const tok_tokenizer *t, const char *text, size_t len, int add_special,
                     int parse_special, int32_t **ids, size_t *n_ids, ig_err *err);
/* Decodes n ids (borrowed); ids out of range are skipped, as in HF. skip_special drops special
 * added tokens. On success *text is malloc'd, NUL-terminated, *len bytes: free with free(). */
ig_status tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                     char **text, size_t *len, ig_err *err);

int32_t tok_vocab_size(const tok_tokenizer *t);                  /* model vocab + added tokens */
int32_t tok_token_id(const tok_tokenizer *t, const char *token); /* -1 if none; borrows token */
const char *tok_token_str(const tok_tokenizer *t, int32_t id);   /* borrowed; NULL if none */
int32_t tok_bos_id(const tok_tokenizer *t); /* tokenizer_config.json bos_token, -1 if none */
int32_t tok_eos_id(const tok_tokenizer *t); /* tokenizer_config.json eos_token, -1 if none */
int tok_is_special(const tok_tokenizer *t, int32_t id);
/* The bytes token id stands for in the middle of a text (byte-level BPE: its bytes through the
 * GPT-2 byte map; SentencePiece: U+2581 as a space, <0xHH> as the byte HH; a special token: its
 * content), written into out (cap bytes, caller's). Returns the length, or -1 for an id out of
 * range or a cap too small. What guided decoding matches tokens against. */
int tok_token_bytes(const tok_tokenizer *t, int32_t id, char *out, size_t cap);

/* Incremental decoder. Borrows t, which must outlive it. Free with tok_stream_free. */
typedef struct tok_stream tok_stream;
tok_stream *tok_stream_new(const tok_tokenizer *t, int skip_special); /* NULL on OOM */
void tok_stream_free(tok_stream *s);                                   /* accepts NULL */
/* Appends id; *piece (borrowed until the next call on s) receives the newly completed text,
 * possibly empty. Never returns part of a UTF-8 character: bytes of an unfinished character are
 * held back until a later id completes them. The concatenation of all pieces equals
 * tok_decode(all ids) except for text still held back at the end (see tok_stream_flush). */
ig_status tok_stream_push(tok_stream *s, int32_t id, const char **piece, size_t *len, ig_err *err);
/* Ends the stream: returns whatever is held back (as decode would render it, i.e. with U+FFFD
 * for an unfinished character). Extension beyond HF's DecodeStream. Borrowed like push's. */
ig_status tok_stream_flush(tok_stream *s, const char **piece, size_t *len, ig_err *err);

/* ---- Internals shared by the tok_*.c files and their tests ---------------------------------- */

/* Regex engine: backtracking over code points with leftmost-first (Perl / Oniguruma) semantics.
 * Supports | (?:) (?i:) () [..] [^..] ranges, \s\S\d\D\w\W \p{..}\P{..} \r\n\t\f\v \xHH \x{..}
 * \uHHHH, . ^ $ (line anchors, as Oniguruma's Ruby syntax) \A \z \b \B, * + ? {n} {n,} {n,m}
 * and lazy forms, lookahead (?=..) (?!..). No backreferences, lookbehind or possessive forms. */
typedef struct tok_regex tok_regex;
/* Compiles a UTF-8 pattern (borrowed). Free *out with tok_regex_free. */
ig_status tok_regex_compile(const char *pattern, size_t len, tok_regex **out, ig_err *err);
void tok_regex_free(tok_regex *re); /* accepts NULL */
/* Finds the leftmost match in cps[start..n) (cps borrowed; lookahead may see up to n).
 * Returns 1 and the match [*ms, *me) in code point indices, 0 if none, -1 on OOM. */
int tok_regex_search(const tok_regex *re, const uint32_t *cps, size_t n, size_t start, size_t *ms,
                     size_t *me);

/* Unicode helpers (tok_unicode.c over the generated tok_unicode_tables.c). */
enum {
    TOK_UC_Cn, TOK_UC_Lu, TOK_UC_Ll, TOK_UC_Lt, TOK_UC_Lm, TOK_UC_Lo, TOK_UC_Mn, TOK_UC_Mc,
    TOK_UC_Me, TOK_UC_Nd, TOK_UC_Nl, TOK_UC_No, TOK_UC_Pc, TOK_UC_Pd, TOK_UC_Ps, TOK_UC_Pe,
    TOK_UC_Pi, TOK_UC_Pf, TOK_UC_Po, TOK_UC_Sm, TOK_UC_Sc, TOK_UC_Sk, TOK_UC_So, TOK_UC_Zs,
    TOK_UC_Zl, TOK_UC_Zp, TOK_UC_Cc, TOK_UC_Cf, TOK_UC_Cs, TOK_UC_Co
};
int tok_ucat(uint32_t cp);       /* general category, TOK_UC_* */
uint32_t tok_ulower(uint32_t cp); /* simple lowercase mapping */
uint32_t tok_uupper(uint32_t cp); /* simple uppercase mapping */
int tok_uspace(uint32_t cp);      /* Unicode White_Space */
/* Decodes UTF-8 into code points, replacing invalid bytes with U+FFFD per maximal subpart.
 * cps must hold len entries; byte_off (may be NULL) len+1 entries: byte_off[i] is where cps[i]
 * starts and byte_off[count] == len. Returns the number of code points. */
size_t tok_utf8_decode(const char *s, size_t len, uint32_t *cps, uint32_t *byte_off);
/* Writes cp as UTF-8 into out (4 bytes room); returns bytes written. */
int tok_utf8_put(uint32_t cp, char *out);
/* 1 if s[0..len) is valid UTF-8. */
int tok_utf8_valid(const char *s, size_t len);
/* Normalizes cps[0..n) into a malloc'd array (*out, *n_out; free with free()). form: 0 NFC,
 * 1 NFD, 2 NFKC, 3 NFKD. Returns IG_OK or IG_ERR_NOMEM. */
ig_status tok_unorm(const uint32_t *cps, size_t n, int form, uint32_t **out, size_t *n_out);

#endif
