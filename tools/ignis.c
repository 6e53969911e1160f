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

#include <cjson/cJSON.h>

#include "chat_template.h"
#include "driver.h"
#include "ignis.h"
#include "tokenizer.h"
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
            "          [--dtype f32|bf16|f16 (CUDA)] [--page-size N] [--dump-graph FILE]\n"
            "  logits  PKG --tokens 1,2,3 --out FILE.npy     teacher-forced logits [n_tokens, vocab]\n"
            "          [--step]                              one token per forward step (the decode path)\n"
            "  generate PKG (--tokens 1,2,3 | --tokens-file FILE | --prompt TEXT [--ids]) [--max-new-tokens N]\n"
            "          [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
            "          [--presence-penalty P] [--frequency-penalty F] [--seed S] [--stop TEXT]... [--ignore-eos]\n"
            "          prints the new ids (one line per prompt, in order) or streams the text of --prompt\n"
            "  chat    PKG [--system TEXT] [sampling flags]  interactive chat with the model's chat template\n"
            "  tokenize DIR|PKG [--special] < text           prints token ids\n"
            "  detokenize DIR|PKG --ids 1,2,3 [--skip-special]   writes the decoded text\n"
            "  chat-template DIR|PKG --messages FILE.json [--add-generation-prompt]   writes the rendered prompt\n"
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
        if (!lg) st = ig_fail(&err, IG_ERR_NOMEM, "out of memory");
        else if (opt(argc, argv, "--step", 0)) /* decode-sized steps: what generation runs after the prompt */
            for (int32_t i = 0; i < n && !st; i++) st = rt_seq_feed(r.m, r.pager, &r.seq, ids + i, 1, lg + (size_t)i * V, NULL, &err);
        else
            st = rt_seq_feed(r.m, r.pager, &r.seq, ids, n, lg, NULL, &err);
        int64_t shape[2] = {n, V};
        if (!st) st = rt_write_npy_f32(out, lg, 2, shape, &err);
    }
    free(lg);
    free(ids);
    if (r.pkg) runner_close(&r);
    return st ? fail("logits", &err) : 0;
}

/* ---- generate / chat / tokenizer tools (through the engine) */

static const char *const gen_valued[] = {"--tokens", "--tokens-file", "--prompt", "--max-new-tokens", "--min-new-tokens",
                                         "--temperature", "--top-k", "--top-p", "--min-p", "--repetition-penalty",
                                         "--presence-penalty", "--frequency-penalty", "--seed", "--stop", "--threads",
                                         "--max-seqs", "--max-tokens-per-step", "--kv-pages", "--top-logprobs", NULL};

/* Sampling flags → generation config; errors for values that do not parse. */
/* The sampling / stopping flags into g; max_new is the command's default for --max-new-tokens. */
static int parse_gen(int argc, char **argv, int32_t max_new, ig_gen_config *g, const char **stops, int32_t *n_stops,
                     ig_err *err) {
    ig_gen_config_default(g);
    g->max_new_tokens = max_new;
    struct {
        const char *flag;
        float *f;
        int32_t *i;
    } nums[] = {{"--temperature", &g->temperature, NULL},       {"--top-p", &g->top_p, NULL},
                {"--min-p", &g->min_p, NULL},                   {"--repetition-penalty", &g->repetition_penalty, NULL},
                {"--presence-penalty", &g->presence_penalty, NULL}, {"--frequency-penalty", &g->frequency_penalty, NULL},
                {"--top-k", NULL, &g->top_k},                   {"--max-new-tokens", NULL, &g->max_new_tokens},
                {"--min-new-tokens", NULL, &g->min_new_tokens}, {"--top-logprobs", NULL, &g->top_logprobs}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        const char *v = opt(argc, argv, nums[k].flag, 1);
        if (!v) continue;
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end) {
            ig_fail(err, IG_ERR_INVALID, "%s: '%s' is not a number", nums[k].flag, v);
            return -1;
        }
        if (nums[k].f) *nums[k].f = (float)x;
        else *nums[k].i = (int32_t)x;
    }
    const char *seed = opt(argc, argv, "--seed", 1);
    if (seed) g->seed = strtoull(seed, NULL, 0);
    g->ignore_eos = opt(argc, argv, "--ignore-eos", 0) != NULL;
    *n_stops = 0;
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--stop") && *n_stops < 16) stops[(*n_stops)++] = argv[i + 1];
    g->stop_strings = stops;
    g->n_stop_strings = *n_stops;
    return 0;
}

