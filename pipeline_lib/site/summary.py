"""The summary page of all studies: where every table and figure is, the largest deviations
from the paper first, and what is missing.

One ranked list answers "where do we disagree with the paper most": the deviations of every
study in AUC points (x100), largest |ours - paper| first. A cell whose inputs are incomplete
is never ranked (its number is biased by what is missing); it is listed separately with its
missing count. Numbers in other units (Pearson r, training-set sizes) are listed apart, since
their deviations are not comparable with AUC points. A study whose outputs are absent
altogether (``None``) is reported as "not run".

:func:`build_summary` returns Markdown and :func:`summary_html` a standalone HTML page with
the same content; both only read
:class:`~pipeline_lib.studies.contract.StudyResult` objects (e.g. from
:func:`pipeline_lib.studies.files.load_study`) and the file paths given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.site.render import Link, render_html, render_markdown
from pipeline_lib.site.sections import Section
from pipeline_lib.studies.contract import STAT_COLUMNS, StudyResult
from pipeline_lib.studies.files import COMPARISONS_SUFFIX

__all__ = [
    "RANKED_COLUMNS",
    "build_summary",
    "missing_cells",
    "ranked_deviations",
    "summary_html",
]

#: Columns of :func:`ranked_deviations`.
RANKED_COLUMNS: tuple[str, ...] = (
    "rank",
    "study",
    "item",
    "ours",
    "paper",
    "deviation",
    "n_missing",
    "unit",
    "status",
)

_TABLE_SUFFIXES = (".md", ".html", ".csv", ".tex")
_DECIMALS = {"AUC": 1, "r": 3, "train images": 0}


def ranked_deviations(studies: Mapping[str, StudyResult | None]) -> pd.DataFrame:
    """Every published comparison of every study, the rankable ones first by |deviation|.

    Parameters
    ----------
    studies : mapping of str to StudyResult or None
        Study name -> result; None (not run) contributes nothing.

    Returns
    -------
    DataFrame
        Columns :data:`RANKED_COLUMNS`. ``status`` is ``"ranked"`` (AUC unit, no missing
        input, finite deviation; ``rank`` 1, 2, ... by decreasing |deviation|),
        ``"incomplete"`` (some inputs missing), ``"no value"`` (ours or the deviation is
        NaN) or ``"other unit"``; ``rank`` is NaN for all but ``"ranked"``. Rows are
        ordered ranked, incomplete, other unit, no value.
    """
    parts = []
    for name, result in studies.items():
        if result is None or result.deviations is None or not len(result.deviations):
            continue
        frame = result.deviations.copy()
        if "unit" not in frame.columns:
            frame["unit"] = "AUC"
        frame.insert(0, "study", name)
        parts.append(frame)
    if not parts:
        return pd.DataFrame({col: pd.Series(dtype=object) for col in RANKED_COLUMNS})
    frame = pd.concat(parts, ignore_index=True)
    frame["unit"] = frame["unit"].fillna("AUC").astype(str)
    frame["n_missing"] = frame["n_missing"].fillna(0).astype(int)
    for col in ("ours", "paper", "deviation"):
        frame[col] = frame[col].astype(float)
    finite = np.isfinite(frame["deviation"].to_numpy())
    status = np.where(
        ~finite,
        "no value",
        np.where(
            frame["n_missing"] > 0,
            "incomplete",
            np.where(frame["unit"] == "AUC", "ranked", "other unit"),
        ),
    )
    frame["status"] = status
    order = {"ranked": 0, "incomplete": 1, "other unit": 2, "no value": 3}
    frame["_abs"] = frame["deviation"].abs()
    frame["_order"] = frame["status"].map(order)
    frame = frame.sort_values(["_order", "_abs"], ascending=[True, False], kind="stable")
    frame = frame.drop(columns=["_abs", "_order"]).reset_index(drop=True)
    ranked = frame["status"] == "ranked"
    frame["rank"] = np.where(ranked, np.cumsum(ranked), np.nan)
    return frame[list(RANKED_COLUMNS)]


def missing_cells(studies: Mapping[str, StudyResult | None]) -> pd.DataFrame:
    """The cells of every study that miss results.

    Returns
    -------
    DataFrame
        Columns ``study, cell`` (the cell's id columns as ``key=value`` pairs),
        ``n_missing, n_expected``, one row per incomplete cell, in study order.
    """
    rows = []
    for name, result in studies.items():
        if result is None or "n_missing" not in result.table.columns:
            continue
        table = result.table
        ids = [c for c in table.columns if c not in STAT_COLUMNS and c != "beats_literature"]
        for _, row in table[table["n_missing"].fillna(0) > 0].iterrows():
            cell = ", ".join(f"{c}={_plain(row[c])}" for c in ids if _plain(row[c]) != "")
            rows.append(
                {
                    "study": name,
                    "cell": cell,
                    "n_missing": int(row["n_missing"]),
                    "n_expected": int(row["n_expected"]),
                }
            )
    return pd.DataFrame(rows, columns=["study", "cell", "n_missing", "n_expected"])


def _plain(value: object) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(value: float, unit: str, *, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "—"
    decimals = _DECIMALS.get(unit, 2)
    if signed:
        return f"{round(value, decimals) + 0.0:+.{decimals}f}"
    return f"{value:.{decimals}f}"


def _href(path: Path | str, relative_to: Path | None) -> str:
    path = Path(path)
    if relative_to is not None:
        return Path(os.path.relpath(path, relative_to)).as_posix()
    return path.as_posix()


def _status(result: StudyResult | None) -> str:
    if result is None:
        return "not run"
    table = result.table
    if "n_missing" not in table.columns or not len(table):
        return "no cells"
    bad = int((table["n_missing"].fillna(0) > 0).sum())
    return "complete" if bad == 0 else f"incomplete: {bad} of {len(table)} cells miss results"


def _linked_cells(table: pd.DataFrame, links: Mapping[tuple[str, str, str], str]) -> pd.DataFrame:
    """The main table with each cell of ours that has runs made a link to them.

    ``links`` maps ``(Representation, Detector, data set column)`` to the URL of the cell's
    MLflow runs (:func:`pipeline_lib.site.run_links.main_table_run_links`); other cells
    (the paper's, the mean, cells without runs) stay text.
    """
    if not links or not {"Representation", "Detector"} <= set(table.columns):
        return table
    out = table.astype(object).copy()
    for index, row in table.iterrows():
        for column in table.columns:
            href = links.get((row["Representation"], row["Detector"], column))
            if href is not None:
                out.at[index, column] = Link(str(row[column]), href)
    return out


def _table_links(name: str, paths: Sequence[Path], relative_to: Path | None) -> list[Link]:
    """Links to a study's tables (by suffix), then to its paired tests where written."""
    paths = [Path(p) for p in paths]
    tables = [
        Link(p.suffix.lstrip("."), _href(p, relative_to))
        for suffix in _TABLE_SUFFIXES
        for p in paths
        if p.suffix == suffix and not p.stem.endswith(("_deviations", COMPARISONS_SUFFIX))
    ]
    # the paired Wilcoxon tests between the study's rows, where written
    return tables + [
        Link("paired tests", _href(p, relative_to))
        for p in paths
        if p.stem.endswith(COMPARISONS_SUFFIX) and p.suffix == ".md"
    ]


def _figure_links(name: str, paths: Sequence[Path], relative_to: Path | None) -> list[Link]:
    """Links to a study's figures, named by their file stem without the study prefix."""
    paths = [Path(p) for p in paths if Path(p).suffix == ".png"]
    return [Link(p.stem.removeprefix(f"{name}_"), _href(p, relative_to)) for p in paths]


def _study_links(
    studies: Mapping[str, StudyResult | None],
    links: Mapping[str, Sequence[Path]],
    relative_to: Path | None,
) -> dict[str, tuple[list[Link], list[Link]]]:
    """Per study, the links to its tables and to its figures, from ``links`` (study -> the
    files it wrote): built once for the overview and the details."""
    return {
        name: (
            _table_links(name, links.get(name, []), relative_to),
            _figure_links(name, links.get(name, []), relative_to),
        )
        for name in studies
    }


def _opening_blocks(
    studies: Mapping[str, StudyResult | None], title: str, main: Mapping[str, Any] | None
) -> list[tuple]:
    """Title, the reproduction count and protocol lines, and the studies' count line."""
    blocks: list[tuple] = [("h", 1, title)]
    if main is not None and main.get("count"):
        # The page opens with how much of the paper the run reproduced (or why nothing in
        # it has a published counterpart), then how the run differs from the paper's
        # experiment where that matters, and what its models trained on.
        blocks.append(("p", main["count"]))
        blocks += [("p", line) for line in main.get("protocol", [])]
    n_run = sum(r is not None for r in studies.values())
    blocks.append(
        (
            "p",
            f"{len(studies)} studies, {n_run} with results, {len(studies) - n_run} not run. "
            "Deviations are ours minus the paper, in AUC points (ROC AUC x 100) unless a unit "
            "is given; cells with missing results are never ranked.",
        )
    )
    return blocks


def _main_table_blocks(main: Mapping[str, Any], relative_to: Path | None) -> list[tuple]:
    """The main table inline, under the protocol line that says how comparable it is with
    the paper's, its files and the rank plot (or why there is none)."""
    blocks: list[tuple] = [("h", 2, "Main table")]
    blocks += [("p", line) for line in main.get("protocol", [])]
    blocks.append(("table", _linked_cells(main["table"], main.get("run_links") or {})))
    files = [
        Link(Path(path).suffix.lstrip("."), _href(path, relative_to))
        for path in main.get("links", [])
    ]
    if files:
        blocks.append(("list", [["Files: ", *files]]))
    if main.get("notes"):
        blocks.append(("list", list(main["notes"])))
    blocks.append(("h", 3, "Ranks across data sets"))
    if main.get("ranks"):
        blocks.append(("img", "Mean ranks across data sets", _href(main["ranks"], relative_to)))
    else:
        n = main.get("n_datasets")
        has = f"; this run has {n}" if n is not None else ""
        blocks.append(("p", f"No rank plot: ranks across data sets need 3 data sets or more{has}."))
    return blocks


def _section_blocks(section: Section, relative_to: Path | None) -> list[tuple]:
    """A :class:`~pipeline_lib.site.sections.Section`: its tables inline with their files,
    its figures with captions, its file links."""
    blocks: list[tuple] = [("h", 2, section.heading)]
    blocks += [("p", line) for line in section.lines]
    for table in section.tables:
        if table.caption:
            blocks.append(("p", table.caption))
        blocks.append(("table", table.table))
        files = [Link(Path(p).suffix.lstrip("."), _href(p, relative_to)) for p in table.files]
        if files:
            blocks.append(("list", [["Files: ", *files]]))
        if table.notes:
            blocks.append(("list", list(table.notes)))
    for figure in section.figures:
        blocks.append(("img", figure.caption, _href(figure.path, relative_to)))
    if section.files:
        blocks.append(
            (
                "list",
                [
                    [f"{label}: ", Link(Path(p).name, _href(p, relative_to))]
                    for label, p in section.files
                ],
            )
        )
    return blocks


def _overview_blocks(
    studies: Mapping[str, StudyResult | None], linked: Mapping[str, tuple[list[Link], list[Link]]]
) -> list[tuple]:
    """One row per study: kind, status, cell count, links to its tables and figures."""
    overview = pd.DataFrame(
        [
            {
                "Study": name,
                "Kind": result.kind if result is not None else "",
                "Status": _status(result),
                "Cells": str(len(result.table)) if result is not None else "",
                "Tables": linked[name][0] or "",
                "Figures": linked[name][1] or "",
            }
            for name, result in studies.items()
        ]
    )
    return [("h", 2, "Studies"), ("table", overview)]


def _deviation_blocks(ranked: pd.DataFrame, top: int | None) -> list[tuple]:
    """The ranked AUC deviations (the ``top`` largest), then the rows not ranked, by why."""
    blocks: list[tuple] = [("h", 2, "Largest deviations from the paper")]
    top_rows = ranked[ranked["status"] == "ranked"]
    if top is not None:
        top_rows = top_rows.head(top)
    if len(top_rows):
        blocks.append(
            (
                "table",
                pd.DataFrame(
                    {
                        "Rank": [str(int(r)) for r in top_rows["rank"]],
                        "Study": top_rows["study"],
                        "Item": top_rows["item"],
                        "Ours": [_number(v, "AUC") for v in top_rows["ours"]],
                        "Paper": [_number(v, "AUC") for v in top_rows["paper"]],
                        "Δ (AUC)": [_number(v, "AUC", signed=True) for v in top_rows["deviation"]],
                    }
                ),
            )
        )
    else:
        blocks.append(("p", "No complete cell has a published counterpart yet."))
    for status, heading in (
        ("incomplete", "Not ranked: cells with missing results"),
        ("other unit", "Other published quantities (not AUC)"),
        ("no value", "Published numbers without a value of ours"),
    ):
        rows = ranked[ranked["status"] == status]
        if len(rows):
            blocks += [("h", 3, heading), ("table", _unranked_table(rows))]
    return blocks


def _unranked_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`ranked_deviations` that are not ranked, each number in its own unit."""

    def numbers(column: str, *, signed: bool = False) -> list[str]:
        return [
            _number(v, u, signed=signed) for v, u in zip(rows[column], rows["unit"], strict=True)
        ]

    return pd.DataFrame(
        {
            "Study": rows["study"],
            "Item": rows["item"],
            "Unit": rows["unit"],
            "Ours": numbers("ours"),
            "Paper": numbers("paper"),
            "Δ": numbers("deviation", signed=True),
            "Missing": [f"missing {n}" if n else "" for n in rows["n_missing"]],
        }
    )


def _missing_blocks(studies: Mapping[str, StudyResult | None]) -> list[tuple]:
    """The studies not run, then the cells with missing results."""
    not_run = [name for name, result in studies.items() if result is None]
    blocks: list[tuple] = [
        ("h", 2, "Missing results"),
        ("h", 3, "Studies not run"),
        ("list", [f"{name}: not run (no outputs)" for name in not_run] or ["none"]),
    ]
    missing = missing_cells(studies)
    blocks.append(("h", 3, "Cells with missing results"))
    if len(missing):
        blocks.append(
            (
                "table",
                pd.DataFrame(
                    {
                        "Study": missing["study"],
                        "Cell": missing["cell"],
                        "Missing": [
                            f"missing {m}/{n}"
                            for m, n in zip(
                                missing["n_missing"], missing["n_expected"], strict=True
                            )
                        ],
                    }
                ),
            )
        )
    else:
        blocks.append(("p", "none: every study that ran has all its expected results"))
    return blocks


def _detail_blocks(
    studies: Mapping[str, StudyResult | None], linked: Mapping[str, tuple[list[Link], list[Link]]]
) -> list[tuple]:
    """Each study: caption, protocol lines, table links, notes and figures."""
    blocks: list[tuple] = [("h", 2, "Studies in detail")]
    for name, result in studies.items():
        heading = f"{name} ({result.kind})" if result is not None else f"{name} (not run)"
        blocks.append(("h", 3, heading))
        if result is None:
            blocks.append(("p", "not run: no outputs found"))
            continue
        if result.caption:
            blocks.append(("p", result.caption))
        blocks += [("p", line) for line in result.protocol]
        tables, figures = linked[name]
        if tables:
            blocks.append(("list", [["Table: ", *tables]]))
        if result.notes:
            blocks.append(("list", list(result.notes)))
        for link in figures:
            blocks.append(("img", f"{name}: {link.text}", link.href))
    return blocks


def _blocks(
    studies: Mapping[str, StudyResult | None],
    links: Mapping[str, Sequence[Path]],
    *,
    title: str,
    relative_to: Path | None = None,
    top: int | None = None,
    main: Mapping[str, Any] | None = None,
    sections: Sequence[Section] = (),
) -> list[tuple]:
    """The page as blocks: ("h", level, text), ("p", text), ("table", DataFrame of cells),
    ("list", [cell, ...]), ("img", alt, href)."""
    blocks = _opening_blocks(studies, title, main)
    if main is not None:
        blocks += _main_table_blocks(main, relative_to)
    for section in sections:
        blocks += _section_blocks(section, relative_to)
    linked = _study_links(studies, links, relative_to)
    blocks += _overview_blocks(studies, linked)
    blocks += _deviation_blocks(ranked_deviations(studies), top)
    blocks += _missing_blocks(studies)
    blocks += _detail_blocks(studies, linked)
    return blocks


def build_summary(
    studies: Mapping[str, StudyResult | None],
    links: Mapping[str, list[Path]],
    *,
    title: str = "droc-bench: the paper's studies beside its published numbers",
    relative_to: Path | None = None,
    top: int | None = None,
    main: Mapping[str, Any] | None = None,
    sections: Sequence[Section] = (),
) -> str:
    """The summary page as Markdown.

    Parameters
    ----------
    studies : mapping of str to StudyResult or None
        Study name -> its result (e.g.
        :func:`pipeline_lib.studies.files.load_study`); None marks a study whose
        outputs are absent ("not run").
    links : mapping of str to list of Path
        Study name -> its files (what
        :func:`pipeline_lib.studies.files.write_study` returned): tables
        (``.md/.html/.csv/.tex``) and figures (``.png``) are linked.
    title : str
        Page title.
    relative_to : Path or None, default=None
        Write links relative to this folder (the page's own folder); None keeps the paths.
    top : int or None, default=None
        Show only the ``top`` largest ranked deviations; None shows all.
    main : mapping or None, default=None
        The main table shown inline near the top: ``table`` (its display DataFrame, e.g.
        :func:`pipeline_lib.paper.aggregate.format_main_table`), ``protocol`` (lines above it:
        :func:`pipeline_lib.paper.protocol.table_notes`, the protocol and data lines only
        beside published numbers, then the training line), ``links`` (its files),
        ``count`` (:func:`pipeline_lib.paper.verdict.opening_line`: the page's first line,
        followed by the protocol lines), ``ranks`` (the mean-rank plot's path, shown under
        the table; None or absent: one sentence says why there is none), ``n_datasets``
        (the main table's data sets, for that sentence) and ``run_links``
        (``(Representation, Detector, data set)`` -> the URL of that cell's MLflow runs:
        each such cell becomes a link; absent or empty without tracking) and ``notes``
        (lines under the table: what its ``±`` and intervals are).
    sections : sequence of Section, default=()
        Parts shown after the main table (:mod:`pipeline_lib.site.sections`): the data
        sets, per-class tables and figures, MVTec AD, explanations, other files.

    Returns
    -------
    str
        Markdown: the reproduction count and protocol line (with ``main["count"]``),
        the main table, the sections, the studies' overview, ranked deviations, missing
        results, then each study's protocol line, links, notes and figures.
    """
    return render_markdown(
        _blocks(
            studies,
            links,
            title=title,
            relative_to=relative_to,
            top=top,
            main=main,
            sections=sections,
        )
    )


def summary_html(
    studies: Mapping[str, StudyResult | None],
    links: Mapping[str, list[Path]],
    *,
    title: str = "droc-bench: the paper's studies beside its published numbers",
    **options: Any,
) -> str:
    """The summary page as a standalone HTML document: :func:`build_summary`'s content, with
    its keywords (``relative_to``, ``top``, ``main``, ``sections``)."""
    return render_html(_blocks(studies, links, title=title, **options), title)
