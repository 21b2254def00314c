// Memory per GPU by pipeline stage (hand-written; derive.render.web inlines it before calculator.js): `derive predict
// --json`'s memory.stages.<stage>.<part> and memory.per_gpu at the layout's configuration (layout.js), from the
// generated functions (DERIVE_STAGE_FUNCTIONS, derive.render.page_stages), and predict's fit check in its words
// (derive.verdicts.MEMORY). Every expression, label and GPU figure is DATA.stages'; this script looks them up.
"use strict";
function DeriveStages(DATA, format) {
  const STAGES = DATA.stages;
  const WORDS = DATA.verdicts.memory;
  const fill = (text, values) => {
    for (const [name, value] of Object.entries(values)) text = text.split("{" + name + "}").join(value);
    return text;
  };

  // The figures at this configuration of the page model `name` (none where predict does not check it).
  function evaluate(config, name) {
    const form = STAGES.forms[name];
    if (form === undefined) return [];
    const values = { ...config.values };
    const out = [];
    for (const formula of STAGES.figures) {
      // a part the same as an earlier form's (the most loaded rank: its key) is keyed by that form
      const head = (STAGES.reused[form] || {})[formula.part || formula.key] || form;
      const uses = formula.uses[head];  // the flags that change that form's expression
      if (uses === undefined) continue;
      const index = formula.variants[[head, ...uses.map((use) => String(config.choices[use]))].join("|")];
      if (index === undefined) continue;
      const variant = STAGES.expressions[index];
      const value = DERIVE_STAGE_FUNCTIONS[variant.function](...variant.args.map((arg) => values[arg]));
      if (Number.isNaN(value)) continue;  // a stage this layout has not (derive.planning.stage_memory.STAGES)
      if (formula.symbol) values[formula.symbol] = value;
      out.push({ formula, variant, value });
    }
    // predict prints its memory only with the most loaded rank (none where it does not check the layout)
    return out.some((figure) => figure.formula.key === STAGES.per_gpu) ? out : [];
  }

  // Predict's memory check of page model `name` on `gpuName`: {refusal} where the most loaded rank needs more than the
  // HBM and predict refuses the model's layouts (it exits 2 with that line), else {note} (its JSON's
  // conventions.memory: above the HBM, an MoE model's says so); {} without the figure.
  function verdict(figures, gpuName, name) {
    const loaded = figures.find((figure) => figure.formula.key === STAGES.per_gpu);
    const gpu = STAGES.gpus[gpuName];
    if (!loaded || !gpu) return {};
    const needed = format(loaded.value, "B");
    const over = loaded.value > gpu.hbm;
    if (over && STAGES.refusing.includes(STAGES.forms[name])) {
      return { refusal: fill(WORDS.does_not_fit, { needed, gpu: gpuName, hbm: gpu.hbm_text }) };
    }
    return { note: fill(WORDS.note, { needed, low: format(gpu.usable, "B"),
                                      verdict: WORDS[over ? "over_hbm" : loaded.value <= gpu.usable ? "fits" : "may_not_fit"] }) };
  }

  // The stages' figures of the predicted step `step` (predicted()'s, at `layout`) and predict's check, which, where it
  // refuses, stands as the step's refusal: its figures are then marked (predict prints them with --no-memory-check).
  function judge(step, layout) {
    const figures = step.figures.length ? evaluate(layout, step.name) : [];
    const fit = verdict(figures, step.gpu, step.name);
    if (fit.refusal) step.refusal = fit.refusal;
    return { figures, fit, gpu: step.gpu, refused: new Set(fit.refusal ? step.figures : []) };
  }

  // One stacked bar per stage (drawn by the calculator's partsBar), all on one scale with the usable budget marked.
  function show({ figures, gpu: gpuName, fit }, partsBar) {
    const box = document.getElementById("stages");
    const bars = document.getElementById("stage-bars");
    const note = document.getElementById("stage-note");
    bars.replaceChildren();
    box.hidden = !figures.length;
    note.textContent = fit.refusal || fit.note || "";
    note.hidden = !note.textContent;
    const loaded = figures.find((figure) => figure.formula.key === STAGES.per_gpu);
    if (!loaded) return;
    const budget = STAGES.gpus[gpuName].usable;
    const scale = Math.max(loaded.value, budget);
    for (const [stage, label] of STAGES.stages) {  // in derive.planning.stage_memory.STAGES order
      const parts = figures.filter((figure) => figure.formula.stage === stage)
        .map((figure) => ({ ...figure, formula: { ...figure.formula, label: figure.formula.part_label } }));
      if (!parts.length) continue;
      const block = document.createElement("div");
      block.className = "stage";
      const heading = document.createElement("h4");
      heading.textContent = label;
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.setAttribute("role", "img");
      const legend = document.createElement("ul");
      legend.className = "memory-legend";
      block.append(heading, bar, legend);
      bars.append(block);
      partsBar(bar, legend, parts, scale, label, budget);
    }
  }

  return { evaluate, verdict, judge, show };
}
