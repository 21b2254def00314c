"""The layout options the front ends share (``derive.comm``, ``derive.predict``): one parser group, one reader.

``add_layout_options(parser)`` adds --tp --pp --vp --cp --ep --etp --dp --gpus --micro-batch
--global-batch --precision --zero --sequence-parallel --recompute --cp-comm --scatter-gather
--algorithm --capacity-factor --dp-shard --no-sp-regather --no-reshard-after-forward --balanced
--fp8-param-gather;
``parallelism_from(args)`` reads them
into a :class:`derive.parallelism.Parallelism`, turning its ValueErrors into a UsageError that
names the option. Unset --zero and --sequence-parallel take Megatron's large-run settings
(:data:`DEFAULTS`), the same for every front end and the page.
"""
from __future__ import annotations

import argparse

import sympy as sp

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.collectives import ALGORITHMS
from derive.accounts.state import PRECISIONS
from derive.model import Model
from derive.options.messages import UsageError
from derive.options.values import POSITIVE, POSITIVE_NUMBER, ZERO_STAGE
from derive.parallelism import CP_COMMS, Parallelism
from derive.symbols import c, d, t

#: Unset --zero and --sequence-parallel, as expressions of the layout (t, and d c the ranks gradients are
#: reduced over): Megatron's large-run recipes (examples/gpt3, examples/llama in Megatron-LM) use the
#: distributed optimizer, ZeRO-1 (--use-distributed-optimizer), when gradients are reduced over more than
#: one rank, and sequence parallelism with tensor parallelism (--sequence-parallel; required with expert
#: parallelism). --zero 0 and --no-sequence-parallel turn them off.
DEFAULTS: dict[str, sp.Expr] = {"zero": sp.Piecewise((1, d * c > 1), (0, True)),
                                "sequence_parallel": sp.Piecewise((1, t > 1), (0, True))}
#: The GPU derive predict and the page's step time assume when --gpu is not given.
DEFAULT_GPU = "h100"

#: Parallelism fields -> the option that sets them (error lines name the option).
LAYOUT_OPTIONS = {"tp": "--tp", "pp": "--pp", "vp": "--vp", "cp": "--cp", "ep": "--ep", "etp": "--etp",
                  "dp": "--dp", "gpus": "--gpus", "micro_batch": "--micro-batch",
                  "global_batch": "--global-batch", "precision": "--precision", "zero": "--zero",
                  "sequence_parallel": "--sequence-parallel", "recompute": "--recompute",
                  "cp_comm": "--cp-comm", "scatter_gather": "--scatter-gather", "algorithm": "--algorithm",
                  "capacity_factor": "--capacity-factor", "reshard_after_forward": "--no-reshard-after-forward",
                  "dp_shard": "--dp-shard", "sp_regather": "--no-sp-regather", "balanced": "--balanced",
                  "fp8_param_gather": "--fp8-param-gather"}


