"""The predicted step on the page: ``derive predict --json``'s step_time_s, tokens_per_s_per_gpu, mfu and breakdown.

The step model (derive.accounts.step.step_time over compute_time, comm_time and schedule) is run once
on SymPy expressions (derive.render.page_step_trace.traced) in three layers, each expression printed
once as a page function and keyed, as the communication card's, only by the flags that change it:

- a micro-batch's compute by kind (``C_linear`` ... ``C_backward``: compute_time.compute_per_micro_batch)
  per model, recompute policy and sequence parallelism; s stays a symbol (the page's --seq);
- each ledger row's seconds and count (``R_j``, ``n_j``: comm_time.collective_seconds of the
  communication card's rows, derive.render.page_comm.ledger_rows) and each group's exposed seconds
  (``X_tp`` ... ``X_pp``: comm_time.communication over those) per architecture and flags;
- the step itself (step.step_time with the two layers above as its compute and communication): the
  figures, in C, X, the rank's parameters ``N_rank`` and its state bytes per parameter ``q_state``.

A pasted config's step is its architecture's (derive.render.page_paste), traced the same way with every size a
symbol: its compute once per distinct workload, its ledger's exposed seconds once per row structure
(page_step_ledger.SlotLedger), its parameter counts and its rows' bytes per architecture (the key ``name``).

The GPU's figures, the fitted constants and the linear dtype's peak and operand size are data
(derive.systems, derive/calibration.json, roofline.OPERAND_BYTES, roofline.cast_bytes_per_element); a
GPU without tensor cores for a precision gets predict's line (prediction.tensor_cores).
"""
from __future__ import annotations

import argparse
import itertools
from dataclasses import replace
from typing import Callable

import sympy as sp

from derive.accounts import compute_time
from derive.accounts import workload as workload_module
from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.efficiency import calibrated
from derive.accounts.prediction import state_bytes_expression, tensor_cores
from derive.accounts.roofline import OPERAND_BYTES, cast_bytes_per_element
from derive.accounts.step import budget_time, layout_gpus, step_time
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.background import Once
from derive.evaluation import substitute, symbol_values
from derive.model import Model
from derive.options.layout import DEFAULT_GPU, add_token_budget, option_error
from derive.recipes import RECIPES
from derive.printing.javascript import javascript
from derive.printing.latex import tex
from derive.render.page_comm import FLAGS, flags_used, comm_forms, comm_models, flag_text, ledger_rows
from derive.render.page_functions import PageFunctions
from derive.render.page_layout import layout_field_messages
from derive.render.page_paste import pasted_counts, pasted_exposed, pasted_models, pasted_workload
from derive.render.page_step_ledger import (COMPUTE, COMPUTE_KINDS, DENSE_PARAMETERS, EXPERT_PARAMETERS, EXPOSED, PER_MODEL,
                                            RANK_LAYERS, RANK_PARAMETERS, STATE, STEP_FLAGS, Ledger, _layout)
from derive.render.page_step_trace import (CAST, CAST_FUSED, GPU_SYMBOLS, LINEAR_OPERAND, LINEAR_PEAK, TRACED_ETA,
                                           traced, traced_system)
from derive.symbols import BY_NAME, c, d, meaning, s
from derive.systems import SYSTEMS

#: The command the step card's "copy as command" writes (derive.predict's parser's prog).
PREDICT_COMMAND = "python -m derive.predict"
#: The figures shown (derive predict --json's keys, breakdown dotted), with labels and units.
FIGURES: dict[str, tuple[str, str]] = {"step_time_s": ("Predicted step time", "s"),
                                       "tokens_per_s_per_gpu": ("Tokens per second per GPU", "tokens/s"),
                                       "mfu": ("Model FLOPs utilisation (MFU)", "")}
#: --token-budget's figures (step.budget_time's keys), shown where the field is given.
BUDGET_FIGURES: dict[str, tuple[str, str]] = {"days": ("Days to train on the token budget", "days"),
                                              "gpu_hours": ("GPU-hours to train on the token budget", "GPU-hours")}
