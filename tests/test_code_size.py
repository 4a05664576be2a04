"""benchmarks/code_size.py: functions counted from ``def`` to their last line, files by their
lines, build folders left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def code_size():
    return load_benchmark("code_size.py")


def _function(name: str, n_lines: int, indent: str = "") -> str:
    """A function spanning ``n_lines`` lines: its ``def`` line, then one statement a line."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(n_lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_long_functions_and_files_are_counted_at_the_limits(code_size, tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    # 101 lines is over the limit of 100, 100 lines is not; the decorator is not counted; a
    # method counts like a function. Lines: 1-3 the import, 4 the decorator, 5-105 `long`,
    # 108-207 `at_limit`, 210 the class, 211-312 `method`.
    (package / "a.py").write_text(
        "import functools\n\n\n@functools.cache\n"
        + _function("long", 101)
        + "\n\n"
        + _function("at_limit", 100)
        + "\n\nclass C:\n"
        + _function("method", 102, indent="    ")
    )
    (package / "rules.smk").write_text("x = 1\n" * 601)  # a long file not parsed for functions
    (package / "short.smk").write_text("x = 1\n" * 600)
    build = package / ".snakemake"
    build.mkdir()
    (build / "b.py").write_text(_function("hidden", 300))
    size = code_size.folder_size(package, root=tmp_path)
    assert size.folder == "package" and size.files == 3
    assert [(s.where, s.lines) for s in size.long_files] == [("package/rules.smk", 601)]
    assert [(s.where, s.lines) for s in size.long_functions] == [
        ("package/a.py:5 long", 101),
        ("package/a.py:211 method", 102),
    ]
    lower = code_size.folder_size(package, root=tmp_path, max_function_lines=99)
    assert [s.where for s in lower.long_functions] == [
        "package/a.py:5 long",
        "package/a.py:108 at_limit",
        "package/a.py:211 method",
    ]
    assert code_size.report([size], 600, 100).splitlines()[0] == (
        "package: 3 files, 1 over 600 lines, 2 functions over 100 lines"
    )
