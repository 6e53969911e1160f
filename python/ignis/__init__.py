"""ignis — Python interface to the ignis runtime (libignis.so, include/ignis.h), through ctypes.

    import ignis
    eng = ignis.Engine("pkg/smollm2")                 # a package made by `ignis compile`
    print(eng.generate("The three primary colors are", max_new_tokens=30).text)
    req = eng.start([1, 2, 3], temperature=0.7, seed=1)
    for out in req:                                   # streams queue elements as they come
        print(out.tokens, out.text, out.status)

Every call is thread-safe; requests can be started, read and stopped from any thread. Errors
raise ignis.Error with the library's message (which names the bad value).
"""
import ctypes, ctypes.util, os, threading
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

__all__ = ["Engine", "Request", "Output", "Result", "Error", "QUEUED", "PREFILLING", "GENERATING", "FINISHED", "STOPPED", "ERROR"]

QUEUED, PREFILLING, GENERATING, FINISHED, STOPPED, ERROR = range(6)
_FINISH = {0: None, 1: "eos", 2: "stop", 3: "length", 4: "incomplete"}
_ERR_TIMEOUT, _ERR_CLOSED = 10, 12


class Error(RuntimeError):
    """An ignis call failed; str(e) is the library's message."""


def _find_lib():
    env = os.environ.get("IGNIS_LIB")
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [env] if env else []
    cands += [os.path.join(here, "libignis.so"), os.path.join(here, "..", "..", "build", "libignis.so"),
              ctypes.util.find_library("ignis")]
    for c in cands:
        if c and os.path.exists(c):
            return ctypes.CDLL(c)
    raise Error("libignis.so not found: build it (cmake --build build) or set IGNIS_LIB")


class _Err(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 1024)]


class _EngineConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("max_seqs", ctypes.c_int32), ("max_tokens_per_step", ctypes.c_int32), ("kv_bytes", ctypes.c_int64),
                ("kv_pages", ctypes.c_int32), ("n_threads", ctypes.c_int32), ("max_waiting", ctypes.c_int32),
                ("verify_hashes", ctypes.c_int), ("prefix_cache", ctypes.c_int),
                ("device_sampling", ctypes.c_int), ("tune", ctypes.c_char_p)]


class _GenConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("max_new_tokens", ctypes.c_int32), ("min_new_tokens", ctypes.c_int32), ("temperature", ctypes.c_float),
                ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float), ("min_p", ctypes.c_float),
                ("repetition_penalty", ctypes.c_float), ("presence_penalty", ctypes.c_float),
                ("frequency_penalty", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("stop_ids", ctypes.POINTER(ctypes.c_int32)), ("n_stop_ids", ctypes.c_int32),
                ("stop_strings", ctypes.POINTER(ctypes.c_char_p)), ("n_stop_strings", ctypes.c_int32),
                ("logit_bias_ids", ctypes.POINTER(ctypes.c_int32)), ("logit_bias_values", ctypes.POINTER(ctypes.c_float)),
                ("n_logit_bias", ctypes.c_int32), ("top_logprobs", ctypes.c_int32), ("ignore_eos", ctypes.c_int),
                ("logprobs", ctypes.c_int),
                ("constraint", ctypes.c_int32), ("constraint_text", ctypes.c_char_p)]  # IG_CONSTRAINT_*: 1 JSON Schema, 2 JSON, 3 regex, 4 GBNF


class _Stats(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int32), ("waiting", ctypes.c_int32), ("kv_pages_total", ctypes.c_int32),
                ("kv_pages_used", ctypes.c_int32), ("kv_pages_free", ctypes.c_int32), ("steps", ctypes.c_int64),
                ("tokens_prefilled", ctypes.c_int64), ("tokens_generated", ctypes.c_int64), ("preemptions", ctypes.c_int64),
                ("kv_pages_cached", ctypes.c_int32), ("prefix_hit_tokens", ctypes.c_int64)]


class _Logprob(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int32), ("logprob", ctypes.c_float)]


class _Output(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("finish", ctypes.c_int), ("n_tokens", ctypes.c_int32),
                ("tokens", ctypes.POINTER(ctypes.c_int32)), ("logprobs", ctypes.POINTER(ctypes.c_float)),
                ("n_top", ctypes.c_int32), ("top", ctypes.POINTER(_Logprob)), ("text", ctypes.c_char_p),
                ("text_len", ctypes.c_size_t), ("error", ctypes.c_char * 256)]


_lib = None
_lib_lock = threading.Lock()


