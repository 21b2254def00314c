"""``python -m derive.validate --hf``: derive's parameter tables against transformers' own models, tensor by tensor.

For every family derive reads (derive.hf_families.FAMILIES) the grid holds the config
class defaults, at least one published config (derive/configs) and odd variants.
transformers builds each with ``AutoModelForCausalLM.from_config`` on the meta
device (no memory, no weights); its ``named_parameters()`` (tied weights once)
are compared with derive's rows expanded layer by layer, name by name and shape
by shape, and the totals with ``Model.parameters``. Exact, or it fails.

Layout mapping (derive writes each matrix [in, out] and one tensor per expert,
as the published checkpoints do; transformers stores otherwise):
  * nn.Linear stores [out, in]: derive's shape reversed. GPT-2's Conv1D stores
    [in, out]: derive's shape as is.
  * transformers 5 stacks the E routed experts of a layer into
    ``mlp.experts.gate_up_proj`` [E, 2 f_E, h] (gate then up, each [out, in]) and
    ``mlp.experts.down_proj`` [E, h, f_E]; derive's ``mlp.experts.*.{gate,up,down}_proj.weight``
    rows (count E) map onto them.
  * derive's ``buffer`` rows (DeepSeek-V3's e_score_correction_bias) are checked
    against transformers' buffers of the same name, outside N.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import sympy as sp

from derive.architectures.tables import model_rows
from derive.hf import from_config, published_config
from derive.model import Model
from derive.tensors import Tensor

#: Families whose projections are GPT-2's Conv1D ([in, out], transformers/pytorch_utils.py).
CONV1D = {"gpt2"}

#: transformers 5 stacked experts: the stacked parameter -> derive's per-expert rows, in order.
STACKED = {
    "experts.gate_up_proj": ("experts.*.gate_proj.weight", "experts.*.up_proj.weight"),
    "experts.down_proj": ("experts.*.down_proj.weight",),
}
#: GPT-OSS stacks its experts [E, in, out] with biases (GptOssExperts, modeling_gpt_oss.py):
#: gate_up_proj [E, h, 2 f_E] (gate and up interleaved), gate_up_proj_bias [E, 2 f_E],
#: down_proj [E, f_E, h], down_proj_bias [E, h].
STACKED_BIASED = {
    **STACKED,
    "experts.gate_up_proj_bias": ("experts.*.gate_proj.bias", "experts.*.up_proj.bias"),
    "experts.down_proj_bias": ("experts.*.down_proj.bias",),
}
#: Families whose stacked expert matrices are [E, in, out] (the others: [E, out, in]).
STACKED_IN_OUT = {"gpt_oss"}

#: Fields of a published config that configure loading, not the model's shapes.
LOADING_ONLY = ("architectures", "auto_map", "quantization_config", "transformers_version",
                "torch_dtype", "_name_or_path")


@dataclass(frozen=True)
class Case:
    """One config to build: the family, what it is, and the config's fields."""

    model_type: str
    label: str
    config: Mapping[str, Any]


def _published(name: str, **changes: Any) -> dict[str, Any]:
    return {**published_config(name), **changes}


