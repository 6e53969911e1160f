/* argmax.cu — template: greedy argmax over rows of logits on the device (lowest id on ties), so
 * a greedy decode step copies back one int per sequence instead of a vocabulary of floats.
 *
 * Instantiate with AM_NAME, AM_V (vocabulary), AM_LD (row stride, default AM_V); defines
 *   extern "C" __global__ void AM_NAME(int n, const float *logits, int *out);
 * logits f32 [n][AM_LD]; out[i] = smallest j < AM_V with logits[i][j] maximal. NaN never wins
 * (compares false); a row of only NaN gives 0.
 * launch: grid = (IG_AM_GRID_X(n) = n), block = IG_AM_BLOCK = 1024, smem 0.
 */
#include "common.cuh"

#ifndef AM_NAME
#define AM_NAME ig_argmax
#endif
#ifndef AM_V
#define AM_V 128256
#endif
#ifndef AM_LD
#define AM_LD AM_V
#endif

#ifndef IG_ARGMAX_HELPERS
#define IG_ARGMAX_HELPERS
/* (v, i) beats (bv, bi): larger value, or equal value and smaller index. */
IG_DEV bool ig_am_better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }
#endif

extern "C" __global__ void __launch_bounds__(IG_AM_BLOCK) AM_NAME(int n, const float *logits, int *out) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const int row = blockIdx.x;
    if (row >= n) return;
    const float *l = logits + (size_t)row * AM_LD;
    float bv = IG_NEG_INF;
    int bi = 0x7fffffff;
    /* each thread scans in increasing index, so a strict > keeps its lowest index on ties */
    for (int j = threadIdx.x; j < AM_V; j += IG_AM_BLOCK) {
        const float v = l[j];
        if (v > bv || (bi == 0x7fffffff && v == v)) bv = v, bi = j;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(IG_FULL_MASK, bv, o);
        const int oi = __shfl_xor_sync(IG_FULL_MASK, bi, o);
        if (ig_am_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sv[wid] = bv, si[wid] = bi;
    __syncthreads();
    if (wid == 0) {
        bv = sv[lane], bi = si[lane]; /* IG_AM_BLOCK == 1024: 32 warps */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(IG_FULL_MASK, bv, o);
            const int oi = __shfl_xor_sync(IG_FULL_MASK, bi, o);
            if (ig_am_better(ov, oi, bv, bi)) bv = ov, bi = oi;
        }
        if (lane == 0) out[row] = bi == 0x7fffffff ? 0 : bi;
    }
}

#undef AM_NAME
#undef AM_V
#undef AM_LD
