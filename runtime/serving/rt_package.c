/* rt_package.c — package loading and the model instance (see rt_package.h). */
#include "rt_package.h"
#include "tuning.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ignis.h"
#include "pkg_file.h"
#include "rt_gpu.h"
#include "rt_tp.h"
#include "rt_util.h"

static const cJSON *req(const cJSON *o, const char *key, const char *file, ig_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) ig_fail(err, IG_ERR_FORMAT, "%s: missing key \"%s\"", file, key);
    return v;
}

/* v is a JSON number holding an integer in [lo, hi] (so a cast of it is defined). */
static int int_in(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi && v->valuedouble == floor(v->valuedouble);
}

/* The manifest's "generation" ids: bos (-1 = none) and up to 8 eos ids, each inside the
 * vocabulary of model.so (an eos id past it would index past a logits row). */
static ig_status read_generation(rt_package *p, const cJSON *gen, const char *mpath, ig_err *err) {
    int32_t V = p->desc->vocab;
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(gen, "bos_token_id"), *e;
    if (bos && !cJSON_IsNull(bos)) {
        if (!int_in(bos, -1, V - 1))
            return ig_fail(err, IG_ERR_FORMAT, "%s: generation.bos_token_id is %g, not a token id of the vocabulary of %d",
                           mpath, cJSON_IsNumber(bos) ? bos->valuedouble : NAN, V);
        p->bos_id = (int32_t)bos->valuedouble;
    }
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_ids");
    if (eos && !cJSON_IsArray(eos)) return ig_fail(err, IG_ERR_FORMAT, "%s: generation.eos_token_ids is not a list", mpath);
    if (cJSON_GetArraySize(eos) > 8)
        return ig_fail(err, IG_ERR_FORMAT, "%s: generation.eos_token_ids lists %d ids, at most 8", mpath, cJSON_GetArraySize(eos));
    cJSON_ArrayForEach(e, eos) {
        if (!int_in(e, 0, V - 1))
            return ig_fail(err, IG_ERR_FORMAT, "%s: generation.eos_token_ids holds %g, not a token id of the vocabulary of %d",
                           mpath, cJSON_IsNumber(e) ? e->valuedouble : NAN, V);
        p->eos_ids[p->n_eos++] = (int32_t)e->valuedouble;
    }
    return IG_OK;
}

void rt_package_close(rt_package *p) {
    if (!p) return;
    if (p->weights && p->weights != MAP_FAILED) munmap((void *)p->weights, p->weights_bytes);
    if (p->dl) dlclose(p->dl);
    if (p->gpu_lib) dlclose(p->gpu_lib);
    rt_tp_close(p->tp);
    free(p->dir);
    free(p);
}

/* ---- weight hashes, on plain threads joined before returning: an OpenMP region here would leave
 * a thread pool behind on the caller's thread (libgomp keeps one per thread that starts a
 * region), and a second pool beside the engine scheduler's makes libgomp count more threads than
 * CPUs and throttle its spin-waits, so every barrier of every forward step sleeps in a futex
 * (measured: 7000 instead of 400 context switches for 36 SmolLM2 tokens, ~2 ms/token). */
typedef struct hash_job {
    const rt_package *p;
    const uint64_t *want;
    int n;
    int next;  /* the next weight to check (atomic) */
    int bad;   /* the lowest mismatching weight, or n (atomic min) */
} hash_job;

