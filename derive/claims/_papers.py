"""Helpers the paper modules share: GPT shapes from a paper's table, figures at a shape, rounding readings."""
from __future__ import annotations

import math

import sympy as sp

from derive.architectures.decoder import FAMILIES
from derive.architectures.gemms import flops
from derive.architectures.tables import model_gemms, output_gemms
from derive.claims import Rounding, decimals
from derive.model import Model
from derive.presets import hardware
from derive.units import BYTE_UNITS

#: A100 dense bf16 peak (312 TFLOP/s, derive.presets): the peak both Megatron papers divide by.
A100_PEAK = sp.Integer(int(hardware("a100").peak_flops))
#: Where printed values were read (``checked_against``): copies and quotations of the papers.
SEED_ARTICLE = ("the source article (shared/seed/000_8738b2343f4a5190.txt, section 4.1, which "
                "transcribes the paper's section 4.1 tensor by tensor)")
MEGATRON_MEMORY = ("NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py "
                   "(compute_activation_memory: 'formula in Table 2 of 2205.05198')")
#: A GB (10^9 bytes), as the papers print memory.
GB = BYTE_UNITS["GB"]


def gpt(name: str, layers: int, hidden: int, heads: int, vocab: int, seq: int, source: str) -> Model:
    """A GPT shape (f = 4h, MHA, biases, learned positions, tied head) as a paper tabulates it."""
    return Model(name, "gpt", layers, hidden, heads, heads, 4 * hidden, vocab, seq, source)


def truncated(value: sp.Expr) -> sp.Expr:
    """``value`` with its fraction cut off (a table that truncates instead of rounding)."""
    return sp.Integer(math.floor(sp.Rational(value)))


def as_printed(printed: str) -> Rounding:
    """The rounding a printed decimal shows: as many decimals as it carries ('1.88' -> 2)."""
    return decimals(len(printed.partition(".")[2]))


def input_embedding_flops(family: str = "gpt") -> sp.Expr:
    """Forward FLOPs derive's GEMM table gives the input embedding: the model's GEMMs less L layers and the head (0: a lookup is no GEMM)."""
    layers = model_gemms(FAMILIES[family], "full").filter(lambda gemm: gemm.has("layer"))
    whole = flops(model_gemms(FAMILIES[family], "full"), "forward")
    return sp.expand(whole - flops(layers, "forward") - flops(output_gemms(FAMILIES[family]), "forward"))
