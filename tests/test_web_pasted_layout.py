"""A pasted config.json gets the layout card: ``derive comm --config pasted.json --json``'s figures, in a real browser.

The paste's ledger is its architecture's (derive.render.page_comm.pasted_forms: the report form config.js reads
-> the ledger of that architecture); every per_rank_bytes_per_step.* and layout.* key the page shows must be comm's
for a file holding the pasted text, exactly (integers), the copied command must be that command, and a bad layout
gets comm's own line. Same browser set-up as test_web_browser.py.
"""
import json
import shlex

import pytest
from test_web_browser import browser, calculator, errors, open_page, page  # noqa: F401 (fixtures)
from test_web_layout import COMM_OPTIONS, assert_same, flattened, page_values, sequence_parallel

from derive.comm import run as comm_run
from derive.hf import published_config
from derive.options.messages import UsageError
from derive.render.page_config import PASTED

pytestmark = pytest.mark.xdist_group("web_browser")

#: (a shipped config, the fields changed, pasted; the layout): biases in the attention (Qwen2.5), learned positions
#: and GELU (GPT-2), soft-capping and a fixed head width (Gemma 2), QK norms (OLMo 2), tied embeddings (Qwen3 0.6B),
#: and flags no page name has (Llama 3 with biases and tied embeddings, GPT-NeoX with a sequential residual): a
#: ledger the paste adds.
PASTES = [
    ("qwen2.5-7b", {}, {"gpus": "16", "tp": "4", "pp": "2", "global-batch": "32"}),
    ("gpt2", {}, {"gpus": "8", "tp": "2", "pp": "2", "zero": "1", "global-batch": "16", "sequence-parallel": "1"}),
    ("gemma-2-9b", {}, {"dp": "8", "cp": "2", "seq": "4096", "recompute": "full"}),
    ("olmo-2-1124-7b", {}, {"gpus": "64", "tp": "2", "pp": "4", "vp": "2", "global-batch": "64", "zero": "3"}),
    ("qwen3-0.6b", {}, {"gpus": "4", "tp": "2", "micro-batch": "2", "global-batch": "8", "precision": "fp8-delayed"}),
    ("meta-llama-3-8b", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True},
     {"gpus": "32", "tp": "4", "pp": "2", "global-batch": "64", "recompute": "selective"}),
    ("gpt-neox-20b", {"use_parallel_residual": False}, {"gpus": "16", "tp": "2", "pp": "4", "zero": "1"}),
]


def comm_of_paste(text: str, options: dict[str, str], folder) -> dict[str, object]:
    """derive comm --config pasted.json --json with ``options``, the file holding ``text``."""
    path = folder / PASTED
    path.write_text(text)
    argv = [f"--config={path}", *(f"--{o}={options[o]}" for o in COMM_OPTIONS if o in options),
            *sequence_parallel(options)]
    return {key: value for key, value in flattened(json.loads(comm_run([*argv, "--json"]))).items() if key != "seq"}


@pytest.mark.parametrize("name, changed, layout", PASTES, ids=[name for name, _, _ in PASTES])
def test_a_pasted_config_gets_comms_figures(browser, calculator, tmp_path, name, changed, layout):
    text = json.dumps({**published_config(name), **changed})
    open_page(browser, calculator, {"config": text, **layout})
    assert errors(browser) == {}
    shown = page_values(browser)
    expected = comm_of_paste(text, layout, tmp_path)
    keys = {key for key in expected if key.startswith("per_rank_bytes_per_step.")}
    keys |= {"layout.gpus", "layout.dp", "layout.micro_batches"}
    assert keys <= set(shown)
    assert_same(shown, {key: expected[key] for key in keys}, layout)
    # the copied command is comm's for that file (the step card's: tests/test_web_pasted_step.py)
    words = shlex.split(browser.find_element("id", "comm-command").text)
    assert words[:2] == ["python", "-m"] and f"--config={PASTED}" in words
    (tmp_path / PASTED).write_text(text)
    argv = [word.replace(f"--config={PASTED}", f"--config={tmp_path / PASTED}") for word in words[3:]]
    assert {key: value for key, value in flattened(json.loads(comm_run([*argv, "--json"]))).items()
            if key in keys} == {key: expected[key] for key in keys}


def test_a_bad_layout_of_a_paste_gets_comms_line(browser, calculator, tmp_path):
    text = json.dumps(published_config("qwen2.5-7b"))  # 28 heads, 4 KV heads: t = 8 does not divide them
    layout = {"tp": "8", "dp": "2"}
    with pytest.raises(UsageError) as refused:
        comm_of_paste(text, layout, tmp_path)
    open_page(browser, calculator, {"config": text, **layout})
    assert errors(browser) == {"tp": " ".join(str(refused.value).split())}
    assert not any(key.startswith("per_rank_bytes_per_step.") for key in page_values(browser))
