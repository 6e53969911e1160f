/* test_kvq.cuh — quantized KV cache cases of the CUDA harness (included by test_cuda_kernels.cu,
 * after its helpers): rope_kv writing int8 / uint4 pages (templates/cuda/kv_quant.cuh) against the
 * CPU format's own encoder (templates/cpu/kv_quant.h, compiled here for the host in a namespace),
 * attention over those pages (direct, split, split with the rope fused in) and the tensor-core
 * prefill against a host reference of dequantize-then-attend (double softmax, output rotated back
 * in double), and the attention time per token at 8k context for bf16 / int8 / uint4 KV.
 *
 * Byte checks: V rows never pass through RoPE, so their bytes must equal the CPU encoder's on the
 * same input in every case; a second run with all RoPE frequencies zero (cos 1, sin 0: RoPE is the
 * identity on both sides) makes K rows byte-comparable too (cases without the q/k norm, whose
 * warp-order sum differs from the CPU's by an ulp), which covers 4-bit keys delta-coded across
 * three steps and page crossings. With real frequencies K is checked after dequantization: within
 * one scale step of the rotated reference key (each row's error is bounded by its own scale, delta
 * coding does not accumulate). */

/* ---- instances: two layers per page, tests on layer 1; TPS-slot pages */
#define KVQ_CASE(P, H_, KV_, D_, BITS_, QKN_, OB_, SPLIT_) \
    enum { P##_H = H_, P##_KV = KV_, P##_D = D_, P##_BITS = BITS_, P##_QKN = QKN_, P##_OB = OB_, P##_SPLIT = SPLIT_ };
KVQ_CASE(Q8a, 8, 2, 64, 8, 1, 0, 3)
KVQ_CASE(Q8b, 24, 8, 128, 8, 0, 1, 16)
KVQ_CASE(Q8c, 4, 4, 16, 8, 0, 0, 4)
KVQ_CASE(Q4a, 8, 2, 64, 4, 1, 0, 3)
KVQ_CASE(Q4b, 6, 2, 48, 4, 0, 1, 4)
KVQ_CASE(Q4c, 8, 1, 128, 4, 0, 1, 8)
KVQ_CASE(Q4d, 8, 2, 16, 4, 0, 0, 4)
KVQ_CASE(F8a, 8, 2, 128, IG_KVQ_E4M3, 0, 1, 4)
KVQ_CASE(F8b, 4, 4, 64, IG_KVQ_E4M3, 1, 0, 3)

#define RK_NAME rkq_F8a
#define RK_H 8
#define RK_KV 2
#define RK_D 128
#define RK_PS TPS
#define RK_KVQ IG_KVQ_E4M3
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 128, IG_KVQ_E4M3))
#include "rope_kv.cu"
#define AT_NAME atq_F8a
#define AT_H 8
#define AT_KV 2
#define AT_D 128
#define AT_PS TPS
#define AT_KVQ IG_KVQ_E4M3
#define AT_OBF16 1
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 128, IG_KVQ_E4M3))
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 4
#include "attention.cu"
#define RK_NAME rkq_F8b
#define RK_H 4
#define RK_KV 4
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ IG_KVQ_E4M3
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, TPS, 64, IG_KVQ_E4M3))
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME atq_F8b
#define AT_H 4
#define AT_KV 4
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ IG_KVQ_E4M3
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, TPS, 64, IG_KVQ_E4M3))
#define AT_QKNORM 1
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#include "attention.cu"

#define RK_NAME rkq_Q8a
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 8))
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME atq_Q8a
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 8))
#define AT_QKNORM 1
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#include "attention.cu"

#define RK_NAME rkq_Q8b
#define RK_H 24
#define RK_KV 8
#define RK_D 128
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(8, TPS, 128, 8))
#include "rope_kv.cu"
#define AT_NAME atq_Q8b
#define AT_H 24
#define AT_KV 8
#define AT_D 128
#define AT_PS TPS
#define AT_KVQ 8
#define AT_OBF16 1
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(8, TPS, 128, 8))
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 16
#include "attention.cu"

#define RK_NAME rkq_Q8c
#define RK_H 4
#define RK_KV 4
#define RK_D 16
#define RK_PS TPS
#define RK_KVQ 8
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, TPS, 16, 8))
#include "rope_kv.cu"
#define AT_NAME atq_Q8c
#define AT_H 4
#define AT_KV 4
#define AT_D 16
#define AT_PS TPS
#define AT_KVQ 8
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, TPS, 16, 8))
#define AT_SCALE 0.25f
#define AT_SPLIT 4
#include "attention.cu"

#define RK_NAME rkq_Q4a
#define RK_H 8
#define RK_KV 2
#define RK_D 64
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 4))
#define RK_QKNORM 1
#include "rope_kv.cu"
#define AT_NAME atq_Q4a
#define AT_H 8
#define AT_KV 2
#define AT_D 64
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 64, 4))
#define AT_QKNORM 1
#define AT_SCALE 0.125f
#define AT_SPLIT 3
#include "attention.cu"

#define RK_NAME rkq_Q4b
#define RK_H 6
#define RK_KV 2
#define RK_D 48
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 48, 4))
#include "rope_kv.cu"
#define AT_NAME atq_Q4b
#define AT_H 6
#define AT_KV 2
#define AT_D 48
#define AT_PS TPS
#define AT_KVQ 4
#define AT_OBF16 1
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 48, 4))
#define AT_SCALE 0.14433756729740643f
#define AT_SPLIT 4
#include "attention.cu"

#define RK_NAME rkq_Q4c
#define RK_H 8
#define RK_KV 1
#define RK_D 128
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 128, 4))
#include "rope_kv.cu"
#define AT_NAME atq_Q4c
#define AT_H 8
#define AT_KV 1
#define AT_D 128
#define AT_PS TPS
#define AT_KVQ 4
#define AT_OBF16 1
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, TPS, 128, 4))
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT 8
#include "attention.cu"

#define RK_NAME rkq_Q4d
#define RK_H 8
#define RK_KV 2
#define RK_D 16
#define RK_PS TPS
#define RK_KVQ 4
#define RK_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 16, 4))
#include "rope_kv.cu"
#define AT_NAME atq_Q4d
#define AT_H 8
#define AT_KV 2
#define AT_D 16
#define AT_PS TPS
#define AT_KVQ 4
#define AT_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, TPS, 16, 4))
#define AT_SCALE 0.25f
#define AT_SPLIT 4
#include "attention.cu"

/* prefill: (H, KV, D, bits, bf16 out, page size); PS 128 > the 64-key tile carries the delta chain
 * from tile to tile */
