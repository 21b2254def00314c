"""The held-out check (``python -m derive.calibrate --check``): published runs predicted with the fitted constants, never fitted.

It predicts a held-out set with the fitted constants (derive/calibration.json) and fits nothing: NVIDIA's published
Megatron-Bridge pre-training runs of nine releases (``derive/heldout_runs*.json``, one file per
release: 25.09, 25.11, 26.02 to 26.08; dense and MoE, H100 and Blackwell, BF16, FP8, MXFP8 and NVFP4), each
row's tokens/s per GPU against the published one, the mean and max absolute error by release,
precision, GPU and dense / MoE, and every row derive cannot run with the reason (issues 29 and 32).
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from derive.accounts.efficiency import Efficiency
from derive.accounts.prediction import ledger_precision, predict
from derive.accounts.schedule import DEFAULT_OVERLAP
from derive.calibration_fit import FIELDS, PublishedRun, error_spread
from derive.names import named_model
from derive.parallelism import Parallelism
from derive.planning.expert_stages import layout_memory
from derive.systems import system


#: The held-out check set: NVIDIA's published Megatron-Bridge pre-training tables, one file per release
#: (``heldout_runs_<release>.json``, in release order), each row typed as published with the file's source
#: and notes; ``HELDOUT`` is the 25.11 release's.
HELDOUT_FILES = tuple(sorted(Path(__file__).resolve().parent.glob("heldout_runs_*.json"),
                             key=lambda path: tuple(map(int, path.stem.removeprefix("heldout_runs_").split(".")))))
HELDOUT = Path(__file__).resolve().parent / "heldout_runs_25.11.json"
#: The table's names -> derive's: models (a preset or MoE preset), systems, precisions. A row whose
#: name is not here is listed as one derive cannot run, with the missing name.
HELDOUT_MODELS = {"LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama3-405b",
                  "DeepSeekV3": "deepseek-v3", "DeepSeekV3 (w/o MTP)": "deepseek-v3",
                  "DeepSeekV3 (w/ MTP)": "deepseek-v3", "DeepSeekV3 (dropless)": "deepseek-v3",
                  "DeepSeekV3 (tokendrop)": "deepseek-v3",
                  "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_30B_a3B (tokendrop)": "qwen3-30b-a3b",
                  "Qwen3_235B_a22B": "qwen3-235b-a22b", "Qwen3_235B_a22B (tokendrop)": "qwen3-235b-a22b",
                  "GPT OSS 120B": "gpt-oss-120b"}
HELDOUT_SYSTEMS = {"DGX-H100": "h100", "DGX-B200": "b200", "DGX-B300": "b300", "DGX-GB200": "gb200",
                   "DGX-GB300": "gb300"}
#: 26.02's "FP8" is the recipes' fp8_cs (heldout_runs_26.02.json, columns.precision, cites the recipe).
HELDOUT_PRECISIONS = {"BF16": "bf16", "FP8-CS": "fp8-current", "FP8-DS": "fp8-delayed", "FP8-MX": "mxfp8",
                      "FP8": "fp8-current", "MXFP8": "mxfp8", "NVFP4": "nvfp4"}
#: A model-name suffix -> the MoE capacity factor of the run: Megatron-Bridge's token-drop runs
#: (megatron/bridge/training/utils/moe_token_drop.py, apply_moe_token_drop: moe_expert_capacity_factor
#: = 1.0, moe_pad_expert_input_to_capacity = True); derive.parallelism's capacity_factor.
HELDOUT_CAPACITY = {"(tokendrop)": 1}
#: Models whose recipe counts the embedding and the loss as one layer slot each in the pipeline split
#: (derive.parallelism's ``balanced``): megatron/bridge/recipes/llama/llama3.py, llama31_405b_pretrain_config,
#: account_for_embedding_in_pipeline_split = account_for_loss_in_pipeline_split = True at each release's
#: commit (fa0315ae2684, 97ad8cc6f1, c0b9a00031b7); 26.02's 405B at p 16, v 8 needs it (128 = 126 + 2 slots).
HELDOUT_BALANCED = {"LLAMA3.1_405B"}
#: What the table leaves unstated, taken as Megatron's large-run defaults (derive.predict's).
HELDOUT_ASSUMPTIONS = ("distributed optimizer (ZeRO-1) where FSDP = 0, ZeRO-3 over the data-parallel ranks "
                       "where FSDP > 0; sequence parallel where t > 1; no recompute (the table states none) beyond the "
                       "modules a row's recipe recomputes (HELDOUT_RECOMPUTE_MODULES); "
                       "v = 1 where it prints n/a; pipeline stages unbalanced unless L does not divide p v and "
                       "L + 2 does (then Megatron's embedding and loss slots, the only split it accepts) or the "
                       "model's recipe sets those slots (Llama 3.1 405B); "
                       "BF16 rows: bf16 gradients reduced in bf16 (precision bf16); FP8 rows: Megatron's FP8 "
                       "states, fp32 main gradients reduced in fp32 (prediction.FP8_STATES); "
                       "MoE routing uniform (the runs force-balance it), dropless; expert tensor parallel 1 where ep > 1 "
                       "(the MoE recipes' expert_tensor_parallelism = 1)")
#: What a row's model name says that derive's model lacks.
#: 25.09's and 26.02's DeepSeekV3 rows name no MTP setting; their recipes train one MTP layer
#: (megatron/bridge/recipes/deepseek/deepseek_v3.py: mtp_num_layers = 1 at fa0315ae2684 and c0b9a00031b7)
#: and the published model TFLOP/s per token count 3.8-4.1 % over derive's, as 25.11's "w/ MTP" row does.
MTP = "the run trains an MTP module; derive's step model counts none"
HELDOUT_MISSING = {"DeepSeekV3 (w/ MTP)": MTP, "DeepSeekV3": MTP, "DeepSeekV3 (dropless)": MTP,
                   "DeepSeekV3 (tokendrop)": MTP}
#: Rows whose recipe leaves Megatron's EP all-to-all overlap off where derive's default assumes it across
#: nodes (derive.accounts.schedule, "ep-a2a-overlap-across-nodes"): (release, model, system) -> the recipe.
#: Megatron-Bridge's scripts/performance turn it on only with moe_a2a_overlap = True (utils/overrides.py,
#: _set_moe_a2a_overlap_overrides: comm_overlap.overlap_moe_expert_parallel_comm = True), default False
#: (utils/utils.py, WorkloadBaseConfig.moe_a2a_overlap); each recipe's EP, p, micro-batch and GBS equal the row's.
#: Releases: 26.02 is r0.3.0 (docs/releases/known-issues.md), 26.04 r0.4.0 (docker/common/README.md).
_GPT_OSS = ("NVIDIA-NeMo/Megatron-Bridge v0.3.0 (r0.3.0), scripts/performance/configs/gpt_oss/"
            "gpt_oss_workload_base_configs.py, GPT_OSS_120B_PRETRAIN_CONFIG_{}_BF16_V2: EP 64, b 4, GBS 1280, "
            "no moe_a2a_overlap")
_QWEN3_H100 = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/qwen/qwen3_workload_base_configs.py, "
               "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1: EP 16, p 1, GBS 1024, moe_a2a_overlap=False "
               "(the same cell at v0.3.1, v0.4.0, v0.4.1 and v0.5.0)")
HELDOUT_EP_OVERLAP_OFF = {("26.02", "GPT OSS 120B", "DGX-B300"): _GPT_OSS.format("B300"),
                          ("26.02", "GPT OSS 120B", "DGX-B200"): _GPT_OSS.format("B200"),
                          ("26.04", "Qwen3_30B_a3B", "DGX-H100"): _QWEN3_H100,
                          ("26.04.01", "Qwen3_30B_a3B", "DGX-H100"): _QWEN3_H100,
                          ("26.06", "Qwen3_30B_a3B", "DGX-H100"): _QWEN3_H100}
#: Rows whose recipe runs the experts as Transformer Engine's fused ops (Megatron's
#: use_transformer_engine_op_fuser: predict's ``expert_op_fuser``, no eager expert bias or clamp kernels):
#: (release, model, system) -> the recipe. Megatron-Bridge v0.5.0 and v0.5.1, scripts/performance/configs/gpt_oss/
#: gpt_oss_workload_base_configs.py, GPT_OSS_120B_PRETRAIN_CONFIG_{GB300,GB200}_FP8_MX_V2: cutedsl_fused_grouped_mlp=True,
#: which sets use_transformer_engine_op_fuser (scripts/performance/utils/overrides.py); v0.6.0,
#: src/megatron/bridge/perf_recipes/gpt_oss/common.py, _apply_gpt_oss_120b_full_iter_fp8mx_configs; each recipe's EP
#: (16 on GB300, 64 on GB200), micro-batch 4 and GBS 1280 equal the row's.
_GPT_OSS_FUSED = ("NVIDIA-NeMo/Megatron-Bridge {}: GPT-OSS 120B {} FP8-MX, EP {}, b 4, GBS 1280, "
                  "use_transformer_engine_op_fuser")
HELDOUT_EXPERT_OP_FUSER = {
    (release, "GPT OSS 120B", system): _GPT_OSS_FUSED.format(tag, system.removeprefix("DGX-"), ep)
    for release, tag in (("26.06", "v0.5.0"), ("26.06.01", "v0.5.1"), ("26.08", "v0.6.0"))
    for system, ep in (("DGX-GB300", 16), ("DGX-GB200", 64))}
#: Rows whose recipe recomputes Megatron modules under selective granularity (predict's ``recompute_modules``):
#: (release, model, system) -> (the modules, the recipe). Megatron-Bridge scripts/performance/configs/gpt_oss/
#: gpt_oss_workload_base_configs.py, GPT_OSS_120B_PRETRAIN_CONFIG_{GB200,B200,H100}_BF16_V1 (L58, L75, L82 at v0.3.0,
#: v0.3.1, v0.4.0 and v0.4.2: recompute_modules=["layernorm", "moe_act"]), which the V2 cells (GBS 1280) inherit;
#: scripts/performance/utils/overrides.py, _set_recompute_overrides, sets recompute_granularity = "selective" with
#: them (the GPT-OSS recipe itself sets neither: src/megatron/bridge/recipes/gpt_oss/gpt_oss.py). Releases: 26.02
#: is v0.3.0, 26.02.01 v0.3.1, 26.04 v0.4.0, 26.04.01 v0.4.2 (docs/versions1.json, "0.4.2 · 26.04.01"). Each cell's
#: EP, p, micro-batch and GBS equal the row's (GB200 EP 64 b 4; B200 EP 64 b 4 at v0.3.0, EP 8 b 4 from v0.4.0;
#: H100 p 4 EP 8 b 1); 26.02.01's B200 row (EP 8) differs from v0.3.1's cell (EP 64) and 25.11's rows from v0.2.0's
#: (GBS 512, other micro-batches), so those are predicted without. GB300 and B300 recompute nothing; the 26.06 to
#: 26.08 MXFP8 cells set recompute_modules=[] (v0.5.0, v0.5.1; v0.6.0 perf_recipes).
_GPT_OSS_RECOMPUTE = ("NVIDIA-NeMo/Megatron-Bridge {}, scripts/performance/configs/gpt_oss/"
                      "gpt_oss_workload_base_configs.py, GPT_OSS_120B_PRETRAIN_CONFIG_{}_BF16_V2: "
                      "recompute_modules=[\"layernorm\", \"moe_act\"], selective")
HELDOUT_RECOMPUTE_MODULES = {
    (release, "GPT OSS 120B", system): (frozenset({"layernorm", "moe_act"}),
                                        _GPT_OSS_RECOMPUTE.format(tag, system.removeprefix("DGX-")))
    for release, tag, systems in (("26.02", "v0.3.0", ("DGX-GB200", "DGX-B200", "DGX-H100")),
                                  ("26.02.01", "v0.3.1", ("DGX-GB200", "DGX-H100")),
                                  ("26.04", "v0.4.0", ("DGX-GB200", "DGX-B200", "DGX-H100")),
                                  ("26.04.01", "v0.4.2", ("DGX-GB200", "DGX-B200", "DGX-H100")))
    for system in systems}
TOKEN_DROP = ("token drop: capacity factor 1 with expert inputs padded to capacity (Megatron-Bridge "
              "apply_moe_token_drop): every expert computes T k_E / E rows, the dropless count under uniform routing")


def megatron_needs_balanced(layers: int, pp: int, vp: int) -> bool:
    """Whether Megatron can split ``layers`` over p x v chunks only with the embedding and loss slots.

    Megatron asserts L divisible by p (megatron/training/arguments.py, 'Number of layers should be
    divisible by the pipeline-model-parallel size') and each rank's layers by v
    (megatron/core/transformer/transformer_config.py), counting one slot more for each of
    account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split. A row whose L
    does not divide p v but L + 2 does ran those two flags: derive's balanced stages
    (Parallelism.balanced). A row neither divides ran a custom layout derive does not know: unbalanced.
    """
    return pp > 1 and layers % (pp * vp) != 0 and (layers + 2) % (pp * vp) == 0


def heldout_releases(paths: Sequence[Path] = HELDOUT_FILES) -> list[dict]:
    """Each release file's data (release, container, source, columns, notes, rows)."""
    return [json.loads(path.read_text()) for path in paths]


def heldout_runs(paths: Sequence[Path] = HELDOUT_FILES) -> tuple[list[PublishedRun], list[dict[str, object]]]:
    """The rows derive can run as PublishedRuns (step time GBS s / (tokens/s/GPU x GPUs)), and the others with why."""
    runs, skipped = [], []
    for data in heldout_releases(paths):
        labels = [f"{data['container']} {row['model']} {row['precision']} {row['gpus']} {row['system']}"
                  for row in data["rows"]]
        for row, label in zip(data["rows"], labels):
            if labels.count(label) > 1:  # one release's two runs of a layout at two global batches
                label += f" GBS {row['global_batch']}"
            try:
                runs.append(_heldout_run(row, label, data["container"]))
            except ValueError as error:
                skipped.append({"run": label, "release": data["container"], "reason": str(error),
                                "published_tokens": row["tokens_per_s_per_gpu"]})
    return runs, skipped


def _heldout_run(row: dict, label: str, release: str) -> PublishedRun:
    """One table row as a PublishedRun; ValueError naming what derive lacks."""
    for field, names in (("model", HELDOUT_MODELS), ("system", HELDOUT_SYSTEMS), ("precision", HELDOUT_PRECISIONS)):
        if row[field] not in names:
            raise ValueError(f"{field}: derive has no {row[field]!r} (no preset, shipped config or system of that name)")
    entry = replace(named_model(HELDOUT_MODELS[row["model"]], moe=True)[0], seq=row["seq"])
    precision = HELDOUT_PRECISIONS[row["precision"]]
    tp, pp, cp, ep, vp = row["tp"], row["pp"], row["cp"], row["ep"] or 1, row["vp"] or 1
    drop = next((factor for suffix, factor in HELDOUT_CAPACITY.items() if row["model"].endswith(suffix)), None)
    layout = Parallelism(tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=1 if ep > 1 else None,
                         dp=row["gpus"] // (tp * pp * cp),
                         micro_batch=row["micro_batch"], global_batch=row["global_batch"], recompute="none",
                         sequence_parallel=tp > 1, zero=3 if row["fsdp"] else 1,
                         precision=ledger_precision(precision), capacity_factor=drop,
                         balanced=megatron_needs_balanced(entry.layers, pp, vp)
                         or (row["model"] in HELDOUT_BALANCED and pp > 1))
    layout.check(entry)
    seconds = row["global_batch"] * row["seq"] / (row["tokens_per_s_per_gpu"] * row["gpus"])
    recipe = HELDOUT_EP_OVERLAP_OFF.get((release, row["model"], row["system"]))
    fused = HELDOUT_EXPERT_OP_FUSER.get((release, row["model"], row["system"]))
    modules, recomputed = HELDOUT_RECOMPUTE_MODULES.get((release, row["model"], row["system"]), (frozenset(), None))
    assumptions = "; ".join(filter(None, (HELDOUT_ASSUMPTIONS, HELDOUT_MISSING.get(row["model"]),
                                          drop and TOKEN_DROP, recipe and f"EP all-to-all not overlapped: {recipe}",
                                          fused and f"experts as fused ops: {fused}",
                                          recomputed and f"modules recomputed: {recomputed}")))
    overlap = DEFAULT_OVERLAP - {"ep-a2a-overlap-across-nodes"} if recipe else DEFAULT_OVERLAP
    return PublishedRun(release, label, entry, layout, system(HELDOUT_SYSTEMS[row["system"]]), seconds,
                        f"{row['tokens_per_s_per_gpu']} tokens/s per GPU", assumptions, overlap, precision,
                        expert_op_fuser=fused is not None, recompute_modules=modules)


def _gib(size: float | None) -> float | None:
    return None if size is None else round(size / 2**30, 1)


def heldout_report(runs: Sequence[PublishedRun], skipped: Sequence[dict], eta: Efficiency,
                   paths: Sequence[Path] = HELDOUT_FILES) -> dict[str, object]:
    """Every held-out row's predicted and published tokens/s per GPU, the groups' errors (all rows and each release's), the rows not run.

    Rows are predicted without the memory check (they ran); ``memory_gib`` is what derive.predict's
    accounts say the most loaded rank needs (derive.planning.expert_stages.layout_memory; None where they do not
    cover the layout: an MoE row's FP8 recipe, token drop, balanced stages, recomputed modules or fused expert ops);
    ``breakdown`` each part of the predicted step (derive.accounts.step.StepTime.breakdown) as a share of it.
    """
    rows = []
    for run in runs:
        step = predict(run.model, run.parallelism, run.gpu, run.precision, eta=eta, overlap=run.overlap,
                       expert_op_fuser=run.expert_op_fuser, recompute_modules=run.recompute_modules)
        error = step.step_time_s / run.seconds - 1  # derive.calibration_fit.residuals' figure
        tokens = run.parallelism.global_batch * run.model.seq / (run.seconds * run.parallelism.gpus)
        predicted = tokens / (1 + error)  # throughput scales as 1 / step time
        rows.append({"run": run.label, "release": run.table, "gpu": run.gpu.name, "precision": run.precision,
                     "kind": "dense" if run.model.dense else "MoE", "published_tokens": round(tokens),
                     "predicted_tokens": round(predicted), "error": round(predicted / tokens - 1, 4),
                     "published_s": round(run.seconds, 4), "predicted_s": round(run.seconds * (1 + error), 4),
                     "memory_gib": _gib(layout_memory(run.model, run.parallelism, run.expert_op_fuser,
                                                      tuple(sorted(run.recompute_modules)))),
                     "hbm_gib": _gib(run.gpu.hbm_bytes), "assumptions": run.assumptions,
                     "breakdown": {part: round(seconds / step.step_time_s, 4)
                                   for part, seconds in step.breakdown.items()}})
    releases = {}
    for data in heldout_releases(paths):
        mine = [row for row in rows if row["release"] == data["container"]]
        releases[data["container"]] = {
            "release": data["release"], "source": data["source"], "source_file": data["source_file"],
            "rows": len(data["rows"]), "not_run": sum(row["release"] == data["container"] for row in skipped),
            "groups": _groups(mine, ("precision", "gpu", "kind"))}
    return {"releases": releases, "constants": {name: getattr(eta, name) for name in FIELDS}, "rows": rows,
            "groups": _groups(rows, ("release", "precision", "gpu", "kind")), "not_run": list(skipped)}


def _groups(rows: Sequence[dict], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """The errors' spread over ``rows`` ('all') and over each value of each of ``keys``, 'all' first."""
    errors: dict[str, list[float]] = {"all": [row["error"] for row in rows]} if rows else {}
    for row in rows:
        for key in keys:
            errors.setdefault(f"{key} {row[key]}", []).append(row["error"])
    return {name: error_spread(errors[name]) for name in _ordered(errors)}


def _ordered(groups: dict) -> list[str]:
    return sorted(groups, key=lambda name: (name != "all", name.lower()))
