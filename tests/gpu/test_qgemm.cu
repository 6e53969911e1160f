/* test_qgemm.cu — harness of templates/cuda/qgemm.cu, the quantized tensor-core GEMM (steps of 9 ..
 * qg_tmax tokens on q8r / q4r rows), on the GPU or on the host.
 *
 * Cases: q8r and q4r (groups 32, 64, 128), every epilogue (store f32 with a bias and a row stride
 * wider than N, residual add, SwiGLU and GeGLU into 16-bit or f32), split K (the last CTA's sum and
 * the counters put back to zero), N not a multiple of the 128-row tile, T = 9, 16, 33, 64, 128, 200
 * (token tiles partly filled), against a double-precision reference over the weights the rows mean
 * (w = scale q, or scale q + min with the f16 scale and min), x as the 16-bit values the kernel reads.
 * Tolerances: q8r's codes are exact (f32 sums: 1e-5 of sum |w x|); q4r's fragments hold each weight
 * rounded once to the 16-bit type from the f16 scale and min, so each product may be off by half an
 * ulp of |w|, summed over k (a kernel that rounds scale or min to bf16 first fails the bf16 cases).
 * The 16-bit type is bf16, or IEEE half with -DIG_F16=1 (build both).
 *
 * GPU: nvcc -O2 -arch=sm_90 -Itemplates/cuda tests/gpu/test_qgemm.cu -lcublas -o test_qgemm
 *      [-DIG_F16=1]; `test_qgemm [--no-bench] [--no-cases] [--bench-t 16,32,..]`. After the cases,
 *      the bench times the Llama-3.2-1B matrices (qkv, o, gate/up, down; q8r, q4r g32 / g128) at T = 4 .. 1024 against the path it
 *      replaces (dequant.cu into a bf16 copy, then cublasGemmEx), against cuBLAS on bf16 weights and
 *      (T <= 8) against gemv.cu on the same rows: "bench qgemm <fmt> <matrix> T=..: <us> us <GB/s of
 *      quantized bytes> | dequant+cublas <us> (x<ratio>) | bf16 cublas <us> (x<ratio>) [| gemv <us>
 *      (x<ratio>)]"; a ratio above 1 means qgemm is faster (the crossovers for qg_tmin / qg_tmax).
 * Host (tests/cuda_host/cuda_emul.h: CTAs of fibers, ldmatrix / mma.sync as warp-collective stand-ins):
 *      g++ -std=c++20 -O2 -ffp-contract=off -x c++ -DQG_HOST_EMUL -Itemplates/cuda -Itemplates/cpu
 *      -Itests/cuda_host tests/gpu/test_qgemm.cu [-DIG_F16=1]; smaller shapes, the same checks.
 * Exit 0 when every case passes (GPU: "SKIP" and 0 without a device). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#ifdef QG_HOST_EMUL
#include "cpukv.h"
#include "cuda_emul.h"
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
#ifndef IG_F16
#define IG_F16 0
#endif

/* ---- the cases' instances (smaller shapes on the host) */
#ifdef QG_HOST_EMUL
#define C_K1 192
#define C_N1 144
#define C_K2 256
#define C_N2 128
#define C_K3 128
#define C_N3 160
#define C_K4 256
#define C_N4 64
#define C_K5 192
#define C_N5 96
#else
#define C_K1 1024
#define C_N1 1000
#define C_K2 2048
#define C_N2 256
#define C_K3 1024
#define C_N3 544
#define C_K4 2048
#define C_N4 400
#define C_K5 768
#define C_N5 256
#endif
/* 1: q8r store, bias, LDY N + 24, auto split */
#define QG_NAME qg_c1
#define QG_K C_K1
#define QG_N C_N1
#define QG_WQ 8
#define QG_BIAS 1
#define QG_LDY (C_N1 + 24)
#define QG_SPLIT IG_QG_SPLIT_AUTO(C_N1, C_K1)
#include "qgemm.cu"
/* 2: q8r residual add, split 4 */
#define QG_NAME qg_c2
#define QG_K C_K2
#define QG_N C_N2
#define QG_WQ 8
#define QG_EPI 1
#define QG_SPLIT 4
#include "qgemm.cu"
/* 3: q8r SwiGLU into the 16-bit type, bias */
#define QG_NAME qg_c3
#define QG_K C_K3
#define QG_N C_N3
#define QG_WQ 8
#define QG_BIAS 1
#define QG_EPI 2
#define QG_YBF16 1
#include "qgemm.cu"
/* 4: q4r g32 store */
#define QG_NAME qg_c4
#define QG_K C_K1
#define QG_N C_N1
#define QG_WQ 4
#define QG_WG 32
#include "qgemm.cu"
/* 5: q4r g128 residual add, split 3 */
#define QG_NAME qg_c5
#define QG_K C_K4
#define QG_N C_N4
#define QG_WQ 4
#define QG_WG 128
#define QG_EPI 1
#define QG_SPLIT 3
#include "qgemm.cu"
/* 6: q4r g64 GeGLU into f32 */
#define QG_NAME qg_c6
#define QG_K C_K5
#define QG_N C_N5
#define QG_WQ 4
#define QG_WG 64
#define QG_EPI 3
#include "qgemm.cu"
/* 7: q4r g128 SwiGLU into the 16-bit type, bias, split 2 */
#define QG_NAME qg_c7
#define QG_K C_K3
#define QG_N C_N3
#define QG_WQ 4
#define QG_WG 128
#define QG_BIAS 1
#define QG_EPI 2
#define QG_YBF16 1
#define QG_SPLIT 2
#include "qgemm.cu"
/* 8: q4r g32 residual add, bias, split 2 */
#define QG_NAME qg_c8
#define QG_K C_K2
#define QG_N C_N2
#define QG_WQ 4
#define QG_WG 32
#define QG_BIAS 1
#define QG_EPI 1
#define QG_SPLIT 2
#include "qgemm.cu"

