"""``python -m derive.report`` / ``derive``: the four states, FLOPs and step-time bounds of one model.

Every figure is a proven expression of derive with the model's sizes
substituted; ``--json`` prints each with its unit and the expression it came
from. Bad input exits with status 2 and one line naming the option.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Sequence

import sympy as sp

from derive.accounts.activations import (
    article_layer_bytes,
    article_model_bytes,
    layer_activation_bytes,
    model_activation_bytes,
    model_layer_options,
)
from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes
from derive.accounts.flops import (
    flops_per_token,
    hfu,
    mfu,
    recompute_factor,
    step_time_lower_bound,
)
from derive.accounts.state import OPTIMIZERS, PRECISIONS, state_bytes
from derive.conventions import six_n
from derive.hf import from_config
from derive.inputs import choose, positive_int
from derive.presets import (
    ALIASES,
    HARDWARE,
    LLAMA3_MODELS,
    MODELS,
    Model,
    hardware,
    model,
)
from derive.symbols import N
from derive.units import BYTE_UNITS, format_bytes, to_unit

#: Activation profiles: name -> what it assumes.
PROFILES: dict[str, str] = {
    "article": "GPT layer of Korthikanti et al. 2022 at f = 4h, statistics ignored (the article's 34)",
    "gpt": "GPT layer of Korthikanti et al. 2022 at the model's own f",
    "llama-eager": "Llama layer as PyTorch eager keeps it",
    "llama-fused": "Llama layer with fused norm, flash attention, fused SwiGLU",
    "llama-hf-sdpa": "Llama / Mistral / Qwen 3 layer as transformers 5.23 runs it (sdpa attention)",
    "llama-hf-eager": "Llama / Mistral / Qwen 3 layer as transformers 5.23 runs it (eager attention)",
}


#: Profiles whose attention can keep or drop the score matrices; the Llama profiles are fixed.
ATTENTION_PROFILES = ("article", "gpt")
ATTENTION_VARIANTS = ("fused", "materialised")


def profile_bytes(profile: str, attention: str, m: Model | None = None) -> tuple[sp.Expr, sp.Expr]:
    """(one layer, all layers + logits) bytes of one micro-batch under ``profile`` (at ``m``'s head width)."""
    if m is not None:
        m.require_dense("model")
    if profile == "article":
        return article_layer_bytes(attention), article_model_bytes(attention)
    options = {} if m is None else model_layer_options(m, profile)
    return (layer_activation_bytes(profile, attention, **options),
            model_activation_bytes(profile, attention, **options))


DEFAULT_BUDGET = "70GiB"
DEFAULT_SEQ = 8192

#: Model fields -> the custom-shape option that sets them.
SHAPE_OPTIONS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads",
                 "kv_heads": "--kv-heads", "ffn": "--ffn", "vocab": "--vocab", "seq": "--seq"}

#: Field names in derive's ValueErrors -> the option to name in the error line.
FIELD_OPTIONS = {**SHAPE_OPTIONS, "precision": "--precision", "optimizer": "--optimizer",
                 "model": "--model", "peak": "--peak", "zero stage": "--zero",
                 "profile": "--profile"}


class UsageError(Exception):
    """A bad option: reported as one line, exit status 2."""


@dataclass(frozen=True)
class Figure:
    """One reported number with its unit and the expression it was substituted into."""

    key: str
    value: float
    unit: str
    expression: str

    def as_json(self) -> dict[str, object]:
        return {"value": self.value, "unit": self.unit, "expression": self.expression}


def parse_budget(text: str) -> tuple[int, str]:
    """'70GiB' / '80 GB' -> (bytes, label); a hardware name -> the low end of its usable range.

    The unit is mandatory so GB and GiB never mix; a hardware budget comes from
    derive.accounts.budget (driver capacity less context, NCCL, margin, fragmentation, workspaces).
    """
    if text in DRIVER_CAPACITY:
        low, high = usable_bytes(text)
        return low, (f"{text} usable low end {to_unit(low, 'GiB'):.2f} GiB "
                     f"(range {to_unit(low, 'GiB'):.2f}-{to_unit(high, 'GiB'):.2f} GiB)")
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)\s*", text)
    if not match or match.group(2) not in BYTE_UNITS:
        raise UsageError(f"--budget: expected a size with its unit such as 70GiB or 80GB, or one of "
                         f"{', '.join(DRIVER_CAPACITY)}, got {text!r}")
    value = float(match.group(1))
    if value <= 0:
        raise UsageError(f"--budget: must be positive, got {text!r}")
    return int(value * BYTE_UNITS[match.group(2)]), text


