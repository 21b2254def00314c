"""FLOPs per token from the GEMM tables; recompute, MFU / HFU, step-time bound.

Model FLOPs are the three passes of every GEMM in ``derive.architectures.gemms``
(the article, sections 6.1-6.2). Hardware FLOPs add the forwards that an
activation-recompute policy runs again (section 7.2). MFU and HFU follow PaLM
(Chowdhery et al. 2022, appendix B); they take numbers, SymPy expressions or numpy
arrays (elementwise). The published per-token counts (6N, Kaplan,
PaLM, Narayanan, Megatron) are claims, kept in ``derive.conventions``.
"""
from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Callable, Union

import sympy as sp

from derive.architectures.decoder import LLAMA, Layout, require_layout
from derive.architectures.gemms import Gemm, flops
from derive.architectures.tables import model_gemms
from derive.expansion import expand
from derive.inputs import choose, positive_size
from derive.symbols import s

if TYPE_CHECKING:
    import numpy as np

Number = Union[int, float, sp.Expr, "np.ndarray"]


def _array(value: object) -> bool:
    """Whether ``value`` is a numpy array; numpy is not imported for it (no array exists before numpy is)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _any_above(value: Number, bound: float) -> bool:
    """Whether any element of the number or array ``value`` is above ``bound``."""
    if _array(value):
        import numpy as np
        return bool(np.any(np.asarray(value, dtype=float) > bound))
    return float(value) > bound

#: FLOPs per token by (account, Layout, mask, ...): immutable, each summed once per process.
_BUILT: dict[tuple[object, ...], sp.Expr] = {}


def _layout_key(layout: Layout) -> object:
    """A hashable stand-in for ``layout``: its repr (every field, dicts included); ValueError if it is no Layout."""
    return repr(require_layout(layout))


def _built(key: tuple[object, ...], build: Callable[[], sp.Expr]) -> sp.Expr:
    """The expression under ``key``, built by ``build`` the first time (an error is raised, not stored)."""
    try:
        hash(key)
    except TypeError:                      # an unhashable argument: built (and refused) as before
        return build()
    if key not in _BUILT:
        _BUILT[key] = build()
    return _BUILT[key]


#: Recompute policies: which forward GEMMs run a second time before the backward.
#: "selective" re-runs QK^T and PV (Korthikanti et al. 2022, section 4.2; what
#: FlashAttention does inside its kernel); "full" re-runs the forward of every
#: GEMM, output head included (the article's 2 + 2 + 4 = 8 per parameter, so
#: exactly 4/3); "full-layers" re-runs every Transformer layer but not the output
#: head (Megatron's recompute_granularity="full"; Narayanan et al. 2021's 96).
RECOMPUTED_GEMMS: dict[str, Callable[[Gemm], bool]] = {
    "none": lambda gemm: False,
    "selective": lambda gemm: gemm.has("attention_score"),
    "full": lambda gemm: True,
    "full-layers": lambda gemm: gemm.has("layer"),
}


def recomputed_flops_per_token(layout: Layout = LLAMA, mask: str = "causal",
                               recompute: str = "none") -> sp.Expr:
    """Forward FLOPs per token that ``recompute`` runs a second time."""
    again = RECOMPUTED_GEMMS[choose("recompute", recompute, RECOMPUTED_GEMMS)]
    return _built(("recomputed", _layout_key(layout), mask, recompute),
                  lambda: flops(model_gemms(layout, mask).filter(again), "forward"))


def flops_per_token(layout: Layout = LLAMA, mask: str = "causal",
                    recompute: str = "none") -> sp.Expr:
    """Training FLOPs per token: forward, dgrad, wgrad of every row of model_gemms(layout, mask) (built from the parameter tables), plus recomputed forwards (HARDWARE FLOPs unless recompute is "none")."""
    model = _built(("model", _layout_key(layout), mask), lambda: flops(model_gemms(layout, mask)))
    return model + recomputed_flops_per_token(layout, mask, recompute)


def model_flops_per_token(layout: Layout = LLAMA, mask: str = "causal") -> sp.Expr:
    """Model FLOPs per token (no recompute): PaLM's numerator for MFU."""
    return flops_per_token(layout, mask, "none")


def recompute_factor(policy: str, layout: Layout = LLAMA, mask: str = "causal") -> sp.Expr:
    """Hardware / model FLOPs under ``policy``: 1, 4/3 ("full"), 1 + 2Lsh/F ("selective", causal)."""
    extra = recomputed_flops_per_token(layout, mask, policy)
    return _built(("factor", _layout_key(layout), mask, policy),
                  lambda: 1 + sp.cancel(extra / model_flops_per_token(layout, mask)))


def packed_flops(tokens: Number, seqlen_squared_sum: Number, layout: Layout = LLAMA,
                 mask: str = "causal", *, per_token: sp.Expr | None = None) -> sp.Expr:
    """Model FLOPs of a batch of packed sequences: token-linear GEMMs x tokens, score GEMMs x sum of s_i^2.

    ``per_token`` (FLOPs per token of one s-token sequence) replaces the layout's table when given.
    """
    field = "family" if per_token is None else "per_token"
    expr = model_flops_per_token(layout, mask) if per_token is None else per_token
    poly = sp.Poly(expr, s)
    if poly.degree() > 1:
        raise ValueError(f"{field}: FLOPs per token are not linear in s: {expr}")
    return expand(tokens * poly.coeff_monomial(1) + seqlen_squared_sum * poly.coeff_monomial(s))


