"""Where the tools people already run depart from derive, each as an exact difference.

The claim side of every entry is a peer's own formula, transcribed from its source
(DeepSpeed's ZeRO estimators, accelerate's ``estimate-memory``, llm-analysis,
torchtitan, calflops); the derived side is derive's table under the view that peer
takes (:mod:`derive.peers`). Each is a departure (``holds=False``): the difference,
derived - peer, is what the peer leaves out (+) or adds (-), and
``tests/test_peers_*.py`` check that it closes the gap to every number the peer
returned (``tests/reference/peers_*.json``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import sympy as sp

from derive.accounts.activations import logits_bytes
from derive.accounts.host import GPUS_PER_NODE, NODES, RANKS, host_peak_per_node
from derive.accounts.framework_placements import (
    MAX_LIVE_PARAMETERS,
    MODULE_PARAMS,
    PREFETCH_BUCKET_SIZE,
    SUB_GROUP_SIZE,
)
from derive.accounts.placement import placement_bytes, placement_ledger
from derive.architectures.decoder import GPT, LLAMA
from derive.architectures.gemms import attention_score_gemms, flops
from derive.architectures.saved import gpt_layer_saved, llama_layer_saved
from derive.architectures.tables import edge_parameters, layer_gemms, layer_parameters, model_parameters, parameter_count
from derive.conventions import CONVENTIONS, palm
from derive.identities import Sided, identity
from derive.symbols import LATEX_NAMES, N, V, a, b, f, h, s
from derive.tensors import Ledger

TOPIC = "peer departures"

#: DeepSpeed's estimators multiply host memory by additional_buffer_factor (default 1.5).
BUFFER_FACTOR = sp.Symbol("additional_buffer_factor", positive=True)
LATEX_NAMES[BUFFER_FACTOR] = r"\beta_{\mathrm{buffer}}"
#: The knobs under which DeepSpeed's estimators read a ZeRO-3 placement: the fp32 gradient of the
#: whole partition at once, no prefetch, only the largest module live.
ESTIMATOR_KNOBS: dict[sp.Symbol, sp.Expr] = {SUB_GROUP_SIZE: N / RANKS, PREFETCH_BUCKET_SIZE: 0,
                                             MAX_LIVE_PARAMETERS: MODULE_PARAMS}
ZERO2 = "deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs (0.19.8)"
ZERO3 = "deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs (0.19.8)"


def deepspeed_gpu_bytes(placement: str) -> sp.Expr:
    """GPU bytes per rank of a ZeRO placement on d = G n_nodes ranks: resident state and transients, at the estimator's knobs."""
    ledger = placement_ledger(placement, sharded=True, ranks=RANKS).without("host")
    return sp.expand(ledger.bytes().xreplace(ESTIMATOR_KNOBS))


def deepspeed_host_bytes(placement: str, zero_init: bool) -> sp.Expr:
    """Host bytes per node under DeepSpeed's estimator view: the host peak times additional_buffer_factor."""
    return BUFFER_FACTOR * host_peak_per_node(placement, zero_init)


@dataclass(frozen=True)
class PeerDeparture(Sided):
    """One way a peer departs from derive: (peer, derived) sides, where it applies, its source."""

    name: str
    peer: str
    sides: Callable[[], tuple[sp.Expr, sp.Expr]]
    source: str
    assumptions: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The identity registry's stable key: ``peers.<peer>.<name as a slug>``."""
        slug = re.sub(r"[^a-z0-9]+", "_", f"{self.peer}.{self.name}".lower()).strip("_")
        return f"peers.{slug}"

    @property
    def difference(self) -> sp.Expr:
        """derived - peer, exactly."""
        claimed, derived = self.pair
        return sp.expand((derived - claimed).xreplace(self.where))

    def size(self, values: dict[sp.Symbol, object]) -> sp.Expr:
        """The difference at ``values``."""
        return sp.nsimplify(self.difference.xreplace({k: sp.sympify(v) for k, v in values.items()}))


