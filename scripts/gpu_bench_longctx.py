#!/usr/bin/env python3
"""Long-context GPU benchmark (issue 17), run on the device from a checkout with devbuild/
(scripts/gpu_prepare.sh): a random-weight checkpoint of Llama-3.2-1B's shape in bf16 (llama3 rope
scaling, max_position_embeddings 131072: scripts/make_random_llama.py), compiled for this GPU, then
`ignis bench` with default settings at a 32k-token prompt and at a full 128k context (a 130944-token
prompt + 128 decode steps = 131072 positions). For each: prefill tokens/s and the share of the bf16
tensor peak (989 TFLOP/s dense, H200) counting matmul and causal attention FLOPs; decode ms/token at
that context against the roofline of the bytes a token reads there (weights + the K/V of the
context) at the measured copy bandwidth. Targets (issue 17): prefill >= 50% (32k) / >= 45% (128k) of
peak, decode >= 70% of the roofline. Then decode after an 8k-token prompt with bf16, int8, uint4 and fp8 KV
(`--kv-cache`, packages compiled beside the first): ms/token each, and the issue's target int8 <= bf16;
quantized KV on the persistent kernel (the default) and on the per-op kernels (`--tune dl_kvq=0`), and
the two paths' step logits against each other on one package per format (bf16 KV as the control).
Each long-context decode also runs on the two attention paths forced: `--tune persistent=0` (the per-op
kernels: attention.cu's split kernel) and `--tune dl_ctx_max=1073741824` (the persistent kernel at any
context), so the default's choice (dl_ctx_max, 32768 tokens) is checked at 32k and 128k; `--sweep` also
times both at 4k..32k prompts, where the two cross.
Usage: gpu_bench_longctx.py [sm_90] [--no-long] [--no-8k] [--sweep]"""
import json, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gpu_bench_common import sh, copy_bandwidth

DEV = os.path.join(ROOT, "devbuild")
IGNIS = os.environ.get("IGNIS", os.path.join(DEV, "ignis"))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
arch = args[0] if args else "sm_90"
run_long, run_8k, sweep = "--no-long" not in sys.argv, "--no-8k" not in sys.argv, "--sweep" in sys.argv
PEAK = 989e12  # H200 bf16 dense tensor FLOP/s
work = "/tmp/ignis-bench"
os.makedirs(work, exist_ok=True)
ckpt, pkg = os.path.join(work, "llama1b"), os.path.join(work, "pkg1b")
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(DEV, "lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))

try:
    import torch
    bw = copy_bandwidth(torch, torch.device("cuda"))
except Exception as e:  # no torch on the device: the H200's usual measured figure
    print(f"(no torch for the copy bandwidth: {e}; using 4.2 TB/s)")
    bw = 4.2e12
if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
    sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt])
cfg = json.load(open(os.path.join(ckpt, "config.json")))
assert cfg["max_position_embeddings"] == 131072 and cfg["rope_scaling"]["rope_type"] == "llama3", "checkpoint without llama3 scaling"
if not os.path.exists(os.path.join(pkg, "model.so")):
    sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", "bf16"], env=env)
wbytes = os.path.getsize(os.path.join(pkg, "weights.bin"))
L, H, I = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]
nh, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
mat = L * (H * (nh * d + 2 * nkv * d) + nh * d * H + 3 * H * I)  # matmul parameters a token multiplies
print(f"copy bandwidth {bw / 1e12:.2f} TB/s (read + write); bf16 peak {PEAK / 1e12:.0f} TFLOP/s; weights {wbytes / 1e9:.2f} GB")

FORCED = (("per-op", "persistent=0"), ("persistent", "dl_ctx_max=1073741824"))


def decode_ms(P, N, tune):
    """Decode ms/token of `ignis bench` after a P-token prompt, with run-time tuning `tune`."""
    out = sh([IGNIS, "bench", pkg, "--prompt-len", str(P), "--decode-tokens", str(N), "--tune", tune], env=env)
    return float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", out).group(1))


