"""The fast constructions derive uses for speed give exactly what SymPy's slower general routes give (issue 28)."""
import base64
import itertools
import os
from functools import partial
from pathlib import Path
import pickle
from types import SimpleNamespace

import pytest
import sympy as sp
from conftest import after_render

from derive.accounts.state import state_bytes
from derive.formulas import CHOICES, FORMULAS, _ranks_needed, at_least_one
from derive.symbols import M_GPU, M_act, N, d, h

FIT = {formula.key: formula for formula in FORMULAS if formula.key.startswith("fit.gpus")}


def _sharded_and_kept(precision: str, optimizer: str, zero: int, activations: bool) -> tuple[sp.Expr, sp.Expr]:
    total = state_bytes(precision, optimizer, zero).total
    return sp.expand(total * d).coeff(d, 0), total.subs(d, sp.oo) + (M_act if activations else 0)


@pytest.mark.parametrize("precision, optimizer", itertools.product(CHOICES["precision"], CHOICES["optimizer"]))
def test_ranks_needed_is_sympys_max(precision: str, optimizer: str) -> None:
    """at_least_one decides Max(1, ceiling(x)) as SymPy's evaluated Max does, for every ZeRO fit the page prints."""
    for zero, activations in itertools.product((1, 2, 3), (False, True)):
        sharded, kept = _sharded_and_kept(precision, optimizer, zero, activations)
        slow = sp.Piecewise((sp.Max(1, sp.ceiling(sharded / (M_GPU - kept))), kept < M_GPU), (sp.nan, True))
        assert _ranks_needed(sharded, kept) == slow


def test_ranks_needed_zero3_bf16_adam_by_hand() -> None:
    """ZeRO-3 shards all 16 B/param of bf16 + Adam: 70e9 parameters on 80e9-byte GPUs need ceil(14) = 14 ranks."""
    expr = FIT["fit.gpus_for_state"].expression({"precision": "bf16", "optimizer": "adam", "zero": 3})
    assert expr.xreplace({N: 70 * 10**9, M_GPU: 80 * 10**9}) == 14
    assert expr.xreplace({N: 70 * 10**9 + 1, M_GPU: 80 * 10**9}) == 15   # a ceiling, not a quotient


def test_at_least_one_signs() -> None:
    """The ceiling of a positive ratio stays, of a non-positive one gives 1, of an unknown sign a Max."""
    x = sp.Symbol("x", real=True)
    assert at_least_one(sp.ceiling(N / M_GPU)) == sp.ceiling(N / M_GPU)
    assert at_least_one(sp.ceiling(-N / M_GPU)) == 1
    assert at_least_one(sp.ceiling(x)) == sp.Max(1, sp.ceiling(x))
    assert at_least_one(sp.Integer(3)) == 3


def test_difference_zero_only_over_one_denominator() -> None:
    """1/(x+1) + x/(x+1) - 1 does not expand to 0 but is 0 over one denominator: the identity holds."""
    from derive.identities import difference

    x = sp.Symbol("x", positive=True)
    assert sp.expand(1 / (x + 1) + x / (x + 1) - 1) != 0
    assert difference(1 / (x + 1) + x / (x + 1), sp.Integer(1)) == 0


def test_difference_departure_factored() -> None:
    """1/(x-1) + 1/(x+1) - 0 = 2x / ((x-1)(x+1)) by hand: a departure, shown factored over one denominator."""
    from derive.identities import difference

    x = sp.Symbol("x", positive=True)
    diff = difference(1 / (x - 1) + 1 / (x + 1), sp.Integer(0))
    assert diff == 2 * x / ((x - 1) * (x + 1))
    assert diff.xreplace({x: 3}) == sp.Rational(3, 4)


