"""Megatron-LM's estimators, rebuilt from derive's tables under Megatron's convention.

The functions of ``records`` carry the names of megatron/training/theoretical_memory_usage.py
and megatron/training/training.py (core_v0.18.0). Each takes a record's ``args`` as a
mapping and returns an exact number. Nothing here re-types Megatron's arithmetic: the
parameter table is derive's own (``derive.architectures.decoder``, ``moe``, ``mla``,
``mtp``), the bytes per parameter come from ``derive.accounts``; what is Megatron's is
the *convention* under which the tables are read. A dense model is the reading with
no experts, no latents and no MTP module: every record takes the same path.

* ``tables``: the switches of a record (:class:`tables.Reading`) and the parameter
  table they select: no linear bias but the router's, norms by ``normalization``,
  no learned positions, ``padded_vocab_size``, head width ``kv_channels``;
* ``weights``: the most loaded shard (the first stage) and its bytes per GPU;
* ``activations``: the saved-for-backward tables read as Megatron reads them (the GPT
  layer whatever the model);
* ``flops``: the three passes of the GEMM table;
* ``records``: Megatron's arguments read into a reading and sizes, and the five
  estimators evaluated exactly.

Each departure from the derived ledger is quantified in ``derive.identities.megatron``
and ``derive.identities.experts``.
"""
