"""The report's options (``derive report``): its parser, defaults, and the field -> option table of its error lines.

The CLI (derive.cli) parses with :func:`build_parser`; the web page reads the same parser for
its fields' defaults and kinds, and :data:`FIELD_OPTIONS` to name the option a library
ValueError's field stands for.
"""
from __future__ import annotations

import argparse

from derive.accounts.activations import PROFILES
from derive.accounts.budget import DRIVER_CAPACITY
from derive.accounts.hf_profiles import EXPERTS_IMPLEMENTATIONS, HF_PROFILES
from derive.accounts.state import OPTIMIZERS, PRECISIONS
from derive.inputs import OneLineParser
from derive.options.values import FRACTION, POSITIVE, SECONDS, ZERO_STAGE
from derive.systems import SYSTEMS

DEFAULT_BUDGET = "70GiB"
DEFAULT_SEQ = 8192
#: The family of a custom shape given without --model.
CUSTOM_FAMILY = "llama"

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


def report_fields(config_only: bool) -> dict[str, str]:
    """FIELD_OPTIONS as the report names them: a model given by --config alone is --config's."""
    return {**FIELD_OPTIONS, "model": "--config"} if config_only else FIELD_OPTIONS


def moe_option(field: str, option: str) -> str:
    """The option an MoE report ValueError's field names: its own '--' option, --precision, else ``option`` (the model's)."""
    return field if field.startswith("--") else "--precision" if field == "precision" else option


#: The MoE report's parallel sizes: option -> what it splits (only the MoE report reads them).
MOE_PARALLEL = {"--tp": "tensor", "--ep": "expert", "--etp": "expert tensor", "--pp": "pipeline"}

#: The dense report's options the MoE report (Megatron bf16, distributed optimizer) does not read;
#: --precision it reads (bf16 or an FP8 recipe: derive.report_moe.moe_recipe).
DENSE_ONLY = ("optimizer", "profile", "tokens", "gpus", "mfu", "step_time", "zero", "budget",
              "peak", "gpu", *(field for field in SHAPE_OPTIONS if field != "seq"))


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line, with the article's cli.py options and more."""
    parser = OneLineParser(prog="derive", description=description)
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
    parser.add_argument("--step-time", type=SECONDS, help="observed seconds per step (with --tokens --gpus)")
    parser.add_argument("--profile", default="article", choices=[*PROFILES, *HF_PROFILES],
                        help="activation profile (default: article); hf-sdpa / hf-eager: the whole "
                             "model as transformers trains it, family from the config")
    parser.add_argument("--zero", type=ZERO_STAGE, default=0, help="ZeRO stage 0-3 (needs --dp)")
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
    moe = parser.add_argument_group("Mixture of Experts (derive.report_moe)")
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
