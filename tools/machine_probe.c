/* machine_probe.c — bandwidth and peak-FLOP probes (see machine_probe.h). Each probe function is
 * compiled for the instructions it measures (target attribute) and only called when the CPU
 * has them. On other architectures than x86-64 the bandwidth probe is portable C (64-bit loads
 * the compiler vectorizes) and there is no peak probe (rt_peak_flops returns 0). */
#include "machine_probe.h"

#include <stdio.h>

#include "rt_util.h"

#if !defined(__x86_64__)
double rt_read_bandwidth(const uint8_t *buf, size_t n, int reps) {
    double best = 0;
    n &= ~(size_t)255;
    for (int r = 0; r < reps; r++) {
        double t0 = rt_now();
        uint64_t acc = 0;
#pragma omp parallel for reduction(^ : acc)
        for (size_t i = 0; i < n; i += 64) {
            const uint64_t *p = (const uint64_t *)(buf + i);
            acc ^= p[0] ^ p[1] ^ p[2] ^ p[3] ^ p[4] ^ p[5] ^ p[6] ^ p[7];
        }
        double dt = rt_now() - t0;
        __asm__ volatile("" ::"r"(acc)); /* keep the loads */
        if (n / dt > best) best = n / dt;
    }
    return best;
}

double rt_peak_flops(rt_peak_kind kind, double secs) { return 0; }
#else
#include <immintrin.h>

__attribute__((target("avx2"))) double rt_read_bandwidth(const uint8_t *buf, size_t n, int reps) {
    double best = 0;
    n &= ~(size_t)255;
    for (int r = 0; r < reps; r++) {
        double t0 = rt_now();
        long long acc = 0;
#pragma omp parallel reduction(^ : acc)
        {
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
                    a6 = a0, a7 = a0;
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 256) {
                const __m256i *p = (const __m256i *)(buf + i);
                a0 = _mm256_xor_si256(a0, _mm256_load_si256(p));
                a1 = _mm256_xor_si256(a1, _mm256_load_si256(p + 1));
                a2 = _mm256_xor_si256(a2, _mm256_load_si256(p + 2));
                a3 = _mm256_xor_si256(a3, _mm256_load_si256(p + 3));
                a4 = _mm256_xor_si256(a4, _mm256_load_si256(p + 4));
                a5 = _mm256_xor_si256(a5, _mm256_load_si256(p + 5));
                a6 = _mm256_xor_si256(a6, _mm256_load_si256(p + 6));
                a7 = _mm256_xor_si256(a7, _mm256_load_si256(p + 7));
            }
            __m256i s = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)),
                                         _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7)));
            acc ^= _mm256_extract_epi64(s, 0) ^ _mm256_extract_epi64(s, 3);
        }
        double dt = rt_now() - t0;
        __asm__ volatile("" ::"r"(acc)); /* keep the loads */
        if (n / dt > best) best = n / dt;
    }
    return best;
}

#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f,avx512bf16"))) static double peak_bf16(double secs) {
    double total = 0, t0 = rt_now();
#pragma omp parallel reduction(+ : total)
    {
/* distinct starting values: identical chains would be merged by the compiler */
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
        REP12(DECL)
        __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
        long it = 0;
        while (rt_now() - t0 < secs) {
            for (int k = 0; k < 1000; k++) {
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, a);
                REP12(STEP)
            }
            it += 1000;
        }
#define SUM(i) s = _mm512_add_ps(s, c##i);
        __m512 s = _mm512_setzero_ps();
        REP12(SUM)
        total += (double)it * 12 * 64 + (_mm512_reduce_add_ps(s) == 1.0f);
    }
    return total / (rt_now() - t0);
}

__attribute__((target("avx512f"))) static double peak_f32_512(double secs) {
    double total = 0, t0 = rt_now();
#pragma omp parallel reduction(+ : total)
    {
        REP12(DECL)
        __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
        long it = 0;
        while (rt_now() - t0 < secs) {
            for (int k = 0; k < 1000; k++) {
#define STEPF(i) c##i = _mm512_fmadd_ps(c##i, a, b);
                REP12(STEPF)
            }
            it += 1000;
        }
        __m512 s = _mm512_setzero_ps();
        REP12(SUM)
        total += (double)it * 12 * 32 + (_mm512_reduce_add_ps(s) == 1.0f);
    }
    return total / (rt_now() - t0);
}

__attribute__((target("avx2,fma"))) static double peak_f32_256(double secs) {
    double total = 0, t0 = rt_now();
#pragma omp parallel reduction(+ : total)
    {
#define DECL8(i) __m256 c##i = _mm256_set1_ps((float)(i));
        REP12(DECL8)
        __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-7f);
        long it = 0;
        while (rt_now() - t0 < secs) {
            for (int k = 0; k < 1000; k++) {
#define STEP8(i) c##i = _mm256_fmadd_ps(c##i, a, b);
                REP12(STEP8)
            }
            it += 1000;
        }
        __m256 s = _mm256_setzero_ps();
#define SUM8(i) s = _mm256_add_ps(s, c##i);
        REP12(SUM8)
        float v[8];
        _mm256_storeu_ps(v, s);
        total += (double)it * 12 * 16 + (v[0] == 1.0f);
    }
    return total / (rt_now() - t0);
}

/* Four independent tile accumulators (C 0..3 = A 4..5 x B 6..7), no loads: the tile unit's rate. */
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static double peak_amx_bf16(double secs) {
    double total = 0, t0 = rt_now();
#pragma omp parallel reduction(+ : total)
    {
        _Alignas(64) struct {
            uint8_t palette, start_row, reserved[14];
            uint16_t colsb[16];
            uint8_t rows[16];
        } cfg = {.palette = 1};
        for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
        _Alignas(64) static const uint16_t ones[16 * 32] = {0};
        _Alignas(64) float out[16 * 16];
        _tile_loadconfig(&cfg);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_loadd(4, ones, 64);
        _tile_loadd(5, ones, 64);
        _tile_loadd(6, ones, 64);
        _tile_loadd(7, ones, 64);
        long it = 0;
        while (rt_now() - t0 < secs) {
            for (int k = 0; k < 1000; k++) {
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            it += 1000;
        }
        _tile_stored(0, out, 64);
        _tile_release();
        total += (double)it * 4 * 16 * 16 * 32 * 2 + (out[0] == 1.0f);
    }
    return total / (rt_now() - t0);
}

double rt_peak_flops(rt_peak_kind kind, double secs) {
    switch (kind) {
    case RT_PEAK_AMX_BF16: return peak_amx_bf16(secs);
    case RT_PEAK_BF16_DOT: return peak_bf16(secs);
    case RT_PEAK_F32_FMA512: return peak_f32_512(secs);
    case RT_PEAK_F32_FMA256: return peak_f32_256(secs);
    }
    return 0;
}
#endif
