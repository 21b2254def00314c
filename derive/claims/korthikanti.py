"""Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv 2205.05198).

Activation bytes come from derive's GPT saved-for-backward table
(``derive.architectures.saved.gpt_layer_saved``) under the paper's assumptions
(section 4.1: 16-bit activations, 1-byte dropout masks, f = 4h, scores
materialised, LayerNorm statistics not counted); FLOPs from the GPT GEMM table
over the full score square. Table 3's configurations are local shapes here;
Table 5's iteration times are the paper's measurements (inputs, not derived). Here: the
activation memory (sections 4.1-4.3, Table 2, section 5's totals) and Table 3's sizes; the runs
(Table 5, Appendices A-C, sections 6.2-6.3) and section 4.2.2's collectives: derive.claims.korthikanti_runs.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import (
    embedding_edge,
    first_stage_activation_bytes,
    layer_activation_bytes,
    layer_activations,
    output_edge,
)
from derive.claims import AT_LEAST, EXACT, document, significant
from derive.claims._papers import MEGATRON_MEMORY, SEED_ARTICLE, gpt
from derive.symbols import FFN_4H, L, V, a, b, h, p, s, t, v

claim = document(
    "Korthikanti et al. 2022", "arXiv 2205.05198, Reducing Activation Recomputation in Large "
    "Transformer Models (MLSys 2023)",
    "Read in a full-text transcription of the paper. Not "
    "registered: Table 4 and section 6.2's per-layer times and their overheads (39, 7, 4, -3, 11, "
    "64 %) and Figure 8's 2 % against 36 %: ratios of measured times in which no count of derive's "
    "enters (section 6.2's expected 33 % is registered); section 6.1's 'under 20 %' and '10 % of "
    "the baseline', read off Figure 7's bars; Figure 9's per-rank memory. Table 5's full-recompute "
    "rows print iteration times only (no MFU or HFU): they enter through the throughput increase.",
).claim

#: Table 5's MFU and HFU as Megatron-LM published them (quoted in stas00/ml-engineering).
STAS_TABLE5 = ("stas00/ml-engineering training/performance/README_zh.md (MFU/HFU table Megatron-LM "
               "published: 22B 41.5/43.7, 175B 51.4/52.8, 530B 56.0/57.0, 1T 56.3/57.0 %)")
ABSTRACT = "https://mlsys.org/virtual/2023/poster/2445 (abstract: 'reduces activation memory by 5x')"
#: Where the paper's own text was read: a full-text transcription (Markdown converted from the PDF).
FULLTEXT = ("a full-text transcription of arXiv 2205.05198 (Markdown converted from the PDF)")


def transcription(where: str) -> str:
    """``checked_against`` for a value read in the transcription: where, and what it prints."""
    return f"{FULLTEXT}, {where}"


EQ_BY_TABLE5 = ("indirectly: with Table 3's configurations and Table 5's iteration times this "
                "equation reproduces Table 5's printed utilisations (" + STAS_TABLE5 + ")")

SBH = s * b * h
#: Table 3: sequence length 2048 and vocabulary 51200 for every model; t = 8 throughout.
TABLE3 = "Korthikanti et al. 2022, Table 3"
MODELS = {
    "22B": gpt("korthikanti-22b", 48, 6144, 64, 51200, 2048, TABLE3),
    "175B": gpt("korthikanti-175b (GPT-3)", 96, 12288, 96, 51200, 2048, TABLE3),
    "530B": gpt("korthikanti-530b (MT-NLG)", 105, 20480, 128, 51200, 2048, TABLE3),
    "1T": gpt("korthikanti-1t", 128, 25600, 160, 51200, 2048, TABLE3),
}
#: Table 3: (pipeline size, GPUs = 8 p, global batch size); Table 5: iteration time, present work (s).
#: Measured inputs, as Table 3 and Table 5 print them.
RUNS = {"22B": (1, 8, 4, sp.Rational(110, 100)), "175B": (8, 64, 64, sp.Rational(1375, 100)),
        "530B": (35, 280, 280, sp.Rational(3783, 100)), "1T": (64, 512, 512, sp.Rational(7149, 100))}
#: Table 5 (present work: sequence parallelism + selective recompute): MFU and HFU in %.
TABLE5 = {"22B": (41.5, 43.7), "175B": (51.4, 52.8), "530B": (56.0, 57.0), "1T": (56.3, 57.0)}
#: Table 5: iteration time with full recompute and no sequence parallelism (s, measured); the
#: throughput increase the paper prints for each model (%).
FULL_RECOMPUTE = {"22B": sp.Rational(142, 100), "175B": sp.Rational(1813, 100),
                  "530B": sp.Rational(4905, 100), "1T": sp.Rational(9442, 100)}
THROUGHPUT_INCREASE = {"22B": 29.0, "175B": 31.8, "530B": 29.7, "1T": 32.1}
TABLE5_READ = transcription("Table 5: iteration times full recompute / present work 1.42/1.10, 18.13/13.75, "
                    "49.05/37.83, 94.42/71.49 s; throughput increase 29.0, 31.8, 29.7, 32.1 %; MFU "
                    "41.5, 51.4, 56.0, 56.3 %; HFU 43.7, 52.8, 57.0, 57.0 %")


def layer_bytes(**policy: object) -> sp.Expr:
    """One GPT layer's bytes under ``policy`` at f = 4h (Table 2's assumptions)."""
    return layer_activation_bytes("gpt", "materialised", **policy).subs(FFN_4H)


def row_bytes(*names: str) -> sp.Expr:
    """Bytes of the named rows of the GPT saved table, f = 4h."""
    table = layer_activations("gpt")
    return sp.expand(sum(table[name].bytes for name in names)).subs(FFN_4H)


def tagged_bytes(*tags: str) -> sp.Expr:
    return layer_activations("gpt").where(*tags).bytes().subs(FFN_4H)


# --- section 4.1: the per-layer table, tensor by tensor -------------------------------------
for _id, _section, _text, _value, _names in (
        ("qkv-input", "4.1", "attention: the QKV projection keeps its input, 2sbh", 2 * SBH,
         ("QKV projection input",)),
        ("qk", "4.1", "QK^T keeps Q and K, 4sbh", 4 * SBH, ("Q", "K")),
        ("softmax-output", "4.1", "softmax output kept by backward, 2as^2b", 2 * a * s**2 * b,
         ("softmax output",)),
        ("softmax-dropout-mask", "4.1", "the softmax dropout mask, as^2b (1 byte each)",
         a * s**2 * b, ("attention dropout mask",)),
        ("attention-over-values", "4.1", "attention over values keeps the dropout output (2as^2b) "
         "and V (2sbh)", 2 * a * s**2 * b + 2 * SBH, ("attention dropout output", "V")),
        ("projection-and-dropout", "4.1", "output projection input 2sbh and its dropout mask sbh",
         3 * SBH, ("output projection input", "attention-output dropout mask")),
        ("mlp-fc1-input", "4.1", "MLP: the first linear keeps its input, 2sbh", 2 * SBH,
         ("fc1 input",)),
        ("mlp-gelu-input", "4.1", "GeLU keeps its input, 8sbh", 8 * SBH, ("GELU input",)),
        ("mlp-fc2-input", "4.1", "the second linear keeps GeLU's output, 8sbh", 8 * SBH,
         ("fc2 input",)),
        ("mlp-dropout-mask", "4.1", "the MLP dropout mask, sbh", SBH, ("MLP dropout mask",)),
        ("layernorms", "4.1", "the two LayerNorms keep their inputs, 4sbh", 4 * SBH,
         ("layer input", "post_attention_layernorm input")),
):
    claim(f"korthikanti.4.1.{_id}", _section, _text, _value, "B", EXACT,
          lambda _names=_names: row_bytes(*_names), checked_against=SEED_ARTICLE)
claim("korthikanti.4.1.attention-block", "4.1", "attention block total: 11sbh + 5as^2b",
      11 * SBH + 5 * a * s**2 * b, "B", EXACT, lambda: tagged_bytes("attention"),
      checked_against=SEED_ARTICLE + ": LayerNorm 1 + attention 13h + 5as, less the 2h LayerNorm input")
claim("korthikanti.4.1.mlp-block", "4.1", "MLP block total: 19sbh", 19 * SBH, "B", EXACT,
      lambda: tagged_bytes("mlp"),
      checked_against=SEED_ARTICLE + ": LayerNorm 2 + MLP 21h, less the 2h LayerNorm input")
claim("korthikanti.eq1", "4.1, Eq. 1", "activations per layer: sbh(34 + 5as/h)",
      SBH * (34 + 5 * a * s / h), "B", EXACT, lambda: layer_bytes(), checked_against=SEED_ARTICLE)

# --- Table 2: per-layer bytes under each parallel / recompute policy -------------------------
_SPLIT = SEED_ARTICLE + " (34 = 10 + 24: the 24 and the 5as score term split by t)"
for _id, _text, _value, _policy, _source in (
        ("none", "no parallelism", SBH * (34 + 5 * a * s / h), {}, SEED_ARTICLE),
        ("tp", "tensor parallel (baseline): sbh(10 + 24/t + 5as/ht)",
         SBH * (10 + 24 / t + 5 * a * s / (h * t)), {"tensor_parallel": t}, _SPLIT),
        ("tp-sp", "tensor + sequence parallel: sbh(34/t + 5as/ht)",
         SBH * (34 / t + 5 * a * s / (h * t)), {"tensor_parallel": t, "sequence_parallel": True},
         "public code transcribing Table 2 (get_activation_memory, tensor + sequence parallel: "
         "s b h / t (34 + 5as/h))"),
        ("tp-selective", "tensor parallel + selective recompute: sbh(10 + 24/t)",
         SBH * (10 + 24 / t), {"tensor_parallel": t, "recompute": "selective"},
         MEGATRON_MEMORY.replace("compute_activation_memory", "compute_activation_memory_without_sp")),
        ("tp-sp-selective", "tensor + sequence parallel + selective recompute: sbh(34/t)",
         SBH * 34 / t, {"tensor_parallel": t, "sequence_parallel": True, "recompute": "selective"},
         MEGATRON_MEMORY + ": (18 + 4f/h)/t per layer"),
        ("full", "full activation recompute: 2sbh", 2 * SBH, {"recompute": "full"},
         SEED_ARTICLE.replace("section 4.1", "section 4.3") + ": full recompute keeps the layer input, 2sbh"),
):
    claim(f"korthikanti.table2.{_id}", "Table 2", _text, _value, "B", EXACT,
          lambda _policy=_policy: layer_bytes(**_policy), checked_against=_source)
claim("korthikanti.eq2", "4.2.1, Eq. 2", "tensor parallel: sbh(10 + 24/t + 5as/ht) per layer",
      SBH * (10 + 24 / t + 5 * a * s / (h * t)), "B", EXACT, lambda: layer_bytes(tensor_parallel=t),
      checked_against=_SPLIT)

# --- section 4.2.3 / 5: pipeline first stage, interleaving, selective total ------------------
_SP = {"tensor_parallel": t, "sequence_parallel": True}
claim("korthikanti.4.2.3.first-stage", "4.2.3", "1F1B first stage (p micro-batches of L/p layers): "
      "sbhL/t (34 + 5as/h)", SBH * L / t * (34 + 5 * a * s / h), "B", EXACT,
      lambda: first_stage_activation_bytes("gpt", pipeline=p, edges=False, **_SP).subs(FFN_4H),
      checked_against=transcription("Eq. 5: total activations memory sbhL/t (34 + 5as/h)"))
claim("korthikanti.4.2.3.interleaved", "4.2.3", "interleaved schedule with v stages per rank "
      "(the paper's m) multiplies the first stage by 1 + (p - 1)/(p v)", 1 + (p - 1) / (p * v),
      "ratio", EXACT,
      lambda: sp.cancel(first_stage_activation_bytes("gpt", pipeline=p, virtual=v, edges=False)
                        / first_stage_activation_bytes("gpt", pipeline=p, edges=False)),
      checked_against=MEGATRON_MEMORY + ": interleaved_schedule_memory_penalty; " + transcription(
          "section 4.2.3: 'scaled by (1 + (p - 1)/(pm))'"))
claim("korthikanti.5.selective-total", "5", "with sequence parallel and selective recompute the "
      "first stage needs 34 sbhL/t", 34 * SBH * L / t, "B", EXACT,
      lambda: first_stage_activation_bytes("gpt", pipeline=p, edges=False, recompute="selective",
                                           **_SP).subs(FFN_4H),
      checked_against=MEGATRON_MEMORY + ": per-layer bytes x num_layers / t")

claim("korthikanti.abstract.5x", "abstract / 5", "sequence parallelism with selective recompute "
      "reduces activation memory about 5x (530B, t = 8: tensor parallel baseline over the new "
      "per-layer bytes)", 5, "x", significant(1),
      lambda: MODELS["530B"].subs(layer_bytes(tensor_parallel=8) / layer_bytes(
          tensor_parallel=8, sequence_parallel=True, recompute="selective")),
      checked_against=ABSTRACT)

# --- section 4.3: the terms outside the layers --------------------------------------------
claim("korthikanti.4.3.embedding-dropout", "4.3", "input embedding dropout mask on the first "
      "stage, p micro-batches, sequence parallel: sbhp/t", SBH * p / t, "B", EXACT,
      lambda: p * embedding_edge("gpt", t, True, token_ids=False).bytes(),
      checked_against=MEGATRON_MEMORY + ": 'Dropout in embedding layer', sbhp, divided by t")
_OUT = output_edge(t, True)
claim("korthikanti.4.3.final-layernorm", "4.3", "output layer norm input: 2sbh/t", 2 * SBH / t,
      "B", EXACT, lambda: _OUT["final norm input"].bytes,
      checked_against=transcription("section 4.3: the layer-norm before the output layer 'requires 2sbh/t'"))
claim("korthikanti.4.3.output-projection", "4.3", "output projection input: 2sbh/t", 2 * SBH / t,
      "B", EXACT, lambda: _OUT["output projection input"].bytes,
      checked_against=transcription("section 4.3: the output projection stores 'its input with size 2sbh/t'"))
claim("korthikanti.4.3.logits-fp32", "4.3", "cross entropy keeps fp32 logits: 4sbv/t",
      4 * s * b * V / t, "B", EXACT, lambda: _OUT.where("logits").bytes(),
      checked_against=transcription("section 4.3: logits 'in 32-bit floating point ... 4sbv/t'"))
claim("korthikanti.4.3.output-total", "4.3", "output layer total: 4sbh/t (1 + v/h)",
      4 * SBH / t * (1 + V / h), "B", EXACT, lambda: _OUT.bytes(),
      checked_against=MEGATRON_MEMORY + ": 'Inputs to output layer and CE loss', 4sbh(1 + V/h)/t")


def _first_stage(edges: bool) -> sp.Expr:
    """Eq. 5's first stage (tensor + sequence parallel, no recompute, p = 1), with or without section 4.3's terms."""
    return first_stage_activation_bytes("gpt", pipeline=1, edges=edges, token_ids=False,
                                        **_SP).subs(FFN_4H)


claim("korthikanti.4.3.extra-total", "4.3", "the terms outside the layers at p = 1: "
      "sbhL/t (p/L + 4/L (1 + v/h))", SBH * L / t * (1 / L + 4 / L * (1 + V / h)), "B", EXACT,
      lambda: _first_stage(True) - _first_stage(False),
      checked_against=transcription("section 4.3: sbhL/t (p/L + delta_{p=1} 4/L (1 + v/h))"))
_SHARE_WHY = ("the paper's own expression gives the same: at p = 1 the terms outside the layers are "
              "sbh/t (5 + 4v/h) = 38.3 sbh/t (v/h = 25/3) against 48 layers of sbh/t (34 + 5as/h) = "
              "6752 sbh/t (5as/h = 320/3), 0.57 % of the total; under 0.01 holds only for the share "
              "as a fraction (1 %)")
claim("korthikanti.4.3.22B-share", "4.3", "for the 22B model the terms outside the layers are less "
      "than 0.01 % of the total activation memory (Eq. 5 holds at least 99.99 % of it)", 99.99,
      "%", AT_LEAST, lambda: MODELS["22B"].subs(_first_stage(False) / _first_stage(True), t=8),
      note=_SHARE_WHY,
      checked_against=transcription("section 4.3: 'for a model with 22B parameters, these extra terms "
                            "account for less than 0.01% of the total activation memory "
                            "requirements'"))

# --- Table 3: the configurations -> N -------------------------------------------------------
for _name, _printed, _rounding in (("22B", 22, significant(2)), ("175B", 175, significant(3)),
                                   ("530B", 530, significant(3)), ("1T", 1000, significant(1))):
    claim(f"korthikanti.table3.{_name}-N", "Table 3", f"the {_name} configuration has "
          f"{_name} parameters", _printed, "billion parameters", _rounding,
          lambda _name=_name: MODELS[_name].parameters,
          checked_against=transcription("Table 3: 22B 64 heads, h 6144, 48 layers; 175B (GPT-3) 96, 12288, "
                                "96; 530B (MT-NLG) 128, 20480, 105; 1T 160, 25600, 128; s = 2048, "
                                "v = 51200 (section 6)"))
