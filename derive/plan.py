"""``python -m derive.plan``: every layout of a model on N GPUs, the ones that fit, ranked by step time.

The search is :mod:`derive.planning.search`; this module is its command line (parser, text, JSON).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Sequence

from derive.accounts.budget import DRIVER_CAPACITY
from derive.accounts.framework_placements import PLACEMENTS
from derive.inputs import OneLineParser
from derive.options.messages import UsageError, serve
from derive.options.models import config_model, named
from derive.options.values import FRACTION, POSITIVE, positive_up_to
from derive.planning.layouts import MAX_CONTEXT
from derive.planning.ranking import COMMUNICATION, FITS, REASONS, SYSTEM_NAMES, Plan, _gib, _seconds, fit_line, nearest
from derive.planning.search import PRECISIONS, plan
from derive.presets import MODELS, MOE_PRESETS

#: The layout fields of the text table and of the JSON, in column order: a dense model's, an MoE model's.
FIELDS = ("t", "p", "v", "c", "d", "b", "m", "recompute", "zero", "balanced")
EXPERT_FIELDS = ("t", "p", "v", "c", "e", "etp", "d", "b", "m", "recompute", "zero")
#: The text table's header: a dense model's plan, an MoE model's (its e and t_E columns).
HEADER = "  rank   t   p  v  c     d  b     m  recompute  zero bal  memory GiB  step s  bubble"
EXPERT_HEADER = "  rank   t   p  v  c    e  t_E     d  b     m  recompute  zero  memory GiB  step s"


def _row(c: dict, rank: int, row: int, tight: bool, alike: int) -> str:
    """One rank's line of the text table: a dense layout's (with its bubble) or an MoE one's (e, t_E; alike counted)."""
    head = f"  {rank:4d} {c['t'][row]:3d} {c['p'][row]:3d} {c['v'][row]:2d} {c['c'][row]:2d} "
    memory, step = _gib(c["memory_per_gpu"][row]), _seconds(c["step_time"][row])
    if "e" not in c:
        bubble = (c["p"][row] - 1) / (c["v"][row] * c["m"][row])
        return (head + f"{c['d'][row]:5d} {c['b'][row]:2d} {c['m'][row]:5d}  {c['recompute'][row]:9s}  "
                f"{c['zero'][row]:4d} {c['balanced'][row]:3d}  {memory:>10s}  {step:>6s}  {bubble:6.1%}"
                + ("  tight" if tight else ""))
    return (head + f"{c['e'][row]:4d} {c['etp'][row]:4d} {c['d'][row]:5d} {c['b'][row]:2d} {c['m'][row]:5d}  "
            f"{c['recompute'][row]:9s}  {c['zero'][row]:4d}  {memory:>10s}  {step:>6s}"
            + ("  tight" if tight else "") + (f"  (+{alike} alike)" if alike else ""))


def render_text(result: Plan, top: int = 10) -> str:
    """The plan as text: header, the ``top`` ranks (one line each, its alike layouts named below or, for an MoE
    model, counted), the best few breakdowns, failures."""
    c, entry = result.columns, result.model
    order, ranks, tight = result.order(), result.ranks(), result.tight()
    feasible = int(c["feasible"].sum())
    lines = [
        f"== {entry.name} on {result.gpus} {result.hardware.upper()}"
        + (f" in {result.precision}" if result.precision != "bf16" else "")
        + f": {result.tokens:,} tokens per step (s = {entry.seq})",
        fit_line(result.usable, result.fit),
        f"  {COMMUNICATION}",
        f"  {len(order)} layouts, {feasible} fit",
    ]
    shown, first = result.leaders(top)
    experts = "e" in c
    if feasible:
        lines.append(EXPERT_HEADER if experts else HEADER)
    alike = {rank: [other for other in shown if ranks[other] == rank and other != row] for rank, row in first.items()}
    lines += [_row(c, rank, row, tight[row], len(alike[rank])) for rank, row in sorted(first.items())]
    for rank, row in sorted(first.items()) if not experts else ():
        if alike[rank]:
            named = "; ".join(" ".join(f"{key}={c[key][other]}" for key in FIELDS if c[key][other] != c[key][row])
                              + (" tight" if tight[other] else "") for other in alike[rank])
            lines.append(f"  rank {rank} also (the same predicted step): {named}")
    lines += result.summary_lines(first)
    return "\n".join(lines) + "\n"