/* 9: f8r (e4m3 codes in q8r's layout) residual add, split 2; 10: f8r SwiGLU into the 16-bit type, bias */
#define QG_NAME qg_c9
#define QG_K C_K2
#define QG_N C_N2
#define QG_WQ 8
#define QG_WF8 1
#define QG_EPI 1
#define QG_SPLIT 2
#include "qgemm.cu"
#define QG_NAME qg_c10
#define QG_K C_K3
#define QG_N C_N3
#define QG_WQ 8
#define QG_WF8 1
#define QG_BIAS 1
#define QG_EPI 2
#define QG_YBF16 1
#include "qgemm.cu"

struct qg_case {
    const char *name;
    void (*fn)(int, const unsigned short *, const unsigned char *, const float *, void *, float *, unsigned *);
    int K, N, wq, wg, bias, epi, ldy, yb, split;
};
static const qg_case g_cases[] = {
    {"q8r store bias ldy", qg_c1, C_K1, C_N1, 8, 0, 1, 0, C_N1 + 24, 0, IG_QG_SPLIT_AUTO(C_N1, C_K1)},
    {"q8r acc split4", qg_c2, C_K2, C_N2, 8, 0, 0, 1, C_N2, 0, 4},
    {"q8r swiglu 16-bit bias", qg_c3, C_K3, C_N3, 8, 0, 1, 2, C_N3 / 2, 1, 1},
    {"q4r g32 store", qg_c4, C_K1, C_N1, 4, 32, 0, 0, C_N1, 0, 1},
    {"q4r g128 acc split3", qg_c5, C_K4, C_N4, 4, 128, 0, 1, C_N4, 0, 3},
    {"q4r g64 geglu f32", qg_c6, C_K5, C_N5, 4, 64, 0, 3, C_N5 / 2, 0, 1},
    {"q4r g128 swiglu 16-bit bias split2", qg_c7, C_K3, C_N3, 4, 128, 1, 2, C_N3 / 2, 1, 2},
    {"q4r g32 acc bias split2", qg_c8, C_K2, C_N2, 4, 32, 1, 1, C_N2, 0, 2},
    {"f8r acc split2", qg_c9, C_K2, C_N2, 9, 0, 0, 1, C_N2, 0, 2}, /* wq 9: f8r */
    {"f8r swiglu 16-bit bias", qg_c10, C_K3, C_N3, 9, 0, 1, 2, C_N3 / 2, 1, 1},
};

