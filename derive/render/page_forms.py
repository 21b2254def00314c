"""The forms of the models the page computes: one model per distinct form of the report's formulas.

A form (:func:`derive.formulas.form`) is what changes a formula's expression (the family or layout,
not the sizes): the presets, a custom shape and every form of a pasted config
(:func:`derive.render.page_config.config_forms`) map to the first model of their form, and the page
prints each formula once per form (derive.render.web).
"""
from __future__ import annotations

from typing import Callable

from derive.formulas import FORMULAS as ALL_FORMULAS, REPORT_ONLY, form
from derive.model import Model
from derive.options.report import CUSTOM_FAMILY, DEFAULT_SEQ
from derive.presets import DENSE_MODELS
from derive.render.page_config import config_forms
from derive.render.page_models import dense_configs

#: The report's figures the page computes (the transformers-only figure stays in the CLI).
FORMULAS = tuple(formula for formula in ALL_FORMULAS if formula.key not in REPORT_ONLY)
#: The form name of a shape given without --model.
CUSTOM = "custom"


def _candidates() -> dict[str, Model]:
    """The presets, a custom shape and every form of a pasted config (sizes do not matter here, only forms)."""
    configs = {m.name: m for forms in config_forms().values() for m in forms.values()}
    return {**DENSE_MODELS, CUSTOM: Model(CUSTOM, CUSTOM_FAMILY, 1, 1, 1, 1, 1, 1, DEFAULT_SEQ), **configs,
            **dense_configs()}


def form_names() -> dict[str, str]:
    """Each preset and 'custom' -> the name of its form (derive.formulas.form): its first model's."""
    first: dict[object, str] = {}
    for name, m in _candidates().items():
        first.setdefault(form(m), name)
    return {name: first[form(m)] for name, m in _candidates().items()}


def page_models() -> dict[str, Model]:
    """One model per form the page can meet, by form name."""
    candidates = _candidates()
    return {name: candidates[name] for name in dict.fromkeys(form_names().values())}


def refused_profiles() -> dict[str, list[str]]:
    """Form name -> the profiles the accounts refuse for it (a Llama-only profile on another layer)."""
    refused: dict[tuple[str, ...], str] = {}
    for formula in FORMULAS:
        if formula.uses == ("model", "profile"):
            for _ in formula.variants(page_models(), refused):
                pass
    out: dict[str, list[str]] = {}
    for name, profile in sorted(refused):
        if profile not in out.setdefault(name, []):
            out[name].append(profile)
    return out


def pasted_by(key: Callable[[Model], object], known: dict[object, str], prefix: str,
              what: str) -> tuple[dict[str, Model], dict[str, str]]:
    """(a model of each ``key`` a pasted config can have that ``known`` (key -> page name) lacks, named ``prefix`` n;
    each report form a paste can take (derive.render.page_config.config_forms) -> its name).

    The page knows a paste's report form (config.js), so each report form must reach one name (ValueError naming
    ``what`` otherwise). derive.render.page_comm's ledgers and derive.render.page_paste's architectures are these.
    """
    known, named = dict(known), set(known.values())
    added: dict[str, Model] = {}
    by_form: dict[str, str] = {}
    report = form_names()
    for entry in (entry for by_key in config_forms().values() for entry in by_key.values()):
        name = known.setdefault(key(entry), f"{prefix}{len(added)}")
        if name not in named:
            added.setdefault(name, entry)
        if by_form.setdefault(report[entry.name], name) != name:
            raise ValueError(f"page: the report form {report[entry.name]} has two {what} "
                             f"({by_form[report[entry.name]]}, {name})")
    return added, by_form
