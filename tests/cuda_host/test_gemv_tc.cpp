/* test_gemv_tc.cpp — gemv_tc.cu (the decode matmul for 2..8 tokens on tensor cores) run on the host
 * through cuda_emul.h (its mma.sync stand-in), without a GPU, against a reference in double from
 * the documented math: y = x . W^T (+ bias) with the store / residual-add / SwiGLU / GeGLU
 * epilogues and the fused RMSNorm prologue, W as 16-bit rows or wq.cuh's q8r / q4r rows (packed
 * here from that documentation by emul_extra.h's pack_rows). The kernel rounds each q4r weight
 * (scale q + min) to f16, then to the 16-bit type, and the normalized x to 16 bits: the reference
 * does the same, so what remains is f32 accumulation order (bound 2e-4 of sum |w x|; a wrong
 * nibble, group scale, pair order, row or token is O(1) off). Cases: q4r with groups of 32 / 64 /
 * 128 (several blocks a row, several warps a unit: K up to 1024), each epilogue, the norm, T from
 * 2 to 8, a row stride wider than N, padded rows; a q8r case and 16-bit rows for the older paths;
 * f8r rows (e4m3 codes, subnormal ones among them), packed by emul_extra.h's pack_rows_f8 from
 * wq.cuh's documentation.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_gemv_tc.cpp
 * Exit 0 when every check passes. */
#include "emul_extra.h"

#define MV_NAME tc_q4_store
#define MV_K 256
#define MV_N 40
#define MV_BIAS 1
#define MV_LDY 56
#define MV_WQ 4
#define MV_WG 32
#include "gemv_tc.cu"
#define MV_NAME tc_q4_norm_swiglu
#define MV_K 384
#define MV_N 64
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-5f
#define MV_WQ 4
#define MV_WG 128
#include "gemv_tc.cu"
#define MV_NAME tc_q4_acc_longk
#define MV_K 1024
#define MV_N 32
#define MV_EPI 1
#define MV_WQ 4
#define MV_WG 64
#include "gemv_tc.cu"
#define MV_NAME tc_q4_geglu
#define MV_K 128
#define MV_N 96
#define MV_EPI 3
#define MV_BIAS 1
#define MV_WQ 4
#define MV_WG 32
#include "gemv_tc.cu"
#define MV_NAME tc_q8_acc
#define MV_K 128
#define MV_N 48
#define MV_EPI 1
#define MV_WQ 8
#include "gemv_tc.cu"
#define MV_NAME tc_f8_acc
#define MV_K 128
#define MV_N 48
#define MV_EPI 1
#define MV_WQ 8
#define MV_WF8 1
#include "gemv_tc.cu"
#define MV_NAME tc_f8_norm_swiglu
#define MV_K 256
#define MV_N 64
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_EPS 1e-5f
#define MV_BIAS 1
#define MV_WQ 8
#define MV_WF8 1
#include "gemv_tc.cu"
#define MV_NAME tc_bf16_store
#define MV_K 96
#define MV_N 32
#define MV_BIAS 1
#include "gemv_tc.cu"

typedef void (*mvt_fn)(int, const void *, const float *, const void *, const float *, void *);

struct mvt_case {
    const char *name;
    mvt_fn fn;
    int K, N, epi, ldy, ybf16, norm, bias, wq, wg; /* wq 9: f8r rows (8-bit e4m3) */
};

