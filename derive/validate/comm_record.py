"""Every collective PyTorch issues on a rank, caught at the dispatcher, and the gloo processes that run them.

``Recorder`` is a ``TorchDispatchMode``: every ``c10d`` op (what ``torch.distributed``'s
functions, DDP's reducer and FSDP2 call) and every ``_c10d_functional`` op (what
DTensor and the functional collectives call) passes through it with its tensors,
so a row holds the buffer PyTorch really moved: the collective, the process group
(its label and size), the dtype and element count, the pass it ran in, and for
an all-to-all the elements this rank kept for itself. ``spawn`` starts one gloo
process per rank on localhost (torch.multiprocessing), runs a job in each, and
returns every rank's rows (the processes forked from one fork server); a run that does not finish
in time is killed.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Callable

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from derive.validate.measure import DTYPE_NAMES  # noqa: E402

DTYPE_NAMES.setdefault(torch.int32, "int32")

#: dispatcher op (namespace.name) -> the collective it is, in the ledger's words
#: (torch/csrc/distributed/c10d/Ops.cpp and Functional.cpp register these ops).
COLLECTIVES: dict[str, str] = {
    "c10d.allreduce_": "all-reduce", "c10d.allreduce_coalesced_": "all-reduce",
    "c10d._allgather_base_": "all-gather", "c10d.allgather_": "all-gather",
    "c10d.allgather_into_tensor_coalesced_": "all-gather",
    "c10d._reduce_scatter_base_": "reduce-scatter", "c10d.reduce_scatter_": "reduce-scatter",
    "c10d.reduce_scatter_tensor_coalesced_": "reduce-scatter",
    "c10d.alltoall_base_": "all-to-all", "c10d.alltoall_": "all-to-all",
    "c10d.send": "send", "c10d.recv_": "recv", "c10d.broadcast_": "broadcast",
    "_c10d_functional.all_reduce": "all-reduce", "_c10d_functional.all_reduce_": "all-reduce",
    "_c10d_functional.all_gather_into_tensor": "all-gather",
    "_c10d_functional.reduce_scatter_tensor": "reduce-scatter",
    "_c10d_functional.all_to_all_single": "all-to-all",
    "_c10d_functional.broadcast": "broadcast", "_c10d_functional.broadcast_": "broadcast",
}
#: ops that only wait for or free a collective's result
IGNORED = {"c10d.barrier", "c10d.monitored_barrier_", "_c10d_functional.wait_tensor",
           "_c10d_functional._wrap_tensor_autograd"}
#: how long a rank may wait for its peers before the run is declared hung
TIMEOUT_S = 120


@dataclass(frozen=True)
class Record:
    """One collective one rank issued: the full buffer it moved, its group and pass."""

    collective: str
    group: str
    size: int
    dtype: str
    numel: int
    bytes: int
    pass_: str
    op: str
    kept: int = 0     # all-to-all: bytes this rank kept for itself (its own split)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _process_group(value: Any) -> dist.ProcessGroup | None:
    """The ProcessGroup a c10d op receives boxed as a TorchScript object, else None."""
    if isinstance(value, torch.ScriptObject) and value._type().qualified_name().endswith(
            "c10d.ProcessGroup"):
        return dist.ProcessGroup.unbox(value)
    return None


class Recorder(TorchDispatchMode):
    """Records each c10d / functional collective: the full buffer, its group's label and the pass."""

    def __init__(self, labels: dict[str, str]) -> None:
        super().__init__()
        self.labels = labels          # process group name -> ledger group ("dp", "tp", ...)
        self.pass_ = "forward"
        self.tensor_pass: dict[int, str] = {}   # data_ptr -> pass, for ops issued out of order
        self.rows: list[Record] = []

    def _group(self, args: tuple, kwargs: dict) -> tuple[str, int]:
        for value in (*args, *kwargs.values()):
            if isinstance(value, str) and value in self.labels:
                group = dist.distributed_c10d._resolve_process_group(value)
                return self.labels[value], group.size()
            group = _process_group(value)
            if group is not None and group.group_name in self.labels:
                return self.labels[group.group_name], group.size()
        kinds = [type(value).__name__ for value in (*args, *kwargs.values())]
        raise ValueError(f"group: a collective ran in a process group with no label "
                         f"({self.labels}; arguments {kinds})")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # Let DTensor desugar its op first, so the collectives it issues reach this mode
        # (as CommDebugMode does, torch/distributed/tensor/debug/_comm_mode.py).
        if any(issubclass(kind, DTensor) for kind in types):
            return NotImplemented
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = f"{func.namespace}.{func._schema.name.split('::')[-1]}"
        if func.namespace not in ("c10d", "_c10d_functional") or name in IGNORED:
            return out
        if name not in COLLECTIVES:
            raise ValueError(f"op: {name} is a collective derive does not map to a ledger kind")
        self.rows.append(self._row(name, args, kwargs, out))
        return out

    def _row(self, name: str, args: tuple, kwargs: dict, out: Any) -> Record:
        """The full buffer: the gathered output, the scattered input, the reduced or exchanged tensor."""
        collective = COLLECTIVES[name]
        group, size = self._group(args, kwargs)
        functional = name.startswith("_c10d_functional")
        tensors = _tensors(args[0])
        if collective == "all-gather":
            full = _tensors(out)[0] if functional else tensors[0]   # c10d ops: (output, input)
        elif collective == "reduce-scatter":
            full = args[0] if functional else _tensors(args[1])[0]  # c10d ops: (output, input)
        elif collective == "all-to-all" and not functional:
            full = _tensors(args[1])[0]                             # alltoall_base_(output, input, ...)
        else:
            full = tensors[0]
        kept = 0
        if collective == "all-to-all":
            splits = (args[2] if functional else args[4]) or []     # input split sizes, rows
            kept = self._kept(full, splits, args, functional)
        pass_ = self.tensor_pass.get(full.data_ptr(), self.pass_)
        return Record(collective, group, size, DTYPE_NAMES[full.dtype], full.numel(),
                      full.numel() * full.element_size(), pass_, name, kept)

    def _kept(self, full: torch.Tensor, splits: list[int], args: tuple, functional: bool) -> int:
        """Bytes of the split an all-to-all sends to its own rank (no wire)."""
        group = (dist.distributed_c10d._resolve_process_group(args[3]) if functional
                 else next(g for g in map(_process_group, args) if g is not None))
        rows = splits[group.rank()] if splits else full.shape[0] // group.size()
        return rows * math.prod(full.shape[1:]) * full.element_size()


