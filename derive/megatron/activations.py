"""First-stage activation bytes under Megatron's convention (megatron/training/theoretical_memory_usage.py
compute_activation_memory, compute_activation_memory_without_sp, core_v0.18.0).

The estimators read derive's saved-for-backward tables (``derive.accounts.activations``)
and no MoE, MLA or MTP field: the layer is the GPT table (MHA, GELU, f the real MLP
width) whatever the model - GQA, head width, SwiGLU and experts are not seen -; the
score matrices are dropped (selective recompute); norm statistics are not counted.

* ``compute_activation_memory`` (sequence parallel + selective recompute): every row
  over t; the embedding keeps int64 token ids and a dropout mask; with one stage the
  output edge is the final norm's input, the head's input and the fp32 logits;
* ``compute_activation_memory_without_sp``: the same table at f = 4h (the real f is
  ignored), ``tp_shardable`` rows over t; with one stage the output edge is the head's
  input and the bf16 logits; everything times the 21/20 overhead;
* the first pipeline stage: the chunks in flight of the 1F1B schedule (at most m when
  ``num_microbatches`` is given) or of the interleaved one (not capped by m), L/(p v)
  layers each.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.activations import first_stage_activation_bytes, sharded
from derive.architectures.operations.edges import output_saved
from derive.conventions.megatron import MEGATRON_OVERHEAD
from derive.expansion import expand
from derive.symbols import FFN_4H, m, p, t, v
from derive.tensors import Ledger

#: Megatron's layer: the GPT table with materialised attention, scores dropped (selective recompute).
MEGATRON_LAYER = {"profile": "gpt", "attention_kernel": "materialised", "recompute": "selective"}


def output_rows(sequence_parallel: bool) -> Ledger:
    """The output edge Megatron counts at p = 1, on one TP rank (theoretical_memory_usage.py)."""
    rows = output_saved()
    if sequence_parallel:      # final norm input, head input, fp32 logits: 4sbh(1 + V/h), over t
        return sharded(rows.without("transient", "token_ids"), t, True)
    # without SP: "outputs from final layer norm" (the head input) and the bf16 logits
    return sharded(Ledger([rows["output projection input"], rows["logits"]]), t, False)


@lru_cache(maxsize=None)
def activation_bytes(sequence_parallel: bool, single_stage: bool, interleaved: bool,
                     micro_batches: bool) -> sp.Expr:
    """First-stage activation bytes per GPU under Megatron's convention, in s b h f L V t p v m."""
    total = first_stage_activation_bytes(
        **MEGATRON_LAYER, tensor_parallel=t, sequence_parallel=sequence_parallel,
        pipeline=p, virtual=v if interleaved else None,
        micro_batches=m if micro_batches and not interleaved else None, output_layer=False)
    if single_stage:
        total += output_rows(sequence_parallel).bytes()
    if sequence_parallel:
        return expand(total)
    return expand(MEGATRON_OVERHEAD * total.subs(FFN_4H))
