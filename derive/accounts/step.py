"""Step time predicted from derive's ledgers: GEMMs at a roofline, element-wise bytes at HBM speed, collectives on their links.

One step on the slowest pipeline stage (``derive.accounts.schedule``):

    step = (m + (p - 1)/v) x stage(micro-batch) + exposed DP + exposed PP + optimizer

where stage(micro-batch) = GEMMs + attention + element-wise work + exposed TP / CP / EP
communication of one micro-batch on the stage holding ceil(L/(p v)) v layers and the
output head. Every GEMM of the GEMM ledger (``derive.accounts.workload``) is timed pass
by pass (forward, dgrad, wgrad; recomputed forwards by the recompute policy) on its own
roofline (``derive.accounts.roofline``, Williams et al. 2009):

    seconds = max(2MNK / peak_dtype, bytes / HBM bandwidth) / (eta_gemm(generation) x waves)

with the bytes of the pass's operands at their dtype (FP8: one byte) and its result (BF16; the
weight gradient accumulated into FP32), and the wave quantization of its output tiles over the
SMs. Under an FP8 recipe the casts before the GEMMs (inputs and output gradients each
micro-batch, weights once per step) are memory-bound traffic from the recipe's fields.
Attention-score GEMMs (QK^T and PV, causal halved as the ledger counts them: a flash
kernel's FLOPs) are batched GEMMs over the rank's heads on the same roofline, in BF16, their [s, s]
scores in HBM only for the GPT family's materialised kernel (a flash kernel keeps them on chip:
``Workload.attention_kernel``). Element-wise work
moves each saved tensor across HBM ``MEMORY_CROSSINGS`` times at eta_memory x bandwidth;
the optimizer reads and writes every resident state byte once. Communication rows
(``derive.accounts.comm``) cross the link their group spans at eta_network x its
bandwidth plus a latency per ring step, and keep what their overlap rule leaves exposed.
The eta constants are fitted by ``python -m derive.calibrate`` and read from
``derive/calibration.json``. Every function takes one layout's sizes as numbers or many layouts'
as numpy columns (the planner's): the same numpy operations evaluate both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import sympy as sp

from derive.accounts.pipeline_split import rank_layers
from derive.accounts.schedule import (
    exposed,
    last_bucket_share,
    overlap_rules,
    pipeline_length,
    span,
)
from derive.accounts.roofline import cast_bytes_per_element, pass_seconds
from derive.accounts.workload import GemmRow, Workload
from derive.recipes import RECIPES
from derive.symbols import p, v
from derive.systems import System

#: The calibration data file the package ships (written by python -m derive.calibrate).
CALIBRATION = Path(__file__).resolve().parents[1] / "calibration.json"

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
#: Element-wise HBM traffic of a saved tensor: written in the forward, read in the backward, its
#: gradient written and read once (stated reasoning; a recomputed forward writes it once more).
MEMORY_CROSSINGS = 4
#: Ring steps of a collective on n ranks (NCCL ring algorithms): the latency term's count. An
#: all-to-all is one round of grouped sends and receives to every peer at once (NCCL's alltoall
#: is ncclGroupStart / ncclSend / ncclRecv per peer / ncclGroupEnd).
RING_STEPS = {"all-reduce": lambda n: 2 * (n - 1), "reduce-scatter": lambda n: n - 1,
              "all-gather": lambda n: n - 1, "all-to-all": lambda n: 1,
              "send-recv": lambda n: 1, "broadcast": lambda n: n - 1}


#: Which fitted GEMM efficiency a GPU generation takes (``System.generation``). Blackwell takes
#: Hopper's until a published Blackwell run joins the calibration set (stated assumption: the
#: same cuBLAS / CUTLASS warp-specialised kernels and the same power-limited boost clocks).
GEMM_GENERATION = {"ampere": "ampere", "hopper": "hopper", "blackwell": "hopper"}


@dataclass(frozen=True)
class Efficiency:
    """The fitted constants (each a fraction of a data-sheet figure) and where they come from.

    ``gemm`` is Ampere's GEMM efficiency, ``gemm_hopper`` Hopper's (and Blackwell's,
    ``GEMM_GENERATION``). Stated reasoning, not a sourced clock: the data-sheet peaks are the
    tensor cores' rate at the boost clock, and H100 tripled A100's dense peak (989 vs 312
    TFLOP/s) at 1.75 times its power limit (700 vs 400 W), so under sustained GEMMs it keeps a
    smaller share of that peak; one fitted share per generation absorbs it (and the kernels'
    own difference). The peaks' clocks: A100 312 TFLOP/s = 108 SMs x 2048 FLOPs x 1.41 GHz, H100
    989 = 132 x 4096 x 1.83 GHz (not the 1.98 GHz boost); NVIDIA's HPL Rpeak for A100 used the
    clock sustained at the power limit, 1.305 GHz (G. Lockwood, "Peak FLOPS", glennklockwood.com).
    No sustained H100 tensor clock was found to source, hence a fitted constant per generation.
    ``None`` means Ampere's figure for every generation.
    """

    gemm: float
    memory: float
    network: float
    gemm_hopper: float | None = None
    source: str = ""

    def gemm_for(self, gpu: System) -> float:
        """The GEMM efficiency of ``gpu``'s generation (``GEMM_GENERATION``)."""
        if GEMM_GENERATION[gpu.generation] == "hopper" and self.gemm_hopper is not None:
            return self.gemm_hopper
        return self.gemm


