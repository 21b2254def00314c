"""The communication ledger's rows, built from the parameter, saved-tensor and state tables.

One builder (derive.accounts.comm_row) serves the numeric ledger (sizes as integers) and the
symbolic one (t, p, d, ...); :mod:`derive.accounts.comm` calls it. Here: the model-parallel rows
(tensor, vocabulary, pipeline, context, expert parallel); the data-parallel ones are
derive.accounts.comm_data_parallel's. Sources name the Megatron-LM / Transformer Engine / PyTorch
function that issues each collective, or the paper section that counts it.
"""
from __future__ import annotations

from functools import lru_cache

from derive.accounts.comm_data_parallel import data_parallel, grad_bytes
from derive.accounts.comm_row import MEGATRON_LINEAR, MEGATRON_TP, MOE_DISPATCH, TE_CP, Collective, LayoutTerms, RowBuilder
from derive.accounts.fp8_comm import routed_payload
from derive.accounts.workload import ring_tensors
from derive.architectures.decoder import Layout, require_layout
from derive.architectures.operations.edges import output_saved
from derive.architectures.operations.norm import layer_input
from derive.architectures.operations.rows import STATISTICS
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.parallelism import Parallelism
from derive.symbols import k_E
from derive.tensors import Ledger, Tensor


@lru_cache(maxsize=64)
def _tables(architecture: Layout) -> tuple[Ledger, Ledger | None, Ledger]:
    """(one dense layer, one MoE layer or None, the edges) of a family or a config's layout; once per architecture."""
    require_layout(architecture, "architecture")
    moe = layer_parameters(architecture, True) if architecture.moe is not None else None
    return layer_parameters(architecture), moe, edge_parameters(architecture)


def rows(architecture: Layout, terms: LayoutTerms, layout: Parallelism,
         whole_model: bool, seen: dict[tuple, dict] | None = None) -> list[Collective]:
    """Every collective row of the most loaded rank, in the order of a step (``whole_model``: p = 1, every edge).

    ``seen``: a part's rows kept from an earlier call with the same architecture and terms, reused
    when the layout agrees on every attribute the part read then (the page's many flag values).
    """
    build = RowBuilder(terms, layout)
    dense_layer, moe_layer, edges = _tables(architecture)
    shared = moe_layer is None or len(moe_layer.where("shared_expert")) > 0
    parts = [(_tensor_parallel, (shared, whole_model)), (_pipeline, (edges,)), (_context_parallel, (architecture,))]
    if moe_layer is not None:
        parts.append((_expert_parallel, ()))
    parts.append((data_parallel, (dense_layer, moe_layer, edges, whole_model)))
    for part, args in parts:
        if seen is None:
            part(build, *args)
        else:
            _part_once(seen, (part.__name__, architecture, terms, whole_model), part, build, args)
    return build.found


class _Watched:
    """A layout that notes each attribute read from it, with its value."""

    def __init__(self, layout: Parallelism) -> None:
        self._layout, self.reads = layout, {}

    def __getattr__(self, name: str) -> object:
        value = getattr(self._layout, name)
        self.reads[name] = value
        return value


def _part_once(seen: dict[tuple, dict], key: tuple, part, build: RowBuilder, args: tuple) -> None:
    """``part``'s rows: kept ones where the layout agrees on all the part read (a part reads nothing else), else built.

    ``seen[key]``: the attribute names a build read -> their values -> the rows (looked up, not scanned).
    """
    kept = seen.setdefault(key, {})
    for names, by_values in kept.items():
        found = by_values.get(tuple(getattr(build.layout, name) for name in names))
        if found is not None:
            build.found.extend(found)
            return
    watched = _Watched(build.layout)
    own = RowBuilder(build.terms, watched)
    part(own, *args)
    kept.setdefault(tuple(watched.reads), {})[tuple(watched.reads.values())] = own.found
    build.found.extend(own.found)


