"""MLP projection-head depth (paper Sec. 5.1 "MLP Projection Head", Fig. 3c).

x = head depth 0..8 (0 = identity head); the AUC of f (solid) and of g(f) (dashed), one
colour per representation. The paper's figure is blank in its LaTeX source; its text says
the AUC of f rises with depth while g(f) falls. The only published numbers are the
main-table AUCs of f at the default depth (:data:`pipeline_lib.registry.MLP_HEAD_DEPTH`).

Options: ``base_methods`` (default: every base method in the grid), ``detector``
(``"ocsvm"``), ``default_head_depth`` (what a NaN ``head_depth`` means: the MLP heads'
default, :data:`pipeline_lib.registry.MLP_HEAD_DEPTH`), ``decimals``.
One-class jobs only (contamination 0, fit set ``train``). The table has one row per
(dataset, base_method, head_depth, space).
"""

from __future__ import annotations

import pandas as pd

from pipeline_lib.registry import MLP_HEAD_DEPTH
from pipeline_lib.studies.display import DATASET_ROW, label, named
from pipeline_lib.studies.figures import (
    SPACE_NAMES,
    finish_whole_number_axis,
    new_figure,
    palette,
    space_lines,
)
from pipeline_lib.studies.paper import default_cells, published_main
from pipeline_lib.studies.spec import PAPER_ORDER, SORTED, Deviations, Opt, Pivot, Run, StudySpec

__all__ = ["SPEC"]

_BY = ["dataset", "base_method", "head_depth", "space"]


def _lookup(run: Run):
    """The main table's AUC of f at the default depth, for cells of default variants."""
    default_depth = float(run["default_head_depth"])
    defaults = default_cells(run.cells, _BY, "head_depth")
    published = published_main()

    def lookup(row: pd.Series):
        if row["space"] != "f" or row["head_depth"] != default_depth:
            return None
        if not defaults.get(tuple(row[c] for c in _BY), False):
            return None
        return published.get((row["base_method"], run["detector"], row["dataset"]))

    return lookup


def _figure(table: pd.DataFrame, dataset: str, detector: str):
    colours = palette(list(dict.fromkeys(table["base_method"])))
    fig, (ax,) = new_figure(1, width=6.0, height=4.2)
    space_lines(
        ax, lambda s: table[table["space"] == s], x_col="head_depth", colours=colours, dodge=0.08
    )
    finish_whole_number_axis(
        fig,
        ax,
        table,
        ticks=table["head_depth"],
        xlabel="MLP head depth (hidden layers; 0 = identity)",
        title=f"{label('dataset', dataset)}: AUC vs. head depth, {label('detector', detector)}",
        ncols=2,
    )
    return fig


SPEC = StudySpec(
    kind="head_depth",
    caption="MLP projection-head depth: AUC of f and of g(f) (Sec. 5.1, Fig. 3c)",
    defaults={
        "base_methods": None,
        "detector": "ocsvm",
        "default_head_depth": float(MLP_HEAD_DEPTH),
    },
    select={
        "detector": Opt("detector"),
        "fitset": "train",
        "contamination": 0.0,
        "space": ["f", "g"],
        "base_method": Opt("base_methods"),
    },
    empty="{kind}: the expected grid has no one-class jobs with detector {detector!r}",
    fill={"head_depth": "default_head_depth"},
    by=_BY,
    paper=_lookup,
    orders={
        "dataset": PAPER_ORDER,
        "base_method": PAPER_ORDER,
        "space": ["f", "g"],
        "head_depth": SORTED,
    },
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: {label('method', r['base_method'])} / "
                f"{label('detector', run['detector'])}, AUC of f at head depth "
                f"{int(r['head_depth'])}"
            )
        )
    ],
    display=Pivot(
        [
            DATASET_ROW,
            named("base_method", "Representation", "method"),
            ("space", "Features", lambda v: SPACE_NAMES.get(v, v)),
        ],
        "head_depth",
        lambda d: f"depth {int(d)}",
    ),
    figures=lambda run, table: {
        str(d): _figure(g, d, run["detector"]) for d, g in table.groupby("dataset", sort=False)
    },
    notes=lambda run, table: [
        f"{label('detector', run['detector'])} on f (solid) and on g(f) (dashed); a NaN head "
        f"depth is the default {int(run['default_head_depth'])}; the paper's Fig. 3c is blank "
        "in its source, so only the default depth has a published number (the main table)"
    ],
)
