/* bundle.c — one-file bundles (see bundle.h; the file layout is pkg_file.h's).
 *
 * Steps: read the package's manifest (not a tensor-parallel package: it runs as several processes);
 * find the bundle runtime and its architecture (the `kit` file: "ARCH CC OBJCOPY"); take the model
 * objects whose host code is of that architecture (CPU targets of it; CUDA targets compiled on such
 * a host: their host code, with the cubins and PTX assembled in, opens the driver and cuBLAS with
 * dlopen at init, as in a package: templates/cuda/host.h); make their hidden
 * symbols local and rename each entry (objcopy), so that a fat package's variants, which share
 * every kernel name, link side by side; link them with the runtime archive into a stripped
 * executable that exports only the entries (--export-dynamic-symbol: the loader finds them with
 * dlsym on the executable itself); append the package files, the weights files the linked
 * variants read (page-aligned) and the directory. The work happens
 * in FILE.parts-XXXXXX beside the output, which is written as FILE.tmp and renamed at the end. */
#include "bundle.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ig_model_abi.h"
#include "pkg_file.h"
#include "rt_util.h"

enum { BD_MAX_VARIANTS = 16 };

typedef struct bd_kit {
    char dir[PATH_MAX - 64];
    char arch[32], cc[1024], objcopy[1024];
} bd_kit;

typedef struct bd_variant {
    char file[80];    /* model.so or model-TARGET.so (the manifest's name) */
    char target[64];  /* cpu-ARCH-ISA, cuda-sm_80,... */
    char arch[32];    /* the architecture of its host code: a CPU target's, a CUDA target's host_arch */
    char weights[80]; /* the weights file it reads */
} bd_variant;

/* Fills v's arch from its target (cpu-ARCH-ISA) or, for a CUDA target, the manifest object o's host_arch. */
static ig_status variant_arch(const cJSON *o, const char *pkg, bd_variant *v, ig_err *err) {
    if (!strncmp(v->target, "cpu-", 4)) {
        const char *dash = strchr(v->target + 4, '-');
        snprintf(v->arch, sizeof v->arch, "%.*s", dash ? (int)(dash - v->target - 4) : 0, v->target + 4);
        return IG_OK;
    }
    const cJSON *ha = cJSON_GetObjectItemCaseSensitive(o, "host_arch");
    if (!cJSON_IsString(ha) || strlen(ha->valuestring) >= sizeof v->arch)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: its %s code was compiled before bundles took CUDA packages (no "
                       "host_arch in the manifest): recompile the package", pkg, v->target);
    snprintf(v->arch, sizeof v->arch, "%s", ha->valuestring);
    return IG_OK;
}

/* The variants the manifest lists (a plain package: model.so, its target and weights); tensor-parallel
 * packages are refused. */
static ig_status read_variants(const cJSON *m, const char *pkg, bd_variant *v, int *n, ig_err *err) {
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(m, "target"), *vs = cJSON_GetObjectItemCaseSensitive(m, "variants"), *e;
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(m, "tp");
    const cJSON *wf = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "weights"), "file");
    if (cJSON_IsNumber(tp) && tp->valuedouble > 1)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s is sharded for --tp %g: a bundle runs one process; bundle a package "
                       "compiled without --tp", pkg, tp->valuedouble);
    if (!cJSON_IsString(target) || !cJSON_IsString(wf) || strchr(wf->valuestring, '/') || strlen(wf->valuestring) >= sizeof v->weights ||
        strlen(target->valuestring) >= sizeof v->target)
        return ig_fail(err, IG_ERR_FORMAT, "%s/manifest.json: no target or weights file", pkg);
    *n = 0;
    if (!vs) {
        snprintf(v[0].file, sizeof v[0].file, "model.so");
        snprintf(v[0].target, sizeof v[0].target, "%s", target->valuestring);
        snprintf(v[0].weights, sizeof v[0].weights, "%s", wf->valuestring);
        *n = 1;
        return variant_arch(m, pkg, &v[0], err);
    }
    ig_status st = IG_OK;
    cJSON_ArrayForEach(e, vs) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "target"), *f = cJSON_GetObjectItemCaseSensitive(e, "file"),
                    *w = cJSON_GetObjectItemCaseSensitive(e, "weights");
        if (!cJSON_IsString(t) || !cJSON_IsString(f) || strchr(f->valuestring, '/') || *n == BD_MAX_VARIANTS ||
            strlen(f->valuestring) >= sizeof v->file || strlen(t->valuestring) >= sizeof v->target ||
            (w && (!cJSON_IsString(w) || strchr(w->valuestring, '/') || strlen(w->valuestring) >= sizeof v->weights)))
            return ig_fail(err, IG_ERR_FORMAT, "%s/manifest.json: a variant needs a target and a file name", pkg);
        snprintf(v[*n].file, sizeof v->file, "%s", f->valuestring);
        snprintf(v[*n].target, sizeof v->target, "%s", t->valuestring);
        snprintf(v[*n].weights, sizeof v->weights, "%s", w ? w->valuestring : wf->valuestring);
        if ((st = variant_arch(e, pkg, &v[*n], err))) return st;
        (*n)++;
    }
    return IG_OK;
}

