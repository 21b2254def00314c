"""formulas/index.html: the sheet as one offline web page, with a calculator running derive's expressions.

The calculator's arithmetic is :data:`derive.formulas.FORMULAS` and the MoE report's
expressions (derive.render.page_models) printed by SymPy's JavaScript code printer
(derive.printing.javascript); its error messages are the report's own lines, from the message
table of derive.options.messages and the library's errors (derive.render.page_messages, page_config); its
presets, units and defaults are data from derive. The page's hand-written script
(templates/html/calculator.js) only parses, looks up and formats. KaTeX comes
from the pinned npm package (tests/katex), inlined with its fonts, so the page
needs no server and makes no network request (its Content-Security-Policy says so).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes, usable_low_end
from derive.background import Once
from derive.systems import SYSTEMS
from derive.accounts.state import OPTIMIZERS, PRECISIONS
from derive.accounts.activations import PROFILES
from derive.evaluation import by_name
from derive.formulas import INPUTS, ZERO_STAGES
from derive.hf_families import DENSE, FAMILIES
from derive.inputs import MAX_PARAMETERS, MAX_SIZE
from derive.model import FIELD_SYMBOLS, MOE_FAMILIES
from derive.presets import ALIASES, DENSE_MODELS, HARDWARE
from derive.render.kept import is_kept, kept
from derive.render.page_functions import PageFunctions
from derive.printing.latex import tex
from derive.render.page_assets import csp_hash, inline_script, katex_assets, script_json
from derive.render.page_config import PASTED, config_forms, config_messages, python_reprs
from derive.render.page_forms import CUSTOM, FORMULAS, form_names, page_models, refused_profiles
from derive.render.page_messages import NO_GQA, NOT_DIVIDING, STEP_BOUND, field_messages
from derive.render.page_models import dense_configs, moe_data, moe_layouts, page_names
from derive.render.page_moe_paste import moe_paste_data, moe_paste_messages
from derive.render.page_comm import layout_code
from derive.options.layout import LAYOUT_OPTIONS
from derive.render.page_layout import FLAG_WORDS, LAYOUT_DEFAULTS, LAYOUT_FIELDS, layout_field_messages, layout_parser
from derive.render.page_plan import plan_code
from derive.render.page_step import STEP_FIELDS, step_code, step_field_messages
from derive.render.page_stages import stage_code
from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.architectures.saved import MOE_PROFILES
from derive.options.models import REQUIRED_SHAPE
from derive.options.report import DEFAULT_SEQ, FIELD_OPTIONS, SHAPE_OPTIONS, build_parser
from derive.options.values import (BUDGET_PATTERN, FLOAT_PATTERN, INTEGER_PATTERN, MAX_PEAK, MAX_SECONDS, SHOWN,
                                   SPACE)
from derive.report import (
    ACTIVATION_KEYS,
    DEFAULT_MFU,
    FASTER_FORMATS,
    OVERFLOW_FIELDS,
)
from derive.symbols import BY_NAME, b, d, k, meaning
from derive.units import BINARY_STEPS, BYTE_UNITS, DECIMAL_STEPS
from derive.verdicts import TABLES as VERDICTS


ROOT = Path(__file__).resolve().parents[2]
CALCULATOR = ROOT / "templates" / "html" / "calculator.js"
#: The pasted config.json's reader: derive.hf's family tables applied (hand-written, no formula).
CONFIG_READER = ROOT / "templates" / "html" / "config.js"
#: The page's hand-written scripts, in the order they run: parsing, the config reader, the calculator, the planner.
HAND_WRITTEN = (ROOT / "templates" / "html" / "parse.js", CONFIG_READER, ROOT / "templates" / "html" / "moe.js",
                ROOT / "templates" / "html" / "layout.js", ROOT / "templates" / "html" / "step.js",
                ROOT / "templates" / "html" / "stages.js", CALCULATOR, ROOT / "templates" / "html" / "plan.js")
PAGE = "index.html"
#: The name :func:`page_data` is kept under (derive.render.kept).
KEPT_PAGE = "page"

#: Each figure's label on the page, by its --json key.
LABELS: dict[str, str] = {
    "parameters": "Parameters",
    "gemm_parameters": "Parameters in GEMMs",
    "fp8_parameters": "Parameters in layer matrices (FP8 under an FP8 precision)",
    "fp8_tensors": "Layer matrices (tensors an FP8 recipe quantises)",
    "bytes_per_parameter": "Bytes per parameter",
    "state.params": "Parameters (resident)",
    "state.grads": "Gradients",
    "state.optimizer": "Optimizer state",
    "state.resident": "Resident state",
    "state.fp8_copies": "Quantised weight copies and scales (in the parameters)",
    "activations.per_layer_fused": "Activations per layer (flash / fused)",
    "activations.per_layer_materialised": "Activations per layer (materialised scores)",
    "activations.per_layer_fp8": "Activations per layer, linear inputs quantised (flash / fused)",
    "activations.all_layers_and_logits": "Activations, all layers + logits",
    "flops.six_n": "FLOPs per token, 6N",
    "flops.per_token_causal": "FLOPs per token, causal attention",
    "time.one_sequence": "One sequence on one GPU, at least",
    "step.lower_bound": "Step time at 100% MFU, at least",
    "step.at_target_mfu": "Step time at the target MFU",
    "observed.tokens_per_second": "Observed throughput",
    "observed.mfu": "Observed MFU",
    "observed.hfu_selective": "HFU, selective recompute",
    "observed.hfu_full": "HFU, full recompute",
    "fit.budget": "Memory budget per GPU",
    "fit.gpus_for_state": "GPUs to hold the state",
    "fit.gpus_for_state_and_activations": "GPUs with one micro-batch of activations",
}

SHAPE_GROUP = "Custom shape"
#: The heading of the MoE report's figures.
MOE_GROUP = "Mixture of Experts"
#: The heading of derive comm's figures.
COMM_GROUP = "Layout and communication per rank"
#: The heading of derive predict's figures.
STEP_GROUP = "Predicted step time"
#: The heading of derive predict's memory by pipeline stage.
STAGES_GROUP = "Memory per GPU by pipeline stage"
#: Each field's label in words; the CLI's flag follows it.
FIELD_LABELS: dict[str, str] = {
    "model": "Model", "layers": "Layers", "hidden": "Hidden size", "heads": "Attention heads",
    "kv-heads": "Key/value heads", "ffn": "Feed-forward width", "vocab": "Vocabulary size",
    "seq": "Sequence length", "precision": "Precision", "optimizer": "Optimizer", "zero": "ZeRO stage",
    "dp": "Data parallel (DP)", "micro-batch": "Micro-batch size", "profile": "Activation profile",
    "tp": "Tensor parallel (TP)", "pp": "Pipeline parallel (PP)", "ep": "Expert parallel (EP)",
    "etp": "Expert tensor parallel (ETP)", "moe-profile": "MoE activation profile",
    "gpu": "GPU type", "budget": "Memory budget per GPU", "peak": "Peak FLOP/s per GPU", "tokens": "Tokens per step",
    "gpus": "GPUs in all", "mfu": "Target MFU", "step-time": "Observed step time (s)",
    "cp": "Context parallel (CP)", "vp": "Virtual pipeline stages", "global-batch": "Global batch (sequences)",
    "sequence-parallel": "Sequence parallel", "recompute": "Activation recompute",
    "token-budget": "Token budget (tokens to train on)",
}
#: The command the page's "copy as command" button writes, and the characters a shell word keeps unquoted
#: (Python's shlex.quote, Lib/shlex.py: anything else goes in single quotes, a ' as '"'"').
COMMAND: dict[str, str] = {"prefix": "derive report", "safe": r"^[\w@%+=:,./-]+$", "config": PASTED}
#: The stacked memory bar: per report, its parts (the first figure shown of each) and its budget figure.
MEMORY_BAR: dict[str, dict[str, object]] = {
    "dense": {"parts": [["state.params"], ["state.grads"], ["state.optimizer"],
                        ["activations.all_layers_and_logits"]], "budget": "fit.budget"},
    "moe": {"parts": [["state_bytes"], ["fp8_weight_bytes"], ["activation_bytes_fp8", "activation_bytes"]],
            "budget": None},
}
#: The page's fields: CLI long option -> (kind, group). Kinds are parsed in calculator.js.
FIELDS: dict[str, tuple[str, str]] = {
    "model": ("model", "Model"),
    **{option[2:]: ("count", SHAPE_GROUP) for option in SHAPE_OPTIONS.values()},
    "precision": ("choice", "Training"),
    "optimizer": ("choice", "Training"),
    "zero": ("stage", "Training"),
    "dp": ("count", "Layout"),
    "micro-batch": ("count", "Training"),
    "profile": ("choice", "Training"),
    "tp": ("count", "Layout"),
    "pp": ("count", "Layout"),
    "ep": ("count", "Layout"),
    "etp": ("count", "Layout"),
    "moe-profile": ("choice", "Layout"),
    **{option: (kind, "Layout") for option, kind in LAYOUT_FIELDS.items()},
    "gpu": ("gpu", "Hardware"),
    "budget": ("budget", "Hardware"),
    "peak": ("peak", "Hardware"),
    "tokens": ("count", "Step"),
    "gpus": ("count", "Layout"),
    "mfu": ("fraction", "Step"),
    "step-time": ("seconds", "Step"),
    **{option: (kind, "Step") for option, kind in STEP_FIELDS.items()},
}

def option_choices() -> dict[str, tuple[str, ...]]:
    """Options whose value is one of a list: option -> the names (the page's model names found when asked, not on import)."""
    return {"model": tuple(page_names()), **OPTION_CHOICES}


#: Options whose value is one of a fixed list: option -> the names (the models' names: :func:`option_choices`).
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "gpu": tuple(SYSTEMS), "moe-profile": tuple(MOE_PROFILES), "precision": tuple(PRECISIONS), "optimizer": tuple(OPTIMIZERS),
    "profile": tuple(PROFILES), "peak": tuple(HARDWARE), "budget": tuple(DRIVER_CAPACITY),
    "recompute": tuple(RECOMPUTE_POLICIES),
}

