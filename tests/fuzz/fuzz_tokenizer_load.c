/* fuzz_tokenizer_load.c — tokenizer.json loading (model, merges, added tokens, normalizers,
 * pre-tokenizers and their regexes, decoders, post-processors); a tokenizer that loads encodes and
 * decodes a short text. */
#include "fuzz_util.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    tok_tokenizer *t = NULL;
    ig_err err;
    if (tok_load_json((const char *)data, n, NULL, &t, &err) != IG_OK) return 0;
    int32_t *ids = NULL;
    size_t nids = 0;
    static const char text[] = "Hello world, <s> 123 \xc3\xa9t\xc3\xa9!";
    if (tok_encode(t, text, sizeof text - 1, 1, 1, &ids, &nids, &err) == IG_OK) {
        char *out = NULL;
        size_t len;
        if (tok_decode(t, ids, nids, 1, &out, &len, &err) == IG_OK) free(out);
        free(ids);
    }
    tok_free(t);
    return 0;
}
