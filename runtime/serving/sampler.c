/* sampler.c — see sampler.h for the order of operations.
 *
 * Layout of one smp_sample call (V = vocab):
 *   scan:      max of the raw logits, NaN / +inf check                         (1 pass, vectorized)
 *   modify:    bias and penalties on the few ids concerned, raw values saved for restoring
 *   greedy:    argmax of the modified logits
 *   sampling:  weights w = exp((x - max) / T) <= 1, computed in 256-wide chunks by one function so
 *              that every pass computes bit-identical weights for the same element;
 *     plain:   sum of w, then a walk over chunk sums and inside the crossing chunk;
 *     top-k/p: a histogram of d = -log w in 1/32-nat buckets (count and mass) locates the buckets
 *              where the k-th token and the top_p mass fall; one pass collects the ids of the
 *              buckets up to there, grouped by bucket (counting sort); only the boundary buckets
 *              are sorted; min-p is a per-token test (w >= min_p, since w_max = 1).
 *   restore:   the saved raw values go back; raw logsumexp and top-n for the logprobs.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* The chunk loops below are written to be auto-vectorized; no-trapping-math lets GCC if-convert
 * the float selects (results are unchanged: IEEE arithmetic is the same, only traps are ignored). */
#pragma GCC optimize("O3", "no-trapping-math", "fp-contract=off")
#endif
/* fp-contract=off: no fused multiply-adds, so every clone below computes the same bits and a
 * seeded request draws the same tokens on any x86-64 machine. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SMP_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SMP_HOT
#endif
#define SMP_INLINE static inline __attribute__((always_inline))

#define SMP_CHUNK 256
#define SMP_BUCKETS_PER_NAT 32.0f
#define SMP_NB 1024 /* buckets over d in [0, 32) nats; bucket SMP_NB holds d >= 32 and banned ids */
#define SMP_WAYS 4  /* interleaved histograms: consecutive ids rarely chain on one counter */

typedef struct smp_cand {
    float x;    /* modified logit (ranking key) */
    float w;    /* exp((x - max) / T) */
    int32_t id;
} smp_cand;

struct smp_state {
    smp_params p;        /* copy; the bias pointers point at bias_ids / bias_vals */
    int32_t vocab;
    uint64_t rng[4];     /* xoshiro256** */
    int64_t n_sampled;
    int32_t *bias_ids;   /* [p.n_logit_bias] */
    float *bias_vals;    /* [p.n_logit_bias] */
    int track;           /* any penalty on: info / seen are kept */
    uint32_t *info;      /* [vocab] bit 31: in the prompt; bits 0..30: count in the output */
    int32_t *seen;       /* [vocab] ids with info != 0, in first-seen order */
    int32_t n_seen;
    int32_t *save_ids;   /* [n_save_cap] logits changed by bias / penalties this call ... */
    float *save_vals;    /* [n_save_cap] ... and their values before the change */
    int64_t n_save_cap;
    int filter;          /* top-k or top-p on */
    smp_cand *cand;      /* [vocab] when filter */
    uint32_t (*hcnt)[SMP_NB + 1]; /* [SMP_WAYS][SMP_NB + 1] when filter */
    double (*hmass)[SMP_NB + 1];  /* [SMP_WAYS][SMP_NB + 1] when filter */
};

/* ---- RNG: xoshiro256** seeded by splitmix64 (Blackman & Vigna) */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Step 8's uniform draw in [0, 1): 53 random bits. */
static double draw_u(smp_state *s) { return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53; }

/* ---- parameters */

