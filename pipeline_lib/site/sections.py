"""The parts of the summary page beyond the studies: the data sets, the per-class tables and
figures, MVTec AD, the explanations and every other file of the summary folder.

Each part is a :class:`Section` of inline tables (with links to their files), figures with
captions and file links; :func:`pipeline_lib.site.summary.build_summary` renders them. The
builders only read the files they are given (the rule's inputs), so the page follows
wherever the workflow writes its results.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline_lib.paper.published import display_name

__all__ = [
    "PageFigure",
    "PageTable",
    "Section",
    "data_set_section",
    "explanation_section",
    "files_section",
    "mvtec_section",
    "per_class_section",
    "read_display_table",
]


@dataclass(frozen=True)
class PageFigure:
    """A figure shown inline: its file and the caption under it."""

    caption: str
    path: Path


@dataclass(frozen=True)
class PageTable:
    """A table shown inline: a caption above it, its files linked under it, then notes."""

    caption: str
    table: pd.DataFrame
    files: Sequence[Path] = ()
    notes: Sequence[str] = ()


@dataclass(frozen=True)
class Section:
    """One part of the page: a heading, lines of text, tables, figures and file links
    (``(label, path)``)."""

    heading: str
    lines: Sequence[str] = ()
    tables: Sequence[PageTable] = ()
    figures: Sequence[PageFigure] = ()
    files: Sequence[tuple[str, Path]] = field(default_factory=tuple)


def read_display_table(path: str | os.PathLike) -> pd.DataFrame:
    """A table written by :func:`pipeline_lib.results.table_files.write_table`, as text
    (its CSV, every cell a string, empty cells kept empty)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _span(values: pd.Series) -> str:
    """``"119"`` or ``"116–122"``: the range of integer counts over classes."""
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    if numbers.empty:
        return "—"
    low, high = int(numbers.min()), int(numbers.max())
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _split_text(contamination: float, fitset: str) -> str:
    fit = (
        "the class's training images"
        if fitset == "train"
        else f"{fitset.removeprefix('clean')} clean images of the class"
    )
    mixed = "" if contamination == 0 else f" with {contamination:.0%} outliers mixed in"
    return f"each class as inliers in turn; fit on {fit}{mixed}; test on the whole test split"


def data_set_section(
    results: pd.DataFrame, provenance: Sequence[Mapping[str, Any]] = ()
) -> Section:
    """Per data set and setting: images per split, image size, the one-class split and the
    detectors' fit and test sizes (``n_fit``, ``n_test`` of the jobs' ``result.json``).

    Parameters
    ----------
    results : DataFrame
        The tidy results (``results.csv``): ``dataset, inlier, contamination, fitset,
        n_fit, n_test, n_test_outliers``.
    provenance : sequence of mapping
        The data sets' provenance records (``data_provenance.json``): ``dataset`` and, where
        recorded, ``n_train``, ``n_test``, ``image_size``.

    Returns
    -------
    Section
        One table, one row per (data set, contamination, fit set) of the results.
    """
    sizes = {str(record["dataset"]): record for record in provenance}
    rows = []
    keys = ["dataset", "contamination", "fitset"]
    for (dataset, contamination, fitset), jobs in results.groupby(keys, sort=False):
        record = sizes.get(str(dataset), {})
        image = record.get("image_size")
        outliers = pd.to_numeric(jobs.get("n_test_outliers"), errors="coerce")
        inliers = pd.to_numeric(jobs["n_test"], errors="coerce") - outliers
        rows.append(
            {
                "Data set": display_name("dataset", str(dataset)),
                "Classes": str(jobs["inlier"].nunique()),
                "Train / test images": (
                    f"{int(record['n_train']):,} / {int(record['n_test']):,}"
                    if "n_train" in record and "n_test" in record
                    else "—"
                ),
                "Image size": f"{image[0]} × {image[1]}" if image else "—",
                "Split": _split_text(float(contamination), str(fitset)),
                "n_fit (per class)": _span(jobs["n_fit"]),
                "n_test (inliers + outliers)": (
                    f"{_span(jobs['n_test'])} ({_span(inliers)} + {_span(outliers)})"
                    if outliers.notna().all()
                    else _span(jobs["n_test"])
                ),
            }
        )
    table = pd.DataFrame(rows)
    return Section(
        "Data sets",
        lines=[
            "What the detectors saw: n_fit images to fit on, n_test to score (ranges over "
            "the classes); the sizes are the data set's as the pipeline holds it."
        ],
        tables=[PageTable("", table)] if len(table) else [],
    )


