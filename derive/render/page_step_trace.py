"""The step model's numpy code run on SymPy expressions: each figure of ``derive predict`` as a formula of the layout's symbols.

derive.accounts.step, compute_time, comm_time, schedule and roofline compute with ``np`` functions
(where, maximum, minimum, trunc, ...) on numbers or numpy columns. :func:`traced` swaps each of those
modules' ``np`` for :data:`SYMBOLIC` (the same functions on SymPy expressions: ``where`` a Piecewise,
``maximum`` a Max, ``trunc`` a floor of a count) while the page is generated, so that the same code,
line by line, returns expressions instead of floats; nothing of the model is re-typed. The GPU is a
:class:`TracedSystem` whose figures are symbols (their values are derive.systems' and the calibration's
data), and the dtype a recipe runs its linear layers in is a peak and an operand size (:data:`LINEAR_PEAK`,
:data:`LINEAR_OPERAND`), so one trace serves every GPU and precision of a generation.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator

import sympy as sp

from derive.accounts import comm_time, compute_time, roofline, schedule, step, workload
from derive.accounts.efficiency import Efficiency
from derive.accounts.pipeline_split import rank_layers
from derive.systems import System


def _where(condition: Any, chosen: Any, other: Any) -> sp.Expr:
    """numpy.where on SymPy: the branch a decided condition picks, else a Piecewise."""
    condition = sp.sympify(condition)
    if condition is sp.true:
        return sp.sympify(chosen)
    if condition is sp.false:
        return sp.sympify(other)
    return sp.Piecewise((chosen, condition), (other, True), evaluate=False)


def _extreme(kind: type[sp.Max] | type[sp.Min]) -> Callable[[Any, Any], sp.Expr]:
    """numpy.maximum / minimum on SymPy: two numbers compared, else the Max / Min left as it is written (SymPy's
    search for comparable arguments is the trace's slowest step, and the printed function compares them anyway)."""
    def extreme(x: Any, y: Any) -> sp.Expr:
        x, y = sp.sympify(x), sp.sympify(y)
        if x.is_number and y.is_number:
            return kind(x, y)
        return x if x == y else kind(x, y, evaluate=False)
    return extreme


#: The numpy functions the step model calls, on SymPy expressions (one layout: no shapes, no broadcasting).
SYMBOLIC = types.SimpleNamespace(
    where=_where, maximum=_extreme(sp.Max), minimum=_extreme(sp.Min),
    trunc=sp.floor, ceil=sp.ceiling, asarray=lambda x, dtype=None: sp.sympify(x), less_equal=lambda x, y: sp.sympify(x) <= y,
    ndim=lambda x: 0, shape=lambda x: (), broadcast_to=lambda x, shape: x, broadcast_shapes=lambda *shapes: (),
    ones_like=lambda x: sp.Integer(1))

class _OnlyStage:
    """Where the only stage of an even split exists: ``there & (total > most)`` is true. It is the slowest stage;
    were its total 0, every kind (a nonnegative part of it) would be 0 too, so picking it is exact (SymPy cannot
    always decide the sign of the total, a sum holding differences of saved bytes)."""

    def __and__(self, other: object) -> bool:
        return True


def _stages(real: Callable[..., tuple]) -> Callable[..., tuple]:
    """compute_time.stage_loads with its only stage's ``there`` an :class:`_OnlyStage`."""
    def stages(layers: int, lay: Any) -> tuple:
        loads = real(layers, lay)
        return ((loads[0][0], loads[0][1], _OnlyStage()),) if len(loads) == 1 else loads
    return stages


#: The modules whose ``np`` the trace replaces.
TRACED_MODULES = (compute_time, comm_time, schedule, roofline, step)


def _symbol(name: str, integer: bool = False) -> sp.Symbol:
    return sp.Symbol(name, positive=True, integer=integer)


#: A GPU's figures (derive.systems.System) and the fitted constants (derive.accounts.efficiency) as symbols.
GPU_SYMBOLS: dict[str, sp.Symbol] = {
    "peak_bf16": _symbol("P_bf16"), "hbm_bandwidth": _symbol("B_HBM"), "nvlink_bandwidth": _symbol("B_NVL"),
    "nvlink_domain": _symbol("D_NVL", integer=True), "nic_bandwidth": _symbol("B_NIC"),
    "nvlink_latency": _symbol("lambda_NVL"), "nic_latency": _symbol("lambda_NIC"), "sms": _symbol("n_SM", integer=True),
    "eta_gemm": _symbol("eta_GEMM"), "eta_memory": _symbol("eta_HBM"), "eta_network": _symbol("eta_net"),
}
#: The peak and the operand bytes of the dtype the linear layers run in (derive.accounts.step_layout.LINEAR_DTYPE).
LINEAR_PEAK, LINEAR_OPERAND = _symbol("P_lin"), _symbol("q_lin")
#: An FP8 cast's HBM bytes per element, and of an input a fused normalization writes
#: (derive.accounts.roofline.cast_bytes_per_element of the recipe on the GPU's generation).
CAST, CAST_FUSED = (sp.Symbol(name, nonnegative=True) for name in ("q_cast", "q_cast_fused"))
#: The dtype the trace runs the linear layers in: any but bf16, whose peak and operand are the symbols above.
TRACE_DTYPE = "fp8"


class TracedSystem(System):
    """A System whose figures are symbols; ``link`` as System.link computes it, on SymPy expressions."""

    def link(self, span: Any) -> tuple[sp.Expr, sp.Expr]:
        near = sp.sympify(span) <= self.nvlink_domain
        return (_where(near, self.nvlink_bandwidth, self.nic_bandwidth),
                _where(near, self.nvlink_latency, self.nic_latency))


def traced_system(generation: str) -> TracedSystem:
    """The symbolic GPU of ``generation`` (its bf16 peak and the linear dtype's, HBM, links, SMs)."""
    g = GPU_SYMBOLS
    return TracedSystem("traced", {"bf16": g["peak_bf16"], TRACE_DTYPE: LINEAR_PEAK}, 1, g["hbm_bandwidth"],
                        g["nvlink_bandwidth"], g["nvlink_domain"], g["nic_bandwidth"], g["nvlink_latency"],
                        g["nic_latency"], g["sms"], generation, "", "")


#: The fitted constants as symbols (one GEMM efficiency: the GPU's generation's, Efficiency.gemm_for).
TRACED_ETA = Efficiency(GPU_SYMBOLS["eta_gemm"], GPU_SYMBOLS["eta_memory"], GPU_SYMBOLS["eta_network"])


@contextlib.contextmanager
def traced(**replaced: Any) -> Iterator[None]:
    """Inside: the step model's modules compute on SymPy (``np`` is :data:`SYMBOLIC`), the linear dtype's
    operand bytes and the FP8 cast's bytes are symbols, and ``replaced`` (``"module.name"``: value, e.g.
    ``"compute_time.timed_rows"``) stand in for the named functions; everything is put back on leaving."""
    modules = {module.__name__.rsplit(".", 1)[1]: module for module in (*TRACED_MODULES, workload)}
    swaps = {(module, "np"): SYMBOLIC for module in TRACED_MODULES}
    swaps[(compute_time, "stage_loads")] = _stages(compute_time.stage_loads)
    swaps[(roofline, "OPERAND_BYTES")] = {**roofline.OPERAND_BYTES, TRACE_DTYPE: LINEAR_OPERAND}
    swaps[(compute_time, "cast_bytes_per_element")] = lambda recipe, generation, norm_fused=False: (
        CAST_FUSED if norm_fused else CAST)
    # the lambdified (numpy) layer count of a stage, as the SymPy expression it was printed from
    swaps[(compute_time, "_rank_layers")] = lambda rank, balanced, layers: (
        lambda pipeline, virtual: rank_layers(rank, balanced, layers, pipeline, virtual))
    swaps[(step, "_plain")] = lambda value, shape=(): value
    for name, value in replaced.items():
        module, attribute = name.split(".")
        swaps[(modules[module], attribute)] = value
    saved = {key: getattr(*key) for key in swaps}
    try:
        for (module, attribute), value in swaps.items():
            setattr(module, attribute, value)
        yield
    finally:
        for (module, attribute), value in saved.items():
            setattr(module, attribute, value)
