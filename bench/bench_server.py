#!/usr/bin/env python3
"""Load on `ignis serve` through the official openai client: many concurrent streaming chat
clients, a random fraction of which disconnect mid-stream. Checks that every request not
cancelled ends with exactly one finish reason per choice, that no completion id is lost or
duplicated, that the server frees every KV page (/metrics), and reports p50/p99 time to first
token and the token throughput.

    bench/bench_server.py --url http://127.0.0.1:8000 [--clients 256] [--requests 2000]
                          [--max-tokens 32] [--disconnect 0.25] [--waves 2] [--api-key KEY]
    bench/bench_server.py --pkg PKG [--threads N] [--compare 16] [--prompt-len 32] [--new-tokens 32]
                          [--rounds 3] [--raw] [--skip-load] [--serve-args '...'] [load flags]

With --pkg it starts `ignis serve PKG` on a free port itself, reports the server's memory before the
load and after each wave (every request has its own prompt, so later waves do not replay the first
one's prefixes), and (--compare C) measures the throughput of C concurrent streamed completions of
random token-id prompts (what bench_engine does at that level) against build/bench_engine on the same
package, in rounds that alternate server and bench_engine (--raw adds a lean raw-socket client to
each round, which leaves the openai client's parsing out), printing every round with the load
average, the medians and their ratio. (tests/test_server.py runs a short load.) Timings on a shared
machine are noisy: compare the rounds' medians, not single rounds."""
import argparse, random, re, sys, threading, time, urllib.request


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([-0-9.e+]+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def one_request(client, model, i, max_tokens, disconnect, rec):
    """Request i (its prompt and seed are i's own, so requests of different waves differ)."""
    t0 = time.monotonic()
    ttft, n_chunks, finishes, text, cid = None, 0, [], [], None
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": f"Count from {i} to {i + 20}."}],
        max_tokens=max_tokens, temperature=0.7, seed=i, stream=True, extra_body={"ignore_eos": True},
        stream_options={"include_usage": True})
    usage = None
    for chunk in stream:
        cid = chunk.id
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.content:
                if ttft is None:
                    ttft = time.monotonic() - t0
                text.append(ch.delta.content)
                n_chunks += 1
            if ch.finish_reason:
                finishes.append(ch.finish_reason)
        if disconnect and n_chunks >= 2:
            stream.close()  # the client goes away mid-stream
            break
    rec.update(id=cid, ttft=ttft, finishes=finishes, text="".join(text), usage=usage, cancelled=disconnect,
               t=time.monotonic() - t0)


def run_load(url, model, api_key, clients, requests, max_tokens, disconnect_frac, seed=0, first=0):
    """Runs the load of requests first .. first + requests - 1; returns (errors, report dict)."""
    import openai
    rng = random.Random(seed)
    plan = [rng.random() < disconnect_frac for _ in range(requests)]
    recs = [dict() for _ in range(requests)]
    next_i = [0]
    lock = threading.Lock()
    errors = []

    def worker():
        client = openai.OpenAI(base_url=url + "/v1", api_key=api_key or "none", max_retries=0, timeout=600)
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= requests:
                return
            try:
                one_request(client, model, first + i, max_tokens, plan[i], recs[i])
            except Exception as e:  # noqa: BLE001 - every failure is reported
                recs[i]["error"] = repr(e)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(min(clients, requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ids = [r.get("id") for r in recs]
    if len(set(ids)) != len(ids) or None in ids:
        errors.append(f"completion ids lost or duplicated: {len(set(ids))} distinct of {len(ids)}")
    tokens = 0
    for i, r in enumerate(recs):
        if "error" in r:
            errors.append(f"request {i}: {r['error']}")
        elif not r["cancelled"]:
            if r["finishes"] not in (["length"], ["stop"]):
                errors.append(f"request {i}: finish reasons {r['finishes']}")
            if not r["usage"] or r["usage"].completion_tokens < 1:
                errors.append(f"request {i}: no usage chunk")
            else:
                tokens += r["usage"].completion_tokens
    # the server frees pages of cancelled requests at once; give the scheduler a moment
    for _ in range(50):
        m = metrics(url)
        if m.get("ignis_requests_running", 1) == 0 and m.get("ignis_requests_waiting", 1) == 0:
            break
        time.sleep(0.1)
    free = m["ignis_kv_pages_free"] + m["ignis_kv_pages_cached"]
    if free != m["ignis_kv_pages_total"] or m["ignis_requests_running"] != 0:
        errors.append(f"KV pages not all free after the load: free {m['ignis_kv_pages_free']:.0f} + cached "
                      f"{m['ignis_kv_pages_cached']:.0f} of {m['ignis_kv_pages_total']:.0f}, running {m['ignis_requests_running']:.0f}")
    ttfts = sorted(r["ttft"] for r in recs if r.get("ttft") is not None)
    pct = lambda q: ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))] if ttfts else float("nan")
    rep = dict(requests=requests, clients=clients, cancelled=sum(plan), wall_s=wall, completion_tokens=tokens,
               tokens_per_s=tokens / wall if wall else 0, ttft_p50=pct(0.5), ttft_p99=pct(0.99),
               server_cancelled=m.get("ignis_requests_cancelled_total", 0))
    return errors, rep


def rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def server_round(url, model, api_key, concurrency, prompt_len, new_tokens, seed):
    """concurrency streamed completions of random token-id prompts started at once (what
    bench_engine does at that level); output tokens/s from the first start to the last token."""
    import openai
    rng = random.Random(seed)
    prompts = [[rng.randrange(1000, 30000) for _ in range(prompt_len)] for _ in range(concurrency)]
    counts, errs = [0] * concurrency, []
    barrier = threading.Barrier(concurrency + 1)

    def one(i):
        client = openai.OpenAI(base_url=url + "/v1", api_key=api_key or "none", max_retries=0, timeout=600)
        barrier.wait()
        try:
            for ch in client.completions.create(model=model, prompt=prompts[i], max_tokens=new_tokens, temperature=0,
                                                stream=True, stream_options={"include_usage": True},
                                                extra_body={"ignore_eos": True}):
                if ch.usage:
                    counts[i] = ch.usage.completion_tokens
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))

    ts = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in ts:
        t.join()
    wall = time.monotonic() - t0
    if errs or sum(counts) != concurrency * new_tokens:
        raise RuntimeError(f"server round: {errs[:3]} tokens {sum(counts)} of {concurrency * new_tokens}")
    return sum(counts) / wall


def raw_round(url, model, api_key, concurrency, prompt_len, new_tokens, seed):
    """What server_round measures, with a lean client: one thread sends the requests over raw
    sockets and reads the event streams through a selector without parsing them, so that on a small
    host the client's own CPU time (the openai client parses every chunk) stays out of the figure."""
    import json, selectors, socket
    host, port = url.split("//")[1].rsplit(":", 1)
    rng = random.Random(seed)
    socks, sel, bufs = [], selectors.DefaultSelector(), []
    auth = f"Authorization: Bearer {api_key}\r\n".encode() if api_key else b""
    reqs = []
    for _ in range(concurrency):
        body = json.dumps({"model": model, "prompt": [rng.randrange(1000, 30000) for _ in range(prompt_len)],
                           "max_tokens": new_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
                           "stream_options": {"include_usage": True}}).encode()
        reqs.append(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth +
                    b"Content-Length: %d\r\n\r\n" % len(body) + body)
    for _ in range(concurrency):
        socks.append(socket.create_connection((host, int(port))))
        bufs.append(bytearray())
    t0 = time.monotonic()
    for i, (k, r) in enumerate(zip(socks, reqs)):
        k.sendall(r)
        sel.register(k, selectors.EVENT_READ, i)
    left, counts = concurrency, [0] * concurrency
    while left:
        for key, _ in sel.select():
            i, d = key.data, key.fileobj.recv(65536)
            bufs[i] += d
            if not d or b"data: [DONE]" in bufs[i][-64:]:
                sel.unregister(key.fileobj)
                left -= 1
                u = bufs[i].rfind(b'"completion_tokens":')
                counts[i] = int(bufs[i][u + 20:].split(b",")[0]) if u >= 0 else 0
    wall = time.monotonic() - t0
    for k in socks:
        k.close()
    if sum(counts) != concurrency * new_tokens:
        raise RuntimeError(f"raw round: tokens {sum(counts)} of {concurrency * new_tokens}")
    return sum(counts) / wall


def engine_rounds(bench_engine, pkg, concurrency, prompt_len, new_tokens, threads, rounds):
    """bench_engine's tokens/s at the same level, one figure per round."""
    import os, subprocess
    cmd = [bench_engine, pkg, "--prompt-len", str(prompt_len), "--new-tokens", str(new_tokens),
           "--levels", ",".join([str(concurrency)] * rounds), "--verify-hashes", "0"]
    if threads:
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(os.environ, OMP_WAIT_POLICY="passive")).stdout
    return [float(l.split()[1]) for l in out.splitlines() if l.split() and l.split()[0] == str(concurrency)]


def start_server(ignis, pkg, threads, api_key, extra=()):
    import os, subprocess
    cmd = [ignis, "serve", pkg, "--port", "0"] + (["--threads", str(threads)] if threads else []) + \
          (["--api-key", api_key] if api_key else []) + list(extra)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    line = p.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError(f"server did not start: {line!r} {p.stderr.read()}")
    return p, "http://" + line.split("http://")[1].split()[0]


