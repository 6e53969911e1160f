/* test_stream_moe.cpp — the persistent decode kernel's MoE phases (stream_moe.cuh) on the host,
 * through cuda_emul.h and emul_stream.h: one CTA of 8 consumer warps and the producer thread, two
 * MoE layers back to back in one launch (the second waits for its own selection: selb's parity),
 * each [route, gate/up of the selected experts + SwiGLU, down weighted per expert + residual add].
 * Each phase is checked on the inputs the kernel left it, against double precision:
 *   route   the router logits of the RMSNorm'd residual (f32, unrounded); the selection is the
 *           top-k of the softmax of the kernel's logits (ties to the lower index), the weights
 *           the softmax values (renormalized over the k or not)
 *   gate/up h[k][j] = silu(gate . x) * up . x of expert sel[k]'s rows (interleaved by 16), x the
 *           bf16-rounded normed residual
 *   down    resid[d] += sum_k wt_k (down[sel_k][d] . h_k) (+ ws (sdown[d] . h_s))
 * With a shared expert of IS rows: ws = sigmoid(x_f32 . gate), its gate/up rows after the routed
 * ones, its h after theirs.
 * Shapes (one CTA holds every down row: at most 256, 128 where they take two slots): hidden 128
 * (one window: warps past the row) with 40 experts (two registers a lane in the selection) and
 * top-3 of I 256; hidden 256, 8 experts, top-2 of 128, unnormalized; and hidden 128, top-5 of 1792
 * (down's rows of 8960 over two slots, expert segments straddling the slots); shared experts of 256
 * beside top-2 of 128, and of 1536 beside top-4 of 1792 (8704: over two slots). */
#define IG_ST_NSLOT 6
#include "emul_stream.h"
#include "stream_moe.cuh"

typedef unsigned short bf16;
static __attribute__((aligned(128))) unsigned char g_ring[IG_ST_NSLOT * IG_ST_SLOT];
static ig_st g_st;

static std::vector<bf16> rand_bf16(size_t n, float a) {
    std::vector<bf16> v(n);
    for (auto &x : v) x = ig_f32_to_bf16(a * frand());
    return v;
}
static double bf(bf16 v) { return ig_bf16_to_f32(v); }

template <int K, int E, int TOPK, int I, bool NORM, int IS = 0>
struct moe_case {
    static constexpr int L = 2, KD = TOPK * I + IS;
    std::vector<float> router[L], g[L], lg[L], resid[L + 1], sgate[L];
    std::vector<bf16> gu[L], dn[L], h[L], sgu[L], sdn[L];
    int sel[L][TOPK];
    float wt[L][TOPK + 1];