def test_departure_factored_form_kept_only_when_it_expands_back(print_store, monkeypatch) -> None:
    """A Laurent difference's factored form is kept between runs; a kept form that is not the difference is refactored."""
    from derive import identities

    x, y, z = sp.symbols("x y z", positive=True)
    derived, by_hand = x * z / y + 2 * z / y, z * (x + 2) / y
    assert identities._laurent(sp.expand(derived)) and not identities._laurent(sp.expand(1 / (x + 1) - y))
    assert identities.difference(derived, sp.Integer(0)) == by_hand and len(print_store.STORE.new) == 1
    _reloaded(print_store, monkeypatch)
    factored, factor = [], sp.factor
    monkeypatch.setattr(sp, "factor", lambda expr: factored.append(expr) or factor(expr))
    assert identities.difference(derived, sp.Integer(0)) == by_hand and not factored  # read back, not factored
    (key,) = print_store.STORE.load()
    print_store.STORE.load()[key] = [base64.b64encode(pickle.dumps(z * (x + 1) / y)).decode(), {}]  # not derived
    assert identities.difference(derived, sp.Integer(0)) == by_hand and factored == [sp.expand(derived)]


def test_numpy_function_once_per_expression() -> None:
    """An expression compiles once per process; the shared function computes what a fresh one does."""
    import numpy as np

    from derive.printing.python import numpy_function
    from derive.symbols import h

    expr = sp.Max(sp.ceiling(N / (2 * h)), h) + sp.Piecewise((N, N > h), (h, True))
    assert numpy_function(expr) is numpy_function(sp.sympify(str(expr), locals={"N": N, "h": h}))
    at_n, at_h = np.array([10, 7, 3]), np.array([4, 8, 1])
    # by hand: max(ceil(10/8), 4) + 10 = 14; max(ceil(7/16), 8) + 8 = 16; max(ceil(3/2), 1) + 3 = 5
    assert numpy_function(expr)(at_n, at_h).tolist() == [14, 16, 5]
    assert numpy_function.__wrapped__(expr)(at_n, at_h).tolist() == [14, 16, 5]


def test_first_stage_activations_built_once() -> None:
    """The first stage's bytes are one shared expression per argument set, equal to a fresh build: at p = 1, no
    edges, the GPT table at f = 4h, statistics ignored, it is L (34 sbh + 5 a s^2 b) (Korthikanti et al. 2022, Eq. 1)."""
    from derive.accounts.activations import first_stage_activation_bytes
    from derive.symbols import L, a, b, f, s

    kwargs = {"profile": "gpt", "pipeline": 1, "edges": False, "softmax_statistics": False}
    assert first_stage_activation_bytes(**kwargs) is first_stage_activation_bytes(**kwargs)
    fresh = first_stage_activation_bytes.__wrapped__(**kwargs)
    assert first_stage_activation_bytes(**kwargs) == fresh
    assert sp.expand(fresh.xreplace({f: 4 * h}) - L * (34 * s * b * h + 5 * a * s**2 * b)) == 0


def test_monomial_degree_is_polys() -> None:
    """A monomial's (or a product of sums') degree is read off its factors as Poly reads it; other forms still go through Poly."""
    from derive.printing.latex import _poly_degree, degree
    from derive.symbols import L, V, a, b, c, m, s, t

    # by hand: 34 s b h has degree 3, 5 a s^2 b degree 4, 12 L h^2 degree 3; ceiling(V/128t) a generator of degree 1;
    # m (c^2 t (a h + h) + c t (h + 1)): one top term, m c^2 t a h, degree 6; s (b + 1) - s b cancels to s, degree 1
    cases = {34 * s * b * h: 3, 5 * a * s**2 * b: 4, 12 * L * h**2: 3,
             sp.ceiling(V / (128 * t)) * h: 2, L * (h + 2): 2, s**2 * (b + 1) ** 2: 4,
             m * sp.ceiling(V * h / t - V * h / (c * t)): 2, m * (c**2 * t * (a * h + h) + c * t * (h + 1)): 6,
             sp.Add(s * (b + 1), -s * b, evaluate=False): 1}
    for expr, by_hand in cases.items():
        assert _poly_degree(expr) == by_hand == sp.Poly(expr).total_degree()
    assert _poly_degree(sp.Integer(7)) == 0
    assert degree(2 * N / d) == 0 and degree(14 * N / d**2) == -1


