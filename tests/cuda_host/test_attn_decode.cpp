/* test_attn_decode.cpp — attention.cu's decode kernels (direct and split, whose inner loop is
 * attn_decode_tc.cuh's tensor-core loop where the shape allows, else attn_decode.cuh's) run on the
 * host through cuda_emul.h (mma.sync emulated), for the geometries the quantized-KV test
 * (test_kv_quant_kernels.cpp, pages of 16 slots) does not reach: f32 rows and uint4 at D 32 / 64
 * (the CUDA-core loop), bf16 rows (G 4 and 8), int8 / uint4 / fp8 pages of 64 slots (delta keys: a
 * page in two tiles with a carry), of 24 slots (tiles not a multiple of the page) and uint4 D 128
 * pages of 16 (the tensor-core loop's tile over two pages: the scan restarts inside it), sliding
 * windows starting inside a page, contexts 1, 17
 * and 300, the split kernel with its full grid and with a grid of 1 and 2 splits (the host's choice,
 * gridDim.z). Pages in a scattered order, every unwritten byte 0xff (NaN rows and scales: a kernel
 * reading outside its keys fails). Reference: a double softmax over the rows as the host reads them
 * (quantized: templates/cpu/kv_quant.h's dequantization, the output rotated back).
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_attn_decode.cpp
 * Exit 0 when every check passes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "cpukv.h"
#include "cuda_emul.h"

/* one layer a page; (name, H, KV, D, PS, format: 32 f32 / 16 bf16 / 8 / 4 / IG_KVQ_E4M3, window, split) */
#define AT_NAME ad_f32
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS 16
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#include "attention.cu"
#define AT_NAME ad_bf16
#define AT_H 4
#define AT_KV 1
#define AT_D 128
#define AT_PS 16
#define AT_KVBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 3
#define AT_WINDOW 40
#include "attention.cu"
#define AT_NAME ad_q4p64
#define AT_H 4
#define AT_KV 2
#define AT_D 64
#define AT_PS 64
#define AT_KVQ 4
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#define AT_WINDOW 100
#include "attention.cu"
#define AT_NAME ad_q4p24
#define AT_H 2
#define AT_KV 1
#define AT_D 32
#define AT_PS 24
#define AT_KVQ 4
#define AT_SCALE 0.17677669529663687f
#define AT_SPLIT 5
#include "attention.cu"
#define AT_NAME ad_q4p16
#define AT_H 8
#define AT_KV 2
#define AT_D 128
#define AT_PS 16
#define AT_KVQ 4
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#include "attention.cu"
#define AT_NAME ad_q4p24d128
#define AT_H 8
#define AT_KV 1
#define AT_D 128
#define AT_PS 24
#define AT_KVQ 4
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 3
#define AT_WINDOW 70
#include "attention.cu"
#define AT_NAME ad_bf16g8
#define AT_H 16
#define AT_KV 2
#define AT_D 64
#define AT_PS 24
#define AT_KVBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#include "attention.cu"
#define AT_NAME ad_q8p24
#define AT_H 6
#define AT_KV 2
#define AT_D 64
#define AT_PS 24
#define AT_KVQ 8
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#define AT_WINDOW 33
#include "attention.cu"
#define AT_NAME ad_f8p24
#define AT_H 8
#define AT_KV 2
#define AT_D 128
#define AT_PS 24
#define AT_KVQ IG_KVQ_E4M3
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 3
#define AT_WINDOW 50
#include "attention.cu"
#define AT_NAME ad_f8p64
#define AT_H 4
#define AT_KV 4
#define AT_D 64
#define AT_PS 64
#define AT_KVQ IG_KVQ_E4M3
#define AT_SCALE 0.125f
#define AT_SPLIT 4
#include "attention.cu"

typedef void (*at_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                      int, float *);
typedef void (*ats_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                       int, float *, unsigned *, float *);
struct dcase {
    const char *name;
    at_fn at;
    ats_fn split;
    int H, KV, D, PS, fmt, win, nsplit;
    double scale;
    float vmul; /* the values' magnitude (0: 1) */
};
static bool quantized(const dcase &c) { return c.fmt != 32 && c.fmt != 16; }

