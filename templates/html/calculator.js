// The calculator of formulas/index.html (hand-written; derive.render.web inlines it).
// It parses the form with parse.js as the CLI parses its options, looks up the generated functions
// (DERIVE_FUNCTIONS, printed from derive's SymPy expressions) and formats their values.
// Every number it uses comes from the derive-data JSON; input reaches the page only as text.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("derive-data").textContent);
  const FIELDS = new Map(DATA.fields.map((field) => [field.option, field]));
  const FORM = document.getElementById("calculator-form");
  const FIGURES = document.getElementById("figures");
  const SHARE = document.getElementById("share-link");

  const PARSE = DeriveParse(DATA);
  const CONFIG = DeriveConfig(DATA, PARSE);
  const MOE_REPORT = DeriveMoE(DATA, PARSE);
  const LAYOUT = DeriveLayout(DATA, PARSE);
  const STEP = DeriveStep(DATA);
  const STAGES = DeriveStages(DATA, format);
  const LAYOUT_ONLY = new Set(DATA.layout.fields);
  const STEP_ONLY = new Set(Object.keys(DATA.step.fields));  // derive predict's own options (--token-budget)
  const PASTE = FORM.elements.config;
  const parseField = PARSE.parseField;
  const message = (option, failure, values) => PARSE.message(FIELDS.get(option), failure, values);

  function readForm() {
    const texts = {};
    for (const field of DATA.fields) {
      const element = FORM.elements[field.option];
      texts[field.option] = element.value;
    }
    texts.config = PASTE.value;
    return texts;
  }

  // Every field parsed: {errors, parsed}.
  function parseAll(texts) {
    const errors = {};
    const parsed = {};
    for (const field of DATA.fields) {
      const result = parseField(field, texts[field.option]);
      if ("error" in result) errors[field.option] = result.error;
      else parsed[field.option] = result.value;
    }
    return { errors, parsed };
  }

  // The MoE report's --dp: it has no --cp, and its world is t p d (derive.report.MOE_DIVIDES), so its d is the
  // layout's d c, Megatron's dp-cp group (what the expert grid divides, derive.parallelism's t c d = t_E e edp, and
  // what the distributed optimizer shards over); its activations, as the dense report's, are those at c = 1.
  const moeDp = (dp, parsed) => (dp === null || dp === undefined || parsed.cp === null || parsed.cp === undefined
    ? dp : dp * parsed.cp);

  // The form -> {errors, model, values, choices, given}: the report's part, checked in the CLI's order.
  // The layout's own options (DATA.layout.fields) are not the report's; --gpus is its only with --tokens,
  // --dp (or --gpus / (tp pp cp)) only with --zero, and --tp --pp --ep --etp only an MoE report's.
  function configuration(texts) {
    const { errors, parsed } = parseAll(texts);
    for (const option of [...LAYOUT_ONLY, ...STEP_ONLY]) delete errors[option];
    const layoutDp = errors.tp || errors.pp || errors.cp || errors.gpus || errors.dp ? null : LAYOUT.dataParallel(parsed);
    // An MoE name runs the report's MoE figures (derive.report.moe_figures), which reads --precision itself.
    // A pasted config of an MoE family the MoE report takes runs it too (`--config pasted.json`).
    const pastedMoE = texts.config !== "" ? CONFIG.read(texts.config) : {};
    const kind = texts.config === "" && parsed.model ? DATA.kinds[parsed.model] : pastedMoE.moe ? "moe" : undefined;
    if (kind === "moe") delete errors.precision;
    if (Object.keys(errors).length) return { errors };
    if (kind === "moe") {
      const dp = moeDp(layoutDp, parsed);
      if (!pastedMoE.moe) return MOE_REPORT.configuration(texts, { ...parsed, dp }, FIELDS);
      const moe = MOE_REPORT.configuration(texts, { ...parsed, dp }, FIELDS,
        { form: pastedMoE.form, name: pastedMoE.name, values: CONFIG.values(pastedMoE) });
      // the page's own line where it holds no expressions for the paste's Layout (an option's refusal first)
      return Object.keys(moe.errors).length || pastedMoE.form !== null ? moe : { errors: { config: DATA.config.moe.no_form } };
    }
    for (const [option, line] of Object.entries(DATA.moe.messages.dense_only)) {
      if (parsed[option] !== null && !(option in DATA.layout.rules.symbols)) return { errors: { [option]: line } };
    }
    const alone = (option, values) => ({ errors: { [option]: message(option, "alone", values || {}) } });
    // The request's rules between fields (derive.report.Request), in its order.
    if (parsed.tokens !== null && parsed.gpus === null) return alone("tokens");
    if (parsed.tokens === null) parsed.gpus = null;
    for (const option of ["mfu", "step-time"]) if (parsed[option] !== null && parsed.tokens === null) return alone(option);
    parsed.dp = parsed.zero ? layoutDp : null;
    if (parsed.zero && parsed.dp === null) return alone("zero", { zero: String(parsed.zero) });
    const shapeGiven = Object.keys(DATA.shape).filter((option) => parsed[option] !== null);
    const values = {};
    let form;
    let name;
    let base = null;
    if (texts.config !== "") {
      // A pasted config: derive.hf's reading of it (config.js), as `--config pasted.json` reads it.
      const read = CONFIG.read(texts.config);
      if ("error" in read) return { errors: { config: read.error } };
      const custom = read.name + (shapeGiven.length ? " (custom)" : "");
      if (!read.dense) return { errors: { config: CONFIG.line("dense_only", { name: custom, model_type: read.model_type }) } };
      Object.assign(values, CONFIG.values(read));
      base = { name: read.name, gqa: DATA.config.families[read.model_type].gqa,
               fixedHead: read.headDim !== null, model_type: read.model_type, form: read.form };
    } else if (parsed.model !== null) {
      if (kind === "refused") return { errors: { model: DATA.moe.refused_models[parsed.model] } };
      const preset = DATA.presets[parsed.model];
      base = { name: parsed.model, gqa: preset.gqa, fixedHead: preset.fixed_head, form: preset.form };
      Object.assign(values, preset.values);
    }
    if (base !== null) {
      form = base.form;
      name = base.name + (shapeGiven.length ? " (custom)" : "");
      if (!base.gqa) {
        const heads = parsed.heads !== null ? parsed.heads : values[DATA.shape.heads];
        if (parsed["kv-heads"] !== null && parsed["kv-heads"] !== heads) {
          return { errors: { "kv-heads": message("kv-heads", "no_gqa", { name: base.name }) } };
        }
        values[DATA.shape["kv-heads"]] = heads;
      }
    } else if (shapeGiven.length) {
      const missing = DATA.required_shape.find((option) => parsed[option] === null);
      if (missing) return { errors: { [missing]: message(missing, "required", {}) } };
      form = DATA.custom.form;
      name = "custom";
      values[DATA.shape.seq] = DATA.custom.seq;
      values[DATA.shape["kv-heads"]] = parsed.heads;
    } else {
      return configuration({ ...texts, model: DATA.page_model });
    }
    for (const option of shapeGiven) values[DATA.shape[option]] = parsed[option];
    const shape = (option) => values[DATA.shape[option]];
    for (const [option, dividend, headWidth] of DATA.divisibility) {
      if (headWidth && base !== null && base.fixedHead) continue;  // a config's head_dim: k is not h / a
      if (shape(dividend) % shape(option)) {
        return { errors: { [option]: message(option, "divides", { [option]: String(shape(option)), [dividend]: String(shape(dividend)) }) } };
      }
    }
    const choices = { model: form };
    for (const option of Object.keys(DATA.choices)) {
      choices[DATA.choices[option]] = parsed[option] !== null ? parsed[option] : (FIELDS.get(option).default || FIELDS.get(option).fallback);
    }
    const refused = DATA.config.refused[form] || [];
    if (refused.includes(choices.profile)) {
      return { errors: { profile: CONFIG.line("layer", { profile: choices.profile, name, model_type: base.model_type }) } };
    }
    const given = [];
    for (const [option, symbol] of Object.entries(DATA.inputs)) {
      let value = parsed[option];
      if (value === null && FIELDS.get(option).fallback !== "") value = parseField(FIELDS.get(option), FIELDS.get(option).fallback).value;
      if (value === null) continue;
      values[symbol] = value;
      given.push(DATA.needs[option] || option);
    }
    // derive.cli.request: --gpu sets the peak and the budget that are not given
    const gpu = parsed.gpu !== null ? DATA.gpu_types[parsed.gpu] : null;
    for (const option of ["peak", "budget"]) {
      if (gpu && (texts[option] === "" || texts[option] === FIELDS.get(option).default)) values[DATA.inputs[option]] = gpu[option];
    }
    return { errors: {}, name, values, choices, given, gpu: parsed.gpu };
  }

  // The layout's part: `derive comm --model NAME` (or `--config pasted.json`: its ledger by the paste's form) with the
  // layout options; null where the page has no ledger for the model (a custom shape, a name the report refuses).
  function layoutConfiguration(texts) {
    const { errors, parsed } = parseAll(texts);
    const shaped = Object.keys(DATA.shape).some((option) => option !== "seq" && texts[option] !== "");
    if (shaped) return null;
    const name = parsed.model !== undefined ? (parsed.model || DATA.page_model) : null;
    const model = texts.config !== "" ? pastedLedger(texts.config) : name !== null ? DATA.layout.comm.models[name] : undefined;
    if (errors.model) return null;
    if (model === undefined) return null;
    const options = new Set([...Object.keys(DATA.layout.rules.symbols), ...LAYOUT_ONLY, "seq", "precision", "zero"]);
    const own = Object.fromEntries(Object.entries(errors).filter(([option]) => options.has(option)));
    if (Object.keys(own).length) return { errors: own };
    const flags = {};
    for (const flag of DATA.layout.comm.flags) {
      const option = flag.replace("_", "-");
      if (!FIELDS.has(option)) continue;
      const field = FIELDS.get(option);
      // unset: null, the layout's default (layout.js, derive.options.layout.DEFAULTS) once its sizes are known
      flags[flag] = parsed[option] !== null ? parsed[option] : (flag in DATA.layout.defaults ? null : field.default);
    }
    return LAYOUT.configuration(texts, parsed, model, flags);
  }

  // A dense paste's model as the ledger reads it (config.js); undefined where it has none (a bad or MoE paste).
  function pastedLedger(text) {
    const read = CONFIG.read(text);
    const form = read.dense ? DATA.layout.comm.pasted[read.form] : undefined;
    if (form !== undefined) return { form, name: read.name, experts: false, mla: false, values: CONFIG.values(read) };
  }

  // The report's refusals once its figures are known (derive.report.figures), in its order: a figure
  // out of float range, then a step faster than the hardware allows. {} when it refuses nothing.
  function refusals(config, figures) {
    const exact = DATA.exact;
    const count = figures.find((figure) => figure.formula.key === exact.parameters);
    if (count && count.value > exact.parameters_at_most) {
      // derive.presets.Model: the largest shape field the count uses (the first of equals) is named.
      let option = null;
      for (const candidate of DATA.shape_order) {
        const symbol = DATA.shape[candidate];
        if (!count.variant.args.includes(symbol)) continue;
        if (option === null || config.values[symbol] > config.values[DATA.shape[option]]) option = candidate;
      }
      return { [option]: message(option, "parameters", {}) };
    }
    const over = figures.find((figure) => !Number.isFinite(figure.value));
    if (over) {
      const option = DATA.overflow[over.formula.key];
      return { [option]: message(option, "overflow", { key: over.formula.key }) };
    }
    // derive.report.figures: activations past 2^53 bytes, blamed on the micro-batch (b > 1) or the sequence.
    const large = figures.find((figure) => exact.activations.includes(figure.formula.key) && figure.value > exact.activations_at_most);
    if (large) {
      const option = config.values[DATA.inputs["micro-batch"]] > exact.single_micro_batch ? "micro-batch" : "seq";
      return { [option]: message(option, "activations", { key: large.formula.key }) };
    }
    const symbol = (option) => config.values[DATA.inputs[option]];
    const time = config.given.includes(DATA.needs["step-time"]) ? symbol("step-time") : null;
    const bound = figures.find((figure) => figure.formula.key === DATA.step_bound);
    if (time === null || !bound || !(time < bound.value)) return {};
    const formats = DATA.faster_formats;
    return { "step-time": message("step-time", "faster", {
      step_time: PARSE.pyFormat(time, formats.step_time), tokens: String(symbol("tokens")),
      gpus: String(symbol("gpus")), bound: PARSE.pyFormat(bound.value, formats.bound),
      mfu: PARSE.pyFormat(bound.value / time, formats.mfu) }) };
  }

  // Every figure the report would print: the generated functions, in the report's order.
  function evaluate(config) {
    const env = { ...config.values };
    const out = [];
    for (const formula of DATA.formulas) {
      if (!formula.needs.every((need) => config.given.includes(need))) continue;
      const variant = formula.variants[formula.uses.map((use) => String(config.choices[use])).join("|")];
      if (!variant) continue;
      const value = DERIVE_FUNCTIONS[variant.function](...variant.args.map((arg) => env[arg]));
      if (Number.isNaN(value)) continue;  // no such figure at these values (the report prints none)
      if (formula.symbol) env[formula.symbol] = value;
      out.push({ formula, variant, value });
    }
    return out;
  }

  function scaled(value, suffix) {
    let step = DATA.decimal_steps[0];
    for (const candidate of DATA.decimal_steps) if (Math.abs(value) >= DATA.byte_units[candidate]) step = candidate;
    const prefix = step.slice(0, -DATA.byte_unit_suffix.length);
    return (value / DATA.byte_units[step]).toFixed(DATA.display.digits) + " " + prefix + suffix;
  }

  function binary(value) {
    let step = DATA.binary_steps[0];
    for (const candidate of DATA.binary_steps) if (Math.abs(value) >= DATA.byte_units[candidate]) step = candidate;
    return (value / DATA.byte_units[step]).toFixed(DATA.display.digits) + " " + step;
  }

  const INTEGER = new Intl.NumberFormat("en-US");
  const PERCENT = new Intl.NumberFormat("en-US", {
    style: "percent", minimumFractionDigits: DATA.display.percent_digits, maximumFractionDigits: DATA.display.percent_digits,
  });

  // A count a float cannot hold exactly (past 2^53): its leading digits, marked as not exact.
  function approximate(value) {
    return DATA.approximate + String(Number(value.toPrecision(DATA.display.significant)));
  }

  function format(value, unit) {
    const display = DATA.display;
    switch (unit) {
      case "B": return binary(value);  // memory in binary units, as the command line prints it
      case "parameters": return Number.isSafeInteger(value) ? INTEGER.format(value) : approximate(value);
      case "B/param": return String(Number(value.toPrecision(display.significant))) + " B/param";
      case "FLOP/token": return scaled(value, "FLOP/token");
      case "tokens/s": return scaled(value, " tokens/s");
      case "s": return String(Number(value.toPrecision(display.significant))) + " s";
      case "days":
      case "GPU-hours": return String(Number(value.toPrecision(display.significant))) + " " + unit;
      case "fraction": return PERCENT.format(value);
      case "B/step": return scaled(value, DATA.byte_unit_suffix);
      case "GPUs": return (Number.isSafeInteger(value) ? String(value) : approximate(value)) + " GPUs";
    }
    return String(value) + " " + unit;
  }

  function renderMath(element, tex, display) {
    element.textContent = tex;
    if (typeof katex !== "undefined") katex.render(tex, element, { throwOnError: false, displayMode: display });
  }

  function showFormula(row) {
    const details = row.querySelector("details");
    if (!details.open || !row.dataset.tex) return;
    if (details.dataset.shown === row.dataset.tex) return;
    details.dataset.shown = row.dataset.tex;
    renderMath(details.querySelector(".formula"), row.dataset.tex, true);
    const where = details.querySelector(".where");
    where.replaceChildren();
    for (const arg of row.dataset.args.split(" ").filter(Boolean)) {
      const item = document.createElement("li");
      const symbol = document.createElement("span");
      renderMath(symbol, DATA.legend[arg].tex, false);
      item.append(symbol, document.createTextNode(": " + DATA.legend[arg].meaning));
      where.append(item);
    }
  }

  function show(texts) {
    const config = configuration(texts);
    let shown = Object.keys(config.errors).length ? [] : (config.moe ? MOE_REPORT.evaluate(config) : evaluate(config));
    const refused = shown.length && !config.moe ? refusals(config, shown) : {};
    if (Object.keys(refused).length) {
      config.errors = refused;
      shown = [];
    }
    // the layout's figures stand apart: a bad report field greys the report's, a bad layout the layout's
    const layout = layoutConfiguration(texts);
    const comm = layout && !Object.keys(layout.errors).length ? LAYOUT.evaluate(layout) : [];
    const step = layout && !Object.keys(layout.errors).length ? predicted(layout, texts) : { figures: [] };
    const stages = STAGES.judge(step, layout);  // predict's memory check: its refusal marks the step's figures
    const errors = { ...(layout ? layout.errors : {}), ...(step.errors || {}), ...config.errors };
    const report = shown;
    shown = [...report, ...comm, ...step.figures, ...stages.figures];
    for (const option of [...DATA.fields.map((field) => field.option), "config"]) {
      const error = errors[option];
      const box = document.getElementById("error-" + option);
      box.textContent = error || "";
      box.hidden = !error;
      FORM.elements[option].setAttribute("aria-invalid", error ? "true" : "false");
    }
    const byKey = new Map(shown.map((figure) => [figure.formula.row || figure.formula.key, figure]));
    for (const row of FIGURES.querySelectorAll(".figure")) {
      const output = row.querySelector("output");
      const figure = byKey.get(row.dataset.figure);
      row.hidden = !figure;
      row.classList.toggle("refused", stages.refused.has(figure));
      if (!figure) {
        output.textContent = "";
        output.removeAttribute("data-value");
        continue;
      }
      output.textContent = format(figure.value, figure.formula.unit);
      output.dataset.value = String(figure.value);
      output.title = String(figure.value) + " " + figure.formula.unit;
      row.dataset.tex = (figure.formula.symbol ? DATA.legend[figure.formula.symbol].tex + " = " : "") + figure.variant.tex;
      row.dataset.args = figure.variant.args.join(" ");
      showFormula(row);
    }
    FIGURES.classList.toggle("stale", !shown.length);
    // a heading over no figure (the MoE report's for a dense model, an empty observed step) goes with them
    for (const group of FIGURES.querySelectorAll(".figure-group")) {
      group.hidden = shown.length > 0 && !group.querySelector(".figure:not([hidden])");
    }
    if (Object.keys(DATA.shape).some((option) => texts[option] !== "")) document.getElementById("custom-shape").open = true;
    // a pasted MoE config: the stage, communication and step cards are not computed (the page says so)
    document.getElementById("paste-moe-note").hidden = !(texts.config !== "" && CONFIG.read(texts.config).moe);
    showComm(comm);
    showStep(step);
    STAGES.show(stages, partsBar);
    shown = report;
    const line = shown.length ? DATA.shape_order.map((option) => option + "=" + config.values[DATA.shape[option]]) : [];
    document.getElementById("model-line").textContent = shown.length ? config.name + ": " + line.join(" ") : "";
    showFacts(config, shown);
    showMemory(config, shown);
    const verdict = document.getElementById("fit-verdict");
    verdict.textContent = shown.length && !config.moe ? fitVerdict(config, shown, texts) : "";
    verdict.hidden = !verdict.textContent;
  }

  const fill = (template, values) => {
    for (const [name, value] of Object.entries(values)) template = template.split("{" + name + "}").join(value);
    return template;
  };

  // The report's fit line in its words: derive.verdicts' table, filled in as derive.report.fit_verdict does.
  function fitVerdict(config, shown, texts) {
    const words = DATA.verdicts.fit;
    const labels = DATA.verdicts.budget_labels;
    const text = texts.budget !== "" ? texts.budget : FIELDS.get("budget").default;
    const name = PARSE.hardwareName(text);
    const budgetBytes = valueOf(shown, DATA.memory.dense.budget);
    const gib = (bytes) => (bytes / DATA.byte_units.GiB).toFixed(DATA.display.digits);
    let budget = text.trim();
    if (config.gpu && (texts.budget === "" || texts.budget === FIELDS.get("budget").default)) {
      budget = fill(labels.gpu, { name: config.gpu, low: gib(budgetBytes) });
    } else if (name in DATA.budget_ranges) {
      const [low, high] = DATA.budget_ranges[name];
      budget = fill(labels.hardware, { name, low: gib(low), high: gib(high) });
    } else if (!budget.includes("iB")) {
      budget = fill(labels.decimal, { text: budget, binary: format(budgetBytes, "B") });
    }
    const counts = {};
    for (const [name, key] of [["state_gpus", "fit.gpus_for_state"], ["activation_gpus", "fit.gpus_for_state_and_activations"]]) {
      const value = valueOf(shown, key);
      if (value !== null) counts[name] = value.toFixed(0);
    }
    const zero = Number(config.choices.zero);
    if (!zero) return fill(words.unsharded, { budget, ...counts });
    const perRank = valueOf(shown, "state.resident");
    let line = fill(words.sharded, { budget, zero: String(zero), dp: String(config.values[DATA.inputs.dp]),
      per_rank: format(perRank, "B"), fits: words[perRank <= budgetBytes ? "fits" : "does_not_fit"] });
    if (!("state_gpus" in counts)) return line + words.state_never;
    line += fill(words.state_ranks, counts);
    if (!("activation_gpus" in counts)) return line + words.activations_never;
    return line + fill(words.activation_ranks, counts);
  }

  const valueOf = (shown, key) => {
    const figure = shown.find((item) => item.formula.key === key);
    return figure ? figure.value : null;
  };

  // The model's own facts at the top: its parameters (active per token), layers and experts.
  function showFacts(config, shown) {
    const box = document.getElementById("model-facts");
    box.hidden = !shown.length;
    if (!shown.length) return;
    const facts = DATA.moe.facts;
    const parts = [config.name, format(valueOf(shown, DATA.exact.parameters), "parameters") + " parameters"];
    const active = valueOf(shown, DATA.facts.active);
    if (active !== null) parts.push(format(active, "parameters") + " active per token");
    const layers = config.values[facts.layers];
    const moeLayers = config.values[facts.moe_layers];
    parts.push(layers + " layers" + (config.moe && moeLayers !== layers ? " (" + moeLayers + " MoE)" : ""));
    if (config.moe) parts.push(config.values[facts.experts] + " experts, " + config.values[facts.active_experts] + " per token");
    box.textContent = parts.join(" · ");
  }

  // Memory per GPU as a stacked bar by state, against the usable budget where the report has one.
  function showMemory(config, shown) {
    const box = document.getElementById("memory");
    const bar = document.getElementById("memory-bar");
    const legend = document.getElementById("memory-legend");
    bar.replaceChildren();
    legend.replaceChildren();
    box.hidden = !shown.length;
    if (!shown.length) return;
    const plan = DATA.memory[config.moe ? "moe" : "dense"];
    const parts = [];
    for (const choices of plan.parts) {
      const figure = choices.map((key) => shown.find((item) => item.formula.key === key)).find(Boolean);
      if (figure) parts.push(figure);
    }
    const total = parts.reduce((sum, figure) => sum + figure.value, 0);
    const budget = plan.budget ? valueOf(shown, plan.budget) : null;
    const verdict = "Total " + format(total, "B") + (budget !== null ? " against a budget of " + format(budget, "B")
      + " per GPU" : " (this report takes no budget)");
    partsBar(bar, legend, parts, Math.max(total, budget || 0), "Memory per GPU", budget !== null ? budget : undefined);
    legend.append(Object.assign(document.createElement("li"), { textContent: verdict }));
    bar.setAttribute("aria-label", bar.getAttribute("aria-label") + ". " + verdict);
  }

  // A bar of ``parts`` (figures: each a segment and a legend line, as a share of ``total``), labelled for screen readers;
  // ``marker`` (bytes, optional): a budget line at its share.
  function partsBar(bar, legend, parts, total, label, marker) {
    bar.replaceChildren();
    legend.replaceChildren();
    parts.forEach((figure, index) => {
      const text = figure.formula.label + ": " + format(figure.value, figure.formula.unit);
      const segment = document.createElement("span");
      segment.className = "segment part-" + index;
      segment.style.width = (total ? figure.value / total * DATA.python_format.percent : 0) + "%";
      segment.title = text;
      bar.append(segment);
      const item = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch part-" + index;
      item.append(swatch, document.createTextNode(text));
      legend.append(item);
    });
    if (marker !== undefined) {
      const line = document.createElement("span");
      line.className = "budget";
      line.style.left = (total ? marker / total * DATA.python_format.percent : 0) + "%";
      bar.append(line);
    }
    bar.setAttribute("aria-label", label + ": " + parts.map((figure) =>
      figure.formula.label + " " + format(figure.value, figure.formula.unit)).join(", ")
      + (marker !== undefined ? "; budget " + format(marker, "B") : ""));
  }

  // The bytes each rank sends per step as a bar by group (derive comm's per_rank_bytes_per_step).
  function showComm(comm) {
    const groups = comm.filter((figure) => figure.formula.group !== undefined);
    document.getElementById("comm").hidden = !groups.length;
    partsBar(document.getElementById("comm-bar"), document.getElementById("comm-legend"), groups,
             groups.reduce((sum, figure) => sum + figure.value, 0), "Bytes each rank sends per step");
  }

  // derive predict's figures at the layout's configuration: --gpu (predict's default where not given), --precision,
  // --token-budget (a bad one: predict's line on its field, no step, as predict exits 2).
  function predicted(layout, texts) {
    const { errors, parsed } = parseAll(texts);
    const own = Object.fromEntries(Object.entries(errors).filter(([option]) => STEP_ONLY.has(option)));
    if (Object.keys(own).length) return { figures: [], errors: own };
    // a paste: its architecture's name (DATA.step.pasted by the report form config.js reads), as its ledger is found
    const name = texts.config !== "" ? DATA.step.pasted[CONFIG.read(texts.config).form] : parsed.model || DATA.page_model;
    if (name === undefined) return { figures: [] };
    const precision = parsed.precision !== null && parsed.precision !== undefined ? parsed.precision : FIELDS.get("precision").fallback;
    const given = {};
    for (const [option, symbol] of Object.entries(DATA.step.fields)) if (parsed[option] !== null) given[symbol] = parsed[option];
    const gpu = parsed.gpu || DATA.step.gpu;
    return { ...STEP.evaluate(layout, name, gpu, precision, given), name, gpu };
  }

  // The predicted step as a bar by part (derive predict's breakdown), and its total.
  function showStep(step) {
    const figures = step.figures;
    const refusal = document.getElementById("step-refusal");
    refusal.textContent = step.refusal || "";
    refusal.hidden = !step.refusal;
    document.getElementById("step").hidden = !figures.length && !step.refusal;
    const total = figures.find((figure) => figure.formula.key === DATA.step.total);
    partsBar(document.getElementById("step-bar"), document.getElementById("step-legend"),
             step.refusal ? [] : figures.filter((figure) => figure.formula.part !== null && figure.value > 0),
             total ? total.value : 0, "Predicted step by part");
  }

  function query(texts) {
    const params = new URLSearchParams();
    for (const field of DATA.fields) {
      const text = texts[field.option];
      if (text !== "" && (text !== field.default || field.option === "model")) params.set(field.option, text);
    }
    // A pasted config travels as its text: the link is `--config pasted.json` with that file.
    if (texts.config !== "") params.set("config", texts.config);
    return "?" + params.toString();
  }

  // A shell word as Python's shlex.quote writes it.
  const SAFE = new RegExp(DATA.command.safe);
  const quote = (word) => (SAFE.test(word) ? word : "'" + word.split("'").join("'\"'\"'") + "'");

  // The CLI command of the form: the options the link carries (a paste as --config pasted.json; the
  // page's own model named where the form names none).
  // The report takes the options configuration() reads: not the layout's own, --gpus only with --tokens,
  // --dp (given or --gpus / (tp pp cp)) with --zero or for an MoE model, --tp --pp --ep --etp for an MoE model.
  function command(texts) {
    const words = [DATA.command.prefix];
    const params = new URLSearchParams(query(texts));
    const { parsed } = parseAll(texts);
    const moe = texts.config === "" ? parsed.model && DATA.kinds[parsed.model] === "moe" : Boolean(CONFIG.read(texts.config).moe);
    const skip = new Set([...LAYOUT_ONLY, ...STEP_ONLY, "dp"]);
    if (moe) for (const option of DATA.layout.ignored) skip.add(option);
    else {
      for (const option of Object.keys(DATA.moe.messages.dense_only)) if (option in DATA.layout.rules.symbols) skip.add(option);
      if (!params.has("tokens")) skip.add("gpus");
    }
    const shaped = Object.keys(DATA.shape).some((option) => params.has(option));
    if (!params.has("model") && !params.has("config") && !shaped) words.push(quote("--model=" + DATA.page_model));
    for (const [option, text] of params) {
      if (skip.has(option)) continue;
      words.push(quote("--" + option + "=" + (option === "config" ? DATA.command.config : text)));
    }
    if (moe || (params.has("zero") && parsed.zero)) {
      const given = params.has("dp") ? parsed.dp : LAYOUT.dataParallel(parsed);
      const dp = moe ? moeDp(given, parsed) : given;
      if (dp !== null) words.push(quote("--dp=" + (params.has("dp") && dp === given ? params.get("dp") : dp)));
    }
    return words.join(" ");
  }

  // derive comm's command of the layout part, as words: --model (the page's own where the form names none) or
  // --config, --seq and the layout options the link carries; --sequence-parallel as the flag it is.
  function commWords(texts) {
    const words = [DATA.layout.command];
    const params = new URLSearchParams(query(texts));
    const options = new Set([...DATA.layout.options, "model", "seq"]);
    if (params.has("config")) words.push(quote("--config=" + DATA.command.config));
    else if (!params.has("model")) words.push(quote("--model=" + DATA.page_model));
    for (const [option, text] of params) {
      if (!options.has(option)) continue;
      const flag = DATA.layout.rules.flag_options[text];
      words.push(quote(FIELDS.get(option).kind === "flag" ? flag || "--" + option + "=" + text : "--" + option + "=" + text));
    }
    return words;
  }

  const commCommand = (texts) => commWords(texts).join(" ");

  // derive predict's command of the step part: derive comm's options (its --config for a paste), with --gpu (the
  // form's or predict's default) and the step card's own options (--token-budget).
  function stepCommand(texts) {
    const [, ...options] = commWords(texts);  // comm's words after its command
    const words = [DATA.step.command, ...options];
    const gpu = PARSE.parseField(FIELDS.get("gpu"), texts.gpu);
    if (gpu.value) words.push(quote("--gpu=" + gpu.value));
    const params = new URLSearchParams(query(texts));
    for (const option of STEP_ONLY) if (params.has(option)) words.push(quote("--" + option + "=" + params.get(option)));
    return words.join(" ");
  }

  function update() {
    const start = performance.now();
    const texts = readForm();
    show(texts);
    performance.measure("derive-figures", { start });
    document.getElementById("command").textContent = command(texts);
    document.getElementById("comm-command").textContent = commCommand(texts);
    document.getElementById("step-command").textContent = stepCommand(texts);
    const link = query(texts);
    SHARE.setAttribute("href", link);
    try {
      history.replaceState(null, "", link + location.hash);
    } catch (error) {
      // file:// pages of some browsers refuse replaceState; the share link still holds the state.
    }
  }

  function load() {
    const params = new URLSearchParams(location.search);
    const shapeInQuery = Object.keys(DATA.shape).some((option) => params.has(option));
    for (const field of DATA.fields) {
      let text = params.has(field.option) ? params.get(field.option) : field.default;
      if (field.option === "model" && !params.has("model") && !shapeInQuery && !params.has("config")) text = DATA.page_model;
      FORM.elements[field.option].value = text;
    }
    PASTE.value = params.has("config") ? params.get("config") : "";
    update();
  }

  // A paste replaces the preset (the CLI would report both; the page shows one model).
  PASTE.addEventListener("input", () => {
    if (PASTE.value !== "") FORM.elements.model.value = "";
  });
  FORM.addEventListener("input", update);
  for (const [button, id] of [["copy-command", "command"], ["copy-comm-command", "comm-command"],
                              ["copy-step-command", "step-command"]]) {
    document.getElementById(button).addEventListener("click", () => {
      const text = document.getElementById(id).textContent;
      const select = () => window.getSelection().selectAllChildren(document.getElementById(id));
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(select);
      else select();
    });
  }
  FORM.addEventListener("submit", (event) => event.preventDefault());
  for (const row of FIGURES.querySelectorAll(".figure")) {
    row.querySelector("details").addEventListener("toggle", () => showFormula(row));
  }
  load();
  performance.mark("derive-figures-shown");
  for (const element of document.querySelectorAll("main .tex")) renderMath(element, element.textContent, false);
  performance.mark("derive-math-typeset");
})();
