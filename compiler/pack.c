/* pack.c — weight layout planning, packing and writing (see pack.h). */
#include "pack.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

#define ALIGN 64u

uint16_t pk_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

uint16_t pk_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN: quiet */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds past 65504: inf */
    if (a < 0x38800000u) {                       /* below 2^-14: a subnormal half, in units of 2^-24 */
        if (a < 0x33000000u) return sign;        /* at most 2^-25: zero (the tie goes to even) */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23); /* |f| = m 2^(e - 150) */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u))) r++; /* may carry into the smallest normal */
        return (uint16_t)(sign | r);
    }
    uint32_t v = a - 0x38000000u;     /* exponent rebiased 127 -> 15 */
    v += 0xfffu + ((v >> 13) & 1u); /* round to nearest even on the 13 dropped bits */
    return (uint16_t)(sign | (v >> 13));
}

/* bf16 or f16: 2-byte elements */
static int is16(ig_dtype dt) { return dt == IG_DTYPE_BF16 || dt == IG_DTYPE_F16; }

uint64_t pk_panel_bytes(int64_t N, int64_t K, ig_dtype dt) {
    uint64_t np = (uint64_t)(N + 15) / 16;
    return np * (uint64_t)K * 16u * (is16(dt) ? 2u : 4u);
}

void pk_pack_panels(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst) {
    int64_t np = (N + 15) / 16;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; p++) {
        for (int64_t j = 0; j < 16; j++) {
            int64_t n = p * 16 + j;
            const float *row = n < N ? w + n * K : NULL;
            if (dt == IG_DTYPE_BF16) {
                uint16_t *o = (uint16_t *)dst + (size_t)p * K * 16;
                for (int64_t k = 0; k < K; k++)
                    o[(k / 2) * 32 + j * 2 + (k & 1)] = row ? pk_f32_to_bf16(row[k]) : 0;
            } else {
                float *o = (float *)dst + (size_t)p * K * 16;
                for (int64_t k = 0; k < K; k++) o[k * 16 + j] = row ? row[k] : 0.0f;
            }
        }
    }
}

void pk_pack_rows(const float *w, int64_t N, int64_t K, ig_dtype dt, void *dst) {
    /* rows past N stay zero: dst is zeroed by the caller */
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        if (is16(dt)) {
            uint16_t *o = (uint16_t *)dst + (size_t)n * K;
            for (int64_t k = 0; k < K; k++) o[k] = dt == IG_DTYPE_F16 ? pk_f32_to_f16(w[n * K + k]) : pk_f32_to_bf16(w[n * K + k]);
        } else {
            memcpy((float *)dst + (size_t)n * K, w + n * K, sizeof(float) * (size_t)K);
        }
    }
}

/* ---- quantized panels (templates/cpu/quant.h) */

uint64_t pk_quant_bytes(int64_t N, int64_t K, ig_dtype dt, int32_t group) {
    uint64_t np = (uint64_t)(N + 15) / 16, per;
    if (dt == IG_DTYPE_Q8C) per = 64u + 16u * (uint64_t)K;
    else per = (uint64_t)(K / group) * (128u + 8u * (uint64_t)group) + (K % group ? 128u + 8u * (uint64_t)(K % group) : 0);
    return np * per;
}

void pk_pack_q8c(const float *w, int64_t N, int64_t K, void *dst) {
    const uint64_t per = 64u + 16u * (uint64_t)K;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        uint8_t *panel = (uint8_t *)dst + (uint64_t)(n / 16) * per;
        int j = (int)(n % 16);
        const float *row = w + n * K;
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
        float s = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        memcpy(panel + 4 * j, &s, 4);
        int8_t *q = (int8_t *)(panel + 64);
        for (int64_t k = 0; k < K; k++) {
            long v = lrintf(row[k] * inv);
            q[k * 16 + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
}

/* Scale and min of one group x[n]: min-max, then the range shrunk in steps of 5% towards its
 * middle while that lowers the squared rounding error (outliers clip, the rest rounds finer). */
static void q4_range(const float *x, int n, float *scale, float *min) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    float best = INFINITY, mid = 0.5f * (lo + hi);
    *scale = 0.0f, *min = lo;
    for (int step = 0; step < 8 && hi > lo; step++) {
        float f = 1.0f - 0.05f * (float)step, a = mid - f * (mid - lo), b = mid + f * (hi - mid);
        float s = (b - a) / 15.0f, err = 0.0f;
        for (int i = 0; i < n; i++) {
            float q = fminf(15.0f, fmaxf(0.0f, rintf((x[i] - a) / s)));
            float d = a + s * q - x[i];
            err += d * d;
        }
        if (err < best) best = err, *scale = s, *min = a;
    }
}

/* Row `row` [K] as lane j of one q4g panel. */
static void q4_pack_lane(const float *row, int64_t K, int32_t G, int j, uint8_t *panel) {
    const uint64_t gbytes = 128u + 8u * (uint64_t)G;
    for (int64_t g = 0; g * G < K; g++) {
        const float *x = row + g * G;
        int len = (int)(K - g * G < G ? K - g * G : G);
        float s, m;
        q4_range(x, len, &s, &m);
        uint8_t *gb = panel + g * gbytes;
        memcpy(gb + 4 * j, &s, 4);
        memcpy(gb + 64 + 4 * j, &m, 4);
        for (int i = 0; i < len; i++) {
            int q = s > 0.0f ? (int)fminf(15.0f, fmaxf(0.0f, rintf((x[i] - m) / s))) : 0;
            uint8_t *b = gb + 128 + (size_t)i * 8 + (j & 7);
            *b = (uint8_t)(j < 8 ? (*b & 0xf0) | q : (*b & 0x0f) | (q << 4));
        }
    }
}

void pk_pack_q4g(const float *w, int64_t N, int64_t K, int32_t G, void *dst) {
    const uint64_t per = pk_quant_bytes(16, K, IG_DTYPE_Q4G, G);
    /* by panels: lanes j and j + 8 share bytes */
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < (N + 15) / 16; p++)
        for (int j = 0; j < 16 && p * 16 + j < N; j++) q4_pack_lane(w + (p * 16 + j) * K, K, G, j, (uint8_t *)dst + (uint64_t)p * per);
}

