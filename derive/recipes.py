"""Low-precision (FP8) training recipes as named conventions: scale blocks, scale dtypes, cached copies.

Each recipe is data with its source: Transformer Engine's recipe classes
(transformer_engine/common/recipe/__init__.py: DelayedScaling, Float8CurrentScaling,
MXFP8BlockScaling, Float8BlockScaling) and the DeepSeek-V3 report, section 3.3, whose
1 x 128 activation tiles and 128 x 128 weight blocks Float8BlockScaling implements.
The accounts build rows from these fields (``derive.accounts.state``,
``derive.architectures.saved_fp8``); no byte total is typed here.

What every recipe shares (TE's Linear / LayerNormLinear / GroupedLinear, the modules
Megatron's TE layer spec uses): the layer matrices run their three GEMMs (forward,
data gradient, weight gradient) in FP8; attention (QK^T, PV, softmax), norms, the input
embedding and the output head stay in 16 bits (DeepSeek-V3 section 3.3.1 lists the
same components kept in BF16/FP32). The FP8 weight and its transpose are cached
across the micro-batches of a step (TE Linear.forward, ``is_first_microbatch``:
"allows caching of the FP8 versions of the weights"; the weight and its
``_transpose`` in transformer_engine/pytorch/tensor/float8_tensor.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.dtypes import dtype_bytes
from derive.tensors import Ledger

#: DelayedScaling's default amax history length (transformer_engine/common/recipe/__init__.py,
#: ``amax_history_len: int = 1024``; Megatron's --fp8-amax-history-len sets it).
TE_AMAX_HISTORY = 1024
#: FP8 tensors per GEMM that a TE module's delayed-scaling state tracks: input, weight, output
#: forward; grad_output, grad_input backward (transformer_engine/pytorch/module/base.py,
#: TransformerEngineBaseModule.set_meta_tensor: ``num_gemms * 3`` / ``num_gemms * 2``).
TE_QUANTIZERS = (3, 2)
#: MX block: 32 consecutive elements share one E8M0 scale (OCP Microscaling Formats MX v1.0,
#: section 5; TE MXFP8BlockScaling: "Each group of 32 consecutive values is scaled together").
MX_BLOCK = 32
#: DeepSeek-V3 section 3.3.2: activations per 1 x 128 tile (per token per 128 channels),
#: weights per 128 x 128 block; TE Float8BlockScaling: x_block_scaling_dim = 1, w = 2.
TILE = 128

#: NVFP4 block: 16 consecutive elements share one E4M3 scale, weights in 16 x 16 blocks, plus one
#: fp32 scale per tensor (TE NVFP4BlockScaling; NVIDIA, "Pretraining Large Language Models with
#: NVFP4", arXiv 2509.25149).
NV_BLOCK = 16

#: GPU generations (derive.systems.GENERATIONS) whose tensor cores run a recipe: Transformer Engine's
#: "Datatype and hardware support matrix" (docs, support_matrix): FP8 per tensor (DelayedScaling,
#: Float8CurrentScaling) and FP8 block scaling (Float8BlockScaling) from Hopper (compute capability
#: 9.0) on; MXFP8 and NVFP4 on data-centre Blackwell (10.0) only; none on Ampere.
FP8_GENERATIONS = ("hopper", "blackwell")
MX_GENERATIONS = ("blackwell",)

#: The copies of an FP8 weight a step caches: the row-wise data (forward GEMM) and the
#: column-wise data (the transpose, for the data-gradient GEMM: Hopper's FP8 tensor cores
#: take only the TN layout; MX and block scales run along one direction, so TE quantises
#: both from the high-precision weight: MXFP8BlockScaling's and Float8BlockScaling's docstrings).
COPIES = ("row-wise", "column-wise")


@dataclass(frozen=True)
class Scaling:
    """How one role's FP8 data is scaled: one ``dtype`` scale per ``block`` (rows x columns), or per tensor."""

    block: tuple[int, int] | None
    dtype: str
    tensor_scale: str | None = None

    @property
    def per_tensor(self) -> bool:
        """One scale for the whole tensor."""
        return self.block is None

    def scales(self, numel: sp.Expr, tensors: sp.Expr) -> sp.Expr:
        """Scale elements of ``tensors`` tensors of ``numel`` elements in all (block sizes dividing the shapes)."""
        if self.block is None:
            return sp.sympify(tensors)
        return sp.sympify(numel) / (self.block[0] * self.block[1])

    def tensor_scales(self, tensors: sp.Expr) -> sp.Expr:
        """Second-level scale elements (one per tensor, NVFP4's fp32 global scale); 0 without one."""
        return sp.sympify(tensors) if self.tensor_scale else sp.Integer(0)

    def overhead(self) -> sp.Expr:
        """Scale bytes per FP8 element under block scaling (0 per tensor: one scale, not per element)."""
        if self.block is None:
            return sp.Integer(0)
        return sp.Rational(dtype_bytes(self.dtype), self.block[0] * self.block[1])


