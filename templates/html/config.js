// A pasted config.json read as derive.hf reads one (hand-written; derive.render.web inlines it after
// parse.js). Which field sets which size and which layout row, and their defaults, are derive.hf's
// family tables (DATA.config.families, from derive.hf.Family.data()); this file only applies them,
// so the page and `python -m derive.report --config` cannot drift apart. Its messages are the CLI's
// lines for `--config pasted.json` (DATA.config.messages). Pure functions: tests/test_web.py runs them in Node.
"use strict";
function DeriveConfig(DATA, PARSE) {
  const CONFIG = DATA.config;
  const REPR = CONFIG.repr;
  // JSON tokens of a text JSON.parse accepted: strings, numbers (integer part, then fraction and
  // exponent), literals, punctuation. Python's json module reads a number with a fraction or an
  // exponent as a float, any other as an int: the text decides, as it does for Python.
  const TOKEN = new RegExp("[ \\t\\n\\r]*(?:(?<string>\"(?:[^\"\\\\]|\\\\.)*\")|(?<integer>-?(?:0|[1-9]\\d*))" +
    "(?<fraction>(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)|(?<literal>true|false|null)|(?<mark>[{}\\[\\],:]))", "y");

  class Refusal {
    constructor(failure, values) {
      this.failure = failure;
      this.values = values;
    }
  }

  // A CLI line with its placeholders filled, whitespace runs as one space (the CLI's ' '.join(split())).
  function line(failure, values) {
    let text = CONFIG.messages[failure];
    for (const [name, value] of Object.entries(values)) text = text.split("{" + name + "}").join(value);
    return text.split(/\s+/).filter(Boolean).join(" ");
  }

  function tokens(text) {
    const out = [];
    TOKEN.lastIndex = 0;
    for (let match = TOKEN.exec(text); match; match = TOKEN.exec(text)) out.push(match.groups);
    return out;
  }

  // Values as Python's json.loads returns them: objects as Maps (key order, the last duplicate wins),
  // ints as {int: BigInt}, floats as {float: Number}.
  function build(list, cursor) {
    const token = list[cursor.at++];
    if (token.string !== undefined) return JSON.parse(token.string);
    if (token.integer !== undefined) {
      return token.fraction ? { float: Number(token.integer + token.fraction) } : { int: BigInt(token.integer) };
    }
    if (token.literal !== undefined) return JSON.parse(token.literal);
    const close = token.mark === "[" ? "]" : "}";
    const items = token.mark === "[" ? [] : new Map();
    while (list[cursor.at].mark !== close) {
      if (Array.isArray(items)) items.push(build(list, cursor));
      else {
        const key = JSON.parse(list[cursor.at].string);
        cursor.at++;  // the key
        cursor.at++;  // its ':'
        items.set(key, build(list, cursor));
      }
      if (list[cursor.at].mark === ",") cursor.at++;
    }
    cursor.at++;
    return items;
  }

  function parse(text) {
    try {
      JSON.parse(text);
    } catch (error) {
      throw new Refusal("not_json", { detail: error.message });
    }
    return build(tokens(text), { at: 0 });
  }

  const isNumber = (value) => value !== null && typeof value === "object" && !Array.isArray(value) &&
    !(value instanceof Map);
  const isInt = (value) => isNumber(value) && "int" in value;

  // Python's repr() of a float: the shortest digits (as JavaScript's), in exponent form outside
  // Python's fixed range (REPR.exponent_to < exponent < REPR.exponent_from), at least two exponent digits.
  function floatRepr(value) {
    if (!Number.isFinite(value)) return (value < 0 ? "-" : "") + REPR.inf;
    if (Object.is(value, -0)) return "-" + floatRepr(0);
    const [mantissa, exponent] = value.toExponential().split("e");
    const power = Number(exponent);
    if (power >= REPR.exponent_from || power <= REPR.exponent_to) {
      return mantissa + "e" + exponent.replace(/^([+-])(\d)$/, "$1" + "0" + "$2");
    }
    const fixed = String(value);
    return fixed.includes(".") ? fixed : fixed + ".0";
  }

  // Python's repr() of a JSON value (the CLI's messages quote a bad value with it).
  function repr(value) {
    if (value === null) return REPR.none;
    if (value === true) return REPR.true;
    if (value === false) return REPR.false;
    if (typeof value === "string") return PARSE.pyRepr(value);
    if (Array.isArray(value)) return "[" + value.map(repr).join(", ") + "]";
    if (value instanceof Map) {
      return "{" + Array.from(value, ([key, item]) => PARSE.pyRepr(key) + ": " + repr(item)).join(", ") + "}";
    }
    return "int" in value ? value.int.toString() : floatRepr(value.float);
  }

  // Python's str() of a value (a config's name): a string as it is, anything else as its repr.
  const pyStr = (value) => (typeof value === "string" ? value : repr(value));
  // Python's truth value of a JSON value.
  const truthy = (value) => !(value === undefined || value === null || value === false || value === "" ||
    (isNumber(value) && ("int" in value ? value.int === BigInt(0) : value.float === 0)) ||
    (Array.isArray(value) && !value.length) || (value instanceof Map && !value.size));

  // derive.hf.Fields: a config's reads, each failure the CLI's line.
  // ``prefix``: "moe:" where the CLI reads the config as an MoE model (its lines then name no path).
  function fields(config, modelType, prefix = "") {
    const given = (name) => config.has(name) && config.get(name) !== null;
    function size(name, fallback) {
      if (!given(name)) {
        if (fallback === undefined) throw new Refusal(prefix + "missing", { field: name, model_type: modelType });
        return fallback;
      }
      const value = config.get(name);
      if (!isInt(value) || value.int <= BigInt(0) || value.int > BigInt(CONFIG.max_size)) throw new Refusal(prefix + "size", { field: name, value: repr(value) });
      return Number(value.int);
    }
    function flag(name, fallback) {
      if (!given(name)) return fallback;
      const value = config.get(name);
      if (typeof value !== "boolean") throw new Refusal(prefix + "flag", { field: name, value: repr(value) });
      return value;
    }
    const has = (name) => config.has(name);
    return { given, size, flag, has, prefix };
  }

  // derive.hf._read: (the config field read, its value) of one size read.
  function readSize(c, read, sizes) {
    for (const name of read.names) if (c.given(name)) return [name, c.size(name)];
    const name = read.names.length ? read.names[0] : read.like;
    if (read.absent !== null && !read.names.some((field) => c.has(field))) return [name, read.absent];
    if (read.like !== null) return [name, read.times * sizes[read.like]];
    if (read.default !== null) return [name, c.size(name, read.default)];
    if (read.required) return [name, c.size(name)];
    return [name, null];
  }

  // derive.hf.Family.read on the page: the family's table applied to a parsed config.
  function readFamily(family, c) {
    const flags = family.flags.map(([name, fallback]) => c.flag(name, fallback));
    const sizes = {};
    const named = {};
    for (const [size, read] of family.sizes) [named[size], sizes[size]] = readSize(c, read, sizes);
    let headDim = null;
    if (family.head_dim !== null) [, headDim] = readSize(c, family.head_dim, sizes);
    for (const [divisor, dividend, headWidth] of family.divides) {
      if (headWidth && headDim !== null) continue;
      if (sizes[dividend] % sizes[divisor]) {
        throw new Refusal(c.prefix + (headWidth && family.head_dim !== null ? "divides_head" : "divides"), {
          field: named[divisor], divisor: String(sizes[divisor]), other: named[dividend],
          dividend: String(sizes[dividend]),
        });
      }
    }
    if (headDim !== null && headDim * sizes.heads === sizes.hidden) headDim = null;
    const form = family.forms[JSON.stringify([...flags, headDim !== null])];
    return { sizes, headDim, form, extra: family.positions ? { s_max: sizes.seq } : {} };
  }

  // derive.hf_families' MoE readers and derive.presets.moe_from_config on the page (DATA.config.moe: their fields,
  // the forms their switches reach, the CLI's lines), in their reading order.
  const MOE = CONFIG.moe;
  const F = MOE.fields;
  const moeRefusal = (failure, values) => new Refusal("moe:" + failure, values || {});
  function layerCount(layers, first) {  // derive.hf_families._layer_indices
    if (layers > MOE.max_layers) throw moeRefusal("layers", { layers: String(layers) });
    return layers - first;
  }
  function topK(c, sizes, experts) {  // derive.hf_families._top_k
    sizes.E = experts;
    if (!c.given(F.top_k)) return;
    sizes.k_E = c.size(F.top_k);
    if (sizes.k_E > experts) throw moeRefusal("top_k", { top_k: String(sizes.k_E), experts: String(experts) });
  }
  const count = (value) => isInt(value) && value.int >= BigInt(0);  // derive.hf_families' int checks (no bool)
  function positive(config, field) {  // derive.inputs.positive_int (an integral float is its int)
    const value = config.has(field) ? config.get(field) : null;
    const number = isInt(value) ? Number(value.int) : isNumber(value) && Number.isInteger(value.float) ? value.float : null;
    if (number === null || !(number > 0)) throw moeRefusal("positive", { field, value: repr(value) });
    return number;
  }
  // the expert count: the first of the family's fields given (derive.hf_fields.Fields.first)
  function experts(c, read) {
    const [, count] = readSize(c, { names: read.experts, absent: null, like: null, default: null, required: true }, {});
    return count;
  }
  function deepseek(c, config, read, sizes, extra) {  // derive.hf_families._deepseek
    for (const size of ["hidden", "heads", "layers"]) sizes[size] = c.size(F[size]);
    sizes.kv_heads = sizes.heads;
    for (const size of ["r_kv", "k_nope", "k_rope", "k_v"]) extra[size] = c.size(F[size]);
    if (c.given(F.q_rank)) extra.r_q = c.size(F.q_rank);
    const [bias, , biasDefault] = read.switches.find(([field]) => field === F.bias);
    c.flag(bias, biasDefault);
    const tied = c.flag(F.tied, false);
    for (const size of ["ffn", "vocab", "seq"]) sizes[size] = c.size(F[size]);
    const first = c.given(F.first_moe) ? config.get(F.first_moe) : { int: BigInt(0) };
    if (!count(first) || Number(first.int) > sizes.layers) {
      throw moeRefusal("first_moe", { layers: String(sizes.layers), value: repr(first) });
    }
    extra.f_E = c.size(read.expert_width);
    topK(c, extra, experts(c, read));
    const shared = c.given(read.shared_width) ? config.get(read.shared_width) : { int: BigInt(0) };
    if (!count(shared)) throw moeRefusal("shared", { value: repr(shared) });
    if (shared.int > BigInt(0)) extra.f_S = Number(shared.int) * extra.f_E;
    extra.L_E = layerCount(sizes.layers, Number(first.int));
    return { sizes, headDim: extra.k_nope + extra.k_rope, tied, allMoE: true, extra };
  }
  function moeShape(read, c, config) {  // derive.hf_families.mixtral, qwen2_moe, qwen3_moe
    if (read.base === null) return deepseek(c, config, read, {}, {});
    const shape = readFamily({ ...read.base, forms: {} }, c);
    const extra = {};
    topK(c, extra, experts(c, read));
    extra.f_E = read.expert_width === null ? shape.sizes.ffn : c.size(read.expert_width);
    if (read.shared_width !== null) extra.f_S = c.size(read.shared_width);
    let allMoE = true;
    if (read.sparse) {  // derive.hf_families._sparse_layers: every layer MoE only with no step and no dense list
      const step = c.size(F.step, MOE.sparse_step);
      const dense = c.given(F.dense_layers) ? config.get(F.dense_layers) : [];
      if (!Array.isArray(dense) || dense.some((i) => !count(i) || Number(i.int) >= shape.sizes.layers)) {
        throw moeRefusal("dense_layers_list", { layers: String(shape.sizes.layers), value: repr(dense) });
      }
      allMoE = step === MOE.sparse_step && !dense.length;
    }
    extra.L_E = layerCount(shape.sizes.layers, read.sparse && !allMoE ? shape.sizes.layers : 0);
    const [, tiedDefault] = read.base.flags.find(([field]) => field === F.tied);
    const tied = c.flag(F.tied, tiedDefault);
    return { sizes: shape.sizes, headDim: shape.headDim, tied, allMoE, extra };
  }
  // A pasted MoE config: derive.presets.moe_from_config's reading and refusals, then the form its switches reach.
  function readMoE(modelType, c, config) {
    const read = MOE.reads[modelType];
    const shape = moeShape(read, c, config);
    const extra = shape.extra;
    if (shape.tied) throw moeRefusal("tied");
    if (!shape.allMoE) throw moeRefusal("dense_layers");
    if (read.base === null) {
      extra.n_g = positive(config, F.groups);
      extra.k_g = positive(config, F.group_top_k);
      if (truthy(config.get(F.mtp))) extra.D = positive(config, F.mtp);
    }
    const switches = read.switches.map(([field, how, fallback]) => (how === "flag" ? c.flag(field, fallback)
      : how === "truthy" ? (config.has(field) ? truthy(config.get(field)) : fallback)
      : how === "given" ? c.given(field) : truthy(config.get(field))));
    const form = extra.L_E > 0 ? MOE.forms[modelType][JSON.stringify(switches)] : undefined;
    return { sizes: shape.sizes, headDim: shape.headDim, form: form === undefined ? null : form, extra };
  }

  // A pasted text -> {model_type, name, dense, sizes, headDim, form, extra} or {error}: the CLI's
  // reading of `--config pasted.json` (derive.hf.load_config, read_shape, from_config).
  function read(text) {
    try {
      const config = parse(text);
      if (!(config instanceof Map)) throw new Refusal("not_object", {});
      const name = truthy(config.get("_name_or_path")) ? pyStr(config.get("_name_or_path")) : CONFIG.name;
      const modelType = config.get("model_type");
      if (modelType === undefined || modelType === null) throw new Refusal("model_type_missing", {});
      if (typeof modelType !== "string" || !CONFIG.known.includes(modelType)) {
        throw new Refusal("model_type_unknown", { value: repr(modelType) });
      }
      const family = CONFIG.families[modelType];
      if (modelType in MOE.reads) return { model_type: modelType, name, dense: false, moe: true, ...readMoE(modelType, fields(config, modelType, "moe:"), config) };
      if (!family) return { model_type: modelType, name, dense: false };
      return { model_type: modelType, name, dense: true, ...readFamily(family, fields(config, modelType)) };
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      return { error: line(error.failure, { path: CONFIG.path, ...error.values }) };
    }
  }

  // A dense config's sizes by symbol (DATA.shape; the head width k, h / a unless head_dim fixes it; its extra sizes).
  function values(read) {
    const out = {};
    for (const [option, symbol] of Object.entries(DATA.shape)) out[symbol] = read.sizes[option.replace("-", "_")];
    out[DATA.head_width] = read.headDim !== null ? read.headDim : Math.trunc(read.sizes.hidden / read.sizes.heads);
    return Object.assign(out, read.extra);
  }

  return { read, line, floatRepr, repr, values };
}
