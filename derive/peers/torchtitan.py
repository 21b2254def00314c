"""torchtitan 0.3.0's get_nparams_and_flops: derive's N, and derive-full less one departure (= the ``torchtitan`` convention)."""
from __future__ import annotations

from derive.architectures.decoder import LLAMA
from derive.architectures.tables import parameter_count
from derive.conventions import CONVENTIONS
from derive.model import Model
from derive.peers import Reproduction


NORMS = "norm weights counted at 6 FLOPs per parameter"


def model_of(shape: dict, seq: int) -> Model:
    """derive's Llama :class:`Model` for a torchtitan llama3 flavor's shape at ``seq`` tokens."""
    if shape["enable_weight_tying"]:
        raise ValueError("shape: tied llama3 flavors have no derive family")
    return Model("torchtitan", "llama", shape["n_layers"], shape["dim"], shape["n_heads"],
                 shape["n_kv_heads"], shape["hidden_dim"], shape["vocab_size"], seq, "torchtitan flavor")


def reproduce(record: dict, models: dict[str, dict]) -> dict[str, Reproduction]:
    """nparams = derive's N; num_flops_per_token = the ``torchtitan`` convention at the record's seq_len."""
    model = model_of(record["shape"], record["kwargs"]["seq_len"])
    return {
        "nparams": Reproduction("parameter table (N)", model.subs(parameter_count(LLAMA))),
        "num_flops_per_token": Reproduction(
            "convention derive-full (the departure gives convention torchtitan = palm - 6Vh)",
            CONVENTIONS["derive-full"]("llama"), ((NORMS, 1),), tuple(model.values.items())),
    }
