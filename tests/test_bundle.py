#!/usr/bin/env python3
"""One-file bundles (issue 20 item 3): `ignis bundle PKG -o FILE` and `FILE logits|generate ...`.

- x86-64: test models compiled for this machine (f32 and bf16) are bundled; the bundle, run with an
  empty environment (`env -i`), gives teacher-forced logits (prefill and one-token steps) and
  greedy ids against transformers' float64 references (tests/golden.py's bounds), and logits
  bitwise equal to the package's run by `ignis logits`;
- the executable needs no library but glibc's (readelf NEEDED: libc, libm, the dynamic loader):
  no libignis, libprotobuf-c, libcjson, libmicrohttpd, libgomp; the overhead over weights.bin is
  at most 5 MB;
- a fat package bundles its variants of the architecture: the best runs, or the portable one when
  the CPU's features are hidden;
- damaged bundles are refused with a message naming what is wrong: cut short (the trailer is
  gone; cut inside the executable part, the system's loader fails before any ignis code runs), a
  flipped byte in the weights (the tensor named), in the manifest, in the executable part,
  in the directory; a bundle opened by another program (`ignis logits FILE`) is refused;
- aarch64 (when the cross compiler, qemu-user and the arm64 libraries are there, else those cases
  are skipped): the bundle runtime cross-built into IGNIS_BUILD/aarch64, a cpu:aarch64 package
  bundled and run under qemu-aarch64 against the same references.
Skipped (77) without the bundle runtime (scripts/install-deps.sh builds its static libraries)."""
import os, shutil, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []
BUILD = os.environ.get("IGNIS_BUILD", os.path.join(golden.ROOT, "build"))
GLIBC = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libdl.so.2", "libpthread.so.0"}


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def make_bundle(pkg, out, runtime=None):
    args = ["bundle", pkg, "-o", out] + (["--runtime", runtime] if runtime else [])
    p = golden.run(args)
    print("   ", p.stdout.strip())
    return out


