"""NVIDIA Transformer Engine documentation: FP8 memory of one te.Linear (performance_considerations, Memory usage).

docs/features/low_precision_training/performance_considerations/performance_considerations.rst
runs te.Linear(1024, 1024) with bf16 parameters on a 1024 x 1024 bf16 input (Hopper) and
prints memory_allocated after the forward pass (memory_usage_{1,2}_pytorch.py / .out). The
derived side builds the same tensors from derive's rows: the bf16 weight, the saved input
re-typed by the recipe (``saved_fp8``), the FP8 weight copy the data gradient needs
(``fp8_weight_rows``: without ``is_first_microbatch`` nothing else is cached), the output.
"MB" there is 1024^2 bytes (the scripts divide by 1024**2).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.allocator import ledger_allocation
from derive.accounts.fp8_state import fp8_weight_rows
from derive.architectures.saved_fp8 import quantised_saved
from derive.claims import decimals, document
from derive.recipes import recipe
from derive.tensors import Ledger, Tensor

claim = document("NVIDIA Transformer Engine docs", "docs/features/low_precision_training/"
                 "performance_considerations/performance_considerations.rst (Memory usage)",
                 "The PyTorch tab's three measured examples; the JAX tab and inference example 3 "
                 "(weights stored in FP8, no backward) are not registered.").claim

#: te.Linear(1024, 1024) on a [1024, 1024] input, as in memory_usage_*_pytorch.py.
WIDTH = 1024
#: te.autocast's default recipe on Hopper: DelayedScaling() (transformer_engine/pytorch/quantization.py).
DEFAULT = "fp8-delayed"
RST = "performance_considerations.rst, Memory usage, PyTorch tab"


def _layer(fp8: bool) -> Ledger:
    """What one te.Linear keeps after its forward: weight, saved input, (FP8 weight), output."""
    shape = (WIDTH, WIDTH)
    saved = Ledger([Tensor("input", shape, "bf16", frozenset({"linear_input", "replicated"}))])
    rows = [Tensor("weight", shape, "bf16"), Tensor("output", shape, "bf16")]
    if not fp8:
        return Ledger(rows) + saved
    weight_copies = Ledger(fp8_weight_rows(recipe(DEFAULT), sp.Integer(WIDTH * WIDTH), 1))
    return Ledger(rows) + quantised_saved(saved, DEFAULT) + weight_copies.without("row-wise")


def _measured(fp8: bool) -> int:
    """memory_allocated after the forward: the layer's tensors plus the input the script holds, each allocation rounded."""
    held = _layer(fp8) + (Ledger([Tensor("input (held by the script)", (WIDTH, WIDTH), "bf16")])
                          if fp8 else Ledger())
    return ledger_allocation(held, {})[1]


claim("te.memory.bf16-forward", "Memory usage, example 1", "bf16 forward: 2 MB (weight) + 2 MB "
      "(input saved for backward) + 2 MB (output) = 6 MB", 6, "MiB", decimals(0),
      lambda: _layer(False).bytes(), checked_against=RST)
claim("te.memory.fp8-forward", "Memory usage, example 2", "FP8 forward with bf16 weights: 2 MB "
      "(weight) + 1 MB (weight in FP8) + 1 MB (input in FP8 saved for backward) + 2 MB (output) "
      "= 6 MB", 6, "MiB", decimals(0), lambda: _layer(True).without("fp8_meta").bytes(),
      note="the text's sum leaves out the delayed-scaling buffers (20 KB) and the bf16 input the "
           "script still holds; the printed output counts both (next claim)",
      checked_against=RST)
claim("te.memory.fp8-forward-printed", "Memory usage, example 2 output", "Memory after forward "
      "pass: 8.02 MB", 8.02, "MiB", decimals(2), lambda: _measured(True),
      note="the text's 6 MB + the script's 2 MB bf16 input + DelayedScaling's scale and "
           "1024-step amax history for 5 FP8 tensors (about 20 KB), each allocation rounded by "
           "the caching allocator",
      checked_against="memory_usage_2_pytorch.out ('Memory after forward pass: 8.02 MB')")