#: Bounds of the numeric kinds, as the CLI checks them (inputs.positive_int, report._fraction,
#: _seconds, parse_peak, parse_budget).
BOUNDS: dict[str, dict[str, object]] = {
    "count": {"above": 0, "at_most": MAX_SIZE},
    "fraction": {"above": 0, "at_most": 1},
    "seconds": {"above": 0, "at_most": MAX_SECONDS},
    "peak": {"above": 0, "at_most": MAX_PEAK},
    "budget": {"above": 0, "at_least": 1, "at_most": MAX_SIZE},
}

#: Defaults the report applies where the parser has none (the page's placeholder; not typed in).
DEFAULTS: dict[str, object] = {"mfu": DEFAULT_MFU}
#: The model the page shows when a link names none (the CLI would print the three Llama 3 models).
PAGE_MODEL = "llama3-70b"
#: Digits the page prints: memory as format_memory does (binary units), scaled counts, significant
#: figures of seconds and bytes/parameter, percent decimals, and how Python's repr escapes an unprintable
#: character (Objects/unicodeobject.c, unicode_repr): \\xhh below 0x100, \\uhhhh, then \\Uhhhhhhhh.
DISPLAY: dict[str, object] = {"digits": 2, "significant": 4, "percent_digits": 1, "hex_base": 16,
                              "escapes": [["x", 2, 0x100], ["u", 4, 0x10000], ["U", 8, 0x110000]]}
