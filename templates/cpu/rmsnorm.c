/* rmsnorm.c — template: out = x / sqrt(mean(x²) + eps) * gamma, one row per token.
 *
 * Instantiate with RN_NAME, RN_D (row length), RN_EPS (float literal), RN_OBF16 (0 f32 out,
 * 1 bf16 out, e.g. to feed a bf16 x bf16 matmul directly), RN_ADD (1: out is f32 and the
 * normalized row is added to it: a post-norm into the residual stream); defines
 *   static void RN_NAME(int T, const float *x, const float *gamma, void *out, int nth);
 * x is float [T][RN_D], out [T][RN_D]. The sum of squares is accumulated in f32 SIMD lanes
 * (relative error ~1e-6, as the spec allows). Threads split tokens only when there is enough work
 * to pay for waking them (a decode row of 4096 floats takes well under a microsecond).
 */
#include "common.h"

#ifndef RN_NAME
#define RN_NAME ig_rmsnorm
#endif
#ifndef RN_D
#define RN_D 2048
#endif
#ifndef RN_EPS
#define RN_EPS 1e-5f
#endif
#ifndef RN_OBF16
#define RN_OBF16 0
#endif
#ifndef RN_ADD
#define RN_ADD 0
#endif

static void RN_NAME(int T, const float *x, const float *gamma, void *out, int nth) {
#pragma omp parallel for num_threads(nth) schedule(static) if ((long)T * RN_D >= 65536)
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * RN_D;
        float ss = ig_sumsq(xr, RN_D);
        float s = 1.0f / sqrtf(ss / (float)RN_D + RN_EPS);
        if (RN_ADD) {
            _Static_assert(!RN_ADD || !RN_OBF16, "RN_ADD accumulates into f32");
            float *yr = (float *)out + (size_t)t * RN_D;
            for (int i = 0; i < RN_D; i++) yr[i] += xr[i] * s * gamma[i];
            continue;
        }
        IG_ALIGN64 float o[RN_D];
        for (int i = 0; i < RN_D; i++) o[i] = xr[i] * s * gamma[i];
        ig_store_row((char *)out + (size_t)t * RN_D * (RN_OBF16 ? 2 : 4), o, RN_OBF16, RN_D);
    }
}

#undef RN_NAME
#undef RN_D
#undef RN_EPS
#undef RN_OBF16
#undef RN_ADD
