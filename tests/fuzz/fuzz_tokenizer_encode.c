/* fuzz_tokenizer_encode.c — encode, decode and streaming decode of arbitrary bytes with the real
 * tokenizers of the test data (Qwen3, Llama 3, Llama 2). The first byte picks the tokenizer and
 * the flags; the rest is the text; the ids decoded are the encoding's, then the raw bytes read as
 * ids. */
#include "fuzz_util.h"
#include "tokenizer.h"

static tok_tokenizer *toks[3];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char *names[] = {"qwen3", "llama3", "llama2"};
    for (int i = 0; i < 3; i++) {
        char dir[1024];
        ig_err err;
        snprintf(dir, sizeof dir, "%s/tokenizers/%s", fuzz_testdata(), names[i]);
        if (tok_load_dir(dir, &toks[i], &err)) {
            fprintf(stderr, "fuzz_tokenizer_encode: %s\n", err.msg);
            abort();
        }
    }
    return 0;
}

static void stream(const tok_tokenizer *t, const int32_t *ids, size_t n) {
    tok_stream *s = tok_stream_new(t, 1);
    if (!s) return;
    const char *p;
    size_t len;
    ig_err err;
    for (size_t i = 0; i < n; i++) tok_stream_push(s, ids[i], &p, &len, &err);
    tok_stream_flush(s, &p, &len, &err);
    tok_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    const tok_tokenizer *t = toks[data[0] % 3];
    int flags = data[0] / 3;
    const char *text = (const char *)data + 1;
    int32_t *ids = NULL;
    size_t nids = 0;
    ig_err err;
    if (tok_encode(t, text, n - 1, flags & 1, (flags >> 1) & 1, &ids, &nids, &err) == IG_OK) {
        char *out = NULL;
        size_t len;
        if (tok_decode(t, ids, nids, (flags >> 2) & 1, &out, &len, &err) == IG_OK) free(out);
        stream(t, ids, nids);
        free(ids);
    }
    /* the bytes as ids, in and out of range */
    size_t m = (n - 1) / 4;
    int32_t *raw = malloc((m ? m : 1) * sizeof *raw);
    if (m) memcpy(raw, text, m * sizeof *raw);
    for (size_t i = 0; i < m; i++) raw[i] = (flags >> 3) & 1 ? raw[i] : (int32_t)((uint32_t)raw[i] % 200000u);
    char *out = NULL;
    size_t len;
    if (tok_decode(t, raw, m, flags & 1, &out, &len, &err) == IG_OK) free(out);
    stream(t, raw, m);
    free(raw);
    return 0;
}