@pytest.fixture
def print_store(tmp_path, monkeypatch):
    """derive.printing.cache writing into ``tmp_path``, starting empty."""
    from derive.printing import cache

    monkeypatch.setattr(cache, "FOLDER", tmp_path)
    monkeypatch.setattr(cache, "STORE", cache._Store())
    return cache


def _reloaded(cache, monkeypatch) -> None:
    """Save the store and start a new one from its file, as the next run does."""
    cache.STORE.save()
    monkeypatch.setattr(cache, "STORE", cache._Store())


def test_printed_text_kept_equals_a_fresh_print(print_store, monkeypatch) -> None:
    """A text read back from the cache file is the printer's own: LaTeX in both term orders and JavaScript, by hand."""
    from derive.printing.javascript import javascript
    from derive.printing.latex import SheetLatexPrinter
    from derive.symbols import a, b, s

    cache = print_store
    layer = 34 * s * b * h + 5 * a * s**2 * b
    per_sbh = 34 + 5 * a * s / h
    script = sp.Max(N / d, h) + sp.ceiling(N / (2 * h))
    by_hand = {("degree", layer): "5 a b s^{2} + 34 b h s", ("constants-first", per_sbh): r"34 + \frac{5 a s}{h}"}
    js = "function (N, d, h) { return Math.ceil((1/2)*N/h) + Math.max(h, N/d); }"
    for round_ in range(2):  # printed and written, then read back from the file (nothing new printed)
        for (terms, expr), text in by_hand.items():
            assert SheetLatexPrinter(terms).doprint(expr) == text
        assert javascript(script) == js
        assert len(cache.STORE.load()) == 3 and len(cache.STORE.new) == (3 if round_ == 0 else 0)
        _reloaded(cache, monkeypatch)
    monkeypatch.setattr(cache, "FOLDER", None)  # no cache: the same texts printed afresh
    assert [SheetLatexPrinter(terms).doprint(expr) for terms, expr in by_hand] == list(by_hand.values())
    assert javascript(script) == js


def test_numpy_code_kept_keeps_its_imports(print_store, monkeypatch) -> None:
    """numpy code read back from the cache brings the imports lambdify needs: it computes what a fresh compile does."""
    import numpy as np

    from derive.printing.python import numpy_function

    cache = print_store
    expr = sp.Max(sp.ceiling(N / (2 * h)), h) + sp.Piecewise((N, N > h), (h, True))
    at_n, at_h = np.array([10, 7, 3]), np.array([4, 8, 1])
    for round_ in range(2):  # compiled and written, then compiled from the file's text (nothing new printed)
        # by hand: max(ceil(10/8), 4) + 10 = 14; max(ceil(7/16), 8) + 8 = 16; max(ceil(3/2), 1) + 3 = 5
        assert numpy_function.__wrapped__(expr)(at_n, at_h).tolist() == [14, 16, 5]
        assert cache.STORE.load() and bool(cache.STORE.new) == (round_ == 0)
        _reloaded(cache, monkeypatch)