#define APQ_INST(N, H_, KV_, D_, BITS_, OB_, PS_, SC_) \
    enum { N##_H = H_, N##_KV = KV_, N##_D = D_, N##_BITS = BITS_, N##_OB = OB_, N##_PS = PS_ };
#define AP_NAME apq_8_g4_d128
#define AP_H 16
#define AP_KV 4
#define AP_D 128
#define AP_PS 16
#define AP_KVQ 8
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, 16, 128, 8))
#define AP_SCALE 0.08838834764831845f
#include "attention_prefill.cu"
#define AP_NAME apq_f8_g4_d128
#define AP_H 16
#define AP_KV 4
#define AP_D 128
#define AP_PS 16
#define AP_KVQ IG_KVQ_E4M3
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(4, 16, 128, IG_KVQ_E4M3))
#define AP_SCALE 0.08838834764831845f
#include "attention_prefill.cu"
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
#define AP_NAME apq_8_g8_d16
#define AP_H 8
#define AP_KV 1
#define AP_D 16
#define AP_PS 16
#define AP_KVQ 8
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(1, 16, 16, 8))
#define AP_SCALE 0.25f
#include "attention_prefill.cu"
#define AP_NAME apq_4_g4_d64
#define AP_H 8
#define AP_KV 2
#define AP_D 64
#define AP_PS 16
#define AP_KVQ 4
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 16, 64, 4))
#define AP_SCALE 0.125f
#include "attention_prefill.cu"
#define AP_NAME apq_4_g1_d48
#define AP_H 2
#define AP_KV 2
#define AP_D 48
#define AP_PS 32
#define AP_KVQ 4
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 32, 48, 4))
#define AP_SCALE 0.14433756729740643f
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
#define AP_NAME apq_4_g2_d128_ps128
#define AP_H 4
#define AP_KV 2
#define AP_D 128
#define AP_PS 128
#define AP_KVQ 4
#define AP_OBF16 1
#define AP_PAGE_BYTES (2 * IG_KVQ_LAYER_BYTES(2, 128, 128, 4))
#define AP_SCALE 0.08838834764831845f
#include "attention_prefill.cu"

/* timing and long contexts: Llama-3-8B-like decode attention over int8 / uint4 KV, 32 layers per
 * page (as at_perf), and with a 4096-key sliding window (bf16 / int8 / uint4) */
#define AT_NAME at_perf_q8
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_KVQ 8
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 16, 128, 8) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_perf_q4
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_KVQ 4
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 16, 128, 4) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_perf_f8 /* fp8 (e4m3) KV: timed only (random bytes hold NaN codes) */
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_KVQ IG_KVQ_E4M3
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 16, 128, IG_KVQ_E4M3) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_perf_nopf /* bf16 without the next tile's L2 prefetches (attn_decode.cuh), for the bench */
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_PAGE_BYTES (2ull * 8 * 16 * 128 * 2 * PERF_LAYERS)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#define AT_L2PF 0
#include "attention.cu"
#define AT_NAME at_perf_w
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_PAGE_BYTES (2ull * 8 * 16 * 128 * 2 * PERF_LAYERS)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#define AT_WINDOW 4096
#include "attention.cu"
#define AT_NAME at_perf_q8w
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_KVQ 8
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 16, 128, 8) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#define AT_WINDOW 4096
#include "attention.cu"
#define AT_NAME at_perf_q4w
#define AT_H 32
#define AT_KV 8
#define AT_D 128
#define AT_PS 16
#define AT_KVQ 4
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 16, 128, 4) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.08838834764831845f
#define AT_SPLIT PERF_SPLIT
#define AT_WINDOW 4096
#include "attention.cu"
/* the same at Llama-3.2-1B's shape (H 32, KV 8, D 64) with the engine's pages of 64 slots: bf16,
 * int8, uint4, fp8 (no window) */
#define AT_NAME at_p1b
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 64
#define AT_PAGE_BYTES (2ull * 8 * 64 * 64 * 2 * PERF_LAYERS)
#define AT_KVBF16 1
#define AT_OBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_p1b_q8
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 64
#define AT_KVQ 8
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 64, 64, 8) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_p1b_q4
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 64
#define AT_KVQ 4
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 64, 64, 4) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"
#define AT_NAME at_p1b_f8
#define AT_H 32
#define AT_KV 8
#define AT_D 64
#define AT_PS 64
#define AT_KVQ IG_KVQ_E4M3
#define AT_PAGE_BYTES (IG_KVQ_LAYER_BYTES(8, 64, 64, IG_KVQ_E4M3) * PERF_LAYERS)
#define AT_OBF16 1
#define AT_SCALE 0.125f
#define AT_SPLIT PERF_SPLIT
#include "attention.cu"

/* ---- the CPU format itself (host code, C compiled as C++ in a namespace; the system headers it
 * includes come first so their guards keep them out of the namespace) */
#undef IG_KVQ_LAYER_BYTES
#undef IG_KVQ_KDELTA
#undef IG_KVQ_FLIP
namespace cpukv {
#include "../../templates/cpu/kv_quant.h"
}
#undef IG_INLINE
#undef IG_RESTRICT
static size_t cpukv_layer_bytes(int kv, int ps, int d, int bits) { return (size_t)IG_KVQ_LAYER_BYTES(kv, ps, d, bits); }

/* Row (kv01, kh, slot) of the layer part at `layer` as the CPU reads it (delta keys: the page walked
 * from slot 0). */
