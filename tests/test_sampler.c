/* test_sampler.c — the token sampler (runtime/serving/sampler.c) and the stop-string matcher (runtime/text/stop.c).
 *
 * Expected values come from references written here in the plain way, in double: a full sort for
 * top-k / top-p / min-p sets, log-softmax for logprobs, hand-computed penalized logits placed just
 * either side of a decision so that an off-by-a-little penalty flips the greedy pick. Statistical
 * checks use fixed seeds, so they are deterministic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "stop.h"

static int failures;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                           \
        }                                                                         \
    } while (0)
#define CHECK_MSG(c, e)                                                                         \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #c, (e).msg); \
            failures++;                                                                         \
        }                                                                                       \
    } while (0)

/* ---- test-side helpers (independent of the sampler's own code) */

static uint64_t trng = 88172645463325252ull;
static uint64_t tnext(void) { /* xorshift64 */
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return trng;
}
static double tuni(void) { return ((double)(tnext() >> 11) + 0.5) / 9007199254740992.0; }
static double tnormal(void) { return sqrt(-2.0 * log(tuni())) * cos(6.283185307179586 * tuni()); }

static float *random_logits(int32_t V, double scale) {
    float *x = malloc((size_t)V * sizeof *x);
    for (int32_t i = 0; i < V; i++) x[i] = (float)(scale * tnormal());
    return x;
}

