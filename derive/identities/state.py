"""Resident state: 16N, 18N, ZeRO's stages and Megatron's distributed optimizer, MoE ranks included."""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.experts import model_parallel_share, moe_resident_bytes
from derive.accounts.state import resident_bytes, state_bytes
from derive.architectures.decoder import Layout
from derive.architectures.tables import model_parameters
from derive.conventions.megatron import distributed_optimizer_bytes_per_parameter
from derive.identities import Deferred, identity
from derive.identities.experts import GQA, MEMORY, MLA_MTP
from derive.identities.experts import TOPIC as EXPERTS
from derive.symbols import K, N, d, e, t, t_E
from derive.tensors import Ledger

TOPIC = "resident state"
ZERO = "Rajbhandari et al. 2020 (ZeRO), section 5.1 / Figure 1"
DIST_OPT = "Megatron-LM docs/user-guide/features/dist_optimizer.md (bytes/parameter table)"
MIXED = ("2-byte compute copy and gradients", "fp32 master weights", "Adam: two fp32 moments")



@identity("bf16 + Adam = 16N", topic=TOPIC, claim=16 * N,
          source="Rajbhandari et al. 2020 (ZeRO), section 3.1; the article, section 3.2",
          assumptions=MIXED)
def bf16_adam() -> sp.Expr:
    return resident_bytes("bf16", "adam")


@identity("bf16 + Adam: parameters = 2N", topic=TOPIC, claim=2 * N,
          source="the article, section 3.2 (params_bytes)", assumptions=MIXED)
def bf16_adam_params() -> sp.Expr:
    return state_bytes("bf16", "adam").params


@identity("bf16 + Adam: gradients = 2N", topic=TOPIC, claim=2 * N,
          source="the article, section 3.2 (grads_bytes)", assumptions=MIXED)
def bf16_adam_grads() -> sp.Expr:
    return state_bytes("bf16", "adam").grads


@identity("bf16 + Adam: optimizer = KN, K = 12", topic=TOPIC, claim=K * N, where={K: 12},
          source="Rajbhandari et al. 2020 (ZeRO), section 3.1 (K = 12)",
          assumptions=MIXED + ("the fp32 master copy counts as optimizer state",))
def bf16_adam_optimizer() -> sp.Expr:
    return state_bytes("bf16", "adam").optimizer


@identity("bf16 + Adam: optimizer share = 3/4", topic=TOPIC, claim=sp.Rational(3, 4),
          source="the article, section 3.2 (why ZeRO-1 saves three quarters)", assumptions=MIXED)
def bf16_adam_optimizer_share() -> sp.Expr:
    held = state_bytes("bf16", "adam")
    return held.optimizer / held.total


@identity("bf16 with fp32 gradients + Adam = 18N", topic=TOPIC, claim=18 * N,
          source="megatron/training/theoretical_memory_usage.py num_bytes_per_parameter (18); "
                 "the article, section 3.3",
          assumptions=("bf16 compute copy", "fp32 main_grad; the bf16 grad is transient",
                       "fp32 master weights and two fp32 Adam moments"))
def bf16_fp32grad_adam() -> sp.Expr:
    return resident_bytes("bf16-fp32grad", "adam")


@identity("fp32 + Adam = 16N", topic=TOPIC, claim=16 * N,
          source="the article, section 3.3 (4 + 4 + 8, no master copy)",
          assumptions=("fp32 parameters are the master copy", "Adam: two fp32 moments"))
def fp32_adam() -> sp.Expr:
    return resident_bytes("fp32", "adam")


@identity("fp16 + Adam = 16N", topic=TOPIC, claim=16 * N,
          source="Micikevicius et al. 2018; the article, section 3.3",
          assumptions=MIXED + ("the loss-scale scalar is not counted",))
def fp16_adam() -> sp.Expr:
    return resident_bytes("fp16", "adam")


def _zero(stage: int, printed: str, claim: sp.Expr) -> None:
    @identity(f"ZeRO stage {stage} = {printed}", topic=TOPIC, claim=claim, where={K: 12},
              key=f"state.zero_stage_{stage}",
              source=ZERO, assumptions=MIXED + (f"ZeRO stage {stage} over d data-parallel ranks",))
    def zero_stage() -> sp.Expr:
        return resident_bytes("fp16", "adam", zero_stage=stage)


