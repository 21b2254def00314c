"""``derive`` / ``python -m derive.report``: the four states, FLOPs and step-time bounds of one model.

Every figure is a proven expression of derive with the model's sizes
substituted; ``--json`` prints each with its unit and the expression it came
from. Bad input exits with status 2 and one line naming the option. Memory is
printed in GiB / TiB (2^30 / 2^40 B); the JSON gives bytes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import replace
from fractions import Fraction
from typing import Callable, Sequence

import sympy as sp

from derive.accounts.activations import PROFILES
from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes, usable_low_end
from derive.accounts.hf_profiles import EXPERTS_IMPLEMENTATIONS, HF_PROFILES
from derive.accounts.state import OPTIMIZERS, PRECISIONS
from derive.hf import from_config
from derive.inputs import MAX_SIZE, OneLineParser
from derive.model import MOE_FAMILIES, Model
from derive.names import SEQ_FROM_CONFIG, is_moe, model_names, moe_model, moe_source, named_model
from derive.presets import HARDWARE, LLAMA3_MODELS, MODELS, hardware
from derive.report import MOE_DEFAULT_PROFILE, MoELayout, Request, figures, moe_figures
from derive.report_text import render_json, render_moe, render_text
from derive.verdicts import BUDGET_LABELS
from derive.systems import SYSTEMS, system
from derive.units import BYTE_UNITS, format_memory, to_unit

DEFAULT_BUDGET = "70GiB"
DEFAULT_SEQ = 8192
#: The whitespace and digits a number may be typed with: ASCII only. Python's int() and float()
#: would also take other scripts' digits (Arabic-Indic, full-width ...) and Unicode spaces, by the
#: interpreter's Unicode tables, which a browser's JavaScript does not share; the CLI and the web
#: page (derive.render.web ships these patterns to it) accept exactly the same text.
SPACE = r"[ \t\n\r\f\v]"
DIGITS = r"[0-9](?:_?[0-9])*"


def _caseless(word: str) -> str:
    """A regular expression matching ``word`` in any case, without flags (Python's re and JavaScript's alike)."""
    return "".join(f"[{char.lower()}{char.upper()}]" for char in word)


#: Python's int() syntax (PEP 515 underscores) in ASCII.
INTEGER_PATTERN = rf"{SPACE}*[-+]?{DIGITS}{SPACE}*"
#: Python's float() syntax (PEP 515 underscores, inf, infinity, nan) in ASCII.
FLOAT_PATTERN = (rf"{SPACE}*[-+]?(?:(?:{DIGITS}\.(?:{DIGITS})?|\.{DIGITS}|{DIGITS})"
                 rf"(?:[eE][-+]?{DIGITS})?|{_caseless('inf')}(?:{_caseless('inity')})?|{_caseless('nan')}){SPACE}*")
#: A budget size: a signed number and a byte unit of derive.units (checked after the match).
BUDGET_PATTERN = rf"{SPACE}*([-+]?[0-9]+(?:\.[0-9]+)?){SPACE}*([KMGT]i?B){SPACE}*"
#: The family of a custom shape given without --model.
CUSTOM_FAMILY = "llama"
#: A bad value longer than ``longest`` characters is shown as its first ``head`` and last ``tail``.
SHOWN: dict[str, int] = {"longest": 40, "head": 20, "tail": 8}
#: The largest peak (FLOP/s) and step time (s) taken: far beyond any accelerator or step, and
#: small enough that every product of the report's inputs stays inside a float's normal range
#: (counts <= 2^53: G P t <= 2^206), so the web page's float arithmetic agrees with the exact report.
MAX_PEAK = 2**100
MAX_SECONDS = 2**53

#: Model fields -> the custom-shape option that sets them.
SHAPE_OPTIONS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads",
                 "kv_heads": "--kv-heads", "ffn": "--ffn", "vocab": "--vocab", "seq": "--seq"}

#: Field names in derive's ValueErrors -> the option to name in the error line.
FIELD_OPTIONS = {**SHAPE_OPTIONS, "precision": "--precision", "optimizer": "--optimizer",
                 "profile": "--profile", "model": "--model", "family": "--model",
                 "peak": "--peak", "peak_flops": "--peak", "micro_batch": "--micro-batch",
                 "tokens": "--tokens", "gpus": "--gpus", "mfu": "--mfu",
                 "step_time": "--step-time", "zero": "--zero", "dp": "--dp",
                 "budget_bytes": "--budget", "head_dim": "--model"}


class UsageError(Exception):
    """A bad option: reported as one line, exit status 2."""


def parse_budget(text: str) -> tuple[int, str]:
    """'70GiB' / '80 GB' -> (bytes, label); a hardware name -> the low end of its usable range.

    The unit is mandatory so GB and GiB never mix; a hardware budget comes from
    derive.accounts.budget (driver capacity less context, NCCL, margin, fragmentation, workspaces).
    """
    name = hardware_name(text)
    if name in DRIVER_CAPACITY:
        low, high = usable_bytes(name)
        return low, BUDGET_LABELS["hardware"].format(name=name, low=f"{to_unit(low, 'GiB'):.2f}",
                                                     high=f"{to_unit(high, 'GiB'):.2f}")
    if name in HARDWARE:
        raise UsageError(f"--budget: derive.accounts.budget records no driver capacity for {name} "
                         f"(only {', '.join(DRIVER_CAPACITY)}); give a size such as 130GiB")
    match = re.fullmatch(BUDGET_PATTERN, text)
    if not match or match.group(2) not in BYTE_UNITS:
        raise UsageError(f"--budget: expected a size with its unit such as 70GiB or 80GB, or one of "
                         f"{', '.join(DRIVER_CAPACITY)}, got {text!r}")
    size = Fraction(match.group(1)) * BYTE_UNITS[match.group(2)]
    if size <= 0:
        raise UsageError(f"--budget: must be positive, got {text!r}")
    if size < 1:
        raise UsageError(f"--budget: must be at least one byte, got {text!r}")
    if math.floor(size) > MAX_SIZE:
        raise UsageError(f"--budget: must be at most 2^53 bytes, got {text!r}")
    return math.floor(size), text.strip()


def parse_peak(text: str) -> tuple[float, str]:
    """A hardware preset name or a number in FLOP/s -> (FLOP/s, label)."""
    name = hardware_name(text)
    if name in HARDWARE:
        return hardware(name).peak_flops, name.upper()
    try:
        value = python_float(text)
    except ValueError:
        raise UsageError(f"--peak: unknown hardware {text!r} (known: {', '.join(HARDWARE)}; "
                         "or a number in FLOP/s)") from None
    if not 0 < value <= MAX_PEAK:
        raise UsageError(f"--peak: must be a positive number of FLOP/s up to 2^100, got {text!r}")
    return value, f"{value:.4g} FLOP/s"


def hardware_name(text: str) -> str:
    """``text`` as a hardware name: ASCII whitespace around dropped, lower case if it is ASCII (no Unicode case folding)."""
    name = re.sub(rf"^{SPACE}+|{SPACE}+$", "", text)
    return name.lower() if name.isascii() else name


def python_int(text: str) -> int:
    """int(``text``) for text of INTEGER_PATTERN, else ValueError."""
    if not re.fullmatch(INTEGER_PATTERN, text):
        raise ValueError(text)
    return int(text)


def python_float(text: str) -> float:
    """float(``text``) for text of FLOAT_PATTERN, else ValueError."""
    if not re.fullmatch(FLOAT_PATTERN, text):
        raise ValueError(text)
    return float(text)


def _converter(convert: Callable[[str], object], expected: str) -> Callable[[str], object]:
    """An argparse type whose failures say what was expected (argparse names the option)."""
    def parse(text: str) -> object:
        try:
            return convert(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {shown(text)!r}") from None
    parse.__name__ = expected
    return parse


def shown(text: str) -> str:
    """``text`` as an error line shows it: shortened past SHOWN["longest"] characters."""
    if len(text) <= SHOWN["longest"]:
        return text
    return f"{text[:SHOWN['head']]}...{text[-SHOWN['tail']:]} ({len(text)} characters)"


def positive_up_to(largest: int, expected: str) -> Callable[[str], object]:
    """An argparse type: a positive integer up to ``largest``, described as ``expected``."""
    def parse(text: str) -> int:
        value = python_int(text)
        if not 0 < value <= largest:
            raise ValueError(text)
        return value
    return _converter(parse, expected)


def _zero_stage(text: str) -> int:
    value = python_int(text)
    if value not in (0, 1, 2, 3):
        raise ValueError(text)
    return value


def _fraction(text: str) -> float:
    value = python_float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    value = python_float(text)
    if not 0 < value <= MAX_SECONDS:
        raise ValueError(text)
    return value


POSITIVE = positive_up_to(MAX_SIZE, "a positive integer up to 2^53")
FRACTION = _converter(_fraction, "a fraction in (0, 1]")


def build_parser() -> argparse.ArgumentParser:
    """The command line, with the article's cli.py options and more."""
    parser = OneLineParser(prog="derive", description=__doc__)
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="a preset or a shipped config's name, MoE included (repeatable; default: the "
                             "three Llama 3 models; --list-models prints them)")
    parser.add_argument("--list-models", action="store_true",
                        help="print every name --model takes (presets, then derive/configs) and exit")
    parser.add_argument("--gpu", metavar="NAME",
                        help=f"a GPU of derive.systems ({', '.join(SYSTEMS)}): its bf16 peak and its usable "
                             "memory low end (derive.accounts.budget); --peak and --budget override it")
    parser.add_argument("--config", action="append", metavar="PATH",
                        help="a Hugging Face config.json (repeatable; the shape options override it)")
    parser.add_argument("--precision", default="bf16", help=", ".join(PRECISIONS))
    parser.add_argument("--optimizer", default="adam", help=", ".join(OPTIMIZERS))
    parser.add_argument("--micro-batch", type=POSITIVE, default=1)
    parser.add_argument("--tokens", type=POSITIVE, help="tokens per step (global batch; with --gpus)")
    parser.add_argument("--gpus", type=POSITIVE, help="GPUs of the step (with --tokens)")
    parser.add_argument("--peak", default="h100",
                        help="override: FLOP/s (or a hardware preset; default: --gpu's, else h100)")
    parser.add_argument("--mfu", type=FRACTION,
                        help="target MFU of the step bound (default 0.4; with --tokens --gpus)")
    parser.add_argument("--step-time", type=_converter(_seconds, "a positive number of seconds up to 2^53"),
                        help="observed seconds per step (with --tokens --gpus)")
    parser.add_argument("--profile", default="article", choices=[*PROFILES, *HF_PROFILES],
                        help="activation profile (default: article); hf-sdpa / hf-eager: the whole "
                             "model as transformers trains it, family from the config")
    parser.add_argument("--zero", type=_converter(_zero_stage, "a ZeRO stage 0, 1, 2 or 3"),
                        default=0, help="ZeRO stage 0-3 (needs --dp)")
    parser.add_argument("--dp", type=POSITIVE, help="data-parallel ranks ZeRO shards over")
    parser.add_argument("--budget", default=DEFAULT_BUDGET,
                        help="override: memory per GPU with its unit (70GiB, 80GB) or a hardware name "
                             f"({', '.join(DRIVER_CAPACITY)}: the low end of its usable range); "
                             "default: --gpu's usable low end, else 70GiB")
    shape = parser.add_argument_group("custom shape (overrides the preset; without --model, "
                                      "--layers --hidden --heads --ffn --vocab are required)")
    for field, option in SHAPE_OPTIONS.items():
        shape.add_argument(option, dest=field, type=POSITIVE)
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    moe = parser.add_argument_group("Mixture of Experts (derive.report)")
    moe.add_argument("--moe", metavar="NAME|CONFIG",
                     help="an MoE preset (mixtral-8x7b, deepseek-v3, qwen3-30b-a3b) or a config.json "
                          "of a mixtral, qwen2_moe, qwen3_moe or deepseek_v3 model")
    for option, meaning in MOE_PARALLEL.items():
        moe.add_argument(option, type=POSITIVE, help=f"{meaning}-parallel size (default 1)")
    moe.add_argument("--moe-profile", choices=["eager", "fused"],
                     help="MoE activation profile (default: fused, Megatron + TE)")
    moe.add_argument("--experts-implementation", choices=list(EXPERTS_IMPLEMENTATIONS),
                     help="transformers' experts implementation under --profile hf-sdpa / hf-eager "
                          "(default grouped_mm)")
    return parser


