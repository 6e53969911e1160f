#!/usr/bin/env python3
"""Quantized KV cache on CUDA (issue 17): `ignis compile --target cuda:<this GPU> --kv-cache int8|uint4|fp8`
of the tiny test models against the transformers float64 references, with the CPU test's bounds
(tests/test_kv_cache.py's BOUND on max |logit error| / max |reference logit|, plus the golden
tolerance of the package's dtype for bf16 activations), over the prefill path and the one-token
step path (`ignis logits` with and without --step: the fused rope + split decode attention), greedy
ids up to the margin rule, the manifest's format and bytes per token; and a CPU package with the
same KV format must agree with the CUDA one (f32 activations both: the same page format, so the two
differ only by the rare code that an ulp of RoPE moves; bound AGREE). The persistent decode kernel's
quantized-KV attention (the default, dl_kvq=1; run with a context split every 4 keys so the short
reference contexts exercise the split merge) is checked on the stream models against the references
and against the per-op package of the same format (`--tune dl_kvq=0`; check_persistent). Skipped (77) without a GPU;
scripts/gpu_check.sh runs it on the device machine. IGNIS_GPU_KV_MODELS narrows the models."""
import json, os, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
from test_gpu_golden import gpu_arch
from test_kv_cache import BOUND, BITS, bytes_per_token

# (model, models dir, activations dtypes): head_dim 16 (GQA 4), 48 (q/k norm), 64, 80 (MHA)
MODELS = [("llama-gqa", None, ("f32", "bf16")), ("qwen3-qknorm", None, ("f32",)),
          ("qwen3-bias-hd64", golden.EXTRA_DIR, ("f32", "bf16")), ("llama-mha-hd80", golden.EXTRA_DIR, ("bf16",))]
AGREE = {"int8": 0.02, "uint4": 0.4, "fp8": 0.4}


