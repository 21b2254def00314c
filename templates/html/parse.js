// The calculator's fields parsed as the CLI parses its options (hand-written; derive.render.web
// inlines it before calculator.js). Pure functions of the text typed and the page's data, so
// tests/test_web.py runs them in Node against derive's own command line.
"use strict";
function DeriveParse(DATA) {
  // The CLI's own patterns (derive.cli): Python's int() and float() syntax in ASCII, budget sizes.
  const PY_INT = new RegExp("^(?:" + DATA.integer_pattern + ")$");
  const PY_FLOAT = new RegExp("^(?:" + DATA.float_pattern + ")$");
  const BUDGET = new RegExp("^(?:" + DATA.budget_pattern + ")$");
  const EDGE_SPACE = new RegExp("^(?:" + DATA.space + ")+|(?:" + DATA.space + ")+$", "g");
  const HEX = DATA.display;
  const FORMAT = DATA.python_format;
  const LEAD = FORMAT.leading_digits;

  // derive.cli.hardware_name: ASCII whitespace around dropped, lower case if the rest is ASCII.
  function hardwareName(text) {
    const name = text.replace(EDGE_SPACE, "");
    return new TextEncoder().encode(name).length === name.length ? name.toLowerCase() : name;
  }

  // An integer of PY_INT exactly, as int() reads it.
  function pyInteger(text) {
    return BigInt(text.trim().replace(/_/g, ""));
  }

  // Whether digits cut off as `rest` round `kept` up: past half, or half on the exact value and odd (ties to even).
  function roundsUp(kept, rest) {
    const half = "5".padEnd(rest.length, "0");
    return rest > half || (rest === half && "13579".includes(kept.slice(-LEAD)));
  }

  // digits (a string) + up (a boolean) as a digit string of at least the same length.
  function increment(digits, up) {
    return (BigInt(digits) + BigInt(up)).toString().padStart(digits.length, "0");
  }

  // Python's format(value, ".Ng") and format(value, ".N%") for a finite or infinite value >= 0.
  function pyFormat(value, spec) {
    const [, count, type] = /^\.(\d+)([g%])$/.exec(spec);
    const precision = Number(count);
    const scaled = type === "%" ? value * FORMAT.percent : value;
    if (!Number.isFinite(scaled)) return "inf" + (type === "%" ? "%" : "");
    if (type === "%") {
      const exact = scaled.toFixed(FORMAT.exact_digits);
      if (exact.includes("e")) return BigInt(scaled).toString() + (precision ? "." + "0".repeat(precision) : "") + "%";
      const [whole, fraction] = exact.split(".");
      const kept = whole + fraction.slice(0, precision);
      const digits = increment(kept, roundsUp(kept, fraction.slice(precision))).padStart(precision + LEAD, "0");
      const point = digits.length - precision;
      return digits.slice(0, point) + (precision ? "." + digits.slice(point) : "") + "%";
    }
    const [mantissa, power] = value.toExponential(FORMAT.exact_digits).split("e");
    const all = mantissa.replace(".", "");
    const kept = all.slice(0, precision);
    const rounded = increment(kept, roundsUp(kept, all.slice(precision)));
    const exponent = Number(power) + rounded.length - kept.length;
    const digits = rounded.slice(0, precision);
    const trim = (text) => text.replace(/0+$/, "");
    if (FORMAT.fixed_from <= exponent && exponent < precision) {
      const whole = exponent >= 0 ? digits.slice(0, exponent + LEAD) : "0";
      const fraction = trim(exponent >= 0 ? digits.slice(exponent + LEAD) : "0".repeat(-exponent - LEAD) + digits);
      return whole + (fraction ? "." + fraction : "");
    }
    const fraction = trim(digits.slice(LEAD));
    return digits.slice(0, LEAD) + (fraction ? "." + fraction : "") + "e" + (exponent < 0 ? "-" : "+") +
      String(Math.abs(exponent)).padStart(FORMAT.exponent_digits, "0");
  }

  function pyNumber(text) {
    const plain = text.trim().replace(/_/g, "").toLowerCase();
    const sign = plain.startsWith("-") ? -Infinity : Infinity;
    const bare = plain.replace(/^[+-]/, "");
    if (bare === "inf" || bare === "infinity") return sign;
    if (bare === "nan") return NaN;
    return Number(plain);
  }

  // What Python's str.isprintable() calls unprintable (Unicode categories Cc Cf Cs Co Cn Zl Zp Zs),
  // and so repr() escapes, the space apart.
  const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

  // Python's repr() of a str, as the CLI's messages show the value typed.
  function pyRepr(text) {
    const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
    let out = quote;
    for (const char of text) {
      const code = char.codePointAt(0);
      if (char === "\\" || char === quote) out += "\\" + char;
      else if (char === "\n") out += "\\n";
      else if (char === "\r") out += "\\r";
      else if (char === "\t") out += "\\t";
      else if (char !== " " && UNPRINTABLE.test(char)) {
        const [prefix, width] = HEX.escapes.find(([, , below]) => code < below);
        out += "\\" + prefix + code.toString(HEX.hex_base).padStart(width, "0");
      } else out += char;
    }
    return out + quote;
  }

  // The value typed as the CLI's argparse messages show it: shortened past DATA.shown.longest characters.
  function shown(text) {
    const chars = Array.from(text);
    const limits = DATA.shown;
    if (chars.length <= limits.longest) return text;
    return chars.slice(0, limits.head).join("") + "..." + chars.slice(-limits.tail).join("") +
      " (" + chars.length + " characters)";
  }

  // A field's CLI message with its placeholders ({text}, {name}, {heads} ...) filled in; runs of
  // spaces become one, as the CLI prints its error line.
  function message(field, failure, values) {
    let text = field.messages[failure];
    for (const [name, value] of Object.entries(values)) text = text.split("{" + name + "}").join(value);
    return text.replace(/ +/g, " ");
  }

  // One field's text -> {value} or {error}; "" means "not given" (the CLI's default applies).
  function parseField(field, text) {
    const argparsed = ["count", "stage", "fraction", "seconds", "gpu"].includes(field.kind);
    const typed = pyRepr(argparsed ? shown(text) : text);
    const fail = (failure, extra) => ({ error: message(field, failure, { text: typed, ...extra }) });
    if (text === "") return { value: null };
    const name = hardwareName(text);
    const bounds = field.bounds;
    switch (field.kind) {
      case "model":
        if (!field.choices.includes(text)) return fail("unknown");
        return { value: DATA.aliases[text] || text };
      case "choice":
        return field.choices.includes(text) ? { value: text } : fail("unknown");
      case "flag":
        return field.choices.includes(text) ? { value: text === field.choices[0] } : fail("unknown");  // on, off
      case "gpu":
        return field.choices.includes(name) ? { value: name } : fail("unknown");
      case "count": {
        if (!PY_INT.test(text)) return fail("syntax");
        const number = pyInteger(text);
        return number > BigInt(bounds.above) && number <= BigInt(bounds.at_most) ? { value: Number(number) } : fail("range");
      }
      case "stage": {
        if (!PY_INT.test(text)) return fail("syntax");
        const number = pyInteger(text);
        return DATA.zero_stages.some((stage) => BigInt(stage) === number) ? { value: Number(number) } : fail("range");
      }
      case "fraction": {
        if (!PY_FLOAT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return number > bounds.above && number <= bounds.at_most ? { value: number } : fail("range");
      }
      case "seconds": {
        if (!PY_FLOAT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return number > bounds.above && number <= bounds.at_most ? { value: number } : fail("range");
      }
      case "peak": {
        if (field.choices.includes(name)) return { value: DATA.peaks[name] };
        if (!PY_FLOAT.test(text)) return fail("unknown");
        const number = pyNumber(text);
        return number > bounds.above && number <= bounds.at_most ? { value: number } : fail("range");
      }
      case "budget": {
        if (field.choices.includes(name)) return { value: DATA.budgets[name] };
        if (DATA.hardware.includes(name)) return fail("hardware", { name });
        const match = BUDGET.exec(text);
        if (!match) return fail("syntax");
        const [, amount, unit] = match;
        if (!(unit in DATA.byte_units)) return fail("syntax");
        // size = bytes / scale exactly, as the CLI's Fraction
        const [whole, fraction = ""] = amount.split(".");
        const scale = BigInt(FORMAT.decimal_base) ** BigInt(fraction.length);
        const bytes = BigInt(whole + fraction) * BigInt(DATA.byte_units[unit]);
        if (!(bytes > BigInt(bounds.above) * scale)) return fail("range");
        if (bytes < BigInt(bounds.at_least) * scale) return fail("small");
        if (bytes / scale > BigInt(bounds.at_most)) return fail("large");
        return { value: Number(bytes / scale) };
      }
    }
    throw new Error("unknown field kind " + field.kind);
  }

  return { parseField, message, pyRepr, pyFormat, hardwareName };
}