/* ---- host numbers */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float h_b2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t h_f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
/* IEEE half of a finite f within its range (round to nearest even) */
static uint16_t h_f2h(float f) {
    if (fabsf(f) < 6.103515625e-05f) /* subnormal (or zero): multiples of 2^-24 */
        return (uint16_t)((f < 0 ? 0x8000u : 0u) | (unsigned)nearbyint(fabs((double)f) * 16777216.0));
    int e;
    const double m = frexp(fabs((double)f), &e); /* |f| = m 2^e, m in [0.5, 1) */
    double r = nearbyint(m * 2048.0);            /* 11 significant bits */
    if (r >= 2048.0) r /= 2, e++;
    const unsigned he = (unsigned)(e - 1 + 15), hm = (unsigned)r - 1024u;
    return (uint16_t)((f < 0 ? 0x8000u : 0u) | he << 10 | hm);
}
static float h_h2f(uint16_t h) {
    const int e = (h >> 10) & 31;
    if (!e) return (h & 0x8000 ? -1.0f : 1.0f) * ldexpf((float)(h & 1023), -24);
    const float v = ldexpf((float)((h & 1023) | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}
static float to16f(float f) { return IG_F16 ? h_h2f(h_f2h(f)) : h_b2f(h_f2b(f)); }
static uint16_t to16(float f) { return IG_F16 ? h_f2h(f) : h_f2b(f); }
static float from16(uint16_t h) { return IG_F16 ? h_h2f(h) : h_b2f(h); }
static const double EPS16 = IG_F16 ? 1.0 / 2048 : 1.0 / 256; /* half an ulp, relative */

/* The value of e4m3fn code c (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0:
 * subnormal, m 2^-9) */
static double e4m3_value(uint8_t c) {
    const int e = (c >> 3) & 15, m = c & 7;
    const double v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return c & 0x80 ? -v : v;
}

/* Random rows of the wq.cuh layout (wq 9: f8r, random e4m3 codes but the NaN ones, subnormal ones
 * among them): the bytes; w the weights they mean; werr the most the kernel's 16-bit fragment of
 * each weight may be off (q4r) */
static std::vector<uint8_t> make_rows(int N, int Np, int K, int wq, int G, std::vector<double> &w, std::vector<double> &werr) {
    const size_t rb = IG_WQ_ROWB(K, wq == 9 ? 8 : wq, G);
    std::vector<uint8_t> q(rb * Np, 0);
    w.assign((size_t)Np * K, 0.0), werr.assign((size_t)Np * K, 0.0);
    for (int n = 0; n < N; n++) {
        uint8_t *r = q.data() + rb * n;
        if (wq == 9) {
            const float s = ldexpf(1.0f + 0.5f * (frand() + 1.0f), -10);
            memcpy(r + K, &s, 4);
            for (int k = 0; k < K; k++) {
                uint8_t c = (uint8_t)((frand() + 1.0f) * 128.0f);
                if ((c & 0x7f) == 0x7f) c ^= 1; /* not NaN */
                if (k % 37 == 3) c &= 0x87;    /* a subnormal code */
                r[k] = c;
                w[(size_t)n * K + k] = (double)s * e4m3_value(c);
            }
        } else if (wq == 8) {
            const float s = ldexpf(1.0f + 0.5f * (frand() + 1.0f), -8);
            memcpy(r + K, &s, 4);
            for (int k = 0; k < K; k++) {
                const int v = (int)lrintf(frand() * 127.0f);
                r[k] = (uint8_t)(int8_t)v;
                w[(size_t)n * K + k] = (double)s * v;
            }
        } else {
            for (int g = 0; g < K / G; g++) {
                const float s = 0.03f + 0.02f * frand(), mn = -8.0f * s + 0.05f * frand();
                const uint16_t hs = h_f2h(s), hm = h_f2h(mn);
                memcpy(r + K / 2 + 4 * g, &hs, 2), memcpy(r + K / 2 + 4 * g + 2, &hm, 2);
                const double ds = h_h2f(hs), dm = h_h2f(hm);
                for (int i = 0; i < G; i++) {
                    const int k = g * G + i, v = (int)((frand() + 1.0f) * 8.0f) & 15;
                    r[k / 2] |= (uint8_t)(k & 1 ? v << 4 : v);
                    const double wv = ds * v + dm;
                    w[(size_t)n * K + k] = wv;
                    werr[(size_t)n * K + k] = EPS16 * 1.01 * fabs(wv) * 1.05;
                }
            }
        }
    }
    return q;
}

/* ---- device memory: the GPU's, or plain host memory for the emulation */
#ifdef QG_HOST_EMUL
static void *dalloc(size_t n) { return calloc(n + 16, 1); }
static void dput(void *d, const void *h, size_t n) { memcpy(d, h, n); }
static void dget(void *h, const void *d, size_t n) { memcpy(h, d, n); }
static void dfree(void *d) { free(d); }
#else
#define CK(call)                                                                                                     \
    do {                                                                                                             \
        cudaError_t e_ = (call);                                                                                     \
        if (e_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #call);      \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)
static void *dalloc(size_t n) {
    void *d;
    CK(cudaMalloc(&d, n + 16));
    CK(cudaMemset(d, 0, n + 16));
    return d;
}
static void dput(void *d, const void *h, size_t n) { CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); }
static void dget(void *h, const void *d, size_t n) { CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); }
static void dfree(void *d) { CK(cudaFree(d)); }
#endif

static void run_qg(const qg_case &c, int T, const void *x, const void *w, const float *bias, void *y, float *ws, unsigned *cnt) {
    const unsigned gx = IG_QG_GRID_X(c.N), gy = IG_QG_GRID_Y(T), gz = c.split;
#ifdef QG_HOST_EMUL
    emul_launch({gx, gy, gz}, {IG_QG_BLOCK, 1, 1},
                [&] { c.fn(T, (const unsigned short *)x, (const unsigned char *)w, bias, y, ws, cnt); });
#else
    CK(cudaFuncSetAttribute((const void *)c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_QG_SMEM > 96 * 1024 ? IG_QG_SMEM : 96 * 1024)); /* as the host */
    void *args[] = {&T, &x, &w, &bias, &y, &ws, &cnt};
    CK(cudaLaunchKernel((const void *)c.fn, dim3(gx, gy, gz), dim3(IG_QG_BLOCK), args, IG_QG_SMEM, 0));
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
#endif
}

static int test_case(const qg_case &c, int T) {
    const int Np = IG_NPAD16(c.N), ycols = c.epi >= 2 ? c.N / 2 : c.N, y16 = c.epi >= 2 && c.yb;
    std::vector<double> w, werr;
    std::vector<uint8_t> rows = make_rows(c.N, Np, c.K, c.wq, c.wg, w, werr);
    std::vector<uint16_t> xh((size_t)T * c.K);
    std::vector<double> xv(xh.size());
    /* odd tokens' x all positive: errors shared by a group's weights (a rounded scale or min) add up there */
    for (size_t i = 0; i < xh.size(); i++) xh[i] = to16((i / c.K) % 2 ? fabsf(frand()) : frand()), xv[i] = from16(xh[i]);
    std::vector<float> b(Np), y0((size_t)T * c.ldy);
    for (auto &v : b) v = 0.5f * frand();
    for (auto &v : y0) v = y16 ? to16f(frand()) : frand();
    void *dx = dalloc(xh.size() * 2), *dw = dalloc(rows.size()), *db = dalloc(b.size() * 4);
    const size_t ysz = y0.size() * (y16 ? 2 : 4);
    void *dy = dalloc(ysz);
    dput(dx, xh.data(), xh.size() * 2), dput(dw, rows.data(), rows.size()), dput(db, b.data(), b.size() * 4);
    if (y16) {
        std::vector<uint16_t> t(y0.size());
        for (size_t i = 0; i < t.size(); i++) t[i] = to16(y0[i]);
        dput(dy, t.data(), ysz);
    } else {
        dput(dy, y0.data(), ysz);
    }
    const size_t nws = IG_QG_WS_FLOATS(c.N, T, c.split), ncnt = IG_QG_COUNTERS(c.N, T);
    float *dws = (float *)dalloc(nws * 4 + 4);
    unsigned *dcnt = (unsigned *)dalloc(ncnt * 4);
    run_qg(c, T, dx, dw, c.bias ? (const float *)db : NULL, dy, dws, dcnt);
    std::vector<float> y(y0.size());
    if (y16) {
        std::vector<uint16_t> t(y0.size());
        dget(t.data(), dy, ysz);
        for (size_t i = 0; i < t.size(); i++) y[i] = from16(t[i]);
    } else {
        dget(y.data(), dy, ysz);
    }
    std::vector<unsigned> cnt(ncnt);
    dget(cnt.data(), dcnt, ncnt * 4);
    long nbad = 0, first = -1;
    double maxerr = 0, bg = 0, br = 0, bt = 0;
    for (unsigned v : cnt) nbad += v != 0; /* the counters are back to zero for the next launch */
    if (nbad) printf("FAIL qgemm %s T=%d: %ld counters not back to zero\n", c.name, T, nbad);
    std::vector<double> acc(Np), err(Np);
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < Np; n++) {
            double s = 0, mag = 0, e = 0;
            for (int k = 0; k < c.K; k++) {
                const double xk = xv[(size_t)t * c.K + k], p = xk * w[(size_t)n * c.K + k];
                s += p, mag += fabs(p), e += fabs(xk) * werr[(size_t)n * c.K + k];
            }
            acc[n] = s + (c.bias ? b[n] : 0.0), err[n] = e + 1e-5 * mag + 1e-6;
        }
        for (int n = 0; n < c.ldy; n++) {
            const size_t o = (size_t)t * c.ldy + n;
            double ref, tol;
            if (n >= ycols) {
                ref = y0[o], tol = 0; /* columns past the output untouched */
            } else if (c.epi >= 2) {
                const int g = 32 * (n / 16) + n % 16, u = g + 16;
                const double sg = c.epi == 3 ? 0.5 * acc[g] * (1 + tanh(0.7978845608028654 * (acc[g] + 0.044715 * acc[g] * acc[g] * acc[g])))
                                             : acc[g] / (1 + exp(-acc[g]));
                ref = sg * acc[u];
                tol = 1.2 * err[g] * fabs(acc[u]) + err[u] * (fabs(sg) + err[g]) + 1e-5 * fabs(ref) + 1e-6;
                if (y16) tol += EPS16 * fabs(ref) * 1.01;
            } else {
                ref = acc[n] + (c.epi == 1 ? y0[o] : 0.0);
                tol = err[n] + (c.epi == 1 ? 1e-7 * fabs(y0[o]) : 0);
            }
            const double e = fabs(y[o] - ref);
            if (!(e <= tol)) {
                if (first < 0) first = (long)o, bg = y[o], br = ref, bt = tol;
                nbad++;
            }
            if (e > maxerr || e != e) maxerr = e;
        }
    }
    if (first >= 0)
        printf("FAIL qgemm %-36s T=%-3d %ld bad, first [t %ld, n %ld] got %.8g want %.8g (tol %.3g), max abs err %.3g\n", c.name,
               T, nbad, first / c.ldy, first % c.ldy, bg, br, bt, maxerr);
    else if (!nbad)
        printf("ok   qgemm %-36s T=%-3d K=%d N=%d split %d (%s): max abs err %.3g\n", c.name, T, c.K, c.N, c.split,
               IG_F16 ? "f16" : "bf16", maxerr);
    dfree(dx), dfree(dw), dfree(db), dfree(dy), dfree(dws), dfree(dcnt);
    return nbad != 0;
}

