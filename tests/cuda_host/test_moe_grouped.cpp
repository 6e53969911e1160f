/* test_moe_grouped.cpp — moe.cu's expert-grouped products on tensor cores (the prefill path of
 * 16-bit packages: _group, _xround, _gu_tc, _down_tc, _sum) run on the host through cuda_emul.h's
 * ldmatrix / mma.sync / cp.async stand-ins, without a GPU, against a reference in double computed
 * here from the documented math (moe.cu's header: gate/up rows interleaved by 16, SwiGLU, h rounded
 * to the 16-bit type, the pair's weight times its expert's down rows, summed into the residual).
 * The selections are given (not routed), so that the shapes reach every edge of the tiles: an
 * expert chosen by every token (two row tiles, the second partial, warps whose rows are all past
 * the tile's pairs), experts without pairs, gate/up and down outputs that end inside a column tile
 * (whole warps past the end), K of one, two and many stages. The warpgroup form (_xgather, _gu_wg,
 * _down_wg: a producer warpgroup's TMA boxes through emulated tensor maps, mbarrier stages refilled
 * up to three times, h in _group's order) runs the same cases; partial row tiles there multiply the
 * next expert's rows, which must not be stored. The GPU harness
 * (tests/gpu/test_cuda_kernels.cu, grouped 2) runs the same kernels after the router.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_moe_grouped.cpp
 * Exit 0 when every check passes. */
#include "emul_extra.h"

/* gate/up 2 I = 192 rows (the second column tile of 128 half past the end), down 256 rows (two
 * whole tiles); K 256 (8 k steps) and 96 (3) */
#define MO_NAME mg_a
#define MO_D 256
#define MO_E 5
#define MO_TOPK 2
#define MO_I 96
#define MO_NORM 1
#include "moe.cu"
/* gate/up 64 rows (one warp column past the end), down 320 rows (a third, partial column tile);
 * K 320 (10 k steps) and 32 (one: fewer than the stages) */
#define MO_NAME mg_b
#define MO_D 320
#define MO_E 6
#define MO_TOPK 3
#define MO_I 32
#define MO_NORM 0
#include "moe.cu"
/* gate/up 2 I = 512 rows (four column tiles), down K 256; K of gate/up 64 (two k steps) */
#define MO_NAME mg_c
#define MO_D 64
#define MO_E 3
#define MO_TOPK 1
#define MO_I 256
#define MO_NORM 1
#include "moe.cu"

/* gate/up K 640: ten steps of 64 through the warpgroup products' four stages (every stage refilled
 * twice) */
#define MO_NAME mg_d
#define MO_D 640
#define MO_E 4
#define MO_TOPK 2
#define MO_I 64
#define MO_NORM 1
#include "moe.cu"

static std::vector<unsigned short> to_bf16(const std::vector<float> &v) {
    std::vector<unsigned short> o(v.size());
    for (size_t i = 0; i < v.size(); i++) o[i] = ig_f32_to_bf16(v[i]);
    return o;
}


struct grouped_fns {
    void (*group)(int, const int *, int *, int *);
    void (*xround)(int, const float *, unsigned short *);
    void (*gu)(int, const unsigned short *, const int *, const int *, const unsigned short *, unsigned short *);
    void (*down)(int, const unsigned short *, const int *, const int *, const float *, const unsigned short *, float *);
    void (*sum)(int, const float *, float *);
    /* the warpgroup products (wgmma.cuh's and mbar.cuh's stand-ins: TMA boxes through tensor maps of
     * the pairs' rows in _group's order); null: the mma.sync ones above */
    void (*xgather)(int, const float *, const int *, unsigned short *);
    void (*gu_wg)(int, const int *, unsigned short *, ig_tmap, ig_tmap);
    void (*down_wg)(int, const int *, const int *, const float *, float *, ig_tmap, ig_tmap);
};
#define GROUPED(P) grouped_fns{P##_group, P##_xround, P##_gu_tc, P##_down_tc, P##_sum, nullptr, nullptr, nullptr}
#define GROUPED_WG(P) grouped_fns{P##_group, P##_xround, nullptr, nullptr, P##_sum, P##_xgather, P##_gu_wg, P##_down_wg}

/* T tokens; token t's k-th expert: `hot` (when >= 0) for k = 0 on every token, else random among the
 * first `used` experts without repeats (so experts past `used` have no pairs). */
