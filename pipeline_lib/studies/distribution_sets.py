"""Distribution-augmentation sets of contrastive DA (paper Sec. 5.2 / Fig. 6, App. A.2.2 /
Table 6 "single model" row).

The paper accumulates distributions from left to right (Fig. 6 caption: "+rot90,hflip" is
trained with 4 distributions: original, hflip, rot90 and rot90+hflip). The sets, as our
``distributions`` strings (the original is always included):

==================  ============================================  ========================
set                 distributions                                 published (CIFAR-10)
==================  ============================================  ========================
original            (vanilla contrastive, no DA)                  Table 7 Contrastive row
+hflip              hflip                                         90.7 (Sec. 5.2 text)
+rot90              hflip, rot90                                  93.1 ± 0.4 (Table 6)
+rot90,hflip        hflip, rot90, rot90+hflip                     93.7 ± 0.6 (Table 6)
+rot180             ... + rot180                                  93.6 ± 0.4 (Table 6)
+rot180,hflip       ... + rot180+hflip                            93.5 ± 0.5 (Table 6)
+rot270             ... + rot270                                  93.1 ± 0.8 (Table 6)
rotations           rot90, rot180, rot270 (main table's DA)       Table 7 Contrastive (DA)
==================  ============================================  ========================

The paper does not name the detector of Fig. 6 / Table 6; we compare with the detector the
options choose (default OC-SVM, as the main table's headline numbers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY, load_published
from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS
from pipeline_lib.studies.contract import StudyResult, check_options, join_expected
from pipeline_lib.studies.display import label, pivot_display, sort_table
from pipeline_lib.studies.figures import hatch_incomplete, new_figure, palette, plot_paper
from pipeline_lib.studies.paper import (
    PAPER_TABLE_NUMBERS,
    add_paper,
    deviation_rows,
    published_main,
)
from pipeline_lib.studies.stats import cell_stats, common_notes, missing_note

__all__ = [
    "ACCUMULATED_SETS",
    "KIND",
    "OPTIONS",
    "SUPP_ENSEMBLE_IDS",
    "assign_sets",
    "build",
    "paper_set_value",
]

KIND = "distribution_sets"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("detector", "space", "sets")

_ACC = ("hflip", "rot90", "rot90+hflip", "rot180", "rot180+hflip", "rot270")
#: The paper's accumulated sets (Fig. 6) then the main table's rotations: name -> distributions.
ACCUMULATED_SETS: dict[str, tuple[str, ...]] = {
    "original": (),
    "+hflip": _ACC[:1],
    "+rot90": _ACC[:2],
    "+rot90,hflip": _ACC[:3],
    "+rot180": _ACC[:4],
    "+rot180,hflip": _ACC[:5],
    "+rot270": _ACC[:6],
    "rotations": DEFAULT_DISTRIBUTIONS,
}
#: Set name -> ``method`` id of the paper's Table 6 (``supp_ensemble.csv``).
SUPP_ENSEMBLE_IDS: dict[str, str] = {
    "+rot90": "contrastive_da_hflip_rot90",
    "+rot90,hflip": "contrastive_da_rot90hflip",
    "+rot180": "contrastive_da_rot180",
    "+rot180,hflip": "contrastive_da_rot180hflip",
    "+rot270": "contrastive_da_rot270",
    "ensemble of sets": "contrastive_da_ensemble_of_sets",
}


def _distribution_set(base_method: str, distributions: str) -> frozenset[str] | None:
    """The augmented distributions of a contrastive variant; None for other methods."""
    if base_method == "contrastive":
        return frozenset(d for d in distributions.split(",") if d)
    if base_method == "contrastive_da":
        chosen = frozenset(d for d in distributions.split(",") if d)
        return chosen or frozenset(DEFAULT_DISTRIBUTIONS)
    return None


def assign_sets(cells: pd.DataFrame, sets: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Add a ``set`` column naming each contrastive row's distribution set.

    Rows of other methods are dropped; a set not in ``sets`` is named ``"{a,b,...}"``.
    """
    by_content = {frozenset(v): name for name, v in sets.items()}
    names = []
    for base, dist in zip(cells["base_method"], cells["distributions"], strict=True):
        content = _distribution_set(base, dist)
        if content is None:
            names.append(None)
        else:
            names.append(by_content.get(content, "{" + ",".join(sorted(content)) + "}"))
    out = cells.assign(set=names)
    return out[out["set"].notna()].copy()


def paper_set_value(name: str, dataset: str, detector: str) -> tuple[float, float, str] | None:
    """The paper's single-model AUC of a distribution set (see the module table)."""
    if name == "original":
        return _main("contrastive", detector, dataset)
    if name == "rotations":
        return _main("contrastive_da", detector, dataset)
    if dataset != "cifar10":
        return None
    if name == "+hflip":
        value = text_value("auroc", "contrastive_da_hflip")
        return (value, np.nan, "Sec. 5.2 text") if np.isfinite(value) else None
    if name in SUPP_ENSEMBLE_IDS:
        supp = load_published("supp_ensemble")
        rows = supp[
            (supp["method"] == SUPP_ENSEMBLE_IDS[name]) & (supp["detector"] == "single_model")
        ]
        if len(rows):
            source = f"Table {PAPER_TABLE_NUMBERS['supp_ensemble']}"
            return float(rows["mean"].iloc[0]), float(rows["std"].iloc[0]), source
    return None


