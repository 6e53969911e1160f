/* mbar.cuh — shared-memory mbarriers (sm_90: try_wait.parity) for the kernels whose producers and
 * consumers hand stages over without a block barrier: stream.cuh's weight ring (the persistent
 * decode kernel) and moe.cu's warpgroup products. A barrier is a 64-bit word in shared memory,
 * initialized by one thread with its arrival count (then ig_mbar_fence_init and a block barrier);
 * each phase completes when that many arrivals came, and waiters wait for a phase by its parity.
 * ig_mbar_cp_arrive arrives once this thread's earlier cp.async copies have landed (the arrival
 * counts in the barrier's count: .noinc). tests/cuda_host/cuda_emul.h states the same functions for
 * the host emulation. */
#ifndef IG_CUDA_MBAR_CUH
#define IG_CUDA_MBAR_CUH

#include "common.cuh"

#ifndef IG_CUDA_EMUL
IG_DEV unsigned ig_mbar_sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

IG_DEV void ig_mbar_init(unsigned long long *b, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ig_mbar_sa(b)), "r"(n) : "memory");
}
IG_DEV void ig_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
IG_DEV void ig_mbar_arrive(unsigned long long *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ig_mbar_sa(b)) : "memory");
}
IG_DEV void ig_mbar_cp_arrive(unsigned long long *b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(ig_mbar_sa(b)) : "memory");
}
/* returns once the phase of this parity has completed */
IG_DEV void ig_mbar_wait(unsigned long long *b, unsigned parity) {
    unsigned ok;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(ig_mbar_sa(b)), "r"(parity)
                     : "memory");
    } while (!ok);
}
#endif
#endif /* IG_CUDA_MBAR_CUH */
