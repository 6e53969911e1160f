#!/bin/sh
# test_kernels_isa.sh — builds tests/test_kernels.c once per ISA path of the CPU templates
# (AVX-512+BF16, AMX, AVX2+FMA, portable scalar) and runs each build the host can execute. The CMake
# target test_kernels is compiled without -m flags, so without this script only the portable
# path would be exercised. Uses $CC (default cc); needs OpenMP.
set -eu
cd "$(dirname "$0")/.."
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
run() { # name, cflags...
    name=$1; shift
    "$CC" -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -Wno-unused-parameter -Werror "$@" \
        -Itemplates/cpu tests/test_kernels.c -lm -o "$tmp/$name"
    "$tmp/$name"
}
run scalar
if has avx2 && has fma && has f16c; then run avx2 -mavx2 -mfma -mf16c; else echo "skip avx2 (host lacks it)"; fi
if has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512_bf16 && has avx512_vnni; then
    # the flags of the cpu:avx512bf16 target (runtime/serving/rt_util.c), VNNI included
    run avx512bf16 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni
else echo "skip avx512bf16 (host lacks it)"; fi
if has avx512_bf16 && has avx512_vnni && has amx_tile && has amx_bf16; then
    # cpu:amx's flags: the bf16 prefill on AMX tiles
    run amx -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni \
        -mamx-tile -mamx-bf16 -mamx-int8
else echo "skip amx (host lacks it)"; fi
if has avx512f && has avx512bw && has avx512vl; then run avx512 -mavx512f -mavx512bw -mavx512vl -mfma
else echo "skip avx512 (host lacks it)"; fi
# pages of 32 tokens (the harness's default is 16): the decode kernels walk a page in blocks of 16
if has avx2 && has fma && has f16c; then run avx2-tps32 -DTPS=32 -mavx2 -mfma -mf16c; fi
