/* test_act8.cpp — act8.cu (CUDA a8w8's prefill matmuls: activation rows to int8 per token, and the
 * epilogue of cuBLAS's int8 GEMM) run on the host through cuda_emul.h, without a GPU. The GEMM
 * between them is the exact int32 sum cuBLAS computes (CUBLAS_COMPUTE_32I), done here in int64 on
 * the q8r codes (rows of K codes, f32 scale, 12 bytes of padding: templates/cuda/wq.cuh). Checks:
 *   - the quantizer: xs = max|x| / 127, every code the nearest integer to x / xs (within 0.5),
 *     in -127..127, the row's largest |x| at +-127; an all-zero row gives scale 0 and codes 0;
 *   - the whole chain against x . w^T in double from the bf16 x and the dequantized rows: within
 *     the rounding of x to int8, sum_k |w_k| xs / 2 per output (a wrong scale, row, bias or glu
 *     is far outside), for the plain store (with bias, a row stride wider than N), the residual
 *     add, and SwiGLU / GeGLU of the packed gate/up rows (16-row blocks interleaved);
 *   - the fp8 packages' quantizer (A8_F8): xs = max|x| / 448, every code an e4m3fn value (decoded
 *     here from the format, not by the kernels' helpers) nearest to x / xs (no other value closer),
 *     never NaN, the row's largest |x| at +-448, subnormal codes for tiny x; a zero row all zero.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_act8.cpp
 * Exit 0 when every check passes. */
#include "emul_extra.h"

#define A8_QUANT_NAME a8q_80
#define A8_K 80
#include "act8.cu"
#define A8_QUANT_NAME a8q_4096
#define A8_K 4096
#include "act8.cu"
#define A8_QUANT_NAME a8q_400
#define A8_K 400
#include "act8.cu"
#define A8_QUANT_NAME a8q_256
#define A8_K 256
#include "act8.cu"
#define A8_QUANT_NAME a8q_208
#define A8_K 208
#include "act8.cu"
#define A8_QUANT_NAME a8q_128
#define A8_K 128
#include "act8.cu"
#define A8_QUANT_NAME a8q_f8_200 /* fp8 packages: e4m3 codes */
#define A8_K 200
#define A8_F8 1
#include "act8.cu"
#define A8_NQUANT_NAME a8n_80 /* RMSNorm fused in front */
#define A8_K 80
#define A8_EPS 1e-6f
#include "act8.cu"
#define A8_NQUANT_NAME a8n_f8_4096
#define A8_K 4096
#define A8_F8 1
#include "act8.cu"
#define A8_GQUANT_NAME a8g_swiglu_80 /* SwiGLU / GeGLU of packed gate/up rows fused in front */
#define A8_K 80
#define A8_GLU 1
#include "act8.cu"
#define A8_GQUANT_NAME a8g_geglu_f8_4112
#define A8_K 4112
#define A8_GLU 2
#define A8_F8 1
#include "act8.cu"
#define A8_DQ_NAME a8d_plain
#define A8_K 80
#define A8_N 40
#define A8_LDY 56
#define A8_BIAS 1
#include "act8.cu"
#define A8_DQ_NAME a8d_acc
#define A8_K 4096
#define A8_N 48
#define A8_ACC 1
#include "act8.cu"
#define A8_DQ_NAME a8d_swiglu
#define A8_K 80
#define A8_N 64
#define A8_GLU 1
#define A8_BIAS 1
#include "act8.cu"
#define A8_DQ_NAME a8d_geglu
#define A8_K 4096
#define A8_N 32
#define A8_GLU 2
#include "act8.cu"

#define A8_WG_NAME a8w_plain /* the int8 wgmma GEMM with the epilogue fused (sm_90a) */
#define A8_K 400
#define A8_N 600
#define A8_LDY 616
#define A8_BIAS 1
#include "act8.cu"
#define A8_WG_NAME a8w_acc
#define A8_K 256
#define A8_N 300
#define A8_ACC 1
#include "act8.cu"
#define A8_WG_NAME a8w_swiglu
#define A8_K 208
#define A8_N 544
#define A8_GLU 1
#define A8_BIAS 1
#include "act8.cu"
#define A8_WG_NAME a8w_geglu
#define A8_K 128
#define A8_N 256
#define A8_GLU 2
#include "act8.cu"

