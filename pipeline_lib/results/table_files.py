"""Write a table as CSV, Markdown, LaTeX and a small standalone HTML page, atomically."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline_lib.runtime.io import atomic_path

__all__ = ["SINGLE_SEED", "TABLE_SUFFIXES", "format_mean_std", "write_table"]

#: What a cell shows instead of a std when one seed went into it.
SINGLE_SEED = "(n=1)"

#: Files written by :func:`write_table`, in order.
TABLE_SUFFIXES: tuple[str, ...] = (".csv", ".md", ".tex", ".html")

_HTML_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em}"
    "table{border-collapse:collapse;font-size:0.9em}"
    "th,td{border:1px solid #ccc;padding:0.3em 0.6em;text-align:left}"
    "th{background:#f3f3f3}caption{caption-side:top;font-weight:bold;margin-bottom:0.5em}"
)


def format_mean_std(
    mean: float | None,
    std: float | None = None,
    *,
    n_seeds: int | None = None,
    decimals: int = 1,
    missing: str = "—",
    interval: tuple[float, float] | None = None,
    interval_label: str = "",
) -> str:
    """A table cell ``"92.4 ± 0.6 [91.8, 93.0]"``; ``"92.4 (n=1)"`` for one seed.

    The std over a single seed is 0 (or undefined), and ``"± 0.0"`` reads as a measured
    zero spread; so one seed shows :data:`SINGLE_SEED` instead.

    Parameters
    ----------
    mean, std : float or None
        The statistics; a NaN or None std prints the mean alone (e.g. published numbers
        without a spread).
    n_seeds : int or None, default=None
        Seeds behind the cell; 1 replaces the std by ``"(n=1)"``. None: unknown.
    decimals : int, default=1
        Decimals shown.
    missing : str, default="—"
        The cell without a mean.
    interval : (low, high) or None, default=None
        A 95 % interval (:mod:`pipeline_lib.paper.intervals`) shown as ``" [low, high]"``
        after the mean and std; None or NaN ends: none shown.
    interval_label : str, default=""
        Words after the interval saying what it is over (``"over the test set"``); with no
        interval, in brackets in its place (why there is none).

    Returns
    -------
    str
        The cell text.
    """
    if mean is None or not np.isfinite(mean):
        return missing
    text = f"{mean:.{decimals}f}"
    if n_seeds is not None and np.isfinite(n_seeds) and int(n_seeds) == 1:
        text = f"{text} {SINGLE_SEED}"
    elif std is not None and np.isfinite(std):
        text = f"{text} ± {std:.{decimals}f}"
    if interval is not None and all(v is not None and np.isfinite(v) for v in interval):
        text += f" [{interval[0]:.{decimals}f}, {interval[1]:.{decimals}f}]"
        if interval_label:
            text += f" {interval_label}"
    elif interval_label:
        text += f" [{interval_label}]"
    return text


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _has_named_index(df: pd.DataFrame) -> bool:
    return not isinstance(df.index, pd.RangeIndex) or any(
        name is not None for name in df.index.names
    )


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(char, char) for char in text)


def _to_latex(df: pd.DataFrame, caption: str, label: str | None, notes: Sequence[str] = ()) -> str:
    styler = (
        df.style.format(precision=1, na_rep="", escape="latex")
        .format_index(escape="latex", axis=0)
        .format_index(escape="latex", axis=1)
    )
    if not _has_named_index(df):
        styler = styler.hide(axis="index")
    latex = styler.to_latex(
        caption=_latex_escape(caption),
        label=label,
        hrules=True,
        position="htbp",
        position_float="centering",
    )
    if notes:
        # lines above the table, inside the float: they travel with it into a paper
        lines = "".join(f"{{\\small {_latex_escape(note)}}}\\par\n" for note in notes)
        latex = latex.replace("\\begin{tabular}", lines + "\\begin{tabular}", 1)
    # symbols the aggregate tables use, in forms that need no extra LaTeX package
    return latex.replace("±", r"$\pm$").replace("Δ", r"$\Delta$").replace("—", "--")


def _to_html(
    df: pd.DataFrame, caption: str, notes: Sequence[str] = (), footnotes: Sequence[str] = ()
) -> str:
    table = df.to_html(index=_has_named_index(df), na_rep="", float_format="{:.1f}".format)
    title = html.escape(caption)
    lines = "".join(f'<p class="note">{html.escape(note)}</p>\n' for note in notes)
    below = ""
    if footnotes:
        items = "".join(f"<li>{html.escape(note)}</li>" for note in footnotes)
        below = f"<p>Notes:</p>\n<ul>{items}</ul>\n"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>{_HTML_STYLE}</style>\n</head>\n<body>\n"
        f'<p class="caption"><strong>{title}</strong></p>\n{lines}{table}\n{below}</body>\n'
        "</html>\n"
    )


def write_table(
    df: pd.DataFrame,
    stem: str | os.PathLike,
    *,
    caption: str,
    label: str | None = None,
    notes: Sequence[str] = (),
    footnotes: Sequence[str] = (),
    suffixes: Sequence[str] = TABLE_SUFFIXES,
) -> list[Path]:
    """Write ``df`` as ``stem.csv``, ``stem.md``, ``stem.tex`` and ``stem.html``.

    Each file is written atomically (temporary file in the same folder, then
    ``os.replace``). The index is written only when it carries information (not a plain
    ``RangeIndex``).

    Parameters
    ----------
    df : DataFrame
        The table, e.g. from :func:`pipeline_lib.paper.aggregate.format_main_table`.
    stem : str or PathLike
        Output path without suffix; the parent folder is created if needed.
    caption : str
        Caption of the LaTeX table and the HTML page (title and heading); also the first
        line of the Markdown file.
    label : str or None, default=None
        LaTeX ``\\label``.
    notes : sequence of str, default=()
        Lines shown between the caption and the table in the Markdown, LaTeX and HTML files
        (e.g. how the run's protocol differs from the paper's, or why a published number is
        left out): a reader of the table sees them before the numbers. Not in the CSV.
    footnotes : sequence of str, default=()
        Lines listed under "Notes:" below the table in the Markdown and HTML files (a
        study's notes). Not in the CSV or LaTeX.
    suffixes : sequence of str, default=TABLE_SUFFIXES
        The files to write, a subset of :data:`TABLE_SUFFIXES` (a study writes its own CSV,
        the tidy table behind the formatted ``df``).

    Returns
    -------
    list of Path
        The files written, in :data:`TABLE_SUFFIXES` order.

    Raises
    ------
    ValueError
        If ``stem`` already has one of the table suffixes, ``caption`` is empty or a suffix
        is not a table suffix.
    """
    stem = Path(stem)
    if stem.suffix in TABLE_SUFFIXES:
        raise ValueError(f"stem={str(stem)!r} must not end in a table suffix {TABLE_SUFFIXES}")
    if not caption.strip():
        raise ValueError(f"caption={caption!r} must not be empty")
    unknown = sorted(set(suffixes) - set(TABLE_SUFFIXES))
    if unknown:
        raise ValueError(f"suffixes {unknown} are not table suffixes {TABLE_SUFFIXES}")
    index = _has_named_index(df)
    above = "".join(f"{note}\n\n" for note in notes)
    below = "".join(f"- {note}\n" for note in footnotes)
    render = {
        ".csv": lambda: df.to_csv(index=index, lineterminator="\n"),
        ".md": lambda: (
            f"{caption}\n\n{above}{df.to_markdown(index=index, floatfmt='.1f')}\n"
            + (f"\nNotes:\n\n{below}" if below else "")
        ),
        ".tex": lambda: _to_latex(df, caption, label, notes),
        ".html": lambda: _to_html(df, caption, notes, footnotes),
    }
    paths = []
    for suffix in TABLE_SUFFIXES:
        if suffix in suffixes:
            path = stem.with_name(stem.name + suffix)
            _write_text(path, render[suffix]())
            paths.append(path)
    return paths
