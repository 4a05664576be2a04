"""No module imports another module's private names or another package's private modules.

docs/architecture.md, "Conventions": a module never imports another module's private names;
when two modules need the same thing, one makes it public. The check reads every ``.py`` file under
``pipeline_lib/``, ``benchmarks/`` and ``workflow/`` with :mod:`ast` (imports inside functions
included) and reports, per file and line:

* ``from m import _name``: a private name (one leading underscore, not a dunder) of another
  first-party module;
* a private module (a dotted path with a ``_x`` part, e.g. ``pkg._common``) imported from
  outside its parent package (``pkg``). Modules of that package (``pkg.gde``) may import it.

Only first-party modules count (``pipeline_lib``, ``benchmarks``, ``workflow``, ``tests`` and
scripts or packages beside the importer): third-party private modules such as
``torch._dynamo`` are that library's business. tests/ is not checked: white-box tests may
import private names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("pipeline_lib", "benchmarks", "workflow")
FIRST_PARTY = frozenset({"pipeline_lib", "benchmarks", "workflow", "tests"})


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def module_name(path: Path, root: Path) -> str:
    """``pipeline_lib/ssl/run.py`` -> ``pipeline_lib.ssl.run`` (a package: its directory)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(node: ast.ImportFrom, module: str, package: bool) -> str:
    """The absolute module of ``from ... import`` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _first_party(target: str, path: Path, root: Path) -> bool:
    top = target.split(".")[0]
    beside = path.parent / top
    return top in FIRST_PARTY or beside.with_suffix(".py").exists() or beside.is_dir()


def _is_module(dotted: str, path: Path, root: Path) -> bool:
    """Whether ``dotted`` names a module or package file (repo root or beside ``path``)."""
    parts = dotted.split(".")
    for base in (root, path.parent):
        candidate = base.joinpath(*parts)
        if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
            return True
    return False


def _private_module_offence(target: str, importer: str) -> str | None:
    """Why importing module ``target`` from ``importer`` breaks the rule, or None."""
    parts = target.split(".")
    for index, part in enumerate(parts):
        if _private(part):
            parent = ".".join(parts[:index])
            if not parent or not (importer == parent or importer.startswith(parent + ".")):
                return f"imports private module {'.'.join(parts[: index + 1])}"
            return None
    return None


def offences(source: str, path: Path, root: Path) -> list[str]:
    """``"<path>:<line>: <what>"`` for every private import in ``source`` (the file ``path``)."""
    module = module_name(path, root)
    package = _is_package(path)
    found: list[str] = []
    where = path.relative_to(root).as_posix()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _first_party(alias.name, path, root):
                    reason = _private_module_offence(alias.name, module)
                    if reason:
                        found.append(f"{where}:{node.lineno}: {reason}")
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, package)
            if not _first_party(target, path, root):
                continue
            reason = _private_module_offence(target, module)
            if reason:
                found.append(f"{where}:{node.lineno}: {reason}")
                continue
            for alias in node.names:
                reason = None
                if not _private(alias.name):
                    continue
                if _is_module(f"{target}.{alias.name}", path, root):
                    reason = _private_module_offence(f"{target}.{alias.name}", module)
                elif target != module:
                    reason = f"imports private name {alias.name} from {target}"
                if reason:
                    found.append(f"{where}:{node.lineno}: {reason}")
    return found


def _checked_files() -> list[Path]:
    return sorted(
        path
        for directory in CHECKED
        for path in (ROOT / directory).rglob("*.py")
        if ".snakemake" not in path.parts
    )


def test_no_module_imports_private_names() -> None:
    files = _checked_files()
    assert any(path.name == "train.py" for path in files)  # the walk found the library
    found = [offence for path in files for offence in offences(path.read_text(), path, ROOT)]
    assert not found, "private imports:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("file", "source", "expected"),
    [
        (
            "pipeline_lib/ssl/fused.py",
            "from pipeline_lib.ssl.run import _fresh_state, prepare_run\n",
            ["imports private name _fresh_state from pipeline_lib.ssl.run"],
        ),
        (
            "benchmarks/bench.py",
            "def f():\n    from pipeline_lib.ssl import train\n    from x import _y\n"
            "    import pipeline_lib.detection.detectors._common\n",
            ["imports private module pipeline_lib.detection.detectors._common"],
        ),
        (
            "pipeline_lib/detection/runner.py",
            "from pipeline_lib.detection.detectors._common import l2_normalize\n"
            "from pipeline_lib.detection.detectors import _common\n",
            ["imports private module pipeline_lib.detection.detectors._common"] * 2,
        ),
        (
            "pipeline_lib/detection/detectors/gde.py",
            "from pipeline_lib.detection.detectors._common import l2_normalize\n"
            "from pipeline_lib.detection.detectors import _common\n"
            "from . import _common as common\n"
            "import torch._dynamo\nfrom torch.utils._triton import has_triton\n",
            [],
        ),
        (
            "pipeline_lib/ssl/run.py",
            "from .train import _evaluate\n",
            ["imports private name _evaluate from pipeline_lib.ssl.train"],
        ),
        (  # a script and the package beside it (benchmarks/jpeg_dose.py and jpeg/)
            "benchmarks/study.py",
            "from study_parts.fit import _line, fit\n",
            ["imports private name _line from study_parts.fit"],
        ),
    ],
)
def test_the_checker_finds_hand_made_offences(file, source, expected, tmp_path) -> None:
    # A tree with one private module (the library itself has none left to point at).
    private = tmp_path / "pipeline_lib" / "detection" / "detectors" / "_common.py"
    private.parent.mkdir(parents=True)
    private.write_text("")
    for package in private.parents[:3]:
        (package / "__init__.py").write_text("")
    beside = tmp_path / "benchmarks" / "study_parts"
    beside.mkdir(parents=True)
    (beside / "__init__.py").write_text("")
    found = [line.split(": ", 1)[1] for line in offences(source, tmp_path / file, tmp_path)]
    assert found == expected
