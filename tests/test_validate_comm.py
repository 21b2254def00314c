"""derive.validate.comm: the communication ledger against the collectives PyTorch's own parallelism issues."""
from dataclasses import replace

import pytest

from derive.conventions.pytorch_comm import CONVENTIONS, column_parallel_linears, fsdp2_padded_elements
from derive.validate import comm, comm_record, comm_runs

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("validate_comm")

# the EVEN tiny Llama: s=8, b=2, h=32, a=4, g=2 (k = 8), f=48, L=2, V=50, untied
S, B, H, K, G, F, L, V = 8, 2, 32, 8, 2, 48, 2, 50
N = V * H + L * (2 * H + H * H + 2 * H * G * K + H * H + 3 * H * F) + H + V * H   # 18720 parameters
ACTIVATION = S * B * H * 2                                                          # [s, b, h] bf16

FAKE = [case for case in comm.CASES if case.world == 2 and case.kind in ("comm-tp", "comm-sp", "comm-fsdp")]


@pytest.fixture(scope="module")
def fake_runs() -> dict[str, list[dict]]:
    """The TP, SP and FSDP2 jobs as rank 0 of two on PyTorch's fake process group (seconds)."""
    jobs = [(getattr(comm_runs, case.job), (dict(case.shape), *case.args)) for case in FAKE]
    return {case.label: ranks for case, ranks in zip(FAKE, comm_record.in_process(2, jobs))}


def _totals(result: dict) -> dict[tuple[str, str], tuple[int, int]]:
    return {(t["collective"], t["pass"]): (t["ledger"], t["measured"]) for t in result["totals"]}


def test_tensor_sequence_and_fully_sharded_agree_exactly(fake_runs):
    for case in FAKE:
        result = comm.compare(case, fake_runs[case.label])
        assert result["passed"], (case.label, result["totals"])
        assert result["calls_agree"] or case.kind == "comm-fsdp"


def test_tensor_parallel_bytes_by_hand(fake_runs):
    case = next(c for c in FAKE if c.label == "DTensor TP + loss_parallel")
    totals = _totals(comm.compare(case, fake_runs[case.label]))
    # forward: the embedding's all-reduce and the o / down projections' (2 per layer); loss_parallel's
    # max and sum of exponentials in fp32 and the target logit in bf16, per token
    assert totals["all-reduce", "forward"] == (5 * ACTIVATION + S * B * (4 + 4 + 2),) * 2 == (5280, 5280)
    # backward: DTensor all-reduces the input gradient of q, k, v, gate and up each, and the head's
    assert totals["all-reduce", "backward"] == ((3 + 2) * L * ACTIVATION + ACTIVATION,) * 2 == (11264, 11264)
    assert column_parallel_linears(comm.model(case), "attention") == 3


@pytest.mark.parametrize("label, gathers", [
    ("DTensor TP + SequenceParallel", 3 + 2),                  # q, k, v, gate, up each gather
    ("torchtitan's plan + SequenceParallel", 1 + 1),           # once per block, as Megatron
])
def test_sequence_parallel_bytes_by_hand(fake_runs, label, gathers):
    case = next(c for c in FAKE if c.label == label)
    totals = _totals(comm.compare(case, fake_runs[case.label]))
    assert totals["all-gather", "forward"][1] == (gathers * L + 1) * ACTIVATION         # + the head's input
    assert totals["reduce-scatter", "backward"][1] == (gathers * L + 1) * ACTIVATION
    assert totals["all-gather", "backward"][1] == (2 * L + 1) * ACTIVATION             # no re-gather; embedding
    assert totals["reduce-scatter", "forward"][1] == (2 * L + 1) * ACTIVATION          # o, down, embedding
    assert totals["all-reduce", "optimizer"][1] == (2 * L + 1) * H * 2                 # norm weights, bf16


def test_fully_shard_bytes_by_hand(fake_runs):
    bf16, mixed = (next(c for c in FAKE if c.kind == "comm-fsdp" and c.args == args)
                   for args in ((True, False), (False, True)))
    totals = _totals(comm.compare(bf16, fake_runs[bf16.label]))
    assert totals["all-gather", "forward"] == totals["all-gather", "backward"] == (2 * N, 2 * N) == (37440,) * 2
    assert totals["reduce-scatter", "backward"] == (2 * N, 2 * N)
    totals = _totals(comm.compare(mixed, fake_runs[mixed.label]))
    assert ("all-gather", "backward") not in totals                          # reshard_after_forward=False
    assert totals["reduce-scatter", "backward"] == (4 * N, 4 * N)            # fp32 reduce_dtype


