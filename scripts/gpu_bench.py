#!/usr/bin/env python3
"""GPU benchmark (issue 5), run on the device by scripts/gpu_check.sh: a random-weight checkpoint of
Llama-3.2-1B's shape in bf16, compiled by ignis for this GPU, against HuggingFace transformers
(eager) on the same weights in the same script. Prints: measured copy bandwidth and bf16 matmul
rate (the ceilings), decode ms/token at batch 1 vs the HBM roofline, decode throughput at batch
1/8/32/128/256, prefill tokens/s on 2048-token prompts vs bf16 peak, compile time, package size."""
import json, os, re, subprocess, sys, time
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNIS = os.environ.get("IGNIS", os.path.join(ROOT, "devbuild", "ignis"))
arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90"
work = "/tmp/ignis-bench"
os.makedirs(work, exist_ok=True)
ckpt, pkg = os.path.join(work, "llama1b"), os.path.join(work, "pkg1b")

from gpu_bench_common import sh, copy_bandwidth, matmul_rate

# ceilings, measured here
dev = torch.device("cuda")
bw = copy_bandwidth(torch, dev)
peak = matmul_rate(torch, dev)
print(f"device: {torch.cuda.get_device_name()}; copy bandwidth {bw/1e12:.2f} TB/s (read+write); bf16 matmul {peak/1e12:.0f} TFLOP/s")

if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
    sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt])
t = time.perf_counter()
sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", "bf16"])
ct = time.perf_counter() - t
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(pkg) for f in fs)
so = os.path.getsize(os.path.join(pkg, "model.so"))
wbytes = os.path.getsize(os.path.join(pkg, "weights.bin"))
print(f"compile: {ct:.1f} s; package {size/1e9:.2f} GB (model.so {so/1e6:.1f} MB, weights {wbytes/1e9:.2f} GB)")

# the persistent decode kernel against the per-op kernels on this checkpoint: logits of one-token
# steps (no float64 reference for a random model; the golden test checks both against one)
import numpy as np
ids = ",".join(str((i * 7919) % 128256) for i in range(48))
def step_logits(persist):
    f = os.path.join(work, f"steps{persist}.npy")
    sh([IGNIS, "logits", pkg, "--tokens", ids, "--out", f, "--step", "--tune", f"persistent={persist}"])
    return np.load(f).astype(np.float64)
lp, lk = step_logits("1"), step_logits("0")
rel = np.abs(lp - lk).max() / np.abs(lk).max()
same = (lp.argmax(1) == lk.argmax(1)).mean()
print(f"persistent vs per-op kernels, 48 one-token steps: max|d| = {rel:.2e} x max|logit|, argmax equal on {100*same:.0f}% of steps")
if not rel <= 3e-2:
    raise SystemExit("FAIL: the persistent decode kernel's logits differ from the per-op kernels'")

out = sh([IGNIS, "bench", pkg, "--prompt-len", "2048", "--decode-tokens", "128"])
print(out)
nog = sh([IGNIS, "bench", pkg, "--prompt-len", "64", "--decode-tokens", "128", "--tune", "graphs=0"])
print("without CUDA graphs:", re.search(r"decode .*", nog).group(0))
ms_long = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", out).group(1))
# the roofline counts weight bytes only, so batch-1 decode is measured at a short context (64..320
# tokens, where the KV cache adds < 2% to the bytes read); after the 2048-token prompt above,
# each step also reads 2048+ tokens of KV (67 MB)
short = sh([IGNIS, "bench", pkg, "--prompt-len", "64", "--decode-tokens", "256"])
ms = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", short).group(1))
pre = float(re.search(r"prefill\s+\d+ tokens in [\d.]+ s: ([\d.]+) tokens/s", out).group(1))
roof = wbytes / bw * 1e3  # the roofline: weight bytes / measured copy bandwidth
L, H, I, V, q, kv = 16, 2048, 8192, 128256, 2048, 512
params = L * (H * (q + 2 * kv) + q * H + 3 * H * I)
P = 2048
flops = 2 * params * P + L * 2 * 2 * 32 * 64 * P * P / 2 + 2 * H * V
print(f"ignis decode batch 1: {ms:.3f} ms/token; roofline {roof:.3f} ms (weights {wbytes/1e9:.2f} GB at {bw/1e12:.2f} TB/s) -> {100*roof/ms:.1f}% of roofline")
print(f"ignis decode batch 1 after a 2048-token prompt: {ms_long:.3f} ms/token")
print(f"ignis prefill 2048: {pre:.0f} tokens/s = {flops*pre/P/1e12:.1f} TFLOP/s = {100*flops*pre/P/peak:.1f}% of measured bf16 peak")
# where decode and prefill time goes, and the launch options against each other
def decode_ms(tune, n=128):
    o = sh([IGNIS, "bench", pkg, "--prompt-len", "64", "--decode-tokens", str(n)] + (["--tune", tune] if tune else []))
    return float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", o).group(1))
