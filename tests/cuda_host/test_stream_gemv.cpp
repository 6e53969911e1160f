/* test_stream_gemv.cpp — the persistent decode kernel's GEMV phases (stream.cuh) on the host, through
 * cuda_emul.h and emul_stream.h: one CTA of 8 consumer warps and the producer thread streaming five
 * phases of a layer-like sequence through the ring, in every weight format the kernel streams
 * (bf16 rows, q8r on int8 tensor cores, q4r with groups of 32 and 128), against double-precision
 * dot products of the same decoded weights and the same bf16-rounded activations:
 *   1 RMSNorm + matmul, bias, stored (qkv; the first phase of a launch: no grid barrier; once with
 *     the embedding row as input, which the CTA also stores as the f32 residual)
 *   2 matmul of bf16 x + residual add (o)
 *   3 RMSNorm + gate/up interleaved by 16 + SwiGLU, bf16 out (more slots than one batch of sums)
 *   4 matmul of the bf16 SwiGLU output + residual add (down; K 1024: q4r g128 segments of 128)
 *   5 RMSNorm + matmul with the CTA's greedy key (lm_head)
 * Hidden sizes 384 and 1152 (q8r windows of 256 columns end inside the row; the staged x of an
 * RMSNorm phase has threads past K) and 8448 (x staged in two pieces; bf16 rows over two slots),
 * row counts that leave partial slots. Each phase reads the
 * previous phases' outputs as the kernel left them, so a failure points at its phase. */
#define IG_ST_NSLOT 6
#define IG_ST_SLOT (16384 + 256)
#include "emul_stream.h"
#include "stream.cuh"

typedef unsigned short bf16;
static __attribute__((aligned(128))) unsigned char g_ring[IG_ST_NSLOT * IG_ST_SLOT];
static ig_st g_st;

/* a matrix of n rows of K weights in format WQ (0 bf16, 8 q8r, 4 q4r with groups of G): the packed
 * rows and the decoded weights */
struct mat {
    int n, K, rb;
    std::vector<unsigned char> rows;
    std::vector<double> w;
};
static mat make_mat(int n, int K, int WQ, int G) {
    mat m{n, K, WQ ? IG_WQ_ROWB(K, WQ == 9 ? 8 : WQ, G) : 2 * K, {}, {}};
    m.rows.assign((size_t)n * m.rb, 0);
    m.w.assign((size_t)n * K, 0.0);
    for (int r = 0; r < n; r++) {
        unsigned char *row = m.rows.data() + (size_t)r * m.rb;
        double *w = m.w.data() + (size_t)r * K;
        if (WQ == 0) {
            for (int k = 0; k < K; k++) {
                const bf16 b = ig_f32_to_bf16(0.05f * frand());
                memcpy(row + 2 * k, &b, 2), w[k] = ig_bf16_to_f32(b);
            }
        } else if (WQ == 9) { /* f8r: random e4m3 codes (not NaN; subnormal ones too), a row scale */
            const float s = 0.0001f * (1.5f + frand());
            for (int k = 0; k < K; k++) {
                unsigned char c = (unsigned char)((frand() + 1.0f) * 128.0f);
                if ((c & 0x7f) == 0x7f) c ^= 1;
                if (k % 29 == 3) c &= 0x87; /* a subnormal code */
                row[k] = c, w[k] = (double)s * cpukv::ig_e4m3_to_f32(c);
            }
            memcpy(row + K, &s, 4);
        } else if (WQ == 8) {
            const float s = 0.0004f * (1.5f + frand());
            for (int k = 0; k < K; k++) {
                const int q = (int)lrintf(127.0f * frand());
                row[k] = (unsigned char)(signed char)q, w[k] = (double)s * q;
            }
            memcpy(row + K, &s, 4);
        } else {
            for (int g = 0; g < K / G; g++) {
                const unsigned short sh = ig_f32_to_f16(0.006f * (1.2f + frand())), mh = ig_f32_to_f16(0.04f * frand() - 0.045f);
                const unsigned sm = (unsigned)sh | (unsigned)mh << 16;
                memcpy(row + K / 2 + 4 * g, &sm, 4);
                const double s = ig_f16_to_f32(sh), mn = ig_f16_to_f32(mh);
                for (int k = g * G; k < (g + 1) * G; k++) {
                    const unsigned q = (unsigned)(frand() * 8.0f + 8.0f) & 15u;
                    row[k / 2] |= (unsigned char)(q << (4 * (k & 1)));
                    w[k] = s * q + mn;
                }
            }
        }
    }
    return m;
}

