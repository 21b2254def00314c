"""``python -m derive.validate --hf``: random configs and shapes, derive's public path against transformers' own models.

Each draw is a config.json a user could write for one family, and a micro-batch b
and sequence s (derive.validate.config_draws). Two checks per draw:

* parameters: ``derive.validate.hf.compare`` (transformers' model on the meta
  device, name by name and shape by shape, and the totals) for every family
  derive reads;
* saved for backward: the config goes ``derive.hf.from_config`` ->
  ``derive.accounts.hf_saved`` (the accounts ``derive report --profile hf-sdpa|hf-eager``
  prints) -> bytes at (b, s), against what autograd keeps when transformers trains
  the same config (bf16, CPU, ``saved_tensors_hooks``, deduplicated by storage,
  parameters and buffers out, tensors only unreachable nodes keep out), for the
  families whose saved tensors derive models (:data:`SAVED`).

Draws come from ``random.Random(seed)``; a failure prints the config, b, s and the
implementation, which ``replay`` runs again.
"""
from __future__ import annotations

import json
import random
import time
import warnings
from collections import Counter
from typing import Any, Callable

from derive.hf import from_config
from derive.validate.config_draws import DRAW, EXPERTS_DRAWN, FAMILIES, MOE, SAVED, draw_shape
from derive.validate.hf import Case, compare as compare_parameters, transformers_config


# ---- derive's side: the public path ----

def predicted(config: dict[str, Any], implementation: str, batch: int, seq: int,
              experts: str = "grouped_mm") -> int:
    """Bytes derive's report accounts give for ``config`` at (b, s): from_config -> accounts.hf_saved."""
    from derive.accounts.hf_saved import config_saved

    model, saved = config_saved(config, f"hf-{implementation}", experts)
    return int(model.subs(saved.total, b=batch, s=seq))


# ---- transformers' side ----

def measured(config: dict[str, Any], implementation: str, batch: int, seq: int,
             experts: str = "grouped_mm") -> list:
    """Allocations autograd keeps for the loss of transformers' model of ``config`` (reachable ones)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    from derive.validate import measure

    logging.set_verbosity_error()
    measure.DTYPE_NAMES.setdefault(torch.int32, "int32")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moe = {"experts_implementation": experts} if config["model_type"] in MOE else {}
        model = AutoModelForCausalLM.from_config(transformers_config(config),
                                                 attn_implementation=implementation,
                                                 dtype=torch.bfloat16, **moe)
    model.train()
    tokens = torch.randint(0, config["vocab_size"], (batch, seq))
    own = {measure._storage(t) for t in (*model.parameters(), *model.buffers())}
    packed: list = []

    def pack(tensor):
        packed.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(input_ids=tokens, labels=tokens).loss
    holders = measure._holders(loss.grad_fn)
    by_storage: dict[int, list] = {}
    for tensor in packed:
        if measure._storage(tensor) not in own:
            by_storage.setdefault(measure._storage(tensor), []).append(tensor)
    rows = [row for views in by_storage.values() for row in measure._allocation(views, holders)]
    return [row for row in rows if row.saved_by != ("?",)]


def check_saved(config: dict[str, Any], implementation: str, batch: int, seq: int,
                experts: str = "grouped_mm") -> dict[str, Any]:
    """One draw's saved bytes: derive's public path against transformers."""
    rows = measured(config, implementation, batch, seq, experts)
    got = sum(row.bytes for row in rows)
    want = predicted(config, implementation, batch, seq, experts)
    result = {"family": config["model_type"], "implementation": implementation, "b": batch,
              "s": seq, "predicted": want, "measured": got, "passed": want == got}
    if config["model_type"] in MOE:
        result["experts"] = experts
    if want != got:
        result["rows"] = sorted(Counter((r.dtype, r.shape, r.saved_by) for r in rows).items(),
                                key=str)
    return result


def check_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """One draw's parameters: derive's table against transformers' named_parameters (meta device)."""
    try:
        transformers_config(config)
    except Exception as error:  # transformers refuses the config: derive must refuse it too
        try:
            from_config(config)
        except ValueError:
            return {"family": config["model_type"], "passed": True, "refused": True,
                    "detail": str(error)}
        return {"family": config["model_type"], "passed": False,
                "detail": f"transformers refuses it ({error}); derive reads it"}
    try:
        result = compare_parameters(Case(config["model_type"], "drawn", config))
    except ValueError as error:  # transformers builds it: derive must read it
        return {"family": config["model_type"], "passed": False,
                "detail": f"transformers builds it; derive refuses it ({error})"}
    return {"family": config["model_type"], "passed": result["passed"], "detail": result}


