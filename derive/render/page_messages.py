"""The report's error lines for the page, each value marked {name}: the message table and the library's own words.

A line the front ends write themselves is its template in derive.options.messages.MESSAGES
(argparse's wording for a refused value, --budget, --peak, --gpu, a custom shape); a line a
library ValueError says (derive.report.Request's rules between fields, derive.presets.Model's
divisibility and bounds, derive.report.figures' overflows and its step faster than the hardware,
derive.names' unknown name) is that error on sentinel values, named by the option its field
stands for (derive.options.messages.option_line, as derive report names it). The page and
``derive report`` say the same words; tests/test_web.py holds the page's lines to the CLI's.
"""
from __future__ import annotations

from typing import Callable, Mapping

from derive.accounts.budget import DRIVER_CAPACITY
from derive.inputs import MAX_SIZE
from derive.moe_presets import load_moe_model
from derive.names import moe_source, named_model
from derive.options.messages import option_line, template
from derive.options.models import REQUIRED_SHAPE, custom_model, shaped
from derive.options.report import FIELD_OPTIONS, SHAPE_OPTIONS, build_parser, moe_option
from derive.presets import HARDWARE, MODELS, Model
from derive.report import ACTIVATION_KEYS, OVERFLOW_FIELDS, Request, faster_numbers, figures
from derive.report_moe import DEFAULT_PROFILE as MOE_DEFAULT_PROFILE, MoELayout, render_moe
from derive.systems import SYSTEMS

#: The value a failure's line shows, as the page's {text}.
TEXT = "zq"
#: Each kind's failures whose line is the option's argparse type or choices refusing {text}.
REFUSED: dict[str, tuple[str, ...]] = {"count": ("syntax", "range"), "stage": ("syntax", "range"),
                                       "fraction": ("syntax", "range"), "seconds": ("syntax", "range")}
#: The lines of --budget, --peak and --gpu: failure -> its MESSAGES key.
TABLED: dict[str, dict[str, str]] = {
    "budget": {"syntax": "budget_syntax", "range": "budget_range", "small": "budget_small",
               "large": "budget_large"},
    "peak": {"unknown": "peak_unknown", "range": "peak_range"},
    "gpu": {"unknown": "gpu_unknown"},
}
#: What each of TABLED's options lists as known.
KNOWN = {"budget": ", ".join(DRIVER_CAPACITY), "peak": ", ".join(HARDWARE), "gpu": ", ".join(SYSTEMS)}
#: A custom shape that breaks one divisibility rule (heads | hidden, kv heads | heads).
NOT_DIVIDING: dict[str, dict[str, int]] = {
    "heads": {"layers": 2, "hidden": 1022118, "heads": 1009, "ffn": 5, "vocab": 9},
    "kv-heads": {"layers": 2, "hidden": 1022117, "heads": 1009, "kv_heads": 1013, "ffn": 5, "vocab": 9},
}
#: A hardware preset without a recorded driver capacity: --budget refuses its name.
NO_CAPACITY = next(name for name in HARDWARE if name not in DRIVER_CAPACITY)
#: Families without grouped-query attention: --kv-heads must equal --heads on their presets.
NO_GQA = ("gpt",)
#: Rules between fields (derive.report.Request): option -> failure -> (the request, placeholders).
PAIRED: dict[str, dict[str, tuple[dict[str, object], dict[str, str]]]] = {
    "tokens": {"alone": ({"tokens": 8}, {})},
    "gpus": {"alone": ({"gpus": 8}, {})},
    "mfu": {"alone": ({"mfu": 0.5}, {})},
    "step-time": {"alone": ({"step_time": 9.0}, {})},
    "zero": {"alone": ({"zero": 2}, {"zero": "2"})},
    "dp": {"alone": ({"dp": 8}, {})},
}
#: A figure out of float range, per option it is blamed on (derive.report.OVERFLOW_FIELDS): the
#: smallest float as peak, target MFU or step time of a step of 2^53 tokens.
OVERFLOWING = 5e-324
OVERFLOWS: dict[str, dict[str, object]] = {
    "peak": {"peak_flops": OVERFLOWING},
    "mfu": {"tokens": MAX_SIZE, "gpus": 1, "mfu": OVERFLOWING},
    "step-time": {"tokens": MAX_SIZE, "gpus": 1, "step_time": OVERFLOWING},
}
#: The preset the sentinel requests are asked of.
SENTINEL_MODEL = "llama3-8b"
#: A custom shape whose parameter count passes derive.inputs.MAX_PARAMETERS with the option the
#: largest field (derive.presets.Model names it); heads and kv heads never exceed hidden there.
TOO_MANY_PARAMETERS: dict[str, dict[str, int]] = {
    "layers": {"layers": 1099511627776, "hidden": 8, "heads": 1, "ffn": 8, "vocab": 8},
    "hidden": {"layers": 1, "hidden": 33554432, "heads": 1, "ffn": 1, "vocab": 1},
    "ffn": {"layers": 1, "hidden": 8, "heads": 1, "ffn": 1125899906842624, "vocab": 1},
    "vocab": {"layers": 1, "hidden": 8, "heads": 1, "ffn": 8, "vocab": 1125899906842624},
}
#: The sequence length that passes MAX_PARAMETERS on a GPT preset (learned positions: s_max h).
TOO_LONG = 1125899906842624
#: Activations past 2^53 bytes (derive.report.figures), per option: the preset's (shape, request).
TOO_MANY_ACTIVATIONS: dict[str, tuple[dict[str, int], dict[str, object]]] = {
    "micro-batch": ({}, {"micro_batch": 1000000000000}),
    "seq": ({"seq": 100000000}, {}),
}
#: A step faster than the hardware allows (derive.report.figures): tokens, GPUs, seconds.
FASTER = {"model": SENTINEL_MODEL, "tokens": 1048573, "gpus": 3, "step_time": 0.5}
#: The figure a step time must not beat (derive.report.figures refuses a faster one).
STEP_BOUND = "step.lower_bound"


