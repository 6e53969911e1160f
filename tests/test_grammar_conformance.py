#!/usr/bin/env python3
"""Guided-decoding conformance on ../shared/testdata/jsonschema/dev.jsonl with the Llama 3
tokenizer (byte-level BPE) and the Llama 2 one (SentencePiece with a dummy prefix, which
`grammar-check` and `bench-grammar` must not put before an instance): each instance serialized the way the data set's README says (json.dumps, default
separators, instance key order, ensure_ascii=False), tokenized and walked token by token through
the schema's masks (`ignis grammar-check --batch`). Asserts: >= 95% of schemas supported, every
valid instance of a supported schema accepted, >= 99% of invalid instances rejected. Prints the
figures. `bench-grammar` on the same file must accept the same valid instances (it serializes them
itself). Skips (77) without the test data."""
import json
import os
import re
import subprocess
import sys
import tempfile

ignis = os.environ.get("IGNIS", "build/ignis")
data = os.environ.get("IGNIS_TESTDATA", "../shared/testdata")
schemas = os.path.join(data, "jsonschema", "dev.jsonl")
toks = [os.path.join(data, "tokenizers", k) for k in ("llama3", "llama2")]
if not os.path.exists(schemas) or not all(os.path.exists(os.path.join(t, "tokenizer.json")) for t in toks):
    print("skip: no jsonschema test data or Llama 3 / Llama 2 tokenizer")
    sys.exit(77)

rows = [json.loads(l) for l in open(schemas, encoding="utf-8") if l.strip()]
with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
    for r in rows:
        tests = [{"valid": t["valid"], "text": json.dumps(t["data"], ensure_ascii=False)} for t in r["tests"]]
        f.write(json.dumps({"name": r["name"], "schema": r["schema"], "tests": tests}, ensure_ascii=False) + "\n")
    batch = f.name


def check(tok):
    """The figures for one tokenizer; True when they meet the bar."""
    print(f"== {os.path.basename(tok)}")
    out = subprocess.run([ignis, "grammar-check", tok, "--batch", batch], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        print(out.stderr)
        sys.exit(1)
    results = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    assert len(results) == len(rows), f"{len(results)} results for {len(rows)} schemas"

    supported = valid_n = valid_ok = invalid_n = invalid_rej = 0
    problems = []
    for r, res in zip(rows, results):
        assert res["name"] == r["name"]
        if not res["supported"]:
            assert res.get("error"), f"{r['name']}: refused without a message"
            continue
        supported += 1
        for t, acc in zip(r["tests"], res["accepted"]):
            if t["valid"]:
                valid_n += 1
                valid_ok += acc
                if not acc:
                    problems.append(f"valid instance rejected: {r['name']}: {json.dumps(t['data'])[:120]}")
            else:
                invalid_n += 1
                invalid_rej += not acc
                if acc:
                    problems.append(f"invalid instance accepted: {r['name']}: {json.dumps(t['data'])[:120]}")

    print(f"supported: {supported}/{len(rows)} ({100.0 * supported / len(rows):.1f}%)")
    print(f"valid accepted: {valid_ok}/{valid_n}")
    print(f"invalid rejected: {invalid_rej}/{invalid_n} ({100.0 * invalid_rej / max(invalid_n, 1):.2f}%)")
    for p in problems[:40]:
        print(p)
    ok = supported >= 0.95 * len(rows) and valid_ok == valid_n and invalid_rej >= 0.99 * invalid_n
    bench = subprocess.run([ignis, "bench-grammar", tok, "--schemas", schemas], capture_output=True, text=True, timeout=900)
    acc = re.search(r"valid instances accepted: (\d+)/(\d+)", bench.stdout)
    print(bench.stdout.strip())
    agree = bench.returncode == 0 and acc is not None and acc.group(1) == acc.group(2) == str(valid_n)
    if not agree:
        print(f"bench-grammar disagrees with grammar-check: {acc.group(0) if acc else bench.stderr}")
    return ok and agree


try:
    results_ok = [check(t) for t in toks]
finally:
    os.unlink(batch)
print("test_grammar_conformance:", "ok" if all(results_ok) else "FAIL")
sys.exit(0 if all(results_ok) else 1)
