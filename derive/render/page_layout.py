"""The page's layout fields and their checks, as ``derive comm`` reads them (derive.options.layout).

The layout options (--tp --pp --vp --cp --ep --etp --dp --gpus --micro-batch --global-batch
--precision --zero --sequence-parallel --recompute) are checked in parallelism_from's order:
derive.options.layout.not_applying, the world size, derive.parallelism.Parallelism and its
``check`` of the model. Each line is that function's own error on sentinel values, its values
marked {name} (derive.render.page_messages.marked); each rule's sizes are SymPy expressions
printed as the page's functions, so templates/html/layout.js types no number.
"""
from __future__ import annotations

import argparse
from typing import Callable

import sympy as sp

from derive.accounts.comm import collectives
from derive.model import Model
from derive.names import named_model
from derive.options.layout import add_layout_options, option_error, parallelism_from
from derive.options.messages import UsageError, template
from derive.options.models import custom_model
from derive.options.values import POSITIVE
from derive.symbols import (E, G, L, B, a, b, c, d, e, f, f_E, g, p, s, t, t_E, v)

#: The page's layout fields the report has not: option -> kind (calculator.js parses the kinds).
LAYOUT_FIELDS: dict[str, str] = {"cp": "count", "vp": "count", "global-batch": "count",
                                 "sequence-parallel": "flag", "recompute": "choice"}
#: The text a set flag has in the form and the link (the CLI's --sequence-parallel takes none), and an unset one
#: (--no-sequence-parallel); no text: the layout's default (derive.options.layout.DEFAULTS).
FLAG_ON, FLAG_OFF = "1", "0"
#: The command-line option each value of the flag stands for.
FLAG_OPTIONS: dict[str, str] = {FLAG_ON: "--sequence-parallel", FLAG_OFF: "--no-sequence-parallel"}
#: The flag's values in words, as the form's choices show them.
FLAG_WORDS: dict[str, str] = {value: f"{words} ({FLAG_OPTIONS[value]})" for value, words in ((FLAG_ON, "on"), (FLAG_OFF, "off"))}

#: The sizes the rules read, each an expression of the options' symbols (derive.parallelism.Parallelism:
#: gpus = t p c d, micro_batches = global_batch / (micro_batch d)).
WORLD = t * p * c
DATA_PARALLEL = G / WORLD
MICRO_BATCHES = B / (b * d)
#: The options' symbols (G: --gpus, B: --global-batch).
LAYOUT_SYMBOLS: dict[str, sp.Symbol] = {"tp": t, "pp": p, "vp": v, "cp": c, "ep": e, "etp": t_E, "dp": d,
                                        "gpus": G, "micro-batch": b, "global-batch": B}

