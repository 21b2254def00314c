"""``python -m derive.comm``: the bytes each rank sends in one training step, by group and pass, and every collective.

Every row is a collective of :mod:`derive.accounts.comm` with the model's sizes substituted;
``--json`` prints ``per_rank_bytes_per_step`` (keyed dp, tp, pp, cp, ep; edp for an MoE model)
and the ``collectives``. Bad input exits with status 2 and one line naming the option. Bytes
sent over links are decimal (GB = 10^9 B, MB = 10^6 B, as bandwidths in GB/s); memory is GiB.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from typing import Sequence

import sympy as sp

from derive.accounts.comm import GROUPS, collectives, group_bytes
from derive.inputs import OneLineParser
from derive.options.messages import UsageError, serve
from derive.options.models import config_model, named
from derive.options.values import POSITIVE
from derive.options.layout import add_layout_options, option_error, parallelism_from
from derive.parallelism import Parallelism
from derive.presets import Model
from derive.units import BYTE_UNITS

PASSES = ("forward", "recompute", "backward", "optimizer")


def build_parser() -> OneLineParser:
    """--model or --config, --seq, the layout options, --json."""
    parser = OneLineParser(prog="python -m derive.comm", description=__doc__)
    parser.add_argument("--model", metavar="NAME",
                        help="a preset, alias or shipped config, MoE included (derive report --list-models)")
    parser.add_argument("--config", metavar="PATH", help="a Hugging Face config.json")
    parser.add_argument("--seq", type=POSITIVE, help="sequence length (default: the model's)")
    add_layout_options(parser)
    parser.add_argument("--json", action="store_true", help="per-rank bytes and every row as JSON")
    return parser


def _model(args) -> Model:
    """The model of --model / --config (exactly one), at --seq."""
    if (args.model is None) == (args.config is None):
        raise UsageError("--model: give one of --model or --config")
    chosen = named(args.model, moe=True)[0] if args.model is not None else config_model(args.config)
    if args.seq is not None:
        chosen = replace(chosen, seq=args.seq)
    return chosen


def report(chosen: Model, layout: Parallelism) -> dict[str, object]:
    """The JSON object: model, layout, per_rank_bytes_per_step, by pass, collectives."""
    rows = collectives(chosen, layout)
    groups = GROUPS + (("edp",) if dict(chosen.sizes).get("E") else ())
    per_group = {group: int(sp.ceiling(group_bytes(rows, group))) for group in groups}
    by_pass = {group: {pass_: int(sp.ceiling(group_bytes(rows, group, pass_))) for pass_ in PASSES
                       if group_bytes(rows, group, pass_) != 0} for group in groups}
    settings = {key: (str(value) if key == "capacity_factor" and value is not None else value)
                for key, value in asdict(layout).items()}
    return {"model": chosen.name, "seq": chosen.seq,
            "layout": {**settings, "gpus": layout.gpus, "micro_batches": layout.micro_batches},
            "per_rank_bytes_per_step": per_group, "per_rank_bytes_per_step_by_pass": by_pass,
            "collectives": [row.record() for row in rows],
            "rows": "the most loaded rank: ceil(L/(p v)) layers per chunk, the last stage's edges; "
                    "bytes one rank sends (ring algorithm unless --algorithm)"}


def _gb(value: float) -> str:
    return f"{value / BYTE_UNITS['GB']:12.3f}"


def render_text(data: dict[str, object]) -> str:
    """A table of GB sent per rank per step by group and pass, then the rows."""
    layout = data["layout"]
    lines = [f"{data['model']} at s = {data['seq']}: tp {layout['tp']} pp {layout['pp']} vp {layout['vp']} "
             f"cp {layout['cp']} ep {layout['ep']} dp {layout['dp']} ({layout['gpus']} GPUs), "
             f"m = {layout['micro_batches']} micro-batches of {layout['micro_batch']}, "
             f"{layout['precision']}, ZeRO {layout['zero']}",
             "GB (10^9 bytes) one rank sends per step, by group and pass:",
             f"{'group':<6}" + "".join(f"{p:>12}" for p in PASSES) + f"{'total':>12}"]
    for group, total in data["per_rank_bytes_per_step"].items():
        passes = data["per_rank_bytes_per_step_by_pass"][group]
        lines.append(f"{group:<6}" + "".join(_gb(passes.get(p, 0)) for p in PASSES) + _gb(total))
    lines += ["", f"{'collective row':<36}{'group':>6}{'ranks':>6}{'payload MB':>13}{'sent MB':>11}"
                  f"{'count':>7}{'step GB':>10}  pass / overlaps"]
    for row in data["collectives"]:
        lines.append(f"{row['name']:<36}{row['group']:>6}{row['ranks']:>6}{row['payload'] / 1e6:13.2f}"
                     f"{row['sent'] / 1e6:11.2f}{row['count']:>7}{row['sent_per_step'] / 1e9:10.3f}  "
                     f"{row['pass']} / {row['overlap']}")
    return "\n".join(lines) + "\n"


def run(argv: Sequence[str] | None = None) -> str:
    """The text or JSON report; UsageError on bad input."""
    args = build_parser().parse_args(argv)
    chosen = _model(args)
    layout = parallelism_from(args, chosen)
    try:
        data = report(chosen, layout)
    except ValueError as error:
        raise option_error(error, {"model": "--model", "seq": "--seq"}) from None
    return json.dumps(data, indent=2) + "\n" if args.json else render_text(data)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the report, or one error line and exit status 2."""
    return serve(run, argv, "python -m derive.comm")


if __name__ == "__main__":
    sys.exit(main())
