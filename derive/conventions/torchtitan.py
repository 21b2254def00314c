"""torchtitan's per-token FLOP count (0.3.0): the CLAIM side, its literal form with its source."""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import FAMILIES
from derive.architectures.tables import model_parameters, parameter_count
from derive.symbols import L, a, h, s


def torchtitan(family: str = "llama") -> sp.Expr:
    """torchtitan/models/utils.py get_dense_model_nparams_and_flops (0.3.0): 6(N - N_embedding) + 6 L a (2h/a) s."""
    untied_lookup = model_parameters(FAMILIES[family]).where("embedding").without("output").numel()
    return 6 * (parameter_count(FAMILIES[family]) - untied_lookup) + 6 * L * a * (2 * h / a) * s
