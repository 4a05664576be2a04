"""Count long files and long functions, the size targets of the code base.

A file is long when it has more than ``--max-file-lines`` lines (every ``*.py`` and
``*.smk`` file, and ``Snakefile``); a function is long when it spans more than
``--max-function-lines`` lines, counted from its ``def`` line to its last line (``ast``:
``end_lineno - lineno + 1``, decorators not counted; nested functions are counted on their
own and inside their parent). Only Python files are parsed for functions::

    python benchmarks/code_size.py pipeline_lib benchmarks workflow
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100
SUFFIXES = (".py", ".smk")
FOLDERS = ("pipeline_lib", "benchmarks", "workflow")  # the folders the targets are set for
SKIPPED_PARTS = {".venv", ".snakemake", "__pycache__", "results"}


@dataclass(frozen=True)
class Span:
    """A file or a function and how many lines it spans."""

    where: str  # path, or path:line name for a function
    lines: int


def source_files(folder: Path) -> list[Path]:
    """The Python and Snakemake files under ``folder`` (sorted), outside build folders."""
    found = [
        path
        for path in folder.rglob("*")
        if path.is_file()
        and (path.suffix in SUFFIXES or path.name == "Snakefile")
        and not SKIPPED_PARTS & set(path.relative_to(folder).parts)
    ]
    return sorted(found)


def function_spans(path: Path, label: str | None = None) -> Iterator[Span]:
    """Every function and method of a Python file in line order, ``def`` to last line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for node in sorted(functions, key=lambda node: node.lineno):
        yield Span(f"{label or path}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)


@dataclass(frozen=True)
class FolderSize:
    """The long files and long functions of one folder."""

    folder: str
    files: int
    long_files: tuple[Span, ...]
    long_functions: tuple[Span, ...]


def shown(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` where it lies inside it."""
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def folder_size(
    folder: Path,
    *,
    root: Path,
    max_file_lines: int = MAX_FILE_LINES,
    max_function_lines: int = MAX_FUNCTION_LINES,
) -> FolderSize:
    """The files of ``folder`` over ``max_file_lines`` and functions over ``max_function_lines``
    (paths shown relative to ``root``)."""
    root = root.resolve()
    files = source_files(folder)
    long_files, long_functions = [], []
    for path in files:
        label = shown(path, root)
        n_lines = len(path.read_text().splitlines())
        if n_lines > max_file_lines:
            long_files.append(Span(label, n_lines))
        if path.suffix == ".py":
            long_functions += [
                span for span in function_spans(path, label) if span.lines > max_function_lines
            ]
    return FolderSize(shown(folder, root), len(files), tuple(long_files), tuple(long_functions))


def report(sizes: Sequence[FolderSize], max_file_lines: int, max_function_lines: int) -> str:
    """One line per folder with both counts, then the long files and functions it holds."""
    lines = []
    for size in sizes:
        lines.append(
            f"{size.folder}: {size.files} files, {len(size.long_files)} over "
            f"{max_file_lines} lines, {len(size.long_functions)} functions over "
            f"{max_function_lines} lines"
        )
        lines += [f"  file {span.where}: {span.lines} lines" for span in size.long_files]
        lines += [f"  function {span.where}: {span.lines} lines" for span in size.long_functions]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[Path(p) for p in FOLDERS])
    parser.add_argument("--max-file-lines", type=int, default=MAX_FILE_LINES)
    parser.add_argument("--max-function-lines", type=int, default=MAX_FUNCTION_LINES)
    args = parser.parse_args(argv)
    missing = [str(folder) for folder in args.folders if not folder.is_dir()]
    if missing:
        parser.error(f"not a folder: {', '.join(missing)} (run from the repository root)")
    sizes = [
        folder_size(
            folder,
            root=Path.cwd(),
            max_file_lines=args.max_file_lines,
            max_function_lines=args.max_function_lines,
        )
        for folder in args.folders
    ]
    print(report(sizes, args.max_file_lines, args.max_function_lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
