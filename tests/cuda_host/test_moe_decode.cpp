/* test_moe_decode.cpp — moe.cu's two-launch decode kernels (_dgu: router, top-k, gate/up with
 * SwiGLU; _ddown: the selected experts' down rows, weighted, into the residual) run on the host
 * through cuda_emul.h, without a GPU, against a reference in double computed here from the
 * documented math (templates/cuda/moe.cu's header; softmax over all experts, top-k with ties to the
 * lower index, renormalized or not, SwiGLU, gate/up rows interleaved by 16). The emulation runs one
 * CTA at a time, so _dgu runs on a grid of one CTA (it is the last to arrive and releases itself;
 * the counters must come back as 0 and 1 per launch) and _ddown and the shared form's _dgu also on
 * grids of 3 (items strided over CTAs). The GPU harness (tests/gpu/test_cuda_kernels.cu, "decode2")
 * runs the same kernels over all SMs.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_moe_decode.cpp
 * Exit 0 when every check passes. */
#include "emul_extra.h"

/* routed, bf16, unnormalized, more experts than lanes (two a lane), top-6 */
#define MO_NAME md_a
#define MO_D 64
#define MO_E 40
#define MO_TOPK 6
#define MO_I 32
#define MO_NORM 0
#include "moe.cu"
/* routed, f32, renormalized, top-2 of 8, D over several chunks a lane */
#define MO_NAME md_b
#define MO_D 320
#define MO_E 8
#define MO_TOPK 2
#define MO_I 48
#define MO_NORM 1
#define MO_WBF16 0
#define MO_XBF16 0
#include "moe.cu"
/* the gated shared expert, bf16 */
#define MO_NAME md_s
#define MO_D 128
#define MO_E 1
#define MO_TOPK 1
#define MO_I 80
#define MO_SHARED 1
#include "moe.cu"

/* long rows: gate/up in two batches of chunks a lane (the second partial), down's experts in two
 * batches (5 + 3) */
#define MO_NAME md_c
#define MO_D 2304
#define MO_E 10
#define MO_TOPK 8
#define MO_I 528
#define MO_NORM 1
#include "moe.cu"

/* quantized experts (wq.cuh's q8r / q4r rows): routed, bf16, q8r gate/up and down, top-10 of 12
 * (down's experts in two batches, 8 + 2) */
#define MO_NAME md_q8
#define MO_D 128
#define MO_E 12
#define MO_TOPK 10
#define MO_I 64
#define MO_NORM 1
#define MO_WQ 8
#define MO_DN_WQ 8
#include "moe.cu"
/* q4r gate/up in groups of 32 and down in groups of 64, top-5 of 6 */
#define MO_NAME md_q4
#define MO_D 256
#define MO_E 6
#define MO_TOPK 5
#define MO_I 128
#define MO_NORM 0
#define MO_WQ 4
#define MO_WG 32
#define MO_DN_WQ 4
#define MO_DN_WG 64
#include "moe.cu"
/* the shared expert: q4r gate/up (groups of 64), bf16 down (--quant-skip experts.down) */
#define MO_NAME md_qs
#define MO_D 128
#define MO_E 1
#define MO_TOPK 1
#define MO_I 96
#define MO_SHARED 1
#define MO_WQ 4
#define MO_WG 64
#include "moe.cu"
/* f32 rows and activations: bf16-free q8r gate/up, q4r down (groups of 32) */
#define MO_NAME md_qf
#define MO_D 320
#define MO_E 8
#define MO_TOPK 2
#define MO_I 64
#define MO_NORM 1
#define MO_WBF16 0
#define MO_XBF16 0
#define MO_WQ 8
#define MO_DN_WQ 4
#define MO_DN_WG 32
#include "moe.cu"




/* One case: T tokens of random rows through _dgu (twice: the second finds the first's counters)
 * then _ddown, against the double reference. bf: 16-bit weights and rows. */