def parse_peak(text: str) -> tuple[float, str]:
    """A hardware preset name or a number in FLOP/s -> (FLOP/s, label)."""
    if text in HARDWARE:
        return hardware(text).peak_flops, text.upper()
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--peak: unknown hardware {text!r} (known: {', '.join(HARDWARE)}; "
                         "or a number in FLOP/s)") from None
    if not value > 0 or math.isinf(value):
        raise UsageError(f"--peak: must be a positive number of FLOP/s, got {text!r}")
    return value, f"{value:.4g} FLOP/s"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(option: str):
    def convert(text: str) -> int:
        try:
            return positive_int(option, int(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    convert.__name__ = option
    return convert


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line, with the article's cli.py options and more."""
    parser = _Parser(prog="derive", description=__doc__)
    names = [*MODELS, *ALIASES]
    parser.add_argument("--model", action="append", metavar="NAME",
                        help=f"preset (repeatable; default: the three Llama 3 models): {', '.join(names)}")
    parser.add_argument("--config", action="append", metavar="PATH",
                        help="a Hugging Face config.json (repeatable; the shape options override it)")
    parser.add_argument("--precision", default="bf16", help=", ".join(PRECISIONS))
    parser.add_argument("--optimizer", default="adam", help=", ".join(OPTIMIZERS))
    parser.add_argument("--micro-batch", type=_positive("--micro-batch"), default=1)
    parser.add_argument("--tokens", type=_positive("--tokens"), help="tokens per step (global batch)")
    parser.add_argument("--gpus", type=_positive("--gpus"))
    parser.add_argument("--peak", default="h100", help="hardware preset or FLOP/s")
    parser.add_argument("--mfu", type=_fraction, default=0.4, help="target MFU (default 0.4)")
    parser.add_argument("--step-time", type=_seconds, help="observed seconds per step")
    parser.add_argument("--profile", default="article", choices=list(PROFILES),
                        help="activation profile (default: article)")
    parser.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 (needs --dp)")
    parser.add_argument("--dp", type=_positive("--dp"), default=1, help="data-parallel ranks")
    parser.add_argument("--budget", default=DEFAULT_BUDGET,
                        help="memory per GPU with its unit (70GiB, 80GB) or a hardware name "
                             "(h100, a100: the low end of its usable range); default 70GiB")
    shape = parser.add_argument_group("custom shape (overrides the preset; without --model, "
                                      "--layers --hidden --heads --ffn --vocab are required)")
    for field, option in SHAPE_OPTIONS.items():
        shape.add_argument(option, dest=field, type=_positive(option))
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    moe = parser.add_argument_group("Mixture of Experts (derive.report_moe)")
    moe.add_argument("--moe", metavar="NAME|CONFIG",
                     help="an MoE preset (mixtral-8x7b, deepseek-v3, qwen3-30b-a3b) or a config.json "
                          "of a mixtral, qwen3_moe or deepseek_v3 model")
    for option, meaning in (("--tp", "tensor"), ("--ep", "expert"), ("--etp", "expert tensor"),
                            ("--pp", "pipeline")):
        moe.add_argument(option, type=_positive(option), default=1, help=f"{meaning}-parallel size")
    moe.add_argument("--moe-profile", default="fused", choices=["eager", "fused"],
                     help="MoE activation profile (default: fused, Megatron + TE)")
    return parser


def _moe_report(args: argparse.Namespace, sources: Sequence[str], option: str) -> str:
    """The MoE report of each of ``sources`` (a preset or a config.json), text or JSON; errors name ``option``."""
    from derive.moe_presets import load_moe_model
    from derive.report_moe import MoELayout, moe_figures, render_moe
    texts, data = [], {}
    for source in sources:
        try:
            model_ = load_moe_model(source, args.seq)
        except ValueError as error:
            raise UsageError(f"{option}: {error}") from None
        try:
            layout = MoELayout(args.tp, args.ep, args.etp, args.pp, args.dp, args.micro_batch)
            if args.json:
                values = moe_figures(model_, layout, args.moe_profile)
                data[model_.name] = {key: int(value) if sp.sympify(value).is_Integer else float(value)
                                     for key, value in values.items()}
            else:
                texts.append(render_moe(model_, layout, args.moe_profile) + "\n")
        except ValueError as error:
            field, _, rest = str(error).partition(": ")
            raise UsageError(f"{field if field.startswith('--') else option}: {rest}") from None
    return json.dumps(data, indent=2, sort_keys=True) + "\n" if args.json else "\n".join(texts)


def _moe_configs(args: argparse.Namespace) -> list[str]:
    """The --config paths whose model_type is an MoE family derive.report_moe reports (others: the dense report)."""
    from derive.hf import load_config
    from derive.moe_presets import MOE_FAMILIES
    found = []
    for path in args.config or ():
        try:
            config, _ = load_config(path)
        except ValueError:
            continue                     # the dense path reports the unreadable file
        if config.get("model_type") in MOE_FAMILIES:
            found.append(path)
    return found


def _from_config(path: str) -> Model:
    """A model read from a config.json; its errors name --config and the config's field."""
    try:
        return from_config(path)
    except ValueError as error:
        raise UsageError(f"--config: {path}: {error}") from None


def _models(args: argparse.Namespace) -> list[Model]:
    overrides = {field: getattr(args, field) for field in SHAPE_OPTIONS
                 if getattr(args, field) is not None}
    if args.model or args.config:
        bases = [model(name) for name in args.model or ()]
        bases += [_from_config(path) for path in args.config or ()]
    elif overrides:
        missing = [FIELD_OPTIONS[field] for field in ("layers", "hidden", "heads", "ffn", "vocab")
                   if field not in overrides]
        if missing:
            raise UsageError(f"{missing[0]}: required for a custom shape without --model")
        heads = overrides["heads"]
        return [Model("custom", "llama", overrides["layers"], overrides["hidden"], heads,
                      overrides.get("kv_heads", heads), overrides["ffn"], overrides["vocab"],
                      overrides.get("seq", DEFAULT_SEQ), "command line")]
    else:
        bases = [MODELS[name] for name in LLAMA3_MODELS]
    if overrides:
        return [replace(base, name=f"{base.name} (custom)", **overrides) for base in bases]
    return bases


def figures(m: Model, args: argparse.Namespace, peak: float) -> list[Figure]:
    """Every number the report prints for model ``m``."""
    count = m.parameters
    ranks = args.dp

    def at(expr: sp.Expr) -> float:
        return float(m.at(expr, b=args.micro_batch, d=ranks))

    def fig(key: str, expr: sp.Expr, unit: str) -> Figure:
        return Figure(key, at(expr), unit, sp.sstr(expr))

    held = state_bytes(args.precision, args.optimizer, zero_stage=args.zero)
    attentions = ATTENTION_VARIANTS if args.profile in ATTENTION_PROFILES else ("fused",)
    per_layer = {attention: profile_bytes(args.profile, attention, m)[0]
                 for attention in attentions}
    all_layers = profile_bytes(args.profile, "fused", m)[1]
    model_flops = flops_per_token(m.architecture, "causal")
    out = [
        Figure("parameters", count, "parameters", sp.sstr(N)),
        Figure("gemm_parameters", m.gemm_parameters, "parameters", "N_GEMM"),
        fig("bytes_per_parameter", held.total / N, "B/parameter"),
        fig("state.params", held.params, "B"),
        fig("state.grads", held.grads, "B"),
        fig("state.optimizer", held.optimizer, "B"),
        fig("state.resident", held.total, "B"),
        *(fig(f"activations.per_layer_{attention}", expr, "B")
          for attention, expr in per_layer.items()),
        fig("activations.all_layers_and_logits", all_layers, "B"),
        fig("flops.six_n", six_n(), "FLOP/token"),
        fig("flops.per_token_causal", model_flops, "FLOP/token"),
    ]
    per_token = at(model_flops)
    out.append(Figure("time.one_sequence", step_time_lower_bound(m.seq, per_token, 1, peak),
                      "s", "s * F / peak"))
    if args.tokens and args.gpus:
        bound = step_time_lower_bound(args.tokens, per_token, args.gpus, peak)
        out += [Figure("step.lower_bound", bound, "s", "tokens * F / (gpus * peak)"),
                Figure("step.at_target_mfu", bound / args.mfu, "s",
                       "tokens * F / (gpus * peak * mfu)")]
        if args.step_time:
            rate = args.tokens / args.step_time
            out += [Figure("observed.tokens_per_second", rate, "tokens/s", "tokens / step_time"),
                    Figure("observed.mfu", mfu(rate, per_token, args.gpus, peak), "fraction",
                           "tokens/s * F / (gpus * peak)")]
            for policy in ("selective", "full"):
                factor = at(recompute_factor(policy, m.architecture))
                out.append(Figure(f"observed.hfu_{policy}",
                                  hfu(rate, per_token, args.gpus, peak, factor), "fraction",
                                  f"MFU * ({sp.sstr(recompute_factor(policy, m.architecture))})"))
    budget, label = parse_budget(args.budget)
    resident = at(held.total)
    out += [Figure("fit.budget", budget, "B", label),
            Figure("fit.gpus_for_state", math.ceil(resident / budget), "GPUs",
                   "ceil(resident / budget)"),
            Figure("fit.gpus_for_state_and_activations",
                   math.ceil((resident + at(all_layers)) / budget), "GPUs",
                   "ceil((resident + activations) / budget)")]
    return out


def render_text(m: Model, args: argparse.Namespace, peak_label: str, values: dict[str, Figure]) -> str:
    """The article's cli.py block for one model."""
    def v(key: str) -> float:
        return values[key].value

    lines = [
        f"== {m.name}: L={m.layers} h={m.hidden} a={m.heads} kv={m.kv_heads} f={m.ffn} "
        f"V={m.vocab} s={m.seq}",
        f"  N = {v('parameters') / 1e9:.2f} B   ({args.precision} + {args.optimizer}: "
        f"{v('bytes_per_parameter'):.4g} B/param"
        + (f", ZeRO-{args.zero} over {args.dp} ranks" if args.zero else "") + ")",
        f"  params {format_bytes(v('state.params')):>10}  grads {format_bytes(v('state.grads')):>10}"
        f"  optim {format_bytes(v('state.optimizer')):>10}  resident {format_bytes(v('state.resident')):>10}",
        f"  activation/layer (b={args.micro_batch}, profile {args.profile}): "
        f"{format_bytes(v('activations.per_layer_fused')):>10} "
        + ("flash | " if "activations.per_layer_materialised" in values else "per layer | ")
        + (f"{format_bytes(v('activations.per_layer_materialised')):>10} materialised scores | "
           if "activations.per_layer_materialised" in values else "")
        + f"all layers + logits {format_bytes(v('activations.all_layers_and_logits')):>10}",
        f"  FLOPs/token: 6N = {v('flops.six_n') / 1e9:.0f} GFLOP, with causal attention = "
        f"{v('flops.per_token_causal') / 1e9:.0f} GFLOP;  one {m.seq}-token sequence on one "
        f"{peak_label} >= {v('time.one_sequence'):.2f} s",
    ]
    if "step.lower_bound" in values:
        lines.append(f"  {args.tokens / 2**20:.4g} Mi tokens/step on {args.gpus} GPUs: >= "
                     f"{v('step.lower_bound'):.2f} s at 100%, {v('step.at_target_mfu'):.2f} s at "
                     f"{args.mfu:.0%} MFU")
    if "observed.mfu" in values:
        lines.append(f"  observed {args.step_time:g} s/step = "
                     f"{v('observed.tokens_per_second') / 1e3:.0f} K tokens/s -> MFU "
                     f"{v('observed.mfu'):.1%}  HFU(selective) {v('observed.hfu_selective'):.1%}"
                     f"  HFU(full) {v('observed.hfu_full'):.1%}")
    lines.append(f"  fit at {values['fit.budget'].expression} per GPU: resident state needs >= "
                 f"{v('fit.gpus_for_state'):.0f} GPUs; with one micro-batch of activations "
                 f">= {v('fit.gpus_for_state_and_activations'):.0f}")
    return "\n".join(lines) + "\n"


def run(argv: Sequence[str] | None = None) -> str:
    """The report as text or JSON; raises UsageError on bad input."""
    args = build_parser().parse_args(argv)
    if args.moe:
        return _moe_report(args, [args.moe], "--moe")
    moe_configs = _moe_configs(args)
    if moe_configs and not args.model and len(moe_configs) == len(args.config):
        return _moe_report(args, moe_configs, "--config")
    try:
        choose("precision", args.precision, PRECISIONS)
        choose("optimizer", args.optimizer, OPTIMIZERS)
        if args.zero not in (0, 1, 2, 3):
            raise UsageError(f"--zero: must be 0, 1, 2 or 3, got {args.zero}")
        peak, peak_label = parse_peak(args.peak)
        parse_budget(args.budget)
        models = _models(args)
        reports = [(m, {fig.key: fig for fig in figures(m, args, peak)}) for m in models]
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        option = ("--config" if field == "model" and args.config and not args.model
                  else FIELD_OPTIONS.get(field, field))
        raise UsageError(f"{option}: {rest}") from None
    if args.json:
        return json.dumps({m.name: {key: fig.as_json() for key, fig in values.items()}
                           for m, values in reports}, indent=2, sort_keys=True) + "\n"
    return "\n".join(render_text(m, args, peak_label, values) for m, values in reports)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the report, or one error line and exit status 2."""
    try:
        sys.stdout.write(run(argv))
    except UsageError as error:
        sys.stderr.write(f"derive: error: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
