"""Comparison with earlier work (paper Sec. 4.2, Table 3, ``visual_results_comparison.csv``).

Table 3 lists five earlier methods' published AUCs (most with test-time augmentation) and
two rows of the paper's own: "Rotation prediction" and "Contrastive (DA)". Those rows are not
the best detector per data set: each is one fixed detector, the one with the best 5-dataset
Mean in Table 2 (rotation prediction: KDE, 88.2 vs. OC-SVM 87.1; contrastive DA: OC-SVM,
89.9 vs. KDE 89.8), which is what the parser infers from the numbers. We fill the same two
rows with our results of the same detectors, keep the literature rows as published, and
mark per data set whether our row still beats every earlier method.

Options: ``detectors`` (method -> detector, default :func:`paper_detectors`: rotation KDE,
contrastive_da OC-SVM), ``space`` (``"f"``), ``decimals``. One-class jobs of the
default variants of those methods. The table has ``source`` ``literature`` rows (paper values
only) and ``ours`` rows (ours, the paper's own row, ``deviation``, ``beats_literature``: our
mean above every earlier method's number on that data set, NaN without one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import load_published
from pipeline_lib.studies.contract import STAT_COLUMNS
from pipeline_lib.studies.display import format_cell, format_value, label, sort_table
from pipeline_lib.studies.figures import legend_below, new_figure, ours_bars
from pipeline_lib.studies.paper import PAPER_TABLE_NUMBERS
from pipeline_lib.studies.spec import ONE_CLASS, Deviations, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["SPEC", "paper_detectors"]
_TABLE = "visual_results_comparison"


def paper_detectors() -> dict[str, str]:
    """Our methods of Table 3 -> the detector its numbers come from (inferred by the parser)."""
    pub = load_published(_TABLE)
    ours = pub[pub["detector"] != ""]
    return dict(zip(ours["method"], ours["detector"], strict=True))


def _prepare(run: Run, cells: pd.DataFrame) -> pd.DataFrame:
    """The default variant of each method of Table 3, with that method's detector."""
    run.options["detectors"] = detectors = {**paper_detectors(), **dict(run["detectors"])}
    keep = cells["base_method"].map(detectors).eq(cells["detector"])
    return cells[keep & (cells["method"] == cells["base_method"])]


def _literature_row(r: Any, source: str) -> dict:
    """An earlier method's published number as a table row (no result of ours)."""
    return {
        "source": "literature",
        "dataset": r.dataset,
        "method": r.method,
        "detector": "",
        "entry": r.paper_representation,
        "mean": np.nan,
        "std": np.nan,
        "n_seeds": 0,
        "n_expected_seeds": 0,
        "n_results": 0,
        "n_expected": 0,
        "n_missing": 0,
        "paper_mean": r.mean,
        "paper_std": np.nan,
        "paper_source": source,
        "deviation": np.nan,
        "beats_literature": np.nan,
    }


def _ours_row(r: dict, paper: Any, best: float, source: str) -> dict:
    """Our cell beside the paper's own row and whether it beats every earlier method."""
    found = paper is not None
    return r | {
        "source": "ours",
        "entry": f"{label('method', r['method'])} ({label('detector', r['detector'])})",
        "paper_mean": float(paper["mean"]) if found else np.nan,
        "paper_std": float(paper["std"]) if found else np.nan,
        "paper_source": source if found else "",
        "deviation": r["mean"] - (float(paper["mean"]) if found else np.nan),
        "beats_literature": (
            float(r["mean"] > best) if np.isfinite(best) and np.isfinite(r["mean"]) else np.nan
        ),
    }


def _cells(run: Run) -> pd.DataFrame:
    """Literature rows as published, then our rows, by data set in Table 3's order."""
    pub = load_published(_TABLE)
    datasets = run.state["datasets"] = list(dict.fromkeys(pub["dataset"]))
    ours = cell_stats(run.cells, ["dataset", "base_method", "detector"], ddof=run.ddof)
    ours = ours.rename(columns={"base_method": "method"})
    ours = sort_table(ours, {"method": list(run["detectors"]), "dataset": datasets})
    literature = pub[pub["detector"] == ""]
    best_previous = literature.groupby("dataset")["mean"].max()
    source = f"Table {PAPER_TABLE_NUMBERS[_TABLE]}"
    rows = [_literature_row(r, source) for r in literature.itertuples(index=False)]
    published_ours = pub[pub["detector"] != ""].set_index(["method", "dataset"])
    for r in ours.to_dict("records"):
        key = (r["method"], r["dataset"])
        paper = published_ours.loc[key] if key in published_ours.index else None
        rows.append(_ours_row(r, paper, best_previous.get(r["dataset"], np.nan), source))
    table = pd.DataFrame(rows)
    order = {d: i for i, d in enumerate(datasets)}
    table = table.assign(_d=table["dataset"].map(lambda d: order.get(d, len(order))))
    table = table.sort_values(["_d"], kind="stable").drop(columns="_d")
    table = table.assign(_s=table["source"].map({"literature": 0, "ours": 1}))
    return table.sort_values(["_s"], kind="stable").drop(columns="_s").reset_index(drop=True)


