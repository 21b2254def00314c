"""Communication volumes as the papers count them (elements one rank sends), from derive.accounts.comm's rows."""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.comm import symbolic_collectives
from derive.architectures.decoder import GPT, Layout
from derive.architectures.operations.norm import layer_input
from derive.architectures.tables import parameter_count
from derive.dtypes import dtype_bytes
from derive.parallelism import Parallelism
from derive.symbols import N, c, d, m, p, t

#: One rank's element of an activation (bf16) and of a 16-bit gradient or parameter.
ACTIVATION = layer_input().element_bytes


def rows(architecture: Layout = GPT, whole_model: bool = False, **flags) -> list:
    """The symbolic ledger with Parallelism ``flags`` set, at c = 1."""
    found = symbolic_collectives(architecture, Parallelism(**flags), whole_model=whole_model)
    return [row.evaluated(lambda expr: expr.xreplace({c: 1})) for row in found]


def sent(found: list, prefix: str, exclude: str = "\0") -> sp.Expr:
    """Bytes one rank sends per occurrence through the rows named ``prefix``..., without ``exclude``."""
    return sp.expand(sp.Add(*(row.sent for row in found
                              if row.name.startswith(prefix) and exclude not in row.name)))


@lru_cache(maxsize=None)  # an immutable expression; the ZeRO claims ask for a stage more than once
def dp_elements(zero: int, precision: str = "fp16", **flags) -> sp.Expr:
    """Data-parallel elements one rank sends per step as d grows (t = p = 1, one micro-batch), in N."""
    found = rows(GPT, True, zero=zero, precision=precision, **flags)
    step = sp.Add(*(row.sent * row.count for row in found if row.group == "dp"))
    per_parameter = sp.limit(step.xreplace({t: 1, p: 1, m: 1}), d, sp.oo) / parameter_count(GPT)
    return sp.cancel(per_parameter / dtype_bytes(precision)) * N  # a ratio of polynomials: cancel is exact


def tp_layer_elements(**flags) -> sp.Expr:
    """Tensor-parallel elements one rank sends per layer and micro-batch (attention and MLP rows)."""
    found = rows(**flags)
    return (sent(found, "tp.attention") + sent(found, "tp.mlp")) / ACTIVATION


def count_rows(found: list, prefix: str, collective: str) -> int:
    """How many ``collective`` rows named ``prefix``... a layer has in one forward and backward."""
    return sum(1 for row in found if row.name.startswith(prefix) and row.collective == collective
               and row.pass_ != "recompute")
