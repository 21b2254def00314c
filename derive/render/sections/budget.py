"""What a GPU gives to tensors (the article, section 5 and self-test 1): the per-GPU budget, allocator rounding, GPUs to hold the state."""
from __future__ import annotations

from fractions import Fraction

from derive.accounts.allocator import rounding_comparison
from derive.accounts.budget import (
    DRIVER_CAPACITY,
    HBM_CAPACITY,
    PLANNING_BUDGET_GIB,
    budget_table,
    resident_state_gpus,
    usable_bytes,
)
from derive.accounts.state import resident_bytes
from derive.presets import HARDWARE, LLAMA3_MODELS, MODELS
from derive.render.sheet import (
    Cell,
    Column,
    Section,
    Table,
    bytes_cell,
    int_cell,
    text_cell,
)
from derive.units import BYTE_UNITS, format_bytes

GiB, GB = BYTE_UNITS["GiB"], BYTE_UNITS["GB"]
#: the recipe of the article's self-test 1: bf16 + Adam.
RECIPE = ("bf16", "adam")


def _value(value: Fraction | int) -> object:
    """Exact bytes as an integer, a fraction of reserved as a string ('1/20')."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return str(value)
    return int(value)


def hardware_budget_table(hardware_name: str) -> Table:
    """budget_table(hardware_name): each loss as a (low, high) range, and the usable range in GiB."""
    rows = tuple(
        {"item": text_cell(row["item"]), "low": Cell(_value(row["low"]), row["low_shown"]),
         "high": Cell(_value(row["high"]), row["high_shown"]), "where": text_cell(row["where"]),
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


def self_test_table() -> Table:
    """GPUs that hold the resident state (bf16 + Adam) of 8B / 70B / 405B at each per-GPU budget."""
    budgets = _budgets()
    counts = {key: resident_state_gpus(per_gpu, *RECIPE) for key, _, per_gpu in budgets}
    held = resident_bytes(*RECIPE)
    rows = tuple(
        {"model": text_cell(name),
         "resident": bytes_cell(MODELS[name].subs(held, N=MODELS[name].parameters)),
         **{key: int_cell(counts[key][name]) for key, _, _ in budgets}}
        for name in LLAMA3_MODELS
    )
    return Table(
        "self_test_gpus", "GPUs that hold the resident state (bf16 + Adam, 16 B/parameter)",
        (Column("model", "model"), Column("resident", "resident state", unit="B"),
         *(Column(key, heading, unit="GPUs") for key, heading, _ in budgets)),
        rows,
        note="ceil(resident state / budget per GPU); activations not counted. The article's "
             "2 / 17 / 93 follows from a 70 GB budget; 70 GiB gives 2 / 16 / 87.",
    )


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
