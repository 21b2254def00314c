"""The page's step functions (derive.render.page_step: the step model traced into SymPy), evaluated in Python at
MoE layouts, equal derive predict --json's figures: no browser, the traced expressions themselves."""
from __future__ import annotations

import json

import pytest
import sympy as sp

from derive.accounts.pipeline_split import most_layers
from derive.accounts.prediction import state_bytes_expression
from derive.predict import main
from derive.render import page_step
from derive.render.page_comm import ELL, ELL_E, comm_models, ledger_rows
from derive.render.page_step_trace import traced
from derive.symbols import L, b, c, d, e, m, p, s, t, t_E, v

from conftest import after_render


def traced_step(name: str, sizes: dict[str, int], zero: int, recompute: str = "none",
                precision: str = "bf16") -> dict[str, float]:
    """The page's step figures for ``name`` at ``sizes`` (the page's symbols t p v c e d t_E b m s), each definition
    the page's (page_step.step_code's layers: compute, the ledger's exposed seconds, the per-model figures)
    evaluated in SymPy with the page's values (the model's sizes, the GPU's and the precision's figures)."""
    model = comm_models()[name]
    definitions: dict[str, sp.Expr] = {}

    def define(symbol: sp.Symbol, expr: sp.Expr) -> None:
        definitions.setdefault(symbol.name, expr)

    work = page_step.symbolic_workload(model)
    parallel = sizes["t"] > 1
    compute = page_step.compute_table(work, define, "g_")[(recompute, parallel)]
    definitions.update({symbol.name: compute[kind] for kind, symbol in page_step.COMPUTE.items()})
    with traced():
        definitions.update({symbol.name: function(work, page_step._layout())
                            for symbol, function in page_step.PER_MODEL.items()})
    state = model.at(state_bytes_expression(precision, zero)).subs(d, d * c if zero else 1)
    definitions[page_step.STATE.name] = state
    single = sizes["p"] == 1
    flags = {"sequence_parallel": parallel, "zero": zero, "precision": precision, "recompute": recompute,
             "single": single}
    exposed = page_step.Ledger(define).exposed(ledger_rows(model, flags), recompute, single, zero, not model.dense)
    definitions.update({symbol.name: exposed[group] for group, symbol in page_step.EXPOSED.items()})
    symbols = {"t": t, "p": p, "v": v, "c": c, "e": e, "d": d, "t_E": t_E, "b": b, "m": m, "s": s}
    values: dict[str, object] = {symbol.name: value for symbol, value in model.values.items()}
    values.update({symbols[key].name: value for key, value in sizes.items()})
    ell = int(most_layers(False, L, p, v).subs({L: model.layers, p: sizes["p"], v: sizes["v"]}))
    values.update({ELL.name: ell, ELL_E.name: min(ell, len(model.moe_layers))})
    gpu = page_step.gpu_values()["h100"]
    values.update(gpu["values"])
    values.update(gpu["precisions"][precision])
    known: dict[str, sp.Expr] = {}

    def evaluate(expr: sp.Expr) -> sp.Expr:
        at = {}
        for symbol in sp.sympify(expr).free_symbols:
            if symbol.name not in known:
                known[symbol.name] = (sp.sympify(values[symbol.name]) if symbol.name in values
                                      else evaluate(definitions[symbol.name]))
            at[symbol] = known[symbol.name]
        return sp.sympify(expr).xreplace(at)

    return {key: float(evaluate(expr)) for key, expr in page_step.step_figures(work).items()
            if page_step.TOKEN_BUDGET not in expr.free_symbols}


#: (model, derive predict's options, ZeRO): grids t_E e wider and narrower than an H100's NVLink domain (8),
#: t_E = t and t_E != t, the EP overlap across nodes on (p = 1, or v > 1) and off (p > 1, v = 1).
LAYOUTS = [
    # the issue's: t_E = t = 8, t_E e = 64 GPUs, the EP overlap across nodes on
    ("mixtral-8x7b", dict(tp=8, cp=4, dp=2, ep=8, etp=8, micro_batch=8), 3),
    ("mixtral-8x7b", dict(tp=8, pp=2, vp=2, cp=4, dp=2, ep=8, etp=8, micro_batch=8, global_batch=64), 3),
    ("mixtral-8x7b", dict(tp=8, pp=2, cp=1, dp=8, ep=8, etp=8, global_batch=32), 1),
    ("mixtral-8x7b", dict(tp=8, cp=2, dp=4, ep=8, etp=1), 1),
    ("mixtral-8x7b", dict(tp=2, dp=4, ep=4, etp=2), 0),
    ("qwen3-30b-a3b", dict(tp=4, dp=16, ep=16, etp=2, micro_batch=2), 1),
    ("qwen3-30b-a3b", dict(tp=2, dp=4, ep=8, etp=1), 1),
]


