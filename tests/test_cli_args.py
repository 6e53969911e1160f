#!/usr/bin/env python3
"""The command line itself (restructure part 5): misspelled flags, missing values, malformed and
out-of-range numbers, unknown commands and stray arguments are refused with exit status 2 and a
message naming the flag and the value; help comes from the flag tables (every command, both
spellings, per-command defaults); flags may come before the package path, after it, after `--`
or as --name=value, with the same tokens; --tune is taken by compile and by the engine commands."""
import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden

fails = []


def ignis(args, stdin=""):
    return subprocess.run([golden.IGNIS] + args, capture_output=True, text=True, input=stdin)


def check(name, ok, p):
    print(f"{'ok ' if ok else 'BAD'} {name}: rc {p.returncode} {p.stderr.strip()[-160:]!r}")
    if not ok:
        fails.append(f"{name}: rc {p.returncode}, stdout {p.stdout[-200:]!r}, stderr {p.stderr[-300:]!r}")


def usage_error(name, args, *needles):
    """Exit status 2, `ignis CMD: error:` on stderr naming every needle, nothing on stdout."""
    p = ignis(args)
    ok = p.returncode == 2 and "error:" in p.stderr and all(n in p.stderr for n in needles) and not p.stdout
    check(name, ok, p)


def help_pages(pkg):
    p = ignis(["compile", "--help"])
    check("compile --help lists its flags", p.returncode == 0 and p.stdout.startswith("usage: ignis compile")
          and all(f in p.stdout for f in ("-o", "--target", "--dtype", "--page-size", "--tune", "--cc")), p)
    sampling = ("--temperature", "--top-p", "--top-k", "--min-p", "--seed", "--max-new-tokens", "--stop", "--ignore-eos")
    a, b = ignis(["help", "generate"]), ignis(["generate", "-h"])
    check("help generate lists the sampling flags", a.returncode == 0 and all(f in a.stdout for f in sampling + ("--tune",)), a)
    check("generate -h is help generate", b.returncode == 0 and b.stdout == a.stdout, b)
    # --help wins wherever it stands among the flags, even after the package
    c = ignis(["generate", pkg, "--tokens", "1", "--help"])
    check("generate PKG ... --help", c.returncode == 0 and c.stdout == a.stdout, c)
    # the shared sampling table shows each command's own default
    ch = ignis(["chat", "--help"])
    gen_line = [l for l in a.stdout.splitlines() if "--max-new-tokens" in l]
    chat_line = [l for l in ch.stdout.splitlines() if "--max-new-tokens" in l]
    check("per-command defaults", ch.returncode == 0 and "default 128" in "".join(gen_line)
          and "default 512" in "".join(chat_line) and all(f in ch.stdout for f in sampling + ("--system",)), ch)
    top = ignis(["help"])
    cmds = ["compile", "generate", "chat", "logits", "bench", "import", "inspect", "tokenize", "detokenize",
            "chat-template", "version"]
    check("help lists every command", top.returncode == 0 and all(f"  {c} " in top.stdout for c in cmds), top)
    check("--help is help", ignis(["--help"]).stdout == top.stdout, top)
    for c in cmds:
        p = ignis([c, "--help"])
        check(f"{c} --help", p.returncode == 0 and p.stdout.startswith(f"usage: ignis {c}") and "-h, --help" in p.stdout, p)
    p = ignis([])
    check("no arguments: the command list, status 2", p.returncode == 2 and "generate" in p.stderr, p)


