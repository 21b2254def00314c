"""The report printed: the text block and the JSON of a dense model's figures, the MoE rows as text.

The figures are ``derive.report``'s; memory is printed in GiB / TiB (2^30 / 2^40 B), the JSON keeps bytes.
"""
from __future__ import annotations

import json
from typing import Sequence

from derive.model import Model
from derive.report import MOE_DEFAULT_PROFILE, Figure, MoELayout, Request, moe_figures
from derive.units import format_count, format_memory, format_percent, format_seconds
from derive.verdicts import BUDGET_LABELS, FIT


def _fit_line(request: Request, values: dict[str, Figure]) -> str:
    """The last line: how many GPUs (or ZeRO ranks) hold the state at the budget."""
    return "  " + fit_verdict(request, values)


def fit_verdict(request: Request, values: dict[str, Figure]) -> str:
    """The fit line's words (derive.verdicts.FIT, the table the web page fills in too)."""
    budget = values["fit.budget"].expression
    if "iB" not in budget:  # a size given in decimal units (--budget 80GB): its binary value beside it
        budget = BUDGET_LABELS["decimal"].format(text=budget, binary=format_memory(request.budget_bytes))
    counts = {name: f"{values[key].value:.0f}" for name, key in
              (("state_gpus", "fit.gpus_for_state"), ("activation_gpus", "fit.gpus_for_state_and_activations"))
              if key in values}
    if not request.zero:
        return FIT["unsharded"].format(budget=budget, **counts)
    per_rank = values["state.resident"].value
    line = FIT["sharded"].format(budget=budget, zero=request.zero, dp=request.dp, per_rank=format_memory(per_rank),
                                 fits=FIT["fits" if per_rank <= request.budget_bytes else "does_not_fit"])
    if "state_gpus" not in counts:
        return line + FIT["state_never"]
    line += FIT["state_ranks"].format(**counts)
    if "activation_gpus" not in counts:
        return line + FIT["activations_never"]
    return line + FIT["activation_ranks"].format(**counts)


#: A sequence length's origin -> the words the text header states it with (a preset's is its own).
SEQ_STATED = {"max_position_embeddings": "the config's max_position_embeddings; --seq sets it"}


def render_text(m: Model, request: Request, values: dict[str, Figure], seq_from: str = "preset") -> str:
    """The article's cli.py block for one model; a sequence length taken from a config says so."""
    def v(key: str) -> float:
        return values[key].value

    materialised = "activations.per_layer_materialised" in values
    stated = SEQ_STATED.get(seq_from, seq_from if seq_from.startswith("default") else "")
    lines = [
        f"== {m.name}: L={m.layers} h={m.hidden} a={m.heads} kv={m.kv_heads} f={m.ffn} "
        f"V={m.vocab} s={m.seq}" + (f" ({stated})" if stated else ""),
        f"  N = {format_count(v('parameters'), 'parameters')}   ({request.precision} + "
        f"{request.optimizer}: {v('bytes_per_parameter'):.4g} B/param"
        + (f", ZeRO-{request.zero} over {request.dp} ranks" if request.zero else "") + ")",
        f"  params {format_memory(v('state.params')):>11}  grads {format_memory(v('state.grads')):>11}"
        f"  optim {format_memory(v('state.optimizer')):>11}  resident "
        f"{format_memory(v('state.resident')):>11}",
        *([f"  {request.precision}: {format_count(v('fp8_parameters'), 'parameters')} in "
           f"{v('fp8_tensors'):.0f} layer matrices quantised; quantised weight copies and scales "
           f"{format_memory(v('state.fp8_copies'))} (in params, beside the bf16 copy)"]
          if "state.fp8_copies" in values else []),
        f"  activation/layer (b={request.micro_batch}, profile {request.profile}): "
        f"{format_memory(v('activations.per_layer_fused')):>11} "
        + ("flash | " if materialised else "per layer | ")
        + (f"{format_memory(v('activations.per_layer_materialised')):>11} materialised scores | "
           if materialised else "")
        + f"all layers + logits {format_memory(v('activations.all_layers_and_logits')):>11}",
        *([f"  activation/layer with {request.precision}'s quantised linear inputs: "
           f"{format_memory(v('activations.per_layer_fp8')):>11} (16-bit: "
           f"{format_memory(v('activations.per_layer_fused'))})"]
          if "activations.per_layer_fp8" in values else []),
        f"  FLOPs/token: 6N = {format_count(v('flops.six_n'), 'FLOP', 0, 10)}, with causal "
        f"attention = {format_count(v('flops.per_token_causal'), 'FLOP', 0, 10)};  one "
        f"{m.seq}-token sequence on one {request.peak_label} >= "
        f"{format_seconds(v('time.one_sequence'))}",
    ]
    if "step.lower_bound" in values:
        lines.append(f"  {request.tokens / 2**20:.4g} Mi tokens/step on {request.gpus} GPUs: >= "
                     f"{format_seconds(v('step.lower_bound'))} at 100%, "
                     f"{format_seconds(v('step.at_target_mfu'))} at {format_percent(request.target_mfu)} MFU")
    if "observed.mfu" in values:
        hfus = "  ".join(
            f"HFU({policy}) {v(f'observed.hfu_{policy}'):.1%}"
            if v(f"observed.hfu_{policy}") <= 1 else f"HFU({policy}) over 100% (not run so)"
            for policy in ("selective", "full"))
        lines.append(f"  observed {request.step_time:g} s/step = "
                     f"{format_count(v('observed.tokens_per_second'), '', 0)} tokens/s -> "
                     f"MFU {v('observed.mfu'):.1%}  {hfus}")
    lines.append(_fit_line(request, values))
    return "\n".join(lines) + "\n"


