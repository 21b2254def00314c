"""Work done in a second process meanwhile (issue 28): the web page's data beside the sheet's sections, half the proofs of the check.

With more than one CPU (on Linux), :class:`Background` forks a child that computes ``work()`` and sends
its pickled result back through a pipe; :meth:`Background.result` waits for it. With one CPU, or
where the child fails, the work runs in this process when its result is asked for, so a
one-core render does the same work as before and an error is raised here, as without a child.
The result is the same value either way: the child starts from this process's state.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
from typing import Callable, Generic, TypeVar

from derive.printing.cache import STORE

T = TypeVar("T")


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Background(Generic[T]):
    """``work()`` computed in a forked child (more than one CPU), or here when :meth:`result` is called."""

    def __init__(self, work: Callable[[], T]) -> None:
        self.work = work
        self.child: tuple[int, int] | None = None
        self.value: T
        if cpus() > 1 and sys.platform.startswith("linux"):  # fork without exec is safe on Linux (not macOS)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _child(work, write)
            os.close(write)
            self.child = pid, read

    def close(self) -> None:
        """End a child whose result was not asked for (the render failed first)."""
        if self.child is not None:
            pid, read = self.child
            self.child = None
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)

    def result(self) -> T:
        """The work's result (once): the child's, or computed here (one CPU, or the child failed)."""
        if self.child is not None:
            pid, read = self.child
            self.child = None
            with os.fdopen(read, "rb") as stream:
                data = stream.read()
            _, status = os.waitpid(pid, 0)
            if status == 0 and data:
                self.value = pickle.loads(data)
        if not hasattr(self, "value"):
            self.value = self.work()
        return self.value


def _child(work: Callable[[], object], write: int) -> None:
    """In the child: the work's pickled result into ``write`` (nothing if it fails), the printed text saved; exit."""
    status = 1
    try:
        data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write, "wb") as stream:
            stream.write(data)
        STORE.save()
        status = 0
    except BaseException:  # the parent computes it again and raises there
        pass
    finally:
        os._exit(status)