#: The rules in parallelism_from's order (derive.options.layout.not_applying, the world size,
#: Parallelism.__post_init__, Parallelism.check), then derive.accounts.comm.collectives': failure ->
#: (the option named, the test, the size that must exceed 1 for the rule to apply (or None), the
#: sentinel layout and model that break it, the line's values). Tests: ("divides", divisor, dividend)
#: fails on a remainder; ("differs", x, y) where x != y; ("exceeds", x, y) where x > y; ("single",)
#: where p = 1; ("unsplit",) where t > 1 without sequence parallelism; ("dense", option) where a
#: model without routed experts is given the option; ("mla",) on multi-head latent attention. A rule
#: whose sizes the model lacks (f_E, E of a dense model; --gpus not given) does not apply.
RULES: dict[str, tuple[str, tuple[object, ...], sp.Symbol | None, dict[str, object], object, dict[str, sp.Expr]]] = {
    "etp_dense": ("etp", ("dense", "etp"), None, {"etp": 2}, "70b", {}),
    "gpus_multiple": ("gpus", ("divides", WORLD, G), None, {"gpus": 1009, "tp": 2}, "70b",
                      {"gpus": G, "world": WORLD}),
    "gpus_disagree": ("gpus", ("differs", WORLD * d, G), None, {"gpus": 1018, "dp": 1013}, "70b",
                      {"gpus": G, "world": WORLD * d}),
    "global_batch": ("global-batch", ("divides", b * d, B), None, {"global_batch": 1009, "micro_batch": 3, "dp": 7},
                     "70b", {"global_batch": B, "micro_batch": b, "dp": d}),
    "vp_single": ("vp", ("single",), v, {"vp": 1009}, "70b", {"vp": v}),
    "vp_micro_batches": ("vp", ("divides", p, MICRO_BATCHES), v, {"vp": 2, "pp": 7, "global_batch": 1009}, "70b",
                         {"micro_batches": MICRO_BATCHES, "pp": p}),
    "ep_world": ("ep", ("divides", t_E * e, t * c * d), None, {"ep": 8, "etp": 3, "dp": 1009}, "deepseek-v3",
                 {"etp": t_E, "ep": e, "world": t * c * d}),
    "ep_sequence_parallel": ("sequence-parallel", ("unsplit",), e, {"ep": 8, "tp": 2, "dp": 8, "sequence_parallel": False},
                             "deepseek-v3", {}),
    "tp_heads": ("tp", ("divides", t, a), None, {"tp": 7}, "70b", {"tp": t, "heads": a}),
    "tp_kv_heads": ("tp", ("divides", t, g), None, {"tp": 16}, "70b", {"tp": t, "kv_heads": g}),
    "tp_ffn": ("tp", ("divides", t, f), None, {"tp": 2},
               {"layers": 2, "hidden": 2026, "heads": 2, "ffn": 1013, "vocab": 8}, {"tp": t, "ffn": f}),
    "etp_width": ("etp", ("divides", t_E, f_E), None, {"etp": 3, "dp": 3}, "deepseek-v3",
                  {"etp": t_E, "width": f_E}),
    "pp_slots": ("pp", ("exceeds", p * v, L), None, {"pp": 1009}, "70b", {"pp": p, "vp": v, "slots": L}),
    "cp_seq": ("cp", ("divides", 2 * c, s), c, {"cp": 1009}, "70b", {"double": 2 * c, "seq": s}),
    "ep_dense": ("ep", ("dense", "ep"), e, {"ep": 1009, "dp": 1009}, "70b", {"ep": e}),
    "ep_experts": ("ep", ("divides", e, E), None, {"ep": 3, "dp": 3}, "deepseek-v3", {"ep": e, "experts": E}),
    "cp_mla": ("cp", ("mla",), c, {"cp": 2}, "deepseek-v3", {}),
}


#: The command the layout's "copy as command" writes (derive.comm's parser's prog).
COMM_COMMAND = "python -m derive.comm"
#: The layout options the page has fields for (derive comm's others keep their defaults).
LAYOUT_PAGE = ("tp", "pp", "vp", "cp", "ep", "etp", "dp", "gpus", "micro-batch", "global-batch", "precision", "zero",
               "sequence-parallel", "recompute")
#: The rule before which the data-parallel size is known (the world size's rules come first).
DP_BEFORE = "global_batch"
#: The MoE report's refused options that another part of the page reads (the layout; derive.predict's
#: --gpu): the MoE report leaves them to that part rather than refusing them.
DENSE_ONLY_SHARED = ("gpus", "zero", "gpu")


def _default_words(option: str) -> str:
    """The default an option's help names ('... (default: on when --tp > 1)'), for the form's placeholder."""
    action = layout_parser()._option_string_actions[f"--{option}"]
    return "default: " + action.help.rpartition("(default: ")[2].rstrip(")")


