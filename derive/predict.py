"""``python -m derive.predict``: one layout's predicted step time, throughput, MFU and breakdown.

The model: --model (a preset, an MoE preset or a shipped config's name), --config PATH (any
config.json derive reads, MoE included) or --architecture layers=…,hidden=…,ffn=…,heads=…,
kv-heads=…,vocab=…,mlp=gelu|swiglu (swiglu: a Llama-style layer; gelu: the GPT of the Megatron
papers, learned positions and LayerNorm). The layout: derive.options' shared options;
--expert-op-fuser runs an MoE model's experts as Transformer Engine's fused ops (``predict``'s
``expert_op_fuser``), --recompute-modules re-runs Megatron's modules (``recompute_modules``). The
prediction: ``derive.accounts.prediction.predict`` with the calibrated constants of
``derive/calibration.json``. A layout that does not divide the model, or a dense model's layout whose
most loaded rank needs more than the GPU's HBM (derive.sweep's accounts), is one line and exit
status 2; between the usable range's low end (derive.accounts.budget) and the HBM the JSON's
``conventions.memory`` says it may not fit (a published run that fits is not refused by a
conservative estimate). An MoE model's memory is derive.planning.expert_stages' (the MoE planner's rank
terms); above the HBM its note says so but predict does not refuse it: held-out published MoE runs that
trained exceed those accounts (``python -m derive.calibrate --check``: recipe options they lack, such as
gradients reduced in bf16, recomputed modules, custom pipeline layouts). ``memory`` in the JSON: the most
loaded rank's bytes (``per_gpu``), the usable low end, each stage's bytes by part, all as requested, with
no caching-allocator rounding (derive plan rounds each buffer and tensor: its fit check is the stricter);
empty, with the note "not checked" and why, where the accounts do not cover the layout.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Sequence

from derive.accounts.budget import usable_low_end
from derive.accounts.compute_time import RECOMPUTE_MODULE_KERNELS
from derive.accounts.prediction import ledger_precision, predict
from derive.accounts.schedule import OVERLAP_RULES, overlap_rules
from derive.accounts.step import StepTime, budget_time
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.inputs import OneLineParser
from derive.model import Model
from derive.options.messages import UsageError, serve, usage
from derive.options.models import config_model, named
from derive.options.values import POSITIVE
from derive.options.layout import DEFAULT_GPU, add_layout_options, add_token_budget, option_error, parallelism_from
from derive.parallelism import Parallelism
from derive.planning.expert_stages import expert_stage_memory, layout_memory, most_loaded_stage, unmodelled
from derive.planning.memory import memory_per_gpu
from derive.planning.stage_memory import stage_memory
from derive.systems import SYSTEMS, System, system
from derive.units import format_bytes, format_memory
from derive.verdicts import MEMORY

#: The architecture fields of --architecture and the Model field each sets.
ARCHITECTURE_FIELDS = {"layers": "layers", "hidden": "hidden", "ffn": "ffn", "heads": "heads",
                       "kv-heads": "kv_heads", "vocab": "vocab"}
MLPS = {"swiglu": "llama", "gelu": "gpt"}


def architecture_model(text: str, seq: int | None) -> Model:
    """A Model from 'layers=…,hidden=…,…,mlp=gelu|swiglu'; UsageError naming --architecture."""
    fields: dict[str, str] = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        key, sign, value = part.partition("=")
        if not sign or key.strip() not in [*ARCHITECTURE_FIELDS, "mlp"]:
            raise UsageError(f"--architecture: expected key=value with keys {', '.join([*ARCHITECTURE_FIELDS, 'mlp'])}, "
                             f"got {part!r}")
        fields[key.strip()] = value.strip()
    missing = [key for key in ARCHITECTURE_FIELDS if key not in fields and key != "kv-heads"]
    if missing:
        raise UsageError(f"--architecture: {missing[0]}= is needed")
    if seq is None:
        raise UsageError("--seq: needed with --architecture (a shape has no sequence length of its own)")
    mlp = fields.get("mlp", "swiglu")
    if mlp not in MLPS:
        raise UsageError(f"--architecture: mlp must be gelu or swiglu, got {mlp!r}")
    sizes = {}
    for key, name in ARCHITECTURE_FIELDS.items():
        value = fields.get(key, fields["heads"] if key == "kv-heads" else None)
        try:
            sizes[name] = POSITIVE(value)
        except Exception:
            raise UsageError(f"--architecture: {key} must be a positive integer, got {value!r}") from None
    try:
        return Model(f"architecture({text})", MLPS[mlp], seq=seq, **sizes,
                     source="--architecture")
    except ValueError as error:
        raise UsageError(f"--architecture: {error}") from None


def chosen_model(args) -> Model:
    """The model of exactly one of --model, --config, --architecture, at --seq."""
    given = [name for name in ("model", "config", "architecture") if getattr(args, name) is not None]
    if len(given) != 1:
        raise UsageError("--model: give exactly one of --model, --config or --architecture")
    if args.architecture is not None:
        return architecture_model(args.architecture, args.seq)
    if args.config is not None:
        entry = config_model(args.config)
    else:
        entry = named(args.model, moe=True)[0]
    return entry if args.seq is None else replace(entry, seq=args.seq)


def usable(gpu: System) -> int:
    """Bytes usable for tensors, low end (derive.accounts.budget.usable_low_end)."""
    return usable_low_end(gpu)


def build_parser() -> OneLineParser:
    """--model / --config / --architecture, --gpu, --seq, the layout options, --overlap, --json."""
    parser = OneLineParser(prog="python -m derive.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", metavar="NAME", help="a preset, an MoE preset or a shipped config's name")
    parser.add_argument("--config", metavar="PATH", help="a Hugging Face config.json (MoE included)")
    parser.add_argument("--architecture", metavar="SHAPE",
                        help="layers=…,hidden=…,ffn=…,heads=…,kv-heads=…,vocab=…,mlp=gelu|swiglu")
    parser.add_argument("--gpu", default=DEFAULT_GPU, help=", ".join(SYSTEMS))
    parser.add_argument("--seq", type=POSITIVE, help="sequence length (default: the model's)")
    add_layout_options(parser)
    parser.add_argument("--overlap", metavar="RULES",
                        help="comma-separated overlap rules to turn on (default: "
                             "derive.accounts.schedule.DEFAULT_OVERLAP; 'none' for none): "
                             + ", ".join(OVERLAP_RULES))
    parser.add_argument("--expert-op-fuser", action="store_true",
                        help="the routed experts run as Transformer Engine's fused ops (Megatron's "
                             "--use-transformer-engine-op-fuser): no eager expert bias or GLU clamp kernels "
                             "(MoE models only)")
    parser.add_argument("--recompute-modules", metavar="MODULES",
                        help="comma-separated Megatron --recompute-modules the step re-runs beside --recompute "
                             "(selective granularity): " + ", ".join(RECOMPUTE_MODULE_KERNELS)
                             + " (MoE models only; derive.accounts.compute_time.RECOMPUTE_MODULE_KERNELS)")
    parser.add_argument("--no-memory-check", action="store_true", help="predict even if the layout does not fit")
    add_token_budget(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    return parser


def prediction(args) -> tuple[Model, Parallelism, System, StepTime]:
    """Check and predict the parsed ``args``; UsageError (exit 2, one line) on anything that cannot run."""
    try:
        gpu = system(args.gpu)
    except ValueError:
        raise usage("gpu_unknown", text=repr(args.gpu), known=", ".join(SYSTEMS)) from None
    if args.precision not in LINEAR_DTYPE:
        raise UsageError(f"--precision: unknown precision {args.precision!r} (known: {', '.join(LINEAR_DTYPE)})")
    precision = args.precision_name = args.precision
    entry = chosen_model(args)
    args.precision = ledger_precision(precision)
    layout = parallelism_from(args, entry)
    rules = None
    if args.overlap is not None:
        names = [] if args.overlap.strip() == "none" else [x.strip() for x in args.overlap.split(",") if x.strip()]
        try:
            rules = overlap_rules(names)
        except ValueError as error:
            raise option_error(error, {"overlap": "--overlap"}) from None
    if args.expert_op_fuser and entry.dense:
        raise UsageError(f"--expert-op-fuser: {entry.name} has no routed experts (the flag fuses their kernels)")
    modules = recompute_modules(args.recompute_modules, entry)
    try:
        result = predict(entry, layout, gpu, precision, rules, expert_op_fuser=args.expert_op_fuser,
                         recompute_modules=modules)
    except ValueError as error:
        raise option_error(error, {"model": "--model", "gpu": "--gpu",
                                   "recompute_modules": "--recompute-modules"}) from None
    needed = layout_memory(entry, layout, args.expert_op_fuser, modules)
    result.conventions["memory"] = memory_note(entry, layout, needed, gpu, args.expert_op_fuser, modules)
    if not args.no_memory_check and entry.dense and needed > gpu.hbm_bytes:
        raise UsageError(MEMORY["does_not_fit"].format(needed=format_memory(needed), gpu=gpu.name, hbm=hbm_text(gpu)))
    return entry, layout, gpu, result


def hbm_text(gpu: System) -> str:
    """The GPU's HBM as its datasheet gives it, in GB (the refusal's words)."""
    return format_bytes(gpu.hbm_bytes, "GB", 0)


def recompute_modules(text: str | None, entry: Model) -> tuple[str, ...]:
    """--recompute-modules' names (empty without it); UsageError for a dense model, whose TE layers fuse both modules."""
    if text is None:
        return ()
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if entry.dense:
        raise UsageError(f"--recompute-modules: {entry.name} has no routed experts (its norms are fused into "
                         "the linear layers and it has no expert activation to recompute)")
    if not names:
        raise UsageError(f"--recompute-modules: name one or more of {', '.join(RECOMPUTE_MODULE_KERNELS)}")
    return names


