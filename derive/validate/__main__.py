"""``python -m derive.validate``: ledgers against autograd (comm-*: PyTorch's collectives); exit 1 on a mismatch."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from difflib import SequenceMatcher
from typing import Sequence

from derive.options.messages import writes_stdout
from derive.validate import NO_TORCH, measuring

try:
    measure = measuring()
except ModuleNotFoundError as missing:
    if missing.name != "torch":
        raise
    sys.stderr.write(f"python -m derive.validate: error: {NO_TORCH}\n")
    sys.exit(2)
Saved, measured_flops, saved_tensors = measure.Saved, measure.measured_flops, measure.saved_tensors
from derive.validate import comm, config_draws  # noqa: E402
from derive.validate.predicted import (  # noqa: E402
    HF_KINDS,
    KINDS,
    Row,
    checked_shape,
    counted_mask,
    fields,
    predicted_flops,
    predicted_rows,
    predicted_saved_bytes,
)

#: Random configs per family of the default ``--hf`` run (CI); ``--samples`` asks for more.
DEFAULT_SAMPLES = 6

#: Small shapes every kind is measured at (f = 4h for GPT, Korthikanti et al. 2022 section 4.1);
#: MHA, GQA and MQA, odd head counts and a sequence that is not a multiple of the kernel's block.
GRID: dict[str, tuple[dict[str, int], ...]] = {
    "gpt-eager": (
        dict(s=8, b=2, h=32, a=4, g=4, f=128),
        dict(s=16, b=1, h=64, a=8, g=8, f=256),
        dict(s=33, b=3, h=48, a=3, g=3, f=192),
    ),
    "llama-eager": (
        dict(s=8, b=2, h=32, a=4, g=2, f=48),
        dict(s=16, b=1, h=64, a=8, g=8, f=96),
        dict(s=33, b=3, h=96, a=6, g=2, f=160),
        dict(s=12, b=2, h=48, a=3, g=1, f=56),
    ),
    "llama-model": (
        dict(s=8, b=2, h=32, a=4, g=2, f=48, L=2, V=50),
        dict(s=17, b=1, h=64, a=8, g=4, f=96, L=3, V=101),
    ),
    # transformers' own models (GQA, MHA and MQA; repeat_kv copies nothing at g = a; at g = 1 and
    # b = 1 eager attention keeps K and V viewed; at b = 1 the loss keeps the padded labels)
    **{kind: (dict(s=8, b=2, h=32, a=4, g=2, f=48, L=2, V=50),
              dict(s=11, b=3, h=48, a=6, g=6, f=40, L=1, V=37),
              dict(s=9, b=1, h=32, a=4, g=1, f=24, L=2, V=29)) for kind in HF_KINDS},
}

NOTES = (
    "FLOPs are FlopCounterMode's (torch/utils/flop_counter.py): matmuls only, forward + backward.",
    "gpt-eager: the counter sees the two materialised bmm over all s*s scores; it does not halve"
    " causal attention, so the ledger is compared with mask='full'.",
    "llama-*: the CPU flash kernel (_scaled_dot_product_flash_attention_for_cpu) has no formula"
    " in the counter, which counts it as 0; the ledger is compared with mask='none' and the"
    " causal attention FLOPs derive predicts are shown as 'uncounted', not compared.",
    "hf-*: transformers' loss pads the labels to s + 1 and shifts them; at b = 1 the shifted view"
    " is contiguous and keeps the padded storage: the ledger's 'loss: padded label (b = 1)' row"
    " (one int64, a Piecewise count that is 0 at b >= 2).",
    "llama-*: 'math' reruns the count with sdpa_kernel(SDPBackend.MATH), whose bmm the counter"
    " sees over all s*s scores (causal masking is not halved): compared with mask='full'.",
)


def pair(predicted: list[Row], measured: list[Saved]) -> tuple[list[dict], list[Row], list[Saved]]:
    """Match ledger rows with saved allocations tensor by tensor (same dtype, same element count).

    Both lists run in forward order: the longest runs in step are matched first
    (difflib), the rest by size alone, so names land on the tensors they describe.
    Returns the pairs, the ledger rows autograd does not keep, and the allocations
    the ledger does not list.
    """
    want = [(row.dtype, row.numel) for row in predicted]
    have = [(saved.dtype, saved.numel) for saved in measured]
    matched: dict[int, int] = {}
    for block in SequenceMatcher(None, want, have, autojunk=False).get_matching_blocks():
        matched.update({block.b + k: block.a + k for k in range(block.size)})
    free = [i for i in range(len(predicted)) if i not in set(matched.values())]
    for j in range(len(measured)):
        if j not in matched:
            i = next((i for i in free if want[i] == have[j]), None)
            if i is not None:
                matched[j] = i
                free.remove(i)
    pairs = [{"ledger": predicted[matched[j]].name, "saved_by": list(saved.saved_by),
              "shape": list(saved.shape), "dtype": saved.dtype, "bytes": saved.bytes}
             for j, saved in enumerate(measured) if j in matched]
    extra = [saved for j, saved in enumerate(measured) if j not in matched]
    return pairs, [predicted[i] for i in free], extra


def compare(kind: str, shape: dict[str, int]) -> dict[str, object]:
    """Ledger against autograd and the flop counter for one kind at one shape."""
    predicted: list[Row] = predicted_rows(kind, shape)
    measured: list[Saved] = saved_tensors(kind, shape)
    pairs, missing, extra = pair(predicted, measured)
    flops, by_op = measured_flops(kind, shape)
    expected_flops = predicted_flops(kind, shape)
    uncounted, math = 0, None
    if counted_mask(kind) == "none":
        uncounted = predicted_flops(kind, shape, "causal") - expected_flops
        math = {"predicted_flops": predicted_flops(kind, shape, "full"),
                "measured_flops": measured_flops(kind, shape, math_attention=True)[0]}
    result = {
        "kind": kind,
        "shape": shape,
        "predicted_bytes": predicted_saved_bytes(kind, shape),
        "measured_bytes": sum(r.bytes for r in measured),
        "predicted_tensors": len(predicted),
        "measured_tensors": [asdict(r) for r in measured],
        "pairs": pairs,
        "unmatched_predicted": [asdict(r) for r in missing],
        "unmatched_measured": [asdict(r) for r in extra],
        "predicted_flops": expected_flops,
        "measured_flops": flops,
        "measured_flops_by_op": by_op,
        "attention_flops_uncounted": uncounted,
        "math_attention": math,
    }
    result["passed"] = (result["predicted_bytes"] == result["measured_bytes"]
                        and not missing and not extra and flops == expected_flops
                        and (math is None or math["measured_flops"] == math["predicted_flops"]))
    return result


def run(kinds: Sequence[str]) -> list[dict[str, object]]:
    """Every shape of the grid for each of ``kinds``."""
    return [compare(kind, checked_shape(kind, shape)) for kind in kinds for shape in GRID[kind]]


def _print_table(results: list[dict[str, object]], tensors: bool) -> None:
    header = (f"{'kind':12} {'shape':38} {'bytes: ledger':>14} {'autograd':>10} {'tensors':>8}"
              f" {'FLOPs: ledger':>14} {'counter':>10} {'uncounted':>10} {'math: ledger':>13}"
              f" {'counter':>10}  ok")
    print(header)
    print("-" * len(header))
    for r in results:
        shape = " ".join(f"{k}={r['shape'][k]}" for k in fields(r["kind"]))
        count = f"{len(r['pairs'])}/{r['predicted_tensors']}"
        math = r["math_attention"] or {}
        print(f"{r['kind']:12} {shape:38} {r['predicted_bytes']:>14} {r['measured_bytes']:>10}"
              f" {count:>8} {r['predicted_flops']:>14} {r['measured_flops']:>10}"
              f" {r['attention_flops_uncounted']:>10} {math.get('predicted_flops', '-'):>13}"
              f" {math.get('measured_flops', '-'):>10}  {'ok' if r['passed'] else 'MISMATCH'}")
        if tensors or not r["passed"]:
            for row in r["pairs"]:
                print(f"    {row['ledger']:34} {row['dtype']:5} {str(tuple(row['shape'])):16}"
                      f" {row['bytes']:>9} B  {', '.join(row['saved_by'])}")
        for side in ("unmatched_predicted", "unmatched_measured"):
            for row in r[side]:
                name = row.get("name") or ", ".join(row["saved_by"])
                print(f"    {side}: {row['dtype']} x {row['numel']} = {row['bytes']} B  {name}")
    print()
    for note in NOTES:
        print("note:", note)


def _main_hf(as_json: bool, samples: int, seed: int, replay: str | None,
             families: Sequence[str] | None = None) -> int:
    """``--hf``: the grid of every family's parameter table (derive.validate.hf), then random
    configs and shapes through the public path, parameters and saved bytes (derive.validate.hf_random)."""
    from derive.validate import hf, hf_random

    if replay is not None:
        out = hf_random.replay(replay)
        json.dump(out, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0 if all(part["passed"] for part in out.values()) else 1
    results = hf.run()
    failed = sum(not r["passed"] for r in results)
    drawn = hf_random.run(samples, seed, tuple(families or config_draws.FAMILIES),
                          report=(lambda line: None) if as_json else print)
    failed_draws = len(drawn["failures"])
    if as_json:
        counts = [{"family": family, "check": check, "passed": ok, "count": n}
                  for (family, check, ok), n in sorted(drawn["counts"].items())]
        json.dump({"results": results, "passed": len(results) - failed, "failed": failed,
                   "drawn": {"counts": counts, "failures": drawn["failures"],
                             "samples": samples, "seed": seed}},
                  sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        hf.print_table(results)
        print(f"{len(results) - failed} passed, {failed} failed\n")
        hf_random.print_counts(drawn)
    return 1 if failed or failed_draws else 0


@writes_stdout("python -m derive.validate")
def main(argv: Sequence[str] | None = None) -> int:
    """Print the comparison table (or JSON) and a summary; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m derive.validate", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--tensors", action="store_true", help="list every saved tensor")
    parser.add_argument("--kind", action="append", choices=list(KINDS) + list(comm.KINDS),
                        help="only this kind (comm-*: the communication ledger against PyTorch's collectives)")
    parser.add_argument("--hf", action="store_true",
                        help="compare derive's parameter tables with transformers' models instead")
    parser.add_argument("--fp8-torchao", action="store_true",
                        help="print what torchao's float8 training keeps for backward (needs torchao)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"--hf: random configs drawn per family (default {DEFAULT_SAMPLES})")
    parser.add_argument("--seed", type=int, default=0, help="--hf: the draws' random seed")
    parser.add_argument("--replay", metavar="JSON", help="--hf: rerun one printed draw")
    parser.add_argument("--family", action="append", choices=config_draws.FAMILIES,
                        help="--hf: draw only this family (repeatable; default every family)")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error("--samples: must be a positive integer")
    if args.hf:
        return _main_hf(args.json, args.samples, args.seed, args.replay, args.family)
    if args.fp8_torchao:
        from derive.validate import fp8
        try:
            json.dump(fp8.record(), sys.stdout, indent=1)
        except ValueError as error:
            sys.stderr.write(f"python -m derive.validate: error: {error}\n")
            return 2
        sys.stdout.write("\n")
        return 0
    kinds = args.kind or [*KINDS, *comm.KINDS]
    results = run([kind for kind in kinds if kind in KINDS])
    communication = comm.run([kind for kind in kinds if kind in comm.KINDS])
    failed = sum(not r["passed"] for r in results + communication)
    passed = len(results) + len(communication) - failed
    if args.json:
        json.dump({"results": results, "notes": list(NOTES), "communication": communication,
                   "passed": passed, "failed": failed}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if results:
            _print_table(results, args.tensors)
        if communication:
            print("\nthe communication ledger against PyTorch's collectives (gloo, CPU):")
            comm.print_table(communication)
        print(f"{passed} passed, {failed} failed")
    if not args.json and not args.kind:
        from derive.validate import experts  # transformers' MoE / MLA code against the eager MoE tables
        print("\ntransformers MoE and MLA layers (eager) against derive.architectures.saved:")
        failed += not experts.run()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
