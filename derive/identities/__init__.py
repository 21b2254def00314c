"""The identity registry: published closed forms against derived sums.

Each identity names a closed form someone published (the *claim*, the only
place a literal coefficient may appear), its source, the assumptions under
which it holds (prose, plus substitutions applied to both sides), and a
function that derives the same quantity from the tensor tables. A proof is
exact: the difference must reduce to 0 with SymPy's ``expand``/``cancel``.

An identity registered with ``holds=False`` is a *departure*: a form applied
outside its assumptions (the 34 of a GPT layer on a Llama layer, say); its
proof succeeds when the difference is provably non-zero, and the difference
is reported.

Submodules of this package register identities on import (the shape of
torch.utils.flop_counter's ``register_flop_formula``); :func:`all_identities`
imports every one, so adding a module is enough to add it to the check.
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import pickle
import pkgutil
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable, Mapping

import sympy as sp

from derive.background import shared
from derive.expansion import expand, laurent_symbols
from derive.printing import cache


class Sided:
    """A departure whose ``sides()`` (claimed, derived) are derived once per process, as :attr:`pair`.

    The identity's claim, its derived side and the per-preset sizes all read the same pair.
    """

    sides: Callable[[], tuple[sp.Expr, sp.Expr]]

    @cached_property
    def pair(self) -> tuple[sp.Expr, sp.Expr]:
        """``sides()``, derived on first use."""
        return self.sides()


class Later:
    """A claim derived from derive's conventions (Megatron's formula, a parameter count) on first use, not on import.

    The identity is then built when proved, in either process of the check (derive.background).
    """

    def __init__(self, build: Callable[[], sp.Expr]) -> None:
        self.build = build

    @cached_property
    def value(self) -> sp.Expr:
        """``build()``, derived on first use."""
        return self.build()


class Deferred(Mapping):
    """An identity's substitutions (``where``) built on first read, not on import (a derived parameter count, say)."""

    def __init__(self, build: Callable[[], Mapping[sp.Symbol, sp.Expr]]) -> None:
        self.build = build

    @cached_property
    def built(self) -> dict[sp.Symbol, sp.Expr]:
        """``build()`` as a dict, on first read."""
        return dict(self.build())

    def __getitem__(self, symbol: sp.Symbol) -> sp.Expr:
        return self.built[symbol]

    def __iter__(self) -> Iterator[sp.Symbol]:
        return iter(self.built)

    def __len__(self) -> int:
        return len(self.built)


@dataclass(frozen=True)
class Identity:
    """A claimed closed form, where it comes from, and how derive derives it."""

    key: str
    name: str
    topic: str
    claimed: "sp.Expr | Sided | Later"
    derive: Callable[[], sp.Expr]
    source: str
    assumptions: tuple[str, ...] = ()
    where: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)
    holds: bool = True

    @cached_property
    def claim(self) -> sp.Expr:
        """The claimed closed form; a departure's (:class:`Sided`) is its pair's first side, a :class:`Later` its value, derived on first use."""
        if isinstance(self.claimed, Sided):
            return self.claimed.pair[0]
        return self.claimed.value if isinstance(self.claimed, Later) else self.claimed

    def sides(self) -> tuple[sp.Expr, sp.Expr]:
        """(claim, derived), both under the identity's substitutions."""
        where = {symbol: sp.sympify(value) for symbol, value in self.where.items()}
        claim = sp.sympify(self.claim).xreplace(where)
        derived = sp.sympify(self.derive()).xreplace(where)
        return claim, derived


@dataclass(frozen=True)
class Proof:
    """The outcome of proving one identity."""

    identity: Identity
    claim: sp.Expr
    derived: sp.Expr
    difference: sp.Expr

    @property
    def zero(self) -> bool:
        """Whether derived - claim reduced to exactly 0."""
        return self.difference == 0

    @property
    def passed(self) -> bool:
        """An identity passes when the difference is 0, a departure when it is not."""
        return self.zero == self.identity.holds

    @property
    def verdict(self) -> str:
        """One word for the outcome: proven, departs, or FAILED."""
        if self.identity.holds:
            return "proven" if self.zero else "FAILED"
        return "departs" if not self.zero else "FAILED (expected a departure, difference is 0)"

    def record(self) -> dict[str, object]:
        """A JSON-ready description of this proof."""
        entry = self.identity
        return {
            "key": entry.key,
            "name": entry.name,
            "topic": entry.topic,
            "holds": entry.holds,
            "passed": self.passed,
            "verdict": self.verdict,
            "claim": sp.sstr(self.claim),
            "derived": sp.sstr(self.derived),
            "difference": sp.sstr(self.difference),
            "source": entry.source,
            "assumptions": list(entry.assumptions),
            "where": {sp.sstr(symbol): sp.sstr(value) for symbol, value in entry.where.items()},
        }


#: Every registered identity by its stable key (``module.function`` unless given).
REGISTRY: dict[str, Identity] = {}


def identity(name: str, *, topic: str, claim: "sp.Expr | Sided | Later", source: str,
             assumptions: tuple[str, ...] = (), where: Mapping[sp.Symbol, sp.Expr] | None = None,
             holds: bool = True, key: str | None = None
             ) -> Callable[[Callable[[], sp.Expr]], Callable[[], sp.Expr]]:
    """Register the decorated function as the derived side of identity ``name``.

    ``key`` (default: the defining module's last name and the function's, ``flops.scores_causal``)
    is what code looks an identity up by; ``name`` is only displayed. A departure's ``claim`` may be
    the :class:`Sided` itself: its sides are then derived when proved, not on import; so is a
    :class:`Later` claim and a :class:`Deferred` ``where``.
    """

    def register(derive: Callable[[], sp.Expr]) -> Callable[[], sp.Expr]:
        stable = key or f"{derive.__module__.rsplit('.', 1)[-1]}.{derive.__name__}"
        if stable in REGISTRY:
            raise ValueError(f"identity key {stable!r} is registered twice")
        if any(entry.name == name for entry in REGISTRY.values()):
            raise ValueError(f"identity {name!r} is registered twice")
        REGISTRY[stable] = Identity(stable, name, topic, claim, derive, source, assumptions,
                                    where if isinstance(where, Deferred) else dict(where or {}), holds)
        return derive

    return register


