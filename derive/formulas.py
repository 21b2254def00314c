"""The report's figures as SymPy expressions: one definition each, for the CLI and the web page.

A :class:`Formula` builds the expression of one ``python -m derive.report --json``
key from derive's accounts, for the choices it depends on (the model's tables,
precision, optimizer, ZeRO stage, activation profile). The report substitutes
numbers into it (:func:`evaluate`, through ``derive.evaluation``); ``derive.render.web`` prints the same
expressions as JavaScript with SymPy's code printer, so the page and the report
cannot disagree. A figure that a later one names has a ``symbol`` (N, F, M_state, M_act).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import sympy as sp

from derive.accounts.activations import ATTENTION_PROFILES, PROFILES, profile_bytes
from derive.accounts.hf_profiles import HF_PROFILES
from derive.accounts.flops import flops_per_token, hfu, mfu, recompute_factor, step_time_lower_bound
from derive.accounts.state import OPTIMIZERS, PRECISIONS, fp8_resident_bytes, state_bytes
from derive.conventions import six_n
from derive.evaluation import exact_number, substitute
from derive.model import Model
from derive.recipes import fp8_weight_counts
from derive.symbols import (F, G, M_GPU, MFU_target, N, N_8, N_GEMM, P, T, L, M_act, M_state, a, d, h, k,
                            n_8, s, t_step)

if TYPE_CHECKING:
    from derive.accounts.hf_saved import SavedForBackward

#: A model that does not fix its head width has k = h / a (Model.values; derive.symbols' k).
HEAD_WIDTH: dict[sp.Symbol, sp.Expr] = {k: h / a}

#: ZeRO stages (Rajbhandari et al. 2020, section 5).
ZERO_STAGES = (0, 1, 2, 3)

#: Every choice a formula may depend on but the model -> its options.
CHOICES: dict[str, tuple[object, ...]] = {
    "precision": tuple(PRECISIONS), "optimizer": tuple(OPTIMIZERS), "zero": ZERO_STAGES,
    "profile": tuple(PROFILES),
}

#: Report figures the web page leaves out: they exist only under the report's transformers
#: profiles (derive.accounts.hf_profiles.HF_PROFILES), which the page does not offer.
REPORT_ONLY = ("saved_for_backward_bytes",)

#: The report's optional inputs -> their symbols (the model's sizes come from Model.values).
INPUTS: dict[str, sp.Symbol] = {"tokens": T, "gpus": G, "peak": P, "mfu": MFU_target,
                                "step_time": t_step, "budget": M_GPU}


def form(m: Model) -> tuple[object, bool]:
    """What of a model its figures' expressions depend on: its tables (layout or family) and a fixed head width."""
    return m.architecture, m.head_dim is not None


@dataclass(frozen=True)
class Formula:
    """One report figure: its --json key and unit, how to build it, what it depends on.

    ``uses`` names the choices its expression depends on: "model" (the model's
    :func:`form`; ``build`` then gets a Model) and keys of :data:`CHOICES`.
    """

    key: str
    unit: str
    build: Callable[..., sp.Expr | None]
    uses: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    symbol: sp.Symbol | None = None

    def expression(self, choices: Mapping[str, object]) -> sp.Expr | None:
        """The expression under ``choices`` (None where the figure does not exist)."""
        values = tuple(choices[name] for name in self.uses)
        key = (self.key, *(form(v) if name == "model" else v for name, v in zip(self.uses, values)))
        if key not in _BUILT:
            expr = self.build(*values)
            model = choices.get("model") if "model" in self.uses else None
            if expr is not None and model is not None and model.head_dim is None:
                expr = sp.sympify(expr).xreplace(HEAD_WIDTH)
            _BUILT[key] = None if expr is None else sp.sympify(expr)
        return _BUILT[key]

    def variants(self, models: Mapping[str, Model], refused: dict[tuple[str, ...], str] | None = None
                 ) -> Iterator[tuple[tuple[str, ...], sp.Expr]]:
        """Every (choice names, expression) over the product of its choices, models by name.

        Choices the accounts refuse (a ValueError, as the report gives) yield nothing; their
        names and the error go into ``refused`` when given.
        """
        domains = [tuple(models) if name == "model" else CHOICES[name] for name in self.uses]
        for values in itertools.product(*domains):
            choices = {name: models[v] if name == "model" else v for name, v in zip(self.uses, values)}
            try:
                expr = self.expression(choices)
            except ValueError as error:
                if refused is not None:
                    refused[tuple(map(str, values))] = str(error)
                continue
            if expr is not None:
                yield tuple(map(str, values)), expr


