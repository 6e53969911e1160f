/* test_kv_pool.c — the KV pool's default size (ig_engine_config.kv_fraction): with kv_pages and
 * kv_bytes 0 a CPU engine holds max_seqs full contexts when the RAM allows it, a small fraction
 * caps the pool at that share of the available RAM, explicit sizes still win, an out-of-range
 * fraction is an error naming it, and a request of the model's whole context runs in a default
 * engine (it did not: the old default of 512 MiB worth held less than some models' context).
 * KV formats (issue 17): at the same byte budget and at the same RAM fraction, a head_dim-64
 * model with int8 or fp8 KV holds >= 1.9x and with uint4 KV >= 3.5x the tokens of bf16 KV, and a whole
 * context runs in a default engine of each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "ignis.h"

#include "check.h"

static unsigned long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb << 10;
}

/* Opens pkg with cfg, returns its KV page count (-1: the open failed, message in err). */
static int32_t pool_pages(const char *pkg, const ig_engine_config *cfg, ig_err *err) {
    ig_engine *e;
    if (ig_engine_open(pkg, cfg, &e, err)) return -1;
    ig_engine_stats s;
    ig_engine_get_stats(e, &s);
    ig_engine_close(e);
    return s.kv_pages_total;
}

/* A greedy request of n prompt tokens and `gen` new ones must finish with gen tokens. */
static void whole_context(const char *pkg, int32_t n, int32_t gen) {
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.max_seqs = 1;
    ig_engine *e;
    ig_err err = {{0}};
    if (ig_engine_open(pkg, &cfg, &e, &err)) {
        CHECK(0, "open: %s", err.msg);
        return;
    }
    int32_t *ids = malloc(sizeof(int32_t) * n);
    for (int32_t i = 0; i < n; i++) ids[i] = 1 + (i * 7) % 300; /* inside every fixture's vocabulary */
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = gen;
    g.ignore_eos = 1;
    ig_request *r;
    if (ig_request_start(e, ids, n, &g, &r, &err)) {
        CHECK(0, "start of a %d-token prompt in a default engine: %s", n, err.msg);
    } else {
        int got = 0;
        ig_req_status st = IG_REQ_QUEUED;
        ig_output *o;
        while (ig_request_read(r, -1, &o, &err) == IG_OK) {
            got += o->n_tokens;
            st = o->status;
            ig_output_free(o);
        }
        CHECK(st == IG_REQ_FINISHED && got == gen, "a %d-token context: status %d, %d of %d tokens (%s)", n + gen, st,
              got, gen, err.msg);
        ig_request_release(r);
    }
    free(ids);
    ig_engine_close(e);
}

/* Compiles the head_dim-64 fixture with --kv-cache kv into pkg; 0 on success. */
static int compile_kv(const char *kv, char *pkg, size_t cap) {
    snprintf(pkg, cap, "/tmp/ignis-test-kvpool-%s-%d", kv, (int)getpid());
    cc_options co = {.input = "tests/data/models/qwen3-bias-hd64", .out_dir = pkg, .dtype = "f32", .kv_cache = kv};
    ig_err err = {{0}};
    if (cc_compile(&co, &err)) {
        CHECK(0, "compile --kv-cache %s: %s", kv, err.msg);
        return -1;
    }
    return 0;
}

/* The package's KV page size in tokens (manifest.json's "page_size"; uint4 packages default to
 * 64, the others to 16), or -1. */
static int32_t page_size_of(const char *pkg) {
    char path[512], buf[1 << 16];
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *k = strstr(buf, "\"page_size\"");
    return k && (k = strchr(k, ':')) ? (int32_t)atoi(k + 1) : -1;
}

/* Tokens the pools of the quantized formats hold against bf16's, at one byte budget and at one
 * RAM fraction (page counts x each package's page size). */