static void *hash_worker(void *arg) {
    hash_job *j = arg;
    for (int k; (k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->n;) {
        const ig_weight_info *wi = &j->p->desc->weights[k];
        if (rt_hash64(j->p->weights + wi->offset, wi->nbytes, 0) == j->want[k]) continue;
        int cur = __atomic_load_n(&j->bad, __ATOMIC_RELAXED);
        while (k < cur && !__atomic_compare_exchange_n(&j->bad, &cur, k, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
    return NULL;
}

/* The lowest weight index whose hash is not want[k], or -1 when all match. */
static int first_bad_weight(const rt_package *p, const uint64_t *want, int n) {
    hash_job j = {.p = p, .want = want, .n = n, .next = 0, .bad = n};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu, started = 0;
    pthread_t th[16];
    for (int t = 1; t < nth && t < n; t++)
        if (pthread_create(&th[started], NULL, hash_worker, &j) == 0) started++;
    hash_worker(&j); /* the caller works too (and alone if no thread could start) */
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    return j.bad < n ? j.bad : -1;
}

/* ---- fat packages: "variants", one model object per target, best first (CUDA before CPU). */

typedef struct rt_variant {
    const char *target, *file, *weights; /* weights: the weights file it reads (NULL: the manifest's "weights") */
    const char *archs;                   /* CUDA: "sm_80,sm_90" (NULL: a CPU variant) */
    int ptx;                             /* CUDA: the PTX's arch (0: none) */
    uint32_t features;                   /* CPU: IG_CPU_* bits it needs */
} rt_variant;

/* The variant v of a manifest, its fields checked (names within the sizes of rt_package's copies). */
static ig_status read_variant(const cJSON *v, const char *mpath, const rt_package *p, rt_variant *out, ig_err *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "target"), *f = cJSON_GetObjectItemCaseSensitive(v, "cpu_features"),
                *file = cJSON_GetObjectItemCaseSensitive(v, "file"), *w = cJSON_GetObjectItemCaseSensitive(v, "weights"),
                *dev = cJSON_GetObjectItemCaseSensitive(v, "device"), *ar = cJSON_GetObjectItemCaseSensitive(v, "cuda_archs"),
                *ptx = cJSON_GetObjectItemCaseSensitive(v, "ptx");
    int cuda = cJSON_IsString(dev) && !strcmp(dev->valuestring, "cuda");
    if (!cJSON_IsString(t) || !int_in(f, 0, UINT32_MAX) || !cJSON_IsString(file) || strlen(t->valuestring) >= sizeof p->target ||
        strlen(file->valuestring) >= sizeof p->model_file || strchr(file->valuestring, '/') ||
        (w && (!cJSON_IsString(w) || strchr(w->valuestring, '/') || strlen(w->valuestring) >= sizeof p->weights_file)) ||
        (dev && !cJSON_IsString(dev)) || (cuda && (!cJSON_IsString(ar) || (ptx && !int_in(ptx, 0, 1000)))))
        return ig_fail(err, IG_ERR_FORMAT, "%s: a variant needs a target, cpu_features and a file name in the package "
                       "(CUDA ones their cuda_archs)", mpath);
    *out = (rt_variant){.target = t->valuestring, .file = file->valuestring, .weights = w ? w->valuestring : NULL,
                        .archs = cuda ? ar->valuestring : NULL, .ptx = cuda && ptx ? (int)ptx->valuedouble : 0,
                        .features = (uint32_t)f->valuedouble};
    return IG_OK;
}

/* Whether CPU variant v runs here: this architecture, and its features. */
static int cpu_runs(const rt_variant *v, uint32_t have) {
    size_t al = strlen(rt_host_arch());
    return !v->archs && !strncmp(v->target, "cpu-", 4) && !strncmp(v->target + 4, rt_host_arch(), al) &&
           v->target[4 + al] == '-' && (v->features & have) == v->features;
}

/* Whether the caller's device choice (NULL / "auto": any; "cpu", "cuda", or a target name) admits v. */
static int device_admits(const char *device, const rt_variant *v) {
    if (!device || !*device || !strcmp(device, "auto")) return 1;
    if (!strcmp(device, "cpu")) return !v->archs;
    if (!strcmp(device, "cuda")) return v->archs != NULL;
    return !strcmp(device, v->target);
}

/* Why CUDA variant v does or does not run on the probed GPU, into buf. */
static void gpu_reason(const rt_gpu_probe *g, int gpu_index, const rt_variant *v, int runs, char *buf, size_t cap) {
    if (!g->cc) snprintf(buf, cap, "%s", g->why);
    else if (runs) snprintf(buf, cap, "GPU %d is %s (sm_%d), which its code runs on", gpu_index, g->name, g->cc);
    else snprintf(buf, cap, "GPU %d is %s (sm_%d), and the code holds cubins for %s and PTX of compute_%d, none of which "
                  "runs there", gpu_index, g->name, g->cc, v->archs, v->ptx);
}

/* Chooses variant k of vs[n] for this machine and the caller's device choice: the first (best)
 * CUDA variant whose code runs on GPU gpu_index, else the first CPU variant this CPU runs.
 * p->choice says which and why. */
static ig_status choose_variant(const rt_variant *vs, int n, const char *device, int gpu_index, rt_package *p, int *k,
                                ig_err *err) {
    uint32_t have = rt_cpu_features();
    const char *forced = device && *device && strcmp(device, "auto") ? device : NULL;
    char tried[512] = "", gpu[512] = "";
    size_t used = 0;
    rt_gpu_probe g = {0};
    int probed = 0;
    for (int i = 0; i < n; i++) {
        const rt_variant *v = &vs[i];
        if (!device_admits(device, v)) continue;
        if (v->archs && !probed) rt_gpu_probe_run(gpu_index, &g), probed = 1;
        int ok = v->archs ? rt_gpu_arch_runs(v->archs, v->ptx, g.cc) : cpu_runs(v, have);
        if (v->archs) gpu_reason(&g, gpu_index, v, ok, gpu, sizeof gpu);
        if (ok) {
            *k = i;
            p->gpu_lib = v->archs ? g.lib : NULL; /* the driver stays open for the model's init */
            if (!v->archs) rt_gpu_probe_close(&g);
            if (v->archs) snprintf(p->choice, sizeof p->choice, "%s (%s): %s%s%s", v->target, v->file, gpu,
                                   forced ? "; --device " : "", forced ? forced : "");
            else if (forced) snprintf(p->choice, sizeof p->choice, "%s (%s): --device %s", v->target, v->file, forced);
            else snprintf(p->choice, sizeof p->choice, "%s (%s): the best of its CPU targets that this CPU runs%s%s", v->target, v->file,
                          probed ? "; the package's CUDA code is not used: " : "", probed ? gpu : "");
            return IG_OK;
        }
        used += snprintf(tried + used, used < sizeof tried ? sizeof tried - used : 0, "%s%s", used ? ", " : "", v->target);
    }
    rt_gpu_probe_close(&g);
    char hb[128];
    rt_cpu_feature_names(have, hb, sizeof hb);
    if (!used)
        return ig_fail(err, IG_ERR_INVALID, "%s holds no %s target (--device %s; ignis inspect lists its targets)", p->dir,
                       device, device);
    if (forced)
        return ig_fail(err, probed ? IG_ERR_MISMATCH : IG_ERR_CPU, "%s: --device %s asks for %s, which cannot run here: %s",
                       p->dir, forced, tried, probed ? gpu : "this CPU lacks its features");
    return ig_fail(err, IG_ERR_CPU, "%s holds code for %s, none of which runs on this %s machine (this CPU has: %s%s%s); "
                   "recompile with --target cpu", p->dir, tried, rt_host_arch(), hb, probed ? "; CUDA: " : "", probed ? gpu : "");
}

/* A fat package's "variants": picks the variant this machine runs (choose_variant) and puts its
 * target, file, weights file, device and features in p and *need. No "variants": model.so, the
 * manifest's own target and weights; a device choice must then name the package's device. */
static ig_status pick_variant(const cJSON *m, const char *mpath, const rt_open_opts *opts, rt_package *p, uint32_t *need,
                              ig_err *err) {
    snprintf(p->model_file, sizeof p->model_file, "model.so");
    const char *device = opts ? opts->device : NULL;
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(m, "variants"), *v;
    if (!vs) {
        rt_variant one = {.target = p->target, .archs = strncmp(p->target, "cuda", 4) ? NULL : ""};
        if (!device_admits(device, &one))
            return ig_fail(err, IG_ERR_INVALID, "%s holds only %s: --device %s is not among its targets", p->dir, p->target, device);
        return IG_OK;
    }
    if (!cJSON_IsArray(vs) || cJSON_GetArraySize(vs) < 1 || cJSON_GetArraySize(vs) > 16)
        return ig_fail(err, IG_ERR_FORMAT, "%s: variants is not an array of 1 to 16 targets", mpath);
    rt_variant all[16];
    int n = 0, k = 0;
    ig_status st = IG_OK;
    cJSON_ArrayForEach(v, vs) if (!st) st = read_variant(v, mpath, p, &all[n++], err);
    if (!st) st = choose_variant(all, n, device, opts ? opts->device_index : 0, p, &k, err);
    if (st) return st;
    snprintf(p->target, sizeof p->target, "%s", all[k].target);
    snprintf(p->model_file, sizeof p->model_file, "%s", all[k].file);
    if (all[k].weights) snprintf(p->weights_file, sizeof p->weights_file, "%s", all[k].weights);
    p->n_variants = n;
    *need = all[k].archs ? 0 : all[k].features;
    return IG_OK;
}

/* The weights table of the chosen variant: the manifest's "weights", or the entry of its
 * "weight_files" whose file the variant reads (a fat package's other layouts). */
static const cJSON *variant_weights(const cJSON *m, const rt_package *p, const char *mpath, ig_err *err) {
    const cJSON *w = req(m, "weights", mpath, err), *e;
    if (!w || !p->weights_file[0]) return w;
    const cJSON *wf = cJSON_GetObjectItemCaseSensitive(w, "file");
    if (cJSON_IsString(wf) && !strcmp(wf->valuestring, p->weights_file)) return w;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "weight_files")) {
        wf = cJSON_GetObjectItemCaseSensitive(e, "file");
        if (cJSON_IsString(wf) && !strcmp(wf->valuestring, p->weights_file)) return e;
    }
    ig_fail(err, IG_ERR_FORMAT, "%s: %s reads %s, which weight_files does not describe", mpath, p->target, p->weights_file);
    return NULL;
}

/* A manifest tensor's hash on `rank`: "hash", or of a tensor-parallel package "rank_hashes"[rank]
 * (NULL when missing: the caller's check names it). */
static const cJSON *tensor_hash(const cJSON *e, int32_t rank) {
    const cJSON *rh = cJSON_GetObjectItemCaseSensitive(e, "rank_hashes");
    if (!rh) return rank ? NULL : cJSON_GetObjectItemCaseSensitive(e, "hash");
    return cJSON_GetArrayItem(rh, rank);
}

/* ---- one-file bundles (pkg_file.h): the package is the running executable, its model code is
 * linked into it and exported under pkgf_entry_symbol names, its weights lie at an offset of it. */

/* The bundle at dir is this process's own executable: its code is what runs. */
static ig_status check_self(const char *dir, ig_err *err) {
    struct stat a, b;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1); /* (a stat of the link itself: not under qemu-user) */
    if (stat(dir, &a) != 0) return ig_fail(err, IG_ERR_IO, "%s: %s", dir, strerror(errno));
    if (n > 0) self[n] = 0;
    if (n <= 0 || stat(self, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s is a one-file bundle: its model code runs only inside it "
                       "(run '%s generate ...' rather than opening it from another program)", dir, dir);
    return IG_OK;
}

/* A package given as a file: a bundle that is this process's executable, and (verify) each of its
 * entries but the weights files (weights*.bin, whose tensors are hashed one by one later) matches its hash: the
 * executable itself ("code"), the manifest, the tokenizer files. */
static ig_status check_bundle(const char *dir, int verify, ig_err *err) {
    pkgf_bundle *b = malloc(sizeof *b);
    int fd = -1;
    ig_status st = b ? pkgf_open(dir, b, &fd, err) : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    if (st == IG_ERR_FORMAT) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        ig_fail(err, st, "%s is not an ignis package (a folder) nor a one-file bundle: %s", dir, why);
    }
    if (!st) st = check_self(dir, err);
    void *map = st || !verify ? MAP_FAILED : mmap(NULL, b->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (!st && verify && map == MAP_FAILED) st = ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", dir, strerror(errno));
    for (int32_t k = 0; !st && map != MAP_FAILED && k < b->n; k++) {
        const pkgf_entry *e = &b->e[k];
        size_t nl = strlen(e->name);
        if (!strncmp(e->name, "weights", 7) && nl > 4 && !strcmp(e->name + nl - 4, ".bin")) continue; /* hashed per tensor */
        if (rt_hash64((const uint8_t *)map + e->offset, e->size, 0) != e->hash)
            st = ig_fail(err, IG_ERR_MISMATCH, "%s: the bundle's %s does not match its hash (corrupt or modified bundle)", dir,
                         !strcmp(e->name, "code") ? "executable part (code)" : e->name);
    }
    if (map != MAP_FAILED) munmap(map, b->file_size);
    if (fd >= 0) close(fd);
    free(b);
    return st;
}

/* p->dl and p->desc: model.so (or a fat package's variant) from the package directory; in a bundle
 * the executable's own linked-in entry of that object. */
static ig_status load_code(rt_package *p, ig_err *err) {
    char path[4096], sym[128];
    ig_model_entry_fn entry;
    if (pkgf_is_file(p->dir)) { /* checked by check_bundle */
        pkgf_entry_symbol(p->model_file, sym, sizeof sym);
        snprintf(path, sizeof path, "%s (linked-in %s)", p->dir, p->model_file);
        p->dl = dlopen(NULL, RTLD_NOW);
    } else {
        snprintf(sym, sizeof sym, "%s", IG_MODEL_ENTRY_SYMBOL);
        snprintf(path, sizeof path, "%s/%s", p->dir, p->model_file);
        p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!p->dl) return ig_fail(err, IG_ERR_IO, "cannot load %s: %s", path, dlerror());
    entry = (ig_model_entry_fn)dlsym(p->dl, sym);
    p->desc = entry ? entry() : NULL;
    if (!p->desc || p->desc->abi_version != IG_MODEL_ABI_VERSION)
        return ig_fail(err, IG_ERR_MISMATCH, "%s: no %s symbol of ABI version %u", path, sym, IG_MODEL_ABI_VERSION);
    return IG_OK;
}

/* Maps the weights (wfile of the manifest, or rank's weights.rankR.bin) read-only: a file of the
 * package directory, or the bundle's entry of that name at its page-aligned offset; the size must be
 * the manifest's. path (cap bytes) names them for later messages. */
static ig_status map_weights(rt_package *p, const char *wfile, uint64_t want, int32_t rank, char *path, size_t cap,
                             ig_err *err) {
    uint64_t off = 0, size = 0;
    int fd;
    ig_status st = IG_OK;
    if (pkgf_is_file(p->dir)) {
        pkgf_bundle *b = malloc(sizeof *b);
        if (!b) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
        snprintf(path, cap, "%s/%s", p->dir, wfile);
        st = pkgf_open(p->dir, b, &fd, err);
        const pkgf_entry *e = st ? NULL : pkgf_find(b, wfile);
        if (!st && !e) st = ig_fail(err, IG_ERR_FORMAT, "%s: the bundle holds no %s", p->dir, wfile);
        if (e) off = e->offset, size = e->size;
        free(b);
        if (st) {
            if (fd >= 0) close(fd);
            return st;
        }
    } else {
        if (p->tp) snprintf(path, cap, "%s/weights.rank%d.bin", p->dir, rank);
        else snprintf(path, cap, "%s/%s", p->dir, wfile);
        fd = open(path, O_RDONLY);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            st = ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            return st;
        }
        size = (uint64_t)sb.st_size;
    }
    if (size != want) {
        close(fd);
        return ig_fail(err, IG_ERR_MISMATCH, "%s: %llu bytes, the manifest says %llu (truncated or replaced?)", path,
                       (unsigned long long)size, (unsigned long long)want);
    }
    p->weights_bytes = size;
    p->weights = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, (off_t)off) : NULL;
    close(fd);
    if (p->weights == MAP_FAILED) {
        p->weights = NULL;
        return ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    }
    return IG_OK;
}

