"""Issue 31: derive's transformers accounts exact at every shape, through the public path.

Unit tests hold each of the four conditional rows against bytes computed by hand
in the test; the measured tests run transformers' own models (tiny, bf16, CPU)
under saved_tensors_hooks and require exact equality with what
``derive report --profile hf-sdpa|hf-eager`` prints.
"""
import json
import re

import pytest
import sympy as sp

from derive.accounts.hf_saved import config_saved
from derive.architectures.operations.attention import hf_eager_attention, hf_sdpa_attention
from derive.architectures.operations.edges import hf_edges_saved
from derive.architectures.operations.latent import hf_mla
from derive.architectures.saved import llama_layer_saved
from derive.cli import run
from derive.hf import from_config
from derive.symbols import BY_NAME, a, b, h, k, s
from derive.tensors import Ledger

from derive.validate import config_draws, hf_random


def _bytes(rows, names, **values):
    """Bytes of the rows whose name starts with one of ``names`` at ``values``."""
    chosen = Ledger([row for row in rows if row.name.startswith(tuple(names))])
    return int(chosen.bytes().xreplace({BY_NAME[n]: v for n, v in values.items()}))


# ---- the four rows, each under its condition, bytes by hand ----

@pytest.mark.parametrize("batch, seq, expected", [
    (1, 9, (9 + 1) * 8),       # b = 1: the padded labels' s + 1 int64 storage
    (2, 9, 2 * 9 * 8),         # b > 1: .contiguous() copies the b s shifted labels
    (3, 5, 3 * 5 * 8),
])
def test_targets_keep_the_padded_storage_only_at_one_sequence(batch, seq, expected):
    rows = hf_edges_saved(k)
    assert _bytes(rows, ["loss: targets", "loss: padded label"], b=batch, s=seq, k=8) == expected


@pytest.mark.parametrize("kv, batch, expected", [
    (1, 1, 2 * (1 * 1 * 8 * 8 * 2)),     # viewed: K and V at their one head, b = 1
    (1, 2, 2 * (2 * 4 * 8 * 8 * 2)),     # b = 2: matmul's fold copies them to a = 4 heads
    (2, 1, 2 * (1 * 4 * 8 * 8 * 2)),     # g = 2: repeat_kv copies
])
def test_eager_keeps_k_and_v_viewed_only_at_one_kv_head_and_one_sequence(kv, batch, expected):
    rows = hf_eager_attention(k)
    assert _bytes(rows, ["k ", "v "], a=4, g=kv, b=batch, s=8, k=8) == expected


@pytest.mark.parametrize("kv, seq, expected_kv, expected_mask", [
    (2, 16, 2 * (2 * 4 * 16 * 8 * 2), 2 * 16 * 16 * 2),   # s >= w: repeated to a = 4, mask kept
    (2, 10, 2 * (2 * 4 * 10 * 8 * 2), 2 * 10 * 10 * 2),   # s = w: the mask exists already
    (2, 9, 2 * (2 * 2 * 9 * 8 * 2), 0),                   # s < w: is_causal, GQA at g = 2
    (1, 16, 2 * (2 * 1 * 16 * 8 * 2), 2 * 16 * 16 * 2),   # g = 1: the repeat is a stride-0 view
])
def test_sdpa_keeps_the_window_mask_from_s_equal_w(kv, seq, expected_kv, expected_mask):
    rows = hf_sdpa_attention(k, window=True)
    at = dict(a=4, g=kv, b=2, s=seq, k=8, w=10)
    assert _bytes(rows, ["k ", "v"], **at) == expected_kv
    assert _bytes(rows, ["sliding-window mask"], **at) == expected_mask
    assert _bytes(hf_sdpa_attention(k), ["sliding-window mask"], **at) == 0   # no window, no mask


def test_head_width_is_the_configs_head_dim():
    # Qwen3-0.6B: h = 1024, a = 16, head_dim = 128 = 2 h / a
    model = from_config({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16,
                         "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
                         "num_hidden_layers": 28, "vocab_size": 151936,
                         "max_position_embeddings": 40960})
    assert model.head_dim == 128
    layer = llama_layer_saved("hf-sdpa", k, qk_norm=True)
    q = next(row for row in layer if row.name == "q after RoPE")
    assert q.shape == (b, a, s, k)
    assert int(model.subs(q.bytes, b=1, s=4)) == 1 * 16 * 4 * 128 * 2
    cos = next(row for row in hf_edges_saved(k) if row.name == "rope: cos")
    assert int(model.subs(cos.bytes, s=4)) == 4 * 128 * 2