template <typename WT, typename AT, typename DGU, typename DDN>
static void run_case(const char *name, DGU dgu, DDN ddn, int D, int E, int K, int I, int norm, int bf, int shared, int T,
                     int gdn, int fold = 0, int wqg = 0, int gg = 32, int wqd = 0, int gd = 32) {
    const size_t wes = bf ? 2 : 4, ngu = (size_t)E * 2 * I * D, ndn = (size_t)E * D * I;
    std::vector<float> x((size_t)T * D), rt((size_t)E * D), gu(ngu), dn(ndn), r0((size_t)T * D);
    for (auto &v : x) v = 2.0f * frand();
    /* fold: x is the residual and _dgu applies the RMSNorm (gamma, eps) itself */
    std::vector<float> gm(D);
    for (auto &v : gm) v = 1.0f + 0.5f * frand();
    const float eps = 1e-6f, *dgm = fold ? gm.data() : nullptr;
    std::vector<double> xn((size_t)T * D);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)t * D + i] * x[(size_t)t * D + i];
        const double r = 1 / sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) xn[(size_t)t * D + i] = fold ? x[(size_t)t * D + i] * r * gm[i] : x[(size_t)t * D + i];
    }
    for (auto &v : rt) v = 0.5f * frand();
    for (auto &v : gu) v = bf ? bround(0.3f * frand()) : 0.3f * frand();
    for (auto &v : dn) v = bf ? bround(0.3f * frand()) : 0.3f * frand();
    for (auto &v : r0) v = frand();
    std::vector<unsigned char> wgu(ngu * wes), wdn(ndn * wes);
    for (size_t i = 0; i < ngu; i++) {
        if (bf) { const unsigned short h = ig_f32_to_bf16(gu[i]); memcpy(&wgu[i * 2], &h, 2); }
        else memcpy(&wgu[i * 4], &gu[i], 4);
    }
    for (size_t i = 0; i < ndn; i++) {
        if (bf) { const unsigned short h = ig_f32_to_bf16(dn[i]); memcpy(&wdn[i * 2], &h, 2); }
        else memcpy(&wdn[i * 4], &dn[i], 4);
    }
    if (wqg) wgu = pack_rows(gu, (size_t)E * 2 * I, D, wqg, gg); /* the reference takes the rows' values */
    if (wqd) wdn = pack_rows(dn, (size_t)E * D, I, wqd, gd);
    std::vector<float> lg((size_t)T * E), wt((size_t)T * K), out = r0;
    std::vector<int> sel((size_t)T * K, -7);
    std::vector<uint4> h(((size_t)T * K * I * wes + 15) / 16);
    unsigned sync[2] = {0, 0};
    for (int rep = 0; rep < 2; rep++)
        CHECK(emul_launch({shared ? 3u : 1u, 1, 1}, {IG_MO_DBLOCK, 1, 1},
                          [&] { dgu(T, x.data(), dgm, eps, rt.data(), lg.data(), sel.data(), wt.data(), (const WT *)wgu.data(),
                                    (AT *)h.data(), sync); }),
              "%s: _dgu deadlocked", name);
    if (!shared) CHECK(sync[0] == 0 && sync[1] == 2, "%s: counters %u %u after two launches (want 0 2)", name, sync[0], sync[1]);
    CHECK(emul_launch({(unsigned)gdn, 1, 1}, {IG_MO_DBLOCK, 1, 1},
                      [&] { ddn(T, (const AT *)h.data(), sel.data(), wt.data(), (const WT *)wdn.data(), out.data()); }),
          "%s: _ddown deadlocked", name);
    double maxd = 0, maxerr = 0;
    int ties = 0;
    for (int t = 0; t < T; t++) {
        std::vector<double> l(E), p(E);
        double mx = -1e300, z = 0;
        for (int e = 0; e < E; e++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += xn[(size_t)t * D + i] * rt[(size_t)e * D + i];
            l[e] = s, mx = std::max(mx, s);
        }
        for (int e = 0; e < E; e++) z += (p[e] = exp(l[e] - mx));
        std::vector<int> ord(E);
        for (int e = 0; e < E; e++) ord[e] = e;
        std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return l[a] > l[b]; });
        const bool tie = !shared && K < E && l[ord[K - 1]] - l[ord[K]] < 1e-4;
        ties += tie;
        double ksum = 0;
        for (int k = 0; k < K; k++) ksum += p[ord[k]] / z;
        std::vector<double> acc(D, 0.0);
        for (int k = 0; k < K; k++) {
            const int e = shared ? 0 : ord[k], ge = sel[(size_t)t * K + k];
            if (!tie) CHECK(ge == e, "%s T=%d: token %d choice %d is expert %d, want %d", name, T, t, k, ge, e);
            if (ge != e) continue;
            const double w = shared ? 1 / (1 + exp(-l[0])) : norm ? p[e] / z / ksum : p[e] / z;
            CHECK(fabs(wt[(size_t)t * K + k] - w) <= 1e-5 * fabs(w) + 1e-7, "%s T=%d: token %d weight %d is %g, want %g", name,
                  T, t, k, wt[(size_t)t * K + k], w);
            std::vector<double> hv(I);
            for (int i = 0; i < I; i++) {
                const int g = 32 * (i / 16) + i % 16;
                double sg = 0, su = 0;
                for (int j = 0; j < D; j++) {
                    const double xv = bf ? bround((float)xn[(size_t)t * D + j]) : xn[(size_t)t * D + j];
                    sg += xv * gu[((size_t)e * 2 * I + g) * D + j], su += xv * gu[((size_t)e * 2 * I + g + 16) * D + j];
                }
                hv[i] = sg / (1 + exp(-sg)) * su;
                if (bf) hv[i] = bround((float)hv[i]);
            }
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int i = 0; i < I; i++) s += dn[((size_t)e * D + d) * I + i] * hv[i];
                acc[d] += w * s;
            }
        }
        for (int d = 0; d < D; d++) {
            maxd = std::max(maxd, fabs(acc[d]));
            maxerr = std::max(maxerr, fabs(out[(size_t)t * D + d] - r0[(size_t)t * D + d] - acc[d]));
        }
    }
    /* bf16: h's rounding on both sides may round differently near a half step (1/256 of |h|) */
    const double tol = (bf ? 1e-2 : 1e-5) * maxd + 1e-6;
    CHECK(maxerr <= tol, "%s T=%d: max |out - ref| %g > %g (max |ref| %g)", name, T, maxerr, tol, maxd);
    printf("%s %s T=%d: max err %.3g of max |delta| %.3g%s\n", maxerr <= tol ? "ok  " : "FAIL", name, T, maxerr, maxd,
           ties ? " (near ties: choice not compared)" : "");
}

