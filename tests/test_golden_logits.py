#!/usr/bin/env python3
"""Golden test (issue 2): every model of ../shared/testdata/models compiled for the CPU in f32
and bf16; teacher-forced logits and greedy continuations against HuggingFace transformers'
float64 outputs (reference.safetensors / reference.json). Also: the AVX2 and portable-C code
paths, compiling from a serialized .igraph, and byte-identical output for identical input."""
import filecmp, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

def main():
    golden.require_testdata()
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-golden-") as tmp:
        for model in golden.MODELS + golden.ARCH2_MODELS:
            for dtype in ("f32", "bf16"):
                try:
                    fails += golden.check_model(model, dtype, tmp)
                except Exception as e:  # a crash or a CLI error is a failure of this case
                    fails.append(f"{model} {dtype}: {e}")
        # variants real checkpoints have: MQA/MHA, linear rope, attention + MLP biases, head_dim 64/80
        for model in golden.EXTRA_MODELS:
            for dtype in ("f32", "bf16"):
                try:
                    fails += golden.check_model(model, dtype, tmp, models_dir=golden.EXTRA_DIR)
                except Exception as e:
                    fails.append(f"{model} {dtype}: {e}")
        # other ISA levels of the kernels than the native one above (which is the host's best: on an
        # AVX2-only host the AVX-512 cases are skipped, and named as skipped)
        for model, dtype, target in (("llama-gqa", "f32", "cpu:avx2"), ("qwen3-qknorm", "bf16", "cpu:avx2"),
                                     ("qwen2-bias-tied", "f32", "cpu:generic"), ("llama3-rope-tied", "bf16", "cpu:generic"),
                                     ("mistral-sharded", "bf16", "cpu:avx512"), ("qwen3-qknorm", "f32", "cpu:avx512"),
                                     ("llama-gqa", "bf16", "cpu:avx512bf16"), ("gemma3", "f32", "cpu:generic"),
                                     ("qwen3-moe", "bf16", "cpu:avx2"), ("glm4", "bf16", "cpu:avx512bf16")):
            if not golden.host_runs(target):
                print(f"SKIP {model} {dtype} {target}: this host lacks {' '.join(sorted(golden.CPU_TARGET_FLAGS[target] - golden.host_cpu_flags()))}")
                continue
            try:
                fails += golden.check_model(model, dtype, tmp, target=target)
            except Exception as e:
                fails.append(f"{model} {dtype} {target}: {e}")
        # import -> .igraph -> compile gives the same package as compiling the folder (the new
        # families' hyper-parameters and stacked experts survive serialization)
        for model in ("gemma3", "qwen2-moe-shared"):
            try:
                ig = os.path.join(tmp, f"{model}.igraph")
                golden.run(["import", os.path.join(golden.TESTDATA, "models", model), "-o", ig])
                fails += golden.check_model(model, "f32", tmp, target="cpu", source=ig)
                for f in ("src/model.c", "weights.bin"):
                    if not filecmp.cmp(os.path.join(tmp, f"{model}-f32-native", f), os.path.join(tmp, f"{model}-f32-cpu", f),
                                       shallow=False):
                        fails.append(f"{model}: {f} differs between the folder and the .igraph route")
            except Exception as e:
                fails.append(f"{model} igraph route: {e}")
        try:
            ig = os.path.join(tmp, "mistral.igraph")
            golden.run(["import", os.path.join(golden.TESTDATA, "models", "mistral-sharded"), "-o", ig])
            fails += golden.check_model("mistral-sharded", "f32", tmp, target="cpu", source=ig)
            a = os.path.join(tmp, "mistral-sharded-f32-native")
            b = os.path.join(tmp, "mistral-sharded-f32-cpu")
            for f in ("src/model.c", "weights.bin"):
                if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False):
                    fails.append(f"mistral-sharded: {f} differs between the folder and the .igraph route (same input)")
        except Exception as e:
            fails.append(f"igraph route: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
