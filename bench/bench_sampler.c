/* bench_sampler.c — nanoseconds per smp_sample call at vocab 128256 (Llama 3) for the common
 * settings: greedy, temperature 0.7 + top-p 0.9, temperature 1 + top-k 40, plain temperature 1,
 * and greedy with penalties over a 2000-token history. Logits are N(0, 2.5^2) with a few peaks,
 * roughly the shape of a language model's. Usage: bench_sampler [iterations] */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sampler.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t rs = 0x2545f4914f6cdd1dull;
static double uni(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}

static void run(const char *name, const smp_params *p, const float *base, float *x, int32_t V, int iters,
                const int32_t *prompt, int32_t np) {
    smp_state *s = NULL;
    ig_err e;
    if (smp_new(p, V, prompt, np, &s, &e)) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        exit(1);
    }
    smp_result r;
    for (int32_t i = 0; i < V; i++) x[i] = base[i];
    for (int i = 0; i < 10; i++) smp_sample(s, x, &r, &e);
    double t0 = now_ns();
    long sum = 0;
    for (int i = 0; i < iters; i++) {
        if (smp_sample(s, x, &r, &e)) {
            fprintf(stderr, "%s: %s\n", name, e.msg);
            exit(1);
        }
        sum += r.token;
    }
    double dt = (now_ns() - t0) / iters;
    printf("%-44s %9.0f ns/sample  (%.1f us)   [checksum %ld]\n", name, dt, dt / 1e3, sum);
    smp_free(s);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    int32_t V = 128256;
    float *base = malloc(V * sizeof *base), *x = malloc(V * sizeof *x);
    for (int32_t i = 0; i < V; i++)
        base[i] = (float)(2.5 * sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni()));
    for (int i = 0; i < 20; i++) base[(int32_t)(uni() * V)] += 8.0f + (float)i * 0.3f;
    int32_t *hist = malloc(2000 * sizeof *hist);
    for (int i = 0; i < 2000; i++) hist[i] = (int32_t)(uni() * V);

    smp_params p;
    printf("vocab %d, %d iterations\n", (int)V, iters);
    smp_params_default(&p);
    run("greedy", &p, base, x, V, iters, NULL, 0);
    p.top_logprobs = 5;
    run("greedy + top_logprobs 5", &p, base, x, V, iters, NULL, 0);
    smp_params_default(&p);
    p.temperature = 0.7f, p.top_p = 0.9f, p.seed = 1;
    run("temperature 0.7 + top_p 0.9", &p, base, x, V, iters, NULL, 0);
    smp_params_default(&p);
    p.temperature = 1.0f, p.top_k = 40, p.seed = 1;
    run("temperature 1 + top_k 40", &p, base, x, V, iters, NULL, 0);
    smp_params_default(&p);
    p.temperature = 0.8f, p.top_k = 50, p.top_p = 0.95f, p.min_p = 0.05f, p.seed = 1;
    run("temperature 0.8 + top_k 50 + top_p 0.95 + min_p", &p, base, x, V, iters, NULL, 0);
    smp_params_default(&p);
    p.temperature = 1.0f, p.seed = 1;
    run("temperature 1 (no filter)", &p, base, x, V, iters, NULL, 0);
    smp_params_default(&p);
    p.repetition_penalty = 1.1f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.5f;
    run("greedy + penalties, 2000-token prompt", &p, base, x, V, iters, hist, 2000);
    free(base), free(x), free(hist);
    return 0;
}
