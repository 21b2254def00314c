"""``python -m derive.validate --kind comm-*``: the communication ledger against PyTorch's own collectives.

Each case runs one of ``derive.validate.comm_runs``' jobs (DDP, FSDP2, DTensor TP / SP,
pipelining, an expert-parallel MoE block) in gloo processes on localhost, records every
collective at the dispatcher (``derive.validate.comm_record``) and holds it against
``derive.accounts.comm.collectives`` for the same tiny model (``derive.hf.from_config`` of the
model's config) and layout, rewritten by the named conventions of
``derive.conventions.pytorch_comm`` where PyTorch departs from Megatron. Compared exactly:
the bytes per (group, collective, pass), and for the per-call kinds (tp, sp, pp, ep) every
call (payload and count); for ep also the bytes each rank sends (all but its own split).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import sympy as sp

from derive.accounts.comm import collectives
from derive.conventions.pytorch_comm import CONVENTIONS, pytorch_rows
from derive.hf import from_config
from derive.model import Model
from derive.parallelism import Parallelism


@dataclass(frozen=True)
class Case:
    """One run: a kind, the world size, the model's sizes, the job and its layout in derive's terms."""

    kind: str
    label: str
    world: int
    shape: Mapping[str, int]
    job: str
    args: tuple
    layout: Mapping[str, Any]
    conventions: tuple[str, ...] = ()
    excluded: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)   # -> (collective, dtype, pass)


#: tiny Llamas: even sizes; b = 1 with odd s, V, f and head counts divisible by 3; 4 layers for pipelines
EVEN = dict(s=8, b=2, h=32, a=4, g=2, f=48, L=2, V=50)
ODD = dict(s=9, b=1, h=24, a=6, g=3, f=42, L=2, V=37)
HSDP = dict(s=7, b=1, h=32, a=4, g=2, f=48, L=2, V=51)
ONES = dict(s=1, b=1, h=8, a=2, g=1, f=5, L=1, V=3)
DEEP = dict(s=6, b=3, h=16, a=2, g=2, f=24, L=4, V=29)
#: tiny MoE blocks: b s k a multiple of E (round-robin routing is then exactly uniform)
MOE2 = dict(s=5, b=3, h=32, a=4, g=2, f=24, L=1, V=40, E=4, k=4)
MOE3 = dict(s=7, b=3, h=24, a=4, g=2, f=20, L=1, V=40, E=6, k=2)

SP_CONVENTIONS = ("dtensor-per-linear", "pytorch-keeps-gathered-input", "dtensor-loss-parallel",
                  "dtensor-lazy-partial-grads")
CASES: tuple[Case, ...] = (
    Case("comm-ddp", "DDP, buckets of 4 KiB", 2, EVEN, "ddp", (0.004,), dict(dp=2, precision="bf16"),
         ("ddp-buckets",), {"ddp-broadcast-buffers": ("broadcast", "bf16", "forward")}),
    Case("comm-ddp", "DDP, one bucket, m = 3 under no_sync", 3, ODD, "ddp", (25.0, False, 3),
         dict(dp=3, precision="bf16", global_batch=3 * 3 * ODD["b"]),
         ("ddp-buckets",), {"ddp-broadcast-buffers": ("broadcast", "bf16", "forward")}),
    Case("comm-zero", "DDP + ZeroRedundancyOptimizer", 2, EVEN, "ddp", (25.0, True),
         dict(dp=2, zero=1, precision="bf16"), ("zero-redundancy-optimizer",),
         {"ddp-broadcast-buffers": ("broadcast", "bf16", "forward")}),
    Case("comm-zero", "DDP + ZeroRedundancyOptimizer", 3, ODD, "ddp", (25.0, True),
         dict(dp=3, zero=1, precision="bf16"), ("zero-redundancy-optimizer",),
         {"ddp-broadcast-buffers": ("broadcast", "bf16", "forward")}),
    Case("comm-fsdp", "fully_shard bf16, reshard", 2, EVEN, "fsdp", (True, False),
         dict(dp=2, zero=3, precision="bf16"), ("fsdp2-dim0-padding",)),
    Case("comm-fsdp", "fp32 + MixedPrecisionPolicy, no reshard", 2, EVEN, "fsdp", (False, True),
         dict(dp=2, zero=3, reshard_after_forward=False, precision="bf16-fp32grad"), ("fsdp2-dim0-padding",)),
    Case("comm-fsdp", "MixedPrecisionPolicy, reshard, padded", 3, ODD, "fsdp", (True, True),
         dict(dp=3, zero=3, precision="bf16-fp32grad"), ("fsdp2-dim0-padding",)),
    Case("comm-fsdp", "sizes of 1 (s, b, L, g), odd f and V", 2, ONES, "fsdp", (True, True),
         dict(dp=2, zero=3, precision="bf16-fp32grad"), ("fsdp2-dim0-padding",)),
    Case("comm-fsdp", "HSDP 2 x 2, MixedPrecisionPolicy, m = 2", 4, HSDP, "fsdp", (True, True, 2, 2),
         dict(dp=4, dp_shard=2, zero=3, precision="bf16-fp32grad", global_batch=2 * 4 * HSDP["b"]),
         ("fsdp2-dim0-padding",)),
    Case("comm-tp", "DTensor TP + loss_parallel", 2, EVEN, "tp", (False,), dict(tp=2, precision="bf16"),
         SP_CONVENTIONS[:1] + SP_CONVENTIONS[2:3]),
    Case("comm-tp", "DTensor TP + loss_parallel", 3, ODD, "tp", (False,), dict(tp=3, precision="bf16"),
         SP_CONVENTIONS[:1] + SP_CONVENTIONS[2:3]),
    Case("comm-tp", "sizes of 1 (s, b, L)", 2, dict(ONES, g=2, f=6, V=4), "tp", (False,),
         dict(tp=2, precision="bf16"), SP_CONVENTIONS[:1] + SP_CONVENTIONS[2:3]),
    Case("comm-tp", "DTensor TP, every layer checkpointed", 2, EVEN, "tp", (False, True),
         dict(tp=2, precision="bf16", recompute="full"),
         SP_CONVENTIONS[:1] + SP_CONVENTIONS[2:3] + ("checkpoint-early-stop",)),
    Case("comm-tp", "torchtitan's plan (PrepareModuleInput)", 3, ODD, "tp", (False, False, True),
         dict(tp=3, precision="bf16"), SP_CONVENTIONS[2:3]),
    Case("comm-sp", "torchtitan's plan + SequenceParallel", 2, EVEN, "tp", (True, False, True),
         dict(tp=2, sequence_parallel=True, precision="bf16"), SP_CONVENTIONS[1:]),
    Case("comm-sp", "DTensor TP + SequenceParallel", 2, EVEN, "tp", (True,),
         dict(tp=2, sequence_parallel=True, precision="bf16"), SP_CONVENTIONS),
    Case("comm-sp", "DTensor TP + SequenceParallel", 3, ODD, "tp", (True,),
         dict(tp=3, sequence_parallel=True, precision="bf16"), SP_CONVENTIONS),
    Case("comm-sp", "DTensor SP, every layer checkpointed", 3, ODD, "tp", (True, True),
         dict(tp=3, sequence_parallel=True, precision="bf16", recompute="full"),
         SP_CONVENTIONS + ("checkpoint-early-stop",)),
    Case("comm-pp", "Schedule1F1B, m = 4", 2, DEEP, "pp", (4, 1), dict(pp=2, global_batch=4 * 3),
         ("pipeline-most-loaded-rank",)),
    Case("comm-pp", "ScheduleInterleaved1F1B, v = 2, m = 2", 2, DEEP, "pp", (2, 2),
         dict(pp=2, vp=2, global_batch=2 * 3), ("pipeline-most-loaded-rank",)),
    Case("comm-pp", "Schedule1F1B, m = 3", 3, dict(DEEP, L=3), "pp", (3, 1), dict(pp=3, global_batch=3 * 3),
         ("pipeline-most-loaded-rank",)),
    Case("comm-ep", "all_to_all_single_autograd, top-4 of 4", 2, MOE2, "ep", (), dict(ep=2, dp=2),
         (), {"moe-count-exchange": ("all-to-all", "int64", "forward")}),
    Case("comm-ep", "all_to_all_single_autograd, top-2 of 6", 3, MOE3, "ep", (), dict(ep=3, dp=3),
         (), {"moe-count-exchange": ("all-to-all", "int64", "forward")}),
)
KINDS = tuple(dict.fromkeys(case.kind for case in CASES))
#: the ledger groups each kind's job exercises
GROUPS = {"comm-ddp": ("dp",), "comm-zero": ("dp",), "comm-fsdp": ("dp",), "comm-tp": ("tp",), "comm-sp": ("tp",),
          "comm-pp": ("pp",), "comm-ep": ("ep",)}
PER_CALL = {"comm-tp", "comm-sp", "comm-pp", "comm-ep"}


def model(case: Case) -> Model:
    """The derive model of the case's tiny network (a Llama config, or a one-layer Mixtral for ep)."""
    v = case.shape
    config = {"model_type": "llama", "hidden_size": v["h"], "num_attention_heads": v["a"],
              "num_key_value_heads": v["g"], "intermediate_size": v["f"], "num_hidden_layers": v["L"],
              "vocab_size": v["V"], "max_position_embeddings": v["s"], "tie_word_embeddings": False}
    if "E" in v:
        config.update(model_type="mixtral", num_local_experts=v["E"], num_experts_per_tok=v["k"])
    return from_config(config, name=f"tiny {config['model_type']}")


