#!/usr/bin/env python3
"""GPU benchmark of quantized weights (issue 16), run on the device by scripts/gpu_check.sh after
gpu_bench.py (whose random Llama-3.2-1B-shaped checkpoint and bf16 package it reuses, or makes):
for bf16, a16w8, a8w8, a16w4 (groups of 32, 64 and 128) and fp8 (IGNIS_BENCH_QUANT_SCHEMES=a,b picks
some; bf16 always runs) it prints the package's weight bytes, batch-1 decode ms/token against the roofline of those bytes at the measured copy bandwidth, prefill
tokens/s on a 2048-token prompt, and engine decode throughput at 8 / 32 / 128 requests, with the
ratios against bf16 in the same run. Also checks, on this real shape, that the persistent decode
kernel and the per-op kernels give the same logits for the quantized packages. Steps of 9..256
tokens (the 8 / 32 / 128-request steps with prefill chunks, 32 and 128 decode-only) run the
quantized tensor-core GEMM (qgemm.cu); `--qtune KEY=V,...` adds compile-time keys to the quantized
packages (e.g. qg_tmin=3 to take 8-token steps there too, qg_tmax=0 for the dequant + cuBLAS path);
`--rtune KEY=V,...` run-time keys for the quantized packages' benches (e.g. a8_wg_split=64 for a8w8's
split fused int8 GEMM on the 33..127-token steps of few tiles; a8_tmin is compile-time: --qtune).
`--prefill-only`: only the 2048-token prefill, three runs a package (the median, and each), and
its ratio against bf16's (the issue's a8w8 / fp8 >= 1.3x, a16w4 >= 0.5x), in a minute or two.
usage: gpu_bench_quant.py [ARCH] [--qtune KEY=V,...] [--rtune KEY=V,...] [--prefill-only]"""
import os, re, subprocess, sys, time
import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNIS = os.environ.get("IGNIS", os.path.join(ROOT, "devbuild", "ignis"))
ENGINE = os.path.join(ROOT, "devbuild", "bench_engine")
args = sys.argv[1:]
qtune = ""
if "--qtune" in args:
    i = args.index("--qtune")
    qtune = "," + args[i + 1]
    del args[i:i + 2]
rtune = []
if "--rtune" in args:
    i = args.index("--rtune")
    rtune = ["--tune", args[i + 1]]
    del args[i:i + 2]
prefill_only = "--prefill-only" in args
args = [a for a in args if a != "--prefill-only"]
arch = args[0] if args else "sm_90"
work = "/tmp/ignis-bench"
os.makedirs(work, exist_ok=True)
ckpt = os.path.join(work, "llama1b")


from gpu_bench_common import sh, copy_bandwidth

dev = torch.device("cuda")
bw = copy_bandwidth(torch, dev)
print(f"device: {torch.cuda.get_device_name()}; copy bandwidth {bw/1e12:.2f} TB/s (read+write)")
if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
    sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt])

ids = ",".join(str((i * 7919) % 128256) for i in range(40))
res = {}
SCHEMES = (("bf16", []), ("a16w8", ["--quant", "a16w8"]), ("a8w8", ["--quant", "a8w8"]), ("a16w4-g32", ["--quant", "a16w4"]),
           ("a16w4-g64", ["--quant", "a16w4", "--quant-group", "64"]),
           ("a16w4-g128", ["--quant", "a16w4", "--quant-group", "128"]), ("fp8", ["--quant", "fp8"]))
