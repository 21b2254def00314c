"""Model presets reject shapes that cannot exist."""
import pytest

from derive.model import Model
from derive.presets import hardware, model


@pytest.mark.parametrize("kwargs, field", [
    (dict(layers=0), "layers"),
    (dict(hidden=-4096), "hidden"),
    (dict(vocab=1.5), "vocab"),
    (dict(heads=3), "heads"),       # 3 does not divide 4096
    (dict(kv_heads=5), "kv_heads"),  # 5 does not divide 32
    (dict(family="mamba"), "family"),
])
def test_bad_shapes_name_the_field(kwargs, field):
    shape = dict(name="x", family="llama", layers=32, hidden=4096, heads=32, kv_heads=8,
                 ffn=14336, vocab=128256, seq=8192)
    shape.update(kwargs)
    with pytest.raises(ValueError, match=f"^{field}:"):
        Model(**shape)


def test_aliases_and_unknown_names():
    assert model("70b").name == "llama3-70b"
    with pytest.raises(ValueError, match="^model:"):
        model("llama4")
    with pytest.raises(ValueError, match="^peak:"):
        hardware("tpu")
