#!/usr/bin/env python3
"""An estimate (not a measurement) of ignis's decode speed on a Graviton3-class core (Neoverse V1:
2.6 GHz, 4 x 128-bit SIMD pipes, 256-bit SVE), from the AArch64 kernels' instruction counts.

How: bench/arm/arm_mca.c wraps matmul.c's and quant.h's decode kernels as functions; this script
compiles it with the cross compiler for each AArch64 target's -march (the SVE target at 256 bits,
V1's length, so that svcntw() is a constant and only V1's path is left), takes each kernel's
innermost loop from the assembly, and has llvm-mca (LLVM 19, -mcpu=neoverse-v1) give its cycles
per iteration in the steady state. With the weight bytes one iteration streams (counted from the
loop's vector loads, broadcasts left out), that is cycles per weight byte; a token of decode
streams every weight once (the matmuls of all layers plus the lm_head), so

    compute time per token = weight bytes x cycles per byte / clock
    memory time per token  = weight bytes / memory bandwidth

and the estimate is the larger of the two (attention, norms and the rest are a few percent of the
matmul work at short contexts and are left out). llvm-mca assumes every load hits L1: the compute
time is the kernel's ceiling, and the memory time decides when it is lower. The bandwidth figures
are assumptions, stated with the result: one V1 core streams about 30 GB/s (--core-gbs), a 64-core
Graviton3 socket about 250 GB/s of its 300 GB/s DDR5 (--socket-gbs).

Usage: scripts/arm_speed_estimate.py [--cores 1,8,64] [--core-gbs 30] [--socket-gbs 250]
Needs aarch64-linux-gnu-gcc and llvm-mca-19 (scripts/install-deps.sh)."""
import argparse, os, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLOCK_GHZ = 2.6

# (target, -march flags): the AArch64 targets of runtime/serving/rt_util.c
TARGETS = [("cpu:aarch64", "-march=armv8-a"),
           ("cpu:aarch64+bf16", "-march=armv8.6-a+bf16+i8mm"),
           ("cpu:aarch64+sve+bf16", "-march=armv8.6-a+sve+bf16+i8mm -msve-vector-bits=256")]
# kernel function -> (dtype it serves, the instruction that does its arithmetic)
KERNELS = {"mca_gemv_bf16": "bf16", "mca_gemv_f32": "f32", "mca_q8c": "a16w8", "mca_q4k": "a16w4",
           "mca_q8a": "a8w8"}

# model shapes: (name, hidden, intermediate, layers, heads, kv heads, head dim, vocab)
SHAPES = [("Llama-3.2-1B shape", 2048, 8192, 16, 32, 8, 64, 128256),
          ("SmolLM2-135M", 576, 1536, 30, 9, 3, 64, 49152)]
# bytes per weight of each dtype's matrices (a16w4: q4k's 4.5 bits; its vocabulary matrix is q6k,
# 6.5 bits; a8w8 and a16w8 carry a scale per row: ~8 bits)
BPW = {"f32": 4.0, "bf16": 2.0, "a16w8": 1.0, "a8w8": 1.0, "a16w4": 0.5625}
BPW_VOCAB = {"a16w4": 0.8125}


def weight_bytes(shape, dtype):
    """Bytes a decode step streams: each layer's q/k/v/o and gate/up/down, and the tied lm_head."""
    _, h, i, layers, heads, kvh, hd, vocab = shape
    per_layer = h * (heads * hd) * 2 + h * (kvh * hd) * 2 + 3 * h * i
    return layers * per_layer * BPW[dtype] + vocab * h * BPW_VOCAB.get(dtype, BPW[dtype])


def functions(asm):
    """name -> list of lines of each function in gcc's assembly"""
    out, cur = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_][\w.]*):", line)
        if m and not m.group(1).startswith("."):
            cur = m.group(1)
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out


def loops(lines):
    """Innermost loops: a local label followed by a conditional branch back to it, with no other
    label or branch back in between; each as its instruction lines."""
    found = []
    for bi, line in enumerate(lines):
        m = re.match(r"\s+(b\.\w+|bne|beq|bgt|bge|blt|ble|bhi|bls|bcc|bcs|cbnz|cbz|tbnz|tbz)\s+.*?(\.L\w+)\s*$", line)
        if not m:
            continue
        label = m.group(2) + ":"
        start = next((i for i in range(bi, -1, -1) if lines[i].strip() == label), None)
        if start is None:
            continue
        body = [l for l in lines[start + 1:bi + 1] if l.startswith("\t") and not l.strip().startswith(".")]
        inner = not any(re.match(r"^\.L\w+:", l) for l in lines[start + 1:bi])
        if inner and body:
            found.append(body)
    return found