#ifndef QG_HOST_EMUL
static int g_sms = 132; /* multiprocessors of the device, set in main */
/* ---- bench: the 1B matrices, qgemm against dequant.cu + cuBLAS and against cuBLAS on bf16 */
#define QG_NAME qb_q8_qkv
#define QG_K 2048
#define QG_N 3072
#define QG_WQ 8
#define QG_SPLIT IG_QG_SPLIT_AUTO(3072, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q8_o
#define QG_K 2048
#define QG_N 2048
#define QG_WQ 8
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q8_gu
#define QG_K 2048
#define QG_N 16384
#define QG_WQ 8
#define QG_EPI 2
#define QG_YBF16 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(16384, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q8_down
#define QG_K 8192
#define QG_N 2048
#define QG_WQ 8
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 8192)
#include "qgemm.cu"
#define QG_NAME qb_q4_32_qkv
#define QG_K 2048
#define QG_N 3072
#define QG_WQ 4
#define QG_WG 32
#define QG_SPLIT IG_QG_SPLIT_AUTO(3072, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_32_o
#define QG_K 2048
#define QG_N 2048
#define QG_WQ 4
#define QG_WG 32
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_32_gu
#define QG_K 2048
#define QG_N 16384
#define QG_WQ 4
#define QG_WG 32
#define QG_EPI 2
#define QG_YBF16 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(16384, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_32_down
#define QG_K 8192
#define QG_N 2048
#define QG_WQ 4
#define QG_WG 32
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 8192)
#include "qgemm.cu"
#define QG_NAME qb_q4_128_qkv
#define QG_K 2048
#define QG_N 3072
#define QG_WQ 4
#define QG_WG 128
#define QG_SPLIT IG_QG_SPLIT_AUTO(3072, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_128_o
#define QG_K 2048
#define QG_N 2048
#define QG_WQ 4
#define QG_WG 128
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_128_gu
#define QG_K 2048
#define QG_N 16384
#define QG_WQ 4
#define QG_WG 128
#define QG_EPI 2
#define QG_YBF16 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(16384, 2048)
#include "qgemm.cu"
#define QG_NAME qb_q4_128_down
#define QG_K 8192
#define QG_N 2048
#define QG_WQ 4
#define QG_WG 128
#define QG_EPI 1
#define QG_SPLIT IG_QG_SPLIT_AUTO(2048, 8192)
#include "qgemm.cu"
/* the path qgemm replaces: each matrix into one 16-bit scratch */
#define DQ_NAME dq_q8_2048
#define DQ_K 2048
#define DQ_NP 16384
#define DQ_WQ 8
#include "dequant.cu"
#define DQ_NAME dq_q8_8192
#define DQ_K 8192
#define DQ_NP 2048
#define DQ_WQ 8
#include "dequant.cu"
#define DQ_NAME dq_q4_32_2048
#define DQ_K 2048
#define DQ_NP 16384
#define DQ_WQ 4
#define DQ_WG 32
#include "dequant.cu"
#define DQ_NAME dq_q4_32_8192
#define DQ_K 8192
#define DQ_NP 2048
#define DQ_WQ 4
#define DQ_WG 32
#include "dequant.cu"
#define DQ_NAME dq_q4_128_2048
#define DQ_K 2048
#define DQ_NP 16384
#define DQ_WQ 4
#define DQ_WG 128
#include "dequant.cu"
#define DQ_NAME dq_q4_128_8192
#define DQ_K 8192
#define DQ_NP 2048
#define DQ_WQ 4
#define DQ_WG 128
#include "dequant.cu"

