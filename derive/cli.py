"""``derive`` / ``derive report``: the four states, FLOPs and step-time bounds of one model.

Every figure is a proven expression of derive with the model's sizes
substituted; ``--json`` prints each with its unit and the expression it came
from. Bad input exits with status 2 and one line naming the option. Memory is
printed in GiB / TiB (2^30 / 2^40 B); the JSON gives bytes.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import sympy as sp

from derive.accounts.budget import usable_low_end
from derive.accounts.hf_profiles import HF_PROFILES
from derive.model import MOE_FAMILIES, Model
from derive.names import SEQ_FROM_CONFIG, is_moe, model_names, moe_model, moe_source
from derive.options.messages import UsageError, option_line, serve, usage
from derive.options.models import config_model, custom_model, named, shaped
from derive.options.report import (DEFAULT_SEQ, DENSE_ONLY, FIELD_OPTIONS, MOE_PARALLEL, SHAPE_OPTIONS, build_parser,
                                   moe_option, report_fields)
from derive.options.values import hardware_name, parse_budget, parse_peak, shown
from derive.presets import LLAMA3_MODELS, MODELS
from derive.report import MOE_DEFAULT_PROFILE, MoELayout, Request, figures, moe_figures
from derive.report_text import render_json, render_moe, render_text
from derive.verdicts import BUDGET_LABELS
from derive.systems import SYSTEMS, system
from derive.units import format_memory, to_unit


def _moe_report(args: argparse.Namespace, sources: Sequence[str], option: str) -> str:
    """The MoE report of each of ``sources`` (a preset or a config.json), text or JSON; errors name ``option``."""
    texts, data = [], {}
    sizes = [getattr(args, name.lstrip("-")) or 1 for name in MOE_PARALLEL]
    profile = args.moe_profile or MOE_DEFAULT_PROFILE
    for source in sources:
        try:
            model_ = moe_model(source, args.seq)
        except ValueError as error:
            raise UsageError(f"{option}: {error}") from None
        try:
            layout = MoELayout(*sizes, args.dp or 1, args.micro_batch)
            saved = _moe_saved(args, source, option)
            if args.json:
                values = moe_figures(model_, layout, profile, args.precision)
                data[model_.name] = {key: int(value) if sp.sympify(value).is_Integer else float(value)
                                     for key, value in values.items()}
                if saved is not None:
                    data[model_.name]["saved_for_backward_bytes"] = saved
            else:
                texts.append(render_moe(model_, layout, profile, args.precision)
                             + ("" if saved is None else
                                f"\n  kept for backward ({args.profile}, transformers, b = "
                                f"{args.micro_batch}): {format_memory(saved['value'])}") + "\n")
        except ValueError as error:
            field, _, rest = str(error).partition(": ")
            raise UsageError(f"{moe_option(field, option)}: {rest}") from None
        if args.json and saved is not None and len(sources) == 1:  # one model: its figure on top too
            data["saved_for_backward_bytes"] = {**saved, "model": model_.name}
    return json.dumps(data, indent=2, sort_keys=True) + "\n" if args.json else "\n".join(texts)


def _moe_saved(args: argparse.Namespace, source: str, option: str) -> dict[str, object] | None:
    """Under --profile hf-sdpa / hf-eager: the whole model's bytes kept for backward, its layers and edges."""
    from derive.accounts.hf_saved import config_saved
    if args.profile not in HF_PROFILES:
        return None
    if not source.endswith(".json"):
        raise UsageError(f"{option}: --profile {args.profile} reads a config.json, not the preset "
                         f"{source!r}")
    model_, saved = config_saved(source, args.profile, args.experts_implementation or "grouped_mm")
    at = {"b": args.micro_batch, **({"s": args.seq} if args.seq else {})}
    parts = {"value": saved.total, "layers": saved.layers, "edges": saved.edges}
    return {**{key: int(model_.subs(expr, **at)) for key, expr in parts.items()}, "unit": "B",
            "expression": sp.sstr(saved.total)}


def _moe_configs(args: argparse.Namespace) -> list[str]:
    """The --config paths whose model_type is an MoE family the report's MoE rows take (others: the dense report)."""
    if not args.config:
        return []
    from derive.hf import load_config
    found = []
    for path in args.config or ():
        try:
            config, _ = load_config(path)
        except ValueError:
            continue                     # the dense path reports the unreadable file
        if str(config.get("model_type")) in MOE_FAMILIES:  # a list or object is no family: the dense path says so
            found.append(path)
    return found


def models(args: argparse.Namespace) -> list[Model]:
    """The presets named by --model and the configs of --config (default: Llama 3), with the custom shape laid over them."""
    return [entry for entry, _ in sourced_models(args)]


