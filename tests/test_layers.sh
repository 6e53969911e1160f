#!/bin/sh
# test_layers.sh — a layering rule that the include paths (one list for all of ignis_core) do not
# enforce: nothing under ir/ includes a runtime/ header (ir/ sees include/ and common/ only).
set -eu
cd "$(dirname "$0")/.."
fail=0
for h in runtime/*.h; do
    name=$(basename "$h")
    if grep -n "#include *[\"<]$name[\">]" ir/* 2>/dev/null; then
        echo "FAIL: ir/ includes runtime header $name"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "test_layers: ok"
exit $fail