#: model_type -> (published config, odd variants as changes to it).
GRID: dict[str, tuple[str, tuple[tuple[str, dict[str, Any]], ...]]] = {
    "llama": ("meta-llama-3-8b", (
        ("tied, biases, head_dim != h/a", dict(num_hidden_layers=2, hidden_size=96,
         num_attention_heads=6, num_key_value_heads=2, head_dim=24, intermediate_size=160,
         vocab_size=131, tie_word_embeddings=True, attention_bias=True, mlp_bias=True)),)),
    "mistral": ("mistral-7b-v0.1", (
        ("MQA, head_dim != h/a, tied", dict(num_hidden_layers=3, hidden_size=80,
         num_attention_heads=5, num_key_value_heads=1, head_dim=32, intermediate_size=96,
         vocab_size=97, tie_word_embeddings=True)),)),
    "qwen2": ("qwen2.5-7b", (
        ("tied, kv heads 1", dict(num_hidden_layers=2, hidden_size=96, num_attention_heads=3,
         num_key_value_heads=1, intermediate_size=100, vocab_size=103, tie_word_embeddings=True)),)),
    "qwen3": ("qwen3-8b", (
        ("0.6B: tied, head_dim 2 h/a", dict(published_config("qwen3-0.6b"))),
        ("attention bias, odd sizes", dict(num_hidden_layers=2, hidden_size=72,
         num_attention_heads=6, num_key_value_heads=3, head_dim=16, intermediate_size=88,
         vocab_size=89, attention_bias=True)),)),
    "gemma2": ("gemma-2-9b", (
        ("untied, attention bias", dict(num_hidden_layers=2, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=2, head_dim=48, intermediate_size=80,
         vocab_size=77, tie_word_embeddings=False, attention_bias=True)),)),
    "gemma3_text": ("gemma-3-1b-pt", (
        ("untied, GQA 4:2", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
         num_key_value_heads=2, head_dim=40, intermediate_size=72, vocab_size=71,
         tie_word_embeddings=False)),)),
    "phi3": ("phi-3-mini-4k-instruct", (
        ("GQA, tied", dict(num_hidden_layers=2, hidden_size=96, num_attention_heads=6,
         num_key_value_heads=2, intermediate_size=136, vocab_size=91,
         tie_word_embeddings=True, pad_token_id=0)),)),
    "gpt2": ("gpt2", (
        ("n_inner, untied", dict(n_layer=2, n_embd=48, n_head=3, n_inner=100, n_positions=40,
         vocab_size=61, tie_word_embeddings=False)),)),
    "gpt_neox": ("gpt-neox-20b", (
        ("no attention bias, tied, serial", dict(num_hidden_layers=2, hidden_size=64,
         num_attention_heads=4, intermediate_size=200, vocab_size=67, attention_bias=False,
         tie_word_embeddings=True, use_parallel_residual=False)),)),
    "olmo2": ("olmo-2-1124-7b", (
        ("GQA, attention bias", dict(num_hidden_layers=2, hidden_size=96,
         num_attention_heads=6, num_key_value_heads=2, intermediate_size=100, vocab_size=83,
         attention_bias=True, pad_token_id=0)),)),
    "mixtral": ("mixtral-8x7b-v0.1", (
        ("4 experts, top-1, tied", dict(num_hidden_layers=2, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=2, intermediate_size=40, vocab_size=59,
         num_local_experts=4, num_experts_per_tok=1, tie_word_embeddings=True)),)),
    "qwen2_moe": ("qwen1.5-moe-a2.7b", (
        ("sparse step 2, mlp-only layer 0", dict(num_hidden_layers=5, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, vocab_size=53,
         num_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
         shared_expert_intermediate_size=40, decoder_sparse_step=2, mlp_only_layers=[0, 3])),)),
    "qwen3_moe": ("qwen3-30b-a3b", (
        ("sparse step 3, mlp-only layer 2, tied", dict(num_hidden_layers=6, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=1, head_dim=32, intermediate_size=72,
         vocab_size=47, num_experts=5, num_experts_per_tok=2, moe_intermediate_size=20,
         decoder_sparse_step=3, mlp_only_layers=[2], tie_word_embeddings=True)),)),
    "gpt_oss": ("gpt-oss-120b", (
        ("no attention bias, 6 experts top-2, head_dim 24, tied", dict(num_hidden_layers=3, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=2, head_dim=24, intermediate_size=40, vocab_size=61,
         num_local_experts=6, num_experts_per_tok=2, attention_bias=False, tie_word_embeddings=True,
         layer_types=["sliding_attention", "full_attention", "sliding_attention"], pad_token_id=0)),)),
    "deepseek_v2": ("deepseek-v2-lite", (
        ("query compression, biases", dict(num_hidden_layers=3, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=4, intermediate_size=96, vocab_size=71,
         q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
         v_head_dim=12, n_routed_experts=6, num_experts_per_tok=2, moe_intermediate_size=20,
         n_shared_experts=3, first_k_dense_replace=2, attention_bias=True, mlp_bias=True)),)),
    "deepseek_v3": ("deepseek-v3", (
        ("no query compression, tied", dict(num_hidden_layers=3, hidden_size=64,
         num_attention_heads=4, num_key_value_heads=4, intermediate_size=96, vocab_size=71,
         q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
         v_head_dim=12, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=20,
         n_shared_experts=2, first_k_dense_replace=1, n_group=2, topk_group=1,
         tie_word_embeddings=True)),)),
}


def default_config(model_type: str) -> dict[str, Any]:
    """The fields of transformers' config class for ``model_type`` at its defaults."""
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type).to_dict()


def cases() -> list[Case]:
    """Every family: class defaults, the published config, the odd variants."""
    out = []
    for model_type, (published, variants) in GRID.items():
        out.append(Case(model_type, "config class defaults", default_config(model_type)))
        out.append(Case(model_type, f"published: {published}", published_config(published)))
        base = published_config(published)
        out += [Case(model_type, label, {**base, **changes}) for label, changes in variants]
    return out


# ---- derive's side: rows expanded into transformers' parameter names ----

def _numbers(expr: sp.Expr, model: Model) -> int:
    return int(model.subs(expr))


def _stored(row: Tensor, shape: tuple[int, ...], model_type: str) -> tuple[int, ...]:
    """The shape transformers stores a row in: nn.Linear transposes; vectors, embeddings and GPT-2's layer Conv1D do not."""
    if (len(shape) != 2 or row.has("embedding") or row.has("position")
            or (model_type in CONV1D and row.has("layer"))):
        return shape
    return shape[1], shape[0]


