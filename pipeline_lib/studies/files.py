"""A study's files: :func:`write_study` writes its tidy table, human tables, deviations,
manifest and figures; :func:`load_study` reads them back for the summary page and
:func:`study_files` lists what the page links."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pipeline_lib.paper.paired import study_comparisons, study_comparisons_markdown
from pipeline_lib.results.table_files import write_table
from pipeline_lib.runtime.io import atomic_path
from pipeline_lib.studies.contract import StudyResult, empty_deviations
from pipeline_lib.studies.figures import DPI

__all__ = ["COMPARISONS_SUFFIX", "load_study", "study_files", "write_comparisons", "write_study"]

#: Stem suffix of a study's paired comparisons: ``<name>_wilcoxon.md`` and ``.csv``.
COMPARISONS_SUFFIX = "_wilcoxon"

_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def _frame_to_csv(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")
    return path


def write_study(
    result: StudyResult,
    out_dir: Path,
    name: str,
    *,
    tables: Sequence[str | os.PathLike] | None = None,
) -> list[Path]:
    """Write a study's tables, deviations, notes and figures, each file atomically.

    Files: ``<name>.csv`` (the tidy table), ``<name>.md`` / ``.tex`` / ``.html`` (the
    human table, by :func:`~pipeline_lib.results.table_files.write_table`, with the protocol
    lines above it and the notes below it in the Markdown and HTML),
    ``<name>_deviations.csv``,
    ``<name>.json`` (kind, caption, notes, figure names; what :func:`load_study` reads) and
    ``<name>_<figure>.png`` per figure.

    Parameters
    ----------
    result : StudyResult
        A builder's output.
    out_dir : Path
        Destination folder, created if needed.
    name : str
        File stem, ``[A-Za-z0-9_]+``.
    tables : sequence of path, optional
        Human tables of this study written elsewhere (the main grid's are
        ``summary/main_table.*``, written once by ``make_tables``): the
        ``.md`` / ``.tex`` / ``.html`` are then not written again, and the manifest lists
        these paths (relative to ``out_dir``) under ``"tables"`` for the summary's links.
        ``<name>.csv`` is still written: it is the tidy table the summary ranks.

    Returns
    -------
    list of Path
        The files written: csv, md, tex, html (unless ``tables``), deviations csv, json,
        then the PNGs.

    Raises
    ------
    ValueError
        If ``name`` or a figure name is not ``[A-Za-z0-9_]+``.
    """
    if not _NAME.match(name):
        raise ValueError(f"name={name!r} must match [A-Za-z0-9_]+")
    bad = [key for key in result.figures if not _NAME.match(key)]
    if bad:
        raise ValueError(f"figure names {bad} must match [A-Za-z0-9_]+")
    out_dir = Path(out_dir)
    caption = result.caption or f"{result.kind} study"
    paths = [_frame_to_csv(result.table, out_dir / f"{name}.csv")]
    if tables is None:
        paths += write_table(
            result.display if result.display is not None else result.table,
            out_dir / name,
            caption=caption,
            label=f"tab:{name}",
            notes=result.protocol,
            footnotes=result.notes,
            suffixes=(".md", ".tex", ".html"),
        )
    paths.append(_frame_to_csv(result.deviations, out_dir / f"{name}_deviations.csv"))
    meta = {
        "kind": result.kind,
        "caption": caption,
        "notes": list(result.notes),
        "protocol": list(result.protocol),
        "figures": sorted(result.figures),
    }
    if tables is not None:
        meta["tables"] = [Path(os.path.relpath(path, out_dir)).as_posix() for path in tables]
    with atomic_path(out_dir / f"{name}.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    paths.append(out_dir / f"{name}.json")
    for key, fig in result.figures.items():
        path = out_dir / f"{name}_{key}.png"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI)
        paths.append(path)
    return paths


def write_comparisons(frame: pd.DataFrame, out_dir: Path, name: str) -> list[Path]:
    """Write a study's paired Wilcoxon tests beside its table, each file atomically.

    ``<name>_wilcoxon.csv`` holds one row per pair of compared rows
    (:func:`~pipeline_lib.paper.paired.study_comparisons`: data set, the two rows, classes
    used and how many of them differ, median difference, statistic, raw and Holm-adjusted p)
    and ``<name>_wilcoxon.md`` the p-value matrices with, where a pair has fewer than 6
    non-zero class differences, the smallest attainable p.

    Parameters
    ----------
    frame : DataFrame
        The study's found results (its ``results.csv``).
    out_dir : Path
        The study's folder.
    name : str
        File stem, ``[A-Za-z0-9_]+``.

    Returns
    -------
    list of Path
        The Markdown file, then the CSV.

    Raises
    ------
    ValueError
        If ``name`` is not ``[A-Za-z0-9_]+``.
    """
    if not _NAME.match(name):
        raise ValueError(f"name={name!r} must match [A-Za-z0-9_]+")
    tests = study_comparisons(frame)
    stem = Path(out_dir) / f"{name}{COMPARISONS_SUFFIX}"
    markdown = stem.with_suffix(".md")
    with atomic_path(markdown) as tmp:
        tmp.write_text(study_comparisons_markdown(frame, tests, name=name), encoding="utf-8")
    return [markdown, _frame_to_csv(tests, stem.with_suffix(".csv"))]


def load_study(out_dir: Path, name: str) -> StudyResult | None:
    """Read back what :func:`write_study` wrote (without figures), or None if it is absent.

    A study counts as absent when its ``<name>.json`` or ``<name>.csv`` does not exist, which
    the summary page reports as "not run".

    Parameters
    ----------
    out_dir : Path
        Folder given to :func:`write_study`.
    name : str
        Its ``name``.

    Returns
    -------
    StudyResult or None
        ``figures`` is empty; ``display`` is None.
    """
    out_dir = Path(out_dir)
    meta_path, csv_path = out_dir / f"{name}.json", out_dir / f"{name}.csv"
    if not meta_path.exists() or not csv_path.exists():
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    table = pd.read_csv(csv_path, keep_default_na=True)
    dev_path = out_dir / f"{name}_deviations.csv"
    deviations = pd.read_csv(dev_path) if dev_path.exists() else empty_deviations()
    if "unit" not in deviations.columns:
        deviations["unit"] = "AUC"
    return StudyResult(
        kind=str(meta["kind"]),
        table=table,
        deviations=deviations,
        notes=list(meta.get("notes", [])),
        caption=str(meta.get("caption", "")),
        protocol=list(meta.get("protocol", [])),
    )


def study_files(out_dir: Path, name: str) -> list[Path]:
    """The files of a written study the summary page links: tables first, then figures.

    Its own ``<name>.*`` files, its paired comparisons ``<name>_wilcoxon.md`` (where
    written), the human tables written elsewhere that its manifest lists
    under ``"tables"`` (the main grid's ``summary/main_table.*``; they replace its
    own file of the same suffix, so the page shows one ``csv`` link), and the PNGs of
    ``<out_dir>/figures`` (where ``make_study`` moves them for the report's gallery).

    Parameters
    ----------
    out_dir, name : Path, str
        As given to :func:`write_study`.

    Returns
    -------
    list of Path
        Existing files; non-PNG files sorted by name before the PNGs.
    """
    out_dir = Path(out_dir)
    own = list(out_dir.glob(f"{name}.*"))
    meta_path = out_dir / f"{name}.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    elsewhere = [Path(os.path.normpath(out_dir / table)) for table in meta.get("tables", [])]
    replaced = {path.suffix for path in elsewhere}
    files = [path for path in own if path.suffix not in replaced] + elsewhere
    files += [p for p in [out_dir / f"{name}{COMPARISONS_SUFFIX}.md"] if p.exists()]
    files += (out_dir / "figures").glob("*.png")
    return sorted(files, key=lambda path: (path.suffix == ".png", path.name))
