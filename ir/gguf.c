/* gguf.c — GGUF reader (see gguf.h): mmap, header parse, bounds checks, metadata getters.
 *
 * Parsing goes through a cursor that checks the bytes left before every read; counts read from
 * the file (strings, arrays, keys, tensors) are capped by what the remaining bytes could hold
 * before anything is allocated for them, so a hostile header cannot ask for huge allocations.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gguf_file {
    char *path;
    const uint8_t *map;     /* whole file, read-only */
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    gguf_kv *kv;            /* [n_kv] */
    int64_t n_tensors;
    gguf_tensor_info *tensors; /* [n_tensors] */
};

/* ---- type tables */

static const struct { uint32_t id; const char *name; int be, bb; } ggml_types[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},        {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 40},     {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},  {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110}, {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},       {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
};

void gguf_type_block(uint32_t type, int *block_elems, int *block_bytes) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == type) {
            *block_elems = ggml_types[i].be;
            *block_bytes = ggml_types[i].bb;
            return;
        }
    *block_elems = 0;
    *block_bytes = 0;
}

const char *gguf_type_name(uint32_t type) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == type) return ggml_types[i].name;
    return NULL;
}

static const char *const vtype_names[GGUF_VT_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64"};

const char *gguf_vtype_name(gguf_vtype t) {
    return (unsigned)t < GGUF_VT_COUNT ? vtype_names[t] : "invalid";
}

/* Byte size of a scalar value type; 0 for string/array/invalid. */
static int scalar_size(gguf_vtype t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- cursor */

typedef struct cursor {
    const uint8_t *p;
    uint64_t pos, size;
    const char *path;
    ig_err *err;
} cursor;

static ig_status trunc_err(cursor *c, const char *what, uint64_t need) {
    return ig_fail(c->err, IG_ERR_FORMAT,
                   "%s: truncated or corrupt GGUF: %s needs %llu bytes at offset %llu, file has "
                   "%llu",
                   c->path, what, (unsigned long long)need, (unsigned long long)c->pos,
                   (unsigned long long)c->size);
}

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static ig_status rd(cursor *c, void *dst, uint64_t n, const char *what) {
    if (n > left(c)) return trunc_err(c, what, n);
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return IG_OK;
}

static ig_status rd_u32(cursor *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static ig_status rd_u64(cursor *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

static ig_status rd_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t n = 0;
    ig_status st = rd_u64(c, &n, what);
    if (st) return st;
    if (n > left(c)) return trunc_err(c, what, n);
    s->p = (const char *)(c->p + c->pos);
    s->n = n;
    c->pos += n;
    return IG_OK;
}

static char *dup_str(gguf_str s) {
    char *r = malloc(s.n + 1);
    if (!r) return NULL;
    memcpy(r, s.p, s.n);
    r[s.n] = 0;
    return r;
}

/* Skips a value of type t (used for nested arrays, which nobody reads). depth bounds recursion. */
static ig_status skip_value(cursor *c, gguf_vtype t, int depth, const char *key) {
    if (t == GGUF_VT_STRING) {
        gguf_str s;
        return rd_str(c, &s, key);
    }
    if (t == GGUF_VT_ARRAY) {
        uint32_t et;
        uint64_t n;
        ig_status st;
        if ((st = rd_u32(c, &et, key)) || (st = rd_u64(c, &n, key))) return st;
        if (depth > 4)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: key %s: arrays nested deeper than 4",
                           c->path, key);
        if (et >= GGUF_VT_COUNT)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: key %s: array element type %u is invalid",
                           c->path, key, et);
        int sz = scalar_size((gguf_vtype)et);
        if (sz) {
            if (n > left(c) / (uint64_t)sz) return trunc_err(c, key, n * (uint64_t)sz);
            c->pos += n * (uint64_t)sz;
            return IG_OK;
        }
        for (uint64_t i = 0; i < n; i++)
            if ((st = skip_value(c, (gguf_vtype)et, depth + 1, key))) return st;
        return IG_OK;
    }
    int sz = scalar_size(t);
    if (!sz)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key %s: value type %d is invalid", c->path,
                       key, (int)t);
    if ((uint64_t)sz > left(c)) return trunc_err(c, key, (uint64_t)sz);
    c->pos += (uint64_t)sz;
    return IG_OK;
}

