/* bench_tokenizer.c — encode/decode throughput of the C tokenizer on one core.
 * usage: bench_tokenizer [tokenizer_dir] [corpus.json]
 * Defaults: $IGNIS_TESTDATA (or ../shared/testdata)/tokenizers/qwen3 and .../corpus.json.
 * Encodes the corpus texts one call each, repeated to ~10 MB, for all texts and for the
 * ASCII-only (English / code) subset; then decodes the ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(b); return NULL; }
    fclose(f);
    b[n] = 0;
    return b;
}

static int run(const tok_tokenizer *t, const char *label, const char **texts, int nt) {
    if (!nt) return 0;
    size_t target = 10u << 20, bytes = 0, ntok = 0;
    ig_err err;
    int32_t *keep = NULL;
    size_t nkeep = 0;
    double t0 = now();
    for (int rep = 0; bytes < target; rep++) {
        for (int i = 0; i < nt; i++) {
            int32_t *ids;
            size_t n;
            size_t len = strlen(texts[i]);
            if (tok_encode(t, texts[i], len, 0, 1, &ids, &n, &err)) { fprintf(stderr, "encode: %s\n", err.msg); return 1; }
            bytes += len;
            ntok += n;
            if (rep == 0) {
                keep = realloc(keep, (nkeep + n) * sizeof *keep);
                memcpy(keep + nkeep, ids, n * sizeof *ids);
                nkeep += n;
            }
            free(ids);
        }
    }
    double dt = now() - t0;
    printf("%-8s encode: %.1f MB in %.3f s = %.1f MB/s (%.2f M tokens/s)\n", label, bytes / 1e6, dt, bytes / 1e6 / dt,
           ntok / 1e6 / dt);
    size_t dbytes = 0, dtok = 0;
    t0 = now();
    while (dtok < ntok) {
        char *txt;
        size_t tl;
        if (tok_decode(t, keep, nkeep, 0, &txt, &tl, &err)) { fprintf(stderr, "decode: %s\n", err.msg); return 1; }
        dbytes += tl;
        dtok += nkeep;
        free(txt);
    }
    dt = now() - t0;
    printf("%-8s decode: %.1f M tokens in %.3f s = %.1f MB/s\n", label, dtok / 1e6, dt, dbytes / 1e6 / dt);
    free(keep);
    return 0;
}

int main(int argc, char **argv) {
    const char *root = getenv("IGNIS_TESTDATA");
    if (!root) root = "../shared/testdata";
    char dir[1024], cpath[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/qwen3", root);
    snprintf(cpath, sizeof cpath, "%s/tokenizers/corpus.json", root);
    const char *d = argc > 1 ? argv[1] : dir, *c = argc > 2 ? argv[2] : cpath;
    tok_tokenizer *t;
    ig_err err;
    double t0 = now();
    if (tok_load_dir(d, &t, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("loaded %s in %.3f s (vocab %d)\n", d, now() - t0, tok_vocab_size(t));
    char *js = slurp(c);
    cJSON *arr = js ? cJSON_Parse(js) : NULL;
    if (!cJSON_IsArray(arr)) { fprintf(stderr, "%s: not a JSON array of strings\n", c); return 1; }
    int n = cJSON_GetArraySize(arr), na = 0;
    const char **all = malloc((size_t)n * sizeof *all), **ascii = malloc((size_t)n * sizeof *ascii);
    for (int i = 0; i < n; i++) {
        const char *s = cJSON_GetArrayItem(arr, i)->valuestring;
        all[i] = s;
        int a = 1;
        for (const char *p = s; *p; p++) if ((unsigned char)*p >= 0x80) { a = 0; break; }
        if (a) ascii[na++] = s;
    }
    int rc = run(t, "all", all, n) || run(t, "ascii", ascii, na);
    free(all); free(ascii);
    cJSON_Delete(arr);
    free(js);
    tok_free(t);
    return rc;
}
