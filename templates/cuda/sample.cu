/* sample.cu — template: picks one token per logits row on the device (greedy, temperature, top-k,
 * top-p, min-p), so a decode step copies back one int per sequence instead of a row of logits.
 *
 * Instantiate with SM_NAME, SM_V (vocabulary), SM_LD (row stride, default SM_V); defines
 *   extern "C" __global__ void SM_NAME(int n, float *logits, const ig_sm_params *p, int *out,
 *                                      const unsigned long long *amax, int n_part,
 *                                      const unsigned *mask, const int *mask_row, int *next_ids,
 *                                      int *next_pos);
 * logits f32 [n][SM_LD]; p [n] (the layout of ig_fwd_sample in ig_model_abi.h: on, temperature,
 * top_k, top_p, min_p, u); out [n]: for rows with p.on, the chosen id, or -1 when the row holds
 * NaN or +inf or only -inf; rows without p.on are left alone. amax (may be null when n_part is 0):
 * [n][n_part] best keys (ig_amax_key) over parts of each row, left by the kernel that wrote the
 * logits; with them the first pass (max, argmax, validity) reads n_part keys instead of the row.
 * Token masks (guided decoding): mask_row null, or [n]: -1 for a row without a mask, else k, whose
 * mask is the IG_SM_MASK_WORDS(SM_V) words at mask + k * IG_SM_MASK_WORDS(SM_V), bit (id & 31) of
 * word id >> 5 set where token id is allowed. A masked row's disallowed logits become -inf in
 * place (the row is the step's scratch) before anything else reads it, so greedy, temperature,
 * top-k, top-p and min-p all see only the allowed tokens (NaN or +inf at a disallowed id no longer
 * counts), and its first pass reads the row, never amax (those keys are of the unmasked row).
 * next_ids / next_pos (null: unused): row 0's choice also goes to next_ids[0] (0 in place of -1)
 * and next_pos[0] grows by one, so that a step queued behind this one runs on the chosen token
 * without the host (host_runtime.c's chained steps of a masked row).
 * launch: grid = (IG_SM_GRID_X(n) = n), block = IG_SM_BLOCK = 1024, smem 0.
 *
 * Semantics (runtime/sampler.h steps 3-8, no bias or penalties): temperature 0 is the argmax
 * (lowest id on ties). Otherwise w_i = exp((x_i - max) / T) <= 1 and a token is kept when its w
 * is at least a threshold tau = max(tau_k, tau_p, min_p):
 *   tau_k: the k-th largest w (ties with it kept, as HF);
 *   tau_p: over the tokens with w >= tau_k, in descending w, the w of the token where the mass
 *          first reaches top_p of their total (that token kept);
 *   min_p: w >= min_p is p >= min_p * p_max, since w_max = 1.
 * The token is the first, in id order, where the cumulative kept mass exceeds u x (kept mass).
 * The CPU sampler walks the kept tokens of a top-k/top-p step in another order, so the two may
 * pick different tokens for the same u; both draw from the same distribution.
 *
 * Method: one CTA per row. Thresholds come from radix selects over the bit patterns of w (for
 * w >= 0 the float order is the unsigned order): four passes of 8 bits each, with a histogram
 * of counts (top-k) or of mass (top-p) in shared memory. Masses are sums of w in 2^-40 fixed
 * point (64-bit integer atomics), so every sum, threshold and choice is deterministic whatever
 * the order the threads add in. w is recomputed in every pass instead of stored (the row stays
 * in L2); a greedy row is one pass.
 */
#include "common.cuh"

#ifndef SM_NAME
#define SM_NAME ig_sample
#endif
#ifndef SM_V
#define SM_V 128256
#endif
#ifndef SM_LD
#define SM_LD SM_V
#endif

#ifndef IG_SAMPLE_HELPERS
#define IG_SAMPLE_HELPERS
typedef struct ig_sm_params {
    int on;
    float temperature;
    int top_k;
    float top_p;
    float min_p;
    float u;
} ig_sm_params;

#define IG_SM_FIX 1099511627776.0f /* 2^40: fixed-point scale of masses */

/* Row row's choice v (called by one thread), and the next step's input for row 0 when asked. */
IG_DEV void ig_sm_put(int *out, int row, int v, int *next_ids, int *next_pos) {
    out[row] = v;
    if (next_ids && row == 0) next_ids[0] = v < 0 ? 0 : v, next_pos[0] += 1;
}

/* A masked row: logits l [V] := -inf wherever mask [IG_SM_MASK_WORDS(V)] has no bit; visible to
 * the whole CTA when it returns. Each thread takes ids tid, tid + 1024, ...: the writes coalesce
 * and a warp's 32 ids share one mask word. */