def test_absent_fields_take_transformers_class_defaults():
    base = {"hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 32,
            "num_hidden_layers": 1, "vocab_size": 11, "max_position_embeddings": 32}
    # MistralConfig: num_key_value_heads 8 when absent, num_attention_heads when null
    assert from_config({**base, "model_type": "mistral"}).kv_heads == 8
    assert from_config({**base, "model_type": "mistral", "num_attention_heads": 16,
                        "num_key_value_heads": None}).kv_heads == 16
    assert from_config({**base, "model_type": "qwen3_moe", "num_experts": 4,
                        "num_experts_per_tok": 2, "moe_intermediate_size": 8}).kv_heads == 4
    # Qwen3Config: head_dim 128 when absent
    assert from_config({**base, "model_type": "qwen3", "num_key_value_heads": 8}).head_dim == 128
    # DeepseekV3Config renormalises the top-k weights unless norm_topk_prob says otherwise
    deepseek = {**base, "model_type": "deepseek_v3", "kv_lora_rank": 4, "qk_nope_head_dim": 4,
                "qk_rope_head_dim": 4, "v_head_dim": 4, "n_routed_experts": 4,
                "num_experts_per_tok": 2, "moe_intermediate_size": 8, "n_group": 1,
                "topk_group": 1, "q_lora_rank": None}
    assert from_config(deepseek).layout.moe.normalise_topk
    assert not from_config({**deepseek, "norm_topk_prob": False}).layout.moe.normalise_topk


def test_mistral_reads_its_sliding_window():
    base = {"model_type": "mistral", "hidden_size": 32, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 8, "num_hidden_layers": 1, "vocab_size": 11,
            "max_position_embeddings": 32}
    assert dict(from_config(base).sizes)["w"] == 4096                 # the class default
    assert "w" not in dict(from_config({**base, "sliding_window": None}).sizes)
    assert dict(from_config({**base, "sliding_window": 7}).sizes)["w"] == 7


# ---- transformers' own models ----

#: One config per pattern (family, config, implementation, b, s) and the row it needs.
PATTERNS = {
    "one sequence": ("llama", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2),
                     "sdpa", 1, 8),
    "head_dim 2h/a": ("qwen3", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                    head_dim=16), "sdpa", 2, 8),
    "one kv head, eager": ("llama", dict(hidden_size=32, num_attention_heads=4,
                                         num_key_value_heads=1), "eager", 1, 8),
    "sliding window": ("mistral", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                       sliding_window=10), "sdpa", 2, 16),
}


def saved_rows(config, implementation):
    """The layer and edge rows of a dense config under one implementation."""
    model = from_config(config)
    layer = llama_layer_saved(f"hf-{implementation}", k, qk_norm=model.layout.qk_norm == "head",
                              window="w" in dict(model.sizes))
    return [*layer, *hf_edges_saved(k)]


def model_rows_with_conditions(rows):
    """The rows that exist only where a condition holds (their count is a Piecewise)."""
    return [row for row in rows if row.count.has(sp.Piecewise)
            and ("padded" in row.name or "viewed" in row.name or "mask" in row.name)]


def _config(family, fields):
    return {"model_type": family, "num_hidden_layers": 2, "intermediate_size": 48,
            "vocab_size": 50, "max_position_embeddings": 64, **fields}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_each_pattern_is_exact_and_needs_its_row(pattern):
    family, fields, implementation, batch, seq = PATTERNS[pattern]
    config = _config(family, fields)
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert hf_random.predicted(config, implementation, batch, seq) == measured
    model, saved = config_saved(config, f"hf-{implementation}")
    if pattern == "head_dim 2h/a":  # heads of width h / a would be predicted wrong
        assert int(model.subs(saved.total.xreplace({k: h / a}), b=batch, s=seq)) != measured
    else:  # the row that exists only under the condition is part of the exact figure
        conditional = sum(row.bytes for row in model_rows_with_conditions(saved_rows(config, implementation)))
        assert int(model.subs(conditional, b=batch, s=seq)) > 0


# ---- families beyond the Llama layer: Phi 3 (fused projections), OLMo 2 (post-norms) ----

#: (family, fields, implementation, b, s): each exact against transformers' own model.
FAMILY_CASES = {
    "phi3 sdpa, GQA": ("phi3", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2),
                       "sdpa", 2, 8),
    "phi3 eager, window": ("phi3", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                                        sliding_window=6), "eager", 1, 8),
    "phi3 sdpa, window": ("phi3", dict(hidden_size=24, num_attention_heads=2, num_key_value_heads=1,
                                       sliding_window=6), "sdpa", 3, 7),
    "phi3 partial rotary": ("phi3", dict(hidden_size=40, num_attention_heads=4, num_key_value_heads=2,
                                         partial_rotary_factor=0.4), "sdpa", 2, 6),
    "olmo2 sdpa": ("olmo2", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2),
                   "sdpa", 2, 8),
    "olmo2 eager, one kv head": ("olmo2", dict(hidden_size=24, num_attention_heads=3,
                                               num_key_value_heads=1, head_dim=10), "eager", 1, 5),
    "gpt_neox sdpa, parallel": ("gpt_neox", dict(hidden_size=32, num_attention_heads=4), "sdpa", 2, 6),
    "gpt_neox eager, sequential, half rotary": ("gpt_neox", dict(
        hidden_size=36, num_attention_heads=3, use_parallel_residual=False, rotary_pct=0.5),
        "eager", 1, 7),
    "qwen2_moe sdpa, dense layer 0": ("qwen2_moe", dict(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
        mlp_only_layers=[0]), "sdpa", 2, 8),
}


