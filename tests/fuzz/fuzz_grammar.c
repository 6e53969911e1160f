/* fuzz_grammar.c — libFuzzer target for the guided-decoding compilers (JSON Schema, regex, GBNF)
 * and the matcher: the first byte picks the source kind, the rest is the source; what compiles
 * is run for a few masks and bytes over a small vocabulary. Must never crash, hang or leak.
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Iruntime/grammar tests/fuzz/fuzz_grammar.c runtime/grammar/gr_*.c -lcjson -o fuzz_grammar
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

static int tok_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx; (void)cap;
    static const char *w[] = {"{\"", "\":", "\", \"", "true", "null", "12", "\"}", "  ", "\\u00"};
    if (id < 256) { buf[0] = (char)id; return 1; }
    const char *s = w[id - 256];
    memcpy(buf, s, strlen(s));
    return (int)strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static gr_vocab *v;
    ig_err err;
    if (!v) {
        int32_t eos = 265;
        if (gr_vocab_new(266, tok_bytes, NULL, &eos, 1, &v, &err)) return 0;
    }
    if (size < 1) return 0;
    gr_kind kinds[] = {GR_JSON_SCHEMA, GR_REGEX, GR_GBNF, GR_JSON};
    gr_kind kind = kinds[data[0] % 4];
    gr_grammar *g = NULL;
    gr_matcher *m = NULL;
    if (gr_compile(kind, (const char *)data + 1, size - 1, &g, &err) == IG_OK && gr_matcher_new(g, v, &m, &err) == IG_OK) {
        uint32_t bits[9];
        for (int step = 0; step < 8; step++) {
            if (gr_matcher_mask(m, bits, &err)) break;
            int id = -1;
            for (int k = 0; k < 266 && id < 0; k++) /* the first allowed token after a data-chosen start */
                if (bits[((k + data[step % size] * 7) % 266) >> 5] >> (((k + data[step % size] * 7) % 266) & 31) & 1)
                    id = (k + data[step % size] * 7) % 266;
            if (id < 0 || gr_matcher_accept(m, id, &err) != 1) break;
        }
    }
    gr_matcher_free(m);
    gr_grammar_free(g);
    return 0;
}
