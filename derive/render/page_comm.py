"""The bytes each rank sends per step by group on the page: ``derive comm --json``'s per_rank_bytes_per_step.

The communication ledger (derive.accounts.comm_rows) is built once per architecture and layout
flags with its sizes as symbols: t, p, v, c, d, e, t_E, m, b, the model's sizes, and the layers
on the most loaded rank (:data:`ELL`, derive.accounts.pipeline_split.most_layers; :data:`ELL_E`
of them MoE layers, as derive.accounts.comm._numeric_terms counts them). Each group's total is
ceil(sum of sent x count), as derive.comm.report rounds it; each distinct expression is printed
once, and a group's variants are keyed only by the flags that change it.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable

import sympy as sp

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.comm import GROUPS
from derive.accounts.comm_row import LayoutTerms
from derive.accounts.comm_rows import rows
from derive.accounts.pipeline_split import most_layers
from derive.accounts.state import PRECISIONS
from derive.background import Once
from derive.evaluation import by_name
from derive.formulas import ZERO_STAGES
from derive.model import Model
from derive.names import named_model
from derive.parallelism import Parallelism
from derive.render.page_functions import PageFunctions
from derive.printing.cache import ceiling
from derive.printing.latex import tex
from derive.options.layout import DEFAULTS, LAYOUT_OPTIONS
from derive.render.page_forms import pasted_by
from derive.render.page_layout import (COMM_COMMAND, DATA_PARALLEL, DENSE_ONLY_SHARED, DP_BEFORE, LAYOUT_FIELDS, LAYOUT_PAGE,
                                       MICRO_BATCHES, WORLD, layout_rules)
from derive.render.page_models import page_names
from derive.symbols import BY_NAME, L, L_E, b, c, d, e, m, meaning, p, s, t, t_E, v

#: Layers on the most loaded rank, and the MoE layers among them.
ELL = sp.Symbol("ell", positive=True, integer=True)
ELL_E = sp.Symbol("ell_E", nonnegative=True, integer=True)
#: What the 'where' list says of them.
LEGEND: dict[str, dict[str, str]] = {
    ELL.name: {"tex": r"\ell", "meaning": "layers on the most loaded rank: min(v ceil(L / (p v)), L) "
                                          "(derive.accounts.pipeline_split.most_layers)"},
    ELL_E.name: {"tex": r"\ell_{E}", "meaning": "MoE layers among them: min(ell, L_E)"},
}
#: The group with routed experts only.
EXPERT_GROUP = "edp"
#: Each group's label (derive comm's groups).
GROUP_LABELS: dict[str, str] = {"dp": "Data parallel (DP)", "tp": "Tensor parallel (TP)", "pp": "Pipeline parallel (PP)",
                                "cp": "Context parallel (CP)", "ep": "Expert parallel (EP)",
                                "edp": "Expert data parallel (EDP)"}
#: The figure key of each group's bytes (derive comm --json, dotted).
KEY = "per_rank_bytes_per_step"
#: The layout's sizes comm's JSON shows: key -> (label, unit).
LAYOUT_FIGURES: dict[str, tuple[str, str]] = {"layout.gpus": ("GPUs in all (t p c d)", "GPUs"),
                                              "layout.dp": ("Data parallel size (DP)", "ranks"),
                                              "layout.micro_batches": ("Micro-batches per step (m)", "micro-batches")}
#: The flags that change a ledger's rows, with their values; "single": p = 1 (every edge on the rank).
FLAGS: dict[str, tuple[object, ...]] = {"sequence_parallel": (False, True), "zero": tuple(ZERO_STAGES),
                                        "precision": tuple(PRECISIONS), "recompute": tuple(RECOMPUTE_POLICIES),
                                        "single": (False, True)}


def flag_text(value: object) -> str:
    """A flag's value as the page writes it in a variant key."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@lru_cache(maxsize=1)
def comm_models() -> dict[str, Model]:
    """Every name derive comm's --model takes (the page's names the report does not refuse), as it reads them."""
    return {name: named_model(name, moe=True)[0] for name, kind in page_names().items() if kind != "refused"}


def comm_forms() -> dict[str, str]:
    """Name -> the name of its form: the first name with the same architecture and routed experts."""
    first: dict[object, str] = {}
    return {name: first.setdefault((m.architecture, _experts(m)), name) for name, m in comm_models().items()}


