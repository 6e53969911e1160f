/* fuzz_api.c — the public C API (include/ignis.h) driven by random call sequences on one engine
 * over the llama-gqa package: starts with random parameters (in and out of range), reads with
 * and without waiting, stops, statuses, releases, double releases and uses after release, and
 * stats. Every call must return a status; the sanitizers catch the rest. Handles still held at
 * the end of an input are released. */
#include "fuzz_util.h"
#include "ignis.h"

static ig_engine *eng;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *pkg = fuzz_package("api-pkg");
    if (!pkg) abort();
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.kv_pages = 6; /* small: preemption and KV exhaustion */
    cfg.max_seqs = 4;
    cfg.n_threads = 1;
    ig_err err;
    if (ig_engine_open(pkg, &cfg, &eng, &err)) {
        fprintf(stderr, "fuzz_api: %s\n", err.msg);
        abort();
    }
    return 0;
}

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;
static uint32_t take(rd *r, int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v <<= 8;
        if (r->n) {
            v |= *r->p++;
            r->n--;
        }
    }
    return v;
}
static float take_f(rd *r) {
    uint32_t u = take(r, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void start(rd *r, ig_request **slot) {
    ig_gen_config g;
    ig_gen_config_default(&g);
    int32_t ids[8], n = (int32_t)(take(r, 1) % 9);
    for (int32_t i = 0; i < n; i++) ids[i] = (int32_t)(take(r, 2) % 1100); /* some past the vocabulary */
    uint32_t sel = take(r, 1);
    g.max_new_tokens = sel & 1 ? (int32_t)take(r, 4) : (int32_t)(take(r, 1) % 24);
    if (g.max_new_tokens > 24 && !(sel & 64)) g.max_new_tokens = 24;
    if (sel & 2) g.temperature = take_f(r);
    if (sel & 4) g.top_k = (int32_t)take(r, 2) - 100;
    if (sel & 8) g.top_p = take_f(r);
    if (sel & 16) g.min_new_tokens = (int32_t)(take(r, 1) % 30);
    if (sel & 32) g.repetition_penalty = take_f(r);
    int32_t stop_id = (int32_t)take(r, 2) % 1100;
    float bias = take_f(r);
    if (sel & 128) {
        g.stop_ids = &stop_id;
        g.n_stop_ids = 1;
        g.logit_bias_ids = &stop_id;
        g.logit_bias_values = &bias;
        g.n_logit_bias = 1;
    }
    g.ignore_eos = (int)(take(r, 1) & 1);
    g.seed = take(r, 4);
    ig_err err;
    if (ig_request_start(eng, ids, n, &g, slot, &err) != IG_OK) *slot = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    rd r = {data, n};
    ig_request *h[4] = {0}, *dead[4] = {0};
    for (int ops = 0; r.n && ops < 64; ops++) {
        uint32_t op = take(&r, 1), k = op >> 4 & 3;
        ig_output *o = NULL;
        ig_err err;
        switch (op & 15) {
        case 0: case 1:
            if (!h[k]) start(&r, &h[k]);
            break;
        case 2: case 3:
            if (h[k] && ig_request_read(h[k], (op & 1) ? 0 : 2, &o, &err) == IG_OK) ig_output_free(o);
            break;
        case 4: ig_request_stop(h[k]); break;
        case 5: (void)ig_request_status(h[k]); break;
        case 6: /* release, remembering the stale handle */
            if (h[k]) {
                ig_request_release(h[k]);
                dead[k] = h[k];
                h[k] = NULL;
            }
            break;
        case 7: /* uses after release: errors, not accesses */
            if (dead[k]) {
                ig_request_release(dead[k]);
                ig_request_stop(dead[k]);
                (void)ig_request_status(dead[k]);
                if (ig_request_read(dead[k], 0, &o, &err) == IG_OK) abort();
            }
            break;
        case 8: {
            ig_engine_stats s;
            ig_engine_get_stats(eng, &s);
            break;
        }
        case 9:
            if (h[k] && ig_request_status(h[k]) >= IG_REQ_FINISHED) (void)ig_request_sync(h[k]);
            break;
        default: break;
        }
    }
    for (int k = 0; k < 4; k++) ig_request_release(h[k]);
    return 0;
}
