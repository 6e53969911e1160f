/* machine_probe.h — what this machine can do, measured, so benchmarks report speed as a fraction
 * of the hardware's limits taken in the same run: streaming read bandwidth and peak multiply-add
 * rate of the cores. A tool, not part of libignis: built into the ignis CLI (`ignis bench`), with
 * -O3 (CMakeLists.txt) so the loops are what we mean. The rt_ names predate the move. */
#ifndef IG_MACHINE_PROBE_H
#define IG_MACHINE_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* Best-of-reps read bandwidth (bytes/s) over buf[0..n) (64-byte aligned), all OpenMP threads. */
double rt_read_bandwidth(const uint8_t *buf, size_t n, int reps);

typedef enum rt_peak_kind {
    RT_PEAK_BF16_DOT = 0,  /* vdpbf16ps zmm: 32 bf16 MACs per instruction */
    RT_PEAK_F32_FMA512 = 1,
    RT_PEAK_F32_FMA256 = 2,
    RT_PEAK_AMX_BF16 = 3   /* tdpbf16ps: 16 x 16 x 32 bf16 MACs per instruction (needs IG_CPU_AMX) */
} rt_peak_kind;

/* Peak flop/s (2 per multiply-add) over all OpenMP threads, running for about `secs`. The caller
 * checks that the CPU has the instructions (rt_cpu_features). */
double rt_peak_flops(rt_peak_kind kind, double secs);

#endif
