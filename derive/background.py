"""Work done in a second process meanwhile (issue 28): half the proofs of the check, half the sheet's work beside the page's data.

With more than one CPU (on Linux), :class:`Background` forks a child that computes ``work()`` and sends
its pickled result back through a pipe; :meth:`Background.result` waits for it. With one CPU, or
where the child fails, the work runs in this process when its result is asked for, so a
one-core render does the same work as before and an error is raised here, as without a child.
The result is the same value either way: the child starts from this process's state.
:func:`shared` runs a list of tasks in this process and such a child, each taking the next task
from one queue (:class:`Queue`) until none is left: each task runs once, whichever process is free.
:class:`Once` is a value computed once per process that a process which did not compute it can be
handed (:meth:`Once.give`), as the render hands this process the page's parts the child derived.
"""
from __future__ import annotations

import functools
import os
import pickle
import signal
import sys
from typing import Callable, Generic, Iterator, Sequence, TypeVar

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


class Once(Generic[T]):
    """``work()``, computed at the first call and returned by every later one (``functools.cache`` of a function of
    no argument), or the value another process computed, handed in by :meth:`give` before the first call."""

    def __init__(self, work: Callable[[], T]) -> None:
        functools.update_wrapper(self, work)
        self.work = work
        self.value: T

    def __call__(self) -> T:
        if not hasattr(self, "value"):
            self.value = self.work()
        return self.value

    def give(self, value: T) -> None:
        """Take ``value`` as the work's result (computed by another process from the same state): no call computes it here."""
        self.value = value


class Queue:
    """Task indices 0 .. count-1 in a pipe, one byte each: a read of one byte takes one, so processes forked
    after the queue is made (:class:`Background`) share it and each index is taken by exactly one of them."""

    #: The most tasks a queue holds: one byte per index.
    LIMIT = 256

    def __init__(self, count: int) -> None:
        if not 0 <= count <= self.LIMIT:
            raise ValueError(f"count: a queue holds 0 to {self.LIMIT} tasks, not {count}")
        self.read, write = os.pipe()
        os.write(write, bytes(range(count)))  # at most 256 bytes: within any pipe's buffer
        os.close(write)

    def taken(self) -> Iterator[int]:
        """The indices this process takes, one at a time, until the queue is empty."""
        while token := os.read(self.read, 1):
            yield token[0]

    def close(self) -> None:
        """Close this process's end (the tasks left are taken by none)."""
        os.close(self.read)


def shared(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Every task's result, in order: this process and a forked child (:class:`Background`) each take the next
    task from one :class:`Queue` until none is left, so each task runs once, in whichever process is free.

    The child's results are sent back pickled. Tasks the child took but did not send back (it failed) run
    here, where an error is raised as without a child; with one CPU every task runs here.
    """
    queue = Queue(len(tasks))
    child = Background(lambda: {index: tasks[index]() for index in queue.taken()})
    results: dict[int, T] = {}
    try:
        for index in queue.taken():
            results[index] = tasks[index]()
        results.update(child.result())  # no child (one CPU), or a failed one: the queue is empty, nothing runs
    finally:
        child.close()
        queue.close()
    return [results[index] if index in results else tasks[index]() for index in range(len(tasks))]


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
