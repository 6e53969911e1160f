#!/usr/bin/env python3
"""More tiny reference models, beyond ../shared/testdata, for variants real checkpoints have:
MQA and MHA, linear rope scaling, attention and MLP biases on Llama, Qwen3 with attention bias,
untied Qwen2 in float16, head_dim 64/80/128 (128: with a sliding window too), an intermediate size that is
not a multiple of 16, and bf16 models whose shapes (dims multiples of 128) take the CUDA persistent decode kernel (one with
its down projection's rows over two ring slots). Uses ../shared/tools/make_reference.py's make_model (the
same recipe as the shared test data: perturbed random weights, float64 transformers forward,
teacher-forced logits and greedy continuations). Needs torch + transformers (CPU is enough).
Writes tests/data/models/<name>/ (all of them, or only the names given as arguments)."""
import importlib.util, json, os, shutil, sys
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM, MistralConfig, MistralForCausalLM)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("mr", os.path.join(ROOT, "..", "shared", "tools", "make_reference.py"))
mr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mr)

def recipe_model(name, cls, cfg, seed):
    """make_reference.make_model for a bf16 fixture whose weights come from a recipe (weights.json)
    that the tests expand with numpy instead of a stored model.safetensors."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import golden
    from safetensors import safe_open
    probe = os.path.join(mr.WORK, "probe-" + name)
    cls(cfg).to(torch.bfloat16).save_pretrained(probe)  # the stored tensor names and shapes
    with safe_open(os.path.join(probe, "model.safetensors"), "pt") as f:
        keys = sorted(f.keys())
        shapes = {k: list(f.get_slice(k).get_shape()) for k in keys}
    init = lambda k: "norm" if "norm" in k else "bias" if k.endswith("bias") else "weight"
    recipe = {"seed": seed, "tensors": [{"name": k, "shape": shapes[k], "init": init(k)} for k in keys]}
    gen = os.path.join(mr.WORK, "gen-" + name)
    os.makedirs(gen)
    json.dump(recipe, open(os.path.join(gen, "weights.json"), "w"), indent=1)
    golden.ensure_weights(gen)
    with safe_open(os.path.join(gen, "model.safetensors"), "pt") as f:
        values = {k: f.get_tensor(k) for k in keys}
    def load(model, seed_):  # make_model's perturb step: the recipe's values instead
        if set(k for k, _ in model.named_parameters()) != set(keys):
            # the stored names are not the module's (transformers' fused experts): load the recipe's
            # checkpoint through from_pretrained, which maps them
            shutil.copy(os.path.join(probe, "config.json"), gen)
            values_ = dict(cls.from_pretrained(gen, dtype=torch.float32).named_parameters())
        else:
            values_ = values
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(values_[k].to(p.dtype))
    perturb, mr.perturb = mr.perturb, load
    if "Moe" in cls.__name__ or "Mixtral" in cls.__name__:  # the float64 reference on the per-expert loop
        spec2 = importlib.util.spec_from_file_location("mr2", os.path.join(ROOT, "..", "shared", "tools",
                                                                           "make_reference_arch2.py"))
        mr2 = importlib.util.module_from_spec(spec2)
        sys.modules["make_reference"] = mr  # arch2 imports make_reference: this one, not a second copy
        spec2.loader.exec_module(mr2)
        cls = mr2.Eager(cls)
    try:
        mr.make_model("extra", name, cls, cfg, torch.bfloat16, seed)
    finally:
        mr.perturb = perturb
    d = os.path.join(mr.WORK, "extra", name)
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:  # what the reference saw
        assert all(torch.equal(f.get_tensor(k), values[k]) for k in keys), "saved weights differ from the recipe"
    os.remove(os.path.join(d, "model.safetensors"))
    shutil.copy(os.path.join(gen, "weights.json"), d)

def main(only):
    out = os.path.join(ROOT, "tests", "data", "models")
    def make(name, *args):
        if not only or name in only:
            mr.make_model("extra", name, *args)
    make("llama-mqa-bias-linear", LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=160,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, vocab_size=384, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=10000.0, attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
        rope_scaling={"rope_type": "linear", "factor": 2.0}), torch.float32, 21)
    make("llama-mha-hd80", LlamaForCausalLM, LlamaConfig(hidden_size=160, intermediate_size=208,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, vocab_size=400, max_position_embeddings=256,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True), torch.bfloat16, 22)
    make("qwen3-bias-hd64", Qwen3ForCausalLM, Qwen3Config(hidden_size=96, intermediate_size=192,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=320,
        max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=1000000.0, attention_bias=True,
        tie_word_embeddings=True), torch.float32, 23)
    make("qwen2-untied-f16", Qwen2ForCausalLM, Qwen2Config(hidden_size=64, intermediate_size=176,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, vocab_size=300, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False), torch.float16, 24)
    make("mistral-window", MistralForCausalLM, MistralConfig(hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256, sliding_window=4096,
        max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0), torch.bfloat16, 25)
    make("llama-ffn200-mlpbias", LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=200,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256, max_position_embeddings=256,
        rms_norm_eps=1e-5, rope_theta=10000.0, mlp_bias=True, tie_word_embeddings=True), torch.float32, 26)
    # The CUDA persistent decode kernel's bf16 fixtures. Their weights (2.2-6.5 MB each) are not kept in
    # the repository: weights.json is their recipe, which the tests expand with numpy
    # (golden.ensure_weights); the reference is computed from those values.
    # Its shapes: hidden, heads x head_dim and intermediate multiples of 128
    if not only or "llama-stream-h256" in only:
        recipe_model("llama-stream-h256", LlamaForCausalLM, LlamaConfig(hidden_size=256, intermediate_size=512,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=320,
            max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True), 109)
    if not only or "qwen3-stream-bias" in only:
        recipe_model("qwen3-stream-bias", Qwen3ForCausalLM, Qwen3Config(hidden_size=256, intermediate_size=384,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=288,
            max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=1000000.0, attention_bias=True,
            tie_word_embeddings=False), 126)
    # a row over two ring slots (K > 8192: stream.cuh's SPLIT), as Llama-3-8B's down projection
    # (K = 14336); one small layer
    if not only or "llama-stream-ksplit" in only:
        recipe_model("llama-stream-ksplit", LlamaForCausalLM, LlamaConfig(hidden_size=128, intermediate_size=8448,
            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, vocab_size=256,
            max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True), 32)
    # MoE layers on the persistent kernel (--tune dl_moe, stream_moe.cuh): expert sizes multiples of
    # 128; Qwen3-MoE with unnormalized top-3 weights, Mixtral with its renormalized top-2
    if not only or "qwen3-moe-stream" in only:
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
        recipe_model("qwen3-moe-stream", Qwen3MoeForCausalLM, Qwen3MoeConfig(hidden_size=256, intermediate_size=512,
            moe_intermediate_size=128, num_experts=8, num_experts_per_tok=3, norm_topk_prob=False,
            decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, vocab_size=288, max_position_embeddings=256, rms_norm_eps=1e-6,
            rope_theta=1000000.0, tie_word_embeddings=False), 141)
    # Qwen2-MoE's shared expert (one more segment of both phases, weighted by its sigmoid gate), and a
    # Qwen3-MoE with a dense layer (imported as a shared expert beside zero experts)
    if not only or "qwen2-moe-stream" in only:
        from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
        recipe_model("qwen2-moe-stream", Qwen2MoeForCausalLM, Qwen2MoeConfig(hidden_size=256, intermediate_size=512,
            moe_intermediate_size=128, shared_expert_intermediate_size=256, num_experts=8, num_experts_per_tok=2,
            norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=288, max_position_embeddings=256,
            rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False), 144)
    if not only or "qwen3-moe-dense-stream" in only:
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
        recipe_model("qwen3-moe-dense-stream", Qwen3MoeForCausalLM, Qwen3MoeConfig(hidden_size=256,
            intermediate_size=384, moe_intermediate_size=128, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
            decoder_sparse_step=1, mlp_only_layers=[1], num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, vocab_size=288, max_position_embeddings=256, rms_norm_eps=1e-6,
            rope_theta=1000000.0, tie_word_embeddings=False), 145)
    if not only or "mixtral-stream" in only:
        from transformers import MixtralConfig, MixtralForCausalLM
        recipe_model("mixtral-stream", MixtralForCausalLM, MixtralConfig(hidden_size=128, intermediate_size=256,
            num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=64, vocab_size=256, max_position_embeddings=256, rms_norm_eps=1e-5,
            rope_theta=1000000.0, tie_word_embeddings=False), 143)
    # head size 128 (Llama-3-8B's, Qwen3-30B-A3B's): CUDA prefill attention's warp-specialized form
    # (attention_prefill.cu _flash_ws) on 128-key tiles with 2 query heads a CTA, and on 64-key tiles
    # with one (a group of 1) under a sliding window shorter than the reference's contexts
    if not only or "qwen3-hd128" in only:
        recipe_model("qwen3-hd128", Qwen3ForCausalLM, Qwen3Config(hidden_size=256, intermediate_size=384,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=128, vocab_size=288,
            max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False), 151)
    if not only or "mistral-hd128-window" in only:
        recipe_model("mistral-hd128-window", MistralForCausalLM, MistralConfig(hidden_size=256, intermediate_size=512,
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=128, vocab_size=256,
            sliding_window=12, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=True), 152)
    for name in os.listdir(os.path.join(mr.WORK, "extra")):
        if only and name not in only:
            continue
        dst = os.path.join(out, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(os.path.join(mr.WORK, "extra", name), dst)
    print("wrote", out, "torch", torch.__version__, "transformers", __import__("transformers").__version__)

if __name__ == "__main__":
    main(sys.argv[1:])
