#!/bin/sh
# test_layers.sh — layering rules that the include paths (one list for all of ignis_core) do not
# enforce:
#   - nothing under ir/ includes a runtime/ header (ir/ sees include/ and common/ only);
#   - nothing under runtime/text/ (tokenizer, regex, unicode, Jinja, chat templates, stop strings)
#     includes a runtime/serving/ header: the text part is usable without the engine;
#   - nor does anything under runtime/grammar/ (guided decoding).
set -eu
cd "$(dirname "$0")/.."
fail=0
check() { # check DIR HEADER...: DIR's files include none of the headers
    dir=$1; shift
    for h in "$@"; do
        name=$(basename "$h")
        if grep -n "#include *[\"<]$name[\">]" "$dir"/* 2>/dev/null; then
            echo "FAIL: $dir includes $h"
            fail=1
        fi
    done
}
check ir runtime/serving/*.h runtime/text/*.h
check runtime/text runtime/serving/*.h
check runtime/grammar runtime/serving/*.h
[ "$(ls runtime/*.c runtime/*.h 2>/dev/null | wc -l)" -eq 0 ] || { echo "FAIL: sources directly under runtime/"; fail=1; }
[ $fail -eq 0 ] && echo "test_layers: ok"
exit $fail
