"""The MoE operations: router, routed experts, shared experts and their gate; their parameters and what each keeps for backward.

Parameters (one MoE layer's MLP block, sizes symbolic: E routed experts of width f_E, k_E of them
per token, shared experts of total width f_S; tags in derive.architectures.moe): names are
transformers' within a layer (``mlp.gate.weight``), except the routed experts, written as the
published checkpoints hold them, one gate, up and down per expert (``count`` E).

Saved rows, ``eager``: transformers 5.23's modeling code on CPU in bf16 with its default
``grouped_mm`` experts (transformers/integrations/moe.py grouped_mm_experts_forward) or the
``eager`` loop, measured by ``derive.validate.experts``: the router keeps its probabilities in fp32
and the top-k indices; the experts keep the permutation indices, the k_E copies of each token
and every intermediate of the SwiGLU. ``fused``: Megatron-Core with Transformer Engine, the
alltoall dispatcher with permute fusion and grouped GEMM (megatron/core/transformer/moe/
moe_layer.py MoELayer.forward, token_dispatcher.py, moe_utils.py permute/unpermute, experts.py
TEGroupedMLP, router.py TopKRouter). Rows are per layer and micro-batch, T = b s tokens; routing
is dropless, so the k_E copies of the T tokens sum to T k_E rows whatever the split.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.blocks import gated_mlp, linear
from derive.architectures.moe import MoE
from derive.architectures.operations.mlp import eager_swiglu, hf_swiglu, te_swiglu
from derive.architectures.operations.rows import ACTIVATION, INDEX_DTYPE, STATISTICS, row
from derive.architectures.parameters import matrix, vector
from derive.symbols import E, b, f_E, f_S, h, k_E, k_g, n_g, s
from derive.tensors import Ledger, Tensor

#: tokens of one micro-batch
T = b * s
#: transformers' DeepseekV3TopkRouter ranks each group by the sum of its top 2 scores (``topk(2)``).
GROUP_SCORE_EXPERTS = 2
ROUTER = ("router", "mlp", "replicated")
EXPERT = ("routed_expert", "mlp", "tp_shardable")


# ---- parameters ----

def _expert_names(prefix: str) -> dict[str, str]:
    return {role: f"{prefix}.{role}_proj" for role in ("gate", "up", "down")}


def router(moe: MoE) -> list[Tensor]:
    """The routing matrix [h, E] (token -> expert scores) and its bias, if any."""
    rows = [matrix(f"{moe.prefix}.{moe.router_name}.weight", h, E, "router", "mlp", "moe")]
    if moe.router_bias != "none":
        kind = ("buffer",) if moe.router_bias == "buffer" else ()
        rows.append(vector(f"{moe.prefix}.{moe.router_name}.{moe.router_bias_name}", E, "router", "bias",
                           "mlp", "moe", *kind))
    return rows


def routed_experts(moe: MoE) -> list[Tensor]:
    """E gated experts of width f_E (Mixtral: Jiang et al. 2024; DeepSeekMoE: Dai et al. 2024), ``count`` E each."""
    rows = gated_mlp(_expert_names(f"{moe.prefix}.experts.*"), f_E, moe.expert_bias, False,
                     "routed_expert", "moe")
    return [kept.times(E) for kept in rows]


def shared_experts(moe: MoE) -> list[Tensor]:
    """The shared expert(s) as one gated MLP of width f_S, and Qwen2-MoE's gate [h, 1]."""
    if not moe.shared:
        return []
    rows = gated_mlp(_expert_names(moe.shared), f_S, moe.shared_bias, False, "shared_expert",
                     "moe")
    if moe.shared_gate:
        rows += linear(f"{moe.shared}_gate", h, sp.Integer(1), False, "shared_expert_gate",
                       "mlp", "moe")
    return rows


# ---- eager: transformers' modeling code ----