typedef struct { double v; int32_t id; } ref_e;
static int ref_cmp(const void *a, const void *b) {
    const ref_e *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id - y->id;
}
/* Descending sort of x[0..V) in double, lowest id first on ties. */
static ref_e *ref_sorted(const float *x, int32_t V) {
    ref_e *e = malloc((size_t)V * sizeof *e);
    for (int32_t i = 0; i < V; i++) e[i] = (ref_e){x[i], i};
    qsort(e, (size_t)V, sizeof *e, ref_cmp);
    return e;
}
/* softmax(x / T) in double */
static double *ref_softmax(const float *x, int32_t V, double T) {
    double *p = malloc((size_t)V * sizeof *p), m = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < V; i++) m = fmax(m, x[i] / T);
    for (int32_t i = 0; i < V; i++) z += p[i] = exp(x[i] / T - m);
    for (int32_t i = 0; i < V; i++) p[i] /= z;
    return p;
}
static int32_t ref_argmax(const float *x, int32_t V) {
    int32_t b = 0;
    for (int32_t i = 1; i < V; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static smp_state *mk(const smp_params *p, int32_t V, const int32_t *prompt, int32_t n) {
    smp_state *s = NULL;
    ig_err e = {{0}};
    ig_status st = smp_new(p, V, prompt, n, &s, &e);
    CHECK_MSG(st == IG_OK, e);
    return s;
}
static int32_t draw(smp_state *s, float *x) {
    smp_result r;
    ig_err e = {{0}};
    ig_status st = smp_sample(s, x, &r, &e);
    CHECK_MSG(st == IG_OK, e);
    return st == IG_OK ? r.token : -1;
}

/* ---- sampler tests */

static void test_greedy(void) {
    int32_t V = 1000;
    float *x = random_logits(V, 2.0);
    x[700] = x[300] = 50.0f; /* tie: the lower id wins */
    smp_params p;
    smp_params_default(&p);
    smp_state *s = mk(&p, V, NULL, 0);
    CHECK(draw(s, x) == 300);
    x[300] = 0.0f;
    CHECK(draw(s, x) == 700);
    x[700] = 0.0f;
    CHECK(draw(s, x) == ref_argmax(x, V));
    smp_free(s);

    /* temperature -> 0+ and top_k = 1 behave like greedy */
    for (int t = 0; t < 2; t++) {
        smp_params_default(&p);
        if (t == 0) p.temperature = 1e-3f;
        else p.temperature = 1.0f, p.top_k = 1;
        p.seed = 7;
        s = mk(&p, V, NULL, 0);
        float *y = random_logits(V, 2.0); /* gaps between the best two are ~0.1, 100 nats at T=1e-3 */
        int32_t want = ref_argmax(y, V), ok = 1;
        for (int i = 0; i < 300; i++) ok &= draw(s, y) == want;
        CHECK(ok);
        free(y);
        smp_free(s);
    }
    free(x);
}

/* Draws n times; counts[] over ids; returns 1 if every draw is in allowed[]. */
static int draws_within(smp_state *s, float *x, int32_t V, const char *allowed, int n, int32_t *counts) {
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int32_t t = draw(s, x);
        if (t < 0 || t >= V || !allowed[t]) ok = 0;
        else if (counts) counts[t]++;
    }
    return ok;
}

static int distinct(const int32_t *counts, int32_t V) {
    int d = 0;
    for (int32_t i = 0; i < V; i++) d += counts[i] > 0;
    return d;
}

static void test_top_k(void) {
    int32_t Vs[2] = {5000, 128256};
    for (int vi = 0; vi < 2; vi++) {
        int32_t V = Vs[vi], k = 40;
        float *x = random_logits(V, 1.0);
        ref_e *e = ref_sorted(x, V);
        char *allowed = calloc((size_t)V, 1);
        for (int32_t i = 0; i < k; i++) allowed[e[i].id] = 1;
        int32_t *counts = calloc((size_t)V, sizeof *counts);
        smp_params p;
        smp_params_default(&p);
        p.temperature = 2.0f;
        p.top_k = k;
        p.seed = 11;
        smp_state *s = mk(&p, V, NULL, 0);
        CHECK(draws_within(s, x, V, allowed, 2000, counts));
        CHECK(distinct(counts, V) >= 30); /* the k best are all nearly equally likely at T=2 */
        CHECK(counts[e[0].id] > 0 && counts[e[k - 1].id] > 0);
        smp_free(s);
        free(x), free(e), free(allowed), free(counts);
    }
    /* k larger than the tokens within 32 nats of the max: the boundary is the overflow bucket */
    int32_t V = 300;
    float x[300];
    for (int i = 0; i < V; i++) x[i] = i % 100 == 5 ? 0.0f : -80.0f;
    smp_params p;
    smp_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 10;
    smp_state *s = mk(&p, V, NULL, 0);
    char allowed[300] = {0};
    allowed[5] = allowed[105] = allowed[205] = 1;
    int32_t counts[300] = {0};
    CHECK(draws_within(s, x, V, allowed, 600, counts));
    CHECK(counts[5] > 150 && counts[105] > 150 && counts[205] > 150);
    smp_free(s);
}

/* The top-p nucleus by full sort: descending, keep while the mass strictly before is < top_p. */
static char *ref_nucleus(const float *x, int32_t V, double T, double top_p, int32_t *n_out) {
    double *pr = ref_softmax(x, V, T);
    ref_e *e = ref_sorted(x, V);
    char *in = calloc((size_t)V, 1);
    double c = 0.0;
    int32_t n = 0;
    for (int32_t i = 0; i < V && c < top_p; i++) {
        in[e[i].id] = 1;
        c += pr[e[i].id];
        n++;
    }
    *n_out = n;
    free(pr), free(e);
    return in;
}

static void test_top_p(void) {
    int32_t Vs[2] = {3000, 128256};
    for (int vi = 0; vi < 2; vi++) {
        int32_t V = Vs[vi], n;
        float *x = random_logits(V, 3.0);
        char *in = ref_nucleus(x, V, 0.7, 0.9, &n);
        int32_t *counts = calloc((size_t)V, sizeof *counts);
        smp_params p;
        smp_params_default(&p);
        p.temperature = 0.7f;
        p.top_p = 0.9f;
        p.seed = 3;
        smp_state *s = mk(&p, V, NULL, 0);
        CHECK(draws_within(s, x, V, in, 2000, counts));
        if (getenv("SMP_VERBOSE")) fprintf(stderr, "top_p V=%d nucleus %d distinct %d\n", V, n, distinct(counts, V));
        CHECK(n >= 10 && distinct(counts, V) >= (n < 2000 ? n : 2000) / 4);
        smp_free(s);
        free(x), free(in), free(counts);
    }
    /* Exact small case, probabilities 0.5 0.3 0.15 0.05: top_p 0.75 keeps 2, 0.85 keeps 3, and the
     * kept ones are drawn in proportion to their renormalized mass. */
    float x[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    float tps[2] = {0.75f, 0.85f};
    for (int t = 0; t < 2; t++) {
        smp_params p;
        smp_params_default(&p);
        p.temperature = 1.0f;
        p.top_p = tps[t];
        p.seed = 5;
        smp_state *s = mk(&p, 4, NULL, 0);
        int32_t c[4] = {0};
        int N = 20000;
        for (int i = 0; i < N; i++) c[draw(s, x)]++;
        double keep = t == 0 ? 0.8 : 0.95, pr[4] = {0.5, 0.3, 0.15, 0.05};
        for (int i = 0; i < 4; i++) {
            double q = i < 2 + t ? pr[i] / keep : 0.0, sd = sqrt(N * q * (1 - q));
            CHECK(fabs(c[i] - N * q) <= 3 * sd + 1e-9);
        }
        smp_free(s);
    }
    /* top-p is over the renormalized top-k set: 0.4 0.3 0.2 0.1 with k = 2 is 0.571 0.429, so
     * top_p 0.5 keeps only token 0 (over the full distribution it would keep token 1 too). */
    float y[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    smp_params p;
    smp_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 2;
    p.top_p = 0.5f;
    smp_state *s = mk(&p, 4, NULL, 0);
    int ok = 1;
    for (int i = 0; i < 500; i++) ok &= draw(s, y) == 0;
    CHECK(ok);
    smp_free(s);
}

static void test_min_p(void) {
    int32_t V = 2000;
    float *x = random_logits(V, 2.0);
    double *pr = ref_softmax(x, V, 1.0), pmax = 0.0;
    for (int32_t i = 0; i < V; i++) pmax = fmax(pmax, pr[i]);
    char *in = calloc((size_t)V, 1);
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) n += in[i] = pr[i] >= 0.05 * pmax;
    int32_t *counts = calloc((size_t)V, sizeof *counts);
    smp_params p;
    smp_params_default(&p);
    p.temperature = 1.0f;
    p.min_p = 0.05f;
    p.seed = 9;
    smp_state *s = mk(&p, V, NULL, 0);
    CHECK(draws_within(s, x, V, in, 2000, counts));
    CHECK(n > 10 && distinct(counts, V) >= n / 3);
    smp_free(s);
    /* with top-p on as well (the filtered path) */
    p.top_p = 0.95f;
    int32_t nn;
    char *nuc = ref_nucleus(x, V, 1.0, 0.95, &nn);
    for (int32_t i = 0; i < V; i++) nuc[i] &= in[i];
    s = mk(&p, V, NULL, 0);
    CHECK(draws_within(s, x, V, nuc, 2000, NULL));
    smp_free(s);
    free(x), free(pr), free(in), free(counts), free(nuc);
}

/* Counts over N draws at temperature T against softmax(x / T): every id within 3 sigma. */
static int freq_ok(smp_state *s, float *x, int32_t V, double T, int N, const int32_t *ids, int nids) {
    double *pr = ref_softmax(x, V, T);
    int32_t *c = calloc((size_t)V, sizeof *c);
    for (int i = 0; i < N; i++) c[draw(s, x)]++;
    int ok = 1;
    for (int j = 0; j < nids; j++) {
        double q = pr[ids[j]], sd = sqrt(N * q * (1 - q));
        if (fabs(c[ids[j]] - N * q) > 3 * sd + 1e-9) {
            fprintf(stderr, "  id %d: %d draws, expected %.1f +- %.1f\n", ids[j], c[ids[j]], N * q, sd);
            ok = 0;
        }
    }
    free(pr), free(c);
    return ok;
}

static void test_frequencies(void) {
    float x[10] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f, 3.0f, -2.0f};
    int32_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    smp_params p;
    smp_params_default(&p);
    p.temperature = 1.0f;
    p.seed = 1234;
    smp_state *s = mk(&p, 10, NULL, 0);
    CHECK(freq_ok(s, x, 10, 1.0, 20000, ids, 10));
    smp_free(s);
    p.temperature = 0.5f; /* T != 1 */
    s = mk(&p, 10, NULL, 0);
    CHECK(freq_ok(s, x, 10, 0.5, 20000, ids, 10));
    smp_free(s);

    /* A larger vocabulary whose mass sits on ids spread over many 256-wide chunks. */
    int32_t V = 40000;
    float *y = malloc((size_t)V * sizeof *y);
    for (int32_t i = 0; i < V; i++) y[i] = (float)(-4.0 + 0.5 * tnormal()); /* distinct: no top-k ties */
    int32_t big[8] = {3, 255, 256, 5000, 17000, 30001, 39935, 39999};
    for (int j = 0; j < 8; j++) y[big[j]] = 4.0f + 0.25f * (float)j;
    p.temperature = 1.0f;
    s = mk(&p, V, NULL, 0);
    CHECK(freq_ok(s, y, V, 1.0, 20000, big, 8));
    smp_free(s);
    /* the same through the filtered path (top_k on) */
    p.top_k = 1000;
    s = mk(&p, V, NULL, 0);
    double *pr = ref_softmax(y, V, 1.0);
    int32_t c[8] = {0}, N = 20000;
    double kept = 0.0;
    ref_e *e = ref_sorted(y, V);
    for (int32_t i = 0; i < 1000; i++) kept += pr[e[i].id];
    for (int i = 0; i < N; i++) {
        int32_t t = draw(s, y);
        for (int j = 0; j < 8; j++) c[j] += t == big[j];
    }
    for (int j = 0; j < 8; j++) {
        double q = pr[big[j]] / kept, sd = sqrt(N * q * (1 - q));
        CHECK(fabs(c[j] - N * q) <= 3 * sd);
    }
    smp_free(s);
    free(pr), free(e), free(y);
}

static void test_seeds(void) {
    int32_t V = 500, T = 60;
    float *x = random_logits(V, 0.5);
    smp_params p;
    smp_params_default(&p);
    p.temperature = 1.0f;
    p.top_p = 0.95f;
    int32_t a[60], b[60], c[60], d[60];
    p.seed = 42;
    smp_state *s1 = mk(&p, V, NULL, 0), *s2 = mk(&p, V, NULL, 0);
    p.seed = 43;
    smp_state *s3 = mk(&p, V, NULL, 0);
    for (int i = 0; i < T; i++) a[i] = draw(s1, x);
    /* s2 (same seed) interleaved with s3 (another seed): s2 must not notice s3 */
    for (int i = 0; i < T; i++) {
        c[i] = draw(s3, x);
        b[i] = draw(s2, x);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    smp_free(s1), smp_free(s2), smp_free(s3);
    p.seed = 42;
    s1 = mk(&p, V, NULL, 0);
    for (int i = 0; i < T; i++) d[i] = draw(s1, x);
    CHECK(memcmp(a, d, sizeof a) == 0);
    smp_free(s1);
    free(x);
}

/* Greedy tokens over n steps of the same logits. */
static void greedy_run(const smp_params *p, const float *x0, int32_t V, const int32_t *prompt, int32_t np,
                       int n, int32_t *out) {
    smp_state *s = mk(p, V, prompt, np);
    float x[8];
    for (int i = 0; i < n; i++) {
        memcpy(x, x0, (size_t)V * sizeof *x);
        out[i] = draw(s, x);
    }
    smp_free(s);
}

static void test_penalties(void) {
    smp_params p;
    int32_t out[4], prompt0[1] = {0};
    /* positive logit: divided. 3/2 = 1.5 vs 1.49 and 1.51 */
    smp_params_default(&p);
    p.repetition_penalty = 2.0f;
    float a1[2] = {3.0f, 1.49f}, a2[2] = {3.0f, 1.51f};
    greedy_run(&p, a1, 2, prompt0, 1, 1, out);
    CHECK(out[0] == 0);
    greedy_run(&p, a2, 2, prompt0, 1, 1, out);
    CHECK(out[0] == 1);
    /* negative logit: multiplied. -1 * 3 = -3 vs -2.99 and -3.01 (dividing would give -0.33) */
    p.repetition_penalty = 3.0f;
    float b1[2] = {-1.0f, -3.01f}, b2[2] = {-1.0f, -2.99f};
    greedy_run(&p, b1, 2, prompt0, 1, 1, out);
    CHECK(out[0] == 0);
    greedy_run(&p, b2, 2, prompt0, 1, 1, out);
    CHECK(out[0] == 1);
    /* applied once per id however often it was generated: 0, 1, 0, 0 */
    smp_params_default(&p);
    p.repetition_penalty = 2.0f;
    float c[2] = {3.0f, 2.9f};
    greedy_run(&p, c, 2, NULL, 0, 4, out);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 0 && out[3] == 0);

    /* presence 0.5 + frequency 0.25 * count: after one 0, 1 - 0.75 = 0.25; after two, 0. */
    smp_params_default(&p);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    float d1[2] = {1.0f, 0.24f}, d2[2] = {1.0f, 0.26f};
    greedy_run(&p, d1, 2, NULL, 0, 3, out);
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 1); /* 0.25 > 0.24, then 0 < 0.24 */
    greedy_run(&p, d2, 2, NULL, 0, 2, out);
    CHECK(out[0] == 0 && out[1] == 1);
    /* presence and frequency count the output only, never the prompt */
    p.presence_penalty = 2.0f;
    p.frequency_penalty = 2.0f;
    greedy_run(&p, d1, 2, prompt0, 1, 1, out);
    CHECK(out[0] == 0);
    /* negative presence rewards repeats: 1.4 then 1.9 against 1.0 */
    smp_params_default(&p);
    p.presence_penalty = -0.5f;
    float e[2] = {1.4f, 1.0f};
    greedy_run(&p, e, 2, NULL, 0, 3, out);
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0);
}