@dataclass(frozen=True)
class Recipe:
    """One FP8 recipe: the scaling of activations, weights and gradients, and the state it keeps."""

    name: str
    framework: str
    activation: Scaling
    weight: Scaling
    gradient: Scaling
    amax_history: int
    source: str
    element: str = "fp8"
    weight_copies: tuple[str, ...] = COPIES
    quantizers: tuple[int, int] = TE_QUANTIZERS
    dispatch: str = "bf16"
    generations: tuple[str, ...] = FP8_GENERATIONS

    @property
    def element_bytes(self) -> sp.Expr:
        """Bytes of one quantised element (1 for FP8, 1/2 for FP4)."""
        return sp.nsimplify(dtype_bytes(self.element))

    @property
    def delayed(self) -> bool:
        """Whether scales come from an amax history kept across steps."""
        return self.amax_history > 0


#: What a framework keeps of a linear's input for the weight gradient under FP8 training: Transformer
#: Engine the column-wise quantised copy (docs/features/low_precision_training/
#: performance_considerations: "By default, TE saves the columnwise quantized input for the backward
#: pass"); torchao's Float8Linear the high-precision input, quantised again in backward
#: (torchao/float8/float8_linear.py, ``ctx.save_for_backward(input_hp, weight_hp_t)``; measured,
#: tests/reference/torchao_float8.json). The recipes here follow Transformer Engine.
SAVED_LINEAR_INPUT: dict[str, str] = {"transformer-engine": "quantised", "torchao": "high-precision"}

