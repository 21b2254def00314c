"""Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (arXiv 2104.04473).

Table 1's GPT configurations are local shapes (V = 51200, s = 2048, f = 4h);
parameter counts come from derive's GPT parameter table, FLOPs from its GEMM
table (full score square, every layer recomputed once: the paper's setting).
Achieved teraFLOP/s per GPU, GPU counts, token counts and batch sizes are the
paper's inputs.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import flops_per_token
from derive.architectures.decoder import GPT
from derive.architectures.gemms import flops
from derive.architectures.tables import layer_gemms, model_parameters, output_gemms, parameter_count
from derive.claims import EXACT, Alternative, decimals, document, significant
from derive.claims._comm import ACTIVATION, rows, sent, tp_layer_elements
from derive.claims._papers import A100_PEAK, as_printed, gpt
from derive.conventions import CONVENTIONS
from derive.symbols import FFN_4H, B, L, V, b, d, h, m, p, s, t

claim = document("Narayanan et al. 2021", "arXiv 2104.04473, Efficient Large-Scale Language Model "
                 "Training on GPU Clusters Using Megatron-LM (SC21)",
                 "Every claim read in a Markdown transcription of the paper (Table 1 as a table). "
                 "Not checked: the figures and section 5.3-5.9's throughputs (measurements, not "
                 "accounts).").claim

#: The paper (sections 1-5, Table 1 with every column, Eq. 2-4, the worked examples) as Markdown.
PAPER = ("a Markdown transcription of arXiv 2104.04473 (SC21 version; Table 1 with all eleven "
         "columns, Eq. 2-4 and section 5.1's training-time estimates)")

PSGLLM = ("https://github.com/boredengineering/model-parallelism-LNNs (transcribes Eq. 2, P = "
          "12lh^2(1 + 13/12h + (V + s)/12lh), and Eq. 3, F = 96Bslh^2(1 + s/6h + V/16lh)); "
          "SimonZsx/PSGLLM calcu.md (the same Eq. 2 and Eq. 3's 96Bsh^2 + 16Bs^2h per layer)")
EQ4 = ("https://github.com/Zenodia/Megatron-LM (Eq. 4's training-time estimate 8TP/(nX), with GPT-3's "
       "T = 300B tokens, n = 1024 GPUs, X = 140 teraFLOP/s)")
#: Table 1's parameter counts with their shapes, as copied into public code and READMEs.
TABLE1_SHAPES = ("aws-samples/awsome-distributed-training 3.test_cases/megatron/megatron-lm/slurm/gpt3/"
                 "README.md (Table 1's 1.7B ... 310.1B with heads, hidden size and layers)")
TABLE1_LARGEST = ("public code copying Table 1's shapes ('megatron-gpt-529.6b': 105 layers, h = 20480, "
                  "128 heads; 'megatron-gpt-1008b': 128, 25600, 160)")
#: Confirmed rows of Table 1 and section 5.1: claim id suffix -> where the printed value was read.
CONFIRMED = {
    "1008.0b-aggregate": "https://redlib.fmhy.net/r/mlscaling (Narayanan et al. 2021: '1t-parameter "
                         "models at 502 petaFLOP/s', 3072 A100 GPUs)",
    "gpt3-175b-days": "https://libreddit.marty.tf/r/GPT3/comments/p1xf10 (citing Narayanan et al. "
                      "2021: 'The Jul/2021 research estimates of 34 days used ... A100 GPUs'); "
                      "https://xie.infoq.cn/article/dd6c3d0f80653ffc35135ca1f (175B on 1024 A100: "
                      "34 days)",
    "1t-days": "https://xie.infoq.cn/article/dd6c3d0f80653ffc35135ca1f (a trillion parameters on "
               "3072 A100: at least 84 days, quoting Narayanan et al. 2021)",
}

TABLE1 = "Narayanan et al. 2021, Table 1"
#: Table 1: parameters (billion, as printed), heads, hidden size, layers, GPUs, achieved
#: teraFLOP/s per GPU, percentage of theoretical peak, aggregate petaFLOP/s (as printed).
ROWS = (
    ("1.7", 24, 2304, 24, 32, 137, 44, "4.4"),
    ("3.6", 32, 3072, 30, 64, 138, 44, "8.8"),
    ("7.5", 32, 4096, 36, 128, 142, 46, "18.2"),
    ("18.4", 48, 6144, 40, 256, 135, 43, "34.6"),
    ("39.1", 64, 8192, 48, 512, 138, 44, "70.8"),
    ("76.1", 80, 10240, 60, 1024, 140, 45, "143.8"),
    ("145.6", 96, 12288, 80, 1536, 148, 47, "227.1"),
    ("310.1", 128, 16384, 96, 1920, 155, 50, "297.4"),
    ("529.6", 128, 20480, 105, 2520, 163, 52, "410.2"),
    ("1008.0", 160, 25600, 128, 3072, 163, 52, "502.0"),
)
MODELS = {row[0]: gpt(f"narayanan-{row[0]}b", row[3], row[2], row[1], 51200, 2048, TABLE1)
          for row in ROWS}
TERA, DAY = 10**12, 86400


# --- Eq. 2-4 -------------------------------------------------------------------------------
claim("narayanan.eq2", "5.1, Eq. 2", "parameters: P = 12lh^2 (1 + 13/12h + (V + s)/12lh)",
      12 * L * h**2 * (1 + sp.Rational(13, 12) / h + (V + s) / (12 * L * h)), "parameters", EXACT,
      lambda: parameter_count(GPT).subs(FFN_4H),
      alternative=Alternative("derive's GPT table without the final LayerNorm (weight and bias, "
                              "2h), which Eq. 2 leaves out",
                              lambda: model_parameters(GPT).filter(
                                  lambda t: not t.name.startswith("final_layernorm")).numel()
                              .subs(FFN_4H)), checked_against=f"{PAPER}; {PSGLLM}")
claim("narayanan.eq3", "5.1, Eq. 3", "FLOPs per iteration with activation recompute: "
      "96Bslh^2 (1 + s/6h + V/16lh)", 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h)),
      "FLOP", EXACT, lambda: (B * s * flops_per_token(GPT, "full", "full-layers")).subs(FFN_4H),
      checked_against=f"{PAPER}; {PSGLLM}")
claim("narayanan.eq4", "5.1, Eq. 4", "end-to-end training time ~ 8TP/(nX): 8 FLOPs per parameter "
      "per token (forward 2, backward 4, recomputed forward 2)", 8, "x", EXACT,
      lambda: sp.limit(flops_per_token(GPT, "full", "full-layers").subs(FFN_4H)
                       / parameter_count(GPT).subs(FFN_4H), h, sp.oo),
      note="8 is the limit of derive's count over P for large h (attention and logits aside)",
      checked_against=f"{PAPER}; {EQ4}")

# --- Table 1 -------------------------------------------------------------------------------
for _p, _a, _h, _l, _gpus, _tflops, _percent, _aggregate in ROWS:
    claim(f"narayanan.table1.{_p}b-parameters", "Table 1", f"{_l} layers, h = {_h}, {_a} heads: "
          f"{_p} billion parameters", float(_p), "billion parameters", as_printed(_p),
          lambda _p=_p: MODELS[_p].parameters,
          checked_against=f"{PAPER}; "
                          + (TABLE1_LARGEST if _p in ("529.6", "1008.0") else TABLE1_SHAPES))
    claim(f"narayanan.table1.{_p}b-percent-of-peak", "Table 1", f"{_p}B: {_tflops} teraFLOP/s per "
          f"GPU is {_percent} % of the A100's peak", _percent, "%", decimals(0),
          lambda _tflops=_tflops: sp.Rational(_tflops * TERA, A100_PEAK),
          checked_against=f"{PAPER} (Table 1; the peak: 312 teraFLOP/s, section 5)")
    claim(f"narayanan.table1.{_p}b-aggregate", "Table 1", f"{_p}B: {_gpus} GPUs at {_tflops} "
          f"teraFLOP/s each give {_aggregate} petaFLOP/s", float(_aggregate), "PFLOP/s",
          as_printed(_aggregate),
          lambda _gpus=_gpus, _tflops=_tflops: sp.Integer(_gpus * _tflops * TERA),
          note=(f"Table 1's own {_aggregate} petaFLOP/s over {_gpus} GPUs is "
                f"{float(_aggregate) * 1000 / _gpus:.1f} teraFLOP/s per GPU, printed as {_tflops}: "
                "the aggregate was computed before the per-GPU figure was rounded"),
          checked_against="; ".join(filter(None, (PAPER, CONFIRMED.get(f"{_p}b-aggregate")))))


# --- worked examples (section 5.1) ------------------------------------------------------------
def _days(model_name: str, tokens: int, gpus: int, tflops: int, per_token: sp.Expr) -> sp.Expr:
    """tokens x FLOPs per token / (GPUs x achieved FLOP/s), in days."""
    return tokens * MODELS[model_name].at(per_token) / (gpus * tflops * TERA * DAY)


_RECOMPUTED = flops_per_token(GPT, "full", "full-layers")
_EIGHT_P = ("the paper's Eq. 4 (8P FLOPs per token: the attention-score and logit terms of "
            "Eq. 3 left out)")
MODELS["175"] = gpt("narayanan-gpt3-175b", 96, 12288, 96, 51200, 2048,
                    "Narayanan et al. 2021, section 5.1 (GPT-3: 96 layers, h = 12288, 96 heads)")
for _id, _section, _printed in (("5.1.gpt3-parameters", "5.1", "175"),
                                ("table2.gpt3-parameters", "Table 2", "174.6")):
    claim(f"narayanan.{_id}", _section, f"GPT-3 (96 layers, h = 12288, 96 heads): {_printed} "
          "billion parameters", float(_printed), "billion parameters",
          significant(3) if _section == "5.1" else as_printed(_printed),
          lambda: MODELS["175"].parameters, checked_against=PAPER)
for _id, _model, _tokens, _gpus, _tflops, _printed in (
        ("gpt3-175b-days", "175", 300 * 10**9, 1024, 140, 34),
        ("1t-days", "1008.0", 450 * 10**9, 3072, 163, 84)):
    claim(f"narayanan.5.1.{_id}", "5.1", f"{_model}B on {_tokens // 10**9}B tokens, {_gpus} GPUs at "
          f"{_tflops} teraFLOP/s: about {_printed} days", _printed, "days", decimals(0),
          lambda _m=_model, _t=_tokens, _g=_gpus, _x=_tflops: _days(_m, _t, _g, _x, _RECOMPUTED),
          alternative=Alternative(_EIGHT_P, lambda _m=_model, _t=_tokens, _g=_gpus, _x=_tflops:
                                  _days(_m, _t, _g, _x, CONVENTIONS["narayanan-8P"]("gpt"))),
          note="Eq. 3's attention term s/6h adds 1-3 % to 8P at these shapes",
          checked_against=f"{PAPER}; {CONFIRMED[_id]}")


# --- Table 2: training days for 300B tokens (Eq. 3 at the measured throughput) ----------------------
#: Table 2: scheme, model (MODELS key), GPUs, achieved teraFLOP/s per GPU, days for 300B tokens.
TABLE2 = (("zero3", "175", 384, 144, 90), ("zero3", "175", 768, 88, 74), ("zero3", "175", 1536, 44, 74),
          ("zero3", "529.6", 640, 138, 169), ("zero3", "529.6", 1120, 98, 137),
          ("zero3", "529.6", 2240, 48, 140), ("ptd", "175", 384, 153, 84),
          ("ptd", "175", 768, 149, 43), ("ptd", "175", 1536, 141, 23),
          ("ptd", "529.6", 560, 171, 156), ("ptd", "529.6", 1120, 167, 80),
          ("ptd", "529.6", 2240, 159, 42))
for _scheme, _model, _gpus, _tflops, _printed in TABLE2:
    _slow, _fast = (float(_days(_model, 300 * 10**9, _gpus, _x, _RECOMPUTED))
                    for _x in (_tflops + sp.Rational(1, 2), _tflops - sp.Rational(1, 2)))
    claim(f"narayanan.table2.{_scheme}-{_model}b-{_gpus}gpu-days", "Table 2",
          f"{'ZeRO-3' if _scheme == 'zero3' else 'PTD-P'}, {_model}B on {_gpus} GPUs at {_tflops} "
          f"teraFLOP/s: {_printed} days for 300B tokens", _printed, "days", decimals(0),
          lambda _m=_model, _g=_gpus, _x=_tflops: _days(_m, 300 * 10**9, _g, _x, _RECOMPUTED),
          note=f"Eq. 3's count at the printed throughput; {_tflops} +- 0.5 teraFLOP/s (its "
               f"rounding) gives {_slow:.2f} to {_fast:.2f} days",
          checked_against=PAPER)

# --- Appendix: the FLOP count, GEMM by GEMM ---------------------------------------------------------
def _layer(*names: str, passes: tuple[str, ...] = ("forward",)) -> sp.Expr:
    """B s x the FLOPs of the named GEMMs of derive's GPT layer (full score square, f = 4h)."""
    layer = layer_gemms(GPT, "full").filter(lambda gemm: not names or gemm.name in names)
    return sp.expand(B * s * flops(layer, *passes).subs(FFN_4H))


