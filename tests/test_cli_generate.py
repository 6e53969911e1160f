#!/usr/bin/env python3
"""`ignis generate` through the engine (issue 4 CLI): --tokens-file runs every line concurrently
and prints one line per prompt in input order, each equal to transformers' greedy tokens for that
prompt (reference.json `batch`); a bad line fails only its own prompt; sampling flags with a seed
repeat exactly, and without --seed two runs differ (a random seed, which --verbose prints); a
request cut short by the model's context or the KV cache says which on stderr; `compile
--max-context` moves that context (past the model's own with a warning, logits unchanged where both
serve); invalid flag values are refused with the flag named."""
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
        unseeded = [a for a in args if a not in ("--seed", "123")] + ["--verbose"]
        runs = [golden.run(unseeded) for _ in range(2)]
        seeds = [r.stderr.split("seed ")[1].split()[0] if "seed " in r.stderr else None for r in runs]
        if runs[0].stdout == runs[1].stdout or None in seeds or seeds[0] == seeds[1]:
            fails.append(f"sampling without --seed repeats or says no seed: {seeds} {runs[0].stdout!r}")
        elif golden.run(args[:args.index("--seed") + 1] + [seeds[0]] + ["--ignore-eos"]).stdout != runs[0].stdout:
            fails.append(f"the printed seed {seeds[0]} does not give the run's tokens again")
        # the context (max_position_embeddings) cuts a long prompt's reply short, and says so
        ctx = json.load(open(os.path.join(golden.TESTDATA, "models", "llama3-rope-tied", "config.json")))["max_position_embeddings"]
        long = ",".join(str(i % 200 + 1) for i in range(ctx - 5))
        p = golden.run(["generate", pkg, "--tokens", long, "--max-new-tokens", "50", "--ignore-eos"], check=False)
        if p.returncode or len(p.stdout.split()) != 5 or f"context of {ctx} tokens is full" not in p.stderr:
            fails.append(f"reply cut by the context: rc {p.returncode}, {len(p.stdout.split())} tokens, {p.stderr!r}")
        # --max-context: past the model's own the same prompt's reply runs to the end (with a warning at
        # compile time), the logits where both packages serve are the same, and a smaller context refuses
        # a longer prompt by its length
        big = os.path.join(tmp, "maxctx-big")
        p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama3-rope-tied"), "-o", big, "--dtype", "f32",
                        "--max-context", str(ctx + 64)])
        if f"past the model's {ctx} tokens" not in p.stderr:
            fails.append(f"--max-context {ctx + 64}: no warning about the model's {ctx}: {p.stderr!r}")
        p = golden.run(["generate", big, "--tokens", long, "--max-new-tokens", "50", "--ignore-eos"], check=False)
        if p.returncode or len(p.stdout.split()) != 50:
            fails.append(f"--max-context {ctx + 64}: rc {p.returncode}, {len(p.stdout.split())} of 50 tokens, {p.stderr!r}")
        ids = [int(x) for x in lines[0].split(",")]
        a, b = golden.step_logits(pkg, ids, True), golden.step_logits(big, ids, True)
        if not (a == b).all():
            fails.append(f"--max-context changed the logits: max diff {abs(a - b).max():.3g}")
        small = os.path.join(tmp, "maxctx-small")
        golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama3-rope-tied"), "-o", small, "--dtype", "f32",
                    "--max-context", "16"])
        p = golden.run(["generate", small, "--tokens", ",".join(["5"] * 20), "--max-new-tokens", "2"], check=False)
        if p.returncode == 0 or "16" not in p.stderr:
            fails.append(f"--max-context 16 with a 20-token prompt: rc {p.returncode}, {p.stderr!r}")
        p = golden.run(["generate", pkg, "--tokens", "1,2,3", "--max-new-tokens", "50", "--ignore-eos", "--kv-pages", "2"],
                       check=False)
        n = len(p.stdout.split())
        if p.returncode or not 0 < n < 50 or "KV cache cannot hold" not in p.stderr:
            fails.append(f"reply cut by the KV cache: rc {p.returncode}, {p.stdout!r} {p.stderr!r}")
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
