"""A pasted dense config.json on the step and stage-memory cards: each architecture a paste can have, its sizes symbols.

A page name's step is traced with its model's sizes substituted (derive.render.page_step.symbolic_workload); a
paste's sizes are known only in the browser (config.js reads them, as ``--config pasted.json`` does). So each
architecture a dense family's config can take (derive.render.page_config.config_forms) is traced once with every
size a symbol (:func:`pasted_workload`: the parameter count N too, its table's sum a definition of the
architecture's, :func:`pasted_counts`), and the page sets the symbols from the paste's read sizes, as the
communication card does for a paste's ledger (derive.render.page_comm.pasted_forms).

Each architecture is a page name :data:`PASTED_MODEL` n; the step card looks up by that name its workload (few
distinct: architectures differing in biases, norms or tied embeddings share their GEMMs and saved tensors), its
ledger's row structure (:func:`pasted_exposed`: the communication card's rows as slots whose bytes and counts are
set per architecture; two structures serve every dense family) and its own counts and bytes; the stage card its
stage form (derive.render.page_stages: the first model of the same architecture and layer profile).
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from functools import lru_cache
from typing import Callable

import sympy as sp

from derive.accounts import workload as workload_module
from derive.evaluation import substitute, symbol_values
from derive.model import Model
from derive.planning.memory import memory_profile
from derive.recipes import fp8_weight_counts
from derive.render.page_comm import comm_models, ledger_rows
from derive.render.page_forms import pasted_by
from derive.render.page_step_ledger import EXPOSED, STEP_FLAGS, SlotLedger
from derive.render.page_step_trace import traced
from derive.symbols import N, N_8, L, V, a, h, n_8, s

#: The page name of a pasted config's architecture n (a short key: the step's and the stages' variant keys name it).
PASTED_MODEL = "config-"
#: The pasted ledgers' symbols' prefix (PS_j, Pc_j: a slot's bytes and count; Pn_j, PR_j_k) and their row
#: structures' form names (P0, P1, ...: the step's exposed seconds are keyed by them).
PASTED_LEDGER = "P"


@lru_cache(maxsize=1)
def pasted_models() -> tuple[dict[str, Model], dict[str, str]]:
    """(PASTED_MODEL n -> a model of each architecture a dense config can have; each report form a paste can take
    (config.js's ``form``) -> its name).

    A report form holds one architecture (derive.render.page_comm.pasted_forms checks it for the ledgers, whose
    forms are the architectures).
    """
    models, pasted = pasted_by(lambda entry: (entry.architecture, entry.family), {}, PASTED_MODEL, "architectures")
    clash = set(models) & set(comm_models())
    if clash:
        raise ValueError(f"page: {sorted(clash)} name both a model and a pasted architecture ({PASTED_MODEL}n)")
    return models, pasted


def pasted_exposed(define: Callable[[sp.Symbol, sp.Expr], None]) -> tuple[
        dict[str, dict[tuple[object, ...], dict[str, sp.Expr]]], dict[str, str], SlotLedger]:
    """(each row structure's form -> the step's flag values -> each group's exposed seconds; PASTED_MODEL n -> its
    structure's form; the ledger, whose ``sizes`` hold each slot's bytes and count per PASTED_MODEL n and flags).

    The rows are the communication card's (derive.render.page_comm.ledger_rows) for each architecture; models
    whose exposed seconds are the same expressions at every flag value share a form.
    """
    ledger = SlotLedger(define, PASTED_LEDGER)
    structures: dict[tuple[object, ...], str] = {}
    tables: dict[str, dict[tuple[object, ...], dict[str, sp.Expr]]] = {}
    forms: dict[str, str] = {}
    for name, entry in pasted_models()[0].items():
        seen: dict[tuple, dict] = {}
        table = {}
        for values in itertools.product(*STEP_FLAGS.values()):
            flags = dict(zip(STEP_FLAGS, values))
            ledger.reading = (name, values)
            table[values] = ledger.exposed(ledger_rows(entry, flags, seen), flags["recompute"], bool(flags["single"]),
                                           int(flags["zero"]), False)
        key = tuple((values, tuple(table[values][group] for group in EXPOSED)) for values in table)
        forms[name] = structures.setdefault(key, f"{PASTED_LEDGER}{len(structures)}")
        tables.setdefault(forms[name], table)
    return tables, forms, ledger


def _symbols(entry: Model, expr: sp.Expr, **extra: int) -> sp.Expr:
    """workload._number with every size left a symbol (the page's, set from the paste)."""
    return substitute(sp.sympify(expr), symbol_values({}, **extra))


def pasted_workload(entry: Model) -> workload_module.Workload:
    """derive.accounts.workload.workload of ``entry``'s architecture with every size a symbol and N its parameters."""
    with traced(**{"workload._number": _symbols}):
        work = workload_module.workload.__wrapped__(entry)
    return replace(work, name="", seq=s, hidden=h, layers=L, vocab=V, heads=a, parameters=N)


def pasted_counts(entry: Model) -> dict[sp.Symbol, sp.Expr]:
    """N, N_8 and n_8 of ``entry``'s architecture (Model.at's counts, as its table's sums: the sizes left symbols)."""
    fp8_elements, fp8_tensors = fp8_weight_counts(entry.parameter_rows)
    return {N: entry.parameter_rows.numel(), N_8: fp8_elements, n_8: fp8_tensors}


def pasted_stage_forms(named: dict[str, str]) -> tuple[dict[str, Model], dict[str, str]]:
    """(the stage forms pastes add: a model of each architecture and layer profile no page name has, by its
    PASTED_MODEL name; PASTED_MODEL n -> its stage form), given ``named``, derive.render.page_stages.stage_forms."""
    models = comm_models()
    known = {(models[form].architecture, memory_profile(models[form])): form for form in named.values()}
    added: dict[str, Model] = {}
    forms: dict[str, str] = {}
    for name, entry in pasted_models()[0].items():
        forms[name] = known.setdefault((entry.architecture, memory_profile(entry)), name)
        if forms[name] == name:
            added[name] = entry
    return added, forms
