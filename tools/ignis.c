/* ignis.c — the command-line tool: compile, generate, chat, logits, perplexity, verify, bench,
 * import, inspect and the tokenizer tools; `serve` runs the HTTP server of server/.
 *
 * Every command declares its flags as tables (tools/cli_args.h): one table of its own plus the
 * shared ones it takes (sampling_flags, engine_flags, thread_flags), each pointing into an
 * options struct that holds the defaults before parsing. cli_parse fills the structs and checks
 * every value; the same tables give `ignis help CMD` / `ignis CMD --help`. Exit status: 0 done,
 * 1 the library failed (its message names the file, key, tensor or value at fault), 2 the command
 * line is wrong (the message names the flag and the value). This is the only place in ignis that
 * prints or exits. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <sys/random.h>
#include <time.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#ifdef IGNIS_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "chat_template.h"
#include "bundle.h"
#include "cli_args.h"
#include "cli_grammar.h"
#include "driver.h"
#include "ignis.h"
#include "ir.h"
#include "kv_pager.h"
#include "passes.h"
#include "pkg_file.h"
#include "rt_package.h"
#include "rt_seq.h"
#include "machine_probe.h"
#include "rt_util.h"
#include "server.h"
#include "tokenizer.h"

static int fail(const char *cmd, const ig_err *err) {
    fprintf(stderr, "ignis %s: error: %s\n", cmd, err->msg);
    return 1;
}

/* Parses a command's arguments: -1 to go on, else the exit status (help printed: 0; a bad
 * command line: 2). */
static int parse_args(const cli_cmd *c, const cli_group *groups, int argc, char **argv, const char **pos) {
    int n_pos, help;
    ig_err err = {{0}};
    if (cli_parse(c, groups, argc, argv, pos, &n_pos, &help, &err)) {
        fprintf(stderr, "ignis %s: error: %s\n(see 'ignis help %s')\n", c->name, err.msg, c->name);
        return 2;
    }
    if (help) {
        cli_help(stdout, c, groups);
        return 0;
    }
    return -1;
}

/* ---- shared flag tables */

typedef struct thread_opts {
    int32_t threads;
    const char *device;
} thread_opts;

static const cli_flag thread_flags[] = {
    CLI_I32("--threads", NULL, thread_opts, threads, 0, 4096, 0, "N", "compute threads (0 = all online CPUs)", NULL),
    CLI_STRD("--device", NULL, thread_opts, device, 0, "auto|cpu|cuda|TARGET",
             "which of a fat package's targets to load (a name as ignis inspect lists them, e.g. cpu-x86_64-avx2)",
             "auto: the CUDA code where a GPU of a compiled architecture is present, else the best CPU target"),
    CLI_END};

/* A fat package: which of its targets was loaded and why, on stderr. */
static void say_target(const char *choice, int32_t n_targets) {
    if (n_targets > 1 && choice && *choice) fprintf(stderr, "ignis: loaded %s\n", choice);
}

/* The sampling / stopping flags: an ig_gen_config plus the --stop strings it points to, --seed as
 * given (NULL: a random seed per run) and --verbose. */
typedef struct sample_opts {
    ig_gen_config g;
    cli_strs stop;
    const char *seed;
    int verbose;
} sample_opts;

static const cli_flag sampling_flags[] = {
    CLI_I32("--max-new-tokens", NULL, sample_opts, g.max_new_tokens, 1, CLI_NONE, 0, "N", "generate at most N tokens", NULL),
    CLI_I32("--min-new-tokens", NULL, sample_opts, g.min_new_tokens, 0, CLI_NONE, 0, "N",
            "suppress EOS and stop ids before N tokens", NULL),
    CLI_F32("--temperature", NULL, sample_opts, g.temperature, 0, CLI_NONE, 0, "T", "sampling temperature (0 = greedy)"),
    CLI_I32("--top-k", NULL, sample_opts, g.top_k, 0, CLI_NONE, 0, "K", "sample from the K most likely tokens (0 = off)", NULL),
    CLI_F32("--top-p", NULL, sample_opts, g.top_p, 0, 1, CLI_LO_OPEN, "P",
            "sample from the most likely tokens that make up P of the probability (1 = off)"),
    CLI_F32("--min-p", NULL, sample_opts, g.min_p, 0, 1, CLI_HI_OPEN, "P",
            "drop tokens less likely than P times the most likely one (0 = off)"),
    CLI_F32("--repetition-penalty", NULL, sample_opts, g.repetition_penalty, 0, CLI_NONE, CLI_LO_OPEN, "R",
            "penalize the logits of tokens already seen by the factor R (1 = off)"),
    CLI_F32("--presence-penalty", NULL, sample_opts, g.presence_penalty, -2, 2, 0, "P",
            "subtract P from the logits of tokens already seen"),
    CLI_F32("--frequency-penalty", NULL, sample_opts, g.frequency_penalty, -2, 2, 0, "F",
            "subtract F times its count from the logit of each token already seen"),
    CLI_STRD("--seed", NULL, sample_opts, seed, 0, "S", "random seed (decimal or 0x hex): the same request and seed give the same tokens",
             "random, printed with --verbose"),
    CLI_REP("--stop", NULL, sample_opts, stop, "TEXT", "stop before this text (needs a tokenizer)"),
    CLI_SW("--ignore-eos", NULL, sample_opts, g.ignore_eos, "keep going past the model's end-of-sequence tokens"),
    CLI_I32("--top-logprobs", NULL, sample_opts, g.top_logprobs, 0, 20, 0, "N",
            "compute the log-probabilities of the N most likely tokens at each step", NULL),
    CLI_SW("--verbose", "-v", sample_opts, verbose, "say on stderr the seed used and, in chat, each turn's prompt size"),
    CLI_END};

static void sample_defaults(sample_opts *s, int32_t max_new) {
    memset(s, 0, sizeof *s);
    ig_gen_config_default(&s->g);
    s->g.max_new_tokens = max_new;
}

/* 64 random bits from the kernel (time and pid if it has none to give). */
static uint64_t random_seed(void) {
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) == (ssize_t)sizeof x) return x;
    return (uint64_t)time(NULL) * 6364136223846793005ull ^ (uint64_t)getpid();
}

/* Points the config at the parsed --stop strings (borrowed from s) and sets the seed: --seed's
 * value (the whole string a decimal or 0x hex number), else a random one, said with --verbose.
 * IG_ERR_INVALID naming a malformed --seed. */
static ig_status sample_finish(sample_opts *s, const char *cmd, ig_err *err) {
    s->g.stop_strings = s->stop.v;
    s->g.n_stop_strings = s->stop.n;
    if (s->seed) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s->seed, &end, 0);
        if (!*s->seed || *end || errno || strchr(s->seed, '-'))
            return ig_fail(err, IG_ERR_INVALID, "--seed: '%s' is not a number in [0, 2^64)", s->seed);
        s->g.seed = v;
    } else {
        s->g.seed = random_seed();
    }
    if (s->verbose) fprintf(stderr, "ignis %s: seed %llu%s\n", cmd, (unsigned long long)s->g.seed, s->seed ? "" : " (random)");
    return IG_OK;
}

/* The engine flags (with thread_flags): 0 means "not given" for each number. max_waiting has no
 * flag here (serve sets it from --max-queue). */
typedef struct engine_opts {
    int32_t max_seqs, max_tokens_per_step, kv_pages, max_waiting, prefix_cache_pages;
    int64_t kv_bytes;
    float kv_fraction;
    const char *kv_host_bytes; /* NULL: the engine's default */
    cli_strs tune;
} engine_opts;

static const cli_flag engine_flags[] = {
    CLI_I32("--max-seqs", NULL, engine_opts, max_seqs, 1, 65536, 0, "N", "sequences per step", "one per prompt"),
    CLI_I32("--max-tokens-per-step", NULL, engine_opts, max_tokens_per_step, 1, CLI_NONE, 0, "N",
            "token budget of one step, prefill chunks + decode", "256, at least --max-seqs"),
    CLI_I32("--kv-pages", NULL, engine_opts, kv_pages, 1, CLI_NONE, 0, "N", "KV cache pages", "sized by --kv-fraction"),
    CLI_F32("--kv-fraction", NULL, engine_opts, kv_fraction, 0.001, 1.0, 0, "F",
            "share of the memory left after weights and workspace for the KV cache (GPU: free device memory; "
            "CPU: available RAM, at most --max-seqs full contexts; default 0.85)"),
    CLI_I64("--kv-bytes", NULL, engine_opts, kv_bytes, 1, CLI_NONE, 0, "BYTES", "KV cache budget in bytes (instead of --kv-pages)",
            NULL),
    CLI_STRV("--kv-host-bytes", NULL, engine_opts, kv_host_bytes, 0, "BYTES",
             "host memory for the prefix cache's host tier: KV pages evicted from the pool wait there and come back "
             "on a hit instead of being recomputed (0: off; default: an eighth of the available RAM on GPUs, off on CPUs)"),
    CLI_I32("--prefix-cache-pages", NULL, engine_opts, prefix_cache_pages, -1, CLI_NONE, 0, "N",
            "most KV pages the prefix cache keeps (-1: the whole pool)", "GPU: the whole pool; CPU: 1/16 of it, at least 256"),
    CLI_REP("--tune", NULL, engine_opts, tune, "KEY=VALUE[,...]", "run-time tuning of the package's code (docs/TUNING.md)"),
    CLI_END};

/* Tensor-parallel packages under mpirun: ranks other than 0 follow rank 0 here instead of running
 * the command (ig_tp_follow). Returns 1 when this process was such a rank (*rc: its exit status). */
static int tp_followed(const char *cmd, const char *pkg, int *rc) {
    ig_err err = {{0}};
    int followed = 0;
    *rc = 0;
    if (ig_tp_follow(pkg, &followed, &err)) {
        *rc = fail(cmd, &err);
        return 1;
    }
    return followed;
}