typedef void (*quant_fn)(int, const unsigned short *, signed char *, float *);
typedef void (*nquant_fn)(int, const float *, const float *, signed char *, float *);
typedef void (*gquant_fn)(int, const unsigned short *, const float *, signed char *, float *);
typedef void (*dq_fn)(int, const int *, const float *, const unsigned char *, const float *, void *);
typedef void (*wg_fn)(int, int, const float *, const unsigned char *, const float *, void *, int *, unsigned *, ig_tmap, ig_tmap);

/* q8r rows of w[N][K] (N padded to 16 with zero rows): codes, f32 scale max|w| / 127, padding */
static std::vector<unsigned char> q8r_rows(int N, int K, std::vector<double> &deq) {
    const int NP = (N + 15) / 16 * 16, RB = K + 16;
    std::vector<unsigned char> w((size_t)NP * RB, 0);
    deq.assign((size_t)NP * K, 0.0);
    for (int n = 0; n < N; n++) {
        std::vector<float> r(K);
        float mx = 0;
        const float amp = 0.02f + 0.05f * (n % 7);
        for (int k = 0; k < K; k++) r[k] = amp * frand(), mx = std::max(mx, fabsf(r[k]));
        const float s = mx / 127.0f;
        for (int k = 0; k < K; k++) {
            const int q = (int)lrintf(r[k] / s);
            w[(size_t)n * RB + k] = (unsigned char)(signed char)q;
            deq[(size_t)n * K + k] = (double)s * q;
        }
        memcpy(&w[(size_t)n * RB + K], &s, 4);
        memset(&w[(size_t)n * RB + K + 4], 0xee, 12); /* padding the kernels must not read as codes */
    }
    return w;
}

/* Quantizes T bf16 rows of K; checks the codes and scales; returns the codes and scales. */
static void check_quant(const char *name, quant_fn q, int T, int K, const std::vector<unsigned short> &x,
                        std::vector<signed char> &xq, std::vector<float> &xs) {
    xq.assign((size_t)T * K, 99);
    xs.assign(T, -1.0f);
    CHECK(emul_launch({(unsigned)T, 1, 1}, {IG_A8_BLOCK, 1, 1}, [&] { q(T, x.data(), xq.data(), xs.data()); }),
          "%s: deadlock", name);
    for (int t = 0; t < T; t++) {
        double amax = 0;
        for (int k = 0; k < K; k++) amax = std::max(amax, fabs((double)ig_bf16_to_f32(x[(size_t)t * K + k])));
        CHECK(fabs(xs[t] - amax / 127) <= 1e-7 * amax, "%s row %d: scale %g, want %g", name, t, xs[t], amax / 127);
        int bad = 0, peak = 0;
        for (int k = 0; k < K; k++) {
            const int c = xq[(size_t)t * K + k];
            const double v = ig_bf16_to_f32(x[(size_t)t * K + k]), want = amax > 0 ? v * 127 / amax : 0;
            bad += c < -127 || c > 127 || fabs(c - want) > 0.5 + 1e-5;
            peak = std::max(peak, abs(c));
        }
        CHECK(bad == 0, "%s row %d: %d codes not the nearest integer to x / scale", name, t, bad);
        CHECK(peak == (amax > 0 ? 127 : 0), "%s row %d: largest code %d", name, t, peak);
    }
}

/* One dq instance over T tokens: x (bf16 rows, one of them zero), quantized by q, the int32 sums
 * taken here, dq's output against the double reference; or, with wg, the GEMM with the epilogue
 * fused, through tensor maps of the codes and rows, on a grid of nsm CTAs (each walks several
 * tiles), each tile's K split in S ranges (S > 1: its outputs must also equal the unsplit kernel's
 * bit for bit, and the tile counts be back at zero). glu: 0 plain (acc: residual add), 1 / 2. */