G, n = GPUS_PER_NODE, NODES
HALF = sp.Rational(3, 2)

DEPARTURES: dict[str, PeerDeparture] = {}


def departure(entry: PeerDeparture) -> PeerDeparture:
    """Register ``entry`` (once) in :data:`DEPARTURES` and as a ``holds=False`` identity."""
    if entry.name in DEPARTURES:
        raise ValueError(f"peer departure {entry.name!r} is registered twice")
    DEPARTURES[entry.name] = entry

    @identity(f"{entry.peer}: {entry.name}", topic=TOPIC, claim=entry, source=entry.source,
              assumptions=entry.assumptions, where=entry.where, holds=False, key=entry.key)
    def derived() -> sp.Expr:
        return entry.pair[1]

    return entry


# ---- DeepSpeed 0.19.8 ZeRO estimators ----

departure(PeerDeparture(
    "ZeRO-3 GPU estimate leaves out the bf16 gradient partition", "DeepSpeed",
    lambda: (4 * MODULE_PARAMS + 18 * N / RANKS, deepspeed_gpu_bytes("deepspeed-zero3")),
    ZERO3 + ": gpu_mem = largest_layer_memory + 18 total_params / total_gpus",
    ("no offload", "18 = 2 bf16 params + 4 fp32 gradients + 4 fp32 master + 8 Adam moments",
     "derived: grad_partitions_flat_buffer (bf16, partition_numel) is resident beside the fp32 "
     "sub-group gradient")))

departure(PeerDeparture(
    "ZeRO-2 offload host memory counted for every GPU of the world on each node", "DeepSpeed",
    lambda: (BUFFER_FACTOR * N * sp.Max(4 * G * n, 16),
             deepspeed_host_bytes("deepspeed-zero2-offload", zero_init=False)),
    ZERO2 + ": cpu_mem = total_params max(4 total_gpus, 16) additional_buffer_factor",
    ("offload_optimizer=cpu", "derived: a node's host holds its G ranks' partitions (16N/n_nodes) "
     "after each of its G processes built the fp32 model (4N each)")))

for _placement, _bytes, _what in (("deepspeed-zero3-offload", 16, "optimizer"),
                                  ("deepspeed-zero3-offload-params", 18, "optimizer and parameters")):
    departure(PeerDeparture(
        f"ZeRO-3 offload ({_what}) with zero.Init: the fp32 module being built is left out", "DeepSpeed",
        lambda _p=_placement, _b=_bytes: (BUFFER_FACTOR * _b * N / n,
                                          deepspeed_host_bytes(_p, zero_init=True)),
        ZERO3 + f": cpu_mem = total_params {_bytes} gpus_factor additional_buffer_factor (zero_init)",
        ("derived: the host peak is the larger of model construction (G processes, one fp32 "
         "module each) and the offloaded state; 0 wherever the state is the larger",)))


# ---- llm-analysis 0.2.2: LLMAnalysis's parameter, memory and FLOP methods (units: one layer, one token) ----

LLM_ANALYSIS = "llm_analysis/analysis.py LLMAnalysis (0.2.2)"

departure(PeerDeparture(
    "MLP counted as two h x f matrices", "llm-analysis",
    lambda: (2 * h * f, layer_parameters(LLAMA).where("mlp", "gemm").numel()),
    LLM_ANALYSIS + " get_num_params_per_layer_mlp: 2 hidden_dim ffn_embed_dim",
    ("Llama layer: SwiGLU's gate, up and down are three h x f matrices", "parameters per layer")))
departure(PeerDeparture(
    "input embedding and output head counted once (tied)", "llm-analysis",
    lambda: (V * h, edge_parameters(LLAMA).without("norm").numel()),
    LLM_ANALYSIS + " get_num_params_embedding(shared_embedding=True): hidden_dim vocab_size",
    ("Llama 3: untied input embedding and output head", "parameters")))
