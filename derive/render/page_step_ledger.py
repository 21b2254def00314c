"""The step model's symbols and the communication ledger traced for the page (derive.render.page_step's layers).

A micro-batch's compute by kind (:data:`COMPUTE`), each group's exposed seconds (:data:`EXPOSED`) and the
rank's own figures (:data:`PER_MODEL`) are symbols the step's figures are written in; :class:`Ledger` traces
comm_time.communication over the communication card's rows (derive.render.page_comm.ledger_rows), each row's
seconds and count a symbol defined once. :class:`SlotLedger` does the same for pasted configs, whose ledgers
differ in their rows' bytes only: each row a slot whose bytes and count are symbols too, set per architecture
(derive.render.page_paste), so that the exposed seconds are traced once per row structure.
"""
from __future__ import annotations

import types
from dataclasses import replace
from typing import Callable

import sympy as sp

from derive.accounts import comm_time
from derive.accounts.comm import GROUPS
from derive.accounts.prediction import Row
from derive.accounts.schedule import overlap_rules
from derive.accounts.step_layout import (LINEAR_DTYPE, Layout, local_dense_parameters, local_expert_parameters,
                                         local_parameters)
from derive.render.page_comm import FLAGS
from derive.render.page_step_trace import TRACE_DTYPE, TRACED_ETA, traced, traced_system
from derive.symbols import L, L_E, b, c, d, e, m, p, t, t_E, v

#: A micro-batch's compute seconds by kind (compute_time.compute_per_micro_batch's keys; ``layers`` its stage's
#: transformer layers, the parts of ``backward`` the EP overlap and the context ring read).
COMPUTE_KINDS = ("linear", "attention", "expert", "head", "recompute", "memory_bound", "backward",
                 "attention_backward", "backward expert", "backward head", "wgrad expert", "layers")
COMPUTE = {kind: sp.Symbol(f"C_{kind.replace(' ', '_')}", nonnegative=True) for kind in COMPUTE_KINDS}
#: Exposed communication seconds by group (comm_time.communication's keys).
EXPOSED = {group: sp.Symbol(f"X_{group}", nonnegative=True) for group in GROUPS}
#: Parameters one rank holds (step_layout.local_parameters) and its resident state bytes per parameter.
RANK_PARAMETERS, STATE = sp.Symbol("N_rank", positive=True), sp.Symbol("q_state", positive=True)
#: Its parameters outside and inside the routed experts (step_layout.local_dense_parameters /
#: local_expert_parameters: the DP rows' bucket counts) and its transformer layers (comm_time.held_layers: the
#: FSDP units a ZeRO-2/3 row is issued in).
DENSE_PARAMETERS = sp.Symbol("N_dense_rank", nonnegative=True)
EXPERT_PARAMETERS = sp.Symbol("N_expert_rank", nonnegative=True)
RANK_LAYERS = sp.Symbol("L_rank", positive=True)
#: What the model's own figures stand in for, per model (each traced once from its workload).
PER_MODEL = {RANK_PARAMETERS: local_parameters, DENSE_PARAMETERS: local_dense_parameters,
             EXPERT_PARAMETERS: local_expert_parameters, RANK_LAYERS: comm_time.held_layers}
#: The communication card's flags with predict's precisions (derive.accounts.step_layout.LINEAR_DTYPE).
STEP_FLAGS: dict[str, tuple[object, ...]] = {**FLAGS, "precision": tuple(LINEAR_DTYPE)}
#: The precision the compute is traced in: a recipe of TRACE_DTYPE (its peak and operand are symbols).
TRACE_PRECISION = next(name for name, dtype in LINEAR_DTYPE.items() if dtype == TRACE_DTYPE)


def _layout(recompute: str = "none", sequence_parallel: bool = False, single: bool = False, zero: int = 0) -> Layout:
    one = sp.Integer(1)
    return Layout(t, one if single else p, one if single else v, c, e, d, t_E, b, m, sequence_parallel, zero,
                  recompute, TRACE_PRECISION)


