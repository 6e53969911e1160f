/* safetensors.c — parsing and validating safetensors headers and shard indexes (safetensors.h).
 *
 * Everything a header says is checked before it is believed: the header length against the file
 * size, each dtype against the known list, each shape's element count times the dtype size
 * against the byte range, each range against the data section, and ranges against each other
 * (no overlaps). A tensor that passes can be read from the mapping without further checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "safetensors.h"

static const struct {
    const char *name;
    int size;
} st_dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},
    [ST_I16] = {"I16", 2},   [ST_U16] = {"U16", 2},   [ST_I32] = {"I32", 4},
    [ST_U32] = {"U32", 4},   [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},
    [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2}, [ST_F32] = {"F32", 4},
    [ST_F64] = {"F64", 8},   [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype d) {
    return (unsigned)d < ST_DTYPE_COUNT ? st_dtypes[d].name : "?";
}
int st_dtype_size(st_dtype d) { return (unsigned)d < ST_DTYPE_COUNT ? st_dtypes[d].size : 0; }

/* Headers above this are refused (the reference implementation's limit is 100 MB). */
#define ST_MAX_HEADER (100ull << 20)

/* A JSON number that is an exact non-negative integer below 2^53. */
static int json_u64(const cJSON *j, uint64_t *v) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return 0;
    *v = (uint64_t)d;
    return 1;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

void st_close(st_file *f) {
    if (!f) return;
    if (f->map) munmap((void *)f->map, f->size);
    for (int32_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->path);
    free(f);
}

static ig_status parse_entry(st_file *f, const cJSON *e, st_tensor *t, ig_err *err) {
    const char *p = f->path, *nm = e->string;
    if (!cJSON_IsObject(e))
        return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: header entry is not an object", p, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: missing or non-string \"dtype\"", p, nm);
    int found = 0;
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (strcmp(dt->valuestring, st_dtypes[d].name) == 0) {
            t->dtype = (st_dtype)d;
            found = 1;
        }
    if (!found)
        return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: unknown dtype \"%s\"", p, nm,
                       dt->valuestring);
    if (!cJSON_IsArray(sh))
        return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: missing or non-array \"shape\"", p, nm);
    int rank = cJSON_GetArraySize(sh);
    if (rank > ST_MAX_RANK)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: tensor %s: rank %d above %d", p, nm, rank,
                       ST_MAX_RANK);
    t->rank = rank;
    /* element count with overflow care: any dim above 2^53 or a product above 2^62 is refused */
    uint64_t count = 1;
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, sh) {
        uint64_t d;
        if (!json_u64(it, &d))
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: shape[%d] is not a non-negative integer",
                           p, nm, k);
        t->shape[k++] = (int64_t)d;
        if (d && count > (1ull << 62) / d)
            return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: shape is too large", p, nm);
        count *= d;
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s: \"data_offsets\" is not [begin, end]",
                       p, nm);
    uint64_t b, en;
    if (!json_u64(cJSON_GetArrayItem(off, 0), &b) || !json_u64(cJSON_GetArrayItem(off, 1), &en))
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: tensor %s: data_offsets are not non-negative integers", p, nm);
    uint64_t data_size = f->size - f->data_start;
    if (b > en || en > data_size)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: tensor %s: data_offsets [%llu, %llu] out of range: the data section "
                       "holds %llu bytes (file %llu bytes, header ends at %llu)",
                       p, nm, (unsigned long long)b, (unsigned long long)en,
                       (unsigned long long)data_size, (unsigned long long)f->size,
                       (unsigned long long)f->data_start);
    uint64_t want = count * (uint64_t)st_dtypes[t->dtype].size;
    if (en - b != want)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: tensor %s: %llu bytes in data_offsets but shape x %s needs %llu", p, nm,
                       (unsigned long long)(en - b), st_dtypes[t->dtype].name,
                       (unsigned long long)want);
    t->offset = f->data_start + b;
    t->nbytes = en - b;
    return IG_OK;
}

