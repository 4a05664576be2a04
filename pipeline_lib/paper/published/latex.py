"""Read the paper's LaTeX tables: a ``tabular`` by label, its rows, labels and number cells.

Cells look like ``92.5{\\scriptsize$\\pm0.6$}``, possibly wrapped in ``\\textbf{...}`` or
braces; ``--`` marks a missing number. ``\\multicolumn`` cells are repeated over the columns
they span, and an empty (or citation-only) first cell continues the row label above it, which
covers ``\\multirow``. Used by :mod:`pipeline_lib.paper.published.parse_paper`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "clean_label",
    "extract_tabular",
    "paper_and_outdir",
    "parse_cell",
    "split_rows",
]

_RULE = re.compile(r"\\(toprule|midrule|bottomrule|hline|cline\{[^}]*\})")
_STD = re.compile(r"\{\\scriptsize\s*\$\\pm\s*([0-9]*\.?[0-9]+)\s*\$\}")
_NUMBER = re.compile(r"[0-9]*\.?[0-9]+")
_MACROS = {r"\geotrans": "RotNet", r"\contrastive": "Contrastive", r"\dae": "DAE"}


def _brace_group(text: str, start: int) -> tuple[str, int]:
    """Return the content of the brace group opening at ``text[start]`` and the index after it."""
    if text[start] != "{":
        raise ValueError(f"expected '{{' at offset {start} of {text[start : start + 40]!r}")
    depth = 0
    for pos in range(start, len(text)):
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : pos], pos + 1
    raise ValueError(f"unbalanced braces in {text[start : start + 80]!r}")


def _strip_comments(text: str) -> str:
    return "\n".join(re.sub(r"(?<!\\)%.*", "", line) for line in text.splitlines())


def extract_tabular(text: str, label: str) -> str:
    """Return the body of the ``tabular`` environment of the table labelled ``label``.

    Parameters
    ----------
    text : str
        The paper's LaTeX source.
    label : str
        The table label, with or without the ``tab:`` prefix.

    Returns
    -------
    str
        The LaTeX between the column specification and ``\\end{tabular}``.

    Raises
    ------
    ValueError
        If the label or its tabular is not found.
    """
    full = label if label.startswith("tab:") else f"tab:{label}"
    at = text.find(rf"\label{{{full}}}")
    if at < 0:
        raise ValueError(f"label {full!r} not found in the paper source")
    begin = text.rfind(r"\begin{tabular}", 0, at)
    env_start = text.rfind(r"\begin{table", 0, at)
    if begin < 0 or begin < env_start:
        raise ValueError(f"no tabular found in the table labelled {full!r}")
    _, body_start = _brace_group(text, begin + len(r"\begin{tabular}"))
    end = text.find(r"\end{tabular}", body_start)
    if end < 0 or end > at:
        raise ValueError(f"unterminated tabular in the table labelled {full!r}")
    return text[body_start:end]


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split ``text`` at ``sep`` (``"\\\\"`` or ``"&"``) outside braces and escapes."""
    parts, depth, start, pos = [], 0, 0, 0
    while pos < len(text):
        if depth == 0 and text.startswith(sep, pos):
            parts.append(text[start:pos])
            pos += len(sep)
            start = pos
            continue
        char = text[pos]
        if char == "\\":
            pos += 2  # a control sequence or escaped character such as \& or \{
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        pos += 1
    parts.append(text[start:])
    return parts


def _expand_cell(cell: str) -> list[str]:
    cell = cell.strip()
    if cell.startswith(r"\multicolumn"):
        count, pos = _brace_group(cell, len(r"\multicolumn"))
        _, pos = _brace_group(cell, pos)
        content, _ = _brace_group(cell, pos)
        return [content.strip()] * int(count)
    if cell.startswith(r"\multirow"):
        _, pos = _brace_group(cell, len(r"\multirow"))
        _, pos = _brace_group(cell, pos)
        content, _ = _brace_group(cell, pos)
        return [content.strip()]
    return [cell]


def split_rows(body: str) -> list[tuple[str, ...]]:
    """Split a tabular body into rows of cells.

    Parameters
    ----------
    body : str
        Output of :func:`extract_tabular`.

    Returns
    -------
    list of tuple of str
        Non-empty rows in order, rules dropped; each cell is raw LaTeX with
        ``\\multicolumn`` repeated over its span and ``\\multirow`` unwrapped.
    """
    rows: list[tuple[str, ...]] = []
    for chunk in _split_top_level(_strip_comments(body), "\\\\"):
        chunk = _RULE.sub("", chunk).strip()
        if chunk:
            cells: list[str] = []
            for cell in _split_top_level(chunk, "&"):
                cells.extend(_expand_cell(cell))
            rows.append(tuple(cells))
    return rows


def clean_label(tex: str) -> str:
    """Turn a LaTeX row or column label into plain text.

    ``\\citet{key}`` becomes ``key`` (it names a previous work), ``\\cite`` and ``\\citep``
    are dropped, ``$^{\\dagger}$`` becomes ``†`` and the paper's macros are expanded.

    Parameters
    ----------
    tex : str
        The LaTeX of one cell.

    Returns
    -------
    str
        The label, whitespace collapsed.
    """
    text = tex
    for macro, value in _MACROS.items():
        text = re.sub(re.escape(macro) + r"(?![A-Za-z])", value, text)
    text = re.sub(r"\\citet\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\cite[p]?\{[^}]*\}", "", text)
    text = re.sub(r"\$\^\{?\\dagger\}?\$", "†", text)
    text = re.sub(r"\\(?:mathrm|textbf|emph|textit)\{([^}]*)\}", r"\1", text)
    text = text.replace("~", " ").replace(r"\,", " ").replace("$", "")
    text = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", text).strip()


def parse_cell(tex: str) -> tuple[float, float | None] | None:
    """Parse a numeric cell ``tex`` such as ``\\textbf{92.5}{\\scriptsize$\\pm0.6$}``.

    Returns
    -------
    tuple of (float, float or None), or None
        ``(mean, std)``; ``std`` is None when the cell has no ``\\pm`` part. None for ``--``.

    Raises
    ------
    ValueError
        If the cell is neither a number nor ``--``.
    """
    std_match = _STD.search(tex)
    std = float(std_match.group(1)) if std_match else None
    rest = _STD.sub("", tex)
    rest = re.sub(r"\\textbf\{([^}]*)\}", r"\1", rest).replace("{", "").replace("}", "").strip()
    if rest in ("--", "-"):
        if std is not None:
            raise ValueError(f"cell {tex!r} has a std but no mean")
        return None
    if not _NUMBER.fullmatch(rest):
        raise ValueError(f"cell {tex!r} is not a number, 'x\\pm y' or '--'")
    return float(rest), std


def paper_and_outdir(
    docstring: str, outdir_help: str, argv: Sequence[str] | None
) -> tuple[str, Path]:
    """A parser's command line ``PAPER OUTDIR``: the paper's LaTeX text and the output folder.

    ``docstring`` is the parser module's (its first line describes the command).
    """
    parser = argparse.ArgumentParser(description=docstring.splitlines()[0])
    parser.add_argument("paper", type=Path, help="the paper's LaTeX source")
    parser.add_argument("outdir", type=Path, help=outdir_help)
    args = parser.parse_args(argv)
    return args.paper.read_text(encoding="utf-8"), args.outdir