_BUILT: dict[tuple[object, ...], sp.Expr | None] = {}


def _hf_saved(m: Model, profile: str) -> "SavedForBackward":
    """derive.accounts.hf_saved.dense_saved: transformers' tables load on the first such profile, not on import."""
    from derive.accounts.hf_saved import dense_saved

    return dense_saved(m, profile)


def _state(account: str) -> Callable[[str, str, int], sp.Expr]:
    return lambda precision, optimizer, zero: getattr(state_bytes(precision, optimizer, zero), account)


def _per_layer(attention: str) -> Callable[[Model, str], sp.Expr | None]:
    def build(m: Model, profile: str) -> sp.Expr | None:
        if attention != "fused" and profile not in ATTENTION_PROFILES:
            return None
        if profile in HF_PROFILES:
            return _hf_saved(m, profile).layers / L
        return profile_bytes(profile, attention, m)[0]
    return build


def _fp8_copies(precision: str, optimizer: str, zero: int) -> sp.Expr | None:
    """The FP8 weight copies, scales and history an FP8 precision holds; no figure for the others."""
    if PRECISIONS[precision].fp8 is None:
        return None
    return fp8_resident_bytes(precision, optimizer, zero)


def _fp8_layer(m: Model, profile: str, precision: str) -> sp.Expr | None:
    """One layer's saved bytes with the linear inputs in FP8: FP8 precisions on the Megatron + TE tables only."""
    recipe = PRECISIONS[precision].fp8
    if recipe is None or profile not in FP8_PROFILES:
        return None
    return profile_bytes(profile, "fused", m, recipe)[0]


def _all_layers(m: Model, profile: str) -> sp.Expr:
    """All layers and the logits (transformers' profiles: the whole model's saved tensors)."""
    if profile in HF_PROFILES:
        return _hf_saved(m, profile).total
    return profile_bytes(profile, "fused", m)[1]


def _saved_for_backward(m: Model, profile: str) -> sp.Expr | None:
    """The whole model's bytes kept for backward under a transformers profile (derive.accounts.hf_saved)."""
    return _hf_saved(m, profile).total if profile in HF_PROFILES else None


def _hfu(policy: str) -> Callable[[Model], sp.Expr]:
    return lambda m: hfu(T / t_step, F, G, P, recompute_factor(policy, m.architecture))


def _fit(activations: bool) -> Callable[[str, str, int], sp.Expr]:
    """GPUs that hold the state (and one micro-batch of activations) at the budget M_GPU.

    Without ZeRO every byte is split: ceil(total / M_GPU) (the article's self-test). Under
    ZeRO (Rajbhandari et al. 2020, section 5) a rank holds ``replicated + sharded / d``, so the
    ranks needed are ceil(sharded / (M_GPU - replicated)); none suffice (NaN: no figure)
    when the replicated bytes alone reach the budget.
    """
    def build(precision: str, optimizer: str, zero: int) -> sp.Expr:
        extra = M_act if activations else 0
        if not zero:
            return sp.ceiling((M_state + extra) / M_GPU)
        total = state_bytes(precision, optimizer, zero).total
        kept = total.subs(d, sp.oo) + extra
        sharded = sp.expand(total * d).coeff(d, 0)
        return _ranks_needed(sharded, kept)
    return build


@lru_cache(maxsize=None)
def _ranks_needed(sharded: sp.Expr, kept: sp.Expr) -> sp.Expr:
    """ceil(sharded / (M_GPU - kept)), at least 1, where kept < M_GPU (NaN otherwise); once per pair.

    SymPy's ceiling is kept between runs of a checkout (derive.printing.cache.ceiling, imported when
    first asked: the report prints no fit and does not load the store, nor hashlib and pickle).
    """
    from derive.printing.cache import ceiling

    return sp.Piecewise((at_least_one(ceiling(sharded / (M_GPU - kept))), kept < M_GPU),
                        (sp.nan, True))


def at_least_one(ranks: sp.Expr) -> sp.Expr:
    """``Max(1, ranks)`` for a ceiling ``ranks``, decided by the sign of its argument.

    The ceiling of a positive number is at least 1 (the ceiling itself), of a non-positive one
    at most 0 (so 1); otherwise nothing is known and the Max stays. This is what SymPy's own
    Max decides for these arguments, without its pairwise comparisons (_find_localzeros),
    which cost most of the page's fit formulas (tests/test_fast_paths.py holds the two equal).
    """
    ratio = ranks.args[0] if isinstance(ranks, sp.ceiling) else None
    if ratio is None:
        return sp.Max(1, ranks)
    if ratio.is_positive:
        return ranks
    if ratio.is_nonpositive:
        return sp.Integer(1)
    return sp.Max(1, ranks, evaluate=False)


