// Parse every math span ($...$ and $$...$$) of a Markdown file with KaTeX; exit 1 if any fails.
// Usage: node tests/katex/check_math.mjs formulas/sheet.md   (prints a JSON summary)
import { readFileSync } from "node:fs";
import katex from "katex";

export function mathSpans(markdown) {
  const spans = [];
  let fenced = false;
  let display = null;
  markdown.split("\n").forEach((line, index) => {
    const lineNo = index + 1;
    if (display === null && /^\s*(```|~~~)/.test(line)) { fenced = !fenced; return; }
    if (fenced) return;
    let i = 0;
    while (i < line.length) {
      if (display !== null) {
        const end = line.indexOf("$$", i);
        if (end < 0) { display.tex += line.slice(i) + "\n"; break; }
        display.tex += line.slice(i, end);
        spans.push(display);
        display = null;
        i = end + 2;
        continue;
      }
      const ch = line[i];
      if (ch === "\\") { i += 2; continue; }
      if (ch === "`") {
        const end = line.indexOf("`", i + 1);
        i = end < 0 ? line.length : end + 1;
        continue;
      }
      if (ch === "$") {
        if (line[i + 1] === "$") { display = { line: lineNo, tex: "", display: true }; i += 2; continue; }
        let j = i + 1;
        while (j < line.length && !(line[j] === "$" && line[j - 1] !== "\\")) j++;
        if (j >= line.length) throw new Error(`line ${lineNo}: $ opens a math span that never closes`);
        spans.push({ line: lineNo, tex: line.slice(i + 1, j), display: false });
        i = j + 1;
        continue;
      }
      i++;
    }
  });
  if (display !== null) throw new Error(`line ${display.line}: $$ opens a display span that never closes`);
  return spans;
}

const path = process.argv[2];
if (!path) { console.error("usage: node check_math.mjs FILE.md"); process.exit(2); }
let spans;
try {
  spans = mathSpans(readFileSync(path, "utf8"));
} catch (error) {
  console.log(JSON.stringify({ spans: 0, failures: [{ line: 0, tex: "", error: error.message }] }));
  process.exit(1);
}
const failures = [];
for (const span of spans) {
  try {
    katex.renderToString(span.tex, { throwOnError: true, displayMode: span.display, strict: "error" });
  } catch (error) {
    failures.push({ line: span.line, tex: span.tex, error: error.message });
  }
}
console.log(JSON.stringify({ katex: katex.version, spans: spans.length, failures }));
process.exit(failures.length ? 1 : 0);
