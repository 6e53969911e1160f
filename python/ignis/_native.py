"""ignis._native — the ctypes layer over libignis.so (include/ignis.h): the library's location,
mirrors of its structs, the argument types of every function, and the low-level Engine / Request
classes (one C call each). ignis.LLM (llm.py) is the interface to use; this module is what it
stands on.

The library is found without any environment variable: next to this module (an installed
package: pip install .), else in the source tree's build/ (python/ignis run from a checkout).
IGNIS_LIB, when set, names another libignis.so (for testing one build against another).
"""
import ctypes, ctypes.util, enum, os, shutil, threading
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union


class Status(enum.IntEnum):
    """ig_status (include/ig_status.h): why a call failed."""
    OK = 0
    IO = 1
    FORMAT = 2
    UNSUPPORTED = 3
    INVALID = 4
    NOMEM = 5
    MISMATCH = 6
    CPU = 7
    BUILD = 8
    INTERNAL = 9
    TIMEOUT = 10
    BUSY = 11
    CLOSED = 12


class RequestStatus(enum.IntEnum):
    """ig_req_status: where a request stands."""
    QUEUED = 0
    PREFILLING = 1
    GENERATING = 2
    FINISHED = 3  #: ended by itself: see FinishReason
    STOPPED = 4   #: Request.stop(), a cancelled stream, or the engine's close
    ERROR = 5


class FinishReason(str, enum.Enum):
    """Why a FINISHED request ended (ig_finish_reason); compares equal to its string."""
    EOS = "eos"        #: the model's end-of-sequence token
    STOP = "stop"      #: a stop token id or stop string
    LENGTH = "length"  #: max_tokens, or the model's context ran out
    KV_CACHE = "kv_cache"  #: the KV cache could not hold the sequence, even alone in it
    INCOMPLETE = "incomplete"  #: max_tokens or the context ran out inside a constraint's structure

    def __str__(self):
        return self.value


QUEUED, PREFILLING, GENERATING, FINISHED, STOPPED, ERROR = tuple(RequestStatus)
_FINISH = {0: None, 1: FinishReason.EOS, 2: FinishReason.STOP, 3: FinishReason.LENGTH, 4: FinishReason.KV_CACHE,
           5: FinishReason.INCOMPLETE}
_ERR_TIMEOUT, _ERR_CLOSED = Status.TIMEOUT, Status.CLOSED
_HERE = os.path.dirname(os.path.abspath(__file__))


class Error(RuntimeError):
    """An ignis call failed; str(e) is the library's message (it names the bad value), .status
    the ig_status code."""

    def __init__(self, msg: str, status: "Status" = Status.INTERNAL):
        super().__init__(msg)
        self.status = Status(status) if status in Status._value2member_map_ else status


def _check(st, err):
    if st:
        raise Error(err.msg.decode("utf-8", "replace"), st)


def _find_lib():
    env = os.environ.get("IGNIS_LIB")
    cands = [env] if env else []
    cands += [os.path.join(_HERE, "libignis.so"), os.path.join(_HERE, "..", "..", "build", "libignis.so"),
              ctypes.util.find_library("ignis")]
    for c in cands:
        if c and os.path.exists(c):
            return ctypes.CDLL(c)
    raise Error("libignis.so not found: install the package (pip install .) or build it (cmake --build build)",
                Status.IO)


def _is_native(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def cli_path() -> str:
    """The `ignis` command-line tool that came with this package (ignis/bin/ignis), else the
    source tree's build/ignis, else a compiled `ignis` on PATH (not the console script that
    leads back here)."""
    for c in (os.path.join(_HERE, "bin", "ignis"), os.path.join(_HERE, "..", "..", "build", "ignis")):
        if os.access(c, os.X_OK) and _is_native(c):
            return os.path.abspath(c)
    found = shutil.which("ignis")
    if found and _is_native(found):
        return found
    raise Error("the ignis CLI was not found: install the package (pip install .) or build it", Status.IO)


class _Err(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 1024)]