def test_ceiling_kept_is_sympys_ceiling(print_store, monkeypatch) -> None:
    """A ceiling read back from the cache file is SymPy's own, term for term: whole terms split off, by hand."""
    from derive.symbols import b, s

    cache = print_store
    cases = {8 * h + 16 * h * s + N / d: 8 * h + 16 * h * s + sp.ceiling(N / d, evaluate=False),  # whole terms out
             N / d: sp.ceiling(N / d, evaluate=False),                                            # nothing out
             2 * h * s * b: 2 * h * s * b,                                                        # a whole number
             sp.Rational(7, 2): sp.Integer(4)}
    for round_ in range(2):  # taken and written, then rebuilt from the file (nothing new taken)
        for total, by_hand in cases.items():
            kept = cache.ceiling(total)
            assert sp.srepr(kept) == sp.srepr(by_hand) == sp.srepr(sp.ceiling(total))
        assert len(cache.STORE.load()) == 4 and len(cache.STORE.new) == (4 if round_ == 0 else 0)
        _reloaded(cache, monkeypatch)
    for key in cache.STORE.load():  # a damaged entry is taken again
        cache.STORE.entries[key] = ["not base64 of a pickle", {}]
    assert all(cache.ceiling(total) == by_hand for total, by_hand in cases.items())


def test_text_kept_is_sympys_string(print_store, monkeypatch) -> None:
    """tables.json's string of an expression read back from the cache is sp.sstr's, by hand."""
    from derive.printing.text import text
    from derive.symbols import b, s

    cache = print_store
    by_hand = {34 * s * b * h + 5 * s**2 * b: "34*b*h*s + 5*b*s**2", N / d + sp.ceiling(h / 2): "N/d + ceiling(h/2)"}
    for round_ in range(2):  # printed and written, then read back (nothing new printed)
        assert [text(expr) for expr in by_hand] == list(by_hand.values()) == [sp.sstr(expr) for expr in by_hand]
        assert len(cache.STORE.new) == (2 if round_ == 0 else 0)
        _reloaded(cache, monkeypatch)


def test_compiled_templates_kept_by_the_sources(kept_store) -> None:
    """Jinja's bytecode cache lies in a folder named by the sources' tag; an edit starts a new one, the old goes."""
    kept, source = kept_store
    first = kept.template_cache()
    assert first is not None and Path(first.directory).name == f"templates-{kept.tree_tag()}"
    source.write_text("A = 3\n")
    kept._tag.cache_clear()
    second = kept.template_cache()
    assert second.directory != first.directory and not Path(first.directory).exists()


def test_print_cache_file_named_by_its_sources(print_store, tmp_path, monkeypatch) -> None:
    """An edit to a printing source names another file: nothing printed by the old source is read."""
    cache = print_store
    source = tmp_path / "printer.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(cache, "SOURCES", (source,))
    before = cache.sources_tag()
    source.write_text("A = 2\n")
    assert cache.sources_tag() != before
    assert cache.sources_tag() == cache.sources_tag()


@pytest.fixture
def kept_store(tmp_path, monkeypatch):
    """derive.render.kept reading and writing in ``tmp_path``, its tag taken over one source file there."""
    from derive.render import kept

    source = tmp_path / "sources" / "accounts.py"
    source.parent.mkdir()
    source.write_text("A = 1\n")
    monkeypatch.setattr(kept, "FOLDER", tmp_path / "kept")
    monkeypatch.setattr(kept, "ROOT", tmp_path)
    monkeypatch.setattr(kept, "TAGGED", (source.parent,))
    kept._tag.cache_clear()
    yield kept, source
    kept._tag.cache_clear()


def test_a_kept_value_is_read_back_until_a_source_changes(kept_store) -> None:
    """The value is computed once and read back equal; an edited source computes it afresh (the old file goes)."""
    kept, source = kept_store
    calls: list[int] = []

    def compute() -> dict[str, object]:
        calls.append(1)
        return {"code": "const F = [];", "values": (1, 2.5, None), "order": ["b", "a"]}

    assert not kept.is_kept("page")
    first = kept.kept("page", compute)
    assert kept.is_kept("page") and kept.kept("page", compute) == first == compute() and len(calls) == 2
    source.write_text("A = 2\n")                     # an edit (the next run): another tag, the old file not read
    kept._tag.cache_clear()
    assert not kept.is_kept("page")
    assert kept.kept("page", compute) == first and len(calls) == 3
    assert len(list(kept.FOLDER.glob("page-*.pickle"))) == 1


