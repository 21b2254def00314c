"""What a GPU gives to tensors (the article, section 5 and self-test 1): the per-GPU budget, allocator rounding, GPUs to hold the state."""
from __future__ import annotations

from fractions import Fraction

import sympy as sp

from derive.accounts.allocator import allocations, ledger_allocation
from derive.accounts.budget import (
    DRIVER_CAPACITY,
    HBM_CAPACITY,
    PLANNING_BUDGET_GIB,
    budget_table,
    gpus_to_hold,
    usable_bytes,
)
from derive.accounts.state import resident_bytes
from derive.architectures.decoder import LLAMA
from derive.architectures.tables import model_parameters
from derive.presets import HARDWARE, LLAMA3_MODELS, MODELS, model
from derive.render.sheet import (
    Cell,
    Column,
    Section,
    Table,
    article_bytes_cell,
    int_cell,
    text_cell,
)
from derive.symbols import b, h, s
from derive.tensors import Ledger, Tensor
from derive.units import BYTE_UNITS, format_bytes

GiB, GB = BYTE_UNITS["GiB"], BYTE_UNITS["GB"]
#: the recipe of the article's self-test 1: bf16 + Adam.
RECIPE = ("bf16", "adam")


def _value(value: Fraction | int) -> object:
    """Exact bytes as an integer, a fraction of reserved as a string ('1/20')."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return str(value)
    return int(value)


def _shown(value: Fraction | int) -> str:
    """A fraction of reserved as a percentage ('5 %'), bytes in GiB ('79.60 GiB')."""
    if isinstance(value, Fraction) and value < 1:
        return f"{float(value) * 100:g} %"
    return format_bytes(value, "GiB")


def hardware_budget_table(hardware_name: str) -> Table:
    """budget_table(hardware_name): each loss as a (low, high) range, and the usable range in GiB."""
    rows = tuple(
        {"item": text_cell(row["item"]), "low": Cell(_value(row["low"]), _shown(row["low"])),
         "high": Cell(_value(row["high"]), _shown(row["high"])), "where": text_cell(row["where"]),
         "source": text_cell(row["source"])}
        for row in budget_table(hardware_name)
    )
    hbm = HBM_CAPACITY[hardware_name].high
    return Table(
        f"budget_{hardware_name}",
        f"Per-GPU budget: {hardware_name} ({format_bytes(hbm, 'GiB')} of HBM, sold as "
        f"'{HARDWARE[hardware_name].memory_bytes // GB} GB')",
        (Column("item", "item", width="0.17\\linewidth"), Column("low", "low", unit="B"),
         Column("high", "high", unit="B"), Column("where", "where", width="0.17\\linewidth"),
         Column("source", "source or reasoning", width="0.36\\linewidth")),
        rows,
        note="GiB = 2^30 B (what the driver and PyTorch report, and how HBM is counted: the "
             "datasheet's '80 GB' is 80 GiB of HBM, so the driver's total is a little below it); "
             "GB = 10^9 B. Fragmentation is a fraction of reserved memory; the usable range pairs the "
             "largest capacity with the smallest losses and the reverse.",
    )


def _budgets() -> list[tuple[str, str, int]]:
    """The per-GPU budgets of the self-test: key, heading, bytes."""
    low, high = usable_bytes("h100")
    return [
        ("gib70", f"{PLANNING_BUDGET_GIB} GiB ({format_bytes(PLANNING_BUDGET_GIB * GiB, 'GB')})",
         PLANNING_BUDGET_GIB * GiB),
        ("gb70", f"{PLANNING_BUDGET_GIB} GB ({format_bytes(PLANNING_BUDGET_GIB * GB, 'GiB')})",
         PLANNING_BUDGET_GIB * GB),
        ("usable_low", f"H100 usable low, {format_bytes(low, 'GiB')}", low),
        ("usable_high", f"H100 usable high, {format_bytes(high, 'GiB')}", high),
    ]


def resident_state_gpus(per_gpu_bytes: int, precision: str = "bf16",
                        optimizer: str = "adam") -> dict[str, int]:
    """GPUs that hold the resident state of Llama 3 8B / 70B / 405B at ``per_gpu_bytes`` each (self-test 1)."""
    held = resident_bytes(precision, optimizer)
    return {name: gpus_to_hold(MODELS[name].at(held), per_gpu_bytes) for name in LLAMA3_MODELS}


def self_test_table() -> Table:
    """GPUs that hold the resident state (bf16 + Adam) of 8B / 70B / 405B at each per-GPU budget."""
    budgets = _budgets()
    counts = {key: resident_state_gpus(per_gpu, *RECIPE) for key, _, per_gpu in budgets}
    held = resident_bytes(*RECIPE)
    rows = tuple(
        {"model": text_cell(name),
         "resident": article_bytes_cell(MODELS[name].at(held)),
         **{key: int_cell(counts[key][name]) for key, _, _ in budgets}}
        for name in LLAMA3_MODELS
    )
    return Table(
        "self_test_gpus", "GPUs that hold the resident state (bf16 + Adam, 16 B/param)",
        (Column("model", "model"), Column("resident", "resident state", unit="B"),
         *(Column(key, heading, unit="GPUs") for key, heading, _ in budgets)),
        rows,
        note="ceil(resident state / budget per GPU); activations not counted. The article's "
             "2 / 17 / 93 follows from a 70 GB budget; 70 GiB gives 2 / 16 / 87. The resident state "
             "in the article's GB = 10^9 B and TB = 10^12 B.",
    )


def rounding_comparison() -> list[dict[str, object]]:
    """Worked comparison: where 512-byte rounding matters (tiny tensors) and where it does not (GEMM weights)."""
    llama = model("llama3-8b")
    weights = model_parameters(LLAMA)
    tensor_count = sum(sp.sympify(t.count).subs(llama.values) for t in weights)
    step_counters = Ledger([Tensor("Adam state['step'] (fp32 scalar per parameter tensor; on the "
                                   "GPU with fused=True or capturable=True)", (), "fp32",
                                   frozenset({"scalar"}), count=tensor_count)])
    tiny = Ledger([
        Tensor("attention mask [b, s] (bool)", (b, s), "bool", frozenset({"mask"})),
        Tensor("loss-scale scalar (fp32)", (), "fp32", frozenset({"scalar"})),
        Tensor("norm weight [h] (bf16)", (h,), "bf16", frozenset({"norm"})),
    ])
    cases = [
        ("Llama 3 8B GEMM weights (bf16)", weights.where("gemm"), llama.values),
        ("Llama 3 8B norm weights (bf16, h = 4096)", weights.where("norm"), llama.values),
        ("Llama 3 8B Adam step counters", step_counters, llama.values),
        ("tiny tensors (b = 1, s = 100, h = 100)", tiny, {b: 1, s: 100, h: 100}),
    ]
    rows = []
    for label, ledger, values in cases:
        requested, allocated = ledger_allocation(ledger, values)
        copies = sum(copies for _, copies in allocations(ledger, values))
        rows.append({"case": label, "requests": copies, "requested": requested,
                     "allocated": allocated, "rounding": allocated - requested,
                     "overhead": sp.Rational(allocated - requested, requested)})
    return rows


def allocator_table() -> Table:
    """Requested vs allocated bytes under PyTorch's caching allocator for a few ledgers."""
    rows = tuple(
        {"case": text_cell(row["case"]), "requests": int_cell(row["requests"]),
         "requested": Cell(row["requested"], f"{row['requested']:,} B"),
         "allocated": Cell(row["allocated"], f"{row['allocated']:,} B"),
         "rounding": Cell(row["rounding"], f"{row['rounding']:,} B"),
         "overhead": Cell(str(row["overhead"]), f"{float(row['overhead']) * 100:,.2f} %")}
        for row in rounding_comparison()
    )
    return Table(
        "allocator_rounding", "Caching-allocator rounding: requested vs allocated",
        (Column("case", "ledger", width="0.3\\linewidth"), Column("requests", "tensors"),
         Column("requested", "requested", unit="B"), Column("allocated", "allocated", unit="B"),
         Column("rounding", "rounding", unit="B"), Column("overhead", "rounding / requested")),
        rows,
        note="c10/cuda/CUDACachingAllocator.cpp round_size(): every request rounded up to 512 B "
             "(kMinBlockSize); it matters only for many small tensors.",
    )


def budget_section() -> Section:
    """The per-GPU budget for each hardware preset with a driver capacity, and the self-test GPU counts."""
    low, high = usable_bytes("h100")
    missing = sorted(set(HARDWARE) - set(DRIVER_CAPACITY))
    return Section(
        "budget", "What a GPU gives to tensors",
        intro=(f"An 80 GB H100 gives {format_bytes(low, 'GiB')} to {format_bytes(high, 'GiB')} "
               f"({format_bytes(low, 'GB')} to {format_bytes(high, 'GB')}) to tensors: capacity "
               "as the driver reports it, less the CUDA context, NCCL buffers and a safety "
               "margin, less fragmentation and library workspaces (derive.accounts.budget). "
               f"No driver capacity is recorded for {', '.join(missing)}, so they have no table.",),
        tables={**{f"budget_{name}": hardware_budget_table(name) for name in DRIVER_CAPACITY},
                "self_test_gpus": self_test_table(), "allocator_rounding": allocator_table()},
    )
