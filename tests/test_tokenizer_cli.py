#!/usr/bin/env python3
"""The text CLI (issue 3) against the HF tokenizers' outputs in ../shared/testdata/tokenizers:
`ignis tokenize` (with and without --special), `ignis detokenize` and `ignis chat-template`
byte for byte, on a sample of the corpus and every chat case (the library tests cover all texts)."""
import json, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

def main():
    golden.require_testdata()
    fails = []
    n = 0
    for name in ("qwen3", "llama3", "llama2"):
        d = os.path.join(golden.TESTDATA, "tokenizers", name)
        exp = json.load(open(os.path.join(d, "expected.json")))
        cases = exp["encode"]
        for c in cases[:: max(1, len(cases) // 8)]:
            for special, key in ((False, "ids"), (True, "ids_with_special")):
                args = [golden.IGNIS, "tokenize", d] + (["--special"] if special else [])
                p = subprocess.run(args, input=c["text"].encode(), capture_output=True)
                got = [int(x) for x in p.stdout.split()]
                n += 1
                if p.returncode or got != c[key]:
                    fails.append(f"{name} tokenize{' --special' if special else ''} {c['text'][:40]!r}: {got[:12]} != {c[key][:12]} {p.stderr.decode()[-200:]}")
            p = subprocess.run([golden.IGNIS, "detokenize", d, "--ids", ",".join(map(str, c["ids"]))], capture_output=True)
            n += 1
            if p.returncode or p.stdout.decode("utf-8", "surrogateescape") != c["decoded"]:
                fails.append(f"{name} detokenize {c['text'][:40]!r}: {p.stdout[:60]!r}")
        with tempfile.TemporaryDirectory() as tmp:
            for i, c in enumerate(exp.get("chat", [])):
                m = os.path.join(tmp, f"m{i}.json")
                json.dump(c["messages"], open(m, "w"))
                args = [golden.IGNIS, "chat-template", d, "--messages", m] + (["--add-generation-prompt"] if c.get("add_generation_prompt") else [])
                p = subprocess.run(args, capture_output=True)
                n += 1
                if p.returncode or p.stdout.decode() != c["rendered"]:
                    fails.append(f"{name} chat-template case {i}: {p.stdout.decode()[:80]!r} != {c['rendered'][:80]!r} {p.stderr.decode()[-200:]}")
    # bad input names the problem
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, "tokenizer.json"), "w").write('{"model": {"type": "BPE", "vocab": ')
        p = subprocess.run([golden.IGNIS, "tokenize", tmp], input=b"hi", capture_output=True)
        n += 1
        if p.returncode == 0 or "tokenizer.json" not in p.stderr.decode():
            fails.append(f"malformed tokenizer.json: exit {p.returncode}, {p.stderr.decode()!r}")
    print(f"{n} CLI checks, {len(fails)} failed")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