/* the GEMV the engine runs below qg_tmin (gemv.cu on quantized rows), for the T <= 8 lines */
#define MV_NAME mb_q8_qkv
#define MV_K 2048
#define MV_N 3072
#define MV_WQ 8
#define MV_WG 32
#define MV_EPI 0
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q8_o
#define MV_K 2048
#define MV_N 2048
#define MV_WQ 8
#define MV_WG 32
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q8_gu
#define MV_K 2048
#define MV_N 16384
#define MV_WQ 8
#define MV_WG 32
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mb_q8_down
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 8
#define MV_WG 32
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_32_qkv
#define MV_K 2048
#define MV_N 3072
#define MV_WQ 4
#define MV_WG 32
#define MV_EPI 0
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_32_o
#define MV_K 2048
#define MV_N 2048
#define MV_WQ 4
#define MV_WG 32
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_32_gu
#define MV_K 2048
#define MV_N 16384
#define MV_WQ 4
#define MV_WG 32
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mb_q4_32_down
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 4
#define MV_WG 32
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_128_qkv
#define MV_K 2048
#define MV_N 3072
#define MV_WQ 4
#define MV_WG 128
#define MV_EPI 0
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_128_o
#define MV_K 2048
#define MV_N 2048
#define MV_WQ 4
#define MV_WG 128
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"
#define MV_NAME mb_q4_128_gu
#define MV_K 2048
#define MV_N 16384
#define MV_WQ 4
#define MV_WG 128
#define MV_EPI 2
#define MV_YBF16 1
#include "gemv.cu"
#define MV_NAME mb_q4_128_down
#define MV_K 8192
#define MV_N 2048
#define MV_WQ 4
#define MV_WG 128
#define MV_EPI 1
#define MV_YBF16 0
#include "gemv.cu"