static void load_scalar(gguf_vtype t, const uint8_t *p, uint64_t *u, int64_t *i, double *f) {
    *u = 0;
    *i = 0;
    *f = 0;
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_BOOL: *u = p[0]; break;
    case GGUF_VT_INT8: *i = (int8_t)p[0]; break;
    case GGUF_VT_UINT16: { uint16_t v; memcpy(&v, p, 2); *u = v; break; }
    case GGUF_VT_INT16: { int16_t v; memcpy(&v, p, 2); *i = v; break; }
    case GGUF_VT_UINT32: { uint32_t v; memcpy(&v, p, 4); *u = v; break; }
    case GGUF_VT_INT32: { int32_t v; memcpy(&v, p, 4); *i = v; break; }
    case GGUF_VT_UINT64: { uint64_t v; memcpy(&v, p, 8); *u = v; break; }
    case GGUF_VT_INT64: { int64_t v; memcpy(&v, p, 8); *i = v; break; }
    case GGUF_VT_FLOAT32: { float v; memcpy(&v, p, 4); *f = v; break; }
    case GGUF_VT_FLOAT64: { double v; memcpy(&v, p, 8); *f = v; break; }
    default: break;
    }
    if (t == GGUF_VT_FLOAT32 || t == GGUF_VT_FLOAT64) return;
    /* keep the three views consistent for integers so getters need not switch again */
    if (t == GGUF_VT_INT8 || t == GGUF_VT_INT16 || t == GGUF_VT_INT32 || t == GGUF_VT_INT64) {
        *u = (uint64_t)*i;
        *f = (double)*i;
    } else {
        *i = (int64_t)*u;
        *f = (double)*u;
    }
}

static ig_status parse_kv(cursor *c, gguf_kv *kv) {
    gguf_str key;
    uint32_t t;
    ig_status st;
    if ((st = rd_str(c, &key, "metadata key"))) return st;
    if (!(kv->key = dup_str(key))) return ig_fail(c->err, IG_ERR_NOMEM, "%s: out of memory", c->path);
    if (memchr(key.p, 0, key.n))
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: metadata key at offset %llu contains a NUL byte",
                       c->path, (unsigned long long)c->pos);
    if ((st = rd_u32(c, &t, kv->key))) return st;
    if (t >= GGUF_VT_COUNT)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key %s has invalid value type %u", c->path,
                       kv->key, t);
    kv->type = (gguf_vtype)t;
    if (t == GGUF_VT_STRING) return rd_str(c, &kv->s, kv->key);
    if (t != GGUF_VT_ARRAY) {
        int sz = scalar_size(kv->type);
        if ((uint64_t)sz > left(c)) return trunc_err(c, kv->key, (uint64_t)sz);
        load_scalar(kv->type, c->p + c->pos, &kv->u, &kv->i, &kv->f);
        c->pos += (uint64_t)sz;
        return IG_OK;
    }
    uint32_t et;
    uint64_t n;
    if ((st = rd_u32(c, &et, kv->key)) || (st = rd_u64(c, &n, kv->key))) return st;
    if (et >= GGUF_VT_COUNT)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: key %s: array element type %u is invalid",
                       c->path, kv->key, et);
    kv->arr_type = (gguf_vtype)et;
    kv->arr_n = n;
    kv->arr_data = c->p + c->pos;
    int sz = scalar_size(kv->arr_type);
    if (sz) {
        if (n > left(c) / (uint64_t)sz)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: truncated or corrupt GGUF: array %s has %llu %s elements, only "
                           "%llu bytes remain",
                           c->path, kv->key, (unsigned long long)n, gguf_vtype_name(kv->arr_type),
                           (unsigned long long)left(c));
        c->pos += n * (uint64_t)sz;
        return IG_OK;
    }
    if (kv->arr_type == GGUF_VT_STRING) {
        /* each string costs at least its 8-byte length */
        if (n > left(c) / 8)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: truncated or corrupt GGUF: array %s has %llu strings, only %llu "
                           "bytes remain",
                           c->path, kv->key, (unsigned long long)n, (unsigned long long)left(c));
        kv->arr_strs = malloc((size_t)(n ? n : 1) * sizeof *kv->arr_strs);
        if (!kv->arr_strs) return ig_fail(c->err, IG_ERR_NOMEM, "%s: out of memory", c->path);
        for (uint64_t i = 0; i < n; i++)
            if ((st = rd_str(c, &kv->arr_strs[i], kv->key))) return st;
        return IG_OK;
    }
    /* arrays of arrays: validated and skipped; no reader needs their elements */
    if (n > left(c) / 12)
        return trunc_err(c, kv->key, n * 12);
    for (uint64_t i = 0; i < n; i++)
        if ((st = skip_value(c, GGUF_VT_ARRAY, 1, kv->key))) return st;
    return IG_OK;
}

