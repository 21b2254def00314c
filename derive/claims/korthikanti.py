"""Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv 2205.05198).

Activation bytes come from derive's GPT saved-for-backward table
(``derive.architectures.saved.gpt_layer_saved``) under the paper's assumptions
(section 4.1: 16-bit activations, 1-byte dropout masks, f = 4h, scores
materialised, LayerNorm statistics not counted); FLOPs from the GPT GEMM table
over the full score square. Table 3's configurations are local shapes here;
Table 5's iteration times are the paper's measurements (inputs, not derived).
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
from derive.accounts.flops import flops_per_token, mfu
from derive.claims import EXACT, Alternative, decimals, document, significant
from derive.claims._papers import A100_PEAK, MEGATRON_MEMORY, SEED_ARTICLE, gpt
from derive.conventions import CONVENTIONS
from derive.symbols import FFN_4H, B, L, V, a, b, h, p, s, t, v

claim = document(
    "Korthikanti et al. 2022", "arXiv 2205.05198, Reducing Activation Recomputation in Large "
    "Transformer Models (MLSys 2023)",
    "Not registered: Appendix B's 2.73 GB, section 4.3's stated share of the terms outside the "
    "layers, and Table 5's full-recompute rows: no stored copy of the paper's text was found, so "
    "their inputs and printed values could not be read. Unconfirmed (no verdict): section 5's "
    "70/65 % and 2.7/1.6 %, the 1F1B first stage with the score term and section 4.3's three "
    "output terms taken apart.",
).claim

#: Table 5's MFU and HFU as Megatron-LM published them (quoted in stas00/ml-engineering).
STAS_TABLE5 = ("stas00/ml-engineering training/performance/README_zh.md (MFU/HFU table Megatron-LM "
               "published: 22B 41.5/43.7, 175B 51.4/52.8, 530B 56.0/57.0, 1T 56.3/57.0 %)")
ABSTRACT = "https://mlsys.org/virtual/2023/poster/2445 (abstract: 'reduces activation memory by 5x')"
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
RUNS = {"22B": (1, 8, 4, sp.Rational(110, 100)), "175B": (8, 64, 64, sp.Rational(1375, 100)),
        "530B": (35, 280, 280, sp.Rational(3783, 100)), "1T": (64, 512, 512, sp.Rational(7149, 100))}
#: Table 5 (present work: sequence parallelism + selective recompute): MFU and HFU in %.
TABLE5 = {"22B": (41.5, 43.7), "175B": (51.4, 52.8), "530B": (56.0, 57.0), "1T": (56.3, 57.0)}


def _layer(**policy: object) -> sp.Expr:
    """One GPT layer's bytes under ``policy`` at f = 4h (Table 2's assumptions)."""
    return layer_activation_bytes("gpt", "materialised", **policy).subs(FFN_4H)


def _rows(*names: str) -> sp.Expr:
    """Bytes of the named rows of the GPT saved table, f = 4h."""
    table = layer_activations("gpt")
    return sp.expand(sum(table[name].bytes for name in names)).subs(FFN_4H)


def _tagged(*tags: str) -> sp.Expr:
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
          lambda _names=_names: _rows(*_names), checked_against=SEED_ARTICLE)
claim("korthikanti.4.1.attention-block", "4.1", "attention block total: 11sbh + 5as^2b",
      11 * SBH + 5 * a * s**2 * b, "B", EXACT, lambda: _tagged("attention"),
      checked_against=SEED_ARTICLE + ": LayerNorm 1 + attention 13h + 5as, less the 2h LayerNorm input")
claim("korthikanti.4.1.mlp-block", "4.1", "MLP block total: 19sbh", 19 * SBH, "B", EXACT,
      lambda: _tagged("mlp"),
      checked_against=SEED_ARTICLE + ": LayerNorm 2 + MLP 21h, less the 2h LayerNorm input")
claim("korthikanti.eq1", "4.1, Eq. 1", "activations per layer: sbh(34 + 5as/h)",
      SBH * (34 + 5 * a * s / h), "B", EXACT, lambda: _layer(), checked_against=SEED_ARTICLE)

# --- Table 2: per-layer bytes under each parallel / recompute policy -------------------------
_SPLIT = SEED_ARTICLE + " (34 = 10 + 24: the 24 and the 5as score term split by t)"
for _id, _text, _value, _policy, _source in (
        ("none", "no parallelism", SBH * (34 + 5 * a * s / h), {}, SEED_ARTICLE),
        ("tp", "tensor parallel (baseline): sbh(10 + 24/t + 5as/ht)",
         SBH * (10 + 24 / t + 5 * a * s / (h * t)), {"tensor_parallel": t}, _SPLIT),
        ("tp-sp", "tensor + sequence parallel: sbh(34/t + 5as/ht)",
         SBH * (34 / t + 5 * a * s / (h * t)), {"tensor_parallel": t, "sequence_parallel": True},
         "public code transcribing Table 2 (get_activation_memory, tensor + sequence parallel: "
         "s b h / t (34 + 5as/h); search-index file 49393662229)"),
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
          lambda _policy=_policy: _layer(**_policy), checked_against=_source)
claim("korthikanti.eq2", "4.2.1, Eq. 2", "tensor parallel: sbh(10 + 24/t + 5as/ht) per layer",
      SBH * (10 + 24 / t + 5 * a * s / (h * t)), "B", EXACT, lambda: _layer(tensor_parallel=t),
      checked_against=_SPLIT)

# --- section 4.2.3 / 5: pipeline first stage, interleaving, selective total ------------------
_SP = {"tensor_parallel": t, "sequence_parallel": True}
claim("korthikanti.4.2.3.first-stage", "4.2.3", "1F1B first stage (p micro-batches of L/p layers): "
      "sbhL/t (34 + 5as/h)", SBH * L / t * (34 + 5 * a * s / h), "B", EXACT,
      lambda: first_stage_activation_bytes("gpt", pipeline=p, edges=False, **_SP).subs(FFN_4H))
claim("korthikanti.4.2.3.interleaved", "4.2.3", "interleaved schedule with v stages per rank "
      "(the paper's m) multiplies the first stage by 1 + (p - 1)/(p v)", 1 + (p - 1) / (p * v),
      "ratio", EXACT,
      lambda: sp.cancel(first_stage_activation_bytes("gpt", pipeline=p, virtual=v, edges=False)
                        / first_stage_activation_bytes("gpt", pipeline=p, edges=False)),
      checked_against=MEGATRON_MEMORY + ": interleaved_schedule_memory_penalty")
claim("korthikanti.5.selective-total", "5", "with sequence parallel and selective recompute the "
      "first stage needs 34 sbhL/t", 34 * SBH * L / t, "B", EXACT,
      lambda: first_stage_activation_bytes("gpt", pipeline=p, edges=False, recompute="selective",
                                           **_SP).subs(FFN_4H),
      checked_against=MEGATRON_MEMORY + ": per-layer bytes x num_layers / t")

claim("korthikanti.abstract.5x", "abstract / 5", "sequence parallelism with selective recompute "
      "reduces activation memory about 5x (530B, t = 8: tensor parallel baseline over the new "
      "per-layer bytes)", 5, "x", significant(1),
      lambda: MODELS["530B"].subs(_layer(tensor_parallel=8) / _layer(
          tensor_parallel=8, sequence_parallel=True, recompute="selective")),
      checked_against=ABSTRACT)

# --- section 4.3: the terms outside the layers --------------------------------------------
claim("korthikanti.4.3.embedding-dropout", "4.3", "input embedding dropout mask on the first "
      "stage, p micro-batches, sequence parallel: sbhp/t", SBH * p / t, "B", EXACT,
      lambda: p * embedding_edge("gpt", t, True, token_ids=False).bytes(),
      checked_against=MEGATRON_MEMORY + ": 'Dropout in embedding layer', sbhp, divided by t")
_OUT = output_edge(t, True)
claim("korthikanti.4.3.final-layernorm", "4.3", "output layer norm input: 2sbh/t", 2 * SBH / t,
      "B", EXACT, lambda: _OUT["final norm input"].bytes)
claim("korthikanti.4.3.output-projection", "4.3", "output projection input: 2sbh/t", 2 * SBH / t,
      "B", EXACT, lambda: _OUT["output projection input"].bytes)
claim("korthikanti.4.3.logits-fp32", "4.3", "cross entropy keeps fp32 logits: 4sbv/t",
      4 * s * b * V / t, "B", EXACT, lambda: _OUT.where("logits").bytes())
claim("korthikanti.4.3.output-total", "4.3", "output layer total: 4sbh/t (1 + v/h)",
      4 * SBH / t * (1 + V / h), "B", EXACT, lambda: _OUT.bytes(),
      checked_against=MEGATRON_MEMORY + ": 'Inputs to output layer and CE loss', 4sbh(1 + V/h)/t")

# --- Table 3: the configurations -> N -------------------------------------------------------
for _name, _printed, _rounding in (("22B", 22, significant(2)), ("175B", 175, significant(3)),
                                   ("530B", 530, significant(3)), ("1T", 1000, significant(1))):
    claim(f"korthikanti.table3.{_name}-N", "Table 3", f"the {_name} configuration has "
          f"{_name} parameters", _printed, "billion parameters", _rounding,
          lambda _name=_name: MODELS[_name].parameters,
          checked_against="the model names: " + STAS_TABLE5 + "; the shapes indirectly: they "
                          "reproduce Table 5's MFUs of 175B, 530B and 1T")


# --- Table 5 and Appendix A: MFU and HFU -----------------------------------------------------
def _batch_flops(name: str, recompute: str = "none") -> sp.Expr:
    """FLOPs of one iteration (B sequences of s tokens), full score square (Appendix A)."""
    _, _, batch, _ = RUNS[name]
    model = MODELS[name]
    return batch * model.seq * model.at(flops_per_token("gpt", "full", recompute))


def _utilisation(name: str, batch_flops: sp.Expr, seconds: sp.Expr | None = None) -> sp.Expr:
    """FLOPs per iteration / (iteration time x GPUs x 312 TFLOP/s)."""
    _, gpus, _, printed = RUNS[name]
    return mfu(batch_flops / (printed if seconds is None else seconds), 1, gpus, A100_PEAK)


def _eq8(name: str) -> sp.Expr:
    """Appendix A, Eq. 8 at a Table 3 configuration: the paper's selective-recompute hardware FLOPs."""
    _, _, batch, _ = RUNS[name]
    model = MODELS[name]
    return batch * model.seq * model.at(CONVENTIONS["korthikanti-selective"]("gpt"))