static void kv_capacity(void) {
    enum { NF = 4 };
    static const char *fmt[NF] = {"bf16", "int8", "fp8", "uint4"};
    static const double need[NF] = {1.0, 1.9, 1.9, 3.5};
    char pkg[NF][256];
    int32_t by_bytes[NF] = {0}, by_frac[NF] = {0};
    for (int i = 0; i < NF; i++) {
        if (compile_kv(fmt[i], pkg[i], sizeof pkg[i])) return;
        ig_err err = {{0}};
        ig_engine_config cfg;
        ig_engine_config_default(&cfg);
        cfg.kv_bytes = 64 << 20;
        by_bytes[i] = pool_pages(pkg[i], &cfg, &err);
        ig_engine_config_default(&cfg);
        cfg.max_seqs = 4096; /* so the RAM share, not the contexts, is the limit */
        cfg.max_tokens_per_step = 4096;
        cfg.kv_fraction = 0.002f;
        by_frac[i] = pool_pages(pkg[i], &cfg, &err);
        CHECK(by_bytes[i] > 0 && by_frac[i] > 0, "%s: pools of %d / %d pages (%s)", fmt[i], by_bytes[i], by_frac[i], err.msg);
        const int32_t ps = page_size_of(pkg[i]);
        CHECK(ps == (i == NF - 1 ? 64 : 16), "%s: page size %d (want 16, 64 for uint4)", fmt[i], ps);
        by_bytes[i] *= ps, by_frac[i] *= ps;
    }
    for (int i = 1; i < NF; i++) {
        double rb = (double)by_bytes[i] / by_bytes[0], rf = (double)by_frac[i] / by_frac[0];
        printf("kv pool %-5s: %.3fx the tokens of bf16 KV in 64 MiB, %.3fx at kv_fraction 0.002 (want >= %.1fx)\n", fmt[i],
               rb, rf, need[i]);
        CHECK(rb >= need[i], "%s KV: %.3fx the tokens of bf16 in 64 MiB, want >= %.1fx", fmt[i], rb, need[i]);
        /* RAM moves between the two opens: a 10% band */
        CHECK(rf >= 0.9 * need[i], "%s KV: %.3fx the tokens of bf16 at one kv_fraction, want about >= %.1fx", fmt[i], rf,
              need[i]);
        whole_context(pkg[i], 256 - 8, 8);
    }
    for (int i = 0; i < NF; i++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", pkg[i]);
        if (system(cmd)) failures++;
    }
}

int main(void) {
    const char *td = getenv("IGNIS_TESTDATA") ? getenv("IGNIS_TESTDATA") : "../shared/testdata";
    char src[1024], pkg[256];
    snprintf(src, sizeof src, "%s/models/llama-gqa", td);
    if (access(src, R_OK)) {
        printf("SKIP: no test data at %s\n", td);
        return 77;
    }
    snprintf(pkg, sizeof pkg, "/tmp/ignis-test-kvpool-%d", (int)getpid());
    cc_options co = {.input = src, .out_dir = pkg, .dtype = "f32"};
    ig_err err = {{0}};
    if (cc_compile(&co, &err)) {
        fprintf(stderr, "FAIL compile: %s\n", err.msg);
        return 1;
    }
    ig_engine *probe;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    CHECK(fabsf(cfg.kv_fraction - 0.85f) < 1e-6f, "default kv_fraction %g", (double)cfg.kv_fraction);
    if (ig_engine_open(pkg, &cfg, &probe, &err)) {
        fprintf(stderr, "FAIL open: %s\n", err.msg);
        return 1;
    }
    int32_t max_context = ig_engine_max_context(probe);
    ig_engine_close(probe);
    const int32_t page = 16; /* the compiler's page size (tokens) */
    int32_t per_seq = (max_context + page - 1) / page;

    /* ample RAM for a tiny model: max_seqs full contexts */
    cfg.max_seqs = 4;
    int32_t p = pool_pages(pkg, &cfg, &err);
    CHECK(p == 4 * per_seq, "default pool %d pages, want 4 x %d (%s)", p, per_seq, err.msg);
    /* a fraction so small that the RAM share, not the contexts, is the limit */
    unsigned long long ram = mem_available();
    cfg.max_seqs = 4096;
    cfg.max_tokens_per_step = 4096;
    cfg.kv_fraction = 0.001f;
    p = pool_pages(pkg, &cfg, &err);
    double page_bytes = 0;
    {
        ig_engine_config c1;
        ig_engine_config_default(&c1);
        c1.kv_pages = 0;
        c1.kv_bytes = 1 << 20; /* 1 MiB: pages = 1 MiB / page bytes */
        int32_t q = pool_pages(pkg, &c1, &err);
        page_bytes = q > 0 ? (double)(1 << 20) / q : 0;
    }
    double want = ram * 0.001 / (page_bytes > 0 ? page_bytes : 1);
    CHECK(p > 0 && p < 4096 * per_seq && fabs(p - want) < 0.2 * want + 2,
          "kv_fraction 0.001 of %.1f GB: %d pages, want about %.0f (%s)", ram / 1e9, p, want, err.msg);
    /* explicit sizes win */
    ig_engine_config_default(&cfg);
    cfg.kv_pages = 7;
    p = pool_pages(pkg, &cfg, &err);
    CHECK(p == 7, "kv_pages 7 gave %d", p);
    /* out of range */
    float bad[] = {0.0f, -0.5f, 1.5f, NAN};
    for (int i = 0; i < 4; i++) {
        ig_engine_config_default(&cfg);
        cfg.kv_fraction = bad[i];
        err.msg[0] = 0;
        p = pool_pages(pkg, &cfg, &err);
        CHECK(p == -1 && strstr(err.msg, "kv_fraction"), "kv_fraction %g: %d pages, message %s", (double)bad[i], p,
              err.msg);
    }
    /* the model's whole context in a default engine */
    whole_context(pkg, max_context - 8, 8);
    kv_capacity();

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pkg);
    if (system(cmd)) return 1;
    if (!failures) printf("kv pool: ok (%d-token context, %d pages per sequence)\n", max_context, per_seq);
    return failures ? 1 : 0;
}
