"""ignis.llm — the high-level Python API, in the spirit of vllm.LLM and llama-cpp-python.

    import ignis
    llm = ignis.LLM("pkg/smollm2")                      # a package made by ignis compile
    outs = llm.generate(["The sky is", "Water is"], ignis.SamplingParams(temperature=0, max_tokens=16))
    print(outs[0].text, outs[0].finish_reason)
    print(llm.chat([{"role": "user", "content": "Hi!"}])[0].text)
    for chunk in llm.stream("Once upon a time"):      # text as it is generated
        print(chunk.text, end="")
    async for chunk in llm.astream("Once upon a time"):  # the same under asyncio
        ...
    logits = numpy.from_dlpack(llm.logits([1, 2, 3]))   # [3, vocab] float32, no copy

Every prompt of a generate() call is a request of its own in the engine, which batches them
(continuous batching); prompts may be text (the package's tokenizer; BOS as its post-processor
says) or lists of token ids.
"""
import asyncio
import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import AsyncIterator, Dict, Iterator, List, Optional, Sequence, Union

from . import _native
from ._native import Engine, Error, FinishReason, Request, RequestStatus, Status, Tokenizer
from .dlpack import Array

__all__ = ["LLM", "SamplingParams", "RequestOutput", "StreamChunk"]

Prompt = Union[str, Sequence[int]]
Message = Dict[str, object]