static ig_status parse_tensor(cursor *c, gguf_tensor_info *ti, int64_t idx) {
    gguf_str name;
    ig_status st;
    char what[64];
    snprintf(what, sizeof what, "tensor info %lld", (long long)idx);
    if ((st = rd_str(c, &name, what))) return st;
    if (!(ti->name = dup_str(name))) return ig_fail(c->err, IG_ERR_NOMEM, "%s: out of memory", c->path);
    if ((st = rd_u32(c, &ti->n_dims, ti->name))) return st;
    if (ti->n_dims < 1 || ti->n_dims > GGUF_MAX_DIMS)
        return ig_fail(c->err, IG_ERR_FORMAT, "%s: tensor %s has %u dims (1..%d allowed)", c->path,
                       ti->name, ti->n_dims, GGUF_MAX_DIMS);
    int64_t ne = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) ti->ne[d] = 1;
    for (uint32_t d = 0; d < ti->n_dims; d++) {
        uint64_t v;
        if ((st = rd_u64(c, &v, ti->name))) return st;
        if (v == 0 || v > (uint64_t)INT64_MAX || (uint64_t)ne > (uint64_t)INT64_MAX / v)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: tensor %s: dim %u = %llu is invalid",
                           c->path, ti->name, d, (unsigned long long)v);
        ti->ne[d] = (int64_t)v;
        ne *= (int64_t)v;
    }
    ti->n_elements = ne;
    if ((st = rd_u32(c, &ti->type, ti->name)) || (st = rd_u64(c, &ti->offset, ti->name))) return st;
    int be, bb;
    gguf_type_block(ti->type, &be, &bb);
    if (be) {
        if (ti->ne[0] % be)
            return ig_fail(c->err, IG_ERR_FORMAT,
                           "%s: tensor %s: row of %lld elements is not a multiple of the %s "
                           "block size %d",
                           c->path, ti->name, (long long)ti->ne[0], gguf_type_name(ti->type), be);
        uint64_t blocks = (uint64_t)ne / (uint64_t)be;
        if (blocks > UINT64_MAX / (uint64_t)bb)
            return ig_fail(c->err, IG_ERR_FORMAT, "%s: tensor %s is impossibly large", c->path,
                           ti->name);
        ti->nbytes = blocks * (uint64_t)bb;
    }
    return IG_OK;
}

