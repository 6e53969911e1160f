/* test_kv_quant_kernels.cpp — the quantized-KV kernels of templates/cuda (rope_kv.cu, attention.cu's
 * direct / split / split_rope kernels, attention_prefill.cu's CUDA-core path) run on the host
 * through cuda_emul.h, without a GPU: two sequences over three steps (prefill chunks, a mixed step,
 * a decode step through the fused kernel), pages crossed, GQA, int8, delta-coded uint4 and fp8 (e4m3). With the
 * RoPE frequencies zero (RoPE the identity on both sides), the pages rope_kv writes must equal
 * templates/cpu/kv_quant.h's encoder byte for byte, the fused decode kernel must write the same
 * bytes, and every attention output must match a double softmax over kv_quant.h's dequantized
 * rows with the rotated queries, rotated back; the GPU harness's f32-output prefill instances run its
 * "mixed" scenario (and must not have the bf16 tensor-core path). (The GPU harness, tests/gpu/test_kvq.cuh, runs the
 * same checks on the device with real frequencies.)
 * Build (test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off -pthread
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_kv_quant_kernels.cpp
 * Exit 0 when every check passes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <memory>
#include <vector>

#include "cpukv.h"
#include "cuda_emul.h"

#define PS_ 16
/* two layers a page, tests on layer 1. case A: int8, H 8 over KV 2, D 64, f32 out, 3 splits; case B:
 * uint4, H 6 over KV 2, D 48, 4 splits */
#define RK_NAME rk_a
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS PS_
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 64, 8))
#include "rope_kv.cu"
#define AT_NAME at_a
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS PS_
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 64, 8))
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#include "attention.cu"
#define AP_NAME ap_a
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS PS_
#define AP_KVQ 8
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 64, 8))
#define AP_OBF16 0
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define RK_NAME rk_b
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_PS PS_
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 48, 4))
#include "rope_kv.cu"
#define AT_NAME at_b
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_PS PS_
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 48, 4))
#define AT_SCALE 0.14433756729740643f
#define AT_SPLIT 4
#include "attention.cu"
#define AP_NAME ap_b
#define AP_H 6
#define AP_KV 2
#define AP_D 48
#define AP_PS PS_
#define AP_KVQ 4
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 48, 4))
#define AP_OBF16 0
#define AP_SCALE 0.14433756729740643f
#include "attention_prefill.cu"

/* case C: fp8 (e4m3), H 4 over KV 2, D 32, 2 splits */
#define RK_NAME rk_c
#define RK_H 4
#define RK_KV 2
#define RK_D 32
#define RK_PS PS_
#define RK_KVQ IG_KVQ_E4M3
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 32, IG_KVQ_E4M3))
#include "rope_kv.cu"
#define AT_NAME at_c
#define AT_H 4
#define AT_KV 2
#define AT_D 32
#define AT_PS PS_
#define AT_KVQ IG_KVQ_E4M3
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 32, IG_KVQ_E4M3))
#define AT_SCALE 0.17677669529663687f
#define AT_SPLIT 2
#include "attention.cu"
#define AP_NAME ap_c
#define AP_H 4
#define AP_KV 2
#define AP_D 32
#define AP_PS PS_
#define AP_KVQ IG_KVQ_E4M3
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, PS_, 32, IG_KVQ_E4M3))
#define AP_OBF16 0
#define AP_SCALE 0.17677669529663687f
#include "attention_prefill.cu"

/* the GPU harness's f32-output prefill instances (tests/gpu/test_kvq.cuh), AP_KVBF16 left at its
 * default as there: quantized KV with f32 out must take the CUDA-core path on every arch */
#define AP_NAME apq_8_g2_d64_f32
#define AP_H 4
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVQ 8
#define AP_OBF16 0
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 16, 64, 8))
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME apq_4_g8_d16_f32
#define AP_H 8
#define AP_KV 1
#define AP_D 16
#define AP_PS 8
#define AP_KVQ 4
#define AP_OBF16 0
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, 8, 16, 4))
#define AP_SCALE 0.25f
#include "attention_prefill.cu"
#define AP_NAME apq_f8_g4_d64_f32
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVQ IG_KVQ_E4M3
#define AP_OBF16 0
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 16, 64, IG_KVQ_E4M3))
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME apq_8_bf16_tiles /* bf16 out: the tensor-core path is compiled in */
#define AP_H 4
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVQ 8
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 16, 64, 8))
#define AP_SCALE 0.125f
#include "attention_prefill.cu"

