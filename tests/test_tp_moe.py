#!/usr/bin/env python3
"""Tensor parallelism of mixture-of-experts models (issue 24): qwen3-moe (8 experts, top-2),
qwen2-moe-shared (6 experts and a shared expert; 48 / 2 = 24 rows per rank and expert, zero-padded
to moe.c's 16-row panels) and mixtral compiled with --tp 2 run under `mpirun -np 2`
(oversubscribed). Each expert's FFN is split by intermediate columns, the router replicated: the
teacher-forced logits (one prefill step and one-token steps) equal the transformers float64
references within the f32 bound and TP 1's within 1e-5 relative, greedy generation equals TP 1's,
and the manifest records the experts' split; the engine's batch of the reference's three prompts
(mixtral, through the C API on rank 0) equals transformers' greedy tokens. Also qwen2-moe-shared with --tp 4 (12 rows per rank
and expert, padded to 16; each KV head on one rank), qwen3-moe in bf16 within the bf16 bound, and
the GGUF twin of qwen2-moe-shared (experts as 3-D ffn_*_exps tensors) with --tp 2 against the
reference and its own TP 1 (when the `gguf` package is installed).
The same checks as tests/test_tp.py (whose helpers this reuses); skips (77) without mpirun or when
this ignis was built without MPI."""
import json, os, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
import test_tp

MODELS = ["qwen3-moe", "qwen2-moe-shared", "mixtral"]


def check_manifest(model, pkg, fails):
    """The plan names every expert's gate / up rows and down columns, and the padded per-rank size."""
    man = json.load(open(os.path.join(pkg, "manifest.json")))
    tp = man["tensor_parallel"]
    cfg = json.load(open(os.path.join(golden.TESTDATA, "models", model, "config.json")))
    inter = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    experts = cfg.get("num_experts") or cfg["num_local_experts"]
    split = [s for s in tp["split"] if ".experts." in s["name"]]
    want_rows, want_cols = 2 * experts * cfg["num_hidden_layers"], experts * cfg["num_hidden_layers"]
    rows = [s for s in split if s["axis"] == "rows" and s["per_rank"] == inter // 2 and s["starts"] == [0, inter // 2]]
    cols = [s for s in split if s["axis"] == "cols" and s["per_rank"] == inter // 2 and s["starts"] == [0, inter // 2]]
    per = tp["per_rank"].get("moe_intermediate")
    ok = len(rows) == want_rows and len(cols) == want_cols and per == (inter // 2 + 15) // 16 * 16
    print(f"{model:16s} manifest: {len(rows)} expert row splits, {len(cols)} column splits, "
          f"{per} rows per rank and expert: {'ok' if ok else 'FAIL'}")
    if not ok:
        fails.append(f"{model} manifest: {len(rows)}/{want_rows} row splits, {len(cols)}/{want_cols} col splits, "
                     f"moe_intermediate per rank {per}")


def check_gguf(model, tmp, fails):
    try:
        import gguf_twin
        path = os.path.join(tmp, model + ".gguf")
        gguf_twin.write_twin(os.path.join(golden.TESTDATA, "models", model), path)
    except ImportError:
        print("SKIP gguf: no gguf package")
        return
    ids, ref, _ = golden.reference(model)
    p1, p2 = os.path.join(tmp, model + "-gguf-tp1"), os.path.join(tmp, model + "-gguf-tp2")
    golden.run(["compile", path, "-o", p1, "--dtype", "f32"])
    golden.run(["compile", path, "-o", p2, "--dtype", "f32", "--tp", "2"])
    a, b = test_tp.logits(p1, 1, ids, []), test_tp.logits(p2, 2, ids, [])
    vs_ref, vs_tp1 = np.abs(b - ref).max() / np.abs(ref).max(), np.abs(b - a).max() / np.abs(a).max()
    ok = vs_ref <= golden.TOL["f32"] and vs_tp1 <= 1e-5
    print(f"{model:16s} GGUF tp 2: vs reference {vs_ref:.2e}, vs tp 1 {vs_tp1:.2e} {'ok' if ok else 'FAIL'}")
    if not ok:
        fails.append(f"{model} GGUF tp 2: error {vs_ref:.2e} vs reference, {vs_tp1:.2e} vs tp 1")


def main():
    golden.require_testdata()
    if not test_tp.MPIRUN:
        print("SKIP: no mpirun (scripts/install-deps.sh installs Open MPI)")
        return 77
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-tp-moe-") as tmp:
        for model in MODELS:
            try:
                pkg = test_tp.compile_tp(model, 2, tmp)
                if model == MODELS[0]:
                    p = test_tp.mpi(2, ["logits", pkg, "--tokens", "1", "--out", os.path.join(tmp, "p.npy")], check=False)
                    if "built without MPI" in p.stderr:
                        print("SKIP: this ignis was built without MPI")
                        return 77
                test_tp.check_model(model, 2, tmp, fails)
                check_manifest(model, pkg, fails)
                if model == "mixtral":  # the engine's batch: experts grouped over several sequences' tokens
                    test_tp.check_batch(model, pkg, 2, fails)
            except Exception as e:
                fails.append(f"{model} tp 2: {e}")
        try:
            test_tp.check_model("qwen2-moe-shared", 4, tmp, fails)
            test_tp.check_bf16("qwen3-moe", 2, tmp, fails)
            check_gguf("qwen2-moe-shared", tmp, fails)
        except Exception as e:
            fails.append(f"tp 4 / bf16 / GGUF: {e}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
