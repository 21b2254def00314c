"""Step time predicted: the systems table, the calibrated constants, the published runs predicted, and a held-out set (issues 29, 32)."""
from __future__ import annotations

import json

from derive.accounts.efficiency import CALIBRATION, calibrated
from derive.heldout import heldout_report, heldout_runs
from derive.render.quantities import blank_cell, number_cell, percent_cell, seconds_cell
from derive.render.sheet import Column, Section, Table, bytes_cell, int_cell, text_cell
from derive.systems import SYSTEMS

TABLE_NAMES = {"korthikanti-table5": "Korthikanti et al. 2022, Table 5",
               "narayanan-table1": "Narayanan et al. 2021, Table 1",
               "dubey-table4": "Dubey et al. 2024 (Llama 3), Table 4"}


def _calibration() -> dict[str, object]:
    return json.loads(CALIBRATION.read_text())


def systems_table() -> Table:
    """derive.systems: dense peaks, HBM, links per GPU."""
    def peak(gpu, dtype):
        return number_cell(gpu.peaks[dtype], 0, "TFLOPS", 1e12) if dtype in gpu.peaks else blank_cell()
    return Table(
        "systems", "Systems (derive.systems): dense peaks, HBM, links per GPU",
        (Column("gpu", "GPU"), Column("bf16", "bf16", unit="FLOP/s"), Column("fp8", "fp8", unit="FLOP/s"),
         Column("fp4", "fp4", unit="FLOP/s"), Column("hbm", "HBM (data sheet, GB)", unit="B"),
         Column("bandwidth", "HBM bandwidth", unit="B/s"), Column("nvlink", "NVLink each way", unit="B/s"),
         Column("domain", "NVLink domain", unit="GPUs"), Column("nic", "NIC each way", unit="B/s"),
         Column("sms", "SMs"), Column("generation", "generation")),
        tuple({"gpu": text_cell(gpu.name), "bf16": peak(gpu, "bf16"), "fp8": peak(gpu, "fp8"),
               "fp4": peak(gpu, "fp4"), "hbm": bytes_cell(gpu.hbm_bytes, "GB"),
               "bandwidth": number_cell(gpu.hbm_bandwidth, 2, "TB/s", 1e12),
               "nvlink": number_cell(gpu.nvlink_bandwidth, 0, "GB/s", 1e9), "domain": int_cell(gpu.nvlink_domain),
               "nic": number_cell(gpu.nic_bandwidth, 0, "GB/s", 1e9), "sms": int_cell(gpu.sms),
               "generation": text_cell(gpu.generation)}
              for gpu in SYSTEMS.values()),
        note="Dense tensor-core peaks (the data sheets' sparse figures halved); links unidirectional "
             "(NVLink's bidirectional figure halved, a NIC's Gb/s over 8); HBM as sold, in the data "
             "sheets' GB = 10^9 B. Sources: derive.systems.",
    )


def constants_table() -> Table:
    """The fitted constants and what each multiplies."""
    data = _calibration()
    return Table(
        "step_constants", "Calibrated constants (python -m derive.calibrate, derive/calibration.json)",
        (Column("name", "constant"), Column("value", "value", unit="fraction"),
         Column("meaning", "multiplies", width="0.6\\linewidth")),
        tuple({"name": text_cell(name), "value": number_cell(value, 2), "meaning": text_cell(data["meaning"][name])}
              for name, value in data["constants"].items()),
    )


def published_runs_table() -> Table:
    """Every calibration run: published and predicted step time, and the error."""
    data = _calibration()
    rows = tuple({"table": text_cell(TABLE_NAMES[row["table"]]), "run": text_cell(row["run"]),
                  "gpu": text_cell(row["gpu"]), "published": seconds_cell(row["published_s"]),
                  "predicted": seconds_cell(row["predicted_s"]), "error": percent_cell(row["error"])}
                 for row in data["rows"])
    summary = "; ".join(f"{TABLE_NAMES[name]}: mean |error| {errors['mean_abs_error']:.1%}, max "
                        f"{errors['max_abs_error']:.1%}" for name, errors in data["tables"].items())
    return Table(
        "published_runs", "Published runs, predicted",
        (Column("table", "source"), Column("run", "run"), Column("gpu", "GPU"),
         Column("published", "published step", unit="s"), Column("predicted", "predicted step", unit="s"),
         Column("error", "error", unit="fraction")),
        rows,
        note=f"{summary}. Step times of Narayanan and Llama 3 are implied by their published throughputs "
             "(Eq. 3's FLOPs; model FLOPs with causal halving). Calculon reaches 3.65 % mean and 8.87 % "
             "max on Korthikanti's eight rows.",
    )


