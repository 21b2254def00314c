"""Communication (derive.accounts.comm): bytes each rank sends per step, Llama 3 under the Table 4 layouts."""
from __future__ import annotations

from dataclasses import replace

from derive.accounts.comm import GROUPS, collectives, group_bytes
from derive.model import Model
from derive.parallelism import Parallelism
from derive.presets import model
from derive.render.sheet import Cell, Column, Section, Table, bytes_cell, int_cell, text_cell

#: Dubey et al. 2024 (Llama 3), Table 4's 405B rows, and the 70B / 8B at layouts chosen here: 16M-token
#: steps (2048 sequences of 8192), sequence parallel, fp32 gradients reduce-scattered (section 3.3.2's
#: "reduce-scatter gradients in FP32 across data parallel workers in FSDP") and parameters gathered
#: once per step (FSDP without resharding after forward: ZeRO-1's bytes, the distributed optimizer).
COMMON = dict(micro_batch=1, sequence_parallel=True, precision="bf16-fp32grad", zero=1)
LAYOUTS: tuple[tuple[str, int, str, dict], ...] = (
    ("llama3-8b", 8192, "chosen here", dict(tp=8, pp=1, dp=256, global_batch=2048)),
    ("llama3-70b", 8192, "chosen here", dict(tp=8, pp=4, dp=64, global_batch=2048)),
    ("llama3-405b", 8192, "Table 4, 8,192 GPUs", dict(tp=8, pp=16, dp=64, global_batch=2048)),
    ("llama3-405b", 8192, "Table 4, 16,384 GPUs", dict(tp=8, pp=16, dp=128, global_batch=2048)),
    ("llama3-405b", 131072, "Table 4, CP 16 (DP 8: the row prints 4)",
     dict(tp=8, pp=16, cp=16, dp=8, global_batch=128, cp_comm="all_gather")),
)
#: The layout whose rows the sheet lists one by one.
DETAIL = 1


def _layout(entry: tuple[str, int, str, dict]) -> tuple[Model, Parallelism]:
    """The model at the row's sequence length and the row's layout."""
    name, seq, _, sizes = entry
    return replace(model(name), seq=seq), Parallelism(**COMMON, **sizes)


def _gb(value: object) -> Cell:
    return bytes_cell(int(-(-value // 1)), "GB")


def totals_table() -> Table:
    """GB one rank sends per step, by group, for each model and layout."""
    rows = []
    for entry in LAYOUTS:
        chosen, layout = _layout(entry)
        found = collectives(chosen, layout)
        rows.append({
            "model": text_cell(chosen.name), "layout": text_cell(
                f"t {layout.tp}, c {layout.cp}, p {layout.pp}, d {layout.dp}, s {chosen.seq:,}, m "
                f"{layout.micro_batches} ({entry[2]})"),
            "gpus": int_cell(layout.gpus),
            **{group: _gb(group_bytes(found, group)) for group in GROUPS if group != "ep"},
        })
    return Table("comm_llama3", "Bytes one rank sends per training step, by group (ring collectives, "
                 "the most loaded rank)",
                 (Column("model", "model"), Column("layout", "layout"), Column("gpus", "GPUs"),
                  *(Column(group, f"{group} sent", unit="B") for group in GROUPS if group != "ep")),
                 tuple(rows),
                 note="16M-token steps; sequence parallel; fp32 gradients reduce-scattered and bf16 "
                      "parameters all-gathered once per step (Llama 3, section 3.3.2)")


def rows_table() -> Table:
    """Every collective of one layout: what it moves, how often, in which pass."""
    chosen, layout = _layout(LAYOUTS[DETAIL])
    rows = tuple({
        "name": text_cell(row.name), "group": text_cell(f"{row.group} ({int(row.ranks)})"),
        "pass": text_cell(f"{row.pass_} / {row.overlap}"), "payload": _gb(row.payload),
        "count": int_cell(row.count), "step": _gb(row.sent_per_step),
    } for row in collectives(chosen, layout))
    return Table("comm_rows_70b", f"The collectives of {chosen.name} at t {layout.tp}, p {layout.pp}, "
                 f"d {layout.dp} (sequence parallel), per rank and step",
                 (Column("name", "row"), Column("group", "group (ranks)"),
                  Column("pass", "pass / may overlap"), Column("payload", "buffer", unit="B"),
                  Column("count", "per step"), Column("step", "sent per step", unit="B")), rows)


def communication_section() -> Section:
    """The communication ledger's totals for Llama 3 and the 70B's rows."""
    return Section(
        key="communication",
        title="Communication per step",
        intro=(
            "python -m derive.comm lists every collective of a training step as a row of "
            "derive.accounts.comm: the tensor it moves (the layer input [s, b, h] for tensor, sequence "
            "and pipeline parallelism, K and V of the saved tables for context parallelism, the k_E "
            "routed copies for expert parallelism, the rank's gradient and parameter rows of the "
            "state table for data parallelism), the group and its size, the pass, how often, and the "
            "bytes one rank sends: the buffer times a ring's 2(n-1)/n (all-reduce) or (n-1)/n "
            "(reduce-scatter, all-gather, all-to-all), named conventions of "
            "derive.accounts.collectives.",
            "Rows are the most loaded rank's: ceil(L / (p v)) layers, the last stage's head and loss, "
            "a pipeline rank with both neighbours. Sequence parallelism follows Megatron and "
            "Korthikanti et al. 2022 (4.2.2): the stored shard is all-gathered again in backward; "
            "context parallelism as Llama 3 (all-gather of K and V) for the 128K row.",
        ),
        tables={"totals": totals_table(), "rows": rows_table()},
    )
