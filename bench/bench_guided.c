/* bench_guided.c — decode speed of a constrained request against an unconstrained one (issue 19):
 * one request at a time on a compiled package, the same random prompt and token budget for both,
 * alternating unconstrained / constrained REPS times (so a busy neighbour slows both alike).
 *
 * Only the decode part is timed: from the arrival of a request's first token (the end of its
 * prefill) to its last, over the tokens in between, so a constrained request that ends early (its
 * structure closed) still counts only whole decode steps. The constraint is JSON mode (--json, the
 * default) or one schema of a JSON-lines file ({name, schema, ...} per line: --schemas FILE
 * --pick NAME); random weights pick junk tokens, but inside the constraint, and the output must be
 * long enough to time: min tokens and ignore_eos keep the unconstrained one going to the budget,
 * and the constrained one's decode tokens are printed.
 *
 * On a CUDA package a lone greedy unconstrained request runs multi-step launches and chained
 * steps (its next token needs no host decision) that a constrained one cannot; --tune
 * run_steps=1,chain=0 times the unconstrained one on the same step path.
 *
 * On a CUDA package the constrained request samples on the device under its mask (uploaded as a
 * bitmask beside each step, templates/cuda/sample.cu); --tune chain=0 turns off the chained steps
 * of both.
 *
 * --check (a GPU check, scripts/gpu_check_guided.py): no timing; on an engine that samples on the
 * device (the constrained row under its device mask) and on one that samples every row on the
 * host (device_sampling 0: the logits come back, the mask is applied by the host sampler), greedy:
 * the constrained request alone, an unconstrained one alone, then the three at once (unconstrained,
 * constrained, unconstrained on another prompt); the lone requests' tokens must be the same on
 * both engines, and no request may fail (exit 1 otherwise). Then the constrained request alone with
 * temperature 1 on the device (a token its mask did not allow would fail the request: the engine
 * checks each one against the matcher). Prints the constrained outputs as JSON strings ("check
 * text ...").
 *
 * Usage: bench_guided PKG [--json | --schemas FILE --pick NAME | --regex RE] [--new-tokens 256]
 *        [--prompt-len 32] [--reps 3] [--temperature T] [--threads N] [--verify-hashes 0|1]
 *        [--tune KEY=VALUE,...] [--check] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ignis.h"
#include "rt_util.h"

typedef struct run_stat {
    int32_t n;          /* tokens generated */
    double decode_s;    /* first token's arrival to the last's */
    ig_finish_reason finish;
} run_stat;

/* Runs one request to its end, timing its decode part. Returns 0, or 1 on an error. */
static int run_one(ig_engine *e, const int32_t *ids, int32_t P, const ig_gen_config *g, run_stat *rs) {
    ig_request *r;
    ig_err err;
    if (ig_request_start(e, ids, P, g, &r, &err)) {
        fprintf(stderr, "bench_guided: start: %s\n", err.msg);
        return 1;
    }
    double t_first = 0, t_last = 0;
    memset(rs, 0, sizeof *rs);
    ig_output *o;
    int bad = 0;
    while (ig_request_read(r, -1, &o, &err) == IG_OK) {
        double t = rt_now();
        if (o->n_tokens) {
            if (!rs->n) t_first = t;
            t_last = t;
            rs->n += o->n_tokens;
        }
        if (o->status == IG_REQ_ERROR) {
            fprintf(stderr, "bench_guided: request failed: %s\n", o->error);
            bad = 1;
        }
        if (o->status == IG_REQ_FINISHED) rs->finish = o->finish;
        ig_output_free(o);
    }
    ig_request_release(r);
    rs->decode_s = t_last - t_first;
    return bad;
}

/* The schema NAME of a JSON-lines file, as JSON text (malloc'd), or NULL with a message. */
static char *pick_schema(const char *file, const char *name) {
    FILE *f = fopen(file, "rb");
    if (!f) { fprintf(stderr, "bench_guided: cannot open %s\n", file); return NULL; }
    char *line = NULL, *out = NULL;
    size_t cap = 0;
    while (!out && getline(&line, &cap, f) > 0) {
        cJSON *row = cJSON_Parse(line);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(row, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name))
            out = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(row, "schema"));
        cJSON_Delete(row);
    }
    free(line);
    fclose(f);
    if (!out) fprintf(stderr, "bench_guided: no schema named %s in %s\n", name, file);
    return out;
}

static const char *finish_name(ig_finish_reason f) {
    static const char *n[] = {"none", "eos", "stop", "length", "kv", "incomplete"};
    return f >= 0 && f <= IG_FINISH_INCOMPLETE ? n[f] : "?";
}

/* ---- --check */

typedef struct check_out {
    int32_t toks[4096], n;
    char text[16384];
    size_t text_len;
    ig_finish_reason finish;
    int failed;
} check_out;