/* The bundle runtime: o->runtime, or beside the running ignis (a build tree), or ../lib/ignis/
 * (an installed tree). */
static ig_status find_kit(const char *given, bd_kit *k, ig_err *err) {
    char exe[PATH_MAX], path[PATH_MAX + 64];
    const char *cand[2] = {NULL, NULL};
    char c0[PATH_MAX], c1[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (given) cand[0] = given;
    else if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(c0, sizeof c0, "%s/bundle-runtime", exe);
        snprintf(c1, sizeof c1, "%s/../lib/ignis/bundle-runtime", exe);
        cand[0] = c0, cand[1] = c1;
    }
    for (int i = 0; i < 2 && cand[i]; i++) {
        snprintf(path, sizeof path, "%s/kit", cand[i]);
        char *text;
        if (rt_read_file(path, &text, NULL, NULL)) continue;
        int ok = strlen(cand[i]) < sizeof k->dir &&
                 sscanf(text, "%31s %1023s %1023s", k->arch, k->cc, k->objcopy) == 3;
        free(text);
        if (!ok) return ig_fail(err, IG_ERR_FORMAT, "%s: not \"ARCH CC OBJCOPY\"", path);
        snprintf(k->dir, sizeof k->dir, "%s", cand[i]);
        return IG_OK;
    }
    if (given) return ig_fail(err, IG_ERR_IO, "--runtime %s: no bundle runtime there (no %s/kit)", given, given);
    return ig_fail(err, IG_ERR_IO, "no bundle runtime beside this ignis (%s): build it (cmake --build BUILD --target "
                   "ignis_bundle_rt, after scripts/install-deps.sh built the static libraries) or name one with --runtime DIR",
                   cand[0] ? cand[0] : "?");
}

/* Runs cmd; on failure the error quotes the end of log. */
static ig_status run(const char *cmd, const char *what, const char *log, ig_err *err) {
    int rc = system(cmd);
    if (rc == 0) return IG_OK;
    char *text = NULL;
    size_t len = 0;
    rt_read_file(log, &text, &len, NULL);
    ig_status st = ig_fail(err, IG_ERR_BUILD, "%s failed (exit %d): %.600s", what, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
                           text ? text + (len > 600 ? len - 600 : 0) : "");
    free(text);
    return st;
}

/* Links the variants' objects (made local and renamed in parts/) with the runtime into parts/exe. */
static ig_status link_exe(const bd_kit *k, const char *pkg, const char *parts, const bd_variant *v, int nv, ig_err *err) {
    size_t cap = 16384, used = 0;
    char *cmd = malloc(cap), *objs = malloc(cap), log[PATH_MAX + 16], sym[128];
    ig_status st = cmd && objs ? IG_OK : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    snprintf(log, sizeof log, "%s/link.log", parts);
    if (objs) objs[0] = 0;
    for (int i = 0; i < nv && !st; i++) {
        char obj[PATH_MAX], local[PATH_MAX];
        snprintf(obj, sizeof obj, "%s/%.*s.o", pkg, (int)(strlen(v[i].file) - 3), v[i].file);
        if (access(obj, R_OK) != 0) {
            st = ig_fail(err, IG_ERR_IO, "%s: no model object %s (a package compiled before bundles existed keeps only "
                         "model.so): recompile the package", pkg, obj);
            break;
        }
        pkgf_entry_symbol(v[i].file, sym, sizeof sym);
        snprintf(local, sizeof local, "%s/variant%d.o", parts, i);
        snprintf(cmd, cap, "'%s' --localize-hidden --redefine-sym %s=%s '%s' '%s' > '%s' 2>&1", k->objcopy,
                 IG_MODEL_ENTRY_SYMBOL, sym, obj, local, log);
        st = run(cmd, "objcopy of the model object", log, err);
        used += (size_t)snprintf(objs + used, cap - used, " '%s' -Wl,--export-dynamic-symbol=%s", local, sym);
    }
    if (!st) {
        snprintf(cmd, cap, "'%s' -o '%s/exe' %s '%s/libignis-bundle.a' '%s/libmicrohttpd.a' '%s/libprotobuf-c.a' "
                 "'%s/libcjson.a' '%s/libgomp.a' -static-libgcc -pthread -lm -ldl -s -Wl,--gc-sections > '%s' 2>&1",
                 k->cc, parts, objs, k->dir, k->dir, k->dir, k->dir, k->dir, log);
        st = run(cmd, "linking the bundle", log, err);
    }
    free(cmd);
    free(objs);
    return st;
}