def marked(message: str, placeholders: Mapping[str, str]) -> str:
    """``message`` with each placeholder's text replaced by ``{name}`` (longest first); ValueError if one is absent."""
    for name, text in sorted(placeholders.items(), key=lambda item: -len(item[1])):
        if text not in message:
            raise ValueError(f"message: {message!r} does not show {text!r}")
        message = message.replace(text, "{" + name + "}")
    return message


def library_line(ask: Callable[[], object], placeholders: Mapping[str, str],
                 fields: Mapping[str, str] = FIELD_OPTIONS) -> str:
    """The report's line for the ValueError ``ask()`` raises, its field named as an option, placeholders marked."""
    try:
        ask()
    except ValueError as error:
        return marked(" ".join(option_line(error, fields).split()), placeholders)
    raise ValueError(f"ask: {ask} raised no ValueError")


def _sentinel() -> Model:
    return named_model(SENTINEL_MODEL)[0]


def _refused(option: str) -> str:
    """argparse's line for ``--option`` refusing {text}: its type's expected value, or its choices."""
    action = build_parser()._option_string_actions[f"--{option}"]
    if action.choices is not None:
        message = template("invalid_choice", choices=", ".join(map(repr, action.choices)))
    else:
        message = template("must_be", expected=action.type.__name__)
    return template("argument", option=f"--{option}", message=message)


def _unknown(option: str) -> str:
    """The line for an unknown --model, --precision, --optimizer or choice, {text} its value."""
    if option == "model":
        return library_line(lambda: named_model(TEXT), {"text": repr(TEXT)})
    if option in ("precision", "optimizer"):
        return library_line(lambda: Request(**{option: TEXT}), {"text": repr(TEXT)})
    return _refused(option)


def _overflow_message(option: str) -> str:
    """The line for a figure out of float range blamed on ``option``, the figure's key as {key}."""
    key = next(key for key, field in OVERFLOW_FIELDS.items() if FIELD_OPTIONS[field] == f"--{option}")
    return library_line(lambda: figures(_sentinel(), Request(**OVERFLOWS[option])), {"key": key})


