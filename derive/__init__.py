"""derive: a symbolic derivation engine for the accounting of large-model training.

Every byte and FLOP is a sum over tables of tensors (``derive.tensors``);
published closed forms are identities proven against those sums
(``derive.identities``, ``python -m derive.check``).
"""

__version__ = "0.1.0"
