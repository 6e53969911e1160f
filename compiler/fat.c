/* fat.c — fat packages: `ignis compile --target cpu:avx2,cpu:avx512bf16,cpu:aarch64,cuda:sm_80,sm_90 ...`
 * puts one model object per target in one package, beside one weights file per distinct layout.
 *
 * The comma list holds CPU targets and at most one CUDA target, whose architectures are the bare
 * sm_NN items that follow "cuda:" (cuda:sm_80,sm_90 is one target: one model object with a cubin
 * per architecture). Each target is compiled by cc_compile as a package of its own: the best CPU
 * target into the package directory itself (its model.so, weights.bin and manifest are the
 * package's own, so a runtime that knows nothing of variants still loads it), the others into a
 * scratch folder inside it, from which only their model object (model-NAME.so and the model-NAME.o
 * that `ignis bundle` links) is kept, and their weights when no weights file already kept has the
 * same table (sizes, offsets, hashes): the CPU layout (16-row panels) does not depend on the ISA,
 * so CPU targets share weights.bin; CUDA's (rows) differs, so the CUDA target brings
 * weights-cuda.bin, described in the manifest's "weight_files". A CUDA target's generated source
 * stays in src-cuda/.
 *
 * The manifest gains "variants", best first: the CUDA target, then the CPU targets as the target
 * table orders them; each names its model object, its weights file and what it needs to run (CPU
 * features; CUDA architectures). The runtime loads the first this machine runs (rt_package.c).
 * The dtype is the first CPU target's (its default when --dtype is not given), so that every
 * variant computes in the same type; --tune (compile-time keys tune CUDA code) goes to the CUDA
 * target only. */
#include "driver.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "rt_util.h"

enum { FAT_MAX = 8 };

typedef struct fat_list {
    const cg_target *cpu[FAT_MAX]; /* table order: best first */
    int n_cpu;
    char cuda[256];                /* "cuda:sm_80,sm_90", "" when none */
} fat_list;

static ig_status read_manifest(const char *pkg, cJSON **m, ig_err *err) {
    char path[4096], *text;
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    ig_status st = rt_read_file(path, &text, NULL, err);
    if (st) return st;
    *m = cJSON_Parse(text);
    free(text);
    return *m ? IG_OK : ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", path);
}

/* Adds one item of the comma list: a CPU target, "cuda[:sm_NN]", or a bare sm_NN after a CUDA item. */
static ig_status add_item(const char *list, const char *tok, int *in_cuda, fat_list *f, const cg_target **given, int *ng,
                          ig_err *err) {
    if (!strncmp(tok, "cuda", 4) && (tok[4] == 0 || tok[4] == ':')) {
        if (f->cuda[0]) return ig_fail(err, IG_ERR_INVALID, "--target %s names CUDA twice: list its architectures after one "
                                       "cuda: (cuda:sm_80,sm_90)", list);
        snprintf(f->cuda, sizeof f->cuda, "%s", tok[4] ? tok : "cuda:sm_80,sm_90");
        *in_cuda = 1;
        return IG_OK;
    }
    if (!strncmp(tok, "sm_", 3)) {
        if (!*in_cuda) return ig_fail(err, IG_ERR_INVALID, "--target %s: %s follows no cuda: item", list, tok);
        size_t l = strlen(f->cuda);
        snprintf(f->cuda + l, sizeof f->cuda - l, ",%s", tok);
        return IG_OK;
    }
    *in_cuda = 0;
    const cg_target *x = cg_target_find(tok);
    if (!x) return ig_fail(err, IG_ERR_INVALID, "unknown --target '%s' in '%s' (known: %s, cuda:sm_80,sm_90)", tok, list,
                           cg_target_names());
    for (int i = 0; i < *ng; i++)
        if (given[i] == x) return ig_fail(err, IG_ERR_INVALID, "--target %s names %s twice", list, x->name);
    if (*ng == FAT_MAX) return ig_fail(err, IG_ERR_INVALID, "--target %s: at most %d CPU targets", list, FAT_MAX);
    given[(*ng)++] = x;
    return IG_OK;
}

/* Splits the comma list into CPU targets (table entries, in table order: best first) and the CUDA target. */
static ig_status split_targets(const char *list, fat_list *f, ig_err *err) {
    const cg_target *given[FAT_MAX];
    int ng = 0, in_cuda = 0;
    char buf[512];
    memset(f, 0, sizeof *f);
    if (strlen(list) >= sizeof buf) return ig_fail(err, IG_ERR_INVALID, "--target: the list is too long");
    snprintf(buf, sizeof buf, "%s", list);
    ig_status st = IG_OK;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok && !st; tok = strtok_r(NULL, ",", &save))
        st = add_item(list, tok, &in_cuda, f, given, &ng, err);
    if (st) return st;
    if (!ng)
        return ig_fail(err, IG_ERR_INVALID, "--target %s: a fat package holds at least one CPU target (a list of CUDA "
                       "architectures alone is one CUDA target: cuda:sm_80,sm_90)", list);
    size_t nt;
    const rt_cpu_target *table = rt_cpu_target_table(&nt);
    for (size_t k = 0; k < nt; k++)
        for (int i = 0; i < ng; i++)
            if (given[i] == &table[k]) f->cpu[f->n_cpu++] = given[i];
    return IG_OK;
}