@pytest.mark.parametrize("case", FAMILY_CASES)
def test_families_beyond_llama_are_exact(case):
    family, fields, implementation, batch, seq = FAMILY_CASES[case]
    config = _config(family, {**fields, "pad_token_id": 0})   # Phi3Config's 32000 is past V
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert hf_random.predicted(config, implementation, batch, seq) == measured


@pytest.mark.parametrize("heads, seq, expected", [
    (4, 8, 2 * 4 * 8 * 8 * 2),   # [b, a, s, k] bf16: the kernel's output beside o_proj's copy
    (1, 8, 0),                   # a = 1: transpose(1, 2) of it is contiguous, no copy
    (4, 1, 0),                   # s = 1: likewise
])
def test_phi3_sdpa_keeps_its_output_in_the_query_layout(heads, seq, expected):
    rows = llama_layer_saved("hf-sdpa", k, fused=True)
    at = dict(a=heads, g=1, b=2, s=seq, k=8, h=32, f=16)
    assert _bytes(rows, ["attention output (query layout)"], **at) == expected
    assert _bytes(llama_layer_saved("hf-sdpa", k), ["attention output (query"], **at) == 0


def test_phi3_partial_rotary_keeps_narrower_cos_and_sin():
    base = {"model_type": "phi3", "hidden_size": 56, "num_attention_heads": 4, "intermediate_size": 8,
            "num_hidden_layers": 1, "vocab_size": 11, "max_position_embeddings": 32}
    # head 14: int(14 * 0.4) = 5 dimensions, frequencies at 0, 2, 4, cos = cat(freqs, freqs): 6
    assert dict(from_config({**base, "partial_rotary_factor": 0.4}).sizes)["k_rope"] == 6
    assert dict(from_config({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                                          "partial_rotary_factor": 0.5}}).sizes)[
        "k_rope"] == 8   # 7 dimensions -> 8
    assert "k_rope" not in dict(from_config(base).sizes)
    with pytest.raises(ValueError, match="^partial_rotary_factor:"):
        from_config({**base, "partial_rotary_factor": 1.5})
    model, saved = config_saved({**base, "partial_rotary_factor": 0.4}, "hf-sdpa")
    _, whole = config_saved(base, "hf-sdpa")
    # cos and sin: s (14 - 6) bf16 narrower each
    assert int(model.subs(whole.edges - saved.edges, b=1, s=5)) == 2 * 5 * (14 - 6) * 2


def _moe_report_and_measured(tmp_path, config: dict, micro_batch: int, seq: int,
                             experts: str) -> tuple[dict, int]:
    """derive report's saved_for_backward_bytes for ``config`` (hf-eager) and transformers' measured bytes."""
    path = tmp_path / f"{config['model_type']}.json"
    path.write_text(json.dumps(config))
    out = json.loads(run(["--config", str(path), "--profile", "hf-eager", "--micro-batch", str(micro_batch),
                          "--seq", str(seq), "--experts-implementation", experts, "--json"]))
    measured = sum(row.bytes for row in hf_random.measured(config, "eager", micro_batch, seq, experts))
    assert out["saved_for_backward_bytes"]["model"] in out   # one model: its figure on top too
    return out[out["saved_for_backward_bytes"]["model"]]["saved_for_backward_bytes"], measured


@pytest.mark.parametrize("experts", ["grouped_mm", "eager"])
def test_the_qwen2_moe_report_prints_what_transformers_keeps(tmp_path, experts):
    config = {"model_type": "qwen2_moe", "hidden_size": 32, "num_attention_heads": 4,
              "num_key_value_heads": 4, "intermediate_size": 8, "num_hidden_layers": 2,
              "num_experts": 3, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
              "shared_expert_intermediate_size": 12, "norm_topk_prob": True,
              "vocab_size": 40, "max_position_embeddings": 64}
    figure, measured = _moe_report_and_measured(tmp_path, config, 2, 5, experts)
    assert figure["value"] == measured == figure["layers"] + figure["edges"]


