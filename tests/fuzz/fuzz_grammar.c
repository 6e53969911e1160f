/* fuzz_grammar.c — libFuzzer target for the guided-decoding compilers (JSON Schema, regex, GBNF)
 * and the matcher: the first byte picks the source kind, the rest is the source; what compiles
 * is run for a few masks and bytes over a small vocabulary. Must never crash, hang or leak, and
 * every mask must allow exactly the tokens that a second matcher, replaying the same tokens,
 * accepts (the mask shortcuts — counters, counted JSON strings, plain fixed points — against the
 * plain automaton); a difference traps.
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Iruntime/grammar tests/fuzz/fuzz_grammar.c runtime/grammar/gr_*.c -lcjson -o fuzz_grammar
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#define NV 273 /* 256 single bytes, the words below, EOS */

static int tok_bytes(void *ctx, int32_t id, char *buf, size_t cap) {
    (void)ctx; (void)cap;
    static const char *w[] = {"{\"", "\":", "\", \"", "true", "null", "12", "\"}", "  ", "\\u00", "ab\"", "\xc3\xa9\"",
                              "abcdefgh", "\\\"x", "a\":1", "\xe6\x97", "\"]"};
    if (id < 256) { buf[0] = (char)id; return 1; }
    const char *s = w[id - 256];
    memcpy(buf, s, strlen(s));
    return (int)strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static gr_vocab *v;
    ig_err err;
    if (!v) {
        int32_t eos = NV - 1;
        if (gr_vocab_new(NV, tok_bytes, NULL, &eos, 1, &v, &err)) return 0;
    }
    if (size < 1) return 0;
    gr_kind kinds[] = {GR_JSON_SCHEMA, GR_REGEX, GR_GBNF, GR_JSON};
    gr_kind kind = kinds[data[0] % 4];
    gr_grammar *g = NULL;
    gr_matcher *m = NULL;
    gr_matcher *m2 = NULL;
    if (gr_compile(kind, (const char *)data + 1, size - 1, &g, &err) == IG_OK && gr_matcher_new(g, v, &m, &err) == IG_OK &&
        gr_matcher_new(g, v, &m2, &err) == IG_OK) {
        uint32_t bits[(NV + 31) / 32 + 1];
        int32_t taken[8];
        for (int step = 0; step < 8; step++) {
            if (gr_matcher_mask(m, bits, &err)) break;
            for (int32_t t = 0; t < NV; t++) { /* the mask against trying each token */
                gr_matcher_reset(m2);
                int ok = 1;
                for (int k = 0; k < step && ok; k++) ok = gr_matcher_accept(m2, taken[k], &err) == 1;
                if (!ok) break; /* replay failed (an automaton limit): nothing to compare */
                int r = gr_matcher_accept(m2, t, &err);
                if (r >= 0 && r != (int)(bits[t >> 5] >> (t & 31) & 1)) __builtin_trap();
            }
            int id = -1;
            for (int k = 256; (data[step % size] & 1) && k < NV - 1 && id < 0; k++) /* odd: a word, if one is allowed */
                if (bits[k >> 5] >> (k & 31) & 1) id = k;
            for (int k = 0; k < NV && id < 0; k++) /* the first allowed token after a data-chosen start */
                if (bits[((k + data[step % size] * 7) % NV) >> 5] >> (((k + data[step % size] * 7) % NV) & 31) & 1)
                    id = (k + data[step % size] * 7) % NV;
            if (id < 0 || gr_matcher_accept(m, id, &err) != 1) break;
            taken[step] = id;
        }
    }
    gr_matcher_free(m);
    gr_matcher_free(m2);
    gr_grammar_free(g);
    return 0;
}
