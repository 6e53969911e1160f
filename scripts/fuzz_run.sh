#!/usr/bin/env bash
# Runs one libFuzzer target for a while: scripts/fuzz_run.sh BINARY SECONDS [CORPUS_ROOT]
#
# The target's name is BINARY's without "fuzz_"; its corpus is CORPUS_ROOT/NAME (default
# build-fuzz/corpus next to BINARY), seeded on first use by tests/fuzz/make_seeds.py NAME and with
# tests/fuzz/seeds/NAME/* when that folder exists. Crashes, leaks, timeouts (10 s an input) and
# memory past 2 GB fail the run (exit != 0); the reproducer is left in CORPUS_ROOT/../artifacts.
# ctest runs every target briefly (IGNIS_FUZZ=ON builds); scripts/fuzz_long.sh runs them long.
set -euo pipefail
bin=$1
secs=$2
root_dir="$(cd "$(dirname "$0")/.." && pwd)"
name=$(basename "$bin")
name=${name#fuzz_}
corpus_root=${3:-$(dirname "$bin")/fuzz-corpus}
corpus="$corpus_root/$name"
artifacts="$corpus_root/../fuzz-artifacts/$name"
mkdir -p "$corpus" "$artifacts"
if [ -z "$(ls -A "$corpus")" ]; then
  python3 "$root_dir/tests/fuzz/make_seeds.py" "$name" "$corpus" "${IGNIS:-}" || echo "fuzz_run: no generated seeds for $name"
  if [ -d "$root_dir/tests/fuzz/seeds/$name" ]; then cp "$root_dir/tests/fuzz/seeds/$name"/* "$corpus"/ 2>/dev/null || true; fi
fi
cd "$root_dir"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus"