#: Python's float formatting (Format Specification Mini-Language, 'g' and '%') as parse.js applies
#: it: 'g' is fixed-point for exponents from ``fixed_from`` below the precision, exponents have at
#: least ``exponent_digits`` digits and ``leading_digits`` before the point, '%' scales by ``percent``; ``exact_digits`` is the most digits
#: JavaScript's toExponential / toFixed give (ECMA-262), enough to see a tie exactly; ties go to even.
PYTHON_FORMAT: dict[str, int] = {"fixed_from": -4, "exponent_digits": 2, "percent": 100,
                                 "exact_digits": 100, "decimal_base": 10, "leading_digits": 1}
#: Marks a count past 2^53, shown to DISPLAY["significant"] digits: a float does not hold it exactly.
APPROXIMATE = "\u2248 "
PAGE_CSS = ROOT / "templates" / "html" / "page.css"
#: Figure groups on the page: heading -> the --json key prefixes it holds.
FIGURE_GROUPS: dict[str, tuple[str, ...]] = {
    "Model and state": ("parameters", "gemm_parameters", "fp8_parameters", "fp8_tensors",
                        "bytes_per_parameter", "state."),
    "Activations": ("activations.",),
    "FLOPs and time": ("flops.", "time.", "step."),
    "Observed step": ("observed.",),
    "Fit": ("fit.",),
}
INPUTMODES: dict[str, str] = {"count": "numeric", "stage": "numeric", "fraction": "decimal",
                              "seconds": "decimal"}

