"""calflops 0.3.2 and FlopCounterMode on small HF models (tests/reference/peers_calflops.json), reproduced by derive."""
from derive.conventions import CONVENTIONS
from derive.peers import model_of
from peers_reference import reference, unreproduced

DATA = reference("calflops")


def _pairs(model, attn, batch=1):
    found = {r["call"].split(".")[-1]: r for r in DATA["records"]
             if r["model"] == model and r["attn"] == attn and r["batch"] == batch}
    return found["calculate_flops"]["result"], found["FlopCounterMode"]["result"]


def test_every_number_is_reproduced_or_explained_by_a_departure():
    checked, wrong = unreproduced("calflops")
    assert wrong == []
    assert checked == 72


def test_flop_counter_is_derive_full_eager_and_misses_cpu_sdpa():
    model = model_of("tiny-llama", DATA["models"])
    tokens = model.seq
    full = tokens * model.subs(CONVENTIONS["derive-full"]("llama"))
    scores = tokens * 12 * model.layers * model.seq * model.hidden
    assert _pairs("tiny-llama", "eager")[1]["total"] == full
    assert _pairs("tiny-llama", "sdpa")[1]["total"] == full - scores


def test_calflops_adds_softmax_and_silu_elements_and_misses_sdpa():
    model = model_of("tiny-llama", DATA["models"])
    tokens, layers = model.seq, model.layers
    forward = _pairs("tiny-llama", "eager")[1]["total"] // 3
    softmax = tokens * layers * model.heads * model.seq
    silu = tokens * layers * model.ffn
    assert _pairs("tiny-llama", "eager")[0]["flops"] == 3 * (forward + softmax + silu)
    sdpa_forward = _pairs("tiny-llama", "sdpa")[1]["total"] // 3
    assert _pairs("tiny-llama", "sdpa")[0]["flops"] == 3 * (sdpa_forward + silu)