PER_TENSOR = Scaling(None, "fp32")
MX = Scaling((1, MX_BLOCK), "e8m0")

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("fp8-delayed", "transformer_engine.common.recipe.DelayedScaling",
               PER_TENSOR, PER_TENSOR, PER_TENSOR, TE_AMAX_HISTORY,
               "TE DelayedScaling (Micikevicius et al. 2022, FP8 formats for deep learning): one fp32 "
               "scale per tensor from the max of an amax history of amax_history_len = 1024 steps; "
               "scale and amax_history buffers in DelayedScalingRecipeState "
               "(transformer_engine/pytorch/quantization.py)"),
        Recipe("fp8-current", "transformer_engine.common.recipe.Float8CurrentScaling",
               PER_TENSOR, PER_TENSOR, PER_TENSOR, 0,
               "TE Float8CurrentScaling: one fp32 scale per tensor computed from the tensor's own "
               "amax just before the cast; no history (Float8CurrentScalingRecipeState keeps no buffer)"),
        Recipe("mxfp8", "transformer_engine.common.recipe.MXFP8BlockScaling",
               MX, MX, MX, 0,
               "TE MXFP8BlockScaling (Blackwell): 32-element blocks with E8M0 scales, row-wise and "
               "column-wise copies quantised separately from the high-precision tensor",
               generations=MX_GENERATIONS),
        Recipe("fp8-blockwise", "transformer_engine.common.recipe.Float8BlockScaling",
               Scaling((1, TILE), "fp32"), Scaling((TILE, TILE), "fp32"), Scaling((1, TILE), "fp32"), 0,
               "DeepSeek-V3 report section 3.3.2 (fine-grained quantisation: 1 x 128 activation "
               "tiles, 128 x 128 weight blocks, fp32 scales) as TE Float8BlockScaling implements it "
               "(x_block_scaling_dim = 1, w_block_scaling_dim = 2); section 3.3.4: MoE dispatch in FP8",
               dispatch="fp8"),
        Recipe("nvfp4", "transformer_engine.common.recipe.NVFP4BlockScaling",
               Scaling((1, NV_BLOCK), "fp8", "fp32"), Scaling((NV_BLOCK, NV_BLOCK), "fp8", "fp32"),
               Scaling((1, NV_BLOCK), "fp8", "fp32"), 0,
               "TE NVFP4BlockScaling (Blackwell): E2M1 elements, one E4M3 scale per 16 elements "
               "(16 x 16 blocks for weights), one fp32 global scale per tensor; row-wise and "
               "column-wise copies quantised separately (arXiv 2509.25149)",
               element="fp4", generations=MX_GENERATIONS),
    )
}


def recipe(name: str) -> Recipe:
    """The recipe called ``name``; ValueError naming the field if unknown."""
    if name not in RECIPES:
        raise ValueError(f"recipe: unknown FP8 recipe {name!r} (known: {', '.join(RECIPES)})")
    return RECIPES[name]


def fp8_weights(parameter_rows: Ledger) -> Ledger:
    """The parameter rows a recipe quantises: the layer matrices (tags ``gemm`` and ``layer``), not the head nor a router."""
    return parameter_rows.where("gemm", "layer").without("router")


def fp8_weight_counts(parameter_rows: Ledger) -> tuple[sp.Expr, sp.Expr]:
    """(N_8, n_8) of a parameter table: elements and tensors of :func:`fp8_weights`."""
    weights = fp8_weights(parameter_rows)
    return weights.numel(), sp.expand(sp.Add(*(row.count for row in weights)))


def blocks_divide(shape: tuple[int, ...], scaling: Scaling) -> bool:
    """Whether ``scaling``'s blocks tile a 2-D ``shape`` exactly (the scale counts assume they do)."""
    if scaling.block is None:
        return True
    return all(int(size) % int(block) == 0 for size, block in zip(shape[-2:], scaling.block))


def quantised_gemm(name: str, tags: frozenset[str]) -> bool:
    """Whether recipe ``name`` runs a GEMM with ``tags`` in FP8: the layer matrices' GEMMs only (module docstring)."""
    recipe(name)
    return "weight" in tags and "layer" in tags and "router" not in tags


def gathered_parameter_dtype(name: str | None, fp8_param_gather: bool = False) -> str:
    """The dtype ZeRO-3 / FSDP / the distributed optimizer all-gathers the quantised layer matrices in.

    The recipe's element only with Megatron's --fp8-param-gather (parameters held in FP8:
    megatron/training/arguments.py, TE ``fp8_model_init``); bf16 otherwise.
    """
    if name is None or not fp8_param_gather:
        return "bf16"
    return recipe(name).element


def dispatch_dtype(name: str | None) -> str:
    """The dtype of MoE dispatch (all-to-all before the experts): fp8 under DeepSeek-V3's recipe (section 3.3.4)."""
    return "bf16" if name is None else recipe(name).dispatch


def combine_dtype(name: str | None) -> str:
    """The dtype of MoE combine (all-to-all after the experts): bf16 under every recipe (DeepSeek-V3 section 3.3.4)."""
    if name is not None:
        recipe(name)
    return "bf16"
