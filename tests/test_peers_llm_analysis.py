"""llm-analysis 0.2.2's LLMAnalysis methods (tests/reference/peers_llm_analysis.json), reproduced by derive."""
from derive.conventions import CONVENTIONS
from derive.presets import MODELS
from peers_reference import reference, unreproduced

DATA = reference("llm_analysis")


def _result(model, method, **kwargs):
    return next(r["result"] for r in DATA["records"] if r["model"] == model and r["call"].endswith(method)
                and r["parallelism"]["dp_size"] == 1 and all(r["kwargs"].get(k) == v for k, v in kwargs.items()))


def test_every_number_is_reproduced_or_explained_by_a_departure():
    checked, wrong = unreproduced("llm_analysis")
    assert wrong == []
    assert checked == 856


def test_llama_70b_is_50_71_billion_two_matrix_mlp_and_tied_embedding():
    llama = MODELS["llama3-70b"]
    total = _result("llama3-70b", "get_num_params_total")
    assert round(total / 1e9, 2) == 50.71
    # derive's 70.55 B minus one h x f matrix per layer and the output head
    assert total == llama.parameters - llama.layers * llama.hidden * llama.ffn - llama.vocab * llama.hidden


def test_gpt3_flops_are_derive_full():
    gpt = MODELS["gpt3-175b"]
    tokens = gpt.seq
    forward = _result("gpt3-175b", "get_num_flops_fwd_total", batch_size=1, seq_len=gpt.seq)
    backward = _result("gpt3-175b", "get_num_flops_bwd_total", batch_size=1, seq_len=gpt.seq)
    assert int(forward + backward) == tokens * gpt.subs(CONVENTIONS["derive-full"]("gpt"))
    assert int(forward + backward) == tokens * gpt.subs(CONVENTIONS["narayanan"]("gpt"))


def test_state_memory_is_bf16_fp32grad_adam_under_zero():
    per_layer = [r for r in DATA["records"] if r["model"] == "gpt3-175b"
                 and r["call"].endswith("gradient_per_layer") and r["parallelism"]["dp_size"] == 64]
    by_stage = {r["kwargs"]["ds_zero"]: r["result"] for r in per_layer}
    unsharded = _result("gpt3-175b", "gradient_per_layer", ds_zero="NONE")
    assert by_stage["STAGE_1"]["optimizer_state"] * 64 == unsharded["optimizer_state"]
    assert by_stage["STAGE_1"]["gradient"] == unsharded["gradient"]
    assert by_stage["STAGE_2"]["gradient"] * 64 == unsharded["gradient"]
    assert unsharded["optimizer_state"] == 3 * unsharded["gradient"]       # 12 vs 4 bytes per parameter


def test_activations_ignore_gqa_and_swiglu_and_keep_norm_inputs_in_fp32():
    llama = MODELS["llama3-70b"]
    sbh = llama.seq * llama.hidden
    record = next(r for r in DATA["records"] if r["model"] == "llama3-70b"
                  and r["call"].endswith("get_activation_memory_per_layer") and r["kwargs"]["batch_size"] == 1
                  and r["kwargs"]["activation_recomputation"] == "NONE")
    # Korthikanti's GPT layer at f: attention 2sbh + 4 x 2sbh (q, k, v at full h) + sbh mask + flash 2(2sbh + 4as),
    # MLP 2sbh + 2 x 2sbf, two fp32 norm inputs 4sbh each
    attention = 2 * sbh + 8 * sbh + sbh + 2 * (2 * sbh + 4 * llama.heads * llama.seq)
    mlp = 2 * sbh + 4 * llama.seq * llama.ffn
    assert record["result"] == {"attn": attention, "mlp": mlp, "layernorm": 8 * sbh,
                                "total": attention + mlp + 8 * sbh}