static ig_status open_engine(int argc, char **argv, const char *pkg, int max_seqs, ig_engine **e, ig_err *err) {
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.n_threads = threads_opt(argc, argv);
    const char *v;
    if ((v = opt(argc, argv, "--max-seqs", 1))) max_seqs = atoi(v);
    if (max_seqs > 0) cfg.max_seqs = max_seqs;
    if ((v = opt(argc, argv, "--max-tokens-per-step", 1))) cfg.max_tokens_per_step = atoi(v);
    if (cfg.max_tokens_per_step < cfg.max_seqs) cfg.max_tokens_per_step = cfg.max_seqs;
    if ((v = opt(argc, argv, "--kv-pages", 1))) cfg.kv_pages = atoi(v);
    return ig_engine_open(pkg, &cfg, e, err);
}

/* Reads the request to its end; prints text as it streams (text mode) or collects ids. */
static ig_status drain(ig_request *r, int print_text, int32_t **ids, int32_t *n, ig_err *err) {
    int32_t cap = 64;
    *n = 0;
    *ids = malloc(sizeof(int32_t) * cap);
    for (;;) {
        ig_output *o;
        ig_status st = ig_request_read(r, -1, &o, err);
        if (st == IG_ERR_CLOSED) return IG_OK;
        if (st) return st;
        if (o->status == IG_REQ_ERROR) {
            st = ig_fail(err, IG_ERR_INVALID, "%s", o->error);
            ig_output_free(o);
            return st;
        }
        for (int32_t i = 0; i < o->n_tokens; i++) {
            if (*n == cap) *ids = realloc(*ids, sizeof(int32_t) * (cap *= 2));
            (*ids)[(*n)++] = o->tokens[i];
        }
        if (print_text && o->text_len) {
            fwrite(o->text, 1, o->text_len, stdout);
            fflush(stdout);
        }
        ig_output_free(o);
    }
}

static void print_ids(const int32_t *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

static int cmd_generate(int argc, char **argv) {
    const char *pkg = positional(argc, argv, gen_valued);
    if (!pkg) return usage();
    ig_err err = {{0}};
    ig_gen_config g;
    const char *stops[16];
    int32_t n_stops;
    if (parse_gen(argc, argv, 16, &g, stops, &n_stops, &err)) return fail("generate", &err);
    const char *tokens = opt(argc, argv, "--tokens", 1), *file = opt(argc, argv, "--tokens-file", 1),
               *prompt = opt(argc, argv, "--prompt", 1);
    if (!!tokens + !!file + !!prompt != 1) {
        snprintf(err.msg, sizeof err.msg, "give exactly one of --tokens, --tokens-file, --prompt");
        return fail("generate", &err);
    }
    /* the prompts */
    int32_t n_prompts = 0, *lens = NULL;
    int32_t **prompts = NULL;
    if (tokens) {
        prompts = malloc(sizeof *prompts);
        lens = malloc(sizeof *lens);
        if (parse_ids(tokens, &prompts[0], &lens[0], &err)) goto fail_prompts;
        n_prompts = 1;
    } else if (file) {
        char *text;
        if (rt_read_file(file, &text, NULL, &err)) goto fail_prompts;
        int lines = 1;
        for (char *p = text; *p; p++) lines += *p == '\n';
        prompts = calloc(lines, sizeof *prompts);
        lens = calloc(lines, sizeof *lens);
        int ln = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            ln++;
            while (*line == ' ' || *line == '\r') line++;
            size_t L = strlen(line);
            while (L && (line[L - 1] == '\r' || line[L - 1] == ' ')) line[--L] = 0;
            if (!L) continue;
            if (parse_ids(line, &prompts[n_prompts], &lens[n_prompts], &err)) {
                char msg[sizeof err.msg];
                snprintf(msg, sizeof msg, "%s line %d: %s", file, ln, err.msg);
                snprintf(err.msg, sizeof err.msg, "%s", msg);
                free(text);
                goto fail_prompts;
            }
            n_prompts++;
        }
        free(text);
    }
    ig_engine *e;
    if (open_engine(argc, argv, pkg, n_prompts > 1 ? n_prompts : 0, &e, &err)) goto fail_prompts;
    int rc = 0;
    if (prompt) {
        ig_request *r;
        int32_t *ids, n;
        ig_status st = ig_request_start_text(e, prompt, &g, &r, &err);
        if (!st) {
            st = drain(r, !opt(argc, argv, "--ids", 0), &ids, &n, &err);
            if (opt(argc, argv, "--ids", 0)) print_ids(ids, n);
            else printf("\n");
            free(ids);
            ig_request_release(r);
        }
        if (st) rc = fail("generate", &err);
    } else {
        /* all prompts run concurrently through the engine; outputs in input order */
        ig_request **reqs = calloc(n_prompts, sizeof *reqs);
        char (*errs)[256] = calloc(n_prompts, 256);
        for (int32_t i = 0; i < n_prompts; i++)
            if (ig_request_start(e, prompts[i], lens[i], &g, &reqs[i], &err)) snprintf(errs[i], 256, "%s", err.msg);
        for (int32_t i = 0; i < n_prompts; i++) {
            int32_t *ids = NULL, n = 0;
            if (reqs[i] && drain(reqs[i], 0, &ids, &n, &err)) snprintf(errs[i], 256, "%s", err.msg);
            if (errs[i][0]) {
                fprintf(stderr, "ignis generate: error: prompt %d: %s\n", i + 1, errs[i]);
                printf("\n");
                rc = 1;
            } else {
                print_ids(ids, n);
            }
            free(ids);
            ig_request_release(reqs[i]);
        }
        free(reqs);
        free(errs);
    }
    ig_engine_close(e);
    for (int32_t i = 0; i < n_prompts; i++) free(prompts[i]);
    free(prompts);
    free(lens);
    return rc;
fail_prompts:
    for (int32_t i = 0; i < n_prompts; i++) free(prompts[i]);
    free(prompts);
    free(lens);
    return fail("generate", &err);
}

