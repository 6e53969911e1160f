#!/usr/bin/env python3
"""Variants of issue 21's families (and tied / other-dtype variants of the dense ones), made like
../shared/testdata/models by ../shared/tools/make_reference.py's make_model with
make_reference_arch2.py's eager-expert classes (perturbed random weights, float64 transformers
forward over the stored weights, teacher-forced logits, greedy continuations with their top-2
margins, a batch of three prompts): other expert counts and top-k, norm_topk_prob both ways,
dense layers among MoE ones (decoder_sparse_step, mlp_only_layers), expert sizes that are not
multiples of 16, Mixtral with a window shorter than the test prompt, Gemma 3 with other windows,
patterns, query_pre_attn_scalar and local rope base, GLM-4 with other rotary fractions and head
sizes, Phi-3 with a window and with longrope, tied embeddings, bf16 / f16 checkpoints.
Needs torch + transformers 5.17 (CPU is enough; requirements-dev.txt). Writes
tests/data/models/<name>/ (all of them, or only the names given as arguments); `--list` prints
the names."""
import importlib.util, os, shutil, sys
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "..", "shared", "tools")
sys.path.insert(0, TOOLS)
spec = importlib.util.spec_from_file_location("arch2", os.path.join(TOOLS, "make_reference_arch2.py"))
a2 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(a2)  # imports make_reference as its mr (WORK = /tmp/refwork, emptied)
mr = a2.mr
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM, MixtralConfig, MixtralForCausalLM, Glm4Config, Glm4ForCausalLM,
                          Gemma3TextConfig, Gemma3ForCausalLM, Phi3Config, Phi3ForCausalLM)

SP = a2.SP
BF, F16, F32 = torch.bfloat16, torch.float16, torch.float32


def q3moe(**kw):
    base = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_experts=6, num_experts_per_tok=2,
                norm_topk_prob=True, decoder_sparse_step=1, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=320, max_position_embeddings=256, rms_norm_eps=1e-6,
                rope_theta=1000000.0, tie_word_embeddings=False)
    base.update(kw)
    return Qwen3MoeConfig(**base, **SP)


def q2moe(**kw):
    base = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=300, max_position_embeddings=256,
                rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False)
    base.update(kw)
    return Qwen2MoeConfig(**base, **SP)


def gemma(**kw):
    base = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=384, max_position_embeddings=256, rms_norm_eps=1e-6,
                rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True)
    base.update(kw)
    return Gemma3TextConfig(**base, **SP)


