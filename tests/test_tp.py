#!/usr/bin/env python3
"""Tensor parallelism (issue 24) on this machine: packages compiled with --tp 2 (and --tp 4, whose 4
ranks replicate the 2 KV heads of llama-gqa) run under `mpirun -np N` (oversubscribed: CI has 2
cores). Their teacher-forced logits (one prefill step, and one-token steps) equal the transformers
float64 references within the f32 bound and TP 1's logits within 1e-5 relative; greedy generation
through the engine equals TP 1's; a package run on another number of ranks, or without mpirun, is
refused with a message naming both numbers; a MoE model is refused at compile time. Also: the
engine's batch of the reference's three prompts (from three threads, through the Python package
over the C API, rank 0 only) equals transformers' greedy tokens; a bf16 --tp 2 package is within
the bf16 bound; a CUDA --tp 2 package (NCCL collectives) compiles without a GPU, and without one
fails cleanly on every rank. Skips (77) without mpirun or when this ignis was built without MPI."""
import json, os, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
import numpy as np

MPIRUN = shutil.which("mpirun")
# CI runs as root; Open MPI refuses that unless told (test plumbing, not tuning)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
# a sanitizer build: what Open MPI keeps until exit is not ours to report
ENV["ASAN_OPTIONS"] = "detect_leaks=0" + (":" + os.environ["ASAN_OPTIONS"] if os.environ.get("ASAN_OPTIONS") else "")
MODELS = ["llama-gqa", "qwen3-qknorm", "qwen2-bias-tied", "gemma3"]  # GQA, q/k norm, biases + tied, post-norms + GeGLU