#: The step card's own fields: derive predict's options the report and derive comm have not -> kind.
STEP_FIELDS: dict[str, str] = {"token-budget": "count"}
#: The tokens of --token-budget.
TOKEN_BUDGET = sp.Symbol("D_budget", positive=True)
BREAKDOWN_LABELS: dict[str, str] = {
    "compute": "GEMMs", "recompute": "Recomputed forwards", "memory_bound": "Element-wise (HBM)",
    "tp": "Exposed TP communication", "cp": "Exposed CP communication", "ep": "Exposed EP communication",
    "bubble": "Pipeline bubble", "dp": "Exposed DP communication", "pp": "Exposed pipeline sends",
    "optimizer": "Optimizer step"}
#: What the 'where' list says of the step's own symbols.
MEANINGS: dict[str, str] = {
    **{symbol.name: f"seconds of one micro-batch's {kind.replace('_', '-')} work on the slowest stage "
                    "(derive.accounts.compute_time.compute_per_micro_batch)" for kind, symbol in COMPUTE.items()},
    **{symbol.name: f"exposed {group.upper()} communication seconds (derive.accounts.comm_time.communication)"
       for group, symbol in EXPOSED.items()},
    RANK_PARAMETERS.name: "parameters one rank holds (derive.accounts.step_layout.local_parameters)",
    DENSE_PARAMETERS.name: "parameters one rank holds outside the routed experts "
                           "(derive.accounts.step_layout.local_dense_parameters)",
    EXPERT_PARAMETERS.name: "routed-expert parameters one rank holds (derive.accounts.step_layout.local_expert_parameters)",
    TOKEN_BUDGET.name: "tokens to train on (derive predict --token-budget)",
    RANK_LAYERS.name: "transformer layers on the most loaded pipeline rank (derive.accounts.comm_time.held_layers)",
    STATE.name: "resident state bytes per parameter the optimizer step moves (derive.accounts.state)",
    **{symbol.name: f"the GPU's {field.replace('_', ' ')} (derive.systems, derive/calibration.json)"
       for field, symbol in GPU_SYMBOLS.items()},
}


def _keep_seq(entry: Model, expr: sp.Expr, **extra: int) -> sp.Expr:
    """workload._number with s left a symbol (the page's --seq)."""
    values = {symbol: value for symbol, value in entry.values.items() if symbol != s}
    return substitute(sp.sympify(expr), symbol_values(values, **extra))


def symbolic_workload(model: Model) -> workload_module.Workload:
    """derive.accounts.workload.workload of ``model`` with s a symbol."""
    with traced(**{"workload._number": _keep_seq}):
        work = workload_module.workload.__wrapped__(model)
    return replace(work, seq=s)


def compute_table(work: workload_module.Workload, define: Callable[[sp.Symbol, sp.Expr], None],
                  prefix: str, shared: dict[sp.Expr, sp.Symbol] | None = None
                  ) -> dict[tuple[object, ...], dict[str, sp.Expr]]:
    """(recompute, sequence parallel) -> a micro-batch's seconds by kind, traced; each GEMM row's seconds per pass
    (compute_time.timed_rows: forward, backward, its weight-gradient part) are symbols ``{prefix}{i}_f``,
    ``{prefix}{i}_b``, ``{prefix}{i}_w``, defined once; with ``shared`` (expression -> its symbol, kept across
    tables), a pass equal to one named before keeps that one's symbol, ``{prefix}{j}_{pass}`` the j-th named."""
    gpu, table, named = traced_system("hopper"), {}, []
    real = compute_time.timed_rows

    def symbol(i: int, pass_: str, expr: sp.Expr) -> sp.Symbol:
        if shared is None:
            return sp.Symbol(f"{prefix}{i}_{pass_}", nonnegative=True)
        return shared.setdefault(expr, sp.Symbol(f"{prefix}{len(shared)}_{pass_}", nonnegative=True))

    def timed(*args: object) -> tuple[tuple[object, ...], ...]:
        if not named:  # the rows depend on t, t_E, e and the tokens only: the same symbols at every flag
            for i, (row, *passes) in enumerate(real(*args)):
                symbols = tuple(symbol(i, pass_, expr) for pass_, expr in zip("fbw", passes))
                for name, expr in zip(symbols, passes):
                    define(name, expr)
                named.append((row, *symbols))
        return tuple(named)
    with traced(**{"compute_time.timed_rows": timed}):
        for recompute, parallel in itertools.product(RECOMPUTE_POLICIES, (False, True)):
            found = compute_time.compute_per_micro_batch(work, _layout(recompute, parallel), gpu, TRACED_ETA)
            if set(found) != set(COMPUTE_KINDS):
                raise ValueError(f"page_step.COMPUTE_KINDS {sorted(COMPUTE_KINDS)} differ from "
                                 f"compute_time.compute_per_micro_batch's kinds {sorted(found)}")
            table[(recompute, parallel)] = found
    return table