static int g_fails;
static uint64_t g_rng = 0x13198a2e03707344ull;
static float frand() {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static size_t layer_bytes(const dcase &c) {
    return quantized(c) ? (size_t)IG_KVQ_LAYER_BYTES(c.KV, c.PS, c.D, c.fmt) : 2ull * c.KV * c.PS * c.D * (c.fmt / 8);
}

/* The pool's rows of sequence s (keys 0 .. n-1, random; quantized: the CPU encoder, delta keys
 * against the page's earlier slots) and their values as the host reads them, K / V [n][KV][D]. */
static void fill_seq(const dcase &c, std::vector<uint8_t> &pool, const int *pt, int n, std::vector<float> &K,
                     std::vector<float> &V) {
    const int KV = c.KV, D = c.D, PS = c.PS;
    const size_t lb = layer_bytes(c);
    K.assign((size_t)n * KV * D, 0.0f), V.assign(K.size(), 0.0f);
    std::vector<float> x(D), kp(D), tmp(D);
    for (int j = 0; j < n; j++) {
        uint8_t *layer = &pool[(size_t)pt[j / PS] * lb];
        for (int kh = 0; kh < KV; kh++)
            for (int kv01 = 0; kv01 < 2; kv01++) {
                float *dst = &(kv01 ? V : K)[((size_t)j * KV + kh) * D];
                for (int i = 0; i < D; i++) x[i] = frand() * (kv01 ? (c.vmul ? c.vmul : 1.0f) : 1.5f) + (kv01 ? 0.0f : 0.1f * (j % 7));
                if (!quantized(c)) {
                    const size_t off = (((size_t)kv01 * KV + kh) * PS + j % PS) * D;
                    for (int i = 0; i < D; i++) {
                        if (c.fmt == 16) {
                            const uint16_t h = f2bf(x[i]);
                            memcpy(&layer[(off + i) * 2], &h, 2), dst[i] = bf2f(h);
                        } else
                            memcpy(&layer[(off + i) * 4], &x[i], 4), dst[i] = x[i];
                    }
                    continue;
                }
                if (kv01 == 0 && IG_KVQ_KDELTA(c.fmt)) { /* against the previous key, the best predictor */
                    if (j % PS > 0) cpukv::ig_kvq_key_before(layer, KV, PS, D, c.fmt, kh, j % PS, tmp.data(), kp.data());
                    cpukv::ig_kvq_store_key(layer, KV, PS, D, c.fmt, kh, j % PS, x.data(), kp.data(), IG_KVQ_NPRED);
                } else
                    cpukv::ig_kvq_store(layer, KV, PS, D, c.fmt, kv01, kh, j % PS, x.data());
                if (kv01 == 0 && IG_KVQ_KDELTA(c.fmt) && j % PS > 0)
                    cpukv::ig_kvq_load(layer, KV, PS, D, c.fmt, 0, kh, j % PS, 1, dst, kp.data());
                else
                    cpukv::ig_kvq_load(layer, KV, PS, D, c.fmt, kv01, kh, j % PS, 1, dst, kp.data());
            }
    }
}

/* max |out - reference| over every head of token t (sequence rows K / V, position p) */
static double token_err(const dcase &c, const std::vector<float> &K, const std::vector<float> &V, int p, const float *q,
                        const float *out) {
    const int H = c.H, KV = c.KV, D = c.D, G = H / KV, B = D & -D, lo = c.win && p >= c.win ? p - c.win + 1 : 0;
    double err = 0;
    for (int h = 0; h < H; h++) {
        const int kh = h / G;
        std::vector<double> sc(p + 1), o(D, 0.0);
        double mx = -1e300, l = 0;
        for (int j = lo; j <= p; j++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)q[h * D + i] * K[((size_t)j * KV + kh) * D + i];
            sc[j] = s * c.scale, mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = lo; j <= p; j++) {
            const double e = exp(sc[j] - mx);
            l += e;
            for (int i = 0; i < D; i++) o[i] += e * V[((size_t)j * KV + kh) * D + i];
        }
        for (int i = 0; i < D; i++) o[i] /= l;
        if (quantized(c)) { /* R^T = S H */
            for (int b0 = 0; b0 < D; b0 += B)
                for (int len = 1; len < B; len <<= 1)
                    for (int i = 0; i < B; i += 2 * len)
                        for (int j = i; j < i + len; j++) {
                            const double a = o[b0 + j], b = o[b0 + j + len];
                            o[b0 + j] = a + b, o[b0 + j + len] = a - b;
                        }
            for (int i = 0; i < D; i++) o[i] *= (IG_KVQ_FLIP(i) ? -1 : 1) / sqrt((double)B);
        }
        for (int i = 0; i < D; i++) {
            const double e = fabs(out[h * D + i] - o[i]);
            err = e > err || e != e ? e : err;
        }
    }
    return err;
}

/* Three sequences at contexts 1, 17 and 300 in one step (T = 3), direct and split (full grid, and
 * grids of 1 and 2 splits). */
