/* ignis.c — the command-line tool: import, inspect, compile, logits, generate, bench.
 *
 * Each subcommand parses its own flags, calls the library and prints the library's error
 * message (which names the file, key, tensor or value at fault) with a nonzero exit. This is the
 * only place in ignis that prints or exits. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"
#include "ir.h"
#include "kv_pager.h"
#include "rt_package.h"
#include "rt_seq.h"
#include "rt_machine.h"
#include "rt_util.h"

static int fail(const char *cmd, const ig_err *err) {
    fprintf(stderr, "ignis %s: error: %s\n", cmd, err->msg);
    return 1;
}

static int usage(void) {
    fprintf(stderr,
            "usage: ignis <command> [args]\n"
            "  import  HF_DIR|FILE.gguf -o model.igraph     import a model into an ignis graph\n"
            "  inspect FILE|DIR|PKG [--passes]               print a graph (or a package's manifest)\n"
            "  compile HF_DIR|FILE.gguf|model.igraph -o PKG [--target cpu|cpu:avx512bf16|cpu:avx512|cpu:avx2|cpu:generic]\n"
            "          [--dtype f32|bf16] [--page-size N] [--dump-graph FILE]\n"
            "  logits  PKG --tokens 1,2,3 --out FILE.npy     teacher-forced logits [n_tokens, vocab]\n"
            "  generate PKG --tokens 1,2,3 [--max-new-tokens N] [--ignore-eos]   greedy; prints new ids\n"
            "  bench   PKG [--prompt-len 512] [--decode-tokens 32]   prefill/decode speed vs. the machine\n"
            "common flags: --threads N\n");
    return 2;
}

/* Finds "--name" in argv and returns its value (or "" for a flag without one); NULL if absent. */
static const char *opt(int argc, char **argv, const char *name, int has_value) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name)) return has_value ? (i + 1 < argc ? argv[i + 1] : NULL) : "";
    return NULL;
}

/* First argument that is not a flag or a flag's value. */
static const char *positional(int argc, char **argv, const char *const *valued) {
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-') {
            for (const char *const *v = valued; *v; v++)
                if (!strcmp(argv[i], *v)) {
                    i++;
                    break;
                }
            continue;
        }
        if (!strcmp(argv[i], "-o")) {
            i++;
            continue;
        }
        return argv[i];
    }
    return NULL;
}

static ig_status parse_ids(const char *s, int32_t **ids, int32_t *n, ig_err *err) {
    *ids = NULL;
    *n = 0;
    if (!s || !*s) return ig_fail(err, IG_ERR_INVALID, "--tokens needs a comma-separated list of token ids");
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(sizeof(int32_t) * cap);
    int32_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || x < 0 || x > 0x7fffffff) {
            free(v);
            return ig_fail(err, IG_ERR_INVALID, "--tokens: '%s' is not a list of non-negative token ids", s);
        }
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = k;
    return IG_OK;
}

static int threads_opt(int argc, char **argv) {
    const char *t = opt(argc, argv, "--threads", 1);
    return t ? atoi(t) : 0;
}

static int cmd_import(int argc, char **argv) {
    static const char *const valued[] = {NULL};
    const char *in = positional(argc, argv, valued), *out = opt(argc, argv, "-o", 1);
    ig_err err = {{0}};
    if (!in || !out) return usage();
    ir_graph *g;
    ig_status st = ir_import_any(in, &g, &err);
    if (!st) st = ir_save(g, out, &err);
    if (st) return fail("import", &err);
    printf("%s: %s, %d layers, %d nodes, %d tensors -> %s\n", in, g->hp.arch, g->hp.n_layers, g->n_nodes, g->n_tensors, out);
    ir_graph_free(g);
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    static const char *const valued[] = {NULL};
    const char *in = positional(argc, argv, valued);
    ig_err err = {{0}};
    if (!in) return usage();
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", in);
    if (access(mpath, R_OK) == 0) {
        char *text;
        if (rt_read_file(mpath, &text, NULL, &err)) return fail("inspect", &err);
        fputs(text, stdout);
        putchar('\n');
        free(text);
        return 0;
    }
    ir_graph *g;
    if (ir_import_any(in, &g, &err)) return fail("inspect", &err);
    ir_dump(g, stdout);
    ir_graph_free(g);
    return 0;
}

static int cmd_compile(int argc, char **argv) {
    static const char *const valued[] = {"--target", "--dtype", "--page-size", "--dump-graph", "--cc", NULL};
    const char *in = positional(argc, argv, valued), *out = opt(argc, argv, "-o", 1);
    if (!in || !out) return usage();
    ig_err err = {{0}};
    cc_options o = {.input = in,
                    .out_dir = out,
                    .target = opt(argc, argv, "--target", 1),
                    .dtype = opt(argc, argv, "--dtype", 1),
                    .cc = opt(argc, argv, "--cc", 1),
                    .log = stderr};
    const char *ps = opt(argc, argv, "--page-size", 1);
    if (ps) o.page_size = atoi(ps);
    const char *dump = opt(argc, argv, "--dump-graph", 1);
    if (dump) {
        o.dump = fopen(dump, "w");
        if (!o.dump) {
            snprintf(err.msg, sizeof err.msg, "cannot write %s", dump);
            return fail("compile", &err);
        }
    }
    ig_status st = cc_compile(&o, &err);
    if (o.dump) fclose(o.dump);
    return st ? fail("compile", &err) : 0;
}

