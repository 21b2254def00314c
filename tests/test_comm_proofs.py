"""The communication identities and the papers' communication claims, by key."""
import pytest

from derive.claims import CLAIMS, evaluate, all_claims
from derive.identities import all_identities, proof


def test_every_communication_identity_passes():
    keys = [entry.key for entry in all_identities() if entry.topic == "communication"]
    assert len(keys) >= 15
    assert all(proof(key).passed for key in keys)


@pytest.mark.parametrize("key, verdict", [
    ("comm.zero3_vs_zero2", "proven"), ("comm.sequence_parallel_layer", "proven"),
    ("comm.sequence_parallel_regather", "departs"), ("comm.dp_fp32_grads", "departs"),
    ("comm.tensor_parallel_layer", "proven"), ("comm.cp_all_gather_forward", "proven"),
])
def test_named_proofs(key, verdict):
    assert proof(key).verdict == verdict


@pytest.mark.parametrize("claim_id", [
    "rajbhandari.7.1.dp-2psi", "rajbhandari.7.2.1.os-g-2psi", "rajbhandari.7.2.2.os-g-p-3psi",
    "rajbhandari.7.2.2.os-g-p-1.5x", "rajbhandari.8.megatron-recompute-12sh", "narayanan.3.2.pipeline-bsh",
    "narayanan.3.2.tensor-8bsh", "narayanan.3.2.tensor-stage", "narayanan.3.3.1.ring-d",
    "narayanan.4.1.scatter-gather-bsh-t", "korthikanti.4.2.2.tp-four-all-reduces",
    "korthikanti.4.2.2.sp-four-and-four", "korthikanti.4.2.2.same-bandwidth",
])
def test_communication_claims_hold(claim_id):
    all_claims()
    assert evaluate(CLAIMS[claim_id]).status == "holds"
