"""The form of a mixture-of-experts block (:class:`MoE`) and the active rows of a table.

The rows of ONE MoE layer's MLP block (router, routed experts, shared expert(s) and their
gate) are registry operations (derive.architectures.operations.experts), sizes symbolic
(derive.symbols: E routed experts of width f_E, k_E of them per token, shared experts of total
width f_S). The routed experts are written as the published checkpoints hold them, one gate, up
and down per expert (``mlp.experts.*.gate_proj.weight``, ``count`` E), where transformers 5
stacks them into ``mlp.experts.gate_up_proj`` [E, 2 f_E, h] and ``mlp.experts.down_proj``
[E, h, f_E] (the mapping is in derive.validate.hf).

Tags (the expert-parallel scheme; Megatron-LM, megatron/core/transformer/moe/):
  ``moe``            every row of the block;
  ``routed_expert``  the E experts' matrices: a token passes through k_E of them;
                     expert parallelism puts E/e experts on each of e ranks and
                     expert tensor parallelism splits each over t_E;
  ``shared_expert``  the always-on expert(s) (Qwen2-MoE, DeepSeek): a dense MLP,
                     split by t like the attention;
  ``router``         the routing matrix [h, E] and its bias: whole on every rank;
  ``shared_expert_gate``  Qwen2-MoE's sigmoid gate [h, 1]: whole on every rank;
  ``buffer``         a tensor the checkpoint holds but no gradient trains
                     (DeepSeek-V3's e_score_correction_bias): not counted in N.
"""
from __future__ import annotations

from dataclasses import dataclass

from derive.inputs import choose
from derive.symbols import E, k_E
from derive.tensors import Ledger

#: Router bias kinds: none, a trained bias (Megatron's add_bias_linear), or a buffer the
#: load-balancing rule moves (DeepSeek-V3 report, section 2.1.2, auxiliary-loss-free balancing).
ROUTER_BIAS = ("none", "parameter", "buffer")
#: Routers: softmax over E then top-k (Mixtral, Qwen-MoE); sigmoid scores with group-limited
#: top-k (DeepSeek-V3 report, section 2.1.2).
ROUTERS = ("softmax", "sigmoid-grouped")
#: The dtypes the routing weights reach the experts in.
ROUTING_DTYPES = ("fp32", "bf16")


@dataclass(frozen=True)
class MoE:
    """What a config says about the form of its MoE blocks (sizes stay symbols).

    ``router_name``: the routing module (``gate``; GPT-OSS's ``router``); ``expert_bias``: each
    routed expert's gate, up and down projections carry a bias (GPT-OSS: GptOssExperts'
    gate_up_proj_bias [E, 2 f_E] and down_proj_bias [E, h], modeling_gpt_oss.py).

    Routing (no parameter; read by the saved-tensor tables, derive.architectures.operations.experts):
    ``router`` (:data:`ROUTERS`), ``normalise_topk`` (the top-k weights renormalised to sum to 1:
    a config's norm_topk_prob; Mixtral always), ``weights_dtype`` (the dtype the routing weights
    reach the experts in: Qwen2-MoE and Qwen3-MoE cast them to the hidden dtype).
    """

    router_bias: str = "none"
    shared: str = ""
    shared_gate: bool = False
    shared_bias: bool = False
    prefix: str = "mlp"
    router_bias_name: str = "bias"
    router_name: str = "gate"
    expert_bias: bool = False
    router: str = "softmax"
    normalise_topk: bool = True
    weights_dtype: str = "fp32"

    def __post_init__(self) -> None:
        if self.router_bias not in ROUTER_BIAS:
            raise ValueError(f"router_bias: unknown router bias {self.router_bias!r} "
                             f"(known: {', '.join(ROUTER_BIAS)})")
        choose("router", self.router, ROUTERS)
        choose("weights_dtype", self.weights_dtype, ROUTING_DTYPES)
        if self.shared_gate and not self.shared:
            raise ValueError("shared_gate: a shared-expert gate needs a shared expert")


def active_rows(table: Ledger) -> Ledger:
    """The rows one token passes through: each routed expert row at k_E of its E copies."""
    return table.map(lambda w: w.times(k_E / E) if w.has("routed_expert") else w)
