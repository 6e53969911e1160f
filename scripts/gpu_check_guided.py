#!/usr/bin/env python3
"""Guided decoding on the GPU (issue 19), a check: constrained requests sampled on the device under
their masks (uploaded as bitmasks beside each step, applied in templates/cuda/sample.cu) must give
the tokens of the host-side masked path, and their output must parse and follow the schema.

A random-weight checkpoint of 2 layers with Llama 3's vocabulary and tokenizer
(scripts/make_random_llama.py --small; ../shared/testdata/tokenizers/llama3) compiled for this GPU
in bf16 (on sm_90 its one-token steps run the persistent decode kernel) and in f32 (the per-op
kernels); for each constraint devbuild/bench_guided --check runs, greedy, the constrained request
alone, an unconstrained one alone and the three at once (unconstrained, constrained, unconstrained)
on an engine that samples on the device and on one that samples on the host (device_sampling 0:
logits back, the mask applied by the host sampler): the lone requests' tokens must be the same on
both (a batch's steps depend on when each request was admitted, so the batch is only printed), no
request may fail (the engine checks every device pick against the matcher); then the constrained
request alone with temperature 1 on the device.

Constraints: a regular expression whose language is a finite set of JSON objects (so a random
model's greedy output ends), whose texts must parse with json.loads and validate against the
matching JSON Schema (Python `jsonschema` when installed, else the same checks by hand); a JSON
Schema of the dev set and JSON mode, whose outputs must parse (and validate) when the request
finished inside its budget (random weights may run out of tokens inside a structure: then only the
token equality counts).

    scripts/gpu_check_guided.py [sm_90]      (after scripts/gpu_prepare.sh on the build machine)

Prints "guided check: ok" and exits 0 when everything passes, "guided check: FAIL" and 1 otherwise.
"""
import json, os, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNIS = os.environ.get("IGNIS", os.path.join(ROOT, "devbuild", "ignis"))
BENCH = os.path.join(os.path.dirname(IGNIS), "bench_guided")
arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90"
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gpu_bench_common import guided_data

tok, dev = guided_data(ROOT)

REGEX = r'\{"name": "[a-z]{1,8}", "count": [1-9][0-9]{0,2}, "ok": (true|false), "tags": \["[a-z]{1,4}"(, "[a-z]{1,4}"){0,2}\]\}'
REGEX_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "count", "ok", "tags"],
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
                               "count": {"type": "integer", "minimum": 1, "maximum": 999},
                               "ok": {"type": "boolean"},
                               "tags": {"type": "array", "minItems": 1, "maxItems": 3,
                                        "items": {"type": "string", "minLength": 1, "maxLength": 4}}}}
SCHEMA = "Glaiveai2K---generate_invoice_9a7aaa7d"

try:
    import jsonschema
except ImportError:
    jsonschema = None


def by_hand(inst):
    """REGEX_SCHEMA's checks without the jsonschema package."""
    ok = isinstance(inst, dict) and sorted(inst) == ["count", "name", "ok", "tags"]
    ok = ok and isinstance(inst["name"], str) and re.fullmatch(r"[a-z]{1,8}", inst["name"]) is not None
    ok = ok and type(inst["count"]) is int and 1 <= inst["count"] <= 999 and type(inst["ok"]) is bool
    ok = ok and isinstance(inst["tags"], list) and 1 <= len(inst["tags"]) <= 3
    return ok and all(isinstance(t, str) and 1 <= len(t) <= 4 for t in inst["tags"])


def validate(schema, text, must_finish, finish, what, fails):
    if finish not in ("stop", "eos"):
        if must_finish:
            fails.append(f"{what}: the output did not finish ({finish}): {text[:200]!r}")
        return "cut"
    try:
        inst = json.loads(text)
    except ValueError as e:
        fails.append(f"{what}: the output does not parse ({e}): {text[:200]!r}")
        return "bad"
    if schema is not None:
        if jsonschema is not None:
            try:
                jsonschema.validators.validator_for(schema)(schema).validate(inst)
            except jsonschema.ValidationError as e:
                fails.append(f"{what}: the output breaks the schema ({e.message}): {text[:200]!r}")
                return "bad"
        elif schema is REGEX_SCHEMA and not by_hand(inst):
            fails.append(f"{what}: the output breaks the schema: {text[:200]!r}")
            return "bad"
    return "valid"


def main():
    fails = []
    rows = {json.loads(l)["name"]: json.loads(l) for l in open(dev, encoding="utf-8")}
    with tempfile.TemporaryDirectory(prefix="ignis-gpu-guided-") as tmp:
        ckpt = os.path.join(tmp, "small")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_random_llama.py"), ckpt, "--small"], check=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok, f), os.path.join(ckpt, f))
        cases = [("regex", ["--regex", REGEX], REGEX_SCHEMA, True),
                 (f"schema {SCHEMA}", ["--schemas", dev, "--pick", SCHEMA], rows[SCHEMA]["schema"], False),
                 ("JSON mode", ["--json"], None, False)]
        for dtype in ("bf16", "f32"):
            pkg = os.path.join(tmp, "pkg-" + dtype)
            subprocess.run([IGNIS, "compile", ckpt, "-o", pkg, "--target", f"cuda:{arch}", "--dtype", dtype], check=True,
                           stdout=subprocess.DEVNULL)
            for label, args, schema, must_finish in cases:
                what = f"{dtype} {label}"
                p = subprocess.run([BENCH, pkg, "--check", "--prompt-len", "24", "--new-tokens", "96"] + args,
                                   capture_output=True, text=True)
                out = p.stdout
                print(f"== {what}\n" + "\n".join(l for l in out.splitlines() if l.startswith("check")))
                if p.returncode != 0:
                    fails.append(f"{what}: bench_guided --check exited {p.returncode}: {p.stderr.strip()[-400:]}")
                for m in re.finditer(r"^check text (\w+) \(\d+ tokens, (\w+)\): (.*)$", out, re.M):
                    verdict = validate(schema, json.loads(m.group(3)), must_finish, m.group(2), f"{what} ({m.group(1)})", fails)
                    print(f"guided {what} {m.group(1)}: {verdict}")
                if "check: ok" not in out:
                    fails.append(f"{what}: no 'check: ok' (device and host paths differ, or a request failed)")
    if jsonschema is None:
        print("(jsonschema is not installed: the regex outputs were checked by hand, the dev schema's only parsed)")
    for f in fails:
        print("FAIL:", f)
    print("guided check:", "FAIL" if fails else "ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