typedef void (*mv_fn)(int, const void *, const float *, const unsigned char *, const float *, void *);
typedef void (*qg_fn)(int, const unsigned short *, const unsigned char *, const float *, void *, float *, unsigned *);
typedef void (*dq_fn)(const unsigned char *, unsigned short *);

/* Times one matrix at T tokens: qgemm, dequant (a kernel per matrix, the rows the matrix has) +
 * cublasGemmEx, cublasGemmEx on 16-bit weights. Weights rotate through copies beyond the L2. */
static void bench_one(cublasHandle_t blas, const char *fmt, const char *mat, qg_fn fn, dq_fn dq, mv_fn mv, int K, int N, int wq,
                      int G, int epi, int T) {
    const size_t rb = IG_WQ_ROWB(K, wq, G), qbytes = rb * N, hbytes = (size_t)N * K * 2;
    const int copies = (int)(200e6 / qbytes) + 1, S = IG_QG_SPLIT_AUTO(N, K);
    std::vector<void *> wq_(copies), wh(copies);
    for (int i = 0; i < copies; i++) {
        wq_[i] = dalloc(qbytes), wh[i] = dalloc(hbytes);
        CK(cudaMemset(wq_[i], 0x11, qbytes));
        CK(cudaMemset(wh[i], 0x3c, hbytes));
    }
    void *x = dalloc((size_t)T * K * 2), *y = dalloc((size_t)T * N * 4), *scr = dalloc(hbytes);
    CK(cudaMemset(x, 0x3c, (size_t)T * K * 2));
    float *ws = (float *)dalloc(IG_QG_WS_FLOATS(N, T, S) * 4 + 4);
    unsigned *cnt = (unsigned *)dalloc(IG_QG_COUNTERS(N, T) * 4);
    CK(cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_QG_SMEM > 96 * 1024 ? IG_QG_SMEM : 96 * 1024));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int iters = 40;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType h = IG_F16 ? CUDA_R_16F : CUDA_R_16BF;
    float ms[4] = {0, 0, 0, 0};
    for (int v = 0; v < (T <= 8 ? 4 : 3); v++) {
        for (int it = -3; it < iters; it++) {
            if (it == 0) CK(cudaEventRecord(e0));
            const int i = (it + 3) % copies;
            if (v == 3) { /* gemv.cu on the quantized rows, the grid cap the host uses (4 CTAs an SM) */
                const float *bias = NULL, *gamma = NULL;
                const void *wp = wq_[i], *xp = x;
                void *args[] = {&T, &xp, &gamma, &wp, &bias, &y};
                CK(cudaLaunchKernel((const void *)mv, dim3(IG_MV_GRID_XB(N, IG_WQ_CODEB(K, wq), g_sms * IG_MV_CTAS_PER_SM)),
                                    dim3(IG_MV_BLOCK), args, IG_MV_SMEM(K, 2), 0));
            } else if (v == 0) {
                const float *bias = NULL;
                const unsigned char *wp = (const unsigned char *)wq_[i];
                const unsigned short *xp = (const unsigned short *)x;
                void *args[] = {&T, &xp, &wp, &bias, &y, &ws, &cnt};
                CK(cudaLaunchKernel((const void *)fn, dim3(IG_QG_GRID_X(N), IG_QG_GRID_Y(T), S), dim3(IG_QG_BLOCK), args, IG_QG_SMEM, 0));
            } else {
                if (v == 1) {
                    const unsigned char *wp = (const unsigned char *)wq_[i];
                    void *args[] = {&wp, &scr};
                    CK(cudaLaunchKernel((const void *)dq, dim3(IG_DQ_GRID_X(N, K, wq)), dim3(IG_DQ_BLOCK), args, 0, 0));
                }
                const void *wm = v == 1 ? scr : wh[i];
                if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, wm, h, K, x, h, K, epi == 1 ? &one : &zero, y,
                                 CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
                    fprintf(stderr, "cublasGemmEx failed\n");
                    exit(1);
                }
            }
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms[v], e0, e1));
        ms[v] /= iters;
    }
    const double us = 1e3 * ms[0];
    char gv[64] = "";
    if (T <= 8) snprintf(gv, sizeof gv, " | gemv %8.2f us (x%.2f)", 1e3 * ms[3], ms[3] / ms[0]);
    printf("bench qgemm %-8s %-6s N=%-5d K=%-4d T=%-3d: %8.2f us %6.0f GB/s | dequant+cublas %8.2f us (x%.2f) | %s cublas %8.2f us (x%.2f)%s\n",
           fmt, mat, N, K, T, us, qbytes / us * 1e-3, 1e3 * ms[1], ms[1] / ms[0], IG_F16 ? "f16" : "bf16", 1e3 * ms[2], ms[2] / ms[0], gv);
    for (int i = 0; i < copies; i++) dfree(wq_[i]), dfree(wh[i]);
    dfree(x), dfree(y), dfree(scr), dfree(ws), dfree(cnt);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
}

