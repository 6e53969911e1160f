/* test_engine_oom.c — out of memory while the scheduler queues a generated token ends that
 * request with status ERROR and a message, instead of dropping the token silently: this program
 * replaces malloc (forwarding to glibc's) and, while armed, fails the allocations of exactly one
 * 1-token output element (scheduler.h's out_node layout) made off the main thread. The request
 * must end ERROR naming "out of memory", its earlier tokens must have arrived, the engine must
 * serve the next request normally, and the KV pool must be whole. Skipped under ASan (which
 * owns malloc). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "ignis.h"
#include "scheduler.h"

#if defined(__SANITIZE_ADDRESS__)
int main(void) {
    printf("SKIP: ASan replaces malloc\n");
    return 77;
}
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static volatile int armed;      /* fail matching allocations (set by the main thread) */
static volatile int n_failed;   /* allocations failed so far */
static size_t target_size;      /* the size of a 1-token output element */
static pthread_t main_thread;

void *malloc(size_t n) {
    if (armed && n == target_size && !pthread_equal(pthread_self(), main_thread)) {
        __atomic_fetch_add(&n_failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

#include "check.h"

/* Reads r to its end: tokens received, final status and error message; arm: fail the output
 * allocations once 3 tokens have arrived. */
static ig_req_status drain(ig_request *r, int arm, int *n_tok, char *msg, size_t cap) {
    ig_req_status st = IG_REQ_QUEUED;
    ig_output *o;
    ig_err err;
    *n_tok = 0;
    msg[0] = 0;
    while (ig_request_read(r, -1, &o, &err) == IG_OK) {
        *n_tok += o->n_tokens;
        st = o->status;
        if (st == IG_REQ_ERROR) snprintf(msg, cap, "%s", o->error);
        if (arm && *n_tok >= 3 && st == IG_REQ_GENERATING) armed = 1; /* from the 4th token on */
        ig_output_free(o);
    }
    return st;
}

int main(void) {
    const char *td = getenv("IGNIS_TESTDATA") ? getenv("IGNIS_TESTDATA") : "../shared/testdata";
    char src[1024], pkg[256];
    snprintf(src, sizeof src, "%s/models/llama-gqa", td);
    if (access(src, R_OK)) {
        printf("SKIP: no test data at %s\n", td);
        return 77;
    }
    main_thread = pthread_self();
    target_size = sizeof(out_node) + sizeof(int32_t) + sizeof(float) + OUT_TEXT_INLINE;
    snprintf(pkg, sizeof pkg, "/tmp/ignis-test-oom-%d", (int)getpid());
    cc_options co = {.input = src, .out_dir = pkg, .dtype = "f32"};
    ig_err err = {{0}};
    if (cc_compile(&co, &err)) {
        fprintf(stderr, "FAIL compile: %s\n", err.msg);
        return 1;
    }
    ig_engine *e;
    ig_engine_config cfg;
    ig_engine_config_default(&cfg);
    cfg.max_seqs = 2;
    if (ig_engine_open(pkg, &cfg, &e, &err)) {
        fprintf(stderr, "FAIL open: %s\n", err.msg);
        return 1;
    }
    ig_gen_config g;
    ig_gen_config_default(&g);
    g.max_new_tokens = 40;
    g.ignore_eos = 1;
    int32_t ids[5] = {1, 2, 3, 4, 5};
    ig_request *r;
    CHECK(ig_request_start(e, ids, 5, &g, &r, &err) == IG_OK, "start: %s", err.msg);
    int n = 0;
    char msg[256];
    ig_req_status st = drain(r, 1, &n, msg, sizeof msg);
    armed = 0;
    CHECK(n_failed > 0, "no output allocation was failed (the test hook missed the size %zu)", target_size);
    CHECK(st == IG_REQ_ERROR && strstr(msg, "out of memory"), "request ended with status %d, message '%s'", st, msg);
    CHECK(n >= 3 && n < 40, "%d tokens arrived before the failure", n);
    CHECK(ig_request_status(r) == IG_REQ_ERROR, "status %d", ig_request_status(r));
    ig_request_release(r);
    /* the engine keeps serving */
    CHECK(ig_request_start(e, ids, 5, &g, &r, &err) == IG_OK, "start after: %s", err.msg);
    st = drain(r, 0, &n, msg, sizeof msg);
    CHECK(st == IG_REQ_FINISHED && n == 40, "request after the failure: status %d, %d tokens", st, n);
    ig_request_release(r);
    ig_engine_stats s;
    ig_engine_get_stats(e, &s);
    CHECK(s.kv_pages_free + s.kv_pages_cached == s.kv_pages_total, "%d pages still used", s.kv_pages_used);
    ig_engine_close(e);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pkg);
    if (system(cmd)) {}
    printf("%s: %d allocations failed (%d failures)\n", failures ? "FAIL" : "ok", n_failed, failures);
    return failures ? 1 : 0;
}
#endif