def _activation(terms: LayoutTerms) -> Tensor:
    """The layer input [s, b, h] on one context-parallel rank: s / c tokens."""
    return layer_input().divided(terms.c)


def _forward_passes(layout: Parallelism) -> tuple[str, ...]:
    """Forward, and again in the recompute pass under full recompute (Korthikanti et al. 2022, section 5)."""
    return ("forward", "recompute") if layout.recompute == "full" else ("forward",)


def _tensor_parallel(build: RowBuilder, shared_expert: bool, whole_model: bool) -> None:
    """Megatron's f/g all-reduces, or SP's all-gather / reduce-scatter pairs; vocabulary-parallel edges."""
    terms, layout = build.terms, build.layout
    if not build.terms.active(terms.t):
        return
    act = _activation(terms)
    tensor = f"{act.name} [s/c, b, h]"
    # attention in every layer; the dense MLP (and an MoE layer's shared expert) in its layers; the
    # routed experts' tokens move in _expert_parallel
    counts = {"attention": terms.m * terms.layers,
              "mlp": terms.m * (terms.layers if shared_expert else terms.dense_layers)}
    blocks = [block for block, count in counts.items() if count != 0]
    for forward in _forward_passes(layout):
        for block in blocks:
            per_step = counts[block]
            if layout.sequence_parallel:
                build.add(f"tp.{block}.all-gather", tensor, "all-gather", "tp", terms.t, act.bytes,
                          per_step, forward, "none",
                          f"{MEGATRON_TP} gather_from_sequence_parallel_region (Korthikanti et al. 2022, 4.2.2: g)")
                build.add(f"tp.{block}.reduce-scatter", tensor, "reduce-scatter", "tp", terms.t, act.bytes,
                          per_step, forward, "none",
                          f"{MEGATRON_TP} reduce_scatter_to_sequence_parallel_region (4.2.2: g-bar)")
            else:
                build.add(f"tp.{block}.all-reduce", tensor, "all-reduce", "tp", terms.t, act.bytes,
                          per_step, forward, "none",
                          f"{MEGATRON_TP} reduce_from_tensor_model_parallel_region (Shoeybi et al. 2019, g)")
    for block in blocks:
        per_step = counts[block]
        if layout.sequence_parallel:
            build.add(f"tp.{block}.backward.reduce-scatter", tensor, "reduce-scatter", "tp", terms.t,
                      act.bytes, per_step, "backward", "backward",
                      f"{MEGATRON_TP} _GatherFromSequenceParallelRegion.backward")
            build.add(f"tp.{block}.backward.all-gather", tensor, "all-gather", "tp", terms.t, act.bytes,
                      per_step, "backward", "none",
                      f"{MEGATRON_TP} _ReduceScatterToSequenceParallelRegion.backward")
            if not layout.sp_regather:
                continue
            build.add(f"tp.{block}.backward.regather", tensor, "all-gather", "tp", terms.t, act.bytes,
                      per_step, "backward", "compute",
                      "Korthikanti et al. 2022, 4.2.2 ('an extra all-gather in the backward pass'); "
                      f"{MEGATRON_LINEAR} LinearWithGradAccumulationAndAsyncCommunication.backward: "
                      "Megatron saves the sequence shard and re-gathers it for the weight gradient "
                      "(Parallelism.sp_regather; PyTorch's SequenceParallel keeps the gathered input)")
        else:
            build.add(f"tp.{block}.backward.all-reduce", tensor, "all-reduce", "tp", terms.t, act.bytes,
                      per_step, "backward", "backward",
                      f"{MEGATRON_TP} copy_to_tensor_model_parallel_region backward (Shoeybi et al. 2019, f)")
    _vocabulary_parallel(build, tensor, act, whole_model)