/* Appends len bytes of src (a path) to fd at its current end, after zero padding to align. */
static ig_status append(int fd, const char *src, uint64_t align, pkgf_entry *e, int hash, ig_err *err) {
    off_t end = lseek(fd, 0, SEEK_END);
    uint64_t at = ((uint64_t)end + align - 1) / align * align;
    if (end < 0 || ftruncate(fd, (off_t)at) != 0 || lseek(fd, (off_t)at, SEEK_SET) < 0)
        return ig_fail(err, IG_ERR_IO, "cannot pad the bundle: %s", strerror(errno));
    int in = open(src, O_RDONLY);
    struct stat sb;
    if (in < 0 || fstat(in, &sb) != 0) {
        if (in >= 0) close(in);
        return ig_fail(err, IG_ERR_IO, "%s: %s", src, strerror(errno));
    }
    uint64_t size = (uint64_t)sb.st_size;
    const uint8_t *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, in, 0) : NULL;
    close(in);
    if (map == MAP_FAILED) return ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", src, strerror(errno));
    ig_status st = IG_OK;
    for (uint64_t done = 0; done < size && !st;) {
        ssize_t w = write(fd, map + done, size - done > (1u << 24) ? (1u << 24) : size - done);
        if (w <= 0) st = ig_fail(err, IG_ERR_IO, "writing the bundle: %s", strerror(errno));
        else done += (uint64_t)w;
    }
    e->offset = at;
    e->size = size;
    e->hash = hash ? rt_hash64(map, size, 0) : 0;
    if (size) munmap((void *)map, size);
    return st;
}

/* The package files a bundle carries: top-level regular files but the model objects, the build
 * log and the weights files (appended last, page-aligned: the ones the linked variants read). */
static int carried(const char *pkg, const char *name) {
    char path[PATH_MAX];
    struct stat sb;
    size_t n = strlen(name);
    snprintf(path, sizeof path, "%s/%s", pkg, name);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || name[0] == '.' || n >= PKGF_NAME_MAX) return 0;
    if (!strncmp(name, "model", 5) && ((n > 3 && !strcmp(name + n - 3, ".so")) || (n > 2 && !strcmp(name + n - 2, ".o")))) return 0;
    return strcmp(name, "build.log") && !(!strncmp(name, "weights", 7) && n > 4 && !strcmp(name + n - 4, ".bin"));
}

/* parts/exe, then the package files, the weights files of the variants v[nv] (each once) and the
 * directory, into out. */
