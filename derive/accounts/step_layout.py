"""A parallel layout's sizes as the step model reads them (numbers, or numpy columns of layouts), and the dtypes precisions run in."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from derive.accounts.workload import Workload

#: Precisions the predictor takes -> the dtype its linear-layer GEMMs run in. FP8 recipes run the
#: linear layers in FP8 and keep attention and the output head in BF16 (Transformer Engine's
#: fp8_autocast wraps te.Linear / LayerNormLinear / LayerNormMLP; DotProductAttention and the
#: head stay BF16: TransformerEngine docs, "Using FP8 with Transformer Engine"; Megatron keeps
#: the first and last layers' head in BF16 by default). NVFP4 runs them in FP4 (Transformer
#: Engine's NVFP4BlockScaling: E2M1 operands in all three passes on Blackwell; its random Hadamard
#: transform of the weight-gradient inputs is not counted).
LINEAR_DTYPE: dict[str, str] = {"bf16": "bf16", "fp16": "bf16", "bf16-fp32grad": "bf16",
                                "fp16-megatron": "bf16", "fp8-delayed": "fp8",
                                "fp8-current": "fp8", "fp8-blockwise": "fp8", "mxfp8": "fp8",
                                "nvfp4": "fp4"}
#: The state-ledger precision (derive.accounts.state) whose bytes the optimizer step moves.
STATE_PRECISION: dict[str, str] = {"bf16": "bf16-fp32grad", "fp16": "fp16-megatron",
                                   "bf16-fp32grad": "bf16-fp32grad", "fp16-megatron": "fp16-megatron"}


#: A size: an integer, or a numpy column of them (one per layout).
Size = int | np.ndarray


@dataclass(frozen=True)
class Layout:
    """The sizes of a parallel layout the step model reads (from a derive Parallelism); sizes may be columns."""

    t: Size
    p: Size
    v: Size
    c: Size
    e: Size
    d: Size
    etp: Size
    b: Size
    m: Size
    sequence_parallel: bool
    zero: int
    recompute: str
    precision: str
    balanced: bool = False
    cp_comm: str = "p2p"
    #: Megatron's ``--recompute-modules`` beyond core attention that the step re-runs (derive.accounts.compute_time.
    #: RECOMPUTE_MODULE_KERNELS: "layernorm", "moe_act"); ``recompute`` stays the policy of the GEMMs and saved tables
    recompute_modules: frozenset[str] = frozenset()


def local_dense_parameters(work: Workload, lay: Layout) -> float:
    """Parameters one rank holds outside the routed experts: over t p."""
    return (work.parameters - work.expert_parameters) / (lay.t * lay.p)


def local_expert_parameters(work: Workload, lay: Layout) -> float:
    """Routed-expert parameters one rank holds: over etp e p."""
    return work.expert_parameters / (lay.etp * lay.e * lay.p)


def local_parameters(work: Workload, lay: Layout) -> float:
    """Parameters one rank holds: dense ones over t p, routed experts over etp e p."""
    return local_dense_parameters(work, lay) + local_expert_parameters(work, lay)