_zero(0, "(2 + 2 + K)Psi", (2 + 2 + K) * N)
_zero(1, "4Psi + K Psi/d", 4 * N + K * N / d)
_zero(2, "2Psi + (2 + K)Psi/d", 2 * N + (2 + K) * N / d)
_zero(3, "(2 + 2 + K)Psi/d", (2 + 2 + K) * N / d)


def _distributed_optimizer(precision: str, plain: sp.Expr, distributed: sp.Expr,
                           printed: str) -> None:
    assumptions = (f"Megatron {precision} recipe", "Adam", "distributed optimizer shards "
                   "the fp32 master (and, for fp16, fp32 main grads) and the moments over d")

    @identity(f"Megatron {precision}: {plain} bytes/parameter", topic=TOPIC, claim=plain,
              key=f"state.megatron_{precision}",
              source=DIST_OPT, assumptions=assumptions)
    def plain_side() -> sp.Expr:
        return distributed_optimizer_bytes_per_parameter(precision, distributed=False)

    @identity(f"Megatron {precision} distributed optimizer: {printed} bytes/parameter",
              topic=TOPIC, claim=distributed, source=DIST_OPT, assumptions=assumptions,
              key=f"state.megatron_{precision}_distributed")
    def distributed_side() -> sp.Expr:
        return distributed_optimizer_bytes_per_parameter(precision, distributed=True)


_distributed_optimizer("fp16", sp.Integer(20), 4 + 16 / d, "4 + 16/d")
_distributed_optimizer("bf16", sp.Integer(18), 6 + 12 / d, "6 + 12/d")
_distributed_optimizer("fp32", sp.Integer(16), 8 + 8 / d, "8 + 8/d")


#: claim-side per-rank parameter shares: experts' and everything else's.
N_e, N_o = sp.symbols("N_e N_o", positive=True, integer=True)


# ---- Mixture of Experts: 16 / 18 bytes per parameter survive expert sharding ----

@lru_cache(maxsize=None)
def _rank(features: Layout) -> Ledger:
    """One rank's share of the whole model (t, t_E e), once per layout."""
    return model_parallel_share(model_parameters(features))


@identity("MoE, bf16 + Adam, no ZeRO: 16 bytes per parameter on every rank", topic=EXPERTS,
          claim=16 * N, where=Deferred(lambda: {N: _rank(MLA_MTP).numel()}),
          source="ZeRO (Rajbhandari et al. 2020), section 3.1 (2 + 2 + K = 12)",
          assumptions=("experts over t_E e, the rest over t: the share changes, not the bytes "
                       "per parameter",))
def moe_sixteen() -> sp.Expr:
    return moe_resident_bytes(_rank(MLA_MTP), "bf16", "adam")


@identity("MoE, Megatron bf16 (fp32 grads), distributed optimizer: (6 + 12/d) N_o + (6 + 12/EDP) N_e",
          topic=EXPERTS,
          claim=(6 + sp.Rational(12) / d) * N_o + (6 + 12 / (t * d / (t_E * e))) * N_e,
          where=Deferred(lambda: {N_o: _rank(MLA_MTP).without("routed_expert").numel(),
                                  N_e: _rank(MLA_MTP).where("routed_expert").numel()}),
          source=MEMORY + "; megatron/core/distributed/distributed_data_parallel.py "
                 "(expert_data_parallel_group)",
          assumptions=("EDP = world / (t_E e p) = t d / (t_E e) expert data-parallel ranks",
                       "bf16 params and grads, fp32 main grads, master and Adam moments"))
def moe_distributed_optimizer() -> sp.Expr:
    return moe_resident_bytes(_rank(MLA_MTP), "bf16-fp32grad", "adam", zero_stage=1)


@identity("MoE, Megatron bf16 (fp32 grads), plain Adam: 18 bytes per parameter", topic=EXPERTS,
          claim=18 * N, where=Deferred(lambda: {N: _rank(GQA).numel()}), source=MEMORY,
          assumptions=("no distributed optimizer: EDP does not enter",))
def moe_eighteen() -> sp.Expr:
    return moe_resident_bytes(_rank(GQA), "bf16-fp32grad", "adam")
