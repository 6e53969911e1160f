#!/usr/bin/env bash
# Tensor parallelism on 2 GPUs over NCCL (issue 24), on a machine with 2 GPUs, mpirun and NCCL:
#   scripts/gpu_tp_check.sh
# Compiles qwen3-qknorm and llama-gqa for CUDA (bf16) with --tp 1 and --tp 2, then compares
# `mpirun -np 2 ignis logits` of the --tp 2 package (rank r on GPU r) with the --tp 1 package's logits
# and with the float64 reference, and greedy generation with --tp 1's. Uses $IGNIS (default
# devbuild/ignis, as scripts/gpu_check.sh) and writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ignis-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/devbuild/lib:${LD_LIBRARY_PATH:-}"
IGNIS=${IGNIS:-$PWD/devbuild/ignis}
export IGNIS_TESTDATA="${IGNIS_TESTDATA:-$PWD/shared/testdata}"
[ -d "$IGNIS_TESTDATA" ] || export IGNIS_TESTDATA="$PWD/../shared/testdata"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun on this machine (Open MPI)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rc=0
for m in qwen3-qknorm llama-gqa; do
  src="$IGNIS_TESTDATA/models/$m"
  "$IGNIS" compile "$src" -o "$OUT/$m-tp1" --target cuda --dtype bf16 > "$OUT/$m-compile.txt" 2>&1 &&
    "$IGNIS" compile "$src" -o "$OUT/$m-tp2" --target cuda --dtype bf16 --tp 2 >> "$OUT/$m-compile.txt" 2>&1 || {
    echo "FAIL $m: compile (see $OUT/$m-compile.txt)"; rc=1; continue; }
  ids=$(python3 -c "import json;print(','.join(map(str,json.load(open('$src/reference.json'))['prompt'])))")
  "$IGNIS" logits "$OUT/$m-tp1" --tokens "$ids" --out "$OUT/$m-tp1.npy" || rc=1
  mpirun -np 2 "$IGNIS" logits "$OUT/$m-tp2" --tokens "$ids" --out "$OUT/$m-tp2.npy" || { echo "FAIL $m: tp 2 logits"; rc=1; continue; }
  python3 - "$OUT/$m-tp1.npy" "$OUT/$m-tp2.npy" "$m" <<'EOF' || rc=1
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
r = np.abs(a - b).max() / np.abs(a).max()
print(f"{sys.argv[3]}: tp 2 vs tp 1 logits (bf16, cuda): {r:.2e} x max|logit| {'ok' if r < 3e-2 else 'FAIL'}")
sys.exit(0 if r < 3e-2 else 1)
EOF
  g1=$("$IGNIS" generate "$OUT/$m-tp1" --tokens "$ids" --max-new-tokens 16 --ignore-eos)
  g2=$(mpirun -np 2 "$IGNIS" generate "$OUT/$m-tp2" --tokens "$ids" --max-new-tokens 16 --ignore-eos)
  if [ "$g1" = "$g2" ]; then echo "ok   $m: greedy tp 2 == tp 1"; else echo "FAIL $m: greedy tp 2 ($g2) != tp 1 ($g1)"; rc=1; fi
done
exit $rc
