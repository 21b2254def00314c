"""The CLI's own lines for the page: ``derive.cli.main`` run on sentinel input, each value marked {name}.

Each field's failures (syntax, range, a rule between fields, a count past its bound, a figure
out of float range, a step faster than the hardware) become templates the page fills in, so the
page and ``derive report`` say the same words.
"""
from __future__ import annotations

import contextlib
import io
from typing import Mapping

from derive.accounts.budget import DRIVER_CAPACITY
from derive.cli import FIELD_OPTIONS, main
from derive.inputs import MAX_SIZE
from derive.presets import HARDWARE, MODELS
from derive.report import ACTIVATION_KEYS, OVERFLOW_FIELDS, Request, faster_numbers, figures

#: Sentinel input per kind of failure; the CLI's answer to it becomes the page's message.
SENTINELS: dict[str, dict[str, str]] = {
    "model": {"unknown": "zq"},
    "count": {"syntax": "zq", "range": "-7"},
    "choice": {"unknown": "zq"},
    "gpu": {"unknown": "zq"},
    "stage": {"syntax": "zq", "range": "77"},
    "budget": {"syntax": "zq", "range": "0GB", "small": "0.0001KB", "large": "9007199254740.993KB"},
    "peak": {"unknown": "zq", "range": "-7"},
    "fraction": {"syntax": "zq", "range": "7"},
    "seconds": {"syntax": "zq", "range": "-7"},
}

#: A custom shape that breaks one divisibility rule (heads | hidden, kv heads | heads).
NOT_DIVIDING: dict[str, dict[str, str]] = {
    "heads": {"layers": "2", "hidden": "1022118", "heads": "1009", "ffn": "5", "vocab": "9"},
    "kv-heads": {"layers": "2", "hidden": "1022117", "heads": "1009", "kv-heads": "1013",
                 "ffn": "5", "vocab": "9"},
}
REQUIRED_SHAPE = ("layers", "hidden", "heads", "ffn", "vocab")
#: A hardware preset without a recorded driver capacity: --budget refuses its name.
NO_CAPACITY = next(name for name in HARDWARE if name not in DRIVER_CAPACITY)
#: Families without grouped-query attention: --kv-heads must equal --heads on their presets.
NO_GQA = ("gpt",)
NO_GQA_MODEL = next(name for name, m in MODELS.items() if m.family in NO_GQA)
#: Rules between fields, as the CLI checks them: option -> failure -> (argv, placeholders).
PAIRED: dict[str, dict[str, tuple[list[str], dict[str, str]]]] = {
    "tokens": {"alone": (["--tokens=8"], {})},
    "gpus": {"alone": (["--gpus=8"], {})},
    "mfu": {"alone": (["--mfu=0.5"], {})},
    "step-time": {"alone": (["--step-time=9"], {})},
    "zero": {"alone": (["--zero=2"], {"zero": "2"})},
    "dp": {"alone": (["--dp=8"], {})},
    "budget": {"hardware": ([f"--budget={NO_CAPACITY}"], {"name": NO_CAPACITY})},
    "kv-heads": {"no_gqa": ([f"--model={NO_GQA_MODEL}", "--kv-heads=1"], {"name": NO_GQA_MODEL})},
}
#: A figure out of float range, per option it is blamed on (derive.report.OVERFLOW_FIELDS): the
#: smallest float as peak, target MFU or step time of a step of 2^53 tokens.
OVERFLOWING = "5e-324"
OVERFLOWS: dict[str, list[str]] = {
    "peak": ["--model=llama3-8b", f"--peak={OVERFLOWING}"],
    "mfu": ["--model=llama3-8b", f"--tokens={MAX_SIZE}", "--gpus=1", f"--mfu={OVERFLOWING}"],
    "step-time": ["--model=llama3-8b", f"--tokens={MAX_SIZE}", "--gpus=1", f"--step-time={OVERFLOWING}"],
}
#: A custom shape whose parameter count passes derive.inputs.MAX_PARAMETERS with the option the
#: largest field (derive.model.Model names it); heads and kv heads never exceed hidden there.
TOO_MANY_PARAMETERS: dict[str, list[str]] = {
    "layers": ["--layers=1099511627776", "--hidden=8", "--heads=1", "--ffn=8", "--vocab=8"],
    "hidden": ["--layers=1", "--hidden=33554432", "--heads=1", "--ffn=1", "--vocab=1"],
    "ffn": ["--layers=1", "--hidden=8", "--heads=1", "--ffn=1125899906842624", "--vocab=1"],
    "vocab": ["--layers=1", "--hidden=8", "--heads=1", "--ffn=8", "--vocab=1125899906842624"],
    "seq": [f"--model={next(name for name, m in MODELS.items() if m.family == 'gpt')}",
            "--seq=1125899906842624"],
}
#: Activations past 2^53 bytes (derive.report.figures), per option they are blamed on.
TOO_MANY_ACTIVATIONS: dict[str, list[str]] = {
    "micro-batch": ["--model=llama3-8b", "--micro-batch=1000000000000"],
    "seq": ["--model=llama3-8b", "--seq=100000000"],
}
#: A step faster than the hardware allows (derive.report.figures): tokens, GPUs, seconds.
FASTER = {"model": "llama3-8b", "tokens": 1048573, "gpus": 3, "step_time": 0.5}
ERROR_PREFIX = "derive: error: "
#: The figure a step time must not beat (derive.report.figures refuses a faster one).
STEP_BOUND = "step.lower_bound"
def cli_message(argv: list[str], placeholders: Mapping[str, str]) -> str:
    """The CLI's one error line for ``argv``, each placeholder's text replaced by ``{name}``."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
    line = err.getvalue()
    if status != 2 or line.count("\n") != 1 or not line.startswith(ERROR_PREFIX):
        raise ValueError(f"argv: {argv} gave status {status} and {line!r}, not one error line")
    message = line[len(ERROR_PREFIX):].rstrip("\n")
    for name, text in sorted(placeholders.items(), key=lambda item: -len(item[1])):
        if text not in message:
            raise ValueError(f"argv: the error {message!r} does not show {text!r}")
        message = message.replace(text, "{" + name + "}")
    return message


def _message(option: str, text: str) -> str:
    """The CLI's message for ``--option=text``, the value shown as its repr ({text})."""
    return cli_message([f"--{option}={text}"], {"text": repr(text)})