int pk_quant_skips(const char *skip, const char *name) {
    size_t nl = strlen(name);
    while (skip && *skip) {
        const char *e = strchr(skip, ',');
        size_t l = e ? (size_t)(e - skip) : strlen(skip);
        /* the entry matches at the end of the name, optionally followed by ".weight", and starts
         * the name or follows a dot */
        for (int wsuf = 0; wsuf < 2 && l; wsuf++) {
            size_t tail = l + (wsuf ? 7 : 0);
            if (tail > nl || (wsuf && strcmp(name + nl - 7, ".weight"))) continue;
            const char *at = name + nl - tail;
            if (!strncmp(at, skip, l) && (at == name || at[-1] == '.')) return 1;
        }
        skip = e ? e + 1 : NULL;
    }
    return 0;
}

static ig_status add_entry(const ir_graph *g, pk_plan *p, int32_t t, pk_format fmt, ig_dtype dt, const pk_quant *q,
                           ig_err *err) {
    if (t < 0 || pk_find(p, t) >= 0) return IG_OK;
    const ir_tensor *x = &g->tensors[t];
    if (x->kind != IR_TENSOR_WEIGHT)
        return ig_fail(err, IG_ERR_INTERNAL, "pack: tensor %s is not a weight", x->name);
    pk_entry e = {.tensor = t, .name = x->name, .fmt = fmt, .dtype = dt};
    if (fmt == PK_PANEL || fmt == PK_ROWMAJOR) {
        if (x->rank != 2)
            return ig_fail(err, IG_ERR_INTERNAL, "pack: %s is not a matrix", x->name);
        if (fmt == PK_ROWMAJOR && x->shape[1] % 8)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "pack: %s has an inner dimension %lld that is not a multiple of 8 (GPU kernels load 16 bytes)",
                           x->name, (long long)x->shape[1]);
        if (fmt == PK_PANEL && dt == IG_DTYPE_F16)
            return ig_fail(err, IG_ERR_UNSUPPORTED, "pack: f16 weights are for CUDA packages only (CPU panels: f32 or bf16)");
        if (is16(dt) && x->shape[1] % 2)
            return ig_fail(err, IG_ERR_UNSUPPORTED,
                           "pack: %s has an odd inner dimension %lld (16-bit types pack pairs)", x->name,
                           (long long)x->shape[1]);
        e.nbytes = pk_panel_bytes(x->shape[0], x->shape[1], dt);
        if (q && fmt == PK_PANEL && !pk_quant_skips(q->skip, x->name)) {
            e.dtype = q->wdtype;
            e.group = q->wdtype == IG_DTYPE_Q4G ? q->group : 0;
            e.nbytes = pk_quant_bytes(x->shape[0], x->shape[1], e.dtype, e.group);
        }
    } else {
        int64_t n = x->shape[0] * (x->rank == 2 ? x->shape[1] : 1);
        e.nbytes = (uint64_t)((n + 15) / 16) * 16u * 4u;
        e.dtype = IG_DTYPE_F32;
    }
    e.offset = (p->total + ALIGN - 1) / ALIGN * ALIGN;
    p->total = e.offset + e.nbytes;
    pk_entry *ne = realloc(p->e, sizeof *ne * (size_t)(p->n + 1));
    if (!ne) return ig_fail(err, IG_ERR_NOMEM, "pack: out of memory");
    p->e = ne;
    p->e[p->n++] = e;
    return IG_OK;
}