def _worker(rank: int, world: int, jobs: list[tuple[Callable, tuple]], folder: str) -> None:
    """One rank: rendezvous through a file in the run's own folder (no TCP port another run could
    take between choosing and binding it), run the jobs, and leave only when every rank is done:
    a rank that tears gloo down while its peer still talks to it aborts the peer."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'rendezvous')}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=TIMEOUT_S))
    try:
        results = [job(rank, world, *args) for job, args in jobs]
        with open(os.path.join(folder, f"{rank}.json"), "w") as out:
            json.dump(results, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


#: What the rank processes need loaded: a fork server (multiprocessing's forkserver, a fresh interpreter
#: that never ran a collective or a thread pool) imports them once and forks every rank of every
#: world from itself, instead of each rank importing torch anew as a spawned process does.
RANK_MODULES = ["derive.validate.comm_record", "derive.validate.comm_runs"]


def spawn(world: int, jobs: list[tuple[Callable, tuple]]) -> list[list[Any]]:
    """Each ``job(rank, world, *args)`` in turn in ``world`` gloo processes: results[job][rank]."""
    mp.get_context("forkserver").set_forkserver_preload(RANK_MODULES)
    with tempfile.TemporaryDirectory() as folder:
        context = mp.start_processes(_worker, args=(world, jobs, folder),
                                     nprocs=world, join=False, start_method="forkserver")
        try:
            deadline = time.monotonic() + TIMEOUT_S * (len(jobs) + 1)
            while not context.join(timeout=1):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"world {world}: the gloo processes ran past {deadline:.0f} s")
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
        by_rank = []
        for rank in range(world):
            with open(os.path.join(folder, f"{rank}.json")) as result:
                by_rank.append(json.load(result))
    return [[by_rank[rank][job] for rank in range(world)] for job in range(len(jobs))]


def in_process(world: int, jobs: list[tuple[Callable, tuple]]) -> list[list[Any]]:
    """Each job as rank 0 of ``world`` on PyTorch's fake process group (no peers, no wire): results[job][0].

    The fake backend (torch/testing/_internal/distributed/fake_pg.py) completes every
    collective at once with the buffers it was given, so rank 0 issues exactly the calls it
    would issue among real peers wherever no value it receives steers it (DTensor TP, FSDP2).
    """
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        return [[job(0, world, *args)] for job, args in jobs]
    finally:
        dist.destroy_process_group()


def as_dict(rows: list[Record]) -> list[dict]:
    """Records as JSON-able dicts."""
    return [asdict(row) for row in rows]
