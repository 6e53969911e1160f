/* test_api_contract.c — the misuse contract of include/ignis.h and the limits of issue 23 on a
 * real tiny package (llama-gqa, f32):
 *  - NULL out / engine pointers, double release, stop / read / sync / status after release are
 *    errors (IG_ERR_INVALID / IG_REQ_ERROR), not uses of freed memory;
 *  - a release while another thread blocks in ig_request_read (and ig_request_sync) wakes it
 *    with an error;
 *  - max_new_tokens = INT32_MAX runs to the context length (buffers sized by the context);
 *  - a subnormal temperature is refused;
 *  - a request the KV pool cannot hold ends with IG_FINISH_KV, not IG_FINISH_LENGTH;
 *  - a manifest whose eos/bos ids lie outside model.so's vocabulary, or whose numbers do not fit
 *    their types, is refused at open;
 *  - a soak: random parameters, cancellations, releases from other threads while reads block,
 *    KV exhaustion; every request ends with a status, no KV page is left used, memory returns to
 *    its baseline. IGNIS_SOAK_SECONDS=N makes it run N seconds (default: about 3).
 * Run under the sanitizer build (IGNIS_SANITIZE=ON) these cases are the regression tests of the
 * use-after-free findings. */
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "driver.h"
#include "ignis.h"
#include "rt_util.h"

#include "check.h"

static ig_engine *open_engine(const char *pkg, int32_t kv_pages, int32_t max_seqs) {
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.kv_pages = kv_pages;
    cfg.max_seqs = max_seqs;
    cfg.n_threads = 1;
    ig_engine *e = NULL;
    ig_err err = {{0}};
    if (ig_engine_open(pkg, &cfg, &e, &err)) CHECK(0, "open %s: %s", pkg, err.msg);
    return e;
}

/* Reads r to its end: tokens counted, last status and finish reason. */
static ig_req_status drain(ig_request *r, int32_t *n, ig_finish_reason *why) {
    ig_req_status st = IG_REQ_QUEUED;
    *n = 0;
    for (;;) {
        ig_output *o;
        ig_err err;
        ig_status s = ig_request_read(r, -1, &o, &err);
        if (s) break;
        *n += o->n_tokens;
        st = o->status;
        if (why) *why = o->finish;
        ig_output_free(o);
    }
    return st;
}

/* ---- misuse */

typedef struct blocked_read {
    ig_request *r;
    ig_status st;
    int sync; /* 1: ig_request_sync instead of read */
    ig_req_status sync_st;
    char msg[256];
} blocked_read;

static void *read_blocking(void *p) {
    blocked_read *b = p;
    if (b->sync) {
        b->sync_st = ig_request_sync(b->r);
        return NULL;
    }
    for (;;) {
        ig_output *o;
        ig_err err = {{0}};
        b->st = ig_request_read(b->r, -1, &o, &err);
        if (b->st) {
            snprintf(b->msg, sizeof b->msg, "%s", err.msg);
            return NULL;
        }
        ig_output_free(o);
    }
}

/* One trial of a release while reads / syncs block: AHEAD long requests run one after the other
 * (max_seqs 1), the next waits in the queue behind them, so its readers block until the release.
 * Returns 0 when the trial says nothing (the requests ahead had all ended by the time of the
 * release, so the queued one may have run: a fast or a loaded machine; the tiny model makes its
 * 252 tokens in a few ms), 1 after checking the readers' results. */
enum { AHEAD = 8 }; /* context-long requests ahead of the queued one */
static int release_while_blocked(ig_engine *e, const int32_t *ids, ig_gen_config *g) {
    ig_err err = {{0}};
    g->max_new_tokens = INT_MAX; /* to the context length */
    g->ignore_eos = 1;
    ig_request *ahead[AHEAD] = {0}, *queued = NULL;
    int ok = 1;
    for (int i = 0; i < AHEAD; i++) ok &= ig_request_start(e, ids, 4, g, &ahead[i], &err) == IG_OK;
    ok &= ig_request_start(e, ids, 4, g, &queued, &err) == IG_OK;
    CHECK(ok, "start: %s", err.msg);
    int conclusive = 1;
    if (ok) {
        blocked_read br[3] = {{.r = queued}, {.r = queued}, {.r = queued, .sync = 1}};
        pthread_t th[3];
        for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, read_blocking, &br[i]);
        usleep(5000);
        CHECK(ig_request_release(queued) == IG_OK, "release of a handle being read");
        /* the queued request cannot have started while the last one ahead has not ended */
        ig_req_status last = ig_request_status(ahead[AHEAD - 1]);
        conclusive = last == IG_REQ_QUEUED || last == IG_REQ_PREFILLING || last == IG_REQ_GENERATING;
        for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
        if (conclusive) {
            for (int i = 0; i < 2; i++)
                CHECK(br[i].st == IG_ERR_INVALID && strstr(br[i].msg, "released"),
                      "blocked read %d after release: %d %s", i, br[i].st, br[i].msg);
            CHECK(br[2].sync_st == IG_REQ_ERROR, "blocked sync after release: %d", br[2].sync_st);
        } else {
            fprintf(stderr, "release while blocked: the requests ahead ended first, trial repeated\n");
        }
    } else {
        ig_request_release(queued);
    }
    for (int i = 0; i < AHEAD; i++) CHECK(ig_request_release(ahead[i]) == IG_OK, "release ahead %d", i);
    return conclusive;
}

