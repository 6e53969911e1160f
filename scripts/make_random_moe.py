#!/usr/bin/env python3
"""Writes a random-weight HuggingFace Qwen3-MoE checkpoint (config.json + model.safetensors, bf16)
for benchmarks: the layer shapes of Qwen3-30B-A3B (hidden 2048, 32 heads / 4 KV heads x 128,
128 experts of 768, 8 per token, q/k norms) with fewer layers and a smaller vocabulary.
Only numpy is needed.  Usage: make_random_moe.py OUT_DIR [--layers N] [--vocab V]"""
import json, os, struct, sys
import numpy as np

def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out, args = sys.argv[1], sys.argv[2:]
    L = int(args[args.index("--layers") + 1]) if "--layers" in args else 2
    V = int(args[args.index("--vocab") + 1]) if "--vocab" in args else 32768
    H, E, I, nh, nkv, d = 2048, 128, 768, 32, 4, 128
    cfg = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=H, intermediate_size=6144,
               moe_intermediate_size=I, num_experts=E, num_experts_per_tok=8, norm_topk_prob=True,
               decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=L, num_attention_heads=nh,
               num_key_value_heads=nkv, head_dim=d, vocab_size=V, max_position_embeddings=40960, rms_norm_eps=1e-6,
               rope_theta=1000000.0, tie_word_embeddings=False, torch_dtype="bfloat16", bos_token_id=1,
               eos_token_id=2, hidden_act="silu")
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "self_attn.q_proj.weight": (nh * d, H), p + "self_attn.k_proj.weight": (nkv * d, H),
                       p + "self_attn.v_proj.weight": (nkv * d, H), p + "self_attn.o_proj.weight": (H, nh * d),
                       p + "self_attn.q_norm.weight": (d,), p + "self_attn.k_norm.weight": (d,),
                       p + "mlp.gate.weight": (E, H)})
        for e in range(E):
            q = p + f"mlp.experts.{e}."
            shapes.update({q + "gate_proj.weight": (I, H), q + "up_proj.weight": (I, H), q + "down_proj.weight": (H, I)})
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
    n_all = sum(int(np.prod(s)) for s in shapes.values())
    n_act = n_all - L * (E - 8) * 3 * I * H - V * H  # one embedding row, 8 of the experts
    print(f"wrote {out}: {n_all / 1e9:.3f} B parameters, {n_act / 1e9:.3f} B read per decoded token")
    return 0

if __name__ == "__main__":
    sys.exit(main())
