"""Tensors and ledgers: every byte and element count in derive is a sum over these.

A :class:`Tensor` is one named array with a symbolic shape, a dtype and tags
(which op keeps it, whether tensor parallelism shards it, ...). A
:class:`Ledger` is an ordered collection of tensors that can be summed,
filtered by tag and grouped; the closed forms of the sheet are its sums.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Callable, Iterable, Iterator

import sympy as sp

from derive.dtypes import dtype_bytes
from derive.expansion import expand


class TaggedRow:
    """What every ledger row shares: a set of ``tags`` and a ``count`` of copies (tensors, GEMMs)."""

    tags: frozenset[str]
    count: sp.Expr

    def has(self, tag: str) -> bool:
        """Whether the row carries ``tag``."""
        return tag in self.tags

    def tagged(self, *tags: str):
        """The same row with ``tags`` added."""
        return replace(self, tags=self.tags | set(tags))

    def times(self, factor: sp.Expr):
        """The same row held ``factor`` times more often (layers, micro-batches)."""
        return replace(self, count=self.count * factor)


@dataclass(frozen=True)
class Tensor(TaggedRow):
    """One array: ``count`` copies of ``shape`` elements of ``dtype``."""

    name: str
    shape: tuple[sp.Expr, ...]
    dtype: str
    tags: frozenset[str] = field(default_factory=frozenset)
    count: sp.Expr = sp.Integer(1)
    note: str = ""

    def __post_init__(self) -> None:
        dtype_bytes(self.dtype)  # reject an unknown dtype when the tensor is made
        object.__setattr__(self, "shape", tuple(sp.sympify(n) for n in self.shape))
        object.__setattr__(self, "tags", frozenset(self.tags))
        object.__setattr__(self, "count", sp.sympify(self.count))

    @property
    def numel(self) -> sp.Expr:
        """Elements over all ``count`` copies."""
        return self.count * sp.Mul(*self.shape)

    @property
    def element_bytes(self) -> int | Fraction:
        """Bytes of one element."""
        return dtype_bytes(self.dtype)

    @property
    def bytes(self) -> sp.Expr:
        """Bytes over all ``count`` copies."""
        return self.numel * self.element_bytes


    def divided(self, factor: sp.Expr) -> "Tensor":
        """The share of one of ``factor`` ranks when the tensor is split evenly."""
        return replace(self, count=self.count / sp.sympify(factor))


class Ledger:
    """An ordered, immutable collection of tensors with sums, filters and groups."""

    def __init__(self, tensors: Iterable[Tensor] = ()) -> None:
        self._tensors: tuple[Tensor, ...] = tuple(tensors)
        self._numel: sp.Expr | None = None  # numel(), summed once (the ledger never changes)

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def __add__(self, other: "Ledger") -> "Ledger":
        return Ledger(self._tensors + tuple(other))

    def __repr__(self) -> str:
        return f"Ledger({[t.name for t in self._tensors]})"

    def __getitem__(self, name: str) -> Tensor:
        for tensor in self._tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(f"no tensor named {name!r} in {self!r}")

    @property
    def names(self) -> tuple[str, ...]:
        """Tensor names in order."""
        return tuple(t.name for t in self._tensors)

    def bytes(self) -> sp.Expr:
        """Total bytes, expanded."""
        return expand(sp.Add(*(t.bytes for t in self._tensors)))

    def numel(self) -> sp.Expr:
        """Total elements, expanded (summed once per ledger)."""
        if self._numel is None:
            self._numel = expand(sp.Add(*(t.numel for t in self._tensors)))
        return self._numel

    def where(self, *tags: str) -> "Ledger":
        """Tensors that carry every one of ``tags``."""
        return Ledger(t for t in self._tensors if all(t.has(tag) for tag in tags))

    def without(self, *tags: str) -> "Ledger":
        """Tensors that carry none of ``tags``."""
        return Ledger(t for t in self._tensors if not any(t.has(tag) for tag in tags))

    def filter(self, keep: Callable[[Tensor], bool]) -> "Ledger":
        """Tensors for which ``keep`` is true."""
        return Ledger(t for t in self._tensors if keep(t))

    def map(self, change: Callable[[Tensor], Tensor]) -> "Ledger":
        """A ledger of ``change`` applied to every tensor."""
        return Ledger(change(t) for t in self._tensors)

    def times(self, factor: sp.Expr) -> "Ledger":
        """Every tensor held ``factor`` times (e.g. L layers)."""
        return self.map(lambda t: t.times(factor))

    def group_by(self, key: Callable[[Tensor], str]) -> dict[str, "Ledger"]:
        """Sub-ledgers keyed by ``key(tensor)``, in first-seen order."""
        groups: dict[str, list[Tensor]] = {}
        for tensor in self._tensors:
            groups.setdefault(key(tensor), []).append(tensor)
        return {name: Ledger(members) for name, members in groups.items()}