static void test_logit_bias(void) {
    int32_t V = 50;
    float *x = random_logits(V, 1.0);
    x[17] = 10.0f; /* dominant */
    float vals[2] = {-INFINITY, -100.0f};
    for (int t = 0; t < 2; t++) {
        int32_t ids[1] = {17};
        smp_params p;
        smp_params_default(&p);
        p.n_logit_bias = 1;
        p.logit_bias_ids = ids;
        p.logit_bias_values = &vals[t];
        smp_state *g = mk(&p, V, NULL, 0);
        x[17] = -5.0f;
        int32_t second = ref_argmax(x, V);
        x[17] = 10.0f;
        CHECK(draw(g, x) == second);
        smp_free(g);
        p.temperature = 1.0f;
        p.seed = 77;
        smp_state *s = mk(&p, V, NULL, 0);
        ids[0] = 0; /* the copy in smp_new is what counts */
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= draw(s, x) != 17;
        CHECK(ok);
        smp_free(s);
    }
    /* a positive bias makes a token the greedy pick; its logprob stays the raw one */
    int32_t id3[1] = {3};
    float up[1] = {100.0f};
    smp_params p;
    smp_params_default(&p);
    p.n_logit_bias = 1;
    p.logit_bias_ids = id3;
    p.logit_bias_values = up;
    p.logprobs = 1;
    smp_state *s = mk(&p, V, NULL, 0);
    smp_result r;
    ig_err err;
    CHECK(smp_sample(s, x, &r, &err) == IG_OK && r.token == 3);
    double m = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < V; i++) m = fmax(m, x[i]);
    for (int32_t i = 0; i < V; i++) z += exp(x[i] - m);
    CHECK(fabs(r.logprob - (x[3] - m - log(z))) < 1e-4);
    smp_free(s);
    free(x);
}