def logits(pkg, ids, step):
    npy = pkg + (".step" if step else "") + ".npy"
    golden.run(["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy] + (["--step"] if step else []))
    return golden.read_npy(npy).astype(np.float64)


def check(tmp, arch, model, mdir, dtypes, kv, fails):
    src = os.path.join(mdir or os.path.join(golden.TESTDATA, "models"), model)
    if mdir:
        golden.ensure_weights(src)
    ids, ref, meta = golden.reference(model, mdir)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg = cfg.get("text_config", cfg)
    scale = np.abs(ref).max()
    got = {}
    for dt in dtypes:
        pkg = os.path.join(tmp, f"{model}-{dt}-{kv}-cuda")
        golden.run(["compile", src, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", dt, "--kv-cache", kv])
        prefill, step = logits(pkg, ids, False), logits(pkg, ids, True)
        got[dt] = prefill
        err = max(np.abs(prefill - ref).max(), np.abs(step - ref).max())
        bound = BOUND[kv] + (golden.TOL[dt] if dt != "f32" else 0.0)
        ok = err / scale <= bound
        print(f"{model:16s} {dt:4s} {kv:5s} KV cuda: logits max|d| = {err / scale:.2e} x max|ref| (bound {bound:.3g}) "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            fails.append(f"{model} {dt} {kv} cuda: logits error {err / scale:.3e} > {bound:.3g}")
        prompt, greedy, margins = meta["prompt"], meta["greedy"], meta["greedy_top2_margin"]
        out = golden.run(["generate", pkg, "--tokens", ",".join(map(str, prompt)), "--max-new-tokens", str(len(greedy)),
                          "--ignore-eos"]).stdout.split()
        out = [int(x) for x in out]
        n_cmp = next((i for i, m in enumerate(margins) if m <= 2 * err), len(greedy))
        if out[:n_cmp] != greedy[:n_cmp]:
            fails.append(f"{model} {dt} {kv} cuda: greedy {out[:n_cmp]} != reference {greedy[:n_cmp]}")
        print(f"{model:16s} {dt:4s} {kv:5s} KV cuda: greedy {n_cmp}/{len(greedy)} steps compared "
              f"{'ok' if out[:n_cmp] == greedy[:n_cmp] else 'FAIL'}")
        m = json.load(open(os.path.join(pkg, "manifest.json")))
        want = bytes_per_token(cfg, BITS[kv])
        if m.get("kv_dtype") != kv or m.get("kv_bytes_per_token") != want:
            fails.append(f"{model} {dt} {kv} cuda: manifest kv_dtype {m.get('kv_dtype')}, kv_bytes_per_token "
                         f"{m.get('kv_bytes_per_token')} (want {kv}, {want})")
    if "f32" in got:
        cpu = os.path.join(tmp, f"{model}-f32-{kv}-cpu")
        golden.run(["compile", src, "-o", cpu, "--dtype", "f32", "--kv-cache", kv])
        d = np.abs(logits(cpu, ids, False) - got["f32"]).max() / scale
        print(f"{model:16s} f32  {kv:5s} KV: CPU vs CUDA max|d| = {d:.2e} x max|ref| (bound {AGREE[kv]}) "
              f"{'ok' if d <= AGREE[kv] else 'FAIL'}")
        if not d <= AGREE[kv]:
            fails.append(f"{model} {kv}: CPU and CUDA packages differ by {d:.3e} > {AGREE[kv]}")


# the persistent kernel's models (tests/golden.py EXTRA_DIR: shapes its phases take) and the bound of
# its step logits against the per-op package's (both bf16, the same pages: they differ by bf16
# rounding of the same operands in another order, as test_gpu_golden's persistent runs do)
STREAM_MODELS = ("llama-stream-h256", "llama-stream-ksplit")
PERSIST_AGREE = 0.03


def check_persistent(tmp, arch, model, kv, fails):
    src = os.path.join(golden.EXTRA_DIR, model)
    golden.ensure_weights(src)
    ids, ref, meta = golden.reference(model, golden.EXTRA_DIR)
    scale = np.abs(ref).max()
    pkgs = {}
    for name, extra in (("per-op", ["--tune", "dl_kvq=0"]), ("persistent", [])):
        pkgs[name] = os.path.join(tmp, f"{model}-bf16-{kv}-{name}")
        golden.run(["compile", src, "-o", pkgs[name], "--target", f"cuda:{arch}", "--dtype", "bf16", "--kv-cache", kv] + extra)
    split = ["--tune", "dl_keys=4"]

    def step(pkg, tune):
        npy = pkg + ".step.npy"
        golden.run(["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy, "--step"] + tune)
        return golden.read_npy(npy).astype(np.float64)
    dl, op = step(pkgs["persistent"], split), step(pkgs["per-op"], [])
    err = np.abs(dl - ref).max()
    bound = BOUND[kv] + golden.TOL["bf16"]
    agree = np.abs(dl - op).max() / scale
    ok = err / scale <= bound and agree <= PERSIST_AGREE
    print(f"{model:18s} bf16 {kv:5s} KV cuda, persistent kernel (dl_keys=4): steps max|d| = {err / scale:.2e} x "
          f"max|ref| (bound {bound:.3g}), against the per-op kernels {agree:.2e} (bound {PERSIST_AGREE}) {'ok' if ok else 'FAIL'}")
    if not ok:
        fails.append(f"{model} bf16 {kv} persistent kernel: error {err / scale:.3e} (bound {bound:.3g}), "
                     f"per-op difference {agree:.3e} (bound {PERSIST_AGREE})")
    prompt, greedy, margins = meta["prompt"], meta["greedy"], meta["greedy_top2_margin"]
    out = [int(x) for x in golden.run(["generate", pkgs["persistent"], "--tokens", ",".join(map(str, prompt)),
                                       "--max-new-tokens", str(len(greedy)), "--ignore-eos"] + split).stdout.split()]
    n_cmp = next((i for i, m in enumerate(margins) if m <= 2 * err), len(greedy))
    same = out[:n_cmp] == greedy[:n_cmp]
    if not same:
        fails.append(f"{model} bf16 {kv} persistent kernel: greedy {out[:n_cmp]} != reference {greedy[:n_cmp]}")
    print(f"{model:18s} bf16 {kv:5s} KV cuda, persistent kernel: greedy {n_cmp}/{len(greedy)} steps compared "
          f"{'ok' if same else 'FAIL'}")


def main():
    golden.require_testdata()
    arch = gpu_arch()
    if not arch:
        print("SKIP: no GPU")
        return 77
    only = os.environ.get("IGNIS_GPU_KV_MODELS")
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-gpu-kvq-") as tmp:
        for model, mdir, dtypes in MODELS:
            if only and model not in only.split(","):
                continue
            for kv in ("int8", "uint4", "fp8"):
                try:
                    check(tmp, arch, model, mdir, dtypes, kv, fails)
                except Exception as e:
                    fails.append(f"{model} {kv}: {e}")
        for model in STREAM_MODELS:
            if only and model not in only.split(","):
                continue
            for kv in ("int8", "uint4", "fp8"):
                try:
                    check_persistent(tmp, arch, model, kv, fails)
                except Exception as e:
                    fails.append(f"{model} {kv} persistent: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