def derive_tensors(config: Mapping[str, Any]) -> tuple[dict[str, tuple[int, ...]],
                                                       dict[str, tuple[int, ...]]]:
    """(parameters, buffers): transformers' name -> shape, as derive's table predicts them."""
    model = from_config(config)
    layout = model.layout
    model_type = config["model_type"]
    params: dict[str, tuple[int, ...]] = {}
    buffers: dict[str, tuple[int, ...]] = {}
    moe_layers = set(model.moe_layers)
    rows = model_rows(layout)
    for row in rows.without("routed_expert"):
        numeric = _stored(row, tuple(_numbers(n, model) for n in row.shape), model_type)
        target = buffers if row.has("buffer") else params
        if not row.has("layer"):
            target[row.name] = numeric
            continue
        for i in range(model.layers):
            if not ((row.has("moe_layer") and i not in moe_layers)
                    or (row.has("dense_layer") and i in moe_layers)):
                target[f"{layout.names['layers']}.{i}.{row.name}"] = numeric
    experts = dict(model.sizes).get("E", 0)
    for i in sorted(moe_layers):
        prefix = f"{layout.names['layers']}.{i}.{layout.moe.prefix}."
        for stacked, members in (STACKED_BIASED if layout.moe.expert_bias else STACKED).items():
            shapes = [rows[f"{layout.moe.prefix}.{member}"].shape for member in members]
            width = sum(_numbers(shape[-1], model) for shape in shapes)
            if len(shapes[0]) == 1:
                params[prefix + stacked] = (experts, width)
            elif model_type in STACKED_IN_OUT:
                params[prefix + stacked] = (experts, _numbers(shapes[0][0], model), width)
            else:
                params[prefix + stacked] = (experts, width, _numbers(shapes[0][0], model))
    return params, buffers


# ---- transformers' side ----

def transformers_config(config: Mapping[str, Any]):
    """The transformers config object for ``config`` (loading-only fields dropped)."""
    from transformers import AutoConfig

    fields = {key: value for key, value in config.items()
              if key not in LOADING_ONLY and key != "model_type"}
    return AutoConfig.for_model(config["model_type"], **fields)


def transformers_tensors(config: Mapping[str, Any]) -> tuple[dict[str, tuple[int, ...]],
                                                             dict[str, tuple[int, ...]]]:
    """(parameters, buffers) of ``AutoModelForCausalLM.from_config`` on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(transformers_config(config))
    return ({name: tuple(p.shape) for name, p in model.named_parameters()},
            {name: tuple(b.shape) for name, b in model.named_buffers()})


def causal_lm(model_type: str, implementation: str, v: Mapping[str, int]):
    """transformers' ``model_type`` ForCausalLM at shape ``v`` (bf16, training mode) and its loss forward."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()
    config = transformers_config(dict(
        model_type=model_type, num_hidden_layers=v["L"], hidden_size=v["h"],
        num_attention_heads=v["a"], num_key_value_heads=v["g"], head_dim=v["h"] // v["a"],
        intermediate_size=v["f"], vocab_size=v["V"], max_position_embeddings=max(v["s"], 64),
        tie_word_embeddings=False))
    model = AutoModelForCausalLM.from_config(config, attn_implementation=implementation,
                                             dtype=torch.bfloat16)
    model.train()
    tokens = torch.randint(0, v["V"], (v["b"], v["s"]))
    labels = torch.randint(0, v["V"], (v["b"], v["s"]))
    return model, lambda: model(input_ids=tokens, labels=labels).loss


def compare(case: Case) -> dict[str, object]:
    """One case: every tensor's name and shape, and the totals."""
    predicted, predicted_buffers = derive_tensors(case.config)
    built, built_buffers = transformers_tensors(case.config)
    wrong = sorted(name for name in set(predicted) & set(built) if predicted[name] != built[name])
    numel = {name: int(sp.prod(shape)) for name, shape in built.items()}
    model = from_config(case.config)
    buffers_wrong = sorted(name for name, shape in predicted_buffers.items()
                           if built_buffers.get(name) != shape)
    result = {
        "model_type": case.model_type, "case": case.label,
        "tensors": len(built), "derive_parameters": model.parameters,
        "transformers_parameters": sum(numel.values()),
        "only_in_derive": sorted(set(predicted) - set(built)),
        "only_in_transformers": sorted(set(built) - set(predicted)),
        "shape_mismatches": [{"name": n, "derive": predicted[n], "transformers": built[n]}
                             for n in wrong],
        "buffer_mismatches": buffers_wrong, "buffers_checked": len(predicted_buffers),
    }
    result["passed"] = (not result["only_in_derive"] and not result["only_in_transformers"]
                        and not wrong and not buffers_wrong
                        and result["derive_parameters"] == result["transformers_parameters"])
    return result


def run() -> list[dict[str, object]]:
    """Every case of the grid."""
    return [compare(case) for case in cases()]


def print_table(results: list[dict[str, object]]) -> None:
    """One line per case; the differing tensors under a failing one."""
    header = f"{'model_type':12} {'case':40} {'tensors':>8} {'N: derive':>16} {'transformers':>16}  ok"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['model_type']:12} {r['case'][:40]:40} {r['tensors']:>8} "
              f"{r['derive_parameters']:>16,} {r['transformers_parameters']:>16,}  "
              f"{'ok' if r['passed'] else 'MISMATCH'}")
        for key in ("only_in_derive", "only_in_transformers", "shape_mismatches",
                    "buffer_mismatches"):
            for item in r[key][:8]:
                print(f"    {key}: {item}")