# name -> (class, config, stored dtype, seed)
def variants():
    v = {}
    # ---- Qwen3-MoE
    v["qwen3-moe-e10-top1"] = (Qwen3MoeForCausalLM, q3moe(num_experts=10, num_experts_per_tok=1), BF, 41)
    v["qwen3-moe-e6-top4-nonorm"] = (Qwen3MoeForCausalLM, q3moe(num_experts=6, num_experts_per_tok=4,
                                     norm_topk_prob=False), F32, 42)
    v["qwen3-moe-sparse2-tied"] = (Qwen3MoeForCausalLM, q3moe(num_hidden_layers=3, decoder_sparse_step=2,
                                   tie_word_embeddings=True), F32, 43)
    v["qwen3-moe-mlponly"] = (Qwen3MoeForCausalLM, q3moe(num_hidden_layers=3, mlp_only_layers=[1]), BF, 44)
    v["qwen3-moe-i40"] = (Qwen3MoeForCausalLM, q3moe(moe_intermediate_size=40, num_experts=5, num_experts_per_tok=3),
                          F32, 45)
    # ---- Qwen2-MoE
    v["qwen2-moe-norm-s80"] = (Qwen2MoeForCausalLM, q2moe(shared_expert_intermediate_size=80, norm_topk_prob=True,
                               num_experts=8, num_experts_per_tok=3), F32, 46)
    v["qwen2-moe-bf16-tied"] = (Qwen2MoeForCausalLM, q2moe(num_experts=5, num_experts_per_tok=1,
                                tie_word_embeddings=True), BF, 47)
    v["qwen2-moe-sparse2"] = (Qwen2MoeForCausalLM, q2moe(decoder_sparse_step=2, num_hidden_layers=3,
                              moe_intermediate_size=24), F32, 64)  # layer 1 MoE; its shared expert (48) padded to the dense 96
    # ---- Mixtral
    v["mixtral-e3-top1-win"] = (MixtralForCausalLM, MixtralConfig(hidden_size=64, intermediate_size=96,
                                num_local_experts=3, num_experts_per_tok=1, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, vocab_size=300, max_position_embeddings=256, rms_norm_eps=1e-5,
                                rope_theta=1000000.0, sliding_window=6, **SP), F32, 48)
    v["mixtral-e5-top3-f16"] = (MixtralForCausalLM, MixtralConfig(hidden_size=64, intermediate_size=80,
                                num_local_experts=5, num_experts_per_tok=3, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=4, vocab_size=300, max_position_embeddings=256, rms_norm_eps=1e-5,
                                rope_theta=10000.0, sliding_window=None, tie_word_embeddings=True, **SP), F16, 49)
    # ---- Gemma 3
    v["gemma3-w4-p2"] = (Gemma3ForCausalLM, gemma(sliding_window=4, sliding_window_pattern=2,
                         query_pre_attn_scalar=16, rope_local_base_freq=5000.0), F32, 50)
    v["gemma3-w5-p3-untied"] = (Gemma3ForCausalLM, gemma(num_hidden_layers=3, sliding_window=5, sliding_window_pattern=3,
                                query_pre_attn_scalar=24, rope_theta=50000.0, tie_word_embeddings=False), BF, 51)
    v["gemma3-hd32-f16"] = (Gemma3ForCausalLM, gemma(num_hidden_layers=2, head_dim=32, num_key_value_heads=1,
                            sliding_window=12, query_pre_attn_scalar=32,
                            layer_types=["full_attention", "sliding_attention"]), F16, 52)
    v["gemma3-softcap"] = (Gemma3ForCausalLM, gemma(num_hidden_layers=2, sliding_window=6, attn_logit_softcapping=50.0,
                           final_logit_softcapping=30.0), F32, 53)
    # ---- GLM-4
    v["glm4-r25-hd48"] = (Glm4ForCausalLM, Glm4Config(hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=48, partial_rotary_factor=0.25,
                          attention_bias=True, vocab_size=320, max_position_embeddings=256, rms_norm_eps=1e-5,
                          rope_theta=10000.0, tie_word_embeddings=False, **SP), F32, 54)
    v["glm4-nobias-full-tied"] = (Glm4ForCausalLM, Glm4Config(hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                  partial_rotary_factor=1.0, attention_bias=False, vocab_size=300,
                                  max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                                  tie_word_embeddings=True, **SP), BF, 55)
    # ---- Phi-3
    hd = 16
    v["phi3-window"] = (Phi3ForCausalLM, Phi3Config(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=320, max_position_embeddings=256,
                        original_max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0, sliding_window=7,
                        tie_word_embeddings=False, **SP), BF, 56)
    g = torch.Generator().manual_seed(57)
    short = [round(1.0 + float(x), 4) for x in torch.rand(hd // 2, generator=g)]
    long_ = [round(1.0 + 8 * float(x), 4) for x in torch.rand(hd // 2, generator=g)]
    v["phi3-longrope"] = (Phi3ForCausalLM, Phi3Config(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, vocab_size=320, max_position_embeddings=1024,
                          original_max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
                          rope_scaling={"type": "longrope", "short_factor": short, "long_factor": long_},
                          tie_word_embeddings=False, **SP), F32, 57)
    v["phi3-partial-tied"] = (Phi3ForCausalLM, Phi3Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=2, vocab_size=320, max_position_embeddings=256,
                              original_max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                              partial_rotary_factor=0.5, tie_word_embeddings=True, **SP), F16, 58)
    v["mixtral-hd32-gqa4"] = (MixtralForCausalLM, MixtralConfig(hidden_size=64, intermediate_size=64, head_dim=32,
                              num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=8,
                              num_key_value_heads=2, vocab_size=256, max_position_embeddings=256, rms_norm_eps=1e-5,
                              rope_theta=1000000.0, sliding_window=None, **SP), BF, 62)
    # ---- dense families: tied / untied and other dtypes
    v["qwen2-swa-bf16"] = (Qwen2ForCausalLM, Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                           num_attention_heads=4, num_key_value_heads=2, vocab_size=300, max_position_embeddings=256,
                           rms_norm_eps=1e-6, rope_theta=10000.0, use_sliding_window=True, sliding_window=5,
                           max_window_layers=1, tie_word_embeddings=False, **SP), BF, 63)
    v["llama-tied-f16"] = (LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, vocab_size=300, max_position_embeddings=256,
                           rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, **SP), F16, 59)
    v["qwen2-tied-f32"] = (Qwen2ForCausalLM, Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=1, vocab_size=300, max_position_embeddings=256,
                           rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, **SP), F32, 60)
    v["qwen3-tied-bf16"] = (Qwen3ForCausalLM, Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=300,
                            max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=1000000.0,
                            tie_word_embeddings=True, **SP), BF, 61)
    return v


def main(args):
    vs = variants()
    if args[:1] == ["--list"]:
        print("\n".join(vs))
        return 0
    out = os.path.join(ROOT, "tests", "data", "models")
    only = set(args)
    fails = []
    for name, (cls, cfg, dtype, seed) in vs.items():
        if only and name not in only:
            continue
        c = a2.Eager(cls) if "Moe" in cls.__name__ or "Mixtral" in cls.__name__ else cls
        try:
            mr.make_model("heldout", name, c, cfg, dtype, seed)
        except Exception as ex:  # a config transformers itself rejects: say so, go on
            fails.append(f"{name}: {ex}")
            continue
        dst = os.path.join(out, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(os.path.join(mr.WORK, "heldout", name), dst)
    for f in fails:
        print("FAILED", f)
    print("wrote", out, "torch", torch.__version__, "transformers", __import__("transformers").__version__)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
