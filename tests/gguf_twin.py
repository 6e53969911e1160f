"""Writes the GGUF twin of a tiny HF test model with the `gguf` package (llama.cpp's writer), in
llama.cpp's conventions: general.architecture and its metadata keys, blk.N.* tensor names, llama's
q/k row permutation (Mistral/Mixtral, filed as `llama`), Gemma's norms stored as 1 + w, experts as
3-D ffn_{gate,up,down}_exps tensors, Phi-3's fused attn_qkv and Phi-3 / GLM-4's fused ffn_up.
Weights are written as F32 (the HF values exactly), or, with `blocks`, chosen matrices as ggml
blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 by the gguf package's own quantizer; Q4_K and Q5_K, which it
does not quantize, by kquant_blocks here (Q6_K by q6k_blocks): round to nearest per sub-block of 32, packed by the ggml
layout), plus a stand-in BPE vocabulary so the package has a tokenizer. Used by
tests/test_gguf_twins.py, tests/test_quant.py and tests/test_quant_keep_k.py."""
import json, os, struct
import numpy as np

import golden

ARCH = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Phi3ForCausalLM": "phi3", "Glm4ForCausalLM": "glm4", "Gemma3ForCausalLM": "gemma3",
        "MixtralForCausalLM": "llama", "Qwen2MoeForCausalLM": "qwen2moe", "Qwen3MoeForCausalLM": "qwen3moe"}


def read_hf(path):
    """All tensors of a .safetensors file as float32 numpy arrays (F32, F16, BF16)."""
    return golden.read_safetensors_f32(path)


def permute(w, n_head):  # llama.cpp's convert_hf_to_gguf LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _f16(x):
    return np.asarray(x, np.float32).astype(np.float16)