static void hq_row(const uint8_t *layer, int KV, int PS, int D, int bits, int kv01, int kh, int slot, float *out) {
    std::vector<float> kp(D);
    if (kv01 == 0 && IG_KVQ_KDELTA(bits))
        for (int j = 0; j <= slot; j++) cpukv::ig_kvq_load(layer, KV, PS, D, bits, 0, kh, j, 1, out, kp.data());
    else
        cpukv::ig_kvq_load(layer, KV, PS, D, bits, kv01, kh, slot, 1, out, kp.data());
}
/* Stores rotated row x as rope_kv.c does (delta keys against the page's stored earlier slots). */
static void hq_put(uint8_t *layer, int KV, int PS, int D, int bits, int kv01, int kh, int slot, const float *x) {
    std::vector<float> kp(D), row(D);
    if (kv01 == 0 && IG_KVQ_KDELTA(bits) && slot > 0) { /* the predictor search, as the kernels */
        cpukv::ig_kvq_key_before(layer, KV, PS, D, bits, kh, slot, row.data(), kp.data());
        cpukv::ig_kvq_store_key(layer, KV, PS, D, bits, kh, slot, x, kp.data(), IG_KVQ_NPRED);
        return;
    }
    cpukv::ig_kvq_store(layer, KV, PS, D, bits, kv01, kh, slot, x);
}
/* The bytes of row (kv01, r) of a layer part: codes, scale, zero point, into out (RB + 3 bytes). */
static void hq_row_bytes(const uint8_t *layer, int KV, int PS, int D, int bits, int kv01, int r, uint8_t *out) {
    const size_t rb = (size_t)D * IG_KVQ_BITS(bits) / 8, n = (size_t)KV * PS;
    memcpy(out, layer + (kv01 * n + r) * rb, rb);
    memcpy(out + rb, layer + 2 * n * rb + 2 * (kv01 * n + r), 2);
    out[rb + 2] = layer[2 * n * rb + 4 * n + kv01 * n + r];
}
/* R^T in double (x <- H x, then the sign flips), for the references. */
static void hq_unrotate_d(double *x, int D) {
    const int B = D & -D;
    for (int b0 = 0; b0 < D; b0 += B) {
        double *v = x + b0;
        for (int len = 1; len < B; len <<= 1)
            for (int i = 0; i < B; i += 2 * len)
                for (int j = i; j < i + len; j++) {
                    double a = v[j], c = v[j + len];
                    v[j] = a + c, v[j + len] = a - c;
                }
        for (int i = 0; i < B; i++) v[i] /= sqrt((double)B);
    }
    for (int i = 0; i < D; i++)
        if (IG_KVQ_FLIP(i)) x[i] = -x[i];
}
/* Attention reference of one (token, head) over dequantized rows K[j][D], V[j][D] (j < n) with the
 * rotated query qh: ref (rotated back) and a bound tol. tol_r: the rotated-domain bound per
 * element (bf16 tiles: the prefill's mma rounding of q, P and K / V, as ap_ref's); R^T mixes a
 * block's errors, so the bound after it is the block's sum over sqrt(B); then the output rounding. */
static void hq_attn_ref(const float *K, const float *V, int n, int D, double scale, const float *qh, bool tiles16,
                        bool ob, double *ref, double *tol) {
    std::vector<double> sc(n), qk(n), o(D, 0.0), av(D, 0.0), tr(D);
    double mx = -1e300, l = 0, es_max = 0;
    for (int j = 0; j < n; j++) {
        double s = 0, a = 0;
        for (int i = 0; i < D; i++) s += (double)qh[i] * K[(size_t)j * D + i], a += fabs((double)qh[i] * K[(size_t)j * D + i]);
        sc[j] = s * scale, qk[j] = a * scale;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    for (int j = 0; j < n; j++) sc[j] = exp(sc[j] - mx), l += sc[j], es_max = qk[j] / 256 > es_max ? qk[j] / 256 : es_max;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < D; i++) o[i] += sc[j] * V[(size_t)j * D + i], av[i] += sc[j] * fabs(V[(size_t)j * D + i]);
    for (int i = 0; i < D; i++) {
        ref[i] = o[i] / l;
        tr[i] = 2e-5 + 1e-5 * fabs(ref[i]);
        if (tiles16) tr[i] += av[i] / l / 256 + es_max * (av[i] / l + fabs(ref[i]));
    }
    hq_unrotate_d(ref, D);
    const int B = D & -D;
    for (int b0 = 0; b0 < D; b0 += B) {
        double s = 0;
        for (int i = b0; i < b0 + B; i++) s += tr[i];
        for (int i = b0; i < b0 + B; i++) tol[i] = s / sqrt((double)B) + 1e-5 + (ob ? fabs(ref[i]) / 256 : 0);
    }
}

/* ---- rope_kv + attention over quantized pages */