/* bf16-rounded RMSNorm of x as the kernel computes it (f32 sum of squares, f32 products) */
static std::vector<double> ref_norm(const float *x, const float *gm, int K, float eps) {
    float ss = 0.0f;
    for (int k = 0; k < K; k++) ss += x[k] * x[k];
    const float sc = 1.0f / sqrtf(ss / (float)K + eps);
    std::vector<double> v(K);
    for (int k = 0; k < K; k++) v[k] = bround(x[k] * sc * gm[k]);
    return v;
}
/* row r of m . x, and sum |w x| for the bound */
static double dot(const mat &m, int r, const std::vector<double> &x, double *mag) {
    double s = 0.0, a = 0.0;
    for (int k = 0; k < m.K; k++) s += m.w[(size_t)r * m.K + k] * x[k], a += fabs(m.w[(size_t)r * m.K + k] * x[k]);
    *mag = a;
    return s;
}
static std::vector<double> bf16s(const bf16 *p, int n) {
    std::vector<double> v(n);
    for (int i = 0; i < n; i++) v[i] = ig_bf16_to_f32(p[i]);
    return v;
}

/* one layer-like launch in format WQ / G with hidden size H (intermediate I = 512, K 1024 for down) */
template <int H, int WQ, int G, bool EMB>
static void run(const char *name) {
    constexpr int I = 512, KD = 2 * I, N1 = 48, N1OUT = 45, NO = 64, NV = 80; /* KD: down's K */
    static_assert(KD == 1024, "down's K");
    const float eps = 1e-5f;
    mat w1 = make_mat(N1, H, WQ, G), wo = make_mat(NO, H, WQ, G), wgu = make_mat(2 * KD, H, WQ, G);
    mat wd = make_mat(NO, KD, WQ, G), wv = make_mat(NV, H, WQ, G);
    std::vector<float> resid0(H), g1(H), g2(H), gv(H), bias1(N1), r2(NO), r4(NO), r4_0(NO), qkv(N1, 0.0f), logits(NV);
    std::vector<bf16> emb(H), att(H), h(KD, 0);
    for (int k = 0; k < H; k++) {
        resid0[k] = 2.0f * frand(), g1[k] = 1.0f + 0.5f * frand(), g2[k] = 1.0f + 0.5f * frand(), gv[k] = 1.0f + 0.5f * frand();
        emb[k] = ig_f32_to_bf16(frand()), att[k] = ig_f32_to_bf16(frand());
    }
    for (int r = 0; r < N1; r++) bias1[r] = 0.1f * frand();
    for (int r = 0; r < NO; r++) r2[r] = frand(), r4_0[r] = r4[r] = frand();
    std::vector<float> resid_emb(H, 0.0f); /* EMB: the CTA stores the embedding row here */
    const std::vector<float> r2_0 = r2;
    unsigned long long bar = 0, amax = 0;
    const bool ok = emul_launch(dim3e{1, 1, 1}, dim3e{IG_ST_THREADS, 1, 1}, [&]() {
        ig_st *st = &g_st;
        ig_st_init(st, &bar, 1);
        unsigned it = 0;
        if (threadIdx.x >= IG_ST_CTHREADS) {
            if (threadIdx.x == IG_ST_CTHREADS) {
                ig_st_produce<H, WQ, G>(st, g_ring, w1.rows.data(), N1, 1, 0, &it, g1.data(), H * 4);
                ig_st_produce<H, WQ, G>(st, g_ring, wo.rows.data(), NO, 1, 41, &it);
                ig_st_produce<H, WQ, G>(st, g_ring, wgu.rows.data(), 2 * KD, 32, 82, &it, g2.data(), H * 4);
                ig_st_produce<KD, WQ, G>(st, g_ring, wd.rows.data(), NO, 1, 123, &it);
                ig_st_produce<H, WQ, G>(st, g_ring, wv.rows.data(), NV, 1, 164, &it);
            }
            return;
        }
        const void *x1 = EMB ? (const void *)emb.data() : (const void *)resid0.data();
        ig_st_gemv_tc<H, 0, true, true, EMB, false, WQ, G>(st, g_ring, N1, N1OUT, 0, x1, g1.data(), eps, bias1.data(), qkv.data(),
                                                          &it, (unsigned long long *)0, resid_emb.data());
        ig_st_gemv_tc<H, 1, false, false, false, false, WQ, G>(st, g_ring, NO, NO, 41, att.data(), 0, 0.0f, 0, r2.data(), &it, &bar);
        ig_st_gemv_tc<H, 2, true, false, false, false, WQ, G>(st, g_ring, 2 * KD, KD, 82, resid0.data(), g2.data(), eps, 0, h.data(),
                                                             &it, &bar);
        ig_st_gemv_tc<KD, 1, false, false, false, false, WQ, G>(st, g_ring, NO, NO, 123, h.data(), 0, 0.0f, 0, r4.data(), &it, &bar);
        ig_st_gemv_tc<H, 0, true, false, false, true, WQ, G>(st, g_ring, NV, NV, 164, resid0.data(), gv.data(), eps, 0, logits.data(),
                                                            &it, &bar, 0, &amax);
    });
    CHECK(ok, "%s: the emulated CTA deadlocked", name);
    if (!ok) return;
    double worst = 0.0;
    const double B = 1e-3;
    auto cmp = [&](const char *ph, int i, double got, double want, double mag) {
        const double e = fabs(got - want) / (mag + 1e-12);
        worst = std::max(worst, e);
        CHECK(e <= B, "%s phase %s output %d: %.6g, reference %.6g (sum |w x| %.4g)", name, ph, i, got, want, mag);
    };
    /* 1 */
    std::vector<float> x1f(H);
    for (int k = 0; k < H; k++) x1f[k] = EMB ? ig_bf16_to_f32(emb[k]) : resid0[k];
    if (EMB)
        for (int k = 0; k < H; k++) CHECK(resid_emb[k] == x1f[k], "%s: the embedding row's column %d was not stored as the residual", name, k);
    const std::vector<double> xn1 = ref_norm(x1f.data(), g1.data(), H, eps);
    double mag = 0.0;
    for (int r = 0; r < N1OUT; r++) {
        const double d = dot(w1, r, xn1, &mag);
        cmp("1", r, qkv[r], d + bias1[r], mag + fabs(bias1[r]));
    }
    for (int r = N1OUT; r < N1; r++) CHECK(qkv[r] == 0.0f, "%s: phase 1 stored padding row %d", name, r);
    /* 2 */
    const std::vector<double> xa = bf16s(att.data(), H);
    for (int r = 0; r < NO; r++) {
        const double d = dot(wo, r, xa, &mag);
        cmp("2", r, r2[r], r2_0[r] + d, mag + fabs(r2_0[r]));
    }
    /* 3: gate row 32q + i, up row 32q + 16 + i -> output 16q + i */
    const std::vector<double> xn2 = ref_norm(resid0.data(), g2.data(), H, eps);
    for (int j = 0; j < KD; j++) {
        const int gr = 32 * (j / 16) + j % 16;
        double mg, mu;
        const double ga = dot(wgu, gr, xn2, &mg), u = dot(wgu, gr + 16, xn2, &mu);
        const double want = ga / (1.0 + exp(-ga)) * u, got = ig_bf16_to_f32(h[j]);
        /* the bf16 rounding of the output plus the dots' bound, carried through silu(g) u */
        const double m3 = fabs(want) * 8e-3 + (mg * fabs(u) + mu * fabs(ga)) * B + 1e-9;
        worst = std::max(worst, fabs(got - want) / m3 * B);
        CHECK(fabs(got - want) <= m3, "%s phase 3 output %d: %.6g, reference %.6g", name, j, got, want);
    }
    /* 4 */
    const std::vector<double> xh = bf16s(h.data(), KD);
    for (int r = 0; r < NO; r++) {
        const double d = dot(wd, r, xh, &mag);
        cmp("4", r, r4[r], r4_0[r] + d, mag + fabs(r4_0[r]));
    }
    /* 5 */
    const std::vector<double> xn5 = ref_norm(resid0.data(), gv.data(), H, eps);
    unsigned long long best = 0ull;
    for (int r = 0; r < NV; r++) {
        const double d = dot(wv, r, xn5, &mag);
        cmp("5", r, logits[r], d, mag);
        best = std::max(best, ig_amax_key(logits[r], r));
    }
    CHECK(amax == best, "%s: the CTA's greedy key %llx is not the best of its logits (%llx)", name, amax, best);
    printf("%-28s worst error %.2e of sum |w x| (bound %.0e)\n", name, worst, B);
}

int main() {
    run<384, 0, 32, false>("bf16 H 384");
    run<1152, 0, 32, true>("bf16 H 1152, embedding row");
    run<384, 8, 32, false>("q8r H 384");
    run<1152, 8, 32, true>("q8r H 1152, embedding row");
    run<384, 4, 32, false>("q4r g32 H 384");
    run<1152, 4, 128, false>("q4r g128 H 1152");
    run<8448, 0, 32, false>("bf16 H 8448 (rows of 2 slots)");
    run<8448, 8, 32, true>("q8r H 8448, embedding row");
    run<384, 9, 32, false>("f8r H 384");
    run<1152, 9, 32, true>("f8r H 1152, embedding row");
    if (fails) printf("%d check(s) failed\n", fails);
    else printf("all stream GEMV checks passed\n");
    return fails ? 1 : 0;
}
