"""FP8 against an implementation: torchao's float8 training on CPU (tests/reference/torchao_float8.json) keeps the bf16 table."""
import hashlib
import json
from collections import Counter
from pathlib import Path

from derive.architectures.saved import llama_layer_saved
from derive.recipes import SAVED_LINEAR_INPUT
from derive.validate.predicted import predicted_rows, predicted_saved_bytes

REFERENCE = Path(__file__).resolve().parent / "reference" / "torchao_float8.json"
RECORD = json.loads(REFERENCE.read_text())


def test_the_reference_is_the_recorded_copy():
    readme = (REFERENCE.parent / "README.md").read_text()
    assert hashlib.sha256(REFERENCE.read_bytes()).hexdigest() in readme
    assert RECORD["source"].startswith("torchao 0.18.0") and RECORD["kind"] == "llama-eager"


def test_torchao_converted_every_linear_and_kept_no_fp8_tensor():
    for run in RECORD["runs"]:
        assert run["converted_linears"] == 7          # wq, wk, wv, wo, w1, w3, w2
        assert {row["dtype"] for row in run["saved"]} <= {"bf16", "fp32"}
    assert SAVED_LINEAR_INPUT["torchao"] == "high-precision"


def test_torchao_keeps_exactly_the_bf16_llama_eager_table():
    for run in RECORD["runs"]:
        measured = Counter((row["dtype"], row["bytes"]) for row in run["saved"])
        predicted = Counter((row.dtype, row.bytes) for row in predicted_rows("llama-eager", run["shape"]))
        assert measured == predicted
        assert sum(row["bytes"] for row in run["saved"]) == predicted_saved_bytes("llama-eager", run["shape"])


def test_the_first_run_by_hand():
    # s=8, b=2, h=32, a=4, g=2, f=48: the eager layer's rows, bf16 unless noted
    s, b, h, a, g, f = 8, 2, 32, 4, 2, 48
    kv = g * h // a
    norms = 2 * (4 * b * s * h + 4 * b * s + 4 * b * s * h)      # fp32 upcast, rstd, normalised
    attention = 2 * (b * s * h + b * s * h + 2 * b * s * kv + b * s * h) + 4 * b * a * s
    mlp = 2 * (b * s * h + 4 * b * s * f)
    assert sum(row["bytes"] for row in RECORD["runs"][0]["saved"]) == norms + attention + mlp == 19840
    assert len(llama_layer_saved("eager")) == len(RECORD["runs"][0]["saved"])
