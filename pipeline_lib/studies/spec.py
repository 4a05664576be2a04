"""One builder for every study: a study is a :class:`StudySpec` (which rows of the joined
results it reads, how its cells are grouped and compared with the paper, how its tables,
figures and notes look) and :func:`build` runs the steps every study shares in one order.

The steps: check the options, join the results to the expected grid
(:func:`~.contract.join_expected`), keep the spec's rows, compute the cells
(:func:`~.stats.cell_stats` over ``by``, or the spec's own ``cells``), attach the paper's
numbers, add study-specific rows, sort, then derive the deviations, the human table, the
figures and the notes from the finished table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pipeline_lib.config.keys import contamination_value
from pipeline_lib.paper.intervals import SEED_STD_DDOF
from pipeline_lib.paper.published import DATASET_DISPLAY, METHOD_DISPLAY
from pipeline_lib.studies.contract import StudyResult, check_options, join_expected
from pipeline_lib.studies.display import pivot_display, sort_table
from pipeline_lib.studies.paper import add_paper, concat_deviations, deviation_rows
from pipeline_lib.studies.stats import cell_stats, common_notes, missing_note

__all__ = [
    "ONE_CLASS",
    "PAPER_ORDER",
    "SORTED",
    "Deviations",
    "Opt",
    "Pivot",
    "Run",
    "StudySpec",
    "build",
]

#: Sort rule: the paper's order of data sets (column ``dataset``) or of methods.
PAPER_ORDER = "paper order"
#: Sort rule: the column's values present in the table, sorted.
SORTED = "sorted"


@dataclass(frozen=True)
class Opt:
    """A selection value read from the study's options (the spec's default when absent); a
    value of None selects every row, a list or tuple any of its values."""

    key: str


#: The one-class jobs (no contamination, detector fit on the training set) of the options'
#: ``detector`` on the options' feature ``space``: a :attr:`StudySpec.select`.
ONE_CLASS: Mapping[str, Any] = {
    "detector": Opt("detector"),
    "space": Opt("space"),
    "fitset": "train",
    "contamination": 0.0,
}


@dataclass
class Run:
    """One build of a study: its options (defaults filled in, cast to the default's type),
    the selected cells and what one step hands to a later one (``state``)."""

    spec: StudySpec
    options: dict[str, Any]
    frame: pd.DataFrame
    expected: pd.DataFrame
    scores: Mapping | None = None
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)
    state: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.options[key]

    @property
    def decimals(self) -> int:
        return int(self.options.get("decimals", 1))

    @property
    def ddof(self) -> int:
        """The std over seeds of every table family (not an option: one rule for all)."""
        return SEED_STD_DDOF


#: ``(run, table) -> value``: a step that reads the finished (or growing) table.
TableStep = Callable[[Run, pd.DataFrame], Any]


@dataclass(frozen=True)
class Pivot:
    """A human table from :func:`~.display.pivot_display`: one row per ``rows`` combination,
    one column per value of ``column``."""

    rows: Sequence[tuple[str, str, Callable[[Any], str]]]
    column: str
    column_label: Callable[[Any], str]

    def __call__(self, run: Run, table: pd.DataFrame) -> pd.DataFrame:
        return pivot_display(
            table, self.rows, self.column, self.column_label, decimals=run.decimals
        )


@dataclass(frozen=True)
class Deviations:
    """Deviation rows of the table rows ``where`` keeps (all when None), each named by
    ``describe(run, row)``, in ``unit``."""

    describe: Callable[[Run, pd.Series], str]
    where: Callable[[pd.DataFrame], pd.Series] | None = None
    unit: str = "AUC"


@dataclass(frozen=True)
class StudySpec:
    """What makes a study: everything :func:`build` needs besides the shared steps.

    Attributes
    ----------
    kind : str
        The study kind (a key of :data:`pipeline_lib.studies.STUDY_KINDS`).
    caption : str
        Caption of the human table.
    defaults : mapping
        Option key -> default, in the order the kind documents them (``decimals`` is
        always read). A given value is cast to its default's type (str, float,
        int, list for tuples); a None default leaves it as given.
    select : mapping
        Column -> the value a selected row holds: a constant, an :class:`Opt`, or a list /
        tuple of allowed values. ``contamination`` is compared as a job path writes it.
    empty : str or callable
        Message of the ValueError raised when nothing is selected: formatted with the
        options (after ``prepare``) and ``kind``, or ``run -> str``.
    prepare : callable, optional
        ``(run, cells) -> cells`` after ``select`` (study-specific row choices, columns).
    fill : mapping
        Column -> option key whose value stands for NaN in that column (a default variant
        parameter), applied after the emptiness check.
    by : sequence of str
        Columns naming a cell (:func:`~.stats.cell_stats`); ignored with ``cells``.
    cells : callable, optional
        ``run -> table`` instead of the cell statistics over ``by``.
    paper : callable, optional
        ``run -> lookup(row)`` of the paper's number (:func:`~.paper.add_paper`); None when
        ``cells`` adds the paper's columns itself.
    extend : callable, optional
        ``(run, table) -> table`` after the paper's columns (rows of derived quantities).
    orders : mapping, optional
        Column -> its sort rule, first column first (:func:`~.display.sort_table`):
        :data:`PAPER_ORDER`, :data:`SORTED`, an :class:`Opt`, a list of values, or
        ``(run, table) -> values``. None keeps the table's order.
    columns : sequence of str, optional
        The final table's columns, in order (None keeps them all).
    deviations : sequence of Deviations
        The deviation rows, concatenated.
    display : callable
        ``(run, table) -> DataFrame`` (e.g. a :class:`Pivot`).
    figures : callable
        ``(run, table) -> {name: Figure}``.
    notes : callable
        ``(run, table) -> list of str`` after the common notes and the missing-results
        note.
    missing : callable, optional
        ``table -> rows`` counted by the missing-results note (all rows when None), and
        ``missing_what`` what they are called.
    """

    kind: str
    caption: str
    defaults: Mapping[str, Any]
    select: Mapping[str, Any]
    empty: str | Callable[[Run], str]
    display: TableStep
    figures: TableStep
    notes: TableStep
    prepare: Callable[[Run, pd.DataFrame], pd.DataFrame] | None = None
    fill: Mapping[str, str] = field(default_factory=dict)
    by: Sequence[str] = ()
    cells: Callable[[Run], pd.DataFrame] | None = None
    paper: Callable[[Run], Callable[[pd.Series], Any]] | None = None
    extend: TableStep | None = None
    orders: Mapping[str, Any] | None = None
    columns: Sequence[str] | None = None
    deviations: Sequence[Deviations] = ()
    missing: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    missing_what: str = "cells"

    @property
    def options(self) -> tuple[str, ...]:
        """Option keys this kind reads (besides ``decimals``)."""
        return tuple(self.defaults)


def _cast(value: Any, default: Any) -> Any:
    if default is None or value is None:
        return value
    if isinstance(default, tuple):
        return list(value)
    if isinstance(default, str | int | float) and not isinstance(default, bool):
        return type(default)(value)
    return value


def _order(run: Run, table: pd.DataFrame, column: str, rule: Any) -> list:
    """The values of ``column`` in the order ``rule`` names (see :attr:`StudySpec.orders`)."""
    if rule == PAPER_ORDER:
        return list(DATASET_DISPLAY if column == "dataset" else METHOD_DISPLAY)
    if rule == SORTED:
        return sorted(table[column].dropna().unique())
    if isinstance(rule, Opt):
        return run.options[rule.key]
    return rule(run, table) if callable(rule) else list(rule)


def _selected(run: Run, cells: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``cells`` the spec's ``select`` keeps."""
    mask = pd.Series(True, index=cells.index)
    for column, wanted in run.spec.select.items():
        value = run.options[wanted.key] if isinstance(wanted, Opt) else wanted
        if value is None:
            continue
        if column == "contamination":
            value = contamination_value(value)
        if isinstance(value, list | tuple):
            mask &= cells[column].isin(list(value))
        else:
            mask &= cells[column] == value
    return cells[mask]