static int cmp_names(const void *a, const void *b) {
    const gguf_tensor_info *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static ig_status parse(gguf_file *f, ig_err *err) {
    cursor c = {f->map, 0, f->size, f->path, err};
    ig_status st;
    uint32_t version;
    if (f->size < 4 || memcmp(f->map, "GGUF", 4) != 0)
        return ig_fail(err, IG_ERR_FORMAT, "%s: not a GGUF file (bad magic)", f->path);
    c.pos = 4;
    if ((st = rd_u32(&c, &version, "version"))) return st;
    if (version == 1)
        return ig_fail(err, IG_ERR_UNSUPPORTED,
                       "%s: GGUF version 1 is not supported (re-convert the model to v3)", f->path);
    if ((version & 0xFFFF) == 0 && version != 0)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: big-endian GGUF (version field %#x) is not "
                       "supported", f->path, version);
    if (version < 2 || version > 3)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)",
                       f->path, version);
    f->version = version;
    uint64_t nt, nkv;
    if ((st = rd_u64(&c, &nt, "tensor count")) || (st = rd_u64(&c, &nkv, "metadata count")))
        return st;
    /* a key/value needs at least 8 (key len) + 4 (type) + 1 bytes; a tensor info 8+4+8+4+8 */
    if (nkv > left(&c) / 13)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: truncated or corrupt GGUF: %llu metadata pairs cannot fit in %llu bytes",
                       f->path, (unsigned long long)nkv, (unsigned long long)left(&c));
    if (nt > left(&c) / 32)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: truncated or corrupt GGUF: %llu tensor infos cannot fit in %llu bytes",
                       f->path, (unsigned long long)nt, (unsigned long long)left(&c));
    f->kv = calloc((size_t)(nkv ? nkv : 1), sizeof *f->kv);
    f->tensors = calloc((size_t)(nt ? nt : 1), sizeof *f->tensors);
    if (!f->kv || !f->tensors) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", f->path);
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = (int64_t)i + 1; /* so gguf_close frees what was parsed */
        if ((st = parse_kv(&c, &f->kv[i]))) return st;
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(f->kv[j].key, f->kv[i].key) == 0)
                return ig_fail(err, IG_ERR_FORMAT, "%s: duplicate metadata key %s", f->path,
                               f->kv[i].key);
    }
    f->alignment = 32;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_VT_UINT32 && al->type != GGUF_VT_UINT64 && al->type != GGUF_VT_INT32)
            return ig_fail(err, IG_ERR_FORMAT, "%s: general.alignment has type %s, want uint32",
                           f->path, gguf_vtype_name(al->type));
        if (al->u == 0 || (al->u & (al->u - 1)) || al->u > (1u << 20))
            return ig_fail(err, IG_ERR_FORMAT,
                           "%s: general.alignment = %llu is not a power of two up to 1 MiB",
                           f->path, (unsigned long long)al->u);
        f->alignment = al->u;
    }
    for (uint64_t i = 0; i < nt; i++) {
        f->n_tensors = (int64_t)i + 1;
        if ((st = parse_tensor(&c, &f->tensors[i], (int64_t)i))) return st;
    }
    uint64_t data = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
    if (nt > 0 && data > f->size)
        return ig_fail(err, IG_ERR_FORMAT,
                       "%s: truncated GGUF: data section would start at %llu, file has %llu bytes",
                       f->path, (unsigned long long)data, (unsigned long long)f->size);
    f->data_offset = data;
    uint64_t data_len = f->size > data ? f->size - data : 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor_info *ti = &f->tensors[i];
        if (ti->offset % f->alignment)
            return ig_fail(err, IG_ERR_FORMAT,
                           "%s: tensor %s: offset %llu is not a multiple of the alignment %llu",
                           f->path, ti->name, (unsigned long long)ti->offset,
                           (unsigned long long)f->alignment);
        if (ti->offset > data_len || ti->nbytes > data_len - ti->offset)
            return ig_fail(err, IG_ERR_FORMAT,
                           "%s: tensor %s: data [%llu, +%llu) lies beyond the end of the file "
                           "(data section holds %llu bytes; truncated?)",
                           f->path, ti->name, (unsigned long long)ti->offset,
                           (unsigned long long)ti->nbytes, (unsigned long long)data_len);
        ti->file_offset = data + ti->offset;
    }
    if (f->n_tensors > 1) {
        const gguf_tensor_info **sorted = malloc((size_t)f->n_tensors * sizeof *sorted);
        if (!sorted) return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", f->path);
        for (int64_t i = 0; i < f->n_tensors; i++) sorted[i] = &f->tensors[i];
        qsort(sorted, (size_t)f->n_tensors, sizeof *sorted, cmp_names);
        for (int64_t i = 1; i < f->n_tensors; i++)
            if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
                st = ig_fail(err, IG_ERR_FORMAT, "%s: duplicate tensor name %s", f->path,
                             sorted[i]->name);
                free(sorted);
                return st;
            }
        free(sorted);
    }
    return IG_OK;
}