@pytest.mark.parametrize("name, options, zero", LAYOUTS, ids=range(len(LAYOUTS)))
def test_the_traced_step_is_predicts(capsys, name, options, zero):
    sizes = {"tp": 1, "pp": 1, "vp": 1, "cp": 1, "micro_batch": 1, **options}
    sizes.setdefault("global_batch", sizes["micro_batch"] * sizes["dp"])
    gpus = sizes["tp"] * sizes["pp"] * sizes["cp"] * sizes["dp"]
    argv = ["--model", name, "--gpu", "h100", "--gpus", str(gpus), "--seq", "4096", "--zero", str(zero), "--json",
            *(f"--{key.replace('_', '-')}={value}" for key, value in sizes.items())]
    assert main(argv) == 0, capsys.readouterr().err
    predicted = json.loads(capsys.readouterr().out)
    page = traced_step(name, {"t": sizes["tp"], "p": sizes["pp"], "v": sizes["vp"], "c": sizes["cp"],
                              "e": sizes["ep"], "d": sizes["dp"], "t_E": sizes["etp"], "b": sizes["micro_batch"],
                              "m": predicted["layout"]["micro_batches"], "s": 4096}, zero)
    assert page["step_time_s"] == pytest.approx(predicted["step_time_s"], rel=1e-12)
    assert page["mfu"] == pytest.approx(predicted["mfu"], rel=1e-12)
    for part, seconds in predicted["breakdown"].items():
        assert page[f"breakdown.{part}"] == pytest.approx(seconds, rel=1e-12, abs=1e-15), part


def test_a_flags_values_that_give_the_same_everywhere_share_a_key():
    """page_step._keyed: fp16 gives what bf16 gives at every head and ZeRO stage, so it is keyed by bf16; fp8 differs
    at one head, so it keeps its own key; every (head, flags) still finds its own expression."""
    x, y = sp.symbols("x y")
    tables = {"m": {("bf16", 0): x, ("fp16", 0): x, ("fp8", 0): y, ("bf16", 1): 2 * x, ("fp16", 1): 2 * x,
                    ("fp8", 1): 2 * x},
              "n": {("bf16", 0): y, ("fp16", 0): y, ("fp8", 0): y, ("bf16", 1): x, ("fp16", 1): x, ("fp8", 1): x}}
    functions = page_step.StepFunctions()
    keyed = page_step._keyed(tables, ["precision", "zero"], functions)
    assert keyed["uses"] == ["precision", "zero"]
    assert keyed["same"] == {"precision": {"fp16": "bf16"}}
    assert len(keyed["variants"]) == 8
    for head, table in tables.items():
        for (precision, zero), expr in table.items():
            key = "|".join([head, keyed["same"]["precision"].get(precision, precision), str(zero)])
            assert keyed["variants"][key] == functions.index(expr)


@after_render
def test_every_form_a_paste_can_take_has_an_architecture_with_a_ledger_and_stage_form():
    """Each report form config.js can read (the comm card's pasted ledgers) names an architecture of
    derive.render.page_paste, whose rows have a structure and whose memory has a stage form. The step card's
    data is the page's (page_step.step_code as the session's render kept it, not derived again here)."""
    from derive.render.page_comm import pasted_forms
    from derive.render.page_paste import PASTED_MODEL, pasted_models, pasted_stage_forms
    from derive.render.page_stages import stage_forms
    from derive.render.web import calculator_data

    models, pasted = pasted_models()
    assert set(pasted) == set(pasted_forms()[1])
    assert set(pasted.values()) == set(models) and all(name.startswith(PASTED_MODEL) for name in models)
    assert set(pasted_stage_forms(stage_forms())[1]) == set(models)
    data = calculator_data()[1]["step"]
    assert data["pasted"] == pasted
    assert all(name in data["models"] and name in data["forms"] for name in models)
