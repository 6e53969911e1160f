/* mbar.cuh — the asynchronous pieces of the kernels that split a CTA into a producer and consumers
 * (stream.cuh's persistent decode, attention_prefill.cu's _flash_ws, moe.cu's and act8.cu's wgmma
 * products): shared-memory mbarriers, named barriers, TMA tile loads through a tensor map, and the
 * ring of stages with a full and an empty barrier each (ig_ring_*, at the end).
 *
 * An mbarrier (a 64-bit word in shared memory) completes a phase when its expected arrivals have
 * arrived and the bytes it was told to expect have landed; waiters name the parity of the phase
 * they wait for (a stage used for the u-th time waits for parity u & 1 on its "full" barrier; its
 * producer waits for parity (u - 1) & 1 on its "empty" one before refilling it). ig_mb_fence_init
 * after initialising makes the barriers visible to the copy engines (TMA, bulk copies), and a
 * block barrier then to the other threads.
 *
 * ig_tmap is CUtensorMap's 128 bytes (cuda.h's type is not available under NVRTC), passed to a
 * kernel by value as a __grid_constant__ parameter; host code encodes it with the driver's
 * cuTensorMapEncodeTiled (host_runtime.c: the KV pool as rows of head_dim 16-bit elements, a box of
 * 64 columns in the 128-byte swizzle that wgmma.cuh's tiles use). ig_tma_load2 copies the box at
 * (column x, row y) to shared address dst (1024-aligned where the swizzle must match wgmma.cuh's:
 * the hardware swizzles by address bits) and counts its bytes on the barrier; rows or columns
 * past the tensor's dimensions land as zeros.
 *
 * Named barriers (bar.sync id, n) synchronise one warpgroup without the rest of the CTA; ids 1..15
 * (0 is __syncthreads). ig_setmaxnreg_dec / _inc (sm_90a) move registers between a CTA's warpgroups:
 * a producer that needs few gives them to the consumers (every thread of a warpgroup calls it).
 *
 * tests/cuda_host/emul_extra.h states the same functions for the host emulation: an mbarrier is a
 * word of arrivals left, count and parity; a copy lands at once (swizzled as the hardware does) and
 * arrives; a waiter yields its fiber. */
#ifndef IG_CUDA_MBAR_CUH
#define IG_CUDA_MBAR_CUH

#include "mma.cuh"

#ifndef IG_CUDA_EMUL
struct __align__(64) ig_tmap {
    unsigned long long w[16];
};
#endif

#if defined(__CUDACC__) && !defined(IG_CUDA_EMUL) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)

IG_DEV void ig_mb_init(unsigned long long *b, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ig_smem_addr(b)), "r"(n) : "memory");
}
IG_DEV void ig_mb_arrive(unsigned long long *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ig_smem_addr(b)) : "memory");
}
IG_DEV void ig_mb_wait(unsigned long long *b, unsigned parity) {
    unsigned ok;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(ig_smem_addr(b)), "r"(parity)
                     : "memory");
    } while (!ok);
}
/* The barrier expects `bytes` more (the copies that bring them follow) and takes the caller's
 * arrival: its phase completes when they have landed. */
IG_DEV void ig_mb_expect(unsigned long long *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ig_smem_addr(bar)), "r"(bytes) : "memory");
}
IG_DEV void ig_mb_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
IG_DEV void ig_bar_named(unsigned id, unsigned n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* a warpgroup's registers a thread, given back (dec) or taken (inc) within the CTA (sm_90a) */
template <int N>
IG_DEV void ig_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
IG_DEV void ig_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
IG_DEV void ig_tma_load2(unsigned dst, const ig_tmap *map, int x, int y, unsigned long long *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"(map), "r"(x), "r"(y), "r"(ig_smem_addr(bar))
                 : "memory");
}
/* Clusters (A8_WG_CL 2: act8.cu's CTAs in pairs sharing each weight box). ig_tma_load2_mc: the box
 * lands at dst in every CTA of `mask` (cluster ranks), each one's barrier at bar's offset counting its
 * bytes. ig_mb_arrive_cl: an arrival on the barrier at b's offset in CTA `rank` of the cluster, at
 * the default .release.cta semantics (a stage given back after wgmma's reads are complete; the
 * .release.cluster form compiles to a GPU-scope MEMBAR before each arrive: SPEC.md). ig_cluster_sync:
 * every thread of the cluster (barriers initialised before, all arrivals done after). */
IG_DEV void ig_tma_load2_mc(unsigned dst, const ig_tmap *map, int x, int y, unsigned long long *bar, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
                 "l"(map), "r"(x), "r"(y), "r"(ig_smem_addr(bar)), "h"(mask)
                 : "memory");
}
IG_DEV void ig_mb_arrive_cl(unsigned long long *b, unsigned rank) {
    asm volatile("{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, %0, %1;\n\tmbarrier.arrive.shared::cluster.b64 _, [ra];\n\t}" ::"r"(ig_smem_addr(b)),
                 "r"(rank)
                 : "memory");
}
IG_DEV unsigned ig_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
IG_DEV void ig_cluster_sync() { asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory"); }
#endif
#endif /* sm_80+ device code */

#if defined(IG_CUDA_EMUL) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
/* A ring of NST stages between one producer thread and the consumer warps (moe.cu's _wg_run,
 * act8.cu's A8_WG_NAME): bars[0][s] full (one arrival, the producer's expect of the stage's bytes),
 * bars[1][s] empty (one arrival a consumer warp); step g of a run uses stage g % NST for the
 * (g / NST)-th time. ig_ring_init by thread 0 (a block barrier follows); ig_ring_fill: the producer's
 * wait for the stage's previous use to be given back, then its expect (the copies follow);
 * ig_ring_take: a consumer's wait for step g's bytes. Both return the stage. */
template <int NST>
IG_DEV void ig_ring_init(unsigned long long (&bars)[2][NST], unsigned consumer_warps) {
    for (int i = 0; i < NST; i++) ig_mb_init(&bars[0][i], 1), ig_mb_init(&bars[1][i], consumer_warps);
    ig_mb_fence_init();
}
template <int NST>
IG_DEV int ig_ring_fill(unsigned long long (&bars)[2][NST], int g, unsigned bytes) {
    const int st = g % NST, u = g / NST;
    if (u) ig_mb_wait(&bars[1][st], (unsigned)(u - 1) & 1u);
    ig_mb_expect(&bars[0][st], bytes);
    return st;
}
template <int NST>
IG_DEV int ig_ring_take(unsigned long long (&bars)[2][NST], int g) {
    const int st = g % NST;
    ig_mb_wait(&bars[0][st], (unsigned)(g / NST) & 1u);
    return st;
}
#endif

#endif /* IG_CUDA_MBAR_CUH */
