"""docs/validation.md's "derive and the tools you know" table is what python -m derive.peers prints now."""
from pathlib import Path

import pytest

from derive.identities.peers import DEPARTURES
from derive.peers.__main__ import main
from derive.peers.table import PEERS, leaves, load, markdown

ROOT = Path(__file__).parent.parent
START, END = "<!-- peers-table:start -->\n", "<!-- peers-table:end -->"


def test_readme_block_is_the_generated_table():
    readme = (ROOT / "docs" / "validation.md").read_text()
    block = readme[readme.index(START) + len(START):readme.index(END)]
    assert block == markdown(load(ROOT / "tests" / "reference"))
    assert "| llm-analysis | llama3-70b get_num_params_total | 50,712,551,424 | 70,553,706,496 |" in block


def test_every_registered_peer_departure_closes_a_real_gap():
    used = set()
    references = load(ROOT / "tests" / "reference")
    for peer, (reproduce, _) in PEERS.items():
        data = references[peer]
        for record in data["records"]:
            reproductions = reproduce(record, data["models"])
            for key, _value in leaves(record["result"]):
                if key in reproductions:
                    used |= {name for name, size in reproductions[key].sizes.items() if size != 0}
    assert used == set(DEPARTURES)


def test_cli_names_a_missing_folder(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("DIR: no reference file") and err.count("\n") == 1


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_reference_files_name_their_pinned_versions(peer):
    versions = load(ROOT / "tests" / "reference")[peer]["versions"]
    pinned = {"deepspeed": "0.19.8", "accelerate": "1.15.0", "llm-analysis": "0.2.2", "torchtitan": "0.3.0",
              "calflops": "0.3.2", "torch": "2.13.0+cpu"}
    assert all(versions[name] == pinned[name] for name in versions if name in pinned)
    assert set(versions) & set(pinned)


def test_cli_names_a_file_that_is_not_json(tmp_path, capsys):
    for peer in PEERS:
        (tmp_path / f"peers_{peer}.json").write_text("{not json")
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("DIR: a reference file")


def test_an_unknown_model_is_a_value_error():
    from derive.peers import model_of
    with pytest.raises(ValueError, match="model"):
        model_of("llama-9000", {})
