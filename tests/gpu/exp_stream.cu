/* exp_stream.cu — experiment for issue 5's decode goal: the four GEMVs of 16 Llama-3.2-1B layers
 * (qkv with RMSNorm fused, o + residual, gate/up with RMSNorm and SwiGLU, down + residual;
 * attention left out, a grid barrier in its place) run as
 *   separate:  64 gemv.cu kernels replayed as one CUDA graph (the decode step's GEMVs today);
 *   stream:    one cooperative persistent kernel, weights streamed through a shared-memory ring
 *              by TMA bulk copies (stream.cuh), grid barriers between phases;
 *   drain:     the same kernel with the consumers only releasing slots (the stream's ceiling);
 *   L2-fed:    the stream kernel reading every matrix's rows modulo 8 (L2-resident);
 *   no feed:   the producer completes each slot without copying (the consumers' own time).
 * (Tagged activations polled by their readers instead of grid barriers were measured here too and
 * dropped: SPEC.md, branch `tagged`.)
 * Results of separate and stream must agree to bf16 rounding (summation order differs). After the
 * stream / L2-fed / no-feed runs it prints each CTA's waits (consumer for a slot, producer for a
 * free slot or for its copies in flight) and a per-phase trace, from hooks that touch only shared
 * memory; -DNO_TRACE builds without them (the timings to quote). EXP_WAYS=n runs the first n ways.
 *
 * -DEXP_WQ=8 (q8r) or -DEXP_WQ=4 -DEXP_WG=G (q4r, groups of G) runs the same ways on quantized rows
 * (wq.cuh; random codes, scales of the size a1B-shaped a16w8 / a16w4 package has), with slots of
 * 16 KB + 256 as codegen sizes them; bytes and GB/s are then the quantized rows'. -DEXP_NSLOT=n
 * sets the ring's slots (codegen gives the 1B package 12), -DEXP_SLOT=n the bytes of a slot.
 *
 *   nvcc -O3 -arch=sm_90 -Itemplates/cuda [-DNO_TRACE] [-DEXP_WQ=8] tests/gpu/exp_stream.cu -o exp_stream && ./exp_stream
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define HID 2048
#define QKV 3072
#define INTER 8192
#define LAYERS 16
#ifndef EXP_WQ
#define EXP_WQ 0
#endif
#ifndef EXP_WG
#define EXP_WG 32
#endif
#ifdef EXP_SLOT
#define IG_ST_SLOT EXP_SLOT
#elif EXP_WQ
#define IG_ST_SLOT (16384 + 256)
#endif
#ifdef EXP_NSLOT
#define IG_ST_NSLOT EXP_NSLOT
#endif
/* gemv.cu's grid for N rows of K weights */
#define EXP_GX(N, K, MAXC) (EXP_WQ ? IG_MV_GRID_XB(N, IG_WQ_CODEB(K, EXP_WQ), MAXC) : IG_MV_GRID_X(N, K, 2, MAXC))
/* bytes of a row of K weights */
#define EXP_RB(K) (EXP_WQ ? IG_WQ_ROWB(K, EXP_WQ, EXP_WG) : 2 * (K))

#define MV_NAME k_qkv
#define MV_K HID
#define MV_N QKV
#define MV_NORM 1
#define MV_WQ EXP_WQ
#define MV_WG EXP_WG
#include "gemv.cu"
#define MV_NAME k_o
#define MV_K HID
#define MV_N HID
#define MV_EPI 1
#define MV_WQ EXP_WQ
#define MV_WG EXP_WG
#include "gemv.cu"
#define MV_NAME k_gu
#define MV_K HID
#define MV_N (2 * INTER)
#define MV_EPI 2
#define MV_YBF16 1
#define MV_NORM 1
#define MV_WQ EXP_WQ
#define MV_WG EXP_WG
#include "gemv.cu"
#define MV_NAME k_down
#define MV_K INTER
#define MV_N HID
#define MV_EPI 1
#define MV_WQ EXP_WQ
#define MV_WG EXP_WG
#include "gemv.cu"
__device__ unsigned long long g_trace[132][64][5];
static __device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
/* timing hooks write shared memory only (st->stat: [0..2] waits in cycles, [3] phase, [4 + 5 p + k]
 * marks in ns); the kernel copies them out at its end. -DNO_TRACE leaves the hooks out. */