departure(PeerDeparture(
    "attention biases not counted", "llm-analysis",
    lambda: (4 * h**2, layer_parameters(GPT).where("attention").without("norm").numel()),
    LLM_ANALYSIS + " get_num_params_per_layer_attn: 2 h^2 + 2 h (h n_kv / n_head)",
    ("GPT layer: fused QKV and projection biases", "parameters per layer")))
departure(PeerDeparture(
    "MLP biases not counted", "llm-analysis",
    lambda: (2 * h * f, layer_parameters(GPT).where("mlp").without("norm").numel()),
    LLM_ANALYSIS + " get_num_params_per_layer_mlp: 2 hidden_dim ffn_embed_dim",
    ("GPT layer: fc1 and fc2 biases", "parameters per layer")))
departure(PeerDeparture(
    "LayerNorm bias not counted", "llm-analysis",
    lambda: (h, layer_parameters(GPT).where("norm", "attention").numel()),
    LLM_ANALYSIS + " get_num_params_per_layer_layernorm: 2 hidden_dim (two norms), last: hidden_dim",
    ("GPT: LayerNorm has a scale and a bias", "parameters per norm")))
departure(PeerDeparture(
    "learned position embedding not counted", "llm-analysis",
    lambda: (V * h, edge_parameters(GPT).without("norm").numel()),
    LLM_ANALYSIS + " get_num_params_embedding: hidden_dim vocab_size (tied)",
    ("GPT: s learned position rows of width h beside the tied word embedding", "parameters")))
departure(PeerDeparture(
    "MLP FLOPs taken as 16 h^2 (two matrices at f = 4h)", "llm-analysis",
    lambda: (16 * h**2, flops(layer_gemms(LLAMA, "none").where("mlp"), "forward")),
    LLM_ANALYSIS + " get_num_flops_fwd_per_layer_mlp: 16 batch_size seq_len hidden_dim^2",
    ("Llama layer: gate, up, down GEMMs of width f", "forward FLOPs per token per layer")))


# ---- accelerate 1.15.0: estimate-memory (units: parameters, or bytes per parameter) ----

ACCELERATE = "accelerate/commands/estimate.py (1.15.0)"

departure(PeerDeparture(
    "AutoModel has no lm_head", "accelerate",
    lambda: (model_parameters(LLAMA).numel() - V * h, parameter_count(LLAMA)),
    ACCELERATE + " create_empty_model: AutoModel.from_config (LlamaModel, no output head)",
    ("Llama 3: the untied output head (h x V) is trained too", "parameters")))
departure(PeerDeparture(
    "rotary inv_freq buffers counted as weights", "accelerate",
    lambda: (parameter_count(LLAMA) + 2 * (h / a) / 2, parameter_count(LLAMA)),
    "accelerate/utils/modeling.py compute_module_sizes (named_module_tensors: buffers included); "
    "transformers LlamaRotaryEmbedding inv_freq and original_inv_freq (head_dim / 2 fp32 each)",
    ("non-persistent buffers are not trained state", "parameters")))
departure(PeerDeparture(
    "mixed-precision step counted as the optimizer state alone", "accelerate",
    lambda: (sp.Integer(8), sp.expand(placement_bytes("torch-amp") / N)),
    ACCELERATE + " estimate_training_usage: step = optimizer (float16/bfloat16), 4 x fp32 size (float32)",
    ("at the optimizer step the fp32 weights, gradients and Adam moments are all resident",
     "bytes per parameter")))



# ---- calflops 0.3.2 and torch's FlopCounterMode (units: FLOPs per token per layer, or per call) ----

CALFLOPS = "calflops/pytorch_ops.py (0.3.2)"
ELEMENTWISE = ("derive counts GEMMs only: element-wise work is not a FLOP of derive's table",)


def _no_gemm() -> sp.Expr:
    """derive's GEMM FLOPs of an element-wise op: none."""
    return sp.Integer(0)


