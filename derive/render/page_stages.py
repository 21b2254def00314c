"""Memory per GPU by pipeline stage on the page: ``derive predict --json``'s memory.stages.<stage>.<part> and memory.per_gpu.

A dense model's stage parts are derive.planning.stage_memory.stage_parts of its architecture (its sizes left
symbols: the page passes the model's values); an MoE model's are derive.planning.expert_stages.expert_stage_parts
(the MoE planner's rank terms at the model's sizes, s, L and L_E left symbols), NaN where predict does not check
them (dense layers past the first round of chunks) and none under an FP8 recipe (expert_stages.unmodelled). Each
is printed at every ZeRO stage, recompute policy, precision and sequence parallelism predict takes, kept where
the stage exists (derive.planning.stage_memory.STAGES; NaN elsewhere, which the page leaves out); the most loaded
rank is stage_memory.most_loaded over the parts, each a symbol the page sets from its part's figure (rank 1
compared too for an MoE model). Every distinct expression is printed once; a figure's variants are keyed by the
model's form and only the flags that change it for that form (derive.render.page_comm's keying, per form: an
MoE model's activations read sequence parallelism, a dense model's do not). Predict's fit check and its words
are derive.verdicts.MEMORY against each GPU's HBM (derive.systems) and usable low end (derive.accounts.budget);
it refuses dense layouts only.
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import sympy as sp

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.budget import usable_low_end
from derive.accounts.state import PRECISIONS
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.background import Once
from derive.formulas import ZERO_STAGES
from derive.model import Model
from derive.planning.expert_stages import FIRST_ROUND, PARTS as EXPERT_PARTS, expert_stage_parts
from derive.planning.memory import memory_profile
from derive.planning.stage_memory import PARTS, STAGES, most_loaded, stage_parts
from derive.printing.latex import tex
from derive.render.page_comm import comm_models, flag_text, flags_used
from derive.render.page_functions import PageFunctions
from derive.render.page_paste import pasted_stage_forms
from derive.render.page_plan_experts import KEPT
from derive.symbols import BY_NAME, L, L_E, meaning
from derive.systems import SYSTEMS
from derive.units import format_bytes

#: The JSON object the figures sit in (derive predict --json: memory.per_gpu, memory.stages.<stage>.<part>).
KEY = "memory"
#: The flags a stage's bytes depend on, in variant-key order, with the values predict takes.
FLAGS: dict[str, tuple[object, ...]] = {"zero": tuple(ZERO_STAGES), "recompute": tuple(RECOMPUTE_POLICIES),
                                        "precision": tuple(LINEAR_DTYPE), "sequence_parallel": (False, True)}
#: Each stage in words: which rank it is and what it holds besides its layers.
STAGE_LABELS: dict[str, str] = {"single": "The one stage (p = 1: embedding and output head)",
                                "first": "First stage (rank 0: the embedding)",
                                "middle": "Middle stage (rank 1, the most loaded of the middle ranks)",
                                "last": "Last stage (rank p \u2212 1: the output head and the loss)"}
#: Each part in words.
PART_LABELS: dict[str, str] = {"params": "Parameters", "grads": "Gradients", "optimizer": "Optimizer state",
                               "fp8_copies": "FP8 weight copies and scales", "activations": "Activations"}
PER_GPU = f"{KEY}.per_gpu"


def part_symbol(stage: str, part: str) -> sp.Symbol:
    """The symbol of ``stage``'s ``part`` bytes (the most loaded rank's expression reads them)."""
    return sp.Symbol(f"M_{stage}_{part}", nonnegative=True)


def _form_key(entry: Model) -> tuple[object, ...]:
    """What a model's stage expressions depend on: a dense model's architecture and layer profile; an MoE model's
    architecture and sizes (its rank terms are printed at them, s left a symbol)."""
    if entry.dense:
        return entry.architecture, memory_profile(entry)
    sizes = sorted((symbol.name, n) for symbol, n in entry.values.items() if symbol.name != "s")
    return entry.architecture, tuple(sizes)


def stage_forms() -> dict[str, str]:
    """Page name -> the first name with the same stage expressions (predict's memory check)."""
    first: dict[tuple[object, ...], str] = {}
    return {name: first.setdefault(_form_key(entry), name) for name, entry in comm_models().items()}


def _tables(entry: Model) -> dict[tuple[str, str], dict[tuple[object, ...], sp.Expr]]:
    """(stage, part) -> flag values -> the part where the stage exists and predict checks it (NaN elsewhere), at every
    FLAGS combination (an MoE model's under an FP8 recipe: none, its most loaded rank NaN)."""
    tables: dict[tuple[str, str], dict[tuple[object, ...], sp.Expr]] = {}
    for values in itertools.product(*FLAGS.values()):
        flags = dict(zip(FLAGS, values))
        recipe = PRECISIONS[flags["precision"]].fp8
        if entry.dense:
            parts, checked = stage_parts(entry.architecture, memory_profile(entry), flags["recompute"], flags["zero"],
                                         False, recipe), sp.true
        elif recipe is None:
            parts = expert_stage_parts(entry, flags["zero"], flags["recompute"], KEPT, flags["sequence_parallel"])
            checked = FIRST_ROUND
            if entry.values[L] == entry.values.get(L_E, entry.values[L]):
                # no dense layer: every layer MoE (L_E = L, the shorter form) and all in the first round of chunks
                parts = {stage: {part: _every_layer_moe(expr) for part, expr in found.items()}
                         for stage, found in parts.items()}
                checked = sp.true
        else:  # predict checks no MoE layout under an FP8 recipe: its most loaded rank is NaN (stages.js shows none)
            continue
        for stage, found in parts.items():
            for part, expr in found.items():
                tables.setdefault((stage, part), {})[values] = _where(expr, _exists(stage, checked))
    return tables


@lru_cache(maxsize=None)
def _exists(stage: str, checked: sp.Boolean) -> sp.Boolean:
    """Where ``stage`` exists and predict checks it: built once per stage and check (And simplifies at every part
    and flag value otherwise)."""
    return STAGES[stage] & checked


# Many flag combinations give a part the same expression (a dense part at either sequence-parallel value, the
# parameters at every recompute policy): each is built once.
@lru_cache(maxsize=None)
def _where(expr: sp.Expr, condition: sp.Boolean) -> sp.Expr:
    """``expr`` where ``condition`` holds, NaN elsewhere (the page leaves a NaN figure out)."""
    return sp.Piecewise((expr, condition), (sp.nan, True))


@lru_cache(maxsize=None)
def _every_layer_moe(expr: sp.Expr) -> sp.Expr:
    """``expr`` of an MoE model whose every layer is MoE (L_E = L)."""
    return expr.xreplace({L_E: L})


def reused_parts(by_form: dict[str, dict[tuple[str, str], dict[tuple[object, ...], sp.Expr]]],
                 loaded: dict[str, dict[tuple[object, ...], sp.Expr]]) -> dict[str, dict[str, str]]:
    """Form -> part (or PER_GPU) -> the first form whose part is the same at every stage and flag: its variants
    serve both (a pasted architecture's activations and FP8 copies are mostly a named model's; the most loaded
    rank of a dense form is every dense form's expression of the parts)."""
    first: dict[tuple[object, ...], str] = {}
    reused: dict[str, dict[str, str]] = {}
    for form, found in by_form.items():
        for part in (*PARTS, PER_GPU):
            tables = (tuple(loaded[form].items()) if part == PER_GPU else
                      tuple((stage, tuple(found[(stage, part)].items())) for stage in STAGES if (stage, part) in found))
            if first.setdefault((part, tables), form) != form:
                reused.setdefault(form, {})[part] = first[(part, tables)]
    return reused


def _figure(key: str, label: str, symbol: sp.Symbol | None, tables: dict[str, dict[tuple[object, ...], sp.Expr]],
            printed: PageFunctions, expressions: list[dict[str, object]], shared: dict[sp.Expr, int],
            **extra: object) -> dict[str, object]:
    """A figure whose variants are keyed by the form and the flags that change that form's table (``uses``, per form)."""
    names = list(FLAGS)
    variants, uses = {}, {}
    for form, table in tables.items():
        positions = sorted(flags_used(table))
        uses[form] = [names[index] for index in positions]
        for values, expr in table.items():
            if expr not in shared:
                shared[expr] = len(expressions)
                expressions.append(printed(expr))
            variants["|".join([form, *(flag_text(values[index]) for index in positions)])] = shared[expr]
    return {"key": key, "row": f"step:{key}", "label": label, "unit": "B", "symbol": symbol.name if symbol else None,
            "uses": uses, "variants": variants, **extra}


def gpu_memory() -> dict[str, dict[str, object]]:
    """Per GPU: its HBM in bytes and as predict's refusal writes it, and its usable low end."""
    return {name: {"hbm": gpu.hbm_bytes, "hbm_text": format_bytes(gpu.hbm_bytes, "GB", 0),
                   "usable": usable_low_end(gpu)} for name, gpu in SYSTEMS.items()}


@Once
def stage_code() -> tuple[str, dict[str, object]]:
    """(the stages' generated script, what stages.js needs: the figures, their expressions, forms, GPUs, legend)."""
    printed = PageFunctions()
    models, forms = comm_models(), stage_forms()
    added, pasted = pasted_stage_forms(forms)  # a pasted config's architecture (derive.render.page_paste)
    models, forms = {**models, **added}, {**forms, **pasted}
    by_form = {form: _tables(models[form]) for form in dict.fromkeys(forms.values())}
    # the most loaded rank of the parts each form has at each precision (an FP8 recipe's copies or none; an MoE
    # model's four parts where predict checks it, rank 1 compared: it can exceed rank 0)
    loaded = {}
    for form in by_form:
        dense = models[form].dense
        for precision in FLAGS["precision"]:
            recipe = PRECISIONS[precision].fp8
            present = [part for part in (PARTS if dense else EXPERT_PARTS) if part != "fp8_copies" or recipe]
            loaded.setdefault(form, {})[(None, None, precision, None)] = sp.nan if not dense and recipe else most_loaded(
                {stage: {part: part_symbol(stage, part) for part in present} for stage in STAGES}, middle=not dense)
    reused = reused_parts(by_form, loaded)
    expressions: list[dict[str, object]] = []
    shared: dict[sp.Expr, int] = {}
    figures = []
    for stage, part in itertools.product(STAGES, PARTS):
        tables = {form: found[(stage, part)] for form, found in by_form.items()
                  if (stage, part) in found and part not in reused.get(form, {})}
        if tables:
            figures.append(_figure(f"{KEY}.stages.{stage}.{part}", f"{STAGE_LABELS[stage]}: {PART_LABELS[part]}",
                                   part_symbol(stage, part), tables, printed, expressions, shared,
                                   stage=stage, part=part, part_label=PART_LABELS[part]))
    figures.append(_figure(PER_GPU, "Memory per GPU, the most loaded rank", None,
                           {form: table for form, table in loaded.items() if PER_GPU not in reused.get(form, {})},
                           printed, expressions, shared, stage=None, part=None))
    symbols = {part_symbol(stage, part).name: (stage, part) for stage, part in itertools.product(STAGES, PARTS)}
    legend = {}
    for name in {name for entry in expressions for name in entry["args"]} | {f["symbol"] for f in figures if f["symbol"]}:
        if name in symbols:
            stage, part = symbols[name]
            legend[name] = {"tex": tex(sp.Symbol(name)), "meaning": f"{PART_LABELS[part]} of the "
                                                                   f"{STAGE_LABELS[stage][0].lower()}{STAGE_LABELS[stage][1:]}"}
        else:
            legend[name] = {"tex": tex(BY_NAME[name]), "meaning": meaning(BY_NAME[name])}
    data = {"figures": figures, "expressions": expressions, "forms": forms, "reused": reused,
            "stages": list(STAGE_LABELS.items()),
            "per_gpu": PER_GPU, "gpus": gpu_memory(), "legend": dict(sorted(legend.items())),
            # predict refuses a dense layout above the HBM and notes an MoE one (derive.predict)
            "refusing": sorted(form for form in by_form if models[form].dense)}
    script = printed.script("Generated by derive.render.page_stages from derive.planning.stage_memory's accounts.",
                            "DERIVE_STAGE_FUNCTIONS")
    return script, data
