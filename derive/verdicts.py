"""The verdicts the report and predict print, as one table of templates that the CLI and the web page both fill in.

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

#: derive predict's memory check (derive.planning.memory.memory_per_gpu, the most loaded rank): the refusal when it
#: needs more than the GPU's HBM (exit status 2), else the JSON's ``conventions.memory`` against the usable range's
#: low end (derive.accounts.budget), or why a model is not checked.
MEMORY: dict[str, str] = {
    "does_not_fit": "--gpus: the most loaded rank needs {needed}, more than the HBM of a {gpu} (datasheet: {hbm}): "
                    "does not fit",
    "note": "{needed} on the most loaded rank; usable low end {low}: {verdict}",
    "fits": "fits",
    "may_not_fit": "above the usable low end, under the HBM: may not fit",
    "over_hbm": "above the HBM: does not fit by derive's accounts (an MoE layout is not refused: published MoE runs "
                "that trained exceed them, derive.predict)",
    "not_checked": "not checked ({reason})",
}

#: Every table the page reads, by name.
TABLES: dict[str, dict[str, str]] = {"budget_labels": BUDGET_LABELS, "fit": FIT, "memory": MEMORY}
