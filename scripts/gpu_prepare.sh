#!/usr/bin/env bash
# Collects what scripts/gpu_check.sh needs on the device machine (which cannot build ignis: it
# lacks protobuf-c and cJSON): the binaries from build/ and the shared libraries they link, and
# the CUDA kernel harness built for $ARCH (default sm_90) when nvcc is here.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
rm -rf devbuild && mkdir -p devbuild/lib
cp "$B/ignis" "$B/test_engine" "$B/bench_engine" "$B/bench_guided" devbuild/
# every library the binaries link except glibc's own (the device has those)
for lib in $(ldd "$B/ignis" "$B/test_engine" | awk '/=>/ {print $3}' | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so'); do
  cp -L "$lib" devbuild/lib/
done
# the bundle runtime (`ignis bundle` finds it beside the binary): tests/test_fat_cuda.py bundles there
if [ -d "$B/bundle-runtime" ]; then cp -r "$B/bundle-runtime" devbuild/; fi
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [ -x "$NVCC" ]; then
  # sm_90a by default: the wgmma and TMA kernels (attention_prefill.cu's _flash_wg / _flash_ws, moe.cu's _wg) exist only there
  "$NVCC" -O2 -arch="${ARCH:-sm_90a}" -Itemplates/cuda tests/gpu/test_cuda_kernels.cu -lcuda -o devbuild/test_cuda_kernels
  # the quantized tensor-core GEMM's harness (qgemm.cu), bf16 and half; its bench times cuBLAS too
  "$NVCC" -O2 -arch="${ARCH:-sm_90}" -Itemplates/cuda tests/gpu/test_qgemm.cu -lcublas -o devbuild/test_qgemm
  "$NVCC" -O2 -arch="${ARCH:-sm_90}" -Itemplates/cuda -DIG_F16=1 tests/gpu/test_qgemm.cu -lcublas -o devbuild/test_qgemm_f16
  # act8.cu's e4m3 conversion on sm_89+ (one cvt a pair) against the software rounding
  "$NVCC" -O2 -arch="${ARCH:-sm_90}" -Itemplates/cuda tests/gpu/test_e4m3_cvt.cu -o devbuild/test_e4m3_cvt
  # act8.cu's int8 wgmma GEMM with the dq epilogue fused (sm_90a: wgmma, TMA multicast in clusters)
  "$NVCC" -O2 -arch=sm_90a -Itemplates/cuda tests/gpu/test_act8_wg.cu -lcuda -lcublas -o devbuild/test_act8_wg
  # the same in clusters of two CTAs sharing the weight boxes (--tune a8_wg=2, the default)
  "$NVCC" -O2 -arch=sm_90a -Itemplates/cuda -DWG_CL=2 tests/gpu/test_act8_wg.cu -lcuda -lcublas -o devbuild/test_act8_wg_cl2
fi
du -sh devbuild
