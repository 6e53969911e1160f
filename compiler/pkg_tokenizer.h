/* pkg_tokenizer.h — package assembly: the HF tokenizer files (tokenizer.json,
 * tokenizer_config.json) of a package built from a GGUF, synthesized from the tokenizer metadata
 * the importer read (ir_gguf_tokenizer, ir/gguf.h).
 *
 * It follows what transformers does when it loads a GGUF tokenizer
 * (integrations/gguf/gguf_tokenizer_mapping.py): byte-level BPE for tokenizer.ggml.model "gpt2"
 * with the split regex chosen by tokenizer.ggml.pre, SentencePiece BPE with byte fallback for
 * "llama" with merges recovered from the scores (tokenization_utils_base.generate_merges). The
 * same metadata always gives the same bytes.
 */
#ifndef IG_PKG_TOKENIZER_H
#define IG_PKG_TOKENIZER_H

#include "gguf.h"
#include "ig_status.h"

/* Writes tokenizer.json and tokenizer_config.json into out_dir (which must exist) from t
 * (borrowed). Errors: IG_ERR_NOMEM, IG_ERR_IO naming the file. */
ig_status pt_write_tokenizer(const ir_gguf_tokenizer *t, const char *out_dir, ig_err *err);

/* ir_gguf_read_tokenizer of the GGUF at gguf_path, then pt_write_tokenizer into out_dir. */
ig_status pt_write_gguf_tokenizer(const char *gguf_path, const char *out_dir, ig_err *err);

#endif