def _vocabulary_parallel(build: RowBuilder, tensor: str, act: Tensor, whole_model: bool) -> None:
    """Embedding output reduced, head input gathered, cross entropy's three per-token all-reduces."""
    terms, layout = build.terms, build.layout
    micro = terms.m
    if whole_model:
        kind = "reduce-scatter" if layout.sequence_parallel else "all-reduce"
        for forward in _forward_passes(layout)[:1]:
            build.add(f"tp.embedding.{kind}", tensor, kind, "tp", terms.t, act.bytes, micro, forward, "none",
                      "megatron/core/tensor_parallel/layers.py VocabParallelEmbedding.forward")
        if layout.sequence_parallel:
            # the reduce-scatter's backward gathers the output gradient for the embedding's weight
            # gradient (validated against PyTorch's RowwiseParallel embedding, derive.validate comm-sp)
            build.add("tp.embedding.backward.all-gather", tensor, "all-gather", "tp", terms.t, act.bytes, micro,
                      "backward", "none", f"{MEGATRON_TP} _ReduceScatterToSequenceParallelRegion.backward")
    if layout.sequence_parallel:
        build.add("tp.head.all-gather", tensor, "all-gather", "tp", terms.t, act.bytes, micro, "forward",
                  "none", f"{MEGATRON_LINEAR} ColumnParallelLinear (output layer, sequence parallel)")
        build.add("tp.head.backward.reduce-scatter", tensor, "reduce-scatter", "tp", terms.t, act.bytes,
                  micro, "backward", "backward", f"{MEGATRON_LINEAR} ColumnParallelLinear backward")
    else:
        build.add("tp.head.backward.all-reduce", tensor, "all-reduce", "tp", terms.t, act.bytes, micro,
                  "backward", "backward", f"{MEGATRON_LINEAR} ColumnParallelLinear backward (f)")
    targets = output_saved()["targets"]
    statistic = Tensor("per-token logit max / predicted logit / sum of exp", targets.shape, STATISTICS)
    build.add("tp.loss.all-reduce", f"{statistic.name} [s/c, b] fp32", "all-reduce", "tp", terms.t,
              statistic.bytes / terms.c, 3 * micro, "forward", "none",
              "megatron/core/tensor_parallel/cross_entropy.py VocabParallelCrossEntropy "
              "(all-reduces of the max, the predicted logit and the sum of exponentials)")


def _pipeline(build: RowBuilder, edges: Ledger) -> None:
    """Stage-boundary sends: activations forward, their gradients backward, v times per micro-batch."""
    terms, layout = build.terms, build.layout
    if not terms.active(terms.p):
        return
    act = _activation(terms)
    split = layout.sequence_parallel or layout.scatter_gather
    payload = act.bytes / terms.t if split else act.bytes
    tensor = f"{act.name} [s/c, b, h]" + (" / t" if split else "")
    crossings = terms.m * terms.v
    source = "megatron/core/pipeline_parallel/p2p_communication.py; Narayanan et al. 2021, 3.2"
    if layout.scatter_gather and not layout.sequence_parallel:
        source += " and 4.1 (scatter/gather)"
    build.add("pp.forward.send", tensor, "send-recv", "pp", 2, payload, crossings, "forward", "compute", source)
    build.add("pp.backward.send", tensor, "send-recv", "pp", 2, payload, crossings, "backward", "compute", source)
    if layout.scatter_gather and not layout.sequence_parallel and terms.active(terms.t):
        build.add("pp.received.all-gather", f"{act.name} [s/c, b, h]", "all-gather", "tp", terms.t, act.bytes,
                  2 * crossings, "forward", "compute",
                  "Narayanan et al. 2021, 4.1: the received 1/t pieces all-gathered over NVLink")
    tied = edges.where("tied")
    if len(tied):
        grads = grad_bytes(Ledger(w.divided(terms.t) for w in tied), layout)
        build.add("pp.embedding-grads.all-reduce", "tied embedding gradient", "all-reduce", "pp", 2, grads,
                  1, "backward", "none",
                  "megatron/core/distributed/finalize_model_grads.py _allreduce_word_embedding_grads")