/* The weights files kept so far: [0] the package's weights.bin (the manifest's "weights"), then
 * the others, each a weights object of a scratch manifest with its file renamed. */
typedef struct fat_layouts {
    cJSON *w[FAT_MAX + 1]; /* [0] borrowed from the package's manifest; the rest owned */
    int n;
} fat_layouts;

/* The index of the kept layout whose table equals w's (sizes, offsets, layouts, hashes), or -1. */
static int find_layout(const fat_layouts *l, const cJSON *w) {
    for (int i = 0; i < l->n; i++)
        if (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(l->w[i], "tensors"), cJSON_GetObjectItemCaseSensitive(w, "tensors"), 1) &&
            cJSON_Compare(cJSON_GetObjectItemCaseSensitive(l->w[i], "bytes"), cJSON_GetObjectItemCaseSensitive(w, "bytes"), 1))
            return i;
    return -1;
}

/* The weights of the scratch package (manifest m): shared with a kept layout of the same table, or
 * moved to pkg/weights-STEM.bin as a new one. *file: the weights file the variant reads. */
static ig_status keep_weights(const char *pkg, const char *scratch, const char *stem, cJSON *m, fat_layouts *l, char *file,
                              size_t cap, ig_err *err) {
    cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "weights");
    int k = find_layout(l, w);
    if (k >= 0) {
        snprintf(file, cap, "%s", cJSON_GetObjectItemCaseSensitive(l->w[k], "file")->valuestring);
        return IG_OK;
    }
    char from[4096], to[4096];
    snprintf(file, cap, "weights-%s.bin", stem);
    snprintf(from, sizeof from, "%s/weights.bin", scratch);
    snprintf(to, sizeof to, "%s/%s", pkg, file);
    if (rename(from, to) != 0) return ig_fail(err, IG_ERR_IO, "cannot move %s to %s", from, to);
    cJSON *copy = cJSON_Duplicate(w, 1);
    if (!copy) return ig_fail(err, IG_ERR_NOMEM, "manifest: out of memory");
    cJSON_ReplaceItemInObjectCaseSensitive(copy, "file", cJSON_CreateString(file));
    l->w[l->n++] = copy;
    return IG_OK;
}

/* A variant's entry of "variants". */
static cJSON *variant_json(const cJSON *vm, const char *file, const char *wfile) {
    cJSON *v = cJSON_CreateObject();
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(vm, "device");
    int cuda = cJSON_IsString(dev) && !strcmp(dev->valuestring, "cuda");
    cJSON_AddStringToObject(v, "target", cJSON_GetObjectItemCaseSensitive(vm, "target")->valuestring);
    cJSON_AddStringToObject(v, "device", cuda ? "cuda" : "cpu");
    cJSON_AddNumberToObject(v, "cpu_features", cJSON_GetObjectItemCaseSensitive(vm, "cpu_features")->valuedouble);
    cJSON_AddStringToObject(v, "file", file);
    cJSON_AddStringToObject(v, "weights", wfile);
    if (cuda) {
        static const char *keys[] = {"cuda_archs", "ptx", "host_arch", "tuning"};
        for (int i = 0; i < 4; i++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(vm, keys[i]);
            if (x) cJSON_AddItemToObject(v, keys[i], cJSON_Duplicate(x, 1));
        }
    }
    return v;
}

/* Compiles `target` into a scratch package and keeps its model object as pkg/model-STEM.so (and
 * .o), its weights by keep_weights, a CUDA target's sources as src-STEM/; its entry goes to vs. */