/* Opens package + model instance + pager for one sequence. */
typedef struct runner {
    rt_package *pkg;
    rt_model *m;
    kv_pager *pager;
    kv_seq seq;
} runner;

static ig_status runner_open(runner *r, const char *dir, int max_tokens, int threads, ig_err *err) {
    memset(r, 0, sizeof *r);
    ig_status st = rt_package_open(dir, NULL, &r->pkg, err);
    if (st) return st;
    rt_model_opts mo = {.max_tokens = max_tokens, .n_threads = threads, .max_seqs = 1};
    st = rt_model_new(r->pkg, &mo, &r->m, err);
    if (!st) st = kv_pager_new(r->m->ctx.n_pages, &r->pager, err);
    return st;
}

static void runner_close(runner *r) {
    kv_seq_free(r->pager, &r->seq);
    kv_pager_free(r->pager);
    rt_model_free(r->m);
    rt_package_close(r->pkg);
}

static int cmd_logits(int argc, char **argv) {
    static const char *const valued[] = {"--tokens", "--out", "--threads", NULL};
    const char *pkg = positional(argc, argv, valued), *out = opt(argc, argv, "--out", 1);
    if (!pkg || !out) return usage();
    ig_err err = {{0}};
    int32_t *ids, n;
    if (parse_ids(opt(argc, argv, "--tokens", 1), &ids, &n, &err)) return fail("logits", &err);
    runner r;
    ig_status st = runner_open(&r, pkg, 256, threads_opt(argc, argv), &err);
    float *lg = NULL;
    if (!st) {
        int32_t V = r.pkg->desc->vocab;
        lg = malloc(sizeof(float) * (size_t)n * V);
        st = lg ? rt_seq_feed(r.m, r.pager, &r.seq, ids, n, lg, NULL, &err) : ig_fail(&err, IG_ERR_NOMEM, "out of memory");
        int64_t shape[2] = {n, V};
        if (!st) st = rt_write_npy_f32(out, lg, 2, shape, &err);
    }
    free(lg);
    free(ids);
    if (r.pkg) runner_close(&r);
    return st ? fail("logits", &err) : 0;
}

static int cmd_generate(int argc, char **argv) {
    static const char *const valued[] = {"--tokens", "--max-new-tokens", "--threads", NULL};
    const char *pkg = positional(argc, argv, valued);
    if (!pkg) return usage();
    ig_err err = {{0}};
    int32_t *ids, n;
    if (parse_ids(opt(argc, argv, "--tokens", 1), &ids, &n, &err)) return fail("generate", &err);
    const char *mnt = opt(argc, argv, "--max-new-tokens", 1);
    int max_new = mnt ? atoi(mnt) : 16;
    int ignore_eos = opt(argc, argv, "--ignore-eos", 0) != NULL;
    runner r;
    ig_status st = runner_open(&r, pkg, 256, threads_opt(argc, argv), &err);
    float *lg = NULL;
    if (!st) {
        int32_t V = r.pkg->desc->vocab;
        lg = malloc(sizeof(float) * V);
        st = rt_seq_feed(r.m, r.pager, &r.seq, ids, n, NULL, lg, &err);
        for (int i = 0; i < max_new && !st; i++) {
            int32_t next = rt_argmax(lg, V);
            printf(i ? " %d" : "%d", next);
            fflush(stdout);
            int eos = 0;
            for (int k = 0; k < r.pkg->n_eos; k++) eos |= next == r.pkg->eos_ids[k];
            if ((eos && !ignore_eos) || i + 1 == max_new) break;
            st = rt_seq_feed(r.m, r.pager, &r.seq, &next, 1, NULL, lg, &err);
        }
        printf("\n");
    }
    free(lg);
    free(ids);
    if (r.pkg) runner_close(&r);
    return st ? fail("generate", &err) : 0;
}

/* ---- bench: speed against what this machine can do, measured in the same run */