def plan_record(result: Plan, no_layout_fits: str | None = None) -> dict[str, object]:
    """What ``--json`` prints: every layout in rank order, its fields (FIELDS; an MoE model's EXPERT_FIELDS),
    memory_per_gpu, step_time, breakdown, feasible, rank (none where it does not fit or is dominated), tight,
    dominated (another recompute / ZeRO variant of the layout is no slower with no more memory), reason; last,
    ``no_layout_fits`` (the reason and the nearest question that has an answer) when given."""
    experts = "e" in result.columns
    fields = EXPERT_FIELDS if experts else FIELDS
    kinds = {key: str if key == "recompute" else bool if key == "balanced" else int for key in fields}
    # each column as Python values once: indexing numpy per row and field cost the plan's JSON most of its time
    c = {key: result.columns[key].tolist()
         for key in (*fields, "memory_per_gpu", "step_time", "breakdown", "feasible", "reason")}
    ranks, tight, dominated = result.ranks().tolist(), result.tight().tolist(), result.dominated().tolist()
    layouts = []
    for row in result.order().tolist():
        timed = not math.isnan(c["step_time"][row])
        measured = not math.isnan(c["memory_per_gpu"][row])
        layouts.append({
            **{key: kind(c[key][row]) for key, kind in kinds.items()},
            "memory_per_gpu": int(round(c["memory_per_gpu"][row])) if measured else None,
            "step_time": float(c["step_time"][row]) if timed else None,
            "breakdown": c["breakdown"][row] if timed else None,
            "feasible": bool(c["feasible"][row]), "rank": int(ranks[row]) or None, "tight": bool(tight[row]),
            "dominated": bool(dominated[row]),
            "reason": REASONS.get(str(c["reason"][row]), ""),
        })
    return {
        "model": result.model.name, "gpus": result.gpus, "hardware": result.hardware,
        "tokens": result.tokens, "seq": result.model.seq,
        "usable_bytes": {"low": result.usable[0], "high": result.usable[1]}, "fit": result.fit,
        **({} if experts else {"precision": result.precision, "communication_modelled": True}),
        "note": COMMUNICATION, "failures": result.failures(), "layouts": layouts,
        **({} if no_layout_fits is None else {"no_layout_fits": no_layout_fits}),
    }