SCORES, CONTEXT = "attention.scores (Q K^T)", "attention.context (P V)"
APPENDIX = f"{PAPER} (Appendix: Floating-point operations)"
for _id, _text, _value, _names in (
        ("qkv", "key, query and value transformation: 6Bsh^2", 6 * B * s * h**2,
         ("attention.query_key_value.weight",)),
        ("scores", "attention matrix computation: 2Bs^2h", 2 * B * s**2 * h, (SCORES,)),
        ("context", "attention over values: 2Bs^2h", 2 * B * s**2 * h, (CONTEXT,)),
        ("projection", "post-attention linear projection: 2Bsh^2", 2 * B * s * h**2,
         ("attention.dense.weight",)),
        ("ffn", "feed-forward network (h -> 4h -> h): 16Bsh^2", 16 * B * s * h**2,
         ("mlp.dense_h_to_4h.weight", "mlp.dense_4h_to_h.weight")),
        ("layer-forward", "each transformer layer: 24Bsh^2 + 4Bs^2h in the forward pass",
         24 * B * s * h**2 + 4 * B * s**2 * h, ())):
    claim(f"narayanan.appendix.{_id}", "Appendix", f"forward FLOPs, {_text}", _value, "FLOP", EXACT,
          lambda _names=_names: _layer(*_names), checked_against=APPENDIX)
