/* test_attn_prefill_tc.cpp — attention_prefill.cu's tensor-core path (FlashAttention-2 on mma.sync:
 * runs of at least AP_MINRUN consecutive tokens of one sequence, 16-bit K/V tiles through cp.async,
 * ldmatrix and its transposed form for V, online softmax) run on the host through cuda_emul.h's
 * stand-ins, without a GPU, beside the per-token CUDA-core path the same tiles give the short runs,
 * against attention in double over the K/V rows as the pool stores them (bf16) and the f32 queries.
 * One mixed step of three sequences over a paged pool whose pages are scattered: a 90-token run
 * that crosses a 64-token tile (its context starting before the run), a 2-token run (the CUDA-core
 * path) and a 20-token run sharing the second tile with both; head dims 128 (GQA groups of 4) and
 * 64 (no grouping) with a 24-key sliding window on mma.sync (_flash), and D 128 without and with
 * the window on wgmma (_flash_wg, through cuda_emul.h's stand-ins), and the warp-specialized form
 * (_flash_ws: a producer warpgroup's TMA boxes, emul_extra.h's swizzling stand-in, through mbarrier
 * stages) with 1, 2 and 4 heads a CTA, 64- and 128-key tiles, pages of 16, 64 and 128 slots holding
 * two layers. Rows a step must not read are NaN in the pool (past each sequence's last key, before
 * its windows): a V row the tensor cores multiply by P = 0 must be zeroed first. The bound: q and P
 * are rounded to bf16 by the tensor-core path (2^-9 relative) and the output to bf16.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_attn_prefill_tc.cpp
 * Exit 0 when every check passes. */
#include "emul_extra.h"

#define PS_ 16
#define AP_NAME apt_a
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WG 0
#include "attention_prefill.cu"
#define AP_NAME apt_b
#define AP_H 4
#define AP_KV 4
#define AP_D 64
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_WINDOW 24
#define AP_WG 0
#include "attention_prefill.cu"
/* on wgmma (_flash_wg: wgmma.cuh's stand-ins read the Q and K tiles K-major and the V tile MN-major
 * through their descriptors): D 128 without and with the window, D 64 (one 64-column block a tile) */
#define AP_NAME apt_c
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WG 1
#include "attention_prefill.cu"
#define AP_NAME apt_d
#define AP_H 4
#define AP_KV 4
#define AP_D 128
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WINDOW 24
#define AP_WG 1
#include "attention_prefill.cu"
#define AP_NAME apt_e
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_WG 1
#include "attention_prefill.cu"
/* several query heads of a KV head a CTA (AP_HPC, a warpgroup each, one K/V tile stream): wgmma at
 * D 64 four heads, at D 128 two with the window; mma.sync two */
#define AP_NAME apt_f
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_WG 1
#define AP_HPC 4
#include "attention_prefill.cu"
#define AP_NAME apt_g
#define AP_H 8
#define AP_KV 4
#define AP_D 128
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WINDOW 24
#define AP_WG 1
#define AP_HPC 2
#include "attention_prefill.cu"
#define AP_NAME apt_h
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS PS_
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WG 0
#define AP_HPC 2
#include "attention_prefill.cu"

/* _flash_ws (the producer warp's TMA boxes, mbarrier stages): pages of two layers, layer 1 read;
 * 64- and 128-slot pages (a box of 64 of their rows) */
#define AP_NAME apt_i
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS 64
#define AP_PAGE_BYTES (2ull * 2 * 2 * 64 * 128 * 2)
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WINDOW 24
#define AP_WG 1
#define AP_HPC 2
#include "attention_prefill.cu"
#define AP_NAME apt_j
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 128
#define AP_PAGE_BYTES (2ull * 2 * 2 * 128 * 64 * 2)
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.125f
#define AP_WG 1
#define AP_HPC 4
#include "attention_prefill.cu"
#define AP_NAME apt_k
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS PS_
#define AP_PAGE_BYTES (2ull * 2 * 2 * PS_ * 128 * 2)
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WG 1
#define AP_HPC 1
#include "attention_prefill.cu"

#define AP_NAME apt_l
#define AP_H 8
#define AP_KV 2
#define AP_D 128
#define AP_PS PS_
#define AP_PAGE_BYTES (2ull * 2 * 2 * PS_ * 128 * 2)
#define AP_KVBF16 1
#define AP_OBF16 1
#define AP_SCALE 0.08838834764831845f
#define AP_WINDOW 24
#define AP_WG 1
#define AP_HPC 2
#define AP_WBN 128
#include "attention_prefill.cu"

