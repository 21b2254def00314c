"""The sheet's published-models table: every shipped config, with the published totals."""


def test_published_models_table(tables):
    table = tables["published_models"]
    assert table["section"] == "published_models"
    rows = {row["model"]: row for row in table["rows"]}
    assert len(rows) >= 12
    # Megatron-LM's estimator (shared reference README); GPT-NeoX-20B paper, Table 1
    assert rows["deepseek-v3"]["N"] == 671_026_404_352
    assert rows["mixtral-8x7b-v0.1"]["N"] == 46_702_792_704
    assert rows["gpt-neox-20b"]["N"] == 20_554_567_680
    assert rows["deepseek-v3"]["active_N"] == 37_552_282_624
    # 16 and 18 bytes per parameter of the same N
    gemma = rows["gemma-2-9b"]
    assert gemma["bf16"] == 16 * gemma["N"] and gemma["bf16-fp32grad"] == 18 * gemma["N"]
    # Llama 3 8B at s = 8192: 6 N_GEMM + 6 L s h, N_GEMM = N less the input embedding and norms
    gemm = 8_030_261_248 - 128256 * 4096 - (2 * 32 + 1) * 4096
    assert rows["meta-llama-3-8b"]["flops"] == 6 * gemm + 6 * 32 * 8192 * 4096
    assert isinstance(rows["mixtral-8x7b-v0.1"]["flops"], str)   # MoE FLOPs: issue 15