def field_specs() -> list[dict[str, object]]:
    """Every field of the form: option, kind, group, default, choices, bounds and CLI messages."""
    parser, layout = build_parser(), layout_parser()
    choices = option_choices()
    specs = []
    for option, (kind, group) in FIELDS.items():
        default = (layout if option in LAYOUT_FIELDS else parser).get_default(option.replace("-", "_"))
        if kind == "flag":
            default = None
        messages = (layout_field_messages(option, kind) if option in LAYOUT_FIELDS
                    else step_field_messages(option, kind) if option in STEP_FIELDS else field_messages(option, kind))
        # --zero: the layout's default depends on the layout (derive.options.layout.DEFAULTS): a typed 0 stays
        # in the link; the report's own default (0) is the fallback
        fallback = str(DEFAULTS.get(option, "" if default is None else default))
        if option in LAYOUT_DEFAULTS:
            default = None
        specs.append({"option": option, "kind": kind, "group": group,
                      "default": "" if default is None else str(default), "fallback": fallback,
                      "choices": list(FLAG_WORDS if kind == "flag" else choices.get(option, ())),
                      "bounds": BOUNDS.get(kind, {}), "messages": messages})
    return specs


def config_data() -> dict[str, object]:
    """What config.js needs: derive.hf's tables of the dense families, their forms, the CLI's messages; the MoE
    families' reads and forms (derive.render.page_moe_paste)."""
    forms = form_names()
    return {
        "families": {model_type: {**DENSE[model_type].data(),
                                  "forms": {key: forms[m.name] for key, m in by_key.items()},
                                  "gqa": all(m.family not in NO_GQA for m in by_key.values())}
                     for model_type, by_key in config_forms().items()},
        "known": list(FAMILIES),
        "refused": refused_profiles(),
        "messages": {**config_messages(), **{"moe:" + failure: line for failure, line in moe_paste_messages().items()}},
        "moe": moe_paste_data(moe_layouts()),
        "repr": python_reprs(),
        "path": PASTED,
        "max_size": str(MAX_SIZE),
        "name": Path(PASTED).stem,
    }


@Once
def page_code() -> tuple[str, list[dict[str, object]], dict[str, object]]:
    """(the generated script, the dense formulas, the MoE report's data): each distinct expression printed once."""
    print_once = PageFunctions()

    formulas = []
    models = page_models()
    for formula in FORMULAS:
        variants = {"|".join(values): print_once(expr) for values, expr in formula.variants(models)}
        formulas.append({"key": formula.key, "unit": formula.unit, "label": LABELS[formula.key],
                         "uses": list(formula.uses), "needs": list(formula.needs),
                         "symbol": formula.symbol.name if formula.symbol is not None else None,
                         "variants": variants})
    moe = moe_data(print_once)
    code = print_once.script("Generated by derive.render.web from derive.formulas (SymPy's JavascriptCodePrinter).",
                             "DERIVE_FUNCTIONS")
    return code, formulas, moe


def symbol_legend() -> dict[str, dict[str, str]]:
    """Every symbol a formula uses -> its LaTeX and meaning, for the 'where' list under each formula."""
    symbols = {formula.symbol for formula in FORMULAS if formula.symbol is not None}
    symbols |= {symbol for formula in FORMULAS for _, expr in formula.variants(page_models())
                for symbol in expr.free_symbols}
    symbols |= {BY_NAME[name] for printed in page_code()[2]["expressions"] for name in printed["args"]}
    return {symbol.name: {"tex": tex(symbol), "meaning": meaning(symbol)}
            for symbol in sorted(symbols, key=lambda symbol: symbol.name)}