typedef void (*rk_fn)(int, const float *, const double *, const float *, const float *, float *, unsigned char *,
                      unsigned long long, const int *, const int *, const int *, int);
typedef void (*at_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                      int, float *);
typedef void (*ats_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                       int, float *, unsigned *, float *);
typedef void (*atr_fn)(int, const float *, const double *, const float *, const float *, unsigned char *, unsigned long long,
                       const int *, const int *, const int *, int, float *, unsigned *, float *);
typedef void (*apq_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                       int, float *, ig_tmap);
struct kcase {
    const char *name;
    rk_fn rk;
    at_fn at;
    apq_fn ap;
    ats_fn split;
    atr_fn split_rope;
    int H, KV, D, bits, nsplit;
    double scale;
};

static int g_fails;
static void expect(bool ok, const char *what, double err) {
    if (!ok) g_fails++;
    printf("%s %s (max err %.2e)\n", ok ? "ok  " : "FAIL", what, err);
}
static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float frand() {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* max |out - reference| over every (token, head): double softmax over kv_quant.h's rows of pool,
 * query q (rotated), output rotated back in double */
static double attn_err(const kcase &c, const std::vector<uint8_t> &pool, size_t page_bytes, size_t loff, const int *ptab,
                       int maxp, const std::vector<int> &pos, const std::vector<int> &seq, const std::vector<float> &q,
                       const std::vector<float> &out) {
    const int H = c.H, KV = c.KV, D = c.D, G = H / KV, B = D & -D;
    double err = 0;
    for (size_t t = 0; t < pos.size(); t++) {
        const int n = pos[t] + 1;
        for (int kh = 0; kh < KV; kh++) {
            std::vector<float> K((size_t)n * D), V((size_t)n * D), kp(D);
            for (int j = 0; j < n; j++) {
                const uint8_t *layer = &pool[ptab[seq[t] * maxp + j / PS_] * page_bytes + loff];
                cpukv::ig_kvq_load(layer, KV, PS_, D, c.bits, 0, kh, j % PS_, 1, &K[(size_t)j * D], kp.data());
                cpukv::ig_kvq_load(layer, KV, PS_, D, c.bits, 1, kh, j % PS_, 1, &V[(size_t)j * D], kp.data());
            }
            for (int h = kh * G; h < (kh + 1) * G; h++) {
                const float *qh = &q[(t * H + h) * D];
                std::vector<double> sc(n), o(D, 0.0);
                double mx = -1e300, l = 0;
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int i = 0; i < D; i++) s += (double)qh[i] * K[(size_t)j * D + i];
                    sc[j] = s * c.scale, mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j < n; j++) {
                    const double p = exp(sc[j] - mx);
                    l += p;
                    for (int i = 0; i < D; i++) o[i] += p * V[(size_t)j * D + i];
                }
                for (int i = 0; i < D; i++) o[i] /= l;
                for (int b0 = 0; b0 < D; b0 += B) /* R^T = S H */
                    for (int len = 1; len < B; len <<= 1)
                        for (int i = 0; i < B; i += 2 * len)
                            for (int j = i; j < i + len; j++) {
                                const double a = o[b0 + j], b = o[b0 + j + len];
                                o[b0 + j] = a + b, o[b0 + j + len] = a - b;
                            }
                for (int i = 0; i < D; i++) {
                    const double r = o[i] / sqrt((double)B) * (IG_KVQ_FLIP(i) ? -1 : 1);
                    const double e = fabs(out[(t * H + h) * D + i] - r);
                    err = e > err || e != e ? e : err;
                }
            }
        }
    }
    return err;
}