static void check_chain(const char *name, quant_fn q, dq_fn dq, int T, int K, int N, int ldy, bool bias, bool acc, int glu,
                        wg_fn wg = nullptr, int nsm = 0, int S = 1) {
    const int NP = (N + 15) / 16 * 16;
    std::vector<double> wd;
    const std::vector<unsigned char> w = q8r_rows(N, K, wd);
    std::vector<unsigned short> x((size_t)T * K);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) x[(size_t)t * K + k] = t == 1 ? 0 : ig_f32_to_bf16((t + 1) * frand() * (k % 13 == 0 ? 8 : 1));
    std::vector<signed char> xq;
    std::vector<float> xs;
    check_quant(name, q, T, K, x, xq, xs);
    std::vector<int> sums((size_t)T * NP);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < NP; n++) {
            long long s = 0;
            for (int k = 0; k < K; k++) s += (long long)xq[(size_t)t * K + k] * (signed char)w[(size_t)n * (K + 16) + k];
            sums[(size_t)t * NP + n] = (int)s;
        }
    std::vector<float> b(N);
    for (auto &v : b) v = bias ? frand() : 0.0f;
    const int outs = glu ? N / 2 : N, ld = glu ? N / 2 : ldy;
    std::vector<float> y((size_t)T * ld), y0;
    std::vector<unsigned short> yh((size_t)T * ld);
    for (auto &v : y) v = frand();
    y0 = y;
    void *yo = glu ? (void *)yh.data() : (void *)y.data();
    if (wg) {
        /* the generated code's map of a8_xq: 128 rows at least, those past T holding anything */
        const int TR = T < IG_A8_WG_BM ? IG_A8_WG_BM : T;
        std::vector<signed char> xqp(xq);
        for (int i = T * K; i < TR * K; i++) xqp.push_back((signed char)lrintf(127 * frand()));
        const ig_tmap xm = emul_tmap2(xqp.data(), K, TR, K, 128, IG_A8_WG_BM, 1), wm = emul_tmap2(w.data(), K, NP, K + 16, 128, IG_A8_WG_BN, 1);
        std::vector<int> part((size_t)IG_A8_WG_TILES(T, N) * S * IG_A8_WG_BM * IG_A8_WG_BN, 0x5a5a5a5a);
        std::vector<unsigned> cnt(IG_A8_WG_TILES(T, N), 0);
        std::vector<float> y1(y);
        std::vector<unsigned short> yh1(yh);
        for (int pass = 0; pass < (S > 1 ? 2 : 1); pass++) { /* S, then (S > 1) the unsplit kernel into y1 / yh1 */
            const int s = pass ? 1 : S;
            void *o = pass == 0 ? yo : glu ? (void *)yh1.data() : (void *)y1.data();
            CHECK(emul_launch({(unsigned)IG_A8_WG_GRID(T, N, nsm, 1, s), 1, 1}, {IG_A8_WG_THREADS, 1, 1},
                              [&] { wg(T, s, xs.data(), w.data(), bias ? b.data() : nullptr, o, part.data(), cnt.data(), xm, wm); }),
                  "%s: deadlock", name);
        }
        if (S > 1) {
            CHECK(glu ? yh == yh1 : y == y1, "%s: %d K splits differ from the unsplit kernel's outputs", name, S);
            for (unsigned c : cnt) CHECK(c == 0, "%s: a tile count left at %u", name, c);
        }
    } else {
        CHECK(emul_launch({(unsigned)IG_A8_DQ_GRID_X(N, glu), (unsigned)IG_A8_DQ_GRID_Y(T), 1}, {IG_A8_BLOCK, 1, 1},
                          [&] { dq(T, sums.data(), xs.data(), w.data(), bias ? b.data() : nullptr, yo); }),
              "%s: deadlock", name);
    }
    double worst = 0;
    for (int t = 0; t < T; t++) {
        std::vector<double> ref(N), tol(N);
        for (int n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                s += ig_bf16_to_f32(x[(size_t)t * K + k]) * wd[(size_t)n * K + k];
                a += fabs(wd[(size_t)n * K + k]);
            }
            ref[n] = s + (bias ? b[n] : 0.0), tol[n] = a * xs[t] * 0.5 + 1e-5 * (1 + fabs(ref[n]));
        }
        for (int i = 0; i < outs; i++) {
            double want, lim, got;
            if (glu) { /* output i: gate at packed row 32 (i / 16) + i % 16, up 16 rows on */
                const int c = 32 * (i / 16) + i % 16;
                const double g = ref[c], u = ref[c + 16];
                want = ig_glu((float)g, (float)u, glu == 2);
                const double dg = glu == 2 ? 1.2 : 1.1; /* |d glu / d g| / |u| bound of silu and gelu_tanh */
                lim = dg * fabs(u) * tol[c] + (fabs(g) + 1) * tol[c + 16] + fabs(want) * 8e-3; /* + the bf16 store */
                got = ig_bf16_to_f32(yh[(size_t)t * ld + i]);
            } else {
                want = ref[i] + (acc ? y0[(size_t)t * ld + i] : 0.0), lim = tol[i];
                got = y[(size_t)t * ld + i];
            }
            worst = std::max(worst, fabs(got - want) / (lim > 0 ? lim : 1));
            CHECK(fabs(got - want) <= lim, "%s token %d output %d: %g, want %g (+- %g)", name, t, i, got, want, lim);
        }
        if (!glu) /* a row stride wider than N: the columns past N keep their values */
            for (int n = N; n < ld; n++) CHECK(y[(size_t)t * ld + n] == y0[(size_t)t * ld + n], "%s token %d column %d written", name, t, n);
    }
    printf("%s: T=%d K=%d N=%d: worst error %.2f of its bound\n", name, T, K, N, worst);
}

