/* sources.c — reading weight bytes named by the graph as f32 (ir_sources_*, ir_weight_read_f32).
 *
 * Source files are mapped on first use and stay mapped until ir_sources_close. Before any byte
 * is touched the file's current size is checked to cover the tensor's range, so a truncated or
 * shrunken file gives an error naming it instead of a SIGBUS. F32 / BF16 / F16 are converted
 * here; every other storage type goes through ir_dequant (dequant.h). Then the tensor's
 * transform is applied (undoing GGUF's rope row permutation) and composite tensors made by
 * passes (concatenations, gate/up 16-row interleaves) are assembled from their parts.
 *
 * ir_weight_read_blocks reads the same tensors without dequantizing: every one of those steps
 * moves whole rows, so a matrix whose parts are all stored in one GGUF block type comes out as
 * its rows of raw blocks in the order ir_weight_read_f32 gives (what `--quant keep` repacks).
 * The steps that are not row moves (column padding, the +1 of Gemma norms) refuse raw rows.
 *
 * Byte order: safetensors and GGUF are little-endian, as is every host we build for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dequant.h"
#include "gq.h"
#include "ir.h"

typedef struct src_file {
    char *path;
    int fd;                 /* -1 until first use */
    const uint8_t *map;
    uint64_t map_size;      /* bytes mapped (file size at first use) */
} src_file;

struct ir_sources {
    int32_t n;
    src_file *f;            /* [n], parallel to graph->files */
};

ir_sources *ir_sources_open(const ir_graph *g) {
    ir_sources *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->f = calloc((size_t)(g->n_files ? g->n_files : 1), sizeof *s->f);
    if (!s->f) {
        free(s);
        return NULL;
    }
    for (int32_t i = 0; i < g->n_files; i++) {
        s->f[i].fd = -1;
        if (!(s->f[i].path = strdup(g->files[i]))) {
            s->n = i;
            ir_sources_close(s);
            return NULL;
        }
    }
    s->n = g->n_files;
    return s;
}

void ir_sources_close(ir_sources *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->f[i].map) munmap((void *)s->f[i].map, s->f[i].map_size);
        if (s->f[i].fd >= 0) close(s->f[i].fd);
        free(s->f[i].path);
    }
    free(s->f);
    free(s);
}

/* Returns a pointer to bytes [off, off+n) of file `fi`, mapping it on first use. */
static ig_status src_bytes(ir_sources *s, int32_t fi, uint64_t off, uint64_t n, const char *tname,
                           const uint8_t **p, ig_err *err) {
    if (fi < 0 || fi >= s->n)
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: source file %d out of range (%d files)",
                       tname, fi, s->n);
    src_file *f = &s->f[fi];
    if (f->fd < 0) {
        int fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return ig_fail(err, IG_ERR_IO, "%s: cannot open: %s (reading tensor %s)", f->path,
                           strerror(errno), tname);
        f->fd = fd;
    }
    /* the size now, not at mapping time: a file truncated since would SIGBUS on access */
    struct stat sb;
    if (fstat(f->fd, &sb) != 0)
        return ig_fail(err, IG_ERR_IO, "%s: stat failed: %s", f->path, strerror(errno));
    uint64_t size = (uint64_t)sb.st_size;
    if (off > size || n > size - off)
        return ig_fail(err, IG_ERR_IO,
                       "%s: truncated: tensor %s needs bytes [%llu, %llu) but the file has %llu",
                       f->path, tname, (unsigned long long)off, (unsigned long long)(off + n),
                       (unsigned long long)size);
    if (!f->map || off + n > f->map_size) {
        if (f->map) munmap((void *)f->map, f->map_size);
        f->map = NULL;
        if (size == 0) {
            *p = NULL;
            return IG_OK;
        }
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, f->fd, 0);
        if (m == MAP_FAILED)
            return ig_fail(err, IG_ERR_IO, "%s: mmap failed: %s", f->path, strerror(errno));
        f->map = m;
        f->map_size = size;
    }
    *p = f->map + off;
    return IG_OK;
}

