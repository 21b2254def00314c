"""MFU and HFU (PaLM, appendix B): the article's worked example (section 7), recompute factors, hardware peaks."""
from __future__ import annotations

from functools import lru_cache

from derive.accounts.flops import (
    RECOMPUTED_GEMMS,
    flops_per_token,
    hfu,
    mfu,
    recompute_factor,
)
from derive.architectures.decoder import LLAMA
from derive.identities import proof
from derive.presets import HARDWARE, hardware, model
from derive.render.quantities import (
    blank_cell,
    flop_cell,
    number_cell,
    percent_cell,
    seconds_cell,
)
from derive.render.sections.flops import EXAMPLE, EXAMPLE_MODEL
from derive.render.sheet import (
    Column,
    Section,
    Table,
    bytes_cell,
    int_cell,
    math_cell,
    text_cell,
)
from derive.symbols import F, G, P, R, T, t_step

#: The article's observed step (section 7): 70B, 4M tokens on 1024 H100s in 4.5 s.
OBSERVED_STEP_SECONDS = float(EXAMPLE.step_seconds)

#: policy -> (what runs a second time, the key of the identity proving its factor).
POLICIES: dict[str, tuple[str, str | None]] = {
    "none": ("nothing: hardware FLOPs = model FLOPs", None),
    "selective": ("the forward of QK^T and PV (Korthikanti et al. 2022, section 4.2)",
                  "flops.selective_factor"),
    "full": ("the forward of every GEMM, output head included (the article's 2 + 2 + 4)",
             "flops.full_factor"),
    "full-layers": ("the forward of every layer, not the output head (Megatron recompute_granularity='full')",
                    "flops.full_layers_factor"),
}
CAUSAL = "flops.llama.causal"


@lru_cache(maxsize=None)
def _example() -> dict[str, object]:
    """The worked example's inputs, each a number."""
    preset = model(EXAMPLE_MODEL)
    return {"tokens": EXAMPLE.step_tokens, "gpus": EXAMPLE.gpus, "peak": hardware(EXAMPLE.gpu).peak_flops,
            "rate": EXAMPLE.step_tokens / OBSERVED_STEP_SECONDS,
            "per_token": float(preset.at(flops_per_token(LLAMA, "causal")))}


@lru_cache(maxsize=None)
def _factor(policy: str) -> float:
    """Hardware / model FLOPs of ``policy`` at the example's preset."""
    return float(model(EXAMPLE_MODEL).at(recompute_factor(policy)))


def worked_example_table() -> Table:
    """Observed 4.5 s per step -> tokens/s, MFU, HFU with selective and with full recompute."""
    ex = _example()
    rate, per, gpus, peak = ex["rate"], ex["per_token"], ex["gpus"], ex["peak"]
    selective, full = proof(POLICIES["selective"][1]).identity.claim, proof(POLICIES["full"][1]).identity.claim
    rows = (
        ("tokens per step", T, int_cell(ex["tokens"])),
        ("observed seconds per step", t_step, seconds_cell(OBSERVED_STEP_SECONDS, 1)),
        ("throughput", T / t_step, number_cell(rate, 1, "tokens/s")),
        (f"model FLOPs per token ({EXAMPLE_MODEL}, causal)", proof(CAUSAL).identity.claim,
         flop_cell(per, digits=1)),
        (f"GPUs ({EXAMPLE.gpu.upper()})", G, int_cell(gpus)),
        ("peak per GPU", P, number_cell(peak, 0, "TFLOPS", 1e12)),
        ("MFU", mfu(R, F, G, P), percent_cell(mfu(rate, per, gpus, peak))),
        ("HFU, selective recompute", hfu(R, F, G, P, selective),
         percent_cell(hfu(rate, per, gpus, peak, _factor("selective")))),
        ("HFU, full recompute", hfu(R, F, G, P, full),
         percent_cell(hfu(rate, per, gpus, peak, _factor("full")))),
    )
    return Table(
        "mfu_example", f"MFU and HFU of an observed step ({EXAMPLE_MODEL}, {OBSERVED_STEP_SECONDS} s)",
        (Column("quantity", "quantity"), Column("expression", "expression"), Column("value", "value")),
        tuple({"quantity": text_cell(q), "expression": math_cell(e), "value": v} for q, e, v in rows),
        note="R = T / t_step tokens/s, F model FLOPs per token, G GPUs, P peak FLOPS per GPU "
             "(TFLOPS = 10^12 FLOP/s). MFU counts model FLOPs only; HFU adds what recompute runs again.",
    )


def recompute_table() -> Table:
    """Hardware / model FLOPs of every recompute policy: closed form, proof, size at the example."""
    ex = _example()
    rows = []
    if sorted(POLICIES) != sorted(RECOMPUTED_GEMMS):
        raise ValueError(f"policy: the sheet describes {sorted(POLICIES)}, derive has {sorted(RECOMPUTED_GEMMS)}")
    for policy in RECOMPUTED_GEMMS:
        again, name = POLICIES[policy]
        checked = proof(name) if name else None
        closed = checked.identity.claim if checked else recompute_factor(policy)
        rows.append({
            "policy": text_cell(policy), "again": text_cell(again), "closed_form": math_cell(closed),
            "difference": math_cell(checked.difference) if checked else math_cell(0),
            "status": text_cell(checked.verdict) if checked else blank_cell(),
            "factor": number_cell(_factor(policy), 4),
            "hfu": percent_cell(hfu(ex["rate"], ex["per_token"], ex["gpus"], ex["peak"], _factor(policy))),
        })
    return Table(
        "recompute_factors", "Recompute: hardware FLOPs / model FLOPs",
        (Column("policy", "policy"), Column("again", "runs again", width="0.2\\linewidth"),
         Column("closed_form", "closed form"),
         Column("difference", "derived - closed form", width="0.2\\linewidth"),
         Column("status", "proof"), Column("factor", f"{EXAMPLE_MODEL}", unit="ratio"),
         Column("hfu", "HFU at the observed step", unit="fraction", width="0.1\\linewidth")),
        tuple(rows),
        note="F = 6 N_GEMM + 6Lsh, the causal model FLOPs per token. Layer-only recompute departs from "
             "4/3 by the output head's forward, which it does not re-run.",
    )


def hardware_table() -> Table:
    """The hardware presets: dense bf16 peak, memory as sold, source."""
    return Table(
        "hardware", "Hardware presets",
        (Column("name", "GPU"), Column("peak", "bf16 dense peak", unit="FLOP/s"),
         Column("memory", "memory (as sold, GB)", unit="B"), Column("source", "source", width="0.55\\linewidth")),
        tuple({"name": text_cell(gpu.name), "peak": number_cell(gpu.peak_flops, 0, "TFLOPS", 1e12),
               "memory": bytes_cell(gpu.memory_bytes, "GB"), "source": text_cell(gpu.source)}
              for gpu in HARDWARE.values()),
        note="TFLOPS = 10^12 FLOP/s; memory as the data sheet sells it, GB = 10^9 B.",
    )


def utilisation_section() -> Section:
    """The MFU / HFU worked example, the recompute factors and the hardware presets."""
    return Section(
        "utilisation", "Utilisation: MFU and HFU",
        intro=("MFU divides the model FLOPs actually achieved by the peak; HFU also counts the forwards "
               "that activation recompute runs a second time, so HFU = MFU x (hardware / model FLOPs).",),
        tables={"mfu_example": worked_example_table(), "recompute_factors": recompute_table(),
                "hardware": hardware_table()},
    )
