"""What transformers applies beyond a config's shape, per ``model_type``: windows, partial rotary, layer types,
soft-capping, dropout, and the settings whose saved tensors derive does not list.

Each table gives the config field and its config class's default (``configuration_<family>.py``);
a bad value is a ValueError naming the field.
"""
from __future__ import annotations

from typing import Any, Mapping

from derive.hf_fields import Fields
from derive.inputs import MAX_SIZE

#: model_type -> (the config's window field, the switch it needs or None, the class default when
#: absent): MistralConfig's sliding_window defaults to 4096; Mixtral's and Phi3Config's to null;
#: the Qwen configs keep theirs only under use_sliding_window (configuration_*.py __post_init__).
WINDOWS: dict[str, tuple[str, str | None, int | None]] = {
    "mistral": ("sliding_window", None, 4096), "mixtral": ("sliding_window", None, None),
    "phi3": ("sliding_window", None, None),
    "qwen2": ("sliding_window", "use_sliding_window", 4096),
    "qwen3": ("sliding_window", "use_sliding_window", 4096),
    "qwen3_moe": ("sliding_window", "use_sliding_window", 4096),
    "gemma2": ("sliding_window", None, 4096), "gemma3_text": ("sliding_window", None, 4096),
    "gpt_oss": ("sliding_window", None, 128),
}


def sliding_window(config: Mapping[str, Any]) -> int | None:
    """The sliding window w transformers' attention applies for ``config`` (None without one)."""
    read = WINDOWS.get(str(config.get("model_type")))
    if read is None:
        return None
    field, switch, default = read
    c = Fields(config)
    if switch is not None and not c.flag(switch, False):
        return None
    if field in config and config[field] is None:
        return None
    return c.size(field, default) if default is not None else (
        c.size(field) if config.get(field) is not None else None)


#: model_type -> (the legacy top-level field, its class default) of a partial rotary head
#: (configuration_phi3.py / configuration_gpt_neox.py __post_init__: rope_parameters'
#: partial_rotary_factor, else the top-level field, else the default).
PARTIAL_ROTARY = {"phi3": ("partial_rotary_factor", 1.0), "gpt_neox": ("rotary_pct", 0.25)}


def rotary_width(config: Mapping[str, Any], head_dim: int) -> int | None:
    """The cos / sin width of a partial rotary config, None where RoPE turns whole heads.

    Phi3RotaryEmbedding (GPTNeoXRotaryEmbedding alike).compute_default_rope_parameters: dim = int(head_dim * factor), one
    frequency per even index below dim, cos = cat(freqs, freqs): 2 ceil(dim / 2) wide.
    """
    if config.get("model_type") not in PARTIAL_ROTARY:
        return None
    legacy, default = PARTIAL_ROTARY[config["model_type"]]
    found = [config[field].get("partial_rotary_factor") for field in ("rope_parameters", "rope_scaling")
             if isinstance(config.get(field), dict)]
    factor = next((value for value in [*found, config.get(legacy)] if value is not None), default)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"{legacy}: must be a number in (0, 1], got {factor!r}")
    if factor == 1:
        return None
    dim = int(head_dim * factor)   # 0 is allowed: transformers then turns nothing
    return 2 * -(-dim // 2)


#: model_type -> (the config field of its default pattern or None, its default period) of a
#: family whose layers alternate sliding and full attention: without layer_types, layer i slides
#: unless i + 1 is a multiple of the period (Gemma2Config.__post_init__: 2;
#: Gemma3TextConfig.__post_init__: sliding_window_pattern, 6; GptOssConfig.__post_init__: 2).
LAYER_TYPES = {"gemma2": (None, 2), "gemma3_text": ("sliding_window_pattern", 6), "gpt_oss": (None, 2)}
SLIDING, FULL = "sliding_attention", "full_attention"
#: model_type -> (the config field, its class default) of the first sliding layer of a Qwen family
#: without layer_types: layer i slides where the window is on (use_sliding_window) and i is at
#: least max_window_layers (configuration_qwen2.py / configuration_qwen3.py __post_init__).
QWEN_WINDOW_LAYERS = {"qwen2": ("max_window_layers", 28), "qwen3": ("max_window_layers", 28)}


def layer_types(config: Mapping[str, Any], layers: int) -> list[str] | None:
    """Each layer's attention (sliding_attention / full_attention) as transformers builds it.

    None for other families, and for a Qwen config with neither layer_types nor a window (every
    layer full_attention, the Llama layer).
    """
    if config.get("model_type") not in (*LAYER_TYPES, *QWEN_WINDOW_LAYERS):
        return None
    if (config["model_type"] in QWEN_WINDOW_LAYERS and config.get("layer_types") is None
            and sliding_window(config) is None):
        return None
    listed = config.get("layer_types")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != layers or any(
                kind not in (SLIDING, FULL) for kind in listed):
            raise ValueError(f"layer_types: must list {SLIDING!r} or {FULL!r} for each of the "
                             f"num_hidden_layers = {layers} layers, got {listed!r}")
        return list(listed)
    if config["model_type"] in QWEN_WINDOW_LAYERS:
        field, first = QWEN_WINDOW_LAYERS[config["model_type"]]
        first = config.get(field, first)
        if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= MAX_SIZE:
            raise ValueError(f"{field}: must be a non-negative integer up to 2^53, got {first!r}")
        on = sliding_window(config) is not None
        return [SLIDING if on and i >= first else FULL for i in range(layers)]
    field, period = LAYER_TYPES[config["model_type"]]
    if field is not None:
        period = Fields(config).size(field, period)
    return [SLIDING if (i + 1) % period else FULL for i in range(layers)]


#: model_type -> (Layout field, config field, the config class's default) of each tanh
#: soft-capping transformers applies: Gemma2Attention passes attn_logit_softcapping to the
#: attention function, Gemma2ForCausalLM / Gemma3ForCausalLM.forward cap the logits with
#: final_logit_softcapping; Gemma3Attention.forward passes no softcap (its field changes nothing).
SOFTCAPPING = {
    "gemma2": (("attention_softcap", "attn_logit_softcapping", 50.0),
               ("logit_softcap", "final_logit_softcapping", 30.0)),
    "gemma3_text": (("logit_softcap", "final_logit_softcapping", None),),
}


def glu_limit(config: Mapping[str, Any]) -> float | None:
    """The config's clamp of the GLU input (``swiglu_limit``, GPT-OSS's: transformers' GptOssExperts clamps gate and
    up to it; Megatron-Bridge's gpt_oss_bridge.py sets activation_func_clamp_value from it), or None."""
    value = config.get("swiglu_limit")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise ValueError(f"swiglu_limit: must be a positive number or null, got {value!r}")
    return None if value is None else float(value)


def softcapping(config: Mapping[str, Any]) -> dict[str, bool]:
    """Layout field -> whether transformers soft-caps there (a number, or the class default when absent; null: no cap)."""
    found = {}
    for row, name, default in SOFTCAPPING.get(str(config.get("model_type")), ()):
        value = config[name] if name in config else default
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value > 0):
            raise ValueError(f"{name}: must be a positive number or null, got {value!r}")
        found[row] = value is not None
    return found


