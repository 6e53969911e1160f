#!/usr/bin/env python3
"""Seed corpora of the libFuzzer targets (tests/fuzz/fuzz_*.c), made from the shared test data.

usage: make_seeds.py TARGET OUT_DIR [IGNIS_CLI]

Writes a few small, valid inputs of the target's format into OUT_DIR (made if missing); a target
without a recipe here gets tests/fuzz/seeds/TARGET/* only (copied by scripts/fuzz_run.sh) or none.
The files come from ../shared/testdata (IGNIS_TESTDATA): checkpoints' headers and configs,
reduced real tokenizers (the first tokens of the vocabulary and the merges among them, with the
real normalizer / pre-tokenizer / decoder / post-processor), the test texts of the tokenizers,
the chat templates (and tests/data's), a tiny GGUF file, an .igraph and a manifest made with the ignis CLI.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

TD = os.environ.get("IGNIS_TESTDATA", "../shared/testdata")
HERE = os.path.dirname(os.path.abspath(__file__))


def put(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(out, cli):
    for p in sorted(glob.glob(f"{TD}/models/*/model*.safetensors"))[:8]:
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            f.seek(0)
            put(out, os.path.basename(os.path.dirname(p)) + ".st", f.read(min(8 + n + 4096, 1 << 16)))


def config(out, cli):
    for p in sorted(glob.glob(f"{TD}/models/*/config.json")):
        put(out, os.path.basename(os.path.dirname(p)) + ".json", open(p, "rb").read())
    # quantization_config variants over llama-gqa (GPTQ v1 / v2, AWQ, refused ones)
    base = json.load(open(f"{TD}/models/llama-gqa/config.json"))
    for i, q in enumerate([{"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False},
                           {"quant_method": "gptq", "bits": 8, "group_size": -1, "checkpoint_format": "gptq_v2"},
                           {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"},
                           {"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMV"},
                           {"quant_method": "gptq", "bits": 3, "format": "marlin"}]):
        put(out, f"quant{i}.json", json.dumps(dict(base, quantization_config=q)).encode())


def gptq(out, cli):
    # params (awq|8-bit, N, K, group, zero_add, scales type, g_idx, size offset) then bytes
    for i, hdr in enumerate([bytes([0, 3, 15, 2, 1, 0, 3, 0]), bytes([2, 1, 3, 5, 1, 0, 0, 0]),
                             bytes([1, 2, 3, 2, 0, 2, 0, 0]), bytes([0, 0, 0, 0, 1, 1, 1, 5])]):
        put(out, f"layer{i}.bin", hdr + bytes((7 * j + i) % 256 for j in range(4096)))


def tiny_gguf():
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    def kv_u32(k, v):
        return s(k) + struct.pack("<II", 4, v)

    def kv_f32(k, v):
        return s(k) + struct.pack("<If", 6, v)

    toks = ["<unk>", "<s>", "</s>", "a", "b", "ab"]
    kvs = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
           kv_u32("llama.block_count", 1), kv_u32("llama.embedding_length", 8),
           kv_u32("llama.feed_forward_length", 16), kv_u32("llama.attention.head_count", 2),
           kv_u32("llama.attention.head_count_kv", 1), kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6),
           s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("llama"),
           s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(toks)) + b"".join(s(t) for t in toks),
           s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, len(toks)) + struct.pack(f"<{len(toks)}f", *range(len(toks))),
           kv_u32("tokenizer.ggml.bos_token_id", 1), kv_u32("tokenizer.ggml.eos_token_id", 2)]
    D, F, V = 8, 16, len(toks)
    tens = [("token_embd.weight", [D, V]), ("output_norm.weight", [D]), ("blk.0.attn_norm.weight", [D]),
            ("blk.0.attn_q.weight", [D, D]), ("blk.0.attn_k.weight", [D, 4]), ("blk.0.attn_v.weight", [D, 4]),
            ("blk.0.attn_output.weight", [D, D]), ("blk.0.ffn_norm.weight", [D]), ("blk.0.ffn_gate.weight", [D, F]),
            ("blk.0.ffn_up.weight", [D, F]), ("blk.0.ffn_down.weight", [F, D])]
    info, off, data = b"", 0, b""
    for name, shape in tens:
        info += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        info += struct.pack("<IQ", 0, off)
        n = 4
        for d in shape:
            n *= d
        blob = struct.pack(f"<{n // 4}f", *[0.01 * (i % 7) for i in range(n // 4)])
        blob += b"\0" * ((-len(blob)) % 32)
        data += blob
        off += len(blob)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tens), len(kvs)) + b"".join(kvs) + info
    head += b"\0" * ((-len(head)) % 32)
    return head + data


def gguf(out, cli):
    put(out, "tiny.gguf", tiny_gguf())


def reduced_tokenizer(path, keep=400):
    tj = json.load(open(path, encoding="utf-8"))
    m = tj["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < keep}
    merges = []
    for mg in m.get("merges", []):
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(mg)
    m["vocab"], m["merges"] = vocab, merges
    tj["added_tokens"] = [t for t in tj.get("added_tokens", [])][:8]
    return json.dumps(tj, ensure_ascii=False)


def tokenizer_load(out, cli):
    for p in sorted(glob.glob(f"{TD}/tokenizers/*/tokenizer.json")):
        put(out, os.path.basename(os.path.dirname(p)) + ".json", reduced_tokenizer(p))


def tokenizer_encode(out, cli):
    for k, name in enumerate(["qwen3", "llama3", "llama2"]):
        p = f"{TD}/tokenizers/{name}/expected.json"
        if not os.path.exists(p):
            continue
        for i, case in enumerate(json.load(open(p, encoding="utf-8"))["encode"][:24]):
            put(out, f"{name}-{i}", bytes([k + 3 * (i % 16)]) + case["text"].encode())


def jinja(out, cli):
    seen = set()
    for p in sorted(glob.glob(f"{TD}/tokenizers/*/tokenizer_config.json")):
        t = json.load(open(p, encoding="utf-8")).get("chat_template")
        if isinstance(t, str) and t not in seen:
            seen.add(t)
            put(out, os.path.basename(os.path.dirname(p)) + ".jinja", t)
    cases = os.path.join(HERE, "..", "data", "chat_cases.json")
    if os.path.exists(cases):
        for i, c in enumerate(json.load(open(cases, encoding="utf-8"))["cases"]):
            if c["template"] not in seen:
                seen.add(c["template"])
                put(out, f"case{i}.jinja", c["template"])
    for p in sorted(glob.glob(os.path.join(HERE, "..", "data", "chat_families", "*.jinja"))):
        t = open(p, encoding="utf-8").read()  # the real templates of the issue-21 families
        if t not in seen:
            seen.add(t)
            put(out, "family-" + os.path.basename(p), t)


def with_cli(out, cli, what):
    if not cli:
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = f"{TD}/models/llama-gqa"
        if what == "igraph":
            g = os.path.join(tmp, "m.igraph")
            subprocess.run([cli, "import", src, "-o", g], check=True, capture_output=True)
            put(out, "llama-gqa.igraph", open(g, "rb").read())
        else:
            pkg = os.path.join(tmp, "pkg")
            subprocess.run([cli, "compile", src, "-o", pkg, "--dtype", "f32"], check=True, capture_output=True)
            put(out, "manifest.json", open(os.path.join(pkg, "manifest.json"), "rb").read())
            # a fat package's manifest (compiler/fat.c): a CUDA variant reading a second weights file
            # described in weight_files, then the CPU one (the package's own model.so and weights.bin)
            m = json.load(open(os.path.join(pkg, "manifest.json")))
            m["variants"] = [{"target": "cuda-sm_80,sm_90", "device": "cuda", "cpu_features": 0, "file": "model-cuda.so",
                              "weights": "weights-cuda.bin", "cuda_archs": "sm_80,sm_90", "ptx": 90, "host_arch": "x86_64"},
                             {"target": m["target"], "device": "cpu", "cpu_features": m["cpu_features"], "file": "model.so",
                              "weights": "weights.bin"}]
            m["weight_files"] = [dict(m["weights"], file="weights-cuda.bin")]
            put(out, "manifest-fat.json", json.dumps(m, indent=1))


RECIPES = {
    "safetensors": safetensors, "config": config, "gguf": gguf, "gptq": gptq, "tokenizer_load": tokenizer_load,
    "tokenizer_encode": tokenizer_encode, "jinja": jinja,
    "igraph": lambda o, c: with_cli(o, c, "igraph"), "manifest": lambda o, c: with_cli(o, c, "manifest"),
}

if __name__ == "__main__":
    target, out = sys.argv[1], sys.argv[2]
    cli = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(out, exist_ok=True)
    if target in RECIPES:
        RECIPES[target](out, cli)
