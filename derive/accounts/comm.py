"""Communication accounts: every collective of one training step, a row per collective.

Each row moves a tensor derive already tables: the layer input [s, b, h] of
``derive.architectures.saved.layer_input`` (tensor- and pipeline-parallel activations, the
k_E routed copies of expert parallelism), the k and v rows of the saved tables (context
parallel), the loss's per-token rows of ``output_saved`` (vocabulary-parallel cross entropy),
and the gradient and parameter rows of ``derive.accounts.state.state_ledger`` over the rank's
parameter share (data parallel). ``sent`` = payload x the algorithm's factor
(``derive.accounts.collectives``), never a typed constant.

The rows are those of the most loaded rank: ceil(L / (p v)) layers in each of its v chunks (balanced:
derive.accounts.pipeline_split.most_layers)
(MoE layers first, up to L_E), the last pipeline stage's edges when p > 1 (final norm, output
head, loss; with p = 1 every edge, embedding included), and for send/recv a rank with both
neighbours (every rank of an interleaved chain but its two ends). Under context parallelism the
gradients are reduced over d c ranks (Megatron's data-parallel group with context parallel,
megatron/core/parallel_state.py). ``received`` equals ``sent`` on every row: ring collectives are
symmetric, routing is taken as uniform, and a middle pipeline stage receives what it sends.
Full recompute repeats the forward's tensor-, context- and expert-parallel collectives (pass
``recompute``); selective recompute re-runs only core attention, which moves bytes only under
context parallelism (its K/V exchange is repeated).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.comm_row import Collective, LayoutTerms
from derive.accounts.comm_rows import rows
from derive.accounts.pipeline_split import most_layers
from derive.architectures.decoder import LLAMA, Layout
from derive.model import Model
from derive.parallelism import Parallelism
from derive.symbols import L, L_E, c, d, e, m, p, t, t_E, v

#: The groups every per-rank total names (edp only for a model with routed experts).
GROUPS = ("dp", "tp", "pp", "cp", "ep")

#: The ledger's refusal of context parallelism over multi-head latent attention: it counts CP's K/V ring for
#: attention with K and V heads, and MLA's compressed K/V under CP is not among its rows. ``{model}``: " (name)"
#: in derive comm's and derive predict's line (``check_context``), "" in derive plan's reason
#: (derive.planning.ranking.REASONS): the same words.
CONTEXT_OVER_MLA = "context parallelism over multi-head latent attention{model} is not modelled"


def context_modelled(model: Model) -> bool:
    """Whether the ledger counts context parallelism over ``model``'s attention (not over MLA: CONTEXT_OVER_MLA)."""
    return model.dense or model.layout is None or model.layout.mla is None


def check_context(model: Model, cp: int) -> None:
    """ValueError naming cp where ``cp`` > 1 and the ledger cannot count context parallelism over ``model``."""
    if cp > 1 and not context_modelled(model):
        raise ValueError("cp: " + CONTEXT_OVER_MLA.format(model=f" ({model.name})"))


__all__ = ["CONTEXT_OVER_MLA", "Collective", "GROUPS", "check_context", "collectives", "context_modelled",
           "symbolic_collectives", "per_rank_bytes_per_step", "group_bytes"]


def _numeric_terms(model: Model, layout: Parallelism) -> LayoutTerms:
    """The layout's sizes as integers, with the most loaded rank's layer counts (pipeline_split.most_layers)."""
    on_rank = int(most_layers(layout.balanced, model.layers, layout.pp, layout.vp))
    moe_on_rank = min(on_rank, len(model.moe_layers))
    return LayoutTerms(
        t=sp.Integer(layout.tp), p=sp.Integer(layout.pp), v=sp.Integer(layout.vp),
        c=sp.Integer(layout.cp), d=sp.Integer(layout.dp), e=sp.Integer(layout.ep),
        t_E=sp.Integer(layout.etp), m=sp.Integer(layout.micro_batches),
        dense_layers=sp.Integer(on_rank - moe_on_rank), moe_layers=sp.Integer(moe_on_rank),
        capacity=None if layout.capacity_factor is None else sp.Rational(layout.capacity_factor),
        replicas=sp.Integer(layout.replicas))


def collectives(model: Model, layout: Parallelism) -> list[Collective]:
    """The rows of ``model`` under ``layout`` on its most loaded rank, numeric (sympy Integer / Rational).

    Rows whose group has one rank (nothing moves) are left out. ValueError naming the field
    when the layout does not divide the model.
    """
    layout.check(model)
    check_context(model, layout.cp)
    terms = _numeric_terms(model, layout)
    found = rows(model.architecture, terms, layout, layout.pp == 1)
    at = {"b": layout.micro_batch}
    out = []
    for row in found:
        numeric = row.evaluated(lambda expr: model.at(expr, **at))
        if numeric.ranks == 1 or numeric.count == 0 or numeric.sent == 0:
            continue
        out.append(numeric)
    return out


def symbolic_collectives(architecture: Layout = LLAMA, layout: Parallelism | None = None,
                         *, moe: bool = False, whole_model: bool = False) -> list[Collective]:
    """The rows in symbols: t, p, v, c, d, e, t_E, m, b and the model's (L / p layers per rank; L_E / p MoE ones).

    ``layout`` supplies the flags (sequence parallel, ZeRO stage, precision, recompute, CP
    variant, algorithm); its sizes are ignored. With ``moe`` the rank holds L_E / p MoE layers
    and (L - L_E) / p dense ones. ``whole_model``: the rank holds every edge (p = 1), not the
    last stage's.
    """
    layout = layout or Parallelism()
    terms = LayoutTerms(t=t, p=p, v=v, c=c, d=d, e=e, t_E=t_E, m=m,
                        dense_layers=(L - L_E) / p if moe else L / p,
                        moe_layers=L_E / p if moe else sp.Integer(0), capacity=None, symbolic=True)
    return rows(architecture, terms, layout, whole_model)


def group_bytes(found: list[Collective], group: str, pass_: str | None = None) -> sp.Expr:
    """Bytes one rank sends in one step over ``group`` (in ``pass_`` only, if given)."""
    return sp.Add(*(row.sent * row.count for row in found
                    if row.group == group and (pass_ is None or row.pass_ == pass_)))


def per_rank_bytes_per_step(model: Model, layout: Parallelism) -> dict[str, int]:
    """Bytes each rank sends in one step, by group (dp, tp, pp, cp, ep; edp for a model with experts)."""
    found = collectives(model, layout)
    groups = GROUPS + (("edp",) if dict(model.sizes).get("E") else ())
    return {group: int(sp.ceiling(group_bytes(found, group))) for group in groups}
