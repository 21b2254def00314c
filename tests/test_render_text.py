"""The sheet's LaTeX printer and the escaping filters."""
import pytest
import sympy as sp

from derive.render.escape import escape_latex, escape_markdown, escape_xml
from derive.printing.latex import degree, tex
from derive.symbols import N_GEMM, L, N, V, a, d, f, g, h, s


def test_symbols_print_in_the_sheet_notation():
    assert tex(6 * N_GEMM) == r"6 N_{\mathrm{GEMM}}"


def test_sums_print_by_falling_degree():
    assert tex(2 * N + 14 * N / d) == r"2 N + \frac{14 N}{d}"
    assert tex(6 + 12 / d) == r"6 + \frac{12}{d}"
    assert tex(2 * h + 13 * L * h + 12 * L * h**2) == r"12 L h^{2} + 13 L h + 2 h"
    assert tex(3 * h * f + 2 * h**2 + 2 * g * h**2 / a + 2 * h) == \
        r"3 f h + 2 h^{2} + \frac{2 g h^{2}}{a} + 2 h"
    assert tex(h * (V + s) + 2 * h) == r"h \left(V + s\right) + 2 h"


def test_degree_counts_numerator_minus_denominator():
    assert degree(14 * N / d) == 0 and degree(12 * L * h**2) == 3 and degree(sp.Integer(6)) == 0
    assert degree(2 * g * h**2 / a) == 2


def test_latex_escaping():
    assert escape_latex("a_b & 50% #1 {x} ~^\\") == \
        r"a\_\allowbreak{}\hspace{0pt}b \& 50\% \#1 \{x\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    # long source paths may break after "/", "_" and a dot or "=" between names (the next word
    # may then hyphenate); numbers never (1.13 TB stays whole)
    assert escape_latex("megatron/core/x.py 1.13 TB") == \
        r"megatron/\allowbreak{}\hspace{0pt}core/\allowbreak{}\hspace{0pt}x.\allowbreak{}py 1.13 TB"
    assert escape_latex("granularity='full'") == r"granularity=\allowbreak{}'full'"
    assert escape_latex("72*B*h**2 narayanan.5.1") == \
        r"72*\allowbreak{}B*\allowbreak{}h**2 narayanan.\allowbreak{}5.1"
    # a commit hash may break every 12 characters
    assert escape_latex("at dd6c3d0f80653ffc35135ca1f") == \
        r"at dd6c3d0f8065\allowbreak{}3ffc35135ca1\allowbreak{}f"
    # x^y in prose is raised, never a literal caret: 10^9, QK^T, s_i^2, 2^-8
    assert escape_latex("GB = 10^9 B, QK^T, 2^-8") == \
        r"GB = 10\textsuperscript{9} B, QK\textsuperscript{T}, 2\textsuperscript{-8}"
    assert escape_latex("h x f \u00d7 3 \u2014 ok") == r"h x f \texttimes{} 3 --- ok"
    with pytest.raises(ValueError, match="^text: "):
        escape_latex("10\u2079 bytes")


def test_markdown_and_xml_escaping():
    assert escape_markdown("a|b $x$ *c* d_e") == r"a\|b \$x\$ \*c\* d\_e"
    assert escape_xml('<a & "b">') == "&lt;a &amp; &quot;b&quot;&gt;"


def test_mermaid_macro_writes_a_flowchart():
    from derive.render.__main__ import environment
    from derive.render.sheet import Flowchart, Node

    chart = Flowchart("TB", (Node("ln1", 'LayerNorm 1\nkeeps "input" 2h', "replicated"),
                             Node("qkv", "Q/K/V <proj>", "sharded")),
                      (("ln1", "qkv"),), {"replicated": "fill:#f28e2b", "sharded": "fill:#4e79a7"})
    text = environment().from_string('{% import "md/macros.j2" as md %}{{ md.mermaid(chart) }}') \
        .render(chart=chart)
    assert text == ("\n```mermaid\nflowchart TB\n"
                    '    ln1["LayerNorm 1<br/>keeps #quot;input#quot; 2h"]:::replicated\n'
                    '    qkv["Q/K/V &lt;proj&gt;"]:::sharded\n'
                    "    ln1 --> qkv\n"
                    "    classDef replicated fill:#f28e2b\n    classDef sharded fill:#4e79a7\n```\n")
    with pytest.raises(ValueError, match="^edge: "):
        Flowchart("TB", chart.nodes, (("ln1", "nowhere"),), chart.classes)