def add_layout_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The layout options, in one group of ``parser``."""
    group = parser.add_argument_group("layout (derive.parallelism.Parallelism)")
    for field, meaning in (("tp", "tensor"), ("pp", "pipeline"), ("vp", "virtual pipeline (chunks per rank)"),
                           ("cp", "context"), ("ep", "expert")):
        group.add_argument(f"--{field}", type=POSITIVE, default=1, help=f"{meaning}-parallel size (default 1)")
    group.add_argument("--etp", type=POSITIVE, help="expert tensor-parallel size (default: --tp)")
    group.add_argument("--dp", type=POSITIVE, help="data-parallel size (or --gpus; both must agree)")
    group.add_argument("--gpus", type=POSITIVE, help="GPUs in all = tp pp cp dp (dp derived)")
    group.add_argument("--micro-batch", type=POSITIVE, default=1, help="sequences per micro-batch (b)")
    group.add_argument("--global-batch", type=POSITIVE,
                       help="sequences per step (default: one micro-batch per data-parallel rank)")
    group.add_argument("--precision", default="bf16", help=", ".join(PRECISIONS))
    group.add_argument("--zero", type=ZERO_STAGE, default=None,
                       help="0 none, 1 ZeRO-1 / distributed optimizer, 2, 3 ZeRO-3 / FSDP "
                            "(default: 1 when gradients are reduced over more than one rank, dp x cp > 1)")
    group.add_argument("--sequence-parallel", action="store_true", default=None,
                       help="Megatron sequence parallelism (default: on when --tp > 1)")
    group.add_argument("--no-sequence-parallel", dest="sequence_parallel", action="store_false", default=None,
                       help="turn sequence parallelism off")
    group.add_argument("--recompute", default="none", choices=list(RECOMPUTE_POLICIES))
    group.add_argument("--cp-comm", choices=list(CP_COMMS),
                       help="context-parallel K/V exchange: p2p ring (default) or Llama 3's all_gather (needs --cp > 1)")
    group.add_argument("--scatter-gather", action="store_true",
                       help="Narayanan et al. 2021 4.1: pipeline sends split over t")
    group.add_argument("--algorithm", default="ring", choices=list(ALGORITHMS))
    group.add_argument("--capacity-factor", type=POSITIVE_NUMBER,
                       help="MoE expert capacity factor (default: dropless)")
    group.add_argument("--dp-shard", type=POSITIVE,
                       help="HSDP: ZeRO-3 within groups of this many data-parallel ranks, replicated across")
    group.add_argument("--no-sp-regather", dest="sp_regather", action="store_false", default=None,
                       help="sequence parallel: keep the gathered input for backward (PyTorch), no re-gather")
    group.add_argument("--no-reshard-after-forward", dest="reshard_after_forward", action="store_false", default=None,
                       help="ZeRO-3 / FSDP: keep parameters gathered from forward to backward")
    group.add_argument("--balanced", action="store_true",
                       help="pipeline: the embedding and the loss take one layer slot each (Llama 3; "
                            "Megatron's --account-for-embedding/loss-in-pipeline-split)")
    group.add_argument("--fp8-param-gather", action="store_true",
                       help="FP8 precisions with --zero >= 1: all-gather the layer matrices in FP8 "
                            "(Megatron's --fp8-param-gather)")
    return group


def add_token_budget(parser: argparse.ArgumentParser) -> None:
    """--token-budget TOKENS (derive predict, the page's step card): tokens to train on, a positive integer up to 2^53."""
    parser.add_argument("--token-budget", metavar="TOKENS", type=POSITIVE,
                        help="tokens to train on: add the days and GPU-hours at the predicted throughput")


def option_error(error: ValueError, fields: dict[str, str] | None = None) -> UsageError:
    """A library ValueError 'field: why' as a UsageError naming the option."""
    field, _, rest = str(error).partition(": ")
    option = {**LAYOUT_OPTIONS, **(fields or {})}.get(field, field)
    return UsageError(f"{option}: {rest}")


def not_applying(args: argparse.Namespace, model: Model | None) -> None:
    """UsageError naming an option given where it changes nothing (no silent choice)."""
    experts = model is not None and bool(dict(model.sizes).get("E"))
    if model is not None and not experts:
        for option, value in (("--etp", args.etp), ("--capacity-factor", args.capacity_factor)):
            if value is not None:
                raise UsageError(f"{option}: {model.name} has no routed experts")
    if args.cp_comm is not None and args.cp == 1:
        raise UsageError("--cp-comm: the context-parallel K/V exchange needs --cp > 1")
    if args.scatter_gather and (args.pp == 1 or args.tp == 1):
        raise UsageError("--scatter-gather: splits pipeline sends over t; needs --pp > 1 and --tp > 1")
    if args.scatter_gather and args.sequence_parallel:
        raise UsageError("--scatter-gather: sequence parallelism already splits the pipeline sends over t")
    if args.sp_regather is False and not args.sequence_parallel:
        raise UsageError("--no-sp-regather: needs sequence parallelism (--sequence-parallel with --tp > 1)")
    if args.reshard_after_forward is False and args.zero != 3:
        raise UsageError("--no-reshard-after-forward: needs --zero 3 (ZeRO-3 / FSDP)")


def apply_defaults(args: argparse.Namespace) -> None:
    """Unset --zero and --sequence-parallel (None) set from :data:`DEFAULTS` at the layout's t, d and c
    (d: --dp, else --gpus / (tp pp cp), else 1)."""
    dp = args.dp or (args.gpus // (args.tp * args.pp * args.cp) if args.gpus else 1)
    sizes = {t: args.tp, d: dp, c: args.cp}
    if args.zero is None:
        args.zero = int(DEFAULTS["zero"].subs(sizes))
    if args.sequence_parallel is None:
        args.sequence_parallel = bool(DEFAULTS["sequence_parallel"].subs(sizes))


def parallelism_from(args: argparse.Namespace, model: Model | None = None) -> Parallelism:
    """The :class:`Parallelism` of the parsed layout options (checked against ``model`` if given)."""
    apply_defaults(args)
    not_applying(args, model)
    per_replica = args.tp * args.pp * args.cp
    dp = args.dp
    if args.gpus is not None:
        if args.gpus % per_replica:
            raise UsageError(f"--gpus: {args.gpus} is not a multiple of tp x pp x cp = {per_replica}")
        if dp is not None and dp * per_replica != args.gpus:
            raise UsageError(f"--gpus: {args.gpus} GPUs disagree with tp x pp x cp x dp = {dp * per_replica}")
        dp = args.gpus // per_replica
    try:
        layout = Parallelism(tp=args.tp, pp=args.pp, vp=args.vp, cp=args.cp, ep=args.ep, dp=dp or 1,
                             etp=args.etp, sequence_parallel=args.sequence_parallel, zero=args.zero,
                             reshard_after_forward=args.reshard_after_forward is not False,
                             micro_batch=args.micro_batch,
                             global_batch=args.global_batch, recompute=args.recompute,
                             precision=args.precision, cp_comm=args.cp_comm or "p2p",
                             scatter_gather=args.scatter_gather,
                             algorithm=args.algorithm, capacity_factor=args.capacity_factor,
                             dp_shard=args.dp_shard, sp_regather=args.sp_regather is not False,
                             balanced=getattr(args, "balanced", False),
                             fp8_param_gather=getattr(args, "fp8_param_gather", False))
        if model is not None:
            layout.check(model)
    except ValueError as error:
        raise option_error(error) from None
    return layout