#: The MoE report's parallel sizes: option -> what it splits (only the MoE report reads them).
MOE_PARALLEL = {"--tp": "tensor", "--ep": "expert", "--etp": "expert tensor", "--pp": "pipeline"}


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
            named = field if field.startswith("--") else "--precision" if field == "precision" else option
            raise UsageError(f"{named}: {rest}") from None
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


def _from_config(path: str) -> Model:
    """A model read from a config.json; its errors name --config and the config's field."""
    try:
        return from_config(path)
    except ValueError as error:
        raise UsageError(f"--config: {path}: {error}") from None


def _named(name: str) -> tuple[Model, str]:
    """A dense model by --model name (derive.names) and where its s comes from; UsageError if unknown."""
    try:
        return named_model(name)
    except ValueError as error:
        raise UsageError(f"--model: {str(error).partition(': ')[2]}") from None


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
        missing = [FIELD_OPTIONS[field] for field in ("layers", "hidden", "heads", "ffn", "vocab")
                   if field not in overrides]
        if missing:
            raise UsageError(f"{missing[0]}: required for a custom shape without --model")
        heads = overrides["heads"]
        return [(Model("custom", CUSTOM_FAMILY, overrides["layers"], overrides["hidden"], heads,
                       overrides.get("kv_heads", heads), overrides["ffn"], overrides["vocab"],
                       overrides.get("seq", DEFAULT_SEQ), "command line"),
                 "--seq" if "seq" in overrides else f"default {DEFAULT_SEQ}")]
    bases = [_named(name) for name in args.model or ()]
    bases += [(_from_config(path), SEQ_FROM_CONFIG) for path in args.config or ()]
    if not overrides:
        return bases
    shaped = []
    for base, seq_from in bases:
        changes = dict(overrides)
        if base.family == "gpt":
            if changes.get("kv_heads", changes.get("heads", base.heads)) != changes.get(
                    "heads", base.heads):
                raise UsageError(f"--kv-heads: {base.name} has no grouped-query attention "
                                 "(GPT: kv heads = heads); set --heads instead")
            changes["kv_heads"] = changes.get("heads", base.heads)
        shaped.append((replace(base, name=f"{base.name} (custom)", **changes),
                       "--seq" if "seq" in overrides else seq_from))
    return shaped