/* Runs the n requests g[i] on prompts ids + i (P tokens each) at once, to their ends. */
static int run_batch(ig_engine *e, const int32_t *ids, int32_t P, const ig_gen_config *g, int n, check_out *out) {
    ig_request *r[4];
    ig_err err;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (ig_request_start(e, ids + i, P, &g[i], &r[i], &err)) {
            fprintf(stderr, "bench_guided: start: %s\n", err.msg);
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        ig_output *o;
        while (ig_request_read(r[i], -1, &o, &err) == IG_OK) {
            for (int32_t k = 0; k < o->n_tokens && out[i].n < 4096; k++) out[i].toks[out[i].n++] = o->tokens[k];
            size_t room = sizeof out[i].text - 1 - out[i].text_len, m = o->text_len < room ? o->text_len : room;
            memcpy(out[i].text + out[i].text_len, o->text, m);
            out[i].text_len += m;
            if (o->status == IG_REQ_ERROR) {
                fprintf(stderr, "bench_guided: request %d failed: %s\n", i, o->error);
                out[i].failed = 1;
            }
            if (o->status == IG_REQ_FINISHED) out[i].finish = o->finish;
            ig_output_free(o);
        }
        ig_request_release(r[i]);
    }
    return 0;
}

static void print_text(const char *label, const check_out *o) {
    cJSON *t = cJSON_CreateString(o->text);
    char *j = cJSON_PrintUnformatted(t);
    printf("check text %s (%d tokens, %s): %s\n", label, o->n, finish_name(o->finish), j ? j : "\"\"");
    free(j);
    cJSON_Delete(t);
}