static int64_t tensor_rows(const ir_tensor *t) { return t->shape[0]; }
static int64_t tensor_cols(const ir_tensor *t) { return t->rank == 2 ? t->shape[1] : 1; }

/* What the readers below produce: f32 rows (raw == 0), or rows of raw blocks of storage type
 * stype (be elements in bb bytes per block). */
typedef struct rd_mode {
    int raw;
    ir_stype stype;
    int be, bb;
    int32_t group; /* stype IR_STYPE_GPTQ: the group size of the integer rows */
} rd_mode;

size_t ir_gq_row_bytes(int64_t cols, int32_t group) {
    return group > 0 && cols > 0 ? (size_t)((cols + group - 1) / group) * 4u + (size_t)cols : 0;
}

/* Bytes of one row of t in mode md. */
static size_t row_bytes(const rd_mode *md, const ir_tensor *t) {
    int64_t c = tensor_cols(t);
    if (md->raw && md->stype == IR_STYPE_GPTQ) return ir_gq_row_bytes(c, md->group);
    return md->raw ? (size_t)(c / md->be) * (size_t)md->bb : (size_t)c * sizeof(float);
}


/* The bytes of aux tensor id of GPTQ / AWQ layer t (a plain stored tensor of type want, or of
 * F16 / BF16 / F32 for want F16), or NULL with *n = 0 for id -1. */
static ig_status gq_aux(ir_sources *s, const ir_graph *g, const ir_tensor *t, int32_t id, ir_stype want, const char *what,
                        const uint8_t **p, uint64_t *n, ir_stype *type, ig_err *err) {
    *p = NULL, *n = 0;
    if (id < 0) return IG_OK;
    if (id >= g->n_tensors) return ig_fail(err, IG_ERR_INVALID, "tensor %s: its %s is tensor %d", t->name, what, id);
    const ir_tensor *a = &g->tensors[id];
    int fl = a->src_type == IR_STYPE_F16 || a->src_type == IR_STYPE_BF16 || a->src_type == IR_STYPE_F32;
    if (a->n_parts || (want == IR_STYPE_F16 ? !fl : a->src_type != want))
        return ig_fail(err, IG_ERR_FORMAT, "tensor %s: its %s %s is stored as %s, expected %s", t->name, what, a->name,
                       ir_stype_name(a->src_type), want == IR_STYPE_F16 ? "F16, BF16 or F32" : ir_stype_name(want));
    if (type) *type = a->src_type;
    *n = a->src_nbytes;
    return src_bytes(s, a->src_file, a->src_offset, a->src_nbytes, a->name, p, err);
}

/* A GPTQ / AWQ layer as integer rows (md->raw) or f32. */
static ig_status read_gq(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t, uint8_t *out,
                         ig_err *err) {
    if (md->raw && (md->stype != IR_STYPE_GPTQ || md->group != t->gq.group))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: a %s layer read as %s rows", t->name, ir_stype_name(t->src_type),
                       ir_stype_name(md->stype));
    ir_gq_src q = {0};
    ig_status st = src_bytes(s, t->src_file, t->src_offset, t->src_nbytes, t->name, &q.qweight, err);
    q.n_qweight = t->src_nbytes;
    if (!st) st = gq_aux(s, g, t, t->gq.scales, IR_STYPE_F16, "scales", &q.scales, &q.n_scales, &q.scales_type, err);
    if (!st) st = gq_aux(s, g, t, t->gq.zeros, IR_STYPE_I32, "qzeros", &q.zeros, &q.n_zeros, NULL, err);
    if (!st) st = gq_aux(s, g, t, t->gq.g_idx, IR_STYPE_I32, "g_idx", &q.g_idx, &q.n_gidx, NULL, err);
    if (!st && (!q.scales || !q.zeros)) st = ig_fail(err, IG_ERR_FORMAT, "tensor %s: no scales or qzeros", t->name);
    if (!st && !q.qweight) st = ig_fail(err, IG_ERR_FORMAT, "tensor %s: empty qweight", t->name);
    return st ? st : ir_gq_decode(t, &q, md->raw, out, err);
}