ig_status pk_plan_build(const ir_graph *g, ig_dtype wdtype, pk_format mf, const pk_quant *q, pk_plan *plan, ig_err *err) {
    memset(plan, 0, sizeof *plan);
    if (q && (mf != PK_PANEL || (q->wdtype != IG_DTYPE_Q8C && q->wdtype != IG_DTYPE_Q4G) ||
              (q->wdtype == IG_DTYPE_Q4G && q->group != 32 && q->group != 64 && q->group != 128)))
        return ig_fail(err, IG_ERR_UNSUPPORTED, "pack: quantized weights are int8 or uint4 with a group of 32, 64 or 128, "
                                                "in CPU panels");
    ig_status st = IG_OK;
    for (int32_t i = 0; i < g->n_nodes && !st; i++) {
        const ir_node *n = &g->nodes[i];
        switch (n->op) {
        case IR_OP_EMBED: st = add_entry(g, plan, n->in[1], mf, wdtype, q, err); break;
        case IR_OP_NORM_MATMUL:
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            if (!st) st = add_entry(g, plan, n->in[2], mf, wdtype, q, err);
            if (!st) st = add_entry(g, plan, n->in[3], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            break;
        case IR_OP_MATMUL_EPI:
            st = add_entry(g, plan, n->in[1], mf, wdtype, q, err);
            if (!st) st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            break;
        case IR_OP_ROPE_KV:
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            if (!st) st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            break;
        case IR_OP_NORM_ADD: st = add_entry(g, plan, n->in[2], PK_VEC_F32, IG_DTYPE_F32, NULL, err); break;
        case IR_OP_RMSNORM: st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, err); break;
        case IR_OP_MOE:        /* router (f32 rows), stacked experts (panels) */
        case IR_OP_MOE_SHARED: /* shared expert's gate (f32 row), its gate/up and down (panels) */
            /* experts stay in the float format: moe.c has no quantized path yet */
            st = add_entry(g, plan, n->in[1], PK_VEC_F32, IG_DTYPE_F32, NULL, err);
            if (!st) st = add_entry(g, plan, n->in[2], mf, wdtype, NULL, err);
            if (!st) st = add_entry(g, plan, n->in[3], mf, wdtype, NULL, err);
            break;
        default: break;
        }
    }
    /* every --quant-skip entry names some matrix (a typo would silently quantize it) */
    for (const char *k = q ? q->skip : NULL; !st && k && *k;) {
        const char *e = strchr(k, ',');
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)(e ? e - k : (long)strlen(k)), k);
        int hit = 0;
        for (int32_t i = 0; i < plan->n && !hit; i++) hit = plan->e[i].fmt == PK_PANEL && pk_quant_skips(one, plan->e[i].name);
        if (!hit) st = ig_fail(err, IG_ERR_INVALID, "--quant-skip: '%s' names no weight matrix of this model", one);
        k = e ? e + 1 : NULL;
    }
    if (st) pk_plan_free(plan);
    return st;
}

void pk_plan_free(pk_plan *plan) {
    if (!plan) return;
    free(plan->e);
    memset(plan, 0, sizeof *plan);
}

int32_t pk_find(const pk_plan *plan, int32_t t) {
    for (int32_t i = 0; i < plan->n; i++)
        if (plan->e[i].tensor == t) return i;
    return -1;
}

ig_status pk_write(const ir_graph *g, pk_plan *plan, const char *path, ig_err *err) {
    ir_sources *src = ir_sources_open(g);
    if (!src) return ig_fail(err, IG_ERR_NOMEM, "pack: cannot open weight sources");
    FILE *f = fopen(path, "wb");
    if (!f) {
        ir_sources_close(src);
        return ig_fail(err, IG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    ig_status st = IG_OK;
    uint64_t pos = 0;
    static const uint8_t zeros[ALIGN];
    for (int32_t i = 0; i < plan->n && !st; i++) {
        pk_entry *e = &plan->e[i];
        const ir_tensor *t = &g->tensors[e->tensor];
        int64_t rows = t->shape[0], cols = t->rank == 2 ? t->shape[1] : 1;
        float *w = malloc(sizeof(float) * (size_t)(rows * cols));
        uint8_t *out = calloc(1, e->nbytes);
        if (!w || !out) {
            st = ig_fail(err, IG_ERR_NOMEM, "pack: out of memory for %s", t->name);
        } else {
            st = ir_weight_read_f32(src, g, t, w, err);
        }
        if (!st) {
            if (e->fmt == PK_PANEL && e->dtype == IG_DTYPE_Q8C)
                pk_pack_q8c(w, rows, cols, out);
            else if (e->fmt == PK_PANEL && e->dtype == IG_DTYPE_Q4G)
                pk_pack_q4g(w, rows, cols, e->group, out);
            else if (e->fmt == PK_PANEL)
                pk_pack_panels(w, rows, cols, e->dtype, out);
            else if (e->fmt == PK_ROWMAJOR)
                pk_pack_rows(w, rows, cols, e->dtype, out);
            else
                memcpy(out, w, sizeof(float) * (size_t)(rows * cols));
            e->hash = rt_hash64(out, e->nbytes, 0);
            if (fwrite(zeros, 1, e->offset - pos, f) != e->offset - pos ||
                fwrite(out, 1, e->nbytes, f) != e->nbytes)
                st = ig_fail(err, IG_ERR_IO, "%s: write failed (disk full?)", path);
            pos = e->offset + e->nbytes;
        }
        free(w);
        free(out);
    }
    if (fclose(f) != 0 && !st) st = ig_fail(err, IG_ERR_IO, "%s: write failed", path);
    ir_sources_close(src);
    return st;
}