#: The top-level key of a one-model report under a transformers profile (issue 31): the whole
#: model's bytes kept for backward, its layers and edges, beside the same figure under the model.
SAVED_KEY = "saved_for_backward_bytes"


def render_json(reports: Sequence[tuple[Model, Sequence[Figure]]],
                seq_from: dict[str, str] | None = None) -> str:
    """Every figure of every model as ``{"value", "unit", "expression"}`` (strict JSON), and ``seq``
    as ``{"value", "unit", "from"}``: --seq, preset, max_position_embeddings or the default; one
    model under an hf profile also at the top level (:data:`SAVED_KEY`, with ``"model"``)."""
    data = {m.name: {fig.key: fig.as_json() for fig in values} for m, values in reports}
    for m, _ in reports:
        data[m.name]["seq"] = {"value": m.seq, "unit": "tokens", "from": (seq_from or {}).get(m.name, "preset")}
    if len(reports) == 1:  # one model under --profile hf-sdpa / hf-eager: its whole-model figure on top
        m, values = reports[0]
        whole = next((fig for fig in values if fig.key == SAVED_KEY and fig.parts), None)
        if whole is not None:
            data[SAVED_KEY] = {**whole.as_json(), "model": m.name}
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def render_moe(model: Model, layout: MoELayout, profile: str = MOE_DEFAULT_PROFILE, precision: str = "bf16") -> str:
    """The text report."""
    v = {key: float(value) for key, value in moe_figures(model, layout, profile, precision).items()}
    lines = [
        f"{model.name} (MoE; {model.source})",
        f"  parameters N            {v['parameters'] / 1e9:10.2f} B   active per token "
        f"{v['active_parameters'] / 1e9:.2f} B"
        + (f"   MTP modules {v['mtp_parameters'] / 1e9:.2f} B" if v["mtp_parameters"] else ""),
        f"  layout                  t = {layout.tp}, e = {layout.ep}, t_E = {layout.etp}, "
        f"p = {layout.pp}, d = {layout.dp} (EDP = {int(v['expert_data_parallel'])}), b = {layout.micro_batch}",
        f"  first stage, one GPU    {v['stage_parameters'] / 1e9:10.3f} B parameters "
        f"({v['stage_expert_parameters'] / 1e9:.3f} B routed experts)",
        f"  states per GPU          {format_memory(v['state_bytes']):>14} (Megatron bf16, distributed "
        f"optimizer: 6 + 12/d, experts 6 + 12/EDP); {format_memory(v['state_bytes_plain'])} without",
        f"  activations per GPU     {format_memory(v['activation_bytes']):>14} ({profile} profile, "
        f"first stage, {layout.pp} micro-batch(es) in flight, s = {model.seq})",
        f"  FLOPs per token         {v['flops_per_token'] / 1e9:10.1f} GFLOP (derived: 6 N_active_GEMM "
        f"+ scores, router included); Megatron {v['megatron_flops_per_token'] / 1e9:.1f}",
    ]
    if "fp8_weight_bytes" in v:
        lines[5:5] = [
            f"  {'FP8 weight copies':<24}{format_memory(v['fp8_weight_bytes']):>14} ({precision}: the layer "
            f"matrices' cached FP8 copies and scales, beside the bf16 states: "
            f"{format_memory(v['state_bytes'] + v['fp8_weight_bytes'])} in all)"]
        lines[7:7] = [
            f"  {'activations, FP8':<24}{format_memory(v['activation_bytes_fp8']):>14} ({precision}: linear "
            f"inputs in FP8 with their scales; router, attention core, norms 16-bit)",
            f"  saved per MoE layer     {format_memory(v['layer_saved_bytes_fp8']):>14} under {precision} "
            f"(bf16: {format_memory(v['layer_saved_bytes'])}; one rank, b = {layout.micro_batch})"]
    return "\n".join(lines)
