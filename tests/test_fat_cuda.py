#!/usr/bin/env python3
"""Fat packages with CPU and CUDA targets, and CUDA bundles (issue 20 items 3 and 4).

`ignis compile --target cpu,cuda:sm_80,sm_90` puts the CPU model object (16-row panels, weights.bin)
and the CUDA one (rows, weights-cuda.bin: the layouts differ, so the manifest's weight_files
describes the second file) in one package; the loader takes the CUDA code where a GPU of a compiled
architecture (cubin, or PTX not newer than it) is present, else the best CPU target, and says which
and why. `ignis bundle` takes CUDA packages and fat ones: the CUDA host code, with its cubins and
PTX, is linked into the bundle like a CPU object; at run time it needs the NVIDIA driver and cuBLAS
(found as in a package, or beside the bundle).

Checked on every machine, against transformers' float64 reference of llama3-rope-tied (f32 bound
of tests/golden.py, prefill and one-token steps; greedy ids up to the first step whose margin is
within the error):
- the manifest lists the CUDA target first, then the CPU one, each with its weights file; the two
  weights files exist and differ; `ignis inspect` lists both targets and the choice;
- a CUDA-only package and a bundle of it, and a bundle of the fat package, are built (their size
  overhead over the weights printed).
Without a GPU (this CI machine):
- the fat package (and its bundle, run with `env -i`) loads its CPU code, says so and why (no
  driver), and matches the reference; `--device cuda` is refused naming what is missing;
- the CUDA-only package and its bundle refuse to load with the driver named, exit status 1;
- the choice against stub drivers (a libcuda.so.1 of five functions, one device of a given compute
  capability): sm_90 and sm_100 take the CUDA code (sm_100 by the compute_90 PTX), sm_75 keeps the
  CPU code and says why, --device cpu skips the GPU.
With a GPU (the coordinator's H200 run, scripts/gpu_check.sh): the fat package and its bundle load
the CUDA code, say so (the GPU named), and match the reference; `--device cpu` takes the CPU code
and matches too; the CUDA bundle runs `FILE generate` with `env -i` and its greedy ids match.
Skipped (77) without NVRTC or without the bundle runtime."""
import glob, json, os, shutil, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []
BUILD = os.environ.get("IGNIS_BUILD", os.path.join(golden.ROOT, "build"))
MODEL = "llama3-rope-tied"


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def gpu_arch():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return int(p.stdout.split()[0].replace(".", "")) if p.returncode == 0 and p.stdout.strip() else None


def cli(args, env_i=False):
    """ignis ARGS, or with env_i ARGS[1] is a bundle: env -i BUNDLE ARGS[0] ARGS[2:]."""
    cmd = ["env", "-i", args[1], args[0]] + args[2:] if env_i else [golden.IGNIS] + args
    return subprocess.run(cmd, capture_output=True, text=True)


