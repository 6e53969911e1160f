/* fat.c — fat packages: `ignis compile --target cpu:avx2,cpu:avx512bf16,cpu:aarch64 ...` puts one
 * model object per CPU target in one package, beside one weights.bin that all of them read.
 *
 * Each target is compiled by cc_compile as a package of its own (the first into the package
 * directory itself, the others into a scratch folder inside it); the CPU weight layout does not
 * depend on the ISA, so their weights.bin must be byte-identical to the first's (their manifest's
 * weights tables are compared: sizes, offsets and hashes) and only their model.so is kept, as
 * model-TARGET.so. The manifest gains "variants", the targets best first as the target table
 * orders them, and the runtime loads the first this machine runs (rt_package.c). The dtype is the
 * first target's (its default when --dtype is not given), so that every variant reads the same
 * weights. */
#include "driver.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "rt_util.h"

enum { FAT_MAX = 8 };

static ig_status read_manifest(const char *pkg, cJSON **m, ig_err *err) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    ig_status st = rt_read_file(path, &text, NULL, err);
    if (st) return st;
    *m = cJSON_Parse(text);
    free(text);
    return *m ? IG_OK : ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", path);
}

/* Splits the comma list into CPU targets (table entries, in table order: best first). */
static ig_status split_targets(const char *list, const cg_target **t, int *n, ig_err *err) {
    const cg_target *given[FAT_MAX];
    int ng = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const cg_target *x = cg_target_find(tok);
        if (!strncmp(tok, "cuda", 4))
            return ig_fail(err, IG_ERR_UNSUPPORTED, "--target %s: a fat package holds CPU targets only (compile CUDA "
                           "targets into a package of their own)", list);
        if (!x) return ig_fail(err, IG_ERR_INVALID, "unknown --target '%s' in '%s' (known: %s)", tok, list, cg_target_names());
        for (int i = 0; i < ng; i++)
            if (given[i] == x) return ig_fail(err, IG_ERR_INVALID, "--target %s names %s twice", list, x->name);
        if (ng == FAT_MAX) return ig_fail(err, IG_ERR_INVALID, "--target %s: at most %d targets", list, FAT_MAX);
        given[ng++] = x;
    }
    size_t nt;
    const rt_cpu_target *table = rt_cpu_target_table(&nt);
    *n = 0;
    for (size_t k = 0; k < nt; k++)
        for (int i = 0; i < ng; i++)
            if (given[i] == &table[k]) t[(*n)++] = given[i];
    return IG_OK;
}

/* Compiles target t into a scratch package and moves its model.so to pkg/model-FULLNAME.so, after
 * checking that its weights are the first package's (and its model.o to pkg/model-FULLNAME.o). */
static ig_status add_variant(const cc_options *o, const cg_target *t, const char *dtype, const cJSON *w0, ig_err *err) {
    char scratch[4096], from[4096], to[4096], cmd[8400];
    snprintf(scratch, sizeof scratch, "%s/.variant-%s", o->out_dir, t->full_name);
    cc_options oi = *o;
    oi.target = t->name;
    oi.out_dir = scratch;
    oi.dtype = dtype;
    cJSON *m = NULL;
    ig_status st = cc_compile(&oi, err);
    if (!st) st = read_manifest(scratch, &m, err);
    if (!st && !cJSON_Compare(w0, cJSON_GetObjectItemCaseSensitive(m, "weights"), 1))
        st = ig_fail(err, IG_ERR_MISMATCH, "--target %s packs the weights differently from the package's first target: "
                     "a fat package needs one weights layout", t->name);
    cJSON_Delete(m);
    for (int k = 0; k < 2 && !st; k++) { /* the shared object, and the object file `ignis bundle` links */
        const char *ext = k ? "o" : "so";
        snprintf(from, sizeof from, "%s/model.%s", scratch, ext);
        snprintf(to, sizeof to, "%s/model-%s.%s", o->out_dir, t->full_name, ext);
        if (rename(from, to) != 0) st = ig_fail(err, IG_ERR_IO, "cannot move %s to %s", from, to);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "cannot remove %s", scratch);
    return st;
}

static cJSON *variant_json(const cg_target *t, const char *file) {
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "target", t->full_name);
    cJSON_AddNumberToObject(v, "cpu_features", t->cpu_features);
    cJSON_AddStringToObject(v, "file", file);
    return v;
}

ig_status cc_compile_fat(const cc_options *o, ig_err *err) {
    const cg_target *t[FAT_MAX];
    int n = 0;
    if (o->tp > 1)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--target %s with --tp %d: a fat package holds one rank's code per "
                       "target; compile a tensor-parallel package for one target", o->target, o->tp);
    ig_status st = split_targets(o->target, t, &n, err);
    if (st) return st;
    cc_options o0 = *o;
    o0.target = t[0]->name;
    if ((st = cc_compile(&o0, err))) return st;
    cJSON *m;
    if ((st = read_manifest(o->out_dir, &m, err))) return st;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m, "dtype");
    char dtype[16];
    snprintf(dtype, sizeof dtype, "%s", cJSON_IsString(dt) ? dt->valuestring : "f32");
    const cJSON *w0 = cJSON_GetObjectItemCaseSensitive(m, "weights");
    cJSON *vs = cJSON_CreateArray();
    cJSON_AddItemToArray(vs, variant_json(t[0], "model.so"));
    for (int i = 1; i < n && !st; i++) {
        st = add_variant(o, t[i], o->quant ? o->dtype : dtype, w0, err);
        char file[128];
        snprintf(file, sizeof file, "model-%s.so", t[i]->full_name);
        if (!st) cJSON_AddItemToArray(vs, variant_json(t[i], file));
        if (!st && o->log) fprintf(o->log, "added %s for %s\n", file, t[i]->name);
    }
    cJSON_AddItemToObject(m, "variants", vs);
    char *text = st ? NULL : cJSON_Print(m);
    cJSON_Delete(m);
    if (!st) {
        char path[4096];
        snprintf(path, sizeof path, "%s/manifest.json", o->out_dir);
        st = text ? rt_write_file(path, text, strlen(text), err) : ig_fail(err, IG_ERR_NOMEM, "manifest: out of memory");
    }
    free(text);
    if (!st && o->log) fprintf(o->log, "fat package %s: %d CPU targets, one weights.bin\n", o->out_dir, n);
    return st;
}
