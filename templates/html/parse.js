// The calculator's fields parsed as the CLI parses its options (hand-written; derive.render.web
// inlines it before calculator.js). Pure functions of the text typed and the page's data, so
// tests/test_web.py runs them in Node against derive's own command line.
"use strict";
function DeriveParse(DATA) {
  // Python's int() and float() syntax for a string (PEP 515 underscores allowed; ASCII digits).
  const DIGITS = "\\d(?:_?\\d)*";
  const PY_INT = new RegExp("^\\s*[+-]?" + DIGITS + "\\s*$");
  const PY_FLOAT = new RegExp("^\\s*[+-]?(?:(?:" + DIGITS + "\\.(?:" + DIGITS + ")?|\\.(?:" + DIGITS +
    ")|" + DIGITS + ")(?:[eE][+-]?" + DIGITS + ")?|inf|infinity|nan)\\s*$", "i");
  const BUDGET = new RegExp("^(?:" + DATA.budget_pattern + ")$");
  const HEX = DATA.display;

  function pyNumber(text) {
    const plain = text.trim().replace(/_/g, "").toLowerCase();
    const sign = plain.startsWith("-") ? -Infinity : Infinity;
    const bare = plain.replace(/^[+-]/, "");
    if (bare === "inf" || bare === "infinity") return sign;
    if (bare === "nan") return NaN;
    return Number(plain);
  }

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
      else if (code < " ".codePointAt(0) || (code >= "\x7f".codePointAt(0) && code <= "\xa0".codePointAt(0))) {
        out += "\\x" + code.toString(HEX.hex_base).padStart(HEX.hex_width, "0");
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
    const argparsed = ["count", "stage", "fraction", "seconds"].includes(field.kind);
    const typed = pyRepr(argparsed ? shown(text) : text);
    const fail = (failure, extra) => ({ error: message(field, failure, { text: typed, ...extra }) });
    if (text === "") return { value: null };
    const name = text.trim().toLowerCase();
    const bounds = field.bounds;
    switch (field.kind) {
      case "model":
        if (!field.choices.includes(text)) return fail("unknown");
        return { value: DATA.aliases[text] || text };
      case "choice":
        return field.choices.includes(text) ? { value: text } : fail("unknown");
      case "count": {
        if (!PY_INT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return number > bounds.above && number <= bounds.at_most ? { value: number } : fail("range");
      }
      case "stage": {
        if (!PY_INT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return DATA.zero_stages.includes(number) ? { value: number } : fail("range");
      }
      case "fraction": {
        if (!PY_FLOAT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return number > bounds.above && number <= bounds.at_most ? { value: number } : fail("range");
      }
      case "seconds": {
        if (!PY_FLOAT.test(text)) return fail("syntax");
        const number = pyNumber(text);
        return number > bounds.above && Number.isFinite(number) ? { value: number } : fail("range");
      }
      case "peak": {
        if (field.choices.includes(name)) return { value: DATA.peaks[name] };
        if (!PY_FLOAT.test(text)) return fail("unknown");
        const number = pyNumber(text);
        return number > bounds.above && Number.isFinite(number) ? { value: number } : fail("range");
      }
      case "budget": {
        if (field.choices.includes(name)) return { value: DATA.budgets[name] };
        if (DATA.hardware.includes(name)) return fail("hardware", { name });
        const match = BUDGET.exec(text);
        if (!match) return fail("syntax");
        const [, amount, unit] = match;
        if (!(unit in DATA.byte_units)) return fail("syntax");
        const size = pyNumber(amount) * DATA.byte_units[unit];
        if (!(size > bounds.above)) return fail("range");
        if (size < bounds.at_least) return fail("small");
        return { value: Math.floor(size) };
      }
    }
    throw new Error("unknown field kind " + field.kind);
  }

  return { parseField, message, pyRepr };
}
