#!/bin/sh
# build_and_run.sh — builds and runs the CUDA kernel-template harness (tests/gpu), and checks that
# every template compiles through NVRTC (no host headers) for sm_75/sm_80/sm_90.
# usage: tests/gpu/build_and_run.sh [harness args, e.g. --no-bench]   (from anywhere)
# Env: CUDA_HOME (default /usr/local/cuda), ARCH (default sm_90a: the wgmma kernels too), OUT (build dir, default /tmp).
# Exits 0 with "SKIP" when nvcc or a GPU is missing; nonzero on a compile error or a mismatch.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ARCH=${ARCH:-sm_90a}
OUT=${OUT:-/tmp}
NVCC="$CUDA_HOME/bin/nvcc"
if [ ! -x "$NVCC" ]; then
    echo "SKIP: no nvcc at $NVCC"
    exit 0
fi
cd "$ROOT"
echo "== NVRTC: every template, two instances each"
cc -O2 -I"$CUDA_HOME/include" tests/gpu/nvrtc_check.c -L"$CUDA_HOME/lib64" -lnvrtc -o "$OUT/ig_nvrtc_check"
LD_LIBRARY_PATH="$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" "$OUT/ig_nvrtc_check" -I templates/cuda tests/gpu/nvrtc_driver.cu sm_75 sm_80 sm_90 sm_90a
echo "== nvcc: templates standalone and the driver"
for a in sm_75 sm_80 sm_90 sm_90a; do
    for f in templates/cuda/*.cu tests/gpu/nvrtc_driver.cu; do
        "$NVCC" -arch=$a -c -Itemplates/cuda "$f" -o "$OUT/ig_tmpl.o"
    done
done
echo "== harness ($ARCH)"
"$NVCC" -O2 -arch=$ARCH -lineinfo -Itemplates/cuda tests/gpu/test_cuda_kernels.cu -o "$OUT/ig_test_cuda_kernels"
# the quantized tensor-core GEMM's harness, bf16 and half (its bench times cuBLAS too)
"$NVCC" -O2 -arch=$ARCH -lineinfo -Itemplates/cuda tests/gpu/test_qgemm.cu -lcublas -o "$OUT/ig_test_qgemm"
"$NVCC" -O2 -arch=$ARCH -lineinfo -Itemplates/cuda -DIG_F16=1 tests/gpu/test_qgemm.cu -lcublas -o "$OUT/ig_test_qgemm_f16"
if ! nvidia-smi >/dev/null 2>&1; then
    echo "SKIP: nvidia-smi failed (no GPU); templates and harness compiled"
    exit 0
fi
"$OUT/ig_test_cuda_kernels" "$@"
"$OUT/ig_test_qgemm" "$@"
exec "$OUT/ig_test_qgemm_f16" --no-bench