def test_qwen2_moe_gates_its_shared_expert_once():
    from derive.architectures.decoder import moe_layout
    from derive.architectures.saved import eager_layer

    gated = eager_layer(moe_layout("gqa", shared=True, gate=True, weights_dtype="bf16",
                                   normalise_topk=False), True, implementation="sdpa")
    at = dict(b=2, s=5, h=32, f_S=12, a=4, g=4, k=8, E=3, k_E=2, f_E=8)
    tokens = 2 * 5
    # sigmoid(shared_expert_gate(x)) [T, 1] and the shared expert's output [T, h], bf16
    assert _bytes(gated, ["shared expert gate", "shared expert output"], **at) == tokens * (1 + 32) * 2
    # the router's bf16 input is the shared expert's input: kept once
    assert _bytes(gated, ["router input", "shared_experts input"], **at) == tokens * 32 * 2


def test_gpt_neox_parallel_residual_keeps_the_layer_input_once():
    from derive.architectures.saved import neox_layer_saved

    at = dict(b=2, s=5, h=32, a=4, g=4, k=8, f=10)
    tokens = 2 * 5
    parallel, sequential = (neox_layer_saved("sdpa", flag) for flag in (True, False))
    # both LayerNorms read x: one bf16 [b, s, h] input, each norm its own bf16 mean and rstd
    assert _bytes(parallel, ["layer input", "input_layernorm", "post_attention_layernorm"],
                  **at) == tokens * 32 * 2 + 2 * 2 * tokens * 2
    # sequential: post_attention_layernorm keeps the residual sum, one [b, s, h] more
    assert (int(sequential.bytes().xreplace({BY_NAME[n]: v for n, v in at.items()}))
            - int(parallel.bytes().xreplace({BY_NAME[n]: v for n, v in at.items()}))) == tokens * 32 * 2
    # the default rotary_pct 0.25 of a head of 8: cos / sin 2 wide
    assert dict(from_config({"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 4,
                             "intermediate_size": 8, "num_hidden_layers": 1, "vocab_size": 11,
                             "max_position_embeddings": 32}).sizes)["k_rope"] == 2


def test_olmo2_norms_keep_fp32_over_whole_projections():
    rows = llama_layer_saved("hf-sdpa", k, post_norms=True)
    at = dict(a=4, g=2, b=2, s=8, k=8, h=32, f=16)
    tokens = 2 * 8
    # Olmo2RMSNorm over q_proj's a k = 32 outputs: fp32 input, fp32 x * rstd, one fp32 rstd a token
    assert _bytes(rows, ["q_norm"], **at) == tokens * (4 * 32 + 4 * 32 + 4)
    assert _bytes(rows, ["k_norm"], **at) == tokens * (4 * 16 + 4 * 16 + 4)
    assert _bytes(rows, ["input_layernorm"], **at) == 0   # no norm before attention
    assert _bytes(rows, ["post_feedforward_layernorm"], **at) == tokens * (4 * 32 * 2 + 4)
    # Olmo2RotaryEmbedding returns fp32 cos and sin: s k fp32 each
    edges = hf_edges_saved(k, normalised="fp32", rope="fp32")
    assert _bytes(edges, ["rope: "], **at) == 2 * 8 * 8 * 4


def test_drawn_shapes_are_exact_across_families():
    """A few dozen random configs and shapes: parameters of every family, saved bytes where modelled."""
    result = hf_random.run(2, seed=31, report=lambda line: None)
    assert not result["failures"], result["failures"][:2]
    checks = sum(result["counts"].values())
    saved = sum(n for (family, check, _), n in result["counts"].items() if check != "parameters")
    assert checks >= 2 * len(config_draws.FAMILIES) and saved >= 10


@pytest.mark.parametrize("family, fields, implementation, batch, seq", [
    PATTERNS["sliding window"],
    ("phi3", dict(hidden_size=40, num_attention_heads=4, num_key_value_heads=2, pad_token_id=0,
                  sliding_window=5, partial_rotary_factor=0.5), "sdpa", 2, 6),
    ("olmo2", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1), "eager", 1, 6),
])
def test_the_report_prints_what_transformers_keeps(tmp_path, family, fields, implementation,
                                                   batch, seq):
    config = _config(family, fields)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = json.loads(run(["--config", str(path), "--profile", f"hf-{implementation}",
                          "--micro-batch", str(batch), "--seq", str(seq), "--json"]))
    top = out["saved_for_backward_bytes"]
    figure = out[top["model"]]["saved_for_backward_bytes"]
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert figure["value"] == measured == figure["layers"] + figure["edges"]
    assert {key: top[key] for key in figure} == figure


@pytest.mark.parametrize("experts", ["grouped_mm", "eager"])
def test_the_moe_report_prints_what_transformers_keeps(tmp_path, experts):
    config = {"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 32,
              "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 8,
              "intermediate_size": 16, "num_local_experts": 3, "num_experts_per_tok": 3,
              "vocab_size": 40, "max_position_embeddings": 64}
    figure, measured = _moe_report_and_measured(tmp_path, config, 1, 6, experts)
    assert figure["value"] == measured == figure["layers"] + figure["edges"]