/* Stored bytes → f32 for every storage type (F32/BF16/F16 and the GGUF block formats alike go
 * through ir_dequant, which also checks the byte count). */
static ig_status read_plain(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t, uint8_t *out,
                            ig_err *err) {
    int64_t n = tensor_rows(t) * tensor_cols(t);
    const uint8_t *p = NULL;
    if (t->src_type == IR_STYPE_GPTQ || t->src_type == IR_STYPE_AWQ) return read_gq(s, md, g, t, out, err);
    if (md->raw && md->stype == IR_STYPE_GPTQ)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: stored as %s, not as a GPTQ / AWQ layer", t->name,
                       ir_stype_name(t->src_type));
    if (md->raw) {
        if (t->src_type != md->stype || tensor_cols(t) % md->be)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: stored as %s, not as whole rows of %s blocks", t->name,
                           ir_stype_name(t->src_type), ir_stype_name(md->stype));
        if (t->src_nbytes != (uint64_t)tensor_rows(t) * row_bytes(md, t))
            return ig_fail(err, IG_ERR_FORMAT, "tensor %s: %llu bytes for %lld %s elements", t->name,
                           (unsigned long long)t->src_nbytes, (long long)n, ir_stype_name(md->stype));
    }
    ig_status st = src_bytes(s, t->src_file, t->src_offset, t->src_nbytes, t->name, &p, err);
    if (st) return st;
    if (md->raw) {
        memcpy(out, p, t->src_nbytes);
        return IG_OK;
    }
    st = ir_dequant(t->src_type, p, t->src_nbytes, n, (float *)out, err);
    if (st && err && !strstr(err->msg, t->name)) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        ig_fail(err, st, "tensor %s: %s", t->name, m);
    }
    return st;
}

/* GGUF stores llama q/k rows of each head as [r0, r_{D/2}, r1, r_{D/2+1}, ...] (convert script's
 * permute: reshape(heads, 2, D/2, K).swapaxes(1, 2)); stored row 2i+s is HF row s*D/2+i. */
static ig_status unpermute_rope(const rd_mode *md, const ir_tensor *t, uint8_t *out, ig_err *err) {
    int64_t rows = tensor_rows(t), H = t->xform_heads;
    size_t rb = row_bytes(md, t);
    if (H <= 0 || rows % (2 * H))
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: %lld rows do not split into %lld rope heads",
                       t->name, (long long)rows, (long long)H);
    int64_t Dh = rows / H, half = Dh / 2;
    uint8_t *tmp = malloc((size_t)rows * rb);
    if (!tmp) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
    memcpy(tmp, out, (size_t)rows * rb);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t sdx = 0; sdx < 2; sdx++)
                memcpy(out + (size_t)(h * Dh + sdx * half + i) * rb, tmp + (size_t)(h * Dh + 2 * i + sdx) * rb, rb);
    free(tmp);
    return IG_OK;
}

static ig_status read_parts(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t,
                            const ir_tensor **pt, uint8_t *out, int depth, ig_err *err);

