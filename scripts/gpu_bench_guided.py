#!/usr/bin/env python3
"""Guided decoding on the GPU (issue 19): decode ms/token of a constrained request against an
unconstrained one (devbuild/bench_guided: one request at a time, the same random prompt and token
budget, alternating runs, the decode part only) on a random-weight checkpoint of Llama-3.2-1B's
shape in bf16 with the Llama 3 tokenizer (../shared/testdata/tokenizers/llama3), compiled for this
GPU. The constrained request samples on the device: its mask for each step is computed on the host
while the GPU runs the step (runtime/serving/sched_masks.c), uploaded as a bitmask and applied in
templates/cuda/sample.cu, and its next step is queued behind the sampling (a chained step, handed
the pick on the device), so only its token comes back; the unconstrained one (greedy, no logits
wanted) runs multi-step launches of the persistent kernel. Each constraint is also measured with
both on single steps (run_steps=1,chain=0: every step waits for the host).

    scripts/gpu_bench_guided.py [sm_90]      (after scripts/gpu_prepare.sh on the build machine)

Success: every "guided ...: ratio R" line with R <= 1.10 (bench_guided prints "within 10%").
"""
import os, re, shutil, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gpu_bench_common import guided_data, sh

IGNIS = os.environ.get("IGNIS", os.path.join(ROOT, "devbuild", "ignis"))
BENCH = os.path.join(os.path.dirname(IGNIS), "bench_guided")
arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90"
tok, dev = guided_data(ROOT)
work = "/tmp/ignis-bench"
ckpt, pkg = os.path.join(work, "llama1b"), os.path.join(work, "pkg1b-guided")
os.makedirs(work, exist_ok=True)
if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
    sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt])
for f in ("tokenizer.json", "tokenizer_config.json"):  # a constraint needs the package's tokenizer
    shutil.copy(os.path.join(tok, f), os.path.join(ckpt, f))
sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", "bf16"])

SCHEMA = "Glaiveai2K---generate_invoice_9a7aaa7d"  # an object: two required strings and an array of item objects
common = ["--prompt-len", "32", "--new-tokens", "256", "--reps", "5"]
cases = [
    ("JSON mode, greedy", ["--json"]),
    (f"schema {SCHEMA}, greedy", ["--schemas", dev, "--pick", SCHEMA]),
    (f"schema {SCHEMA}, greedy; both on single steps", ["--schemas", dev, "--pick", SCHEMA, "--tune", "run_steps=1,chain=0"]),
    ("JSON mode, sampled (temperature 1)", ["--json", "--temperature", "1"]),
]
for label, args in cases:
    out = sh([BENCH, pkg] + common + args)
    print(f"== {label}")
    print("\n".join(l for l in out.splitlines() if not l.startswith("run ")))
    m = re.search(r"ratio constrained/unconstrained decode time per token: ([\d.]+)", out)
    print(f"guided {label}: ratio {m.group(1) if m else '?'}")