static void run_case(const char *name, const grouped_fns &f, int D, int E, int K, int I, int T, int hot, int used) {
    std::vector<float> x((size_t)T * D), gu((size_t)E * 2 * I * D), dn((size_t)E * D * I), r0((size_t)T * D), wt((size_t)T * K);
    for (auto &v : x) v = 2.0f * frand();
    for (auto &v : gu) v = bround(0.3f * frand());
    for (auto &v : dn) v = bround(0.3f * frand());
    for (auto &v : r0) v = frand();
    for (auto &v : wt) v = 0.5f + 0.5f * frand();
    std::vector<int> sel((size_t)T * K);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            int e;
            do {
                e = k == 0 && hot >= 0 ? hot : (int)((frand() + 1.0f) * 0.5f * (float)used) % used;
            } while (std::find(&sel[(size_t)t * K], &sel[(size_t)t * K + k], e) != &sel[(size_t)t * K + k]);
            sel[(size_t)t * K + k] = e;
        }
    const std::vector<unsigned short> wgu = to_bf16(gu), wdn = to_bf16(dn);
    std::vector<int> off(2 * (E + 1), -1), list((size_t)T * K, -1);
    std::vector<unsigned short> xb((size_t)T * D), h((size_t)T * K * I, 0xffff);
    std::vector<float> y((size_t)T * K * D, NAN), out = r0;
    const unsigned tiles = (unsigned)IG_MO_TC_GRID_Y(T, K, E);
    CHECK(emul_launch({1, 1, 1}, {1024, 1, 1}, [&] { f.group(T, sel.data(), off.data(), list.data()); }), "%s: _group", name);
    CHECK(emul_launch({(unsigned)IG_MO_SUM_GRID_X(D), (unsigned)T, 1}, {IG_MO_BLOCK, 1, 1},
                      [&] { f.xround(T, x.data(), xb.data()); }), "%s: _xround", name);
    std::vector<unsigned short> xg((size_t)T * K * D, 0xffff); /* NaN: rows must come from x */
    if (f.gu_wg) { /* A operands by TMA: rows in _group's order; h written in that order too */
        CHECK(emul_launch({(unsigned)IG_MO_XG_GRID(T, K, D), 1, 1}, {IG_MO_BLOCK, 1, 1},
                          [&] { f.xgather(T, x.data(), list.data(), xg.data()); }), "%s: _xgather", name);
        const ig_tmap xm = emul_tmap2(xg.data(), D, (unsigned long long)T * K, 2ull * D, 64, IG_MO_TC_BM),
                      gm = emul_tmap2(wgu.data(), D, (unsigned long long)E * 2 * I, 2ull * D, 64, IG_MO_WG_BN),
                      hm = emul_tmap2(h.data(), I, (unsigned long long)T * K, 2ull * I, 64, IG_MO_TC_BM),
                      dm = emul_tmap2(wdn.data(), I, (unsigned long long)E * D, 2ull * I, 64, IG_MO_WG_BN);
        CHECK(emul_launch({(unsigned)IG_MO_WG_GU_GRID_X(I), tiles, 1}, {IG_MO_WG_THREADS, 1, 1},
                          [&] { f.gu_wg(T, off.data(), h.data(), xm, gm); }), "%s: gate/up", name);
        CHECK(emul_launch({(unsigned)IG_MO_WG_DN_GRID_X(D), tiles, 1}, {IG_MO_WG_THREADS, 1, 1},
                          [&] { f.down_wg(T, off.data(), list.data(), wt.data(), y.data(), hm, dm); }), "%s: down", name);
    } else {
        CHECK(emul_launch({(unsigned)IG_MO_TC_GU_GRID_X(I), tiles, 1}, {IG_MO_TC_THREADS, 1, 1},
                          [&] { f.gu(T, xb.data(), off.data(), list.data(), wgu.data(), h.data()); }), "%s: gate/up", name);
        CHECK(emul_launch({(unsigned)IG_MO_TC_DN_GRID_X(D), tiles, 1}, {IG_MO_TC_THREADS, 1, 1},
                          [&] { f.down(T, h.data(), off.data(), list.data(), wt.data(), wdn.data(), y.data()); }), "%s: down", name);
    }
    std::vector<int> hrow((size_t)T * K); /* the row of h holding pair tk */
    for (int p = 0; p < T * K; p++) hrow[(size_t)(f.gu_wg ? list[p] : p)] = p;
    CHECK(emul_launch({(unsigned)IG_MO_SUM_GRID_X(D), (unsigned)T, 1}, {IG_MO_BLOCK, 1, 1},
                      [&] { f.sum(T, y.data(), out.data()); }), "%s: _sum", name);
    double maxd = 0, maxerr = 0, maxh = 0, herr = 0;
    for (int t = 0; t < T; t++) {
        std::vector<double> acc(D, 0.0);
        for (int k = 0; k < K; k++) {
            const int e = sel[(size_t)t * K + k], tk = t * K + k;
            std::vector<double> hv(I);
            for (int i = 0; i < I; i++) {
                const int g = 32 * (i / 16) + i % 16; /* packed row of gate i; its up row is 16 further */
                double sg = 0, su = 0;
                for (int j = 0; j < D; j++) {
                    const double xv = bround(x[(size_t)t * D + j]);
                    sg += xv * gu[((size_t)e * 2 * I + g) * D + j], su += xv * gu[((size_t)e * 2 * I + g + 16) * D + j];
                }
                const double hd = sg / (1 + exp(-sg)) * su, hk = ig_bf16_to_f32(h[(size_t)hrow[tk] * I + i]);
                maxh = std::max(maxh, fabs(hd)), herr = std::max(herr, fabs(hk - hd));
                hv[i] = bround((float)hd);
            }
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int i = 0; i < I; i++) s += dn[((size_t)e * D + d) * I + i] * hv[i];
                acc[d] += wt[(size_t)tk] * s;
            }
        }
        for (int d = 0; d < D; d++) {
            maxd = std::max(maxd, fabs(acc[d]));
            const double err = fabs(out[(size_t)t * D + d] - r0[(size_t)t * D + d] - acc[d]);
            maxerr = std::max(maxerr, std::isnan(err) ? INFINITY : err);
        }
    }
    /* h: f32 sums of 16-bit products, rounded once (half a bf16 step: 2^-8 relative); the output:
     * h's rounding on both sides may differ near a half step */
    const double htol = 6e-3 * maxh, tol = 1e-2 * maxd + 1e-6;
    CHECK(herr <= htol, "%s T=%d: max |h - ref| %g > %g", name, T, herr, htol);
    CHECK(maxerr <= tol, "%s T=%d: max |out - ref| %g > %g (max |ref| %g)", name, T, maxerr, tol, maxd);
    printf("%s %s T=%d: h max err %.3g of %.3g; out max err %.3g of max |delta| %.3g\n",
           herr <= htol && maxerr <= tol ? "ok  " : "FAIL", name, T, herr, maxh, maxerr, maxd);
}