def _activations_message(option: str) -> str:
    """The line for activations past 2^53 bytes blamed on ``option``, the figure's key as {key}."""
    shape, asked = TOO_MANY_ACTIVATIONS[option]
    entry = shaped(_sentinel(), shape) if shape else _sentinel()
    message = library_line(lambda: figures(entry, Request(**asked)), {})
    key = next(key for key in ACTIVATION_KEYS if key in message)
    return message.replace(key, "{" + "key" + "}")


def _parameters_message(option: str) -> str:
    """The line for a parameter count past 2^48 blamed on ``option``."""
    if option == "seq":
        gpt = next(m for m in MODELS.values() if m.family == "gpt")
        return library_line(lambda: figures(shaped(gpt, {"seq": TOO_LONG}), Request()), {})
    return library_line(lambda: figures(custom_model(TOO_MANY_PARAMETERS[option]), Request()), {})


def _faster_message() -> str:
    """The line for a step faster than the hardware allows, its numbers as {step_time} {tokens} ..."""
    asked = {"tokens": FASTER["tokens"], "gpus": FASTER["gpus"]}
    found = {fig.key: fig.value for fig in figures(_sentinel(), Request(**asked))}
    placeholders = faster_numbers(FASTER["step_time"], found[STEP_BOUND])
    placeholders.update(tokens=str(FASTER["tokens"]), gpus=str(FASTER["gpus"]))
    message = library_line(lambda: figures(_sentinel(), Request(**asked, step_time=FASTER["step_time"])),
                           placeholders)
    if any(message.count("{" + name + "}") != 1 for name in placeholders):
        raise ValueError(f"step_time: the sentinel's numbers are not each once in {message!r}")
    return message


def field_messages(option: str, kind: str) -> dict[str, str]:
    """The report's line for each way ``--option`` (a field of ``kind``) can fail, placeholders marked."""
    if kind in REFUSED:
        messages = {failure: _refused(option) for failure in REFUSED[kind]}
    elif kind in TABLED:
        messages = {failure: template(key, known=KNOWN[kind]) for failure, key in TABLED[kind].items()}
    else:
        messages = {"unknown": _unknown(option)}
    for failure, (asked, placeholders) in PAIRED.get(option, {}).items():
        messages[failure] = library_line(lambda: Request(**asked), placeholders)
    if option == "budget":
        messages["hardware"] = template("budget_hardware", known=KNOWN["budget"])
    if option == "kv-heads":
        messages["no_gqa"] = template("no_gqa")
    if option in OVERFLOWS:
        messages["overflow"] = _overflow_message(option)
    if option == "step-time":
        messages["faster"] = _faster_message()
    if option in TOO_MANY_PARAMETERS or option == "seq":
        messages["parameters"] = _parameters_message(option)
    if option in TOO_MANY_ACTIVATIONS:
        messages["activations"] = _activations_message(option)
    if option in NOT_DIVIDING:
        shape = NOT_DIVIDING[option]
        field = option.replace("-", "_")
        divisor = "heads" if option == "kv-heads" else "hidden"
        messages["divides"] = library_line(lambda: custom_model(shape),
                                           {option: str(shape[field]), divisor: str(shape[divisor])})
    if option.replace("-", "_") in REQUIRED_SHAPE:
        messages["required"] = template("required", option=SHAPE_OPTIONS[option.replace("-", "_")])
    return messages


def moe_line(name: str, layout: Mapping[str, int], placeholders: Mapping[str, str],
             profile: str = MOE_DEFAULT_PROFILE, precision: str = "bf16") -> str:
    """The MoE report's line for the MoE model ``name`` at ``layout`` (MoELayout's fields), placeholders marked."""
    entry = load_moe_model(moe_source(name), None)
    try:
        render_moe(entry, MoELayout(**layout), profile, precision)
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        return marked(" ".join(f"{moe_option(field, '--model')}: {rest}".split()), placeholders)
    raise ValueError(f"layout: {name} at {layout} gave no error")


def dense_refusal(name: str) -> str:
    """The dense report's line for ``--model name`` whose layers it does not model."""
    return library_line(lambda: figures(named_model(name)[0], Request()), {})
