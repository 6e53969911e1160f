#!/usr/bin/env python3
"""llguidance (PyPI) as the peer of `ignis bench-grammar`: the same schemas, the same valid
instances (json.dumps, default separators, ensure_ascii=False), the same tokenizer, one thread:
time per mask (fill_next_token_bitmask, thread CPU time like bench-grammar) and per compile.
Prints llguidance's lines, then ignis's, then the ratios.

    bench/bench_grammar_peer.py TOKENIZER_DIR SCHEMAS.jsonl [IGNIS]
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

import llguidance
import llguidance.numpy as lnp


def pct(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))] if v else 0.0


def main():
    tok_dir, schemas = sys.argv[1], sys.argv[2]
    ignis = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..", "build", "ignis")
    tok = llguidance.LLTokenizer(open(os.path.join(tok_dir, "tokenizer.json")).read())
    bm = lnp.allocate_token_bitmask(1, tok.vocab_size)
    masks, compiles, supported, total = [], [], 0, 0
    clock = time.thread_time
    for line in open(schemas, encoding="utf-8"):
        if not line.strip():
            continue
        row = json.loads(line)
        total += 1
        t0 = clock()
        try:
            g = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(row["schema"]), defaults={"whitespace_flexible": True})
            m = llguidance.LLMatcher(tok, g)
            ok = not m.is_error()
        except Exception:  # noqa: BLE001 - a refused schema
            ok = False
        t1 = clock()
        if not ok:
            continue
        supported += 1
        compiles.append((t1 - t0) * 1e3)
        for t in row["tests"]:
            if not t["valid"]:
                continue
            m.reset()
            for tid in tok.tokenize_str(json.dumps(t["data"], ensure_ascii=False)):  # llguidance's own tokenization
                a = clock()
                lnp.fill_next_token_bitmask(m, bm, 0)
                masks.append((clock() - a) * 1e6)
                if not m.consume_token(tid):
                    break
    lg = (statistics.mean(masks) if masks else 0, pct(masks, 0.5), pct(masks, 0.99), statistics.median(compiles) if compiles else 0)
    print(f"llguidance mask: average {lg[0]:.1f} us, p50 {lg[1]:.1f} us, p99 {lg[2]:.1f} us ({len(masks)} masks)")
    print(f"llguidance compile: median {lg[3]:.2f} ms, p99 {pct(compiles, 0.99):.2f} ms")
    print(f"llguidance supported: {supported}/{total}")
    out = subprocess.run([ignis, "bench-grammar", tok_dir, "--schemas", schemas], capture_output=True, text=True).stdout
    print(out, end="")
    mine = re.search(r"average ([\d.]+) us, p50 ([\d.]+) us, p99 ([\d.]+) us", out)
    comp = re.search(r"compile: median ([\d.]+) ms", out)
    if mine and comp:
        a, b, c = map(float, mine.groups())
        print(f"ratio ignis/llguidance: average {a / lg[0]:.2f}x, p50 {b / lg[1]:.2f}x, p99 {c / lg[2]:.2f}x, "
              f"compile median {float(comp.group(1)) / lg[3]:.2f}x")


if __name__ == "__main__":
    main()