/* Opens the engine; max_seqs is the command's default for --max-seqs (0: the engine's). */
static ig_status open_engine(const engine_opts *eo, const thread_opts *t, const char *pkg, int32_t max_seqs,
                             ig_engine **e, ig_err *err) {
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.n_threads = t->threads;
    if (eo->max_seqs > 0) max_seqs = eo->max_seqs;
    if (max_seqs > 0) cfg.max_seqs = max_seqs;
    if (eo->max_tokens_per_step > 0) cfg.max_tokens_per_step = eo->max_tokens_per_step;
    if (cfg.max_tokens_per_step < cfg.max_seqs) cfg.max_tokens_per_step = cfg.max_seqs;
    cfg.kv_pages = eo->kv_pages;
    cfg.kv_bytes = eo->kv_bytes;
    if (eo->kv_fraction > 0) cfg.kv_fraction = eo->kv_fraction;
    if (eo->max_waiting > 0) cfg.max_waiting = eo->max_waiting;
    if (eo->kv_host_bytes) {
        char *end;
        errno = 0;
        long long v = strtoll(eo->kv_host_bytes, &end, 10);
        if (errno || end == eo->kv_host_bytes || *end || v < 0)
            return ig_fail(err, IG_ERR_INVALID, "--kv-host-bytes: '%s' is not a byte count (0: off)", eo->kv_host_bytes);
        cfg.kv_host_bytes = v;
    }
    cfg.prefix_cache_pages = eo->prefix_cache_pages;
    char *tune;
    ig_status st = cli_join(&eo->tune, ',', &tune, err);
    cfg.tune = tune;
    cfg.device = t->device;
    if (!st) st = ig_engine_open(pkg, &cfg, e, err);
    free(tune);
    if (!st) {
        int32_t n_targets;
        const char *choice = ig_engine_target(*e, &n_targets);
        say_target(choice, n_targets);
    }
    return st;
}

static ig_status parse_ids(const char *flag, const char *s, int32_t **ids, int32_t *n, ig_err *err) {
    *ids = NULL;
    *n = 0;
    if (!s || !*s) return ig_fail(err, IG_ERR_INVALID, "%s needs a comma-separated list of token ids", flag);
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = malloc(sizeof(int32_t) * cap);
    if (!v) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    int32_t k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || x < 0 || x > 0x7fffffff) {
            free(v);
            return ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not a list of non-negative token ids", flag, s);
        }
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = k;
    return IG_OK;
}

/* ---- import, inspect, compile */

typedef struct import_opts {
    const char *pos[1];
    const char *out;
} import_opts;

static const cli_flag import_flags[] = {
    CLI_STRV("--output", "-o", import_opts, out, CLI_REQUIRED, "FILE", "the ignis graph to write (model.igraph)"),
    CLI_END};

static int cmd_import(const cli_cmd *c, int argc, char **argv) {
    import_opts o = {0};
    const cli_group groups[] = {{NULL, import_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    ir_graph *g;
    ig_status st = ir_import_any(o.pos[0], &g, &err);
    if (st) return fail(c->name, &err);
    st = ir_save(g, o.out, &err);
    if (!st)
        printf("%s: %s, %d layers, %d nodes, %d tensors -> %s\n", o.pos[0], g->hp.arch, g->hp.n_layers, g->n_nodes,
               g->n_tensors, o.out);
    ir_graph_free(g);
    return st ? fail(c->name, &err) : 0;
}

typedef struct inspect_opts {
    const char *pos[1];
    int passes;
    const char *device;
} inspect_opts;

static const cli_flag inspect_flags[] = {
    CLI_SW("--passes", NULL, inspect_opts, passes, "run the compiler passes, printing the graph after each"),
    CLI_STRD("--device", NULL, inspect_opts, device, 0, "auto|cpu|cuda|TARGET", "a fat package: the target choice to report",
             "auto"),
    CLI_END};

/* A fat package's targets, best first, each with its model object and weights file, on stderr. */
static void say_variants(const char *manifest) {
    cJSON *m = cJSON_Parse(manifest), *v;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "weights"), "file");
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(m, "variants")) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "target"), *f = cJSON_GetObjectItemCaseSensitive(v, "file"),
                    *vw = cJSON_GetObjectItemCaseSensitive(v, "weights");
        const char *wf = cJSON_IsString(vw) ? vw->valuestring : cJSON_IsString(w) ? w->valuestring : "?";
        fprintf(stderr, "target %s: %s, weights %s\n", cJSON_IsString(t) ? t->valuestring : "?",
                cJSON_IsString(f) ? f->valuestring : "?", wf);
    }
    cJSON_Delete(m);
}