#: 22B: an iteration time that prints as Table 5's 1.10 s and reproduces its MFU and HFU.
UNROUNDED_22B = sp.Rational(1104, 1000)
_EQ8_READING = ("the paper's Eq. 8 (selective recompute adds 72BLsh^2 s/6h, three times the "
                "forward of QK^T and PV)")
for _name, (_mfu, _hfu) in TABLE5.items():
    _slow = _name == "22B"
    claim(f"korthikanti.table5.{_name}-mfu", "Table 5 / Appendix A", f"{_name}, sequence parallel + "
          f"selective recompute: MFU {_mfu} %", _mfu, "%", decimals(1),
          lambda _name=_name: _utilisation(_name, _batch_flops(_name)),
          alternative=Alternative("an iteration time of 1.104 s (Table 5 prints 1.10 s)",
                                  lambda: _utilisation("22B", _batch_flops("22B"), UNROUNDED_22B))
          if _slow else None, checked_against=STAS_TABLE5)
    claim(f"korthikanti.table5.{_name}-hfu", "Table 5 / Appendix A", f"{_name}: HFU {_hfu} %", _hfu,
          "%", decimals(1), lambda _name=_name: _utilisation(_name, _batch_flops(_name, "selective")),
          alternative=Alternative(
              _EQ8_READING + (" at an iteration time of 1.104 s (Table 5 prints 1.10 s)" if _slow else ""),
              lambda _name=_name, _slow=_slow: _utilisation(_name, _eq8(_name),
                                                            UNROUNDED_22B if _slow else None)),
          checked_against=STAS_TABLE5)

