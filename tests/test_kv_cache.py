#!/usr/bin/env python3
"""Quantized KV cache formats (issue 17): `ignis compile --kv-cache int8|uint4|fp8` on CPU.

1. Tiny models against the transformers float64 references (f32 activations, so the KV format
   is the main error): teacher-forced logits, prefill and one-token steps, within
   max |logit error| / max |reference logit| of BOUND (measured: int8 0.007-0.030, about 3x the
   bf16 KV error of the same packages; uint4 0.14-0.58: these random models have a deliberately
   large spread, 16 levels per row cost a lot, so the bound only catches gross breakage; the exact
   layout, rounding and rotation are checked by test_kernels; fp8 (e4m3, amax / 448 per row):
   0.036-0.27, about 5x int8 and half uint4, since 3 mantissa bits give ~3% relative error per element), and greedy ids equal to the
   reference up to the first step whose top-2 margin is within twice the measured error (the
   project's margin rule, tests/golden.py).
2. The manifest records the format and its bytes per token, which must equal the layout's
   (templates/cpu/kv_quant.h: per layer, token and KV head, K and V rows of head_dim codes of
   8 or 4 bits + an f16 scale + an 8-bit zero point; fp8 the int8 layout), computed here from config.json; `ignis
   bench` prints the same figure.
3. Bad --kv-cache values are errors naming the value (f16 on the CPU). CUDA packages take int8 / uint4 / fp8
   too: tests/test_cuda_package.py (compile) and tests/test_gpu_kv_cache.py (on a GPU).
The real model's perplexity is tests/test_kv_cache_smollm2.py."""
import json, os, re, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

BOUND = {"int8": 0.05, "fp8": 0.4, "uint4": 1.0}
BITS = {"int8": 8, "fp8": 8, "uint4": 4}
MODELS = [("llama-gqa", None), ("qwen3-qknorm", None), ("gemma3", None), ("qwen3-bias-hd64", golden.EXTRA_DIR)]


def bytes_per_token(cfg, bits):
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    return cfg["num_hidden_layers"] * 2 * kv * (d * bits // 8 + 3)


def check_tiny(tmp, fails):
    for model, mdir in MODELS:
        base = mdir or os.path.join(golden.TESTDATA, "models")
        src = os.path.join(base, model)
        ids, ref, meta = golden.reference(model, mdir)
        cfg = json.load(open(os.path.join(src, "config.json")))
        cfg = cfg.get("text_config", cfg)
        scale = np.abs(ref).max()
        for kv in ("int8", "fp8", "uint4"):
            pkg = os.path.join(tmp, f"{model}-{kv}")
            try:
                golden.run(["compile", src, "-o", pkg, "--dtype", "f32", "--kv-cache", kv])
                err = golden.logits_abs_error(pkg, ids, ref)
                rel = err / scale
                ok = rel <= BOUND[kv]
                print(f"{model:16s} {kv:5s} KV: logits max|d| = {rel:.2e} x max|ref| (bound {BOUND[kv]}) {'ok' if ok else 'FAIL'}")
                if not ok:
                    fails.append(f"{model} {kv}: logits error {rel:.3e} > {BOUND[kv]}")
                prompt, greedy, margins = meta["prompt"], meta["greedy"], meta["greedy_top2_margin"]
                out = golden.run(["generate", pkg, "--tokens", ",".join(map(str, prompt)), "--max-new-tokens",
                                  str(len(greedy)), "--ignore-eos"]).stdout.split()
                out = [int(x) for x in out]
                n_cmp = next((i for i, m in enumerate(margins) if m <= 2 * err), len(greedy))
                same = out[:n_cmp] == greedy[:n_cmp]
                print(f"{model:16s} {kv:5s} KV: greedy {n_cmp}/{len(greedy)} steps compared {'ok' if same else 'FAIL'}")
                if not same:
                    fails.append(f"{model} {kv}: greedy {out[:n_cmp]} != reference {greedy[:n_cmp]}")
                m = json.load(open(os.path.join(pkg, "manifest.json")))
                want = bytes_per_token(cfg, BITS[kv])
                if m.get("kv_dtype") != kv or m.get("kv_bytes_per_token") != want:
                    fails.append(f"{model} {kv}: manifest kv_dtype {m.get('kv_dtype')}, kv_bytes_per_token "
                                 f"{m.get('kv_bytes_per_token')} (want {kv}, {want})")
                if model == "qwen3-bias-hd64" and kv in ("int8", "fp8"):
                    b = golden.run(["bench", pkg, "--prompt-len", "16", "--decode-tokens", "2"]).stdout
                    line = re.search(r"^kv cache: (\d+) bytes per token", b, re.M)
                    if not line or int(line.group(1)) != want:
                        fails.append(f"{model} {kv}: bench's kv cache line {line and line.group(0)!r}, want {want} bytes")
            except Exception as e:
                fails.append(f"{model} {kv}: {e}")


def check_bad(tmp, fails):
    src = os.path.join(golden.TESTDATA, "models", "llama-gqa")
    # (int8 / uint4 / fp8 on CUDA targets: tests/test_cuda_package.py compiles them, test_gpu_kv_cache.py runs them)
    for args, word in ((["--kv-cache", "int3"], "int3"), (["--kv-cache", "f16"], "f16")):
        p = golden.run(["compile", src, "-o", os.path.join(tmp, "bad"), "--dtype", "f32"] + args, check=False)
        if p.returncode == 0 or word not in p.stderr or "--kv-cache" not in p.stderr:
            fails.append(f"compile {' '.join(args)}: exit {p.returncode}, stderr {p.stderr.strip()!r} (wanted '{word}')")


def main():
    golden.require_testdata()
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-kvq-") as tmp:
        check_tiny(tmp, fails)
        check_bad(tmp, fails)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