struct kvq_case {
    const char *name;
    const void *rk, *at, *at_split, *at_split_rope;
    int H, KV, D, bits, qkn, ob, split;
    float scale;
};
#define KQC(P, name, scale)                                                                                     \
    { name, (const void *)rkq_##P, (const void *)atq_##P, (const void *)atq_##P##_split,                     \
      (const void *)atq_##P##_split_rope, P##_H, P##_KV, P##_D, P##_BITS, P##_QKN, P##_OB, P##_SPLIT, scale }

/* The three steps of test_attn (two sequences, prefill / mixed / decode with the fused kernel), on
 * quantized pages; zero_freq: all RoPE frequencies 0 (the K byte check). A host shadow pool is
 * written by the CPU encoder in the CPU's order (slot passes) from the host's rope. */
static void test_attn_q(ctx *c, const kvq_case &a, bool zero_freq) {
    const int H = a.H, KV = a.KV, D = a.D, B = a.bits, MAXP = 4, NPAGES = 9, W = (H + 2 * KV) * D;
    const size_t layer_bytes = cpukv_layer_bytes(KV, TPS, D, B), page_bytes = 2 * layer_bytes, rb = (size_t)D * IG_KVQ_BITS(B) / 8;
    const int ptab[2 * 4] = {7, 2, 5, 0, 3, 8, 1, 6};
    const char *fq = zero_freq ? " freq 0" : "";
    uint8_t *dpool;
    int *dptab;
    CK(cudaMalloc(&dpool, NPAGES * page_bytes));
    CK(cudaMemset(dpool, 0xff, NPAGES * page_bytes));
    std::vector<uint8_t> shadow(NPAGES * page_bytes, 0xff);
    CK(cudaMalloc(&dptab, sizeof ptab));
    CK(cudaMemcpy(dptab, ptab, sizeof ptab, cudaMemcpyHostToDevice));
    std::vector<float> qn, kn;
    fill(c, qn, D, false), fill(c, kn, D, false);
    for (int i = 0; i < D; i++) qn[i] = 1 + 0.5f * qn[i], kn[i] = 1 + 0.5f * kn[i];
    float *dqn = (float *)upload(qn, false), *dkn = (float *)upload(kn, false);
    std::vector<double> invf(D / 2);
    for (int i = 0; i < D / 2; i++) invf[i] = zero_freq ? 0.0 : pow(10000.0, -2.0 * i / D);
    double *dinvf;
    CK(cudaMalloc(&dinvf, D / 2 * 8));
    CK(cudaMemcpy(dinvf, invf.data(), D / 2 * 8, cudaMemcpyHostToDevice));
    int steps[3][2][2] = {{{0, 30}, {0, 5}}, {{30, 31}, {5, 41}}, {{31, 32}, {41, 42}}};
    for (int st = 0; st < 3; st++) {
        std::vector<int> pos, seq;
        for (int s = 0; s < 2; s++)
            for (int p = steps[st][s][0]; p < steps[st][s][1]; p++) pos.push_back(p), seq.push_back(s);
        int T = (int)pos.size();
        std::vector<float> qkv;
        fill(c, qkv, (size_t)T * W, false, 2.0f);
        float *dqkv = (float *)upload(qkv, false), *dqo, *dws;
        int *dpos, *dseq;
        void *dout, *dout2, *dout3 = NULL;
        CK(cudaMalloc(&dqo, (size_t)T * H * D * 4));
        CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
        CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&dout, (size_t)T * H * D * 4)); CK(cudaMalloc(&dout2, (size_t)T * H * D * 4));
        CK(cudaMalloc(&dws, IG_AT_WS_FLOATS(T, H, D, a.split) * 4));
        unsigned *dcnt;
        CK(cudaMalloc(&dcnt, IG_AT_COUNTERS(T, KV) * 4));
        CK(cudaMemset(dcnt, 0, IG_AT_COUNTERS(T, KV) * 4));
        unsigned long long loff = layer_bytes;
        int maxp = MAXP;
        std::vector<uint8_t> pool_fused;
        if (st == 2) { /* decode step: the fused kernel writes the rows first */
            CK(cudaMalloc(&dout3, (size_t)T * H * D * 4));
            void *args[] = {&T, &dqkv, &dinvf, &dqn, &dkn, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dws, &dcnt, &dout3};
            launch(a.at_split_rope, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, a.split)), dim3(IG_AT_BLOCK),
                   IG_AT_SMEM(H, KV, D), args);
            CK(cudaDeviceSynchronize());
            pool_fused.resize(NPAGES * page_bytes);
            CK(cudaMemcpy(pool_fused.data(), dpool, pool_fused.size(), cudaMemcpyDeviceToHost));
        }
        {
            void *args[] = {&T, &dqkv, &dinvf, &dqn, &dkn, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp};
            launch(a.rk, dim3(IG_RK_GRID_X(T, H, KV), IG_RK_GRID_Y(T)), dim3(IG_RK_BLOCK(D)), IG_RK_SMEM(T), args);
            void *args1[] = {&T, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dout};
            launch(a.at, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), 1), dim3(IG_AT_BLOCK), IG_AT_SMEM(H, KV, D), args1);
            void *args2[] = {&T, &dqo, &dpool, &loff, &dpos, &dseq, &dptab, &maxp, &dws, &dcnt, &dout2};
            for (int rep = 0; rep < 2; rep++)
                launch(a.at_split, dim3(IG_AT_GRID_X(T, KV), IG_AT_GRID_Y(T), IG_AT_GRID_Z(T, a.split)), dim3(IG_AT_BLOCK),
                       IG_AT_SMEM(H, KV, D), args2);
        }
        CK(cudaDeviceSynchronize());
        std::vector<float> qo = download(dqo, (size_t)T * H * D, false);
        std::vector<uint8_t> pool(NPAGES * page_bytes);
        CK(cudaMemcpy(pool.data(), dpool, pool.size(), cudaMemcpyDeviceToHost));
        /* host rope (double angles rounded to f32 cos / sin as the kernels), then the CPU rotation */
        auto rope_ref = [&](int t, int hh, float *r) {
            const float *v = &qkv[(size_t)t * W + hh * D];
            const float *g = hh < H ? qn.data() : kn.data();
            const bool nrm = a.qkn && hh < H + KV;
            double s = 1, x[512];
            if (nrm) {
                double ss = 0;
                for (int i = 0; i < D; i++) ss += (double)v[i] * v[i];
                s = 1 / sqrt(ss / D + 1e-6);
            }
            for (int i = 0; i < D / 2; i++) {
                double x0 = v[i] * s, x1 = v[i + D / 2] * s;
                if (nrm) x0 *= g[i], x1 *= g[i + D / 2];
                if (hh < H + KV) {
                    double an = pos[t] * invf[i], cs = (float)cos(an), sn = (float)sin(an);
                    x[i] = x0 * cs - x1 * sn, x[i + D / 2] = x1 * cs + x0 * sn;
                } else {
                    x[i] = v[i], x[i + D / 2] = v[i + D / 2];
                }
            }
            for (int i = 0; i < D; i++) r[i] = (float)x[i];
            cpukv::ig_kvq_rotate(r, D);
        };
        /* the shadow pool, in slot passes as rope_kv.c */
        for (int pass = 0; pass < TPS; pass++)
            for (int t = 0; t < T; t++) {
                if (pos[t] % TPS != pass) continue;
                uint8_t *layer = &shadow[ptab[seq[t] * MAXP + pos[t] / TPS] * page_bytes + layer_bytes];
                float r[512];
                for (int h = 0; h < KV; h++) {
                    rope_ref(t, H + h, r), hq_put(layer, KV, TPS, D, B, 0, h, pass, r);
                    rope_ref(t, H + KV + h, r), hq_put(layer, KV, TPS, D, B, 1, h, pass, r);
                }
            }
        char what[200];
        checker kq, kk, kv;
        snprintf(what, sizeof what, "rope_kv q (rotated) %s%s step %d T=%d", a.name, fq, st, T);
        chk_init(&kq, what);
        char wk[200], wv[200];
        const bool kbytes = zero_freq && !a.qkn;
        snprintf(wk, sizeof wk, "rope_kv K %s %s%s step %d", kbytes ? "bytes = CPU encoder" : "dequantized", a.name, fq, st);
        snprintf(wv, sizeof wv, "rope_kv V bytes = CPU encoder %s%s step %d", a.name, fq, st);
        chk_init(&kk, wk), chk_init(&kv, wv);
        for (int t = 0; t < T; t++) {
            const size_t lo = ptab[seq[t] * MAXP + pos[t] / TPS] * page_bytes + layer_bytes;
            const int slot = pos[t] % TPS;
            float r[512];
            for (int h = 0; h < H; h++) {
                rope_ref(t, h, r);
                for (int i = 0; i < D; i++)
                    chk(&kq, ((long)t * H + h) * D + i, qo[((size_t)t * H + h) * D + i], r[i], 1e-4 * (1 + fabs(r[i])));
            }
            for (int h = 0; h < KV; h++) {
                uint8_t g[300], w[300];
                for (int kv01 = 0; kv01 < 2; kv01++) {
                    if (kv01 == 1 || kbytes) {
                        hq_row_bytes(&pool[lo], KV, TPS, D, B, kv01, h * TPS + slot, g);
                        hq_row_bytes(&shadow[lo], KV, TPS, D, B, kv01, h * TPS + slot, w);
                        for (size_t i = 0; i < rb + 3; i++)
                            chk(kv01 ? &kv : &kk, ((long)t * KV + h) * 300 + (long)i, g[i], w[i], 0);
                        continue;
                    }
                    float got[512];
                    rope_ref(t, H + h, r);
                    hq_row(&pool[lo], KV, TPS, D, B, 0, h, slot, got);
                    uint16_t hs;
                    memcpy(&hs, &pool[lo + 2 * (size_t)KV * TPS * rb + 2 * ((size_t)h * TPS + slot)], 2);
                    const double s = cpukv::ig_f16_to_f32(hs);
                    /* int8 / uint4: within a scale step; fp8: half an e4m3 step, 2^-4 relative (2^-9 s below 2^-6 s) */
                    for (int i = 0; i < D; i++)
                        chk(&kk, ((long)t * KV + h) * D + i, got[i], r[i],
                            (B == IG_KVQ_E4M3 ? fabs(r[i]) / 16 + 1.01 * s / 512 : 1.01 * s) + 1e-5 * (1 + fabs(r[i])));
                }
            }
        }
        chk_done(c, &kq), chk_done(c, &kk), chk_done(c, &kv);
        if (st == 2) { /* rope_kv rewrote the fused kernel's rows: the same bytes */
            checker kf;
            snprintf(what, sizeof what, "split_rope (fused) pool bytes = rope_kv's %s%s", a.name, fq);
            chk_init(&kf, what);
            for (size_t i = 0; i < pool.size(); i++) chk(&kf, (long)i, pool_fused[i], pool[i], 0);
            chk_done(c, &kf);
        }
        /* attention: dequantize-then-attend over the device's pages and the device's q */
        std::vector<float> o1 = download(dout, (size_t)T * H * D, a.ob), o2 = download(dout2, (size_t)T * H * D, a.ob), o3;
        if (dout3) o3 = download(dout3, (size_t)T * H * D, a.ob);
        checker k1, k2, k3;
        char w1[200], w2[200], w3[200];
        snprintf(w1, sizeof w1, "attention %s%s step %d T=%d", a.name, fq, st, T);
        snprintf(w2, sizeof w2, "attention split%d %s%s step %d T=%d", a.split, a.name, fq, st, T);
        snprintf(w3, sizeof w3, "attention split_rope (fused) %s%s step %d T=%d", a.name, fq, st, T);
        chk_init(&k1, w1), chk_init(&k2, w2), chk_init(&k3, w3);
        const int G = H / KV;
        std::vector<double> ref(D), tol(D);
        for (int t = 0; t < T; t++) {
            const int n = pos[t] + 1;
            for (int kh = 0; kh < KV; kh++) {
                std::vector<float> K((size_t)n * D), V((size_t)n * D), kp(D);
                for (int j = 0; j < n; j++) {
                    const uint8_t *layer = &pool[ptab[seq[t] * MAXP + j / TPS] * page_bytes + layer_bytes];
                    cpukv::ig_kvq_load(layer, KV, TPS, D, B, 0, kh, j % TPS, 1, &K[(size_t)j * D], kp.data());
                    cpukv::ig_kvq_load(layer, KV, TPS, D, B, 1, kh, j % TPS, 1, &V[(size_t)j * D], kp.data());
                }
                for (int h = kh * G; h < (kh + 1) * G; h++) {
                    hq_attn_ref(K.data(), V.data(), n, D, a.scale, &qo[((size_t)t * H + h) * D], false, a.ob, ref.data(),
                                tol.data());
                    for (int i = 0; i < D; i++) {
                        size_t idx = ((size_t)t * H + h) * D + i;
                        chk(&k1, (long)idx, o1[idx], ref[i], tol[i]);
                        chk(&k2, (long)idx, o2[idx], ref[i], tol[i]);
                        if (dout3) chk(&k3, (long)idx, o3[idx], ref[i], tol[i]);
                    }
                }
            }
        }
        chk_done(c, &k1), chk_done(c, &k2);
        if (dout3) {
            chk_done(c, &k3);
            CK(cudaFree(dout3));
        }
        CK(cudaFree(dqkv)); CK(cudaFree(dqo)); CK(cudaFree(dpos)); CK(cudaFree(dseq));
        CK(cudaFree(dout)); CK(cudaFree(dout2)); CK(cudaFree(dws)); CK(cudaFree(dcnt));
    }
    CK(cudaFree(dpool)); CK(cudaFree(dptab)); CK(cudaFree(dqn)); CK(cudaFree(dkn)); CK(cudaFree(dinvf));
}