static void run_case(const dcase &c) {
    const int ctxs[3] = {1, 17, 300}, T = 3, H = c.H, D = c.D, maxp = (300 + c.PS - 1) / c.PS;
    const size_t lb = layer_bytes(c);
    const int npages = 3 * maxp + 1;
    std::vector<uint8_t> pool((size_t)npages * lb, 0xff);
    std::vector<int> ptab((size_t)T * maxp), pos(T), seq(T);
    for (int i = 0; i < T * maxp; i++) ptab[i] = (int)((i * 37ull + 5) % npages);
    std::vector<std::vector<float>> K(T), V(T);
    for (int t = 0; t < T; t++) {
        pos[t] = ctxs[t] - 1, seq[t] = t;
        fill_seq(c, pool, &ptab[(size_t)t * maxp], ctxs[t], K[t], V[t]);
    }
    std::vector<float> q((size_t)T * H * D), out(q.size());
    for (auto &v : q) v = 2.0f * frand();
    std::vector<float> ws((size_t)IG_AT_WS_FLOATS(T, H, D, c.nsplit));
    std::vector<unsigned> cnt((size_t)IG_AT_COUNTERS(T, c.KV), 0u);
    const double tol = (c.fmt == 16 ? 2e-5 : 2e-4) * (c.vmul ? c.vmul : 1.0f);
    for (int run = 0; run < 4; run++) { /* direct; split with grids of nsplit, 1 and 2 */
        const unsigned gz = run == 1 ? (unsigned)c.nsplit : run == 2 ? 1u : 2u;
        std::fill(out.begin(), out.end(), NAN);
        bool ok = run == 0 ? emul_launch({(unsigned)c.KV, (unsigned)T, 1}, {IG_AT_BLOCK, 1, 1},
                                         [&] { c.at(T, q.data(), pool.data(), 0, pos.data(), seq.data(), ptab.data(), maxp, out.data()); })
                           : emul_launch({(unsigned)c.KV, (unsigned)T, gz}, {IG_AT_BLOCK, 1, 1}, [&] {
                                 c.split(T, q.data(), pool.data(), 0, pos.data(), seq.data(), ptab.data(), maxp, ws.data(),
                                         cnt.data(), out.data());
                             });
        for (unsigned v : cnt) ok &= v == 0; /* the last split re-zeroes its counter */
        for (int t = 0; t < T; t++) {
            const double e = token_err(c, K[t], V[t], pos[t], &q[(size_t)t * H * D], &out[(size_t)t * H * D]);
            const bool pass = ok && e < tol;
            g_fails += !pass;
            printf("%s %s ctx %d %s: max err %.2e\n", pass ? "ok  " : "FAIL", c.name, ctxs[t],
                   run == 0 ? "direct" : run == 1 ? "split (full grid)" : run == 2 ? "split (grid 1)" : "split (grid 2)", e);
        }
    }
}

int main() {
    const dcase cases[] = {
        {"f32 H8 KV2 D64 PS16", (at_fn)ad_f32, (ats_fn)ad_f32_split, 8, 2, 64, 16, 32, 0, 4, 0.125},
        {"bf16 H4 KV1 D128 PS16 window 40", (at_fn)ad_bf16, (ats_fn)ad_bf16_split, 4, 1, 128, 16, 16, 40, 3, 0.08838834764831845},
        {"uint4 H4 KV2 D64 PS64 window 100", (at_fn)ad_q4p64, (ats_fn)ad_q4p64_split, 4, 2, 64, 64, 4, 100, 4, 0.125},
        {"uint4 H2 KV1 D32 PS24", (at_fn)ad_q4p24, (ats_fn)ad_q4p24_split, 2, 1, 32, 24, 4, 0, 5, 0.17677669529663687},
        {"uint4 H8 KV2 D128 PS16 (tiles over two pages)", (at_fn)ad_q4p16, (ats_fn)ad_q4p16_split, 8, 2, 128, 16, 4, 0, 4, 0.125},
        {"uint4 H8 KV2 D128 PS16, values of +-4000 (their scale times the f16 unit stays finite)", (at_fn)ad_q4p16,
         (ats_fn)ad_q4p16_split, 8, 2, 128, 16, 4, 0, 4, 0.125, 4000.0f},
        {"uint4 H8 KV1 D128 PS24 window 70", (at_fn)ad_q4p24d128, (ats_fn)ad_q4p24d128_split, 8, 1, 128, 24, 4, 70, 3,
         0.08838834764831845},
        {"bf16 H16 KV2 D64 PS24 (G 8)", (at_fn)ad_bf16g8, (ats_fn)ad_bf16g8_split, 16, 2, 64, 24, 16, 0, 4, 0.125},
        {"int8 H6 KV2 D64 PS24 window 33", (at_fn)ad_q8p24, (ats_fn)ad_q8p24_split, 6, 2, 64, 24, 8, 33, 4, 0.125},
        {"fp8 H8 KV2 D128 PS24 window 50", (at_fn)ad_f8p24, (ats_fn)ad_f8p24_split, 8, 2, 128, 24, IG_KVQ_E4M3, 50, 3,
         0.08838834764831845},
        {"fp8 H4 KV4 D64 PS64 (MHA)", (at_fn)ad_f8p64, (ats_fn)ad_f8p64_split, 4, 4, 64, 64, IG_KVQ_E4M3, 0, 4, 0.125},
    };
    for (const auto &c : cases) run_case(c);
    printf("test_attn_decode: %s\n", g_fails ? "FAILED" : "ok");
    return g_fails ? 1 : 0;
}