static int load_tok(const char *dir, tok_tokenizer **t, ig_err *err) {
    return tok_load_dir(dir, t, err) != IG_OK;
}

static int cmd_tokenize(int argc, char **argv) {
    static const char *const valued[] = {NULL};
    const char *dir = positional(argc, argv, valued);
    if (!dir) return usage();
    ig_err err = {{0}};
    tok_tokenizer *t;
    if (load_tok(dir, &t, &err)) return fail("tokenize", &err);
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while ((got = fread(text + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) text = realloc(text, cap *= 2);
    }
    int32_t *ids;
    size_t n;
    ig_status st = tok_encode(t, text, len, opt(argc, argv, "--special", 0) != NULL, 1, &ids, &n, &err);
    if (!st) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        free(ids);
    }
    free(text);
    tok_free(t);
    return st ? fail("tokenize", &err) : 0;
}

static int cmd_detokenize(int argc, char **argv) {
    static const char *const valued[] = {"--ids", NULL};
    const char *dir = positional(argc, argv, valued);
    if (!dir) return usage();
    ig_err err = {{0}};
    int32_t *ids, n;
    const char *list = opt(argc, argv, "--ids", 1);
    if (list && !*list) {
        n = 0;
        ids = NULL;
    } else if (parse_ids(list, &ids, &n, &err)) {
        return fail("detokenize", &err);
    }
    tok_tokenizer *t;
    if (load_tok(dir, &t, &err)) return fail("detokenize", &err);
    char *text;
    size_t len;
    ig_status st = tok_decode(t, ids, (size_t)n, opt(argc, argv, "--skip-special", 0) != NULL, &text, &len, &err);
    if (!st) {
        fwrite(text, 1, len, stdout);
        free(text);
    }
    free(ids);
    tok_free(t);
    return st ? fail("detokenize", &err) : 0;
}

/* Template + bos/eos strings of a tokenizer folder or package; ChatML when it has none. */
static ig_status load_template(const char *dir, ct_template **tmpl, char **bos, char **eos, ig_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    *tmpl = NULL;
    *bos = *eos = NULL;
    ig_status st = IG_OK;
    if (access(path, R_OK) == 0) st = ct_load_tokenizer_config(path, tmpl, bos, eos, err);
    if (!st && !*tmpl) st = ct_compile(ct_chatml_source(), tmpl, err);
    return st;
}

