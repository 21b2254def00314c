"""The generated MoE / MLA / dense tables against published totals (Megatron-LM's printed counts,
shared/reference/README.md: Mixtral 8x7B 46 702 792 704, DeepSeek-V3 671 026 404 352) and hand sums."""
from derive.architectures.decoder import LLAMA, Layout
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE
from derive.architectures.tables import active_parameter_count, model_rows, parameter_count
from derive.symbols import E, L, L_E, V, a, f, f_E, f_S, g, h, k, k_E, k_nope, k_rope, k_v, r_kv, r_q

DEEPSEEK_V3 = {h: 7168, L: 61, L_E: 58, V: 129280, a: 128, r_q: 1536, r_kv: 512, k_nope: 128,
               k_rope: 64, k_v: 128, f: 18432, E: 256, f_E: 2048, f_S: 2048, k_E: 8}
MIXTRAL = {h: 4096, L: 32, L_E: 32, V: 32000, a: 32, g: 8, k: 128, E: 8, f_E: 14336, k_E: 2,
           f: 14336}


def deepseek_layout() -> Layout:
    return Layout(moe=MoE(shared="mlp.shared_experts", router_bias="buffer",
                          router_bias_name="e_score_correction_bias"), mla=MLA())


def test_deepseek_v3_total_and_active():
    layout = deepseek_layout()
    assert parameter_count(layout).xreplace(DEEPSEEK_V3) == 671_026_404_352
    # DeepSeek-V3 report, Table 1 / abstract: 37B activated; Megatron-style exact count
    assert active_parameter_count(layout).xreplace(DEEPSEEK_V3) == 37_552_282_624


def test_router_bias_buffer_is_in_the_table_but_not_in_n():
    rows = model_rows(deepseek_layout())
    bias = rows["mlp.gate.e_score_correction_bias"]
    assert bias.has("buffer") and bias.count == L_E
    with_buffer = rows.numel().xreplace(DEEPSEEK_V3)
    assert with_buffer - 671_026_404_352 == 58 * 256


def test_mixtral_total_and_active_by_hand():
    layout = Layout(moe=MoE())
    assert parameter_count(layout).xreplace(MIXTRAL) == 46_702_792_704
    # by hand: attention 2*4096*(4096+1024) per layer, 2 experts of 3*4096*14336, router, norms
    per_layer = 2 * 4096 * (4096 + 1024) + 2 * 3 * 4096 * 14336 + 4096 * 8 + 2 * 4096
    assert active_parameter_count(layout).xreplace(MIXTRAL) == (
        32 * per_layer + 2 * 32000 * 4096 + 4096)


def test_mla_without_query_compression():
    rows = model_rows(Layout(mla=MLA(q_lora=False)))
    assert "self_attn.q_proj.weight" in rows.names and "self_attn.q_a_proj.weight" not in rows.names
    assert rows["self_attn.q_proj.weight"].shape == (h, a * (k_nope + k_rope))


def test_default_layout_is_the_llama_table():
    assert parameter_count(Layout()).xreplace({k: h / a}) == parameter_count(LLAMA)
