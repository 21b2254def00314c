"""Seconds of the communication rows on their links, and what each overlap rule leaves exposed.

Communication rows (``derive.accounts.comm``) cross the link their group spans at eta_network x its
bandwidth plus the latency of each NCCL call they are issued in (``call_latency``: NCCL's ring model,
NVLink steps and domain crossings apart; a data-parallel row in buckets or per-layer FSDP units,
``derive.accounts.schedule.data_parallel_calls``), and keep what their overlap rule leaves exposed
(``derive.accounts.schedule``): per micro-batch for tp, cp, ep (the context ring per pass, ``ring_exposed``);
per step for dp and pp.
"""
from __future__ import annotations

from functools import lru_cache, wraps
from typing import Any, Callable, Iterable, TypeVar

import numpy
import numpy as np

from derive.accounts.efficiency import Efficiency
from derive.accounts.compute_time import stage_loads
from derive.accounts.schedule import data_parallel_calls, exposed, last_bucket_share, span
from derive.accounts.step_layout import (Layout, Size, local_dense_parameters, local_expert_parameters,
                                         local_parameters)
from derive.accounts.workload import Workload
from derive.systems import System

F = TypeVar("F", bound=Callable[..., Any])


def one_layout_cached(function: F) -> F:
    """``function`` memoised where every argument is a hashable scalar (one layout's), called as is on columns.

    The scalar step model (``predict``, one layout at a time: the planner's checks, the fuzz cases) asks the
    same link questions (a collective over n ranks spanning g GPUs of one system) for every row of every
    layout; numpy on scalars costs microseconds a call. Keyed by type as well (an int 2 and a float 2.0
    give results of different types), so a cached value is what the call would return. Under the render's
    symbolic trace (derive.render.page_step_trace swaps this module's ``np`` for SymPy's) every call runs:
    a value cached in one world must not answer the other.
    """
    cached = lru_cache(maxsize=65536, typed=True)(function)

    @wraps(function)
    def call(*args: Any) -> Any:
        # the render's symbolic trace swaps this module's np (derive.render.page_step_trace); columns are not keys
        if np is not numpy or any(isinstance(arg, numpy.ndarray) for arg in args):
            return function(*args)
        return cached(*args)
    return call  # type: ignore[return-value]


#: Ring steps of a collective on n ranks (NCCL ring algorithms): the latency term's count. An
#: all-to-all is one round of grouped sends and receives to every peer at once (NCCL's alltoall
#: is ncclGroupStart / ncclSend / ncclRecv per peer / ncclGroupEnd).
RING_STEPS = {"all-reduce": lambda n: 2 * (n - 1), "reduce-scatter": lambda n: n - 1,
              "all-gather": lambda n: n - 1, "all-to-all": lambda n: 1,
              "send-recv": lambda n: 1, "broadcast": lambda n: n - 1}
#: Passes a ring collective makes around its ring (NCCL's nInterSteps: nNodes - 1 per pass, an all-reduce
#: a reduce-scatter pass and an all-gather pass: src/graph/tuning.cc).
RING_PASSES = {"all-reduce": 2, "reduce-scatter": 1, "all-gather": 1}


def remote_share(ranks: Size, group_span: Size, gpu: System) -> Any:
    """Share of an all-to-all's bytes a rank sends to peers outside its NVLink domain (equal bytes to each peer).

    The group's ``ranks`` are spread evenly over ``group_span`` consecutive GPUs; those of them in the
    rank's own domain are reached over NVLink, the rest over the NIC.
    """
    local = ranks_per_domain(ranks, group_span, gpu)
    inside = (group_span <= gpu.nvlink_domain) | (ranks <= 1)
    return np.where(inside, 0.0, (ranks - local) / np.where(inside, 1, ranks - 1))