def _suffix_order(paths: Sequence[Path]) -> list[Path]:
    order = {".md": 0, ".html": 1, ".csv": 2, ".tex": 3}
    return sorted((Path(p) for p in paths), key=lambda p: order.get(p.suffix, 9))


def per_class_section(
    dataset: str,
    table_files: Sequence[Path],
    *,
    bars: Path | None = None,
    roc: tuple[Path, str] | None = None,
) -> Section:
    """One data set's per-class table inline, its bar chart and its ROC curves.

    Parameters
    ----------
    dataset : str
        Data set id.
    table_files : sequence of Path
        The per-class table's files (``.csv`` read and shown; all linked).
    bars : Path or None
        The per-class bar chart.
    roc : (Path, str) or None
        The ROC figure and its caption (:func:`pipeline_lib.paper.plots.roc_title`).
    """
    files = _suffix_order(table_files)
    csv = next(p for p in files if p.suffix == ".csv")
    name = display_name("dataset", dataset)
    figures = []
    if bars is not None:
        figures.append(
            PageFigure(
                f"Per-class AUC on {name}: mean ± std over seeds for each class and each "
                "representation / detector; black diamonds mark the paper's numbers where "
                "it has them.",
                bars,
            )
        )
    if roc is not None:
        figures.append(PageFigure(f"{roc[1]}: one curve per representation / detector.", roc[0]))
    return Section(
        f"Per class: {name}",
        tables=[PageTable(f"Per-class ROC AUC (x100) on {name}", read_display_table(csv), files)],
        figures=figures,
    )


def mvtec_section(tables: Mapping[str, Sequence[Path]], heatmaps: Sequence[Path] = ()) -> Section:
    """MVTec AD: its summary and per-category tables inline, and each category's heat map.

    Parameters
    ----------
    tables : mapping of str to sequence of Path
        Table stem (``summary``, ``per_category_image_auroc``, ...) -> its files.
    heatmaps : sequence of Path
        ``heatmaps/{category}.png``.
    """
    captions = {
        "summary": "MVTec AD: mean over categories, mean ± std over seeds (x100)",
        "per_category_image_auroc": "MVTec AD per category: image AUC (detection)",
        "per_category_pixel_auroc": "MVTec AD per category: pixel AUC (localisation)",
        "per_category_aupro": "MVTec AD per category: AUPRO up to 30 % FPR",
    }
    page_tables = []
    for stem, paths in tables.items():
        files = _suffix_order(paths)
        csv = next(p for p in files if p.suffix == ".csv")
        page_tables.append(PageTable(captions.get(stem, stem), read_display_table(csv), files))
    figures = [
        PageFigure(
            f"MVTec AD, {Path(path).stem}: defective test images, their masks and each "
            "representation's anomaly map (colour range over the whole test set).",
            Path(path),
        )
        for path in heatmaps
    ]
    return Section("MVTec AD", tables=page_tables, figures=figures)


def explanation_section(figures: Sequence[Path]) -> Section:
    """The explanation figures (``explanations/{dataset}/{inlier}.png``)."""
    return Section(
        "Explanations",
        figures=[
            PageFigure(
                f"Explanations of {display_name('dataset', Path(p).parent.name)} class "
                f"{Path(p).stem}: where each detector's score comes from in the image.",
                Path(p),
            )
            for p in figures
        ],
    )


def files_section(files: Sequence[tuple[str, Path]]) -> Section:
    """Every other file of the summary folder, each with what it holds."""
    return Section("Other files", files=[(label, Path(p)) for label, p in files])
