"""Where each framework keeps the resident state (the article, section 2.3), from derive.accounts.placement."""
from __future__ import annotations

from derive.accounts.placement import placement_table
from derive.render.sheet import Column, Section, Table, math_cell, text_cell

PER_PARAMETER = "B/param per rank"


def placements_table(rows: list[dict[str, object]]) -> Table:
    """One row per profile: bytes per parameter unsharded and sharded over d, transient bytes, source."""
    return Table(
        "placement", "Framework placement of the resident state",
        (Column("placement", "profile", width="0.13\\linewidth"),
         Column("framework", "framework", width="0.17\\linewidth"),
         Column("bytes_per_parameter", "unsharded", unit=PER_PARAMETER),
         Column("sharded_bytes_per_parameter", "sharded over d", unit=PER_PARAMETER),
         Column("transient_bytes", "transient (sharded)", unit="B"),
         Column("source", "source", width="0.27\\linewidth")),
        tuple({"placement": text_cell(row["placement"]), "framework": text_cell(row["framework"]),
               "bytes_per_parameter": math_cell(row["bytes_per_parameter"]),
               "sharded_bytes_per_parameter": math_cell(row["sharded_bytes_per_parameter"]),
               "transient_bytes": math_cell(row["transient_bytes"]),
               "source": text_cell(row["source"])} for row in rows),
        note="Every profile lands in [16N, 18N] unsharded. Transient tensors live inside one step "
             "(N parameters, L layers, d data-parallel ranks).",
    )


def placement_tensors_table(rows: list[dict[str, object]]) -> Table:
    """Every tensor of every profile: dtype, lifetime, bytes per parameter unsharded and sharded, when it lives."""
    return Table(
        "placement_tensors", "Framework placement, tensor by tensor",
        (Column("placement", "profile", width="0.13\\linewidth"),
         Column("tensor", "tensor", width="0.16\\linewidth"),
         Column("dtype", "dtype"), Column("lifetime", "lifetime"),
         Column("bytes_per_parameter", "unsharded", unit=PER_PARAMETER),
         Column("sharded_bytes_per_parameter", "sharded", unit=PER_PARAMETER),
         Column("when", "when it lives", width="0.28\\linewidth")),
        tuple({"placement": text_cell(row["placement"]), "tensor": text_cell(tensor["tensor"]),
               "dtype": text_cell(tensor["dtype"]), "lifetime": text_cell(tensor["lifetime"]),
               "bytes_per_parameter": math_cell(tensor["bytes_per_parameter"]),
               "sharded_bytes_per_parameter": math_cell(tensor["sharded_bytes_per_parameter"]),
               "when": text_cell(tensor["when"])}
              for row in rows for tensor in row["tensors"]),
    )


def placement_section() -> Section:
    """Megatron, DeepSpeed (ZeRO 0-3, BF16_Optimizer) and torchtitan FSDP2 side by side."""
    rows = placement_table()
    return Section(
        "placement", "Where each framework keeps the four states",
        intro=("Each profile is the state ledger of one precision recipe, partitioned at the "
               "framework's ZeRO stage, plus the transient tensors the framework allocates and "
               "frees inside a step (derive.accounts.placement).",),
        tables={"placement": placements_table(rows), "placement_tensors": placement_tensors_table(rows)},
    )
