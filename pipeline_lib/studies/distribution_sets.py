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

Options: ``detector`` (``"ocsvm"``), ``space`` (``"f"``), ``sets`` (name -> distributions,
default :data:`ACCUMULATED_SETS`), ``decimals``. One-class jobs of contrastive /
contrastive DA only; the table has one row per (dataset, set) with the set's
``distributions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import load_published
from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS, reads_setting
from pipeline_lib.studies.display import DATASET_ROW, label
from pipeline_lib.studies.figures import bar_panel, legend_below, new_figure, ours_bars, palette
from pipeline_lib.studies.paper import PAPER_TABLE_NUMBERS, published_main
from pipeline_lib.studies.spec import ONE_CLASS, PAPER_ORDER, Deviations, Pivot, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = [
    "ACCUMULATED_SETS",
    "SPEC",
    "SUPP_ENSEMBLE_IDS",
    "assign_sets",
    "sets_option",
    "paper_set_value",
]

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
    """The augmented distributions of a contrastive row (a method whose task reads the
    contrastive temperature); None for other methods. A method that reads ``distributions``
    without naming them trains on the default set; plain contrastive learning on none."""
    if not reads_setting(base_method, "temperature"):
        return None
    chosen = frozenset(d for d in distributions.split(",") if d)
    if reads_setting(base_method, "distributions"):
        return chosen or frozenset(DEFAULT_DISTRIBUTIONS)
    return chosen


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


def sets_option(run: Run, cells: pd.DataFrame) -> pd.DataFrame:
    """Read the ``sets`` option (name -> distributions) and name each row's set."""
    run.options["sets"] = sets = {str(k): tuple(v) for k, v in dict(run["sets"]).items()}
    return assign_sets(cells, sets)


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


def _cells(run: Run) -> pd.DataFrame:
    """Cells per (dataset, set), with the set's distributions."""
    sets, cells = run["sets"], run.cells
    stats = cell_stats(cells, ["dataset", "set"], ddof=run.ddof)
    content = cells.drop_duplicates("set").set_index("set")
    stats.insert(
        2,
        "distributions",
        stats["set"].map(lambda s: ",".join(sets.get(s, ())) or content.loc[s, "distributions"]),
    )
    return stats


def _order(run: Run, table: pd.DataFrame) -> list[str]:
    return list(run["sets"]) + sorted(set(table["set"]) - set(run["sets"]))


def _figure(table: pd.DataFrame, order: list[str], detector: str):
    datasets = list(dict.fromkeys(table["dataset"]))
    sets = [s for s in order if s in set(table["set"])]
    colours = palette(sets)
    fig, axes = new_figure(len(datasets), width=max(4.5, 0.75 * len(sets) + 1.5), height=4.2)
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = table[table["dataset"] == dataset].set_index("set").reindex(sets)
        x = np.arange(len(sets))
        colour = [colours[s] for s in sets]
        ours_bars(ax, x, rows, colour=colour, label_text="ours (mean ± std)")
        title = f"{label('dataset', dataset)}, {label('detector', detector)}"
        xlabel = "distributions added (accumulated left to right)"
        bar_panel(ax, x, sets, rows, xlabel=xlabel, title=title)
    legend_below(fig, axes[0], ncols=3, hatched=bool((table["n_missing"] > 0).any()))
    fig.suptitle("Contrastive (DA): AUC per distribution set")
    return fig


SPEC = StudySpec(
    kind="distribution_sets",
    caption="Distribution-augmentation sets, accumulated (Sec. 5.2, Fig. 6; App. A.2.2, Table 6)",
    defaults={"detector": "ocsvm", "space": "f", "sets": ACCUMULATED_SETS},
    select=ONE_CLASS,
    prepare=sets_option,
    empty="{kind}: the expected grid has no one-class contrastive jobs with detector {detector!r}",
    cells=_cells,
    paper=lambda run: lambda r: paper_set_value(r["set"], r["dataset"], run["detector"]),
    orders={"dataset": PAPER_ORDER, "set": _order},
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: Contrastive (DA) set {r['set']} / "
                f"{label('detector', run['detector'])}"
            )
        )
    ],
    display=Pivot([DATASET_ROW], "set", str),
    figures=lambda run, table: {"auroc": _figure(table, _order(run, table), run["detector"])},
    notes=lambda run, table: [
        "sets accumulate from left to right as the paper's Fig. 6 ('original' is vanilla "
        "contrastive, 'rotations' the main table's DA); the paper does not name the detector "
        f"of Fig. 6 / Table 6: compared with our {label('detector', run['detector'])} on "
        f"{run['space']}"
    ],
)
