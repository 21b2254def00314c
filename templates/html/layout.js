// The layout and the bytes each rank sends per step (hand-written; derive.render.web inlines it before
// calculator.js): `python -m derive.comm --model NAME` with the layout options, checked in
// derive.options.layout.parallelism_from's order, its figures from the generated functions
// (DERIVE_LAYOUT_FUNCTIONS). Every rule, size and line is DATA.layout's, from derive.
"use strict";
function DeriveLayout(DATA, PARSE) {
  const LAYOUT = DATA.layout;
  const COMM = LAYOUT.comm;
  const RULES = LAYOUT.rules;
  const SYMBOLS = RULES.symbols;
  const call = (printed, values) => DERIVE_LAYOUT_FUNCTIONS[printed.function](...printed.args.map((arg) => values[arg]));
  const fill = (text, values) => {
    for (const [name, value] of Object.entries(values)) text = text.split("{" + name + "}").join(value);
    return text.replace(/ +/g, " ");
  };
  const known = (printed, values) => printed.args.every((arg) => values[arg] !== undefined);

  // The layout's sizes from the parsed fields: the options' defaults (1; etp: tp) where not given.
  function sizes(parsed) {
    const values = {};
    for (const [option, symbol] of Object.entries(SYMBOLS)) {
      if (parsed[option] !== null && parsed[option] !== undefined) values[symbol] = parsed[option];
    }
    for (const option of ["tp", "pp", "vp", "cp", "ep", "micro-batch"]) {
      if (values[SYMBOLS[option]] === undefined) values[SYMBOLS[option]] = LAYOUT.one;
    }
    if (values[SYMBOLS.etp] === undefined) values[SYMBOLS.etp] = values[SYMBOLS.tp];
    if (parsed.seq !== null && parsed.seq !== undefined) values[LAYOUT.seq] = parsed.seq;
    return values;
  }

  // The data-parallel size: --dp, else --gpus / (tp pp cp) where it divides; null when neither is given.
  function dataParallel(parsed) {
    const values = sizes(parsed);
    if (values[SYMBOLS.dp] !== undefined) return values[SYMBOLS.dp];
    if (values[SYMBOLS.gpus] === undefined) return null;
    const dp = call(COMM.sizes.dp, values);
    return Number.isInteger(dp) ? dp : null;
  }

  // The form's model and layout -> {errors} or the configuration the ledger's functions take.
  function configuration(texts, parsed, model, flags) {
    const values = { ...model.values, ...sizes(parsed) };
    const given = values[SYMBOLS.dp] !== undefined;
    const fail = (rule, extra) => {
      const shown = { name: model.name, ...extra };
      for (const [name, printed] of Object.entries(rule.values)) shown[name] = String(call(printed, values));
      return { errors: { [rule.option]: fill(RULES.messages[rule.failure], shown) } };
    };
    let derived = false;
    for (const rule of RULES.rules) {
      // the data-parallel size once the world size is checked, and the global batch's default with it
      if (rule.failure === LAYOUT.dp_before) {
        derived = !given && values[SYMBOLS.gpus] !== undefined;
        if (!given) values[SYMBOLS.dp] = derived ? call(COMM.sizes.dp, values) : LAYOUT.one;
        if (values[SYMBOLS["global-batch"]] === undefined) values[SYMBOLS["global-batch"]] = call(COMM.sizes.global_batch, values);
        // unset --zero and --sequence-parallel: derive.options.layout.DEFAULTS at this layout
        for (const [flag, printed] of Object.entries(LAYOUT.defaults)) {
          if (flags[flag] === null) flags[flag] = COMM.boolean_flags.includes(flag) ? Boolean(call(printed, values)) : call(printed, values);
        }
      }
      if (rule.when !== null && !(values[rule.when] > LAYOUT.one)) continue;
      const [x, y] = rule.operands;
      switch (rule.test) {
        case "divides":
          if (!known(x, values) || !known(y, values)) continue;
          if (call(y, values) % call(x, values)) return fail(rule);
          break;
        case "differs":
          if (!given || !known(y, values)) continue;
          if (call(x, values) !== call(y, values)) return fail(rule);
          break;
        case "exceeds":
          if (call(x, values) > call(y, values)) return fail(rule);
          break;
        case "single":
          if (values[SYMBOLS.pp] === LAYOUT.one) return fail(rule);
          break;
        case "unsplit":
          if (values[SYMBOLS.tp] > LAYOUT.one && !flags.sequence_parallel) return fail(rule);
          break;
        case "dense":
          if (!model.experts && parsed[x] !== null) return fail(rule);
          break;
        case "mla":
          if (model.mla) return fail(rule);
          break;
      }
    }
    values[COMM.micro_batches] = call(COMM.sizes.micro_batches, values);
    values[COMM.ell.layers] = call(COMM.sizes.ell, values);
    if (model.experts) values[COMM.ell.moe_layers] = call(COMM.sizes.ell_E, values);
    const choices = { ...flags, single: values[SYMBOLS.pp] === LAYOUT.one };
    return { errors: {}, values, choices, form: model.form, derived };
  }

  // derive comm --json's figures at this configuration: the layout's sizes, then each group's bytes.
  function evaluate(config) {
    const out = [];
    const sized = { "layout.gpus": COMM.sizes.gpus, "layout.dp": config.derived ? COMM.sizes.dp : COMM.sizes.dp_given,
                    "layout.micro_batches": COMM.sizes.micro_batches };
    for (const formula of COMM.layout_figures) {
      const variant = sized[formula.key];
      out.push({ formula, variant, value: call(variant, config.values) });
    }
    for (const formula of COMM.formulas) {
      const key = [config.form, ...formula.uses.map((use) => String(config.choices[use]))].join("|");
      const index = formula.variants[key];
      if (index === undefined) continue;
      const variant = COMM.expressions[index];
      out.push({ formula, variant, value: call(variant, config.values) });
    }
    return out;
  }

  return { configuration, evaluate, dataParallel };
}
