/* test_kv_quant_warp.cpp — templates/cuda/kv_quant.cuh's warp functions run on the host, without a
 * GPU: 32 std::threads play the lanes of one warp (__syncwarp a barrier, __shfl_xor_sync through a
 * shared slot array between two barriers, the __f*_rn intrinsics as plain IEEE operations with
 * contraction off), so the device encoder and reader logic is checked where CI has no GPU:
 *   - ig_kvq_rotate_w / ig_kvq_store_w / the delta-key chain (rec) / ig_kvq_key_before_w give the
 *     bytes of templates/cpu/kv_quant.h's encoder for a page of 8-bit and of delta-coded 4-bit rows;
 *   - ig_kvq_attend (one warp, NW = 1; both chunk widths; ranges not starting at a page boundary,
 *     as split contexts have) matches a double softmax over kv_quant.h's dequantized rows;
 *   - fp8: the e4m3 codec (ig_kvq_f2e4m3 against kv_quant.h's ig_f32_to_e4m3 on every f32 bit
 *     pattern of a sweep, ig_kvq_e4m3_h2's halves against ig_e4m3_to_f32 on all 256 codes), the
 *     encoder's bytes and ig_kvq_attend over fp8 rows.
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu tests/cuda_host/test_kv_quant_warp.cpp
 * Exit 0 when every check passes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <barrier>
#include <thread>
#include <vector>

/* ---- the CPU format, in a namespace (its system headers first) */
#include "cpukv.h"

/* ---- a one-warp CUDA shim: what kv_quant.cuh uses of common.cuh and the built-ins */
#define IG_CUDA_COMMON_CUH 1
#define IG_DEV static inline
#define IG_FULL_MASK 0xffffffffu
#define IG_NEG_INF (-INFINITY)
#define IG_CDIV(a, b) (((a) + (b) - 1) / (b))
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
static uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static thread_local struct { unsigned x; } threadIdx;
static std::barrier<> *g_bar;
static double g_slot[32]; /* a float or a double lane value (a float round-trips through a double exactly) */
static void __syncwarp() { g_bar->arrive_and_wait(); }
template <class T> static T __shfl_xor_sync(unsigned, T v, int o) {
    g_slot[threadIdx.x] = v;
    g_bar->arrive_and_wait();
    const T r = (T)g_slot[threadIdx.x ^ (unsigned)o];
    g_bar->arrive_and_wait();
    return r;
}
static float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static float __fadd_rn(float a, float b) { return a + b; }
static float __fsub_rn(float a, float b) { return a - b; }
static float __fmul_rn(float a, float b) { return a * b; }
static float __fdiv_rn(float a, float b) { return a / b; }
static float __fsqrt_rn(float a) { return sqrtf(a); }
#include "emul_bits.h"
template <class T> static T __ldg(const T *p) { return *p; }
template <class T> static T __ldcg(const T *p) { return *p; }
static unsigned short ig_f32_to_f16(float f) { return cpukv::ig_f32_to_f16(f); }
static float ig_f16_to_f32(unsigned short h) { return cpukv::ig_f16_to_f32(h); }
#include "kv_quant.cuh"