static int cmd_chat_template(int argc, char **argv) {
    static const char *const valued[] = {"--messages", NULL};
    const char *dir = positional(argc, argv, valued), *mfile = opt(argc, argv, "--messages", 1);
    if (!dir || !mfile) return usage();
    ig_err err = {{0}};
    char *text;
    if (rt_read_file(mfile, &text, NULL, &err)) return fail("chat-template", &err);
    cJSON *msgs = cJSON_Parse(text);
    free(text);
    if (!msgs || !cJSON_IsArray(msgs)) {
        snprintf(err.msg, sizeof err.msg, "%s: not a JSON array of messages", mfile);
        cJSON_Delete(msgs);
        return fail("chat-template", &err);
    }
    ct_template *tmpl;
    char *bos, *eos, *out = NULL;
    size_t len = 0;
    ig_status st = load_template(dir, &tmpl, &bos, &eos, &err);
    if (!st) {
        ct_vars v = {.bos_token = bos, .eos_token = eos, .add_generation_prompt = opt(argc, argv, "--add-generation-prompt", 0) != NULL};
        st = ct_render(tmpl, msgs, &v, &out, &len, &err);
    }
    if (!st) fwrite(out, 1, len, stdout);
    free(out);
    free(bos);
    free(eos);
    ct_free(tmpl);
    cJSON_Delete(msgs);
    return st ? fail("chat-template", &err) : 0;
}

/* Interactive chat: keeps the conversation, renders it with the model's chat template, streams
 * the reply. /reset starts over, /quit (or end of input) leaves. */