    void run(const char *name) {
        for (int l = 0; l < L; l++) {
            router[l].resize((size_t)E * K), g[l].resize(K), lg[l].assign(E, 0.0f);
            for (auto &x : router[l]) x = 0.2f * frand();
            for (auto &x : g[l]) x = 1.0f + 0.5f * frand();
            gu[l] = rand_bf16((size_t)E * 2 * I * K, 0.06f), dn[l] = rand_bf16((size_t)E * K * I, 0.06f);
            sgate[l].resize(K);
            for (auto &x : sgate[l]) x = 0.1f * frand();
            sgu[l] = rand_bf16((size_t)2 * IS * K + 8, 0.06f), sdn[l] = rand_bf16((size_t)K * IS + 8, 0.06f);
            h[l].assign(KD, 0);
        }
        resid[0].resize(K);
        for (auto &x : resid[0]) x = 2.0f * frand();
        const float eps = 1e-6f;
        std::vector<float> x = resid[0];
        unsigned long long bar = 0;
        const bool ok = emul_launch(dim3e{1, 1, 1}, dim3e{IG_ST_THREADS, 1, 1}, [&]() {
            ig_st *st = &g_st;
            ig_st_init(st, &bar, 1);
            unsigned it = 0, nsel = 0;
            if (threadIdx.x >= IG_ST_CTHREADS) {
                if (threadIdx.x == IG_ST_CTHREADS)
                    for (int l = 0; l < L; l++)
                        ig_st_produce_moe<K, TOPK, I, IS>(st, g_ring, gu[l].data(), dn[l].data(), sgu[l].data(), sdn[l].data(),
                                                          82 * l + 3, 82 * l + 44, &it, &nsel, g[l].data(), K * 4);
                return;
            }
            for (int l = 0; l < L; l++) {
                ig_st_route<K, E, TOPK, NORM>(st, x.data(), g[l].data(), eps, router[l].data(), lg[l].data(),
                                              IS ? sgate[l].data() : (const float *)0, &bar);
                if (threadIdx.x == 0)
                    for (int k = 0; k <= TOPK; k++) { /* wt[TOPK]: the shared expert's (IS > 0) */
                        if (k < TOPK) sel[l][k] = st->msel[k];
                        wt[l][k] = st->mwt[k];
                    }
                ig_st_gemv_tc<K, 2, true, false>(st, g_ring, TOPK * 2 * I + 2 * IS, KD, 82 * l + 3, x.data(), g[l].data(), eps, 0,
                                                 h[l].data(), &it, (unsigned long long *)0);
                if (threadIdx.x == 0) resid[l] = x; /* the down phase's input residual */
                ig_st_cbar();
                ig_st_gemv_tc<KD, 1, false, false, false, false, 0, 32, I, TOPK>(st, g_ring, K, K, 82 * l + 44, h[l].data(), 0,
                                                                                0.0f, 0, x.data(), &it, &bar, 0, 0, st->mwt);
            }
        });
        CHECK(ok, "%s: the emulated CTA deadlocked", name);
        if (!ok) return;
        resid[L] = x;
        double worst = 0.0;
        for (int l = 0; l < L; l++) worst = std::max(worst, check_layer(name, l, eps));
        printf("%-40s worst error %.2e of sum |w x|\n", name, worst);
    }