def heldout_table() -> Table:
    """derive.calibrate's held-out check: NVIDIA's published Megatron-Bridge runs, predicted with the shipped constants."""
    result = heldout_report(*heldout_runs(), calibrated())
    rows = tuple({"run": text_cell(row["run"]), "precision": text_cell(row["precision"]), "kind": text_cell(row["kind"]),
                  "published": int_cell(row["published_tokens"]), "predicted": int_cell(row["predicted_tokens"]),
                  "error": percent_cell(row["error"]),
                  "memory": blank_cell() if row["memory_gib"] is None else number_cell(row["memory_gib"], 1),
                  "hbm": number_cell(row["hbm_gib"], 1)}
                 for row in result["rows"])
    groups = "; ".join(f"{name}: mean |error| {errors['mean_abs_error']:.1%}, max {errors['max_abs_error']:.1%} "
                       f"({errors['rows']} rows)" for name, errors in result["groups"].items())
    missing = sorted({row["reason"].partition(" (")[0] for row in result["not_run"]})
    releases = "; ".join(release["release"] for release in result["releases"].values())
    sources = ", ".join(sorted({release["source"] for release in result["releases"].values()}))
    return Table(
        "heldout_runs", "Published runs, predicted (held out: never fitted)",
        (Column("run", "run (model, precision, GPUs, system)"), Column("precision", "derive precision"),
         Column("kind", "dense / MoE"), Column("published", "published", unit="tokens/s/GPU"),
         Column("predicted", "predicted", unit="tokens/s/GPU"), Column("error", "error", unit="fraction"),
         Column("memory", "derive's memory, most loaded rank", unit="GiB"), Column("hbm", "HBM", unit="GiB")),
        rows,
        note=f"{releases}, {sources} (derive/heldout_runs*.json, one file per release; python -m derive.calibrate "
             f"--check). Error: predicted / published tokens/s per GPU - 1. Every row is predicted without the memory "
             f"check (each ran); a dense row's memory above the HBM is one derive's accounts (derive.predict, no "
             f"recompute) would refuse, an MoE row's one they note (derive.planning.expert_stages); blank: not covered "
             f"(an MoE row's FP8 recipe, token drop, balanced stages, recomputed modules or fused expert ops). "
             f"{groups}. Not run "
             f"({len(result['not_run'])} rows): {'; '.join(missing)}.",
    )


def step_time_section() -> Section:
    """The systems, the constants, and the published runs predicted."""
    return Section(
        "step_time", "Step time, predicted",
        intro=("The step time is predicted from derive's ledgers (derive.accounts.step): every GEMM of the GEMM "
               "ledger pass by pass on a roofline times one fitted efficiency per GPU generation (Ampere; Hopper, "
               "which Blackwell takes until a Blackwell run is calibrated) and the wave quantization of its "
               "output tiles, element-wise work from the saved-tensor bytes (in MoE layers also the dispatcher's, the "
               "experts' eager kernels' and the recomputed modules' bytes) at HBM bandwidth, every row of the "
               "communication ledger on the link its group spans (ranks ordered tp, cp, dp, pp as Megatron "
               "does, the expert layers' t_E, ep, expert dp, pp on its expert grid) with a named overlap rule, the 1F1B / interleaved bubble (p - 1)/(v m) of the slowest "
               "stage, and the optimizer's state bytes. Four constants are fitted on the runs below; the held-out "
               "runs after them are predicted with those constants and fitted to nothing.",),
        tables={"systems": systems_table(), "step_constants": constants_table(),
                "published_runs": published_runs_table(), "heldout_runs": heldout_table()},
    )
