"""Plugin packages for the tests: the example package as installed, or as a throwaway
distribution (its metadata and entry points from its own pyproject.toml) when it is not.

``.ci/run`` installs examples/droc-plugin-example into the environment; a checkout without
that install still tests the same entry points, read from the same pyproject.toml, with
nothing installed: a ``.dist-info`` folder in a temporary directory is what an install
leaves for ``importlib.metadata`` to find.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "droc-plugin-example"


def write_distribution(
    folder: Path, name: str, version: str, entry_points: Mapping[str, Mapping[str, str]]
) -> Path:
    """A ``<name>-<version>.dist-info`` in ``folder`` declaring ``entry_points`` (group ->
    name -> ``module:attribute``); returns ``folder``, to put on ``sys.path``."""
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, entries in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return folder


def example_paths(folder: Path) -> list[Path]:
    """What ``sys.path`` / ``PYTHONPATH`` needs for the example package: nothing where it is
    installed, else its ``src`` and a throwaway distribution of it made in ``folder``."""
    try:
        importlib.metadata.distribution("droc-plugin-example")
        return []
    except importlib.metadata.PackageNotFoundError:
        pass
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    write_distribution(folder, project["name"], project["version"], project["entry-points"])
    return [folder, EXAMPLE / "src"]
