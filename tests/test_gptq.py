#!/usr/bin/env python3
"""GPTQ and AWQ checkpoints imported as their integers (issue 16 item 3).

The checkpoints are made here: llama-gqa's seven matrices per layer quantized with numpy (round to
nearest per group, symmetric or not) and written in the exact on-disk layouts (ir/ir.h's ir_gq
comment; AutoGPTQ / AutoAWQ / transformers conventions):
  GPTQ: qweight int32 [K / (32 / bits)][N] (codes packed along K, low bits first), qzeros int32
        [ceil(K / G)][N / (32 / bits)] (packed along N; the v1 "gptq" format stores zero - 1,
        "gptq_v2" the zero), scales f16 [ceil(K / G)][N], g_idx int32 [K];
  AWQ (GEMM): qweight int32 [K][N / 8] and qzeros int32 [K / G][N / 8] with columns
        0, 2, 4, 6, 1, 3, 5, 7 of each 8 in nibbles 0..7, scales f16 [K / G][N].
The reference is the same model with the numpy-dequantized matrices, w = scale (q - zero), as a
plain f32 safetensors checkpoint compiled to f32. Checks:
1. Each GPTQ / AWQ package (f32 activations, the q4z / q8z kernels) gives the reference package's
   logits within 1e-4 x max |logit| (the weights are identical; only summation order differs;
   measured ~1e-6), prefill and one-token steps; and the transformers float64 logits of the
   original model within a looser bound per bit width (what the rounding itself costs on these
   deliberately wide random weights: 8 bits 0.05, 4 bits 1.0 of max |logit|).
2. The package stores the integers: every layer matrix is q4z / q8z with the checkpoint's group in
   the manifest, at exactly the documented layout's bytes (4-bit g128: ~4.3 bits per weight).
3. g_idx: k / G and a permutation of whole groups are kept; a column permutation (desc_act) is
   refused naming the tensor, and --quant none dequantizes it (matching the reference).
4. Bad configs and tensors (bits 3, an unknown quant_method / checkpoint format / AWQ version,
   a qweight of the wrong shape, g_idx out of range) are errors naming what is wrong."""
import json, os, shutil, struct, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

MODEL = "llama-gqa"
TARGET = golden.cpu_test_target()
TIGHT = 1e-4
LOOSE = {8: 0.05, 4: 1.0}
MATS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj"]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AWQ: nibble i of a word holds column 8c + AWQ_ORDER[i]