/* Without logprobs asked for, greedy skips the log-softmax pass: same token, NaN logprob. */
static void test_no_logprobs(void) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)((i * 37) % 64) * 0.1f;
    smp_params p;
    smp_params_default(&p);
    smp_state *s = mk(&p, 64, NULL, 0);
    smp_result r;
    ig_err err;
    CHECK(smp_sample(s, x, &r, &err) == IG_OK && x[r.token] == 6.3f && isnan(r.logprob) && r.n_top == 0);
    smp_free(s);
}

static void test_logprobs(void) {
    int32_t V = 3000;
    float *x = random_logits(V, 2.0);
    float *copy = malloc((size_t)V * sizeof *copy);
    memcpy(copy, x, (size_t)V * sizeof *x);
    int32_t prompt[3] = {1, 2, 3}, bid[2] = {5, 6};
    float bval[2] = {3.0f, -1.0f};
    smp_params p;
    smp_params_default(&p);
    p.temperature = 0.8f;
    p.top_k = 50;
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.5f;
    p.n_logit_bias = 2;
    p.logit_bias_ids = bid;
    p.logit_bias_values = bval;
    p.top_logprobs = 20;
    p.logprobs = 1;
    smp_state *s = mk(&p, V, prompt, 3);
    double m = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < V; i++) m = fmax(m, x[i]);
    for (int32_t i = 0; i < V; i++) z += exp((double)x[i] - m);
    ref_e *e = ref_sorted(x, V);
    for (int step = 0; step < 20; step++) {
        smp_result r;
        ig_err err;
        CHECK(smp_sample(s, x, &r, &err) == IG_OK);
        CHECK(memcmp(x, copy, (size_t)V * sizeof *x) == 0); /* the caller's logits are given back */
        CHECK(fabs(r.logprob - ((double)x[r.token] - m - log(z))) < 1e-4);
        CHECK(r.n_top == 20);
        int ok = 1;
        for (int j = 0; j < 20; j++)
            ok &= r.top[j].id == e[j].id && fabs(r.top[j].logprob - (e[j].v - m - log(z))) < 1e-4;
        CHECK(ok);
    }
    smp_free(s);
    /* top_logprobs larger than the vocabulary */
    smp_params_default(&p);
    p.top_logprobs = 5;
    p.logprobs = 1;
    s = mk(&p, 3, NULL, 0);
    float y[3] = {0.0f, 1.0f, -INFINITY};
    smp_result r;
    ig_err err;
    CHECK(smp_sample(s, y, &r, &err) == IG_OK && r.n_top == 3 && r.top[0].id == 1 && r.top[2].id == 2);
    CHECK(fabs(r.top[0].logprob - (1.0 - log(1.0 + exp(1.0)))) < 1e-5 && r.top[2].logprob == -INFINITY);
    smp_free(s);
    free(x), free(copy), free(e);
}

