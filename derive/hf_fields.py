"""How a Hugging Face ``config.json`` is read: checked fields (:class:`Fields`) and one family's table (:class:`Family`).

A :class:`Family` is data: the rows of ``derive.architectures.decoder.Layout`` every model of
a ``model_type`` has, the config flags that switch rows, and the sizes read (:class:`Read`),
as transformers 5.23 builds the model (``transformers/models/<family>/modeling_<family>.py``).
:meth:`Family.read` interprets it; the web page applies the same tables (``Family.data()``).
A missing size or an inconsistent field is a ValueError naming the config field.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from derive.architectures.decoder import Layout
from derive.inputs import MAX_SIZE

_MISSING = object()


class Fields:
    """A parsed config.json whose reads raise a ValueError naming the field."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.model_type = self.config.get("model_type", "")

    def get(self, name: str, default: Any = None) -> Any:
        """``config[name]``, or ``default`` when absent or null."""
        value = self.config.get(name)
        return default if value is None else value

    def size(self, name: str, default: Any = _MISSING) -> int:
        """A positive integer field up to MAX_SIZE (``default`` when absent or null, else required)."""
        value = self.config.get(name)
        if value is None:
            if default is _MISSING:
                raise ValueError(f"{name}: missing from the {self.model_type} config")
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SIZE:
            raise ValueError(f"{name}: must be a positive integer up to 2^53, got {value!r}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A true/false field, ``default`` when absent."""
        value = self.config.get(name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be true or false, got {value!r}")
        return value

    def first(self, names: tuple[str, ...]) -> int:
        """The first of ``names`` present (a field and its transformers-5 alias), as a :class:`Read` of them reads it."""
        return _read(self, Read(names), {})[1]


#: What a family reader finds in a config: the keyword arguments of derive.model.Model
#: (layout, layers, hidden, heads, kv_heads, ffn, vocab, seq, head_dim, sizes, moe_layers).
Shape = dict[str, Any]


@dataclass(frozen=True)
class Read:
    """One size of a config: the first of ``names`` given, else ``times`` x the size ``like``, else ``default``.

    With none of them a missing field is an error naming ``names[0]``, unless not ``required``
    (the size is then None: a head width the config leaves to h / a). ``absent``: the config
    class's default when no name is in the config at all (a null still reads as ``like`` or
    None: MistralConfig's num_key_value_heads is 8 when absent, num_attention_heads when null).
    """

    names: tuple[str, ...] = ()
    default: int | None = None
    like: str | None = None
    times: int = 1
    required: bool = True
    absent: int | None = None

    def data(self) -> dict[str, Any]:
        """This read as JSON data (the web page's interpreter applies it)."""
        return {"names": list(self.names), "default": self.default, "like": self.like,
                "times": self.times, "required": self.required, "absent": self.absent}


#: The sizes a Llama-style config names (transformers' LlamaConfig), in reading order;
#: num_key_value_heads defaults to num_attention_heads.
DECODER_SIZES: dict[str, Read] = {
    "hidden": Read(("hidden_size",)), "heads": Read(("num_attention_heads",)),
    "kv_heads": Read(("num_key_value_heads",), like="heads"),
    "layers": Read(("num_hidden_layers",)), "ffn": Read(("intermediate_size",)),
    "vocab": Read(("vocab_size",)), "seq": Read(("max_position_embeddings",)),
}
#: A config's head width: head_dim, else h / a.
HEAD_DIM = Read(("head_dim",), required=False)


def kv_heads_absent(default: int) -> dict[str, Read]:
    """DECODER_SIZES whose num_key_value_heads is ``default`` when the config leaves it out
    (the config class's field default; a null reads as num_attention_heads)."""
    return {**DECODER_SIZES, "kv_heads": Read(("num_key_value_heads",), like="heads",
                                               absent=default)}


#: Divisibility the sizes must meet, in checking order: (divisor, dividend, head width): a
#: head-width rule holds only where the head width is h / a (no head_dim given).
DIVIDES: tuple[tuple[str, str, bool], ...] = (("kv_heads", "heads", False), ("heads", "hidden", True))


@dataclass(frozen=True)
class Family:
    """How one model_type's config becomes a Model: a data table that :meth:`read` interprets.

    ``layout``: the rows every model of the family has; ``flags``: (Layout field, config
    field, transformers' default) for each row a config switches; ``sizes``: Model field
    -> :class:`Read`; ``head_dim``: the head-width read, None where the family has none
    (k = h / a); ``positions``: learned positions, s_max = seq. ``source``: the modeling
    file the table follows. The web page applies the same table (``data()``).
    """

    source: str
    layout: Layout = field(default_factory=Layout)
    flags: tuple[tuple[str, str, bool], ...] = (("tied", "tie_word_embeddings", False),)
    sizes: Mapping[str, Read] = field(default_factory=lambda: dict(DECODER_SIZES))
    head_dim: Read | None = HEAD_DIM
    positions: bool = False

    def layout_for(self, flags: Mapping[str, bool]) -> Layout:
        """The layout at the config flags' values (config field -> bool)."""
        return replace(self.layout, **{row: flags[name] for row, name, _ in self.flags})

    def config_flags(self) -> dict[str, bool]:
        """Each config flag the family reads -> its default, in reading order."""
        return {name: default for _, name, default in self.flags}

    def read(self, c: Fields) -> Shape:
        """The family's shape of config ``c``; a ValueError names the first bad config field."""
        flags = {name: c.flag(name, default) for name, default in self.config_flags().items()}
        sizes: dict[str, int] = {}
        named: dict[str, str] = {}
        for size, read in self.sizes.items():
            named[size], sizes[size] = _read(c, read, sizes)
        head_dim = None if self.head_dim is None else _read(c, self.head_dim, sizes)[1]
        for divisor, dividend, head_width in DIVIDES:
            if head_width and head_dim is not None:
                continue
            if sizes[dividend] % sizes[divisor]:
                note = (" (and the config gives no head_dim)"
                        if head_width and self.head_dim is not None else "")
                raise ValueError(f"{named[divisor]}: {sizes[divisor]} does not divide "
                                 f"{named[dividend]} = {sizes[dividend]}{note}")
        if head_dim is not None and head_dim * sizes["heads"] == sizes["hidden"]:
            head_dim = None  # the usual h / a: keep the article's symbols
        shape: Shape = dict(layout=self.layout_for(flags), head_dim=head_dim, **sizes)
        if self.positions:
            shape["sizes"] = {"s_max": sizes["seq"]}
        return shape

    def data(self) -> dict[str, Any]:
        """The table as JSON data: flags, sizes, head width, positions (the page's interpreter)."""
        return {"flags": [[name, default] for name, default in self.config_flags().items()],
                "sizes": [[size, read.data()] for size, read in self.sizes.items()],
                "head_dim": None if self.head_dim is None else self.head_dim.data(),
                "divides": [list(pair) for pair in DIVIDES], "positions": self.positions}


def _read(c: Fields, read: Read, sizes: Mapping[str, int]) -> tuple[str, int | None]:
    """(the config field read, its value) for ``read``; defaults as :class:`Read` says."""
    for name in read.names:
        if c.config.get(name) is not None:
            return name, c.size(name)
    name = read.names[0] if read.names else str(read.like)
    if read.absent is not None and not any(field in c.config for field in read.names):
        return name, read.absent
    if read.like is not None:
        return name, read.times * sizes[read.like]
    if read.default is not None:
        return name, c.size(name, read.default)
    if read.required:
        return name, c.size(name)
    return name, None