fails = []
for P, N, want_pre in ((32768, 128, 50.0), (130944, 128, 45.0)) if run_long else ():
    out = sh([IGNIS, "bench", pkg, "--prompt-len", str(P), "--decode-tokens", str(N)], env=env)
    print(out.strip())
    tp = float(re.search(r"prefill\s+\d+ tokens in ([\d.]+) s", out).group(1))
    ms = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", out).group(1))
    kv_tok = int(re.search(r"kv cache: (\d+) bytes per token", out).group(1))
    flops = 2.0 * mat * P + L * 4.0 * nh * d * P * P / 2  # causal: half the score matrix
    pre = 100 * flops / tp / PEAK
    ctx = P + N / 2  # the decode steps' mean context
    roof_ms = (wbytes + kv_tok * ctx) / bw * 1e3
    dec = 100 * roof_ms / ms
    print(f"context {P + N}: prefill {P} tokens {P / tp:.0f} tokens/s = {flops / tp / 1e12:.0f} TFLOP/s = {pre:.1f}% of bf16 peak "
          f"(target >= {want_pre:.0f}%); decode {ms:.3f} ms/token at ~{ctx:.0f} tokens of context, roofline {roof_ms:.3f} ms "
          f"(weights {wbytes / 1e9:.2f} GB + KV {kv_tok * ctx / 1e9:.2f} GB) = {dec:.1f}% (target >= 70%)")
    if pre < want_pre: fails.append(f"prefill {P}: {pre:.1f}% of peak")
    if dec < 70: fails.append(f"decode at {P + N}: {dec:.1f}% of the roofline")
    # the same decode with each attention path forced: the per-op kernels (attention.cu's split kernel)
    # and the persistent kernel's attention phase; the default picks by dl_ctx_max
    forced = {name: decode_ms(P, N, tune) for name, tune in FORCED}
    print(f"context {P + N}: decode forced " + ", ".join(f"{n} {v:.3f} ms/token = {100 * roof_ms / v:.1f}%" for n, v in forced.items())
          + f" (default {ms:.3f})")

# where the two attention paths cross: decode ms/token by prompt length, each path forced
for P in (4096, 8192, 16384, 24576, 32768) if sweep else ():
    print(f"sweep: prompt {P}: " + ", ".join(f"{n} {decode_ms(P, 64, tune):.3f}" for n, tune in FORCED) + " ms/token")

# decode after an 8k-token prompt, by KV format (the "int8 KV <= bf16 KV" target): quantized
# KV on the persistent kernel (the default, dl_kvq=1) and, "-op", on the per-op kernels (dl_kvq=0)
dec8k = {}
for kvf in ("bf16", "int8", "uint4", "fp8", "int8-op", "uint4-op", "fp8-op") if run_8k else ():
    pk = pkg if kvf == "bf16" else os.path.join(work, f"pkg1b_{kvf}")
    if not os.path.exists(os.path.join(pk, "model.so")):
        extra = ["--tune", "dl_kvq=0"] if kvf.endswith("-op") else []
        sh([IGNIS, "compile", ckpt, "-o", pk, "--target", f"cuda:{arch}", "--dtype", "bf16", "--kv-cache", kvf.split("-")[0]]
           + extra, env=env)
    out = sh([IGNIS, "bench", pk, "--prompt-len", "8192", "--decode-tokens", "128"], env=env)
    dec8k[kvf] = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", out).group(1))
    kv_tok = int(re.search(r"kv cache: (\d+) bytes per token", out).group(1))
    print(f"decode after an 8k prompt, {kvf} KV ({kv_tok} bytes per token): {dec8k[kvf]:.3f} ms/token")
if dec8k:
    r = {k: dec8k[k] / dec8k["bf16"] for k in dec8k}
    print("decode at 8k against bf16 KV: persistent kernel (default) " +
          ", ".join(f"{k} {r[k]:.3f}" for k in ("int8", "uint4", "fp8")) + "; per-op kernels " +
          ", ".join(f"{k} {r[k + '-op']:.3f}" for k in ("int8", "uint4", "fp8")) + " (target int8 <= 1)")
    if r["int8"] > 1: fails.append(f"decode at 8k: int8 KV {r['int8']:.3f}x the bf16-KV time")
    # the persistent kernel's attention against the per-op kernels' on one package: the logits of
    # every step of a 300-token prompt fed one token at a time, with bf16 KV as the control (the
    # two paths round bf16 activations differently; quantized KV should not add much to that)
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from golden import read_npy
    ids = ",".join(str(1 + (i * 7919) % 50000) for i in range(300))
    for kvf in ("bf16", "int8", "uint4", "fp8"):
        pk = pkg if kvf == "bf16" else os.path.join(work, f"pkg1b_{kvf}")
        lg = []
        for t in ("persistent=0", "dl_ctx_max=1073741824"):
            npy = os.path.join(work, "steps.npy")
            sh([IGNIS, "logits", pk, "--tokens", ids, "--out", npy, "--step", "--tune", t], env=env)
            lg.append(read_npy(npy).astype(np.float64))
        d = np.abs(lg[0] - lg[1]).max(axis=-1) / np.abs(lg[0]).max(axis=-1)
        agree = (lg[0].argmax(-1) == lg[1].argmax(-1)).mean()
        print(f"steps of a 300-token prompt, {kvf} KV: persistent kernel against the per-op kernels: max|d| / max|logit| "
              f"median {np.median(d):.2e}, max {d.max():.2e}; argmax equal at {100 * agree:.1f}% of steps")
print("long context: " + ("all targets met" if not fails else "below target: " + "; ".join(fails)))