/* ---- attention_prefill over quantized pages */

struct apq_case {
    const char *name;
    const void *fn;
    int H, KV, D, bits, ob, ps;
    float scale;
};
#define APQ(fn, H, KV, D, bits, ob, ps, scale) { #fn, (const void *)fn, H, KV, D, bits, ob, ps, scale }

/* test_ap's scenario on quantized pages: every position a sequence reaches gets random rotated-
 * domain K / V rows through the CPU encoder (slot order; everything else 0xff: NaN scales). */
static void test_ap_q(ctx *c, const apq_case &a, const ap_scn &sc) {
    char what[200];
    std::vector<int> pos, seq;
    for (int i = 0; i < sc.nseg; i++)
        for (int p = 0; p < sc.seg[i].n; p++) pos.push_back(sc.seg[i].start + p), seq.push_back(sc.seg[i].seq);
    const int T = (int)pos.size(), H = a.H, KV = a.KV, D = a.D, PS = a.ps, B = a.bits, G = H / KV;
    snprintf(what, sizeof what, "attention_prefill %s %s T=%d", a.name, sc.name, T);
    if (!sel(what)) return;
    int nseq = 0, maxpos = 0;
    for (int t = 0; t < T; t++) nseq = seq[t] + 1 > nseq ? seq[t] + 1 : nseq, maxpos = pos[t] > maxpos ? pos[t] : maxpos;
    std::vector<int> seqmax(nseq, -1);
    for (int t = 0; t < T; t++) seqmax[seq[t]] = pos[t] > seqmax[seq[t]] ? pos[t] : seqmax[seq[t]];
    const int maxp = maxpos / PS + 2, npages = nseq * maxp + 1, nan_page = npages - 1;
    const size_t layer_bytes = cpukv_layer_bytes(KV, PS, D, B), page_bytes = 2 * layer_bytes, loff = layer_bytes;
    /* scattered page ids: a permutation of 0..npages-2 */
    std::vector<int> perm(npages - 1), ptab((size_t)nseq * maxp, nan_page);
    for (int i = 0; i < npages - 1; i++) perm[i] = i;
    for (int i = npages - 2; i > 0; i--) {
        int j = (int)((frand(c) + 1.0f) * 0.5f * (i + 1));
        j = j > i ? i : j;
        std::swap(perm[i], perm[j]);
    }
    int used = 0;
    std::vector<uint8_t> pool((size_t)npages * page_bytes, 0xff);
    for (int s = 0; s < nseq; s++) {
        if (seqmax[s] < 0) continue;
        for (int pg = 0; pg <= seqmax[s] / PS; pg++) ptab[(size_t)s * maxp + pg] = perm[used++];
        for (int j = 0; j <= seqmax[s]; j++) {
            uint8_t *layer = &pool[(size_t)ptab[(size_t)s * maxp + j / PS] * page_bytes + loff];
            for (int kh = 0; kh < KV; kh++)
                for (int kv01 = 0; kv01 < 2; kv01++) {
                    float x[512];
                    for (int i = 0; i < D; i++) x[i] = frand(c) * (kv01 ? 1.0f : 1.5f) + (kv01 ? 0.0f : 0.1f * (j % 7));
                    hq_put(layer, KV, PS, D, B, kv01, kh, j % PS, x);
                }
        }
    }
    std::vector<float> q;
    fill(c, q, (size_t)T * H * D, false, 2.0f);
    uint8_t *dpool;
    int *dptab, *dpos, *dseq;
    CK(cudaMalloc(&dpool, pool.size()));
    CK(cudaMemcpy(dpool, pool.data(), pool.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dptab, ptab.size() * 4)); CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
    CK(cudaMemcpy(dptab, ptab.data(), ptab.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
    float *dq = (float *)upload(q, false);
    void *dout;
    const size_t on = (size_t)T * H * D;
    CK(cudaMalloc(&dout, on * 4));
    CK(cudaMemset(dout, 0xff, on * 4));
    unsigned long long lo = loff;
    int Tv = T, mp = maxp;
    CUtensorMap map; /* quantized KV: no _flash_ws, the map is not read */
    memset(&map, 0, sizeof map);
    void *args[] = {&Tv, &dq, &dpool, &lo, &dpos, &dseq, &dptab, &mp, &dout, &map};
    launch(a.fn, dim3(IG_AP_GRID_XH(H, 1), IG_AP_GRID_Y(T)), dim3(IG_AP_BLOCKH(1)), IG_AP_SMEM_H(D, 1), args);
    CK(cudaDeviceSynchronize());
    std::vector<float> o = download(dout, on, a.ob);
    /* dequantized rows of every (sequence, kv head) */
    std::vector<std::vector<float>> Ks((size_t)nseq * KV), Vs((size_t)nseq * KV);
    for (int s = 0; s < nseq; s++)
        for (int kh = 0; kh < KV && seqmax[s] >= 0; kh++) {
            std::vector<float> &K = Ks[(size_t)s * KV + kh], &V = Vs[(size_t)s * KV + kh], kp(D);
            K.resize((size_t)(seqmax[s] + 1) * D), V.resize((size_t)(seqmax[s] + 1) * D);
            for (int j = 0; j <= seqmax[s]; j++) {
                const uint8_t *layer = &pool[(size_t)ptab[(size_t)s * maxp + j / PS] * page_bytes + loff];
                cpukv::ig_kvq_load(layer, KV, PS, D, B, 0, kh, j % PS, 1, &K[(size_t)j * D], kp.data());
                cpukv::ig_kvq_load(layer, KV, PS, D, B, 1, kh, j % PS, 1, &V[(size_t)j * D], kp.data());
            }
        }
    checker k;
    chk_init(&k, what);
    std::vector<double> ref(D), tol(D);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const size_t si = (size_t)seq[t] * KV + h / G;
            hq_attn_ref(Ks[si].data(), Vs[si].data(), pos[t] + 1, D, a.scale, &q[((size_t)t * H + h) * D], a.ob != 0, a.ob,
                        ref.data(), tol.data());
            for (int i = 0; i < D; i++) {
                size_t idx = ((size_t)t * H + h) * D + i;
                chk(&k, (long)idx, o[idx], ref[i], tol[i]);
            }
        }
    chk_done(c, &k);
    CK(cudaFree(dpool)); CK(cudaFree(dptab)); CK(cudaFree(dpos)); CK(cudaFree(dseq)); CK(cudaFree(dq));
    CK(cudaFree(dout));
}

static void run_kvq_tests(ctx *c, const ap_scn *scns, int nscn) {
    const kvq_case kcs[] = {
        KQC(Q8a, "int8 H8 KV2 D64 qknorm", 0.125f),
        KQC(Q8b, "int8 H24 KV8 D128 bf16out", 0.08838834764831845f),
        KQC(Q8c, "int8 H4 KV4 D16", 0.25f),
        KQC(Q4a, "uint4 H8 KV2 D64 qknorm", 0.125f),
        KQC(Q4b, "uint4 H6 KV2 D48 bf16out", 0.14433756729740643f),
        KQC(Q4c, "uint4 H8 KV1 D128 bf16out", 0.08838834764831845f),
        KQC(Q4d, "uint4 H8 KV2 D16", 0.25f),
        KQC(F8a, "fp8 H8 KV2 D128 bf16out", 0.08838834764831845f),
        KQC(F8b, "fp8 H4 KV4 D64 qknorm", 0.125f),
    };
    for (const auto &a : kcs) {
        char lab[200];
        snprintf(lab, sizeof lab, "rope_kv / attention %s", a.name);
        if (!sel(lab)) continue;
        test_attn_q(c, a, false);
        test_attn_q(c, a, true);
    }
    const apq_case aps[] = {
        APQ(apq_8_g4_d128, 16, 4, 128, 8, 1, 16, 0.08838834764831845f),
        APQ(apq_f8_g4_d128, 16, 4, 128, IG_KVQ_E4M3, 1, 16, 0.08838834764831845f),
        APQ(apq_8_g2_d64_f32, 4, 2, 64, 8, 0, 16, 0.125f),
        APQ(apq_8_g8_d16, 8, 1, 16, 8, 1, 16, 0.25f),
        APQ(apq_4_g4_d64, 8, 2, 64, 4, 1, 16, 0.125f),
        APQ(apq_4_g1_d48, 2, 2, 48, 4, 1, 32, 0.14433756729740643f),
        APQ(apq_4_g8_d16_f32, 8, 1, 16, 4, 0, 8, 0.25f),
        APQ(apq_4_g2_d128_ps128, 4, 2, 128, 4, 1, 128, 0.08838834764831845f),
    };
    for (const auto &a : aps)
        for (int i = 0; i < nscn; i++) test_ap_q(c, a, scns[i]);
}

/* Fills the f16 scales and zero points of every layer part of npages quantized pages (after
 * fill_bf16 made the codes random) with small finite values, so timed outputs stay finite. */
__global__ void fill_kvq_meta(unsigned char *pool, size_t npages, size_t page_bytes, size_t layer_bytes, int layers,
                              size_t meta_off, size_t n_rows) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < npages * layers * n_rows; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i % n_rows, pl = i / n_rows;
        unsigned char *m = pool + (pl / layers) * page_bytes + (pl % layers) * layer_bytes + meta_off;
        ((unsigned short *)m)[r] = 0x2000; /* f16 2^-7 */
        m[2 * n_rows + r] = (unsigned char)(r % 7);
    }
}