def eager_router(router: str = "softmax", normalise_topk: bool = True) -> list[Tensor]:
    """The router: its input, fp32 probabilities, top-k indices and (normalised) top-k weights."""
    if router == "softmax":
        rows = [
            row("router input", (T, h), ACTIVATION, *ROUTER, note="kept by the router linear"),
            row("router probabilities (fp32)", (T, E), STATISTICS, *ROUTER,
                note="softmax(logits, float32), kept by softmax"),
            row("top-k indices", (T, k_E), INDEX_DTYPE, *ROUTER, note="kept by topk"),
        ]
    else:
        rows = [
            row("router input (fp32)", (T, h), STATISTICS, *ROUTER,
                note="hidden_states.type(float32), kept by the fp32 router linear"),
            row("router weight (fp32 copy)", (h, E), STATISTICS, *ROUTER,
                note="weight.type(float32), a new tensor kept by the fp32 router linear"),
            row("router scores (fp32 sigmoid)", (T, E), STATISTICS, *ROUTER,
                note="kept by sigmoid and by gather"),
            row("top-k indices", (T, k_E), INDEX_DTYPE, *ROUTER, note="kept by gather"),
        ]
    if normalise_topk:
        rows += [
            row("top-k weight sum (fp32)", (T, 1), STATISTICS, *ROUTER, note="kept by the division"),
            row("top-k weights (fp32)", (T, k_E), STATISTICS, *ROUTER, note="kept by the division"),
        ]
    return rows


def group_routing_rows() -> Ledger:
    """DeepSeek-V3's group-limited routing: kept only by nodes the loss does not reach (freed after forward)."""
    return Ledger([
        row("group top-2 indices", (T, n_g, GROUP_SCORE_EXPERTS), INDEX_DTYPE, "unreachable"),
        row("top groups", (T, k_g), INDEX_DTYPE, "unreachable"),
        row("group mask", (T, E), "bool", "unreachable"),
    ])


def grouped_mm_experts(weights_dtype: str = "fp32") -> list[Tensor]:
    """grouped_mm_experts_forward: permutation, k_E copies of each token, SwiGLU, weighting, inverse."""
    copies = T * k_E
    return [
        row("gather indices (perm // k_E)", (copies,), INDEX_DTYPE, *EXPERT,
            note="hidden_states[perm // k_E], kept by index"),
        row("weight permutation (perm)", (copies,), INDEX_DTYPE, *EXPERT,
            note="sample_weights[perm], kept by index"),
        row("expert offsets", (E,), "int32", *EXPERT, note="cumsum of tokens per expert, kept by "
            "grouped_mm"),
        row("permuted tokens", (copies, h), ACTIVATION, *EXPERT,
            note="the k_E copies of each token in expert order, kept by grouped_mm (gate_up)"),
        *eager_swiglu("experts", copies, f_E, *EXPERT),
        row("routing weights (permuted)", (copies, 1), weights_dtype, *EXPERT,
            note="kept by the multiply of each expert output with its weight"),
        row("expert outputs", (copies, h), ACTIVATION, *EXPERT, note="kept by the same multiply"),
        row("inverse permutation", (copies,), INDEX_DTYPE, *EXPERT,
            note="weighted_out[inv_perm], kept by index"),
    ]


def loop_experts(weights_dtype: str = "fp32") -> list[Tensor]:
    """The experts' ``eager`` implementation (modeling_mixtral.py MixtralExperts.forward, alike in
    Qwen3-MoE and DeepSeek-V3): a loop over the hit experts, each keeping its tokens' rows.

    The rows of expert e are n_e long; the n_e sum to T k_E over the experts (dropless), so
    the sum is exact whatever the routing.
    """
    copies = T * k_E
    return [
        row("token indices (per expert)", (copies,), INDEX_DTYPE, *EXPERT,
            note="torch.where(expert_mask)'s token_idx, kept by index and index_add_"),
        row("top-k positions (per expert)", (copies,), INDEX_DTYPE, *EXPERT,
            note="top_k_pos, kept by top_k_weights[token_idx, top_k_pos]"),
        row("expert tokens", (copies, h), ACTIVATION, *EXPERT,
            note="hidden_states[token_idx], kept by the gate_up linear"),
        *eager_swiglu("experts", copies, f_E, *EXPERT),
        row("routing weights (per expert)", (copies, 1), weights_dtype, *EXPERT,
            note="kept by the multiply of each expert output with its weight"),
        row("expert outputs", (copies, h), ACTIVATION, *EXPERT, note="kept by the same multiply"),
        row("weighted outputs", (copies, h), ACTIVATION, *EXPERT,
            note="the multiply's result in the hidden dtype, kept by index_add_"),
    ]


