"""The harness's comparison modules (benchmarks/reference/compare_*.py) for the tests.

They import their siblings by name (``parity``, ``weights``, ...), as the trace command
does, so the folder goes on ``sys.path`` once here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

REFERENCE = Path(__file__).resolve().parents[2] / "benchmarks" / "reference"


def reference_module(name: str) -> ModuleType:
    """``benchmarks/reference/<name>.py`` imported as ``name``."""
    if str(REFERENCE) not in sys.path:
        sys.path.insert(0, str(REFERENCE))
    return importlib.import_module(name)


def failures(differences: list) -> list[str]:
    """One line per difference beyond its tolerance (empty when all are within)."""
    return [
        f"{d.quantity}: {d.largest:.3g} > {d.tolerance:.3g} ({d.measure}; {d.why})"
        for d in differences
        if not d.within
    ]
