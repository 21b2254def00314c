"""Element sizes in bytes: the one table every byte count in derive goes through."""
from __future__ import annotations

#: dtype name -> bytes per element (IEEE/PyTorch storage sizes).
DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int64": 8,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype``; ValueError naming the dtype if unknown."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        known = ", ".join(sorted(DTYPE_BYTES))
        raise ValueError(f"dtype: unknown dtype {dtype!r} (known: {known})") from None
