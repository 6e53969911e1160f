#!/usr/bin/env python3
"""A small program to copy from: the Python interface over libignis.so.

    PYTHONPATH=python IGNIS_LIB=build/libignis.so python3 samples/generate.py pkg/smollm2 "Tell me a joke"
"""
import sys
import ignis

def main():
    pkg, prompt = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "The three primary colors are"
    with ignis.Engine(pkg) as eng:
        # streaming, sampled
        req = eng.start(prompt, max_new_tokens=48, temperature=0.7, top_p=0.9, seed=1)
        for out in req:
            print(out.text, end="", flush=True)
        print()
        # a whole result, greedy, with a stop string
        res = eng.generate(prompt, max_new_tokens=48, stop=["\n"])
        print(repr(res.text), res.finish)
        print(eng.stats())

if __name__ == "__main__":
    main()
