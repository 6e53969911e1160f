#!/usr/bin/env bash
# Every GPU test and benchmark, in one call on the device machine (issue 5):
#   scripts/gpu_check.sh [tests|bench|fat|all]   (fat: only the CPU + CUDA fat package and CUDA bundle check)
# Expects the binaries built on the CI-like machine in devbuild/ (scripts/gpu_prepare.sh makes it:
# ignis, test_engine, bench_engine, bench_guided and the shared libraries they need); writes logs to $OUT.
# Shorter runs while iterating: IGNIS_GPU_GOLDEN_DTYPES=bf16, IGNIS_GPU_GOLDEN_MODELS=a,b (a subset
# of the golden models), IGNIS_BENCH_PEER=0 (no transformers peer), IGNIS_BENCH_PROFILE=0.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
OUT=${OUT:-/tmp/ignis-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/devbuild/lib:${LD_LIBRARY_PATH:-}"
export IGNIS="$PWD/devbuild/ignis"
export IGNIS_BUILD="$PWD/devbuild"  # its bundle-runtime/ (gpu_prepare.sh copies it): `ignis bundle` links with it
export IGNIS_TESTDATA="${IGNIS_TESTDATA:-$PWD/shared/testdata}"
[ -d "$IGNIS_TESTDATA" ] || export IGNIS_TESTDATA="$PWD/../shared/testdata"
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== CUDA kernel harness"
  if [ -x devbuild/test_cuda_kernels ]; then  # built by gpu_prepare.sh where nvcc is
    devbuild/test_cuda_kernels > "$OUT/kernels.txt" 2>&1 || rc=1
    grep -v "^ok" "$OUT/kernels.txt"
    if [ -x devbuild/test_e4m3_cvt ]; then devbuild/test_e4m3_cvt | tee -a "$OUT/kernels.txt" || rc=1; fi
    if [ -x devbuild/test_act8_wg ]; then  # a8w8's fused int8 wgmma GEMM: cases, then its bench against cuBLAS
      devbuild/test_act8_wg > "$OUT/act8_wg.txt" 2>&1 || rc=1
      if [ -x devbuild/test_act8_wg_cl2 ]; then devbuild/test_act8_wg_cl2 >> "$OUT/act8_wg.txt" 2>&1 || rc=1; fi
      grep -v "^ok" "$OUT/act8_wg.txt"
    fi
    if [ -x devbuild/test_qgemm ]; then  # qgemm.cu: cases, then its bench against dequant + cuBLAS
      devbuild/test_qgemm > "$OUT/qgemm.txt" 2>&1 || rc=1
      devbuild/test_qgemm_f16 --no-bench >> "$OUT/qgemm.txt" 2>&1 || rc=1
      grep -v "^ok" "$OUT/qgemm.txt"
    fi
  else
    tests/gpu/build_and_run.sh 2>&1 | tee "$OUT/kernels.txt" || rc=1
  fi
  echo "== GPU golden (all test models, f32 and bf16, $arch)"
  python3 tests/test_gpu_golden.py 2>&1 | tee "$OUT/golden.txt" || rc=1
  echo "== GPU quantized KV cache (int8 / uint4 against the references and the CPU packages, $arch)"
  python3 tests/test_gpu_kv_cache.py 2>&1 | tee "$OUT/kv_cache.txt" || rc=1
  echo "== engine on the GPU (batch references, preemption, prefix cache and its host tier, stress)"
  python3 tests/golden.py  # the fixtures stored as a weights recipe, which it compiles
  IGNIS_TEST_TARGET=cuda:$arch devbuild/test_engine 2>&1 | tee "$OUT/engine.txt" || rc=1
  echo "== guided decoding on the GPU (device-masked tokens against the host-masked path, outputs validated)"
  python3 scripts/gpu_check_guided.py "$arch" 2>&1 | tee "$OUT/guided.txt" || rc=1
fi
if [ "$what" = fat ] || [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== fat package (cpu + cuda:sm_80,sm_90) picks CUDA; CUDA bundle runs with env -i (issue 20)"
  python3 tests/test_fat_cuda.py 2>&1 | tee "$OUT/fat_cuda.txt" || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== benchmark"
  python3 scripts/gpu_bench.py "$arch" 2>&1 | tee "$OUT/bench.txt" || rc=1
  echo "== benchmark, quantized weights"
  python3 scripts/gpu_bench_quant.py "$arch" 2>&1 | tee "$OUT/bench_quant.txt" || rc=1
  echo "== benchmark, the prefix cache's host tier (repeated 4k-token prompt: TTFT against recompute)"
  python3 scripts/gpu_bench_hosttier.py "$arch" 2>&1 | tee "$OUT/bench_hosttier.txt" || rc=1
  echo "== benchmark, long contexts (32k and 128k, default settings)"
  python3 scripts/gpu_bench_longctx.py "$arch" 2>&1 | tee "$OUT/bench_longctx.txt" || rc=1
  echo "== benchmark, guided decoding (constrained against unconstrained decode)"
  python3 scripts/gpu_bench_guided.py "$arch" 2>&1 | tee "$OUT/bench_guided.txt" || rc=1
  echo "== benchmark, mixture of experts (Qwen3-30B-A3B layer shapes)"
  python3 scripts/gpu_bench_moe.py "$arch" 2>&1 | tee "$OUT/bench_moe.txt" || rc=1
fi
exit $rc