def _gpu(name: str):
    """The derive.systems GPU of --gpu; UsageError listing the names if unknown."""
    try:
        return system(hardware_name(name))
    except ValueError:
        raise UsageError(f"--gpu: unknown GPU {shown(name)!r} (known: {', '.join(SYSTEMS)})") from None


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


#: The dense report's options the MoE report (Megatron bf16, distributed optimizer) does not read;
#: --precision it reads (bf16 or an FP8 recipe: derive.report.moe_recipe).
DENSE_ONLY = ("optimizer", "profile", "tokens", "gpus", "mfu", "step_time", "zero", "budget",
              "peak", "gpu", *(field for field in SHAPE_OPTIONS if field != "seq"))
_UNSET = object()


def given_options(argv: Sequence[str] | None) -> frozenset[str]:
    """The destinations ``argv`` sets itself (a second parse with every default unset)."""
    parser = build_parser()
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
    args = build_parser().parse_args(argv)
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
                raise UsageError(f"{option}: the MoE report (derive.report: Megatron bf16, distributed "
                                 "optimizer) does not take it")
        if args.experts_implementation is not None and args.profile not in HF_PROFILES:
            raise UsageError("--experts-implementation: only the transformers profiles read it "
                             f"(--profile {' or '.join(HF_PROFILES)})")
        option = "--moe" if args.moe else "--model" if moe_names else "--config"
        return _moe_report(args, moe, option)
    for option in (*MOE_PARALLEL, "--moe-profile", "--experts-implementation"):
        if getattr(args, option.lstrip("-").replace("-", "_")) is not None:
            raise UsageError(f"{option}: only the MoE report (--moe, or an MoE --model or --config) reads it")
    try:
        asked = request(args, given)
        chosen = sourced_models(args)
        reports = [(m, figures(m, asked)) for m, _ in chosen]
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        option = ("--config" if field == "model" and args.config and not args.model
                  else FIELD_OPTIONS.get(field, field))
        raise UsageError(f"{option}: {rest}") from None
    seq_from = {m.name: source for m, source in chosen}
    if args.json:
        return render_json(reports, seq_from)
    return "\n".join(render_text(m, asked, {fig.key: fig for fig in values}, seq_from[m.name])
                     for m, values in reports)


def serve(run: Callable[[Sequence[str] | None], str], argv: Sequence[str] | None, prog: str) -> int:
    """Print ``run(argv)``; a UsageError or an unwritable stdout is one error line and exit status 2."""
    try:
        text = run(argv)
    except UsageError as error:
        sys.stderr.write(f"{prog}: error: {' '.join(str(error).split())}\n")
        return 2
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as error:
        # Point stdout at /dev/null so the interpreter's final flush cannot fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stderr.write(f"{prog}: error: stdout: cannot write the report "
                         f"({error.strerror or error})\n")
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the report, or one error line and exit status 2."""
    return serve(run, argv, "derive")


if __name__ == "__main__":
    sys.exit(main())