def difference(derived: sp.Expr, claim: sp.Expr) -> sp.Expr:
    """derived - claim, reduced: expanded, then over a common denominator and factored.

    ``factor`` puts the difference over one denominator and factors numerator and denominator
    as polynomials (common factors cancel): 0 exactly when the identity holds, a departure
    shown factored otherwise. It is what ``cancel(together(...))`` then ``factor`` gave, in one pass.
    """
    diff = expand(derived - claim)
    if diff != 0 and diff.has(sp.Pow):
        diff = _factored(diff) if _laurent(diff) else sp.factor(diff)
    return diff


def _laurent(expr: sp.Expr) -> bool:
    """Whether the expanded ``expr`` is a sum of products of numbers and integer powers of symbols (its only denominators monomials).

    Such an expression, expanded, is 0 exactly when it vanishes: its expanded form decides the verdict.
    """
    return laurent_symbols(expr) is not None


#: What the kept factored forms are filed under in derive.printing.cache's store (beside printed text).
FACTORED_TAG = b"derive.identities.difference: sympy.factor\0"


def _factored(diff: sp.Expr) -> sp.Expr:
    """``sp.factor(diff)`` of a non-zero expanded Laurent difference, kept between runs of the checkout.

    ``diff`` is already known non-zero (:func:`_laurent`); ``factor`` only shows it over one denominator,
    and costs most of a departure's proof. The form is kept in derive.printing.cache's store, keyed by
    the SHA-256 of ``diff``'s exact pickle (the store's file is named by SymPy's version), and a kept
    form is used only if it expands back to ``diff`` exactly; otherwise it is factored again.
    """
    exact = pickle.dumps(diff, protocol=5)
    key = hashlib.sha256(FACTORED_TAG + exact).hexdigest()
    entry = cache.STORE.load().get(key)
    if isinstance(entry, list) and entry and isinstance(entry[0], str):
        try:
            kept = pickle.loads(base64.b64decode(entry[0]))
        except Exception:  # an unreadable entry is factored again
            kept = None
        if isinstance(kept, sp.Expr) and kept != 0 and expand(kept) == diff:
            return kept
    factored = sp.factor(diff)
    cache.STORE.add(key, [base64.b64encode(pickle.dumps(factored, protocol=5)).decode("ascii"), {}])
    return factored


_PROOFS: dict[int, Proof] = {}


def prove(entry: Identity) -> Proof:
    """Prove one identity exactly (once per process: the check and every sheet section share it)."""
    cached = _PROOFS.get(id(entry))
    if cached is None or cached.identity is not entry:
        claim, derived = entry.sides()
        cached = _PROOFS[id(entry)] = Proof(entry, claim, derived, difference(derived, claim))
    return cached


def all_identities() -> list[Identity]:
    """Every registered identity, module by module in name order, whatever the import order."""
    modules = [f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__)]
    for name in modules:
        importlib.import_module(name)
    rank = {name: index for index, name in enumerate(modules)}
    return sorted(REGISTRY.values(), key=lambda entry: rank.get(entry.derive.__module__, len(rank)))


def prove_all(apart: bool = False) -> list[Proof]:
    """Prove every identity in registration order.

    ``apart``: with a second CPU, a forked child (derive.background) and this process share the
    topic modules, each taking the next one until none is left; the same proofs, each done once.
    """
    entries = all_identities()
    if apart:
        _prove_apart(entries)
    return [prove(entry) for entry in entries]


def _prove_apart(entries: list[Identity]) -> None:
    """Prove ``entries`` in two processes, topic module by topic module (derive.background.shared): each module is
    proved by one process, the first free; the child's proofs are kept here as this process's."""
    groups = topic_groups(entries)
    for group, sides in zip(groups, shared([partial(proved_sides, group) for group in groups])):
        keep_proofs(group, sides)


def topic_groups(entries: list[Identity]) -> list[list[Identity]]:
    """``entries`` not proved yet in this process, grouped by their topic module (in ``entries``' order)."""
    modules = dict.fromkeys(entry.derive.__module__ for entry in entries)
    return [[entry for entry in entries if entry.derive.__module__ == module and id(entry) not in _PROOFS]
            for module in modules]


def proved_sides(group: list[Identity]) -> list[tuple[sp.Expr, sp.Expr, sp.Expr]]:
    """Each identity of ``group`` proved: (claim, derived, difference), what another process keeps (pickled)."""
    return [(p.claim, p.derived, p.difference) for p in map(prove, group)]


def keep_proofs(group: list[Identity], sides: list[tuple[sp.Expr, sp.Expr, sp.Expr]]) -> None:
    """Keep :func:`proved_sides` of ``group`` (proved in another process) as this process's proofs."""
    for entry, (claim, derived, diff) in zip(group, sides, strict=True):
        _PROOFS[id(entry)] = Proof(entry, claim, derived, diff)


def proof(key: str) -> Proof:
    """The proof of the identity registered under ``key``; ValueError naming it if there is none."""
    all_identities()
    if key not in REGISTRY:
        raise ValueError(f"identity: no identity has the key {key!r}")
    return prove(REGISTRY[key])
