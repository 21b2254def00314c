"""Activations: sbh(34 + 5as/h), Korthikanti's Table 2, Megatron's forms, logits, pipeline terms."""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.accounts.activations import (
    embedding_edge,
    first_stage_activation_bytes,
    layer_activation_bytes,
    layer_activations,
    logits_bytes,
    output_edge,
)
from derive.architectures.saved import gpt_layer_saved
from derive.conventions.megatron import MEGATRON_OVERHEAD
from derive.identities import identity
from derive.symbols import FFN_4H, L, V, a, b, f, h, h_kv, p, s, t, v

TOPIC = "activations"
PAPER = "Korthikanti et al. 2022 (Reducing Activation Recomputation), section 4.1"
TABLE2 = "Korthikanti et al. 2022, Table 2"
SECTION43 = "Korthikanti et al. 2022, section 4.3 (input embeddings and output layer)"
MEGATRON = "megatron/training/theoretical_memory_usage.py"
GPT_ACTIVATIONS = ("16-bit activations, 1-byte dropout masks", "MHA, GELU, dropout after softmax, "
       "after the output projection and after the MLP", "f = 4h",
       "norm statistics ignored")
SBH = s * b * h


def _gpt(**policy: object) -> sp.Expr:
    return layer_activation_bytes("gpt", "materialised", **policy)


@identity("GPT layer = sbh(34 + 5as/h)", topic=TOPIC, claim=SBH * (34 + 5 * a * s / h),
          source=PAPER + "; the article, section 4.1", assumptions=GPT_ACTIVATIONS, where=FFN_4H)
def gpt_layer() -> sp.Expr:
    return _gpt()


@identity("GPT layer, f symbolic = sbh(18 + 4f/h + 5as/h)", topic=TOPIC,
          claim=SBH * (18 + 4 * f / h + 5 * a * s / h),
          source=PAPER + " with the MLP width kept; " + MEGATRON + " compute_activation_memory",
          assumptions=GPT_ACTIVATIONS[:2] + ("norm statistics ignored",))
def gpt_layer_f() -> sp.Expr:
    return _gpt()


@identity("GPT LayerNorm statistics = 16sb (fp32 mean and rstd, two norms)", topic=TOPIC,
          claim=16 * s * b,
          source="torch native_layer_norm (CUDA) returns fp32 mean and rstd per row; "
                 "the rows Korthikanti's count leaves out",
          assumptions=("fp32 statistics (CUDA); CPU keeps them in bf16: 8sb",))
def gpt_norm_statistics() -> sp.Expr:
    return gpt_layer_saved().where("norm_statistics").bytes()


@identity("34 = 10 replicated + 24 TP-shardable: replicated = 10sbh", topic=TOPIC,
          claim=10 * SBH, source="the article, section 4.1; " + PAPER, assumptions=GPT_ACTIVATIONS, where=FFN_4H)
def gpt_replicated() -> sp.Expr:
    return layer_activations("gpt").where("replicated").bytes()


@identity("34 = 10 replicated + 24 TP-shardable: shardable, scores aside = 24sbh", topic=TOPIC,
          claim=24 * SBH, source="the article, section 4.1; " + PAPER, assumptions=GPT_ACTIVATIONS, where=FFN_4H)
def gpt_shardable() -> sp.Expr:
    return layer_activations("gpt").where("tp_shardable").without("score_matrix").bytes()


@identity("score matrices = 5as^2b", topic=TOPIC, claim=5 * a * s**2 * b,
          source=PAPER + " (softmax output 2, dropout mask 1, dropout output 2 bytes)",
          assumptions=GPT_ACTIVATIONS[:2])
def gpt_scores() -> sp.Expr:
    return layer_activations("gpt").where("score_matrix").bytes()


@identity("fused attention removes 5as/h, keeps a 4abs logsumexp", topic=TOPIC,
          claim=5 * a * s**2 * b - 4 * a * b * s,
          source="Dao et al. 2022 (FlashAttention); the article, section 4.2",
          assumptions=GPT_ACTIVATIONS[:2] + ("materialised - fused; the fp32 logsumexp [b, a, s] stays",))
def fused_removes_scores() -> sp.Expr:
    return _gpt() - layer_activation_bytes("gpt", "fused")


@identity("GPT layer, fused attention = 34sbh (logsumexp ignored)", topic=TOPIC, claim=34 * SBH,
          source="the article, section 4.2", where=FFN_4H,
          assumptions=GPT_ACTIVATIONS + ("fused kernel keeps Q, K, V, output and logsumexp",
                             "logsumexp ignored (a s b fp32, small beside sbh)"))
