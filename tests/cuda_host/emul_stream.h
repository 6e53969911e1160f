/* emul_stream.h — host stand-ins for stream.cuh's PTX primitives, so its GEMV phases run in the
 * host emulation (tests/cuda_host/test_stream_gemv.cpp): an mbarrier is a 64-bit word (arrivals
 * left in bits 0..31, the arrival count in bits 32..62, the completed-phase parity in bit 63), a
 * bulk copy lands at once and arrives, a waiter yields its fiber until the phase it waits for has
 * completed, barrier 1 is cuda_emul.h's named barrier of the consumer threads, the grid barrier's
 * arrival and poll are plain memory operations (one CTA runs at a time: grids of one CTA), mma.sync
 * m16n8k16 (bf16) and m16n8k32 (s8 x s8 / u8) go through cuda_emul.h's per-lane slots. Include after
 * emul_extra.h, before stream.cuh. Test code only. */
#ifndef IG_EMUL_STREAM_H
#define IG_EMUL_STREAM_H

#include "emul_extra.h"

using std::max;
using std::min;

IG_DEV void ig_st_mbar_init(unsigned long long *b, unsigned n) { *b = (unsigned long long)n << 32 | n; }
IG_DEV void ig_st_mbar_arrive(unsigned long long *b) {
    const unsigned long long v = *b, n = (v >> 32) & 0x7fffffffull;
    const unsigned left = (unsigned)v - 1u;
    *b = left ? (v & ~0xffffffffull) | left : ((v & (1ull << 63)) ^ (1ull << 63)) | n << 32 | n;
}
/* returns once the phase of this parity has completed (the current parity differs) */
IG_DEV void ig_st_mbar_wait(unsigned long long *b, unsigned parity) {
    while ((unsigned)(*(volatile unsigned long long *)b >> 63) == parity) emul_yield();
}
/* the producer's arrival on a slot's barrier; its copies, which land at once, follow with no
 * yield in between, so no waiter runs before they have landed */
IG_DEV void ig_st_expect(unsigned long long *bar, unsigned) { ig_st_mbar_arrive(bar); }
IG_DEV void ig_st_copy(void *dst, const void *src, unsigned bytes, unsigned long long *) { memcpy(dst, src, bytes); }
#define ig_st_cbar() emul_bar_named(IG_ST_CTHREADS)
IG_DEV void ig_st_fence_init() {}
IG_DEV void ig_st_red_release(unsigned long long *bar) { __atomic_fetch_add(bar, 1ull, __ATOMIC_SEQ_CST); }
IG_DEV unsigned long long ig_st_ld_acquire(const unsigned long long *bar) { return __atomic_load_n(bar, __ATOMIC_SEQ_CST); }
IG_DEV void ig_st_prefetch(const void *, unsigned) {}
IG_DEV void ig_st_mma(float *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    const unsigned a[4] = {a0, a1, a2, a3};
    ig_mma16(d, a, b0, b1);
}
IG_DEV void ig_st_imma_s8(int *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    const unsigned a[4] = {a0, a1, a2, a3};
    ig_imma32(d, a, b0, b1, true);
}
IG_DEV void ig_st_imma_u8(int *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    const unsigned a[4] = {a0, a1, a2, a3};
    ig_imma32(d, a, b0, b1, false);
}

#endif /* IG_EMUL_STREAM_H */