int main() {
    /* expert 1 takes every token's first choice: 150 pairs, two row tiles (128 + 22) */
    run_case("E5 top-2 D256 I96, a hot expert", GROUPED(mg_a), 256, 5, 2, 96, 150, 1, 4);
    run_case("E5 top-2 D256 I96, few tokens", GROUPED(mg_a), 256, 5, 2, 96, 9, -1, 5);
    /* experts 4 and 5 without pairs */
    run_case("E6 top-3 D320 I32, two idle experts", GROUPED(mg_b), 320, 6, 3, 32, 70, -1, 4);
    run_case("E3 top-1 D64 I256", GROUPED(mg_c), 64, 3, 1, 256, 40, -1, 3);
    /* the same on the warpgroup products: K 256 / 96 (four steps of 64; two, the second half
     * zeros), a second row tile whose second warpgroup has no pairs, gate/up 192 of 256 rows */
    run_case("wgmma: E5 top-2 D256 I96, a hot expert", GROUPED_WG(mg_a), 256, 5, 2, 96, 150, 1, 4);
    run_case("wgmma: E5 top-2 D256 I96, few tokens", GROUPED_WG(mg_a), 256, 5, 2, 96, 9, -1, 5);
    /* the hot expert's 100 pairs: one tile whose second warpgroup has 36 */
    run_case("wgmma: E5 top-2 D256 I96, a hot expert of 100", GROUPED_WG(mg_a), 256, 5, 2, 96, 100, 1, 4);
    /* K 320 (five steps) / 32 (one step, fewer than the stages), down 320 rows (a second, partial tile) */
    run_case("wgmma: E6 top-3 D320 I32, two idle experts", GROUPED_WG(mg_b), 320, 6, 3, 32, 70, -1, 4);
    /* gate/up 512 rows (two column tiles), K 64 (one step) */
    run_case("wgmma: E3 top-1 D64 I256", GROUPED_WG(mg_c), 64, 3, 1, 256, 40, -1, 3);
    run_case("wgmma: E4 top-2 D640 I64", GROUPED_WG(mg_d), 640, 4, 2, 64, 50, -1, 4);
    if (fails) {
        printf("test_moe_grouped: %d failures\n", fails);
        return 1;
    }
    printf("test_moe_grouped: all passed\n");
    return 0;
}
