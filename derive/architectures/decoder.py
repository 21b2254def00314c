"""Parameter tables of any decoder-only model from its layout: the rows a Hugging Face config names.

A :class:`Layout` is what a config says about the *form* of a model: which
projections are fused, which carry biases, which norms sit where and of which
kind, whether the MLP is gated, tied or learned embeddings, MoE and MLA blocks.
The *sizes* stay symbols (h, a, g, k, f, V, L, s_max and the MoE and MLA symbols
of derive.symbols), substituted with a model's numbers later, so one table serves
the identities and the accounts. The dense rows are a walk of the layout's operations through
derive.architectures.operations.registry (the dense blocks declared in derive.architectures.blocks,
MLA in .operations.latent, the MoE block's router and experts in .operations.experts); names are
transformers' (a layer's rows relative to the layer).

Tags, besides the blocks': ``layer`` (held once per layer), ``moe_layer`` (held
by the L_E MoE layers) or ``dense_layer`` (by the other L - L_E, in an MoE
model), and the edge tags of derive.architectures.parameters (``embedding``,
``position``, ``output``, ``tied``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from derive.architectures.blocks import NORMS
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE, active_parameter_count
from derive.architectures.operations.registry import Step, parameter_table, step
from derive.symbols import L, L_E, a, h, k, s_max
from derive.tensors import Ledger

#: transformers' module paths of a Llama-style decoder (modeling_llama.py); other layouts override some.
LLAMA_NAMES: dict[str, str] = {
    "layers": "model.layers", "embedding": "model.embed_tokens", "positions": "",
    "final_norm": "model.norm", "head": "lm_head",
    "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
    "o": "self_attn.o_proj", "qkv": "self_attn.qkv_proj",
    "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm",
    "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
    "gate_up": "mlp.gate_up_proj",
}

#: Pre-norms of a Llama layer: (module, block it feeds).
PRE_NORMS: tuple[tuple[str, str], ...] = (("input_layernorm", "attention"),
                                          ("post_attention_layernorm", "mlp"))

QK_NORMS = ("none", "head", "projection")


@dataclass(frozen=True)
class Layout:
    """The form of a decoder: every feature a config switches, as table rows and tags.

    ``layer_norms``: the norms of one layer, (module, block) in order (Llama: two
    pre-norms; Gemma 2/3: four, pre and post; OLMo 2: two post-norms).
    ``parallel``: attention and MLP read the same input (GPT-NeoX's
    use_parallel_residual); it moves no parameter and is kept for the activation
    accounts, which do not model it.
    ``attention_softcap`` / ``logit_softcap``: tanh soft-capping of the attention scores / the
    final logits (Gemma 2's attn_logit_softcapping, final_logit_softcapping): no parameter,
    kept for the saved-tensor accounts (derive.architectures.saved.gemma_layers_saved).
    ``dropout``: the config's dropout fields above 0, (field, p): no parameter; the
    transformers saved-tensor accounts (derive.accounts.hf_saved) refuse them, as they refuse
    the settings in ``unmodelled`` ("field = value": GPT-2's reorder_and_upcast_attn, an
    activation_function whose rows derive does not list). These four
    change no parameter, FLOP or page figure, so a layout's form (equality) ignores them.
    ``sinks``: one learned attention-sink logit per query head in each layer (GPT-OSS's
    ``self_attn.sinks`` [a], GptOssAttention in modeling_gpt_oss.py: a softmax column no value reads).
    ``mtp``: D multi-token-prediction modules after the last layer (DeepSeek-V3 report, section 2.2;
    derive.architectures.moe_model adds their rows: transformers' modeling code leaves them out);
    ``last_moe``: the last layer, and so each MTP module's layer, is an MoE layer.
    ``family``: the article's family ("gpt", "llama") whose reference tables, with Megatron's /
    Meta's row names, this layout's accounts read (derive.architectures.families.GPT, LLAMA);
    "" for a layout read from a config (transformers' names, this module's tables).
    """

    norm: str = "rms"
    layer_norms: tuple[tuple[str, str], ...] = PRE_NORMS
    qk_norm: str = "none"
    qkv_fused: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    gated: bool = True
    gate_up_fused: bool = False
    mlp_bias: bool = False
    tied: bool = False
    learned_positions: bool = False
    parallel: bool = False
    attention_softcap: bool = field(default=False, compare=False)
    logit_softcap: bool = field(default=False, compare=False)
    dropout: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    unmodelled: tuple[str, ...] = field(default=(), compare=False)
    names: dict[str, str] = field(default_factory=lambda: dict(LLAMA_NAMES), compare=False)
    moe: MoE | None = None
    mla: MLA | None = None
    sinks: bool = False
    mtp: bool = False
    last_moe: bool = True
    family: str = ""

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise ValueError(f"norm: unknown norm {self.norm!r} (known: {', '.join(NORMS)})")
        if self.qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm: unknown q/k norm {self.qk_norm!r} "
                             f"(known: {', '.join(QK_NORMS)})")
        object.__setattr__(self, "names", {**LLAMA_NAMES, **self.names})

    @property
    def dense(self) -> bool:
        """No MoE and no MLA block: every account of derive applies."""
        return self.moe is None and self.mla is None

    @property
    def attention(self) -> str:
        """The attention kind: ``gqa`` (MHA / GQA at head width k), ``mla`` (with a query latent) or ``mla-direct``."""
        if self.mla is None:
            return "gqa"
        return "mla" if self.mla.q_lora else "mla-direct"


def require_layout(value: object, field: str = "layout") -> Layout:
    """``value`` if it is a :class:`Layout`; else a ValueError naming ``field`` (a family's name is not one)."""
    if not isinstance(value, Layout):
        raise ValueError(f"{field}: a decoder Layout is needed (derive.architectures.families.GPT or LLAMA, "
                         f"or a model's .architecture), got {value!r}")
    return value


def _norm_steps(layout: Layout) -> list[Step]:
    return [step("norm", "norm", name=module, width=h, kind=layout.norm, tags=(block,))
            for module, block in layout.layer_norms]


def _attention_steps(layout: Layout) -> list[Step]:
    """MHA / GQA or MLA (derive.architectures.operations.latent), and the attention sinks."""
    steps = [step("attention", "mla", mla=layout.mla) if layout.mla is not None else step(
        "attention", "projections", names=layout.names, fused=layout.qkv_fused,
        qkv_bias=layout.qkv_bias, o_bias=layout.o_bias, qk_norm=layout.qk_norm, head_dim=k)]
    return steps + ([step("attention", "sinks", heads=a)] if layout.sinks else [])


def _mlp_steps(layout: Layout, moe_layer: bool = False) -> list[Step]:
    """The dense MLP, or an MoE layer's router, routed experts and shared experts (with their gate)."""
    if moe_layer:
        return [step(operation, implementation, moe=layout.moe) for operation, implementation in
                (("router", "router"), ("experts", "routed"), ("shared_experts", "shared"))]
    return [step("mlp", "mlp", names=layout.names, gated=layout.gated, bias=layout.mlp_bias,
                 fused=layout.gate_up_fused)]


def layer_steps(layout: Layout, moe_layer: bool = False) -> tuple[Step, ...]:
    """The operations of one layer in table order: its norms, attention, sinks, the MLP or the MoE block."""
    return (*_norm_steps(layout), *_attention_steps(layout), *_mlp_steps(layout, moe_layer))


def layer_rows(layout: Layout, moe_layer: bool = False) -> Ledger:
    """One layer (dense or, ``moe_layer``, MoE): :func:`layer_steps` walked, tagged ``layer`` and its kind in an MoE model."""
    kind = () if layout.moe is None else ("moe_layer" if moe_layer else "dense_layer",)
    return parameter_table(layer_steps(layout, moe_layer)).map(lambda t: t.tagged("layer", *kind))


def edge_steps(layout: Layout) -> tuple[Step, ...]:
    """Token embedding (tied to the head or not), learned positions, final norm, output head."""
    names = layout.names
    steps = [step("embedding", "embedding", name=f"{names['embedding']}.weight", tied=layout.tied)]
    if layout.learned_positions:
        steps.append(step("embedding", "positions", name=f"{names['positions']}.weight",
                          length=s_max))
    steps.append(step("norm", "norm", name=names["final_norm"], width=h, kind=layout.norm))
    if not layout.tied:
        steps.append(step("output", "head", name=f"{names['head']}.weight"))
    return tuple(steps)


def edge_rows(layout: Layout) -> Ledger:
    """The edges' parameter rows: :func:`edge_steps` walked."""
    return parameter_table(edge_steps(layout))


def model_rows(layout: Layout) -> Ledger:
    """Every tensor of the model: edges, L dense layers or L - L_E dense and L_E MoE layers."""
    edges = edge_rows(layout)
    if layout.moe is None:
        layers = layer_rows(layout).times(L)
    else:
        layers = layer_rows(layout).times(L - L_E) + layer_rows(layout, True).times(L_E)
    return Ledger([*edges.where("embedding"), *edges.where("position"), *layers,
                   *edges.without("embedding", "position")])


def parameter_rows(layout: Layout) -> Ledger:
    """The trained tensors: every row but the buffers."""
    return model_rows(layout).without("buffer")


def layout_parameter_count(layout: Layout) -> sp.Expr:
    """N: every parameter once (a tied embedding once), summed over the table."""
    return parameter_rows(layout).numel()


def layout_active_parameter_count(layout: Layout) -> sp.Expr:
    """Parameters a token passes through: N for a dense model, k_E of E routed experts otherwise."""
    return active_parameter_count(parameter_rows(layout))