#: Largest --gpus: 2^20 (the other counts take the CLI's 2^53, integers a float holds exactly).
_GPUS = positive_up_to(2**20, "a positive integer up to 2^20")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m derive.plan``."""
    parser = OneLineParser(prog="derive.plan", description=__doc__.split("\n\n")[0],
                           epilog=f"ranking: {COMMUNICATION}. No layout fitting exits 1 with the reason.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model",
                       help="a preset (dense or MoE), alias or shipped dense config (derive report --list-models)")
    which.add_argument("--config", metavar="FILE",
                       help="a Hugging Face config.json of a dense model (derive.hf.from_config)")
    parser.add_argument("--gpus", type=_GPUS, required=True)
    parser.add_argument("--gpu", default="h100", choices=sorted({*SYSTEM_NAMES.values(), *DRIVER_CAPACITY}),
                        help="a derive.systems GPU with a measured usable-memory range (derive.accounts.budget)")
    parser.add_argument("--tokens", type=POSITIVE, required=True, help="tokens per step")
    parser.add_argument("--seq", type=POSITIVE, help="sequence length (default: the model's)")
    parser.add_argument("--profile", default="llama-fused", help="layer profile of the saved-for-backward table")
    parser.add_argument("--placement", default="megatron", choices=sorted(PLACEMENTS))
    parser.add_argument("--mfu", type=FRACTION,
                        help="not taken: the planner ranks by the step model's predicted time, not a target MFU")
    parser.add_argument("--max-cp", type=POSITIVE, default=MAX_CONTEXT,
                        help=f"largest context-parallel size tried (default {MAX_CONTEXT}; 1: none)")
    parser.add_argument("--fit", default="high", choices=sorted(FITS),
                        help="judge memory at the usable range's high end (default; 'tight' marks a layout "
                             "above the low end) or only at its low end")
    parser.add_argument("--precision", default="bf16", choices=PRECISIONS,
                        help="bf16 (the placement's own states) or an FP8 recipe (derive.recipes): its weight "
                             "copies and FP8 linear inputs in memory, its FP8 GEMMs in the step time; refused "
                             "on a --gpu without tensor cores for it (mxfp8: Blackwell)")
    parser.add_argument("--top", type=POSITIVE, default=10,
                        help="ranks to show (layouts with the same predicted step share one)")
    parser.add_argument("--json", action="store_true", help="every layout as JSON")
    return parser


#: Field names in derive's ValueErrors -> the option to name.
FIELD_OPTIONS = {"model": "--model", "config": "--config", "profile": "--profile", "seq": "--seq", "tokens": "--tokens",
                 "peak": "--gpu", "hardware_name": "--gpu", "placement": "--placement", "precision": "--precision"}


def planned(argv: Sequence[str] | None = None) -> tuple[Plan, argparse.Namespace]:
    """The plan of the parsed ``argv`` (an MoE preset's over e and t_E too); UsageError on bad input."""
    args = build_parser().parse_args(argv)
    if args.mfu is not None:
        raise UsageError("--mfu: the planner ranks layouts by the step model's predicted time "
                         "(derive.accounts.prediction), not by a target MFU; derive report takes --mfu")
    hardware_name = {name: budget for budget, name in SYSTEM_NAMES.items()}.get(args.gpu, args.gpu)
    if args.model in MOE_PRESETS:  # the preset as the MoE accounts read it (DeepSeek-V3's MTP module)
        entry = MODELS[args.model]
    else:
        entry = named(args.model)[0] if args.model else config_model(args.config)
    try:
        result = plan(entry, args.gpus, args.tokens, hardware_name, args.seq,
                      args.profile, args.placement, 1.0, args.max_cp, args.fit, args.precision)
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        options = {**FIELD_OPTIONS, "model": "--config"} if args.config else FIELD_OPTIONS
        raise UsageError(f"{options.get(field, field)}: {rest}") from None
    return result, args


def no_layout_fits(result: Plan) -> str | None:
    """None where some layout fits; else the reason and the nearest question that has an answer."""
    return None if result.columns["feasible"].any() else nearest(result)


def run(argv: Sequence[str] | None = None) -> str:
    """The plan as text or JSON (no layout fitting: the reason and the nearest question that has an answer)."""
    result, args = planned(argv)
    empty = no_layout_fits(result)
    if args.json:
        return json.dumps(plan_record(result, empty), indent=1) + "\n"
    return render_text(result, args.top) + ("" if empty is None else f"  no layout fits: {empty}\n")


def record(argv: Sequence[str] | None = None) -> dict[str, object]:
    """What ``run(argv)`` prints with --json, as the object json writes (a caller that reads it skips the text)."""
    result, _ = planned(argv)
    return plan_record(result, no_layout_fits(result))

def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the plan (exit 1 when no layout fits), or one error line and exit status 2."""
    printed: list[str] = []

    def keep(given: Sequence[str] | None) -> str:
        printed.append(run(given))
        return printed[0]

    code = serve(keep, argv, "derive.plan")
    return 1 if code == 0 and ("no layout fits" in printed[0] or '"no_layout_fits"' in printed[0]) else code


if __name__ == "__main__":
    sys.exit(main())