def test_a_damaged_kept_file_is_computed_again(kept_store) -> None:
    """A kept file that does not unpickle is not read: the value is computed afresh and written again."""
    kept, _ = kept_store
    kept.kept("page", lambda: [1, 2])
    (path,) = kept.FOLDER.glob("page-*.pickle")
    path.write_bytes(b"not a pickle")
    assert kept.kept("page", lambda: [3]) == [3]
    assert kept.kept("page", lambda: [4]) == [3]


def background_with(monkeypatch, cpus: int, child_fails: bool):
    """derive.background on ``cpus`` CPUs; with ``child_fails`` the child's pickling of its results refuses
    (background's own name for pickle: the proofs pickle too), so it sends nothing back."""
    from derive import background

    monkeypatch.setattr(background, "cpus", lambda: cpus)
    if child_fails:
        def refused(*args: object, **kwargs: object) -> bytes:
            raise RuntimeError("pickle: refused")

        monkeypatch.setattr(background, "pickle", SimpleNamespace(dumps=refused, loads=pickle.loads,
                                                                  HIGHEST_PROTOCOL=pickle.HIGHEST_PROTOCOL))
    return background


@pytest.mark.parametrize("cpus, child_fails", [(1, False), (2, False), (2, True)])
def test_shared_tasks_run_once_each_in_order(cpus: int, child_fails: bool, tmp_path, monkeypatch) -> None:
    """background.shared: every task's result in the tasks' order, each task run once by this process or the child.

    A child that fails (its results do not pickle) sends nothing back: every task is then run here, once.
    """
    background = background_with(monkeypatch, cpus, child_fails)
    runs = tmp_path / "runs"

    def task(index: int) -> dict[str, int]:
        with runs.open("a") as log:  # one short line per write: the two processes' lines do not mix
            log.write(f"{index} {os.getpid()}\n")
        return {"index": index, "square": index * index}

    count = 40
    assert background.shared([partial(task, index) for index in range(count)]) == \
        [{"index": index, "square": index * index} for index in range(count)]
    done = [tuple(map(int, line.split())) for line in runs.read_text().splitlines()]
    here = sorted(index for index, pid in done if pid == os.getpid())
    if child_fails:
        assert here == list(range(count))
    else:
        assert sorted(index for index, _ in done) == list(range(count))
    assert background.shared([]) == []
    with pytest.raises(ValueError, match="count: a queue holds 0 to 256 tasks, not 257"):
        background.Queue(257)


@pytest.mark.parametrize("cpus, child_fails", [(1, False), (2, False), (2, True)])
def test_parts_handed_over_are_not_derived_again(cpus: int, child_fails: bool, tmp_path, monkeypatch) -> None:
    """background.Once, as the render shares the page's parts (derive.render.context.prepared): each part derived by
    either process and handed to this one (Once.give) is its value here, and no later call derives it again."""
    background = background_with(monkeypatch, cpus, child_fails)
    runs = tmp_path / "runs"

    def part(name: str) -> dict[str, str]:
        with runs.open("a") as log:
            log.write(f"{name} {os.getpid()}\n")
        return {"part": name}

    names = ["step", "layout", "stages", "plan", "report"]
    parts = [background.Once(partial(part, name)) for name in names]
    for once, value in zip(parts, background.shared(parts)):
        once.give(value)
    before = runs.read_text().splitlines()
    assert [once() for once in parts] == [{"part": name} for name in names]
    assert runs.read_text().splitlines() == before            # given: not derived again
    derived = [line.split() for line in before]
    here = sorted(name for name, pid in derived if int(pid) == os.getpid())
    if child_fails or cpus == 1:
        assert here == sorted(names)                          # every part derived here (a failed child sent none)
    else:
        assert sorted(name for name, _ in derived) == sorted(names)  # each part derived once, by either process
    alone = background.Once(partial(part, "alone"))           # never given: derived at the first call, once
    assert alone() == alone() == {"part": "alone"}
    assert runs.read_text().splitlines()[len(before):] == [f"alone {os.getpid()}"]


