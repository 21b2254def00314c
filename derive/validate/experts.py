"""transformers' own MoE and MLA modeling code against derive's ``eager`` MoE tables, tensor by tensor.

Tiny Mixtral, Qwen3-MoE and DeepSeek-V3 configs (CPU, bf16, eager attention,
transformers' default grouped_mm experts) run one forward to the loss under
``saved_tensors_hooks``; every allocation autograd keeps (deduplicated by
storage, parameters and buffers excluded: ``derive.validate.measure``) is
matched with a row of ``derive.architectures.saved`` by dtype and element
count. Tensors packed by backward nodes the loss does not reach (DeepSeek-V3's
group-limited routing) are freed after the forward and listed apart.
"""
from __future__ import annotations

import warnings
from collections import Counter
from typing import Mapping

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import sympy as sp  # noqa: E402
import torch  # noqa: E402

from derive.architectures.decoder import Layout, moe_layout  # noqa: E402
from derive.architectures.operations.experts import group_routing_rows  # noqa: E402
from derive.architectures.saved import eager_edges, eager_layer  # noqa: E402
from derive.symbols import (E, k_E, V, a, b, k_nope, k_rope, k_v, f, f_E, f_S, g, h,  # noqa: E402
                            k, k_g, n_g, r_kv, r_q, s)
from derive.tensors import Ledger  # noqa: E402
from derive.validate import measure  # noqa: E402

measure.DTYPE_NAMES.setdefault(torch.int32, "int32")

#: transformers config fields -> derive symbols, per family.
FIELDS: dict[str, dict[str, sp.Symbol]] = {
    "common": {"hidden_size": h, "num_attention_heads": a, "vocab_size": V,
               "num_experts_per_tok": k_E, "intermediate_size": f},
    "mixtral": {"num_key_value_heads": g, "num_local_experts": E, "head_dim": k},
    "qwen3_moe": {"num_key_value_heads": g, "num_experts": E, "moe_intermediate_size": f_E,
                  "head_dim": k},
    "deepseek_v3": {"n_routed_experts": E, "moe_intermediate_size": f_E, "q_lora_rank": r_q,
                    "kv_lora_rank": r_kv, "qk_nope_head_dim": k_nope, "qk_rope_head_dim": k_rope,
                    "v_head_dim": k_v, "n_group": n_g, "topk_group": k_g},
}

#: (family, config, batch, sequence): tiny shapes, odd sizes, MHA and GQA, MLA with and without a query latent.
CASES: tuple[tuple[str, dict, int, int], ...] = (
    ("mixtral", dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=8, intermediate_size=48, num_local_experts=4, num_experts_per_tok=2,
                     vocab_size=64), 2, 8),
    ("mixtral", dict(num_hidden_layers=3, hidden_size=48, num_attention_heads=6, num_key_value_heads=6,
                     head_dim=8, intermediate_size=40, num_local_experts=5, num_experts_per_tok=3,
                     vocab_size=71), 1, 11),
    ("qwen3_moe", dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, intermediate_size=48, moe_intermediate_size=24, num_experts=4,
                       num_experts_per_tok=2, norm_topk_prob=True, vocab_size=64), 2, 8),
    ("qwen3_moe", dict(num_hidden_layers=2, hidden_size=40, num_attention_heads=5, num_key_value_heads=1,
                       head_dim=12, intermediate_size=48, moe_intermediate_size=24, num_experts=6,
                       num_experts_per_tok=2, norm_topk_prob=False, vocab_size=50), 3, 7),
    ("deepseek_v3", dict(num_hidden_layers=2, first_k_dense_replace=1, hidden_size=32,
                         num_attention_heads=4, num_key_value_heads=4, intermediate_size=48,
                         moe_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2,
                         n_shared_experts=1, q_lora_rank=16, kv_lora_rank=8, qk_nope_head_dim=8,
                         qk_rope_head_dim=4, v_head_dim=8, n_group=2, topk_group=1,
                         vocab_size=64), 2, 8),
    ("deepseek_v3", dict(num_hidden_layers=3, first_k_dense_replace=1, hidden_size=24,
                         num_attention_heads=3, num_key_value_heads=3, intermediate_size=40,
                         moe_intermediate_size=16, n_routed_experts=6, num_experts_per_tok=3,
                         n_shared_experts=2, q_lora_rank=None, kv_lora_rank=10, qk_nope_head_dim=6,
                         qk_rope_head_dim=2, v_head_dim=5, n_group=3, topk_group=2,
                         vocab_size=45), 1, 9),
    ("qwen3_moe", dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=8, intermediate_size=48, moe_intermediate_size=16, num_experts=3,
                       num_experts_per_tok=3, norm_topk_prob=True, vocab_size=40), 1, 10),
    ("deepseek_v3", dict(num_hidden_layers=2, first_k_dense_replace=0, hidden_size=32,
                         num_attention_heads=2, num_key_value_heads=2, intermediate_size=48,
                         moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=1,
                         n_shared_experts=1, q_lora_rank=8, kv_lora_rank=8, qk_nope_head_dim=4,
                         qk_rope_head_dim=4, v_head_dim=6, n_group=1, topk_group=1,
                         norm_topk_prob=False, vocab_size=30), 1, 6),
)


