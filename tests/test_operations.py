"""The operation registry: each saved row traced to its operation and its coefficient of sbh."""
import pytest
import sympy as sp

from derive.architectures.operations.mlp import META_SWIGLU, hf_gated_naming
from derive.architectures.operations.registry import REGISTRY, Step, per_sbh, step, walk
from derive.architectures.saved import gpt_layer_steps, llama_layer_steps
from derive.symbols import FFN_4H, a, h, s


def _korthikanti(row):
    return not row.has("norm_statistics")


def test_the_34_row_by_row():
    # Korthikanti et al. 2022, section 4.1 (Table 2's "no parallelism" row): per layer
    # sbh(34 + 5as/h) at f = 4h, written out by hand term by term
    rows = per_sbh(gpt_layer_steps(), _korthikanti, FFN_4H)
    by_name = {name: (operation, coefficient) for operation, name, coefficient in rows}
    assert by_name["layer input"] == ("norm", 2)
    assert by_name["QKV projection input"] == ("attention", 2)
    assert [by_name[n][1] for n in ("Q", "K", "V")] == [2, 2, 2]
    assert by_name["softmax output"] == ("attention", 2 * a * s / h)
    assert by_name["attention dropout mask"] == ("attention", a * s / h)
    assert by_name["attention dropout output"] == ("attention", 2 * a * s / h)
    assert by_name["output projection input"] == ("attention", 2)
    assert by_name["attention-output dropout mask"] == ("dropout", 1)
    assert by_name["post_attention_layernorm input"] == ("norm", 2)
    assert by_name["fc1 input"] == ("mlp", 2)
    assert by_name["GELU input"] == ("mlp", 8)
    assert by_name["fc2 input"] == ("mlp", 8)
    assert by_name["MLP dropout mask"] == ("dropout", 1)
    assert len(rows) == 15
    assert sp.simplify(sum(c for _, _, c in rows) - (34 + 5 * a * s / h)) == 0


def test_the_34_by_operation():
    # by hand: norm 2 + 2 = 4; attention 2 (QKV input) + 6 (Q, K, V) + 2 (projection input) = 10
    # plus 5as/h (2 + 1 + 2 of the scores); dropout 1 + 1 = 2; MLP 2 + 8 + 8 = 18
    totals = {}
    for operation, _, coefficient in per_sbh(gpt_layer_steps(), _korthikanti, FFN_4H):
        totals[operation] = totals.get(operation, 0) + coefficient
    assert {op: sp.simplify(v) for op, v in totals.items()} == {
        "norm": 4, "attention": 10 + 5 * a * s / h, "dropout": 2, "mlp": 18}


def test_swiglu_declared_once_named_twice():
    # Meta's and transformers' SwiGLU: the same five tensors, in their own names and order
    meta = walk((step("mlp", "gated", naming=META_SWIGLU),))
    hf = walk((step("mlp", "gated", naming=hf_gated_naming("x")),))
    shapes = lambda rows: sorted(str((r.shape, r.dtype, sorted(r.tags))) for _, r in rows)
    assert shapes(meta) == shapes(hf)
    assert [r.name for _, r in meta] == ["w1/w3 input", "gate (w1 output)", "SiLU output",
                                         "up (w3 output)", "w2 input"]
    assert [r.name for _, r in hf] == ["gate/up input", "gate (gate_proj output)",
                                       "up (up_proj output)", "SiLU output", "down_proj input"]


def test_every_llama_row_comes_from_a_registered_operation():
    for profile in ("eager", "fused", "hf-sdpa", "hf-eager"):
        operations = {operation for operation, _ in walk(llama_layer_steps(profile))}
        assert operations <= set(REGISTRY) and {"norm", "attention", "mlp"} <= operations


@pytest.mark.parametrize("bad, field", [(Step("loss", "eager"), "operation"),
                                        (Step("norm", "fp8"), "implementation")])
def test_unknown_operation_or_implementation(bad, field):
    with pytest.raises(ValueError, match=field):
        bad.saved()


