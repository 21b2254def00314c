"""Escaping of plain text for each output format, used by the templates' filters (tex, md, xml, mermaid)."""
from __future__ import annotations

#: characters that are special to LaTeX, and characters outside ASCII that sources and meanings use.
LATEX_TEXT: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_\allowbreak{}",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\u00d7": r"\texttimes{}",
    "\u2014": "---",
    "\u2013": "--",
    "\u2192": r"\textrightarrow{}",
    "\u2019": "'",
    "\u2018": "`",
    "\u201c": "``",
    "\u201d": "''",
    "\u2026": r"\ldots{}",
    "\u2212": r"$-$",
    "\u2264": r"$\leq$",
    "\u2265": r"$\geq$",
    "\u2248": r"$\approx$",
    "\u00b7": r"$\cdot$",
    "\u00b2": r"\textsuperscript{2}",
    "\u00b3": r"\textsuperscript{3}",
    "\u03a8": r"$\Psi$",
}

#: characters that GitHub Markdown would read as markup (table pipes, math, emphasis, code, HTML);
#: brackets stay bare, since some Markdown renderers read \[ as display math.
MARKDOWN_TEXT: frozenset[str] = frozenset("\\|$*_`<>")

#: characters after which a long identifier (a source path) may break a line; "_" breaks too.
LATEX_BREAK_AFTER: frozenset[str] = frozenset("/")

XML_TEXT: dict[str, str] = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}


def escape_latex(text: object) -> str:
    """``text`` as LaTeX text mode; ValueError for a character pdflatex could not typeset."""
    out = []
    for char in str(text):
        if char in LATEX_TEXT:
            out.append(LATEX_TEXT[char])
        elif char in LATEX_BREAK_AFTER:
            out.append(char + r"\allowbreak{}")
        elif " " <= char <= "~":
            out.append(char)
        else:
            raise ValueError(f"text: no LaTeX form for {char!r} in {str(text)!r}")
    return "".join(out)


def escape_markdown(text: object) -> str:
    """``text`` as literal GitHub Markdown (backslash before each markup character)."""
    return "".join(f"\\{char}" if char in MARKDOWN_TEXT else char for char in str(text))


def escape_mermaid(text: object) -> str:
    """``text`` as a quoted Mermaid label: entity codes for quotes, <br/> for line breaks."""
    return escape_xml(text).replace("&quot;", "#quot;").replace("\n", "<br/>")


def escape_xml(text: object) -> str:
    """``text`` as XML character data or attribute value (SVG)."""
    return "".join(XML_TEXT.get(char, char) for char in str(text))
