#!/usr/bin/env python3
"""A small program to copy from: the Python API (pip install . first, or run from a checkout
with build/ built: python/ignis finds build/libignis.so).

    python3 samples/generate.py pkg/smollm2 "Tell me a joke"
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import ignis


def main():
    pkg, prompt = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "The three primary colors are"
    with ignis.LLM(pkg) as llm:
        # streaming, sampled
        for chunk in llm.stream(prompt, ignis.SamplingParams(max_tokens=48, temperature=0.7, top_p=0.9, seed=1)):
            print(chunk.text, end="", flush=True)
        print()
        # two prompts batched, greedy, with a stop string
        for out in llm.generate([prompt, "Water is"], ignis.SamplingParams(max_tokens=48, stop=["\n"])):
            print(repr(out.text), out.finish_reason)
        print(llm.chat([{"role": "user", "content": prompt}], ignis.SamplingParams(max_tokens=48))[0].text)
        print(llm.stats())


if __name__ == "__main__":
    main()
