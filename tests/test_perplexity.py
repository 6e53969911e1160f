#!/usr/bin/env python3
"""`ignis perplexity` and `ignis verify` (issue 16) on a test model: the perplexity of the
reference prompt + greedy ids (--tokens) against the one computed here from transformers' float64
logits; verify of a package against itself (ratio 1, no logit error, full top-1 agreement, KL 0, exit 0); its mean
KL divergence against numpy's from the packages' logits;
verify of an a16w4 package against the f32 one exits nonzero past a logit limit it cannot meet and
zero within generous ones; bad arguments are errors naming what is wrong."""
import os, re, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

TARGET = golden.cpu_test_target()


def ref_ppl(ids, logits):
    lg = logits[:-1]
    m = lg.max(axis=1, keepdims=True)
    lse = np.log(np.exp(lg - m).sum(axis=1)) + m[:, 0]
    nll = lse - lg[np.arange(len(ids) - 1), ids[1:]]
    return float(np.exp(nll.mean())), len(ids) - 1


def main():
    golden.require_testdata()
    fails = []
    model = "llama-gqa"
    ids, ref, _ = golden.reference(model)
    toks = ",".join(map(str, ids))
    want, n = ref_ppl(ids, ref)
    with tempfile.TemporaryDirectory(prefix="ignis-ppl-") as tmp:
        f32 = golden.compile_model(model, "f32", tmp, target=TARGET)
        q4 = os.path.join(tmp, "q4")
        golden.run(["compile", os.path.join(golden.TESTDATA, "models", model), "-o", q4, "--target", TARGET,
                    "--quant", "a16w4", "--quant-group", "32"])
        out = golden.run(["perplexity", f32, "--tokens", toks]).stdout
        m = re.fullmatch(r"perplexity: ([0-9.]+) over (\d+) tokens\n", out)
        if not m:
            fails.append(f"perplexity output {out!r}")
        else:
            got = float(m.group(1))
            print(f"perplexity {got} over {m.group(2)} tokens; from the float64 reference logits {want:.4f} over {n}")
            if int(m.group(2)) != n or abs(got - want) > 1e-3 * want:
                fails.append(f"perplexity {got} over {m.group(2)}, reference {want} over {n}")
        p = golden.run(["verify", f32, "--reference", f32, "--tokens", toks, "--max-ppl-ratio", "1.000001",
                        "--max-dlogit", "1e-9", "--min-top1", "1"], check=False)
        print(p.stdout.strip())
        if p.returncode != 0 or "perplexity ratio: 1.00000" not in p.stdout or "top-1 agreement: 1.0000" not in p.stdout:
            fails.append(f"verify against itself: exit {p.returncode}\n{p.stdout}{p.stderr}")
        p = golden.run(["verify", q4, "--reference", f32, "--tokens", toks, "--max-dlogit", "1e-6"], check=False)
        print(p.stdout.strip())
        if p.returncode == 0 or "max |dlogit|" not in p.stderr:
            fails.append(f"verify a16w4 with --max-dlogit 1e-6: exit {p.returncode}, stderr {p.stderr!r}")
        p = golden.run(["verify", q4, "--reference", f32, "--tokens", toks, "--max-ppl-ratio", "10"], check=False)
        if p.returncode != 0:
            fails.append(f"verify a16w4 with --max-ppl-ratio 10: exit {p.returncode}, {p.stderr!r}")
        # the mean KL divergence of the package's next-token distribution from the reference's, against
        # numpy's from the two packages' logits (every position but the last is scored); --max-kl below
        # it fails naming it; against itself it is 0
        m = re.search(r"mean KL divergence from the reference: ([0-9.e-]+) nats", p.stdout)
        ls = lambda x: (lambda y: y - np.log(np.exp(y).sum(1, keepdims=True)))(x.astype(np.float64) - x.max(1, keepdims=True))
        la, lb = ls(golden.step_logits(q4, ids, 0)), ls(golden.step_logits(f32, ids, 0))
        want_kl = float((np.exp(lb) * (lb - la)).sum(1)[:-1].mean())
        got_kl = float(m.group(1)) if m else float("nan")
        print(f"verify a16w4: mean KL {got_kl:.5g}, numpy {want_kl:.5g}")
        if not abs(got_kl - want_kl) <= 1e-3 * want_kl + 1e-5 or not want_kl > 1e-4:
            fails.append(f"verify's mean KL {got_kl} != numpy's {want_kl}")
        p = golden.run(["verify", q4, "--reference", f32, "--tokens", toks, "--max-kl", f"{want_kl / 2:.6g}"], check=False)
        if p.returncode == 0 or "KL" not in p.stderr:
            fails.append(f"verify a16w4 with --max-kl {want_kl / 2:.3g}: exit {p.returncode}, stderr {p.stderr!r}")
        p = golden.run(["verify", f32, "--reference", f32, "--tokens", toks, "--max-kl", "1e-9"], check=False)
        if p.returncode != 0 or "mean KL divergence from the reference: 0.00000" not in p.stdout:
            fails.append(f"verify against itself with --max-kl 1e-9: exit {p.returncode}\n{p.stdout}{p.stderr}")
        for args, word in ((["perplexity", f32], "--file"), (["perplexity", f32, "--tokens", "1"], "fewer than 2"),
                           (["perplexity", f32, "--tokens", "1,999999"], "999999"),
                           (["perplexity", f32, "--file", os.path.join(tmp, "none.txt")], "none.txt"),
                           (["verify", q4, "--tokens", toks], "--reference")):
            p = golden.run(args, check=False)
            if p.returncode == 0 or word not in p.stderr:
                fails.append(f"ignis {' '.join(args[:1] + args[2:])}: exit {p.returncode}, stderr {p.stderr.strip()!r} (wanted '{word}')")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
