#!/bin/sh
# test_quant_isa.sh — builds tests/test_quant_kernels.c (quantized weight panels through matmul.c
# and embed.c) once per ISA path of the CPU templates and runs each build the host can execute.
# The AVX-512 paths are always compiled (so they cannot rot on an AVX2-only host) and run only
# where the host has them; a skipped run is named. Uses $CC (default cc); needs OpenMP.
set -eu
cd "$(dirname "$0")/.."
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
build() { # name, cflags...
    name=$1; shift
    "$CC" -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -Wno-unused-parameter -Werror "$@" \
        -Itemplates/cpu tests/test_quant_kernels.c -lm -o "$tmp/$name"
}
build scalar && "$tmp/scalar"
build avx2 -mavx2 -mfma -mf16c
if has avx2 && has fma; then "$tmp/avx2"; else echo "skip running avx2 (host lacks it)"; fi
build avx2vnni -mavx2 -mfma -mf16c -mavxvnni # AVX-VNNI: the 256-bit vpdpbusd / vpdpwssd of the integer-activation paths
if has avx2 && has fma && has avx_vnni; then "$tmp/avx2vnni"; else echo "skip running avx2+avx-vnni (host lacks it; compiled)"; fi
build avx512 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl
build avx512vnni -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni
if has avx512f && has avx512bw && has avx512vl; then "$tmp/avx512"; else echo "skip running avx512 (host lacks it; compiled)"; fi
if has avx512f && has avx512bw && has avx512vl && has avx512_bf16 && has avx512_vnni; then "$tmp/avx512vnni"
else echo "skip running avx512bf16+vnni (host lacks it; compiled)"; fi
# cpu:amx's flags: Q8I's prefill of 32+ rows on AMX tiles
build amx -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni -mamx-tile \
    -mamx-bf16 -mamx-int8
if has avx512_bf16 && has avx512_vnni && has amx_tile && has amx_bf16; then "$tmp/amx"
else echo "skip running amx (host lacks it; compiled)"; fi