@pytest.mark.parametrize("config, options, line", [
    ({"model_type": "gemma2", "num_key_value_heads": 2}, ["--profile", "hf-sdpa"],
     "--profile: hf-sdpa: transformers runs gemma2 under eager only "
     "(Gemma2PreTrainedModel._supports_sdpa is False"),
    ({"model_type": "gemma3_text", "num_key_value_heads": 2, "attention_dropout": 0.1},
     ["--profile", "hf-eager"], "--profile: hf-eager: attention_dropout = 0.1: transformers' "
     "dropout masks are not modelled"),
    ({"model_type": "qwen2_moe", "num_key_value_heads": 2, "num_experts": 2, "num_experts_per_tok": 1,
      "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8, "attention_dropout": 0.25},
     ["--profile", "hf-eager"], "--config: hf-eager: attention_dropout = 0.25: transformers' "
     "dropout masks"),
    ({"model_type": "qwen3", "num_key_value_heads": 2, "layer_types": ["sliding_attention"]},
     ["--profile", "hf-sdpa"], "--profile: hf-sdpa: layer_types: sliding_attention layers without "
     "a sliding window"),
    ({"model_type": "qwen2_moe", "num_key_value_heads": 2, "num_experts": 2, "num_experts_per_tok": 1,
      "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8, "use_sliding_window": True},
     ["--profile", "hf-sdpa"], "--config: hf-sdpa: transformers' Qwen sliding-window layers"),
    ({"model_type": "llama"}, ["--profile", "hf-sdpa", "--experts-implementation", "grouped_mm"],
     "--experts-implementation: only the MoE report"),
])
def test_what_the_transformers_profiles_refuse_is_one_line(tmp_path, config, options, line):
    from derive.options.messages import UsageError
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 8,
                                "num_hidden_layers": 1, "vocab_size": 11,
                                "max_position_embeddings": 32, **config}))
    with pytest.raises(UsageError, match="^" + re.escape(line)):
        run(["--config", str(path), *options])


def test_moe_boundaries_read_as_transformers_builds_them():
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
            "intermediate_size": 16, "vocab_size": 11, "max_position_embeddings": 32}
    # Qwen3MoeDecoderLayer: layer i is sparse when (i + 1) % decoder_sparse_step == 0
    qwen = from_config({**base, "model_type": "qwen3_moe", "num_hidden_layers": 4, "num_experts": 3,
                        "num_experts_per_tok": 3, "moe_intermediate_size": 8,
                        "decoder_sparse_step": 2})
    assert qwen.moe_layers == (1, 3) and dict(qwen.sizes)["k_E"] == 3   # top-k = E is allowed
    deepseek = from_config({**base, "model_type": "deepseek_v3", "num_hidden_layers": 3,
                            "kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 4,
                            "v_head_dim": 4, "n_routed_experts": 4, "num_experts_per_tok": 4,
                            "moe_intermediate_size": 8, "first_k_dense_replace": 2,
                            "q_lora_rank": None})
    assert deepseek.moe_layers == (2,)


