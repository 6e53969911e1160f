#!/usr/bin/env python3
"""GGUF twins (issue 21): each new family's tiny HF model written as a GGUF by the `gguf` package
(tests/gguf_twin.py, at test time) compiles, and its package's logits and greedy tokens match the
transformers float64 reference of the HF model (the same check as the HF folder's golden test),
and its logits match the HF folder's package. Skipped (77) without the test data or the package."""
import os, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

def main():
    golden.require_testdata()
    try:
        import gguf_twin, gguf  # noqa: F401
    except ImportError:
        print("SKIP: the gguf package is not installed (scripts/install-deps.sh installs it)")
        return 77
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-gguf-twins-") as tmp:
        for model in golden.ARCH2_MODELS:
            try:
                path = os.path.join(tmp, f"{model}.gguf")
                gguf_twin.write_twin(os.path.join(golden.TESTDATA, "models", model), path)
                fails += golden.check_model(model, "f32", tmp, target="cpu", source=path)
                # the twins hold the same values: the two packages agree far inside the tolerance
                hf = golden.compile_model(model, "f32", os.path.join(tmp, "hf"))
                ids, _, _ = golden.reference(model)
                a, b = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
                golden.run(["logits", hf, "--tokens", ",".join(map(str, ids)), "--out", a])
                golden.run(["logits", os.path.join(tmp, f"{model}-f32-cpu"), "--tokens", ",".join(map(str, ids)), "--out", b])
                d = np.abs(np.load(a) - np.load(b)).max()
                print(f"{model:18s} gguf twin vs HF package: max|d| {d:.3e}")
                if d > 1e-5:
                    fails.append(f"{model}: GGUF twin's logits differ from the HF folder's by {d:.3e}")
            except Exception as e:
                fails.append(f"{model} gguf twin: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