ig_status rt_package_open(const char *dir, const rt_open_opts *opts, rt_package **out, ig_err *err) {
    *out = NULL;
    int verify = opts ? opts->verify_hashes : 1, follower = opts && opts->tp_follower;
    char path[4096], mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    char *text;
    ig_status st = pkgf_is_file(dir) ? check_bundle(dir, verify, err) : IG_OK;
    if (st) return st;
    st = rt_read_file(mpath, &text, NULL, err);
    if (st) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return ig_fail(err, st, "%s is not an ignis package: %s", dir, why);
    }
    cJSON *m = cJSON_Parse(text);
    free(text);
    if (!m) return ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", mpath);
    rt_package *p = calloc(1, sizeof *p);
    if (!p) {
        cJSON_Delete(m);
        return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    }
    p->dir = strdup(dir);
    p->bos_id = -1;
    p->numa_node = -1;
    if (!p->dir) {
        st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
        goto fail;
    }
    const cJSON *abi = req(m, "abi_version", mpath, err), *feat = req(m, "cpu_features", mpath, err),
                *w = req(m, "weights", mpath, err), *target = req(m, "target", mpath, err);
    if (!abi || !feat || !w || !target || !int_in(abi, 0, UINT32_MAX) || !int_in(feat, 0, UINT32_MAX)) {
        st = IG_ERR_FORMAT;
        if (abi && !int_in(abi, 0, UINT32_MAX)) ig_fail(err, st, "%s: abi_version is not a 32-bit unsigned integer", mpath);
        else if (feat && !int_in(feat, 0, UINT32_MAX)) ig_fail(err, st, "%s: cpu_features is not a 32-bit unsigned integer", mpath);
        goto fail;
    }
    if ((uint32_t)abi->valuedouble != IG_MODEL_ABI_VERSION) {
        st = ig_fail(err, IG_ERR_MISMATCH, "%s: package ABI version %u, this runtime speaks %u: recompile the package",
                     mpath, (unsigned)abi->valuedouble, IG_MODEL_ABI_VERSION);
        goto fail;
    }
    snprintf(p->target, sizeof p->target, "%s", cJSON_IsString(target) ? target->valuestring : "?");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m, "dtype");
    snprintf(p->dtype, sizeof p->dtype, "%s", cJSON_IsString(dt) ? dt->valuestring : "?");
    const cJSON *kvt = cJSON_GetObjectItemCaseSensitive(m, "kv_dtype");
    snprintf(p->kv_dtype, sizeof p->kv_dtype, "%s", cJSON_IsString(kvt) ? kvt->valuestring : "?");
    uint32_t need = (uint32_t)feat->valuedouble, have = rt_cpu_features();
    if ((st = pick_variant(m, mpath, opts, p, &need, err))) goto fail;
    size_t al = strlen(rt_host_arch());
    if (!strncmp(p->target, "cpu-", 4) && (strncmp(p->target + 4, rt_host_arch(), al) || p->target[4 + al] != '-')) {
        st = ig_fail(err, IG_ERR_CPU, "%s was compiled for %s, and this runtime runs on %s: recompile it with --target cpu "
                     "(or run it on a machine of its architecture)", dir, p->target, rt_host_arch());
        goto fail;
    }
    if ((need & have) != need) {
        char nb[128], hb[128];
        rt_cpu_feature_names(need & ~have, nb, sizeof nb);
        rt_cpu_feature_names(have, hb, sizeof hb);
        st = ig_fail(err, IG_ERR_CPU,
                     "%s was compiled for %s and needs CPU features this machine lacks: %s (this CPU has: %s); "
                     "recompile with --target %s (or --target cpu, the compiling machine's best)",
                     dir, p->target, nb, hb, rt_cpu_best_target(have));
        goto fail;
    }
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(m, "tokenizer");
    p->has_tokenizer = cJSON_IsTrue(tok);
    const cJSON *hpj = cJSON_GetObjectItemCaseSensitive(m, "hparams");
    p->tie_embeddings = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(hpj, "tie_embeddings"));
    const cJSON *ne = cJSON_GetObjectItemCaseSensitive(hpj, "n_experts"), *nk = cJSON_GetObjectItemCaseSensitive(hpj, "experts_per_token");
    if (cJSON_IsNumber(ne) && cJSON_IsNumber(nk) && ne->valuedouble >= 1 && ne->valuedouble <= 1 << 20 && nk->valuedouble >= 1 &&
        nk->valuedouble <= ne->valuedouble)
        p->n_experts = (int32_t)ne->valuedouble, p->experts_per_token = (int32_t)nk->valuedouble;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(hpj, "kv_window");
    p->kv_window = cJSON_IsNumber(kw) && kw->valuedouble >= 1 && kw->valuedouble <= 1 << 30 ? (int32_t)kw->valuedouble : 0;

    if ((st = load_code(p, err))) goto fail;
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(m, "generation");
    if (gen && (st = read_generation(p, gen, mpath, err))) goto fail;
    if (p->desc->tp > 1 && (st = rt_tp_open(p->desc->tp, dir, &p->tp, err))) goto fail;
    if (p->tp && p->desc->device == IG_DEVICE_CPU) rt_tp_pin_numa(p->tp, &p->numa_node); /* before the weights' pages */
    int32_t rank = rt_tp_rank(p->tp);
    if ((rank > 0) != follower) {
        st = ig_fail(err, IG_ERR_INVALID, rank > 0 ? "%s: this process is rank %d of a tensor-parallel job; ranks "
                     "other than 0 follow rank 0 (ig_tp_follow) instead of opening the package" :
                     "%s: only ranks other than 0 of a tensor-parallel job follow (this is rank %d)", dir, rank);
        goto fail;
    }

    /* the weights: size, table and hashes must match the manifest (a fat package's variant: its layout's) */
    if (!(w = variant_weights(m, p, mpath, err))) {
        st = IG_ERR_FORMAT;
        goto fail;
    }
    const cJSON *wfile = req(w, "file", mpath, err), *wbytes = req(w, "bytes", mpath, err),
                *tensors = req(w, "tensors", mpath, err);
    if (!wfile || !wbytes || !tensors || !cJSON_IsString(wfile) || !int_in(wbytes, 0, 9007199254740992.0)) {
        st = IG_ERR_FORMAT;
        if (wbytes && !int_in(wbytes, 0, 9007199254740992.0)) ig_fail(err, st, "%s: weights.bytes is not a byte count", mpath);
        goto fail;
    }
    if ((st = map_weights(p, wfile->valuestring, (uint64_t)wbytes->valuedouble, rank, path, sizeof path, err))) goto fail;
    if (cJSON_GetArraySize(tensors) != p->desc->n_weights) {
        st = ig_fail(err, IG_ERR_MISMATCH, "%s lists %d weights, model.so expects %d", mpath,
                     cJSON_GetArraySize(tensors), p->desc->n_weights);
        goto fail;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors) {
        const ig_weight_info *wi = &p->desc->weights[i++];
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"),
                    *off = cJSON_GetObjectItemCaseSensitive(e, "offset"),
                    *nb = cJSON_GetObjectItemCaseSensitive(e, "bytes"),
                    *hs = cJSON_GetObjectItemCaseSensitive(e, "hash");
        if (p->tp) hs = tensor_hash(e, rank);
        if (!cJSON_IsString(nm) || !int_in(off, 0, 9007199254740992.0) || !int_in(nb, 0, 9007199254740992.0) || !cJSON_IsString(hs) ||
            strcmp(nm->valuestring, wi->name) || (uint64_t)off->valuedouble != wi->offset ||
            (uint64_t)nb->valuedouble != wi->nbytes) {
            st = ig_fail(err, IG_ERR_MISMATCH, "%s: weight %d (%s) does not match model.so's table", mpath, i - 1, wi->name);
            goto fail;
        }
        if (wi->offset + wi->nbytes > p->weights_bytes) {
            st = ig_fail(err, IG_ERR_MISMATCH, "%s: weight %s lies past the end of weights.bin", mpath, wi->name);
            goto fail;
        }
    }
    if (verify) {
        int n = p->desc->n_weights;
        uint64_t *want = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
        if (!want) {
            st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
            goto fail;
        }
        i = 0;
        cJSON_ArrayForEach(e, tensors) want[i++] = strtoull(tensor_hash(e, rank)->valuestring, NULL, 16);
        int bad = first_bad_weight(p, want, n);
        free(want);
        if (bad >= 0) {
            st = ig_fail(err, IG_ERR_MISMATCH, "%s: weight %s does not match its hash in the manifest (corrupt or modified weights)",
                         path, p->desc->weights[bad].name);
            goto fail;
        }
    }
    cJSON_Delete(m);
    *out = p;
    return IG_OK;