claim("narayanan.appendix.backward-2x", "Appendix", "the backward pass requires double the forward "
      "FLOPs (gradients of inputs and weights)", 2, "x", EXACT,
      lambda: sp.cancel(_layer(passes=("dgrad", "wgrad")) / _layer()), checked_against=APPENDIX)
claim("narayanan.appendix.layer-recompute", "Appendix", "with activation recomputation each layer "
      "costs 4 x (24Bsh^2 + 4Bs^2h) = 96Bsh^2 (1 + s/6h)", 96 * B * s * h**2 * (1 + s / (6 * h)),
      "FLOP", EXACT,
      lambda: sp.expand(B * s * (flops_per_token(GPT, "full", "full-layers")
                                 - flops(output_gemms(GPT))).subs(FFN_4H) / L),
      checked_against=APPENDIX)
claim("narayanan.appendix.logit-forward", "Appendix", "logit layer: 2BshV FLOPs in the forward pass",
      2 * B * s * h * V, "FLOP", EXACT,
      lambda: sp.expand(B * s * flops(output_gemms(GPT), "forward")), checked_against=APPENDIX)
claim("narayanan.appendix.logit-total", "Appendix", "logit layer: 4BshV backward, 6BshV in total",
      6 * B * s * h * V, "FLOP", EXACT, lambda: sp.expand(B * s * flops(output_gemms(GPT))),
      checked_against=APPENDIX)


