/* bench_engine.c — serving throughput of the engine (issue 4): output tokens/s at 1, 4, 16 and 64
 * concurrent requests, with time to first token and inter-token latency, on a compiled package.
 * Decode is memory-bound, so a step of 16 sequences should cost little more than a step of one:
 * the ratio of throughputs against one-at-a-time is printed. tokens/s counts from the first start to
 * the last token (prefill included); decode tok/s is the steady state, concurrency / median ITL.
 * Usage: bench_engine PKG [--prompt-len 32] [--new-tokens 16] [--levels 1,4,16,64] [--threads N]
 *        [--verify-hashes 0|1] [--tune KEY=VALUE,...] [--host-tier [--kv-host-bytes N]]
 * --host-tier: instead, the prefix cache's host tier (issue 17): a pool just large enough for one
 * prompt of --prompt-len tokens, the prompt, another prompt as long (which evicts the first one's
 * cached pages), then the first prompt again; its time to first token with the host tier (the
 * default budget) against without it (recomputed), with the tier's stats. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ignis.h"
#include "rt_package.h"
#include "rt_util.h"

typedef struct req_stat {
    ig_request *r;
    double t_start, t_first, t_last;
    int32_t n;
} req_stat;

/* Accounts one queue element of request r: time to first token, then inter-token latency. */
static void record(req_stat *r, ig_output *o, double *itl, int *n_itl) {
    double t = rt_now();
    if (o->n_tokens) {
        if (!r->n) r->t_first = t;
        else itl[(*n_itl)++] = (t - r->t_last) / o->n_tokens;
        r->t_last = t;
        r->n += o->n_tokens;
    }
    ig_output_free(o);
}

/* Time to first token (seconds) of a greedy request of one new token over ids; < 0 on failure. */
static double ttft(ig_engine *e, const int32_t *ids, int32_t n) {
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = 1;
    g.ignore_eos = 1;
    ig_request *r;
    ig_err err;
    const double t0 = rt_now();
    if (ig_request_start(e, ids, n, &g, &r, &err)) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    double t = -1;
    for (;;) {
        ig_output *o;
        if (ig_request_read(r, -1, &o, &err) != IG_OK) break;
        if (o->n_tokens && t < 0) t = rt_now() - t0;
        ig_output_free(o);
    }
    ig_request_release(r);
    return t;
}