def build(
    spec: StudySpec,
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """Build the study ``spec`` describes from job results and its expected grid.

    Raises
    ------
    ValueError
        On unknown options (:func:`~.contract.check_options`), when the selection keeps no
        expected job (``spec.empty``), or as the spec's steps.
    """
    check_options(options, spec.options, spec.kind)
    resolved = {k: _cast(options.get(k, d), d) for k, d in spec.defaults.items()}
    resolved |= {k: options[k] for k in ("decimals",) if k in options}
    run = Run(spec, resolved, frame, expected, scores)
    cells = _selected(run, join_expected(frame, expected))
    cells = spec.prepare(run, cells) if spec.prepare else cells
    if cells.empty:
        empty = spec.empty
        raise ValueError(
            empty(run) if callable(empty) else empty.format(kind=spec.kind, **run.options)
        )
    cells = cells.copy()
    for column, key in spec.fill.items():
        cells[column] = cells[column].fillna(float(run.options[key]))
    run.cells = cells
    if spec.cells is not None:
        table = spec.cells(run)
    else:
        table = cell_stats(cells, list(spec.by), ddof=run.ddof)
    if spec.paper is not None:
        table = add_paper(table, spec.paper(run))
    if spec.extend is not None:
        table = spec.extend(run, table)
    if spec.orders is not None:
        orders = {col: _order(run, table, col, rule) for col, rule in spec.orders.items()}
        table = sort_table(table, orders)
    if spec.columns is not None:
        table = table[list(spec.columns)]
    deviations = concat_deviations(
        [
            deviation_rows(
                table[part.where(table)] if part.where else table,
                lambda row, part=part: part.describe(run, row),
                unit=part.unit,
            )
            for part in spec.deviations
        ]
    )
    counted = spec.missing(table) if spec.missing else table
    display = spec.display(run, table)
    figures = spec.figures(run, table)
    notes = common_notes(table) + missing_note(counted, spec.missing_what)
    return StudyResult(
        kind=spec.kind,
        table=table,
        figures=figures,
        deviations=deviations,
        notes=notes + spec.notes(run, table),
        display=display,
        caption=spec.caption,
    )