static void expect_invalid(const smp_params *p, int32_t V, const char *field, const char *value) {
    ig_err e = {{0}};
    ig_status st = smp_validate(p, V, &e);
    CHECK(st == IG_ERR_INVALID);
    if (!strstr(e.msg, field) || (value && !strstr(e.msg, value))) {
        fprintf(stderr, "  message \"%s\" should name %s and %s\n", e.msg, field, value ? value : "");
        failures++;
    }
    smp_state *s = NULL;
    CHECK(smp_new(p, V, NULL, 0, &s, &e) == IG_ERR_INVALID && s == NULL);
}

static void test_validation(void) {
    smp_params p;
    smp_params_default(&p);
    ig_err e;
    CHECK(smp_validate(&p, 100, &e) == IG_OK);
    p.temperature = -1.0f;
    expect_invalid(&p, 100, "temperature", "-1");
    /* a subnormal temperature made 1/T infinite, every weight NaN and the token id -1 */
    p.temperature = 1e-45f;
    expect_invalid(&p, 100, "temperature", "too small");
    p.temperature = 1e-6f;
    CHECK(smp_validate(&p, 100, &e) == IG_OK);
    smp_params_default(&p);
    p.top_p = 0.0f;
    expect_invalid(&p, 100, "top_p", "(0, 1]");
    p.top_p = 1.5f;
    expect_invalid(&p, 100, "top_p", "1.5");
    smp_params_default(&p);
    p.min_p = 1.0f;
    expect_invalid(&p, 100, "min_p", "[0, 1)");
    smp_params_default(&p);
    p.top_k = -1;
    expect_invalid(&p, 100, "top_k", "-1");
    smp_params_default(&p);
    p.repetition_penalty = 0.0f;
    expect_invalid(&p, 100, "repetition_penalty", "> 0");
    smp_params_default(&p);
    p.presence_penalty = 2.5f;
    expect_invalid(&p, 100, "presence_penalty", "[-2, 2]");
    smp_params_default(&p);
    p.frequency_penalty = NAN;
    expect_invalid(&p, 100, "frequency_penalty", "[-2, 2]");
    smp_params_default(&p);
    int32_t ids[2] = {5, 100};
    float vals[2] = {1.0f, 1.0f};
    p.n_logit_bias = 2;
    p.logit_bias_ids = ids;
    p.logit_bias_values = vals;
    expect_invalid(&p, 100, "logit_bias_ids[1]", "100");
    smp_params_default(&p);
    p.top_logprobs = 21;
    expect_invalid(&p, 100, "top_logprobs", "21");
    /* prompt ids out of range */
    smp_params_default(&p);
    int32_t prompt[2] = {1, 100};
    smp_state *s = NULL;
    CHECK(smp_new(&p, 100, prompt, 2, &s, &e) == IG_ERR_INVALID && strstr(e.msg, "prompt[1]"));
    /* bad logits */
    s = mk(&p, 4, NULL, 0);
    float nan4[4] = {0.0f, 1.0f, NAN, 0.0f}, ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    smp_result r;
    CHECK(smp_sample(s, nan4, &r, &e) == IG_ERR_INVALID && strstr(e.msg, "logits[2]"));
    CHECK(smp_sample(s, ninf, &r, &e) == IG_ERR_INVALID);
    smp_free(s);
    smp_free(NULL);
}

