"""The tensor ledger: sums, filters and groups."""
import pytest
import sympy as sp

from derive.symbols import b, h, s
from derive.tensors import Ledger, Tensor


def _ledger():
    return Ledger([
        Tensor("x", (s, b, h), "bf16", frozenset({"tp"})),
        Tensor("mask", (s, b, h), "uint8"),
        Tensor("stats", (s, b), "fp32", frozenset({"tp", "norm"})),
    ])


def test_bytes_follow_dtype_and_shape():
    ledger = _ledger()
    assert ledger["x"].bytes == 2 * s * b * h
    assert ledger["mask"].bytes == s * b * h
    assert ledger.bytes() == sp.expand(3 * s * b * h + 4 * s * b)


def test_filters_and_groups():
    ledger = _ledger()
    assert ledger.where("tp").names == ("x", "stats")
    assert ledger.where("tp", "norm").names == ("stats",)
    assert ledger.without("tp").names == ("mask",)
    groups = ledger.group_by(lambda t: t.dtype)
    assert list(groups) == ["bf16", "uint8", "fp32"]
    assert ledger.times(3).bytes() == sp.expand(3 * ledger.bytes())
    assert ledger.map(lambda t: t.divided(2)).numel() == sp.expand(ledger.numel() / 2)


def test_unknown_dtype_and_name():
    with pytest.raises(ValueError, match="^dtype:"):
        Tensor("y", (h,), "fp6")
    with pytest.raises(KeyError):
        _ledger()["nope"]