static ig_status read_tensor(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t, uint8_t *out,
                             int depth, ig_err *err) {
    if (t->kind != IR_TENSOR_WEIGHT)
        return ig_fail(err, IG_ERR_INVALID, "tensor %s is an activation, not a weight", t->name);
    if (depth > 8)
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: parts nest too deeply (a cycle?)", t->name);
    int64_t rows = tensor_rows(t), cols = tensor_cols(t);
    if (rows <= 0 || cols <= 0)
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: bad shape", t->name);
    ig_status st;
    if (t->xform == IR_XFORM_ZERO) { /* all-zero blocks are zero weights in every block type */
        if (t->n_parts) return ig_fail(err, IG_ERR_INVALID, "tensor %s: a zero tensor has parts", t->name);
        memset(out, 0, (size_t)rows * row_bytes(md, t));
        return IG_OK;
    }
    if (t->n_parts == 0) {
        st = read_plain(s, md, g, t, out, err);
    } else {
        if (t->n_parts < 0 || t->n_parts > IR_MAX_PARTS || !t->parts)
            return ig_fail(err, IG_ERR_INVALID, "tensor %s: n_parts %d", t->name, t->n_parts);
        const ir_tensor **pt = malloc(sizeof *pt * (size_t)t->n_parts);
        if (!pt) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
        st = read_parts(s, md, g, t, pt, out, depth, err);
        free(pt);
    }
    if (st) return st;
    if (t->xform == IR_XFORM_UNPERMUTE_ROPE) return unpermute_rope(md, t, out, err);
    if (t->xform == IR_XFORM_PLUS_ONE) {
        if (md->raw) return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: its +1 transform needs f32 values", t->name);
        float *o = (float *)out;
        for (int64_t i = 0, n = tensor_rows(t) * tensor_cols(t); i < n; i++) o[i] += 1.0f;
        return IG_OK;
    }
    if (t->xform == IR_XFORM_TIMES_TWO) {
        if (md->raw) return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: its x2 transform needs f32 values", t->name);
        float *o = (float *)out;
        for (int64_t i = 0, n = tensor_rows(t) * tensor_cols(t); i < n; i++) o[i] *= 2.0f;
        return IG_OK;
    }
    if (t->xform != IR_XFORM_NONE)
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: unknown transform %d", t->name, (int)t->xform);
    return IG_OK;
}

/* Reads shard t (slice_axis) of its one part: rows or columns from slice_start, zeros past the
 * part's end. */
static ig_status read_slice(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t, const ir_tensor *pt,
                            float *out, int depth, ig_err *err) {
    int64_t rows = tensor_rows(t), cols = tensor_cols(t), pr = tensor_rows(pt), pc = tensor_cols(pt);
    if (md->raw)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: a tensor-parallel shard is read as f32 values "
                       "(--quant keep does not combine with --tp)", t->name);
    int by_rows = t->slice_axis == 1;
    if (t->slice_start < 0 || (by_rows ? pc != cols : pr != rows))
        return ig_fail(err, IG_ERR_INVALID, "tensor %s: a shard of %s that does not fit it", t->name, pt->name);
    float *tmp = malloc((size_t)(pr * pc) * sizeof *tmp);
    if (!tmp) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
    ig_status st = read_tensor(s, md, g, pt, (uint8_t *)tmp, depth + 1, err);
    for (int64_t r = 0; r < rows && !st; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t sr = by_rows ? t->slice_start + r : r, sc = by_rows ? c : t->slice_start + c;
            out[r * cols + c] = sr < pr && sc < pc ? tmp[sr * pc + sc] : 0.0f;
        }
    free(tmp);
    return st;
}

