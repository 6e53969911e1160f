#!/usr/bin/env python3
"""GPU golden test (issue 5): every model of ../shared/testdata/models compiled for CUDA (the GPU
this runs on, e.g. sm_90 for an H200) in f32 and bf16, teacher-forced logits and greedy ids
against transformers' float64 reference, same rule as the CPU golden test. Skipped (77) without
a GPU; scripts/gpu_check.sh runs it on the device machine. IGNIS_GPU_GOLDEN_DTYPES=bf16 narrows the
dtypes (default f32,bf16)."""
import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden, numpy_llama

def gpu_arch():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if p.returncode != 0 or not p.stdout.strip():
        return None
    return "sm_" + p.stdout.split()[0].replace(".", "")

def main():
    golden.require_testdata()
    arch = gpu_arch()
    if not arch:
        print("SKIP: no GPU")
        return 77
    fails = []
    dtypes = os.environ.get("IGNIS_GPU_GOLDEN_DTYPES", "f32,bf16,f16").split(",")
    runs = [(m, dt, None) for m in golden.MODELS + golden.EXTRA_MODELS for dt in dtypes]
    # issue 21's families: Phi-3; GLM-4 (partial interleaved rotary, post-norms); Gemma 3 (sliding-window
    # + global layers, two RoPE bases, GeGLU, scaled embeddings, query_pre_attn_scalar); the
    # mixture-of-experts ones (moe.cu: f32 router, top-k, the selected experts; prefill grouped by expert)
    runs += [(m, dt, None) for m in ("phi3", "glm4", "gemma3", "mixtral", "qwen2-moe-shared", "qwen3-moe") for dt in dtypes]
    # issue 21's family variants (scripts/make_heldout_models.py: expert counts, top-k, dense layers
    # among MoE ones, padded expert sizes, windows, Gemma 3 patterns, rotary fractions, longrope, tied)
    runs += [(m, dt, None) for m in golden.HELDOUT_MODELS for dt in dtypes
             if dt == "f32" or m not in golden.HELDOUT_F32_ONLY]
    # Mistral with a window (8) shorter than the context on every layer, against the float64 numpy
    # reference of tests/numpy_llama.py (no transformers reference of it is stored)
    runs += [("mistral-window8", dt, None) for dt in dtypes]
    # the persistent decode kernel's multi-split attention (merge of partial softmax states): the
    # reference contexts are short, so force a split every 4 keys; with one-head attention items
    # (the default) and with items of a whole GQA group
    stream = ("llama-stream-h256", "qwen3-stream-bias", "llama-stream-ksplit")
    runs += [(m, "bf16", "dl_keys=4") for m in stream]
    runs += [(m, "bf16", f"dl_keys={k},dl_heads=0") for m in stream for k in ("4", "256")]
    # MoE layers on the persistent kernel (the default, compile-time --tune dl_moe=1: "c:" compile keys,
    # then ";" and run-time ones): the route phase, the selected experts' gate/up and weighted down
    # (stream_moe.cuh); with a context split every 4 keys too; and moe.cu's two launches (dl_moe=0)
    # with a shared expert (Qwen2-MoE), and a dense layer among MoE ones (imported as a shared expert)
    moe_stream = ("qwen3-moe-stream", "mixtral-stream", "qwen2-moe-stream", "qwen3-moe-dense-stream")
    runs += [(m, "bf16", t) for m in moe_stream for t in ("c:dl_moe=0", "c:dl_moe=1;dl_keys=4")]
    # prefill attention: the fixtures that take its warp-specialized form by default (attention_prefill.cu
    # _flash_ws: head size 128 with 2 heads a CTA on 128-key tiles, one head under a sliding window,
    # head size 64 with 4 heads) also on the block-barrier form (--tune ap_ws=0: _flash_wg)
    runs += [(m, "bf16", "c:ap_ws=0") for m in ("qwen3-hd128", "mistral-hd128-window", "qwen3-bias-hd64")]
    # without cuBLAS (--tune cublas=0: what a bundle on a machine with only the driver runs): the
    # prefill GEMMs on gemm.cu, f32 and 16-bit, dense and with MoE and Gemma's layers around them
    runs += [(m, dt, "cublas=0") for m in ("llama-gqa", "qwen2-bias-tied") for dt in dtypes]
    runs += [(m, "bf16", "cublas=0") for m in ("gemma3", "qwen3-moe")]
    only = os.environ.get("IGNIS_GPU_GOLDEN_MODELS")  # a comma list: a quicker subset while iterating
    if only:
        runs = [r for r in runs if r[0] in only.split(",")]
    with tempfile.TemporaryDirectory(prefix="ignis-gpu-golden-") as tmp:
        made = os.path.join(tmp, "models")
        if any(r[0] == "mistral-window8" for r in runs):
            numpy_llama.make_window_model(os.path.join(golden.TESTDATA, "models", "mistral-sharded"),
                                          os.path.join(made, "mistral-window8"), 8)
        for model, dtype, tune in runs:
            mdir = golden.EXTRA_DIR if model in golden.EXTRA_MODELS + golden.HELDOUT_MODELS else made if model == "mistral-window8" else None
            ctune, rtune = (tune[2:].partition(";")[::2] if tune and tune.startswith("c:") else (None, tune))
            try:
                fails += [f + (f" (--tune {tune})" if tune else "") for f in
                          golden.check_model(model, dtype, tmp, target=f"cuda:{arch}", models_dir=mdir, tune=rtune or None,
                                             ctune=ctune)]
            except Exception as e:
                fails.append(f"{model} {dtype}{f' (--tune {tune})' if tune else ''}: {e}")
    if not only or "quant" in only.split(","):  # quantized rows (templates/cuda/wq.cuh)
        import test_quant
        with tempfile.TemporaryDirectory(prefix="ignis-gpu-quant-") as tmp:
            test_quant.cuda_checks(arch, tmp, fails, gpu=True)
    for f in fails:
        print("FAIL:", f)
    print(f"test_gpu_golden: {len(runs)} runs, " + (f"{len(fails)} failures" if fails else "all passed"))
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
