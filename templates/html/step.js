// The predicted step (hand-written; derive.render.web inlines it before calculator.js): `derive predict`'s
// step_time_s, tokens_per_s_per_gpu, mfu, breakdown (and --token-budget's days, gpu_hours) at the layout's configuration (layout.js), from the
// generated functions (DERIVE_STEP_FUNCTIONS, derive.render.page_step). Every quantity is a symbol whose
// function DATA.step.definitions picks by the model (or its architecture) and the flags that change it;
// this script only looks them up, in the order their arguments need them.
"use strict";
function DeriveStep(DATA) {
  const STEP = DATA.step;

  // The flags a variant's key may name, at this configuration.
  function flagValues(config, precision) {
    return { ...config.choices, precision };
  }

  // The step's figures as a program for one model, GPU, precision and set of flags (config.choices): each
  // quantity's function looked up once (by the model, or its architecture, and the flags that change it), in
  // the order their arguments need them; {refusal: predict's line} for a GPU without tensor cores for the
  // precision (it stands in the step's card, not on the field, which the report reads too). `inputs`: the names
  // of the configuration's values; `given`: the step card's own fields' values by symbol (--token-budget's tokens).
  // run(values) gives the figures at the configuration's values (the derive planner runs one program on many).
  function compile(choices, name, gpuName, precision, inputs, given) {
    const model = STEP.models[name];
    const gpu = STEP.gpus[gpuName];
    if (model === undefined || gpu === undefined) return { figures: [] };
    if (precision in gpu.refused) return { refusal: gpu.refused[precision], figures: [] };
    if (!(precision in gpu.precisions)) return { figures: [] };
    const fixed = { ...gpu.values, ...gpu.precisions[precision], ...(given || {}) };
    const named = new Set(inputs);
    const flags = flagValues({ choices }, precision);
    const heads = { model, form: STEP.forms[name], name };  // "name": a pasted architecture's own (its counts, bytes)
    const slots = new Map();
    const constants = [];
    const read = [];
    const steps = [];
    let size = 0;
    const unknown = size++;  // a slot that stays undefined: a symbol without a value
    function slot(symbol) {
      if (slots.has(symbol)) return slots.get(symbol);
      if (symbol in fixed || named.has(symbol)) {
        (symbol in fixed ? constants : read).push([size, symbol in fixed ? fixed[symbol] : symbol]);
      } else {
        const definition = STEP.definitions[symbol];
        slots.set(symbol, unknown);  // unknown while it is being resolved
        if (definition === undefined) return unknown;
        // the key: the model's (or its architecture's, or the page name's) name, then the flags that change the quantity
        // (a flag's value giving what another gives everywhere is keyed by that one: definition.same)
        const same = (flag) => ((definition.same || {})[flag] || {})[String(flags[flag])] || String(flags[flag]);
        const key = definition.head === null ? "" : [heads[definition.head], ...definition.uses.map(same)].join("|");
        const index = definition.variants[key];
        if (index === undefined) return unknown;
        const args = STEP.arguments[index].map(slot);
        steps.push([DERIVE_STEP_FUNCTIONS[index], args, new Array(args.length), size]);
      }
      slots.set(symbol, size);
      return size++;
    }
    const figures = [];
    for (const formula of STEP.figures) {
      const variant = formula.by_model ? formula.variants[model] : formula.variants[""];
      if (variant === undefined) continue;
      const needs = formula.needs === null ? null : (formula.needs in fixed || named.has(formula.needs) ? slot(formula.needs) : undefined);
      const args = STEP.arguments[variant.function].map(slot);
      if (needs !== undefined) figures.push([formula, variant, DERIVE_STEP_FUNCTIONS[variant.function], args, new Array(args.length), needs]);
    }
    // The slots kept from the last run: a step runs again only where one of its arguments changed (the planner
    // runs a program on layouts ordered so that, e.g., a micro-batch's compute is shared by the pipeline sizes).
    const at = new Array(size);
    const changed = new Array(size).fill(true);
    for (const [place, value] of constants) at[place] = value;
    for (const [place] of constants) changed[place] = false;
    changed[unknown] = false;
    let first = true;
    function run(values) {
      for (const [place, symbol] of read) {
        changed[place] = first || at[place] !== values[symbol];
        at[place] = values[symbol];
      }
      for (const [func, args, buffer, place] of steps) {
        let again = first;
        for (let i = 0; i < args.length; i++) {
          again = again || changed[args[i]];
          buffer[i] = at[args[i]];
        }
        changed[place] = again;
        if (again) at[place] = func.apply(null, buffer);
      }
      first = false;
      const shown = [];
      for (const [formula, variant, func, args, buffer, needs] of figures) {
        if (needs !== null && at[needs] === undefined) continue;
        for (let i = 0; i < args.length; i++) buffer[i] = at[args[i]];
        const result = func.apply(null, buffer);
        if (result === undefined || !Number.isFinite(result)) return { figures: [] };
        shown.push({ formula, variant, value: result });
      }
      return { figures: shown };
    }
    return { run };
  }

  // The step's figures at the configuration (layout.js's), or {refusal: predict's line}.
  function evaluate(config, name, gpuName, precision, given) {
    const program = compile(config.choices, name, gpuName, precision, Object.keys(config.values), given);
    return program.run ? program.run(config.values) : program;
  }

  return { evaluate, compile };
}
