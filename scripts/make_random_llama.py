#!/usr/bin/env python3
"""Writes a random-weight HuggingFace Llama checkpoint (config.json + model.safetensors, bf16) of
a given shape, for benchmarks. Default: the shape of Llama-3.2-1B (hidden 2048, 16 layers, 32
heads, 8 KV heads, intermediate 8192, vocab 128256, tied embeddings, llama3 rope scaling).
--tiny: 2 layers of hidden 256 and a 4096-token vocabulary; --small: the same layers with Llama 3's
vocabulary and EOS ids (a package for the Llama 3 tokenizer that compiles and loads in seconds).
Only numpy is needed.  Usage: make_random_llama.py OUT_DIR [--tiny | --small]"""
import json, os, struct, sys
import numpy as np

def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    tiny, small = "--tiny" in sys.argv, "--small" in sys.argv
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
               intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
               rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, torch_dtype="bfloat16",
               rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position_embeddings=8192),
               bos_token_id=128000, eos_token_id=[128001, 128008, 128009], hidden_act="silu")
    if tiny:
        cfg.update(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=4096, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2)
    if small:
        cfg.update(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=2048)
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv, d, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "self_attn.q_proj.weight": (nh * d, H), p + "self_attn.k_proj.weight": (nkv * d, H),
                       p + "self_attn.v_proj.weight": (nkv * d, H), p + "self_attn.o_proj.weight": (H, nh * d),
                       p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I)})
    os.makedirs(out, exist_ok=True)
    header, off = {}, 0
    for k, s in shapes.items():
        n = int(np.prod(s)) * 2
        header[k] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for k, s in shapes.items():
            if len(s) == 1:
                w = (1.0 + 0.05 * rng.standard_normal(s, dtype=np.float32))
            else:
                w = rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)
            f.write((w.view(np.uint32) >> 16).astype(np.uint16).tobytes())  # truncate to bf16
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    print(f"wrote {out}: {sum(int(np.prod(s)) for s in shapes.values()) / 1e9:.3f} B parameters")
    return 0

if __name__ == "__main__":
    sys.exit(main())