only = os.environ.get("IGNIS_BENCH_QUANT_SCHEMES")  # a comma list (bf16 always runs: the ratios' base)
for name, q in SCHEMES:
    if only and name != "bf16" and name not in only.split(","):
        continue
    pkg = os.path.join(work, f"pkg1b-{name}")
    # quantized packages carry the persistent kernel for their rows too (dl_quant), so the one-token
    # steps can run either way: persistent (the default) or the per-op kernels (--tune persistent=0)
    sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", "bf16"] + q +
       (["--tune", "dl_quant=1" + qtune] if q else []))
    wbytes = os.path.getsize(os.path.join(pkg, "weights.bin"))
    rt = rtune if q else []
    if prefill_only:
        runs = []
        for _ in range(3):
            out = sh([IGNIS, "bench", pkg, "--prompt-len", "2048", "--decode-tokens", "2"] + rt)
            runs.append(float(re.search(r"prefill\s+\d+ tokens in [\d.]+ s: ([\d.]+) tokens/s", out).group(1)))
        res[name] = sorted(runs)[1]
        print(f"{name}: prefill 2048 tokens, median of 3: {res[name]:.0f} tokens/s ({', '.join(f'{r:.0f}' for r in runs)})")
        continue
    if q:  # the persistent kernel against the per-op kernels, one-token steps
        lg = []
        for persist in ("1", "0"):
            f = os.path.join(work, f"q{persist}.npy")
            sh([IGNIS, "logits", pkg, "--tokens", ids, "--out", f, "--step", "--tune", f"persistent={persist}"])
            lg.append(np.load(f).astype(np.float64))
        rel = np.abs(lg[0] - lg[1]).max() / np.abs(lg[1]).max()
        print(f"{name}: persistent vs per-op kernels, 40 one-token steps: max|d| = {rel:.2e} x max|logit|, "
              f"argmax equal on {100 * (lg[0].argmax(1) == lg[1].argmax(1)).mean():.0f}%")
        if not rel <= 3e-2:
            print(f"FAIL: {name}: the persistent kernel's logits differ from the per-op kernels'")
    short = sh([IGNIS, "bench", pkg, "--prompt-len", "64", "--decode-tokens", "256"] + rt)
    ms = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", short).group(1))
    if q:
        perop = sh([IGNIS, "bench", pkg, "--prompt-len", "64", "--decode-tokens", "256", "--tune", "persistent=0"])
        ms_op = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", perop).group(1))
        print(f"{name}: decode batch 1 on the per-op kernels {ms_op:.3f} ms/token "
              f"({100 * wbytes / bw * 1e3 / ms_op:.1f}% of roofline)")
    pre_out = sh([IGNIS, "bench", pkg, "--prompt-len", "2048", "--decode-tokens", "8"] + rt)
    pre = float(re.search(r"prefill\s+\d+ tokens in [\d.]+ s: ([\d.]+) tokens/s", pre_out).group(1))
    eng = sh([ENGINE, pkg, "--prompt-len", "32", "--new-tokens", "64", "--levels", "8,32,128"] + rt)
    # bench_engine's table: concurrency, tokens/s, ...
    tput = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^(\d+)\s+([\d.]+)\s", eng, re.M)}
    roof = wbytes / bw * 1e3
    res[name] = (wbytes, ms, pre, tput)
    print(f"{name}: weights {wbytes/1e9:.3f} GB; decode batch 1 {ms:.3f} ms/token, roofline {roof:.3f} ms -> "
          f"{100*roof/ms:.1f}% of roofline; prefill 2048 {pre:.0f} tokens/s")
    print(eng.strip())
if prefill_only:
    for name, pre in res.items():
        if name != "bf16":
            print(f"{name} vs bf16: prefill 2048 {pre / res['bf16']:.2f}x")
    sys.exit(0)
b = res["bf16"]
for name, (wb, ms, pre, tput) in res.items():
    if name == "bf16":
        continue
    tr = ", ".join(f"{n}: {tput[n] / b[3][n]:.2f}x" for n in sorted(tput) if n in b[3] and b[3][n])
    print(f"{name} vs bf16: weights {wb / b[0]:.3f}x, decode batch 1 {b[1] / ms:.2f}x faster, prefill {pre / b[2]:.2f}x, "
          f"throughput {tr or '(not parsed)'}")