def features(family: str, config: Mapping[str, object]) -> Layout:
    """The table features a transformers config asks for."""
    if family == "deepseek_v3":
        attention = "mla" if config.get("q_lora_rank") is not None else "mla-direct"
        return moe_layout(attention, shared=True, router="sigmoid-grouped",
                           normalise_topk=bool(config.get("norm_topk_prob", True)))
    if family == "qwen3_moe":
        return moe_layout("gqa", qk_norm=True, weights_dtype="bf16",
                           normalise_topk=bool(config["norm_topk_prob"]))
    return moe_layout("gqa")


def values(family: str, config: Mapping[str, object], batch: int, seq: int) -> dict[sp.Symbol, int]:
    """Symbol -> value for one case."""
    out = {symbol: config[name] for name, symbol in {**FIELDS["common"], **FIELDS[family]}.items()
           if config.get(name) is not None}
    out.update({b: batch, s: seq})
    if family == "mixtral":
        out[f_E] = config["intermediate_size"]
    if family == "deepseek_v3":
        out[f_S] = config["moe_intermediate_size"] * config["n_shared_experts"]
    return out


def predicted(family: str, config: Mapping[str, object], batch: int, seq: int) -> tuple[Ledger, Ledger]:
    """(rows autograd keeps for the loss, rows kept only by unreachable nodes) at one case."""
    feats = features(family, config)
    dense = config.get("first_k_dense_replace", 0)
    layers = config["num_hidden_layers"]
    table = eager_edges(feats, batch == 1)
    for index in range(layers):
        table = table + eager_layer(feats, index >= dense, batch == 1)
    unreachable = Ledger()
    if feats.moe.router == "sigmoid-grouped":
        unreachable = group_routing_rows().times(layers - dense)
    numbers = {symbol: sp.Integer(n) for symbol, n in values(family, config, batch, seq).items()}
    fix = lambda ledger: ledger.map(lambda w: type(w)(w.name, tuple(sp.sympify(n).xreplace(numbers)  # noqa: E731
                                                                    for n in w.shape),
                                                       w.dtype, w.tags, w.count.xreplace(numbers),
                                                       w.note))
    return fix(table), fix(unreachable)


def measured(family: str, config: Mapping[str, object], batch: int, seq: int) -> tuple[list, list]:
    """(saved allocations reachable from the loss, allocations only unreachable nodes keep)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(family, **config)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").to(torch.bfloat16)
    model.train()
    tokens = torch.randint(0, config["vocab_size"], (batch, seq))
    own = {measure._storage(t) for t in (*model.parameters(), *model.buffers())}
    packed: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        packed.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(input_ids=tokens, labels=tokens).loss
    holders = measure._holders(loss.grad_fn)
    by_storage: dict[int, list[torch.Tensor]] = {}
    for tensor in packed:
        if measure._storage(tensor) not in own:
            by_storage.setdefault(measure._storage(tensor), []).append(tensor)
    rows = [row for views in by_storage.values() for row in measure._allocation(views, holders)]
    return ([row for row in rows if row.saved_by != ("?",)],
            [row for row in rows if row.saved_by == ("?",)])


def _counts(rows) -> Counter:
    return Counter((row.dtype, int(row.numel)) for row in rows)


def _ledger_counts(ledger: Ledger) -> Counter:
    counts: Counter = Counter()
    for w in ledger:
        counts[(w.dtype, int(sp.Mul(*w.shape)))] += int(w.count)
    return counts


def compare(family: str, config: Mapping[str, object], batch: int, seq: int) -> dict:
    """Rows and bytes, predicted against measured, for one case."""
    table, unreachable = predicted(family, config, batch, seq)
    kept, freed = measured(family, config, batch, seq)
    return {
        "family": family, "b": batch, "s": seq,
        "predicted_bytes": int(table.bytes()), "measured_bytes": sum(r.bytes for r in kept),
        "missing": _ledger_counts(table) - _counts(kept),
        "extra": _counts(kept) - _ledger_counts(table),
        "unreachable_agree": _ledger_counts(unreachable) == _counts(freed),
        "rows": len(kept),
    }


def run() -> bool:
    """Every case; prints one line each; True when all agree exactly."""
    ok = True
    for family, config, batch, seq in CASES:
        result = compare(family, config, batch, seq)
        agree = (not result["missing"] and not result["extra"] and result["unreachable_agree"]
                 and result["predicted_bytes"] == result["measured_bytes"])
        ok &= agree
        print(f"{'ok  ' if agree else 'FAIL'} {family:12s} b={batch} s={seq:<3d} rows={result['rows']:<4d} "
              f"predicted={result['predicted_bytes']} measured={result['measured_bytes']}"
              + ("" if agree else f" missing={dict(result['missing'])} extra={dict(result['extra'])}"))
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if run() else 1)
