"""Seconds of one micro-batch's compute on the slowest pipeline stage: GEMMs on their rooflines, element-wise bytes at HBM speed.

Every GEMM of the GEMM ledger (``derive.accounts.workload``) is timed pass by pass (forward,
dgrad, wgrad; recomputed forwards by the recompute policy) on its own roofline
(``derive.accounts.roofline``, Williams et al. 2009):

    seconds = max(2MNK / peak_dtype, bytes / HBM bandwidth) / (eta_gemm(generation) x waves)

with the bytes of the pass's operands at their dtype (FP8: one byte) and its result (BF16; the
weight gradient accumulated into FP32), and the wave quantization of its output tiles over the
SMs. Under an FP8 recipe the casts before the GEMMs (inputs and output gradients each
micro-batch, weights once per step) are memory-bound traffic from the recipe's fields.
Attention-score GEMMs (QK^T and PV, causal halved as the ledger counts them: a flash
kernel's FLOPs) are batched GEMMs over the rank's heads on the same roofline, in BF16, their [s, s]
scores in HBM only for the GPT family's materialised kernel (a flash kernel keeps them on chip:
``Workload.attention_kernel``). Element-wise work moves each saved tensor across HBM
``MEMORY_CROSSINGS`` times at eta_memory x bandwidth; MoE layers add the kernels of their ``Kernel`` tables
(the dispatcher's permutations, the experts' eager bias and clamp, the modules Megatron's selective recompute
re-runs), each from the tensors it reads and writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import sympy as sp

from derive.accounts.efficiency import Efficiency
from derive.accounts.pipeline_split import rank_layers
from derive.accounts.roofline import cast_bytes_per_element, pass_seconds
from derive.accounts.step_layout import LINEAR_DTYPE, Layout, Size
from derive.accounts.workload import PASSES, GemmRow, Workload
from derive.dtypes import DTYPE_BYTES
from derive.inputs import choose
from derive.recipes import RECIPES
from derive.symbols import p, v
from derive.systems import System

#: Element-wise HBM traffic of a saved tensor: written in the forward, read in the backward, its
#: gradient written and read once (stated reasoning; a recomputed forward writes it once more).
MEMORY_CROSSINGS = 4


@lru_cache(maxsize=None)
def _rank_layers(rank: str, balanced: bool, layers: int) -> Callable[[Size, Size], Size]:
    """derive.accounts.pipeline_split.rank_layers of ``rank`` as a numpy function of (p, v)."""
    return sp.lambdify((p, v), rank_layers(rank, balanced, layers), "numpy", docstring_limit=0)


def stage_loads(layers: int, lay: Layout) -> tuple[tuple[Size, int, Any], ...]:
    """(transformer layers, output heads, where the stage exists) of each stage that may be the slowest.

    Even split (derive.sweep): ceil(L / (p v)) layers per chunk and the output head on the last
    stage. Balanced (Parallelism.balanced, Dubey et al. 2024 section 3.3.2): L + 2 slots, the
    embedding and the loss each take one, so a middle stage (p > 2) holds v ceil((L + 2)/(p v))
    layers and the last stage one layer fewer plus the head (the first stage, one fewer and the
    embedding lookup, is never slower than the last): derive.accounts.pipeline_split.rank_layers,
    the layers the memory accounts count too.
    """
    def held(rank: str) -> Size:
        return _rank_layers(rank, lay.balanced, layers)(lay.p, lay.v)
    if not lay.balanced:
        return ((np.minimum(held("last"), layers), 1, True),)
    return ((held("middle"), 0, lay.p > 2), (held("last"), 1, True))


def split_sides(row: GemmRow, lay: Layout) -> tuple[Any, Any]:
    """(n, k) of a layer or expert GEMM on one rank: the wider side split over t (an expert's over t_E), as Megatron
    splits a column-parallel n >= k (ColumnParallelLinear) and a row-parallel k > n (RowParallelLinear).

    A ``where`` of the comparison, so that the page's trace (derive.render.page_step_trace), whose sizes may be
    symbols, takes either side as the numbers would.
    """
    split = lay.etp if row.kind == "expert" else lay.t
    wide = row.n >= row.k
    return np.where(wide, row.n / split, row.n), np.where(wide, row.k, row.k / split)


def _gemm_seconds(row: GemmRow, work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                  tokens: float) -> tuple[float, float, float]:
    """(forward seconds, backward seconds, the backward's weight-gradient part) of a GEMM row over ``tokens`` tokens of one rank.

    The three passes of ``derive.architectures.gemms.Gemm.passes`` (forward, dgrad, wgrad), each on
    its own roofline (``derive.accounts.roofline.pass_seconds``): the layer matrices at the
    precision's linear dtype, attention's score GEMMs and the output head in BF16.
    """
    rate = dict(gpu=gpu, eta=eta.gemm_for(gpu))
    if row.kind == "score":
        # one batched GEMM per layer: count / L heads on this rank's share (a / t), each [M, n] x [n, k]
        heads = row.count / work.layers / lay.t
        m, n, k = tokens, row.n, row.k
        flash = work.attention_kernel == "fused"
        times = [pass_seconds(m, n, k, name, "bf16", batch=heads, on_chip=flash, **rate) for name in PASSES]
        return work.layers * times[0], work.layers * (times[1] + times[2]), work.layers * times[2]
    # the head and an MoE router stay in BF16 under an FP8 recipe (derive.conventions.fp8.gemm_dtype: Megatron's
    # router is a plain parameter, router.py Router.gating, outside Transformer Engine's fp8_autocast)
    dtype = "bf16" if row.kind in ("head", "router") else LINEAR_DTYPE[lay.precision]
    n, k = split_sides(row, lay)
    m, copies = tokens, row.count
    if row.kind == "expert":
        m = tokens * work.active_experts * lay.e / work.experts  # tokens per local expert
        copies = row.count * tokens / m
    times = [pass_seconds(m, n, k, name, dtype, **rate) for name in PASSES]
    return copies * times[0], copies * (times[1] + times[2]), copies * times[2]


@lru_cache(maxsize=4096)
def _timed_rows(work: Workload, gpu: System, eta: Efficiency, t: int, etp: int, e: int, precision: str,
                tokens: float) -> tuple[tuple[GemmRow, float, float, float], ...]:
    """(row, forward s, backward s, its weight-gradient s) of every GEMM row: they depend on t, t_E, e, the dtype and the tokens only."""
    lay = Layout(t, 1, 1, 1, e, 1, etp, 1, 1, False, 0, "none", precision)
    return tuple((row, *_gemm_seconds(row, work, lay, gpu, eta, tokens)) for row in work.rows)


def timed_rows(work: Workload, gpu: System, eta: Efficiency, lay: Layout,
               tokens: Any) -> tuple[tuple[GemmRow, Any, Any, Any], ...]:
    """``_timed_rows`` of one layout (cached), or of columns of layouts (each row's passes over the columns)."""
    if any(np.ndim(size) for size in (lay.t, lay.etp, lay.e, tokens)):
        return tuple((row, *_gemm_seconds(row, work, lay, gpu, eta, tokens)) for row in work.rows)
    return _timed_rows(work, gpu, eta, lay.t, lay.etp, lay.e, lay.precision, tokens)


def compute_per_micro_batch(work: Workload, lay: Layout, gpu: System, eta: Efficiency) -> dict[str, Any]:
    """Seconds of one micro-batch (forward + backward + recompute) on the slowest stage, by kind.

    ``backward`` is the share of the GEMM kinds (linear, expert, attention, head) their data- and
    weight-gradient passes take, ``attention_backward`` attention's own (neither a further kind: they are inside
    them), ``backward expert`` and ``backward head`` the parts of it of those kinds, ``wgrad expert`` the
    experts' weight-gradient part; ``layers`` the transformer layers the stage holds
    (what the EP overlap's per-layer schedule reads: derive.accounts.comm_time.ep_paired_seconds). The
    slowest stage is the first of ``stage_loads`` whose seconds exceed every earlier one's.
    """
    tokens = lay.b * work.seq / lay.c
    timed = timed_rows(work, gpu, eta, lay, tokens)
    cast = fp8_cast_bytes(work, lay, tokens, gpu) if LINEAR_DTYPE[lay.precision] != "bf16" else 0.0
    saved = work.saved_bytes("none", lay.sequence_parallel, lay.t)
    again = saved - work.saved_bytes(lay.recompute, lay.sequence_parallel, lay.t)
    routing = (routing_elements(work, lay) + module_recompute_elements(work, lay)) * ROUTED_BYTES / lay.t
    ring = ring_merge_bytes(work, lay) / lay.t
    slowest: dict[str, Any] = {}
    most: Any = 0.0
    for layers, heads, there in stage_loads(work.layers, lay):
        share = layers / work.layers
        seconds = {"linear": 0.0, "attention": 0.0, "expert": 0.0, "head": 0.0, "recompute": 0.0}
        backward_gemms = {"expert": 0.0, "head": 0.0, "linear": 0.0, "attention": 0.0}
        expert_wgrad = 0.0
        for row, forward, backward, wgrad in timed:
            weight = heads if row.kind == "head" else share
            kind = {"layer": "linear", "router": "linear", "score": "attention"}.get(row.kind, row.kind)
            seconds[kind] += (forward + backward) * weight
            backward_gemms[kind] += backward * weight
            expert_wgrad = expert_wgrad + (wgrad * weight if row.kind == "expert" else 0.0)
            if lay.recompute in row.recomputed:
                seconds["recompute"] += forward * weight
        element_bytes = tokens * layers * (MEMORY_CROSSINGS * saved + again + routing + ring) + share * cast
        seconds["memory_bound"] = element_bytes / (eta.memory * gpu.hbm_bandwidth)
        total = sum(seconds.values())
        seconds["backward"] = sum(backward_gemms.values())  # of the GEMM kinds above: the window the DP rules overlap with
        seconds["attention_backward"] = backward_gemms["attention"]  # of "attention": the context ring's backward window
        seconds["backward expert"], seconds["backward head"] = backward_gemms["expert"], backward_gemms["head"]
        seconds["wgrad expert"], seconds["layers"] = expert_wgrad, layers
        slower = there & (total > most)
        slowest = {kind: np.where(slower, value, slowest.get(kind, 0.0)) for kind, value in seconds.items()}
        most = np.where(slower, total, most)
    return slowest


#: Bytes per element of a token's hidden vector the MoE dispatcher moves: the activation dtype, BF16
#: (Megatron's alltoall dispatcher permutes and sends hidden states as they are; FP8 is cast in the experts'
#: GroupedLinear, after the dispatch).
ROUTED_BYTES = DTYPE_BYTES["bf16"]


@dataclass(frozen=True)
class Kernel:
    """One element-wise kernel timed from the HBM traffic it causes: the tensors it reads and the ones it writes.

    ``reads`` / ``writes`` name one tensor per element-sized pass over it (``out.add_(x)`` reads out and x,
    writes out: ``("out", "out"), ("out",)``); a table's sum prices each name by its size per token.
    ``runs``: when the kernel runs beyond once a pass — ``"every step"`` (at each of the c - 1 ring steps
    after the first), ``"local experts"`` (only when a rank holds more than one expert); ``backward``: it
    runs in the backward (else in the forward).
    """

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    runs: str = "once"
    backward: bool = False

    def moved(self, size: dict[str, Any]) -> Any:
        """What one run moves: the sizes of the tensors it reads and writes, summed."""
        return sum(size[tensor] for tensor in self.reads + self.writes)


#: The dispatcher's forward kernels, in order (megatron/core/transformer/moe/token_dispatcher.py,
#: MoEAlltoAllTokenDispatcher.token_permutation / token_unpermutation; moe_utils.permute,
#: sort_chunks_by_idxs, unpermute): "routed" is a token's k_E routed copies, "token" the token itself.
#: The all-to-all between them is communication (derive.accounts.comm_rows).
DISPATCH_KERNELS = (
    Kernel("permutation 1 (permute)", ("routed",), ("routed",)),
    Kernel("permutation 2 (sort_chunks_by_idxs)", ("routed",), ("routed",), runs="local experts"),
    Kernel("unpermutation 2 (sort_chunks_by_idxs)", ("routed",), ("routed",), runs="local experts"),
    Kernel("unpermutation 1 (unpermute: the weighted sum)", ("routed",), ("token",)),
)


#: The kernels of Megatron's ``TEGroupedMLP._apply_bias`` (megatron/core/transformer/moe/experts.py,
#: core_v0.15.0 to core_v0.18.0), which adds the second expert linear's bias after the GEMM: linear_fc2 is
#: built with ``skip_bias_add=True`` and returns its biases, and the method runs eagerly, per local expert,
#: ``t + b * p`` (t the expert's output rows, b its bias, p the rows' routing probabilities) and ``torch.cat``
#: of the pieces; autograd's backward of ``b * p`` forms ``grad * p`` and ``grad * b`` and sums each (the
#: add's and the cat's gradients are the incoming gradient itself, and views). "routed" is the token's
#: k_E expert outputs (b is one vector and p one number a row: their reads are left out; each gradient's
#: product is written, then read by its sum). Only where the routed experts' second linear has a bias (GPT-OSS:
#: ``Workload.expert_output_bias``); TE's GroupedLinear adds the first linear's bias in the GEMM and
#: fuses its gradient into the weight-gradient GEMM (transformer_engine/pytorch/module/grouped_linear.py).
EXPERT_BIAS_KERNELS = (
    Kernel("b * p (each row's bias scaled by its probability)", (), ("routed",)),
    Kernel("t + b * p", ("routed", "routed"), ("routed",)),
    Kernel("torch.cat of the local experts' rows", ("routed",), ("routed",)),
    Kernel("grad * p, summed over the rows (the bias's gradient)", ("routed", "routed"), ("routed",), backward=True),
    Kernel("grad * b, summed over h (the probabilities' gradient)", ("routed", "routed"), ("routed",), backward=True),
)


#: The kernels of the clamp Megatron applies to the experts' first-linear output before its fused GLU
#: activation (``weighted_bias_quick_geglu_impl``, megatron/core/fusions/fused_bias_geglu.py, core_v0.15.0 to
#: core_v0.18.0: ``x_glu, x_linear = input.chunk(2, -1)``; ``torch.cat((x_glu.clamp(max=v), x_linear.clamp(-v, v)),
#: -1)``, eager, outside the jit-fused activation), where the model's config sets a clamp (its
#: ``swiglu_limit``, derive.architectures.decoder.Layout.glu_limit: Megatron-Bridge's gpt_oss_bridge.py (v0.4.0)
#: sets activation_func_clamp_value from it, with bias_activation_fusion). "half" is a token's k_E f_E elements
#: of one GLU half, "glu" its 2 k_E f_E of both. Backward: each clamp's gradient is where(in range, grad, 0) (reads the gradient and the
#: input), the cat's gradient two views, the chunk's gradient the two halves written into one tensor.
EXPERT_CLAMP_KERNELS = (
    Kernel("x_glu.clamp(max=v)", ("half",), ("half",)),
    Kernel("x_linear.clamp(min=-v, max=v)", ("half",), ("half",)),
    Kernel("torch.cat of the clamped halves", ("half", "half"), ("glu",)),
    Kernel("clamp backward, x_glu", ("half", "half"), ("half",), backward=True),
    Kernel("clamp backward, x_linear", ("half", "half"), ("half",), backward=True),
    Kernel("chunk backward (the halves' gradients into one)", ("half", "half"), ("glu",), backward=True),
)


def routing_elements(work: Workload, lay: Layout) -> Any:
    """Elements per token of a stage's average layer the MoE dispatcher's and the experts' eager kernels read and write.

    The sum over :data:`DISPATCH_KERNELS` of the hidden vectors each reads and writes (k_E h for the
    routed copies, h for the token); the backward runs each in reverse with the same bytes (a gather's
    gradient is a scatter-add, a sum's gradient a gather), a full recompute runs the forward's once more.
    Each kernel reads its input and writes its output once (TE's fused moe_permute /
    moe_sort_chunks_by_index with moe_permute_fusion move the same bytes). Where the experts' second
    linear has a bias, :data:`EXPERT_BIAS_KERNELS` too, and where the recipe clamps their GLU input,
    :data:`EXPERT_CLAMP_KERNELS`: their forward kernels once a forward pass, their backward ones once.
    Split over t by the caller like the sequence-parallel layer input.
    """
    if not work.moe:
        return 0.0
    half = work.active_experts * work.expert_ffn
    size = {"routed": work.active_experts * work.hidden, "token": work.hidden, "half": half, "glu": 2 * half}
    several = work.experts / lay.e > 1
    forward = sum(np.where(several | (kernel.runs != "local experts"), kernel.moved(size), 0)
                  for kernel in DISPATCH_KERNELS)
    forward_passes = 2 if lay.recompute == "full" else 1
    eager = (EXPERT_BIAS_KERNELS if work.expert_output_bias else ()) + (EXPERT_CLAMP_KERNELS if work.clamped_glu else ())
    extra = sum(kernel.moved(size) * (1 if kernel.backward else forward_passes) for kernel in eager)
    return ((forward_passes + 1) * forward + extra) * work.moe_layers / work.layers


#: The kernels Megatron's selective recompute of a module re-runs in the backward (``recompute_modules`` with
#: ``recompute_granularity = "selective"``, megatron/core/transformer/transformer_config.py; core_v0.15.0), by module:
#: "layernorm" re-runs the pre-MLP norm of an MoE layer, a separate TENorm there (the TE layer spec,
#: megatron/core/models/gpt/gpt_layer_specs.py: ``pre_mlp_layernorm = backend.layer_norm() if num_experts``; a dense
#: layer's and a non-MLA layer's input norm are fused into linear_fc1 / linear_qkv, IdentityOp, and not recomputed;
#: TransformerLayer checkpoints it with CheckpointWithoutOutput: transformer_layer.py ``recompute_pre_mlp_layernorm``):
#: it reads the layer's token and writes its normalised copy. "moe_act" re-runs the experts' activation with their
#: probabilities (TEGroupedMLP ``activation_recompute``, experts.py: ``bias_act_func`` under
#: CheckpointWithoutOutput): it reads fc1's output, both GLU halves, and writes one half; where the experts clamp
#: their GLU input the eager clamp is inside ``bias_act_func`` and re-runs too (EXPERT_CLAMP_KERNELS' forward).
#: An MLA layer's separate input norm ("layernorm" recomputes it too) is not counted.
RECOMPUTE_MODULE_KERNELS = {
    "layernorm": (Kernel("pre-MLP norm, re-run", ("token",), ("token",), backward=True),),
    "moe_act": (Kernel("experts' activation x probabilities, re-run", ("glu",), ("half",), backward=True),),
}


def module_recompute_elements(work: Workload, lay: Layout) -> Any:
    """Elements per token of a stage's average layer the recomputed modules' kernels read and write (``lay.recompute_modules``).

    The sum of :data:`RECOMPUTE_MODULE_KERNELS` of each module, and for "moe_act" where the experts clamp their GLU
    input, :data:`EXPERT_CLAMP_KERNELS`' forward ones once more; MoE layers only ("token" is h, "half" k_E f_E, "glu"
    2 k_E f_E). Split over t by the caller, like :func:`routing_elements`. ValueError naming ``recompute_modules``
    for a module derive does not cost, or beside full recompute (Megatron reads the modules under selective
    granularity only).
    """
    for module in lay.recompute_modules:
        choose("recompute_modules", module, RECOMPUTE_MODULE_KERNELS)
    if lay.recompute_modules and lay.recompute == "full":
        raise ValueError("recompute_modules: Megatron recomputes modules under selective granularity, not with full")
    if not work.moe or not lay.recompute_modules:
        return 0.0
    half = work.active_experts * work.expert_ffn
    size = {"token": work.hidden, "half": half, "glu": 2 * half}
    kernels = [kernel for module in sorted(lay.recompute_modules) for kernel in RECOMPUTE_MODULE_KERNELS[module]]
    if "moe_act" in lay.recompute_modules and work.clamped_glu:
        kernels += [kernel for kernel in EXPERT_CLAMP_KERNELS if not kernel.backward]
    return sum(kernel.moved(size) for kernel in kernels) * work.moe_layers / work.layers


#: The kernels of TE's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention/dot_product_attention/
#: context_parallel.py, BF16, sbhd / bshd) that merge the c ring steps' partial results, on the rank whose
#: queries meet full-sized blocks at every step (the last CP rank under the causal split into 2c chunks):
#: "out" is the attention output, "q" Q (dQ's size), "kv" K and V (or their gradients). The attention
#: kernels themselves are the score GEMMs (compute-bound, their FLOPs balanced over the ranks).
CP_MERGE_KERNELS = (
    Kernel("flash_attn_fwd_out_correction_init (step 0's partial output rescaled into out)", ("out",), ("out",)),
    Kernel("flash_attn_fwd_out_correction (out.add_(out_per_step x exp(lse_step - lse)))", ("out", "out"),
           ("out",), runs="every step"),
    Kernel("dq.copy_(dq_) (step 0's dQ)", ("q",), ("q",), backward=True),
    Kernel("dq.add_(dq_) (a step's dQ accumulated)", ("q", "q"), ("q",), runs="every step", backward=True),
    Kernel("p2p_comm_buffers[0][0].copy_(kv) (K and V into the backward's ring buffer)", ("kv",), ("kv",),
           backward=True),
    Kernel("dk.copy_(dk_), dv.copy_(dv_) (step 0's dK, dV)", ("kv",), ("kv",), backward=True),
    Kernel("dk.add_(dk_), dv.add_(dv_) (a step's dK, dV added to those travelling the ring)", ("kv", "kv"),
           ("kv",), runs="every step", backward=True),
)


def ring_merge_bytes(work: Workload, lay: Layout) -> Any:
    """HBM bytes per token of a layer that ring attention's merge kernels move on one rank at t = 1 (0 when c = 1).

    The sum over :data:`CP_MERGE_KERNELS` of the tensors each reads and writes (c - 1 times for those
    that run at every later ring step), each at its bytes per token (``Workload.ring_bytes``:
    Q, K + V, the attention output from the saved tables); the forward's kernels again when core attention is
    recomputed (selective or full: Megatron's _checkpointed_attention_forward re-runs the ring). Split over
    t by the caller (heads). Only Megatron's default ring (cp_comm ``p2p``); the all-gather variant's
    copies are not counted.
    """
    size = dict(zip(("q", "kv", "out"), work.ring_bytes))
    steps = lay.c - 1
    forward_passes = 1 if lay.recompute == "none" else 2
    total = sum(kernel.moved(size) * (steps if kernel.runs == "every step" else 1)
                * (1 if kernel.backward else forward_passes) for kernel in CP_MERGE_KERNELS)
    return np.where((np.asarray(lay.c) > 1) & (lay.cp_comm == "p2p"), total, 0.0)


#: Projections Transformer Engine runs as one GEMM on one input, so their input is cast once:
#: q / k / v as linear_qkv, gate / up as linear_fc1 (Megatron's TE layer spec,
#: megatron/core/models/gpt/gpt_layer_specs.py), MLA's two down-projections of the layer input.
SHARED_INPUT = {"k_proj": "q_proj", "v_proj": "q_proj", "up_proj": "gate_proj",
                "kv_a_proj_with_mqa": "q_a_proj"}


#: Linear layers whose input is a normalization Megatron's TE spec fuses into the layer
#: (TELayerNormColumnParallelLinear: linear_qkv, a dense MLP's linear_fc1, MLA's linear_q_up_proj and
#: linear_kv_up_proj with q / kv layernorms; megatron/core/models/gpt/gpt_layer_specs.py). An MoE
#: layer's pre-MLP norm is a separate TENorm (the router and the experts share it); the activation
#: before linear_fc2 is a separate kernel (megatron/core/transformer/mlp.py).
NORM_FUSED_INPUTS = frozenset({"self_attn.q_proj.weight", "mlp.gate_proj.weight", "self_attn.q_b_proj.weight",
                               "self_attn.kv_b_proj.weight"})


def _input_name(name: str) -> str:
    """The GEMM whose input ``name``'s input is (``SHARED_INPUT``): one cast for a fused projection."""
    for part, first in SHARED_INPUT.items():
        name = name.replace(part, first)
    return name


def fp8_cast_bytes(work: Workload, lay: Layout, tokens: float, gpu: System) -> float:
    """HBM bytes of the FP8 casts of one micro-batch's linear GEMMs on one rank, all L layers.

    Each linear GEMM's input [M, K] is cast once in the forward (once per fused projection,
    ``SHARED_INPUT``) and its output gradient [M, N] once in the backward; each layer matrix is cast
    once per step (cached over the step's m micro-batches: TE ``is_first_microbatch``), a 1/m share
    here. Bytes per element from the recipe (``derive.accounts.roofline.cast_bytes_per_element``); an
    input a fused normalization writes (``NORM_FUSED_INPUTS``) is not read again by a cast.
    """
    recipe = RECIPES[lay.precision]
    per_element = cast_bytes_per_element(recipe, gpu.generation)
    fused_element = cast_bytes_per_element(recipe, gpu.generation, norm_fused=True)
    inputs: dict[tuple[str, str, float], float] = {}
    total = 0.0
    for row in work.rows:
        if row.kind not in ("layer", "expert"):
            continue
        n, k = split_sides(row, lay)
        inputs[(row.kind, _input_name(row.name), row.count)] = row.count * k
        weights = n * k * row.count
        if row.kind == "expert":
            weights *= work.experts / (work.active_experts * lay.e)  # every local expert's matrix
        total += tokens * row.count * n + weights / lay.m
    inputs_bytes = sum(elements * (fused_element if kind == "layer" and name in NORM_FUSED_INPUTS else per_element)
                       for (kind, name, _), elements in inputs.items())
    return total * per_element + tokens * inputs_bytes