def test_llama_parameters_declared_once_named_twice():
    # Meta's names (the LLAMA family layout's layer) and transformers' (the default config Layout's)
    # are one walk of the same declarations: by hand, 2 norms [h], q/o [h, a k],
    # k/v [h, g k], gate/up [h, f], down [f, h]
    from derive.architectures.decoder import LLAMA, Layout
    from derive.architectures.tables import layer_parameters
    from derive.symbols import f, g, k
    shapes = lambda rows: sorted(str(row.shape) for row in rows)
    meta, hf = layer_parameters(LLAMA, head_dim=k), layer_parameters(Layout())
    assert shapes(meta) == shapes(hf) == sorted(str(shape) for shape in [
        (h,), (h,), (h, a * k), (h, g * k), (h, g * k), (a * k, h), (h, f), (h, f), (f, h)])
    assert meta.names[1] == "attention.wq" and hf.names[2] == "self_attn.q_proj.weight"


def test_attention_brings_the_score_gemms():
    # QK^T and PV come from the attention operation's declaration, not from the layer's caller
    from derive.architectures.operations.registry import score_table
    scores = score_table(gpt_layer_steps(), "causal")
    assert scores.names == ("attention.scores (Q K^T)", "attention.context (P V)")
    assert all(gemm.count == a and gemm.n * gemm.k == s / 2 * h / a for gemm in scores)


def test_deepseek_v3_fused_layer_by_operation():
    # one DeepSeek-V3 MoE layer (MLA with a query latent, 256 routed experts, one shared expert)
    # under Megatron + TE, b = 1, s = 4096, at its config's sizes (DeepSeek-V3 report, Table 1 /
    # config.json): every saved row walked, summed per operation and per token by hand
    from derive.architectures.decoder import moe_layout
    from derive.architectures.tables import layer_parameters, layer_steps
    from derive.architectures.saved import fused_layer_steps
    from derive.symbols import E, b, f_E, f_S, k_E, k_nope, k_rope, k_v, r_kv, r_q
    layout = moe_layout("mla", shared=True, router="sigmoid-grouped")
    at = {h: 7168, a: 128, k_nope: 128, k_rope: 64, k_v: 128, r_q: 1536, r_kv: 512, E: 256,
          k_E: 8, f_E: 2048, f_S: 2048, b: 1, s: 4096}
    tokens = 4096
    per_token = {
        # two fused RMSNorms: a bf16 input [h] and an fp32 rstd per token each
        "norm": 2 * (7168 * 2 + 4),
        # the input both down projections read, q / kv latent norms (input, rstd) and up-projection
        # inputs, q and k of 128 heads x 192, v and the output of 128 x 128, fp32 logsumexp per head
        "attention": 7168 * 2 + (1536 * 2 + 4 + 1536 * 2) + (512 * 2 + 4 + 512 * 2)
        + 2 * 128 * 192 * 2 + 2 * 128 * 128 * 2 + 128 * 4,
        # its bf16 input, fp32 scores and a bool routing map over 256 experts
        "router": 7168 * 2 + 256 * 4 + 256,
        # int32 row_id_map [2E + 1]; 8 copies of the token, their fp32 probabilities,
        # fc1's output [2 f_E] and fc2's input [f_E] per copy
        "experts": 513 * 4 + 8 * (7168 * 2 + 4 + 2 * 2048 * 2 + 2048 * 2),
        "shared_experts": 2 * 2048 * 2 + 2048 * 2,
    }
    steps = fused_layer_steps(layout, moe=True)
    assert [each.operation for each in steps] == ["norm", "attention", "norm", "router", "experts",
                                                  "shared_experts"]
    totals = {}
    for operation, kept in walk(steps):
        totals[operation] = totals.get(operation, 0) + int(kept.bytes.subs(at))
    assert totals == {name: tokens * value for name, value in per_token.items()}
    assert sum(totals.values()) == tokens * 458548
    # its parameters by operation, walked the same way: the MLA block 187,107,328 (q_a [h, r_q],
    # its norm, q_b [r_q, a 192], kv_a [h, r_kv + 64], its norm, kv_b [r_kv, a 256], o [a 128, h]),
    # the router [h, E], 256 experts and one shared expert of three [h, 2048] matrices
    params = {}
    for each in layer_steps(layout, moe_layer=True):
        params[each.operation] = params.get(each.operation, 0) + sum(
            int(row.numel.subs(at)) for row in each.parameters())
    assert params == {"norm": 2 * 7168, "attention": 187_107_328, "router": 7168 * 256,
                      "experts": 256 * 3 * 7168 * 2048, "shared_experts": 3 * 7168 * 2048}
    assert sum(params.values()) == layer_parameters(layout, True).numel().subs(at)
