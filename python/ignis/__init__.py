"""ignis — compile a language model ahead of time into a package and serve it from Python.

    import ignis, numpy as np
    ignis.compile("SmolLM2.gguf", "pkg/smollm2")         # or the `ignis compile` CLI
    with ignis.LLM("pkg/smollm2") as llm:
        outs = llm.generate(["The sky is", "Water is"], ignis.SamplingParams(temperature=0, max_tokens=16))
        print(outs[0].text, outs[0].token_ids, outs[0].finish_reason)
        print(llm.chat([{"role": "user", "content": "Tell me a joke"}])[0].text)
        logits = np.from_dlpack(llm.logits(llm.tokenize("Hello")))

LLM (llm.py) is the interface: generate / chat / stream / astream / agenerate, tokenize /
detokenize / apply_chat_template, logits (DLPack). Engine and Request (_native.py) are the
one-call-per-function layer over libignis.so (include/ignis.h) beneath it. Errors raise
ignis.Error with the library's message, which names the bad value, and its .status.
"""
import os
import subprocess
from typing import Dict, Optional, Sequence, Union

from ._native import (ERROR, FINISHED, GENERATING, PREFILLING, QUEUED, STOPPED, Engine, Error, FinishReason, Output,
                      Request, RequestStatus, Result, Status, Tokenizer, cli_path, tp_follow, version)
from ._native import _L, _defaults, _EngineConfig, _GenConfig, _Err  # noqa: F401  (tests reach the C layer)
from .dlpack import Array
from .llm import LLM, RequestOutput, SamplingParams, StreamChunk

__all__ = ["LLM", "SamplingParams", "RequestOutput", "StreamChunk", "Tokenizer", "Array", "compile", "Error", "Status",
           "RequestStatus", "FinishReason", "Engine", "Request", "Output", "Result", "version", "cli_path", "tp_follow",
           "QUEUED", "PREFILLING", "GENERATING", "FINISHED", "STOPPED", "ERROR"]


def compile(model: Union[str, os.PathLike], output: Union[str, os.PathLike], *, target: Optional[str] = None,
            dtype: Optional[str] = None, page_size: Optional[int] = None, tune: Union[None, str, Dict[str, object]] = None,
            cc: Optional[str] = None, quant: Optional[str] = None, quant_group: Optional[int] = None,
            quant_skip: Union[None, str, Sequence[str]] = None, kv_cache: Optional[str] = None,
            max_context: Optional[int] = None, quiet: bool = True) -> str:
    """Compiles a HuggingFace folder, a GGUF file or an .igraph into a package directory (the
    `ignis compile` of this installation). target: "cpu" (the best this machine runs; the
    default), "cpu:amx", "cpu:avx512bf16", "cpu:avx512", "cpu:avx2", "cpu:generic" or "cuda:sm_80,sm_90";
    dtype: "f32", "bf16" or "f16" (CUDA), default as the CLI's (follows the checkpoint);
    quant: "none", "a16w8", "a16w4", "a8w8", "fp8" (CUDA) or "keep" (default as the CLI's: keep for a quantized
    GGUF or a GPTQ / AWQ checkpoint on CPU targets), with quant_group (32, 64, 128) and quant_skip
    (matrix names, a list or a comma-separated string); kv_cache: "f32", "bf16", "f16", "int8",
    "uint4" or "fp8"; max_context: the package's context in tokens.
    Returns the package path; raises Error with the compiler's message on failure."""
    args = [cli_path(), "compile", os.fspath(model), "-o", os.fspath(output)]
    if target:
        args += ["--target", target]
    if dtype:
        args += ["--dtype", dtype]
    if page_size:
        args += ["--page-size", str(page_size)]
    if quant:
        args += ["--quant", quant]
    if quant_group:
        args += ["--quant-group", str(quant_group)]
    if quant_skip:
        args += ["--quant-skip", quant_skip if isinstance(quant_skip, str) else ",".join(quant_skip)]
    if kv_cache:
        args += ["--kv-cache", kv_cache]
    if max_context:
        args += ["--max-context", str(max_context)]
    if isinstance(tune, dict):
        tune = ",".join(f"{k}={v}" for k, v in tune.items())
    if tune:
        args += ["--tune", tune]
    if cc:
        args += ["--cc", cc]
    p = subprocess.run(args, capture_output=quiet, text=True)
    if p.returncode:
        msg = (p.stderr or "").strip().splitlines()
        raise Error(msg[-1] if msg else f"ignis compile failed with status {p.returncode}", Status.BUILD)
    return os.fspath(output)