def golden_checks(what, pkg, env_i=False, extra=()):
    """Teacher-forced logits (prefill, one-token steps) and greedy ids of pkg against the reference;
    returns the stderr of its first run (the load message)."""
    ids, ref, meta = golden.reference(MODEL)
    scale, err, said = np.abs(ref).max(), 0.0, None
    npy = os.path.join(os.path.dirname(pkg), "fc.npy")
    for step in ([], ["--step"]):
        p = cli(["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy, *step, *extra], env_i)
        said = said if said is not None else p.stderr
        if p.returncode != 0:
            check(False, f"{what}: logits {step} ran: {p.stderr.strip()[-300:]}")
            return p.stderr
        got = np.load(npy).astype(np.float64)
        rel = np.abs(got - ref).max() / scale if got.shape == ref.shape else float("inf")
        err = max(err, rel * scale)
        check(rel <= golden.TOL["f32"], f"{what}: logits {' '.join(step) or 'prefill'} {rel:.2e} x max|ref| "
              f"(limit {golden.TOL['f32']:.0e})")
    p = cli(["generate", pkg, "--tokens", ",".join(map(str, meta["prompt"])), "--max-new-tokens", str(len(meta["greedy"])),
             "--ignore-eos", *extra], env_i)
    out = [int(x) for x in p.stdout.split()] if p.returncode == 0 else None
    n = next((i for i, m in enumerate(meta["greedy_top2_margin"]) if m <= 2 * err), len(meta["greedy"]))
    check(out is not None and out[:n] == meta["greedy"][:n],
          f"{what}: greedy ids {n}/{len(meta['greedy'])} compared" + ("" if out is not None else f": {p.stderr.strip()[-300:]}"))
    return said


def bundle(pkg, out):
    p = golden.run(["bundle", pkg, "-o", out], check=False)
    check(p.returncode == 0 and os.path.exists(out), f"bundle {os.path.basename(pkg)}: {(p.stdout or p.stderr).strip()}")
    return out


def cublas_beside(exe):
    """When cuBLAS is not where the loader looks (an `env -i` run has no LD_LIBRARY_PATH), links the
    libcublas.so.N / libcublasLt.so.N that this environment uses into the bundle's folder (one of
    the places the CUDA host code looks); returns what it linked."""
    import site
    dirs = os.environ.get("LD_LIBRARY_PATH", "").split(":") + ["/usr/local/cuda/lib64"]
    for sp in site.getsitepackages() + [site.getusersitepackages()]:  # pip's nvidia-cublas wheels (torch's)
        dirs += glob.glob(os.path.join(sp, "nvidia", "cu*", "lib")) + glob.glob(os.path.join(sp, "nvidia", "cublas", "lib"))
    for d in filter(None, dirs):
        libs = sorted(glob.glob(os.path.join(d, "libcublas.so.1[0-9]")) + glob.glob(os.path.join(d, "libcublasLt.so.1[0-9]")))
        if len(libs) >= 2:
            for lib in libs:
                dst = os.path.join(os.path.dirname(exe), os.path.basename(lib))
                if not os.path.exists(dst):
                    os.symlink(os.path.realpath(lib), dst)
            return libs
    return []


def main():
    golden.require_testdata()
    if not os.path.exists(os.path.join(BUILD, "bundle-runtime", "kit")):
        print("SKIP: no bundle runtime (scripts/install-deps.sh builds its static libraries)")
        return 77
    arch = gpu_arch()
    model = os.path.join(golden.TESTDATA, "models", MODEL)
    with tempfile.TemporaryDirectory(prefix="ignis-fatcuda-") as tmp:
        fat = os.path.join(tmp, "fat")
        p = golden.run(["compile", model, "-o", fat, "--dtype", "f32", "--target", "cpu,cuda:sm_80,sm_90"], check=False)
        if p.returncode != 0 and "NVRTC" in p.stderr and "not found" in p.stderr:
            print("SKIP: no NVRTC (CUDA toolkit) on this machine")
            return 77
        if p.returncode != 0:
            print(p.stderr)
            return 1
        m = json.load(open(os.path.join(fat, "manifest.json")))
        vs = m.get("variants", [])
        cpu_t = vs[1]["target"] if len(vs) == 2 else "?"
        check([v["target"] for v in vs][:1] == ["cuda-sm_80,sm_90"] and cpu_t.startswith("cpu-")
              and vs[0].get("cuda_archs") == "sm_80,sm_90" and vs[0].get("ptx") == 90,
              f"variants: the CUDA target, then the CPU one: {[v['target'] for v in vs]}")
        wf = [w["file"] for w in m.get("weight_files", [])]
        check(vs and vs[0].get("weights") == "weights-cuda.bin" and vs[-1].get("weights") == "weights.bin"
              and wf == ["weights-cuda.bin"], f"weights per layout: CUDA reads weights-cuda.bin, CPU weights.bin: {wf}")
        wc, wb = (open(os.path.join(fat, f), "rb").read() for f in ("weights-cuda.bin", "weights.bin"))
        hashes = lambda w: [t["hash"] for t in w["tensors"]]
        check(wc != wb and hashes(m["weight_files"][0]) != hashes(m["weights"]),
              f"the two layouts differ ({len(wc)} and {len(wb)} bytes)")
        p = golden.run(["inspect", fat])
        check(f"target cuda-sm_80,sm_90: model-cuda.so, weights weights-cuda.bin" in p.stderr
              and f"target {cpu_t}: model.so, weights weights.bin" in p.stderr and "this machine runs " in p.stderr,
              f"inspect lists the targets and the choice: {p.stderr.strip()!r}")
        cuda = os.path.join(tmp, "cuda")
        golden.run(["compile", model, "-o", cuda, "--dtype", "f32", "--target", "cuda:sm_90"])  # (one arch: quicker)
        fat_b, cuda_b = bundle(fat, os.path.join(tmp, "fat.run")), bundle(cuda, os.path.join(tmp, "cuda.run"))
        for b, w in ((fat_b, len(wc) + len(wb)), (cuda_b, len(wc))):
            over = os.path.getsize(b) - w
            print(f"     {os.path.basename(b)}: {os.path.getsize(b)} bytes, weights {w}, overhead {over / 1e6:.2f} MB")
            check(over <= 5e6, f"{os.path.basename(b)}: overhead over the weights {over / 1e6:.2f} MB <= 5 MB")
        if arch is None:
            gpuless(fat, cuda, fat_b, cuda_b, cpu_t, tmp)
        else:
            gpu(fat, cuda, fat_b, cuda_b, cpu_t, arch)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


STUB = r"""/* a stand-in libcuda.so.1 for the loader's choice: one device "ignis test stub" of compute
 * capability CC, and none of the entry points a model's init needs (so loading its code fails cleanly) */
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return i ? 101 : 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) { *v = attr == 75 ? CC / 10 : attr == 76 ? CC % 10 : 0; return 0; }
int cuDeviceGetName(char *s, int n, int d) { const char *x = "ignis test stub"; int i = 0; for (; x[i] && i < n - 1; i++) s[i] = x[i]; s[i] = 0; return 0; }
"""


def stub_driver(tmp, cc):
    """A folder holding a stub libcuda.so.1 whose one GPU has compute capability cc."""
    d = os.path.join(tmp, f"stub{cc}")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "stub.c")
    open(src, "w").write(STUB)
    subprocess.run(["cc", "-shared", "-fPIC", f"-DCC={cc}", "-Wl,-soname,libcuda.so.1", "-o", os.path.join(d, "libcuda.so.1"), src],
                   check=True)
    return d


def choice_cases(fat, cpu_t, tmp):
    """The loader's choice against stub drivers (no GPU needed): a GPU of a compiled architecture
    takes the CUDA code (whose init then fails cleanly: the stub has no context calls), one newer
    than the PTX too, an older one leaves the CPU code with the reason; --device cpu skips the GPU."""
    npy = os.path.join(tmp, "s.npy")
    cases = ((90, "cuda-sm_80,sm_90 (model-cuda.so): GPU 0 is ignis test stub (sm_90), which its code runs on"),
             (100, "cuda-sm_80,sm_90 (model-cuda.so): GPU 0 is ignis test stub (sm_100), which its code runs on"),
             (75, f"{cpu_t} (model.so): the best of its CPU targets that this CPU runs; the package's CUDA code is not used: "
                  "GPU 0 is ignis test stub (sm_75), and the code holds cubins for sm_80,sm_90 and PTX of compute_90, none of "
                  "which runs there"))
    for cc, want in cases:
        env = dict(os.environ, LD_LIBRARY_PATH=stub_driver(tmp, cc) + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
        p = subprocess.run([golden.IGNIS, "inspect", fat], capture_output=True, text=True, env=env)
        check(p.returncode == 0 and f"this machine runs {want}" in p.stderr, f"a stub sm_{cc} GPU: inspect says {want!r}: "
              f"{p.stderr.strip().splitlines()[-1]!r}")
        p = subprocess.run([golden.IGNIS, "logits", fat, "--tokens", "1,2", "--out", npy], capture_output=True, text=True, env=env)
        ok = p.returncode == 1 and "the CUDA library lacks" in p.stderr if cc != 75 else p.returncode == 0
        check(ok, f"a stub sm_{cc} GPU: logits {'fails cleanly in the CUDA init' if cc != 75 else 'runs the CPU code'}: "
              f"{p.stderr.strip()[-200:]!r}")
    p = subprocess.run([golden.IGNIS, "logits", fat, "--device", "cpu", "--tokens", "1,2", "--out", npy], capture_output=True,
                       text=True, env=env | {"LD_LIBRARY_PATH": stub_driver(tmp, 90)})
    check(p.returncode == 0 and f"ignis: loaded {cpu_t} (model.so): --device cpu" in p.stderr,
          f"a stub sm_90 GPU, --device cpu: the CPU code: {p.stderr.strip()!r}")


def python_target(fat, cpu_t):
    """The Python API's LLM(...).target names the choice, and device= forces one."""
    lib = os.path.join(BUILD, "libignis.so")
    if not os.path.exists(lib):
        return
    code = ("import ignis, sys\n"
            "with ignis.LLM(sys.argv[1]) as l: print(l.target)\n"
            "with ignis.LLM(sys.argv[1], device='cpu') as l: print(l.target)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(golden.ROOT, "python"), IGNIS_LIB=lib)
    p = subprocess.run([sys.executable, "-c", code, fat], capture_output=True, text=True, env=env)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and len(lines) == 2 and lines[0].startswith(f"{cpu_t} (model.so): ") and "no CUDA driver" in lines[0]
          and lines[1] == f"{cpu_t} (model.so): --device cpu", f"Python LLM.target: {lines or p.stderr.strip()[-200:]}")


def gpuless(fat, cuda, fat_b, cuda_b, cpu_t, tmp):
    choice_cases(fat, cpu_t, tmp)
    python_target(fat, cpu_t)
    for what, pkg, env_i in (("fat package", fat, False), ("fat bundle (env -i)", fat_b, True)):
        said = golden_checks(what, pkg, env_i)
        check(f"ignis: loaded {cpu_t} (model.so): the best of its CPU targets that this CPU runs; the package's CUDA code is not "
              "used: no CUDA driver (libcuda.so.1)" in said, f"{what}: says it loaded the CPU code and why: {said.strip()!r}")
    npy = os.path.join(tmp, "x.npy")
    p = cli(["logits", fat, "--device", "cuda", "--tokens", "1,2", "--out", npy])
    check(p.returncode == 1 and "--device cuda asks for cuda-sm_80,sm_90, which cannot run here: no CUDA driver" in p.stderr,
          f"fat package --device cuda refused: {p.stderr.strip()!r}")
    p = cli(["logits", fat, "--device", "cpu-aarch64-neon", "--tokens", "1,2", "--out", npy])
    check(p.returncode == 1 and "holds no cpu-aarch64-neon target" in p.stderr, f"an absent target refused: {p.stderr.strip()!r}")
    for what, args, env_i in (("CUDA package", ["logits", cuda, "--tokens", "1,2", "--out", npy], False),
                              ("CUDA bundle generate (env -i)", ["generate", cuda_b, "--tokens", "1,2", "--max-new-tokens", "2"], True)):
        p = cli(args, env_i)
        check(p.returncode == 1 and "this package targets CUDA, but no CUDA driver (libcuda.so.1) is installed" in p.stderr,
              f"{what} refused without a GPU: {p.stderr.strip()!r}")


def gpu(fat, cuda, fat_b, cuda_b, cpu_t, arch):
    runs = arch in (80, 90) or arch > 90  # a cubin of sm_80 / sm_90, or the compute_90 PTX
    if not runs:
        print(f"     this GPU (sm_{arch}) runs neither sm_80/sm_90 cubins nor compute_90 PTX: CPU expected")
    for b in (fat_b, cuda_b):  # with an empty environment, is cuBLAS where the loader looks?
        p = cli(["logits", b, "--tokens", "1", "--out", b + ".npy"], True)
        if "cuBLAS" in p.stderr and "not installed" in p.stderr:
            print(f"     cuBLAS is not on the loader's path under env -i; linked beside the bundle: {cublas_beside(b)}")
    for what, pkg, env_i in (("fat package", fat, False), ("fat bundle (env -i)", fat_b, True)):
        said = golden_checks(what, pkg, env_i)
        want = "ignis: loaded cuda-sm_80,sm_90 (model-cuda.so): GPU 0 is " if runs else f"ignis: loaded {cpu_t}"
        check(want in said, f"{what}: says which code it loaded: {said.strip()!r}")
        said = golden_checks(what + " --device cpu", pkg, env_i, ["--device", "cpu"])
        check(f"ignis: loaded {cpu_t} (model.so): --device cpu" in said, f"{what} --device cpu: {said.strip()!r}")
    if arch >= 90:  # the CUDA-only package holds sm_90 and compute_90 PTX
        golden_checks("CUDA package", cuda)
        golden_checks("CUDA bundle (env -i)", cuda_b, True)


if __name__ == "__main__":
    sys.exit(main())
