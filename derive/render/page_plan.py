"""The planner on the page: ``derive plan --json``'s ranked layouts of a dense model, computed in the browser.

``templates/html/plan.js`` mirrors :mod:`derive.planning`'s candidate space (derive.planning.layouts.layouts:
t dividing the heads, kv heads and GPUs, c dividing s up to MAX_CONTEXT, p dividing the rest, v up to MAX_VIRTUAL
with p v <= L, each micro-batch of MICRO_BATCHES, each ZeRO stage of Megatron's placements, each recompute
policy), its verdicts (derive.planning.ranking.reasons: whole micro-batches, Megatron's interleaving rule, memory
against the GPU's usable range), its dominated variants, order and shared ranks. What it evaluates is printed
here from derive's own expressions:

- the most loaded rank's bytes: derive.sweep.evaluate's ``memory_per_gpu`` account (derive.stage_accounts at the
  placement's derive.state_columns) per architecture, recompute policy, ZeRO stage and precision;
- the caching allocator's rounding on top (derive.planning.rounding.rounding_terms: every resident buffer's size,
  the layer-micro-batches held, every activation's size), rounded as derive.accounts.allocator.allocated_bytes
  does with its constants (data: ALLOCATOR_CONSTANTS);
- the step time of every layout that fits: the step card's traced functions (derive.render.page_step, step.js).

The page's layout has no --balanced field and its step card is traced for even stages only, so the page plans
the layouts derive plan ranks with ``balanced`` false (Llama 3's balanced pipelines stay derive plan's); an MoE
preset's plan (which has no balanced pipelines) is derive.render.page_plan_experts'. Context parallelism over MLA
(DeepSeek-V3 with c > 1), which derive comm and derive predict refuse, is counted under derive plan's reason
("context", derive.planning.ranking.REASONS); any other layout that fits but that the page's layout refuses has no
step on the page: the card counts it and does not rank it.
"""
from __future__ import annotations


import sympy as sp

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.allocator import ALLOCATOR_CONSTANTS
from derive.accounts.budget import usable_bytes
from derive.accounts.framework_placements import stage_placements
from derive.accounts.state import PRECISIONS as STATE_PRECISIONS
from derive.background import Once
from derive.evaluation import by_name
from derive.planning.layouts import BALANCED_SLOTS, MAX_CONTEXT, MAX_VIRTUAL, MICRO_BATCHES
from derive.planning.ranking import REASONS, SYSTEM_NAMES, TIE
from derive.planning.rounding import rounding_terms
from derive.planning.search import PRECISIONS
from derive.planning.experts import LAYER_PROFILE, refuse_dense_options
from derive.render.page_comm import comm_models
from derive.render.page_layout import FLAG_ON
from derive.render.page_plan_experts import expert_models
from derive.render.page_step import StepFunctions
from derive.stage_accounts import accounts
from derive.state_columns import placement_sharded, state_columns

#: derive plan's defaults the page plans with: the layer profile, the framework whose ZeRO stages it places.
PROFILE = "llama-fused"
PLACEMENT = "megatron"
#: The layout symbols the page gives every memory expression (the rest are the model's or the states').
LAYOUT_SYMBOLS = ("t", "p", "v", "c", "d", "b", "s", "m")
#: The command the planner's card names, and how many ranked layouts it lists.
PLAN_COMMAND = "python -m derive.plan"
SHOWN = 10
#: The small numbers plan.js counts with: one, two (numpy's rint rounds a half to the even neighbour;
#: derive.planning.experts.rank_memory has no middle rank at p = 2) and the layer slots a balanced pipeline adds
#: (derive.planning.layouts.BALANCED_SLOTS: the embedding's and the loss's, Llama 3's pipeline).
NUMBERS = {"one": 1, "two": 2, "balanced_slots": BALANCED_SLOTS}
#: Decimals the table shows: memory in GiB, seconds.
DIGITS = {"memory": 2, "seconds": 3}
#: The step card's figure the table shows beside the step time (derive predict --json's key).
RATE = "tokens_per_s_per_gpu"


def plan_lines() -> dict[str, str]:
    """What the card says where it cannot plan, and its summary ({candidates}, {fit}, {ranked}, {seconds} filled in)."""
    try:
        refuse_dense_options(LAYER_PROFILE, PLACEMENT, "{precision}")
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        experts = f"--{field}: {rest}"
    return {
        "model": "The page plans the dense models --model names and the MoE presets derive plan plans "
                 "(derive plan --config plans a pasted config).",
        "expert_precision": experts,
        "gpu": f"--gpu: the planner takes {', '.join(sorted(plan_gpus()))} (a derive.systems GPU with a measured "
               "usable-memory range, derive.accounts.budget).",
        "precision": f"--precision: the planner takes {', '.join(PRECISIONS)}.",
        "question": "The planner needs the number of GPUs (--gpus) and the global batch (--global-batch: derive "
                    "plan's --tokens is it times the sequence length).",
        "summary": "{candidates} layouts with even pipeline stages, {fit} fit, {ranked} ranked (the others: "
                   "another recompute / ZeRO choice of the same layout is no slower with no more memory); "
                   "planned in {milliseconds} ms.",
        "untimed": "Not ranked here: {count} layouts that fit but the page's layout refuses (as derive comm "
                   "does), e.g. {line}",
    }