#: The name of a ledger a paste adds (a short key: each variant key of the page's data starts with it).
PASTED_FORM = "paste-"


@lru_cache(maxsize=1)
def pasted_forms() -> tuple[dict[str, Model], dict[str, str]]:
    """(the ledgers a pasted dense config.json adds: a model of each architecture no page name has, by PASTED_FORM n;
    each report form a paste can take (derive.render.page_config.config_forms) -> its ledger's form name).

    derive comm --config reads the config's architecture; the page knows the paste's report form (config.js), so
    each report form must have one architecture (ValueError otherwise).
    """
    models = comm_models()
    return pasted_by(lambda entry: (entry.architecture, _experts(entry)),
                     {(models[name].architecture, _experts(models[name])): form for name, form in comm_forms().items()},
                     PASTED_FORM, "ledgers")


def _experts(model: Model) -> bool:
    return bool(dict(model.sizes).get("E"))


def _mla(model: Model) -> bool:
    return not model.dense and model.layout is not None and model.layout.mla is not None


def group_expressions(model: Model, flags: dict[str, object], seen: dict[tuple, dict] | None = None,
                      totals: dict[tuple[int, ...], tuple] | None = None) -> dict[str, sp.Expr]:
    """Each group's bytes one rank sends per step, ceil'd, in symbols (derive.comm.report's per_rank_bytes_per_step).

    ``seen``: ledger parts kept between calls (derive.accounts.comm_rows.rows); ``totals``: each group's
    total kept by the rows it sums (the kept parts' rows recur across flag values).
    """
    found = ledger_rows(model, flags, seen)
    groups = GROUPS + ((EXPERT_GROUP,) if _experts(model) else ())
    return {group: _total([row for row in found if row.group == group], totals) for group in groups}


def ledger_rows(model: Model, flags: dict[str, object], seen: dict[tuple, dict] | None = None) -> list:
    """The ledger's rows (derive.accounts.comm_rows.rows) at ``flags`` (FLAGS' names), its sizes as symbols."""
    single = bool(flags["single"])
    experts = _experts(model)
    layout = Parallelism(**{name: value for name, value in flags.items() if name != "single"})
    one = sp.Integer(1)
    terms = LayoutTerms(t=t, p=one if single else p, v=one if single else v, c=c, d=d, e=e, t_E=t_E, m=m,
                        dense_layers=ELL - ELL_E if experts else ELL,
                        moe_layers=ELL_E if experts else sp.Integer(0), capacity=None)
    return rows(model.architecture, terms, layout, single, seen)


def _total(found: list, totals: dict[tuple[int, ...], tuple] | None) -> sp.Expr:
    """ceil(sum of sent x count) of ``found``, once per list of the same rows in ``totals`` (which holds them, so ids stay theirs)."""
    if totals is None:
        return _ceiling(sp.Add(*(row.sent * row.count for row in found)))
    key = tuple(map(id, found))
    if key not in totals:
        totals[key] = (found, _ceiling(sp.Add(*(row.sent * row.count for row in found))))
    return totals[key][1]


@lru_cache(maxsize=4096)
def _ceiling(total: sp.Expr) -> sp.Expr:
    """ceil(``total``), once per distinct sum (many flag values give the same); kept between runs (derive.printing.cache)."""
    return ceiling(total)


def flags_used(table: dict[tuple[object, ...], sp.Expr]) -> set[int]:
    """The positions of the flags whose value changes some expression of ``table`` (keyed by every flag's value)."""
    uses = set()
    for index in range(len(next(iter(table)))):
        seen: dict[tuple[object, ...], sp.Expr] = {}
        for key, expr in table.items():
            if seen.setdefault(key[:index] + key[index + 1:], expr) != expr:
                uses.add(index)
                break
    return uses


def _table(model: Model, combos: list[tuple[object, ...]]) -> dict[str, dict[tuple[object, ...], sp.Expr]]:
    """group -> flag values -> its expression, at each of ``combos`` (values in FLAGS order)."""
    table: dict[str, dict[tuple[object, ...], sp.Expr]] = {}
    seen: dict[tuple, dict] = {}
    totals: dict[tuple[int, ...], tuple] = {}
    for values in combos:
        for group, expr in group_expressions(model, dict(zip(FLAGS, values)), seen, totals).items():
            table.setdefault(group, {})[values] = expr
    return table