def ranks_per_domain(ranks: Size, group_span: Size, gpu: System) -> Any:
    """Ranks of a group inside one NVLink domain: its ``ranks`` spread evenly over ``group_span`` consecutive GPUs."""
    return np.maximum(1, np.minimum(ranks, ranks * gpu.nvlink_domain // np.maximum(group_span, 1)))


@one_layout_cached
def ring_bandwidth(ranks: Size, group_span: Size, gpu: System) -> Any:
    """Unidirectional bytes/s of a rank in a ring collective: NVLink inside a domain, the domain's NICs across.

    Across NVLink domains NCCL builds one ring per channel and lets each channel leave and enter a
    domain through a different NIC (src/graph/search.cc, ncclTopoCompute: a ring graph's ``inter``
    entries, one NET per channel; its tuning model, src/graph/tuning.cc, gives a ring over nodes
    nChannels x bwInter): a group with g ranks in a domain pushes each rank's bytes over g NICs, so a
    rank moves at min(NVLink, g x NIC) (one NIC per GPU on every system of derive.systems). A group
    with one rank per domain (t = 8 on an HGX board) runs at its NIC's speed.
    """
    inside = np.less_equal(group_span, gpu.nvlink_domain)
    across = np.minimum(gpu.nvlink_bandwidth, ranks_per_domain(ranks, group_span, gpu) * gpu.nic_bandwidth)
    return np.where(inside, gpu.nvlink_bandwidth, across)


@one_layout_cached
def call_latency(collective: str, ranks: Size, group_span: Size, gpu: System) -> Any:
    """Latency of one NCCL call of ``collective`` over ``ranks`` spread over ``group_span`` consecutive GPUs.

    NCCL's own model of a ring (src/graph/tuning.cc, ncclTopoTuneModel: ``(nsteps - nInterSteps) x intraLat
    + nInterSteps x interLat``, nsteps = n - 1 for all-gather and reduce-scatter, 2(n - 1) for all-reduce,
    nInterSteps = nNodes - 1, doubled for all-reduce): of a ring's steps, those that cross from one NVLink
    domain to the next pay the NIC's latency, the rest NVLink's. A ring of n ranks over D domains
    (``ranks_per_domain`` of them in each) crosses D - 1 domain boundaries per pass. A send or an all-to-all
    is one step at the latency of the link its group spans.
    """
    link_latency = gpu.link(group_span)[1]
    steps = RING_STEPS[collective](ranks)
    if collective not in RING_PASSES:
        return steps * link_latency
    domains = np.ceil(ranks / ranks_per_domain(ranks, group_span, gpu))
    crossing = np.where(np.less_equal(group_span, gpu.nvlink_domain), 0.0, RING_PASSES[collective] * (domains - 1))
    return (steps - crossing) * gpu.nvlink_latency + crossing * gpu.nic_latency


def collective_seconds(row: Any, sizes: dict[str, Size], gpu: System, eta: Efficiency, calls: Any = 1) -> Any:
    """Seconds a rank spends in one ledger row over a step: bytes at the link its group spans, plus each call's latency.

    A ring collective spanning NVLink domains runs at ``ring_bandwidth`` (its ranks' NICs in each
    domain); an all-to-all sends its remote share over the NIC and the rest over NVLink at once. ``calls``:
    the NCCL calls each of the row's ``count`` issues is split into (its bytes in buckets or per-layer
    units: ``derive.accounts.schedule.data_parallel_calls``), each paying ``call_latency``.
    """
    return row_seconds(row.collective, row.ranks, row.sent, row.count, span(row.group, sizes), gpu, eta, calls)


@one_layout_cached
def row_seconds(collective: str, ranks: Any, sent: Any, count: Any, group_span: Size, gpu: System, eta: Efficiency,
                calls: Any) -> Any:
    """``collective_seconds`` of a row of ``collective`` moving ``ranks``, ``sent``, ``count`` over ``group_span`` GPUs."""
    ranks = np.maximum(np.trunc(np.asarray(ranks, dtype=float)), 2)
    sent = np.asarray(sent, dtype=float)
    # a pipeline send goes from one rank to one rank: its own link, no ring over the domain's NICs
    bandwidth = gpu.link(group_span)[0] if collective == "send-recv" else ring_bandwidth(ranks, group_span, gpu)
    wire = sent / (eta.network * bandwidth)
    if collective == "all-to-all":
        remote = remote_share(ranks, group_span, gpu)
        split = np.maximum(remote * sent / gpu.nic_bandwidth, (1 - remote) * sent / gpu.nvlink_bandwidth)
        wire = np.where(group_span > gpu.nvlink_domain, split / eta.network, wire)
    return np.asarray(count, dtype=float) * (wire + calls * call_latency(collective, ranks, group_span, gpu))


def ring_exposed(forward: Any, backward: Any, lay: Layout, compute: dict[str, Any], on: bool) -> Any:
    """What context parallel's ring leaves exposed of one micro-batch: ``forward`` and ``backward`` seconds of transfers.

    Transformer Engine's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention/dot_product_attention/
    context_parallel.py) runs c attention steps per layer and pass, of equal work (the causal split into 2c
    chunks). Forward: before step i it waits for step i's K/V and launches the transfer of step i + 1's, so the
    c - 1 transfers run beside c - 1 of the c steps and the last step's attention hides nothing: the forward's
    K/V hide behind (c - 1)/c of the forward's attention (a recomputed forward's behind its rerun, Megatron's
    _checkpointed_attention_forward). Backward: each of the c steps launches one transfer at its start (step 0
    K/V, the middle steps K/V with the dK/dV accumulated so far, the last step dK/dV) and waits for it at its
    end, so the backward's transfers hide behind all of the backward's attention. Each pass's transfers are
    set against its own attention, not pooled over both. Off (``on`` False): every transfer exposed.
    """
    steps = np.asarray(lay.c, dtype=float)
    share = np.where(steps > 1, (steps - 1) / np.maximum(steps, 1), 0.0) if on else 0.0
    attention_backward = compute["attention_backward"]
    forward_passes = 1 if lay.recompute == "none" else 2
    return (exposed(forward, share * forward_passes * (compute["attention"] - attention_backward))
            + exposed(backward, attention_backward if on else 0.0))


def held_layers(work: Workload, lay: Layout) -> Any:
    """Transformer layers on the most loaded pipeline rank (derive.accounts.compute_time.stage_loads)."""
    most: Any = 0
    for layers, _, there in stage_loads(work.layers, lay):
        most = np.where(there, np.maximum(most, layers), most)
    return most


def ep_overlap_window(lay: Layout, gpu: System, compute: dict[str, Any], rules: frozenset[str]) -> Any:
    """Seconds of compute an expert-parallel all-to-all of one micro-batch may hide behind (0 when no rule applies).

    Where it is not 0, ``ep_paired_seconds`` decides what stays exposed: each all-to-all hides only behind the
    part of the other micro-batch's computation Megatron's schedule pairs it with.

    Under ``ep-a2a-overlap`` (or ``ep-a2a-overlap-across-nodes`` where the EP group leaves the NVLink
    domain, with p = 1 or v > 1 and no full recompute, Megatron's conditions) the dispatch and combine
    of one micro-batch run beside the other micro-batch's forward or backward: a whole micro-batch's
    GEMMs and element-wise work (``derive.accounts.schedule.OVERLAP_RULES``).
    """
    work = sum(compute[kind] for kind in ("linear", "expert", "attention", "head", "recompute", "memory_bound"))
    across = (span("ep", {"etp": lay.etp, "ep": lay.e}) > gpu.nvlink_domain) & (
        (np.asarray(lay.p) == 1) | (np.asarray(lay.v) > 1)) & (lay.recompute != "full")
    on = ("ep-a2a-overlap" in rules) | (("ep-a2a-overlap-across-nodes" in rules) & across)
    return np.where(on, work, 0.0)


#: Streaming multiprocessors the token dispatcher's kernels hold while they run beside compute: DeepEP's, 20
#: (Megatron core_v0.15.0 transformer_config.py, ``moe_deepep_num_sms: int = 20``; DeepSeek-V3, Liu et al. 2024,
#: section 3.2.2: "only 20 SMs are sufficient to fully utilize the bandwidths of IB and NVLink"), taken for every
#: dispatcher (a stated assumption: NCCL's all-to-all holds one SM per channel, a count not sourced here).
DISPATCHER_SMS = 20


def ep_paired_seconds(a2a: dict[tuple[str, str], Any], work: Workload, compute: dict[str, Any], sms: int) -> Any:
    """Exposed seconds per MoE layer per micro-batch of the four all-to-alls under Megatron's EP overlap.

    Megatron's combined 1F1B runs one MoE layer's forward (micro-batch i + 1) beside another's backward
    (micro-batch i) on a compute and a communication stream, issued in the order of
    ``TransformerLayerSchedulePlan.run`` (megatron/core/models/common/model_chunk_schedule_plan.py)::

        comm stream:     combine_bwd       | dispatch_fwd, dispatch_bwd       | combine_fwd
        compute stream:  pre_dispatch_fwd  | mlp_bwd, mlp_bwd_dw, mlp_fwd     | pre_dispatch_bwd

    Each node waits for the event its micro-batch's previous node recorded and for its own stream
    (``ScheduleNode.stream_acquire_context``, megatron/core/pipeline_parallel/utils.py: one event per
    micro-batch); the experts' weight gradient (``backward_dw``, megatron/core/models/common/utils.py)
    runs on the compute stream without that event, as the recipes' EP overlap sets
    ``delay_wgrad_compute`` (Megatron-Bridge scripts/performance/utils/overrides.py,
    ``_set_moe_a2a_overlap_overrides``). Working the starts through, one layer pair takes

        max(A_f, C_b) + max(max(D_f, M_d) + D_b, max(D_f, M_d + M_w) + M_f) + max(C_f, A_b)

    ``a2a`` holds D (dispatch) and C (combine) per (step, pass) for one layer and micro-batch; A is the
    stage's average layer's attention side (its linear and score GEMMs, the router, a selective
    recompute's re-run), M one MoE layer's expert GEMMs (the stage's expert seconds over its MoE layers,
    L_E / L of its layers: M_d the data gradient, M_w the weight gradient, M_f the forward), each pass
    from ``compute_per_micro_batch``; the element-wise seconds are spread over them in proportion to
    their GEMM seconds (stated assumption: the saved-tensor traffic is not split by block).

    While an all-to-all runs, the dispatcher holds ``DISPATCHER_SMS`` of the GPU's ``sms``: computation
    beside a transfer of C seconds runs on the rest, so a pair of C and W seconds of computation takes
    max(C, W + C x DISPATCHER_SMS / sms) (W's progress during C is C (sms - DISPATCHER_SMS) / sms); the
    experts' part is at least their computation plus (D_f + D_b) x DISPATCHER_SMS / sms. Returns the
    pair's time beyond its computation.
    """
    layers = np.maximum(compute["layers"], 1)
    moe = np.maximum(layers * work.moe_layers / max(work.layers, 1), 1e-12)
    side = compute["linear"] + compute["attention"]
    side_backward = compute["backward"] - compute["backward expert"] - compute["backward head"]
    element = 1 + compute["memory_bound"] / np.maximum(side + compute["expert"], 1e-300)
    attention_b = (side_backward + compute["recompute"]) / layers * element
    attention_f = (side - side_backward) / layers * element
    mlp_w = compute["wgrad expert"] / moe * element
    mlp_d = compute["backward expert"] / moe * element - mlp_w
    mlp_f = (compute["expert"] - compute["backward expert"]) / moe * element
    dispatch_f, dispatch_b = a2a[("dispatch", "forward")], a2a[("dispatch", "backward")]
    combine_f, combine_b = a2a[("combine", "forward")], a2a[("combine", "backward")]
    held = DISPATCHER_SMS / sms  # the share of the SMs computation loses while a transfer runs beside it
    experts = np.maximum(np.maximum(np.maximum(dispatch_f, mlp_d) + dispatch_b,
                                    np.maximum(dispatch_f, mlp_d + mlp_w) + mlp_f),
                         mlp_d + mlp_w + mlp_f + (dispatch_f + dispatch_b) * held)
    paired = (np.maximum(combine_b, attention_f + combine_b * held) + experts
              + np.maximum(combine_f, attention_b + combine_f * held))
    return paired - (attention_f + attention_b + mlp_f + mlp_d + mlp_w)


def communication(rows: Iterable[Any], work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                  compute: dict[str, Any], rules: frozenset[str]) -> dict[str, Any]:
    """Exposed seconds per group: per micro-batch for tp, cp, ep; per step for dp and pp."""
    sizes = {"tp": lay.t, "cp": lay.c, "ep": lay.e, "etp": lay.etp, "dp": lay.d, "pp": lay.p}
    total = {group: 0.0 for group in ("tp", "tp-async", "cp-forward", "cp-backward", "ep", "pp")}
    data: dict[tuple[str, str], list[Any]] = {}  # (reduce | gather, pass) -> [seconds, most per step]
    one = {"pp": 0.0}
    # a data-parallel row's bytes go in buckets of its own parameters (ZeRO 0-1; the expert buffers take the
    # dense ones' bucket size, set from d c: megatron/core/distributed/distributed_data_parallel.py) or per-layer
    # FSDP units (ZeRO 2-3), each bucket or unit a call
    layers = held_layers(work, lay)
    calls = {group: data_parallel_calls(held(work, lay), lay.d * lay.c, lay.zero, layers)
             for group, held in (("dp", local_dense_parameters), ("edp", local_expert_parameters))}
    # the EP all-to-alls per (dispatch | combine, forward | backward), and the MoE layers they run in a step
    a2a: dict[tuple[str, str], Any] = {(step, pass_): 0.0 for step in ("dispatch", "combine")
                                       for pass_ in ("forward", "backward")}
    moe_layers: Any = 0.0
    for row in rows:
        seconds = collective_seconds(row, sizes, gpu, eta, calls.get(row.group, 1))
        group = "dp" if row.group == "edp" else row.group
        if group == "ep" and row.collective == "all-to-all":
            key = ("dispatch" if ".dispatch." in row.name else "combine", "backward" if row.pass_ == "backward" else "forward")
            a2a[key] = a2a[key] + seconds
            moe_layers = np.maximum(moe_layers, np.asarray(row.count, dtype=float))
        if group == "dp":
            kind = "gather" if row.collective == "all-gather" else "reduce"
            bucket = data.setdefault((kind, "backward" if row.pass_ == "backward" else "forward"), [0.0, 0.0])
            bucket[0] += seconds
            bucket[1] = np.maximum(bucket[1], np.asarray(row.count, dtype=float))
            continue
        if group == "tp" and row.overlap != "none":
            group = "tp-async"
        if group == "cp":  # a recomputed forward's ring runs beside the recomputed attention: forward-like
            group = "cp-backward" if row.pass_ == "backward" else "cp-forward"
        if group == "pp":
            count = np.asarray(row.count, dtype=float)
            one["pp"] = np.maximum(one["pp"], np.where(count > 0, seconds / np.where(count > 0, count, 1), 0.0))
        total[group] += seconds
    m = lay.m
    linear = compute["linear"] + compute["expert"]
    hidden = exposed(total["tp-async"] / m, linear / 3 if "tp-async-backward" in rules else 0.0)
    per_micro = {
        "tp": hidden + exposed(total["tp"] / m, linear if "tp-comm-overlap" in rules else 0.0),
        "cp": ring_exposed(total["cp-forward"] / m, total["cp-backward"] / m, lay, compute,
                           "cp-ring-with-attention" in rules),
        "ep": total["ep"] / m,
    }
    if work.moe:
        # under an EP overlap rule the all-to-alls hide behind the computation Megatron pairs them with
        held = np.where(moe_layers > 0, moe_layers, 1.0)
        per_layer = {key: seconds / held for key, seconds in a2a.items()}
        paired = ep_paired_seconds(per_layer, work, compute, gpu.sms) * moe_layers / m
        on = ep_overlap_window(lay, gpu, compute, rules) > 0
        per_micro["ep"] = np.where(on, paired, per_micro["ep"])
    # the GEMMs' own backward and forward seconds (compute_time's per-pass rooflines: a memory-bound
    # weight gradient or a flash kernel's backward is not twice its forward)
    gemms = compute["linear"] + compute["expert"] + compute["attention"] + compute["head"]
    windows = {"backward": compute["backward"], "forward": gemms - compute["backward"]}
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