/* The value of e4m3fn code c, from the format: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits;
 * exponent 0 subnormal (m 2^-9); 0x7f / 0xff NaN. */
static double e4m3_value(unsigned char c) {
    const int e = (c >> 3) & 15, m = c & 7;
    if ((c & 0x7f) == 0x7f) return NAN;
    const double v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return c & 0x80 ? -v : v;
}

/* A8_F8's quantizer on T rows of K: scale, nearest e4m3 code (ties either way: within half a step
 * exactly is fine), the peak at 448, subnormals hit. */
static void check_quant_f8(const char *name, quant_fn q, int T, int K) {
    std::vector<unsigned short> x((size_t)T * K);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            x[(size_t)t * K + k] = t == 1 ? 0 : ig_f32_to_bf16((t + 1) * frand() * (k % 17 == 0 ? 20 : k % 5 == 0 ? 1e-3f : 1));
    std::vector<signed char> xq((size_t)T * K, 99);
    std::vector<float> xs(T, -1.0f);
    CHECK(emul_launch({(unsigned)T, 1, 1}, {IG_A8_BLOCK, 1, 1}, [&] { q(T, x.data(), xq.data(), xs.data()); }), "%s: deadlock", name);
    std::vector<double> vals;
    for (int c = 0; c < 256; c++)
        if (!std::isnan(e4m3_value((unsigned char)c))) vals.push_back(e4m3_value((unsigned char)c));
    int subn = 0;
    for (int t = 0; t < T; t++) {
        double amax = 0;
        for (int k = 0; k < K; k++) amax = std::max(amax, fabs((double)ig_bf16_to_f32(x[(size_t)t * K + k])));
        CHECK(fabs(xs[t] - amax / 448) <= 1e-7 * amax, "%s row %d: scale %g, want %g", name, t, xs[t], amax / 448);
        int bad = 0;
        double peak = 0;
        for (int k = 0; k < K; k++) {
            const unsigned char c = (unsigned char)xq[(size_t)t * K + k];
            const double v = e4m3_value(c), want = amax > 0 ? ig_bf16_to_f32(x[(size_t)t * K + k]) * 448 / amax : 0;
            double best = 1e30;
            for (double u : vals) best = std::min(best, fabs(u - want));
            bad += std::isnan(v) || fabs(v - want) > best * (1 + 1e-6) + 1e-12;
            peak = std::max(peak, fabs(v)), subn += c != 0 && c != 0x80 && (c & 0x78) == 0;
        }
        CHECK(bad == 0, "%s row %d: %d codes not the nearest e4m3 value to x / scale", name, t, bad);
        CHECK(peak == (amax > 0 ? 448.0 : 0.0), "%s row %d: largest value %g", name, t, peak);
    }
    CHECK(subn > 0, "%s: no subnormal code produced", name);
    printf("%s: T=%d K=%d: codes checked (%d subnormal)\n", name, T, K, subn);
}

