/* test_act8_wg.cu — act8.cu's A8_WG_NAME on the GPU (sm_90a): a8w8's int8 GEMM on warpgroup tensor
 * cores with the dq epilogue fused (scales, bias, the residual add, SwiGLU / GeGLU of the packed
 * gate/up rows), persistent: what the host emulation (tests/cuda_host/test_act8.cpp) runs without the
 * hardware's wgmma, TMA and mbarriers.
 *
 * Checks each instance against the exact int32 sums (a plain GPU kernel over the same codes) put
 * through the epilogue in double on the host: f32 outputs within 1e-5 relative (+ 1e-6), 16-bit GLU
 * outputs within their rounding (8e-3 relative); token and weight tiles cut short, K not a multiple
 * of a step (steps of at least 128 tokens: a tensor map's box may not exceed its tensor, so the
 * generated code takes cuBLAS below that), one to many tiles a CTA (grids of 1 and of every SM),
 * a row stride wider than N (the columns past N untouched). Then (unless --no-bench) times the 1B Llama shapes' four matmuls
 * at 2048 and 128 tokens against the path it replaces (cuBLAS's int8 GEMM into int32 sums + act8.cu's
 * dq kernel) and cuBLAS's bf16 GEMM, in us and TOP/s of the useful products.
 * Build (scripts/gpu_prepare.sh): nvcc -O2 -arch=sm_90a -Itemplates/cuda [-DWG_CL=2] tests/gpu/test_act8_wg.cu
 *   -lcuda -lcublas
 * `--profile NAME T` launches one of the 1B instances alone, for a profiler (below).
 * Exit: 0 all passed ("SKIP" without an sm_90 GPU), 1 on a mismatch or CUDA error. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

/* -DWG_CL=2: every instance in clusters of two CTAs sharing the weight boxes (`--tune a8_wg=2`) */
#ifndef WG_CL
#define WG_CL 1
#endif
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_plain
#define A8_K 400
#define A8_N 600
#define A8_LDY 616
#define A8_BIAS 1
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_acc
#define A8_K 256
#define A8_N 300
#define A8_ACC 1
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_swiglu
#define A8_K 208
#define A8_N 544
#define A8_GLU 1
#define A8_BIAS 1
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_geglu
#define A8_K 128
#define A8_N 256
#define A8_GLU 2
#include "act8.cu"
/* the 1B Llama's matmuls, and the dq kernels of the path they replace */
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_qkv
#define A8_K 2048
#define A8_N 3072
#include "act8.cu"
#define A8_DQ_NAME dq_qkv
#define A8_K 2048
#define A8_N 3072
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_o
#define A8_K 2048
#define A8_N 2048
#define A8_ACC 1
#include "act8.cu"
#define A8_DQ_NAME dq_o
#define A8_K 2048
#define A8_N 2048
#define A8_ACC 1
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_gu
#define A8_K 2048
#define A8_N 16384
#define A8_GLU 1
#include "act8.cu"
#define A8_DQ_NAME dq_gu
#define A8_K 2048
#define A8_N 16384
#define A8_GLU 1
#include "act8.cu"
#define A8_WG_CL WG_CL
#define A8_WG_NAME wg_down
#define A8_K 8192
#define A8_N 2048
#define A8_ACC 1
#include "act8.cu"
#define A8_DQ_NAME dq_down
#define A8_K 8192
#define A8_N 2048
#define A8_ACC 1
#include "act8.cu"

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

typedef void (*wg_fn)(int, int, const float *, const unsigned char *, const float *, void *, int *, unsigned *, const ig_tmap,
                      const ig_tmap);
