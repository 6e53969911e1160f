#!/usr/bin/env bash
# Runs every libFuzzer target long: scripts/fuzz_long.sh [SECONDS_EACH=600] [BUILD_DIR=build-fuzz]
# Builds BUILD_DIR with clang and -DIGNIS_FUZZ=ON when missing; the corpora grow in
# BUILD_DIR/fuzz-corpus and are reused by the next run; a summary line per target (executions,
# coverage, crashes) goes to BUILD_DIR/fuzz-long.txt. Exit status: the number of failing targets.
set -uo pipefail
secs=${1:-600}
build=${2:-build-fuzz}
cd "$(dirname "$0")/.."
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGNIS_FUZZ=ON >/dev/null || exit 1
fi
cmake --build "$build" -j"$(nproc)" >/dev/null || exit 1
export IGNIS="$PWD/$build/ignis" IGNIS_TESTDATA="${IGNIS_TESTDATA:-$PWD/../shared/testdata}"
fails=0
: > "$build/fuzz-long.txt"
for bin in "$build"/fuzz_*; do
  [ -x "$bin" ] || continue
  log="$build/$(basename "$bin").log"
  if scripts/fuzz_run.sh "$bin" "$secs" > "$log" 2>&1; then res=ok; else res=FAIL; fails=$((fails + 1)); fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 || true)
  echo "$(basename "$bin") $res ${secs}s execs=${execs:-?} $cov $ft" | tee -a "$build/fuzz-long.txt"
done
exit $fails
