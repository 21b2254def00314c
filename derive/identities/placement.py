"""Framework placements: every profile lands in [16N, 18N] unsharded, and its sharded form (article, section 2.3)."""
from __future__ import annotations

import sympy as sp

from derive.accounts.framework_placements import PLACEMENTS
from derive.accounts.placement import placement_bytes, placement_ledger
from derive.identities import identity
from derive.symbols import L, N, d

TOPIC = "framework placement"
ARTICLE = "the article, section 2.3 (three frameworks, 16-18 bytes per parameter)"
ADAM = ("Adam: two fp32 moments", "resident tensors only; transients counted apart")


def _totals(name: str, printed: str, plain: sp.Expr, sharded: sp.Expr, sharded_printed: str,
            assumptions: tuple[str, ...]) -> None:
    plain_printed = f"{sp.sstr(plain / N)}N"
    source = f"{ARTICLE}; {PLACEMENTS[name].source}"

    @identity(f"{printed} = {plain_printed} unsharded", topic=TOPIC, claim=plain,
              key=f"placement.{name}", source=source, assumptions=assumptions + ADAM)
    def unsharded() -> sp.Expr:
        return placement_bytes(name)

    @identity(f"{printed} = {sharded_printed} per rank", topic=TOPIC, claim=sharded,
              key=f"placement.{name}.per_rank", source=source, assumptions=assumptions + ADAM + ("sharded over d data-parallel ranks",))
    def per_rank() -> sp.Expr:
        return placement_bytes(name, sharded=True)


_totals("megatron", "Megatron bf16 placement", 18 * N, (6 + 12 / d) * N, "(6 + 12/d)N",
        ("bf16 params", "fp32 main_grad (bf16 grad transient)",
         "distributed optimizer shards the fp32 master and moments"))
_totals("deepspeed-bf16-optimizer", "DeepSpeed BF16_Optimizer placement", 18 * N,
        (6 + 12 / d) * N, "(6 + 12/d)N",
        ("bf16 params", "full fp32 gradient accumulation buffer",
         "fp32 master and moments partitioned over d"))
_totals("deepspeed-zero0", "DeepSpeed ZeRO-0 bf16 placement", 16 * N, 16 * N, "16N",
        ("bf16 params and grads", "nothing partitioned"))
_totals("deepspeed-zero1", "DeepSpeed ZeRO-1 bf16 placement", 16 * N, 4 * N + 12 * N / d,
        "4N + 12N/d", ("bf16 params and grads", "optimizer state partitioned"))
_totals("deepspeed-zero2", "DeepSpeed ZeRO-2 bf16 placement", 16 * N, 2 * N + 14 * N / d,
        "2N + 14N/d", ("bf16 params", "gradients and optimizer state partitioned"))
_totals("deepspeed-zero3", "DeepSpeed ZeRO-3 bf16 placement", 16 * N, 16 * N / d, "16N/d",
        ("everything partitioned",))
_totals("torchtitan-fsdp2", "torchtitan FSDP2 placement", (4 + 4 + 8) * N,
        (4 + 4 + 8) * N / d, "(4 + 4 + 8)N/d",
        ("fp32 sharded params are the master", "fp32 sharded grads (reduce_dtype fp32)"))


@identity("FSDP2 bf16 all-gathered copy = 2N/L", topic=TOPIC, claim=2 * N / L,
          source=f"{ARTICLE}: the bf16 2 bytes exist only for the current layer; "
                 "torch/distributed/fsdp/_fully_shard (reshard_after_forward)",
          assumptions=("one FSDP unit per layer, L uniform layers", "bf16 param_dtype"))
def fsdp2_gathered_layer() -> sp.Expr:
    return placement_ledger("torchtitan-fsdp2", sharded=True).where("gathered").bytes()


@identity("every placement <= 18N unsharded", topic=TOPIC, claim=18 * N, source=ARTICLE,
          assumptions=ADAM + ("the largest of all profiles' unsharded totals",))
def largest_placement() -> sp.Expr:
    return sp.Max(*(placement_bytes(name) for name in PLACEMENTS))


@identity("every placement >= 16N unsharded", topic=TOPIC, claim=16 * N, source=ARTICLE,
          assumptions=ADAM + ("the smallest of all profiles' unsharded totals",))
def smallest_placement() -> sp.Expr:
    return sp.Min(*(placement_bytes(name) for name in PLACEMENTS))