def memory_note(entry: Model, layout: Parallelism, needed: float | None, gpu: System, expert_op_fuser: bool = False,
                recompute_modules: tuple[str, ...] = ()) -> str:
    """What the memory accounts say of the layout: its most loaded rank's bytes against the usable range and (an MoE
    model's, not refused) the HBM; why not where they do not cover it."""
    if needed is None:
        return MEMORY["not_checked"].format(reason=unmodelled(entry, layout, expert_op_fuser, recompute_modules))
    low = usable(gpu)
    over = not entry.dense and needed > gpu.hbm_bytes
    verdict = MEMORY["over_hbm" if over else "fits" if needed <= low else "may_not_fit"]
    return MEMORY["note"].format(needed=format_memory(needed), low=format_memory(low), verdict=verdict)


def memory_record(entry: Model, layout: Parallelism, gpu: System, expert_op_fuser: bool = False,
                  recompute_modules: tuple[str, ...] = ()) -> dict[str, object]:
    """The JSON's ``memory``: the most loaded rank's bytes, the usable low end, each stage's bytes by part
    (derive.planning.stage_memory; an MoE model's derive.planning.expert_stages); {} where not checked."""
    if entry.dense:
        return {"memory": {"per_gpu": memory_per_gpu(entry, layout), "usable_low_end": usable(gpu),
                           "stages": stage_memory(entry, layout)}}
    if unmodelled(entry, layout, expert_op_fuser, recompute_modules) is not None:
        return {}
    stages = expert_stage_memory(entry, layout)
    return {"memory": {"per_gpu": most_loaded_stage(stages), "usable_low_end": usable(gpu), "stages": stages}}


