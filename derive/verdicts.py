"""The verdicts the report prints, as one table of templates that the CLI and the web page both fill in.

``derive report`` ends with a fit line (derive.report, the accounts of derive.accounts.budget
and derive.accounts.state); formulas/index.html shows the same line, word for word, from this
table (derive.render.web ships it to the page). Placeholders are ``{name}``; the CLI fills them
with :meth:`str.format`, the page with the same names.
"""
from __future__ import annotations

#: The budget's label: a GPU's usable range (derive.accounts.budget.usable_bytes), a size as typed,
#: a size in decimal units with its binary value beside it.
BUDGET_LABELS: dict[str, str] = {
    "hardware": "{name} usable low end {low} GiB (range {low}-{high} GiB)",
    "decimal": "{text} = {binary}",
    "gpu": "{name} usable low end {low} GiB",
}

#: The fit line: unsharded (how many GPUs hold the state), or ZeRO over d ranks (whether it fits, how
#: many ranks the state needs, with one micro-batch of activations), each part by name.
FIT: dict[str, str] = {
    "unsharded": "fit at {budget} per GPU: resident state needs >= {state_gpus} GPUs; with one "
                 "micro-batch of activations >= {activation_gpus}",
    "sharded": "fit at {budget} per GPU: ZeRO-{zero} over {dp} ranks holds {per_rank} per rank ({fits});",
    "fits": "fits",
    "does_not_fit": "does not fit",
    "state_never": " the unsharded state alone exceeds the budget at any number of ranks",
    "state_ranks": " the state needs >= {state_gpus} ranks",
    "activations_never": "; with one micro-batch of activations it never fits",
    "activation_ranks": "; with one micro-batch of activations >= {activation_gpus}",
}

#: Every table the page reads, by name.
TABLES: dict[str, dict[str, str]] = {"budget_labels": BUDGET_LABELS, "fit": FIT}