def ledger(case: Case) -> list:
    """The ledger's rows of the case's groups, rewritten by its PyTorch conventions."""
    tiny = model(case)
    layout = Parallelism(micro_batch=case.shape["b"], **case.layout)
    rows = [row for row in collectives(tiny, layout) if row.group in GROUPS[case.kind]]
    return pytorch_rows(rows, tiny, layout, case.conventions)


def _int(value: sp.Expr) -> int:
    value = sp.nsimplify(value)
    if not value.is_Integer:
        raise ValueError(f"bytes: the ledger gives a fraction of a byte, {value}")
    return int(value)


def _measured(case: Case, ranks: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the calls compared, the calls a convention excludes) of the rank the ledger describes."""
    if case.kind == "comm-pp":
        calls = []
        for pass_ in ("forward", "backward"):
            sends = [[r for r in rank["rows"] if r["collective"] == "send" and r["pass_"] == pass_]
                     for rank in ranks]
            calls += [dict(r, collective="send-recv") for r in max(sends, key=len)]
        return calls, []
    rows = ranks[0]["rows"]
    excluded = set(case.excluded.values())
    key = lambda r: (r["collective"], r["dtype"], r["pass_"])  # noqa: E731
    return [r for r in rows if key(r) not in excluded], [r for r in rows if key(r) in excluded]


def compare(case: Case, ranks: list[dict]) -> dict[str, Any]:
    """One case: totals per (group, collective, pass), calls, sent bytes; exact or not."""
    rows = ledger(case)
    calls, excluded = _measured(case, ranks)
    expected_totals: Counter = Counter()
    expected_calls: Counter = Counter()
    for row in rows:
        key = (row.group, row.collective, row.pass_)
        expected_totals[key] += _int(row.payload * row.count)
        expected_calls[key + (_int(row.payload),)] += _int(row.count)
    measured_totals: Counter = Counter()
    measured_calls: Counter = Counter()
    for call in calls:
        key = (call["group"], call["collective"], call["pass_"])
        measured_totals[key] += call["bytes"]
        measured_calls[key + (call["bytes"],)] += 1
    same_ranks = all(Counter(map(str, r["rows"])) == Counter(map(str, ranks[0]["rows"])) for r in ranks)
    result = {
        "kind": case.kind, "label": case.label, "world": case.world, "shape": dict(case.shape),
        "layout": dict(case.layout), "conventions": list(case.conventions) + list(case.excluded),
        "ledger_rows": [row.record() for row in rows],
        "totals": [{"group": k[0], "collective": k[1], "pass": k[2], "ledger": expected_totals[k],
                    "measured": measured_totals[k]} for k in sorted(set(expected_totals) | set(measured_totals))],
        "calls_measured": len(calls), "calls_ledger": sum(expected_calls.values()),
        "calls_agree": expected_calls == measured_calls,
        "excluded": [{k: r[k] for k in ("collective", "dtype", "bytes", "pass_")} for r in excluded],
        "measured": calls,
    }
    if "buckets" in ranks[0]:
        result["ddp_buckets"] = ranks[0]["buckets"]           # the parameters of each all-reduce, in order
    passed = expected_totals == measured_totals and (case.kind not in PER_CALL or result["calls_agree"])
    if case.kind == "comm-ep":
        result["sent_ledger"] = _int(sum(row.sent * row.count for row in rows))
        result["sent_measured"] = sum(call["bytes"] - call["kept"] for call in calls)
        passed &= result["sent_ledger"] == result["sent_measured"]
    if case.kind != "comm-pp":
        passed &= same_ranks
    result["passed"] = bool(passed)
    return result


def measure(cases: Sequence[Case]) -> list[list[dict]]:
    """Run every case's job, one gloo launch per world size; each case's results by rank."""
    from derive.validate import comm_record, comm_runs

    out: dict[int, list[dict]] = {}
    for world in sorted({case.world for case in cases}):
        chosen = [i for i, case in enumerate(cases) if case.world == world]
        jobs = [(getattr(comm_runs, cases[i].job), (dict(cases[i].shape), *cases[i].args)) for i in chosen]
        out.update(zip(chosen, comm_record.spawn(world, jobs)))
    return [out[i] for i in range(len(cases))]


def run(kinds: Sequence[str], cases: Sequence[Case] = CASES,
        compare_case: Callable[[Case, list[dict]], dict] = compare) -> list[dict[str, Any]]:
    """Every case of ``kinds``, compared."""
    chosen = [case for case in cases if case.kind in kinds]
    return [compare_case(case, ranks) for case, ranks in zip(chosen, measure(chosen))]


def print_table(results: list[dict[str, Any]]) -> None:
    """One line per case, its totals per (group, collective, pass), then the conventions it used."""
    header = f"{'kind':10} {'world':>5}  {'case':42} {'calls: ledger':>13} {'measured':>8}  ok"
    print(header)
    print("-" * len(header))
    used: dict[str, None] = {}
    for r in results:
        print(f"{r['kind']:10} {r['world']:>5}  {r['label']:42} {r['calls_ledger']:>13} {r['calls_measured']:>8}"
              f"  {'ok' if r['passed'] else 'MISMATCH'}")
        for t in r["totals"]:
            mark = "" if t["ledger"] == t["measured"] else "   <- differs"
            print(f"    {t['group']:3} {t['collective']:15} {t['pass']:10} ledger {t['ledger']:>8} B"
                  f"  measured {t['measured']:>8} B{mark}")
        if "sent_ledger" in r:
            print(f"    sent by each rank (all but its own split): ledger {r['sent_ledger']} B, "
                  f"measured {r['sent_measured']} B")
        for e in r["excluded"]:
            print(f"    excluded: {e['collective']} {e['dtype']} {e['bytes']} B ({e['pass_']})")
        used.update(dict.fromkeys(r["conventions"]))
    print("\nPyTorch departs from Megatron's rows (derive.conventions.pytorch_comm):")
    for key in used:
        print(f"  {key}: {CONVENTIONS[key].statement}. [{CONVENTIONS[key].source}]")