departure(PeerDeparture(
    "softmax counted at one FLOP per score", "calflops",
    lambda: (a * s, _no_gemm()), CALFLOPS + " _softmax_flops_compute: input.numel()",
    ELEMENTWISE + ("eager attention: F.softmax over [b, a, s, s]", "forward FLOPs per token per layer")))
departure(PeerDeparture(
    "SiLU counted at one FLOP per element", "calflops",
    lambda: (f, _no_gemm()), CALFLOPS + " _silu_flops_compute: input.numel()",
    ELEMENTWISE + ("Llama MLP: F.silu over [b, s, f]", "forward FLOPs per token per layer")))
departure(PeerDeparture(
    "LayerNorm counted at 5 FLOPs per element", "calflops",
    lambda: (5 * h, _no_gemm()), CALFLOPS + " _layer_norm_flops_compute: input.numel() x 5 (affine)",
    ELEMENTWISE + ("GPT: F.layer_norm over [b, s, h]", "forward FLOPs per token per norm")))
departure(PeerDeparture(
    "addmm bias counted once per call", "calflops",
    lambda: (layer_parameters(GPT).where("bias").without("norm").numel(), _no_gemm()),
    CALFLOPS + " _addmm_flops_compute: 2 macs + prod(input.shape) (the bias vector, once per call)",
    ELEMENTWISE + ("GPT-2 Conv1D: torch.addmm(bias, x, W) for QKV, projection, fc1, fc2",
                   "forward FLOPs per layer per call")))
departure(PeerDeparture(
    "scaled_dot_product_attention not counted", "calflops",
    lambda: (sp.Integer(0), flops(attention_score_gemms("full"), "forward")),
    CALFLOPS + " _patch_functionals: F.scaled_dot_product_attention is not wrapped",
    ("attn_implementation='sdpa'", "forward FLOPs per token per layer")))
departure(PeerDeparture(
    "CPU flash-attention kernel counted as 0", "FlopCounterMode",
    lambda: (sp.Integer(0), flops(attention_score_gemms("full"))),
    "torch/utils/flop_counter.py (2.13.0): no formula for aten._scaled_dot_product_flash_attention_for_cpu",
    ("HF Llama, attn_implementation='sdpa', is_causal without a mask: the CPU flash kernel",
     "training FLOPs per token per layer")))


# ---- torchtitan 0.3.0: its FLOP convention against PaLM's and derive's ----

TORCHTITAN = "torchtitan/models/utils.py get_dense_model_nparams_and_flops (0.3.0)"


@identity("torchtitan FLOPs per token = PaLM's 6N + 12LHQT - 6Vh", topic=TOPIC,
          claim=palm("llama") - 6 * V * h, source=TORCHTITAN,
          assumptions=("Llama, untied input embedding (nn.Embedding child) left out of 6N",
                       "head_dims = 2 h/a: QK^T and PV over the full score square"))
def torchtitan_is_palm_without_lookup() -> sp.Expr:
    return CONVENTIONS["torchtitan"]("llama")


departure(PeerDeparture(
    "norm weights counted at 6 FLOPs per parameter", "torchtitan",
    lambda: (CONVENTIONS["torchtitan"]("llama"), CONVENTIONS["derive-full"]("llama")),
    TORCHTITAN + ": 6 (nparams - nparams_embedding)",
    ("derive-full: GEMMs only, full score square; norm scales are element-wise",
     "training FLOPs per token")))


# ---- llm-analysis 0.2.2 activations (units: bytes of one layer, one micro-batch, t = 1) ----

ACTIVATIONS = LLM_ANALYSIS + " get_activation_memory_per_layer (training)"


def _gpt_rows(attention: str = "fused") -> Ledger:
    """The GPT layer's saved tensors (Korthikanti et al. 2022), the table llm-analysis follows."""
    return gpt_layer_saved(attention)


def _llama_rows() -> Ledger:
    """The Llama layer's saved tensors under fused kernels (flash attention)."""
    return llama_layer_saved("fused")