def sourced_models(args: argparse.Namespace) -> list[tuple[Model, str]]:
    """:func:`models` with where each one's sequence length comes from (--seq, preset, a config field, default)."""
    overrides = {field: getattr(args, field) for field in SHAPE_OPTIONS
                 if getattr(args, field) is not None}
    if not (args.model or args.config):
        if not overrides:
            return [(MODELS[name], "preset") for name in LLAMA3_MODELS]
        return [(custom_model(overrides), "--seq" if "seq" in overrides else f"default {DEFAULT_SEQ}")]
    bases = [named(name) for name in args.model or ()]
    bases += [(config_model(path), SEQ_FROM_CONFIG) for path in args.config or ()]
    if not overrides:
        return bases
    return [(shaped(base, overrides), "--seq" if "seq" in overrides else seq_from) for base, seq_from in bases]


def _gpu(name: str):
    """The derive.systems GPU of --gpu; UsageError listing the names if unknown."""
    try:
        return system(hardware_name(name))
    except ValueError:
        raise usage("gpu_unknown", text=repr(shown(name)), known=", ".join(SYSTEMS)) from None


def request(args: argparse.Namespace, given: frozenset[str] = frozenset()) -> Request:
    """The validated :class:`Request` of the parsed options (--gpu sets peak and budget unless overridden)."""
    peak, peak_label = parse_peak(args.peak)
    budget, budget_label = parse_budget(args.budget)
    if args.gpu is not None:
        gpu = _gpu(args.gpu)
        if "peak" not in given:
            peak, peak_label = float(gpu.peak("bf16")), gpu.name.upper()
        if "budget" not in given:
            budget = usable_low_end(gpu)
            budget_label = BUDGET_LABELS["gpu"].format(name=gpu.name, low=f"{to_unit(budget, 'GiB'):.2f}")
    return Request(precision=args.precision, optimizer=args.optimizer, profile=args.profile,
                   micro_batch=args.micro_batch, tokens=args.tokens, gpus=args.gpus,
                   mfu=args.mfu, step_time=args.step_time, peak_flops=peak,
                   peak_label=peak_label, zero=args.zero, dp=args.dp, budget_bytes=budget,
                   budget_label=budget_label)


_UNSET = object()


def given_options(argv: Sequence[str] | None) -> frozenset[str]:
    """The destinations ``argv`` sets itself (a second parse with every default unset)."""
    parser = build_parser(__doc__)
    parser.set_defaults(**{action.dest: None if isinstance(action, argparse._AppendAction) else _UNSET
                           for action in parser._actions if action.dest != "help"})
    return frozenset(dest for dest, value in vars(parser.parse_args(argv)).items()
                     if value is not _UNSET and value is not None)


def list_models() -> str:
    """--list-models: every name --model takes, one a line, with what it is."""
    names = model_names()
    width = max(map(len, names))
    return "".join(f"{name:<{width}}  {kind}\n" for name, kind in names.items())


def run(argv: Sequence[str] | None = None) -> str:
    """The report as text or JSON; raises UsageError (or exits 2 from argparse) on bad input."""
    args = build_parser(__doc__).parse_args(argv)
    given = given_options(argv)
    if args.list_models:
        others = sorted(given - {"list_models"})
        if others:
            raise UsageError(f"--list-models: takes no other option (got --{others[0].replace('_', '-')})")
        return list_models()
    moe_names = [name for name in args.model or () if is_moe(name)]
    moe_configs = _moe_configs(args)
    moe = ([args.moe] if args.moe else []) + [moe_source(name) for name in moe_names] + moe_configs
    if moe:
        dense = [name for name in args.model or () if name not in moe_names]
        dense += [path for path in args.config or () if path not in moe_configs]
        if dense:
            raise UsageError(f"--model: {dense[0]} is dense and the others are MoE; "
                             "report dense and MoE models in separate runs")
        for field in DENSE_ONLY:
            if field in given and not (field == "profile" and args.profile in HF_PROFILES):
                option = FIELD_OPTIONS.get(field, "--" + field.replace("_", "-"))
                raise usage("dense_only", option=option)
        if args.experts_implementation is not None and args.profile not in HF_PROFILES:
            raise UsageError("--experts-implementation: only the transformers profiles read it "
                             f"(--profile {' or '.join(HF_PROFILES)})")
        option = "--moe" if args.moe else "--model" if moe_names else "--config"
        return _moe_report(args, moe, option)
    for option in (*MOE_PARALLEL, "--moe-profile", "--experts-implementation"):
        if getattr(args, option.lstrip("-").replace("-", "_")) is not None:
            raise usage("moe_only", option=option)
    try:
        asked = request(args, given)
        chosen = sourced_models(args)
        reports = [(m, figures(m, asked)) for m, _ in chosen]
    except ValueError as error:
        raise UsageError(option_line(error, report_fields(bool(args.config and not args.model)))) from None
    seq_from = {m.name: source for m, source in chosen}
    if args.json:
        return render_json(reports, seq_from)
    return "\n".join(render_text(m, asked, {fig.key: fig for fig in values}, seq_from[m.name])
                     for m, values in reports)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the report, or one error line and exit status 2."""
    return serve(run, argv, "derive")


if __name__ == "__main__":
    import gc

    gc.freeze()                          # the imported modules live until exit: as derive.__main__.main does
    sys.exit(main())
