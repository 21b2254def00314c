"""Option values as the front ends read them: ASCII number syntax, argparse types, --budget, --peak.

Python's int() and float() would also take other scripts' digits (Arabic-Indic, full-width ...)
and Unicode spaces, by the interpreter's Unicode tables, which a browser's JavaScript does not
share; the CLI and the web page (derive.render.web ships these patterns to it) accept exactly
the same text.
"""
from __future__ import annotations

import argparse
import math
import re
from fractions import Fraction
from typing import Callable

from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes
from derive.inputs import MAX_SIZE
from derive.options.messages import MESSAGES, usage
from derive.presets import HARDWARE, hardware
from derive.units import BYTE_UNITS, to_unit
from derive.verdicts import BUDGET_LABELS

#: The whitespace and digits a number may be typed with: ASCII only.
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
#: A bad value longer than ``longest`` characters is shown as its first ``head`` and last ``tail``.
SHOWN: dict[str, int] = {"longest": 40, "head": 20, "tail": 8}
#: The largest peak (FLOP/s) and step time (s) taken: far beyond any accelerator or step, and
#: small enough that every product of the report's inputs stays inside a float's normal range
#: (counts <= 2^53: G P t <= 2^206), so the web page's float arithmetic agrees with the exact report.
MAX_PEAK = 2**100
MAX_SECONDS = 2**53


def parse_budget(text: str) -> tuple[int, str]:
    """'70GiB' / '80 GB' -> (bytes, label); a hardware name -> the low end of its usable range.

    The unit is mandatory so GB and GiB never mix; a hardware budget comes from
    derive.accounts.budget (driver capacity less context, NCCL, margin, fragmentation, workspaces).
    """
    name = hardware_name(text)
    known = ", ".join(DRIVER_CAPACITY)
    if name in DRIVER_CAPACITY:
        low, high = usable_bytes(name)
        return low, BUDGET_LABELS["hardware"].format(name=name, low=f"{to_unit(low, 'GiB'):.2f}",
                                                     high=f"{to_unit(high, 'GiB'):.2f}")
    if name in HARDWARE:
        raise usage("budget_hardware", name=name, known=known)
    match = re.fullmatch(BUDGET_PATTERN, text)
    if not match or match.group(2) not in BYTE_UNITS:
        raise usage("budget_syntax", known=known, text=repr(text))
    size = Fraction(match.group(1)) * BYTE_UNITS[match.group(2)]
    if size <= 0:
        raise usage("budget_range", text=repr(text))
    if size < 1:
        raise usage("budget_small", text=repr(text))
    if math.floor(size) > MAX_SIZE:
        raise usage("budget_large", text=repr(text))
    return math.floor(size), text.strip()


def parse_peak(text: str) -> tuple[float, str]:
    """A hardware preset name or a number in FLOP/s -> (FLOP/s, label)."""
    name = hardware_name(text)
    if name in HARDWARE:
        return hardware(name).peak_flops, name.upper()
    try:
        value = python_float(text)
    except ValueError:
        raise usage("peak_unknown", text=repr(text), known=", ".join(HARDWARE)) from None
    if not 0 < value <= MAX_PEAK:
        raise usage("peak_range", text=repr(text))
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


def converter(convert: Callable[[str], object], expected: str) -> Callable[[str], object]:
    """An argparse type whose failures say what was expected (argparse names the option); its __name__ is ``expected``."""
    def parse(text: str) -> object:
        try:
            return convert(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(MESSAGES["must_be"].format(expected=expected,
                                                                        text=repr(shown(text)))) from None
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
    return converter(parse, expected)


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


def _positive_fraction(text: str) -> Fraction:
    """A positive number below 2^53 (the float syntax above), read exactly."""
    value = python_float(text)
    if not 0 < value < 2**53:
        raise ValueError(text)
    return Fraction(text.strip().replace("_", ""))


POSITIVE = positive_up_to(MAX_SIZE, "a positive integer up to 2^53")
FRACTION = converter(_fraction, "a fraction in (0, 1]")
ZERO_STAGE = converter(_zero_stage, "a ZeRO stage 0, 1, 2 or 3")
SECONDS = converter(_seconds, "a positive number of seconds up to 2^53")
POSITIVE_NUMBER = converter(_positive_fraction, "a positive number")
