/* test_gemm.cpp — gemm.cu (the GEMM of prefill steps when cuBLAS is absent or `--tune cublas=0`)
 * run on the host through cuda_emul.h, without a GPU, against a reference in double over the same
 * rounded inputs: y = beta * y + x . w^T for shapes that are and are not multiples of the 64 x 64
 * tile and the 32-wide K slice (one slice, several, the last partial), 16-bit (bf16) and f32
 * elements, f32 and 16-bit outputs, beta 0 (y holding NaN must be ignored, as cuBLAS ignores it)
 * and beta 1 (accumulate), a row stride
 * wider than N. Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_gemm.cpp
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

namespace cpukv {
#include "kv_quant.h"
}
#undef IG_INLINE
#undef IG_RESTRICT
#include "cuda_emul.h"

#define GM_NAME gemm16
#define GM_ES 2
#include "gemm.cu"
#define GM_NAME gemm32
#define GM_ES 4
#include "gemm.cu"

static unsigned g_seed = 12345;
static float frand() {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* One case; es: element bytes of x and w, ybf: 16-bit y. Returns the number of mismatches. */
static int run_case(int N, int T, int K, int ldy, int es, int ybf, float beta) {
    std::vector<float> xf((size_t)T * K), wf((size_t)N * K), y0((size_t)T * ldy);
    std::vector<unsigned short> xh(xf.size()), wh(wf.size()), yh(y0.size());
    for (size_t i = 0; i < xf.size(); i++) xh[i] = ig_f32_to_bf16(frand()), xf[i] = es == 2 ? ig_bf16_to_f32(xh[i]) : frand();
    for (size_t i = 0; i < wf.size(); i++) wh[i] = ig_f32_to_bf16(frand()), wf[i] = es == 2 ? ig_bf16_to_f32(wh[i]) : frand();
    for (size_t i = 0; i < y0.size(); i++) {
        y0[i] = beta != 0.0f ? frand() : NAN;
        if (ybf) yh[i] = ig_f32_to_bf16(y0[i]), y0[i] = ig_bf16_to_f32(yh[i]);
    }
    std::vector<float> yf = y0;
    const void *w = es == 2 ? (const void *)wh.data() : (const void *)wf.data();
    const void *x = es == 2 ? (const void *)xh.data() : (const void *)xf.data();
    void *y = ybf ? (void *)yh.data() : (void *)yf.data();
    bool ok = emul_launch({(unsigned)IG_GM_GRID_X(N), (unsigned)IG_GM_GRID_Y(T), 1}, {IG_GM_BLOCK, 1, 1}, [&] {
        if (es == 2) gemm16(N, T, K, w, x, y, ldy, beta, ybf);
        else gemm32(N, T, K, w, x, y, ldy, beta, ybf);
    });
    if (!ok) {
        printf("FAIL N%d T%d K%d: the emulated CTA deadlocked\n", N, T, K);
        return 1;
    }
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < ldy; n++) {
            const size_t o = (size_t)t * ldy + n;
            const double got = ybf ? ig_bf16_to_f32(yh[o]) : yf[o];
            if (n >= N) { /* past N: untouched */
                const bool same = ybf ? yh[o] == ig_f32_to_bf16(y0[o]) : (isnan(y0[o]) ? isnan(got) : got == y0[o]);
                if (!same && bad++ < 4) printf("FAIL N%d T%d K%d: y[%d][%d] past N was written\n", N, T, K, t, n);
                continue;
            }
            double ref = beta != 0.0f ? (double)beta * y0[o] : 0.0, mag = fabs(ref);
            for (int k = 0; k < K; k++) {
                ref += (double)xf[(size_t)t * K + k] * wf[(size_t)n * K + k];
                mag += fabs((double)xf[(size_t)t * K + k] * wf[(size_t)n * K + k]);
            }
            const double tol = 1e-6 * mag + 1e-7 + (ybf ? fabs(ref) / 256.0 : 0.0);
            if (!(fabs(got - ref) <= tol) && bad++ < 4)
                printf("FAIL N%d T%d K%d es%d ybf%d beta%g: y[%d][%d] = %.7g, want %.7g (tol %.2g)\n", N, T, K, es, ybf,
                       beta, t, n, got, ref, tol);
        }
    printf("%s N%d T%d K%d ldy%d es%d ybf%d beta%g\n", bad ? "FAIL" : "ok  ", N, T, K, ldy, es, ybf, beta);
    return bad;
}

int main() {
    int bad = 0;
    const int shapes[][4] = {{64, 64, 32, 64}, {70, 37, 50, 72}, {5, 130, 17, 5}, {130, 3, 1, 131}, {40, 70, 100, 40}};
    for (const auto &s : shapes)
        for (int es = 2; es <= 4; es += 2)
            for (int ybf = 0; ybf <= (es == 2); ybf++)
                for (float beta : {0.0f, 1.0f}) bad += run_case(s[0], s[1], s[2], s[3], es, ybf, beta);
    printf("test_gemm: %s\n", bad ? "FAIL" : "all passed");
    return bad ? 1 : 0;
}