def test_verdicts_kept_from_another_process_are_the_verdicts(monkeypatch) -> None:
    """A document's verdicts judged elsewhere (their fields pickled) are kept here equal to derive.claims.evaluate's."""
    from derive.claims import evaluate
    from derive.render.sections import claims

    monkeypatch.setattr(claims, "_VERDICTS", {})
    group = next(group for group in claims.document_groups() if group[0].document == "Kaplan et al. 2020")
    fields = pickle.loads(pickle.dumps(claims.verdict_fields(group)))
    evaluated = [evaluate(entry) for entry in group]
    assert {verdict.status for verdict in evaluated} >= {"holds"}
    monkeypatch.setattr(claims, "_VERDICTS", {})
    claims.keep_verdicts(group, fields)
    monkeypatch.setattr(claims, "evaluate", None)  # kept: none is evaluated again
    assert [claims.judged(entry) for entry in group] == evaluated
    assert group[0] not in [entry for remaining in claims.document_groups() for entry in remaining]


@after_render
def test_page_data_does_not_read_the_sections() -> None:
    """derive.render computes the page's data apart from the sections: page_context only passes them and the SVGs on."""
    from derive.render.web import page_context

    alone = page_context((), {})
    given = page_context(("a section",), {"a.svg": "<svg/>"})
    assert given["sections"] == ["a section"] and given["svgs"] == {"a.svg": "<svg/>"}
    assert {**given, "sections": [], "svgs": {}} == alone


@pytest.mark.parametrize("cpus", [1, 2])
def test_background_result_is_the_work(cpus: int, monkeypatch) -> None:
    """A forked child's result (two CPUs) or the work done here (one CPU, or a failed child) is the work's value."""
    from derive import background

    monkeypatch.setattr(background, "cpus", lambda: cpus)
    work = background.Background(lambda: {"x": [1, 2, 3]})
    assert (work.child is not None) == (cpus > 1 and __import__("sys").platform.startswith("linux"))
    assert work.result() == {"x": [1, 2, 3]}

    def failing() -> int:
        raise ValueError("work: refused")

    with pytest.raises(ValueError, match="work: refused"):
        background.Background(failing).result()  # the child's failure is raised here, as without a child
    unwanted = background.Background(lambda: __import__("time").sleep(60))
    unwanted.close()  # a render that failed first ends its child at once
    assert unwanted.child is None


@pytest.mark.parametrize("cpus, child_fails", [(1, False), (2, False), (2, True)])
def test_proofs_apart_are_the_proofs(cpus: int, child_fails: bool, monkeypatch) -> None:
    """The check's proofs, topic modules shared with a forked child (two CPUs) or all here (one), equal the proofs done in turn.

    A child that fails after taking modules from the queue sends nothing back: those are proved here.
    """
    import derive.identities as identities

    background_with(monkeypatch, cpus, child_fails)
    monkeypatch.setattr(identities, "_PROOFS", {})
    apart = identities.prove_all(apart=True)
    monkeypatch.setattr(identities, "_PROOFS", {})
    serial = identities.prove_all()
    assert [p.identity.key for p in apart] == [p.identity.key for p in serial]
    for one, other in zip(apart, serial):
        assert (one.claim, one.derived, one.difference) == (other.claim, other.derived, other.difference)
        assert sp.srepr(one.difference) == sp.srepr(other.difference)
    # a comm identity: ZeRO-3 sends 3 Psi to ZeRO-2's 2 Psi (Rajbhandari et al. 2020, 7.2.2)
    zero3 = next(p for p in apart if p.identity.key == "comm.zero3_vs_zero2")
    assert zero3.derived == sp.Rational(3, 2) and zero3.passed
    assert all(p.passed for p in apart)


