// The planner's best layouts (hand-written; derive.render.web inlines it after calculator.js): `derive plan --json`'s
// ranked layouts of a dense model with balanced false (the page's layout has no --balanced) or of an MoE preset,
// each with a button that loads it into the form. The candidates, verdicts, dominated variants, order and shared
// ranks mirror derive.planning (layouts.layouts and expert_layouts, layouts.micro_batch_columns, ranking.reasons,
// Plan.dominated, Plan.order, ranking.shared_ranks); the most loaded rank's bytes and the allocator's rounding are
// the generated functions DERIVE_PLAN_FUNCTIONS (derive.render.page_plan, page_plan_experts: experts.rank_memory's
// terms), the step time the step card's (step.js's compile). Numbers are DATA.plan's.
"use strict";
const DerivePlanner = (function () {
  const DATA = JSON.parse(document.getElementById("derive-data").textContent);
  const PLAN = DATA.plan;
  const PARSE = DeriveParse(DATA);
  const LAYOUT = DeriveLayout(DATA, PARSE);
  const STEP = DeriveStep(DATA);
  const FIELDS = new Map(DATA.fields.map((field) => [field.option, field]));
  const FORM = document.getElementById("calculator-form");
  const A = PLAN.allocator;
  const N = PLAN.numbers;  // one, two (numpy's rint rounds halves to even), a balanced pipeline's extra slots

  // A generated function at `values` (its arguments by name; one argument array per function, reused).
  const BUFFERS = PLAN.arguments.map((names) => new Array(names.length));
  function call(index, values) {
    const names = PLAN.arguments[index];
    const buffer = BUFFERS[index];
    for (let i = 0; i < names.length; i++) buffer[i] = values[names[i]];
    return DERIVE_PLAN_FUNCTIONS[index].apply(null, buffer);
  }
  const gcd = (x, y) => (y === 0 ? x : gcd(y, x % y));

  // derive.planning.layouts.divisors: the positive divisors of n, ascending.
  function divisors(n) {
    const found = [];
    for (let k = N.one; k * k <= n; k++) if (n % k === 0) found.push(k, n / k);
    return [...new Set(found)].sort((x, y) => x - y);
  }

  // numpy's rint: to the nearest integer, ties to even.
  function rint(x) {
    const r = Math.round(x);
    return r - x === N.one / N.two && r % N.two !== 0 ? r - N.one : r;
  }

  // derive.accounts.allocator.allocated_bytes: the block CUDACachingAllocator hands a request of `size` bytes.
  function allocated(size) {
    const up = (value, multiple) => Math.ceil(value / multiple) * multiple;
    const rounded = size > 0 ? Math.max(A.kMinBlockSize, up(size, A.kMinBlockSize)) : 0;
    const segment = rounded === 0 ? 0 : rounded <= A.kSmallSize ? A.kSmallBuffer
      : rounded < A.kMinLargeAlloc ? A.kLargeBuffer : up(rounded, A.kRoundLarge);
    const remaining = segment - rounded;
    const split = rounded <= A.kSmallSize ? remaining >= A.kMinBlockSize : remaining > A.kSmallSize;
    return split ? rounded : segment;
  }
  const roundedUp = (size) => allocated(rint(size)) - rint(size);

  // derive.planning.search's memory_of for one unbalanced layout: the most loaded rank's bytes plus the rounding
  // of every state buffer and held activation (derive.planning.rounding.rounding_bytes).
  function memory(variant, values) {
    let extra = 0;
    for (const [size, states, copies] of variant.buffers) extra += copies * roundedUp(call(size, Object.assign(values, states)));
    const held = call(variant.held, values);
    for (const size of variant.rows) extra += held * roundedUp(call(size, values));
    return call(variant.memory, Object.assign(values, variant.states)) + extra;
  }

  // derive.planning.layouts.layouts (balanced 0 only) crossed with the recompute policies, in derive plan's row order.
  function candidates(model, gpus, seq) {
    const contexts = [];
    if (model.experts !== undefined || PLAN.architectures[model.form].context_parallel) {
      for (let k = N.one; k <= Math.min(PLAN.max_context, gpus); k++) if (seq % k === 0) contexts.push(k);
    } else contexts.push(N.one);
    const base = [];
    for (const t of divisors(gcd(gcd(model.heads, model.kv_heads), gpus))) {
      for (const c of contexts.filter((k) => gpus % (t * k) === 0)) {
        for (const p of divisors(gpus / (t * c)).filter((k) => k <= model.layers + N.balanced_slots)) {
          for (let v = N.one; v <= (p > N.one ? PLAN.max_virtual : N.one); v++) {
            if (p * v > model.layers) break;
            for (const b of PLAN.micro_batches) {
              for (const zero of PLAN.zero) base.push({ t, p, v, c, d: gpus / (t * p * c), b, zero });
            }
          }
        }
      }
    }
    return PLAN.recompute.flatMap((recompute) => expertGrid(model, base).map((row) => ({ ...row, recompute })));
  }

  // derive.planning.layouts.expert_layouts: an MoE preset's candidates, t dividing the dense FFN width, crossed
  // with every t_E in {1, t} dividing f_E and every e dividing E with t_E e dividing t c d. A dense model's as they are.
  function expertGrid(model, base) {
    if (model.experts === undefined) return base;
    const routed = divisors(model.experts);
    const rows = [];
    for (const row of base.filter((candidate) => model.ffn % candidate.t === 0)) {
      for (const etp of [...new Set([N.one, row.t])].sort((x, y) => x - y)) {
        if (model.expert_ffn % etp !== 0) continue;
        for (const e of routed) if ((row.t * row.c * row.d) % (etp * e) === 0) rows.push({ ...row, etp, e });
      }
    }
    return rows;
  }

  // derive.planning.experts.rank_layers: (dense, MoE) layers pipeline `rank` builds at p > 1, v chunks of n.
  function rankLayers(model, rank, p, v) {
    const total = model.total_layers;
    const n = Math.ceil(total / (p * v));
    const index = { first: 0, middle: N.one, last: p - N.one }[rank];
    const dense = Math.min(Math.max(total - model.moe_layers - index * n, 0), n);
    return [dense, Math.min(v * n - dense, model.moe_layers)];
  }

  // derive.planning.experts.rank_memory (rounded): `rank`'s state buffers over its parameters and its held chunks'
  // saved tensors, each as the caching allocator allocates it.
  function rankMemory(model, variant, rank, values) {
    const built = rank === "whole" ? [model.total_layers - model.moe_layers, model.moe_layers]
      : rankLayers(model, rank, values.p, values.v);
    const layers = Object.fromEntries(model.kinds.map((kind, i) => [kind, built[i]]));
    const summed = (sizes) => sizes.reduce((sum, size) => sum + allocated(rint(call(size, values))), 0);
    const [restCount, expertCount] = variant.parameters.edges.map((edges, group) => call(edges, values)
      + model.kinds.reduce((sum, kind) => sum + layers[kind] * call(variant.parameters[kind][group], values), 0));
    const states = variant.buffers.reduce((sum, [rest, expert]) => sum + allocated(rint(
      restCount * call(rest, values) + expertCount * call(expert, values))), 0);
    const held = call(variant.held, values);
    const total = states + held * (summed(variant.saved.held)
      + model.kinds.reduce((sum, kind) => sum + layers[kind] * summed(variant.saved[kind]), 0)) + summed(variant.saved.once);
    return rank === "middle" && values.p === N.two ? 0 : total;
  }

  // The step card's figures for one layout: the configuration the form would give it (layout.js), then step.js.
  function stepOf(name, row, question) {
    const parsed = question.parsed;
    Object.assign(parsed, { tp: row.t, pp: row.p, vp: row.v, cp: row.c, ep: row.e === undefined ? null : row.e,
                            etp: row.etp === undefined ? null : row.etp, "micro-batch": row.b, zero: row.zero,
                            recompute: row.recompute, "sequence-parallel": row.t > N.one });
    const flags = {};
    for (const flag of DATA.layout.comm.flags) {
      const option = flag.replace("_", "-");
      if (FIELDS.has(option)) flags[flag] = parsed[option];
    }
    const config = LAYOUT.configuration({}, parsed, DATA.layout.comm.models[name], flags);
    if (Object.keys(config.errors).length) {
      row.refused = config.errors;
      return null;
    }
    // one step program per set of flags (step.js's compile): every layout of the set runs it
    const key = `${row.recompute}|${row.zero}|${row.t > N.one}|${row.p === N.one}`;
    if (!programs.has(key)) programs.set(key, STEP.compile(config.choices, name, question.gpu, question.precision, Object.keys(config.values), {}));
    const program = programs.get(key);
    return (program.run ? program.run(config.values) : program).figures;
  }
  const figure = (figures, key) => {
    const found = figures.find((shown) => shown.formula.key === key);
    return found === undefined ? NaN : found.value;
  };
  const programs = new Map();

  // derive plan's question from the form: {error} or its plan, every ranked layout in order.
  function plan(question) {
    const { name, gpu, gpus, sequences, seq, precision } = question;
    const model = PLAN.models[name] || PLAN.experts[name];
    const usable = PLAN.gpus[gpu];
    const [low, high] = usable;
    const rows = candidates(model, gpus, seq);
    programs.clear();
    const counts = {};
    const fitting = [];
    const fits = [];
    const untimed = [];  // layouts that fit but the page's layout checks refuse (derive comm's lines): not ranked
    rows.forEach((row, index) => {
      const whole = sequences % (row.b * row.d) === 0;
      row.m = whole ? sequences / (row.b * row.d) : 0;
      let reason = "";
      // derive.planning.experts.expert_plan: context parallelism over MLA refused first, as derive comm refuses it
      if (model.context_unmodelled && row.c > N.one) reason = "context";
      else if (!whole) reason = "batch";
      else if (!(row.v === N.one || row.m % row.p === 0)) reason = "schedule";
      else {
        if (model.experts !== undefined) {
          const values = { t: row.t, p: row.p, v: row.v, c: row.c, d: row.d, e: row.e, t_E: row.etp, b: row.b, m: row.m, s: seq };
          row.memory = Math.max(...(row.p === N.one ? ["whole"] : ["first", "middle", "last"]).map(
            (rank) => rankMemory(model, model.variants[`${row.recompute}|${row.zero}|${rank}`], rank, values)));
        } else {
          const values = { ...model.values, t: row.t, p: row.p, v: row.v, c: row.c, d: row.d, b: row.b, s: seq, m: row.m };
          row.memory = memory(PLAN.architectures[model.form].variants[`${row.recompute}|${row.zero}|${precision}`], values);
        }
        if (row.memory > high) reason = "memory";
      }
      row.reason = reason;
      row.index = index;
      if (reason) counts[reason] = (counts[reason] || 0) + N.one;
      else fitting.push(row);
    });
    // the step of each layout that fits, in an order that lets its program keep what the sizes before it computed
    // (a micro-batch's compute depends on t, c, b, e and t_E, not on p, v or d)
    const order = ["t", "c", "b", "e", "etp", "p", "v", "d"];
    fitting.sort((x, y) => x.recompute.localeCompare(y.recompute) || x.zero - y.zero
      || order.reduce((found, size) => found || (x[size] - y[size] || 0), 0) || x.index - y.index);
    for (const row of fitting) {
      row.figures = stepOf(name, row, question);
      row.time = row.figures === null ? NaN : figure(row.figures, DATA.step.total);
      row.tight = row.memory > low;
      if (row.figures !== null) fits.push(row);
      else untimed.push(row);
    }
    fits.sort((x, y) => x.index - y.index);
    // Plan.dominated: another recompute / ZeRO variant of the layout no slower with no more memory, better in one.
    const groups = new Map();
    for (const row of fits) {
      const key = [row.t, row.p, row.v, row.c, row.d, row.b, row.e, row.etp].join(",");
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(row);
    }
    for (const group of groups.values()) {
      for (const row of group) {
        row.dominated = group.some((other) => other.time <= row.time && other.memory <= row.memory
          && (other.time < row.time || other.memory < row.memory));
      }
    }
    // Plan.order: by step time, memory, then t, p, v, c, b; derive plan's row order last.
    const ranked = fits.filter((row) => !row.dominated);
    ranked.sort((x, y) => x.time - y.time || x.memory - y.memory || x.t - y.t || x.p - y.p || x.v - y.v
      || x.c - y.c || (x.e - y.e || 0) || (x.etp - y.etp || 0) || x.b - y.b || x.index - y.index);
    ranked.forEach((row, i) => {
      const before = ranked[i - N.one];
      row.rank = i === 0 ? N.one : before.rank + (row.time - before.time > PLAN.tie * row.time ? N.one : 0);
    });
    return { rows, ranked, fit: fits.length + untimed.length, candidates: rows.length, failures: counts,
             dominated: fits.length - ranked.length, untimed };
  }

  // The form's question: {error} or what plan() takes.
  function question() {
    const parsed = {};
    for (const field of DATA.fields) {
      const result = PARSE.parseField(field, FORM.elements[field.option].value);
      parsed[field.option] = "error" in result ? undefined : result.value;
    }
    const name = FORM.elements.config.value !== "" || parsed.model === undefined ? null : parsed.model || DATA.page_model;
    if (name === null || !(name in PLAN.models || name in PLAN.experts)) return { error: PLAN.lines.model };
    const gpu = parsed.gpu || DATA.step.gpu;
    if (!(gpu in PLAN.gpus)) return { error: PLAN.lines.gpu };
    const precision = parsed.precision || FIELDS.get("precision").fallback;
    if (name in PLAN.experts && precision !== PLAN.precisions[0]) return { error: PLAN.lines.expert_precision.split("{precision}").join(precision) };
    if (!PLAN.precisions.includes(precision)) return { error: PLAN.lines.precision };
    if (precision in DATA.step.gpus[gpu].refused) return { error: DATA.step.gpus[gpu].refused[precision] };
    if (!parsed.gpus || !parsed["global-batch"]) return { error: PLAN.lines.question };
    const seq = parsed.seq || (PLAN.models[name] || PLAN.experts[name]).seq;
    return { name, gpu, precision, seq, gpus: parsed.gpus, sequences: parsed["global-batch"],
             parsed: { ...Object.fromEntries(Object.keys(DATA.layout.rules.symbols).map((option) => [option, null])),
                       gpus: parsed.gpus, "global-batch": parsed["global-batch"], seq, precision } };
  }

  // The layout's fields of the form set to `row` (the rest of the layout cleared), and the page updated.
  function load(row) {
    const texts = { tp: row.t, pp: row.p, vp: row.v, cp: row.c, ep: row.e === undefined ? "" : row.e,
                    etp: row.etp === undefined ? "" : row.etp, dp: "", "micro-batch": row.b,
                    zero: row.zero, recompute: row.recompute, "sequence-parallel": row.t > N.one ? PLAN.flag_on : "" };
    for (const [option, text] of Object.entries(texts)) if (FORM.elements[option]) FORM.elements[option].value = String(text);
    FORM.dispatchEvent(new Event("input"));
  }

  const GIB = DATA.byte_units.GiB;
  const D = PLAN.digits;  // decimals shown: GiB, seconds
  function cell(tr, key, value, text) {
    const td = document.createElement("td");
    const output = document.createElement("output");
    output.dataset.key = key;
    output.dataset.value = String(value);
    output.textContent = text === undefined ? String(value) : text;
    td.appendChild(output);
    tr.appendChild(td);
  }

  // The ranked layouts as a table (data-key: derive plan --json's keys under layouts.N, dotted).
  function show() {
    const status = document.getElementById("plan-status");
    const body = document.getElementById("plan-rows");
    body.textContent = "";
    const asked = question();
    if ("error" in asked) {
      status.textContent = asked.error;
      document.getElementById("plan-command").textContent = "";
      document.getElementById("plan-table").hidden = true;
      return null;
    }
    document.getElementById("plan-command").textContent = [PLAN.command, "--model", asked.name, "--gpus", asked.gpus,
      "--tokens", asked.sequences * asked.seq, "--seq", asked.seq, "--gpu", asked.gpu, "--precision", asked.precision,
      "--json"].join(" ");
    const start = performance.now();
    const result = plan(asked);
    const took = performance.measure("derive-plan", { start }).duration;
    result.ranked.slice(0, PLAN.shown).forEach((row, n) => {
      const tr = document.createElement("tr");
      const key = (name) => `layouts.${n}.${name}`;
      cell(tr, key("rank"), row.rank);
      for (const name of ["t", "p", "v", "c", "e", "etp", "d", "b", "m", "recompute", "zero"]) {
        if (row[name] !== undefined) cell(tr, key(name), row[name]);
        else tr.appendChild(document.createElement("td"));
      }
      cell(tr, key("memory_per_gpu"), Math.round(row.memory), (row.memory / GIB).toFixed(D.memory) + (row.tight ? " (tight)" : ""));
      cell(tr, key("step_time"), row.time, row.time.toFixed(D.seconds));
      const rate = figure(row.figures, PLAN.rate);
      cell(tr, key(PLAN.rate), rate, rate.toFixed(0));
      const parts = document.createElement("td");
      for (const shown of row.figures) {
        if (shown.formula.part === null) continue;
        const output = document.createElement("output");
        output.dataset.key = key(shown.formula.key);
        output.dataset.value = String(shown.value);
        output.textContent = shown.value > 0 ? `${shown.formula.part} ${shown.value.toFixed(D.seconds)} ` : "";
        parts.appendChild(output);
      }
      tr.appendChild(parts);
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Load";
      button.setAttribute("aria-label", `Load rank ${row.rank}: TP ${row.t}, PP ${row.p}, VP ${row.v}, CP ${row.c}`);
      button.addEventListener("click", () => load(row));
      const td = document.createElement("td");
      td.appendChild(button);
      tr.appendChild(td);
      body.appendChild(tr);
    });
    document.getElementById("plan-table").hidden = !result.ranked.length;
    status.textContent = PLAN.lines.summary.split("{candidates}").join(String(result.candidates))
      .split("{fit}").join(String(result.fit)).split("{ranked}").join(String(result.ranked.length))
      .split("{milliseconds}").join(took.toFixed(0))
      + (result.untimed.length ? " " + PLAN.lines.untimed.split("{count}").join(String(result.untimed.length))
        .split("{line}").join(Object.values(result.untimed[0].refused)[0]) : "");
    return result;
  }

  document.getElementById("plan-button").addEventListener("click", show);
  return { plan, question, show };
})();