def bad_values(pkg):
    g = ["generate", pkg, "--tokens", "1,2,3"]
    usage_error("misspelled flag", ["generate", pkg, "--prompt", "hi", "--temprature", "0.5"], "--temprature", "--temperature")
    usage_error("int32 overflow", g + ["--max-new-tokens", "99999999999"], "--max-new-tokens", "99999999999")
    usage_error("int64 overflow", g + ["--kv-bytes", "99999999999999999999"], "--kv-bytes", "99999999999999999999")
    usage_error("not a number", g + ["--temperature", "abc"], "--temperature", "abc")
    usage_error("trailing junk", g + ["--top-k", "5x"], "--top-k", "5x")
    usage_error("float given to an integer flag", g + ["--max-new-tokens", "2.5"], "--max-new-tokens", "2.5")
    usage_error("out of range", g + ["--top-p", "2"], "--top-p", "2")
    usage_error("open bound", g + ["--top-p", "0"], "--top-p")
    usage_error("negative", g + ["--top-k", "-3"], "--top-k", "-3")
    usage_error("negative seed", g + ["--seed", "-1"], "--seed", "-1")
    usage_error("too large for a float", g + ["--temperature", "1e39"], "--temperature", "1e39")
    usage_error("missing value", g + ["--top-p"], "--top-p")
    usage_error("value given to a switch", g + ["--ignore-eos=yes"], "--ignore-eos", "yes")
    usage_error("engine flag range", g + ["--threads", "-1"], "--threads", "-1")
    usage_error("extra positional", g + ["stray"], "stray")
    usage_error("missing package", ["generate", "--tokens", "1"], "PKG")
    usage_error("missing required flag", ["logits", pkg, "--tokens", "1"], "--out")
    usage_error("compile without -o", ["compile", pkg], "-o")
    usage_error("unknown flag on compile", ["compile", pkg, "-o", pkg + "-x", "--dtpye", "f32"], "--dtpye")
    usage_error("unknown command", ["generat", pkg], "generat")
    usage_error("help for an unknown command", ["help", "frobnicate"], "frobnicate")
    usage_error("flag of another command", ["tokenize", pkg, "--temperature", "1"], "--temperature")


def flag_order(pkg):
    after = ignis(["generate", pkg, "--tokens", "1,2,3", "--max-new-tokens", "5"])
    check("generate PKG --tokens ...", after.returncode == 0 and len(after.stdout.split()) == 5, after)
    for name, args in (("flags before the package", ["generate", "--tokens", "1,2,3", "--max-new-tokens", "5", pkg]),
                       ("package between flags", ["generate", "--tokens", "1,2,3", pkg, "--max-new-tokens", "5"]),
                       ("--name=value and --", ["generate", "--tokens=1,2,3", "--max-new-tokens=5", "--", pkg])):
        p = ignis(args)
        check(name, p.returncode == 0 and p.stdout == after.stdout, p)
    # chat: --system before the package is parsed (this package has no tokenizer, so chat then
    # stops at that, not at its arguments)
    p = ignis(["chat", "--system", "Be brief", pkg], stdin="")
    check("chat --system TEXT PKG", p.returncode != 2 and "no tokenizer" in p.stderr, p)


def tune(pkg, tmp):
    """--tune passes through (the keys are checked by the compiler and the engine, which name
    unknown ones): not an unknown flag, and either accepted or refused naming the key."""
    key = "cli_args_test_key=1"
    src = os.path.join(golden.TESTDATA, "models", "llama-gqa")
    for name, args in (("compile --tune", ["compile", src, "-o", os.path.join(tmp, "tuned"), "--tune", key,
                                           "--tune", "a_b=2,c_d=3"]),
                       ("generate --tune", ["generate", pkg, "--tune", key, "--tokens", "1,2", "--max-new-tokens", "2"])):
        p = ignis(args)
        check(name, "unknown flag" not in p.stderr and (p.returncode == 0 or (p.returncode == 1 and "cli_args_test_key" in p.stderr)), p)
    usage_error("--tune without a value", ["generate", pkg, "--tokens", "1", "--tune"], "--tune")
    usage_error("--tune on a command without tuning", ["tokenize", pkg, "--tune", key], "--tune")


def main():
    golden.require_testdata()
    with tempfile.TemporaryDirectory(prefix="ignis-args-") as tmp:
        pkg = golden.compile_model("llama-gqa", "f32", tmp)
        help_pages(pkg)
        bad_values(pkg)
        flag_order(pkg)
        tune(pkg, tmp)
    for f in fails:
        print("FAIL:", f)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