#: model_type -> the dropout probabilities its modeling code applies in training and their config
#: class defaults (configuration_<family>.py); every other family: attention_dropout, 0.
DROPOUT: dict[str, tuple[tuple[str, float], ...]] = {
    "phi3": (("attention_dropout", 0.0), ("resid_pdrop", 0.0), ("embd_pdrop", 0.0)),
    "gpt_neox": (("attention_dropout", 0.0), ("hidden_dropout", 0.0)),
    "gpt2": (("attn_pdrop", 0.1), ("resid_pdrop", 0.1), ("embd_pdrop", 0.1)),
}
ATTENTION_DROPOUT = (("attention_dropout", 0.0),)


def dropout(config: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """(field, p) of each dropout the config turns on (p > 0, or a class default above 0 when absent)."""
    found = []
    for name, default in DROPOUT.get(str(config.get("model_type")), ATTENTION_DROPOUT):
        value = config.get(name)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(f"{name}: must be a probability in [0, 1), got {value!r}")
        if value > 0:
            found.append((name, float(value)))
    return tuple(found)


#: model_type -> (config field, the values whose saved tensors derive lists, the class default):
#: GPT2Attention._upcast_and_reordered_attn (fp32 baddbmm) and any activation but gelu_new
#: (NewGELUActivation) keep other tensors, and without use_cache no DynamicCache copies k and v
#: (models/gpt2/modeling_gpt2.py, activations.py, cache_utils.py DynamicLayer.update); Gemma's
#: rows are gelu_pytorch_tanh's, and Gemma3TextConfig's use_bidirectional_attention halves the
#: window and drops the causal mask (configuration_gemma3.py __post_init__).
SAVED_SETTINGS: dict[str, tuple[tuple[str, tuple[Any, ...], Any], ...]] = {
    "gpt2": (("reorder_and_upcast_attn", (False,), False),
             ("activation_function", ("gelu_new",), "gelu_new"),
             ("use_cache", (True,), True)),
    "gemma2": (("hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh"),),
    "gemma3_text": (("hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh"),
                    ("use_bidirectional_attention", (False, None), False)),
}


def unmodelled(config: Mapping[str, Any]) -> tuple[str, ...]:
    """"field = value" of each setting whose saved tensors derive does not list (the parameters do not change)."""
    found = []
    for name, modelled, default in SAVED_SETTINGS.get(str(config.get("model_type")), ()):
        value = config.get(name, default)
        if value not in modelled:
            found.append(f"{name} = {value!r}")
    return tuple(found)
