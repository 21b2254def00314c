"""Escaping of plain text for each output format, used by the templates' filters (tex, md, xml, mermaid)."""
from __future__ import annotations

import re
from functools import lru_cache

#: characters that are special to LaTeX, and characters outside ASCII that sources and meanings use.
LATEX_TEXT: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_\allowbreak{}\hspace{0pt}",
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


#: x^y in prose (10^9, QK^T, s_i^2, 2^-8): the exponent raised, never a literal caret.
SUPERSCRIPT = re.compile(r"(?<=[0-9A-Za-z)])\^(-?[0-9A-Za-z]+)")


#: A run of letters and digits this long (a commit hash) may break every BREAK_EVERY characters.
LONG_RUN = re.compile(r"[A-Za-z0-9]{24,}")
BREAK_EVERY = 12


def escape_latex(text: object) -> str:
    """``text`` as LaTeX text mode (x^y raised); ValueError for a character pdflatex could not typeset."""
    return _escape_latex(str(text))


@lru_cache(maxsize=None)
def _escape_latex(text: str) -> str:
    """escape_latex of a string, once per string (the sheet's templates repeat their labels and units)."""
    parts = SUPERSCRIPT.split(text)
    return "".join(_escape_runs(part) if index % 2 == 0
                   else rf"\textsuperscript{{{_escape_latex_plain(part)}}}"
                   for index, part in enumerate(parts))


def _escape_runs(text: str) -> str:
    """``text`` escaped, with a break allowed every BREAK_EVERY characters of a long run."""
    out, start = [], 0
    for run in LONG_RUN.finditer(text):
        out.append(_escape_latex_plain(text[start:run.start()]))
        word = run.group()
        out.append(r"\allowbreak{}".join(word[i:i + BREAK_EVERY]
                                         for i in range(0, len(word), BREAK_EVERY)))
        start = run.end()
    out.append(_escape_latex_plain(text[start:]))
    return "".join(out)


#: A dot or an equals sign between names (derive.architectures.gemms, granularity='full',
#: narayanan.5.1.gpt3; never inside a number such as 1.13), or a single * of a SymPy string
#: (72*B*L*h**2), may break a line.
NAME_BREAK = re.compile(r"(?<=[A-Za-z_])[.=](?=[\w'])|(?<=\w)\.(?=[A-Za-z_])|(?<=[\w)])\*(?=[\w(])")


def _escape_latex_plain(text: str) -> str:
    """``text`` character by character in LaTeX text mode."""
    out = []
    for index, char in enumerate(text):
        if char in ".=*" and NAME_BREAK.match(text, index):
            out.append(char + r"\allowbreak{}")
        elif char in LATEX_TEXT:
            out.append(LATEX_TEXT[char])
        elif char in LATEX_BREAK_AFTER:
            out.append(char + r"\allowbreak{}\hspace{0pt}")   # the next word may hyphenate
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
