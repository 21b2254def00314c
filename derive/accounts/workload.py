"""What one step asks of a GPU, as numbers: the GEMM ledger's rows and the saved-tensor bytes of a model.

The step model (``derive.accounts.step``) times these rows; nothing here is a
new count. GEMM rows come from the layout's table (``derive.architectures.tables.model_gemms``:
routed experts at k_E of E, MTP modules), with a config's sliding-window layers' scores over their
window for an MoE / MLA model; each row
keeps the per-token (n, k, count) of its forward GEMM and whether each recompute
policy of ``derive.accounts.flops.RECOMPUTED_GEMMS`` runs it again. The bytes
of element-wise work come from the saved-for-backward tables
(``derive.accounts.activations.layer_activations``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.flops import RECOMPUTED_GEMMS
from derive.architectures.decoder import Layout
from derive.architectures.gemms import FLOP_PER_MULTIPLY_ADD, Gemm, weight_gemms
from derive.architectures.operations.rows import HEAD
from derive.architectures.saved import gpt_layer_saved, llama_layer_saved
from derive.architectures.tables import active_parameters, model_gemms, score_gemms
from derive.model import Model
from derive.symbols import E, L, L_E, L_w, b, f, f_E, f_S, k, k_E, s, t
from derive.tensors import Ledger

#: GEMM kinds: a layer's weight GEMM, a routed expert's, an attention-score GEMM, the output head, an MoE router.
KINDS = ("layer", "expert", "score", "head", "router")
#: The passes every GEMM runs in training (derive.architectures.gemms.Gemm.passes of a weight GEMM).
PASSES = tuple(step.name for step in Gemm("pass", 1, 1, 1, frozenset({"weight"})).passes)
#: Recompute policy of the activation accounts -> the FLOP account's (Megatron's full recompute
#: re-runs the layers, not the output head: "full-layers").
RECOMPUTE_FLOPS = {"none": "none", "selective": "selective", "full": "full-layers"}


@dataclass(frozen=True)
class GemmRow:
    """One forward GEMM of one token at a model's sizes: [1, k] x [k, n], ``count`` times, and what re-runs it."""

    name: str
    kind: str
    n: float
    k: float
    count: float
    recomputed: frozenset[str]

    @property
    def flops_per_token(self) -> float:
        """Forward FLOPs per token (2nk per copy)."""
        return FLOP_PER_MULTIPLY_ADD * self.n * self.k * self.count


@dataclass(frozen=True)
class Workload:
    """A model's numbers the step model reads: GEMM rows, sizes, parameters and MoE sizes."""

    name: str
    rows: tuple[GemmRow, ...]
    seq: int
    hidden: int
    layers: int
    vocab: int
    heads: int
    parameters: int
    expert_parameters: int
    experts: int
    active_experts: int
    moe_layers: int
    saved: tuple[tuple[str, float, float], ...]  # (recompute policy, A, B): A + B/t bytes per layer per token
    saved_sp: tuple[tuple[str, float, float], ...]  # the same under sequence parallelism
    attention_kernel: str = "materialised"  # "fused" (flash: scores stay on chip) or "materialised"
    #: bytes per token of one layer's Q, K + V and attention output at t = 1 (``ring_tensors``)
    ring_bytes: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: whether the routed experts' second linear (down_proj, Megatron's linear_fc2) has a bias
    #: (``expert_output_bias``: derive.accounts.compute_time.EXPERT_BIAS_KERNELS)
    expert_output_bias: bool = False
    #: the routed experts' intermediate width f_E, and whether Megatron clamps their GLU input eagerly
    #: (the config's GLU limit, derive.architectures.decoder.Layout.glu_limit: compute_time.EXPERT_CLAMP_KERNELS)
    expert_ffn: int = 0
    clamped_glu: bool = False

    def saved_bytes(self, recompute: str, sequence_parallel: bool, tensor_parallel: int) -> float:
        """Bytes one layer saves per token on one TP rank: A + B / t (B: the rows the table shards)."""
        table = {policy: (whole, shared) for policy, whole, shared in
                 (self.saved_sp if sequence_parallel else self.saved)}
        whole, shared = table[recompute]
        return whole + shared / tensor_parallel

    @property
    def moe(self) -> bool:
        """Whether any layer routes tokens to experts."""
        return self.experts > 0


def ring_tensors(architecture: Layout) -> tuple[Ledger, Ledger, Ledger]:
    """(Q, K and V, the attention output) of one layer, one micro-batch, from the saved tables (Megatron + TE fused
    profile): what context parallel's ring attention passes around and merges step by step."""
    if architecture.family == "gpt":
        table = gpt_layer_saved("fused")
        names = ("Q", "K", "V")
    else:
        table = llama_layer_saved("fused", HEAD if architecture.family else k)
        names = ("q", "k", "v")
    return (Ledger([table[names[0]]]), Ledger([table[names[1]], table[names[2]]]),
            Ledger([table["attention output"]]))


def _kind(gemm: Gemm) -> str:
    if gemm.has("attention_score"):
        return "score"
    if gemm.has("routed_expert"):
        return "expert"
    if gemm.has("output") or gemm.has("mtp"):
        return "head"
    if gemm.has("router"):
        return "router"
    return "layer"