class Ledger:
    """Each ledger row's seconds and count, and each group's exposed seconds, traced once per distinct row set."""

    def __init__(self, define: Callable[[sp.Symbol, sp.Expr], None], prefix: str = "") -> None:
        self.define, self.rows, self.aggregates = define, {}, {}
        self.prefix = prefix  # of its symbols' names: {prefix}n_j, {prefix}R_j_k
        self.seconds: dict[tuple[str, sp.Expr], sp.Symbol] = {}
        self.defined: set[sp.Symbol] = set()
        self.rows_by_name: dict[str, Row] = {}
        self.number: dict[str, int] = {}  # a traced row's name -> j, its symbols' number
        self.by_id: dict[tuple[int, bool], tuple[object, Row]] = {}
        self.gpu = traced_system("hopper")

    def _row(self, found, single: bool) -> Row:
        known = self.by_id.get((id(found), single))  # comm_rows' seen parts hand back the same rows
        if known is not None and known[0] is found:
            return known[1]
        key = self._key(found, single)
        if key not in self.rows:
            j = len(self.rows)
            sent, count = self._sizes(found, j)
            moves = sp.Ne(found.ranks, 1) & sp.Ne(count, 0) & sp.Ne(sent, 0)
            count = sp.Piecewise((count, moves), (0, True))
            # the ledger's name kept (comm_time.communication tells a dispatch from a combine by it), made unique
            name = f"{found.name}#{j}"
            self.rows[key] = Row(name, found.group, found.collective, found.overlap, found.pass_, found.ranks,
                                 sent, count)
            self.rows_by_name[name], self.number[name] = self.rows[key], j
            self.define(sp.Symbol(f"{self.prefix}n_{j}", nonnegative=True), count)
        self.by_id[(id(found), single)] = (found, self.rows[key])
        return self.rows[key]

    def _key(self, found: Row, single: bool) -> tuple[object, ...]:
        """What makes two rows one traced row: being equal."""
        return (found, single)

    def _sizes(self, found: Row, j: int) -> tuple[sp.Expr, sp.Expr]:
        """The bytes and count of traced row j: the row's own."""
        return found.sent, found.count

    def exposed(self, found: list, recompute: str, single: bool, zero: int, moe: bool) -> dict[str, sp.Expr]:
        """comm_time.communication of ``found`` (their seconds and counts as symbols; the rank's parameters and
        layers the per-model symbols of PER_MODEL; the model's layers L and MoE layers L_E)."""
        rows = [self._row(row, single) for row in found]
        key = (tuple(row.name for row in rows), recompute, single, zero, moe)
        if key not in self.aggregates:
            real = comm_time.collective_seconds

            def seconds(row: Row, sizes, gpu, eta, calls=1) -> sp.Symbol:
                # one symbol per row and number of calls (a DP row's calls follow ZeRO: buckets or FSDP units)
                named = self.seconds.setdefault((row.name, sp.sympify(calls)),
                                                sp.Symbol(f"{self.prefix}R_{self.number[row.name]}_{len(self.seconds)}",
                                                          nonnegative=True))
                if named not in self.defined:
                    self.defined.add(named)
                    self.define(named, real(self.rows_by_name[row.name], sizes, gpu, eta, calls))
                return named
            named = [replace(row, count=sp.Symbol(f"{self.prefix}n_{self.number[row.name]}", nonnegative=True))
                     for row in rows]
            work = types.SimpleNamespace(moe=moe, layers=L, moe_layers=L_E if moe else 0)
            with traced(**{"comm_time.collective_seconds": seconds,
                           **{f"comm_time.{function.__name__}": (lambda symbol: lambda work, lay: symbol)(symbol)
                              for symbol, function in PER_MODEL.items()}}):
                self.aggregates[key] = comm_time.communication(
                    named, work, _layout(recompute, single=single, zero=zero), self.gpu, TRACED_ETA, dict(COMPUTE),
                    overlap_rules(None))
        return self.aggregates[key]




class SlotLedger(Ledger):
    """Pasted configs' ledgers: a row is a slot (its name, group, collective, overlap, pass and ranks) whose bytes and
    count are symbols ``S_j``, ``c_j`` (prefixed), their values per model and flags kept in :attr:`sizes`; the rows'
    seconds and the groups' exposed seconds are then the same expressions for every model of one row structure."""

    def __init__(self, define: Callable[[sp.Symbol, sp.Expr], None], prefix: str) -> None:
        super().__init__(define, prefix)
        #: S_j or c_j -> model -> flag values -> its bytes or count there
        self.sizes: dict[sp.Symbol, dict[str, dict[tuple[object, ...], sp.Expr]]] = {}
        #: (the model, the flag values) whose rows are being read
        self.reading: tuple[str, tuple[object, ...]] = ("", ())

    def _key(self, found: Row, single: bool) -> tuple[object, ...]:
        return (found.name, found.group, found.collective, found.overlap, found.pass_, found.ranks, single)

    def _sizes(self, found: Row, j: int) -> tuple[sp.Expr, sp.Expr]:
        return self._symbols(j)

    def _symbols(self, j: int) -> tuple[sp.Symbol, sp.Symbol]:
        return (sp.Symbol(f"{self.prefix}S_{j}", nonnegative=True), sp.Symbol(f"{self.prefix}c_{j}", nonnegative=True))

    def _row(self, found: Row, single: bool) -> Row:
        row = super()._row(found, single)
        model, values = self.reading
        for symbol, expr in zip(self._symbols(self.number[row.name]), (found.sent, found.count)):
            if self.sizes.setdefault(symbol, {}).setdefault(model, {}).setdefault(values, expr) != expr:
                raise ValueError(f"page: {model}'s ledger has two rows {found.name} at {values}")
        return row
