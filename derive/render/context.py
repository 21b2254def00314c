"""What the sheet shows, section by section in the article's order; every value is computed here."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import partial
from typing import Callable, Mapping, Sequence, TypeVar

from derive.background import Once, shared
from derive.identities import all_identities, keep_proofs, proved_sides, topic_groups
from derive.render.kept import kept, tree_tag
from derive.render.sections.claims import document_groups, keep_verdicts, verdict_fields
from derive.render.sheet import Section, tables_json
from derive.units import BYTE_UNITS

T = TypeVar("T")


@dataclass(frozen=True)
class Build:
    """One section's builder: the function ``name`` of derive.render.sections.``module``, imported when the
    section is built (a kept section read back imports nothing of its module).

    ``proofs``: the section shows the registry's proofs or the claims' verdicts; it is built in every render.
    ``kept``: numbers only, no proof (held-out predictions, the planner's layouts, the state, communication and
    MoE tables, ...): a function of derive's sources alone, kept between runs of a checkout (derive.render.kept).
    """

    module: str
    name: str
    kept: bool = False
    proofs: bool = False

    def __call__(self) -> Section:
        return getattr(importlib.import_module(f"derive.render.sections.{self.module}"), self.name)()


#: The sheet's sections in the article's order. A new section is one line here
#: (see derive/render/sections/__init__.py for the whole pattern).
SECTIONS: tuple[Build, ...] = (
    Build("notation", "notation_section"),
    Build("states", "states_section", kept=True),
    Build("placement", "placement_section", kept=True),
    Build("bytes_per_parameter", "bytes_per_parameter_section", kept=True),
    Build("models", "models_section"),
    Build("published_models", "published_models_section", kept=True),
    Build("activations", "activations_section", proofs=True),
    Build("budget", "budget_section", kept=True),
    Build("flops", "flops_section", proofs=True),
    Build("utilisation", "utilisation_section", proofs=True),
    Build("step_time", "step_time_section", kept=True),
    Build("layouts", "layouts_section", kept=True),
    Build("communication", "communication_section", kept=True),
    Build("megatron", "megatron_section", proofs=True),
    Build("experts", "moe_section", kept=True),
    Build("fp8", "fp8_section", kept=True),
    Build("claims", "claims_section", proofs=True),
    Build("literature", "literature_section", proofs=True),
    Build("identities", "identities_section", proofs=True),
)
#: The sections of numbers only kept between runs of a checkout (derive.render.kept), like the page's data.
KEPT: tuple[Build, ...] = tuple(build for build in SECTIONS if build.kept)


def built(build: Build) -> Section:
    """The section ``build`` builds; read back from the checkout's kept file for :data:`KEPT`."""
    return kept(build.name, build) if build.kept else build()


def prepared(page: Callable[[], T] | None = None,
             parts: Sequence[Once] = ()) -> tuple[dict[Build, Section], T | None]:
    """(every section that shows no proof, ``page()``), with every proof and claim's verdict kept in this process.

    Two processes share the work (derive.background.shared), each taking the next task when it is free: each
    of ``parts`` (the page's data, derive.render.web.page_parts: none where it is read back), each section of
    numbers only (built or read back), each document's claims and each topic module's identities; each is
    done once. This process is handed the parts the other derived, then makes ``page()`` from them (with no
    part to derive, ``page()`` is one more task); the sections that show the proofs and verdicts are then built
    here (:func:`sheet_context`), in every render.
    """
    numbers = [build for build in SECTIONS if not build.proofs]
    verdicts, proofs = document_groups(), topic_groups(all_identities())
    tree_tag()  # the kept files' tag, the sources' hash: taken once, here, for both processes
    # with no part to derive (the page's data read back), the page's context is a task like the others
    page_task = [page] if page is not None and not parts else []
    tasks: list[Callable[[], object]] = [*parts, *page_task,
                                         *(partial(built, build) for build in numbers),
                                         *(partial(verdict_fields, group) for group in verdicts),
                                         *(partial(proved_sides, group) for group in proofs)]
    results = iter(shared(tasks))
    for part in parts:
        part.give(next(results))
    if page_task:
        page_context = next(results)
    else:  # made here from the parts handed over (or no page: an installed package's render)
        page_context = page() if page is not None else None
    sections = {build: next(results) for build in numbers}
    for group in verdicts:
        keep_verdicts(group, next(results))
    for group in proofs:
        keep_proofs(group, next(results))
    return sections, page_context


def sheet_sections(ready: Mapping[Build, Section] | None = None) -> list[Section]:
    """Every section in :data:`SECTIONS` order: those in ``ready`` (:func:`prepared`) as they are, the rest built here."""
    sections = [ready[build] if ready and build in ready else built(build) for build in SECTIONS]
    keys = [section.key for section in sections]
    if len(set(keys)) != len(keys):
        raise ValueError(f"section: keys repeat in {keys}")
    return sections


def sheet_context(ready: Mapping[Build, Section] | None = None) -> dict[str, object]:
    """Everything the templates and tables.json need (``ready``: as :func:`sheet_sections` takes it)."""
    sections = sheet_sections(ready)
    return {"sections": sections, "tables": tables_json(sections, BYTE_UNITS)}
