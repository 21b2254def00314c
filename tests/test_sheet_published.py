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
    # MoE: 6 x the active GEMM parameters (active N less the input embedding and the norms; the
    # router [h, E] is a GEMM) + the causal scores, at the config's context length.
    # Mixtral 8x7B, s = 32768: 32 layers of 32 heads of width 128
    gemm = 12_879_925_248 - 32000 * 4096 - (2 * 32 + 1) * 4096
    assert rows["mixtral-8x7b-v0.1"]["active_N"] == 12_879_925_248
    assert rows["mixtral-8x7b-v0.1"]["flops"] == 6 * gemm + 6 * 32 * 32768 * 32 * 128
    # DeepSeek-V3 (MLA; transformers' config holds no MTP module), s = 163840: norms [h] twice per
    # layer, the latent norms [r_q] and [r_kv], the final [h]; QK^T 128 + 64 wide, PV 128, 128 heads
    gemm = 37_552_282_624 - 129280 * 7168 - (61 * (2 * 7168 + 1536 + 512) + 7168)
    assert rows["deepseek-v3"]["flops"] == 6 * gemm + 3 * 61 * 163840 * 128 * (128 + 64 + 128)
