"""Import a script or a package of benchmarks/ as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_benchmark(relative: str, name: str | None = None) -> ModuleType:
    """``benchmarks/<relative>`` as a module named ``name`` (its stem by default).

    Registered in ``sys.modules`` first, so dataclasses and pickling inside it resolve; its
    folder goes on ``sys.path`` (as when the script runs), so its sibling imports resolve.
    """
    path = REPO / "benchmarks" / relative
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    module_name = name or path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_benchmark_package(relative: str) -> ModuleType:
    """``benchmarks/<relative>/`` as the top-level package its script imports (named after its
    folder, as when the script runs from benchmarks/), with every module in it imported.

    A package already loaded from that folder is returned as it is, so its classes stay the
    same objects for every test.
    """
    folder = REPO / "benchmarks" / relative
    name = folder.name
    loaded = sys.modules.get(name)
    if loaded is None or list(getattr(loaded, "__path__", [])) != [str(folder)]:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
    for path in sorted(folder.glob("*.py")):
        if path.stem != "__init__":
            importlib.import_module(f"{name}.{path.stem}")
    return loaded