/* Reads merged weight t from its parts (pt: scratch for n_parts pointers). */
static ig_status read_parts(ir_sources *s, const rd_mode *md, const ir_graph *g, const ir_tensor *t,
                            const ir_tensor **pt, uint8_t *out, int depth, ig_err *err) {
    int64_t rows = tensor_rows(t), cols = tensor_cols(t);
    size_t rb = row_bytes(md, t);
    ig_status st;
    if (t->slice_axis) {
        if (t->n_parts != 1 || t->parts[0] < 0 || t->parts[0] >= g->n_tensors || t->slice_axis > 2)
            return ig_fail(err, IG_ERR_INVALID, "tensor %s: a shard needs one part", t->name);
        return read_slice(s, md, g, t, &g->tensors[t->parts[0]], (float *)out, depth, err);
    }
    {
        int64_t total = 0;
        for (int p = 0; p < t->n_parts; p++) {
            if (t->parts[p] < 0 || t->parts[p] >= g->n_tensors)
                return ig_fail(err, IG_ERR_INVALID, "tensor %s: part %d is tensor %d", t->name, p,
                               t->parts[p]);
            pt[p] = &g->tensors[t->parts[p]];
            int64_t pc = tensor_cols(pt[p]);
            if (pc != cols && !(t->pad16 && t->n_parts == 1 && !t->interleave16 && pc < cols))
                return ig_fail(err, IG_ERR_INVALID, "tensor %s: part %s has %lld cols, expected %lld",
                               t->name, pt[p]->name, (long long)pc, (long long)cols);
            int64_t pr = tensor_rows(pt[p]);
            total += t->interleave16 && t->pad16 ? (pr + 15) / 16 * 16 : pr;
        }
        if (t->interleave16 && t->pad16 && t->n_parts == 2 && rows % 2 == 0 && rows >= total) total = rows;
        if (total != rows)
            return ig_fail(err, IG_ERR_INVALID, "tensor %s: parts hold %lld rows, expected %lld",
                           t->name, (long long)total, (long long)rows);
        if (!t->interleave16 && t->n_parts == 1 && tensor_cols(pt[0]) < cols) {
            /* zero columns on the right (a down projection whose input was padded to 16) */
            int64_t pc = tensor_cols(pt[0]);
            if (md->raw)
                return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: zero-padded columns need f32 values", t->name);
            float *tmp = malloc((size_t)(rows * pc) * sizeof *tmp), *o = (float *)out;
            if (!tmp) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
            st = read_tensor(s, md, g, pt[0], (uint8_t *)tmp, depth + 1, err);
            if (!st)
                for (int64_t r = 0; r < rows; r++) {
                    memcpy(o + r * cols, tmp + r * pc, (size_t)pc * sizeof *o);
                    memset(o + r * cols + pc, 0, (size_t)(cols - pc) * sizeof *o);
                }
            free(tmp);
        } else if (!t->interleave16) {
            int64_t r0 = 0;
            for (int p = 0; p < t->n_parts; p++) {
                if ((st = read_tensor(s, md, g, pt[p], out + (size_t)r0 * rb, depth + 1, err))) return st;
                r0 += tensor_rows(pt[p]);
            }
            st = IG_OK;
        } else {
            if (t->n_parts != 2 || tensor_rows(pt[0]) != tensor_rows(pt[1]))
                return ig_fail(err, IG_ERR_INVALID,
                               "tensor %s: interleave16 needs two parts of equal shape", t->name);
            int64_t I = tensor_rows(pt[0]), Ip = t->pad16 ? rows / 2 : I;
            /* padding rows stay zero (all-zero blocks are zero weights in every block type) */
            uint8_t *a = calloc((size_t)(2 * Ip), rb);
            if (!a) return ig_fail(err, IG_ERR_NOMEM, "tensor %s: out of memory", t->name);
            uint8_t *b = a + (size_t)Ip * rb;
            if ((st = read_tensor(s, md, g, pt[0], a, depth + 1, err)) ||
                (st = read_tensor(s, md, g, pt[1], b, depth + 1, err))) {
                free(a);
                return st;
            }
            /* panels: gate rows [r, r+16), up rows [r, r+16), gate [r+16, r+32), ... */
            uint8_t *o = out;
            for (int64_t r = 0; r < Ip; r += 16) {
                int64_t m = Ip - r < 16 ? Ip - r : 16;
                memcpy(o, a + (size_t)r * rb, (size_t)m * rb);
                o += (size_t)m * rb;
                memcpy(o, b + (size_t)r * rb, (size_t)m * rb);
                o += (size_t)m * rb;
            }
            free(a);
            st = IG_OK;
        }
    }
    return st;
}

ig_status ir_weight_read_f32(ir_sources *s, const ir_graph *g, const ir_tensor *t, float *out,
                             ig_err *err) {
    if (!s) return ig_fail(err, IG_ERR_INVALID, "ir_weight_read_f32: no sources");
    const rd_mode md = {0};
    return read_tensor(s, &md, g, t, (uint8_t *)out, 0, err);
}