    double check_layer(const char *name, int l, float eps) {
        const std::vector<float> &x = resid[l];
        double worst = 0.0;
        /* route: logits of the f32 normed residual */
        double ss = 0.0;
        for (int k = 0; k < K; k++) ss += (double)x[k] * x[k];
        const double sc = 1.0 / sqrt(ss / K + eps);
        for (int e = 0; e < E; e++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                const double v = x[k] * sc * g[l][k] * router[l][(size_t)e * K + k];
                s += v, mag += fabs(v);
            }
            const double err = fabs(lg[l][e] - s) / (mag + 1e-12);
            worst = std::max(worst, err);
            CHECK(err <= 1e-5, "%s layer %d: logit %d %.7g, reference %.7g", name, l, e, lg[l][e], s);
        }
        /* the selection from the kernel's logits */
        double mx = -1e300, den = 0.0;
        for (int e = 0; e < E; e++) mx = std::max(mx, (double)lg[l][e]);
        std::vector<double> p(E);
        for (int e = 0; e < E; e++) den += p[e] = exp(lg[l][e] - mx);
        std::vector<int> taken(E, 0);
        double ksum = 0.0, w[TOPK];
        for (int k = 0; k < TOPK; k++) {
            int b = -1;
            for (int e = 0; e < E; e++)
                if (!taken[e] && (b < 0 || lg[l][e] > lg[l][b])) b = e;
            taken[b] = 1, w[k] = p[b] / den, ksum += w[k];
            CHECK(sel[l][k] == b, "%s layer %d: selection %d is expert %d, want %d", name, l, k, sel[l][k], b);
        }
        for (int k = 0; k < TOPK; k++) {
            const double want = NORM ? w[k] / ksum : w[k];
            CHECK(fabs(wt[l][k] - want) <= 1e-5 * want, "%s layer %d: weight %d %.7g, want %.7g", name, l, k, wt[l][k], want);
        }
        if (IS) { /* the shared expert's weight: sigmoid of the f32 normed residual . gate */
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) s += x[k] * sc * g[l][k] * sgate[l][k], mag += fabs(x[k] * sc * g[l][k] * sgate[l][k]);
            const double want = 1.0 / (1.0 + exp(-s));
            CHECK(fabs(wt[l][TOPK] - want) <= 1e-5 * mag + 1e-6, "%s layer %d: shared weight %.7g, want %.7g", name, l,
                  wt[l][TOPK], want);
        }
        /* gate/up of the selected experts (and the shared one) on the bf16-rounded normed residual */
        std::vector<double> xn(K);
        for (int k = 0; k < K; k++) xn[k] = bround((float)(x[k] * sc * g[l][k]));
        for (int k = 0; k < TOPK + (IS > 0); k++)
            for (int j = 0; j < (k < TOPK ? I : IS); j++) {
                const int gr = 32 * (j / 16) + j % 16;
                const bf16 *rg = k < TOPK ? gu[l].data() + ((size_t)sel[l][k] * 2 * I + gr) * K : sgu[l].data() + (size_t)gr * K;
                const bf16 *ru = rg + (size_t)16 * K;
                double ga = 0.0, u = 0.0, mg = 0.0, mu = 0.0;
                for (int c = 0; c < K; c++) ga += bf(rg[c]) * xn[c], u += bf(ru[c]) * xn[c], mg += fabs(bf(rg[c]) * xn[c]), mu += fabs(bf(ru[c]) * xn[c]);
                const double want = ga / (1.0 + exp(-ga)) * u, got = bf(h[l][k * I + j]);
                const double bound = fabs(want) * 8e-3 + (mg * fabs(u) + mu * fabs(ga)) * 1e-3 + 1e-9;
                worst = std::max(worst, fabs(got - want) / bound * 1e-3);
                CHECK(fabs(got - want) <= bound, "%s layer %d: h[%d][%d] %.6g, reference %.6g", name, l, k, j, got, want);
            }
        /* down: the weighted sum over the selected experts, added to the residual */
        for (int d = 0; d < K; d++) {
            double s = 0.0, mag = fabs(x[d]);
            for (int k = 0; k < TOPK + (IS > 0); k++) {
                const bf16 *row = k < TOPK ? dn[l].data() + ((size_t)sel[l][k] * K + d) * I : sdn[l].data() + (size_t)d * IS;
                double dk = 0.0;
                for (int i = 0; i < (k < TOPK ? I : IS); i++) {
                    const double v = bf(row[i]) * bf(h[l][k * I + i]);
                    dk += v, mag += fabs(v) * wt[l][k];
                }
                s += wt[l][k] * dk;
            }
            const double want = x[d] + s, got = resid[l + 1][d], err = fabs(got - want) / (mag + 1e-12);
            worst = std::max(worst, err);
            CHECK(err <= 1e-3, "%s layer %d: residual row %d %.7g, reference %.7g", name, l, d, got, want);
        }
        return worst;
    }
};

int main() {
    static moe_case<128, 40, 3, 256, true> a;
    a.run("H 128, 40 experts, top-3 of I 256");
    static moe_case<256, 8, 2, 128, false> b;
    b.run("H 256, 8 experts, top-2 of I 128, unnormalized");
    static moe_case<128, 8, 5, 1792, true> c;
    c.run("H 128, 8 experts, top-5 of I 1792 (split rows)");
    static moe_case<256, 8, 2, 128, false, 256> d;
    d.run("H 256, top-2 of I 128 + shared 256");
    static moe_case<128, 16, 4, 1792, true, 1536> e;
    e.run("H 128, top-4 of 1792 + shared 1536 (split)");
    if (fails) printf("%d check(s) failed\n", fails);
    else printf("all stream MoE checks passed\n");
    return fails ? 1 : 0;
}