typedef void (*ap_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                      int, unsigned short *, ig_tmap);

struct ap_case {
    int hpc = 1;     /* heads a CTA */
    bool ws = false; /* launched with _flash_ws's producer warp (IG_AP_BLOCKW) */
    int ps = PS_;    /* slots a page */
    int layers = 1;  /* layers a page (the last one read) */
};

/* Sequences s with ctx[s] keys in the pool, the last run[s] of them this step's tokens (in s order). */
static void run_case(const char *name, ap_fn fn, int H, int KV, int D, float scale, int window, ap_case c = {}) {
    const int NS = 3, ctx[NS] = {150, 41, 60}, run[NS] = {90, 2, 20}, MP = 16; /* pages a sequence, at most */
    const int hpc = c.hpc, PS = c.ps;
    const size_t layer_el = (size_t)2 * KV * PS * D, page_el = layer_el * c.layers; /* bf16 elements */
    const int npages = NS * MP;
    std::vector<unsigned short> pool(page_el * npages);
    std::vector<int> pt(NS * MP);
    for (int i = 0; i < NS * MP; i++) pt[i] = (i * 7 + 3) % npages; /* scattered, each page once */
    for (auto &v : pool) v = ig_f32_to_bf16(frand());
    int T = 0;
    for (int s = 0; s < NS; s++) T += run[s];
    std::vector<int> pos(T), seq(T);
    for (int s = 0, t = 0; s < NS; s++)
        for (int i = 0; i < run[s]; i++, t++) seq[t] = s, pos[t] = ctx[s] - run[s] + i;
    /* rows a step must not use are NaN: past each sequence's last key (a page's rest, as a reused page
     * holds), and before the first key its run's windows reach */
    for (int s = 0; s < NS; s++)
        for (int j = 0; j < MP * PS; j++)
            if (j >= ctx[s] || (window > 0 && j < ctx[s] - run[s] - window + 1))
                for (int kv01 = 0; kv01 < 2; kv01++)
                    for (int kh = 0; kh < KV; kh++)
                        for (int i = 0; i < D; i++)
                            pool[(size_t)pt[s * MP + j / PS] * page_el + (size_t)(c.layers - 1) * layer_el +
                                 (size_t)kv01 * KV * PS * D + ((size_t)kh * PS + j % PS) * D + i] = 0x7fc0;
    std::vector<float> q((size_t)T * H * D);
    for (auto &v : q) v = 2.0f * frand();
    std::vector<unsigned short> out((size_t)T * H * D, 0xffff);
    const dim3e grid = {(unsigned)IG_AP_GRID_XH(H, hpc), (unsigned)IG_AP_GRID_Y(T), 1};
    const unsigned long long layer_off = (unsigned long long)(c.layers - 1) * layer_el * 2;
    const ig_tmap map = emul_tmap2(pool.data(), (unsigned)D, (unsigned long long)npages * page_el / D, 2ull * D, 64,
                                   (unsigned)std::min(PS, 64));
    const unsigned block = c.ws ? IG_AP_BLOCKW(hpc) : IG_AP_BLOCKH(hpc);
    CHECK(!c.ws || IG_AP_SMEM_WS(D, hpc, 128) <= (int)sizeof ig_emul_dyn, "%s: the emulation's shared memory", name);
    CHECK(emul_launch(grid, {block, 1, 1},
                      [&] {
                          fn(T, q.data(), (const unsigned char *)pool.data(), layer_off, pos.data(), seq.data(), pt.data(), MP,
                             out.data(), map);
                      }),
          "%s: deadlocked", name);
    /* key / value row j of sequence s, kv head kh */
    auto row = [&](int s, int kv01, int kh, int j) {
        return &pool[(size_t)pt[s * MP + j / PS] * page_el + layer_off / 2 + (size_t)kv01 * KV * PS * D + ((size_t)kh * PS + j % PS) * D];
    };
    double maxerr = 0, maxv = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int s = seq[t], kh = h / (H / KV), lo = window > 0 ? std::max(0, pos[t] - window + 1) : 0;
            std::vector<double> l(pos[t] + 1, 0.0), o(D, 0.0);
            double mx = -1e300, z = 0;
            for (int j = lo; j <= pos[t]; j++) {
                const unsigned short *k = row(s, 0, kh, j);
                double d = 0;
                for (int i = 0; i < D; i++) d += (double)q[((size_t)t * H + h) * D + i] * ig_bf16_to_f32(k[i]);
                l[j] = d * scale, mx = std::max(mx, l[j]);
            }
            for (int j = lo; j <= pos[t]; j++) {
                const double p = exp(l[j] - mx);
                const unsigned short *v = row(s, 1, kh, j);
                z += p;
                for (int i = 0; i < D; i++) o[i] += p * ig_bf16_to_f32(v[i]);
            }
            for (int i = 0; i < D; i++) {
                const double ref = o[i] / z, got = ig_bf16_to_f32(out[((size_t)t * H + h) * D + i]);
                maxv = std::max(maxv, fabs(ref));
                maxerr = std::max(maxerr, std::isnan(got) ? INFINITY : fabs(got - ref));
            }
        }
    /* values in [-1, 1): q and P in bf16 move an output by a few 2^-9 of max |V|, its bf16 rounding by 2^-9 */
    const double tol = 5e-3;
    CHECK(maxerr <= tol, "%s: max |out - ref| %g > %g", name, maxerr, tol);
    printf("%s %s T=%d: max err %.3g (max |ref| %.3g)\n", maxerr <= tol ? "ok  " : "FAIL", name, T, maxerr, maxv);
}

