#!/usr/bin/env python3
"""Sliding-window attention on every layer (Mistral-style window shorter than the context):
KV pages that fall out of the window are released while a sequence runs. mistral-sharded with
sliding_window 8 generates 100 tokens through the engine in a pool of 3 pages of 16 tokens (the
116 tokens need 8 pages without the release); its greedy tokens are the argmax of the teacher-
forced logits of one forward over the whole sequence (`ignis logits`: every page present, no
release), compared up to the first step whose top-2 margin is within float noise. The window is
checked to matter: those logits differ from the windowless model's after the 8th position.
(The window's semantics against transformers: Gemma 3's golden test.) The windowed package is also
held to tests/numpy_llama.py's float64 reference (the GPU golden test's for CUDA), after that
reference is checked against transformers' on the windowless model."""
import json, os, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden, numpy_llama

def main():
    golden.require_testdata()
    src = os.path.join(golden.TESTDATA, "models", "mistral-sharded")
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-window-") as tmp:
        mdir = os.path.join(tmp, "mistral-window8")
        os.makedirs(mdir)
        for f in os.listdir(src):
            if f != "config.json":
                os.symlink(os.path.join(src, f), os.path.join(mdir, f))
        cfg = json.load(open(os.path.join(src, "config.json")))
        cfg["sliding_window"] = 8
        json.dump(cfg, open(os.path.join(mdir, "config.json"), "w"))
        pkg = golden.compile_model("mistral-window8", "f32", tmp, models_dir=tmp)
        full = golden.compile_model("mistral-sharded", "f32", tmp)
        # the numpy reference: transformers' logits without a window, then the package's with one
        ids, ref, _ = golden.reference("mistral-sharded")
        d = np.abs(numpy_llama.logits(src, list(ids)) - ref).max() / np.abs(ref).max()
        if d > 1e-5:
            fails.append(f"numpy reference vs transformers (no window): {d:.2e} x max|ref|")
        ref_dir = os.path.join(tmp, "ref")
        numpy_llama.make_window_model(src, os.path.join(ref_dir, "mistral-window8"), 8)
        fails += golden.check_model("mistral-window8", "f32", ref_dir, models_dir=ref_dir)
        prompt = json.load(open(os.path.join(src, "reference.json")))["prompt"]
        p = golden.run(["generate", pkg, "--tokens", ",".join(map(str, prompt)), "--max-new-tokens", "100",
                        "--ignore-eos", "--kv-pages", "3"], check=False)
        gen = [int(x) for x in p.stdout.split()] if p.returncode == 0 else []
        if len(gen) != 100:
            fails.append(f"generate in 3 KV pages: {len(gen)} tokens, rc {p.returncode}: {p.stderr.strip()[-300:]}")
        else:
            seq = prompt + gen[:-1]
            npy = os.path.join(tmp, "w.npy")
            golden.run(["logits", pkg, "--tokens", ",".join(map(str, seq)), "--out", npy])
            lg = np.load(npy).astype(np.float64)[len(prompt) - 1:]
            top2 = np.sort(lg, axis=1)[:, -2:]
            margin = top2[:, 1] - top2[:, 0]
            n = next((i for i, m in enumerate(margin) if m < 1e-4 * np.abs(lg).max()), len(gen))
            want = list(np.argmax(lg, axis=1)[:n])
            print(f"window 8, 3 pages: 100 tokens; {n} compared with one-forward argmax")
            if gen[:n] != want or n < 20:
                fails.append(f"engine tokens with page release {gen[:n]} != one-forward argmax {want}")
            golden.run(["logits", full, "--tokens", ",".join(map(str, seq)), "--out", npy])
            d = np.abs(np.load(npy).astype(np.float64)[len(prompt) - 1:] - lg).max()
            if d < 1e-2:
                fails.append(f"the window of 8 changes the logits by only {d:.2e}: the test would not see it")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