_EQ8_WHY = ("Eq. 8's s/3h adds 12Bs^2h per layer, three times the forward of QK^T and PV (4Bs^2h) "
            "that selective recompute runs again; derive's count (the score GEMMs' forward once "
            "more) is 72BLsh^2(1 + 2s/9h + V/12hL)")
claim("korthikanti.eq7", "Appendix A, Eq. 7", "model FLOPs per iteration: "
      "72BLsh^2(1 + s/6h + V/12hL)", 72 * B * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L)),
      "FLOP", EXACT, lambda: (B * s * flops_per_token("gpt", "full")).subs(FFN_4H),
      checked_against=EQ_BY_TABLE5.replace("utilisations", "MFUs of 175B, 530B and 1T"))
claim("korthikanti.eq8", "Appendix A, Eq. 8", "hardware FLOPs with selective recompute: "
      "72BLsh^2(1 + s/3h + V/12hL)", 72 * B * L * s * h**2 * (1 + s / (3 * h) + V / (12 * h * L)),
      "FLOP", EXACT, lambda: (B * s * flops_per_token("gpt", "full", "selective")).subs(FFN_4H),
      note=_EQ8_WHY, checked_against=EQ_BY_TABLE5.replace("utilisations", "HFUs (all four)"))
claim("korthikanti.eq9", "Appendix A, Eq. 9", "hardware FLOPs with full recompute: "
      "96BLsh^2(1 + s/6h + V/16hL)", 96 * B * L * s * h**2 * (1 + s / (6 * h) + V / (16 * h * L)),
      "FLOP", EXACT, lambda: (B * s * flops_per_token("gpt", "full", "full-layers")).subs(FFN_4H),
      checked_against="https://github.com/boredengineering/model-parallelism-LNNs (transcribes "
                      "96Bslh^2(1 + s/6h + V/16lh), the same count as Narayanan et al.'s Eq. 3)")