def bundle_runner(emulator=()):
    """A runner for golden.check_model: bundles the package on first use, then runs the bundle's
    command with an empty environment (under `emulator`, e.g. qemu-aarch64)."""
    made = {}

    def run(args, check=True):
        pkg = args[1]
        if pkg not in made:
            made[pkg] = make_bundle(pkg, pkg + ".bundle", run.runtime)
        p = subprocess.run(["env", "-i", *emulator, made[pkg], args[0]] + args[2:], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"bundle {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
        return p
    run.runtime = None
    return run


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return {l.split("[")[1].split("]")[0] for l in out.splitlines() if "(NEEDED)" in l}


def check_damage(bundle, tmp):
    """Damaged copies of a good bundle: each refused, naming what is wrong."""
    data = bytearray(open(bundle, "rb").read())
    man = data.find(b'"abi_version"')
    n = int.from_bytes(data[-52:-48], "little")  # the trailer's entry count (common/pkg_file.h's layout)
    ents = {bytes(data[e:e + 64]).rstrip(b"\0").decode(): (int.from_bytes(data[e + 64:e + 72], "little"),
                                                         int.from_bytes(data[e + 72:e + 80], "little"))
            for e in range(len(data) - 64 - 96 * n, len(data) - 64, 96)}
    w_off = ents["weights.bin"][0] + ents["weights.bin"][1] // 2  # the middle of weights.bin
    cases = [("cut short by 100 bytes", data[:-100], "no ignis bundle trailer"),
             ("cut in the middle of the weights", None, "no ignis bundle trailer"),
             ("a flipped byte in the weights", None, "does not match its hash in the manifest"),
             ("a flipped byte in the manifest", None, "manifest.json does not match its hash"),
             ("a flipped byte in the executable part", None, "executable part (code) does not match its hash"),
             ("a flipped byte in the directory padding", None, "bytes after its name")]
    flips = {"a flipped byte in the weights": w_off, "a flipped byte in the manifest": man + 2,
             "a flipped byte in the executable part": 600000, "a flipped byte in the directory padding": len(data) - 64 - 40}
    for what, blob, want in cases:
        if what.startswith("cut in"):  # (cut inside the executable part, the system's loader fails before any code runs)
            blob = data[:w_off]
        elif blob is None:
            blob = bytearray(data)
            blob[flips[what]] ^= 0x5A
        bad = os.path.join(tmp, "damaged.bundle")
        with open(bad, "wb") as f:
            f.write(blob)
        os.chmod(bad, 0o755)
        p = subprocess.run(["env", "-i", bad, "logits", "--tokens", "1,2", "--out", os.path.join(tmp, "d.npy")],
                           capture_output=True, text=True)
        check(p.returncode == 1 and want in p.stderr, f"damaged bundle ({what}) refused: {p.stderr.strip()[:160]}")
    p = golden.run(["logits", bundle, "--tokens", "1", "--out", os.path.join(tmp, "d.npy")], check=False)
    check(p.returncode == 1 and "one-file bundle" in p.stderr and "runs only inside it" in p.stderr,
          f"another program's open of a bundle refused: {p.stderr.strip()[:160]}")


def x86_cases(tmp):
    for model, dtype in (("llama-gqa", "f32"), ("qwen3-qknorm", "bf16")):
        runner = bundle_runner()
        fails.extend(golden.check_model(model, dtype, tmp, runner=runner))
        pkg = os.path.join(tmp, f"{model}-{dtype}-native")  # compiled by check_model, bundled by the runner
        bundle = pkg + ".bundle"
        ids, _, _ = golden.reference(model)
        toks = ",".join(map(str, ids))
        golden.run(["logits", pkg, "--tokens", toks, "--out", pkg + ".pkg.npy"])
        subprocess.run(["env", "-i", bundle, "logits", "--tokens", toks, "--out", pkg + ".b.npy"], check=True)
        check(np.array_equal(golden.read_npy(pkg + ".pkg.npy"), golden.read_npy(pkg + ".b.npy")),
              f"{model} {dtype}: the bundle's logits are bitwise the package's")
        libs = needed(bundle)
        check(libs and libs <= GLIBC, f"{model}: the bundle needs only glibc: {sorted(libs)}")
        over = os.path.getsize(bundle) - os.path.getsize(os.path.join(pkg, "weights.bin"))
        print(f"    {model} {dtype}: bundle {os.path.getsize(bundle)} bytes, overhead over the weights {over / 1e6:.2f} MB")
        check(over <= 5e6, f"{model}: overhead {over / 1e6:.2f} MB <= 5 MB")
    check_damage(bundle, tmp)
    fat_case(tmp)


def fat_case(tmp):
    """A fat package (this machine's best target, the portable one, and aarch64): its two x86-64
    objects are linked in side by side; the bundle loads the best (logits bitwise the
    single-target package's) or, with every CPU feature hidden (IGNIS_CPU_MASK=0), the portable one,
    which matches the float64 reference; inspect says which."""
    fat = os.path.join(tmp, "fat")
    targets = "cpu,cpu:generic" + (",cpu:aarch64" if shutil.which("aarch64-linux-gnu-gcc") else "")
    golden.run(["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o", fat, "--dtype", "f32",
                "--target", targets])
    bundle = make_bundle(fat, fat + ".bundle")
    ids, ref, _ = golden.reference("llama-gqa")
    toks = ",".join(map(str, ids))
    single = golden.read_npy(os.path.join(tmp, "llama-gqa-f32-native.pkg.npy"))
    for env, want in (([], None), (["IGNIS_CPU_MASK=0"], "cpu-x86_64-generic")):
        p = subprocess.run(["env", "-i", *env, bundle, "inspect"], capture_output=True, text=True)
        chose = p.stderr.split("this machine runs ")[-1].split()[0] if "this machine runs" in p.stderr else "?"
        p = subprocess.run(["env", "-i", *env, bundle, "logits", "--tokens", toks, "--out", fat + ".npy"], capture_output=True, text=True)
        got = golden.read_npy(fat + ".npy") if p.returncode == 0 else None
        if want is None:
            check(got is not None and np.array_equal(got, single), f"fat bundle loads {chose}: logits bitwise the single package's")
        else:
            rel = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max() if got is not None else 1.0
            check(chose == want and rel <= golden.TOL["f32"], f"fat bundle with IGNIS_CPU_MASK=0 loads {chose}: {rel:.2e} x max|ref|")


def aarch64_runtime():
    """The aarch64 bundle runtime, cross-built in IGNIS_BUILD/aarch64 (shared with test_aarch64.py:
    ctest runs the two under one resource lock); None when the cross packages are missing."""
    need = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if not shutil.which(t)]
    need += [l for l in ("/lib/ld-linux-aarch64.so.1", "/usr/lib/aarch64-linux-gnu/libprotobuf-c.a") if not os.path.exists(l)]
    if need:
        print(f"skip aarch64: missing {' '.join(need)} (scripts/install-deps.sh installs the arm64 cross packages)")
        return None
    import test_aarch64
    try:
        return os.path.join(test_aarch64.cross_build(BUILD, "ignis_bundle_rt"), "bundle-runtime")
    except RuntimeError as e:
        if "No rule to make target" in str(e):
            print("skip aarch64: no arm64 bundle runtime (static arm64 cJSON/libmicrohttpd: scripts/install-deps.sh)")
            return None
        raise


def aarch64_cases(tmp):
    rt = aarch64_runtime()
    if not rt:
        return
    for model, dtype, cpu in (("llama-gqa", "f32", "cortex-a72"), ("qwen3-qknorm", "bf16", "max,sve256=on")):
        runner = bundle_runner(("qemu-aarch64", "-L", "/", "-cpu", cpu))
        runner.runtime = rt
        fails.extend(f"{x} (aarch64 bundle on qemu -cpu {cpu})"
                     for x in golden.check_model(model, dtype, tmp, target="cpu:aarch64", runner=runner))
    pkg = os.path.join(tmp, "llama-gqa-f32-cpu_aarch64")
    libs = needed(pkg + ".bundle")
    check(libs and libs <= GLIBC, f"aarch64 bundle needs only glibc: {sorted(libs)}")
    # an x86-64 runtime cannot link an aarch64 package: the refusal names both
    p = golden.run(["bundle", pkg, "-o", os.path.join(tmp, "x.bundle")], check=False)
    check(p.returncode == 1 and "cpu-aarch64-neon" in p.stderr and "x86_64" in p.stderr,
          f"x86-64 bundle runtime refuses an aarch64 package: {p.stderr.strip()[:160]}")


def main():
    golden.require_testdata()
    if not os.path.exists(os.path.join(os.path.dirname(golden.IGNIS), "bundle-runtime", "kit")):
        print("SKIP: no bundle runtime beside ignis (scripts/install-deps.sh builds its static libraries; re-run cmake)")
        return 77
    with tempfile.TemporaryDirectory(prefix="ignis-bundle-") as tmp:
        x86_cases(tmp)
        aarch64_cases(tmp)
    if fails:
        print(f"{len(fails)} failure(s):\n  " + "\n  ".join(fails))
        return 1
    print("test_bundle: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
