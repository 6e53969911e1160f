#!/usr/bin/env python3
"""CPU speed of mixture-of-experts decode and prefill against this machine's memory bandwidth (issue 21).

Makes a random-weight checkpoint of Qwen3-30B-A3B's layer shapes (scripts/make_random_moe.py:
hidden 2048, 128 experts of 768, 8 per token, 32 / 4 heads x 128) with few layers and a small
vocabulary, compiles it for this CPU in bf16, and runs `ignis bench` ROUNDS times at each thread
count. For each run it prints decode ms/token, the bytes a decoded token reads (the active
parameters: every dense weight, one embedding row, the selected experts' share of the stacked
experts; counted here from the package's manifest, independently of ignis bench's own figure), the
read bandwidth ignis bench measured in the same process right after decoding, the fraction of the
bandwidth bound decode reaches, and prefill tokens/s. The summary takes, per thread count, the run
with the best fraction (machine load from other processes only ever lowers it). Each run is made
with libgomp's default wait policy (threads spin at barriers for a while) and with
OMP_WAIT_POLICY=passive (they sleep at once): on a machine shared with other busy processes a
spinning thread takes the core its partner needs to reach the barrier, which the passive runs show.

The experts are not quantized by --quant (compiler/pack.c keeps them in the float format), so only
bf16 is measured. A benchmark, not a test: it checks nothing but that the runs complete.

    bench/bench_moe.py [--layers 2] [--vocab 4096] [--rounds 3] [--prompt 128] [--decode 32]
                       [--threads 1,0] [--policies default,passive] [--work /tmp/ignis-bench-moe] [--target cpu]
Environment: IGNIS (default build/ignis).
"""
import argparse, json, os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNIS = os.environ.get("IGNIS", os.path.join(ROOT, "build", "ignis"))


def sh(args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit(f"failed: {' '.join(args)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def active_bytes(pkg):
    """Bytes one decoded token reads, from the manifest: dense weights whole, one embedding row
    (unless tied to lm_head, which reads it whole), experts_per_token / n_experts of each stack."""
    m = json.load(open(os.path.join(pkg, "manifest.json")))
    hp = m["hparams"]
    E, K, V = hp.get("n_experts", 0), hp.get("experts_per_token", 0), hp["vocab"]
    total = dense = experts = 0
    for t in m["weights"]["tensors"]:
        b, nm = t["bytes"], t["name"]
        total += b
        if ".experts." in nm or ".ffn_exps." in nm:
            experts += b
        elif ("embed_tokens" in nm or "token_embd" in nm) and not hp.get("tie_embeddings"):
            dense += b / V
        else:
            dense += b
    return dense + experts * K / E, total, E, K


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", default="1,0", help="thread counts to run (0: all CPUs)")
    ap.add_argument("--policies", default="default,passive", help="OpenMP wait policies to run (default: libgomp's)")
    ap.add_argument("--work", default="/tmp/ignis-bench-moe")
    ap.add_argument("--target", default="cpu")
    a = ap.parse_args()
    ckpt, pkg = os.path.join(a.work, f"ckpt-l{a.layers}-v{a.vocab}"), os.path.join(a.work, f"bf16-l{a.layers}-v{a.vocab}")
    os.makedirs(a.work, exist_ok=True)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        print(sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_moe.py"), ckpt, "--layers", str(a.layers),
                  "--vocab", str(a.vocab)]).strip())
    sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", a.target, "--dtype", "bf16"])
    act, total, E, K = active_bytes(pkg)
    print(f"package {pkg}: weights {total / 1e6:.1f} MB, {E} experts, {K} per token; "
          f"a decoded token reads {act / 1e6:.1f} MB")
    best = {}
    for r in range(a.rounds):
        for th, pol in [(t, p) for t in a.threads.split(",") for p in a.policies.split(",")]:
            env = dict(os.environ)
            env.pop("OMP_WAIT_POLICY", None)
            if pol != "default":
                env["OMP_WAIT_POLICY"] = pol
            out = sh([IGNIS, "bench", pkg, "--prompt-len", str(a.prompt), "--decode-tokens", str(a.decode), "--threads", th], env)
            ms = float(re.search(r"decode\s+\d+ tokens: ([\d.]+) ms/token", out).group(1))
            bw = float(re.search(r"measured read bandwidth ([\d.]+) GB/s", out).group(1)) * 1e9
            pre = float(re.search(r"prefill\s+\d+ tokens in [\d.]+ s: ([\d.]+) tokens/s", out).group(1))
            nth = re.search(r"threads\s+(\d+)", out).group(1) + f" thread(s), wait policy {pol}"
            frac = act / (ms / 1e3) / bw
            print(f"round {r + 1}, {nth}: decode {ms:.2f} ms/token ({act / (ms / 1e3) / 1e9:.2f} GB/s); "
                  f"read bandwidth {bw / 1e9:.2f} GB/s, bound {act / bw * 1e3:.2f} ms -> {100 * frac:.1f}% of the bound; "
                  f"prefill {a.prompt} tokens {pre:.1f} tokens/s")
            if nth not in best or frac > best[nth][0]:
                best[nth] = (frac, ms, bw, pre)
    for nth, (frac, ms, bw, pre) in sorted(best.items()):
        print(f"best, {nth}: decode {ms:.2f} ms/token = {100 * frac:.1f}% of the bandwidth bound "
              f"({act / 1e6:.1f} MB at {bw / 1e9:.2f} GB/s); prefill {pre:.1f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
