/* emul_stream.h — host stand-ins for stream.cuh's PTX primitives, so its GEMV phases run in the
 * host emulation (tests/cuda_host/test_stream_gemv.cpp): the mbarriers are emul_extra.h's, a
 * bulk copy lands at once (its barrier's arrival came with ig_mb_expect), barrier 1 is cuda_emul.h's named barrier of the consumer threads, the grid barrier's
 * arrival and poll are plain memory operations (one CTA runs at a time: grids of one CTA), mma.sync
 * m16n8k16 (bf16) and m16n8k32 (s8 x s8 / u8) go through cuda_emul.h's per-lane slots. Include after
 * emul_extra.h, before stream.cuh. Test code only. */
#ifndef IG_EMUL_STREAM_H
#define IG_EMUL_STREAM_H

#include "emul_extra.h"

using std::max;
using std::min;

IG_DEV void ig_st_copy(void *dst, const void *src, unsigned bytes, unsigned long long *) { memcpy(dst, src, bytes); }
#define ig_st_cbar() emul_bar_named(IG_ST_CTHREADS)
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
