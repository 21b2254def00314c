"""Resident training state: what is held per parameter, by precision and optimizer.

The per-parameter table is a ledger of length-N tensors, one per copy that
training keeps (compute copy, gradient, fp32 master, optimizer slots). Each
tensor is tagged with its account (``params``, ``grads``, ``optimizer`` - the
fp32 master counts as optimizer state, as in ZeRO's K = 12 and Megatron's
18 = 2 + 4 + 12), its lifetime (``resident`` or ``transient``) and the ZeRO
stage from which it is partitioned over data-parallel ranks (``zero1``
optimizer state, ``zero2`` gradients, ``zero3`` parameters; Rajbhandari et
al. 2020, section 5). Byte totals are sums over this table, never typed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.accounts.fp8_state import fp8_weight_rows
from derive.expansion import expand
from derive.inputs import choose, flag, positive_size, zero_stage
from derive.recipes import RECIPES
from derive.symbols import N, N_8, d, n_8
from derive.tensors import Ledger, Tensor

ACCOUNTS = ("params", "grads", "optimizer")


@dataclass(frozen=True)
class Precision:
    """How parameters and gradients are stored under one precision recipe."""

    compute: str
    grad: str
    master: str | None
    transient_grad: str | None = None
    optimizer_grad: str | None = None
    source: str = ""
    fp8: str | None = None


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision(
        "fp32", "fp32", None, source="plain fp32 training: the parameters are the master copy"
    ),
    "bf16": Precision(
        "bf16",
        "bf16",
        "fp32",
        source="mixed precision (Micikevicius et al. 2018) with bf16; ZeRO section 3.1",
    ),
    "fp16": Precision(
        "fp16",
        "fp16",
        "fp32",
        source="mixed precision (Micikevicius et al. 2018); plus a loss-scale scalar, not counted",
    ),
    "bf16-fp32grad": Precision(
        "bf16",
        "fp32",
        "fp32",
        transient_grad="bf16",
        source=(
            "Megatron default: megatron/training/arguments.py validate_args sets "
            "accumulate_allreduce_grads_in_fp32; the bf16 param.grad is added into the "
            "fp32 main_grad by the backward hook in "
            "megatron/core/distributed/distributed_data_parallel.py and freed"
        ),
    ),
    "fp16-megatron": Precision(
        "fp16",
        "fp16",
        "fp32",
        optimizer_grad="fp32",
        source=(
            "Megatron fp16: fp16 grads in the grad buffer, fp32 main grads copied into "
            "the optimizer (docs/user-guide/features/dist_optimizer.md)"
        ),
    ),
}

#: Megatron's FP8 training (--fp8-format with a --fp8-recipe) keeps its bf16 recipe (bf16
#: parameters, fp32 main gradients, fp32 master) and adds the recipe's rows (derive.recipes).
MEGATRON_FP8 = ("Megatron --bf16 with --fp8-recipe {name} (megatron/core/fp8_utils.py, "
                "TE's {framework}): bf16-fp32grad's rows plus the recipe's FP8 weight copies")
for _name, _recipe in RECIPES.items():
    PRECISIONS[_name] = Precision("bf16", "fp32", "fp32", transient_grad="bf16", fp8=_name,
                                  source=MEGATRON_FP8.format(name=_name, framework=_recipe.framework))
#: The FP8 precisions (their rows depend on N_8 and n_8, not on N alone).
FP8_PRECISIONS: tuple[str, ...] = tuple(name for name, rule in PRECISIONS.items() if rule.fp8)


@dataclass(frozen=True)
class Optimizer:
    """The slots an optimizer keeps per parameter (name, dtype, elements per parameter)."""

    slots: tuple[tuple[str, str, sp.Expr], ...]
    source: str


#: bitsandbytes' block size for the block-wise quantised 8-bit optimizer states.
BNB_BLOCK_SIZE = 256
#: Adam's (and AdamW's) two fp32 moments per parameter: exp_avg and exp_avg_sq (torch/optim/adam.py).
ADAM_MOMENTS = (("exp_avg", "fp32", sp.Integer(1)), ("exp_avg_sq", "fp32", sp.Integer(1)))

OPTIMIZERS: dict[str, Optimizer] = {
    "adam": Optimizer(ADAM_MOMENTS, "Kingma & Ba 2015; torch.optim.Adam state exp_avg, exp_avg_sq"),
    "adamw": Optimizer(ADAM_MOMENTS, "Loshchilov & Hutter 2019; torch.optim.AdamW, same state as Adam"),
    "sgd-momentum": Optimizer(
        (("momentum_buffer", "fp32", sp.Integer(1)),),
        "torch.optim.SGD(momentum>0) state momentum_buffer",
    ),
    "sgd": Optimizer((), "torch.optim.SGD(momentum=0): no state"),
    "adam-8bit": Optimizer(
        (
            ("state1 (exp_avg, 8-bit)", "uint8", sp.Integer(1)),
            ("state2 (exp_avg_sq, 8-bit)", "uint8", sp.Integer(1)),
            ("absmax1 (fp32 per block)", "fp32", sp.Rational(1, BNB_BLOCK_SIZE)),
            ("absmax2 (fp32 per block)", "fp32", sp.Rational(1, BNB_BLOCK_SIZE)),
        ),
        "Dettmers et al. 2022 (8-bit optimizers); bitsandbytes Adam8bit keeps two uint8 "
        "states and one fp32 absmax per block of 256 elements each (block-wise quantisation)",
    ),
    "adamw-bf16": Optimizer(
        (("exp_avg (bf16)", "bf16", sp.Integer(1)), ("exp_avg_sq (bf16)", "bf16", sp.Integer(1))),
        "DeepSeek-V3 report, section 3.3.3 (low-precision optimizer states): AdamW's first and "
        "second moments in BF16; master weights and gradients stay fp32",
    ),
}


def state_ledger(precision: str = "bf16", optimizer: str = "adam", params: sp.Expr = N, *,
                 fp8_params: sp.Expr = N_8, fp8_tensors: sp.Expr = n_8,
                 fp8_param_gather: bool = False) -> Ledger:
    """The per-parameter table of ``precision`` x ``optimizer`` for ``params`` parameters.

    An FP8 precision adds :func:`fp8_weight_rows` over ``fp8_params`` elements in
    ``fp8_tensors`` layer matrices (N_8, n_8; a model's from ``recipes.fp8_weight_counts``).
    """
    params = positive_size("params", params)
    recipe = PRECISIONS[choose("precision", precision, PRECISIONS)]
    rule = OPTIMIZERS[choose("optimizer", optimizer, OPTIMIZERS)]
    if flag("fp8_param_gather", fp8_param_gather) and not recipe.fp8:
        raise ValueError(f"fp8_param_gather: {precision} is not an FP8 precision "
                         f"(FP8 ones: {', '.join(RECIPES)})")
    compute = params - fp8_params if fp8_param_gather else params
    rows = [
        Tensor(f"{recipe.compute} parameters" + (" (not quantised)" if fp8_param_gather else ""),
               (compute,), recipe.compute, frozenset({"params", "resident", "zero3"})),
        Tensor(f"{recipe.grad} gradients", (params,), recipe.grad,
               frozenset({"grads", "resident", "zero2"})),
    ]
    if recipe.transient_grad:
        rows.append(Tensor(f"{recipe.transient_grad} gradient (transient: added into the main gradient, then freed)",
                           (params,), recipe.transient_grad,
                           frozenset({"grads", "transient"})))
    if recipe.master:
        rows.append(Tensor(f"{recipe.master} master parameters", (params,), recipe.master,
                           frozenset({"optimizer", "resident", "zero1"})))
    if recipe.optimizer_grad:
        rows.append(Tensor(f"{recipe.optimizer_grad} main gradients (optimizer copy)",
                           (params,), recipe.optimizer_grad,
                           frozenset({"optimizer", "resident", "zero1"})))
    for name, dtype, per_param in rule.slots:
        rows.append(Tensor(f"{optimizer} {name}", (params * per_param,), dtype,
                           frozenset({"optimizer", "resident", "zero1"})))
    if recipe.fp8:
        rows += fp8_weight_rows(RECIPES[recipe.fp8], positive_size("fp8_params", fp8_params),
                                positive_size("fp8_tensors", fp8_tensors), fp8_param_gather)
    return Ledger(rows)


def partitioned(ledger: Ledger, stage: int, ranks: sp.Expr = d) -> Ledger:
    """The share one of ``ranks`` data-parallel ranks holds under ZeRO ``stage`` (0-3)."""
    stage = zero_stage("zero_stage", stage)
    ranks = positive_size("ranks", ranks)
    sharded = {f"zero{k}" for k in range(1, stage + 1)}
    return ledger.map(lambda t: t.divided(ranks) if t.tags & sharded else t)


@dataclass(frozen=True)
class StateBytes:
    """Resident bytes by account: parameters, gradients, optimizer (fp32 master included)."""

    params: sp.Expr
    grads: sp.Expr
    optimizer: sp.Expr

    @property
    def total(self) -> sp.Expr:
        """All three accounts."""
        return expand(self.params + self.grads + self.optimizer)


@lru_cache(maxsize=4096, typed=True)  # frozen StateBytes, built once per process
def state_bytes(precision: str = "bf16", optimizer: str = "adam", zero_stage: int = 0,
                ranks: sp.Expr = d, params: sp.Expr = N, **fp8: object) -> StateBytes:
    """Resident bytes per rank of each account: the rows of :func:`state_ledger` (precision x optimizer table) by tag.

    ``fp8`` passes ``fp8_params``, ``fp8_tensors`` and ``fp8_param_gather`` to :func:`state_ledger`.
    """
    held = partitioned(state_ledger(precision, optimizer, params, **fp8), zero_stage, ranks)
    resident = held.where("resident")
    return StateBytes(*(resident.where(account).bytes() for account in ACCOUNTS))


def fp8_resident_bytes(precision: str = "bf16", optimizer: str = "adam", zero_stage: int = 0,
                       ranks: sp.Expr = d, params: sp.Expr = N, **fp8: object) -> sp.Expr:
    """Resident bytes per rank of the rows an FP8 precision adds (``fp8`` tag: weight copies, scales, history); 0 otherwise."""
    held = partitioned(state_ledger(precision, optimizer, params, **fp8), zero_stage, ranks)
    return held.where("resident", "fp8").bytes()


def resident_bytes(precision: str = "bf16", optimizer: str = "adam", zero_stage: int = 0,
                   ranks: sp.Expr = d, params: sp.Expr = N, **fp8: object) -> sp.Expr:
    """Resident bytes per rank: parameters + gradients + optimizer state, all rows of :func:`state_ledger`."""
    return state_bytes(precision, optimizer, zero_stage, ranks, params, **fp8).total


def bytes_per_parameter(precision: str = "bf16", optimizer: str = "adam", zero_stage: int = 0,
                        ranks: sp.Expr = d, **fp8: object) -> sp.Expr:
    """Resident bytes per parameter (per rank when sharded); FP8 precisions in N_8 / N and n_8 / N."""
    return expand(resident_bytes(precision, optimizer, zero_stage, ranks, **fp8) / N)