static ig_status write_bundle(const char *pkg, const char *parts, const char *out, const bd_variant *v, int nv, bd_report *r,
                              ig_err *err) {
    pkgf_bundle *b = calloc(1, sizeof *b);
    if (!b) return ig_fail(err, IG_ERR_NOMEM, "out of memory");
    int fd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0755);
    ig_status st = fd < 0 ? ig_fail(err, IG_ERR_IO, "%s: %s", out, strerror(errno)) : IG_OK;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/exe", parts);
    snprintf(b->e[0].name, PKGF_NAME_MAX, "code");
    if (!st) st = append(fd, path, 1, &b->e[b->n++], 1, err);
    DIR *d = st ? NULL : opendir(pkg);
    if (!st && !d) st = ig_fail(err, IG_ERR_IO, "%s: %s", pkg, strerror(errno));
    for (struct dirent *de; d && !st && (de = readdir(d));) {
        if (!carried(pkg, de->d_name)) continue;
        if (b->n == PKGF_MAX_ENTRIES - 1) st = ig_fail(err, IG_ERR_UNSUPPORTED, "%s: more than %d files", pkg, PKGF_MAX_ENTRIES - 2);
        snprintf(path, sizeof path, "%s/%s", pkg, de->d_name);
        snprintf(b->e[b->n].name, PKGF_NAME_MAX, "%s", de->d_name);
        if (!st) st = append(fd, path, 64, &b->e[b->n++], 1, err);
    }
    if (d) closedir(d);
    uint64_t wbytes = 0;
    for (int i = 0; i < nv && !st; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= !strcmp(v[j].weights, v[i].weights);
        if (seen) continue;
        if (b->n == PKGF_MAX_ENTRIES - 1) st = ig_fail(err, IG_ERR_UNSUPPORTED, "%s: more than %d files", pkg, PKGF_MAX_ENTRIES - 2);
        snprintf(path, sizeof path, "%s/%s", pkg, v[i].weights);
        snprintf(b->e[b->n].name, PKGF_NAME_MAX, "%s", v[i].weights);
        if (!st) st = append(fd, path, PKGF_WEIGHTS_ALIGN, &b->e[b->n++], 0, err); /* its tensors are hashed in the manifest */
        if (!st) wbytes += b->e[b->n - 1].size;
    }
    size_t tail = (size_t)b->n * PKGF_ENTRY_BYTES + PKGF_TRAILER_BYTES;
    uint8_t *buf = st ? NULL : malloc(tail);
    if (!st && !buf) st = ig_fail(err, IG_ERR_NOMEM, "out of memory");
    off_t end = st ? 0 : lseek(fd, 0, SEEK_END);
    if (!st) {
        b->file_size = (uint64_t)end + tail;
        pkgf_encode(b, buf);
        if (write(fd, buf, tail) != (ssize_t)tail) st = ig_fail(err, IG_ERR_IO, "writing the bundle: %s", strerror(errno));
    }
    if (!st) {
        r->file_bytes = b->file_size;
        r->code_bytes = b->e[0].size;
        r->weights_bytes = wbytes;
    }
    free(buf);
    free(b);
    if (fd >= 0 && close(fd) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "%s: %s", out, strerror(errno));
    return st;
}

ig_status bd_bundle(const bd_options *o, bd_report *r, ig_err *err) {
    memset(r, 0, sizeof *r);
    char path[PATH_MAX], parts[PATH_MAX], tmp[PATH_MAX], *text;
    snprintf(path, sizeof path, "%s/manifest.json", o->pkg);
    ig_status st = rt_read_file(path, &text, NULL, err);
    if (st) return st;
    cJSON *m = cJSON_Parse(text);
    free(text);
    if (!m) return ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", path);
    bd_variant all[BD_MAX_VARIANTS], v[BD_MAX_VARIANTS];
    int na = 0, nv = 0;
    bd_kit *k = calloc(1, sizeof *k);
    st = k ? read_variants(m, o->pkg, all, &na, err) : ig_fail(err, IG_ERR_NOMEM, "out of memory");
    cJSON_Delete(m);
    if (!st) st = find_kit(o->runtime, k, err);
    for (int i = 0; !st && i < na; i++)
        if (!strcmp(all[i].arch, k->arch)) v[nv++] = all[i];
    if (!st && !nv)
        st = ig_fail(err, IG_ERR_MISMATCH, "%s holds code for %s%s, and the bundle runtime %s is for %s: give --runtime the "
                     "bundle-runtime folder of a build for that architecture (aarch64: cmake --toolchain "
                     "cmake/aarch64-linux-gnu.cmake, target ignis_bundle_rt)", o->pkg, all[0].target, na > 1 ? " and others" : "",
                     k->dir, k->arch);
    snprintf(parts, sizeof parts, "%s.parts-XXXXXX", o->out);
    if (!st && !mkdtemp(parts)) st = ig_fail(err, IG_ERR_IO, "%s: %s", parts, strerror(errno));
    int made = !st;
    if (!st && o->log) fprintf(o->log, "linking %d model object(s) of %s with %s\n", nv, o->pkg, k->dir);
    if (!st) st = link_exe(k, o->pkg, parts, v, nv, err);
    snprintf(tmp, sizeof tmp, "%s.tmp", o->out);
    if (!st) st = write_bundle(o->pkg, parts, tmp, v, nv, r, err);
    if (!st && rename(tmp, o->out) != 0) st = ig_fail(err, IG_ERR_IO, "cannot rename %s to %s: %s", tmp, o->out, strerror(errno));
    if (st) unlink(tmp);
    if (made) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", parts);
        if (system(cmd) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "cannot remove %s", parts);
    }
    r->n_variants = nv;
    free(k);
    return st;
}