# ---- utilisation and time (PaLM, appendix B; the article, sections 6.4 and 7) ----

def _positive(field: str, value: Number) -> Number:
    """``value`` if it is (or may be, when symbolic) positive, else ValueError naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: must be positive, got {value!r}")
    if isinstance(value, sp.Basic):
        if value.is_number and not (value.is_extended_real and value.is_finite
                                    and value.is_positive):
            raise ValueError(f"{field}: must be a finite positive number, got {value}")
        if not isinstance(value, sp.Expr) or value.is_positive is False:
            raise ValueError(f"{field}: must be positive, got {value}")
        return value
    if _array(value):
        import numpy as np
        if value.dtype.kind not in "iuf" or not np.all(np.isfinite(value) & (value > 0)):
            raise ValueError(f"{field}: must be positive and finite at every element")
        return value.astype(np.float64)  # int64 products of tokens and FLOPs would overflow
    if not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{field}: must be a finite positive number, got {value!r}")
    return value


def _gpus(gpus: Number) -> Number:
    """``gpus`` if it is a positive whole number (or a symbol), else ValueError naming it."""
    if _array(gpus):
        import numpy as np
        counts = _positive("gpus", gpus)
        if not np.all(counts == np.round(counts)):
            raise ValueError("gpus: must be a whole number at every element")
        return counts
    if isinstance(gpus, sp.Basic) and not gpus.is_number:
        return _positive("gpus", gpus)
    positive_size("gpus", gpus)
    return gpus


def _quotient(field: str, numerator: Number, denominator: Number, formula: str) -> Number:
    """``numerator / denominator``, or ValueError naming ``field`` when a float overflows or underflows."""
    try:
        if _array(numerator) or _array(denominator):
            import numpy as np
            with np.errstate(all="ignore"):
                value = numerator / denominator
        else:
            value = numerator / denominator
    except (ZeroDivisionError, OverflowError):
        value = math.inf
    if isinstance(value, sp.Basic) and not value.is_number:
        return value
    if _array(value):
        import numpy as np
        if not np.all(np.isfinite(value) & (value > 0)):
            raise ValueError(f"{field}: {formula} is out of float range at some element")
        return value
    if not (0 < float(value) < math.inf):
        raise ValueError(f"{field}: {formula} is out of float range at these values")
    return value


#: Relative rounding a float utilisation may carry above 1 (a step at exactly the peak).
FLOAT_ROUNDING = 1e-9


def _at_most_one(field: str, ratio: Number, what: str) -> Number:
    """``ratio`` (a utilisation) if it is at most 1 (floats: up to rounding), else ValueError naming ``field``."""
    if isinstance(ratio, sp.Basic) and ratio.is_number and ratio > 1:
        raise ValueError(f"{field}: gives {what} = {float(ratio):.4g}, above 1: more FLOP/s than "
                         "the peak; check tokens_per_second, gpus and peak_flops")
    if not isinstance(ratio, sp.Basic):
        if _any_above(ratio, 1 + FLOAT_ROUNDING):
            highest = max(map(float, ratio.ravel())) if _array(ratio) else float(ratio)
            raise ValueError(f"{field}: gives {what} = {highest:.4g}, above 1: more "
                             "FLOP/s than the peak; check tokens_per_second, gpus and peak_flops")
    return ratio


def mfu(tokens_per_second: Number, flops_per_token: Number, gpus: Number, peak_flops: Number) -> Number:
    """PaLM's MFU: observed tokens/s x model FLOPs per token / (GPUs x peak); ValueError above 1."""
    ratio = _quotient("peak_flops", _positive("tokens_per_second", tokens_per_second)
                      * _positive("flops_per_token", flops_per_token),
                      _gpus(gpus) * _positive("peak_flops", peak_flops),
                      "tokens_per_second x flops_per_token / (gpus x peak_flops)")
    return _at_most_one("tokens_per_second", ratio, "MFU")


def hfu(tokens_per_second: Number, flops_per_token: Number, gpus: Number, peak_flops: Number,
        recompute_factor: Number) -> Number:
    """PaLM's HFU: MFU with the recomputed FLOPs counted (x hardware/model FLOPs); ValueError above 1."""
    factor = _positive("recompute_factor", recompute_factor)
    if not isinstance(factor, sp.Basic) and _any_above(-factor, -1):
        raise ValueError(f"recompute_factor: must be at least 1, got {factor!r}")
    return _at_most_one("recompute_factor", mfu(tokens_per_second, flops_per_token, gpus,
                                                peak_flops) * factor, "HFU")


def step_time_lower_bound(tokens: Number, flops_per_token: Number, gpus: Number, peak_flops: Number,
                          mfu: Number = 1) -> Number:
    """Seconds per step if every GPU ran the model's FLOPs at ``mfu`` x peak (the article, section 6.4)."""
    _positive("mfu", mfu)
    if not isinstance(mfu, sp.Basic) and _any_above(mfu, 1):
        raise ValueError(f"mfu: must be at most 1, got {mfu!r}")
    return _quotient("peak_flops", _positive("tokens", tokens)
                     * _positive("flops_per_token", flops_per_token),
                     _gpus(gpus) * _positive("peak_flops", peak_flops) * mfu,
                     "tokens x flops_per_token / (gpus x peak_flops x mfu)")
