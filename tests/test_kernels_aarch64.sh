#!/bin/sh
# test_kernels_aarch64.sh — the CPU kernel harnesses (tests/test_kernels.c: matmul, rmsnorm, embed,
# rope_kv, attention; tests/test_quant_kernels.c: every quantized weight format) cross-compiled for
# each AArch64 target's -march (the flags of runtime/serving/rt_util.c's table) and run under
# qemu-aarch64 on an emulated CPU that has the target's features:
#   armv8-a                  NEON FMA, SMULL (a8w8)           cortex-a72
#   armv8.6-a+bf16+i8mm      + BFDOT, SDOT (the dotprod target's SDOT code too)   max,sve=off
#   armv8.2-a+sve+dotprod    SVE GEMVs (f32, svdot)           max,sve256=on
#   armv8.6-a+sve+bf16+i8mm  SVE GEMVs (+ svbfdot)            max,sve128=on and max,sve512=on
# so the SVE code runs at 128, 256 and 512 bits (its three paths: 4, 8 and 16+ lanes).
# Each harness checks against plain C references in double precision. The SVE builds are compiled
# with -fno-tree-vectorize: the hand-written SVE and NEON kernels are intrinsics and unaffected,
# while compiler-vectorized SVE loops run ~10x slower under qemu at 512 bits (the shipped,
# vectorized code is covered by tests/test_aarch64.py's golden runs), and their quantized runs take
# T = 1 and 3 only (--short: decode, where the SVE code is, and a small prefill; the prefill
# dequantizes into the NEON micro-kernel that the NEON runs check at every T). Skipped (77) without the
# cross compiler or qemu-user (scripts/install-deps.sh installs them).
set -eu
cd "$(dirname "$0")/.."
CC=aarch64-linux-gnu-gcc
if ! command -v $CC >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1 || [ ! -e /usr/lib/aarch64-linux-gnu/libgomp.so.1 ]; then
    echo "SKIP: needs $CC, qemu-aarch64 and libgomp1:arm64 (scripts/install-deps.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
case_() { # march, extra cflags, test_quant_kernels argument, qemu cpus...
    march=$1 extra=$2 qarg=$3
    shift 3
    for src in test_kernels test_quant_kernels; do
        arg=""
        if [ $src = test_quant_kernels ]; then arg=$qarg; fi
        bin="$tmp/$src-$(echo "$march" | tr '+.' '__')"
        $CC -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -Wno-unused-parameter -Werror -march="$march" $extra \
            -Itemplates/cpu "tests/$src.c" -lm -o "$bin"
        for cpu in "$@"; do
            if out=$(qemu-aarch64 -L / -cpu "$cpu" "$bin" $arg 2>&1); then
                echo "ok   $src${arg:+ $arg} -march=$march on -cpu $cpu: $(echo "$out" | tail -n 1)"
            else
                echo "FAIL $src -march=$march on -cpu $cpu:"
                echo "$out" | tail -n 20
                fail=1
            fi
        done
    done
}
case_ armv8-a "" "" cortex-a72
case_ armv8.6-a+bf16+i8mm "" "" max,sve=off
case_ armv8.2-a+sve+dotprod -fno-tree-vectorize --short max,sve256=on
case_ armv8.6-a+sve+bf16+i8mm -fno-tree-vectorize --short max,sve128=on max,sve512=on
exit $fail