static int open_engine(const char *pkg, const ig_engine_config *base, int device_sampling, int32_t kv_pages, ig_engine **e) {
    ig_engine_config cfg = *base;
    cfg.device_sampling = device_sampling;
    cfg.max_seqs = 4;
    cfg.kv_pages = kv_pages;
    ig_err err;
    if (ig_engine_open(pkg, &cfg, e, &err)) {
        fprintf(stderr, "bench_guided: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* The check described at the top; g: the unconstrained and the constrained config. Only requests
 * run alone are compared token for token: the steps of a batch depend on when each request was
 * admitted, and a GPU's kernels of another batch shape round differently. */
static int check(const char *pkg, const ig_engine_config *base, int32_t P, int32_t N, const ig_gen_config g[2]) {
    int32_t ids[4096 + 3];
    uint64_t s = 42;
    for (int32_t i = 0; i < P + 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % 1000u) + 300; /* plain text tokens of any vocabulary */
    }
    ig_gen_config b[3] = {g[0], g[1], g[0]};
    for (int i = 0; i < 3; i++) b[i].temperature = 0.0f;
    b[0].max_new_tokens = b[2].max_new_tokens = N / 2 > 8 ? N / 2 : 8;
    static check_out alone[2][2], mix[2][3], smp; /* [pass][request] */
    const char *names[3] = {"unconstrained", "constrained", "unconstrained (another prompt)"};
    int bad = 0;
    for (int pass = 0; pass < 2; pass++) {
        ig_engine *e;
        if (open_engine(pkg, base, pass == 0, 4 * ((P + N) / 16 + 2), &e)) return 1;
        int rc = run_batch(e, ids + 1, P, &b[1], 1, &alone[pass][1]);      /* the constrained one alone */
        if (!rc) rc = run_batch(e, ids, P, &b[0], 1, &alone[pass][0]);     /* an unconstrained one alone */
        if (!rc) rc = run_batch(e, ids, P, b, 3, mix[pass]);               /* the three at once */
        if (!rc && pass == 0) { /* the constrained request alone, sampled, on the device */
            ig_gen_config t = g[1];
            t.temperature = 1.0f, t.seed = 11;
            rc = run_batch(e, ids, P, &t, 1, &smp);
            print_text("sampled", &smp);
            if (smp.failed || smp.n == 0) bad = 1, printf("check FAIL: the sampled constrained request failed\n");
        }
        ig_engine_close(e);
        if (rc) return 1;
    }
    for (int i = 0; i < 2; i++) {
        const check_out *d = &alone[0][i], *h = &alone[1][i];
        int same = d->n == h->n && !memcmp(d->toks, h->toks, sizeof(int32_t) * (size_t)d->n);
        printf("check %s alone: %d tokens (%s) on the device path, %d (%s) on the host path: %s\n", names[i], d->n,
               finish_name(d->finish), h->n, finish_name(h->finish), same ? "the same tokens" : "DIFFERENT");
        if (!same || d->failed || h->failed || d->n == 0) bad = 1;
    }
    for (int i = 0; i < 3; i++) {
        const check_out *d = &mix[0][i], *h = &mix[1][i];
        int same = d->n == h->n && !memcmp(d->toks, h->toks, sizeof(int32_t) * (size_t)d->n);
        printf("check %s in a batch of three: %d tokens (%s) on the device path, %d (%s) on the host path (%s; not "
               "asserted)\n", names[i], d->n, finish_name(d->finish), h->n, finish_name(h->finish),
               same ? "the same tokens" : "other tokens");
        if (d->failed || h->failed || d->n == 0) bad = 1;
    }
    print_text("greedy", &alone[0][1]);
    print_text("batched", &mix[0][1]);
    printf("check: %s\n", bad ? "FAIL" : "ok");
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_guided PKG [--json | --schemas FILE --pick NAME | --regex RE] [--new-tokens N] "
                        "[--prompt-len N] [--reps N] [--temperature T] [--threads N] [--verify-hashes 0|1] "
                        "[--tune KEY=VALUE,...] [--check]\n");
        return 2;
    }
    int P = 32, N = 256, reps = 3, threads = 0, verify = 1, do_check = 0;
    float temp = 0.0f;
    const char *tune = NULL, *schemas = NULL, *pick = NULL, *regex = NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--check")) do_check = 1;
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--regex")) regex = argv[i + 1];
        if (!strcmp(argv[i], "--prompt-len")) P = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--new-tokens")) N = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--verify-hashes")) verify = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--temperature")) temp = (float)atof(argv[i + 1]);
        if (!strcmp(argv[i], "--tune")) tune = argv[i + 1];
        if (!strcmp(argv[i], "--schemas")) schemas = argv[i + 1];
        if (!strcmp(argv[i], "--pick")) pick = argv[i + 1];
    }
    char *schema = NULL;
    if (schemas && (!pick || !(schema = pick_schema(schemas, pick)))) return 2;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.max_seqs = 2;
    cfg.n_threads = threads;
    cfg.verify_hashes = verify;
    cfg.tune = tune;
    cfg.kv_pages = 2 * ((P + N) / 16 + 2);
    ig_engine *e;
    ig_err err;
    if (ig_engine_open(argv[1], &cfg, &e, &err)) {
        fprintf(stderr, "bench_guided: %s\n", err.msg);
        return 1;
    }
    int32_t V = ig_engine_vocab(e), *ids = malloc(sizeof(int32_t) * (size_t)P);
    ig_gen_config g[2]; /* 0 unconstrained, 1 constrained */
    for (int k = 0; k < 2; k++) {
        ig_gen_config_default(&g[k]);
        g[k].max_new_tokens = N;
        g[k].temperature = temp;
        g[k].seed = 7;
    }
    g[0].ignore_eos = 1; /* the unconstrained one runs to the budget (min_new_tokens would sample it on the host) */
    g[1].constraint = schema ? IG_CONSTRAINT_JSON_SCHEMA : regex ? IG_CONSTRAINT_REGEX : IG_CONSTRAINT_JSON;
    g[1].constraint_text = schema ? schema : regex;
    if (do_check) {
        ig_engine_close(e);
        free(ids);
        int rc = check(argv[1], &cfg, P > 4096 - 3 ? 4096 - 3 : P, N, g);
        free(schema);
        return rc;
    }
    printf("package %s: prompt %d tokens, up to %d new tokens, %s, %d runs each, alternating; constraint: %s%s\n", argv[1], P, N,
           temp > 0 ? "sampled" : "greedy", reps, schema ? "JSON Schema " : regex ? "regex " : "JSON mode", schema ? pick : regex ? regex : "");
    uint64_t s = 42;
    run_stat rs;
    for (int k = 0; k < 2; k++) { /* warm-up, untimed: kernels, graphs, the constraint's vocabulary */
        for (int i = 0; i < P; i++) ids[i] = i % V;
        ig_gen_config w = g[k];
        w.max_new_tokens = w.min_new_tokens = 8;
        if (run_one(e, ids, P, &w, &rs)) return 1;
    }
    double sum_s[2] = {0}, best[2] = {1e30, 1e30};
    long sum_n[2] = {0};
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i < P; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((s >> 33) % (uint64_t)V);
        }
        for (int k = 0; k < 2; k++) {
            g[k].seed = 7 + (uint64_t)rep;
            if (run_one(e, ids, P, &g[k], &rs)) return 1;
            double ms = rs.n > 1 ? rs.decode_s * 1e3 / (rs.n - 1) : 0;
            printf("run %d %-13s: %4d tokens (%s), decode %.3f ms/token\n", rep + 1, k ? "constrained" : "unconstrained", rs.n,
                   finish_name(rs.finish), ms);
            fflush(stdout);
            if (rs.n > 1) {
                sum_s[k] += rs.decode_s;
                sum_n[k] += rs.n - 1;
                if (ms < best[k]) best[k] = ms;
            }
        }
    }
    for (int k = 0; k < 2; k++)
        printf("%-13s: %ld decode tokens, %.3f ms/token over all runs, best run %.3f ms/token\n", k ? "constrained" : "unconstrained",
               sum_n[k], sum_n[k] ? sum_s[k] * 1e3 / (double)sum_n[k] : 0, best[k]);
    if (sum_n[0] && sum_n[1]) {
        double a = sum_s[1] / (double)sum_n[1], b = sum_s[0] / (double)sum_n[0];
        printf("ratio constrained/unconstrained decode time per token: %.3f over all runs, %.3f best runs (%s 10%%)\n", a / b,
               best[1] / best[0], a / b <= 1.10 ? "within" : "NOT within");
    }
    ig_engine_close(e);
    free(ids);
    free(schema);
    return 0;
}