#define IG_ST_STATS (4 + 64 * 5)
#ifndef NO_TRACE
#define IG_ST_MARK(k)                                                                \
    do {                                                                             \
        if (threadIdx.x == 0) {                                                      \
            const int ph_ = (int)st->stat[3];                                        \
            if (ph_ < 64) st->stat[4 + ph_ * 5 + (k)] = gtime();                     \
            if ((k) == 4) st->stat[3]++;                                             \
        }                                                                            \
    } while (0)
#endif
__device__ unsigned long long g_wait[132][3];
__device__ int g_l2feed;
#ifndef NO_TRACE
#define IG_ST_TIMED(k, stmt)                                                       \
    do {                                                                           \
        const long long t0_ = clock64();                                           \
        stmt;                                                                      \
        if (threadIdx.x == 0 || threadIdx.x == IG_ST_CTHREADS)                     \
            st->stat[k] += (unsigned long long)(clock64() - t0_);                  \
    } while (0)
#endif
/* no-feed runs: the producer completes each slot's barrier without copying (the slots hold
 * garbage): the kernel time is the consumers' alone */
__device__ int g_nofeed;
#define IG_ST_FEED(dst, src, bytes, bar)                                                        \
    do {                                                                                        \
        if (g_nofeed) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ig_st_sa(bar)) : "memory"); \
        else ig_st_bulk(dst, src, bytes, bar);                                                  \
    } while (0)
/* L2-fed runs: every matrix's rows are read modulo 8 (8 MB in all, L2-resident), so the ring
 * fills faster than the consumers drain it and the kernel time is the consumers' */
#define IG_ST_SRC(w, r, K) (g_l2feed ? (w) + (size_t)((r) % 8) * (K) : (w) + (size_t)(r) * (K))
#define IG_ST_SRCQ(w, r, RB) (g_l2feed ? (w) + (size_t)((r) % 8) * (RB) : (w) + (size_t)(r) * (RB))
#include "stream.cuh"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

typedef unsigned short bf16;
struct layer_w {
    const unsigned char *qkv, *o, *gu, *down; /* rows of EXP_RB(K) bytes */
    const float *g1, *g2;
};

template <int K>
__device__ void drain(ig_st *st, int n_rows, int unit, int rot, unsigned *it) {
    int r0, r1;
    ig_st_rows(n_rows, unit, rot, &r0, &r1);
    for (int r = r0; r < r1; r += ig_st_shape<K, EXP_WQ, EXP_WG>::R) {
        const int slot = (int)(*it % IG_ST_NSLOT);
        ig_mb_wait(&st->full[slot], (*it / IG_ST_NSLOT) & 1);
        __syncwarp();
        if ((threadIdx.x & 31) == 0) ig_mb_arrive(&st->empty[slot]);
        ++*it;
    }
}

