/* gemm.cu — template: the GEMM of prefill-sized steps when cuBLAS is not there: a CUDA package or
 * one-file bundle on a machine that has only the driver (host.h finds no libcublas), or
 * `--tune cublas=0`. Same contract as host_runtime.c's gemm() on cuBLAS:
 *
 *   y[t][n] = beta * y[t][n] + sum_k x[t][k] * w[n][k]     t < T, n < N, k < K
 *
 * x [T][K] and w [N][K] row-major in the package's element type (GM_ES = 2: its 16-bit type,
 * bf16 or half; 4: f32), y [T][ldy] f32, or the 16-bit type when ybf16 (rounded to nearest even);
 * beta 0 ignores what y held (as cuBLAS does, NaN included). f32 accumulation.
 *
 * Instantiate with GM_NAME, GM_ES; defines
 *   extern "C" __global__ void GM_NAME(int N, int T, int K, const void *w, const void *x, void *y,
 *                                      int ldy, float beta, int ybf16);
 * launch (launch.h): grid (IG_GM_GRID_X(N), IG_GM_GRID_Y(T)), block IG_GM_BLOCK = 256, static smem
 * 2 x 32 x 68 floats (17 KB).
 *
 * A CTA computes a 64-token x 64-output tile over K in slices of 32: each slice of x and w is
 * staged in shared memory as f32 (k-major, rows padded by 4 floats), the next slice's elements
 * already on their way into registers while this one is multiplied, then each thread accumulates
 * a 4 x 4 block of outputs strided by 16 (tokens ty + 16i, outputs tx + 16j), so a warp's reads of
 * the w slice are 16 consecutive floats and those of x a broadcast. CUDA cores only: it exists so
 * that a package runs without cuBLAS, at a fraction of cuBLAS's tensor-core rate (SPEC.md).
 */
#include "common.cuh"

#ifndef GM_NAME
#define GM_NAME ig_gemm_fallback
#endif
#ifndef GM_ES
#define GM_ES 2
#endif

IG_DEV float IG_CAT(GM_NAME, _ld)(const void *p, size_t i) {
    if (GM_ES == 2) return ig_h_to_f32(((const unsigned short *)p)[i]);
    return ((const float *)p)[i];
}

extern "C" __global__ void __launch_bounds__(IG_GM_BLOCK)
GM_NAME(int N, int T, int K, const void *w, const void *x, void *y, int ldy, float beta, int ybf16) {
    __shared__ float xs[IG_GM_BK][IG_GM_TILE + 4], ws[IG_GM_BK][IG_GM_TILE + 4];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int n0 = blockIdx.x * IG_GM_TILE, t0 = blockIdx.y * IG_GM_TILE;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    /* this thread's elements of a slice: loaded into registers one slice ahead, so the next
     * slice's global loads are in flight while this one is multiplied */
    constexpr int PER = IG_GM_TILE * IG_GM_BK / IG_GM_BLOCK;
    float rx[PER], rw[PER];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int e = tid + IG_GM_BLOCK * i, r = e / IG_GM_BK, c = e % IG_GM_BK, k = k0 + c;
            const int t = t0 + r, n = n0 + r;
            rx[i] = t < T && k < K ? IG_CAT(GM_NAME, _ld)(x, (size_t)t * K + k) : 0.0f;
            rw[i] = n < N && k < K ? IG_CAT(GM_NAME, _ld)(w, (size_t)n * K + k) : 0.0f;
        }
    };
    fetch(0);
    for (int k0 = 0; k0 < K; k0 += IG_GM_BK) {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int e = tid + IG_GM_BLOCK * i, r = e / IG_GM_BK, c = e % IG_GM_BK;
            xs[c][r] = rx[i], ws[c][r] = rw[i];
        }
        __syncthreads();
        if (k0 + IG_GM_BK < K) fetch(k0 + IG_GM_BK);
#pragma unroll 4
        for (int kk = 0; kk < IG_GM_BK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = xs[kk][ty + 16 * i], b[i] = ws[kk][tx + 16 * i];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int t = t0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (t >= T || n >= N) continue;
            const size_t o = (size_t)t * ldy + n;
            if (ybf16) {
                unsigned short *yh = (unsigned short *)y;
                yh[o] = ig_f32_to_h(beta != 0.0f ? beta * ig_h_to_f32(yh[o]) + acc[i][j] : acc[i][j]);
            } else {
                float *yf = (float *)y;
                yf[o] = beta != 0.0f ? beta * yf[o] + acc[i][j] : acc[i][j];
            }
        }
}

#undef GM_NAME
#undef GM_ES