fail:
    cJSON_Delete(m);
    if (rt_tp_rank(p->tp) > 0) rt_tp_abandon(p->tp); /* rank 0 goes on without this rank: the job must end */
    rt_package_close(p);
    return st;
}

/* The manifest's "tp" (1 when absent): the ranks a package is sharded for. */
static ig_status manifest_ranks(const char *dir, int32_t *ranks, ig_err *err) {
    char mpath[4096], *text;
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    ig_status st = rt_read_file(mpath, &text, NULL, err);
    if (st) return st;
    cJSON *m = cJSON_Parse(text);
    free(text);
    if (!m) return ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", mpath);
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(m, "tp");
    *ranks = 1;
    if (tp && !int_in(tp, 1, 4096)) st = ig_fail(err, IG_ERR_FORMAT, "%s: \"tp\" is not a number of ranks", mpath);
    else if (tp) *ranks = (int32_t)tp->valuedouble;
    cJSON_Delete(m);
    return st;
}

ig_status ig_tp_follow(const char *pkg_dir, int *followed, ig_err *err) {
    if (!pkg_dir || !followed) return ig_fail(err, IG_ERR_INVALID, "ig_tp_follow: NULL argument");
    *followed = 0;
    int32_t ranks = 1, rank = 0;
    ig_err ignored;
    if (manifest_ranks(pkg_dir, &ranks, &ignored) || ranks <= 1) return IG_OK; /* opening it says what is wrong */
    int started = 0;
    ig_status st;
    if ((st = rt_tp_job_rank(ranks, pkg_dir, &rank, &started, err)) || rank == 0) return st;
    rt_open_opts oo = {.verify_hashes = 1, .tp_follower = 1};
    rt_package *p;
    if ((st = rt_package_open(pkg_dir, &oo, &p, err))) return st; /* rank 0 waits: the job must end */
    st = rt_tp_follow(p, err);
    rt_package_close(p);
    if (st) return st;
    if (started) rt_tp_finalize();
    *followed = 1;
    return IG_OK;
}