def gpt_fused() -> sp.Expr:
    return layer_activation_bytes("gpt", "fused", softmax_statistics=False)


@dataclass(frozen=True)
class Table2Row:
    """One policy of Korthikanti et al. 2022, Table 2: its label, printed closed form and derive's arguments."""

    key: str
    label: str
    printed: str
    claim: sp.Expr
    policy: dict[str, object]


#: Korthikanti et al. 2022, Table 2: the six policies, each an argument set of layer_activation_bytes.
TABLE2_ROWS: tuple[Table2Row, ...] = (
    Table2Row("no_parallelism", "no parallelism", "sbh(34 + 5as/h)", SBH * (34 + 5 * a * s / h), {}),
    Table2Row("tensor_parallel", "tensor parallel", "sbh(10 + 24/t + 5as/(ht))",
              SBH * (10 + 24 / t + 5 * a * s / (h * t)), {"tensor_parallel": t}),
    Table2Row("tensor_sequence_parallel", "tensor + sequence parallel", "sbh/t (34 + 5as/h)",
              SBH / t * (34 + 5 * a * s / h), {"tensor_parallel": t, "sequence_parallel": True}),
    Table2Row("tensor_parallel_selective", "tensor parallel + selective recompute", "sbh(10 + 24/t)",
              SBH * (10 + 24 / t), {"tensor_parallel": t, "recompute": "selective"}),
    Table2Row("tensor_sequence_parallel_selective", "tensor + sequence parallel + selective recompute",
              "34sbh/t", 34 * SBH / t,
              {"tensor_parallel": t, "sequence_parallel": True, "recompute": "selective"}),
    Table2Row("full_recompute", "full recompute", "2sbh", 2 * SBH, {"recompute": "full"}),
)


def table2_key(row: Table2Row) -> str:
    """The identity key of one Table 2 row."""
    return f"activations.table2.{row.key}"


def _table2(row: Table2Row) -> None:
    @identity(f"Table 2, {row.label}: {row.printed}", topic=TOPIC, claim=row.claim, source=TABLE2,
              assumptions=GPT_ACTIVATIONS + ("t tensor-parallel ranks",), where=FFN_4H, key=table2_key(row))
    def derived() -> sp.Expr:
        return _gpt(**row.policy)


for _row in TABLE2_ROWS:
    _table2(_row)


@identity("Megatron compute_activation_memory: sbh(18 + 4f/h)/t per layer", topic=TOPIC,
          claim=SBH * (18 + 4 * f / h) / t, source=MEGATRON + " compute_activation_memory",
          assumptions=GPT_ACTIVATIONS[:2] + ("sequence parallel + selective recompute",
                                 "norm statistics ignored"))
def megatron_sp_selective() -> sp.Expr:
    return _gpt(tensor_parallel=t, sequence_parallel=True, recompute="selective")


@identity("Megatron 18 + 4f/h = 34 at f = 4h", topic=TOPIC, claim=34 * SBH,
          source=MEGATRON + " compute_activation_memory; the article, section 4.4",
          assumptions=GPT_ACTIVATIONS + ("selective recompute",), where=FFN_4H)
def megatron_is_34() -> sp.Expr:
    return _gpt(recompute="selective")


@identity("Megatron compute_activation_memory_without_sp: 1.05 sbh(10 + 24/t)", topic=TOPIC,
          claim=sp.Rational(105, 100) * SBH * (10 + 24 / t),
          source=MEGATRON + " compute_activation_memory_without_sp (overhead_factor = 1.05)",
          assumptions=GPT_ACTIVATIONS + ("no score matrices kept (selective recompute or fused attention)",
                             "1.05: Megatron's allowance for optimizer and other temporaries"),
          where=FFN_4H)
def megatron_without_sp() -> sp.Expr:
    return MEGATRON_OVERHEAD * _gpt(tensor_parallel=t, recompute="selective")


@identity("Megatron sbh(10 + 24/t) on a materialised-attention layer (misses 5as/(ht))",
          topic=TOPIC, claim=SBH * (10 + 24 / t), holds=False,
          source=MEGATRON + " compute_activation_memory_without_sp; the article, section 4.4",
          assumptions=GPT_ACTIVATIONS + ("no recompute, scores materialised",), where=FFN_4H)
def megatron_without_sp_materialised() -> sp.Expr:
    return _gpt(tensor_parallel=t)