static void run(const mvt_case &c, int T) {
    const bool sw = c.epi >= 2;
    const int NP = (c.N + 15) / 16 * 16, outs = sw ? c.N / 2 : c.N, ld = c.ldy ? c.ldy : outs;
    std::vector<float> wv((size_t)NP * c.K, 0.0f);
    for (int n = 0; n < c.N; n++)
        for (int k = 0; k < c.K; k++) wv[(size_t)n * c.K + k] = (0.5f + (n % 5) * 0.3f) * frand() + (k % 64 < 3 ? 0.7f : 0.0f);
    std::vector<unsigned char> wb;
    if (c.wq == 9) { /* e4m3 subnormal codes too: a few weights far below their row's largest */
        for (int n = 0; n < c.N; n++)
            for (int k = 5; k < c.K; k += 61) wv[(size_t)n * c.K + k] = (k & 1 ? 2e-5f : -3e-5f) * (1 + n % 3);
        wb = pack_rows_f8(wv, NP, c.K);
    } else if (c.wq) {
        wb = pack_rows(wv, NP, c.K, c.wq, c.wg);
    } else {
        wb.resize((size_t)NP * c.K * 2);
        for (size_t i = 0; i < wv.size(); i++) {
            const unsigned short h = ig_f32_to_bf16(wv[i]);
            memcpy(&wb[2 * i], &h, 2), wv[i] = ig_bf16_to_f32(h);
        }
    }
    if (c.wq == 4) /* the kernel's weight (wq.cuh ig_wq4_adj): scale q + min rounded to f16, then to the 16-bit type */
        for (auto &v : wv) v = bround(ig_f16_to_f32(ig_f32_to_f16(v)));
    /* x: f32 residual rows for the norm (normalized and rounded to 16 bits as the kernel stages them), else 16-bit rows */
    std::vector<float> xf((size_t)T * c.K), gamma(c.K), xr((size_t)T * c.K);
    std::vector<unsigned short> xh((size_t)T * c.K);
    for (auto &v : xf) v = 2.0f * frand();
    for (auto &v : gamma) v = 1.0f + 0.5f * frand();
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int k = 0; k < c.K; k++) ss += (double)xf[(size_t)t * c.K + k] * xf[(size_t)t * c.K + k];
        const float s = 1.0f / sqrtf((float)(ss / c.K) + 1e-5f);
        for (int k = 0; k < c.K; k++) {
            const size_t i = (size_t)t * c.K + k;
            xh[i] = ig_f32_to_bf16(xf[i]);
            xr[i] = c.norm ? bround(xf[i] * s * gamma[k]) : ig_bf16_to_f32(xh[i]);
        }
    }
    std::vector<float> bias(NP), y((size_t)T * ld), y0;
    std::vector<unsigned short> yh((size_t)T * ld, 0x7fc0);
    for (auto &v : bias) v = c.bias ? frand() : 0.0f;
    for (auto &v : y) v = frand();
    y0 = y;
    const void *xin = c.norm ? (const void *)xf.data() : (const void *)xh.data();
    void *yout = c.ybf16 ? (void *)yh.data() : (void *)y.data();
    const unsigned grid = IG_MVT_GRID_X(c.N, c.K, sw, 3); /* 3 CTAs: units strided over CTAs */
    CHECK(emul_launch({grid, 1, 1}, {IG_MVT_BLOCK, 1, 1},
                      [&] { c.fn(T, xin, c.norm ? gamma.data() : nullptr, wb.data(), c.bias ? bias.data() : nullptr, yout); }),
          "%s: deadlock", c.name);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        std::vector<double> ref(NP), mag(NP);
        for (int n = 0; n < NP; n++) {
            double s = 0, m = 0;
            for (int k = 0; k < c.K; k++) {
                const double p = (double)wv[(size_t)n * c.K + k] * xr[(size_t)t * c.K + k];
                s += p, m += fabs(p);
            }
            ref[n] = s + (c.bias ? bias[n] : 0.0), mag[n] = m + 1e-3;
        }
        for (int i = 0; i < outs; i++) {
            double want, lim;
            if (sw) { /* output i: gate at packed row 32 (i / 16) + i % 16, up 16 rows on */
                const int gr = 32 * (i / 16) + i % 16;
                want = ig_glu((float)ref[gr], (float)ref[gr + 16], c.epi == 3);
                lim = 2e-4 * (mag[gr] * (fabs(ref[gr + 16]) + 1) + mag[gr + 16] * (fabs(ref[gr]) + 1)) + fabs(want) * (c.ybf16 ? 8e-3 : 1e-6);
            } else {
                want = ref[i] + (c.epi == 1 ? y0[(size_t)t * ld + i] : 0.0), lim = 2e-4 * mag[i];
            }
            const double got = c.ybf16 ? ig_bf16_to_f32(yh[(size_t)t * ld + i]) : y[(size_t)t * ld + i];
            worst = std::max(worst, fabs(got - want) / lim);
            CHECK(fabs(got - want) <= lim, "%s T=%d: token %d output %d = %g, want %g (+- %g)", c.name, T, t, i, got, want, lim);
        }
        for (int i = outs; i < ld; i++) /* past N: untouched */
            CHECK(c.ybf16 ? yh[(size_t)t * ld + i] == 0x7fc0 : y[(size_t)t * ld + i] == y0[(size_t)t * ld + i],
                  "%s T=%d: token %d column %d written", c.name, T, t, i);
    }
    printf("%s T=%d: worst error %.3f of its bound\n", c.name, T, worst);
}

int main() {
    const mvt_case cases[] = {
        {"q4r g32 store+bias", tc_q4_store, 256, 40, 0, 56, 0, 0, 1, 4, 32},
        {"q4r g128 norm+swiglu", tc_q4_norm_swiglu, 384, 64, 2, 0, 1, 1, 0, 4, 128},
        {"q4r g64 residual, K 1024", tc_q4_acc_longk, 1024, 32, 1, 0, 0, 0, 0, 4, 64},
        {"q4r g32 geglu+bias", tc_q4_geglu, 128, 96, 3, 0, 0, 0, 1, 4, 32},
        {"q8r residual", tc_q8_acc, 128, 48, 1, 0, 0, 0, 0, 8, 32},
        {"f8r residual", tc_f8_acc, 128, 48, 1, 0, 0, 0, 0, 9, 32},
        {"f8r norm+swiglu+bias", tc_f8_norm_swiglu, 256, 64, 2, 0, 1, 1, 1, 9, 32},
        {"bf16 store+bias", tc_bf16_store, 96, 32, 0, 0, 0, 0, 1, 0, 0},
    };
    for (const auto &c : cases)
        for (int T : {2, 5, 8}) run(c, T);
    if (fails) printf("test_gemv_tc: %d failed checks\n", fails);
    else printf("test_gemv_tc: all passed\n");
    return fails ? 1 : 0;
}
