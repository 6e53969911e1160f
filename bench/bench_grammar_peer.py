#!/usr/bin/env python3
"""llguidance (PyPI: `pip install llguidance`) as the peer of `ignis bench-grammar`, timed the same
way on the same work:

- the same instances: every valid instance serialized once here (json.dumps, default separators,
  ensure_ascii=False, as the data set's README says) and handed to both as text (bench-grammar
  takes a test's "text" verbatim), so no number or string is written two ways;
- the same tokenizer file; each side tokenizes the text as a continuation (llguidance's
  tokenize_str, ignis's cli_encode_continuation) and the mask counts are printed to show they
  walked the same tokens;
- one mask before each token, timed by this thread's CPU time (time.thread_time around
  unsafe_compute_mask_ptr; CLOCK_THREAD_CPUTIME_ID around gr_matcher_mask in ignis); llguidance's
  process CPU time is printed beside its thread time, so work on other threads would show;
- compile: schema text to a matcher ready for its first mask (grammar_from_json_schema +
  LLMatcher; gr_compile + gr_matcher_new), the schema's JSON text made before the clock starts;
- supported: each side's own share; the ratios are over the schemas both support (both sides
  rerun on that common set, RUNS times alternating, each side's best run kept), and each side's
  lines over its own supported set are printed too.

    bench/bench_grammar_peer.py TOKENIZER_DIR SCHEMAS.jsonl [IGNIS [RUNS]]
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import llguidance
import llguidance.numpy as lnp


def pct(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))] if v else 0.0


def prepare(path):
    """Rows with each valid instance's text (json.dumps as the README says); invalid ones dropped."""
    rows = []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            tests = [{"valid": True, "text": json.dumps(t["data"], ensure_ascii=False)} for t in r["tests"] if t["valid"]]
            rows.append({"name": r["name"], "schema": r["schema"], "tests": tests})
    return rows


def run_llguidance(tok, rows):
    """Per schema: None (unsupported) or (compile ms, [mask us], instances accepted, instances)."""
    bm = lnp.allocate_token_bitmask(1, tok.vocab_size)
    # the row's address once: llguidance.numpy's fill_next_token_bitmask would add its numpy
    # checks and slicing (microseconds of Python) to every timed mask
    row = bm[0, :]
    ptr, nbytes = row.ctypes.data, row.size * row.itemsize
    clock = time.thread_time
    out = []
    for r in rows:
        text = json.dumps(r["schema"])
        t0 = clock()
        try:
            g = llguidance.LLMatcher.grammar_from_json_schema(text, defaults={"whitespace_flexible": True})
            m = llguidance.LLMatcher(tok, g)
            ok = not m.is_error()
        except Exception:  # noqa: BLE001 - a refused schema
            ok = False
        t1 = clock()
        if not ok:
            out.append(None)
            continue
        masks, acc = [], 0
        for t in r["tests"]:
            m.reset()
            good = True
            for tid in tok.tokenize_str(t["text"]):
                a = clock()
                m.unsafe_compute_mask_ptr(ptr, nbytes)
                masks.append((clock() - a) * 1e6)
                if not m.consume_token(tid):
                    good = False
                    break
            acc += good and m.is_accepting()
        out.append(((t1 - t0) * 1e3, masks, acc, len(r["tests"])))
    return out


def lines_llguidance(res, n_rows, label):
    sup = [x for x in res if x is not None]
    masks = [u for x in sup for u in x[1]]
    comp = [x[0] for x in sup]
    acc, n = sum(x[2] for x in sup), sum(x[3] for x in sup)
    a = (statistics.mean(masks) if masks else 0.0, pct(masks, 0.5), pct(masks, 0.99), statistics.median(comp) if comp else 0.0)
    print(f"llguidance {label} mask: average {a[0]:.1f} us, p50 {a[1]:.1f} us, p99 {a[2]:.1f} us ({len(masks)} masks)")
    print(f"llguidance {label} compile: median {a[3]:.2f} ms, p99 {pct(comp, 0.99):.2f} ms")
    print(f"llguidance {label} supported: {len(sup)}/{n_rows}; valid instances accepted: {acc}/{n}")
    return a


def run_ignis(ignis, tok_dir, rows, label):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        path = f.name
    try:
        p = subprocess.run([ignis, "bench-grammar", tok_dir, "--schemas", path, "--verbose"], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if p.returncode:
        raise SystemExit(f"ignis bench-grammar failed: {p.stderr}")
    unsupported = set(re.findall(r"^unsupported (.*?): ", p.stdout, re.M))
    for l in p.stdout.splitlines():
        if not l.startswith(("unsupported ", "valid instance rejected")):
            print(f"ignis {label} {l}")
    mk = re.search(r"average ([\d.]+) us, p50 ([\d.]+) us, p99 ([\d.]+) us", p.stdout)
    cp = re.search(r"compile: median ([\d.]+) ms", p.stdout)
    return unsupported, tuple(map(float, mk.groups())) + (float(cp.group(1)),)


def main():
    tok_dir, schemas = sys.argv[1], sys.argv[2]
    ignis = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..", "build", "ignis")
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rows = prepare(schemas)
    tok = llguidance.LLTokenizer(open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8").read())
    print(f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else ''}; {len(rows)} schemas; "
          f"tokenizer {tok_dir} (vocab {tok.vocab_size}); one thread, thread CPU time")
    p0, w0 = time.process_time(), time.thread_time()
    lg = run_llguidance(tok, rows)
    print(f"llguidance CPU time: this thread {time.thread_time() - w0:.2f} s, the whole process {time.process_time() - p0:.2f} s")
    lines_llguidance(lg, len(rows), "own")
    ig_unsup, _ = run_ignis(ignis, tok_dir, rows, "own")
    common = [i for i, r in enumerate(rows) if lg[i] is not None and r["name"] not in ig_unsup]
    sub = [rows[i] for i in common]
    print(f"common set: {len(common)} schemas both support; {reps} runs of each side, alternating, the best kept "
          "(the machine may be shared: a busy neighbour slows a run, never speeds it)")
    best_a = best_b = None
    for k in range(reps):
        res = run_llguidance(tok, sub) if k else [lg[i] for i in common]
        a = lines_llguidance(res, len(common), f"common run {k + 1}")
        _, b = run_ignis(ignis, tok_dir, sub, f"common run {k + 1}")
        best_a = a if best_a is None or a[0] < best_a[0] else best_a
        best_b = b if best_b is None or b[0] < best_b[0] else best_b
    a, b = best_a, best_b
    print(f"best llguidance: mask average {a[0]:.1f} us, p50 {a[1]:.1f} us, p99 {a[2]:.1f} us, compile median {a[3]:.2f} ms")
    print(f"best ignis:      mask average {b[0]:.1f} us, p50 {b[1]:.1f} us, p99 {b[2]:.1f} us, compile median {b[3]:.2f} ms")
    print(f"ratio ignis/llguidance (common set): average {b[0] / a[0]:.2f}x, p50 {b[1] / a[1]:.2f}x, p99 {b[2] / a[2]:.2f}x, "
          f"compile median {b[3] / a[3]:.2f}x (below 1: ignis is faster)")

if __name__ == "__main__":
    main()