/* Decode attention over long contexts, Llama-3-8B shapes (H 32, KV 8, D 128, pages of 16 slots, 32
 * layers a page; s1b: Llama-3.2-1B's, D 64, pages of 64, no window instances), split kernel with the host's split count (IG_AT_SPLITS: 2 CTAs an SM), for bf16
 * (f = 0, at_perf), int8 (1) and uint4 (2) KV (3: bf16 without L2 prefetches; 4: fp8, no window, timed only), with a 4096-key window or not: T tokens of distinct
 * sequences, token t at context ctxs[t] (its pages scattered over the pool, random rows; quantized
 * rows: random codes, f16 scale 2^-7, zero points r % 7). Timed over rotating layers (us per launch
 * into *us); with check, tokens 0 and T - 1, heads 0 and 31, of the last launch's layer against a
 * double softmax over the rows as the host reads them (quantized: kv_quant.h's dequantization, the
 * output rotated back). Returns the bytes of K/V a launch reads. */
static double attn_long(ctx *c, int f, int T, const int *ctxs, bool win, bool check, double *us, bool s1b = false) {
    const int H = 32, KV = 8, D = s1b ? 64 : 128, PS = s1b ? 64 : 16, L = PERF_LAYERS, G = H / KV;
    const double scale = 1.0 / sqrt((double)D);
    const int bits = f == 1 ? 8 : f == 2 ? 4 : f == 4 ? IG_KVQ_E4M3 : 0, nb = bits ? IG_KVQ_BITS(bits) : 0;
    const void *fns[3][5] = {{(const void *)at_perf_split, (const void *)at_perf_q8_split, (const void *)at_perf_q4_split,
                              (const void *)at_perf_nopf_split, (const void *)at_perf_f8_split},
                             {(const void *)at_perf_w_split, (const void *)at_perf_q8w_split, (const void *)at_perf_q4w_split,
                              (const void *)at_perf_nopf_split, (const void *)at_perf_f8_split},
                             {(const void *)at_p1b_split, (const void *)at_p1b_q8_split, (const void *)at_p1b_q4_split,
                              (const void *)at_p1b_split, (const void *)at_p1b_f8_split}};
    if (s1b && win) {
        fprintf(stderr, "attn_long: the 1B shape has no window instances\n");
        exit(2);
    }
    const char *names[5] = {"bf16", "int8", "uint4", "bf16 (no L2 prefetch)", "fp8"};
    const size_t layer_bytes = bits ? cpukv_layer_bytes(KV, PS, D, bits) : 2ull * KV * PS * D * 2, page_bytes = layer_bytes * L;
    const size_t key_bytes = bits ? 2ull * KV * (D * nb / 8 + 3) : 2ull * KV * D * 2; /* K + V of a key, all kv heads */
    int maxp = 1, npages = 0;
    for (int t = 0; t < T; t++) maxp = std::max(maxp, (ctxs[t] + PS - 1) / PS), npages += (ctxs[t] + PS - 1) / PS;
    std::vector<int> ptab((size_t)T * maxp, 0), pos(T), seq(T);
    for (int t = 0, k = 0; t < T; t++) {
        pos[t] = ctxs[t] - 1, seq[t] = t;
        for (int p = 0; p < (ctxs[t] + PS - 1) / PS; p++, k++) ptab[(size_t)t * maxp + p] = (int)((k * 7919ull) % npages);
    }
    uint8_t *dpool;
    CK(cudaMalloc(&dpool, (size_t)npages * page_bytes));
    fill_bf16<<<4096, 256>>>((unsigned short *)dpool, (size_t)npages * page_bytes / 2, 12345u + f);
    if (bits)
        fill_kvq_meta<<<4096, 256>>>(dpool, npages, page_bytes, layer_bytes, L, 2ull * KV * PS * D * nb / 8, 2ull * KV * PS);
    CK(cudaGetLastError());
    std::vector<float> q;
    fill(c, q, (size_t)T * H * D, false);
    float *dq = (float *)upload(q, false), *dws;
    int *dptab, *dpos, *dseq;
    void *dout;
    unsigned *dcnt;
    CK(cudaMalloc(&dptab, ptab.size() * 4)); CK(cudaMalloc(&dpos, T * 4)); CK(cudaMalloc(&dseq, T * 4));
    CK(cudaMemcpy(dptab, ptab.data(), ptab.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpos, pos.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, seq.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dout, (size_t)T * H * D * 2)); CK(cudaMalloc(&dws, IG_AT_WS_FLOATS(T, H, D, PERF_SPLIT) * 4));
    CK(cudaMalloc(&dcnt, IG_AT_COUNTERS(T, KV) * 4));
    CK(cudaMemset(dcnt, 0, IG_AT_COUNTERS(T, KV) * 4));
    unsigned long long loff = 0;
    int Tv = T, mp = maxp;
    void *args[] = {&Tv, &dq, &dpool, &loff, &dpos, &dseq, &dptab, &mp, &dws, &dcnt, &dout};
    const int ns = IG_AT_SPLITS(T, KV, PERF_SPLIT, IG_AT_CTAS_PER_SM * g_sms);
    *us = time_us(
        [&](int i) {
            loff = (unsigned long long)(i % L) * layer_bytes;
            CK(cudaLaunchKernel(fns[s1b ? 2 : win][f], dim3(KV, T, ns), dim3(IG_AT_BLOCK), args, IG_AT_SMEM(H, KV, D), 0));
        },
        check ? 4 : 32);
    CK(cudaDeviceSynchronize());
    double bytes = 0;
    for (int t = 0; t < T; t++) bytes += (double)std::min(ctxs[t], win ? 4096 : ctxs[t]) * key_bytes;
    if (check) {
        std::vector<float> o = download(dout, (size_t)T * H * D, true);
        char what[200];
        snprintf(what, sizeof what, "attention long %s%s%s T=%d ctx %d..%d (split %d, tokens 0 and T-1)", names[f],
                 s1b ? " D64 PS64" : "", win ? " window 4096" : "", T, ctxs[0], ctxs[T - 1], ns);
        checker k;
        chk_init(&k, what);
        for (int t : {0, T - 1}) {
            if (t == T - 1 && T == 1) break;
            const int n = pos[t] + 1, lo = win && n > 4096 ? n - 4096 : 0;
            std::vector<uint8_t> lay((size_t)maxp * layer_bytes);
            for (int p = lo / PS; p <= pos[t] / PS; p++)
                CK(cudaMemcpy(&lay[(size_t)p * layer_bytes], dpool + (size_t)ptab[(size_t)t * maxp + p] * page_bytes + loff,
                              layer_bytes, cudaMemcpyDeviceToHost));
            for (int h : {0, H - 1}) {
                const int kh = h / G, m = n - lo;
                std::vector<float> K((size_t)m * D), V((size_t)m * D), kp(D), kv(D);
                for (int j = lo; j < n; j++) {
                    const uint8_t *lp = &lay[(size_t)(j / PS) * layer_bytes];
                    float *kr = &K[(size_t)(j - lo) * D], *vr = &V[(size_t)(j - lo) * D];
                    if (!bits) {
                        for (int i = 0; i < D; i++) {
                            uint16_t hk, hv;
                            memcpy(&hk, lp + (((size_t)kh * PS + j % PS) * D + i) * 2, 2);
                            memcpy(&hv, lp + ((((size_t)KV + kh) * PS + j % PS) * D + i) * 2, 2);
                            kr[i] = h_b2f(hk), vr[i] = h_b2f(hv);
                        }
                    } else { /* delta keys: kp walks the page from slot 0 (from the window's first slot on) */
                        if (IG_KVQ_KDELTA(bits) && j == lo && j % PS) cpukv::ig_kvq_key_before(lp, KV, PS, D, bits, kh, j % PS, kr, kp.data());
                        cpukv::ig_kvq_load(lp, KV, PS, D, bits, 0, kh, j % PS, 1, kr, kp.data());
                        cpukv::ig_kvq_load(lp, KV, PS, D, bits, 1, kh, j % PS, 1, vr, kv.data());
                    }
                }
                const float *qh = &q[((size_t)t * H + h) * D];
                std::vector<double> ref(D), tol(D);
                if (bits) hq_attn_ref(K.data(), V.data(), m, D, scale, qh, false, true, ref.data(), tol.data());
                else {
                    std::vector<double> sc(m), acc(D, 0.0);
                    double mx = -1e300, l = 0;
                    for (int j = 0; j < m; j++) {
                        double s = 0;
                        for (int i = 0; i < D; i++) s += (double)qh[i] * K[(size_t)j * D + i];
                        sc[j] = s * scale, mx = std::max(mx, sc[j]);
                    }
                    for (int j = 0; j < m; j++) {
                        const double p = exp(sc[j] - mx);
                        l += p;
                        for (int i = 0; i < D; i++) acc[i] += p * V[(size_t)j * D + i];
                    }
                    for (int i = 0; i < D; i++) ref[i] = acc[i] / l, tol[i] = 2e-5 + 1e-5 * fabs(ref[i]) + fabs(ref[i]) / 256;
                }
                for (int i = 0; i < D; i++) chk(&k, ((long)t * H + h) * D + i, o[((size_t)t * H + h) * D + i], ref[i], tol[i]);
            }
        }
        chk_done(c, &k);
    }
    CK(cudaFree(dpool)); CK(cudaFree(dq)); CK(cudaFree(dws)); CK(cudaFree(dcnt)); CK(cudaFree(dptab)); CK(cudaFree(dpos));
    CK(cudaFree(dseq)); CK(cudaFree(dout));
    return bytes;
}