/* --host-tier (see the header): returns the exit status. */
static int host_tier_bench(const char *pkg, int P, int threads, int verify, const char *tune, long long host_bytes) {
    rt_package *rp;
    ig_err err;
    if (rt_package_open(pkg, &(rt_open_opts){.verify_hashes = verify}, &rp, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 1;
    }
    const int32_t ps = rp->desc->page_size;
    const double page_mb = rp->desc->kv_page_bytes / 1e6;
    rt_package_close(rp);
    int32_t *a = malloc(sizeof(int32_t) * P), *b = malloc(sizeof(int32_t) * P);
    double t[2][3];
    ig_engine_stats st[2];
    for (int k = 0; k < 2; k++) {
        ig_engine_config cfg;
        ig_engine_config_default(&cfg);
        cfg.max_seqs = 2;
        cfg.n_threads = threads;
        cfg.verify_hashes = verify;
        cfg.tune = tune;
        cfg.kv_pages = (P + 1 + ps - 1) / ps + 2; /* one prompt and a little: two cannot stay */
        cfg.kv_host_bytes = k == 0 ? host_bytes : 0;
        ig_engine *e;
        if (ig_engine_open(pkg, &cfg, &e, &err)) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            return 1;
        }
        /* rounds of new ids: two warm-ups (kernels, graphs, the host tier's pinned chunks, made as
         * pages first go there), then the timed one; each prompt followed by another as long so
         * that its pages leave the pool */
        for (int r = 0; r < 3; r++) {
            uint64_t s = 42 + (uint64_t)r;
            for (int i = 0; i < P; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                a[i] = (int32_t)((s >> 33) % (uint64_t)ig_engine_vocab(e));
                b[i] = (a[i] + 1 + i) % ig_engine_vocab(e);
            }
            t[k][0] = ttft(e, a, P);
            t[k][1] = ttft(e, b, P);
            t[k][2] = ttft(e, a, P);
        }
        ig_engine_get_stats(e, &st[k]);
        ig_engine_close(e);
        if (t[k][0] < 0 || t[k][1] < 0 || t[k][2] < 0) return 1;
    }
    printf("package %s: prompt %d tokens, pool %d pages of %d tokens (%.2f MB each)\n", pkg, P, (P + ps) / ps + 2, ps, page_mb);
    for (int k = 0; k < 2; k++)
        printf("%-14s first TTFT %8.2f ms | evicting prompt %8.2f ms | repeated prompt TTFT %8.2f ms | host hits %lld tokens, "
               "%.1f MB to host, %.1f MB back, host tier %d pages\n",
               k ? "recompute" : "host tier", 1e3 * t[k][0], 1e3 * t[k][1], 1e3 * t[k][2], (long long)st[k].prefix_host_hit_tokens,
               st[k].kv_bytes_to_host / 1e6, st[k].kv_bytes_from_host / 1e6, st[k].kv_host_pages_total);
    printf("host tier: repeated-prompt TTFT %.2fx better than recompute\n", t[1][2] / t[0][2]);
    free(a);
    free(b);
    return st[0].prefix_host_hit_tokens > 0 ? 0 : 1;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_engine PKG [--prompt-len N] [--new-tokens N] [--levels 1,4,16,64] [--threads N] [--verify-hashes 0|1] [--tune KEY=VALUE,...] [--host-tier [--kv-host-bytes N]]\n");
        return 2;
    }
    int P = 32, N = 16, threads = 0, verify = 1;
    const char *tune = NULL;
    int levels[8] = {1, 4, 16, 64}, n_levels = 4, host_tier = 0;
    long long host_bytes = -1; /* --kv-host-bytes: the host tier's budget (-1: the engine's default) */
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--host-tier")) host_tier = 1;
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--prompt-len")) P = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--new-tokens")) N = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--verify-hashes")) verify = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--tune")) tune = argv[i + 1];
        if (!strcmp(argv[i], "--kv-host-bytes")) host_bytes = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--levels")) {
            n_levels = 0;
            for (char *t = strtok(argv[i + 1], ","); t && n_levels < 8; t = strtok(NULL, ",")) levels[n_levels++] = atoi(t);
        }
    }
    if (host_tier) return host_tier_bench(argv[1], P, threads, verify, tune, host_bytes);
    int max_c = 1;
    for (int i = 0; i < n_levels; i++)
        if (levels[i] > max_c) max_c = levels[i];
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.max_seqs = max_c;
    cfg.max_tokens_per_step = max_c > 256 ? max_c : 256;
    cfg.n_threads = threads;
    cfg.verify_hashes = verify;
    cfg.tune = tune;
    cfg.kv_pages = max_c * ((P + N) / 16 + 2);
    if (cfg.kv_pages < (cfg.max_tokens_per_step + 8) / 16 + 2) /* room for the warm-up's whole step */
        cfg.kv_pages = (cfg.max_tokens_per_step + 8) / 16 + 2;
    ig_engine *e;
    ig_err err;
    if (ig_engine_open(argv[1], &cfg, &e, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 1;
    }
    int32_t V = ig_engine_vocab(e);
    int32_t *ids = malloc(sizeof(int32_t) * P);
    uint64_t s = 42;
    printf("package %s: prompt %d tokens, %d new tokens per request (greedy, EOS ignored)\n", argv[1], P, N);
    printf("%-12s %12s %12s %14s %14s %14s %16s\n", "concurrency", "tokens/s", "x vs 1", "TTFT p50 ms", "ITL p50 ms",
           "ITL p90 ms", "decode tok/s");
    /* warm-up, untimed: a request of the bench's prompt and one whose prompt fills a whole step
     * load every kernel the levels' steps use (GPU libraries load theirs lazily; quantized packages
     * take other kernels past a step size, e.g. cuBLAS past qg_tmax tokens) and capture the decode
     * step's CUDA graph */
    {
        enum { WARM_NEW = 4 };
        int32_t nw = cfg.max_tokens_per_step > P ? cfg.max_tokens_per_step : P;
        if (nw > ig_engine_max_context(e) - WARM_NEW) nw = ig_engine_max_context(e) - WARM_NEW;
        const int32_t lens[2] = {P, nw}, nb = nw > P ? nw : P;
        int32_t *wids = malloc(sizeof(int32_t) * (size_t)nb);
        if (!wids) {
            fprintf(stderr, "bench_engine: out of memory\n");
            return 1;
        }
        for (int i = 0; i < nb; i++) wids[i] = i % V;
        ig_gen_config g;
        ig_gen_config_default(&g);
        g.max_new_tokens = WARM_NEW;
        g.ignore_eos = 1;
        for (int k = 0; k < 2; k++) {
            ig_request *r;
            if (ig_request_start(e, wids, lens[k], &g, &r, &err)) {
                fprintf(stderr, "start: %s\n", err.msg);
                return 1;
            }
            ig_request_sync(r);
            ig_request_release(r); /* frees the outputs nobody read */
        }
        free(wids);
    }
    double base = 0;
    for (int li = 0; li < n_levels; li++) {
        int C = levels[li];
        req_stat *st = calloc(C, sizeof *st);
        ig_gen_config g;
        ig_gen_config_default(&g);
        g.max_new_tokens = N;
        g.ignore_eos = 1;
        double t0 = rt_now();
        for (int c = 0; c < C; c++) {
            for (int i = 0; i < P; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                ids[i] = (int32_t)((s >> 33) % (uint64_t)V);
            }
            st[c].t_start = rt_now();
            if (ig_request_start(e, ids, P, &g, &st[c].r, &err)) {
                fprintf(stderr, "start: %s\n", err.msg);
                return 1;
            }
        }
        /* one reader polls all queues without blocking on any single one */
        double *itl = malloc(sizeof(double) * C * (N + 1));
        int n_itl = 0, done = 0;
        while (done < C) {
            int progressed = 0;
            for (int c = 0; c < C; c++) {
                if (!st[c].r) continue;
                ig_output *o;
                ig_status rs = ig_request_read(st[c].r, 0, &o, &err);
                if (rs == IG_ERR_CLOSED) {
                    ig_request_release(st[c].r);
                    st[c].r = NULL;
                    done++;
                    continue;
                }
                if (rs) continue;
                progressed = 1;
                record(&st[c], o, itl, &n_itl);
            }
            if (!progressed && done < C) {
                /* wait on one unfinished request to avoid spinning */
                for (int c = 0; c < C; c++)
                    if (st[c].r) {
                        ig_output *o;
                        if (ig_request_read(st[c].r, 5, &o, &err) == IG_OK) record(&st[c], o, itl, &n_itl);
                        break;
                    }
            }
        }
        double wall = rt_now() - t0;
        long total = 0;
        double *ttft = malloc(sizeof(double) * C);
        for (int c = 0; c < C; c++) {
            total += st[c].n;
            ttft[c] = st[c].t_first - st[c].t_start;
        }
        qsort(ttft, C, sizeof(double), cmp_d);
        qsort(itl, n_itl, sizeof(double), cmp_d);
        double tps = total / wall;
        if (li == 0) base = tps;
        /* decode tok/s: the steady state once every sequence is generating (C / median ITL) */
        printf("%-12d %12.2f %12.2f %14.1f %14.1f %14.1f %16.1f\n", C, tps, tps / base, ttft[C / 2] * 1e3,
               n_itl ? itl[n_itl / 2] * 1e3 : 0, n_itl ? itl[n_itl * 9 / 10] * 1e3 : 0,
               n_itl ? C / itl[n_itl / 2] : 0);
        fflush(stdout);
        free(ttft);
        free(itl);
        free(st);
    }
    ig_engine_close(e);
    free(ids);
    return 0;
}