static int g_fails;
static void expect(bool ok, const char *what) {
    if (!ok) g_fails++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
}
/* f(lane) on 32 threads */
template <class F> static void warp_run(F f) {
    std::barrier<> bar(32);
    g_bar = &bar;
    std::vector<std::thread> th;
    for (unsigned l = 0; l < 32; l++)
        th.emplace_back([&, l] {
            threadIdx.x = l;
            f();
        });
    for (auto &t : th) t.join();
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand() {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* A page of PS rows per KV head (KV heads) for K and V from random rows, by the device functions
 * (as rope_kv.cu: rotate, then delta keys against the chain) and by kv_quant.h (as rope_kv.c):
 * the bytes must match. Leaves the device page in *page. */
template <int KV, int PS, int D, int BITS>
static void check_encoder(std::vector<uint8_t> *page, const char *name) {
    const size_t bytes = IG_KVQ_LAYER_BYTES(KV, PS, D, BITS);
    std::vector<uint8_t> dev(bytes, 0xee), cpu(bytes, 0xee);
    std::vector<float> rows((size_t)2 * KV * PS * D);
    for (size_t i = 0; i < rows.size(); i++) rows[i] = frand() * (1.0f + (float)(i % 5)) + (i % 3 == 0 ? 0.5f : 0.0f);
    for (int i = 0; i < D; i++) rows[(size_t)(KV * PS + 1) * D + i] = 0.0f; /* an all-zero V row */
    /* kv_quant.h, rope_kv.c's order: slot by slot */
    for (int s = 0; s < PS; s++)
        for (int h = 0; h < KV; h++)
            for (int kv01 = 0; kv01 < 2; kv01++) {
                std::vector<float> x(&rows[((size_t)kv01 * KV * PS + h * PS + s) * D], &rows[((size_t)kv01 * KV * PS + h * PS + s) * D] + D);
                cpukv::ig_kvq_rotate(x.data(), D);
                if (kv01 == 0 && BITS == 4) { /* the best predictor (fp8: BITS 0xe4, absolute keys) */
                    std::vector<float> kp(D), tmp(D);
                    if (s > 0) cpukv::ig_kvq_key_before(cpu.data(), KV, PS, D, BITS, h, s, tmp.data(), kp.data());
                    cpukv::ig_kvq_store_key(cpu.data(), KV, PS, D, BITS, h, s, x.data(), kp.data(), IG_KVQ_NPRED);
                } else
                    cpukv::ig_kvq_store(cpu.data(), KV, PS, D, BITS, kv01, h, s, x.data());
            }
    /* the device functions: keys of head h as rope_kv.cu's run leader (the chain in kp, slot 0 from
     * scratch); half of the heads restart mid-page from ig_kvq_key_before_w as a decode step does */
    static float x[D], kp[D];
    warp_run([&] {
        const unsigned lane = threadIdx.x;
        for (int h = 0; h < KV; h++)
            for (int kv01 = 0; kv01 < 2; kv01++)
                for (int s = 0; s < PS; s++) {
                    for (int i = lane; i < D; i += 32) x[i] = rows[((size_t)kv01 * KV * PS + h * PS + s) * D + i];
                    ig_kvq_rotate_w<D>(x);
                    const bool delta = kv01 == 0 && BITS == 4;
                    if (delta && s == PS / 2 && h % 2) ig_kvq_key_before_w<KV, PS, D, BITS, true>(dev.data(), h, s, kp);
                    if (delta)
                        ig_kvq_store_key_w<KV, PS, D, BITS>(dev.data(), h * PS + s, x, kp, s == 0);
                    else
                        ig_kvq_store_w<KV, PS, D, BITS>(dev.data(), kv01, h * PS + s, x);
                }
    });
    char what[160];
    if (BITS == 4) { /* the keys' zero bytes: some rows must take a predictor other than 1 (bits 4..6) */
        int other = 0;
        for (int r = 0; r < KV * PS; r++) other += (cpu[2 * (size_t)KV * PS * IG_KVQ_RB(D, BITS) + 4 * (size_t)KV * PS + r] >> 4) != 0;
        snprintf(what, sizeof what, "%s: %d of %d key rows take a predictor other than 1", name, other, KV * PS);
        expect(other > 0, what);
    }
    snprintf(what, sizeof what, "%s: device encoder bytes = kv_quant.h's (%zu bytes)", name, bytes);
    expect(dev == cpu, what);
    if (dev != cpu)
        for (size_t i = 0; i < bytes; i++)
            if (dev[i] != cpu[i]) {
                printf("     first difference at byte %zu: device %u, cpu %u\n", i, dev[i], cpu[i]);
                break;
            }
    *page = dev;
}

/* ig_kvq_attend over nkeys keys in pages of PS slots (page table: a reversed order) of random rows
 * encoded by kv_quant.h, one query, range [k0, k1), against a double reference. */
template <int KV, int PS, int D, int BITS, int VE>
static void check_attend(int n_pages, int k0, int k1, const char *name) {
    const size_t lb = IG_KVQ_LAYER_BYTES(KV, PS, D, BITS);
    std::vector<uint8_t> pool(lb * n_pages);
    std::vector<int> pt(n_pages);
    for (int p = 0; p < n_pages; p++) pt[p] = n_pages - 1 - p;
    const int kh = KV - 1;
    std::vector<float> K((size_t)n_pages * PS * D), V((size_t)n_pages * PS * D), kp(D);
    for (int j = 0; j < n_pages * PS; j++) {
        uint8_t *layer = &pool[(size_t)pt[j / PS] * lb];
        for (int h = 0; h < KV; h++)
            for (int kv01 = 0; kv01 < 2; kv01++) {
                std::vector<float> x(D);
                for (int i = 0; i < D; i++) x[i] = frand() + (kv01 ? 0.0f : 0.2f * (float)(j % 5));
                if (kv01 == 0 && BITS == 4) { /* the best predictor */
                    std::vector<float> kq(D), tmp(D);
                    if (j % PS > 0) cpukv::ig_kvq_key_before(layer, KV, PS, D, BITS, h, j % PS, tmp.data(), kq.data());
                    cpukv::ig_kvq_store_key(layer, KV, PS, D, BITS, h, j % PS, x.data(), kq.data(), IG_KVQ_NPRED);
                } else
                    cpukv::ig_kvq_store(layer, KV, PS, D, BITS, kv01, h, j % PS, x.data());
            }
        cpukv::ig_kvq_load(layer, KV, PS, D, BITS, 0, kh, j % PS, 1, &K[(size_t)j * D], kp.data());
        cpukv::ig_kvq_load(layer, KV, PS, D, BITS, 1, kh, j % PS, 1, &V[(size_t)j * D], kp.data());
    }
    std::vector<float> q(D);
    for (int i = 0; i < D; i++) q[i] = frand();
    typedef ig_kvq_geom<D, BITS, VE> Q;
    constexpr int E = Q::E;
    /* the device state of each lane, merged below as _core_end does */
    static float accs[32][E], ms[32], ls[32];
    warp_run([&] {
        const int lane = (int)threadIdx.x, vl = lane % Q::TPK;
        float qr[1][E], acc[1][E], m[1] = {IG_NEG_INF}, l[1] = {0.0f};
        for (int jv = 0; jv < Q::NV; jv++)
            for (int e = 0; e < VE; e++) {
                const int v = vl + Q::TPK * jv;
                qr[0][jv * VE + e] = v < Q::DV ? q[v * VE + e] : 0.0f;
                acc[0][jv * VE + e] = 0.0f;
            }
        ig_kvq_attend<KV, PS, D, BITS, VE, 1, 1, 4, false, (unsigned long long)IG_KVQ_LAYER_BYTES(KV, PS, D, BITS)>(
            kh, k0, k1, 0, qr, acc, m, l, pool.data(), 0ull, pt.data());
        for (int e = 0; e < E; e++) accs[lane][e] = acc[0][e];
        ms[lane] = m[0], ls[lane] = l[0];
    });
    /* merge the lane groups (scores in the log2 domain: q was not pre-scaled, so exp2) */
    double M = -INFINITY;
    for (int g = 0; g < Q::KPW; g++) M = ms[g * Q::TPK] > M ? ms[g * Q::TPK] : M;
    std::vector<double> o(D, 0.0);
    double L = 0;
    for (int g = 0; g < Q::KPW; g++) {
        const int l0 = g * Q::TPK;
        if (ms[l0] == -INFINITY) continue;
        const double f = exp2((double)ms[l0] - M);
        L += ls[l0] * f;
        for (int vl = 0; vl < Q::TPK; vl++)
            for (int jv = 0; jv < Q::NV; jv++) {
                const int v = vl + Q::TPK * jv;
                if (v < Q::DV)
                    for (int e = 0; e < VE; e++) o[v * VE + e] += accs[l0 + vl][jv * VE + e] * f;
            }
    }
    /* reference: softmax in the log2 domain over [k0, k1) */
    std::vector<double> ref(D, 0.0);
    double mx = -INFINITY, lr = 0;
    std::vector<double> sc(k1);
    for (int j = k0; j < k1; j++) {
        double s = 0;
        for (int i = 0; i < D; i++) s += (double)q[i] * K[(size_t)j * D + i];
        sc[j] = s, mx = s > mx ? s : mx;
    }
    for (int j = k0; j < k1; j++) {
        const double p = exp2(sc[j] - mx);
        lr += p;
        for (int i = 0; i < D; i++) ref[i] += p * V[(size_t)j * D + i];
    }
    double err = 0;
    for (int i = 0; i < D; i++) err = fmax(err, fabs(o[i] / L - ref[i] / lr));
    char what[200];
    snprintf(what, sizeof what, "%s: ig_kvq_attend keys [%d, %d) vs dequantize-then-attend, max err %.2e", name, k0, k1, err);
    expect(err < 1e-4, what);
}

/* The e4m3 codec: the device encoder against kv_quant.h's on a sweep of f32 bit patterns (every
 * 4099th, both signs: normals, subnormals, the rounding ties, past 448, infinities, NaNs) and on
 * the exact midpoints between neighbouring codes; the reader's halves times 2^8 against
 * ig_e4m3_to_f32 on every code but the NaNs. */
static void check_e4m3() {
    size_t bad = 0, n = 0;
    for (unsigned long long u = 0; u <= 0xffffffffull; u += 4099, n++) {
        float f;
        const unsigned w = (unsigned)u;
        memcpy(&f, &w, 4);
        bad += ig_kvq_f2e4m3(f) != cpukv::ig_f32_to_e4m3(f);
    }
    for (int c = 0; c < 126; c++) { /* midpoints (ties to even) and a hair either side */
        const float a = cpukv::ig_e4m3_to_f32((uint8_t)c), b = cpukv::ig_e4m3_to_f32((uint8_t)(c + 1)), m = 0.5f * (a + b);
        for (float f : {m, nextafterf(m, 0.0f), nextafterf(m, 1e9f), -m}) bad += ig_kvq_f2e4m3(f) != cpukv::ig_f32_to_e4m3(f), n++;
    }
    char what[160];
    snprintf(what, sizeof what, "e4m3 encoder = kv_quant.h's on %zu values (%zu differ)", n, bad);
    expect(bad == 0, what);
    bad = 0;
    for (unsigned c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) continue;
        const unsigned h2 = ig_kvq_e4m3_h2(c | ((c ^ 0x80u) << 16)); /* the code and its negation */
        const float lo = ig_kvq_h2f((unsigned short)(h2 & 0xffff)) * IG_KVQ_E4M3_UNIT, hi = ig_kvq_h2f((unsigned short)(h2 >> 16)) * IG_KVQ_E4M3_UNIT;
        bad += lo != cpukv::ig_e4m3_to_f32((uint8_t)c) || hi != cpukv::ig_e4m3_to_f32((uint8_t)(c ^ 0x80u));
    }
    snprintf(what, sizeof what, "e4m3 reader halves x 2^8 = ig_e4m3_to_f32 on the 254 finite codes (%zu differ)", bad);
    expect(bad == 0, what);
}

int main() {
    std::vector<uint8_t> page;
    check_e4m3();
    check_encoder<2, 16, 64, IG_KVQ_E4M3>(&page, "fp8 KV2 PS16 D64");
    check_encoder<1, 8, 128, IG_KVQ_E4M3>(&page, "fp8 KV1 PS8 D128");
    check_attend<2, 16, 64, IG_KVQ_E4M3, 16>(5, 0, 80, "fp8 D64 VE16");
    check_attend<2, 16, 64, IG_KVQ_E4M3, 8>(5, 21, 77, "fp8 D64 VE8 (mid-page start)");
    check_encoder<2, 16, 64, 8>(&page, "int8 KV2 PS16 D64");
    check_encoder<2, 16, 48, 4>(&page, "uint4 KV2 PS16 D48");
    check_encoder<1, 8, 128, 4>(&page, "uint4 KV1 PS8 D128");
    check_encoder<3, 16, 16, 8>(&page, "int8 KV3 PS16 D16");
    check_attend<2, 16, 64, 8, 16>(5, 0, 80, "int8 D64 VE16");
    check_attend<2, 16, 64, 8, 8>(5, 21, 77, "int8 D64 VE8");
    check_attend<2, 16, 48, 4, 16>(5, 0, 73, "uint4 D48 VE16");
    check_attend<2, 16, 48, 4, 8>(6, 37, 90, "uint4 D48 VE8 (mid-page start)");
    check_attend<1, 8, 128, 4, 16>(4, 3, 29, "uint4 D128 PS8 VE16");
    check_attend<2, 16, 16, 4, 8>(3, 0, 48, "uint4 D16 VE8");
    printf("test_kv_quant_warp: %s\n", g_fails ? "FAILED" : "ok");
    return g_fails ? 1 : 0;
}
