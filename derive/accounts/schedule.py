"""The pipeline schedule and the overlap rules of a training step: what of each collective stays exposed.

Schedule (Narayanan et al. 2021, section 2.2; megatron/core/pipeline_parallel/
schedules.py): with m micro-batches over p stages of v chunks each, 1F1B
(v = 1) and interleaved 1F1B (v > 1) take m + (p - 1)/v times the slowest
stage's time for one micro-batch (forward + backward): the bubble is
(p - 1)/(v m) of the steady state, warm-up plus cool-down.

Rank order (Megatron's default order string "tp-cp-ep-dp-pp",
megatron/core/parallel_state.py initialize_model_parallel): tensor-parallel
ranks are neighbours, then context, data and pipeline; the expert layers' groups
on Megatron's expert grid (t_E, e, expert data, pipeline: ``span``). A group's ranks
span ``span(group)`` consecutive GPUs; a group inside one NVLink domain talks at
NVLink bandwidth, a larger one over the NICs of its ranks in each domain
(``derive.accounts.comm_time.ring_bandwidth``; a pipeline send over one NIC).

Overlap rules: each is named, documented and switchable (``OVERLAP_RULES``;
``DEFAULT_OVERLAP`` holds those Megatron turns on by default in its large-run
recipes: --overlap-grad-reduce, --overlap-param-gather, CP's ring in attention,
batched p2p with overlap).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from derive.inputs import choose

#: Megatron's rank order, innermost first (parallel_state.py, order="tp-cp-ep-dp-pp").
RANK_ORDER = ("tp", "cp", "ep", "dp", "pp")

#: Overlap rules by name -> what they hide (each collective row's group selects its rule).
OVERLAP_RULES: dict[str, str] = {
    "dp-reduce-with-backward": "gradient reduce-scatter / all-reduce runs bucket by bucket beside the "
                               "last micro-batch's backward; the last bucket stays exposed "
                               "(Megatron --overlap-grad-reduce, distributed_data_parallel.py)",
    "param-gather-with-forward": "the distributed optimizer's / FSDP's parameter all-gather runs beside "
                                 "the forward; the first bucket stays exposed (--overlap-param-gather)",
    "tp-comm-overlap": "tensor-parallel all-gather / reduce-scatter split into chunks and hidden "
                       "behind the linear GEMMs (Transformer Engine userbuffers, --tp-comm-overlap); "
                       "off by default: TP communication is exposed",
    "tp-async-backward": "the backward's tensor-parallel collectives Megatron launches asynchronously "
                         "(the input re-gathered for the weight gradient beside the data-gradient GEMM, "
                         "the gradient reduce-scatter beside the weight-gradient GEMM: "
                         "megatron/core/tensor_parallel/layers.py "
                         "LinearWithGradAccumulationAndAsyncCommunication.backward) hide behind one "
                         "GEMM pass; the ledger marks them with an overlap other than 'none'",
    "cp-ring-with-attention": "context parallel's K/V ring passes run beside the attention of the "
                              "previous block (Megatron / TE ring attention): the forward's transfers behind "
                              "(c - 1)/c of the forward's attention, the backward's behind the backward's "
                              "(derive.accounts.comm_time.ring_exposed)",
    "pp-send-with-compute": "pipeline sends of the steady state overlap the next micro-batch; only "
                            "the 2(p - 1) hops of warm-up and cool-down are exposed",
    "ep-a2a-overlap": "expert-parallel dispatch / combine hidden behind the other micro-batch's "
                      "independent computation, each all-to-all behind the part Megatron's layer schedule pairs "
                      "it with (derive.accounts.comm_time.ep_paired_seconds; DeepSeek-V3's DualPipe; "
                      "Megatron's --overlap-moe-expert-parallel-comm, 'Overlap EP A2A communications with "
                      "independent computations of different micro-batches in 1f1b phase': "
                      "megatron/core/model_parallel_config.py, pipeline_parallel/combined_1f1b.py); "
                      "off by default",
    "ep-a2a-overlap-across-nodes": "ep-a2a-overlap where the expert-parallel group spans the NIC (beyond one "
                                   "NVLink domain) and Megatron allows it (p = 1 or v > 1, no full "
                                   "recompute: transformer_config.py): NVIDIA's Megatron-Bridge recipes run "
                                   "EP across InfiniBand with moe_a2a_overlap=True (DeepSeek-V3 on 1024 "
                                   "H100 at EP 64, Qwen3-235B on 256 H100 at EP 32: scripts/performance/"
                                   "configs/*/..._workload_base_configs.py)",
}
DEFAULT_OVERLAP = frozenset({"dp-reduce-with-backward", "param-gather-with-forward", "tp-async-backward",
                             "cp-ring-with-attention", "pp-send-with-compute", "ep-a2a-overlap-across-nodes"})

#: Megatron DDP's bucket: max(40,000,000, 1,000,000 x dp) parameters, dp the data-parallel group with its
#: context-parallel ranks (megatron/training/training.py, the bucket size from dp_cp_group; the
#: same rule in megatron/core/distributed/distributed_data_parallel.py, bucket_size).
BUCKET_PARAMETERS, BUCKET_PER_DP_RANK = 40_000_000, 1_000_000


def overlap_rules(names: frozenset[str] | set[str] | tuple[str, ...] | None) -> frozenset[str]:
    """The rule names, each checked (ValueError naming ``overlap``); None: :data:`DEFAULT_OVERLAP`."""
    if names is None:
        return DEFAULT_OVERLAP
    return frozenset(choose("overlap", name, OVERLAP_RULES) for name in names)


def span(group: str, sizes: Mapping[str, int]) -> int:
    """Consecutive GPUs one ``group`` spans under :data:`RANK_ORDER` (edp spans like dp).

    The expert-parallel group spans t_E e GPUs (``sizes["etp"]``, Megatron's default t_E = t when absent):
    Megatron builds the expert ranks on a grid of their own, ``expert_decoder_rank_generator =
    RankGenerator(tp=expert_tensor_parallel_size, ep=expert_model_parallel_size, dp=expert_data_parallel_size,
    pp=..., cp=1)`` (megatron/core/parallel_state.py, initialize_model_parallel), so e expert ranks t_E apart
    fill t_E e consecutive GPUs whatever t and c the dense layers use.
    """
    group = "dp" if group == "edp" else choose("group", group, RANK_ORDER)
    if group == "ep":
        return sizes.get("etp", sizes.get("tp", 1)) * sizes.get("ep", 1)
    inner = 1
    for name in RANK_ORDER:
        if name == "ep":
            continue  # the dense grid has no EP (tp-cp-dp-pp); the expert grid is ``span("ep")``'s
        inner *= sizes.get(name, 1)
        if name == group:
            return inner
    return inner


def bubble_fraction(pipeline: int, virtual: int, micro_batches: int) -> float:
    """(p - 1)/(v m): idle share of the steady state in 1F1B / interleaved 1F1B (Narayanan et al. 2021, 2.2)."""
    return (pipeline - 1) / (virtual * micro_batches)


def pipeline_length(pipeline: int, virtual: int, micro_batches: int) -> float:
    """Micro-batch times of the slowest stage one step takes: m + (p - 1)/v."""
    return micro_batches + (pipeline - 1) / virtual


def bucket_parameters(data_parallel: int | np.ndarray) -> int | np.ndarray:
    """Parameters in one DDP bucket: max(BUCKET_PARAMETERS, BUCKET_PER_DP_RANK x dp); columns too."""
    return np.maximum(BUCKET_PARAMETERS, BUCKET_PER_DP_RANK * data_parallel)


def last_bucket_share(local_parameters: float | np.ndarray, data_parallel: int | np.ndarray) -> float | np.ndarray:
    """Share of a rank's gradient bytes in the last DDP bucket (1 when one bucket holds them all); columns too."""
    bucket = bucket_parameters(data_parallel)
    held = local_parameters > 0
    return np.where(held, np.minimum(1.0, bucket / np.where(held, local_parameters, 1)), 1.0)


def data_parallel_calls(local_parameters: float | np.ndarray, data_parallel: int | np.ndarray, zero: int,
                        layers: float | np.ndarray) -> float | np.ndarray:
    """NCCL calls a data-parallel collective of a rank's gradients or parameters is issued in, each time it runs.

    ZeRO 0 and 1 (Megatron's DDP and distributed optimizer): one call per bucket of
    max(40,000,000, 1,000,000 x dp) parameters (``BUCKET_PARAMETERS``; the last one partly full).
    ZeRO 2 and 3 (Megatron-FSDP's optim_grads and optim_grads_params, FSDP2): one call per FSDP unit, a
    transformer layer (megatron/core/distributed/fsdp/mcore_fsdp_adapter.py: ``fsdp_unit_modules`` defaults
    to TransformerLayer, "FSDP unit modules control the granularity of FSDP communications"; FSDP2's
    fully_shard per block), ``layers`` of them on the rank. Numbers or numpy columns.
    """
    if zero >= 2:
        return np.maximum(layers, 1)
    return np.maximum(np.ceil(local_parameters / bucket_parameters(data_parallel)), 1)


def exposed(seconds: float | np.ndarray, window: float | np.ndarray,
            floor: float | np.ndarray = 0.0) -> float | np.ndarray:
    """What a collective of ``seconds`` leaves exposed beside ``window`` seconds of compute, at least ``floor``.

    Numbers or numpy columns (one per layout).
    """
    return np.where(seconds > 0, np.maximum(np.maximum(floor, seconds - window), 0.0), 0.0)
