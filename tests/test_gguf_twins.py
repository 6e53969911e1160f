#!/usr/bin/env python3
"""GGUF twins (issue 21): each new family's tiny HF model written as a GGUF by the `gguf` package
(tests/gguf_twin.py, at test time) compiles, its package's teacher-forced logits match the
transformers float64 reference of the HF model (f32 bound), and they equal the HF folder's
package's (greedy and the decode path are the golden test's, on the same code). Skipped (77) without the test data or the package."""
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
        # the shared families, and Gemma 3's final soft-cap (a GGUF key of its own)
        cases = [(model, None) for model in golden.ARCH2_MODELS] + [("gemma3-softcap", golden.EXTRA_DIR)]
        for model, mdir in cases:
            try:
                path = os.path.join(tmp, f"{model}.gguf")
                gguf_twin.write_twin(os.path.join(mdir or os.path.join(golden.TESTDATA, "models"), model), path)
                twin = golden.compile_model(model, "f32", tmp, target="cpu", source=path)
                hf = golden.compile_model(model, "f32", os.path.join(tmp, "hf"), models_dir=mdir)
                ids, ref, _ = golden.reference(model, mdir)
                got = {}
                for name, pkg in (("gguf", twin), ("hf", hf)):
                    npy = os.path.join(tmp, f"{name}.npy")
                    golden.run(["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy])
                    got[name] = np.load(npy).astype(np.float64)
                rel = np.abs(got["gguf"] - ref).max() / np.abs(ref).max()
                d = np.abs(got["gguf"] - got["hf"]).max()
                print(f"{model:18s} gguf twin: {rel:.2e} x max|ref| (limit {golden.TOL['f32']:.0e}); vs HF package max|d| {d:.3e}")
                if not rel <= golden.TOL["f32"]:
                    fails.append(f"{model}: GGUF twin's logits {rel:.3e} x max|ref| off the reference")
                # the twins hold the same values: the two packages agree far inside the tolerance
                if d > 1e-5:
                    fails.append(f"{model}: GGUF twin's logits differ from the HF folder's by {d:.3e}")
            except Exception as e:
                fails.append(f"{model} gguf twin: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
