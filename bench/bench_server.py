#!/usr/bin/env python3
"""Load on `ignis serve` through the official openai client: many concurrent streaming chat
clients, a random fraction of which disconnect mid-stream. Checks that every request not
cancelled ends with exactly one finish reason per choice, that no completion id is lost or
duplicated, that the server frees every KV page (/metrics), and reports p50/p99 time to first
token and the token throughput.

    bench/bench_server.py --url http://127.0.0.1:8000 [--clients 256] [--requests 2000]
                          [--max-tokens 32] [--disconnect 0.25] [--api-key KEY]

(tests/test_server.py runs a short version.) Timings on a shared machine are noisy."""
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


def run_load(url, model, api_key, clients, requests, max_tokens, disconnect_frac, seed=0):
    """Runs the load; returns (errors, report dict)."""
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
                one_request(client, model, i, max_tokens, plan[i], recs[i])
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default=None)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--disconnect", type=float, default=0.25)
    a = ap.parse_args()
    model = a.model
    if not model:
        import json
        req = urllib.request.Request(a.url + "/v1/models", headers={"Authorization": f"Bearer {a.api_key}"} if a.api_key else {})
        model = json.load(urllib.request.urlopen(req))["data"][0]["id"]
    errors, rep = run_load(a.url, model, a.api_key, a.clients, a.requests, a.max_tokens, a.disconnect)
    print(f"{rep['requests']} requests, {rep['clients']} clients, {rep['cancelled']} disconnected mid-stream "
          f"(server counted {rep['server_cancelled']:.0f} cancelled in all)")
    print(f"wall {rep['wall_s']:.1f} s, {rep['completion_tokens']} tokens generated for finished requests = "
          f"{rep['tokens_per_s']:.1f} tokens/s; TTFT p50 {rep['ttft_p50'] * 1e3:.0f} ms, p99 {rep['ttft_p99'] * 1e3:.0f} ms")
    for e in errors[:20]:
        print("FAIL:", e)
    print("ok" if not errors else f"{len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
