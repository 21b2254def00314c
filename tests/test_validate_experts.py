"""The MoE / MLA saved-tensor tables' prediction at derive.validate.experts's cases, without torch.

The expected bytes are what PyTorch's autograd kept for backward at each case (transformers 5.23,
eager, bf16; ``python -m derive.validate``'s MoE lines, measured with saved-tensor hooks): the
prediction must reproduce them exactly, and DeepSeek-V3's group-limited routing keeps rows only
unreachable nodes hold.
"""
from __future__ import annotations

import pytest

from derive.validate.experts import CASES, predicted

#: Bytes autograd kept at each of CASES, in order (measured with PyTorch, see the docstring).
MEASURED = (75748, 114780, 90980, 120508, 72484, 51198, 49236, 20580)


@pytest.mark.parametrize("case, measured", list(zip(CASES, MEASURED)), ids=lambda x: str(x)[:24])
def test_predicted_bytes_equal_pytorch(case, measured):
    family, config, batch, seq = case
    table, unreachable = predicted(family, config, batch, seq)
    assert int(table.bytes()) == measured
    # group-limited routing (sigmoid scores, DeepSeek-V3) leaves rows only unreachable nodes keep
    assert (len(unreachable) > 0) == (family == "deepseek_v3")


def test_every_case_has_a_measurement():
    assert len(CASES) == len(MEASURED)