class _EngineConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("max_seqs", ctypes.c_int32), ("max_tokens_per_step", ctypes.c_int32), ("kv_bytes", ctypes.c_int64),
                ("kv_pages", ctypes.c_int32), ("kv_fraction", ctypes.c_float), ("n_threads", ctypes.c_int32), ("max_waiting", ctypes.c_int32),
                ("verify_hashes", ctypes.c_int), ("prefix_cache", ctypes.c_int),
                ("device_sampling", ctypes.c_int), ("tune", ctypes.c_char_p), ("kv_host_bytes", ctypes.c_int64),
                ("prefix_cache_pages", ctypes.c_int32), ("device", ctypes.c_char_p)]


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
                ("kv_pages_cached", ctypes.c_int32), ("prefix_hit_tokens", ctypes.c_int64),
                ("prefix_host_hit_tokens", ctypes.c_int64), ("kv_host_pages_total", ctypes.c_int32),
                ("kv_host_pages_used", ctypes.c_int32), ("kv_bytes_to_host", ctypes.c_int64),
                ("kv_bytes_from_host", ctypes.c_int64)]


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
            lib.ig_engine_target.argtypes = [ctypes.c_void_p, P(ctypes.c_int32)]
            lib.ig_engine_target.restype = ctypes.c_char_p
            lib.ig_gen_config_default.argtypes = [P(_GenConfig)]
            lib.ig_request_start.argtypes = [ctypes.c_void_p, P(ctypes.c_int32), ctypes.c_int32, P(_GenConfig), P(ctypes.c_void_p), P(_Err)]
            lib.ig_request_start_text.argtypes = [ctypes.c_void_p, ctypes.c_char_p, P(_GenConfig), P(ctypes.c_void_p), P(_Err)]
            lib.ig_request_read.argtypes = [ctypes.c_void_p, ctypes.c_int, P(P(_Output)), P(_Err)]
            lib.ig_request_sync.argtypes = lib.ig_request_status.argtypes = [ctypes.c_void_p]
            lib.ig_request_stop.argtypes = lib.ig_request_release.argtypes = [ctypes.c_void_p]
            lib.ig_output_free.argtypes = [P(_Output)]
            lib.ig_version.restype = ctypes.c_char_p
            lib.ig_status_name.restype = ctypes.c_char_p
            lib.ig_engine_logits.argtypes = [ctypes.c_void_p, P(ctypes.c_int32), ctypes.c_int32, ctypes.c_void_p, P(_Err)]
            lib.ig_tokenizer_open.argtypes = [ctypes.c_char_p, P(ctypes.c_void_p), P(_Err)]
            lib.ig_tokenizer_close.argtypes = [ctypes.c_void_p]
            for f in (lib.ig_tokenizer_vocab, lib.ig_tokenizer_bos, lib.ig_tokenizer_eos):
                f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_int32
            lib.ig_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                        P(P(ctypes.c_int32)), P(ctypes.c_int32), P(_Err)]
            lib.ig_detokenize.argtypes = [ctypes.c_void_p, P(ctypes.c_int32), ctypes.c_int32, ctypes.c_int,
                                          P(ctypes.c_void_p), P(ctypes.c_size_t), P(_Err)]
            lib.ig_chat_template_apply.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                                   P(ctypes.c_void_p), P(ctypes.c_size_t), P(_Err)]
            lib.ig_free.argtypes = [ctypes.c_void_p]
            lib.ig_tp_follow.argtypes = [ctypes.c_char_p, P(ctypes.c_int), P(_Err)]
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
    """A running request; iterate it to stream its outputs. Released when garbage-collected.
    Reads block in the library (the GIL is released meanwhile), never poll."""

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
        _check(st, err)
        o = out.contents
        n, k = o.n_tokens, o.n_top
        res = Output(status=RequestStatus(o.status), finish=_FINISH.get(o.finish), tokens=[o.tokens[i] for i in range(n)],
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
                raise Error(o.error, Status.INVALID)
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
                 prefix_cache: bool = True, device_sampling: bool = True, tune: Optional[str] = None,
                 kv_fraction: float = 0.0, kv_host_bytes: Optional[int] = None,
                 prefix_cache_pages: int = 0, device: Optional[str] = None):
        """device: a fat package's target to load ("cpu", "cuda" or a target name; None: the best
        this machine runs). The one loaded, and for a fat package why, is .target."""
        lib = _L()
        cfg = _defaults(_EngineConfig, lib.ig_engine_config_default)
        for name, v in (("max_seqs", max_seqs), ("max_tokens_per_step", max_tokens_per_step), ("kv_pages", kv_pages),
                        ("kv_bytes", kv_bytes), ("n_threads", threads), ("max_waiting", max_waiting),
                        ("kv_fraction", kv_fraction), ("prefix_cache_pages", prefix_cache_pages)):
            if v:
                setattr(cfg, name, v)
        cfg.verify_hashes = int(verify_hashes)
        cfg.prefix_cache = int(prefix_cache)
        cfg.device_sampling = int(device_sampling)
        cfg.tune = tune.encode() if tune else None
        cfg.device = device.encode() if device else None
        if kv_host_bytes is not None:  # None: the engine's default (-1); 0: no host tier
            cfg.kv_host_bytes = kv_host_bytes
        h, err = ctypes.c_void_p(), _Err()
        _check(lib.ig_engine_open(os.fsencode(package), ctypes.byref(cfg), ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h
        self.vocab = lib.ig_engine_vocab(h)
        self.max_context = lib.ig_engine_max_context(h)
        self.has_tokenizer = bool(lib.ig_engine_has_tokenizer(h))
        n_targets = ctypes.c_int32()
        self.target = lib.ig_engine_target(h, ctypes.byref(n_targets)).decode()
        self.n_targets = n_targets.value

    def start(self, prompt: Union[str, Sequence[int]], max_new_tokens: int = 128, min_new_tokens: int = 0,
              temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
              repetition_penalty: float = 1.0, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
              seed: int = 0, stop: Sequence[str] = (), stop_ids: Sequence[int] = (), logit_bias: Optional[dict] = None,
              top_logprobs: int = 0, logprobs: bool = False, ignore_eos: bool = False,
              constraint: int = 0, constraint_text: Optional[str] = None) -> Request:
        """Starts a request from text (the package's tokenizer) or token ids. Outputs carry each
        token's log-probability when logprobs=True (else NaN), and the top_logprobs best."""
        lib = _L()
        g = _defaults(_GenConfig, lib.ig_gen_config_default)
        g.max_new_tokens, g.min_new_tokens, g.temperature, g.top_k = max_new_tokens, min_new_tokens, temperature, top_k
        g.top_p, g.min_p, g.repetition_penalty = top_p, min_p, repetition_penalty
        g.presence_penalty, g.frequency_penalty, g.seed = presence_penalty, frequency_penalty, seed
        g.top_logprobs, g.ignore_eos, g.logprobs = top_logprobs, int(ignore_eos), int(logprobs)
        g.constraint = constraint  # 1 JSON Schema, 2 JSON, 3 regex, 4 GBNF (constraint_text: the schema / regex / grammar)
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
        self._open()
        if isinstance(prompt, str):
            st = lib.ig_request_start_text(self._h, prompt.encode(), ctypes.byref(g), ctypes.byref(h), ctypes.byref(err))
        else:
            ids = (ctypes.c_int32 * len(prompt))(*prompt)
            st = lib.ig_request_start(self._h, ids, len(prompt), ctypes.byref(g), ctypes.byref(h), ctypes.byref(err))
        _check(st, err)
        return Request(h.value)

    def generate(self, prompt: Union[str, Sequence[int]], **kw) -> Result:
        """Runs one request to its end."""
        r = self.start(prompt, **kw)
        try:
            return r.result()
        finally:
            r.release()

    def _open(self):
        if not getattr(self, "_h", None):
            raise Error("the engine is closed (close() was called)", Status.CLOSED)
        return self._h

    def logits_into(self, ids: Sequence[int], out) -> None:
        """Teacher-forced logits of ids into out (a writable ctypes buffer of len(ids) * vocab
        float32): ig_engine_logits."""
        arr = (ctypes.c_int32 * len(ids))(*ids)
        err = _Err()
        _check(_L().ig_engine_logits(self._open(), arr, len(ids), ctypes.cast(out, ctypes.c_void_p), ctypes.byref(err)), err)

    def stats(self) -> dict:
        s = _Stats()
        _L().ig_engine_get_stats(self._open(), ctypes.byref(s))
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


class Tokenizer:
    """A package's (or a HuggingFace tokenizer folder's) tokenizer and chat template
    (ig_tokenizer): encodes and decodes as HF tokenizers does, renders conversations as
    transformers' apply_chat_template. Thread-safe."""

    def __init__(self, path: str):
        lib, h, err = _L(), ctypes.c_void_p(), _Err()
        _check(lib.ig_tokenizer_open(os.fsencode(path), ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h
        self.vocab_size: int = lib.ig_tokenizer_vocab(h)
        bos, eos = lib.ig_tokenizer_bos(h), lib.ig_tokenizer_eos(h)
        self.bos_token_id: Optional[int] = bos if bos >= 0 else None
        self.eos_token_id: Optional[int] = eos if eos >= 0 else None

    def encode(self, text: str, add_special_tokens: bool = True, parse_special: bool = True) -> List[int]:
        """Token ids of text; add_special_tokens runs the post-processor (e.g. BOS), as HF;
        parse_special turns special tokens written in the text into their ids."""
        b = text.encode("utf-8", "surrogatepass")
        ids, n, err = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_int32(), _Err()
        _check(_L().ig_tokenize(self._h, b, len(b), int(add_special_tokens), int(parse_special), ctypes.byref(ids),
                                ctypes.byref(n), ctypes.byref(err)), err)
        try:
            return ids[:n.value]
        finally:
            _L().ig_free(ids)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of token ids (ids out of range are skipped, as HF)."""
        arr = (ctypes.c_int32 * len(token_ids))(*token_ids)
        text, n, err = ctypes.c_void_p(), ctypes.c_size_t(), _Err()
        _check(_L().ig_detokenize(self._h, arr, len(token_ids), int(skip_special_tokens), ctypes.byref(text),
                                  ctypes.byref(n), ctypes.byref(err)), err)
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            _L().ig_free(text)

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True,
                            tools: Optional[Sequence[dict]] = None) -> str:
        """The prompt the chat template renders for messages ([{"role", "content"}, ...])."""
        import json
        text, n, err = ctypes.c_void_p(), ctypes.c_size_t(), _Err()
        m = json.dumps(list(messages), ensure_ascii=False).encode()
        t = json.dumps(list(tools), ensure_ascii=False).encode() if tools is not None else None
        _check(_L().ig_chat_template_apply(self._h, m, t, int(add_generation_prompt), ctypes.byref(text),
                                           ctypes.byref(n), ctypes.byref(err)), err)
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            _L().ig_free(text)

    def close(self) -> None:
        if getattr(self, "_h", None):
            _L().ig_tokenizer_close(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def tp_follow(package: str) -> bool:
    """Tensor-parallel packages (compiled with --tp N, run as `mpirun -np N python script.py`): call
    first in every process. Rank 0, and any package that is not sharded: returns False at once; go on
    and open the Engine / LLM. Other ranks: follow rank 0's steps on their shard until rank 0 closes
    its engine, then return True: the process is done (exit). Raises Error when this rank cannot
    follow; exit with a non-zero status then, which makes mpirun end the job."""
    followed, err = ctypes.c_int(0), _Err()
    _check(_L().ig_tp_follow(os.fsencode(package), ctypes.byref(followed), ctypes.byref(err)), err)
    return bool(followed.value)


def version() -> str:
    return _L().ig_version().decode()
