"""The harness's comparison modules (benchmarks/reference/compare_*.py) for the tests.

They import their siblings by name (``parity``, ``weights``, ...), as the trace command
does, so the folder goes on ``sys.path`` once here.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import torch

REFERENCE = Path(__file__).resolve().parents[2] / "benchmarks" / "reference"


def reference_module(name: str) -> ModuleType:
    """``benchmarks/reference/<name>.py`` imported as ``name``."""
    if str(REFERENCE) not in sys.path:
        sys.path.insert(0, str(REFERENCE))
    return importlib.import_module(name)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread: the comparisons' small kernels only contend for shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def failures(differences: list) -> list[str]:
    """One line per difference beyond its tolerance (empty when all are within)."""
    return [
        f"{d.quantity}: {d.largest:.3g} > {d.tolerance:.3g} ({d.measure}; {d.why})"
        for d in differences
        if not d.within
    ]