/* m->tuning from the defaults and the caller's string; CPU code has no run-time knobs, so a key
 * there is a mistake worth naming. */
static ig_status model_tuning(rt_model *m, const char *tune, ig_err *err) {
    tune_run_defaults(&m->tuning);
    m->ctx.tuning = &m->tuning;
    if (m->pkg->desc->device == IG_DEVICE_CPU) {
        if (!tune || !*tune) return IG_OK;
        ig_status st = tune_apply(TUNE_RUN, tune, "tune", &m->tuning, err);
        if (st) return st;
        return ig_fail(err, IG_ERR_INVALID, "tune '%s': run-time tuning keys are for CUDA packages; %s targets %s",
                       tune, m->pkg->dir, m->pkg->target);
    }
    return tune_apply(TUNE_RUN, tune, "tune", &m->tuning, err);
}

/* Bytes of RAM available to new allocations (MemAvailable; without /proc, free pages), 0 unknown. */
static uint64_t ram_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (uint64_t)kb << 10;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

/* The KV pool of a host target when the caller left the size to us: what max_seqs full contexts
 * need, as far as kv_fraction of the available RAM (after the workspace) allows. */
static int64_t host_kv_pages(const ig_model_desc *d, const rt_model_opts *o, int32_t max_seqs, uint64_t ws_bytes) {
    int64_t need = (int64_t)((d->max_context + d->page_size - 1) / d->page_size) * max_seqs;
    if (o->kv_fraction <= 0.0f) { /* the old default, for tools that run one sequence */
        int64_t cap = (int64_t)((1ull << 30) / d->kv_page_bytes);
        return need > cap ? (cap > 0 ? cap : 1) : need;
    }
    uint64_t ram = ram_available();
    double room = ram > ws_bytes ? (double)(ram - ws_bytes) * o->kv_fraction : 0.0;
    int64_t fit = (int64_t)(room / (double)d->kv_page_bytes);
    if (!ram) fit = need; /* unknown: trust the context */
    return fit < need ? fit : need;
}

