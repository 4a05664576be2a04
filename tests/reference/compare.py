"""Import a family's ``benchmarks/reference/compare_<family>.py`` (NumPy, torch, scipy: no
TensorFlow), with its sibling modules (``parity``, ``distribution``) importable by name."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "reference"


def load_compare(family: str) -> ModuleType:
    """``compare_<family>`` from the harness folder."""
    if str(HARNESS) not in sys.path:
        sys.path.insert(0, str(HARNESS))
    return importlib.import_module(f"compare_{family}")