def mpi(n, args, check=True):
    p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(n), golden.IGNIS] + args,
                       capture_output=True, text=True, env=ENV, timeout=120)
    if check and p.returncode != 0:
        raise RuntimeError(f"mpirun -np {n} ignis {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def compile_tp(model, tp, tmp, dtype="f32"):
    pkg = os.path.join(tmp, f"{model}-tp{tp}-{dtype}")
    if os.path.exists(os.path.join(pkg, "manifest.json")):
        return pkg  # compiled by an earlier check
    golden.run(["compile", os.path.join(golden.TESTDATA, "models", model), "-o", pkg, "--dtype", dtype, "--tp", str(tp)])
    return pkg


def logits(pkg, ranks, ids, extra):
    npy = pkg + ".npy"
    args = ["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy, "--threads", "1"] + extra
    if ranks > 1: mpi(ranks, args)
    else: golden.run(args)
    return golden.read_npy(npy).astype(np.float64)


def generate(pkg, ranks, prompt, n):
    args = ["generate", pkg, "--tokens", ",".join(map(str, prompt)), "--max-new-tokens", str(n), "--ignore-eos", "--threads", "1"]
    p = mpi(ranks, args) if ranks > 1 else golden.run(args)
    return [int(x) for x in p.stdout.split()]


def check_model(model, tp, tmp, fails):
    ids, ref, meta = golden.reference(model)
    p1, pn = compile_tp(model, 1, tmp), compile_tp(model, tp, tmp)
    man = json.load(open(os.path.join(pn, "manifest.json")))
    if man.get("tp") != tp or not man["tensor_parallel"]["split"]:
        fails.append(f"{model} tp {tp}: manifest lacks the plan: tp={man.get('tp')}")
    for extra in ([], ["--step"]):
        a, b = logits(p1, 1, ids, extra), logits(pn, tp, ids, extra)
        vs_ref = np.abs(b - ref).max() / np.abs(ref).max()
        vs_tp1 = np.abs(b - a).max() / np.abs(a).max()
        ok = vs_ref <= golden.TOL["f32"] and vs_tp1 <= 1e-5
        print(f"{model:16s} tp {tp} {'step ' if extra else 'batch'}: vs reference {vs_ref:.2e}, vs tp 1 {vs_tp1:.2e} "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            fails.append(f"{model} tp {tp} {extra}: error {vs_ref:.2e} vs reference, {vs_tp1:.2e} vs tp 1")
    n = len(meta["greedy"])
    g1, gn = generate(p1, 1, meta["prompt"], n), generate(pn, tp, meta["prompt"], n)
    if g1 != gn or len(gn) != n:
        fails.append(f"{model} tp {tp}: greedy {gn} != tp 1's {g1}")
    return pn


# The C API unchanged on rank 0 (through the Python package over libignis.so): the three batch
# prompts of reference.json from three threads at once, continuous batching in the engine. The
# other ranks run the same script and follow rank 0 in ignis.tp_follow; rank 0 prints.
BATCH_SCRIPT = """
import json, sys, threading
sys.path.insert(0, sys.argv[1])
import ignis
if ignis.tp_follow(sys.argv[2]):
    sys.exit(0)
ref = json.load(open(sys.argv[3]))
with ignis.Engine(sys.argv[2], max_seqs=4, threads=1) as eng:
    got = [None] * 3
    def run(i):
        got[i] = eng.generate(ref["batch"][i]["prompt"], max_new_tokens=8, ignore_eos=True).tokens
    ths = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in ths: t.start()
    for t in ths: t.join()
print(json.dumps(got))
"""


def check_bf16(model, tp, tmp, fails):
    """bf16 activations round differently once partial sums meet, so: the reference within the bf16 bound."""
    ids, ref, meta = golden.reference(model)
    b = logits(compile_tp(model, tp, tmp, "bf16"), tp, ids, [])
    vs_ref = np.abs(b - ref).max() / np.abs(ref).max()
    print(f"{model:16s} tp {tp} bf16 : vs reference {vs_ref:.2e} {'ok' if vs_ref <= golden.TOL['bf16'] else 'FAIL'}")
    if vs_ref > golden.TOL["bf16"]:
        fails.append(f"{model} tp {tp} bf16: error {vs_ref:.2e} vs reference")


def check_batch(model, pkg, tp, fails):
    build = os.environ.get("IGNIS_BUILD", os.path.join(golden.ROOT, "build"))
    refp = os.path.join(golden.TESTDATA, "models", model, "reference.json")
    env = dict(ENV, IGNIS_LIB=os.path.join(build, "libignis.so"))
    cmd = [sys.executable, "-c", BATCH_SCRIPT, os.path.join(golden.ROOT, "python"), pkg, refp]
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(tp)] + cmd if tp > 1 else cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    want = [b["greedy"] for b in json.load(open(refp))["batch"]]
    got = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
    print(f"{model:16s} tp {tp} engine batch of 3 (C API via Python): {'ok' if got == want else 'FAIL'}")
    if got != want:
        fails.append(f"{model} tp {tp} batch: rc {p.returncode} got {got} want {want}\n{p.stderr[-600:]}")


def check_cuda(tmp, fails):
    """CUDA with NCCL, without a GPU: a --tp 2 package for sm_90 compiles (NVRTC + the host C, whose
    steps call the device collectives); run under mpirun on a machine without a GPU it fails with the
    device error on every rank instead of hanging the job."""
    pkg = os.path.join(tmp, "cuda-tp2")
    p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-qknorm"), "-o", pkg, "--tp", "2",
                    "--target", "cuda:sm_90", "--dtype", "bf16"], check=False)
    if p.returncode != 0 and "NVRTC" in p.stderr and "not found" in p.stderr:
        print("SKIP cuda: no NVRTC on this machine")
        return
    src = open(os.path.join(pkg, "src", "model.c")).read() if p.returncode == 0 else ""
    calls = src.count("all_reduce_sum_dev(st->comm"), src.count("all_gather_dev(st->comm")
    ok = p.returncode == 0 and os.path.getsize(os.path.join(pkg, "weights.rank1.bin")) > 0 and calls == (3, 1)
    print(f"cuda tp 2 package compiles, its step calls 3 all-reduces (embedding, o, down) and 1 all-gather: {'ok' if ok else 'FAIL'}")
    if not ok:
        fails.append(f"cuda --tp 2: rc {p.returncode}, collective calls {calls}: {p.stderr[-400:]}")
        return
    if os.path.exists("/dev/nvidia0"):
        return  # the run belongs to the GPU checks
    r = mpi(2, ["logits", pkg, "--tokens", "1,2,3", "--out", os.path.join(tmp, "c.npy")], check=False)
    if r.returncode == 0 or "CUDA" not in r.stdout + r.stderr:
        fails.append(f"cuda --tp 2 without a GPU: rc {r.returncode}: {(r.stdout + r.stderr)[-400:]}")


