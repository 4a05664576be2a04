"""Import a script of benchmarks/ as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_benchmark(relative: str, name: str | None = None) -> ModuleType:
    """``benchmarks/<relative>`` as a module named ``name`` (its stem by default).

    Registered in ``sys.modules`` first, so dataclasses and pickling inside it resolve.
    """
    path = REPO / "benchmarks" / relative
    module_name = name or path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
