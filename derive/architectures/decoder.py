"""The form of a decoder-only model (:class:`Layout`): the GPT and Llama families', a config's, an MoE model's.

A :class:`Layout` is what a config says about the *form* of a model: which
projections are fused, which carry biases, which norms sit where and of which
kind, whether the MLP is gated, tied or learned embeddings, MoE and MLA blocks,
MTP modules. The *sizes* stay symbols (h, a, g, k, f, V, L, s_max and the MoE and
MLA symbols of derive.symbols), substituted with a model's numbers later, so one
table serves the identities and the accounts. Every table of a layout (parameters,
active parameters, GEMMs) is a walk of its operations through the registry:
derive.architectures.tables. The article's families are layouts too (:data:`GPT`,
:data:`LLAMA`: their reference tables carry Megatron's / Meta's row names), and an MoE
model's is written from Megatron's switches by :func:`moe_layout`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from derive.architectures.blocks import NORMS
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE
from derive.inputs import choose

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
    activation_function whose rows derive does not list). ``glu_limit``: the clamp of the GLU input
    (GPT-OSS's swiglu_limit), which the step model's eager clamp kernels read
    (derive.accounts.compute_time.EXPERT_CLAMP_KERNELS). These five
    change no parameter, FLOP or page figure, so a layout's form (equality) ignores them.
    ``sinks``: one learned attention-sink logit per query head in each layer (GPT-OSS's
    ``self_attn.sinks`` [a], GptOssAttention in modeling_gpt_oss.py: a softmax column no value reads).
    ``mtp``: D multi-token-prediction modules after the last layer (DeepSeek-V3 report, section 2.2;
    derive.architectures.tables adds their rows: transformers' modeling code leaves them out);
    ``last_moe``: the last layer, and so each MTP module's layer, is an MoE layer.
    ``family``: the article's family ("gpt", "llama") whose reference tables, with Megatron's /
    Meta's row names, this layout's accounts read (:data:`GPT`, :data:`LLAMA`);
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
    glu_limit: float | None = field(default=None, compare=False)
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
        """No MoE and no MLA block: the dense saved-tensor profiles apply (the parameter and GEMM tables take every layout)."""
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
        raise ValueError(f"{field}: a decoder Layout is needed (derive.architectures.decoder.GPT or LLAMA, "
                         f"or a model's .architecture), got {value!r}")
    return value


#: The Llama family's form: pre-RMSNorms, SwiGLU, untied head, RoPE; Meta's row names.
LLAMA = Layout(family="llama")
#: The GPT family's form (Megatron's GPT): LayerNorms, biases, a plain GeLU MLP, fused QKV,
#: learned positions, the word embedding tied to the head; Megatron's row names.
GPT = Layout(norm="layer", qkv_fused=True, qkv_bias=True, o_bias=True, gated=False, mlp_bias=True,
             tied=True, learned_positions=True, family="gpt")
#: The article's families by name (a preset's ``family``) -> their layouts.
FAMILIES: dict[str, Layout] = {"llama": LLAMA, "gpt": GPT}

#: attention kinds (:attr:`Layout.attention`): GQA at head width k, MLA with a query latent,
#: MLA with a direct q_proj.
ATTENTION_KINDS = ("gqa", "mla", "mla-direct")
#: The shared experts' module (DeepSeek's name; the Qwen2-MoE config reader names its own).
SHARED_EXPERTS = "mlp.shared_experts"


def moe_layout(attention: str = "gqa", shared: bool = False, gate: bool = False, router_bias: bool = False,
               qk_norm: bool = False, mtp: bool = False, last_moe: bool = True, router: str = "softmax",
               normalise_topk: bool = True, weights_dtype: str = "fp32") -> Layout:
    """The Layout of an MoE model named by the switches Megatron's arguments and the papers use.

    RMSNorm, SwiGLU, untied; GQA or MLA (``attention``), shared experts and their sigmoid gate,
    a trained router bias, q/k norms, D MTP modules, the routing (derive.architectures.moe.MoE).
    """
    choose("attention", attention, ATTENTION_KINDS)
    if gate and not shared:
        raise ValueError("gate: a shared-expert gate needs shared experts")
    moe = MoE(router_bias="parameter" if router_bias else "none", shared=SHARED_EXPERTS if shared else "",
              shared_gate=gate, router=router, normalise_topk=normalise_topk, weights_dtype=weights_dtype)
    mla = None if attention == "gqa" else MLA(q_lora=attention == "mla")
    return Layout(qk_norm="head" if qk_norm else "none", moe=moe, mla=mla, mtp=mtp, last_moe=last_moe)