/* A fused quantizer's codes (row t of K, scale xs) against ref, the row in double before the
 * kernels' rounding to the 16-bit type: the scale is max |ref| / QMAX up to that rounding (2^-8 relative),
 * and each code is the nearest int8 / e4m3 value to ref / xs up to it too (the kernel rounds its
 * own f32 value, which may sit on the other side of a bf16 rounding boundary: 2^-8 relative
 * each way). */
static void check_fused_codes(const char *name, int t, int K, bool f8, const std::vector<double> &ref,
                              const signed char *xq, float xs) {
    const double QMAX = f8 ? 448 : 127;
    double amax = 0;
    for (double v : ref) amax = std::max(amax, fabs(v));
    CHECK(fabs(xs - amax / QMAX) <= amax / QMAX * 0x1p-8 + 1e-30, "%s row %d: scale %g, want %g", name, t, xs, amax / QMAX);
    std::vector<double> vals;
    if (f8)
        for (int c = 0; c < 256; c++)
            if (!std::isnan(e4m3_value((unsigned char)c))) vals.push_back(e4m3_value((unsigned char)c));
    int bad = 0;
    double worst = 0;
    for (int k = 0; k < K; k++) {
        const double want = xs > 0 ? ref[k] / xs : 0;
        double got, best;
        if (f8) {
            got = e4m3_value((unsigned char)xq[k]), best = 1e30;
            for (double u : vals) best = std::min(best, fabs(u - want));
        } else {
            got = xq[k], best = fabs(want - rint(want));
        }
        const double lim = best + 0x1p-7 * fabs(want) + 1e-6; /* twice half a bf16 ulp */
        bad += std::isnan(got) || fabs(got - want) > lim || fabs(got) > QMAX;
        worst = std::max(worst, fabs(got - want) - best);
    }
    CHECK(bad == 0, "%s row %d: %d codes not the nearest to the row / scale (worst excess %g)", name, t, bad, worst);
}

/* A8_NQUANT: rms_norm(x) * gamma quantized, x f32 [T][K] (one row zero), against the double norm. */
static void check_norm_quant(const char *name, nquant_fn q, int T, int K, double eps, bool f8) {
    std::vector<float> x((size_t)T * K), g(K);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) x[(size_t)t * K + k] = t == 1 ? 0.0f : (t + 1) * frand() * (k % 11 == 0 ? 6 : 1);
    for (auto &v : g) v = 0.5f + frand();
    std::vector<signed char> xq((size_t)T * K, 99);
    std::vector<float> xs(T, -1.0f);
    CHECK(emul_launch({(unsigned)T, 1, 1}, {IG_A8_BLOCK, 1, 1}, [&] { q(T, x.data(), g.data(), xq.data(), xs.data()); }),
          "%s: deadlock", name);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int k = 0; k < K; k++) ss += (double)x[(size_t)t * K + k] * x[(size_t)t * K + k];
        const double s = 1 / sqrt(ss / K + eps);
        std::vector<double> ref(K);
        for (int k = 0; k < K; k++) ref[k] = x[(size_t)t * K + k] * s * g[k];
        check_fused_codes(name, t, K, f8, ref, xq.data() + (size_t)t * K, xs[t]);
    }
    printf("%s: T=%d K=%d: codes checked\n", name, T, K);
}

/* A8_GQUANT: glu(gate + bias, up + bias) of packed 16-bit gate/up rows [T][2K] quantized, against
 * the activation in double. */