static void run_case(const kcase &c) {
    const int H = c.H, KV = c.KV, D = c.D, W = (H + 2 * KV) * D, MAXP = 4, NPAGES = 9;
    const size_t lb = IG_KVQ_LAYER_BYTES(KV, PS_, D, c.bits), pb = 2 * lb;
    const int ptab[8] = {7, 2, 5, 0, 3, 8, 1, 6};
    std::vector<uint8_t> pool(NPAGES * pb, 0xff), shadow(NPAGES * pb, 0xff);
    std::vector<double> invf(D / 2, 0.0); /* RoPE frequencies 0: the identity */
    const int steps[3][2][2] = {{{0, 20}, {0, 3}}, {{20, 21}, {3, 19}}, {{21, 22}, {19, 20}}};
    for (int st = 0; st < 3; st++) {
        std::vector<int> pos, seq;
        for (int s = 0; s < 2; s++)
            for (int p = steps[st][s][0]; p < steps[st][s][1]; p++) pos.push_back(p), seq.push_back(s);
        int T = (int)pos.size(), maxp = MAXP;
        std::vector<float> qkv((size_t)T * W), qo((size_t)T * H * D), o1(qo.size()), o2(qo.size()), o3(qo.size()), o4(qo.size());
        for (auto &v : qkv) v = 2.0f * frand();
        std::vector<float> ws((size_t)IG_AT_WS_FLOATS(T, H, D, c.nsplit));
        std::vector<unsigned> cnt((size_t)IG_AT_COUNTERS(T, KV), 0u);
        unsigned long long loff = lb;
        std::vector<uint8_t> fused;
        char what[200];
        if (st == 2) {
            emul_launch({(unsigned)KV, (unsigned)T, (unsigned)c.nsplit}, {IG_AT_BLOCK, 1, 1}, [&] {
                c.split_rope(T, qkv.data(), invf.data(), nullptr, nullptr, pool.data(), loff, pos.data(), seq.data(), ptab, maxp,
                             ws.data(), cnt.data(), o3.data());
            });
            fused = pool;
        }
        emul_launch({(unsigned)T, 1, 1}, {IG_RK_BLOCK(D), 1, 1}, [&] {
            c.rk(T, qkv.data(), invf.data(), nullptr, nullptr, qo.data(), pool.data(), loff, pos.data(), seq.data(), ptab, maxp);
        });
        emul_launch({(unsigned)KV, (unsigned)T, 1}, {IG_AT_BLOCK, 1, 1}, [&] {
            c.at(T, qo.data(), pool.data(), loff, pos.data(), seq.data(), ptab, maxp, o1.data());
        });
        emul_launch({(unsigned)KV, (unsigned)T, (unsigned)c.nsplit}, {IG_AT_BLOCK, 1, 1}, [&] {
            c.split(T, qo.data(), pool.data(), loff, pos.data(), seq.data(), ptab, maxp, ws.data(), cnt.data(), o2.data());
        });
        emul_launch({(unsigned)IG_AP_GRID_XH(H, 1), (unsigned)IG_AP_GRID_Y(T), 1}, {IG_AP_BLOCKH(1), 1, 1}, [&] {
            c.ap(T, qo.data(), pool.data(), loff, pos.data(), seq.data(), ptab, maxp, o4.data(), ig_tmap{}); /* no _flash_ws: quantized KV */
        });
        /* the CPU encoder on the same rows, in rope_kv.c's slot passes; q rotated */
        double qerr = 0;
        for (int pass = 0; pass < PS_; pass++)
            for (int t = 0; t < T; t++) {
                if (pos[t] % PS_ != pass) continue;
                uint8_t *layer = &shadow[ptab[seq[t] * MAXP + pos[t] / PS_] * pb + lb];
                for (int h = 0; h < KV; h++)
                    for (int kv01 = 0; kv01 < 2; kv01++) {
                        std::vector<float> x(&qkv[(size_t)t * W + (H + kv01 * KV + h) * D], &qkv[(size_t)t * W + (H + kv01 * KV + h) * D] + D);
                        cpukv::ig_kvq_rotate(x.data(), D);
                        if (kv01 == 0 && c.bits == 4) { /* as rope_kv.c: the best predictor */
                            std::vector<float> kp(D), tmp(D);
                            if (pass > 0) cpukv::ig_kvq_key_before(layer, KV, PS_, D, c.bits, h, pass, tmp.data(), kp.data());
                            cpukv::ig_kvq_store_key(layer, KV, PS_, D, c.bits, h, pass, x.data(), kp.data(), IG_KVQ_NPRED);
                        } else
                            cpukv::ig_kvq_store(layer, KV, PS_, D, c.bits, kv01, h, pass, x.data());
                    }
                for (int h = 0; h < H; h++) {
                    std::vector<float> x(&qkv[(size_t)t * W + h * D], &qkv[(size_t)t * W + h * D] + D);
                    cpukv::ig_kvq_rotate(x.data(), D);
                    for (int i = 0; i < D; i++) qerr = fmax(qerr, fabs(x[i] - qo[((size_t)t * H + h) * D + i]));
                }
            }
        snprintf(what, sizeof what, "%s step %d: rope_kv q rotated as kv_quant.h", c.name, st);
        expect(qerr == 0, what, qerr);
        size_t diff = 0;
        for (size_t i = 0; i < pool.size(); i++) diff += pool[i] != shadow[i];
        snprintf(what, sizeof what, "%s step %d: rope_kv pages = kv_quant.h's encoder (%zu bytes differ)", c.name, st, diff);
        expect(diff == 0, what, 0);
        if (st == 2) {
            diff = 0;
            for (size_t i = 0; i < pool.size(); i++) diff += pool[i] != fused[i];
            snprintf(what, sizeof what, "%s step 2: split_rope (fused) pages = rope_kv's (%zu bytes differ)", c.name, diff);
            expect(diff == 0, what, 0);
        }
        const struct { const char *k; const std::vector<float> *o; } outs[4] = {
            {"direct", &o1}, {"split", &o2}, {"split_rope (fused)", &o3}, {"prefill (CUDA cores)", &o4}};
        for (int k = 0; k < 4; k++) {
            if (k == 2 && st != 2) continue;
            const double e = attn_err(c, pool, pb, lb, ptab, MAXP, pos, seq, qo, *outs[k].o);
            snprintf(what, sizeof what, "%s step %d T=%d: attention %s vs dequantize-then-attend", c.name, st, T, outs[k].k);
            expect(e < 2e-4, what, e);
        }
    }
}