def plan_gpus() -> dict[str, list[int]]:
    """The page's GPU names the planner takes (derive.systems names with a measured usable range) -> [low, high]."""
    return {name: list(usable_bytes(budget)) for budget, name in SYSTEM_NAMES.items()}


def _variant(architecture: object, recompute: str, zero: int, precision: str,
             functions: StepFunctions) -> tuple[dict[str, object], set[str]]:
    """The most loaded rank's bytes and its rounding terms at one (recompute, ZeRO stage, precision), printed."""
    placed = stage_placements(PLACEMENT)[zero]
    sharded = placement_sharded(zero, placed)
    recipe = STATE_PRECISIONS[precision].fp8
    states = state_columns(placed, sharded, recipe)
    terms = (accounts(architecture, PROFILE, recompute, None, False, "fused", False, recipe) if states is not None
             else accounts(architecture, PROFILE, recompute, placed, sharded, "fused", False, recipe))
    memory = sp.sympify(terms.column("memory_per_gpu"))
    buffers, held, rows = rounding_terms(architecture, recompute, zero, PROFILE, placed, recipe=recipe)
    used = {symbol.name for expr in (memory, held.expr, *(size.expr for size in rows),
                                     *(size.expr for size, _, _ in buffers)) for symbol in expr.free_symbols}
    return {"memory": functions.index(memory), "states": {name: int(value) for name, value in (states or {}).items()},
            "buffers": [[functions.index(size.expr), {name: int(value) for name, value in values.items()}, copies]
                        for size, values, copies in buffers],
            "held": functions.index(held.expr), "rows": [functions.index(size.expr) for size in rows]}, used


def _number(value: object) -> int | float:
    number = sp.sympify(value)
    return int(number) if number.is_Integer else float(number)


@Once
def plan_code() -> tuple[str, dict[str, object]]:
    """(the planner's generated script, what plan.js needs: per dense page model its architecture and sizes, per
    architecture its printed memory variants, the search's constants)."""
    functions = StepFunctions()
    forms: dict[object, str] = {}
    architectures: dict[str, dict[str, object]] = {}
    models: dict[str, dict[str, object]] = {}
    used_by: dict[str, set[str]] = {}
    for name, entry in comm_models().items():
        if not entry.dense:
            continue
        form = forms.setdefault(entry.architecture, name)
        if form not in architectures:
            variants, used = {}, set()
            for recompute in RECOMPUTE_POLICIES:
                for zero in sorted(stage_placements(PLACEMENT)):
                    for precision in PRECISIONS:
                        variants[f"{recompute}|{zero}|{precision}"], names = _variant(
                            entry.architecture, recompute, zero, precision, functions)
                        used |= names
            linear = accounts(entry.architecture, PROFILE, "none", None).context_parallel
            architectures[form] = {"variants": variants, "context_parallel": bool(linear)}
            used_by[form] = used
        values = by_name(entry.values)
        models[name] = {"form": form, "heads": entry.heads, "kv_heads": entry.kv_heads, "layers": entry.layers,
                        "seq": entry.seq,
                        "values": {symbol: _number(values[symbol]) for symbol in sorted(used_by[form])
                                   if symbol in values and symbol not in LAYOUT_SYMBOLS}}
    data = {"models": models, "architectures": architectures, "experts": expert_models(functions), "arguments": functions.arguments,
            "gpus": plan_gpus(), "precisions": list(PRECISIONS), "recompute": list(RECOMPUTE_POLICIES),
            "zero": sorted(stage_placements(PLACEMENT)), "micro_batches": list(MICRO_BATCHES),
            "max_virtual": MAX_VIRTUAL, "max_context": MAX_CONTEXT, "tie": TIE, "shown": SHOWN,
            "reasons": dict(REASONS), "command": PLAN_COMMAND, "lines": plan_lines(), "rate": RATE,
            "numbers": NUMBERS, "digits": DIGITS, "flag_on": FLAG_ON,
            "allocator": {name: constant.value for name, constant in ALLOCATOR_CONSTANTS.items()}}
    script = functions.script("Generated by derive.render.page_plan from derive.sweep's and derive.planning.rounding's "
                              "expressions.", "DERIVE_PLAN_FUNCTIONS")
    return script, data