static int cmd_chat(int argc, char **argv) {
    const char *pkg = positional(argc, argv, gen_valued);
    if (!pkg) return usage();
    ig_err err = {{0}};
    ig_gen_config g;
    const char *stops[16];
    int32_t n_stops;
    if (parse_gen(argc, argv, 512, &g, stops, &n_stops, &err)) return fail("chat", &err);
    ig_engine *e;
    if (open_engine(argc, argv, pkg, 1, &e, &err)) return fail("chat", &err);
    tok_tokenizer *t = NULL;
    ct_template *tmpl = NULL;
    char *bos = NULL, *eos = NULL;
    if (!ig_engine_has_tokenizer(e)) {
        snprintf(err.msg, sizeof err.msg, "%s has no tokenizer: chat needs one", pkg);
        ig_engine_close(e);
        return fail("chat", &err);
    }
    if (load_tok(pkg, &t, &err) || load_template(pkg, &tmpl, &bos, &eos, &err)) {
        ig_engine_close(e);
        return fail("chat", &err);
    }
    cJSON *msgs = cJSON_CreateArray();
    const char *sys_prompt = opt(argc, argv, "--system", 1);
    if (sys_prompt) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", sys_prompt);
        cJSON_AddItemToArray(msgs, m);
    }
    int tty = isatty(0);
    char line[16384];
    int rc = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        if (!fgets(line, sizeof line, stdin)) break;
        size_t L = strlen(line);
        while (L && (line[L - 1] == '\n' || line[L - 1] == '\r')) line[--L] = 0;
        if (!L) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(msgs);
            msgs = cJSON_CreateArray();
            continue;
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", line);
        cJSON_AddItemToArray(msgs, m);
        char *prompt = NULL;
        size_t plen = 0;
        int32_t *ids = NULL, *out = NULL, n_out = 0;
        size_t n = 0;
        ct_vars v = {.bos_token = bos, .eos_token = eos, .add_generation_prompt = 1};
        ig_status st = ct_render(tmpl, msgs, &v, &prompt, &plen, &err);
        if (!st) st = tok_encode(t, prompt, plen, 0, 1, &ids, &n, &err);
        ig_request *r = NULL;
        if (!st) st = ig_request_start(e, ids, (int32_t)n, &g, &r, &err);
        if (!st) st = drain(r, 1, &out, &n_out, &err);
        printf("\n");
        if (!st) {
            char *reply;
            size_t rl;
            /* the conversation keeps the reply as text, without the end-of-turn token */
            if (tok_decode(t, out, (size_t)n_out, 1, &reply, &rl, &err) == IG_OK) {
                cJSON *a = cJSON_CreateObject();
                cJSON_AddStringToObject(a, "role", "assistant");
                cJSON_AddStringToObject(a, "content", reply);
                cJSON_AddItemToArray(msgs, a);
                free(reply);
            }
        } else {
            fprintf(stderr, "ignis chat: error: %s\n", err.msg);
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
            rc = 1;
        }
        ig_request_release(r);
        free(prompt);
        free(ids);
        free(out);
    }
    cJSON_Delete(msgs);
    free(bos);
    free(eos);
    ct_free(tmpl);
    tok_free(t);
    ig_engine_close(e);
    return rc;
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
    /* warm-up: one prefill of the timed length and a few decode steps touch every weight page and
     * load every kernel (on GPUs also the GEMM library's kernels for these shapes, which load
     * lazily, and the decode step's CUDA graph) before timing. The sequence's pages for the whole
     * run are reserved first, so every decode step has the same page-table width (as in the
     * engine) and replays one graph. */
    st = kv_seq_reserve(r.pager, &r.seq, P + N, d->page_size, &err);
    if (!st) st = rt_seq_feed(r.m, r.pager, &r.seq, ids, P, NULL, lg, &err);
    for (int i = 0; i < 3 && !st; i++) st = rt_seq_feed(r.m, r.pager, &r.seq, ids, 1, NULL, lg, &err);
    r.seq.len = 0; /* keep the pages, forget the tokens: the timed run overwrites them */
    double tp = rt_now();
    if (!st) st = rt_seq_feed(r.m, r.pager, &r.seq, ids, P, NULL, lg, &err);
    tp = rt_now() - tp;
    /* greedy decode; packages that sample on their device pick the token there (one id comes
     * back per step, as in the engine), others copy the logits back for the host argmax */
    int dev_sample = (d->caps & IG_MODEL_CAP_SAMPLE) != 0;
    const ig_fwd_sample greedy = {.on = 1, .temperature = 0.0f, .top_p = 1.0f};
    int32_t next = rt_argmax(lg, V);
    double td = rt_now();
    for (int i = 0; i < N && !st; i++) {
        if (dev_sample) st = rt_seq_feed_sample(r.m, r.pager, &r.seq, &next, 1, &greedy, &next, &err);
        else {
            st = rt_seq_feed(r.m, r.pager, &r.seq, &next, 1, NULL, lg, &err);
            next = rt_argmax(lg, V);
        }
    }
    td = rt_now() - td;
    if (st) return fail("bench", &err);

    printf("package        %s (%s, %s)\n", pkg, r.pkg->target, r.pkg->dtype);
    printf("load           %.2f s (weights %.1f MB, hashes checked)\n", t_load, r.pkg->weights_bytes / 1e6);
    if (d->device != IG_DEVICE_CPU) {
        /* the ceilings of a GPU are measured by scripts/gpu_bench.py, beside a peer engine */
        printf("prefill        %d tokens in %.3f s: %.1f tokens/s\n", P, tp, P / tp);
        printf("decode         %d tokens: %.3f ms/token, %.2f tokens/s\n", N, td / N * 1e3, N / td);
        free(ids);
        free(lg);
        runner_close(&r);
        return 0;
    }
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
    printf("threads        %d\n", r.m->ctx.n_threads);
    printf("prefill        %d tokens in %.3f s: %.1f tokens/s, %.1f GFLOP/s", P, tp, P / tp, flops_prefill / tp / 1e9);
    if (peak > 0) printf(" = %.1f%% of measured %s peak %.1f GFLOP/s", 100 * flops_prefill / tp / peak, bf && (cpu & IG_CPU_AVX512BF16) ? "bf16 dot-product" : (cpu & IG_CPU_AVX512F) ? "f32 FMA (AVX-512)" : "f32 FMA (AVX2)", peak / 1e9);
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
    if (!strcmp(cmd, "chat")) return cmd_chat(ac, av);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(ac, av);
    if (!strcmp(cmd, "detokenize")) return cmd_detokenize(ac, av);
    if (!strcmp(cmd, "chat-template")) return cmd_chat_template(ac, av);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("ignis %s\n", IGNIS_VERSION);
        return 0;
    }
    fprintf(stderr, "ignis: unknown command '%s'\n", cmd);
    return usage();
}
