"""Size of formulas/index.html and how fast it shows the figures, in Debian's headless chromium.

Run: ``.venv/bin/python bench/web_page.py [--changes 200]``. Prints the page's
bytes (and gzip bytes), the time from navigation start until the figures of a
link are shown and until the sheet's math is typeset, and the median / 95th
percentile time from an input event to updated figures (parse, the generated
functions, formatting and DOM updates, as the page's performance.measure
'derive-figures' records it; layout and paint excluded) and of the whole handler,
for typed changes and for pasting each shipped config.json of the page's families
(JSON parsed, derive.hf's table applied, figures computed and shown). First, the planner's card on
issue 26's question (Llama 3 405B, 16,384 H100s, 16M tokens per step at s = 8192): the first click on
its button and the median of the next ``--plans`` (performance.measure 'derive-plan': the candidates,
their memory and the step time of those that fit, ranked; and the whole handler, the table built).
``--page`` times another render (default: formulas/index.html).
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from derive.hf import published_config, published_names
from derive.hf_families import DENSE

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "formulas" / "index.html"
LINK = "?model=70b&tokens=4194304&gpus=1024&step-time=4.5"
#: The planner's question of issue 26: Llama 3 405B on 16,384 H100s, 16M tokens per step at s = 8192.
PLAN_LINK = "?model=llama3-405b&gpu=h100&gpus=16384&global-batch=2048&seq=8192"
#: One click on the planner's button: the planning itself (performance.measure 'derive-plan') and the whole
#: handler (the table's rows built too), and the ranked layouts found.
PLAN = """
performance.clearMeasures('derive-plan');
const start = performance.now();
document.getElementById('plan-button').click();
return [performance.now() - start, performance.getEntriesByName('derive-plan')[0].duration,
        document.querySelectorAll('#plan-rows tr').length];
"""

#: One input change: type a value into a field and dispatch the event the form listens to.
CHANGE = """
const field = document.querySelector('input[name="' + arguments[0] + '"]');
field.value = arguments[1];
const start = performance.now();
field.dispatchEvent(new Event('input', {bubbles: true}));
const shown = document.querySelector('output[data-key="state.resident"]').dataset.value;
return [performance.now() - start, shown];
"""

#: One paste: the config field's text replaced, then the input event a paste fires.
PASTE = """
const field = document.querySelector('textarea[name="config"]');
field.value = arguments[0];
const start = performance.now();
field.dispatchEvent(new Event('input', {bubbles: true}));
const shown = document.querySelector('output[data-key="state.resident"]').dataset.value;
return [performance.now() - start, shown];
"""


def report(label: str, times: list[float]) -> None:
    """Median, 95th percentile and maximum of ``times`` (ms)."""
    times = sorted(times)
    print(f"{label}: median {statistics.median(times):.3f} ms, p95 {times[int(0.95 * len(times))]:.3f} ms, "
          f"max {times[-1]:.3f} ms over {len(times)} runs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--plans", type=int, default=5, help="clicks on the planner's button")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page (default: formulas/index.html)")
    args = parser.parse_args()
    page = args.page
    data = page.read_bytes()
    print(f"index.html: {len(data):,} bytes ({len(gzip.compress(data, 9)):,} gzip -9)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        browser.get(page.as_uri() + PLAN_LINK)
        clicks = [browser.execute_script(PLAN) for _ in range(args.plans)]
        print(f"planning ({PLAN_LINK}), first click: derive plan's search, memory and step times "
              f"{clicks[0][1]:.0f} ms, whole click handler {clicks[0][0]:.0f} ms ({clicks[0][2]} ranked layouts shown)")
        report("  again: planning", [c[1] for c in clicks[1:]])
        report("  again: whole click handler", [c[0] for c in clicks[1:]])
        browser.get(page.as_uri() + LINK)
        timing = browser.execute_script(
            "const mark = (name) => performance.getEntriesByName(name)[0].startTime;"
            "const n = performance.getEntriesByType('navigation')[0];"
            "return [mark('derive-figures-shown'), mark('derive-math-typeset'), n.domInteractive];")
        print(f"load ({LINK}) from navigation start: figures shown {timing[0]:.0f} ms, "
              f"the sheet's math typeset {timing[1]:.0f} ms, DOM interactive {timing[2]:.0f} ms")
        fields = [("micro-batch", str(1 + i % 16)) for i in range(args.changes // 2)]
        fields += [("precision", ("bf16", "fp32", "fp16", "bf16-fp32grad")[i % 4])
                   for i in range(args.changes - len(fields))]
        browser.execute_script("performance.clearMeasures('derive-figures');")
        handler = [browser.execute_script(CHANGE, name, value)[0] for name, value in fields]
        figures = browser.execute_script(
            "return performance.getEntriesByName('derive-figures').map((m) => m.duration);")
        report("input -> figures updated (parse, generated functions, DOM)", figures)
        report("whole input handler (also the address bar's replaceState)", handler)
        configs = [json.dumps(published_config(name), indent=2) for name in published_names()
                   if published_config(name)["model_type"] in DENSE]
        pastes = [configs[i % len(configs)] for i in range(args.changes)]
        browser.execute_script("performance.clearMeasures('derive-figures');")
        handler = [browser.execute_script(PASTE, text)[0] for text in pastes]
        figures = browser.execute_script(
            "return performance.getEntriesByName('derive-figures').map((m) => m.duration);")
        print(f"pasting the {len(configs)} shipped configs of the page's families "
              f"({min(map(len, configs)):,}-{max(map(len, configs)):,} characters each):")
        report("  paste -> figures shown (JSON, derive.hf's table, generated functions, DOM)", figures)
        report("  whole input handler (also the link, which carries the text)", handler)
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