template <int V>
IG_DEV void ig_sm_apply_mask(float *l, const unsigned *mask) {
#pragma unroll 8
    for (int j = threadIdx.x; j < V; j += IG_SM_BLOCK)
        if (!((mask[j >> 5] >> (j & 31)) & 1u)) l[j] = IG_NEG_INF;
    __syncthreads();
}

/* (v, i) beats (bv, bi): larger value, or equal value and smaller index. */
IG_DEV bool ig_sm_better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

/* The weight of logit x as a key: the bits of w = exp((x - m) * invt) in [0, 1]. */
IG_DEV unsigned ig_sm_key(float x, float m, float invt) { return __float_as_uint(__expf((x - m) * invt)); }
IG_DEV unsigned long long ig_sm_fix(unsigned key) {
    return (unsigned long long)(__uint_as_float(key) * IG_SM_FIX);
}

/* Exclusive prefix sum over the CTA (1024 threads) of v; *total gets the sum. sh: 32 slots. */
IG_DEV unsigned long long ig_sm_scan(unsigned long long v, unsigned long long *sh, unsigned long long *total) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    unsigned long long inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        unsigned long long n = __shfl_up_sync(IG_FULL_MASK, inc, o);
        if (lane >= o) inc += n;
    }
    if (lane == 31) sh[wid] = inc;
    __syncthreads();
    if (wid == 0) {
        unsigned long long w = sh[lane], wi = w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            unsigned long long n = __shfl_up_sync(IG_FULL_MASK, wi, o);
            if (lane >= o) wi += n;
        }
        sh[lane] = wi - w; /* exclusive base of warp `lane` */
        if (lane == 31) sh[32] = wi;
    }
    __syncthreads();
    const unsigned long long r = sh[wid] + inc - v;
    *total = sh[32];
    __syncthreads();
    return r;
}
/* Radix select over the keys >= floor of a row of V logits (four passes of 8 bits, histogram in
 * hist[256]): the key where the descending total of counts (MASS false) or of fixed-point masses
 * (MASS true) first reaches rem >= 1. Called by the whole CTA; s_rem / s_sel are shared scratch. */
template <int V, bool MASS>
IG_DEV unsigned ig_sm_select(const float *l, float m, float invt, unsigned floor, unsigned long long rem,
                             unsigned long long *hist, unsigned long long *s_rem, unsigned *s_sel) {
    const int tid = threadIdx.x;
    unsigned prefix = 0u, mask = 0u;
    if (tid == 0) *s_rem = rem;
    for (int shift = 24; shift >= 0; shift -= 8) {
        if (tid < 256) hist[tid] = 0ull;
        __syncthreads();
#pragma unroll 8
        for (int j = tid; j < V; j += IG_SM_BLOCK) {
            const unsigned key = ig_sm_key(l[j], m, invt);
            if (key >= floor && (key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], MASS ? ig_sm_fix(key) : 1ull);
        }
        __syncthreads();
        if (tid == 0) {
            unsigned long long r = *s_rem, above = 0ull;
            int b = 255;
            for (; b > 0 && above + hist[b] < r; b--) above += hist[b];
            *s_rem = !MASS ? r - above : r > above ? r - above : 1ull; /* counts: above < r */
            *s_sel = (unsigned)b;
        }
        __syncthreads();
        prefix |= *s_sel << shift;
        mask |= 255u << shift;
    }
    return prefix;
}
#endif /* IG_SAMPLE_HELPERS */