def cpu_s(pid):
    """CPU seconds of process pid: all its threads, and its main thread (the server's HTTP loop)."""
    import os
    total = main = 0.0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        c = (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        total += c
        main += c if int(t) == pid else 0.0
    return total, main


def compare(a, url, model, pid):
    """Server rounds (openai client, and the lean client with --raw) alternating with bench_engine
    rounds on the same package while the server idles, so that a shared machine's load falls on
    both alike; prints each round, the medians, their ratio, and the load average."""
    import os
    med = lambda v: sorted(v)[len(v) // 2]
    srv, raw, eng = [], [], []
    for k in range(a.rounds):
        if a.client_nice:  # threads inherit the nice value of the thread that starts them
            os.setpriority(os.PRIO_PROCESS, 0, a.client_nice)
        c0 = cpu_s(pid)
        srv.append(server_round(url, model, a.api_key, a.compare, a.prompt_len, a.new_tokens, k))
        c1 = cpu_s(pid)
        if a.client_nice:  # back (root may lower it again), so bench_engine runs at the usual priority
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        if a.raw:
            raw.append(raw_round(url, model, a.api_key, a.compare, a.prompt_len, a.new_tokens, 1000 + k))
        eng += engine_rounds(a.bench_engine, a.pkg, a.compare, a.prompt_len, a.new_tokens, a.threads, 1)
        print(f"round {k + 1}: server {srv[-1]:.1f}" + (f", lean client {raw[-1]:.1f}" if raw else "") +
              f", bench_engine {eng[-1]:.1f} tokens/s; server CPU in its round {c1[0] - c0[0]:.2f} s, of which the HTTP "
              f"thread {c1[1] - c0[1]:.2f} s (load average {os.getloadavg()[0]:.2f})", flush=True)
    print(f"{a.compare} concurrent, prompt {a.prompt_len} tokens, {a.new_tokens} new, {a.rounds} alternating rounds: "
          f"server median {med(srv):.1f}" + (f" (client at nice {a.client_nice})" if a.client_nice else "") +
          (f", lean client {med(raw):.1f}" if raw else "") +
          f", bench_engine {med(eng):.1f}: server/engine {med(srv) / med(eng):.3f}" +
          (f", lean client/engine {med(raw) / med(eng):.3f}" if raw else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=None, help="a running server (default: start one on --pkg)")
    ap.add_argument("--pkg", default=None, help="start `ignis serve PKG` on a free port for the run")
    ap.add_argument("--ignis", default="build/ignis")
    ap.add_argument("--bench-engine", default="build/bench_engine")
    ap.add_argument("--threads", type=int, default=0, help="engine threads (server and bench_engine)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--disconnect", type=float, default=0.25)
    ap.add_argument("--waves", type=int, default=2, help="the load in this many waves, server RSS after each")
    ap.add_argument("--compare", type=int, default=16, metavar="C",
                    help="also measure throughput at C concurrent requests against bench_engine (needs --pkg; 0: off)")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client-nice", type=int, default=0, metavar="N",
                    help="--compare: the openai client's threads at nice N (root), so that on a small host they take "
                         "the cores the engine leaves, as a client on another machine would")
    ap.add_argument("--raw", action="store_true", help="--compare also with a lean raw-socket client (no openai parsing)")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--serve-args", default="", help="more `ignis serve` flags, e.g. '--prefix-cache-pages -1'")
    a = ap.parse_args()
    proc, url = None, a.url
    if not url:
        if not a.pkg:
            ap.error("give --url of a running server or --pkg to start one")
        proc, url = start_server(a.ignis, a.pkg, a.threads, a.api_key, a.serve_args.split())
    errors = []
    try:
        model = a.model
        if not model:
            import json
            req = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {a.api_key}"} if a.api_key else {})
            model = json.load(urllib.request.urlopen(req))["data"][0]["id"]
        if proc and a.compare:  # the engine is warm after one round
            server_round(url, model, a.api_key, a.compare, a.prompt_len, 4, 99)
        if not a.skip_load:
            # in waves: the server's memory after the last should be what it was after the first
            rss = [rss_mb(proc.pid) if proc else float("nan")]
            for w in range(a.waves):
                n = a.requests * (w + 1) // a.waves - a.requests * w // a.waves
                errs, rep = run_load(url, model, a.api_key, a.clients, n, a.max_tokens, a.disconnect, seed=w,
                                     first=a.requests * w // a.waves)
                errors += errs
                rss.append(rss_mb(proc.pid) if proc else float("nan"))
                print(f"wave {w + 1}: {rep['requests']} requests, {rep['clients']} clients, {rep['cancelled']} disconnected "
                      f"mid-stream (server counted {rep['server_cancelled']:.0f} cancelled so far)")
                print(f"  wall {rep['wall_s']:.1f} s, {rep['completion_tokens']} tokens generated for finished requests = "
                      f"{rep['tokens_per_s']:.1f} tokens/s; TTFT p50 {rep['ttft_p50'] * 1e3:.0f} ms, p99 {rep['ttft_p99'] * 1e3:.0f} ms")
            if proc:
                print("server RSS (MB) before the load, then after each wave: " + " ".join(f"{x:.0f}" for x in rss))
                m = metrics(url)
                print(f"KV pages: {m['ignis_kv_pages_cached']:.0f} cached by the prefix cache, {m['ignis_kv_pages_free']:.0f} free "
                      f"of {m['ignis_kv_pages_total']:.0f}")
            for e in errors[:20]:
                print("FAIL:", e)
        if proc and a.compare:
            compare(a, url, model, proc.pid)
    finally:
        if proc:
            proc.terminate()
            proc.wait(120)
    print("ok" if not errors else f"{len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
