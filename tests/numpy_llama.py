"""An independent float64 reference of a Llama / Mistral decoder in numpy, from the published
architecture (transformers' LlamaForCausalLM / MistralForCausalLM: RMSNorm, rotate-half RoPE with
the default frequencies, GQA, SwiGLU MLP, a sliding window as Mistral defines it: token i attends
keys j with i - window < j <= i), for test models whose transformers reference cannot be made here
(no torch): e.g. mistral-sharded with a window shorter than the context. It reads the checkpoint
with golden.read_safetensors and shares no code with ignis. `make_window_model` writes such a model
folder (the weights linked, config.json with the window, reference.safetensors / reference.json in
the test data's format: teacher-forced logits of prompt + greedy, greedy ids, top-2 margins).
Checked against transformers: with no window its logits match mistral-sharded's reference
(tests/test_sliding_window.py asserts it)."""
import json, os, struct
import numpy as np
import golden


def _weights(model_dir):
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    w = {}
    for f in files:
        w.update({k: v.astype(np.float64) for k, v in golden.read_safetensors(os.path.join(model_dir, f), f32=True).items()})
    return w


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def logits(model_dir, ids, window=0, w=None):
    """Float64 logits [len(ids), vocab] of the causal forward over ids (row i: the next-token logits
    after ids[:i+1]); window > 0: Mistral's sliding window. w: the weights (_weights), if read."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    w = w or _weights(model_dir)
    D, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or D // H
    eps = cfg["rms_norm_eps"]
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta", 10000.0)
    T = len(ids)
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # [T, heads, hd], rotate half
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos[:, None, :] + np.concatenate([-x2, x1], -1) * sin[:, None, :]

    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = (j <= i) & ((i - j < window) if window > 0 else True)
    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd))
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
        k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        s = np.where(allowed[None], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = np.einsum("hts,shd->thd", s / s.sum(-1, keepdims=True), v).reshape(T, H * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return _rms(x, w["model.norm.weight"], eps) @ head.T


def _write_safetensors(path, tensors):
    hdr, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        hdr[name] = {"dtype": {np.int32: "I32", np.float32: "F32"}[a.dtype.type], "shape": list(a.shape),
                     "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_window_model(src, dst, window, n_greedy=24):
    """dst: src's weights (linked) with sliding_window = window, and its numpy reference: the greedy
    continuation of src's prompt, teacher-forced logits over prompt + greedy, top-2 margins."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):  # weights, tokenizer, generation config: linked
        if f != "config.json" and not f.startswith("reference.") and not os.path.exists(os.path.join(dst, f)):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["sliding_window"] = window
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)
    prompt = json.load(open(os.path.join(src, "reference.json")))["prompt"]
    seq, margins, w = list(prompt), [], _weights(dst)
    for _ in range(n_greedy):
        row = logits(dst, seq, window, w)[-1]
        top2 = np.sort(row)[-2:]
        margins.append(float(top2[1] - top2[0]))
        seq.append(int(np.argmax(row)))
    ids = seq  # as the test data: teacher-forced logits over prompt + greedy
    _write_safetensors(os.path.join(dst, "reference.safetensors"),
                       {"input_ids": np.asarray(ids, np.int32), "logits": logits(dst, ids, window, w).astype(np.float32)})
    json.dump({"prompt": prompt, "greedy": seq[len(prompt):], "greedy_top2_margin": margins},
              open(os.path.join(dst, "reference.json"), "w"))
    return dst
