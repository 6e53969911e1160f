#!/usr/bin/env python3
"""The installed library (issue 20 item 6): `cmake --install` of the build into a fresh prefix
puts bin/ignis, lib/libignis.so, lib/libignis.a, the public headers, lib/pkgconfig/ignis.pc and
ignis-static.pc, and lib/cmake/ignis; then, using only the installed tree:
- `cc app.c $(pkg-config --cflags --libs ignis)` builds a program (tests/install/app.c) that
  runs with the installed libignis.so and gives transformers' greedy tokens on a package the
  installed CLI compiled;
- `cc app.c $(pkg-config --cflags --libs ignis-static)` builds one that needs no libignis.so
  (not in its ELF needed list) and gives the same tokens;
- a CMake project using find_package(ignis) builds both variants (ignis::ignis,
  ignis::ignis_static), which give the same tokens."""
import json, os, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def sh(args, env=None, **kw):
    p = subprocess.run(args, capture_output=True, text=True, env=env, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def needed(binary):
    out = sh(["readelf", "-d", binary])
    return [l.split("[")[1].split("]")[0] for l in out.splitlines() if "(NEEDED)" in l]


def main():
    build = os.environ.get("IGNIS_BUILD", os.path.join(golden.ROOT, "build"))
    if not shutil.which("pkg-config") or not shutil.which("cc"):
        print("SKIP: pkg-config or cc missing")
        return 77
    app = os.path.join(golden.ROOT, "tests", "install", "app.c")
    with tempfile.TemporaryDirectory(prefix="ignis-install-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        sh(["cmake", "--install", build, "--prefix", prefix])
        libdir = os.path.join(prefix, "lib")
        want = ["bin/ignis", "lib/libignis.so", "lib/libignis.a", "include/ignis.h", "include/ig_status.h",
                "lib/pkgconfig/ignis.pc", "lib/pkgconfig/ignis-static.pc", "lib/cmake/ignis/ignisConfig.cmake",
                "lib/cmake/ignis/ignisConfigVersion.cmake"]
        missing = [w for w in want if not os.path.exists(os.path.join(prefix, w))]
        check(not missing, f"installed tree has {len(want)} expected files (missing: {missing})")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        env.pop("IGNIS", None)
        run_env = dict(env, LD_LIBRARY_PATH=libdir)
        cases = []
        for model in ("llama-gqa", "qwen3-qknorm"):
            _, _, meta = golden.reference(model)
            b = meta["batch"][0]
            pkg = os.path.join(tmp, model)
            mdir = os.path.join(golden.TESTDATA, "models", model)
            golden.ensure_weights(mdir)
            sh([os.path.join(prefix, "bin", "ignis"), "compile", mdir, "-o", pkg, "--dtype", "f32"], env=env)
            cases.append((model, pkg, b["prompt"], b["greedy"]))

        def tokens(binary, pkg, prompt, n):
            out = sh([binary, pkg, str(n), ",".join(map(str, prompt))], env=run_env).splitlines()
            return [int(t) for t in out[0].split()], out[1]

        def check_app(binary, what):
            for model, pkg, prompt, greedy in cases:
                got, ver = tokens(binary, pkg, prompt, len(greedy))
                check(got == greedy and ver.startswith("version "),
                      f"{what} on {model}: {got} == transformers' greedy {greedy} ({ver})")

        cflags = sh(["pkg-config", "--cflags", "--libs", "ignis"], env=env).split()
        sh(["cc", "-O1", app, "-o", os.path.join(tmp, "app_pc")] + cflags, env=env)
        check("libignis.so" in needed(os.path.join(tmp, "app_pc")), "pkg-config ignis links libignis.so")
        check_app(os.path.join(tmp, "app_pc"), "pkg-config ignis program")
        sflags = sh(["pkg-config", "--cflags", "--libs", "ignis-static"], env=env).split()
        sh(["cc", "-O1", app, "-o", os.path.join(tmp, "app_pcs")] + sflags, env=env)
        need = needed(os.path.join(tmp, "app_pcs"))
        check(not any("ignis" in n for n in need), f"pkg-config ignis-static: no libignis in NEEDED {need}")
        check_app(os.path.join(tmp, "app_pcs"), "pkg-config ignis-static program")
        cm = os.path.join(tmp, "cmake-app")
        sh(["cmake", "-S", os.path.dirname(app), "-B", cm, f"-DCMAKE_PREFIX_PATH={prefix}"], env=env)
        sh(["cmake", "--build", cm], env=env)
        check_app(os.path.join(cm, "app_shared"), "find_package(ignis) ignis::ignis program")
        check(not any("ignis" in n for n in needed(os.path.join(cm, "app_static"))),
              "ignis::ignis_static: no libignis in NEEDED")
        check_app(os.path.join(cm, "app_static"), "find_package(ignis) ignis::ignis_static program")
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
