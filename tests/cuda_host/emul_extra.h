/* emul_extra.h — cuda_emul.h (after cpukv.h) and what moe.cu needs beyond it to run on the host
 * (tests/cuda_host): the atomics of _group and _dgu's arrival counter, __nanosleep, ig_warp_max,
 * dynamic shared memory in cuda_emul.h's buffer; and the helpers these host tests share (random
 * values, bf16 rounding, CHECK counting failures). Include before the kernel instances. Test code only. */
#ifndef IG_EMUL_EXTRA_H
#define IG_EMUL_EXTRA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "cpukv.h"
#include "cuda_emul.h"

static int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static void __nanosleep(unsigned) {}
IG_DEV float ig_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(IG_FULL_MASK, v, o));
    return v;
}
#undef IG_DYN_SMEM
#define IG_DYN_SMEM(T, name) T *name = (T *)ig_emul_dyn

static uint32_t g_rng = 12345;
static float frand() { /* uniform in [-1, 1) */
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) * (1.0f / 8388608.0f) - 1.0f;
}
static float bround(float v) { return ig_bf16_to_f32(ig_f32_to_bf16(v)); }

static int fails = 0;
#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
            printf(__VA_ARGS__);                              \
            printf("\n");                                     \
            fails++;                                          \
        }                                                     \
    } while (0)

#endif /* IG_EMUL_EXTRA_H */