def calculator_data() -> tuple[str, dict[str, object]]:
    """(the generated script, everything else the calculator reads as JSON), as the page has them: kept between
    runs of a checkout while derive's sources stay the same (:func:`kept_page_data`, derive.render.kept)."""
    code, data, _ = kept_page_data()
    return code, data


def derived_calculator_data() -> tuple[str, dict[str, object]]:
    """:func:`calculator_data` derived afresh from derive's expressions."""
    code, formulas, moe = page_code()
    layout_script, layout = layout_code()
    step_script, step = step_code()
    stages_script, stages = stage_code()
    plan_script, plan = plan_code()
    code += layout_script + step_script + stages_script + plan_script
    forms = form_names()
    presets = {name: {"form": forms[name], "source": m.source, "gqa": m.family not in NO_GQA,
                      "fixed_head": m.head_dim is not None,
                      "values": by_name(m.values)}
               for name, m in {**DENSE_MODELS, **dense_configs()}.items()}
    inputs = {"micro-batch": b.name, "dp": d.name,
              **{name.replace("_", "-"): symbol.name for name, symbol in INPUTS.items()}}
    shape_symbols = {option[2:]: FIELD_SYMBOLS[field].name for field, option in SHAPE_OPTIONS.items()}
    data = {
        "formulas": formulas,
        "moe": moe,
        "memory": MEMORY_BAR,
        "verdicts": VERDICTS,
        "command": COMMAND,
        "budget_ranges": {name: list(usable_bytes(name)) for name in DRIVER_CAPACITY},
        "facts": {"active": "active_parameters"},
        "kinds": page_names(),
        "fields": field_specs(),
        "presets": presets,
        "aliases": ALIASES,
        "custom": {"form": forms[CUSTOM], "seq": DEFAULT_SEQ},
        "shape": shape_symbols,
        "shape_order": list(shape_symbols),
        "head_width": k.name,
        "required_shape": list(REQUIRED_SHAPE),
        "divisibility": [[option, "heads" if option == "kv-heads" else "hidden", option == "heads"]
                         for option in NOT_DIVIDING],
        "config": config_data(),
        "inputs": inputs,
        "needs": {name.replace("_", "-"): name for name in INPUTS},
        "page_model": PAGE_MODEL,
        "choices": {"precision": "precision", "optimizer": "optimizer", "zero": "zero",
                    "profile": "profile"},
        "peaks": {name: hw.peak_flops for name, hw in HARDWARE.items()},
        "budgets": {name: usable_bytes(name)[0] for name in DRIVER_CAPACITY},
        # --gpu: its bf16 peak and usable low end, where --peak and --budget are not given (derive.cli.request)
        "gpu_types": {name: {"peak": float(gpu.peak("bf16")), "budget": usable_low_end(gpu)}
                 for name, gpu in SYSTEMS.items()},
        "budget_pattern": BUDGET_PATTERN,
        "integer_pattern": INTEGER_PATTERN,
        "float_pattern": FLOAT_PATTERN,
        "space": SPACE,
        "faster_formats": FASTER_FORMATS,
        "python_format": PYTHON_FORMAT,
        "overflow": {key: FIELD_OPTIONS[field][2:] for key, field in OVERFLOW_FIELDS.items()},
        "step_bound": STEP_BOUND,
        "exact": {"parameters": "parameters", "parameters_at_most": MAX_PARAMETERS,
                  "activations": list(ACTIVATION_KEYS), "activations_at_most": MAX_SIZE,
                  "single_micro_batch": 1},
        "approximate": APPROXIMATE,
        "byte_units": BYTE_UNITS,
        "decimal_steps": list(DECIMAL_STEPS),
        "byte_unit_suffix": DECIMAL_STEPS[0],
        "binary_steps": list(BINARY_STEPS),
        "display": DISPLAY,
        "legend": {**stages["legend"], **step["legend"], **layout["legend"], **symbol_legend()},
        "layout": layout,
        "step": {key: value for key, value in step.items() if key != "legend"},
        "stages": {key: value for key, value in stages.items() if key != "legend"},
        "plan": plan,
        "zero_stages": list(ZERO_STAGES),
        "shown": SHOWN,
        "hardware": list(HARDWARE),
    }
    return code, data