def layout_parser() -> argparse.ArgumentParser:
    """A parser of the layout options alone (derive.options.layout.add_layout_options)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--seq", type=POSITIVE)
    add_layout_options(parser)
    return parser


def _args(asked: dict[str, object]) -> argparse.Namespace:
    """The parsed layout options with ``asked`` set (the parser's defaults elsewhere)."""
    args = layout_parser().parse_args([])
    for name, value in asked.items():
        setattr(args, name, value)
    return args


def _model(source: object) -> Model:
    """A sentinel's model: a name (MoE included, as derive comm reads --model) or a custom shape."""
    return named_model(source, moe=True)[0] if isinstance(source, str) else custom_model(source)


def layout_line(asked: dict[str, object], model: Model) -> str:
    """derive comm's line for the layout ``asked`` on ``model`` (parallelism_from, then its rows)."""
    try:
        layout = parallelism_from(_args(asked), model)
        collectives(model, layout)
    except UsageError as error:
        return " ".join(str(error).split())
    except ValueError as error:
        return " ".join(str(option_error(error, {"model": "--model", "seq": "--seq"})).split())
    raise ValueError(f"layout: {asked} on {model.name} gave no error")


def _once(line: str, placeholders: dict[str, str]) -> str:
    """``line`` marked, longest value first; ValueError unless each value is there exactly once by then."""
    for name, text in sorted(placeholders.items(), key=lambda item: -len(item[1])):
        if line.count(text) != 1:
            raise ValueError(f"layout: {text!r} ({name}) is not once in {line!r}")
        line = line.replace(text, "{" + name + "}")
    return line


def _sizes(asked: dict[str, object]) -> dict[sp.Symbol, int]:
    """The sentinel layout's sizes by symbol (the options' defaults where not asked; dp from --gpus)."""
    args = _args(asked)
    dp = args.dp or (args.gpus // (args.tp * args.pp * args.cp) if args.gpus else 1)
    sizes = {t: args.tp, p: args.pp, v: args.vp, c: args.cp, e: args.ep, t_E: args.etp or args.tp, d: dp,
             b: args.micro_batch, B: args.global_batch or args.micro_batch * dp}
    return {**sizes, **({G: args.gpus} if args.gpus else {})}


def layout_messages() -> dict[str, str]:
    """Each rule's line, its values marked ({name}: the model's name where the line shows it)."""
    lines = {}
    for failure, (_, _, _, asked, source, shown) in RULES.items():
        model = _model(source)
        line = layout_line(asked, model)
        values = {key: str(model.subs(expr.xreplace(_sizes(asked)))) for key, expr in shown.items()}
        lines[failure] = _once(line, {**values, **({"name": model.name} if model.name in line else {})})
    return lines


def layout_rules(printed: Callable[[sp.Expr], dict[str, object]]) -> dict[str, object]:
    """What layout.js needs: the rules in order (sizes as printed functions), their lines, the sizes it derives."""
    rules = []
    for failure, (option, test, when, _, _, shown) in RULES.items():
        rules.append({"failure": failure, "option": option, "test": test[0],
                      "operands": [printed(x) if isinstance(x, sp.Expr) else x for x in test[1:]],
                      "when": when.name if when is not None else None,
                      "values": {key: printed(expr) for key, expr in shown.items()}})
    return {"rules": rules, "messages": layout_messages(),
            "sizes": {"dp": printed(DATA_PARALLEL), "micro_batches": printed(MICRO_BATCHES)},
            "symbols": {option: symbol.name for option, symbol in LAYOUT_SYMBOLS.items()},
            "flag_on": FLAG_ON, "flag_off": FLAG_OFF, "flag_options": FLAG_OPTIONS}


def layout_field_messages(option: str, kind: str, parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """argparse's line for the layout option ``--option`` (of ``parser``, default the layout's) refusing {text}:
    its type's expected value, or its choices."""
    action = (parser or layout_parser())._option_string_actions[f"--{option}"]
    if action.choices is not None:
        message = template("invalid_choice", choices=", ".join(map(repr, action.choices)))
    elif kind == "flag":
        message = template("invalid_choice", choices=", ".join(map(repr, FLAG_WORDS)))
    else:
        message = template("must_be", expected=action.type.__name__)
    line = template("argument", option=f"--{option}", message=message)
    return {"unknown": line} if kind in ("choice", "flag") else {"syntax": line, "range": line}


#: The options whose unset value derive.options.layout.DEFAULTS sets -> the placeholder that says so.
LAYOUT_DEFAULTS: dict[str, str] = {option: _default_words(option) for option in ("zero", "sequence-parallel")}