int main() {
    run_case("H8 KV2 D128 bf16 KV", apt_a, 8, 2, 128, 0.08838834764831845f, 0);
    run_case("H4 KV4 D64 bf16 KV, window 24", apt_b, 4, 4, 64, 0.125f, 24);
    run_case("wgmma: H8 KV2 D128 bf16 KV", apt_c, 8, 2, 128, 0.08838834764831845f, 0);
    run_case("wgmma: H4 KV4 D128 bf16 KV, window 24", apt_d, 4, 4, 128, 0.08838834764831845f, 24);
    run_case("wgmma: H8 KV2 D64 bf16 KV", apt_e, 8, 2, 64, 0.125f, 0);
    run_case("wgmma: H8 KV2 D64 bf16 KV, 4 heads a CTA", apt_f, 8, 2, 64, 0.125f, 0, {.hpc = 4});
    run_case("wgmma: H8 KV4 D128 bf16 KV, window 24, 2 heads a CTA", apt_g, 8, 4, 128, 0.08838834764831845f, 24, {.hpc = 2});
    run_case("H8 KV2 D128 bf16 KV, 2 heads a CTA", apt_h, 8, 2, 128, 0.08838834764831845f, 0, {.hpc = 2});
    /* warp-specialized: the wgmma instances above launched with the producer warp, and the
     * two-layer pages of 16, 64 and 128 slots */
    run_case("ws: H8 KV2 D128", apt_c, 8, 2, 128, 0.08838834764831845f, 0, {.ws = true});
    run_case("ws: H4 KV4 D128, window 24", apt_d, 4, 4, 128, 0.08838834764831845f, 24, {.ws = true});
    run_case("ws: H8 KV2 D64, 4 heads a CTA", apt_f, 8, 2, 64, 0.125f, 0, {.hpc = 4, .ws = true});
    run_case("ws: H8 KV4 D128, window 24, 2 heads a CTA", apt_g, 8, 4, 128, 0.08838834764831845f, 24, {.hpc = 2, .ws = true});
    run_case("ws: H8 KV2 D128, window 24, 2 heads, 64-slot pages of 2 layers", apt_i, 8, 2, 128, 0.08838834764831845f, 24,
             {.hpc = 2, .ws = true, .ps = 64, .layers = 2});
    run_case("ws: H8 KV2 D64, 4 heads, 128-slot pages of 2 layers", apt_j, 8, 2, 64, 0.125f, 0,
             {.hpc = 4, .ws = true, .ps = 128, .layers = 2});
    run_case("ws: H8 KV2 D128, 16-slot pages of 2 layers", apt_k, 8, 2, 128, 0.08838834764831845f, 0,
             {.hpc = 1, .ws = true, .layers = 2});
    run_case("ws: H8 KV2 D128, window 24, 2 heads, 128-key tiles, 16-slot pages of 2 layers", apt_l, 8, 2, 128,
             0.08838834764831845f, 24, {.hpc = 2, .ws = true, .layers = 2});
    run_case("wgmma without the producer: the same pages", apt_k, 8, 2, 128, 0.08838834764831845f, 0, {.layers = 2});
    if (fails) {
        printf("test_attn_prefill_tc: %d failures\n", fails);
        return 1;
    }
    printf("test_attn_prefill_tc: all passed\n");
    return 0;
}