def test_fsdp2_padding_by_hand():
    from derive.architectures.tables import edge_parameters
    model = comm.model(comm.CASES[0])
    # the embedding [50, 32] and the head (nn.Linear [50, 32]) over 3 ranks: 50 rows padded to 51
    table = edge_parameters(model.layout).map(lambda w: replace(w, shape=tuple(
        n.xreplace({s: model.values[s] for s in n.free_symbols}) for n in w.shape)))
    assert fsdp2_padded_elements(table, 3) == 51 * 32 * 2 + 33


def test_a_wrong_ledger_row_is_caught(fake_runs, monkeypatch):
    case = next(c for c in FAKE if c.label == "DTensor TP + loss_parallel")
    honest = comm.ledger(case)
    wrong = [replace(honest[0], payload=honest[0].payload + 1)] + honest[1:]
    monkeypatch.setattr(comm, "ledger", lambda c: wrong)
    result = comm.compare(case, fake_runs[case.label])
    assert not result["passed"] and not result["calls_agree"]


def test_megatron_rows_without_the_pytorch_conventions_do_not_match(fake_runs):
    for case in FAKE:
        if case.conventions and case.kind != "comm-fsdp":
            bare = replace(case, conventions=())
            assert not comm.compare(bare, fake_runs[case.label])["passed"], case.label


def test_gloo_ddp_pipeline_and_experts():
    # DDP and the pipeline need real peers: two gloo processes on localhost
    cases = [next(c for c in comm.CASES if c.world == 2 and c.kind == kind)
             for kind in ("comm-ddp", "comm-zero", "comm-pp", "comm-ep")]
    results = comm.run(comm.KINDS, cases)
    assert all(r["passed"] for r in results), [r["totals"] for r in results]
    ddp, zero, pp, ep = results
    # ZeRO-1 in PyTorch: every gradient all-reduced, every parameter broadcast once by its owner
    assert _totals(zero)["all-reduce", "backward"] == _totals(zero)["broadcast", "optimizer"] == (2 * N,) * 2
    assert _totals(ddp)["all-reduce", "backward"] == (2 * N, 2 * N)         # every gradient, bf16, once
    assert ddp["calls_measured"] > 1                                        # in several buckets
    assert ddp["excluded"][0]["bytes"] == L * 2 * S * K * 2                 # RoPE cos and sin, each layer
    m, s, b, h = 4, 6, 3, 16
    assert _totals(pp)["send-recv", "forward"] == (m * s * b * h * 2,) * 2  # one [s, b, h] per micro-batch
    s, b, h, k, e = 5, 3, 32, 4, 2
    routed = s * b * k * h * 2
    assert _totals(ep)["all-to-all", "forward"] == (2 * routed,) * 2         # dispatch and combine
    assert ep["sent_measured"] == 4 * routed * (e - 1) // e                  # uniform routing, (e-1)/e


def test_every_convention_has_a_source():
    assert all(c.source and c.statement for c in CONVENTIONS.values())
    used = {key for case in comm.CASES for key in (*case.conventions, *case.excluded)}
    assert used <= set(CONVENTIONS)


def test_checkpoint_early_stop_is_the_recompute_departure():
    # with torch.utils.checkpoint's early stop off, the rerun forward repeats every collective of the
    # layer, and Megatron's recompute rows hold without the checkpoint-early-stop convention
    from torch.utils.checkpoint import set_checkpoint_early_stop

    case = next(c for c in FAKE if c.label == "DTensor TP, every layer checkpointed")
    megatron = replace(case, conventions=tuple(k for k in case.conventions if k != "checkpoint-early-stop"))

    def without_early_stop(rank, world, *args):
        with set_checkpoint_early_stop(False):
            return comm_runs.tp(rank, world, *args)

    late = comm_record.in_process(2, [(without_early_stop, (dict(case.shape), *case.args))])[0]
    assert comm.compare(megatron, late)["passed"]
    assert not comm.compare(case, late)["passed"]
    recompute = _totals(comm.compare(megatron, late))["all-reduce", "recompute"]
    assert recompute == (2 * L * ACTIVATION,) * 2                          # o and down, each layer