def replay_line(config: dict[str, Any], implementation: str | None, batch: int | None,
                seq: int | None, experts: str = "grouped_mm") -> str:
    """The line that reruns one draw: python -m derive.validate --hf --replay '<json>'."""
    draw = {"config": config, "implementation": implementation, "b": batch, "s": seq,
            "experts": experts}
    return f"python -m derive.validate --hf --replay '{json.dumps(draw)}'"


def run(samples: int, seed: int = 0, families: tuple[str, ...] = FAMILIES,
        report: Callable[[str], None] = print) -> dict[str, Any]:
    """``samples`` draws per family (saved bytes split over its implementations); counts and failures."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    failures: list[dict[str, Any]] = []
    started = time.monotonic()
    for family in families:
        implementations = SAVED.get(family, ())
        for index in range(samples):
            config = DRAW[family](rng)
            batch, seq = draw_shape(rng, config)
            parameters = check_parameters(config)
            counts[(family, "parameters", parameters["passed"])] += 1
            if not parameters["passed"]:
                failures.append({**parameters, "replay": replay_line(config, None, None, None)})
                report(f"FAIL parameters {family}: {json.dumps(parameters['detail'], default=str)}\n"
                       f"    replay: {replay_line(config, None, None, None)}")
                continue
            if not implementations or parameters.get("refused"):
                continue
            implementation = implementations[index % len(implementations)]
            experts = (EXPERTS_DRAWN[index // len(implementations) % len(EXPERTS_DRAWN)]
                       if family in MOE else "grouped_mm")
            check = f"{implementation}+{experts}" if family in MOE else implementation
            replay_text = replay_line(config, implementation, batch, seq, experts)
            try:
                saved = check_saved(config, implementation, batch, seq, experts)
            except ValueError as error:  # derive refuses the config: that is a failure to model it
                saved = {"family": family, "implementation": implementation, "b": batch, "s": seq,
                         "passed": False, "error": str(error)}
            counts[(family, check, saved["passed"])] += 1
            if not saved["passed"]:
                failures.append({**saved, "replay": replay_text})
                report(f"FAIL saved {family} {check} b={batch} s={seq}: "
                       f"{saved.get('error') or (saved['predicted'], saved['measured'])}\n"
                       f"    replay: {replay_text}")
    return {"counts": counts, "failures": failures, "seconds": time.monotonic() - started,
            "samples": samples, "seed": seed}


def replay(text: str) -> dict[str, Any]:
    """Rerun one printed draw; the saved rows autograd kept are listed when they disagree."""
    draw = json.loads(text)
    out = {"parameters": check_parameters(draw["config"])}
    if draw.get("implementation"):
        out["saved"] = check_saved(draw["config"], draw["implementation"], draw["b"], draw["s"],
                                   draw.get("experts", "grouped_mm"))
    return out


def print_counts(result: dict[str, Any]) -> None:
    """Passed / failed per family and check (parameters, sdpa, eager)."""
    counts = result["counts"]
    keys = sorted({(family, check) for family, check, _ in counts},
                  key=lambda key: (FAMILIES.index(key[0]), key[1]))
    print(f"{'family':12} {'check':18} {'passed':>7} {'failed':>7}")
    for family, check in keys:
        print(f"{family:12} {check:18} {counts[(family, check, True)]:>7} "
              f"{counts[(family, check, False)]:>7}")
    failed = sum(n for (_, _, ok), n in counts.items() if not ok)
    print(f"{result['samples']} draws per family, seed {result['seed']}: "
          f"{sum(counts.values()) - failed} checks passed, {failed} failed "
          f"in {result['seconds']:.0f} s")