ig_status st_open(const char *path, st_file **out, ig_err *err) {
    *out = NULL;
    ig_status st = IG_OK;
    cJSON *root = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st = ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        st = ig_fail(err, IG_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    f->size = (uint64_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        st = ig_fail(err, IG_ERR_FORMAT, "%s: %llu bytes, too short for a safetensors header",
                     path, (unsigned long long)f->size);
        goto fail;
    }
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        st = ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        goto fail;
    }
    f->map = m;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->map[i] << (8 * i);
    if (hlen > f->size - 8 || hlen > ST_MAX_HEADER) {
        st = ig_fail(err, IG_ERR_FORMAT,
                     "%s: header length %llu runs past the end of the file (%llu bytes)", path,
                     (unsigned long long)hlen, (unsigned long long)f->size);
        goto fail;
    }
    f->data_start = 8 + hlen;
    root = cJSON_ParseWithLength((const char *)f->map + 8, (size_t)hlen);
    if (!root || !cJSON_IsObject(root)) {
        st = ig_fail(err, IG_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto fail;
    }
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) n++;
    f->tensors = calloc((size_t)(n ? n : 1), sizeof *f->tensors);
    if (!f->tensors) {
        st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    cJSON_ArrayForEach(e, root) {
        if (!e->string) continue;
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) {
                st = ig_fail(err, IG_ERR_FORMAT, "%s: __metadata__ is not an object", path);
                goto fail;
            }
            continue;
        }
        st_tensor *t = &f->tensors[f->n_tensors];
        if (!(t->name = strdup(e->string))) {
            st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        f->n_tensors++;
        if ((st = parse_entry(f, e, t, err)) != IG_OK) goto fail;
    }
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_tensor_name);
    for (int32_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            st = ig_fail(err, IG_ERR_FORMAT, "%s: tensor %s appears twice in the header", path,
                         f->tensors[i].name);
            goto fail;
        }
    /* overlapping data ranges (empty tensors cannot overlap anything) */
    if (f->n_tensors > 1) {
        st_tensor **by_off = malloc((size_t)f->n_tensors * sizeof *by_off);
        if (!by_off) {
            st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        int32_t m2 = 0;
        for (int32_t i = 0; i < f->n_tensors; i++)
            if (f->tensors[i].nbytes) by_off[m2++] = &f->tensors[i];
        qsort(by_off, (size_t)m2, sizeof *by_off, cmp_tensor_offset);
        for (int32_t i = 1; i < m2; i++)
            if (by_off[i - 1]->offset + by_off[i - 1]->nbytes > by_off[i]->offset) {
                st = ig_fail(err, IG_ERR_FORMAT, "%s: tensors %s and %s overlap in the data section",
                             path, by_off[i - 1]->name, by_off[i]->name);
                free(by_off);
                goto fail;
            }
        free(by_off);
    }
    cJSON_Delete(root);
    *out = f;
    return IG_OK;
fail:
    cJSON_Delete(root);
    st_close(f);
    return st;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    int32_t lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* ---- shard index */

void st_index_free(st_index *ix) {
    if (!ix) return;
    for (int32_t i = 0; i < ix->n; i++) free(ix->names[i]);
    for (int32_t i = 0; i < ix->n_shards; i++) free(ix->shards[i]);
    free(ix->names);
    free(ix->shard);
    free(ix->shards);
    free(ix);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a whole small file; *out: free(). */
static ig_status read_text(const char *path, char **out, size_t *len, ig_err *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(fp);
            return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        }
        n += fread(buf + n, 1, cap - n - 1, fp);
        if (n < cap - 1) break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb) free(buf);
        buf = nb;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return ig_fail(err, IG_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return IG_OK;
}

ig_status st_index_load(const char *path, st_index **out, ig_err *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    ig_status st = read_text(path, &text, &len, err);
    if (st) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    st_index *ix = calloc(1, sizeof *ix);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!ix) {
        st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (!root) {
        st = ig_fail(err, IG_ERR_FORMAT, "%s: not valid JSON", path);
        goto done;
    }
    if (!cJSON_IsObject(wm)) {
        st = ig_fail(err, IG_ERR_FORMAT, "%s: missing \"weight_map\" object", path);
        goto done;
    }
    int n = cJSON_GetArraySize(wm);
    ix->names = calloc((size_t)n + 1, sizeof *ix->names);
    ix->shard = calloc((size_t)n + 1, sizeof *ix->shard);
    ix->shards = calloc((size_t)n + 1, sizeof *ix->shards);
    if (!ix->names || !ix->shard || !ix->shards) {
        st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* collect distinct shard names, sorted, so file order does not depend on JSON key order */
    const cJSON *e;
    cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/')) {
            st = ig_fail(err, IG_ERR_FORMAT, "%s: weight_map entry %s is not a shard file name",
                         path, e->string ? e->string : "?");
            goto done;
        }
        int dup = 0;
        for (int32_t s = 0; s < ix->n_shards && !dup; s++) dup = !strcmp(ix->shards[s], e->valuestring);
        if (!dup) {
            if (!(ix->shards[ix->n_shards] = strdup(e->valuestring))) {
                st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            ix->n_shards++;
        }
    }
    qsort(ix->shards, (size_t)ix->n_shards, sizeof *ix->shards, cmp_str);
    cJSON_ArrayForEach(e, wm) {
        if (!(ix->names[ix->n] = strdup(e->string))) {
            st = ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        for (int32_t s = 0; s < ix->n_shards; s++)
            if (!strcmp(ix->shards[s], e->valuestring)) ix->shard[ix->n] = s;
        ix->n++;
    }
done:
    cJSON_Delete(root);
    if (st) {
        st_index_free(ix);
        return st;
    }
    *out = ix;
    return IG_OK;
}

int32_t st_index_lookup(const st_index *ix, const char *name) {
    for (int32_t i = 0; i < ix->n; i++)
        if (strcmp(ix->names[i], name) == 0) return ix->shard[i];
    return -1;
}
