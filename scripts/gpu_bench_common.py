"""Helpers shared by the GPU benchmarks (scripts/gpu_bench*.py): running a command, the
device-to-device copy bandwidth that the rooflines divide by, torch's bf16 matmul rate, and where
the guided-decoding scripts find the Llama 3 tokenizer and the JSON-schema dev set."""
import os, subprocess, time


def sh(args, **kw):
    """stdout of args; prints the ends of its output and exits on failure."""
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode:
        print(p.stdout[-3000:], p.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(args)}")
    return p.stdout


def copy_bandwidth(torch, dev):
    """Bytes per second read + written by a 2 GiB device-to-device copy (the mean of 10 after 3 warm-ups)."""
    x = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    for _ in range(3): y.copy_(x)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): y.copy_(x)
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 10
    del x, y
    return 2 * (2 << 30) / dt


def matmul_rate(torch, dev):
    """FLOP/s of torch's bf16 8192^3 matmul on dev (the mean of 10 after 3 warm-ups)."""
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev); b = torch.randn_like(a)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): a @ b
    torch.cuda.synchronize(); rate = 2 * 8192**3 / ((time.perf_counter() - t) / 10)
    del a, b
    torch.cuda.empty_cache()
    return rate


def guided_data(root):
    """(Llama 3 tokenizer dir, jsonschema/dev.jsonl) under $IGNIS_TESTDATA, else the checkout's
    shared/testdata or ../shared/testdata; exits naming the folder when either is missing."""
    data = os.environ.get("IGNIS_TESTDATA") or next(
        (d for d in (os.path.join(root, "shared", "testdata"), os.path.join(root, "..", "shared", "testdata"))
         if os.path.isdir(d)), "")
    tok, dev = os.path.join(data, "tokenizers", "llama3"), os.path.join(data, "jsonschema", "dev.jsonl")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")) or not os.path.exists(dev):
        raise SystemExit(f"no Llama 3 tokenizer or jsonschema/dev.jsonl under {data!r} (set IGNIS_TESTDATA)")
    return tok, dev