/* ---- stop matcher */

typedef struct {
    char out[256];
    size_t n;
    int stopped;
} sink;

static void feed(stop_matcher *m, sink *k, const char *t) {
    const char *em;
    size_t n;
    int st = 0;
    CHECK(stop_feed(m, t, strlen(t), &em, &n, &st) == IG_OK);
    memcpy(k->out + k->n, em, n);
    k->n += n;
    k->out[k->n] = 0;
    k->stopped = st;
}
static void flush(stop_matcher *m, sink *k) {
    const char *em;
    size_t n;
    stop_flush(m, &em, &n);
    memcpy(k->out + k->n, em, n);
    k->n += n;
    k->out[k->n] = 0;
}
static stop_matcher *mk_stop(const char *const *stops, int32_t n) {
    stop_matcher *m = NULL;
    ig_err e = {{0}};
    CHECK_MSG(stop_new(stops, n, &m, &e) == IG_OK, e);
    return m;
}

static void test_stop(void) {
    /* split over three feeds; text before it emitted exactly once */
    const char *s1[1] = {"<|end|>"};
    stop_matcher *m = mk_stop(s1, 1);
    sink k;
    memset(&k, 0, sizeof k);
    feed(m, &k, "Hello <|");
    CHECK(strcmp(k.out, "Hello ") == 0 && !k.stopped);
    feed(m, &k, "en");
    CHECK(strcmp(k.out, "Hello ") == 0 && !k.stopped);
    feed(m, &k, "d|> tail");
    CHECK(strcmp(k.out, "Hello ") == 0 && k.stopped && stop_which(m) == 0);
    feed(m, &k, "more");
    flush(m, &k);
    CHECK(strcmp(k.out, "Hello ") == 0);
    stop_free(m);

    /* overlapping prefixes: "aab" in "aaab", one byte at a time */
    const char *s2[1] = {"aab"};
    m = mk_stop(s2, 1);
    memset(&k, 0, sizeof k);
    feed(m, &k, "a");
    feed(m, &k, "a");
    CHECK(k.n == 0);
    feed(m, &k, "a");
    CHECK(strcmp(k.out, "a") == 0); /* only max_len - 1 = 2 bytes held */
    feed(m, &k, "b");
    CHECK(strcmp(k.out, "a") == 0 && k.stopped);
    stop_free(m);

    /* a false start is released as soon as it cannot match; no hold beyond max len - 1 */
    m = mk_stop(s2, 1);
    memset(&k, 0, sizeof k);
    feed(m, &k, "xa");
    CHECK(strcmp(k.out, "x") == 0);
    feed(m, &k, "ac");
    CHECK(strcmp(k.out, "xaac") == 0 && !k.stopped);
    feed(m, &k, "zzzzzzzzzz");
    CHECK(k.n == 14);
    flush(m, &k);
    CHECK(strcmp(k.out, "xaaczzzzzzzzzz") == 0);
    stop_free(m);

    /* several stops: the earliest one in the text wins, even if another completes in the same feed */
    const char *s3[3] = {"STOP", "\n\n", "xyz"};
    m = mk_stop(s3, 3);
    memset(&k, 0, sizeof k);
    feed(m, &k, "abc\n");
    CHECK(strcmp(k.out, "abc") == 0);
    feed(m, &k, "\nSTOP");
    CHECK(strcmp(k.out, "abc") == 0 && k.stopped && stop_which(m) == 1);
    stop_free(m);
    m = mk_stop(s3, 3);
    memset(&k, 0, sizeof k);
    feed(m, &k, "12xySTOP xyz");
    CHECK(strcmp(k.out, "12xy") == 0 && stop_which(m) == 0);
    stop_free(m);

    /* no stop: everything comes out by flush, exactly once */
    m = mk_stop(s3, 3);
    memset(&k, 0, sizeof k);
    feed(m, &k, "ST");
    feed(m, &k, "OP");
    CHECK(k.stopped);
    stop_free(m);
    m = mk_stop(s3, 3);
    memset(&k, 0, sizeof k);
    feed(m, &k, "hi ST");
    feed(m, &k, "O");
    CHECK(strcmp(k.out, "hi ") == 0);
    flush(m, &k);
    CHECK(strcmp(k.out, "hi STO") == 0 && !k.stopped);
    stop_free(m);

    /* UTF-8: "。" (E3 80 82) fed byte by byte; "é" (C3 A9) vs "è" (C3 A8) share a lead byte */
    const char *s4[2] = {"\xe3\x80\x82", "\xc3\xa9"};
    m = mk_stop(s4, 2);
    memset(&k, 0, sizeof k);
    feed(m, &k, "caf\xc3");
    CHECK(strcmp(k.out, "caf") == 0);
    feed(m, &k, "\xa8 ok\xe3");
    CHECK(strcmp(k.out, "caf\xc3\xa8 ok") == 0);
    feed(m, &k, "\x80");
    feed(m, &k, "\x82 after");
    CHECK(strcmp(k.out, "caf\xc3\xa8 ok") == 0 && k.stopped && stop_which(m) == 0);
    stop_free(m);

    /* a long text through a matcher with no stops passes straight through */
    m = mk_stop(NULL, 0);
    memset(&k, 0, sizeof k);
    feed(m, &k, "abc");
    CHECK(strcmp(k.out, "abc") == 0);
    stop_free(m);

    const char *bad[2] = {"ok", ""};
    ig_err e;
    stop_matcher *mm = NULL;
    CHECK(stop_new(bad, 2, &mm, &e) == IG_ERR_INVALID && mm == NULL && strstr(e.msg, "1"));
    stop_free(NULL);
}