ig_status gguf_open(const char *path, gguf_file **out, ig_err *err) {
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return ig_fail(err, IG_ERR_NOMEM, "%s: out of memory", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ig_status st = ig_fail(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        gguf_close(f);
        return st;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        ig_status st = ig_fail(err, IG_ERR_IO, "%s: not a regular file", path);
        gguf_close(f);
        return st;
    }
    f->size = (uint64_t)sb.st_size;
    if (f->size < 24) {
        close(fd);
        ig_status st = ig_fail(err, IG_ERR_FORMAT,
                               "%s: truncated GGUF: %llu bytes is shorter than the 24-byte header",
                               path, (unsigned long long)f->size);
        gguf_close(f);
        return st;
    }
    void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ig_status st = ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        gguf_close(f);
        return st;
    }
    f->map = m;
    ig_status st = parse(f, err);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return IG_OK;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_kv; i++) {
        free(f->kv[i].key);
        free(f->kv[i].arr_strs);
    }
    free(f->kv);
    for (int64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    if (f->map) munmap((void *)f->map, (size_t)f->size);
    free(f->path);
    free(f);
}

const char *gguf_path(const gguf_file *f) { return f->path; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
const uint8_t *gguf_base(const gguf_file *f) { return f->map; }
uint64_t gguf_size(const gguf_file *f) { return f->size; }
int64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}
int64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }
const gguf_tensor_info *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key && strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].name && strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

static ig_status need(const gguf_file *f, const char *key, const gguf_kv **kv, ig_err *err) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is missing", f->path, key);
    return IG_OK;
}

static int is_int_type(gguf_vtype t) {
    return scalar_size(t) && t != GGUF_VT_FLOAT32 && t != GGUF_VT_FLOAT64;
}

ig_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out, ig_err *err) {
    const gguf_kv *kv;
    ig_status st = need(f, key, &kv, err);
    if (st) return st;
    if (!is_int_type(kv->type))
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is a %s, want an integer", f->path,
                       key, gguf_vtype_name(kv->type));
    if (kv->type == GGUF_VT_UINT64 && kv->u > (uint64_t)INT64_MAX)
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s = %llu is out of range", f->path,
                       key, (unsigned long long)kv->u);
    *out = kv->i;
    return IG_OK;
}

ig_status gguf_get_float(const gguf_file *f, const char *key, double *out, ig_err *err) {
    const gguf_kv *kv;
    ig_status st = need(f, key, &kv, err);
    if (st) return st;
    if (!scalar_size(kv->type) || kv->type == GGUF_VT_BOOL)
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is a %s, want a number", f->path,
                       key, gguf_vtype_name(kv->type));
    *out = kv->f;
    return IG_OK;
}

ig_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, ig_err *err) {
    const gguf_kv *kv;
    ig_status st = need(f, key, &kv, err);
    if (st) return st;
    if (kv->type != GGUF_VT_STRING)
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is a %s, want a string", f->path,
                       key, gguf_vtype_name(kv->type));
    *out = kv->s;
    return IG_OK;
}

ig_status gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem, const gguf_kv **out,
                       ig_err *err) {
    const gguf_kv *kv;
    ig_status st = need(f, key, &kv, err);
    if (st) return st;
    if (kv->type != GGUF_VT_ARRAY)
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is a %s, want an array", f->path,
                       key, gguf_vtype_name(kv->type));
    if (elem != GGUF_VT_COUNT && kv->arr_type != elem)
        return ig_fail(err, IG_ERR_FORMAT, "%s: metadata key %s is an array of %s, want %s",
                       f->path, key, gguf_vtype_name(kv->arr_type), gguf_vtype_name(elem));
    *out = kv;
    return IG_OK;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    int sz = scalar_size(kv->arr_type);
    if (!sz || i >= kv->arr_n) return 0;
    uint64_t u;
    int64_t v;
    double d;
    load_scalar(kv->arr_type, kv->arr_data + i * (uint64_t)sz, &u, &v, &d);
    if (kv->arr_type == GGUF_VT_FLOAT32 || kv->arr_type == GGUF_VT_FLOAT64) /* saturate: no overflowing cast */
        return d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    return v;
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    int sz = scalar_size(kv->arr_type);
    if (!sz || i >= kv->arr_n) return 0;
    uint64_t u;
    int64_t v;
    double d;
    load_scalar(kv->arr_type, kv->arr_data + i * (uint64_t)sz, &u, &v, &d);
    return d;
}

int gguf_str_eq(gguf_str a, const char *s) {
    size_t n = strlen(s);
    return a.n == n && memcmp(a.p, s, n) == 0;
}