static int cmd_bench(int argc, char **argv) {
    static const char *const valued[] = {"--prompt-len", "--decode-tokens", "--threads", NULL};
    const char *pkg = positional(argc, argv, valued);
    if (!pkg) return usage();
    const char *pl = opt(argc, argv, "--prompt-len", 1), *dn = opt(argc, argv, "--decode-tokens", 1);
    int P = pl ? atoi(pl) : 512, N = dn ? atoi(dn) : 32;
    int threads = threads_opt(argc, argv);
    if (threads > 0) omp_set_num_threads(threads);
    ig_err err = {{0}};
    double t0 = rt_now();
    runner r;
    ig_status st = runner_open(&r, pkg, P, threads, &err);
    if (st) return fail("bench", &err);
    double t_load = rt_now() - t0;
    const ig_model_desc *d = r.pkg->desc;
    int32_t V = d->vocab;
    if (P + N > d->max_context) {
        snprintf(err.msg, sizeof err.msg, "prompt %d + decode %d exceeds the context of %d", P, N, d->max_context);
        return fail("bench", &err);
    }
    int32_t *ids = malloc(sizeof(int32_t) * P);
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < P; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ids[i] = (int32_t)(s % (uint64_t)V);
    }
    float *lg = malloc(sizeof(float) * V);
    /* warm-up: one short sequence touches every weight page */
    st = rt_seq_feed(r.m, r.pager, &r.seq, ids, 8, NULL, lg, &err);
    kv_seq_release(r.pager, &r.seq);
    double tp = rt_now();
    if (!st) st = rt_seq_feed(r.m, r.pager, &r.seq, ids, P, NULL, lg, &err);
    tp = rt_now() - tp;
    double td = rt_now();
    for (int i = 0; i < N && !st; i++) {
        int32_t next = rt_argmax(lg, V);
        st = rt_seq_feed(r.m, r.pager, &r.seq, &next, 1, NULL, lg, &err);
    }
    td = rt_now() - td;
    if (st) return fail("bench", &err);

    /* what the machine can do */
    size_t bw_bytes = (size_t)1 << 30;
    uint8_t *buf = aligned_alloc(64, bw_bytes);
    memset(buf, 1, bw_bytes);
    double bw = rt_read_bandwidth(buf, bw_bytes, 5);
    free(buf);
    int bf = d->dtype == IG_DTYPE_BF16;
    uint32_t cpu = rt_cpu_features();
    double peak = 0;
    if (bf && (cpu & IG_CPU_AVX512BF16)) peak = rt_peak_flops(RT_PEAK_BF16_DOT, 0.5);
    else if (cpu & IG_CPU_AVX512F) peak = rt_peak_flops(RT_PEAK_F32_FMA512, 0.5);
    else if (cpu & IG_CPU_AVX2) peak = rt_peak_flops(RT_PEAK_F32_FMA256, 0.5);

    /* work per token */
    double L = d->n_layers, Hd = d->hidden, q = (double)d->n_heads * d->head_dim, kv = (double)d->n_kv_heads * d->head_dim;
    double mat_params = L * (Hd * (q + 2 * kv) + q * Hd + 3.0 * Hd * d->intermediate);
    double flops_prefill = 2.0 * mat_params * P + L * 2.0 * 2.0 * d->n_heads * d->head_dim * (double)P * P / 2 + 2.0 * Hd * V;
    uint64_t embed_bytes = 0;
    for (int i = 0; i < d->n_weights; i++)
        if (strstr(d->weights[i].name, "embed") || strstr(d->weights[i].name, "token_embd")) embed_bytes = d->weights[i].nbytes;
    double bytes_tok = (double)r.pkg->weights_bytes - (r.pkg->tie_embeddings ? 0 : (double)embed_bytes);
    double ms_tok = td / N * 1e3;
    printf("package        %s (%s, %s)\n", pkg, r.pkg->target, r.pkg->dtype);
    printf("threads        %d\n", r.m->ctx.n_threads);
    printf("load           %.2f s (weights %.1f MB, hashes checked)\n", t_load, r.pkg->weights_bytes / 1e6);
    printf("prefill        %d tokens in %.3f s: %.1f tokens/s, %.1f GFLOP/s", P, tp, P / tp, flops_prefill / tp / 1e9);
    if (peak > 0) printf(" = %.1f%% of measured %s peak %.1f GFLOP/s", 100 * flops_prefill / tp / peak, bf ? "bf16 dot-product" : "f32 FMA", peak / 1e9);
    printf("\n");
    printf("decode         %d tokens: %.2f ms/token, %.2f tokens/s\n", N, ms_tok, N / td);
    printf("memory         measured read bandwidth %.1f GB/s; decode reads %.1f MB of weights per token\n", bw / 1e9, bytes_tok / 1e6);
    printf("decode bound   %.2f tokens/s at that bandwidth; decode reaches %.1f%% of it (%.1f GB/s)\n",
           bw / bytes_tok, 100.0 * (bytes_tok / (td / N)) / bw, bytes_tok / (td / N) / 1e9);
    free(ids);
    free(lg);
    runner_close(&r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *cmd = argv[1];
    int ac = argc - 2;
    char **av = argv + 2;
    if (!strcmp(cmd, "import")) return cmd_import(ac, av);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(ac, av);
    if (!strcmp(cmd, "compile")) return cmd_compile(ac, av);
    if (!strcmp(cmd, "logits")) return cmd_logits(ac, av);
    if (!strcmp(cmd, "generate")) return cmd_generate(ac, av);
    if (!strcmp(cmd, "bench")) return cmd_bench(ac, av);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("ignis %s\n", IGNIS_VERSION);
        return 0;
    }
    fprintf(stderr, "ignis: unknown command '%s'\n", cmd);
    return usage();
}
