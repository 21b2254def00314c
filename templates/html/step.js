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

  // The step's figures, or {refusal: predict's line} (a GPU without tensor cores for the precision): the line
  // stands in the step's card, not on the field, which the report reads too. `given`: the step card's own
  // fields' values by symbol (--token-budget's tokens); a figure that needs one not given is left out.
  function evaluate(config, name, gpuName, precision, given) {
    const model = STEP.models[name];
    const gpu = STEP.gpus[gpuName];
    if (model === undefined || gpu === undefined) return { figures: [] };
    if (precision in gpu.refused) return { refusal: gpu.refused[precision], figures: [] };
    if (!(precision in gpu.precisions)) return { figures: [] };
    const values = { ...config.values, ...gpu.values, ...gpu.precisions[precision], ...(given || {}) };
    const flags = flagValues(config, precision);
    const heads = { model, form: STEP.forms[name] };
    const resolving = new Set();
    function value(symbol) {
      if (symbol in values) return values[symbol];
      const definition = STEP.definitions[symbol];
      if (definition === undefined || resolving.has(symbol)) return undefined;
      resolving.add(symbol);
      // the key: the model's (or its architecture's) name, then the flags that change the quantity
      const key = definition.head === null ? "" : [heads[definition.head], ...definition.uses.map((flag) => String(flags[flag]))].join("|");
      const index = definition.variants[key];
      values[symbol] = index === undefined ? undefined : call(index);
      return values[symbol];
    }
    function call(index) {
      return DERIVE_STEP_FUNCTIONS[index](...STEP.arguments[index].map(value));
    }
    const figures = [];
    for (const formula of STEP.figures) {
      const variant = formula.by_model ? formula.variants[model] : formula.variants[""];
      if (variant === undefined || (formula.needs !== null && values[formula.needs] === undefined)) continue;
      const result = call(variant.function);
      if (result === undefined || !Number.isFinite(result)) return { figures: [] };
      figures.push({ formula, variant, value: result });
    }
    return { figures };
  }

  return { evaluate };
}