def test_a_printed_draw_replays(capsys):
    from derive.validate.__main__ import main
    config = _config("llama", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1))
    line = hf_random.replay_line(config, "eager", 1, 7)
    assert line.startswith("python -m derive.validate --hf --replay '")
    assert main(["--hf", "--replay", line.split("--replay '", 1)[1][:-1]]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["saved"]["predicted"] == out["saved"]["measured"] and out["parameters"]["passed"]


# ---- Gemma 2 / 3: (1 + w) norms, four per layer, soft-capping, sliding and full layers ----

GEMMA_CASES = {
    # Gemma2Config's defaults: attention and final soft-capping, layers 0, 2 sliding, 1 full
    "gemma2 eager, class defaults": ("gemma2", dict(hidden_size=24, num_attention_heads=3,
                                                    num_key_value_heads=1, head_dim=10,
                                                    num_hidden_layers=3), "eager", 2, 5),
    "gemma2 eager, no caps, window": ("gemma2", dict(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        sliding_window=4, attn_logit_softcapping=None, final_logit_softcapping=None), "eager", 1, 6),
    # one sliding layer past its window (mask, K/V repeated) and one full layer: two RoPE pairs
    "gemma3 sdpa, sliding and full": ("gemma3_text", dict(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4,
        layer_types=["sliding_attention", "full_attention"], final_logit_softcapping=20.0),
        "sdpa", 2, 6),
    "gemma3 eager, pattern 2": ("gemma3_text", dict(
        hidden_size=24, num_attention_heads=2, num_key_value_heads=1, head_dim=6,
        sliding_window=3, sliding_window_pattern=2), "eager", 1, 5),
}


@pytest.mark.parametrize("case", GEMMA_CASES)
def test_gemma_is_exact(case):
    family, fields, implementation, batch, seq = GEMMA_CASES[case]
    config = _config(family, {**fields, "pad_token_id": 0})
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert hf_random.predicted(config, implementation, batch, seq) == measured


def test_gemma_rows_by_hand():
    from derive.architectures.operations.edges import gemma_edges_saved
    from derive.architectures.saved import gemma_layer_saved

    at = dict(a=4, g=2, b=2, s=6, k=8, h=32, f=16, V=50, w=4, L=3, L_w=1)
    tokens = 2 * 6
    eager = gemma_layer_saved("eager", False, softcap=True)
    # Gemma2RMSNorm: fp32 input, fp32 rstd, fp32 x * rstd, and the fp32 vector 1 + w of h
    assert _bytes(eager, ["input_layernorm"], **at) == tokens * (4 * 32 * 2 + 4) + 4 * 32
    # tanh(scores / cap): bf16 [b, a, s, s]; none without the cap
    assert _bytes(eager, ["attention scores tanh"], **at) == 2 * 4 * 6 * 6 * 2
    assert _bytes(gemma_layer_saved("eager", False), ["attention scores tanh"], **at) == 0
    # Gemma 3's q_norm over each head: [b, s, a, k] fp32 twice, rstd per head, 1 + w of k
    gemma3 = gemma_layer_saved("sdpa", True, qk_norm=True)
    assert _bytes(gemma3, ["q_norm"], **at) == tokens * 4 * (8 * 4 * 2 + 4) + 8 * 4
    # a sliding layer at s = 6 >= w = 4 keeps the bf16 mask [b, 1, s, s]; a full layer none
    assert _bytes(gemma3, ["sliding-window mask"], **at) == 2 * 6 * 6 * 2
    assert _bytes(gemma_layer_saved("sdpa", False, qk_norm=True), ["sliding-window mask"], **at) == 0
    # the capped logits' tanh: bf16 [b, s, V]; Gemma 3's second RoPE pair where 0 < L_w < L
    edges = gemma_edges_saved(True, True)
    assert _bytes(edges, ["output: logits tanh"], **at) == tokens * 50 * 2
    assert _bytes(edges, ["rope (second"], **at) == 2 * 6 * 8 * 2
    assert _bytes(edges, ["rope (second"], **{**at, "L_w": 3}) == 0
    assert _bytes(edges, ["rope (second"], **{**at, "L_w": 0}) == 0


def test_gemma_layer_types_and_caps_read_as_transformers_builds_them():
    base = {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 8,
            "vocab_size": 11, "max_position_embeddings": 32}
    # Gemma2Config: layer i slides unless i + 1 is even; 5 layers -> 0, 2, 4
    gemma2 = from_config({**base, "model_type": "gemma2", "num_hidden_layers": 5})
    assert dict(gemma2.sizes) == {"L_w": 3, "w": 4096}
    assert gemma2.layout.attention_softcap and gemma2.layout.logit_softcap   # 50.0, 30.0
    # Gemma3TextConfig: sliding_window_pattern 6 by default; 7 layers -> all but layer 5
    gemma3 = from_config({**base, "model_type": "gemma3_text", "num_hidden_layers": 7,
                          "sliding_window": 9, "attn_logit_softcapping": 3.0})
    assert dict(gemma3.sizes) == {"L_w": 6, "w": 9}
    assert not gemma3.layout.logit_softcap and not gemma3.layout.attention_softcap
    listed = from_config({**base, "model_type": "gemma3_text", "num_hidden_layers": 3,
                          "layer_types": ["full_attention"] * 3, "sliding_window_pattern": 2})
    assert dict(listed.sizes)["L_w"] == 0
    with pytest.raises(ValueError, match="^layer_types: "):
        from_config({**base, "model_type": "gemma2", "num_hidden_layers": 3,
                     "layer_types": ["sliding_attention"]})
    for field, value in (("use_bidirectional_attention", True), ("hidden_activation", "relu")):
        with pytest.raises(ValueError, match=f"^profile: hf-sdpa: {field} = "):
            config_saved({**_config("gemma3_text", dict(hidden_size=32, num_attention_heads=4)),
                          field: value}, "hf-sdpa")
    with pytest.raises(ValueError, match="^final_logit_softcapping: "):
        from_config({**base, "model_type": "gemma2", "num_hidden_layers": 1,
                     "final_logit_softcapping": 0})


def test_dropout_is_refused_by_name_and_zero_dropout_is_not():
    config = _config("llama", dict(hidden_size=32, num_attention_heads=4))
    _, saved = config_saved({**config, "attention_dropout": 0.0}, "hf-sdpa")
    assert saved.total == config_saved(config, "hf-sdpa")[1].total
    with pytest.raises(ValueError, match=r"^profile: hf-sdpa: attention_dropout = 0.1: "):
        config_saved({**config, "attention_dropout": 0.1}, "hf-sdpa")
    phi3 = _config("phi3", dict(hidden_size=32, num_attention_heads=4, pad_token_id=0))
    with pytest.raises(ValueError, match=r"^profile: hf-eager: resid_pdrop = 0.2: "):
        config_saved({**phi3, "resid_pdrop": 0.2}, "hf-eager")
    with pytest.raises(ValueError, match=r"^attention_dropout: must be a probability"):
        from_config({**config, "attention_dropout": 1.5})
    # GPT2Config drops 0.1 by default: the parameters are read, the saved bytes refused
    gpt2 = {"model_type": "gpt2", "n_embd": 16, "n_head": 2, "n_layer": 1, "vocab_size": 11,
            "n_positions": 8}
    assert from_config(gpt2).layout.dropout == (("attn_pdrop", 0.1), ("resid_pdrop", 0.1),
                                                ("embd_pdrop", 0.1))


def test_the_report_json_carries_the_whole_model_on_top(tmp_path):
    config = _config("gemma3_text", dict(hidden_size=32, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=8, sliding_window=4,
                                         pad_token_id=0))
    path = tmp_path / "gemma.json"
    path.write_text(json.dumps(config))
    out = json.loads(run(["--config", str(path), "--profile", "hf-sdpa", "--micro-batch", "2",
                          "--seq", "5", "--json"]))
    measured = sum(row.bytes for row in hf_random.measured(config, "sdpa", 2, 5))
    top = out["saved_for_backward_bytes"]
    assert top["value"] == measured == top["layers"] + top["edges"]
    assert top["model"] == "gemma (custom)" and out[top["model"]]["saved_for_backward_bytes"]["value"] == measured
    # two models, or no transformers profile: no whole-model figure on top
    two = json.loads(run(["--config", str(path), "--config", str(path), "--profile", "hf-sdpa",
                          "--seq", "5", "--json"]))
    assert "saved_for_backward_bytes" not in two
    assert "saved_for_backward_bytes" not in json.loads(run(["--config", str(path), "--json"]))


# ---- GPT-2 without dropout: learned positions, Conv1D, the cache's k / v copies, gelu_new ----

GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_head": 3, "n_embd": 24, "vocab_size": 31,
        "n_positions": 32, "n_inner": 14, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}