def _main(method: str, detector: str, dataset: str) -> tuple[float, float, str] | None:
    return published_main().get((method, detector, dataset))


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC per accumulated distribution set (bars), beside the paper's numbers.

    Options: ``detector`` (``"ocsvm"``), ``space`` (``"f"``), ``sets`` (name ->
    distributions, default :data:`ACCUMULATED_SETS`), ``decimals``, ``ddof``. One-class jobs
    of contrastive / contrastive DA only. ``scores`` unused.

    Returns
    -------
    StudyResult
        ``table``: one row per (dataset, set) with the set's ``distributions``.

    Raises
    ------
    ValueError
        On unknown options, when the grid selects nothing, or when two variants of one set
        share a cell.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    detector, space = str(options.get("detector", "ocsvm")), str(options.get("space", "f"))
    sets = {str(k): tuple(v) for k, v in dict(options.get("sets", ACCUMULATED_SETS)).items()}
    cells = join_expected(frame, expected)
    cells = cells[
        (cells["detector"] == detector)
        & (cells["space"] == space)
        & (cells["fitset"] == "train")
        & (cells["contamination"] == 0.0)
    ]
    cells = assign_sets(cells, sets)
    if cells.empty:
        raise ValueError(
            f"{KIND}: the expected grid has no one-class contrastive jobs with detector "
            f"{detector!r}"
        )
    stats = cell_stats(cells, ["dataset", "set"], ddof=ddof)
    content = cells.drop_duplicates("set").set_index("set")
    stats.insert(
        2,
        "distributions",
        stats["set"].map(lambda s: ",".join(sets.get(s, ())) or content.loc[s, "distributions"]),
    )
    table = add_paper(stats, lambda r: paper_set_value(r["set"], r["dataset"], detector))
    order = list(sets) + sorted(set(table["set"]) - set(sets))
    table = sort_table(table, {"dataset": list(DATASET_DISPLAY), "set": order})
    deviations = deviation_rows(
        table,
        lambda r: (
            f"{label('dataset', r['dataset'])}: Contrastive (DA) set {r['set']} / "
            f"{label('detector', detector)}"
        ),
    )
    display = pivot_display(
        table,
        [("dataset", "Dataset", lambda v: label("dataset", v))],
        "set",
        str,
        decimals=decimals,
    )
    notes = common_notes(ddof) + missing_note(table)
    notes.append(
        "sets accumulate from left to right as the paper's Fig. 6 ('original' is vanilla "
        "contrastive, 'rotations' the main table's DA); the paper does not name the detector "
        f"of Fig. 6 / Table 6: compared with our {label('detector', detector)} on {space}"
    )
    return StudyResult(
        kind=KIND,
        table=table,
        figures={"auroc": _figure(table, order, detector)},
        deviations=deviations,
        notes=notes,
        display=display,
        caption="Distribution-augmentation sets, accumulated "
        "(Sec. 5.2, Fig. 6; App. A.2.2, Table 6)",
    )


def _figure(table: pd.DataFrame, order: list[str], detector: str):
    datasets = list(dict.fromkeys(table["dataset"]))
    sets = [s for s in order if s in set(table["set"])]
    colours = palette(sets)
    fig, axes = new_figure(len(datasets), width=max(4.5, 0.75 * len(sets) + 1.5), height=4.2)
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = table[table["dataset"] == dataset].set_index("set").reindex(sets)
        x = np.arange(len(sets))
        has = rows["mean"].notna().to_numpy()
        bars = ax.bar(
            x[has],
            rows["mean"].to_numpy()[has],
            yerr=rows["std"].fillna(0.0).to_numpy()[has],
            color=[colours[s] for s in np.array(sets)[has]],
            capsize=3,
            label="ours (mean ± std)",
            gid="ours",
        )
        hatch_incomplete(bars, rows["n_missing"].to_numpy()[has] > 0)
        plot_paper(ax, x, rows["paper_mean"].to_numpy(dtype=float))
        ax.set_xticks(x, sets, rotation=30, ha="right")
        ax.set_xlabel("distributions added (accumulated left to right)")
        low = np.nanmin(
            np.concatenate([rows["mean"] - rows["std"].fillna(0), rows["paper_mean"], [100.0]])
        )
        ax.set_ylim(max(0.0, 5.0 * np.floor((low - 3.0) / 5.0)), 100.0)
        ax.set_ylabel("ROC AUC (x100)")
        ax.set_title(f"{label('dataset', dataset)}, {label('detector', detector)}")
    handles, labels = axes[0].get_legend_handles_labels()
    if bool((table["n_missing"] > 0).any()):
        from matplotlib.patches import Patch

        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//"))
        labels.append("hatched: results missing")
    fig.legend(handles, labels, fontsize="small", ncols=3, loc="outside lower center")
    fig.suptitle("Contrastive (DA): AUC per distribution set")
    return fig