static ig_status add_variant(const cc_options *o, const char *target, const char *stem, const char *dtype, const char *tune,
                             fat_layouts *l, cJSON *vs, ig_err *err) {
    char scratch[4096], from[4096], to[4096], cmd[8400], wfile[128], file[128];
    snprintf(scratch, sizeof scratch, "%s/.variant-%s", o->out_dir, stem);
    cc_options oi = *o;
    oi.target = target;
    oi.out_dir = scratch;
    oi.dtype = dtype;
    oi.tune = tune;
    cJSON *m = NULL;
    ig_status st = cc_compile(&oi, err);
    if (!st) st = read_manifest(scratch, &m, err);
    if (!st) st = keep_weights(o->out_dir, scratch, stem, m, l, wfile, sizeof wfile, err);
    /* the shared object, the object file `ignis bundle` links, and a CUDA target's sources */
    static const char *const from_names[] = {"model.so", "model.o", "src"}, *const to_fmt[] = {"model-%s.so", "model-%s.o", "src-%s"};
    for (int k = 0; k < (strncmp(target, "cuda", 4) ? 2 : 3) && !st; k++) {
        char name[160];
        snprintf(name, sizeof name, to_fmt[k], stem);
        snprintf(from, sizeof from, "%s/%s", scratch, from_names[k]);
        snprintf(to, sizeof to, "%s/%s", o->out_dir, name);
        if (rename(from, to) != 0) st = ig_fail(err, IG_ERR_IO, "cannot move %s to %s", from, to);
    }
    snprintf(file, sizeof file, "model-%s.so", stem);
    if (!st) cJSON_AddItemToArray(vs, variant_json(m, file, wfile));
    if (!st && o->log) fprintf(o->log, "added %s for %s (weights %s)\n", file, target, wfile);
    cJSON_Delete(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "cannot remove %s", scratch);
    return st;
}

/* Writes the fat manifest: m with "variants" (CUDA first, then the CPU targets) and "weight_files". */
static ig_status write_manifest(const cc_options *o, cJSON *m, cJSON *cuda_v, cJSON *cpu_vs, fat_layouts *l, ig_err *err) {
    cJSON *vs = cJSON_CreateArray(), *v;
    if (cuda_v) cJSON_AddItemToArray(vs, cuda_v);
    while ((v = cJSON_DetachItemFromArray(cpu_vs, 0))) cJSON_AddItemToArray(vs, v);
    cJSON_AddItemToObject(m, "variants", vs);
    if (l->n > 1) {
        cJSON *wf = cJSON_AddArrayToObject(m, "weight_files");
        for (int i = 1; i < l->n; i++) cJSON_AddItemToArray(wf, l->w[i]);
        l->n = 1; /* now m's */
    }
    char *text = cJSON_Print(m), path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", o->out_dir);
    ig_status st = text ? rt_write_file(path, text, strlen(text), err) : ig_fail(err, IG_ERR_NOMEM, "manifest: out of memory");
    free(text);
    return st;
}

ig_status cc_compile_fat(const cc_options *o, ig_err *err) {
    fat_list f;
    if (o->tp > 1)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "--target %s with --tp %d: a fat package holds one rank's code per "
                       "target; compile a tensor-parallel package for one target", o->target, o->tp);
    ig_status st = split_targets(o->target, &f, err);
    if (st) return st;
    if (o->tune && *o->tune && !f.cuda[0])
        return ig_fail(err, IG_ERR_INVALID, "--tune %s: the compile-time tuning keys tune CUDA targets, and %s holds none",
                       o->tune, o->target);
    cc_options o0 = *o;
    o0.target = f.cpu[0]->name;
    o0.tune = NULL;
    if ((st = cc_compile(&o0, err))) return st;
    cJSON *m;
    if ((st = read_manifest(o->out_dir, &m, err))) return st;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m, "dtype");
    char dtype[16];
    snprintf(dtype, sizeof dtype, "%s", cJSON_IsString(dt) ? dt->valuestring : "f32");
    const char *vdtype = o->quant ? o->dtype : dtype;
    fat_layouts l = {.w = {cJSON_GetObjectItemCaseSensitive(m, "weights")}, .n = 1};
    cJSON *cpu_vs = cJSON_CreateArray(), *cuda_vs = cJSON_CreateArray();
    cJSON_AddItemToArray(cpu_vs, variant_json(m, "model.so", "weights.bin"));
    for (int i = 1; i < f.n_cpu && !st; i++) {
        const char *full = f.cpu[i]->full_name;
        st = add_variant(o, f.cpu[i]->name, full, vdtype, NULL, &l, cpu_vs, err);
    }
    if (!st && f.cuda[0]) st = add_variant(o, f.cuda, "cuda", vdtype, o->tune, &l, cuda_vs, err);
    if (!st) st = write_manifest(o, m, cJSON_DetachItemFromArray(cuda_vs, 0), cpu_vs, &l, err);
    for (int i = 1; i < l.n; i++) cJSON_Delete(l.w[i]);
    cJSON_Delete(cpu_vs);
    cJSON_Delete(cuda_vs);
    cJSON_Delete(m);
    if (!st && o->log)
        fprintf(o->log, "fat package %s: %d CPU target(s)%s%s, %s\n", o->out_dir, f.n_cpu, f.cuda[0] ? " and " : "", f.cuda,
                f.cuda[0] ? "a weights file per layout" : "one weights.bin");
    return st;
}