def _present(run: Run, table: pd.DataFrame) -> list[str]:
    return [d for d in run.state["datasets"] if d in set(table["dataset"])]


def _ours(table: pd.DataFrame) -> pd.Series:
    return table["source"] == "ours"


def _notes(run: Run, table: pd.DataFrame) -> list[str]:
    detectors = run["detectors"]
    notes = [
        "the paper's own rows use one detector per representation (rotation prediction: "
        f"{label('detector', detectors.get('rotation', ''))}, contrastive DA: "
        f"{label('detector', detectors.get('contrastive_da', ''))}), the one with the best mean "
        "in Table 2; † marks earlier methods with test-time augmentation"
    ]
    beats = table[_ours(table)].dropna(subset=["beats_literature"])
    if len(beats):
        won = beats[beats["beats_literature"] == 1.0]
        notes.append(
            f"our rows beat every earlier method in {len(won)} of {len(beats)} "
            "(method, data set) cells"
        )
    return notes


def _display(table: pd.DataFrame, datasets: list[str], decimals: int) -> pd.DataFrame:
    out = []
    for entry, group in table[table["source"] == "literature"].groupby("entry", sort=False):
        cells = group.set_index("dataset")
        out.append(
            {"Method": entry}
            | {
                label("dataset", d): (
                    format_value(cells.loc[d, "paper_mean"], decimals=decimals)
                    if d in cells.index
                    else "—"
                )
                for d in datasets
            }
        )
    for entry, group in table[table["source"] == "ours"].groupby("entry", sort=False):
        cells = group.set_index("dataset")
        out.append(
            {"Method": f"Ours: {entry}"}
            | {
                label("dataset", d): (
                    format_cell(cells.loc[d], decimals) if d in cells.index else "—"
                )
                for d in datasets
            }
        )
    return pd.DataFrame(out)


def _figure(table: pd.DataFrame, datasets: list[str]):
    """Grouped bars per data set: earlier methods (grey), ours (colour), paper's own (diamond)."""
    lit = list(dict.fromkeys(table.loc[table["source"] == "literature", "entry"]))
    ours = list(dict.fromkeys(table.loc[table["source"] == "ours", "entry"]))
    entries = lit + ours
    greys = dict(zip(lit, np.linspace(0.35, 0.8, max(len(lit), 1)), strict=False))
    ours_colours = dict(zip(ours, ["#4c72b0", "#dd8452", "#55a868", "#c44e52"], strict=False))
    fig, (ax,) = new_figure(1, width=max(7.0, 1.8 * len(datasets) + 2), height=4.6)
    width = 0.85 / max(len(entries), 1)
    x = np.arange(len(datasets))
    for k, entry in enumerate(entries):
        rows = table[table["entry"] == entry].set_index("dataset").reindex(datasets)
        xs = x + (k - (len(entries) - 1) / 2) * width
        if entry in lit:
            values = rows["paper_mean"].to_numpy(dtype=float)
            has = np.isfinite(values)
            ax.bar(
                xs[has],
                values[has],
                width=width,
                color=str(greys[entry]),
                label=entry,
                gid="literature",
            )
            continue
        ours_bars(
            ax,
            xs,
            rows,
            colour=ours_colours.get(entry, "C0"),
            label_text=f"ours: {entry}",
            paper_label="paper's own row",
            capsize=2,
            width=width,
        )
    ax.set_xticks(x, [label("dataset", d) for d in datasets])
    values = np.concatenate(
        [table["paper_mean"].to_numpy(dtype=float), table["mean"].to_numpy(dtype=float), [100.0]]
    )
    ax.set_ylim(max(0.0, 5.0 * np.floor((np.nanmin(values) - 3.0) / 5.0)), 100.0)
    ax.set_ylabel("ROC AUC (x100)")
    ax.set_xlabel("data set")
    ax.set_title("Comparison with earlier work (Table 3)")
    legend_below(fig, ax, ncols=3)
    return fig


SPEC = StudySpec(
    kind="comparison",
    caption="Comparison with earlier one-class methods (Table 3)",
    defaults={"detectors": {}, "space": "f"},
    select={**ONE_CLASS, "detector": None},
    prepare=_prepare,
    empty="{kind}: the expected grid has no one-class jobs of {detectors}",
    cells=_cells,
    columns=[
        "source",
        "dataset",
        "method",
        "detector",
        "entry",
        *STAT_COLUMNS,
        "beats_literature",
    ],
    deviations=[
        Deviations(
            lambda run, r: f"comparison (Table 3): {label('dataset', r['dataset'])}: {r['entry']}",
            where=_ours,
        )
    ],
    display=lambda run, table: _display(table, _present(run, table), run.decimals),
    figures=lambda run, table: {"auroc": _figure(table, _present(run, table))},
    missing=lambda table: table[_ours(table)],
    missing_what="of our cells",
    notes=_notes,
)