# --- sections 3.2, 3.3.1 and 4.1: communication volumes (derive.accounts.comm's rows) ----------
#: Where sections 3.2-4.1 were read: a Markdown text of the paper in stored public repository content.
COMM_TEXT = ("a Markdown text of arXiv 2104.04473 (sections 3.2-4.1, found by exact-string search of "
             "public repository content)")
claim("narayanan.3.2.pipeline-bsh", "3.2", "pipeline parallelism: bsh between consecutive devices per "
      "micro-batch, forward or backward", b * s * h, "elements", EXACT,
      lambda: sent(rows(pp=2), "pp.forward.send") / ACTIVATION,
      checked_against=COMM_TEXT + ": 'for each microbatch is bsh, where s is the sequence length and h "
                                  "is the hidden size'")
claim("narayanan.3.2.tensor-8bsh", "3.2", "tensor parallelism: 8bsh(t-1)/t per layer per device for "
      "each micro-batch", 8 * b * s * h * (t - 1) / t, "elements", EXACT,
      lambda: tp_layer_elements(tp=2),
      checked_against=COMM_TEXT + ": 'leading to a total communication of 8bsh((t-1)/t) per layer per "
                                  "device for each microbatch'")
claim("narayanan.3.2.tensor-stage", "3.2", "per micro-batch a stage of l^stage = L/p layers moves "
      "l^stage x 8bsh(t-1)/t", L / p * 8 * b * s * h * (t - 1) / t, "elements", EXACT,
      lambda: sp.Add(*(row.sent * row.count for row in rows(tp=2, pp=2)
                       if row.name.startswith(("tp.attention", "tp.mlp")))) / (m * ACTIVATION),
      checked_against=COMM_TEXT + ": 'l^stage . (8bsh((t-1)/t))'")
claim("narayanan.3.3.1.ring-d", "3.3.1", "a ring-based all-reduce's time scales with (d-1)/d", (d - 1) / d,
      "ratio", EXACT,
      lambda: next(sp.cancel(row.sent / (2 * row.payload)) for row in rows(dp=2, whole_model=True)
                   if row.name == "dp.grads.all-reduce"),
      checked_against=COMM_TEXT + ": 'the communication time for a ring-based implementation scales "
                                  "with (d-1)/d = 1 - 1/d'")
claim("narayanan.4.1.scatter-gather-bsh-t", "4.1", "with the scatter/gather optimisation, bsh/t between "
      "consecutive stages", b * s * h / t, "elements", EXACT,
      lambda: sent(rows(pp=2, tp=2, scatter_gather=True), "pp.forward.send") / ACTIVATION,
      checked_against=COMM_TEXT + ": 'is reduced to bsh/t, where t is the tensor-model-parallel size'")