for label, tune in [("default (as above)", None), ("persistent decode kernel off", "persistent=0"),
                    ("multi-step runs off", "run_steps=1"),
                    ("multi-step runs and chained steps off", "run_steps=1,chain=0"),
                    ("GEMV grid 1 CTA/SM", "mv_ctas_per_sm=1"),
                    ("GEMV grid 2 CTAs/SM", "mv_ctas_per_sm=2")]:
    print(f"variant {label}: decode {decode_ms(tune):.3f} ms/token")
if os.environ.get("IGNIS_BENCH_PROFILE", "1") != "0":
    for what, args in [("decode (64-token prompt, 32 steps)", ["--prompt-len", "64", "--decode-tokens", "32"]),
                       ("prefill 2048 (+ warm-up steps)", ["--prompt-len", "2048", "--decode-tokens", "1"])]:
        p = subprocess.run([IGNIS, "bench", pkg] + args + ["--tune", "profile=1"], capture_output=True, text=True)
        print(f"== profile, {what}:")
        print("\n".join(p.stderr.splitlines()[:28]))
eng = sh([os.path.join(ROOT, "devbuild", "bench_engine"), pkg, "--prompt-len", "32", "--new-tokens", "64", "--levels", "1,2,8,32,128,256"])
print(eng)
# batched decode steps without their CUDA graphs, for the ratio
eng0 = sh([os.path.join(ROOT, "devbuild", "bench_engine"), pkg, "--prompt-len", "32", "--new-tokens", "64", "--levels", "8,32,128",
           "--tune", "graph_tmax=0"])
print("variant batched decode graphs off (graph_tmax=0):")
print(eng0)
# matmuls of 2 tokens on the tensor-core GEMV (the default) against cuBLAS, and of 2..8 tokens
for mvt, what in (("0", "off: cuBLAS from 2 tokens"), ("8", "for 2..8 tokens")):
    e = sh([os.path.join(ROOT, "devbuild", "bench_engine"), pkg, "--prompt-len", "32", "--new-tokens", "64", "--levels", "2,4,8",
            "--tune", f"mvt_tmax={mvt}"])
    print(f"variant tensor-core GEMV {what} (mvt_tmax={mvt}):")
    print(e)

if os.environ.get("IGNIS_BENCH_PEER", "1") == "0":
    raise SystemExit(0)
# the peer: transformers eager on the same weights
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16).to(dev).eval()
def hf_decode(batch, steps=32):
    ids = torch.randint(0, V, (batch, 32), device=dev)
    with torch.no_grad():
        o = m(ids, use_cache=True)
        pkv, nxt = o.past_key_values, o.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(4):
            o = m(nxt, past_key_values=pkv, use_cache=True); pkv = o.past_key_values; nxt = o.logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(steps):
            o = m(nxt, past_key_values=pkv, use_cache=True); pkv = o.past_key_values; nxt = o.logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps
t1 = hf_decode(1)
t32 = hf_decode(32)
print(f"transformers eager: decode batch 1 {t1*1e3:.2f} ms/token; batch 32 {32/t32:.0f} tokens/s")
print(f"ignis vs transformers at batch 1: {t1*1e3/ms:.1f}x faster")
