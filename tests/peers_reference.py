"""Shared by tests/test_peers_*.py: a peer's reference file and every number in it, reproduced."""
from __future__ import annotations

import json
from pathlib import Path

from derive.peers import as_number
from derive.peers.table import PEERS, leaves

FOLDER = Path(__file__).parent / "reference"


def reference(peer: str) -> dict:
    """tests/reference/peers_<peer>.json."""
    return json.loads((FOLDER / f"peers_{peer}.json").read_text())


def unreproduced(peer: str, skip=lambda record, key, value: False) -> tuple[int, list]:
    """(numbers checked, mismatches) over every number of ``peer``'s file, ``skip`` aside."""
    data, (reproduce, _) = reference(peer), PEERS[peer]
    checked, wrong = 0, []
    for record in data["records"]:
        reproductions = reproduce(record, data["models"])
        for key, value in leaves(record["result"]):
            if skip(record, key, value):
                continue
            checked += 1
            predicted = reproductions[key].value
            if predicted != as_number(value):
                wrong.append((record["id"], key, value, predicted))
    return checked, wrong