def step_figures(work: workload_module.Workload) -> dict[str, sp.Expr]:
    """step.step_time's figures (derive predict --json's keys, breakdown dotted) in C, X, N_rank and q_state,
    and step.budget_time's days and GPU-hours of D_budget tokens at its throughput on the layout's GPUs."""
    lay = _layout()
    with traced(**{"step.compute_per_micro_batch": lambda *args: dict(COMPUTE),
                   "step.communication": lambda *args: dict(EXPOSED),
                   "step.local_parameters": lambda *args: RANK_PARAMETERS}):
        result = step_time(work, lay, traced_system("hopper"), (), TRACED_ETA, None, STATE)
    figures = {key: getattr(result, key) for key in FIGURES}
    figures.update(budget_time(result.tokens_per_s_per_gpu, layout_gpus(lay), TOKEN_BUDGET))
    return {**figures, **{f"breakdown.{part}": value for part, value in result.breakdown.items()}}


def step_models() -> dict[str, str]:
    """Page name -> the name of its model (the first name with an equal Model)."""
    first: dict[Model, str] = {}
    return {name: first.setdefault(entry, name) for name, entry in comm_models().items()}


def gpu_values() -> dict[str, object]:
    """Per GPU its figures by symbol name, and per precision the linear dtype's (or predict's refusal line)."""
    eta = calibrated()
    out = {}
    for name, gpu in SYSTEMS.items():
        g = GPU_SYMBOLS
        values = {g["peak_bf16"].name: gpu.peak("bf16"), g["hbm_bandwidth"].name: gpu.hbm_bandwidth,
                  g["nvlink_bandwidth"].name: gpu.nvlink_bandwidth, g["nvlink_domain"].name: gpu.nvlink_domain,
                  g["nic_bandwidth"].name: gpu.nic_bandwidth, g["nvlink_latency"].name: gpu.nvlink_latency,
                  g["nic_latency"].name: gpu.nic_latency, g["sms"].name: gpu.sms,
                  g["eta_gemm"].name: eta.gemm_for(gpu), g["eta_memory"].name: eta.memory,
                  g["eta_network"].name: eta.network}
        precisions, refused = {}, {}
        for precision, dtype in LINEAR_DTYPE.items():
            try:
                tensor_cores(precision, gpu)
            except ValueError as error:
                refused[precision] = str(option_error(error, {"gpu": "--gpu"}))
                continue
            cast = dtype != "bf16"
            recipe = RECIPES.get(precision)
            precisions[precision] = {
                LINEAR_PEAK.name: gpu.peak(dtype), LINEAR_OPERAND.name: OPERAND_BYTES[dtype],
                CAST.name: cast_bytes_per_element(recipe, gpu.generation) if cast else 0,
                CAST_FUSED.name: cast_bytes_per_element(recipe, gpu.generation, norm_fused=True) if cast else 0}
        out[name] = {"values": values, "precisions": precisions, "refused": refused}
    return out