def kquant_blocks(x, bt):
    """Rows of x [R][C] (C % 256 == 0) as ggml Q4_K (bt "Q4_K") or Q5_K blocks, uint8 [R][C / 256 * size]:
    {f16 d, dmin; u8 scales[12] (eight 6-bit scale and min codes); (Q5_K: u8 qh[32]) u8 qs[128]},
    x = d sc q - dmin m per sub-block of 32; element 64c + l is qs[32c + l]'s low nibble, 64c + 32 + l
    its high nibble; Q5_K's fifth bit of those is bit 2c / 2c + 1 of qh[l]."""
    L = 15 if bt == "Q4_K" else 31
    R, C = x.shape
    b = x.reshape(R, C // 256, 8, 32).astype(np.float64)
    lo = np.minimum(b.min(-1), 0)                                    # [R, nb, 8]
    sc_f = (b.max(-1) - lo) / L
    d = _f16(sc_f.max(-1) / 63).astype(np.float64)                    # [R, nb]
    dm = _f16((-lo).max(-1) / 63).astype(np.float64)
    sc = np.clip(np.rint(np.divide(sc_f, d[..., None], out=np.zeros_like(sc_f), where=d[..., None] > 0)), 0, 63).astype(np.int64)
    mn = np.clip(np.rint(np.divide(-lo, dm[..., None], out=np.zeros_like(lo), where=dm[..., None] > 0)), 0, 63).astype(np.int64)
    step, off = d[..., None] * sc, dm[..., None] * mn
    q = np.clip(np.rint(np.divide(b + off[..., None], step[..., None], out=np.zeros_like(b), where=step[..., None] > 0)),
                0, L).astype(np.int64)                                # [R, nb, 8, 32]
    packed = np.zeros((R, C // 256, 12), np.int64)
    for j in range(4):
        packed[..., j] = sc[..., j] | (sc[..., j + 4] >> 4) << 6
        packed[..., j + 4] = mn[..., j] | (mn[..., j + 4] >> 4) << 6
        packed[..., j + 8] = (sc[..., j + 4] & 15) | (mn[..., j + 4] & 15) << 4
    qq = q.reshape(R, C // 256, 4, 2, 32)                              # chunk c, half, l
    qs = ((qq[:, :, :, 0] & 15) | (qq[:, :, :, 1] & 15) << 4).reshape(R, C // 256, 128)
    parts = [_f16(d).view(np.uint8).reshape(R, -1, 2), _f16(dm).view(np.uint8).reshape(R, -1, 2), packed.astype(np.uint8)]
    if L == 31:
        qh = np.zeros((R, C // 256, 32), np.int64)
        for c in range(4):
            qh |= (qq[:, :, c, 0] >> 4) << (2 * c)
            qh |= (qq[:, :, c, 1] >> 4) << (2 * c + 1)
        parts.append(qh.astype(np.uint8))
    parts.append(qs.astype(np.uint8))
    return np.concatenate(parts, axis=-1).reshape(R, -1)


def q6k_blocks(x):
    """Rows of x [R][C] (C % 256 == 0) as ggml Q6_K blocks, uint8 [R][C / 256 * 210]:
    {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, x = d sc (q - 32) per sub-block of 16, the scale's
    sign that of the sub-block's largest |x| flipped (as llama.cpp's quantizer does); in half n of a
    block element 32 i + l is nibble i >> 1 of ql[64 n + l + 32 (i & 1)] with high bits 2i, 2i + 1 of
    qh[32 n + l]."""
    R, C = x.shape
    b = x.reshape(R, C // 256, 16, 16).astype(np.float64)
    big = np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1)[..., 0]  # [R, nb, 16]
    scale = big / -32.0
    d = _f16(np.abs(scale).max(-1) / 127).astype(np.float64)
    sc = np.clip(np.rint(np.divide(scale, d[..., None], out=np.zeros_like(scale), where=d[..., None] > 0)), -128, 127)
    step = d[..., None] * sc
    q = np.clip(np.rint(np.divide(b, step[..., None], out=np.zeros_like(b), where=step[..., None] != 0)) + 32, 0, 63)
    q = q.astype(np.int64).reshape(R, C // 256, 2, 4, 32)                  # half n, quarter i, l
    ql = np.concatenate([(q[:, :, :, 0] & 15) | (q[:, :, :, 2] & 15) << 4,
                         (q[:, :, :, 1] & 15) | (q[:, :, :, 3] & 15) << 4], axis=-1)  # [R, nb, 2, 64]
    qh = (q[:, :, :, 0] >> 4) | (q[:, :, :, 1] >> 4) << 2 | (q[:, :, :, 2] >> 4) << 4 | (q[:, :, :, 3] >> 4) << 6
    parts = [ql.reshape(R, -1, 128).astype(np.uint8), qh.reshape(R, -1, 64).astype(np.uint8),
             sc.astype(np.int8).view(np.uint8).reshape(R, -1, 16), _f16(d).view(np.uint8).reshape(R, -1, 2)]
    return np.concatenate(parts, axis=-1).reshape(R, -1)


def write_twin(model_dir, out_path, blocks=None):
    """blocks: None, or a function of a GGUF tensor name giving the ggml type name ("Q4_0", ...)
    a matrix is stored in (None: F32)."""
    import gguf
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    hf_arch = cfg["architectures"][0]
    arch = ARCH[hf_arch]
    t = read_hf(os.path.join(model_dir, "model.safetensors"))
    L, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    H, KV = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or D // H
    w = gguf.GGUFWriter(out_path, arch)
    w.add_block_count(L)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(D)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rp = cfg.get("rope_parameters") or {}
    if hf_arch == "Gemma3ForCausalLM":
        w.add_rope_freq_base(rp["full_attention"]["rope_theta"])
        w.add_float32(f"{arch}.rope.freq_base_swa", rp["sliding_attention"]["rope_theta"])
        w.add_sliding_window(cfg["sliding_window"])
        w.add_array(f"{arch}.attention.sliding_window_pattern", [lt == "sliding_attention" for lt in cfg["layer_types"]])
        w.add_float32(f"{arch}.attention.scale", cfg["query_pre_attn_scalar"] ** -0.5)
        if cfg.get("final_logit_softcapping"):
            w.add_float32(f"{arch}.final_logit_softcapping", cfg["final_logit_softcapping"])
    else:
        w.add_rope_freq_base(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    prf = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    w.add_rope_dimension_count(int(hd * prf))
    E = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if E:
        w.add_expert_count(E)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        if "moe_intermediate_size" in cfg:
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if cfg.get("shared_expert_intermediate_size"):
            w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    w.add_file_type(0)
    V = cfg["vocab_size"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"<t{i}>" for i in range(V)])
    w.add_token_types([1] * V)
    w.add_token_merges([])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])

    def put(name, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        bt = blocks(name) if blocks and x.ndim in (2, 3) else None
        if bt and x.shape[-1] % (256 if bt.endswith("_K") else 32):
            bt = None  # rows of partial blocks (an expert's 48 columns): F32
        if bt:
            qt = getattr(gguf.GGMLQuantizationType, bt)
            data = (kquant_blocks(x, bt) if bt in ("Q4_K", "Q5_K") else q6k_blocks(x) if bt == "Q6_K"
                    else gguf.quants.quantize(x, qt))
            w.add_tensor(name, data, raw_dtype=qt)
        else:
            w.add_tensor(name, x)

    gemma = hf_arch == "Gemma3ForCausalLM"
    norm = (lambda x: x + 1.0) if gemma else (lambda x: x)
    put("token_embd.weight", t["model.embed_tokens.weight"])
    put("output_norm.weight", norm(t["model.norm.weight"]))
    if "lm_head.weight" in t and not cfg.get("tie_word_embeddings", gemma):
        put("output.weight", t["lm_head.weight"])
    for l in range(L):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        put(b + "attn_norm.weight", norm(t[p + "input_layernorm.weight"]))
        if hf_arch == "Phi3ForCausalLM":
            put(b + "attn_qkv.weight", t[p + "self_attn.qkv_proj.weight"])
        else:
            q, k = t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"]
            if arch == "llama":
                q, k = permute(q, H), permute(k, KV)
            put(b + "attn_q.weight", q)
            put(b + "attn_k.weight", k)
            put(b + "attn_v.weight", t[p + "self_attn.v_proj.weight"])
            for x in "qkv":
                if p + f"self_attn.{x}_proj.bias" in t:
                    put(b + f"attn_{x}.bias", t[p + f"self_attn.{x}_proj.bias"])
        if p + "self_attn.q_norm.weight" in t:
            put(b + "attn_q_norm.weight", norm(t[p + "self_attn.q_norm.weight"]))
            put(b + "attn_k_norm.weight", norm(t[p + "self_attn.k_norm.weight"]))
        put(b + "attn_output.weight", t[p + "self_attn.o_proj.weight"])
        if gemma:
            put(b + "post_attention_norm.weight", norm(t[p + "post_attention_layernorm.weight"]))
            put(b + "ffn_norm.weight", norm(t[p + "pre_feedforward_layernorm.weight"]))
            put(b + "post_ffw_norm.weight", norm(t[p + "post_feedforward_layernorm.weight"]))
        else:
            put(b + "ffn_norm.weight", t[p + "post_attention_layernorm.weight"])
        if hf_arch == "Glm4ForCausalLM":
            put(b + "post_attention_norm.weight", t[p + "post_self_attn_layernorm.weight"])
            put(b + "post_ffw_norm.weight", t[p + "post_mlp_layernorm.weight"])
        if E:
            m = p + ("block_sparse_moe." if hf_arch == "MixtralForCausalLM" else "mlp.")
            names = ("w1", "w3", "w2") if hf_arch == "MixtralForCausalLM" else ("gate_proj", "up_proj", "down_proj")
            put(b + "ffn_gate_inp.weight", t[m + "gate.weight"])
            for gg, hf in zip(("gate", "up", "down"), names):
                put(b + f"ffn_{gg}_exps.weight", np.stack([t[m + f"experts.{e}.{hf}.weight"] for e in range(E)]))
            if m + "shared_expert.gate_proj.weight" in t:
                for x in ("gate", "up", "down"):
                    put(b + f"ffn_{x}_shexp.weight", t[m + f"shared_expert.{x}_proj.weight"])
                put(b + "ffn_gate_inp_shexp.weight", t[m + "shared_expert_gate.weight"].reshape(-1))
        elif p + "mlp.gate_up_proj.weight" in t:
            put(b + "ffn_up.weight", t[p + "mlp.gate_up_proj.weight"])
            put(b + "ffn_down.weight", t[p + "mlp.down_proj.weight"])
        else:
            for x in ("gate", "up", "down"):
                put(b + f"ffn_{x}.weight", t[p + f"mlp.{x}_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