static void check_glu_quant(const char *name, gquant_fn q, int T, int K, bool bias, bool gelu, bool f8) {
    std::vector<unsigned short> gu((size_t)T * 2 * K);
    std::vector<float> b(2 * K);
    for (size_t i = 0; i < gu.size(); i++) gu[i] = ig_f32_to_bf16(3 * frand() * (i % 9 == 0 ? 4 : 1));
    for (auto &v : b) v = bias ? frand() : 0.0f;
    std::vector<signed char> xq((size_t)T * K, 99);
    std::vector<float> xs(T, -1.0f);
    CHECK(emul_launch({(unsigned)T, 1, 1}, {IG_A8_GBLOCK, 1, 1},
                      [&] { q(T, gu.data(), bias ? b.data() : nullptr, xq.data(), xs.data()); }),
          "%s: deadlock", name);
    for (int t = 0; t < T; t++) {
        std::vector<double> ref(K);
        for (int i = 0; i < K; i++) { /* output i: gate at packed column 32 (i / 16) + i % 16, up 16 on */
            const int c = 32 * (i / 16) + i % 16;
            const double g = ig_bf16_to_f32(gu[(size_t)t * 2 * K + c]) + b[c], u = ig_bf16_to_f32(gu[(size_t)t * 2 * K + c + 16]) + b[c + 16];
            ref[i] = gelu ? 0.5 * g * (1 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u : g / (1 + exp(-g)) * u;
        }
        check_fused_codes(name, t, K, f8, ref, xq.data() + (size_t)t * K, xs[t]);
    }
    printf("%s: T=%d K=%d: codes checked\n", name, T, K);
}

int main() {
    check_quant_f8("fp8 quantizer", a8q_f8_200, 4, 200);
    check_norm_quant("norm+int8", a8n_80, 4, 80, 1e-6, false);
    check_norm_quant("norm+fp8", a8n_f8_4096, 3, 4096, 1e-5, true);
    check_glu_quant("swiglu+int8, bias", a8g_swiglu_80, 3, 80, true, false, false);
    check_glu_quant("geglu+fp8", a8g_geglu_f8_4112, 2, 4112, false, true, true);
    check_chain("plain+bias", a8q_80, a8d_plain, 5, 80, 40, 56, true, false, 0);
    check_chain("residual", a8q_4096, a8d_acc, 3, 4096, 48, 48, false, true, 0);
    check_chain("plain, two token blocks", a8q_80, a8d_plain, IG_A8_TT + 3, 80, 40, 56, true, false, 0);
    check_chain("swiglu+bias", a8q_80, a8d_swiglu, IG_A8_TT + 5, 80, 64, 64, true, false, 1);
    check_chain("geglu", a8q_4096, a8d_geglu, 3, 4096, 32, 32, false, false, 2);
    /* the fused GEMM: token / weight tiles cut short, K not a multiple of a step, several tiles a CTA */
    check_chain("wgmma plain+bias", a8q_400, nullptr, 300, 400, 600, 616, true, false, 0, a8w_plain, 4);
    check_chain("wgmma residual", a8q_256, nullptr, 129, 256, 300, 300, false, true, 0, a8w_acc, 1);
    check_chain("wgmma swiglu+bias", a8q_208, nullptr, 140, 208, 544, 544, true, false, 1, a8w_swiglu, 2);
    check_chain("wgmma geglu", a8q_128, nullptr, 128, 128, 256, 256, false, false, 2, a8w_geglu, 8);
    /* K split (uneven ranges, more items than CTAs), and steps of fewer tokens than a tile */
    check_chain("wgmma plain+bias, 3 K splits", a8q_400, nullptr, 300, 400, 600, 616, true, false, 0, a8w_plain, 4, 3);
    check_chain("wgmma plain+bias, 4 K splits", a8q_400, nullptr, 200, 400, 600, 616, true, false, 0, a8w_plain, 16, 4);
    check_chain("wgmma residual, 40 tokens, 2 K splits", a8q_256, nullptr, 40, 256, 300, 300, false, true, 0, a8w_acc, 8, 2);
    check_chain("wgmma swiglu+bias, 2 K splits", a8q_208, nullptr, 140, 208, 544, 544, true, false, 1, a8w_swiglu, 2, 2);
    check_chain("wgmma geglu, 33 tokens", a8q_128, nullptr, 33, 128, 256, 256, false, false, 2, a8w_geglu, 8);
    if (fails) printf("test_act8: %d failed checks\n", fails);
    else printf("test_act8: all passed\n");
    return fails ? 1 : 0;
}
