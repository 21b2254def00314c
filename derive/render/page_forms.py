"""The forms of the models the page computes: one model per distinct form of the report's formulas.

A form (:func:`derive.formulas.form`) is what changes a formula's expression (the family or layout,
not the sizes): the presets, a custom shape and every form of a pasted config
(:func:`derive.render.page_config.config_forms`) map to the first model of their form, and the page
prints each formula once per form (derive.render.web).
"""
from __future__ import annotations

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
