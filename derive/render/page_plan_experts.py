"""The planner on the page for MoE presets: derive.planning.experts' ranks' memory, printed for plan.js.

derive plan plans the MoE presets (derive.presets.MOE_PRESETS) over the dense candidates crossed with e and t_E
(derive.planning.layouts.expert_layouts) with the most loaded of ranks 0, 1 and p - 1 (the one rank at p = 1)
as derive.planning.experts.rank_memory counts it. Its terms (derive.planning.experts.rank_terms: parameters of
the edges and of one dense and one MoE layer, bytes per parameter of each resident state buffer, bytes of each
saved tensor, chunks held) are printed here per ZeRO stage, recompute policy and rank with s left a symbol;
plan.js sums them as rank_memory does (derive.planning.experts.rank_layers' layers, each buffer and tensor as
the caching allocator hands it out) and times the layouts that fit with the step card's functions.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.comm import context_modelled
from derive.accounts.framework_placements import stage_placements
from derive.planning.experts import ONE_LAYER, PLACEMENT, RANKS, rank_terms
from derive.presets import MODELS, MOE_PRESETS
from derive.render.page_comm import comm_models
from derive.render.page_step import StepFunctions
from derive.symbols import E, L, L_E, f_E

#: The model sizes the printed terms keep as symbols (the page's --seq).
KEPT = ("s",)


def expert_models(functions: StepFunctions) -> dict[str, dict[str, object]]:
    """Per MoE preset the page names: the config's sizes the candidates read, the preset's expert sizes and
    layers, and per ``recompute|zero|rank`` its printed terms (function indices of ``functions``)."""
    out = {}
    for name in MOE_PRESETS:
        config = comm_models().get(name)
        if config is None:
            continue
        entry = MODELS[name]
        variants = {}
        for recompute in RECOMPUTE_POLICIES:
            for zero in sorted(stage_placements(PLACEMENT)):
                for rank in ("whole", *RANKS):
                    terms = rank_terms(entry, zero, recompute, rank, KEPT)
                    variants[f"{recompute}|{zero}|{rank}"] = {
                        "parameters": {kind: [functions.index(part) for part in parts]
                                       for kind, parts in terms.parameters.items()},
                        "buffers": [[functions.index(rest), functions.index(expert)] for rest, expert in terms.buffers],
                        "saved": {kind: [functions.index(size) for size in sizes] for kind, sizes in terms.saved.items()},
                        "held": functions.index(sp.sympify(terms.held / terms.chunks)),
                    }
        values = entry.values
        out[name] = {"heads": config.heads, "kv_heads": config.kv_heads, "layers": config.layers, "ffn": config.ffn,
                     "seq": entry.seq, "experts": int(values[E]), "expert_ffn": int(values[f_E]),
                     "total_layers": int(values[L]), "moe_layers": int(values.get(L_E, values[L])),
                     "kinds": list(ONE_LAYER), "variants": variants,
                     # c > 1 refused under REASONS' "context" (derive.planning.experts.expert_plan)
                     "context_unmodelled": not context_modelled(config)}
    return out