def field_groups(fields: list[dict[str, object]]) -> list[dict[str, object]]:
    """The form's fieldsets in FIELDS order, each field with its input mode and placeholder."""
    groups: dict[str, list[dict[str, object]]] = {}
    for field in fields:
        shown = {**field, "label": FIELD_LABELS[str(field["option"])], "inputmode": INPUTMODES.get(str(field["kind"]), "text"),
                 "choice_words": list(FLAG_WORDS.items()) if field["kind"] == "flag" else [],
                 "placeholder": LAYOUT_DEFAULTS.get(str(field["option"])) or field["fallback"]
                 or ("from the model" if field["group"] == SHAPE_GROUP else "not set")}
        groups.setdefault(str(field["group"]), []).append(shown)
    # the layout's fields in derive comm's order (derive.options.layout.LAYOUT_OPTIONS), the MoE report's own last
    order = [option[2:] for option in LAYOUT_OPTIONS.values()]
    groups[FIELDS["tp"][1]].sort(key=lambda field: order.index(field["option"]) if field["option"] in order
                                 else len(order))
    return [{"name": name, "fields": members, "collapsed": name == SHAPE_GROUP,
             "config": name == FIELDS["model"][1], "families": ", ".join([*DENSE, *MOE_FAMILIES])}
            for name, members in groups.items()]


def figure_groups(formulas: list[dict[str, object]]) -> list[dict[str, object]]:
    """The figures under their headings (FIGURE_GROUPS), in the report's order."""
    def group(key: str) -> str:
        return next(name for name, prefixes in FIGURE_GROUPS.items()
                    if any(key == prefix or (prefix.endswith(".") and key.startswith(prefix))
                           for prefix in prefixes))
    return [{"name": name, "formulas": [f for f in formulas if group(str(f["key"])) == name]}
            for name in FIGURE_GROUPS] + [{"name": MOE_GROUP, "formulas": page_code()[2]["formulas"]},
                                          {"name": COMM_GROUP, "formulas": layout_code()[1]["comm"]["layout_figures"]
                                           + layout_code()[1]["comm"]["formulas"]},
                                          {"name": STEP_GROUP, "formulas": step_code()[1]["figures"]},
                                          {"name": STAGES_GROUP, "formulas": stage_code()[1]["figures"]}]


def page_data() -> tuple[str, dict[str, object], list[dict[str, object]]]:
    """(the generated script, the calculator's data, the figure groups): what the page derives from derive alone."""
    code, data = derived_calculator_data()
    return code, data, figure_groups(data["formulas"])


#: The parts of :func:`page_data` that take its time, the largest first: the render's two processes share them with
#: the sheet's sections (derive.render.context.prepared), so a cold render is not one process deriving the page.
PAGE_PARTS: tuple[Once, ...] = (step_code, layout_code, stage_code, plan_code, page_code)


def page_parts() -> tuple[Once, ...]:
    """:data:`PAGE_PARTS`, or none where the checkout keeps the page's data (derive.render.kept): nothing to derive."""
    return () if is_kept(KEPT_PAGE) else PAGE_PARTS


def kept_page_data() -> tuple[str, dict[str, object], list[dict[str, object]]]:
    """:func:`page_data`, read from the checkout's kept file when no source changed since it was written."""
    return kept(KEPT_PAGE, page_data)


def page_context(sections: Iterable[object], svgs: Mapping[str, str]) -> dict[str, object]:
    """What templates/html/index.html.j2 needs: the sections, inline SVGs, scripts and their hashes.

    :func:`page_data` is kept between runs of a checkout while derive's sources stay the same (derive.render.kept).
    """
    katex_js, katex_css = katex_assets()
    code, data, figures = kept_page_data()
    scripts = [katex_js, inline_script(code),
               *(inline_script(path.read_text(encoding="utf-8")) for path in HAND_WRITTEN)]
    return {
        "sections": list(sections),
        "svgs": dict(svgs),
        "katex_css": katex_css,
        "page_css": PAGE_CSS.read_text(encoding="utf-8"),
        "scripts": scripts,
        "script_hashes": [csp_hash(script) for script in scripts],
        "data_json": script_json(data),
        "field_groups": field_groups(data["fields"]),
        "figure_groups": figures,
    }
