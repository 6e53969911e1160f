/* test_tuning.c — the tuning keys' parser (runtime/serving/tuning.c): accepted values land in the right
 * field, every bad entry is an error naming it and changes nothing after it, a key of the other
 * phase is refused, and random strings never crash the parser nor put
 * an out-of-range value into a field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuning.h"

static int fails;
#define EXPECT(c)                                                         \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                      \
        }                                                                 \
    } while (0)

static int run_ok(const char *spec, ig_model_tuning *t) {
    ig_err e = {{0}};
    tune_run_defaults(t);
    return tune_apply(TUNE_RUN, spec, "test", t, &e) == IG_OK;
}

/* Fails with a message containing needle. */
static int compile_err(const char *spec, const char *needle) {
    cg_tuning t;
    ig_err e = {{0}};
    tune_compile_defaults(&t);
    return tune_apply(TUNE_COMPILE, spec, "--tune", &t, &e) != IG_OK && strstr(e.msg, needle) != NULL;
}

/* Every field of t within its key's accepted values. */
static int in_range(tune_phase ph, const void *t) {
    for (const tune_key *k = tune_keys; k->name; k++) {
        if (k->phase != ph) continue;
        int32_t v = tune_get(k, t);
        if (v < k->min || v > k->max || (k->only && !(k->only >> (v - k->min) & 1u))) return 0;
    }
    return 1;
}

int main(void) {
    ig_model_tuning r;
    cg_tuning c;
    tune_compile_defaults(&c);
    EXPECT(c.st_group == 2 && c.st_acc == 2 && c.st_inflight == 3 && c.st_l2hint == 1 && c.at_split_keys == 64);
    EXPECT(run_ok(NULL, &r) && r.persistent == 1 && r.graph_tmax == -1 && r.gemv_tmax == 1 && r.dl_keys == 256);
    EXPECT(run_ok("graphs=0,dl_keys=4,,graph_tmax=-1,", &r) && r.graphs == 0 && r.dl_keys == 4 && r.persistent == 1);
    EXPECT(run_ok("mvt_tmax=8", &r) && r.mvt_tmax == 8);
    EXPECT(run_ok("", &r) && r.mvtq_tmax == 8 && run_ok("mvtq_tmax=0", &r) && r.mvtq_tmax == 0);
    /* bad entries, each named */
    EXPECT(compile_err("st_group=3", "st_group"));       /* not in the set 1, 2, 4 */
    EXPECT(compile_err("st_group=4,st_acc=0", "st_acc")); /* the first good one does not hide the bad */
    EXPECT(compile_err("at_split_keys=99999999999", "at_split_keys"));
    EXPECT(compile_err("at_split_keys=", "at_split_keys"));
    EXPECT(compile_err("at_split_keys=12x", "at_split_keys"));
    EXPECT(compile_err("nope=1", "nope"));
    EXPECT(compile_err("st_acc", "key=value"));
    EXPECT(compile_err("graphs=0", "run-time"));
    EXPECT(!run_ok("st_group=2", &r));
    char big[300];
    memset(big, 'a', sizeof big - 1), big[sizeof big - 1] = 0;
    EXPECT(compile_err(big, "too long"));
    /* random strings over the alphabet of the grammar: no crash, nothing out of range */
    ig_err e = {{0}};
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz_=,-0123456789 ";
    unsigned long long x = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 20000; it++) {
        char s[64];
        int n = (int)(x % 63);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[i] = alpha[x % (sizeof alpha - 1)];
        }
        s[n] = 0;
        if (it & 1) { /* a real key with a random number: the range checks */
            int nk = 0;
            while (tune_keys[nk].name) nk++;
            snprintf(s, sizeof s, "%s=%lld", tune_keys[x % nk].name, (long long)(x >> 20) % 300000 - 150000);
        }
        tune_compile_defaults(&c);
        tune_run_defaults(&r);
        tune_apply(TUNE_COMPILE, s, "fuzz", &c, &e);
        tune_apply(TUNE_RUN, s, "fuzz", &r, &e);
        if (!in_range(TUNE_COMPILE, &c) || !in_range(TUNE_RUN, &r)) {
            fprintf(stderr, "FAIL: '%s' left a value out of range\n", s);
            fails++;
            break;
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    }
    if (!fails) printf("tuning: ok\n");
    return fails ? 1 : 0;
}
