"""Element sizes in bytes: the one table every byte count in derive goes through."""
from __future__ import annotations

from fractions import Fraction

#: dtype name -> bytes per element (IEEE/PyTorch storage sizes; a 4-bit element is half a byte).
DTYPE_BYTES: dict[str, int | Fraction] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    # 8-bit floats (E4M3 / E5M2, torch.float8_e4m3fn / float8_e5m2) and MXFP8's E8M0 block
    # scales (OCP Microscaling Formats MX v1.0, section 5.3; torch.float8_e8m0fnu)
    "fp8": 1,
    "e8m0": 1,
    # 4-bit floats (E2M1, two per byte: NVFP4 / MXFP4; OCP MX v1.0, section 5.3.3)
    "fp4": Fraction(1, 2),
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int32": 4,
    "int64": 8,
}


def dtype_bytes(dtype: str) -> int | Fraction:
    """Bytes per element of ``dtype``; ValueError naming the dtype if unknown."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        known = ", ".join(sorted(DTYPE_BYTES))
        raise ValueError(f"dtype: unknown dtype {dtype!r} (known: {known})") from None


#: Explicit fraction (mantissa) bits of the floating-point dtypes (IEEE 754 binary32/binary16;
#: bfloat16: 8 exponent and 7 fraction bits, Google Brain / Intel BF16 spec).
MANTISSA_BITS: dict[str, int] = {"fp32": 23, "fp16": 10, "bf16": 7}


def unit_roundoff(dtype: str) -> Fraction:
    """Largest relative rounding error of round-to-nearest in ``dtype``: 2^-(fraction bits + 1)."""
    if dtype not in MANTISSA_BITS:
        raise ValueError(f"dtype: not a floating-point dtype {dtype!r} (known: {', '.join(MANTISSA_BITS)})")
    return Fraction(1, 2 ** (MANTISSA_BITS[dtype] + 1))