extern "C" __global__ void __launch_bounds__(IG_SM_BLOCK)
SM_NAME(int n, float *logits, const ig_sm_params *p, int *out, const unsigned long long *amax, int n_part,
        const unsigned *mask, const int *mask_row, int *next_ids, int *next_pos) {
    __shared__ unsigned long long hist[256];
    __shared__ unsigned long long sh[33];
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ unsigned s_sel[2];
    __shared__ unsigned long long s_rem;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    if (row >= n) return;
    const ig_sm_params ps = p[row];
    if (!ps.on) return;
    const int mr = mask_row ? mask_row[row] : -1;
    if (mr >= 0) ig_sm_apply_mask<SM_V>(logits + (size_t)row * SM_LD, mask + (size_t)mr * IG_SM_MASK_WORDS(SM_V));
    const float *l = logits + (size_t)row * SM_LD;

    /* pass 1: max and argmax (lowest id on ties); NaN and +inf make the row invalid */
    float bv = IG_NEG_INF;
    int bi = 0x7fffffff, bad = 0;
    if (n_part > 0 && mr < 0) {
        /* from the writer's per-part best keys */
        __shared__ unsigned long long sk[32];
        unsigned long long key = 0ull;
        for (int j = tid; j < n_part; j += IG_SM_BLOCK) key = max(key, amax[(size_t)row * n_part + j]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) key = max(key, __shfl_xor_sync(IG_FULL_MASK, key, o));
        if (lane == 0) sk[wid] = key;
        __syncthreads();
        key = sk[lane];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) key = max(key, __shfl_xor_sync(IG_FULL_MASK, key, o));
        bad = (unsigned)(key >> 32) >= IG_AMAX_BAD;
        bv = ig_amax_value(key), bi = ig_amax_index(key);
    } else {
        /* unrolled so that 8 loads per thread are in flight (a plain loop waits out one L2 round
         * trip per element: 25 us for a 128K vocabulary on the H200) */
#pragma unroll 8
        for (int j = tid; j < SM_V; j += IG_SM_BLOCK) {
            const float v = l[j];
            if (v != v || v == __int_as_float(0x7f800000)) bad = 1;
            else if (v > bv || (bi == 0x7fffffff && v == v)) bv = v, bi = j;
        }
        bad = __syncthreads_or(bad);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(IG_FULL_MASK, bv, o);
            const int oi = __shfl_xor_sync(IG_FULL_MASK, bi, o);
            if (ig_sm_better(ov, oi, bv, bi)) bv = ov, bi = oi;
        }
        if (lane == 0) sv[wid] = bv, si[wid] = bi;
        __syncthreads();
        bv = sv[lane], bi = si[lane];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(IG_FULL_MASK, bv, o);
            const int oi = __shfl_xor_sync(IG_FULL_MASK, bi, o);
            if (ig_sm_better(ov, oi, bv, bi)) bv = ov, bi = oi;
        }
    }
    if (bad || bv == IG_NEG_INF) {
        if (tid == 0) ig_sm_put(out, row, -1, next_ids, next_pos);
        return;
    }
    if (ps.temperature == 0.0f) {
        if (tid == 0) ig_sm_put(out, row, bi, next_ids, next_pos);
        return;
    }
    const float m = bv, invt = 1.0f / ps.temperature;

    /* tau_k: the k-th largest key, by a radix select over counts */
    unsigned tau_k = 0u;
    if (ps.top_k > 0 && ps.top_k < SM_V)
        tau_k = ig_sm_select<SM_V, false>(l, m, invt, 0u, (unsigned long long)ps.top_k, hist, &s_rem, &s_sel[0]);

    /* tau_p: over keys >= tau_k, the key where the descending mass first reaches top_p */
    unsigned tau_p = 0u;
    if (ps.top_p < 1.0f) {
        unsigned long long part = 0ull, tot;
#pragma unroll 8
        for (int j = tid; j < SM_V; j += IG_SM_BLOCK) {
            const unsigned key = ig_sm_key(l[j], m, invt);
            if (key >= tau_k) part += ig_sm_fix(key);
        }
        ig_sm_scan(part, sh, &tot);
        unsigned long long target = (unsigned long long)((double)ps.top_p * (double)tot);
        if (target < 1ull) target = 1ull;
        tau_p = ig_sm_select<SM_V, true>(l, m, invt, tau_k, target, hist, &s_rem, &s_sel[0]);
    }
    unsigned tau = tau_k > tau_p ? tau_k : tau_p;
    if (ps.min_p > 0.0f && __float_as_uint(ps.min_p) > tau) tau = __float_as_uint(ps.min_p);

    /* the walk: thread tid owns ids [tid*C, tid*C + C); scan of the kept mass, then the owner of
     * the crossing point finds the id */
    constexpr int C = IG_CDIV(SM_V, IG_SM_BLOCK);
    const int j0 = tid * C, j1 = min(j0 + C, SM_V);
    unsigned long long mine = 0ull, total;
    for (int j = j0; j < j1; j++) {
        const unsigned key = ig_sm_key(l[j], m, invt);
        if (key >= tau) mine += ig_sm_fix(key);
    }
    const unsigned long long base = ig_sm_scan(mine, sh, &total);
    if (total == 0ull) { /* every kept weight underflowed the fixed point: the mode */
        if (tid == 0) ig_sm_put(out, row, bi, next_ids, next_pos);
        return;
    }
    unsigned long long r = (unsigned long long)((double)ps.u * (double)total);
    if (r >= total) r = total - 1ull;
    if (r >= base && r < base + mine) {
        unsigned long long acc = base;
        int pick = j1 - 1;
        for (int j = j0; j < j1; j++) {
            const unsigned key = ig_sm_key(l[j], m, invt);
            if (key < tau) continue;
            acc += ig_sm_fix(key);
            if (acc > r) {
                pick = j;
                break;
            }
        }
        ig_sm_put(out, row, pick, next_ids, next_pos);
    }
}

#undef SM_NAME
#undef SM_V
#undef SM_LD