@pytest.mark.parametrize("fields, implementation, batch, seq", [
    ({}, "sdpa", 2, 5),
    ({"tie_word_embeddings": False}, "eager", 2, 5),
    ({}, "eager", 1, 3),                                   # b = 1: q folds without a copy
    ({"n_head": 1, "n_embd": 8, "n_inner": None}, "eager", 3, 4),   # a = 1 likewise
])
def test_gpt2_is_exact(fields, implementation, batch, seq):
    config = {key: value for key, value in {**GPT2, **fields}.items() if value is not None}
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert hf_random.predicted(config, implementation, batch, seq) == measured


def test_gpt2_rows_by_hand():
    from derive.architectures.operations.edges import gpt2_edges_saved
    from derive.architectures.saved import gpt2_layer_saved

    at = dict(a=3, b=2, s=5, k=8, h=24, f=14, V=31)
    tokens = 2 * 5
    sdpa, eager = gpt2_layer_saved("sdpa"), gpt2_layer_saved("eager")
    # sdpa keeps q as a view of c_attn's [b, s, 3h] output; the cache's torch.cat copies k and v
    assert _bytes(sdpa, ["c_attn output", "q (", "k (", "v ("], **at) == tokens * (3 * 24 + 2 * 24) * 2
    # eager at b = 2, a = 3: matmul copies q to [b a, s, k]; at b = 1 it keeps c_attn's output
    assert _bytes(eager, ["c_attn output", "q ("], **at) == tokens * 24 * 2
    assert _bytes(eager, ["c_attn output", "q ("], **{**at, "b": 1}) == 5 * 3 * 24 * 2
    # gelu_new keeps four [b, s, f] tensors (input, tanh, 0.5 x, 1 + tanh)
    assert _bytes(eager, ["gelu_new"], **at) == 4 * tokens * 14 * 2
    # wpe's int64 position ids [1, s]; no RoPE
    edges = gpt2_edges_saved()
    assert _bytes(edges, ["embedding: position ids"], **at) == 5 * 8
    assert not [row for row in edges if "rope" in row.tags]


def test_gpt2_settings_whose_tensors_differ_are_refused_by_name():
    for field, value in (("use_cache", False), ("reorder_and_upcast_attn", True),
                         ("activation_function", "relu")):
        with pytest.raises(ValueError, match=f"^profile: hf-eager: {field} = "):
            config_saved({**GPT2, field: value}, "hf-eager")
    # GPT2Config's own dropout, 0.1 when absent, is named
    with pytest.raises(ValueError, match="^profile: hf-sdpa: attn_pdrop = 0.1: "):
        config_saved({key: value for key, value in GPT2.items() if key != "attn_pdrop"}, "hf-sdpa")


