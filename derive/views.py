"""Named views: how a tool reads derive's ledgers into the one number it prints.

A view never changes a ledger; it picks, groups or combines what the ledger holds.
``largest component`` is accelerate's (``accelerate estimate-memory`` prints the largest of
its training components, not their sum, and the largest top-level module as the
"largest layer").
"""
from __future__ import annotations

from typing import Mapping

import sympy as sp


def largest_component(components: Mapping[str, sp.Expr]) -> tuple[str, sp.Expr]:
    """The largest of ``components`` (numbers) and its name: accelerate/commands/estimate.py estimate_command (max(item.values()))."""
    if not components:
        raise ValueError("components: need at least one component")
    values = {name: sp.nsimplify(value) for name, value in components.items()}
    for name, value in values.items():
        if not value.is_number:
            raise ValueError(f"components: {name!r} is not a number: {value}")
    name = max(values, key=lambda key: (values[key], key))
    return name, values[name]


VIEWS = {"largest component": largest_component}
