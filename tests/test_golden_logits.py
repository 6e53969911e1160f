#!/usr/bin/env python3
"""Golden test (issue 2): every model of ../shared/testdata/models compiled for the CPU in f32
and bf16; teacher-forced logits and greedy continuations against HuggingFace transformers'
float64 outputs (reference.safetensors / reference.json)."""
import os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

def main():
    golden.require_testdata()
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-golden-") as tmp:
        for model in golden.MODELS:
            for dtype in ("f32", "bf16"):
                try:
                    fails += golden.check_model(model, dtype, tmp)
                except Exception as e:  # a crash or a CLI error is a failure of this case
                    fails.append(f"{model} {dtype}: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
