"""Lists that collect, while a ``with`` block runs, what a process-wide event reports.

:func:`pipeline_lib.data.provenance.recording_reads` collects the files opened for reading,
:func:`pipeline_lib.data.regular_files.recording_skipped` the image entries left out: both
are a set of open collections, each filled by every report until its block ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["Collectors"]

T = TypeVar("T")


class Collectors(Generic[T]):
    """The open collections of one kind of report, shared by every thread of the process."""

    def __init__(self) -> None:
        self._open: list[list[T]] = []
        #: Guards the set of open collections (and what a caller sets up with it).
        self.lock = threading.Lock()

    @contextmanager
    def collecting(self) -> Iterator[list[T]]:
        """A list filled with every report made while the block runs, in report order."""
        items: list[T] = []
        with self.lock:
            self._open.append(items)
        try:
            yield items
        finally:
            with self.lock:
                self._open[:] = [other for other in self._open if other is not items]

    def open_collections(self) -> tuple[list[T], ...]:
        """The lists of the blocks running now. Read without the lock, so an audit hook (it
        runs inside any ``open`` of the process, the lock holder's too) never blocks; hold
        :attr:`lock` around the call to report to exactly the blocks open at that moment."""
        return tuple(self._open)
