#!/usr/bin/env python3
"""Bad input through the CLI (issue 2): every case must end with a nonzero exit (not a signal),
and an error message that names what was wrong (file, key, tensor, feature, id)."""
import json, os, shutil, struct, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []

def expect_error(name, args, *needles, env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([golden.IGNIS] + args, capture_output=True, text=True, env=e)
    msg = p.stderr.strip()
    if p.returncode == 0:
        fails.append(f"{name}: succeeded but should have failed")
    elif p.returncode < 0 or p.returncode > 100:
        fails.append(f"{name}: crashed (exit {p.returncode}): {msg}")
    elif not all(n.lower() in msg.lower() for n in needles):
        fails.append(f"{name}: message does not name {needles}: {msg!r}")
    print(f"{'ok ' if not fails or not fails[-1].startswith(name) else 'BAD'} {name}: {msg[-160:]}")

def model_copy(tmp, src_model, name):
    src = os.path.join(golden.TESTDATA, "models", src_model)
    dst = os.path.join(tmp, name)
    shutil.copytree(src, dst)
    return dst

def main():
    golden.require_testdata()
    with tempfile.TemporaryDirectory(prefix="ignis-bad-") as tmp:
        # --- checkpoints
        d = model_copy(tmp, "llama-gqa", "missing-weights")
        os.remove(os.path.join(d, "model.safetensors"))
        expect_error("missing safetensors", ["compile", d, "-o", os.path.join(tmp, "p0")], "model.safetensors")

        d = model_copy(tmp, "llama-gqa", "truncated")
        f = os.path.join(d, "model.safetensors")
        os.truncate(f, os.path.getsize(f) // 2)
        expect_error("truncated safetensors", ["compile", d, "-o", os.path.join(tmp, "p1")], "model.safetensors")

        d = model_copy(tmp, "llama-gqa", "wrong-shape")
        f = os.path.join(d, "model.safetensors")
        raw = open(f, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        # swap the declared shape of a projection: same byte size, wrong shape
        hdr["model.layers.1.self_attn.o_proj.weight"]["shape"] = [64, 256]
        hb = json.dumps(hdr, separators=(",", ":")).encode()
        assert len(hb) <= n
        hb = hb.ljust(n)
        open(f, "wb").write(raw[:8] + hb + raw[8 + n:])
        expect_error("tensor of the wrong shape", ["compile", d, "-o", os.path.join(tmp, "p2")], "o_proj")

        d = model_copy(tmp, "llama-gqa", "unknown-arch")
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg["architectures"] = ["GPTNeoXForCausalLM"]
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        expect_error("unknown architecture", ["compile", d, "-o", os.path.join(tmp, "p3")], "GPTNeoXForCausalLM")

        d = model_copy(tmp, "llama-gqa", "missing-key")
        cfg = json.load(open(os.path.join(d, "config.json")))
        del cfg["num_attention_heads"]
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        expect_error("config missing a key", ["compile", d, "-o", os.path.join(tmp, "p4")], "num_attention_heads")

        expect_error("unknown target", ["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o",
                                        os.path.join(tmp, "p5"), "--target", "cpu:riscv"], "riscv")
        expect_error("unknown dtype", ["compile", os.path.join(golden.TESTDATA, "models", "llama-gqa"), "-o",
                                       os.path.join(tmp, "p5"), "--dtype", "f8"], "f8")

        # --- packages
        # the package the checks below use targets what this host runs (its best ISA); the feature
        # check gets its own AVX-512 BF16 package, refused on any host: IGNIS_CPU_MASK hides the
        # features an AVX-512 host has, and an AVX2-only host lacks them anyway
        pkg = golden.compile_model("llama-gqa", "f32", tmp)
        isa = golden.compile_model("llama-gqa", "f32", tmp, target="cpu:avx512bf16")
        expect_error("CPU lacks a feature the package needs", ["generate", isa, "--tokens", "1,2"], "avx512",
                     "recompile", env={"IGNIS_CPU_MASK": "1"})
        expect_error("AVX2 package on a CPU without AVX2", ["generate", golden.compile_model(
            "llama-gqa", "f32", tmp, target="cpu:avx2"), "--tokens", "1,2"], "avx2", env={"IGNIS_CPU_MASK": "0"})
        expect_error("token id out of range", ["generate", pkg, "--tokens", "1,5000,3"], "5000")
        expect_error("malformed token list", ["generate", pkg, "--tokens", "1,x"], "1,x")
        long = ",".join(["7"] * 300)  # llama-gqa has max_position_embeddings 256
        expect_error("sequence longer than the context", ["logits", pkg, "--tokens", long, "--out",
                                                          os.path.join(tmp, "x.npy")], "context")
        bad = os.path.join(tmp, "corrupt-pkg")
        shutil.copytree(pkg, bad)
        w = os.path.join(bad, "weights.bin")
        with open(w, "r+b") as fh:
            fh.seek(os.path.getsize(w) // 2)
            b = fh.read(1)
            fh.seek(-1, 1)
            fh.write(bytes([b[0] ^ 0x40]))
        expect_error("weights that do not match the manifest", ["generate", bad, "--tokens", "1,2"], "hash")
        os.truncate(w, os.path.getsize(w) - 100)
        expect_error("truncated weights.bin", ["generate", bad, "--tokens", "1,2"], "weights.bin")
        expect_error("not a package", ["generate", tmp, "--tokens", "1"], "manifest.json")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
