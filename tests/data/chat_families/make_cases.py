#!/usr/bin/env python3
"""Writes cases.json: the real chat templates of the model families ignis added in issue 21 (the
*.jinja files here, sources in README.md) rendered by Python jinja2 configured exactly as
transformers' apply_chat_template configures it (make_chat_cases.make_env: ImmutableSandboxedEnvironment
with trim_blocks / lstrip_blocks, loopcontrols, raise_exception / strftime_now, json.dumps-based
tojson), over conversations each template takes: system / user / assistant, several turns, tools and
tool calls where the template supports them, and the errors a template raises.
tests/test_chat_template.c renders the same cases with ignis' Jinja and compares byte for byte.

Run: python3 tests/data/chat_families/make_cases.py  (needs jinja2 >= 3.1; scripts/install-deps.sh)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import jinja2  # noqa: E402
from make_chat_cases import ENV, TemplateError  # noqa: E402

SYS = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
CHAT = [
    {"role": "user", "content": "Hello! What's the capital of France?"},
    {"role": "assistant", "content": "   The capital of France is Paris.   "},
    {"role": "user", "content": "And of Japan — 日本? Say « merci » too."},
]
CHAT_DONE = CHAT + [{"role": "assistant", "content": "Tokyo (東京). Merci !"}]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
]
# OpenAI-style tool calls: ids of 9 alphanumerics (Mistral's templates check that), arguments as a
# mapping (the form transformers' documentation passes)
TOOL_TURNS = [
    {"role": "user", "content": "What is the weather in Zürich, and what is 2 + 40?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call00001", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}},
        {"id": "call00002", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 40}}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    {"role": "tool", "tool_call_id": "call00002", "name": "add", "content": "42"},
    {"role": "assistant", "content": "It is 21.5 °C and clear in Zürich; 2 + 40 = 42."},
    {"role": "user", "content": "Thanks!"},
]
# Qwen3: an earlier turn with its reasoning in the content, and the last one still thinking
THINK = [
    {"role": "user", "content": "Is 17 prime?"},
    {"role": "assistant", "content": "<think>\nIt has no divisor but 1 and 17.\n</think>\n\nYes, 17 is prime."},
    {"role": "user", "content": "And 21?"},
    {"role": "assistant", "content": "<think>\n21 = 3 * 7.\n</think>\n\nNo: 21 = 3 × 7."},
]
# Qwen3-Coder renders each argument and any extra schema key (enum, items, default) as XML
CODER_TOOLS = TOOLS + [
    {"type": "function", "function": {
        "name": "write_file", "description": "  Writes a file  ", "strict": True,
        "parameters": {"type": "object", "required": ["path"], "additionalProperties": False, "properties": {
            "path": {"type": "string"}, "lines": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "default": "w", "enum": ["w", "a"]}}}}},
]
CODER_TURNS = [
    {"role": "user", "content": "Write hello.txt, then add 2 and 40."},
    {"role": "assistant", "content": "  Sure.  ", "tool_calls": [
        {"id": "call00003", "type": "function", "function": {"name": "write_file", "arguments": {
            "path": "hello.txt", "lines": ["héllo", "wörld"], "mode": "w"}}},
        {"id": "call00002", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 40}}}]},
    {"role": "tool", "tool_call_id": "call00003", "content": "ok"},
    {"role": "tool", "tool_call_id": "call00002", "content": "42"},
    {"role": "assistant", "content": "Done: the sum is 42."},
    {"role": "user", "content": "Thanks"},
]
NOT_ALTERNATING = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
PARTS = [  # content as a list of typed parts (Gemma 3 reads text parts, skips images' text)
    {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is in the picture?  "}]},
]
GLM_TOOLS = [  # GLM-4-9B-Chat reads tools from a system message's `tools` key
    {"role": "system", "content": "", "tools": TOOLS},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "metadata": "get_weather", "content": "{\"city\": \"Zürich\"}"},
    {"role": "observation", "content": "{\"temp\": 21.5}"},
]
PHI4_TOOLS = [  # Phi-4-mini: the tools as a JSON string on the system message
    {"role": "system", "content": "You are a helpful assistant with some tools.",
     "tools": json.dumps([t["function"] for t in TOOLS], ensure_ascii=False)},
    {"role": "user", "content": "What is 2 + 40?"},
    {"role": "assistant", "content": "[{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 40}}]"},
]

B, E = "<s>", "</s>"
# (name, template file, bos, eos, messages, add_generation_prompt, tools)
CASES = [
    ("qwen3_chat", "qwen3", None, "<|im_end|>", [SYS] + CHAT, True, None),
    ("qwen3_no_system_done", "qwen3", None, "<|im_end|>", CHAT_DONE, False, None),
    ("qwen3_tools", "qwen3", None, "<|im_end|>", [SYS] + TOOL_TURNS, True, TOOLS),
    ("qwen3_tools_no_system", "qwen3", None, "<|im_end|>", TOOL_TURNS[:4], True, TOOLS),
    ("qwen3_thinking", "qwen3", None, "<|im_end|>", THINK, False, None),
    ("qwen3_thinking_next", "qwen3", None, "<|im_end|>", THINK + [{"role": "user", "content": "And 23?"}], True, None),
    ("qwen2.5_chat", "qwen2.5", None, "<|im_end|>", CHAT, True, None),
    ("qwen2.5_system", "qwen2.5", None, "<|im_end|>", [SYS] + CHAT_DONE, False, None),
    ("qwen2.5_tools", "qwen2.5", None, "<|im_end|>", [SYS] + TOOL_TURNS, True, TOOLS),
    ("mistral_v1_chat", "mistral-v1", B, E, [SYS] + CHAT, True, None),
    ("mistral_v1_done", "mistral-v1", B, E, CHAT_DONE, False, None),
    ("mistral_v1_alternation", "mistral-v1", B, E, NOT_ALTERNATING, True, None),
    ("mistral_v1_tool_role", "mistral-v1", B, E, [TOOL_TURNS[0], TOOL_TURNS[2]], True, None),
    ("mistral_nemo_chat", "mistral-nemo", B, E, [SYS] + CHAT_DONE + [{"role": "user", "content": "Bye"}], True, None),
    ("mistral_nemo_tools", "mistral-nemo", B, E, [SYS] + TOOL_TURNS, True, TOOLS),
    ("mistral_nemo_alternation", "mistral-nemo", B, E, NOT_ALTERNATING, True, None),
    ("mistral_nemo_bad_call_id", "mistral-nemo", B, E,
     [TOOL_TURNS[0], {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "add", "arguments": {"a": 1}}}]}],
     True, TOOLS),
    ("mistral_small_3.2_tools", "mistral-small-3.2", B, E, [SYS] + TOOL_TURNS, True, TOOLS),
    ("mistral_small_3.2_parts", "mistral-small-3.2", B, E,
     [PARTS[0], PARTS[1], {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}], False, None),
    ("mistral_small_3.2_bad_block", "mistral-small-3.2", B, E,
     [SYS, {"role": "user", "content": [{"type": "audio"}]}], True, None),
    ("qwen3_coder_tools", "qwen3-coder", None, "<|im_end|>", [SYS] + CODER_TURNS, True, CODER_TOOLS),
    ("qwen3_coder_tools_default_system", "qwen3-coder", None, "<|im_end|>", CODER_TURNS[:3], True, CODER_TOOLS),
    ("qwen3_coder_chat", "qwen3-coder", None, "<|im_end|>", CHAT, True, None),
    ("gemma3_chat", "gemma3", "<bos>", "<eos>", [SYS] + CHAT, True, None),
    ("gemma3_no_system_done", "gemma3", "<bos>", "<eos>", CHAT_DONE, False, None),
    ("gemma3_parts", "gemma3", "<bos>", "<eos>", PARTS, True, None),
    ("gemma3_alternation", "gemma3", "<bos>", "<eos>", NOT_ALTERNATING, True, None),
    ("glm4_chat", "glm4-chat", None, "<|endoftext|>", [SYS] + CHAT_DONE, True, None),
    ("glm4_tools", "glm4-chat", None, "<|endoftext|>", GLM_TOOLS, True, None),
    ("phi3.5_chat", "phi3.5-mini", B, "<|endoftext|>", [SYS] + CHAT, True, None),
    ("phi3.5_done", "phi3.5-mini", B, "<|endoftext|>", CHAT_DONE, False, None),
    ("phi3_mini_chat", "phi3-mini", B, "<|endoftext|>", [SYS] + CHAT_DONE, False, None),
    ("phi4_mini_chat", "phi4-mini", "<|endoftext|>", "<|endoftext|>", [SYS] + CHAT, True, None),
    ("phi4_mini_tools", "phi4-mini", "<|endoftext|>", "<|endoftext|>", PHI4_TOOLS, False, None),
]


def main():
    out = []
    for name, tfile, bos, eos, msgs, agp, tools in CASES:
        src = open(os.path.join(HERE, tfile + ".jinja"), encoding="utf-8").read()
        case = {"name": name, "template": tfile + ".jinja", "messages": msgs, "add_generation_prompt": agp}
        if bos is not None:
            case["bos_token"] = bos
        case["eos_token"] = eos
        if tools is not None:
            case["tools"] = tools
        kw = {"bos_token": bos} if bos is not None else {}  # no BOS: the variable is undefined
        try:
            case["rendered"] = ENV.from_string(src).render(messages=msgs, tools=tools, documents=None,
                                                           add_generation_prompt=agp, eos_token=eos, **kw)
        except TemplateError as e:
            case["error"] = str(e)
        out.append(case)
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "jinja2 " + jinja2.__version__ + ", configured as transformers' apply_chat_template "
                   "(tests/data/chat_families/make_cases.py)", "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} cases, {sum('error' in c for c in out)} raising")


if __name__ == "__main__":
    main()