departure(PeerDeparture(
    "norm input counted in fp32", "llm-analysis",
    lambda: (4 * s * b * h, _gpt_rows()["layer input"].bytes),
    ACTIVATIONS + ": get_activation_memory_per_layernorm(dtype_bytes=BYTES_FP32), twice",
    ("derived: the norm keeps its bf16 input (the layer input, the residual sum)", "bytes per norm")))
departure(PeerDeparture(
    "flash attention counted as 2sbh + 4abs 16-bit elements", "llm-analysis",
    lambda: ((2 * s * b * h + 4 * a * s * b) * 2, _gpt_rows().where("softmax_statistics").bytes()),
    ACTIVATIONS + ": memory_attn_compute = (2 s b h + 4 n_head s b) bytes_per_activation (flash_attn)",
    ("derived: the fused kernel keeps its fp32 logsumexp [b, a, s] beside Q, K, V and its output",
     "bytes per layer")))
departure(PeerDeparture(
    "MLP dropout mask not counted", "llm-analysis",
    lambda: (sp.Integer(0), _gpt_rows()["MLP dropout mask"].bytes),
    ACTIVATIONS + ": get_activation_memory_per_layer_mlp(with_dropout=False)",
    ("GPT layer: dropout after fc2 keeps a 1-byte mask (the attention's is counted)", "bytes per layer")))
departure(PeerDeparture(
    "attention dropout mask not counted", "llm-analysis",
    lambda: (2 * a * s**2 * b * 2, _gpt_rows("materialised").where("score_matrix").bytes()),
    ACTIVATIONS + ": 2 n_head s^2 b bytes_per_activation, softmax_dropout=False",
    ("materialised attention: softmax output, 1-byte dropout mask, dropout output", "bytes per layer")))
departure(PeerDeparture(
    "full recompute: the kept layer input is in no block", "llm-analysis",
    lambda: (sp.Integer(0), _gpt_rows()["layer input"].bytes),
    ACTIVATIONS + ": return_breakdown under FULL is (total, 0, 0, 0)",
    ("derived: the layer input is the first norm's input", "bytes per layer")))
departure(PeerDeparture(
    "k and v counted at width h (GQA ignored)", "llm-analysis",
    lambda: (2 * 2 * s * b * h, sum((_llama_rows()[name].bytes for name in ("k", "v")), sp.Integer(0))),
    ACTIVATIONS + ": 4 s b h / tp for q, k, v and the attention output",
    ("Llama: g key/value heads of width h/a", "bytes per layer")))
departure(PeerDeparture(
    "attention-output dropout mask counted without dropout", "llm-analysis",
    lambda: (s * b * h, _llama_rows().where("dropout").bytes()),
    ACTIVATIONS + ": get_activation_memory_per_layer_attn(attn_dropout=True)",
    ("Llama: no dropout", "bytes per layer")))
departure(PeerDeparture(
    "SwiGLU's gate and up counted as one f-wide tensor", "llm-analysis",
    lambda: (2 * 2 * s * b * f, _llama_rows().where("mlp", "tp_shardable").bytes()),
    ACTIVATIONS + ": (gelu input + fc2 input) x expansion_ratio s b h (mlp_gated_linear_units=False)",
    ("Llama MLP: gate and up outputs (the fused fc1 output) and the fc2 input", "bytes per layer")))
departure(PeerDeparture(
    "logits kept once in 16 bits", "llm-analysis",
    lambda: (2 * s * b * V, logits_bytes()),
    LLM_ANALYSIS + " get_activation_memory_output_embedding: V b s bytes_per_activation / tp",
    ("derived: bf16 logits and the fp32 copy the loss reads", "bytes per micro-batch")))

departure(PeerDeparture(
    "selective recompute: the flash kernel's logsumexp not counted", "llm-analysis",
    lambda: (sp.Integer(0), _llama_rows().where("softmax_statistics").bytes()),
    ACTIVATIONS + ": memory_attn_compute = 0 under SELECTIVE",
    ("Llama, fused kernels: recompute re-runs the kernel, which still keeps its fp32 logsumexp",
     "bytes per layer")))