def test_a_damaged_entry_is_printed_again(print_store, monkeypatch) -> None:
    """An entry that is not [text, imports] (a damaged file) is not read: the text is printed afresh."""
    from derive.printing.javascript import javascript

    cache = print_store
    assert javascript(N / d) == "function (N, d) { return N/d; }"
    for key in cache.STORE.load():
        cache.STORE.entries[key] = ["function () { return 0; }", {"numpy": 7}]
    assert javascript(N / d) == "function (N, d) { return N/d; }"


def test_a_departure_claims_its_first_side_when_proved() -> None:
    """A departure registers itself as its claim (no sides derived on import); the claim read is its pair's first side."""
    import derive.identities as identities
    from derive.accounts.framework_placements import MODULE_PARAMS
    from derive.accounts.host import RANKS
    from derive.identities.peers import DEPARTURES

    entry = DEPARTURES["ZeRO-3 GPU estimate leaves out the bf16 gradient partition"]
    registered = identities.REGISTRY[entry.key]
    assert registered.claimed is entry
    # DeepSpeed's estimate_zero3_model_states_mem_needs: largest layer (4 bytes) + 18 bytes per parameter per GPU
    assert registered.claim == 4 * MODULE_PARAMS + 18 * N / RANKS
    assert identities.prove(registered).claim == registered.claim and not identities.prove(registered).zero


def test_comm_quotients_are_cancel_of_the_quotient() -> None:
    """The ZeRO ratios from SymPy's cancel of the (numerator, denominator) pair are cancel's reduced quotient, term for term.

    At one micro-batch ZeRO-3 sends 3 Psi to ZeRO-2's 2 Psi (Rajbhandari et al. 2020, 7.2.2); with fp32
    gradients reduced the ratio departs to 4/3 (the identity's name).
    """
    from derive.identities import comm
    from derive.symbols import m

    for precision, at_one in (("bf16", sp.Rational(3, 2)), ("bf16-fp32grad", sp.Rational(4, 3))):
        top, bottom = comm._dp_step(zero=3, precision=precision), comm._dp_step(zero=2, precision=precision)
        quotient = comm._quotient(top, bottom)
        assert sp.srepr(quotient) == sp.srepr(sp.cancel(top / bottom))
        assert quotient.xreplace({m: 1}) == at_one
    assert comm._dp_step(zero=2) is comm._dp_step(zero=2)  # built once


def test_ledger_parts_kept_equal_fresh_ones() -> None:
    """rows with its parts kept across layouts (the page's flag values) equals fresh rows; the loss all-reduces count 3 m by hand."""
    from derive.accounts.comm_row import LayoutTerms
    from derive.accounts.comm_rows import rows
    from derive.names import named_model
    from derive.parallelism import Parallelism
    from derive.symbols import L, c, e, m, p, t, t_E, v

    architecture = named_model("8b", moe=True)[0].architecture
    terms = LayoutTerms(t=t, p=p, v=v, c=c, d=d, e=e, t_E=t_E, m=m, dense_layers=L, moe_layers=sp.Integer(0),
                        capacity=None)
    seen: dict = {}
    for sequence_parallel, zero, precision, recompute in itertools.product(
            (False, True), (0, 1, 3), ("bf16", "fp32"), ("none", "full")):
        layout = Parallelism(sequence_parallel=sequence_parallel, zero=zero, precision=precision, recompute=recompute)
        kept = rows(architecture, terms, layout, False, seen)
        assert kept == rows(architecture, terms, layout, False)
        # Megatron's vocabulary-parallel cross entropy: max, predicted logit, sum of exp: three per micro-batch
        assert [row.count for row in kept if row.name == "tp.loss.all-reduce"] == [3 * m]
    assert any(sum(map(len, kept.values())) < 24 for kept in seen.values())  # some part was reused
