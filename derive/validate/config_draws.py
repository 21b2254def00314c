"""Random config.json drawn per family for ``python -m derive.validate --hf``, and a micro-batch and sequence for each.

Each draw is a config.json a user could write for one family (every size field drawn, odd
sizes, head_dim apart from h / a, tied or not, biases, 1-3 layers, MoE boundaries) with some
optional fields left out so that derive's defaults meet transformers' defaults, and a micro-batch
b and sequence s (around the sliding window where there is one). Which families are drawn, and
which of their checks run (:data:`SAVED`, :data:`PARAMETERS_ONLY`), is here too.
"""
from __future__ import annotations

import random
from typing import Any, Callable

#: Families whose saved tensors derive models -> the attention implementations it models.
SAVED: dict[str, tuple[str, ...]] = {
    "llama": ("sdpa", "eager"), "mistral": ("sdpa", "eager"), "qwen2": ("sdpa", "eager"),
    "qwen3": ("sdpa", "eager"), "mixtral": ("sdpa", "eager"), "qwen3_moe": ("sdpa", "eager"),
    "deepseek_v3": ("sdpa", "eager"), "phi3": ("sdpa", "eager"), "olmo2": ("sdpa", "eager"),
    "qwen2_moe": ("sdpa", "eager"), "gpt_neox": ("sdpa", "eager"),
    "gemma2": ("eager",), "gemma3_text": ("sdpa", "eager"), "gpt2": ("sdpa", "eager"),
}
#: Families with routed experts: their draws alternate transformers' experts implementations.
MOE = ("mixtral", "qwen3_moe", "deepseek_v3", "qwen2_moe")
EXPERTS_DRAWN = ("grouped_mm", "eager")
#: Families checked on parameters only: their saved tensors are not modelled yet (GPT-OSS: attention
#: sinks, biased experts, alternating sliding-window attention).
PARAMETERS_ONLY = ("deepseek_v2", "gpt_oss")
FAMILIES = (*SAVED, *PARAMETERS_ONLY)
#: grouped_mm (torch._grouped_mm on CPU) wants rows of a multiple of 16 bytes: 8 bf16 elements.
GROUPED_MM_STEP = 8
#: Sequence lengths are drawn up to this (RoPE tables are built for max_position_embeddings).
MAX_SEQ = 24


def _maybe(rng: random.Random, config: dict[str, Any], field: str, value: Any,
           omit: float = 0.3) -> None:
    """Set ``field`` to ``value``, or leave it out (the class default applies) with probability ``omit``."""
    if rng.random() >= omit:
        config[field] = value


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


#: transformers' num_key_value_heads when a config leaves it out (the config classes' defaults);
#: the other families take num_attention_heads.
KV_ABSENT = {"mistral": 8, "qwen2": 32, "qwen3": 32, "gemma2": 4, "gemma3_text": 4, "mixtral": 8,
             "qwen3_moe": 4, "qwen2_moe": 16, "gpt_oss": 8}