/* Device sampling (smp_device_step / smp_device_accept): which params go to the device, and that
 * the u a device step gets is the draw smp_sample would have used. With V equal logits and no
 * filter, smp_sample's walk in id order picks floor(u * V), so a state that samples on the host
 * and one with the same seed that hands its draws to the device must agree on every token. */
static void test_device_steps(void) {
    const int32_t V = 1000;
    float *x = malloc(sizeof(float) * V);
    smp_params p;
    smp_params_default(&p);
    p.temperature = 0.7f;
    p.seed = 1234;
    smp_state *host = mk(&p, V, NULL, 0), *dev = mk(&p, V, NULL, 0);
    for (int i = 0; i < 300; i++) {
        for (int32_t j = 0; j < V; j++) x[j] = 0.25f;
        int32_t want = draw(host, x);
        ig_fwd_sample d;
        memset(&d, 0xab, sizeof d);
        CHECK(smp_device_step(dev, &d) == 1);
        CHECK(d.on == 1 && d.temperature == 0.7f && d.top_k == 0 && d.top_p == 1.0f && d.min_p == 0.0f);
        CHECK(d.u >= 0.0f && d.u < 1.0f);
        int32_t got = (int32_t)floor((double)d.u * V);
        if (got != want) {
            fprintf(stderr, "device step %d: u %.9g gives %d, the host drew %d\n", i, (double)d.u, got, want);
            failures++;
            break;
        }
        smp_result r;
        smp_device_accept(dev, got, &r);
        CHECK(r.token == got && isnan(r.logprob) && r.n_top == 0);
    }
    CHECK(smp_n_sampled(dev) == 300 && smp_n_sampled(host) == 300);
    smp_free(host);
    smp_free(dev);

    /* greedy: nothing drawn, the params say so */
    smp_params_default(&p);
    smp_state *g = mk(&p, V, NULL, 0);
    ig_fwd_sample d;
    CHECK(smp_device_step(g, &d) == 1 && d.on == 1 && d.temperature == 0.0f && d.u == 0.0f);
    smp_free(g);

    /* what the device sampler lacks stays on the host, and the state is untouched */
    int32_t bid = 3;
    float bval = 1.0f;
    for (int k = 0; k < 5; k++) {
        smp_params_default(&p);
        p.temperature = 1.0f;
        p.seed = 77;
        if (k == 0) p.repetition_penalty = 1.1f;
        if (k == 1) p.presence_penalty = 0.5f;
        if (k == 2) p.n_logit_bias = 1, p.logit_bias_ids = &bid, p.logit_bias_values = &bval;
        if (k == 3) p.logprobs = 1;
        if (k == 4) p.top_logprobs = 2;
        smp_state *a = mk(&p, V, NULL, 0), *b = mk(&p, V, NULL, 0);
        memset(&d, 0, sizeof d);
        CHECK(smp_device_step(a, &d) == 0 && d.on == 0);
        /* a's RNG did not move: it draws what b draws */
        for (int32_t j = 0; j < V; j++) x[j] = 0.25f;
        int32_t ta = draw(a, x);
        for (int32_t j = 0; j < V; j++) x[j] = 0.25f;
        CHECK(ta == draw(b, x));
        smp_free(a);
        smp_free(b);
    }
    free(x);
}

int main(void) {
    test_greedy();
    test_top_k();
    test_top_p();
    test_min_p();
    test_frequencies();
    test_seeds();
    test_penalties();
    test_logit_bias();
    test_logprobs();
    test_no_logprobs();
    test_validation();
    test_stop();
    test_device_steps();
    if (failures) {
        fprintf(stderr, "test_sampler: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_sampler: ok\n");
    return 0;
}
