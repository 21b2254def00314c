"""Per-GPU budget arithmetic and the article's self-test GPU counts (section 5 and self-test 1)."""
from fractions import Fraction

import pytest

from derive.accounts.budget import (
    BUDGET_ITEMS,
    CUBLAS_WORKSPACE,
    DRIVER_CAPACITY,
    NVIDIA_SMI_TOTAL,
    PLANNING_BUDGET_GIB,
    budget_table,
    gpus_to_hold,
    usable_bytes,
)
from derive.render.sections.budget import hardware_budget_table, resident_state_gpus

GiB, MiB, GB = 2**30, 2**20, 10**9


def test_h100_usable_range_by_hand():
    # high end: 79.6 GiB - 0.5 context - 1 NCCL - 0 margin, 5 % fragmentation, one 32 MiB cuBLAS workspace
    high = (Fraction("79.6") - Fraction("0.5") - 1) * Fraction(95, 100) - Fraction(32, 1024)
    # low end: 79.11 GiB - 1 - 3 - 1, 15 % fragmentation, eight cuBLAS workspaces + 256 MiB others
    low = (Fraction("79.11") - 1 - 3 - 1) * Fraction(85, 100) - Fraction(8 * 32 + 256, 1024)
    got_low, got_high = usable_bytes("h100")
    assert abs(got_high - high * GiB) < 2 and abs(got_low - low * GiB) < 2  # whole-byte floors
    assert (round(got_low / GiB, 2), round(got_high / GiB, 2)) == (62.49, 74.16)


def test_articles_68_to_74_gib():
    low, high = usable_bytes("h100")
    assert round(high / GiB) == 74            # the article's high end is reproduced
    assert low < 68 * GiB                     # its low end is not the worst case of its own items:
    # 15 % of reserved alone leaves at most 0.85 * 79.6 = 67.66 GiB, so 68 GiB needs less fragmentation;
    # with the other items at their worst, 68 GiB usable means fragmentation of about 8 %.
    assert Fraction("79.6") * Fraction(85, 100) < 68
    worst_rest = Fraction("79.6") - 1 - 3 - 1
    fragmentation = 1 - (68 + Fraction(512, 1024)) / worst_rest
    assert round(float(fragmentation) * 100, 1) == 8.2


def test_cublas_workspace_per_architecture():
    assert CUBLAS_WORKSPACE["h100"] == 32 * MiB
    assert CUBLAS_WORKSPACE["a100"] == 8 * MiB + 128 * 1024


def test_the_measured_h100_total_is_the_articles_79_6_gib_to_one_decimal():
    total = NVIDIA_SMI_TOTAL["h100"]
    assert total == 81559 * MiB and round(total / GiB, 2) == 79.65
    assert round(total / GiB, 1) == round(DRIVER_CAPACITY["h100"].high / GiB, 1) == 79.6


def test_a100_range():
    low, high = usable_bytes("a100")
    assert (round(low / GiB, 2), round(high / GiB, 2)) == (62.80, 73.95)


def test_budget_table_states_units():
    rows = budget_table("h100")
    # the datasheet's "80 GB" is 80 GiB of HBM; the driver reports a little less, never more
    assert rows[0]["item"] == "memory on the card (HBM)" and rows[0]["low"] == 80 * GiB
    for name in ("h100", "a100"):
        table = budget_table(name)
        assert table[1]["high"] <= table[0]["low"] and table[-1]["high"] < table[1]["low"]
    assert rows[-1]["item"] == "usable for tensors"
    assert {row["item"] for row in rows[2:-1]} == set(BUDGET_ITEMS)
    assert all(row["source"] for row in rows)
    shown = hardware_budget_table("h100").rows             # the sheet prints them in GiB
    assert shown[0]["low"].text == "80.00 GiB"             # 80 GiB of HBM, sold as "80 GB"
    assert shown[1]["high"].text == "79.60 GiB"
    assert (shown[-1]["low"].text, shown[-1]["high"].text) == ("62.49 GiB", "74.16 GiB")
    fragmentation = next(row for row in shown if row["item"].text == "fragmentation")
    assert (fragmentation["low"].text, fragmentation["high"].text) == ("5 %", "15 %")


def test_gpus_to_hold_is_a_ceiling():
    assert gpus_to_hold(128.48e9, 70 * GiB) == 2
    assert gpus_to_hold(140 * GiB, 70 * GiB) == 2
    assert gpus_to_hold(140 * GiB + 1, 70 * GiB) == 3
    assert gpus_to_hold(0, 70 * GiB) == 0


def test_self_test_2_17_93_needs_70_gb_not_70_gib():
    assert PLANNING_BUDGET_GIB == 70
    assert resident_state_gpus(70 * GB) == {"llama3-8b": 2, "llama3-70b": 17, "llama3-405b": 93}
    assert resident_state_gpus(70 * GiB) == {"llama3-8b": 2, "llama3-70b": 16, "llama3-405b": 87}


def test_gpu_counts_over_the_h100_range():
    low, high = usable_bytes("h100")
    assert resident_state_gpus(low) == {"llama3-8b": 2, "llama3-70b": 17, "llama3-405b": 97}
    assert resident_state_gpus(high) == {"llama3-8b": 2, "llama3-70b": 15, "llama3-405b": 82}


@pytest.mark.parametrize("call, field", [
    (lambda: usable_bytes("tpu-v5"), "hardware_name"),
    (lambda: budget_table("b200"), "hardware_name"),
    (lambda: gpus_to_hold(-1, 70 * GiB), "total_bytes"),
    (lambda: gpus_to_hold(10, 0), "per_gpu_bytes"),
    (lambda: gpus_to_hold(10, -5), "per_gpu_bytes"),
])
def test_bad_input(call, field):
    with pytest.raises(ValueError, match=rf"^{field}: "):
        call()