def _attention(rng: random.Random, config: dict[str, Any], width_step: int = 1) -> None:
    """Heads, kv heads (a divisor, or omitted), head width (even, h / a or not, or omitted).

    An omitted num_key_value_heads takes the family's class default, so the heads are drawn
    as a multiple of it; ``width_step`` makes h a multiple of it (grouped_mm wants 16-byte rows).
    """
    family = config["model_type"]
    omit_kv = rng.random() < 0.25
    if omit_kv:  # heads twice the class default, so that reading it as a heads would show
        kv = KV_ABSENT.get(family)
        heads = rng.randint(1, 6) if kv is None else 2 * kv
    else:
        heads = rng.randint(1, 6)
        kv = rng.choice(_divisors(heads))
        config["num_key_value_heads"] = kv
    width = 2 * rng.randint(1, 8)
    config["num_attention_heads"] = heads
    if rng.random() < 0.5 and (heads * width) % width_step == 0:
        config["hidden_size"] = heads * width
        _maybe(rng, config, "head_dim", width, 0.5)
    else:  # head_dim apart from h / a (transformers still wants a to divide h)
        step = width_step // _gcd(width_step, heads)
        config["hidden_size"] = heads * step * rng.randint(1, max(1, 12 // step))
        config["head_dim"] = width


def _gcd(x: int, y: int) -> int:
    while y:
        x, y = y, x % y
    return x


def _common(rng: random.Random, config: dict[str, Any]) -> None:
    config.update(num_hidden_layers=rng.randint(1, 3), intermediate_size=rng.randint(4, 72),
                  vocab_size=rng.randint(8, 97), max_position_embeddings=64)
    _maybe(rng, config, "tie_word_embeddings", rng.random() < 0.5)


def _llama(rng: random.Random, family: str, width_step: int = 1) -> dict[str, Any]:
    config: dict[str, Any] = {"model_type": family}
    _attention(rng, config, width_step)
    _common(rng, config)
    if family in ("llama", "qwen3"):
        _maybe(rng, config, "attention_bias", rng.random() < 0.5, 0.5)
    if family == "llama":
        _maybe(rng, config, "mlp_bias", rng.random() < 0.5, 0.5)
    if family == "mistral":
        _window(rng, config)
    if family in ("qwen2", "qwen3") and rng.random() < 0.6:
        _qwen_window(rng, config)
    return config


def _qwen_window(rng: random.Random, config: dict[str, Any]) -> None:
    """Qwen's sliding layers: use_sliding_window (or not), its window, max_window_layers or layer_types."""
    config["use_sliding_window"] = rng.random() < 0.85
    _window(rng, config)
    layers = config["num_hidden_layers"]
    if rng.random() < 0.2 and config["use_sliding_window"] and config.get("sliding_window", 1):
        config["layer_types"] = [rng.choice(["sliding_attention", "full_attention"])
                                 for _ in range(layers)]
    else:
        _maybe(rng, config, "max_window_layers", rng.randint(0, layers - 1), 0.1)


def _mixtral(rng: random.Random) -> dict[str, Any]:
    config = _llama(rng, "mixtral", GROUPED_MM_STEP)
    config["intermediate_size"] = GROUPED_MM_STEP * rng.randint(1, 8)
    experts = rng.randint(1, 6)
    config.update(num_local_experts=experts, num_experts_per_tok=rng.randint(1, experts))
    if rng.random() < 0.4:
        config["sliding_window"] = rng.randint(2, MAX_SEQ)
    return config


def _qwen_moe(rng: random.Random, family: str = "qwen3_moe") -> dict[str, Any]:
    """Qwen3-MoE, or Qwen2-MoE with its gated shared expert (shared_expert_intermediate_size)."""
    config = _llama(rng, family, GROUPED_MM_STEP)
    experts = rng.randint(1, 6)
    config["num_hidden_layers"] = layers = rng.randint(2, 4)  # room for a sparse step
    config.update(num_experts=experts, num_experts_per_tok=rng.randint(1, experts),
                  moe_intermediate_size=GROUPED_MM_STEP * rng.randint(1, 5))
    _maybe(rng, config, "decoder_sparse_step", rng.randint(1, 3), 0.25)
    if rng.random() < 0.3:
        config["mlp_only_layers"] = sorted(rng.sample(range(layers), rng.randint(0, layers)))
    _maybe(rng, config, "norm_topk_prob", rng.random() < 0.5, 0.5)
    if family == "qwen2_moe":
        config["shared_expert_intermediate_size"] = rng.randint(4, 40)
        _maybe(rng, config, "qkv_bias", rng.random() < 0.5, 0.5)
    return config


def _deepseek(rng: random.Random, family: str) -> dict[str, Any]:
    heads = rng.randint(1, 4)
    layers = rng.randint(1, 3)
    groups = rng.choice([1, 2, 3])
    experts = groups * rng.randint(2, 3)  # the group score is each group's top 2
    topk_group = rng.randint(1, groups)
    config: dict[str, Any] = {
        "model_type": family, "num_hidden_layers": layers,
        "hidden_size": GROUPED_MM_STEP * rng.randint(1, 6),
        "num_attention_heads": heads, "num_key_value_heads": heads,
        "intermediate_size": rng.randint(4, 64), "vocab_size": rng.randint(8, 97),
        "max_position_embeddings": 64, "kv_lora_rank": rng.randint(2, 16),
        "qk_nope_head_dim": rng.randint(1, 8), "qk_rope_head_dim": 2 * rng.randint(1, 4),
        "v_head_dim": rng.randint(1, 8), "n_routed_experts": experts,
        "num_experts_per_tok": rng.randint(1, topk_group * experts // groups),
        "moe_intermediate_size": GROUPED_MM_STEP * rng.randint(1, 4), "n_shared_experts": rng.randint(1, 2),
        "first_k_dense_replace": rng.randint(0, layers), "n_group": groups,
        "topk_group": topk_group, "q_lora_rank": rng.choice([None, rng.randint(2, 16)]),
    }
    if rng.random() < 0.3:  # v as wide as q and k: sdpa's CPU flash kernel (else its math path)
        config["v_head_dim"] = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    _maybe(rng, config, "norm_topk_prob", rng.random() < 0.5, 0.5)
    _maybe(rng, config, "tie_word_embeddings", rng.random() < 0.5)
    if family == "deepseek_v2":
        config["topk_method"] = "greedy"
        _maybe(rng, config, "attention_bias", rng.random() < 0.5, 0.5)
    return config


def _window(rng: random.Random, config: dict[str, Any]) -> None:
    """A sliding window (often), null, or left out (the class default)."""
    choice = rng.random()
    if choice < 0.6:
        config["sliding_window"] = rng.randint(2, MAX_SEQ)
    elif choice < 0.8:
        config["sliding_window"] = None


def _gemma(rng: random.Random, config: dict[str, Any]) -> None:
    """Gemma's window (s is drawn around it), its layer types (listed, a pattern period, or the
    class default), its scores' scale, and each soft-capping a number, null or left out."""
    _maybe(rng, config, "sliding_window", rng.randint(2, MAX_SEQ), 0.2)
    choice = rng.random()
    if choice < 0.4:
        config["layer_types"] = [rng.choice(["sliding_attention", "full_attention"])
                                 for _ in range(config["num_hidden_layers"])]
    elif choice < 0.6 and config["model_type"] == "gemma3_text":
        config["sliding_window_pattern"] = rng.randint(1, 4)
    _maybe(rng, config, "query_pre_attn_scalar", rng.randint(1, 64), 0.5)
    for field in ("attn_logit_softcapping", "final_logit_softcapping"):
        _maybe(rng, config, field, rng.choice([None, round(rng.uniform(1, 60), 1)]), 0.3)


def _parameters_only(rng: random.Random, family: str) -> dict[str, Any]:
    """A config of a family drawn apart from the Llama-layout, Mixtral and DeepSeek draws."""
    if family == "gpt2":
        heads = rng.randint(1, 6)
        config = {"model_type": "gpt2", "n_layer": rng.randint(1, 3), "n_head": heads,
                  "n_embd": heads * rng.randint(1, 12), "vocab_size": rng.randint(8, 97),
                  "n_positions": rng.randint(MAX_SEQ, 64)}
        _maybe(rng, config, "n_inner", rng.randint(4, 80), 0.5)
        _maybe(rng, config, "tie_word_embeddings", rng.random() < 0.5)
        # GPT2Config drops 0.1 by default; derive models no dropout mask, so the draws turn them off
        config.update(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
        for field in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx"):
            _maybe(rng, config, field, rng.random() < 0.5, 0.5)
        _maybe(rng, config, "activation_function", "gelu_new", 0.7)
        return config
    if family in ("deepseek_v2",):
        return _deepseek(rng, family)
    if family == "gpt_oss":
        return _gpt_oss(rng)
    config: dict[str, Any] = {"model_type": family, "pad_token_id": 0}
    _attention(rng, config)
    _common(rng, config)
    if family == "gpt_neox":
        config["hidden_size"] = config["num_attention_heads"] * rng.randint(1, 12)
        config.pop("num_key_value_heads", None)
        config.pop("head_dim", None)
        _maybe(rng, config, "attention_bias", rng.random() < 0.5, 0.5)
        _maybe(rng, config, "use_parallel_residual", rng.random() < 0.5, 0.5)
        even = config["hidden_size"] // config["num_attention_heads"] % 2 == 0
        # an odd head turned whole would need an even cos: transformers cannot run it
        _maybe(rng, config, "rotary_pct", rng.choice([0.25, 0.5, 1.0] if even else [0.25, 0.5]), 0.5)
    if family in ("gemma2", "gemma3_text", "olmo2"):
        _maybe(rng, config, "attention_bias", rng.random() < 0.5, 0.5)
    if family in ("gemma2", "gemma3_text"):
        _gemma(rng, config)
    if family == "phi3":
        config.pop("head_dim", None)
        config["hidden_size"] = config["num_attention_heads"] * 2 * rng.randint(1, 8)
        _window(rng, config)
        if rng.random() < 0.3:  # RoPE over part of each head (cos / sin k_rope wide)
            config["partial_rotary_factor"] = rng.choice([0.25, 0.4, 0.5, 0.75])
    return config


def _gpt_oss(rng: random.Random) -> dict[str, Any]:
    """GPT-OSS: biased experts (every layer), sinks, attention_bias on or off, layer_types listed or the class default."""
    config = _llama(rng, "gpt_oss")
    config["pad_token_id"] = 0
    experts = rng.randint(1, 6)
    config.update(num_local_experts=experts, num_experts_per_tok=rng.randint(1, experts))
    _maybe(rng, config, "attention_bias", rng.random() < 0.5, 0.5)
    if rng.random() < 0.5:
        config["layer_types"] = [rng.choice(("sliding_attention", "full_attention"))
                                 for _ in range(config["num_hidden_layers"])]
    return config


DRAW: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    **{family: (lambda rng, family=family: _llama(rng, family))
       for family in ("llama", "mistral", "qwen2", "qwen3")},
    "mixtral": _mixtral, "qwen3_moe": _qwen_moe,
    "qwen2_moe": lambda rng: _qwen_moe(rng, "qwen2_moe"),
    "deepseek_v3": lambda rng: _deepseek(rng, "deepseek_v3"),
    **{family: (lambda rng, family=family: _parameters_only(rng, family))
       for family in ("phi3", "olmo2", "gpt_neox", "gemma2", "gemma3_text", "gpt2",
                      *PARAMETERS_ONLY)},
}


def draw_shape(rng: random.Random, config: dict[str, Any]) -> tuple[int, int]:
    """(b, s): b mostly small with 1 often; s around the sliding window when the config has one."""
    batch = rng.choice([1, 1, 2, 3])
    window = config.get("sliding_window")
    if isinstance(window, int) and window <= MAX_SEQ:
        seq = max(2, min(MAX_SEQ, window + rng.randint(-3, 3)))
    else:
        seq = rng.randint(2, MAX_SEQ)
    return batch, seq
