#!/usr/bin/env python3
"""`ignis generate` through the engine (issue 4 CLI): --tokens-file runs every line concurrently
and prints one line per prompt in input order, each equal to transformers' greedy tokens for that
prompt (reference.json `batch`); a bad line fails only its own prompt; sampling flags with a seed
repeat exactly; a generation the KV cache cuts says so; invalid flag values are refused with the
flag named."""
import json, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

def main():
    golden.require_testdata()
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-cli-") as tmp:
        pkg = golden.compile_model("llama3-rope-tied", "f32", tmp)
        ref = json.load(open(os.path.join(golden.TESTDATA, "models", "llama3-rope-tied", "reference.json")))
        lines = [",".join(map(str, b["prompt"])) for b in ref["batch"]]
        f = os.path.join(tmp, "prompts.txt")
        open(f, "w").write("\n".join([lines[2], lines[0], "1,99999,2", lines[1]]) + "\n")
        p = golden.run(["generate", pkg, "--tokens-file", f, "--max-new-tokens", "8", "--ignore-eos"], check=False)
        out = p.stdout.split("\n")
        want = [ref["batch"][2]["greedy"], ref["batch"][0]["greedy"], None, ref["batch"][1]["greedy"]]
        for i, w in enumerate(want):
            got = [int(x) for x in out[i].split()] if i < len(out) and out[i].strip() else None
            if got != w:
                fails.append(f"--tokens-file line {i + 1}: {got} != {w}")
        if p.returncode == 0 or "prompt 3" not in p.stderr or "99999" not in p.stderr:
            fails.append(f"bad line not reported on its own: rc {p.returncode} {p.stderr!r}")
        args = ["generate", pkg, "--tokens", lines[0], "--max-new-tokens", "12", "--temperature", "0.9", "--top-p", "0.9",
                "--top-k", "50", "--min-p", "0.02", "--repetition-penalty", "1.1", "--presence-penalty", "0.2",
                "--frequency-penalty", "0.1", "--seed", "123", "--ignore-eos"]
        a, b = golden.run(args).stdout, golden.run(args).stdout
        if a != b or len(a.split()) != 12:
            fails.append(f"seeded sampling does not repeat: {a!r} vs {b!r}")
        # a KV cache of 2 pages cuts a long generation: said on stderr, not passed off as max-new-tokens
        p = golden.run(["generate", pkg, "--tokens", lines[0], "--max-new-tokens", "200", "--ignore-eos", "--kv-pages", "2"],
                       check=False)
        n = len(p.stdout.split())
        if p.returncode != 0 or not 0 < n < 200 or "KV cache" not in p.stderr:
            fails.append(f"KV-cut generation: rc {p.returncode}, {n} tokens, stderr {p.stderr!r}")
        for flag, val in (("--temperature", "-1"), ("--top-p", "1.5"), ("--top-k", "-3"), ("--temperature", "abc")):
            p = golden.run(["generate", pkg, "--tokens", "1,2", flag, val], check=False)
            if p.returncode == 0 or flag.strip("-").replace("-", "_") not in p.stderr.replace("-", "_"):
                fails.append(f"{flag} {val}: rc {p.returncode}, {p.stderr!r}")
    for x in fails:
        print("FAIL:", x)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
