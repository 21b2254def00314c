"""FP8 training as torchao runs it on CPU: what its Float8Linear keeps for backward, against derive's tables.

torchao's float8 training (``torchao.float8.convert_to_float8_training``, the path torchtitan's
``float8`` converter takes) swaps every nn.Linear for a Float8Linear whose forward and backward
GEMMs run in FP8 (torch._scaled_mm, which PyTorch 2.13 runs on CPU) but whose autograd function
keeps the *high-precision* input and weight and quantises them again in backward
(torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args: ``ctx.save_for_backward(input_hp,
weight_hp_t)``). So the llama-eager table is unchanged under torchao, where Transformer Engine
keeps the FP8 input (``derive.architectures.saved_fp8``). ``python -m derive.validate --fp8-torchao``
measures it; tests/reference/torchao_float8.json holds one run with its provenance.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Mapping

from derive.validate.measure import build, saved_by

TORCHAO = ("torchao 0.18.0, torchao.float8.convert_to_float8_training with the default "
           "Float8LinearConfig (tensorwise dynamic scaling), PyTorch 2.13.0 CPU, bfloat16")
#: The shapes measured (the llama-eager grid's first two: GQA and MHA).
SHAPES = (dict(s=8, b=2, h=32, a=4, g=2, f=48), dict(s=16, b=1, h=64, a=8, g=8, f=96))


def torchao_saved(shape: Mapping[str, int]) -> dict[str, object]:
    """The llama-eager layer with its linears converted by torchao: how many were, and every allocation autograd keeps."""
    try:
        from torchao.float8 import convert_to_float8_training
    except ModuleNotFoundError as missing:
        raise ValueError("fp8-torchao: needs torchao (pip install torchao==0.18.0)") from missing
    module, forward = build("llama-eager", shape)
    convert_to_float8_training(module)
    converted = sum(type(child).__name__ == "Float8Linear" for child in module.modules())
    return {"shape": dict(shape), "converted_linears": converted,
            "saved": [asdict(row) for row in saved_by(module, forward)]}


def record() -> dict[str, object]:
    """A reference record: the source and, per shape, the saved rows (for tests/reference/)."""
    return {"source": TORCHAO, "kind": "llama-eager",
            "runs": [torchao_saved(shape) for shape in SHAPES]}
