"""Every peer's number, reproduced under its own convention or explained by a named departure.

One module per peer (``deepspeed``, ``accelerate``, ``llm_analysis``, ``torchtitan``,
``calflops``) turns one record of its reference file (``tests/reference/peers_*.json``,
written by ``tools/peers/generate.py``) into :class:`Reproduction` s: derive's value
under the view the peer takes, and the departures of
:mod:`derive.identities.peers` that close the gap. ``python -m derive.peers DIR``
prints docs/validation.md's table from the reference files in DIR.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from derive.architectures.decoder import FAMILIES
from derive.architectures.tables import model_parameters
from derive.identities.peers import DEPARTURES
from derive.model import Model
from derive.presets import MODELS


@dataclass(frozen=True)
class Reproduction:
    """derive's value for one peer number: its view, the departures applied, the peer's scale and rounding.

    The peer's number is ``scale x (derived - sum of count x departure)``, rounded as the peer
    rounds (``floor`` for DeepSpeed's ``int()``); ``departures`` pairs a name of
    :data:`derive.identities.peers.DEPARTURES` with how many times it applies (layers, say).
    """

    view: str
    derived: sp.Expr
    departures: tuple[tuple[str, sp.Expr], ...] = ()
    values: tuple[tuple[sp.Symbol, object], ...] = ()
    rounding: str = "exact"
    scale: sp.Expr = sp.Integer(1)

    def _at(self, expr: sp.Expr) -> sp.Expr:
        return sp.nsimplify(sp.sympify(expr).xreplace({k: sp.sympify(v) for k, v in self.values}))

    @property
    def sizes(self) -> dict[str, sp.Expr]:
        """Each departure's size (derived - peer, times its count and the scale) at this record's values."""
        values, sizes = dict(self.values), {}
        for name, count in self.departures:
            size = self._at(self.scale * count) * DEPARTURES[name].size(values)
            sizes[name] = sizes.get(name, 0) + size
        return sizes

    @property
    def derived_value(self) -> sp.Expr:
        """derive's number under the view, before any departure (times the scale)."""
        return self._at(self.scale * self.derived)

    @property
    def value(self) -> sp.Expr:
        """The peer's number as derive predicts it: derived minus every departure, then the peer's rounding."""
        exact = self.derived_value - sum(self.sizes.values(), sp.Integer(0))
        return sp.floor(exact) if self.rounding == "floor" else exact


def model_of(name: str, models: dict[str, dict]) -> Model:
    """derive's :class:`Model` for a reference file's model: the preset, or the file's dict config."""
    if name in MODELS:
        return MODELS[name]
    if name not in models:
        raise ValueError(f"model: {name!r} is neither a preset nor in the file's models "
                         f"(known: {', '.join(sorted(models))})")
    shape = models[name]
    return Model(name, shape["family"], shape["layers"], shape["hidden"], shape["heads"],
                 shape["kv_heads"], shape["ffn"], shape["vocab"], shape["seq"], "dict config")


def _module(tensor_name: str) -> str:
    """The nn.Module that owns a parameter row: the name without its ``(...)`` note and ``.weight`` / ``.bias``."""
    bare = re.sub(r"\s*\(.*\)$", "", tensor_name)
    return re.sub(r"\.(weight|bias)$", "", bare)


def module_sizes(model: Model, top_level: bool = False, without: tuple[str, ...] = ()) -> dict[str, int]:
    """Parameters per module of ``model``'s table (one layer's modules, or with ``top_level`` one whole layer), rows tagged ``without`` left out."""
    sizes: dict[str, sp.Expr] = {}
    for row in model_parameters(FAMILIES[model.family]).without(*without):
        key = "layer" if top_level and row.has("layer") else _module(row.name)
        sizes[key] = sizes.get(key, 0) + sp.Mul(*row.shape)
    return {key: int(model.subs(size)) for key, size in sizes.items()}


def largest_module(model: Model) -> int:
    """Parameters of the largest module (its own tensors), from derive's parameter table at ``model``."""
    return max(module_sizes(model).values())


def as_number(value: object) -> sp.Expr:
    """A reference number (int or float) as an exact SymPy number (floats by their exact binary value)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"value: not a number: {value!r}")
    if isinstance(value, float):
        return sp.Rational(Fraction(value))
    return sp.Integer(value)