typedef void (*dq_fn)(int, const int *, const float *, const unsigned char *, const float *, void *);
struct inst {
    const char *name;
    wg_fn wg;
    dq_fn dq; /* the dq kernel of the same shape (bench), or null */
    int K, N, ldy, bias, acc, glu;
};

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand() { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static double glu_h(double g, double u, int gelu) {
    const double a = gelu ? 0.5 * g * (1 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) : g / (1 + exp(-g));
    return a * u;
}
static float bf16_f(unsigned short h) {
    unsigned u = (unsigned)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* exact int32 sums acc[t][n] = xq[t] . w[n] (codes, rows K + 16 bytes apart) */
__global__ void ref_sums(int T, int N, int K, const signed char *x, const unsigned char *w, int *acc) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (n >= N) return;
    int s = 0;
    for (int k = 0; k < K; k++) s += (int)x[(size_t)t * K + k] * (int)(signed char)w[(size_t)n * (K + 16) + k];
    acc[(size_t)t * N + n] = s;
}

/* a tensor map of rows x cols int8 codes, rows ld bytes apart, boxes of 128 x box_rows (host_runtime.c's
 * tile_map_of); false (and a line saying so) where the driver refuses it */
static bool map8(CUtensorMap *m, const void *p, uint64_t cols, uint64_t rows, uint64_t ld, unsigned box_rows) {
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld};
    const cuuint32_t box[2] = {128, box_rows}, step[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dims, strides, box, step,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        printf("tensor map refused (%d): %llu x %llu codes, rows %llu bytes apart, box 128 x %u at %p\n", (int)r,
               (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)ld, box_rows, p);
    return r == CUDA_SUCCESS;
}

/* one instance's operands on the device: q8r rows (codes, scale, padding), codes and scales of T
 * tokens, bias, output */
struct opnds {
    int T, NP;
    unsigned char *w;
    signed char *x;
    float *xs, *b;
    void *y;
    std::vector<unsigned char> hw;
    std::vector<float> hxs, hb;
};
static void make(opnds &o, const inst &in, int T) {
    const int K = in.K, NP = (in.N + 15) / 16 * 16, RB = K + 16;
    o.T = T, o.NP = NP;
    o.hw.assign((size_t)NP * RB, 0);
    for (int n = 0; n < in.N; n++) {
        for (int k = 0; k < K; k++) o.hw[(size_t)n * RB + k] = (unsigned char)(signed char)lrintf(127 * frand());
        const float s = (0.5f + 0.5f * (frand() + 1)) / 127 / sqrtf((float)K);
        memcpy(&o.hw[(size_t)n * RB + K], &s, 4);
        memset(&o.hw[(size_t)n * RB + K + 4], 0xee, 12);
    }
    std::vector<signed char> hx((size_t)(T < IG_A8_WG_BM ? IG_A8_WG_BM : T) * K); /* 128 rows at least, as a8_xq */
    for (auto &v : hx) v = (signed char)lrintf(127 * frand());
    o.hxs.resize(T), o.hb.resize(in.N);
    for (auto &v : o.hxs) v = (1 + frand()) * 0.02f;
    for (auto &v : o.hb) v = frand();
    CK(cudaMalloc(&o.w, o.hw.size()));
    CK(cudaMalloc(&o.x, hx.size()));
    CK(cudaMalloc(&o.xs, 4 * (size_t)T));
    CK(cudaMalloc(&o.b, 4 * (size_t)in.N));
    CK(cudaMalloc(&o.y, 4 * (size_t)T * (in.glu ? in.N / 2 : in.ldy)));
    CK(cudaMemcpy(o.w, o.hw.data(), o.hw.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(o.x, hx.data(), hx.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(o.xs, o.hxs.data(), 4 * (size_t)T, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(o.b, o.hb.data(), 4 * (size_t)in.N, cudaMemcpyHostToDevice));
}
static void drop(opnds &o) { cudaFree(o.w), cudaFree(o.x), cudaFree(o.xs), cudaFree(o.b), cudaFree(o.y); }

/* the split kernel's partial sums and tile counts (the generated code's a8_part / a8_cnt) */
static int *g_part;
static unsigned *g_cnt;

/* false where a map is refused (the generated code takes cuBLAS there); S: K splits a tile */
static bool launch(const inst &in, const opnds &o, int grid, int S = 1) {
    CUtensorMap xm, wm;
    const int TR = o.T < IG_A8_WG_BM ? IG_A8_WG_BM : o.T;
    if (!map8(&xm, o.x, in.K, TR, in.K, IG_A8_WG_BM) || !map8(&wm, o.w, in.K, o.NP, in.K + 16, IG_A8_WG_BN / WG_CL)) return false;
    ig_tmap a, b;
    memcpy(&a, &xm, sizeof a), memcpy(&b, &wm, sizeof b);
    in.wg<<<grid, IG_A8_WG_THREADS, IG_A8_WG_SMEM>>>(o.T, S, o.xs, o.w, in.bias ? o.b : nullptr, o.y, g_part, g_cnt, a, b);
    return true;
}

static int check(const inst &in, int T, int grid, int S = 1) {
    opnds o;
    make(o, in, T);
    const int outs = in.glu ? in.N / 2 : in.N, ld = in.glu ? in.N / 2 : in.ldy;
    std::vector<float> y0((size_t)T * ld);
    for (auto &v : y0) v = frand();
    if (in.glu) CK(cudaMemset(o.y, 0xff, 2 * (size_t)T * ld));
    else CK(cudaMemcpy(o.y, y0.data(), 4 * y0.size(), cudaMemcpyHostToDevice));
    if (!launch(in, o, grid, S)) { /* every instance here meets the generated code's conditions for the maps */
        drop(o);
        printf("FAIL %s T=%d: a tensor map was refused\n", in.name, T);
        return 1;
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    int *acc;
    CK(cudaMalloc(&acc, 4 * (size_t)T * in.N));
    ref_sums<<<dim3((in.N + 127) / 128, T), 128>>>(T, in.N, in.K, o.x, o.w, acc);
    CK(cudaDeviceSynchronize());
    std::vector<int> sums((size_t)T * in.N);
    CK(cudaMemcpy(sums.data(), acc, 4 * sums.size(), cudaMemcpyDeviceToHost));
    std::vector<float> y((size_t)T * ld);
    std::vector<unsigned short> yh((size_t)T * ld);
    if (in.glu) CK(cudaMemcpy(yh.data(), o.y, 2 * yh.size(), cudaMemcpyDeviceToHost));
    else CK(cudaMemcpy(y.data(), o.y, 4 * y.size(), cudaMemcpyDeviceToHost));
    int bad = 0;
    double worst = 0;
    auto v = [&](int t, int n) {
        float s;
        memcpy(&s, &o.hw[(size_t)n * (in.K + 16) + in.K], 4);
        return (double)sums[(size_t)t * in.N + n] * o.hxs[t] * s + (in.bias ? o.hb[n] : 0.0);
    };
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < outs; i++) {
            double want, got, lim;
            if (in.glu) {
                const int c = 32 * (i / 16) + i % 16;
                want = glu_h(v(t, c), v(t, c + 16), in.glu == 2), got = bf16_f(yh[(size_t)t * ld + i]);
                lim = 8e-3 * fabs(want) + 1e-5;
            } else {
                want = v(t, i) + (in.acc ? y0[(size_t)t * ld + i] : 0.0), got = y[(size_t)t * ld + i];
                lim = 1e-5 * fabs(want) + 1e-6;
            }
            const double e = fabs(got - want);
            if (!(e <= lim) && bad++ < 3)
                fprintf(stderr, "FAIL %s T=%d grid %d: token %d output %d: %g, want %g\n", in.name, T, grid, t, i, got, want);
            if (e / lim > worst) worst = e / lim;
        }
        if (!in.glu)
            for (int n = in.N; n < ld; n++)
                if (y[(size_t)t * ld + n] != y0[(size_t)t * ld + n] && bad++ < 3)
                    fprintf(stderr, "FAIL %s T=%d: token %d column %d (past N) written\n", in.name, T, t, n);
    }
    if (S > 1) { /* the tile counts back at zero for the next launch */
        std::vector<unsigned> cnt(IG_A8_WG_PITEMS);
        CK(cudaMemcpy(cnt.data(), g_cnt, 4 * cnt.size(), cudaMemcpyDeviceToHost));
        for (unsigned c : cnt)
            if (c && bad++ < 3) fprintf(stderr, "FAIL %s T=%d grid %d: %d K splits left a tile count at %u\n", in.name, T, grid, S, c);
    }
    if (!bad) printf("ok %s T=%d grid %d, %d K splits: worst %.2f of the bound\n", in.name, T, grid, S, worst);
    cudaFree(acc);
    drop(o);
    return bad != 0;
}

/* us a call of the fused kernel, of cuBLAS int8 + dq, of cuBLAS bf16 (zero operands: timing only) */
static void bench(const inst &in, int T, int nsm, cublasHandle_t h) {
    opnds o;
    make(o, in, T);
    int *acc;
    void *wb, *xb, *yb;
    CK(cudaMalloc(&acc, 4 * (size_t)T * o.NP));
    CK(cudaMalloc(&wb, 2 * (size_t)in.N * in.K));
    CK(cudaMalloc(&xb, 2 * (size_t)T * in.K));
    CK(cudaMalloc(&yb, 4 * (size_t)T * in.N));
    CK(cudaMemset(wb, 0, 2 * (size_t)in.N * in.K));
    CK(cudaMemset(xb, 0, 2 * (size_t)T * in.K));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time = [&](auto fn) {
        for (int i = 0; i < 3; i++) fn();
        const int R = 20;
        CK(cudaEventRecord(e0));
        for (int i = 0; i < R; i++) fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return 1e3 * ms / R;
    };
    /* the fused kernel on grids of every SM and a few less (clusters a GPC cannot place would run
     * in a second round): the best, and each */
    double us_wg = 1e30;
    char grids[160] = "";
    const int S = IG_A8_WG_SPLITS(T, in.N, in.K, nsm, WG_CL, 64); /* K splits where the tiles are few */
    for (int less : {0, 4, 8, 16}) {
        const int grid = IG_A8_WG_GRID(T, in.N, nsm - less, WG_CL, S);
        const double us = time([&] { (void)launch(in, o, grid, S); });
        snprintf(grids + strlen(grids), sizeof grids - strlen(grids), " %d:%.1f", grid, us);
        if (us < us_wg) us_wg = us;
    }
    const int32_t ai = 1, bi = 0;
    const float af = 1, bf = 0;
    const int NP = o.NP;
    const double us_i8 = time([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, NP, T, in.K, &ai, o.w, CUDA_R_8I, in.K + 16, o.x, CUDA_R_8I, in.K, &bi, acc, CUDA_R_32I,
                     NP, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
        in.dq<<<dim3(IG_A8_DQ_GRID_X(in.N, in.glu), IG_A8_DQ_GRID_Y(T)), IG_A8_BLOCK>>>(T, acc, o.xs, o.w, nullptr, o.y);
    });
    const double us_bf = time([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, in.N, T, in.K, &af, wb, CUDA_R_16BF, in.K, xb, CUDA_R_16BF, in.K, &bf, yb, CUDA_R_32F,
                     in.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    CK(cudaGetLastError());
    const double f = 2.0 * T * in.N * in.K * 1e-6;
    printf("bench %-9s T=%5d: fused (%2d K splits) %7.1f us (%4.0f TOP/s), cuBLAS int8 + dq %7.1f us (%4.0f), cuBLAS bf16 %7.1f us (%4.0f TFLOP/s)"
           "; fused / bf16 %.2fx; grid:us%s\n",
           in.name, T, S, us_wg, f / us_wg, us_i8, f / us_i8, us_bf, f / us_bf, us_bf / us_wg, grids);
    cudaFree(acc), cudaFree(wb), cudaFree(xb), cudaFree(yb);
    drop(o);
}

/* --profile NAME T: one instance (the 1B's "qkv", "o", "gu", "down") at T tokens, three launches on the
 * default grid and nothing else, for a profiler: ncu -k regex:wg_gu --launch-skip 2 --launch-count 1
 * --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats test_act8_wg_cl2
 * --profile gu 2048 (scripts/gpu_check.sh does not run it) */
static int profile(const inst *all, int n, const char *name, int T, int nsm) {
    for (int i = 0; i < n; i++) {
        if (strcmp(all[i].name + 3, name) != 0 || strncmp(all[i].name, "1B ", 3) != 0) continue;
        opnds o;
        make(o, all[i], T);
        const int S = IG_A8_WG_SPLITS(T, all[i].N, all[i].K, nsm, WG_CL, 1), grid = IG_A8_WG_GRID(T, all[i].N, nsm, WG_CL, S);
        for (int r = 0; r < 3; r++)
            if (!launch(all[i], o, grid, S)) return fprintf(stderr, "a tensor map was refused\n"), 1;
        CK(cudaDeviceSynchronize());
        drop(o);
        printf("profiled %s at T=%d: three launches on %d CTAs\n", all[i].name, T, grid);
        return 0;
    }
    return fprintf(stderr, "--profile: no instance \"1B %s\" (qkv, o, gu, down)\n", name), 1;
}

int main(int argc, char **argv) {
    cudaDeviceProp p;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9) {
        printf("SKIP: no sm_90 GPU\n");
        return 0;
    }
    const bool no_bench = argc > 1 && !strcmp(argv[1], "--no-bench");
    printf("device: %s, %d SMs, clusters of %d CTAs\n", p.name, p.multiProcessorCount, WG_CL);
    const inst all[] = {
        {"plain", wg_plain, nullptr, 400, 600, 616, 1, 0, 0},     {"residual", wg_acc, nullptr, 256, 300, 300, 0, 1, 0},
        {"swiglu", wg_swiglu, nullptr, 208, 544, 544, 1, 0, 1},   {"geglu", wg_geglu, nullptr, 128, 256, 256, 0, 0, 2},
        {"1B qkv", wg_qkv, dq_qkv, 2048, 3072, 3072, 0, 0, 0},     {"1B o", wg_o, dq_o, 2048, 2048, 2048, 0, 1, 0},
        {"1B gu", wg_gu, dq_gu, 2048, 16384, 16384, 0, 0, 1},     {"1B down", wg_down, dq_down, 8192, 2048, 2048, 0, 1, 0},
    };
    for (const inst &in : all) CK(cudaFuncSetAttribute(in.wg, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_A8_WG_SMEM));
    { /* how many clusters of WG_CL fit at once: a persistent grid of more runs some in a second round */
        cudaLaunchConfig_t lc = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension, at[0].val.clusterDim.x = WG_CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
        lc.gridDim = dim3(WG_CL * 64), lc.blockDim = dim3(IG_A8_WG_THREADS), lc.dynamicSmemBytes = IG_A8_WG_SMEM;
        lc.attrs = at, lc.numAttrs = WG_CL > 1 ? 1 : 0;
        int ncl = 0;
        if (cudaOccupancyMaxActiveClusters(&ncl, (const void *)all[6].wg, &lc) == cudaSuccess)
            printf("occupancy: at most %d clusters of %d CTAs at once (%d CTAs)\n", ncl, WG_CL, ncl * WG_CL);
        else
            printf("occupancy query failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    }
    CK(cudaMalloc(&g_part, (size_t)IG_A8_WG_PITEMS * IG_A8_WG_BM * IG_A8_WG_BN * 4));
    CK(cudaMalloc(&g_cnt, 4 * IG_A8_WG_PITEMS));
    CK(cudaMemset(g_cnt, 0, 4 * IG_A8_WG_PITEMS));
    const int nsm = p.multiProcessorCount;
    if (argc > 3 && !strcmp(argv[1], "--profile")) return profile(all, (int)(sizeof all / sizeof all[0]), argv[2], atoi(argv[3]), nsm);
    int fails = 0;
    for (int i = 0; i < 4; i++)
        for (int T : {128, 129, 300, 520}) { /* a step of fewer tokens than a box takes cuBLAS (no tensor map) */
            fails += check(all[i], T, IG_A8_WG_GRID(T, all[i].N, nsm, WG_CL, 1));
            fails += check(all[i], T, WG_CL); /* one CTA (cluster) walks every tile */
        }
    for (int i = 4; i < 8; i++) fails += check(all[i], 257, IG_A8_WG_GRID(257, all[i].N, nsm, WG_CL, 1));
    /* K split (a8_wg_split): uneven ranges, more items than CTAs, steps of fewer tokens than a tile */
    for (int i = 0; i < 4; i++)
        for (int T : {33, 129, 300}) {
            const int kt = (all[i].K + 127) / 128, S = kt < 3 ? kt : 3;
            if (S > 1) fails += check(all[i], T, IG_A8_WG_GRID(T, all[i].N, nsm, WG_CL, S), S), fails += check(all[i], T, WG_CL, S);
            else fails += check(all[i], T, IG_A8_WG_GRID(T, all[i].N, nsm, WG_CL, 1));
        }
    for (int i = 4; i < 8; i++) {
        const int S = IG_A8_WG_SPLITS(128, all[i].N, all[i].K, nsm, WG_CL, 64);
        fails += check(all[i], 128, IG_A8_WG_GRID(128, all[i].N, nsm, WG_CL, S), S);
        fails += check(all[i], 40, IG_A8_WG_GRID(40, all[i].N, nsm, WG_CL, S), S);
    }
    if (!no_bench) {
        cublasHandle_t h;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return fprintf(stderr, "cublasCreate failed\n"), 1;
        for (int T : {2048, 128, 32})
            for (int i = 4; i < 8; i++) bench(all[i], T, nsm, h);
        cublasDestroy(h);
    }
    printf(fails ? "test_act8_wg: %d failed\n" : "test_act8_wg: all passed\n", fails);
    return fails != 0;
}