def _symbolic(entry: Model) -> Ledger:
    """Every forward GEMM of one token: the layout's table (causal), or a config's MoE / MLA layout without MTP
    modules with its sliding layers' scores over their window."""
    if entry.dense or entry.layout.mtp:
        return model_gemms(entry.architecture, "causal")
    return weight_gemms(active_parameters(entry.layout)) + _score_gemms(entry)


def _score_gemms(entry: Model) -> Ledger:
    """QK^T and PV of every layer of a config's MoE / MLA model: causal, or over a sliding window w in its L_w
    sliding layers (every layer where the config has a window and no layer_types: Mixtral's sliding_window)."""
    sizes = dict(entry.sizes)
    causal = score_gemms(entry.layout, "causal")
    if "w" not in sizes:
        return causal.times(L)
    sliding = L_w if "L_w" in sizes else L
    return causal.times(L - sliding) + score_gemms(entry.layout, "window").times(sliding)


def _number(entry: Model, expr: sp.Expr, **extra: int) -> float:
    value = entry.subs(sp.sympify(expr), **extra)
    if not value.is_number:
        raise ValueError(f"model: {entry.name} leaves {sorted(map(str, value.free_symbols))} unset")
    return float(value)


def _sizes(entry: Model) -> dict[str, int]:
    """s, h, L, V, a of a model."""
    return {"seq": entry.seq, "hidden": entry.hidden, "layers": entry.layers,
            "vocab": entry.vocab, "heads": entry.heads}


def attention_kernel(entry: Model) -> str:
    """The attention kernel the tables assume: Korthikanti's materialised scores for the GPT family
    (Megatron 2021-22 ran softmax on an [s, s] score tensor in HBM), flash attention (TE / cuDNN fused
    attention, Megatron's TE layer spec) for every other layer."""
    return "materialised" if entry.family == "gpt" else "fused"


def _saved(entry: Model, sequence_parallel: bool) -> tuple[tuple[str, float], ...]:
    """Saved bytes per layer per token (t = 1 share x t) by recompute policy.

    The Llama fused table (flash attention, Megatron + Transformer Engine) for Llama-style layers,
    Korthikanti's GPT table with materialised scores for the GPT family; an MoE layer reads with f
    the width its token passes through (k_E f_E, plus f_S for shared experts): the saved rows of a
    gated MLP scale with f. The token's routed copies the dispatcher permutes are not here: their HBM
    traffic is the dispatcher's kernels' (derive.accounts.compute_time.routing_elements).
    """
    gpt = entry.family == "gpt"
    profile, kernel = "gpt" if gpt else "llama-fused", attention_kernel(entry)
    width: dict[str, int] = {}
    if not entry.dense:
        values = entry.values
        width["f"] = int(values[k_E] * values[f_E] + values.get(f_S, 0))
    rows = []
    for policy in RECOMPUTE_FLOPS:
        options = {} if gpt else {"head_dim": k}
        per_layer = layer_activation_bytes(profile, kernel, t, sequence_parallel, policy, **options)
        per_token = per_layer / (s * b)

        def at(ranks: int) -> float:
            one = per_token.xreplace({b: 1, t: ranks})
            if entry.dense:
                return _number(entry, one)
            moe_share = entry.values.get(L_E, entry.values[L]) / entry.values[L]
            return ((1 - moe_share) * _number(entry, one)
                    + moe_share * _number(entry, one.xreplace({f: width["f"]})))
        shared = 2 * (at(1) - at(2))
        rows.append((policy, at(1) - shared, shared))
    return tuple(rows)


def expert_output_bias(entry: Model) -> bool:
    """Whether the routed experts' second linear has a bias: a parameter row tagged routed_expert and bias named
    down_proj (GPT-OSS's mlp.experts.*.down_proj.bias; Megatron's linear_fc2 with add_bias_linear)."""
    return any(row.name.endswith("down_proj.bias") for row in entry.parameter_rows.where("routed_expert")
               if "bias" in row.tags)


@lru_cache(maxsize=64)
def workload(entry: Model) -> Workload:
    """The numbers of ``entry`` the step model times (cached per model)."""
    sizes = _sizes(entry)
    rows = []
    for gemm in _symbolic(entry):
        recomputed = frozenset(policy for policy, flops_policy in RECOMPUTE_FLOPS.items()
                               if RECOMPUTED_GEMMS[flops_policy](gemm))
        rows.append(GemmRow(gemm.name, _kind(gemm), _number(entry, gemm.n), _number(entry, gemm.k),
                            _number(entry, gemm.count), recomputed))
    parameters, table = entry.parameters, entry.parameter_rows
    experts = table.where("routed_expert")
    expert_parameters = int(_number(entry, experts.numel())) if len(experts) else 0
    values = entry.values
    moe = expert_parameters > 0
    return Workload(
        entry.name, tuple(rows), **sizes, parameters=parameters, expert_parameters=expert_parameters,
        experts=int(values[E]) if moe else 0, active_experts=int(values[k_E]) if moe else 0,
        moe_layers=int(values.get(L_E, values.get(L, 0))) if moe else 0,
        saved=_saved(entry, False), saved_sp=_saved(entry, True), attention_kernel=attention_kernel(entry),
        ring_bytes=tuple(_number(entry, ledger.bytes() / (s * b)) for ledger in ring_tensors(entry.architecture)),
        expert_output_bias=expert_output_bias(entry), expert_ffn=int(values.get(f_E, 0)) if moe else 0,
        clamped_glu=moe and entry.layout is not None and entry.layout.glu_limit is not None)