void smp_params_default(smp_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

ig_status smp_validate(const smp_params *p, int32_t vocab, ig_err *err) {
    if (!p) return ig_fail(err, IG_ERR_INVALID, "sampling params are NULL");
    if (vocab <= 0) return ig_fail(err, IG_ERR_INVALID, "vocab must be > 0, got %d", (int)vocab);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return ig_fail(err, IG_ERR_INVALID, "temperature must be >= 0 and finite, got %g", (double)p->temperature);
    /* 1/temperature scales the logits: below 1e-6 it overflows toward inf (a subnormal one made
     * every weight NaN) while sampling already equals greedy decoding */
    if (p->temperature > 0.0f && p->temperature < 1e-6f)
        return ig_fail(err, IG_ERR_INVALID, "temperature %g is too small to sample with: use 0 (greedy) or at least 1e-6",
                       (double)p->temperature);
    if (p->top_k < 0) return ig_fail(err, IG_ERR_INVALID, "top_k must be >= 0 (0 = off), got %d", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return ig_fail(err, IG_ERR_INVALID, "top_p must be in (0, 1], got %g", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p < 1.0f))
        return ig_fail(err, IG_ERR_INVALID, "min_p must be in [0, 1), got %g", (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return ig_fail(err, IG_ERR_INVALID, "repetition_penalty must be > 0 and finite, got %g",
                       (double)p->repetition_penalty);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return ig_fail(err, IG_ERR_INVALID, "presence_penalty must be in [-2, 2], got %g", (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return ig_fail(err, IG_ERR_INVALID, "frequency_penalty must be in [-2, 2], got %g",
                       (double)p->frequency_penalty);
    if (p->top_logprobs < 0 || p->top_logprobs > SMP_MAX_TOP_LOGPROBS)
        return ig_fail(err, IG_ERR_INVALID, "top_logprobs must be in [0, %d], got %d", SMP_MAX_TOP_LOGPROBS,
                       (int)p->top_logprobs);
    if (p->n_logit_bias < 0)
        return ig_fail(err, IG_ERR_INVALID, "n_logit_bias must be >= 0, got %d", (int)p->n_logit_bias);
    if (p->n_logit_bias > 0 && (!p->logit_bias_ids || !p->logit_bias_values))
        return ig_fail(err, IG_ERR_INVALID, "logit_bias_ids / logit_bias_values are NULL with n_logit_bias = %d",
                       (int)p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        int32_t id = p->logit_bias_ids[i];
        float v = p->logit_bias_values[i];
        if (id < 0 || id >= vocab)
            return ig_fail(err, IG_ERR_INVALID, "logit_bias_ids[%d] = %d must be in [0, %d)", (int)i, (int)id,
                           (int)vocab);
        if (isnan(v) || v == INFINITY)
            return ig_fail(err, IG_ERR_INVALID, "logit_bias_values[%d] (id %d) must be finite or -inf, got %g",
                           (int)i, (int)id, (double)v);
    }
    return IG_OK;
}

/* ---- state */

void smp_free(smp_state *s) {
    if (!s) return;
    free(s->bias_ids);
    free(s->bias_vals);
    free(s->info);
    free(s->seen);
    free(s->save_ids);
    free(s->save_vals);
    free(s->cand);
    free(s->hcnt);
    free(s->hmass);
    free(s);
}

static void record(smp_state *s, int32_t id, uint32_t add_count, uint32_t prompt_bit) {
    uint32_t v = s->info[id];
    if (v == 0) s->seen[s->n_seen++] = id;
    uint32_t c = v & 0x7fffffffu;
    if (c < 0x7fffffffu) c += add_count;
    s->info[id] = (v & 0x80000000u) | prompt_bit | c;
}

ig_status smp_new(const smp_params *p, int32_t vocab, const int32_t *prompt, int32_t n_prompt, smp_state **out,
                  ig_err *err) {
    if (!out) return ig_fail(err, IG_ERR_INVALID, "smp_new: out is NULL");
    *out = NULL;
    ig_status st = smp_validate(p, vocab, err);
    if (st) return st;
    if (n_prompt < 0 || (n_prompt > 0 && !prompt))
        return ig_fail(err, IG_ERR_INVALID, "smp_new: prompt is NULL or n_prompt < 0 (%d)", (int)n_prompt);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= vocab)
            return ig_fail(err, IG_ERR_INVALID, "prompt[%d] = %d must be in [0, %d)", (int)i, (int)prompt[i],
                           (int)vocab);

    smp_state *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = *p;
    s->vocab = vocab;
    uint64_t sm = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&sm);

    int32_t nb = p->n_logit_bias;
    if (nb > 0) {
        s->bias_ids = malloc((size_t)nb * sizeof *s->bias_ids);
        s->bias_vals = malloc((size_t)nb * sizeof *s->bias_vals);
        if (!s->bias_ids || !s->bias_vals) goto nomem;
        memcpy(s->bias_ids, p->logit_bias_ids, (size_t)nb * sizeof *s->bias_ids);
        memcpy(s->bias_vals, p->logit_bias_values, (size_t)nb * sizeof *s->bias_vals);
    }
    s->p.logit_bias_ids = s->bias_ids;
    s->p.logit_bias_values = s->bias_vals;

    s->track = p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (s->track) {
        s->info = calloc((size_t)vocab, sizeof *s->info);
        s->seen = malloc((size_t)vocab * sizeof *s->seen);
        if (!s->info || !s->seen) goto nomem;
        for (int32_t i = 0; i < n_prompt; i++) record(s, prompt[i], 0, 0x80000000u);
    }
    s->n_save_cap = (int64_t)nb + (s->track ? vocab : 0);
    if (s->n_save_cap > 0) {
        s->save_ids = malloc((size_t)s->n_save_cap * sizeof *s->save_ids);
        s->save_vals = malloc((size_t)s->n_save_cap * sizeof *s->save_vals);
        if (!s->save_ids || !s->save_vals) goto nomem;
    }

    s->filter = (p->top_k > 0 && p->top_k < vocab) || p->top_p < 1.0f;
    if (s->filter && p->temperature > 0.0f) {
        s->cand = malloc((size_t)vocab * sizeof *s->cand);
        s->hcnt = malloc(SMP_WAYS * sizeof *s->hcnt);
        s->hmass = malloc(SMP_WAYS * sizeof *s->hmass);
        if (!s->cand || !s->hcnt || !s->hmass) goto nomem;
    }
    *out = s;
    return IG_OK;
nomem:
    smp_free(s);
    return ig_fail(err, IG_ERR_NOMEM, "smp_new: out of memory (vocab %d)", (int)vocab);
}

int64_t smp_n_sampled(const smp_state *s) { return s ? s->n_sampled : 0; }

/* ---- kernels */

/* exp(z) for z <= 0 (or -inf): Cephes' expf polynomial with round-to-nearest by the 1.5*2^23
 * trick, so that it vectorizes on plain SSE2; 0 below -87 (relative to the max weight 1). */
SMP_INLINE float exp_nonpos(float z) {
    float zc = z < -87.0f ? -87.0f : z;
    float n = (zc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = zc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    q = q * r * r + r + 1.0f;
    union { uint32_t u; float f; } sc;
    sc.u = (uint32_t)((int32_t)n + 127) << 23;
    return z < -87.0f ? 0.0f : q * sc.f;
}

/* max over x[0..n); *bad = 1 if any value is NaN or +inf. Done on the bits, as integer max
 * reductions the compiler may vectorize (a float max reduction it may not reorder): for non-NaN
 * floats, u ^ ((u >> 31) & 0x7fffffff) orders like the floats; |bits| above inf's is NaN. */
SMP_HOT static float scan_max(const float *x, int32_t n, int *bad) {
    int32_t km = INT32_MIN, am = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t u;
        memcpy(&u, &x[i], sizeof u);
        int32_t a = u & 0x7fffffff, k = u ^ ((u >> 31) & 0x7fffffff);
        km = k > km ? k : km;
        am = a > am ? a : am;
    }
    int32_t u = km ^ ((km >> 31) & 0x7fffffff);
    float r;
    memcpy(&r, &u, sizeof r);
    *bad = am > 0x7f800000 || r == INFINITY;
    return r;
}

static int32_t first_bad(const float *x, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!(x[i] < INFINITY)) return i;
    return 0;
}

/* First i with x[i] == v (v is in x). Blocks of 64 are tested with a vectorizable OR first. */
SMP_HOT static int32_t first_eq(const float *x, int32_t n, float v) {
    int32_t i = 0;
    for (; i + 64 <= n; i += 64) {
        int32_t any = 0;
        for (int k = 0; k < 64; k++) any |= x[i + k] == v;
        if (any) break;
    }
    for (; i < n; i++)
        if (x[i] == v) return i;
    return n - 1;
}

/* The one place weights are computed: w[j] = exp((x[j] - mx) * invt), zeroed below wmin, and the
 * bucket of d = -log w. Every pass calls this with the same chunking so element i always gets the
 * same bits. */
SMP_INLINE void chunk_weights(const float *x, int32_t n, float mx, float invt, float wmin, float *w, int32_t *bucket) {
    if (!bucket) {
        for (int32_t j = 0; j < n; j++) {
            float e = exp_nonpos((x[j] - mx) * invt);
            w[j] = e >= wmin ? e : 0.0f;
        }
        return;
    }
    for (int32_t j = 0; j < n; j++) {
        float z = (x[j] - mx) * invt;
        float e = exp_nonpos(z);
        w[j] = e >= wmin ? e : 0.0f;
        float d = -z * SMP_BUCKETS_PER_NAT;
        d = d < (float)SMP_NB ? d : (float)SMP_NB;
        bucket[j] = (int32_t)d;
    }
}

/* Buckets only, for the passes that need no weights (same d as chunk_weights). */
SMP_INLINE void chunk_buckets(const float *x, int32_t n, float mx, float invt, int32_t *bucket) {
    for (int32_t j = 0; j < n; j++) {
        float d = -((x[j] - mx) * invt) * SMP_BUCKETS_PER_NAT;
        d = d < (float)SMP_NB ? d : (float)SMP_NB;
        bucket[j] = (int32_t)d;
    }
}

SMP_INLINE float chunk_sum(const float *w, int32_t n) {
    float lane[8] = {0};
    int32_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) lane[k] += w[j + k];
    for (; j < n; j++) lane[j & 7] += w[j];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Sum of exp((x - mx) * invt) over x[0..n), weights below wmin dropped. */
SMP_HOT static double sum_weights(const float *x, int32_t n, float mx, float invt, float wmin) {
    float w[SMP_CHUNK];
    double z = 0.0;
    for (int32_t i = 0; i < n; i += SMP_CHUNK) {
        int32_t m = n - i < SMP_CHUNK ? n - i : SMP_CHUNK;
        chunk_weights(x + i, m, mx, invt, wmin, w, NULL);
        z += chunk_sum(w, m);
    }
    return z;
}

/* Inverse-CDF walk in id order: the first id where the running sum exceeds r. Chunk sums are the
 * same numbers sum_weights added, so the walk lands in the chunk the total promised. */
SMP_HOT static int32_t walk_weights(const float *x, int32_t n, float mx, float invt, float wmin, double r) {
    float w[SMP_CHUNK];
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i += SMP_CHUNK) {
        int32_t m = n - i < SMP_CHUNK ? n - i : SMP_CHUNK;
        chunk_weights(x + i, m, mx, invt, wmin, w, NULL);
        float cs = chunk_sum(w, m);
        if (cs > 0.0f) {
            if (cum + cs > r) {
                for (int32_t j = 0; j < m; j++) {
                    if (w[j] <= 0.0f) continue;
                    cum += w[j];
                    last = i + j;
                    if (cum > r) return last;
                }
                return last; /* rounding: the chunk's sequential sum fell short of its lane sum */
            }
            for (int32_t j = m - 1; j >= 0; j--)
                if (w[j] > 0.0f) {
                    last = i + j;
                    break;
                }
        }
        cum += cs;
    }
    return last;
}

static int cand_cmp(const void *a, const void *b) {
    const smp_cand *x = a, *y = b;
    if (x->x != y->x) return x->x > y->x ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* top-k / top-p / min-p sampling over the modified logits x (max mx). */
SMP_HOT static int32_t sample_filtered(smp_state *s, const float *x, float mx, float invt, double u, double *zall_out) {
    int32_t V = s->vocab;
    int32_t k = s->p.top_k > 0 && s->p.top_k < V ? s->p.top_k : 0;
    int topp = s->p.top_p < 1.0f;
    float w[SMP_CHUNK];
    int32_t bk[SMP_CHUNK];

    memset(s->hcnt, 0, SMP_WAYS * sizeof *s->hcnt);
    memset(s->hmass, 0, SMP_WAYS * sizeof *s->hmass);
    for (int32_t i = 0; i < V; i += SMP_CHUNK) {
        int32_t m = V - i < SMP_CHUNK ? V - i : SMP_CHUNK;
        int32_t j = 0;
        if (topp) {
            chunk_weights(x + i, m, mx, invt, 0.0f, w, bk);
            for (; j + SMP_WAYS <= m; j += SMP_WAYS)
                for (int q = 0; q < SMP_WAYS; q++) {
                    s->hcnt[q][bk[j + q]]++;
                    s->hmass[q][bk[j + q]] += w[j + q];
                }
        } else {
            chunk_buckets(x + i, m, mx, invt, bk);
            for (; j + SMP_WAYS <= m; j += SMP_WAYS)
                for (int q = 0; q < SMP_WAYS; q++) s->hcnt[q][bk[j + q]]++;
        }
        for (; j < m; j++) {
            s->hcnt[0][bk[j]]++;
            if (topp) s->hmass[0][bk[j]] += w[j];
        }
    }
    for (int b = 0; b <= SMP_NB; b++)
        for (int q = 1; q < SMP_WAYS; q++) {
            s->hcnt[0][b] += s->hcnt[q][b];
            s->hmass[0][b] += s->hmass[q][b];
        }
    uint32_t *cnt = s->hcnt[0];
    double *mass = s->hmass[0];
    double zall = 0.0;
    for (int b = 0; b <= SMP_NB; b++) zall += mass[b];
    *zall_out = topp ? zall : -1.0; /* without top-p the masses were not computed */

    /* Last bucket to collect: the one holding the k-th token, else the one where the top_p mass of
     * the whole distribution is reached (top-p over the top-k set ends no later). */
    int32_t bc = SMP_NB;
    if (k) {
        int64_t c = 0;
        for (int b = 0; b <= SMP_NB; b++) {
            c += cnt[b];
            if (c >= k) {
                bc = b;
                break;
            }
        }
    } else {
        double target = (double)s->p.top_p * zall, c = 0.0;
        for (int b = 0; b <= SMP_NB; b++) {
            c += mass[b];
            if (c >= target) {
                bc = b;
                break;
            }
        }
    }

    /* Collect buckets 0..bc grouped by bucket (counting sort). Slices: [start[b], start[b+1]). */
    int32_t start[SMP_NB + 2], fill[SMP_NB + 1];
    start[0] = 0;
    for (int b = 0; b <= SMP_NB; b++) start[b + 1] = start[b] + (b <= bc ? (int32_t)cnt[b] : 0);
    memcpy(fill, start, sizeof fill);
    int32_t nc = start[bc + 1];
    smp_cand *cd = s->cand;
    for (int32_t i = 0; i < V; i += SMP_CHUNK) {
        int32_t m = V - i < SMP_CHUNK ? V - i : SMP_CHUNK;
        chunk_buckets(x + i, m, mx, invt, bk);
        for (int32_t j = 0; j < m; j++)
            if (bk[j] <= bc) cd[fill[bk[j]]++] = (smp_cand){x[i + j], exp_nonpos((x[i + j] - mx) * invt), i + j};
    }

    /* top-k: sort the boundary bucket; keep k plus ties with the k-th. */
    int32_t nk = nc;
    double zk = zall;
    int sorted_bc = 0;
    if (k) {
        qsort(cd + start[bc], (size_t)(nc - start[bc]), sizeof *cd, cand_cmp);
        sorted_bc = 1;
        nk = k;
        while (nk < nc && cd[nk].x == cd[k - 1].x) nk++;
        zk = 0.0;
        for (int32_t j = 0; j < nk; j++) zk += cd[j].w;
    }

    /* top-p over the (renormalized) top-k set: bucket by bucket, sort only the crossing one. */
    int32_t np = nk;
    if (topp) {
        double target = (double)s->p.top_p * zk, c = 0.0;
        for (int b = 0; b <= bc; b++) {
            int32_t lo = start[b], hi = start[b + 1] < nk ? start[b + 1] : nk;
            if (lo >= hi) continue;
            double bm = 0.0;
            for (int32_t j = lo; j < hi; j++) bm += cd[j].w;
            if (c + bm >= target) {
                if (!(b == bc && sorted_bc)) qsort(cd + lo, (size_t)(hi - lo), sizeof *cd, cand_cmp);
                for (int32_t j = lo; j < hi; j++) {
                    c += cd[j].w;
                    if (c >= target) {
                        np = j + 1;
                        break;
                    }
                }
                if (np == nk) np = hi; /* rounding fell short: keep the bucket */
                break;
            }
            c += bm;
        }
    }

    /* min-p, then the draw. w_max = 1, so p >= min_p * p_max is w >= min_p. */
    float wmin = s->p.min_p;
    double zk2 = 0.0;
    for (int32_t j = 0; j < np; j++)
        if (cd[j].w >= wmin) zk2 += cd[j].w;
    double r = u * zk2, c = 0.0;
    int32_t last = cd[0].id;
    for (int32_t j = 0; j < np; j++) {
        if (!(cd[j].w >= wmin) || cd[j].w <= 0.0f) continue;
        c += cd[j].w;
        last = cd[j].id;
        if (c > r) return last;
    }
    return last;
}

/* The n largest raw logits, descending, lower id first on ties. Blocks of 64 whose max cannot
 * enter the list are skipped with one vectorized test. */
SMP_HOT static void top_n(const float *x, int32_t V, int32_t n, float mx, double lse, smp_result *r) {
    smp_logprob *t = r->top;
    int32_t have = 0;
    for (int32_t i0 = 0; i0 < V; i0 += 64) {
        int32_t i1 = V - i0 < 64 ? V : i0 + 64;
        if (have == n && i1 - i0 == 64) {
            float thr = t[n - 1].logprob;
            int32_t any = 0;
            for (int k = 0; k < 64; k++) any |= x[i0 + k] > thr;
            if (!any) continue;
        }
        for (int32_t i = i0; i < i1; i++) {
            float v = x[i];
            if (have == n && !(v > t[n - 1].logprob)) continue;
            int32_t j = have < n ? have++ : n - 1;
            while (j > 0 && v > t[j - 1].logprob) {
                t[j] = t[j - 1];
                j--;
            }
            t[j].id = i;
            t[j].logprob = v;
        }
    }
    for (int32_t j = 0; j < have; j++) t[j].logprob = (float)((double)t[j].logprob - (double)mx - lse);
    r->n_top = have;
}

ig_status smp_sample(smp_state *s, float *logits, smp_result *r, ig_err *err) {
    if (!s || !logits || !r) return ig_fail(err, IG_ERR_INVALID, "smp_sample: NULL argument");
    int32_t V = s->vocab;
    const smp_params *p = &s->p;
    int bad;
    float m0 = scan_max(logits, V, &bad);
    if (bad) {
        int32_t i = first_bad(logits, V);
        return ig_fail(err, IG_ERR_INVALID, "logits[%d] is %g (NaN and +inf are not valid logits)", (int)i,
                       (double)logits[i]);
    }
    if (m0 == -INFINITY) return ig_fail(err, IG_ERR_INVALID, "every logit is -inf: no token can be sampled");

    /* 1-2: bias and penalties, in place, raw values saved. */
    int64_t ns = 0;
    for (int32_t j = 0; j < p->n_logit_bias; j++) {
        int32_t id = s->bias_ids[j];
        s->save_ids[ns] = id;
        s->save_vals[ns++] = logits[id];
        logits[id] += s->bias_vals[j];
    }
    if (s->track) {
        float rp = p->repetition_penalty, pres = p->presence_penalty, freq = p->frequency_penalty;
        for (int32_t j = 0; j < s->n_seen; j++) {
            int32_t id = s->seen[j];
            uint32_t cnt = s->info[id] & 0x7fffffffu;
            float v = logits[id];
            s->save_ids[ns] = id;
            s->save_vals[ns++] = v;
            if (rp != 1.0f) v = v > 0.0f ? v / rp : v * rp;
            if (cnt > 0) v -= pres + freq * (float)cnt;
            logits[id] = v;
        }
    }
    float mx = m0;
    if (ns > 0) {
        mx = scan_max(logits, V, &bad);
        if (bad || mx == -INFINITY) {
            for (int64_t j = ns - 1; j >= 0; j--) logits[s->save_ids[j]] = s->save_vals[j];
            return ig_fail(err, IG_ERR_INVALID,
                           bad ? "a logit became NaN or +inf after bias/penalties"
                               : "every token is banned (all logits -inf after logit bias)");
        }
    }

    int32_t tok;
    double zsame = -1.0; /* the raw sum of weights, when the sampling pass computed it anyway */
    if (p->temperature == 0.0f) {
        tok = first_eq(logits, V, mx);
    } else {
        float invt = 1.0f / p->temperature;
        double u = draw_u(s);
        if (s->filter) {
            double zall;
            tok = sample_filtered(s, logits, mx, invt, u, &zall);
            if (ns == 0 && invt == 1.0f && zall >= 0.0) zsame = zall;
        } else {
            float wmin = p->min_p;
            double z = sum_weights(logits, V, mx, invt, wmin);
            tok = walk_weights(logits, V, mx, invt, wmin, u * z);
            if (ns == 0 && invt == 1.0f && wmin == 0.0f) zsame = z;
        }
    }

    for (int64_t j = ns - 1; j >= 0; j--) logits[s->save_ids[j]] = s->save_vals[j];
    if (tok < 0 || tok >= V) /* never a token id outside the vocabulary to the client */
        return ig_fail(err, IG_ERR_INTERNAL, "sampling found no token (the weights of the %d logits are not finite)", V);

    /* Raw logprobs, only when asked for: greedy decoding then costs two passes over the vocab. */
    r->token = tok;
    r->logprob = NAN;
    r->n_top = 0;
    if (p->logprobs || p->top_logprobs > 0) {
        double z0 = zsame >= 0.0 ? zsame : sum_weights(logits, V, m0, 1.0f, 0.0f);
        double lse = log(z0);
        r->logprob = (float)((double)logits[tok] - (double)m0 - lse);
        if (p->top_logprobs > 0) top_n(logits, V, p->top_logprobs < V ? p->top_logprobs : V, m0, lse, r);
    }

    if (s->track) record(s, tok, 1, 0);
    s->n_sampled++;
    return IG_OK;
}

/* ---- device sampling: the same params and RNG, the work done by the model (ig_fwd_sample) */

int smp_device_step(smp_state *s, ig_fwd_sample *d) {
    const smp_params *p = &s->p;
    if (p->n_logit_bias > 0 || s->track || p->logprobs || p->top_logprobs > 0) return 0;
    d->on = 1;
    d->temperature = p->temperature;
    d->top_k = p->top_k;
    d->top_p = p->top_p;
    d->min_p = p->min_p;
    d->u = 0.0f;
    if (p->temperature != 0.0f) {
        /* the draw smp_sample makes, rounded down to a float below 1 */
        double u = draw_u(s);
        float uf = (float)u;
        d->u = uf < 1.0f ? uf : 0x1.fffffep-1f;
    }
    return 1;
}

void smp_device_accept(smp_state *s, int32_t token, smp_result *r) {
    r->token = token;
    r->logprob = NAN;
    r->n_top = 0;
    s->n_sampled++;
}