/* The harness's "mixed" prefill scenario (decode tokens, chunks, one sequence twice, pages in a
 * scattered order, every unreached row 0xff: NaN scales) on an f32-output prefill instance, vs
 * dequantize-then-attend in double. */
typedef void (*ap_fn)(int, const float *, const unsigned char *, unsigned long long, const int *, const int *, const int *,
                      int, float *, ig_tmap);
static void run_prefill_mixed(const char *name, ap_fn fn, int H, int KV, int D, int PS, int bits, double scale) {
    static const int segs[9][3] = {{2, 300, 1}, {3, 17, 1}, {4, 64, 1}, {5, 0, 1}, {0, 40, 100}, {6, 129, 3}, {1, 60, 4}, {7, 5, 1}, {3, 18, 2}};
    std::vector<int> pos, seq;
    for (const auto &sg : segs)
        for (int p = 0; p < sg[2]; p++) pos.push_back(sg[1] + p), seq.push_back(sg[0]);
    const int T = (int)pos.size(), nseq = 8, G = H / KV;
    std::vector<int> seqmax(nseq, -1);
    for (int t = 0; t < T; t++) seqmax[seq[t]] = pos[t] > seqmax[seq[t]] ? pos[t] : seqmax[seq[t]];
    const int maxp = 300 / PS + 2, npages = nseq * maxp + 1;
    const size_t lb = IG_KVQ_LAYER_BYTES(KV, PS, D, bits), pb = 2 * lb;
    std::vector<int> ptab((size_t)nseq * maxp, npages - 1);
    std::vector<uint8_t> pool((size_t)npages * pb, 0xff);
    int used = 0;
    for (int s = 0; s < nseq; s++) {
        for (int pg = 0; pg <= seqmax[s] / PS; pg++) ptab[(size_t)s * maxp + pg] = (used++ * 37) % (npages - 1);
        for (int j = 0; j <= seqmax[s]; j++) {
            uint8_t *layer = &pool[(size_t)ptab[(size_t)s * maxp + j / PS] * pb + lb];
            for (int kh = 0; kh < KV; kh++)
                for (int kv01 = 0; kv01 < 2; kv01++) {
                    std::vector<float> x(D), kp(D), tmp(D);
                    for (int i = 0; i < D; i++) x[i] = frand() * (kv01 ? 1.0f : 1.5f) + (kv01 ? 0.0f : 0.1f * (j % 7));
                    if (kv01 == 0 && IG_KVQ_KDELTA(bits)) {
                        if (j % PS > 0) cpukv::ig_kvq_key_before(layer, KV, PS, D, bits, kh, j % PS, tmp.data(), kp.data());
                        cpukv::ig_kvq_store_key(layer, KV, PS, D, bits, kh, j % PS, x.data(), kp.data(), IG_KVQ_NPRED);
                    } else
                        cpukv::ig_kvq_store(layer, KV, PS, D, bits, kv01, kh, j % PS, x.data());
                }
        }
    }
    std::vector<float> q((size_t)T * H * D), out(q.size());
    for (auto &v : q) v = 2.0f * frand();
    emul_launch({(unsigned)IG_AP_GRID_XH(H, 1), (unsigned)IG_AP_GRID_Y(T), 1}, {IG_AP_BLOCKH(1), 1, 1},
                [&] { fn(T, q.data(), pool.data(), lb, pos.data(), seq.data(), ptab.data(), maxp, out.data(), ig_tmap{}); });
    double err = 0;
    const int B = D & -D;
    for (int t = 0; t < T; t++) {
        const int n = pos[t] + 1;
        for (int h = 0; h < H; h++) {
            std::vector<float> K((size_t)n * D), V((size_t)n * D), kp(D);
            std::vector<double> sc(n), o(D, 0.0);
            double mx = -1e300, l = 0;
            for (int j = 0; j < n; j++) {
                const uint8_t *layer = &pool[(size_t)ptab[(size_t)seq[t] * maxp + j / PS] * pb + lb];
                cpukv::ig_kvq_load(layer, KV, PS, D, bits, 0, h / G, j % PS, 1, &K[(size_t)j * D], kp.data());
                cpukv::ig_kvq_load(layer, KV, PS, D, bits, 1, h / G, j % PS, 1, &V[(size_t)j * D], kp.data());
                double s = 0;
                for (int i = 0; i < D; i++) s += (double)q[((size_t)t * H + h) * D + i] * K[(size_t)j * D + i];
                sc[j] = s * scale, mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int j = 0; j < n; j++) {
                const double p = exp(sc[j] - mx);
                l += p;
                for (int i = 0; i < D; i++) o[i] += p * V[(size_t)j * D + i];
            }
            for (int b0 = 0; b0 < D; b0 += B)
                for (int len = 1; len < B; len <<= 1)
                    for (int i = 0; i < B; i += 2 * len)
                        for (int j = i; j < i + len; j++) {
                            const double a = o[b0 + j], b = o[b0 + j + len];
                            o[b0 + j] = a + b, o[b0 + j + len] = a - b;
                        }
            for (int i = 0; i < D; i++) {
                const double r = o[i] / l / sqrt((double)B) * (IG_KVQ_FLIP(i) ? -1 : 1);
                const double e = fabs(out[((size_t)t * H + h) * D + i] - r);
                err = e > err || e != e ? e : err;
            }
        }
    }
    char what[200];
    snprintf(what, sizeof what, "%s mixed T=%d: prefill (CUDA cores) vs dequantize-then-attend", name, T);
    expect(err < 2e-5, what, err);
}