def write_safetensors(path, tensors):
    hdr, blobs, off = {}, [], 0
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}
    for k, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.tobytes()
        hdr[k] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def quantize(w, bits, G, sym, gidx, rng):
    """Round to nearest per group of w [N][K] (groups over columns g_idx assigns). Returns codes
    q [N][K], zeros z [ng][N] (the true zero points), f16 scales [ng][N], g_idx [K]."""
    N, K = w.shape
    maxq = (1 << bits) - 1
    ng = int(gidx.max()) + 1
    q = np.zeros((N, K), np.int64)
    z = np.zeros((ng, N), np.int64)
    s = np.zeros((ng, N), np.float16)
    for g in range(ng):
        cols = np.nonzero(gidx == g)[0]
        x = w[:, cols].astype(np.float64)
        lo, hi = np.minimum(x.min(1), 0), np.maximum(x.max(1), 0)
        if sym:
            hi = np.maximum(np.abs(lo), hi)
            lo = -hi
        sc = ((hi - lo) / maxq).astype(np.float16)
        sc = np.where(sc == 0, np.float16(1e-3), sc)
        zz = np.full(N, (maxq + 1) // 2) if sym else np.clip(np.rint(-lo / sc.astype(np.float64)), 1, maxq)
        s[g], z[g] = sc, zz
        q[:, cols] = np.clip(np.rint(x / sc.astype(np.float64)[:, None]) + zz[:, None], 0, maxq)
    return q, z, s


def dequant(q, z, s, gidx):
    return (s.astype(np.float32)[gidx].T * (q - z[gidx].T).astype(np.float32)).astype(np.float32)


def pack_along(a, bits, axis):
    """int32 words of `a` (non-negative ints) packed 32 / bits per word along axis, low bits first."""
    pack = 32 // bits
    a = np.moveaxis(a.astype(np.uint32), axis, 0)
    out = np.zeros((a.shape[0] // pack,) + a.shape[1:], np.uint32)
    for j in range(pack):
        out |= (a[j::pack] & ((1 << bits) - 1)) << np.uint32(bits * j)
    return np.moveaxis(out, 0, axis).view(np.int32)


def pack_awq(a):
    """[R][C] nibbles into [R][C / 8] words, columns in AWQ's order."""
    a = a.astype(np.uint32)
    out = np.zeros((a.shape[0], a.shape[1] // 8), np.uint32)
    for i, c in enumerate(AWQ_ORDER):
        out |= (a[:, c::8] & 15) << np.uint32(4 * i)
    return out.view(np.int32)


def make_variant(tmp, name, method, bits, group, sym, gidx_mode="trivial", fmt="gptq", seed=0, tweak=None):
    """Writes the quantized checkpoint NAME and its dequantized f32 twin NAME-ref; returns both dirs."""
    src = os.path.join(golden.TESTDATA, "models", MODEL)
    golden.ensure_weights(src)
    ws = golden.read_safetensors_f32(os.path.join(src, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    rng = np.random.default_rng(seed)
    qt, rt = {}, {}
    for k, v in ws.items():
        base = k[:-len(".weight")]
        if not any(base.endswith(m) for m in MATS):
            qt[k] = rt[k] = v.astype(np.float32)
            continue
        N, K = v.shape
        G = K if group == -1 else group
        ng = (K + G - 1) // G
        gidx = np.arange(K) // G
        if gidx_mode == "groups":  # whole groups permuted: stored group b holds columns of block b
            gidx = rng.permutation(ng)[gidx]
        elif gidx_mode == "columns":  # desc_act: groups formed in a permuted column order
            perm = rng.permutation(K)
            gidx = np.empty(K, np.int64)
            gidx[perm] = np.arange(K) // G
        q, z, s = quantize(v, bits, G, sym, gidx, rng)
        rt[k] = dequant(q, z, s, gidx)
        stored_z = z - 1 if (method == "gptq" and fmt == "gptq") else z
        if method == "gptq":
            qt[base + ".qweight"] = pack_along(q.T, bits, 0)            # [K / pack][N]
            qt[base + ".qzeros"] = pack_along(stored_z, bits, 1)        # [ng][N / pack]
            qt[base + ".g_idx"] = gidx.astype(np.int32)
        else:
            qt[base + ".qweight"] = pack_awq(q.T)                        # [K][N / 8]
            qt[base + ".qzeros"] = pack_awq(stored_z)                    # [ng][N / 8]
        qt[base + ".scales"] = s                                         # [ng][N] f16
    qc = dict(cfg)
    if method == "gptq":
        qc["quantization_config"] = {"quant_method": "gptq", "bits": bits, "group_size": group, "sym": sym,
                                     "desc_act": gidx_mode == "columns", "checkpoint_format": fmt}
    else:
        qc["quantization_config"] = {"quant_method": "awq", "bits": bits, "group_size": group, "zero_point": True,
                                     "version": "gemm"}
    if tweak:
        tweak(qc, qt)
    dirs = []
    for d, t, c in ((os.path.join(tmp, name), qt, qc), (os.path.join(tmp, name + "-ref"), rt, cfg)):
        os.makedirs(d, exist_ok=True)
        write_safetensors(os.path.join(d, "model.safetensors"), t)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
        dirs.append(d)
    return dirs




def layer_bytes(N, K, G, bits):
    ng = (K + G - 1) // G
    return (N + 15) // 16 * 16 * (4 * ng + K * bits // 8)  # per 16 rows: f16 scale + zero per group, codes


def check_variant(tmp, fails, name, method, bits, group, sym, gidx_mode="trivial", fmt="gptq"):
    qdir, rdir = make_variant(tmp, name, method, bits, group, sym, gidx_mode, fmt)
    ids, ref64, _ = golden.reference(MODEL)
    pkg, rpkg = os.path.join(tmp, name + ".pkg"), os.path.join(tmp, name + "-ref.pkg")
    golden.run(["compile", qdir, "-o", pkg, "--target", TARGET, "--dtype", "f32"])  # keep: the default
    golden.run(["compile", rdir, "-o", rpkg, "--target", TARGET, "--dtype", "f32"])
    scale = np.abs(ref64).max()
    e_tight = max(np.abs(golden.step_logits(pkg, ids, st) - golden.step_logits(rpkg, ids, st)).max() for st in (False, True)) / scale
    e_loose = golden.logits_abs_error(pkg, ids, ref64) / scale
    m = json.load(open(os.path.join(pkg, "manifest.json")))
    fmt_name = "q8z" if bits == 8 else "q4z"
    mats = [t for t in m["weights"]["tensors"] if t["layout"] == "panel16" and "layers." in t["name"]]
    hp = m["hparams"]
    D, I, H, KV, hd = hp["hidden"], hp["intermediate"], hp["n_heads"], hp["n_kv_heads"], hp["head_dim"]
    shapes = [(H * hd + 2 * KV * hd, D), (D, H * hd), (2 * I, D), (D, I)]  # fused qkv, o, gate/up, down
    want = sum(layer_bytes(N, K, K if group == -1 else group, bits) for N, K in shapes) * hp["n_layers"]
    got = sum(t["bytes"] for t in mats)
    f32 = sum(N * K * 4 for N, K in shapes) * hp["n_layers"]
    print(f"{name}: vs dequantized f32 package {e_tight:.2e}, vs transformers f64 {e_loose:.3f} (of max |logit|); "
          f"layer matrices {got} bytes = {got / f32 * 32:.2f} bits per weight, formats "
          f"{sorted({(t['dtype'], t.get('group')) for t in mats})}")
    if not e_tight <= TIGHT:
        fails.append(f"{name}: logits differ from the dequantized package by {e_tight:.2e} of max |logit| (bound {TIGHT})")
    if not e_loose <= LOOSE[bits]:
        fails.append(f"{name}: logits differ from transformers float64 by {e_loose:.3f} (bound {LOOSE[bits]})")
    if any(t["dtype"] != fmt_name or (group > 0 and t.get("group") != group) for t in mats) or len(mats) != 4 * hp["n_layers"]:
        fails.append(f"{name}: layer matrices not all {fmt_name} group {group}: "
                     f"{sorted({(t['dtype'], t.get('group')) for t in mats})}")
    if got != want:
        fails.append(f"{name}: layer matrices hold {got} bytes, the {fmt_name} layout gives {want}")
    q = m.get("quant", {})
    if q.get("mode") != "keep" or fmt_name not in q.get("weights", "") or "GPTQ / AWQ" not in q.get("scheme", ""):
        fails.append(f"{name}: manifest quant {q}")
    insp = golden.run(["inspect", pkg]).stdout
    if fmt_name not in insp:
        fails.append(f"{name}: ignis inspect does not name {fmt_name}:\n{insp}")
    return qdir


def expect_error(fails, what, args, needles):
    p = golden.run(args, check=False)
    if p.returncode <= 0 or not all(n in p.stderr for n in needles):
        fails.append(f"{what}: exit {p.returncode}, stderr {p.stderr.strip()!r} (expected {needles})")
    else:
        print(f"{what}: {p.stderr.strip().splitlines()[-1]}")


def main():
    golden.require_testdata()
    fails = []
    tmp = tempfile.mkdtemp(prefix="ignis-gptq-")
    try:
        check_variant(tmp, fails, "gptq-4b-g32-sym", "gptq", 4, 32, True)
        qdir = check_variant(tmp, fails, "gptq-4b-g128-asym", "gptq", 4, 128, False)   # 352 = 2 x 128 + 96: a short last group
        # the defaults (keep, bf16 activations), end to end: logits and a greedy generation
        pkg = os.path.join(tmp, "default.pkg")
        golden.run(["compile", qdir, "-o", pkg, "--target", TARGET])
        ids, ref64, meta = golden.reference(MODEL)
        e = golden.logits_abs_error(pkg, ids, ref64) / np.abs(ref64).max()
        m = json.load(open(os.path.join(pkg, "manifest.json")))
        gen = golden.run(["generate", pkg, "--tokens", ",".join(map(str, meta["prompt"])), "--max-new-tokens", "8",
                          "--temperature", "0", "--ignore-eos"])
        print(f"defaults (dtype {m['dtype']}, quant {m.get('quant', {}).get('mode')}): vs transformers f64 {e:.3f}; "
              f"generate exit {gen.returncode}")
        if m["dtype"] != "bf16" or m.get("quant", {}).get("mode") != "keep" or not e <= LOOSE[4] or gen.returncode:
            fails.append(f"defaults: dtype {m['dtype']}, quant {m.get('quant')}, error {e:.3f}, generate {gen.returncode}")
        check_variant(tmp, fails, "gptq-4b-perchannel", "gptq", 4, -1, False)
        check_variant(tmp, fails, "gptq-4b-g64-groupperm", "gptq", 4, 64, False, gidx_mode="groups")
        check_variant(tmp, fails, "gptq-8b-g32-sym", "gptq", 8, 32, True)
        check_variant(tmp, fails, "gptq-8b-g128-asym-v2", "gptq", 8, 128, False, fmt="gptq_v2")
        check_variant(tmp, fails, "awq-4b-g32", "awq", 4, 32, False)
        # desc_act: refused as integers (naming the tensor), dequantized with --quant none
        qdir, rdir = make_variant(tmp, "gptq-descact", "gptq", 4, 32, False, gidx_mode="columns")
        expect_error(fails, "desc_act keep", ["compile", qdir, "-o", os.path.join(tmp, "da.pkg"), "--target", TARGET],
                     ["q_proj", "g_idx", "desc_act"])
        ids, _, _ = golden.reference(MODEL)
        pkg, rpkg = os.path.join(tmp, "da-none.pkg"), os.path.join(tmp, "da-ref.pkg")
        golden.run(["compile", qdir, "-o", pkg, "--target", TARGET, "--dtype", "f32", "--quant", "none"])
        golden.run(["compile", rdir, "-o", rpkg, "--target", TARGET, "--dtype", "f32"])
        lr = golden.step_logits(rpkg, ids, False)
        e = np.abs(golden.step_logits(pkg, ids, False) - lr).max() / np.abs(lr).max()
        print(f"desc_act --quant none: vs dequantized reference {e:.2e}")
        if not e <= TIGHT:
            fails.append(f"desc_act --quant none: {e:.2e} off the dequantized reference")
        # bad configs and tensors
        out = os.path.join(tmp, "bad.pkg")

        def bad(name, tweak, needles, method="gptq", bits=4, group=32):
            d, _ = make_variant(tmp, "bad-" + name, method, bits, group, False, tweak=tweak)
            expect_error(fails, name, ["compile", d, "-o", out, "--target", TARGET], needles)

        bad("bits3", lambda c, t: c["quantization_config"].update(bits=3), ["bits 3"])
        bad("method", lambda c, t: c["quantization_config"].update(quant_method="bitsandbytes"), ["bitsandbytes"])
        bad("format", lambda c, t: c["quantization_config"].update(checkpoint_format="marlin"), ["marlin"])
        bad("awq-version", lambda c, t: c["quantization_config"].update(version="gemv"), ["gemv"], method="awq")
        bad("group", lambda c, t: c["quantization_config"].update(group_size=20), ["group_size 20"])
        bad("shape", lambda c, t: t.update({"model.layers.1.mlp.up_proj.qweight":
                                            t["model.layers.1.mlp.up_proj.qweight"][:-1]}),
            ["model.layers.1.mlp.up_proj.qweight", "shape"])
        bad("shape-bits", lambda c, t: c["quantization_config"].update(bits=8), ["qweight", "shape"])

        def gidx_oob(c, t):
            g = t["model.layers.0.self_attn.o_proj.g_idx"].copy()
            g[5] = 1000
            t["model.layers.0.self_attn.o_proj.g_idx"] = g
        bad("gidx-range", gidx_oob, ["o_proj", "g_idx[5] = 1000", "out of range"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL:", f)
    print("PASS" if not fails else f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