def budget(layout: Parallelism, result: StepTime, tokens: int | None) -> dict[str, float]:
    """--token-budget's days and gpu_hours (derive.accounts.step.budget_time); {} without it."""
    return {} if tokens is None else budget_time(result.tokens_per_s_per_gpu, layout.gpus, tokens)


def render_text(entry: Model, layout: Parallelism, gpu: System, result: StepTime,
                tokens: int | None = None) -> str:
    """The prediction as text: step time, throughput, utilisation, the memory check's note, breakdown (and --token-budget's time)."""
    lines = [f"== {entry.name} on {layout.gpus} {gpu.name}: t={layout.tp} p={layout.pp} v={layout.vp} "
             f"c={layout.cp} e={layout.ep} d={layout.dp} b={layout.micro_batch} m={layout.micro_batches}",
             f"  step {result.step_time_s:.3f} s, {result.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, "
             f"{result.model_tflops_per_gpu:.0f} model TFLOP/s per GPU, MFU {result.mfu:.1%}, HFU {result.hfu:.1%}"]
    if "memory" in result.conventions:  # the memory check's words, as the JSON's conventions.memory
        lines.append(f"  memory: {result.conventions['memory']}")
    for name, seconds in result.breakdown.items():
        if seconds:
            lines.append(f"  {name:13s} {seconds:10.3f} s  {seconds / result.step_time_s:6.1%}")
    zero = [name for name, seconds in result.breakdown.items() if not seconds]
    if zero:
        lines.append(f"  0 s: {', '.join(zero)}")
    times = budget(layout, result, tokens)
    if times:
        lines.append(f"  {tokens:,} tokens: {times['days']:,.2f} days, {times['gpu_hours']:,.0f} GPU-hours")
    return "\n".join(lines) + "\n"


def run(argv: Sequence[str] | None = None) -> str:
    """The prediction as text or one JSON object."""
    args = build_parser().parse_args(argv)
    entry, layout, gpu, result = prediction(args)
    if args.json:
        settings = {"tp": layout.tp, "pp": layout.pp, "vp": layout.vp, "cp": layout.cp, "ep": layout.ep,
                    "etp": layout.etp, "dp": layout.dp, "micro_batch": layout.micro_batch,
                    "micro_batches": layout.micro_batches, "global_batch": layout.global_batch,
                    "zero": layout.zero, "sequence_parallel": layout.sequence_parallel,
                    "recompute": layout.recompute, "precision": args.precision_name,
                    "expert_op_fuser": args.expert_op_fuser,
                    "recompute_modules": sorted(recompute_modules(args.recompute_modules, entry))}
        memory = memory_record(entry, layout, gpu, args.expert_op_fuser, recompute_modules(args.recompute_modules, entry))
        return json.dumps({"model": entry.name, "gpu": gpu.name, "gpus": layout.gpus, **result.record(),
                           **budget(layout, result, args.token_budget), **memory, "layout": settings}, indent=1) + "\n"
    return render_text(entry, layout, gpu, result, args.token_budget)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the prediction, or one error line and exit status 2."""
    return serve(run, argv, "python -m derive.predict")


if __name__ == "__main__":
    sys.exit(main())