# ---- DeepSeek-V3's MLA under sdpa: the CPU flash kernel where k_v = k_nope + k_rope, math elsewhere ----

def _deepseek(v_head_dim, heads=2):
    return {"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 16,
            "num_attention_heads": heads, "num_key_value_heads": heads, "intermediate_size": 8,
            "vocab_size": 11, "max_position_embeddings": 64, "kv_lora_rank": 8,
            "qk_nope_head_dim": 3, "qk_rope_head_dim": 2, "v_head_dim": v_head_dim,
            "n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16,
            "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
            "q_lora_rank": None}


@pytest.mark.parametrize("v_head_dim, heads, experts, attention_bytes", [
    # flash (k_v = 5 = 3 + 2): bf16 q, k, output [b, a, s, 5] 2*2*7*5*2 each, kv_b_proj's
    # output (V's storage) 14 * 2 * (3 + 5) * 2, fp32 logsumexp 2*2*7*4
    (5, 2, "grouped_mm", 3 * 280 + 448 + 112),
    (5, 1, "eager", 140 + 140 + 14 * 8 * 2 + 56),   # a = 1: o_proj's copy is the output itself
    # math (k_v = 4): fp32 q, k [b, a, s, 5] 2*2*7*5*4 each, softmax 2*2*7*7*4, v 2*2*7*4*4
    (4, 2, "grouped_mm", 2 * 560 + 784 + 448),
    (4, 2, "eager", 2 * 560 + 784 + 448),
])
def test_deepseek_sdpa_is_exact_on_both_cpu_paths(v_head_dim, heads, experts, attention_bytes):
    config = _deepseek(v_head_dim, heads)
    measured = sum(row.bytes for row in hf_random.measured(config, "sdpa", 2, 7, experts))
    assert hf_random.predicted(config, "sdpa", 2, 7, experts) == measured
    model, _ = config_saved(config, "hf-sdpa", experts)
    _, eager = config_saved(config, "hf-eager", experts)
    rows = hf_mla(model.layout.mla.q_lora, "sdpa")
    mla = ["q (flash)", "k (flash)", "kv_b_proj output", "softmax logsumexp (flash)",
           "attention output (q layout", "q scaled", "k scaled", "softmax (fp32, math)", "v (fp32"]
    chosen = Ledger([row for row in rows if row.name.startswith(tuple(mla))])
    assert int(model.subs(chosen.bytes(), b=2, s=7)) == attention_bytes
    assert int(model.subs(eager.total, b=2, s=7)) != measured   # eager's rows are not sdpa's


# ---- Qwen 2 / 3 sliding layers: from max_window_layers on, or as layer_types lists them ----

def _qwen(family, **fields):
    return {"model_type": family, "num_hidden_layers": 3, "hidden_size": 32,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 8,
            "vocab_size": 11, "max_position_embeddings": 64, **fields}


@pytest.mark.parametrize("fields, sliding", [
    ({}, None),                                                  # no window: the Llama layer
    ({"use_sliding_window": True}, 0),                           # max_window_layers 28 >= L
    ({"use_sliding_window": True, "max_window_layers": 1}, 2),   # layers 1 and 2
    ({"use_sliding_window": True, "max_window_layers": 0}, 3),
    ({"sliding_window": 5, "max_window_layers": 0}, None),       # use_sliding_window off
    ({"use_sliding_window": True, "layer_types": ["full_attention", "sliding_attention",
                                                  "full_attention"]}, 1),
])
def test_qwen_reads_its_sliding_layers(fields, sliding):
    assert dict(from_config(_qwen("qwen2", **fields)).sizes).get("L_w") == sliding


@pytest.mark.parametrize("family, implementation, batch, seq, mask_layers", [
    ("qwen2", "sdpa", 2, 7, 2),    # s = 7 >= w = 5: a [b, 1, s, s] mask on each sliding layer
    ("qwen3", "sdpa", 2, 4, 0),    # s < w: sdpa skips the mask
    ("qwen3", "eager", 1, 7, 0),   # eager adds the mask: nothing kept
])
def test_qwen_sliding_layers_are_exact(family, implementation, batch, seq, mask_layers):
    config = _qwen(family, use_sliding_window=True, sliding_window=5, max_window_layers=1)
    measured = sum(row.bytes for row in hf_random.measured(config, implementation, batch, seq))
    assert hf_random.predicted(config, implementation, batch, seq) == measured
    _, full = config_saved({**config, "use_sliding_window": False}, f"hf-{implementation}")
    model = from_config(config)
    without = int(model.subs(full.total, b=batch, s=seq))
    # the mask as bf16, plus (g = 2 != 1) K and V repeated to a = 4 heads instead of g = 2
    assert measured - without == mask_layers * (batch * seq * seq * 2 + 2 * batch * 2 * seq * 8 * 2)