#: transformers 5's experts implementations (integrations/moe.py) -> their rows.
EXPERTS: dict[str, object] = {"grouped_mm": grouped_mm_experts, "eager": loop_experts}


def eager_shared_experts(keeps_input: bool = True) -> list[Tensor]:
    """The shared experts as one SwiGLU of width f_S; a bf16 (softmax) router's input is their input: one tensor, one row (``keeps_input`` False)."""
    return hf_swiglu("shared_experts", f_S, ("shared_expert",), keeps_input)


def eager_shared_gate() -> list[Tensor]:
    """Qwen2MoeSparseMoeBlock.forward: ``sigmoid(shared_expert_gate(x)) * shared_expert(x)``.

    The gate linear keeps x (the router's input already); sigmoid keeps its [T, 1] output,
    which the multiply keeps too, with the shared expert's output (modeling_qwen2_moe.py).
    """
    tags = ("shared_expert", "mlp", "replicated")
    return [
        row("shared expert gate (sigmoid output)", (T, 1), ACTIVATION, *tags,
            note="kept by sigmoid and by the multiply with the shared expert's output"),
        row("shared expert output", (T, h), ACTIVATION, *tags,
            note="down_proj's output, kept by the multiply with the gate"),
    ]


# ---- fused: Megatron-Core + Transformer Engine, grouped GEMM, alltoall dispatcher ----

def fused_router(shared: bool = False) -> list[Tensor]:
    """TopKRouter (router.py): its input (the shared experts' linear_fc1, a TE Linear, reads it too and keeps its own FP8 copy), fp32 scores, routing map."""
    shared_input = ("linear_input_shared",) if shared else ()
    return [
        row("router input", (s, b, h), ACTIVATION, *ROUTER, *shared_input,
            note="pre_mlp_layernorm output, kept by the router's gating linear (and shared experts)"),
        row("router scores (fp32)", (T, E), STATISTICS, *ROUTER,
            note="intermediate_output, kept by FusedTopkScoreFunction "
                 "(transformer_engine/pytorch/router.py)"),
        row("routing map", (T, E), "bool", *ROUTER, note="kept by FusedTopkScoreFunction"),
    ]


def fused_experts(capacity_factor: sp.Expr | None = None) -> list[Tensor]:
    """Alltoall dispatch with fused permute (moe_utils.py permute), TEGroupedMLP (experts.py) with probabilities applied in the SwiGLU.

    Dropless: T k_E token copies (balanced routing, so one EP rank holds T k_E copies on average);
    ``capacity_factor`` c pads or drops each expert to c T k_E / E tokens, E of them: c T k_E rows.
    """
    copies = T * k_E if capacity_factor is None else capacity_factor * T * k_E
    return [
        row("permutation row_id_map", (T, 2 * E + 1), "int32", *EXPERT,
            note="kept by _moe_permute_mask_map and _moe_unpermute_mask_map (one tensor; "
                 "transformer_engine/pytorch/permutation.py)"),
        row("permuted tokens", (copies, h), ACTIVATION, *EXPERT, "expert_hidden", "linear_input",
            "grouped_gemm",
            note="K copies of each token after the alltoall, kept by linear_fc1 (GroupedLinear)"),
        row("permuted probabilities (fp32)", (copies, 1), STATISTICS, *EXPERT,
            note="kept by the weighted SwiGLU (weighted_bias_swiglu_impl)"),
        *te_swiglu("experts", (copies,), f_E, *EXPERT, "grouped_gemm"),
    ]


def fused_shared_experts() -> list[Tensor]:
    """The shared experts (shared_experts.py SharedExpertMLP): linear_fc1's output and linear_fc2's input."""
    return te_swiglu("shared_experts", (s, b), f_S, "shared_expert", "mlp", "tp_shardable")


def fused_shared_gate() -> list[Tensor]:
    """SharedExpertMLP's gate: sigmoid(gate), kept by the multiply."""
    return [row("shared expert gate output", (s, b, 1), ACTIVATION, "shared_expert", "mlp",
                "replicated", note="sigmoid(gate), kept by the multiply")]