@lru_cache(maxsize=1)
def calibrated() -> Efficiency:
    """The constants ``python -m derive.calibrate`` wrote to ``derive/calibration.json``."""
    data = json.loads(CALIBRATION.read_text())
    return Efficiency(**data["constants"], source=data["source"])


@dataclass
class StepTime:
    """A predicted step: seconds, throughput, utilisation under named FLOP conventions, and the breakdown."""

    step_time_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    mfu_full_square: float
    hfu_full_square: float
    breakdown: dict[str, float]
    conventions: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON object of ``python -m derive.predict``."""
        return {"step_time_s": self.step_time_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "model_tflops_per_gpu": self.model_tflops_per_gpu, "mfu": self.mfu, "hfu": self.hfu,
                "mfu_full_square": self.mfu_full_square, "hfu_full_square": self.hfu_full_square,
                "breakdown": dict(self.breakdown), "conventions": dict(self.conventions)}


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


def _gemm_seconds(row: GemmRow, work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                  tokens: float) -> tuple[float, float]:
    """(forward seconds, backward seconds) of a GEMM row over ``tokens`` tokens of one rank.

    The three passes of ``derive.architectures.gemms.Gemm.passes`` (forward, dgrad, wgrad), each on
    its own roofline (``derive.accounts.roofline.pass_seconds``): the layer matrices at the
    precision's linear dtype, attention's score GEMMs and the output head in BF16.
    """
    passes = ("forward", "dgrad", "wgrad")
    rate = dict(gpu=gpu, eta=eta.gemm_for(gpu))
    if row.kind == "score":
        # one batched GEMM per layer: count / L heads on this rank's share (a / t), each [M, n] x [n, k]
        heads = row.count / work.layers / lay.t
        m, n, k = tokens, row.n, row.k
        flash = work.attention_kernel == "fused"
        times = [pass_seconds(m, n, k, name, "bf16", batch=heads, on_chip=flash, **rate) for name in passes]
        return work.layers * times[0], work.layers * (times[1] + times[2])
    dtype = "bf16" if row.kind == "head" else LINEAR_DTYPE[lay.precision]
    split = lay.etp if row.kind == "expert" else lay.t
    n, k = (row.n / split, row.k) if row.n >= row.k else (row.n, row.k / split)
    m, copies = tokens, row.count
    if row.kind == "expert":
        m = tokens * work.active_experts * lay.e / work.experts  # tokens per local expert
        copies = row.count * tokens / m
    times = [pass_seconds(m, n, k, name, dtype, **rate) for name in passes]
    return copies * times[0], copies * (times[1] + times[2])


@lru_cache(maxsize=4096)
def _timed_rows(work: Workload, gpu: System, eta: Efficiency, t: int, etp: int, e: int, precision: str,
                tokens: float) -> tuple[tuple[GemmRow, float, float], ...]:
    """(row, forward s, backward s) of every GEMM row: they depend on t, t_E, e, the dtype and the tokens only."""
    lay = Layout(t, 1, 1, 1, e, 1, etp, 1, 1, False, 0, "none", precision)
    return tuple((row, *_gemm_seconds(row, work, lay, gpu, eta, tokens)) for row in work.rows)


def timed_rows(work: Workload, gpu: System, eta: Efficiency, lay: Layout,
               tokens: Any) -> tuple[tuple[GemmRow, Any, Any], ...]:
    """``_timed_rows`` of one layout (cached), or of columns of layouts (each row's passes over the columns)."""
    if any(np.ndim(size) for size in (lay.t, lay.etp, lay.e, tokens)):
        return tuple((row, *_gemm_seconds(row, work, lay, gpu, eta, tokens)) for row in work.rows)
    return _timed_rows(work, gpu, eta, lay.t, lay.etp, lay.e, lay.precision, tokens)


def compute_per_micro_batch(work: Workload, lay: Layout, gpu: System, eta: Efficiency) -> dict[str, Any]:
    """Seconds of one micro-batch (forward + backward + recompute) on the slowest stage, by kind.

    The slowest stage is the first of ``stage_loads`` whose seconds exceed every earlier one's.
    """
    tokens = lay.b * work.seq / lay.c
    timed = timed_rows(work, gpu, eta, lay, tokens)
    cast = fp8_cast_bytes(work, lay, tokens, gpu) if LINEAR_DTYPE[lay.precision] != "bf16" else 0.0
    saved = work.saved_bytes("none", lay.sequence_parallel, lay.t)
    again = saved - work.saved_bytes(lay.recompute, lay.sequence_parallel, lay.t)
    slowest: dict[str, Any] = {}
    most: Any = 0.0
    for layers, heads, there in stage_loads(work.layers, lay):
        share = layers / work.layers
        seconds = {"linear": 0.0, "attention": 0.0, "expert": 0.0, "head": 0.0, "recompute": 0.0}
        for row, forward, backward in timed:
            weight = heads if row.kind == "head" else share
            kind = {"layer": "linear", "score": "attention"}.get(row.kind, row.kind)
            seconds[kind] += (forward + backward) * weight
            if lay.recompute in row.recomputed:
                seconds["recompute"] += forward * weight
        element_bytes = tokens * layers * (MEMORY_CROSSINGS * saved + again) + share * cast
        seconds["memory_bound"] = element_bytes / (eta.memory * gpu.hbm_bandwidth)
        total = sum(seconds.values())
        slower = there & (total > most)
        slowest = {kind: np.where(slower, value, slowest.get(kind, 0.0)) for kind, value in seconds.items()}
        most = np.where(slower, total, most)
    return slowest


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
        split = lay.etp if row.kind == "expert" else lay.t
        n, k = (row.n / split, row.k) if row.n >= row.k else (row.n, row.k / split)
        inputs[(row.kind, _input_name(row.name), row.count)] = row.count * k
        weights = n * k * row.count
        if row.kind == "expert":
            weights *= work.experts / (work.active_experts * lay.e)  # every local expert's matrix
        total += tokens * row.count * n + weights / lay.m
    inputs_bytes = sum(elements * (fused_element if kind == "layer" and name in NORM_FUSED_INPUTS else per_element)
                       for (kind, name, _), elements in inputs.items())
    return total * per_element + tokens * inputs_bytes


def local_parameters(work: Workload, lay: Layout) -> float:
    """Parameters one rank holds: dense ones over t p, routed experts over etp e p."""
    dense = work.parameters - work.expert_parameters
    return dense / (lay.t * lay.p) + work.expert_parameters / (lay.etp * lay.e * lay.p)


def optimizer_seconds(work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                      state_bytes_per_parameter: float) -> float:
    """Read and write every resident state byte once (Adam's step, multi-tensor apply), sharded over d under ZeRO."""
    local = local_parameters(work, lay)
    return 2 * local * state_bytes_per_parameter / (eta.memory * gpu.hbm_bandwidth)


def remote_share(ranks: Size, group_span: Size, gpu: System) -> Any:
    """Share of an all-to-all's bytes a rank sends to peers outside its NVLink domain (equal bytes to each peer).

    The group's ``ranks`` are spread evenly over ``group_span`` consecutive GPUs; those of them in the
    rank's own domain are reached over NVLink, the rest over the NIC.
    """
    local = np.maximum(1, ranks * gpu.nvlink_domain // group_span)
    inside = (group_span <= gpu.nvlink_domain) | (ranks <= 1)
    return np.where(inside, 0.0, (ranks - local) / np.where(inside, 1, ranks - 1))


def collective_seconds(row: Any, sizes: dict[str, Size], gpu: System, eta: Efficiency) -> Any:
    """Seconds a rank spends in one ledger row over a step: bytes at the link its group spans, plus ring-step latency.

    A ring collective spanning nodes runs at the NIC's speed (each rank's ring neighbour may sit
    across it); an all-to-all sends its remote share over the NIC and the rest over NVLink at once.
    """
    group_span = span(row.group, sizes)
    bandwidth, latency = gpu.link(group_span)
    ranks = np.maximum(np.trunc(np.asarray(row.ranks, dtype=float)), 2)
    steps = RING_STEPS[row.collective](ranks)
    sent = np.asarray(row.sent, dtype=float)
    wire = sent / (eta.network * bandwidth)
    if row.collective == "all-to-all":
        remote = remote_share(ranks, group_span, gpu)
        split = np.maximum(remote * sent / gpu.nic_bandwidth, (1 - remote) * sent / gpu.nvlink_bandwidth)
        wire = np.where(group_span > gpu.nvlink_domain, split / eta.network, wire)
    return np.asarray(row.count, dtype=float) * (wire + steps * latency)


def ep_overlap_window(lay: Layout, gpu: System, compute: dict[str, Any], rules: frozenset[str]) -> Any:
    """Seconds of compute an expert-parallel all-to-all of one micro-batch may hide behind (0 when no rule applies).

    Under ``ep-a2a-overlap`` (or ``ep-a2a-overlap-across-nodes`` where the EP group leaves the NVLink
    domain, with p = 1 or v > 1 and no full recompute, Megatron's conditions) the dispatch and combine
    of one micro-batch run beside the other micro-batch's forward or backward: a whole micro-batch's
    GEMMs and element-wise work (``derive.accounts.schedule.OVERLAP_RULES``).
    """
    work = sum(compute[kind] for kind in ("linear", "expert", "attention", "head", "recompute", "memory_bound"))
    across = (span("ep", {"tp": lay.t, "cp": lay.c, "ep": lay.e}) > gpu.nvlink_domain) & (
        (np.asarray(lay.p) == 1) | (np.asarray(lay.v) > 1)) & (lay.recompute != "full")
    on = ("ep-a2a-overlap" in rules) | (("ep-a2a-overlap-across-nodes" in rules) & across)
    return np.where(on, work, 0.0)


def communication(rows: Iterable[Any], work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                  compute: dict[str, Any], rules: frozenset[str]) -> dict[str, Any]:
    """Exposed seconds per group: per micro-batch for tp, cp, ep; per step for dp and pp."""
    sizes = {"tp": lay.t, "cp": lay.c, "ep": lay.e, "dp": lay.d, "pp": lay.p}
    total = {group: 0.0 for group in ("tp", "tp-async", "cp", "ep", "pp")}
    data: dict[tuple[str, str], list[Any]] = {}  # (reduce | gather, pass) -> [seconds, most per step]
    one = {"pp": 0.0}
    for row in rows:
        seconds = collective_seconds(row, sizes, gpu, eta)
        group = "dp" if row.group == "edp" else row.group
        if group == "dp":
            kind = "gather" if row.collective == "all-gather" else "reduce"
            bucket = data.setdefault((kind, "backward" if row.pass_ == "backward" else "forward"), [0.0, 0.0])
            bucket[0] += seconds
            bucket[1] = np.maximum(bucket[1], np.asarray(row.count, dtype=float))
            continue
        if group == "tp" and row.overlap != "none":
            group = "tp-async"
        if group == "pp":
            count = np.asarray(row.count, dtype=float)
            one["pp"] = np.maximum(one["pp"], np.where(count > 0, seconds / np.where(count > 0, count, 1), 0.0))
        total[group] += seconds
    m = lay.m
    linear = compute["linear"] + compute["expert"]
    hidden = exposed(total["tp-async"] / m, linear / 3 if "tp-async-backward" in rules else 0.0)
    per_micro = {
        "tp": hidden + exposed(total["tp"] / m, linear if "tp-comm-overlap" in rules else 0.0),
        "cp": exposed(total["cp"] / m, compute["attention"] if "cp-ring-with-attention" in rules else 0.0),
        "ep": exposed(total["ep"] / m, ep_overlap_window(lay, gpu, compute, rules)),
    }
    backward = (compute["linear"] + compute["expert"] + compute["attention"] + compute["head"]) * 2 / 3
    windows = {"backward": backward, "forward": backward / 2}
    # the bucket grows with the group the gradients are reduced over: data x context parallel ranks
    # (megatron/training/training.py, the DDP bucket size: max(40M, 1M x dp_cp_group size))
    share = last_bucket_share(local_parameters(work, lay), lay.d * lay.c)
    rule = {"reduce": "dp-reduce-with-backward", "gather": "param-gather-with-forward"}
    dp = 0.0
    for (kind, pass_), (seconds, count) in sorted(data.items()):
        # a collective issued once per step overlaps one micro-batch's pass (the last backward, the
        # first forward); one issued per micro-batch (ZeRO-3 / FSDP) overlaps every micro-batch's
        on = rule[kind] in rules
        window = windows[pass_] * np.minimum(np.maximum(count, 1.0), m) if on else 0.0
        dp += exposed(seconds, window, seconds * share if on else 0.0)
    hops = 2 * (lay.p - 1)
    pp = np.minimum(total["pp"], hops * one["pp"]) if "pp-send-with-compute" in rules else total["pp"]
    return {**per_micro, "dp": dp, "pp": pp}


def _plain(value: Any, shape: tuple[int, ...] = ()) -> Any:
    """A Python float of one layout's figure (a 0-d array or numpy scalar); columns' figures as columns of ``shape``."""
    return float(value) if shape == () else np.broadcast_to(value, shape)


def step_time(work: Workload, lay: Layout, gpu: System, rows: Iterable[Any] = (),
              eta: Efficiency | None = None, overlap: Iterable[str] | None = None,
              state_bytes_per_parameter: float = 16.0) -> StepTime:
    """The predicted step of ``work`` under ``lay`` on ``gpu`` with the communication ``rows`` (one rank's, per step)."""
    eta = eta or calibrated()
    rules = overlap_rules(None if overlap is None else frozenset(overlap))
    compute = compute_per_micro_batch(work, lay, gpu, eta)
    comm = communication(rows, work, lay, gpu, eta, compute, rules)
    gemm = compute["linear"] + compute["expert"] + compute["attention"] + compute["head"]
    stage = gemm + compute["recompute"] + compute["memory_bound"] + comm["tp"] + comm["cp"] + comm["ep"]
    m = lay.m
    length = pipeline_length(lay.p, lay.v, m)
    breakdown = {"compute": m * gemm, "recompute": m * compute["recompute"],
                 "memory_bound": m * compute["memory_bound"], "tp": m * comm["tp"],
                 "cp": m * comm["cp"], "ep": m * comm["ep"], "bubble": (length - m) * stage,
                 "dp": comm["dp"], "pp": comm["pp"],
                 "optimizer": optimizer_seconds(work, lay, gpu, eta, state_bytes_per_parameter)}
    seconds = sum(breakdown.values())
    gpus = lay.t * lay.p * lay.c * lay.d
    tokens = lay.b * m * lay.d * work.seq
    model_flops = 3 * sum(row.flops_per_token for row in work.rows)
    full_square = 3 * sum(row.flops_per_token * (2 if row.kind == "score" else 1) for row in work.rows)
    hardware = model_flops + sum(row.flops_per_token for row in work.rows if lay.recompute in row.recomputed)
    hardware_full = full_square + sum(row.flops_per_token * (2 if row.kind == "score" else 1)
                                      for row in work.rows if lay.recompute in row.recomputed)
    peak = gpu.peak("bf16")
    per_gpu = tokens / seconds / gpus
    shape = np.shape(per_gpu)
    return StepTime(
        *(_plain(value, shape) for value in (seconds, per_gpu, per_gpu * model_flops / 1e12,
                                             per_gpu * model_flops / peak, per_gpu * hardware / peak,
                                             per_gpu * full_square / peak, per_gpu * hardware_full / peak)),
        {name: _plain(value, shape) for name, value in breakdown.items()},
        {"mfu": "model FLOPs (every GEMM's three passes, causal attention halved) / bf16 dense peak",
         "hfu": "mfu's FLOPs plus the recomputed forwards",
         "mfu_full_square": "as mfu with the full s x s score square (Korthikanti et al. 2022, Appendix A)",
         "hfu_full_square": "as hfu with the full score square",
         "model_tflops_per_gpu": "mfu's FLOPs per second per GPU / 1e12",
         "rank_order": "tp, cp, ep, dp, pp (Megatron's order string tp-cp-ep-dp-pp)",
         "overlap": ", ".join(sorted(rules)) or "none"})
