#!/usr/bin/env python3
"""pip packaging (issue 22): in a fresh virtual environment, `pip install .` of the repository
builds libignis and the CLI with CMake (scikit-build-core) and installs a package that imports
from another directory with no environment variables, finds its libignis.so next to itself,
tokenizes and renders a chat template as the transformers reference does, and brings the
`ignis` command; `pip wheel python/` builds a wheel holding the library and the CLI.

Offline: the venv sees the system's site-packages (scikit-build-core from
scripts/install-deps.sh) and pip runs with --no-build-isolation. Skipped (77) when venv or
scikit-build-core is missing."""
import glob, json, os, subprocess, sys, tempfile, zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTDATA = os.environ.get("IGNIS_TESTDATA", os.path.join(ROOT, "..", "shared", "testdata"))

CHECK = r'''
import json, os, sys, ignis
venv = sys.argv[1]
assert os.path.realpath(ignis.__file__).startswith(os.path.realpath(venv)), ignis.__file__
lib = ignis._native._L()._name
assert os.path.dirname(lib) == os.path.dirname(ignis.__file__), lib
assert ignis.version() == sys.argv[2], ignis.version()
tok_dir = sys.argv[3]
if os.path.isdir(tok_dir):
    t = ignis.Tokenizer(tok_dir)
    for c in json.load(open(os.path.join(tok_dir, "expected.json")))["chat"]:
        r = t.apply_chat_template(c["messages"], c["add_generation_prompt"])
        assert r == c["rendered"], (r, c["rendered"])
        assert t.encode(r, add_special_tokens=False) == c["ids"]
print("import ok", lib)
'''


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def main():
    try:
        import venv  # noqa: F401
        import scikit_build_core  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed (scripts/install-deps.sh installs it)")
        return 77
    version = open(os.path.join(ROOT, "CMakeLists.txt")).read().split("project(ignis VERSION ")[1].split()[0]
    env = {k: v for k, v in os.environ.items() if k not in ("IGNIS_LIB", "PYTHONPATH", "IGNIS")}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-pip-") as tmp:
        vdir = os.path.join(tmp, "venv")
        run([sys.executable, "-m", "venv", "--system-site-packages", vdir])
        py, pip = os.path.join(vdir, "bin", "python"), [os.path.join(vdir, "bin", "python"), "-m", "pip"]
        run(pip + ["install", "-q", "--no-build-isolation", "--no-deps", ROOT], env=env, cwd=tmp)
        elsewhere = os.path.join(tmp, "elsewhere")
        os.mkdir(elsewhere)
        p = subprocess.run([py, "-c", CHECK, vdir, version, os.path.join(TESTDATA, "tokenizers", "qwen3")],
                           capture_output=True, text=True, env=env, cwd=elsewhere)
        print(p.stdout.strip())
        if p.returncode:
            fails.append(f"import from another directory failed:\n{p.stderr}")
        p = subprocess.run([os.path.join(vdir, "bin", "ignis"), "version"], capture_output=True, text=True, env=env,
                           cwd=elsewhere)
        if p.returncode or p.stdout.strip() != f"ignis {version}":
            fails.append(f"the installed ignis command: status {p.returncode}, {p.stdout!r} {p.stderr!r}")
        p = subprocess.run([os.path.join(vdir, "bin", "ignis"), "no-such-command"], capture_output=True, text=True,
                           env=env, cwd=elsewhere)
        if p.returncode != 2:
            fails.append(f"the installed ignis command does not pass the exit status on: {p.returncode}")
        # a wheel, from python/ (whose pyproject.toml builds the CMake project one folder up)
        wdir = os.path.join(tmp, "wheels")
        run(pip + ["wheel", "-q", "--no-build-isolation", "--no-deps", "-w", wdir, os.path.join(ROOT, "python")],
            env=env, cwd=tmp)
        wheels = glob.glob(os.path.join(wdir, "ignis-*.whl"))
        names = zipfile.ZipFile(wheels[0]).namelist() if wheels else []
        for want in ("ignis/__init__.py", "ignis/libignis.so", "ignis/bin/ignis", "ignis/llm.py"):
            if want not in names:
                fails.append(f"wheel {wheels} lacks {want}: {names}")
    for f in fails:
        print("FAIL:", f)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