STATE = ("precision", "optimizer", "zero")
#: The report profiles whose tables mark the linear inputs an FP8 recipe re-types (saved_fp8).
FP8_PROFILES = ("gpt", "llama-fused")
STEP = ("tokens", "gpus")
OBSERVED = ("tokens", "gpus", "step_time")

#: The report's figures in the order it prints them; a symbol is defined before it is used.
FORMULAS: tuple[Formula, ...] = (
    Formula("parameters", "parameters", lambda m: m.parameter_rows.numel(), ("model",), symbol=N),
    Formula("gemm_parameters", "parameters", lambda m: m.parameter_rows.where("gemm").numel(),
            ("model",), symbol=N_GEMM),
    Formula("fp8_parameters", "parameters", lambda m: fp8_weight_counts(m.parameter_rows)[0],
            ("model",), symbol=N_8),
    Formula("fp8_tensors", "tensors", lambda m: fp8_weight_counts(m.parameter_rows)[1],
            ("model",), symbol=n_8),
    Formula("bytes_per_parameter", "B/param",
            lambda precision, optimizer, zero: state_bytes(precision, optimizer, zero).total / N, STATE),
    Formula("state.params", "B", _state("params"), STATE),
    Formula("state.grads", "B", _state("grads"), STATE),
    Formula("state.optimizer", "B", _state("optimizer"), STATE),
    Formula("state.resident", "B", _state("total"), STATE, symbol=M_state),
    Formula("state.fp8_copies", "B", _fp8_copies, STATE),
    Formula("activations.per_layer_fused", "B", _per_layer("fused"), ("model", "profile")),
    Formula("activations.per_layer_materialised", "B", _per_layer("materialised"),
            ("model", "profile")),
    Formula("activations.per_layer_fp8", "B", _fp8_layer, ("model", "profile", "precision")),
    Formula("activations.all_layers_and_logits", "B", _all_layers, ("model", "profile"),
            symbol=M_act),
    Formula("saved_for_backward_bytes", "B", _saved_for_backward, ("model", "profile")),
    Formula("flops.six_n", "FLOP/token", six_n),
    Formula("flops.per_token_causal", "FLOP/token",
            lambda m: flops_per_token(m.architecture, "causal"), ("model",), symbol=F),
    Formula("time.one_sequence", "s", lambda: step_time_lower_bound(s, F, 1, P)),
    Formula("step.lower_bound", "s", lambda: step_time_lower_bound(T, F, G, P), needs=STEP),
    Formula("step.at_target_mfu", "s", lambda: step_time_lower_bound(T, F, G, P, MFU_target),
            needs=STEP),
    Formula("observed.tokens_per_second", "tokens/s", lambda: T / t_step, needs=OBSERVED),
    Formula("observed.mfu", "fraction", lambda: mfu(T / t_step, F, G, P), needs=OBSERVED),
    Formula("observed.hfu_selective", "fraction", _hfu("selective"), ("model",), OBSERVED),
    Formula("observed.hfu_full", "fraction", _hfu("full"), ("model",), OBSERVED),
    Formula("fit.budget", "B", lambda: M_GPU),
    Formula("fit.gpus_for_state", "GPUs", _fit(False), STATE),
    Formula("fit.gpus_for_state_and_activations", "GPUs", _fit(True), STATE),
)


def evaluate(choices: Mapping[str, object], values: Mapping[sp.Symbol, object],
             given: frozenset[str] | set[str]) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """key -> (exact value, expression) of every figure whose ``needs`` are all in ``given``.

    ``values`` holds the model's sizes and the inputs (b, d, T, G, P, ...); each
    figure with a symbol adds its value for the figures after it.
    """
    known = {symbol: exact_number(value) for symbol, value in values.items()}
    out: dict[str, tuple[sp.Expr, sp.Expr]] = {}
    for formula in FORMULAS:
        if not set(formula.needs) <= set(given):
            continue                     # not printed: not built either
        expr = formula.expression(choices)
        if expr is None:
            continue
        value = substitute(expr, known)
        if value is sp.nan:
            continue
        if not value.is_number:
            raise ValueError(f"{formula.key}: no value for {sorted(map(str, value.free_symbols))}")
        out[formula.key] = (value, expr)
        if formula.symbol is not None:
            known[formula.symbol] = value
    return out
