#!/usr/bin/env python3
"""The Python interface (python/ignis over libignis.so): the three batch prompts of reference.json
run concurrently from three threads give transformers' greedy tokens; a seeded sampled request
repeats exactly; a bad parameter raises ignis.Error naming it; stop() ends a request STOPPED; a
request handle outlives the engine's close; a config struct of another layout is refused."""
import ctypes, json, os, sys, tempfile, threading
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import golden
import ignis

def main():
    golden.require_testdata()
    build = os.environ.get("IGNIS_BUILD", os.path.join(HERE, "..", "build"))
    os.environ.setdefault("IGNIS_LIB", os.path.join(build, "libignis.so"))
    fails = []
    with tempfile.TemporaryDirectory(prefix="ignis-py-") as tmp:
        pkg = golden.compile_model("qwen3-qknorm", "f32", tmp)
        ref = json.load(open(os.path.join(golden.TESTDATA, "models", "qwen3-qknorm", "reference.json")))
        with ignis.Engine(pkg, max_seqs=4) as eng:
            got = [None] * 3
            def run(i):
                got[i] = eng.generate(ref["batch"][i]["prompt"], max_new_tokens=8, ignore_eos=True)
            ths = [threading.Thread(target=run, args=(i,)) for i in range(3)]
            for t in ths: t.start()
            for t in ths: t.join()
            for i in range(3):
                if got[i].tokens != ref["batch"][i]["greedy"] or got[i].finish != "length":
                    fails.append(f"batch {i}: {got[i].tokens} ({got[i].finish}) != {ref['batch'][i]['greedy']}")
            a = eng.generate(ref["prompt"], max_new_tokens=12, temperature=0.8, top_k=20, seed=7, top_logprobs=2)
            b = eng.generate(ref["prompt"], max_new_tokens=12, temperature=0.8, top_k=20, seed=7, top_logprobs=2)
            if a.tokens != b.tokens or len(a.logprobs) != 12:
                fails.append(f"seeded requests differ: {a.tokens} vs {b.tokens}")
            try:
                eng.start([1, 2, 3], top_p=1.5)
                fails.append("top_p=1.5 was accepted")
            except ignis.Error as e:
                if "top_p" not in str(e):
                    fails.append(f"error does not name top_p: {e}")
            r = eng.start([1, 2, 3], max_new_tokens=10000, ignore_eos=True)
            first = r.read()
            r.stop()
            last = first
            for o in r:
                last = o
            if last.status != ignis.STOPPED:
                fails.append(f"stopped request ended with status {last.status}")
            s = eng.stats()
            if s["kv_pages_free"] + s["kv_pages_cached"] != s["kv_pages_total"]:
                fails.append(f"pages leaked: {s}")
            kept = eng.start([1, 2, 3], max_new_tokens=10000, ignore_eos=True)
        # closed with `kept` running: its handle stays valid, its queue ends STOPPED
        last = None
        for o in kept:
            last = o
        if last is None or last.status != ignis.STOPPED:
            fails.append(f"request kept across close ended with {last and last.status}")
        kept.release()
        lib = ignis._L()
        lib.ig_status_name.restype = ctypes.c_char_p
        if lib.ig_status_name(12) != b"closed":
            fails.append("ig_status_name is not exported or wrong")
        # a config of another layout is refused with a message naming the field
        cfg = ignis._defaults(ignis._EngineConfig, lib.ig_engine_config_default)
        cfg.struct_size -= 8
        h, err = ctypes.c_void_p(), ignis._Err()
        st = lib.ig_engine_open(pkg.encode(), ctypes.byref(cfg), ctypes.byref(h), ctypes.byref(err))
        if st != 6 or b"ig_engine_config.struct_size" not in err.msg:
            fails.append(f"engine config of another layout: status {st}, {err.msg!r}")
    for f in fails:
        print("FAIL:", f)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