def _defaults(struct, fill):
    """A config struct filled by the library's *_default function. The struct lives in a larger
    buffer, so a library whose struct is bigger cannot write past it; a struct_size other than
    this mirror's size means libignis.so was built from another ignis.h."""
    cfg = struct.from_buffer(bytearray(ctypes.sizeof(struct) + 1024))
    fill(ctypes.byref(cfg))
    if cfg.struct_size != ctypes.sizeof(struct):
        raise Error(f"{struct.__name__[1:]}: libignis.so's struct is {cfg.struct_size} bytes, this binding's is "
                    f"{ctypes.sizeof(struct)}: the Python package and the library come from different ignis versions")
    return cfg


def _L():
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = _find_lib()
            P = ctypes.POINTER
            lib.ig_engine_config_default.argtypes = [P(_EngineConfig)]
            lib.ig_engine_open.argtypes = [ctypes.c_char_p, P(_EngineConfig), P(ctypes.c_void_p), P(_Err)]
            lib.ig_engine_close.argtypes = [ctypes.c_void_p]
            lib.ig_engine_get_stats.argtypes = [ctypes.c_void_p, P(_Stats)]
            lib.ig_engine_vocab.argtypes = lib.ig_engine_max_context.argtypes = lib.ig_engine_has_tokenizer.argtypes = [ctypes.c_void_p]
            lib.ig_gen_config_default.argtypes = [P(_GenConfig)]
            lib.ig_request_start.argtypes = [ctypes.c_void_p, P(ctypes.c_int32), ctypes.c_int32, P(_GenConfig), P(ctypes.c_void_p), P(_Err)]
            lib.ig_request_start_text.argtypes = [ctypes.c_void_p, ctypes.c_char_p, P(_GenConfig), P(ctypes.c_void_p), P(_Err)]
            lib.ig_request_read.argtypes = [ctypes.c_void_p, ctypes.c_int, P(P(_Output)), P(_Err)]
            lib.ig_request_sync.argtypes = lib.ig_request_status.argtypes = [ctypes.c_void_p]
            lib.ig_request_stop.argtypes = lib.ig_request_release.argtypes = [ctypes.c_void_p]
            lib.ig_output_free.argtypes = [P(_Output)]
            lib.ig_version.restype = ctypes.c_char_p
            _lib = lib
        return _lib


@dataclass
class Output:
    """One queue element: what happened since the previous one."""
    status: int
    finish: Optional[str]
    tokens: List[int]
    logprobs: List[float]
    top_logprobs: List[List[tuple]]
    text: str
    error: str = ""


@dataclass
class Result:
    tokens: List[int] = field(default_factory=list)
    text: str = ""
    finish: Optional[str] = None
    status: int = QUEUED
    logprobs: List[float] = field(default_factory=list)