/* Host-tier pages for opts o (rt_model_opts.kv_host_bytes). */
static int32_t host_tier_pages(const rt_package *pkg, const rt_model_opts *o) {
    const ig_model_desc *d = pkg->desc;
    if (pkg->tp || o->kv_host_bytes == 0 || (d->device != IG_DEVICE_CPU && !d->kv_page_copy)) return 0;
    if (o->kv_host_bytes < 0 && d->device == IG_DEVICE_CPU) return 0;
    double bytes = o->kv_host_bytes > 0 ? (double)o->kv_host_bytes : (double)ram_available() / 8.0;
    double pages = bytes / (double)d->kv_page_bytes;
    return pages >= (double)INT32_MAX ? INT32_MAX : (int32_t)pages;
}

ig_status rt_model_kv_copy(rt_model *m, int to_host, int32_t page, int32_t hp, ig_err *err) {
    const ig_model_desc *d = m->pkg->desc;
    if (page < 0 || page >= m->ctx.n_pages || hp < 0 || hp >= m->n_host_pages)
        return ig_fail(err, IG_ERR_INVALID, "KV page %d / host page %d out of range (%d / %d)", page, hp, m->ctx.n_pages,
                       m->n_host_pages);
    if (d->device != IG_DEVICE_CPU) {
        int rc = d->kv_page_copy(&m->ctx, to_host, page, hp);
        if (rc == -2) return ig_fail(err, IG_ERR_NOMEM, "no pinned host memory for the KV host tier");
        return rc ? ig_fail(err, IG_ERR_INTERNAL, "the KV page copy failed (code %d)", rc) : IG_OK;
    }
    const int32_t c = hp / RT_HOST_CHUNK_PAGES;
    if (!m->host_chunks[c]) {
        if (!to_host) return ig_fail(err, IG_ERR_INVALID, "host page %d was never written", hp);
        m->host_chunks[c] = malloc((size_t)RT_HOST_CHUNK_PAGES * d->kv_page_bytes);
        if (!m->host_chunks[c]) return ig_fail(err, IG_ERR_NOMEM, "out of memory for the KV host tier");
    }
    uint8_t *h = m->host_chunks[c] + (size_t)(hp % RT_HOST_CHUNK_PAGES) * d->kv_page_bytes;
    uint8_t *p = m->ctx.kv_pool + (size_t)page * d->kv_page_bytes;
    memcpy(to_host ? h : p, to_host ? p : h, d->kv_page_bytes);
    return IG_OK;
}