def _context_parallel(build: RowBuilder, architecture: Layout) -> None:
    """Ring attention's K/V passes (p2p) or Llama 3's K/V all-gather, forward and backward."""
    terms, layout = build.terms, build.layout
    if not terms.active(terms.c):
        return
    kv = ring_tensors(architecture)[1]
    chunk = kv.bytes() / (terms.c * terms.t)
    tensor = " and ".join(kv.names) + " [s/c, b, g/t, k]"
    per_step = terms.m * terms.layers
    # selective recompute re-runs core attention, and with it the K/V exchange
    # (megatron/core/transformer/attention.py _checkpointed_attention_forward)
    passes = ("forward", "recompute") if layout.recompute != "none" else ("forward",)
    if layout.cp_comm == "p2p":
        for forward in passes:
            build.add("cp.kv.send", tensor, "send-recv", "cp", terms.c, chunk, (terms.c - 1) * per_step, forward,
                      "attention", f"{TE_CP}: c - 1 ring steps (Liu et al. 2023, ring attention)")
        build.add("cp.backward.kv.send", tensor, "send-recv", "cp", terms.c, chunk, (terms.c - 1) * per_step,
                  "backward", "attention", f"{TE_CP} backward: K/V travel the ring again")
        build.add("cp.backward.dkv.send", f"gradients of {tensor}", "send-recv", "cp", terms.c, chunk,
                  (terms.c - 1) * per_step, "backward", "attention",
                  f"{TE_CP} backward: dK/dV accumulators travel with them")
        return
    for forward in passes:
        build.add("cp.kv.all-gather", tensor, "all-gather", "cp", terms.c, chunk * terms.c, per_step, forward,
                  "none", f"{TE_CP}; Dubey et al. 2024 (Llama 3), 3.3.2: K/V all-gathered, local queries")
    build.add("cp.backward.kv.all-gather", tensor, "all-gather", "cp", terms.c, chunk * terms.c, per_step,
              "backward", "none", f"{TE_CP} backward: K/V gathered again")
    build.add("cp.backward.dkv.reduce-scatter", f"gradients of {tensor}", "reduce-scatter", "cp", terms.c,
              chunk * terms.c, per_step, "backward", "none", f"{TE_CP} backward: dK/dV reduce-scattered")


def _expert_parallel(build: RowBuilder) -> None:
    """Dispatch and combine all-to-alls of the k_E routed copies; the expert-TP gather around the experts."""
    terms, layout = build.terms, build.layout
    # sequence parallel: s / (c t) tokens per rank; without it every tensor-parallel rank holds s / c
    tokens = _activation(terms).divided(terms.t) if layout.sequence_parallel else _activation(terms)
    routed = tokens.times(k_E if terms.capacity is None else k_E * terms.capacity)
    tensor = f"{tokens.name} x k_E routed copies [s b k_E / (c t), h]"
    per_step = terms.m * terms.moe_layers
    passes = [*(("dispatch", f) for f in _forward_passes(layout)), *(("combine", f) for f in _forward_passes(layout)),
              ("combine", "backward"), ("dispatch", "backward")]
    if terms.active(terms.e):
        for step, pass_ in passes:
            name = f"ep.{step}.all-to-all" if pass_ != "backward" else f"ep.{step}.backward.all-to-all"
            into_experts = (step == "dispatch") == (pass_ != "backward")
            build.add(name, tensor, "all-to-all", "ep", terms.e, routed_payload(routed, layout.precision, into_experts),
                      per_step, pass_, "none", f"{MOE_DISPATCH} token_permutation / token_unpermutation (uniform "
                      "routing); dtype: derive.recipes.dispatch_dtype / combine_dtype")
    if terms.active(terms.t_E):
        gathered = routed.bytes * terms.t_E
        for step, pass_ in passes:
            kind = "all-gather" if (step == "dispatch") == (pass_ != "backward") else "reduce-scatter"
            build.add(f"ep.{step}.{pass_}.etp.{kind}", tensor, kind, "tp", terms.t_E, gathered, per_step, pass_,
                      "none", f"{MOE_DISPATCH}: tokens gathered over the expert-TP group")