#ifndef PF
#define PF 1
#endif
__global__ void __launch_bounds__(IG_ST_THREADS, 1)
stream_layers(const layer_w *L, int n_layers, float *resid, float *qkv, const bf16 *attn, bf16 *h,
              unsigned long long *bar, int mode) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ ig_st st;
    for (int i = threadIdx.x; i < IG_ST_STATS; i += blockDim.x) st.stat[i] = 0;
    ig_st_init(&st, bar, gridDim.x);
    unsigned it = 0;
    if (threadIdx.x >= IG_ST_CTHREADS) {
        if (threadIdx.x == IG_ST_CTHREADS && mode != 2) {
            for (int l = 0; l < n_layers; l++) {
                const int p = 4 * l;
                ig_st_produce<HID, EXP_WQ, EXP_WG>(&st, ring, L[l].qkv, QKV, 1, p * 41, &it, PF ? L[l].g1 : NULL, HID * 4);
                ig_st_produce<HID, EXP_WQ, EXP_WG>(&st, ring, L[l].o, HID, 1, (p + 1) * 41, &it);
                ig_st_produce<HID, EXP_WQ, EXP_WG>(&st, ring, L[l].gu, 2 * INTER, 32, (p + 2) * 41, &it, PF ? L[l].g2 : NULL, HID * 4);
                ig_st_produce<INTER, EXP_WQ, EXP_WG>(&st, ring, L[l].down, HID, 1, (p + 3) * 41, &it);
            }
        }
        return;
    }
    const unsigned G = gridDim.x;
    if (mode == 2) { /* grid barriers only */
        for (int l = 0; l < 5 * n_layers; l++) ig_st_grid_sync(&st, bar, G);
        return;
    }
    for (int l = 0; l < n_layers; l++) {
        const int p = 4 * l;
        if (mode == 1) {
            drain<HID>(&st, QKV, 1, p * 41, &it);
            drain<HID>(&st, HID, 1, (p + 1) * 41, &it);
            drain<HID>(&st, 2 * INTER, 32, (p + 2) * 41, &it);
            drain<INTER>(&st, HID, 1, (p + 3) * 41, &it);
            continue;
        }
        ig_st_gemv_tc<HID, 0, true, false, false, false, EXP_WQ, EXP_WG>(&st, ring, QKV, QKV, p * 41, resid, L[l].g1, 1e-5f, NULL, qkv, &it, l ? bar : NULL);
        ig_st_grid_sync(&st, bar, G); /* attention would run here */
        ig_st_gemv_tc<HID, 1, false, false, false, false, EXP_WQ, EXP_WG>(&st, ring, HID, HID, (p + 1) * 41, attn, NULL, 0.f, NULL, resid, &it, bar);
        ig_st_gemv_tc<HID, 2, true, false, false, false, EXP_WQ, EXP_WG>(&st, ring, 2 * INTER, INTER, (p + 2) * 41, resid, L[l].g2, 1e-5f, NULL, h, &it, bar);
        ig_st_gemv_tc<INTER, 1, false, false, false, false, EXP_WQ, EXP_WG>(&st, ring, HID, HID, (p + 3) * 41, h, NULL, 0.f, NULL, resid, &it, bar);
    }
    ig_st_cbar();
    if (threadIdx.x == 0 && blockIdx.x < 132) {
        for (int k = 0; k < 3; k++) g_wait[blockIdx.x][k] = st.stat[k];
        for (int k = 0; k < 64 * 5; k++) g_trace[blockIdx.x][k / 5][k % 5] = st.stat[4 + k];
    }
}

static void fill_bf16(bf16 *d, size_t n, uint64_t seed, float scale) {
    std::vector<bf16> h(n);
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        float f = ((float)((seed >> 40) * (1.0 / 8388608.0)) - 1.0f) * scale;
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
}

/* n quantized rows of K weights: random codes, then their scales (q8r: f32 scale 1.5e-4, as
 * max|w| / 127 of weights of about 0.02; q4r: f16 scale 2.5e-3 and min -0.02 per group) */
static void fill_wq(unsigned char *d, size_t n, int K, uint64_t seed) {
    const size_t rb = EXP_RB(K), cb = IG_WQ_CODEB(K, EXP_WQ);
    std::vector<unsigned char> h(n * rb, 0);
    for (size_t r = 0; r < n; r++) {
        unsigned char *row = h.data() + r * rb;
        for (size_t i = 0; i < cb; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            row[i] = (unsigned char)(seed >> 32);
        }
        if (EXP_WQ == 8) {
            const float sc = 1.5e-4f;
            memcpy(row + cb, &sc, 4);
        } else {
            const unsigned short sc = 0x1920, mn = 0xa51f; /* f16 2.5e-3, -0.02 */
            for (int g = 0; g < K / EXP_WG; g++) memcpy(row + cb + 4 * g, &sc, 2), memcpy(row + cb + 4 * g + 2, &mn, 2);
        }
    }
    CK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
}