def step_field_messages(option: str, kind: str) -> dict[str, str]:
    """derive predict's argparse line for the step card's field ``--option`` (derive.options.layout.add_token_budget)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_token_budget(parser)
    return layout_field_messages(option, kind, parser)


class StepFunctions(PageFunctions):
    """The page's print-once registry, with each function's argument names, and functions printed without LaTeX."""

    def __init__(self) -> None:
        super().__init__()
        self.arguments: list[list[str]] = []

    def _argued(self, code: str, expr: sp.Expr) -> int:
        index = self.functions.setdefault(code, len(self.functions))
        if index == len(self.arguments):
            self.arguments.append(sorted(symbol.name for symbol in expr.free_symbols))
        return index

    def __call__(self, expr: sp.Expr) -> dict[str, object]:
        entry = super().__call__(expr)
        self._argued(javascript(sp.sympify(expr)), sp.sympify(expr))
        return entry

    def index(self, expr: sp.Expr) -> int:
        """The function of ``expr`` (printed once, no LaTeX: an intermediate quantity)."""
        expr = sp.sympify(expr)
        return self._argued(javascript(expr), expr)


def _keyed(tables: dict[str, dict[tuple[object, ...], sp.Expr]], names: list[str],
           functions: StepFunctions) -> dict[str, object]:
    """A quantity's variants: per head (a model or an architecture) its table by ``names``' values, keyed by the
    head and only the flags that change some table (derive.render.page_comm's keying); a flag's value that gives
    what another value gives at every other head and flag is keyed by that value (``same``: flag -> value -> it)."""
    positions = sorted(set().union(*(flags_used(table) for table in tables.values() if len(table) > 1)))
    rows: dict[tuple[str, ...], sp.Expr] = {}
    for head, table in tables.items():
        for values, expr in table.items():
            rows[(head, *(flag_text(values[index]) for index in positions))] = expr
    same: dict[str, dict[str, str]] = {}
    for place, index in enumerate(positions, start=1):
        found: dict[str, set[tuple[tuple[str, ...], sp.Expr]]] = {}
        for key, expr in rows.items():
            found.setdefault(key[place], set()).add((key[:place] + key[place + 1:], expr))
        first: dict[frozenset, str] = {}
        for value, pairs in found.items():
            if first.setdefault(frozenset(pairs), value) != value:
                same.setdefault(names[index], {})[value] = first[frozenset(pairs)]
    variants = {}
    for (head, *texts), expr in rows.items():
        key = [head, *(same.get(names[index], {}).get(text, text) for index, text in zip(positions, texts))]
        variants["|".join(key)] = functions.index(expr)
    return {"uses": [names[index] for index in positions], "variants": variants, **({"same": same} if same else {})}


@Once
def step_code() -> tuple[str, dict[str, object]]:
    """(the step's generated script, what step.js needs: each symbol's variants, the figures', the GPUs' values)."""
    functions = StepFunctions()
    models, forms, ids = comm_models(), comm_forms(), step_models()
    definitions: dict[str, dict[str, object]] = {}

    def define(symbol: sp.Symbol, expr: sp.Expr) -> None:
        if symbol.name not in definitions:
            definitions[symbol.name] = {"uses": [], "head": None, "variants": {"": functions.index(expr)}}

    # symbol -> (its flags, "model" or "form": what its key's head names, head -> its table)
    pending: dict[str, tuple[list[str], str, dict[str, dict[tuple[object, ...], sp.Expr]]]] = {}

    def merge(name: str, head: str, table: dict[tuple[object, ...], sp.Expr], names: list[str],
              kind: str = "model") -> None:
        pending.setdefault(name, (names, kind, {}))[2][head] = table

    figures: dict[str, dict[str, sp.Expr]] = {}

    def traced_model(head: str, work: workload_module.Workload, at: Callable[[sp.Expr], sp.Expr], prefix: str,
                     shared: dict[sp.Expr, sp.Symbol] | None = None) -> None:
        """The model's layers: its compute by kind, PER_MODEL's symbols, its state bytes (its counts by ``at``)."""
        table = compute_table(work, define, prefix, shared)
        for kind, symbol in COMPUTE.items():
            merge(symbol.name, head, {key: found[kind] for key, found in table.items()},
                  ["recompute", "sequence_parallel"])
        with traced():
            for symbol, function in PER_MODEL.items():
                merge(symbol.name, head, {(): function(work, _layout())}, [])
        states = {(precision, zero): at(state_bytes_expression(precision, zero)).subs(d, d * c if zero else 1)
                  for precision in LINEAR_DTYPE for zero in FLAGS["zero"]}
        merge(STATE.name, head, states, ["precision", "zero"])
        for key, expr in step_figures(work).items():
            figures.setdefault(key, {})[head] = expr

    for number, model_name in enumerate(dict.fromkeys(ids.values())):
        traced_model(model_name, symbolic_workload(models[model_name]), models[model_name].at, f"g{number}_")
    # a pasted config: its architecture's workload with its sizes symbols (derive.render.page_paste), its counts
    # a definition of its ledger's form (one architecture)
    heads, works, shared = {}, {}, {}
    for name, entry in pasted_models()[0].items():
        work = pasted_workload(entry)
        heads[name] = works.setdefault(work, name)
        if heads[name] == name:
            traced_model(name, work, lambda expr: expr, "q", shared)
        for symbol, expr in pasted_counts(entry).items():
            merge(symbol.name, name, {(): expr}, [], "name")
    ledger = Ledger(define)
    for form in dict.fromkeys(forms.values()):
        model, seen = models[form], {}
        for values in itertools.product(*STEP_FLAGS.values()):
            flags = dict(zip(STEP_FLAGS, values))
            exposed = ledger.exposed(ledger_rows(model, flags, seen), flags["recompute"], bool(flags["single"]),
                                     int(flags["zero"]), not model.dense)
            for group, symbol in EXPOSED.items():
                pending.setdefault(symbol.name, (list(STEP_FLAGS), "form", {}))[2].setdefault(form, {})[values] = \
                    exposed[group]
    # a pasted config's ledger: its row structure's exposed seconds, its slots' bytes and counts by structure where
    # every architecture of one structure has the same, else by architecture
    exposed_tables, structures, slots = pasted_exposed(define)
    for form, table in exposed_tables.items():
        for group, symbol in EXPOSED.items():
            merge(symbol.name, form, {values: found[group] for values, found in table.items()}, list(STEP_FLAGS), "form")
    for symbol, by_model in slots.sizes.items():
        by_form: dict[str, list[dict[tuple[object, ...], sp.Expr]]] = {}
        for name, table in by_model.items():
            by_form.setdefault(structures[name], []).append(table)
        if all(table == tables[0] for tables in by_form.values() for table in tables):
            for form, tables in by_form.items():
                merge(symbol.name, form, tables[0], list(STEP_FLAGS), "form")
        else:
            for name, table in by_model.items():
                merge(symbol.name, name, table, list(STEP_FLAGS), "name")
    for name, (names, head, tables) in pending.items():
        definitions[name] = {**_keyed(tables, names, functions), "head": head}
    shown = []
    for key, by_model in figures.items():
        distinct = set(by_model.values())
        variants = ({"": functions(next(iter(distinct)))} if len(distinct) == 1
                    else {name: functions(expr) for name, expr in by_model.items()})
        part = key.partition(".")[2]
        label, unit = {**FIGURES, **BUDGET_FIGURES}.get(key, (BREAKDOWN_LABELS.get(part, part), "s"))
        shown.append({"key": key, "row": f"step:{key}", "label": label, "unit": unit, "symbol": None,
                      "part": part or None, "by_model": len(distinct) > 1, "variants": variants,
                      "needs": TOKEN_BUDGET.name if key in BUDGET_FIGURES else None})
    legend = {}
    for entry in functions.printed.values():
        for name in entry["args"]:
            legend[name] = ({"tex": tex(BY_NAME[name]), "meaning": meaning(BY_NAME[name])} if name in BY_NAME
                            else {"tex": tex(sp.Symbol(name)), "meaning": MEANINGS.get(name, name)})
    data = {"definitions": definitions, "figures": shown, "models": {**ids, **heads}, "forms": {**forms, **structures},
            # a pasted config's report form (config.js) -> its architecture's name
            "pasted": pasted_models()[1], "gpu": DEFAULT_GPU,
            "command": PREDICT_COMMAND, "total": next(iter(FIGURES)),
            "fields": {option: TOKEN_BUDGET.name for option in STEP_FIELDS},
            "arguments": functions.arguments, "gpus": gpu_values(), "dtype": dict(LINEAR_DTYPE),
            "legend": legend}
    script = functions.script("Generated by derive.render.page_step from derive.accounts.step's model run on SymPy.",
                              "DERIVE_STEP_FUNCTIONS")
    return script, data
