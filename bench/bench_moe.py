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

Each weight scheme in --quant (bf16, or a --quant mode: the experts take it too) is its own package;
the summary gives each scheme's decode speed-up over bf16's at the same thread count and policy.
A benchmark, not a test: it checks nothing but that the runs complete.

    bench/bench_moe.py [--layers 2] [--vocab 4096] [--rounds 3] [--prompt 128] [--decode 32]
                       [--threads 1,0] [--policies default,passive] [--quant bf16,a16w8,a16w4,a8w8]
                       [--work /tmp/ignis-bench-moe] [--target cpu]
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
    ap.add_argument("--quant", default="bf16,a16w8,a16w4,a8w8", help="weight schemes: bf16 or --quant modes")
    a = ap.parse_args()
    ckpt = os.path.join(a.work, f"ckpt-l{a.layers}-v{a.vocab}")
    os.makedirs(a.work, exist_ok=True)
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        print(sh([sys.executable, os.path.join(ROOT, "scripts", "make_random_moe.py"), ckpt, "--layers", str(a.layers),
                  "--vocab", str(a.vocab)]).strip())
    pkgs = {}
    for q in a.quant.split(","):
        pkg = os.path.join(a.work, f"{q}-l{a.layers}-v{a.vocab}")
        sh([IGNIS, "compile", ckpt, "-o", pkg, "--target", a.target, "--dtype", "bf16"] + ([] if q == "bf16" else ["--quant", q]))
        act, total, E, K = active_bytes(pkg)
        pkgs[q] = (pkg, act)
        print(f"{q} package {pkg}: weights {total / 1e6:.1f} MB, {E} experts, {K} per token; "
              f"a decoded token reads {act / 1e6:.1f} MB")
    best = {}
    for r in range(a.rounds):
        for q, th, pol in [(q, t, p) for t in a.threads.split(",") for p in a.policies.split(",") for q in pkgs]:
            pkg, act = pkgs[q]
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
            print(f"round {r + 1}, {q}, {nth}: decode {ms:.2f} ms/token ({act / (ms / 1e3) / 1e9:.2f} GB/s); "
                  f"read bandwidth {bw / 1e9:.2f} GB/s, bound {act / bw * 1e3:.2f} ms -> {100 * frac:.1f}% of the bound; "
                  f"prefill {a.prompt} tokens {pre:.1f} tokens/s")
            if (nth, q) not in best or frac > best[nth, q][0]:
                best[nth, q] = (frac, ms, bw, pre)
    for (nth, q), (frac, ms, bw, pre) in sorted(best.items()):
        base = best.get((nth, "bf16"))
        vs = f"; decode {base[1] / ms:.2f}x, prefill {pre / base[3]:.2f}x bf16's" if base and q != "bf16" else ""
        print(f"best, {q}, {nth}: decode {ms:.2f} ms/token = {100 * frac:.1f}% of the bandwidth bound "
              f"({pkgs[q][1] / 1e6:.1f} MB at {bw / 1e9:.2f} GB/s); prefill {pre:.1f} tokens/s{vs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