def _llama_profile(profile: str, claim: sp.Expr, printed: str) -> None:
    architecture = f"llama-{profile}"

    @identity(f"Llama {profile} profile = {printed}", topic=TOPIC, claim=claim,
              key=f"activations.llama_{profile}",
              source="PyTorch 2.13 CPU eager, torch.autograd.graph.saved_tensors_hooks "
                     "(measured per tensor)" if profile == "eager" else
                     "Megatron-Core + Transformer Engine: fused RMSNorm, flash attention, "
                     "bias_swiglu (keeps the fc1 output)",
              assumptions=("norm statistics ignored", "logsumexp ignored",
                           "GQA: h_kv = g h / a", "SwiGLU, no dropout"))
    def profile_bytes() -> sp.Expr:
        return layer_activation_bytes(architecture, softmax_statistics=False)

    @identity(f"Llama {profile}: the GPT 34 does not apply", topic=TOPIC, claim=34 * SBH,
              key=f"activations.llama_{profile}_not_34",
              holds=False, source="the article, section 4.3 (34 applied to Llama 3)",
              assumptions=("the article's GPT coefficient on a Llama layer",))
    def article_on_llama() -> sp.Expr:
        return layer_activation_bytes(architecture, softmax_statistics=False)

    @identity(f"Llama {profile}: Megatron's 18 + 4f/h does not apply", topic=TOPIC,
              key=f"activations.llama_{profile}_not_megatron",
              claim=SBH * (18 + 4 * f / h), holds=False,
              source=MEGATRON + " compute_activation_memory (ignores GQA and SwiGLU)",
              assumptions=("Megatron's GPT form on a Llama layer",))
    def megatron_on_llama() -> sp.Expr:
        return layer_activation_bytes(architecture, softmax_statistics=False)


_llama_profile("eager", SBH * (24 + 4 * h_kv() / h + 8 * f / h), "sbh(24 + 4h_kv/h + 8f/h)")
_llama_profile("fused", SBH * (12 + 4 * h_kv() / h + 6 * f / h), "sbh(12 + 4h_kv/h + 6f/h)")


@identity("logits = 6sbV", topic=TOPIC, claim=6 * s * b * V,
          source="the article, section 4.3 (bf16 logits + fp32 copy for the loss)",
          assumptions=("bf16 logits [s, b, V]", "fp32 copy kept by the loss"))
def logits() -> sp.Expr:
    return logits_bytes()


@identity("embedding dropout, p micro-batches in flight: sbhp/t", topic=TOPIC,
          claim=s * b * h * p / t, source=SECTION43,
          assumptions=("1F1B: p micro-batches in flight on the first stage",
                       "sequence parallel", "token ids not counted (Megatron adds 8sbp)"))
def embedding_dropout() -> sp.Expr:
    return p * embedding_edge("gpt", t, True, token_ids=False).bytes()


@identity("output layer: 4sbh/t (1 + V/h)", topic=TOPIC, claim=4 * s * b * h / t * (1 + V / h),
          source=SECTION43 + "; " + MEGATRON + " compute_activation_memory",
          assumptions=("final norm input and head input in 16 bits, fp32 logits for the loss",
                       "sequence parallel, vocabulary-parallel head"))
def output_layer() -> sp.Expr:
    return output_edge(t, True).bytes()


@identity("1F1B first stage holds L layers' worth: sbhL(34 + 5as/h)", topic=TOPIC,
          claim=L * SBH * (34 + 5 * a * s / h),
          source="Korthikanti et al. 2022, section 4.2.3 (p micro-batches of L/p layers)",
          assumptions=GPT_ACTIVATIONS + ("1F1B, p stages", "embedding and output terms aside"), where=FFN_4H)
def first_stage() -> sp.Expr:
    return first_stage_activation_bytes("gpt", pipeline=p, edges=False)


@identity("interleaved 1F1B factor = 1 + (p - 1)/(p v)", topic=TOPIC,
          claim=1 + (p - 1) / (p * v),
          source=MEGATRON + " compute_activation_memory (interleaved_schedule_memory_penalty); "
                 "warm-up count from megatron/core/pipeline_parallel/schedules.py",
          assumptions=("v model chunks per rank", "first stage, (p - 1) 2 + (v - 1) p warm-up "
                       "chunks plus one"))
def interleaved() -> sp.Expr:
    return first_stage_activation_bytes("gpt", pipeline=p, virtual=v, edges=False) / (
        first_stage_activation_bytes("gpt", pipeline=p, edges=False))

