"""Communication: the ledger's rows (derive.accounts.comm) against the published volumes.

The papers count elements (Narayanan's bsh, ZeRO's Psi); the ledger counts bytes, so the
derived side divides by the element size of the tensor moved (bf16 activations and gradients).
Every volume is what one rank sends under ring collectives (the papers' 2(n-1)/n, (n-1)/n).
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.comm import symbolic_collectives
from derive.architectures.decoder import LLAMA, Layout
from derive.architectures.moe import MoE
from derive.architectures.operations.norm import layer_input
from derive.architectures.tables import parameter_count
from derive.conventions.fp8 import dispatch_bytes_per_element, gather_ratio
from derive.expansion import expand
from derive.identities import identity
from derive.parallelism import Parallelism
from derive.symbols import L, N, a, b, c, d, e, f, g, h, k_E, m, p, s, t, v

TOPIC = "communication"
ZERO = "Rajbhandari et al. 2020 (ZeRO), section 7"
NARAYANAN = "Narayanan et al. 2021, section 3.2"
KORTHIKANTI = "Korthikanti et al. 2022, section 4.2.2"
RING = "ring collectives (NCCL): all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n"
#: Bytes of one activation element (the layer input's dtype).
ELEMENT = layer_input().element_bytes
#: One rank, no context parallelism, p = 1 or a middle stage.
ONE_RANK = {c: 1}


@lru_cache(maxsize=None)
def _rows(architecture: Layout = LLAMA, whole_model: bool = False, moe: bool = False, **flags) -> tuple:
    """The symbolic ledger with ``flags`` (Parallelism's fields) set; frozen rows, built once per set of flags."""
    return tuple(symbolic_collectives(architecture, Parallelism(**flags), moe=moe, whole_model=whole_model))


def _sent(found, prefix: str, exclude: str = "\0", per_occurrence: bool = True) -> sp.Expr:
    """Bytes one rank sends through the rows whose name starts with ``prefix`` (per occurrence, or per step)."""
    return expand(sp.Add(*(row.sent if per_occurrence else row.sent * row.count for row in found
                              if row.name.startswith(prefix) and exclude not in row.name)))


def _layer_rows(found, exclude: str = "\0") -> sp.Expr:
    """Tensor-parallel bytes of one layer and one micro-batch: the attention and MLP blocks' rows."""
    return _sent(found, "tp.attention", exclude) + _sent(found, "tp.mlp", exclude)


def _quotient(numerator: sp.Expr, denominator: sp.Expr) -> sp.Expr:
    """``sp.cancel(numerator / denominator)``, from SymPy's cancel of the pair: the same reduced form, without factor_terms on the quotient first."""
    content, top, bottom = sp.cancel((numerator, denominator))
    return content * (top / bottom)


@lru_cache(maxsize=None)
def _dp_step(**flags) -> sp.Expr:
    """Data-parallel bytes one rank sends in one step, t = p = 1, one micro-batch, in parameters' elements."""
    found = _rows(whole_model=True, **flags)
    return expand(sp.Add(*(row.sent * row.count for row in found if row.group == "dp")))


LLAMA_N = {N: parameter_count(LLAMA), t: 1, p: 1, c: 1, m: 1}


@identity("DP ring all-reduce per rank = 2(d-1)/d x gradient bytes (bf16: 2N)", topic=TOPIC,
          claim=2 * (d - 1) / d * 2 * N, where=LLAMA_N,
          source=f"{ZERO}.1; Narayanan et al. 2021, section 3.3.1 ((d-1)/d of a ring)",
          assumptions=("bf16 gradients", "t = p = 1: the rank holds all N parameters", RING))
def dp_ring_all_reduce() -> sp.Expr:
    return _dp_step(precision="bf16")


@identity("DP with fp32 main gradients (18 B/param) doubles the all-reduce: 2(d-1)/d x 2N departs",
          topic=TOPIC, claim=2 * (d - 1) / d * 2 * N, where=LLAMA_N, holds=False,
          source="the article, section 3.3; megatron/core/distributed/param_and_grad_buffer.py "
                 "(the fp32 main_grad buffer is what is reduced)",
          assumptions=("bf16-fp32grad: 4-byte gradients", "t = p = 1", RING))
def dp_fp32_grads() -> sp.Expr:
    return _dp_step(precision="bf16-fp32grad")


@identity("DP per-rank volume does not grow with d: limit 2 x gradient bytes", topic=TOPIC,
          claim=2 * 2 * N, where={N: parameter_count(LLAMA)},
          source=f"{ZERO}.1 (2 Psi per step, whatever N_d); the article (8K -> 16K GPUs)",
          assumptions=("bf16 gradients", "t = p = 1", RING, "d -> infinity"))
def dp_volume_limit() -> sp.Expr:
    return sp.limit(_dp_step(precision="bf16").xreplace({t: 1, p: 1, c: 1, m: 1}), d, sp.oo)


@identity("ZeRO-2 (reduce-scatter + all-gather) = DP all-reduce: 2 Psi", topic=TOPIC,
          claim=sp.Integer(1), where=LLAMA_N, source=f"{ZERO}.2.1",
          assumptions=("bf16 parameters and gradients", "one micro-batch", RING))
def zero2_equals_dp() -> sp.Expr:
    return _quotient(_dp_step(zero=2), _dp_step(zero=0))


@identity("ZeRO-3 = 1.5 x ZeRO-2 (3 Psi vs 2 Psi)", topic=TOPIC, claim=sp.Rational(3, 2),
          where=LLAMA_N, source=f"{ZERO}.2.2",
          assumptions=("bf16 parameters and gradients", "one micro-batch (m = 1)",
                       "parameters gathered again for backward (reshard after forward)", RING))
def zero3_vs_zero2() -> sp.Expr:
    return _quotient(_dp_step(zero=3), _dp_step(zero=2))


@identity("ZeRO-3 over m micro-batches (FSDP2 gathers per micro-batch): 1.5 x ZeRO-2 departs", topic=TOPIC,
          claim=sp.Rational(3, 2), where={**LLAMA_N, m: m}, holds=False,
          source="torch/distributed/fsdp/_fully_shard (unshard in every micro-batch's forward and "
                 "backward) against megatron/core/distributed/param_and_grad_buffer.py (gradients "
                 "reduced once per step)",
          assumptions=("bf16", "m micro-batches per step", RING))
def zero3_micro_batches() -> sp.Expr:
    return _quotient(_dp_step(zero=3), _dp_step(zero=2))


@identity("ZeRO-3 without resharding after forward = ZeRO-2 (FSDP2 reshard_after_forward=False)",
          topic=TOPIC, claim=sp.Integer(1), where=LLAMA_N,
          source="torch/distributed/fsdp/_fully_shard/_fully_shard.py fully_shard(reshard_after_forward); "
                 "Dubey et al. 2024, 3.3.2 (Llama 3 keeps the parameters gathered)",
          assumptions=("bf16", "one micro-batch", RING))
def zero3_no_reshard() -> sp.Expr:
    return _quotient(_dp_step(zero=3, reshard_after_forward=False), _dp_step(zero=2))


@identity("ZeRO-3 with fp32 gradient reduction: 3 Psi / 2 Psi departs (4/3)", topic=TOPIC,
          claim=sp.Rational(3, 2), where=LLAMA_N, holds=False, source=f"{ZERO}.2.2",
          assumptions=("bf16 parameters, fp32 gradients reduced", "one micro-batch", RING))
def zero3_fp32_grads() -> sp.Expr:
    return _quotient(_dp_step(zero=3, precision="bf16-fp32grad"), _dp_step(zero=2, precision="bf16-fp32grad"))


@identity("Tensor parallel: 8bsh(t-1)/t elements per layer per micro-batch", topic=TOPIC,
          claim=8 * b * s * h * (t - 1) / t, where=ONE_RANK, source=NARAYANAN,
          assumptions=("two all-reduces of bsh forward, two backward (f and g)", RING))
def tensor_parallel_layer() -> sp.Expr:
    return _layer_rows(_rows(tp=2)) / ELEMENT


@identity("Sequence parallel moves the same bytes as tensor parallel's all-reduces", topic=TOPIC,
          claim=8 * b * s * h * (t - 1) / t, where=ONE_RANK, source=KORTHIKANTI,
          assumptions=("four all-gathers and four reduce-scatters per layer, forward and backward",
                       "the gathered input kept for backward (sp_regather=False, PyTorch's convention)", RING))
def sequence_parallel_layer() -> sp.Expr:
    return _layer_rows(_rows(tp=2, sequence_parallel=True, sp_regather=False)) / ELEMENT


@identity("Sequence parallel with the backward re-gather (Megatron): 8bsh(t-1)/t departs", topic=TOPIC,
          claim=8 * b * s * h * (t - 1) / t, where=ONE_RANK, holds=False,
          source=f"{KORTHIKANTI} (the extra all-gather of the stored Y_i^s); megatron/core/tensor_parallel/"
                 "layers.py LinearWithGradAccumulationAndAsyncCommunication.backward",
          assumptions=("two more all-gathers per layer in backward (QKV and fc1 inputs)", RING))
def sequence_parallel_regather() -> sp.Expr:
    return _layer_rows(_rows(tp=2, sequence_parallel=True)) / ELEMENT


@identity("Full recompute: 12bsh(t-1)/t elements per layer per micro-batch (six all-reduces)", topic=TOPIC,
          claim=12 * b * s * h * (t - 1) / t, where=ONE_RANK,
          source="Rajbhandari et al. 2020 (ZeRO), section 8 (12 x seq x hidden per block with "
                 "activation checkpointing, an all-reduce being 2 x the message)",
          assumptions=("two all-reduces forward, two in the recomputed forward, two backward", RING))
def full_recompute_layer() -> sp.Expr:
    return _layer_rows(_rows(tp=2, recompute="full")) / ELEMENT


@identity("Pipeline: bsh elements per micro-batch between consecutive stages", topic=TOPIC,
          claim=b * s * h, where=ONE_RANK, source=NARAYANAN,
          assumptions=("one boundary, one direction", "no scatter/gather"))
def pipeline_boundary() -> sp.Expr:
    return _sent(_rows(pp=2), "pp.forward.send") / ELEMENT


@identity("Pipeline with scatter/gather: bsh/t per micro-batch between consecutive stages", topic=TOPIC,
          claim=b * s * h / t, where=ONE_RANK, source="Narayanan et al. 2021, section 4.1",
          assumptions=("the stage output split over t before the send, all-gathered after",))
def pipeline_scatter_gather() -> sp.Expr:
    return _sent(_rows(pp=2, tp=2, scatter_gather=True), "pp.forward.send") / ELEMENT


@identity("Interleaved pipeline: v times the boundary crossings per micro-batch", topic=TOPIC,
          claim=v * 2 * b * s * h, where=ONE_RANK,
          source="Narayanan et al. 2021, section 2.2 (interleaved schedule: communication scales with v)",
          assumptions=("a rank with both neighbours", "bf16 activations: 2 bytes per element"))
def pipeline_interleaved() -> sp.Expr:
    found = _rows(pp=2, vp=2, global_batch=2)
    return _sent(found, "pp.forward.send", per_occurrence=False) / m


#: K and V of one layer on one of c t ranks (g heads of width h/a, bf16): the forward's c - 1 chunks.
KV_FORWARD = 2 * 2 * s * b * g * (h / a) * (c - 1) / (c * t)


@identity("Ring attention forward: c - 1 K/V chunks per layer per micro-batch", topic=TOPIC,
          claim=KV_FORWARD, source="Liu et al. 2023 (ring attention); transformer_engine AttnFuncWithCPAndKVP2P",
          assumptions=("bf16 K and V, g kv heads split over t", "causal load balancing moves no bytes"))
def cp_ring_forward() -> sp.Expr:
    found = _rows(cp=2)
    return _sent(found, "cp.kv.send", per_occurrence=False) / (m * L / p)


@identity("Llama 3's K/V all-gather moves the ring's forward bytes", topic=TOPIC, claim=KV_FORWARD,
          source="Dubey et al. 2024, section 3.3.2 (all-gather K and V, then attention for the local Q chunk)",
          assumptions=("ring all-gather (c-1)/c of the gathered K/V", "exposed, not overlapped"))
def cp_all_gather_forward() -> sp.Expr:
    found = _rows(cp=2, cp_comm="all_gather")
    return _sent(found, "cp.kv.all-gather", per_occurrence=False) / (m * L / p)


MOE_LAYOUT = Layout(moe=MoE())


@identity("Expert dispatch: (e-1)/e of the k_E routed copies leave the rank", topic=TOPIC,
          claim=(e - 1) / e * 2 * s * b * k_E * h / (c * t),
          source="megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher; "
                 "Lepikhin et al. 2020 (GShard) dispatch/combine all-to-alls",
          assumptions=("uniform routing", "dropless (no capacity factor)", "bf16 tokens",
                       "sequence parallel: s b / (c t) tokens per rank"))
def ep_dispatch() -> sp.Expr:
    found = _rows(MOE_LAYOUT, moe=True, ep=2, dp=2, sequence_parallel=True)
    return _sent(found, "ep.dispatch.all-to-all")


MEGATRON_FP8_GATHER = ("Megatron --fp8-param-gather (megatron/training/arguments.py; "
                       "megatron/core/distributed/param_and_grad_buffer.py gathers the FP8 parameter data)")
#: One Llama layer's quantised matrices on a tensor-parallel rank: W_q, W_o (h x h), W_k, W_v (h x g h / a),
#: gate, up, down (h x f) (the layer matrices of TE's Linear modules).
LLAMA_MATRICES = (2 * h**2 + 2 * g * h**2 / a + 3 * h * f) / t
#: Seven quantised matrices per Llama layer.
LLAMA_LAYER_TENSORS = 7


def _gather_saving(precision: str) -> sp.Expr:
    """bf16 parameter all-gather minus the --fp8-param-gather one (ZeRO-1, per occurrence)."""
    plain = _rows(zero=1, dp=2, precision=precision)
    fp8 = _rows(zero=1, dp=2, precision=precision, fp8_param_gather=True)
    return expand(_sent(plain, "dp.params.all-gather") - _sent(fp8, "dp.params.all-gather"))


@identity("FP8 parameter gather (per-tensor): saves (cd-1)/cd [h(2h + 2gh/a + 3f)/t - 4 x 7] L/p bytes",
          topic=TOPIC,  # gather_ratio: 1/2 per tensor, 33/64 MXFP8 (derive.identities.fp8)
          claim=(c * d - 1) / (c * d) * L / p
          * (2 * (1 - gather_ratio("fp8-current")) * LLAMA_MATRICES - 4 * LLAMA_LAYER_TENSORS),
          source=MEGATRON_FP8_GATHER + "; TE Float8CurrentScaling",
          assumptions=("the layer matrices gathered at 1 B instead of 2 B, one fp32 scale_inv per matrix with them",
                       "norms, embedding and head stay bf16", RING))
def fp8_gather_per_tensor() -> sp.Expr:
    return _gather_saving("fp8-current")


@identity("MXFP8 parameter gather: saves (cd-1)/cd (1 - 33/64) 2 h(2h + 2gh/a + 3f)/t L/p bytes",
          topic=TOPIC, claim=(c * d - 1) / (c * d) * (1 - gather_ratio("mxfp8")) * 2 * LLAMA_MATRICES * L / p,
          source=MEGATRON_FP8_GATHER + "; TE MXFP8BlockScaling (one E8M0 byte per 32 elements)",
          assumptions=("the row-wise copy and its scales gathered; the column-wise one made after",
                       "norms, embedding and head stay bf16", RING))
def fp8_gather_mxfp8() -> sp.Expr:
    return _gather_saving("mxfp8")


@identity("FP8 parameter gather leaves the gradient reduce-scatter unchanged (fp32 main gradients)",
          topic=TOPIC, claim=sp.Integer(1), source=MEGATRON_FP8_GATHER,
          assumptions=("gradients reduced in the precision's gradient dtype",))
def fp8_gather_gradients() -> sp.Expr:
    plain = _rows(zero=1, dp=2, precision="fp8-current")
    fp8 = _rows(zero=1, dp=2, precision="fp8-current", fp8_param_gather=True)
    return _quotient(_sent(fp8, "dp.grads.reduce-scatter"), _sent(plain, "dp.grads.reduce-scatter"))


DEEPSEEK_COMM = ("DeepSeek-V3 technical report (arXiv 2412.19437), section 3.3.4: tokens dispatched in FP8 "
                 "(activations before the up-projections, activation gradients before the down-projections), "
                 "forward and backward combine in BF16")


def _ep_ratio(prefix: str) -> sp.Expr:
    """An expert all-to-all's bytes under fp8-blockwise over its bf16 bytes."""
    fp8 = _rows(MOE_LAYOUT, moe=True, ep=2, dp=2, sequence_parallel=True, precision="fp8-blockwise")
    plain = _rows(MOE_LAYOUT, moe=True, ep=2, dp=2, sequence_parallel=True, precision="bf16")
    return _quotient(_sent(fp8, prefix), _sent(plain, prefix))


@identity("FP8 dispatch all-to-all: (1 + 4/128)/2 of the bf16 one", topic=TOPIC,
          claim=dispatch_bytes_per_element("fp8-blockwise") / dispatch_bytes_per_element("bf16"),
          source=DEEPSEEK_COMM + "; the ratio derive.conventions.fp8.dispatch_bytes_per_element states",
          assumptions=("1 x 128 activation tiles, one fp32 scale each, travel with the data",))
def ep_dispatch_fp8() -> sp.Expr:
    return _ep_ratio("ep.dispatch.all-to-all")


@identity("FP8 recipe: the combine all-to-all stays bf16", topic=TOPIC, claim=sp.Integer(1),
          source=DEEPSEEK_COMM, assumptions=("combine (and the dispatch's backward) in BF16",))
def ep_combine_fp8() -> sp.Expr:
    return _ep_ratio("ep.combine.all-to-all")