/* Rank 0 of a tensor-parallel package: the other ranks make the same instance (rt_tp_follow). */
static ig_status announce(const rt_package *pkg, rt_model *m, ig_err *err) {
    return pkg->tp && rt_tp_rank(pkg->tp) == 0 ? rt_tp_announce_model(pkg->tp, m, err) : IG_OK;
}

ig_status rt_model_new(const rt_package *pkg, const rt_model_opts *o, rt_model **out, ig_err *err) {
    *out = NULL;
    const ig_model_desc *d = pkg->desc;
    rt_model_opts def = {0};
    if (!o) o = &def;
    rt_model *m = calloc(1, sizeof *m);
    if (!m) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    m->pkg = pkg;
    m->tp_id = -1;
    m->ctx.comm = rt_tp_comm(pkg->tp);
    m->max_seqs = o->max_seqs > 0 ? o->max_seqs : 1;
    m->ctx.max_tokens = o->max_tokens > 0 ? o->max_tokens : 512;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    m->ctx.n_threads = o->n_threads > 0 ? o->n_threads : (ncpu > 0 ? (int32_t)ncpu : 1);
    int64_t np = o->n_pages;
    if (np <= 0 && (d->device == IG_DEVICE_CPU || o->kv_fraction <= 0.0f))
        np = host_kv_pages(d, o, m->max_seqs, d->workspace_bytes(m->ctx.max_tokens, m->ctx.n_threads));
    if (np > INT32_MAX) np = INT32_MAX;
    if (np < 0) np = 0;
    m->ctx.n_pages = (int32_t)np; /* device targets: 0 = init sizes it by kv_fraction */
    m->ctx.kv_fraction = o->kv_fraction;
    m->ctx.weights = pkg->weights;
    m->ctx.device_index = o->device_index;
    m->n_host_pages = host_tier_pages(pkg, o);
    if (d->device != IG_DEVICE_CPU) m->ctx.n_host_pages = m->n_host_pages;
    ig_status ts = model_tuning(m, o->tune, err);
    if (ts) {
        rt_model_free(m);
        return ts;
    }
    if (d->device != IG_DEVICE_CPU) {
        /* the model owns device memory: KV pool, workspace, weights copy; tensor parallel: GPU r for rank r */
        char msg[512] = "";
        m->ctx.device_index += rt_tp_rank(pkg->tp);
        if (!d->init || d->init(&m->ctx, msg, sizeof msg) != 0) {
            m->ctx.device_state = NULL;
            rt_model_free(m);
            return ig_fail(err, IG_ERR_INVALID, "%s: %s", pkg->dir, msg[0] ? msg : "device initialization failed");
        }
        m->n_host_pages = m->ctx.n_host_pages; /* the model may have turned it down */
        ig_status st = announce(pkg, m, err);
        if (!st && pkg->tp) st = rt_tp_attach_device(pkg->tp, m->ctx.device_index, err);
        if (st) {
            rt_model_free(m);
            return st;
        }
        *out = m;
        return IG_OK;
    }
    if (np < 1) {
        rt_model_free(m);
        return ig_fail(err, IG_ERR_NOMEM, "no room for a KV cache page (%.1f MB) in the available memory",
                       d->kv_page_bytes / 1e6);
    }
    uint64_t kv_bytes = (uint64_t)np * d->kv_page_bytes;
    uint64_t ws_bytes = d->workspace_bytes(m->ctx.max_tokens, m->ctx.n_threads);
    /* an anonymous mapping: zeroed, page-aligned, and committed only as sequences fill it */
    void *kv = mmap(NULL, kv_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (kv != MAP_FAILED) m->ctx.kv_pool = kv, m->kv_map_bytes = kv_bytes;
#if defined(MADV_HUGEPAGE)
    /* huge pages where the kernel offers them (THP "madvise" mode): a context's KV pages lie
     * apart in the pool (a page holds every layer), so with 4 KB pages each page of each layer
     * is a TLB miss the attention kernels' prefetches cannot hide; failure changes nothing */
    if (kv != MAP_FAILED) (void)madvise(kv, kv_bytes, MADV_HUGEPAGE);
#endif
    m->ctx.workspace = aligned_alloc(64, (ws_bytes + 63) & ~63ull);
    if (m->n_host_pages > 0) {
        m->n_host_chunks = (int32_t)(((int64_t)m->n_host_pages + RT_HOST_CHUNK_PAGES - 1) / RT_HOST_CHUNK_PAGES);
        m->host_chunks = calloc((size_t)m->n_host_chunks, sizeof *m->host_chunks);
        if (!m->host_chunks) m->n_host_pages = m->n_host_chunks = 0; /* no tier then */
    }
    if (!m->ctx.kv_pool || !m->ctx.workspace) {
        rt_model_free(m);
        return ig_fail(err, IG_ERR_NOMEM, "cannot allocate %.1f MB of KV cache and %.1f MB of workspace",
                       kv_bytes / 1e6, ws_bytes / 1e6);
    }
    ig_status st = announce(pkg, m, err);
    if (st) {
        rt_model_free(m);
        return st;
    }
    *out = m;
    return IG_OK;
}

void rt_model_free(rt_model *m) {
    if (!m) return;
    if (m->tp_id >= 0 && rt_tp_rank(m->pkg->tp) == 0) rt_tp_announce_free(m->pkg->tp, m);
    if (m->ctx.device_state && m->pkg->desc->fini) m->pkg->desc->fini(&m->ctx);
    if (m->kv_map_bytes) munmap(m->ctx.kv_pool, m->kv_map_bytes);
    for (int32_t i = 0; i < m->n_host_chunks; i++) free(m->host_chunks[i]);
    free(m->host_chunks);
    free(m->ctx.workspace);
    free(m);
}

ig_status rt_model_forward(rt_model *m, const ig_fwd_batch *b, ig_err *err) {
    const ig_model_desc *d = m->pkg->desc;
    if (b->n_tokens < 1 || b->n_tokens > m->ctx.max_tokens)
        return ig_fail(err, IG_ERR_INVALID, "step has %d tokens; this model instance takes 1..%d", b->n_tokens, m->ctx.max_tokens);
    if (b->n_seqs < 1) return ig_fail(err, IG_ERR_INVALID, "step has no sequences");
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t id = b->token_ids[t], s = b->token_seq[t], p = b->positions[t];
        if (id < 0 || id >= d->vocab)
            return ig_fail(err, IG_ERR_INVALID, "token id %d (at index %d) is out of range: the vocabulary has %d tokens", id, t, d->vocab);
        if (s < 0 || s >= b->n_seqs) return ig_fail(err, IG_ERR_INVALID, "token %d names sequence %d of %d", t, s, b->n_seqs);
        if (p < 0 || p >= d->max_context)
            return ig_fail(err, IG_ERR_INVALID, "position %d (token %d) is beyond the model's context of %d tokens", p, t, d->max_context);
        if (p / d->page_size >= b->max_pages_per_seq)
            return ig_fail(err, IG_ERR_INVALID, "position %d (token %d) has no page in its page table", p, t);
        int32_t pg = b->page_table[s * b->max_pages_per_seq + p / d->page_size];
        if (pg < 0 || pg >= m->ctx.n_pages) return ig_fail(err, IG_ERR_INVALID, "page %d for position %d is not in the pool", pg, p);
    }
    for (int32_t i = 0; i < b->n_out; i++)
        if (b->out_rows[i] < 0 || b->out_rows[i] >= b->n_tokens)
            return ig_fail(err, IG_ERR_INVALID, "logit row %d is not a token of the step", b->out_rows[i]);
    if (b->sample && !(d->caps & IG_MODEL_CAP_SAMPLE))
        return ig_fail(err, IG_ERR_INVALID, "device sampling asked of a package that cannot sample (target %s)", m->pkg->target);
    if (b->masks && !(b->sample && (d->caps & IG_MODEL_CAP_MASK)))
        return ig_fail(err, IG_ERR_INVALID, "token masks given to a package that cannot apply them (target %s)", m->pkg->target);
    for (int32_t i = 0; i < b->n_out; i++)
        if (!b->logits && !(b->sample && b->sample[i].on))
            return ig_fail(err, IG_ERR_INVALID, "logit row %d is neither copied back (logits is NULL) nor sampled on the device", i);
    ig_status ts = m->tp_id >= 0 ? rt_tp_step_begin(m->pkg->tp, m, b, err) : IG_OK; /* rank 0 of a TP package */
    if (ts) return ts;
    int rc = d->forward(&m->ctx, b);
    if (m->tp_id >= 0) rt_tp_step_end(m->pkg->tp);
    if (rc == IG_MODEL_ERR_COMM) return ig_fail(err, IG_ERR_IO, "a tensor-parallel collective failed in the step");
    if (rc <= -IG_DEVICE_ERR) {
        int code = (-rc - IG_DEVICE_ERR) / 10000, line = (-rc - IG_DEVICE_ERR) % 10000;
        int host = line >= IG_DEVICE_ERR_HOST_LINE;
        return ig_fail(err, IG_ERR_INTERNAL, "a device call failed in the step with error %d (%s/src/%s line %d)", code,
                       m->pkg->dir, host ? "host_runtime.c" : "model.c", host ? line - IG_DEVICE_ERR_HOST_LINE : line);
    }
    if (rc != 0) return ig_fail(err, IG_ERR_INTERNAL, "model forward rejected the step (code %d)", rc);
    return IG_OK;
}
