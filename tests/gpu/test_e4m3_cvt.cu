/* test_e4m3_cvt.cu — act8.cu's e4m3 codes on sm_89+ (ig_a8_e4m3x2: one cvt.rn.satfinite.e4m3x2.f32
 * for a pair) against kv_quant.cuh's ig_kvq_f2e4m3 (the software rounding that the host emulation
 * and the CPU's format define: nearest even, saturating at +-448), for every finite f32 bit pattern
 * whose low 6 mantissa bits are 0 or 63 (2^26 magnitudes: each rounding boundary of e4m3 and its
 * neighbours, e4m3 subnormals and values past 448 included), both signs.
 * Exits 1 on any difference (finite inputs only: NaN codes may differ in sign). Built and run by
 * scripts/gpu_check.sh where nvcc is (nvcc -arch=sm_90 -Itemplates/cuda). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "act8.cu"

__global__ void cmp(unsigned base, unsigned long long *bad, unsigned *first) {
    const unsigned i = base + blockIdx.x * blockDim.x + threadIdx.x; /* i < 2^26: mag < 2^31 */
    const unsigned lowbits = (i & 1u) ? 63u : 0u, mag = (i >> 1) << 6 | lowbits;
    for (int s = 0; s < 2; s++) {
        const float a = __uint_as_float(mag | (s ? 0x80000000u : 0u));
        const float b = __uint_as_float(mag ^ 0x40u); /* a neighbour, as the pair's high half */
        if (!(fabsf(a) <= 3.4e38f) || !(fabsf(b) <= 3.4e38f)) continue;
        const unsigned hw = ig_a8_e4m3x2(a, b);
        const unsigned sw = (unsigned)ig_kvq_f2e4m3(a) | (unsigned)ig_kvq_f2e4m3(b) << 8;
        if (hw != sw) {
            if (atomicAdd(bad, 1ull) == 0) first[0] = __float_as_uint(a), first[1] = hw, first[2] = sw;
        }
    }
}

int main() {
    unsigned long long *bad;
    unsigned *first;
    cudaMallocManaged(&bad, sizeof *bad);
    cudaMallocManaged(&first, 3 * sizeof *first);
    *bad = 0;
    cmp<<<(1u << 26) / 256, 256>>>(0u, bad, first);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (*bad) {
        printf("FAIL e4m3 cvt: %llu differences, first %#x: cvt %#x, software %#x\n", *bad, first[0], first[1], first[2]);
        return 1;
    }
    printf("ok e4m3 cvt: the sm_89+ conversion equals the software rounding on 2^27 values\n");
    return 0;
}