/* The long-context checks: every format, with and without the window, one token at 1, 17, 4096,
 * 8192 and 131072 keys and eight tokens of mixed contexts up to 131072 in one launch. */
static void test_attn_long(ctx *c) {
    const int one[5] = {1, 17, 4096, 8192, 131072}, mixed[8] = {131072, 1, 17, 4097, 8192, 300, 2049, 8191};
    double us;
    for (int f = 0; f < 3; f++)
        for (int win = 0; win < 2; win++) {
            for (int x : one) attn_long(c, f, 1, &x, win, true, &us);
            attn_long(c, f, 8, mixed, win, true, &us);
        }
    for (int f = 0; f < 3; f++) { /* the 1B shape (D 64, pages of 64) */
        for (int x : one) attn_long(c, f, 1, &x, false, true, &us, true);
        attn_long(c, f, 8, mixed, false, true, &us, true);
    }
}

/* The issue's attention figures: us per token and GB/s of K/V for bf16 / int8 / uint4 / fp8 at 8k
 * (1 and 8 tokens) and at 128k (1 token), and each quantized format's speed-up over bf16 KV; first
 * one token at 256 keys, the launch's fixed cost. */
static void bench_attn_kv(ctx *c, double copy_gbs) {
    /* 256 keys: a launch's fixed cost (one split), then the issue's contexts */
    const struct { int T, n; } runs[4] = {{1, 256}, {1, 8192}, {8, 8192}, {1, 131072}};
    for (int s1b = 0; s1b < 2; s1b++) /* Llama-3-8B's attention shape (D 128, pages of 16), then 1B's (D 64, pages of 64) */
        for (const auto &r : runs) {
            std::vector<int> ctxs(r.T);
            for (int t = 0; t < r.T; t++) ctxs[t] = r.n - t;
            double us[5], gbs[5];
            for (int f = 0; f < 5; f++) {
                const double bytes = attn_long(c, f, r.T, ctxs.data(), false, false, &us[f], s1b);
                gbs[f] = bytes / (us[f] * 1e-6) / 1e9;
            }
            printf("bench attention-kv H32 KV8 %s T=%d ctx=%d split %d, per token: bf16 %.2f us %.0f GB/s | int8 %.2f us %.0f "
                   "GB/s (%.2fx) | uint4 %.2f us %.0f GB/s (%.2fx) | fp8 %.2f us %.0f GB/s (%.2fx)",
                   s1b ? "D64 PS64" : "D128 PS16", r.T, r.n, IG_AT_SPLITS(r.T, 8, PERF_SPLIT, IG_AT_CTAS_PER_SM * g_sms),
                   us[0] / r.T, gbs[0], us[1] / r.T, gbs[1], us[0] / us[1], us[2] / r.T, gbs[2], us[0] / us[2], us[4] / r.T,
                   gbs[4], us[0] / us[4]);
            if (!s1b) printf(" | bf16 without L2 prefetch %.2f us", us[3] / r.T);
            printf("  [copy %.0f GB/s]\n", copy_gbs);
        }
}