int main() {
    /* an f32-output instance of quantized KV never rounds its tiles to bf16, AP_KVBF16 or not */
    expect(!apq_8_g2_d64_f32_has_tiles16 && !apq_4_g8_d16_f32_has_tiles16 && apq_8_bf16_tiles_has_tiles16,
           "prefill instances: tensor-core path only for a 16-bit output over quantized KV", 0);
    run_prefill_mixed("apq_8_g2_d64_f32", apq_8_g2_d64_f32, 4, 2, 64, 16, 8, 0.125);
    run_prefill_mixed("apq_4_g8_d16_f32", apq_4_g8_d16_f32, 8, 1, 16, 8, 4, 0.25);
    run_prefill_mixed("apq_f8_g4_d64_f32", apq_f8_g4_d64_f32, 8, 2, 64, 16, IG_KVQ_E4M3, 0.125);
    const kcase cases[] = {
        {"int8 H8 KV2 D64", (rk_fn)rk_a, (at_fn)at_a, (apq_fn)ap_a, (ats_fn)at_a_split, (atr_fn)at_a_split_rope, 8, 2, 64, 8, 3, 0.125},
        {"uint4 H6 KV2 D48", (rk_fn)rk_b, (at_fn)at_b, (apq_fn)ap_b, (ats_fn)at_b_split, (atr_fn)at_b_split_rope, 6, 2, 48, 4, 4,
         0.14433756729740643},
        {"fp8 H4 KV2 D32", (rk_fn)rk_c, (at_fn)at_c, (apq_fn)ap_c, (ats_fn)at_c_split, (atr_fn)at_c_split_rope, 4, 2, 32, IG_KVQ_E4M3, 2,
         0.17677669529663687},
    };
    for (const auto &c : cases) run_case(c);
    printf("test_kv_quant_kernels: %s\n", g_fails ? "FAILED" : "ok");
    return g_fails ? 1 : 0;
}
