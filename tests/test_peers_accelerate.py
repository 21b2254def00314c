"""accelerate 1.15.0's estimate-memory (tests/reference/peers_accelerate.json), reproduced by derive."""
import pytest

from derive.peers.accelerate import components
from derive.presets import MODELS
from derive.symbols import N
from derive.views import largest_component
from peers_reference import reference, unreproduced

DATA = reference("accelerate")


def _not_estimated(record, key, value):
    """accelerate's -1: no training estimate for int8 / int4 (printed N/A)."""
    return value == -1


def test_every_number_is_reproduced_or_explained_by_a_departure():
    checked, wrong = unreproduced("accelerate", _not_estimated)
    assert wrong == []
    assert checked == 224


def test_only_quantised_rows_have_no_training_estimate():
    skipped = {r["result"]["dtype"] for r in DATA["records"] if "dtype" in r["result"]
               and -1 in r["result"]["training"].values()}
    assert skipped == {"int8", "int4"}


def _sizes(model):
    return next(r["result"] for r in DATA["records"]
                if r["model"] == model and r["call"].endswith("calculate_maximum_sizes"))


def test_automodel_has_no_lm_head_and_counts_the_rotary_buffers():
    llama = MODELS["llama3-8b"]
    head, head_dim = llama.vocab * llama.hidden, llama.hidden // llama.heads
    # fp32: 4 (N - Vh) + 4 (inv_freq + original_inv_freq, head_dim/2 each)
    assert _sizes("llama3-8b")["total_size"] == 4 * (llama.parameters - head) + 4 * head_dim
    gpt = MODELS["gpt3-175b"]
    assert _sizes("gpt3-175b")["total_size"] == 4 * gpt.parameters        # tied: nothing left out


def test_mixed_precision_split_is_4n_6n_8n_and_the_largest_is_printed():
    usage = next(r["result"] for r in DATA["records"] if r["model"] == "llama3-70b"
                 and r["kwargs"].get("mixed_precision") == "bfloat16")
    fp32 = _sizes("llama3-70b")["total_size"]
    assert (usage["model"], usage["gradients"], usage["optimizer"]) == (fp32, fp32 * 3 // 2, 2 * fp32)
    per_parameter = components(mixed=True)
    assert [per_parameter[k] for k in ("model", "gradients", "optimizer")] == [4, 6, 8]
    assert largest_component(usage) == ("step", 2 * fp32)   # step = optimizer: the tie goes to 'step'


@pytest.mark.parametrize("model, names", [("llama3-70b", ["embed_tokens"]), ("llama3-405b", None)])
def test_largest_layer_is_the_embedding_or_a_whole_layer(model, names):
    sizes = _sizes(model)
    if names:
        assert sizes["largest_layer_names"] == names
    else:
        assert all(name.startswith("layers.") for name in sizes["largest_layer_names"])


def test_largest_component_rejects_bad_input():
    with pytest.raises(ValueError, match="components"):
        largest_component({})
    with pytest.raises(ValueError, match="components"):
        largest_component({"model": N})