static void bench(const char *tlist) {
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        exit(1);
    }
    struct fm {
        const char *name;
        int wq, g;
        qg_fn f[4];
        dq_fn d[2];
        mv_fn v[4];
    } fms[] = {
        {"q8r", 8, 0, {qb_q8_qkv, qb_q8_o, qb_q8_gu, qb_q8_down}, {dq_q8_2048, dq_q8_8192}, {mb_q8_qkv, mb_q8_o, mb_q8_gu, mb_q8_down}},
        {"q4r g32", 4, 32, {qb_q4_32_qkv, qb_q4_32_o, qb_q4_32_gu, qb_q4_32_down}, {dq_q4_32_2048, dq_q4_32_8192},
         {mb_q4_32_qkv, mb_q4_32_o, mb_q4_32_gu, mb_q4_32_down}},
        {"q4r g128", 4, 128, {qb_q4_128_qkv, qb_q4_128_o, qb_q4_128_gu, qb_q4_128_down}, {dq_q4_128_2048, dq_q4_128_8192},
         {mb_q4_128_qkv, mb_q4_128_o, mb_q4_128_gu, mb_q4_128_down}},
    };
    const char *mats[4] = {"qkv", "o", "gu", "down"};
    const int Ns[4] = {3072, 2048, 16384, 2048}, Ks[4] = {2048, 2048, 2048, 8192}, epis[4] = {0, 1, 2, 1};
    int Ts[16] = {4, 8, 16, 32, 64, 128, 256, 512, 1024}, nt = 9;
    if (tlist) /* --bench-t 16,32,..: these step sizes only */
        for (nt = 0; nt < 16 && *tlist; nt++) {
            char *end;
            Ts[nt] = (int)strtol(tlist, &end, 10);
            if (end == tlist || Ts[nt] < 1 || Ts[nt] > 4096) {
                fprintf(stderr, "--bench-t wants step sizes 1..4096 separated by commas\n");
                exit(2);
            }
            tlist = *end == ',' ? end + 1 : end;
        }
    for (const fm &f : fms)
        for (int ti = 0; ti < nt; ti++) {
            const int T = Ts[ti];
            for (int m = 0; m < 4; m++)
                bench_one(blas, f.name, mats[m], f.f[m], f.d[m == 3], f.v[m], Ks[m], Ns[m], f.wq, f.g ? f.g : 32, epis[m], T);
        }
    cublasDestroy(blas);
}
#endif