class Request:
    """A running request; iterate it to stream its outputs. Released when garbage-collected."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)

    def read(self, timeout: Optional[float] = None) -> Optional[Output]:
        """Next element; None at the end of the request (timeout: seconds, None = wait, 0 = poll).
        Raises TimeoutError when nothing came in time."""
        lib, out, err = _L(), ctypes.POINTER(_Output)(), _Err()
        ms = -1 if timeout is None else int(timeout * 1000)
        st = lib.ig_request_read(self._h, ms, ctypes.byref(out), ctypes.byref(err))
        if st == _ERR_CLOSED:
            return None
        if st == _ERR_TIMEOUT:
            raise TimeoutError(err.msg.decode())
        if st:
            raise Error(err.msg.decode())
        o = out.contents
        n, k = o.n_tokens, o.n_top
        res = Output(status=o.status, finish=_FINISH.get(o.finish), tokens=[o.tokens[i] for i in range(n)],
                     logprobs=[o.logprobs[i] for i in range(n)],
                     top_logprobs=[[(o.top[i * k + j].id, o.top[i * k + j].logprob) for j in range(k)] for i in range(n)],
                     text=ctypes.string_at(o.text, o.text_len).decode("utf-8", "replace") if o.text_len else "",
                     error=o.error.decode())
        lib.ig_output_free(out)
        return res

    def __iter__(self):
        while True:
            o = self.read()
            if o is None:
                return
            yield o

    def result(self) -> Result:
        """Reads the request to its end and returns everything it produced."""
        r = Result()
        for o in self:
            r.tokens += o.tokens
            r.logprobs += o.logprobs
            r.text += o.text
            r.status, r.finish = o.status, o.finish
            if o.status == ERROR:
                raise Error(o.error)
        return r

    def stop(self):
        _L().ig_request_stop(self._h)

    def status(self) -> int:
        return _L().ig_request_status(self._h)

    def release(self):
        if self._h:
            _L().ig_request_release(self._h)
            self._h = None

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


class Engine:
    """An engine serving one compiled package (continuous batching over a paged KV cache)."""

    def __init__(self, package: str, max_seqs: int = 0, max_tokens_per_step: int = 0, kv_pages: int = 0,
                 kv_bytes: int = 0, threads: int = 0, max_waiting: int = 0, verify_hashes: bool = True,
                 prefix_cache: bool = True, device_sampling: bool = True):
        lib = _L()
        cfg = _defaults(_EngineConfig, lib.ig_engine_config_default)
        for name, v in (("max_seqs", max_seqs), ("max_tokens_per_step", max_tokens_per_step), ("kv_pages", kv_pages),
                        ("kv_bytes", kv_bytes), ("n_threads", threads), ("max_waiting", max_waiting)):
            if v:
                setattr(cfg, name, v)
        cfg.verify_hashes = int(verify_hashes)
        cfg.prefix_cache = int(prefix_cache)
        cfg.device_sampling = int(device_sampling)
        h, err = ctypes.c_void_p(), _Err()
        if lib.ig_engine_open(package.encode(), ctypes.byref(cfg), ctypes.byref(h), ctypes.byref(err)):
            raise Error(err.msg.decode())
        self._h = h
        self.vocab = lib.ig_engine_vocab(h)
        self.max_context = lib.ig_engine_max_context(h)
        self.has_tokenizer = bool(lib.ig_engine_has_tokenizer(h))

    def start(self, prompt: Union[str, Sequence[int]], max_new_tokens: int = 128, min_new_tokens: int = 0,
              temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
              repetition_penalty: float = 1.0, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
              seed: int = 0, stop: Sequence[str] = (), stop_ids: Sequence[int] = (), logit_bias: Optional[dict] = None,
              top_logprobs: int = 0, logprobs: bool = False, ignore_eos: bool = False,
              constraint: int = 0, constraint_text: Optional[str] = None) -> Request:
        """Starts a request from text (the package's tokenizer) or token ids. Outputs carry each
        token's log-probability when logprobs=True (else NaN), and the top_logprobs best.
        constraint (1 JSON Schema, 2 JSON, 3 regex, 4 GBNF; constraint_text the schema / regex /
        grammar) restricts sampling to what the constraint allows."""
        lib = _L()
        g = _defaults(_GenConfig, lib.ig_gen_config_default)
        g.max_new_tokens, g.min_new_tokens, g.temperature, g.top_k = max_new_tokens, min_new_tokens, temperature, top_k
        g.top_p, g.min_p, g.repetition_penalty = top_p, min_p, repetition_penalty
        g.presence_penalty, g.frequency_penalty, g.seed = presence_penalty, frequency_penalty, seed
        g.top_logprobs, g.ignore_eos, g.logprobs = top_logprobs, int(ignore_eos), int(logprobs)
        g.constraint = constraint
        g.constraint_text = constraint_text.encode() if constraint_text is not None else None
        keep = []  # arrays must live until start returns (the library copies them)
        if stop:
            arr = (ctypes.c_char_p * len(stop))(*[s.encode() for s in stop])
            keep.append(arr)
            g.stop_strings, g.n_stop_strings = arr, len(stop)
        if stop_ids:
            arr = (ctypes.c_int32 * len(stop_ids))(*stop_ids)
            keep.append(arr)
            g.stop_ids, g.n_stop_ids = arr, len(stop_ids)
        if logit_bias:
            ids = (ctypes.c_int32 * len(logit_bias))(*logit_bias.keys())
            vals = (ctypes.c_float * len(logit_bias))(*logit_bias.values())
            keep += [ids, vals]
            g.logit_bias_ids, g.logit_bias_values, g.n_logit_bias = ids, vals, len(logit_bias)
        h, err = ctypes.c_void_p(), _Err()
        if isinstance(prompt, str):
            st = lib.ig_request_start_text(self._h, prompt.encode(), ctypes.byref(g), ctypes.byref(h), ctypes.byref(err))
        else:
            ids = (ctypes.c_int32 * len(prompt))(*prompt)
            st = lib.ig_request_start(self._h, ids, len(prompt), ctypes.byref(g), ctypes.byref(h), ctypes.byref(err))
        if st:
            raise Error(err.msg.decode())
        return Request(h.value)

    def generate(self, prompt: Union[str, Sequence[int]], **kw) -> Result:
        """Runs one request to its end."""
        r = self.start(prompt, **kw)
        try:
            return r.result()
        finally:
            r.release()

    def stats(self) -> dict:
        s = _Stats()
        _L().ig_engine_get_stats(self._h, ctypes.byref(s))
        return {k: getattr(s, k) for k, _ in _Stats._fields_}

    def close(self):
        if getattr(self, "_h", None):
            _L().ig_engine_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def version() -> str:
    return _L().ig_version().decode()