static void test_misuse(const char *pkg) {
    ig_engine *e = open_engine(pkg, 64, 1);
    if (!e) return;
    ig_err err = {{0}};
    int32_t ids[4] = {1, 2, 3, 4};
    ig_request *r = NULL;
    CHECK(ig_request_start(e, ids, 4, NULL, NULL, &err) == IG_ERR_INVALID && strstr(err.msg, "out"), "out NULL: %s", err.msg);
    CHECK(ig_request_start(NULL, ids, 4, NULL, &r, &err) == IG_ERR_INVALID && r == NULL, "engine NULL");
    CHECK(ig_request_start_text(NULL, "x", NULL, &r, &err) == IG_ERR_INVALID, "engine NULL (text)");
    CHECK(ig_engine_open("/nonexistent", NULL, NULL, &err) == IG_ERR_INVALID, "open with out NULL");
    CHECK(ig_engine_vocab(NULL) == 0 && ig_engine_max_context(NULL) == 0, "facts of a NULL engine");

    /* double release, stop / read / status / sync after release */
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = 4;
    CHECK(ig_request_start(e, ids, 4, &g, &r, &err) == IG_OK, "start: %s", err.msg);
    int32_t n;
    CHECK(drain(r, &n, NULL) == IG_REQ_FINISHED && n == 4, "first request: %d tokens", n);
    ig_output *o = NULL;
    CHECK(ig_request_read(r, 0, NULL, &err) == IG_ERR_INVALID, "read with out NULL");
    CHECK(ig_request_release(r) == IG_OK, "first release");
    CHECK(ig_request_release(r) == IG_ERR_INVALID, "second release not detected");
    CHECK(ig_request_stop(r) == IG_ERR_INVALID, "stop after release not detected");
    CHECK(ig_request_read(r, 0, &o, &err) == IG_ERR_INVALID && o == NULL && strstr(err.msg, "released"),
          "read after release: %s", err.msg);
    CHECK(ig_request_status(r) == IG_REQ_ERROR && ig_request_sync(r) == IG_REQ_ERROR, "status/sync after release");
    CHECK(ig_request_release(NULL) == IG_OK && ig_request_stop(NULL) == IG_OK, "NULL handles");

    /* a release while reads / syncs block */
    int conclusive = 0;
    for (int trial = 0; trial < 5 && !conclusive; trial++) conclusive = release_while_blocked(e, ids, &g);
    CHECK(conclusive, "release while blocked: the requests ahead ended before the release in every trial");
    ig_engine_close(e);
}

/* ---- limits */

static void test_limits(const char *pkg) {
    ig_engine *e = open_engine(pkg, 64, 4);
    if (!e) return;
    ig_err err = {{0}};
    int32_t ids[4] = {1, 2, 3, 4};
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = INT_MAX; /* was a signed overflow and an 8 GB buffer */
    g.ignore_eos = 1;
    ig_request *r = NULL;
    CHECK(ig_request_start(e, ids, 4, &g, &r, &err) == IG_OK, "max_new_tokens INT_MAX: %s", err.msg);
    if (r) {
        int32_t n;
        ig_finish_reason why = IG_FINISH_NONE;
        CHECK(drain(r, &n, &why) == IG_REQ_FINISHED && why == IG_FINISH_LENGTH && n == ig_engine_max_context(e) - 4,
              "INT_MAX request: %d tokens, reason %d (context %d)", n, why, ig_engine_max_context(e));
        ig_request_release(r);
    }
    ig_gen_config_default(&g);
    g.temperature = 1e-45f; /* subnormal: every weight was NaN and the token -1 */
    CHECK(ig_request_start(e, ids, 4, &g, &r, &err) == IG_ERR_INVALID && strstr(err.msg, "temperature"),
          "subnormal temperature: %s", err.msg);
    ig_engine_close(e);

    /* a pool of 2 pages: a request alone in it that outgrows it is cut with its own reason */
    e = open_engine(pkg, 2, 1);
    if (!e) return;
    ig_gen_config_default(&g);
    g.max_new_tokens = 200;
    g.ignore_eos = 1;
    CHECK(ig_request_start(e, ids, 4, &g, &r, &err) == IG_OK, "start: %s", err.msg);
    if (r) {
        int32_t n;
        ig_finish_reason why = IG_FINISH_NONE;
        CHECK(drain(r, &n, &why) == IG_REQ_FINISHED && why == IG_FINISH_KV && n < 200,
              "cut by the KV pool: reason %d after %d tokens", why, n);
        ig_request_release(r);
    }
    ig_engine_close(e);
}