int main() {
    for (int T : {1, 8}) {
        run_case<unsigned short, unsigned short>("E40 top-6 D64 I32 bf16 (unnormalized)", md_a_dgu, md_a_ddown, 64, 40, 6, 32, 0, 1, 0, T, 3);
        run_case<float, float>("E8 top-2 D320 I48 f32 (renormalized)", md_b_dgu, md_b_ddown, 320, 8, 2, 48, 1, 0, 0, T, 1);
        run_case<unsigned short, unsigned short>("shared expert D128 I80 bf16", md_s_dgu, md_s_ddown, 128, 1, 1, 80, 0, 1, 1, T, 3);
    }
    for (int T : {1, 8}) { /* the RMSNorm folded in */
        run_case<unsigned short, unsigned short>("E40 top-6 D64 I32 bf16 + rms_norm", md_a_dgu, md_a_ddown, 64, 40, 6, 32, 0, 1,
                                                 0, T, 3, 1);
        run_case<float, float>("E8 top-2 D320 I48 f32 + rms_norm", md_b_dgu, md_b_ddown, 320, 8, 2, 48, 1, 0, 0, T, 1, 1);
        run_case<unsigned short, unsigned short>("shared expert D128 I80 bf16 + rms_norm", md_s_dgu, md_s_ddown, 128, 1, 1, 80,
                                                 0, 1, 1, T, 3, 1);
    }
    for (int T : {2})
        run_case<unsigned short, unsigned short>("E10 top-8 D2304 I528 bf16 (renormalized)", md_c_dgu, md_c_ddown, 2304, 10, 8,
                                                 528, 1, 1, 0, T, 3);
    for (int T : {1, 3, 8}) { /* quantized experts */
        run_case<unsigned char, unsigned short>("E12 top-10 D128 I64 q8r / q8r", md_q8_dgu, md_q8_ddown, 128, 12, 10, 64, 1, 1, 0, T, 3,
                                                T == 3, 8, 32, 8, 32);
        run_case<unsigned char, unsigned short>("E6 top-5 D256 I128 q4r g32 / q4r g64", md_q4_dgu, md_q4_ddown, 256, 6, 5, 128, 0,
                                                1, 0, T, 2, T == 8, 4, 32, 4, 64);
        run_case<unsigned char, float>("E8 top-2 D320 I64 f32 q8r / q4r g32", md_qf_dgu, md_qf_ddown, 320, 8, 2, 64, 1, 0, 0, T,
                                       3, 0, 8, 32, 4, 32);
    }
    for (int T : {1, 8}) /* the shared expert, q4r gate/up and 16-bit down (its _ddown takes 16-bit rows) */
        run_case<unsigned char, unsigned short>("shared expert D128 I96 q4r g64 / bf16", md_qs_dgu,
                                                (void (*)(int, const unsigned short *, const int *, const float *,
                                                          const unsigned char *, float *))md_qs_ddown,
                                                128, 1, 1, 96, 0, 1, 1, T, 3, 0, 4, 64, 0, 32);
    if (fails) {
        printf("test_moe_decode: %d failures\n", fails);
        return 1;
    }
    printf("test_moe_decode: all passed\n");
    return 0;
}