static int cmd_inspect(const cli_cmd *c, int argc, char **argv) {
    inspect_opts o = {0};
    const cli_group groups[] = {{NULL, inspect_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", o.pos[0]);
    if (pkgf_exists(mpath)) {
        char *text;
        if (rt_read_file(mpath, &text, NULL, &err)) return fail(c->name, &err);
        fputs(text, stdout);
        putchar('\n');
        int fat = strstr(text, "\"variants\"") != NULL;
        if (fat) say_variants(text);
        free(text);
        if (fat) { /* a fat package: its targets, and which of them this machine loads */
            rt_open_opts oo = {.verify_hashes = 0, .device = o.device};
            rt_package *p;
            if (rt_package_open(o.pos[0], &oo, &p, &err)) return fail(c->name, &err);
            fprintf(stderr, "this machine runs %s (one of the package's %d targets)\n", p->choice, p->n_variants);
            rt_package_close(p);
        }
        return 0;
    }
    ir_graph *g;
    if (ir_import_any(o.pos[0], &g, &err)) return fail(c->name, &err);
    ig_status st = IG_OK;
    if (o.passes) st = cp_run_all(g, stdout, &err);
    else ir_dump(g, stdout);
    ir_graph_free(g);
    return st ? fail(c->name, &err) : 0;
}

typedef struct compile_opts {
    const char *pos[1];
    const char *out, *target, *dtype, *cc, *dump, *quant, *quant_skip, *kv_cache;
    int32_t page_size, max_context, quant_group, tp;
    cli_strs tune;
} compile_opts;

static const cli_flag compile_flags[] = {
    CLI_STRV("--output", "-o", compile_opts, out, CLI_REQUIRED, "PKG", "the package directory to write"),
    CLI_STRD("--target", NULL, compile_opts, target, 0, "TARGET",
             "cpu, cpu:amx, cpu:avx512bf16, cpu:avx512, cpu:avx2, cpu:generic, cpu:aarch64[+dotprod|+bf16|+sve|+sve+bf16] or cuda:ARCH[,ARCH...] (e.g. cuda:sm_80,sm_90)",
             "cpu: the best this machine runs"),
    CLI_STRD("--dtype", NULL, compile_opts, dtype, 0, "f32|bf16|f16", "weight and activation type (f16: CUDA only)",
             "bf16 for a 16-bit checkpoint on CUDA or AVX-512 BF16 CPUs, else f32"),
    CLI_I32("--page-size", NULL, compile_opts, page_size, 1, 4096, 0, "N", "KV page size in tokens", "16; 64 with --kv-cache uint4"),
    CLI_I32("--max-context", NULL, compile_opts, max_context, 1, 1 << 24, 0, "N",
            "the package's context in tokens (past the model's own: positions it was not trained on, with a warning)",
            "the model's max_position_embeddings"),
    CLI_STRD("--kv-cache", NULL, compile_opts, kv_cache, 0, "f32|bf16|f16|int8|uint4|fp8",
             "KV cache format: int8 / uint4 / fp8 (e4m3) quantize each token's key and value per KV head (f16: CUDA only)",
             "the --dtype"),
    CLI_STRD("--quant", NULL, compile_opts, quant, 0, "none|a16w8|a16w4|a8w8|fp8|keep",
             "weight quantization (CPU): a16w8 int8 per output channel, a16w4 uint4 per group of K (q4k: 8-bit "
             "group scales under an f16 pair per 8 groups; vocabulary in 6 bits; on x86-64 with bf16 activations as q8i / q4i / q6i, "
             "whose matmuls quantize the activations to int16 / int8 for integer dot products, unless --tune cpu_iact=0), a8w8 int8 weights x int8 "
             "activations per token, keep: a GGUF's Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K blocks as stored, or a GPTQ / AWQ checkpoint's "
             "integers (q4z / q8z); CUDA: a16w8 / a16w4 as q8r / q4r rows, a8w8 the same q8r rows with int8 activations in "
             "steps of 33+ tokens (cuBLAS's int8 GEMM), fp8 e4m3 rows (f8r) with e4m3 activations in steps of 33+ tokens "
             "(cuBLASLt's fp8 GEMM, sm_89+; CUDA only), keep: Q4_0/Q4_1 blocks as q4r rows, other types dequantized",
             "keep for a quantized GGUF (CPU: dequantized where a block type has no CPU format; CUDA: where it holds no Q4_0 / Q4_1) "
             "or a GPTQ / AWQ checkpoint (CPU), else none"),
    CLI_I32("--quant-group", NULL, compile_opts, quant_group, 32, 128, 0, "N",
            "a16w4 group size along K: 32, 64 or 128; a16w8 (CPU): int8 with an f16 scale per group of K (q8g) in place "
            "of one per output channel", "a16w4 32, a16w8 per channel"),
    CLI_STRV("--quant-skip", NULL, compile_opts, quant_skip, 0, "NAME,...",
             "matrices kept unquantized (e.g. lm_head, mlp.down_proj; tied models: embed_tokens)"),
    CLI_I32("--tp", NULL, compile_opts, tp, 1, 64, 0, "N",
            "tensor parallelism: shard the model for N ranks (CPU; run with mpirun -np N)", "1"),
    CLI_STRV("--dump-graph", NULL, compile_opts, dump, 0, "FILE", "write the graph after each compiler pass to FILE"),
    CLI_STRD("--cc", NULL, compile_opts, cc, 0, "CC", "the C compiler", "$IGNIS_CC or cc"),
    CLI_REP("--tune", NULL, compile_opts, tune, "KEY=VALUE[,...]", "compile-time tuning (docs/TUNING.md)"),
    CLI_END};

static int run_compile(const compile_opts *a, const char *name) {
    ig_err err = {{0}};
    cc_options o = {.input = a->pos[0], .out_dir = a->out, .target = a->target, .dtype = a->dtype, .cc = a->cc,
                    .page_size = a->page_size, .max_context = a->max_context, .quant = a->quant, .quant_group = a->quant_group,
                    .quant_skip = a->quant_skip, .tp = a->tp, .kv_cache = a->kv_cache, .log = stderr};
    char *tune = NULL;
    if (cli_join(&a->tune, ',', &tune, &err)) return fail(name, &err);
    o.tune = tune;
    if (a->dump && !(o.dump = fopen(a->dump, "w"))) {
        free(tune);
        snprintf(err.msg, sizeof err.msg, "cannot write %s", a->dump);
        return fail(name, &err);
    }
    ig_status st = cc_compile(&o, &err);
    if (o.dump) fclose(o.dump);
    free(tune);
    return st ? fail(name, &err) : 0;
}

static int cmd_compile(const cli_cmd *c, int argc, char **argv) {
    compile_opts o = {0};
    const cli_group groups[] = {{NULL, compile_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc < 0) rc = run_compile(&o, c->name);
    cli_free(groups);
    return rc;
}

/* ---- bundle: one self-contained executable (compiler/bundle.c) */

typedef struct bundle_opts {
    const char *pos[1];
    const char *out, *runtime;
} bundle_opts;

static const cli_flag bundle_flags[] = {
    CLI_STRV("--output", "-o", bundle_opts, out, CLI_REQUIRED, "FILE", "the executable to write"),
    CLI_STRD("--runtime", NULL, bundle_opts, runtime, 0, "DIR",
             "the bundle runtime to link (bundle-runtime/ of a build; another architecture's for a cross bundle)",
             "the one beside this ignis"),
    CLI_END};

static int cmd_bundle(const cli_cmd *c, int argc, char **argv) {
    bundle_opts o = {0};
    const cli_group groups[] = {{NULL, bundle_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    bd_options bo = {.pkg = o.pos[0], .out = o.out, .runtime = o.runtime, .log = stderr};
    bd_report r;
    if (bd_bundle(&bo, &r, &err)) return fail(c->name, &err);
    uint64_t over = r.file_bytes - r.weights_bytes;
    printf("%s: %llu bytes = weights %llu + overhead %llu (%.2f MB: executable %llu with %d model object(s), "
           "package files, padding, directory)\n", o.out, (unsigned long long)r.file_bytes,
           (unsigned long long)r.weights_bytes, (unsigned long long)over, over / 1e6, (unsigned long long)r.code_bytes,
           r.n_variants);
    return 0;
}

/* ---- logits and bench (one sequence, straight on the model) */

/* Opens package + model instance + pager for one sequence. */
typedef struct runner {
    rt_package *pkg;
    rt_model *m;
    kv_pager *pager;
    kv_seq seq;
} runner;

/* tune: the --tune values (borrowed), joined for rt_model_opts.tune. kv_tokens: the most tokens the
 * run's one sequence holds (its KV pool is sized for them). */
static ig_status runner_open(runner *r, const char *dir, int max_tokens, int64_t kv_tokens, const thread_opts *th,
                             const cli_strs *tune, ig_err *err) {
    memset(r, 0, sizeof *r);
    char *t = NULL;
    int threads = th->threads;
    rt_open_opts oo = {.verify_hashes = 1, .device = th->device};
    ig_status st = cli_join(tune, ',', &t, err);
    if (!st) st = rt_package_open(dir, &oo, &r->pkg, err);
    if (!st) say_target(r->pkg->choice, r->pkg->n_variants);
    if (st) {
        free(t);
        return st;
    }
    const int32_t ps = r->pkg->desc->page_size;
    rt_model_opts mo = {.max_tokens = max_tokens, .n_threads = threads, .max_seqs = 1, .tune = t,
                        .n_pages = (int32_t)((kv_tokens + ps - 1) / ps + 1)};
    st = rt_model_new(r->pkg, &mo, &r->m, err);
    free(t);
    if (!st) st = kv_pager_new(r->m->ctx.n_pages, &r->pager, err);
    return st;
}

static void runner_close(runner *r) {
    kv_seq_free(r->pager, &r->seq);
    kv_pager_free(r->pager);
    rt_model_free(r->m);
    rt_package_close(r->pkg);
}

typedef struct logits_opts {
    const char *pos[1];
    const char *tokens, *out;
    int step;
    cli_strs tune;
    thread_opts t;
} logits_opts;

static const cli_flag logits_flags[] = {
    CLI_STRV("--tokens", NULL, logits_opts, tokens, CLI_REQUIRED, "IDS", "comma-separated token ids (1,2,3)"),
    CLI_STRV("--out", NULL, logits_opts, out, CLI_REQUIRED, "FILE.npy", "where to write the float32 logits [n_tokens, vocab]"),
    CLI_SW("--step", NULL, logits_opts, step, "one token per forward step (the decode path)"),
    CLI_REP("--tune", NULL, logits_opts, tune, "KEY=VALUE[,...]", "run-time tuning of the package's code (docs/TUNING.md)"),
    CLI_END};

static ig_status run_logits(const logits_opts *o, ig_err *err) {
    int32_t *ids, n;
    ig_status st = parse_ids("--tokens", o->tokens, &ids, &n, err);
    if (st) return st;
    runner r;
    st = runner_open(&r, o->pos[0], 256, n, &o->t, &o->tune, err);
    float *lg = NULL;
    if (!st) {
        int32_t V = r.pkg->desc->vocab;
        lg = malloc(sizeof(float) * (size_t)n * V);
        if (!lg) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        else if (o->step) /* decode-sized steps: what generation runs after the prompt */
            for (int32_t i = 0; i < n && !st; i++) st = rt_seq_feed(r.m, r.pager, &r.seq, ids + i, 1, lg + (size_t)i * V, NULL, err);
        else
            st = rt_seq_feed(r.m, r.pager, &r.seq, ids, n, lg, NULL, err);
        int64_t shape[2] = {n, V};
        if (!st) st = rt_write_npy_f32(o->out, lg, 2, shape, err);
    }
    free(lg);
    free(ids);
    if (r.pkg) runner_close(&r);
    return st;
}

static int cmd_logits(const cli_cmd *c, int argc, char **argv) {
    logits_opts o = {0};
    const cli_group groups[] = {{NULL, logits_flags, &o}, {NULL, thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    if (tp_followed(c->name, o.pos[0], &rc)) return rc;
    ig_err err = {{0}};
    return run_logits(&o, &err) ? fail(c->name, &err) : 0;
}

/* ---- perplexity and verify: quality of a package on a text file */

typedef struct ppl_opts {
    const char *pos[1];
    const char *file, *tokens, *reference;
    int32_t max_tokens, context;
    float max_ppl_ratio, max_dlogit, min_top1, max_kl;
    thread_opts t;
} ppl_opts;

static const cli_flag ppl_flags[] = {
    CLI_STRV("--file", NULL, ppl_opts, file, 0, "TEXT", "the text to score (UTF-8; tokenized with the package's tokenizer)"),
    CLI_STRV("--tokens", NULL, ppl_opts, tokens, 0, "IDS", "score these comma-separated token ids instead of a file"),
    CLI_I32("--max-tokens", NULL, ppl_opts, max_tokens, 2, CLI_NONE, 0, "N", "score at most the first N tokens", "all"),
    CLI_I32("--context", NULL, ppl_opts, context, 2, CLI_NONE, 0, "N",
            "window length: the text is cut into windows of N tokens, each scored from an empty cache", "512"),
    CLI_END};

static const cli_flag verify_flags[] = {
    CLI_STRV("--reference", NULL, ppl_opts, reference, CLI_REQUIRED, "PKG2", "the package to compare with (e.g. the f32 one)"),
    CLI_F32("--max-ppl-ratio", NULL, ppl_opts, max_ppl_ratio, 1, CLI_NONE, 0, "R", "fail when perplexity / reference's exceeds R (default 1.05)"),
    CLI_F32("--max-dlogit", NULL, ppl_opts, max_dlogit, 0, CLI_NONE, CLI_LO_OPEN, "D",
            "fail when max |logit - reference| / max |reference logit| exceeds D (default: no limit)"),
    CLI_F32("--min-top1", NULL, ppl_opts, min_top1, 0, 1, 0, "F", "fail when the top-1 tokens agree on less than a fraction F (default 0)"),
    CLI_F32("--max-kl", NULL, ppl_opts, max_kl, 0, CLI_NONE, CLI_LO_OPEN, "K",
            "fail when the mean KL divergence of the package's next-token distribution from the reference's exceeds K "
            "nats (default: no limit)"),
    CLI_END};

/* Scores of one package (or a package against a reference) over the windows of a text. */
typedef struct ppl_acc {
    double nll, ref_nll;       /* sums of -log p(next token) */
    double max_dlogit, max_ref; /* max |logit - reference logit|, max |reference logit| */
    double kl;                  /* sum of KL(reference || package) over the scored positions, nats */
    int64_t n, top1;           /* tokens scored, top-1 agreements */
} ppl_acc;

/* log sum exp(x) over the V logits, in double. */
static double lse_of(const float *x, int32_t V) {
    double mx = x[0], s = 0.0;
    for (int32_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    for (int32_t v = 0; v < V; v++) s += exp((double)x[v] - mx);
    return log(s) + mx;
}

/* KL(softmax(q) || softmax(g)) from their log-sum-exps lq, lg: sum p (log p - log p'), the
 * reference's distribution q first (how far the package's next-token distribution is from the
 * reference's: less noise than the perplexity ratio, as it does not depend on which token the
 * text has next). */
static double kl_of(const float *q, double lq, const float *g, double lg, int32_t V) {
    double t = 0.0;
    for (int32_t v = 0; v < V; v++) {
        const double a = (double)q[v] - lq;
        t += exp(a) * (a - ((double)g[v] - lg));
    }
    return t > 0.0 ? t : 0.0; /* rounding can leave -1e-16 */
}

/* Scores one window ids[0..n) with r (and ref, when not NULL) from empty caches. */
static ig_status ppl_window(runner *r, runner *ref, const int32_t *ids, int32_t n, float *lg, float *lr, ppl_acc *a,
                            ig_err *err) {
    int32_t V = r->pkg->desc->vocab;
    kv_seq_free(r->pager, &r->seq);
    memset(&r->seq, 0, sizeof r->seq);
    ig_status st = rt_seq_feed(r->m, r->pager, &r->seq, ids, n, lg, NULL, err);
    if (!st && ref) {
        kv_seq_free(ref->pager, &ref->seq);
        memset(&ref->seq, 0, sizeof ref->seq);
        st = rt_seq_feed(ref->m, ref->pager, &ref->seq, ids, n, lr, NULL, err);
    }
    for (int32_t i = 0; i + 1 < n && !st; i++) {
        const float *g = lg + (size_t)i * V;
        const double lsg = lse_of(g, V);
        a->nll += lsg - (double)g[ids[i + 1]];
        a->n++;
        if (!ref) continue;
        const float *q = lr + (size_t)i * V;
        const double lsq = lse_of(q, V);
        a->ref_nll += lsq - (double)q[ids[i + 1]];
        for (int32_t v = 0; v < V; v++) {
            double d = fabs((double)g[v] - q[v]), m = fabs((double)q[v]);
            a->max_dlogit = d > a->max_dlogit ? d : a->max_dlogit;
            a->max_ref = m > a->max_ref ? m : a->max_ref;
        }
        a->top1 += rt_argmax(g, V) == rt_argmax(q, V);
        a->kl += kl_of(q, lsq, g, lsg, V);
    }
    return st;
}

/* Tokenizes o->file with the package's tokenizer and scores it window by window. */
static ig_status run_ppl(const ppl_opts *o, int verify, ppl_acc *a, ig_err *err) {
    memset(a, 0, sizeof *a);
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    tok_tokenizer *tk = NULL;
    ig_status st = IG_OK;
    if (!o->file == !o->tokens) {
        st = ig_fail(err, IG_ERR_INVALID, "give the text to score as --file TEXT or --tokens IDS (one of them)");
    } else if (o->tokens) {
        int32_t nt = 0;
        st = parse_ids("--tokens", o->tokens, &ids, &nt, err);
        n_ids = (size_t)nt;
    } else {
        st = rt_read_file(o->file, &text, &len, err);
        if (!st) st = tok_load_dir(o->pos[0], &tk, err);
        if (!st) st = tok_encode(tk, text, len, 1, 0, &ids, &n_ids, err);
    }
    if (!st && n_ids < 2) st = ig_fail(err, IG_ERR_INVALID, "%s: fewer than 2 tokens to score", o->file ? o->file : "--tokens");
    int32_t n = (int32_t)(n_ids > INT32_MAX ? INT32_MAX : n_ids);
    if (o->max_tokens && n > o->max_tokens) n = o->max_tokens;
    runner r = {0}, ref = {0};
    float *lg = NULL, *lr = NULL;
    if (!st) {
        int32_t ctx = o->context ? o->context : 512;
        const cli_strs no_tune = {0};
        st = runner_open(&r, o->pos[0], ctx, ctx, &o->t, &no_tune, err);
        if (!st && ctx > r.pkg->desc->max_context) ctx = r.pkg->desc->max_context;
        if (!st && verify) st = runner_open(&ref, o->reference, ctx, ctx, &o->t, &no_tune, err);
        if (!st && verify && ref.pkg->desc->vocab != r.pkg->desc->vocab)
            st = ig_fail(err, IG_ERR_INVALID, "%s has a vocabulary of %d, %s of %d: not the same model", o->reference,
                         ref.pkg->desc->vocab, o->pos[0], r.pkg->desc->vocab);
        size_t V = !st ? (size_t)r.pkg->desc->vocab : 0;
        if (!st && (!(lg = malloc(sizeof(float) * (size_t)ctx * V)) || (verify && !(lr = malloc(sizeof(float) * (size_t)ctx * V)))))
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory for %d x %zu logits", ctx, V);
        for (int32_t i = 0; i + 1 < n && !st; i += ctx)
            st = ppl_window(&r, verify ? &ref : NULL, ids + i, n - i < ctx ? n - i : ctx, lg, lr, a, err);
    }
    free(lg);
    free(lr);
    if (r.pkg) runner_close(&r);
    if (ref.pkg) runner_close(&ref);
    if (tk) tok_free(tk);
    free(ids);
    free(text);
    return st;
}

static int cmd_perplexity(const cli_cmd *c, int argc, char **argv) {
    ppl_opts o = {0};
    const cli_group groups[] = {{NULL, ppl_flags, &o}, {NULL, thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    if (tp_followed(c->name, o.pos[0], &rc)) return rc;
    ig_err err = {{0}};
    ppl_acc a;
    if (run_ppl(&o, 0, &a, &err)) return fail(c->name, &err);
    printf("perplexity: %.4f over %lld tokens\n", exp(a.nll / (double)a.n), (long long)a.n);
    return 0;
}

static int cmd_verify(const cli_cmd *c, int argc, char **argv) {
    ppl_opts o = {.max_ppl_ratio = 1.05f};
    const cli_group groups[] = {{NULL, ppl_flags, &o}, {NULL, verify_flags, &o}, {NULL, thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    if (tp_followed(c->name, o.pos[0], &rc)) return rc;
    ig_err err = {{0}};
    ppl_acc a;
    if (run_ppl(&o, 1, &a, &err)) return fail(c->name, &err);
    double p = exp(a.nll / (double)a.n), pr = exp(a.ref_nll / (double)a.n), ratio = p / pr;
    double dl = a.max_ref > 0 ? a.max_dlogit / a.max_ref : a.max_dlogit, top1 = (double)a.top1 / (double)a.n;
    printf("perplexity: %.4f over %lld tokens\nreference perplexity: %.4f\nperplexity ratio: %.5f (limit %.6g)\n"
           "max |dlogit| / max |logit|: %.4e (%.4g / %.4g)%s\ntop-1 agreement: %.4f (%lld of %lld)\n"
           "mean KL divergence from the reference: %.5f nats per token\n",
           p, (long long)a.n, pr, ratio, o.max_ppl_ratio, dl, a.max_dlogit, a.max_ref, "", top1, (long long)a.top1,
           (long long)a.n, a.kl / (double)a.n);
    int bad = 0;
    if (ratio > o.max_ppl_ratio) bad = fprintf(stderr, "ignis verify: perplexity ratio %.5f exceeds %.5g\n", ratio, o.max_ppl_ratio);
    if (o.max_dlogit > 0 && dl > o.max_dlogit) bad = fprintf(stderr, "ignis verify: max |dlogit| %.4e exceeds %.4g\n", dl, o.max_dlogit);
    if (top1 < o.min_top1) bad = fprintf(stderr, "ignis verify: top-1 agreement %.4f below %.4g\n", top1, o.min_top1);
    if (o.max_kl > 0 && a.kl / (double)a.n > o.max_kl)
        bad = fprintf(stderr, "ignis verify: mean KL divergence %.5f exceeds %.5g\n", a.kl / (double)a.n, o.max_kl);
    return bad ? 1 : 0;
}

/* ---- bench: speed against what this machine can do, measured in the same run */

typedef struct bench_opts {
    const char *pos[1];
    int32_t prompt_len, decode_tokens, max_tokens_per_step;
    cli_strs tune;
    thread_opts t;
} bench_opts;

static const cli_flag bench_flags[] = {
    CLI_I32("--prompt-len", NULL, bench_opts, prompt_len, 1, CLI_NONE, 0, "N", "prompt tokens (random ids) to prefill", NULL),
    CLI_I32("--decode-tokens", NULL, bench_opts, decode_tokens, 1, CLI_NONE, 0, "N", "greedy decode steps after the prompt", NULL),
    CLI_I32("--max-tokens-per-step", NULL, bench_opts, max_tokens_per_step, 1, CLI_NONE, 0, "N",
            "prefill chunk: tokens of one forward step (the workspace is sized for it)", "the prompt, at most 8192"),
    CLI_REP("--tune", NULL, bench_opts, tune, "KEY=VALUE[,...]", "run-time tuning of the package's code (docs/TUNING.md)"),
    CLI_END};

/* Times one prefill of P tokens (*tp) and N greedy decode steps after it (*td), in seconds. */
static ig_status bench_time(runner *r, int P, int N, double *tp, double *td, ig_err *err) {
    const ig_model_desc *d = r->pkg->desc;
    int32_t V = d->vocab;
    int32_t *ids = malloc(sizeof(int32_t) * P);
    float *lg = malloc(sizeof(float) * V);
    if (!ids || !lg) {
        free(ids);
        free(lg);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < P; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ids[i] = (int32_t)(s % (uint64_t)V);
    }
    /* warm-up: one prefill of the timed length and a few decode steps touch every weight page and
     * load every kernel (on GPUs also the GEMM library's kernels for these shapes, which load
     * lazily, and the decode step's CUDA graph) before timing. The sequence's pages for the whole
     * run are reserved first, so every decode step has the same page-table width (as in the
     * engine) and replays one graph. */
    ig_status st = kv_seq_reserve(r->pager, &r->seq, P + N, d->page_size, err);
    if (!st) st = rt_seq_feed(r->m, r->pager, &r->seq, ids, P, NULL, lg, err);
    for (int i = 0; i < 3 && !st; i++) st = rt_seq_feed(r->m, r->pager, &r->seq, ids, 1, NULL, lg, err);
    r->seq.len = 0; /* keep the pages, forget the tokens: the timed run overwrites them */
    *tp = rt_now();
    if (!st) st = rt_seq_feed(r->m, r->pager, &r->seq, ids, P, NULL, lg, err);
    *tp = rt_now() - *tp;
    /* greedy decode; packages that sample on their device pick the token there (one id comes
     * back per step, as in the engine), others copy the logits back for the host argmax */
    int dev_sample = (d->caps & IG_MODEL_CAP_SAMPLE) != 0;
    const ig_fwd_sample greedy = {.on = 1, .temperature = 0.0f, .top_p = 1.0f};
    int32_t next = rt_argmax(lg, V);
    *td = rt_now();
    for (int i = 0; i < N && !st; i++) {
        if (dev_sample) st = rt_seq_feed_sample(r->m, r->pager, &r->seq, &next, 1, &greedy, &next, err);
        else {
            st = rt_seq_feed(r->m, r->pager, &r->seq, &next, 1, NULL, lg, err);
            next = rt_argmax(lg, V);
        }
    }
    *td = rt_now() - *td;
    free(ids);
    free(lg);
    return st;
}

/* The CPU report: the speeds against this machine's measured read bandwidth and peak FLOP/s. */
static void bench_cpu_report(const runner *r, int P, int N, double tp, double td) {
    const ig_model_desc *d = r->pkg->desc;
    size_t bw_bytes = (size_t)1 << 30;
    uint8_t *buf = aligned_alloc(64, bw_bytes);
    double bw = 0;
    if (buf) {
        memset(buf, 1, bw_bytes);
        bw = rt_read_bandwidth(buf, bw_bytes, 5);
        free(buf);
    }
    int bf = d->dtype == IG_DTYPE_BF16;
    uint32_t cpu = rt_cpu_features();
    double peak = 0;
    int amx = bf && (d->cpu_features & IG_CPU_AMX); /* the package's prefill runs on AMX tiles */
    if (amx) peak = rt_peak_flops(RT_PEAK_AMX_BF16, 0.5);
    else if (bf && (cpu & IG_CPU_AVX512BF16)) peak = rt_peak_flops(RT_PEAK_BF16_DOT, 0.5);
    else if (cpu & IG_CPU_AVX512F) peak = rt_peak_flops(RT_PEAK_F32_FMA512, 0.5);
    else if (cpu & IG_CPU_AVX2) peak = rt_peak_flops(RT_PEAK_F32_FMA256, 0.5);

    /* work per token */
    double L = d->n_layers, Hd = d->hidden, q = (double)d->n_heads * d->head_dim, kv = (double)d->n_kv_heads * d->head_dim;
    double mat_params = L * (Hd * (q + 2 * kv) + q * Hd + 3.0 * Hd * d->intermediate);
    double flops_prefill = 2.0 * mat_params * P + L * 2.0 * 2.0 * d->n_heads * d->head_dim * (double)P * P / 2 + 2.0 * Hd * d->vocab;
    uint64_t embed_bytes = 0;
    for (int i = 0; i < d->n_weights; i++)
        if (strstr(d->weights[i].name, "embed") || strstr(d->weights[i].name, "token_embd")) embed_bytes = d->weights[i].nbytes;
    double bytes_tok = (double)r->pkg->weights_bytes - (r->pkg->tie_embeddings ? 0 : (double)embed_bytes);
    /* mixture of experts: a token reads its experts_per_token of each layer's stacked experts */
    const rt_package *pk = r->pkg;
    for (int i = 0; pk->n_experts > 0 && i < d->n_weights; i++)
        if (strstr(d->weights[i].name, ".experts.") || strstr(d->weights[i].name, ".ffn_exps."))
            bytes_tok -= (double)d->weights[i].nbytes * (1.0 - (double)pk->experts_per_token / pk->n_experts);
    printf("threads        %d\n", r->m->ctx.n_threads);
    printf("prefill        %d tokens in %.3f s: %.1f tokens/s, %.1f GFLOP/s", P, tp, P / tp, flops_prefill / tp / 1e9);
    if (peak > 0) printf(" = %.1f%% of measured %s peak %.1f GFLOP/s", 100 * flops_prefill / tp / peak, amx ? "AMX bf16 tile" : bf && (cpu & IG_CPU_AVX512BF16) ? "bf16 dot-product" : (cpu & IG_CPU_AVX512F) ? "f32 FMA (AVX-512)" : "f32 FMA (AVX2)", peak / 1e9);
    printf("\n");
    printf("decode         %d tokens: %.2f ms/token, %.2f tokens/s\n", N, td / N * 1e3, N / td);
    printf("memory         measured read bandwidth %.1f GB/s; decode reads %.1f MB of weights per token%s\n", bw / 1e9,
           bytes_tok / 1e6, pk->n_experts ? " (the selected experts' share of the stacked experts)" : "");
    printf("decode bound   %.2f tokens/s at that bandwidth; decode reaches %.1f%% of it (%.1f GB/s)\n",
           bw / bytes_tok, 100.0 * (bytes_tok / (td / N)) / bw, bytes_tok / (td / N) / 1e9);
}

static ig_status run_bench(const bench_opts *o, ig_err *err) {
    int P = o->prompt_len, N = o->decode_tokens;
    if (o->t.threads > 0) omp_set_num_threads(o->t.threads);
    double t0 = rt_now(), tp = 0, td = 0;
    runner r;
    /* long prompts prefill in chunks: a step's workspace (its logits rows, the staged page tables)
     * grows with its tokens */
    const int chunk = o->max_tokens_per_step > 0 ? o->max_tokens_per_step : P < 8192 ? P : 8192;
    ig_status st = runner_open(&r, o->pos[0], chunk, (int64_t)P + N, &o->t, &o->tune, err);
    double t_load = rt_now() - t0;
    const ig_model_desc *d = st ? NULL : r.pkg->desc;
    if (!st && P + N > d->max_context)
        st = ig_fail(err, IG_ERR_INVALID, "prompt %d + decode %d exceeds the package's context of %d (ignis compile --max-context N sets it)", P, N, d->max_context);
    if (!st) st = bench_time(&r, P, N, &tp, &td, err);
    if (!st) {
        printf("package        %s (%s, %s)\n", o->pos[0], r.pkg->target, r.pkg->dtype);
        if (chunk < P) printf("prefill chunks %d tokens a step\n", chunk);
        printf("load           %.2f s (weights %.1f MB, hashes checked)\n", t_load, r.pkg->weights_bytes / 1e6);
        printf("kv cache: %llu bytes per token (%s, all layers)\n",
               (unsigned long long)(d->kv_page_bytes / (uint64_t)d->page_size), r.pkg->kv_dtype);
    }
    if (!st && d->device != IG_DEVICE_CPU) {
        /* the ceilings of a GPU are measured by scripts/gpu_bench.py, beside a peer engine */
        printf("prefill        %d tokens in %.3f s: %.1f tokens/s\n", P, tp, P / tp);
        printf("decode         %d tokens: %.3f ms/token, %.2f tokens/s\n", N, td / N * 1e3, N / td);
    } else if (!st) {
        bench_cpu_report(&r, P, N, tp, td);
    }
    if (r.pkg) runner_close(&r);
    return st;
}

static int cmd_bench(const cli_cmd *c, int argc, char **argv) {
    bench_opts o = {.prompt_len = 512, .decode_tokens = 32};
    const cli_group groups[] = {{NULL, bench_flags, &o}, {NULL, thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    if (tp_followed(c->name, o.pos[0], &rc)) return rc;
    ig_err err = {{0}};
    return run_bench(&o, &err) ? fail(c->name, &err) : 0;
}

/* ---- generate / chat (through the engine) */

/* Reads the request to its end; prints text as it streams (text mode) or collects ids; *why:
 * the finish reason (NONE when stopped). *interrupt (may be NULL), polled every 100 ms, stops
 * the request when it becomes non-zero (chat's Ctrl-C). */
static ig_status drain(ig_request *r, int print_text, int32_t **ids, int32_t *n, ig_finish_reason *why,
                       volatile sig_atomic_t *interrupt, ig_err *err) {
    int32_t cap = 64;
    *n = 0;
    *why = IG_FINISH_NONE;
    *ids = malloc(sizeof(int32_t) * cap);
    if (!*ids) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    for (;;) {
        ig_output *o;
        ig_status st = ig_request_read(r, interrupt ? 100 : -1, &o, err);
        if (st == IG_ERR_TIMEOUT) {
            if (*interrupt) ig_request_stop(r);
            continue;
        }
        if (st == IG_ERR_CLOSED) return IG_OK;
        if (st) return st;
        if (o->status == IG_REQ_ERROR) {
            st = ig_fail(err, IG_ERR_INVALID, "%s", o->error);
            ig_output_free(o);
            return st;
        }
        if (o->status == IG_REQ_FINISHED) *why = o->finish;
        for (int32_t i = 0; i < o->n_tokens; i++) {
            if (*n == cap) {
                int32_t *t = realloc(*ids, sizeof(int32_t) * (cap *= 2));
                if (!t) {
                    ig_output_free(o);
                    return ig_fail(err, IG_ERR_NOMEM, "out of memory");
                }
                *ids = t;
            }
            (*ids)[(*n)++] = o->tokens[i];
        }
        if (print_text && o->text_len) {
            fwrite(o->text, 1, o->text_len, stdout);
            fflush(stdout);
        }
        if (o->status == IG_REQ_FINISHED && o->finish == IG_FINISH_INCOMPLETE)
            fprintf(stderr, "ignis: warning: max_new_tokens (or the context) ran out inside the constraint: the output is cut\n");
        ig_output_free(o);
        if (interrupt && *interrupt) ig_request_stop(r);
    }
}

/* A request cut short by the model's context (LENGTH before max_new_tokens) or by the KV cache
 * (FINISH_KV): says which on stderr (label: "prompt 2" or NULL). */
static void note_cut_short(const char *cmd, const char *label, ig_finish_reason why, int32_t n_prompt, int32_t n_gen,
                           const ig_gen_config *g, int32_t max_context) {
    if (why != IG_FINISH_KV && (why != IG_FINISH_LENGTH || n_gen >= g->max_new_tokens)) return;
    fprintf(stderr, "ignis %s: note: %s%sstopped after %d of --max-new-tokens %d: ", cmd, label ? label : "",
            label ? ": " : "", n_gen, g->max_new_tokens);
    if (why == IG_FINISH_KV)
        fprintf(stderr, "the KV cache cannot hold a longer sequence (raise --kv-fraction, --kv-pages or --kv-bytes)\n");
    else
        fprintf(stderr, "the model's context of %d tokens is full (%d prompt tokens)\n", max_context, n_prompt);
}

static void print_ids(const int32_t *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

/* Token-id prompts: one from --tokens or one per non-empty line of --tokens-file. */
typedef struct prompt_set {
    int32_t n;
    int32_t **ids;
    int32_t *lens;
} prompt_set;

static void prompts_free(prompt_set *p) {
    for (int32_t i = 0; i < p->n; i++) free(p->ids[i]);
    free(p->ids);
    free(p->lens);
    memset(p, 0, sizeof *p);
}

/* Trims spaces and CRs at both ends of line, in place. */
static char *trim_line(char *line) {
    while (*line == ' ' || *line == '\r') line++;
    size_t L = strlen(line);
    while (L && (line[L - 1] == '\r' || line[L - 1] == ' ')) line[--L] = 0;
    return line;
}

static ig_status prompts_from_file(const char *file, prompt_set *p, ig_err *err) {
    char *text;
    ig_status st = rt_read_file(file, &text, NULL, err);
    if (st) return st;
    int lines = 1;
    for (char *c = text; *c; c++) lines += *c == '\n';
    p->ids = calloc(lines, sizeof *p->ids);
    p->lens = calloc(lines, sizeof *p->lens);
    if (!p->ids || !p->lens) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    int ln = 0;
    char *save = NULL;
    for (char *line = st ? NULL : strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ln++;
        line = trim_line(line);
        if (!*line) continue;
        if ((st = parse_ids("--tokens-file", line, &p->ids[p->n], &p->lens[p->n], err))) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s line %d: %s", file, ln, err->msg);
            snprintf(err->msg, sizeof err->msg, "%s", msg);
            break;
        }
        p->n++;
    }
    free(text);
    return st;
}

static ig_status prompts_load(const char *tokens, const char *file, prompt_set *p, ig_err *err) {
    memset(p, 0, sizeof *p);
    if (file) return prompts_from_file(file, p, err);
    p->ids = malloc(sizeof *p->ids);
    p->lens = malloc(sizeof *p->lens);
    if (!p->ids || !p->lens) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ig_status st = parse_ids("--tokens", tokens, &p->ids[0], &p->lens[0], err);
    if (!st) p->n = 1;
    return st;
}

#define CONSTRAINT_FLAGS(ty_, f_) \
    CLI_STRV("--json-schema", NULL, ty_, f_.json_schema, 0, "FILE", "constrain to a JSON Schema"), \
    CLI_SW("--json", NULL, ty_, f_.json, "constrain to any JSON object"), \
    CLI_STRV("--regex", NULL, ty_, f_.regex, 0, "RE", "constrain to a regular expression (the whole output)"), \
    CLI_STRV("--grammar", NULL, ty_, f_.grammar, 0, "FILE", "constrain to a GBNF grammar (llama.cpp syntax, start rule root)")

typedef struct generate_opts {
    const char *pos[1];
    cli_constraint_opts c;
    const char *tokens, *tokens_file, *prompt, *system;
    int ids, chat;
    sample_opts s;
    engine_opts e;
    thread_opts t;
} generate_opts;

static const cli_flag generate_flags[] = {
    CLI_STRV("--tokens", NULL, generate_opts, tokens, 0, "IDS", "the prompt as comma-separated token ids (1,2,3)"),
    CLI_STRV("--tokens-file", NULL, generate_opts, tokens_file, 0, "FILE",
             "one prompt of token ids per line, all run at once; one output line per prompt, in order"),
    CLI_STRV("--prompt", NULL, generate_opts, prompt, 0, "TEXT", "the prompt as text (needs a tokenizer); streams the text"),
    CLI_SW("--chat", NULL, generate_opts, chat, "with --prompt: the text is a user message, put through the chat template"),
    CLI_STRV("--system", NULL, generate_opts, system, 0, "TEXT", "with --chat: a system message before it"),
    CLI_SW("--ids", NULL, generate_opts, ids, "with --prompt: print the new token ids instead of the text"),
    CONSTRAINT_FLAGS(generate_opts, c),
    CLI_END};

static void add_message(cJSON *msgs, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

/* The token ids of a conversation rendered by the chat template (special tokens parsed, none
 * added: the template writes them). *ids: ig_free. */
static ig_status chat_ids(const ig_tokenizer *t, const cJSON *msgs, int32_t **ids, int32_t *n, ig_err *err) {
    char *json = cJSON_PrintUnformatted(msgs), *text = NULL;
    size_t len = 0;
    if (!json) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    ig_status st = ig_chat_template_apply(t, json, NULL, 1, &text, &len, err);
    if (!st) st = ig_tokenize(t, text, len, 0, 1, ids, n, err);
    free(json);
    ig_free(text);
    return st;
}

/* The ids of --prompt: as ig_request_start_text tokenizes it, or with --chat through the chat
 * template. *ids: ig_free. */
static ig_status prompt_ids(const generate_opts *o, int32_t **ids, int32_t *n, ig_err *err) {
    ig_tokenizer *t;
    ig_status st = ig_tokenizer_open(o->pos[0], &t, err);
    if (st) return st;
    if (o->chat) {
        cJSON *msgs = cJSON_CreateArray();
        if (o->system) add_message(msgs, "system", o->system);
        add_message(msgs, "user", o->prompt);
        st = chat_ids(t, msgs, ids, n, err);
        cJSON_Delete(msgs);
    } else {
        st = ig_tokenize(t, o->prompt, strlen(o->prompt), 1, 1, ids, n, err);
    }
    ig_tokenizer_close(t);
    return st;
}

/* --prompt: streams the text, or prints the ids with --ids. */
static ig_status generate_text(ig_engine *e, const generate_opts *o, const char *name, ig_err *err) {
    if (!ig_engine_has_tokenizer(e))
        return ig_fail(err, IG_ERR_INVALID, "%s has no tokenizer: give the prompt with --tokens", o->pos[0]);
    ig_request *r = NULL;
    int32_t *prompt, n_prompt, *ids = NULL, n = 0;
    ig_finish_reason why;
    ig_status st = prompt_ids(o, &prompt, &n_prompt, err);
    if (st) return st;
    st = ig_request_start(e, prompt, n_prompt, &o->s.g, &r, err);
    if (!st) st = drain(r, !o->ids, &ids, &n, &why, NULL, err);
    if (!st && o->ids) print_ids(ids, n);
    else if (!st) printf("\n");
    if (!st) note_cut_short(name, NULL, why, n_prompt, n, &o->s.g, ig_engine_max_context(e));
    free(ids);
    ig_free(prompt);
    ig_request_release(r);
    return st;
}

/* All prompts run concurrently through the engine; one output line each, in input order (an
 * empty line and a message on stderr for a prompt that failed). 1 if any failed. */
static int generate_batch(ig_engine *e, const prompt_set *p, const ig_gen_config *g, const char *name) {
    ig_request **reqs = calloc(p->n, sizeof *reqs);
    char(*errs)[256] = calloc(p->n, 256);
    ig_err err = {{0}};
    int rc = 0;
    if (!reqs || !errs) {
        free(reqs);
        free(errs);
        fprintf(stderr, "ignis %s: error: out of memory\n", name);
        return 1;
    }
    for (int32_t i = 0; i < p->n; i++)
        if (ig_request_start(e, p->ids[i], p->lens[i], g, &reqs[i], &err)) snprintf(errs[i], 256, "%s", err.msg);
    for (int32_t i = 0; i < p->n; i++) {
        int32_t *ids = NULL, n = 0;
        ig_finish_reason why = IG_FINISH_NONE;
        if (reqs[i] && drain(reqs[i], 0, &ids, &n, &why, NULL, &err)) snprintf(errs[i], 256, "%s", err.msg);
        if (errs[i][0]) {
            fprintf(stderr, "ignis %s: error: prompt %d: %s\n", name, i + 1, errs[i]);
            printf("\n");
            rc = 1;
        } else {
            print_ids(ids, n);
            char label[32];
            snprintf(label, sizeof label, "prompt %d", i + 1);
            note_cut_short(name, p->n > 1 ? label : NULL, why, p->lens[i], n, g, ig_engine_max_context(e));
        }
        free(ids);
        ig_request_release(reqs[i]);
    }
    free(reqs);
    free(errs);
    return rc;
}

static int run_generate(generate_opts *o, const char *name) {
    ig_err err = {{0}};
    if (!!o->tokens + !!o->tokens_file + !!o->prompt != 1) {
        fprintf(stderr, "ignis %s: error: give exactly one of --tokens, --tokens-file, --prompt\n", name);
        return 2;
    }
    if ((o->chat || o->system) && !o->prompt) {
        fprintf(stderr, "ignis %s: error: --chat and --system go with --prompt\n", name);
        return 2;
    }
    if (o->system && !o->chat) {
        fprintf(stderr, "ignis %s: error: --system needs --chat\n", name);
        return 2;
    }
    if (sample_finish(&o->s, name, &err)) {
        fprintf(stderr, "ignis %s: error: %s\n", name, err.msg);
        return 2;
    }
    prompt_set p = {0};
    ig_engine *e = NULL;
    int kind;
    char *ctext = NULL;
    size_t clen;
    ig_status st = cli_constraint_text(&o->c, &kind, &ctext, &clen, &err);
    o->s.g.constraint = kind;
    o->s.g.constraint_text = ctext;
    if (!st) st = o->prompt ? IG_OK : prompts_load(o->tokens, o->tokens_file, &p, &err);
    if (!st) st = open_engine(&o->e, &o->t, o->pos[0], p.n > 1 ? p.n : 0, &e, &err);
    int rc = st ? fail(name, &err) : 0;
    if (!st && o->prompt && generate_text(e, o, name, &err)) rc = fail(name, &err);
    if (!st && !o->prompt) rc = generate_batch(e, &p, &o->s.g, name);
    ig_engine_close(e);
    prompts_free(&p);
    free(ctext);
    return rc;
}

static int cmd_generate(const cli_cmd *c, int argc, char **argv) {
    generate_opts o = {0};
    sample_defaults(&o.s, 128); /* ig_gen_config_default's */
    const cli_group groups[] = {{NULL, generate_flags, &o}, {"sampling", sampling_flags, &o.s},
                                {"engine", engine_flags, &o.e}, {"engine", thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc < 0 && !tp_followed(c->name, o.pos[0], &rc)) rc = run_generate(&o, c->name);
    cli_free(groups);
    return rc;
}

/* Template + bos/eos strings of a tokenizer folder or package; ChatML when it has none. */
static ig_status load_template(const char *dir, ct_template **tmpl, char **bos, char **eos, ig_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    *tmpl = NULL;
    *bos = *eos = NULL;
    ig_status st = IG_OK;
    if (pkgf_exists(path)) st = ct_load_tokenizer_config(path, tmpl, bos, eos, err);
    if (!st && !*tmpl) st = ct_compile(ct_chatml_source(), tmpl, err);
    return st;
}

/* ---- chat: an interactive conversation
 *
 * Lines come from libedit (line editing, history) on a terminal, from plain stdin otherwise;
 * a line may be of any length. Ctrl-C while a reply streams stops that reply (what came of it
 * stays in the conversation); Ctrl-C or Ctrl-D at the prompt ends the chat. When a turn's
 * prompt would leave less than chat_reserve() tokens of the context for the reply, the oldest
 * turns (after the system message) are dropped, with a notice. */

/* Set by the SIGINT handler while chat runs: the one process-wide state a signal can reach. */
static volatile sig_atomic_t chat_sigint;

static void on_sigint(int sig) {
    (void)sig;
    chat_sigint = 1;
}

typedef struct chat_session {
    ig_engine *e;
    ig_tokenizer *t;
    cJSON *msgs;     /* the conversation: [system], user, assistant, ... */
    int tty;
    int32_t context; /* tokens the conversation may take: the model's context or less (--context) */
} chat_session;

static void chat_close(chat_session *s) {
    cJSON_Delete(s->msgs);
    ig_tokenizer_close(s->t);
    ig_engine_close(s->e);
}

static const char *chat_help_text =
    "  /help          this list\n"
    "  /reset         forget the conversation (the system message stays)\n"
    "  /system TEXT   set the system message (empty TEXT removes it)\n"
    "  /history       print the conversation\n"
    "  /quit          end the chat (so do Ctrl-D and Ctrl-C at the prompt)\n"
    "  Ctrl-C while the reply streams stops it; the conversation goes on.\n";

/* Tokens kept free for the reply: --max-new-tokens, at most half the context. */
static int32_t chat_reserve(const chat_session *s, const ig_gen_config *g) {
    int32_t half = s->context / 2;
    return g->max_new_tokens < half ? g->max_new_tokens : half;
}

static int has_system(const cJSON *msgs) {
    const cJSON *m = cJSON_GetArrayItem(msgs, 0);
    const cJSON *r = m ? cJSON_GetObjectItem(m, "role") : NULL;
    return cJSON_IsString(r) && !strcmp(r->valuestring, "system");
}

/* The conversation's prompt ids, dropping the oldest turns while it does not leave room for
 * the reply (the last message, the user's, always stays). *ids: ig_free. */
static ig_status chat_fit(chat_session *s, const ig_gen_config *g, int32_t **ids, int32_t *n, ig_err *err) {
    int32_t room = s->context - chat_reserve(s, g);
    int dropped = 0;
    for (;;) {
        ig_status st = chat_ids(s->t, s->msgs, ids, n, err);
        if (st) return st;
        int first = has_system(s->msgs);
        if (*n <= room) break;
        if (cJSON_GetArraySize(s->msgs) - first <= 1) {
            ig_free(*ids);
            *ids = NULL;
            return ig_fail(err, IG_ERR_INVALID, "the message is %d tokens with the chat template; the context has room for %d "
                           "(%d tokens of %d kept for the reply)", *n, room, chat_reserve(s, g), s->context);
        }
        ig_free(*ids);
        cJSON_DeleteItemFromArray(s->msgs, first);
        dropped++;
    }
    if (dropped) fprintf(stderr, "[context full: dropped the %d oldest message%s]\n", dropped, dropped > 1 ? "s" : "");
    return IG_OK;
}

/* One user turn: fits the conversation into the context, streams the reply and keeps it as
 * text. Ctrl-C stops the reply (kept as far as it came). On failure the user's message goes. */
static ig_status chat_turn(chat_session *s, const char *line, const sample_opts *so, ig_err *err) {
    add_message(s->msgs, "user", line);
    int32_t *ids = NULL, n = 0, *out = NULL, n_out = 0;
    ig_request *r = NULL;
    ig_finish_reason why = IG_FINISH_NONE;
    ig_status st = chat_fit(s, &so->g, &ids, &n, err);
    if (!st && so->verbose) fprintf(stderr, "[%d prompt tokens, %d messages]\n", n, cJSON_GetArraySize(s->msgs));
    chat_sigint = 0;
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    if (!st) st = ig_request_start(s->e, ids, n, &so->g, &r, err);
    if (!st) st = drain(r, 1, &out, &n_out, &why, &chat_sigint, err);
    sigaction(SIGINT, &old, NULL);
    printf("\n");
    if (!st && chat_sigint) fprintf(stderr, "[interrupted]\n");
    chat_sigint = 0;
    char *reply = NULL;
    size_t rl = 0;
    if (!st) st = ig_detokenize(s->t, out, n_out, 1, &reply, &rl, err);
    if (!st) {
        add_message(s->msgs, "assistant", reply);
        note_cut_short("chat", NULL, why, n, n_out, &so->g, ig_engine_max_context(s->e));
    } else {
        cJSON_DeleteItemFromArray(s->msgs, cJSON_GetArraySize(s->msgs) - 1);
    }
    ig_free(reply);
    ig_request_release(r);
    ig_free(ids);
    free(out);
    return st;
}

typedef struct chat_opts {
    const char *pos[1];
    const char *system;
    int32_t context;
    sample_opts s;
    engine_opts e;
    thread_opts t;
} chat_opts;

static const cli_flag chat_flags[] = {
    CLI_STRV("--system", NULL, chat_opts, system, 0, "TEXT", "the system message the conversation starts with"),
    CLI_I32("--context", NULL, chat_opts, context, 2, CLI_NONE, 0, "N",
            "keep the conversation within N tokens (oldest turns dropped beyond)", "the model's context"),
    CLI_END};

static ig_status chat_open(const chat_opts *o, chat_session *s, ig_err *err) {
    memset(s, 0, sizeof *s);
    const char *pkg = o->pos[0];
    ig_status st = open_engine(&o->e, &o->t, pkg, 1, &s->e, err);
    if (!st && !ig_engine_has_tokenizer(s->e)) st = ig_fail(err, IG_ERR_INVALID, "%s has no tokenizer: chat needs one", pkg);
    if (!st) st = ig_tokenizer_open(pkg, &s->t, err);
    if (!st && !(s->msgs = cJSON_CreateArray())) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    if (!st && o->system && *o->system) add_message(s->msgs, "system", o->system);
    s->tty = isatty(0);
    if (!st) {
        int32_t mc = ig_engine_max_context(s->e);
        s->context = o->context > 0 && o->context < mc ? o->context : mc;
    }
    return st;
}

/* The next line without its end of line (malloc'd, any length), or NULL at end of input or
 * on Ctrl-C at the prompt. */
static char *chat_read_line(const chat_session *s) {
    if (s->tty) {
#ifdef IGNIS_HAVE_LIBEDIT
        char *l = readline("> ");
        if (l && *l) add_history(l);
        return chat_sigint ? (free(l), NULL) : l;
#else
        printf("> ");
        fflush(stdout);
#endif
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0 || chat_sigint) {
        free(line);
        return NULL;
    }
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

/* A /command; 1 when the chat should end. */
static int chat_command(chat_session *s, const char *line) {
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 1;
    if (!strcmp(line, "/help")) {
        fputs(chat_help_text, stdout);
    } else if (!strcmp(line, "/reset")) {
        while (cJSON_GetArraySize(s->msgs) > has_system(s->msgs)) cJSON_DeleteItemFromArray(s->msgs, has_system(s->msgs));
        printf("[conversation reset%s]\n", has_system(s->msgs) ? ", system message kept" : "");
    } else if (!strcmp(line, "/system") || !strncmp(line, "/system ", 8)) {
        const char *text = line[7] ? line + 8 : "";
        if (has_system(s->msgs)) cJSON_DeleteItemFromArray(s->msgs, 0);
        if (*text) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "system");
            cJSON_AddStringToObject(m, "content", text);
            cJSON_InsertItemInArray(s->msgs, 0, m);
        }
        printf("[system message %s]\n", *text ? "set" : "removed");
    } else if (!strcmp(line, "/history")) {
        const cJSON *m;
        cJSON_ArrayForEach(m, s->msgs) printf("%s: %s\n", cJSON_GetObjectItem(m, "role")->valuestring,
                                               cJSON_GetObjectItem(m, "content")->valuestring);
    } else {
        printf("unknown command %s; /help lists them\n", line);
    }
    return 0;
}

/* Reads user lines until end of input, Ctrl-C at the prompt or /quit. 1 if a turn failed. */
static int run_chat(chat_opts *o, const char *name) {
    ig_err err = {{0}};
    chat_session s;
    if (sample_finish(&o->s, name, &err)) {
        fprintf(stderr, "ignis %s: error: %s\n", name, err.msg);
        return 2;
    }
    if (chat_open(o, &s, &err)) {
        chat_close(&s);
        return fail(name, &err);
    }
    if (s.tty) printf("[chat with %s: /help lists the commands, Ctrl-D ends]\n", o->pos[0]);
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask); /* no SA_RESTART: Ctrl-C ends a read at the prompt */
    sigaction(SIGINT, &sa, &old);
    int rc = 0;
    char *line;
    chat_sigint = 0;
    while ((line = chat_read_line(&s))) {
        int quit = 0;
        if (line[0] == '/') quit = chat_command(&s, line);
        else if (line[0] && chat_turn(&s, line, &o->s, &err)) rc = fail(name, &err);
        free(line);
        fflush(stdout);
        if (quit) break;
    }
    sigaction(SIGINT, &old, NULL);
    if (s.tty) printf("\n");
    chat_close(&s);
    return rc;
}

static int cmd_chat(const cli_cmd *c, int argc, char **argv) {
    chat_opts o = {0};
    sample_defaults(&o.s, 512);
    const cli_group groups[] = {{NULL, chat_flags, &o}, {"sampling", sampling_flags, &o.s},
                                {"engine", engine_flags, &o.e}, {"engine", thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc < 0 && !tp_followed(c->name, o.pos[0], &rc)) rc = run_chat(&o, c->name);
    cli_free(groups);
    return rc;
}

/* ---- tokenizer tools */

typedef struct tokenize_opts {
    const char *pos[1];
    int special;
} tokenize_opts;

static const cli_flag tokenize_flags[] = {
    CLI_SW("--special", NULL, tokenize_opts, special, "add the tokenizer's special tokens (e.g. BOS), as HF add_special_tokens"),
    CLI_END};

static ig_status read_stdin(char **text, size_t *len, ig_err *err) {
    size_t cap = 1 << 16, got;
    *len = 0;
    *text = malloc(cap);
    while (*text && (got = fread(*text + *len, 1, cap - *len, stdin)) > 0) {
        *len += got;
        if (*len == cap) {
            char *t = realloc(*text, cap *= 2);
            if (!t) free(*text);
            *text = t;
        }
    }
    return *text ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory reading the input");
}

static int cmd_tokenize(const cli_cmd *c, int argc, char **argv) {
    tokenize_opts o = {0};
    const cli_group groups[] = {{NULL, tokenize_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    tok_tokenizer *t;
    if (tok_load_dir(o.pos[0], &t, &err)) return fail(c->name, &err);
    char *text;
    size_t len, n;
    int32_t *ids;
    ig_status st = read_stdin(&text, &len, &err);
    if (!st) st = tok_encode(t, text, len, o.special, 1, &ids, &n, &err);
    if (!st) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        free(ids);
    }
    free(text);
    tok_free(t);
    return st ? fail(c->name, &err) : 0;
}

typedef struct detokenize_opts {
    const char *pos[1];
    const char *ids;
    int skip_special;
} detokenize_opts;

static const cli_flag detokenize_flags[] = {
    CLI_STRV("--ids", NULL, detokenize_opts, ids, CLI_REQUIRED, "IDS", "comma-separated token ids (\"\" for none)"),
    CLI_SW("--skip-special", NULL, detokenize_opts, skip_special, "leave out special added tokens"),
    CLI_END};

static int cmd_detokenize(const cli_cmd *c, int argc, char **argv) {
    detokenize_opts o = {0};
    const cli_group groups[] = {{NULL, detokenize_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    int32_t *ids = NULL, n = 0;
    if (*o.ids && parse_ids("--ids", o.ids, &ids, &n, &err)) return fail(c->name, &err);
    tok_tokenizer *t;
    if (tok_load_dir(o.pos[0], &t, &err)) {
        free(ids);
        return fail(c->name, &err);
    }
    char *text;
    size_t len;
    ig_status st = tok_decode(t, ids, (size_t)n, o.skip_special, &text, &len, &err);
    if (!st) {
        fwrite(text, 1, len, stdout);
        free(text);
    }
    free(ids);
    tok_free(t);
    return st ? fail(c->name, &err) : 0;
}

typedef struct chat_template_opts {
    const char *pos[1];
    const char *messages;
    int add_generation_prompt;
} chat_template_opts;

static const cli_flag chat_template_flags[] = {
    CLI_STRV("--messages", NULL, chat_template_opts, messages, CLI_REQUIRED, "FILE.json",
             "the conversation: a JSON array of {role, content}"),
    CLI_SW("--add-generation-prompt", NULL, chat_template_opts, add_generation_prompt, "end with the assistant turn's opening"),
    CLI_END};

static ig_status render_messages(const chat_template_opts *o, ig_err *err) {
    char *text;
    ig_status st = rt_read_file(o->messages, &text, NULL, err);
    if (st) return st;
    cJSON *msgs = cJSON_Parse(text);
    free(text);
    if (!msgs || !cJSON_IsArray(msgs)) {
        cJSON_Delete(msgs);
        return ig_fail(err, IG_ERR_FORMAT, "%s: not a JSON array of messages", o->messages);
    }
    ct_template *tmpl;
    char *bos, *eos, *out = NULL;
    size_t len = 0;
    st = load_template(o->pos[0], &tmpl, &bos, &eos, err);
    if (!st) {
        ct_vars v = {.bos_token = bos, .eos_token = eos, .add_generation_prompt = o->add_generation_prompt};
        st = ct_render(tmpl, msgs, &v, &out, &len, err);
    }
    if (!st) fwrite(out, 1, len, stdout);
    free(out);
    free(bos);
    free(eos);
    ct_free(tmpl);
    cJSON_Delete(msgs);
    return st;
}

static int cmd_chat_template(const cli_cmd *c, int argc, char **argv) {
    chat_template_opts o = {0};
    const cli_group groups[] = {{NULL, chat_template_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    ig_err err = {{0}};
    return render_messages(&o, &err) ? fail(c->name, &err) : 0;
}

/* ---- serve */

typedef struct serve_opts {
    const char *pos[1];
    srv_options so;
    int32_t max_queue;
    engine_opts e;
    thread_opts t;
} serve_opts;

static const cli_flag serve_flags[] = {
    CLI_STRD("--host", NULL, serve_opts, so.host, 0, "ADDR", "address to listen on", "127.0.0.1"),
    CLI_I32("--port", NULL, serve_opts, so.port, 0, 65535, 0, "PORT", "TCP port (0: any free port, printed at start)", NULL),
    CLI_STRV("--model-name", NULL, serve_opts, so.model_name, 0, "NAME", "the model id clients use (default: the package folder's name)"),
    CLI_STRV("--api-key", NULL, serve_opts, so.api_key, 0, "KEY", "require 'Authorization: Bearer KEY' on /v1, /tokenize and /detokenize"),
    CLI_I32("--max-queue", NULL, serve_opts, max_queue, 1, CLI_NONE, 0, "N", "requests waiting for the engine before new ones get 429", NULL),
    CLI_I64("--max-body-bytes", NULL, serve_opts, so.max_body_bytes, 1, CLI_NONE, 0, "BYTES", "largest request body (larger: 413)", NULL),
    CLI_I32("--request-timeout", NULL, serve_opts, so.request_timeout_s, 1, 86400, 0, "S",
            "a request must arrive whole within S seconds (408); idle connections close after S", NULL),
    CLI_I32("--shutdown-timeout", NULL, serve_opts, so.shutdown_timeout_s, 0, 86400, 0, "S",
            "on SIGTERM/SIGINT, requests in flight get S seconds to finish", NULL),
    CLI_I32("--max-connections", NULL, serve_opts, so.max_connections, 1, 1000000, 0, "N", "open connections at most", NULL),
    CLI_I32("--max-n", NULL, serve_opts, so.max_n, 1, 4096, 0, "N", "most choices (n times prompts) per request", NULL),
    CLI_END};

static void serve_ready(void *user, const char *host, int port) {
    printf("ignis serve: listening on http://%s:%d (model %s)\n", host, port, (const char *)user);
    fflush(stdout);
}

static int run_serve(serve_opts *o, const char *name) {
    ig_err err = {{0}};
    ig_engine *e = NULL;
    srv_block_signals(); /* before the engine's threads exist, so they inherit the mask */
    o->e.max_waiting = o->max_queue;
    if (open_engine(&o->e, &o->t, o->pos[0], 0, &e, &err)) return fail(name, &err);
    const char *model = o->so.model_name ? o->so.model_name : o->pos[0];
    o->so.log = stderr;
    o->so.on_ready = serve_ready;
    o->so.on_ready_user = (void *)model;
    ig_status st = srv_run(e, o->pos[0], &o->so, &err);
    ig_engine_close(e);
    return st ? fail(name, &err) : 0;
}

static int cmd_serve(const cli_cmd *c, int argc, char **argv) {
    serve_opts o = {0};
    srv_options_default(&o.so);
    o.max_queue = 1024;
    const cli_group groups[] = {{NULL, serve_flags, &o}, {"engine", engine_flags, &o.e}, {"engine", thread_flags, &o.t}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc < 0 && !tp_followed(c->name, o.pos[0], &rc)) rc = run_serve(&o, c->name);
    cli_free(groups);
    return rc;
}

static int cmd_version(const cli_cmd *c, int argc, char **argv) {
    const cli_group groups[] = {{0}};
    int rc = parse_args(c, groups, argc, argv, NULL);
    if (rc >= 0) return rc;
    printf("ignis %s\n", IGNIS_VERSION);
    return 0;
}

/* ---- guided decoding tools (tools/cli_grammar.c) */

typedef struct grammar_check_opts {
    const char *pos[1];
    cli_constraint_opts c;
    const char *instance, *batch;
} grammar_check_opts;

static const cli_flag grammar_check_flags[] = {
    CONSTRAINT_FLAGS(grammar_check_opts, c),
    CLI_STRV("--instance", NULL, grammar_check_opts, instance, 0, "FILE", "the text to check, token by token"),
    CLI_STRV("--batch", NULL, grammar_check_opts, batch, 0, "FILE.jsonl",
             "check many: lines {name, schema, tests: [{text}]}; prints one JSON result line each"),
    CLI_END};

static int cmd_grammar_check(const cli_cmd *c, int argc, char **argv) {
    grammar_check_opts o = {0};
    const cli_group groups[] = {{NULL, grammar_check_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    if (o.batch) return cli_grammar_batch(o.pos[0], o.batch);
    if (!o.instance) {
        fprintf(stderr, "ignis %s: error: --instance FILE (or --batch FILE) is required\n", c->name);
        return 2;
    }
    return cli_grammar_check(o.pos[0], &o.c, o.instance);
}

typedef struct bench_grammar_opts {
    const char *pos[1];
    const char *schemas;
    int verbose;
} bench_grammar_opts;

static const cli_flag bench_grammar_flags[] = {
    CLI_STRV("--schemas", NULL, bench_grammar_opts, schemas, CLI_REQUIRED, "FILE.jsonl",
             "lines {name, schema, tests: [{valid, data or text}]}: compile each schema, walk its valid instances (text as given, data as json.dumps writes it)"),
    CLI_SW("--verbose", NULL, bench_grammar_opts, verbose, "name each unsupported schema and rejected instance"),
    CLI_END};

static int cmd_bench_grammar(const cli_cmd *c, int argc, char **argv) {
    bench_grammar_opts o = {0};
    const cli_group groups[] = {{NULL, bench_grammar_flags, &o}, {0}};
    int rc = parse_args(c, groups, argc, argv, o.pos);
    if (rc >= 0) return rc;
    return cli_bench_grammar(o.pos[0], o.schemas, o.verbose);
}

/* ---- the commands */

typedef struct command {
    cli_cmd cli;
    int (*run)(const cli_cmd *c, int argc, char **argv);
} command;

static const command commands[] = {
    {{"compile", "INPUT", "-o PKG [options]", "compile an HF folder, a GGUF file or an .igraph into a package", 1, 1}, cmd_compile},
    {{"generate", "PKG", "(--tokens IDS | --tokens-file FILE | --prompt TEXT) [options]",
      "generate from prompts: prints the new ids (one line per prompt) or streams the text of --prompt", 1, 1}, cmd_generate},
    {{"chat", "PKG", "[options] < turns", "interactive chat with the model's chat template (/help, /reset, /system, /quit)", 1, 1}, cmd_chat},
    {{"logits", "PKG", "--tokens IDS --out FILE.npy [options]", "teacher-forced logits [n_tokens, vocab] into a .npy file", 1, 1},
     cmd_logits},
    {{"perplexity", "PKG", "--file TEXT | --tokens IDS [options]", "perplexity of a package on a text file", 1, 1}, cmd_perplexity},
    {{"verify", "PKG", "--reference PKG2 --file TEXT | --tokens IDS [options]",
      "compare a package with a reference on a text (perplexity ratio, logit error, top-1); nonzero past the limits", 1, 1},
     cmd_verify},
    {{"bench", "PKG", "[options]", "prefill and decode speed, against what this machine measures it can do", 1, 1}, cmd_bench},
    {{"bundle", "PKG", "-o FILE [--runtime DIR]",
      "one self-contained executable of a CPU package: FILE generate|chat|serve|bench|logits ... runs it", 1, 1}, cmd_bundle},
    {{"import", "INPUT", "-o FILE", "import an HF folder or a GGUF file into an ignis graph (.igraph)", 1, 1}, cmd_import},
    {{"inspect", "INPUT|PKG", "[--passes]", "print a graph (of an HF folder, GGUF file or .igraph) or a package's manifest", 1, 1},
     cmd_inspect},
    {{"tokenize", "DIR|PKG", "[--special] < text", "print the token ids of the text on stdin", 1, 1}, cmd_tokenize},
    {{"detokenize", "DIR|PKG", "--ids IDS [--skip-special]", "write the text of token ids", 1, 1}, cmd_detokenize},
    {{"chat-template", "DIR|PKG", "--messages FILE.json [--add-generation-prompt]", "write the prompt the chat template renders",
      1, 1}, cmd_chat_template},
    {{"serve", "PKG", "[--host ADDR] [--port N] [--model-name NAME] [--api-key KEY] [--max-queue N] [options]",
      "an OpenAI-compatible HTTP server (chat, completions, models, tokenize, metrics)", 1, 1}, cmd_serve},
    {{"grammar-check", "DIR|PKG", "(--json-schema FILE | --json | --regex RE | --grammar FILE) --instance FILE",
      "check a text against a constraint's token masks: exit 0 accepted, 1 rejected, 3 unsupported", 1, 1}, cmd_grammar_check},
    {{"bench-grammar", "DIR|PKG", "--schemas FILE.jsonl", "guided decoding speed: time per mask and compile time over schemas", 1, 1},
     cmd_bench_grammar},
    {{"version", "", "", "print the version", 0, 0}, cmd_version},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static const command *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].cli.name, name)) return &commands[i];
    return NULL;
}

static void list_commands(FILE *out) {
    fprintf(out, "usage: ignis COMMAND [ARGS] [options]   (flags may come before or after the arguments)\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-14s %s\n", commands[i].cli.name, commands[i].cli.summary);
    fprintf(out, "  %-14s %s\n", "help", "list the commands, or with a command its flags");
    fprintf(out, "\n'ignis help COMMAND' or 'ignis COMMAND --help' lists a command's flags.\n");
}

static int unknown_command(const char *name) {
    fprintf(stderr, "ignis: error: unknown command '%s' (see 'ignis help')\n", name);
    return 2;
}

/* `ignis help [COMMAND]` */
static int help(int argc, char **argv) {
    if (argc == 0) {
        list_commands(stdout);
        return 0;
    }
    const command *c = find_command(argv[0]);
    if (!c) return unknown_command(argv[0]);
    if (argc > 1) {
        fprintf(stderr, "ignis help: error: unexpected argument '%s' (help takes one command)\n", argv[1]);
        return 2;
    }
    char flag[] = "--help", *hv[] = {flag, NULL};
    return c->run(&c->cli, 1, hv);
}

/* No arguments: the command list on stderr and status 2, a usage error (git says 1). */
int ignis_cli_main(int argc, char **argv) {
    if (argc < 2) {
        list_commands(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) return help(argc - 2, argv + 2);
    if (!strcmp(name, "--version")) name = "version";
    const command *c = find_command(name);
    if (!c) return unknown_command(name);
    return c->run(&c->cli, argc - 2, argv + 2);
}