/* ---- manifests with bad numbers */

static int copy_pkg(const char *pkg, const char *dst, cJSON **manifest) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, pkg, dst);
    if (system(cmd)) return -1;
    char p[1024];
    snprintf(p, sizeof p, "%s/manifest.json", dst);
    char *t;
    ig_err err;
    if (rt_read_file(p, &t, NULL, &err)) return -1;
    *manifest = cJSON_Parse(t);
    free(t);
    return *manifest ? 0 : -1;
}

static void expect_open_fails(const char *dir, cJSON *m, const char *want) {
    char p[1024];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    char *t = cJSON_Print(m);
    ig_err err = {{0}};
    rt_write_file(p, t, strlen(t), &err);
    free(t);
    ig_engine *e = NULL;
    ig_status st = ig_engine_open(dir, NULL, &e, &err);
    CHECK(st != IG_OK && e == NULL && strstr(err.msg, want), "manifest with bad %s opened or said: %s", want, err.msg);
    if (e) ig_engine_close(e);
}

static void test_manifest(const char *pkg) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s-bad", pkg);
    cJSON *m;
    if (copy_pkg(pkg, dir, &m)) {
        CHECK(0, "copy %s", pkg);
        return;
    }
    cJSON *gen = cJSON_GetObjectItem(m, "generation");
    CHECK(gen != NULL, "manifest has no generation");
    cJSON *eos = cJSON_CreateArray();
    cJSON_AddItemToArray(eos, cJSON_CreateNumber(1 << 30)); /* past the vocabulary: was a write past a logits row */
    cJSON_ReplaceItemInObject(gen, "eos_token_ids", eos);
    expect_open_fails(dir, m, "eos_token_ids");
    cJSON_ReplaceItemInObject(gen, "eos_token_ids", cJSON_CreateArray());
    cJSON_ReplaceItemInObject(gen, "bos_token_id", cJSON_CreateNumber(1e300)); /* a cast of it was UB */
    expect_open_fails(dir, m, "bos_token_id");
    cJSON_ReplaceItemInObject(gen, "bos_token_id", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(m, "abi_version", cJSON_CreateNumber(-1e300));
    expect_open_fails(dir, m, "abi_version");
    cJSON_Delete(m);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

/* ---- soak */

typedef struct soak_arg {
    ig_engine *e;
    uint64_t seed;
    double until;
    int started, ended, stopped, released_blocked, bad;
} soak_arg;

static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *soak_worker(void *p) {
    soak_arg *a = p;
    uint64_t s = a->seed;
    int32_t V = ig_engine_vocab(a->e);
    while (rt_now() < a->until) {
        int32_t ids[64], n = 1 + (int32_t)(rnd(&s) % 64);
        for (int32_t i = 0; i < n; i++) ids[i] = (int32_t)(rnd(&s) % V);
        ig_gen_config g;
        ig_gen_config_default(&g);
        g.max_new_tokens = 1 + (int32_t)(rnd(&s) % 300);
        g.temperature = (rnd(&s) % 2) ? 0.0f : 0.3f + (float)(rnd(&s) % 100) / 50.0f;
        g.top_k = (int32_t)(rnd(&s) % 50);
        g.ignore_eos = (int)(rnd(&s) % 2);
        g.seed = rnd(&s);
        ig_request *r;
        ig_err err;
        ig_status st = ig_request_start(a->e, ids, n, &g, &r, &err);
        if (st == IG_ERR_BUSY) continue;
        if (st) {
            a->bad++;
            fprintf(stderr, "soak start: %s\n", err.msg);
            continue;
        }
        a->started++;
        int mode = (int)(rnd(&s) % 4);
        if (mode == 1) ig_request_stop(r);
        if (mode == 2) { /* released by another thread while this one blocks in read */
            blocked_read br = {.r = r};
            pthread_t t;
            pthread_create(&t, NULL, read_blocking, &br);
            usleep((useconds_t)(rnd(&s) % 3000));
            ig_request_release(r);
            pthread_join(t, NULL);
            /* the read ends with the end of the request or the release */
            if (br.st != IG_ERR_INVALID && br.st != IG_ERR_CLOSED) {
                a->bad++;
                fprintf(stderr, "soak: blocked read ended with %d (%s)\n", br.st, br.msg);
            }
            a->released_blocked++;
            continue;
        }
        int32_t got;
        ig_finish_reason why = IG_FINISH_NONE;
        ig_req_status fs = drain(r, &got, &why);
        int ok = fs == IG_REQ_STOPPED || (fs == IG_REQ_FINISHED && why != IG_FINISH_NONE) ||
                 (mode == 1 && fs == IG_REQ_QUEUED); /* stopped before any output */
        if (fs == IG_REQ_STOPPED) a->stopped++;
        if (!ok) {
            a->bad++;
            fprintf(stderr, "soak: request ended with status %d reason %d after %d tokens\n", fs, why, got);
        }
        ig_req_status last = ig_request_status(r);
        if (last != IG_REQ_FINISHED && last != IG_REQ_STOPPED) {
            a->bad++;
            fprintf(stderr, "soak: request's final status %d\n", last);
        }
        a->ended++;
        ig_request_release(r);
    }
    return NULL;
}

static void test_soak(const char *pkg) {
    const char *env = getenv("IGNIS_SOAK_SECONDS");
    double secs = env ? atof(env) : 3.0;
    /* a pool too small for the traffic: preemption and KV exhaustion */
    ig_engine *e = open_engine(pkg, 12, 8);
    if (!e) return;
    size_t base = mallinfo2().uordblks;
    enum { NT = 4 };
    soak_arg a[NT];
    pthread_t th[NT];
    double until = rt_now() + secs;
    for (int i = 0; i < NT; i++) {
        a[i] = (soak_arg){.e = e, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), .until = until};
        pthread_create(&th[i], NULL, soak_worker, &a[i]);
    }
    int started = 0, ended = 0, stopped = 0, relb = 0, bad = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        started += a[i].started, ended += a[i].ended, stopped += a[i].stopped;
        relb += a[i].released_blocked, bad += a[i].bad;
    }
    CHECK(bad == 0, "soak: %d bad endings", bad);
    CHECK(started == ended + relb, "soak: %d started, %d ended, %d released while read", started, ended, relb);
    /* the scheduler drops released requests asynchronously: wait for the pool to be whole */
    ig_engine_stats s;
    for (int i = 0; i < 200; i++) {
        ig_engine_get_stats(e, &s);
        if (s.running == 0 && s.waiting == 0 && s.kv_pages_free + s.kv_pages_cached == s.kv_pages_total) break;
        usleep(10000);
    }
    CHECK(s.running == 0 && s.waiting == 0 && s.kv_pages_free + s.kv_pages_cached == s.kv_pages_total,
          "soak: pages leaked: running %d waiting %d free %d cached %d total %d", s.running, s.waiting,
          s.kv_pages_free, s.kv_pages_cached, s.kv_pages_total);
    /* what stays: the shelf of released request shells (bounded) and the allocator's noise */
    size_t after = mallinfo2().uordblks;
    CHECK(after < base + (8u << 20), "soak: memory grew from %zu to %zu bytes", base, after);
    printf("soak: %.0f s, %d requests (%d stopped, %d released while a read blocked), %lld preemptions, "
           "memory %zu -> %zu bytes\n", secs, started, stopped, relb, (long long)s.preemptions, base, after);
    ig_engine_close(e);
}

int main(void) {
    const char *td = getenv("IGNIS_TESTDATA");
    char src[1024], pkg[512];
    snprintf(src, sizeof src, "%s/models/llama-gqa", td ? td : "../shared/testdata");
    if (access(src, R_OK)) {
        printf("SKIP: no test data at %s\n", src);
        return 77;
    }
    const char *soak = getenv("IGNIS_SOAK_SECONDS");
    alarm(soak ? (unsigned)atoi(soak) + 240 : 240);
    snprintf(pkg, sizeof pkg, "/tmp/ignis-test-contract-%d", (int)getpid());
    cc_options o = {.input = src, .out_dir = pkg, .dtype = "f32"};
    ig_err err = {{0}};
    if (cc_compile(&o, &err)) {
        fprintf(stderr, "compile: %s\n", err.msg);
        return 1;
    }
    test_misuse(pkg);
    test_limits(pkg);
    test_manifest(pkg);
    test_soak(pkg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pkg);
    if (system(cmd)) {}
    printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
