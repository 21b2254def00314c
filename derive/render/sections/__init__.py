"""The sheet's sections, one module each; :data:`derive.render.context.SECTIONS` puts them in the article's order.

How to add a section:

1. a module here with ``def <key>_section() -> Section`` that computes every
   number (tables of :class:`~derive.render.sheet.Cell`, figures, ``extra``);
2. one line in ``SECTIONS`` in derive/render/context.py, where the article has it: a
   ``Build(module, function)``, with ``proofs=True`` if it shows the registry's proofs or the
   claims' verdicts (built after them, in every render) or ``kept=True`` if it holds numbers
   only (kept between runs of a checkout, derive.render.kept);
3. ``templates/md/<key>.md.j2`` and ``templates/tex/<key>.tex.j2`` (a section without
   them is drawn by ``md/section.md.j2`` / ``tex/section.tex.j2``: intro and tables).

A figure file is a :class:`~derive.render.sheet.Drawing` in ``Section.figures``
(filename, template under templates/, context of printed coordinates); the
renderer writes it into formulas/ beside the sheet. The memory-over-time SVG is
one (``templates/svg/<name>.svg.j2``, its coordinates computed in Python like
:func:`derive.render.figures.stacked_bars`). The GPT layer's saved tensors as a
Mermaid flowchart is not a file: the section puts a
:class:`~derive.render.sheet.Flowchart` (nodes with a class each, edges, class
styles) in ``Section.extra``, and its md template calls ``md.mermaid(chart)``
from templates/md/macros.j2, which writes the fenced ``mermaid`` block.

Closed forms are printed the papers' way (sbh(34 + 5as/h), constants first) by
:mod:`derive.render.closed_forms` through the printer's term orders; the step
timeline's events come from :func:`derive.accounts.activations.step_moments` and
its geometry is computed in :mod:`derive.render.timeline`.
"""
