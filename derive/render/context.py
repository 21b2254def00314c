"""What the sheet shows, section by section in the article's order; every value is computed here."""
from __future__ import annotations

from typing import Callable, Sequence

from derive.render.sections.activations import activations_section
from derive.render.sections.budget import budget_section
from derive.render.sections.bytes_per_parameter import bytes_per_parameter_section
from derive.render.sections.claims import claims_section
from derive.render.sections.communication import communication_section
from derive.render.sections.flops import flops_section
from derive.render.sections.fp8 import fp8_section
from derive.render.sections.identities import identities_section
from derive.render.sections.layouts import layouts_section
from derive.render.sections.literature import literature_section
from derive.render.sections.megatron import megatron_section
from derive.render.sections.models import models_section
from derive.render.sections.experts import moe_section
from derive.render.sections.notation import notation_section
from derive.render.sections.placement import placement_section
from derive.render.sections.published_models import published_models_section
from derive.render.sections.states import states_section
from derive.render.sections.step_time import step_time_section
from derive.render.sections.utilisation import utilisation_section
from derive.printing.cache import printed_before
from derive.render.kept import is_kept, kept
from derive.render.sheet import Section, tables_json
from derive.units import BYTE_UNITS

#: The sheet's sections in the article's order. A new section is one line here
#: (see derive/render/sections/__init__.py for the whole pattern).
SECTIONS: tuple[Callable[[], Section], ...] = (
    notation_section,
    states_section,
    placement_section,
    bytes_per_parameter_section,
    models_section,
    published_models_section,
    activations_section,
    budget_section,
    flops_section,
    utilisation_section,
    step_time_section,
    layouts_section,
    communication_section,
    megatron_section,
    moe_section,
    fp8_section,
    claims_section,
    literature_section,
    identities_section,
)


#: Sections derive.render builds in its second process (derive.background) beside the page's data: the held-out
#: runs' predictions share little work with the other sections.
APART: tuple[Callable[[], Section], ...] = (step_time_section,)
#: Sections of numbers only, no proof (held-out predictions, the planner's layouts, the state, communication
#: and MoE tables, the published models): a function of derive's sources alone, kept between runs of a
#: checkout (derive.render.kept) like the page's data. The sections that show a proof are built every time.
KEPT: tuple[Callable[[], Section], ...] = (step_time_section, layouts_section, states_section, placement_section,
                                           bytes_per_parameter_section, published_models_section, budget_section,
                                           communication_section, moe_section, fp8_section)
#: Where the page's data and the KEPT sections are read back, the second process builds the registry's proofs.
APART_KEPT: tuple[Callable[[], Section], ...] = (step_time_section, layouts_section, identities_section,
                                                 megatron_section)


def built(build: Callable[[], Section]) -> Section:
    """The section ``build`` builds; read back from the checkout's kept file for :data:`KEPT`."""
    return kept(build.__name__, build) if build in KEPT else build()


def apart_sections(page: str) -> tuple[Callable[[], Section], ...]:
    """The sections for the second process: :data:`APART_KEPT` when ``page`` and :data:`KEPT` are kept, else :data:`APART`.

    Read back, they leave that process free; derived afresh, the page's data is its share, and with no
    printed text kept either (a first run, a new SymPy: every expression printed afresh) its whole share.
    """
    if all(is_kept(name) for name in (page, *(build.__name__ for build in KEPT))):
        return APART_KEPT
    return APART if printed_before() else ()


def sheet_sections(apart: Callable[[], Sequence[Section]] | None = None,
                   apart_builds: tuple[Callable[[], Section], ...] = APART) -> list[Section]:
    """Every section, built; ``apart`` gives those of ``apart_builds``, built elsewhere (asked for after the others)."""
    built_here = {build: built(build) for build in SECTIONS if apart is None or build not in apart_builds}
    if apart is not None and apart_builds:  # none apart: the sheet goes on without waiting for that process
        built_here.update(zip(apart_builds, apart(), strict=True))
    sections = [built_here[build] for build in SECTIONS]
    keys = [section.key for section in sections]
    if len(set(keys)) != len(keys):
        raise ValueError(f"section: keys repeat in {keys}")
    return sections


def sheet_context(apart: Callable[[], Sequence[Section]] | None = None,
                  apart_builds: tuple[Callable[[], Section], ...] = APART) -> dict[str, object]:
    """Everything the templates and tables.json need (``apart``, ``apart_builds``: as :func:`sheet_sections` takes them)."""
    sections = sheet_sections(apart, apart_builds)
    return {"sections": sections, "tables": tables_json(sections, BYTE_UNITS)}
