// The MoE report on the page (hand-written; derive.render.web inlines it before calculator.js):
// `derive report --model NAME` for an MoE name, its layout (--tp --ep --etp --pp --dp), profile and
// precision checked in the CLI's order (derive.cli.run, derive.report), its figures from the
// generated functions. Every rule and line is DATA.moe's, from derive and the CLI.
"use strict";
function DeriveMoE(DATA, PARSE) {
  const MOE = DATA.moe;
  const call = (printed, values) => DERIVE_FUNCTIONS[printed.function](...printed.args.map((arg) => values[arg]));
  const fill = (text, values) => {
    for (const [name, value] of Object.entries(values)) text = text.split("{" + name + "}").join(value);
    return text.replace(/ +/g, " ");
  };

  // The form's texts and parsed values -> {errors} or the MoE configuration (model, values, form, choice).
  // ``pasted``: a pasted config's {form, name, values} (config.js), else the named model's.
  function configuration(texts, parsed, fields, pasted) {
    // derive.cli.run: a dense-only option given (not its default) is refused, in DENSE_ONLY's order
    for (const [option, line] of Object.entries(MOE.messages.refused)) {
      if (DATA.layout.ignored.includes(option)) continue;  // another part of the page reads it
      const field = fields.get(option);
      if (field && texts[option] !== "" && texts[option] !== field.default) return { errors: { [option]: line } };
    }
    const model = pasted || MOE.models[parsed.model];
    const values = { ...model.values };
    if (parsed.seq !== null) values[MOE.seq] = parsed.seq;
    for (const [option, symbol] of Object.entries(MOE.layout)) {
      values[symbol] = parsed[option] !== null ? parsed[option] : MOE.layout_default;
    }
    // derive.report.moe_recipe: bf16 or an FP8 recipe, the recipes on the fused profile only
    const precision = texts.precision !== "" ? texts.precision : fields.get("precision").default;
    const profile = parsed[MOE.profile_option] !== null ? parsed[MOE.profile_option] : MOE.default_profile;
    if (!MOE.precisions.includes(precision)) {
      return { errors: { precision: fill(MOE.messages.precision, { text: PARSE.pyRepr(precision) }) } };
    }
    if (precision !== MOE.precisions[0] && profile !== MOE.default_profile) {
      return { errors: { precision: fill(MOE.messages.fp8_profile, { precision, profile }) } };
    }
    // derive.report.MoELayout.check: each size divides what it splits, in its order
    for (const rule of MOE.divides) {
      const divisor = call(rule.divisor, values);
      const dividend = call(rule.dividend, values);
      if (dividend % divisor) {
        return { errors: { [rule.option]: fill(MOE.messages.divides[rule.failure], { divisor: String(divisor), dividend: String(dividend) }) } };
      }
    }
    const t = values[MOE.layout.tp];
    const p = values[MOE.layout.pp];
    const choice = MOE.choices.indexOf([String(t > MOE.layout_default), String(p === MOE.layout_default), profile, precision].join("|"));
    return { errors: {}, moe: true, name: model.name, values, form: model.form, choice };
  }

  // Every figure the MoE report's JSON holds at this configuration.
  function evaluate(config) {
    const out = [];
    for (const formula of MOE.formulas) {
      const index = (formula.variants[config.form] || [])[config.choice];  // null: no such figure at this choice
      if (index === undefined || index === null) continue;
      const variant = MOE.expressions[index];
      out.push({ formula, variant, value: call(variant, config.values) });
    }
    return out;
  }

  return { configuration, evaluate };
}
