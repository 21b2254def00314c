"""docs/validation.md's "derive and the tools you know" table, generated from the peers' reference files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

import sympy as sp

from derive.peers import Reproduction, accelerate, as_number, calflops, deepspeed, llm_analysis, torchtitan

#: peer -> (reproduce, its display name).
PEERS: dict[str, tuple[Callable[[dict, dict], dict[str, Reproduction]], str]] = {
    "deepspeed": (deepspeed.reproduce, "DeepSpeed"),
    "accelerate": (accelerate.reproduce, "accelerate"),
    "llm_analysis": (llm_analysis.reproduce, "llm-analysis"),
    "torchtitan": (torchtitan.reproduce, "torchtitan"),
    "calflops": (calflops.reproduce, "calflops / FlopCounterMode"),
}


def leaves(result: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    """Every number of a record's result as (dotted key, value); a bare number has key ''."""
    if isinstance(result, dict):
        for key, value in result.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else key)
    elif isinstance(result, (int, float)) and not isinstance(result, bool):
        yield prefix, result


def load(folder: Path) -> dict[str, dict]:
    """The reference files ``peers_<peer>.json`` in ``folder``, by peer."""
    return {peer: json.loads((Path(folder) / f"peers_{peer}.json").read_text()) for peer in PEERS}


def _short(call: str) -> str:
    return call.split("(")[0].split(".")[-1]


def _picked(peer: str, record: dict) -> bool:
    """The records docs/validation.md shows: one layout per peer, Llama 3 70B where the peer runs it."""
    kw = record["kwargs"]
    if peer == "deepspeed":
        if "estimate" not in record["call"]:
            return record["model"] == "llama3-70b"
        return (record["model"] == "llama3-70b" and kw["num_gpus_per_node"] == 8 and kw["num_nodes"] == 2
                and kw.get("zero_init", True))
    if peer == "accelerate":
        return record["model"] == "llama3-70b" and (
            record["call"].endswith(("calculate_maximum_sizes", "estimate_training_usage")) is False
            and kw.get("dtypes") == ["float16"]
            or kw.get("mixed_precision") == "bfloat16" or record["call"].endswith("calculate_maximum_sizes"))
    if peer == "llm_analysis" and "activation" in record["call"]:
        return (record["model"] == "llama3-70b" and kw["batch_size"] == 1
                and kw.get("activation_recomputation", "NONE") == "NONE")
    if peer == "llm_analysis":
        return (record["model"] in ("llama3-70b", "gpt3-175b") and record["parallelism"]["dp_size"] in (1, 8)
                and (record["call"].endswith(("params_total", "params_per_layer_mlp", "params_embedding",
                                               "flops_fwd_total"))
                     and kw.get("batch_size", 1) == 1 and record["parallelism"]["dp_size"] == 1
                     or kw.get("ds_zero") == "STAGE_2" and record["parallelism"]["dp_size"] == 8
                     and record["call"].endswith("gradient_per_layer")))
    if peer == "torchtitan":
        return kw["seq_len"] == 8192 and kw["flavor"] != "debugmodel"
    return record["model"] == "tiny-llama" and record["batch"] == 1


def _label(peer: str, record: dict, key: str) -> str:
    kw = record["kwargs"]
    call = _short(record["call"])
    if peer == "deepspeed" and "estimate" in record["call"]:
        options = "offload" if kw["cpu_offload"] else "no offload"
        if kw.get("cpu_offload_params"):
            options = "offload + params"
        call = f"ZeRO-{record['stage']} {options}, d = {kw['num_gpus_per_node'] * kw['num_nodes']}"
    elif peer == "accelerate" and "mixed_precision" in kw:
        call = f"{call}({kw['mixed_precision']})"
    elif peer == "accelerate" and "dtypes" in kw:
        call = f"{call}({kw['dtypes'][0]})"
    elif peer == "llm_analysis" and "ds_zero" in kw:
        call = f"{call}({kw['ds_zero']}, dp = {record['parallelism']['dp_size']})"
    elif peer == "torchtitan":
        call = f"{kw['flavor']}, s = {kw['seq_len']}"
    elif peer == "calflops":
        call = f"{call} ({record['attn']})"
    model = record.get("model", "")
    return f"{model} {call}".strip() + (f" `{key}`" if key else "")


def _number(value: sp.Expr) -> str:
    return f"{int(value):,}" if value.is_integer else f"{float(value):,.1f}"


def _cause(rep: Reproduction) -> str:
    sizes = {name: size for name, size in rep.sizes.items() if size != 0}
    if not sizes:
        return f"reproduced: {rep.view}"
    parts = "; ".join(f"{name} ({_number(size)})" for name, size in sizes.items())
    rounding = ", rounded down" if rep.rounding == "floor" else ""
    return f"{rep.view}{rounding}; departs: {parts}"


#: Numbers the table leaves to the reference files: parts of a number it shows.
_BREAKDOWN = ("largest_layer_memory", "attn", "mlp", "layernorm")


def rows(references: dict[str, dict]) -> list[tuple[str, str, str, str, str]]:
    """(peer, number, peer's value, derive's value, cause) for the picked records."""
    out = []
    for peer, (reproduce, display) in PEERS.items():
        data = references[peer]
        for record in data["records"]:
            if not _picked(peer, record):
                continue
            reproductions = reproduce(record, data["models"])
            for key, value in leaves(record["result"]):
                if key not in reproductions or key.startswith("training.") or key in _BREAKDOWN:
                    continue
                rep = reproductions[key]
                out.append((display, _label(peer, record, key), _number(as_number(value)),
                            _number(rep.derived_value), _cause(rep)))
    return out


def versions(references: dict[str, dict]) -> str:
    """One line: every peer's pinned version."""
    pinned = {}
    for data in references.values():
        pinned.update(data["versions"])
    return ", ".join(f"{name} {version}" for name, version in sorted(pinned.items()))


def markdown(references: dict[str, dict]) -> str:
    """The docs/validation.md block: versions line and the table."""
    lines = [f"Peers run: {versions(references)}.", "",
             "| tool | number | tool's value | derive's | named cause |", "|---|---|---:|---:|---|"]
    lines += [f"| {peer} | {label} | {theirs} | {ours} | {cause} |"
              for peer, label, theirs, ours, cause in rows(references)]
    return "\n".join(lines) + "\n"
