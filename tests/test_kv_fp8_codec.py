#!/usr/bin/env python3
"""The fp8 KV cache's e4m3 codec (templates/cpu/kv_quant.h) against ml_dtypes' float8_e4m3fn:
all 256 codes decode to the same value (NaN codes to NaN), and f32 values encode to the same code:
every code's value, the midpoints between neighbouring codes (ties: to even), values just off
the midpoints, random values over the whole range (normal and subnormal) and both signs. Past
448 ml_dtypes gives NaN where ignis saturates to +-448 (the KV rows are scaled to amax / 448, so
only rounding of the scale can get there): those are compared against clip(x, -448, 448)."""
import os, subprocess, sys, tempfile
import numpy as np
try:
    import ml_dtypes
except ImportError:
    print("SKIP: ml_dtypes is not installed (scripts/install-deps.sh)")
    sys.exit(77)

BUILD = os.environ.get("IGNIS_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
E4M3 = ml_dtypes.float8_e4m3fn


def values():
    codes = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float32)
    fin = np.sort(codes[np.isfinite(codes) & (codes >= 0)])
    mid = (fin[:-1] + fin[1:]) / 2  # exact in f32: ties
    near = np.concatenate([np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(1e9))])
    rng = np.random.default_rng(17)
    rnd = np.concatenate([rng.uniform(-448, 448, 20000), rng.uniform(-0.02, 0.02, 20000),
                          np.exp2(rng.uniform(-12, 9, 20000)) * rng.choice([-1, 1], 20000)]).astype(np.float32)
    big = np.array([448, 449, 463.9, 464, 500, 1e6, 3e38], np.float32)
    v = np.concatenate([codes[np.isfinite(codes)], mid, -mid, near, -near, rnd, big, -big, [0.0, -0.0]])
    return v.astype(np.float32)


def main():
    exe = os.path.join(BUILD, "test_kv_fp8")
    if not os.path.exists(exe):
        print(f"SKIP: {exe} is not built")
        return 77
    v = values()
    with tempfile.TemporaryDirectory() as tmp:
        fin, fout = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.bin")
        v.astype("<f4").tofile(fin)
        subprocess.run([exe, "--codec", fin, fout], check=True)
        out = np.fromfile(fout, np.uint8)
    codes, dec = out[:len(v)], out[len(v):].view("<f4")
    ref_dec = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float32)
    fails = 0
    dec_ok = np.array_equal(np.isnan(dec), np.isnan(ref_dec)) and np.array_equal(dec[~np.isnan(dec)], ref_dec[~np.isnan(ref_dec)])
    print(f"decode: 256 codes {'ok' if dec_ok else 'FAIL'}")
    fails += not dec_ok
    ref = np.clip(v, -448, 448).astype(E4M3).view(np.uint8)
    bad = np.nonzero(codes != ref)[0]
    print(f"encode: {len(v)} values (codes, ties, near-ties, random, saturation), {len(bad)} differ "
          f"{'ok' if not len(bad) else 'FAIL'}")
    for i in bad[:10]:
        print(f"  x = {v[i]!r}: ignis 0x{codes[i]:02x}, ml_dtypes 0x{ref[i]:02x}")
    fails += len(bad) > 0
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