# --- section 5: what selective recompute saves and costs ------------------------------------
def _score_share(name: str) -> sp.Expr:
    """The recomputed score rows' share of a layer's bytes: 5as/h / (34 + 5as/h)."""
    return MODELS[name].subs(_tagged("recomputed_selective") / _layer())


def _selective_overhead(name: str, hardware: sp.Expr) -> sp.Expr:
    model = MODELS[name]
    return model.at(hardware / flops_per_token("gpt", "full")) - 1


for _name, _label, _memory, _flops in (("175B", "GPT-3", 70, 2.7), ("530B", "MT-NLG", 65, 1.6)):
    claim(f"korthikanti.5.{_name}-memory-saved", "5", f"{_label}: selective recompute saves "
          f"{_memory} % of the activation memory", _memory, "%", decimals(0),
          lambda _name=_name: _score_share(_name))
    claim(f"korthikanti.5.{_name}-flops-overhead", "5", f"{_label}: at a FLOPs overhead of "
          f"{_flops} %", _flops, "%", decimals(1),
          lambda _name=_name: _selective_overhead(_name, flops_per_token("gpt", "full", "selective")),
          alternative=Alternative("the paper's Eq. 8 over Eq. 7",
                                  lambda _name=_name: _selective_overhead(
                                      _name, CONVENTIONS["korthikanti-selective"]("gpt"))),
          note=_EQ8_WHY)