int main() {
    setvbuf(stdout, NULL, _IOLBF, 0);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    const size_t n_qkv = (size_t)QKV * HID, n_o = (size_t)HID * HID, n_gu = (size_t)2 * INTER * HID, n_dn = (size_t)HID * INTER;
    const size_t b_qkv = (size_t)QKV * EXP_RB(HID), b_o = (size_t)HID * EXP_RB(HID), b_gu = (size_t)2 * INTER * EXP_RB(HID),
                 b_dn = (size_t)HID * EXP_RB(INTER), b_l = b_qkv + b_o + b_gu + b_dn;
    const double bytes = (double)LAYERS * b_l;
    (void)n_qkv, (void)n_o, (void)n_gu, (void)n_dn;
    std::vector<layer_w> hl(LAYERS);
    std::vector<float> ones(HID, 1.0f);
    for (int l = 0; l < LAYERS; l++) {
        unsigned char *p;
        float *g;
        CK(cudaMalloc(&p, b_l));
        if (EXP_WQ) {
            fill_wq(p, QKV, HID, 0x9e3779b97f4a7c15ull + l);
            fill_wq(p + b_qkv, HID, HID, 0x1234567ull + l);
            fill_wq(p + b_qkv + b_o, 2 * INTER, HID, 0x7654321ull + l);
            fill_wq(p + b_qkv + b_o + b_gu, HID, INTER, 0xabcdefull + l);
        } else {
            fill_bf16((bf16 *)p, b_l / 2, 0x9e3779b97f4a7c15ull + l, 0.02f);
        }
        CK(cudaMalloc(&g, 2 * HID * 4));
        CK(cudaMemcpy(g, ones.data(), HID * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g + HID, ones.data(), HID * 4, cudaMemcpyHostToDevice));
        hl[l] = {p, p + b_qkv, p + b_qkv + b_o, p + b_qkv + b_o + b_gu, g, g + HID};
    }
    layer_w *dl;
    CK(cudaMalloc(&dl, sizeof(layer_w) * LAYERS));
    CK(cudaMemcpy(dl, hl.data(), sizeof(layer_w) * LAYERS, cudaMemcpyHostToDevice));
    float *resid, *qkv, *resid0;
    bf16 *attn, *h;
    unsigned long long *bar;
    CK(cudaMalloc(&resid, HID * 4)); CK(cudaMalloc(&resid0, HID * 4)); CK(cudaMalloc(&qkv, QKV * 4));
    CK(cudaMalloc(&attn, HID * 2)); CK(cudaMalloc(&h, INTER * 2)); CK(cudaMalloc(&bar, 4096));
    CK(cudaMemset(bar, 0, 4096)); /* arrival counter at [0], generation flag at [16] */
    fill_bf16(attn, HID, 7, 1.0f);
    {
        std::vector<float> r(HID);
        for (int i = 0; i < HID; i++) r[i] = (float)((i * 37 % 101) - 50) / 25.0f;
        CK(cudaMemcpy(resid0, r.data(), HID * 4, cudaMemcpyHostToDevice));
    }
    const int maxc = sms * IG_MV_CTAS_PER_SM, smem_k = IG_MV_SMEM(INTER, 2);
    for (const void *f : {(const void *)k_qkv, (const void *)k_o, (const void *)k_gu, (const void *)k_down})
        CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_k));
    const int ring_bytes = IG_ST_NSLOT * IG_ST_SLOT;
    CK(cudaFuncSetAttribute((const void *)stream_layers, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int T = 1;
    const float *nul = NULL;

    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < LAYERS; l++) {
        void *a1[] = {&T, &resid, (void *)&hl[l].g1, (void *)&hl[l].qkv, &nul, &qkv};
        CK(cudaLaunchKernel((const void *)k_qkv, dim3(EXP_GX(QKV, HID, maxc)), dim3(IG_MV_BLOCK), a1, IG_MV_SMEM(HID, 2), s));
        void *a2[] = {&T, &attn, &nul, (void *)&hl[l].o, &nul, &resid};
        CK(cudaLaunchKernel((const void *)k_o, dim3(EXP_GX(HID, HID, maxc)), dim3(IG_MV_BLOCK), a2, IG_MV_SMEM(HID, 2), s));
        void *a3[] = {&T, &resid, (void *)&hl[l].g2, (void *)&hl[l].gu, &nul, &h};
        CK(cudaLaunchKernel((const void *)k_gu, dim3(EXP_GX(2 * INTER, HID, maxc)), dim3(IG_MV_BLOCK), a3, IG_MV_SMEM(HID, 2), s));
        void *a4[] = {&T, &h, &nul, (void *)&hl[l].down, &nul, &resid};
        CK(cudaLaunchKernel((const void *)k_down, dim3(EXP_GX(HID, INTER, maxc)), dim3(IG_MV_BLOCK), a4, IG_MV_SMEM(INTER, 2), s));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));

    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_layers, IG_ST_THREADS, ring_bytes));
    const int grid = sms;
    int nl = LAYERS, mode = 0;
    void *ap[] = {&dl, &nl, &resid, &qkv, &attn, &h, &bar, &mode};
    printf("device %s, %d SMs; stream grid %d CTAs x %d threads, ring %d KB (%d per SM fit)\n", prop.name, sms, grid,
           IG_ST_THREADS, ring_bytes / 1024, per_sm);
    if (per_sm < 1) return 1;

    std::vector<float> r_sep(HID), r_st(HID), q_sep(QKV), q_st(QKV);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    const char *names[] = {"separate (64 kernels, graph)", "stream (1 launch)", "drain (stream only)",
                           "80 grid barriers only", "stream, L2-fed", "no feed (consumers alone)"};
    const int nway = getenv("EXP_WAYS") ? atoi(getenv("EXP_WAYS")) : 6;
    for (int way = 0; way < nway; way++) {
        const int l2feed = way == 4, nofeed = way == 5;
        CK(cudaMemcpyToSymbol(g_l2feed, &l2feed, sizeof l2feed));
        CK(cudaMemcpyToSymbol(g_nofeed, &nofeed, sizeof nofeed));
        float best = 1e30f, sum = 0;
        mode = way == 2 ? 1 : way == 3 ? 2 : 0;
        for (int rep = 0; rep < 30; rep++) {
            CK(cudaMemcpyAsync(resid, resid0, HID * 4, cudaMemcpyDeviceToDevice, s));
            CK(cudaEventRecord(e0, s));
            if (way == 0) CK(cudaGraphLaunch(ge, s));
            else CK(cudaLaunchCooperativeKernel((const void *)stream_layers, dim3(grid), dim3(IG_ST_THREADS), ap, ring_bytes, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (ms < best) best = ms;
            if (rep >= 10) sum += ms;
        }
        if (way < 2) {
            CK(cudaMemcpy(way ? r_st.data() : r_sep.data(), resid, HID * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(way ? q_st.data() : q_sep.data(), qkv, QKV * 4, cudaMemcpyDeviceToHost));
        }
        printf("%-30s best %7.1f us (mean %7.1f) for %d layers = %5.1f us/layer, %5.0f GB/s\n", names[way], best * 1e3,
               sum / 20 * 1e3, LAYERS, best * 1e3 / LAYERS, bytes / (best * 1e-3) / 1e9);
        if (way == 1 || way >= 4) { /* waits of the last run, per CTA: mean / max in us */
            static unsigned long long w[132][3];
            CK(cudaMemcpyFromSymbol(w, g_wait, sizeof w));
            double mn[3] = {0}, mx[3] = {0};
            int khz = 0;
            CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
            const double cyc_us = khz * 1e-3; /* cycles per us (max clock) */
            for (int c = 0; c < grid && c < 132; c++)
                for (int k = 0; k < 3; k++) mn[k] += w[c][k] / cyc_us / grid, mx[k] = fmax(mx[k], w[c][k] / cyc_us);
            printf("  waits (us at %.0f MHz, mean / max over CTAs): consumer slot %.1f / %.1f, producer ring full %.1f / %.1f, "
                   "in flight %.1f / %.1f\n", cyc_us, mn[0], mx[0], mn[1], mx[1], mn[2], mx[2]);
            static unsigned long long tr[132][64][5];
            CK(cudaMemcpyFromSymbol(tr, g_trace, sizeof tr));
            printf("  per phase, layers 2..13, over the %d CTAs: mean / max of sync wait, x ready, slots, epilogue (ns)\n", grid);
            for (int ph = 0; ph < 4; ph++) {
                double mean[4] = {0}, mx[4] = {0};
                int cnt = 0;
                for (int l = 2; l < 14; l++)
                    for (int c = 0; c < grid && c < 132; c++) {
                        const unsigned long long *q = tr[c][4 * l + ph];
                        for (int k = 0; k < 4; k++) {
                            const double d = (double)(q[k + 1] - q[k]);
                            mean[k] += d, mx[k] = d > mx[k] ? d : mx[k];
                        }
                        cnt++;
                    }
                printf("  %-5s", (const char *[]){"qkv", "o", "gu", "down"}[ph]);
                for (int k = 0; k < 4; k++) printf("  %6.0f / %6.0f", mean[k] / cnt, mx[k]);
                printf("\n");
            }
        }
    }
    double mr = 0, dr = 0, mq = 0, dq = 0;
    for (int i = 0; i < HID; i++) mr = fmax(mr, fabs(r_sep[i])), dr = fmax(dr, fabs(r_sep[i] - r_st[i]));
    for (int i = 0; i < QKV; i++) mq = fmax(mq, fabs(q_sep[i])), dq = fmax(dq, fabs(q_sep[i] - q_st[i]));
    printf("resid max|sep| %.4g max|diff| %.3g (%.2e rel); qkv max %.4g diff %.3g (%.2e rel)\n", mr, dr, dr / mr, mq, dq,
           dq / mq);
    int bad = !(dr <= 2e-2 * mr) || !(dq <= 2e-2 * mq);
    printf("results %s\n", bad ? "DIFFER (bug)" : "agree");
    return bad;
}
