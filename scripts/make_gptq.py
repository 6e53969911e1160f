#!/usr/bin/env python3
"""Writes a GPTQ or AWQ checkpoint of an HF Llama-family folder (single model.safetensors, F32 /
BF16 / F16) by round-to-nearest per group (no calibration: for benchmarks and format checks, not
for quality), in the on-disk layouts real checkpoints use (see ir/ir.h's ir_gq and
tests/test_gptq.py): the seven projection matrices of every layer become qweight / qzeros / scales
(/ g_idx), everything else is copied.

  scripts/make_gptq.py SRC_DIR OUT_DIR [--method gptq|awq] [--bits 4|8] [--group 128] [--sym]

Only numpy is needed."""
import argparse, json, os, struct, sys
import numpy as np

MATS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
    mm = np.memmap(path, np.uint8, mode="r")
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        raw = mm[base + a:base + b]
        if v["dtype"] == "BF16":
            x = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            x = raw.view({"F32": np.float32, "F16": np.float16}[v["dtype"]]).astype(np.float32)
        yield k, x.reshape(v["shape"])


def quantize(w, bits, G, sym):
    """w [N][K] -> codes [N][K], zeros [ng][N], f16 scales [ng][N] (groups of G consecutive columns)."""
    N, K = w.shape
    maxq = (1 << bits) - 1
    ng = (K + G - 1) // G
    q = np.empty((N, K), np.uint8)
    z = np.empty((ng, N), np.int64)
    s = np.empty((ng, N), np.float16)
    for g in range(ng):
        x = w[:, g * G:(g + 1) * G]
        lo, hi = np.minimum(x.min(1), 0), np.maximum(x.max(1), 0)
        if sym:
            hi = np.maximum(-lo, hi)
            lo = -hi
        sc = ((hi - lo) / maxq).astype(np.float16)
        sc[sc == 0] = np.float16(1e-4)
        scf = sc.astype(np.float32)
        zz = np.full(N, (maxq + 1) // 2) if sym else np.clip(np.rint(-lo / scf), 1, maxq).astype(np.int64)
        s[g], z[g] = sc, zz
        q[:, g * G:(g + 1) * G] = np.clip(np.rint(x / scf[:, None]) + zz[:, None], 0, maxq)
    return q, z, s


def pack_along(a, bits, axis):
    pack = 32 // bits
    a = np.moveaxis(a.astype(np.uint32), axis, 0)
    out = np.zeros((a.shape[0] // pack,) + a.shape[1:], np.uint32)
    for j in range(pack):
        out |= (a[j::pack] & ((1 << bits) - 1)) << np.uint32(bits * j)
    return np.ascontiguousarray(np.moveaxis(out, 0, axis)).view(np.int32)


def pack_awq(a):
    a = a.astype(np.uint32)
    out = np.zeros((a.shape[0], a.shape[1] // 8), np.uint32)
    for i, c in enumerate(AWQ_ORDER):
        out |= (a[:, c::8] & 15) << np.uint32(4 * i)
    return out.view(np.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--method", choices=("gptq", "awq"), default="gptq")
    ap.add_argument("--bits", type=int, choices=(4, 8), default=4)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--sym", action="store_true")
    a = ap.parse_args()
    if a.method == "awq" and (a.bits != 4 or a.sym):
        ap.error("AWQ is 4-bit with zero points")
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    os.makedirs(a.out, exist_ok=True)
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32"}
    hdr, blobs, off = {}, [], 0

    def add(k, x):
        nonlocal off
        b = np.ascontiguousarray(x).tobytes()
        hdr[k] = {"dtype": names[x.dtype], "shape": list(x.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)

    for k, w in read_st(os.path.join(a.src, "model.safetensors")):
        base = k[:-len(".weight")]
        if not (k.endswith(".weight") and base.rsplit(".", 1)[-1] in MATS):
            add(k, w.astype(np.float16) if cfg.get("torch_dtype", cfg.get("dtype")) != "float32" else w.astype(np.float32))
            continue
        G = w.shape[1] if a.group == -1 else a.group
        q, z, s = quantize(w, a.bits, G, a.sym)
        if a.method == "gptq":
            add(base + ".qweight", pack_along(q.T, a.bits, 0))
            add(base + ".qzeros", pack_along(z - 1, a.bits, 1))  # v1 ("gptq"): zero - 1
            add(base + ".scales", s)
            add(base + ".g_idx", (np.arange(w.shape[1]) // G).astype(np.int32))
        else:
            add(base + ".qweight", pack_awq(q.T))
            add(base + ".qzeros", pack_awq(z))
            add(base + ".scales", s)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    cfg["quantization_config"] = (
        {"quant_method": "gptq", "bits": a.bits, "group_size": a.group, "sym": a.sym, "desc_act": False,
         "checkpoint_format": "gptq"} if a.method == "gptq" else
        {"quant_method": "awq", "bits": 4, "group_size": a.group, "zero_point": True, "version": "gemm"})
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        p = os.path.join(a.src, extra)
        if os.path.exists(p):
            open(os.path.join(a.out, extra), "wb").write(open(p, "rb").read())
    print(f"wrote {a.out}: {a.method} {a.bits}-bit, group {a.group}, {'sym' if a.sym else 'asym'}, {off / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