/* The storage type of every leaf under t (depth-limited like read_tensor); 0 when
 * they differ. */
static int leaf_stype(const ir_graph *g, const ir_tensor *t, int depth, ir_stype *st) {
    if (depth > 8 || t->kind != IR_TENSOR_WEIGHT) return 0;
    if (t->n_parts == 0) {
        if (*st == (ir_stype)-1) *st = t->src_type;
        return *st == t->src_type;
    }
    if (t->n_parts < 0 || t->n_parts > IR_MAX_PARTS || !t->parts) return 0;
    for (int p = 0; p < t->n_parts; p++)
        if (t->parts[p] < 0 || t->parts[p] >= g->n_tensors || !leaf_stype(g, &g->tensors[t->parts[p]], depth + 1, st))
            return 0;
    return 1;
}

int ir_weight_stype(const ir_graph *g, const ir_tensor *t, ir_stype *stype) {
    ir_stype st = (ir_stype)-1;
    if (!leaf_stype(g, t, 0, &st) || st == (ir_stype)-1) return 0;
    *stype = st;
    return 1;
}

static int leaf_gq(const ir_graph *g, const ir_tensor *t, int depth, int32_t *bits, int32_t *group) {
    if (depth > 8 || t->kind != IR_TENSOR_WEIGHT) return 0;
    if (t->n_parts == 0) {
        if (t->src_type != IR_STYPE_GPTQ && t->src_type != IR_STYPE_AWQ) return 0;
        if (!*bits) *bits = t->gq.bits, *group = t->gq.group;
        return *bits == t->gq.bits && *group == t->gq.group;
    }
    if (t->n_parts < 0 || t->n_parts > IR_MAX_PARTS || !t->parts) return 0;
    for (int p = 0; p < t->n_parts; p++)
        if (t->parts[p] < 0 || t->parts[p] >= g->n_tensors || !leaf_gq(g, &g->tensors[t->parts[p]], depth + 1, bits, group))
            return 0;
    return 1;
}

int ir_weight_gq(const ir_graph *g, const ir_tensor *t, int32_t *bits, int32_t *group) {
    int32_t b = 0, gs = 0;
    if (!leaf_gq(g, t, 0, &b, &gs) || !b) return 0;
    *bits = b, *group = gs;
    return 1;
}

ig_status ir_weight_read_blocks(ir_sources *s, const ir_graph *g, const ir_tensor *t, ir_stype stype, void *out,
                                ig_err *err) {
    if (!s) return ig_fail(err, IG_ERR_INVALID, "ir_weight_read_blocks: no sources");
    rd_mode md = {.raw = 1, .stype = stype};
    if (stype == IR_STYPE_GPTQ) {
        int32_t bits;
        if (!ir_weight_gq(g, t, &bits, &md.group))
            return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: not made of GPTQ / AWQ layers of one bit width and group size",
                           t->name);
        return read_tensor(s, &md, g, t, out, 0, err);
    }
    switch (stype) {
    case IR_STYPE_Q4_0: md.be = 32, md.bb = 18; break;
    case IR_STYPE_Q4_1: md.be = 32, md.bb = 20; break;
    case IR_STYPE_Q8_0: md.be = 32, md.bb = 34; break;
    case IR_STYPE_Q5_0: md.be = 32, md.bb = 22; break;
    case IR_STYPE_Q4_K: md.be = 256, md.bb = 144; break;
    case IR_STYPE_Q5_K: md.be = 256, md.bb = 176; break;
    case IR_STYPE_Q6_K: md.be = 256, md.bb = 210; break;
    default:
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: raw rows of %s blocks are not supported", t->name,
                       ir_stype_name(stype));
    }
    if (tensor_cols(t) % md.be)
        return ig_fail(err, IG_ERR_UNSUPPORTED, "tensor %s: %lld columns are not whole %s blocks", t->name,
                       (long long)tensor_cols(t), ir_stype_name(stype));
    return read_tensor(s, &md, g, t, out, 0, err);
}
