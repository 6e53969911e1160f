#!/usr/bin/env python3
"""Fat packages (issue 20 item 4): `ignis compile --target cpu:generic,cpu:avx2,cpu:aarch64` puts
one model object per target and one weights.bin in a package; the runtime loads the best variant
this machine runs and `ignis inspect` says which. Checked here: the manifest lists the variants
best first and the package holds one weights.bin; the chosen variant is the best the host runs
(with IGNIS_CPU_MASK=0 hiding every feature, the portable one); its logits are bitwise those of a
single-target package of the same target, and within the f32 bound of transformers' float64
reference; a package whose targets are all of another architecture, and a CUDA architecture in
the list without its cuda: item, are refused with messages naming them. (tests/test_aarch64.py
loads the aarch64 variant of such a package under qemu; tests/test_fat_cuda.py checks packages of
CPU and CUDA targets.)"""
import json, os, shutil, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def logits(pkg, ids, out, env=None):
    p = golden.subprocess.run([golden.IGNIS, "logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", out],
                              capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return np.load(out)


def main():
    golden.require_testdata()
    model = os.path.join(golden.TESTDATA, "models", "llama-gqa")
    ids, ref, _ = golden.reference("llama-gqa")
    cross = shutil.which("aarch64-linux-gnu-gcc") is not None
    targets = ["cpu:generic", "cpu:avx2"] + (["cpu:aarch64"] if cross else [])
    with tempfile.TemporaryDirectory(prefix="ignis-fat-") as tmp:
        fat = os.path.join(tmp, "fat")
        golden.run(["compile", model, "-o", fat, "--dtype", "f32", "--target", ",".join(targets)])
        m = json.load(open(os.path.join(fat, "manifest.json")))
        vs = [v["target"] for v in m.get("variants", [])]
        want = ["cpu-x86_64-avx2", "cpu-x86_64-generic"] + (["cpu-aarch64-neon"] if cross else [])
        check(vs == want, f"variants best first: {vs}")
        files = sorted(os.listdir(fat))
        check(files.count("weights.bin") == 1 and all(os.path.exists(os.path.join(fat, v["file"])) for v in m["variants"])
              and not any(f.startswith(".variant") for f in files), f"one weights.bin, every variant's object: {files}")
        best = "cpu:avx2" if golden.host_runs("cpu:avx2") else "cpu:generic"
        for env_mask, expect in ((None, best), ("0", "cpu:generic")):
            env = dict(os.environ)
            if env_mask is not None:
                env["IGNIS_CPU_MASK"] = env_mask
            p = golden.subprocess.run([golden.IGNIS, "inspect", fat], capture_output=True, text=True, env=env)
            full = "cpu-x86_64-" + expect.split(":")[1]
            check(p.returncode == 0 and f"this machine runs {full}" in p.stderr,
                  f"inspect (mask {env_mask}) says {full}: {p.stderr.strip()!r}")
            single = golden.compile_model("llama-gqa", "f32", tmp, target=expect)
            got = logits(fat, ids, os.path.join(tmp, "fat.npy"), env)
            one = logits(single, ids, os.path.join(tmp, "one.npy"), env)
            rel = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
            check(np.array_equal(got, one) and rel <= golden.TOL["f32"],
                  f"fat package as {expect} == the {expect} package bitwise; {rel:.2e} x max|ref| from transformers")
        if cross:
            arm = os.path.join(tmp, "arm")
            golden.run(["compile", model, "-o", arm, "--dtype", "f32", "--target", "cpu:aarch64,cpu:aarch64+sve"])
            p = golden.run(["logits", arm, "--tokens", "1,2", "--out", os.path.join(tmp, "x.npy")], check=False)
            check(p.returncode != 0 and "none of which runs" in p.stderr and "cpu-aarch64-sve" in p.stderr,
                  f"all-aarch64 fat package on x86-64 refused: {p.stderr.strip()[-220:]!r}")
        # (CPU + CUDA fat packages: tests/test_fat_cuda.py) a bare architecture needs its cuda: item
        p = golden.run(["compile", model, "-o", os.path.join(tmp, "bad"), "--target", "cpu:avx2,sm_90"], check=False)
        check(p.returncode != 0 and "sm_90 follows no cuda: item" in p.stderr, f"a stray sm_90 refused: {p.stderr.strip()!r}")
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
