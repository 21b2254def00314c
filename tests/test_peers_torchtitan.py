"""torchtitan 0.3.0's get_nparams_and_flops (tests/reference/peers_torchtitan.json), reproduced by derive."""
from derive.conventions import CONVENTIONS
from derive.presets import MODELS
from peers_reference import reference, unreproduced

DATA = reference("torchtitan")
FLAVORS = {"8B": "llama3-8b", "70B": "llama3-70b", "405B": "llama3-405b"}


def test_every_number_is_reproduced_or_explained_by_a_departure():
    checked, wrong = unreproduced("torchtitan")
    assert wrong == []
    assert checked == 24


def test_torchtitan_is_palm_minus_the_input_embedding_with_no_causal_halving():
    for record in DATA["records"]:
        if record["kwargs"]["flavor"] not in FLAVORS:
            continue
        model = MODELS[FLAVORS[record["kwargs"]["flavor"]]]
        seq = record["kwargs"]["seq_len"]
        palm = model.subs(CONVENTIONS["palm"]("llama"), s=seq)
        assert record["result"]["nparams"] == model.parameters
        assert record["result"]["num_flops_per_token"] == palm - 6 * model.vocab * model.hidden
        assert record["result"]["num_flops_per_token"] == model.subs(CONVENTIONS["torchtitan"]("llama"), s=seq)


def test_flops_grow_by_12_l_h_per_token_of_sequence():
    eight = [r["result"]["num_flops_per_token"] for r in DATA["records"] if r["kwargs"]["flavor"] == "8B"]
    llama = MODELS["llama3-8b"]
    assert eight[1] - eight[0] == 12 * llama.layers * llama.hidden * (8192 - 2048)