def comm_formulas(printed: Callable[[sp.Expr], dict[str, object]]) -> tuple[list[dict[str, object]],
                                                                           list[dict[str, object]]]:
    """(the groups' figures, each variant an index into the second, the printed expressions)."""
    added, pasted = pasted_forms()
    models, forms = {**comm_models(), **added}, comm_forms()
    names = list(FLAGS)
    every = list(itertools.product(*FLAGS.values()))
    tables = {form: _table(models[form], every) for form in dict.fromkeys([*forms.values(), *added])}
    uses = {group: set().union(*(flags_used(table[group]) for table in tables.values() if group in table))
            for group in (*GROUPS, EXPERT_GROUP)}
    shared: dict[sp.Expr, int] = {}
    expressions: list[dict[str, object]] = []
    formulas = []
    for group in (*GROUPS, EXPERT_GROUP):
        positions = sorted(uses[group])
        variants = {}
        for form, table in tables.items():
            for values, expr in table.get(group, {}).items():
                key = "|".join([form, *(flag_text(values[index]) for index in positions)])
                if expr not in shared:
                    shared[expr] = len(expressions)
                    expressions.append(printed(expr))
                variants[key] = shared[expr]
        formulas.append({"key": f"{KEY}.{group}", "row": f"comm:{KEY}.{group}", "unit": "B/step",
                         "label": GROUP_LABELS[group], "symbol": None, "group": group,
                         "uses": [names[index] for index in positions], "variants": variants})
    return formulas, expressions


def comm_data(printed: Callable[[sp.Expr], dict[str, object]]) -> dict[str, object]:
    """What layout.js needs for derive comm's figures: models, formulas, the sizes it derives, the layout figures."""
    models, forms = comm_models(), comm_forms()
    formulas, expressions = comm_formulas(printed)
    layout = [{"key": key, "row": f"comm:{key}", "unit": unit, "label": label, "symbol": None}
              for key, (label, unit) in LAYOUT_FIGURES.items()]
    return {
        "models": {name: {"form": forms[name], "name": m.name, "experts": _experts(m), "mla": _mla(m),
                          "values": by_name(m.values)} for name, m in models.items()},
        "formulas": formulas,
        "expressions": expressions,
        "layout_figures": layout,
        "sizes": {"ell": printed(most_layers(False, L, p, v)), "ell_E": printed(sp.Min(ELL, L_E)),
                  "gpus": printed(WORLD * d), "dp": printed(DATA_PARALLEL), "dp_given": printed(d),
                  "micro_batches": printed(MICRO_BATCHES), "global_batch": printed(b * d)},
        "ell": {"layers": ELL.name, "moe_layers": ELL_E.name},
        "micro_batches": m.name,
        "flags": list(FLAGS),
        # a pasted config's report form (config.js) -> its ledger's form
        "pasted": pasted_forms()[1],
        "boolean_flags": [name for name, values in FLAGS.items() if all(isinstance(value, bool) for value in values)],
    }


@Once
def layout_code() -> tuple[str, dict[str, object]]:
    """(the layout's generated script, its data): derive comm's ledger and the layout's rules, each expression printed once."""
    print_once = PageFunctions()
    data = {"rules": layout_rules(print_once), "comm": comm_data(print_once), "one": Parallelism().tp,
            "dp_before": DP_BEFORE, "seq": s.name,
            "ignored": list(DENSE_ONLY_SHARED), "fields": list(LAYOUT_FIELDS), "command": COMM_COMMAND,
            "options": [option[2:] for option in LAYOUT_OPTIONS.values() if option[2:] in LAYOUT_PAGE],
            "defaults": {name: print_once(expr) for name, expr in DEFAULTS.items()}}
    legend = {name: LEGEND.get(name) or {"tex": tex(BY_NAME[name]), "meaning": meaning(BY_NAME[name])}
              for entry in print_once.printed.values() for name in entry["args"]}
    data["legend"] = dict(sorted(legend.items()))
    return print_once.script("Generated by derive.render.web from derive.accounts.comm's ledger and "
                             "derive.parallelism's rules.", "DERIVE_LAYOUT_FUNCTIONS"), data