def load_bytes(body, vl_bytes):
    """Bytes of the vector loads in a loop, broadcasts (ld1r*) and the activation vectors that
    by-element instructions index left out: the weight stream."""
    n = 0
    # registers read as an indexed element (the activations of BFDOT / SDOT / FMLA by lane)
    lane_regs = set(re.findall(r"\bv(\d+)\.\d*[bhs]\[\d\]", "\n".join(body)))
    for l in body:
        ins = l.split()[0]
        dst = re.match(r"\s+\w+\s+[qdv](\d+)", l)
        if dst and dst.group(1) in lane_regs:
            continue
        if ins.startswith("ld1r") or ins.startswith("ld1rq"):
            continue
        m = re.match(r"ld1s?([bhwd])$", ins)
        if m:  # SVE: memory element size x the register's lanes (ld1b z.s widens bytes into words)
            esz = {"b": 1, "h": 2, "w": 4, "d": 8}[m.group(1)]
            lanes = vl_bytes // {"b": 1, "h": 2, "s": 4, "d": 8}[re.search(r"z\d+\.([bhsd])", l).group(1)]
            n += lanes * esz
        elif ins in ("ldr", "ldur", "ldp", "ld1"):
            reg = l.split()[1].rstrip(",")
            size = {"q": 16, "d": 8}.get(reg[0], 0)
            if ins == "ldp":
                size *= 2
            if ins == "ld1":
                size = 16 if ".16b" in l or ".4s" in l or ".8h" in l else 8 if ".8b" in l else 0
            n += size
    return n


def arith(body):
    """Multiply-accumulate instructions of a loop (FMA, BFDOT, SDOT, widening int8 products)."""
    return sum(1 for l in body if re.match(r"\s+(fmla|bfdot|sdot|smull2?|sadalp)\b", l))


def mca_cycles(body, mca):
    """Steady-state cycles per iteration of a loop body under llvm-mca -mcpu=neoverse-v1."""
    text = "\n".join(body) + "\n"
    p = subprocess.run([mca, "-mtriple=aarch64", "-mcpu=neoverse-v1", "-iterations=200"], input=text,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"llvm-mca failed: {p.stderr[-2000:]}")
    cycles = int(re.search(r"Total Cycles:\s+(\d+)", p.stdout).group(1))
    return cycles / 200.0


def kernel_table(mca):
    """(target, kernel) -> (cycles per iteration, weight bytes per iteration, loop length)"""
    table = {}
    cc = "aarch64-linux-gnu-gcc"
    with tempfile.TemporaryDirectory() as tmp:
        for target, march in TARGETS:
            s = os.path.join(tmp, "k.s")
            subprocess.run([cc, "-O3", "-fno-math-errno", "-std=gnu11", "-D_GNU_SOURCE", *march.split(), "-I",
                            os.path.join(ROOT, "templates", "cpu"), "-S",
                            os.path.join(ROOT, "bench", "arm", "arm_mca.c"), "-o", s], check=True)
            fns = functions(open(s).read())
            vl = 32 if "sve" in march else 16
            for k in KERNELS:
                cands = [(arith(b), load_bytes(b, vl), b) for b in loops(fns.get(k, []))]
                cands = [c for c in cands if c[0] > 0 and c[1] > 0]
                if not cands:
                    continue
                # the kernel's hot loop: the one with the most multiply-accumulates per iteration
                _, nbytes, body = max(cands, key=lambda c: (c[0], c[1]))
                table[(target, k)] = (mca_cycles(body, mca), nbytes, len(body))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cores", default="1,8,64")
    ap.add_argument("--core-gbs", type=float, default=30.0, help="one core's streaming bandwidth (assumed)")
    ap.add_argument("--socket-gbs", type=float, default=250.0, help="the socket's streaming bandwidth (assumed)")
    a = ap.parse_args()
    mca = shutil.which("llvm-mca-19")
    if not mca or not shutil.which("aarch64-linux-gnu-gcc"):
        print("needs llvm-mca-19 and aarch64-linux-gnu-gcc (scripts/install-deps.sh)")
        return 77
    table = kernel_table(mca)
    print(f"Kernel inner loops on Neoverse V1 (llvm-mca 19, {CLOCK_GHZ} GHz; L1-resident: a ceiling):")
    print(f"{'target':24} {'kernel':14} {'dtype':6} {'insts':>5} {'cyc/iter':>8} {'B/iter':>6} {'GB/s/core':>9}")
    for (target, k), (cyc, nb, n) in table.items():
        print(f"{target:24} {k:14} {KERNELS[k]:6} {n:5d} {cyc:8.2f} {nb:6d} {nb / cyc * CLOCK_GHZ:9.1f}")
    cores = [int(c) for c in a.cores.split(",")]
    print(f"\nEstimated decode, batch 1 (assumed bandwidth: {a.core_gbs:g} GB/s per core, "
          f"{a.socket_gbs:g} GB/s per socket):")
    for shape in SHAPES:
        print(f"  {shape[0]}:")
        for target, _ in TARGETS:
            for k, dtype in KERNELS.items():
                if (target, k) not in table:
                    continue
                cyc, nb, _ = table[(target, k)]
                wb = weight_bytes(shape, dtype)
                parts = []
                for c in cores:
                    t_cpu = wb * cyc / nb / (CLOCK_GHZ * 1e9) / c
                    t_mem = wb / (min(a.core_gbs * c, a.socket_gbs) * 1e9)
                    t = max(t_cpu, t_mem)
                    parts.append(f"{c} core{'s' if c > 1 else ''} {t * 1e3:7.2f} ms ({1 / t:6.1f} tok/s, "
                                 f"{'compute' if t_cpu > t_mem else 'memory'})")
                print(f"    {target:22} {dtype:6} {wb / 1e6:7.0f} MB/token: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