def _argv(values: Mapping[str, str]) -> list[str]:
    return [f"--{option}={text}" for option, text in values.items()]


def _overflow_message(option: str) -> str:
    """The CLI's line for a figure out of float range blamed on ``option``, the figure's key as {key}."""
    key = next(key for key, field in OVERFLOW_FIELDS.items() if FIELD_OPTIONS[field] == f"--{option}")
    return cli_message(OVERFLOWS[option], {"key": key})


def _activations_message(option: str) -> str:
    """The CLI's line for activations past 2^53 bytes blamed on ``option``, the figure's key as {key}."""
    message = cli_message(TOO_MANY_ACTIVATIONS[option], {})
    key = next(key for key in ACTIVATION_KEYS if key in message)
    return message.replace(key, "{" + "key" + "}")


def _faster_message() -> str:
    """The CLI's line for a step faster than the hardware allows, its numbers as {step_time} {tokens} ..."""
    found = {fig.key: fig.value for fig in figures(MODELS[FASTER["model"]], Request(
        tokens=FASTER["tokens"], gpus=FASTER["gpus"]))}
    placeholders = faster_numbers(FASTER["step_time"], found[STEP_BOUND])
    placeholders.update(tokens=str(FASTER["tokens"]), gpus=str(FASTER["gpus"]))
    message = cli_message([f"--model={FASTER['model']}", f"--tokens={FASTER['tokens']}",
                           f"--gpus={FASTER['gpus']}", f"--step-time={FASTER['step_time']}"], placeholders)
    if any(message.count("{" + name + "}") != 1 for name in placeholders):
        raise ValueError(f"step_time: the sentinel's numbers are not each once in {message!r}")
    return message


def field_messages(option: str, kind: str) -> dict[str, str]:
    """The CLI's line for each way ``--option`` (a field of ``kind``) can fail, placeholders marked."""
    messages = {failure: _message(option, text) for failure, text in SENTINELS[kind].items()}
    for failure, (argv, placeholders) in PAIRED.get(option, {}).items():
        messages[failure] = cli_message(argv, placeholders)
    if option in OVERFLOWS:
        messages["overflow"] = _overflow_message(option)
    if option == "step-time":
        messages["faster"] = _faster_message()
    if option in TOO_MANY_PARAMETERS:
        messages["parameters"] = cli_message(TOO_MANY_PARAMETERS[option], {})
    if option in TOO_MANY_ACTIVATIONS:
        messages["activations"] = _activations_message(option)
    if option in NOT_DIVIDING:
        shape = NOT_DIVIDING[option]
        divisor = "heads" if option == "kv-heads" else "hidden"
        messages["divides"] = cli_message(_argv(shape), {option: shape[option], divisor: shape[divisor]})
    if option in REQUIRED_SHAPE:
        others = {name: "8" for name in REQUIRED_SHAPE if name != option}
        messages["required"] = cli_message(_argv(others), {})
    return messages