def check_refusals(pkg2, tmp, fails):
    ids = "1,2,3"
    p = mpi(3, ["logits", pkg2, "--tokens", ids, "--out", os.path.join(tmp, "x.npy")], check=False)
    msg = p.stdout + p.stderr
    if p.returncode == 0 or "sharded for 2 ranks" not in msg or "runs on 3 MPI ranks" not in msg:
        fails.append(f"-np 3 on a --tp 2 package: rc {p.returncode}, message: {msg[-400:]}")
    p = golden.run(["logits", pkg2, "--tokens", ids, "--out", os.path.join(tmp, "x.npy")], check=False)
    if p.returncode == 0 or "mpirun -np 2" not in p.stderr:
        fails.append(f"a --tp 2 package without mpirun: rc {p.returncode}, message: {p.stderr[-400:]}")
    # A rank > 0 that opens the engine instead of following: a clear error, and the job ends (mpirun
    # stops rank 0, which waits for it) instead of hanging.
    build = os.environ.get("IGNIS_BUILD", os.path.join(golden.ROOT, "build"))
    script = "import sys; sys.path.insert(0, sys.argv[1]); import ignis; ignis.Engine(sys.argv[2], threads=1)"
    try:
        p = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable, "-c", script,
                            os.path.join(golden.ROOT, "python"), pkg2], capture_output=True, text=True, timeout=120,
                           env=dict(ENV, IGNIS_LIB=os.path.join(build, "libignis.so")))
        msg = p.stdout + p.stderr
        if p.returncode == 0 or "rank 1 of a tensor-parallel job" not in msg or "ig_tp_follow" not in msg:
            fails.append(f"rank 1 opening an Engine without tp_follow: rc {p.returncode}, message: {msg[-400:]}")
    except subprocess.TimeoutExpired:
        fails.append("rank 1 opening an Engine without tp_follow: the job hung (120 s)")
    p = golden.run(["compile", os.path.join(golden.TESTDATA, "models", "qwen3-moe"), "-o", os.path.join(tmp, "moe"),
                    "--tp", "2"], check=False)
    if p.returncode == 0 or "mixture of experts" not in p.stderr:
        fails.append(f"--tp 2 of a MoE model: rc {p.returncode}, message: {p.stderr[-300:]}")


def main():
    golden.require_testdata()
    if not MPIRUN:
        print("SKIP: no mpirun (scripts/install-deps.sh installs Open MPI)")
        return 77
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-tp-") as tmp:
        probe = compile_tp("llama-gqa", 2, tmp)
        p = mpi(2, ["logits", probe, "--tokens", "1", "--out", os.path.join(tmp, "p.npy")], check=False)
        if "built without MPI" in p.stderr:
            print("SKIP: this ignis was built without MPI")
            return 77
        for model in MODELS:
            try:
                pkg2 = check_model(model, 2, tmp, fails)
                if model == "qwen3-qknorm":
                    check_batch(model, pkg2, 2, fails)
            except Exception as e:
                fails.append(f"{model} tp 2: {e}")
        try:
            check_bf16("llama3-rope-tied", 2, tmp, fails)
        except Exception as e:
            fails.append(f"llama3-rope-tied tp 2 bf16: {e}")
        try:  # 4 ranks over 2 KV heads: each KV head replicated on 2 ranks
            check_model("llama-gqa", 4, tmp, fails)
        except Exception as e:
            fails.append(f"llama-gqa tp 4: {e}")
        check_refusals(probe, tmp, fails)
        try:
            check_cuda(tmp, fails)
        except Exception as e:
            fails.append(f"cuda tp 2: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