int main(int argc, char **argv) {
    int no_bench = 0, no_cases = 0;
    const char *tlist = NULL;
    for (int i = 1; i < argc; i++) {
        no_bench |= !strcmp(argv[i], "--no-bench"), no_cases |= !strcmp(argv[i], "--no-cases");
        if (!strcmp(argv[i], "--bench-t") && i + 1 < argc) tlist = argv[++i];
    }
#ifndef QG_HOST_EMUL
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    g_sms = p.multiProcessorCount;
    if (p.major < 8) {
        printf("SKIP: qgemm needs sm_80 (device is sm_%d%d)\n", p.major, p.minor);
        return 0;
    }
    /* every count of token tiles a CTA can hold (1 .. 8: qgemm.cu's stage is compiled per count) */
    const int Ts[] = {9, 16, 20, 30, 33, 47, 55, 64, 128, 200};
#else
    const int Ts[] = {9, 27, 47, 70}; /* tiles 2, 4, 6, 8 + 1 */
    (void)no_bench, (void)tlist;
#endif
    int fails = 0;
    for (const qg_case &c : g_cases)
        for (int T : Ts) fails += no_cases ? 0 : test_case(c, T);
#ifndef QG_HOST_EMUL
    if (!fails && !no_bench) bench(tlist);
#endif
    printf(fails ? "qgemm: %d case(s) FAILED\n" : "qgemm: all cases passed\n", fails);
    return fails != 0;
}
