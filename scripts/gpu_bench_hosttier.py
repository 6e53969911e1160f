#!/usr/bin/env python3
"""GPU benchmark of the prefix cache's host tier (issue 17), run on the device from a checkout with
devbuild/ (scripts/gpu_prepare.sh): a random-weight checkpoint of Llama-3.2-1B's shape in bf16,
compiled for this GPU, and bench_engine --host-tier on a 4096-token prompt: a KV pool just large
enough for one such prompt, the prompt, a second prompt as long (which evicts the first one's pages
from the device), then the first prompt again. Prints its time to first token with the host tier
(pages back from pinned host memory) and without (recomputed), and checks the judged ratio (>= 3x).
Usage: gpu_bench_hosttier.py [sm_90] [--prompt-len N]"""
import os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gpu_bench_common import sh

DEV = os.path.join(ROOT, "devbuild")
IGNIS = os.environ.get("IGNIS", os.path.join(DEV, "ignis"))
BENCH = os.environ.get("BENCH_ENGINE", os.path.join(DEV, "bench_engine"))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
arch = args[0] if args else "sm_90"
P = int(sys.argv[sys.argv.index("--prompt-len") + 1]) if "--prompt-len" in sys.argv else 4096
work = "/tmp/ignis-bench"
os.makedirs(work, exist_ok=True)
ckpt, pkg = os.path.join(work, "llama1b"), os.path.join(work, "pkg1b")
env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(DEV, "lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))

if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
    sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt])
if not os.path.exists(os.path.join(pkg, "model.so")):
    sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", "bf16"], env=env)
out = sh([BENCH, pkg, "--host-tier", "--prompt-len", str(P)], env=env)
print(out)
ratio = float(re.search(r"TTFT ([\d.]+)x better", out).group(1))
hits = re.search(r"host tier .*host hits (\d+) tokens", out)
if not hits or int(hits.group(1)) < 3 * (P - 16):
    raise SystemExit("FAIL: the repeated prompt did not come back from the host tier")
print(f"host tier, {P}-token prompt: repeated-prompt TTFT {ratio:.2f}x better than recompute (target >= 3x): "
      + ("PASS" if ratio >= 3 else "FAIL"))
sys.exit(0 if ratio >= 3 else 1)