@dataclass
class SamplingParams:
    """How one request samples and when it stops. The defaults are the C API's
    (ig_gen_config_default) except seed: None picks a random one per request, as the CLI does
    without --seed (docs/SAMPLING.md has the table).

    temperature 0 is greedy; top_k 0, top_p 1, min_p 0, repetition_penalty 1 and the two
    penalties 0 are off. logprobs=None gives no log-probabilities; logprobs=k gives each
    token's log-probability and the k most likely tokens at each step (k <= 20).

    Guided decoding (at most one): json_schema (a JSON Schema, as a dict or its JSON text),
    json_object=True (any JSON object), regex (the whole output matches it) or grammar (GBNF,
    start rule root). An unsupported schema keyword raises Error naming it and its JSON path."""
    max_tokens: int = 128
    min_tokens: int = 0
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: Optional[int] = None
    stop: Sequence[str] = ()
    stop_token_ids: Sequence[int] = ()
    logit_bias: Optional[Dict[int, float]] = None
    logprobs: Optional[int] = None
    ignore_eos: bool = False
    json_schema: Union[None, str, Dict[str, object]] = None
    json_object: bool = False
    regex: Optional[str] = None
    grammar: Optional[str] = None

    def _constraint(self) -> tuple:
        """(IG_CONSTRAINT_* kind, text) of the guided-decoding fields."""
        given = [k for k, v in (("json_schema", self.json_schema), ("json_object", self.json_object),
                                ("regex", self.regex), ("grammar", self.grammar)) if v]
        if len(given) > 1:
            raise ValueError(f"SamplingParams: at most one of {', '.join(given)}")
        if self.json_schema:
            s = self.json_schema
            return 1, s if isinstance(s, str) else json.dumps(s)
        if self.json_object:
            return 2, None
        if self.regex:
            return 3, self.regex
        if self.grammar:
            return 4, self.grammar
        return 0, None

    def _start_kwargs(self) -> dict:
        """The keyword arguments of Engine.start (a random seed drawn when seed is None)."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        return dict(max_new_tokens=self.max_tokens, min_new_tokens=self.min_tokens, temperature=self.temperature,
                    top_k=self.top_k, top_p=self.top_p, min_p=self.min_p,
                    repetition_penalty=self.repetition_penalty, presence_penalty=self.presence_penalty,
                    frequency_penalty=self.frequency_penalty,
                    seed=secrets.randbits(64) if self.seed is None else self.seed, stop=stop,
                    stop_ids=list(self.stop_token_ids), logit_bias=self.logit_bias,
                    top_logprobs=self.logprobs or 0, logprobs=self.logprobs is not None, ignore_eos=self.ignore_eos,
                    constraint=self._constraint()[0], constraint_text=self._constraint()[1])


@dataclass
class StreamChunk:
    """What one request produced since the previous chunk (a stream's element)."""
    text: str
    token_ids: List[int]
    status: RequestStatus
    finish_reason: Optional[FinishReason] = None
    logprobs: Optional[List[float]] = None
    top_logprobs: Optional[List[Dict[int, float]]] = None

    @property
    def finished(self) -> bool:
        return self.status >= RequestStatus.FINISHED


@dataclass
class RequestOutput:
    """A finished request: the prompt, the generated text and ids, why it ended.

    finish_reason is None when the request did not finish by itself (status STOPPED);
    logprobs / top_logprobs are None unless SamplingParams.logprobs was set."""
    prompt: Optional[str]
    prompt_token_ids: Optional[List[int]]
    text: str = ""
    token_ids: List[int] = field(default_factory=list)
    finish_reason: Optional[FinishReason] = None
    status: RequestStatus = RequestStatus.QUEUED
    logprobs: Optional[List[float]] = None
    top_logprobs: Optional[List[Dict[int, float]]] = None

    def _add(self, c: StreamChunk) -> None:
        self.text += c.text
        self.token_ids += c.token_ids
        self.status, self.finish_reason = c.status, c.finish_reason
        if c.logprobs is not None:
            self.logprobs = (self.logprobs or []) + c.logprobs
            self.top_logprobs = (self.top_logprobs or []) + (c.top_logprobs or [])


def _chunk(o: "_native.Output", want_logprobs: bool) -> StreamChunk:
    if o.status == RequestStatus.ERROR:
        raise Error(o.error, Status.INVALID)
    c = StreamChunk(text=o.text, token_ids=o.tokens, status=o.status, finish_reason=o.finish)
    if want_logprobs:
        c.logprobs = o.logprobs
        c.top_logprobs = [dict(t) for t in o.top_logprobs]
    return c


class _AsyncReader:
    """Hands one request's queue elements to an asyncio loop: a thread blocks in the library's
    read (no polling) and passes each element with call_soon_threadsafe."""

    def __init__(self, req: Request, want_logprobs: bool, loop: asyncio.AbstractEventLoop):
        self.req, self.want, self.loop = req, want_logprobs, loop
        self.queue: "asyncio.Queue" = asyncio.Queue()
        self.thread = threading.Thread(target=self._run, name="ignis-reader", daemon=True)
        self.thread.start()

    def _put(self, item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody listens any more
            self.req.stop()

    def _run(self) -> None:
        try:
            for o in self.req:
                self._put(o)
            self._put(None)
        except BaseException as e:  # handed to the consumer
            self._put(e)

    async def __aiter__(self) -> AsyncIterator[StreamChunk]:
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield _chunk(item, self.want)
        finally:  # ended early (break, cancel, error): stop the request; the thread then ends
            self.req.stop()


class LLM:
    """An engine serving one compiled package, with its tokenizer and chat template.

    Engine options (all optional; None keeps the C API's default, see ig_engine_config):
    max_seqs, max_tokens_per_step, kv_pages, kv_bytes, kv_fraction, n_threads, max_waiting, verify_hashes,
    prefix_cache, device_sampling, tune ("key=value,..." or a dict; docs/TUNING.md), device (a fat
    package's target: "cpu", "cuda" or a target name; None: the best this machine runs — .target
    says which was loaded and why).
    Use as a context manager, or call close(). Methods may be called from many threads."""

    def __init__(self, package: str, *, max_seqs: Optional[int] = None, max_tokens_per_step: Optional[int] = None,
                 kv_pages: Optional[int] = None, kv_bytes: Optional[int] = None, n_threads: Optional[int] = None,
                 max_waiting: Optional[int] = None, verify_hashes: bool = True, prefix_cache: bool = True,
                 device_sampling: bool = True, tune: Union[None, str, Dict[str, object]] = None,
                 kv_fraction: Optional[float] = None, device: Optional[str] = None):
        if isinstance(tune, dict):
            tune = ",".join(f"{k}={v}" for k, v in tune.items())
        self.package = str(package)
        self._engine = Engine(self.package, max_seqs=max_seqs or 0, max_tokens_per_step=max_tokens_per_step or 0,
                              kv_pages=kv_pages or 0, kv_bytes=kv_bytes or 0, threads=n_threads or 0,
                              max_waiting=max_waiting or 0, verify_hashes=verify_hashes, prefix_cache=prefix_cache,
                              device_sampling=device_sampling, tune=tune, kv_fraction=kv_fraction or 0.0,
                              device=device)
        self.target = self._engine.target
        self.tokenizer: Optional[Tokenizer] = Tokenizer(self.package) if self._engine.has_tokenizer else None

    # ---- facts
    @property
    def vocab_size(self) -> int:
        """Rows of the model's logits."""
        return self._engine.vocab

    @property
    def max_context(self) -> int:
        """Tokens a sequence can hold (prompt + generated)."""
        return self._engine.max_context

    def stats(self) -> dict:
        """The engine's counters (ig_engine_stats)."""
        return self._engine.stats()

    # ---- text
    def _tok(self) -> Tokenizer:
        if self.tokenizer is None:
            raise Error(f"{self.package} has no tokenizer: pass token ids", Status.INVALID)
        return self.tokenizer

    def tokenize(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of text, as the engine tokenizes a text prompt (add_special_tokens: BOS etc.)."""
        return self._tok().encode(text, add_special_tokens)

    def detokenize(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._tok().decode(token_ids, skip_special_tokens)

    def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True,
                            tokenize: bool = False, tools: Optional[Sequence[dict]] = None) -> Union[str, List[int]]:
        """The prompt the package's chat template renders for messages (or its ids with
        tokenize=True: special tokens parsed, none added, as transformers does)."""
        text = self._tok().apply_chat_template(messages, add_generation_prompt, tools)
        return self._tok().encode(text, add_special_tokens=False) if tokenize else text

    # ---- generation
    def _start(self, prompt: Prompt, params: Optional[SamplingParams]) -> Request:
        p = params or SamplingParams()
        return self._engine.start(prompt if isinstance(prompt, str) else list(prompt), **p._start_kwargs())

    @staticmethod
    def _prompts(prompts: Union[Prompt, Sequence[Prompt]]) -> List[Prompt]:
        if isinstance(prompts, str):
            return [prompts]
        prompts = list(prompts)
        if prompts and all(isinstance(x, int) for x in prompts):
            return [prompts]  # one prompt of token ids
        return prompts

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]],
                 params: Union[None, SamplingParams, Sequence[SamplingParams]] = None) -> List[RequestOutput]:
        """Runs every prompt to its end, all at once through the engine; one RequestOutput per
        prompt, in order. prompts: a string, a list of token ids, or a list of either; params:
        one SamplingParams for all, or one per prompt."""
        ps = self._prompts(prompts)
        pars = list(params) if isinstance(params, (list, tuple)) else [params] * len(ps)
        if len(pars) != len(ps):
            raise ValueError(f"{len(pars)} SamplingParams for {len(ps)} prompts")
        reqs = []
        try:
            for p, sp in zip(ps, pars):
                reqs.append(self._start(p, sp))
            outs = []
            for p, sp, r in zip(ps, pars, reqs):
                want = sp is not None and sp.logprobs is not None
                out = RequestOutput(prompt=p if isinstance(p, str) else None,
                                    prompt_token_ids=None if isinstance(p, str) else list(p))
                for o in r:
                    out._add(_chunk(o, want))
                outs.append(out)
            return outs
        finally:
            for r in reqs:
                r.release()

    def stream(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> Iterator[StreamChunk]:
        """The request's chunks as they come (the reads block in the library; leaving the loop
        early stops the request)."""
        r = self._start(prompt, params)
        want = params is not None and params.logprobs is not None
        try:
            for o in r:
                yield _chunk(o, want)
        finally:
            r.release()

    async def astream(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> AsyncIterator[StreamChunk]:
        """`async for` over the request's chunks; many streams run concurrently on one loop
        (one reader thread each, waiting in the library, never polling)."""
        r = self._start(prompt, params)
        reader = _AsyncReader(r, params is not None and params.logprobs is not None, asyncio.get_running_loop())
        try:
            async for c in reader:
                yield c
        finally:
            r.stop()
            await asyncio.get_running_loop().run_in_executor(None, reader.thread.join)
            r.release()

    async def agenerate(self, prompt: Prompt, params: Optional[SamplingParams] = None) -> RequestOutput:
        """The whole RequestOutput of one prompt, awaited."""
        out = RequestOutput(prompt=prompt if isinstance(prompt, str) else None,
                            prompt_token_ids=None if isinstance(prompt, str) else list(prompt))
        async for c in self.astream(prompt, params):
            out._add(c)
        return out

    def chat(self, messages: Union[Sequence[Message], Sequence[Sequence[Message]]],
             params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
             tools: Optional[Sequence[dict]] = None) -> List[RequestOutput]:
        """Replies to a conversation (a list of {"role", "content"} messages) or to each of a
        list of conversations, through the package's chat template; one RequestOutput each
        (its prompt is the rendered template)."""
        convs = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        texts = [self.apply_chat_template(m, True, tools=tools) for m in convs]
        ids = [self._tok().encode(t, add_special_tokens=False) for t in texts]
        outs = self.generate(ids, params)
        for o, t in zip(outs, texts):
            o.prompt = t
        return outs

    # ---- logits
    def logits(self, token_ids: Sequence[int]) -> Array:
        """Teacher-forced logits: row i is the next-token distribution after token_ids[:i+1]
        (float32 [len, vocab]). The library writes them straight into the returned array, which
        numpy.from_dlpack / torch.from_dlpack view without copying."""
        ids = list(token_ids)
        out = Array((len(ids), self.vocab_size))
        self._engine.logits_into(ids, out._buf)
        return out

    # ---- life
    def close(self) -> None:
        """Stops every request and frees the model (handles still held stay readable)."""
        if getattr(self, "tokenizer", None) is not None:
            self.tokenizer.close()
        if getattr(self, "_engine", None) is not None:
            self._engine.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
